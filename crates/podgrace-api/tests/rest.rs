//! The REST layer in-process (the router as a tower service, as an embedded serve is used):
//! verbs, Status bodies, selectors, paging, watch semantics (initial events, resourceVersion,
//! bookmarks, 410 after compaction, timeouts), pod delete semantics, bad input.

use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use podgrace_api::{http::router, Api, ApiConfig};
use serde_json::{json, Value};
use tower::ServiceExt;

fn api(history: usize) -> (Api, axum::Router) {
    let api = Api::new(ApiConfig {
        history,
        bookmark_interval: Duration::from_millis(200),
        ..ApiConfig::default()
    });
    let r = router(api.clone());
    (api, r)
}

async fn call(
    r: &axum::Router,
    method: &str,
    path: &str,
    ct: &str,
    body: impl Into<Body>,
) -> (u16, Value, Vec<String>) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(body.into())
        .unwrap();
    let resp = r.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, v, warnings)
}

async fn post(r: &axum::Router, path: &str, body: Value) -> (u16, Value) {
    let (c, v, _) = call(r, "POST", path, "application/json", body.to_string()).await;
    (c, v)
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"terminationGracePeriodSeconds": 10, "containers": [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "100"]}]}})
}

/// A watch stream: lines read one at a time, with a deadline.
struct Stream(
    http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, axum::Error>,
    String,
);

impl Stream {
    async fn open(r: &axum::Router, path: &str) -> Stream {
        let req = http::Request::builder()
            .uri(path)
            .body(Body::empty())
            .unwrap();
        let resp = r.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        Stream(resp.into_body().into_data_stream_box(), String::new())
    }
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.1.find('\n') {
                let line: String = self.1.drain(..=i).collect();
                return Some(serde_json::from_str(&line).unwrap());
            }
            match tokio::time::timeout(Duration::from_secs(5), self.0.frame()).await {
                Ok(Some(Ok(f))) => {
                    if let Ok(d) = f.into_data() {
                        self.1.push_str(std::str::from_utf8(&d).unwrap());
                    }
                }
                Ok(_) => return None,
                Err(_) => panic!("no watch event within 5 s"),
            }
        }
    }
}

trait BoxIt {
    fn into_data_stream_box(
        self,
    ) -> http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, axum::Error>;
}
impl BoxIt for Body {
    fn into_data_stream_box(
        self,
    ) -> http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, axum::Error> {
        self.boxed_unsync()
    }
}

fn rv(v: &Value) -> u64 {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn create_get_list_conflict_and_not_found_are_worded_as_kube_apiserver() {
    let (_, r) = api(100);
    let (c, p) = post(
        &r,
        "/api/v1/namespaces/default/pods",
        pod("web", json!({"app": "web"})),
    )
    .await;
    assert_eq!(c, 201, "{p}");
    assert_eq!(p["status"]["phase"], "Pending");
    let (c, e) = post(&r, "/api/v1/namespaces/default/pods", pod("web", json!({}))).await;
    assert_eq!(c, 409);
    assert_eq!(e["message"], "pods \"web\" already exists");
    assert_eq!(e["reason"], "AlreadyExists");
    let (c, e, _) = call(&r, "GET", "/api/v1/namespaces/default/pods/nope", "", "").await;
    assert_eq!(
        (c, e["message"].as_str().unwrap()),
        (404, "pods \"nope\" not found")
    );
    // A stale resourceVersion on update is a Conflict.
    let mut stale = p.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["metadata"]["labels"] = json!({"app": "x"});
    let (c, e, _) = call(
        &r,
        "PUT",
        "/api/v1/namespaces/default/pods/web",
        "application/json",
        stale.to_string(),
    )
    .await;
    assert_eq!(c, 409);
    assert_eq!(e["message"], "Operation cannot be fulfilled on pods \"web\": the object has been modified; please apply your changes to the latest version and try again");
    // No namespace, no content.
    let (c, e) = post(&r, "/api/v1/namespaces/nowhere/pods", pod("a", json!({}))).await;
    assert_eq!(
        (c, e["message"].as_str().unwrap()),
        (404, "namespaces \"nowhere\" not found")
    );
    // Unknown resource and kind mismatch.
    let (c, e, _) = call(&r, "GET", "/api/v1/widgets", "", "").await;
    assert_eq!(
        (c, e["message"].as_str().unwrap()),
        (404, "the server could not find the requested resource")
    );
    let (c, e) = post(
        &r,
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(c, 400);
    assert_eq!(
        e["message"],
        "the kind in the data (Service) does not match the expected kind (Pod)"
    );
}

#[tokio::test]
async fn bad_bodies_are_400_422_413_and_the_server_keeps_serving() {
    let (_, r) = api(100);
    let (c, e, _) = call(
        &r,
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        "{\"metadata\": ",
    )
    .await;
    assert_eq!(c, 400);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("couldn't get version/kind; json parse error: "),
        "{e}"
    );
    let big = format!(
        "{{\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"k\":\"{}\"}}}}",
        "x".repeat(3 * 1024 * 1024)
    );
    let (c, e, _) = call(
        &r,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        big,
    )
    .await;
    assert_eq!(c, 413);
    assert_eq!(e["message"], "Request entity too large: limit is 3145728");
    let mut bad = pod("g-two-handlers", json!({}));
    bad["spec"]["containers"][0]["lifecycle"] =
        json!({"preStop": {"sleep": {"seconds": 1}, "exec": {"command": ["true"]}}});
    let (c, e) = post(&r, "/api/v1/namespaces/default/pods", bad).await;
    assert_eq!(c, 422, "{e}");
    assert_eq!(e["reason"], "Invalid");
    assert_eq!(e["details"]["kind"], "Pod");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("Pod \"g-two-handlers\" is invalid: spec.containers[0].lifecycle.preStop"),
        "{e}"
    );
    let mut name = pod("Web_1", json!({}));
    name["metadata"]["name"] = json!("Web_1");
    let (c, e) = post(&r, "/api/v1/namespaces/default/pods", name).await;
    assert_eq!(c, 422);
    assert_eq!(e["details"]["causes"][0]["field"], "metadata.name");
    // Unknown fields: Strict is 400, Warn a Warning header, Ignore silent.
    let mut unknown = pod("u", json!({}));
    unknown["spec"]["terminationGracePeriod"] = json!(3);
    let (c, e, _) = call(
        &r,
        "POST",
        "/api/v1/namespaces/default/pods?fieldValidation=Strict",
        "application/json",
        unknown.to_string(),
    )
    .await;
    assert_eq!(c, 400);
    assert_eq!(e["message"], "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.terminationGracePeriod\"");
    let (c, _, w) = call(
        &r,
        "POST",
        "/api/v1/namespaces/default/pods?fieldValidation=Warn",
        "application/json",
        unknown.to_string(),
    )
    .await;
    assert_eq!(c, 201);
    assert_eq!(
        w,
        ["299 - \"unknown field \\\"spec.terminationGracePeriod\\\"\""]
    );
    let (c, _, _) = call(&r, "GET", "/api/v1/namespaces/default/pods/u", "", "").await;
    assert_eq!(c, 200);
}

