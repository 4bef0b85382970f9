//! Whether the pod is still in rotation: its entries in the namespace's EndpointSlices, watched
//! through the Kubernetes API (kube-rs) with the pod's own credentials.
//!
//! An entry is in rotation while its `ready` condition is not false (nil means ready, as the API
//! documents `EndpointConditions.ready`) and it is not `terminating`. The EndpointSlice
//! controller sets `ready = publishNotReadyAddresses || (serving && !terminating)`
//! (`staging/src/k8s.io/endpointslice/utils.go` `podToEndpoint`, Kubernetes 1.22 to 1.37), so a
//! deleted pod's entry turns not ready as soon as the controller has seen the deletion, except
//! under `publishNotReadyAddresses`, where `terminating` says it. A pod listed in no slice (no
//! Service selects it) is not in rotation.
//!
//! Credentials: `kube::Client::try_default()`, i.e. `KUBECONFIG` or `~/.kube/config` if present,
//! else the in-cluster service account (`KUBERNETES_SERVICE_HOST`, the token and CA under
//! `/var/run/secrets/kubernetes.io/serviceaccount`). The service account needs `list` and `watch`
//! on `endpointslices` (group `discovery.k8s.io`) in the pod's namespace.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Client};

use crate::wait::EndpointsView;

/// Errors of watching the endpoints. Each names the operation and the object.
#[derive(Debug, thiserror::Error)]
pub enum EndpointsError {
    /// No client could be made from a kubeconfig or the in-cluster service account.
    #[error(
        "no Kubernetes credentials (neither a kubeconfig nor the in-cluster service account): {0}"
    )]
    Credentials(kube::Error),
    /// The pod's name is unknown (neither `POD_NAME` nor a hostname).
    #[error("the pod's name is unknown: set POD_NAME (downward API: fieldRef metadata.name)")]
    PodName,
    /// The watch failed (it is retried with back-off; this is the first failure). `hint`
    /// names the RBAC the pod's service account lacks when the API answered 403.
    #[error("watching EndpointSlices in namespace {namespace}: {source}{hint}")]
    Watch {
        /// The pod's namespace, whose EndpointSlices are watched.
        namespace: String,
        /// kube-rs's watcher error.
        source: watcher::Error,
        /// Empty, or after a 403 the RBAC the service account lacks, in parentheses.
        hint: &'static str,
    },
}

/// How the pod appears in a set of EndpointSlices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodEntries {
    /// Entries whose `targetRef` is the pod.
    pub listed: usize,
    /// Of those, the ones in rotation (ready not false, not terminating).
    pub in_rotation: usize,
}

/// The pod's entries in `slices`: endpoints whose `targetRef` is `kind: Pod` named `pod`.
pub fn pod_entries<'a>(
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    pod: &str,
) -> PodEntries {
    let mut e = PodEntries::default();
    for slice in slices {
        for ep in slice.endpoints.iter().flatten() {
            let is_pod = ep.target_ref.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Pod") && r.name.as_deref() == Some(pod)
            });
            if !is_pod {
                continue;
            }
            e.listed += 1;
            let c = ep.conditions.as_ref();
            let ready = c.and_then(|c| c.ready).unwrap_or(true);
            let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
            if ready && !terminating {
                e.in_rotation += 1;
            }
        }
    }
    e
}

/// Where the pod is: its name and namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// `metadata.namespace` of the pod.
    pub namespace: String,
    /// `metadata.name` of the pod.
    pub name: String,
}

/// The pod's name: `POD_NAME`, else the hostname (a pod's hostname is its name unless
/// `spec.hostname` says otherwise). Errors: [`EndpointsError::PodName`].
pub fn pod_name() -> Result<String, EndpointsError> {
    if let Some(name) = std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()) {
        return Ok(name);
    }
    rustix::system::uname()
        .nodename()
        .to_str()
        .ok()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .ok_or(EndpointsError::PodName)
}

/// A client from the usual credentials, and the pod it runs in (`POD_NAMESPACE`, else the
/// client's default namespace: the service account's, or the kubeconfig context's).
/// Errors: [`EndpointsError::Credentials`], [`EndpointsError::PodName`].
pub async fn connect() -> Result<(Client, PodRef), EndpointsError> {
    let client = Client::try_default()
        .await
        .map_err(EndpointsError::Credentials)?;
    let namespace = std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| client.default_namespace().to_string());
    Ok((
        client,
        PodRef {
            namespace,
            name: pod_name()?,
        },
    ))
}

