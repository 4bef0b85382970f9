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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::reflector::Store;
use podgrace_core::rules::{labels, podutil, replicaset as rules};
use tokio::sync::Notify;

use crate::events::{Recorder, REPLICASET_CONTROLLER};
use crate::{informer, now_ms, Config};

/// Pods created or deleted that the cache has not shown yet (`ControllerExpectations`; they
/// expire after 5 minutes, `ExpectationsTimeout`).
#[derive(Default)]
struct Expectations {
    adds: BTreeSet<String>,
    dels: BTreeSet<String>,
    at_ms: i64,
}

const EXPECTATIONS_TIMEOUT_MS: i64 = 5 * 60 * 1000;

/// Runs the controller on `client` until the task is dropped.
pub async fn run(client: kube::Client, cfg: Config) {
    let wake = Arc::new(Notify::new());
    let rss: Store<ReplicaSet> = informer::start(&client, wake.clone());
    let pods: Store<Pod> = informer::start(&client, wake.clone());
    let _ = rss.wait_until_ready().await;
    let _ = pods.wait_until_ready().await;
    let rec = Recorder::new(client.clone(), REPLICASET_CONTROLLER);
    let mut exp: BTreeMap<String, Expectations> = BTreeMap::new();
    let features = rules::Features::of(cfg.kube_version);
    loop {
        let mut next = None;
        for rs in rss.state() {
            let d = sync_one(&client, &rec, &rs, &rss, &pods, &mut exp, features).await;
            next = crate::earlier(next, d);
        }
        crate::wait(&wake, next).await;
    }
}

/// The pods `rs` controls (and whose labels its selector matches), from the cache.
fn owned_pods(rs: &ReplicaSet, pods: &Store<Pod>) -> Vec<Arc<Pod>> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let sel = rs.spec.selector.clone();
    informer::in_namespace(pods, &ns)
        .into_iter()
        .filter(|p| podutil::is_controlled_by(&p.metadata, &uid))
        .filter(|p| labels::selects(Some(&sel), &podutil::labels(&p.metadata)))
        .collect()
}

/// `syncReplicaSet` of one ReplicaSet; when to look again (minReadySeconds).
async fn sync_one(
    client: &kube::Client,
    rec: &Recorder,
    rs: &ReplicaSet,
    rss: &Store<ReplicaSet>,
    pods: &Store<Pod>,
    exp: &mut BTreeMap<String, Expectations>,
    f: rules::Features,
) -> Option<Duration> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let name = rs.metadata.name.clone().unwrap_or_default();
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let all = owned_pods(rs, pods);
    let active: Vec<Pod> = all
        .iter()
        .filter(|p| podutil::is_pod_active(p))
        .map(|p| (**p).clone())
        .collect();
    // SatisfiedExpectations: every pod created is in the cache, every pod deleted is gone or
    // marked for deletion there.
    let now = now_ms();
    let satisfied = match exp.get_mut(&uid) {
        None => true,
        Some(e) => {
            let ns_pods = informer::in_namespace(pods, &ns);
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
        exp.remove(&uid);
        let replicas = rs.spec.replicas.unwrap_or(1);
        let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), &ns);
        match rules::manage(active.len(), replicas) {
            rules::Manage::Nothing => {}
            rules::Manage::Create(n) => {
                let e = exp.entry(uid.clone()).or_default();
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
                let related: Vec<Pod> = related_pods(rs, rss, pods);
                let idx = rules::pods_to_delete(&active, &related, n, now, f);
                let e = exp.entry(uid.clone()).or_default();
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
    if let Some(st) = rules::status_needs_update(rs, &st) {
        let api: kube::Api<ReplicaSet> = kube::Api::namespaced(client.clone(), &ns);
        let mut new = rs.clone();
        new.status = Some(st);
        if let Err(e) = api
            .replace_status(&name, &PostParams::default(), &new)
            .await
        {
            if !crate::is_conflict_or_gone(&e) {
                tracing::debug!("replicaset {ns}/{name} status: {e}");
            }
        }
    }
    let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
    rules::next_availability_check_ms(&active, min_ready, now)
        .map(|ms| Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0) + 1))
}

/// The pods of every ReplicaSet with the same controller as `rs` (its Deployment), for the
/// ranking by pods on the same node.
fn related_pods(rs: &ReplicaSet, rss: &Store<ReplicaSet>, pods: &Store<Pod>) -> Vec<Pod> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let Some(owner) = podutil::controller_of(&rs.metadata).map(|o| o.uid.clone()) else {
        return owned_pods(rs, pods)
            .into_iter()
            .map(|p| (*p).clone())
            .collect();
    };
    let siblings: BTreeSet<String> = informer::in_namespace(rss, &ns)
        .iter()
        .filter(|r| podutil::is_controlled_by(&r.metadata, &owner))
        .filter_map(|r| r.metadata.uid.clone())
        .collect();
    informer::in_namespace(pods, &ns)
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