#[tokio::test]
async fn selectors_and_pages_with_continue_tokens() {
    let (_, r) = api(100);
    for i in 0..5 {
        let app = if i % 2 == 0 { "web" } else { "db" };
        post(
            &r,
            "/api/v1/namespaces/default/pods",
            pod(&format!("p{i}"), json!({"app": app})),
        )
        .await;
    }
    let (_, l, _) = call(
        &r,
        "GET",
        "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb",
        "",
        "",
    )
    .await;
    let names: Vec<&str> = l["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["p0", "p2", "p4"]);
    let (_, l, _) = call(
        &r,
        "GET",
        "/api/v1/pods?fieldSelector=metadata.name%3Dp3",
        "",
        "",
    )
    .await;
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    let (c, e, _) = call(
        &r,
        "GET",
        "/api/v1/pods?fieldSelector=spec.bogus%3D1",
        "",
        "",
    )
    .await;
    assert_eq!(
        (c, e["message"].as_str().unwrap()),
        (400, "field label not supported: spec.bogus")
    );
    let (_, first, _) = call(&r, "GET", "/api/v1/namespaces/default/pods?limit=2", "", "").await;
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    // Writes after the first page do not show in the rest of a consistent list.
    post(&r, "/api/v1/namespaces/default/pods", pod("p9", json!({}))).await;
    let mut seen: Vec<String> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let mut cont = Some(token);
    while let Some(t) = cont {
        let (c, page, _) = call(
            &r,
            "GET",
            &format!("/api/v1/namespaces/default/pods?limit=2&continue={t}"),
            "",
            "",
        )
        .await;
        assert_eq!(c, 200, "{page}");
        assert_eq!(
            page["metadata"]["resourceVersion"],
            first["metadata"]["resourceVersion"]
        );
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["metadata"]["name"].as_str().unwrap().to_string()),
        );
        cont = page["metadata"]["continue"].as_str().map(str::to_string);
    }
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4"]);
}

