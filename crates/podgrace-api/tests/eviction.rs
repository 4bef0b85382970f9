//! The `pods/eviction` subresource in-process: budgets consulted as upstream's `EvictionREST`
//! does, the 429 body recorded on a real 1.32 cluster (`shared/cases/real-cluster-1.32.md` f),
//! the `DisruptionTarget` condition written before the deletion, `disruptedPods` recorded in
//! the budget, and the error bodies for bad requests.

use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use podgrace_api::{http::router, Api, ApiConfig};
use serde_json::{json, Value};
use tower::ServiceExt;

fn api() -> axum::Router {
    router(Api::new(ApiConfig {
        history: 1000,
        bookmark_interval: Duration::from_secs(60),
        ..ApiConfig::default()
    }))
}

/// A response: code, raw body, `Retry-After`.
async fn call(
    r: &axum::Router,
    method: &str,
    path: &str,
    body: String,
) -> (u16, String, Option<String>) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let resp = r.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let ra = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&bytes).into_owned(), ra)
}

async fn json_call(r: &axum::Router, method: &str, path: &str, body: Value) -> (u16, Value) {
    let (c, b, _) = call(r, method, path, body.to_string()).await;
    (c, serde_json::from_str(&b).unwrap_or(Value::String(b)))
}

const PODS: &str = "/api/v1/namespaces/default/pods";
const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

/// A Running, Ready pod of app=web (TGPS 10), its status written as a kubelet would.
async fn running_pod(r: &axum::Router, name: &str) {
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"terminationGracePeriodSeconds": 10, "containers": [{"name": "app", "image": "busybox:1.36"}]}});
    let (c, mut v) = json_call(r, "POST", PODS, p).await;
    assert_eq!(c, 201, "{v}");
    v["status"]["phase"] = json!("Running");
    v["status"]["conditions"] = json!([
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}
    ]);
    let (c, v) = json_call(r, "PUT", &format!("{PODS}/{name}/status"), v).await;
    assert_eq!(c, 200, "{v}");
}

/// A budget over app=web with `minAvailable`, its status written as the disruption
/// controller would (`observedGeneration` = generation).
async fn budget(r: &axum::Router, min_available: i32, healthy: i32, allowed: i32) {
    let (c, mut v) = json_call(
        r,
        "POST",
        PDBS,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web-pdb"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    assert_eq!(c, 201, "{v}");
    v["status"] = json!({"observedGeneration": 1, "currentHealthy": healthy, "desiredHealthy": min_available,
        "disruptionsAllowed": allowed, "expectedPods": 2});
    let (c, v) = json_call(r, "PUT", &format!("{PDBS}/web-pdb/status"), v).await;
    assert_eq!(c, 200, "{v}");
}

fn eviction(name: &str, delete_options: Option<Value>) -> String {
    let mut e = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}});
    if let Some(d) = delete_options {
        e["deleteOptions"] = d;
    }
    e.to_string()
}

#[tokio::test]
async fn a_budget_that_allows_nothing_refuses_with_the_recorded_429() {
    let r = api();
    running_pod(&r, "web-a").await;
    running_pod(&r, "web-b").await;
    budget(&r, 2, 2, 0).await;
    let (code, body, retry_after) = call(
        &r,
        "POST",
        &format!("{PODS}/web-a/eviction"),
        eviction("web-a", None),
    )
    .await;
    assert_eq!(code, 429);
    assert_eq!(retry_after, None, "the recorded 429 carries no Retry-After");
    assert_eq!(
        body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}]},"code":429}"#
    );
    let (_, pod) = json_call(&r, "GET", &format!("{PODS}/web-a"), Value::Null).await;
    assert!(
        pod["metadata"]["deletionTimestamp"].is_null(),
        "a refused eviction deletes nothing"
    );
}

