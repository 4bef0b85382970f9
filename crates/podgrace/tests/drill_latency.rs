//! `drill --runtime-latency containerd`: the process runtime waits containerd 1.6's measured
//! latencies (issue 19 item 3), so a drill on one machine shows a native sidecar outliving its
//! app by what containerd's StopContainer takes to return (38 ms to 2.9 s recorded).

mod common;

use common::{drill, privileged};

const MESH: &str = "apiVersion: v1
kind: Pod
metadata: {name: mesh}
spec:
  terminationGracePeriodSeconds: 10
  initContainers:
  - name: proxy
    image: envoy
    restartPolicy: Always
    command: [sh, -c, \"trap 'exit 0' TERM; while :; do sleep 0.05; done\"]
  containers:
  - name: app
    image: app
    command: [python3, -c, \"import http.server, signal, sys\\nsignal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\\nhttp.server.ThreadingHTTPServer(('', 9000), http.server.SimpleHTTPRequestHandler).serve_forever()\"]
    ports:
    - containerPort: 9000
    readinessProbe:
      tcpSocket: {port: 9000}
      periodSeconds: 1
";

fn secs(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The delay from the app's death to the proxy's stop signal in the deleted pod's report.
fn sidecar_lag(r: &serde_json::Value) -> f64 {
    let pod = r["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["containers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| !c["terminations"].as_array().unwrap().is_empty())
        })
        .unwrap_or_else(|| panic!("no terminated pod: {r}"));
    let t = |name: &str| {
        pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .and_then(|c| c["terminations"].get(0).cloned())
            .unwrap_or_else(|| panic!("{name} not terminated: {pod}"))
    };
    let (app, proxy) = (t("app"), t("proxy"));
    let app_exit = secs(&app["startSeconds"]) + secs(&app["exitAfterSeconds"]);
    secs(&proxy["startSeconds"]) + secs(&proxy["stopSignalAfterSeconds"]) - app_exit
}

#[test]
fn with_containerd_latencies_the_drills_sidecar_outlives_its_app() {
    if !privileged("drill latency") {
        return;
    }
    let args = [
        "--scenario",
        "delete",
        "--replicas",
        "1",
        "--rps",
        "50",
        "--duration",
        "4s",
        "--runtime-latency",
        "containerd",
        "--runtime-latency-seed",
        "5",
    ];
    let (_, r) = drill("drill-latency", MESH, &args);
    let lag = sidecar_lag(&r);
    // containerd 1.6: StopContainer returned 38 ms to 2.9 s after the container died.
    assert!((0.038..=3.0).contains(&lag), "lag {lag}: {r}");
    // Without the latencies the proxy is signalled within milliseconds of the app's death.
    let (_, r) = drill("drill-no-latency", MESH, &args[..8]);
    let plain = sidecar_lag(&r);
    assert!(plain < 0.038, "lag {plain} without latencies: {r}");
    eprintln!("the sidecar outlived its app by {lag:.3} s with containerd's latencies, {plain:.3} s without");
}

#[test]
fn runtime_latency_is_for_the_process_runtime_only() {
    let out = common::podgrace(&[
        "drill",
        "examples/web.yaml",
        "--runtime",
        "containerd",
        "--runtime-latency",
        "containerd",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        common::stderr(&out)
            .contains("--runtime-latency adds a real runtime's latencies to the process runtime"),
        "{}",
        common::stderr(&out)
    );
}
