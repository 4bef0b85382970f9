//! Pods on the real containerd through podgrace-node's kubelet, for the tests that drive
//! `run_pod` against a [`ContainerdRuntime`] directly: connect, start a pod of a manifest with a
//! UID of the test's own, wait for it to run, force-delete it and remove its sandbox, and find
//! its processes from the host.
// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use podgrace_core::manifest;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{
    run_pod, PodCommand, PodHandle, PodOptions, PodReport, PodWorkerState,
};
use podgrace_node::runtime::{CallContext, ContainerdRuntime, RuntimeService};

/// Connects to containerd at `sock`, its CRI log files under
/// `$TMPDIR/podgrace-test-TAG-logs-PID`.
pub async fn runtime(sock: &Path, tag: &str) -> Arc<ContainerdRuntime> {
    let logs =
        std::env::temp_dir().join(format!("podgrace-test-{tag}-logs-{}", std::process::id()));
    let (rt, _out) = ContainerdRuntime::connect(sock, &logs)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    Arc::new(rt)
}

/// A pod UID of this test process: `00000000-0000-4000-8000-PPPPPPTAG` (the low 24 bits of the
/// pid in hex, then `tag`), so that parallel test processes never share a pod cgroup.
pub fn uid(tag: &str) -> String {
    format!(
        "00000000-0000-4000-8000-{:06x}{tag}",
        std::process::id() & 0xff_ffff
    )
}

/// Starts the pod of `yaml` (its configMap and secret volumes and env resolved against the
/// objects of the same text) with `uid`; does not wait.
pub fn start(rt: &Arc<ContainerdRuntime>, yaml: &str, uid: &str) -> PodHandle {
    let m = manifest::load(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let plan = m.pods().next().expect("a pod").clone();
    let plan = m.resolve_env_from(&plan).unwrap_or_else(|e| panic!("{e}"));
    run_pod(
        rt.clone(),
        plan,
        PodOptions {
            uid: Some(uid.into()),
            ..PodOptions::default()
        },
        EventRecorder::new(),
    )
}

/// Waits (up to 60 s) until the pod runs (or has already ended).
pub async fn running(pod: &PodHandle) {
    let mut st = pod.status();
    tokio::time::timeout(
        Duration::from_secs(60),
        st.wait_for(|s| {
            s.phase == PodWorkerState::Running || s.phase == PodWorkerState::Terminated
        }),
    )
    .await
    .expect("pod running within 60 s")
    .expect("status");
}

/// Deletes the pod with grace 0 (`--force`), waits (up to 60 s) for its report and removes its
/// sandbox.
pub async fn delete(rt: &Arc<ContainerdRuntime>, pod: PodHandle) -> PodReport {
    pod.send(PodCommand::Delete(KubectlDeleteFlags {
        grace_period: 0,
        force: true,
        now: false,
    }));
    let report = tokio::time::timeout(Duration::from_secs(60), pod.wait())
        .await
        .expect("pod ended within 60 s")
        .expect("pod report");
    if let Some(sb) = &report.sandbox {
        rt.remove_pod_sandbox(&CallContext::background(), sb)
            .await
            .expect("remove sandbox");
    }
    report
}

/// The pids whose environment holds `marker` (`NAME=VALUE`), seen from the host.
pub fn pids_with_env(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()))
        })
        .collect()
}
