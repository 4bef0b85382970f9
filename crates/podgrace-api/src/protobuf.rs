//! Protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`), which
//! kubectl's typed commands send (`kubectl create configmap|secret|namespace|deployment ...`,
//! the Eviction of `kubectl drain`): decoded into the JSON object the rest of the server
//! handles, as kube-apiserver's protobuf serializer decodes them into the Go type.
//!
//! The wire form is the 4-byte magic `k8s\0` followed by a `runtime.Unknown` message
//! (`typeMeta` with apiVersion and kind, `raw` with the object's own message). The messages
//! are upstream's `generated.proto` of the served groups, compiled by protox at build time
//! (`build.rs`) and decoded dynamically with prost-reflect.
//!
//! Go semantics: gogo-protobuf writes every non-pointer field, zero or not, so a zero scalar
//! of a non-pointer field is "unset" (Go's JSON would omit it or print its zero, which the
//! server treats alike) and is dropped here, while a pointer field's zero is a value
//! (`terminationGracePeriodSeconds: 0`, `replicas: 0`, `immutable: false`) and is kept: the
//! pointer fields are listed in `proto/pointer-fields.txt` (from upstream's `types.go`). The
//! special messages print as their JSON forms: `Time` (RFC 3339, seconds), `MicroTime`
//! (microseconds), `Duration` (Go's duration string), `IntOrString`, `Quantity`,
//! `RawExtension` and `FieldsV1` (embedded JSON); `bytes` are base64.
//!
//! Upstream: `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`
//! (`Serializer.Decode`: the prefix check, `runtime.Unknown`, the messages of its errors),
//! `apimachinery/pkg/apis/meta/v1/time_proto.go`, `micro_time_proto.go`,
//! `util/intstr/intstr.go`, `api/resource/quantity_proto.go`; Kubernetes 1.27 to 1.37 (the
//! envelope has not changed since 1.3).

use std::collections::HashSet;
use std::sync::LazyLock;

use base64::Engine as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage as _, Value as Pb,
};
use serde_json::{json, Map, Value};

use crate::status::ApiError;

/// The media type of kube-apiserver's protobuf encoding.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every protobuf-encoded object (`protoEncodingPrefix`).
pub const MAGIC: &[u8; 4] = b"k8s\0";

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/k8s-descriptors.bin"))[..])
        .expect("the descriptor set compiled by build.rs decodes")
});

