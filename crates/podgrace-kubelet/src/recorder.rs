//! The kubelet's events as `v1` Event objects, so that `kubectl describe pod` and `kubectl get
//! events -w` show them: named `POD.<unix nanoseconds in hex>`, `source` `{component: kubelet,
//! host: NODE}`, `reportingComponent` kubelet, `reportingInstance` NODE, `count` 1 and
//! `firstTimestamp`/`lastTimestamp` at the event's time (as recorded on 1.32,
//! `shared/cases/real-cluster-1.32.md` a), `involvedObject.fieldPath`
//! `spec.containers{NAME}` (or `spec.initContainers{NAME}`) for a container's event. An event
//! equal to an earlier one (same reason, message, type and object) raises that one's `count`
//! and `lastTimestamp` instead, as client-go's `EventCorrelator` does.
//!
//! Upstream: `staging/src/k8s.io/client-go/tools/record/event.go` (`makeEvent`, the name),
//! `events_cache.go` (`EventCorrelator`, `eventObserve`: the count and the patch),
//! `pkg/kubelet/kubelet.go` (the recorder's source), `pkg/kubelet/container/ref.go`
//! (`GenerateContainerRef`: the field path).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Event as ApiEvent;
use kube::api::{Patch, PatchParams, PostParams};
use podgrace_node::events::Event;
use serde_json::{json, Value};

use crate::status::rfc3339;
use crate::Clock;

/// The object the events are about: a pod, or the Node ([`InvolvedPod::node`]).
#[derive(Debug, Clone)]
pub struct InvolvedPod {
    /// `involvedObject.kind`: `Pod`, or `Node` for the kubelet's node events.
    pub kind: &'static str,
    /// `involvedObject.namespace`, also the Event's own namespace; empty for the Node (whose
    /// events go to `default`, as client-go's recorder puts an event of a cluster-scoped
    /// object).
    pub namespace: String,
    /// `involvedObject.name`, the prefix of the Event's name.
    pub name: String,
    /// `involvedObject.uid`.
    pub uid: String,
    /// `involvedObject.resourceVersion`: the pod's version the kubelet last saw.
    pub resource_version: String,
    /// The names of `spec.initContainers` (the others are in `spec.containers`).
    pub init_containers: Vec<String>,
}

impl InvolvedPod {
    /// The kubelet's `nodeRef`: kind `Node`, the node's name as its name and UID.
    ///
    /// Upstream: `pkg/kubelet/kubelet.go` (`nodeRef`).
    pub fn node(name: &str) -> InvolvedPod {
        InvolvedPod {
            kind: "Node",
            namespace: String::new(),
            name: name.to_string(),
            uid: name.to_string(),
            resource_version: String::new(),
            init_containers: Vec::new(),
        }
    }

    /// The namespace the Event object is created in.
    pub fn event_namespace(&self) -> &str {
        if self.namespace.is_empty() {
            "default"
        } else {
            &self.namespace
        }
    }
}

/// `involvedObject.fieldPath` of a container's event.
pub fn field_path(pod: &InvolvedPod, container: &str) -> String {
    if pod.init_containers.iter().any(|c| c == container) {
        format!("spec.initContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
}

/// The Event object of `e` (count 1).
pub fn event_object(pod: &InvolvedPod, node: &str, e: &Event, at_ms: i64, at_ns: i128) -> Value {
    let mut involved = if pod.kind == "Node" {
        json!({"kind": "Node", "name": pod.name, "uid": pod.uid, "apiVersion": "v1"})
    } else {
        json!({
            "kind": pod.kind,
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
            "apiVersion": "v1",
            "resourceVersion": pod.resource_version,
        })
    };
    if let Some(c) = &e.container {
        involved["fieldPath"] = json!(field_path(pod, c));
    }
    let ts = rfc3339(at_ms);
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{}.{:x}", pod.name, at_ns), "namespace": pod.event_namespace()},
        "involvedObject": involved,
        "reason": e.reason,
        "message": e.message,
        "source": {"component": "kubelet", "host": node},
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "count": 1,
        "type": e.kind.as_str(),
        "eventTime": null,
        "reportingComponent": "kubelet",
        "reportingInstance": node,
    })
}

/// Writes the events of one pod, in order, as they come.
pub struct Recorder {
    client: kube::Client,
    pod: InvolvedPod,
    node: String,
    clock: Clock,
    /// (type, reason, message, fieldPath) → (event name, count).
    seen: HashMap<(String, String, String, String), (String, i32)>,
}

impl Recorder {
    /// A recorder for `pod`'s events on `node`, their times from `clock`; it writes through
    /// `client`.
    pub fn new(client: kube::Client, pod: InvolvedPod, node: String, clock: Clock) -> Self {
        Recorder {
            client,
            pod,
            node,
            clock,
            seen: HashMap::new(),
        }
    }

    /// Writes `e` (a create, or a patch of the equal earlier event). Errors are logged: events
    /// are best effort, as the kubelet's are.
    pub async fn record(&mut self, e: &Event) {
        let api: kube::Api<ApiEvent> =
            kube::Api::namespaced(self.client.clone(), self.pod.event_namespace());
        let at_ms = self.clock.ms(e.at);
        let key = (
            e.kind.as_str().to_string(),
            e.reason.to_string(),
            e.message.clone(),
            e.container
                .as_deref()
                .map(|c| field_path(&self.pod, c))
                .unwrap_or_default(),
        );
        if let Some((name, count)) = self.seen.get_mut(&key) {
            *count += 1;
            let patch = json!({"count": *count, "lastTimestamp": rfc3339(at_ms)});
            if let Err(err) = api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::debug!(error = %err, "patching an event");
            }
            return;
        }
        let at_ns = i128::from(at_ms) * 1_000_000 + i128::from(self.seen.len() as i64);
        let v = event_object(&self.pod, &self.node, e, at_ms, at_ns);
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let Ok(obj) = serde_json::from_value::<ApiEvent>(v) else {
            return;
        };
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {
                self.seen.insert(key, (name, 1));
            }
            Err(err) => tracing::debug!(error = %err, "creating an event"),
        }
    }
}
