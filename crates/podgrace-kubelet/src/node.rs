//! The Node object of this machine and its Lease heartbeat, as the kubelet keeps them: the
//! kubelet registers its Node (labels, capacity, allocatable, conditions, addresses,
//! nodeInfo), reports its status every `nodeStatusReportFrequency` (5 min) with fresh
//! heartbeat times, and renews its Lease in `kube-node-lease` every 10 s (a quarter of the
//! 40 s `nodeLeaseDurationSeconds`).
//!
//! Capacity is read from this machine: `cpu` (the CPUs this process may run on), `memory`
//! (`MemTotal`), `ephemeral-storage` (the root filesystem), `pods` 110, hugepages 0.
//! Allocatable is capacity less the default hard eviction thresholds (`memory.available<100Mi`,
//! `nodefs.available<10%`), with no kube-reserved or system-reserved.
//!
//! Upstream: `pkg/kubelet/kubelet_node_status.go` (`initialNode`, `registerWithAPIServer`,
//! `updateNodeStatus`), `pkg/kubelet/nodestatus/setters.go` (the conditions' reasons and
//! messages, `MachineInfo`, `NodeAddress`), `pkg/kubelet/nodelease` and
//! `staging/src/k8s.io/component-helpers/apimachinery/lease/controller.go` (the Lease),
//! `pkg/kubelet/apis/config/v1beta1/defaults.go` (110 pods, 40 s, 5 min, the thresholds).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use crate::status::rfc3339;
use crate::{Clock, KubeletConfig};

/// `nodeLeaseDurationSeconds` (kubelet default).
pub const LEASE_DURATION_SECONDS: i64 = 40;
/// How often the Lease is renewed (`leaseDuration × 0.25`).
pub const LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// `nodeStatusReportFrequency` (kubelet default since 1.17).
pub const NODE_STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(300);
/// `nodeStatusUpdateFrequency`: how often the status is computed, and written if it changed
/// (kubelet default).
pub const NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);

/// What the node's managers report, from which the conditions follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeHealth {
    /// The eviction manager's `IsUnderMemoryPressure`.
    pub memory_pressure: bool,
    /// `IsUnderDiskPressure`.
    pub disk_pressure: bool,
    /// `IsUnderPIDPressure`.
    pub pid_pressure: bool,
    /// The node shutdown manager's `ShutdownStatus` (Ready False, `node is shutting down`).
    pub shutting_down: bool,
}

/// One node condition: its type, whether it is True, its reason and message, and the event
/// `recordNodeStatusEvent` records when it changes.
struct ConditionSpec {
    kind: &'static str,
    status: bool,
    reason: &'static str,
    message: &'static str,
    event: (&'static str, &'static str),
}

/// The four conditions for `health`, in the kubelet's order (Ready last).
///
/// Upstream: `pkg/kubelet/nodestatus/setters.go` (`MemoryPressureCondition`,
/// `DiskPressureCondition`, `PIDPressureCondition`, `ReadyCondition`: reasons, messages and
/// the `NodeHas...`, `NodeReady`/`NodeNotReady` events).
fn condition_specs(h: &NodeHealth) -> [ConditionSpec; 4] {
    let pick = |on: bool, yes: ConditionSpec, no: ConditionSpec| if on { yes } else { no };
    let c = |kind, status, reason, message, event| ConditionSpec {
        kind,
        status,
        reason,
        message,
        event,
    };
    [
        pick(
            h.memory_pressure,
            c(
                "MemoryPressure",
                true,
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
                ("Normal", "NodeHasInsufficientMemory"),
            ),
            c(
                "MemoryPressure",
                false,
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
                ("Normal", "NodeHasSufficientMemory"),
            ),
        ),
        pick(
            h.disk_pressure,
            c(
                "DiskPressure",
                true,
                "KubeletHasDiskPressure",
                "kubelet has disk pressure",
                ("Normal", "NodeHasDiskPressure"),
            ),
            c(
                "DiskPressure",
                false,
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
                ("Normal", "NodeHasNoDiskPressure"),
            ),
        ),
        pick(
            h.pid_pressure,
            c(
                "PIDPressure",
                true,
                "KubeletHasInsufficientPID",
                "kubelet has insufficient PID available",
                ("Normal", "NodeHasInsufficientPID"),
            ),
            c(
                "PIDPressure",
                false,
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
                ("Normal", "NodeHasSufficientPID"),
            ),
        ),
        pick(
            h.shutting_down,
            c(
                "Ready",
                false,
                "KubeletNotReady",
                "node is shutting down",
                ("Normal", "NodeNotReady"),
            ),
            c(
                "Ready",
                true,
                "KubeletReady",
                "kubelet is posting ready status",
                ("Normal", "NodeReady"),
            ),
        ),
    ]
}

