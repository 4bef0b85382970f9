//! The API server's side of a pod delete: `rest.BeforeDelete`, the pod strategy's
//! `CheckGracefulDelete`, `Store.Delete` with finalizers, and kubectl's delete flags.
//!
//! Times are whole seconds on one axis chosen by the caller (`now` is an argument; nothing here
//! reads a clock). `None` stands for a nil pointer in the upstream object.

/// The pod phase, as far as graceful deletion cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodPhase {
    /// No phase recorded yet (`""`).
    #[default]
    Unset,
    /// `Pending`: accepted, but not every container has started (scheduling, image pulls, init
    /// containers).
    Pending,
    /// `Running`: bound to a node, every container created, at least one running or restarting.
    Running,
    /// `Succeeded`: every container exited 0 and none will restart (terminal).
    Succeeded,
    /// `Failed`: every container terminated, at least one not with 0 (terminal).
    Failed,
    /// `Unknown`: the pod's state could not be read, typically its node is unreachable.
    Unknown,
}

impl PodPhase {
    /// Parses the API string (`""`, `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
    pub fn parse(s: &str) -> Option<PodPhase> {
        Some(match s {
            "" => PodPhase::Unset,
            "Pending" => PodPhase::Pending,
            "Running" => PodPhase::Running,
            "Succeeded" => PodPhase::Succeeded,
            "Failed" => PodPhase::Failed,
            "Unknown" => PodPhase::Unknown,
            _ => return None,
        })
    }

    /// The API string (`""` for [`PodPhase::Unset`]).
    pub fn as_str(self) -> &'static str {
        match self {
            PodPhase::Unset => "",
            PodPhase::Pending => "Pending",
            PodPhase::Running => "Running",
            PodPhase::Succeeded => "Succeeded",
            PodPhase::Failed => "Failed",
            PodPhase::Unknown => "Unknown",
        }
    }

    /// `true` for Succeeded and Failed.
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// What the pod strategy looks at when deciding on a graceful delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodForDelete {
    /// `spec.nodeName`; empty means unscheduled.
    pub node_name: String,
    /// `status.phase`: a pod in a terminal phase (Succeeded, Failed) is deleted at once (grace 0).
    pub phase: PodPhase,
    /// `spec.terminationGracePeriodSeconds`, seconds.
    pub termination_grace_period_seconds: Option<i64>,
}

/// `podStrategy.CheckGracefulDelete`: the grace period a pod delete gets.
///
/// Returns `None` when `options` is absent (no graceful delete: the caller deletes at once), else
/// the period in seconds to write into `options.gracePeriodSeconds`: the request's value, else
/// TGPS, else 0; 0 for an unscheduled pod or a terminal phase; a negative value becomes 1.
///
/// Source: `pkg/registry/core/pod/strategy.go` `CheckGracefulDelete`; unchanged since about
/// v1.5, with the negative clamp since v1.22. Holds for 1.18 to 1.37.
pub fn check_graceful_delete(
    pod: &PodForDelete,
    options_present: bool,
    options_grace_period_seconds: Option<i64>,
) -> Option<i64> {
    if !options_present {
        return None;
    }
    let mut period = options_grace_period_seconds
        .or(pod.termination_grace_period_seconds)
        .unwrap_or(0);
    if pod.node_name.is_empty() || pod.phase.is_terminal() {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    Some(period)
}

/// The deletion state already stored on an object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeletionState {
    /// `metadata.deletionTimestamp`, seconds on the caller's axis; `None` if not deleting.
    pub deletion_timestamp: Option<i64>,
    /// `metadata.deletionGracePeriodSeconds`, seconds.
    pub deletion_grace_period_seconds: Option<i64>,
}

/// What `BeforeDelete` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeforeDeleteOutcome {
    /// The delete is graceful: the object gets (new) DT/DGPS and stays until its grace ends.
    pub graceful: bool,
    /// A graceful delete is already under way with an equal or shorter period: nothing changes.
    pub graceful_pending: bool,
    /// The object's deletion state afterwards.
    pub object: DeletionState,
    /// `options.gracePeriodSeconds` afterwards, seconds.
    pub options_grace_period_seconds: Option<i64>,
}

