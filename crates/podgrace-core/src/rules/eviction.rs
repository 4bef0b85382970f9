//! The kubelet eviction manager (node-pressure eviction), spec `termination.md` §5.
//!
//! Upstream: `pkg/kubelet/eviction/eviction_manager.go` (`synchronize`, `Admit`) and
//! `helpers.go` (thresholds, ranking). Quantities are plain integers (bytes, inodes or PIDs);
//! grace periods are whole seconds (`i64`); points in time are [`Duration`]s since an arbitrary
//! origin chosen by the caller (no clock is read here).

use crate::KubeVersion;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The override of a hard eviction since Kubernetes 1.31 (`immediateEvictionGracePeriodSeconds`).
pub const IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS: i64 = 1;

/// The release from which a hard eviction gets [`IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS`] instead
/// of 0 (PR #124063).
pub const IMMEDIATE_EVICTION_GRACE_SINCE: KubeVersion = KubeVersion::new(1, 31);
/// Pods at or above this priority are critical and never evicted (`SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// `evictionPressureTransitionPeriod` default, and what a configured 0 becomes: 5 minutes.
pub const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);
/// `evictionMaxPodGracePeriod` default, seconds.
pub const DEFAULT_EVICTION_MAX_POD_GRACE_PERIOD_SECONDS: i64 = 0;
/// Pod status reason of an evicted pod.
pub const EVICTED_REASON: &str = "Evicted";

/// An eviction signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EvictionSignal {
    MemoryAvailable,
    AllocatableMemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    ContainerFsAvailable,
    ContainerFsInodesFree,
    PidAvailable,
}

const SIGNAL_NAMES: &[(EvictionSignal, &str)] = &[
    (EvictionSignal::MemoryAvailable, "memory.available"),
    (
        EvictionSignal::AllocatableMemoryAvailable,
        "allocatableMemory.available",
    ),
    (EvictionSignal::NodeFsAvailable, "nodefs.available"),
    (EvictionSignal::NodeFsInodesFree, "nodefs.inodesFree"),
    (EvictionSignal::ImageFsAvailable, "imagefs.available"),
    (EvictionSignal::ImageFsInodesFree, "imagefs.inodesFree"),
    (
        EvictionSignal::ContainerFsAvailable,
        "containerfs.available",
    ),
    (
        EvictionSignal::ContainerFsInodesFree,
        "containerfs.inodesFree",
    ),
    (EvictionSignal::PidAvailable, "pid.available"),
];

/// The node condition a pressure signal sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodePressureCondition {
    MemoryPressure,
    DiskPressure,
    PIDPressure,
}

impl EvictionSignal {
    /// The kubelet's name, such as `memory.available`.
    pub fn name(self) -> &'static str {
        SIGNAL_NAMES
            .iter()
            .find(|(s, _)| *s == self)
            .map(|(_, n)| *n)
            .unwrap_or("")
    }

    /// Looks a signal up by its kubelet name (case-sensitive, as upstream).
    pub fn from_name(name: &str) -> Option<Self> {
        SIGNAL_NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(s, _)| *s)
    }

    /// The node condition the signal drives (`signalToNodeCondition`).
    pub fn node_condition(self) -> NodePressureCondition {
        use EvictionSignal::*;
        match self {
            MemoryAvailable | AllocatableMemoryAvailable => NodePressureCondition::MemoryPressure,
            PidAvailable => NodePressureCondition::PIDPressure,
            _ => NodePressureCondition::DiskPressure,
        }
    }

    fn is_memory(self) -> bool {
        matches!(
            self,
            EvictionSignal::MemoryAvailable | EvictionSignal::AllocatableMemoryAvailable
        )
    }
}

/// A threshold value: an absolute quantity or a fraction of capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    /// Bytes, inodes or PIDs.
    Quantity(i64),
    /// A fraction of capacity in 0..=1 (`10%` is 0.1).
    Percentage(f64),
}

/// One eviction threshold (`evictionapi.Threshold`, operator always `<`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub signal: EvictionSignal,
    pub value: ThresholdValue,
    /// `evictionSoftGracePeriod` for a soft threshold; zero for a hard one.
    pub grace_period: Duration,
}

