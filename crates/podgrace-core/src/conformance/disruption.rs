//! Adapters for the disruption controller's vectors (`pkg/controller/disruption/
//! disruption_test.go`: the status a sync writes, `VerifyPdbStatus` and
//! `VerifyDisruptionAllowed`): `getExpectedPodCount`, `countHealthyPods` and `updatePdbStatus`
//! over the pods a budget selects, with the controllers' scales as the finders would return
//! them, and `failSafe` when no finder knows a pod's controller.

use super::{Check, VectorError};
use crate::rules::disruption as rules;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub(super) fn evaluate(c: &mut Check<'_>) -> Result<(), VectorError> {
    match c.function() {
        "disruption.sync (status)" => sync_status(c),
        _ => Err(c.bad("function", "unknown disruption function")),
    }
}

/// A fixed clock for the vectors (no disrupted pods, so it does not matter): 2026-03-15.
const NOW_MS: i64 = 1_773_576_000_000;

fn budget_value(c: &Check<'_>, key: &str) -> Result<Option<Value>, VectorError> {
    match c.input_opt(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ (Value::Number(_) | Value::String(_))) => Ok(Some(v.clone())),
        Some(_) => Err(c.bad(key, "expected an integer or a percentage")),
    }
}

fn sync_status(c: &mut Check<'_>) -> Result<(), VectorError> {
    let mut spec = json!({"selector": {}});
    if let Some(v) = budget_value(c, "minAvailable")? {
        spec["minAvailable"] = v;
    }
    if let Some(v) = budget_value(c, "maxUnavailable")? {
        spec["maxUnavailable"] = v;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "foobar", "namespace": "default", "generation": 1},
        "spec": spec,
    }))
    .map_err(|e| c.bad("minAvailable", e.to_string()))?;
    let mut pods: Vec<Pod> = Vec::new();
    for (i, p) in c.input_array("pods")?.iter().enumerate() {
        let o = p
            .as_object()
            .ok_or_else(|| c.bad("pods", "expected objects"))?;
        if let Some(k) = o
            .keys()
            .find(|k| !["ready", "controller"].contains(&k.as_str()))
        {
            return Err(c.bad("pods", format!("unknown pod key {k:?}")));
        }
        let ready = o
            .get("ready")
            .and_then(Value::as_bool)
            .ok_or_else(|| c.bad("pods", "ready must be a boolean"))?;
        let mut pod = json!({
            "metadata": {"name": format!("pod-{i}"), "namespace": "default"},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        });
        match o.get("controller") {
            None | Some(Value::Null) => {}
            Some(Value::Object(r)) => {
                let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
                let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
                pod["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": "apps/v1", "kind": kind, "name": "foo", "uid": uid, "controller": true,
                }]);
            }
            Some(_) => return Err(c.bad("pods", "controller must be an object or null")),
        }
        pods.push(serde_json::from_value(pod).map_err(|e| c.bad("pods", e.to_string()))?);
    }
    let scales: BTreeMap<String, i32> = c
        .input("scales")?
        .as_object()
        .ok_or_else(|| c.bad("scales", "expected an object"))?
        .iter()
        .map(|(k, v)| {
            v.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(|n| (k.clone(), n))
                .ok_or_else(|| c.bad("scales", "expected int32 scales"))
        })
        .collect::<Result<_, _>>()?;
    let refs: Vec<&Pod> = pods.iter().collect();
    let counted = rules::expected_pod_count(&pdb, &refs, |owner| {
        Ok(scales.get(&owner.uid).map(|s| (owner.uid.clone(), *s)))
    });
    match counted {
        Ok((expected, desired, unmanaged)) => {
            let healthy = rules::count_healthy(&refs, &BTreeMap::new(), NOW_MS);
            let st = rules::update_pdb_status(
                &pdb,
                healthy,
                desired,
                expected,
                &BTreeMap::new(),
                NOW_MS,
            )
            .unwrap_or_default();
            c.expect_eq("syncFailed", false);
            c.expect_eq("disruptionsAllowed", st.disruptions_allowed.unwrap_or(0));
            c.expect_eq("currentHealthy", st.current_healthy.unwrap_or(0));
            c.expect_eq("desiredHealthy", st.desired_healthy.unwrap_or(0));
            c.expect_eq("expectedPods", st.expected_pods.unwrap_or(0));
            c.expect_eq("unmanagedPods", unmanaged.len());
        }
        Err(message) => {
            let st = rules::fail_safe(&pdb, &message, NOW_MS);
            c.expect_eq("syncFailed", true);
            c.expect_eq("disruptionsAllowed", st.disruptions_allowed.unwrap_or(0));
        }
    }
    Ok(())
}
