//! Pods of the process runtime in cgroups: each pod in `/podgrace/<PID>` + the kubelet's pod
//! cgroup (`/podgrace/<PID>/kubepods/burstable/pod<UID>`) with the kubelet's pod limits, each container in
//! its own cgroup beneath with its CRI resources and oom_score_adj, all removed after; and a
//! container over its memory limit OOM-killed by the kernel (`OOMKilled`, exit 137, no
//! preStop, restarted per restartPolicy). Needs root (CI runs as root); skipped elsewhere.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::need_namespaces;
use podgrace_core::manifest;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{
    run_pod, PodCommand, PodHandle, PodOptions, PodReport, PodWorkerState,
};
use podgrace_node::process::ExitStatus;
use podgrace_node::runtime::cgroup::{self, Controller};
use podgrace_node::runtime::{CallContext, ProcessRuntime, RuntimeService};
use podgrace_node::sandbox::NetworkConfig;

fn need_cgroups(test: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("SKIP {test}: creating cgroups needs root");
    }
    root && need_namespaces(test)
}

fn uid(tag: &str) -> String {
    format!(
        "00000000-0000-4000-8000-{:06x}{tag}",
        std::process::id() & 0xff_ffff
    )
}

fn start(rt: &Arc<ProcessRuntime>, yaml: &str, uid: &str, events: EventRecorder) -> PodHandle {
    let m = manifest::load(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let plan = m.pods().next().expect("a pod").clone();
    run_pod(
        rt.clone(),
        plan,
        PodOptions {
            uid: Some(uid.into()),
            ..PodOptions::default()
        },
        events,
    )
}

async fn end(rt: &Arc<ProcessRuntime>, pod: PodHandle, remove: bool) -> PodReport {
    pod.send(PodCommand::Delete(KubectlDeleteFlags {
        grace_period: 0,
        force: true,
        now: false,
    }));
    let report = tokio::time::timeout(Duration::from_secs(30), pod.wait())
        .await
        .expect("pod ended within 30 s")
        .expect("pod report");
    if remove {
        if let Some(sb) = &report.sandbox {
            rt.remove_pod_sandbox(&CallContext::background(), sb)
                .await
                .expect("remove sandbox");
        }
    }
    report
}

fn dir(controller: Controller, path: &str) -> PathBuf {
    cgroup::controller_mounts()
        .into_iter()
        .find(|(c, _)| *c == controller)
        .map(|(_, m)| m.path.join(path.trim_start_matches('/')))
        .unwrap_or_else(|| panic!("no {controller:?} hierarchy"))
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_string()
}

/// The pod's container's PID 1 and its memory cgroup path (below the hierarchy's root).
async fn container_pid(marker: &str) -> (i32, String) {
    let t0 = std::time::Instant::now();
    loop {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            if env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()) {
                let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
                let path = cg
                    .lines()
                    .find(|l| {
                        l.split(':')
                            .nth(1)
                            .is_some_and(|c| c.split(',').any(|c| c == "memory"))
                            || l.starts_with("0::")
                    })
                    .and_then(|l| l.splitn(3, ':').nth(2))
                    .unwrap_or_default()
                    .to_string();
                return (pid, path);
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no process with {marker}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Burstable pod (requests cpu 250m, memory 32Mi; limits cpu 500m, memory 64Mi) and a
/// Guaranteed one (cpu 100m, memory 48Mi) on the process runtime: the container's PID 1 is in
/// `/podgrace/<PID>/kubepods[/burstable]/pod<UID>/<container id>`, whose files hold the kubelet's
/// values (`cpu.shares` 256 and 102, `cpu.cfs_quota_us` 50000 and 10000 per 100000 µs, the
/// memory limit, memsw at the limit), the pod cgroup `ResourceConfigForPod`'s; PID 1's
/// oom_score_adj is the kubelet's, raised to podgrace's own without CAP_SYS_RESOURCE (as
/// containerd's `restrict_oom_score_adj`). The pod's cgroups are gone after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_pods_and_containers_get_the_kubelets_cgroups() {
    if !need_cgroups("process_pods_and_containers_get_the_kubelets_cgroups") {
        return;
    }
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let rt = Arc::new(rt);
    let node = cgroup::node_resources();
    let own: i64 = read(PathBuf::from("/proc/self/oom_score_adj"))
        .parse()
        .unwrap();
    let capable = read(PathBuf::from("/proc/self/status"))
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|c| c & (1 << 24) != 0);
    for (qos, resources, shares, quota, memory, requested_oom) in [
        (
            "burstable",
            "{requests: {cpu: 250m, memory: 32Mi}, limits: {cpu: 500m, memory: 64Mi}}",
            256,
            50_000,
            64i64 << 20,
            1000 - (1000 * (32i64 << 20)) / node.memory_capacity,
        ),
        (
            "guaranteed",
            "{limits: {cpu: 100m, memory: 48Mi}}",
            102,
            10_000,
            48 << 20,
            -997,
        ),
    ] {
        let marker = format!("PODGRACE_PCG_{qos}_{}", std::process::id());
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: pcg-{qos}}}\nspec:\n  containers:\n  - name: app\n    command: [sleep, \"1000\"]\n    env: [{{name: {marker}, value: '1'}}]\n    resources: {resources}\n"
        );
        let uid = uid(if qos == "burstable" { "p1" } else { "p2" });
        let pod_cg = if qos == "guaranteed" {
            format!("{}/kubepods/pod{uid}", cgroup::process_root())
        } else {
            format!("{}/kubepods/{qos}/pod{uid}", cgroup::process_root())
        };
        let pod = start(&rt, &yaml, &uid, EventRecorder::new());
        let mut st = pod.status();
        tokio::time::timeout(
            Duration::from_secs(10),
            st.wait_for(|s| s.phase == PodWorkerState::Running),
        )
        .await
        .expect("running")
        .expect("status");
        let (pid, path) = container_pid(&format!("{marker}=1")).await;
        assert!(
            path.starts_with(&format!("{pod_cg}/")),
            "{path} under {pod_cg}"
        );
        let mem = dir(Controller::Memory, &path);
        let cpu = dir(Controller::Cpu, &path);
        assert_eq!(read(mem.join("memory.limit_in_bytes")), memory.to_string());
        if node.swap_controller {
            assert_eq!(
                read(mem.join("memory.memsw.limit_in_bytes")),
                memory.to_string()
            );
        }
        assert_eq!(read(cpu.join("cpu.shares")), shares.to_string());
        assert_eq!(read(cpu.join("cpu.cfs_quota_us")), quota.to_string());
        assert_eq!(read(cpu.join("cpu.cfs_period_us")), "100000");
        let pm = dir(Controller::Memory, &pod_cg);
        let pc = dir(Controller::Cpu, &pod_cg);
        assert_eq!(read(pm.join("memory.limit_in_bytes")), memory.to_string());
        assert_eq!(read(pc.join("cpu.shares")), shares.to_string());
        assert_eq!(read(pc.join("cpu.cfs_quota_us")), quota.to_string());
        if cgroup::controller_mounts()
            .iter()
            .any(|(c, _)| *c == Controller::Pids)
        {
            let procs = read(dir(Controller::Pids, &path).join("cgroup.procs"));
            assert_eq!(procs, pid.to_string(), "PID 1 in its pids cgroup");
        }
        let oom: i64 = read(PathBuf::from(format!("/proc/{pid}/oom_score_adj")))
            .parse()
            .unwrap();
        let expected = if capable {
            requested_oom
        } else {
            requested_oom.max(own)
        };
        assert_eq!(oom, expected, "the kubelet asked for {requested_oom}");
        eprintln!("{qos}: oom_score_adj requested {requested_oom}, applied {oom}");
        end(&rt, pod, true).await;
        for c in [Controller::Memory, Controller::Cpu] {
            assert!(!dir(c, &pod_cg).exists(), "{pod_cg} removed ({c:?})");
        }
    }
}