impl Threshold {
    /// `true` for a hard threshold (`isHardEvictionThreshold`: grace period 0).
    pub fn is_hard(&self) -> bool {
        self.grace_period.is_zero()
    }

    /// The threshold as an absolute quantity for a signal with `capacity`
    /// (`GetThresholdQuantity`: capacity × percentage, truncated).
    pub fn quantity(&self, capacity: Option<i64>) -> Option<i64> {
        match self.value {
            ThresholdValue::Quantity(q) => Some(q),
            ThresholdValue::Percentage(p) => capacity.map(|c| (c as f64 * p) as i64),
        }
    }
}

/// Why a quantity (`100Mi`, `1.5Gi`, `500`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseQuantityError {
    #[error("invalid quantity {0:?}")]
    Syntax(String),
    #[error("quantity {0:?} out of range")]
    Overflow(String),
}

/// Parses a Kubernetes quantity into an integer, rounding a fraction up (as `Quantity.Value()`).
/// Suffixes: `Ki Mi Gi Ti Pi Ei`, `k M G T P E`, `m` (milli); a plain number; a leading `-`.
///
/// Upstream: `k8s.io/apimachinery/pkg/api/resource` `ParseQuantity` (decimal exponents `e3` are
/// not accepted here).
///
/// # Errors
/// [`ParseQuantityError`] for other syntax or a value beyond `i64`.
pub fn parse_quantity(s: &str) -> Result<i64, ParseQuantityError> {
    let syntax = || ParseQuantityError::Syntax(s.to_string());
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    // (multiplier numerator, divisor)
    let (mul, div): (i128, i128) = match suffix {
        "" => (1, 1),
        "m" => (1, 1000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        _ => return Err(syntax()),
    };
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || frac_part.contains('.')
        || frac_part.len() > 18
    {
        return Err(syntax());
    }
    let overflow = || ParseQuantityError::Overflow(s.to_string());
    let int: i128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| overflow())?
    };
    let frac_den: i128 = 10i128.pow(frac_part.len() as u32);
    let frac: i128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().map_err(|_| syntax())?
    };
    let numer = int
        .checked_mul(frac_den)
        .and_then(|v| v.checked_add(frac))
        .and_then(|v| v.checked_mul(mul))
        .ok_or_else(overflow)?;
    let den = frac_den * div;
    let mut value = numer / den + i128::from(numer % den != 0);
    if neg {
        value = -(numer / den);
    }
    i64::try_from(value).map_err(|_| overflow())
}

/// Why an eviction threshold (`memory.available<100Mi`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseThresholdError {
    #[error("threshold {0:?}: expected SIGNAL<VALUE")]
    Syntax(String),
    #[error("threshold {0:?}: unknown eviction signal")]
    UnknownSignal(String),
    #[error("threshold {0:?}: invalid value")]
    Value(String),
    #[error("threshold {0:?}: negative value")]
    Negative(String),
}

/// Parses one threshold, `memory.available<100Mi` or `nodefs.available<10%`, with the given
/// grace period (zero for `evictionHard`, the `evictionSoftGracePeriod` entry for soft).
///
/// Upstream: `helpers.go` `ParseThresholdConfig` / `parseThresholdStatement` (all versions
/// modelled). Only the `<` operator exists; percentages must be within 0–100 %.
///
/// # Errors
/// [`ParseThresholdError`] naming what is wrong.
pub fn parse_threshold(s: &str, grace_period: Duration) -> Result<Threshold, ParseThresholdError> {
    let (name, value) = s
        .trim()
        .split_once('<')
        .ok_or_else(|| ParseThresholdError::Syntax(s.into()))?;
    let signal = EvictionSignal::from_name(name.trim())
        .ok_or_else(|| ParseThresholdError::UnknownSignal(s.into()))?;
    let value = value.trim();
    let value = if let Some(p) = value.strip_suffix('%') {
        let p: f64 = p
            .trim()
            .parse()
            .map_err(|_| ParseThresholdError::Value(s.into()))?;
        if !p.is_finite() || !(0.0..=100.0).contains(&p) {
            return Err(ParseThresholdError::Value(s.into()));
        }
        ThresholdValue::Percentage(p / 100.0)
    } else {
        let q = parse_quantity(value).map_err(|_| ParseThresholdError::Value(s.into()))?;
        if q < 0 {
            return Err(ParseThresholdError::Negative(s.into()));
        }
        ThresholdValue::Quantity(q)
    };
    Ok(Threshold {
        signal,
        value,
        grace_period,
    })
}

