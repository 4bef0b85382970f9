//! Server-side printing (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): the
//! `meta.k8s.io/v1` Table kube-apiserver returns, with kubectl's own columns and cells.
//!
//! Upstream: `pkg/printers/internalversion/printers.go` (`AddHandlers`: the column
//! definitions; `printPod`, `printNamespace`, `printNode`, `printEvent`, `printConfigMap`,
//! `printSecret`, `printService`, `printLease`), `staging/src/k8s.io/apimachinery/pkg/util/
//! duration/duration.go` (`HumanDuration`), and the default table convertor of
//! `staging/src/k8s.io/apiserver/pkg/registry/rest/table.go` (NAME, CREATED AT).
//! Kubernetes 1.29 to 1.37 (the restart column's "(5s ago)" since 1.28).

use serde_json::{json, Value};

use podgrace_core::rules::podstatus::{ContainerState, ContainerStatus, Terminated};
use podgrace_core::rules::printers::{human_duration, print_pod, PodForPrint};
use podgrace_core::KubeVersion;

use crate::meta;

/// `translateTimestampSince`: `<unknown>` for a missing time, else the age at `now`.
fn since(ts: Option<&Value>, now: jiff::Timestamp) -> String {
    match ts.and_then(Value::as_str).and_then(meta::parse_time) {
        None => "<unknown>".into(),
        Some(t) => {
            // The age whole seconds down, as before; kubectl's rule itself is core's.
            let d = now.as_millisecond() - t.as_millisecond();
            human_duration(d.div_euclid(1000).saturating_mul(1000))
        }
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn col(name: &str, ty: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The column definitions of `kind` (the printer's `TableColumnDefinition`s).
pub fn columns(kind: &str) -> Vec<Value> {
    let name = || col("Name", "string", "name", NAME_DESC, 0);
    let age = || col("Age", "string", "", AGE_DESC, 0);
    match kind {
        "Pod" => vec![
            name(),
            col("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0),
            col("Status", "string", "", "The aggregate status of the containers in this pod.", 0),
            col("Restarts", "string", "", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0),
            age(),
            col("IP", "string", "", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1),
            col("Node", "string", "", "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements.", 1),
            col("Nominated Node", "string", "", "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.", 1),
            col("Readiness Gates", "string", "", "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates", 1),
        ],
        "Namespace" => vec![
            name(),
            col("Status", "string", "", "The status of the namespace", 0),
            age(),
        ],
        "Node" => vec![
            name(),
            col("Status", "string", "", "The status of the node", 0),
            col("Roles", "string", "", "The roles of the node", 0),
            age(),
            col("Version", "string", "", "Kubelet Version reported by the node.", 0),
            col("Internal-IP", "string", "", "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).", 1),
            col("External-IP", "string", "", "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).", 1),
            col("OS-Image", "string", "", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
            col("Kernel-Version", "string", "", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
            col("Container-Runtime", "string", "", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1),
        ],
        "Event" => vec![
            col("Last Seen", "string", "", "Time when last this event was observed", 0),
            col("Type", "string", "", "Type of this event (Normal, Warning), new types could be added in the future.", 0),
            col("Reason", "string", "", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0),
            col("Object", "string", "", "The object that this event is about. Mapped from the involvedObject (core/v1) or regarding (events.k8s.io/v1) field.", 0),
            col("Subobject", "string", "", "The specific part of the object that this event is about.", 1),
            col("Source", "string", "", "The component reporting this event. Should be a short machine understandable string.", 1),
            col("Message", "string", "", "A human-readable description of the status of this operation.", 0),
            col("First Seen", "string", "", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1),
            col("Count", "string", "", "The number of times this event has occurred.", 1),
            col("Name", "string", "name", NAME_DESC, 1),
        ],
        "ConfigMap" => vec![
            name(),
            col("Data", "string", "", "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.", 0),
            age(),
        ],
        "Secret" => vec![
            name(),
            col("Type", "string", "", "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types", 0),
            col("Data", "string", "", "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4", 0),
            age(),
        ],
        "Service" => vec![
            name(),
            col("Type", "string", "", "type determines how the Service is exposed. Defaults to ClusterIP.", 0),
            col("Cluster-IP", "string", "", "clusterIP is the IP address of the service and is usually assigned randomly.", 0),
            col("External-IP", "string", "", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.", 0),
            col("Port(s)", "string", "", "The list of ports that are exposed by this service.", 0),
            age(),
            col("Selector", "string", "", "Route service traffic to pods with label keys and values matching this selector.", 1),
        ],
        "Lease" => vec![
            name(),
            col("Holder", "string", "", "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.", 0),
            age(),
        ],
        "Deployment" => vec![
            name(),
            col("Ready", "string", "", "Number of the pod with ready state", 0),
            col("Up-to-date", "string", "", "Total number of non-terminating pods targeted by this deployment that have the desired template spec.", 0),
            col("Available", "string", "", "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.", 0),
            age(),
            col("Containers", "string", "", "Names of each container in the template.", 1),
            col("Images", "string", "", "Images referenced by each container in the template.", 1),
            col("Selector", "string", "", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.", 1),
        ],
        "ReplicaSet" => vec![
            name(),
            col("Desired", "integer", "", "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset", 0),
            col("Current", "integer", "", "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset", 0),
            col("Ready", "integer", "", "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.", 0),
            age(),
            col("Containers", "string", "", "Names of each container in the template.", 1),
            col("Images", "string", "", "Images referenced by each container in the template.", 1),
            col("Selector", "string", "", "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors", 1),
        ],
        "PodDisruptionBudget" => vec![
            name(),
            col("Min Available", "string", "", "The minimum number of pods that must be available.", 0),
            col("Max Unavailable", "string", "", "The maximum number of pods that may be unavailable.", 0),
            col("Allowed Disruptions", "integer", "", "Calculated number of pods that may be disrupted at this time.", 0),
            age(),
        ],
        "EndpointSlice" => vec![
            name(),
            col("AddressType", "string", "", "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type.", 0),
            col("Ports", "string", "", "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list.", 0),
            col("Endpoints", "string", "", "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.", 0),
            age(),
        ],
        _ => vec![
            name(),
            col("Created At", "date", "", AGE_DESC, 0),
        ],
    }
}

/// `layoutContainerCells`: the template's container names and images, comma-separated.
fn container_cells(obj: &Value) -> (String, String) {
    let cs = arr(obj, "/spec/template/spec/containers");
    let names: Vec<&str> = cs.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, "/image")).collect();
    (names.join(","), images.join(","))
}

fn selector_string(obj: &Value) -> String {
    let sel: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector> = obj
        .pointer("/spec/selector")
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    podgrace_core::rules::labels::format(sel.as_ref())
}

fn int(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// `listWithMoreString`: at most 3 items, then `+ N more...`; `<unset>` for none.
fn list_with_more(items: Vec<String>) -> String {
    let count = items.len();
    if count == 0 {
        return "<unset>".into();
    }
    let shown = items.into_iter().take(3).collect::<Vec<_>>().join(",");
    if count > 3 {
        format!("{shown} + {} more...", count - 3)
    } else {
        shown
    }
}

/// The cells of `obj` of `kind` at `now`.
pub fn cells(kind: &str, obj: &Value, now: jiff::Timestamp, version: KubeVersion) -> Vec<Value> {
    let name = json!(meta::name(obj));
    let age = || json!(since(obj.pointer("/metadata/creationTimestamp"), now));
    match kind {
        "Pod" => pod_cells(obj, now, version),
        "Namespace" => vec![name, json!(s(obj, "/status/phase")), age()],
        "Node" => node_cells(obj, now),
        // An events.k8s.io/v1 Event (no `involvedObject`, which a core Event requires; list
        // items carry no apiVersion) is printed through its core form, as upstream converts it
        // to the internal Event before `printEvent` (note → MESSAGE, regarding → OBJECT).
        "Event" if obj.get("involvedObject").is_none() => {
            event_cells(&crate::registry::event_from_events_v1(obj), now)
        }
        "Event" => event_cells(obj, now),
        "ConfigMap" => {
            let n = obj
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())
                + obj
                    .get("binaryData")
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len());
            vec![name, json!(n), age()]
        }
        "Secret" => {
            let n = obj
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len());
            vec![name, json!(s(obj, "/type")), json!(n), age()]
        }
        "Service" => service_cells(obj, now),
        "Lease" => {
            let holder = obj.pointer("/spec/holderIdentity").and_then(Value::as_str);
            vec![name, json!(holder.unwrap_or("<none>")), age()]
        }
        "Deployment" => {
            let (c, i) = container_cells(obj);
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    int(obj, "/status/readyReplicas"),
                    int(obj, "/spec/replicas")
                )),
                json!(int(obj, "/status/updatedReplicas")),
                json!(int(obj, "/status/availableReplicas")),
                age(),
                json!(c),
                json!(i),
                json!(selector_string(obj)),
            ]
        }
        "ReplicaSet" => {
            let (c, i) = container_cells(obj);
            vec![
                name,
                json!(int(obj, "/spec/replicas")),
                json!(int(obj, "/status/replicas")),
                json!(int(obj, "/status/readyReplicas")),
                age(),
                json!(c),
                json!(i),
                json!(selector_string(obj)),
            ]
        }
        "PodDisruptionBudget" => {
            let show = |p: &str| match obj.pointer(p) {
                Some(Value::String(v)) => v.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => "N/A".to_string(),
            };
            vec![
                name,
                json!(show("/spec/minAvailable")),
                json!(show("/spec/maxUnavailable")),
                json!(int(obj, "/status/disruptionsAllowed")),
                age(),
            ]
        }
        "EndpointSlice" => {
            let ports: Vec<String> = arr(obj, "/ports")
                .iter()
                .map(|p| match p.get("port").and_then(Value::as_i64) {
                    Some(n) => n.to_string(),
                    None => p
                        .get("name")
                        .and_then(Value::as_str)
                        .map_or("*".into(), str::to_string),
                })
                .collect();
            let addrs: Vec<String> = arr(obj, "/endpoints")
                .iter()
                .flat_map(|e| {
                    arr(e, "/addresses")
                        .iter()
                        .filter_map(|a| a.as_str().map(str::to_string))
                        .collect::<Vec<_>>()
                })
                .collect();
            vec![
                name,
                json!(s(obj, "/addressType")),
                json!(list_with_more(ports)),
                json!(list_with_more(addrs)),
                age(),
            ]
        }
        _ => vec![name, json!(s(obj, "/metadata/creationTimestamp"))],
    }
}

fn condition_true(pod: &Value, ty: &str) -> bool {
    arr(pod, "/status/conditions")
        .iter()
        .any(|c| s(c, "/type") == ty && s(c, "/status") == "True")
}

fn ms(v: Option<&Value>) -> Option<i64> {
    v.and_then(Value::as_str)
        .and_then(meta::parse_time)
        .map(|t| t.as_millisecond())
}

fn terminated(t: &Value) -> Terminated {
    Terminated {
        exit_code: t.get("exitCode").and_then(Value::as_i64).unwrap_or(0) as i32,
        reason: s(t, "/reason").to_string(),
        signal: t.get("signal").and_then(Value::as_i64).unwrap_or(0) as i32,
        finished_at_ms: ms(t.get("finishedAt")),
    }
}

fn container_status(cs: &Value) -> ContainerStatus {
    let state = if let Some(t) = cs.pointer("/state/terminated") {
        ContainerState::Terminated(terminated(t))
    } else if cs.pointer("/state/running").is_some() {
        ContainerState::Running
    } else if let Some(w) = cs.pointer("/state/waiting") {
        ContainerState::Waiting {
            reason: s(w, "/reason").to_string(),
        }
    } else {
        ContainerState::Unset
    };
    ContainerStatus {
        name: s(cs, "/name").to_string(),
        state,
        last_terminated: cs.pointer("/lastState/terminated").map(terminated),
        ready: cs.get("ready").and_then(Value::as_bool).unwrap_or(false),
        started: cs.get("started").and_then(Value::as_bool),
        restart_count: cs.get("restartCount").and_then(Value::as_i64).unwrap_or(0) as i32,
    }
}

/// What `printPod` reads of a pod object.
pub fn pod_for_print(pod: &Value) -> PodForPrint {
    PodForPrint {
        name: meta::name(pod).to_string(),
        containers: arr(pod, "/spec/containers").len(),
        init_containers: arr(pod, "/spec/initContainers")
            .iter()
            .map(|c| {
                (
                    s(c, "/name").to_string(),
                    s(c, "/restartPolicy") == "Always",
                )
            })
            .collect(),
        phase: s(pod, "/status/phase").to_string(),
        reason: s(pod, "/status/reason").to_string(),
        deletion_timestamp: pod
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null()),
        scheduling_gated: arr(pod, "/status/conditions")
            .iter()
            .any(|c| s(c, "/type") == "PodScheduled" && s(c, "/reason") == "SchedulingGated"),
        initialized: condition_true(pod, "Initialized"),
        ready_condition: arr(pod, "/status/conditions")
            .iter()
            .any(|c| s(c, "/type") == "Ready"),
        init_container_statuses: arr(pod, "/status/initContainerStatuses")
            .iter()
            .map(container_status)
            .collect(),
        container_statuses: arr(pod, "/status/containerStatuses")
            .iter()
            .map(container_status)
            .collect(),
        created_ms: ms(pod.pointer("/metadata/creationTimestamp")),
    }
}

/// `printPod`: NAME, READY, STATUS, RESTARTS, AGE from podgrace-core's rule for `version`,
/// then IP, NODE, NOMINATED NODE, READINESS GATES (the `-o wide` columns).
fn pod_cells(pod: &Value, now: jiff::Timestamp, version: KubeVersion) -> Vec<Value> {
    let row = print_pod(&pod_for_print(pod), now.as_millisecond(), version);
    let or_none = |v: &str| {
        if v.is_empty() {
            "<none>".to_string()
        } else {
            v.to_string()
        }
    };
    let ip = arr(pod, "/status/podIPs")
        .first()
        .map(|p| s(p, "/ip").to_string())
        .unwrap_or_default();
    let gates = arr(pod, "/spec/readinessGates");
    let gates_str = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let t = gates
            .iter()
            .filter(|g| condition_true(pod, s(g, "/conditionType")))
            .count();
        format!("{t}/{}", gates.len())
    };
    vec![
        json!(row.name),
        json!(row.ready),
        json!(row.status),
        json!(row.restarts),
        json!(row.age),
        json!(or_none(&ip)),
        json!(or_none(s(pod, "/spec/nodeName"))),
        json!(or_none(s(pod, "/status/nominatedNodeName"))),
        json!(gates_str),
    ]
}

