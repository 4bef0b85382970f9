//! What `validateContainerCommon` checks of every container (regular, init, sidecar): its name,
//! image, termination message policy, ports, env, envFrom, volume mounts, image pull policy
//! and resources; the host ports of a pod's containers (`AccumulateUniqueHostPorts`); and a
//! Pod's images without surrounding whitespace (`validateContainersOnlyForPod`).
//!
//! Upstream: `pkg/apis/core/validation/validation.go` (1.36 tree): `validateContainerCommon`,
//! `validateContainerPorts`, `ValidateEnv`, `validateEnvVarValueFrom`,
//! `validateObjectFieldSelector`, `ValidateEnvFrom`, `ValidateVolumeMounts`,
//! `validateLocalDescendingPath`, `validateMountPropagation`, `validatePullPolicy`,
//! `validateResourceRequirements`, `validateContainerResourceName`, `validateResourceName`,
//! `ValidateResourceQuantityValue`; `pkg/apis/core/helper/helpers.go` (`IsNativeResource`,
//! `IsOvercommitAllowed`, `IsExtendedResourceName`, `IsStandardContainerResourceName`). The
//! paths are upstream's, quirks included (`volumeMounts.subPath` without the mount's index).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::{with, Checker, FieldErrorKind, Seg};
use crate::manifest::excerpt::quote;
use crate::plan::WorkloadKind;
use crate::rules::quantity::{canonical, Quantity};
use crate::rules::validation::format;

/// `validateContainerCommon` for the container at `base`; `volumes` are the names of the pod's
/// volumes that passed their own checks (a mount of a refused volume is `Not found` too, as
/// upstream's volume map holds only valid ones).
pub(super) fn common(
    c: &mut Checker<'_, '_, '_>,
    ctr: &Container,
    base: &[Seg<'_>],
    volumes: &HashSet<String>,
) {
    let at = |k| with(base, &[Seg::Key(k)]);
    if ctr.name.is_empty() {
        c.required(&at("name"), "");
    } else {
        c.invalid_each(&at("name"), &ctr.name, format::is_dns1123_label(&ctr.name));
    }
    let image = ctr.image.as_deref().unwrap_or("");
    if image.is_empty() {
        c.required(&at("image"), "");
    }
    if let Some(p) = ctr.termination_message_policy.as_deref() {
        if !matches!(p, "File" | "FallbackToLogsOnError" | "") {
            c.not_supported(
                &at("terminationMessagePolicy"),
                p,
                &["File", "FallbackToLogsOnError"],
            );
        }
    }
    ports(c, ctr, base);
    env(c, ctr.env.as_deref().unwrap_or_default(), base);
    env_from(c, ctr, base);
    volume_mounts(c, ctr, base, volumes);
    if let Some(p) = ctr.image_pull_policy.as_deref() {
        // An empty policy is defaulted (`Always` for `:latest`, else `IfNotPresent`).
        if !matches!(p, "Always" | "IfNotPresent" | "Never" | "") {
            c.not_supported(
                &at("imagePullPolicy"),
                p,
                &["Always", "IfNotPresent", "Never"],
            );
        }
    }
    resources(c, ctr, base);
    if c.kind == WorkloadKind::Pod && image.trim() != image {
        c.invalid(
            &at("image"),
            quote(image),
            "must not have leading or trailing whitespace",
        );
    }
}

/// `validateContainerPorts`: names (`IsValidPortName`, unique within the container), a
/// `containerPort` in 1..65535 (required), a `hostPort` in range when set, and the protocol
/// (`TCP` by default; `SCTP`, `TCP` or `UDP`).
fn ports(c: &mut Checker<'_, '_, '_>, ctr: &Container, base: &[Seg<'_>]) {
    let mut names = HashSet::new();
    for (i, p) in ctr.ports.iter().flatten().enumerate() {
        let at = |k| with(base, &[Seg::Key("ports"), Seg::Index(i), Seg::Key(k)]);
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = format::is_valid_port_name(name);
            if !msgs.is_empty() {
                c.invalid_each(&at("name"), name, msgs);
            } else if !names.insert(name) {
                c.push(
                    &at("name"),
                    FieldErrorKind::Duplicate { value: quote(name) },
                );
            }
        }
        if p.container_port == 0 {
            c.required(&at("containerPort"), "");
        } else {
            for m in format::is_valid_port_num(i64::from(p.container_port)) {
                c.invalid(&at("containerPort"), p.container_port.to_string(), m);
            }
        }
        if let Some(h) = p.host_port.filter(|h| *h != 0) {
            for m in format::is_valid_port_num(i64::from(h)) {
                c.invalid(&at("hostPort"), h.to_string(), m);
            }
        }
        if let Some(proto) = p.protocol.as_deref() {
            if !matches!(proto, "TCP" | "UDP" | "SCTP" | "") {
                c.not_supported(&at("protocol"), proto, &["SCTP", "TCP", "UDP"]);
            }
        }
    }
}

