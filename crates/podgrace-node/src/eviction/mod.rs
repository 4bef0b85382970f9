//! The kubelet's eviction manager on this node: every monitoring interval a round measures
//! `memory.available` (the node capacity less the working set of the cgroup holding every pod,
//! [`memory`]) and hands it to podgrace-core's state machine
//! ([`podgrace_core::rules::eviction::EvictionManager`]); when a pod must go, the active pods'
//! statistics are read, one pod is chosen ([`podgrace_core::rules::eviction::choose`]), the
//! `Evicted` event is recorded and the pod killed with the round's grace override
//! (`killPodNow`, waited for), then the manager waits for the pod to be cleaned up (checked
//! every second, at most 30 s) before the next round, as upstream's loop does.
//!
//! Only `memory.available` is observed: thresholds on the other signals (nodefs, imagefs,
//! pid) are accepted and, as upstream does for a signal without an observation, never met.
//!
//! Upstream: `pkg/kubelet/eviction/eviction_manager.go` (`managerImpl.Start`: the loop,
//! `synchronize`, `evictPod`, `waitForPodsCleanup` with `podCleanupTimeout` 30 s and
//! `podCleanupPollFreq` 1 s), `pkg/kubelet/pod_workers.go` (`killPodNow`), Kubernetes 1.20 to
//! 1.36.

pub mod memory;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use podgrace_core::rules::eviction::{
    choose, EvictionConfig, EvictionManager, EvictionSignal, NodePressureCondition, Observation,
    PodEvictionStats, SyncOutcome, SynchronizeError,
};
use podgrace_core::rules::podworker;
use podgrace_core::KubeVersion;
use tokio::sync::watch;

use crate::kubelet::active::{ActivePod, ActivePods};
use crate::kubelet::{KillPodNow, KillStatus, PodCommand, PodWorkerState};
use memory::{memory_mount, MemoryCgroup};

/// `podCleanupTimeout`: the longest wait for an evicted pod to be cleaned up.
pub const POD_CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);
/// `podCleanupPollFreq`: how often the cleanup is checked.
pub const POD_CLEANUP_POLL: Duration = Duration::from_secs(1);

/// How the eviction manager runs.
#[derive(Debug, Clone)]
pub struct EvictionSettings {
    /// The thresholds, `evictionMaxPodGracePeriod` and the pressure transition period.
    pub config: EvictionConfig,
    /// The node's memory capacity, bytes (`--node-memory`; cadvisor's `MemoryCapacity`).
    pub node_memory_bytes: i64,
    /// How often a round runs (the kubelet's `evictionMonitoringPeriod`, 10 s).
    pub monitoring_interval: Duration,
    /// The release whose kubelet is reproduced (the hard eviction's override).
    pub version: KubeVersion,
}

/// What a node-level event says, for the node's recorder (serve writes it as an Event on the
/// Node; `run` prints it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEvent {
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// `EvictionThresholdMet`, `NodeShutdown`, ...
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// A receiver of node events (called on the manager's task; it must not block).
pub type NodeEventSink = Arc<dyn Fn(NodeEvent) + Send + Sync>;

/// One eviction as the manager made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionRecord {
    /// `namespace/name` of the evicted pod.
    pub pod: String,
    /// Its UID.
    pub uid: String,
    /// When the round that chose it began.
    pub round_at: Instant,
    /// When `killPodNow` was handed to the pod worker.
    pub sent_at: Instant,
    /// The grace-period override, seconds.
    pub grace_period_override: i64,
    /// The status message (and the `Evicted` event's).
    pub message: String,
    /// A hard threshold was met.
    pub hard: bool,
    /// `memory.available` of the round, bytes.
    pub available_bytes: i64,
}

/// One round's result.
#[derive(Debug, Clone)]
pub struct Round {
    /// When it began.
    pub at: Instant,
    /// `memory.available`, bytes; `None` without a memory cgroup to measure.
    pub available_bytes: Option<i64>,
    /// What podgrace-core decided.
    pub outcome: SyncOutcome,
    /// The pod chosen, if any.
    pub pod: Option<ActivePod>,
}

/// The statistics readers of one pod: its cgroup and its containers' (by runtime id).
#[derive(Debug)]
struct PodReaders {
    pod: MemoryCgroup,
    containers: HashMap<String, MemoryCgroup>,
}

/// The manager's rounds, without the waiting: measure, decide, choose.
#[derive(Debug)]
pub struct Manager {
    settings: EvictionSettings,
    state: EvictionManager,
    node: Option<MemoryCgroup>,
    pods: ActivePods,
    readers: HashMap<String, PodReaders>,
    epoch: Instant,
}