/// The default `evictionHard` of the kubelet for a node OS.
///
/// Upstream: `k8s.io/kubelet/config/v1beta1/types.go` doc comments (2026): Linux
/// `memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%`;
/// Windows `memory.available<500Mi, nodefs.available<10%, imagefs.available<15%`. Used only when
/// no `evictionHard` key is configured (unless `mergeDefaultEvictionSettings`).
pub fn default_eviction_hard(os: crate::rules::runtime::NodeOs) -> Vec<Threshold> {
    use EvictionSignal::*;
    let q = |signal, v| Threshold {
        signal,
        value: ThresholdValue::Quantity(v),
        grace_period: Duration::ZERO,
    };
    let p = |signal, v| Threshold {
        signal,
        value: ThresholdValue::Percentage(v),
        grace_period: Duration::ZERO,
    };
    match os {
        crate::rules::runtime::NodeOs::Linux => vec![
            q(MemoryAvailable, 100 << 20),
            p(NodeFsAvailable, 0.10),
            p(NodeFsInodesFree, 0.05),
            p(ImageFsAvailable, 0.15),
        ],
        crate::rules::runtime::NodeOs::Windows => {
            vec![
                q(MemoryAvailable, 500 << 20),
                p(NodeFsAvailable, 0.10),
                p(ImageFsAvailable, 0.15),
            ]
        }
    }
}

/// `evictionPressureTransitionPeriod` as the manager uses it: a configured 0 means 5 minutes.
/// Upstream: kubelet config defaulting (`SetDefaults_KubeletConfiguration`).
pub fn pressure_transition_period(configured: Duration) -> Duration {
    if configured.is_zero() {
        DEFAULT_PRESSURE_TRANSITION_PERIOD
    } else {
        configured
    }
}

/// The grace-period override an evicted pod gets, in seconds.
///
/// * Hard threshold (and local-storage evictions): 1 since Kubernetes 1.31 (PR #124063); 0
///   before, which the pod workers of those releases turned into the full TGPS.
/// * Soft threshold: `min(evictionMaxPodGracePeriod, TGPS)`, or evictionMaxPodGracePeriod when
///   TGPS is unset. A negative maximum is passed on as is (it does NOT defer to the pod: bug
///   #118172, fixes still open); the pod worker floors it to 1.
///
/// Upstream: `eviction_manager.go` `synchronize` (v1.35+ era read). The `min` with TGPS is
/// applied for every modelled version; the release that introduced it was not pinned.
pub fn grace_period_override(
    hard: bool,
    eviction_max_pod_grace_period_seconds: i64,
    pod_tgps: Option<i64>,
    version: KubeVersion,
) -> i64 {
    if hard {
        return if version >= IMMEDIATE_EVICTION_GRACE_SINCE {
            IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS
        } else {
            0
        };
    }
    match pod_tgps {
        Some(t) => eviction_max_pod_grace_period_seconds.min(t),
        None => eviction_max_pod_grace_period_seconds,
    }
}

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
    Guaranteed,
    Burstable,
    BestEffort,
}

/// What the eviction manager knows of one active pod. Quantities in bytes / processes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodEvictionStats {
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
}

impl PodEvictionStats {
    /// Critical pods are never evicted (`kubelettypes.IsCriticalPod`: static, mirror, or
    /// priority ≥ 2000000000).
    pub fn is_critical(&self) -> bool {
        self.static_or_mirror || self.priority.unwrap_or(0) >= SYSTEM_CRITICAL_PRIORITY
    }
}

