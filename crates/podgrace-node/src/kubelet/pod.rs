//! The pod task: one per pod, like the kubelet's pod worker goroutine (krustlet's per-pod
//! state machine). It starts the containers (init containers to completion, native sidecars
//! in order, then the main containers with their postStart hooks), restarts exited containers
//! as `restartPolicy` says with CrashLoopBackOff, and terminates the pod when told to.
//!
//! Every termination decision comes from `podgrace-core`:
//! * a delete goes through kubectl's flags and the API server's `BeforeDelete` /
//!   `CheckGracefulDelete` ([`apiserver::store_delete`]), which yields the DGPS;
//! * the pod worker's [`PodWorker`] turns DGPS or a kubelet override (eviction) into the
//!   effective grace, which can only shrink; a shorter one that arrives while the kill runs does
//!   not shorten it, as on every release from 1.22 (the running `SyncTerminatingPod` ignores
//!   its cancelled context; [`podworker::later_update_in_flight`]); on 1.18–1.21 a second
//!   delete that removes the object makes the pod killer kill again beside it;
//! * each container is killed by [`kill_container`] with the `killContainer` arithmetic and,
//!   when the pod has native sidecars, the termination ordering;
//! * the API object ([`ApiObject`]) records what an API server would show: the deletion
//!   timestamp and grace, phase Failed or Succeeded once the containers stopped, the kubelet's
//!   final delete with grace 0, the table row, the watch events.
//!
//! Upstream: `pkg/kubelet/pod_workers.go` (`UpdatePod`, `podWorkerLoop`), `kubelet.go`
//! (`SyncTerminatingPod`), `kuberuntime_manager.go` (`SyncPod`, `computePodActions`,
//! `doBackOff`), `kuberuntime_container.go` (`startContainer`, `killContainersWithSyncResult`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use podgrace_core::plan::{ContainerPlan, ContainerRole, PodPlan, RestartPolicy};
use podgrace_core::rules::apiserver::{self, KubectlDeleteError, KubectlDeleteFlags};
use podgrace_core::rules::backoff::Backoff;
use podgrace_core::rules::eviction;
use podgrace_core::rules::kuberuntime::{self, GraceFields, KillReason, OrderedContainer};
use podgrace_core::rules::podstatus::{
    self, ContainerState as ApiContainerState, ContainerStatus as ApiContainerStatus, Terminated,
};
use podgrace_core::rules::podworker::{
    self, InFlightEffect, KillPodOptions, LaterUpdate, PodUpdate, PodWorker, UpdateType,
};
use podgrace_core::rules::restart;
use podgrace_core::rules::runtime::{containerd_exit_reason, Signal};
use podgrace_core::KubeVersion;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use crate::events::{message, reason, Event, EventRecorder};
use crate::hooks::{format_pod, run_handler, HookTarget};
use crate::kubelet::cri::{new_uid, PodIdentity};
use crate::kubelet::kill::{kill_container, KillRecord, KillTarget, LateHooks};
use crate::kubelet::object::{ApiObject, DeleteApi, ObjectEvent};
use crate::kubelet::ordering::TerminationOrdering;
use crate::kubelet::spec::{container_spec, ContainerSpec, SpecError};
use crate::probes::{
    spawn_probe_worker, ContainerRun as ProbeRun, ProbeHandle, ProbeKind, ProbeState, ProbeStatus,
    RuntimeProber,
};
use crate::process::ExitStatus;
use crate::runtime::{CallContext, Canceller, ContainerEventKind, RuntimeError, RuntimeService};

/// The node name the local kubelet registers as (`spec.nodeName` of its pods).
pub const NODE_NAME: &str = "podgrace";

/// How the pod is run.
#[derive(Debug, Clone, Default)]
pub struct PodOptions {
    /// The Kubernetes version whose kubelet to reproduce.
    pub version: KubeVersion,
    /// `metadata.namespace` when the manifest gives none.
    pub namespace: String,
    /// Per-container stop signal overrides (`--stop-signal C=SIG`), by container name.
    pub stop_signal_overrides: BTreeMap<String, String>,
    /// Run every container as a plain host process even when namespaces are permitted.
    pub force_host: bool,
    /// The runtime runs images (containerd): a container without `command` runs the image's
    /// ENTRYPOINT. [`run_pod`] sets it from the runtime; [`check_pod`] reads it.
    pub images: bool,
    /// The pod's UID when it has one (serve: the API object's), used where the kubelet names
    /// the pod (`format.Pod`: `NAME_NAMESPACE(UID)` in BackOff and hook messages) and in the
    /// sandbox's metadata; `None` draws a fresh one (`podgrace run`).
    pub uid: Option<String>,
}

/// What can be asked of a running pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodCommand {
    /// `kubectl delete pod` with these flags (already validated).
    Delete(KubectlDeleteFlags),
    /// Node-pressure eviction at a hard or a soft threshold (`evictionMaxPodGracePeriod` in
    /// seconds for the soft one).
    Evict {
        hard: bool,
        eviction_max_pod_grace_period: i64,
    },
    /// The object's container images now (`spec.containers[*].image` and
    /// `spec.initContainers[*].image`, the fields a pod update may change), by container
    /// name: a running container whose image changed is killed with the pod's grace and
    /// started again with the new one (`computePodActions`: the container's hash changed).
    Images(BTreeMap<String, String>),
}

/// The pod's lifecycle as a watcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodPhase {
    /// Sandbox and containers are being started.
    Starting,
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
    Started { grace_period_seconds: i64 },
    /// It came before the kill began: the kill starts with this grace (seconds).
    BeforeKill { grace_period_seconds: i64 },
    /// Not shorter than the grace in flight: nothing changed.
    NotShorter,
    /// Shorter, but the kill in flight keeps its grace ([`InFlightEffect::Ignored`]).
    Ignored {
        kept_seconds: i64,
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
    pub at: Instant,
    pub flags: KubectlDeleteFlags,
    pub api: DeleteApi,
    pub kubelet: DeleteKubelet,
}

/// What the pod task publishes on every change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStatus {
    pub phase: PodPhase,
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
}

/// Why a container was terminated (the run JSON contract's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminationReason {
    Deleted,
    Evicted,
    LivenessProbe,
    StartupProbe,
    /// The container's definition (its image) changed: killed to be started again.
    DefinitionChanged,
}

impl TerminationReason {
    /// `Deleted`, `Evicted`, `LivenessProbe`, `StartupProbe` or `DefinitionChanged`.
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationReason::Deleted => "Deleted",
            TerminationReason::Evicted => "Evicted",
            TerminationReason::LivenessProbe => "LivenessProbe",
            TerminationReason::StartupProbe => "StartupProbe",
            TerminationReason::DefinitionChanged => "DefinitionChanged",
        }
    }
}

/// One `killContainer` of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    pub reason: TerminationReason,
    /// The runtime id of the container instance killed.
    pub container_id: String,
    pub stop_signal: Signal,
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
    pub name: String,
    pub role: ContainerRole,
    /// Runtime ids of every instance, in start order (restarts add more).
    pub ids: Vec<String>,
    pub restarts: u32,
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
    pub pod_ip: Option<IpAddr>,
    /// The runtime's sandbox id (stopped, not removed).
    pub sandbox: Option<String>,
    pub containers: Vec<ContainerReport>,
    pub events: Vec<Event>,
    /// The API object's watch events (deletes, the terminal status, the final delete).
    pub object: Vec<ObjectEvent>,
    /// Every delete of the run, in order.
    pub deletes: Vec<DeleteRecord>,
}