#[tokio::test]
async fn patches_merge_label_and_strategic() {
    let (_, r) = api(100);
    let mut p = pod("web", json!({"app": "web"}));
    p["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "side", "image": "envoy:1", "command": ["sleep", "1"]}));
    post(&r, "/api/v1/namespaces/default/pods", p).await;
    let smp = json!({"metadata": {"labels": {"tier": "front"}}, "spec": {"containers": [{"name": "side", "image": "envoy:2"}]}});
    let (c, out, _) = call(
        &r,
        "PATCH",
        "/api/v1/namespaces/default/pods/web",
        "application/strategic-merge-patch+json",
        smp.to_string(),
    )
    .await;
    assert_eq!(c, 200, "{out}");
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "web", "tier": "front"})
    );
    assert_eq!(out["spec"]["containers"][0]["image"], "busybox:1.36");
    assert_eq!(out["spec"]["containers"][1]["image"], "envoy:2");
    let (c, out, _) = call(
        &r,
        "PATCH",
        "/api/v1/namespaces/default/pods/web",
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"app": null}}}).to_string(),
    )
    .await;
    assert_eq!(c, 200);
    assert_eq!(out["metadata"]["labels"], json!({"tier": "front"}));
    let (c, out, _) = call(
        &r,
        "PATCH",
        "/api/v1/namespaces/default/pods/web",
        "application/json-patch+json",
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]).to_string(),
    )
    .await;
    assert_eq!(c, 200);
    assert_eq!(out["metadata"]["annotations"], json!({"a": "b"}));
    // A pod's spec may change only where upstream allows it.
    let (c, e, _) = call(
        &r,
        "PATCH",
        "/api/v1/namespaces/default/pods/web",
        "application/merge-patch+json",
        json!({"spec": {"terminationGracePeriodSeconds": 99}}).to_string(),
    )
    .await;
    assert_eq!(c, 422);
    assert!(e["message"].as_str().unwrap().starts_with(
        "Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than"
    ));
    let (c, _, _) = call(
        &r,
        "PATCH",
        "/api/v1/namespaces/default/pods/web",
        "application/apply-patch+yaml",
        "{}",
    )
    .await;
    assert_eq!(c, 415);
}

#[tokio::test]
async fn pod_delete_follows_before_delete_and_the_kubelets_final_delete() {
    let (_, r) = api(100);
    post(&r, "/api/v1/namespaces/default/pods", pod("web", json!({}))).await;
    let mut w = Stream::open(
        &r,
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion=0",
    )
    .await;
    assert_eq!(w.next().await.unwrap()["type"], "ADDED");
    let del = |g: i64| {
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": g}).to_string()
    };
    let (c, d, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods/web",
        "application/json",
        del(5),
    )
    .await;
    assert_eq!(c, 200);
    assert_eq!(d["metadata"]["deletionGracePeriodSeconds"], 5);
    let ev = w.next().await.unwrap();
    assert_eq!(
        (
            ev["type"].as_str(),
            ev["object"]["metadata"]["deletionGracePeriodSeconds"].as_i64()
        ),
        (Some("MODIFIED"), Some(5))
    );
    // A longer second delete changes nothing; a shorter one shortens.
    let (_, d2, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods/web",
        "application/json",
        del(30),
    )
    .await;
    assert_eq!(d2["metadata"]["deletionGracePeriodSeconds"], 5);
    let (_, d3, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods/web",
        "application/json",
        del(3),
    )
    .await;
    assert_eq!(d3["metadata"]["deletionGracePeriodSeconds"], 3);
    assert_eq!(
        w.next().await.unwrap()["object"]["metadata"]["deletionGracePeriodSeconds"],
        3
    );
    // The kubelet's final delete with grace 0: one MODIFIED (DGPS 0) then DELETED.
    let (c, s, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods/web",
        "application/json",
        del(0),
    )
    .await;
    assert_eq!(c, 200);
    assert_eq!(
        (s["kind"].as_str(), s["status"].as_str()),
        (Some("Status"), Some("Success"))
    );
    let m = w.next().await.unwrap();
    assert_eq!(
        (
            m["type"].as_str(),
            m["object"]["metadata"]["deletionGracePeriodSeconds"].as_i64()
        ),
        (Some("MODIFIED"), Some(0))
    );
    assert_eq!(w.next().await.unwrap()["type"], "DELETED");
    // A pod whose TGPS is 0 is deleted at once by a plain delete; so is a finished one.
    let mut zero = pod("zero", json!({}));
    zero["spec"]["terminationGracePeriodSeconds"] = json!(0);
    post(&r, "/api/v1/namespaces/default/pods", zero).await;
    let (_, s, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods/zero",
        "application/json",
        "",
    )
    .await;
    assert_eq!(s["status"], "Success");
    // Finalizers keep the object.
    let mut fin = pod("fin", json!({}));
    fin["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&r, "/api/v1/namespaces/default/pods", fin).await;
    let (_, k, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods/fin",
        "application/json",
        del(0),
    )
    .await;
    assert_eq!(k["metadata"]["deletionGracePeriodSeconds"], 0);
    let (c, _, _) = call(&r, "GET", "/api/v1/namespaces/default/pods/fin", "", "").await;
    assert_eq!(c, 200);
    let (c, gone, _) = call(
        &r,
        "PATCH",
        "/api/v1/namespaces/default/pods/fin",
        "application/merge-patch+json",
        json!({"metadata": {"finalizers": null}}).to_string(),
    )
    .await;
    assert_eq!(c, 200, "{gone}");
    let (c, _, _) = call(&r, "GET", "/api/v1/namespaces/default/pods/fin", "", "").await;
    assert_eq!(c, 404);
}

#[tokio::test]
async fn watches_start_from_state_or_version_and_expire_with_410() {
    let (api, r) = api(3);
    let (_, a) = post(
        &r,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "a"}}),
    )
    .await;
    let mut w = Stream::open(
        &r,
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}",
            rv(&a)
        ),
    )
    .await;
    post(
        &r,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "b"}}),
    )
    .await;
    let e = w.next().await.unwrap();
    assert_eq!(
        (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()),
        (Some("ADDED"), Some("b"))
    );
    // Past the history (3 events kept): 410 as an ERROR event, then the end of the stream.
    for i in 0..5 {
        post(
            &r,
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": format!("c{i}")}}),
        )
        .await;
    }
    let mut old = Stream::open(
        &r,
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}",
            rv(&a)
        ),
    )
    .await;
    let e = old.next().await.unwrap();
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    assert!(
        e["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("too old resource version: {} (", rv(&a))),
        "{e}"
    );
    assert!(old.next().await.is_none());
    // An exact list at the old version is 410 too; the client relists and watches on.
    let (c, _, _) = call(
        &r,
        "GET",
        &format!(
            "/api/v1/namespaces/default/configmaps?resourceVersion={}&resourceVersionMatch=Exact",
            rv(&a)
        ),
        "",
        "",
    )
    .await;
    assert_eq!(c, 410);
    let (_, list, _) = call(&r, "GET", "/api/v1/namespaces/default/configmaps", "", "").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 7);
    assert_eq!(
        api.with_store(|s| s.current_rv()),
        rv(&json!({"metadata": list["metadata"]}))
    );
}