/// The node's conditions for `health` at `now_ms`, each keeping its `lastTransitionTime` from
/// `previous` (the conditions last written) when its status did not change, and the events of
/// the conditions that changed (`(type, reason)`; none for the first status).
pub fn conditions(
    health: &NodeHealth,
    previous: Option<&Value>,
    now_ms: i64,
) -> (Value, Vec<(&'static str, &'static str)>) {
    let now = rfc3339(now_ms);
    let mut events = Vec::new();
    let list: Vec<Value> = condition_specs(health)
        .into_iter()
        .map(|c| {
            let status = if c.status { "True" } else { "False" };
            let old = previous
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|o| o["type"] == c.kind));
            let transition = match old {
                Some(o) if o["status"] == status => o["lastTransitionTime"].clone(),
                Some(_) => {
                    events.push(c.event);
                    json!(now)
                }
                None => json!(now),
            };
            json!({"type": c.kind, "status": status, "lastHeartbeatTime": now,
                "lastTransitionTime": transition, "reason": c.reason, "message": c.message})
        })
        .collect();
    (Value::Array(list), events)
}

/// What the kubelet knows of this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineInfo {
    /// The kernel's hostname, lowercased (`kubernetes.io/hostname` and the `Hostname` address).
    pub hostname: String,
    /// The CPUs this process may run on (capacity `cpu`, whole cores).
    pub cpus: u64,
    /// `MemTotal` of `/proc/meminfo`, in bytes (capacity `memory`).
    pub memory_bytes: u64,
    /// The root filesystem's size, in bytes (capacity `ephemeral-storage`).
    pub ephemeral_storage_bytes: u64,
    /// `/etc/machine-id` (`nodeInfo.machineID`).
    pub machine_id: String,
    /// `/sys/class/dmi/id/product_uuid` when readable (`nodeInfo.systemUUID`).
    pub system_uuid: String,
    /// `/proc/sys/kernel/random/boot_id` (`nodeInfo.bootID`).
    pub boot_id: String,
    /// `/proc/sys/kernel/osrelease`, as `uname -r` prints it (`nodeInfo.kernelVersion`).
    pub kernel_version: String,
    /// `PRETTY_NAME` of `/etc/os-release`, else `Linux` (`nodeInfo.osImage`).
    pub os_image: String,
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl MachineInfo {
    /// Reads this machine (`/proc`, `/sys`, `/etc/os-release`, statvfs of `/`); what cannot be
    /// read is empty or 0.
    pub fn of_this_machine() -> MachineInfo {
        let memory_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            })
            .unwrap_or(0);
        let storage = rustix::fs::statvfs("/")
            .map(|s| s.f_blocks.saturating_mul(s.f_frsize))
            .unwrap_or(0);
        let os_image = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| "Linux".into());
        MachineInfo {
            hostname: read_trim("/proc/sys/kernel/hostname").to_lowercase(),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get() as u64)
                .unwrap_or(1),
            memory_bytes: memory_kib * 1024,
            ephemeral_storage_bytes: storage,
            machine_id: read_trim("/etc/machine-id"),
            system_uuid: read_trim("/sys/class/dmi/id/product_uuid"),
            boot_id: read_trim("/proc/sys/kernel/random/boot_id"),
            kernel_version: read_trim("/proc/sys/kernel/osrelease"),
            os_image,
        }
    }
}

/// `GOARCH` of this build.
fn goarch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// A quantity in Ki, as the kubelet writes memory and storage (`24553000Ki`).
fn ki(bytes: u64) -> String {
    format!("{}Ki", bytes / 1024)
}

/// The Node object the kubelet registers, with its status at `now_ms` (a healthy node).
pub fn node_object(config: &KubeletConfig, m: &MachineInfo, now_ms: i64) -> Value {
    node_object_with(
        config,
        m,
        conditions(&NodeHealth::default(), None, now_ms).0,
    )
}

