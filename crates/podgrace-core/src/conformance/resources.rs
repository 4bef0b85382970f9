//! Adapters for the kubelet's cgroup resource vectors: `MilliCPUToQuota`,
//! `calculateLinuxResources`, `GetContainerOOMScoreAdjust` and `ResourceConfigForPod`.
//!
//! A pod is written as the API writes it, reduced to what these rules read:
//! `{spec: {priority?, priorityClassName?, initContainers?: [C], containers: [C]}}` with
//! `C = {name, restartPolicy?, resources?: {requests?: {cpu?, memory?}, limits?: {...}}}`.

use super::{Check, VectorError};
use crate::rules::quantity::Quantity;
use crate::rules::resources::{
    calculate_linux_resources, container_oom_score_adjust, milli_cpu_to_quota,
    resource_config_for_pod, NodeResources, PodResources, ResourceContainer, ResourceList,
    ResourceRequirements,
};
use serde_json::{json, Map, Value};

fn quantity(c: &Check<'_>, key: &str, v: &Value) -> Result<Quantity, VectorError> {
    let s = v
        .as_str()
        .ok_or_else(|| c.bad(key, "expected a quantity string"))?;
    Quantity::parse(s).map_err(|e| c.bad(key, format!("{s:?}: {e}")))
}

fn opt_quantity(c: &Check<'_>, key: &str) -> Result<Option<Quantity>, VectorError> {
    match c.input_opt(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => quantity(c, key, v).map(Some),
    }
}

fn object<'v>(
    c: &Check<'_>,
    key: &str,
    v: &'v Value,
) -> Result<&'v Map<String, Value>, VectorError> {
    v.as_object()
        .ok_or_else(|| c.bad(key, "expected an object"))
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

fn resource_list(c: &Check<'_>, key: &str, v: Option<&Value>) -> Result<ResourceList, VectorError> {
    let Some(v) = v else {
        return Ok(ResourceList::new());
    };
    object(c, key, v)?
        .iter()
        .map(|(k, q)| Ok((k.clone(), quantity(c, key, q)?)))
        .collect()
}

fn container(c: &Check<'_>, v: &Value) -> Result<ResourceContainer, VectorError> {
    let key = "pod.spec.containers";
    let o = object(c, key, v)?;
    only(c, key, o, &["name", "restartPolicy", "resources"])?;
    let name = o
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| c.bad(key, "a container needs a name"))?;
    let sidecar = match o.get("restartPolicy") {
        None => false,
        Some(p) if p == "Always" => true,
        Some(p) => return Err(c.bad(key, format!("restartPolicy {p} is not modelled"))),
    };
    let resources = match o.get("resources") {
        None => ResourceRequirements::default(),
        Some(r) => {
            let r = object(c, key, r)?;
            only(c, key, r, &["requests", "limits"])?;
            ResourceRequirements {
                requests: resource_list(c, key, r.get("requests"))?,
                limits: resource_list(c, key, r.get("limits"))?,
            }
        }
    };
    Ok(ResourceContainer {
        name: name.into(),
        resources,
        sidecar,
    })
}

/// The `pod` input, as the API holds it (not defaulted: upstream's fixtures are not).
fn pod(c: &Check<'_>) -> Result<PodResources, VectorError> {
    let p = object(c, "pod", c.input("pod")?)?;
    only(c, "pod", p, &["spec"])?;
    let spec = object(c, "pod.spec", p.get("spec").unwrap_or(&Value::Null))?;
    only(
        c,
        "pod.spec",
        spec,
        &[
            "priority",
            "priorityClassName",
            "initContainers",
            "containers",
        ],
    )?;
    let list = |k: &str| -> Result<Vec<ResourceContainer>, VectorError> {
        match spec.get(k) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a.iter().map(|v| container(c, v)).collect(),
            Some(_) => Err(c.bad("pod.spec", format!("{k}: expected a list"))),
        }
    };
    let priority = spec.get("priority").and_then(Value::as_i64);
    let class = spec.get("priorityClassName").and_then(Value::as_str);
    Ok(PodResources {
        init_containers: list("initContainers")?,
        containers: list("containers")?,
        // IsNodeCriticalPod: IsCriticalPod (priority ≥ SystemCriticalPriority here) and the
        // system-node-critical class.
        node_critical: priority.is_some_and(|p| p >= 2_000_000_000)
            && class == Some("system-node-critical"),
    })
}

