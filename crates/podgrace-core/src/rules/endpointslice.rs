//! The EndpointSlice controller's reconciler: from a Service and the pods it selects, the
//! slices to create, update and delete, each endpoint with its addresses, conditions
//! (ready / serving / terminating, `publishNotReadyAddresses`), target reference, node and
//! zone, and each slice's ports resolved from the Service's target ports (numbers, or names
//! looked up in the pod's containers and native sidecars).
//!
//! Upstream: `staging/src/k8s.io/endpointslice/reconciler.go` (`Reconcile`,
//! `reconcileByAddressType`, `reconcileByPortMapping`, `finalize`), `utils.go`
//! (`podToEndpoint`, `getEndpointPorts`, `getEndpointAddresses`, `newEndpointSlice`,
//! `setEndpointSliceLabels`, `getSliceToFill`, `getAddressTypesForService`, `FindPort`,
//! `ownedBy`), `util/controller_utils.go` (`ShouldPodBeInEndpoints`, `ShouldSetHostname`,
//! `EndpointsEqualBeyondHash`), `util/endpointset.go`. Read at the 1.36 tree (terminating
//! endpoints GA since 1.26; native sidecar ports since 1.29). Topology hints and traffic
//! distribution are not modelled (one node, no zones). Where upstream picks from a Go map
//! (`PopAny`, `UnsortedList`) the order here is the key order, deterministically.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::endpoints::{pod_to_endpoint_conditions, should_pod_be_in_endpoints, PodPhase};
use super::podutil::{is_pod_ready, new_controller_ref, phase};

/// The controller's name in `endpointslice.kubernetes.io/managed-by`.
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// `kubernetes.io/service-name`.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// `endpointslice.kubernetes.io/managed-by`.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// `service.kubernetes.io/headless`.
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// `endpoints.kubernetes.io/last-change-trigger-time`.
pub const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// `--max-endpoints-per-slice`' default.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

fn pod_phase(pod: &Pod) -> PodPhase {
    match phase(pod) {
        "Running" => PodPhase::Running,
        "Succeeded" => PodPhase::Succeeded,
        "Failed" => PodPhase::Failed,
        "Unknown" => PodPhase::Unknown,
        _ => PodPhase::Pending,
    }
}

fn pod_ips(pod: &Pod) -> Vec<String> {
    let st = pod.status.clone().unwrap_or_default();
    let mut ips: Vec<String> = st
        .pod_ips
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.ip)
        .collect();
    if ips.is_empty() {
        ips.extend(st.pod_ip);
    }
    ips
}

/// `ShouldPodBeInEndpoints(pod, true)`: not terminal and has an IP (terminating pods stay).
pub fn should_pod_be_in_slices(pod: &Pod) -> bool {
    should_pod_be_in_endpoints(
        pod_phase(pod),
        !pod_ips(pod).is_empty(),
        pod.metadata.deletion_timestamp.is_some(),
        true,
    )
}

/// `podEndpointsChanged`: `(pod_changed, labels_changed)` between two versions of a pod: its
/// endpoint changed (the deletionTimestamp, readiness or pod IPs moved; name, namespace, uid
/// and node are immutable once it has an IP), and its Service membership may have (the labels,
/// hostname or subdomain moved). Upstream:
/// `staging/src/k8s.io/endpointslice/util/controller_utils.go` (`podEndpointsChanged`,
/// `hostNameAndDomainAreEqual`), 1.19 to 1.36.
pub fn pod_endpoints_changed(old: &Pod, new: &Pod) -> (bool, bool) {
    let host = |p: &Pod| {
        let s = p.spec.as_ref();
        (
            s.and_then(|s| s.hostname.clone()).unwrap_or_default(),
            s.and_then(|s| s.subdomain.clone()).unwrap_or_default(),
        )
    };
    let labels_changed = old.metadata.labels.clone().unwrap_or_default()
        != new.metadata.labels.clone().unwrap_or_default()
        || host(old) != host(new);
    let ips = |p: &Pod| -> Vec<String> {
        p.status
            .as_ref()
            .and_then(|s| s.pod_ips.as_ref())
            .map(|v| v.iter().map(|i| i.ip.clone()).collect())
            .unwrap_or_default()
    };
    let pod_changed = old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || is_pod_ready(old) != is_pod_ready(new)
        || ips(old) != ips(new);
    (pod_changed, labels_changed)
}

