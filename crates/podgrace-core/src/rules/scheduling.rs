//! Whether the one node can take a pod, as the scheduler's filters decide it, and the
//! `FailedScheduling` message when it cannot: what a cordoned node (`kubectl cordon`,
//! `kubectl drain`) does to the replacement pods of a drained Deployment.
//!
//! Upstream: `pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go`
//! (`Filter`: `node(s) were unschedulable` unless the pod tolerates
//! `node.kubernetes.io/unschedulable:NoSchedule`), `pkg/scheduler/framework/plugins/
//! tainttoleration/taint_toleration.go` (`Filter`: `node(s) had untolerated taint {K: V}` for
//! NoSchedule and NoExecute taints), `staging/src/k8s.io/api/core/v1/toleration.go`
//! (`ToleratesTaint`), `pkg/scheduler/framework/types.go` (`FitError.Error`), and
//! `pkg/controller/nodelifecycle` (`doNoScheduleTaintingPass`: the unschedulable taint follows
//! `spec.unschedulable`, the condition taints the node's conditions). Filters run in the default profile's order (NodeUnschedulable before
//! TaintToleration); the first that fails names the reason. The wording was recorded on a
//! real 1.32 cluster (`shared/cases/real-cluster-1.32.md` e).

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};

/// `node.kubernetes.io/unschedulable`.
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// `Toleration.ToleratesTaint`.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    if t.key
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != taint.key)
    {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

fn pod_tolerates(pod: &Pod, taint: &Taint) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| tolerates(t, taint)))
}

/// The unschedulable taint (`NoSchedule`).
pub fn unschedulable_taint() -> Taint {
    Taint {
        key: TAINT_UNSCHEDULABLE.into(),
        effect: "NoSchedule".into(),
        value: None,
        time_added: None,
    }
}

/// Why the node does not fit the pod, as the filter reports it (`None`: it fits).
pub fn unfit_reason(pod: &Pod, node: &Node) -> Option<String> {
    let spec = node.spec.clone().unwrap_or_default();
    if spec.unschedulable == Some(true) && !pod_tolerates(pod, &unschedulable_taint()) {
        return Some("node(s) were unschedulable".into());
    }
    for t in spec.taints.iter().flatten() {
        if !matches!(t.effect.as_str(), "NoSchedule" | "NoExecute") {
            continue;
        }
        if !pod_tolerates(pod, t) {
            return Some(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.clone().unwrap_or_default()
            ));
        }
    }
    None
}

/// `FitError.Error` for one node that does not fit, with the preemption post-filter's words.
pub fn failed_scheduling_message(reason: &str) -> String {
    format!(
        "0/1 nodes are available: 1 {reason}. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
}

/// The NoSchedule taint a node condition brings (`nodeConditionToTaintKeyStatusMap`): Ready
/// False `node.kubernetes.io/not-ready`, Ready Unknown `node.kubernetes.io/unreachable`,
/// MemoryPressure `node.kubernetes.io/memory-pressure`, DiskPressure
/// `node.kubernetes.io/disk-pressure`, PIDPressure `node.kubernetes.io/pid-pressure`,
/// NetworkUnavailable `node.kubernetes.io/network-unavailable` (the last five when True).
pub fn condition_taint_key(condition: &str, status: &str) -> Option<&'static str> {
    Some(match (condition, status) {
        ("Ready", "False") => "node.kubernetes.io/not-ready",
        ("Ready", "Unknown") => "node.kubernetes.io/unreachable",
        ("MemoryPressure", "True") => "node.kubernetes.io/memory-pressure",
        ("DiskPressure", "True") => "node.kubernetes.io/disk-pressure",
        ("PIDPressure", "True") => "node.kubernetes.io/pid-pressure",
        ("NetworkUnavailable", "True") => "node.kubernetes.io/network-unavailable",
        _ => return None,
    })
}

