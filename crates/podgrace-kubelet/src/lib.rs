//! podgrace-kubelet: the local kubelet as a client of an API server (`podgrace serve`'s, or any
//! other that a `kube::Client` reaches). Layer 3 of podgrace beside `podgrace-api`: above the
//! node layer, whose pod worker runs the pods; it does not depend on the API crate.
//!
//! * [`source`]: the pod source, a watch of the pods bound to this node (`spec.nodeName`);
//!   each new pod gets a [`worker`].
//! * [`worker`]: one pod synced with the API: run by the node layer's pod worker
//!   ([`podgrace_node::kubelet::run_pod`]), a delete seen through the watch handed to it as the
//!   delete it is (graceful with the object's `deletionGracePeriodSeconds`, or forced when the
//!   object is gone), the status written through the `status` subresource as the kubelet's
//!   status manager writes it, and the final delete with grace 0 once the pod has terminated.
//! * [`status`]: `generateAPIPodStatus` (container statuses, phase, conditions), pure.
//! * [`observed`]: the runtime seen through one pod (its sandbox and container instances), as
//!   `GetPodStatus` sees it.
//! * [`recorder`]: the kubelet's events as `v1` Event objects.
//! * [`node`]: the Node object of this machine and its Lease heartbeat; [`configz`]: its
//!   settings as the `configz` endpoint serves them.
//! * [`managers`]: the eviction and node shutdown managers, with the node's health and
//!   admission they give.
//! * [`runtimes`]: the runtime each pod runs on; [`logs`]: its containers' output in the CRI
//!   log layout that the API's `log` subresource reads.
//!
//! Upstream: `pkg/kubelet/config/apiserver.go` (the pod source: a watch with
//! `spec.nodeName=NODE`), `pkg/kubelet/kubelet.go` (`syncLoopIteration`, `HandlePodUpdates`,
//! `HandlePodRemoves`), `pkg/kubelet/status/status_manager.go` (`syncPod`: the status patch and
//! the final delete), `pkg/kubelet/kubelet_pods.go` (`generateAPIPodStatus`).
#![forbid(unsafe_code)]

pub mod configz;
pub mod env;
pub mod logs;
pub mod managers;
pub mod node;
pub mod observed;
pub mod recorder;
pub mod runtimes;
pub mod source;
pub mod status;
pub mod worker;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use podgrace_core::KubeVersion;

pub use podgrace_node::kubelet::PodReport;
pub use runtimes::{ProcessRuntimes, RuntimeSource};
pub use source::{start, KubeletHandle};

/// How the local kubelet runs.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// The node's name: the pods with this `spec.nodeName` are this kubelet's.
    pub node_name: String,
    /// The Kubernetes release whose kubelet to reproduce.
    pub version: KubeVersion,
    /// The node's address (`status.hostIP`, and `podIP` of host-network pods).
    pub host_ip: IpAddr,
    /// Run every container as a plain host process even when namespaces are permitted.
    pub force_host: bool,
    /// Where container logs go (`NAMESPACE_POD_UID/CONTAINER/N.log`); `None`: nowhere.
    pub log_dir: Option<std::path::PathBuf>,
    /// The Node's `status.nodeInfo.containerRuntimeVersion` (`containerd://1.6.20~ds1`, as the
    /// kubelet writes the runtime's `Version`); `podgrace://VERSION` for the process runtime.
    pub container_runtime_version: String,
    /// Called with each pod worker's run report when the pod has terminated, before its
    /// terminal status is written and before its sandbox is stopped; `None`: nobody. The drill
    /// reads its disrupted pods' termination (kill start, stop signal, exits) from these, as it
    /// does from the pod workers it runs itself.
    pub reports: Option<ReportSink>,
    /// The node's active pods: every pod worker registers there, where the eviction and node
    /// shutdown managers find them.
    pub active: podgrace_node::kubelet::active::ActivePods,
    /// What the node managers say of the node (pressure, shutting down), for its conditions;
    /// `None`: always healthy.
    pub health: Option<tokio::sync::watch::Receiver<node::NodeHealth>>,
    /// `nodeStatusUpdateFrequency`: how often the Node's status is computed and written when
    /// it changed (10 s).
    pub node_status_update_frequency: std::time::Duration,
    /// The node's memory capacity, bytes (`--node-memory`); `None`: `MemTotal`.
    pub node_memory_bytes: Option<u64>,
    /// What allocatable memory keeps back: the hard `memory.available` threshold, bytes
    /// (100Mi by default).
    pub memory_eviction_reservation: u64,
    /// Admission: `Some((reason, message))` refuses a new pod (`canAdmitPod`'s handlers: the
    /// eviction manager under pressure, the node shutdown manager while shutting down).
    pub admit: Option<Admission>,
}

/// The kubelet's admission of a new pod: `None` admits it, `Some((reason, message))` rejects
/// it (`rejectPod`: phase Failed, the reason, `Pod was rejected: ` + the message, a Warning
/// event).
#[derive(Clone)]
pub struct Admission(pub std::sync::Arc<AdmitFn>);

/// The function behind an [`Admission`].
pub type AdmitFn = dyn Fn(&podgrace_core::plan::PodPlan) -> Option<(String, String)> + Send + Sync;

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission")
    }
}

/// A receiver of pod workers' run reports: `(namespace, name, report)`, called on the pod's
/// worker task (it must not block).
#[derive(Clone)]
pub struct ReportSink(pub std::sync::Arc<ReportFn>);

/// The function behind a [`ReportSink`]: `(namespace, name, report)`.
pub type ReportFn = dyn Fn(&str, &str, &PodReport) + Send + Sync;

impl std::fmt::Debug for ReportSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReportSink")
    }
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            node_name: podgrace_node::kubelet::pod::NODE_NAME.to_string(),
            version: KubeVersion::LATEST,
            host_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            force_host: false,
            log_dir: None,
            container_runtime_version: format!("podgrace://{}", env!("CARGO_PKG_VERSION")),
            reports: None,
            active: podgrace_node::kubelet::active::ActivePods::new(),
            health: None,
            node_status_update_frequency: node::NODE_STATUS_UPDATE_FREQUENCY,
            node_memory_bytes: None,
            memory_eviction_reservation: 100 << 20,
            admit: None,
        }
    }
}

/// The monotonic clock mapped onto wall-clock milliseconds (the API's times), from one anchor.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    mono: Instant,
    unix_ms: i64,
}

impl Clock {
    /// Anchored now.
    pub fn now() -> Clock {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or_default();
        Clock {
            mono: Instant::now(),
            unix_ms,
        }
    }

    /// `at` in milliseconds since the Unix epoch.
    pub fn ms(&self, at: Instant) -> i64 {
        if at >= self.mono {
            self.unix_ms
                + i64::try_from(at.duration_since(self.mono).as_millis()).unwrap_or(i64::MAX)
        } else {
            self.unix_ms
                - i64::try_from(self.mono.duration_since(at).as_millis()).unwrap_or(i64::MAX)
        }
    }

    /// Now in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        self.ms(Instant::now())
    }
}
