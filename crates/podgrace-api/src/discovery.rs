//! Discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/GROUP` and
//! `/apis/GROUP/VERSION`, as kube-apiserver serves them (the legacy, unaggregated documents;
//! clients that ask for aggregated discovery first fall back to these when the answer is
//! plain `application/json`, as client-go does).
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/endpoints/discovery/` (`APIVersions`,
//! `APIGroupList`, `APIResourceList`), `pkg/version` (`/version`).

use serde_json::{json, Value};

use crate::api::Api;
use crate::resource::{groups, Resource, RESOURCES, VERBS};

/// `/version`: the release podgrace reproduces.
pub fn version(api: &Api) -> Value {
    let v = api.config().kube_version;
    json!({
        "major": v.major.to_string(),
        "minor": v.minor.to_string(),
        "emulationMajor": v.major.to_string(),
        "emulationMinor": v.minor.to_string(),
        "gitVersion": format!("v{}.{}.0-podgrace", v.major, v.minor),
        "gitCommit": "podgrace",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn api_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

fn group_json(g: &str) -> Value {
    let versions: Vec<&str> = {
        let mut v: Vec<&str> = RESOURCES
            .iter()
            .filter(|r| r.group == g)
            .map(|r| r.version)
            .collect();
        v.dedup();
        v
    };
    let gv: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({"name": g, "versions": gv, "preferredVersion": gv.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub fn group_list() -> Value {
    let gs: Vec<Value> = groups().into_iter().map(group_json).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/GROUP`, if served.
pub fn group(g: &str) -> Option<Value> {
    groups().contains(&g).then(|| {
        let mut v = group_json(g);
        v["kind"] = json!("APIGroup");
        v["apiVersion"] = json!("v1");
        v
    })
}

fn resource_json(r: &Resource) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
        "kind": r.kind, "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    for sub in r.subresources {
        let verbs: &[&str] = match *sub {
            "log" | "proxy" => &["get"],
            "finalize" => &["update"],
            "eviction" | "binding" => &["create"],
            _ => &["get", "patch", "update"],
        };
        let mut e = json!({"name": format!("{}/{sub}", r.plural), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": verbs});
        match *sub {
            "log" => e["kind"] = json!("Pod"),
            "proxy" => e["kind"] = json!("NodeProxyOptions"),
            "binding" => e["kind"] = json!("Binding"),
            "scale" => {
                e["group"] = json!("autoscaling");
                e["version"] = json!("v1");
                e["kind"] = json!("Scale");
            }
            "eviction" => {
                e["group"] = json!("policy");
                e["version"] = json!("v1");
                e["kind"] = json!("Eviction");
            }
            _ => {}
        }
        out.push(e);
    }
    out
}

/// `/api/v1` or `/apis/GROUP/VERSION`, if served.
pub fn resource_list(g: &str, v: &str) -> Option<Value> {
    let rs: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == g && r.version == v)
        .flat_map(resource_json)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": rs}),
    )
}
