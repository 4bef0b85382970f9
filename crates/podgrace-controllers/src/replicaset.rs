//! The ReplicaSet controller: for each ReplicaSet, its pods (those it controls and matching
//! its selector) against `spec.replicas`: creates in slow-start batches, deletes the pods
//! upstream's ranking puts first, the status (replicas, fullyLabeled, ready, available,
//! terminating, `ReplicaFailure`), and a resync when a ready pod becomes available under
//! minReadySeconds. Expectations keep it from acting again on a cache that has not seen its
//! own writes yet. Events: `SuccessfulCreate` `Created pod: NAME`, `SuccessfulDelete`
//! `Deleted pod: NAME`, `FailedCreate` `Error creating: ...` from `replicaset-controller`.
//!
//! Upstream: `pkg/controller/replicaset/replica_set.go` (`syncReplicaSet`, `manageReplicas`,
//! `slowStartBatch`, `getPodsToDelete`), `replica_set_utils.go` (`calculateStatus`,
//! `updateReplicaSetStatus`), `pkg/controller/controller_utils.go` (`ControllerExpectations`,
//! `RealPodControl`); decisions in podgrace-core `rules::replicaset`.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use podgrace_core::rules::{labels, podutil, replicaset as rules};
use tokio::task::JoinSet;

use crate::events::{Recorder, REPLICASET_CONTROLLER};
use crate::informer::{self, Change, Informer, Informers};
use crate::queue::{self, Queue, Synced};
use crate::{now_ms, Config};

/// kube-controller-manager's `--concurrent-replicaset-syncs` default: ReplicaSets synced at
/// once (never one ReplicaSet by two workers).
pub const WORKERS: usize = 5;

/// Pods created or deleted that the cache has not shown yet (`ControllerExpectations`; they
/// expire after 5 minutes, `ExpectationsTimeout`).
#[derive(Default)]
struct Expectations {
    adds: BTreeSet<String>,
    dels: BTreeSet<String>,
    at_ms: i64,
}

const EXPECTATIONS_TIMEOUT_MS: i64 = 5 * 60 * 1000;

/// The controller's caches and its expectations by ReplicaSet uid.
struct Ctl {
    client: kube::Client,
    rec: Recorder,
    rss: Arc<Informer<ReplicaSet>>,
    pods: Arc<Informer<Pod>>,
    exp: Mutex<HashMap<String, Expectations>>,
    features: rules::Features,
}

/// Starts the controller on the shared informers: a ReplicaSet is synced when it changes, when
/// a pod it controls (before or after the change) is added, changes or goes, and when a timer
/// it asked for fires (a ready pod becoming available under minReadySeconds). Runs until the
/// returned set is dropped.
pub async fn run(informers: Informers, cfg: Config) -> JoinSet<()> {
    let rss = informers.get::<ReplicaSet>();
    let pods = informers.get::<Pod>();
    let q = Queue::new();
    {
        let q = q.clone();
        rss.add_handler(move |c| q.add(informer::key_of(c.object())));
    }
    {
        let (q, rs_cache) = (q.clone(), rss.clone());
        pods.add_handler(move |c| pod_changed(&q, &rs_cache, c));
    }
    rss.synced().await;
    pods.synced().await;
    let ctl = Arc::new(Ctl {
        client: informers.client().clone(),
        rec: Recorder::new(informers.client().clone(), REPLICASET_CONTROLLER),
        rss,
        pods,
        exp: Mutex::default(),
        features: rules::Features::of(cfg.kube_version),
    });
    queue::run_workers(&q, WORKERS, move |key| {
        let ctl = ctl.clone();
        async move { ctl.sync(&key).await }
    })
}

/// `addPod`, `updatePod`, `deletePod`: the ReplicaSet that controls the pod (before and after
/// the change, when its controller changed) is synced; a pod that became ready under
/// minReadySeconds is looked at again once it is available.
fn pod_changed(q: &Queue, rss: &Informer<ReplicaSet>, c: &Change<'_, Pod>) {
    let owner = |p: &Pod| -> Option<(String, Option<i32>)> {
        let r = podutil::controller_of(&p.metadata)?;
        if r.kind != "ReplicaSet" {
            return None;
        }
        let ns = p.metadata.namespace.as_deref().unwrap_or("");
        let rs = rss.get(ns, &r.name)?;
        (rs.metadata.uid.as_deref() == Some(r.uid.as_str()))
            .then(|| (informer::key_of(&*rs), rs.spec.min_ready_seconds))
    };
    let new = owner(c.object());
    if let Some((k, min_ready)) = &new {
        q.add(k.clone());
        if let (Change::Updated { old, new: p }, Some(m)) = (c, min_ready) {
            if *m > 0 && !podutil::is_pod_ready(old) && podutil::is_pod_ready(p) {
                q.add_after(k.clone(), Duration::from_secs(*m as u64 + 1));
            }
        }
    }
    if let Some(old) = c.old() {
        if let Some((k, _)) = owner(old) {
            if new.as_ref().map(|n| &n.0) != Some(&k) {
                q.add(k);
            }
        }
    }
}

