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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::PostParams;
use kube::runtime::reflector::Store;
use podgrace_core::rules::{disruption as rules, labels, podutil};
use tokio::sync::Notify;

use crate::events::{Recorder, DISRUPTION_CONTROLLER};
use crate::{informer, now_ms};

struct Stores {
    pdbs: Store<PodDisruptionBudget>,
    pods: Store<Pod>,
    rss: Store<ReplicaSet>,
    deployments: Store<Deployment>,
}

/// Runs the controller on `client` until the task is dropped.
pub async fn run(client: kube::Client) {
    let wake = Arc::new(Notify::new());
    let s = Stores {
        pdbs: informer::start(&client, wake.clone()),
        pods: informer::start(&client, wake.clone()),
        rss: informer::start(&client, wake.clone()),
        deployments: informer::start(&client, wake.clone()),
    };
    let _ = s.pdbs.wait_until_ready().await;
    let _ = s.pods.wait_until_ready().await;
    let _ = s.rss.wait_until_ready().await;
    let _ = s.deployments.wait_until_ready().await;
    let rec = Recorder::new(client.clone(), DISRUPTION_CONTROLLER);
    // What each budget was last synced against (its and its pods' and controllers'
    // resourceVersions), and when it asked to be rechecked.
    let mut seen: BTreeMap<String, (String, Option<i64>)> = BTreeMap::new();
    loop {
        let mut next = None;
        let now = now_ms();
        for pdb in s.pdbs.state() {
            let key = format!(
                "{}/{}",
                pdb.metadata.namespace.clone().unwrap_or_default(),
                pdb.metadata.name.clone().unwrap_or_default()
            );
            let pods = pods_for(&pdb, &s.pods);
            let fp = fingerprint(&pdb, &pods, &s);
            if let Some((old, recheck)) = seen.get(&key) {
                if *old == fp && recheck.is_none_or(|t| t > now) {
                    next = crate::earlier(next, recheck.map(|t| ms(t - now)));
                    continue;
                }
            }
            let recheck = sync_one(&client, &rec, &pdb, &pods, &s).await;
            next = crate::earlier(next, recheck.map(|t| ms(t - now)));
            seen.insert(key, (fp, recheck));
        }
        crate::wait(&wake, next).await;
    }
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(u64::try_from(v.max(0)).unwrap_or(0) + 1)
}

fn pods_for(pdb: &PodDisruptionBudget, pods: &Store<Pod>) -> Vec<Arc<Pod>> {
    let ns = pdb.metadata.namespace.clone().unwrap_or_default();
    let sel = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
    // `getPodsForPdb`: a nil selector selects nothing, an empty one everything.
    if sel.is_none() {
        return Vec::new();
    }
    informer::in_namespace(pods, &ns)
        .into_iter()
        .filter(|p| labels::selects(sel, &podutil::labels(&p.metadata)))
        .collect()
}

fn fingerprint(pdb: &PodDisruptionBudget, pods: &[Arc<Pod>], s: &Stores) -> String {
    let mut out = pdb.metadata.resource_version.clone().unwrap_or_default();
    for p in pods {
        out.push(',');
        out.push_str(p.metadata.resource_version.as_deref().unwrap_or(""));
    }
    // The controllers' scales count for percentages and maxUnavailable.
    let ns = pdb.metadata.namespace.clone().unwrap_or_default();
    for r in informer::in_namespace(&s.rss, &ns) {
        out.push_str(&format!(";{:?}", r.spec.replicas));
    }
    for d in informer::in_namespace(&s.deployments, &ns) {
        out.push_str(&format!(";{:?}", d.spec.replicas));
    }
    out
}

/// The finders: a ReplicaSet's scale, or its Deployment's when one controls it.
fn scale_of(ns: &str, c: &OwnerReference, s: &Stores) -> Result<Option<(String, i32)>, String> {
    if c.kind != "ReplicaSet" || !c.api_version.starts_with("apps/") {
        return Ok(None);
    }
    let Some(rs) = informer::in_namespace(&s.rss, ns)
        .into_iter()
        .find(|r| r.metadata.uid.as_deref() == Some(&c.uid))
    else {
        return Ok(None);
    };
    if let Some(dc) = podutil::controller_of(&rs.metadata).filter(|o| o.kind == "Deployment") {
        if let Some(d) = informer::in_namespace(&s.deployments, ns)
            .into_iter()
            .find(|d| d.metadata.uid.as_deref() == Some(&dc.uid))
        {
            return Ok(Some((dc.uid.clone(), d.spec.replicas.unwrap_or(1))));
        }
    }
    Ok(Some((c.uid.clone(), rs.spec.replicas.unwrap_or(1))))
}

/// `sync` of one budget: writes its status; returns the recheck time (ms since the epoch).
async fn sync_one(
    client: &kube::Client,
    rec: &Recorder,
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    s: &Stores,
) -> Option<i64> {
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
                let _ = api
                    .replace_status(&name, &PostParams::default(), &write(st))
                    .await;
                return None;
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
            // A conflict: the eviction wrote first; sync again at once.
            return Some(now + 100);
        }
    }
    disrupted.recheck_at_ms
}
