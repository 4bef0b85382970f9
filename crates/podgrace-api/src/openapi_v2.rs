//! The OpenAPI v2 document (`/openapi/v2`), which kubectl 1.27 and 1.28 read for
//! `kubectl apply` (its field-validation check and patch types) and `kubectl explain`. They ask
//! for it as protobuf (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, the
//! gnostic `openapi.v2.Document` message); JSON is served to clients that ask for JSON.
//!
//! The schemas are the same as the v3 document's ([`crate::openapi`]), under
//! `#/definitions/`, with `$ref` and its siblings side by side as Swagger 2.0 writes them.
//! The encoder writes only the protobuf fields podgrace's documents use, with the field
//! numbers of gnostic's `OpenAPIv2.proto`; vendor extensions and defaults travel as YAML text
//! (`Any.yaml`), which JSON is.
//!
//! Upstream: kube-openapi's `pkg/builder` (the v2 document), client-go's
//! `discovery.OpenAPISchema` (what is asked for), cli-runtime's `query_param_verifier.go` and
//! kube-openapi's `pkg/util/proto` (what kubectl reads from it).

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use crate::openapi::{decorate, def_name};
use crate::resource::{Resource, RESOURCES};

/// The protobuf media type kubectl asks for.
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The Content-Type it is served with (kube-openapi's handler: a `.` where the request has
/// `@`, which Go's `mime.ParseMediaType` would refuse).
pub const PROTOBUF_SERVED: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn definitions() -> Map<String, Value> {
    use k8s_openapi::api::coordination::v1 as coord;
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::events::v1 as events;
    let mut g = schemars::generate::SchemaSettings::draft07().into_generator();
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
    let mut defs = g.take_definitions(true);
    decorate(&mut defs);
    defs
}

fn op(r: &Resource, action: &str, patch: bool, body: bool) -> Value {
    let mut params =
        vec![json!({"name": "pretty", "in": "query", "type": "string", "uniqueItems": true})];
    if body {
        for n in ["dryRun", "fieldManager", "fieldValidation"] {
            params.push(json!({"name": n, "in": "query", "type": "string", "uniqueItems": true}));
        }
        params.push(json!({"name": "body", "in": "body", "required": true, "schema": {"$ref": format!("#/definitions/{}", def_name(r, r.kind))}}));
    }
    let consumes = if patch {
        json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json"
        ])
    } else {
        json!(["*/*"])
    };
    json!({
        "operationId": format!("{action}{}", r.kind),
        "consumes": consumes,
        "produces": ["application/json"],
        "schemes": ["https"],
        "parameters": params,
        "responses": {"200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{}", def_name(r, r.kind))}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
    })
}

/// The Swagger 2.0 document as JSON.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut paths = Map::new();
        for r in RESOURCES {
            let base = if r.group.is_empty() { format!("/api/{}", r.version) } else { format!("/apis/{}/{}", r.group, r.version) };
            let coll = if r.namespaced { format!("{base}/namespaces/{{namespace}}/{}", r.plural) } else { format!("{base}/{}", r.plural) };
            paths.insert(coll.clone(), json!({"post": op(r, "post", false, true)}));
            paths.insert(
                format!("{coll}/{{name}}"),
                json!({"get": op(r, "get", false, false), "put": op(r, "put", false, true), "patch": op(r, "patch", true, true)}),
            );
        }
        json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.37.0-podgrace"},
            "paths": paths,
            "definitions": definitions(),
        })
    })
}

/// The document as the gnostic `openapi.v2.Document` protobuf message.
pub fn protobuf() -> &'static [u8] {
    static PB: OnceLock<Vec<u8>> = OnceLock::new();
    PB.get_or_init(|| encode_document(document()))
}

// --- a minimal protobuf writer -------------------------------------------------------------

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn bytes_field(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    varint(out, u64::from(field) << 3 | 2);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn string_field(out: &mut Vec<u8>, field: u32, s: &str) {
    if !s.is_empty() {
        bytes_field(out, field, s.as_bytes());
    }
}

fn bool_field(out: &mut Vec<u8>, field: u32, b: bool) {
    if b {
        varint(out, u64::from(field) << 3);
        varint(out, 1);
    }
}

fn any(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(&mut out, 2, &v.to_string());
    out
}

fn named_any(name: &str, v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(&mut out, 1, name);
    bytes_field(&mut out, 2, &any(v));
    out
}

fn extensions(out: &mut Vec<u8>, field: u32, m: &Map<String, Value>) {
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        bytes_field(out, field, &named_any(k, v));
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

/// `openapi.v2.Schema`.
fn encode_schema(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(m) = v.as_object() else {
        return out;
    };
    string_field(&mut out, 1, str_of(m, "$ref"));
    string_field(&mut out, 2, str_of(m, "format"));
    string_field(&mut out, 3, str_of(m, "title"));
    string_field(&mut out, 4, str_of(m, "description"));
    if let Some(d) = m.get("default") {
        bytes_field(&mut out, 5, &any(d));
    }
    for r in m
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        string_field(&mut out, 19, r.as_str().unwrap_or(""));
    }
    for e in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes_field(&mut out, 20, &any(e));
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Vec::new();
            varint(&mut item, 2 << 3);
            varint(&mut item, u64::from(*b));
            bytes_field(&mut out, 21, &item);
        }
        Some(s @ Value::Object(_)) => {
            let mut item = Vec::new();
            bytes_field(&mut item, 1, &encode_schema(s));
            bytes_field(&mut out, 21, &item);
        }
        _ => {}
    }
    let types: Vec<&str> = match m.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let mut t = Vec::new();
        for ty in types {
            string_field(&mut t, 1, ty);
        }
        bytes_field(&mut out, 22, &t);
    }
    match m.get("items") {
        Some(s @ Value::Object(_)) => {
            let mut item = Vec::new();
            bytes_field(&mut item, 1, &encode_schema(s));
            bytes_field(&mut out, 23, &item);
        }
        Some(Value::Array(a)) => {
            let mut item = Vec::new();
            for s in a {
                bytes_field(&mut item, 1, &encode_schema(s));
            }
            bytes_field(&mut out, 23, &item);
        }
        _ => {}
    }
    for s in m
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes_field(&mut out, 24, &encode_schema(s));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let mut p = Vec::new();
        for (name, s) in props {
            let mut ns = Vec::new();
            string_field(&mut ns, 1, name);
            bytes_field(&mut ns, 2, &encode_schema(s));
            bytes_field(&mut p, 1, &ns);
        }
        bytes_field(&mut out, 25, &p);
    }
    bool_field(
        &mut out,
        27,
        m.get("readOnly").and_then(Value::as_bool).unwrap_or(false),
    );
    extensions(&mut out, 31, m);
    out
}

