//! The registry strategies of the controllers' kinds: Deployments and ReplicaSets (apps/v1),
//! PodDisruptionBudgets (policy/v1) and EndpointSlices (discovery.k8s.io/v1): defaults,
//! validation with kube-apiserver's words, `metadata.generation`, and what a write of the
//! object or of its `status` may change.
//!
//! Upstream: `pkg/apis/apps/v1/defaults.go` (`SetDefaults_Deployment`,
//! `SetDefaults_ReplicaSet`), `pkg/apis/core/v1/defaults.go` (`SetDefaults_PodSpec` for the
//! templates), `pkg/apis/discovery/v1/defaults.go`, `pkg/apis/apps/validation/validation.go`
//! (`ValidateDeploymentSpec`, `ValidateRollingUpdateDeployment`, `ValidateReplicaSetSpec`,
//! `ValidatePodTemplateSpecForReplicaSet`), `pkg/apis/policy/validation/validation.go`
//! (`ValidatePodDisruptionBudgetSpec`), `pkg/apis/discovery/validation/validation.go`
//! (`ValidateEndpointSlice`, addresses through podgrace-core's `validate_endpoint_ip`), and the
//! strategies' `PrepareForCreate`/`PrepareForUpdate` in `pkg/registry/apps/deployment`,
//! `pkg/registry/apps/replicaset`, `pkg/registry/policy/poddisruptionbudget`,
//! `pkg/registry/discovery/endpointslice` (generation 1 at creation, +1 on a spec change, and
//! for Deployments on an annotation change; status cleared at creation; the status writer
//! keeps the spec, and for Deployments the labels).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::registry::{default_pod_spec, set_default};
use crate::resource::Resource;
use crate::status::Cause;

fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause {
        reason: reason.into(),
        message,
        field: field.into(),
    }
}

/// Go's `%#v` of a `map[string]string` (keys sorted).
fn go_map(m: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{}:{}", crate::status_quote(k), crate::status_quote(v)))
        .collect();
    format!("map[string]string{{{}}}", parts.join(", "))
}

/// An IntOrString as `IntOrString.String()` prints it.
fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether the kind has a strategy here.
pub fn handles(r: &Resource) -> bool {
    matches!(
        (r.group, r.kind),
        ("apps", "Deployment")
            | ("apps", "ReplicaSet")
            | ("policy", "PodDisruptionBudget")
            | ("discovery.k8s.io", "EndpointSlice")
    )
}

fn default_template(obj: &mut Value) {
    if let Some(t) = obj.pointer_mut("/spec/template") {
        default_pod_spec(t);
    }
}

fn defaults(r: &Resource, obj: &mut Value) {
    match r.kind {
        "Deployment" => {
            default_template(obj);
            let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
                return;
            };
            set_default(spec, "replicas", json!(1));
            let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
            if let Some(s) = strategy.as_object_mut() {
                set_default(s, "type", json!("RollingUpdate"));
                if s.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                    let ru = s.entry("rollingUpdate").or_insert_with(|| json!({}));
                    if let Some(ru) = ru.as_object_mut() {
                        set_default(ru, "maxUnavailable", json!("25%"));
                        set_default(ru, "maxSurge", json!("25%"));
                    }
                }
            }
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
        }
        "ReplicaSet" => {
            default_template(obj);
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                set_default(spec, "replicas", json!(1));
            }
        }
        "EndpointSlice" => {
            if let Some(ports) = obj.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    set_default(p, "name", json!(""));
                    set_default(p, "protocol", json!("TCP"));
                }
            }
        }
        _ => {}
    }
}