#[tokio::test]
async fn bookmarks_initial_events_end_and_timeouts() {
    let (_, r) = api(100);
    post(
        &r,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "a"}}),
    )
    .await;
    let mut w = Stream::open(&r, "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=&allowWatchBookmarks=true").await;
    assert_eq!(w.next().await.unwrap()["type"], "ADDED");
    let b = w.next().await.unwrap();
    assert_eq!(b["type"], "BOOKMARK");
    assert_eq!(
        b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // The periodic bookmark (200 ms in these tests) carries the newest resourceVersion.
    let (_, other) = post(
        &r,
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "s"}}),
    )
    .await;
    let b = w.next().await.unwrap();
    assert_eq!(b["type"], "BOOKMARK");
    assert!(rv(&b["object"]) >= rv(&other), "{b}");
    // timeoutSeconds ends the stream.
    let mut t = Stream::open(
        &r,
        "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&resourceVersion=1",
    )
    .await;
    let started = std::time::Instant::now();
    while t.next().await.is_some() {}
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[tokio::test]
async fn selector_watches_see_objects_leave_as_deleted_and_tables_for_kubectl_get_w() {
    let (_, r) = api(100);
    post(
        &r,
        "/api/v1/namespaces/default/pods",
        pod("web", json!({"app": "web"})),
    )
    .await;
    let mut w = Stream::open(
        &r,
        "/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dweb",
    )
    .await;
    assert_eq!(w.next().await.unwrap()["type"], "ADDED");
    call(
        &r,
        "PATCH",
        "/api/v1/namespaces/default/pods/web",
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"app": "other"}}}).to_string(),
    )
    .await;
    let e = w.next().await.unwrap();
    assert_eq!(e["type"], "DELETED");
    assert_eq!(e["object"]["metadata"]["labels"]["app"], "web");
    let req = http::Request::builder()
        .uri("/api/v1/namespaces/default/pods?watch=1")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Body::empty())
        .unwrap();
    let resp = r.clone().oneshot(req).await.unwrap();
    let mut t = Stream(resp.into_body().boxed_unsync(), String::new());
    let first = t.next().await.unwrap();
    assert_eq!(first["object"]["kind"], "Table");
    let cols: Vec<&str> = first["object"]["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols[..5], ["Name", "Ready", "Status", "Restarts", "Age"]);
    assert_eq!(first["object"]["rows"][0]["cells"][2], "Pending");
    call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods/web",
        "application/json",
        json!({"gracePeriodSeconds": 5}).to_string(),
    )
    .await;
    let second = t.next().await.unwrap();
    assert!(second["object"]["columnDefinitions"].is_null());
    assert_eq!(second["object"]["rows"][0]["cells"][2], "Terminating");
}

#[tokio::test]
async fn events_are_served_in_both_api_versions() {
    let (_, r) = api(100);
    let ev = json!({"metadata": {"name": "web.1"}, "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": "Killing", "message": "Stopping container app", "type": "Normal", "source": {"component": "kubelet", "host": "node"}, "count": 1});
    let (c, _) = post(&r, "/api/v1/namespaces/default/events", ev).await;
    assert_eq!(c, 201);
    let (_, v1, _) = call(
        &r,
        "GET",
        "/apis/events.k8s.io/v1/namespaces/default/events/web.1",
        "",
        "",
    )
    .await;
    assert_eq!(v1["note"], "Stopping container app");
    assert_eq!(v1["regarding"]["name"], "web");
    assert_eq!(v1["deprecatedSource"]["component"], "kubelet");
    let (_, l, _) = call(
        &r,
        "GET",
        "/api/v1/events?fieldSelector=involvedObject.name%3Dweb,reason%3DKilling",
        "",
        "",
    )
    .await;
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    let (c, _) = post(&r, "/apis/events.k8s.io/v1/namespaces/default/events", json!({"metadata": {"name": "e2"}, "eventTime": "2026-12-01T10:00:00.000000Z",
        "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-node", "action": "Binding", "reason": "Scheduled",
        "regarding": {"kind": "Pod", "name": "web", "namespace": "default"}, "note": "Successfully assigned default/web to node", "type": "Normal"})).await;
    assert_eq!(c, 201);
    let (_, core, _) = call(&r, "GET", "/api/v1/namespaces/default/events/e2", "", "").await;
    assert_eq!(core["involvedObject"]["name"], "web");
    assert_eq!(core["message"], "Successfully assigned default/web to node");
}

