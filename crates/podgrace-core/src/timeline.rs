//! One pod's termination timeline for one trigger: the rules composed, as `podgrace explain`
//! shows them.
//!
//! Seconds count from the moment the kubelet starts terminating the pod (t = 0). Where a hook's
//! length is unknown, `min` assumes it returns at once and `max` that it uses its whole budget; a
//! hook of known length (sleep action, `sleep N`) gives `min == max`. For sidecars, `min` also
//! assumes every app exits at once on its stop signal and `max` that each runs until SIGKILL.
//!
//! [`Options::second_delete`] adds a later `kubectl delete` (what the API server and the kubelet
//! make of it, per version); [`Options::runtime`] widens the times by a real runtime's measured
//! latencies (`min` with the smallest, `max` with the largest).

use crate::plan::{ContainerPlan, ContainerRole, Handler, PodPlan};
use crate::rules::apiserver::{self, KubectlDeleteFlags, PodForDelete, PodPhase};
use crate::rules::kuberuntime::{self, GraceFields, KillContainer, KillReason};
use crate::rules::latency::{LatencyJson, RuntimeLatencies, RuntimeProfile};
use crate::rules::podworker::{self, GraceInputs, InFlightEffect, LaterUpdate};
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
    /// A later `kubectl delete` during the termination (`explain --second-delete`).
    pub second_delete: Option<LaterDelete>,
    /// A runtime whose measured latencies widen the times (`explain --runtime`); `None` is a
    /// runtime that adds none (podgrace's own process runtime comes within milliseconds).
    pub runtime: Option<RuntimeProfile>,
}

/// A later `kubectl delete pod` while the termination runs: its flags and when it reaches the
/// API server, milliseconds after t = 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaterDelete {
    /// Milliseconds after t = 0 (the first delete, or the kubelet's own kill).
    pub at_ms: i64,
    pub flags: KubectlDeleteFlags,
}

/// A `--second-delete` value that is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid second delete {0:?}: expected GRACE@SECONDS, where GRACE is a --grace-period (0 or more), force (--grace-period=0 --force) or now (--now), and SECONDS the time after the termination started (3@2.3, force@5)")]
pub struct ParseLaterDeleteError(pub String);

impl FromStr for LaterDelete {
    type Err = ParseLaterDeleteError;

    /// `GRACE@SECONDS`: `3@2.3` is `kubectl delete --grace-period=3` 2.3 s after t = 0,
    /// `force@5` is `--grace-period=0 --force` at 5 s, `now@1` is `--now` at 1 s. Seconds are
    /// a decimal number with at most millisecond precision.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseLaterDeleteError(s.to_string());
        let (grace, at) = s.split_once('@').ok_or_else(bad)?;
        let flags = match grace {
            "force" => KubectlDeleteFlags {
                grace_period: 0,
                force: true,
                now: false,
            },
            "now" => KubectlDeleteFlags {
                now: true,
                ..Default::default()
            },
            n => {
                let n: i64 = n.parse().map_err(|_| bad())?;
                if n < 0 || !grace.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                KubectlDeleteFlags {
                    grace_period: n,
                    ..Default::default()
                }
            }
        };
        Ok(LaterDelete {
            at_ms: parse_ms(at).ok_or_else(bad)?,
            flags,
        })
    }
}

/// `2.3` → 2300: non-negative decimal seconds with at most three decimals.
fn parse_ms(s: &str) -> Option<i64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) || s.ends_with('.') {
        return None;
    }
    let w: i64 = whole.parse().ok()?;
    let f: i64 = format!("{frac:0<3}").parse().ok()?;
    w.checked_mul(1000)?.checked_add(f)
}

impl fmt::Display for LaterDelete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = Seconds::from_ms(self.at_ms.into());
        if self.flags.force {
            write!(f, "force@{at}")
        } else if self.flags.now {
            write!(f, "now@{at}")
        } else {
            write!(f, "{}@{at}", self.flags.grace_period)
        }
    }
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
    /// What a later delete did (`explain --second-delete`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub second_delete: Option<SecondDeleteTimeline>,
    /// The runtime latencies the times include (`explain --runtime`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeTimeline>,
}

