//! The composition behind [`super::explain`]: the pod worker's start of the termination, each
//! container's kill in the termination ordering, probe kills, a later delete, a runtime's
//! latencies.

use super::contract::{
    ContainerTimeline, Finding, PreStop, RuntimeTimeline, SecondDeleteTimeline, Severity, Span,
    Timeline,
};
use super::findings::{
    container_findings, negative_grace_period, probe_kill_uses_pod_grace, zero_grace_force_deletes,
};
use super::trigger::{LaterDelete, Trigger};
use super::Options;
use crate::plan::{ContainerPlan, ContainerRole, Handler, PodPlan};
use crate::rules::apiserver::{self, KubectlDeleteFlags, PodForDelete, PodPhase};
use crate::rules::kuberuntime::{self, GraceFields, KillContainer, KillReason};
use crate::rules::latency::{LatencyJson, RuntimeLatencies, RuntimeProfile};
use crate::rules::podworker::{self, GraceInputs, InFlightEffect, LaterUpdate};
use crate::rules::{eviction, nodeshutdown, runtime};
use crate::{KubeVersion, Seconds};

/// How the kubelet is asked to terminate: the result of the API server and the eviction or
/// shutdown manager for a trigger.
pub(super) struct Start {
    /// DGPS the kubelet sees.
    pub(super) dgps: Option<i64>,
    /// Kill override from the kubelet itself (eviction, node shutdown).
    pub(super) kill_override: Option<i64>,
    /// The API object is removed at once (force delete).
    pub(super) removed_from_api: bool,
    /// The API object after the trigger (`None` once removed).
    pub(super) stored: Option<apiserver::StoredPod>,
}

pub(super) fn pod_name(pod: &PodPlan) -> String {
    match &pod.namespace {
        Some(ns) => format!("{ns}/{}", pod.name),
        None => pod.name.clone(),
    }
}

/// The latencies of `opts.runtime` for the fastest and the slowest case (all zero without one).
pub(super) fn latencies(opts: &Options) -> (Lat, Lat) {
    match opts.runtime.map(RuntimeProfile::latencies) {
        None => (Lat::default(), Lat::default()),
        Some(r) => (Lat::of(r, |l| l.min_ms), Lat::of(r, |l| l.max_ms)),
    }
}

pub(super) fn runtime_timeline(opts: &Options) -> Option<RuntimeTimeline> {
    let r = opts.runtime?.latencies();
    Some(RuntimeTimeline {
        name: r.runtime,
        latencies: r.all().into_iter().map(LatencyJson::from).collect(),
    })
}

/// Runtime latencies of one scenario, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Lat {
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
pub(super) fn later_delete(
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
pub(super) fn describe_later(later: LaterDelete) -> String {
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
pub(super) fn resolve_start(
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

/// A kill the kubelet starts itself (eviction, node shutdown) with a grace-period override; the
/// API object has no deletion timestamp.
pub(super) fn kubelet_kill(override_seconds: i64, tgps: i64) -> Start {
    Start {
        dgps: None,
        kill_override: Some(override_seconds),
        removed_from_api: false,
        stored: Some(running_object(tgps)),
    }
}

/// A scheduled, running pod object that nobody has deleted.
pub(super) fn running_object(tgps: i64) -> apiserver::StoredPod {
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
pub(super) fn stop_signal(c: &ContainerPlan) -> String {
    match runtime::stop_signal_of(c) {
        Ok(sig) => sig.to_string(),
        // Manifest validation rejects unknown signal names; keep the text if one slips through.
        Err(_) => c.stop_signal.clone().unwrap_or_else(|| "SIGTERM".into()),
    }
}

/// The hook's budget (seconds) and its end in the min and max cases (ms), or `None` when it
/// does not run.
pub(super) fn hook_ends(c: &ContainerPlan, kill: &KillContainer) -> Option<(i64, i128, i128)> {
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
pub(super) struct Instants {
    stop_ms: i128,
    kill_ms: i128,
    timeout_s: i64,
}

/// The stop signal and SIGKILL of a StopContainer called at `call_ms` with `timeout_s`: the
/// signal at the call (plus the runtime's latency), SIGKILL at the deadline (plus its
/// latency); a timeout of 0 or less kills at once, without a stop signal.
pub(super) fn instants(call_ms: i128, timeout_s: i64, lat: Lat) -> Instants {
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

pub(super) fn main_instants(kill: &KillContainer, hook_end_ms: Option<i128>, lat: Lat) -> Instants {
    let mut k = *kill;
    let call_ms = hook_end_ms.unwrap_or(0);
    if hook_end_ms.is_some() {
        k.pre_stop_finished(call_ms);
    }
    instants(call_ms, k.stop_timeout(), lat)
}

/// Every running container of the pod killed in parallel (`killContainersWithSyncResult`).
/// `lat` holds the runtime's latencies for the fastest and the slowest case.
pub(super) fn pod_kill(
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
pub(super) fn signal_effect(signal: &str, i: Instants) -> Instants {
    if i.timeout_s > 0 && signal == "SIGKILL" {
        Instants {
            kill_ms: i.stop_ms,
            ..i
        }
    } else {
        i
    }
}

pub(super) fn sidecar_instants(
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

pub(super) fn timeline_entry(
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
pub(super) fn probe_kill(
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

/// Formats milliseconds as seconds without trailing zeros (`1.5`, `30`), exactly.
pub fn fmt_secs(ms: i64) -> String {
    Seconds::from_ms(ms.into()).to_string()
}