/// The Node object with these conditions. Allocatable memory is the capacity less the hard
/// `memory.available` threshold (`GetNodeAllocatableReservation`'s eviction reservation).
pub fn node_object_with(config: &KubeletConfig, m: &MachineInfo, conditions: Value) -> Value {
    let arch = goarch();
    let alloc_memory = m
        .memory_bytes
        .saturating_sub(config.memory_eviction_reservation);
    // nodefs.available<10%: allocatable ephemeral storage is 90 % of capacity (in bytes, as
    // the kubelet writes it: a plain integer).
    let alloc_storage = m.ephemeral_storage_bytes / 10 * 9;
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": config.node_name,
            "labels": {
                "beta.kubernetes.io/arch": arch,
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch,
                "kubernetes.io/hostname": config.node_name,
                "kubernetes.io/os": "linux",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {},
        "status": {
            "capacity": {
                "cpu": m.cpus.to_string(),
                "ephemeral-storage": ki(m.ephemeral_storage_bytes),
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": ki(m.memory_bytes),
                "pods": "110",
            },
            "allocatable": {
                "cpu": m.cpus.to_string(),
                "ephemeral-storage": alloc_storage.to_string(),
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": ki(alloc_memory),
                "pods": "110",
            },
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": config.host_ip.to_string()},
                // The node's name stands for `--hostname-override`.
                {"type": "Hostname", "address": config.node_name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": m.machine_id,
                "systemUUID": m.system_uuid,
                "bootID": m.boot_id,
                "kernelVersion": m.kernel_version,
                "osImage": m.os_image,
                "containerRuntimeVersion": config.container_runtime_version,
                "kubeletVersion": format!("v{}.0", config.version),
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": arch,
            },
        },
    })
}

/// `MicroTime` as the Lease's renewTime is written (`2026-12-01T09:12:53.123456Z`).
pub fn micro_time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string())
        .unwrap_or_default()
}

/// The node's Lease in `kube-node-lease`, renewed at `now_ms`, owned by the Node.
pub fn lease_object(node: &str, node_uid: &str, now_ms: i64) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node,
            "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}],
        },
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": micro_time(now_ms),
        },
    })
}

/// Registers the Node (or takes over an existing one, updating its status), then renews the
/// Lease and reports the status as the kubelet does, until the task is dropped: every
/// `nodeStatusUpdateFrequency` the status is computed from the node managers' health and
/// written if a condition changed (with the `NodeHas...` / `NodeReady` / `NodeNotReady` event
/// on the Node), else every `nodeStatusReportFrequency`; a change of the shutdown state is
/// written at once (the shutdown manager's `syncNodeStatus`).
///
/// Upstream: `pkg/kubelet/kubelet_node_status.go` (`syncNodeStatus`, `tryUpdateNodeStatus`:
/// written when changed or when the report frequency has passed),
/// `pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go` (`go m.syncNodeStatus(ctx)`).
pub async fn keep_node(client: kube::Client, config: KubeletConfig, clock: Clock) {
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "kube-node-lease");
    let mut machine = MachineInfo::of_this_machine();
    if let Some(m) = config.node_memory_bytes {
        machine.memory_bytes = m;
    }
    let name = config.node_name.clone();
    let mut recorder = crate::recorder::Recorder::new(
        client,
        crate::recorder::InvolvedPod::node(&name),
        name.clone(),
        clock,
    );
    let mut health_rx = config.health.clone();
    let mut node_uid = String::new();
    let mut written: Option<(NodeHealth, Value)> = None;
    let mut last_report = std::time::Instant::now();
    let mut lease_tick = tokio::time::interval(LEASE_RENEW_INTERVAL);
    let mut status_tick = tokio::time::interval(config.node_status_update_frequency);
    loop {
        let health = health_rx.as_ref().map(|h| *h.borrow()).unwrap_or_default();
        tokio::select! {
            biased;
            changed = async {
                match health_rx.as_mut() {
                    Some(h) => h.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            } => {
                if !changed {
                    health_rx = None;
                    continue;
                }
                let now = health_rx.as_ref().map(|h| *h.borrow()).unwrap_or_default();
                // Only the shutdown manager syncs the status at once.
                if written.as_ref().is_some_and(|(w, _)| w.shutting_down != now.shutting_down) {
                    status_tick.reset_immediately();
                }
                continue;
            }
            _ = status_tick.tick() => {
                let unchanged = written.as_ref().is_some_and(|(w, _)| *w == health);
                if unchanged && last_report.elapsed() < NODE_STATUS_REPORT_FREQUENCY {
                    continue;
                }
                let now_ms = clock.now_ms();
                let (conds, events) = conditions(&health, written.as_ref().map(|(_, c)| c), now_ms);
                let v = node_object_with(&config, &machine, conds.clone());
                let Ok(obj) = serde_json::from_value::<Node>(v.clone()) else { return };
                let uid = if node_uid.is_empty() {
                    match nodes.create(&PostParams::default(), &obj).await {
                        Ok(n) => n.metadata.uid,
                        Err(_) => patch_status(&nodes, &name, &v).await,
                    }
                } else {
                    patch_status(&nodes, &name, &v).await
                };
                if let Some(u) = uid {
                    if node_uid.is_empty() {
                        // The first Lease right after registering, as the kubelet's lease
                        // controller starts with the node.
                        lease_tick.reset_immediately();
                    }
                    node_uid = u;
                    written = Some((health, conds));
                    last_report = std::time::Instant::now();
                    for (kind, reason) in events {
                        let e = podgrace_node::events::Event {
                            at: std::time::Instant::now(),
                            kind: if kind == "Warning" {
                                podgrace_node::events::EventType::Warning
                            } else {
                                podgrace_node::events::EventType::Normal
                            },
                            reason,
                            container: None,
                            message: format!("Node {name} status is now: {reason}"),
                        };
                        recorder.record(&e).await;
                    }
                }
            }
            _ = lease_tick.tick() => {
                if node_uid.is_empty() {
                    continue;
                }
                renew_lease(&leases, &name, &node_uid, clock.now_ms()).await;
            }
        }
    }
}