/// `openapi.v2.ParametersItem`.
fn encode_parameter(p: &Value) -> Vec<u8> {
    let m = p.as_object().cloned().unwrap_or_default();
    let mut param = Vec::new();
    if str_of(&m, "in") == "body" {
        let mut b = Vec::new();
        string_field(&mut b, 2, str_of(&m, "name"));
        string_field(&mut b, 3, "body");
        bool_field(&mut b, 4, true);
        if let Some(s) = m.get("schema") {
            bytes_field(&mut b, 5, &encode_schema(s));
        }
        bytes_field(&mut param, 1, &b);
    } else {
        let mut q = Vec::new();
        string_field(&mut q, 2, str_of(&m, "in"));
        string_field(&mut q, 4, str_of(&m, "name"));
        string_field(&mut q, 6, str_of(&m, "type"));
        bool_field(
            &mut q,
            20,
            m.get("uniqueItems")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        );
        let mut nb = Vec::new();
        bytes_field(&mut nb, 3, &q);
        bytes_field(&mut param, 2, &nb);
    }
    let mut item = Vec::new();
    bytes_field(&mut item, 1, &param);
    item
}

/// `openapi.v2.Operation`.
fn encode_operation(v: &Value) -> Vec<u8> {
    let m = v.as_object().cloned().unwrap_or_default();
    let mut out = Vec::new();
    string_field(&mut out, 5, str_of(&m, "operationId"));
    for p in m
        .get("produces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        string_field(&mut out, 6, p.as_str().unwrap_or(""));
    }
    for c in m
        .get("consumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        string_field(&mut out, 7, c.as_str().unwrap_or(""));
    }
    for p in m
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes_field(&mut out, 8, &encode_parameter(p));
    }
    if let Some(rs) = m.get("responses").and_then(Value::as_object) {
        let mut responses = Vec::new();
        for (code, r) in rs {
            let mut resp = Vec::new();
            string_field(
                &mut resp,
                1,
                r.get("description").and_then(Value::as_str).unwrap_or(""),
            );
            if let Some(s) = r.get("schema") {
                let mut item = Vec::new();
                bytes_field(&mut item, 1, &encode_schema(s));
                bytes_field(&mut resp, 2, &item);
            }
            let mut rv = Vec::new();
            bytes_field(&mut rv, 1, &resp);
            let mut named = Vec::new();
            string_field(&mut named, 1, code);
            bytes_field(&mut named, 2, &rv);
            bytes_field(&mut responses, 1, &named);
        }
        bytes_field(&mut out, 9, &responses);
    }
    for s in m
        .get("schemes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        string_field(&mut out, 10, s.as_str().unwrap_or(""));
    }
    extensions(&mut out, 13, &m);
    out
}

fn encode_document(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(&mut out, 1, "2.0");
    let mut info = Vec::new();
    string_field(
        &mut info,
        1,
        doc.pointer("/info/title")
            .and_then(Value::as_str)
            .unwrap_or(""),
    );
    string_field(
        &mut info,
        2,
        doc.pointer("/info/version")
            .and_then(Value::as_str)
            .unwrap_or(""),
    );
    bytes_field(&mut out, 2, &info);
    let mut paths = Vec::new();
    for (path, item) in doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut pi = Vec::new();
        for (verb, field) in [
            ("get", 2),
            ("put", 3),
            ("post", 4),
            ("delete", 5),
            ("patch", 8),
        ] {
            if let Some(o) = item.get(verb) {
                bytes_field(&mut pi, field, &encode_operation(o));
            }
        }
        let mut named = Vec::new();
        string_field(&mut named, 1, path);
        bytes_field(&mut named, 2, &pi);
        bytes_field(&mut paths, 2, &named);
    }
    bytes_field(&mut out, 8, &paths);
    let mut defs = Vec::new();
    for (name, s) in doc
        .get("definitions")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let mut named = Vec::new();
        string_field(&mut named, 1, name);
        bytes_field(&mut named, 2, &encode_schema(s));
        bytes_field(&mut defs, 1, &named);
    }
    bytes_field(&mut out, 9, &defs);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_document_names_kinds_and_field_validation() {
        let d = document();
        assert_eq!(
            d["definitions"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"][0]
                ["kind"],
            "Pod"
        );
        assert_eq!(
            d["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
                ["x-kubernetes-patch-merge-key"],
            "name"
        );
        let patch = &d["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert!(patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation"));
        let pb = protobuf();
        assert!(pb.len() > 10_000);
        // Field 1 (swagger, length-delimited) first: "2.0".
        assert_eq!(&pb[..5], &[0x0a, 3, b'2', b'.', b'0']);
    }
}
