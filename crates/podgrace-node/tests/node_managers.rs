//! The kubelet's node-level managers on the process runtime, with real pods in real cgroups:
//! the eviction manager measuring `memory.available` from the pods' cgroups and evicting the
//! pod the kubelet would, and the node shutdown manager killing pods by priority group.
//! Needs root for the cgroups (CI runs as root); skipped elsewhere.
//!
//! The tests share one cgroup root (`/podgrace/<PID>`: one test process is one node), so they
//! run one at a time.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::need_namespaces;
use podgrace_core::manifest;
use podgrace_core::rules::apiserver::{KubectlDeleteFlags, PodPhase as ApiPhase};
use podgrace_core::rules::eviction::{
    parse_threshold_config, EvictionConfig, EvictionFlags, NodePressureCondition,
};
use podgrace_core::rules::nodeshutdown::migrate_config;
use podgrace_core::KubeVersion;
use podgrace_node::events::EventRecorder;
use podgrace_node::eviction::{self, EvictionSettings, NodeEvent};
use podgrace_node::kubelet::active::ActivePods;
use podgrace_node::kubelet::{
    run_pod, HookOutcome, PodCommand, PodHandle, PodOptions, PodReport, PodWorkerState,
    TerminationReason,
};
use podgrace_node::nodeshutdown;
use podgrace_node::runtime::cgroup;
use podgrace_node::runtime::{CallContext, ProcessRuntime, RuntimeService};
use podgrace_node::sandbox::NetworkConfig;

/// One node per test process: the tests take turns.
static NODE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn need_cgroups(test: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("SKIP {test}: creating cgroups needs root");
    }
    root && need_namespaces(test) && eviction::memory::memory_mount().is_some()
}

fn uid(tag: &str) -> String {
    format!(
        "00000000-0000-4000-8000-{:06x}{tag}",
        std::process::id() & 0xff_ffff
    )
}

