//! The eviction manager's `synchronize` (observations against thresholds, one eviction per
//! round) and `Admit`.
//!
//! Upstream: `pkg/kubelet/eviction/eviction_manager.go` (`synchronize`, `Admit`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::grace_period_override;
use super::ranking::{rank, rank_keys_for, sort_by_eviction_priority, PodEvictionStats, QosClass};
use super::thresholds::{
    pressure_transition_period, EvictionSignal, NodePressureCondition, Threshold,
};
use crate::KubeVersion;

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
    /// The amount left: bytes for memory and filesystems, inodes or process ids for the others.
    pub available: i64,
    /// The signal's capacity in the same unit; `None` when unknown (a percentage threshold then
    /// fails).
    pub capacity: Option<i64>,
}

/// The pod chosen in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// The evicted pod, named as in its [`PodEvictionStats::name`].
    pub pod: String,
    /// Override passed to `killPodNow`, seconds.
    pub grace_period_override: i64,
    /// The pressure signal whose threshold was met, which ranked the pods for this round.
    pub signal: EvictionSignal,
    /// A hard threshold was met (grace override 1 from 1.31, 0 before), not a soft one
    /// (`evictionMaxPodGracePeriod`).
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
    TimeWentBack {
        /// This round's time, on the caller's monotonic axis.
        now: Duration,
        /// The previous round's time, on the same axis.
        previous: Duration,
    },
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
    /// The pod's QoS class: with memory pressure only Guaranteed and Burstable pods are admitted
    /// (unless critical or tolerating the taint).
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
