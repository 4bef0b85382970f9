//! What the pod task publishes and reports: its worker state, the status a watcher sees,
//! the records of deletes and kills, the report; and the status as the API object holds it.

use std::net::IpAddr;
use std::time::Instant;

use podgrace_core::plan::ContainerRole;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_core::rules::podstatus::{
    ContainerState as ApiContainerState, ContainerStatus as ApiContainerStatus, Terminated,
};
use podgrace_core::rules::runtime::{containerd_exit_reason, Signal};

use super::{Ctr, Pod};
use crate::events::Event;
use crate::kubelet::kill::KillRecord;
use crate::kubelet::object::{DeleteApi, ObjectEvent};
use crate::probes::ProbeKind;
use crate::process::ExitStatus;
use crate::runtime::RuntimeService;

/// The pod task's lifecycle as a watcher sees it: the pod worker's own state, not Kubernetes'
/// `status.phase` (Pending, Running, Succeeded, Failed), which the API object
/// ([`crate::kubelet::object`]) keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodWorkerState {
    /// Sandbox and containers are being started.
    Starting,
    /// Past start-up: the pod worker supervises the containers (restarts, probes), as `SyncPod`.
    Running,
    /// Termination started (the deletion timestamp is set, or the kubelet is killing it).
    Terminating,
    /// Every container has stopped and the sandbox is gone.
    Terminated,
}

/// What the kubelet did with a delete (or an eviction) that came while the pod was already
/// terminating, or that started the termination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteKubelet {
    /// It started the termination, with this effective grace (seconds).
    Started {
        /// The effective grace period, in seconds.
        grace_period_seconds: i64,
    },
    /// It came before the kill began: the kill starts with this grace (seconds).
    BeforeKill {
        /// The grace period the kill starts with, in seconds.
        grace_period_seconds: i64,
    },
    /// Not shorter than the grace in flight: nothing changed.
    NotShorter,
    /// Shorter, but the kill in flight keeps its grace ([`InFlightEffect::Ignored`]).
    Ignored {
        /// The grace the kill in flight keeps, in seconds.
        kept_seconds: i64,
        /// The shorter grace recorded for later, in seconds.
        recorded_seconds: i64,
    },
    /// 1.18–1.21, the object removed: the pod killer killed every container again.
    KilledAgain,
    /// No update reached the kubelet (the API changed nothing, or the object was gone).
    Nothing,
}

/// One `kubectl delete` of the run: when, with which flags, what the API server and the
/// kubelet did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteRecord {
    /// When the delete was made (monotonic).
    pub at: Instant,
    /// `--grace-period`, `--force`, `--now` as given.
    pub flags: KubectlDeleteFlags,
    /// What the API server made of it (`BeforeDelete`).
    pub api: DeleteApi,
    /// What the pod worker did with it.
    pub kubelet: DeleteKubelet,
}

/// What the pod task publishes on every change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStatus {
    /// The pod worker's state (not `status.phase`).
    pub phase: PodWorkerState,
    /// The pod IP (`None` before the sandbox exists, or on the host network).
    pub pod_ip: Option<IpAddr>,
    /// Pod `Ready` condition: every running container ready.
    pub ready: bool,
    /// When termination started (EndpointSlice `terminating` from then on), monotonic.
    pub terminating_since: Option<Instant>,
    /// The effective grace period of the termination, seconds.
    pub grace_period_seconds: Option<i64>,
    /// The last delete and what came of it.
    pub last_delete: Option<DeleteRecord>,
    /// The status function of a kill by the eviction or the node shutdown manager, once one
    /// has begun: the API status takes its condition at once and its phase, reason and
    /// message when every container has stopped.
    pub killed: Option<super::KillStatus>,
    /// The running containers' runtime ids, by container name (their cgroups hold their
    /// memory statistics).
    pub container_ids: Vec<(String, String)>,
}

/// Why a container was terminated (the run JSON contract's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminationReason {
    /// The pod was deleted (`kubectl delete`, or the object removed).
    Deleted,
    /// The eviction manager evicted the pod.
    Evicted,
    /// A failed liveness probe (`Container C failed liveness probe, will be restarted`).
    LivenessProbe,
    /// A failed startup probe (`Container C failed startup probe, will be restarted`).
    StartupProbe,
    /// The container's definition (its image) changed: killed to be started again.
    DefinitionChanged,
    /// The node shutdown manager killed the pod.
    NodeShutdown,
}

impl TerminationReason {
    /// `Deleted`, `Evicted`, `LivenessProbe`, `StartupProbe`, `DefinitionChanged` or
    /// `NodeShutdown`.
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationReason::Deleted => "Deleted",
            TerminationReason::Evicted => "Evicted",
            TerminationReason::LivenessProbe => "LivenessProbe",
            TerminationReason::StartupProbe => "StartupProbe",
            TerminationReason::DefinitionChanged => "DefinitionChanged",
            TerminationReason::NodeShutdown => "NodeShutdown",
        }
    }
}

/// One `killContainer` of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    /// Why it was killed.
    pub reason: TerminationReason,
    /// The runtime id of the container instance killed.
    pub container_id: String,
    /// The stop signal sent first (the container's `lifecycle.stopSignal`, the image's, or SIGTERM).
    pub stop_signal: Signal,
    /// What the kill did: its grace, the preStop hook, the `StopContainer` timeout, when each came.
    pub kill: KillRecord,
    /// Who killed: the pod worker, or (1.18–1.21, after the object was removed) the pod killer
    /// beside it.
    pub killer: Killer,
}

