//! The cgroup resources the kubelet derives from a pod's `resources`: each container's CRI
//! `LinuxContainerResources` (cpu shares, CFS quota and period, memory limit, oom_score_adj,
//! swap, `memory.oom.group`), the sandbox's, and the pod cgroup's `ResourceConfig`.
//!
//! Upstream (Kubernetes 1.32 to 1.36; the formulas themselves hold from 1.18, see each item):
//! * `pkg/kubelet/cm/helpers_linux.go`: `MilliCPUToShares`, `MilliCPUToQuota`,
//!   `ResourceConfigForPod`;
//! * `pkg/kubelet/kuberuntime/kuberuntime_container_linux.go`: `generateLinuxContainerResources`,
//!   `calculateLinuxResources`, `ConfigureNoSwap`;
//! * `pkg/kubelet/kuberuntime/kuberuntime_sandbox_linux.go`: `calculateSandboxResources`;
//! * `pkg/kubelet/qos/policy.go`: `GetContainerOOMScoreAdjust`;
//! * `staging/src/k8s.io/component-helpers/resource/helpers.go`: `PodRequests`, `PodLimits`.
//!
//! Not modelled: pod-level `spec.resources` (the PodLevelResources gate, beta from 1.34),
//! `spec.overhead`, hugepages limits, the CPU manager's exclusive cpus
//! (`DisableCPUQuotaWithExclusiveCPUs`), MemoryQoS (`memory.min`/`memory.high`, alpha), the
//! `CPUCFSQuotaPeriod` gate (the period is always 100000 µs) and `LimitedSwap`.

use std::collections::BTreeMap;

use super::qos::{compute_pod_qos, QosClass};
use super::quantity::Quantity;

/// A `v1.ResourceList`: quantities by resource name (`cpu`, `memory`, ...).
pub type ResourceList = BTreeMap<String, Quantity>;

/// The smallest memory limit a container can start under, in bytes: 6 MiB, Docker's minimum
/// since runc's start itself needs a few MiB (moby/moby#41168, opencontainers/runc#1980);
/// CRI-O refuses limits under 12 MiB (`minMemoryLimit`). Neither the API server nor the kubelet
/// refuses a smaller one: the container fails at its start, with the kernel's error.
pub const MIN_STARTABLE_MEMORY_BYTES: i64 = 6 << 20;

/// What to tell the user when a runtime failed to start a container (or the sandbox) of a pod
/// whose containers have a memory limit below [`MIN_STARTABLE_MEMORY_BYTES`], and `error` is
/// the kernel's refusal to create or fill its memory cgroup (ENOMEM, "cannot allocate memory";
/// EBUSY, runc's "unable to set memory limit", or an OOM kill of runc's init):
/// `containers` are `(name, limits.memory as written)`. `None` when the error is something
/// else or no limit is that low.
///
/// Upstream: the kubelet passes the limit on (`generateLinuxContainerResources`), and the
/// failure comes back as `RunContainerError`/`CreateContainerError` or
/// `FailedCreatePodSandBox` with runc's words; this says why.
pub fn memory_limit_too_low_hint<'a>(
    containers: impl IntoIterator<Item = (&'a str, &'a str)>,
    error: &str,
) -> Option<String> {
    let e = error.to_ascii_lowercase();
    let memory_refusal = e.contains("cannot allocate memory")
        || e.contains("os error 12")
        || e.contains("device or resource busy")
        || e.contains("unable to set memory limit")
        || e.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| w.starts_with("oom"));
    if !memory_refusal {
        return None;
    }
    let low: Vec<String> = containers
        .into_iter()
        .filter_map(|(name, written)| {
            let bytes = Quantity::parse(written).ok()?.value();
            (bytes > 0 && bytes < MIN_STARTABLE_MEMORY_BYTES).then(|| {
                let unit = if bytes == 1 { "byte" } else { "bytes" };
                format!("container {name}: limits.memory {written:?} = {bytes} {unit}")
            })
        })
        .collect();
    if low.is_empty() {
        return None;
    }
    Some(format!(
        "the memory limit is too low for any container to start ({}): the kernel refuses to create or charge its cgroup; runc alone needs a few MiB to start a container (Docker refuses limits under 6 MiB, CRI-O under 12 MiB); give it at least what the app needs, in whole bytes (64Mi)",
        low.join(", ")
    ))
}