/// Why a pod could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    /// A container cannot be expressed as a local process. A located error
    /// ([`SpecError::NoCommand`], `FILE:LINE:COL: PATH: ...`) is shown as is; the others name
    /// the pod.
    #[error("{}", spec_message(pod, source))]
    Spec { pod: String, source: SpecError },
    /// A volume could not be set up (the kubelet's `FailedMount`).
    #[error("pod {pod}: {source}")]
    Volume {
        pod: String,
        source: crate::kubelet::volumes::VolumeError,
    },
    /// The runtime refused the sandbox.
    #[error("pod {pod}: {source}")]
    Sandbox {
        pod: String,
        source: Box<RuntimeError>,
    },
    /// The pod task ended abnormally.
    #[error("pod {pod}: the pod task failed: {reason}")]
    Task { pod: String, reason: String },
}

/// [`PodError::Spec`]'s message: the file position names the pod already.
fn spec_message(pod: &str, source: &SpecError) -> String {
    match source {
        SpecError::NoCommand { .. } => source.to_string(),
        SpecError::StopSignal { .. } => format!("pod {pod}: {source}"),
    }
}

/// A running pod: send it commands, watch its status, wait for its report.
pub struct PodHandle {
    commands: mpsc::UnboundedSender<PodCommand>,
    status: watch::Receiver<PodStatus>,
    task: JoinHandle<Result<PodReport, PodError>>,
    name: String,
}

impl PodHandle {
    /// Sends a command; `false` if the pod task has ended.
    pub fn send(&self, command: PodCommand) -> bool {
        self.commands.send(command).is_ok()
    }

    /// A watch of the pod's status.
    pub fn status(&self) -> watch::Receiver<PodStatus> {
        self.status.clone()
    }

    /// Waits for the pod task to end (after termination) and returns its report.
    ///
    /// # Errors
    /// [`PodError`] if the pod could not be run.
    pub async fn wait(self) -> Result<PodReport, PodError> {
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(PodError::Task {
                pod: self.name,
                reason: e.to_string(),
            }),
        }
    }
}

/// Checks that every container of `plan` can be run, before anything is started.
///
/// # Errors
/// [`PodError::Spec`] naming the first container that cannot.
pub fn check_pod(plan: &PodPlan, opts: &PodOptions) -> Result<(), PodError> {
    for c in plan.init_containers.iter().chain(plan.containers.iter()) {
        let over = opts.stop_signal_overrides.get(&c.name).map(String::as_str);
        container_spec(c, over, opts.force_host, opts.images).map_err(|source| PodError::Spec {
            pod: plan.name.clone(),
            source,
        })?;
    }
    Ok(())
}

/// Starts the pod task on the current tokio runtime.
pub fn run_pod<R: RuntimeService + 'static>(
    runtime: Arc<R>,
    plan: PodPlan,
    mut opts: PodOptions,
    events: EventRecorder,
) -> PodHandle {
    opts.images = runtime.uses_images();
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (status_tx, status_rx) = watch::channel(PodStatus {
        phase: PodPhase::Starting,
        pod_ip: None,
        ready: false,
        terminating_since: None,
        grace_period_seconds: None,
        last_delete: None,
    });
    let name = plan.name.clone();
    let task = tokio::spawn(async move {
        let pod = Pod::new(runtime, plan, opts, events, status_tx)?;
        pod.run(cmd_rx).await
    });
    PodHandle {
        commands: cmd_tx,
        status: status_rx,
        task,
        name,
    }
}

/// The runtime state of one container of the pod.
struct Ctr {
    plan: ContainerPlan,
    spec: ContainerSpec,
    /// The current instance's id.
    id: Option<String>,
    running: bool,
    exit: Option<ExitStatus>,
    started_at: Option<Instant>,
    /// The crash back-off (`flowcontrol.Backoff` for this container), its times in milliseconds
    /// since `epoch`.
    back_off: Backoff,
    epoch: Instant,
    /// Create-and-start attempts, failed ones included (a failed start counts as a run that
    /// exited, as the kubelet's restartCount does).
    attempts: u32,
    /// Restart waiting for its back-off to end.
    restart_at: Option<Instant>,
    /// Killed by the kubelet after a liveness or startup failure: restarts unless the pod
    /// never restarts, whatever its exit code.
    probe_killed: bool,
    /// Killed by the kubelet because its definition (image) changed: restarts whatever the
    /// pod's `restartPolicy`, with a fresh back-off (the back-off key holds the container's
    /// hash).
    definition_changed: bool,
    /// It should be (re)started as soon as its turn and back-off allow.
    want_start: bool,
    /// It has been started at least once.
    ever_started: bool,
    /// A regular init container that exited 0.
    completed: bool,
    /// Liveness/startup threshold failures already acted on.
    failures_seen: u64,
    /// A probe-initiated kill of this container is running (SyncPod kills synchronously, so
    /// the kubelet never starts a second one meanwhile).
    probe_kill_in_flight: bool,
    /// Startup, liveness and readiness workers (started with the pod, kept across restarts).
    probes: Vec<ProbeHandle>,
    report: ContainerReport,
}

/// The pod worker's termination in flight (`SyncTerminatingPod` → `killPod`).
struct InFlight {
    task: JoinHandle<Vec<(String, Termination)>>,
}

struct Pod<R> {
    rt: Arc<R>,
    plan: Arc<PodPlan>,
    opts: PodOptions,
    events: EventRecorder,
    status: watch::Sender<PodStatus>,
    /// The sandbox's container events (the evented PLEG), once the sandbox exists.
    container_events: Option<broadcast::Receiver<crate::runtime::ContainerEvent>>,
    started: Instant,
    /// `namespace/name`.
    display: String,
    /// Name, namespace and uid, as the CRI labels carry them.
    identity: PodIdentity,
    /// `format.Pod`, as the kubelet names the pod in messages.
    kubelet_name: String,
    sandbox: Option<String>,
    /// The pod's volumes, set up before the sandbox on a runtime with images.
    volumes: Option<crate::kubelet::volumes::PodVolumes>,
    pod_ip: Option<IpAddr>,
    ctrs: Vec<Ctr>,
    /// The API object.
    api: ApiObject,
    /// The pod worker's state.
    worker: PodWorker,
    termination_reason: Option<TerminationReason>,
    in_flight: Option<InFlight>,
    /// The effective grace the kill in flight works with, seconds, while it runs.
    kill_grace: Option<i64>,
    /// Kills by 1.18–1.21's pod killer, beside the pod worker's.
    pod_killer: tokio::task::JoinSet<Vec<(String, Termination)>>,
    /// Hooks the kubelet stopped waiting for, which may still fail (`FailedPreStopHook`).
    late_hooks: LateHooks,
    /// Every delete, in order.
    deletes: Vec<DeleteRecord>,
    /// `killPodNow`'s wait deadline for a kubelet-initiated kill (`ExceededGracePeriod`).
    kill_pod_now_deadline: Option<Instant>,
    /// The pod failed to start (an init container failed with restartPolicy Never).
    failed: bool,
    /// Probe results: (container index, kind, status).
    probe_tx: mpsc::UnboundedSender<(usize, ProbeKind, ProbeStatus)>,
    probe_rx: mpsc::UnboundedReceiver<(usize, ProbeKind, ProbeStatus)>,
    /// Container kills after a probe failure: (container index, termination record).
    probe_kill_tx: mpsc::UnboundedSender<(usize, Termination)>,
    probe_kill_rx: mpsc::UnboundedReceiver<(usize, Termination)>,
    /// Cancels the probe kills in flight when the pod terminates.
    probe_kill_cancel: Vec<Canceller>,
}

