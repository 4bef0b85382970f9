//! The status the kubelet writes for a pod: container states, the pod phase computed from them
//! (`getPhase`), and when the status manager may make its final delete.
//!
//! What a real 1.32 node recorded (`shared/cases/real-cluster-1.32.md`): while a deleted pod
//! terminates its phase stays `Running` and its Ready condition `True`; once every container
//! has stopped the kubelet reports phase `Failed` (a container exited 137, reason `Error`) or
//! `Succeeded` (all exited 0, reason `Completed`), whatever the pod's restartPolicy; about
//! 0.6 s later (0.49–0.77 s over the recorded runs) the status manager deletes the object with
//! grace 0 ([`crate::rules::apiserver::kubelet_final_delete`]).
//!
//! Source: `pkg/kubelet/kubelet_pods.go` (`getPhase`, `generateAPIPodStatus`) and
//! `pkg/kubelet/status/status_manager.go` (`canBeDeleted`, `syncPod`).

use crate::plan::RestartPolicy;
use crate::rules::apiserver::PodPhase;
use crate::KubeVersion;

/// The first release in which the kubelet gives a pod it has finished terminating a terminal
/// phase whatever its restartPolicy (`getPhase`'s `podIsTerminal`), and in which the status
/// manager waits for that phase before its final delete. Before it, a deleted pod with
/// restartPolicy Always kept phase `Running` until the object was gone.
///
/// PR #115331 (KEP-3329's "terminal phase before deletion"), in the 1.27 release; the release
/// is taken from the PR's milestone as remembered, not re-read here (confidence: medium-high).
pub const TERMINAL_PHASE_BEFORE_DELETE_SINCE: KubeVersion = KubeVersion::new(1, 27);

/// A terminated container state (`ContainerStateTerminated`). Times are milliseconds on the
/// caller's axis.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Terminated {
    /// `exitCode`: the process's exit status, 128 + n for a signal n (137 after SIGKILL).
    pub exit_code: i32,
    /// `reason` (`Completed`, `Error`, `OOMKilled`, ... from the runtime); may be empty.
    pub reason: String,
    /// `signal`; 0 when not set.
    pub signal: i32,
    /// `finishedAt`, milliseconds; `None` when not set.
    pub finished_at_ms: Option<i64>,
}

/// A container's `state`: one of waiting, running or terminated, or none of them set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ContainerState {
    /// No field of the state is set (a status the kubelet has not filled in yet).
    #[default]
    Unset,
    /// `waiting` with its `reason` (may be empty; `ContainerCreating`, `CrashLoopBackOff`, ...).
    Waiting {
        /// The `waiting.reason`.
        reason: String,
    },
    /// `running`: the container's process was started and has not exited.
    Running,
    /// `terminated`, with its exit code, reason, signal and finish time.
    Terminated(Terminated),
}

/// One entry of `status.containerStatuses` or `status.initContainerStatuses`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerStatus {
    /// The container's name from the pod spec.
    pub name: String,
    /// The current `state`.
    pub state: ContainerState,
    /// `lastState.terminated`, if set.
    pub last_terminated: Option<Terminated>,
    /// `ready`: the readiness probe passed (or there is none) and the container is running.
    pub ready: bool,
    /// `started`; `None` when not set.
    pub started: Option<bool>,
    /// `restartCount`: how many times the kubelet restarted the container.
    pub restart_count: i32,
}

/// What `getPhase` looks at besides the container statuses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhaseSpec {
    /// `spec.restartPolicy` of the pod (Always, OnFailure, Never).
    pub restart_policy: RestartPolicy,
    /// `spec.initContainers` in order: name and whether it is a native sidecar
    /// (`restartPolicy: Always`).
    pub init_containers: Vec<(String, bool)>,
    /// `spec.containers` names, in order.
    pub containers: Vec<String>,
    /// A static pod (from a file or URL): never given a terminal phase by `podIsTerminal`.
    pub static_pod: bool,
}

