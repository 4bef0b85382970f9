//! The run report: what each container received and when, in the `run` JSON contract of
//! `design.md`. Built from the pod task's records and the runtime's measured stop events.
//!
//! Times are seconds as JSON numbers: `startSeconds` from the start of the run, every
//! `...AfterSeconds` from the start of that termination.

use std::time::Instant;

use podgrace_core::plan::ContainerRole;
use podgrace_core::rules::apiserver::{format_timestamp, kubectl_delete};
use podgrace_core::rules::runtime::Signal;
use serde::Serialize;

use crate::kubelet::object::{DeleteApi, ObjectEvent};
use crate::kubelet::pod::{DeleteKubelet, DeleteRecord, PodReport, Termination};
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
    /// Every container of the pod, in spec order.
    pub containers: Vec<ContainerRun>,
    /// The kubelet's events of the run, in order.
    pub events: Vec<EventRecord>,
    /// The pod object's watch events, as `kubectl get pods -w --output-watch-events` would
    /// show them: each delete, the status once the containers stopped, the kubelet's final
    /// delete.
    pub object: Vec<ObjectEventRun>,
    /// Every `kubectl delete` of the run and what came of it.
    pub deletes: Vec<DeleteRun>,
}

/// One watch event of the pod object.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectEventRun {
    /// From the start of the run, seconds.
    pub seconds: f64,
    /// `MODIFIED` or `DELETED`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `metadata.deletionTimestamp` (RFC 3339, whole seconds, as the API stores it).
    pub deletion_timestamp: Option<String>,
    /// `metadata.deletionGracePeriodSeconds`, in seconds.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `status.phase`.
    pub phase: &'static str,
    /// `status.reason` (`Evicted`, `Terminated`), `None` when empty.
    pub reason: Option<String>,
    /// `status.message` (the eviction's, the node shutdown's), left out when empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The pod's Ready condition.
    pub ready: bool,
    /// The `kubectl get pods` row: READY and STATUS.
    pub table: TableRow,
}

/// The READY and STATUS columns of `kubectl get pods`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TableRow {
    /// READY: ready containers / containers (`1/2`).
    pub ready: String,
    /// STATUS: the phase or the kubectl printer's reason (`Terminating`, `Completed` ...).
    pub status: String,
}

/// One `kubectl delete` of the run.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeleteRun {
    /// From the start of the run, seconds.
    pub seconds: f64,
    /// The DeleteOptions' `gracePeriodSeconds` kubectl sent (`None`: the object's own).
    pub grace_period_seconds: Option<i64>,
    /// `--force` was given.
    pub force: bool,
    /// What the API server did: `graceful`, `unchanged` (not shorter), `deleted` (grace 0:
    /// removed) or `notFound`.
    pub api: &'static str,
    /// The `deletionGracePeriodSeconds` this delete set, in seconds (0: it removed the
    /// object); `None` when it set none.
    pub deletion_grace_period_seconds: Option<i64>,
    /// The `deletionTimestamp` this delete set (RFC 3339, whole seconds); `None` when none.
    pub deletion_timestamp: Option<String>,
    /// What the kubelet did: `started` (this delete started the termination), `beforeKill`
    /// (the kill had not begun: it takes this grace), `notShorter`, `ignored` (the kill in
    /// flight keeps its grace), `killedAgain` (1.18–1.21: the pod killer killed again) or
    /// `nothing`.
    pub kubelet: &'static str,
    /// The grace the kill works with after this delete, seconds, when it is known.
    pub kill_grace_period_seconds: Option<i64>,
    /// The grace the pod worker recorded, seconds, when it differs from the kill's.
    pub recorded_grace_period_seconds: Option<i64>,
}

/// One container in the run report.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRun {
    /// The container's name in the spec.
    pub name: String,
    /// `main`, `sidecar` or `init`.
    pub role: &'static str,
    /// `restartCount`.
    pub restarts: u32,
    /// Every kill of it, in order.
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
    /// The exit code as the runtime reports it (128 + signal when a signal ended it).
    pub exit_code: i32,
    /// The signal's name (`SIGKILL`) when a signal ended PID 1.
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
    /// The preStop hook, when the container has one.
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
    /// PID 1's exit code (128 + signal), when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended PID 1, if one did.
    pub exit_signal: Option<String>,
    /// Who killed: `podWorker`, or `podKiller` (1.18–1.21: the second kill after the API
    /// object was removed).
    pub killed_by: &'static str,
}

/// An exit within this many seconds of the stop signal is "at once" for [`Diagnosis`]: 50 ms.
pub const PROMPT_EXIT_SECONDS: f64 = 0.05;

/// What a termination says about how the app handled its stop signal (the `run` summary's
/// diagnosis line). Seconds count from the stop signal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Diagnosis {
    /// The stop signal was not acted on: SIGKILL came at the deadline, `after_seconds` after it.
    StopSignalIgnored {
        /// From the stop signal to SIGKILL, seconds.
        after_seconds: f64,
    },
    /// The app exited within [`PROMPT_EXIT_SECONDS`] of the stop signal, which may mean it
    /// dropped its in-flight work.
    ExitedAtOnce {
        /// From the stop signal to the exit, seconds.
        after_seconds: f64,
    },
}