impl Manager {
    /// A manager of the pods in `pods`, whose pod cgroups are under `cgroup_root`
    /// (`/podgrace/<PID>`; empty for containerd's `/kubepods`).
    pub fn new(settings: EvictionSettings, pods: ActivePods, cgroup_root: &str) -> Manager {
        let node = memory_mount().map(|m| MemoryCgroup::new(m, &format!("{cgroup_root}/kubepods")));
        Manager {
            settings,
            state: EvictionManager::new(),
            node,
            pods,
            readers: HashMap::new(),
            epoch: Instant::now(),
        }
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &EvictionSettings {
        &self.settings
    }

    /// `memory.available` now: the node's capacity less the pods' working set (0 when no pod
    /// cgroup exists yet), bytes; `None` without a memory hierarchy.
    pub fn memory_available(&mut self) -> Option<i64> {
        let node = self.node.as_mut()?;
        let ws = node.working_set().unwrap_or(0);
        Some(
            self.settings
                .node_memory_bytes
                .saturating_sub(i64::try_from(ws).unwrap_or(i64::MAX)),
        )
    }

    /// One round (`synchronize` up to `evictPod`): the observation, podgrace-core's decision,
    /// and, when a pod must go, the active pods' statistics and the pod chosen.
    ///
    /// # Errors
    /// [`SynchronizeError`] from the state machine (a percentage threshold without capacity
    /// cannot happen here: memory has one).
    pub fn round(&mut self) -> Result<Round, SynchronizeError> {
        let at = Instant::now();
        let available = self.memory_available();
        let mut observations = BTreeMap::new();
        if let Some(a) = available {
            observations.insert(
                EvictionSignal::MemoryAvailable,
                Observation::new(a, Some(self.settings.node_memory_bytes)),
            );
        }
        let now = at.saturating_duration_since(self.epoch);
        let mut outcome = self
            .state
            .observe(&self.settings.config, now, &observations)?;
        let mut chosen = None;
        if let Some(reclaim) = outcome.reclaim.clone() {
            let active = self.pods.list();
            let stats: Vec<PodEvictionStats> = active.iter().map(|p| self.stats(p)).collect();
            self.readers
                .retain(|uid, _| active.iter().any(|p| p.identity.uid == *uid));
            let (eviction, refused) = choose(
                &reclaim,
                &self.settings.config,
                &stats,
                self.settings.version,
            );
            chosen = eviction
                .as_ref()
                .and_then(|e| active.iter().find(|p| p.identity.uid == e.pod).cloned());
            outcome.eviction = eviction;
            outcome.refused_critical = refused;
        }
        Ok(Round {
            at,
            available_bytes: available,
            outcome,
            pod: chosen,
        })
    }

    /// What the eviction manager knows of one pod: its spec and its cgroups' working sets
    /// (named by its UID, which the eviction reports back).
    fn stats(&mut self, pod: &ActivePod) -> PodEvictionStats {
        let mut s = PodEvictionStats::from_plan(pod.identity.uid.clone(), &pod.plan);
        let Some(mount) = memory_mount() else {
            return s;
        };
        let r = self
            .readers
            .entry(pod.identity.uid.clone())
            .or_insert_with(|| PodReaders {
                pod: MemoryCgroup::new(mount, &pod.cgroup),
                containers: HashMap::new(),
            });
        s.memory_working_set_bytes = r
            .pod
            .working_set()
            .map(|w| i64::try_from(w).unwrap_or(i64::MAX));
        let ids = pod.status().borrow().container_ids.clone();
        r.containers
            .retain(|id, _| ids.iter().any(|(_, i)| i == id));
        for (name, id) in ids {
            let reader = r
                .containers
                .entry(id.clone())
                .or_insert_with(|| MemoryCgroup::new(mount, &format!("{}/{id}", pod.cgroup)));
            let ws = reader.working_set();
            if let Some(c) = s.containers.iter_mut().find(|c| c.name == name) {
                c.memory_working_set_bytes = ws.map(|w| i64::try_from(w).unwrap_or(i64::MAX));
            }
        }
        s
    }
}

/// The running eviction manager.
pub struct EvictionHandle {
    conditions: watch::Receiver<BTreeSet<NodePressureCondition>>,
    evictions: Arc<Mutex<Vec<EvictionRecord>>>,
    task: tokio::task::JoinHandle<()>,
}

impl EvictionHandle {
    /// The node's pressure conditions after each round (`IsUnderMemoryPressure`).
    pub fn conditions(&self) -> watch::Receiver<BTreeSet<NodePressureCondition>> {
        self.conditions.clone()
    }

