//! The Deployment controller's decisions: the fenceposts of a rolling update, how far the new
//! ReplicaSet may scale up and the old ones down, proportional scaling, revisions and their
//! history, the status with its `Progressing` and `Available` conditions, and the pod
//! template hash that names a ReplicaSet.
//!
//! Upstream: `pkg/controller/deployment/util/deployment_util.go` (`ResolveFenceposts`,
//! `MaxSurge`, `MaxUnavailable`, `NewRSNewReplicas`, `IsSaturated`, `FindNewReplicaSet`,
//! `FindOldReplicaSets`, `EqualIgnoreHash`, `SetNewReplicaSetAnnotations`,
//! `GetReplicaSetProportion`, `DeploymentComplete`, `DeploymentProgressing`,
//! `DeploymentTimedOut`, the condition helpers), `pkg/controller/deployment/sync.go`
//! (`scale`, `scaleReplicaSet`, `cleanupDeployment`, `calculateStatus`, `isScalingEvent`,
//! `checkPausedConditions`, `generateReplicaSetName`), `rolling.go`
//! (`reconcileNewReplicaSet`, `reconcileOldReplicaSets`, `cleanupUnhealthyReplicas`,
//! `scaleDownOldReplicaSetsForRollingUpdate`), `recreate.go` (`oldPodsRunning`),
//! `progress.go` (`syncRolloutStatus`, `requeueStuckDeployment`, `getReplicaFailures`),
//! `rollback.go`, and `pkg/controller/controller_utils.go` (`ComputeHash`, the ReplicaSet
//! sort orders) with `staging/src/k8s.io/apimachinery/pkg/util/intstr`
//! (`GetScaledValueFromIntOrPercent`) and `pkg/util/rand` (`SafeEncodeString`). Read at the
//! 1.36 tree; the same logic from Kubernetes 1.18 on, except `status.terminatingReplicas`
//! (from 1.35, [`super::replicaset::Features`]).
//!
//! The pod template hash: upstream hashes Go's `spew` dump of the `PodTemplateSpec` struct,
//! which cannot be reproduced outside Go; podgrace hashes the template's JSON with the same
//! FNV-32a, collision count and encoding, so names look the same (`web-6648d7dcdb`) and stay
//! stable, but differ from a real cluster's for the same template.
//!
//! Times are milliseconds since the Unix epoch (`_ms`).

use std::cmp::Ordering;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::podutil::{ms_time, time_ms};
use super::replicaset::{sort_by_less, Features};

/// `deployment.kubernetes.io/revision`.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// `deployment.kubernetes.io/revision-history`.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// `deployment.kubernetes.io/desired-replicas`.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// `deployment.kubernetes.io/max-replicas`.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// `deprecated.deployment.rollback.to` (extensions/v1beta1 rollbacks).
pub const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// kubectl's last-applied annotation, never copied to ReplicaSets.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The label that ties a ReplicaSet and its pods to one template (`pod-template-hash`).
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// `maxRevHistoryLengthInChars`.
pub const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;
/// `progressDeadlineSeconds` that means "no deadline" (`math.MaxInt32`).
pub const NO_DEADLINE: i32 = i32::MAX;

/// Condition reasons (`deployment_util.go`).
pub mod reason {
    /// `Progressing` reason while a rollout updates one of the Deployment's ReplicaSets
    /// (`ReplicaSetUpdatedReason`).
    pub const REPLICA_SET_UPDATED: &str = "ReplicaSetUpdated";
    /// `Progressing=False` reason (and Warning event) when the new ReplicaSet cannot be created
    /// (`FailedRSCreateReason`).
    pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
    /// `Progressing` reason when the controller created the new ReplicaSet (`NewReplicaSetReason`).
    pub const NEW_REPLICA_SET: &str = "NewReplicaSetCreated";
    /// `Progressing` reason when the controller adopted an existing ReplicaSet as the new one
    /// (`FoundNewRSReason`).
    pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
    /// `Progressing` reason once the new ReplicaSet is fully available: the rollout is complete
    /// (`NewRSAvailableReason`).
    pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
    /// `Progressing=False` reason when no progress was seen for `progressDeadlineSeconds`
    /// (`TimedOutReason`).
    pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
    /// `Progressing=Unknown` reason while the Deployment is paused (`PausedDeployReason`).
    pub const PAUSED: &str = "DeploymentPaused";
    /// `Progressing=Unknown` reason when a paused Deployment is resumed (`ResumedDeployReason`).
    pub const RESUMED: &str = "DeploymentResumed";
    /// `Available=True` reason: at least `replicas - maxUnavailable` pods are available
    /// (`MinimumReplicasAvailable`).
    pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
    /// `Available=False` reason: fewer than `replicas - maxUnavailable` pods are available
    /// (`MinimumReplicasUnavailable`).
    pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
    /// Warning event reason of a rollback to a revision that does not exist
    /// (`RollbackRevisionNotFound`).
    pub const ROLLBACK_REVISION_NOT_FOUND: &str = "DeploymentRollbackRevisionNotFound";
    /// Warning event reason of a rollback to the template already in use
    /// (`RollbackTemplateUnchanged`).
    pub const ROLLBACK_TEMPLATE_UNCHANGED: &str = "DeploymentRollbackTemplateUnchanged";
    /// Normal event reason of a done rollback (`RollbackDone`).
    pub const ROLLBACK_DONE: &str = "DeploymentRollback";
}

/// Go's `%q` of a simple string.
fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `GetScaledValueFromIntOrPercent`: an integer as it is, a percentage of `total` rounded up or
/// down.
///
/// # Errors
/// Upstream's words: `invalid value for IntOrString: invalid type: string is not a percentage`,
/// `invalid value for IntOrString: invalid value "x%": ...`.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let Some(num) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .into(),
                );
            };
            let n: i64 = num.parse().map_err(|e| {
                format!("invalid value for IntOrString: invalid value {}: {e}", q(s))
            })?;
            let x = n as f64 * f64::from(total) / 100.0;
            let r = if round_up { x.ceil() } else { x.floor() };
            Ok(r.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32)
        }
    }
}