/// A container's `resources` (`v1.ResourceRequirements`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRequirements {
    /// `requests`.
    pub requests: ResourceList,
    /// `limits`.
    pub limits: ResourceList,
}

impl ResourceRequirements {
    /// `requests.cpu()`: zero when absent.
    pub fn cpu_request(&self) -> Quantity {
        self.requests.get("cpu").copied().unwrap_or_default()
    }

    /// `requests.memory()`: zero when absent.
    pub fn memory_request(&self) -> Quantity {
        self.requests.get("memory").copied().unwrap_or_default()
    }

    /// `limits.cpu()`: zero when absent.
    pub fn cpu_limit(&self) -> Quantity {
        self.limits.get("cpu").copied().unwrap_or_default()
    }

    /// `limits.memory()`: zero when absent.
    pub fn memory_limit(&self) -> Quantity {
        self.limits.get("memory").copied().unwrap_or_default()
    }

    /// The API server's defaulting (`SetDefaults_Pod`, `pkg/apis/core/v1/defaults.go`, all
    /// versions): a resource with a limit and no request gets the limit as its request. The
    /// kubelet only ever sees defaulted pods.
    pub fn defaulted(mut self) -> Self {
        for (k, v) in &self.limits {
            self.requests.entry(k.clone()).or_insert(*v);
        }
        self
    }
}

/// One container of a pod, as the resource rules read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceContainer {
    /// `name`.
    pub name: String,
    /// `resources`.
    pub resources: ResourceRequirements,
    /// An init container with `restartPolicy: Always` (a native sidecar).
    pub sidecar: bool,
}

/// A pod, as the resource rules read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodResources {
    /// `spec.initContainers`, in order (sidecars among them).
    pub init_containers: Vec<ResourceContainer>,
    /// `spec.containers`, in order.
    pub containers: Vec<ResourceContainer>,
    /// `IsNodeCriticalPod`: critical (static, mirror, or priority ≥ 2000000000) and of the
    /// `system-node-critical` priority class.
    pub node_critical: bool,
}

impl PodResources {
    /// `GetPodQOS` (exact: requests as given, no defaulting).
    pub fn qos(&self) -> QosClass {
        let all: Vec<&ResourceRequirements> = self
            .init_containers
            .iter()
            .chain(&self.containers)
            .map(|c| &c.resources)
            .collect();
        compute_pod_qos(&all)
    }

    /// This pod with every container's requests defaulted from its limits (as the API server
    /// stores it).
    pub fn defaulted(mut self) -> Self {
        for c in self.init_containers.iter_mut().chain(&mut self.containers) {
            c.resources = std::mem::take(&mut c.resources).defaulted();
        }
        self
    }
}

/// `MinShares`: the kernel's minimum `cpu.shares`.
pub const MIN_SHARES: u64 = 2;
/// `MaxShares`: the kernel's maximum `cpu.shares`.
pub const MAX_SHARES: u64 = 262_144;
/// `SharesPerCPU`.
pub const SHARES_PER_CPU: i64 = 1024;
/// `QuotaPeriod`: the CFS period, microseconds (100 ms).
pub const QUOTA_PERIOD_US: i64 = 100_000;
/// `MinQuotaPeriod`: the smallest CFS quota, microseconds (1 ms).
pub const MIN_QUOTA_PERIOD_US: i64 = 1000;

/// `MilliCPUToShares`: millicores to `cpu.shares` (1024 per core, at least 2: zero millicores
/// is 2, the kernel's minimum, not Docker's 1024; at most 262144). Kubernetes 1.18 to 1.36.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu == 0 {
        return MIN_SHARES;
    }
    let shares = milli_cpu.saturating_mul(SHARES_PER_CPU) / 1000;
    if shares < MIN_SHARES as i64 {
        MIN_SHARES
    } else if shares > MAX_SHARES as i64 {
        MAX_SHARES
    } else {
        shares as u64
    }
}