/// A container allocating 64 MiB (python3) under a 32Mi limit is OOM-killed by the kernel:
/// `OOMKilled`, exit 137, its preStop never runs, and under `restartPolicy: OnFailure` it
/// restarts at once, then waits out the back-off (`BackOff`) after its second kill. Its
/// cgroups are gone after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_a_container_over_its_memory_limit_is_oom_killed() {
    if !need_cgroups("process_a_container_over_its_memory_limit_is_oom_killed") {
        return;
    }
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let rt = Arc::new(rt);
    let marker = std::env::temp_dir().join(format!("podgrace-oom-prestop-{}", std::process::id()));
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: oom}}\nspec:\n  restartPolicy: OnFailure\n  containers:\n  - name: hog\n    command: [python3, -c, \"import time; x = b'x' * (64 << 20); time.sleep(60)\"]\n    lifecycle:\n      preStop:\n        exec: {{command: [touch, {}]}}\n    resources: {{limits: {{memory: 32Mi}}}}\n",
        marker.display()
    );
    let uid = uid("o2");
    let events = EventRecorder::new();
    let mut seen = events.subscribe();
    let pod = start(&rt, &yaml, &uid, events);
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(e) = seen.recv().await {
            if e.reason == "BackOff" {
                return;
            }
        }
    })
    .await
    .expect("two OOM kills and a back-off within 30 s");
    let report = end(&rt, pod, false).await;
    let hog = &report.containers[0];
    assert!(hog.exits.len() >= 2, "{:?}", hog.exits);
    for (_, status) in &hog.exits {
        assert_eq!(*status, ExitStatus::Signal(9), "{:?}", hog.exits);
    }
    assert!(hog.restarts >= 1);
    assert!(!marker.exists(), "the preStop never ran");
    let ctx = CallContext::background();
    for id in &hog.ids[..2] {
        let st = rt.container_status(&ctx, id).await.expect("status");
        assert_eq!(st.reason.as_deref(), Some("OOMKilled"), "{st:?}");
        assert_eq!(st.exit.map(ExitStatus::code), Some(137));
    }
    rt.remove_pod_sandbox(&ctx, report.sandbox.as_deref().expect("sandbox"))
        .await
        .expect("remove");
    let pod_cg = format!("{}/kubepods/burstable/pod{uid}", cgroup::process_root());
    assert!(
        !dir(Controller::Memory, &pod_cg).exists(),
        "{pod_cg} removed"
    );
}
