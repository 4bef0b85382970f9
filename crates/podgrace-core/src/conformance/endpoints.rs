//! Vectors of EndpointSlice conditions and kube-proxy endpoint selection; the EndpointSlice
//! reconciler's `FindPort` and whole `podToEndpoint` endpoints
//! (`staging/src/k8s.io/endpointslice/utils_test.go`).

use super::{Check, VectorError};
use crate::rules::endpoints::{
    categorize_endpoints, pod_to_endpoint_conditions, ProxyEndpoint, ServiceTrafficPolicies,
    TrafficPolicy,
};
use serde_json::Value;

pub(super) fn evaluate(c: &mut Check<'_>) -> Result<(), VectorError> {
    match c.function() {
        "endpointslice.podToEndpoint" => pod_to_endpoint(c),
        "kube-proxy CategorizeEndpoints" => categorize(c),
        "endpointslice.FindPort" => find_port(c),
        "endpointslice.podToEndpoint (endpoint)" => pod_to_endpoint_whole(c),
        _ => Err(c.bad("function", "unknown endpoints function")),
    }
}

fn req_bool(c: &Check<'_>, key: &str) -> Result<bool, VectorError> {
    c.input_opt_bool(key)?
        .ok_or_else(|| c.bad(key, "expected a boolean"))
}

fn pod_to_endpoint(c: &mut Check<'_>) -> Result<(), VectorError> {
    let ready = req_bool(c, "pod.Ready_condition")?;
    let dt = req_bool(c, "pod.deletionTimestamp_set")?;
    let pna = req_bool(c, "service.publishNotReadyAddresses")?;
    let got = pod_to_endpoint_conditions(ready, dt, pna);
    c.expect_eq("conditions.ready", got.ready);
    c.expect_eq("conditions.serving", got.serving);
    c.expect_eq("conditions.terminating", got.terminating);
    Ok(())
}

fn policy(c: &Check<'_>, key: &str, external: bool) -> Result<Option<TrafficPolicy>, VectorError> {
    match c.input_str(key)? {
        "Cluster" => Ok(Some(TrafficPolicy::Cluster)),
        "Local" => Ok(Some(TrafficPolicy::Local)),
        "n/a" if external => Ok(None),
        other => Err(c.bad(key, format!("unknown traffic policy {other:?}"))),
    }
}

fn categorize(c: &mut Check<'_>) -> Result<(), VectorError> {
    let internal = policy(c, "iTP", false)?.unwrap_or(TrafficPolicy::Cluster);
    let external = policy(c, "eTP", true)?;
    let arr = c.input_array("endpoints")?;
    let mut eps = Vec::new();
    for e in arr {
        let o = e
            .as_object()
            .ok_or_else(|| c.bad("endpoints", "expected objects"))?;
        let flag = |k: &str| {
            o.get(k)
                .and_then(Value::as_bool)
                .ok_or_else(|| c.bad("endpoints", format!("{k} must be a boolean")))
        };
        if let Some(k) = o
            .keys()
            .find(|k| !["ep", "local", "ready", "serving", "terminating"].contains(&k.as_str()))
        {
            return Err(c.bad("endpoints", format!("unknown endpoint key {k:?}")));
        }
        eps.push(ProxyEndpoint {
            address: o
                .get("ep")
                .and_then(Value::as_str)
                .ok_or_else(|| c.bad("endpoints", "ep"))?
                .to_string(),
            local: flag("local")?,
            ready: flag("ready")?,
            serving: flag("serving")?,
            terminating: flag("terminating")?,
        });
    }
    let got = categorize_endpoints(&eps, ServiceTrafficPolicies { internal, external });
    // Upstream's test compares sets: sort both sides.
    let set = |v: &Option<Vec<String>>| -> Value {
        v.as_ref().map_or(Value::Null, |l| {
            let mut l = l.clone();
            l.sort();
            l.into()
        })
    };
    for (key, actual) in [
        ("clusterEndpoints", set(&got.cluster)),
        ("localEndpoints", set(&got.local)),
        ("allEndpoints", set(&Some(got.all_reachable.clone()))),
    ] {
        if let Some(want) = c.expected(key) {
            let want = match want {
                Value::Array(a) => {
                    let mut s: Vec<String> = a
                        .iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect();
                    if s.len() != a.len() {
                        return Err(c.bad(key, "expected strings"));
                    }
                    s.sort();
                    Value::from(s)
                }
                Value::Null => Value::Null,
                _ => return Err(c.bad(key, "expected an array or null")),
            };
            if want != actual {
                c.mismatch(format!("{key}: expected {want}, got {actual}"));
            }
        }
    }
    Ok(())
}

fn parse<T: serde::de::DeserializeOwned>(
    c: &Check<'_>,
    key: &str,
    v: Value,
) -> Result<T, VectorError> {
    serde_json::from_value(v).map_err(|e| c.bad(key, e.to_string()))
}

fn find_port(c: &mut Check<'_>) -> Result<(), VectorError> {
    let containers = c.input("containers")?.clone();
    let init = c.input("initContainers")?.clone();
    let pod: k8s_openapi::api::core::v1::Pod = parse(
        c,
        "containers",
        serde_json::json!({"spec": {"containers": containers, "initContainers": init}}),
    )?;
    let sp: k8s_openapi::api::core::v1::ServicePort =
        parse(c, "servicePort", c.input("servicePort")?.clone())?;
    let got = crate::rules::endpointslice::find_port(&pod, &sp);
    c.expect_eq("found", got.is_some());
    if let Some(n) = got {
        c.expect_eq("port", n);
    }
    Ok(())
}

fn pod_to_endpoint_whole(c: &mut Check<'_>) -> Result<(), VectorError> {
    let pod: k8s_openapi::api::core::v1::Pod = parse(c, "pod", c.input("pod")?.clone())?;
    let svc: k8s_openapi::api::core::v1::Service =
        parse(c, "service", c.input("service")?.clone())?;
    let zone = match c.input_opt("node") {
        None | Some(Value::Null) => None,
        Some(n) => {
            let node: k8s_openapi::api::core::v1::Node = parse(c, "node", n.clone())?;
            node.metadata
                .labels
                .and_then(|l| l.get("topology.kubernetes.io/zone").cloned())
        }
    };
    let address_type = c.input_str("addressType")?;
    let ep =
        crate::rules::endpointslice::pod_to_endpoint(&pod, zone.as_deref(), &svc, address_type);
    c.expect_eq("endpoint", serde_json::to_value(&ep).unwrap_or(Value::Null));
    Ok(())
}
