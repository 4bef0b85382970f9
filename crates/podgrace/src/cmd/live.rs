//! Live objects for `explain` and `lint`: which input the arguments name (files, or a cluster's
//! objects as kubectl names them: `deployment/web`, `-n shop`, `-A`), and the objects read from
//! the cluster as documents the manifest loader reads like files, each with the kubelet settings
//! of the node its pods run on. Reading is `podgrace_cluster`'s; this module only ties it to the
//! verbs' flags.

use std::collections::BTreeMap;
use std::path::PathBuf;

use podgrace_cluster::configz::{NodeKubelet, NodeSettings};
use podgrace_cluster::resources::{looks_like_target, parse_target, Target};
use podgrace_cluster::workloads::{LiveObject, Selection};
use podgrace_cluster::ClusterError;
use podgrace_core::manifest::ObjectRef;
use podgrace_core::KubeVersion;

use super::args::{ClusterArgs, FilesArgs};
use crate::input::{self, Document, InputError};
use crate::{BadInput, Outcome};

/// What the arguments name.
pub enum Source {
    /// Manifest files and directories.
    Files(Vec<PathBuf>),
    /// Objects of a cluster.
    Cluster(Selection),
}

/// Tells files from cluster objects: a positional argument written `TYPE/NAME` with a type
/// kubectl knows, where no such path exists, names an object (`-f` always names a file); with
/// no argument at all, `-A` or any cluster flag reads every workload of the namespace (or of
/// all of them).
///
/// # Errors
/// Files and objects mixed; `-A` with named objects (kubectl's wording); cluster flags with
/// files; nothing given.
pub fn source(
    given: &FilesArgs,
    cluster: &ClusterArgs,
    all_namespaces: bool,
) -> Result<Source, BadInput> {
    let is_target = |p: &PathBuf| !p.exists() && p.to_str().is_some_and(looks_like_target);
    let (targets, mut files): (Vec<PathBuf>, Vec<PathBuf>) =
        given.files.iter().cloned().partition(is_target);
    files.extend(given.filename.iter().cloned());
    if !targets.is_empty() && !files.is_empty() {
        return Err(BadInput(format!(
            "{} names an object of a cluster and {} a file: give manifest files or cluster objects (TYPE/NAME), not both",
            targets[0].display(),
            files[0].display()
        )));
    }
    if !targets.is_empty() {
        if all_namespaces {
            return Err(BadInput(
                "a resource cannot be retrieved by name across all namespaces".into(),
            ));
        }
        let targets: Vec<Target> = targets
            .iter()
            .map(|t| parse_target(&t.to_string_lossy()).map_err(|e| BadInput(e.to_string())))
            .collect::<Result<_, _>>()?;
        return Ok(Source::Cluster(Selection::Targets(targets)));
    }
    if files.is_empty() {
        if all_namespaces || cluster.given() {
            return Ok(Source::Cluster(Selection::Everything));
        }
        return Err(BadInput(
            "no manifest given: name a FILE (or -f FILE; `-` reads standard input), or objects of a cluster (deployment/web, pod/NAME, -A for every namespace)".into(),
        ));
    }
    if all_namespaces || cluster.given() {
        return Err(BadInput(
            "--kubeconfig, --context, -n and -A read objects from a cluster, and the arguments are files: give TYPE/NAME (deployment/web) or no argument to read the cluster".into(),
        ));
    }
    Ok(Source::Files(files))
}

/// Where an object's kubelet settings come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeletSource {
    /// Read from this node's kubelet (`configz`).
    Node(String),
    /// Not read: the kubelet's defaults are assumed, for this reason.
    Assumed(String),
}

/// One object read from the cluster.
pub struct LiveInfo {
    /// `deployment/web`: the document's name, and where its findings point.
    pub reference: String,
    /// Its namespace.
    pub namespace: String,
    /// The object as lint names it.
    pub object: ObjectRef,
    /// The settings of the kubelet its pods run on, and where they come from.
    pub kubelet: NodeKubelet,
    /// Where [`Self::kubelet`] comes from.
    pub source: KubeletSource,
    /// A note about the choice (pods on nodes with different settings), if any.
    pub note: Option<String>,
}