/// kube-rs over the router as a tower service, with no listener: the drill's embedded serve
/// and a real cluster take the same client code.
#[tokio::test]
async fn kube_rs_talks_to_the_embedded_server_in_process() {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::{Api as KApi, DeleteParams, ListParams, PostParams};
    let (_, r) = api(100);
    let svc = tower::ServiceBuilder::new()
        .map_request(|req: http::Request<kube::client::Body>| req.map(Body::new))
        .service(r);
    let client = kube::Client::new(svc, "default");
    let pods: KApi<Pod> = KApi::default_namespaced(client.clone());
    let p: Pod = serde_json::from_value(pod("web", json!({"app": "web"}))).unwrap();
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    assert_eq!(
        created.spec.as_ref().unwrap().node_name.as_deref(),
        Some("podgrace")
    );
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let deleted = pods
        .delete("web", &DeleteParams::default().grace_period(5))
        .await
        .unwrap();
    let still = deleted.left().expect("a graceful delete returns the pod");
    assert_eq!(still.metadata.deletion_grace_period_seconds, Some(5));
    let cms: KApi<ConfigMap> = KApi::default_namespaced(client);
    let err = cms.get("missing").await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.message, "configmaps \"missing\" not found");
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn logs_are_read_from_the_kubelets_cri_files() {
    let dir = std::env::temp_dir().join(format!("podgrace-logs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let api = Api::new(ApiConfig {
        log_dir: Some(dir.clone()),
        ..ApiConfig::default()
    });
    let r = router(api.clone());
    let (_, p) = post(&r, "/api/v1/namespaces/default/pods", pod("web", json!({}))).await;
    let (c, e, _) = call(&r, "GET", "/api/v1/namespaces/default/pods/web/log", "", "").await;
    assert_eq!(
        (c, e["message"].as_str().unwrap()),
        (
            400,
            "container \"app\" in pod \"web\" is waiting to start: ContainerCreating"
        )
    );
    // The kubelet's status: the container runs its second instance (one restart).
    let mut st = p.clone();
    st["status"]["containerStatuses"] = json!([{"name": "app", "ready": true, "restartCount": 1, "image": "busybox:1.36", "imageID": "", "started": true,
        "state": {"running": {"startedAt": "2026-12-01T10:00:05Z"}}, "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]);
    let (c, _, _) = call(
        &r,
        "PUT",
        "/api/v1/namespaces/default/pods/web/status",
        "application/json",
        st.to_string(),
    )
    .await;
    assert_eq!(c, 200);
    let uid = p["metadata"]["uid"].as_str().unwrap();
    let cdir = dir.join(format!("default_web_{uid}")).join("app");
    std::fs::create_dir_all(&cdir).unwrap();
    std::fs::write(
        cdir.join("0.log"),
        "2026-12-01T10:00:00.000000001Z stdout F first run\n",
    )
    .unwrap();
    std::fs::write(cdir.join("1.log"), "2026-12-01T10:00:05.1Z stdout F one\n2026-12-01T10:00:05.2Z stderr P tw\n2026-12-01T10:00:05.3Z stderr F o\n2026-12-01T10:00:05.4Z stdout F three\n").unwrap();
    let (_, body, _) = call(&r, "GET", "/api/v1/namespaces/default/pods/web/log", "", "").await;
    assert_eq!(body, json!("one\ntwo\nthree\n"));
    let (_, body, _) = call(
        &r,
        "GET",
        "/api/v1/namespaces/default/pods/web/log?tailLines=1&timestamps=true",
        "",
        "",
    )
    .await;
    assert_eq!(body, json!("2026-12-01T10:00:05.4Z three\n"));
    let (_, body, _) = call(
        &r,
        "GET",
        "/api/v1/namespaces/default/pods/web/log?previous=true",
        "",
        "",
    )
    .await;
    assert_eq!(body, json!("first run\n"));
    let (c, e, _) = call(
        &r,
        "GET",
        "/api/v1/namespaces/default/pods/web/log?container=nope",
        "",
        "",
    )
    .await;
    assert_eq!(
        (c, e["message"].as_str().unwrap()),
        (400, "container nope is not valid for pod web")
    );
    // follow: lines written later arrive; the stream ends when the pod is gone.
    let mut f = Stream::open(
        &r,
        "/api/v1/namespaces/default/pods/web/log?follow=true&tailLines=0",
    )
    .await;
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(cdir.join("1.log"))
        .unwrap();
    writeln!(file, "2026-12-01T10:00:06Z stdout F {{\"later\":1}}").unwrap();
    assert_eq!(f.next().await.unwrap(), json!({"later": 1}));
    call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods/web",
        "application/json",
        json!({"gracePeriodSeconds": 0}).to_string(),
    )
    .await;
    assert!(f.next().await.is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_deleted_namespace_terminates_deletes_its_content_and_goes() {
    let (_, r) = api(100);
    post(
        &r,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "team"}}),
    )
    .await;
    post(
        &r,
        "/api/v1/namespaces/team/configmaps",
        json!({"metadata": {"name": "c"}}),
    )
    .await;
    post(&r, "/api/v1/namespaces/team/pods", pod("web", json!({}))).await;
    let (c, ns, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/team",
        "application/json",
        "",
    )
    .await;
    assert_eq!(c, 200);
    assert_eq!(ns["status"]["phase"], "Terminating");
    let (c, e) = post(
        &r,
        "/api/v1/namespaces/team/configmaps",
        json!({"metadata": {"name": "d"}}),
    )
    .await;
    assert_eq!(c, 403);
    assert_eq!(e["message"], "configmaps \"d\" is forbidden: unable to create new content in namespace team because it is being terminated");
    let (c, _, _) = call(&r, "GET", "/api/v1/namespaces/team/configmaps/c", "", "").await;
    assert_eq!(c, 404);
    // The pod terminates gracefully (a kubelet would finish it); the namespace waits for it.
    let (c, p, _) = call(&r, "GET", "/api/v1/namespaces/team/pods/web", "", "").await;
    assert_eq!(c, 200);
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 10);
    call(
        &r,
        "DELETE",
        "/api/v1/namespaces/team/pods/web",
        "application/json",
        json!({"gracePeriodSeconds": 0}).to_string(),
    )
    .await;
    let (c, _, _) = call(&r, "GET", "/api/v1/namespaces/team", "", "").await;
    assert_eq!(c, 404);
}

