//! One document into [`Object`]s: kind dispatch, typed deserialization, validation, and the
//! conversion into [`PodPlan`] with upstream defaults (`pkg/apis/core/v1/defaults.go`:
//! `SetDefaults_PodSpec`, `SetDefaults_Probe`, `SetDefaults_HTTPGetAction`,
//! `SetDefaults_ContainerPort`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, HTTPGetAction, LifecycleHandler, Pod, PodSpec, PodTemplateSpec, Probe,
    ReplicationController, Secret, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::de::{self, Ctx, DeError, IssueKind};
use super::tree::{Node, Pos, Value};
use super::validate::{self, FieldErrorKind, SpecAt};
use super::{LoadOptions, ManifestError, ManifestErrorKind, Object, ObjectBody};
use crate::plan;
use crate::plan::{
    ContainerPlan, ContainerPort, ContainerRole, EnvFrom, Handler, HttpGet, PodPlan, PortRef,
    ProbeAction, RestartPolicy, SourceSpan, Volume, VolumeMount, VolumeSource, WorkloadKind,
};
use crate::rules::qos;

/// Upstream `DefaultTerminationGracePeriodSeconds`, seconds.
const DEFAULT_TGPS: i64 = 30;

/// The kinds podgrace reads, with the apiVersion the API server serves them under.
const KNOWN_KINDS: &[(&str, &str)] = &[
    ("v1", "Pod"),
    ("v1", "ReplicationController"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("policy/v1", "PodDisruptionBudget"),
];

pub(crate) struct Loader<'f> {
    pub file: &'f str,
    pub options: &'f LoadOptions,
    /// The API server's warnings for the objects loaded ([`super::ManifestWarning`]).
    pub warnings: std::cell::RefCell<Vec<super::ManifestWarning>>,
}

/// What a document's `apiVersion`/`kind` pair is.
enum Kind {
    Workload(WorkloadKind),
    Service,
    ConfigMap,
    Secret,
    Pdb,
    List,
    Other,
}

