//! What the registry does to an object on its way into the store, per kind: decoding with
//! server-side field validation, defaulting, validation (pods through podgrace-core's manifest
//! loader, so the messages are the ones `explain` and `lint` give), the fields the server
//! owns, and the conversion between `v1` and `events.k8s.io/v1` Events.
//!
//! Pure: time and the node name come in as arguments.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go` and `rest.go`
//! (decoding, `fieldValidation`), `pkg/apis/core/v1/defaults.go` (`SetDefaults_Pod`,
//! `SetDefaults_Container`, `SetDefaults_Probe`, `SetDefaults_Service`, `SetDefaults_Secret`),
//! `pkg/registry/core/pod/strategy.go` (`PrepareForCreate`: status reset to Pending with its
//! QoS class), `plugin/pkg/admission/defaulttolerationseconds` (the 300 s not-ready and
//! unreachable tolerations), `pkg/registry/core/namespace/strategy.go` (the `kubernetes`
//! finalizer, phase Active), `pkg/apis/core/validation/validation.go` (`ValidatePodUpdate`).

use serde_json::{json, Map, Value};

use podgrace_core::manifest::{self, FieldErrorKind, LoadOptions, ManifestErrorKind};
use podgrace_core::KubeVersion;

use crate::meta::{self, NameRule};
use crate::resource::Resource;
use crate::status::{ApiError, Cause};

/// `fieldValidation` of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Unknown or duplicate fields are dropped silently.
    Ignore,
    /// ... and reported in `Warning` headers (the default when the parameter is absent, as
    /// since Kubernetes 1.27).
    #[default]
    Warn,
    /// ... and make the request fail with 400 (kubectl 1.27+ sends it by default).
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter.
    ///
    /// # Errors
    /// 400 with upstream's wording for another value.
    pub fn parse(v: Option<&str>) -> Result<FieldValidation, ApiError> {
        match v {
            None | Some("") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
            ))),
        }
    }
}

/// The k8s-openapi type of a kind, for strict decoding and normalization.
fn normalize<T>(v: Value) -> Result<Value, String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let t: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
    serde_json::to_value(t).map_err(|e| e.to_string())
}

fn normalize_kind(r: &Resource, v: Value) -> Result<Value, String> {
    use k8s_openapi::api::coordination::v1 as coord;
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::events::v1 as events;
    match (r.group, r.kind) {
        ("", "Pod") => normalize::<core::Pod>(v),
        ("", "Namespace") => normalize::<core::Namespace>(v),
        ("", "Node") => normalize::<core::Node>(v),
        ("", "Event") => normalize::<core::Event>(v),
        ("", "ConfigMap") => normalize::<core::ConfigMap>(v),
        ("", "Secret") => normalize::<core::Secret>(v),
        ("", "Service") => normalize::<core::Service>(v),
        ("coordination.k8s.io", "Lease") => normalize::<coord::Lease>(v),
        ("events.k8s.io", "Event") => normalize::<events::Event>(v),
        ("apps", "Deployment") => normalize::<k8s_openapi::api::apps::v1::Deployment>(v),
        ("apps", "ReplicaSet") => normalize::<k8s_openapi::api::apps::v1::ReplicaSet>(v),
        ("policy", "PodDisruptionBudget") => {
            normalize::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(v)
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            normalize::<k8s_openapi::api::discovery::v1::EndpointSlice>(v)
        }
        _ => Ok(v),
    }
}