/// Objects read from a cluster, ready for the loader.
pub struct Live {
    /// The workloads (first `objects.len()` documents), then the Services and
    /// PodDisruptionBudgets beside them.
    pub docs: Vec<Document>,
    /// What is known of each workload, in the order of `docs`.
    pub objects: Vec<LiveInfo>,
    /// The release to reproduce: `--kubernetes-version`, else the server's.
    pub version: KubeVersion,
    /// Nodes whose settings could not be read: how many, of how many, and why (the first
    /// reason).
    pub refused: Option<(usize, usize, String)>,
    /// The namespace read (`None`: every namespace, `-A`).
    pub scope: Option<String>,
}

impl Live {
    /// lint's settings of the kubelet of each object whose node was read (`eviction_max`: the
    /// `--eviction-max-pod-grace-period` given, which wins over the node's).
    pub fn lint_kubelets(
        &self,
        eviction_max: Option<i64>,
    ) -> BTreeMap<ObjectRef, podgrace_core::lint::KubeletSettings> {
        self.objects
            .iter()
            .filter(|o| matches!(o.source, KubeletSource::Node(_)))
            .map(|o| {
                (
                    o.object.clone(),
                    podgrace_core::lint::KubeletSettings {
                        eviction_max_pod_grace_period: Some(
                            eviction_max.unwrap_or(o.kubelet.eviction_max_pod_grace_period),
                        ),
                        soft_eviction_thresholds: Some(!o.kubelet.eviction_soft.is_empty()),
                    },
                )
            })
            .collect()
    }

    /// What kubectl says on stderr when a list finds nothing: `No resources found in shop
    /// namespace.`, or `No resources found` with `-A`.
    pub fn none_found(&self) -> String {
        match &self.scope {
            Some(ns) => format!("No resources found in {ns} namespace."),
            None => "No resources found".into(),
        }
    }

    /// The object read as document `name` in `namespace`, if it is a workload.
    pub fn info(&self, file: &str, namespace: Option<&str>) -> Option<&LiveInfo> {
        self.objects
            .iter()
            .find(|o| o.reference == file && Some(o.namespace.as_str()) == namespace)
    }
}

/// The release of a server version: `--kubernetes-version` when given; else the server's,
/// brought within what podgrace models, with a note when it had to be.
fn release(given: Option<KubeVersion>, server: (u32, u32)) -> KubeVersion {
    if let Some(v) = given {
        return v;
    }
    let v = KubeVersion::new(server.0, server.1);
    if v > KubeVersion::LATEST {
        eprintln!(
            "note: the server is Kubernetes {v}; podgrace models up to {}: explained as {}",
            KubeVersion::LATEST,
            KubeVersion::LATEST
        );
        KubeVersion::LATEST
    } else if v < KubeVersion::OLDEST {
        eprintln!(
            "note: the server is Kubernetes {v}; podgrace models from {}: explained as {}",
            KubeVersion::OLDEST,
            KubeVersion::OLDEST
        );
        KubeVersion::OLDEST
    } else {
        v
    }
}

/// The settings for one object: its first node's, with a note when its pods' nodes differ; the
/// kubelet's defaults when it has no pod on a node or its node's cannot be read.
fn object_kubelet(
    o: &LiveObject,
    nodes: &BTreeMap<String, NodeSettings>,
) -> (NodeKubelet, KubeletSource, Option<String>) {
    let Some(first) = o.nodes.iter().next() else {
        return (
            NodeKubelet::default(),
            KubeletSource::Assumed("no pod of it runs on a node".into()),
            None,
        );
    };
    let s = nodes.get(first).cloned().unwrap_or(NodeSettings::Assumed {
        why: "not read".into(),
    });
    let differ = o
        .nodes
        .iter()
        .skip(1)
        .filter(|n| nodes.get(*n) != Some(&s))
        .cloned()
        .collect::<Vec<_>>();
    let note = (!differ.is_empty()).then(|| {
        format!(
            "its pods run on nodes whose kubelets are set differently ({first}, {}): node {first}'s settings are used",
            differ.join(", ")
        )
    });
    match s {
        NodeSettings::Read(k) => (k, KubeletSource::Node(first.clone()), note),
        NodeSettings::Assumed { why } => (
            NodeKubelet::default(),
            KubeletSource::Assumed(format!("node {first}: {why}")),
            note,
        ),
    }
}

