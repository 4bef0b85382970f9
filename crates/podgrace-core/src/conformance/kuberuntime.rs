//! Adapters for the kuberuntime vectors (`setTerminationGracePeriod`, `killContainer`,
//! `terminationOrdering.waitForTurn`).

use super::{Check, VectorError};
use crate::rules::kuberuntime::{
    set_termination_grace_period as rule_base, simulate_ordering, truncated_seconds, GraceFields,
    KillContainer, KillReason, OrderedContainer,
};
use crate::KubeVersion;
use serde_json::{Map, Value};

const VERSION: KubeVersion = KubeVersion::LATEST;

fn grace_fields(c: &Check<'_>) -> Result<GraceFields, VectorError> {
    Ok(GraceFields {
        deletion_grace_period_seconds: c.input_opt_i64("pod.deletionGracePeriodSeconds")?,
        termination_grace_period_seconds: c
            .input_opt_i64("pod.spec.terminationGracePeriodSeconds")?,
        liveness_probe_seconds: c.input_opt_i64("livenessProbe.terminationGracePeriodSeconds")?,
        startup_probe_seconds: c.input_opt_i64("startupProbe.terminationGracePeriodSeconds")?,
    })
}

pub(super) fn set_termination_grace_period(c: &mut Check<'_>) -> Result<(), VectorError> {
    let fields = grace_fields(c)?;
    let reason = match c.input_opt_str("reason")?.unwrap_or("reasonUnknown") {
        "reasonLivenessProbe" => KillReason::LivenessProbe,
        "reasonStartupProbe" => KillReason::StartupProbe,
        "reasonUnknown" | "" => KillReason::Other,
        r => return Err(c.bad("reason", format!("unknown reason {r:?}"))),
    };
    c.expect_eq("gracePeriod", rule_base(fields, reason));
    Ok(())
}

/// The handler kind of a prose preStop description (`exec [...]`, `httpGet host=...`).
fn handler_kind(c: &Check<'_>, s: &str) -> Result<&'static str, VectorError> {
    match s.split_whitespace().next() {
        Some("exec") => Ok("exec"),
        Some("httpGet") => Ok("httpGet"),
        Some("sleep") => Ok("sleep"),
        _ => Err(c.bad("preStop", format!("unknown handler {s:?}"))),
    }
}

pub(super) fn kill_container_prestop(c: &mut Check<'_>) -> Result<(), VectorError> {
    let fields = grace_fields(c)?;
    let override_seconds = c.input_opt_i64("gracePeriodOverride")?;
    let kind = match c.input_opt_str("preStop")? {
        Some(s) => Some(handler_kind(c, s)?),
        None => None,
    };
    let mut kill = KillContainer::new(
        rule_base(fields, KillReason::Other),
        override_seconds,
        VERSION,
    );
    let runs = kill.pre_stop_budget(kind.is_some()).is_some();
    if runs {
        kill.pre_stop_finished(0);
    }
    c.expect_eq("preStop_exec_invoked", runs && kind == Some("exec"));
    c.expect_eq("preStop_http_request_sent", runs && kind == Some("httpGet"));
    c.expect_eq("derived_StopContainer_timeout", kill.stop_timeout());
    Ok(())
}

pub(super) fn kill_container_error(c: &mut Check<'_>) -> Result<(), VectorError> {
    let containers = c.input_array("pod.containers")?;
    let name = c.input_str("containerName")?;
    let _ = c.input_opt_i64("gracePeriodOverride")?;
    // killContainer looks the container up in the pod spec and fails when it is not there.
    let found = containers.iter().any(|n| n.as_str() == Some(name));
    c.expect_eq("error", !found);
    Ok(())
}

pub(super) fn wait_for_turn(c: &mut Check<'_>) -> Result<(), VectorError> {
    let mut containers = Vec::new();
    for ic in c.input_array("initContainers")? {
        let name = ic
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| c.bad("initContainers", "name missing"))?;
        let policy = ic.get("restartPolicy").and_then(Value::as_str);
        containers.push(OrderedContainer {
            name: name.to_string(),
            sidecar: policy == Some("Always"),
        });
    }
    for m in c.input_array("containers")? {
        let name = m
            .as_str()
            .ok_or_else(|| c.bad("containers", "expected names"))?;
        containers.push(OrderedContainer {
            name: name.to_string(),
            sidecar: false,
        });
    }
    let all_grace = c.input_opt_i64("waitForTurn_grace")?;
    let sidecar_grace = c.input_opt_i64("sidecar_waitForTurn_grace")?.or(all_grace);
    let main_grace = c.input_opt_i64("main_waitForTurn_grace")?.or(all_grace);
    let (Some(sidecar_grace), Some(main_grace)) = (sidecar_grace, main_grace) else {
        return Err(c.bad("waitForTurn_grace", "no grace given"));
    };
    let each_ms = c
        .input_opt_f64("each_container_exits_after_turn_s")?
        .map(|s| (s * 1000.0).round() as i64);
    let main_ms = c
        .input_opt_f64("main_exits_after_s")?
        .map(|s| (s * 1000.0).round() as i64);
    let is_sidecar = |n: &str| containers.iter().any(|c| c.name == n && c.sidecar);
    let waits = simulate_ordering(
        &containers,
        |n| {
            if is_sidecar(n) {
                sidecar_grace
            } else {
                main_grace
            }
        },
        |n| {
            if is_sidecar(n) {
                each_ms.unwrap_or(0)
            } else {
                main_ms.or(each_ms).unwrap_or(0)
            }
        },
    );
    let seconds = |f: &dyn Fn(i64) -> Value| -> Value {
        Value::Object(
            waits
                .iter()
                .map(|(n, w)| (n.clone(), f(*w)))
                .collect::<Map<_, _>>(),
        )
    };
    c.expect_eq("wait_seconds", seconds(&|w| Value::from(w as f64 / 1000.0)));
    c.expect_eq(
        "wait_seconds_truncated",
        seconds(&|w| Value::from(truncated_seconds(w))),
    );
    Ok(())
}
