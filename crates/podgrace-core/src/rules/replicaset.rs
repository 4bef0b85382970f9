//! The ReplicaSet controller's decisions: how many pods to create or delete, which pods go
//! first on a scale-down, the pods it creates from its template, and the status it writes.
//!
//! Upstream: `pkg/controller/replicaset/replica_set.go` (`manageReplicas`, `getPodsToDelete`,
//! `getPodsRankedByRelatedPodsOnSameNode`, `slowStartBatch`), `replica_set_utils.go`
//! (`calculateStatus`, `updateReplicaSetStatus`), `pkg/controller/controller_utils.go`
//! (`ActivePodsWithRanks`, `GetPodFromTemplate`, `getPodsPrefix`,
//! `FindMinNextPodAvailabilityCheck`). Read at the 1.36 tree; version differences are
//! arguments: `LogarithmicScaleDown` and `PodDeletionCost` (on from 1.22),
//! `DeploymentReplicaSetTerminatingReplicas` (`status.terminatingReplicas`, on from 1.35).
//!
//! Times are milliseconds since the Unix epoch (`_ms`).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::labels;
use super::podutil::{self, is_pod_ready, ms_time, phase, ready_since_ms, time_ms};
use crate::KubeVersion;

/// `--concurrent-replicaset-syncs`' companion: at most this many pods are created or deleted
/// in one sync (`BurstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// `SlowStartInitialBatchSize`: the first batch of pod creations.
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;

/// The annotation that orders pods for deletion (`controller.kubernetes.io/pod-deletion-cost`).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The features of a release that change the ReplicaSet controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// `LogarithmicScaleDown` (beta, on, from 1.22; GA 1.31).
    pub logarithmic_scale_down: bool,
    /// `PodDeletionCost` (beta, on, from 1.22).
    pub pod_deletion_cost: bool,
    /// `DeploymentReplicaSetTerminatingReplicas` (alpha 1.33, beta and on from 1.35).
    pub terminating_replicas: bool,
}

impl Features {
    /// The defaults of release `v`.
    pub fn of(v: KubeVersion) -> Features {
        Features {
            logarithmic_scale_down: v.logarithmic_scale_down(),
            pod_deletion_cost: v.pod_deletion_cost(),
            terminating_replicas: v.deployment_replicaset_terminating_replicas(),
        }
    }
}

/// What `manageReplicas` does: create or delete this many pods (at most [`BURST_REPLICAS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manage {
    /// The ReplicaSet has as many active pods as `spec.replicas`.
    Nothing,
    /// Create this many pods (fewer than wanted).
    Create(usize),
    /// Delete this many pods (more than wanted), chosen by `getPodsToDelete`.
    Delete(usize),
}

/// `manageReplicas`' arithmetic: `active` active pods against `replicas` desired.
pub fn manage(active: usize, replicas: i32) -> Manage {
    let want = usize::try_from(replicas.max(0)).unwrap_or(0);
    match active.cmp(&want) {
        Ordering::Less => Manage::Create((want - active).min(BURST_REPLICAS)),
        Ordering::Greater => Manage::Delete((active - want).min(BURST_REPLICAS)),
        Ordering::Equal => Manage::Nothing,
    }
}

/// `slowStartBatch`: the batch sizes creations go in (1, 2, 4, ... until `count`); a batch
/// with a failure stops the rest.
pub fn slow_start_batches(count: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut remaining = count;
    let mut size = remaining.min(SLOW_START_INITIAL_BATCH_SIZE);
    while size > 0 {
        out.push(size);
        remaining -= size;
        size = (2 * size).min(remaining);
    }
    out
}

fn phase_ordinal(p: &str) -> u8 {
    // podPhaseToOrdinal: Pending 0, Unknown 1, Running 2; others (absent) count as 0.
    match p {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    // GetDeletionCostFromPodAnnotations: an absent or invalid value counts as 0.
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0)
}