/// `MilliCPUToQuota`: millicores to the CFS quota in microseconds per `period_us` (zero
/// millicores: 0, no quota; otherwise at least 1000 µs). The period is the kubelet's
/// `cpuCFSQuotaPeriod` (default 100 ms) with the `CPUCFSQuotaPeriod` gate on (GA in 1.36);
/// before 1.36, with the gate off by default, it was always [`QUOTA_PERIOD_US`], which is the
/// same for the default configuration. Kubernetes 1.18 to 1.36.
pub fn milli_cpu_to_quota(milli_cpu: i64, period_us: i64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    let quota = milli_cpu.saturating_mul(period_us) / 1000;
    quota.max(MIN_QUOTA_PERIOD_US)
}

/// The node facts the container resources depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResources {
    /// The machine's memory, bytes (`machineInfo.MemoryCapacity`).
    pub memory_capacity: i64,
    /// cgroup v2 in unified mode (`isCgroup2UnifiedMode`).
    pub cgroup_v2: bool,
    /// A swap controller is there (`memory.memsw.limit_in_bytes` on v1, `memory.swap.max` on
    /// v2).
    pub swap_controller: bool,
    /// The kubelet's `singleProcessOOMKill` as configured (`None`: unset). Forced `true` on
    /// cgroup v1; unset means `false` on v2 (`pkg/kubelet/kubelet.go`, 1.32+).
    pub single_process_oom_kill: Option<bool>,
    /// `cpuCFSQuota` (default `true`): CPU limits are enforced with a CFS quota.
    pub cpu_cfs_quota: bool,
    /// `cpuCFSQuotaPeriod`, microseconds (default 100000).
    pub cpu_cfs_quota_period_us: i64,
}

impl Default for NodeResources {
    fn default() -> Self {
        NodeResources {
            memory_capacity: 0,
            cgroup_v2: false,
            swap_controller: false,
            single_process_oom_kill: None,
            cpu_cfs_quota: true,
            cpu_cfs_quota_period_us: QUOTA_PERIOD_US,
        }
    }
}

/// CRI `LinuxContainerResources`, the fields the kubelet fills. Zero means unset (CRI's
/// convention), except `oom_score_adj`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinuxContainerResources {
    /// `cpu_period`, microseconds.
    pub cpu_period: i64,
    /// `cpu_quota`, microseconds per period.
    pub cpu_quota: i64,
    /// `cpu_shares`.
    pub cpu_shares: i64,
    /// `memory_limit_in_bytes`.
    pub memory_limit_in_bytes: i64,
    /// `oom_score_adj`.
    pub oom_score_adj: i64,
    /// `memory_swap_limit_in_bytes` (cgroup v1 with a swap controller: the memory limit, no
    /// swap beyond it).
    pub memory_swap_limit_in_bytes: i64,
    /// `unified`: cgroup v2 files (`memory.oom.group`, `memory.swap.max`).
    pub unified: BTreeMap<String, String>,
}

/// `calculateLinuxResources`: cpu shares from the cpu request (from the limit when there is
/// no request; 2 for none), the memory limit, the CFS quota and period from the cpu limit
/// (when `cpuCFSQuota`), and on cgroup v2 `memory.oom.group: "1"` unless
/// `singleProcessOOMKill` (from 1.32; before, nothing on v2).
pub fn calculate_linux_resources(
    cpu_request: Option<Quantity>,
    cpu_limit: Quantity,
    memory_limit: Quantity,
    node: &NodeResources,
) -> LinuxContainerResources {
    let mut r = LinuxContainerResources::default();
    let shares = match cpu_request {
        None => milli_cpu_to_shares(cpu_limit.milli_value()),
        Some(req) => milli_cpu_to_shares(req.milli_value()),
    };
    r.cpu_shares = shares as i64;
    r.memory_limit_in_bytes = memory_limit.value();
    if node.cpu_cfs_quota {
        r.cpu_quota = milli_cpu_to_quota(cpu_limit.milli_value(), node.cpu_cfs_quota_period_us);
        r.cpu_period = node.cpu_cfs_quota_period_us;
    }
    if node.cgroup_v2 && !node.single_process_oom_kill.unwrap_or(false) {
        r.unified.insert("memory.oom.group".into(), "1".into());
    }
    r
}