/// `GetServicesToUpdateOnPodChange`'s choice of Services, given the Services that select the
/// pod before (`old`) and after (`new`) the change: none when nothing relevant changed; the
/// new ones when only the endpoint changed; with the labels changed, both sets when the
/// endpoint changed too, else the Services it joined or left (`determineNeededServiceUpdates`).
/// Upstream: `staging/src/k8s.io/endpointslice/util/controller_utils.go`, 1.19 to 1.36.
pub fn services_to_update(
    (pod_changed, labels_changed): (bool, bool),
    old: &BTreeSet<String>,
    new: &BTreeSet<String>,
) -> BTreeSet<String> {
    match (pod_changed, labels_changed) {
        (false, false) => BTreeSet::new(),
        (true, false) => new.clone(),
        (true, true) => old.union(new).cloned().collect(),
        (false, true) => old.symmetric_difference(new).cloned().collect(),
    }
}

/// `getAddressTypesForService`: `IPv4`/`IPv6` from `ipFamilies`, else from the ClusterIP,
/// else both.
pub fn address_types(svc: &Service) -> Vec<String> {
    let spec = svc.spec.clone().unwrap_or_default();
    let mut out = BTreeSet::new();
    for f in spec.ip_families.iter().flatten() {
        match f.as_str() {
            "IPv4" => {
                out.insert("IPv4".to_string());
            }
            "IPv6" => {
                out.insert("IPv6".to_string());
            }
            _ => {}
        }
    }
    if !out.is_empty() {
        return out.into_iter().collect();
    }
    match spec.cluster_ip.as_deref() {
        Some(ip) if !ip.is_empty() && ip != "None" => {
            vec![if ip.contains(':') { "IPv6" } else { "IPv4" }.into()]
        }
        _ => vec!["IPv4".into(), "IPv6".into()],
    }
}

/// `FindPort`: the container port of `pod` a Service port targets (a number as it is, a name
/// looked up among the containers' and native sidecars' ports of the same protocol).
pub fn find_port(pod: &Pod, sp: &ServicePort) -> Option<i32> {
    let proto = sp.protocol.clone().unwrap_or_else(|| "TCP".into());
    match sp.target_port.clone().unwrap_or(IntOrString::Int(sp.port)) {
        IntOrString::Int(n) => Some(n),
        IntOrString::String(name) => {
            let spec = pod.spec.as_ref()?;
            let find = |cs: &[k8s_openapi::api::core::v1::Container], sidecars_only: bool| {
                cs.iter()
                    .filter(|c| !sidecars_only || c.restart_policy.as_deref() == Some("Always"))
                    .flat_map(|c| c.ports.iter().flatten())
                    .find(|p| {
                        p.name.as_deref() == Some(name.as_str())
                            && p.protocol.clone().unwrap_or_else(|| "TCP".into()) == proto
                    })
                    .map(|p| p.container_port)
            };
            find(&spec.containers, false)
                .or_else(|| find(spec.init_containers.as_deref().unwrap_or(&[]), true))
        }
    }
}