impl Loader<'_> {
    fn span(&self, pos: Pos, path: String) -> SourceSpan {
        SourceSpan {
            file: self.file.to_string(),
            line: pos.line as usize,
            column: pos.col as usize,
            path,
        }
    }

    fn error(&self, pos: Pos, path: impl Into<String>, kind: ManifestErrorKind) -> ManifestError {
        ManifestError {
            span: self.span(pos, path.into()),
            kind,
            object: None,
            object_span: None,
        }
    }

    /// Loads one document (an object or a `List`) into `out`; problems go to `errors`.
    pub fn document(&self, doc: &Node<'_>, out: &mut Vec<Object>, errors: &mut Vec<ManifestError>) {
        let Value::Map(_) = &doc.value else {
            errors.push(self.error(
                doc.pos,
                "",
                ManifestErrorKind::NotAnObject(format!(
                    "expected a Kubernetes object (a mapping), found {}",
                    doc.describe()
                )),
            ));
            return;
        };
        let mut type_meta = |key: &str| -> Option<String> {
            match doc.get(key) {
                Some(Node {
                    value: Value::Str(s),
                    ..
                }) if !s.is_empty() => Some(s.to_string()),
                Some(n) => {
                    errors.push(self.error(
                        n.pos,
                        key,
                        ManifestErrorKind::NotAnObject(format!(
                            "Required value: must be a non-empty string, found {}",
                            n.describe()
                        )),
                    ));
                    None
                }
                None => {
                    errors.push(self.error(
                        doc.pos,
                        key,
                        ManifestErrorKind::NotAnObject(
                            "Required value: every object needs apiVersion and kind".into(),
                        ),
                    ));
                    None
                }
            }
        };
        let (Some(api_version), Some(kind)) = (type_meta("apiVersion"), type_meta("kind")) else {
            return;
        };
        let version = self.options.kube_version;
        let unsupported = |hint: &str| ManifestErrorKind::UnsupportedVersion {
            kind: kind.clone(),
            api_version: api_version.clone(),
            hint: Some(hint.to_string()),
        };
        let k = match (api_version.as_str(), kind.as_str()) {
            ("v1", "Pod") => Kind::Workload(WorkloadKind::Pod),
            ("v1", "ReplicationController") => Kind::Workload(WorkloadKind::ReplicationController),
            ("apps/v1", "Deployment") => Kind::Workload(WorkloadKind::Deployment),
            ("apps/v1", "StatefulSet") => Kind::Workload(WorkloadKind::StatefulSet),
            ("apps/v1", "DaemonSet") => Kind::Workload(WorkloadKind::DaemonSet),
            ("apps/v1", "ReplicaSet") => Kind::Workload(WorkloadKind::ReplicaSet),
            ("batch/v1", "Job") => Kind::Workload(WorkloadKind::Job),
            ("batch/v1", "CronJob") => Kind::Workload(WorkloadKind::CronJob),
            ("batch/v1beta1", "CronJob") if version.serves_v1beta1_cronjob_and_pdb() => {
                Kind::Workload(WorkloadKind::CronJob)
            }
            ("v1", "Service") => Kind::Service,
            ("v1", "ConfigMap") => Kind::ConfigMap,
            ("v1", "Secret") => Kind::Secret,
            ("policy/v1", "PodDisruptionBudget") => Kind::Pdb,
            ("policy/v1beta1", "PodDisruptionBudget")
                if version.serves_v1beta1_cronjob_and_pdb() =>
            {
                Kind::Pdb
            }
            ("v1", "List") => Kind::List,
            // `kubectl get -o yaml` of several objects can also give typed lists (PodList, ...).
            (_, k) if k.ends_with("List") && k.len() > 4 && doc.get("items").is_some() => {
                Kind::List
            }
            (
                "extensions/v1beta1" | "apps/v1beta1" | "apps/v1beta2",
                "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet",
            ) => {
                let pos = doc.get("apiVersion").map_or(doc.pos, |n| n.pos);
                errors.push(self.error(
                    pos,
                    "apiVersion",
                    unsupported("removed in Kubernetes 1.16; use apps/v1"),
                ));
                return;
            }
            ("batch/v1beta1" | "batch/v2alpha1", "CronJob")
            | ("policy/v1beta1", "PodDisruptionBudget") => {
                let pos = doc.get("apiVersion").map_or(doc.pos, |n| n.pos);
                let hint = if kind == "CronJob" {
                    "removed in Kubernetes 1.25; use batch/v1"
                } else {
                    "removed in Kubernetes 1.25; use policy/v1"
                };
                errors.push(self.error(pos, "apiVersion", unsupported(hint)));
                return;
            }
            (av, k) => {
                // A kind podgrace reads, under the wrong group or with the wrong case, is what
                // kubectl reports as "no matches for kind".
                if let Some((want_av, want_k)) = KNOWN_KINDS
                    .iter()
                    .find(|(_, known)| known.eq_ignore_ascii_case(k))
                    .filter(|(known_av, known)| (*known_av, *known) != (av, k))
                {
                    let pos = doc.get("kind").map_or(doc.pos, |n| n.pos);
                    let hint = format!("did you mean apiVersion {want_av} and kind {want_k}?");
                    errors.push(self.error(pos, "kind", unsupported(&hint)));
                    return;
                }
                Kind::Other
            }
        };

        match k {
            Kind::List => self.list(doc, out, errors),
            Kind::Other => out.push(self.object(doc, kind, api_version, ObjectBody::Other)),
            Kind::Service => {
                if let Some(s) = self.typed::<Service>(doc, errors) {
                    out.push(self.object(doc, kind, api_version, ObjectBody::Service(Box::new(s))));
                }
            }
            Kind::ConfigMap => {
                if let Some(c) = self.typed::<ConfigMap>(doc, errors) {
                    let data = c.data.unwrap_or_default();
                    out.push(self.object(doc, kind, api_version, ObjectBody::EnvSource(data)));
                }
            }
            Kind::Secret => {
                if let Some(sec) = self.typed::<Secret>(doc, errors) {
                    // `stringData` is written over `data`, as the API server merges them.
                    let mut data: BTreeMap<String, String> = sec
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                        .collect();
                    data.extend(sec.string_data.unwrap_or_default());
                    out.push(self.object(doc, kind, api_version, ObjectBody::EnvSource(data)));
                }
            }
            Kind::Pdb => {
                if let Some(p) = self.typed::<PodDisruptionBudget>(doc, errors) {
                    out.push(self.object(
                        doc,
                        kind,
                        api_version,
                        ObjectBody::PodDisruptionBudget(Box::new(p)),
                    ));
                }
            }
            Kind::Workload(w) => {
                if let Some(plan) = self.workload(doc, w, errors) {
                    out.push(self.object(
                        doc,
                        kind,
                        api_version,
                        ObjectBody::Workload(Box::new(plan)),
                    ));
                }
            }
        }
    }

    /// `kind: List` (or a typed list such as `PodList`): each of `items` is loaded as a
    /// document of its own.
    fn list(&self, doc: &Node<'_>, out: &mut Vec<Object>, errors: &mut Vec<ManifestError>) {
        match doc.get("items").map(|n| &n.value) {
            Some(Value::Seq(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let first = errors.len();
                    self.document(item, out, errors);
                    // Paths inside an item start at the List's root, as kubectl reports them.
                    for e in &mut errors[first..] {
                        e.span.path = if e.span.path.is_empty() {
                            format!("items[{i}]")
                        } else {
                            format!("items[{i}].{}", e.span.path)
                        };
                    }
                }
            }
            Some(Value::Null) | None => {}
            Some(_) => {
                let pos = doc.get("items").map_or(doc.pos, |n| n.pos);
                errors.push(self.error(
                    pos,
                    "items",
                    ManifestErrorKind::Type("invalid type: expected a sequence".into()),
                ));
            }
        }
    }

    fn object(
        &self,
        doc: &Node<'_>,
        kind: String,
        api_version: String,
        body: ObjectBody,
    ) -> Object {
        let meta = doc.get("metadata");
        let name = meta
            .and_then(|m| {
                m.get("name")
                    .and_then(Node::as_str)
                    .or_else(|| m.get("generateName").and_then(Node::as_str))
            })
            .unwrap_or_default()
            .to_string();
        let namespace = meta
            .and_then(|m| m.get("namespace"))
            .and_then(Node::as_str)
            .map(str::to_string);
        Object {
            kind,
            api_version,
            name,
            namespace,
            span: self.span(doc.pos, String::new()),
            body,
        }
    }

    /// Deserializes `T` from the document; type errors, unknown and duplicate fields go to
    /// `errors` (and give `None`).
    pub(crate) fn typed<T: serde::de::DeserializeOwned>(
        &self,
        doc: &Node<'_>,
        errors: &mut Vec<ManifestError>,
    ) -> Option<T> {
        let ctx = Ctx::default();
        let result = de::from_node::<T>(doc, &ctx);
        let before = errors.len();
        for issue in ctx.issues.into_inner() {
            let kind = match issue.kind {
                IssueKind::Unknown { field, hint } => {
                    ManifestErrorKind::UnknownField { field, hint }
                }
                IssueKind::Duplicate { field } => ManifestErrorKind::DuplicateField { field },
            };
            errors.push(self.error(issue.pos, issue.path, kind));
        }
        match result {
            Ok(v) if errors.len() == before => Some(v),
            Ok(_) => None,
            // A `deny_unknown_fields` type also fails on a key already reported (with its path
            // and a hint) as an unknown field: one error for it is enough.
            Err(e) if errors.len() > before && e.message.starts_with("unknown field `") => None,
            Err(e) => {
                errors.push(self.de_error(doc, e));
                None
            }
        }
    }

    /// Turns a deserialization error into a located error; `missing field `x`` becomes the
    /// API server's `x: Required value`.
    fn de_error(&self, doc: &Node<'_>, e: DeError) -> ManifestError {
        let (pos, path) = e.at.unwrap_or((doc.pos, String::new()));
        if let Some(field) = e
            .message
            .strip_prefix("missing field `")
            .and_then(|s| s.strip_suffix('`'))
        {
            let path = if path.is_empty() {
                field.to_string()
            } else {
                format!("{path}.{field}")
            };
            return self.error(
                pos,
                path,
                ManifestErrorKind::Field(FieldErrorKind::Required {
                    detail: String::new(),
                }),
            );
        }
        self.error(pos, path, ManifestErrorKind::Type(e.message))
    }

    fn required(&self, doc: &Node<'_>, path: &str, errors: &mut Vec<ManifestError>) {
        errors.push(self.error(
            doc.pos,
            path,
            ManifestErrorKind::Field(FieldErrorKind::Required {
                detail: String::new(),
            }),
        ));
    }

    /// A Pod or workload: typed, validated, converted.
    fn workload(
        &self,
        doc: &Node<'_>,
        kind: WorkloadKind,
        errors: &mut Vec<ManifestError>,
    ) -> Option<PodPlan> {
        let mut claim_volumes: Vec<String> = Vec::new();
        let (meta, template, (replicas, min_ready_seconds), prefix): WorkloadParts = match kind {
            WorkloadKind::Pod => {
                let p: Pod = self.typed(doc, errors)?;
                let spec = p.spec;
                let tpl = spec.map(|s| PodTemplateSpec {
                    metadata: Some(p.metadata.clone()),
                    spec: Some(s),
                });
                (p.metadata, tpl, (None, None), &["spec"])
            }
            WorkloadKind::Deployment => {
                let d: Deployment = self.typed(doc, errors)?;
                (
                    d.metadata,
                    Some(d.spec.template),
                    (Some(d.spec.replicas.unwrap_or(1)), d.spec.min_ready_seconds),
                    &["spec", "template", "spec"],
                )
            }
            WorkloadKind::StatefulSet => {
                let d: StatefulSet = self.typed(doc, errors)?;
                // Each volumeClaimTemplate is a volume of the pods (a claim of that name), as
                // `ValidateStatefulSetSpec` adds it before validating the template.
                claim_volumes = d
                    .spec
                    .volume_claim_templates
                    .iter()
                    .flatten()
                    .filter_map(|t| t.metadata.name.clone())
                    .collect();
                (
                    d.metadata,
                    Some(d.spec.template),
                    (Some(d.spec.replicas.unwrap_or(1)), d.spec.min_ready_seconds),
                    &["spec", "template", "spec"],
                )
            }
            WorkloadKind::DaemonSet => {
                let d: DaemonSet = self.typed(doc, errors)?;
                (
                    d.metadata,
                    Some(d.spec.template),
                    (None, None),
                    &["spec", "template", "spec"],
                )
            }
            WorkloadKind::ReplicaSet => {
                let d: ReplicaSet = self.typed(doc, errors)?;
                (
                    d.metadata,
                    d.spec.template,
                    (Some(d.spec.replicas.unwrap_or(1)), d.spec.min_ready_seconds),
                    &["spec", "template", "spec"],
                )
            }
            WorkloadKind::ReplicationController => {
                let d: ReplicationController = self.typed(doc, errors)?;
                let (t, r) = d.spec.map(|s| (s.template, s.replicas)).unzip();
                (
                    d.metadata,
                    t.flatten(),
                    (Some(r.flatten().unwrap_or(1)), None),
                    &["spec", "template", "spec"],
                )
            }
            WorkloadKind::Job => {
                let d: Job = self.typed(doc, errors)?;
                (
                    d.metadata,
                    d.spec.map(|s| s.template),
                    (None, None),
                    &["spec", "template", "spec"],
                )
            }
            WorkloadKind::CronJob => {
                let d: CronJob = self.typed(doc, errors)?;
                let t = d.spec.job_template.spec.map(|s| s.template);
                (
                    d.metadata,
                    t,
                    (None, None),
                    &["spec", "jobTemplate", "spec", "template", "spec"],
                )
            }
        };
        if meta.name.as_deref().unwrap_or_default().is_empty()
            && meta.generate_name.as_deref().unwrap_or_default().is_empty()
        {
            let pos = doc.get("metadata").map_or(doc.pos, |n| n.pos);
            errors.push(self.error(
                pos,
                "metadata.name",
                ManifestErrorKind::Field(FieldErrorKind::Required {
                    detail: "name or generateName is required".into(),
                }),
            ));
            return None;
        }
        let meta_at = SpecAt {
            node: doc.get("metadata"),
            fallback: doc.pos,
            prefix: &["metadata"],
        };
        let meta_errors = validate::object_meta(&meta, kind, &meta_at);
        let Some(template) = template else {
            let path = if kind == WorkloadKind::CronJob {
                "spec.jobTemplate.spec"
            } else {
                "spec"
            };
            self.required(doc, path, errors);
            return None;
        };
        let Some(spec) = template.spec else {
            let path = prefix[..prefix.len() - 1].join(".");
            self.required(doc, &path, errors);
            return None;
        };
        let mut node = Some(doc);
        for p in prefix {
            node = node.and_then(|n| n.get(p));
        }
        let at = SpecAt {
            node,
            fallback: doc.pos,
            prefix,
        };
        let mut field_errors = meta_errors;
        field_errors.extend(validate::pod_spec(
            &spec,
            kind,
            &at,
            self.options.kube_version,
            &claim_volumes,
        ));
        if !field_errors.is_empty() {
            let object = super::ObjectRef {
                kind: kind.as_str().to_string(),
                namespace: meta.namespace.clone(),
                name: meta.name.or(meta.generate_name).unwrap_or_default(),
            };
            for e in field_errors {
                errors.push(ManifestError {
                    object: Some(object.clone()),
                    object_span: Some(self.span(doc.pos, String::new())),
                    ..self.error(e.pos, e.path, ManifestErrorKind::Field(e.kind))
                });
            }
            return None;
        }
        let object = super::ObjectRef {
            kind: kind.as_str().to_string(),
            namespace: meta.namespace.clone(),
            name: meta
                .name
                .clone()
                .or(meta.generate_name.clone())
                .unwrap_or_default(),
        };
        self.warnings
            .borrow_mut()
            .extend(validate::pod_warnings(&spec, &at).into_iter().map(|w| {
                super::ManifestWarning {
                    span: self.span(w.pos, w.path),
                    message: w.message,
                    object: object.clone(),
                    object_span: self.span(doc.pos, String::new()),
                }
            }));
        let labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        let annotations = template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default();
        let name = meta.name.or(meta.generate_name).unwrap_or_default();
        Some(self.plan(
            spec,
            &at,
            PlanHead {
                name,
                namespace: meta.namespace,
                kind,
                labels,
                annotations,
                replicas,
                min_ready_seconds: min_ready_seconds.map_or(0, i64::from),
                span: self.span(doc.pos, String::new()),
            },
        ))
    }

    fn plan(&self, spec: PodSpec, at: &SpecAt<'_, '_>, head: PlanHead) -> PodPlan {
        let tgps = spec.termination_grace_period_seconds;
        let resources: Vec<qos::ContainerResources> = spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter())
            .map(|c| {
                let quantities = |m: Option<&BTreeMap<String, Quantity>>| {
                    m.map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
                        .unwrap_or_default()
                };
                let r = c.resources.as_ref();
                qos::ContainerResources {
                    requests: quantities(r.and_then(|r| r.requests.as_ref())),
                    limits: quantities(r.and_then(|r| r.limits.as_ref())),
                }
            })
            .collect();
        let qos_class = qos::pod_qos(&resources);
        let restart_policy = match spec.restart_policy.as_deref() {
            Some("OnFailure") => RestartPolicy::OnFailure,
            Some("Never") => RestartPolicy::Never,
            _ => RestartPolicy::Always,
        };
        let init_containers = spec
            .init_containers
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let role = if c.restart_policy.as_deref() == Some("Always") {
                    ContainerRole::Sidecar
                } else {
                    ContainerRole::Init
                };
                let segs = [
                    validate::Seg::Key("initContainers"),
                    validate::Seg::Index(i),
                ];
                self.container(c, role, i, at.locate(&segs), at.node_at(&segs))
            })
            .collect();
        let containers = spec
            .containers
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let segs = [validate::Seg::Key("containers"), validate::Seg::Index(i)];
                self.container(
                    c,
                    ContainerRole::Main,
                    i,
                    at.locate(&segs),
                    at.node_at(&segs),
                )
            })
            .collect();
        PodPlan {
            name: head.name,
            namespace: head.namespace,
            kind: head.kind,
            labels: head.labels,
            annotations: head.annotations,
            // Negative TGPS is accepted by validation and treated as 1 (delete path since 1.22,
            // defaulting since 1.27: kubernetes/kubernetes#98866, #115606).
            termination_grace_period_seconds: tgps
                .map_or(DEFAULT_TGPS, |t| if t < 0 { 1 } else { t }),
            termination_grace_period_defaulted: tgps.is_none(),
            termination_grace_period_written: tgps,
            priority: spec.priority,
            priority_class_name: spec.priority_class_name,
            restart_policy,
            host_network: spec.host_network.unwrap_or(false),
            share_process_namespace: spec.share_process_namespace.unwrap_or(false),
            qos_class,
            volumes: spec
                .volumes
                .unwrap_or_default()
                .into_iter()
                .map(volume)
                .collect(),
            os: spec.os.map(|o| o.name),
            replicas: head.replicas,
            min_ready_seconds: head.min_ready_seconds,
            init_containers,
            containers,
            span: head.span,
            spec_path: match head.kind {
                WorkloadKind::Pod => "spec",
                WorkloadKind::CronJob => "spec.jobTemplate.spec.template.spec",
                _ => "spec.template.spec",
            },
            field_positions: positions(at.node, POD_FIELDS),
        }
    }

    fn container(
        &self,
        c: Container,
        role: ContainerRole,
        index: usize,
        (path, pos): (String, Pos),
        node: Option<&Node<'_>>,
    ) -> ContainerPlan {
        let lifecycle = c.lifecycle.unwrap_or_default();
        ContainerPlan {
            name: c.name,
            role,
            index,
            image: c.image,
            image_pull_policy: c.image_pull_policy,
            command: c.command.unwrap_or_default(),
            args: c.args.unwrap_or_default(),
            working_dir: c.working_dir,
            env_field_refs: c
                .env
                .iter()
                .flatten()
                .filter_map(|e| {
                    let f = e.value_from.as_ref()?.field_ref.as_ref()?;
                    Some((e.name.clone(), f.field_path.clone()))
                })
                .collect(),
            env: c
                .env
                .unwrap_or_default()
                .into_iter()
                .map(|e| {
                    (
                        e.name,
                        if e.value_from.is_some() {
                            None
                        } else {
                            Some(e.value.unwrap_or_default())
                        },
                    )
                })
                .collect(),
            env_from: c
                .env_from
                .unwrap_or_default()
                .into_iter()
                .filter_map(|e| {
                    let prefix = e.prefix.unwrap_or_default();
                    if let Some(r) = e.config_map_ref {
                        Some(EnvFrom {
                            kind: "ConfigMap",
                            name: r.name,
                            prefix,
                            optional: r.optional.unwrap_or(false),
                        })
                    } else {
                        e.secret_ref.map(|r| EnvFrom {
                            kind: "Secret",
                            name: r.name,
                            prefix,
                            optional: r.optional.unwrap_or(false),
                        })
                    }
                })
                .collect(),
            ports: c
                .ports
                .unwrap_or_default()
                .into_iter()
                .map(|p| ContainerPort {
                    name: p.name,
                    container_port: p.container_port,
                    protocol: p.protocol.unwrap_or_else(|| "TCP".into()),
                    host_port: p.host_port.unwrap_or(0),
                    host_ip: p.host_ip.unwrap_or_default(),
                })
                .collect(),
            volume_mounts: c
                .volume_mounts
                .unwrap_or_default()
                .into_iter()
                .map(|m| VolumeMount {
                    name: m.name,
                    mount_path: m.mount_path,
                    read_only: m.read_only.unwrap_or(false),
                    sub_path: m.sub_path.filter(|s| !s.is_empty()),
                })
                .collect(),
            post_start: lifecycle.post_start.and_then(handler),
            pre_stop: lifecycle.pre_stop.and_then(handler),
            stop_signal: lifecycle.stop_signal,
            image_config_stop_signal: None,
            liveness_probe: c.liveness_probe.and_then(probe),
            readiness_probe: c.readiness_probe.and_then(probe),
            startup_probe: c.startup_probe.and_then(probe),
            resources: {
                let quantities = |m: Option<&BTreeMap<String, Quantity>>| {
                    m.map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
                        .unwrap_or_default()
                };
                let r = c.resources.as_ref();
                qos::ContainerResources {
                    requests: quantities(r.and_then(|r| r.requests.as_ref())),
                    limits: quantities(r.and_then(|r| r.limits.as_ref())),
                }
            },
            span: self.span(pos, path),
            field_positions: positions(node, CONTAINER_FIELDS),
        }
    }
}

