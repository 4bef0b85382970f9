//! The kubelet's node-level managers through `podgrace serve`, with real kubectl: node-pressure
//! eviction measured from the pods' cgroups (the pod `Failed`/`Evicted` with the kubelet's
//! message, the `Evicted` event, the node's MemoryPressure condition and taint) and graceful
//! node shutdown with `podgrace node shutdown` (regular pods first, the critical pod last, each
//! `Failed`/`Terminated`, the node NotReady). Needs root (cgroups, namespaces).

mod common;

use std::time::{Duration, Instant};

use common::serve::Serve;

/// Field case: on a node of 256Mi with `--eviction-hard memory.available<224Mi`, a BestEffort
/// pod allocating 64 MiB is evicted and a Guaranteed pod beside it survives: the hog ends
/// `Failed`, reason `Evicted`, with the kubelet's message (threshold, what was available, the
/// container's usage against its request of 0) and the `DisruptionTarget` condition; its
/// `Evicted` event carries the same message; the node shows `MemoryPressure` True
/// (`KubeletHasInsufficientMemory`) with the `node.kubernetes.io/memory-pressure:NoSchedule`
/// taint, and a new BestEffort pod (tolerating the taint, so scheduled) is rejected by the
/// kubelet's admission.
#[test]
fn serve_evicts_a_best_effort_hog_at_a_hard_threshold() {
    if !common::privileged("serve_evicts_a_best_effort_hog_at_a_hard_threshold") {
        return;
    }
    let s = Serve::start(
        "evict",
        &[
            "--runtime",
            "process",
            "--node-memory",
            "256Mi",
            "--eviction-hard",
            "memory.available<224Mi",
            "--eviction-monitoring-interval",
            "200ms",
            "--node-status-update-frequency",
            "500ms",
        ],
    );
    s.apply(
        "steady.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: steady}\nspec:\n  containers:\n  - name: app\n    image: demo\n    command: [sleep, '1000']\n    resources: {limits: {cpu: 100m, memory: 48Mi}}\n",
    );
    s.wait_for_output(
        &["get", "pod", "steady", "-o", "jsonpath={.status.phase}"],
        Duration::from_secs(30),
        |o| o == "Running",
    );
    s.apply(
        "hog.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: hog}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: hog\n    image: demo\n    command: [python3, -c, \"import time; x = b'x' * (64 << 20); time.sleep(60)\"]\n",
    );
    let reason = s.wait_for_output(
        &[
            "get",
            "pod",
            "hog",
            "-o",
            "jsonpath={.status.phase} {.status.reason}",
        ],
        Duration::from_secs(60),
        |o| o.starts_with("Failed"),
    );
    assert_eq!(reason, "Failed Evicted");
    let v: serde_json::Value =
        serde_json::from_str(&s.ok(&["get", "pod", "hog", "-o", "json"])).unwrap();
    let message = v["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.starts_with(
            "The node was low on resource: memory. Threshold quantity: 224Mi, available: "
        ) && message.contains(". Container hog was using ")
            && message.ends_with(", request is 0, has larger consumption of memory. "),
        "{message}"
    );
    let conds = v["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let dt = conds
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .unwrap_or_else(|| panic!("no DisruptionTarget in {conds:?}"));
    assert_eq!(
        (&dt["status"], &dt["reason"], dt["message"].as_str()),
        (
            &serde_json::json!("True"),
            &serde_json::json!("TerminationByKubelet"),
            Some(message.as_str())
        )
    );
    let events = s.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Evicted,involvedObject.name=hog",
        "-o",
        "jsonpath={.items[*].type}|{.items[*].message}",
    ]);
    assert_eq!(events, format!("Warning|{message}"));
    // The node: MemoryPressure True and its taint.
    let node = s.wait_for_output(
        &[
            "get",
            "node",
            "podgrace",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"MemoryPressure\")].status} {.status.conditions[?(@.type==\"MemoryPressure\")].reason} {.spec.taints[*].key}",
        ],
        Duration::from_secs(20),
        |o| o.contains("node.kubernetes.io/memory-pressure"),
    );
    assert_eq!(
        node,
        "True KubeletHasInsufficientMemory node.kubernetes.io/memory-pressure"
    );
    // The Guaranteed pod runs on.
    assert_eq!(
        s.ok(&["get", "pod", "steady", "-o", "jsonpath={.status.phase}"]),
        "Running"
    );
    // Under MemoryPressure (kept for the 5 m transition period) a BestEffort pod is rejected.
    s.apply(
        "late.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: late}\nspec:\n  tolerations: [{key: node.kubernetes.io/memory-pressure, operator: Exists}]\n  containers:\n  - name: app\n    image: demo\n    command: [sleep, '1000']\n",
    );
    let rejected = s.wait_for_output(
        &[
            "get",
            "pod",
            "late",
            "-o",
            "jsonpath={.status.phase}|{.status.reason}|{.status.message}",
        ],
        Duration::from_secs(30),
        |o| o.starts_with("Failed"),
    );
    assert_eq!(
        rejected,
        "Failed|Evicted|Pod was rejected: The node had condition: [MemoryPressure]. "
    );
    s.ok(&[
        "delete",
        "pod",
        "hog",
        "steady",
        "late",
        "--wait=true",
        "--timeout=60s",
    ]);
}

