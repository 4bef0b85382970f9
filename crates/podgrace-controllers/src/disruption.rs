//! The disruption controller: each PodDisruptionBudget's status (expectedPods, desiredHealthy,
//! currentHealthy, disruptionsAllowed, disruptedPods, `DisruptionAllowed`) from the pods its
//! selector selects and their controllers' scale, rechecked when an eviction recorded in
//! `disruptedPods` should have completed. A budget is synced when it or one of its pods
//! changed (the controller's queue, keyed by budget), not on every change in the cluster.
//! Events (`controllermanager`): `NoPods`, `CalculateExpectedPodCountFailed`,
//! `UnmanagedPods`, and `NotDeleted` on a pod an eviction did not delete.
//!
//! Upstream: `pkg/controller/disruption/disruption.go` (`sync`, `trySync`, `getPodsForPdb`,
//! `getExpectedPodCount` with the finders `getPodReplicaSet`/`getPodDeployment`,
//! `buildDisruptedPodMap`, `countHealthyPods`, `updatePdbStatus`, `failSafe`); decisions in
//! podgrace-core `rules::disruption`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::PostParams;
use podgrace_core::rules::{disruption as rules, labels, podutil};
use tokio::task::JoinSet;

use crate::events::{Recorder, DISRUPTION_CONTROLLER};
use crate::informer::{self, Change, Informer, Informers};
use crate::now_ms;
use crate::queue::{self, Queue, Synced};

struct Stores {
    pdbs: Arc<Informer<PodDisruptionBudget>>,
    pods: Arc<Informer<Pod>>,
    rss: Arc<Informer<ReplicaSet>>,
    deployments: Arc<Informer<Deployment>>,
}

/// The keys of the budgets in the pod's namespace whose selector selects it (`getPdbForPod`,
/// every one of them).
fn budgets_of(pdbs: &Informer<PodDisruptionBudget>, pod: &Pod) -> Vec<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let l = podutil::labels(&pod.metadata);
    pdbs.in_namespace(ns)
        .iter()
        .filter(|b| {
            let sel = b.spec.as_ref().and_then(|s| s.selector.as_ref());
            sel.is_some() && labels::selects(sel, &l)
        })
        .map(|b| informer::key_of(&**b))
        .collect()
}

/// Queues every budget of namespace `ns` (a scale changed: percentages and maxUnavailable
/// count from the controllers' scale).
fn all_budgets(q: &Queue, pdbs: &Informer<PodDisruptionBudget>, ns: &str) {
    for b in pdbs.in_namespace(ns) {
        q.add(informer::key_of(&*b));
    }
}

/// Starts the controller on the shared informers: a budget is synced when it changes, when a
/// pod it selects is added, changes or goes, when a ReplicaSet or Deployment of its namespace
/// is scaled, and when an eviction recorded in `disruptedPods` should have completed. Runs
/// until the returned set is dropped.
pub async fn run(informers: Informers) -> JoinSet<()> {
    let s = Stores {
        pdbs: informers.get(),
        pods: informers.get(),
        rss: informers.get(),
        deployments: informers.get(),
    };
    let q = Queue::new();
    {
        let q = q.clone();
        s.pdbs
            .add_handler(move |c| q.add(informer::key_of(c.object())));
    }
    {
        let (q, pdbs) = (q.clone(), s.pdbs.clone());
        s.pods.add_handler(move |c| {
            let mut keys = budgets_of(&pdbs, c.object());
            if let Some(old) = c.old() {
                keys.extend(budgets_of(&pdbs, old));
            }
            keys.sort();
            keys.dedup();
            for k in keys {
                q.add(k);
            }
        });
    }
    {
        let (q, pdbs) = (q.clone(), s.pdbs.clone());
        s.rss.add_handler(move |c| {
            if scale_changed(c, |r: &ReplicaSet| r.spec.replicas) {
                all_budgets(
                    &q,
                    &pdbs,
                    c.object().metadata.namespace.as_deref().unwrap_or(""),
                );
            }
        });
    }
    {
        let (q, pdbs) = (q.clone(), s.pdbs.clone());
        s.deployments.add_handler(move |c| {
            if scale_changed(c, |d: &Deployment| d.spec.replicas) {
                all_budgets(
                    &q,
                    &pdbs,
                    c.object().metadata.namespace.as_deref().unwrap_or(""),
                );
            }
        });
    }
    s.pdbs.synced().await;
    s.pods.synced().await;
    s.rss.synced().await;
    s.deployments.synced().await;
    let ctl = Arc::new((
        informers.client().clone(),
        Recorder::new(informers.client().clone(), DISRUPTION_CONTROLLER),
        s,
    ));
    queue::run_workers(&q, 1, move |key| {
        let ctl = ctl.clone();
        async move {
            let (client, rec, s) = &*ctl;
            let (ns, name) = informer::split_key(&key);
            let Some(pdb) = s.pdbs.get(ns, name) else {
                return Synced::Done;
            };
            let pods = pods_for(&pdb, &s.pods);
            sync_one(client, rec, &pdb, &pods, s).await
        }
    })
}

