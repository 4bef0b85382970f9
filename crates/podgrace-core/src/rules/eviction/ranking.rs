//! The order in which pods are evicted under each signal, and the order of the signals.
//!
//! Upstream: `pkg/kubelet/eviction/helpers.go` (`rankMemoryPressure`, `rankPIDPressure`,
//! `rankDiskPressureFunc`, `exceedMemoryRequests`, `priority`, `memory`, `disk`, `process`).

use std::cmp::Ordering;

use super::thresholds::{EvictionSignal, NodePressureCondition, Threshold};
use super::SYSTEM_CRITICAL_PRIORITY;

/// Sorts thresholds the way the manager picks the one to reclaim: memory signals first, then
/// the others in their given order (stable; upstream's `sort.Sort` is not stable).
///
/// Upstream: `helpers.go` `byEvictionPriority` (every signal modelled maps to a resource, so
/// the "no resource last" rule never applies here).
pub fn sort_by_eviction_priority(thresholds: &mut [Threshold]) {
    thresholds.sort_by_key(|t| u8::from(!t.signal.is_memory()));
}

/// The same order for bare signals.
pub fn sort_signals_by_eviction_priority(signals: &mut [EvictionSignal]) {
    signals.sort_by_key(|s| u8::from(!s.is_memory()));
}

/// A pod's QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosClass {
    /// `Guaranteed`: every container has equal CPU and memory requests and limits.
    Guaranteed,
    /// `Burstable`: some request or limit is set, but the pod is not Guaranteed.
    Burstable,
    /// `BestEffort`: no container sets any CPU or memory request or limit.
    BestEffort,
}

/// What the eviction manager knows of one active pod. Quantities in bytes / processes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodEvictionStats {
    /// The pod's name, as the caller identifies it (the eviction reports it back).
    pub name: String,
    /// `spec.priority`; `None` counts as 0.
    pub priority: Option<i32>,
    /// Static or mirror pod (always critical).
    pub static_or_mirror: bool,
    /// TGPS, seconds.
    pub termination_grace_period_seconds: Option<i64>,
    /// Sum of the containers' memory requests, bytes.
    pub memory_request_bytes: i64,
    /// Memory working set, bytes; `None` = no stats.
    pub memory_working_set_bytes: Option<i64>,
    /// Sum of the ephemeral-storage requests, bytes.
    pub ephemeral_storage_request_bytes: i64,
    /// Disk usage (root fs + logs + local volumes, or inodes for inode signals); `None` = no stats.
    pub disk_usage: Option<i64>,
    /// Process count; `None` = no stats.
    pub process_count: Option<i64>,
    /// The containers (regular, then init containers), for the eviction message.
    pub containers: Vec<ContainerEvictionStats>,
}

/// What the eviction message says of one container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerEvictionStats {
    /// The container's name.
    pub name: String,
    /// Its memory request as the API writes it (`64Mi`; `0` when it has none).
    pub memory_request: String,
    /// Its memory request, bytes (0 when none).
    pub memory_request_bytes: i64,
    /// Its working set, bytes; `None` = no stats.
    pub memory_working_set_bytes: Option<i64>,
}

impl PodEvictionStats {
    /// What the eviction manager knows of a pod from its spec (`name` as the caller names
    /// it): its priority (`spec.priority`, or the built-in critical classes' value), TGPS (as
    /// the API server stores it: always set), its memory request (`PodRequests`: regular
    /// containers and sidecars summed, init containers' largest) and each container's
    /// (defaulted from the limit, as stored), no usage yet.
    ///
    /// Upstream: `pkg/kubelet/eviction/helpers.go` (`exceedMemoryRequests` reads
    /// `GetResourceRequestQuantity`), `evictionMessage` (the container's `Requests[memory]`).
    pub fn from_plan(name: String, plan: &crate::plan::PodPlan) -> PodEvictionStats {
        use crate::rules::quantity::Quantity;
        let requests = crate::rules::resources::pod_requests(&plan.resources());
        let containers = plan
            .containers
            .iter()
            .chain(plan.init_containers.iter())
            .map(|c| {
                let written = c
                    .resources
                    .requests
                    .get("memory")
                    .or_else(|| c.resources.limits.get("memory"));
                let parsed = written.and_then(|w| Quantity::parse_with_format(w.trim()).ok());
                ContainerEvictionStats {
                    name: c.name.clone(),
                    memory_request: parsed.map_or_else(|| "0".to_string(), |(q, f)| q.canonical(f)),
                    memory_request_bytes: parsed.map_or(0, |(q, _)| q.value()),
                    memory_working_set_bytes: None,
                }
            })
            .collect();
        PodEvictionStats {
            name,
            priority: plan.effective_priority(),
            static_or_mirror: false,
            termination_grace_period_seconds: Some(plan.termination_grace_period_seconds),
            memory_request_bytes: requests.get("memory").map_or(0, |q| q.value()),
            memory_working_set_bytes: None,
            ephemeral_storage_request_bytes: requests
                .get("ephemeral-storage")
                .map_or(0, |q| q.value()),
            disk_usage: None,
            process_count: None,
            containers,
        }
    }

    /// Critical pods are never evicted (`kubelettypes.IsCriticalPod`: static, mirror, or
    /// priority ≥ 2000000000).
    pub fn is_critical(&self) -> bool {
        self.static_or_mirror || self.priority.unwrap_or(0) >= SYSTEM_CRITICAL_PRIORITY
    }
}

