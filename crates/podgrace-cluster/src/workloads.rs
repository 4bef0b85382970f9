//! The live objects `explain` and `lint` read: named ones (`deployment/web`, `pod/X`), or every
//! workload of a namespace or of the cluster (`-A`), with the Services and
//! PodDisruptionBudgets beside them, the nodes their pods run on, and those nodes' kubelet
//! settings.
//!
//! Every workload is read once, where its template is written: an object whose controller
//! (`ownerReferences` with `controller: true`) is itself read is left out (a Deployment's
//! ReplicaSets and Pods, a CronJob's Jobs, a StatefulSet's Pods), so one Deployment gives one
//! set of findings, not one per replica. A pod whose owner podgrace does not read (an
//! operator's custom resource) is read as the pod it is.
//!
//! Requests: one paginated list per kind (8 workload kinds, Services, PodDisruptionBudgets),
//! never one request per object, and one `configz` read per node, at most
//! [`NODE_READS_AT_ONCE`] at a time; after a refusal (401, 403) no other node is asked.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures_util::stream::{self, StreamExt as _};
use serde_json::Value;

use crate::configz::{parse_configz, NodeSettings};
use crate::resources::{
    ResourceType, Target, CRON_JOB, JOB, POD, POD_DISRUPTION_BUDGET, REPLICA_SET, SERVICE,
    WORKLOADS,
};
use crate::{Cluster, ClusterError};

/// How many nodes' `configz` are read at once.
pub const NODE_READS_AT_ONCE: usize = 8;

/// One workload to explain or lint.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveObject {
    /// Its type.
    pub resource: ResourceType,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The object as the API serves it, with `apiVersion` and `kind`.
    pub object: Value,
    /// The nodes its pods run on (a Pod's `spec.nodeName`; for a workload, its pods' through
    /// their owners), sorted.
    pub nodes: BTreeSet<String>,
}

impl LiveObject {
    /// `deployment/web`, as kubectl names it.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.resource.singular, self.name)
    }
}

/// What to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// These objects, in the cluster's namespace (`-n`, the context's, `default`).
    Targets(Vec<Target>),
    /// Every workload of the namespace, or of every namespace with `-A`.
    Everything,
}

/// What was read.
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    /// The workloads, in the order asked for (targets) or kind by kind, owners first
    /// ([`WORKLOADS`]), each kind in the API's order.
    pub objects: Vec<LiveObject>,
    /// The Services and PodDisruptionBudgets of the namespaces read.
    pub context: Vec<Value>,
    /// The kubelet settings of every node in [`LiveObject::nodes`].
    pub nodes: BTreeMap<String, NodeSettings>,
}

/// The annotation `kubectl apply` keeps the whole last applied manifest in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no termination rule reads and that can be most of an object's size: `status`,
/// `metadata.managedFields` and the [`LAST_APPLIED`] annotation (a copy of the manifest), so
/// that a live object costs the loader what its file would.
pub fn strip_unread(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    m.remove("status");
    if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(LAST_APPLIED);
        }
    }
}

