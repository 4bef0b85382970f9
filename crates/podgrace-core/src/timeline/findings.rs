//! Findings explain reports for a trigger and lint reports for the `delete` timeline, under the
//! same rule ids: they are computed here once, from the pod and its container timelines.

use super::compose::Start;
use super::contract::{ContainerTimeline, Finding, Severity};
use super::trigger::Trigger;
use super::Options;
use crate::plan::{ContainerPlan, Handler, PodPlan};
use crate::rules::eviction;
use crate::rules::podworker::{self, GraceInputs};
use crate::{KubeVersion, Seconds};

/// Findings that depend on the trigger and on what the pod worker made of it.
pub(super) fn trigger_findings(
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

/// Findings that follow from the computed container timelines.
pub(super) fn container_findings(
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