/// A ranking key: `Less` means "evicted first".
pub type RankFn = fn(&PodEvictionStats, &PodEvictionStats) -> Ordering;

/// Pods for which `found` is false come first (`cmpBool(!p1Found, !p2Found)`).
fn cmp_found(a: bool, b: bool) -> Ordering {
    // `true` first: a missing stat (found = false) sorts before.
    b.cmp(&a).reverse()
}

fn true_first(a: bool, b: bool) -> Ordering {
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

/// The eviction configuration (`eviction.Config`).
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionConfig {
    /// Hard and soft thresholds together.
    pub thresholds: Vec<Threshold>,
    /// `evictionMaxPodGracePeriod`, seconds.
    pub eviction_max_pod_grace_period_seconds: i64,
    /// `evictionPressureTransitionPeriod` (0 means 5 minutes).
    pub pressure_transition_period: Duration,
}

/// One signal observation: available amount and capacity (needed for percentage thresholds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub available: i64,
    pub capacity: Option<i64>,
}

/// The pod chosen in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    pub pod: String,
    /// Override passed to `killPodNow`, seconds.
    pub grace_period_override: i64,
    pub signal: EvictionSignal,
    pub hard: bool,
}

/// What one `synchronize` round decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncOutcome {
    /// Node conditions after the transition period is applied.
    pub node_conditions: BTreeSet<NodePressureCondition>,
    /// Thresholds met now, grace periods ignored.
    pub thresholds_met: Vec<Threshold>,
    /// At most one pod per round.
    pub eviction: Option<Eviction>,
    /// Critical pods that ranked before the evicted one and were refused.
    pub refused_critical: Vec<String>,
}

/// Why a round could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SynchronizeError {
    /// A percentage threshold on a signal observed without capacity.
    #[error("threshold on {0} is a percentage but the observation has no capacity")]
    MissingCapacity(&'static str),
    /// Time went backwards between two rounds.
    #[error("synchronize called at {now:?}, before the previous round at {previous:?}")]
    TimeWentBack { now: Duration, previous: Duration },
}

/// The eviction manager's memory between rounds, moved through [`EvictionManager::synchronize`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvictionManager {
    /// First time each threshold (index into the config) was observed met, still met since.
    first_observed: BTreeMap<usize, Duration>,
    /// Last time each condition was observed.
    condition_last_observed: BTreeMap<NodePressureCondition, Duration>,
    node_conditions: BTreeSet<NodePressureCondition>,
    last_round: Option<Duration>,
}

impl EvictionManager {
    /// A manager that has not run yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The node conditions of the last round.
    pub fn node_conditions(&self) -> &BTreeSet<NodePressureCondition> {
        &self.node_conditions
    }

