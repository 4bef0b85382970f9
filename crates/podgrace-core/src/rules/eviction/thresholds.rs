//! Eviction signals and thresholds: `--eviction-hard` / `--eviction-soft` parsing, the defaults,
//! the pressure transition period.
//!
//! Upstream: `pkg/kubelet/eviction/api/types.go`, `helpers.go` (`ParseThresholdConfig`,
//! `parseThresholdStatement`), `pkg/kubelet/apis/config/v1beta1/defaults_linux.go`.

use std::time::Duration;

use crate::rules::quantity::{Quantity, QuantityFormat};

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
    /// Bytes, inodes or PIDs, with the format it was written in (`100Mi` is written back as
    /// `100Mi`, `1e9` as `1e9`).
    Quantity {
        /// The amount (`Value()`: bytes, inodes or PIDs).
        value: i64,
        /// The format of the quantity as written.
        format: QuantityFormat,
    },
    /// A fraction of capacity in 0..=1 (`10%` is 0.1).
    Percentage(f64),
}

impl ThresholdValue {
    /// An absolute amount written without a suffix (decimal SI).
    pub fn amount(value: i64) -> ThresholdValue {
        ThresholdValue::Quantity {
            value,
            format: QuantityFormat::DecimalSI,
        }
    }

    /// An amount of bytes written in binary SI (`100Mi`).
    pub fn bytes(value: i64) -> ThresholdValue {
        ThresholdValue::Quantity {
            value,
            format: QuantityFormat::BinarySI,
        }
    }

    /// The value as an absolute quantity for a signal with `capacity` (`GetThresholdQuantity`:
    /// capacity × percentage, truncated); `None` for a percentage without capacity.
    pub fn quantity(&self, capacity: Option<i64>) -> Option<i64> {
        match *self {
            ThresholdValue::Quantity { value, .. } => Some(value),
            ThresholdValue::Percentage(p) => capacity.map(|c| (c as f64 * p) as i64),
        }
    }

    /// The quantity as the kubelet prints it in an eviction message (`%v` of
    /// `GetThresholdQuantity`'s result): the written quantity in its format (`100Mi`), or a
    /// percentage of capacity in binary SI.
    pub fn quantity_string(&self, capacity: Option<i64>) -> Option<String> {
        match *self {
            ThresholdValue::Quantity { value, format } => {
                Some(Quantity::from_units(value).canonical(format))
            }
            ThresholdValue::Percentage(_) => self.quantity(capacity).map(Quantity::binary_si),
        }
    }
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
    /// `evictionMinimumReclaim` of the signal: once met, the threshold counts as met until the
    /// signal is above the threshold plus this much (`thresholdsMet` with
    /// `enforceMinReclaim`).
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    /// `true` for a hard threshold (`isHardEvictionThreshold`: grace period 0).
    pub fn is_hard(&self) -> bool {
        self.grace_period.is_zero()
    }

    /// The threshold as an absolute quantity for a signal with `capacity`
    /// (`GetThresholdQuantity`: capacity × percentage, truncated).
    pub fn quantity(&self, capacity: Option<i64>) -> Option<i64> {
        self.value.quantity(capacity)
    }

    /// The quantity below which the threshold stays met once it was: the threshold plus its
    /// minimum reclaim (`thresholdsMet` with `enforceMinReclaim`), or the threshold alone.
    pub fn quantity_with_min_reclaim(&self, capacity: Option<i64>) -> Option<i64> {
        let q = self.quantity(capacity)?;
        match &self.min_reclaim {
            Some(m) => Some(q.saturating_add(m.quantity(capacity)?)),
            None => Some(q),
        }
    }

    /// The same threshold: signal, value and grace period (`hasThreshold`, which
    /// `mergeThresholds` dedups with; the minimum reclaim is not compared).
    pub fn same(&self, other: &Threshold) -> bool {
        self.signal == other.signal
            && self.grace_period == other.grace_period
            && match (self.value, other.value) {
                (
                    ThresholdValue::Quantity { value: a, .. },
                    ThresholdValue::Quantity { value: b, .. },
                ) => a == b,
                (ThresholdValue::Percentage(a), ThresholdValue::Percentage(b)) => a == b,
                _ => false,
            }
    }
}