/// `ValidateObjectMeta`'s labels and annotations, on create and on update/patch, with
/// kube-apiserver's 422 wording; a changed `metadata.uid` is immutable.
#[tokio::test]
async fn labels_annotations_and_the_uid_are_validated_as_kube_apiserver_does() {
    let (_api, r) = api(100);
    let pods = "/api/v1/namespaces/default/pods";
    let (c, v) = post(
        &r,
        pods,
        pod("web", json!({"bad key!": "x", "app": "-web", "a/b/c": ""})),
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Pod \"web\" is invalid: [metadata.labels: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName'), metadata.labels: Invalid value: \"-web\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]"
    );
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.labels");
    assert_eq!(v["details"]["causes"][0]["reason"], "FieldValueInvalid");
    let mut p = pod("web", json!({"app": "web"}));
    p["metadata"]["annotations"] = json!({"Example.COM/Big": "x".repeat(256 * 1024)});
    let (c, v) = post(&r, pods, p).await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Pod \"web\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
    );
    let mut p = pod("web", json!({"app": "web"}));
    p["metadata"]["annotations"] = json!({"Example.COM/Fine": "x".repeat(1000), "/x": "y"});
    let (c, v) = post(&r, pods, p).await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Pod \"web\" is invalid: metadata.annotations: Invalid value: \"/x\": prefix part must be non-empty"
    );
    let (c, v) = post(&r, pods, pod("web", json!({"app": "web"}))).await;
    assert_eq!(c, 201, "{v}");
    let uid = v["metadata"]["uid"].as_str().unwrap().to_string();
    // A patch that changes the uid, or adds a bad label, is refused; the object stays.
    let (c, v, _) = call(
        &r,
        "PATCH",
        &format!("{pods}/web"),
        "application/merge-patch+json",
        r#"{"metadata":{"uid":"0000-1111"}}"#,
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Pod \"web\" is invalid: metadata.uid: Invalid value: \"0000-1111\": field is immutable"
    );
    let (c, v, _) = call(
        &r,
        "PATCH",
        &format!("{pods}/web"),
        "application/strategic-merge-patch+json",
        r#"{"metadata":{"labels":{"tier":"front end"}}}"#,
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.labels");
    // An update without a uid keeps the stored one.
    let (_, mut cur, _) = call(&r, "GET", &format!("{pods}/web"), "", "").await;
    cur["metadata"].as_object_mut().unwrap().remove("uid");
    cur["metadata"]["labels"]["tier"] = json!("front");
    let (c, v, _) = call(
        &r,
        "PUT",
        &format!("{pods}/web"),
        "application/json",
        cur.to_string(),
    )
    .await;
    assert_eq!(c, 200, "{v}");
    assert_eq!(v["metadata"]["uid"], uid.as_str());
    assert_eq!(v["metadata"]["labels"]["tier"], "front");
}

