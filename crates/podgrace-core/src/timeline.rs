//! One pod's termination timeline for one trigger: the rules composed, as `podgrace explain`
//! shows them.
//!
//! Seconds count from the moment the kubelet starts terminating the pod (t = 0). Where a hook's
//! length is unknown, `min` assumes it returns at once and `max` that it uses its whole budget; a
//! hook of known length (sleep action, `sleep N`) gives `min == max`. For sidecars, `min` also
//! assumes every app exits at once on its stop signal and `max` that each runs until SIGKILL.

use crate::plan::{ContainerPlan, ContainerRole, Handler, PodPlan};
use crate::rules::apiserver::{self, KubectlDeleteFlags, PodForDelete, PodPhase};
use crate::rules::kuberuntime::{self, GraceFields, KillContainer, KillReason};
use crate::rules::podworker::{self, GraceInputs};
use crate::rules::{eviction, nodeshutdown, runtime};
use crate::{KubeVersion, Seconds};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// What starts the termination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// `kubectl delete pod` (the pod's own TGPS).
    Delete,
    /// `kubectl delete pod --grace-period=N`, seconds.
    DeleteWithGrace(i64),
    /// `kubectl delete pod --grace-period=0 --force`.
    ForceDelete,
    /// Node-pressure eviction at a soft threshold.
    EvictSoft,
    /// Node-pressure eviction at a hard threshold.
    EvictHard,
    /// A failed liveness probe restarts the named container.
    Liveness(String),
    /// A failed startup probe restarts the named container.
    Startup(String),
    /// Graceful node shutdown.
    NodeShutdown,
}

/// A trigger string that is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid trigger {0:?}: expected delete, delete:N, force-delete, evict-soft, evict-hard, liveness:CONTAINER, startup:CONTAINER or node-shutdown")]
pub struct ParseTriggerError(pub String);

impl FromStr for Trigger {
    type Err = ParseTriggerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseTriggerError(s.to_string());
        Ok(match s {
            "delete" => Trigger::Delete,
            "force-delete" => Trigger::ForceDelete,
            "evict-soft" => Trigger::EvictSoft,
            "evict-hard" => Trigger::EvictHard,
            "node-shutdown" => Trigger::NodeShutdown,
            _ => match s.split_once(':') {
                Some(("delete", n)) => {
                    let n: i64 = n.parse().map_err(|_| bad())?;
                    if n < 0 {
                        return Err(bad());
                    }
                    Trigger::DeleteWithGrace(n)
                }
                Some(("liveness", c)) if !c.is_empty() => Trigger::Liveness(c.to_string()),
                Some(("startup", c)) if !c.is_empty() => Trigger::Startup(c.to_string()),
                _ => return Err(bad()),
            },
        })
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Delete => f.write_str("delete"),
            Trigger::DeleteWithGrace(n) => write!(f, "delete:{n}"),
            Trigger::ForceDelete => f.write_str("force-delete"),
            Trigger::EvictSoft => f.write_str("evict-soft"),
            Trigger::EvictHard => f.write_str("evict-hard"),
            Trigger::Liveness(c) => write!(f, "liveness:{c}"),
            Trigger::Startup(c) => write!(f, "startup:{c}"),
            Trigger::NodeShutdown => f.write_str("node-shutdown"),
        }
    }
}

/// Kubelet settings that shape some triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeletConfig {
    /// `evictionMaxPodGracePeriod`, seconds (kubelet default 0).
    pub eviction_max_pod_grace_period: i64,
    /// `shutdownGracePeriod`, seconds (kubelet default 0, which disables graceful node
    /// shutdown; podgrace assumes 30 unless told).
    pub shutdown_grace_period: i64,
    /// `shutdownGracePeriodCriticalPods`, seconds (podgrace assumes 10 unless told).
    pub shutdown_grace_period_critical_pods: i64,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            eviction_max_pod_grace_period: 0,
            shutdown_grace_period: 30,
            shutdown_grace_period_critical_pods: 10,
        }
    }
}

/// Everything a timeline depends on besides the pod.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    pub version: KubeVersion,
    pub kubelet: KubeletConfig,
}

/// A time that depends on how long hooks and apps take: its earliest and latest value, seconds
/// from t = 0 (exact; see [`Seconds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Span {
    pub min: Seconds,
    pub max: Seconds,
}

impl Span {
    fn ms(min: i128, max: i128) -> Span {
        Span {
            min: Seconds::from_ms(min),
            max: Seconds::from_ms(max),
        }
    }
}

/// A container's preStop in the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreStop {
    /// `exec`, `httpGet` or `sleep`.
    pub action: &'static str,
    /// When the hook starts, seconds (always 0: the kubelet runs it first).
    pub start_seconds: Seconds,
    /// When the kubelet stops waiting for it, seconds.
    pub end_seconds: Span,
}

