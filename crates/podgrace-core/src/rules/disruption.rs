//! PodDisruptionBudgets: the disruption controller's status (expected pods, desired and
//! current healthy, disruptions allowed, disrupted pods, the `DisruptionAllowed` condition)
//! and the `pods/eviction` subresource's decision (evict, or refuse with 429 and the budget's
//! words).
//!
//! Upstream: `pkg/controller/disruption/disruption.go` (`getExpectedPodCount`,
//! `getExpectedScale`, `countHealthyPods`, `buildDisruptedPodMap`, `updatePdbStatus`,
//! `failSafe`, `nonTerminatingPodHasStaleDisruptionCondition`),
//! `staging/src/k8s.io/component-helpers/apps/poddisruptionbudget/helpers.go`
//! (`UpdateDisruptionAllowedCondition`, `ConditionsAreUpToDate`),
//! `staging/src/k8s.io/apimachinery/pkg/api/meta/conditions.go` (`SetStatusCondition`),
//! `pkg/registry/core/pod/storage/eviction.go` (`EvictionREST.Create`, `canIgnorePDB`,
//! `shouldEnforceResourceVersion`, `checkAndDecrement`, `createTooManyRequestsError`,
//! `addConditionAndDeletePod`). Read at the 1.36 tree; `unhealthyPodEvictionPolicy` from 1.26
//! (beta, on from 1.27, GA 1.31), the `DisruptionTarget` condition from 1.26; the wording is
//! the one recorded on a real 1.32 cluster (`shared/cases/real-cluster-1.32.md` e, f).
//!
//! Times are milliseconds since the Unix epoch (`_ms`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::deployment::scaled_value;
use super::podutil::{is_pod_ready, ms_time, time_ms};

/// `DeletionTimeout`: an evicted pod is expected to be deleted within 2 minutes.
pub const DELETION_TIMEOUT_MS: i64 = 120_000;
/// `stalePodDisruptionTimeout`: a `DisruptionTarget` condition of a pod that was not deleted
/// is reset after 2 minutes.
pub const STALE_POD_DISRUPTION_TIMEOUT_MS: i64 = 120_000;
/// `MaxDisruptedPodSize`: evictions not yet confirmed by the controller, at most.
pub const MAX_DISRUPTED_POD_SIZE: usize = 2000;

/// The eviction refusal's message (`Cannot evict pod as it would violate the pod's
/// disruption budget.`).
pub const TOO_MANY_REQUESTS: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

/// `getExpectedPodCount`: `(expectedPods, desiredHealthy, unmanaged pods)`. `scale_of`
/// resolves a pod's controller reference (in the PDB's namespace) to the controller's uid and
/// scale, as the controller finders do (a ReplicaSet owned by a Deployment gives the
/// Deployment's); `Ok(None)` when it is no known controller.
///
/// # Errors
/// `found no controllers for pod "X"`, or a percentage that does not resolve; the controller
/// then writes [`fail_safe`].
pub fn expected_pod_count(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    mut scale_of: impl FnMut(&OwnerReference) -> Result<Option<(String, i32)>, String>,
) -> Result<(i32, i32, Vec<String>), String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let mut expected_scale = |pods: &[&Pod]| -> Result<(i32, Vec<String>), String> {
        let mut scales: BTreeMap<String, i32> = BTreeMap::new();
        let mut unmanaged = Vec::new();
        for p in pods {
            let Some(c) = super::podutil::controller_of(&p.metadata) else {
                unmanaged.push(p.metadata.name.clone().unwrap_or_default());
                continue;
            };
            if scales.contains_key(&c.uid) {
                continue;
            }
            match scale_of(c)? {
                Some((uid, s)) => {
                    scales.insert(uid, s);
                }
                None => {
                    return Err(format!(
                        "found no controllers for pod {:?}",
                        p.metadata.name.clone().unwrap_or_default()
                    ))
                }
            }
        }
        Ok((scales.values().sum(), unmanaged))
    };
    if let Some(mu) = &spec.max_unavailable {
        let (expected, unmanaged) = expected_scale(pods)?;
        let max = scaled_value(mu, expected, true)?;
        return Ok((expected, (expected - max).max(0), unmanaged));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((pods.len() as i32, *n, Vec::new())),
        Some(v @ IntOrString::String(_)) => {
            let (expected, unmanaged) = expected_scale(pods)?;
            let min = scaled_value(v, expected, true)?;
            Ok((expected, min, unmanaged))
        }
        None => Ok((0, 0, Vec::new())),
    }
}

