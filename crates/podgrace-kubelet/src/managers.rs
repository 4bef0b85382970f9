//! The kubelet's node-level managers around the pod workers: the eviction manager
//! ([`podgrace_node::eviction`]) and the node shutdown manager
//! ([`podgrace_node::nodeshutdown`]), with what they give the rest of the kubelet: the node's
//! health for its conditions (MemoryPressure, Ready False while shutting down), the admission
//! of new pods (`Evicted` under pressure for BestEffort pods, `NodeShutdown` while shutting
//! down), and their Events on the Node (`EvictionThresholdMet`, `NodeShutdown`).
//!
//! Upstream: `pkg/kubelet/kubelet.go` (`NewMainKubelet`: the eviction manager and the shutdown
//! manager as admit handlers, in that order; `nodeRef`), `pkg/kubelet/eviction/
//! eviction_manager.go` (`Admit`), `pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go`
//! (`Admit`, `processShutdownEvent`, `ShutdownStatus`), `pkg/kubelet/lifecycle/
//! handlers.go` (`rejectPod`'s `Pod was rejected: ` prefix is the worker's).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use podgrace_core::rules::eviction::{admit, AdmitPod, NodePressureCondition, QosClass};
use podgrace_core::rules::nodeshutdown::ShutdownGracePeriodByPodPriority;
use podgrace_core::rules::qos;
use podgrace_node::eviction::{self, EvictionHandle, EvictionRecord, EvictionSettings, NodeEvent};
use podgrace_node::kubelet::active::ActivePods;
use podgrace_node::nodeshutdown::{self, ShutdownRecord};
use tokio::sync::{mpsc, watch};

use crate::node::NodeHealth;
use crate::recorder::{InvolvedPod, Recorder};
use crate::{Admission, Clock};

/// What the node-level managers run with.
#[derive(Debug, Clone)]
pub struct ManagersConfig {
    /// The node's name (its Events' object).
    pub node_name: String,
    /// Where the runtime puts the pod cgroups (`/podgrace/<PID>`; empty for containerd).
    pub cgroup_root: String,
    /// The eviction manager's settings; `None`: no eviction manager.
    pub eviction: Option<EvictionSettings>,
    /// The shutdown priority groups; `None`: graceful node shutdown is off (the kubelet's
    /// default: `shutdownGracePeriod` 0).
    pub shutdown: Option<Vec<ShutdownGracePeriodByPodPriority>>,
}

/// The running managers.
pub struct NodeManagers {
    active: ActivePods,
    eviction: Option<EvictionHandle>,
    health: watch::Receiver<NodeHealth>,
    shutting_down: Arc<AtomicBool>,
    shutdown_tx: watch::Sender<bool>,
    groups: Option<Vec<ShutdownGracePeriodByPodPriority>>,
    events: mpsc::UnboundedSender<NodeEvent>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for NodeManagers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// `%v` of the node conditions, as `nodeConditionMessageFmt` prints them (`[MemoryPressure]`).
fn conditions_list(c: &BTreeSet<NodePressureCondition>) -> String {
    let names: Vec<&str> = c
        .iter()
        .map(|c| match c {
            NodePressureCondition::MemoryPressure => "MemoryPressure",
            NodePressureCondition::DiskPressure => "DiskPressure",
            NodePressureCondition::PIDPressure => "PIDPressure",
        })
        .collect();
    format!("[{}]", names.join(" "))
}

impl NodeManagers {
    /// Starts the managers on the current tokio runtime; their Events go to the Node through
    /// `client`.
    pub fn start(client: kube::Client, clock: Clock, config: ManagersConfig) -> NodeManagers {
        let active = ActivePods::new();
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<NodeEvent>();
        let mut recorder = Recorder::new(
            client,
            InvolvedPod::node(&config.node_name),
            config.node_name.clone(),
            clock,
        );
        let mut tasks = vec![tokio::spawn(async move {
            while let Some(e) = ev_rx.recv().await {
                let ev = podgrace_node::events::Event {
                    at: std::time::Instant::now(),
                    kind: if e.warning {
                        podgrace_node::events::EventType::Warning
                    } else {
                        podgrace_node::events::EventType::Normal
                    },
                    reason: e.reason,
                    container: None,
                    message: e.message,
                };
                recorder.record(&ev).await;
            }
        })];
        let sink_tx = ev_tx.clone();
        let sink: eviction::NodeEventSink = Arc::new(move |e| {
            let _ = sink_tx.send(e);
        });
        let eviction = config
            .eviction
            .map(|s| eviction::start(s, active.clone(), &config.cgroup_root, sink));
        let (health_tx, health) = watch::channel(NodeHealth::default());
        let (shutdown_tx, mut shutdown_rx) = watch::channel(false);
        let mut pressure = eviction.as_ref().map(|e| e.conditions());
        tasks.push(tokio::spawn(async move {
            loop {
                let p: BTreeSet<NodePressureCondition> = pressure
                    .as_ref()
                    .map(|p| p.borrow().clone())
                    .unwrap_or_default();
                let h = NodeHealth {
                    memory_pressure: p.contains(&NodePressureCondition::MemoryPressure),
                    disk_pressure: p.contains(&NodePressureCondition::DiskPressure),
                    pid_pressure: p.contains(&NodePressureCondition::PIDPressure),
                    shutting_down: *shutdown_rx.borrow(),
                };
                health_tx.send_if_modified(|old| {
                    let changed = *old != h;
                    *old = h;
                    changed
                });
                tokio::select! {
                    r = async {
                        match pressure.as_mut() {
                            Some(p) => p.changed().await.is_ok(),
                            None => std::future::pending().await,
                        }
                    } => if !r { pressure = None },
                    r = shutdown_rx.changed() => if r.is_err() { return },
                }
            }
        }));
        NodeManagers {
            active,
            eviction,
            health,
            shutting_down: Arc::new(AtomicBool::new(false)),
            shutdown_tx,
            groups: config.shutdown,
            events: ev_tx,
            tasks,
        }
    }