fn start(
    rt: &Arc<ProcessRuntime>,
    yaml: &str,
    uid: &str,
    node: &ActivePods,
    version: KubeVersion,
) -> PodHandle {
    let m = manifest::load(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let plan = m.pods().next().expect("a pod").clone();
    run_pod(
        rt.clone(),
        plan,
        PodOptions {
            uid: Some(uid.into()),
            node: Some(node.clone()),
            version,
            ..PodOptions::default()
        },
        EventRecorder::new(),
    )
}

async fn running(pod: &PodHandle) {
    let mut st = pod.status();
    tokio::time::timeout(
        Duration::from_secs(20),
        st.wait_for(|s| s.phase == PodWorkerState::Running),
    )
    .await
    .expect("running within 20 s")
    .expect("status");
}

async fn report(rt: &Arc<ProcessRuntime>, pod: PodHandle) -> PodReport {
    let r = tokio::time::timeout(Duration::from_secs(40), pod.wait())
        .await
        .expect("pod ended within 40 s")
        .expect("pod report");
    if let Some(sb) = &r.sandbox {
        let _ = rt.remove_pod_sandbox(&CallContext::background(), sb).await;
    }
    r
}

fn end(pod: &PodHandle) {
    pod.send(PodCommand::Delete(KubectlDeleteFlags {
        grace_period: 0,
        force: true,
        now: false,
    }));
}

/// The terminal status the pod's API object got (phase, reason, message).
fn terminal(r: &PodReport) -> (ApiPhase, String, String) {
    let e = r
        .object
        .iter()
        .rev()
        .find(|e| matches!(e.phase, ApiPhase::Failed | ApiPhase::Succeeded))
        .unwrap_or_else(|| panic!("no terminal status in {:?}", r.object));
    (e.phase, e.reason.clone(), e.message.clone())
}

/// Field case: a BestEffort pod allocating 64 MiB (python3) next to a Guaranteed pod on a node
/// of 256Mi with `--eviction-hard memory.available<224Mi`. When the hog's memory pushes
/// `memory.available` under 224Mi, the eviction manager's round reads the pods' cgroups,
/// ranks the BestEffort pod first (its usage exceeds its request of 0) and evicts it with
/// the hard override (1 s from 1.31): its preStop (`sleep 30`) is cut at 1 s, the Killing
/// is recorded with the `Evicted` event first, the node reports MemoryPressure, and the pod
/// ends `Failed`, reason `Evicted`, with the kubelet's message naming the threshold, what
/// was available and the container's usage. The Guaranteed pod keeps running. The stop
/// signal's delay after the round that chose the pod is printed (the 5 ms target).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_best_effort_hog_is_evicted_at_a_hard_threshold_and_a_guaranteed_pod_survives() {
    let _node = NODE.lock().await;
    if !need_cgroups("a_best_effort_hog_is_evicted_at_a_hard_threshold") {
        return;
    }
    let version = KubeVersion::new(1, 32);
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let rt = Arc::new(rt);
    let node = ActivePods::new();
    let guaranteed = start(
        &rt,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: steady}\nspec:\n  containers:\n  - name: app\n    image: demo\n    command: [sleep, '1000']\n    resources: {limits: {cpu: 100m, memory: 48Mi}}\n",
        &uid("g1"),
        &node,
        version,
    );
    running(&guaranteed).await;
    let settings = EvictionSettings {
        config: EvictionConfig {
            thresholds: parse_threshold_config(&EvictionFlags {
                hard: Some("memory.available<224Mi".into()),
                ..EvictionFlags::default()
            })
            .expect("thresholds"),
            eviction_max_pod_grace_period_seconds: 0,
            pressure_transition_period: Duration::from_secs(300),
        },
        node_memory_bytes: 256 << 20,
        monitoring_interval: Duration::from_millis(100),
        version,
    };
    let node_events: Arc<std::sync::Mutex<Vec<NodeEvent>>> = Arc::default();
    let sink = node_events.clone();
    let manager = eviction::start(
        settings,
        node.clone(),
        &cgroup::process_root(),
        Arc::new(move |e| sink.lock().unwrap().push(e)),
    );
    // Nothing is evicted while the node's pods use little.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(manager.evictions().is_empty(), "no pressure yet");
    assert!(manager.conditions().borrow().is_empty());
    let hog = start(
        &rt,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: hog}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: hog\n    image: demo\n    command: [python3, -c, \"import time; x = b'x' * (64 << 20); time.sleep(60)\"]\n    lifecycle:\n      preStop:\n        exec: {command: [sleep, '30']}\n",
        &uid("h1"),
        &node,
        version,
    );
    let mut conditions = manager.conditions();
    tokio::time::timeout(
        Duration::from_secs(20),
        conditions.wait_for(|c| c.contains(&NodePressureCondition::MemoryPressure)),
    )
    .await
    .expect("MemoryPressure within 20 s")
    .expect("conditions");
    let r = report(&rt, hog).await;
    let evictions = manager.evictions();
    assert_eq!(evictions.len(), 1, "{evictions:?}");
    let e = &evictions[0];
    assert_eq!(e.pod, "default/hog");
    assert!(e.hard);
    assert_eq!(e.grace_period_override, 1, "the hard override from 1.31");
    assert!(e.available_bytes < 224 << 20, "{}", e.available_bytes);
    let prefix = "The node was low on resource: memory. Threshold quantity: 224Mi, available: ";
    assert!(e.message.starts_with(prefix), "{}", e.message);
    assert!(
        e.message.contains(". Container hog was using ")
            && e.message
                .ends_with(", request is 0, has larger consumption of memory. "),
        "{}",
        e.message
    );
    // The kill: the Evicted event before Killing, the grace of 1 s, the preStop cut.
    let reasons: Vec<&str> = r.events.iter().map(|e| e.reason).collect();
    let evicted_at = reasons
        .iter()
        .position(|r| *r == "Evicted")
        .expect("Evicted");
    let killing_at = reasons
        .iter()
        .position(|r| *r == "Killing")
        .expect("Killing");
    assert!(evicted_at < killing_at, "{reasons:?}");
    assert_eq!(r.events[evicted_at].message, e.message);
    let t = &r.containers[0].terminations[0];
    assert_eq!(t.reason, TerminationReason::Evicted);
    assert_eq!(t.kill.grace_period_seconds, 1);
    let hook = t.kill.pre_stop.as_ref().expect("preStop ran");
    assert_eq!(hook.outcome, HookOutcome::Cut);
    let budget = hook.ended - hook.started;
    assert!(
        budget >= Duration::from_millis(900) && budget < Duration::from_secs(3),
        "preStop cut after {budget:?}"
    );
    let (phase, reason, message) = terminal(&r);
    assert_eq!(
        (phase, reason.as_str(), message.as_str()),
        (ApiPhase::Failed, "Evicted", e.message.as_str())
    );
    eprintln!(
        "evicted at memory.available {} bytes; killPodNow sent {:?} after the round began, \
         Killing {:?} after",
        e.available_bytes,
        e.sent_at - e.round_at,
        r.events[killing_at]
            .at
            .saturating_duration_since(e.round_at)
    );
    let events = node_events.lock().unwrap().clone();
    assert!(
        events.iter().any(|e| e.warning
            && e.reason == "EvictionThresholdMet"
            && e.message == "Attempting to reclaim memory"),
        "{events:?}"
    );
    // The Guaranteed pod is untouched.
    assert_eq!(guaranteed.status().borrow().phase, PodWorkerState::Running);
    assert_eq!(manager.evictions().len(), 1);
    manager.stop();
    end(&guaranteed);
    let g = report(&rt, guaranteed).await;
    assert!(g.containers[0]
        .terminations
        .iter()
        .all(|t| t.reason == TerminationReason::Deleted));
}