impl TerminationRun {
    /// The diagnosis of this termination: `None` when no stop signal was sent, or when the app
    /// exited on it after [`PROMPT_EXIT_SECONDS`] or more (a graceful stop).
    pub fn diagnosis(&self) -> Option<Diagnosis> {
        let sig = self.stop_signal_after_seconds?;
        match (self.kill_after_seconds, self.exit_after_seconds) {
            (Some(k), _) => Some(Diagnosis::StopSignalIgnored {
                after_seconds: k - sig,
            }),
            (None, Some(e)) if e - sig < PROMPT_EXIT_SECONDS => Some(Diagnosis::ExitedAtOnce {
                after_seconds: e - sig,
            }),
            _ => None,
        }
    }
}

/// A preStop hook in the run report.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreStopRun {
    /// `exec`, `httpGet`, `sleep` or `tcpSocket`.
    pub action: &'static str,
    /// When it started, seconds from the termination's start.
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
    /// The event's reason (`Killing`, `FailedPreStopHook`, `Unhealthy` ...).
    pub reason: &'static str,
    /// The name of the container the event is about, if one.
    pub container: Option<String>,
    /// The kubelet's message.
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
        object: pod.object.iter().map(|e| object_event(e, t0)).collect(),
        deletes: pod.deletes.iter().map(|d| delete_run(d, t0)).collect(),
    }
}

fn object_event(e: &ObjectEvent, t0: Instant) -> ObjectEventRun {
    ObjectEventRun {
        seconds: since(e.at, t0),
        kind: e.kind.as_str(),
        deletion_timestamp: e.deletion_timestamp.map(format_timestamp),
        deletion_grace_period_seconds: e.deletion_grace_period_seconds,
        phase: e.phase.as_str(),
        reason: (!e.reason.is_empty()).then(|| e.reason.clone()),
        message: (!e.message.is_empty()).then(|| e.message.clone()),
        ready: e.ready,
        table: TableRow {
            ready: e.row.ready.clone(),
            status: e.row.status.clone(),
        },
    }
}

fn delete_run(d: &DeleteRecord, t0: Instant) -> DeleteRun {
    let (api, dgps, dt) = match d.api {
        DeleteApi::NotFound => ("notFound", None, None),
        DeleteApi::Unchanged => ("unchanged", None, None),
        DeleteApi::Graceful {
            deletion_grace_period_seconds,
            deletion_timestamp,
        } => (
            "graceful",
            Some(deletion_grace_period_seconds),
            Some(deletion_timestamp),
        ),
        DeleteApi::Deleted { deletion_timestamp } => ("deleted", Some(0), Some(deletion_timestamp)),
    };
    let (kubelet, kill, recorded) = match d.kubelet {
        DeleteKubelet::Started {
            grace_period_seconds,
        } => ("started", Some(grace_period_seconds), None),
        DeleteKubelet::BeforeKill {
            grace_period_seconds,
        } => ("beforeKill", Some(grace_period_seconds), None),
        DeleteKubelet::NotShorter => ("notShorter", None, None),
        DeleteKubelet::Ignored {
            kept_seconds,
            recorded_seconds,
        } => ("ignored", Some(kept_seconds), Some(recorded_seconds)),
        DeleteKubelet::KilledAgain => ("killedAgain", None, None),
        DeleteKubelet::Nothing => ("nothing", None, None),
    };
    DeleteRun {
        seconds: since(d.at, t0),
        grace_period_seconds: kubectl_delete(d.flags)
            .ok()
            .and_then(|r| r.grace_period_seconds),
        force: d.flags.force,
        api,
        deletion_grace_period_seconds: dgps,
        deletion_timestamp: dt.map(format_timestamp),
        kubelet,
        kill_grace_period_seconds: kill,
        recorded_grace_period_seconds: recorded,
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
        killed_by: t.killer.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(sig: Option<f64>, kill: Option<f64>, exit: Option<f64>) -> TerminationRun {
        TerminationRun {
            reason: "Deleted",
            start_seconds: 1.0,
            grace_period_seconds: 30,
            pre_stop: None,
            stop_signal: "SIGTERM".into(),
            stop_signal_after_seconds: sig,
            kill_after_seconds: kill,
            exit_after_seconds: exit,
            exit_code: None,
            exit_signal: None,
            killed_by: "podWorker",
        }
    }

    #[test]
    fn diagnosis_of_a_stop() {
        // SIGKILL at the deadline, 29.5 s after SIGTERM: the signal was ignored.
        assert_eq!(
            run(Some(0.5), Some(30.0), Some(30.01)).diagnosis(),
            Some(Diagnosis::StopSignalIgnored {
                after_seconds: 29.5
            })
        );
        // An exit 10 ms after SIGTERM: at once.
        match run(Some(0.5), None, Some(0.51)).diagnosis() {
            Some(Diagnosis::ExitedAtOnce { after_seconds }) => {
                assert!((after_seconds - 0.01).abs() < 1e-9, "{after_seconds}");
            }
            other => panic!("{other:?}"),
        }
        // 50 ms or more: a graceful stop, nothing to say; no stop signal: nothing either.
        assert_eq!(run(Some(0.5), None, Some(0.55)).diagnosis(), None);
        assert_eq!(run(Some(0.5), None, Some(2.0)).diagnosis(), None);
        assert_eq!(run(None, Some(1.0), Some(1.0)).diagnosis(), None);
        assert_eq!(run(Some(0.5), None, None).diagnosis(), None);
    }
}
