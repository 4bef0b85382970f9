//! Parallel starts in one process (issue 11 item 3, and the node half of issue 12's
//! create → Running): N pods (default 100) handed to the node layer's pod worker at once
//! ([`run_pod`] on one shared [`ProcessRuntime`], as `podgrace run` and serve's kubelet run
//! them), each timed from its `run_pod` to the pod worker's `Running` with the container
//! started; then all are deleted at once (the app exits 0 on SIGTERM) and the time until every
//! pod has terminated is reported, with this process's CPU time (user + system, from
//! `/proc/self/stat`) for the starts and for the stops.
//!
//! `cargo run --release -p podgrace-node --example bench_pods -- [--pods N] [--host-network]`
//! (root for PID namespaces and pod networks). `RUST_LOG=podgrace::start=debug` prints the
//! start path's steps with their times on stderr.

use std::sync::Arc;
use std::time::{Duration, Instant};

use podgrace_core::manifest;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{run_pod, PodCommand, PodOptions, PodWorkerState};
use podgrace_node::runtime::ProcessRuntime;
use podgrace_node::sandbox::NetworkConfig;

/// This process's CPU time so far (user + system), seconds.
fn cpu_seconds() -> f64 {
    let stat = procfs::process::Process::myself().and_then(|p| p.stat());
    stat.map(|s| (s.utime + s.stime) as f64 / procfs::ticks_per_second() as f64)
        .unwrap_or(0.0)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .iter()
        .position(|a| a == "--pods")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let host_network = args.iter().any(|a| a == "--host-network");
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let (runtime, mut output) = ProcessRuntime::new(NetworkConfig::default());
    let runtime = Arc::new(runtime);
    tokio::spawn(async move { while output.recv().await.is_some() {} });
    let plans: Vec<_> = (0..n)
        .map(|i| {
            let yaml = format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  hostNetwork: {host_network}\n  \
                 terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: busybox:1.36\n    \
                 command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 1; done\"]\n"
            );
            let m = manifest::load(&yaml, "bench.yaml").expect("manifest");
            let plan = m.pods().next().cloned().expect("a pod");
            plan
        })
        .collect();
    // The process-wide first-use work (spawner, namespaces probe, address range) out of the
    // timing: one pod started and stopped first.
    {
        let mut plan = plans[0].clone();
        plan.name = "warm".into();
        let h = run_pod(
            runtime.clone(),
            plan,
            PodOptions::default(),
            EventRecorder::new(),
        );
        let mut st = h.status();
        let _ = st.wait_for(|s| s.phase == PodWorkerState::Running).await;
        h.send(PodCommand::Delete(KubectlDeleteFlags::default()));
        let _ = h.wait().await;
    }
    let cpu0 = cpu_seconds();
    let begin = Instant::now();
    let mut waits = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for plan in plans {
        let at = Instant::now();
        let h = run_pod(
            runtime.clone(),
            plan,
            PodOptions::default(),
            EventRecorder::new(),
        );
        let mut st = h.status();
        waits.push(tokio::spawn(async move {
            let ok = tokio::time::timeout(
                Duration::from_secs(120),
                st.wait_for(|s| s.phase == PodWorkerState::Running),
            )
            .await
            .is_ok_and(|r| r.is_ok());
            ok.then(|| at.elapsed().as_secs_f64() * 1e3)
        }));
        handles.push(h);
    }
    let mut ms = Vec::with_capacity(n);
    for w in waits {
        if let Ok(Some(v)) = w.await {
            ms.push(v);
        }
    }
    let all = begin.elapsed();
    let cpu_start = cpu_seconds() - cpu0;
    ms.sort_by(f64::total_cmp);
    if ms.len() < n {
        eprintln!("only {} of {n} pods Running", ms.len());
    }
    println!(
        "{n} pods started at once ({}): run_pod → Running p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms; all Running {:.0} ms after the first; CPU {:.2} ms per pod",
        if host_network { "hostNetwork" } else { "pod network" },
        pct(&ms, 0.5),
        pct(&ms, 0.9),
        pct(&ms, 0.99),
        pct(&ms, 1.0),
        all.as_secs_f64() * 1e3,
        cpu_start * 1e3 / n as f64
    );
    let cpu1 = cpu_seconds();
    let del = Instant::now();
    for h in &handles {
        h.send(PodCommand::Delete(KubectlDeleteFlags::default()));
    }
    for h in handles {
        let _ = h.wait().await;
    }
    println!(
        "{n} pods deleted at once (SIGTERM, exit 0) and terminated {:.0} ms after the first delete; CPU {:.2} ms per pod",
        del.elapsed().as_secs_f64() * 1e3,
        (cpu_seconds() - cpu1) * 1e3 / n as f64
    );
}