    /// The node's active pods (to hand the kubelet: [`crate::KubeletConfig::active`]).
    pub fn active(&self) -> ActivePods {
        self.active.clone()
    }

    /// The node's health for its conditions ([`crate::KubeletConfig::health`]).
    pub fn health(&self) -> watch::Receiver<NodeHealth> {
        self.health.clone()
    }

    /// The evictions the eviction manager made.
    pub fn evictions(&self) -> Vec<EvictionRecord> {
        self.eviction
            .as_ref()
            .map(EvictionHandle::evictions)
            .unwrap_or_default()
    }

    /// The kubelet's admit handlers in their order: the eviction manager's (under
    /// MemoryPressure only a BestEffort pod is refused, under another pressure every pod;
    /// critical pods always pass), then the node shutdown manager's (every pod while the node
    /// shuts down). Tolerations of the memory-pressure taint are not read.
    pub fn admission(&self) -> Admission {
        let pressure = self.eviction.as_ref().map(|e| e.conditions());
        let shutting_down = self.shutting_down.clone();
        Admission(Arc::new(move |plan| {
            if let Some(p) = &pressure {
                let conds = p.borrow().clone();
                let qos = match plan.qos_class {
                    qos::QosClass::Guaranteed => QosClass::Guaranteed,
                    qos::QosClass::Burstable => QosClass::Burstable,
                    qos::QosClass::BestEffort => QosClass::BestEffort,
                };
                let pod = AdmitPod {
                    qos,
                    critical: plan.is_critical(),
                    tolerates_memory_pressure: false,
                };
                if !admit(&conds, pod) {
                    return Some((
                        "Evicted".into(),
                        format!("The node had condition: {}. ", conditions_list(&conds)),
                    ));
                }
            }
            if shutting_down.load(Ordering::SeqCst) {
                return Some((
                    nodeshutdown::NOT_ADMITTED_REASON.into(),
                    nodeshutdown::NOT_ADMITTED_MESSAGE.into(),
                ));
            }
            None
        }))
    }

    /// Whether graceful node shutdown is configured (`shutdownGracePeriod` > 0 or
    /// `shutdownGracePeriodByPodPriority`).
    pub fn shutdown_configured(&self) -> bool {
        self.groups.as_ref().is_some_and(|g| !g.is_empty())
    }

    /// Whether the node is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// `processShutdownEvent`: the `NodeShutdown` event on the Node, Ready False at once, then
    /// the pods killed group by group; returns what it did. Without groups it kills nothing.
    pub async fn shutdown(&self) -> Vec<ShutdownRecord> {
        let _ = self.events.send(NodeEvent {
            warning: false,
            reason: "NodeShutdown",
            message: nodeshutdown::SHUTDOWN_EVENT_MESSAGE.into(),
        });
        self.shutting_down.store(true, Ordering::SeqCst);
        let _ = self.shutdown_tx.send(true);
        let Some(groups) = &self.groups else {
            return Vec::new();
        };
        nodeshutdown::kill_pods(&self.active, groups).await
    }
}