/// A pod volume as podgrace's kubelet provides it.
fn volume(v: k8s_openapi::api::core::v1::Volume) -> Volume {
    let items = |items: Option<Vec<k8s_openapi::api::core::v1::KeyToPath>>| {
        items
            .unwrap_or_default()
            .into_iter()
            .map(|i| (i.key, i.path))
            .collect()
    };
    let source = if v.empty_dir.is_some() {
        VolumeSource::EmptyDir
    } else if let Some(h) = v.host_path {
        VolumeSource::HostPath {
            path: h.path,
            path_type: h.type_.filter(|t| !t.is_empty()),
        }
    } else if let Some(c) = v.config_map {
        VolumeSource::Data {
            kind: "ConfigMap",
            name: c.name,
            optional: c.optional.unwrap_or(false),
            items: items(c.items),
            default_mode: c.default_mode,
            data: None,
        }
    } else if let Some(s) = v.secret {
        VolumeSource::Data {
            kind: "Secret",
            name: s.secret_name.unwrap_or_default(),
            optional: s.optional.unwrap_or(false),
            items: items(s.items),
            default_mode: s.default_mode,
            data: None,
        }
    } else {
        let kind = serde_json::to_value(&v)
            .ok()
            .and_then(|j| {
                j.as_object()
                    .and_then(|o| o.keys().find(|k| *k != "name").cloned())
            })
            .unwrap_or_else(|| "unknown".into());
        VolumeSource::Other { kind }
    };
    Volume {
        name: v.name,
        source,
    }
}

