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
use crate::rules::quantity::Quantity;
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
    /// When the statistics behind it were collected, on the caller's axis; `None` counts as
    /// fresh at every round (upstream's zero time).
    pub time: Option<Duration>,
}

impl Observation {
    /// A fresh observation (no collection time).
    pub fn new(available: i64, capacity: Option<i64>) -> Observation {
        Observation {
            available,
            capacity,
            time: None,
        }
    }
}

/// The threshold a round reclaims against: the first of the thresholds whose grace period has
/// elapsed and whose statistics changed, memory first (`getReclaimableThreshold`).
#[derive(Debug, Clone, PartialEq)]
pub struct Reclaim {
    /// `thresholdToReclaim`.
    pub threshold: Threshold,
    /// `resourceToReclaim`: `memory`, `ephemeral-storage`, `inodes` or `pids`.
    pub resource: &'static str,
    /// `getThresholdMetInfo`: the threshold quantity and the observed amount as the kubelet
    /// prints them (`100Mi`, `92160Ki`), for the first threshold of the resource; `None`
    /// without an observation.
    pub threshold_met: Option<(String, String)>,
}

impl Reclaim {
    /// The message of the node's `EvictionThresholdMet` Warning event, recorded at every
    /// round that reclaims (`Attempting to reclaim memory`).
    pub fn event_message(&self) -> String {
        format!("Attempting to reclaim {}", self.resource)
    }

    /// The evicted pod's status message and event message (`evictionMessage`): `The node was
    /// low on resource: memory. Threshold quantity: 100Mi, available: 92160Ki. ` then, per
    /// container whose working set exceeds its memory request, `Container hog was using
    /// 215440Ki, request is 0, has larger consumption of memory. ` (each sentence ends with a
    /// space, as upstream's). Only the memory resource names containers (podgrace observes no
    /// ephemeral storage). The annotations of the `Evicted` event go with it
    /// (`offending_containers`, `offending_containers_usage`, `starved_resource`).
    ///
    /// Upstream: `pkg/kubelet/eviction/helpers.go` `evictionMessage`, `getThresholdMetInfo`
    /// (Kubernetes 1.20 to 1.36; pod-level resources not modelled).
    pub fn message(&self, pod: &PodEvictionStats) -> (String, BTreeMap<String, String>) {
        let mut message = format!("The node was low on resource: {}. ", self.resource);
        if let Some((q, a)) = &self.threshold_met {
            message.push_str(&format!("Threshold quantity: {q}, available: {a}. "));
        }
        let mut annotations = BTreeMap::new();
        if pod.memory_working_set_bytes.is_none() {
            // No statistics for the pod (`statsFunc` found none): the threshold part only.
            return (message, annotations);
        }
        let mut names = Vec::new();
        let mut usage = Vec::new();
        if self.resource == "memory" {
            for c in &pod.containers {
                let Some(ws) = c.memory_working_set_bytes else {
                    continue;
                };
                if ws > c.memory_request_bytes {
                    let u = Quantity::binary_si(ws);
                    message.push_str(&format!(
                        "Container {} was using {u}, request is {}, has larger consumption of {}. ",
                        c.name, c.memory_request, self.resource
                    ));
                    names.push(c.name.clone());
                    usage.push(u);
                }
            }
        }
        annotations.insert("offending_containers".into(), names.join(","));
        annotations.insert("offending_containers_usage".into(), usage.join(","));
        annotations.insert("starved_resource".into(), self.resource.to_string());
        (message, annotations)
    }
}

/// The resource a signal reclaims (`signalToResource`).
pub fn signal_resource(signal: EvictionSignal) -> &'static str {
    use EvictionSignal::*;
    match signal {
        MemoryAvailable | AllocatableMemoryAvailable => "memory",
        NodeFsAvailable | ImageFsAvailable | ContainerFsAvailable => "ephemeral-storage",
        NodeFsInodesFree | ImageFsInodesFree | ContainerFsInodesFree => "inodes",
        PidAvailable => "pids",
    }
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
    /// The status message, the `Evicted` event's message and the DisruptionTarget condition's
    /// ([`Reclaim::message`]).
    pub message: String,
    /// The `Evicted` event's annotations.
    pub annotations: BTreeMap<String, String>,
}