/// Taint keys the node lifecycle controller owns (`taintKeyToNodeConditionMap`, and the
/// unschedulable taint).
const CONTROLLER_TAINT_KEYS: [&str; 7] = [
    TAINT_UNSCHEDULABLE,
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
];

/// `doNoScheduleTaintingPass`: the node's taints with the NoSchedule taints of its
/// conditions and of `spec.unschedulable` added (`timeAdded` now, as
/// `SwapNodeControllerTaint` stamps them) and those no longer called for removed, if that
/// changes them; the other taints stay as they are.
pub fn no_schedule_taints(node: &Node, now_ms: i64) -> Option<Vec<Taint>> {
    let mut want: Vec<&'static str> = node
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter_map(|c| condition_taint_key(&c.type_, &c.status))
        .collect();
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        want.push(TAINT_UNSCHEDULABLE);
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let owned =
        |t: &Taint| t.effect == "NoSchedule" && CONTROLLER_TAINT_KEYS.contains(&t.key.as_str());
    let have: Vec<&str> = taints
        .iter()
        .filter(|t| owned(t))
        .map(|t| t.key.as_str())
        .collect();
    let add: Vec<&str> = want.iter().copied().filter(|k| !have.contains(k)).collect();
    let remove = have.iter().any(|k| !want.contains(k));
    if add.is_empty() && !remove {
        return None;
    }
    let mut out: Vec<Taint> = taints
        .into_iter()
        .filter(|t| !owned(t) || want.contains(&t.key.as_str()))
        .collect();
    for k in add {
        out.push(Taint {
            key: k.into(),
            effect: "NoSchedule".into(),
            value: None,
            time_added: Some(super::podutil::ms_time(now_ms)),
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, PodSpec};

    #[test]
    fn a_cordoned_node_refuses_with_the_recorded_words() {
        let node = Node {
            spec: Some(NodeSpec {
                unschedulable: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pod = Pod {
            spec: Some(PodSpec::default()),
            ..Default::default()
        };
        let r = unfit_reason(&pod, &node).unwrap();
        assert_eq!(
            failed_scheduling_message(&r),
            "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
        let tainted = Node {
            spec: Some(NodeSpec {
                taints: no_schedule_taints(&node, 0),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            unfit_reason(&pod, &tainted).unwrap(),
            "node(s) had untolerated taint {node.kubernetes.io/unschedulable: }"
        );
        let tolerant = Pod {
            spec: Some(PodSpec {
                tolerations: Some(vec![Toleration {
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(unfit_reason(&tolerant, &node).is_none());
    }

    /// The condition taints follow the conditions: memory pressure and a Ready False add
    /// theirs (with `timeAdded`), their end removes them; a taint of someone else stays.
    #[test]
    fn condition_taints_follow_the_conditions() {
        use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
        let cond = |t: &str, s: &str| NodeCondition {
            type_: t.into(),
            status: s.into(),
            ..Default::default()
        };
        let mut node = Node {
            spec: Some(NodeSpec {
                taints: Some(vec![Taint {
                    key: "dedicated".into(),
                    effect: "NoSchedule".into(),
                    value: Some("x".into()),
                    time_added: None,
                }]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![cond("MemoryPressure", "True"), cond("Ready", "False")]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let t = no_schedule_taints(&node, 1_700_000_000_000).unwrap();
        let keys: Vec<&str> = t.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "dedicated",
                "node.kubernetes.io/memory-pressure",
                "node.kubernetes.io/not-ready"
            ]
        );
        assert!(t[1].time_added.is_some());
        node.spec.as_mut().unwrap().taints = Some(t);
        assert_eq!(no_schedule_taints(&node, 0), None);
        node.status = Some(NodeStatus {
            conditions: Some(vec![cond("MemoryPressure", "False"), cond("Ready", "True")]),
            ..Default::default()
        });
        let t = no_schedule_taints(&node, 0).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].key, "dedicated");
    }
}