/// `getPhase`: the pod phase from its spec and container statuses (`statuses` holds init and
/// regular containers, found by name).
///
/// * A regular init container that failed makes the pod `Failed` under restartPolicy Never;
///   one still to run or running keeps it `Pending`; so does a native sidecar not started yet
///   while the pod has not initialized (`pod_has_initialized`).
/// * Any regular container waiting without an earlier termination: `Pending`. All started and
///   one running: `Running`.
/// * All stopped: with `pod_is_terminal` (the kubelet has finished terminating the pod; from
///   [`TERMINAL_PHASE_BEFORE_DELETE_SINCE`]) `Succeeded` if every regular container exited 0,
///   else `Failed`, whatever the restartPolicy (not for static pods); otherwise Always →
///   `Running` (restarting), all exited 0 → `Succeeded`, Never → `Failed`, OnFailure →
///   `Running`.
///
/// The alpha gates `ContainerRestartRules` and `RestartAllContainersOnContainerExits` (off by
/// default) are not modelled.
///
/// Source: `pkg/kubelet/kubelet_pods.go` `getPhase` (read at the 1.36 tree); native sidecars
/// from 1.28, `podIsTerminal` from 1.27. Vectors: `TestPodPhaseWithRestartAlways`,
/// `...Never`, `...OnFailure` and their init-container variants.
pub fn get_phase(
    spec: &PhaseSpec,
    statuses: &[ContainerStatus],
    pod_is_terminal: bool,
    pod_has_initialized: bool,
    version: KubeVersion,
) -> PodPhase {
    let pod_is_terminal = pod_is_terminal && version >= TERMINAL_PHASE_BEFORE_DELETE_SINCE;
    let find = |name: &str| statuses.iter().find(|s| s.name == name);
    let mut pending_regular_init = 0;
    let mut pending_restartable_init = 0;
    let mut failed_initialization = 0;
    for (name, restartable) in &spec.init_containers {
        if *restartable {
            continue;
        }
        let Some(st) = find(name) else {
            pending_regular_init += 1;
            continue;
        };
        match &st.state {
            ContainerState::Running => pending_regular_init += 1,
            ContainerState::Terminated(t) => {
                if t.exit_code != 0 {
                    failed_initialization += 1;
                }
            }
            ContainerState::Waiting { .. } => match &st.last_terminated {
                Some(last) => {
                    if last.exit_code != 0 {
                        failed_initialization += 1;
                    }
                }
                None => pending_regular_init += 1,
            },
            ContainerState::Unset => pending_regular_init += 1,
        }
    }
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for (name, restartable) in &spec.init_containers {
        if !*restartable {
            continue;
        }
        let Some(st) = find(name) else {
            unknown += 1;
            continue;
        };
        match &st.state {
            ContainerState::Running => {
                if st.started != Some(true) {
                    pending_restartable_init += 1;
                }
                running += 1;
            }
            // Terminated sidecars do not count for the phase.
            ContainerState::Terminated(_) => {}
            ContainerState::Waiting { .. } => {
                if st.last_terminated.is_none() {
                    pending_restartable_init += 1;
                    waiting += 1;
                }
            }
            ContainerState::Unset => {
                pending_restartable_init += 1;
                unknown += 1;
            }
        }
    }
    for name in &spec.containers {
        let Some(st) = find(name) else {
            unknown += 1;
            continue;
        };
        match &st.state {
            ContainerState::Running => running += 1,
            ContainerState::Terminated(t) => {
                stopped += 1;
                if t.exit_code == 0 {
                    succeeded += 1;
                }
            }
            ContainerState::Waiting { .. } => {
                if st.last_terminated.is_some() {
                    stopped += 1;
                } else {
                    waiting += 1;
                }
            }
            ContainerState::Unset => unknown += 1,
        }
    }
    if failed_initialization > 0 && spec.restart_policy == RestartPolicy::Never {
        return PodPhase::Failed;
    }
    if pending_regular_init > 0 || (pending_restartable_init > 0 && !pod_has_initialized) {
        return PodPhase::Pending;
    }
    if waiting > 0 {
        return PodPhase::Pending;
    }
    if running > 0 && unknown == 0 {
        return PodPhase::Running;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if pod_is_terminal && !spec.static_pod {
            return if stopped == succeeded {
                PodPhase::Succeeded
            } else {
                PodPhase::Failed
            };
        }
        return match spec.restart_policy {
            RestartPolicy::Always => PodPhase::Running,
            _ if stopped == succeeded => PodPhase::Succeeded,
            RestartPolicy::Never => PodPhase::Failed,
            RestartPolicy::OnFailure => PodPhase::Running,
        };
    }
    PodPhase::Pending
}

/// What the status function of a kubelet-initiated kill asks (`killPodNow`'s `statusFn`):
/// the eviction's `Failed`, `Evicted`, its message; the node shutdown's `Failed` unless the
/// pod had `Succeeded`, `Terminated`, its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillStatusFn<'a> {
    /// `status.reason` it sets.
    pub reason: &'a str,
    /// `status.message` it sets.
    pub message: &'a str,
}

