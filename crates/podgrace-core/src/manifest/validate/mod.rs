//! The API server's validation of the pod fields termination depends on, worded as the API
//! server words it (`field.Error` of `k8s.io/apimachinery/pkg/util/validation/field`).
//!
//! Every check runs on the typed spec after upstream defaulting would have applied (TGPS 30,
//! probe defaults, restartPolicy `Always`, imagePullPolicy, protocol `TCP`,
//! terminationMessagePolicy `File`), exactly as the API server validates defaulted objects.
//!
//! One module per part of `ValidatePod`: this one the object's metadata and the pod spec's
//! shape, `containers` what `validateContainerCommon` checks of each container, `volumes`
//! `ValidateVolumes`, `handlers` lifecycle handlers, probes and the stop signal, `warnings`
//! what the API server accepts with a `Warning` header (`GetWarningsForPod`). The API server
//! of `podgrace serve` validates pods with the same code (through the manifest loader).

mod containers;
mod handlers;
mod volumes;
mod warnings;

use std::collections::HashSet;

use std::fmt;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub(crate) use warnings::pod_warnings;

use super::excerpt::quote;
use super::tree::{Node, Pos};
use crate::plan::WorkloadKind;
use crate::rules::validation::format::NameRule;
use crate::KubeVersion;

/// The body of an upstream `field.Error` (`ErrorBody()`), without the field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Invalid value: VALUE: DETAIL` (`field.Invalid`); `value` is rendered as Go's `%v`
    /// (numbers bare, strings quoted, a long string cut, as `excerpt::quote` does).
    Invalid {
        /// The rejected value, rendered as Go's `%v`.
        value: String,
        /// Why it is rejected, in the API server's words.
        detail: String,
    },
    /// `Required value[: DETAIL]` (`field.Required`).
    Required {
        /// What is required, in the API server's words; may be empty.
        detail: String,
    },
    /// `Forbidden: DETAIL` (`field.Forbidden`).
    Forbidden {
        /// Why it is forbidden, in the API server's words.
        detail: String,
    },
    /// `Unsupported value: VALUE: supported values: "A", "B"` (`field.NotSupported`).
    NotSupported {
        /// The rejected value, quoted as Go's `%q`.
        value: String,
        /// The values the field accepts, in the API server's order.
        supported: Vec<String>,
    },
    /// `Duplicate value: VALUE` (`field.Duplicate`).
    Duplicate {
        /// The repeated value, rendered as Go's `%v`.
        value: String,
    },
    /// `Not found: VALUE` (`field.NotFound`): a reference to something the object does not
    /// have (a volumeMount's volume).
    NotFound {
        /// The missing name, quoted as Go's `%q`.
        value: String,
    },
}

impl fmt::Display for FieldErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldErrorKind::Invalid { value, detail } => {
                write!(f, "Invalid value: {value}")?;
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
            FieldErrorKind::Required { detail } => {
                f.write_str("Required value")?;
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
            FieldErrorKind::Forbidden { detail } => write!(f, "Forbidden: {detail}"),
            FieldErrorKind::NotSupported { value, supported } => {
                let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
                write!(
                    f,
                    "Unsupported value: {value}: supported values: {}",
                    list.join(", ")
                )
            }
            FieldErrorKind::Duplicate { value } => write!(f, "Duplicate value: {value}"),
            FieldErrorKind::NotFound { value } => write!(f, "Not found: {value}"),
        }
    }
}

/// One segment of a field path below the pod spec.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seg<'s> {
    Key(&'s str),
    Index(usize),
    /// A key of a free-form map, rendered as `field.Path.Key` renders it (`limits[memory]`).
    MapKey(&'s str),
}

/// A validation failure: path from the object root, the position of the closest node that
/// exists in the input, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub path: String,
    pub pos: Pos,
    pub kind: FieldErrorKind,
}

/// Where the pod spec (or the part of a document checked) sits: its node (if written) and its
/// path from the object root.
pub(crate) struct SpecAt<'n, 'a> {
    pub node: Option<&'n Node<'a>>,
    /// Position used when `node` is absent (the object).
    pub fallback: Pos,
    /// Path segments from the object root to the pod spec (`spec.template.spec`).
    pub prefix: &'static [&'static str],
}

