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

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use kube::Resource;
use podgrace_core::rules::garbagecollector::{self as rules, Action, OwnerState};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;

use crate::informer::{Change, Informers};
use crate::queue::{self, Queue, Synced};

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

/// kube-controller-manager's `--concurrent-gc-syncs` default.
pub const WORKERS: usize = 20;

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

/// One object of the graph: its kind (an index into [`KINDS`]) and metadata.
#[derive(Clone)]
struct GNode {
    kind: usize,
    meta: ObjectMeta,
}

/// The ownership graph (`GraphBuilder`'s `uidToNode`): every object by uid, and the dependents
/// of every owner uid (owners not seen yet included, as upstream's virtual nodes).
#[derive(Default)]
struct Graph {
    nodes: HashMap<String, GNode>,
    dependents: HashMap<String, BTreeSet<String>>,
}

fn owner_uids(m: &ObjectMeta) -> BTreeSet<String> {
    m.owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect()
}

fn has_finalizer(m: &ObjectMeta, f: &str) -> bool {
    m.finalizers.iter().flatten().any(|x| x == f)
}

fn foreground(m: &ObjectMeta) -> bool {
    m.deletion_timestamp.is_some() && has_finalizer(m, rules::FINALIZER_FOREGROUND)
}

impl Graph {
    /// Applies one change (`processGraphChanges`) and returns the uids to look at
    /// (`attemptToDelete`/`attemptToOrphan`): the object when it has owners or waits on its
    /// dependents; the dependents of an object that went, or that entered a foreground
    /// deletion; the owners an object stopped referring to, or that it left by going.
    fn apply(&mut self, kind: usize, m: &ObjectMeta, gone: bool) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let Some(uid) = m.uid.clone() else {
            return out;
        };
        let old = self.nodes.get(&uid).map(|n| n.meta.clone());
        let old_owners = old.as_ref().map(owner_uids).unwrap_or_default();
        let new_owners = if gone { BTreeSet::new() } else { owner_uids(m) };
        for o in old_owners.difference(&new_owners) {
            if let Some(d) = self.dependents.get_mut(o) {
                d.remove(&uid);
                if d.is_empty() {
                    self.dependents.remove(o);
                }
            }
            out.insert(o.clone());
        }
        for o in &new_owners {
            self.dependents
                .entry(o.clone())
                .or_default()
                .insert(uid.clone());
        }
        let deps: Vec<String> = self
            .dependents
            .get(&uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        if gone {
            self.nodes.remove(&uid);
            out.extend(deps);
            return out;
        }
        if old.as_ref().is_none_or(|o| !foreground(o)) && foreground(m) {
            out.extend(deps);
        }
        self.nodes.insert(
            uid.clone(),
            GNode {
                kind,
                meta: m.clone(),
            },
        );
        let orphaning = m.deletion_timestamp.is_some() && has_finalizer(m, rules::FINALIZER_ORPHAN);
        if !new_owners.is_empty() || orphaning || foreground(m) {
            out.insert(uid);
        }
        out
    }
}

struct Ctl {
    client: kube::Client,
    ars: Vec<ApiResource>,
    graph: Arc<Mutex<Graph>>,
}

/// Feeds the changes of `K` (kind index `kind`) into the graph and the queue.
fn follow<K>(informers: &Informers, kind: usize, graph: &Arc<Mutex<Graph>>, q: &Queue)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (graph, q) = (graph.clone(), q.clone());
    informers.get::<K>().add_handler(move |c: &Change<'_, K>| {
        let gone = matches!(c, Change::Deleted(_));
        let uids = match graph.lock() {
            Ok(mut g) => g.apply(kind, c.object().meta(), gone),
            Err(_) => return,
        };
        for u in uids {
            q.add(u);
        }
    });
}

/// Starts the collector on the shared informers: an object is looked at when it, one of its
/// owners or one of its dependents changes (`attemptToDeleteItem`, `attemptToOrphan`,
/// `processDeletingDependentsItem`), and again after a back-off when a write failed. Runs
/// until the returned set is dropped.
pub async fn run(informers: Informers) -> JoinSet<()> {
    let graph: Arc<Mutex<Graph>> = Arc::default();
    let q = Queue::new();
    follow::<Pod>(&informers, 0, &graph, &q);
    follow::<ReplicaSet>(&informers, 1, &graph, &q);
    follow::<Deployment>(&informers, 2, &graph, &q);
    follow::<EndpointSlice>(&informers, 3, &graph, &q);
    follow::<Service>(&informers, 4, &graph, &q);
    follow::<ConfigMap>(&informers, 5, &graph, &q);
    follow::<Secret>(&informers, 6, &graph, &q);
    follow::<PodDisruptionBudget>(&informers, 7, &graph, &q);
    informers.get::<Pod>().synced().await;
    informers.get::<ReplicaSet>().synced().await;
    informers.get::<Deployment>().synced().await;
    informers.get::<EndpointSlice>().synced().await;
    informers.get::<Service>().synced().await;
    informers.get::<ConfigMap>().synced().await;
    informers.get::<Secret>().synced().await;
    informers.get::<PodDisruptionBudget>().synced().await;
    let ctl = Arc::new(Ctl {
        client: informers.client().clone(),
        ars: KINDS.iter().map(api_resource).collect(),
        graph,
    });
    queue::run_workers(&q, WORKERS, move |uid| {
        let ctl = ctl.clone();
        async move { ctl.sync(&uid).await }
    })
}

