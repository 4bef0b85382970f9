//! The container resources the kubelet hands containerd, checked where they land: the cgroup
//! files runc wrote for the container and the kubelet's pod cgroup, and the oom_score_adj of
//! the container's process; and a container over its memory limit OOM-killed by the kernel,
//! which containerd reports as `OOMKilled`, exit code 137. Needs `.ci/containerd.sh start`
//! (CI runs it); see `containerd_support`.

mod containerd_support;
#[path = "containerd_support/pods.rs"]
mod pods;

use std::path::PathBuf;
use std::time::Duration;

use containerd_support::{socket, BUSYBOX};
use podgrace_core::manifest;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{run_pod, PodCommand, PodOptions};
use podgrace_node::process::ExitStatus;
use podgrace_node::runtime::{cgroup, CallContext, RuntimeService};
use pods::{delete, running, start, uid};

/// The pid whose environment holds `marker`, waited for up to 10 s.
async fn pid_with_env(marker: &str) -> i32 {
    let t0 = std::time::Instant::now();
    loop {
        let found = pods::pids_with_env(marker);
        if let [pid] = found[..] {
            return pid;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "one process with {marker}: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The process's cgroup directory in the hierarchy of `controller` (v1), from
/// `/proc/PID/cgroup`.
fn cgroup_dir(pid: i32, controller: &str) -> PathBuf {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let rel = cg
        .lines()
        .find(|l| {
            l.split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == controller))
        })
        .and_then(|l| l.splitn(3, ':').nth(2))
        .unwrap_or_else(|| panic!("no {controller} cgroup in {cg}"))
        .to_string();
    mount_of(controller).join(rel.trim_start_matches('/'))
}

fn mount_of(controller: &str) -> PathBuf {
    let m = cgroup::controller_mounts();
    let c = match controller {
        "memory" => cgroup::Controller::Memory,
        "cpu" => cgroup::Controller::Cpu,
        _ => cgroup::Controller::Pids,
    };
    m.into_iter()
        .find(|(k, _)| *k == c)
        .map(|(_, m)| m.path)
        .unwrap_or_else(|| panic!("no {controller} hierarchy"))
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_string()
}

/// The oom_score_adj containerd gives a container whose kubelet value is `requested`: with
/// `restrict_oom_score_adj = true` (these machines lack CAP_SYS_RESOURCE) never below
/// containerd's own (`restrictOOMScoreAdj`: `max(requested, current)`).
fn containerd_oom_score_adj(requested: i64) -> i64 {
    let sock = socket("oom").expect("socket");
    let pid = read(sock.parent().unwrap().join("containerd.pid"));
    let own: i64 = read(PathBuf::from(format!("/proc/{pid}/oom_score_adj")))
        .parse()
        .unwrap();
    requested.max(own)
}

/// A Burstable pod (requests cpu 250m, memory 32Mi; limits cpu 500m, memory 64Mi) and a
/// Guaranteed one (cpu 100m, memory 48Mi): the container's cgroup holds the values the kubelet
/// computes (`cpu.shares` 256 and 102, `cpu.cfs_quota_us` 50000 and 10000 per 100000 µs,
/// `memory.limit_in_bytes` and, with a swap controller, `memory.memsw.limit_in_bytes` at the
/// limit), the pod cgroup the kubelet's `ResourceConfigForPod`, and the process the
/// oom_score_adj containerd applies: the kubelet's (`1000 − 1000 × 32Mi / MemTotal`, 999 on a
/// 24 GB machine, for the Burstable one; -997 for Guaranteed) raised to containerd's own (0
/// here) under `restrict_oom_score_adj`: measured 999 and 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_container_cgroups_hold_the_kubelets_resources() {
    let Some(sock) = socket("containerd_container_cgroups_hold_the_kubelets_resources") else {
        return;
    };
    let rt = pods::runtime(&sock, "res").await;
    let node = cgroup::node_resources();
    assert!(node.memory_capacity > 0, "{node:?}");
    for (qos, resources, shares, quota, memory, requested_oom) in [
        (
            "burstable",
            "{requests: {cpu: 250m, memory: 32Mi}, limits: {cpu: 500m, memory: 64Mi}}",
            256,
            50_000,
            64 << 20,
            // GetContainerOOMScoreAdjust's Burstable formula.
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
        let marker = format!("PODGRACE_RES_{qos}_{}", std::process::id());
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: res-{qos}}}\nspec:\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, \"1000\"]\n    env: [{{name: {marker}, value: '1'}}]\n    resources: {resources}\n"
        );
        let uid = uid(if qos == "burstable" { "r1" } else { "r2" });
        let pod = start(&rt, &yaml, &uid);
        running(&pod).await;
        let pid = pid_with_env(&format!("{marker}=1")).await;
        let mem = cgroup_dir(pid, "memory");
        let cpu = cgroup_dir(pid, "cpu");
        let parent = if qos == "guaranteed" {
            format!("kubepods/pod{uid}")
        } else {
            format!("kubepods/{qos}/pod{uid}")
        };
        assert!(
            mem.parent().unwrap().ends_with(&parent),
            "{} under {parent}",
            mem.display()
        );
        assert_eq!(read(mem.join("memory.limit_in_bytes")), memory.to_string());
        if node.swap_controller {
            assert_eq!(
                read(mem.join("memory.memsw.limit_in_bytes")),
                memory.to_string(),
                "no swap beyond the limit"
            );
        }
        assert_eq!(read(cpu.join("cpu.shares")), shares.to_string());
        assert_eq!(read(cpu.join("cpu.cfs_quota_us")), quota.to_string());
        assert_eq!(read(cpu.join("cpu.cfs_period_us")), "100000");
        // The pod cgroup: ResourceConfigForPod (one container: the same numbers).
        let pod_mem = mem.parent().unwrap();
        let pod_cpu = cpu.parent().unwrap();
        assert_eq!(
            read(pod_mem.join("memory.limit_in_bytes")),
            memory.to_string()
        );
        assert_eq!(read(pod_cpu.join("cpu.shares")), shares.to_string());
        assert_eq!(read(pod_cpu.join("cpu.cfs_quota_us")), quota.to_string());
        assert_eq!(read(pod_cpu.join("cpu.cfs_period_us")), "100000");
        let oom: i64 = read(PathBuf::from(format!("/proc/{pid}/oom_score_adj")))
            .parse()
            .unwrap();
        assert_eq!(
            oom,
            containerd_oom_score_adj(requested_oom),
            "the kubelet asked for {requested_oom}"
        );
        eprintln!(
            "{qos}: oom_score_adj requested {requested_oom}, applied {oom}; shares {shares}, quota {quota}, memory {memory}"
        );
        delete(&rt, pod).await;
        assert!(
            !cgroup::exists(&format!("/{parent}")),
            "/{parent} removed with the sandbox"
        );
    }
}