/// Watches the EndpointSlices of `pod`'s namespace for ever, setting `view` to whether the pod
/// is still in rotation after every change. `on_error` gets the first watch failure (the watch
/// retries with back-off; `view` keeps its last value meanwhile).
pub async fn watch(
    client: Client,
    pod: PodRef,
    view: Arc<EndpointsView>,
    mut on_error: impl FnMut(EndpointsError),
) {
    let api: Api<EndpointSlice> = Api::namespaced(client, &pod.namespace);
    let mut slices: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let mut building: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let mut reported = false;
    // Nothing is known before the first full list.
    let mut listed = false;
    // With back-off: a watch that fails (no RBAC, API down) is retried at growing intervals,
    // not in a busy loop.
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let key = |s: &EndpointSlice| s.metadata.name.clone().unwrap_or_default();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => building.clear(),
            Ok(watcher::Event::InitApply(s)) => {
                building.insert(key(&s), s);
            }
            Ok(watcher::Event::InitDone) => {
                slices = std::mem::take(&mut building);
                listed = true;
            }
            Ok(watcher::Event::Apply(s)) => {
                slices.insert(key(&s), s);
            }
            Ok(watcher::Event::Delete(s)) => {
                slices.remove(&key(&s));
            }
            Err(source) => {
                if !reported {
                    reported = true;
                    let hint = if forbidden(&source) {
                        " (the pod's service account needs list and watch on endpointslices.discovery.k8s.io)"
                    } else {
                        ""
                    };
                    on_error(EndpointsError::Watch {
                        namespace: pod.namespace.clone(),
                        source,
                        hint,
                    });
                }
                continue;
            }
        }
        if listed {
            view.set(pod_entries(slices.values(), &pod.name).in_rotation > 0);
        }
    }
}

/// Whether the API refused the request as forbidden (403).
fn forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 403,
        watcher::Error::WatchError(s) => s.code == 403,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(json: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json).unwrap()
    }

    fn ep(pod: &str, ready: Option<bool>, terminating: Option<bool>) -> serde_json::Value {
        let mut c = serde_json::Map::new();
        if let Some(r) = ready {
            c.insert("ready".into(), r.into());
        }
        if let Some(t) = terminating {
            c.insert("terminating".into(), t.into());
        }
        serde_json::json!({
            "addresses": ["10.0.0.1"],
            "conditions": c,
            "targetRef": {"kind": "Pod", "namespace": "default", "name": pod}
        })
    }

    fn slices(eps: Vec<serde_json::Value>) -> EndpointSlice {
        slice(serde_json::json!({
            "metadata": {"name": "web-abc"},
            "addressType": "IPv4",
            "endpoints": eps
        }))
    }

    #[test]
    fn a_ready_entry_is_in_rotation_and_nil_ready_counts_as_ready() {
        let s = slices(vec![ep("web-1", Some(true), None), ep("web-2", None, None)]);
        assert_eq!(
            pod_entries([&s], "web-1"),
            PodEntries {
                listed: 1,
                in_rotation: 1
            }
        );
        assert_eq!(
            pod_entries([&s], "web-2"),
            PodEntries {
                listed: 1,
                in_rotation: 1
            }
        );
    }

    #[test]
    fn a_terminating_pod_leaves_rotation_even_under_publish_not_ready_addresses() {
        // podToEndpoint: ready = false once terminating ...
        let s = slices(vec![ep("web-1", Some(false), Some(true))]);
        assert_eq!(pod_entries([&s], "web-1").in_rotation, 0);
        // ... except with publishNotReadyAddresses, where terminating says it.
        let s = slices(vec![ep("web-1", Some(true), Some(true))]);
        assert_eq!(pod_entries([&s], "web-1").in_rotation, 0);
    }

    #[test]
    fn a_pod_in_two_slices_is_in_rotation_while_either_entry_is() {
        let a = slices(vec![ep("web-1", Some(false), Some(true))]);
        let b = slices(vec![ep("web-1", Some(true), Some(false))]);
        assert_eq!(
            pod_entries([&a, &b], "web-1"),
            PodEntries {
                listed: 2,
                in_rotation: 1
            }
        );
    }

    #[test]
    fn other_pods_and_non_pod_targets_do_not_count() {
        let mut node = ep("web-1", Some(true), None);
        node["targetRef"]["kind"] = "Node".into();
        let mut none = ep("web-1", Some(true), None);
        none.as_object_mut().unwrap().remove("targetRef");
        let s = slices(vec![ep("web-10", Some(true), None), node, none]);
        assert_eq!(pod_entries([&s], "web-1"), PodEntries::default());
    }
}
