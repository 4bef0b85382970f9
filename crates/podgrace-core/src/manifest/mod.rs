//! Manifests: multi-document YAML (or JSON) into `k8s-openapi` types, checked as the API server
//! checks them, converted once into [`PodPlan`]s with upstream defaults applied.
//!
//! Pure code: the caller passes the text and the file name used in messages.
//!
//! Pipeline, one pass per document: `tree` parses it into a spanned value tree (granit-parser,
//! the parser under serde-saphyr); `de` deserializes the typed object straight from that tree,
//! placing type errors at their node and recording unknown or duplicate fields; `validate`
//! mirrors the API server's validation of the fields termination depends on; `convert` applies
//! the defaults and builds the plan.
//!
//! Errors name file, line, column and the kubectl-style field path:
//! `deploy.yaml:14:15: spec.containers[0].lifecycle.preStopp: unknown field "preStopp" (did you mean "preStop"?)`.

mod convert;
mod de;
mod excerpt;
mod tree;
mod validate;

use std::fmt;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use std::collections::BTreeMap;

use crate::plan::{PodPlan, SourceSpan};
use crate::KubeVersion;

pub use tree::MAX_OBJECT_BYTES;
pub use validate::FieldErrorKind;
pub(crate) use validate::Seg;

/// How to load: the Kubernetes release whose API server and defaults are mirrored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// Release whose validation applies (for example, a preStop `sleep.seconds: 0` is valid from
    /// 1.33 on, where `PodLifecycleSleepActionAllowZero` is on by default).
    pub kube_version: KubeVersion,
}

/// All objects of one file, in document order (a `List` is replaced by its items).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Manifest {
    /// The objects, in document order.
    pub objects: Vec<Object>,
    /// What the API server would accept but warn about (its `Warning` headers), in document
    /// order.
    pub warnings: Vec<ManifestWarning>,
}

/// A warning of the API server about an object it accepts (`GetWarningsForPod`: a fractional
/// byte quantity, an env var defined twice, a negative grace period), placed at the field.
///
/// `Display`: `FILE:LINE:COLUMN: MESSAGE`, the message as kube-apiserver words it (it starts
/// with the field path: `spec.containers[0].resources.limits[memory]: fractional byte value
/// "1m" is invalid, must be an integer`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{}:{}: {message}", span.file, span.line, span.column)]
pub struct ManifestWarning {
    /// Where: file, line and column of the field, and its path (which the message repeats).
    pub span: SourceSpan,
    /// The API server's warning text, path first.
    pub message: String,
    /// The object warned about.
    pub object: ObjectRef,
    /// Where that object starts (its first key; `path` empty).
    pub object_span: SourceSpan,
}

impl Manifest {
    /// The pod plans of the file: every Pod and every workload's pod template, in order.
    pub fn pods(&self) -> impl Iterator<Item = &PodPlan> {
        self.objects.iter().filter_map(|o| match &o.body {
            ObjectBody::Workload(plan) => Some(plan.as_ref()),
            _ => None,
        })
    }

    /// The pods and pod templates of the file, to fill in what a runtime knows of their images
    /// ([`crate::plan::ContainerPlan::image_config_stop_signal`]).
    pub fn pods_mut(&mut self) -> impl Iterator<Item = &mut PodPlan> {
        self.objects.iter_mut().filter_map(|o| match &mut o.body {
            ObjectBody::Workload(plan) => Some(plan.as_mut()),
            _ => None,
        })
    }

    /// The data of the ConfigMap or Secret `kind`/`name` in the file, if it holds one (namespace
    /// as written on the object, `None` matching any).
    pub fn env_source(&self, kind: &str, name: &str) -> Option<&BTreeMap<String, String>> {
        self.objects.iter().find_map(|o| match &o.body {
            ObjectBody::EnvSource(data) if o.kind == kind && o.name == name => Some(data),
            _ => None,
        })
    }

