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
//! `spec.unschedulable`). Filters run in the default profile's order (NodeUnschedulable before
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

/// `doNoScheduleTaintingPass` for `spec.unschedulable`: the node's taints with the
/// unschedulable taint added or removed, if they change.
pub fn unschedulable_taints(node: &Node) -> Option<Vec<Taint>> {
    let spec = node.spec.clone().unwrap_or_default();
    let mut taints = spec.taints.unwrap_or_default();
    let has = taints
        .iter()
        .any(|t| t.key == TAINT_UNSCHEDULABLE && t.effect == "NoSchedule");
    match (spec.unschedulable == Some(true), has) {
        (true, false) => {
            taints.push(unschedulable_taint());
            Some(taints)
        }
        (false, true) => {
            taints.retain(|t| !(t.key == TAINT_UNSCHEDULABLE && t.effect == "NoSchedule"));
            Some(taints)
        }
        _ => None,
    }
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
                taints: unschedulable_taints(&node),
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
}