/// The runtime latencies a timeline includes, each with its source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuntimeTimeline {
    /// The runtime measured, e.g. `containerd 1.6.20 (runc 1.1.5)`.
    pub name: &'static str,
    pub latencies: Vec<LatencyJson>,
}

/// What the API server and the kubelet made of a later delete (`--second-delete`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecondDeleteTimeline {
    /// When it reached the API server, seconds after t = 0.
    pub at_seconds: Seconds,
    /// kubectl's `DeleteOptions.gracePeriodSeconds` (`None`: the object's own).
    pub request_grace_period_seconds: Option<i64>,
    /// `--force`.
    pub force: bool,
    /// What the API server did: `notFound` (the object is gone), `unchanged` (not shorter: a
    /// pending graceful delete), `shortened` (new DGPS and DT) or `deleted` (grace 0: removed).
    pub api: &'static str,
    /// `deletionGracePeriodSeconds` afterwards (`None` once removed or never set).
    pub deletion_grace_period_seconds: Option<i64>,
    /// `deletionTimestamp` afterwards, whole seconds after t = 0 (taken on a whole second, as
    /// the API stores whole seconds).
    pub deletion_timestamp_seconds: Option<i64>,
    /// What the kubelet did with it: `notShorter`, `ignored` (the kill in flight keeps its
    /// grace), `killedAgain` (1.18–1.21: the pod killer's second kill), `over` (the kill had
    /// already ended) or `nothing` (no update reached it).
    pub kubelet: &'static str,
    /// The termination ends earlier than without it.
    pub shortens: bool,
    /// The grace the kill in flight works with, seconds.
    pub kill_grace_period_seconds: i64,
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
    /// The API object after the trigger (`None` once removed).
    stored: Option<apiserver::StoredPod>,
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
            second_delete: None,
            runtime: runtime_timeline(opts),
        });
    }
    let base = kuberuntime::set_termination_grace_period(
        GraceFields::of_pod_kill(start.dgps, tgps),
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
    let ordering = kuberuntime::kills_in_termination_order(pod, version);
    let lat = latencies(opts);
    let mut containers = pod_kill(pod, base, override_seconds, version, ordering, lat);
    let second_delete = opts.second_delete.map(|later| {
        later_delete(
            pod,
            &start,
            effective,
            later,
            opts,
            lat,
            &mut containers,
            &mut findings,
        )
    });
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
        second_delete,
        runtime: runtime_timeline(opts),
    })
}

/// The latencies of `opts.runtime` for the fastest and the slowest case (all zero without one).
fn latencies(opts: &Options) -> (Lat, Lat) {
    match opts.runtime.map(RuntimeProfile::latencies) {
        None => (Lat::default(), Lat::default()),
        Some(r) => (Lat::of(r, |l| l.min_ms), Lat::of(r, |l| l.max_ms)),
    }
}

fn runtime_timeline(opts: &Options) -> Option<RuntimeTimeline> {
    let r = opts.runtime?.latencies();
    Some(RuntimeTimeline {
        name: r.runtime,
        latencies: r.all().into_iter().map(LatencyJson::from).collect(),
    })
}

/// Runtime latencies of one scenario, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Lat {
    /// StopContainer call → stop signal (also → SIGKILL for a timeout of 0).
    signal: i128,
    /// StopContainer deadline → death by SIGKILL.
    kill: i128,
    /// Death → StopContainer returns (a sidecar waiting for this container goes on then).
    stop_return: i128,
}

impl Lat {
    fn of(r: &RuntimeLatencies, pick: impl Fn(&crate::rules::latency::Range) -> i64) -> Lat {
        Lat {
            signal: pick(&r.stop_signal_after_call.range).into(),
            kill: pick(&r.kill_after_deadline.range).into(),
            stop_return: pick(&r.stop_returns_after_exit.range).into(),
        }
    }
}