/// Field case: a node shutdown with `shutdownGracePeriod` 6 s and
/// `shutdownGracePeriodCriticalPods` 3 s: the regular pod (TGPS 30, a preStop `sleep 30`) is
/// killed first with the override 3 s (6 − 3), its preStop cut at 3 s; the critical pod
/// (priority 2000001000, TGPS 30, exiting 143 on SIGTERM) is killed only when the regular
/// group's 3 s have passed, with the override 3 s, so it outlives the other. Both end
/// `Failed`, reason `Terminated`, "Pod was terminated in response to imminent node
/// shutdown.".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_shutdown_kills_regular_pods_first_and_critical_pods_last() {
    let _node = NODE.lock().await;
    if !need_cgroups("a_node_shutdown_kills_regular_pods_first_and_critical_pods_last") {
        return;
    }
    let version = KubeVersion::new(1, 32);
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let rt = Arc::new(rt);
    let node = ActivePods::new();
    let regular = start(
        &rt,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    image: demo\n    command: [sleep, '1000']\n    lifecycle:\n      preStop:\n        exec: {command: [sleep, '30']}\n",
        &uid("r1"),
        &node,
        version,
    );
    let critical = start(
        &rt,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: agent, namespace: kube-system}\nspec:\n  priority: 2000001000\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    image: demo\n    command: [sh, -c, 'trap \"exit 143\" TERM; while true; do sleep 0.1; done']\n",
        &uid("c1"),
        &node,
        version,
    );
    running(&regular).await;
    running(&critical).await;
    let groups = migrate_config(6, 3).expect("groups");
    let t0 = Instant::now();
    let records = nodeshutdown::kill_pods(&node, &groups).await;
    let done = t0.elapsed();
    let names: Vec<(&str, i32, i64)> = records
        .iter()
        .map(|r| (r.pod.as_str(), r.group_priority, r.grace_period_override))
        .collect();
    assert_eq!(
        names,
        [
            ("default/web", 0, 3),
            ("kube-system/agent", 2_000_000_000, 3)
        ]
    );
    let gap = records[1].sent_at - records[0].sent_at;
    assert!(
        gap >= Duration::from_millis(2900) && gap < Duration::from_millis(4500),
        "the critical group starts when the regular group's 3 s are over: {gap:?}"
    );
    assert!(done < Duration::from_secs(8), "{done:?}");
    let web = report(&rt, regular).await;
    let agent = report(&rt, critical).await;
    let killed = |r: &PodReport| {
        let t = &r.containers[0].terminations[0];
        assert_eq!(t.reason, TerminationReason::NodeShutdown);
        assert_eq!(t.kill.grace_period_seconds, 3);
        t.kill.started
    };
    let (web_kill, agent_kill) = (killed(&web), killed(&agent));
    assert!(agent_kill > web_kill);
    let hook = web.containers[0].terminations[0]
        .kill
        .pre_stop
        .as_ref()
        .expect("preStop");
    assert_eq!(hook.outcome, HookOutcome::Cut);
    for r in [&web, &agent] {
        let (phase, reason, message) = terminal(r);
        assert_eq!(
            (phase, reason.as_str(), message.as_str()),
            (
                ApiPhase::Failed,
                "Terminated",
                "Pod was terminated in response to imminent node shutdown."
            ),
            "{}",
            r.pod
        );
    }
    // The critical pod outlived the regular one's kill start by its group's wait.
    eprintln!(
        "regular killed at {:?}, critical at {:?}",
        web_kill - t0,
        agent_kill - t0
    );
}

