//! Adapters for the controllers' vectors (`pkg/controller/deployment/util`
//! `deployment_util_test.go`): `ResolveFenceposts`, `NewRSNewReplicas`, `MaxUnavailable`.

use super::{Check, VectorError};
use crate::rules::deployment as d;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{json, Value};

pub(super) fn evaluate(c: &mut Check<'_>) -> Result<(), VectorError> {
    match c.function() {
        "deployment.ResolveFenceposts" => resolve_fenceposts(c),
        "deployment.NewRSNewReplicas" => new_rs_new_replicas(c),
        "deployment.MaxUnavailable" => max_unavailable(c),
        _ => Err(c.bad("function", "unknown controller function")),
    }
}

fn int_or_string(c: &Check<'_>, key: &str) -> Result<Option<IntOrString>, VectorError> {
    match c.input_opt(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(IntOrString::String(s.clone()))),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .map(|v| Some(IntOrString::Int(v)))
            .ok_or_else(|| c.bad(key, "not an int32")),
        Some(_) => Err(c.bad(key, "expected a string, an integer or null")),
    }
}

fn int32(c: &Check<'_>, key: &str) -> Result<i32, VectorError> {
    i32::try_from(c.input_i64(key)?).map_err(|_| c.bad(key, "not an int32"))
}

fn resolve_fenceposts(c: &mut Check<'_>) -> Result<(), VectorError> {
    let surge = int_or_string(c, "maxSurge")?;
    let unavailable = int_or_string(c, "maxUnavailable")?;
    let desired = int32(c, "desired")?;
    match d::resolve_fenceposts(surge.as_ref(), unavailable.as_ref(), desired) {
        Ok((s, u)) => {
            c.expect_eq("error", false);
            c.expect_eq("surge", s);
            c.expect_eq("unavailable", u);
        }
        Err(_) => c.expect_eq("error", true),
    }
    Ok(())
}

fn deployment(c: &Check<'_>, replicas: Option<i32>) -> Result<Deployment, VectorError> {
    let strategy = c.input_str("strategy")?;
    let mut v = json!({"spec": {"selector": {}, "template": {}, "strategy": {"type": strategy}}});
    if let Some(r) = replicas {
        v["spec"]["replicas"] = json!(r);
    }
    if strategy == "RollingUpdate" || c.has_input("maxSurge") {
        let ru = json!({
            "maxSurge": serde_json::to_value(int_or_string(c, "maxSurge")?).unwrap_or(Value::Null),
            "maxUnavailable": serde_json::to_value(int_or_string(c, "maxUnavailable")?).unwrap_or(Value::Null),
        });
        v["spec"]["strategy"]["rollingUpdate"] = ru;
    }
    serde_json::from_value(v).map_err(|e| c.bad("strategy", e.to_string()))
}

fn rs(replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({"spec": {"replicas": replicas, "selector": {}}}))
        .unwrap_or_default()
}

fn new_rs_new_replicas(c: &mut Check<'_>) -> Result<(), VectorError> {
    let dep = deployment(c, Some(int32(c, "depReplicas")?))?;
    let new = rs(int32(c, "newRSReplicas")?);
    let others: Vec<ReplicaSet> = c
        .input_array("allReplicaSets")?
        .iter()
        .map(|v| {
            v.as_i64()
                .and_then(|x| i32::try_from(x).ok())
                .map(rs)
                .ok_or_else(|| c.bad("allReplicaSets", "replicas as integers"))
        })
        .collect::<Result<_, _>>()?;
    let all: Vec<&ReplicaSet> = others.iter().collect();
    match d::new_rs_new_replicas(&dep, &all, &new) {
        Ok(n) => c.expect_eq("replicas", n),
        Err(e) => c.mismatch(format!("unexpected error {e}")),
    }
    Ok(())
}

fn max_unavailable(c: &mut Check<'_>) -> Result<(), VectorError> {
    let replicas = c
        .input_opt_i64("replicas")?
        .map(|r| i32::try_from(r).unwrap_or(0));
    let dep = deployment(c, replicas)?;
    c.expect_eq("maxUnavailable", d::max_unavailable(&dep));
    Ok(())
}