    /// One round at time `now` (the same config every round; thresholds are tracked by index).
    ///
    /// Steps of upstream `managerImpl.synchronize` (v1.35+ era) that are modelled: thresholds met
    /// (grace ignored) → first-observed times → conditions kept for the pressure transition
    /// period → thresholds whose grace has elapsed → `byEvictionPriority` → rank pods with the
    /// signal's rank function → evict the first non-critical pod (one per round) with
    /// [`grace_period_override`]. Not modelled: minimum reclaim, node-level reclaim (image and
    /// container GC), local-storage eviction, the "stats updated since last sync" filter.
    ///
    /// # Errors
    /// [`SynchronizeError`] for a percentage threshold without capacity, or `now` earlier than
    /// the previous round.
    pub fn synchronize(
        &mut self,
        config: &EvictionConfig,
        now: Duration,
        observations: &BTreeMap<EvictionSignal, Observation>,
        pods: &[PodEvictionStats],
        version: KubeVersion,
    ) -> Result<SyncOutcome, SynchronizeError> {
        if let Some(prev) = self.last_round {
            if now < prev {
                return Err(SynchronizeError::TimeWentBack {
                    now,
                    previous: prev,
                });
            }
        }
        self.last_round = Some(now);
        let mut met: Vec<usize> = Vec::new();
        for (i, t) in config.thresholds.iter().enumerate() {
            let Some(obs) = observations.get(&t.signal) else {
                continue;
            };
            let q = t
                .quantity(obs.capacity)
                .ok_or(SynchronizeError::MissingCapacity(t.signal.name()))?;
            if q > obs.available {
                met.push(i);
            }
        }
        let first_observed: BTreeMap<usize, Duration> = met
            .iter()
            .map(|i| (*i, self.first_observed.get(i).copied().unwrap_or(now)))
            .collect();
        self.first_observed = first_observed;
        for i in &met {
            self.condition_last_observed
                .insert(config.thresholds[*i].signal.node_condition(), now);
        }
        let period = pressure_transition_period(config.pressure_transition_period);
        self.node_conditions = self
            .condition_last_observed
            .iter()
            .filter(|(_, last)| now.saturating_sub(**last) < period)
            .map(|(c, _)| *c)
            .collect();
        let mut outcome = SyncOutcome {
            node_conditions: self.node_conditions.clone(),
            thresholds_met: met.iter().map(|i| config.thresholds[*i]).collect(),
            ..SyncOutcome::default()
        };
        let mut active: Vec<Threshold> = met
            .iter()
            .filter(|i| {
                let t = &config.thresholds[**i];
                let since = self.first_observed.get(i).copied().unwrap_or(now);
                now.saturating_sub(since) >= t.grace_period
            })
            .map(|i| config.thresholds[*i])
            .collect();
        sort_by_eviction_priority(&mut active);
        let Some(chosen) = active.first().copied() else {
            return Ok(outcome);
        };
        let mut ranked = pods.to_vec();
        rank(&mut ranked, rank_keys_for(chosen.signal));
        for pod in ranked {
            if pod.is_critical() {
                outcome.refused_critical.push(pod.name.clone());
                continue;
            }
            outcome.eviction = Some(Eviction {
                grace_period_override: grace_period_override(
                    chosen.is_hard(),
                    config.eviction_max_pod_grace_period_seconds,
                    pod.termination_grace_period_seconds,
                    version,
                ),
                pod: pod.name,
                signal: chosen.signal,
                hard: chosen.is_hard(),
            });
            break;
        }
        Ok(outcome)
    }
}

/// A pod asking to be admitted on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmitPod {
    pub qos: QosClass,
    /// Critical pods are always admitted.
    pub critical: bool,
    /// Tolerates the `node.kubernetes.io/memory-pressure:NoSchedule` taint.
    pub tolerates_memory_pressure: bool,
}