/// Node ports: allocated from 30000-32767, a requested one out of the range or taken is a 422
/// in the allocator's words, a duplicate within a Service or one on a ClusterIP Service is
/// refused by validation; TCP and UDP of one port share their node port.
#[tokio::test]
async fn node_ports_are_allocated_and_refused_as_kube_apiserver_does() {
    let (_api, r) = api(100);
    let svcs = "/api/v1/namespaces/default/services";
    let svc = |name: &str, ty: &str, ports: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"type": ty, "selector": {"app": "web"}, "ports": ports}})
    };
    let (c, v) = post(
        &r,
        svcs,
        svc("big", "NodePort", json!([{"port": 80, "nodePort": 99999}])),
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Service \"big\" is invalid: spec.ports[0].nodePort: Invalid value: 99999: provided port is not in the valid range. The range of valid ports is 30000-32767"
    );
    let (c, v) = post(
        &r,
        svcs,
        svc(
            "a",
            "NodePort",
            json!([{"name": "http", "port": 80, "nodePort": 30080}]),
        ),
    )
    .await;
    assert_eq!(c, 201, "{v}");
    let (c, v) = post(
        &r,
        svcs,
        svc("b", "NodePort", json!([{"port": 81, "nodePort": 30080}])),
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Service \"b\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    let (c, v) = post(
        &r,
        svcs,
        svc(
            "c",
            "NodePort",
            json!([{"name": "a", "port": 81, "nodePort": 30081}, {"name": "b", "port": 82, "nodePort": 30081}]),
        ),
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Service \"c\" is invalid: spec.ports[1].nodePort: Duplicate value: 30081"
    );
    let (c, v) = post(
        &r,
        svcs,
        svc("d", "ClusterIP", json!([{"port": 81, "nodePort": 30082}])),
    )
    .await;
    assert_eq!(c, 422, "{v}");
    assert_eq!(
        v["message"],
        "Service \"d\" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
    );
    let (c, v) = post(
        &r,
        svcs,
        svc(
            "dns",
            "NodePort",
            json!([{"name": "tcp", "port": 53, "protocol": "TCP"}, {"name": "udp", "port": 53, "protocol": "UDP"}]),
        ),
    )
    .await;
    assert_eq!(c, 201, "{v}");
    let tcp = v["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((30000..=32767).contains(&tcp) && tcp != 30080, "{v}");
    assert_eq!(v["spec"]["ports"][1]["nodePort"], tcp);
}