/// `countHealthyPods`: ready pods that are neither being deleted nor recently evicted.
pub fn count_healthy(pods: &[&Pod], disrupted: &BTreeMap<String, Time>, now_ms: i64) -> i32 {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            disrupted
                .get(&name)
                .is_none_or(|t| time_ms(t) + DELETION_TIMEOUT_MS <= now_ms)
        })
        .filter(|p| is_pod_ready(p))
        .count() as i32
}

/// What `buildDisruptedPodMap` keeps: the evictions still expected to complete, the pods that
/// were expected to be deleted but were not (each a `NotDeleted` Warning event), and when to
/// check again (the earliest expected deletion).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Disrupted {
    /// `status.disruptedPods` kept: pod name to the time its eviction was admitted.
    pub pods: BTreeMap<String, Time>,
    /// Pods whose eviction was admitted more than 2 minutes (`DeletionTimeout`) ago but which still
    /// have no `deletionTimestamp`.
    pub not_deleted: Vec<String>,
    /// When the controller syncs again, milliseconds on the caller's axis: the earliest admitted
    /// time plus 2 minutes; `None` when no eviction is pending.
    pub recheck_at_ms: Option<i64>,
}

/// `buildDisruptedPodMap`.
pub fn build_disrupted_pod_map(pods: &[&Pod], pdb: &PodDisruptionBudget, now_ms: i64) -> Disrupted {
    let mut out = Disrupted::default();
    let Some(map) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else {
        return out;
    };
    for p in pods {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = p.metadata.name.clone().unwrap_or_default();
        let Some(t) = map.get(&name) else { continue };
        let expected = time_ms(t) + DELETION_TIMEOUT_MS;
        if expected < now_ms {
            out.not_deleted.push(name);
        } else {
            if out.recheck_at_ms.is_none_or(|r| expected < r) {
                out.recheck_at_ms = Some(expected);
            }
            out.pods.insert(name, t.clone());
        }
    }
    out
}

/// The `NotDeleted` event message (upstream prints the namespace twice).
pub fn not_deleted_message(pdb: &PodDisruptionBudget) -> String {
    let ns = pdb.metadata.namespace.clone().unwrap_or_default();
    format!("Pod was expected by PDB {ns}/{ns} to be deleted but it wasn't")
}

/// `apimeta.SetStatusCondition` at `now_ms`: adds or updates the condition of its type (the
/// transition time moves only when the status changes); whether anything changed.
pub fn set_status_condition(conds: &mut Vec<Condition>, new: Condition, now_ms: i64) -> bool {
    let zero = time_ms(&new.last_transition_time) == 0;
    match conds.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            let mut c = new;
            if zero {
                c.last_transition_time = ms_time(now_ms);
            }
            conds.push(c);
            true
        }
        Some(c) => {
            let mut changed = false;
            if c.status != new.status {
                c.status = new.status.clone();
                c.last_transition_time = if zero {
                    ms_time(now_ms)
                } else {
                    new.last_transition_time.clone()
                };
                changed = true;
            }
            if c.reason != new.reason {
                c.reason = new.reason.clone();
                changed = true;
            }
            if c.message != new.message {
                c.message = new.message.clone();
                changed = true;
            }
            if c.observed_generation != new.observed_generation {
                c.observed_generation = new.observed_generation;
                changed = true;
            }
            changed
        }
    }
}

fn condition(ty: &str, status: &str, reason: &str, message: &str, og: Option<i64>) -> Condition {
    Condition {
        type_: ty.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: og,
        last_transition_time: ms_time(0),
    }
}