/// Whether a change added or removed a controller, or moved its scale.
fn scale_changed<K>(c: &Change<'_, K>, scale: impl Fn(&K) -> Option<i32>) -> bool {
    match c {
        Change::Updated { old, new } => scale(old) != scale(new),
        _ => true,
    }
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(u64::try_from(v.max(0)).unwrap_or(0) + 1)
}

fn pods_for(pdb: &PodDisruptionBudget, pods: &Informer<Pod>) -> Vec<Arc<Pod>> {
    let ns = pdb.metadata.namespace.clone().unwrap_or_default();
    let sel = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
    // `getPodsForPdb`: a nil selector selects nothing, an empty one everything.
    if sel.is_none() {
        return Vec::new();
    }
    pods.in_namespace(&ns)
        .into_iter()
        .filter(|p| labels::selects(sel, &podutil::labels(&p.metadata)))
        .collect()
}

/// The finders: a ReplicaSet's scale, or its Deployment's when one controls it.
fn scale_of(ns: &str, c: &OwnerReference, s: &Stores) -> Result<Option<(String, i32)>, String> {
    if c.kind != "ReplicaSet" || !c.api_version.starts_with("apps/") {
        return Ok(None);
    }
    let Some(rs) = s
        .rss
        .in_namespace(ns)
        .into_iter()
        .find(|r| r.metadata.uid.as_deref() == Some(&c.uid))
    else {
        return Ok(None);
    };
    if let Some(dc) = podutil::controller_of(&rs.metadata).filter(|o| o.kind == "Deployment") {
        if let Some(d) = s
            .deployments
            .in_namespace(ns)
            .into_iter()
            .find(|d| d.metadata.uid.as_deref() == Some(&dc.uid))
        {
            return Ok(Some((dc.uid.clone(), d.spec.replicas.unwrap_or(1))));
        }
    }
    Ok(Some((c.uid.clone(), rs.spec.replicas.unwrap_or(1))))
}

/// `sync` of one budget: writes its status; a recheck when an eviction recorded in
/// `disruptedPods` should have completed, or a retry when the status write conflicted.
async fn sync_one(
    client: &kube::Client,
    rec: &Recorder,
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    s: &Stores,
) -> Synced {
    let ns = pdb.metadata.namespace.clone().unwrap_or_default();
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let api: kube::Api<PodDisruptionBudget> = kube::Api::namespaced(client.clone(), &ns);
    let pods: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
    let now = now_ms();
    if pods.is_empty() {
        rec.event(
            "policy/v1",
            "PodDisruptionBudget",
            &pdb.metadata,
            "Normal",
            "NoPods",
            "No matching pods found",
        )
        .await;
    }
    let write = |st| {
        let mut new = pdb.clone();
        new.status = Some(st);
        new
    };
    let (expected, desired, unmanaged) =
        match rules::expected_pod_count(pdb, &pods, |c| scale_of(&ns, c, s)) {
            Ok(v) => v,
            Err(e) => {
                rec.event(
                    "policy/v1",
                    "PodDisruptionBudget",
                    &pdb.metadata,
                    "Warning",
                    "CalculateExpectedPodCountFailed",
                    &format!("Failed to calculate the number of expected pods: {e}"),
                )
                .await;
                let st = rules::fail_safe(pdb, &e, now);
                return match api
                    .replace_status(&name, &PostParams::default(), &write(st))
                    .await
                {
                    Ok(_) => Synced::Done,
                    Err(_) => Synced::Retry,
                };
            }
        };
    if !unmanaged.is_empty() {
        let sel = labels::format(pdb.spec.as_ref().and_then(|x| x.selector.as_ref()));
        rec.event("policy/v1", "PodDisruptionBudget", &pdb.metadata, "Warning", "UnmanagedPods", &format!("Pods selected by this PodDisruptionBudget (selector: {sel}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.")).await;
    }
    let disrupted = rules::build_disrupted_pod_map(&pods, pdb, now);
    for pn in &disrupted.not_deleted {
        if let Some(p) = pods.iter().find(|p| p.metadata.name.as_deref() == Some(pn)) {
            rec.event(
                "v1",
                "Pod",
                &p.metadata,
                "Warning",
                "NotDeleted",
                &rules::not_deleted_message(pdb),
            )
            .await;
        }
    }
    let healthy = rules::count_healthy(&pods, &disrupted.pods, now);
    if let Some(st) =
        rules::update_pdb_status(pdb, healthy, desired, expected, &disrupted.pods, now)
    {
        if let Err(e) = api
            .replace_status(&name, &PostParams::default(), &write(st))
            .await
        {
            tracing::debug!("pdb {ns}/{name} status: {e}");
            // A conflict: the eviction wrote first; sync again after the back-off.
            return Synced::Retry;
        }
    }
    Synced::after(disrupted.recheck_at_ms.map(|t| ms(t - now)))
}