impl<R: RuntimeService + 'static> Pod<R> {
    fn new(
        rt: Arc<R>,
        plan: PodPlan,
        opts: PodOptions,
        events: EventRecorder,
        status: watch::Sender<PodStatus>,
    ) -> Result<Self, PodError> {
        check_pod(&plan, &opts)?;
        let namespace = plan
            .namespace
            .clone()
            .unwrap_or_else(|| opts.namespace.clone());
        let namespace = if namespace.is_empty() {
            "default".to_string()
        } else {
            namespace
        };
        let ctrs =
            plan.init_containers
                .iter()
                .chain(plan.containers.iter())
                .map(|c| {
                    let over = opts.stop_signal_overrides.get(&c.name).map(String::as_str);
                    // check_pod above made sure every spec builds.
                    let spec = container_spec(c, over, opts.force_host, opts.images).map_err(
                        |source| PodError::Spec {
                            pod: plan.name.clone(),
                            source,
                        },
                    )?;
                    Ok(Ctr {
                        plan: c.clone(),
                        spec,
                        id: None,
                        running: false,
                        exit: None,
                        started_at: None,
                        back_off: Backoff::crash_loop(),
                        epoch: Instant::now(),
                        attempts: 0,
                        restart_at: None,
                        probe_killed: false,
                        definition_changed: false,
                        want_start: true,
                        ever_started: false,
                        completed: false,
                        failures_seen: 0,
                        probe_kill_in_flight: false,
                        probes: Vec::new(),
                        report: ContainerReport {
                            name: c.name.clone(),
                            role: c.role,
                            ids: Vec::new(),
                            restarts: 0,
                            terminations: Vec::new(),
                            exits: Vec::new(),
                        },
                    })
                })
                .collect::<Result<Vec<_>, PodError>>()?;
        let tgps = plan.termination_grace_period_seconds;
        let version = opts.version;
        let (probe_tx, probe_rx) = mpsc::unbounded_channel();
        let (probe_kill_tx, probe_kill_rx) = mpsc::unbounded_channel();
        let mut worker = PodWorker::new(version);
        worker.update_pod(PodUpdate::new(UpdateType::SyncPodCreate, Some(tgps)));
        let uid = opts
            .uid
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(new_uid);
        Ok(Pod {
            display: format!("{namespace}/{}", plan.name),
            kubelet_name: format_pod(&plan.name, &namespace, &uid),
            identity: PodIdentity {
                name: plan.name.clone(),
                namespace: namespace.clone(),
                uid,
            },
            rt,
            api: ApiObject::new(&plan, NODE_NAME, version),
            plan: Arc::new(plan),
            opts,
            events,
            status,
            container_events: None,
            started: Instant::now(),
            sandbox: None,
            volumes: None,
            pod_ip: None,
            ctrs,
            worker,
            termination_reason: None,
            in_flight: None,
            kill_grace: None,
            pod_killer: tokio::task::JoinSet::new(),
            late_hooks: LateHooks::default(),
            deletes: Vec::new(),
            kill_pod_now_deadline: None,
            failed: false,
            probe_tx,
            probe_rx,
            probe_kill_tx,
            probe_kill_rx,
            probe_kill_cancel: Vec::new(),
        })
    }

    fn publish(&self, phase: PodPhase) {
        // The Ready condition: every running container (sidecars and mains) is ready, which
        // needs its readiness probe to succeed when it has one. It is kept up to date during
        // termination too (readiness probes keep running), which drives EndpointSlice serving.
        let ready = phase != PodPhase::Starting
            && phase != PodPhase::Terminated
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
        });
    }

    /// The kubelet's container statuses as the API would hold them: init containers (native
    /// sidecars and regular ones), then the regular containers; running ones with their
    /// readiness, exited ones with their exit code and containerd's reason.
    fn api_statuses(&self) -> (Vec<ApiContainerStatus>, Vec<ApiContainerStatus>) {
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
                    reason: containerd_exit_reason(e.code(), false).to_string(),
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
    fn observe_status(&mut self) {
        let ready = self.status.borrow().ready;
        let (init, main) = self.api_statuses();
        self.api.observe(ready, init, main);
    }

    fn terminating(&self) -> bool {
        self.worker.terminating_requested
    }

    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<PodCommand>,
    ) -> Result<PodReport, PodError> {
        let ctx = CallContext::background();
        let dns = if self.opts.images {
            if !self.plan.host_network {
                // dnsPolicy ClusterFirst (the default) with no cluster DNS: the host's.
                self.events.warning(
                    reason::MISSING_CLUSTER_DNS,
                    None,
                    crate::kubelet::cri::missing_cluster_dns_message(&self.kubelet_name),
                );
            }
            std::fs::read_to_string("/etc/resolv.conf")
                .ok()
                .map(|r| crate::kubelet::cri::host_dns(&r))
        } else {
            None
        };
        if self.opts.images {
            // The volume manager's WaitForAttachAndMount comes before SyncPod's sandbox.
            let v = crate::kubelet::volumes::PodVolumes::set_up(
                &crate::kubelet::volumes::default_root(),
                &self.plan,
                &self.identity.uid,
            )
            .map_err(|source| PodError::Volume {
                pod: self.display.clone(),
                source,
            })?;
            self.volumes = Some(v);
        }
        let config = crate::kubelet::cri::pod_sandbox_config(
            &self.plan,
            &self.identity,
            0,
            Some(std::path::Path::new("")),
            dns,
        );
        let sandbox = match self.rt.run_pod_sandbox(&ctx, config).await {
            Ok(id) => id,
            Err(source) => {
                if let Some(v) = self.volumes.take() {
                    v.remove();
                }
                return Err(PodError::Sandbox {
                    pod: self.display.clone(),
                    source: Box::new(source),
                });
            }
        };
        self.pod_ip = self
            .rt
            .pod_sandbox_status(&ctx, &sandbox)
            .await
            .ok()
            .and_then(|s| s.ip);
        self.container_events = self.rt.container_events(&sandbox);
        self.sandbox = Some(sandbox);
        self.spawn_probes();
        self.publish(PodPhase::Starting);

        loop {
            if !self.terminating() {
                // Start what may start now; a command cancels a start in progress, as a
                // termination cancels the kubelet's in-flight SyncPod.
                tokio::select! {
                    biased;
                    cmd = commands.recv() => {
                        match cmd {
                            Some(cmd) => self.command(cmd),
                            None => self.command(PodCommand::Delete(KubectlDeleteFlags::default())),
                        }
                        continue;
                    }
                    () = self.start_step() => {}
                }
            }
            if self.terminating() && self.in_flight.is_none() && self.pod_killer.is_empty() {
                if self.all_stopped() {
                    break;
                }
                // SyncTerminatingPod, or its retry after a kill that left a container running
                // (with the grace the pod worker recorded meanwhile).
                self.start_termination();
            }
            let next_restart = self
                .ctrs
                .iter()
                .filter_map(|c| c.restart_at)
                .min()
                .filter(|_| !self.terminating());
            let exceeded_at = self.kill_pod_now_deadline;
            let mut flight = self.in_flight.take();
            let finished = tokio::select! {
                cmd = commands.recv(), if !commands.is_closed() => {
                    match cmd {
                        Some(cmd) => self.command(cmd),
                        // The handle was dropped: delete the pod as `kubectl delete` would.
                        None => self.command(PodCommand::Delete(KubectlDeleteFlags::default())),
                    }
                    None
                }
                ev = recv_event(&mut self.container_events) => {
                    if let Some(ev) = ev {
                        self.container_event(ev);
                    }
                    None
                }
                Some((i, kind, st)) = self.probe_rx.recv() => {
                    self.probe_result(i, kind, st);
                    None
                }
                Some((i, t)) = self.probe_kill_rx.recv() => {
                    if let Some(c) = self.ctrs.get_mut(i) {
                        c.probe_kill_in_flight = false;
                        c.report.terminations.push(t);
                    }
                    None
                }
                () = sleep_until(next_restart) => {
                    let now = Instant::now();
                    for c in &mut self.ctrs {
                        if c.restart_at.is_some_and(|t| t <= now) {
                            c.restart_at = None;
                        }
                    }
                    None
                }
                () = sleep_until(exceeded_at) => {
                    self.kill_pod_now_deadline = None;
                    self.events.warning(reason::EXCEEDED_GRACE_PERIOD, None, message::EXCEEDED_GRACE_PERIOD);
                    None
                }
                done = join_opt(flight.as_mut().map(|f| &mut f.task)) => Some(done),
                Some(done) = self.pod_killer.join_next(), if !self.pod_killer.is_empty() => {
                    self.record_terminations(done.unwrap_or_default());
                    self.refresh_states().await;
                    None
                }
            };
            match (finished, flight) {
                (Some(done), Some(_)) => {
                    self.kill_grace = None;
                    self.record_terminations(done);
                    self.refresh_states().await;
                    if self.all_stopped() && self.pod_killer.is_empty() {
                        break;
                    }
                }
                (_, Some(f)) => self.in_flight = Some(f),
                _ => {}
            }
        }
        // SyncTerminatedPod: the sandbox goes, and anything left in it (hooks still running
        // after their budget, exec processes) dies with it.
        // Removing it is left to the caller (the kubelet's garbage collection does it later),
        // so the runtime's records of the stops can still be read.
        // Once the containers are stopped, no probe runs any more, readiness included
        // (`SyncTerminatingPod` calls `probeManager.RemovePod`, pkg/kubelet/kubelet.go): an
        // attempt in flight is cancelled, so none reports on a pod whose network is gone.
        for c in &self.ctrs {
            for p in &c.probes {
                p.stop();
            }
        }
        // The end of SyncTerminatingPod: the status with every container stopped (phase Failed
        // or Succeeded, or the eviction's Failed/Evicted).
        let (init, main) = self.api_statuses();
        let terminal_at = Instant::now();
        self.api
            .terminated(terminal_at, self.worker.evicted, init, main);
        if let Some(sb) = &self.sandbox {
            let _ = self.rt.stop_pod_sandbox(&ctx, sb).await;
        }
        // The volume manager unmounts a terminated pod's volumes; its emptyDirs go.
        if let Some(v) = self.volumes.take() {
            v.remove();
        }
        // Hooks cut at their budget fail once their container is gone; their FailedPreStopHook
        // comes now (also after a force-deleted object is gone).
        self.late_hooks.wait(LATE_HOOK_WAIT).await;
        // SyncTerminatedPod finished: the status manager's final delete (grace 0), the
        // recorded delay after the terminal status (`podstatus::final_delete_at_ms`: the PLEG
        // relist and volume waits of SyncTerminatedPod). `run` has no API server, so the
        // object's record takes that time without the run waiting for it.
        let delay = Duration::from_millis(
            u64::try_from(podstatus::final_delete_at_ms(0)).unwrap_or_default(),
        );
        self.api
            .final_delete((terminal_at + delay).max(Instant::now()));
        self.publish(PodPhase::Terminated);
        Ok(PodReport {
            pod: self.display.clone(),
            started: self.started,
            pod_ip: self.pod_ip,
            sandbox: self.sandbox.clone(),
            containers: self
                .ctrs
                .into_iter()
                .map(|mut c| {
                    // Restarts that happened, not ones still waiting out their back-off.
                    c.report.restarts = c.attempts.saturating_sub(1);
                    c.report
                })
                .collect(),
            events: self.events.events(),
            object: self.api.events().to_vec(),
            deletes: self.deletes.clone(),
        })
    }

    /// Adds finished kills to their containers' reports.
    fn record_terminations(&mut self, done: Vec<(String, Termination)>) {
        for (name, t) in done {
            if let Some(c) = self.ctrs.iter_mut().find(|c| c.plan.name == name) {
                c.report.terminations.push(t);
            }
        }
    }

    fn all_stopped(&self) -> bool {
        self.ctrs.iter().all(|c| !c.running)
    }

    /// Re-reads the runtime's view of every container instance.
    async fn refresh_states(&mut self) {
        let ctx = CallContext::background();
        for c in &mut self.ctrs {
            if let Some(id) = &c.id {
                if let Ok(st) = self.rt.container_status(&ctx, id).await {
                    c.running = st.state == crate::runtime::ContainerState::Running;
                    if st.exit.is_some() {
                        c.exit = st.exit;
                    }
                }
            }
        }
    }

    /// The evented PLEG: a container of this pod started or stopped.
    fn container_event(&mut self, ev: crate::runtime::ContainerEvent) {
        let Some(i) = self
            .ctrs
            .iter()
            .position(|c| c.id.as_deref() == Some(ev.container_id.as_str()))
        else {
            return;
        };
        let ContainerEventKind::Stopped { at, status } = ev.kind else {
            return;
        };
        let terminating = self.terminating();
        let c = &mut self.ctrs[i];
        c.running = false;
        c.exit = Some(status);
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
            self.publish(PodPhase::Terminating);
            return;
        }
        self.after_exit(i, at, status);
    }

    /// An instance of container `i` ended at `at` with `status`: it exited, or the runtime
    /// could not create or start it (`StartError`, exit code 128). Decides, as
    /// `computePodActions` and `doBackOff` (`pkg/kubelet/kuberuntime/kuberuntime_manager.go`)
    /// do, whether it restarts under `restartPolicy` and after which back-off (recording
    /// `BackOff` while it waits), whether the pod has failed or completed.
    fn after_exit(&mut self, i: usize, at: Instant, status: ExitStatus) {
        let policy = self.plan.restart_policy;
        let c = &mut self.ctrs[i];
        if std::mem::take(&mut c.definition_changed) {
            // Restarted regardless of restartPolicy, at once: a new back-off key.
            c.back_off = Backoff::crash_loop();
            c.epoch = Instant::now();
            c.restart_at = Some(Instant::now());
            c.want_start = true;
            self.publish(PodPhase::Running);
            return;
        }
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
        self.publish(PodPhase::Running);
    }

    /// Every main container has exited and none will restart.
    fn completed(&self) -> bool {
        self.ctrs
            .iter()
            .filter(|c| c.plan.role == ContainerRole::Main)
            .all(|c| !c.running && c.exit.is_some() && !c.want_start)
    }

    /// A pod whose init container failed under `restartPolicy: Never` is Failed; its running
    /// sidecars are stopped like a terminating pod's.
    fn command_kill_failed(&mut self) {
        let mut u = PodUpdate::new(
            UpdateType::SyncPodUpdate,
            Some(self.plan.termination_grace_period_seconds),
        );
        u.terminal_phase = true;
        self.enter_termination(u, TerminationReason::Deleted, false);
    }

    /// `kubectl delete` through the API server, or an eviction through `killPodNow`.
    fn command(&mut self, cmd: PodCommand) {
        let tgps = self.plan.termination_grace_period_seconds;
        let version = self.opts.version;
        match cmd {
            PodCommand::Delete(flags) => {
                let request = match apiserver::kubectl_delete(flags) {
                    Ok(r) => r,
                    Err(e) => {
                        self.kubectl_error(e);
                        return;
                    }
                };
                let at = Instant::now();
                self.observe_status();
                let api = self.api.delete(&request, at);
                let mut record = DeleteRecord {
                    at,
                    flags,
                    api,
                    kubelet: DeleteKubelet::Nothing,
                };
                if matches!(api, DeleteApi::NotFound | DeleteApi::Unchanged) {
                    self.deletes.push(record);
                    self.publish_current();
                    return;
                }
                let deletion = self.api.deletion();
                let mut u = PodUpdate::new(UpdateType::SyncPodUpdate, Some(tgps));
                u.deletion_timestamp = deletion.deletion_timestamp.is_some();
                u.deletion_grace_period_seconds = deletion.deletion_grace_period_seconds;
                record.kubelet = self.enter_termination(
                    u,
                    TerminationReason::Deleted,
                    matches!(api, DeleteApi::Deleted { .. }),
                );
                self.deletes.push(record);
                self.publish_current();
            }
            PodCommand::Evict {
                hard,
                eviction_max_pod_grace_period,
            } => {
                let o = eviction::grace_period_override(
                    hard,
                    eviction_max_pod_grace_period,
                    Some(tgps),
                    version,
                );
                let mut u = PodUpdate::new(UpdateType::SyncPodKill, Some(tgps));
                u.kill = Some(KillPodOptions {
                    evict: true,
                    override_seconds: Some(o),
                });
                // killPodNow waits g + g/2 (at least 10 s), then says ExceededGracePeriod.
                let wait = podworker::kill_pod_now_wait_seconds(Some(o), Some(tgps));
                self.kill_pod_now_deadline =
                    Some(Instant::now() + Duration::from_secs(u64::try_from(wait).unwrap_or(0)));
                self.enter_termination(u, TerminationReason::Evicted, false);
            }
            PodCommand::Images(images) => self.images_changed(&images),
        }
    }

    /// The object's images changed (`kubectl set image`): each container whose image differs
    /// takes the new one; a running one is killed as `computePodActions` kills a container
    /// whose hash changed (`Killing` with `Container NAME definition changed, will be
    /// restarted`, or `Init container NAME definition changed` for a native sidecar; the pod's
    /// grace, its preStop hook) and started again once stopped, whatever `restartPolicy`
    /// says. One waiting out its back-off starts at once (the back-off key holds the hash).
    /// Regular init containers and a terminating pod are left alone, as upstream does.
    ///
    /// Upstream: `pkg/kubelet/kuberuntime/kuberuntime_manager.go` (`computePodActions`,
    /// `containerChanged`), `kuberuntime_container.go` (`computeInitContainerActions`,
    /// `killContainer`), `pkg/kubelet/container/helpers.go` (`HashContainer`: name and image),
    /// Kubernetes 1.27 to 1.37.
    fn images_changed(&mut self, images: &BTreeMap<String, String>) {
        if self.terminating() || self.failed {
            return;
        }
        for i in 0..self.ctrs.len() {
            let c = &self.ctrs[i];
            let Some(image) = images.get(&c.plan.name) else {
                continue;
            };
            if c.plan.image.as_deref() == Some(image.as_str())
                || (c.plan.role == ContainerRole::Init)
            {
                continue;
            }
            let over = self
                .opts
                .stop_signal_overrides
                .get(&c.plan.name)
                .map(String::as_str);
            let mut plan = c.plan.clone();
            plan.image = Some(image.clone());
            let Ok(spec) = container_spec(&plan, over, self.opts.force_host, self.opts.images)
            else {
                continue;
            };
            let pod = Arc::make_mut(&mut self.plan);
            if let Some(pc) = pod
                .init_containers
                .iter_mut()
                .chain(pod.containers.iter_mut())
                .find(|pc| pc.name == plan.name)
            {
                pc.image = Some(image.clone());
            }
            let c = &mut self.ctrs[i];
            c.plan = plan;
            c.spec = spec;
            if !c.running || c.probe_kill_in_flight {
                if c.restart_at.is_some() {
                    c.back_off = Backoff::crash_loop();
                    c.epoch = Instant::now();
                    c.restart_at = Some(Instant::now());
                }
                continue;
            }
            let Some(id) = c.id.clone() else {
                continue;
            };
            c.definition_changed = true;
            c.probe_kill_in_flight = true;
            let message = if c.plan.role == ContainerRole::Sidecar {
                message::init_definition_changed(&c.plan.name)
            } else {
                message::definition_changed(&c.plan.name)
            };
            let base = kuberuntime::set_termination_grace_period(
                GraceFields::of_pod_kill(None, self.plan.termination_grace_period_seconds),
                KillReason::Other,
            );
            self.spawn_container_kill(i, id, base, message, TerminationReason::DefinitionChanged);
        }
    }

    /// Kills instance `id` of container `i` as `SyncPod` kills one container (no pod-level
    /// override, `base_grace` seconds, `message` as the `Killing` event); the termination
    /// comes back through `probe_kill_rx`.
    fn spawn_container_kill(
        &mut self,
        i: usize,
        id: String,
        base_grace: i64,
        message: String,
        term_reason: TerminationReason,
    ) {
        let plan = self.ctrs[i].plan.clone();
        let signal = self.ctrs[i].spec.stop_signal;
        let (ctx, canceller) = CallContext::background().with_cancel();
        self.probe_kill_cancel.push(canceller);
        let rt = self.rt.clone();
        let events = self.events.clone();
        let pod_name = self.kubelet_name.clone();
        let pod_ip = self.pod_ip;
        let version = self.opts.version;
        let done = self.probe_kill_tx.clone();
        let late = self.late_hooks.clone();
        tokio::spawn(async move {
            let target = KillTarget {
                container: &plan,
                id: &id,
                base_grace,
                override_seconds: None,
                message,
                hook: hook_target(&pod_name, &plan, &id, pod_ip, &events),
            };
            let (kill, _) = kill_container(&rt, &ctx, target, None, version, &events, &late).await;
            let _ = done.send((
                i,
                Termination {
                    reason: term_reason,
                    container_id: id.clone(),
                    stop_signal: signal,
                    kill,
                    killer: Killer::PodWorker,
                },
            ));
        });
    }

    fn kubectl_error(&self, e: KubectlDeleteError) {
        tracing::warn!(pod = %self.display, error = %e, "delete refused");
    }

    /// Publishes the current lifecycle phase again (with the last delete).
    fn publish_current(&self) {
        let phase = self.status.borrow().phase.clone();
        self.publish(phase);
    }

    /// `UpdatePod`: records the update. The first one that asks for termination starts it; a
    /// later one can only lower the pod worker's grace, which reaches a kill not started yet
    /// but not one in flight ([`podworker::later_update_in_flight`]). `object_removed`: the
    /// update is the API object's removal (a delete with grace 0).
    fn enter_termination(
        &mut self,
        u: PodUpdate,
        reason: TerminationReason,
        object_removed: bool,
    ) -> DeleteKubelet {
        let before = self.worker.grace_period;
        let was_terminating = self.worker.terminating_requested;
        let dgps = u.deletion_grace_period_seconds;
        self.worker.update_pod(u);
        if !self.worker.terminating_requested {
            return DeleteKubelet::Nothing;
        }
        let g = self.worker.grace_period;
        if !was_terminating {
            self.termination_reason = Some(reason);
            // SyncTerminatingPod stops the liveness and startup probes only; readiness goes
            // on (EndpointSlice serving). Probe kills in flight belonged to the cancelled
            // SyncPod.
            for c in &self.ctrs {
                for p in c.probes.iter().filter(|p| p.kind() != ProbeKind::Readiness) {
                    p.stop();
                }
            }
            for k in self.probe_kill_cancel.drain(..) {
                k.cancel();
            }
            self.status
                .send_modify(|s| s.terminating_since = Some(Instant::now()));
            self.publish(PodPhase::Terminating);
            return DeleteKubelet::Started {
                grace_period_seconds: g,
            };
        }
        if reason == TerminationReason::Evicted {
            self.termination_reason = Some(reason);
        }
        let Some(kill_grace) = self.kill_grace else {
            // The kill has not started yet: it starts with the lowered grace.
            return if g < before {
                DeleteKubelet::BeforeKill {
                    grace_period_seconds: g,
                }
            } else {
                DeleteKubelet::NotShorter
            };
        };
        let effect = podworker::later_update_in_flight(
            self.opts.version,
            kill_grace,
            LaterUpdate {
                effective_grace_seconds: g,
                object_removed,
                deletion_grace_period_seconds: dgps,
            },
        );
        match effect {
            InFlightEffect::NotShorter => DeleteKubelet::NotShorter,
            InFlightEffect::Ignored {
                kept_seconds,
                recorded_seconds,
            } => {
                // UpdatePod cancels the sync's context ("Cancelling current pod sync"); the
                // running SyncTerminatingPod does not read it, so nothing stops.
                tracing::debug!(pod = %self.display, kept_seconds, recorded_seconds, "Cancelling current pod sync (the kill in flight keeps its grace)");
                DeleteKubelet::Ignored {
                    kept_seconds,
                    recorded_seconds,
                }
            }
            InFlightEffect::KilledAgain { base_grace_seconds } => {
                let task = self.spawn_kills(base_grace_seconds, None, false, Killer::PodKiller);
                self.pod_killer
                    .spawn(async move { task.await.unwrap_or_default() });
                DeleteKubelet::KilledAgain
            }
        }
    }

    /// `SyncTerminatingPod` → `killPod`: every running container in parallel, with the pod
    /// worker's effective grace.
    fn start_termination(&mut self) {
        let g = self.worker.grace_period;
        let version = self.opts.version;
        let tgps = self.plan.termination_grace_period_seconds;
        let override_seconds = podworker::kill_pod_override(
            g,
            self.worker.pending_kill.and_then(|k| k.override_seconds),
            version,
        );
        let base = kuberuntime::set_termination_grace_period(
            GraceFields::of_pod_kill(self.api.deletion().deletion_grace_period_seconds, tgps),
            KillReason::Other,
        );
        let ordering = kuberuntime::kills_in_termination_order(&self.plan, version);
        let task = self.spawn_kills(base, override_seconds, ordering, Killer::PodWorker);
        self.in_flight = Some(InFlight { task });
        self.kill_grace = Some(g);
    }

    /// `killContainersWithSyncResult`: kills every running container in parallel with base
    /// grace `base` and `override_seconds`, in sidecar order when `ordering`. The kills run on a
    /// context nothing cancels, as `SyncTerminatingPod`'s (`context.TODO()`).
    fn spawn_kills(
        &self,
        base: i64,
        override_seconds: Option<i64>,
        ordering: bool,
        killer: Killer,
    ) -> JoinHandle<Vec<(String, Termination)>> {
        let version = self.opts.version;
        let reason = self
            .termination_reason
            .unwrap_or(TerminationReason::Deleted);
        let targets: Vec<(ContainerPlan, String, Signal)> = self
            .ctrs
            .iter()
            .filter(|c| c.running)
            .filter_map(|c| Some((c.plan.clone(), c.id.clone()?, c.spec.stop_signal)))
            .collect();
        let ordering = ordering.then(|| {
            let running: Vec<String> = targets.iter().map(|t| t.0.name.clone()).collect();
            let order: Vec<OrderedContainer> = self
                .plan
                .running_containers()
                .map(|c| OrderedContainer {
                    name: c.name.clone(),
                    sidecar: c.role == ContainerRole::Sidecar,
                })
                .collect();
            Arc::new(TerminationOrdering::new(&order, |n| {
                running.iter().any(|r| r == n)
            }))
        });
        let ctx = CallContext::background();
        let rt = self.rt.clone();
        let events = self.events.clone();
        let pod_name = self.kubelet_name.clone();
        let pod_ip = self.pod_ip;
        let late = self.late_hooks.clone();
        tokio::spawn(async move {
            let mut kills = tokio::task::JoinSet::new();
            for (plan, id, signal) in targets {
                let rt = rt.clone();
                let ctx = ctx.clone();
                let events = events.clone();
                let ordering = ordering.clone();
                let pod_name = pod_name.clone();
                let late = late.clone();
                kills.spawn(async move {
                    let target = KillTarget {
                        container: &plan,
                        id: &id,
                        base_grace: base,
                        override_seconds,
                        message: message::killing(&plan.name),
                        hook: hook_target(&pod_name, &plan, &id, pod_ip, &events),
                    };
                    let (kill, result) = kill_container(
                        &rt,
                        &ctx,
                        target,
                        ordering.as_deref(),
                        version,
                        &events,
                        &late,
                    )
                    .await;
                    if let Err(e) = result {
                        tracing::debug!(container = %plan.name, error = %e, "StopContainer");
                    }
                    (
                        plan.name.clone(),
                        Termination {
                            reason,
                            container_id: id,
                            stop_signal: signal,
                            kill,
                            killer,
                        },
                    )
                });
            }
            kills.join_all().await
        })
    }

    /// Starts what may start now, as `SyncPod` does: init containers and native sidecars one
    /// by one in declaration order (an init container must exit 0 first; a sidecar must be
    /// running and, if it has a startup probe, started), then the main containers, each with
    /// its postStart hook. Restarts due after their back-off go through here too. Returns when
    /// nothing more can start now.
    async fn start_step(&mut self) {
        if self.failed || self.terminating() {
            return;
        }
        let n_init = self.plan.init_containers.len();
        for i in 0..self.ctrs.len() {
            let c = &self.ctrs[i];
            let startable = c.want_start && !c.running && c.restart_at.is_none();
            if i < n_init && c.plan.role == ContainerRole::Init {
                if c.completed {
                    continue;
                }
                if startable {
                    self.start_container(i).await;
                }
                // Running, backing off, failed for good, or just started: later ones wait.
                return;
            }
            if startable {
                self.start_container(i).await;
                if self.failed || self.terminating() {
                    // A failed start failed or completed the pod.
                    return;
                }
            }
            let c = &self.ctrs[i];
            if i < n_init && !c.ever_started {
                return;
            }
            if i < n_init && c.running && !self.started(i) && !c.completed {
                // A sidecar gates the next init container until its startup probe succeeds.
                return;
            }
        }
        if !self.terminating() {
            self.publish(PodPhase::Running);
        }
    }

    /// Starts each container's probe workers (`prober_manager.AddPod`): they idle until the
    /// container runs, and their results come back to the pod loop.
    fn spawn_probes(&mut self) {
        for (i, c) in self.ctrs.iter_mut().enumerate() {
            if c.plan.role == ContainerRole::Init {
                continue;
            }
            let prober = |probe: &podgrace_core::plan::Probe| RuntimeProber {
                runtime: self.rt.clone(),
                probe: probe.clone(),
                pod_ip: self.pod_ip,
                ports: c.plan.ports.clone(),
                env: c.plan.env.clone(),
            };
            let name = c.plan.name.clone();
            let startup = c.plan.startup_probe.as_ref().map(|p| {
                spawn_probe_worker(
                    ProbeKind::Startup,
                    p,
                    &name,
                    prober(p),
                    self.events.clone(),
                    None,
                )
            });
            let gate = startup.as_ref().map(ProbeHandle::subscribe);
            let mut handles: Vec<ProbeHandle> = startup.into_iter().collect();
            for (kind, probe) in [
                (ProbeKind::Liveness, &c.plan.liveness_probe),
                (ProbeKind::Readiness, &c.plan.readiness_probe),
            ] {
                if let Some(p) = probe {
                    handles.push(spawn_probe_worker(
                        kind,
                        p,
                        &name,
                        prober(p),
                        self.events.clone(),
                        gate.clone(),
                    ));
                }
            }
            for h in &handles {
                let mut rx = h.subscribe();
                let tx = self.probe_tx.clone();
                let kind = h.kind();
                tokio::spawn(async move {
                    while rx.changed().await.is_ok() {
                        let st = rx.borrow_and_update().clone();
                        if tx.send((i, kind, st)).is_err() {
                            break;
                        }
                    }
                });
            }
            c.probes = handles;
        }
    }

    /// A probe worker published a result: readiness changes the Ready condition; a liveness
    /// or startup failure past its threshold kills the container (`computePodActions`).
    fn probe_result(&mut self, i: usize, kind: ProbeKind, st: ProbeStatus) {
        let phase = if self.terminating() {
            PodPhase::Terminating
        } else {
            PodPhase::Running
        };
        if kind == ProbeKind::Readiness {
            self.publish(phase);
            return;
        }
        let Some(c) = self.ctrs.get_mut(i) else {
            return;
        };
        let current = c.id.clone();
        if st.threshold_failures <= c.failures_seen
            || c.probe_kill_in_flight
            || self.worker.terminating_requested
            || !c.running
            || st.container_id != current
        {
            c.failures_seen = c.failures_seen.max(st.threshold_failures);
            return;
        }
        c.failures_seen = st.threshold_failures;
        c.probe_killed = true;
        c.probe_kill_in_flight = true;
        let Some(id) = current else {
            return;
        };
        let (reason, probe_word, term_reason) = match kind {
            ProbeKind::Startup => (
                KillReason::StartupProbe,
                "startup",
                TerminationReason::StartupProbe,
            ),
            _ => (
                KillReason::LivenessProbe,
                "liveness",
                TerminationReason::LivenessProbe,
            ),
        };
        // The container-restart path: no pod-level override; the probe's own
        // terminationGracePeriodSeconds (KEP-2238) when it has one.
        let base = kuberuntime::set_termination_grace_period(
            GraceFields::of_probe_kill(&self.plan, &c.plan),
            reason,
        );
        let will_restart = self.plan.restart_policy != RestartPolicy::Never;
        let message = message::killing_after_probe(&c.plan.name, probe_word, will_restart);
        self.spawn_container_kill(i, id, base, message, term_reason);
    }

    /// A container counts as started once running and past its startup probe, if any.
    fn started(&self, i: usize) -> bool {
        let c = &self.ctrs[i];
        c.running
            && c.probes
                .iter()
                .filter(|p| p.kind() == ProbeKind::Startup)
                .all(|p| p.status().result == ProbeState::Success)
    }

    /// `startContainer`: create, start, then the postStart hook; a failed hook kills the
    /// container (`FailedPostStartHook`).
    async fn start_container(&mut self, i: usize) {
        let ctx = CallContext::background();
        let Some(sandbox) = self.sandbox.clone() else {
            return;
        };
        let mut config = self.ctrs[i].spec.config.clone();
        config.env = pod_ip_env(&self.ctrs[i].plan, self.pod_ip).unwrap_or(config.env);
        let name = self.ctrs[i].plan.name.clone();
        let restart_count = self.ctrs[i].attempts;
        crate::kubelet::cri::complete_container_config(
            &mut config,
            &self.ctrs[i].plan,
            &self.plan,
            &self.identity,
            restart_count,
            self.api.deletion().deletion_grace_period_seconds,
        );
        if let Some(v) = &self.volumes {
            match v.mounts(&self.ctrs[i].plan) {
                Ok(m) => config.mounts = m,
                Err(e) => {
                    // `CreateContainerConfigError`, as makeMounts' errors are.
                    let e = RuntimeError::Host {
                        what: "CreateContainerConfigError".into(),
                        source: std::io::Error::other(e.to_string()),
                    };
                    self.start_failed(i, &e);
                    return;
                }
            }
        }
        if self.rt.uses_images() {
            if let Err(e) = self.ensure_image(&ctx, &name, &config).await {
                self.start_failed(i, &e);
                return;
            }
        }
        self.ctrs[i].attempts += 1;
        let id = match self.rt.create_container(&ctx, &sandbox, config).await {
            Ok(id) => id,
            Err(e) => {
                tracing::debug!(container = %name, error = %e, "CreateContainer failed");
                self.start_failed(i, &e);
                return;
            }
        };
        self.events
            .normal(reason::CREATED, Some(&name), message::created(&name));
        if self.rt.uses_images() {
            // The signal the runtime will stop it with (containerd: the image's STOPSIGNAL
            // when the config names none), for the kill's records.
            if let Ok(Some(n)) = self
                .rt
                .container_status(&ctx, &id)
                .await
                .map(|st| st.stop_signal)
            {
                if let Some(sig) = Signal::from_number(n) {
                    self.ctrs[i].spec.stop_signal = sig;
                }
            }
        }
        if let Err(e) = self.rt.start_container(&ctx, &id).await {
            tracing::debug!(container = %name, error = %e, "StartContainer failed");
            self.start_failed(i, &e);
            return;
        }
        self.events
            .normal(reason::STARTED, Some(&name), message::started(&name));
        {
            let c = &mut self.ctrs[i];
            c.id = Some(id.clone());
            c.running = true;
            c.exit = None;
            c.want_start = false;
            c.ever_started = true;
            c.probe_killed = false;
            c.started_at = Some(Instant::now());
            c.report.ids.push(id.clone());
            for p in &c.probes {
                p.set_container(Some(ProbeRun {
                    container_id: id.clone(),
                    started_at: tokio::time::Instant::now(),
                    running: true,
                }));
            }
        }
        if let Some(handler) = self.ctrs[i].plan.post_start.clone() {
            let ports = self.ctrs[i].plan.ports.clone();
            let hook = HookTarget {
                pod: &self.kubelet_name,
                container: &name,
                container_id: &id,
                pod_ip: self.pod_ip,
                ports: &ports,
                events: Some(&self.events),
            };
            if let Err(e) = run_handler(self.rt.as_ref(), &ctx, &hook, &handler).await {
                tracing::warn!(container = %name, error = %e, "postStart hook failed");
                self.events.warning(
                    reason::FAILED_POST_START_HOOK,
                    Some(&name),
                    message::FAILED_POST_START_HOOK,
                );
                let _ = self.rt.stop_container(&ctx, &id, 2).await;
            }
        }
        self.publish(PodPhase::Running);
    }

    /// `EnsureImageExists` (`pkg/kubelet/images/image_manager.go`): per `imagePullPolicy`,
    /// the `Pulled` (already present), `Pulling`/`Pulled`, `Failed` or `ErrImageNeverPull`
    /// events, and the pull itself.
    async fn ensure_image(
        &self,
        ctx: &CallContext,
        container: &str,
        config: &crate::runtime::ContainerConfig,
    ) -> Result<(), RuntimeError> {
        use crate::runtime::PullPolicy;
        let image = config.image.as_str();
        let present = if config.pull_policy == PullPolicy::Always {
            None
        } else {
            self.rt.image_status(ctx, image).await?
        };
        if present.is_some() {
            self.events.normal(
                reason::PULLED,
                Some(container),
                message::image_present(image, self.opts.version),
            );
            return Ok(());
        }
        if config.pull_policy == PullPolicy::Never {
            let e = RuntimeError::ImageNeverPull {
                image: image.to_string(),
            };
            self.events.warning(
                reason::ERR_IMAGE_NEVER_PULL,
                Some(container),
                message::image_never_pull(image),
            );
            return Err(e);
        }
        self.events
            .normal(reason::PULLING, Some(container), message::pulling(image));
        let started = Instant::now();
        match self.rt.pull_image(ctx, image).await {
            Ok(_) => {
                let took = started.elapsed();
                let size = self
                    .rt
                    .image_status(ctx, image)
                    .await
                    .ok()
                    .flatten()
                    .map_or(0, |i| i.size_bytes);
                self.events.normal(
                    reason::PULLED,
                    Some(container),
                    message::pulled(image, took, size),
                );
                Ok(())
            }
            Err(e) => {
                self.events.warning(
                    reason::FAILED,
                    Some(container),
                    message::failed_to_pull(image, &e),
                );
                Err(e)
            }
        }
    }

    /// The runtime could not create or start container `i`: the `Failed` warning
    /// (`"Error: ..."`), then, as `startContainer`'s error in `SyncPod`
    /// (`pkg/kubelet/kuberuntime/kuberuntime_manager.go`) leaves a container that exited
    /// (`StartError`/`RunContainerError`, exit code 128), the same restart decision and
    /// back-off as a crash ([`Pod::after_exit`]).
    fn start_failed(&mut self, i: usize, error: &RuntimeError) {
        let c = &mut self.ctrs[i];
        self.events
            .warning(reason::FAILED, Some(&c.plan.name), message::failed(error));
        let status = ExitStatus::Code(START_ERROR_EXIT_CODE);
        let now = Instant::now();
        // The attempt ran for no time: it never resets the back-off.
        c.started_at = Some(now);
        c.running = false;
        c.exit = Some(status);
        c.want_start = false;
        c.probe_killed = false;
        self.after_exit(i, now, status);
    }
}