fn meta_str<'a>(v: &'a Value, key: &str) -> &'a str {
    v.pointer(&format!("/metadata/{key}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The ConfigMaps and Secrets an object's pods take values from (`envFrom`'s `configMapRef` and
/// `secretRef`, `configMap` and `secret` volumes, also projected), as `(kind, name)`, sorted:
/// what `podgrace run` of a live object reads beside it.
pub fn env_sources(obj: &Value) -> BTreeSet<(&'static str, String)> {
    fn walk(v: &Value, out: &mut BTreeSet<(&'static str, String)>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let kind = match k.as_str() {
                        "configMapRef" | "configMap" => Some("ConfigMap"),
                        "secretRef" | "secret" => Some("Secret"),
                        _ => None,
                    };
                    if let Some(kind) = kind {
                        let name = child
                            .get("name")
                            .or_else(|| child.get("secretName"))
                            .and_then(Value::as_str);
                        if let Some(n) = name.filter(|n| !n.is_empty()) {
                            out.insert((kind, n.to_string()));
                        }
                    }
                    walk(child, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    if let Some(spec) = obj.get("spec") {
        walk(spec, &mut out);
    }
    out
}

/// The UID of `v`'s controller (`ownerReferences` with `controller: true`).
fn controller_uid(v: &Value) -> Option<&str> {
    v.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
}

/// The top-level workloads of `lists` (objects whose controller is not among them) with the
/// nodes of their pods, reached through the controllers' chain (a Pod → its ReplicaSet → its
/// Deployment). Pure: the lists are given kind by kind, owners first.
pub fn top_level(lists: Vec<(ResourceType, Vec<Value>)>) -> Vec<LiveObject> {
    let uids: HashMap<String, Option<String>> = lists
        .iter()
        .flat_map(|(_, items)| items.iter())
        .map(|o| {
            (
                meta_str(o, "uid").to_string(),
                controller_uid(o).map(str::to_string),
            )
        })
        .collect();
    // The top of the chain from `uid` (the object itself when its controller is not read);
    // bounded by the number of objects, so a cycle of owner references cannot loop.
    let top = |uid: &str| -> String {
        let mut at = uid.to_string();
        for _ in 0..uids.len() {
            match uids.get(&at).and_then(Option::as_ref) {
                Some(owner) if uids.contains_key(owner) => at = owner.clone(),
                _ => break,
            }
        }
        at
    };
    let mut nodes: HashMap<String, BTreeSet<String>> = HashMap::new();
    for (r, items) in &lists {
        if *r != POD {
            continue;
        }
        for p in items {
            if let Some(n) = p
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                nodes
                    .entry(top(meta_str(p, "uid")))
                    .or_default()
                    .insert(n.to_string());
            }
        }
    }
    let mut out = Vec::new();
    for (resource, items) in lists {
        for object in items {
            let uid = meta_str(&object, "uid");
            let owned = controller_uid(&object).is_some_and(|o| uids.contains_key(o));
            if owned {
                continue;
            }
            out.push(LiveObject {
                resource,
                namespace: meta_str(&object, "namespace").to_string(),
                name: meta_str(&object, "name").to_string(),
                nodes: nodes.remove(uid).unwrap_or_default(),
                object,
            });
        }
    }
    out
}

/// `matchLabels` of a workload's `spec.selector` as a label selector (`app=web,tier=front`),
/// to narrow the lists of its pods; `None` when it has match expressions (or none at all):
/// then the whole namespace is listed and the owner chain alone decides.
fn selector_of(obj: &Value) -> Option<String> {
    let sel = obj.pointer("/spec/selector")?;
    if sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_some_and(|e| !e.is_empty())
    {
        return None;
    }
    let labels = sel.get("matchLabels")?.as_object()?;
    let parts: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// The kind between a workload and its pods, when there is one.
fn intermediate(r: &ResourceType) -> Option<ResourceType> {
    match r.kind {
        "Deployment" => Some(REPLICA_SET),
        "CronJob" => Some(JOB),
        _ => None,
    }
}

impl Cluster {
    /// The namespace lists are scoped to: `None` with `-A`.
    pub fn scope(&self) -> Option<&str> {
        (!self.all_namespaces).then_some(self.namespace.as_str())
    }

    /// Reads `selection` (see the module documentation) and the kubelet settings of the nodes
    /// its pods run on.
    ///
    /// # Errors
    /// The first API error, as kubectl prints it (a named object that is not there, a 403 on a
    /// list); a node whose settings cannot be read is not an error
    /// ([`NodeSettings::Assumed`]).
    pub async fn read_workloads(&self, selection: &Selection) -> Result<Workloads, ClusterError> {
        let (objects, namespaces) = match selection {
            Selection::Everything => {
                let lists =
                    futures_util::future::try_join_all(WORKLOADS.iter().map(|r| async move {
                        Ok((*r, self.list_served(r, self.scope(), None).await?))
                    }))
                    .await?;
                (top_level(lists), vec![self.scope().map(str::to_string)])
            }
            Selection::Targets(targets) => {
                let mut objects = Vec::new();
                for t in targets {
                    objects.push(self.read_target(t).await?);
                }
                (objects, vec![Some(self.namespace.clone())])
            }
        };
        let lists = futures_util::future::try_join_all(namespaces.iter().flat_map(|ns| {
            [SERVICE, POD_DISRUPTION_BUDGET]
                .map(|r| async move { self.list_served(&r, ns.as_deref(), None).await })
        }))
        .await?;
        let mut context: Vec<Value> = lists.into_iter().flatten().collect();
        let mut objects = objects;
        for o in &mut objects {
            strip_unread(&mut o.object);
        }
        context.iter_mut().for_each(strip_unread);
        let all: BTreeSet<String> = objects.iter().flat_map(|o| o.nodes.clone()).collect();
        let nodes = self.node_settings(all).await;
        Ok(Workloads {
            objects,
            context,
            nodes,
        })
    }

    /// [`Cluster::list_objects`], where a kind the server does not serve (a 404 for the
    /// collection, as discovery would have left it out for kubectl) has no objects.
    async fn list_served(
        &self,
        r: &ResourceType,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<Value>, ClusterError> {
        match self.list_objects(r, namespace, label_selector).await {
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            other => other,
        }
    }

    /// One named object, with the nodes of its pods.
    async fn read_target(&self, t: &Target) -> Result<LiveObject, ClusterError> {
        let ns = self.namespace.clone();
        let obj = self.get_object(&t.resource, &ns, &t.name).await?;
        let mut lists = vec![(t.resource, vec![obj.clone()])];
        if t.resource != POD {
            let sel = selector_of(&obj);
            if let Some(mid) = intermediate(&t.resource) {
                lists.push((
                    mid,
                    self.list_served(&mid, Some(&ns), sel.as_deref()).await?,
                ));
            }
            // A CronJob's selector is its Jobs'; its pods carry the Job's own labels.
            let pod_sel = if t.resource == CRON_JOB { None } else { sel };
            lists.push((
                POD,
                self.list_served(&POD, Some(&ns), pod_sel.as_deref())
                    .await?,
            ));
        }
        let uid = meta_str(&obj, "uid").to_string();
        let top = top_level(lists);
        Ok(top
            .into_iter()
            .find(|o| meta_str(&o.object, "uid") == uid)
            .unwrap_or(LiveObject {
                resource: t.resource,
                namespace: ns,
                name: t.name.clone(),
                object: obj,
                nodes: BTreeSet::new(),
            }))
    }

    /// The kubelet settings of each node ([`NodeSettings`]).
    pub async fn node_settings(&self, nodes: BTreeSet<String>) -> BTreeMap<String, NodeSettings> {
        let mut out = BTreeMap::new();
        let mut rest = nodes.into_iter();
        // The first alone: when RBAC refuses nodes/proxy it refuses it for every node.
        let Some(first) = rest.next() else {
            return out;
        };
        let s = self.read_node(&first).await;
        let refused = match &s {
            Err(e)
                if matches!(e, ClusterError::Unauthorized)
                    || matches!(e, ClusterError::Api { code: 403, .. }) =>
            {
                Some(e.to_string())
            }
            _ => None,
        };
        out.insert(first, settings(s));
        if let Some(why) = refused {
            for n in rest {
                out.insert(n, NodeSettings::Assumed { why: why.clone() });
            }
            return out;
        }
        let read: Vec<(String, NodeSettings)> = stream::iter(rest)
            .map(|n| async move {
                let s = settings(self.read_node(&n).await);
                (n, s)
            })
            .buffer_unordered(NODE_READS_AT_ONCE)
            .collect()
            .await;
        out.extend(read);
        out
    }

    async fn read_node(
        &self,
        node: &str,
    ) -> Result<Result<crate::configz::NodeKubelet, String>, ClusterError> {
        let v = self.node_proxy_get(node, "configz").await?;
        Ok(parse_configz(&v))
    }
}

fn settings(r: Result<Result<crate::configz::NodeKubelet, String>, ClusterError>) -> NodeSettings {
    match r {
        Ok(Ok(k)) => NodeSettings::Read(k),
        Ok(Err(why)) => NodeSettings::Assumed { why },
        Err(e) => NodeSettings::Assumed { why: e.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::DEPLOYMENT;
    use serde_json::json;

    fn obj(kind: &str, name: &str, uid: &str, owner: Option<&str>, node: Option<&str>) -> Value {
        let mut v =
            json!({"kind": kind, "metadata": {"name": name, "namespace": "shop", "uid": uid}});
        if let Some(o) = owner {
            v["metadata"]["ownerReferences"] = json!([{"uid": o, "controller": true}]);
        }
        if let Some(n) = node {
            v["spec"] = json!({"nodeName": n});
        }
        v
    }

    #[test]
    fn owned_objects_are_read_through_their_owners() {
        let lists = vec![
            (DEPLOYMENT, vec![obj("Deployment", "web", "d1", None, None)]),
            (
                REPLICA_SET,
                vec![
                    obj("ReplicaSet", "web-1", "r1", Some("d1"), None),
                    obj("ReplicaSet", "web-2", "r2", Some("d1"), None),
                    obj("ReplicaSet", "bare", "r3", None, None),
                ],
            ),
            (
                POD,
                vec![
                    obj("Pod", "web-1-a", "p1", Some("r1"), Some("n1")),
                    obj("Pod", "web-2-b", "p2", Some("r2"), Some("n2")),
                    obj("Pod", "web-2-c", "p3", Some("r2"), Some("n1")),
                    obj("Pod", "lonely", "p4", None, Some("n3")),
                    obj("Pod", "operated", "p5", Some("crd-uid"), Some("n4")),
                ],
            ),
        ];
        let top = top_level(lists);
        let got: Vec<(String, Vec<String>)> = top
            .iter()
            .map(|o| (o.reference(), o.nodes.iter().cloned().collect()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("deployment/web".into(), vec!["n1".into(), "n2".into()]),
                ("replicaset/bare".into(), vec![]),
                ("pod/lonely".into(), vec!["n3".into()]),
                ("pod/operated".into(), vec!["n4".into()]),
            ]
        );
    }

    #[test]
    fn an_owner_cycle_does_not_loop() {
        let lists = vec![
            (
                REPLICA_SET,
                vec![
                    obj("ReplicaSet", "a", "a", Some("b"), None),
                    obj("ReplicaSet", "b", "b", Some("a"), None),
                ],
            ),
            (POD, vec![obj("Pod", "p", "p", Some("a"), Some("n"))]),
        ];
        // Both are owned by a read object: neither is top-level, and nothing hangs.
        assert!(top_level(lists).is_empty());
    }

    #[test]
    fn the_config_maps_and_secrets_a_pod_takes_values_from() {
        let pod = json!({"spec": {"containers": [{"envFrom": [
            {"configMapRef": {"name": "settings"}}, {"secretRef": {"name": "creds", "optional": true}}
        ]}], "volumes": [
            {"name": "a", "configMap": {"name": "files"}},
            {"name": "b", "secret": {"secretName": "tls"}},
            {"name": "c", "projected": {"sources": [{"secret": {"name": "token"}}]}}
        ]}});
        let got: Vec<(&str, String)> = env_sources(&pod).into_iter().collect();
        assert_eq!(
            got,
            vec![
                ("ConfigMap", "files".to_string()),
                ("ConfigMap", "settings".into()),
                ("Secret", "creds".into()),
                ("Secret", "tls".into()),
                ("Secret", "token".into()),
            ]
        );
    }

    #[test]
    fn what_no_rule_reads_is_dropped() {
        let mut v = json!({"kind": "Deployment", "metadata": {"name": "web",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {LAST_APPLIED: "{...}", "team": "shop"}},
            "spec": {"replicas": 2}, "status": {"replicas": 2}});
        strip_unread(&mut v);
        assert_eq!(
            v,
            json!({"kind": "Deployment", "metadata": {"name": "web", "annotations": {"team": "shop"}},
                "spec": {"replicas": 2}})
        );
    }

    #[test]
    fn selectors_narrow_the_lists_only_when_they_are_plain_labels() {
        assert_eq!(
            selector_of(
                &json!({"spec": {"selector": {"matchLabels": {"app": "web", "tier": "front"}}}})
            ),
            Some("app=web,tier=front".into())
        );
        assert_eq!(
            selector_of(
                &json!({"spec": {"selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}}})
            ),
            None
        );
        assert_eq!(selector_of(&json!({"spec": {}})), None);
    }
}
