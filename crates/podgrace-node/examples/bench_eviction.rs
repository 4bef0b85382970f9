//! The CPU cost of one eviction manager round at N pods (the issue's target: under 1 ms at
//! 100 pods).
//!
//! ```text
//! cargo run --release -p podgrace-node --example bench_eviction -- [--pods 100] [--rounds 2000]
//! ```
//!
//! N pod cgroups (`/podgrace/<PID>/kubepods/besteffort/pod<UID>`) with one container cgroup
//! each are made in the memory, cpu and pids hierarchies (empty cgroups: reading their files
//! costs what it costs for a running pod), and N BestEffort pods are registered as the node's
//! active pods. The node's capacity is 1 MiB against `memory.available<100Mi`, so the hard
//! threshold is met at every round and every round does all of its work: the node's working
//! set (`kubepods`' `memory.usage_in_bytes`/`memory.current` and `memory.stat`), every pod's
//! and container's working set, the ranking and the choice of a pod (no pod is killed: the
//! bench sends the kill to nobody). Rounds run back to back on this thread, without tokio.
//!
//! Reported: the process's CPU time (user + system, `/proc/self/stat`, in clock ticks) over
//! all rounds divided by their number, and the wall time per round (p50, p99, max, nearest
//! rank), in microseconds. Needs root (cgroups); the cgroups are removed at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use podgrace_core::rules::eviction::{parse_threshold_config, EvictionConfig, EvictionFlags};
use podgrace_core::KubeVersion;
use podgrace_node::eviction::{EvictionSettings, Manager};
use podgrace_node::kubelet::active::{ActivePod, ActivePods};
use podgrace_node::kubelet::cri::PodIdentity;
use podgrace_node::kubelet::{PodStatus, PodWorkerState};
use podgrace_node::runtime::cgroup::{self, OwnedCgroup};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// utime + stime of this process, in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // After the comm: state is field 0, utime 11, stime 12.
    n(11) + n(12)
}

fn main() {
    let pods = arg("--pods", 100);
    let rounds = arg("--rounds", 2000).max(1);
    if !rustix::process::geteuid().is_root() {
        eprintln!("bench_eviction: needs root (cgroups)");
        std::process::exit(2);
    }
    let root = cgroup::process_root();
    let plan = podgrace_core::manifest::load(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: app\n    image: demo\n    command: [sleep, '1000']\n",
        "bench.yaml",
    )
    .expect("manifest")
    .pods()
    .next()
    .expect("pod")
    .clone();
    let active = ActivePods::new();
    let mut cgroups = Vec::new();
    let mut keep = Vec::new();
    for i in 0..pods {
        let uid = format!("00000000-0000-4000-8000-{i:012}");
        let pod_cg = format!("{root}/kubepods/besteffort/pod{uid}");
        let cid = format!("{i:064x}");
        let c = OwnedCgroup::create(&format!("{pod_cg}/{cid}")).expect("container cgroup");
        cgroups.push(c);
        let mut p = plan.clone();
        p.name = format!("pod-{i}");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (_st_tx, st_rx) = tokio::sync::watch::channel(PodStatus {
            phase: PodWorkerState::Running,
            pod_ip: None,
            ready: true,
            terminating_since: None,
            grace_period_seconds: None,
            last_delete: None,
            killed: None,
            container_ids: vec![("app".into(), cid)],
            waiting: Vec::new(),
        });
        keep.push((rx, _st_tx));
        keep_registration(
            &active,
            ActivePod::new(
                PodIdentity {
                    name: p.name.clone(),
                    namespace: "default".into(),
                    uid,
                },
                Arc::new(p),
                pod_cg,
                tx,
                st_rx,
            ),
        );
    }
    let settings = EvictionSettings {
        config: EvictionConfig {
            thresholds: parse_threshold_config(&EvictionFlags {
                hard: Some("memory.available<100Mi".into()),
                ..EvictionFlags::default()
            })
            .expect("thresholds"),
            eviction_max_pod_grace_period_seconds: 0,
            pressure_transition_period: Duration::from_secs(300),
        },
        node_memory_bytes: 1 << 20,
        monitoring_interval: Duration::from_secs(10),
        version: KubeVersion::LATEST,
    };
    let mut m = Manager::new(settings, active.clone(), &root);
    // Warm-up: the files are opened once.
    let first = m.round().expect("round");
    assert!(
        first.pod.is_some(),
        "the threshold is met and a pod is chosen"
    );
    let mut wall = Vec::with_capacity(rounds);
    let c0 = cpu_ticks();
    let t0 = Instant::now();
    for _ in 0..rounds {
        let t = Instant::now();
        let r = m.round().expect("round");
        wall.push(t.elapsed());
        assert!(r.pod.is_some());
    }
    let total = t0.elapsed();
    let ticks = cpu_ticks() - c0;
    let hz = 100.0; // USER_HZ on Linux.
    wall.sort();
    let pct = |p: f64| {
        let i = ((p / 100.0) * wall.len() as f64).ceil() as usize;
        wall[i.clamp(1, wall.len()) - 1].as_secs_f64() * 1e6
    };
    println!(
        "bench_eviction: {pods} pods, {rounds} rounds: CPU {:.0} µs/round ({ticks} ticks), wall p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs (total {:.2} s)",
        ticks as f64 / hz / rounds as f64 * 1e6,
        pct(50.0),
        pct(99.0),
        wall.last().map_or(0.0, |w| w.as_secs_f64() * 1e6),
        total.as_secs_f64()
    );
    drop(m);
    drop(active);
    for c in &cgroups {
        let _ = c.remove();
    }
}

/// Registers the pod for the rest of the run (the registration is leaked: the process ends).
fn keep_registration(active: &ActivePods, pod: ActivePod) {
    std::mem::forget(active.register(pod));
}