/// Why an eviction threshold (`memory.available<100Mi`) was refused. Each message starts with
/// the statement; where upstream refuses it too, upstream's words follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseThresholdError {
    /// No `<` in the statement.
    #[error("threshold {0:?}: expected SIGNAL<VALUE")]
    Syntax(String),
    /// The signal is not one the kubelet knows.
    #[error("threshold {0:?}: unknown eviction signal")]
    UnknownSignal(String),
    /// The value is neither a percentage nor a quantity; `reason` is `resource.ParseQuantity`'s
    /// (or Go's `ParseFloat`'s) complaint.
    #[error("threshold {statement:?}: invalid value: {reason}")]
    Value {
        /// The statement as written.
        statement: String,
        /// What the parser said.
        reason: String,
    },
    /// A quantity that is zero or negative (`eviction threshold S must be positive`).
    #[error("threshold {statement:?}: eviction threshold {signal} must be positive: {value}")]
    NotPositive {
        /// The statement as written.
        statement: String,
        /// The signal's name.
        signal: &'static str,
        /// The value as written.
        value: String,
    },
    /// A percentage below 0 % or above 100 % (`eviction percentage threshold S must be >= 0%`,
    /// `... <= 100%`).
    #[error(
        "threshold {statement:?}: eviction percentage threshold {signal} must be {bound}: {value}"
    )]
    PercentageRange {
        /// The statement as written.
        statement: String,
        /// The signal's name.
        signal: &'static str,
        /// `>= 0%` or `<= 100%`.
        bound: &'static str,
        /// The value as written.
        value: String,
    },
}

/// Parses one threshold, `memory.available<100Mi` or `nodefs.available<10%`, with the given
/// grace period (zero for `evictionHard`, the `evictionSoftGracePeriod` entry for soft).
/// `Ok(None)` for `0%` and `100%`, which the kubelet ignores. A quantity is read as
/// `resource.ParseQuantity` reads it (decimal exponents such as `1e9` included) and taken as
/// its `Value()` (a fraction rounded up); a percentage as Go's `float32`, divided by 100.
///
/// Upstream: `pkg/kubelet/eviction/helpers.go` `parseThresholdStatement` / `parsePercentage`
/// (all versions modelled). Only the `<` operator exists.
///
/// # Errors
/// [`ParseThresholdError`] naming what is wrong: no `<`, an unknown signal, a value that does
/// not parse, a quantity that is not positive, a percentage outside 0–100 %.
pub fn parse_threshold(
    s: &str,
    grace_period: Duration,
) -> Result<Option<Threshold>, ParseThresholdError> {
    let (name, value) = s
        .trim()
        .split_once('<')
        .ok_or_else(|| ParseThresholdError::Syntax(s.into()))?;
    let signal = EvictionSignal::from_name(name.trim())
        .ok_or_else(|| ParseThresholdError::UnknownSignal(s.into()))?;
    let value = value.trim();
    let bad = |reason: String| ParseThresholdError::Value {
        statement: s.into(),
        reason,
    };
    let value = if let Some(p) = value.strip_suffix('%') {
        if value == "0%" || value == "100%" {
            return Ok(None);
        }
        let p: f32 = p.trim().parse().map_err(|e| bad(format!("{e}")))?;
        if !p.is_finite() {
            return Err(bad(format!("{value}: not a finite number")));
        }
        let range = |bound| ParseThresholdError::PercentageRange {
            statement: s.into(),
            signal: signal.name(),
            bound,
            value: value.into(),
        };
        // float32 arithmetic, as upstream's: `10%` is 0.1f32 (0.100000001490116...).
        let fraction = p / 100.0;
        if fraction < 0.0 {
            return Err(range(">= 0%"));
        }
        if fraction > 1.0 {
            return Err(range("<= 100%"));
        }
        ThresholdValue::Percentage(f64::from(fraction))
    } else {
        let (q, format) = Quantity::parse_with_format(value).map_err(|e| bad(e.to_string()))?;
        if q.is_negative() || q.is_zero() {
            return Err(ParseThresholdError::NotPositive {
                statement: s.into(),
                signal: signal.name(),
                value: value.into(),
            });
        }
        ThresholdValue::Quantity {
            value: q.value(),
            format,
        }
    };
    Ok(Some(Threshold {
        signal,
        value,
        grace_period,
        min_reclaim: None,
    }))
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
        value: ThresholdValue::bytes(v),
        grace_period: Duration::ZERO,
        min_reclaim: None,
    };
    let p = |signal, v| Threshold {
        signal,
        value: ThresholdValue::Percentage(v),
        grace_period: Duration::ZERO,
        min_reclaim: None,
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
