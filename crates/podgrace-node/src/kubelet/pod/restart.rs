//! A container exited: the evented PLEG's event, the restart decision under
//! `restartPolicy` with the crash back-off, the pod's completion or failure.
//!
//! Upstream: `pkg/kubelet/kuberuntime/kuberuntime_manager.go` (`computePodActions`,
//! `doBackOff`).

use std::time::{Duration, Instant};

use podgrace_core::plan::ContainerRole;
use podgrace_core::rules::podworker::{PodUpdate, UpdateType};
use podgrace_core::rules::restart;

use super::status::{PodWorkerState, TerminationReason};
use super::Pod;
use crate::events::{message, reason};
use crate::probes::ContainerRun as ProbeRun;
use crate::process::ExitStatus;
use crate::runtime::{CallContext, ContainerEventKind, RuntimeService};

impl<R: RuntimeService + 'static> Pod<R> {
    /// Re-reads the runtime's view of every container instance.
    pub(super) async fn refresh_states(&mut self) {
        let ctx = CallContext::background();
        for c in &mut self.ctrs {
            if let Some(id) = &c.id {
                if let Ok(st) = self.rt.container_status(&ctx, id).await {
                    c.running = st.state == crate::runtime::ContainerState::Running;
                    if st.exit.is_some() {
                        c.exit = st.exit;
                        c.oom_killed = st.reason.as_deref() == Some("OOMKilled");
                    }
                }
            }
        }
    }

    /// The evented PLEG: a container of this pod started or stopped.
    pub(super) fn container_event(&mut self, ev: crate::runtime::ContainerEvent) {
        let Some(i) = self
            .ctrs
            .iter()
            .position(|c| c.id.as_deref() == Some(ev.container_id.as_str()))
        else {
            return;
        };
        let ContainerEventKind::Stopped {
            at,
            status,
            oom_killed,
        } = ev.kind
        else {
            return;
        };
        let terminating = self.terminating();
        let c = &mut self.ctrs[i];
        c.running = false;
        c.exit = Some(status);
        c.oom_killed = oom_killed;
        if !terminating {
            c.report.exits.push((at, status));
        }
        for p in &c.probes {
            p.set_container(Some(ProbeRun {
                container_id: ev.container_id.clone(),
                started_at: tokio::time::Instant::now(),
                running: false,
            }));
        }
        if c.plan.role == ContainerRole::Init && status.code() == 0 {
            c.completed = true;
        }
        if terminating {
            self.publish(PodWorkerState::Terminating);
            return;
        }
        self.after_exit(i, at, status);
    }

    /// An instance of container `i` ended at `at` with `status`: it exited, or the runtime
    /// could not create or start it (`StartError`, exit code 128). Decides, as
    /// `computePodActions` and `doBackOff` (`pkg/kubelet/kuberuntime/kuberuntime_manager.go`)
    /// do, whether it restarts under `restartPolicy` and after which back-off (recording
    /// `BackOff` while it waits), whether the pod has failed or completed.
    pub(super) fn after_exit(&mut self, i: usize, at: Instant, status: ExitStatus) {
        let policy = self.plan.restart_policy;
        let c = &mut self.ctrs[i];
        let restart = match restart::after_exit(c.plan.role, policy, status.code(), c.probe_killed)
        {
            restart::AfterExit::Restart => true,
            restart::AfterExit::Stay => false,
            restart::AfterExit::FailPod => {
                // The pod fails: nothing more starts, the rest is terminated.
                self.failed = true;
                self.command_kill_failed();
                return;
            }
        };
        if restart {
            let finished_ms = u64::try_from(at.saturating_duration_since(c.epoch).as_millis())
                .unwrap_or(u64::MAX);
            let delay = Duration::from_millis(c.back_off.restart_after_exit(finished_ms));
            if !delay.is_zero() {
                self.events.warning(
                    reason::BACK_OFF,
                    Some(&c.plan.name),
                    message::back_off(&c.plan.name, &self.kubelet_name),
                );
            }
            c.restart_at = Some(Instant::now() + delay);
            c.want_start = true;
        }
        if self.completed() {
            // Every main container has exited for good: the pod is Succeeded or Failed, and the
            // kubelet stops what still runs (native sidecars) like a terminating pod.
            let mut u = PodUpdate::new(
                UpdateType::SyncPodUpdate,
                Some(self.plan.termination_grace_period_seconds),
            );
            u.terminal_phase = true;
            self.enter_termination(u, TerminationReason::Deleted, false);
            return;
        }
        self.publish(PodWorkerState::Running);
    }

    /// Every main container has exited and none will restart.
    pub(super) fn completed(&self) -> bool {
        self.ctrs
            .iter()
            .filter(|c| c.plan.role == ContainerRole::Main)
            .all(|c| !c.running && c.exit.is_some() && !c.want_start)
    }

    /// A pod whose init container failed under `restartPolicy: Never` is Failed; its running
    /// sidecars are stopped like a terminating pod's.
    pub(super) fn command_kill_failed(&mut self) {
        let mut u = PodUpdate::new(
            UpdateType::SyncPodUpdate,
            Some(self.plan.termination_grace_period_seconds),
        );
        u.terminal_phase = true;
        self.enter_termination(u, TerminationReason::Deleted, false);
    }
}