/// `rest.BeforeDelete` for a strategy: decides between an immediate, a graceful and a pending
/// delete, and writes DT/DGPS.
///
/// * `now`: the current time on the caller's axis, whole seconds (see [`before_delete_ms`] for
///   the same rule with the clock's milliseconds).
/// * `check_graceful`: the strategy's `CheckGracefulDelete`, given the (clamped) requested
///   period; `None` from it means "not graceful". `supports_graceful == false` models a strategy
///   without graceful-delete support.
/// * `clamp_dt_to_now`: since apiserver v0.33 (Kubernetes 1.33, PR #122646) a shortened
///   deletion timestamp is not moved into the past; before that it could be (pass
///   [`clamps_deletion_timestamp`] for a version).
///
/// Source: `staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go` `BeforeDelete`
/// (HEAD 2026-07, Kubernetes 1.37 development). Negative request values became 1 in v1.22.
pub fn before_delete(
    existing: DeletionState,
    options_grace_period_seconds: Option<i64>,
    now: i64,
    supports_graceful: bool,
    clamp_dt_to_now: bool,
    check_graceful: impl FnOnce(Option<i64>) -> Option<i64>,
) -> BeforeDeleteOutcome {
    before_delete_ms(
        existing,
        options_grace_period_seconds,
        saturate(i128::from(now) * 1000),
        supports_graceful,
        clamp_dt_to_now,
        check_graceful,
    )
}

/// `metav1.Time` as the API stores and serves it: whole seconds, the fraction dropped
/// (`ProtoTime` keeps no nanoseconds; JSON is RFC 3339 without a fraction). `ms` is
/// milliseconds on the caller's axis; the result is seconds on the same axis, rounded down.
///
/// Source: `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/time_proto.go` `ProtoTime` and
/// `time.go` `MarshalJSON` (Kubernetes 1.18 to 1.37). The recorded 1.32 cluster shows it: a
/// delete at 09:12:53.24 with grace 5 got `deletionTimestamp: 2026-12-01T09:12:58Z`.
pub fn stored_time_seconds(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

/// [`before_delete`] with the clock's milliseconds: the API server computes a new deletion
/// timestamp as `now + grace` at full precision and stores it in whole seconds
/// ([`stored_time_seconds`]); the "not into the past" clamp compares the new timestamp with
/// `now_ms` at full precision. DT in [`DeletionState`] stays whole seconds on the axis whose
/// milliseconds are `now_ms`.
///
/// A second, shorter delete moves the stored DT back by the old grace and forward by the new:
/// `DT' = DT − DGPS + p`. Before 1.33 that may lie in the past (the recorded 1.32 cluster,
/// case c: `--grace-period=30` then `--grace-period=3` 2.3 s later gave DGPS 3 and a DT 27 s
/// earlier, in the past from 3 s after the first delete while the pod still showed
/// `Terminating`). From 1.33 a DT in the past becomes now, and a non-zero `p` becomes 1.
///
/// Source: as [`before_delete`].
pub fn before_delete_ms(
    existing: DeletionState,
    mut options_grace_period_seconds: Option<i64>,
    now_ms: i64,
    supports_graceful: bool,
    clamp_dt_to_now: bool,
    check_graceful: impl FnOnce(Option<i64>) -> Option<i64>,
) -> BeforeDeleteOutcome {
    let mut object = existing;
    if options_grace_period_seconds.is_some_and(|p| p < 0) {
        options_grace_period_seconds = Some(1);
    }
    if object.deletion_grace_period_seconds.is_some_and(|p| p < 0) {
        object.deletion_grace_period_seconds = Some(1);
    }
    let immediate = |object, opts| BeforeDeleteOutcome {
        graceful: false,
        graceful_pending: false,
        object,
        options_grace_period_seconds: opts,
    };
    if !supports_graceful {
        return immediate(object, options_grace_period_seconds);
    }
    if let Some(old_dt) = object.deletion_timestamp {
        let existing_period = match object.deletion_grace_period_seconds {
            None | Some(0) => return immediate(object, options_grace_period_seconds),
            Some(p) => p,
        };
        let pending = |object, opts| BeforeDeleteOutcome {
            graceful: false,
            graceful_pending: true,
            object,
            options_grace_period_seconds: opts,
        };
        let Some(requested) = options_grace_period_seconds else {
            return pending(object, Some(existing_period));
        };
        if requested >= existing_period {
            return pending(object, options_grace_period_seconds);
        }
        let mut new_dt = old_dt
            .saturating_sub(existing_period)
            .saturating_add(requested);
        let mut new_period = requested;
        if clamp_dt_to_now && i128::from(new_dt) * 1000 < i128::from(now_ms) {
            new_dt = stored_time_seconds(now_ms);
            if requested != 0 {
                new_period = 1;
            }
        }
        object.deletion_timestamp = Some(new_dt);
        object.deletion_grace_period_seconds = Some(new_period);
        return BeforeDeleteOutcome {
            graceful: true,
            graceful_pending: false,
            object,
            options_grace_period_seconds,
        };
    }
    match check_graceful(options_grace_period_seconds) {
        None => immediate(object, options_grace_period_seconds),
        Some(period) => {
            // now + period at full precision, stored in whole seconds (exact in i128).
            let dt = (i128::from(now_ms) + i128::from(period) * 1000).div_euclid(1000);
            object.deletion_timestamp = Some(saturate(dt));
            object.deletion_grace_period_seconds = Some(period);
            BeforeDeleteOutcome {
                graceful: true,
                graceful_pending: false,
                object,
                options_grace_period_seconds: Some(period),
            }
        }
    }
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// The release from which a shortened deletion timestamp no longer moves into the past (PR #122646).
pub const CLAMPED_DELETION_TIMESTAMP_SINCE: crate::KubeVersion = crate::KubeVersion::new(1, 33);

/// Whether `BeforeDelete` keeps a shortened deletion timestamp from moving into the past:
/// `true` from Kubernetes 1.33 (PR #122646, "prevent deletionTimestamp from moving into the
/// past", merged for 1.33; the recorded 1.32 cluster still moved it into the past).
pub fn clamps_deletion_timestamp(version: crate::KubeVersion) -> bool {
    version >= CLAMPED_DELETION_TIMESTAMP_SINCE
}

/// A pod stored in the registry, as `Store.Delete` sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredPod {
    /// The fields of the pod graceful deletion looks at.
    pub pod: PodForDelete,
    /// `metadata.deletionTimestamp` and `deletionGracePeriodSeconds` as stored.
    pub deletion: DeletionState,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
}

/// What `Store.Delete` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreDeleteOutcome {
    /// The object was removed from storage by this call.
    pub was_deleted: bool,
    /// The object as stored afterwards; `None` when it is gone.
    pub object: Option<StoredPod>,
    /// The object as the graceful-deletion update wrote it, when one was written: the
    /// `MODIFIED` watch event. A graceful delete with grace 0 writes it and then removes the
    /// object, so a watcher sees `MODIFIED` (DT set, DGPS 0) and then `DELETED` (recorded on
    /// 1.32: the force delete of case b, +78 ms and +88 ms; the kubelet's final delete of case
    /// a, +5811 ms and +5816 ms).
    pub written: Option<StoredPod>,
    /// The BeforeDelete decision that led here.
    pub decision: BeforeDeleteOutcome,
}