fn labels_at(obj: &Value, ptr: &str) -> BTreeMap<String, String> {
    obj.pointer(ptr)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn selector(
    obj: &Value,
    ptr: &str,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector> {
    obj.pointer(ptr)
        .filter(|v| !v.is_null())
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

fn nonneg(obj: &Value, ptr: &str, field: &str, out: &mut Vec<Cause>) {
    if let Some(n) = obj.pointer(ptr).and_then(Value::as_i64) {
        if n < 0 {
            out.push(cause(
                "FieldValueInvalid",
                field,
                format!("Invalid value: {n}: must be greater than or equal to 0"),
            ));
        }
    }
}

/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
fn int_or_percent(v: &Value, field: &str, out: &mut Vec<Cause>) -> Option<i64> {
    match v {
        Value::Number(n) => {
            let n = n.as_i64().unwrap_or(0);
            if n < 0 {
                out.push(cause(
                    "FieldValueInvalid",
                    field,
                    format!("Invalid value: {n}: must be greater than or equal to 0"),
                ));
            }
            Some(n)
        }
        Value::String(s) => {
            let Some(p) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                out.push(cause(
                    "FieldValueInvalid",
                    field,
                    format!("Invalid value: {s:?}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"),
                ));
                return None;
            };
            if p > 100 {
                out.push(cause(
                    "FieldValueInvalid",
                    field,
                    format!("Invalid value: {s:?}: must not be greater than 100%"),
                ));
            }
            Some(p)
        }
        _ => None,
    }
}

fn validate_selector_and_template(obj: &Value, out: &mut Vec<Cause>) {
    match selector(obj, "/spec/selector") {
        None => out.push(cause(
            "FieldValueRequired",
            "spec.selector",
            "Required value".into(),
        )),
        Some(sel) => match podgrace_core::rules::labels::as_selector(Some(&sel)) {
            Err(e) => out.push(cause(
                "FieldValueInvalid",
                "spec.selector",
                format!("Invalid value: {}: {e}", obj["spec"]["selector"]),
            )),
            Ok(s) if s.is_empty() => out.push(cause(
                "FieldValueInvalid",
                "spec.selector",
                "Invalid value: \"\": empty selector is invalid for deployment".into(),
            )),
            Ok(s) => {
                let l = labels_at(obj, "/spec/template/metadata/labels");
                if !s.matches(&l) {
                    out.push(cause(
                        "FieldValueInvalid",
                        "spec.template.metadata.labels",
                        format!(
                            "Invalid value: {}: `selector` does not match template `labels`",
                            go_map(&l)
                        ),
                    ));
                }
            }
        },
    }
    let rp = obj
        .pointer("/spec/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always");
    if rp != "Always" {
        out.push(cause(
            "FieldValueNotSupported",
            "spec.template.spec.restartPolicy",
            format!("Unsupported value: {rp:?}: supported values: \"Always\""),
        ));
    }
    if obj
        .pointer("/spec/template/spec/activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        out.push(cause(
            "FieldValueForbidden",
            "spec.template.spec.activeDeadlineSeconds",
            "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported".into(),
        ));
    }
}