impl Ctl {
    /// `syncReplicaSet` of the ReplicaSet `key`, with its expectations.
    async fn sync(&self, key: &str) -> Synced {
        let (ns, name) = informer::split_key(key);
        let Some(rs) = self.rss.get(ns, name) else {
            // Deleted: its expectations go (`deleteRS`).
            return Synced::Done;
        };
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let mut exp = self.exp.lock().ok().and_then(|mut m| m.remove(&uid));
        let r = sync_one(self, &rs, &mut exp).await;
        if let Some(e) = exp {
            if let Ok(mut m) = self.exp.lock() {
                m.insert(uid, e);
            }
        }
        r
    }
}

/// The pods `rs` controls (and whose labels its selector matches), from the cache.
fn owned_pods(rs: &ReplicaSet, pods: &Informer<Pod>) -> Vec<Arc<Pod>> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let sel = rs.spec.selector.clone();
    pods.in_namespace(&ns)
        .into_iter()
        .filter(|p| podutil::is_controlled_by(&p.metadata, &uid))
        .filter(|p| labels::selects(Some(&sel), &podutil::labels(&p.metadata)))
        .collect()
}

/// `syncReplicaSet` of one ReplicaSet with its expectations `exp`: when to look again
/// (minReadySeconds, or the expectations' timeout), or a retry when a write failed.
async fn sync_one(ctl: &Ctl, rs: &ReplicaSet, exp: &mut Option<Expectations>) -> Synced {
    let (client, rec, pods, f) = (&ctl.client, &ctl.rec, &*ctl.pods, ctl.features);
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let name = rs.metadata.name.clone().unwrap_or_default();
    let all = owned_pods(rs, pods);
    let active: Vec<Pod> = all
        .iter()
        .filter(|p| podutil::is_pod_active(p))
        .map(|p| (**p).clone())
        .collect();
    // SatisfiedExpectations: every pod created is in the cache, every pod deleted is gone or
    // marked for deletion there.
    let now = now_ms();
    let satisfied = match exp.as_mut() {
        None => true,
        Some(e) => {
            let ns_pods = pods.in_namespace(&ns);
            e.adds.retain(|n| {
                !ns_pods
                    .iter()
                    .any(|p| p.metadata.name.as_deref() == Some(n))
            });
            e.dels.retain(|n| {
                ns_pods.iter().any(|p| {
                    p.metadata.name.as_deref() == Some(n) && p.metadata.deletion_timestamp.is_none()
                })
            });
            (e.adds.is_empty() && e.dels.is_empty()) || now - e.at_ms > EXPECTATIONS_TIMEOUT_MS
        }
    };
    let mut manage_error: Option<String> = None;
    if satisfied && rs.metadata.deletion_timestamp.is_none() {
        *exp = None;
        let replicas = rs.spec.replicas.unwrap_or(1);
        let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), &ns);
        match rules::manage(active.len(), replicas) {
            rules::Manage::Nothing => {}
            rules::Manage::Create(n) => {
                let e = exp.get_or_insert_with(Expectations::default);
                e.at_ms = now;
                let template = rs.spec.template.clone().unwrap_or_default();
                let owner = podutil::new_controller_ref(&rs.metadata, "apps/v1", "ReplicaSet");
                'batches: for size in rules::slow_start_batches(n) {
                    let mut set = tokio::task::JoinSet::new();
                    for _ in 0..size {
                        let mut pod = rules::pod_from_template(&template, &name, owner.clone());
                        pod.metadata.namespace = Some(ns.clone());
                        let api = api.clone();
                        set.spawn(async move { api.create(&PostParams::default(), &pod).await });
                    }
                    let mut failed = false;
                    while let Some(r) = set.join_next().await {
                        match r {
                            Ok(Ok(p)) => {
                                let pn = p.metadata.name.clone().unwrap_or_default();
                                e.adds.insert(pn.clone());
                                rec.event(
                                    "apps/v1",
                                    "ReplicaSet",
                                    &rs.metadata,
                                    "Normal",
                                    "SuccessfulCreate",
                                    &format!("Created pod: {pn}"),
                                )
                                .await;
                            }
                            Ok(Err(err)) => {
                                failed = true;
                                let msg = api_message(&err);
                                rec.event(
                                    "apps/v1",
                                    "ReplicaSet",
                                    &rs.metadata,
                                    "Warning",
                                    "FailedCreate",
                                    &format!("Error creating: {msg}"),
                                )
                                .await;
                                manage_error = Some(msg);
                            }
                            Err(_) => failed = true,
                        }
                    }
                    if failed {
                        break 'batches;
                    }
                }
            }
            rules::Manage::Delete(n) => {
                let related: Vec<Pod> = related_pods(rs, &ctl.rss, pods);
                let idx = rules::pods_to_delete(&active, &related, n, now, f);
                let e = exp.get_or_insert_with(Expectations::default);
                e.at_ms = now;
                let mut set = tokio::task::JoinSet::new();
                for i in idx {
                    let pn = active[i].metadata.name.clone().unwrap_or_default();
                    e.dels.insert(pn.clone());
                    let api = api.clone();
                    set.spawn(async move {
                        let r = api.delete(&pn, &DeleteParams::default()).await;
                        (pn, r)
                    });
                }
                while let Some(r) = set.join_next().await {
                    let Ok((pn, r)) = r else { continue };
                    match r {
                        Ok(_) => {
                            rec.event(
                                "apps/v1",
                                "ReplicaSet",
                                &rs.metadata,
                                "Normal",
                                "SuccessfulDelete",
                                &format!("Deleted pod: {pn}"),
                            )
                            .await;
                        }
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(err) => {
                            let msg = api_message(&err);
                            rec.event(
                                "apps/v1",
                                "ReplicaSet",
                                &rs.metadata,
                                "Warning",
                                "FailedDelete",
                                &format!("Error deleting: {msg}"),
                            )
                            .await;
                            manage_error = Some(msg);
                        }
                    }
                }
            }
        }
    }
    // The status from the cache as it is now (upstream: the pods it listed).
    let all = owned_pods(rs, pods);
    let active: Vec<&Pod> = all
        .iter()
        .filter(|p| podutil::is_pod_active(p))
        .map(|p| &**p)
        .collect();
    let term: Vec<&Pod> = all
        .iter()
        .filter(|p| podutil::is_pod_terminating(p))
        .map(|p| &**p)
        .collect();
    let st = rules::calculate_status(rs, &active, &term, manage_error.as_deref(), now, f);
    let mut retry = manage_error.is_some();
    if let Some(st) = rules::status_needs_update(rs, &st) {
        let api: kube::Api<ReplicaSet> = kube::Api::namespaced(client.clone(), &ns);
        let mut new = rs.clone();
        new.status = Some(st);
        match api
            .replace_status(&name, &PostParams::default(), &new)
            .await
        {
            Ok(_) => {}
            // Gone: nothing to do; a conflict: the newer ReplicaSet's event brings it back.
            Err(e) if crate::is_conflict_or_gone(&e) => {}
            Err(e) => {
                tracing::debug!("replicaset {ns}/{name} status: {e}");
                retry = true;
            }
        }
    }
    if retry {
        return Synced::Retry;
    }
    let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
    let available = rules::next_availability_check_ms(&active, min_ready, now)
        .map(|ms| Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0) + 1));
    // Unsatisfied expectations end at their timeout even if no event comes.
    let expires = exp.as_ref().map(|e| {
        let left = (e.at_ms + EXPECTATIONS_TIMEOUT_MS - now).max(0) + 1;
        Duration::from_millis(u64::try_from(left).unwrap_or(0))
    });
    Synced::after(match (available, expires) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}

/// The pods of every ReplicaSet with the same controller as `rs` (its Deployment), for the
/// ranking by pods on the same node.
fn related_pods(rs: &ReplicaSet, rss: &Informer<ReplicaSet>, pods: &Informer<Pod>) -> Vec<Pod> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let Some(owner) = podutil::controller_of(&rs.metadata).map(|o| o.uid.clone()) else {
        return owned_pods(rs, pods)
            .into_iter()
            .map(|p| (*p).clone())
            .collect();
    };
    let siblings: BTreeSet<String> = rss
        .in_namespace(&ns)
        .iter()
        .filter(|r| podutil::is_controlled_by(&r.metadata, &owner))
        .filter_map(|r| r.metadata.uid.clone())
        .collect();
    pods.in_namespace(&ns)
        .iter()
        .filter(|p| podutil::controller_of(&p.metadata).is_some_and(|o| siblings.contains(&o.uid)))
        .map(|p| (**p).clone())
        .collect()
}

/// The message of an API error (`Status.message`), or the error itself.
pub(crate) fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}