/// Admission while the node reports pressure: no condition → admit; critical → admit; only
/// MemoryPressure → admit unless BestEffort without the memory-pressure toleration; any other
/// condition → reject (reason "Evicted").
///
/// Upstream: `eviction_manager.go` `managerImpl.Admit` (1.18+; the toleration rule since 1.22).
pub fn admit(conditions: &BTreeSet<NodePressureCondition>, pod: AdmitPod) -> bool {
    if conditions.is_empty() || pod.critical {
        return true;
    }
    if conditions
        .iter()
        .all(|c| *c == NodePressureCondition::MemoryPressure)
    {
        return pod.qos != QosClass::BestEffort || pod.tolerates_memory_pressure;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: KubeVersion = KubeVersion::LATEST;

    #[test]
    fn override_values() {
        assert_eq!(grace_period_override(true, 60, Some(30), V), 1);
        assert_eq!(
            grace_period_override(true, 60, Some(30), KubeVersion::new(1, 30)),
            0
        );
        assert_eq!(grace_period_override(false, 0, Some(30), V), 0);
        assert_eq!(grace_period_override(false, -1, Some(30), V), -1);
        assert_eq!(grace_period_override(false, 60, Some(120), V), 60);
        assert_eq!(grace_period_override(false, 60, Some(10), V), 10);
        assert_eq!(grace_period_override(false, 5, None, V), 5);
    }

    #[test]
    fn quantities_and_thresholds() {
        assert_eq!(parse_quantity("100Mi"), Ok(100 << 20));
        assert_eq!(parse_quantity("1.5Gi"), Ok(1536 << 20));
        assert_eq!(parse_quantity("1200"), Ok(1200));
        assert_eq!(parse_quantity("1k"), Ok(1000));
        assert_eq!(parse_quantity("1500m"), Ok(2));
        assert!(parse_quantity("1Xi").is_err());
        assert!(parse_quantity("").is_err());
        assert!(parse_quantity("99999999999Ei").is_err());
        let t = parse_threshold("memory.available<100Mi", Duration::ZERO).unwrap();
        assert!(t.is_hard());
        assert_eq!(t.quantity(None), Some(100 << 20));
        let p = parse_threshold("nodefs.available<10%", Duration::from_secs(60)).unwrap();
        assert_eq!(p.quantity(Some(1000)), Some(100));
        assert!(!p.is_hard());
        assert!(parse_threshold("memory.available>1Gi", Duration::ZERO).is_err());
        assert!(parse_threshold("bogus<1", Duration::ZERO).is_err());
        assert!(parse_threshold("memory.available<-1", Duration::ZERO).is_err());
        assert!(parse_threshold("nodefs.available<120%", Duration::ZERO).is_err());
        assert_eq!(
            default_eviction_hard(crate::rules::runtime::NodeOs::Linux).len(),
            4
        );
    }

    #[test]
    fn critical_pods_are_refused_and_one_pod_per_round() {
        let cfg = EvictionConfig {
            thresholds: vec![parse_threshold("memory.available<1Gi", Duration::ZERO).unwrap()],
            eviction_max_pod_grace_period_seconds: 0,
            pressure_transition_period: Duration::ZERO,
        };
        let pod = |name: &str, prio, ws| PodEvictionStats {
            name: name.into(),
            priority: Some(prio),
            memory_working_set_bytes: Some(ws),
            ..Default::default()
        };
        let mut pods = [
            pod("critical", 0, 900 << 20),
            pod("a", 0, 100),
            pod("b", 0, 50),
        ];
        pods[0].static_or_mirror = true;
        assert!(pod("p", SYSTEM_CRITICAL_PRIORITY, 0).is_critical());
        let obs = BTreeMap::from([(
            EvictionSignal::MemoryAvailable,
            Observation {
                available: 1,
                capacity: None,
            },
        )]);
        let mut m = EvictionManager::new();
        let out = m.synchronize(&cfg, Duration::ZERO, &obs, &pods, V).unwrap();
        assert_eq!(out.refused_critical, vec!["critical".to_string()]);
        assert_eq!(out.eviction.unwrap().pod, "a");
        // 0 transition period means 5 minutes.
        let calm = BTreeMap::from([(
            EvictionSignal::MemoryAvailable,
            Observation {
                available: 2 << 30,
                capacity: None,
            },
        )]);
        let out = m
            .synchronize(&cfg, Duration::from_secs(299), &calm, &pods, V)
            .unwrap();
        assert!(out
            .node_conditions
            .contains(&NodePressureCondition::MemoryPressure));
        let out = m
            .synchronize(&cfg, Duration::from_secs(300), &calm, &pods, V)
            .unwrap();
        assert!(out.node_conditions.is_empty());
        assert!(m
            .synchronize(&cfg, Duration::from_secs(1), &calm, &pods, V)
            .is_err());
    }

    #[test]
    fn admission() {
        let mem = BTreeSet::from([NodePressureCondition::MemoryPressure]);
        let be = AdmitPod {
            qos: QosClass::BestEffort,
            critical: false,
            tolerates_memory_pressure: false,
        };
        assert!(!admit(&mem, be));
        assert!(admit(
            &mem,
            AdmitPod {
                tolerates_memory_pressure: true,
                ..be
            }
        ));
        assert!(admit(
            &mem,
            AdmitPod {
                critical: true,
                ..be
            }
        ));
        let disk = BTreeSet::from([NodePressureCondition::DiskPressure]);
        assert!(!admit(
            &disk,
            AdmitPod {
                qos: QosClass::Guaranteed,
                ..be
            }
        ));
        assert!(admit(&BTreeSet::new(), be));
    }
}
