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

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

fn is_label(s: &str, first_alpha: bool) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.ends_with('-')
        && if first_alpha {
            s.starts_with(|c: char| c.is_ascii_lowercase())
        } else {
            !s.starts_with('-')
        }
}

/// The kind of name a resource requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain (most kinds), at most 253 characters.
    Subdomain,
    /// RFC 1123 label (namespaces), at most 63.
    Label,
    /// RFC 1035 label (services), at most 63.
    Dns1035,
}

/// The problems with `name` under `rule`, each an `Invalid value` body (without the path).
pub fn name_problems(name: &str, rule: NameRule) -> Vec<String> {
    let mut out = Vec::new();
    let q = crate::status_quote(name);
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                out.push(format!(
                    "Invalid value: {q}: must be no more than 253 characters"
                ));
            }
            if !name.split('.').all(|l| is_label(l, false)) {
                out.push(format!("Invalid value: {q}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')"));
            }
        }
        NameRule::Label => {
            if name.len() > 63 {
                out.push(format!(
                    "Invalid value: {q}: must be no more than 63 characters"
                ));
            }
            if !is_label(name, false) {
                out.push(format!("Invalid value: {q}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{DNS1123_LABEL_FMT}')"));
            }
        }
        NameRule::Dns1035 => {
            if name.len() > 63 {
                out.push(format!(
                    "Invalid value: {q}: must be no more than 63 characters"
                ));
            }
            if !is_label(name, true) {
                out.push(format!("Invalid value: {q}: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL_FMT}')"));
            }
        }
    }
    out
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
}