/// Unknown and duplicate fields of `text` for kind `r` (paths from the object root), through
/// the manifest loader's strict decoding; its validation causes, type errors, and for pods and
/// pod templates the API server's warnings (`GetWarningsForPod`).
fn strict_issues(
    r: &Resource,
    text: &str,
    version: KubeVersion,
) -> (Vec<String>, Vec<Cause>, Vec<String>, Vec<String>) {
    use k8s_openapi::api::coordination::v1 as coord;
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::events::v1 as events;
    let mut warnings = Vec::new();
    let errs = match (r.group, r.kind) {
        ("", "Pod") | ("apps", "Deployment") | ("apps", "ReplicaSet") => {
            let (m, errs) = manifest::load_partial(
                text,
                "request",
                &LoadOptions {
                    kube_version: version,
                },
            );
            // kube-apiserver's `Warning` headers carry the message alone (path first).
            warnings.extend(m.warnings.into_iter().map(|w| w.message));
            (!errs.is_empty()).then_some(manifest::ManifestErrors(errs))
        }
        ("", "Namespace") => manifest::load_typed::<core::Namespace>(text, "request").err(),
        ("", "Node") => manifest::load_typed::<core::Node>(text, "request").err(),
        ("", "Event") => manifest::load_typed::<core::Event>(text, "request").err(),
        ("", "ConfigMap") => manifest::load_typed::<core::ConfigMap>(text, "request").err(),
        ("", "Secret") => manifest::load_typed::<core::Secret>(text, "request").err(),
        ("", "Service") => manifest::load_typed::<core::Service>(text, "request").err(),
        ("coordination.k8s.io", "Lease") => {
            manifest::load_typed::<coord::Lease>(text, "request").err()
        }
        ("events.k8s.io", "Event") => manifest::load_typed::<events::Event>(text, "request").err(),
        ("policy", "PodDisruptionBudget") => manifest::load_typed::<
            k8s_openapi::api::policy::v1::PodDisruptionBudget,
        >(text, "request")
        .err(),
        ("discovery.k8s.io", "EndpointSlice") => {
            manifest::load_typed::<k8s_openapi::api::discovery::v1::EndpointSlice>(text, "request")
                .err()
        }
        _ => None,
    };
    let mut unknown = Vec::new();
    let mut invalid = Vec::new();
    let mut types = Vec::new();
    for e in errs.map(|e| e.0).unwrap_or_default() {
        match e.kind {
            ManifestErrorKind::UnknownField { .. } => {
                unknown.push(format!("unknown field {:?}", e.span.path))
            }
            ManifestErrorKind::DuplicateField { .. } => {
                unknown.push(format!("duplicate field {:?}", e.span.path))
            }
            // The registry checks the name itself, after `generateName` made one
            // (`meta::validate_name`), with the same podgrace-core rules.
            ManifestErrorKind::Field(_)
                if matches!(
                    e.span.path.as_str(),
                    "metadata.name" | "metadata.generateName"
                ) => {}
            ManifestErrorKind::Field(kind) => {
                let reason = match &kind {
                    FieldErrorKind::Invalid { .. } => "FieldValueInvalid",
                    FieldErrorKind::Required { .. } => "FieldValueRequired",
                    FieldErrorKind::Forbidden { .. } => "FieldValueForbidden",
                    FieldErrorKind::NotSupported { .. } => "FieldValueNotSupported",
                    FieldErrorKind::Duplicate { .. } => "FieldValueDuplicate",
                    FieldErrorKind::NotFound { .. } => "FieldValueNotFound",
                };
                invalid.push(Cause {
                    reason: reason.into(),
                    message: kind.to_string(),
                    field: e.span.path.clone(),
                });
            }
            ManifestErrorKind::Type(m) => types.push(if e.span.path.is_empty() {
                m
            } else {
                format!("{}: {m}", e.span.path)
            }),
            // Syntax errors are caught by the JSON parser first; kind errors by the route.
            _ => {}
        }
    }
    (unknown, invalid, types, warnings)
}

/// A decoded request body: the object (unknown fields dropped), the warnings to send, and
/// the validation causes podgrace-core found (for a 422 after defaulting).
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The object as decoded, unknown and duplicate fields dropped.
    pub object: Value,
    /// `Warning` header texts: field validation's `Warn` (`unknown field "spec.foo"`) and a
    /// valid pod's warnings (`spec.containers[0].resources.limits[memory]: fractional byte
    /// value "1m" is invalid, must be an integer`).
    pub warnings: Vec<String>,
    /// The causes of a 422 Invalid that podgrace-core's validation found (field path,
    /// reason, message), answered after defaulting as the registry strategy's `Validate` is.
    pub invalid: Vec<Cause>,
}