/// The phase, reason and message of a pod the kubelet killed with a status function, once
/// every container has stopped: the status function's `Failed` (with its reason and
/// message) is cached by the status manager at the start of the kill (the API keeps
/// `Running` meanwhile: `mergePodStatus` holds a terminal phase back while containers run);
/// the final `generateAPIPodStatus` computes the phase again. Before 1.27 that phase is not
/// terminal for a restarting pod, so the cached `Failed` wins and its reason and message are
/// kept. From 1.27 (`podIsTerminal`) the phase of the stopped containers wins: `Succeeded`
/// when every container exited 0, and then the reason and message are dropped (they are kept
/// only for an unchanged phase): an evicted pod whose app exits 0 on SIGTERM shows
/// `Completed`, not `Evicted` (kubernetes/kubernetes#118310); otherwise `Failed` with them.
/// `computed` is [`get_phase`] with `podIsTerminal`.
///
/// Upstream: `pkg/kubelet/kubelet_pods.go` `generateAPIPodStatus` (the three-way merge and
/// "preserve the reason and message which is associated with the phase"),
/// `pkg/kubelet/status/status_manager.go` (`mergePodStatus`), Kubernetes 1.22 to 1.36.
pub fn status_after_kill<'a>(
    computed: PodPhase,
    set: KillStatusFn<'a>,
    version: KubeVersion,
) -> (PodPhase, &'a str, &'a str) {
    if version >= TERMINAL_PHASE_BEFORE_DELETE_SINCE && computed == PodPhase::Succeeded {
        (PodPhase::Succeeded, "", "")
    } else {
        (PodPhase::Failed, set.reason, set.message)
    }
}

/// `canBeDeleted`: whether the status manager makes its final delete (grace 0) now. The object
/// must carry a deletion timestamp and not be a mirror pod; from
/// [`TERMINAL_PHASE_BEFORE_DELETE_SINCE`] its phase in the API must be terminal
/// (`api_phase`) and `SyncTerminatedPod` must have finished (`pod_is_finished`); before, the
/// pod's resources being reclaimed (`pod_is_finished`) was enough.
///
/// Source: `pkg/kubelet/status/status_manager.go` `canBeDeleted` (1.36 tree; the
/// `PodResourcesAreReclaimed` form before 1.27).
pub fn can_be_deleted(
    deletion_timestamp_set: bool,
    mirror_pod: bool,
    api_phase: PodPhase,
    pod_is_finished: bool,
    version: KubeVersion,
) -> bool {
    if !deletion_timestamp_set || mirror_pod {
        return false;
    }
    if version >= TERMINAL_PHASE_BEFORE_DELETE_SINCE && !api_phase.is_terminal() {
        return false;
    }
    pod_is_finished
}

/// How long after the kubelet has written a terminated pod's terminal status (phase `Failed`
/// or `Succeeded`) its status manager makes the final delete (grace 0), in milliseconds: the
/// recorded median, 650 ms.
///
/// Why there is a delay at all, in upstream's code: once `SyncTerminatingPod` has written the
/// status with every container stopped, the pod worker's next round (`TerminatedPod`) first
/// waits in `podCache.GetNewerThan(uid, lastSyncTime)` for a pod status newer than the end of
/// that sync, which only the generic PLEG's next relist provides (`genericPlegRelistPeriod`,
/// 1 s); then `SyncTerminatedPod` waits for the volumes to be unmounted (`WaitForUnmount`,
/// polled every 300 ms) and their paths removed (polled every 100 ms), removes the pod's
/// cgroup, and only then calls `statusManager.TerminatePod`, whose sync makes the delete
/// (`canBeDeleted`). So the delay lies anywhere in about (0, 1.4] s and depends on where the
/// relist timer stands. Sources: `pkg/kubelet/pod_workers.go` `podWorkerLoop`,
/// `pkg/kubelet/kubelet.go` `SyncTerminatedPod` and `genericPlegRelistPeriod`,
/// `pkg/kubelet/volumemanager/volume_manager.go` `podAttachAndMountRetryInterval`,
/// `pkg/kubelet/status/status_manager.go` `syncPod` (1.27 to the 1.36 tree).
///
/// Recorded on a real 1.32 node (`shared/cases/real-cluster-1.32.md`), terminal status to the
/// final delete: 490, 581 and 588 ms (case a, three runs), 769 ms (case c), 725 and 759 ms
/// (case d); [`FINAL_DELETE_RECORDED_MS`]. podgrace's kubelets have no periodic relist (their
/// runtime reports exits as events), so they wait this fixed delay instead: the order of the
/// writes and what a watcher sees between them follow the record, and the delay is the
/// recorded median rather than one drawn from the relist's phase.
pub const FINAL_DELETE_AFTER_TERMINAL_STATUS_MS: i64 = 650;