impl<'n, 'a> SpecAt<'n, 'a> {
    /// The node at `segs` below the pod spec, if written.
    pub fn node_at(&self, segs: &[Seg<'_>]) -> Option<&'n Node<'a>> {
        let mut node = self.node;
        for s in segs {
            node = match s {
                Seg::Key(k) | Seg::MapKey(k) => node.and_then(|n| n.get(k)),
                Seg::Index(i) => node.and_then(|n| n.index(*i)),
            };
        }
        node
    }

    /// Renders `prefix + segs` and finds the deepest existing node along it.
    pub fn locate(&self, segs: &[Seg<'_>]) -> (String, Pos) {
        let mut path = String::new();
        for p in self.prefix {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(p);
        }
        let mut node = self.node;
        let mut pos = node.map_or(self.fallback, |n| n.pos);
        for s in segs {
            match s {
                Seg::Key(k) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                    node = node.and_then(|n| n.get(k));
                }
                Seg::Index(i) => {
                    path.push_str(&format!("[{i}]"));
                    node = node.and_then(|n| n.index(*i));
                }
                Seg::MapKey(k) => {
                    path.push_str(&format!("[{k}]"));
                    node = node.and_then(|n| n.get(k));
                }
            }
            if let Some(n) = node {
                pos = n.pos;
            }
        }
        (path, pos)
    }
}

pub(crate) struct Checker<'c, 'n, 'a> {
    at: &'c SpecAt<'n, 'a>,
    version: KubeVersion,
    kind: WorkloadKind,
    errors: Vec<FieldError>,
}