/// `UpdateDisruptionAllowedCondition`: `DisruptionAllowed` True `SufficientPods` when a
/// disruption is allowed, else False `InsufficientPods`.
pub fn update_disruption_allowed_condition(st: &mut PodDisruptionBudgetStatus, now_ms: i64) {
    let conds = st.conditions.get_or_insert_with(Vec::new);
    let c = if st.disruptions_allowed.unwrap_or(0) > 0 {
        condition(
            "DisruptionAllowed",
            "True",
            "SufficientPods",
            "",
            st.observed_generation,
        )
    } else {
        condition(
            "DisruptionAllowed",
            "False",
            "InsufficientPods",
            "",
            st.observed_generation,
        )
    };
    set_status_condition(conds, c, now_ms);
}

/// `ConditionsAreUpToDate`.
pub fn conditions_are_up_to_date(pdb: &PodDisruptionBudget) -> bool {
    let st = pdb.status.clone().unwrap_or_default();
    let Some(c) = st
        .conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionAllowed"))
    else {
        return false;
    };
    if st.observed_generation.unwrap_or(0) != pdb.metadata.generation.unwrap_or(0) {
        return false;
    }
    if st.disruptions_allowed.unwrap_or(0) > 0 {
        c.status == "True" && c.reason == "SufficientPods"
    } else {
        c.status == "False" && c.reason == "InsufficientPods"
    }
}

/// `updatePdbStatus`: the status to write, unless it is current.
pub fn update_pdb_status(
    pdb: &PodDisruptionBudget,
    current_healthy: i32,
    desired_healthy: i32,
    expected: i32,
    disrupted: &BTreeMap<String, Time>,
    now_ms: i64,
) -> Option<PodDisruptionBudgetStatus> {
    let mut allowed = current_healthy - desired_healthy;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let st = pdb.status.clone().unwrap_or_default();
    let generation = pdb.metadata.generation.unwrap_or(0);
    if st.current_healthy.unwrap_or(0) == current_healthy
        && st.desired_healthy.unwrap_or(0) == desired_healthy
        && st.expected_pods.unwrap_or(0) == expected
        && st.disruptions_allowed.unwrap_or(0) == allowed
        && st.disrupted_pods.clone().unwrap_or_default() == *disrupted
        && st.observed_generation.unwrap_or(0) == generation
        && conditions_are_up_to_date(pdb)
    {
        return None;
    }
    let mut out = PodDisruptionBudgetStatus {
        current_healthy: Some(current_healthy),
        desired_healthy: Some(desired_healthy),
        expected_pods: Some(expected),
        disruptions_allowed: Some(allowed),
        disrupted_pods: (!disrupted.is_empty()).then(|| disrupted.clone()),
        observed_generation: Some(generation),
        conditions: st.conditions,
    };
    update_disruption_allowed_condition(&mut out, now_ms);
    Some(out)
}

/// `failSafe`: no disruption allowed, `DisruptionAllowed` False `SyncFailed` with `message`.
pub fn fail_safe(
    pdb: &PodDisruptionBudget,
    message: &str,
    now_ms: i64,
) -> PodDisruptionBudgetStatus {
    let mut st = pdb.status.clone().unwrap_or_default();
    st.disruptions_allowed = Some(0);
    let og = st.observed_generation;
    let conds = st.conditions.get_or_insert_with(Vec::new);
    set_status_condition(
        conds,
        condition("DisruptionAllowed", "False", "SyncFailed", message, og),
        now_ms,
    );
    st
}

/// `nonTerminatingPodHasStaleDisruptionCondition`: `Some(ms to wait)` (0: now) before a
/// `DisruptionTarget=True` condition of a pod that is not being deleted is reset to False.
pub fn stale_disruption_condition(pod: &Pod, now_ms: i64) -> Option<i64> {
    if pod.metadata.deletion_timestamp.is_some() || super::podutil::is_pod_terminal(pod) {
        return None;
    }
    let c = super::podutil::condition(pod, "DisruptionTarget")?;
    if c.status != "True" || c.reason.as_deref() == Some("TerminationByKubelet") {
        return None;
    }
    let since = c.last_transition_time.as_ref().map_or(0, time_ms);
    Some((STALE_POD_DISRUPTION_TIMEOUT_MS - (now_ms - since)).max(0))
}