/// `getEndpointPorts`: the Service's ports resolved for `pod` (ports that do not resolve are
/// left out).
pub fn endpoint_ports(svc: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let spec = svc.spec.clone().unwrap_or_default();
    let ports = spec.ports.unwrap_or_default();
    if ports.is_empty() && spec.cluster_ip.as_deref() == Some("None") {
        return Vec::new();
    }
    ports
        .iter()
        .filter_map(|sp| {
            let n = find_port(pod, sp)?;
            Some(EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                port: Some(n),
                protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// `podToEndpoint`: the endpoint of `pod` in a slice of `address_type` (`zone`: the node's
/// `topology.kubernetes.io/zone` label, if any).
pub fn pod_to_endpoint(
    pod: &Pod,
    zone: Option<&str>,
    svc: &Service,
    address_type: &str,
) -> Endpoint {
    let pna = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let c = pod_to_endpoint_conditions(
        is_pod_ready(pod),
        pod.metadata.deletion_timestamp.is_some(),
        pna,
    );
    let addresses = pod_ips(pod)
        .into_iter()
        .filter(|ip| (address_type == "IPv6") == ip.contains(':'))
        .collect();
    let spec = pod.spec.clone().unwrap_or_default();
    let hostname = spec.hostname.clone().filter(|h| {
        !h.is_empty()
            && spec.subdomain == svc.metadata.name
            && svc.metadata.namespace == pod.metadata.namespace
    });
    Endpoint {
        addresses,
        conditions: Some(EndpointConditions {
            ready: Some(c.ready),
            serving: Some(c.serving),
            terminating: Some(c.terminating),
        }),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        }),
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        zone: zone.map(str::to_string),
        hostname,
        hints: None,
        deprecated_topology: None,
    }
}

/// `setEndpointSliceLabels`: the slice's labels as they should be (the Service's, except
/// reserved keys, plus service-name, managed-by and the headless marker) and whether the
/// non-reserved labels differed.
pub fn slice_labels(
    slice: &EndpointSlice,
    svc: &Service,
    controller: &str,
) -> (BTreeMap<String, String>, bool) {
    let reserved = |k: &str| matches!(k, LABEL_SERVICE_NAME | LABEL_MANAGED_BY | LABEL_HEADLESS);
    let ep: BTreeMap<String, String> = slice
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !reserved(k))
        .collect();
    let mut out: BTreeMap<String, String> = svc
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !reserved(k))
        .collect();
    let changed = ep != out;
    let cip = svc
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .unwrap_or_default();
    if cip.is_empty() || cip == "None" {
        out.insert(LABEL_HEADLESS.into(), String::new());
    }
    out.insert(
        LABEL_SERVICE_NAME.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    out.insert(LABEL_MANAGED_BY.into(), controller.into());
    (out, changed)
}

/// `newEndpointSlice`: an empty slice for the Service (generateName `NAME-`, owned by it).
pub fn new_slice(
    svc: &Service,
    ports: &[EndpointPort],
    address_type: &str,
    controller: &str,
) -> EndpointSlice {
    let mut s = EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "{}-",
                svc.metadata.name.clone().unwrap_or_default()
            )),
            namespace: svc.metadata.namespace.clone(),
            owner_references: Some(vec![new_controller_ref(&svc.metadata, "v1", "Service")]),
            labels: Some(BTreeMap::new()),
            ..Default::default()
        },
        address_type: address_type.into(),
        endpoints: Some(Vec::new()),
        ports: Some(ports.to_vec()),
    };
    s.metadata.labels = Some(slice_labels(&s, svc, controller).0);
    s
}

fn owned_by(slice: &EndpointSlice, svc: &Service) -> bool {
    slice.metadata.owner_references.iter().flatten().any(|o| {
        Some(&o.uid) == svc.metadata.uid.as_ref() && o.kind == "Service" && o.api_version == "v1"
    })
}

fn port_key(ports: &[EndpointPort]) -> String {
    let mut v: Vec<String> = ports
        .iter()
        .map(|p| serde_json::to_string(p).unwrap_or_default())
        .collect();
    v.sort();
    v.join(";")
}

