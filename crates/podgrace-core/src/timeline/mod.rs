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
//!
//! One concept per module: the triggers and their applicability (`trigger`), the output
//! contract (`contract`), the composition of the rules (`compose`, behind [`explain`]) and the
//! findings explain and lint share (`findings`).

use crate::plan::PodPlan;
use crate::rules::kuberuntime::{self, GraceFields, KillReason};
use crate::rules::latency::RuntimeProfile;
use crate::rules::nodeshutdown;
use crate::rules::podworker::{self, GraceInputs};
use crate::KubeVersion;

mod compose;
mod contract;
mod findings;
mod pods;
mod trigger;

pub use compose::fmt_secs;
use compose::{
    latencies, later_delete, pod_kill, pod_name, probe_kill, resolve_start, runtime_timeline,
};
pub use contract::{
    ContainerTimeline, Finding, PreStop, RuntimeTimeline, SecondDeleteTimeline, Severity, Span,
    Timeline,
};
use findings::{container_findings, trigger_findings};
pub use findings::{
    container_findings_of, negative_grace_period, prestop_exceeds_grace, probe_kill_uses_pod_grace,
    soft_eviction_is_immediate, zero_grace_force_deletes, MAX_GRACE_PERIOD_SECONDS,
    PROBE_GRACE_LARGE_TGPS_SECONDS,
};
pub use pods::{
    explain_all, explain_each, ExplainAllError, Explained, Skipped, TriggerOutcome, MAX_LISTED,
};
use trigger::probed_container;
pub use trigger::{
    applies, LaterDelete, NotApplicable, ParseLaterDeleteError, ParseTriggerError, Trigger,
};

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
    /// The Kubernetes version whose rules apply.
    pub version: KubeVersion,
    /// The kubelet settings of the node (eviction and node shutdown grace periods, seconds).
    pub kubelet: KubeletConfig,
    /// A later `kubectl delete` during the termination (`explain --second-delete`).
    pub second_delete: Option<LaterDelete>,
    /// A runtime whose measured latencies widen the times (`explain --runtime`); `None` is a
    /// runtime that adds none (podgrace's own process runtime comes within milliseconds).
    pub runtime: Option<RuntimeProfile>,
}

/// A timeline that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimelineError {
    /// The trigger does not apply to this pod (see [`applies`]). `pod` is `namespace/name` (or
    /// the name alone).
    #[error("pod {pod}: {reason}")]
    NotApplicable {
        /// The pod, `namespace/name` (or the name alone).
        pod: String,
        /// Why the trigger does not apply.
        reason: NotApplicable,
    },
    /// `node-shutdown` with a kubelet whose graceful node shutdown is off.
    #[error("graceful node shutdown is disabled (shutdownGracePeriod {shutdown_grace_period} s, shutdownGracePeriodCriticalPods {critical} s): the kubelet does not terminate pods on shutdown, they die with the node")]
    GracefulShutdownDisabled {
        /// `shutdownGracePeriod` as configured, seconds: 0, or less than the critical pods' period.
        shutdown_grace_period: i64,
        /// `shutdownGracePeriodCriticalPods` as configured, seconds.
        critical: i64,
    },
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