/// Pod-spec fields whose positions are kept for lint.
const POD_FIELDS: &[&str] = &["terminationGracePeriodSeconds", "volumes"];

/// Container fields whose positions are kept for lint (paths below the container).
const CONTAINER_FIELDS: &[&str] = &[
    "image",
    "command",
    "args",
    "ports",
    "env",
    "lifecycle.preStop",
    "lifecycle.preStop.httpGet.port",
    "lifecycle.stopSignal",
    "livenessProbe",
    "livenessProbe.terminationGracePeriodSeconds",
    "readinessProbe",
    "startupProbe",
    "startupProbe.terminationGracePeriodSeconds",
];

/// Positions of the dotted `keys` present below `node` (1-based line and column).
fn positions(
    node: Option<&Node<'_>>,
    keys: &[&'static str],
) -> BTreeMap<&'static str, (usize, usize)> {
    let mut out = BTreeMap::new();
    let Some(node) = node else {
        return out;
    };
    if !matches!(node.value, Value::Map(_)) {
        return out;
    }
    for key in keys {
        let (parents, last) = key.rsplit_once('.').unwrap_or(("", key));
        let mut n = Some(node);
        for part in parents.split('.').filter(|p| !p.is_empty()) {
            n = n.and_then(|n| n.get(part));
        }
        if let Some(e) = n.and_then(|n| n.entry(last)) {
            out.insert(*key, (e.key_pos.line as usize, e.key_pos.col as usize));
        }
    }
    out
}