/// `AccumulateUniqueHostPorts` over `containers` (the list at `key`, its first one at index
/// `first`): a `hostPort` used twice with the same protocol and host IP is a `Duplicate`,
/// reported as `PROTOCOL/HOSTIP/PORT`. With `hostNetwork`, an unset `hostPort` is the
/// `containerPort` (`SetDefaults_PodSpec`'s `defaultHostNetworkPorts`).
pub(super) fn host_port_conflicts(
    c: &mut Checker<'_, '_, '_>,
    containers: &[Container],
    key: &'static str,
    first: usize,
    spec: &PodSpec,
) {
    let host_network = spec.host_network.unwrap_or(false);
    let mut seen = HashSet::new();
    for (ci, ctr) in containers.iter().enumerate() {
        for (pi, p) in ctr.ports.iter().flatten().enumerate() {
            let port = match p.host_port.filter(|h| *h != 0) {
                Some(h) => h,
                None if host_network => p.container_port,
                None => continue,
            };
            if port == 0 {
                continue;
            }
            let proto = p
                .protocol
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or("TCP");
            let key_str = format!("{proto}/{}/{port}", p.host_ip.as_deref().unwrap_or(""));
            if !seen.insert(key_str.clone()) {
                c.push(
                    &[
                        Seg::Key(key),
                        Seg::Index(first + ci),
                        Seg::Key("ports"),
                        Seg::Index(pi),
                        Seg::Key("hostPort"),
                    ],
                    FieldErrorKind::Duplicate {
                        value: quote(&key_str),
                    },
                );
            }
        }
    }
}

/// Environment variable names as the release checks them: `IsRelaxedEnvVarName` from 1.32
/// (`RelaxedEnvironmentVariableValidation`), `IsEnvVarName` before.
fn env_name_messages(c: &Checker<'_, '_, '_>, name: &str) -> Vec<String> {
    if c.version.relaxed_environment_variable_validation() {
        format::is_relaxed_env_var_name(name)
    } else {
        format::is_env_var_name(name)
    }
}

/// The `fieldRef.fieldPath`s of env vars (`validEnvDownwardAPIFieldPathExpressions`), sorted as
/// `sets.List` sorts them.
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// `ValidateEnv`: each name required and valid; `valueFrom` with exactly one source and no
/// `value` beside it; a `fieldRef`'s `fieldPath` one the kubelet can fill.
fn env(c: &mut Checker<'_, '_, '_>, vars: &[EnvVar], base: &[Seg<'_>]) {
    for (i, ev) in vars.iter().enumerate() {
        let at = |more: &[Seg<'static>]| {
            let mut v = with(base, &[Seg::Key("env"), Seg::Index(i)]);
            v.extend_from_slice(more);
            v
        };
        if ev.name.is_empty() {
            c.required(&at(&[Seg::Key("name")]), "");
        } else {
            let msgs = env_name_messages(c, &ev.name);
            c.invalid_each(&at(&[Seg::Key("name")]), &ev.name, msgs);
        }
        let Some(from) = &ev.value_from else {
            continue;
        };
        let vf = at(&[Seg::Key("valueFrom")]);
        let mut sources = 0;
        if let Some(f) = &from.field_ref {
            sources += 1;
            field_ref(
                c,
                &f.field_path,
                &at(&[Seg::Key("valueFrom"), Seg::Key("fieldRef")]),
            );
        }
        sources += usize::from(from.resource_field_ref.is_some())
            + usize::from(from.config_map_key_ref.is_some())
            + usize::from(from.secret_key_ref.is_some())
            + usize::from(from.file_key_ref.is_some());
        if sources == 0 {
            let detail = if c.version.env_files() {
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"
            } else {
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
            };
            c.invalid(&vf, quote(""), detail);
        } else if !ev.value.as_deref().unwrap_or("").is_empty() {
            c.invalid(
                &vf,
                quote(""),
                "may not be specified when `value` is not empty",
            );
        } else if sources > 1 {
            c.invalid(
                &vf,
                quote(""),
                "may not have more than one field specified at a time",
            );
        }
    }
}