/// The environment of `container` with the pod's addresses filled in where `env` takes them
/// from the pod (`valueFrom.fieldRef` `status.podIP`, or `status.podIPs`, the IPs joined by
/// commas: one here, single-stack), as `makeEnvironmentVariables` does when the container is
/// created, after the sandbox gave the pod its address; `None` when no variable needs it or
/// the pod has no address of its own (the host network: the kubelet layer fills in the node's).
///
/// Upstream: `pkg/kubelet/kubelet_pods.go` (`makeEnvironmentVariables`,
/// `podFieldSelectorRuntimeValue`), Kubernetes 1.27 to 1.37.
fn pod_ip_env(container: &ContainerPlan, pod_ip: Option<IpAddr>) -> Option<Vec<(String, String)>> {
    let ip = pod_ip?.to_string();
    let takes_ip = |name: &str| {
        matches!(
            container.env_field_refs.get(name).map(String::as_str),
            Some("status.podIP" | "status.podIPs")
        )
    };
    if !container
        .env
        .iter()
        .any(|(n, v)| v.is_none() && takes_ip(n))
    {
        return None;
    }
    Some(
        container
            .env
            .iter()
            .filter_map(|(n, v)| match v {
                Some(v) => Some((n.clone(), v.clone())),
                None if takes_ip(n) => Some((n.clone(), ip.clone())),
                None => None,
            })
            .collect(),
    )
}