/// What a later `kubectl delete` does: the API server's `BeforeDelete` on the object as the
/// trigger left it, then the pod worker's effective grace and what it does to the kill in
/// flight ([`podworker::later_update_in_flight`]). On 1.18–1.21 a delete that removes the
/// object makes the pod killer kill every container again (preStop skipped, StopContainer 2 s),
/// which moves `containers`' stop signal and SIGKILL earlier.
#[allow(clippy::too_many_arguments)]
fn later_delete(
    pod: &PodPlan,
    start: &Start,
    effective: i64,
    later: LaterDelete,
    opts: &Options,
    lat: (Lat, Lat),
    containers: &mut [ContainerTimeline],
    findings: &mut Vec<Finding>,
) -> SecondDeleteTimeline {
    let version = opts.version;
    let tgps = pod.termination_grace_period_seconds;
    let at = Seconds::from_ms(later.at_ms.into());
    // The flags were parsed from the user's value: an invalid combination (--now with a
    // grace) cannot come from LaterDelete's parser.
    let request =
        apiserver::kubectl_delete(later.flags).unwrap_or(apiserver::KubectlDeleteRequest {
            grace_period_seconds: None,
            warning: None,
        });
    let end = containers
        .iter()
        .map(|c| c.kill_seconds.max)
        .max()
        .unwrap_or(Seconds::ZERO);
    let mut out = SecondDeleteTimeline {
        at_seconds: at,
        request_grace_period_seconds: request.grace_period_seconds,
        force: later.flags.force,
        api: "notFound",
        deletion_grace_period_seconds: None,
        deletion_timestamp_seconds: None,
        kubelet: "nothing",
        shortens: false,
        kill_grace_period_seconds: effective,
    };
    let said = describe_later(later);
    let Some(stored) = &start.stored else {
        findings.push(Finding {
            rule: "second-delete-does-not-shorten",
            severity: Severity::Info,
            message: format!(
                "{said} at t={at} finds no object: the force delete removed it at once (`Error from server (NotFound): pods \"{}\" not found`); the kubelet goes on terminating with {effective} s",
                pod.name
            ),
        });
        return out;
    };
    let api = apiserver::store_delete_ms(
        stored,
        true,
        request.grace_period_seconds,
        later.at_ms,
        apiserver::clamps_deletion_timestamp(version),
    );
    let deletion = api
        .object
        .as_ref()
        .or(api.written.as_ref())
        .map(|o| o.deletion)
        .unwrap_or_default();
    out.deletion_grace_period_seconds = deletion.deletion_grace_period_seconds;
    out.deletion_timestamp_seconds = deletion.deletion_timestamp;
    out.api = if api.decision.graceful_pending {
        "unchanged"
    } else if api.was_deleted {
        "deleted"
    } else {
        "shortened"
    };
    if Seconds::from_ms(later.at_ms.into()) >= end && end > Seconds::ZERO {
        out.kubelet = "over";
        findings.push(Finding {
            rule: "second-delete-does-not-shorten",
            severity: Severity::Info,
            message: format!(
                "{said} at t={at} comes after the last SIGKILL deadline (t={end}): the kill is already over"
            ),
        });
        return out;
    }
    if api.decision.graceful_pending {
        out.kubelet = "notShorter";
        findings.push(Finding {
            rule: "second-delete-does-not-shorten",
            severity: Severity::Info,
            message: format!(
                "{said} at t={at} is not shorter than deletionGracePeriodSeconds {}: the API server changes nothing (a grace period can only be shortened)",
                stored.deletion.deletion_grace_period_seconds.unwrap_or(tgps)
            ),
        });
        return out;
    }
    let (new_grace, _) = podworker::effective_grace_period(
        GraceInputs {
            previous: effective,
            deletion_grace_period_seconds: deletion.deletion_grace_period_seconds,
            termination_grace_period_seconds: Some(tgps),
            override_seconds: None,
        },
        version,
    );
    let effect = podworker::later_update_in_flight(
        version,
        effective,
        LaterUpdate {
            effective_grace_seconds: new_grace,
            object_removed: api.was_deleted,
            deletion_grace_period_seconds: deletion.deletion_grace_period_seconds,
        },
    );
    let api_said = match (
        api.was_deleted,
        deletion.deletion_grace_period_seconds,
        deletion.deletion_timestamp,
    ) {
        (true, _, _) => "the API server removes the object at once".to_string(),
        (false, Some(g), Some(dt)) => {
            let moved = stored
                .deletion
                .deletion_timestamp
                .map(|old| old - dt)
                .filter(|m| *m > 0)
                .map(|m| format!(" and moves deletionTimestamp back {m} s, to t={dt}"))
                .unwrap_or_else(|| format!(" and deletionTimestamp t={dt}"));
            let past = if Seconds::from_secs(dt) < end {
                format!(" (in the past from t={dt} until the pod is gone at about t={end}, while `kubectl get pods` still shows it Terminating)")
            } else {
                String::new()
            };
            format!("the API server sets deletionGracePeriodSeconds {g}{moved}{past}")
        }
        _ => "the API server records the delete".to_string(),
    };
    match effect {
        InFlightEffect::NotShorter => {
            out.kubelet = "notShorter";
            findings.push(Finding {
                rule: "second-delete-does-not-shorten",
                severity: Severity::Info,
                message: format!(
                    "{said} at t={at}: {api_said}; the kubelet's effective grace stays {effective} s (Kubernetes {version} turns the grace of {} into {new_grace} s), so nothing changes",
                    deletion.deletion_grace_period_seconds.unwrap_or_default()
                ),
            });
        }
        InFlightEffect::Ignored {
            kept_seconds,
            recorded_seconds,
        } => {
            out.kubelet = "ignored";
            out.kill_grace_period_seconds = kept_seconds;
            findings.push(Finding {
                rule: "second-delete-does-not-shorten",
                severity: Severity::Info,
                message: format!(
                    "{said} at t={at} does not shorten this termination: {api_said}; the kubelet's pod worker takes the grace of {recorded_seconds} s and logs \"Cancelling current pod sync\", but Kubernetes {version}'s SyncTerminatingPod kills on a context of its own (pkg/kubelet/kubelet.go, TODO #113606), so the preStop wait, the StopContainer timeout and SIGKILL (by t={end}) keep the grace of {kept_seconds} s (recorded on 1.32: SIGKILL at 30.1-30.2 s after --grace-period=30, then --grace-period=3)"
                ),
            });
        }
        InFlightEffect::KilledAgain { base_grace_seconds } => {
            out.kubelet = "killedAgain";
            let mut second = KillContainer::new(base_grace_seconds, None, version);
            // No preStop on the second kill when its budget is 0; its StopContainer comes at
            // once with the floor.
            if second.pre_stop_budget(true).is_some() {
                second.pre_stop_finished(0);
            }
            let timeout = second.stop_timeout();
            let at_ms = i128::from(later.at_ms);
            for c in containers.iter_mut() {
                let again = |stop: &mut Seconds, kill: &mut Seconds, l: Lat| {
                    let i = instants(at_ms, timeout, l);
                    if Seconds::from_ms(i.stop_ms) < *stop {
                        *stop = Seconds::from_ms(i.stop_ms);
                    }
                    if Seconds::from_ms(i.kill_ms) < *kill {
                        *kill = Seconds::from_ms(i.kill_ms);
                    }
                };
                let (mut lo_stop, mut lo_kill) = (c.stop_signal_seconds.min, c.kill_seconds.min);
                let (mut hi_stop, mut hi_kill) = (c.stop_signal_seconds.max, c.kill_seconds.max);
                again(&mut lo_stop, &mut lo_kill, lat.0);
                again(&mut hi_stop, &mut hi_kill, lat.1);
                c.stop_signal_seconds = Span {
                    min: lo_stop.min(hi_stop),
                    max: hi_stop.max(lo_stop),
                };
                c.kill_seconds = Span {
                    min: lo_kill.min(hi_kill),
                    max: hi_kill.max(lo_kill),
                };
            }
            let new_end = containers
                .iter()
                .map(|c| c.kill_seconds.max)
                .max()
                .unwrap_or(Seconds::ZERO);
            out.shortens = new_end < end;
            findings.push(Finding {
                rule: "second-delete-kills-again",
                severity: Severity::Warning,
                message: format!(
                    "{said} at t={at}: {api_said}; Kubernetes {version}'s kubelet then kills every running container a second time, beside the kill in flight (HandlePodRemoves → podKiller): no preStop, StopContainer with {timeout} s, so SIGKILL comes by t={new_end} instead of t={end}"
                ),
            });
        }
    }
    out
}