/// `validateObjectFieldSelector` for an env var (`apiVersion` defaults to `v1`): a subscript
/// only on `metadata.labels` and `metadata.annotations` (a qualified name), else one of
/// [`ENV_FIELD_PATHS`].
fn field_ref(c: &mut Checker<'_, '_, '_>, path: &str, at: &[Seg<'_>]) {
    if path.is_empty() {
        c.required(&with(at, &[Seg::Key("fieldPath")]), "");
        return;
    }
    // `fieldpath.SplitMaybeSubscriptedPath`: `path['subscript']`.
    let subscripted = path
        .strip_suffix("']")
        .and_then(|p| p.split_once("['"))
        .filter(|(_, s)| !s.is_empty());
    let path = if path == "spec.host" {
        "spec.nodeName"
    } else {
        path
    };
    match subscripted {
        Some(("metadata.annotations", key)) => {
            c.invalid_each(at, key, format::is_qualified_name(&key.to_lowercase()));
        }
        Some(("metadata.labels", key)) => {
            c.invalid_each(at, key, format::is_qualified_name(key));
        }
        Some((p, _)) => c.invalid(at, quote(p), "does not support subscript"),
        None if !ENV_FIELD_PATHS.contains(&path) => {
            c.not_supported(&with(at, &[Seg::Key("fieldPath")]), path, ENV_FIELD_PATHS);
        }
        None => {}
    }
}

/// `ValidateEnvFrom`: a valid `prefix`, exactly one of `configMapRef` and `secretRef`, whose
/// name is a DNS-1123 subdomain (checked as a prefix, as upstream does).
fn env_from(c: &mut Checker<'_, '_, '_>, ctr: &Container, base: &[Seg<'_>]) {
    let list = with(base, &[Seg::Key("envFrom")]);
    for (i, ef) in ctr.env_from.iter().flatten().enumerate() {
        let at = |k| with(base, &[Seg::Key("envFrom"), Seg::Index(i), Seg::Key(k)]);
        if let Some(p) = ef.prefix.as_deref().filter(|p| !p.is_empty()) {
            let msgs = env_name_messages(c, p);
            c.invalid_each(&at("prefix"), p, msgs);
        }
        let mut sources = 0;
        for (name, key) in [
            (
                ef.config_map_ref.as_ref().map(|r| r.name.as_str()),
                "configMapRef",
            ),
            (ef.secret_ref.as_ref().map(|r| r.name.as_str()), "secretRef"),
        ] {
            let Some(name) = name else { continue };
            sources += 1;
            let segs = with(&at(key), &[Seg::Key("name")]);
            if name.is_empty() {
                c.required(&segs, "");
            } else {
                let msgs = format::NameRule::Subdomain.check(name, true);
                c.invalid_each(&segs, name, msgs);
            }
        }
        if sources == 0 {
            c.invalid(
                &list,
                quote(""),
                "must specify one of: `configMapRef` or `secretRef`",
            );
        } else if sources > 1 {
            c.invalid(
                &list,
                quote(""),
                "may not have more than one field specified at a time",
            );
        }
    }
}