/// The part of the kubelet that made a kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Killer {
    /// The pod worker's `SyncTerminatingPod` (or `SyncPod` for a probe kill).
    PodWorker,
    /// 1.18–1.21's pod killer (`HandlePodRemoves` → `deletePod` → `podKiller`).
    PodKiller,
}

impl Killer {
    /// `podWorker` or `podKiller`.
    pub fn as_str(self) -> &'static str {
        match self {
            Killer::PodWorker => "podWorker",
            Killer::PodKiller => "podKiller",
        }
    }
}

/// One container over the whole run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerReport {
    /// The container's name in the spec.
    pub name: String,
    /// Init, sidecar (restartable init) or regular container.
    pub role: ContainerRole,
    /// Runtime ids of every instance, in start order (restarts add more).
    pub ids: Vec<String>,
    /// `restartCount`: instances started after the first.
    pub restarts: u32,
    /// Every `killContainer` of it, in order.
    pub terminations: Vec<Termination>,
    /// Every exit of an instance while the pod was not terminating (crashes, completions,
    /// probe kills), with when it happened.
    pub exits: Vec<(Instant, ExitStatus)>,
}

/// What a pod run did, for the report.
#[derive(Debug, Clone)]
pub struct PodReport {
    /// `namespace/name`.
    pub pod: String,
    /// When the pod task started (the report's t = 0).
    pub started: Instant,
    /// The pod IP (`None` on the host network or when no sandbox was made).
    pub pod_ip: Option<IpAddr>,
    /// The runtime's sandbox id (stopped, not removed).
    pub sandbox: Option<String>,
    /// Every container of the pod, in spec order.
    pub containers: Vec<ContainerReport>,
    /// The kubelet's events of the run, in order.
    pub events: Vec<Event>,
    /// The API object's watch events (deletes, the terminal status, the final delete).
    pub object: Vec<ObjectEvent>,
    /// Every delete of the run, in order.
    pub deletes: Vec<DeleteRecord>,
}

impl<R: RuntimeService + 'static> Pod<R> {
    pub(super) fn publish(&self, phase: PodWorkerState) {
        // The Ready condition: every running container (sidecars and mains) is ready, which
        // needs its readiness probe to succeed when it has one. It is kept up to date during
        // termination too (readiness probes keep running), which drives EndpointSlice serving.
        let ready = phase != PodWorkerState::Starting
            && phase != PodWorkerState::Terminated
            && self
                .ctrs
                .iter()
                .filter(|c| c.plan.role != ContainerRole::Init)
                .all(|c| {
                    c.running
                        && c.probes
                            .iter()
                            .filter(|p| p.kind() == ProbeKind::Readiness)
                            .all(|p| p.status().is_ready())
                });
        let terminating_since = self.status.borrow().terminating_since;
        self.status.send_replace(PodStatus {
            phase,
            pod_ip: self.pod_ip,
            ready,
            terminating_since,
            grace_period_seconds: (self.worker.grace_period > 0)
                .then_some(self.worker.grace_period),
            last_delete: self.deletes.last().copied(),
            killed: self.killed.clone(),
            container_ids: self
                .ctrs
                .iter()
                .filter(|c| c.running)
                .filter_map(|c| Some((c.plan.name.clone(), c.id.clone()?)))
                .collect(),
        });
    }

    /// The kubelet's container statuses as the API would hold them: init containers (native
    /// sidecars and regular ones), then the regular containers; running ones with their
    /// readiness, exited ones with their exit code and containerd's reason.
    pub(super) fn api_statuses(&self) -> (Vec<ApiContainerStatus>, Vec<ApiContainerStatus>) {
        let n_init = self.plan.init_containers.len();
        let status = |c: &Ctr| {
            let ready = c.running
                && c.probes
                    .iter()
                    .filter(|p| p.kind() == ProbeKind::Readiness)
                    .all(|p| p.status().is_ready());
            let state = match (c.running, c.exit) {
                (true, _) => ApiContainerState::Running,
                (false, Some(e)) => ApiContainerState::Terminated(Terminated {
                    exit_code: e.code(),
                    reason: containerd_exit_reason(e.code(), c.oom_killed).to_string(),
                    signal: 0,
                    finished_at_ms: None,
                }),
                (false, None) => ApiContainerState::Waiting {
                    reason: "ContainerCreating".into(),
                },
            };
            ApiContainerStatus {
                name: c.plan.name.clone(),
                state,
                last_terminated: None,
                ready,
                started: Some(c.running),
                restart_count: i32::try_from(c.attempts.saturating_sub(1)).unwrap_or(i32::MAX),
            }
        };
        let init = self.ctrs[..n_init].iter().map(status).collect();
        let main = self.ctrs[n_init..].iter().map(status).collect();
        (init, main)
    }

    /// Keeps the API object's view of Ready and the container states current.
    pub(super) fn observe_status(&mut self) {
        let ready = self.status.borrow().ready;
        let (init, main) = self.api_statuses();
        self.api.observe(ready, init, main);
    }

    /// Publishes the current lifecycle phase again (with the last delete).
    pub(super) fn publish_current(&self) {
        let phase = self.status.borrow().phase.clone();
        self.publish(phase);
    }
}