    /// `plan` with the data of its configMap and secret volumes, and each container's `envFrom`
    /// sources, taken from the ConfigMaps and Secrets of this file. For `envFrom`: their keys (with the prefix) come first, then the container's own `env`, which
    /// wins on a duplicate name, as the kubelet's `makeEnvironmentVariables` orders them
    /// (`pkg/kubelet/kubelet_pods.go`). Keys that are not valid variable names are skipped, as
    /// the kubelet does (it records an `InvalidEnvironmentVariableNames` event).
    ///
    /// # Errors
    /// The kubelet's `CreateContainerConfigError` wording (`configmap "x" not found`) for a
    /// source that is not optional and not in the file.
    pub fn resolve_env_from(&self, plan: &PodPlan) -> Result<PodPlan, String> {
        let mut out = plan.clone();
        // configMap and secret volumes: their data from the same input, as the kubelet's
        // volume plugins read the objects (`MountVolume.SetUp failed` when one is missing).
        for v in &mut out.volumes {
            if let crate::plan::VolumeSource::Data {
                kind,
                name,
                optional,
                data,
                ..
            } = &mut v.source
            {
                match self.env_source(kind, name) {
                    Some(d) => *data = Some(d.clone()),
                    None if *optional => *data = Some(BTreeMap::new()),
                    None => {
                        return Err(format!(
                            "MountVolume.SetUp failed for volume {}: {} {} not found: podgrace reads configMap and secret volumes from the same input",
                            excerpt::quote(&v.name),
                            kind.to_ascii_lowercase(),
                            excerpt::quote(name)
                        ))
                    }
                }
            }
        }
        for c in out
            .init_containers
            .iter_mut()
            .chain(out.containers.iter_mut())
        {
            let mut env: Vec<(String, Option<String>)> = Vec::new();
            for src in &c.env_from {
                let Some(data) = self.env_source(src.kind, &src.name) else {
                    if src.optional {
                        continue;
                    }
                    return Err(format!(
                        "container {:?}: {} {} not found (CreateContainerConfigError): podgrace reads envFrom sources from the same input",
                        c.name,
                        src.kind.to_ascii_lowercase(),
                        excerpt::quote(&src.name)
                    ));
                };
                for (k, v) in data {
                    let name = format!("{}{k}", src.prefix);
                    let valid = !name.is_empty()
                        && !name.starts_with(|ch: char| ch.is_ascii_digit())
                        && name
                            .chars()
                            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-' | '.'));
                    if valid {
                        env.retain(|(n, _)| n != &name);
                        env.push((name, Some(v.clone())));
                    }
                }
            }
            for (name, value) in std::mem::take(&mut c.env) {
                env.retain(|(n, _)| n != &name);
                env.push((name, value));
            }
            c.env = env;
        }
        Ok(out)
    }

    /// The Services of the file.
    pub fn services(&self) -> impl Iterator<Item = (&Object, &Service)> {
        self.objects.iter().filter_map(|o| match &o.body {
            ObjectBody::Service(s) => Some((o, s.as_ref())),
            _ => None,
        })
    }

    /// The PodDisruptionBudgets of the file.
    pub fn pod_disruption_budgets(&self) -> impl Iterator<Item = (&Object, &PodDisruptionBudget)> {
        self.objects.iter().filter_map(|o| match &o.body {
            ObjectBody::PodDisruptionBudget(p) => Some((o, p.as_ref())),
            _ => None,
        })
    }
}

/// One Kubernetes object of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// `kind` as written (`Deployment`).
    pub kind: String,
    /// `apiVersion` as written (`apps/v1`).
    pub api_version: String,
    /// `metadata.name` (or `generateName` when only that is set; empty if neither).
    pub name: String,
    /// `metadata.namespace`, if set.
    pub namespace: Option<String>,
    /// Where the object starts (its first key); `path` is empty.
    pub span: SourceSpan,
    /// What podgrace keeps of the object, by kind.
    pub body: ObjectBody,
}

/// What podgrace keeps of an object.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectBody {
    /// A Pod, or the pod template of a Deployment, StatefulSet, DaemonSet, ReplicaSet,
    /// ReplicationController, Job or CronJob.
    Workload(Box<PodPlan>),
    /// A `v1` Service (selector, ports, `publishNotReadyAddresses`).
    Service(Box<Service>),
    /// A `policy/v1` PodDisruptionBudget (`policy/v1beta1` before 1.25, same fields).
    PodDisruptionBudget(Box<PodDisruptionBudget>),
    /// A `v1` ConfigMap's `data`, or a `v1` Secret's `data` and `stringData` (decoded): what
    /// `envFrom` and `valueFrom` can take values from.
    EnvSource(BTreeMap<String, String>),
    /// Any other kind: kept by kind and name only.
    Other,
}