/// What one `synchronize` round decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncOutcome {
    /// Node conditions after the transition period is applied.
    pub node_conditions: BTreeSet<NodePressureCondition>,
    /// Thresholds met now, grace periods ignored (with those not yet resolved by their
    /// minimum reclaim).
    pub thresholds_met: Vec<Threshold>,
    /// The threshold to reclaim against, when a pod must be evicted this round.
    pub reclaim: Option<Reclaim>,
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

/// The eviction manager's memory between rounds, moved through [`EvictionManager::observe`]
/// (and [`EvictionManager::synchronize`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvictionManager {
    /// First time each threshold was observed met, still met since (`thresholdsFirstObservedAt`).
    first_observed: Vec<(Threshold, Duration)>,
    /// Last time each condition was observed.
    condition_last_observed: BTreeMap<NodePressureCondition, Duration>,
    node_conditions: BTreeSet<NodePressureCondition>,
    /// Thresholds met with their grace period elapsed, not yet resolved (`m.thresholdsMet`).
    thresholds_met: Vec<Threshold>,
    /// The observations of the last round (`m.lastObservations`).
    last_observations: BTreeMap<EvictionSignal, Observation>,
    last_round: Option<Duration>,
}

/// `thresholdsMet`: the thresholds whose quantity (plus its minimum reclaim with
/// `enforce_min_reclaim`) is above what is observed; a threshold without an observation is
/// skipped.
fn thresholds_met(
    thresholds: &[Threshold],
    observations: &BTreeMap<EvictionSignal, Observation>,
    enforce_min_reclaim: bool,
) -> Result<Vec<Threshold>, SynchronizeError> {
    let mut out = Vec::new();
    for t in thresholds {
        let Some(obs) = observations.get(&t.signal) else {
            continue;
        };
        let q = if enforce_min_reclaim {
            t.quantity_with_min_reclaim(obs.capacity)
        } else {
            t.quantity(obs.capacity)
        }
        .ok_or(SynchronizeError::MissingCapacity(t.signal.name()))?;
        if q > obs.available {
            out.push(*t);
        }
    }
    Ok(out)
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

    /// One round at time `now` up to the choice of a pod: thresholds met (grace ignored) →
    /// merged with those met before and not yet resolved by their minimum reclaim →
    /// first-observed times → node conditions kept for the pressure transition period →
    /// thresholds whose grace period has elapsed (remembered for the next round) → those whose
    /// statistics changed since the last round → `byEvictionPriority` → the threshold to
    /// reclaim ([`SyncOutcome::reclaim`]). The pod is chosen by [`choose`], with the pods'
    /// statistics read only then (the caller's I/O).
    ///
    /// Upstream: `pkg/kubelet/eviction/eviction_manager.go` `managerImpl.synchronize` up to
    /// `reclaimNodeLevelResources` (Kubernetes 1.20 to 1.36). Not modelled: node-level reclaim
    /// (image and container garbage collection, which frees disk, not memory), local-storage
    /// eviction, the kernel memcg notifier.
    ///
    /// # Errors
    /// [`SynchronizeError`] for a percentage threshold without capacity, or `now` earlier than
    /// the previous round.
    pub fn observe(
        &mut self,
        config: &EvictionConfig,
        now: Duration,
        observations: &BTreeMap<EvictionSignal, Observation>,
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
        let mut met = thresholds_met(&config.thresholds, observations, false)?;
        if !self.thresholds_met.is_empty() {
            for t in thresholds_met(&self.thresholds_met, observations, true)? {
                if !met.iter().any(|m| m.same(&t)) {
                    met.push(t);
                }
            }
        }
        self.first_observed = met
            .iter()
            .map(|t| {
                let at = self
                    .first_observed
                    .iter()
                    .find(|(f, _)| f.same(t))
                    .map_or(now, |(_, at)| *at);
                (*t, at)
            })
            .collect();
        for t in &met {
            self.condition_last_observed
                .insert(t.signal.node_condition(), now);
        }
        let period = pressure_transition_period(config.pressure_transition_period);
        self.node_conditions = self
            .condition_last_observed
            .iter()
            .filter(|(_, last)| now.saturating_sub(**last) < period)
            .map(|(c, _)| *c)
            .collect();
        let graced: Vec<Threshold> = self
            .first_observed
            .iter()
            .filter(|(t, since)| now.saturating_sub(*since) >= t.grace_period)
            .map(|(t, _)| *t)
            .collect();
        self.thresholds_met = graced.clone();
        // thresholdsUpdatedStats: only signals whose statistics changed since the last round.
        let mut active: Vec<Threshold> = graced
            .into_iter()
            .filter(|t| {
                let Some(obs) = observations.get(&t.signal) else {
                    return false;
                };
                match (obs.time, self.last_observations.get(&t.signal)) {
                    (None, _) | (_, None) => true,
                    (Some(at), Some(last)) => last.time.is_none_or(|l| at > l),
                }
            })
            .collect();
        self.last_observations = observations.clone();
        let mut outcome = SyncOutcome {
            node_conditions: self.node_conditions.clone(),
            thresholds_met: met,
            ..SyncOutcome::default()
        };
        sort_by_eviction_priority(&mut active);
        let Some(chosen) = active.first().copied() else {
            return Ok(outcome);
        };
        let resource = signal_resource(chosen.signal);
        let threshold_met = active
            .iter()
            .filter(|t| signal_resource(t.signal) == resource)
            .find_map(|t| {
                let obs = observations.get(&t.signal)?;
                Some((
                    t.value.quantity_string(obs.capacity)?,
                    Quantity::binary_si(obs.available),
                ))
            });
        outcome.reclaim = Some(Reclaim {
            threshold: chosen,
            resource,
            threshold_met,
        });
        Ok(outcome)
    }

    /// One whole round: [`EvictionManager::observe`], then [`choose`] among `pods`.
    ///
    /// Upstream: `pkg/kubelet/eviction/eviction_manager.go` `managerImpl.synchronize`
    /// (Kubernetes 1.20 to 1.36).
    ///
    /// # Errors
    /// As [`EvictionManager::observe`].
    pub fn synchronize(
        &mut self,
        config: &EvictionConfig,
        now: Duration,
        observations: &BTreeMap<EvictionSignal, Observation>,
        pods: &[PodEvictionStats],
        version: KubeVersion,
    ) -> Result<SyncOutcome, SynchronizeError> {
        let mut outcome = self.observe(config, now, observations)?;
        if let Some(r) = &outcome.reclaim {
            let (eviction, refused) = choose(r, config, pods, version);
            outcome.eviction = eviction;
            outcome.refused_critical = refused;
        }
        Ok(outcome)
    }
}