/// `ResolveFenceposts`: `(maxSurge, maxUnavailable)` for `desired` replicas, surge rounded up
/// and unavailable rounded down; both 0 (possible after rounding) makes unavailable 1.
///
/// # Errors
/// As [`scaled_value`].
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), String> {
    let zero = IntOrString::Int(0);
    let surge = scaled_value(max_surge.unwrap_or(&zero), desired, true)?;
    let mut unavailable = scaled_value(max_unavailable.unwrap_or(&zero), desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// `spec.replicas` (1 when unset, the API's default).
pub fn replicas(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1)
}

/// A ReplicaSet's `spec.replicas` (1 when unset).
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

fn rs_status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// `IsRollingUpdate`.
pub fn is_rolling_update(d: &Deployment) -> bool {
    strategy_type(d) == "RollingUpdate"
}

/// `spec.strategy.type` (`RollingUpdate` when unset, the API's default).
pub fn strategy_type(d: &Deployment) -> &str {
    d.spec
        .strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let ru = d
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    // Validation rejects values that do not resolve; upstream ignores the error here too.
    resolve_fenceposts(
        ru.and_then(|r| r.max_surge.as_ref()),
        ru.and_then(|r| r.max_unavailable.as_ref()),
        replicas(d),
    )
    .unwrap_or((0, 1))
}

/// `MaxUnavailable`: 0 unless rolling with replicas; at most the replicas.
pub fn max_unavailable(d: &Deployment) -> i32 {
    if !is_rolling_update(d) || replicas(d) == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas(d))
}

/// `MinAvailable`.
pub fn min_available(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    replicas(d) - max_unavailable(d)
}

/// `MaxSurge`: 0 unless rolling.
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    fenceposts(d).0
}

/// `Revision`: the revision annotation of an object (0 when absent).
///
/// # Errors
/// The annotation is not an integer.
pub fn revision(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<i64, String> {
    match annotations.and_then(|a| a.get(REVISION)) {
        None => Ok(0),
        Some(v) => v.parse::<i64>().map_err(|e| format!("{e}")),
    }
}

fn rs_revision(rs: &ReplicaSet) -> Result<i64, String> {
    revision(rs.metadata.annotations.as_ref())
}

/// `MaxRevision`: the highest revision among `rss` (unparsable ones skipped).
pub fn max_revision(rss: &[&ReplicaSet]) -> i64 {
    rss.iter()
        .filter_map(|rs| rs_revision(rs).ok())
        .max()
        .unwrap_or(0)
        .max(0)
}

/// `LastRevision`: the second highest revision among `rss`.
pub fn last_revision(rss: &[&ReplicaSet]) -> i64 {
    let (mut max, mut sec) = (0i64, 0i64);
    for v in rss.iter().filter_map(|rs| rs_revision(rs).ok()) {
        if v >= max {
            sec = max;
            max = v;
        } else if v > sec {
            sec = v;
        }
    }
    sec
}

fn skip_copy(k: &str) -> bool {
    matches!(
        k,
        LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS | ROLLBACK_TO
    )
}

/// `copyDeploymentAnnotationsToReplicaSet`: the deployment's annotations (except the skipped
/// ones) onto the ReplicaSet; whether any changed.
fn copy_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let ann = rs.metadata.annotations.get_or_insert_with(Default::default);
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy(k) || ann.get(k) == Some(v) {
            continue;
        }
        ann.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// `SetDeploymentAnnotationsTo` (a rollback): the deployment keeps only its skipped
/// annotations and takes the ReplicaSet's others.
pub fn set_deployment_annotations_to(d: &mut Deployment, rs: &ReplicaSet) {
    let mut kept: std::collections::BTreeMap<String, String> = d
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| skip_copy(k))
        .collect();
    for (k, v) in rs.metadata.annotations.iter().flatten() {
        if !skip_copy(k) {
            kept.insert(k.clone(), v.clone());
        }
    }
    d.metadata.annotations = Some(kept);
}

/// `SetReplicasAnnotations`: desired and max replicas onto the ReplicaSet; whether changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let ann = rs.metadata.annotations.get_or_insert_with(Default::default);
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let s = v.to_string();
        if ann.get(k) != Some(&s) {
            ann.insert(k.into(), s);
            changed = true;
        }
    }
    changed
}

/// `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    let Some(ann) = rs.metadata.annotations.as_ref() else {
        return true;
    };
    ann.get(DESIRED_REPLICAS) != Some(&desired.to_string())
        || ann.get(MAX_REPLICAS) != Some(&max.to_string())
}

fn nonneg_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    let v = rs.metadata.annotations.as_ref()?.get(key)?;
    let n: u32 = v.parse().ok()?;
    i32::try_from(n).ok()
}

/// `GetDesiredReplicasAnnotation`.
pub fn desired_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    nonneg_annotation(rs, DESIRED_REPLICAS)
}

/// `SetNewReplicaSetAnnotations`: copies the deployment's annotations, raises the revision to
/// `new_revision` (recording the old one in the revision history, within `limit_chars`, when
/// this is a rollback to the ReplicaSet) and, for a ReplicaSet about to be created
/// (`exists` false), sets the replicas annotations. Whether anything changed.
pub fn set_new_replica_set_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: &str,
    exists: bool,
    limit_chars: usize,
) -> bool {
    let mut changed = copy_annotations(d, rs);
    let ann = rs.metadata.annotations.get_or_insert_with(Default::default);
    let old = ann.get(REVISION).cloned();
    let old_int = match old.as_deref() {
        None | Some("") => 0,
        Some(s) => match s.parse::<i64>() {
            Ok(v) => v,
            Err(_) => return false,
        },
    };
    let Ok(new_int) = new_revision.parse::<i64>() else {
        return false;
    };
    if old_int < new_int {
        ann.insert(REVISION.into(), new_revision.into());
        changed = true;
    }
    if let (Some(old_rev), true) = (old.as_ref(), old_int < new_int) {
        let hist = ann.get(REVISION_HISTORY).cloned().unwrap_or_default();
        let mut olds: Vec<String> = hist.split(',').map(str::to_string).collect();
        if olds[0].is_empty() {
            ann.insert(REVISION_HISTORY.into(), old_rev.clone());
        } else {
            let mut total = hist.len() + old_rev.len() + 1;
            let mut start = 0;
            while total > limit_chars && start < olds.len() {
                total = total - olds[start].len() - 1;
                start += 1;
            }
            if total <= limit_chars {
                olds = olds.split_off(start);
                olds.push(old_rev.clone());
                ann.insert(REVISION_HISTORY.into(), olds.join(","));
            }
        }
    }
    if !exists && set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d)) {
        changed = true;
    }
    changed
}

