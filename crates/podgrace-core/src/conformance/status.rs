//! Adapters for the kubelet-status vectors: `getPhase`, the status manager's `canBeDeleted`,
//! the API server's `printPod`, and containerd's exit reason.

use super::{Check, VectorError};
use crate::plan::RestartPolicy;
use crate::rules::apiserver::PodPhase;
use crate::rules::podstatus::{
    can_be_deleted, get_phase, ContainerState, ContainerStatus, PhaseSpec, Terminated,
};
use crate::rules::printers::{print_pod, PodForPrint};
use crate::rules::runtime::containerd_exit_reason;
use crate::KubeVersion;
use serde_json::{Map, Value};

/// The time axis of the printer vectors: `now` in milliseconds.
const NOW_MS: i64 = 1_000_000_000;

fn version(c: &Check<'_>) -> Result<KubeVersion, VectorError> {
    let s = c.input_str("kubernetesVersion")?;
    s.parse()
        .map_err(|e| c.bad("kubernetesVersion", format!("{e}")))
}

fn bool_input(c: &Check<'_>, key: &str) -> Result<bool, VectorError> {
    c.input_opt_bool(key)?
        .ok_or_else(|| c.bad(key, "expected a boolean"))
}

fn phase(c: &Check<'_>, key: &str, s: &str) -> Result<PodPhase, VectorError> {
    PodPhase::parse(s).ok_or_else(|| c.bad(key, format!("unknown phase {s:?}")))
}

/// `[{name, restartable}]`.
fn init_containers(c: &Check<'_>) -> Result<Vec<(String, bool)>, VectorError> {
    let key = "initContainers";
    c.input_array(key)?
        .iter()
        .map(|v| {
            let o = v
                .as_object()
                .ok_or_else(|| c.bad(key, "expected objects"))?;
            only(c, key, o, &["name", "restartable"])?;
            let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
            let r = o
                .get("restartable")
                .and_then(Value::as_bool)
                .ok_or_else(|| c.bad(key, "restartable must be a boolean"))?;
            Ok((name.to_string(), r))
        })
        .collect()
}

fn only(
    c: &Check<'_>,
    key: &str,
    o: &Map<String, Value>,
    known: &[&str],
) -> Result<(), VectorError> {
    match o.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(c.bad(key, format!("unknown field {k:?}"))),
        None => Ok(()),
    }
}

/// One container status written as `{name?, state: running|terminated|waiting|unset, exitCode?,
/// reason?, signal?, lastExitCode?, lastFinishedAgoSeconds?, started?, ready?, restartCount?}`.
fn status(c: &Check<'_>, key: &str, v: &Value) -> Result<ContainerStatus, VectorError> {
    let o = v
        .as_object()
        .ok_or_else(|| c.bad(key, "expected objects"))?;
    only(
        c,
        key,
        o,
        &[
            "name",
            "state",
            "exitCode",
            "reason",
            "signal",
            "lastExitCode",
            "lastFinishedAgoSeconds",
            "started",
            "ready",
            "restartCount",
        ],
    )?;
    let int = |k: &str| -> Result<Option<i64>, VectorError> {
        match o.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| c.bad(key, format!("{k} must be an integer"))),
        }
    };
    let narrow =
        |k: &str, v: i64| i32::try_from(v).map_err(|_| c.bad(key, format!("{k} out of range")));
    let reason = o
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let state = match o.get("state").and_then(Value::as_str) {
        Some("running") => ContainerState::Running,
        Some("waiting") => ContainerState::Waiting { reason },
        Some("unset") => ContainerState::Unset,
        Some("terminated") => ContainerState::Terminated(Terminated {
            exit_code: narrow("exitCode", int("exitCode")?.unwrap_or(0))?,
            reason,
            signal: narrow("signal", int("signal")?.unwrap_or(0))?,
            finished_at_ms: None,
        }),
        other => return Err(c.bad(key, format!("unknown state {other:?}"))),
    };
    let last_finished = int("lastFinishedAgoSeconds")?;
    let last_code = int("lastExitCode")?;
    let last_terminated = if last_code.is_some() || last_finished.is_some() {
        Some(Terminated {
            exit_code: narrow("lastExitCode", last_code.unwrap_or(0))?,
            finished_at_ms: last_finished.map(|s| NOW_MS - s * 1000),
            ..Default::default()
        })
    } else {
        None
    };
    Ok(ContainerStatus {
        name: o
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        state,
        last_terminated,
        ready: o.get("ready").and_then(Value::as_bool).unwrap_or(false),
        started: o.get("started").and_then(Value::as_bool),
        restart_count: narrow("restartCount", int("restartCount")?.unwrap_or(0))?,
    })
}

fn statuses(c: &Check<'_>, key: &str) -> Result<Vec<ContainerStatus>, VectorError> {
    c.input_array(key)?
        .iter()
        .map(|v| status(c, key, v))
        .collect()
}

pub(super) fn get_phase_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let policy = match c.input_str("restartPolicy")? {
        "Always" => RestartPolicy::Always,
        "OnFailure" => RestartPolicy::OnFailure,
        "Never" => RestartPolicy::Never,
        other => return Err(c.bad("restartPolicy", format!("unknown policy {other:?}"))),
    };
    let containers = c
        .input_array("containers")?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| c.bad("containers", "expected names"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let spec = PhaseSpec {
        restart_policy: policy,
        init_containers: init_containers(c)?,
        containers,
        static_pod: false,
    };
    let st = statuses(c, "statuses")?;
    let got = get_phase(
        &spec,
        &st,
        bool_input(c, "podIsTerminal")?,
        bool_input(c, "podHasInitialized")?,
        version(c)?,
    );
    c.expect_eq("phase", got.as_str());
    Ok(())
}

pub(super) fn can_be_deleted_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let p = c.input_str("apiPhase")?;
    let got = can_be_deleted(
        bool_input(c, "deletionTimestamp")?,
        bool_input(c, "mirrorPod")?,
        phase(c, "apiPhase", p)?,
        bool_input(c, "podIsFinished")?,
        version(c)?,
    );
    c.expect_eq("canBeDeleted", got);
    Ok(())
}

pub(super) fn print_pod_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let containers = c.input_i64("containers")?;
    let pod = PodForPrint {
        name: c.input_str("name")?.to_string(),
        containers: usize::try_from(containers)
            .map_err(|_| c.bad("containers", "must not be negative"))?,
        init_containers: init_containers(c)?,
        phase: c.input_opt_str("phase")?.unwrap_or_default().to_string(),
        reason: c.input_opt_str("reason")?.unwrap_or_default().to_string(),
        deletion_timestamp: bool_input(c, "deletionTimestamp")?,
        scheduling_gated: bool_input(c, "schedulingGated")?,
        initialized: bool_input(c, "initialized")?,
        ready_condition: bool_input(c, "readyCondition")?,
        init_container_statuses: statuses(c, "initContainerStatuses")?,
        container_statuses: statuses(c, "containerStatuses")?,
        created_ms: None,
    };
    let row = print_pod(&pod, NOW_MS, version(c)?);
    c.expect_eq("ready", row.ready);
    c.expect_eq("status", row.status);
    c.expect_eq("restarts", row.restarts);
    Ok(())
}

pub(super) fn exit_reason_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let code = c.input_i64("exitCode")?;
    let code = i32::try_from(code).map_err(|_| c.bad("exitCode", "out of range"))?;
    let oom = bool_input(c, "oomKilled")?;
    c.expect_eq("reason", containerd_exit_reason(code, oom));
    Ok(())
}
