//! The node lifecycle controller's NoSchedule tainting: the taint
//! `node.kubernetes.io/unschedulable:NoSchedule` follows `spec.unschedulable` (`kubectl cordon`
//! adds it, `kubectl uncordon` removes it), and the condition taints follow the kubelet's
//! conditions (`node.kubernetes.io/memory-pressure` while MemoryPressure is True,
//! `node.kubernetes.io/not-ready` while Ready is False, as during a node shutdown), written
//! with the node's resourceVersion as a precondition (a conflict is retried at the next
//! change).
//!
//! Upstream: `pkg/controller/nodelifecycle/node_lifecycle_controller.go`
//! (`doNoScheduleTaintingPass`; the NoExecute taints of an unreachable node and the taint
//! manager's evictions are not modelled); decision in podgrace-core
//! `rules::scheduling::no_schedule_taints`. Kubernetes 1.12 and later
//! (`TaintNodesByCondition`, GA in 1.17).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use podgrace_core::rules::scheduling;
use tokio::sync::Notify;

use crate::informer;

/// Runs the tainting pass on every node change until the task is dropped.
pub async fn run(client: kube::Client) {
    let wake = Arc::new(Notify::new());
    let nodes: Store<Node> = informer::start(&client, wake.clone());
    let _ = nodes.wait_until_ready().await;
    let api: kube::Api<Node> = kube::Api::all(client.clone());
    loop {
        for node in nodes.state() {
            let Some(taints) = scheduling::no_schedule_taints(&node, crate::now_ms()) else {
                continue;
            };
            let name = node.metadata.name.clone().unwrap_or_default();
            // A JSON merge patch replaces the list; the resourceVersion makes it conditional.
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": if taints.is_empty() { serde_json::Value::Null } else { serde_json::to_value(&taints).unwrap_or_default() }},
            });
            if let Err(e) = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                tracing::debug!("node lifecycle: tainting {name}: {e}");
            }
        }
        wake.notified().await;
    }
}