/// `cm.MilliCPUToQuota`: `{milliCPU, period}` → `{quota}` (microseconds).
pub(super) fn milli_cpu_to_quota_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let milli = c.input_i64("milliCPU")?;
    let period = c.input_i64("period")?;
    c.expect_eq("quota", milli_cpu_to_quota(milli, period));
    Ok(())
}

/// `kuberuntime.calculateLinuxResources`: `{cpuRequest (null: absent), cpuLimit, memoryLimit,
/// cgroupVersion: v1|v2, singleProcessOOMKill}` → `{cpuPeriod, cpuQuota, cpuShares,
/// memoryLimitInBytes, unified}` (cpuCFSQuota on, period 100000 µs).
pub(super) fn calculate_linux_resources_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let request = opt_quantity(c, "cpuRequest")?;
    let cpu_limit = opt_quantity(c, "cpuLimit")?.unwrap_or_default();
    let memory_limit = opt_quantity(c, "memoryLimit")?.unwrap_or_default();
    let cgroup_v2 = match c.input_str("cgroupVersion")? {
        "v1" => false,
        "v2" => true,
        other => return Err(c.bad("cgroupVersion", format!("expected v1 or v2, got {other:?}"))),
    };
    let node = NodeResources {
        cgroup_v2,
        single_process_oom_kill: c.input_opt_bool("singleProcessOOMKill")?,
        ..NodeResources::default()
    };
    let r = calculate_linux_resources(request, cpu_limit, memory_limit, &node);
    c.expect_eq("cpuPeriod", r.cpu_period);
    c.expect_eq("cpuQuota", r.cpu_quota);
    c.expect_eq("cpuShares", r.cpu_shares);
    c.expect_eq("memoryLimitInBytes", r.memory_limit_in_bytes);
    c.expect_eq("unified", json!(r.unified));
    Ok(())
}

/// `qos.GetContainerOOMScoreAdjust`: `{pod, memoryCapacity}` → `{oomScoreAdj: {container:
/// value}}` for every init and regular container.
pub(super) fn oom_score_adjust_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let pod = pod(c)?;
    let capacity = c.input_i64("memoryCapacity")?;
    let got: Map<String, Value> = pod
        .init_containers
        .iter()
        .chain(&pod.containers)
        .map(|ctr| {
            (
                ctr.name.clone(),
                Value::from(container_oom_score_adjust(&pod, ctr, capacity)),
            )
        })
        .collect();
    c.expect_eq("oomScoreAdj", Value::Object(got));
    Ok(())
}

/// `cm.ResourceConfigForPod`: `{pod, enforceCPULimits, quotaPeriod}` → `{cpuShares, cpuQuota,
/// cpuPeriod, memory}`, each `null` when the config leaves it unset.
pub(super) fn resource_config_for_pod_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let pod = pod(c)?;
    let enforce = c
        .input_opt_bool("enforceCPULimits")?
        .ok_or_else(|| c.bad("enforceCPULimits", "expected a boolean"))?;
    let period = u64::try_from(c.input_i64("quotaPeriod")?)
        .map_err(|_| c.bad("quotaPeriod", "must not be negative"))?;
    let r = resource_config_for_pod(&pod, enforce, period);
    c.expect_eq("cpuShares", json!(r.cpu_shares));
    c.expect_eq("cpuQuota", json!(r.cpu_quota));
    c.expect_eq("cpuPeriod", json!(r.cpu_period));
    c.expect_eq("memory", json!(r.memory));
    Ok(())
}
