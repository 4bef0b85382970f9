//! The OpenAPI v3 documents `kubectl apply` and `kubectl explain` read: `/openapi/v3` (the
//! index of group versions) and `/openapi/v3/api/v1`, `/openapi/v3/apis/GROUP/VERSION`.
//!
//! The schemas are generated from the k8s-openapi types (their `schemars` implementations),
//! then given what kube-apiserver's document carries and schemars does not: the
//! `x-kubernetes-group-version-kind` of each served kind, and the strategic-merge-patch keys
//! (`x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`, `x-kubernetes-list-type`)
//! from [`crate::patch`]'s table. Each resource's paths list its verbs with the
//! `fieldValidation` query parameter and the patch content types, which is how kubectl 1.27+
//! decides to send `fieldValidation=Strict` and to compute its patch from this document.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/endpoints/openapi` and kube-openapi's
//! `builder3`; `staging/src/k8s.io/cli-runtime/pkg/resource/query_param_verifier_v3.go`
//! (what kubectl looks for); `staging/src/k8s.io/kubectl/pkg/cmd/apply/patcher.go`.

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use crate::patch;
use crate::resource::{Resource, RESOURCES};

fn gv_path(r: &Resource) -> String {
    if r.group.is_empty() {
        format!("api/{}", r.version)
    } else {
        format!("apis/{}/{}", r.group, r.version)
    }
}

/// `/openapi/v3`: `{"paths": {"api/v1": {"serverRelativeURL": ...}, ...}}`.
pub fn index() -> Value {
    let mut paths = Map::new();
    for r in RESOURCES {
        let p = gv_path(r);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(&p))}),
        );
    }
    json!({"paths": paths})
}

fn hash(s: &str) -> String {
    // A stable tag for the document's cache key (the documents change only with the binary).
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes().chain(env!("CARGO_PKG_VERSION").bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016X}")
}

fn schemas() -> &'static Map<String, Value> {
    static SCHEMAS: OnceLock<Map<String, Value>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        use k8s_openapi::api::coordination::v1 as coord;
        use k8s_openapi::api::core::v1 as core;
        use k8s_openapi::api::events::v1 as events;
        let mut g = schemars::generate::SchemaSettings::openapi3().into_generator();
        g.subschema_for::<core::Pod>();
        g.subschema_for::<core::Namespace>();
        g.subschema_for::<core::Node>();
        g.subschema_for::<core::Event>();
        g.subschema_for::<core::ConfigMap>();
        g.subschema_for::<core::Secret>();
        g.subschema_for::<core::Service>();
        g.subschema_for::<coord::Lease>();
        g.subschema_for::<events::Event>();
        g.subschema_for::<k8s_openapi::api::apps::v1::Deployment>();
        g.subschema_for::<k8s_openapi::api::apps::v1::ReplicaSet>();
        g.subschema_for::<k8s_openapi::api::policy::v1::PodDisruptionBudget>();
        g.subschema_for::<k8s_openapi::api::discovery::v1::EndpointSlice>();
        g.subschema_for::<k8s_openapi::api::apps::v1::Deployment>();
        g.subschema_for::<k8s_openapi::api::apps::v1::ReplicaSet>();
        g.subschema_for::<k8s_openapi::api::policy::v1::PodDisruptionBudget>();
        g.subschema_for::<k8s_openapi::api::discovery::v1::EndpointSlice>();
        g.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>();
        let mut defs = g.take_definitions(true);
        decorate(&mut defs);
        for v in defs.values_mut() {
            wrap_refs(v);
        }
        defs
    })
}

/// Adds what kube-apiserver's document carries and schemars does not: the strategic merge
/// patch keys of upstream's document and the `x-kubernetes-group-version-kind` of each kind.
pub(crate) fn decorate(defs: &mut Map<String, Value>) {
    for d in patch::defs() {
        let Some(props) = defs
            .get_mut(d.name)
            .and_then(|s| s.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for p in d.props {
            if let Some(ps) = props.get_mut(p.name).and_then(Value::as_object_mut) {
                if !p.strategy.is_empty() {
                    ps.insert("x-kubernetes-patch-strategy".into(), json!(p.strategy));
                }
                if !p.merge_key.is_empty() {
                    ps.insert("x-kubernetes-patch-merge-key".into(), json!(p.merge_key));
                }
                if !p.list_type.is_empty() {
                    ps.insert("x-kubernetes-list-type".into(), json!(p.list_type));
                }
            }
        }
    }
    for r in RESOURCES {
        let name = def_name(r, r.kind);
        if let Some(s) = defs.get_mut(&name).and_then(Value::as_object_mut) {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": r.group, "version": r.version, "kind": r.kind}]),
            );
        }
    }
}

