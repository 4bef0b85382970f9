//! The Deployment controller: for each Deployment, its ReplicaSets (the new one, whose
//! template is the Deployment's, created with the `pod-template-hash` label and the next
//! revision; the old ones), scaled as the strategy says (RollingUpdate within maxSurge and
//! maxUnavailable, Recreate: the old ones to zero, then, once their pods are gone, the new
//! one), proportional scaling on a scaling event or while paused, old ReplicaSets cleaned up
//! beyond revisionHistoryLimit, and the status with the `Available` and `Progressing`
//! conditions (progressDeadlineSeconds rechecked). Events (`deployment-controller`):
//! `ScalingReplicaSet` `Scaled up replica set NAME from A to B` / `Scaled down ...`.
//!
//! `kubectl rollout restart`, `set image` and `rollout undo` change the template (undo copies
//! an old ReplicaSet's template client-side); this controller turns the change into a rollout.
//!
//! Upstream: `pkg/controller/deployment/deployment_controller.go` (`syncDeployment`),
//! `sync.go` (`sync`, `getAllReplicaSetsAndSyncRevision`, `getNewReplicaSet`, `scale`,
//! `scaleReplicaSet`, `cleanupDeployment`, `syncDeploymentStatus`), `rolling.go`
//! (`rolloutRolling`), `recreate.go` (`rolloutRecreate`), `progress.go`
//! (`syncRolloutStatus`); decisions in podgrace-core `rules::deployment`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use podgrace_core::rules::deployment::{self as rules, reason};
use podgrace_core::rules::podutil;
use podgrace_core::rules::replicaset::Features;
use tokio::task::JoinSet;

use crate::events::{Recorder, DEPLOYMENT_CONTROLLER};
use crate::informer::{self, Change, Informer, Informers};
use crate::queue::{self, Queue, Synced};
use crate::{now_ms, Config};

/// kube-controller-manager's `--concurrent-deployment-syncs` default: Deployments synced at
/// once (never one Deployment by two workers).
pub const WORKERS: usize = 5;

/// Starts the controller on the shared informers: a Deployment is synced when it changes,
/// when one of its ReplicaSets is added, changes or goes, when a pod of a Recreate Deployment
/// goes, and when a timer it asked for fires (the progress deadline). Runs until the returned
/// set is dropped.
pub async fn run(informers: Informers, cfg: Config) -> JoinSet<()> {
    let ds = informers.get::<Deployment>();
    let rss = informers.get::<ReplicaSet>();
    let pods = informers.get::<Pod>();
    let q = Queue::new();
    {
        let q = q.clone();
        ds.add_handler(move |c| q.add(informer::key_of(c.object())));
    }
    {
        let (q, ds) = (q.clone(), ds.clone());
        rss.add_handler(move |c| {
            // `addReplicaSet`, `updateReplicaSet`, `deleteReplicaSet`: its controller, before
            // and after the change.
            let mut keys: Vec<String> = [Some(c.object()), c.old()]
                .into_iter()
                .flatten()
                .filter_map(|rs| owner_key(&ds, &rs.metadata))
                .collect();
            keys.dedup();
            for k in keys {
                q.add(k);
            }
        });
    }
    {
        let (q, ds, rss) = (q.clone(), ds.clone(), rss.clone());
        pods.add_handler(move |c| {
            // `deletePod`: a Recreate Deployment waits for its old pods to be gone.
            let Change::Deleted(p) = c else { return };
            let Some(r) = podutil::controller_of(&p.metadata) else {
                return;
            };
            let ns = p.metadata.namespace.as_deref().unwrap_or("");
            let Some(rs) = rss.get(ns, &r.name) else {
                return;
            };
            if let Some(k) = owner_key(&ds, &rs.metadata) {
                let (dns, dn) = informer::split_key(&k);
                if ds
                    .get(dns, dn)
                    .is_some_and(|d| rules::strategy_type(&d) == "Recreate")
                {
                    q.add(k);
                }
            }
        });
    }
    ds.synced().await;
    rss.synced().await;
    pods.synced().await;
    let c = Arc::new(Ctl {
        client: informers.client().clone(),
        rec: Recorder::new(informers.client().clone(), DEPLOYMENT_CONTROLLER),
        f: Features::of(cfg.kube_version),
        ds,
        rss,
        pods,
    });
    queue::run_workers(&q, WORKERS, move |key| {
        let c = c.clone();
        async move { c.sync_key(&key).await }
    })
}