/// Whether two ReplicaSets are in `ReplicaSetsByCreationTimestamp` order (older first, ties by
/// name).
pub fn created_before(a: &ReplicaSet, b: &ReplicaSet) -> bool {
    let t = |r: &ReplicaSet| r.metadata.creation_timestamp.as_ref().map(time_ms);
    let (ta, tb) = (t(a), t(b));
    if ta == tb {
        return a.metadata.name < b.metadata.name;
    }
    match (ta, tb) {
        (Some(x), Some(y)) => x < y,
        // A zero time is before any other (Go's Time.Before).
        (None, _) => true,
        (_, None) => false,
    }
}

fn sorted_by_creation<'a>(rss: &[&'a ReplicaSet]) -> Vec<&'a ReplicaSet> {
    let mut v = rss.to_vec();
    sort_by_less(&mut v, |a, b| created_before(a, b));
    v
}

/// JSON with nulls, empty lists and empty maps removed: `apiequality.Semantic.DeepEqual`
/// treats nil and empty slices and maps alike.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .filter(|(_, v)| match v {
                    Value::Null => false,
                    Value::Array(a) => !a.is_empty(),
                    Value::Object(o) => !o.is_empty(),
                    _ => true,
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

fn template_value(t: &PodTemplateSpec) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(l) = v
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        l.remove(POD_TEMPLATE_HASH);
    }
    normalized(&v)
}

/// `EqualIgnoreHash`: the templates are equal once the `pod-template-hash` label is ignored.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    template_value(a) == template_value(b)
}

fn rs_template(rs: &ReplicaSet) -> PodTemplateSpec {
    rs.spec.template.clone().unwrap_or_default()
}

fn d_template(d: &Deployment) -> PodTemplateSpec {
    d.spec.template.clone()
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template equals the deployment's.
pub fn find_new_replica_set<'a>(d: &Deployment, rss: &[&'a ReplicaSet]) -> Option<&'a ReplicaSet> {
    let dt = template_value(&d_template(d));
    sorted_by_creation(rss)
        .into_iter()
        .find(|rs| template_value(&rs_template(rs)) == dt)
}

/// `FindOldReplicaSets`: `(old ones with replicas, every old one)`.
pub fn find_old_replica_sets<'a>(
    d: &Deployment,
    rss: &[&'a ReplicaSet],
) -> (Vec<&'a ReplicaSet>, Vec<&'a ReplicaSet>) {
    let new_uid = find_new_replica_set(d, rss).and_then(|r| r.metadata.uid.clone());
    let all: Vec<&ReplicaSet> = rss
        .iter()
        .copied()
        .filter(|r| new_uid.is_none() || r.metadata.uid != new_uid)
        .collect();
    let required = all
        .iter()
        .copied()
        .filter(|r| rs_replicas(r) != 0)
        .collect();
    (required, all)
}

/// `FilterActiveReplicaSets`: those with replicas.
pub fn filter_active<'a>(rss: &[&'a ReplicaSet]) -> Vec<&'a ReplicaSet> {
    rss.iter().copied().filter(|r| rs_replicas(r) > 0).collect()
}

/// `FindActiveOrLatest`: the only active ReplicaSet, or the newest when none is active;
/// `None` when several are active (they are scaled proportionally).
pub fn find_active_or_latest<'a>(
    new_rs: Option<&'a ReplicaSet>,
    old: &[&'a ReplicaSet],
) -> Option<&'a ReplicaSet> {
    if new_rs.is_none() && old.is_empty() {
        return None;
    }
    let mut olds = sorted_by_creation(old);
    olds.reverse();
    let mut all = olds.clone();
    all.extend(new_rs);
    let active = filter_active(&all);
    match active.len() {
        0 => new_rs.or_else(|| olds.first().copied()),
        1 => Some(active[0]),
        _ => None,
    }
}

/// `GetReplicaCountForReplicaSets`: the sum of `spec.replicas`.
pub fn replica_count(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|r| rs_replicas(r)).sum()
}

/// `GetActualReplicaCountForReplicaSets`: the sum of `status.replicas`.
pub fn actual_replica_count(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|r| rs_status_replicas(r)).sum()
}

/// `GetReadyReplicaCountForReplicaSets`.
pub fn ready_replica_count(rss: &[&ReplicaSet]) -> i32 {
    rss.iter()
        .map(|r| {
            r.status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0)
        })
        .sum()
}

/// `GetAvailableReplicaCountForReplicaSets`.
pub fn available_replica_count(rss: &[&ReplicaSet]) -> i32 {
    rss.iter().map(|r| rs_available(r)).sum()
}

/// `GetTerminatingReplicaCountForReplicaSets`: `None` when a synced ReplicaSet does not
/// report its terminating pods.
pub fn terminating_replica_count(rss: &[&ReplicaSet]) -> Option<i32> {
    let mut total = 0;
    for r in rss {
        let st = r.status.clone().unwrap_or_default();
        match (st.observed_generation.unwrap_or(0), st.terminating_replicas) {
            (0, None) => {}
            (_, None) => return None,
            (_, Some(n)) => total += n,
        }
    }
    Some(total)
}

/// `GetReplicaSetProportion`: how many replicas `rs` gains (or loses, negative) in a
/// proportional scale of `to_add` replicas of which `added` are placed already.
pub fn replica_set_proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = replica_set_fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

fn replica_set_fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    if replicas(d) == 0 {
        return -rs_replicas(rs);
    }
    let max_now = replicas(d) + max_surge(d);
    let before = match nonneg_annotation(rs, MAX_REPLICAS) {
        Some(v) if v != 0 => v,
        _ => {
            let st = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            if st == 0 {
                return 0;
            }
            st
        }
    };
    let base = rs_replicas(rs);
    let size = f64::from(base.saturating_mul(max_now)) / f64::from(before);
    // integer.RoundToInt32: round half away from zero.
    (size.round() as i32) - base
}