/// The recorded range of [`FINAL_DELETE_AFTER_TERMINAL_STATUS_MS`]: (min, median, max)
/// milliseconds over the six recorded runs.
pub const FINAL_DELETE_RECORDED_MS: (i64, i64, i64) = (490, 656, 769);

/// When the status manager makes its final delete of a pod whose terminal status was written
/// at `terminal_status_at_ms` (milliseconds on the caller's axis): that time plus
/// [`FINAL_DELETE_AFTER_TERMINAL_STATUS_MS`], from [`TERMINAL_PHASE_BEFORE_DELETE_SINCE`]
/// (before it the delete did not wait for a terminal phase written by the pod worker, and the
/// same PLEG wait followed the containers' stop; the same delay is used).
///
/// Source: as [`FINAL_DELETE_AFTER_TERMINAL_STATUS_MS`].
pub fn final_delete_at_ms(terminal_status_at_ms: i64) -> i64 {
    terminal_status_at_ms.saturating_add(FINAL_DELETE_AFTER_TERMINAL_STATUS_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_pod_keeps_its_reason_unless_its_containers_succeeded_from_1_27() {
        let set = KillStatusFn {
            reason: "Evicted",
            message: "m",
        };
        let v = |m| KubeVersion::new(1, m);
        assert_eq!(
            status_after_kill(PodPhase::Failed, set, v(32)),
            (PodPhase::Failed, "Evicted", "m")
        );
        assert_eq!(
            status_after_kill(PodPhase::Succeeded, set, v(32)),
            (PodPhase::Succeeded, "", "")
        );
        assert_eq!(
            status_after_kill(PodPhase::Running, set, v(26)),
            (PodPhase::Failed, "Evicted", "m")
        );
        assert_eq!(
            status_after_kill(PodPhase::Succeeded, set, v(26)),
            (PodPhase::Failed, "Evicted", "m")
        );
    }

    fn spec(policy: RestartPolicy) -> PhaseSpec {
        PhaseSpec {
            restart_policy: policy,
            containers: vec!["app".into()],
            ..Default::default()
        }
    }

    fn exited(code: i32) -> ContainerStatus {
        ContainerStatus {
            name: "app".into(),
            state: ContainerState::Terminated(Terminated {
                exit_code: code,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_deleted_pod_is_failed_or_succeeded_once_its_containers_stopped() {
        let v = KubeVersion::new(1, 32);
        let always = spec(RestartPolicy::Always);
        assert_eq!(
            get_phase(&always, &[exited(137)], true, true, v),
            PodPhase::Failed
        );
        assert_eq!(
            get_phase(&always, &[exited(0)], true, true, v),
            PodPhase::Succeeded
        );
        // Before 1.27 (and while not terminal) restartPolicy Always keeps it Running.
        let old = KubeVersion::new(1, 26);
        assert_eq!(
            get_phase(&always, &[exited(137)], true, true, old),
            PodPhase::Running
        );
        assert_eq!(
            get_phase(&always, &[exited(137)], false, true, v),
            PodPhase::Running
        );
    }

    #[test]
    fn the_final_delete_comes_the_recorded_median_after_the_terminal_status() {
        // The six recorded delays, terminal status to the final delete (ms).
        let recorded = [490, 581, 588, 725, 759, 769];
        let (min, median, max) = FINAL_DELETE_RECORDED_MS;
        assert_eq!((min, max), (recorded[0], recorded[5]));
        assert_eq!(median, (recorded[2] + recorded[3]) / 2);
        let d = final_delete_at_ms(5223) - 5223;
        assert!((min..=max).contains(&d), "{d}");
        assert!((d - median).abs() <= 10, "{d}");
        // Case a: Failed at +5223 ms, the final delete recorded at +5811 ms.
        assert!((final_delete_at_ms(5223) - 5811).abs() <= 100);
        assert_eq!(final_delete_at_ms(i64::MAX), i64::MAX);
    }

    #[test]
    fn the_final_delete_waits_for_a_terminal_phase_from_1_27() {
        let v = KubeVersion::new(1, 32);
        assert!(!can_be_deleted(true, false, PodPhase::Running, true, v));
        assert!(can_be_deleted(true, false, PodPhase::Failed, true, v));
        assert!(!can_be_deleted(true, false, PodPhase::Failed, false, v));
        assert!(!can_be_deleted(false, false, PodPhase::Failed, true, v));
        assert!(can_be_deleted(
            true,
            false,
            PodPhase::Running,
            true,
            KubeVersion::new(1, 26)
        ));
    }
}