/// The key of the Deployment that controls an object with metadata `m`, if it is in the cache.
fn owner_key(ds: &Informer<Deployment>, m: &ObjectMeta) -> Option<String> {
    let r = podutil::controller_of(m)?;
    if r.kind != "Deployment" {
        return None;
    }
    let d = ds.get(m.namespace.as_deref().unwrap_or(""), &r.name)?;
    (d.metadata.uid.as_deref() == Some(r.uid.as_str())).then(|| informer::key_of(&*d))
}

struct Ctl {
    client: kube::Client,
    rec: Recorder,
    f: Features,
    ds: Arc<Informer<Deployment>>,
    rss: Arc<Informer<ReplicaSet>>,
    pods: Arc<Informer<Pod>>,
}

type Res<T> = Result<T, kube::Error>;

fn name(m: &ObjectMeta) -> String {
    m.name.clone().unwrap_or_default()
}

fn refs(v: &[ReplicaSet]) -> Vec<&ReplicaSet> {
    v.iter().collect()
}

impl Ctl {
    /// `syncDeployment` of the Deployment `key`, with its ReplicaSets from the cache.
    async fn sync_key(&self, key: &str) -> Synced {
        let (ns, name) = informer::split_key(key);
        let Some(d) = self.ds.get(ns, name) else {
            return Synced::Done;
        };
        let uid = d.metadata.uid.as_deref().unwrap_or("");
        let own: Vec<ReplicaSet> = self
            .rss
            .in_namespace(ns)
            .iter()
            .filter(|r| podutil::is_controlled_by(&r.metadata, uid))
            .map(|r| (**r).clone())
            .collect();
        match self.sync(&d, own).await {
            Ok(n) => Synced::after(n),
            Err(e) => {
                tracing::debug!("deployment {key}: {e}");
                if matches!(&e, kube::Error::Api(s) if s.code == 404) {
                    Synced::Done
                } else {
                    Synced::Retry
                }
            }
        }
    }

    fn rs_api(&self, ns: &str) -> kube::Api<ReplicaSet> {
        kube::Api::namespaced(self.client.clone(), ns)
    }
    fn d_api(&self, ns: &str) -> kube::Api<Deployment> {
        kube::Api::namespaced(self.client.clone(), ns)
    }

    /// `syncDeployment`; when to look again.
    async fn sync(&self, d: &Deployment, rss: Vec<ReplicaSet>) -> Res<Option<Duration>> {
        let mut d = d.clone();
        let now = now_ms();
        if d.metadata.deletion_timestamp.is_some() {
            let (new, old) = self.get_all(&mut d, &rss, false).await?;
            let mut all = old.clone();
            all.extend(new.clone());
            self.write_status(
                &d,
                rules::sync_deployment_status(&refs(&all), new.as_ref(), &d, now, self.f),
            )
            .await?;
            return Ok(None);
        }
        if let Some(st) = rules::paused_conditions(&d, now) {
            d = self.write_status(&d, Some(st)).await?;
        }
        let paused = d.spec.paused.unwrap_or(false);
        if paused || rules::is_scaling_event(&d, &refs(&rss)) {
            return self.scale_sync(&mut d, &rss).await.map(|_| None);
        }
        if rules::strategy_type(&d) == "Recreate" {
            return self.recreate(&mut d, &rss).await;
        }
        self.rolling(&mut d, &rss).await
    }

    /// `getAllReplicaSetsAndSyncRevision`: `(new, old)`; the new one created when `create`.
    async fn get_all(
        &self,
        d: &mut Deployment,
        rss: &[ReplicaSet],
        create: bool,
    ) -> Res<(Option<ReplicaSet>, Vec<ReplicaSet>)> {
        let r = refs(rss);
        let (_, old_all) = rules::find_old_replica_sets(d, &r);
        let old: Vec<ReplicaSet> = old_all.into_iter().cloned().collect();
        let new = self.get_new(d, rss, &old, create).await?;
        Ok((new, old))
    }

