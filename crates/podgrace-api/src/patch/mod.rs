//! Patches: JSON patch (RFC 6902) and JSON merge patch (RFC 7386) through the `json-patch`
//! crate, and the strategic merge patch kubectl sends (`kubectl apply`, `label`, `annotate`,
//! `edit`), with lists merged by their `patchMergeKey` (containers by `name`, ports by
//! `containerPort`, conditions by `type` ...).
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`
//! (`StrategicMergePatch`, `mergeMap`, `mergeSlice`, the `$patch`, `$retainKeys`,
//! `$setElementOrder/` and `$deleteFromPrimitiveList/` directives); the merge keys are the
//! `x-kubernetes-patch-merge-key` / `x-kubernetes-patch-strategy` of upstream's OpenAPI
//! document, extracted into [`table`] by `tools/patchmeta.py`.

use serde_json::{Map, Value};

mod table;

/// A definition of the OpenAPI document (`io.k8s.api.core.v1.PodSpec`) with the properties
/// that matter for patching (object references, lists, patch strategies).
#[derive(Debug)]
pub struct Def {
    /// The definition's name in the OpenAPI document (`io.k8s.api.core.v1.PodSpec`).
    pub name: &'static str,
    /// Its properties that matter for patching, sorted by name.
    pub props: &'static [Prop],
}

/// One property of a [`Def`].
#[derive(Debug)]
pub struct Prop {
    /// The JSON field name (`containers`).
    pub name: &'static str,
    /// The definition of the value (or of the list items / map values), as an index into the
    /// table.
    pub def: Option<usize>,
    /// The value is a list (`type: array`).
    pub array: bool,
    /// The value is a map (`additionalProperties`).
    pub map: bool,
    /// `x-kubernetes-patch-strategy` (`merge`, `retainKeys`, `merge,retainKeys`, or "").
    pub strategy: &'static str,
    /// `x-kubernetes-patch-merge-key`.
    pub merge_key: &'static str,
    /// `x-kubernetes-list-type`.
    pub list_type: &'static str,
}

/// Every definition of the table.
pub fn defs() -> &'static [Def] {
    table::DEFS
}

/// The definition named `name` (`io.k8s.api.core.v1.Pod`).
pub fn def(name: &str) -> Option<&'static Def> {
    table::DEFS.iter().find(|d| d.name == name)
}

fn prop(def: Option<&'static Def>, key: &str) -> Option<&'static Prop> {
    def?.props.iter().find(|p| p.name == key)
}

fn sub(p: Option<&'static Prop>) -> Option<&'static Def> {
    p.and_then(|p| p.def).map(|i| &table::DEFS[i])
}

/// A patch that cannot be applied (400 `BadRequest` or 422, as upstream answers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// Applies an RFC 6902 JSON patch to a copy of `doc`.
///
/// The copy is patched without `json-patch`'s undo log (`patch_unsafe`): on an error it is
/// dropped, so nothing needs undoing, and the crate's undo panics (`unreachable!`, json-patch
/// 4.2) when a `move` fails half-way after earlier operations touched what it moved (found by
/// `fuzz/fuzz_targets/api_patch.rs`).
///
/// # Errors
/// The operation that failed, worded by the `json-patch` crate.
pub fn json_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let p: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError(format!("json: cannot unmarshal patch: {e}")))?;
    let mut out = doc.clone();
    json_patch::patch_unsafe(&mut out, &p).map_err(|e| PatchError(e.to_string()))?;
    Ok(out)
}

/// Applies an RFC 7386 JSON merge patch.
pub fn merge_patch(doc: &Value, patch: &Value) -> Value {
    let mut out = doc.clone();
    json_patch::merge(&mut out, patch);
    out
}

/// Applies a strategic merge patch to `doc`, a `def_name` object (`io.k8s.api.core.v1.Pod`).
///
/// # Errors
/// [`PatchError`] for a patch that is not an object or a malformed directive.
pub fn strategic_merge_patch(
    doc: &Value,
    patch: &Value,
    def_name: &str,
) -> Result<Value, PatchError> {
    let Value::Object(p) = patch else {
        return Err(PatchError(
            "unable to find api field in struct Unstructured for the json field \"\"".into(),
        ));
    };
    let original = match doc {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    Ok(Value::Object(merge_map(original, p, def(def_name))?))
}

const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    schema: Option<&'static Def>,
) -> Result<Map<String, Value>, PatchError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut p = patch.clone();
            p.remove("$patch");
            return Ok(strip(p));
        }
        Some("delete") => return Ok(Map::new()),
        Some("merge") | None => {}
        Some(other) => {
            return Err(PatchError(format!(
                "Unknown patch type: {other} in map: {patch:?}"
            )));
        }
    }
    if let Some(retain) = patch.get("$retainKeys") {
        let keep: Vec<&str> = retain
            .as_array()
            .ok_or_else(|| PatchError("$retainKeys must be a list of strings".into()))?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        original.retain(|k, _| keep.contains(&k.as_str()));
    }
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    for (k, pv) in patch {
        if k == "$patch" || k == "$retainKeys" {
            continue;
        }
        if let Some(field) = k.strip_prefix(SET_ORDER) {
            if let Some(list) = pv.as_array() {
                orders.push((field.to_string(), list.clone()));
            }
            continue;
        }
        if let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) {
            if let (Some(Value::Array(list)), Some(del)) = (original.get_mut(field), pv.as_array())
            {
                list.retain(|v| !del.contains(v));
            }
            continue;
        }
        if pv.is_null() {
            original.remove(k);
            continue;
        }
        let p = prop(schema, k);
        let sub_def = sub(p);
        let merged = match (original.remove(k), pv) {
            (Some(Value::Object(o)), Value::Object(pm)) => {
                Value::Object(merge_map(o, pm, sub_def)?)
            }
            (None, Value::Object(pm)) => Value::Object(merge_map(Map::new(), pm, sub_def)?),
            (Some(Value::Array(o)), Value::Array(pl)) => Value::Array(merge_list(o, pl, p)?),
            (None, Value::Array(pl)) => Value::Array(merge_list(Vec::new(), pl, p)?),
            (_, other) => other.clone(),
        };
        original.insert(k.clone(), merged);
    }
    for (field, order) in orders {
        let key = prop(schema, &field).map(|p| p.merge_key).unwrap_or("");
        if let Some(Value::Array(list)) = original.get_mut(&field) {
            reorder(list, &order, key);
        }
    }
    Ok(original)
}

/// Removes directives from a value that is inserted whole.
fn strip(mut m: Map<String, Value>) -> Map<String, Value> {
    m.retain(|k, _| !k.starts_with('$'));
    for v in m.values_mut() {
        strip_value(v);
    }
    m
}

fn strip_value(v: &mut Value) {
    match v {
        Value::Object(m) => *m = strip(std::mem::take(m)),
        Value::Array(a) => {
            a.retain(|i| i.get("$patch").and_then(Value::as_str) != Some("delete"));
            a.iter_mut().for_each(strip_value);
        }
        _ => {}
    }
}

fn merge_list(
    mut original: Vec<Value>,
    patch: &[Value],
    p: Option<&'static Prop>,
) -> Result<Vec<Value>, PatchError> {
    let merging = p.is_some_and(|p| p.strategy.split(',').any(|s| s == "merge"));
    if !merging {
        let mut out = patch.to_vec();
        out.retain(|i| i.get("$patch").is_none() || i.as_object().is_some_and(|m| m.len() > 1));
        out.iter_mut().for_each(strip_value);
        return Ok(out);
    }
    let key = p.map_or("", |p| p.merge_key);
    let item_def = sub(p);
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        let mut out: Vec<Value> = patch
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        out.iter_mut().for_each(strip_value);
        return Ok(out);
    }
    if key.is_empty() {
        // A list of primitives merged as a set (finalizers).
        for v in patch {
            if !original.contains(v) {
                original.push(v.clone());
            }
        }
        return Ok(original);
    }
    for item in patch {
        let Value::Object(pm) = item else {
            return Err(PatchError(format!(
                "unable to find map in list for merge key {key:?}"
            )));
        };
        let Some(kv) = pm.get(key) else {
            return Err(PatchError(format!(
                "map: {item} does not contain declared merge key: {key}"
            )));
        };
        let pos = original.iter().position(|o| o.get(key) == Some(kv));
        match (pm.get("$patch").and_then(Value::as_str), pos) {
            (Some("delete"), Some(i)) => {
                original.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => {
                let o = match original[i].take() {
                    Value::Object(o) => o,
                    _ => Map::new(),
                };
                original[i] = Value::Object(merge_map(o, pm, item_def)?);
            }
            (_, None) => original.push(Value::Object(merge_map(Map::new(), pm, item_def)?)),
        }
    }
    Ok(original)
}

/// `$setElementOrder`: the listed elements in the given order first, the others after, in
/// their order.
fn reorder(list: &mut Vec<Value>, order: &[Value], key: &str) {
    let id = |v: &Value| -> Value {
        if key.is_empty() {
            v.clone()
        } else {
            v.get(key).cloned().unwrap_or(Value::Null)
        }
    };
    let wanted: Vec<Value> = order.iter().map(&id).collect();
    let mut items = std::mem::take(list);
    for w in &wanted {
        if let Some(i) = items.iter().position(|v| id(v) == *w) {
            list.push(items.remove(i));
        }
    }
    list.append(&mut items);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let pod = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [
                {"name": "app", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                {"name": "side", "image": "s:1"}]}});
        let patch = json!({"metadata": {"labels": {"tier": "front", "app": null}},
            "spec": {"$setElementOrder/containers": [{"name": "app"}, {"name": "side"}],
                "containers": [{"name": "app", "image": "a:2", "env": [{"name": "Y", "value": "2"}]}]}});
        let out = strategic_merge_patch(&pod, &patch, "io.k8s.api.core.v1.Pod").unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"tier": "front"}));
        let cs = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0]["image"], "a:2");
        assert_eq!(
            cs[0]["env"],
            json!([{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}])
        );
        assert_eq!(cs[1]["image"], "s:1");

        let del = json!({"spec": {"containers": [{"name": "side", "$patch": "delete"}]}});
        let out = strategic_merge_patch(&pod, &del, "io.k8s.api.core.v1.Pod").unwrap();
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 1);

        // args is not a merge list: replaced.
        let args = json!({"spec": {"containers": [{"name": "app", "args": ["b"]}]}});
        let pod2 = json!({"spec": {"containers": [{"name": "app", "args": ["a", "x"]}]}});
        let out = strategic_merge_patch(&pod2, &args, "io.k8s.api.core.v1.Pod").unwrap();
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["b"]));
    }

    #[test]
    fn finalizers_merge_as_a_set_and_conditions_by_type() {
        let pod = json!({"metadata": {"finalizers": ["a"]}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let patch = json!({"metadata": {"finalizers": ["b", "a"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}});
        let out = strategic_merge_patch(&pod, &patch, "io.k8s.api.core.v1.Pod").unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(out["status"]["conditions"].as_array().unwrap().len(), 2);
        assert_eq!(out["status"]["conditions"][0]["status"], "True");
        let rm = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        let out = strategic_merge_patch(&out, &rm, "io.k8s.api.core.v1.Pod").unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn json_and_merge_patches() {
        let doc = json!({"a": {"b": 1}, "l": [1, 2]});
        let out = json_patch(&doc, &json!([{"op": "replace", "path": "/a/b", "value": 2}, {"op": "add", "path": "/l/-", "value": 3}])).unwrap();
        assert_eq!(out, json!({"a": {"b": 2}, "l": [1, 2, 3]}));
        assert!(json_patch(&doc, &json!([{"op": "test", "path": "/a/b", "value": 9}])).is_err());
        assert_eq!(
            merge_patch(&doc, &json!({"a": null, "l": [9]})),
            json!({"l": [9]})
        );
    }

    /// The fuzzer's crash (json-patch's undo panicked): a `move` whose target's parent is
    /// missing, after an `add` into the object it moves. An error, the original unchanged.
    #[test]
    fn a_move_that_fails_after_an_add_into_what_it_moves_is_an_error_not_a_panic() {
        let doc =
            json!({"kind": "StatefulSet", "metadata": {"name": "web", "labels": {"app": "nginx"}}});
        let p = json!([
            {"op": "add", "path": "/metadata/labels/x", "value": "y"},
            {"op": "replace", "path": "/metadata/name", "value": "z"},
            {"op": "test", "path": "/kind", "value": "StatefulSet"},
            {"op": "move", "from": "/metadata/labels", "path": "/metada2ta/annotations"}
        ]);
        let e = json_patch(&doc, &p).unwrap_err();
        assert!(e.0.contains("operation '/3'"), "{e}");
        assert_eq!(doc["metadata"]["labels"], json!({"app": "nginx"}));
    }
}