/// One problem in a manifest, placed at a file, line, column and field path.
///
/// `Display`: `FILE:LINE:COLUMN: PATH: MESSAGE` (the path is left out when empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{}:{}: {}{kind}", span.file, span.line, span.column, PathPrefix(&span.path))]
pub struct ManifestError {
    /// Where: file, 1-based line and column, field path from the object root.
    pub span: SourceSpan,
    /// What is wrong.
    pub kind: ManifestErrorKind,
    /// The object the error belongs to, when it got as far as API validation (so lint can
    /// report API rejections as findings of that object).
    pub object: Option<ObjectRef>,
    /// Where that object starts (its first key; `path` empty), with [`Self::object`].
    pub object_span: Option<SourceSpan>,
}

/// Which object: kind, namespace and name, as written.
#[derive(Debug, Clone, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// `kind`, such as `Deployment`.
    pub kind: String,
    /// `metadata.namespace`, if set.
    pub namespace: Option<String>,
    /// `metadata.name` (or `generateName`).
    pub name: String,
}

struct PathPrefix<'a>(&'a str);

impl fmt::Display for PathPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, "{}: ", self.0)
        }
    }
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestErrorKind {
    /// The text is not YAML (message from the parser), or its aliases expand too much.
    #[error("YAML syntax error: {0}")]
    Syntax(String),
    /// An object above the API server's request limit ([`MAX_OBJECT_BYTES`], 3 MiB); it is not
    /// read further.
    #[error("{0}")]
    TooLarge(String),
    /// A document that is not a mapping, or lacks `apiVersion` or `kind`.
    #[error("{0}")]
    NotAnObject(String),
    /// A kind the API server does not serve under this `apiVersion` (kubectl's wording).
    #[error("no matches for kind {} in version {}{}", excerpt::quote(kind), excerpt::quote(api_version), hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    UnsupportedVersion {
        /// The `kind` as written.
        kind: String,
        /// The `apiVersion` as written.
        api_version: String,
        /// What to use instead, when known (`removed in Kubernetes 1.16; use apps/v1`).
        hint: Option<String>,
    },
    /// A value of the wrong type (message from serde, as in `invalid type: string "30",
    /// expected i64`).
    #[error("{0}")]
    Type(String),
    /// A field the type does not have (the API server's strict field validation rejects it).
    #[error("unknown field {}{}", excerpt::quote(field), hint.as_ref().map(|h| format!(" (did you mean {h:?}?)")).unwrap_or_default())]
    UnknownField {
        /// The field's name as written.
        field: String,
        /// The closest field the type has, when one is close enough (a typo).
        hint: Option<String>,
    },
    /// The same key twice in one mapping.
    #[error("duplicate field {}", excerpt::quote(field))]
    DuplicateField {
        /// The repeated key.
        field: String,
    },
    /// A value the API server's validation rejects, worded as the API server words it.
    #[error("{0}")]
    Field(FieldErrorKind),
}

/// All errors of one file (at least one), one per line when displayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ManifestErrors(pub Vec<ManifestError>);

/// Loads every object of `text` with the latest release's rules. See [`load_with`].
pub fn load(text: &str, file: &str) -> Result<Manifest, ManifestErrors> {
    load_with(text, file, &LoadOptions::default())
}

/// Loads every object of `text` (multi-document YAML or JSON), `file` naming it in messages.
///
/// Empty and `null` documents are skipped; `kind: List` is replaced by its `items`.
///
/// # Errors
/// Every problem of the file (syntax, types, unknown fields, API validation), in order. Use
/// [`load_partial`] to get the objects that loaded as well.
pub fn load_with(
    text: &str,
    file: &str,
    options: &LoadOptions,
) -> Result<Manifest, ManifestErrors> {
    let (manifest, errors) = load_partial(text, file, options);
    if errors.is_empty() {
        Ok(manifest)
    } else {
        Err(ManifestErrors(errors))
    }
}

/// Like [`load_with`], but returns the objects that loaded together with the errors of the
/// others (an object with any error is left out).
pub fn load_partial(
    text: &str,
    file: &str,
    options: &LoadOptions,
) -> (Manifest, Vec<ManifestError>) {
    let (docs, syntax) = tree::parse_documents(text);
    let mut manifest = Manifest {
        objects: Vec::with_capacity(docs.len()),
        warnings: Vec::new(),
    };
    let mut errors = Vec::new();
    let loader = convert::Loader {
        file,
        options,
        warnings: Default::default(),
    };
    for doc in &docs {
        loader.document(doc, &mut manifest.objects, &mut errors);
    }
    manifest.warnings = loader.warnings.into_inner();
    if let Some(e) = syntax {
        errors.push(syntax_error(file, e));
    }
    (manifest, errors)
}