/// `canIgnorePDB`: a pod that is terminal, Pending or being deleted is evicted without
/// consulting budgets.
pub fn can_ignore_pdb(pod: &Pod) -> bool {
    matches!(
        super::podutil::phase(pod),
        "Succeeded" | "Failed" | "Pending"
    ) || pod.metadata.deletion_timestamp.is_some()
}

/// `shouldEnforceResourceVersion`: the delete of such a pod carries its resourceVersion as a
/// precondition.
pub fn should_enforce_resource_version(pod: &Pod) -> bool {
    !matches!(super::podutil::phase(pod), "Succeeded" | "Failed")
        && pod.metadata.deletion_timestamp.is_none()
}

/// A refused eviction, as the API answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 429 (`TooManyRequests`) or 403 (`Forbidden`).
    pub code: u16,
    /// The `Status.message`, such as `Cannot evict pod as it would violate the pod's disruption
    /// budget.`
    pub message: String,
    /// `details.causes[]` of reason `DisruptionBudget`.
    pub cause: Option<String>,
    /// `Retry-After` seconds (0: none).
    pub retry_after_seconds: i32,
}

/// What the eviction of a pod that a budget covers does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodBudget {
    /// No budget covers it, or the budget lets an unhealthy pod go: delete (with the
    /// resourceVersion precondition when `precondition`).
    Delete {
        /// The delete carries the pod's resourceVersion as a precondition
        /// ([`should_enforce_resource_version`]).
        precondition: bool,
    },
    /// Consult the budget ([`check_and_decrement`]).
    Check,
    /// More than one budget: 500 `This pod has more than one PodDisruptionBudget, which the
    /// eviction subresource does not support.`
    TooMany,
}

/// `EvictionREST.Create` after `canIgnorePDB`: which way the eviction of `pod` goes under
/// the budgets `pdbs` that select it.
pub fn pod_budget(pod: &Pod, pdbs: &[&PodDisruptionBudget]) -> PodBudget {
    match pdbs {
        [] => PodBudget::Delete {
            precondition: false,
        },
        [pdb] => {
            if !is_pod_ready(pod) {
                let policy = pdb
                    .spec
                    .as_ref()
                    .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
                if policy == Some("AlwaysAllow") {
                    return PodBudget::Delete { precondition: true };
                }
                let st = pdb.status.clone().unwrap_or_default();
                let (cur, want) = (
                    st.current_healthy.unwrap_or(0),
                    st.desired_healthy.unwrap_or(0),
                );
                if cur >= want && want > 0 {
                    return PodBudget::Delete { precondition: true };
                }
            }
            PodBudget::Check
        }
        _ => PodBudget::TooMany,
    }
}

/// `checkAndDecrement`: refuses (429 while the budget's generation is not observed or no
/// disruption is allowed; 403 for a negative count or too many unconfirmed evictions), or
/// returns the budget's status with one disruption fewer and `pod` recorded in
/// `disruptedPods` at `now_ms` (unchanged disrupted pods for a dry run).
///
/// # Errors
/// The [`Refusal`].
pub fn check_and_decrement(
    pdb: &PodDisruptionBudget,
    pod: &str,
    now_ms: i64,
    dry_run: bool,
) -> Result<PodDisruptionBudgetStatus, Refusal> {
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let mut st = pdb.status.clone().unwrap_or_default();
    if st.observed_generation.unwrap_or(0) < pdb.metadata.generation.unwrap_or(0) {
        return Err(Refusal {
            code: 429,
            message: TOO_MANY_REQUESTS.into(),
            cause: Some(format!(
                "The disruption budget {name} is still being processed by the server."
            )),
            retry_after_seconds: 10,
        });
    }
    let allowed = st.disruptions_allowed.unwrap_or(0);
    let forbidden = |why: &str| Refusal {
        code: 403,
        message: format!("poddisruptionbudget.policy {name:?} is forbidden: {why}"),
        cause: None,
        retry_after_seconds: 0,
    };
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    if st.disrupted_pods.as_ref().map_or(0, BTreeMap::len) > MAX_DISRUPTED_POD_SIZE {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        let cond = st
            .conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == "DisruptionAllowed"));
        let (cur, want) = (
            st.current_healthy.unwrap_or(0),
            st.desired_healthy.unwrap_or(0),
        );
        let msg = match cond {
            Some(c) if c.status == "False" && !c.message.is_empty() && c.reason == "SyncFailed" => format!(
                "The disruption budget {name} does not allow evicting pods currently because it failed sync: {}",
                c.message
            ),
            _ if cur <= want => format!(
                "The disruption budget {name} needs {want} healthy pods and has {cur} currently"
            ),
            Some(c) if c.status == "False" && !c.message.is_empty() => format!(
                "The disruption budget {name} does not allow evicting pods currently ({}): {}",
                c.reason, c.message
            ),
            _ => format!("The disruption budget {name} does not allow evicting pods currently"),
        };
        return Err(Refusal {
            code: 429,
            message: TOO_MANY_REQUESTS.into(),
            cause: Some(msg),
            retry_after_seconds: 0,
        });
    }
    st.disruptions_allowed = Some(allowed - 1);
    if allowed - 1 == 0 {
        update_disruption_allowed_condition(&mut st, now_ms);
    }
    if !dry_run {
        st.disrupted_pods
            .get_or_insert_with(BTreeMap::new)
            .insert(pod.to_string(), ms_time(now_ms));
    }
    Ok(st)
}