    /// The evictions so far, in order.
    pub fn evictions(&self) -> Vec<EvictionRecord> {
        self.evictions.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Stops the manager (a kill in flight goes on in its pod's task).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for EvictionHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the eviction manager on the current tokio runtime (`managerImpl.Start`).
pub fn start(
    settings: EvictionSettings,
    pods: ActivePods,
    cgroup_root: &str,
    node_events: NodeEventSink,
) -> EvictionHandle {
    let (tx, rx) = watch::channel(BTreeSet::new());
    let evictions = Arc::new(Mutex::new(Vec::new()));
    let record = evictions.clone();
    let manager = Manager::new(settings, pods, cgroup_root);
    let task = tokio::spawn(run(manager, tx, record, node_events));
    EvictionHandle {
        conditions: rx,
        evictions,
        task,
    }
}

async fn run(
    mut m: Manager,
    conditions: watch::Sender<BTreeSet<NodePressureCondition>>,
    record: Arc<Mutex<Vec<EvictionRecord>>>,
    events: NodeEventSink,
) {
    if m.node.is_none() {
        tracing::warn!("eviction manager: no memory cgroup hierarchy; memory.available cannot be measured and no pod is evicted");
    }
    loop {
        let round = match m.round() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "eviction manager: failed to synchronize");
                tokio::time::sleep(m.settings.monitoring_interval).await;
                continue;
            }
        };
        conditions.send_if_modified(|c| {
            let changed = *c != round.outcome.node_conditions;
            c.clone_from(&round.outcome.node_conditions);
            changed
        });
        if let Some(r) = &round.outcome.reclaim {
            events(NodeEvent {
                warning: true,
                reason: "EvictionThresholdMet",
                message: r.event_message(),
            });
        }
        match (&round.outcome.eviction, &round.pod) {
            (Some(e), Some(pod)) => {
                let status = pod.status();
                let sent = pod.send(PodCommand::KillPodNow(KillPodNow {
                    grace_period_override: e.grace_period_override,
                    evict: true,
                    status: KillStatus {
                        reason: podgrace_core::rules::eviction::EVICTED_REASON.into(),
                        message: e.message.clone(),
                    },
                    event: Some((
                        podgrace_core::rules::eviction::EVICTED_REASON,
                        e.message.clone(),
                    )),
                }));
                let sent_at = Instant::now();
                tracing::info!(pod = %pod.display(), grace = e.grace_period_override, "eviction manager: evicting pod");
                if let Ok(mut r) = record.lock() {
                    r.push(EvictionRecord {
                        pod: pod.display(),
                        uid: pod.identity.uid.clone(),
                        round_at: round.at,
                        sent_at,
                        grace_period_override: e.grace_period_override,
                        message: e.message.clone(),
                        hard: e.hard,
                        available_bytes: round.available_bytes.unwrap_or_default(),
                    });
                }
                if sent {
                    kill_pod_now_wait(status, e.grace_period_override, pod).await;
                    wait_for_cleanup(&m.pods, &pod.identity.uid).await;
                    continue;
                }
            }
            (Some(_), None) | (None, _) => {
                if round.outcome.reclaim.is_some() && round.outcome.eviction.is_none() {
                    tracing::info!("eviction manager: unable to evict any pods from the node");
                }
            }
        }
        tokio::time::sleep(m.settings.monitoring_interval).await;
    }
}

/// `killPodNow`'s wait: until the pod worker has killed the pod, at most `override +
/// override/2` (at least 10 s) seconds.
async fn kill_pod_now_wait(
    mut status: watch::Receiver<crate::kubelet::PodStatus>,
    override_seconds: i64,
    pod: &ActivePod,
) {
    let wait = podworker::kill_pod_now_wait_seconds(
        Some(override_seconds),
        Some(pod.plan.termination_grace_period_seconds),
    );
    let limit = Duration::from_secs(u64::try_from(wait).unwrap_or(10));
    let _ = tokio::time::timeout(
        limit,
        status.wait_for(|s| s.phase == PodWorkerState::Terminated),
    )
    .await;
}

/// `waitForPodsCleanup`: every second, until the pod has left the active pods, at most 30 s.
async fn wait_for_cleanup(pods: &ActivePods, uid: &str) {
    let deadline = tokio::time::Instant::now() + POD_CLEANUP_TIMEOUT;
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + POD_CLEANUP_POLL,
        POD_CLEANUP_POLL,
    );
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if !pods.contains(uid) {
                    return;
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                tracing::info!("eviction manager: timed out waiting for pods to be cleaned up");
                return;
            }
        }
    }
}