/// A YAML syntax error of `file`, placed where the parser stopped.
fn syntax_error(file: &str, e: tree::SyntaxError) -> ManifestError {
    ManifestError {
        span: SourceSpan {
            file: file.to_string(),
            line: e.pos.line as usize,
            column: e.pos.col as usize,
            path: String::new(),
        },
        kind: if e.too_large {
            ManifestErrorKind::TooLarge(e.message)
        } else {
            ManifestErrorKind::Syntax(e.message)
        },
        object: None,
        object_span: None,
    }
}

/// Deserializes the first YAML document of `text` into `T` with the loader's strict checks:
/// unknown fields (with a "did you mean"), duplicate fields and type errors, each placed at
/// `file:line:column`. `Ok(None)` for an empty document. Used for podgrace's own configuration
/// files (`podgrace lint --config`).
///
/// # Errors
/// Every problem found, as for [`load`].
pub fn load_typed<T: serde::de::DeserializeOwned>(
    text: &str,
    file: &str,
) -> Result<Option<T>, ManifestErrors> {
    load_typed_at(text, file, |v: T, _| v)
}

/// Like [`load_typed`], and hands the value to `check` together with [`Fields`], which places
/// the document's fields at `file:line:column` with their path, so that checks of values (a
/// range, a name from a list) are reported like the loader's own errors.
///
/// # Errors
/// Every problem the loader finds, as for [`load_typed`]; `check` runs only without them.
pub(crate) fn load_typed_at<T: serde::de::DeserializeOwned, R>(
    text: &str,
    file: &str,
    check: impl FnOnce(T, &Fields<'_, '_>) -> R,
) -> Result<Option<R>, ManifestErrors> {
    let (docs, syntax) = tree::parse_documents(text);
    let loader = convert::Loader {
        file,
        options: &LoadOptions::default(),
        warnings: Default::default(),
    };
    let mut errors = Vec::new();
    if let Some(e) = syntax {
        errors.push(syntax_error(file, e));
        return Err(ManifestErrors(errors));
    }
    let Some(doc) = docs.first() else {
        return Ok(None);
    };
    let value = loader.typed::<T>(doc, &mut errors);
    match value {
        Some(v) if errors.is_empty() => {
            let fields = Fields {
                file,
                at: validate::SpecAt {
                    node: Some(doc),
                    fallback: doc.pos,
                    prefix: &[],
                },
            };
            Ok(Some(check(v, &fields)))
        }
        _ => Err(ManifestErrors(errors)),
    }
}

/// Where the fields of a document read by [`load_typed_at`] are written.
pub(crate) struct Fields<'n, 'a> {
    file: &'n str,
    at: validate::SpecAt<'n, 'a>,
}

impl Fields<'_, '_> {
    /// The value at `segs` (`severity`, `endpoint-race`): the position of the deepest node
    /// written along the path, and the path (`severity.endpoint-race`, `disable[0]`).
    pub fn span(&self, segs: &[Seg<'_>]) -> SourceSpan {
        let (path, pos) = self.at.locate(segs);
        self.at_pos(pos, path)
    }

    /// Like [`Self::span`], but at the key of the last segment when it names a mapping entry
    /// (for a key that is itself the wrong value, such as an unknown rule id).
    pub fn key_span(&self, segs: &[Seg<'_>]) -> SourceSpan {
        let (path, pos) = self.at.locate(segs);
        let key_pos = match segs.split_last() {
            Some((Seg::Key(k), parent)) => self
                .at
                .node_at(parent)
                .and_then(|n| n.entry(k))
                .map(|e| e.key_pos),
            _ => None,
        };
        self.at_pos(key_pos.unwrap_or(pos), path)
    }

    fn at_pos(&self, pos: tree::Pos, path: String) -> SourceSpan {
        SourceSpan {
            file: self.file.to_string(),
            line: pos.line as usize,
            column: pos.col as usize,
            path,
        }
    }
}

/// Parses `text` into the same spanned trees [`load`] builds, and nothing more; returns the
/// number of non-empty documents. For benchmarks comparing parse cost with a full load.
///
/// # Errors
/// The first YAML syntax error, with its position (`path` empty; file `-`).
pub fn parse_only(text: &str) -> Result<usize, Box<ManifestError>> {
    let (docs, syntax) = tree::parse_documents(text);
    match syntax {
        None => Ok(docs.len()),
        Some(e) => Err(Box::new(syntax_error("-", e))),
    }
}
