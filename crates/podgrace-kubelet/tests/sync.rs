//! The local kubelet against podgrace's API server in-process (kube-rs over the router, as
//! `serve` runs it), with real processes: status as the kubelet writes it (phase, conditions,
//! container states, restartCount, CrashLoopBackOff), the kubelet's Event objects, the delete
//! path down to the final grace-0 delete. Real kubectl drives the same path in
//! `crates/podgrace/tests/serve.rs`.

use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api as KApi, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use podgrace_api::{http::router, Api, ApiConfig};
use podgrace_kubelet::{start, KubeletConfig, KubeletHandle, ProcessRuntimes};
use serde_json::{json, Value};

struct Node {
    client: kube::Client,
    kubelet: Option<KubeletHandle>,
}

fn node() -> Node {
    let api = Api::new(ApiConfig::default());
    let svc = tower::ServiceBuilder::new()
        .map_request(|req: http::Request<kube::client::Body>| req.map(axum::body::Body::new))
        .service(router(api));
    let client = kube::Client::new(svc, "default");
    let kubelet = start(
        client.clone(),
        ProcessRuntimes::default(),
        KubeletConfig::default(),
    );
    Node {
        client,
        kubelet: Some(kubelet),
    }
}

impl Node {
    fn pods(&self) -> KApi<Pod> {
        KApi::default_namespaced(self.client.clone())
    }

    async fn create(&self, spec: Value) -> Pod {
        let p: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web"}, "spec": spec}))
        .unwrap();
        self.pods()
            .create(&PostParams::default(), &p)
            .await
            .unwrap()
    }

    /// Watches `web` until `want` holds for the object (or it is deleted: `None`).
    async fn until(&self, what: &str, want: impl Fn(&Value) -> bool) -> Option<Value> {
        let wp = WatchParams::default().fields("metadata.name=web");
        let list = self.pods().list(&ListParams::default()).await.unwrap();
        for p in &list.items {
            let v = serde_json::to_value(p).unwrap();
            if want(&v) {
                return Some(v);
            }
        }
        let rv = list.metadata.resource_version.unwrap();
        let mut stream = self.pods().watch(&wp, &rv).await.unwrap().boxed();
        let deadline = tokio::time::sleep(Duration::from_secs(30));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => panic!("timed out waiting for {what}"),
                ev = stream.try_next() => match ev.unwrap() {
                    Some(WatchEvent::Added(p)) | Some(WatchEvent::Modified(p)) => {
                        let v = serde_json::to_value(&p).unwrap();
                        if want(&v) {
                            return Some(v);
                        }
                    }
                    Some(WatchEvent::Deleted(_)) => return None,
                    Some(_) => {}
                    None => panic!("the watch ended waiting for {what}"),
                }
            }
        }
    }

    async fn events(&self) -> Vec<Event> {
        let evs: KApi<Event> = KApi::default_namespaced(self.client.clone());
        evs.list(&ListParams::default()).await.unwrap().items
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // The processes die with the test process at worst; a clean end kills them now.
        if let Some(k) = self.kubelet.take() {
            drop(k);
        }
    }
}