/// Field case (k/k#118172): a soft threshold (grace period 1 s) with
/// `evictionMaxPodGracePeriod` 0 and -1. The
/// override is `min(evictionMaxPodGracePeriod, TGPS)`, so 0 and -1 as they are (-1 does not
/// defer to the pod's 30 s), and the pod worker makes either a grace of 1 s: the pod that asked
/// for 30 s gets its stop signal at once and SIGKILL 2 s later (`minimumGracePeriodInSeconds`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_eviction_with_a_max_pod_grace_period_of_0_or_minus_1_kills_at_once() {
    let _node = NODE.lock().await;
    if !need_cgroups("a_soft_eviction_with_a_max_pod_grace_period_of_0_or_minus_1") {
        return;
    }
    let version = KubeVersion::new(1, 32);
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let rt = Arc::new(rt);
    for (max, tag) in [(0i64, "s0"), (-1, "s1")] {
        let node = ActivePods::new();
        let settings = EvictionSettings {
            config: EvictionConfig {
                thresholds: parse_threshold_config(&EvictionFlags {
                    hard: Some("memory.available<1Mi".into()),
                    soft: Some("memory.available<224Mi".into()),
                    // A grace period of 0 would make it a hard threshold (`isHardEvictionThreshold`).
                    soft_grace_period: Some("memory.available=1s".into()),
                    ..EvictionFlags::default()
                })
                .expect("thresholds"),
                eviction_max_pod_grace_period_seconds: max,
                pressure_transition_period: Duration::from_secs(300),
            },
            node_memory_bytes: 256 << 20,
            monitoring_interval: Duration::from_millis(100),
            version,
        };
        let manager = eviction::start(
            settings,
            node.clone(),
            &cgroup::process_root(),
            Arc::new(|_| {}),
        );
        let hog = start(
            &rt,
            "apiVersion: v1\nkind: Pod\nmetadata: {name: hog}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: hog\n    image: demo\n    command: [python3, -c, \"import time; x = b'x' * (64 << 20); time.sleep(60)\"]\n",
            &uid(tag),
            &node,
            version,
        );
        let r = report(&rt, hog).await;
        let evictions = manager.evictions();
        manager.stop();
        assert_eq!(evictions.len(), 1, "max {max}: {evictions:?}");
        let e = &evictions[0];
        assert!(!e.hard);
        assert_eq!(e.grace_period_override, max);
        let t = &r.containers[0].terminations[0];
        assert_eq!(t.reason, TerminationReason::Evicted);
        assert_eq!(t.kill.grace_period_seconds, 1, "max {max}");
        assert_eq!(t.kill.stop_timeout_seconds, 2, "max {max}");
        let (phase, reason, _) = terminal(&r);
        assert_eq!((phase, reason.as_str()), (ApiPhase::Failed, "Evicted"));
    }
}