/// `DeploymentComplete`: every desired replica updated and available, no old one running,
/// and the current generation observed.
pub fn deployment_complete(d: &Deployment, st: &DeploymentStatus) -> bool {
    let r = replicas(d);
    st.updated_replicas.unwrap_or(0) == r
        && st.replicas.unwrap_or(0) == r
        && st.available_replicas.unwrap_or(0) == r
        && st.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: more updated, fewer old, or more ready or available replicas than
/// the deployment's current status.
pub fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let z = |v: Option<i32>| v.unwrap_or(0);
    let old_old = z(old.replicas) - z(old.updated_replicas);
    let new_old = z(new.replicas) - z(new.updated_replicas);
    z(new.updated_replicas) > z(old.updated_replicas)
        || new_old < old_old
        || z(new.ready_replicas) > z(old.ready_replicas)
        || z(new.available_replicas) > z(old.available_replicas)
}

/// `HasProgressDeadline`.
pub fn has_progress_deadline(d: &Deployment) -> bool {
    progress_deadline_seconds(d).is_some_and(|s| s != NO_DEADLINE)
}

fn progress_deadline_seconds(d: &Deployment) -> Option<i32> {
    d.spec.progress_deadline_seconds
}

/// `HasRevisionHistoryLimit`.
pub fn has_revision_history_limit(d: &Deployment) -> bool {
    revision_history_limit(d).is_some_and(|l| l != i32::MAX)
}

fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec.revision_history_limit
}

/// `GetDeploymentCondition`.
pub fn condition<'a>(st: &'a DeploymentStatus, ty: &str) -> Option<&'a DeploymentCondition> {
    st.conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some(ty))
}

/// `NewDeploymentCondition` at `now_ms`.
pub fn new_condition(
    ty: &str,
    status: &str,
    reason: &str,
    message: &str,
    now_ms: i64,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: Some(ty.into()),
        status: Some(status.into()),
        last_update_time: Some(ms_time(now_ms)),
        last_transition_time: Some(ms_time(now_ms)),
        reason: Some(reason.into()),
        message: Some(message.into()),
    }
}

/// `SetDeploymentCondition`: no change when the status and reason are the same; the
/// transition time kept when only the reason changes; the condition moved to the end.
pub fn set_condition(st: &mut DeploymentStatus, mut c: DeploymentCondition) {
    let ty = c.type_.clone().unwrap_or_default();
    if let Some(cur) = condition(st, &ty) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    let mut conds = st.conditions.take().unwrap_or_default();
    conds.retain(|x| x.type_.as_deref() != Some(ty.as_str()));
    conds.push(c);
    st.conditions = Some(conds);
}

/// `RemoveDeploymentCondition`.
pub fn remove_condition(st: &mut DeploymentStatus, ty: &str) {
    if let Some(c) = st.conditions.as_mut() {
        c.retain(|x| x.type_.as_deref() != Some(ty));
    }
}

/// `DeploymentTimedOut`: the `Progressing` condition of `new` has not been updated for
/// `progressDeadlineSeconds` at `now_ms` (and is not already the success or the timeout).
pub fn deployment_timed_out(d: &Deployment, new: &DeploymentStatus, now_ms: i64) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(c) = condition(new, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some(reason::NEW_RS_AVAILABLE) => return false,
        Some(reason::TIMED_OUT) => return true,
        _ => {}
    }
    let from = c.last_update_time.as_ref().map_or(0, time_ms);
    let delta = i64::from(progress_deadline_seconds(d).unwrap_or(0)) * 1000;
    from + delta < now_ms
}

/// `NewRSNewReplicas`: the replicas the new ReplicaSet should have (rolling: up to
/// replicas + maxSurge in all; Recreate: the replicas).
///
/// # Errors
/// A maxSurge that does not resolve; a strategy that is neither.
pub fn new_rs_new_replicas(
    d: &Deployment,
    all: &[&ReplicaSet],
    new_rs: &ReplicaSet,
) -> Result<i32, String> {
    match strategy_type(d) {
        "RollingUpdate" => {
            let ms = d
                .spec
                .strategy
                .as_ref()
                .and_then(|s| s.rolling_update.as_ref())
                .and_then(|r| r.max_surge.clone())
                .ok_or("nil value for IntOrString")?;
            let surge = scaled_value(&ms, replicas(d), true)?;
            let current = replica_count(all);
            let max_total = replicas(d) + surge;
            if current >= max_total {
                return Ok(rs_replicas(new_rs));
            }
            let up = (max_total - current).min(replicas(d) - rs_replicas(new_rs));
            Ok(rs_replicas(new_rs) + up)
        }
        "Recreate" => Ok(replicas(d)),
        other => Err(format!("deployment type {other} isn't supported")),
    }
}

/// `IsSaturated`: the new ReplicaSet has every desired replica, believes so too (its desired
/// annotation), and all are available.
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let Some(desired) = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESIRED_REPLICAS))
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return false;
    };
    rs_replicas(rs) == replicas(d) && desired == replicas(d) && rs_available(rs) == replicas(d)
}

/// `isScalingEvent`: an active ReplicaSet's desired-replicas annotation differs from the
/// deployment's replicas.
pub fn is_scaling_event(d: &Deployment, all: &[&ReplicaSet]) -> bool {
    filter_active(all)
        .iter()
        .filter_map(|rs| desired_replicas_annotation(rs))
        .any(|desired| desired != replicas(d))
}

/// One ReplicaSet scale the controller writes (`scaleReplicaSet`): the ReplicaSet as
/// updated (replicas and replicas annotations) and, when its size changes, the
/// `ScalingReplicaSet` event message.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaled {
    /// The ReplicaSet with its new `spec.replicas` and the
    /// `deployment.kubernetes.io/desired-replicas` and `max-replicas` annotations.
    pub replica_set: ReplicaSet,
    /// The `ScalingReplicaSet` event message (`Scaled up replica set … from N to M`), when the size
    /// changes.
    pub event: Option<String>,
}