/// Decodes a create or update body for `r`, as the handler's decoder does with
/// `fieldValidation`, validating pods as release `version`'s API server does: malformed JSON and type errors are 400; unknown and duplicate fields are
/// 400 under `Strict`, warnings under `Warn`, dropped under `Ignore`.
///
/// # Errors
/// [`ApiError`] 400 with upstream's wording
/// (`Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.x"`).
pub fn decode(
    r: &Resource,
    body: &[u8],
    fv: FieldValidation,
    version: KubeVersion,
) -> Result<Decoded, ApiError> {
    let mut value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "couldn't get version/kind; json parse error: {}",
            json_error(&e, body)
        ))
    })?;
    let Some(map) = value.as_object_mut() else {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: json: cannot unmarshal into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }",
        ));
    };
    let handled = format!(
        "{} in version {:?} cannot be handled as a {}",
        r.kind, r.version, r.kind
    );
    if let Some(av) = map.get("apiVersion").and_then(Value::as_str) {
        if av != r.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                r.api_version()
            )));
        }
    }
    if let Some(k) = map.get("kind").and_then(Value::as_str) {
        if k != r.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                r.kind
            )));
        }
    }
    map.insert("apiVersion".into(), json!(r.api_version()));
    map.insert("kind".into(), json!(r.kind));
    let text = serde_json::to_string(&value).map_err(ApiError::internal)?;
    let (unknown, invalid, types, pod_warnings) = strict_issues(r, &text, version);
    if let Some(t) = types.first() {
        return Err(ApiError::bad_request(format!("{handled}: {t}")));
    }
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        match fv {
            FieldValidation::Strict => {
                return Err(ApiError::bad_request(format!(
                    "{handled}: strict decoding error: {}",
                    unknown.join(", ")
                )));
            }
            FieldValidation::Warn => warnings = unknown,
            FieldValidation::Ignore => {}
        }
    }
    warnings.extend(pod_warnings);
    let object =
        normalize_kind(r, value).map_err(|e| ApiError::bad_request(format!("{handled}: {e}")))?;
    Ok(Decoded {
        object,
        warnings,
        invalid,
    })
}

/// serde_json's message for a body, in Go's words where they differ most visibly.
fn json_error(e: &serde_json::Error, body: &[u8]) -> String {
    if body.iter().all(u8::is_ascii_whitespace) {
        return "unexpected end of JSON input".into();
    }
    e.to_string()
}

/// The name rule of a kind's `metadata.name`.
pub fn name_rule(r: &Resource) -> NameRule {
    match r.plural {
        "namespaces" => NameRule::Label,
        "services" => NameRule::Dns1035,
        _ => NameRule::Subdomain,
    }
}

/// What the registry needs from the caller when it prepares an object.
#[derive(Debug, Clone)]
pub struct Context {
    /// The time stamped on the object (`creationTimestamp`, `deletionTimestamp`).
    pub now: jiff::Timestamp,
    /// The one node every pod is bound to.
    pub node_name: String,
}

/// `BeforeCreate` for every kind: namespace from the URL, name from `generateName`, uid,
/// creationTimestamp; the server-owned fields cleared; then the kind's own preparation and
/// defaulting. Returns the object to store.
///
/// # Errors
/// 400 for a namespace mismatch or a set resourceVersion, 422 for an invalid name or
/// object.
pub fn prepare_create(
    r: &Resource,
    namespace: &str,
    mut decoded: Decoded,
    cx: &Context,
) -> Result<Value, ApiError> {
    let obj = &mut decoded.object;
    {
        let m = meta::meta_mut(obj);
        if r.namespaced {
            match m.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != namespace => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(namespace));
                }
            }
        } else {
            m.remove("namespace");
        }
        if m.get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
        {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let name = m.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            if let Some(g) = m.get("generateName").and_then(Value::as_str) {
                if !g.is_empty() {
                    // names.SimpleNameGenerator: the base is cut to 58 characters.
                    let base: String = g.chars().take(58).collect();
                    let n = format!("{base}{}", meta::name_suffix());
                    m.insert("name".into(), json!(n));
                }
            }
        }
        m.insert("uid".into(), json!(meta::new_uid()));
        m.insert("creationTimestamp".into(), json!(meta::time_string(cx.now)));
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        m.remove("generation");
        m.remove("selfLink");
        m.remove("managedFields");
    }
    let mut causes = meta::validate_name(obj, name_rule(r));
    causes.extend(meta::validate_labels_and_annotations(
        obj.get("metadata").unwrap_or(&Value::Null),
        "metadata",
    ));
    match (r.group, r.kind) {
        ("", "Pod") => {
            default_pod(obj);
            let qos = qos_class(obj);
            obj["status"] = json!({"phase": "Pending", "qosClass": qos});
            if obj
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                // Every pod lands on the one node: bound at creation, as the scheduler's
                // binding does (`assignPod`: nodeName and PodScheduled=True).
                obj["spec"]["nodeName"] = json!(cx.node_name);
                obj["status"]["conditions"] = json!([{
                    "type": "PodScheduled", "status": "True",
                    "lastProbeTime": null, "lastTransitionTime": meta::time_string(cx.now),
                }]);
            }
            causes.extend(decoded.invalid);
        }
        ("", "Namespace") => {
            let n = meta::name(obj).to_string();
            let m = meta::meta_mut(obj);
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(n));
            }
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
        }
        ("", "Secret") => default_secret(obj),
        ("", "Service") => {
            default_service(obj);
            causes.extend(validate_service_node_ports(obj));
        }
        ("", "Event") => {
            if obj.get("involvedObject").is_none() {
                causes.push(Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "involvedObject".into(),
                });
            }
        }
        _ if crate::kinds::handles(r) => {
            causes.extend(crate::kinds::prepare_create(r, obj));
            causes.extend(decoded.invalid);
        }
        _ => causes.extend(decoded.invalid),
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(r, meta::name(obj), causes));
    }
    Ok(decoded.object)
}

