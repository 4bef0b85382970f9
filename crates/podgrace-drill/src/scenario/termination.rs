//! A disrupted pod's termination, read from the kubelet's records and the runtime's measured
//! signals: when it started, its stop signal, SIGKILL, and each container's stop.

use podgrace_node::kubelet::PodReport;
use podgrace_node::runtime::{StopEvent, StopEventKind};

use crate::advice::ContainerStop;
use crate::report::PodTermination;

/// A disrupted pod's termination instants, from the kubelet's records and the runtime's
/// measured signals (the first container that got them).
pub(super) fn pod_termination(
    name: &str,
    report: &PodReport,
    stop_events: &dyn Fn(&str) -> Vec<StopEvent>,
    epoch: std::time::Instant,
) -> PodTermination {
    let mut started = None;
    let mut stop_signal = None;
    let mut killed = None;
    for c in &report.containers {
        for t in &c.terminations {
            let s = t.kill.started;
            started = Some(started.map_or(s, |x: std::time::Instant| x.min(s)));
            for e in stop_events(&t.container_id) {
                if e.at < t.kill.started {
                    continue;
                }
                let keep_min = |slot: &mut Option<std::time::Instant>| {
                    *slot = Some(slot.map_or(e.at, |x| x.min(e.at)));
                };
                match e.kind {
                    StopEventKind::StopSignalSent { .. } => keep_min(&mut stop_signal),
                    StopEventKind::KillSent => keep_min(&mut killed),
                    _ => {}
                }
            }
        }
    }
    let rel = |t: std::time::Instant| t.saturating_duration_since(epoch);
    PodTermination {
        pod: name.to_string(),
        started: started.map(rel).unwrap_or_default(),
        stop_signal: stop_signal.map(rel),
        killed: killed.map(rel),
    }
}

/// The stop of every container of a disrupted pod (its last termination), from the runtime's
/// measured signals and exit.
pub(super) fn container_stops_of(
    name: &str,
    report: &PodReport,
    stop_events: &dyn Fn(&str) -> Vec<StopEvent>,
    epoch: std::time::Instant,
) -> Vec<ContainerStop> {
    let rel = |t: std::time::Instant| t.saturating_duration_since(epoch);
    report
        .containers
        .iter()
        .filter_map(|c| {
            let t = c
                .terminations
                .iter()
                .rev()
                .find(|t| t.killer == podgrace_node::kubelet::Killer::PodWorker)?;
            let mut stop = ContainerStop {
                pod: name.to_string(),
                container: c.name.clone(),
                stop_signal: None,
                killed: None,
                exited: None,
                budget_seconds: t.kill.stop_timeout_seconds,
            };
            for e in stop_events(&t.container_id) {
                if e.at < t.kill.started {
                    continue;
                }
                let slot = match e.kind {
                    StopEventKind::StopSignalSent { .. } => &mut stop.stop_signal,
                    StopEventKind::KillSent => &mut stop.killed,
                    StopEventKind::Exited { .. } => &mut stop.exited,
                    _ => continue,
                };
                slot.get_or_insert(rel(e.at));
            }
            Some(stop)
        })
        .collect()
}