/// `scaleReplicaSet`: `None` when nothing needs writing (same size and, unless `force`,
/// nothing else; or same size and annotations).
pub fn scale_replica_set(
    rs: &ReplicaSet,
    new_scale: i32,
    d: &Deployment,
    force: bool,
) -> Option<Scaled> {
    let old = rs_replicas(rs);
    if !force && old == new_scale {
        return None;
    }
    let (desired, max) = (replicas(d), replicas(d) + max_surge(d));
    let size_changes = old != new_scale;
    if !size_changes && !replicas_annotations_need_update(rs, desired, max) {
        return None;
    }
    let mut out = rs.clone();
    out.spec.replicas = Some(new_scale);
    set_replicas_annotations(&mut out, desired, max);
    let name = rs.metadata.name.clone().unwrap_or_default();
    let event = size_changes.then(|| {
        let dir = if old < new_scale { "up" } else { "down" };
        format!("Scaled {dir} replica set {name} from {old} to {new_scale}")
    });
    Some(Scaled {
        replica_set: out,
        event,
    })
}

/// `scale` (a scaling event, or a paused deployment): the target size of each ReplicaSet to
/// pass to [`scale_replica_set`], with its `force` flag, in the order upstream writes them.
pub fn scale_plan(
    d: &Deployment,
    new_rs: Option<&ReplicaSet>,
    old: &[&ReplicaSet],
) -> Vec<(String, i32, bool)> {
    let name = |r: &ReplicaSet| r.metadata.name.clone().unwrap_or_default();
    let want = replicas(d);
    if let Some(rs) = find_active_or_latest(new_rs, old) {
        if rs_replicas(rs) == want {
            return Vec::new();
        }
        return vec![(name(rs), want, false)];
    }
    if is_saturated(d, new_rs) {
        return filter_active(old)
            .iter()
            .map(|r| (name(r), 0, false))
            .collect();
    }
    if !is_rolling_update(d) {
        return Vec::new();
    }
    let mut all: Vec<&ReplicaSet> = old.to_vec();
    all.extend(new_rs);
    let mut all = filter_active(&all);
    let all_replicas = replica_count(&all);
    let allowed = if want > 0 { want + max_surge(d) } else { 0 };
    let to_add = allowed - all_replicas;
    match to_add.cmp(&0) {
        // ReplicaSetsBySizeNewer / ReplicaSetsBySizeOlder.
        Ordering::Greater => sort_by_less(&mut all, |a, b| {
            if rs_replicas(a) == rs_replicas(b) {
                created_before(b, a)
            } else {
                rs_replicas(a) > rs_replicas(b)
            }
        }),
        Ordering::Less => sort_by_less(&mut all, |a, b| {
            if rs_replicas(a) == rs_replicas(b) {
                created_before(a, b)
            } else {
                rs_replicas(a) > rs_replicas(b)
            }
        }),
        Ordering::Equal => {}
    }
    let mut added = 0;
    let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
    for rs in &all {
        if to_add != 0 {
            let p = replica_set_proportion(rs, d, to_add, added);
            sizes.push(rs_replicas(rs) + p);
            added += p;
        } else {
            sizes.push(rs_replicas(rs));
        }
    }
    let mut out = Vec::with_capacity(all.len());
    for (i, rs) in all.iter().enumerate() {
        if i == 0 && to_add != 0 {
            sizes[0] = (sizes[0] + to_add - added).max(0);
        }
        out.push((name(rs), sizes[i], true));
    }
    out
}

/// `reconcileNewReplicaSet`: the new ReplicaSet's target size, if it should change.
///
/// # Errors
/// As [`new_rs_new_replicas`].
pub fn reconcile_new_replica_set(
    all: &[&ReplicaSet],
    new_rs: &ReplicaSet,
    d: &Deployment,
) -> Result<Option<i32>, String> {
    let want = replicas(d);
    let have = rs_replicas(new_rs);
    if have == want {
        return Ok(None);
    }
    if have > want {
        return Ok(Some(want));
    }
    let n = new_rs_new_replicas(d, all, new_rs)?;
    Ok((n != have).then_some(n))
}

/// `reconcileOldReplicaSets` (with `cleanupUnhealthyReplicas` then
/// `scaleDownOldReplicaSetsForRollingUpdate`): the old ReplicaSets' new sizes, in the order
/// upstream writes them. `old` are the active old ReplicaSets. The first step scales down
/// unavailable old replicas as far as `maxScaledDown` allows; the second scales down available
/// ones while more than minAvailable replicas are available. An old ReplicaSet whose status
/// shows more available replicas than its spec wants (its controller has not yet removed the
/// pods of the last scale down) ends the plan where it is, as upstream's
/// `cleanupUnhealthyReplicas` error does (`rolling.go`).
pub fn reconcile_old_replica_sets(
    all: &[&ReplicaSet],
    old: &[&ReplicaSet],
    new_rs: &ReplicaSet,
    d: &Deployment,
) -> Vec<(String, i32)> {
    let old_count = replica_count(old);
    if old_count == 0 {
        return Vec::new();
    }
    let all_count = replica_count(all);
    let min_avail = replicas(d) - max_unavailable(d);
    let new_unavailable = rs_replicas(new_rs) - rs_available(new_rs);
    let max_scaled_down = all_count - min_avail - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut olds: Vec<ReplicaSet> = sorted_by_creation(old).into_iter().cloned().collect();
    let mut out: Vec<(String, i32)> = Vec::new();
    // cleanupUnhealthyReplicas.
    let mut total = 0;
    for rs in olds.iter_mut() {
        if total >= max_scaled_down {
            break;
        }
        let r = rs_replicas(rs);
        if r == 0 || r == rs_available(rs) {
            continue;
        }
        let down = (max_scaled_down - total).min(r - rs_available(rs));
        let n = r - down;
        if n > r {
            // More available than wanted: a status that has not caught up with the last scale
            // down. Upstream's "invalid request to scale down" error: the rest of this sync
            // writes nothing (what was scaled before stays scaled).
            return out;
        }
        rs.spec.replicas = Some(n);
        out.push((rs.metadata.name.clone().unwrap_or_default(), n));
        total += down;
    }
    // scaleDownOldReplicaSetsForRollingUpdate over the old ones as updated and the new one.
    let mut all2: Vec<&ReplicaSet> = olds.iter().collect();
    all2.push(new_rs);
    let available = available_replica_count(&all2);
    if available <= min_avail {
        return out;
    }
    let total_down = available - min_avail;
    let mut done = 0;
    for rs in sorted_by_creation(&olds.iter().collect::<Vec<_>>()) {
        if done >= total_down {
            break;
        }
        let r = rs_replicas(rs);
        if r == 0 {
            continue;
        }
        let down = r.min(total_down - done);
        out.push((rs.metadata.name.clone().unwrap_or_default(), r - down));
        done += down;
    }
    out
}

