//! A container's environment as the kubelet builds it before it creates the container
//! (`makeEnvironmentVariables`): `envFrom` sources first (ConfigMap `data`, Secret `data`
//! decoded, each key with the source's `prefix`), then `env`, whose entries replace earlier
//! ones of the same name; `valueFrom` resolved from a ConfigMap key, a Secret key or a field of
//! the pod (`metadata.name`, `metadata.namespace`, `metadata.uid`, `metadata.labels['K']`,
//! `metadata.annotations['K']`, `spec.nodeName`, `spec.serviceAccountName`, `status.hostIP`,
//! `status.hostIPs`, `status.podIP`, `status.podIPs`). The ConfigMaps and Secrets are read from the API server.
//!
//! `status.podIP` / `status.podIPs` are the node's address for a `hostNetwork` pod; for the
//! others they are left to the node layer's pod worker, which fills them in when it creates the
//! container, once the sandbox has given the pod its address (`ContainerPlan::env_field_refs`).
//!
//! Not resolved: `resourceFieldRef`, `fileKeyRef`, and `$(VAR)` expansion; such a variable is
//! left out of the process's environment (`ContainerSpec::unresolved_env`).
//!
//! Upstream: `pkg/kubelet/kubelet_pods.go` (`makeEnvironmentVariables`,
//! `podFieldSelectorRuntimeValue`), the watch-based ConfigMap and Secret managers
//! (`NotFound` as `configmap "x" not found`), Kubernetes 1.27 to 1.37.

use std::collections::HashMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde_json::{json, Value};

/// Why a container's environment cannot be built: the container and the kubelet's message
/// (`configmap "x" not found`, `couldn't find key k in ConfigMap default/x`), which becomes its
/// `CreateContainerConfigError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    /// The container's name (an init container's or a regular one's).
    pub container: String,
    /// The kubelet's wording, as the container's waiting `message` shows it.
    pub message: String,
}

/// Where the values come from.
#[derive(Default)]
struct Sources {
    config_maps: HashMap<String, Option<HashMap<String, String>>>,
    secrets: HashMap<String, Option<HashMap<String, String>>>,
}

impl Sources {
    /// The data of ConfigMap (`secret` false) or Secret `name`, `None` when it does not exist.
    async fn get(
        &mut self,
        client: &kube::Client,
        namespace: &str,
        secret: bool,
        name: &str,
    ) -> Result<Option<HashMap<String, String>>, String> {
        let cache = if secret {
            &mut self.secrets
        } else {
            &mut self.config_maps
        };
        if let Some(d) = cache.get(name) {
            return Ok(d.clone());
        }
        let data = if secret {
            let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
            api.get_opt(name)
                .await
                .map_err(|e| e.to_string())?
                .map(|s| {
                    s.data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                        .collect()
                })
        } else {
            let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), namespace);
            api.get_opt(name)
                .await
                .map_err(|e| e.to_string())?
                .map(|c| c.data.unwrap_or_default().into_iter().collect())
        };
        cache.insert(name.to_string(), data.clone());
        Ok(data)
    }
}

/// `metadata.labels['app']` → (`metadata.labels`, `app`).
fn subscript(path: &str) -> Option<(&str, &str)> {
    let (base, rest) = path.split_once("['")?;
    Some((base, rest.strip_suffix("']")?))
}