/// One container's termination.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerTimeline {
    pub name: String,
    /// `main` or `sidecar`.
    pub role: &'static str,
    /// `None` when the container has no preStop or the hook is skipped (budget 0).
    pub pre_stop: Option<PreStop>,
    /// The signal sent first: the stop signal, or `SIGKILL` when the runtime gets a timeout of 0.
    pub stop_signal: String,
    /// When the stop signal is sent, seconds.
    pub stop_signal_seconds: Span,
    /// When SIGKILL comes if the container has not exited by then.
    pub kill_seconds: Span,
    /// The StopContainer timeout, seconds, in the `min` and `max` cases.
    #[serde(skip)]
    pub stop_timeout_seconds: (i64, i64),
    /// The preStop budget, seconds (the cut point).
    #[serde(skip)]
    pub pre_stop_budget_seconds: Option<i64>,
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// Something the user should know about this termination.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable rule id.
    pub rule: &'static str,
    pub severity: Severity,
    pub message: String,
}

/// The termination of one pod for one trigger (the `explain` JSON contract).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// `namespace/name` (or the name alone).
    pub pod: String,
    /// The object the pod comes from: `Pod`, `Deployment`, ...
    pub kind: &'static str,
    /// `metadata.namespace` as written (`None` when unset).
    pub namespace: Option<String>,
    /// The file the object is in (`<stdin>` for standard input), and where the object starts.
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub trigger: String,
    pub kubernetes_version: String,
    /// The grace period the kubelet works with, seconds (pod-level effective grace; for a probe
    /// kill, the container's base grace).
    pub grace_period_seconds: i64,
    pub containers: Vec<ContainerTimeline>,
    pub findings: Vec<Finding>,
}

/// A timeline that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimelineError {
    /// The trigger does not apply to this pod (see [`applies`]). `pod` is `namespace/name` (or
    /// the name alone).
    #[error("pod {pod}: {reason}")]
    NotApplicable { pod: String, reason: NotApplicable },
    /// `node-shutdown` with a kubelet whose graceful node shutdown is off.
    #[error("graceful node shutdown is disabled (shutdownGracePeriod {shutdown_grace_period} s, shutdownGracePeriodCriticalPods {critical} s): the kubelet does not terminate pods on shutdown, they die with the node")]
    GracefulShutdownDisabled {
        shutdown_grace_period: i64,
        critical: i64,
    },
}

/// Why a trigger that names a container (`liveness:C`, `startup:C`) does not apply to a pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotApplicable {
    /// The pod runs no container of that name; `known` lists the ones it runs, comma-separated.
    #[error("no container named {container:?} (containers: {known})")]
    NoSuchContainer { container: String, known: String },
    /// The named container has no probe of that kind (`liveness` or `startup`).
    #[error("container {container:?} has no {probe} probe")]
    NoProbe {
        container: String,
        probe: &'static str,
    },
}

/// Whether `trigger` can happen to `pod`: a probe trigger needs a running container of that name
/// (a main container or a native sidecar) with a probe of that kind; every other trigger applies
/// to every pod.
///
/// # Errors
/// [`NotApplicable`] saying what is missing.
pub fn applies(pod: &PodPlan, trigger: &Trigger) -> Result<(), NotApplicable> {
    probed_container(pod, trigger).map(|_| ())
}

