//! create → Running for N pods (default 100) on the process runtime: podgrace's API server
//! in-process, the local kubelet syncing from it through kube-rs, one client creating the pods
//! one after the other and a watch timing each pod from its create request to the first
//! version whose Ready condition is True (the container started, the status written, the
//! watch event delivered). Then every pod is deleted (grace 0 after a plain delete's SIGTERM:
//! the app exits on it) and the time until all are gone is reported.
//!
//! `cargo run --release -p podgrace-kubelet --example bench_start -- [--pods N] [--host-network]`

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api as KApi, DeleteParams, PostParams, WatchEvent, WatchParams};
use podgrace_api::{http::router, Api, ApiConfig};
use podgrace_kubelet::{start, KubeletConfig, ProcessRuntimes};
use serde_json::json;

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .iter()
        .position(|a| a == "--pods")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    // `--host-network`: the pods use the host's network (no network namespace and veth per pod).
    let host_network = args.iter().any(|a| a == "--host-network");
    // `RUST_LOG=podgrace::start=debug`: the start path's steps, timestamped, on stderr.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
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
    let pods: KApi<Pod> = KApi::default_namespaced(client.clone());
    let mut watch = pods
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    tokio::spawn(async move {
        while let Some(Ok(ev)) = watch.next().await {
            if let WatchEvent::Modified(p) = ev {
                let ready = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if ready {
                    let _ = tx.send((p.metadata.name.unwrap_or_default(), Instant::now()));
                }
            }
        }
    });
    let mut created: HashMap<String, Instant> = HashMap::new();
    let begin = Instant::now();
    for i in 0..n {
        let name = format!("p{i}");
        let p: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 2, "hostNetwork": host_network, "containers": [{"name": "app", "image": "busybox:1.36",
                "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]}]}}))
        .unwrap();
        let at = Instant::now();
        pods.create(&PostParams::default(), &p)
            .await
            .expect("create");
        created.insert(name, at);
    }
    let mut latencies = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while seen.len() < n {
        let Ok(Some((name, at))) = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await
        else {
            eprintln!("timed out: {} of {n} Running", seen.len());
            break;
        };
        if seen.insert(name.clone()) {
            latencies.push(at.duration_since(created[&name]));
        }
    }
    let all_running = begin.elapsed();
    latencies.sort();
    println!(
        "{n} pods create → Running (Ready): p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms; all Running {:.2} s after the first create",
        pct(&latencies, 0.50),
        pct(&latencies, 0.90),
        pct(&latencies, 0.99),
        pct(&latencies, 1.0),
        all_running.as_secs_f64()
    );
    let del = Instant::now();
    for i in 0..n {
        let _ = pods
            .delete(&format!("p{i}"), &DeleteParams::default())
            .await;
    }
    loop {
        let left = pods
            .list(&Default::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "{n} pods deleted (SIGTERM, exit 0) and gone {:.2} s after the first delete",
        del.elapsed().as_secs_f64()
    );
    kubelet.shutdown().await;
}
