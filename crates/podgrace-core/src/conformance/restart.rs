//! Adapters for the kubelet's restart vectors: the crash back-off (`flowcontrol.Backoff`) and
//! `ShouldContainerBeRestarted`.

use super::{Check, VectorError};
use crate::plan::RestartPolicy;
use crate::rules::backoff::Backoff;
use crate::rules::restart::{should_container_be_restarted, LastState};
use serde_json::Value;

fn ms(c: &Check<'_>, key: &str, v: Option<&Value>) -> Result<u64, VectorError> {
    v.and_then(Value::as_u64)
        .ok_or_else(|| c.bad(key, "expected milliseconds (a non-negative integer)"))
}

/// `flowcontrol.Backoff`: `{initialMs, maxMs, steps: [{op, nowMs, eventMs?}]}` → `{results}`,
/// one per step: `get` the back-off in milliseconds, `isInBackOffSince` /
/// `isInBackOffSinceUpdate` a boolean, `next` and `reset` null.
pub(super) fn backoff(c: &mut Check<'_>) -> Result<(), VectorError> {
    let initial = u64::try_from(c.input_i64("initialMs")?)
        .map_err(|_| c.bad("initialMs", "must not be negative"))?;
    let max =
        u64::try_from(c.input_i64("maxMs")?).map_err(|_| c.bad("maxMs", "must not be negative"))?;
    let mut b = Backoff::new(initial, max);
    let mut results = Vec::new();
    for step in c.input_array("steps")? {
        let o = step
            .as_object()
            .ok_or_else(|| c.bad("steps", "expected objects"))?;
        if let Some(k) = o
            .keys()
            .find(|k| !["op", "nowMs", "eventMs"].contains(&k.as_str()))
        {
            return Err(c.bad("steps", format!("unknown field {k:?}")));
        }
        let now = ms(c, "steps.nowMs", o.get("nowMs"))?;
        let event = match o.get("eventMs") {
            Some(v) => ms(c, "steps.eventMs", Some(v))?,
            None => now,
        };
        let r = match o.get("op").and_then(Value::as_str) {
            Some("get") => Value::from(b.get()),
            Some("next") => {
                b.next(event, now);
                Value::Null
            }
            Some("reset") => {
                b.reset();
                Value::Null
            }
            Some("isInBackOffSince") => Value::from(b.is_in_back_off_since(event, now)),
            Some("isInBackOffSinceUpdate") => Value::from(b.is_in_back_off_since_update(event)),
            other => return Err(c.bad("steps.op", format!("unknown op {other:?}"))),
        };
        results.push(r);
    }
    c.expect_eq("results", results);
    Ok(())
}

/// `ShouldContainerBeRestarted`: `{restartPolicy, deleted, state: noHistory|running|created|
/// unknown|exited, exitCode?}` → `{restart}`.
pub(super) fn should_restart(c: &mut Check<'_>) -> Result<(), VectorError> {
    let policy = match c.input_str("restartPolicy")? {
        "Always" => RestartPolicy::Always,
        "OnFailure" => RestartPolicy::OnFailure,
        "Never" => RestartPolicy::Never,
        other => return Err(c.bad("restartPolicy", format!("unknown policy {other:?}"))),
    };
    let deleted = c
        .input_opt_bool("deleted")?
        .ok_or_else(|| c.bad("deleted", "expected a boolean"))?;
    let state = match c.input_str("state")? {
        "noHistory" => LastState::NoHistory,
        "running" => LastState::Running,
        "created" => LastState::Created,
        "unknown" => LastState::Unknown,
        "exited" => {
            let code = c.input_i64("exitCode")?;
            LastState::Exited(i32::try_from(code).map_err(|_| c.bad("exitCode", "out of range"))?)
        }
        other => return Err(c.bad("state", format!("unknown state {other:?}"))),
    };
    c.expect_eq(
        "restart",
        should_container_be_restarted(policy, deleted, state),
    );
    Ok(())
}