impl Checker<'_, '_, '_> {
    fn push(&mut self, segs: &[Seg<'_>], kind: FieldErrorKind) {
        let (path, pos) = self.at.locate(segs);
        self.errors.push(FieldError { path, pos, kind });
    }

    /// An error placed at `segs` but reported under the path `path_segs`, where upstream's path
    /// differs from the field's (`volumeMounts.subPath` without the index, `cephFS` for the
    /// `cephfs` key).
    fn push_as(&mut self, segs: &[Seg<'_>], path_segs: &[Seg<'_>], kind: FieldErrorKind) {
        let (_, pos) = self.at.locate(segs);
        let (path, _) = self.at.locate(path_segs);
        self.errors.push(FieldError { path, pos, kind });
    }

    fn required(&mut self, segs: &[Seg<'_>], detail: &str) {
        self.push(
            segs,
            FieldErrorKind::Required {
                detail: detail.into(),
            },
        );
    }

    fn invalid(&mut self, segs: &[Seg<'_>], value: String, detail: impl Into<String>) {
        self.push(
            segs,
            FieldErrorKind::Invalid {
                value,
                detail: detail.into(),
            },
        );
    }

    fn forbidden(&mut self, segs: &[Seg<'_>], detail: impl Into<String>) {
        self.push(
            segs,
            FieldErrorKind::Forbidden {
                detail: detail.into(),
            },
        );
    }

    fn not_supported(&mut self, segs: &[Seg<'_>], value: &str, supported: &[&str]) {
        self.push(
            segs,
            FieldErrorKind::NotSupported {
                value: quote(value),
                supported: supported.iter().map(|s| s.to_string()).collect(),
            },
        );
    }

    /// One `Invalid value` per message of a format check (`ValidateDNS1123Label` …).
    fn invalid_each(&mut self, segs: &[Seg<'_>], value: &str, messages: Vec<String>) {
        for m in messages {
            self.invalid(segs, quote(value), m);
        }
    }
}

fn with<'s>(base: &[Seg<'s>], more: &[Seg<'s>]) -> Vec<Seg<'s>> {
    let mut v = Vec::with_capacity(base.len() + more.len());
    v.extend_from_slice(base);
    v.extend_from_slice(more);
    v
}

/// How `kind`'s objects must be named (`ValidatePodName`, `ValidateDeploymentName`,
/// `ValidateStatefulSetName` …).
fn name_rule(kind: WorkloadKind) -> NameRule {
    match kind {
        WorkloadKind::StatefulSet => NameRule::Label,
        _ => NameRule::Subdomain,
    }
}

/// `ValidateObjectMeta` of a workload's own metadata (`at` is the document with `prefix`
/// `["metadata"]`): `generateName` as a prefix and `name` by the kind's rule, `namespace` a
/// DNS-1123 label; a CronJob's name at most 52 characters (`ValidateCronJobCreate`: its Jobs
/// append 11). A missing name is reported by the loader before this runs.
///
/// Upstream: `staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go`
/// `ValidateObjectMetaAccessor`, `pkg/apis/apps/validation`, `pkg/apis/batch/validation`.
pub(crate) fn object_meta(
    meta: &ObjectMeta,
    kind: WorkloadKind,
    at: &SpecAt<'_, '_>,
) -> Vec<FieldError> {
    let mut c = Checker {
        at,
        version: KubeVersion::default(),
        kind,
        errors: Vec::new(),
    };
    let rule = name_rule(kind);
    if let Some(g) = meta.generate_name.as_deref().filter(|g| !g.is_empty()) {
        c.invalid_each(&[Seg::Key("generateName")], g, rule.check(g, true));
    }
    if let Some(n) = meta.name.as_deref().filter(|n| !n.is_empty()) {
        c.invalid_each(&[Seg::Key("name")], n, rule.check(n, false));
        if kind == WorkloadKind::CronJob && n.len() > 52 {
            c.invalid(
                &[Seg::Key("name")],
                quote(n),
                "must be no more than 52 characters",
            );
        }
    }
    if let Some(ns) = meta.namespace.as_deref().filter(|n| !n.is_empty()) {
        c.invalid_each(
            &[Seg::Key("namespace")],
            ns,
            NameRule::Label.check(ns, false),
        );
    }
    c.errors
}

/// Validates a pod spec (after defaulting) as the API server would for `kind`, in upstream's
/// order: volumes, regular containers (and their hostPort conflicts), init containers, the
/// restart policy. `claim_volumes` are a StatefulSet's volumeClaimTemplates, volumes of its
/// pods that replace template volumes of the same name (`ValidateStatefulSetSpec`).
///
/// Upstream: `ValidatePodSpec`, `ValidateVolumes`, `validateContainers`,
/// `validateInitContainers`, `validateContainerCommon`, `validateContainersOnlyForPod`
/// (`pkg/apis/core/validation/validation.go`, 1.36 tree) and `ValidateJobSpec`'s restartPolicy
/// rule (`pkg/apis/batch/validation/validation.go`).
pub(crate) fn pod_spec(
    spec: &PodSpec,
    kind: WorkloadKind,
    at: &SpecAt<'_, '_>,
    version: KubeVersion,
    claim_volumes: &[String],
) -> Vec<FieldError> {
    let mut c = Checker {
        at,
        version,
        kind,
        errors: Vec::new(),
    };
    let grace = spec.termination_grace_period_seconds.unwrap_or(30);
    let volumes = volumes::volumes(
        &mut c,
        spec.volumes.as_deref().unwrap_or_default(),
        claim_volumes,
    );
    if spec.containers.is_empty() {
        c.required(&[Seg::Key("containers")], "");
    }
    let mut names: HashSet<&str> = HashSet::new();
    for (i, ctr) in spec.containers.iter().enumerate() {
        let base = [Seg::Key("containers"), Seg::Index(i)];
        containers::common(&mut c, ctr, &base, &volumes);
        if !names.insert(&ctr.name) {
            c.push(
                &with(&base, &[Seg::Key("name")]),
                FieldErrorKind::Duplicate {
                    value: quote(&ctr.name),
                },
            );
        }
        behaviour(&mut c, ctr, &base, grace, spec, Role::Main);
    }
    containers::host_port_conflicts(&mut c, &spec.containers, "containers", 0, spec);
    let init = spec.init_containers.as_deref().unwrap_or_default();
    for (i, ctr) in init.iter().enumerate() {
        let base = [Seg::Key("initContainers"), Seg::Index(i)];
        containers::common(&mut c, ctr, &base, &volumes);
        let sidecar = ctr.restart_policy.as_deref() == Some("Always");
        if names.contains(ctr.name.as_str()) {
            c.push(
                &with(&base, &[Seg::Key("name")]),
                FieldErrorKind::Duplicate {
                    value: quote(&ctr.name),
                },
            );
        } else if !ctr.name.is_empty() {
            names.insert(&ctr.name);
        }
        // Init containers run one by one: their host ports conflict only within one.
        containers::host_port_conflicts(
            &mut c,
            std::slice::from_ref(ctr),
            "initContainers",
            i,
            spec,
        );
        let role = if sidecar { Role::Sidecar } else { Role::Init };
        behaviour(&mut c, ctr, &base, grace, spec, role);
    }
    restart_policy(&mut c, spec, kind);
    c.errors
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Init,
    Sidecar,
    Main,
}

/// `ValidatePodSpec` restartPolicy (`validateRestartPolicy`): one of Always, OnFailure, Never;
/// `ValidateJobSpec`: a Job's template must use OnFailure or Never (the pod default `Always` is
/// rejected, so Job templates must set it explicitly).
fn restart_policy(c: &mut Checker<'_, '_, '_>, spec: &PodSpec, kind: WorkloadKind) {
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let segs = [Seg::Key("restartPolicy")];
    if !matches!(policy, "Always" | "OnFailure" | "Never") {
        c.not_supported(&segs, policy, &["Always", "Never", "OnFailure"]);
        return;
    }
    if matches!(kind, WorkloadKind::Job | WorkloadKind::CronJob) && policy == "Always" {
        c.not_supported(&segs, policy, &["OnFailure", "Never"]);
    }
    // `ValidatePodTemplateSpecForReplicaSet`, `ValidateStatefulSetSpec`,
    // `ValidateDaemonSetSpec`, `ValidateReplicationControllerSpec`: controllers that keep their
    // pods running accept only `Always`.
    let keeps_running = matches!(
        kind,
        WorkloadKind::Deployment
            | WorkloadKind::ReplicaSet
            | WorkloadKind::StatefulSet
            | WorkloadKind::DaemonSet
            | WorkloadKind::ReplicationController
    );
    if keeps_running && policy != "Always" {
        c.not_supported(&segs, policy, &["Always"]);
    }
}

/// What a container does, checked by role: the container's `restartPolicy`
/// (`validateInitContainerRestartPolicy`; `may not be set for non-init containers`), native
/// sidecars on releases before 1.29 (podgrace's own refusal), lifecycle and probes only on
/// regular containers and native sidecars (`validateInitContainers`), `validateLifecycle`,
/// probes and `validateContainerStopSignal`.
fn behaviour(
    c: &mut Checker<'_, '_, '_>,
    ctr: &Container,
    base: &[Seg<'_>],
    grace: i64,
    spec: &PodSpec,
    role: Role,
) {
    if role == Role::Sidecar && !c.version.sidecar_containers() {
        let v = c.version;
        c.forbidden(
            &with(base, &[Seg::Key("restartPolicy")]),
            format!("native sidecars need Kubernetes 1.29 or newer (SidecarContainers: alpha in 1.28, beta and on by default in 1.29); on Kubernetes {v} this init container would never finish and the pod would not start"),
        );
    }
    if let Some(policy) = ctr.restart_policy.as_deref() {
        if role == Role::Main {
            c.forbidden(
                &with(base, &[Seg::Key("restartPolicy")]),
                "may not be set for non-init containers",
            );
        } else if policy != "Always" {
            c.not_supported(
                &with(base, &[Seg::Key("restartPolicy")]),
                policy,
                &["Always"],
            );
        }
    }
    if role == Role::Init {
        let detail = "may not be set for init containers without restartPolicy=Always";
        for (set, key) in [
            (ctr.lifecycle.is_some(), "lifecycle"),
            (ctr.liveness_probe.is_some(), "livenessProbe"),
            (ctr.readiness_probe.is_some(), "readinessProbe"),
            (ctr.startup_probe.is_some(), "startupProbe"),
        ] {
            if set {
                c.forbidden(&with(base, &[Seg::Key(key)]), detail);
            }
        }
        return;
    }
    if let Some(lc) = &ctr.lifecycle {
        if let Some(h) = &lc.post_start {
            handlers::lifecycle_handler(
                c,
                h,
                &with(base, &[Seg::Key("lifecycle"), Seg::Key("postStart")]),
                grace,
            );
        }
        if let Some(h) = &lc.pre_stop {
            handlers::lifecycle_handler(
                c,
                h,
                &with(base, &[Seg::Key("lifecycle"), Seg::Key("preStop")]),
                grace,
            );
        }
        let segs = with(base, &[Seg::Key("lifecycle"), Seg::Key("stopSignal")]);
        if let (Some(_), false) = (&lc.stop_signal, c.version.container_stop_signals()) {
            let v = c.version;
            c.forbidden(
                &segs,
                format!("lifecycle.stopSignal needs Kubernetes 1.33 or newer (ContainerStopSignals, KEP-4960); Kubernetes {v} does not have the field"),
            );
        } else if let Some(sig) = &lc.stop_signal {
            handlers::stop_signal(c, sig, spec, &segs);
        }
    }
    for (probe, key) in [
        (&ctr.liveness_probe, "livenessProbe"),
        (&ctr.readiness_probe, "readinessProbe"),
        (&ctr.startup_probe, "startupProbe"),
    ] {
        if let Some(p) = probe {
            handlers::probe(c, p, &with(base, &[Seg::Key(key)]), key);
        }
    }
}