/// `cleanupDeployment`: the names of the old ReplicaSets to delete beyond
/// `revisionHistoryLimit`, oldest revision first, skipping any that still has replicas, has
/// not observed its generation, or is being deleted.
pub fn cleanup_plan(old: &[&ReplicaSet], d: &Deployment) -> Vec<String> {
    if !has_revision_history_limit(d) {
        return Vec::new();
    }
    let limit = revision_history_limit(d).unwrap_or(0);
    let mut alive: Vec<&ReplicaSet> = old
        .iter()
        .copied()
        .filter(|r| r.metadata.deletion_timestamp.is_none())
        .collect();
    let diff = alive.len() as i64 - i64::from(limit);
    if diff <= 0 {
        return Vec::new();
    }
    sort_by_less(&mut alive, |a, b| match (rs_revision(a), rs_revision(b)) {
        (Ok(x), Ok(y)) if x != y => x < y,
        _ => created_before(a, b),
    });
    alive
        .iter()
        .take(diff as usize)
        .filter(|rs| {
            rs_status_replicas(rs) == 0
                && rs_replicas(rs) == 0
                && rs.metadata.generation.unwrap_or(0)
                    <= rs
                        .status
                        .as_ref()
                        .and_then(|s| s.observed_generation)
                        .unwrap_or(0)
                && rs.metadata.deletion_timestamp.is_none()
        })
        .filter_map(|rs| rs.metadata.name.clone())
        .collect()
}

/// `calculateStatus`: the deployment's status from its ReplicaSets at `now_ms`, with the
/// `Available` condition set.
pub fn calculate_status(
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    d: &Deployment,
    now_ms: i64,
    f: Features,
) -> DeploymentStatus {
    let available = available_replica_count(all);
    let total = replica_count(all);
    let unavailable = (total - available).max(0);
    let old = d.status.clone().unwrap_or_default();
    let mut st = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(actual_replica_count(all)),
        updated_replicas: Some(new_rs.map_or(0, rs_status_replicas)),
        ready_replicas: Some(ready_replica_count(all)),
        available_replicas: Some(available),
        unavailable_replicas: Some(unavailable),
        collision_count: old.collision_count,
        terminating_replicas: if f.terminating_replicas {
            terminating_replica_count(all)
        } else {
            None
        },
        conditions: old.conditions.clone(),
    };
    if available >= replicas(d) - max_unavailable(d) {
        set_condition(
            &mut st,
            new_condition(
                "Available",
                "True",
                reason::MINIMUM_REPLICAS_AVAILABLE,
                "Deployment has minimum availability.",
                now_ms,
            ),
        );
    } else {
        set_condition(
            &mut st,
            new_condition(
                "Available",
                "False",
                reason::MINIMUM_REPLICAS_UNAVAILABLE,
                "Deployment does not have minimum availability.",
                now_ms,
            ),
        );
    }
    st
}

/// A status write of the controller: the new status, or nothing when it is unchanged; and,
/// from `requeueStuckDeployment`, when to look again for the progress deadline (milliseconds
/// from now).
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutStatus {
    /// The status to write with `UpdateStatus`; `None` when it equals the current one.
    pub status: Option<DeploymentStatus>,
    /// When to sync again to check `progressDeadlineSeconds`, milliseconds from now; `None` for no
    /// requeue.
    pub requeue_after_ms: Option<i64>,
}

fn same_status(a: &DeploymentStatus, b: &DeploymentStatus) -> bool {
    normalized(&serde_json::to_value(a).unwrap_or_default())
        == normalized(&serde_json::to_value(b).unwrap_or_default())
}

/// `syncDeploymentStatus`: the status to write, if it changed.
pub fn sync_deployment_status(
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    d: &Deployment,
    now_ms: i64,
    f: Features,
) -> Option<DeploymentStatus> {
    let st = calculate_status(all, new_rs, d, now_ms, f);
    (!same_status(&d.status.clone().unwrap_or_default(), &st)).then_some(st)
}