/// `ValidateVolumeMounts`: a name of a valid volume (`Not found`), a `mountPath` (unique in
/// the container), a `subPath` and `subPathExpr` that are relative and do not climb (`..`),
/// not both, and a known `mountPropagation` (`Bidirectional` only for privileged containers).
/// A relative `mountPath` is accepted, as upstream accepts it: the kubelet makes it absolute.
fn volume_mounts(
    c: &mut Checker<'_, '_, '_>,
    ctr: &Container,
    base: &[Seg<'_>],
    volumes: &HashSet<String>,
) {
    let mut paths = HashSet::new();
    let list = with(base, &[Seg::Key("volumeMounts")]);
    for (i, m) in ctr.volume_mounts.iter().flatten().enumerate() {
        let at = |k| {
            with(
                base,
                &[Seg::Key("volumeMounts"), Seg::Index(i), Seg::Key(k)],
            )
        };
        // Upstream reports these under `volumeMounts.<field>`, without the index.
        let unindexed = |k| with(&list, &[Seg::Key(k)]);
        if m.name.is_empty() {
            c.required(&at("name"), "");
        }
        if !volumes.contains(&m.name) {
            c.push(
                &at("name"),
                FieldErrorKind::NotFound {
                    value: quote(&m.name),
                },
            );
        }
        if m.mount_path.is_empty() {
            c.required(&at("mountPath"), "");
        }
        if !paths.insert(m.mount_path.as_str()) {
            c.invalid(&at("mountPath"), quote(&m.mount_path), "must be unique");
        }
        let sub_path = m.sub_path.as_deref().unwrap_or("");
        if !sub_path.is_empty() {
            local_descending_path(c, sub_path, &at("subPath"), &unindexed("subPath"));
        }
        if let Some(expr) = m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            if !sub_path.is_empty() {
                c.invalid(
                    &at("subPathExpr"),
                    quote(expr),
                    "subPathExpr and subPath are mutually exclusive",
                );
            }
            local_descending_path(c, expr, &at("subPathExpr"), &unindexed("subPathExpr"));
        }
        if let Some(p) = m.mount_propagation.as_deref() {
            let (pos, path) = (at("mountPropagation"), unindexed("mountPropagation"));
            if !matches!(p, "Bidirectional" | "HostToContainer" | "None") {
                c.push_as(
                    &pos,
                    &path,
                    FieldErrorKind::NotSupported {
                        value: quote(p),
                        supported: ["Bidirectional", "HostToContainer", "None"]
                            .map(String::from)
                            .to_vec(),
                    },
                );
            }
            let privileged = ctr
                .security_context
                .as_ref()
                .and_then(|s| s.privileged)
                .unwrap_or(false);
            if p == "Bidirectional" && !privileged {
                c.push_as(
                    &pos,
                    &path,
                    FieldErrorKind::Forbidden {
                        detail:
                            "Bidirectional mount propagation is available only to privileged containers"
                                .into(),
                    },
                );
            }
        }
    }
}

