//! The resource types podgrace reads from a cluster, and `TYPE/NAME` arguments as kubectl takes
//! them (`deployment/web`, `deploy/web`, `deployments.apps/web`, `po/web-7d4f-x2k`).
//!
//! Upstream: the names are the API's own (plural, singular, `shortNames` of the discovery
//! documents; `staging/src/k8s.io/cli-runtime/pkg/resource/builder.go` `ResourceTypeOrNameArgs`
//! splits `TYPE/NAME`), and an unknown type is refused with kubectl's
//! `the server doesn't have a resource type "X"`.

/// One resource type: where it is served and how kubectl lets users name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResourceType {
    /// `kind` (`Deployment`).
    pub kind: &'static str,
    /// The API group (`apps`; empty for the core group).
    pub group: &'static str,
    /// The version served (`v1`).
    pub version: &'static str,
    /// The resource (plural, `deployments`).
    pub plural: &'static str,
    /// The singular name (`deployment`).
    pub singular: &'static str,
    /// The discovery document's short names (`deploy`).
    pub short: &'static [&'static str],
}

impl ResourceType {
    /// `apiVersion` of its objects (`apps/v1`, `v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection's path: in `namespace`, or across all namespaces when `None`
    /// (`/apis/apps/v1/namespaces/shop/deployments`, `/api/v1/pods`).
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let base = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace {
            Some(ns) => format!("{base}/namespaces/{}/{}", path_segment(ns), self.plural),
            None => format!("{base}/{}", self.plural),
        }
    }

    /// `plural.group` as the API server names it in messages (`deployments.apps`, `pods`).
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether it holds a pod or a pod template.
    pub fn is_workload(&self) -> bool {
        WORKLOADS.contains(self)
    }

    /// `word` names it: the plural, the singular or a short name, alone or qualified as kubectl
    /// takes it (`deployments.apps`, `deployments.v1.apps`; a core type `pods.v1`).
    fn matches(&self, word: &str) -> bool {
        let (name, group) = match word.split_once('.') {
            Some((n, g)) => (n, Some(g)),
            None => (word, None),
        };
        let qualified = |g: &str| {
            g == self.group
                || g.strip_prefix(self.version).is_some_and(|rest| {
                    rest.strip_prefix('.') == Some(self.group)
                        || (rest.is_empty() && self.group.is_empty())
                })
        };
        if group.is_some_and(|g| !qualified(g)) {
            return false;
        }
        name == self.plural
            || name == self.singular
            || (group.is_none() && self.short.contains(&name))
    }
}

/// Pods.
pub const POD: ResourceType = ResourceType {
    kind: "Pod",
    group: "",
    version: "v1",
    plural: "pods",
    singular: "pod",
    short: &["po"],
};
/// Deployments.
pub const DEPLOYMENT: ResourceType = ResourceType {
    kind: "Deployment",
    group: "apps",
    version: "v1",
    plural: "deployments",
    singular: "deployment",
    short: &["deploy"],
};
/// StatefulSets.
pub const STATEFUL_SET: ResourceType = ResourceType {
    kind: "StatefulSet",
    group: "apps",
    version: "v1",
    plural: "statefulsets",
    singular: "statefulset",
    short: &["sts"],
};
/// DaemonSets.
pub const DAEMON_SET: ResourceType = ResourceType {
    kind: "DaemonSet",
    group: "apps",
    version: "v1",
    plural: "daemonsets",
    singular: "daemonset",
    short: &["ds"],
};
/// ReplicaSets.
pub const REPLICA_SET: ResourceType = ResourceType {
    kind: "ReplicaSet",
    group: "apps",
    version: "v1",
    plural: "replicasets",
    singular: "replicaset",
    short: &["rs"],
};
/// ReplicationControllers.
pub const REPLICATION_CONTROLLER: ResourceType = ResourceType {
    kind: "ReplicationController",
    group: "",
    version: "v1",
    plural: "replicationcontrollers",
    singular: "replicationcontroller",
    short: &["rc"],
};
/// Jobs.
pub const JOB: ResourceType = ResourceType {
    kind: "Job",
    group: "batch",
    version: "v1",
    plural: "jobs",
    singular: "job",
    short: &[],
};
/// CronJobs.
pub const CRON_JOB: ResourceType = ResourceType {
    kind: "CronJob",
    group: "batch",
    version: "v1",
    plural: "cronjobs",
    singular: "cronjob",
    short: &["cj"],
};
/// Services (read for the findings about the pods they select).
pub const SERVICE: ResourceType = ResourceType {
    kind: "Service",
    group: "",
    version: "v1",
    plural: "services",
    singular: "service",
    short: &["svc"],
};
/// PodDisruptionBudgets (read for the findings about the pods they cover).
pub const POD_DISRUPTION_BUDGET: ResourceType = ResourceType {
    kind: "PodDisruptionBudget",
    group: "policy",
    version: "v1",
    plural: "poddisruptionbudgets",
    singular: "poddisruptionbudget",
    short: &["pdb"],
};
/// ConfigMaps (what a pod's `envFrom` and volumes take values from).
pub const CONFIG_MAP: ResourceType = ResourceType {
    kind: "ConfigMap",
    group: "",
    version: "v1",
    plural: "configmaps",
    singular: "configmap",
    short: &["cm"],
};
/// Secrets (likewise).
pub const SECRET: ResourceType = ResourceType {
    kind: "Secret",
    group: "",
    version: "v1",
    plural: "secrets",
    singular: "secret",
    short: &[],
};
/// Nodes.
pub const NODE: ResourceType = ResourceType {
    kind: "Node",
    group: "",
    version: "v1",
    plural: "nodes",
    singular: "node",
    short: &["no"],
};

