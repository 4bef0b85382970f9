//! What controllers read from a pod: readiness, availability, terminal phase, activity, and
//! the controller owner reference.
//!
//! Upstream: `pkg/api/v1/pod/util.go` (`IsPodReady`, `IsPodAvailable`, `IsPodTerminal`,
//! `GetPodReadyCondition`), `pkg/controller/controller_utils.go` (`IsPodActive`,
//! `IsPodTerminating`), `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/controller_ref.go`
//! (`GetControllerOf`, `IsControlledBy`). Unchanged from Kubernetes 1.18 to 1.37, except
//! `IsPodAvailable`'s comparison (`<=` since 1.30, `Before` earlier; the same at whole seconds).
//!
//! Times are milliseconds since the Unix epoch (`_ms`).

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

/// A `metav1.Time` as milliseconds since the epoch.
pub fn time_ms(t: &Time) -> i64 {
    t.0.as_millisecond()
}

/// Milliseconds since the epoch as a `metav1.Time` (whole seconds are what the API keeps).
pub fn ms_time(ms: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_millisecond(ms).unwrap_or_default())
}

/// The pod's `status.phase` (`""` when unset).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// `GetPodCondition` of type `ty`.
pub fn condition<'a>(pod: &'a Pod, ty: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
}

/// `IsPodReady`: the `Ready` condition is `True`.
pub fn is_pod_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// When the `Ready` condition last changed, if it is `True` and has a transition time
/// (`podReadyTime`).
pub fn ready_since_ms(pod: &Pod) -> Option<i64> {
    condition(pod, "Ready")
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(time_ms)
}

/// `IsPodAvailable`: ready, and ready for at least `min_ready_seconds` at `now_ms` (at once when
/// it is 0).
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now_ms: i64) -> bool {
    if !is_pod_ready(pod) {
        return false;
    }
    if min_ready_seconds == 0 {
        return true;
    }
    ready_since_ms(pod)
        .is_some_and(|t| t.saturating_add(i64::from(min_ready_seconds) * 1000) <= now_ms)
}

/// `IsPodTerminal`: phase Succeeded or Failed.
pub fn is_pod_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Whether the object has a deletionTimestamp.
pub fn is_deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// `IsPodActive`: not terminal and not being deleted.
pub fn is_pod_active(pod: &Pod) -> bool {
    !is_pod_terminal(pod) && !is_deleting(&pod.metadata)
}

/// `IsPodTerminating`: being deleted and not yet terminal.
pub fn is_pod_terminating(pod: &Pod) -> bool {
    !is_pod_terminal(pod) && is_deleting(&pod.metadata)
}

/// `GetControllerOf`: the owner reference with `controller: true`.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
}

/// `IsControlledBy`: the controller reference names `owner_uid`.
pub fn is_controlled_by(meta: &ObjectMeta, owner_uid: &str) -> bool {
    controller_of(meta).is_some_and(|o| o.uid == owner_uid)
}

/// `metav1.NewControllerRef`: a controller reference to the object with `meta` of
/// `api_version`/`kind`, blocking the owner's deletion.
pub fn new_controller_ref(meta: &ObjectMeta, api_version: &str, kind: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The pod's labels (empty when unset).
pub fn labels(meta: &ObjectMeta) -> std::collections::BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;

    fn ready_pod(since_ms: i64) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(ms_time(since_ms)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn availability_counts_min_ready_seconds_from_the_ready_transition() {
        let p = ready_pod(10_000);
        assert!(is_pod_available(&p, 0, 0));
        assert!(!is_pod_available(&p, 5, 14_999));
        assert!(is_pod_available(&p, 5, 15_000));
        assert!(is_pod_active(&p));
        assert!(!is_pod_available(&Pod::default(), 0, 0));
    }
}
