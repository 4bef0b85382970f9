//! Object metadata: reading, name validation and the fields the server owns, as
//! apimachinery's `ValidateObjectMeta` and the generic registry's `BeforeCreate`/`BeforeUpdate`
//! treat them.
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go`,
//! `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go` (`IsDNS1123Subdomain`,
//! `IsDNS1123Label`, `IsDNS1035Label` and their messages), `staging/src/k8s.io/apiserver/pkg/
//! registry/rest/create.go` and `update.go`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::status::Cause;

/// `metadata.name`, or "".
pub fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.namespace`, or "".
pub fn namespace(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.uid`, or "".
pub fn uid(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.labels` (non-string values are skipped).
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The `metadata` map of `obj`, created if missing.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("object");
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("object")
}

pub use podgrace_core::rules::validation::format::NameRule;
use podgrace_core::rules::validation::format::{
    is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
};

/// `IsDNS1123Subdomain`'s messages for `s` (empty when it is one); podgrace-core's
/// implementation, shared with the manifest loader.
pub fn subdomain_messages(s: &str) -> Vec<String> {
    is_dns1123_subdomain(s)
}

/// `IsQualifiedName` (`content.IsLabelKey`), podgrace-core's implementation.
pub fn qualified_name_messages(value: &str) -> Vec<String> {
    is_qualified_name(value)
}

/// `IsValidLabelValue` (`content.IsLabelValue`), podgrace-core's implementation.
pub fn label_value_messages(value: &str) -> Vec<String> {
    is_valid_label_value(value)
}

/// The most annotations may hold, keys and values together (`TotalAnnotationSizeLimitB`,
/// 256 KiB).
pub const TOTAL_ANNOTATION_SIZE_LIMIT_BYTES: usize = 256 * 1024;

/// `ValidateLabels` and `ValidateAnnotations` of the metadata at `meta_path` (`metadata`,
/// `spec.template.metadata`) of `obj`: each bad key or value an `Invalid value` at
/// `<path>.labels` / `<path>.annotations` (keys in sorted order, where Go's map order is
/// random), annotations over 256 KiB in all `Too long: may not be more than 262144 bytes`.
///
/// Upstream: `apimachinery/pkg/apis/meta/v1/validation/validation.go` (`ValidateLabels`,
/// `ValidateLabelName`), `apimachinery/pkg/api/validation/objectmeta.go`
/// (`ValidateAnnotations`, `ValidateAnnotationsSize`), `api/validate/content/kube.go`.
pub fn validate_labels_and_annotations(meta: &Value, path: &str) -> Vec<Cause> {
    let invalid = |field: String, value: &str, msg: String| Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {msg}", crate::status_quote(value)),
        field,
    };
    let mut out = Vec::new();
    let map = |k: &str| -> BTreeMap<String, String> {
        meta.get(k)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let labels_path = format!("{path}.labels");
    for (k, v) in map("labels") {
        for m in qualified_name_messages(&k) {
            out.push(invalid(labels_path.clone(), &k, m));
        }
        for m in label_value_messages(&v) {
            out.push(invalid(labels_path.clone(), &v, m));
        }
    }
    let annotations = map("annotations");
    let ann_path = format!("{path}.annotations");
    for k in annotations.keys() {
        for m in qualified_name_messages(&k.to_lowercase()) {
            out.push(invalid(ann_path.clone(), k, m));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT_BYTES {
        out.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!(
                "Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT_BYTES} bytes"
            ),
            field: ann_path,
        });
    }
    out
}

/// The problems with `name` under `rule`, each an `Invalid value` body (without the path).
pub fn name_problems(name: &str, rule: NameRule) -> Vec<String> {
    let q = crate::status_quote(name);
    rule.check(name, false)
        .into_iter()
        .map(|m| format!("Invalid value: {q}: {m}"))
        .collect()
}

/// `ValidateObjectMeta` for what podgrace checks: the name (or `generateName`) and its format.
pub fn validate_name(obj: &Value, rule: NameRule) -> Vec<Cause> {
    let n = name(obj);
    if n.is_empty() {
        return vec![Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: name or generateName is required".into(),
            field: "metadata.name".into(),
        }];
    }
    name_problems(n, rule)
        .into_iter()
        .map(|m| Cause {
            reason: "FieldValueInvalid".into(),
            message: m,
            field: "metadata.name".into(),
        })
        .collect()
}

/// The characters `generateName` suffixes are drawn from (`utilrand.String`).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A random `generateName` suffix of 5 characters (`names.SimpleNameGenerator`).
pub fn name_suffix() -> String {
    let mut bytes = [0u8; 5];
    getrandom::fill(&mut bytes).expect("random bytes");
    bytes
        .iter()
        .map(|b| ALPHANUMS[*b as usize % ALPHANUMS.len()] as char)
        .collect()
}

/// A random (version 4) UUID, as `metadata.uid`.
pub fn new_uid() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("random bytes");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// RFC 3339 with whole seconds, as `metav1.Time` serializes (`2026-12-01T09:12:58Z`).
pub fn time_string(t: jiff::Timestamp) -> String {
    let secs = t.as_second();
    jiff::Timestamp::from_second(secs)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// Microsecond RFC 3339, as `metav1.MicroTime` serializes (`eventTime`, lease times).
pub fn micro_time_string(t: jiff::Timestamp) -> String {
    let micros = t.as_microsecond();
    jiff::Timestamp::from_microsecond(micros)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_default()
}

/// Parses a `metav1.Time` or `MicroTime` string.
pub fn parse_time(s: &str) -> Option<jiff::Timestamp> {
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_checked_with_upstream_wording() {
        assert!(name_problems("web-1", NameRule::Subdomain).is_empty());
        assert!(name_problems("a.b", NameRule::Subdomain).is_empty());
        assert_eq!(
            name_problems("App_1", NameRule::Label),
            ["Invalid value: \"App_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
        );
        assert_eq!(name_problems("1web", NameRule::Dns1035).len(), 1);
        assert_eq!(new_uid().len(), 36);
        assert_eq!(name_suffix().len(), 5);
        let t: jiff::Timestamp = "2026-12-01T09:12:58.123456789Z".parse().unwrap();
        assert_eq!(time_string(t), "2026-12-01T09:12:58Z");
        assert_eq!(micro_time_string(t), "2026-12-01T09:12:58.123456Z");
    }

    #[test]
    fn qualified_names_and_label_values_get_upstreams_messages() {
        assert!(qualified_name_messages("app").is_empty());
        assert!(qualified_name_messages("example.com/My_Name.1").is_empty());
        assert_eq!(
            qualified_name_messages(&format!("{}/x", "A")),
            vec!["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string()]
        );
        assert_eq!(
            qualified_name_messages(&"n".repeat(64)),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        assert_eq!(
            qualified_name_messages("x/"),
            vec![
                "name part must be non-empty".to_string(),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string()
            ]
        );
        assert!(label_value_messages("").is_empty());
        assert!(label_value_messages("v1.2_x-Y").is_empty());
        assert_eq!(
            label_value_messages(&"v".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
        assert_eq!(label_value_messages("a b").len(), 1);
        // Annotation keys are checked lowercased; exactly 256 KiB in all is allowed.
        let meta = json!({"annotations": {"Example.COM/Key": "v".repeat(262144 - 15)}});
        assert!(validate_labels_and_annotations(&meta, "metadata").is_empty());
        let meta = json!({"annotations": {"Example.COM/Key": "v".repeat(262144 - 14)}});
        assert_eq!(
            validate_labels_and_annotations(&meta, "metadata")[0].field,
            "metadata.annotations"
        );
    }
}