#[tokio::test]
async fn an_allowed_eviction_records_the_pod_sets_the_condition_then_deletes_with_tgps() {
    let r = api();
    running_pod(&r, "web-a").await;
    running_pod(&r, "web-b").await;
    budget(&r, 1, 2, 1).await;
    let (_, list) = json_call(&r, "GET", PODS, Value::Null).await;
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, body, _) = call(
        &r,
        "POST",
        &format!("{PODS}/web-a/eviction"),
        eviction("web-a", None),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}"#
    );

    // The budget: one disruption fewer, the pod in disruptedPods, DisruptionAllowed False.
    let (_, pdb) = json_call(&r, "GET", &format!("{PDBS}/web-pdb"), Value::Null).await;
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
    assert!(pdb["status"]["disruptedPods"]["web-a"].is_string(), "{pdb}");
    let cond = &pdb["status"]["conditions"][0];
    assert_eq!(
        (
            cond["type"].as_str(),
            cond["status"].as_str(),
            cond["reason"].as_str()
        ),
        (
            Some("DisruptionAllowed"),
            Some("False"),
            Some("InsufficientPods")
        )
    );

    // The pod: the condition in one MODIFIED, then the deletionTimestamp (grace = TGPS 10).
    let (_, watch) = {
        let (c, b, _) = call(&r, "GET", &format!("{PODS}?watch=1&resourceVersion={from}&fieldSelector=metadata.name%3Dweb-a&timeoutSeconds=1"), String::new()).await;
        (c, b)
    };
    let events: Vec<Value> = watch
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let modified: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "MODIFIED")
        .map(|e| &e["object"])
        .collect();
    assert_eq!(modified.len(), 2, "{watch}");
    let target = modified[0]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .expect("DisruptionTarget condition")
        .clone();
    assert_eq!(target["status"], "True");
    assert_eq!(target["reason"], "EvictionByEvictionAPI");
    assert_eq!(target["message"], "Eviction API: evicting");
    assert!(modified[0]["metadata"]["deletionTimestamp"].is_null());
    assert_eq!(modified[1]["metadata"]["deletionGracePeriodSeconds"], 10);

    // The other pod: now refused, with the recorded cause.
    let (code, body, _) = call(
        &r,
        "POST",
        &format!("{PODS}/web-b/eviction"),
        eviction("web-b", None),
    )
    .await;
    assert_eq!(code, 429);
    // The controller has not recounted yet (currentHealthy still 2 > desired 1), so the
    // cause is the generic one upstream gives for a budget at zero.
    assert!(
        body.contains(
            r#""message":"The disruption budget web-pdb does not allow evicting pods currently""#
        ),
        "{body}"
    );
}

#[tokio::test]
async fn without_a_budget_the_eviction_deletes_with_its_options_and_bad_requests_are_worded() {
    let r = api();
    running_pod(&r, "solo").await;
    let (code, body, _) = call(
        &r,
        "POST",
        &format!("{PODS}/solo/eviction"),
        eviction("solo", Some(json!({"gracePeriodSeconds": 1}))),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (_, pod) = json_call(&r, "GET", &format!("{PODS}/solo"), Value::Null).await;
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 1);

    let (code, body, _) = call(
        &r,
        "POST",
        &format!("{PODS}/nosuchpod/eviction"),
        eviction("nosuchpod", None),
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(
        body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"nosuchpod\" not found","reason":"NotFound","details":{"name":"nosuchpod","kind":"pods"},"code":404}"#
    );

    running_pod(&r, "other").await;
    let (code, v) = json_call(
        &r,
        "POST",
        &format!("{PODS}/other/eviction"),
        serde_json::from_str(&eviction("solo", None)).unwrap(),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        v["message"],
        "name in URL does not match name in Eviction object"
    );
    assert_eq!(v["reason"], "BadRequest");
    let (code, body, _) = call(&r, "POST", &format!("{PODS}/other/eviction"), String::new()).await;
    assert_eq!(code, 400);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["message"], "the object provided is unrecognized (must be of type Eviction): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)");
}

#[tokio::test]
async fn a_pending_pod_is_evicted_without_consulting_the_budget_and_an_unobserved_budget_says_so() {
    let r = api();
    // Pending (no status written): canIgnorePDB.
    let (c, _) = json_call(&r, "POST", PODS, json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pending", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}})).await;
    assert_eq!(c, 201);
    budget(&r, 5, 0, 0).await;
    let (code, body, _) = call(
        &r,
        "POST",
        &format!("{PODS}/pending/eviction"),
        eviction("pending", None),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    // A budget whose generation the controller has not observed: 429, retry after 10 s.
    running_pod(&r, "web-a").await;
    let (_, mut pdb) = json_call(&r, "GET", &format!("{PDBS}/web-pdb"), Value::Null).await;
    pdb["spec"]["minAvailable"] = json!(1);
    let (c, v) = json_call(&r, "PUT", &format!("{PDBS}/web-pdb"), pdb).await;
    assert_eq!(c, 200, "{v}");
    assert_eq!(v["metadata"]["generation"], 2);
    let (code, body, retry_after) = call(
        &r,
        "POST",
        &format!("{PODS}/web-a/eviction"),
        eviction("web-a", None),
    )
    .await;
    assert_eq!(code, 429);
    assert_eq!(retry_after.as_deref(), Some("10"));
    assert!(
        body.contains("The disruption budget web-pdb is still being processed by the server."),
        "{body}"
    );
}
