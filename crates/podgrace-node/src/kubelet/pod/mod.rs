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

use podgrace_core::plan::{ContainerPlan, PodPlan};
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_core::rules::backoff::Backoff;
use podgrace_core::rules::podstatus::{self};
use podgrace_core::rules::podworker::{PodUpdate, PodWorker, UpdateType};
use podgrace_core::KubeVersion;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use crate::events::{message, reason, EventRecorder};
use crate::hooks::format_pod;
use crate::kubelet::cri::{new_uid, PodIdentity};
use crate::kubelet::kill::LateHooks;
use crate::kubelet::object::ApiObject;
use crate::kubelet::spec::{container_spec, ContainerSpec, SpecError};
use crate::probes::{ProbeHandle, ProbeKind, ProbeStatus};
use crate::process::ExitStatus;
use crate::runtime::{CallContext, Canceller, RuntimeError, RuntimeService};

mod definition;
mod probe;
mod restart;
mod start;
mod status;
mod terminate;

pub use status::{
    ContainerReport, ContainerWaiting, DeleteKubelet, DeleteRecord, Killer, PodReport, PodStatus,
    PodWorkerState, Termination, TerminationReason,
};
use terminate::LATE_HOOK_WAIT;

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
    /// The node's active pods (the kubelet's pod manager, as its eviction and shutdown
    /// managers see it): the pod is registered there while its task runs. `None`: no
    /// node-level manager sees it.
    pub node: Option<crate::kubelet::active::ActivePods>,
}

/// The status function of a kill the kubelet initiates (`killPodNow`'s `statusFn`): the
/// eviction manager's (`Failed`, `Evicted`, its message) or the node shutdown manager's
/// (`Failed` unless the pod had `Succeeded`, `Terminated`, "Pod was terminated in response
/// to imminent node shutdown."), each with the condition `DisruptionTarget=True`, reason
/// `TerminationByKubelet`, and the same message.
///
/// Upstream: `pkg/kubelet/eviction/eviction_manager.go` `evictPod`,
/// `pkg/kubelet/nodeshutdown/nodeshutdown_manager.go` `podManager.killPods` (the condition
/// from 1.26, GA with `PodDisruptionConditions` in 1.31).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillStatus {
    /// `status.reason`.
    pub reason: String,
    /// `status.message` and the condition's message.
    pub message: String,
}

impl KillStatus {
    /// The phase, reason and message the pod ends with once its containers have stopped,
    /// over the phase they give ([`podgrace_core::rules::podstatus::status_after_kill`]).
    pub fn after_kill(
        &self,
        computed: podgrace_core::rules::apiserver::PodPhase,
        version: KubeVersion,
    ) -> (podgrace_core::rules::apiserver::PodPhase, String, String) {
        let (phase, reason, message) = podgrace_core::rules::podstatus::status_after_kill(
            computed,
            podgrace_core::rules::podstatus::KillStatusFn {
                reason: &self.reason,
                message: &self.message,
            },
            version,
        );
        (phase, reason.to_string(), message.to_string())
    }
}

/// A kill the kubelet's node-level managers ask for (`killPodNow`): the grace-period
/// override, the status it ends with, the event recorded first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillPodNow {
    /// `gracePeriodOverride`, seconds (the pod worker floors it to 1).
    pub grace_period_override: i64,
    /// `KillPodOptions.Evict`: an eviction (true) or a node shutdown (false).
    pub evict: bool,
    /// The status function.
    pub status: KillStatus,
    /// A Warning event recorded on the pod before the kill (`Evicted` with the message),
    /// as `reason` and `message`; `None`: none (node shutdown records none).
    pub event: Option<(&'static str, String)>,
}

/// What can be asked of a running pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodCommand {
    /// `kubectl delete pod` with these flags (already validated).
    Delete(KubectlDeleteFlags),
    /// Node-pressure eviction at a hard or a soft threshold (`evictionMaxPodGracePeriod` in
    /// seconds for the soft one).
    Evict {
        /// A hard threshold (the release's immediate eviction grace), else a soft one.
        hard: bool,
        /// `evictionMaxPodGracePeriod`, in seconds (soft thresholds only).
        eviction_max_pod_grace_period: i64,
    },
    /// The object's container images now (`spec.containers[*].image` and
    /// `spec.initContainers[*].image`, the fields a pod update may change), by container
    /// name: a running container whose image changed is killed with the pod's grace and
    /// started again with the new one (`computePodActions`: the container's hash changed).
    Images(BTreeMap<String, String>),
    /// A kill by the eviction or the node shutdown manager (`killPodNow`).
    KillPodNow(KillPodNow),
}

