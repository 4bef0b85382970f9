//! The node lifecycle controller's NoSchedule tainting: the taint
//! `node.kubernetes.io/unschedulable:NoSchedule` follows `spec.unschedulable` (`kubectl cordon`
//! adds it, `kubectl uncordon` removes it), and the condition taints follow the kubelet's
//! conditions (`node.kubernetes.io/memory-pressure` while MemoryPressure is True,
//! `node.kubernetes.io/not-ready` while Ready is False, as during a node shutdown), written
//! with the node's resourceVersion as a precondition (a conflict is retried with the newer
//! node, whose change syncs it again).
//!
//! Upstream: `pkg/controller/nodelifecycle/node_lifecycle_controller.go`
//! (`doNoScheduleTaintingPass`; the NoExecute taints of an unreachable node and the taint
//! manager's evictions are not modelled); decision in podgrace-core
//! `rules::scheduling::no_schedule_taints`. Kubernetes 1.12 and later
//! (`TaintNodesByCondition`, GA in 1.17).

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use podgrace_core::rules::scheduling;
use tokio::task::JoinSet;

use crate::informer::{self, Informers};
use crate::queue::{self, Queue, Synced};

/// Starts the tainting on the shared informers: a node is synced when it changes. Runs until
/// the returned set is dropped.
pub async fn run(informers: Informers) -> JoinSet<()> {
    let nodes = informers.get::<Node>();
    let q = Queue::new();
    {
        let q = q.clone();
        nodes.add_handler(move |c| q.add(informer::key_of(c.object())));
    }
    nodes.synced().await;
    let api: kube::Api<Node> = kube::Api::all(informers.client().clone());
    queue::run_workers(&q, 1, move |key| {
        let (api, nodes) = (api.clone(), nodes.clone());
        async move {
            let Some(node) = nodes.get("", &key) else {
                return Synced::Done;
            };
            let Some(taints) = scheduling::no_schedule_taints(&node, crate::now_ms()) else {
                return Synced::Done;
            };
            // A JSON merge patch replaces the list; the resourceVersion makes it conditional.
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": if taints.is_empty() { serde_json::Value::Null } else { serde_json::to_value(&taints).unwrap_or_default() }},
            });
            match api
                .patch(&key, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => Synced::Done,
                Err(e) => {
                    tracing::debug!("node lifecycle: tainting {key}: {e}");
                    // A conflict: the newer node comes as an event of its own.
                    if crate::is_conflict_or_gone(&e) {
                        Synced::Done
                    } else {
                        Synced::Retry
                    }
                }
            }
        }
    })
}