/// The kinds that hold a pod or a pod template, owners before what they own (a Deployment
/// before its ReplicaSets, a CronJob before its Jobs, all before Pods).
pub const WORKLOADS: [ResourceType; 8] = [
    DEPLOYMENT,
    STATEFUL_SET,
    DAEMON_SET,
    CRON_JOB,
    REPLICATION_CONTROLLER,
    REPLICA_SET,
    JOB,
    POD,
];

/// Other types kubectl users name that podgrace knows but does not explain.
const KNOWN: [ResourceType; 3] = [SERVICE, POD_DISRUPTION_BUDGET, NODE];

/// A `TYPE/NAME` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The type it names.
    pub resource: ResourceType,
    /// The object's name.
    pub name: String,
}

impl std::fmt::Display for Target {
    /// `deployment/web`: the singular, as kubectl prints a reference.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.resource.singular, self.name)
    }
}

/// Why a `TYPE/NAME` argument was refused (kubectl's words, which it prints after `error: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not of the form `TYPE/NAME`.
    #[error("arguments in resource/name form must have a single resource and name")]
    Form,
    /// More than one `/` (`deployment/web/x`).
    #[error("arguments in resource/name form may not have more than one slash")]
    Slashes,
    /// A type the API does not serve (kubectl asks discovery; podgrace knows its types).
    #[error("the server doesn't have a resource type \"{0}\"")]
    UnknownType(String),
    /// A type podgrace does not explain or lint (a Service, a Node).
    #[error("{0}: podgrace reads pods and the workloads that hold a pod template (deployment, statefulset, daemonset, replicaset, replicationcontroller, job, cronjob, pod)")]
    NotAWorkload(String),
    /// A name no object can have, refused before any request as kubectl refuses it
    /// (`invalid resource name "a%b": [may not contain '%']`).
    #[error("invalid resource name {0:?}: [{1}]")]
    InvalidName(String, String),
}

/// What makes `name` unusable as one segment of an API path, as upstream's
/// `IsValidPathSegmentName` words it (`may not be '..'`, `may not contain '/'`); `None` for a
/// name that may be sent. kubectl checks names and namespaces with it before any request.
///
/// Upstream: `staging/src/k8s.io/apimachinery/pkg/api/validation/path/name.go`
/// `IsValidPathSegmentName` (all versions podgrace supports), called from cli-runtime's
/// `resource.Builder` for names and the namespace.
pub fn path_segment_problems(name: &str) -> Option<String> {
    let mut problems = Vec::new();
    if name == "." || name == ".." {
        problems.push(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            problems.push(format!("may not contain '{bad}'"));
        }
    }
    (!problems.is_empty()).then(|| problems.join(", "))
}

/// Everything but RFC 3986's unreserved characters: what Go's `url.PathEscape` escapes in a
/// name that passed [`path_segment_problems`] (a space, `?`, `#`).
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `name` escaped as one segment of an API path, as kubectl sends it (`a b` as `a%20b`): a
/// name or namespace a user typed reaches the server as it was typed, never as a malformed
/// request.
pub fn path_segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, PATH_SEGMENT).to_string()
}

/// Whether `arg` (a path that does not exist) is meant as `TYPE/NAME`: it starts with a type
/// kubectl knows and a `/` (`deployment/web`; also `pod/` and `deployment/web/x`, which
/// [`parse_target`] then refuses in kubectl's words), or with a word of letters, digits and
/// dots, one `/` and a name that does not end as a manifest file does (`foo/web` is an unknown
/// type, `manifests/web.yaml` a path).
pub fn looks_like_target(arg: &str) -> bool {
    let Some((t, n)) = arg.split_once('/') else {
        return false;
    };
    let word = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        && t.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if !word {
        return false;
    }
    if lookup(&t.to_ascii_lowercase()).is_some() {
        return true;
    }
    let file_like = [".yaml", ".yml", ".json"]
        .iter()
        .any(|e| n.to_ascii_lowercase().ends_with(e));
    !n.is_empty() && !n.contains('/') && !file_like
}

fn lookup(word: &str) -> Option<ResourceType> {
    WORKLOADS
        .iter()
        .chain(KNOWN.iter())
        .find(|r| r.matches(word))
        .copied()
}