/// `deletecollection` with a label selector (only the matching objects go, the response is
/// the list of what was deleted), a pod collection deleted gracefully with the options'
/// grace, `preconditions` (UID, resourceVersion) refused with kube-apiserver's 409 wording,
/// and a bad `propagationPolicy` refused with its 400.
#[tokio::test]
async fn deletecollection_preconditions_and_propagation_policy_as_kube_apiserver() {
    let (_api, r) = api(100);
    for (name, tier) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let (code, _) = post(
            &r,
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"tier": tier}}, "data": {"k": "v"}}),
        )
        .await;
        assert_eq!(code, 201);
    }
    let (code, v, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/configmaps?labelSelector=tier%3Dx",
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["kind"], "ConfigMapList");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    let (_, left, _) = call(&r, "GET", "/api/v1/namespaces/default/configmaps", "", "").await;
    let left: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(left, ["c"]);

    // Pods (bound to the node, so graceful): each keeps the collection delete's grace.
    for name in ["p1", "p2"] {
        let (code, _) = post(
            &r,
            "/api/v1/namespaces/default/pods",
            pod(name, json!({"app": "web"})),
        )
        .await;
        assert_eq!(code, 201);
    }
    let (code, v, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/pods",
        "application/json",
        json!({"gracePeriodSeconds": 7}).to_string(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
    for name in ["p1", "p2"] {
        let (code, p, _) = call(
            &r,
            "GET",
            &format!("/api/v1/namespaces/default/pods/{name}"),
            "",
            "",
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 7, "{name}");
    }

    let (_, c, _) = call(&r, "GET", "/api/v1/namespaces/default/configmaps/c", "", "").await;
    let uid = c["metadata"]["uid"].as_str().unwrap().to_string();
    let (code, v, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json",
        json!({"preconditions": {"uid": "nope"}}).to_string(),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        v["message"],
        format!("Operation cannot be fulfilled on configmaps \"c\": Precondition failed: UID in precondition: nope, UID in object meta: {uid}")
    );
    assert_eq!(v["reason"], "Conflict");
    let (code, v, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json",
        json!({"preconditions": {"resourceVersion": "1"}}).to_string(),
    )
    .await;
    assert_eq!(code, 409, "{v}");
    assert!(v["message"].as_str().unwrap().contains(
        "Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: "
    ));
    let (code, v, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json",
        json!({"propagationPolicy": "Sideways"}).to_string(),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(v["message"], "propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"");
    let (code, v, _) = call(
        &r,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json",
        json!({"preconditions": {"uid": uid}, "propagationPolicy": "Background"}).to_string(),
    )
    .await;
    assert_eq!(code, 200, "{v}");
}

/// A patch without a resourceVersion applies to whatever is stored when it is written: a
/// kubelet writing status while kubectl patches labels never makes the patch a 409 (upstream's
/// `GuaranteedUpdate` applies the patch again to the newer object). Two writers race on two
/// threads; every one of their 400 patches is answered 200 and the last of each is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_without_a_resource_version_survive_a_concurrent_status_writer() {
    let (_, r) = api(100);
    let (c, v) = post(
        &r,
        "/api/v1/namespaces/default/pods",
        pod("web", json!({"app": "web"})),
    )
    .await;
    assert_eq!(c, 201, "{v}");
    const N: usize = 200;
    let status = {
        let r = r.clone();
        tokio::spawn(async move {
            let mut codes = Vec::new();
            for i in 0..N {
                let body = json!({"status": {"message": format!("status {i}")}}).to_string();
                let (c, v, _) = call(
                    &r,
                    "PATCH",
                    "/api/v1/namespaces/default/pods/web/status",
                    "application/merge-patch+json",
                    body,
                )
                .await;
                codes.push((c, v["message"].clone()));
            }
            codes
        })
    };
    let labels = {
        let r = r.clone();
        tokio::spawn(async move {
            let mut codes = Vec::new();
            for i in 0..N {
                let body = json!({"metadata": {"labels": {"step": i.to_string()}}}).to_string();
                let (c, v, _) = call(
                    &r,
                    "PATCH",
                    "/api/v1/namespaces/default/pods/web",
                    "application/merge-patch+json",
                    body,
                )
                .await;
                codes.push((c, v["message"].clone()));
            }
            codes
        })
    };
    for codes in [status.await.unwrap(), labels.await.unwrap()] {
        let refused: Vec<_> = codes.iter().filter(|(c, _)| *c != 200).collect();
        assert!(
            refused.is_empty(),
            "{} refused: {:?}",
            refused.len(),
            refused.first()
        );
    }
    let (c, v, _) = call(&r, "GET", "/api/v1/namespaces/default/pods/web", "", "").await;
    assert_eq!(c, 200);
    assert_eq!(v["metadata"]["labels"]["step"], json!((N - 1).to_string()));
    assert_eq!(v["metadata"]["labels"]["app"], json!("web"));
    assert_eq!(v["status"]["message"], json!(format!("status {}", N - 1)));
}

/// `GET /api/v1/nodes/NODE/proxy/PATH` (issue 14): the node must exist; its kubelet answers
/// what it serves, Go's `404 page not found` for the rest, and kube-apiserver's 503 when no
/// kubelet can be reached.
#[tokio::test]
async fn the_node_proxy_reaches_the_kubelet_of_an_existing_node() {
    use podgrace_api::api::NodeProxy;
    use std::sync::Arc;
    let configz = json!({"kubeletconfig": {"evictionMaxPodGracePeriod": 0}});
    let answer = configz.clone();
    let api = Api::new(ApiConfig {
        node_proxy: Some(NodeProxy(Arc::new(move |node: &str, path: &str| {
            if node != "n1" {
                return Err("no kubelet".into());
            }
            Ok((path == "configz").then(|| answer.clone()))
        }))),
        ..ApiConfig::default()
    });
    let r = router(api.clone());
    let (c, v, _) = call(&r, "GET", "/api/v1/nodes/n1/proxy/configz", "", "").await;
    assert_eq!((c, &v["kind"]), (404, &json!("Status")), "{v}");
    assert_eq!(v["message"], "nodes \"n1\" not found");
    for (name, ip) in [("n1", "192.0.2.1"), ("n2", "192.0.2.2")] {
        let (c, v) = post(
            &r,
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"addresses": [{"type": "InternalIP", "address": ip}]}}),
        )
        .await;
        assert_eq!(c, 201, "{v}");
    }
    let (c, v, _) = call(&r, "GET", "/api/v1/nodes/n1/proxy/configz", "", "").await;
    assert_eq!((c, &v), (200, &configz));
    let (c, v, _) = call(&r, "GET", "/api/v1/nodes/n1/proxy/pods", "", "").await;
    assert_eq!((c, v), (404, json!("404 page not found\n")));
    let (c, v, _) = call(&r, "GET", "/api/v1/nodes/n2/proxy/configz", "", "").await;
    assert_eq!(c, 503, "{v}");
    assert_eq!(v["reason"], "ServiceUnavailable");
    assert_eq!(
        v["message"],
        "error trying to reach service: dial tcp 192.0.2.2:10250: connect: connection refused"
    );
    // Without a proxy (an API with no kubelet), an existing node's kubelet is unreachable.
    let r2 = router(Api::new(ApiConfig::default()));
    let (c, v) = post(
        &r2,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n3"}}),
    )
    .await;
    assert_eq!(c, 201, "{v}");
    let (c, v, _) = call(&r2, "GET", "/api/v1/nodes/n3/proxy/configz", "", "").await;
    assert_eq!(c, 503, "{v}");
}
