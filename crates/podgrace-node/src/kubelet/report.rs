//! The run report: what each container received and when, in the `run` JSON contract of
//! `design.md`. Built from the pod task's records and the runtime's measured stop events.
//!
//! Times are seconds as JSON numbers: `startSeconds` from the start of the run, every
//! `...AfterSeconds` from the start of that termination.

use std::time::Instant;

use podgrace_core::plan::ContainerRole;
use podgrace_core::rules::runtime::Signal;
use serde::Serialize;

use crate::kubelet::pod::{PodReport, Termination};
use crate::process::ExitStatus;
use crate::runtime::{StopEvent, StopEventKind};

/// The `run` JSON document.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// `namespace/name`.
    pub pod: String,
    /// `namespaces` (each container's entry process is PID 1 of its own PID namespace) or
    /// `host` (plain host processes).
    pub isolation: &'static str,
    pub containers: Vec<ContainerRun>,
    pub events: Vec<EventRecord>,
}

/// One container in the run report.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRun {
    pub name: String,
    /// `main`, `sidecar` or `init`.
    pub role: &'static str,
    pub restarts: u32,
    pub terminations: Vec<TerminationRun>,
    /// Exits while the pod ran (crashes, completions, probe kills), in order.
    pub exits: Vec<ExitRun>,
}

/// One exit of a container while its pod was not terminating.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExitRun {
    /// From the start of the run, seconds.
    pub seconds: f64,
    pub exit_code: i32,
    pub exit_signal: Option<String>,
}

/// One termination of one container.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TerminationRun {
    /// `Deleted`, `Evicted`, `LivenessProbe` or `StartupProbe`.
    pub reason: &'static str,
    /// From the start of the run, seconds.
    pub start_seconds: f64,
    /// The grace the kill worked with, seconds.
    pub grace_period_seconds: i64,
    pub pre_stop: Option<PreStopRun>,
    /// The stop signal's name.
    pub stop_signal: String,
    /// When the stop signal was sent, `None` if it was not (already sent by an earlier stop, or
    /// a timeout of 0).
    pub stop_signal_after_seconds: Option<f64>,
    /// When SIGKILL was sent, `None` if the container exited first.
    pub kill_after_seconds: Option<f64>,
    /// When PID 1 exited, `None` if it had not by the end of this termination.
    pub exit_after_seconds: Option<f64>,
    pub exit_code: Option<i32>,
    /// The signal that ended PID 1, if one did.
    pub exit_signal: Option<String>,
    /// This termination was superseded by a shorter grace period and run again.
    pub superseded: bool,
}

/// A preStop hook in the run report.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreStopRun {
    /// `exec`, `httpGet`, `sleep` or `tcpSocket`.
    pub action: &'static str,
    pub after_seconds: f64,
    /// When the kubelet stopped waiting for it.
    pub end_after_seconds: f64,
    /// `completed`, `failed` or `cut`.
    pub outcome: &'static str,
    /// Why it failed (`exited with 3`, `/bin/x is not in the container`, `connection refused`),
    /// or an httpGet hook's status outside 2xx (`HTTP 503, which the kubelet counts as
    /// success`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// An event in the run report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventRecord {
    /// From the start of the run.
    pub seconds: f64,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub reason: &'static str,
    pub container: Option<String>,
    pub message: String,
}

fn secs(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

fn since(t: Instant, from: Instant) -> f64 {
    secs(t.saturating_duration_since(from))
}

/// Builds the report. `stop_events(container_id)` gives the runtime's measured stop events of
/// a container instance; `namespaced` says which isolation ran.
pub fn build_report(
    pod: &PodReport,
    stop_events: impl Fn(&str) -> Vec<StopEvent>,
    namespaced: bool,
) -> RunReport {
    let t0 = pod.started;
    let containers = pod
        .containers
        .iter()
        .map(|c| {
            // Each termination's window runs until the next termination of the same instance.
            let terminations = c
                .terminations
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let next = c.terminations[i + 1..]
                        .iter()
                        .find(|n| n.container_id == t.container_id)
                        .map(|n| n.kill.started);
                    termination_run(t, t0, &stop_events(&t.container_id), next)
                })
                .collect();
            ContainerRun {
                name: c.name.clone(),
                role: role(c.role),
                restarts: c.restarts,
                terminations,
                exits: c
                    .exits
                    .iter()
                    .map(|(at, status)| ExitRun {
                        seconds: since(*at, t0),
                        exit_code: status.code(),
                        exit_signal: signal_name(*status),
                    })
                    .collect(),
            }
        })
        .collect();
    RunReport {
        pod: pod.pod.clone(),
        isolation: if namespaced { "namespaces" } else { "host" },
        containers,
        events: pod
            .events
            .iter()
            .map(|e| EventRecord {
                seconds: since(e.at, t0),
                kind: e.kind.as_str(),
                reason: e.reason,
                container: e.container.clone(),
                message: e.message.clone(),
            })
            .collect(),
    }
}

fn signal_name(s: ExitStatus) -> Option<String> {
    match s {
        ExitStatus::Signal(n) => Signal::from_number(n).map(Signal::name),
        _ => None,
    }
}

fn role(r: ContainerRole) -> &'static str {
    r.as_str()
}

fn termination_run(
    t: &Termination,
    t0: Instant,
    events: &[StopEvent],
    window_end: Option<Instant>,
) -> TerminationRun {
    let start = t.kill.started;
    let in_window = |e: &&StopEvent| e.at >= start && window_end.is_none_or(|end| e.at < end);
    let first = |pick: fn(&StopEventKind) -> bool| {
        events
            .iter()
            .filter(in_window)
            .find(|e| pick(&e.kind))
            .map(|e| since(e.at, start))
    };
    let exit = events.iter().filter(in_window).find_map(|e| match e.kind {
        StopEventKind::Exited { status } => Some((e.at, status)),
        _ => None,
    });
    TerminationRun {
        reason: t.reason.as_str(),
        start_seconds: since(start, t0),
        grace_period_seconds: t.kill.grace_period_seconds,
        pre_stop: t.kill.pre_stop.as_ref().map(|h| PreStopRun {
            action: h.action,
            after_seconds: since(h.started, start),
            end_after_seconds: since(h.ended, start),
            outcome: h.outcome.as_str(),
            detail: h.detail.clone(),
        }),
        stop_signal: t.stop_signal.name(),
        stop_signal_after_seconds: first(|k| matches!(k, StopEventKind::StopSignalSent { .. })),
        kill_after_seconds: first(|k| matches!(k, StopEventKind::KillSent)),
        exit_after_seconds: exit.map(|(at, _)| since(at, start)),
        exit_code: exit.map(|(_, s)| s.code()),
        exit_signal: exit.and_then(|(_, s)| signal_name(s)),
        superseded: t.superseded,
    }
}