/// `Store.Delete` for a pod: BeforeDelete with the pod strategy, then finalizers decide whether
/// the object stays. A graceful delete with grace 0 and no finalizer removes the object at once
/// (the "force delete"). `options_present == false` is treated as grace 0 ("older consumers").
/// `now` is whole seconds; see [`store_delete_ms`].
///
/// Source: `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go` `Store.Delete`
/// and `updateForGracefulDeletionAndFinalizers` (HEAD 2026-07; Kubernetes 1.18 to 1.37; the DT
/// clamp depends on `clamp_dt_to_now`, see [`before_delete`]).
pub fn store_delete(
    stored: &StoredPod,
    options_present: bool,
    options_grace_period_seconds: Option<i64>,
    now: i64,
    clamp_dt_to_now: bool,
) -> StoreDeleteOutcome {
    store_delete_ms(
        stored,
        options_present,
        options_grace_period_seconds,
        saturate(i128::from(now) * 1000),
        clamp_dt_to_now,
    )
}

/// [`store_delete`] with the clock's milliseconds (`now_ms`); deletion timestamps stay whole
/// seconds as stored ([`before_delete_ms`]).
pub fn store_delete_ms(
    stored: &StoredPod,
    options_present: bool,
    options_grace_period_seconds: Option<i64>,
    now_ms: i64,
    clamp_dt_to_now: bool,
) -> StoreDeleteOutcome {
    let options = if options_present {
        options_grace_period_seconds
    } else {
        Some(0)
    };
    let decision = before_delete_ms(
        stored.deletion,
        options,
        now_ms,
        true,
        clamp_dt_to_now,
        |p| check_graceful_delete(&stored.pod, true, p),
    );
    if decision.graceful_pending {
        return StoreDeleteOutcome {
            was_deleted: false,
            object: Some(stored.clone()),
            written: None,
            decision,
        };
    }
    let has_finalizers = !stored.finalizers.is_empty();
    if decision.graceful || has_finalizers {
        let mut updated = stored.clone();
        if decision.graceful {
            updated.deletion = decision.object;
        } else {
            // Not graceful but finalizers pending: "marked as deleting".
            updated.deletion = DeletionState {
                deletion_timestamp: Some(stored_time_seconds(now_ms)),
                deletion_grace_period_seconds: Some(0),
            };
        }
        let grace = updated.deletion.deletion_grace_period_seconds.unwrap_or(0);
        if has_finalizers || grace > 0 {
            return StoreDeleteOutcome {
                was_deleted: false,
                object: Some(updated.clone()),
                written: Some(updated),
                decision,
            };
        }
        return StoreDeleteOutcome {
            was_deleted: true,
            object: None,
            written: Some(updated),
            decision,
        };
    }
    StoreDeleteOutcome {
        was_deleted: true,
        object: None,
        written: None,
        decision,
    }
}