/// Sets `k` to `v` unless it is set (and not null).
pub(crate) fn set_default(m: &mut Map<String, Value>, k: &str, v: Value) {
    if m.get(k).is_none_or(Value::is_null) {
        m.insert(k.into(), v);
    }
}

fn default_probe(p: &mut Value) {
    if let Some(m) = p.as_object_mut() {
        set_default(m, "timeoutSeconds", json!(1));
        set_default(m, "periodSeconds", json!(10));
        set_default(m, "successThreshold", json!(1));
        set_default(m, "failureThreshold", json!(3));
        if let Some(h) = m.get_mut("httpGet").and_then(Value::as_object_mut) {
            set_default(h, "path", json!("/"));
            set_default(h, "scheme", json!("HTTP"));
        }
    }
}

fn default_container(c: &mut Value) {
    let Some(m) = c.as_object_mut() else { return };
    set_default(m, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(m, "terminationMessagePolicy", json!("File"));
    set_default(m, "resources", json!({}));
    let image = m.get("image").and_then(Value::as_str).unwrap_or("");
    let last = image.rsplit('/').next().unwrap_or("");
    let tag = last.split_once(':').map(|(_, t)| t);
    let always = !image.contains('@') && matches!(tag, None | Some("latest"));
    set_default(
        m,
        "imagePullPolicy",
        json!(if always { "Always" } else { "IfNotPresent" }),
    );
    if let Some(ports) = m.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = m.get_mut(probe) {
            default_probe(p);
        }
    }
    if let Some(l) = m.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for h in ["preStop", "postStart"] {
            if let Some(g) = l
                .get_mut(h)
                .and_then(|h| h.get_mut("httpGet"))
                .and_then(Value::as_object_mut)
            {
                set_default(g, "path", json!("/"));
                set_default(g, "scheme", json!("HTTP"));
            }
        }
    }
}

/// `SetDefaults_PodSpec` with `SetDefaults_Container` and `SetDefaults_Probe` on the `spec`
/// of `obj` (a pod or a pod template): what templates get too.
pub fn default_pod_spec(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(default_container);
        }
    }
}

/// The value of the built-in PriorityClass `system-node-critical`
/// (`pkg/apis/scheduling/types.go` `SystemCriticalPriority` + 1000, Kubernetes 1.11 to 1.36).
pub const SYSTEM_NODE_CRITICAL_PRIORITY: i64 = 2_000_001_000;
/// The value of the built-in PriorityClass `system-cluster-critical` (`SystemCriticalPriority`).
pub const SYSTEM_CLUSTER_CRITICAL_PRIORITY: i64 = 2_000_000_000;

