//! Adapters for the API server vectors (`rest.BeforeDelete`, `Store.Delete`,
//! `podStrategy.CheckGracefulDelete`, kubectl delete flags).

use super::{Check, VectorError};
use crate::rules::apiserver::{
    before_delete as rule_before_delete, check_graceful_delete as rule_check,
    clamps_deletion_timestamp, kubectl_delete as rule_kubectl, should_delete_during_update,
    store_delete as rule_store_delete, store_delete_ms, DeletionState, KubectlDeleteFlags,
    PodForDelete, PodPhase, StoredPod,
};
use crate::KubeVersion;
use serde_json::Value;

/// The time axis of the vectors: `now` is 1000 s, so `now-60s` is 940.
const NOW: i64 = 1000;

/// Parses `now`, `now+2s`, `now-60s` into seconds on the vectors' axis.
fn relative_time(c: &Check<'_>, key: &str, s: &str) -> Result<i64, VectorError> {
    let rest = s
        .strip_prefix("now")
        .ok_or_else(|| c.bad(key, format!("not a time like now-1s: {s:?}")))?;
    if rest.is_empty() {
        return Ok(NOW);
    }
    let (sign, num) = match rest.as_bytes().first() {
        Some(b'+') => (1, &rest[1..]),
        Some(b'-') => (-1, &rest[1..]),
        _ => return Err(c.bad(key, format!("not a time like now-1s: {s:?}"))),
    };
    let secs: i64 = num
        .strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| c.bad(key, format!("not a time like now-1s: {s:?}")))?;
    Ok(NOW.saturating_add(secs.saturating_mul(sign)))
}

fn show_time(t: i64) -> String {
    match t - NOW {
        0 => "now".to_string(),
        d if d > 0 => format!("now+{d}s"),
        d => format!("now{d}s"),
    }
}

pub(super) fn before_delete(c: &mut Check<'_>) -> Result<(), VectorError> {
    // `object_already_deleting` restates whether a deletion timestamp is set; check it agrees.
    let already = c.input_opt_bool("object_already_deleting")?;
    let dt = match c.input_opt_str("existing_deletionTimestamp")? {
        Some(s) => Some(relative_time(c, "existing_deletionTimestamp", s)?),
        None => None,
    };
    if already.is_some_and(|a| a != dt.is_some()) {
        return Err(c.bad(
            "object_already_deleting",
            "disagrees with existing_deletionTimestamp",
        ));
    }
    let existing = DeletionState {
        deletion_timestamp: dt,
        deletion_grace_period_seconds: c.input_opt_i64("existing_deletionGracePeriodSeconds")?,
    };
    let options = c.input_opt_i64("options.gracePeriodSeconds")?;
    let supports = c
        .input_opt_bool("strategy_supports_graceful")?
        .unwrap_or(true);
    // The vectors come from the current apiserver (clamp of DT to now, Kubernetes 1.33+).
    let out = rule_before_delete(existing, options, NOW, supports, true, |p| {
        Some(p.unwrap_or(0))
    });
    c.expect_eq("graceful", out.graceful);
    c.expect_eq("gracefulPending", out.graceful_pending);
    c.expect_eq(
        "metadata.deletionGracePeriodSeconds",
        out.object.deletion_grace_period_seconds,
    );
    c.expect_eq(
        "options.gracePeriodSeconds",
        out.options_grace_period_seconds,
    );
    c.expect_eq(
        "metadata.deletionTimestamp",
        out.object.deletion_timestamp.map(show_time),
    );
    if let Some(effect) = c.expected("effect") {
        // "Store.Delete deletes the object immediately": neither graceful nor pending.
        let immediate = !out.graceful && !out.graceful_pending;
        let says_immediate = effect
            .as_str()
            .is_some_and(|s| s.contains("deletes the object immediately"));
        if !says_immediate {
            return Err(c.bad("effect", format!("unknown effect {effect}")));
        }
        if !immediate {
            c.mismatch("effect: expected an immediate delete");
        }
    }
    Ok(())
}

/// Parses prose such as `pod with finalizer foo.com/x, spec.nodeName=machine` or
/// `pod with spec.nodeName=machine, not yet deleting`.
fn stored_pod(c: &Check<'_>, s: &str) -> Result<StoredPod, VectorError> {
    let body = s
        .strip_prefix("pod with ")
        .ok_or_else(|| c.bad("object", format!("expected \"pod with ...\": {s:?}")))?;
    let mut pod = StoredPod::default();
    for clause in body.split(',').map(str::trim) {
        if let Some(node) = clause.strip_prefix("spec.nodeName=") {
            pod.pod.node_name = node.to_string();
        } else if let Some(f) = clause.strip_prefix("finalizer ") {
            pod.finalizers.push(f.to_string());
        } else if clause == "not yet deleting" {
            pod.deletion = DeletionState::default();
        } else {
            return Err(c.bad("object", format!("unknown clause {clause:?}")));
        }
    }
    pod.pod.phase = PodPhase::Pending;
    Ok(pod)
}