const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
const BESTEFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// `GetContainerOOMScoreAdjust`: -997 for a node-critical or Guaranteed pod, 1000 for
/// BestEffort; for Burstable `1000 − 1000 × memoryRequest / memoryCapacity` (integer
/// division), a sidecar's no higher than that of the regular container with the smallest
/// request (1.29+), kept within 3..=999. `container` must be one of `pod`'s (by name).
/// Kubernetes 1.18 to 1.36 (the sidecar rule from 1.29).
pub fn container_oom_score_adjust(
    pod: &PodResources,
    container: &ResourceContainer,
    memory_capacity: i64,
) -> i64 {
    if pod.node_critical {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match pod.qos() {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BESTEFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    let capacity = i128::from(memory_capacity.max(1));
    let adj = |request: i64| (1000 - (1000 * i128::from(request)) / capacity) as i64;
    let mut oom = adj(container.resources.memory_request().value());
    let is_sidecar =
        container.sidecar && pod.init_containers.iter().any(|i| i.name == container.name);
    if is_sidecar {
        let min_regular = pod
            .containers
            .iter()
            .map(|c| c.resources.memory_request().value())
            .min()
            .unwrap_or(0);
        oom = oom.min(adj(min_regular));
    }
    if oom < 1000 + GUARANTEED_OOM_SCORE_ADJ {
        return 1000 + GUARANTEED_OOM_SCORE_ADJ;
    }
    if oom == BESTEFFORT_OOM_SCORE_ADJ {
        return oom - 1;
    }
    oom
}

/// `generateLinuxContainerResources` without pod-level resources: [`calculate_linux_resources`]
/// from the container's cpu request (only when written), cpu limit and memory limit, its
/// [`container_oom_score_adjust`], and `NoSwap` (`configureContainerSwapResources`, 1.28+):
/// with a swap controller, `memory_swap_limit_in_bytes` = the memory limit on v1, `unified
/// memory.swap.max: "0"` on v2.
pub fn generate_linux_container_resources(
    pod: &PodResources,
    container: &ResourceContainer,
    node: &NodeResources,
) -> LinuxContainerResources {
    let res = &container.resources;
    let mut r = calculate_linux_resources(
        res.requests.get("cpu").copied(),
        res.cpu_limit(),
        res.memory_limit(),
        node,
    );
    r.oom_score_adj = container_oom_score_adjust(pod, container, node.memory_capacity);
    if node.swap_controller {
        if node.cgroup_v2 {
            r.unified.insert("memory.swap.max".into(), "0".into());
        } else {
            r.memory_swap_limit_in_bytes = r.memory_limit_in_bytes;
        }
    }
    r
}

/// Which containers declared a cpu and a memory limit (`PodLimits`' `ContainerFn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsDeclared {
    /// Every container (and every init container's cumulative view) has a cpu limit.
    pub cpu: bool,
    /// Every container (and every init container's cumulative view) has a memory limit.
    pub memory: bool,
}

fn add(list: &mut ResourceList, more: &ResourceList) {
    for (k, v) in more {
        *list.entry(k.clone()).or_default() += *v;
    }
}

fn max_into(list: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        let e = list.entry(k.clone()).or_insert(*v);
        if *v > *e {
            *e = *v;
        }
    }
}

/// `AggregateContainerRequests`/`AggregateContainerLimits`: the regular containers and the
/// sidecars summed; then the maximum with each init container's use (its own plus the sidecars
/// started before it). `f` sees each container's list and each init container's cumulative one.
fn aggregate(
    pod: &PodResources,
    pick: impl Fn(&ResourceRequirements) -> &ResourceList,
    mut f: impl FnMut(&ResourceList),
) -> ResourceList {
    let mut total = ResourceList::new();
    for c in &pod.containers {
        let l = pick(&c.resources);
        f(l);
        add(&mut total, l);
    }
    let mut sidecars = ResourceList::new();
    let mut init = ResourceList::new();
    for c in &pod.init_containers {
        let l = pick(&c.resources);
        let use_ = if c.sidecar {
            add(&mut total, l);
            add(&mut sidecars, l);
            sidecars.clone()
        } else {
            let mut t = l.clone();
            add(&mut t, &sidecars);
            t
        };
        f(&use_);
        max_into(&mut init, &use_);
    }
    max_into(&mut total, &init);
    total
}

