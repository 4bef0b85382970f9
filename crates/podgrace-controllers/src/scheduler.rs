//! The scheduler, for the pods the API could not bind at create (the node was cordoned or had
//! a taint they do not tolerate): each attempt runs the filters of podgrace-core's
//! `rules::scheduling` against the one node; a pod that does not fit gets the condition
//! `PodScheduled=False` (reason `Unschedulable`, the fit error as message) and a Warning
//! `FailedScheduling` event from `default-scheduler` worded as the scheduler words it
//! (`0/1 nodes are available: 1 node(s) were unschedulable. preemption: ...`); a pod that fits
//! is bound (`pods/NAME/binding`) and gets the `Scheduled` event. A pod is tried again when
//! the node changes (the scheduling queue's move on a Node update), not in a loop.
//!
//! Upstream: `pkg/scheduler/schedule_one.go` (`handleSchedulingFailure`: the event with reason
//! `FailedScheduling`, action `Scheduling`, and the `PodScheduled` condition; `bind` and the
//! `Scheduled` event with action `Binding`), `pkg/scheduler/framework/types.go`
//! (`FitError.Error`), `pkg/scheduler/internal/queue` (unschedulable pods move back to the
//! active queue on a Node update). Wording recorded on a 1.32 cluster
//! (`shared/cases/real-cluster-1.32.md` e).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Binding, Event, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use podgrace_core::rules::scheduling;
use tokio::task::JoinSet;

use crate::informer::{self, Change, Informers};
use crate::queue::{self, Queue, Synced};

/// The scheduler's name (`spec.schedulerName` of the pods it takes, `reportingController`).
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Starts the scheduler on the shared informers: an unbound pod is tried when it appears or
/// changes, and again when the node changes (each pod once per version of the node). Pods go
/// to the one node (serve's; with several Node objects, the first by name). Runs until the
/// returned set is dropped.
pub async fn run(informers: Informers) -> JoinSet<()> {
    let pods = informers.get::<Pod>();
    let nodes = informers.get::<Node>();
    let q = Queue::new();
    // The node resourceVersion each pod was last tried against (pod UID → RV), while it is
    // unbound.
    let tried: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    {
        let (q, tried) = (q.clone(), tried.clone());
        pods.add_handler(move |c| {
            if !matches!(c, Change::Deleted(_)) && takes(c.object()) {
                q.add(informer::key_of(c.object()));
            } else if let (Some(uid), Ok(mut t)) = (&c.object().metadata.uid, tried.lock()) {
                t.remove(uid);
            }
        });
    }
    {
        let (q, pods) = (q.clone(), pods.clone());
        nodes.add_handler(move |_| {
            // The scheduling queue's move of the unschedulable pods on a Node event.
            for p in pods.store().state() {
                if takes(&p) {
                    q.add(informer::key_of(&*p));
                }
            }
        });
    }
    pods.synced().await;
    nodes.synced().await;
    let client = informers.client().clone();
    queue::run_workers(&q, 1, move |key| {
        let (client, pods, nodes, tried) =
            (client.clone(), pods.clone(), nodes.clone(), tried.clone());
        async move {
            let (ns, name) = informer::split_key(&key);
            let pod = pods.get(ns, name);
            let Some(pod) = pod.filter(|p| takes(p)) else {
                return Synced::Done;
            };
            let Some(node) = nodes
                .store()
                .state()
                .into_iter()
                .min_by(|a, b| a.metadata.name.cmp(&b.metadata.name))
            else {
                return Synced::Done;
            };
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let node_rv = node.metadata.resource_version.clone().unwrap_or_default();
            {
                let Ok(mut t) = tried.lock() else {
                    return Synced::Done;
                };
                if t.get(&uid) == Some(&node_rv) {
                    return Synced::Done;
                }
                t.insert(uid, node_rv);
            }
            let node_name = node.metadata.name.clone().unwrap_or_default();
            schedule_one(&client, &pod, &node, &node_name).await;
            Synced::Done
        }
    })
}

/// Whether the scheduler takes `pod`: unbound, not being deleted, for `default-scheduler`.
fn takes(pod: &Pod) -> bool {
    let spec = pod.spec.clone().unwrap_or_default();
    spec.node_name.as_deref().unwrap_or("").is_empty()
        && pod.metadata.deletion_timestamp.is_none()
        && spec.scheduler_name.as_deref().unwrap_or(DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
}

/// One scheduling attempt of `pod` on `node`.
async fn schedule_one(client: &kube::Client, pod: &Pod, node: &Node, node_name: &str) {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), &ns);
    match scheduling::unfit_reason(pod, node) {
        Some(reason) => {
            let message = scheduling::failed_scheduling_message(&reason);
            let status = serde_json::json!({"status": {"conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": null,
                "lastTransitionTime": jiff::Timestamp::now().to_string(),
            }]}});
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(status))
                .await
            {
                tracing::debug!("scheduler: status of {ns}/{name}: {e}");
            }
            event(
                client,
                pod,
                "Warning",
                "FailedScheduling",
                "Scheduling",
                &message,
                node_name,
            )
            .await;
        }
        None => {
            let binding = Binding {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                },
                target: ObjectReference {
                    kind: Some("Node".into()),
                    name: Some(node_name.to_string()),
                    ..Default::default()
                },
            };
            match api
                .create_subresource::<Binding, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await
            {
                Ok(_) => {
                    let message = format!("Successfully assigned {ns}/{name} to {node_name}");
                    event(
                        client,
                        pod,
                        "Normal",
                        "Scheduled",
                        "Binding",
                        &message,
                        node_name,
                    )
                    .await;
                }
                Err(e) => tracing::debug!("scheduler: binding {ns}/{name}: {e}"),
            }
        }
    }
}

/// An event as the scheduler's events.k8s.io recorder writes it (stored as core/v1: no
/// `source`, `eventTime`, `action`, `reportingComponent` and `reportingInstance`).
async fn event(
    client: &kube::Client,
    pod: &Pod,
    type_: &str,
    reason: &str,
    action: &str,
    message: &str,
    node_name: &str,
) {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let now = jiff::Timestamp::now();
    let ev = Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name),
            namespace: Some(ns.clone()),
            uid: pod.metadata.uid.clone(),
            resource_version: pod.metadata.resource_version.clone(),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(type_.into()),
        event_time: Some(MicroTime(
            k8s_openapi::jiff::Timestamp::from_microsecond(now.as_microsecond())
                .unwrap_or_default(),
        )),
        action: Some(action.into()),
        reporting_component: Some(DEFAULT_SCHEDULER.into()),
        reporting_instance: Some(format!("{DEFAULT_SCHEDULER}-{node_name}")),
        ..Default::default()
    };
    let api: kube::Api<Event> = kube::Api::namespaced(client.clone(), &ns);
    if let Err(e) = api.create(&PostParams::default(), &ev).await {
        tracing::debug!("scheduler: event {reason}: {e}");
    }
}