fn validate_deployment(obj: &Value, out: &mut Vec<Cause>) {
    nonneg(obj, "/spec/replicas", "spec.replicas", out);
    validate_selector_and_template(obj, out);
    let ty = obj
        .pointer("/spec/strategy/type")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ru = obj
        .pointer("/spec/strategy/rollingUpdate")
        .filter(|v| !v.is_null());
    match ty {
        "Recreate" if ru.is_some() => out.push(cause(
            "FieldValueForbidden",
            "spec.strategy.rollingUpdate",
            "Forbidden: may not be specified when strategy `type` is 'Recreate'".into(),
        )),
        "Recreate" => {}
        "RollingUpdate" => {
            if let Some(ru) = ru {
                let mu = ru.get("maxUnavailable").filter(|v| !v.is_null());
                let ms = ru.get("maxSurge").filter(|v| !v.is_null());
                let u = mu.and_then(|v| {
                    int_or_percent(v, "spec.strategy.rollingUpdate.maxUnavailable", out)
                });
                let s =
                    ms.and_then(|v| int_or_percent(v, "spec.strategy.rollingUpdate.maxSurge", out));
                if u == Some(0) && s == Some(0) {
                    out.push(cause(
                        "FieldValueInvalid",
                        "spec.strategy.rollingUpdate.maxUnavailable",
                        format!(
                            "Invalid value: {}: may not be 0 when `maxSurge` is 0",
                            mu.map(int_or_string).unwrap_or_default()
                        ),
                    ));
                }
            }
        }
        other => out.push(cause(
            "FieldValueNotSupported",
            "spec.strategy.type",
            format!(
                "Unsupported value: {other:?}: supported values: \"Recreate\", \"RollingUpdate\""
            ),
        )),
    }
    nonneg(obj, "/spec/minReadySeconds", "spec.minReadySeconds", out);
    nonneg(
        obj,
        "/spec/revisionHistoryLimit",
        "spec.revisionHistoryLimit",
        out,
    );
    nonneg(
        obj,
        "/spec/progressDeadlineSeconds",
        "spec.progressDeadlineSeconds",
        out,
    );
    let pd = obj
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64);
    let mr = obj
        .pointer("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(pd) = pd {
        if pd <= mr {
            out.push(cause(
                "FieldValueInvalid",
                "spec.progressDeadlineSeconds",
                format!("Invalid value: {pd}: must be greater than minReadySeconds"),
            ));
        }
    }
}

fn validate_pdb(obj: &Value, out: &mut Vec<Cause>) {
    let min = obj.pointer("/spec/minAvailable").filter(|v| !v.is_null());
    let max = obj.pointer("/spec/maxUnavailable").filter(|v| !v.is_null());
    if min.is_some() && max.is_some() {
        out.push(cause(
            "FieldValueInvalid",
            "spec",
            "Invalid value: \"\": minAvailable and maxUnavailable cannot be both set".into(),
        ));
    }
    if let Some(v) = min {
        int_or_percent(v, "spec.minAvailable", out);
    }
    if let Some(v) = max {
        int_or_percent(v, "spec.maxUnavailable", out);
    }
    if let Some(sel) = selector(obj, "/spec/selector") {
        if let Err(e) = podgrace_core::rules::labels::as_selector(Some(&sel)) {
            out.push(cause(
                "FieldValueInvalid",
                "spec.selector",
                format!("Invalid value: {}: {e}", obj["spec"]["selector"]),
            ));
        }
    }
    if let Some(p) = obj
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
    {
        if !matches!(p, "IfHealthyBudget" | "AlwaysAllow") {
            out.push(cause(
                "FieldValueNotSupported",
                "spec.unhealthyPodEvictionPolicy",
                format!("Unsupported value: {p:?}: supported values: \"AlwaysAllow\", \"IfHealthyBudget\""),
            ));
        }
    }
}

