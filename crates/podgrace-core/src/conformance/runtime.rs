//! Vectors of the container runtimes: containerd stop signal conversion and stop wait, moby's
//! stop signal.

use super::{Check, VectorError};
use crate::rules::runtime::{
    containerd_wait_container_stop, convert_from_cri_signal, cri_signal_to_oci_stop_signal,
    docker_stop_signal,
};
use serde_json::Value;

pub(super) fn evaluate(c: &mut Check<'_>) -> Result<(), VectorError> {
    match c.function() {
        "containerd criService.waitContainerStop" => wait_container_stop(c),
        "containerd criSignalToOCIStopSignal" => {
            let got = cri_signal_to_oci_stop_signal(c.input_str("cri_signal")?);
            c.expect_eq("error", got.is_err());
            if let Ok(sig) = got {
                c.expect_eq("stopSignal", sig.map(|s| s.name()).unwrap_or_default());
            } else if c.expected("stopSignal").is_some() {
                c.mismatch("stopSignal: expected a value, got an error");
            }
            Ok(())
        }
        "containerd convertFromCRISignal" => {
            match convert_from_cri_signal(c.input_str("cri_signal_name")?) {
                Ok(sig) => c.expect_eq("oci_signal", sig.name()),
                Err(e) => c.mismatch(format!("oci_signal: {e}")),
            }
            Ok(())
        }
        "moby Container.StopSignal" => {
            let got = docker_stop_signal(c.input_str("Config.StopSignal")?);
            if let Some(want) = c.expected("signal") {
                // "SIGTERM (defaultStopSignal)": the name, then a remark.
                let want = want
                    .as_str()
                    .ok_or_else(|| c.bad("signal", "expected a string"))?;
                let name = want.split(" (").next().unwrap_or(want);
                if name != got.name() {
                    c.mismatch(format!("signal: expected {name}, got {got}"));
                }
            }
            Ok(())
        }
        _ => Err(c.bad("function", "unknown runtime function")),
    }
}

/// Milliseconds from `200ms`, `1h`, `2s`.
fn millis(c: &Check<'_>, key: &str, s: &str) -> Result<i64, VectorError> {
    super::eviction::parse_duration(s)
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .ok_or_else(|| c.bad(key, format!("bad duration {s:?}")))
}

fn wait_container_stop(c: &mut Check<'_>) -> Result<(), VectorError> {
    let state = c.input_str("container_state")?;
    let exits_after_ms = match state.split(" (").next().unwrap_or(state) {
        "running" => None,
        "exited" => Some(0),
        other => return Err(c.bad("container_state", format!("unknown state {other:?}"))),
    };
    let deadline = match c.input_opt_str("ctx_timeout")? {
        Some(s) => Some(millis(c, "ctx_timeout", s)?),
        None => None,
    };
    let cancelled = match c.input_opt_str("ctx")? {
        None => false,
        Some("cancelled") => true,
        Some(other) => return Err(c.bad("ctx", format!("unknown context state {other:?}"))),
    };
    let got = containerd_wait_container_stop(exits_after_ms, deadline, cancelled);
    c.expect_eq("error", Value::Bool(got.is_err()));
    Ok(())
}
