//! Adapters for the pod worker vectors (`calculateEffectiveGracePeriod`, `UpdatePod`,
//! `killPodNow`).

use super::{Check, VectorError};
use crate::rules::podworker::{
    effective_grace_period, kill_pod_now_wait_seconds, later_update_in_flight, GraceInputs,
    InFlightEffect, KillPodOptions, LaterUpdate, PodUpdate, PodWorker, SyncCall, UpdateType,
};
use crate::KubeVersion;
use serde_json::{json, Value};

/// The vectors are taken from the newest upstream tests.
const VERSION: KubeVersion = KubeVersion::LATEST;

pub(super) fn effective_grace(c: &mut Check<'_>) -> Result<(), VectorError> {
    let inputs = GraceInputs {
        previous: c
            .input_opt_i64("status.gracePeriod(previous)")?
            .unwrap_or(0),
        deletion_grace_period_seconds: c.input_opt_i64("pod.deletionGracePeriodSeconds")?,
        termination_grace_period_seconds: c
            .input_opt_i64("pod.spec.terminationGracePeriodSeconds")?,
        override_seconds: c
            .input_opt_i64("KillPodOptions.PodTerminationGracePeriodSecondsOverride")?,
    };
    let (g, _) = effective_grace_period(inputs, VERSION);
    c.expect_eq("gracePeriod", g);
    Ok(())
}

/// Parses one step of an `UpdatePod` sequence, written as in the upstream test names.
fn parse_update(
    c: &Check<'_>,
    key: &str,
    step: &str,
    tgps: Option<i64>,
    terminal: bool,
) -> Result<PodUpdate, VectorError> {
    let mut u = PodUpdate::new(UpdateType::SyncPodCreate, tgps);
    u.terminal_phase = terminal;
    let (kind, rest) = step.split_once(' ').unwrap_or((step, ""));
    u.update_type = match kind {
        "SyncPodCreate" => UpdateType::SyncPodCreate,
        "SyncPodUpdate" => UpdateType::SyncPodUpdate,
        "SyncPodSync" => UpdateType::SyncPodSync,
        "SyncPodKill" => UpdateType::SyncPodKill,
        _ => return Err(c.bad(key, format!("unknown update type in {step:?}"))),
    };
    match rest {
        "" | "same UID" | "(no options)" => {}
        "with RunningPod only (no spec)" => {
            u.runtime_only = true;
            u.termination_grace_period_seconds = None;
        }
        "with KillPodOptions{Evict:true} (no override)" => {
            u.kill = Some(KillPodOptions {
                evict: true,
                override_seconds: None,
            });
        }
        r => {
            let dgps = r
                .strip_prefix("with deletionTimestamp and deletionGracePeriodSeconds=")
                .and_then(|n| n.parse::<i64>().ok())
                .ok_or_else(|| c.bad(key, format!("unknown update {step:?}")))?;
            u.deletion_timestamp = true;
            u.deletion_grace_period_seconds = Some(dgps);
        }
    }
    if u.update_type == UpdateType::SyncPodKill && u.kill.is_none() {
        u.kill = Some(KillPodOptions::default());
    }
    Ok(u)
}

pub(super) fn update_pod(c: &mut Check<'_>) -> Result<(), VectorError> {
    let tgps = c.input_opt_i64("pod.spec.terminationGracePeriodSeconds")?;
    let terminal = match c.input_opt_str("pod.status.phase")? {
        None | Some("Running") | Some("Pending") => false,
        Some("Succeeded") | Some("Failed") => true,
        Some(p) => return Err(c.bad("pod.status.phase", format!("unknown phase {p:?}"))),
    };
    match c.input_opt_str("runtime_cache")? {
        None | Some("not found") => {}
        Some(other) => return Err(c.bad("runtime_cache", format!("unknown value {other:?}"))),
    }
    let mut steps = Vec::new();
    if let Some(seq) = c.input_opt("sequence") {
        let seq = seq
            .as_array()
            .ok_or_else(|| c.bad("sequence", "expected a list"))?;
        for s in seq {
            let s = s
                .as_str()
                .ok_or_else(|| c.bad("sequence", "expected strings"))?;
            steps.push(parse_update(c, "sequence", s, tgps, terminal)?);
        }
    }
    if let Some(u) = c.input_opt_str("update")? {
        steps.push(parse_update(c, "update", u, tgps, terminal)?);
    }
    if steps.is_empty() {
        return Err(c.bad("sequence", "no update given"));
    }
    let mut w = PodWorker::new(VERSION);
    for s in steps {
        w.update_pod(s);
    }
    // Before the worker goroutine runs: what UpdatePod alone recorded.
    c.expect_eq("status.gracePeriod(before worker)", w.grace_period);
    c.expect_eq(
        "pendingUpdate.KillPodOptions.PodTerminationGracePeriodSecondsOverride",
        w.pending_kill.and_then(|k| k.override_seconds),
    );
    w.run_to_completion();
    c.expect_eq("status.gracePeriod", w.grace_period);
    let active = w.active_kill;
    c.expect_eq(
        "activeUpdate.KillPodOptions.PodTerminationGracePeriodSecondsOverride",
        active.and_then(|k| k.override_seconds),
    );
    c.expect_eq(
        "activeUpdate.KillPodOptions",
        active.map(|k| json!({"PodTerminationGracePeriodSecondsOverride": k.override_seconds, "Evict": k.evict})),
    );
    c.expect_eq("restartRequested", w.restart_requested);
    c.expect_eq("finished", w.finished);
    c.expect_eq("deleted", w.deleted);
    c.expect_eq("evicted", w.evicted);
    c.expect_eq("observedRuntime", w.observed_runtime);
    c.expect_eq("startedTerminating", w.started_terminating);
    Ok(())
}