/// Writes the Node's status (a merge patch); its UID when it worked.
async fn patch_status(nodes: &kube::Api<Node>, name: &str, v: &Value) -> Option<String> {
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": v["status"]})),
        )
        .await
        .ok()
        .and_then(|n| n.metadata.uid)
}

/// Renews the Lease (a patch of `renewTime`), creating it when it does not exist.
async fn renew_lease(leases: &kube::Api<Lease>, name: &str, node_uid: &str, now_ms: i64) {
    let v = lease_object(name, node_uid, now_ms);
    let patch = json!({"spec": {"renewTime": v["spec"]["renewTime"]}});
    if leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .is_ok()
    {
        return;
    }
    if let Ok(obj) = serde_json::from_value::<Lease>(v) {
        if let Err(e) = leases.create(&PostParams::default(), &obj).await {
            tracing::debug!(error = %e, "node lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_reports_capacity_less_the_eviction_thresholds_and_ready() {
        let m = MachineInfo {
            hostname: "box".into(),
            cpus: 2,
            memory_bytes: 24 * 1024 * 1024 * 1024,
            ephemeral_storage_bytes: 1000 * 1024,
            machine_id: "m".into(),
            system_uuid: "s".into(),
            boot_id: "b".into(),
            kernel_version: "6.1.0".into(),
            os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        };
        let n = node_object(&KubeletConfig::default(), &m, 1_780_000_000_000);
        let st = &n["status"];
        assert_eq!(st["capacity"]["memory"], "25165824Ki");
        assert_eq!(st["allocatable"]["memory"], "25063424Ki");
        assert_eq!(st["allocatable"]["ephemeral-storage"], "921600");
        assert_eq!(st["capacity"]["pods"], "110");
        let types: Vec<&str> = st["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        assert_eq!(
            st["conditions"][3]["message"],
            "kubelet is posting ready status"
        );
        assert_eq!(
            st["addresses"][0],
            json!({"type": "InternalIP", "address": "127.0.0.1"})
        );
        assert_eq!(
            n["metadata"]["labels"]["kubernetes.io/hostname"],
            "podgrace"
        );
        assert!(st["nodeInfo"]["kubeletVersion"]
            .as_str()
            .unwrap()
            .starts_with("v1."));
        let l = lease_object("podgrace", "u", 1_780_000_000_123);
        assert_eq!(l["spec"]["renewTime"], "2026-05-28T20:26:40.123000Z");
        assert_eq!(l["spec"]["leaseDurationSeconds"], 40);
    }
}