/// [`default_pod_spec`], `SetDefaults_Pod` and the admission defaults a stock cluster adds to
/// pods (DefaultTolerationSeconds; Priority: the built-in system PriorityClasses' values
/// for `priorityClassName`, else 0, as `plugin/pkg/admission/priority` `admitPod` sets them).
pub fn default_pod(pod: &mut Value) {
    default_pod_spec(pod);
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    // A negative grace period is accepted and stored as 1 (`SetDefaults_Pod`, since 1.22).
    if spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|g| g < 0)
    {
        spec.insert("terminationGracePeriodSeconds".into(), json!(1));
    }
    set_default(spec, "enableServiceLinks", json!(true));
    // The Priority admission plugin: the value of the pod's PriorityClass. The two classes
    // every cluster has are built in; no other PriorityClass exists here, so any other name
    // (and none) keeps the global default, 0.
    let class_value = match spec.get("priorityClassName").and_then(Value::as_str) {
        Some("system-node-critical") => SYSTEM_NODE_CRITICAL_PRIORITY,
        Some("system-cluster-critical") => SYSTEM_CLUSTER_CRITICAL_PRIORITY,
        _ => 0,
    };
    set_default(spec, "priority", json!(class_value));
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if let Some(t) = tolerations.as_array_mut() {
        for key in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            let has = t.iter().any(|x| {
                x.get("key").and_then(Value::as_str) == Some(key)
                    || (x.get("key").is_none()
                        && x.get("operator").and_then(Value::as_str) == Some("Exists"))
            });
            if !has {
                t.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
            }
        }
    }
}

/// `GetPodQOS`: Guaranteed when every container has equal cpu and memory requests and
/// limits, BestEffort when none has any, else Burstable.
pub fn qos_class(pod: &Value) -> &'static str {
    let cs: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| {
            pod.pointer(&format!("/spec/{l}"))
                .and_then(Value::as_array)
                .map(|a| a.iter().collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in cs {
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        if req.is_some_and(|m| !m.is_empty()) || lim.is_some_and(|m| !m.is_empty()) {
            any = true;
        }
        for res in ["cpu", "memory"] {
            let l = lim.and_then(|m| m.get(res));
            let r = req.and_then(|m| m.get(res)).or(l);
            if l.is_none() || r != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn default_secret(s: &mut Value) {
    use base64::Engine;
    let Some(m) = s.as_object_mut() else { return };
    set_default(m, "type", json!("Opaque"));
    if let Some(Value::Object(sd)) = m.remove("stringData") {
        let data = m.entry("data").or_insert_with(|| json!({}));
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                let text = v.as_str().unwrap_or("").to_string();
                d.insert(
                    k,
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
}

fn default_service(s: &mut Value) {
    let Some(spec) = s.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(p, "protocol", json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                set_default(p, "targetPort", port);
            }
        }
    }
}

/// `ValidateService`'s node port rules: no `nodePort` on a ClusterIP Service (`Forbidden: may
/// not be used when `type` is 'ClusterIP'`), none twice for one protocol (`Duplicate value`).
///
/// Upstream: `pkg/apis/core/validation/validation.go` (`ValidateService`), 1.27 to 1.37.
pub fn validate_service_node_ports(svc: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let cluster_ip = svc.pointer("/spec/type").and_then(Value::as_str) == Some("ClusterIP");
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut seen: Vec<(String, i64)> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let np = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if np == 0 {
            continue;
        }
        let field = format!("spec.ports[{i}].nodePort");
        if cluster_ip {
            out.push(Cause {
                reason: "FieldValueForbidden".into(),
                message: "Forbidden: may not be used when `type` is 'ClusterIP'".into(),
                field: field.clone(),
            });
        }
        let proto = p
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or("TCP")
            .to_string();
        if seen.contains(&(proto.clone(), np)) {
            out.push(Cause {
                reason: "FieldValueDuplicate".into(),
                message: format!("Duplicate value: {np}"),
                field,
            });
        }
        seen.push((proto, np));
    }
    out
}

/// `ValidatePodUpdate`'s spec rule: a pod update may change only the container images,
/// `activeDeadlineSeconds`, added tolerations and a negative grace period set to 1.
///
/// # Errors
/// 422 `spec: Forbidden: pod updates may not change fields other than ...`.
pub fn check_pod_update(r: &Resource, old: &Value, new: &Value) -> Result<(), ApiError> {
    let strip = |v: &Value| {
        let mut spec = v.get("spec").cloned().unwrap_or(json!({}));
        for list in ["containers", "initContainers"] {
            if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("image");
                }
            }
        }
        if let Some(m) = spec.as_object_mut() {
            m.remove("activeDeadlineSeconds");
            m.remove("tolerations");
        }
        spec
    };
    if strip(old) == strip(new) {
        return Ok(());
    }
    Err(ApiError::invalid(
        r,
        meta::name(new),
        vec![Cause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".into(),
            field: "spec".into(),
        }],
    ))
}

