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

/// The Node object the kubelet registers, with its status at `now_ms`.
pub fn node_object(config: &KubeletConfig, m: &MachineInfo, now_ms: i64) -> Value {
    let now = rfc3339(now_ms);
    let arch = goarch();
    let cond = |t: &str, status: &str, reason: &str, message: &str| {
        json!({"type": t, "status": status, "lastHeartbeatTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message})
    };
    let alloc_memory = m.memory_bytes.saturating_sub(100 * 1024 * 1024);
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
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
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
/// Lease and reports the status as the kubelet does, until the task is dropped.
pub async fn keep_node(client: kube::Client, config: KubeletConfig, clock: Clock) {
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let leases: kube::Api<Lease> = kube::Api::namespaced(client, "kube-node-lease");
    let machine = MachineInfo::of_this_machine();
    let name = config.node_name.clone();
    let mut node_uid = String::new();
    let mut lease_tick = tokio::time::interval(LEASE_RENEW_INTERVAL);
    let mut status_tick = tokio::time::interval(NODE_STATUS_REPORT_FREQUENCY);
    loop {
        tokio::select! {
            biased;
            _ = status_tick.tick() => {
                let v = node_object(&config, &machine, clock.now_ms());
                let Ok(obj) = serde_json::from_value::<Node>(v.clone()) else { return };
                let uid = match nodes.create(&PostParams::default(), &obj).await {
                    Ok(n) => n.metadata.uid,
                    Err(_) => nodes
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": v["status"]})))
                        .await
                        .ok()
                        .and_then(|n| n.metadata.uid),
                };
                if let Some(u) = uid {
                    if node_uid.is_empty() {
                        // The first Lease right after registering, as the kubelet's lease
                        // controller starts with the node.
                        lease_tick.reset_immediately();
                    }
                    node_uid = u;
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