fn endpoint_key(e: &Endpoint) -> (Vec<String>, String, String, String) {
    let mut a = e.addresses.clone();
    a.sort();
    let (ns, name) = e
        .target_ref
        .as_ref()
        .map(|t| {
            (
                t.namespace.clone().unwrap_or_default(),
                t.name.clone().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
    (a, e.hostname.clone().unwrap_or_default(), ns, name)
}

/// `EndpointsEqualBeyondHash`.
fn equal_beyond_hash(a: &Endpoint, b: &Endpoint) -> bool {
    let ca = a.conditions.clone().unwrap_or_default();
    let cb = b.conditions.clone().unwrap_or_default();
    let tr = |e: &Endpoint| {
        e.target_ref.clone().map(|mut t| {
            t.resource_version = None;
            t
        })
    };
    a.node_name == b.node_name
        && a.zone == b.zone
        && ca.ready == cb.ready
        && ca.serving == cb.serving
        && ca.terminating == cb.terminating
        && tr(a) == tr(b)
}

/// What one reconcile writes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// EndpointSlices to create.
    pub create: Vec<EndpointSlice>,
    /// EndpointSlices to update in place.
    pub update: Vec<EndpointSlice>,
    /// EndpointSlices to delete.
    pub delete: Vec<EndpointSlice>,
    /// Per-pod problems (a pod on a node that does not exist), reported in the
    /// `FailedToUpdateEndpointSlices` event.
    pub errors: Vec<String>,
}

/// `Reconcile`: the slices for `svc` from `pods` (those its selector selects) and its
/// `existing` slices (the controller's own, not being deleted). `node_zone` answers, for a
/// node name, `None` when the node does not exist, else its zone label if any. `trigger_ms`
/// sets (or, `None`, clears) `endpoints.kubernetes.io/last-change-trigger-time` on every
/// slice written. Slices are filled up to `max_per_slice` endpoints.
pub fn reconcile(
    svc: &Service,
    pods: &[&Pod],
    existing: &[&EndpointSlice],
    node_zone: impl Fn(&str) -> Option<Option<String>>,
    max_per_slice: usize,
    controller: &str,
    trigger_ms: Option<i64>,
) -> Plan {
    let types = address_types(svc);
    let mut plan = Plan::default();
    let mut by_type: BTreeMap<String, Vec<&EndpointSlice>> = BTreeMap::new();
    let mut stale = Vec::new();
    for s in existing {
        if types.contains(&s.address_type) {
            by_type.entry(s.address_type.clone()).or_default().push(s);
        } else {
            stale.push((*s).clone());
        }
    }
    for t in &types {
        let ex = by_type.get(t).cloned().unwrap_or_default();
        let p = by_address_type(svc, pods, &ex, t, &node_zone, max_per_slice, controller);
        plan.errors.extend(p.errors);
        let (c, u, d) = finalize(svc, p.create, p.update, p.delete);
        plan.create.extend(c);
        plan.update.extend(u);
        plan.delete.extend(d);
    }
    plan.delete.extend(stale);
    let stamp = |s: &mut EndpointSlice| {
        let ann = s.metadata.annotations.get_or_insert_with(BTreeMap::new);
        match trigger_ms {
            Some(ms) => {
                let t = k8s_openapi::jiff::Timestamp::from_millisecond(ms).unwrap_or_default();
                ann.insert(
                    TRIGGER_TIME.into(),
                    t.strftime("%Y-%m-%dT%H:%M:%S%.fZ").to_string(),
                );
            }
            None => {
                ann.remove(TRIGGER_TIME);
            }
        }
    };
    plan.create.iter_mut().for_each(stamp);
    plan.update.iter_mut().for_each(stamp);
    if svc.metadata.deletion_timestamp.is_some() {
        plan.create.clear();
    }
    plan
}

fn by_address_type(
    svc: &Service,
    pods: &[&Pod],
    existing: &[&EndpointSlice],
    address_type: &str,
    node_zone: &impl Fn(&str) -> Option<Option<String>>,
    max: usize,
    controller: &str,
) -> Plan {
    let mut plan = Plan::default();
    let mut existing_by_ports: BTreeMap<String, Vec<&EndpointSlice>> = BTreeMap::new();
    for s in existing {
        if owned_by(s, svc) {
            existing_by_ports
                .entry(port_key(s.ports.as_deref().unwrap_or(&[])))
                .or_default()
                .push(s);
        } else {
            plan.delete.push((*s).clone());
        }
    }
    let pna = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    type EndpointSet = BTreeMap<(Vec<String>, String, String, String), Endpoint>;
    let mut desired: BTreeMap<String, (Vec<EndpointPort>, EndpointSet)> = BTreeMap::new();
    for pod in pods {
        if !should_pod_be_in_slices(pod) {
            continue;
        }
        let ports = endpoint_ports(svc, pod);
        let key = port_key(&ports);
        let entry = desired
            .entry(key)
            .or_insert_with(|| (ports.clone(), BTreeMap::new()));
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let zone = match node_zone(&node) {
            Some(z) => z,
            None if !pna => {
                plan.errors.push(format!(
                    "skipping Pod {} for Service {}/{}: Node {node} Not Found",
                    pod.metadata.name.clone().unwrap_or_default(),
                    svc.metadata.namespace.clone().unwrap_or_default(),
                    svc.metadata.name.clone().unwrap_or_default()
                ));
                continue;
            }
            None => None,
        };
        let ep = pod_to_endpoint(pod, zone.as_deref(), svc, address_type);
        if !ep.addresses.is_empty() {
            entry.1.insert(endpoint_key(&ep), ep);
        }
    }
    for (key, (ports, set)) in desired.iter_mut() {
        let ex = existing_by_ports.get(key).cloned().unwrap_or_default();
        let (c, u, d) = by_port_mapping(svc, &ex, set, ports, address_type, max, controller);
        plan.create.extend(c);
        plan.update.extend(u);
        plan.delete.extend(d);
    }
    for (key, ex) in &existing_by_ports {
        if !desired.contains_key(key) {
            plan.delete.extend(ex.iter().map(|s| (*s).clone()));
        }
    }
    // Keep one placeholder slice (no ports, no endpoints) when nothing else would be left.
    if existing.len() == plan.delete.len() && plan.create.is_empty() {
        let placeholder = new_slice(svc, &[], address_type, controller);
        let same = plan.delete.len() == 1 && {
            let d = &plan.delete[0];
            d.metadata.namespace == placeholder.metadata.namespace
                && d.metadata.labels == placeholder.metadata.labels
                && d.address_type == placeholder.address_type
                && d.endpoints.clone().unwrap_or_default().is_empty()
                && d.ports.clone().unwrap_or_default().is_empty()
        };
        if same {
            plan.delete.clear();
        } else {
            plan.create.push(placeholder);
        }
    }
    plan
}

type Slices = Vec<EndpointSlice>;

fn by_port_mapping(
    svc: &Service,
    existing: &[&EndpointSlice],
    desired: &mut BTreeMap<(Vec<String>, String, String, String), Endpoint>,
    ports: &[EndpointPort],
    address_type: &str,
    max: usize,
    controller: &str,
) -> (Slices, Slices, Slices) {
    let mut by_name: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let mut unchanged: BTreeSet<String> = BTreeSet::new();
    let mut to_update: BTreeSet<String> = BTreeSet::new();
    let mut to_delete: BTreeSet<String> = BTreeSet::new();
    for s in existing {
        let name = s.metadata.name.clone().unwrap_or_default();
        by_name.insert(name.clone(), (*s).clone());
        let mut kept = Vec::new();
        let mut updated = false;
        for e in s.endpoints.iter().flatten() {
            if let Some(got) = desired.remove(&endpoint_key(e)) {
                if !equal_beyond_hash(&got, e) {
                    updated = true;
                }
                kept.push(got);
            }
        }
        let (labels, labels_changed) = slice_labels(s, svc, controller);
        let count = s.endpoints.as_ref().map_or(0, Vec::len);
        if updated || count != kept.len() {
            if kept.is_empty() {
                to_delete.insert(name);
            } else {
                let mut n = (*s).clone();
                n.endpoints = Some(kept);
                n.metadata.labels = Some(labels);
                by_name.insert(name.clone(), n);
                to_update.insert(name);
            }
        } else if labels_changed {
            let mut n = (*s).clone();
            n.metadata.labels = Some(labels);
            by_name.insert(name.clone(), n);
            to_update.insert(name);
        } else {
            unchanged.insert(name);
        }
    }
    let pop = |d: &mut BTreeMap<_, Endpoint>| d.pop_first().map(|(_, e)| e);
    // Fill the slices being updated first, the fullest first.
    if !desired.is_empty() && !to_update.is_empty() {
        let mut names: Vec<String> = to_update.iter().cloned().collect();
        names.sort_by_key(|n| std::cmp::Reverse(by_name[n].endpoints.as_ref().map_or(0, Vec::len)));
        for n in names {
            let s = by_name.get_mut(&n).expect("slice");
            let eps = s.endpoints.get_or_insert_with(Vec::new);
            while !desired.is_empty() && eps.len() < max {
                eps.extend(pop(desired));
            }
        }
    }
    let mut create = Vec::new();
    while !desired.is_empty() {
        let mut fill: Option<EndpointSlice> = None;
        if desired.len() < max && !unchanged.is_empty() {
            // getSliceToFill: the unchanged slice the remaining endpoints fill most closely.
            let mut closest = max;
            for n in &unchanged {
                let have = by_name[n].endpoints.as_ref().map_or(0, Vec::len);
                let diff = max as i64 - (desired.len() + have) as i64;
                if diff >= 0 && (diff as usize) < closest {
                    closest = diff as usize;
                    fill = Some(by_name[n].clone());
                    if closest == 0 {
                        break;
                    }
                }
            }
        }
        let mut s = fill.unwrap_or_else(|| new_slice(svc, ports, address_type, controller));
        let eps = s.endpoints.get_or_insert_with(Vec::new);
        while !desired.is_empty() && eps.len() < max {
            eps.extend(pop(desired));
        }
        match s.metadata.name.clone() {
            Some(n) if !n.is_empty() => {
                unchanged.remove(&n);
                to_update.insert(n.clone());
                by_name.insert(n, s);
            }
            _ => create.push(s),
        }
    }
    let update = to_update.iter().map(|n| by_name[n].clone()).collect();
    let delete = to_delete.iter().map(|n| by_name[n].clone()).collect();
    (create, update, delete)
}

/// `finalize`: a slice to delete and one to create of the same address type become one
/// update (the new content under the old name).
fn finalize(
    svc: &Service,
    mut create: Slices,
    mut update: Slices,
    mut delete: Slices,
) -> (Slices, Slices, Slices) {
    let mut i = 0;
    while i < delete.len() {
        let Some(last) = create.last() else { break };
        if delete[i].address_type == last.address_type && owned_by(&delete[i], svc) {
            let mut s = create.pop().expect("slice");
            s.metadata.name = delete[i].metadata.name.clone();
            s.metadata.generate_name = None;
            s.metadata.resource_version = delete[i].metadata.resource_version.clone();
            s.metadata.uid = delete[i].metadata.uid.clone();
            s.metadata.creation_timestamp = delete[i].metadata.creation_timestamp.clone();
            update.push(s);
            delete.remove(i);
        } else {
            i += 1;
        }
    }
    (create, update, delete)
}

/// The trigger times of one Service as last synced (`TriggerTimeTracker`'s `ServiceState`):
/// each pod's Ready condition's transition time and the Service's creation time, in
/// milliseconds since the Unix epoch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TriggerState {
    pods: BTreeMap<String, i64>,
    service_ms: i64,
}

/// `ComputeEndpointLastChangeTriggerTime`: the value of
/// `endpoints.kubernetes.io/last-change-trigger-time` for this sync of `svc` with `pods`:
/// the Service's creation time for a Service not synced before (`state` `None`), else the
/// earliest trigger time that moved since the last sync (`None`: none moved). Returns the
/// state to keep. Upstream: `staging/src/k8s.io/endpointslice/util/trigger_time_tracker.go`
/// (`getPodTriggerTime`: the Ready condition's lastTransitionTime; `getServiceTriggerTime`:
/// the creationTimestamp), 1.19 to 1.36.
pub fn trigger_time(
    state: Option<&TriggerState>,
    svc: &Service,
    pods: &[&Pod],
) -> (Option<i64>, TriggerState) {
    let old = state.cloned().unwrap_or_default();
    let mut min_changed: Option<i64> = None;
    let mut next = TriggerState::default();
    for p in pods {
        let t = super::podutil::condition(p, "Ready")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(super::podutil::time_ms);
        if let Some(t) = t {
            let name = p.metadata.name.clone().unwrap_or_default();
            if old.pods.get(&name).is_none_or(|o| t > *o) {
                min_changed = Some(min_changed.map_or(t, |m| m.min(t)));
            }
            next.pods.insert(name, t);
        }
    }
    let svc_ms = svc
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, super::podutil::time_ms);
    if svc_ms > old.service_ms {
        min_changed = Some(min_changed.map_or(svc_ms, |m| m.min(svc_ms)));
    }
    next.service_ms = svc_ms;
    match state {
        None => (Some(svc_ms), next),
        Some(_) => (min_changed, next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, PodCondition, PodIP, PodSpec, PodStatus, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn svc(target: IntOrString) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("svc-uid".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some("127.96.0.10".into()),
                ip_families: Some(vec!["IPv4".into()]),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    target_port: Some(target),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                selector: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn pod(name: &str, ip: &str, ready: bool, deleting: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("{name}-uid")),
                deletion_timestamp: deleting.then(|| Time(Default::default())),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node".into()),
                containers: vec![Container {
                    name: "app".into(),
                    ports: Some(vec![ContainerPort {
                        name: Some("web".into()),
                        container_port: 8080,
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some(ip.into()),
                pod_ips: Some(vec![PodIP { ip: ip.into() }]),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_terminating_ready_pod_stays_serving_and_named_ports_resolve() {
        let s = svc(IntOrString::String("web".into()));
        let a = pod("a", "198.18.77.2", true, false);
        let b = pod("b", "198.18.77.3", true, true);
        let plan = reconcile(
            &s,
            &[&a, &b],
            &[],
            |_| Some(None),
            100,
            CONTROLLER_NAME,
            None,
        );
        assert_eq!(plan.create.len(), 1);
        let slice = &plan.create[0];
        assert_eq!(slice.ports.as_ref().unwrap()[0].port, Some(8080));
        let eps = slice.endpoints.as_ref().unwrap();
        assert_eq!(eps.len(), 2);
        let b_ep = eps.iter().find(|e| e.addresses == ["198.18.77.3"]).unwrap();
        let c = b_ep.conditions.clone().unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(false), Some(true), Some(true))
        );
        assert_eq!(
            slice.metadata.labels.as_ref().unwrap()[LABEL_SERVICE_NAME],
            "web"
        );
        // No pod at all: one placeholder slice without ports.
        let empty = reconcile(&s, &[], &[], |_| Some(None), 100, CONTROLLER_NAME, None);
        assert_eq!(empty.create.len(), 1);
        assert!(empty.create[0].ports.as_ref().unwrap().is_empty());
    }

    #[test]
    fn an_existing_slice_is_updated_in_place_when_an_endpoint_changes() {
        let s = svc(IntOrString::Int(8080));
        let a = pod("a", "198.18.77.2", true, false);
        let mut first = reconcile(&s, &[&a], &[], |_| Some(None), 100, CONTROLLER_NAME, None)
            .create
            .remove(0);
        first.metadata.name = Some("web-abcde".into());
        let a2 = pod("a", "198.18.77.2", true, true);
        let plan = reconcile(
            &s,
            &[&a2],
            &[&first],
            |_| Some(None),
            100,
            CONTROLLER_NAME,
            None,
        );
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(plan.update.len(), 1);
        let c = plan.update[0].endpoints.as_ref().unwrap()[0]
            .conditions
            .clone()
            .unwrap();
        assert_eq!(c.terminating, Some(true));
        // The same state again: nothing to write.
        let plan = reconcile(
            &s,
            &[&a2],
            &[&plan.update[0]],
            |_| Some(None),
            100,
            CONTROLLER_NAME,
            None,
        );
        assert_eq!(plan, Plan::default());
    }

    #[test]
    fn trigger_time_is_the_earliest_change_since_the_last_sync() {
        use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
        let svc = Service {
            metadata: ObjectMeta {
                creation_timestamp: Some(super::super::podutil::ms_time(1_000)),
                ..Default::default()
            },
            ..Default::default()
        };
        let pod = |name: &str, ready_ms: i64| Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(super::super::podutil::ms_time(ready_ms)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (a, b) = (pod("a", 5_000), pod("b", 6_000));
        let (t, st) = trigger_time(None, &svc, &[&a, &b]);
        assert_eq!(t, Some(1_000), "a new Service: its creation time");
        let (t, st) = trigger_time(Some(&st), &svc, &[&a, &b]);
        assert_eq!(t, None, "nothing moved");
        let (b2, c) = (pod("b", 9_000), pod("c", 8_000));
        let (t, _) = trigger_time(Some(&st), &svc, &[&a, &b2, &c]);
        assert_eq!(t, Some(8_000), "the earliest of the moved times");
    }

    #[test]
    fn a_pod_change_syncs_the_services_upstream_syncs() {
        let a = pod("a", "10.0.0.1", true, false);
        let mut deleting = a.clone();
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(pod_endpoints_changed(&a, &deleting), (true, false));
        let mut relabelled = a.clone();
        relabelled.metadata.labels = Some([("app".to_string(), "api".to_string())].into());
        assert_eq!(pod_endpoints_changed(&a, &relabelled), (false, true));
        let not_ready = pod("a", "10.0.0.1", false, false);
        assert_eq!(pod_endpoints_changed(&a, &not_ready), (true, false));
        let moved = pod("a", "10.0.0.2", true, false);
        assert_eq!(pod_endpoints_changed(&a, &moved), (true, false));
        assert_eq!(pod_endpoints_changed(&a, &a.clone()), (false, false));
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let (old, new) = (set(&["x", "y"]), set(&["y", "z"]));
        assert!(services_to_update((false, false), &old, &new).is_empty());
        assert_eq!(services_to_update((true, false), &old, &new), new);
        assert_eq!(
            services_to_update((true, true), &old, &new),
            set(&["x", "y", "z"])
        );
        assert_eq!(
            services_to_update((false, true), &old, &new),
            set(&["x", "z"])
        );
    }
}