/// `podFieldSelectorRuntimeValue` for what is known before the sandbox exists; `None` for a
/// field left to the node layer (`status.podIP`, `status.podIPs` of a pod with a network of its
/// own) or not resolved.
fn field_value(pod: &Value, path: &str, host_ip: IpAddr) -> Option<String> {
    let host_network = pod
        .pointer("/spec/hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let text = |ptr: &str| {
        pod.pointer(ptr)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if let Some((base, key)) = subscript(path) {
        let map = match base {
            "metadata.labels" => "/metadata/labels",
            "metadata.annotations" => "/metadata/annotations",
            _ => return None,
        };
        return Some(
            pod.pointer(map)
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        );
    }
    Some(match path {
        "metadata.name" => text("/metadata/name"),
        "metadata.namespace" => text("/metadata/namespace"),
        "metadata.uid" => text("/metadata/uid"),
        "spec.nodeName" => text("/spec/nodeName"),
        "spec.serviceAccountName" => text("/spec/serviceAccountName"),
        "status.hostIP" | "status.hostIPs" => host_ip.to_string(),
        "status.podIP" | "status.podIPs" if host_network => host_ip.to_string(),
        _ => return None,
    })
}

/// `pod` with every container's environment built: `envFrom` folded into `env`, the
/// `valueFrom` entries this module resolves turned into literal `value`s (the others kept).
///
/// # Errors
/// [`EnvError`] for the first container whose sources are missing and not optional, or whose
/// ConfigMap or Secret could not be read.
pub async fn resolve(
    client: &kube::Client,
    pod: &Value,
    host_ip: IpAddr,
) -> Result<Value, EnvError> {
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let mut out = pod.clone();
    let mut sources = Sources::default();
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for (i, c) in containers.iter().enumerate() {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let fail = |message: String| EnvError {
                container: name.clone(),
                message,
            };
            let mut env: Vec<(String, Value)> = Vec::new();
            let set = |env: &mut Vec<(String, Value)>, k: String, v: Value| {
                env.retain(|(n, _)| n != &k);
                env.push((k, v));
            };
            for src in c
                .get("envFrom")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let prefix = src.get("prefix").and_then(Value::as_str).unwrap_or("");
                let (secret, r) = match (src.get("configMapRef"), src.get("secretRef")) {
                    (Some(r), _) => (false, r),
                    (None, Some(r)) => (true, r),
                    _ => continue,
                };
                let src_name = r.get("name").and_then(Value::as_str).unwrap_or("");
                let optional = r.get("optional").and_then(Value::as_bool).unwrap_or(false);
                let data = sources
                    .get(client, &namespace, secret, src_name)
                    .await
                    .map_err(&fail)?;
                let Some(data) = data else {
                    if optional {
                        continue;
                    }
                    return Err(fail(not_found(secret, src_name)));
                };
                let mut keys: Vec<_> = data.into_iter().collect();
                keys.sort();
                for (k, v) in keys {
                    set(&mut env, format!("{prefix}{k}"), json!(v));
                }
            }
            for e in c.get("env").and_then(Value::as_array).into_iter().flatten() {
                let Some(k) = e.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let literal = e.get("value").and_then(Value::as_str).unwrap_or("");
                let Some(from) = e.get("valueFrom").filter(|_| literal.is_empty()) else {
                    set(&mut env, k.to_string(), json!(literal));
                    continue;
                };
                let key_ref = match (from.get("configMapKeyRef"), from.get("secretKeyRef")) {
                    (Some(r), _) => Some((false, r)),
                    (None, Some(r)) => Some((true, r)),
                    _ => None,
                };
                if let Some((secret, r)) = key_ref {
                    let src_name = r.get("name").and_then(Value::as_str).unwrap_or("");
                    let key = r.get("key").and_then(Value::as_str).unwrap_or("");
                    let optional = r.get("optional").and_then(Value::as_bool).unwrap_or(false);
                    let data = sources
                        .get(client, &namespace, secret, src_name)
                        .await
                        .map_err(&fail)?;
                    let Some(data) = data else {
                        if optional {
                            continue;
                        }
                        return Err(fail(not_found(secret, src_name)));
                    };
                    match data.get(key) {
                        Some(v) => set(&mut env, k.to_string(), json!(v)),
                        None if optional => {}
                        None => {
                            let kind = if secret { "Secret" } else { "ConfigMap" };
                            return Err(fail(format!(
                                "couldn't find key {key} in {kind} {namespace}/{src_name}"
                            )));
                        }
                    }
                    continue;
                }
                let field = from
                    .pointer("/fieldRef/fieldPath")
                    .and_then(Value::as_str)
                    .and_then(|p| field_value(pod, p, host_ip));
                match field {
                    Some(v) => set(&mut env, k.to_string(), json!(v)),
                    // Kept as it is: the node layer leaves it out.
                    None => {
                        env.retain(|(n, _)| n != k);
                        env.push((k.to_string(), json!({"valueFrom": from})));
                    }
                }
            }
            let resolved: Vec<Value> = env
                .into_iter()
                .map(|(k, v)| match v {
                    Value::String(s) => json!({"name": k, "value": s}),
                    Value::Object(mut m) => {
                        m.insert("name".into(), json!(k));
                        Value::Object(m)
                    }
                    other => json!({"name": k, "value": other}),
                })
                .collect();
            if let Some(oc) = out
                .pointer_mut(&format!("/spec/{list}/{i}"))
                .and_then(Value::as_object_mut)
            {
                oc.remove("envFrom");
                if resolved.is_empty() {
                    oc.remove("env");
                } else {
                    oc.insert("env".into(), Value::Array(resolved));
                }
            }
        }
    }
    Ok(out)
}

/// The managers' NotFound: `configmap "x" not found` / `secret "x" not found`.
fn not_found(secret: bool, name: &str) -> String {
    let kind = if secret { "secret" } else { "configmap" };
    format!("{kind} {name:?} not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_the_pod_resolve_before_the_sandbox_exists() {
        let pod = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u-1",
            "labels": {"app": "web"}}, "spec": {"nodeName": "box", "serviceAccountName": "default"}});
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(
            field_value(&pod, "metadata.name", ip).as_deref(),
            Some("web")
        );
        assert_eq!(
            field_value(&pod, "metadata.uid", ip).as_deref(),
            Some("u-1")
        );
        assert_eq!(
            field_value(&pod, "spec.nodeName", ip).as_deref(),
            Some("box")
        );
        assert_eq!(
            field_value(&pod, "metadata.labels['app']", ip).as_deref(),
            Some("web")
        );
        assert_eq!(
            field_value(&pod, "metadata.labels['none']", ip).as_deref(),
            Some("")
        );
        assert_eq!(
            field_value(&pod, "status.hostIP", ip).as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(field_value(&pod, "status.podIP", ip), None);
        let mut host = pod.clone();
        host["spec"]["hostNetwork"] = json!(true);
        assert_eq!(
            field_value(&host, "status.podIPs", ip).as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(not_found(false, "cfg"), "configmap \"cfg\" not found");
    }
}
