//! The garbage collector: dependents whose owners are gone are deleted (Background), owners
//! deleted in the foreground wait for their blocking dependents (then lose the
//! `foregroundDeletion` finalizer), and owners deleted with `Orphan` have their dependents'
//! references removed (then lose the `orphan` finalizer). It follows every kind podgrace
//! serves that owners and dependents come in; an owner missing from its cache is confirmed
//! absent with a live GET before anything is deleted, as upstream's virtual nodes are.
//!
//! Upstream: `pkg/controller/garbagecollector/garbagecollector.go` (`attemptToDeleteItem`,
//! `processDeletingDependentsItem`, `orphanDependents`, `classifyReferences`,
//! `isDangling`), `operations.go`; decisions in podgrace-core `rules::garbagecollector`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use podgrace_core::rules::garbagecollector::{self as rules, Action, OwnerState};
use tokio::sync::Notify;

/// The kinds followed: `(group, version, kind, plural, namespaced)`.
const KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "Pod", "pods", true),
    ("apps", "v1", "ReplicaSet", "replicasets", true),
    ("apps", "v1", "Deployment", "deployments", true),
    (
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        true,
    ),
    ("", "v1", "Service", "services", true),
    ("", "v1", "ConfigMap", "configmaps", true),
    ("", "v1", "Secret", "secrets", true),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
];

fn api_resource(k: &(&str, &str, &str, &str, bool)) -> ApiResource {
    let (group, version, kind, plural, _) = *k;
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn start(client: &kube::Client, ar: &ApiResource, wake: Arc<Notify>) -> Store<DynamicObject> {
    let api: kube::Api<DynamicObject> = kube::Api::all_with(client.clone(), ar);
    let writer = reflector::store::Writer::new(ar.clone());
    let reader = writer.as_reader();
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            if ev.is_ok() {
                wake.notify_one();
            }
        }
    });
    reader
}

struct Node {
    ar: usize,
    obj: Arc<DynamicObject>,
}

/// Runs the collector on `client` until the task is dropped.
pub async fn run(client: kube::Client) {
    let wake = Arc::new(Notify::new());
    let ars: Vec<ApiResource> = KINDS.iter().map(api_resource).collect();
    let stores: Vec<Store<DynamicObject>> = ars
        .iter()
        .map(|ar| start(&client, ar, wake.clone()))
        .collect();
    for s in &stores {
        let _ = s.wait_until_ready().await;
    }
    loop {
        sync(&client, &ars, &stores).await;
        crate::wait(&wake, None).await;
    }
}

fn has_finalizer(m: &ObjectMeta, f: &str) -> bool {
    m.finalizers.iter().flatten().any(|x| x == f)
}

/// One pass over the graph.
async fn sync(client: &kube::Client, ars: &[ApiResource], stores: &[Store<DynamicObject>]) {
    let mut by_uid: BTreeMap<String, Node> = BTreeMap::new();
    for (i, s) in stores.iter().enumerate() {
        for o in s.state() {
            if let Some(uid) = o.meta().uid.clone() {
                by_uid.insert(uid, Node { ar: i, obj: o });
            }
        }
    }
    // Dependents of each owner uid.
    let mut dependents: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (uid, n) in &by_uid {
        for r in n.obj.meta().owner_references.iter().flatten() {
            dependents
                .entry(r.uid.clone())
                .or_default()
                .push(uid.clone());
        }
    }
    for (uid, n) in &by_uid {
        let m = n.obj.meta();
        let deps = dependents.get(uid).cloned().unwrap_or_default();
        if m.deletion_timestamp.is_some() && has_finalizer(m, rules::FINALIZER_ORPHAN) {
            // orphanDependents, then the finalizer goes; a dependent whose reference could not
            // be removed (a conflict with a newer write) keeps the finalizer for the next pass,
            // as upstream requeues the owner, or the dependent would be collected once the owner
            // is gone.
            let mut orphaned = true;
            for d in &deps {
                if let Some(dn) = by_uid.get(d) {
                    orphaned &=
                        remove_refs(client, &ars[dn.ar], &dn.obj, &BTreeSet::from([uid.clone()]))
                            .await;
                }
            }
            if orphaned {
                remove_finalizer(client, &ars[n.ar], &n.obj, rules::FINALIZER_ORPHAN).await;
            }
            continue;
        }
        if m.deletion_timestamp.is_some() && has_finalizer(m, rules::FINALIZER_FOREGROUND) {
            // processDeletingDependentsItem: blocking dependents are deleted (attemptToDelete
            // below); once none blocks, the finalizer goes.
            let blocking = deps
                .iter()
                .filter_map(|d| by_uid.get(d))
                .filter(|dn| {
                    dn.obj
                        .meta()
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| &r.uid == uid && r.block_owner_deletion == Some(true))
                })
                .count();
            if rules::foreground_done(blocking) {
                remove_finalizer(client, &ars[n.ar], &n.obj, rules::FINALIZER_FOREGROUND).await;
            }
            continue;
        }
        if m.owner_references.as_ref().is_none_or(Vec::is_empty) || m.deletion_timestamp.is_some() {
            continue;
        }
        // classifyReferences, with absent owners confirmed by a live GET.
        let mut states: BTreeMap<String, OwnerState> = BTreeMap::new();
        for r in m.owner_references.iter().flatten() {
            let st = match by_uid.get(&r.uid) {
                Some(on) => state_of(on.obj.meta()),
                None => live_state(client, ars, m.namespace.as_deref().unwrap_or(""), r).await,
            };
            states.insert(r.uid.clone(), st);
        }
        let action = rules::attempt_to_delete(
            m,
            |r| states.get(&r.uid).copied().unwrap_or(OwnerState::Present),
            !deps.is_empty(),
        );
        match action {
            Action::Keep => {}
            Action::RemoveOwnerRefs(uids) => {
                // A failed patch is retried on the next pass (the dependent keeps its refs).
                let _ = remove_refs(client, &ars[n.ar], &n.obj, &uids.into_iter().collect()).await;
            }
            Action::Delete(policy) => {
                let api = namespaced(client, &ars[n.ar], m.namespace.as_deref());
                let dp = DeleteParams {
                    propagation_policy: Some(match policy {
                        "Foreground" => PropagationPolicy::Foreground,
                        "Orphan" => PropagationPolicy::Orphan,
                        _ => PropagationPolicy::Background,
                    }),
                    preconditions: Some(Preconditions {
                        uid: m.uid.clone(),
                        resource_version: m.resource_version.clone(),
                    }),
                    ..Default::default()
                };
                if let Err(e) = api.delete(m.name.as_deref().unwrap_or(""), &dp).await {
                    tracing::debug!("gc delete: {e}");
                }
            }
        }
    }
}

