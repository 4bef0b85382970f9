//! The resources `serve` serves: group, version, kind, plural, scope, verbs, short names and
//! the field selectors each one supports, as kube-apiserver registers them.
//!
//! Upstream: `pkg/registry/*/rest/storage_*.go` (what is served), the `ShortNames()` and
//! `Categories()` of each REST storage, and the field label conversion functions of
//! `pkg/apis/core/v1/conversion.go` (`field label not supported: X`).

use serde_json::Value;

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// API version (`v1`).
    pub version: &'static str,
    /// The kind of its objects (`Pod`).
    pub kind: &'static str,
    /// The plural name in URLs (`pods`).
    pub plural: &'static str,
    /// The singular name (`pod`), as discovery's `singularName`.
    pub singular: &'static str,
    /// Namespaced (`pods`) or cluster-scoped (`nodes`, `namespaces`).
    pub namespaced: bool,
    /// kubectl's short names (`po`), as discovery's `shortNames`.
    pub short_names: &'static [&'static str],
    /// Discovery's `categories` (`all` for the ones `kubectl get all` shows).
    pub categories: &'static [&'static str],
    /// Subresources served (`status`, `log`).
    pub subresources: &'static [&'static str],
    /// The storage shared by several versions (`events` for core/v1 and events.k8s.io/v1).
    pub storage: &'static str,
    /// Field selector labels besides `metadata.name` and `metadata.namespace`.
    pub fields: &'static [&'static str],
}

/// Every verb of a resource, as discovery lists them.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl Resource {
    /// `pods` or `events.events.k8s.io` (`GroupResource.String()`), for messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `v1` or `events.k8s.io/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `Pod` or `Event.events.k8s.io` (`GroupKind.String()`), for validation messages.
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The store key of `name` in `namespace`.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("{namespace}/{name}")
        } else {
            name.to_string()
        }
    }

    /// Whether `label` is a field selector this resource supports.
    pub fn supports_field(&self, label: &str) -> bool {
        label == "metadata.name"
            || (label == "metadata.namespace" && (self.namespaced || self.plural == "namespaces"))
            || self.fields.contains(&label)
    }

    /// The error for an unsupported field selector label, as upstream words it: core kinds
    /// with a conversion function say `field label not supported: X`, the others the generic
    /// runtime message.
    pub fn field_error(&self, label: &str) -> String {
        if self.fields.is_empty() && self.group.is_empty() && !matches!(self.plural, "pods") {
            format!(
                "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )
        } else {
            format!("field label not supported: {label}")
        }
    }
}

/// The value of field selector `label` on `obj` (strings as they are; booleans and numbers in
/// their text form; absent: `None`).
pub fn field_value(obj: &Value, label: &str) -> Option<String> {
    let path: String = label.split('.').fold(String::new(), |mut p, s| {
        p.push('/');
        p.push_str(s);
        p
    });
    let v = obj.pointer(&path)?;
    Some(match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => return None,
        other => other.to_string(),
    })
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// Every resource `serve` serves, in discovery order per group.
pub const RESOURCES: &[Resource] = &[
    Resource {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        subresources: &["status", "finalize"],
        storage: "namespaces",
        fields: &["status.phase"],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        subresources: &["status", "log", "eviction", "binding"],
        storage: "pods",
        fields: POD_FIELDS,
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        subresources: &["status", "proxy"],
        storage: "nodes",
        fields: &["spec.unschedulable"],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        storage: "events",
        fields: EVENT_FIELDS,
    },
    Resource {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        namespaced: true,
        short_names: &["cm"],
        categories: &[],
        subresources: &[],
        storage: "configmaps",
        fields: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "secrets",
        fields: &["type"],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        namespaced: true,
        short_names: &["svc"],
        categories: &["all"],
        subresources: &["status"],
        storage: "services",
        fields: &["spec.clusterIP", "spec.type"],
    },
    Resource {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        namespaced: true,
        short_names: &["deploy"],
        categories: &["all"],
        subresources: &["status", "scale"],
        storage: "deployments",
        fields: &[],
    },
    Resource {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        namespaced: true,
        short_names: &["rs"],
        categories: &["all"],
        subresources: &["status", "scale"],
        storage: "replicasets",
        fields: &[],
    },
    Resource {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "leases",
        fields: &[],
    },
    Resource {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        storage: "events",
        fields: &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
    },
    Resource {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        namespaced: true,
        short_names: &["pdb"],
        categories: &[],
        subresources: &["status"],
        storage: "poddisruptionbudgets",
        fields: &[],
    },
    Resource {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        storage: "endpointslices",
        fields: &[],
    },
];

/// The resource `plural` of `group`/`version`, if served.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The served resource of `storage` with group `group` (the storage's own version).
pub fn by_storage(group: &str, storage: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.storage == storage)
}

/// The resource of kind `kind` in `api_version` (`v1`, `events.k8s.io/v1`), if served.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.api_version() == api_version && r.kind == kind)
}

/// The served groups other than the core group, with their one version, in discovery order.
pub fn groups() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in RESOURCES {
        if !r.group.is_empty() && !out.contains(&r.group) {
            out.push(r.group);
        }
    }
    out
}