/// Why a pod could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    /// A container cannot be expressed as a local process. A located error
    /// ([`SpecError::NoCommand`], `FILE:LINE:COL: PATH: ...`) is shown as is; the others name
    /// the pod.
    #[error("{}", spec_message(pod, source))]
    Spec {
        /// The pod, as the plan names it.
        pod: String,
        /// What cannot be run.
        source: SpecError,
    },
    /// A volume could not be set up (the kubelet's `FailedMount`).
    #[error("pod {pod}: {source}")]
    Volume {
        /// The pod, as the plan names it.
        pod: String,
        /// The volume's error.
        source: crate::kubelet::volumes::VolumeError,
    },
    /// The runtime refused the sandbox (the kubelet's `FailedCreatePodSandBox`).
    #[error("pod {pod}: {source}{}", hint.as_ref().map(|h| format!("\n{h}")).unwrap_or_default())]
    Sandbox {
        /// The pod, as the plan names it.
        pod: String,
        /// `RunPodSandbox`'s error.
        source: Box<RuntimeError>,
        /// Why, when podgrace can tell (a memory limit too low for any container to start:
        /// [`podgrace_core::rules::resources::memory_limit_too_low_hint`]).
        hint: Option<String>,
    },
    /// The pod task ended abnormally.
    #[error("pod {pod}: the pod task failed: {reason}")]
    Task {
        /// The pod, as the plan names it.
        pod: String,
        /// The join error (a panic or a cancellation).
        reason: String,
    },
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
        phase: PodWorkerState::Starting,
        pod_ip: None,
        ready: false,
        terminating_since: None,
        grace_period_seconds: None,
        last_delete: None,
        killed: None,
        container_ids: Vec::new(),
        waiting: Vec::new(),
    });
    let name = plan.name.clone();
    let commands = cmd_tx.clone();
    let watch = status_rx.clone();
    let task = tokio::spawn(async move {
        let pod = Pod::new(runtime, plan, opts, events, status_tx)?;
        // In the node's active pods while the task runs (dropped with it).
        let _active = pod.opts.node.as_ref().map(|node| {
            node.register(crate::kubelet::active::ActivePod::new(
                pod.identity.clone(),
                pod.plan.clone(),
                format!(
                    "{}{}",
                    pod.rt.cgroup_root(),
                    crate::kubelet::cri::pod_cgroup_parent(pod.plan.qos_class, &pod.identity.uid)
                ),
                commands,
                watch,
            ))
        });
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
    /// The last exit was the kernel's OOM kill (the runtime's reason `OOMKilled`).
    oom_killed: bool,
    started_at: Option<Instant>,
    /// The crash back-off (`flowcontrol.Backoff` for this container), its times in milliseconds
    /// since `epoch`.
    back_off: Backoff,
    epoch: Instant,
    /// Create-and-start attempts, failed ones included (a failed start counts as a run that
    /// exited, as the kubelet's restartCount does).
    attempts: u32,
    /// Restart waiting for its back-off to end, or the pod worker's next sync after a failed
    /// create (a container in [`Ctr::waiting`]).
    restart_at: Option<Instant>,
    /// Why it waits after the kubelet could not create it (`reasonCache`): the waiting reason
    /// ([`crate::events::waiting`]) and message; cleared once an instance is created.
    waiting: Option<(&'static str, String)>,
    /// Killed by the kubelet after a liveness or startup failure: restarts unless the pod
    /// never restarts, whatever its exit code.
    probe_killed: bool,
    /// The last instance never ran: the runtime refused to start it. Its terminated state has
    /// containerd's reason `StartError` and exit code 128 (`errorStartReason`,
    /// `pkg/cri/server/container_start.go`, containerd 1.6 to 2.x), which kubectl shows.
    start_error: bool,
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
    /// The status function of a kubelet-initiated kill (eviction, node shutdown).
    killed: Option<KillStatus>,
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
    /// The image manager's pull back-off and last pull error, per image.
    images: start::ImagePulls,
    /// Probe results: (container index, kind, status).
    probe_tx: mpsc::UnboundedSender<(usize, ProbeKind, ProbeStatus)>,
    probe_rx: mpsc::UnboundedReceiver<(usize, ProbeKind, ProbeStatus)>,
    /// Container kills after a probe failure: (container index, termination record).
    probe_kill_tx: mpsc::UnboundedSender<(usize, Termination)>,
    probe_kill_rx: mpsc::UnboundedReceiver<(usize, Termination)>,
    /// Cancels the probe kills in flight when the pod terminates.
    probe_kill_cancel: Vec<Canceller>,
    /// The `StartContainer` call in flight, if any (finished before a termination starts).
    start_in_flight: Option<start::StartInFlight>,
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
                        oom_killed: false,
                        started_at: None,
                        back_off: Backoff::crash_loop(),
                        epoch: Instant::now(),
                        attempts: 0,
                        restart_at: None,
                        waiting: None,
                        probe_killed: false,
                        start_error: false,
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
            killed: None,
            in_flight: None,
            kill_grace: None,
            pod_killer: tokio::task::JoinSet::new(),
            late_hooks: LateHooks::default(),
            deletes: Vec::new(),
            kill_pod_now_deadline: None,
            failed: false,
            images: start::ImagePulls::default(),
            probe_tx,
            probe_rx,
            probe_kill_tx,
            probe_kill_rx,
            probe_kill_cancel: Vec::new(),
            start_in_flight: None,
        })
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
        tracing::debug!(target: "podgrace::start", pod = %self.plan.name, "RunPodSandbox");
        let sandbox = match self.rt.run_pod_sandbox(&ctx, config).await {
            Ok(id) => id,
            Err(source) => {
                if let Some(v) = self.volumes.take() {
                    v.remove();
                }
                return Err(PodError::Sandbox {
                    pod: self.display.clone(),
                    hint: self.memory_hint(&source.to_string()),
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
        tracing::debug!(target: "podgrace::start", pod = %self.plan.name, "sandbox ready");
        self.container_events = self.rt.container_events(&sandbox);
        self.sandbox = Some(sandbox);
        self.spawn_probes();
        self.publish(PodWorkerState::Starting);

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
                // SyncPod returns only once its StartContainer call has: the container it
                // started is killed with the rest.
                self.finish_start_in_flight().await;
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
        let evicted = self.worker.evicted.then(|| KillStatus {
            reason: podgrace_core::rules::eviction::EVICTED_REASON.into(),
            message: String::new(),
        });
        self.api.terminated(
            terminal_at,
            self.killed.as_ref().or(evicted.as_ref()),
            init,
            main,
        );
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
        self.publish(PodWorkerState::Terminated);
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
}

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