/// `{"$ref": X, "description": D}` → `{"allOf": [{"$ref": X}], "description": D}`, as
/// kube-openapi writes a reference with siblings in OpenAPI 3.0.
fn wrap_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.contains_key("$ref") && m.len() > 1 {
                if let Some(r) = m.remove("$ref") {
                    m.insert("allOf".into(), json!([{"$ref": r}]));
                }
            }
            for x in m.values_mut() {
                wrap_refs(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(wrap_refs),
        _ => {}
    }
}

/// The schema name of a kind (`io.k8s.api.core.v1.Pod`).
pub fn def_name(r: &Resource, kind: &str) -> String {
    let group = match r.group {
        "" => "core",
        "coordination.k8s.io" => "coordination",
        "events.k8s.io" => "events",
        "discovery.k8s.io" => "discovery",
        g => g,
    };
    format!("io.k8s.api.{group}.{}.{kind}", r.version)
}

/// The list and watch query parameters of kube-apiserver's list and deletecollection
/// operations, with their schema types (`installer.go`, `addObjectParams` of
/// `metav1.ListOptions`).
const LIST_QUERY: [(&str, &str); 10] = [
    ("allowWatchBookmarks", "boolean"),
    ("continue", "string"),
    ("fieldSelector", "string"),
    ("labelSelector", "string"),
    ("limit", "integer"),
    ("resourceVersion", "string"),
    ("resourceVersionMatch", "string"),
    ("sendInitialEvents", "boolean"),
    ("timeoutSeconds", "integer"),
    ("watch", "boolean"),
];

/// The query parameters of `metav1.DeleteOptions` on delete and deletecollection.
const DELETE_QUERY: [(&str, &str); 4] = [
    ("dryRun", "string"),
    ("gracePeriodSeconds", "integer"),
    ("orphanDependents", "boolean"),
    ("propagationPolicy", "string"),
];

/// The path parameters a path item declares for its template (`{namespace}`, `{name}`), as
/// kube-apiserver's document does: OpenAPI requires each templated segment to be declared, or
/// the document is invalid for tools that read it (schemathesis refuses the operation).
fn path_params(r: &Resource, named: bool) -> Value {
    let mut out = Vec::new();
    if named {
        out.push(json!({"name": "name", "in": "path", "description": format!("name of the {}", r.kind), "required": true, "schema": {"type": "string", "uniqueItems": true}}));
    }
    if r.namespaced {
        out.push(json!({"name": "namespace", "in": "path", "description": "object name and auth scope, such as for teams and projects", "required": true, "schema": {"type": "string", "uniqueItems": true}}));
    }
    Value::Array(out)
}