/// `syncRolloutStatus`: the status with the `Progressing` condition (complete, progressing or
/// timed out) and `ReplicaFailure` promoted from the ReplicaSets, if it changed; otherwise
/// when to check the progress deadline again.
pub fn sync_rollout_status(
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    d: &Deployment,
    now_ms: i64,
    f: Features,
) -> RolloutStatus {
    let mut st = calculate_status(all, new_rs, d, now_ms, f);
    if !has_progress_deadline(d) {
        remove_condition(&mut st, "Progressing");
    }
    let dst = d.status.clone().unwrap_or_default();
    let current = condition(&dst, "Progressing").cloned();
    let complete_already = st.replicas == st.updated_replicas
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(reason::NEW_RS_AVAILABLE);
    let dname = d.metadata.name.clone().unwrap_or_default();
    let rs_name = new_rs.and_then(|r| r.metadata.name.clone());
    if has_progress_deadline(d) && !complete_already {
        if deployment_complete(d, &st) {
            let msg = match &rs_name {
                Some(n) => format!("ReplicaSet {} has successfully progressed.", q(n)),
                None => format!("Deployment {} has successfully progressed.", q(&dname)),
            };
            set_condition(
                &mut st,
                new_condition(
                    "Progressing",
                    "True",
                    reason::NEW_RS_AVAILABLE,
                    &msg,
                    now_ms,
                ),
            );
        } else if deployment_progressing(d, &st) {
            let msg = match &rs_name {
                Some(n) => format!("ReplicaSet {} is progressing.", q(n)),
                None => format!("Deployment {} is progressing.", q(&dname)),
            };
            let mut c = new_condition(
                "Progressing",
                "True",
                reason::REPLICA_SET_UPDATED,
                &msg,
                now_ms,
            );
            if let Some(cur) = &current {
                if cur.status.as_deref() == Some("True") {
                    c.last_transition_time = cur.last_transition_time.clone();
                }
                remove_condition(&mut st, "Progressing");
            }
            set_condition(&mut st, c);
        } else if deployment_timed_out(d, &st, now_ms) {
            let msg = match &rs_name {
                Some(n) => format!("ReplicaSet {} has timed out progressing.", q(n)),
                None => format!("Deployment {} has timed out progressing.", q(&dname)),
            };
            set_condition(
                &mut st,
                new_condition("Progressing", "False", reason::TIMED_OUT, &msg, now_ms),
            );
        }
    }
    match replica_failures(all, new_rs).into_iter().next() {
        Some(c) => set_condition(&mut st, c),
        None => remove_condition(&mut st, "ReplicaFailure"),
    }
    if same_status(&dst, &st) {
        return RolloutStatus {
            status: None,
            requeue_after_ms: requeue_stuck(d, &st, now_ms),
        };
    }
    RolloutStatus {
        status: Some(st),
        requeue_after_ms: None,
    }
}

/// `getReplicaFailures`: the ReplicaSets' `ReplicaFailure` conditions as deployment
/// conditions, the new ReplicaSet's first.
pub fn replica_failures(
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
) -> Vec<DeploymentCondition> {
    let conv = |rs: &ReplicaSet| -> Vec<DeploymentCondition> {
        rs.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .filter(|c| c.type_.as_deref() == Some("ReplicaFailure"))
            .map(|c| DeploymentCondition {
                type_: c.type_.clone(),
                status: c.status.clone(),
                last_transition_time: c.last_transition_time.clone(),
                last_update_time: c.last_transition_time.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect()
    };
    if let Some(n) = new_rs {
        let c = conv(n);
        if !c.is_empty() {
            return c;
        }
    }
    all.iter().flat_map(|r| conv(r)).collect()
}

/// `requeueStuckDeployment`: milliseconds until the progress deadline of a rollout in flight
/// is checked again (0: at once, rate limited); `None` when no check is due.
pub fn requeue_stuck(d: &Deployment, new: &DeploymentStatus, now_ms: i64) -> Option<i64> {
    let dst = d.status.clone().unwrap_or_default();
    let cur = condition(&dst, "Progressing")?;
    if !has_progress_deadline(d) {
        return None;
    }
    if deployment_complete(d, new) || cur.reason.as_deref() == Some(reason::TIMED_OUT) {
        return None;
    }
    let from = cur.last_update_time.as_ref().map_or(0, time_ms);
    let after = from + i64::from(progress_deadline_seconds(d).unwrap_or(0)) * 1000 - now_ms;
    if after < 1000 {
        Some(0)
    } else {
        Some(after + 1000)
    }
}

/// `checkPausedConditions`: the status with the `Progressing` condition set to
/// `DeploymentPaused` / `DeploymentResumed` when the pause changed, if it needs writing.
pub fn paused_conditions(d: &Deployment, now_ms: i64) -> Option<DeploymentStatus> {
    if !has_progress_deadline(d) {
        return None;
    }
    let mut st = d.status.clone().unwrap_or_default();
    let cur = condition(&st, "Progressing").and_then(|c| c.reason.clone());
    if cur.as_deref() == Some(reason::TIMED_OUT) {
        return None;
    }
    let paused_cond = cur.as_deref() == Some(reason::PAUSED);
    let paused = d.spec.paused.unwrap_or(false);
    if paused && !paused_cond {
        set_condition(
            &mut st,
            new_condition(
                "Progressing",
                "Unknown",
                reason::PAUSED,
                "Deployment is paused",
                now_ms,
            ),
        );
    } else if !paused && paused_cond {
        set_condition(
            &mut st,
            new_condition(
                "Progressing",
                "Unknown",
                reason::RESUMED,
                "Deployment is resumed",
                now_ms,
            ),
        );
    } else {
        return None;
    }
    Some(st)
}

/// `oldPodsRunning` (Recreate): an old ReplicaSet still reports pods, or one of the pods of
/// an old ReplicaSet is not terminal. `pods_by_rs`: each ReplicaSet's uid with its pods.
pub fn old_pods_running(
    new_rs: Option<&ReplicaSet>,
    old: &[&ReplicaSet],
    pods_by_rs: &[(String, Vec<&Pod>)],
) -> bool {
    if actual_replica_count(old) > 0 {
        return true;
    }
    let new_uid = new_rs.and_then(|r| r.metadata.uid.clone());
    pods_by_rs.iter().any(|(uid, pods)| {
        Some(uid) != new_uid.as_ref()
            && pods
                .iter()
                .any(|p| !matches!(super::podutil::phase(p), "Failed" | "Succeeded"))
    })
}

/// `SafeEncodeString`: each byte of `s` mapped onto the alphabet without vowels
/// (`bcdfghjklmnpqrstvwxz2456789`).
pub fn safe_encode_string(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| ALPHANUMS[b as usize % ALPHANUMS.len()] as char)
        .collect()
}

/// `ComputeHash`: FNV-32a of the template (its JSON here, Go's struct dump upstream: see the
/// module documentation) and the collision count as 8 little-endian bytes, as a decimal
/// string encoded with [`safe_encode_string`].
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut h: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
    };
    feed(
        serde_json::to_string(template)
            .unwrap_or_default()
            .as_bytes(),
    );
    if let Some(c) = collision_count {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&(c as u32).to_le_bytes());
        feed(&b);
    }
    safe_encode_string(&h.to_string())
}

/// `generateReplicaSetName`: `NAME-HASH`, the name cut so the whole fits 253 characters.
pub fn replica_set_name(deployment: &str, hash: &str) -> String {
    let max = 253usize.saturating_sub(1 + hash.len());
    if deployment.len() > max && max > 0 {
        format!("{}-{hash}", &deployment[..max])
    } else {
        format!("{deployment}-{hash}")
    }
}