/// A ranking key: `Less` means "evicted first".
pub type RankFn = fn(&PodEvictionStats, &PodEvictionStats) -> Ordering;

/// Pods for which `found` is false come first (`cmpBool(!p1Found, !p2Found)`).
pub(super) fn cmp_found(a: bool, b: bool) -> Ordering {
    // `true` first: a missing stat (found = false) sorts before.
    b.cmp(&a).reverse()
}

pub(super) fn true_first(a: bool, b: bool) -> Ordering {
    b.cmp(&a)
}

/// Pods without memory stats first, then pods whose working set exceeds their memory request.
/// Upstream: `helpers.go` `exceedMemoryRequests`.
pub fn exceed_memory_requests(a: &PodEvictionStats, b: &PodEvictionStats) -> Ordering {
    match (a.memory_working_set_bytes, b.memory_working_set_bytes) {
        (Some(x), Some(y)) => true_first(x > a.memory_request_bytes, y > b.memory_request_bytes),
        (x, y) => cmp_found(x.is_some(), y.is_some()),
    }
}

/// Lower `spec.priority` first (nil = 0). Upstream: `helpers.go` `priority`.
pub fn priority(a: &PodEvictionStats, b: &PodEvictionStats) -> Ordering {
    a.priority.unwrap_or(0).cmp(&b.priority.unwrap_or(0))
}

/// Larger (working set − memory request) first; pods without stats first.
/// Upstream: `helpers.go` `memory`.
pub fn memory(a: &PodEvictionStats, b: &PodEvictionStats) -> Ordering {
    match (a.memory_working_set_bytes, b.memory_working_set_bytes) {
        (Some(x), Some(y)) => {
            let da = i128::from(x) - i128::from(a.memory_request_bytes);
            let db = i128::from(y) - i128::from(b.memory_request_bytes);
            db.cmp(&da)
        }
        (x, y) => cmp_found(x.is_some(), y.is_some()),
    }
}

/// Pods without disk stats first, then pods whose usage exceeds their ephemeral-storage request.
/// Upstream: `helpers.go` `exceedDiskRequests`.
pub fn exceed_disk_requests(a: &PodEvictionStats, b: &PodEvictionStats) -> Ordering {
    match (a.disk_usage, b.disk_usage) {
        (Some(x), Some(y)) => true_first(
            x > a.ephemeral_storage_request_bytes,
            y > b.ephemeral_storage_request_bytes,
        ),
        (x, y) => cmp_found(x.is_some(), y.is_some()),
    }
}

/// Larger (disk usage − ephemeral-storage request) first; pods without stats first.
/// Upstream: `helpers.go` `disk`.
pub fn disk(a: &PodEvictionStats, b: &PodEvictionStats) -> Ordering {
    match (a.disk_usage, b.disk_usage) {
        (Some(x), Some(y)) => {
            let da = i128::from(x) - i128::from(a.ephemeral_storage_request_bytes);
            let db = i128::from(y) - i128::from(b.ephemeral_storage_request_bytes);
            db.cmp(&da)
        }
        (x, y) => cmp_found(x.is_some(), y.is_some()),
    }
}

/// More processes first; pods without stats first. Upstream: `helpers.go` `process`.
pub fn process(a: &PodEvictionStats, b: &PodEvictionStats) -> Ordering {
    match (a.process_count, b.process_count) {
        (Some(x), Some(y)) => y.cmp(&x),
        (x, y) => cmp_found(x.is_some(), y.is_some()),
    }
}

/// Composes ranking keys: the first that does not tie decides. Upstream: `helpers.go` `orderedBy`.
pub fn ordered_by(keys: &[RankFn], a: &PodEvictionStats, b: &PodEvictionStats) -> Ordering {
    keys.iter()
        .map(|k| k(a, b))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// Sorts pods by `keys`, first = evicted first (stable: ties keep their input order, which
/// upstream leaves undefined).
pub fn rank(pods: &mut [PodEvictionStats], keys: &[RankFn]) {
    pods.sort_by(|a, b| ordered_by(keys, a, b));
}

/// `rankMemoryPressure`: `orderedBy(exceedMemoryRequests, priority, memory)` (Kubernetes 1.18+;
/// QoS is no key).
pub const RANK_MEMORY_PRESSURE: &[RankFn] = &[exceed_memory_requests, priority, memory];

/// `rankPIDPressure`: `orderedBy(priority, process)` (since 1.31's PID accounting fix; priority
/// only before).
pub const RANK_PID_PRESSURE: &[RankFn] = &[priority, process];

/// `rankDiskPressureFunc`: `orderedBy(exceedDiskRequests, priority, disk)`.
pub const RANK_DISK_PRESSURE: &[RankFn] = &[exceed_disk_requests, priority, disk];

/// The rank function the manager uses for a signal (`signalToRankFunc`).
pub fn rank_keys_for(signal: EvictionSignal) -> &'static [RankFn] {
    match signal.node_condition() {
        NodePressureCondition::MemoryPressure => RANK_MEMORY_PRESSURE,
        NodePressureCondition::PIDPressure => RANK_PID_PRESSURE,
        NodePressureCondition::DiskPressure => RANK_DISK_PRESSURE,
    }
}