fn op(r: &Resource, action: &str, kind: &str, body: bool, patch: bool) -> Value {
    let reference = |k: &str| {
        if k.ends_with("List") || k == "Status" {
            json!({"type": "object"})
        } else {
            json!({"$ref": format!("#/components/schemas/{}", def_name(r, k))})
        }
    };
    let mut params = vec![
        json!({"name": "pretty", "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
    ];
    if body {
        params.push(json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        params.push(json!({"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        params.push(json!({"name": "fieldValidation", "in": "query", "description": "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict", "schema": {"type": "string", "uniqueItems": true}}));
    }
    let queries: &[(&str, &str)] = match action {
        "list" | "deletecollection" => &LIST_QUERY,
        _ => &[],
    };
    let deletes: &[(&str, &str)] = match action {
        "delete" | "deletecollection" => &DELETE_QUERY,
        _ => &[],
    };
    for (name, ty) in queries.iter().chain(deletes) {
        params.push(
            json!({"name": name, "in": "query", "schema": {"type": ty, "uniqueItems": true}}),
        );
    }
    let mut o = json!({
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference(kind)}}}, "401": {"description": "Unauthorized"}},
    });
    if patch {
        let obj = json!({"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}});
        o["requestBody"] = json!({"content": {
            "application/json-patch+json": obj,
            "application/merge-patch+json": obj,
            "application/strategic-merge-patch+json": obj,
        }, "required": true});
    } else if body {
        o["requestBody"] =
            json!({"content": {"*/*": {"schema": reference(r.kind)}}, "required": true});
    }
    o
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/GROUP/VERSION`, if served.
pub fn document(gv: &str) -> Option<Value> {
    let gv = gv.split('?').next().unwrap_or(gv);
    let rs: Vec<&Resource> = RESOURCES.iter().filter(|r| gv_path(r) == gv).collect();
    if rs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for r in &rs {
        let base = format!("/{}", gv_path(r));
        let coll = if r.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{base}/{}", r.plural)
        };
        let list_kind = format!("{}List", r.kind);
        paths.insert(
            coll.clone(),
            json!({
                "parameters": path_params(r, false),
                "get": op(r, "list", &list_kind, false, false),
                "post": op(r, "post", r.kind, true, false),
                "delete": op(r, "deletecollection", "Status", false, false),
            }),
        );
        if r.namespaced {
            paths.insert(
                format!("{base}/{}", r.plural),
                json!({"get": op(r, "list", &list_kind, false, false)}),
            );
        }
        paths.insert(
            format!("{coll}/{{name}}"),
            json!({
                "parameters": path_params(r, true),
                "get": op(r, "get", r.kind, false, false),
                "put": op(r, "put", r.kind, true, false),
                "patch": op(r, "patch", r.kind, true, true),
                "delete": op(r, "delete", "Status", false, false),
            }),
        );
    }
    let mut components = schemas().clone();
    components.insert("io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(), json!({"description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.", "type": "object"}));
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0-podgrace"},
        "paths": paths,
        "components": {"schemas": components},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_schema_carries_gvk_and_merge_keys() {
        let doc = document("api/v1").unwrap();
        let s = &doc["components"]["schemas"];
        assert_eq!(
            s["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"][0]["kind"],
            "Pod"
        );
        let c = &s["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(c["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(c["x-kubernetes-patch-strategy"], "merge");
        let p = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert!(p["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "fieldValidation"));
        assert!(document("apis/events.k8s.io/v1").is_some());
        let apps = document("apis/apps/v1").unwrap();
        let t = &apps["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]
            ["containers"];
        assert_eq!(t["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(
            apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
                ["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        assert!(document("apis/batch/v1").is_none());
        assert!(index()["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .starts_with("/openapi/v3/api/v1?hash="));
    }

    /// Every `{param}` of every path is declared (schemathesis refused 26 of the 54 operations
    /// of `/openapi/v3/api/v1` before: "Path parameter 'namespace' is not defined"), and lists
    /// declare their selectors and watch parameters.
    #[test]
    fn every_templated_path_segment_is_declared() {
        let mut checked = 0;
        for gv in index()["paths"].as_object().unwrap().keys() {
            let doc = document(gv).unwrap();
            for (path, item) in doc["paths"].as_object().unwrap() {
                let declared: Vec<&str> = item["parameters"]
                    .as_array()
                    .map(|ps| {
                        ps.iter()
                            .filter(|p| p["in"] == "path" && p["required"] == true)
                            .map(|p| p["name"].as_str().unwrap())
                            .collect()
                    })
                    .unwrap_or_default();
                let mut templated: Vec<&str> = path
                    .split('/')
                    .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                    .collect();
                let mut d = declared.clone();
                templated.sort_unstable();
                d.sort_unstable();
                assert_eq!(templated, d, "{path}");
                checked += templated.len();
            }
        }
        assert!(checked > 20, "{checked}");
        let doc = document("api/v1").unwrap();
        let list = &doc["paths"]["/api/v1/namespaces/{namespace}/pods"]["get"]["parameters"];
        let names: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        for want in [
            "labelSelector",
            "fieldSelector",
            "watch",
            "limit",
            "continue",
        ] {
            assert!(names.contains(&want), "{names:?}");
        }
        let del = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["delete"];
        assert!(del["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "gracePeriodSeconds" && p["schema"]["type"] == "integer"));
    }
}