/// `PodRequests` (no pod-level resources, no overhead): what the pod requests, sidecars and
/// init containers included (1.29+ sidecar rule; before, init containers' maximum).
pub fn pod_requests(pod: &PodResources) -> ResourceList {
    aggregate(pod, |r| &r.requests, |_| {})
}

/// `PodLimits` (no pod-level resources, no overhead), and whether every container declared a
/// cpu and a memory limit.
pub fn pod_limits(pod: &PodResources) -> (ResourceList, LimitsDeclared) {
    let mut declared = LimitsDeclared {
        cpu: true,
        memory: true,
    };
    let limits = aggregate(
        pod,
        |r| &r.limits,
        |l| {
            let zero = |k: &str| l.get(k).is_none_or(Quantity::is_zero);
            if zero("cpu") {
                declared.cpu = false;
            }
            if zero("memory") {
                declared.memory = false;
            }
        },
    );
    (limits, declared)
}

/// The kubelet's `ResourceConfig` for a pod cgroup; `None` fields are left as the cgroup has
/// them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceConfig {
    /// `cpu.shares`.
    pub cpu_shares: Option<u64>,
    /// `cpu.cfs_quota_us`, microseconds (-1: unlimited; 0 is not written).
    pub cpu_quota: Option<i64>,
    /// `cpu.cfs_period_us`, microseconds.
    pub cpu_period: Option<u64>,
    /// `memory.limit_in_bytes` (v1) or `memory.max` (v2), bytes (0 is not written).
    pub memory: Option<i64>,
}

/// `ResourceConfigForPod` (without pod-level resources, hugepages and MemoryQoS): Guaranteed
/// pods get shares, quota, period and memory; Burstable ones shares, plus quota and period
/// when every container has a cpu limit and memory when every one has a memory limit;
/// BestEffort ones 2 shares. `enforce_cpu_limits` false makes the quota -1; `cpu_period_us` is
/// the kubelet's `cpuCFSQuotaPeriod` (default 100000). Kubernetes 1.18 to 1.36 (sidecars
/// summed from 1.29).
pub fn resource_config_for_pod(
    pod: &PodResources,
    enforce_cpu_limits: bool,
    cpu_period_us: u64,
) -> ResourceConfig {
    let requests = pod_requests(pod);
    let (limits, declared) = pod_limits(pod);
    let cpu_requests = requests.get("cpu").map_or(0, Quantity::milli_value);
    let cpu_limits = limits.get("cpu").map_or(0, Quantity::milli_value);
    let memory_limits = limits.get("memory").map_or(0, Quantity::value);
    let shares = milli_cpu_to_shares(cpu_requests);
    let quota = if enforce_cpu_limits {
        milli_cpu_to_quota(cpu_limits, i64::try_from(cpu_period_us).unwrap_or(i64::MAX))
    } else {
        -1
    };
    let period = cpu_period_us;
    match pod.qos() {
        QosClass::Guaranteed => ResourceConfig {
            cpu_shares: Some(shares),
            cpu_quota: Some(quota),
            cpu_period: Some(period),
            memory: Some(memory_limits),
        },
        QosClass::Burstable => ResourceConfig {
            cpu_shares: Some(shares),
            cpu_quota: declared.cpu.then_some(quota),
            cpu_period: declared.cpu.then_some(period),
            memory: declared.memory.then_some(memory_limits),
        },
        QosClass::BestEffort => ResourceConfig {
            cpu_shares: Some(MIN_SHARES),
            ..ResourceConfig::default()
        },
    }
}