/// The pod a round evicts: `pods` ranked with the signal's rank function, the first that is
/// not critical (critical ones are refused, `cannot evict a critical pod`), with its grace
/// override ([`grace_period_override`]) and message ([`Reclaim::message`]). Also the critical
/// pods refused before it.
///
/// Upstream: `pkg/kubelet/eviction/eviction_manager.go` `synchronize` (the loop over the
/// ranked pods) and `evictPod` (Kubernetes 1.20 to 1.36).
pub fn choose(
    reclaim: &Reclaim,
    config: &EvictionConfig,
    pods: &[PodEvictionStats],
    version: KubeVersion,
) -> (Option<Eviction>, Vec<String>) {
    let mut ranked = pods.to_vec();
    rank(&mut ranked, rank_keys_for(reclaim.threshold.signal));
    let mut refused = Vec::new();
    for pod in ranked {
        if pod.is_critical() {
            refused.push(pod.name.clone());
            continue;
        }
        let hard = reclaim.threshold.is_hard();
        let (message, annotations) = reclaim.message(&pod);
        return (
            Some(Eviction {
                grace_period_override: grace_period_override(
                    hard,
                    config.eviction_max_pod_grace_period_seconds,
                    pod.termination_grace_period_seconds,
                    version,
                ),
                pod: pod.name,
                signal: reclaim.threshold.signal,
                hard,
                message,
                annotations,
            }),
            refused,
        );
    }
    (None, refused)
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
