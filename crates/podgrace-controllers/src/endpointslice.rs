//! The EndpointSlice controller: for each Service with a selector, its slices (managed by
//! `endpointslice-controller.k8s.io`) from the pods the selector selects: ready, serving and
//! terminating conditions, publishNotReadyAddresses, named target ports, the
//! `last-change-trigger-time` annotation. A Service is synced when it, its pods, its slices
//! or the nodes changed. Per-pod problems (a pod on a node that does not exist) are reported
//! as upstream does: a Warning `FailedToUpdateEndpointSlices` from `endpointslice-controller`.
//!
//! Upstream: `pkg/controller/endpointslice/endpointslice_controller.go` (`syncService`),
//! `staging/src/k8s.io/endpointslice/reconciler.go` (`Reconcile`, `finalize`),
//! `staging/src/k8s.io/endpointslice/util/trigger_time_tracker.go`; decisions in
//! podgrace-core `rules::endpointslice`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::reflector::Store;
use podgrace_core::rules::{endpointslice as rules, labels, podutil};
use tokio::sync::Notify;

use crate::events::{Recorder, ENDPOINTSLICE_CONTROLLER};
use crate::informer;

/// Runs the controller on `client` until the task is dropped.
pub async fn run(client: kube::Client) {
    let wake = Arc::new(Notify::new());
    let svcs: Store<Service> = informer::start(&client, wake.clone());
    let pods: Store<Pod> = informer::start(&client, wake.clone());
    let slices: Store<EndpointSlice> = informer::start(&client, wake.clone());
    let nodes: Store<Node> = informer::start(&client, wake.clone());
    let _ = svcs.wait_until_ready().await;
    let _ = pods.wait_until_ready().await;
    let _ = slices.wait_until_ready().await;
    let _ = nodes.wait_until_ready().await;
    let rec = Recorder::new(client.clone(), ENDPOINTSLICE_CONTROLLER);
    let mut triggers: BTreeMap<String, rules::TriggerState> = BTreeMap::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let node_rvs: String = nodes
            .state()
            .iter()
            .map(|n| n.metadata.resource_version.clone().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(",");
        for svc in svcs.state() {
            let ns = svc.metadata.namespace.clone().unwrap_or_default();
            let name = svc.metadata.name.clone().unwrap_or_default();
            let key = format!("{ns}/{name}");
            let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.clone()) else {
                continue;
            };
            let selector = labels::Selector::from_map(&sel);
            let svc_pods: Vec<Arc<Pod>> = informer::in_namespace(&pods, &ns)
                .into_iter()
                .filter(|p| selector.matches(&podutil::labels(&p.metadata)))
                .collect();
            let own: Vec<Arc<EndpointSlice>> = informer::in_namespace(&slices, &ns)
                .into_iter()
                .filter(|s| {
                    let l = podutil::labels(&s.metadata);
                    l.get(rules::LABEL_SERVICE_NAME) == Some(&name)
                        && l.get(rules::LABEL_MANAGED_BY).map(String::as_str)
                            == Some(rules::CONTROLLER_NAME)
                        && s.metadata.deletion_timestamp.is_none()
                })
                .collect();
            let mut fp = format!(
                "{}|{node_rvs}",
                svc.metadata.resource_version.clone().unwrap_or_default()
            );
            for p in &svc_pods {
                fp.push_str(&format!(
                    ",{}",
                    p.metadata.resource_version.clone().unwrap_or_default()
                ));
            }
            for s in &own {
                fp.push_str(&format!(
                    ";{}",
                    s.metadata.resource_version.clone().unwrap_or_default()
                ));
            }
            if seen.get(&key) == Some(&fp) {
                continue;
            }
            let pod_refs: Vec<&Pod> = svc_pods.iter().map(|p| &**p).collect();
            let (trigger, state) = rules::trigger_time(triggers.get(&key), &svc, &pod_refs);
            let existing: Vec<&EndpointSlice> = own.iter().map(|s| &**s).collect();
            let node_zone = |n: &str| {
                nodes
                    .state()
                    .iter()
                    .find(|x| x.metadata.name.as_deref() == Some(n))
                    .map(|x| {
                        podutil::labels(&x.metadata)
                            .get("topology.kubernetes.io/zone")
                            .cloned()
                    })
            };
            let plan = rules::reconcile(
                &svc,
                &pod_refs,
                &existing,
                node_zone,
                rules::MAX_ENDPOINTS_PER_SLICE,
                rules::CONTROLLER_NAME,
                trigger,
            );
            let api: kube::Api<EndpointSlice> = kube::Api::namespaced(client.clone(), &ns);
            let mut ok = true;
            for s in &plan.create {
                ok &= api
                    .create(&PostParams::default(), s)
                    .await
                    .map_err(|e| tracing::debug!("slice create: {e}"))
                    .is_ok();
            }
            for s in &plan.update {
                let n = s.metadata.name.clone().unwrap_or_default();
                ok &= api
                    .replace(&n, &PostParams::default(), s)
                    .await
                    .map_err(|e| tracing::debug!("slice update: {e}"))
                    .is_ok();
            }
            for s in &plan.delete {
                let n = s.metadata.name.clone().unwrap_or_default();
                let _ = api.delete(&n, &DeleteParams::default()).await;
            }
            if !plan.errors.is_empty() {
                let msg = format!(
                    "Error updating Endpoint Slices for Service {ns}/{name}: {}",
                    aggregate(&plan.errors)
                );
                rec.event(
                    "v1",
                    "Service",
                    &svc.metadata,
                    "Warning",
                    "FailedToUpdateEndpointSlices",
                    &msg,
                )
                .await;
            }
            triggers.insert(key.clone(), state);
            if ok {
                seen.insert(key, fp);
            } else {
                seen.remove(&key);
            }
        }
        crate::wait(&wake, None).await;
    }
}

/// `utilerrors.NewAggregate(...).Error()`: one error as it is, several in brackets.
fn aggregate(errs: &[String]) -> String {
    if errs.len() == 1 {
        errs[0].clone()
    } else {
        format!("[{}]", errs.join(", "))
    }
}
