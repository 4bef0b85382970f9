//! The EndpointSlice controller's latency in a rollout: from a pod's deletionTimestamp to the
//! EndpointSlice write that takes its endpoint out of `ready`, both stamped as they arrive
//! through watches of the same API (so the watch delivery cancels out). The API server and
//! every controller run in this process, as in `podgrace serve`; a stand-in kubelet makes each
//! new pod Running and Ready at once and deletes a terminating pod 200 ms after it was marked
//! (its grace; `HOLD_MS`). The rollout is `kubectl rollout restart`'s template annotation on a
//! Deployment of `REPLICAS` (default 20) with maxSurge 25% and maxUnavailable 25%, behind a
//! Service.
//!
//! Prints `n`, `p50`, `p99` and `max` in milliseconds. Run it with the machine's load average
//! beside the numbers:
//!
//! ```text
//! cargo run -p podgrace-controllers --example slice_latency
//! REPLICAS=50 cargo run -p podgrace-controllers --example slice_latency
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use podgrace_api::{Api as Server, ApiConfig};
use serde_json::json;

/// When each pod was first seen marked for deletion, and when its endpoint first left `ready`.
#[derive(Default)]
struct Stamps {
    marked: BTreeMap<String, Instant>,
    unready: BTreeMap<String, Instant>,
    /// The pods whose endpoint the slices show ready now.
    ready: BTreeSet<String>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let replicas: usize = std::env::var("REPLICAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let client = podgrace_api::in_process_client(Server::new(ApiConfig::default()));
    let _controllers = podgrace_controllers::spawn(
        client.clone(),
        podgrace_controllers::Config {
            kube_version: podgrace_core::KubeVersion::default(),
        },
    );
    tokio::spawn(kubelet(client.clone()));
    let stamps = Arc::new(Mutex::new(Stamps::default()));
    tokio::spawn(watch_pods(client.clone(), stamps.clone()));
    tokio::spawn(watch_slices(client.clone(), stamps.clone()));

    let node: Node =
        create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "podgrace"}}));
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    let svc: Service = create(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
    );
    Api::<Service>::default_namespaced(client.clone())
        .create(&PostParams::default(), &svc)
        .await
        .expect("service");
    let d: Deployment = create(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "app", "image": "busybox:1.36", "ports": [{"containerPort": 8080}]}]}}}
    }));
    let ds: Api<Deployment> = Api::default_namespaced(client.clone());
    ds.create(&PostParams::default(), &d)
        .await
        .expect("deployment");
    let available = |d: &Deployment| {
        d.status.as_ref().is_some_and(|s| {
            s.updated_replicas == Some(replicas as i32)
                && s.available_replicas == Some(replicas as i32)
                && s.replicas == Some(replicas as i32)
        })
    };
    wait_for(&ds, available, "the first rollout").await;
    let restart = json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": jiff::Timestamp::now().to_string()}}}}});
    ds.patch("web", &PatchParams::default(), &Patch::Strategic(&restart))
        .await
        .expect("restart");
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(300);
    loop {
        let done = {
            let s = stamps.lock().expect("stamps");
            s.marked.len() >= replicas && s.marked.keys().all(|k| s.unready.contains_key(k))
        };
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the rollout did not end in 300 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rollout = t0.elapsed();
    let s = stamps.lock().expect("stamps");
    let mut ms: Vec<f64> = s
        .marked
        .iter()
        .filter_map(|(k, t)| Some(s.unready.get(k)?.saturating_duration_since(*t)))
        .map(|d| d.as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
    println!(
        "deletionTimestamp -> endpoint not ready: n {} p50 {:.1} ms p99 {:.1} ms max {:.1} ms (rollout of {replicas} in {:.2} s)",
        ms.len(),
        at(0.5),
        at(0.99),
        ms[ms.len() - 1],
        rollout.as_secs_f64()
    );
}

/// How long the stand-in kubelet keeps a pod marked for deletion (`HOLD_MS`, default 200).
fn hold_ms() -> u64 {
    std::env::var("HOLD_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn create<K: serde::de::DeserializeOwned>(v: serde_json::Value) -> K {
    serde_json::from_value(v).expect("object")
}

async fn wait_for(ds: &Api<Deployment>, ok: impl Fn(&Deployment) -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !ds.get("web").await.is_ok_and(|d| ok(&d)) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The stand-in kubelet: a new pod becomes Running and Ready with an IP; a pod marked for
/// deletion is deleted with grace 0 200 ms later.
async fn kubelet(client: kube::Client) {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut ips = 0u32;
    let mut seen = BTreeSet::new();
    let mut ending = BTreeSet::new();
    let mut w = std::pin::pin!(
        watcher::watcher(pods.clone(), watcher::Config::default()).default_backoff()
    );
    while let Some(ev) = w.next().await {
        let pod = match ev {
            Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => p,
            _ => continue,
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            if ending.insert(name.clone()) {
                let pods = pods.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(hold_ms())).await;
                    let _ = pods
                        .delete(&name, &DeleteParams::default().grace_period(0))
                        .await;
                });
            }
            continue;
        }
        if seen.insert(name.clone()) {
            ips += 1;
            let ip = format!("10.0.{}.{}", ips / 250, ips % 250 + 1);
            let now = jiff::Timestamp::now().to_string();
            let st = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
            let _ = pods
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&st))
                .await;
        }
    }
}

async fn watch_pods(client: kube::Client, stamps: Arc<Mutex<Stamps>>) {
    let pods: Api<Pod> = Api::default_namespaced(client);
    let mut w =
        std::pin::pin!(watcher::watcher(pods, watcher::Config::default()).default_backoff());
    while let Some(ev) = w.next().await {
        if let Ok(watcher::Event::Apply(p)) = ev {
            if p.metadata.deletion_timestamp.is_some() {
                let name = p.metadata.name.clone().unwrap_or_default();
                if let Ok(mut s) = stamps.lock() {
                    if s.marked.contains_key(&name) {
                        continue;
                    }
                    let now = Instant::now();
                    s.marked.insert(name.clone(), now);
                    // The slice's change came through first: no latency to see.
                    if !s.ready.contains(&name) {
                        s.unready.insert(name, now);
                    }
                }
            }
        }
    }
}

/// Stamps a marked pod's endpoint once every slice shows it not ready, or no longer lists it.
async fn watch_slices(client: kube::Client, stamps: Arc<Mutex<Stamps>>) {
    let api: Api<EndpointSlice> = Api::default_namespaced(client);
    let mut w = std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    let mut slices: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    while let Some(ev) = w.next().await {
        match ev {
            Ok(watcher::Event::Apply(s)) | Ok(watcher::Event::InitApply(s)) => {
                slices.insert(s.metadata.name.clone().unwrap_or_default(), s);
            }
            Ok(watcher::Event::Delete(s)) => {
                slices.remove(s.metadata.name.as_deref().unwrap_or(""));
            }
            _ => continue,
        }
        let now = Instant::now();
        let ready: BTreeSet<String> = slices
            .values()
            .flat_map(|s| s.endpoints.iter().flatten())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
            .filter_map(|e| e.target_ref.as_ref().and_then(|r| r.name.clone()))
            .collect();
        if let Ok(mut s) = stamps.lock() {
            s.ready = ready.clone();
            let gone: Vec<String> = s
                .marked
                .keys()
                .filter(|k| !ready.contains(*k) && !s.unready.contains_key(*k))
                .cloned()
                .collect();
            for k in gone {
                s.unready.insert(k, now);
            }
        }
    }
}