/// `kubectl delete --grace-period=3`, as the findings name a later delete.
fn describe_later(later: LaterDelete) -> String {
    if later.flags.force {
        "a second `kubectl delete --grace-period=0 --force`".into()
    } else if later.flags.now {
        "a second `kubectl delete --now`".into()
    } else {
        format!(
            "a second `kubectl delete --grace-period={}`",
            later.flags.grace_period
        )
    }
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
            stored: out.object,
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
        Trigger::EvictHard => kubelet_kill(
            eviction::grace_period_override(true, 0, Some(tgps), opts.version),
            tgps,
        ),
        Trigger::EvictSoft => {
            let max = opts.kubelet.eviction_max_pod_grace_period;
            kubelet_kill(
                eviction::grace_period_override(false, max, Some(tgps), opts.version),
                tgps,
            )
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
            kubelet_kill(
                nodeshutdown::pod_grace_period_override(period, Some(tgps)),
                tgps,
            )
        }
        Trigger::Liveness(_) | Trigger::Startup(_) => Start {
            dgps: None,
            kill_override: None,
            removed_from_api: false,
            stored: Some(running_object(tgps)),
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

/// A kill the kubelet starts itself (eviction, node shutdown) with a grace-period override; the
/// API object has no deletion timestamp.
fn kubelet_kill(override_seconds: i64, tgps: i64) -> Start {
    Start {
        dgps: None,
        kill_override: Some(override_seconds),
        removed_from_api: false,
        stored: Some(running_object(tgps)),
    }
}

/// A scheduled, running pod object that nobody has deleted.
fn running_object(tgps: i64) -> apiserver::StoredPod {
    apiserver::StoredPod {
        pod: PodForDelete {
            node_name: "node".into(),
            phase: PodPhase::Running,
            termination_grace_period_seconds: Some(tgps),
        },
        ..Default::default()
    }
}

/// The stop signal the runtime sends to a container: `lifecycle.stopSignal`, else the image's
/// STOPSIGNAL (for the official images podgrace knows), else SIGTERM.
fn stop_signal(c: &ContainerPlan) -> String {
    match runtime::stop_signal_of(c) {
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

/// The stop signal and SIGKILL of a StopContainer called at `call_ms` with `timeout_s`: the
/// signal at the call (plus the runtime's latency), SIGKILL at the deadline (plus its
/// latency); a timeout of 0 or less kills at once, without a stop signal.
fn instants(call_ms: i128, timeout_s: i64, lat: Lat) -> Instants {
    if timeout_s <= 0 {
        let at = call_ms.saturating_add(lat.signal);
        return Instants {
            stop_ms: at,
            kill_ms: at,
            timeout_s,
        };
    }
    Instants {
        stop_ms: call_ms.saturating_add(lat.signal),
        kill_ms: call_ms
            .saturating_add(i128::from(timeout_s) * 1000)
            .saturating_add(lat.kill),
        timeout_s,
    }
}

fn main_instants(kill: &KillContainer, hook_end_ms: Option<i128>, lat: Lat) -> Instants {
    let mut k = *kill;
    let call_ms = hook_end_ms.unwrap_or(0);
    if hook_end_ms.is_some() {
        k.pre_stop_finished(call_ms);
    }
    instants(call_ms, k.stop_timeout(), lat)
}

/// Every running container of the pod killed in parallel (`killContainersWithSyncResult`).
/// `lat` holds the runtime's latencies for the fastest and the slowest case.
fn pod_kill(
    pod: &PodPlan,
    base: i64,
    override_seconds: Option<i64>,
    version: KubeVersion,
    ordering: bool,
    lat: (Lat, Lat),
) -> Vec<ContainerTimeline> {
    let kill = KillContainer::new(base, override_seconds, version);
    let mut out: Vec<ContainerTimeline> = Vec::new();
    // When each container placed so far lets the sidecars waiting for it go on (its
    // StopContainer returning after its death), per scenario: min (apps exit on the stop
    // signal) and max (apps run until SIGKILL).
    let mut exits: Vec<(String, i128, i128)> = Vec::new();
    let mains: Vec<&ContainerPlan> = pod.containers.iter().collect();
    for c in &mains {
        let hook = hook_ends(c, &kill);
        let signal = stop_signal(c);
        let lo = signal_effect(&signal, main_instants(&kill, hook.map(|h| h.1), lat.0));
        let hi = signal_effect(&signal, main_instants(&kill, hook.map(|h| h.2), lat.1));
        exits.push((
            c.name.clone(),
            lo.stop_ms.saturating_add(lat.0.stop_return),
            hi.kill_ms.saturating_add(lat.1.stop_return),
        ));
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
                    sidecar_instants(&kill, hook.map(|h| h.1), prereq_lo, lat.0),
                ),
                signal_effect(
                    &signal,
                    sidecar_instants(&kill, hook.map(|h| h.2), prereq_hi, lat.1),
                ),
            )
        } else {
            (
                signal_effect(&signal, main_instants(&kill, hook.map(|h| h.1), lat.0)),
                signal_effect(&signal, main_instants(&kill, hook.map(|h| h.2), lat.1)),
            )
        };
        next_sidecar = Some((
            lo.stop_ms.saturating_add(lat.0.stop_return),
            hi.kill_ms.saturating_add(lat.1.stop_return),
        ));
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
    lat: Lat,
) -> Instants {
    let mut k = *kill;
    let start = hook_end_ms.unwrap_or(0);
    if hook_end_ms.is_some() {
        k.pre_stop_finished(start);
    }
    let wait = kuberuntime::wait_for_turn_ms(start, &[prereq_exit_ms], k.turn_budget());
    k.turn_finished(wait);
    instants(start.saturating_add(wait), k.stop_timeout(), lat)
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
    let base =
        kuberuntime::set_termination_grace_period(GraceFields::of_probe_kill(pod, c), reason);
    let kill = KillContainer::new(base, None, opts.version);
    let hook = hook_ends(c, &kill);
    let signal = stop_signal(c);
    let lat = latencies(opts);
    let lo = signal_effect(&signal, main_instants(&kill, hook.map(|h| h.1), lat.0));
    let hi = signal_effect(&signal, main_instants(&kill, hook.map(|h| h.2), lat.1));
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
        second_delete: None,
        runtime: runtime_timeline(opts),
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
                message: if c.image_config_stop_signal.is_some() {
                    format!(
                        "container {}: the stop signal {} is the STOPSIGNAL in the config of image {} (as containerd holds it; set lifecycle.stopSignal to be explicit)",
                        t.name,
                        t.stop_signal,
                        c.image.as_deref().unwrap_or_default()
                    )
                } else {
                    format!(
                        "container {}: the stop signal {} is the STOPSIGNAL of the official image {} (inferred from the image name; set lifecycle.stopSignal to be explicit)",
                        t.name,
                        t.stop_signal,
                        c.image.as_deref().unwrap_or_default()
                    )
                },
            });
    }
    if t.kill_seconds.max > Seconds::from_secs(grace).saturating_add(Seconds::from_secs(2)) {
        let why = if version >= crate::rules::kuberuntime::OVERRIDE_BEFORE_PRESTOP_SINCE {
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