fn node_cells(node: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let mut status: Vec<String> = Vec::new();
    let conds = arr(node, "/status/conditions");
    if let Some(c) = conds.iter().find(|c| s(c, "/type") == "Ready") {
        status.push(if s(c, "/status") == "True" {
            "Ready".into()
        } else {
            "NotReady".into()
        });
    }
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = meta::labels(node)
        .into_iter()
        .filter_map(|(k, v)| {
            if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                Some(r.to_string())
            } else if k == "kubernetes.io/role" {
                Some(v)
            } else {
                None
            }
        })
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let addr = |ty: &str| {
        arr(node, "/status/addresses")
            .iter()
            .find(|a| s(a, "/type") == ty)
            .map(|a| s(a, "/address").to_string())
            .unwrap_or_else(|| "<none>".into())
    };
    let info = |k: &str| {
        let v = s(node, &format!("/status/nodeInfo/{k}"));
        if v.is_empty() {
            "<unknown>".to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        json!(meta::name(node)),
        json!(status.join(",")),
        json!(roles),
        json!(since(node.pointer("/metadata/creationTimestamp"), now)),
        json!(s(node, "/status/nodeInfo/kubeletVersion")),
        json!(addr("InternalIP")),
        json!(addr("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

fn event_cells(ev: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let first = ev
        .get("firstTimestamp")
        .filter(|v| !v.is_null())
        .or_else(|| ev.get("eventTime").filter(|v| !v.is_null()))
        .or_else(|| ev.pointer("/metadata/creationTimestamp"));
    let last = ev
        .get("series")
        .and_then(|s| s.get("lastObservedTime"))
        .filter(|v| !v.is_null())
        .or_else(|| ev.get("lastTimestamp").filter(|v| !v.is_null()))
        .or(first);
    let first_seen = since(first, now);
    let last_seen = since(last, now);
    let count = ev
        .pointer("/series/count")
        .and_then(Value::as_i64)
        .or_else(|| ev.get("count").and_then(Value::as_i64))
        .unwrap_or(1);
    let obj = format!(
        "{}/{}",
        s(ev, "/involvedObject/kind").to_ascii_lowercase(),
        s(ev, "/involvedObject/name")
    );
    let source = {
        let comp = s(ev, "/source/component");
        let comp = if comp.is_empty() {
            s(ev, "/reportingComponent")
        } else {
            comp
        };
        let host = s(ev, "/source/host");
        let host = if host.is_empty() {
            s(ev, "/reportingInstance")
        } else {
            host
        };
        if host.is_empty() {
            comp.to_string()
        } else {
            format!("{comp}, {host}")
        }
    };
    vec![
        json!(last_seen),
        json!(s(ev, "/type")),
        json!(s(ev, "/reason")),
        json!(obj),
        json!(s(ev, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(ev, "/message").trim()),
        json!(first_seen),
        json!(count),
        json!(meta::name(ev)),
    ]
}

fn service_cells(svc: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let ty = s(svc, "/spec/type");
    let ty = if ty.is_empty() { "ClusterIP" } else { ty };
    let cluster_ip = s(svc, "/spec/clusterIP");
    let cluster_ip = if cluster_ip.is_empty() {
        "<none>"
    } else {
        cluster_ip
    };
    let mut external: Vec<String> = arr(svc, "/spec/externalIPs")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if ty == "LoadBalancer" {
        for i in arr(svc, "/status/loadBalancer/ingress") {
            let ip = s(i, "/ip");
            let host = s(i, "/hostname");
            external.push(if ip.is_empty() {
                host.to_string()
            } else {
                ip.to_string()
            });
        }
    }
    let external = if external.is_empty() {
        if ty == "LoadBalancer" {
            "<pending>".to_string()
        } else if ty == "ExternalName" {
            s(svc, "/spec/externalName").to_string()
        } else {
            "<none>".to_string()
        }
    } else {
        external.join(",")
    };
    let ports: Vec<String> = arr(svc, "/spec/ports")
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = s(p, "/protocol");
            let proto = if proto.is_empty() { "TCP" } else { proto };
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(np) if np != 0 => format!("{port}:{np}/{proto}"),
                _ => format!("{port}/{proto}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    let selector = svc
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
        .map(|m| {
            let mut v: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect();
            v.sort();
            v.join(",")
        })
        .unwrap_or_else(|| "<none>".into());
    vec![
        json!(meta::name(svc)),
        json!(ty),
        json!(cluster_ip),
        json!(external),
        json!(ports),
        json!(since(svc.pointer("/metadata/creationTimestamp"), now)),
        json!(selector),
    ]
}

/// `includeObject` of the Table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// `None`: rows without their objects.
    None,
    /// `Metadata` (the default): each row's object as `PartialObjectMetadata`.
    Metadata,
    /// `Object`: each row's full object.
    Object,
}

/// One row: its cells and the object as asked for (`PartialObjectMetadata` by default).
pub fn row(
    kind: &str,
    obj: &Value,
    now: jiff::Timestamp,
    version: KubeVersion,
    include: IncludeObject,
) -> Value {
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => obj.clone(),
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
        }),
    };
    let mut r = json!({"cells": cells(kind, obj, now, version), "object": object});
    let phase = obj.pointer("/status/phase").and_then(Value::as_str);
    if kind == "Pod" && matches!(phase, Some("Succeeded") | Some("Failed")) {
        let completed = phase == Some("Succeeded");
        r["conditions"] = json!([{"type": "Completed", "status": "True", "reason": if completed {"Succeeded"} else {"Failed"}, "message": if completed {"The pod has completed successfully."} else {"The pod failed."}}]);
    }
    r
}

/// A Table of `objects`; `headers` false leaves the column definitions out (watch events after
/// the first, as `watchEmbeddedEncoder` sets `NoHeaders`).
pub fn table(
    kind: &str,
    objects: &[&Value],
    now: jiff::Timestamp,
    version: KubeVersion,
    include: IncludeObject,
    headers: bool,
    list_meta: Value,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": if headers { Value::Array(columns(kind)) } else { Value::Null },
        "rows": objects.iter().map(|o| row(kind, o, now, version, include)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-12-01T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn human_durations_match_apimachinery() {
        for (s, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (10 * 3600, "10h"),
            (50 * 3600, "2d2h"),
            (30 * 86400, "30d"),
        ] {
            assert_eq!(human_duration(s * 1000), want, "{s}");
        }
    }

    #[test]
    fn pod_status_column_follows_print_pod() {
        let base = |status: Value, deleting: bool| {
            let mut p = json!({
                "metadata": {"name": "web", "creationTimestamp": "2026-12-01T09:59:51Z"},
                "spec": {"containers": [{"name": "app"}], "nodeName": "node"},
                "status": status,
            });
            if deleting {
                p["metadata"]["deletionTimestamp"] = json!("2026-12-01T10:00:05Z");
            }
            p
        };
        let running = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": "2026-12-01T09:59:52Z"}}}]});
        let c = pod_cells(&base(running.clone(), false), now(), KubeVersion::LATEST);
        assert_eq!(
            c[..5],
            [
                json!("web"),
                json!("1/1"),
                json!("Running"),
                json!("0"),
                json!("9s")
            ]
        );
        assert_eq!(
            pod_cells(&base(running, true), now(), KubeVersion::LATEST)[2],
            "Terminating"
        );
        let failed = json!({"phase": "Failed", "containerStatuses": [{"name": "app", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]});
        let c = pod_cells(&base(failed, true), now(), KubeVersion::LATEST);
        assert_eq!((c[1].clone(), c[2].clone()), (json!("0/1"), json!("Error")));
        let done = json!({"phase": "Succeeded", "containerStatuses": [{"name": "app", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]});
        assert_eq!(
            pod_cells(&base(done.clone(), true), now(), KubeVersion::LATEST)[2],
            "Completed"
        );
        // Before 1.31 a deleted pod showed Terminating whatever its phase.
        assert_eq!(
            pod_cells(&base(done, true), now(), KubeVersion::new(1, 30))[2],
            "Terminating"
        );
        let crash = json!({"phase": "Running", "containerStatuses": [{"name": "app", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-12-01T09:59:40Z"}}}]});
        let c = pod_cells(&base(crash, false), now(), KubeVersion::LATEST);
        assert_eq!(
            (c[2].clone(), c[3].clone()),
            (json!("CrashLoopBackOff"), json!("3 (20s ago)"))
        );
        let pending = json!({"phase": "Pending"});
        let c = pod_cells(&base(pending, false), now(), KubeVersion::LATEST);
        assert_eq!(
            (c[1].clone(), c[2].clone(), c[5].clone()),
            (json!("0/1"), json!("Pending"), json!("<none>"))
        );
    }

    #[test]
    fn events_k8s_io_events_fill_the_same_columns_as_core_ones() {
        let core = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default", "creationTimestamp": "2026-12-01T09:59:00Z"},
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "reason": "Killing", "message": "Stopping container app", "type": "Normal",
            "source": {"component": "kubelet", "host": "node"},
            "firstTimestamp": "2026-12-01T09:59:00Z", "lastTimestamp": "2026-12-01T09:59:30Z", "count": 2});
        let mut v1 = crate::registry::event_to_events_v1(&core);
        // As a list item: no apiVersion or kind.
        v1.as_object_mut().unwrap().remove("apiVersion");
        let want = vec![
            json!("30s"),
            json!("Normal"),
            json!("Killing"),
            json!("pod/web"),
            json!("spec.containers{app}"),
            json!("kubelet, node"),
            json!("Stopping container app"),
            json!("60s"),
            json!(2),
            json!("web.1"),
        ];
        assert_eq!(cells("Event", &core, now(), KubeVersion::default()), want);
        assert_eq!(cells("Event", &v1, now(), KubeVersion::default()), want);
    }
}