/// A container allocating beyond its 32Mi limit is killed by the kernel's OOM killer:
/// containerd reports it `OOMKilled` with exit code 137, no preStop ran (the kubelet killed
/// nothing); under `restartPolicy: OnFailure` it restarts at once, and after its second OOM
/// kill waits out the back-off (`BackOff`). Nothing is left of the pod's cgroup after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_a_container_over_its_memory_limit_is_oom_killed() {
    let Some(sock) = socket("containerd_a_container_over_its_memory_limit_is_oom_killed") else {
        return;
    };
    let rt = pods::runtime(&sock, "res").await;
    let yaml = format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: oom}}\nspec:\n  restartPolicy: OnFailure\n  containers:\n  - name: hog\n    image: {BUSYBOX}\n{HOG}");
    let uid = uid("o1");
    let events = EventRecorder::new();
    let mut seen = events.subscribe();
    let m = manifest::load(&yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let pod = run_pod(
        rt.clone(),
        m.pods().next().expect("a pod").clone(),
        PodOptions {
            uid: Some(uid.clone()),
            ..PodOptions::default()
        },
        events,
    );
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(e) = seen.recv().await {
            if e.reason == "BackOff" {
                return;
            }
        }
    })
    .await
    .expect("two OOM kills and a back-off within 60 s");
    pod.send(PodCommand::Delete(KubectlDeleteFlags {
        grace_period: 0,
        force: true,
        now: false,
    }));
    let report = tokio::time::timeout(Duration::from_secs(60), pod.wait())
        .await
        .expect("pod ended")
        .expect("report");
    let hog = &report.containers[0];
    assert!(hog.exits.len() >= 2, "{:?}", hog.exits);
    for (_, status) in &hog.exits {
        assert_eq!(*status, ExitStatus::Signal(9), "{:?}", hog.exits);
        assert_eq!(status.code(), 137);
    }
    assert!(hog.restarts >= 1, "restarted under OnFailure");
    assert!(
        hog.terminations.iter().all(|t| t.kill.pre_stop.is_none()),
        "no preStop: {:?}",
        hog.terminations
    );
    let ctx = CallContext::background();
    for id in &hog.ids[..2] {
        let st = rt.container_status(&ctx, id).await.expect("status");
        assert_eq!(st.reason.as_deref(), Some("OOMKilled"), "{st:?}");
        assert_eq!(st.exit.map(ExitStatus::code), Some(137));
    }
    let sb = report.sandbox.clone().expect("sandbox");
    rt.remove_pod_sandbox(&ctx, &sb).await.expect("remove");
    assert!(!cgroup::exists(&format!("/kubepods/burstable/pod{uid}")));
}

/// The memory hog: a string doubled until it no longer fits in 32Mi, with a preStop that must
/// never run.
const HOG: &str = "    command: [sh, -c, 'a=xxxxxxxxxxxxxxxx; while true; do a=\"$a$a\"; done']\n    lifecycle:\n      preStop:\n        exec: {command: [sh, -c, 'sleep 1']}\n    resources: {limits: {memory: 32Mi}}\n";