/// Reads `selection` from the cluster the flags name.
///
/// # Errors
/// The cluster's failure, already printed as kubectl prints it, as the exit to take
/// (`Outcome::Exit(2 or 3)`).
pub fn read(
    cluster: &ClusterArgs,
    all_namespaces: bool,
    selection: &Selection,
    version: Option<KubeVersion>,
) -> Result<Live, Outcome> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            Outcome::Exit(3)
        })?;
    let opts = cluster.options(all_namespaces);
    type Read = (
        podgrace_cluster::workloads::Workloads,
        (u32, u32),
        Option<String>,
    );
    let result: Result<Read, ClusterError> = rt.block_on(async {
        let c = podgrace_cluster::connect(&opts).await?;
        let server = c.server_version().await?;
        let w = c.read_workloads(selection).await?;
        Ok((w, server, c.scope().map(str::to_string)))
    });
    let (w, server, scope) = result.map_err(|e| {
        eprintln!("{e}");
        Outcome::Exit(e.exit_code())
    })?;
    let version = release(version, server);
    let mut docs = Vec::with_capacity(w.objects.len() + w.context.len());
    let mut objects = Vec::with_capacity(w.objects.len());
    for o in &w.objects {
        let (kubelet, source, note) = object_kubelet(o, &w.nodes);
        let reference = o.reference();
        docs.push(Document {
            name: reference.clone(),
            text: o.object.to_string(),
        });
        objects.push(LiveInfo {
            reference,
            namespace: o.namespace.clone(),
            object: ObjectRef {
                kind: o.resource.kind.to_string(),
                namespace: Some(o.namespace.clone()),
                name: o.name.clone(),
            },
            kubelet,
            source,
            note,
        });
    }
    for c in &w.context {
        let kind = c.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
        let name = c
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or_default();
        docs.push(Document {
            name: format!("{}/{name}", kind.to_ascii_lowercase()),
            text: c.to_string(),
        });
    }
    let refused: Vec<&String> = w
        .nodes
        .values()
        .filter_map(|s| match s {
            NodeSettings::Assumed { why } => Some(why),
            NodeSettings::Read(_) => None,
        })
        .collect();
    let refused = refused
        .first()
        .map(|why| (refused.len(), w.nodes.len(), why.to_string()));
    Ok(Live {
        docs,
        objects,
        version,
        refused,
        scope,
    })
}

/// What `explain` and `lint` read: the paths given (files), the documents, what could not be
/// read, and for a cluster what is known of its objects (their documents moved to `docs`).
pub struct Input {
    /// The paths given (empty for a cluster).
    pub paths: Vec<PathBuf>,
    /// The documents to load.
    pub docs: Vec<Document>,
    /// What could not be read.
    pub problems: Vec<InputError>,
    /// The cluster's objects, when read from one.
    pub live: Option<Live>,
}

/// Reads what the arguments name ([`source`]): the files, or the cluster's objects, saying on
/// stderr how many nodes' settings could not be read and what `verb` does instead
/// (`unread_note`).
///
/// # Errors
/// `Err(Ok(exit))`: the cluster failed, already printed as kubectl prints it;
/// `Err(Err(bad))`: bad usage or input.
pub fn input(
    files: &FilesArgs,
    cluster: &ClusterArgs,
    all_namespaces: bool,
    version: Option<KubeVersion>,
    unread_note: &str,
) -> Result<Input, Result<Outcome, BadInput>> {
    match source(files, cluster, all_namespaces).map_err(Err)? {
        Source::Files(paths) => {
            let (docs, problems) = input::read_all(&paths).map_err(Err)?;
            Ok(Input {
                paths,
                docs,
                problems,
                live: None,
            })
        }
        Source::Cluster(selection) => {
            let mut l = read(cluster, all_namespaces, &selection, version).map_err(Ok)?;
            if let Some((n, of, why)) = &l.refused {
                eprintln!("note: the kubelet settings of {n} of {of} nodes could not be read ({why}): {unread_note}");
            }
            Ok(Input {
                paths: Vec::new(),
                docs: std::mem::take(&mut l.docs),
                problems: Vec::new(),
                live: Some(l),
            })
        }
    }
}

/// A manifest error of a live object: `deployment/web: PATH: MESSAGE` (its line and column
/// are those of the JSON podgrace wrote, which mean nothing to the user).
pub fn error_text(e: &podgrace_core::manifest::ManifestError) -> String {
    if e.span.path.is_empty() {
        format!("{}: {}", e.span.file, e.kind)
    } else {
        format!("{}: {}: {}", e.span.file, e.span.path, e.kind)
    }
}