impl Ctl {
    /// The object `uid`, its dependents, and what the graph knows of each owner.
    fn read(&self, uid: &str) -> Option<(GNode, Vec<GNode>, HashMap<String, OwnerState>)> {
        let g = self.graph.lock().ok()?;
        let n = g.nodes.get(uid)?.clone();
        let deps = g
            .dependents
            .get(uid)
            .map(|d| d.iter().filter_map(|u| g.nodes.get(u).cloned()).collect())
            .unwrap_or_default();
        let owners = n
            .meta
            .owner_references
            .iter()
            .flatten()
            .filter_map(|r| Some((r.uid.clone(), state_of(&g.nodes.get(&r.uid)?.meta))))
            .collect();
        Some((n, deps, owners))
    }

    /// One object's turn: orphaning its dependents, waiting on them in the foreground, or
    /// deleting it (or removing its dangling references) when its owners are gone.
    async fn sync(&self, uid: &str) -> Synced {
        let Some((n, deps, known)) = self.read(uid) else {
            return Synced::Done;
        };
        let (client, ars, m) = (&self.client, &self.ars, &n.meta);
        if m.deletion_timestamp.is_some() && has_finalizer(m, rules::FINALIZER_ORPHAN) {
            // orphanDependents, then the finalizer goes; a dependent whose reference could not
            // be removed (a conflict with a newer write) keeps the owner waiting: retried.
            let mut orphaned = true;
            for d in &deps {
                orphaned &= remove_refs(
                    client,
                    &ars[d.kind],
                    &d.meta,
                    &BTreeSet::from([uid.to_string()]),
                )
                .await;
            }
            if !orphaned {
                return Synced::Retry;
            }
            return done(remove_finalizer(client, &ars[n.kind], m, rules::FINALIZER_ORPHAN).await);
        }
        if foreground(m) {
            // processDeletingDependentsItem: blocking dependents are deleted (their own turn,
            // queued when this one entered the foreground deletion); once none blocks, the
            // finalizer goes. A dependent that goes brings this one back.
            let blocking = deps
                .iter()
                .filter(|d| {
                    d.meta
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.uid == uid && r.block_owner_deletion == Some(true))
                })
                .count();
            if rules::foreground_done(blocking) {
                return done(
                    remove_finalizer(client, &ars[n.kind], m, rules::FINALIZER_FOREGROUND).await,
                );
            }
            return Synced::Done;
        }
        if m.owner_references.as_ref().is_none_or(Vec::is_empty) || m.deletion_timestamp.is_some() {
            return Synced::Done;
        }
        // classifyReferences, with absent owners confirmed by a live GET.
        let mut states: HashMap<String, OwnerState> = known;
        for r in m.owner_references.iter().flatten() {
            if !states.contains_key(&r.uid) {
                let st = live_state(client, ars, m.namespace.as_deref().unwrap_or(""), r).await;
                states.insert(r.uid.clone(), st);
            }
        }
        let action = rules::attempt_to_delete(
            m,
            |r| states.get(&r.uid).copied().unwrap_or(OwnerState::Present),
            !deps.is_empty(),
        );
        match action {
            Action::Keep => Synced::Done,
            Action::RemoveOwnerRefs(uids) => {
                done(remove_refs(client, &ars[n.kind], m, &uids.into_iter().collect()).await)
            }
            Action::Delete(policy) => {
                let api = namespaced(client, &ars[n.kind], m.namespace.as_deref());
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
                match api.delete(m.name.as_deref().unwrap_or(""), &dp).await {
                    Ok(_) => Synced::Done,
                    // Gone already, or changed since (its change brings it back).
                    Err(e) if crate::is_conflict_or_gone(&e) => Synced::Done,
                    Err(e) => {
                        tracing::debug!("gc delete: {e}");
                        Synced::Retry
                    }
                }
            }
        }
    }
}

/// A write's result as the queue takes it: a failure is retried after the back-off.
fn done(ok: bool) -> Synced {
    if ok {
        Synced::Done
    } else {
        Synced::Retry
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
    m: &ObjectMeta,
    uids: &BTreeSet<String>,
) -> bool {
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

async fn remove_finalizer(
    client: &kube::Client,
    ar: &ApiResource,
    m: &ObjectMeta,
    f: &str,
) -> bool {
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
        return matches!(&e, kube::Error::Api(s) if s.code == 404);
    }
    true
}