/// The refusal when the delete's precondition failed after the budget let an unhealthy pod go
/// (`createTooManyRequestsError`).
pub fn still_processing(pdb_name: &str) -> Refusal {
    Refusal {
        code: 429,
        message: TOO_MANY_REQUESTS.into(),
        cause: Some(format!(
            "The disruption budget {pdb_name} is still being processed by the server."
        )),
        retry_after_seconds: 10,
    }
}

/// `addConditionAndDeletePod`'s condition: `DisruptionTarget` True `EvictionByEvictionAPI`
/// `Eviction API: evicting`, set on the pod (`UpdatePodCondition`: the transition time moves
/// only when the status changes) before it is deleted.
pub fn add_disruption_target(conds: &mut Vec<PodCondition>, now_ms: i64) {
    let mut c = PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: Some("EvictionByEvictionAPI".into()),
        message: Some("Eviction API: evicting".into()),
        last_transition_time: Some(ms_time(now_ms)),
        ..Default::default()
    };
    match conds.iter_mut().find(|x| x.type_ == "DisruptionTarget") {
        None => conds.push(c),
        Some(old) => {
            if old.status == c.status {
                c.last_transition_time = old.last_transition_time.clone();
            }
            *old = c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pdb(min: i32, st: PodDisruptionBudgetStatus) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some("web-pdb".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                min_available: Some(IntOrString::Int(min)),
                ..Default::default()
            }),
            status: Some(st),
        }
    }

    #[test]
    fn the_recorded_refusal_and_admission() {
        // Case f: minAvailable 2 over 2 healthy pods.
        let p = pdb(
            2,
            PodDisruptionBudgetStatus {
                current_healthy: Some(2),
                desired_healthy: Some(2),
                expected_pods: Some(2),
                disruptions_allowed: Some(0),
                observed_generation: Some(1),
                ..Default::default()
            },
        );
        let e = check_and_decrement(&p, "a", 0, false).unwrap_err();
        assert_eq!(e.code, 429);
        assert_eq!(
            e.message,
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        assert_eq!(
            e.cause.as_deref(),
            Some("The disruption budget web-pdb needs 2 healthy pods and has 2 currently")
        );
        assert_eq!(e.retry_after_seconds, 0);
        let p = pdb(
            1,
            PodDisruptionBudgetStatus {
                current_healthy: Some(2),
                desired_healthy: Some(1),
                expected_pods: Some(2),
                disruptions_allowed: Some(1),
                observed_generation: Some(1),
                ..Default::default()
            },
        );
        let st = check_and_decrement(&p, "a", 5_000, false).unwrap();
        assert_eq!(st.disruptions_allowed, Some(0));
        assert!(st.disrupted_pods.unwrap().contains_key("a"));
        let c = &st.conditions.unwrap()[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "InsufficientPods")
        );
    }
}
