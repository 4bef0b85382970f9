//! Eviction signals and thresholds: `--eviction-hard` / `--eviction-soft` parsing, the defaults,
//! the pressure transition period.
//!
//! Upstream: `pkg/kubelet/eviction/api/types.go`, `helpers.go` (`ParseThresholdConfig`,
//! `parseThresholdStatement`), `pkg/kubelet/apis/config/v1beta1/defaults_linux.go`.

use std::time::Duration;

/// `evictionPressureTransitionPeriod` default, and what a configured 0 becomes: 5 minutes.
pub const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);

/// An eviction signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EvictionSignal {
    /// `memory.available`: node memory capacity minus the working set, bytes (cgroup v1 and v2).
    MemoryAvailable,
    /// `allocatableMemory.available`: node allocatable memory minus the pods' working set, bytes.
    AllocatableMemoryAvailable,
    /// `nodefs.available`: free bytes of the kubelet's root filesystem (`/var/lib/kubelet`).
    NodeFsAvailable,
    /// `nodefs.inodesFree`: free inodes of the kubelet's root filesystem.
    NodeFsInodesFree,
    /// `imagefs.available`: free bytes of the runtime's image filesystem.
    ImageFsAvailable,
    /// `imagefs.inodesFree`: free inodes of the runtime's image filesystem.
    ImageFsInodesFree,
    /// `containerfs.available`: free bytes of the filesystem holding containers' writable layers
    /// (a split image filesystem).
    ContainerFsAvailable,
    /// `containerfs.inodesFree`: free inodes of the writable-layer filesystem.
    ContainerFsInodesFree,
    /// `pid.available`: process ids left under the node's `pid_max`.
    PidAvailable,
}

pub(super) const SIGNAL_NAMES: &[(EvictionSignal, &str)] = &[
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
    /// `MemoryPressure`, from `memory.available` and `allocatableMemory.available`.
    MemoryPressure,
    /// `DiskPressure`, from the nodefs, imagefs and containerfs signals.
    DiskPressure,
    /// `PIDPressure`, from `pid.available`.
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

    pub(super) fn is_memory(self) -> bool {
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
    /// The signal compared with the threshold.
    pub signal: EvictionSignal,
    /// The minimum: eviction starts when the observed value falls below it.
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
    /// Not a quantity (the input is kept).
    #[error("invalid quantity {0:?}")]
    Syntax(String),
    /// Does not fit an `i64` (the input is kept).
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
    /// Not of the form `SIGNAL<VALUE` (the statement is kept).
    #[error("threshold {0:?}: expected SIGNAL<VALUE")]
    Syntax(String),
    /// The signal is none of the kubelet's names (the statement is kept).
    #[error("threshold {0:?}: unknown eviction signal")]
    UnknownSignal(String),
    /// The value is neither a quantity nor a percentage in 0..=100% (the statement is kept).
    #[error("threshold {0:?}: invalid value")]
    Value(String),
    /// The value is below 0 (the statement is kept).
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