pub(super) fn kill_pod_now(c: &mut Check<'_>) -> Result<(), VectorError> {
    let tgps = c.input_opt_i64("pod.spec.terminationGracePeriodSeconds")?;
    let evict = c.input_opt_bool("isEvicted")?.unwrap_or(false);
    let override_seconds = c.input_opt_i64("gracePeriodOverride")?;
    // The status function only shapes the API status; it does not change the kill.
    let status_fn = c.input_opt_str("statusFn")?.unwrap_or("");
    if !status_fn.is_empty() && !status_fn.starts_with("phase=") {
        return Err(c.bad("statusFn", format!("unknown status function {status_fn:?}")));
    }
    let mut w = PodWorker::new(VERSION);
    let mut u = PodUpdate::new(UpdateType::SyncPodKill, tgps);
    u.kill = Some(KillPodOptions {
        evict,
        override_seconds,
    });
    w.update_pod(u);
    w.run_to_completion();
    let processed: Vec<Value> = w
        .calls
        .iter()
        .filter_map(|call| match call {
            SyncCall::SyncTerminatingPod { .. } => Some("SyncPodKill (syncTerminatingPod)".into()),
            SyncCall::SyncTerminatedPod => Some("terminated (syncTerminatedPod)".into()),
            SyncCall::SyncTerminatingRuntimePod => {
                Some("SyncPodKill (syncTerminatingRuntimePod)".into())
            }
            SyncCall::SyncPod => None,
        })
        .collect();
    c.expect_eq("processed", processed);
    // killPodNow returns an error only when its wait times out; every sync here completes.
    c.expect_eq(
        "error",
        if w.finished {
            Value::Null
        } else {
            Value::from("timeout")
        },
    );
    c.expect_eq(
        "derived_wait_timeout_s",
        kill_pod_now_wait_seconds(override_seconds, tgps),
    );
    Ok(())
}

/// A later update reaching a `SyncTerminatingPod` in flight: what it does to the kill.
pub(super) fn later_update(c: &mut Check<'_>) -> Result<(), VectorError> {
    let v: KubeVersion = c
        .input_str("kubernetesVersion")?
        .parse()
        .map_err(|e| c.bad("kubernetesVersion", format!("{e}")))?;
    let kill = c.input_i64("killGraceSeconds")?;
    let update = LaterUpdate {
        effective_grace_seconds: c.input_i64("laterEffectiveGraceSeconds")?,
        object_removed: c
            .input_opt_bool("objectRemoved")?
            .ok_or_else(|| c.bad("objectRemoved", "expected a boolean"))?,
        deletion_grace_period_seconds: c.input_opt_i64("deletionGracePeriodSeconds")?,
    };
    match later_update_in_flight(v, kill, update) {
        InFlightEffect::NotShorter => c.expect_eq("effect", "notShorter"),
        InFlightEffect::Ignored {
            kept_seconds,
            recorded_seconds,
        } => {
            c.expect_eq("effect", "ignored");
            c.expect_eq("keptSeconds", kept_seconds);
            c.expect_eq("recordedSeconds", recorded_seconds);
        }
        InFlightEffect::KilledAgain { base_grace_seconds } => {
            c.expect_eq("effect", "killedAgain");
            c.expect_eq("baseGraceSeconds", base_grace_seconds);
        }
    }
    Ok(())
}
