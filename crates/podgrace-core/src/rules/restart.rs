//! Whether the kubelet restarts a container after it ended: the pod's `restartPolicy` × the
//! container's role × its exit code, and after a probe kill.
//!
//! Source: `pkg/kubelet/container/helpers.go` `ShouldContainerBeRestarted` (regular
//! containers), `pkg/kubelet/kuberuntime/kuberuntime_container.go`
//! `computeInitContainerActions` (init containers and native sidecars) and
//! `kuberuntime_manager.go` `computePodActions` (a liveness or startup failure kills the
//! container and restarts it when `shouldRestartOnFailure`, whatever its exit code). Holds for
//! Kubernetes 1.18 to 1.37 with default feature gates (`ContainerRestartRules`, alpha 1.34 and
//! off by default, adds per-container rules; not modelled).

use crate::plan::{ContainerRole, RestartPolicy};

/// The latest status of a container as `ShouldContainerBeRestarted` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastState {
    /// No status at all (never started, or every instance garbage-collected).
    NoHistory,
    /// `ContainerStateRunning`.
    Running,
    /// `ContainerStateCreated` (created, not started).
    Created,
    /// `ContainerStateUnknown`.
    Unknown,
    /// `ContainerStateExited` with this exit code.
    Exited(i32),
}

/// `ShouldContainerBeRestarted` for a regular container: never once the pod is deleted
/// (`deletion_timestamp_set`); always when it has no history, or is created or unknown; never
/// while running; after an exit, per `restartPolicy`: `Never` no, `OnFailure` unless it exited
/// 0, `Always` yes.
pub fn should_container_be_restarted(
    policy: RestartPolicy,
    deletion_timestamp_set: bool,
    state: LastState,
) -> bool {
    if deletion_timestamp_set {
        return false;
    }
    match state {
        LastState::NoHistory | LastState::Created | LastState::Unknown => true,
        LastState::Running => false,
        LastState::Exited(code) => match policy {
            RestartPolicy::Never => false,
            RestartPolicy::OnFailure => code != 0,
            RestartPolicy::Always => true,
        },
    }
}

/// What the kubelet does after a container of a pod that is not terminating exited with
/// `exit_code` (128 for a start error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterExit {
    /// Start it again (after the crash back-off).
    Restart,
    /// Leave it exited.
    Stay,
    /// A regular init container failed under `restartPolicy: Never`: the pod fails, nothing
    /// more starts and what runs is killed (`changes.KillPod`).
    FailPod,
}

/// The decision after an exit of a container with `role` under `policy`. `probe_killed`: the
/// kubelet killed it after a liveness or startup failure, which restarts it unless the pod
/// never restarts, whatever its exit code (`computePodActions`: `shouldRestartOnFailure`).
/// Native sidecars always restart; a regular init container reruns after a failure unless the
/// policy is `Never`, which fails the pod; a regular container follows
/// [`should_container_be_restarted`].
pub fn after_exit(
    role: ContainerRole,
    policy: RestartPolicy,
    exit_code: i32,
    probe_killed: bool,
) -> AfterExit {
    let restart = |yes: bool| {
        if yes {
            AfterExit::Restart
        } else {
            AfterExit::Stay
        }
    };
    if probe_killed && policy != RestartPolicy::Never {
        return AfterExit::Restart;
    }
    match role {
        ContainerRole::Sidecar => AfterExit::Restart,
        ContainerRole::Init if exit_code == 0 => AfterExit::Stay,
        ContainerRole::Init if policy == RestartPolicy::Never => AfterExit::FailPod,
        ContainerRole::Init => AfterExit::Restart,
        ContainerRole::Main => restart(should_container_be_restarted(
            policy,
            false,
            LastState::Exited(exit_code),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_kill_restarts_whatever_the_exit_code_unless_never() {
        for code in [0, 137] {
            for (policy, want) in [
                (RestartPolicy::Always, AfterExit::Restart),
                (RestartPolicy::OnFailure, AfterExit::Restart),
                (RestartPolicy::Never, AfterExit::Stay),
            ] {
                assert_eq!(after_exit(ContainerRole::Main, policy, code, true), want);
            }
        }
    }

    #[test]
    fn init_containers_rerun_on_failure_or_fail_the_pod_under_never() {
        let init = |p, c| after_exit(ContainerRole::Init, p, c, false);
        assert_eq!(init(RestartPolicy::Always, 1), AfterExit::Restart);
        assert_eq!(init(RestartPolicy::OnFailure, 1), AfterExit::Restart);
        assert_eq!(init(RestartPolicy::Never, 1), AfterExit::FailPod);
        assert_eq!(init(RestartPolicy::Never, 0), AfterExit::Stay);
        for p in [RestartPolicy::Always, RestartPolicy::Never] {
            assert_eq!(
                after_exit(ContainerRole::Sidecar, p, 0, false),
                AfterExit::Restart
            );
        }
    }
}