/// `calculateSandboxResources` (no exclusive cpus): [`calculate_linux_resources`] over the
/// pod's requests and limits, which the kubelet puts in the sandbox config's
/// `linux.resources` (1.32+; informational for the runtime, which applies nothing of it).
pub fn sandbox_resources(pod: &PodResources, node: &NodeResources) -> LinuxContainerResources {
    let requests = pod_requests(pod);
    let (limits, _) = pod_limits(pod);
    calculate_linux_resources(
        requests.get("cpu").copied(),
        limits.get("cpu").copied().unwrap_or_default(),
        limits.get("memory").copied().unwrap_or_default(),
        node,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tiny_memory_limit_explains_the_kernels_refusal() {
        let hint = memory_limit_too_low_hint(
            [("app", "1m"), ("side", "64Mi")],
            "mkdir /sys/fs/cgroup/memory/kubepods/pod1/abc: cannot allocate memory: unknown",
        )
        .expect("a hint");
        assert!(hint.starts_with("the memory limit is too low for any container to start (container app: limits.memory \"1m\" = 1 byte)"), "{hint}");
        assert_eq!(
            memory_limit_too_low_hint([("app", "64Mi")], "cannot allocate memory"),
            None
        );
        assert_eq!(
            memory_limit_too_low_hint([("app", "1m")], "exec format error"),
            None
        );
        // runc's init killed by the OOM killer, but not a word that only contains "oom".
        assert!(memory_limit_too_low_hint(
            [("app", "1m")],
            "container init was OOM-killed (memory limit too low?)"
        )
        .is_some());
        assert_eq!(
            memory_limit_too_low_hint([("app", "1m")], "no room left in /var/lib/containerd"),
            None
        );
    }

    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).expect("quantity")
    }

    fn list(v: &[(&str, &str)]) -> ResourceList {
        v.iter().map(|(k, s)| (k.to_string(), q(s))).collect()
    }

    fn ctr(name: &str, req: &[(&str, &str)], lim: &[(&str, &str)]) -> ResourceContainer {
        ResourceContainer {
            name: name.into(),
            resources: ResourceRequirements {
                requests: list(req),
                limits: list(lim),
            },
            sidecar: false,
        }
    }

    #[test]
    fn shares_and_quota_as_helpers_linux() {
        // TestMilliCPUToQuota.
        for (milli, quota) in [
            (0, 0),
            (5, 1000),
            (9, 1000),
            (10, 1000),
            (200, 20000),
            (500, 50000),
            (1000, 100000),
            (1500, 150000),
        ] {
            assert_eq!(milli_cpu_to_quota(milli, QUOTA_PERIOD_US), quota, "{milli}");
        }
        for (milli, shares) in [(0, 2), (1, 2), (1000, 1024), (500, 512), (300_000, 262_144)] {
            assert_eq!(milli_cpu_to_shares(milli), shares, "{milli}");
        }
    }

    #[test]
    fn pod_cgroup_config_by_qos_class() {
        let g = PodResources {
            containers: vec![ctr(
                "a",
                &[("cpu", "100m"), ("memory", "100Mi")],
                &[("cpu", "100m"), ("memory", "100Mi")],
            )],
            ..Default::default()
        };
        assert_eq!(
            resource_config_for_pod(&g, true, 100_000),
            ResourceConfig {
                cpu_shares: Some(102),
                cpu_quota: Some(10000),
                cpu_period: Some(100000),
                memory: Some(104_857_600),
            }
        );
        let b = PodResources {
            containers: vec![ctr("a", &[("cpu", "100m")], &[("memory", "32Mi")])],
            ..Default::default()
        };
        assert_eq!(
            resource_config_for_pod(&b, true, 100_000),
            ResourceConfig {
                cpu_shares: Some(102),
                cpu_quota: None,
                cpu_period: None,
                memory: Some(33_554_432),
            }
        );
        let be = PodResources {
            containers: vec![ctr("a", &[], &[])],
            ..Default::default()
        };
        assert_eq!(
            resource_config_for_pod(&be, true, 100_000).cpu_shares,
            Some(MIN_SHARES)
        );
    }
}