/// Field case: `serve --shutdown-grace-period 6s --shutdown-grace-period-critical-pods 3s`;
/// `podgrace node shutdown` kills the regular pod (TGPS 30) with the override 3 s first and the
/// critical pod (`priorityClassName: system-node-critical`, whose priority 2000001000 serve's
/// API sets as the Priority admission plugin does) 3 s later, when the regular group's period is over;
/// both end `Failed`, reason `Terminated`, "Pod was terminated in response to imminent node
/// shutdown.", and the node is NotReady ("node is shutting down") with the not-ready taint.
#[test]
fn podgrace_node_shutdown_kills_regular_pods_first_and_critical_pods_last() {
    if !common::privileged("podgrace_node_shutdown_kills_regular_pods_first_and_critical_pods_last")
    {
        return;
    }
    let s = Serve::start(
        "shutdown",
        &[
            "--runtime",
            "process",
            "--shutdown-grace-period",
            "6s",
            "--shutdown-grace-period-critical-pods",
            "3s",
            "--node-status-update-frequency",
            "500ms",
        ],
    );
    s.apply(
        "pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    image: demo\n    command: [sh, -c, 'trap \"exit 143\" TERM; while true; do sleep 0.1; done']\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: agent, namespace: kube-system}\nspec:\n  priorityClassName: system-node-critical\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    image: demo\n    command: [sh, -c, 'trap \"exit 143\" TERM; while true; do sleep 0.1; done']\n",
    );
    for (ns, name) in [("default", "web"), ("kube-system", "agent")] {
        s.wait_for_output(
            &[
                "get",
                "pod",
                name,
                "-n",
                ns,
                "-o",
                "jsonpath={.status.phase}",
            ],
            Duration::from_secs(30),
            |o| o == "Running",
        );
    }
    let t0 = Instant::now();
    let o = common::podgrace(&[
        "node",
        "shutdown",
        "--kubeconfig",
        s.kubeconfig.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let took = t0.elapsed();
    assert!(
        o.status.success(),
        "{}\nserve: {}",
        common::stderr(&o),
        s.stderr()
    );
    let v = common::json(&o);
    let pods = v["pods"].as_array().cloned().unwrap_or_default();
    let got: Vec<(String, i64, i64)> = pods
        .iter()
        .map(|p| {
            (
                p["pod"].as_str().unwrap_or_default().to_string(),
                p["groupPriority"].as_i64().unwrap_or(-1),
                p["gracePeriodSeconds"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("default/web".to_string(), 0, 3),
            ("kube-system/agent".to_string(), 2_000_000_000, 3)
        ],
        "{v}"
    );
    let sent = |i: usize| pods[i]["sentSeconds"].as_f64().unwrap_or(-1.0);
    // Both exit on SIGTERM: the regular group is done at once, and the critical group starts
    // right after it (the next group starts when every pod of this one is killed).
    assert!(sent(1) >= sent(0), "{v}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    for (ns, name) in [("default", "web"), ("kube-system", "agent")] {
        let st = s.wait_for_output(
            &[
                "get",
                "pod",
                name,
                "-n",
                ns,
                "-o",
                "jsonpath={.status.phase}|{.status.reason}|{.status.message}",
            ],
            Duration::from_secs(20),
            |o| o.starts_with("Failed"),
        );
        assert_eq!(
            st,
            "Failed|Terminated|Pod was terminated in response to imminent node shutdown."
        );
    }
    let node = s.wait_for_output(
        &[
            "get",
            "node",
            "podgrace",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}|{.status.conditions[?(@.type==\"Ready\")].message}|{.spec.taints[*].key}",
        ],
        Duration::from_secs(20),
        |o| o.contains("node.kubernetes.io/not-ready"),
    );
    assert_eq!(
        node,
        "False|node is shutting down|node.kubernetes.io/not-ready"
    );
    let events = s.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=NodeShutdown",
        "-o",
        "jsonpath={.items[*].involvedObject.kind} {.items[*].message}",
    ]);
    assert_eq!(events, "Node Shutdown manager detected shutdown event");
}