static POINTERS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("../proto/pointer-fields.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

/// The protobuf package of an API group's version (`apps`, `v1` → `k8s.io.api.apps.v1`).
fn package(group: &str, version: &str) -> Option<String> {
    let g = match group {
        "" => "core",
        "meta.k8s.io" => return Some(format!("k8s.io.apimachinery.pkg.apis.meta.{version}")),
        g => g.strip_suffix(".k8s.io").unwrap_or(g),
    };
    Some(format!("k8s.io.api.{g}.{version}"))
}

/// The message of `kind` in `apiVersion` (`apps/v1`, `Deployment`), falling back to meta/v1
/// for the options kinds every group version registers (`DeleteOptions`).
fn message(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let pkg = package(group, version)?;
    POOL.get_message_by_name(&format!("{pkg}.{kind}"))
        .or_else(|| {
            POOL.get_message_by_name(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"))
        })
}

/// Decodes a protobuf-encoded object into its JSON form, with `apiVersion` and `kind` from
/// the envelope's `typeMeta`.
///
/// # Errors
/// 400 `BadRequest` in kube-apiserver's words: an empty body or one without the `k8s\0`
/// prefix (`provided data does not appear to be a protobuf message, expected prefix [107 56
/// 115 0]`), a malformed message, or a kind no served group has
/// (`no kind "Foo" is registered for version "v1" in scheme ...`).
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = |why: String| ApiError::bad_request(why);
    if body.is_empty() {
        return Err(bad("empty data".into()));
    }
    let Some(rest) = body.strip_prefix(&MAGIC[..]) else {
        return Err(bad(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
                .into(),
        ));
    };
    if rest.is_empty() {
        return Err(bad("empty body".into()));
    }
    let unknown_desc = POOL
        .get_message_by_name("k8s.io.apimachinery.pkg.runtime.Unknown")
        .ok_or_else(|| ApiError::internal("runtime.Unknown is not in the descriptor set"))?;
    let unknown = DynamicMessage::decode(unknown_desc, rest).map_err(|e| bad(e.to_string()))?;
    let type_meta = match unknown.get_field_by_name("typeMeta").as_deref() {
        Some(Pb::Message(m)) => m.clone(),
        _ => return Err(bad("the object has no typeMeta".into())),
    };
    let text = |m: &DynamicMessage, f: &str| match m.get_field_by_name(f).as_deref() {
        Some(Pb::String(s)) => s.clone(),
        _ => String::new(),
    };
    let api_version = text(&type_meta, "apiVersion");
    let kind = text(&type_meta, "kind");
    if kind.is_empty() {
        return Err(bad(format!(
            "Object 'Kind' is missing in 'runtime.TypeMeta{{APIVersion:{api_version:?}, Kind:\"\"}}'"
        )));
    }
    let encoding = text(&unknown, "contentEncoding");
    if !encoding.is_empty() {
        return Err(bad(format!("unsupported content encoding {encoding:?}")));
    }
    let Some(desc) = message(&api_version, &kind) else {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        return Err(bad(format!(
            "no kind {kind:?} is registered for version {gv:?} in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        )));
    };
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(Pb::Bytes(b)) => b.clone(),
        _ => Default::default(),
    };
    let object = DynamicMessage::decode(desc, raw).map_err(|e| bad(e.to_string()))?;
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!(kind));
    if let Value::Object(fields) = message_json(&object) {
        out.extend(fields);
    }
    Ok(Value::Object(out))
}

/// Whether a decoded scalar is its type's zero value.
fn is_zero(v: &Pb) -> bool {
    match v {
        Pb::Bool(b) => !b,
        Pb::I32(n) | Pb::EnumNumber(n) => *n == 0,
        Pb::I64(n) => *n == 0,
        Pb::U32(n) => *n == 0,
        Pb::U64(n) => *n == 0,
        Pb::F32(n) => *n == 0.0,
        Pb::F64(n) => *n == 0.0,
        Pb::String(s) => s.is_empty(),
        Pb::Bytes(b) => b.is_empty(),
        Pb::List(l) => l.is_empty(),
        Pb::Map(m) => m.is_empty(),
        Pb::Message(_) => false,
    }
}

/// A message as JSON, with the special messages in their JSON forms.
fn message_json(m: &DynamicMessage) -> Value {
    let desc = m.descriptor();
    let int = |f: &str| match m.get_field_by_name(f).as_deref() {
        Some(Pb::I64(n)) => *n,
        Some(Pb::I32(n)) => i64::from(*n),
        _ => 0,
    };
    let string = |f: &str| match m.get_field_by_name(f).as_deref() {
        Some(Pb::String(s)) => s.clone(),
        _ => String::new(),
    };
    let raw_json = |f: &str| match m.get_field_by_name(f).as_deref() {
        Some(Pb::Bytes(b)) if !b.is_empty() => {
            serde_json::from_slice(b).unwrap_or_else(|_| json!(String::from_utf8_lossy(b)))
        }
        _ => Value::Null,
    };
    match desc.full_name() {
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => return time(int("seconds"), 0, false),
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            return time(int("seconds"), int("nanos"), true)
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.Duration" => {
            return json!(go_duration(int("duration")))
        }
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => {
            return if int("type") == 1 {
                json!(string("strVal"))
            } else {
                json!(int("intVal"))
            };
        }
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => return json!(string("string")),
        "k8s.io.apimachinery.pkg.runtime.RawExtension" => return raw_json("raw"),
        "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1" => return raw_json("Raw"),
        _ => {}
    }
    let mut out = Map::new();
    for (field, value) in m.fields() {
        let pointer = POINTERS.contains(field.full_name());
        if is_zero(value) && !pointer {
            continue;
        }
        let v = value_json(value);
        if v.is_null() {
            continue;
        }
        out.insert(field.name().to_string(), v);
    }
    Value::Object(out)
}

fn value_json(v: &Pb) -> Value {
    match v {
        Pb::Bool(b) => json!(b),
        Pb::I32(n) | Pb::EnumNumber(n) => json!(n),
        Pb::I64(n) => json!(n),
        Pb::U32(n) => json!(n),
        Pb::U64(n) => json!(n),
        Pb::F32(n) => json!(n),
        Pb::F64(n) => json!(n),
        Pb::String(s) => json!(s),
        Pb::Bytes(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
        Pb::Message(m) => message_json(m),
        Pb::List(l) => Value::Array(l.iter().map(value_json).collect()),
        Pb::Map(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                };
                out.insert(key, value_json(v));
            }
            Value::Object(out)
        }
    }
}