/// What a rollback (`deprecated.deployment.rollback.to`) does.
#[derive(Debug, Clone, PartialEq)]
pub enum Rollback {
    /// Roll back to this ReplicaSet's template: event `DeploymentRollback` with the message.
    To {
        /// The ReplicaSet whose template the Deployment gets back.
        replica_set: String,
        /// The event message (`Rolled back deployment … to revision N`).
        message: String,
    },
    /// The revision's template is the current one: a Warning event, the annotation cleared.
    Unchanged {
        /// The event message (`The rollback revision contains the same template as current
        /// deployment …`).
        message: String,
    },
    /// No such revision: a Warning event, the annotation cleared.
    NotFound {
        /// The event message (`Unable to find the revision to rollback to.` or `Unable to find
        /// last revision.`).
        message: String,
    },
}

/// `rollback`: the target of the `rollback.to` revision `to` (0: the last revision).
pub fn rollback_target(d: &Deployment, all: &[&ReplicaSet], to: i64) -> Rollback {
    let mut to = to;
    if to == 0 {
        to = last_revision(all);
        if to == 0 {
            return Rollback::NotFound {
                message: "Unable to find last revision.".into(),
            };
        }
    }
    for rs in all {
        if rs_revision(rs).ok() == Some(to) {
            if equal_ignore_hash(&d_template(d), &rs_template(rs)) {
                return Rollback::Unchanged {
                    message: format!(
                        "The rollback revision contains the same template as current deployment {}",
                        q(&d.metadata.name.clone().unwrap_or_default())
                    ),
                };
            }
            return Rollback::To {
                replica_set: rs.metadata.name.clone().unwrap_or_default(),
                message: format!(
                    "Rolled back deployment {} to revision {to}",
                    q(&d.metadata.name.clone().unwrap_or_default())
                ),
            };
        }
    }
    Rollback::NotFound {
        message: "Unable to find the revision to rollback to.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        DeploymentSpec, DeploymentStrategy, ReplicaSetSpec, ReplicaSetStatus,
        RollingUpdateDeployment,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        // The cases of ResolveFenceposts' doc comment.
        assert_eq!(
            resolve_fenceposts(Some(&s("0%")), Some(&s("1%")), 2),
            Ok((0, 1))
        );
        assert_eq!(
            resolve_fenceposts(Some(&s("1%")), Some(&s("25%")), 2),
            Ok((1, 0))
        );
        assert_eq!(
            resolve_fenceposts(Some(&s("1%")), Some(&s("0%")), 1),
            Ok((1, 0))
        );
        assert_eq!(
            resolve_fenceposts(Some(&s("25%")), Some(&s("25%")), 100),
            Ok((25, 25))
        );
        assert_eq!(
            resolve_fenceposts(Some(&s("25%")), Some(&s("25%")), 10),
            Ok((3, 2))
        );
        assert_eq!(
            resolve_fenceposts(Some(&s("oops")), None, 1),
            Err("invalid value for IntOrString: invalid type: string is not a percentage".into())
        );
    }

    fn deploy(replicas: i32, surge: i32, unavail: i32) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(IntOrString::Int(surge)),
                        max_unavailable: Some(IntOrString::Int(unavail)),
                    }),
                }),
                ..Default::default()
            },
            status: None,
        }
    }

    fn rs(name: &str, replicas: i32, available: i32, created_ms: i64) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(name.into()),
                creation_timestamp: Some(ms_time(created_ms)),
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(replicas),
                ..Default::default()
            },
            status: Some(ReplicaSetStatus {
                replicas,
                available_replicas: Some(available),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_rollout_of_two_with_surge_one_goes_one_by_one() {
        // Case d of the recorded 1.32 cluster: replicas 2, maxSurge 1, maxUnavailable 0.
        let d = deploy(2, 1, 0);
        let old = rs("old", 2, 2, 1000);
        let new = rs("new", 0, 0, 2000);
        let all = [&old, &new];
        assert_eq!(reconcile_new_replica_set(&all, &new, &d), Ok(Some(1)));
        let new = rs("new", 1, 0, 2000);
        let all = [&old, &new];
        // The new pod is not available yet: nothing may go.
        assert!(reconcile_old_replica_sets(&all, &[&old], &new, &d).is_empty());
        let new = rs("new", 1, 1, 2000);
        let all = [&old, &new];
        assert_eq!(
            reconcile_old_replica_sets(&all, &[&old], &new, &d),
            [("old".to_string(), 1)]
        );
    }

    /// The rolling-update flake: the old ReplicaSet was scaled 2 → 1, the new one 1 → 2, and
    /// the old one's status still said 2 available (its controller had not yet deleted the
    /// surplus pod). `r - available` is then -1, which scaled the old ReplicaSet back up 1 → 2;
    /// upstream's `cleanupUnhealthyReplicas` refuses that "scale down" and the sync writes
    /// nothing until the status catches up.
    #[test]
    fn an_old_replica_set_whose_status_lags_its_scale_down_is_not_scaled_back_up() {
        let d = deploy(2, 1, 0);
        let old = rs("old", 1, 2, 1000);
        let new = rs("new", 2, 2, 2000);
        let all = [&old, &new];
        assert_eq!(
            reconcile_old_replica_sets(&all, &[&old], &new, &d),
            Vec::<(String, i32)>::new()
        );
        // Once its status says 1 available, it is scaled down to 0.
        let old = rs("old", 1, 1, 1000);
        let all = [&old, &new];
        assert_eq!(
            reconcile_old_replica_sets(&all, &[&old], &new, &d),
            [("old".to_string(), 0)]
        );
    }

    #[test]
    fn hashes_use_the_vowel_free_alphabet() {
        let h = compute_hash(&PodTemplateSpec::default(), None);
        assert!(h.chars().all(|c| "456789bcdf".contains(c)), "{h}");
        assert_ne!(h, compute_hash(&PodTemplateSpec::default(), Some(1)));
        assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
        assert_eq!(replica_set_name("web", "abc"), "web-abc");
    }
}