pub(super) fn store_delete(c: &mut Check<'_>) -> Result<(), VectorError> {
    let pod = stored_pod(c, c.input_str("object")?)?;
    let options = c.input_opt_i64("options.gracePeriodSeconds")?;
    match c.input_opt_str("preconditions.resourceVersion")? {
        None | Some("current") => {}
        Some(other) => {
            return Err(c.bad(
                "preconditions.resourceVersion",
                format!("unknown value {other:?}"),
            ))
        }
    }
    let out = rule_store_delete(&pod, true, options, NOW, true);
    c.expect_eq("wasDeleted", out.was_deleted);
    c.expect_eq("object_gone", out.object.is_none());
    c.expect_eq("object_still_exists", out.object.is_some());
    if let Some(then) = c.expected("then") {
        if then.as_str()
            != Some("removing the finalizer via update deletes the object (AfterDelete called)")
        {
            return Err(c.bad("then", format!("unknown follow-up {then}")));
        }
        match out.object {
            Some(mut obj) => {
                obj.finalizers.clear();
                if !should_delete_during_update(&obj) {
                    c.mismatch("then: removing the finalizer did not delete the object");
                }
            }
            None => c.mismatch("then: the object was already gone"),
        }
    }
    Ok(())
}

pub(super) fn check_graceful_delete(c: &mut Check<'_>) -> Result<(), VectorError> {
    let phase_str = c.input_opt_str("status.phase")?.unwrap_or("");
    let phase = PodPhase::parse(phase_str)
        .ok_or_else(|| c.bad("status.phase", format!("unknown phase {phase_str:?}")))?;
    let pod = PodForDelete {
        node_name: c.input_opt_str("spec.nodeName")?.unwrap_or("").to_string(),
        phase,
        termination_grace_period_seconds: c.input_opt_i64("spec.terminationGracePeriodSeconds")?,
    };
    let options = c.input_opt_i64("options.gracePeriodSeconds")?;
    let out = rule_check(&pod, true, options);
    c.expect_eq("returns", out.is_some());
    c.expect_eq("options.gracePeriodSeconds", out);
    Ok(())
}

pub(super) fn kubectl_delete(c: &mut Check<'_>) -> Result<(), VectorError> {
    let flags = KubectlDeleteFlags {
        grace_period: c.input_opt_i64("--grace-period")?.unwrap_or(-1),
        force: c.input_opt_bool("--force")?.unwrap_or(false),
        now: c.input_opt_bool("--now")?.unwrap_or(false),
    };
    match rule_kubectl(flags) {
        Ok(req) => {
            c.expect_eq("request.gracePeriodSeconds", req.grace_period_seconds);
            if let Some(w) = c.expected("warning") {
                let want = w.as_str().unwrap_or_default().trim_end_matches("...");
                if !req.warning.is_some_and(|got| got.starts_with(want)) {
                    c.mismatch(format!("warning: expected {w}, got {:?}", req.warning));
                }
            }
            if c.expected("error").is_some() {
                c.mismatch("error: expected an error, kubectl accepted the flags");
            }
            c.expect_eq("exit_code", 0);
        }
        Err(e) => {
            c.expect_eq("error", Value::String(e.to_string()));
            c.expect_eq("exit_code", 1);
            if c.expected("request.gracePeriodSeconds").is_some() {
                c.mismatch(format!(
                    "request.gracePeriodSeconds: expected a request, got error {e}"
                ));
            }
        }
    }
    Ok(())
}

/// `Store.Delete` at millisecond precision on a recorded axis: the stored object before
/// (DT in whole seconds, DGPS), the request's grace, the clock (`nowMs`); expected DT, DGPS and
/// the watch events the call produces (`MODIFIED` for the graceful-deletion update, then
/// `DELETED` when it removed the object).
pub(super) fn store_delete_clock(c: &mut Check<'_>) -> Result<(), VectorError> {
    let v: KubeVersion = c
        .input_str("kubernetesVersion")?
        .parse()
        .map_err(|e| c.bad("kubernetesVersion", format!("{e}")))?;
    let phase_str = c.input_str("phase")?;
    let phase = PodPhase::parse(phase_str)
        .ok_or_else(|| c.bad("phase", format!("unknown phase {phase_str:?}")))?;
    let stored = StoredPod {
        pod: PodForDelete {
            node_name: "sanode".into(),
            phase,
            termination_grace_period_seconds: c.input_opt_i64("terminationGracePeriodSeconds")?,
        },
        deletion: DeletionState {
            deletion_timestamp: c.input_opt_i64("existing_deletionTimestamp")?,
            deletion_grace_period_seconds: c
                .input_opt_i64("existing_deletionGracePeriodSeconds")?,
        },
        finalizers: Vec::new(),
    };
    let options = c.input_opt_i64("options.gracePeriodSeconds")?;
    let now_ms = c.input_i64("nowMs")?;
    let out = store_delete_ms(&stored, true, options, now_ms, clamps_deletion_timestamp(v));
    let after = out
        .object
        .as_ref()
        .or(out.written.as_ref())
        .map(|o| o.deletion)
        .unwrap_or_default();
    c.expect_eq("metadata.deletionTimestamp", after.deletion_timestamp);
    c.expect_eq(
        "metadata.deletionGracePeriodSeconds",
        after.deletion_grace_period_seconds,
    );
    let mut events = Vec::new();
    if out.written.is_some() {
        events.push(Value::String("MODIFIED".into()));
    }
    if out.was_deleted {
        events.push(Value::String("DELETED".into()));
    }
    c.expect_eq("watchEvents", events);
    Ok(())
}