/// A workload's metadata, pod template, `(replicas, minReadySeconds)` where it has them, and
/// the field path to its pod spec.
type WorkloadParts = (
    ObjectMeta,
    Option<PodTemplateSpec>,
    (Option<i32>, Option<i32>),
    &'static [&'static str],
);

struct PlanHead {
    name: String,
    namespace: Option<String>,
    kind: WorkloadKind,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    replicas: Option<i32>,
    min_ready_seconds: i64,
    span: SourceSpan,
}

fn port_ref(p: IntOrString) -> PortRef {
    match p {
        IntOrString::Int(n) => PortRef::Number(n),
        IntOrString::String(s) => PortRef::Name(s),
    }
}

/// `SetDefaults_HTTPGetAction`: path `/`, scheme `HTTP`.
fn http_get(g: HTTPGetAction) -> HttpGet {
    HttpGet {
        host: g.host.filter(|h| !h.is_empty()),
        port: port_ref(g.port),
        path: g
            .path
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".into()),
        scheme: g
            .scheme
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "HTTP".into()),
        headers: g
            .http_headers
            .unwrap_or_default()
            .into_iter()
            .map(|h| (h.name, h.value))
            .collect(),
    }
}

/// A validated handler (exactly one action) into the plan's form.
fn handler(h: LifecycleHandler) -> Option<Handler> {
    if let Some(e) = h.exec {
        return Some(Handler::Exec {
            command: e.command.unwrap_or_default(),
        });
    }
    if let Some(g) = h.http_get {
        return Some(Handler::HttpGet(http_get(g)));
    }
    if let Some(s) = h.sleep {
        return Some(Handler::Sleep { seconds: s.seconds });
    }
    h.tcp_socket.map(|t| Handler::TcpSocket {
        port: port_ref(t.port),
    })
}

/// `SetDefaults_Probe`: zero (unset) timeout 1, period 10, success 1, failure 3.
fn probe(p: Probe) -> Option<plan::Probe> {
    let action = if let Some(e) = p.exec {
        ProbeAction::Exec {
            command: e.command.unwrap_or_default(),
        }
    } else if let Some(g) = p.http_get {
        ProbeAction::HttpGet(http_get(g))
    } else if let Some(t) = p.tcp_socket {
        ProbeAction::TcpSocket {
            host: t.host.filter(|h| !h.is_empty()),
            port: port_ref(t.port),
        }
    } else {
        let g = p.grpc?;
        ProbeAction::Grpc {
            port: g.port,
            service: g.service,
        }
    };
    let or = |v: Option<i32>, d: i64| v.filter(|v| *v != 0).map_or(d, i64::from);
    Some(plan::Probe {
        action,
        initial_delay_seconds: p.initial_delay_seconds.map_or(0, i64::from),
        period_seconds: or(p.period_seconds, 10),
        timeout_seconds: or(p.timeout_seconds, 1),
        success_threshold: or(p.success_threshold, 1),
        failure_threshold: or(p.failure_threshold, 3),
        termination_grace_period_seconds: p.termination_grace_period_seconds,
    })
}