fn validate_endpointslice(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let at = obj.get("addressType").and_then(Value::as_str).unwrap_or("");
    if at.is_empty() {
        out.push(cause(
            "FieldValueRequired",
            "addressType",
            "Required value".into(),
        ));
    } else if !matches!(at, "IPv4" | "IPv6" | "FQDN") {
        out.push(cause(
            "FieldValueNotSupported",
            "addressType",
            format!("Unsupported value: {at:?}: supported values: \"FQDN\", \"IPv4\", \"IPv6\""),
        ));
    }
    let ports = obj
        .get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if names.contains(&name) {
            out.push(cause(
                "FieldValueDuplicate",
                &format!("ports[{i}].name"),
                format!("Duplicate value: {name:?}"),
            ));
        } else {
            names.push(name);
        }
        let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("");
        if !matches!(proto, "TCP" | "UDP" | "SCTP") {
            out.push(cause(
                "FieldValueNotSupported",
                &format!("ports[{i}].protocol"),
                format!(
                    "Unsupported value: {proto:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""
                ),
            ));
        }
    }
    let eps = obj
        .get("endpoints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if eps.len() > 1000 {
        out.push(cause(
            "FieldValueTooMany",
            "endpoints",
            format!("Too many: {}: must have at most 1000 items", eps.len()),
        ));
        return;
    }
    // Unchanged endpoints of an update are not validated again (`ValidateEndpointSlice`).
    if old.is_some_and(|o| o.get("endpoints") == obj.get("endpoints")) {
        return;
    }
    for (i, e) in eps.iter().enumerate() {
        let addrs = e
            .get("addresses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let path = format!("endpoints[{i}].addresses");
        if addrs.is_empty() {
            out.push(cause(
                "FieldValueRequired",
                &path,
                "Required value: must contain at least 1 address".into(),
            ));
        }
        for (j, a) in addrs.iter().enumerate() {
            let a = a.as_str().unwrap_or("");
            let p = format!("{path}[{j}]");
            match at {
                "IPv4" | "IPv6" => {
                    let errs = podgrace_core::rules::validation::validate_endpoint_ip(a, &p);
                    let parsed = podgrace_core::rules::validation::parse_ip_sloppy(a);
                    if parsed.is_none() {
                        out.push(cause(
                            "FieldValueInvalid",
                            &p,
                            format!("Invalid value: {a:?}: must be a valid IP address"),
                        ));
                        continue;
                    }
                    let v6 = a.contains(':');
                    if (at == "IPv4") == v6 {
                        out.push(cause(
                            "FieldValueInvalid",
                            &path,
                            format!("Invalid value: {a:?}: must be an {at} address"),
                        ));
                    }
                    for e in errs {
                        out.push(cause("FieldValueInvalid", &e.path, e.kind.to_string()));
                    }
                }
                _ => {}
            }
        }
    }
}

/// `PrepareForCreate` and validation for a new object of `r`: defaults, generation 1, the
/// status cleared; the validation causes (empty: valid).
pub fn prepare_create(r: &Resource, obj: &mut Value) -> Vec<Cause> {
    defaults(r, obj);
    let mut out = Vec::new();
    match r.kind {
        "Deployment" | "ReplicaSet" | "PodDisruptionBudget" => {
            crate::meta::meta_mut(obj).insert("generation".into(), json!(1));
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
            match r.kind {
                "Deployment" => validate_deployment(obj, &mut out),
                "ReplicaSet" => {
                    nonneg(obj, "/spec/replicas", "spec.replicas", &mut out);
                    nonneg(
                        obj,
                        "/spec/minReadySeconds",
                        "spec.minReadySeconds",
                        &mut out,
                    );
                    validate_selector_and_template(obj, &mut out);
                }
                _ => validate_pdb(obj, &mut out),
            }
        }
        "EndpointSlice" => validate_endpointslice(obj, None, &mut out),
        _ => {}
    }
    out
}

fn spec_of(r: &Resource, v: &Value) -> Value {
    if r.kind == "EndpointSlice" {
        let mut m = v.as_object().cloned().unwrap_or_default();
        m.remove("metadata");
        m.remove("kind");
        m.remove("apiVersion");
        return Value::Object(m);
    }
    v.get("spec").cloned().unwrap_or(Value::Null)
}