const EVENT_RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// A stored (core/v1) Event as `events.k8s.io/v1` serves it.
pub fn event_to_events_v1(core: &Value) -> Value {
    let mut out = core.clone();
    if let Some(m) = out.as_object_mut() {
        for (from, to) in EVENT_RENAMES {
            if let Some(v) = m.remove(*from) {
                m.insert((*to).into(), v);
            }
        }
        m.insert("apiVersion".into(), json!("events.k8s.io/v1"));
        m.insert("kind".into(), json!("Event"));
        if m.get("eventTime").is_none_or(Value::is_null) {
            m.insert("eventTime".into(), Value::Null);
        }
    }
    out
}

/// An `events.k8s.io/v1` Event in the stored (core/v1) form.
pub fn event_from_events_v1(v1: &Value) -> Value {
    let mut out = v1.clone();
    if let Some(m) = out.as_object_mut() {
        for (to, from) in EVENT_RENAMES {
            if let Some(v) = m.remove(*from) {
                m.insert((*to).into(), v);
            }
        }
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("kind".into(), json!("Event"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Priority admission plugin's values for the built-in classes; a priority the pod
    /// gives is kept; no class is 0.
    #[test]
    fn system_priority_classes_set_the_pod_priority() {
        let prio = |spec: Value| {
            let mut pod =
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec});
            default_pod(&mut pod);
            pod["spec"]["priority"].clone()
        };
        assert_eq!(
            prio(json!({"priorityClassName": "system-node-critical", "containers": []})),
            json!(2_000_001_000)
        );
        assert_eq!(
            prio(json!({"priorityClassName": "system-cluster-critical", "containers": []})),
            json!(2_000_000_000)
        );
        assert_eq!(prio(json!({"containers": []})), json!(0));
        assert_eq!(prio(json!({"priority": 7, "containers": []})), json!(7));
    }
    use crate::resource::find;

    fn cx() -> Context {
        Context {
            now: "2026-12-01T10:00:00Z".parse().unwrap(),
            node_name: "node".into(),
        }
    }

    #[test]
    fn pods_are_validated_by_core_with_the_api_servers_words() {
        let pods = find("", "v1", "pods").unwrap();
        let body = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"g-sleep-too-long"},
            "spec":{"terminationGracePeriodSeconds":10,"containers":[{"name":"app","image":"x",
            "lifecycle":{"preStop":{"sleep":{"seconds":20}}}}]}}"#;
        let d = decode(pods, body, FieldValidation::Strict, KubeVersion::default()).unwrap();
        let e = prepare_create(pods, "default", d, &cx()).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "Pod \"g-sleep-too-long\" is invalid: spec.containers[0].lifecycle.preStop.sleep: Invalid value: 20: must be non-negative and less than terminationGracePeriodSeconds (10)"
        );
        assert_eq!(
            e.causes[0].field,
            "spec.containers[0].lifecycle.preStop.sleep"
        );
    }

    /// The same checks as `explain`/`lint`/`run` (podgrace-core's loader), as a 422 whose causes
    /// carry kube-apiserver's reasons, fields and messages; a valid pod's warnings become
    /// `Warning` headers.
    #[test]
    fn pods_get_validate_pods_checks_as_causes_and_warnings() {
        let pods = find("", "v1", "pods").unwrap();
        let body = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},
            "spec":{"containers":[{"name":"app","image":"x","imagePullPolicy":"Sometimes",
            "ports":[{"containerPort":70000}],
            "resources":{"requests":{"memory":"2Gi"},"limits":{"memory":"1Gi"}},
            "volumeMounts":[{"name":"data","mountPath":"/data"}]}],
            "volumes":[{"name":"cfg","configMap":{"name":"c","defaultMode":99999}}]}}"#;
        let d = decode(pods, body, FieldValidation::Strict, KubeVersion::default()).unwrap();
        let e = prepare_create(pods, "default", d, &cx()).unwrap_err();
        assert_eq!(e.code, 422);
        let causes: Vec<(&str, &str, &str)> = e
            .causes
            .iter()
            .map(|c| (c.reason.as_str(), c.field.as_str(), c.message.as_str()))
            .collect();
        assert_eq!(
            causes,
            vec![
                ("FieldValueInvalid", "spec.volumes[0].configMap.defaultMode", "Invalid value: 99999: must be a number between 0 and 0777 (octal), both inclusive"),
                ("FieldValueInvalid", "spec.containers[0].ports[0].containerPort", "Invalid value: 70000: must be between 1 and 65535, inclusive"),
                ("FieldValueNotFound", "spec.containers[0].volumeMounts[0].name", "Not found: \"data\""),
                ("FieldValueNotSupported", "spec.containers[0].imagePullPolicy", "Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\""),
                ("FieldValueInvalid", "spec.containers[0].resources.requests", "Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi"),
            ]
        );
        // A name is checked once, by the registry, after generateName.
        let body =
            br#"{"metadata":{"name":"Web_1"},"spec":{"containers":[{"name":"app","image":"x"}]}}"#;
        let d = decode(pods, body, FieldValidation::Strict, KubeVersion::default()).unwrap();
        let e = prepare_create(pods, "default", d, &cx()).unwrap_err();
        assert_eq!(e.causes.len(), 1, "{:?}", e.causes);
        assert_eq!(e.causes[0].field, "metadata.name");
        let body = br#"{"metadata":{"name":"web"},"spec":{"containers":[{"name":"app","image":"x",
            "resources":{"limits":{"memory":"1m"}}}]}}"#;
        let d = decode(pods, body, FieldValidation::Strict, KubeVersion::default()).unwrap();
        assert_eq!(
            d.warnings,
            vec!["spec.containers[0].resources.limits[memory]: fractional byte value \"1m\" is invalid, must be an integer"]
        );
        assert!(prepare_create(pods, "default", d, &cx()).is_ok());
    }

    #[test]
    fn unknown_fields_follow_field_validation() {
        let pods = find("", "v1", "pods").unwrap();
        let body = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},
            "spec":{"terminationGracePeriod":3,"containers":[{"name":"app","image":"x","imagePullPolicyy":"Always"}]}}"#;
        let e = decode(pods, body, FieldValidation::Strict, KubeVersion::default()).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.terminationGracePeriod\", unknown field \"spec.containers[0].imagePullPolicyy\""
        );
        let d = decode(pods, body, FieldValidation::Warn, KubeVersion::default()).unwrap();
        assert_eq!(d.warnings.len(), 2);
        assert!(d.object["spec"].get("terminationGracePeriod").is_none());
        let d = decode(pods, body, FieldValidation::Ignore, KubeVersion::default()).unwrap();
        assert!(d.warnings.is_empty());
        let e = decode(
            pods,
            b"{not json",
            FieldValidation::Strict,
            KubeVersion::default(),
        )
        .unwrap_err();
        assert!(
            e.message
                .starts_with("couldn't get version/kind; json parse error: "),
            "{}",
            e.message
        );
    }

    #[test]
    fn pods_are_defaulted_and_bound() {
        let pods = find("", "v1", "pods").unwrap();
        let body = br#"{"metadata":{"generateName":"web-"},"spec":{"terminationGracePeriodSeconds":-5,
            "containers":[{"name":"app","image":"nginx","readinessProbe":{"httpGet":{"port":80}}}]}}"#;
        let d = decode(pods, body, FieldValidation::Strict, KubeVersion::default()).unwrap();
        let p = prepare_create(pods, "default", d, &cx()).unwrap();
        assert!(meta::name(&p).starts_with("web-") && meta::name(&p).len() == 9);
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 1);
        assert_eq!(p["spec"]["nodeName"], "node");
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            p["spec"]["containers"][0]["readinessProbe"]["periodSeconds"],
            10
        );
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["status"]["qosClass"], "BestEffort");
        assert_eq!(p["metadata"]["namespace"], "default");
        assert_eq!(p["metadata"]["creationTimestamp"], "2026-12-01T10:00:00Z");
    }
}