    /// `getNewReplicaSet`.
    async fn get_new(
        &self,
        d: &mut Deployment,
        rss: &[ReplicaSet],
        old: &[ReplicaSet],
        create: bool,
    ) -> Res<Option<ReplicaSet>> {
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let now = now_ms();
        let new_revision = (rules::max_revision(&refs(old)) + 1).to_string();
        if let Some(existing) = rules::find_new_replica_set(d, &refs(rss)) {
            let mut rs = existing.clone();
            let ann = rules::set_new_replica_set_annotations(
                d,
                &mut rs,
                &new_revision,
                true,
                rules::MAX_REV_HISTORY_LENGTH_IN_CHARS,
            );
            let spec = &mut rs.spec;
            let min_ready = d.spec.min_ready_seconds;
            let mrs = spec.min_ready_seconds != min_ready;
            if ann || mrs {
                spec.min_ready_seconds = min_ready;
                rs = self
                    .rs_api(&ns)
                    .replace(&name(&rs.metadata), &PostParams::default(), &rs)
                    .await?;
            }
            let rev = rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(rules::REVISION))
                .cloned()
                .unwrap_or_default();
            let mut changed = Self::set_revision(d, &rev);
            let mut st = d.status.clone().unwrap_or_default();
            if rules::has_progress_deadline(d) && rules::condition(&st, "Progressing").is_none() {
                let msg = format!("Found new replica set {:?}", name(&rs.metadata));
                rules::set_condition(
                    &mut st,
                    rules::new_condition("Progressing", "True", reason::FOUND_NEW_RS, &msg, now),
                );
                changed = true;
            }
            if changed {
                *d = self.write_status(d, Some(st)).await?;
            }
            return Ok(Some(rs));
        }
        if !create {
            return Ok(None);
        }
        let collision = d.status.as_ref().and_then(|s| s.collision_count);
        let mut template = d.spec.template.clone();
        let hash = rules::compute_hash(&template, collision);
        let tm = template.metadata.get_or_insert_with(Default::default);
        tm.labels
            .get_or_insert_with(Default::default)
            .insert(rules::POD_TEMPLATE_HASH.into(), hash.clone());
        let mut selector = d.spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(rules::POD_TEMPLATE_HASH.into(), hash.clone());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(rules::replica_set_name(&name(&d.metadata), &hash)),
                namespace: Some(ns.clone()),
                owner_references: Some(vec![podutil::new_controller_ref(
                    &d.metadata,
                    "apps/v1",
                    "Deployment",
                )]),
                labels: tm.labels.clone(),
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: d.spec.min_ready_seconds,
                selector,
                template: Some(template),
            },
            status: None,
        };
        let mut all: Vec<&ReplicaSet> = old.iter().collect();
        all.push(&rs);
        let count = match rules::new_rs_new_replicas(d, &all, &rs) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("new replicas: {e}");
                return Ok(None);
            }
        };
        rs.spec.replicas = Some(count);
        rules::set_new_replica_set_annotations(
            d,
            &mut rs,
            &new_revision,
            false,
            rules::MAX_REV_HISTORY_LENGTH_IN_CHARS,
        );
        let created = match self.rs_api(&ns).create(&PostParams::default(), &rs).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Already there: the cache has not shown it yet, or a hash collision.
                match self.rs_api(&ns).get_opt(&name(&rs.metadata)).await? {
                    Some(x)
                        if podutil::is_controlled_by(
                            &x.metadata,
                            d.metadata.uid.as_deref().unwrap_or(""),
                        ) && rules::equal_ignore_hash(
                            &d.spec.template,
                            &x.spec.template.clone().unwrap_or_default(),
                        ) =>
                    {
                        return Ok(Some(x));
                    }
                    _ => {
                        let mut st = d.status.clone().unwrap_or_default();
                        st.collision_count = Some(st.collision_count.unwrap_or(0) + 1);
                        *d = self.write_status(d, Some(st)).await?;
                        return Ok(None);
                    }
                }
            }
            Err(e) => {
                let mut st = d.status.clone().unwrap_or_default();
                let msg = format!(
                    "Failed to create new replica set {:?}: {}",
                    name(&rs.metadata),
                    crate::replicaset::api_message(&e)
                );
                rules::set_condition(
                    &mut st,
                    rules::new_condition(
                        "Progressing",
                        "False",
                        reason::FAILED_RS_CREATE,
                        &msg,
                        now,
                    ),
                );
                let _ = self.write_status(d, Some(st)).await;
                self.rec
                    .event(
                        "apps/v1",
                        "Deployment",
                        &d.metadata,
                        "Warning",
                        reason::FAILED_RS_CREATE,
                        &msg,
                    )
                    .await;
                return Err(e);
            }
        };
        if count > 0 {
            let msg = format!(
                "Scaled up replica set {} from 0 to {count}",
                name(&created.metadata)
            );
            self.rec
                .event(
                    "apps/v1",
                    "Deployment",
                    &d.metadata,
                    "Normal",
                    "ScalingReplicaSet",
                    &msg,
                )
                .await;
        }
        let mut changed = Self::set_revision(d, &new_revision);
        let mut st = d.status.clone().unwrap_or_default();
        if rules::has_progress_deadline(d) {
            let msg = format!("Created new replica set {:?}", name(&created.metadata));
            rules::set_condition(
                &mut st,
                rules::new_condition("Progressing", "True", reason::NEW_REPLICA_SET, &msg, now),
            );
            changed = true;
        }
        if changed {
            *d = self.write_status(d, Some(st)).await?;
        }
        Ok(Some(created))
    }

    /// `SetDeploymentRevision` on the local copy: whether it changed (the caller writes it
    /// through the status subresource, `UpdateStatus`, as upstream: the status strategy keeps
    /// annotations from the write, so the generation does not move).
    fn set_revision(d: &mut Deployment, rev: &str) -> bool {
        let cur = d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(rules::REVISION))
            .cloned();
        if cur.as_deref() == Some(rev) || rev.is_empty() {
            return false;
        }
        d.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(rules::REVISION.into(), rev.into());
        true
    }

    async fn write_status(&self, d: &Deployment, st: Option<DeploymentStatus>) -> Res<Deployment> {
        let Some(st) = st else { return Ok(d.clone()) };
        let mut new = d.clone();
        new.status = Some(st);
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        self.d_api(&ns)
            .replace_status(&name(&d.metadata), &PostParams::default(), &new)
            .await
    }

    /// `scaleReplicaSet`: writes the size (and annotations), records the event; the
    /// ReplicaSet as written, or `None` when nothing needed writing.
    async fn scale(
        &self,
        d: &Deployment,
        rs: &ReplicaSet,
        size: i32,
        force: bool,
    ) -> Res<Option<ReplicaSet>> {
        let Some(s) = rules::scale_replica_set(rs, size, d, force) else {
            return Ok(None);
        };
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let out = self
            .rs_api(&ns)
            .replace(&name(&rs.metadata), &PostParams::default(), &s.replica_set)
            .await?;
        if let Some(msg) = s.event {
            self.rec
                .event(
                    "apps/v1",
                    "Deployment",
                    &d.metadata,
                    "Normal",
                    "ScalingReplicaSet",
                    &msg,
                )
                .await;
        }
        Ok(Some(out))
    }

    /// `sync`: proportional scaling (a scaling event or a paused deployment), then the status.
    async fn scale_sync(&self, d: &mut Deployment, rss: &[ReplicaSet]) -> Res<()> {
        let (new, old) = self.get_all(d, rss, false).await?;
        let mut all: BTreeMap<String, ReplicaSet> = old
            .iter()
            .chain(new.iter())
            .map(|r| (name(&r.metadata), r.clone()))
            .collect();
        let plan = rules::scale_plan(d, new.as_ref(), &refs(&old));
        for (n, size, force) in plan {
            if let Some(rs) = all.get(&n).cloned() {
                if let Some(w) = self.scale(d, &rs, size, force).await? {
                    all.insert(n, w);
                }
            }
        }
        let new = new.and_then(|r| all.get(&name(&r.metadata)).cloned());
        let olds: Vec<ReplicaSet> = all
            .values()
            .filter(|r| Some(&r.metadata.uid) != new.as_ref().map(|n| &n.metadata.uid))
            .cloned()
            .collect();
        if d.spec.paused.unwrap_or(false) {
            self.cleanup(d, &olds).await;
        }
        let list: Vec<&ReplicaSet> = all.values().collect();
        self.write_status(
            d,
            rules::sync_deployment_status(&list, new.as_ref(), d, now_ms(), self.f),
        )
        .await?;
        Ok(())
    }

    /// `syncRolloutStatus`, and when to look at the progress deadline again.
    async fn rollout_status(
        &self,
        d: &Deployment,
        all: &[ReplicaSet],
        new: Option<&ReplicaSet>,
    ) -> Res<Option<Duration>> {
        let r = rules::sync_rollout_status(&refs(all), new, d, now_ms(), self.f);
        self.write_status(d, r.status).await?;
        Ok(r.requeue_after_ms
            .map(|ms| Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0) + 1)))
    }

    /// `cleanupDeployment`.
    async fn cleanup(&self, d: &Deployment, old: &[ReplicaSet]) {
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        for n in rules::cleanup_plan(&refs(old), d) {
            let _ = self.rs_api(&ns).delete(&n, &DeleteParams::default()).await;
        }
    }

    /// `rolloutRolling`.
    async fn rolling(&self, d: &mut Deployment, rss: &[ReplicaSet]) -> Res<Option<Duration>> {
        let (new, old) = self.get_all(d, rss, true).await?;
        let Some(mut new) = new else {
            return Ok(None);
        };
        let mut all: Vec<ReplicaSet> = old.clone();
        all.push(new.clone());
        match rules::reconcile_new_replica_set(&refs(&all), &new, d) {
            Ok(Some(size)) => {
                if let Some(w) = self.scale(d, &new, size, false).await? {
                    new = w;
                    let last = all.len() - 1;
                    all[last] = new.clone();
                    return self.rollout_status(d, &all, Some(&new)).await;
                }
            }
            Ok(None) => {}
            Err(e) => tracing::debug!("reconcile new: {e}"),
        }
        let active: Vec<&ReplicaSet> = rules::filter_active(&refs(&old));
        let plan = rules::reconcile_old_replica_sets(&refs(&all), &active, &new, d);
        let mut by_name: BTreeMap<String, ReplicaSet> =
            all.iter().map(|r| (name(&r.metadata), r.clone())).collect();
        let mut scaled = false;
        for (n, size) in plan {
            if let Some(rs) = by_name.get(&n).cloned() {
                if let Some(w) = self.scale(d, &rs, size, false).await? {
                    by_name.insert(n, w);
                    scaled = true;
                }
            }
        }
        let all: Vec<ReplicaSet> = by_name.into_values().collect();
        if scaled {
            return self.rollout_status(d, &all, Some(&new)).await;
        }
        if rules::deployment_complete(d, &d.status.clone().unwrap_or_default()) {
            self.cleanup(d, &old).await;
        }
        self.rollout_status(d, &all, Some(&new)).await
    }

    /// `rolloutRecreate`.
    async fn recreate(&self, d: &mut Deployment, rss: &[ReplicaSet]) -> Res<Option<Duration>> {
        let (new, old) = self.get_all(d, rss, false).await?;
        let mut all: Vec<ReplicaSet> = old.iter().chain(new.iter()).cloned().collect();
        let mut scaled = false;
        for rs in rules::filter_active(&refs(&old)) {
            if let Some(w) = self.scale(d, rs, 0, false).await? {
                if let Some(slot) = all.iter_mut().find(|r| r.metadata.uid == w.metadata.uid) {
                    *slot = w;
                }
                scaled = true;
            }
        }
        if scaled {
            return self.rollout_status(d, &all, new.as_ref()).await;
        }
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let ns_pods = self.pods.in_namespace(&ns);
        let by_rs: Vec<(String, Vec<&Pod>)> = rss
            .iter()
            .map(|r| {
                let uid = r.metadata.uid.clone().unwrap_or_default();
                let ps = ns_pods
                    .iter()
                    .filter(|p| podutil::is_controlled_by(&p.metadata, &uid))
                    .map(|p| &**p)
                    .collect();
                (uid, ps)
            })
            .collect();
        if rules::old_pods_running(new.as_ref(), &refs(&old), &by_rs) {
            return self.rollout_status(d, &all, new.as_ref()).await;
        }
        let new = match new {
            Some(n) => Some(n),
            None => {
                let (n, _) = self.get_all(d, rss, true).await?;
                if let Some(n) = &n {
                    all.push(n.clone());
                }
                n
            }
        };
        let Some(mut new) = new else { return Ok(None) };
        if let Some(w) = self.scale(d, &new, rules::replicas(d), false).await? {
            if let Some(slot) = all.iter_mut().find(|r| r.metadata.uid == w.metadata.uid) {
                *slot = w.clone();
            }
            new = w;
        }
        if rules::deployment_complete(d, &d.status.clone().unwrap_or_default()) {
            self.cleanup(d, &old).await;
        }
        self.rollout_status(d, &all, Some(&new)).await
    }
}