/// `PrepareForUpdate` and `ValidateUpdate` of `new` over `old` (`status_only`: a write of the
/// `status` subresource): what the writer may not change is taken from `old`, the generation
/// moves on a spec change (and for Deployments an annotation change); the causes.
pub fn prepare_update(r: &Resource, old: &Value, new: &mut Value, status_only: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let old_gen = old
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    if status_only {
        if let Some(spec) = old.get("spec") {
            new["spec"] = spec.clone();
        }
        if r.kind == "Deployment" {
            let labels = old.pointer("/metadata/labels").cloned();
            let m: &mut Map<String, Value> = crate::meta::meta_mut(new);
            match labels {
                Some(l) => m.insert("labels".into(), l),
                None => m.remove("labels"),
            };
        }
        crate::meta::meta_mut(new).insert("generation".into(), old_gen);
        return out;
    }
    defaults(r, new);
    if let Some(st) = old.get("status") {
        new["status"] = st.clone();
    } else if let Some(m) = new.as_object_mut() {
        m.remove("status");
    }
    if r.kind == "EndpointSlice" {
        if old.get("addressType") != new.get("addressType") {
            out.push(cause(
                "FieldValueInvalid",
                "addressType",
                format!(
                    "Invalid value: {}: field is immutable",
                    new.get("addressType").cloned().unwrap_or_default()
                ),
            ));
        }
        validate_endpointslice(new, Some(old), &mut out);
        return out;
    }
    let changed = spec_of(r, old) != spec_of(r, new)
        || (r.kind == "Deployment"
            && old.pointer("/metadata/annotations") != new.pointer("/metadata/annotations"));
    let g = old_gen.as_i64().unwrap_or(1) + i64::from(changed);
    crate::meta::meta_mut(new).insert("generation".into(), json!(g));
    match r.kind {
        "Deployment" | "ReplicaSet" => {
            if r.kind == "Deployment" {
                validate_deployment(new, &mut out);
            } else {
                nonneg(new, "/spec/replicas", "spec.replicas", &mut out);
                validate_selector_and_template(new, &mut out);
            }
            if old.pointer("/spec/selector") != new.pointer("/spec/selector") {
                out.push(cause(
                    "FieldValueInvalid",
                    "spec.selector",
                    format!(
                        "Invalid value: {}: field is immutable",
                        new.pointer("/spec/selector").cloned().unwrap_or_default()
                    ),
                ));
            }
        }
        "PodDisruptionBudget" => validate_pdb(new, &mut out),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::find;

    #[test]
    fn deployments_are_defaulted_and_validated_as_kube_apiserver_does() {
        let d = find("apps", "v1", "deployments").unwrap();
        let mut obj = json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "other"}}, "spec": {"containers": [{"name": "app", "image": "x"}]}}}});
        let causes = prepare_create(d, &mut obj);
        assert_eq!(obj["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(obj["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(
            obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"],
            30
        );
        assert_eq!(obj["metadata"]["generation"], 1);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template.metadata.labels");
        assert_eq!(
            causes[0].message,
            "Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"
        );
        let mut zero = json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "x"}]}}}});
        let causes = prepare_create(d, &mut zero);
        assert_eq!(
            causes[0].message,
            "Invalid value: 0: may not be 0 when `maxSurge` is 0"
        );
    }

    #[test]
    fn generation_moves_with_the_spec_and_status_writes_keep_it() {
        let d = find("apps", "v1", "deployments").unwrap();
        let mut old = json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}}, "replicas": 2,
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "x"}]}}}});
        assert!(prepare_create(d, &mut old).is_empty());
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(3);
        assert!(prepare_update(d, &old, &mut scaled, false).is_empty());
        assert_eq!(scaled["metadata"]["generation"], 2);
        let mut st = scaled.clone();
        st["status"] = json!({"replicas": 3});
        st["spec"]["replicas"] = json!(9);
        prepare_update(d, &scaled, &mut st, true);
        assert_eq!(
            (
                st["spec"]["replicas"].clone(),
                st["metadata"]["generation"].clone()
            ),
            (json!(3), json!(2))
        );
    }

    #[test]
    fn endpoint_addresses_are_validated_with_cores_rule() {
        let es = find("discovery.k8s.io", "v1", "endpointslices").unwrap();
        let mut obj = json!({"metadata": {"name": "web-x"}, "addressType": "IPv4",
            "ports": [{"port": 80}], "endpoints": [{"addresses": ["169.254.88.2"]}]});
        let causes = prepare_create(es, &mut obj);
        assert_eq!(obj["ports"][0]["protocol"], "TCP");
        assert_eq!(causes.len(), 1);
        assert_eq!(
            format!("{}: {}", causes[0].field, causes[0].message),
            "endpoints[0].addresses[0]: Invalid value: \"169.254.88.2\": may not be in the link-local range (169.254.0.0/16, fe80::/10)"
        );
    }
}