/// `validateLocalDescendingPath`: not absolute (`must be a relative path`) and without a `..`
/// element (`must not contain '..'`), placed at `pos`, reported under `path`.
pub(super) fn local_descending_path(
    c: &mut Checker<'_, '_, '_>,
    target: &str,
    pos: &[Seg<'_>],
    path: &[Seg<'_>],
) {
    let invalid = |detail: &str| FieldErrorKind::Invalid {
        value: quote(target),
        detail: detail.into(),
    };
    if target.starts_with('/') {
        c.push_as(pos, path, invalid("must be a relative path"));
    }
    no_backsteps(c, target, pos, path);
}

/// `validatePathNoBacksteps`: one error for any `..` element.
pub(super) fn no_backsteps(
    c: &mut Checker<'_, '_, '_>,
    target: &str,
    pos: &[Seg<'_>],
    path: &[Seg<'_>],
) {
    if target.split('/').any(|e| e == "..") {
        c.push_as(
            pos,
            path,
            FieldErrorKind::Invalid {
                value: quote(target),
                detail: "must not contain '..'".into(),
            },
        );
    }
}

/// `IsNativeResource`: no domain, or one under `kubernetes.io/`.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn is_huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `IsExtendedResourceName`: outside `kubernetes.io/`, not `requests.`-prefixed, and a qualified
/// name once prefixed with `requests.`.
fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && format::is_qualified_name(&format!("requests.{name}")).is_empty()
}

/// `standardResources` (`IsStandardResourceName`, hugepages aside).
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// `validateContainerResourceName`: a qualified name; without a domain a standard resource
/// (`must be a standard resource type or fully qualified`) and one a container can ask for
/// (`cpu`, `memory`, `ephemeral-storage`, `hugepages-*`); with one, native or extended.
fn resource_name(c: &mut Checker<'_, '_, '_>, name: &str, at: &[Seg<'_>]) {
    let msgs = format::is_qualified_name(name);
    if !msgs.is_empty() {
        c.invalid_each(at, name, msgs);
        return;
    }
    if !name.contains('/') {
        let quota_huge = is_huge_pages(name) || name.starts_with("requests.hugepages-");
        if !STANDARD_RESOURCES.contains(&name) && !quota_huge {
            c.invalid(
                at,
                quote(name),
                "must be a standard resource type or fully qualified",
            );
            return;
        }
        if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !is_huge_pages(name) {
            c.invalid(
                at,
                quote(name),
                "must be a standard resource for containers",
            );
        }
    } else if !is_native(name) && !is_extended(name) {
        c.invalid(
            at,
            quote(name),
            "doesn't follow extended resource name standard",
        );
    }
}

/// A quantity of `resources`: its parsed value and canonical form, or the error the API
/// server's decoder gives (`quantities must match the regular expression …`), pushed at `at`.
fn quantity(
    c: &mut Checker<'_, '_, '_>,
    q: &ApiQuantity,
    at: &[Seg<'_>],
) -> Option<(Quantity, String)> {
    match (Quantity::parse(&q.0), canonical(&q.0)) {
        (Ok(v), Ok(s)) => Some((v, s)),
        (Err(e), _) | (_, Err(e)) => {
            c.invalid(at, quote(&q.0), e.to_string());
            None
        }
    }
}

/// `ValidateResourceQuantityValue`: not negative; a whole number for extended resources.
fn quantity_value(c: &mut Checker<'_, '_, '_>, name: &str, v: Quantity, s: &str, at: &[Seg<'_>]) {
    if v.is_negative() {
        c.invalid(at, quote(s), "must be greater than or equal to 0");
    }
    if is_extended(name) && v.milli_value() % 1000 != 0 {
        c.invalid(at, quote(s), "must be an integer");
    }
}

/// `validateResourceRequirements` for a container: each limit and request a valid resource
/// name and quantity; a request at most its limit (`must be less than or equal to memory limit
/// of 1Gi`, reported at `resources.requests` with the canonical quantities); hugepages and
/// extended resources (not overcommitable) with a request equal to a limit that must be set;
/// hugepages only beside cpu or memory.
fn resources(c: &mut Checker<'_, '_, '_>, ctr: &Container, base: &[Seg<'_>]) {
    let Some(r) = &ctr.resources else {
        return;
    };
    let res = with(base, &[Seg::Key("resources")]);
    let lim_path = with(&res, &[Seg::Key("limits")]);
    let req_path = with(&res, &[Seg::Key("requests")]);
    let empty = BTreeMap::new();
    let limits = r.limits.as_ref().unwrap_or(&empty);
    let requests = r.requests.as_ref().unwrap_or(&empty);
    let mut parsed_limits = BTreeMap::new();
    let (mut cpu_or_memory, mut huge) = (false, false);
    for (name, q) in limits {
        let at = with(&lim_path, &[Seg::MapKey(name)]);
        resource_name(c, name, &at);
        if let Some((v, s)) = quantity(c, q, &at) {
            quantity_value(c, name, v, &s, &at);
            parsed_limits.insert(name.as_str(), (v, s));
        }
        huge |= is_huge_pages(name);
        cpu_or_memory |= matches!(name.as_str(), "cpu" | "memory");
    }
    for (name, q) in requests {
        let at = with(&req_path, &[Seg::MapKey(name)]);
        resource_name(c, name, &at);
        let Some((v, s)) = quantity(c, q, &at) else {
            continue;
        };
        quantity_value(c, name, v, &s, &at);
        let overcommit = is_native(name) && !is_huge_pages(name);
        match parsed_limits.get(name.as_str()) {
            Some((lv, ls)) if v != *lv && !overcommit => c.push_as(
                &at,
                &req_path,
                FieldErrorKind::Invalid {
                    value: quote(&s),
                    detail: format!("must be equal to {name} limit of {ls}"),
                },
            ),
            Some((lv, ls)) if v > *lv => c.push_as(
                &at,
                &req_path,
                FieldErrorKind::Invalid {
                    value: quote(&s),
                    detail: format!("must be less than or equal to {name} limit of {ls}"),
                },
            ),
            None if !overcommit && !limits.contains_key(name) => c.required(
                &lim_path,
                "Limit must be set for non overcommitable resources",
            ),
            _ => {}
        }
        huge |= is_huge_pages(name);
        cpu_or_memory |= matches!(name.as_str(), "cpu" | "memory");
    }
    if huge && !cpu_or_memory {
        c.forbidden(&res, "HugePages require cpu or memory");
    }
}