fn cond<'a>(p: &'a Value, t: &str) -> &'a Value {
    p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap_or_else(|| panic!("no {t} condition in {p:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pod_runs_terminates_and_is_removed_by_the_final_delete() {
    let n = node();
    // Ready once its SIGTERM handler is installed (the readiness probe sees the file).
    let flag = std::env::temp_dir().join(format!("podgrace-kubelet-trap-{}", std::process::id()));
    let _ = std::fs::remove_file(&flag);
    let f = flag.display().to_string();
    n.create(json!({"terminationGracePeriodSeconds": 10, "containers": [{"name": "app",
        "image": "busybox:1.36",
        "command": ["sh", "-c", format!("trap 'exit 0' TERM; touch {f}; while true; do sleep 0.05; done")],
        "readinessProbe": {"exec": {"command": ["test", "-e", f]}, "periodSeconds": 1}}]}))
        .await;
    let running = n
        .until("Ready", |p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .await
        .unwrap();
    assert_eq!(running["status"]["phase"], "Running");
    let c = &running["status"]["containerStatuses"][0];
    assert_eq!(
        (
            c["name"].as_str(),
            c["ready"].as_bool(),
            c["restartCount"].as_i64(),
            c["started"].as_bool()
        ),
        (Some("app"), Some(true), Some(0), Some(true))
    );
    assert!(c["state"]["running"]["startedAt"].is_string(), "{c:#}");
    assert!(c["containerID"]
        .as_str()
        .unwrap()
        .starts_with("podgrace://"));
    for t in [
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "PodScheduled",
    ] {
        assert_eq!(cond(&running, t)["status"], "True", "{t}");
    }
    assert_eq!(running["status"]["hostIP"], "127.0.0.1");
    assert_eq!(running["status"]["qosClass"], "BestEffort");
    assert!(running["status"]["startTime"].is_string());

    // A graceful delete: the app exits 0 on SIGTERM, so the pod ends Succeeded (Completed),
    // then the kubelet's delete with grace 0 removes the object.
    let wp = WatchParams::default().fields("metadata.name=web");
    let rv = running["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut stream = n.pods().watch(&wp, &rv).await.unwrap().boxed();
    let deleted_at = Instant::now();
    n.pods()
        .delete("web", &DeleteParams::default().grace_period(5))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("the watch goes on until DELETED")
    {
        let (kind, p) = match ev.unwrap() {
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            _ => continue,
        };
        let v = serde_json::to_value(&p).unwrap();
        seen.push((
            kind,
            v["metadata"]["deletionGracePeriodSeconds"].as_i64(),
            v["status"]["phase"].as_str().unwrap().to_string(),
            v["status"]["containerStatuses"][0]["state"]
                .as_object()
                .and_then(|o| o.keys().next().cloned())
                .unwrap_or_default(),
            deleted_at.elapsed(),
        ));
        if kind == "DELETED" {
            let t = &v["status"]["containerStatuses"][0]["state"]["terminated"];
            assert_eq!(
                (t["exitCode"].as_i64(), t["reason"].as_str()),
                (Some(0), Some("Completed"))
            );
            assert_eq!(cond(&v, "Ready")["reason"], "PodCompleted");
            break;
        }
    }
    let shape: Vec<_> = seen
        .iter()
        .map(|s| (s.0, s.1, s.2.as_str(), s.3.as_str()))
        .collect();
    assert_eq!(
        shape,
        [
            ("MODIFIED", Some(5), "Running", "running"),
            ("MODIFIED", Some(5), "Succeeded", "terminated"),
            ("MODIFIED", Some(0), "Succeeded", "terminated"),
            ("DELETED", Some(0), "Succeeded", "terminated"),
        ],
        "{seen:#?}"
    );
    // SIGTERM at once (no preStop) and the exit within one loop turn.
    assert!(seen[1].4 < Duration::from_secs(1), "{seen:#?}");
    let _ = std::fs::remove_file(&flag);

    let events = n.events().await;
    let kubelet: Vec<(String, String, String)> = events
        .iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("kubelet"))
        .map(|e| {
            (
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default(),
                e.involved_object.field_path.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        kubelet,
        [
            (
                "Created".into(),
                "Created container: app".into(),
                "spec.containers{app}".into()
            ),
            (
                "Started".into(),
                "Started container app".into(),
                "spec.containers{app}".into()
            ),
            (
                "Killing".into(),
                "Stopping container app".into(),
                "spec.containers{app}".into()
            ),
        ]
    );
    let e = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Killing"))
        .unwrap();
    let src = e.source.as_ref().unwrap();
    assert_eq!(src.host.as_deref(), Some("podgrace"));
    assert_eq!(e.count, Some(1));
    assert_eq!(e.reporting_component.as_deref(), Some("kubelet"));
    assert_eq!(e.reporting_instance.as_deref(), Some("podgrace"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("Pod"));
    assert!(e.first_timestamp.is_some() && e.last_timestamp.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_container_shows_crash_loop_back_off_with_its_last_exit() {
    let n = node();
    n.create(
        json!({"terminationGracePeriodSeconds": 1, "containers": [{"name": "app",
        "image": "busybox:1.36", "command": ["sh", "-c", "exit 3"]}]}),
    )
    .await;
    let p = n
        .until("CrashLoopBackOff", |p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        })
        .await
        .unwrap();
    let c = &p["status"]["containerStatuses"][0];
    let uid = p["metadata"]["uid"].as_str().unwrap();
    assert_eq!(c["restartCount"], 1, "{c:#}");
    assert_eq!(
        c["state"]["waiting"]["message"],
        format!("back-off 10s restarting failed container=app pod=web_default({uid})")
    );
    let last = &c["lastState"]["terminated"];
    assert_eq!(
        (last["exitCode"].as_i64(), last["reason"].as_str()),
        (Some(3), Some("Error"))
    );
    assert_eq!(p["status"]["phase"], "Running");
    assert_eq!(cond(&p, "Ready")["status"], "False");
    assert_eq!(
        cond(&p, "Ready")["message"],
        "containers with unready status: [app]"
    );
    let events = n.events().await;
    let back_off = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("BackOff"))
        .expect("a BackOff event");
    assert_eq!(back_off.type_.as_deref(), Some("Warning"));
    // Deleting it: nothing runs, so the object goes after the kubelet's final delete.
    n.pods()
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    assert!(n.until("gone", |_| false).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_cannot_be_run_stays_pending_with_a_warning_until_deleted() {
    let n = node();
    // No command: the process runtime runs host commands, not images.
    n.create(json!({"containers": [{"name": "app", "image": "nginx:1.27"}]}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let failed = loop {
        let evs = n.events().await;
        if let Some(e) = evs
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Failed"))
        {
            break e;
        }
        assert!(Instant::now() < deadline, "no Failed event");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert!(
        failed.message.as_deref().unwrap().starts_with("Error: "),
        "{:?}",
        failed.message
    );
    let p = n.pods().get("web").await.unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
    n.pods()
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    assert!(n.until("gone", |_| false).await.is_none());
}
