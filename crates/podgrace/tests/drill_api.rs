//! `podgrace drill` through the Kubernetes API (`PODGRACE_DRILL_API=1`): the manifest applied to
//! the embedded serve, the scenario performed as API calls (a pod delete, `kubectl drain`'s
//! cordon and evictions), the endpoints taken from the EndpointSlices with the endpoint lag, and
//! the report in the shape of the drill's own path. Needs root (pod network namespaces).

mod common;

use std::process::{Command, Stdio};

use common::*;

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The demo app as a Deployment of 2 that exits at once on SIGTERM.
fn web() -> String {
    let exe = env!("CARGO_BIN_EXE_podgrace");
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: app\n        image: demo\n        command: [\"{exe}\", demo-app, --listen, \"0.0.0.0:8080\", --on-sigterm, exit]\n        ports: [{{containerPort: 8080}}]\n        readinessProbe:\n          httpGet: {{path: /ready, port: 8080}}\n          periodSeconds: 1\n"
    )
}

fn drill_api(tag: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    drill_api_of(tag, &web(), extra)
}

fn drill_api_of(tag: &str, yaml: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let file = tmp_file(tag, "web.yaml", yaml);
    let mut args = vec!["drill", file.to_str().unwrap(), "-o", "json"];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(&args)
        .env("PODGRACE_DRILL_API", "1")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run podgrace");
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(1),
        "drill failed to run: {}",
        stderr(&out)
    );
    (code, json(&out), stderr(&out))
}

#[test]
fn a_pod_deleted_through_the_api_loses_requests_until_its_endpoint_slice_change_arrives() {
    if !privileged("api-delete") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (code, r, log) = drill_api(
        "api-delete",
        &[
            "--scenario",
            "delete",
            "--proxy",
            "ingress",
            "--duration",
            "4s",
            "--endpoint-lag",
            "1s",
        ],
    );
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("deleted"), "{log}");
    let failed = r["failed"].as_u64().unwrap();
    assert!(failed > 0, "{r}\n{log}");
    assert_eq!(r["failuresByPhase"]["afterStopSignal"], failed, "{r}");
    // One pod was deleted: every failure is on it, and its termination is reported against
    // the lag: its endpoint left the proxy at least L = 1 s after the delete (the
    // EndpointSlice controller's write, then the lag), its stop signal came first.
    let t = r["terminations"].as_array().unwrap();
    assert_eq!(t.len(), 1, "{r}");
    let pod = t[0]["pod"].as_str().unwrap();
    assert!(pod.starts_with("web-"), "{pod}");
    assert_eq!(
        r["failuresByPod"],
        serde_json::json!([{"pod": pod, "failed": failed, "failuresByPhase": {"beforeStopSignal": 0, "afterStopSignal": failed, "afterKill": 0}}])
    );
    let removed = t[0]["endpointRemovedSeconds"].as_f64().unwrap();
    assert!((1.0..2.0).contains(&removed), "{removed}");
    assert!(t[0]["stopSignalSeconds"].as_f64().unwrap() < removed, "{r}");
    assert_eq!(r["requests"], 800);
    assert_eq!(r["scenario"], "delete");
}

#[test]
fn a_drain_cordons_the_node_and_evicts_every_pod() {
    if !privileged("api-drain") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (code, r, log) = drill_api(
        "api-drain",
        &[
            "--scenario",
            "drain",
            "--proxy",
            "ingress",
            "--duration",
            "5s",
            "--endpoint-lag",
            "1s",
        ],
    );
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("node/podgrace cordoned"), "{log}");
    assert_eq!(r["scenario"], "drain");
    // Both pods were evicted and their replacements cannot be scheduled on the cordoned node:
    // both terminations are reported, and the Service has no endpoint at the end.
    let t = r["terminations"].as_array().unwrap();
    assert_eq!(t.len(), 2, "{r}");
    for x in t {
        assert!(x["endpointRemovedSeconds"].as_f64().unwrap() >= 1.0, "{x}");
    }
    assert!(r["failed"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn a_rollout_restart_replaces_every_pod_through_the_deployment_controller() {
    if !privileged("api-rollout") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (code, r, log) = drill_api(
        "api-rollout",
        &[
            "--proxy",
            "ingress",
            "--duration",
            "8s",
            "--endpoint-lag",
            "1s",
        ],
    );
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("deployment.apps/web restarted"), "{log}");
    assert_eq!(r["scenario"], "rollout");
    // Both old pods were deleted by the ReplicaSet controller, one after the other (maxSurge 1
    // and maxUnavailable 0 for 2 replicas, as upstream rounds 25%), and the new ones are in the
    // report too.
    let t = r["terminations"].as_array().unwrap();
    assert_eq!(t.len(), 2, "{r}");
    assert_ne!(t[0]["pod"], t[1]["pod"]);
    for x in t {
        let removed = x["endpointRemovedSeconds"].as_f64().unwrap();
        assert!((1.0..2.5).contains(&removed), "{x}");
    }
    assert_eq!(r["pods"].as_array().unwrap().len(), 4, "{log}");
    // The app exits at once on SIGTERM: requests fail after the stop signal only.
    let failed = r["failed"].as_u64().unwrap();
    assert!(failed > 0, "{r}");
    assert_eq!(r["failuresByPhase"]["afterStopSignal"], failed, "{r}");
}

#[test]
fn a_drain_a_pod_disruption_budget_blocks_evicts_nothing_and_retries_every_5_s() {
    if !privileged("api-drain-pdb") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let pdb = "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec:\n  minAvailable: 2\n  selector: {matchLabels: {app: web}}\n";
    let (code, r, log) = drill_api_of(
        "api-drain-pdb",
        &format!("{}{pdb}", web()),
        &[
            "--scenario",
            "drain",
            "--proxy",
            "ingress",
            "--duration",
            "8s",
            "--endpoint-lag",
            "1s",
        ],
    );
    // minAvailable 2 of 2: every eviction is refused with 429 and retried after 5 s (at about
    // 1 s and 6 s into the load), no pod goes, no request fails.
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["terminations"], serde_json::json!([]), "{r}");
    let retries = log.matches("(will retry after 5s)").count();
    assert!((2..=4).contains(&retries), "{retries} retries:\n{log}");
    assert!(
        log.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{log}"
    );
    assert!(log.contains("not evicted before the load ended"), "{log}");
}