/// Parses `TYPE/NAME` (the type case-insensitive, as kubectl lowercases it).
///
/// # Errors
/// [`TargetError::Form`] without a type and a name around a `/`, [`TargetError::Slashes`] with
/// more than one `/`, [`TargetError::UnknownType`] for a type the API does not serve,
/// [`TargetError::NotAWorkload`] for one without pods.
pub fn parse_target(arg: &str) -> Result<Target, TargetError> {
    let (t, name) = arg.split_once('/').ok_or(TargetError::Form)?;
    if name.contains('/') {
        return Err(TargetError::Slashes);
    }
    if t.is_empty() || name.is_empty() {
        return Err(TargetError::Form);
    }
    let word = t.to_ascii_lowercase();
    let resource = lookup(&word).ok_or_else(|| TargetError::UnknownType(word.clone()))?;
    if !resource.is_workload() {
        return Err(TargetError::NotAWorkload(arg.to_string()));
    }
    if let Some(why) = path_segment_problems(name) {
        return Err(TargetError::InvalidName(name.to_string(), why));
    }
    Ok(Target {
        resource,
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_named_as_kubectl_names_them() {
        for (arg, kind) in [
            ("deployment/web", "Deployment"),
            ("deploy/web", "Deployment"),
            ("deployments.apps/web", "Deployment"),
            ("Deployment.apps/web", "Deployment"),
            ("po/web-7d4f-x2k", "Pod"),
            ("pods/web", "Pod"),
            ("sts/db", "StatefulSet"),
            ("ds/agent", "DaemonSet"),
            ("rs/web-7d4f", "ReplicaSet"),
            ("rc/old", "ReplicationController"),
            ("job/once", "Job"),
            ("cj/nightly", "CronJob"),
            ("cronjobs.batch/nightly", "CronJob"),
            ("deployments.v1.apps/web", "Deployment"),
            ("pods.v1/web", "Pod"),
        ] {
            let t = parse_target(arg).unwrap_or_else(|e| panic!("{arg}: {e}"));
            assert_eq!(t.resource.kind, kind, "{arg}");
        }
        assert_eq!(
            parse_target("deploy/web").map(|t| t.to_string()),
            Ok("deployment/web".into())
        );
        assert_eq!(
            parse_target("foo/web").unwrap_err().to_string(),
            "the server doesn't have a resource type \"foo\""
        );
        // A group that does not serve the type is no match (as discovery would say).
        assert!(matches!(
            parse_target("deployments.batch/web"),
            Err(TargetError::UnknownType(_))
        ));
        assert_eq!(parse_target("web"), Err(TargetError::Form));
        assert_eq!(parse_target("deployment/"), Err(TargetError::Form));
        assert!(matches!(
            parse_target("deployments.v2.apps/web"),
            Err(TargetError::UnknownType(_))
        ));
        assert_eq!(
            parse_target("deployment/web/x").unwrap_err().to_string(),
            "arguments in resource/name form may not have more than one slash"
        );
        assert!(matches!(
            parse_target("svc/web"),
            Err(TargetError::NotAWorkload(_))
        ));
        // Names no request can carry, in kubectl 1.32's words; a space or `?` is sent escaped.
        for (arg, line) in [
            (
                "deployment/a%b",
                r#"invalid resource name "a%b": [may not contain '%']"#,
            ),
            ("pod/..", r#"invalid resource name "..": [may not be '..']"#),
            ("pod/.", r#"invalid resource name ".": [may not be '.']"#),
        ] {
            assert_eq!(parse_target(arg).unwrap_err().to_string(), line);
        }
        assert_eq!(parse_target("deployment/a b?").unwrap().name, "a b?");
        assert_eq!(
            path_segment_problems("a/%"),
            Some("may not contain '/', may not contain '%'".into())
        );
    }

    #[test]
    fn paths_and_targets_are_told_apart() {
        assert!(looks_like_target("deployment/web"));
        assert!(looks_like_target("svc/web"));
        assert!(looks_like_target("foo/web"));
        assert!(!looks_like_target("deploy.yaml"));
        assert!(!looks_like_target("manifests/deploy.yaml"));
        assert!(!looks_like_target("./deployment/web"));
        assert!(!looks_like_target("/web"));
        assert!(!looks_like_target("foo/web/x"));
        // A known type: refused by parse_target in kubectl's words, not read as a path.
        assert!(looks_like_target("deployment/web/x"));
        assert!(looks_like_target("pod/"));
    }

    #[test]
    fn collection_paths() {
        assert_eq!(
            DEPLOYMENT.collection_path(Some("shop")),
            "/apis/apps/v1/namespaces/shop/deployments"
        );
        assert_eq!(POD.collection_path(None), "/api/v1/pods");
        // A namespace as typed reaches the server escaped, as kubectl sends it.
        assert_eq!(
            POD.collection_path(Some("a b?")),
            "/api/v1/namespaces/a%20b%3F/pods"
        );
        assert_eq!(path_segment("web-7d4f.x_2~k"), "web-7d4f.x_2~k");
        assert_eq!(DEPLOYMENT.group_resource(), "deployments.apps");
        assert_eq!(CRON_JOB.api_version(), "batch/v1");
    }
}