/// `metav1.Time` (RFC 3339 in seconds) or `metav1.MicroTime` (microseconds); the zero time
/// (0 seconds) is `null`, as Go's `Time.MarshalJSON` prints `time.Time{}`'s Unix zero.
fn time(seconds: i64, nanos: i64, micro: bool) -> Value {
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let nanos = i32::try_from(nanos).unwrap_or(0);
    let Ok(t) = jiff::Timestamp::new(seconds, nanos) else {
        return Value::Null;
    };
    let fmt = if micro {
        "%Y-%m-%dT%H:%M:%S.%6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    json!(t.strftime(fmt).to_string())
}

/// Go's `time.Duration.String()` of a nanosecond count (`1m30s`, `500ms`, `0s`).
fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    if u < 1_000_000_000 {
        let (unit, div) = match u {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", trim_fraction(u, div));
    }
    let h = u / 3_600_000_000_000;
    let m = (u / 60_000_000_000) % 60;
    let s = trim_fraction(u % 60_000_000_000, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{sign}{s}s"),
        (0, m) => format!("{sign}{m}m{s}s"),
        (h, m) => format!("{sign}{h}h{m}m{s}s"),
    }
}

/// `n / div` with its fraction, trailing zeros trimmed (`1500, 1000` → `1.5`).
fn trim_fraction(n: u64, div: u64) -> String {
    let whole = n / div;
    let frac = n % div;
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let f = format!("{frac:0width$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    /// Encodes `object` (a message of `desc` built from JSON-like setters) in the envelope.
    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = POOL
            .get_message_by_name("k8s.io.apimachinery.pkg.runtime.Unknown")
            .unwrap();
        let tm_desc = POOL
            .get_message_by_name("k8s.io.apimachinery.pkg.runtime.TypeMeta")
            .unwrap();
        let mut tm = DynamicMessage::new(tm_desc);
        tm.set_field_by_name("apiVersion", Pb::String(api_version.into()));
        tm.set_field_by_name("kind", Pb::String(kind.into()));
        let mut u = DynamicMessage::new(unknown);
        u.set_field_by_name("typeMeta", Pb::Message(tm));
        u.set_field_by_name("raw", Pb::Bytes(raw.into()));
        let mut out = MAGIC.to_vec();
        out.extend(u.encode_to_vec());
        out
    }

    fn msg(name: &str) -> DynamicMessage {
        DynamicMessage::new(POOL.get_message_by_name(name).unwrap())
    }

    #[test]
    fn a_configmap_as_kubectl_create_sends_it() {
        let mut meta = msg("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta");
        meta.set_field_by_name("name", Pb::String("c".into()));
        // gogo writes the non-pointer fields even when empty.
        meta.set_field_by_name("generateName", Pb::String(String::new()));
        meta.set_field_by_name(
            "creationTimestamp",
            Pb::Message(msg("k8s.io.apimachinery.pkg.apis.meta.v1.Time")),
        );
        let mut cm = msg("k8s.io.api.core.v1.ConfigMap");
        cm.set_field_by_name("metadata", Pb::Message(meta));
        let mut data = std::collections::HashMap::new();
        data.insert(MapKey::String("a".into()), Pb::String("b".into()));
        cm.set_field_by_name("data", Pb::Map(data));
        cm.set_field_by_name("immutable", Pb::Bool(false));
        let body = envelope("v1", "ConfigMap", cm.encode_to_vec());
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                   "data": {"a": "b"}, "immutable": false})
        );
        assert_eq!(cm.descriptor().full_name(), "k8s.io.api.core.v1.ConfigMap");
    }

    #[test]
    fn special_messages_print_as_their_json_forms() {
        let mut ios = msg("k8s.io.apimachinery.pkg.util.intstr.IntOrString");
        ios.set_field_by_name("type", Pb::I64(1));
        ios.set_field_by_name("strVal", Pb::String("25%".into()));
        assert_eq!(message_json(&ios), json!("25%"));
        let mut ios = msg("k8s.io.apimachinery.pkg.util.intstr.IntOrString");
        ios.set_field_by_name("intVal", Pb::I32(8080));
        assert_eq!(message_json(&ios), json!(8080));
        let mut t = msg("k8s.io.apimachinery.pkg.apis.meta.v1.Time");
        t.set_field_by_name("seconds", Pb::I64(1_700_000_000));
        assert_eq!(message_json(&t), json!("2023-11-14T22:13:20Z"));
        let mut t = msg("k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime");
        t.set_field_by_name("seconds", Pb::I64(1_700_000_000));
        t.set_field_by_name("nanos", Pb::I32(123_456_789));
        assert_eq!(message_json(&t), json!("2023-11-14T22:13:20.123456Z"));
        let mut q = msg("k8s.io.apimachinery.pkg.api.resource.Quantity");
        q.set_field_by_name("string", Pb::String("100m".into()));
        assert_eq!(message_json(&q), json!("100m"));
        assert_eq!(go_duration(90_000_000_000), "1m30s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(500_000_000), "500ms");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
    }

    #[test]
    fn a_pointer_fields_zero_is_kept_and_a_plain_fields_zero_dropped() {
        let mut spec = msg("k8s.io.api.core.v1.PodSpec");
        spec.set_field_by_name("terminationGracePeriodSeconds", Pb::I64(0));
        spec.set_field_by_name("restartPolicy", Pb::String(String::new()));
        spec.set_field_by_name("hostNetwork", Pb::Bool(false));
        let mut c = msg("k8s.io.api.core.v1.Container");
        c.set_field_by_name("name", Pb::String("app".into()));
        c.set_field_by_name("stdin", Pb::Bool(false));
        spec.set_field_by_name("containers", Pb::List(vec![Pb::Message(c)]));
        assert_eq!(
            message_json(&spec),
            json!({"terminationGracePeriodSeconds": 0, "containers": [{"name": "app"}]})
        );
    }

    #[test]
    fn secret_bytes_are_base64() {
        let mut s = msg("k8s.io.api.core.v1.Secret");
        let mut data = std::collections::HashMap::new();
        data.insert(MapKey::String("k".into()), Pb::Bytes(b"v1".to_vec().into()));
        s.set_field_by_name("data", Pb::Map(data));
        let body = envelope("v1", "Secret", s.encode_to_vec());
        assert_eq!(decode(&body).unwrap()["data"], json!({"k": "djE="}));
    }

    #[test]
    fn bad_bodies_get_400_in_upstreams_words() {
        let e = decode(b"{}").unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        );
        assert_eq!(decode(b"").unwrap_err().message, "empty data");
        assert_eq!(decode(b"k8s\0").unwrap_err().message, "empty body");
        let e = decode(b"k8s\0\x0a\xff\xff").unwrap_err();
        assert_eq!(e.code, 400);
        let e = decode(&envelope("v1", "Nope", vec![])).unwrap_err();
        assert_eq!(
            e.message,
            "no kind \"Nope\" is registered for version \"v1\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
        );
        // Truncated inner message: a clean 400, no panic.
        let e = decode(&envelope("v1", "ConfigMap", vec![0x0a, 0x10, 0x01])).unwrap_err();
        assert_eq!(e.code, 400);
    }
}