/// The container a probe trigger kills, with its probe and the probe's kind; `None` for a trigger
/// that is not a probe kill.
fn probed_container<'p>(
    pod: &'p PodPlan,
    trigger: &Trigger,
) -> Result<Option<(&'p ContainerPlan, &'p crate::plan::Probe, &'static str)>, NotApplicable> {
    let (name, kind) = match trigger {
        Trigger::Liveness(name) => (name, "liveness"),
        Trigger::Startup(name) => (name, "startup"),
        _ => return Ok(None),
    };
    let c = pod
        .running_containers()
        .find(|c| &c.name == name)
        .ok_or_else(|| NotApplicable::NoSuchContainer {
            container: name.clone(),
            known: pod
                .running_containers()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let probe = match trigger {
        Trigger::Startup(_) => &c.startup_probe,
        _ => &c.liveness_probe,
    };
    let probe = probe.as_ref().ok_or_else(|| NotApplicable::NoProbe {
        container: name.clone(),
        probe: kind,
    })?;
    Ok(Some((c, probe, kind)))
}

/// How the kubelet is asked to terminate: the result of the API server and the eviction or
/// shutdown manager for a trigger.
struct Start {
    /// DGPS the kubelet sees.
    dgps: Option<i64>,
    /// Kill override from the kubelet itself (eviction, node shutdown).
    kill_override: Option<i64>,
    /// The API object is removed at once (force delete).
    removed_from_api: bool,
}

fn pod_name(pod: &PodPlan) -> String {
    match &pod.namespace {
        Some(ns) => format!("{ns}/{}", pod.name),
        None => pod.name.clone(),
    }
}

/// Builds the timeline of `pod` for `trigger`.
///
/// # Errors
/// [`TimelineError::NotApplicable`] when a probe trigger names a container that does not exist or
/// has no such probe; [`TimelineError::GracefulShutdownDisabled`] for `node-shutdown` with
/// graceful node shutdown off.
pub fn explain(
    pod: &PodPlan,
    trigger: &Trigger,
    opts: &Options,
) -> Result<Timeline, TimelineError> {
    let mut findings = Vec::new();
    let version = opts.version;
    let tgps = pod.termination_grace_period_seconds;

    let probed = probed_container(pod, trigger).map_err(|reason| TimelineError::NotApplicable {
        pod: pod_name(pod),
        reason,
    })?;
    if let Some((c, probe, kind)) = probed {
        return Ok(probe_kill(pod, trigger, c, probe, kind, opts));
    }

    if *trigger == Trigger::NodeShutdown {
        let k = opts.kubelet;
        if nodeshutdown::migrate_config(
            k.shutdown_grace_period,
            k.shutdown_grace_period_critical_pods,
        )
        .is_none()
        {
            return Err(TimelineError::GracefulShutdownDisabled {
                shutdown_grace_period: k.shutdown_grace_period,
                critical: k.shutdown_grace_period_critical_pods,
            });
        }
    }
    let start = resolve_start(pod, trigger, opts, &mut findings);
    let (effective, _) = podworker::effective_grace_period(
        GraceInputs {
            previous: 0,
            deletion_grace_period_seconds: start.dgps,
            termination_grace_period_seconds: Some(tgps),
            override_seconds: start.kill_override,
        },
        version,
    );
    let override_seconds = podworker::kill_pod_override(effective, start.kill_override, version);
    trigger_findings(pod, trigger, opts, &start, effective, &mut findings);
    if matches!(trigger, Trigger::EvictSoft | Trigger::EvictHard) && pod.is_critical() {
        // evictPod refuses critical pods and moves on to the next ranked pod.
        findings.push(Finding {
            rule: "critical-pod-not-evicted",
            severity: Severity::Info,
            message: format!(
                "priority {} makes this a critical pod: the eviction manager refuses to evict it (evictPod, pkg/kubelet/eviction/eviction_manager.go)",
                pod.effective_priority().unwrap_or_default()
            ),
        });
        return Ok(Timeline {
            pod: pod_name(pod),
            kind: pod.kind.as_str(),
            namespace: pod.namespace.clone(),
            file: pod.span.file.clone(),
            line: pod.span.line,
            column: pod.span.column,
            trigger: trigger.to_string(),
            kubernetes_version: version.to_string(),
            grace_period_seconds: effective,
            containers: Vec::new(),
            findings,
        });
    }
    let base = kuberuntime::set_termination_grace_period(
        GraceFields {
            deletion_grace_period_seconds: start.dgps,
            termination_grace_period_seconds: Some(tgps),
            ..Default::default()
        },
        KillReason::Other,
    );
    // A plain delete of a pod whose TGPS is 0 is a force delete too; `zero-grace-force-deletes`
    // says so (as lint does), so this is the force-delete trigger's own.
    if start.removed_from_api && *trigger != Trigger::Delete {
        findings.push(Finding {
            rule: "force-delete-keeps-running",
            severity: Severity::Warning,
            message: format!(
                "the Pod object is removed from the API at once, but the kubelet still terminates it with a grace of {effective} s: its processes may outlive the object, and a replacement can start beside them"
            ),
        });
    }
    let ordering = version.at_least(1, 29) && pod.sidecars().next().is_some();
    let containers = pod_kill(pod, base, override_seconds, version, ordering);
    if let Some(f) = negative_grace_period(pod, &containers) {
        findings.insert(0, f);
    }
    container_findings(pod, &containers, effective, version, &mut findings);
    Ok(Timeline {
        pod: pod_name(pod),
        kind: pod.kind.as_str(),
        namespace: pod.namespace.clone(),
        file: pod.span.file.clone(),
        line: pod.span.line,
        column: pod.span.column,
        trigger: trigger.to_string(),
        kubernetes_version: version.to_string(),
        grace_period_seconds: effective,
        containers,
        findings,
    })
}

/// API server, eviction manager or shutdown manager: how the kubelet is asked to terminate.
fn resolve_start(
    pod: &PodPlan,
    trigger: &Trigger,
    opts: &Options,
    findings: &mut Vec<Finding>,
) -> Start {
    let tgps = pod.termination_grace_period_seconds;
    let api_delete = |flags: KubectlDeleteFlags| {
        // The flags are built here, so they are always valid.
        let request = apiserver::kubectl_delete(flags).unwrap_or(apiserver::KubectlDeleteRequest {
            grace_period_seconds: None,
            warning: None,
        });
        let stored = apiserver::StoredPod {
            pod: PodForDelete {
                node_name: "node".into(),
                phase: PodPhase::Running,
                termination_grace_period_seconds: Some(tgps),
            },
            ..Default::default()
        };
        let out = apiserver::store_delete(
            &stored,
            true,
            request.grace_period_seconds,
            0,
            apiserver::clamps_deletion_timestamp(opts.version),
        );
        Start {
            dgps: out.decision.object.deletion_grace_period_seconds,
            kill_override: None,
            removed_from_api: out.was_deleted,
        }
    };
    match trigger {
        Trigger::Delete => {
            let s = api_delete(KubectlDeleteFlags::default());
            findings.extend(zero_grace_force_deletes(pod));
            s
        }
        Trigger::DeleteWithGrace(n) => {
            if *n == 0 {
                findings.push(Finding {
                    rule: "grace-period-zero-is-one",
                    severity: Severity::Info,
                    message: "kubectl sends --grace-period=0 without --force as 1".into(),
                });
            }
            api_delete(KubectlDeleteFlags {
                grace_period: *n,
                ..Default::default()
            })
        }
        Trigger::ForceDelete => api_delete(KubectlDeleteFlags {
            grace_period: 0,
            force: true,
            now: false,
        }),
        Trigger::EvictHard => kubelet_kill(eviction::grace_period_override(
            true,
            0,
            Some(tgps),
            opts.version,
        )),
        Trigger::EvictSoft => {
            let max = opts.kubelet.eviction_max_pod_grace_period;
            kubelet_kill(eviction::grace_period_override(
                false,
                max,
                Some(tgps),
                opts.version,
            ))
        }
        Trigger::NodeShutdown => {
            let k = opts.kubelet;
            let groups = nodeshutdown::migrate_config(
                k.shutdown_grace_period,
                k.shutdown_grace_period_critical_pods,
            )
            .unwrap_or_default();
            let period =
                nodeshutdown::group_by_priority(&groups, &[((), pod.effective_priority())])
                    .ok()
                    .and_then(|gs| gs.into_iter().find(|g| !g.pods.is_empty()))
                    .map(|g| g.group.shutdown_grace_period_seconds)
                    .unwrap_or(0);
            kubelet_kill(nodeshutdown::pod_grace_period_override(period, Some(tgps)))
        }
        Trigger::Liveness(_) | Trigger::Startup(_) => Start {
            dgps: None,
            kill_override: None,
            removed_from_api: false,
        },
    }
}

/// Findings that depend on the trigger and on what the pod worker made of it.
fn trigger_findings(
    pod: &PodPlan,
    trigger: &Trigger,
    opts: &Options,
    start: &Start,
    effective: i64,
    findings: &mut Vec<Finding>,
) {
    let tgps = pod.termination_grace_period_seconds;
    if let (Trigger::EvictSoft, Some(o)) = (trigger, start.kill_override) {
        let max = opts.kubelet.eviction_max_pod_grace_period;
        if let Some(f) = soft_eviction_is_immediate(pod, max, opts.version) {
            findings.push(f);
        } else if o <= 0 && effective == tgps {
            findings.push(Finding {
                rule: "zero-override-means-full-grace",
                severity: Severity::Info,
                message: format!(
                    "Kubernetes {} treats the override {o} as unset and grants the full terminationGracePeriodSeconds ({tgps} s); from 1.31 on the same eviction kills within about 1 s (issues #115819, #120449)",
                    opts.version
                ),
            });
        }
    }
    if let (Trigger::EvictHard | Trigger::ForceDelete, true) =
        (trigger, effective == tgps && tgps > 1)
    {
        findings.push(Finding {
            rule: "zero-override-means-full-grace",
            severity: Severity::Info,
            message: format!(
                "Kubernetes {} turns the grace of 0 into the full terminationGracePeriodSeconds ({tgps} s); from 1.31 on it is 1 s (issues #113717, #115819)",
                opts.version
            ),
        });
    }
}

/// A kill the kubelet starts itself (eviction, node shutdown) with a grace-period override.
fn kubelet_kill(override_seconds: i64) -> Start {
    Start {
        dgps: None,
        kill_override: Some(override_seconds),
        removed_from_api: false,
    }
}

/// The stop signal the runtime sends to a container: `lifecycle.stopSignal`, else the image's
/// STOPSIGNAL (for the official images podgrace knows), else SIGTERM.
fn stop_signal(c: &ContainerPlan) -> String {
    match runtime::container_stop_signal(c.stop_signal.as_deref(), c.image.as_deref()) {
        Ok(sig) => sig.to_string(),
        // Manifest validation rejects unknown signal names; keep the text if one slips through.
        Err(_) => c.stop_signal.clone().unwrap_or_else(|| "SIGTERM".into()),
    }
}

/// The hook's budget (seconds) and its end in the min and max cases (ms), or `None` when it
/// does not run.
fn hook_ends(c: &ContainerPlan, kill: &KillContainer) -> Option<(i64, i128, i128)> {
    let budget = kill.pre_stop_budget(c.pre_stop.is_some())?;
    let budget_ms = i128::from(budget) * 1000;
    let hook = c.pre_stop.as_ref();
    let (lo, hi) = match (
        hook.and_then(Handler::known_duration),
        hook.and_then(Handler::min_duration),
    ) {
        (Some(d), _) => (d.ms().min(budget_ms), d.ms().min(budget_ms)),
        // Known to last at least `m` (a script that sleeps first): no earlier than that.
        (None, Some(m)) => (m.ms().min(budget_ms), budget_ms),
        (None, None) => (0, budget_ms),
    };
    Some((budget, lo, hi))
}

/// One scenario (min or max) of one container: stop signal and kill instants (ms) and the
/// StopContainer timeout (seconds).
#[derive(Clone, Copy)]
struct Instants {
    stop_ms: i128,
    kill_ms: i128,
    timeout_s: i64,
}

/// The kill instant: the StopContainer timeout after the stop signal (a timeout of 0 or less
/// kills at once).
fn kill_at(stop_ms: i128, timeout_s: i64) -> i128 {
    stop_ms.saturating_add(i128::from(timeout_s.max(0)) * 1000)
}

fn main_instants(kill: &KillContainer, hook_end_ms: Option<i128>) -> Instants {
    let mut k = *kill;
    let stop_ms = hook_end_ms.unwrap_or(0);
    if hook_end_ms.is_some() {
        k.pre_stop_finished(stop_ms);
    }
    let timeout_s = k.stop_timeout();
    Instants {
        stop_ms,
        kill_ms: kill_at(stop_ms, timeout_s),
        timeout_s,
    }
}

/// Every running container of the pod killed in parallel (`killContainersWithSyncResult`).
fn pod_kill(
    pod: &PodPlan,
    base: i64,
    override_seconds: Option<i64>,
    version: KubeVersion,
    ordering: bool,
) -> Vec<ContainerTimeline> {
    let kill = KillContainer::new(base, override_seconds, version);
    let mut out: Vec<ContainerTimeline> = Vec::new();
    // Exit instants of the containers already placed, per scenario: min (apps exit on the stop
    // signal) and max (apps run until SIGKILL).
    let mut exits: Vec<(String, i128, i128)> = Vec::new();
    let mains: Vec<&ContainerPlan> = pod.containers.iter().collect();
    for c in &mains {
        let hook = hook_ends(c, &kill);
        let signal = stop_signal(c);
        let lo = signal_effect(&signal, main_instants(&kill, hook.map(|h| h.1)));
        let hi = signal_effect(&signal, main_instants(&kill, hook.map(|h| h.2)));
        exits.push((c.name.clone(), lo.stop_ms, hi.kill_ms));
        out.push(timeline_entry(c, signal, hook, lo, hi));
    }
    let sidecars: Vec<&ContainerPlan> = pod.sidecars().collect();
    let mut sidecar_entries = Vec::new();
    let mut next_sidecar: Option<(i128, i128)> = None;
    // The main containers' last exits, once (not once per sidecar).
    let main_lo = exits.iter().map(|e| e.1).max();
    let main_hi = exits.iter().map(|e| e.2).max();
    for c in sidecars.iter().rev() {
        let hook = hook_ends(c, &kill);
        let signal = stop_signal(c);
        let (lo, hi) = if ordering {
            let prereq_lo = main_lo.into_iter().chain(next_sidecar.map(|n| n.0)).max();
            let prereq_hi = main_hi.into_iter().chain(next_sidecar.map(|n| n.1)).max();
            (
                signal_effect(
                    &signal,
                    sidecar_instants(&kill, hook.map(|h| h.1), prereq_lo),
                ),
                signal_effect(
                    &signal,
                    sidecar_instants(&kill, hook.map(|h| h.2), prereq_hi),
                ),
            )
        } else {
            (
                signal_effect(&signal, main_instants(&kill, hook.map(|h| h.1))),
                signal_effect(&signal, main_instants(&kill, hook.map(|h| h.2))),
            )
        };
        next_sidecar = Some((lo.stop_ms, hi.kill_ms));
        sidecar_entries.push(timeline_entry(c, signal, hook, lo, hi));
    }
    sidecar_entries.reverse();
    sidecar_entries.extend(out);
    sidecar_entries
}

/// A stop signal of SIGKILL ends the container at once: there is no later SIGKILL to wait for.
fn signal_effect(signal: &str, i: Instants) -> Instants {
    if i.timeout_s > 0 && signal == "SIGKILL" {
        Instants {
            kill_ms: i.stop_ms,
            ..i
        }
    } else {
        i
    }
}

fn sidecar_instants(
    kill: &KillContainer,
    hook_end_ms: Option<i128>,
    prereq_exit_ms: Option<i128>,
) -> Instants {
    let mut k = *kill;
    let start = hook_end_ms.unwrap_or(0);
    if hook_end_ms.is_some() {
        k.pre_stop_finished(start);
    }
    let wait = kuberuntime::wait_for_turn_ms(start, &[prereq_exit_ms], k.turn_budget());
    k.turn_finished(wait);
    let stop_ms = start.saturating_add(wait);
    let timeout_s = k.stop_timeout();
    Instants {
        stop_ms,
        kill_ms: kill_at(stop_ms, timeout_s),
        timeout_s,
    }
}

fn timeline_entry(
    c: &ContainerPlan,
    signal: String,
    hook: Option<(i64, i128, i128)>,
    lo: Instants,
    hi: Instants,
) -> ContainerTimeline {
    let immediate_kill = lo.timeout_s <= 0 && hi.timeout_s <= 0;
    ContainerTimeline {
        name: c.name.clone(),
        role: if c.role == ContainerRole::Sidecar {
            "sidecar"
        } else {
            "main"
        },
        pre_stop: hook
            .zip(c.pre_stop.as_ref())
            .map(|((_, lo_end, hi_end), h)| PreStop {
                action: h.action(),
                start_seconds: Seconds::ZERO,
                end_seconds: Span::ms(lo_end, hi_end),
            }),
        // containerd sends no stop signal at all for a timeout of 0 or less.
        stop_signal: if immediate_kill {
            "SIGKILL".to_string()
        } else {
            signal
        },
        stop_signal_seconds: Span::ms(lo.stop_ms, hi.stop_ms),
        kill_seconds: Span::ms(lo.kill_ms.min(hi.kill_ms), lo.kill_ms.max(hi.kill_ms)),
        stop_timeout_seconds: (lo.timeout_s, hi.timeout_s),
        pre_stop_budget_seconds: hook.map(|h| h.0),
    }
}

/// A liveness or startup probe failure: only that container is killed, with no pod-level
/// override; its base grace comes from the probe (KEP-2238) when set.
fn probe_kill(
    pod: &PodPlan,
    trigger: &Trigger,
    c: &ContainerPlan,
    probe: &crate::plan::Probe,
    kind: &'static str,
    opts: &Options,
) -> Timeline {
    let reason = match trigger {
        Trigger::Startup(_) => KillReason::StartupProbe,
        _ => KillReason::LivenessProbe,
    };
    let base = kuberuntime::set_termination_grace_period(
        GraceFields {
            deletion_grace_period_seconds: None,
            termination_grace_period_seconds: Some(pod.termination_grace_period_seconds),
            liveness_probe_seconds: c
                .liveness_probe
                .as_ref()
                .and_then(|p| p.termination_grace_period_seconds),
            startup_probe_seconds: c
                .startup_probe
                .as_ref()
                .and_then(|p| p.termination_grace_period_seconds),
        },
        reason,
    );
    let kill = KillContainer::new(base, None, opts.version);
    let hook = hook_ends(c, &kill);
    let signal = stop_signal(c);
    let lo = signal_effect(&signal, main_instants(&kill, hook.map(|h| h.1)));
    let hi = signal_effect(&signal, main_instants(&kill, hook.map(|h| h.2)));
    let entry = timeline_entry(c, signal, hook, lo, hi);
    let mut findings = Vec::new();
    let containers = vec![entry];
    if base == pod.termination_grace_period_seconds {
        // The probe kill uses the pod's grace (no probe-level one): the negative value matters.
        findings.extend(negative_grace_period(pod, &containers));
    }
    findings.extend(probe_kill_uses_pod_grace(pod, kind, probe));
    container_findings(pod, &containers, base, opts.version, &mut findings);
    Timeline {
        pod: pod_name(pod),
        kind: pod.kind.as_str(),
        namespace: pod.namespace.clone(),
        file: pod.span.file.clone(),
        line: pod.span.line,
        column: pod.span.column,
        trigger: trigger.to_string(),
        kubernetes_version: opts.version.to_string(),
        grace_period_seconds: base,
        containers,
        findings,
    }
}

/// Findings that follow from the computed container timelines.
fn container_findings(
    pod: &PodPlan,
    containers: &[ContainerTimeline],
    grace: i64,
    version: KubeVersion,
    findings: &mut Vec<Finding>,
) {
    // By name, once: a lookup per container would make this quadratic in containers.
    let plans: std::collections::HashMap<&str, &ContainerPlan> = pod
        .running_containers()
        .map(|c| (c.name.as_str(), c))
        .collect();
    for t in containers {
        let Some(&c) = plans.get(t.name.as_str()) else {
            continue;
        };
        findings.extend(container_findings_of(pod, c, t, grace, version));
    }
}

/// The findings of one container's termination `t` (a timeline entry of `c`) under a grace of
/// `grace` seconds: `prestop-exceeds-grace`, `tcpsocket-hook-not-run`, `prestop-skipped`,
/// `immediate-sigkill`, `stop-signal-sigkill`, `stop-signal-feature-gate`,
/// `stop-signal-from-image` and `kill-beyond-grace`, in that order. Shared by explain (every
/// trigger) and lint (the `delete` timeline).
pub fn container_findings_of(
    pod: &PodPlan,
    c: &ContainerPlan,
    t: &ContainerTimeline,
    grace: i64,
    version: KubeVersion,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let timeout_zero = t.stop_timeout_seconds.0 <= 0 && t.stop_timeout_seconds.1 <= 0;
    let kill_max = t.kill_seconds.max;
    findings.extend(prestop_exceeds_grace(pod, c, t));

    if let (Some(Handler::TcpSocket { .. }), Some(_)) = (&c.pre_stop, &t.pre_stop) {
        findings.push(Finding {
                rule: "tcpsocket-hook-not-run",
                severity: Severity::Warning,
                message: format!(
                    "container {}: the kubelet does not run tcpSocket lifecycle handlers; the preStop fails at once (FailedPreStopHook) and the stop signal follows at t=0",
                    t.name
                ),
            });
    }
    if c.pre_stop.is_some() && t.pre_stop.is_none() {
        findings.push(Finding {
            rule: "prestop-skipped",
            severity: Severity::Warning,
            message: format!(
                "container {}: the preStop hook is skipped because the grace budget is 0",
                t.name
            ),
        });
    }
    if timeout_zero {
        findings.push(Finding {
                rule: "immediate-sigkill",
                severity: Severity::Warning,
                message: format!(
                    "container {}: Kubernetes {version} hands the runtime a StopContainer timeout of 0, so containerd sends SIGKILL without a stop signal (issue #92432)",
                    t.name
                ),
            });
    } else if t.stop_signal == "SIGKILL" {
        findings.push(Finding {
                rule: "stop-signal-sigkill",
                severity: Severity::Warning,
                message: format!(
                    "container {}: its stop signal is SIGKILL, so it is killed at t={} without any chance to shut down; SIGKILL cannot be caught or handled",
                    t.name,
                    t.stop_signal_seconds.min
                ),
            });
    }
    if c.stop_signal.is_some() {
        findings.push(Finding {
                rule: "stop-signal-feature-gate",
                severity: Severity::Info,
                message: format!(
                    "container {}: lifecycle.stopSignal needs the ContainerStopSignals feature gate (alpha since 1.33, off by default) on the API server and the kubelet, and a runtime that honours it (containerd 2.3+, CRI-O); without the gate the field is dropped and the image's STOPSIGNAL or SIGTERM applies",
                    t.name
                ),
            });
    }
    if c.stop_signal.is_none() && t.stop_signal != "SIGTERM" && !timeout_zero {
        findings.push(Finding {
                rule: "stop-signal-from-image",
                severity: Severity::Info,
                message: format!(
                    "container {}: the stop signal {} is the STOPSIGNAL of the official image {} (inferred from the image name; set lifecycle.stopSignal to be explicit)",
                    t.name,
                    t.stop_signal,
                    c.image.as_deref().unwrap_or_default()
                ),
            });
    }
    if t.kill_seconds.max > Seconds::from_secs(grace).saturating_add(Seconds::from_secs(2)) {
        let why = if version.at_least(1, 28) {
            "a native sidecar deducts its preStop and its wait for its turn in whole seconds, and each truncation can leave up to a second before the 2 s floor".to_string()
        } else {
            format!("Kubernetes {version} re-grants the full grace after the preStop hook (issue #115817, fixed in 1.28)")
        };
        findings.push(Finding {
                rule: "kill-beyond-grace",
                severity: Severity::Warning,
                message: format!(
                    "container {}: SIGKILL can come as late as t={kill_max}, more than the grace period of {grace} s plus 2 s: {why}",
                    t.name
                ),
            });
    }
    findings
}

/// The largest terminationGracePeriodSeconds the API accepts, seconds: an int64 that
/// validation bounds below only (`ValidateNonnegativeField`; negative values become 1). Advice
/// never names a grace above it.
pub const MAX_GRACE_PERIOD_SECONDS: i64 = i64::MAX;

/// Probe-level KEP-2238 threshold: above this pod TGPS, a probe without its own
/// `terminationGracePeriodSeconds` is worth a finding.
pub const PROBE_GRACE_LARGE_TGPS_SECONDS: i64 = 60;

/// `prestop-exceeds-grace`: a hook of known length (sleep action, exec `sleep N`) as long as its
/// budget or longer; the kubelet abandons it at the budget. Shared by explain and lint.
pub fn prestop_exceeds_grace(
    pod: &PodPlan,
    c: &ContainerPlan,
    t: &ContainerTimeline,
) -> Option<Finding> {
    let budget = t.pre_stop_budget_seconds?;
    let hook = c.pre_stop.as_ref()?;
    // A hook known to last at least as long (`sh -c "sleep 60 && ..."`) is cut the same way.
    let exact = hook.known_duration();
    let d = exact.or_else(|| hook.min_duration())?;
    if d < Seconds::from_secs(budget) {
        return None;
    }
    let at_least = if exact.is_some() { "" } else { "at least " };
    // The pod's own budget is a manifest error; a budget cut short by the trigger (force
    // delete, eviction, shutdown) is worth a warning.
    let tgps = pod.termination_grace_period_seconds;
    let own_budget = budget >= tgps;
    let what = match hook {
        crate::plan::Handler::Sleep { .. } => "sleep",
        _ if exact.is_some() => "exec sleep",
        _ => "exec (it sleeps first)",
    };
    let kill = t.kill_seconds.max;
    if t.stop_timeout_seconds.0 <= 0 && t.stop_timeout_seconds.1 <= 0 {
        // Kubelets up to 1.21 could hand the runtime a timeout of 0: SIGKILL, no stop signal.
        return Some(Finding {
            rule: "prestop-exceeds-grace",
            severity: if own_budget { Severity::Error } else { Severity::Warning },
            message: format!(
                "container {}: preStop {what} {at_least}{} s ≥ its budget of {budget} s: the kubelet stops waiting at t={budget} and the runtime sends SIGKILL at once (t={kill})",
                t.name,
                d,
            ),
        });
    }
    let message = if own_budget && d >= Seconds::from_secs(MAX_GRACE_PERIOD_SECONDS) {
        // No grace the API accepts is above the hook: the only fix is a shorter hook.
        format!(
            "container {}: preStop {what} {at_least}{} s ≥ terminationGracePeriodSeconds {tgps} s: {} comes at t={budget} and SIGKILL at t={kill}, leaving the app no time to drain; shorten the preStop: no terminationGracePeriodSeconds the API accepts (at most {MAX_GRACE_PERIOD_SECONDS}) is above it",
            t.name,
            d,
            t.stop_signal,
        )
    } else if own_budget {
        // The hook alone takes the whole budget (d ≥ TGPS), so the advice names a value above
        // both the hook and the current TGPS: the hook's length plus the app's drain time.
        format!(
            "container {}: preStop {what} {at_least}{} s ≥ terminationGracePeriodSeconds {tgps} s: {} comes at t={budget} and SIGKILL at t={kill}, leaving the app no time to drain; raise terminationGracePeriodSeconds above {}, to the preStop's {at_least}{} s plus your app's drain time",
            t.name,
            d,
            t.stop_signal,
            d,
            d,
        )
    } else {
        format!(
            "container {}: preStop {what} {at_least}{} s ≥ its budget of {budget} s under this trigger: the kubelet stops waiting at t={budget}, sends {} then, and SIGKILL at t={kill}",
            t.name,
            d,
            t.stop_signal,
        )
    };
    Some(Finding {
        rule: "prestop-exceeds-grace",
        severity: if own_budget {
            Severity::Error
        } else {
            Severity::Warning
        },
        message,
    })
}

/// `negative-grace-period`: a negative `terminationGracePeriodSeconds`. The API server accepts
/// it with a warning (`pkg/api/pod/warnings.go` `warningsForPodSpecAndMeta`: must be >= 0,
/// treated as 1) and Kubernetes treats it as 1 s: on the delete path since 1.22
/// (`pkg/registry/core/pod/strategy.go` `CheckGracefulDelete`, kubernetes/kubernetes#98866),
/// for every Pod since 1.27 (#115606). The plan already holds the 1; `containers` (the
/// timeline computed from it) gives the latest SIGKILL. Shared by explain and lint.
pub fn negative_grace_period(pod: &PodPlan, containers: &[ContainerTimeline]) -> Option<Finding> {
    let written = pod.termination_grace_period_written.filter(|t| *t < 0)?;
    let used = pod.termination_grace_period_seconds;
    let kill = containers
        .iter()
        .map(|t| t.kill_seconds.max)
        .max()
        .map(|k| format!(", and SIGKILL comes by t={k}"))
        .unwrap_or_default();
    Some(Finding {
        rule: "negative-grace-period",
        severity: Severity::Error,
        message: format!(
            "terminationGracePeriodSeconds is {written}: negative values are invalid; the API server accepts them with a warning and Kubernetes treats them as {used}, so the pod gets a grace period of {used} s: the preStop hook has at most {used} s{kill}; set terminationGracePeriodSeconds to the time the app needs to drain (0 or more; the default is 30)"
        ),
    })
}

/// `zero-grace-force-deletes`: TGPS 0 turns a plain delete into a force delete. Shared by
/// explain and lint.
pub fn zero_grace_force_deletes(pod: &PodPlan) -> Option<Finding> {
    (pod.termination_grace_period_seconds == 0 && !pod.termination_grace_period_defaulted).then(|| Finding {
        rule: "zero-grace-force-deletes",
        severity: Severity::Error,
        message: "terminationGracePeriodSeconds is 0: a plain `kubectl delete` is a force delete (the API object goes at once, a replacement can start while the old processes still run, and they get at most 2 s after the stop signal; issue #120671); set terminationGracePeriodSeconds to the time the app needs to drain, e.g. 30".into(),
    })
}

/// `probe-kill-uses-pod-grace`: a liveness or startup probe without its own
/// terminationGracePeriodSeconds while the pod's is large (> 60 s). Shared by explain and lint.
pub fn probe_kill_uses_pod_grace(
    pod: &PodPlan,
    kind: &str,
    probe: &crate::plan::Probe,
) -> Option<Finding> {
    let tgps = pod.termination_grace_period_seconds;
    (probe.termination_grace_period_seconds.is_none() && tgps > PROBE_GRACE_LARGE_TGPS_SECONDS)
        .then(|| Finding {
            rule: "probe-kill-uses-pod-grace",
            severity: Severity::Warning,
            message: format!(
                "the {kind} probe has no terminationGracePeriodSeconds, so a probe kill of a hung app waits the pod's {tgps} s before SIGKILL; set the probe's own (KEP-2238), e.g. {kind}Probe.terminationGracePeriodSeconds: 10"
            ),
        })
}

/// `soft-eviction-is-immediate`: a kubelet `evictionMaxPodGracePeriod` ≤ 0 makes every soft
/// eviction nearly immediate. Shared by explain and lint.
pub fn soft_eviction_is_immediate(
    pod: &PodPlan,
    eviction_max_pod_grace_period: i64,
    version: KubeVersion,
) -> Option<Finding> {
    let max = eviction_max_pod_grace_period;
    let tgps = pod.termination_grace_period_seconds;
    if max > 0 {
        return None;
    }
    let o = eviction::grace_period_override(false, max, Some(tgps), version);
    let (effective, _) = podworker::effective_grace_period(
        GraceInputs {
            previous: 0,
            deletion_grace_period_seconds: None,
            termination_grace_period_seconds: Some(tgps),
            override_seconds: Some(o),
        },
        version,
    );
    // Before 1.31 the pod worker turned an override of 0 into the full TGPS: not immediate.
    if effective >= tgps {
        return None;
    }
    Some(Finding {
        rule: "soft-eviction-is-immediate",
        severity: Severity::Warning,
        message: format!(
            "evictionMaxPodGracePeriod is {max}: a soft eviction gets override {o}, which the pod worker raises to {effective} s, so the pod's {tgps} s are not honoured (the kubelet help text says a negative value defers to the pod; it does not, issue #118172); set evictionMaxPodGracePeriod to at least {tgps}"
        ),
    })
}

/// Formats milliseconds as seconds without trailing zeros (`1.5`, `30`), exactly.
pub fn fmt_secs(ms: i64) -> String {
    Seconds::from_ms(ms.into()).to_string()
}