/// The kubelet's final delete of a pod it has finished terminating: the status manager deletes
/// with `gracePeriodSeconds: 0` and the pod's UID as a precondition, once [`status manager's
/// conditions`](crate::rules::podstatus::can_be_deleted) hold. Through `BeforeDelete` that moves
/// the deletion timestamp back by the old grace (`DT − DGPS + 0`; from 1.33 not before now),
/// writes DGPS 0 (a `MODIFIED` event) and removes the object (`DELETED`). `now_ms` as in
/// [`store_delete_ms`].
///
/// Recorded on 1.32 (case a): DGPS 5 and DT 09:12:58Z, then about 0.6 s after phase Failed a
/// `MODIFIED` with DGPS 0 and DT 09:12:53Z (old − 5 s), then `DELETED` 5 ms later.
///
/// Source: `pkg/kubelet/status/status_manager.go` `syncPod` (the delete with
/// `GracePeriodSeconds: new(int64)` and `NewUIDPreconditions`) and the API server's
/// [`store_delete_ms`]; Kubernetes 1.18 to 1.37.
pub fn kubelet_final_delete(
    stored: &StoredPod,
    now_ms: i64,
    version: crate::KubeVersion,
) -> StoreDeleteOutcome {
    store_delete_ms(
        stored,
        true,
        Some(0),
        now_ms,
        clamps_deletion_timestamp(version),
    )
}

/// `metadata.deletionTimestamp` (whole seconds on a Unix axis) as the API prints it: RFC 3339
/// in UTC without a fraction (`2026-12-01T09:12:58Z`). Times before 1970 or beyond the year
/// 9999 are clamped to those bounds, as no API object holds them.
///
/// Source: `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/time.go` `MarshalJSON`
/// (`RFC3339` layout, UTC).
pub fn format_timestamp(unix_seconds: i64) -> String {
    const MAX: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    let s = u64::try_from(unix_seconds.clamp(0, MAX)).unwrap_or(0);
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `ShouldDeleteDuringUpdate`: an update that leaves an object without finalizers deletes it if
/// its deletion timestamp is set and its DGPS is nil or 0.
///
/// Source: `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`
/// `ShouldDeleteDuringUpdate` (Kubernetes 1.18 to 1.37).
pub fn should_delete_during_update(updated: &StoredPod) -> bool {
    updated.finalizers.is_empty()
        && updated.deletion.deletion_timestamp.is_some()
        && matches!(
            updated.deletion.deletion_grace_period_seconds,
            None | Some(0)
        )
}

/// The flags of `kubectl delete` that shape the grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubectlDeleteFlags {
    /// `--grace-period`, seconds; kubectl's default is -1 (use the object's own).
    pub grace_period: i64,
    /// `--force`.
    pub force: bool,
    /// `--now` (grace period 1).
    pub now: bool,
}