/// How long the pod waits, once its containers have stopped, for preStop hooks cut at their
/// budget to end (they die with their container, so this is a bound, not a delay).
const LATE_HOOK_WAIT: Duration = Duration::from_secs(1);

/// The exit code the runtime reports for a container it could not start (`StartError`).
const START_ERROR_EXIT_CODE: i32 = 128;

/// The next container event; a closed stream is dropped (and then never ready again), a lagged
/// one goes on with the events still held.
async fn recv_event(
    events: &mut Option<broadcast::Receiver<crate::runtime::ContainerEvent>>,
) -> Option<crate::runtime::ContainerEvent> {
    let Some(rx) = events else {
        return std::future::pending().await;
    };
    match rx.recv().await {
        Ok(ev) => Some(ev),
        Err(broadcast::error::RecvError::Lagged(_)) => None,
        Err(broadcast::error::RecvError::Closed) => {
            *events = None;
            None
        }
    }
}

/// The target of a container's lifecycle hooks.
fn hook_target<'a>(
    pod: &'a str,
    plan: &'a ContainerPlan,
    id: &'a str,
    pod_ip: Option<IpAddr>,
    events: &'a EventRecorder,
) -> HookTarget<'a> {
    HookTarget {
        pod,
        container: &plan.name,
        container_id: id,
        pod_ip,
        ports: &plan.ports,
        events: Some(events),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

async fn join_opt<T>(task: Option<&mut JoinHandle<Vec<T>>>) -> Vec<T> {
    match task {
        Some(t) => t.await.unwrap_or_default(),
        None => std::future::pending().await,
    }
}