fn state_of(m: &ObjectMeta) -> OwnerState {
    if m.deletion_timestamp.is_some() && has_finalizer(m, rules::FINALIZER_FOREGROUND) {
        OwnerState::DeletingDependents
    } else {
        OwnerState::Present
    }
}

/// `isDangling`: the owner read from the API (the cache may lag); a kind podgrace does not
/// follow counts as present.
async fn live_state(
    client: &kube::Client,
    ars: &[ApiResource],
    ns: &str,
    r: &OwnerReference,
) -> OwnerState {
    let Some(i) = KINDS.iter().position(|k| {
        let av = if k.0.is_empty() {
            k.1.to_string()
        } else {
            format!("{}/{}", k.0, k.1)
        };
        av == r.api_version && k.2 == r.kind
    }) else {
        return OwnerState::Present;
    };
    let api = namespaced(client, &ars[i], Some(ns));
    match api.get_opt(&r.name).await {
        Ok(None) => OwnerState::Absent,
        Ok(Some(o)) if o.meta().uid.as_deref() != Some(&r.uid) => OwnerState::Absent,
        Ok(Some(o)) => state_of(o.meta()),
        Err(_) => OwnerState::Present,
    }
}

fn namespaced(
    client: &kube::Client,
    ar: &ApiResource,
    ns: Option<&str>,
) -> kube::Api<DynamicObject> {
    match ns {
        Some(ns) if !ns.is_empty() => kube::Api::namespaced_with(client.clone(), ns, ar),
        _ => kube::Api::all_with(client.clone(), ar),
    }
}

/// Removes the owner references to `uids` from `obj` (a JSON merge patch of the list, with
/// the resourceVersion as precondition).
async fn remove_refs(
    client: &kube::Client,
    ar: &ApiResource,
    obj: &DynamicObject,
    uids: &BTreeSet<String>,
) -> bool {
    let m = obj.meta();
    let kept: Vec<&OwnerReference> = m
        .owner_references
        .iter()
        .flatten()
        .filter(|r| !uids.contains(&r.uid))
        .collect();
    let patch = serde_json::json!({"metadata": {"ownerReferences": kept, "resourceVersion": m.resource_version}});
    let api = namespaced(client, ar, m.namespace.as_deref());
    if let Err(e) = api
        .patch(
            m.name.as_deref().unwrap_or(""),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::debug!("gc remove owner refs: {e}");
        return false;
    }
    true
}

async fn remove_finalizer(client: &kube::Client, ar: &ApiResource, obj: &DynamicObject, f: &str) {
    let m = obj.meta();
    let patch = serde_json::json!({"metadata": {"finalizers": rules::without(m, f), "resourceVersion": m.resource_version}});
    let api = namespaced(client, ar, m.namespace.as_deref());
    if let Err(e) = api
        .patch(
            m.name.as_deref().unwrap_or(""),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::debug!("gc remove finalizer {f}: {e}");
    }
}