impl Default for KubectlDeleteFlags {
    fn default() -> Self {
        KubectlDeleteFlags {
            grace_period: -1,
            force: false,
            now: false,
        }
    }
}

/// The DeleteOptions kubectl sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubectlDeleteRequest {
    /// `gracePeriodSeconds`; `None` lets the server use TGPS.
    pub grace_period_seconds: Option<i64>,
    /// A warning kubectl prints to stderr, if any.
    pub warning: Option<&'static str>,
}

/// Invalid flag combinations, worded as kubectl words them (kubectl exits with code 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KubectlDeleteError {
    /// `kubectl delete --now` with `--grace-period` (`--now` means `--grace-period=1`).
    #[error("--now and --grace-period cannot be specified together")]
    NowWithGracePeriod,
    /// `kubectl delete --force` with a `--grace-period` above 0.
    #[error("--force and --grace-period greater than 0 cannot be specified together")]
    ForceWithGracePeriod,
}

/// The warning kubectl prints for a force delete.
pub const FORCE_DELETE_WARNING: &str = "Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely.";

/// Turns `kubectl delete` flags into DeleteOptions: `--now` is 1; `--grace-period=0` without
/// `--force` becomes 1; `--force` alone (or with 0) sends 0 and warns; the default -1 sends
/// nothing.
///
/// # Errors
/// [`KubectlDeleteError`] for `--now` with `--grace-period`, and `--force` with a positive
/// `--grace-period`.
///
/// Source: `staging/src/k8s.io/kubectl/pkg/cmd/delete/delete.go` `DeleteOptions.Complete`,
/// `Validate` and `RunDelete` (kubectl HEAD 2026-07; the same since about 1.18).
pub fn kubectl_delete(
    flags: KubectlDeleteFlags,
) -> Result<KubectlDeleteRequest, KubectlDeleteError> {
    let mut grace = flags.grace_period;
    if flags.now {
        if grace != -1 {
            return Err(KubectlDeleteError::NowWithGracePeriod);
        }
        grace = 1;
    }
    if grace == 0 && !flags.force {
        grace = 1;
    }
    if flags.force && grace < 0 {
        grace = 0;
    }
    if flags.force && grace > 0 {
        return Err(KubectlDeleteError::ForceWithGracePeriod);
    }
    Ok(KubectlDeleteRequest {
        grace_period_seconds: (grace >= 0).then_some(grace),
        warning: (flags.force && grace == 0).then_some(FORCE_DELETE_WARNING),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scheduled(tgps: i64) -> PodForDelete {
        PodForDelete {
            node_name: "node-1".into(),
            phase: PodPhase::Running,
            termination_grace_period_seconds: Some(tgps),
        }
    }

    #[test]
    fn plain_delete_uses_tgps_and_zero_tgps_force_deletes() {
        let s = StoredPod {
            pod: scheduled(30),
            ..Default::default()
        };
        let out = store_delete(&s, true, None, 100, true);
        assert!(!out.was_deleted);
        let d = out.object.unwrap().deletion;
        assert_eq!(d.deletion_timestamp, Some(130));
        assert_eq!(d.deletion_grace_period_seconds, Some(30));

        let zero = StoredPod {
            pod: scheduled(0),
            ..Default::default()
        };
        assert!(store_delete(&zero, true, None, 100, true).was_deleted);
    }

    #[test]
    fn a_second_delete_only_shortens() {
        let s = StoredPod {
            pod: scheduled(30),
            ..Default::default()
        };
        let first = store_delete(&s, true, None, 100, true).object.unwrap();
        let longer = store_delete(&first, true, Some(60), 105, true);
        assert!(longer.decision.graceful_pending);
        let shorter = store_delete(&first, true, Some(10), 105, true)
            .object
            .unwrap();
        assert_eq!(shorter.deletion.deletion_timestamp, Some(110));
        assert_eq!(shorter.deletion.deletion_grace_period_seconds, Some(10));
    }

    #[test]
    fn before_1_33_the_timestamp_may_move_into_the_past() {
        let existing = DeletionState {
            deletion_timestamp: Some(40),
            deletion_grace_period_seconds: Some(60),
        };
        let out = before_delete(existing, Some(50), 100, true, false, |_| None);
        assert_eq!(out.object.deletion_timestamp, Some(30));
        assert_eq!(out.object.deletion_grace_period_seconds, Some(50));
    }
}