/// `maxContainerRestarts`: the most restarts of a regular container and of a native sidecar.
fn max_restarts(pod: &Pod) -> (i32, i32) {
    let st = pod.status.as_ref();
    let regular = st
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0);
    let sidecars: Vec<&str> = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map(|ics| {
            ics.iter()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .map(|c| c.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let sidecar = st
        .and_then(|s| s.init_container_statuses.as_ref())
        .map(|cs| {
            cs.iter()
                .filter(|c| sidecars.contains(&c.name.as_str()))
                .map(|c| c.restart_count)
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    (regular, sidecar)
}

/// `afterOrZero`: t1 after t2, a zero (absent) time counting as after any other.
fn after_or_zero(t1: Option<i64>, t2: Option<i64>) -> bool {
    match (t1, t2) {
        (None, _) | (_, None) => t1.is_none(),
        (Some(a), Some(b)) => a > b,
    }
}

/// `logarithmicRankDiff`: the difference of the base-2 logarithms of the ages in nanoseconds.
fn log_rank_diff(t1_ms: i64, t2_ms: i64, now_ms: i64) -> i64 {
    let rank = |t: i64| {
        let d = (now_ms - t) as f64 * 1e6;
        if d > 0.0 {
            d.log2() as i64
        } else {
            -1
        }
    };
    rank(t1_ms) - rank(t2_ms)
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// `ActivePodsWithRanks.Less`: whether pod `a` (with `rank_a` co-located related pods) should
/// be deleted before pod `b`. In order: unassigned before assigned; Pending before Unknown
/// before Running; not ready before ready; lower pod-deletion-cost first; more co-located pods
/// first; ready for less time first; more restarts first; newer first. With
/// `LogarithmicScaleDown` the two times are compared on a log2 scale of their age at `now_ms`,
/// ties broken by UID.
pub fn deletes_before(
    a: &Pod,
    rank_a: usize,
    b: &Pod,
    rank_b: usize,
    now_ms: i64,
    f: Features,
) -> bool {
    let (na, nb) = (node_name(a), node_name(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return na.is_empty();
    }
    let (pa, pb) = (phase_ordinal(phase(a)), phase_ordinal(phase(b)));
    if pa != pb {
        return pa < pb;
    }
    let (ra, rb) = (is_pod_ready(a), is_pod_ready(b));
    if ra != rb {
        return !ra;
    }
    if f.pod_deletion_cost {
        let (ca, cb) = (deletion_cost(a), deletion_cost(b));
        if ca != cb {
            return ca < cb;
        }
    }
    if rank_a != rank_b {
        return rank_a > rank_b;
    }
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    if ra && rb {
        let (t1, t2) = (ready_since_ms(a), ready_since_ms(b));
        if t1 != t2 {
            match (f.logarithmic_scale_down, t1, t2) {
                (true, Some(x), Some(y)) => {
                    let d = log_rank_diff(x, y, now_ms);
                    if d == 0 {
                        return uid(a) < uid(b);
                    }
                    return d < 0;
                }
                _ => return after_or_zero(t1, t2),
            }
        }
    }
    let (xa, xb) = (max_restarts(a), max_restarts(b));
    if xa.0 != xb.0 {
        return xa.0 > xb.0;
    }
    if xa.1 != xb.1 {
        return xa.1 > xb.1;
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(time_ms);
    let (c1, c2) = (created(a), created(b));
    if c1 != c2 {
        match (f.logarithmic_scale_down, c1, c2) {
            (true, Some(x), Some(y)) => {
                let d = log_rank_diff(x, y, now_ms);
                if d == 0 {
                    return uid(a) < uid(b);
                }
                return d < 0;
            }
            _ => return after_or_zero(c1, c2),
        }
    }
    false
}

/// Sorts `items` with a strict "less" function, stably, without requiring it to be a total
/// order (Go's `sort.Sort` takes the same kind of function; Rust's sorts may panic on an
/// inconsistent one). Bottom-up merge sort: O(n log n) comparisons.
pub fn sort_by_less<T: Clone>(items: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    let n = items.len();
    let mut width = 1;
    let mut buf: Vec<T> = items.to_vec();
    while width < n {
        let mut i = 0;
        while i < n {
            let mid = (i + width).min(n);
            let end = (i + 2 * width).min(n);
            let (mut l, mut r, mut k) = (i, mid, i);
            while l < mid && r < end {
                if less(&items[r], &items[l]) {
                    buf[k] = items[r].clone();
                    r += 1;
                } else {
                    buf[k] = items[l].clone();
                    l += 1;
                }
                k += 1;
            }
            while l < mid {
                buf[k] = items[l].clone();
                l += 1;
                k += 1;
            }
            while r < end {
                buf[k] = items[r].clone();
                r += 1;
                k += 1;
            }
            i = end;
        }
        items.clone_from_slice(&buf);
        width *= 2;
    }
}

/// `getPodsToDelete`: the `diff` pods of `active` to delete, as indexes into `active`. When
/// fewer than all are deleted they are ranked (`getPodsRankedByRelatedPodsOnSameNode`: a pod's
/// rank is the number of active pods of `related`, the pods of every ReplicaSet with the same
/// controller, on its node) and sorted with [`deletes_before`]; otherwise taken in order.
pub fn pods_to_delete(
    active: &[Pod],
    related: &[Pod],
    diff: usize,
    now_ms: i64,
    f: Features,
) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..active.len()).collect();
    if diff < active.len() {
        let mut on_node: BTreeMap<&str, usize> = BTreeMap::new();
        for p in related.iter().filter(|p| podutil::is_pod_active(p)) {
            *on_node.entry(node_name(p)).or_default() += 1;
        }
        let rank = |i: usize| on_node.get(node_name(&active[i])).copied().unwrap_or(0);
        sort_by_less(&mut idx, |&x, &y| {
            deletes_before(&active[x], rank(x), &active[y], rank(y), now_ms, f)
        });
    }
    idx.truncate(diff);
    idx
}

/// `getPodsPrefix`: the `generateName` of the controller's pods, `NAME-`. (Upstream falls
/// back to `NAME` when `NAME-` is no valid prefix; `ValidatePodName` checks a prefix with its
/// trailing dash masked, which leaves any valid controller name valid.)
pub fn pods_prefix(controller_name: &str) -> String {
    format!("{controller_name}-")
}

/// `GetPodFromTemplate`: the pod a controller creates from `template`: its labels,
/// annotations and finalizers, `generateName` from the controller's name, the controller
/// reference, and the template's spec.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    controller_name: &str,
    controller_ref: OwnerReference,
) -> Pod {
    let tm = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            labels: tm.labels,
            annotations: tm.annotations,
            finalizers: tm.finalizers,
            generate_name: Some(pods_prefix(controller_name)),
            owner_references: Some(vec![controller_ref]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

fn rs_condition<'a>(st: &'a ReplicaSetStatus, ty: &str) -> Option<&'a ReplicaSetCondition> {
    st.conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(ty))
}

/// `calculateStatus`: the ReplicaSet's status from its `active` pods (and `terminating` ones,
/// counted from 1.35), at `now_ms`; `manage_error` is the error of `manageReplicas`, which
/// sets the `ReplicaFailure` condition (`FailedCreate` / `FailedDelete`) or clears it.
/// `observedGeneration` is left as it was ([`status_needs_update`] sets it).
pub fn calculate_status(
    rs: &ReplicaSet,
    active: &[&Pod],
    terminating: &[&Pod],
    manage_error: Option<&str>,
    now_ms: i64,
    f: Features,
) -> ReplicaSetStatus {
    let mut st = rs.status.clone().unwrap_or_default();
    let spec = rs.spec.clone();
    let template_labels: BTreeMap<String, String> = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let template_sel = labels::Selector::from_map(&template_labels);
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let (mut fully, mut ready, mut available) = (0, 0, 0);
    for p in active {
        if template_sel.matches(&podutil::labels(&p.metadata)) {
            fully += 1;
        }
        if is_pod_ready(p) {
            ready += 1;
            if podutil::is_pod_available(p, min_ready, now_ms) {
                available += 1;
            }
        }
    }
    let failure = rs_condition(&st, "ReplicaFailure").is_some();
    let replicas = spec.replicas.unwrap_or(1);
    match (manage_error, failure) {
        (Some(msg), false) => {
            let reason = match (active.len() as i64).cmp(&i64::from(replicas)) {
                Ordering::Less => "FailedCreate",
                Ordering::Greater => "FailedDelete",
                Ordering::Equal => "",
            };
            let mut conds: Vec<ReplicaSetCondition> = st.conditions.take().unwrap_or_default();
            conds.retain(|c| c.type_.as_deref() != Some("ReplicaFailure"));
            conds.push(ReplicaSetCondition {
                type_: Some("ReplicaFailure".into()),
                status: Some("True".into()),
                last_transition_time: Some(ms_time(now_ms)),
                reason: Some(reason.into()),
                message: Some(msg.into()),
            });
            st.conditions = Some(conds);
        }
        (None, true) => {
            if let Some(c) = st.conditions.as_mut() {
                c.retain(|c| c.type_.as_deref() != Some("ReplicaFailure"));
            }
        }
        _ => {}
    }
    st.replicas = i32::try_from(active.len()).unwrap_or(i32::MAX);
    st.fully_labeled_replicas = Some(fully);
    st.ready_replicas = Some(ready);
    st.available_replicas = Some(available);
    st.terminating_replicas = f
        .terminating_replicas
        .then(|| i32::try_from(terminating.len()).unwrap_or(i32::MAX));
    st
}

/// `updateReplicaSetStatus`' check: `Some(status to write)` (with `observedGeneration` set to
/// the ReplicaSet's generation) unless the counts, the conditions and the observed generation
/// are already current.
pub fn status_needs_update(rs: &ReplicaSet, new: &ReplicaSetStatus) -> Option<ReplicaSetStatus> {
    let old = rs.status.clone().unwrap_or_default();
    let generation = rs.metadata.generation.unwrap_or(0);
    let z = |v: Option<i32>| v.unwrap_or(0);
    let same = old.replicas == new.replicas
        && z(old.fully_labeled_replicas) == z(new.fully_labeled_replicas)
        && z(old.ready_replicas) == z(new.ready_replicas)
        && z(old.available_replicas) == z(new.available_replicas)
        && old.terminating_replicas == new.terminating_replicas
        && generation == old.observed_generation.unwrap_or(0)
        && old.conditions.clone().unwrap_or_default() == new.conditions.clone().unwrap_or_default();
    if same {
        return None;
    }
    let mut out = new.clone();
    out.observed_generation = Some(generation);
    Some(out)
}

/// `FindMinNextPodAvailabilityCheck`: milliseconds from `now_ms` until the first ready pod of
/// `pods` becomes available under `min_ready_seconds` (`None` when none is waiting).
pub fn next_availability_check_ms(
    pods: &[&Pod],
    min_ready_seconds: i32,
    now_ms: i64,
) -> Option<i64> {
    if min_ready_seconds <= 0 {
        return None;
    }
    pods.iter()
        .filter(|p| is_pod_ready(p))
        .filter_map(|p| ready_since_ms(p))
        .map(|t| t + i64::from(min_ready_seconds) * 1000 - now_ms)
        .filter(|d| *d > 0)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};

    fn pod(name: &str, node: &str, ph: &str, ready: Option<i64>, created: i64) -> Pod {
        let mut conds = Vec::new();
        if let Some(t) = ready {
            conds.push(PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(ms_time(t)),
                ..Default::default()
            });
        }
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(name.into()),
                creation_timestamp: Some(ms_time(created)),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(ph.into()),
                conditions: Some(conds),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn scale_down_victims_follow_active_pods_with_ranks() {
        let f = Features::of(KubeVersion::new(1, 21));
        let now = 1_000_000_000;
        let pods = vec![
            pod(
                "ready-old",
                "n",
                "Running",
                Some(now - 600_000),
                now - 900_000,
            ),
            pod("unassigned", "", "Pending", None, now - 10_000),
            pod("pending", "n", "Pending", None, now - 10_000),
            pod(
                "ready-new",
                "n",
                "Running",
                Some(now - 60_000),
                now - 900_000,
            ),
            pod("not-ready", "n", "Running", None, now - 900_000),
        ];
        let order = pods_to_delete(&pods, &[], 4, now, f);
        let names: Vec<&str> = order
            .iter()
            .map(|&i| pods[i].metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["unassigned", "pending", "not-ready", "ready-new"]);
        // All of them: no ranking, in the order given (as upstream's `filteredPods[:diff]`).
        assert_eq!(pods_to_delete(&pods, &[], 5, now, f), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn slow_start_doubles_batches() {
        assert_eq!(slow_start_batches(10), [1, 2, 4, 3]);
        assert_eq!(slow_start_batches(1), [1]);
        assert!(slow_start_batches(0).is_empty());
        assert_eq!(manage(3, 5), Manage::Create(2));
        assert_eq!(manage(3, 1), Manage::Delete(2));
        assert_eq!(manage(0, 1000), Manage::Create(500));
    }
}
