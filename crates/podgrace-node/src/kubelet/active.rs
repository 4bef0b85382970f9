//! The node's active pods, as the kubelet's node-level managers see them: every pod whose
//! task runs (started, running or terminating), with what they need of it: its spec, its
//! pod cgroup, a way to ask for a kill (`killPodNow`) and its status. A pod task registers
//! itself when [`crate::kubelet::PodOptions::node`] is set and leaves when it ends (its
//! containers stopped, its sandbox gone): what `podCleanedUpFunc` waits for.
//!
//! Upstream: `pkg/kubelet/kubelet_pods.go` (`GetActivePods`, `filterOutInactivePods`: a
//! terminating pod is still active), `pkg/kubelet/kubelet.go` (`podResourcesAreReclaimed`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use podgrace_core::plan::PodPlan;
use tokio::sync::{mpsc, watch};

use super::cri::PodIdentity;
use super::pod::{PodCommand, PodStatus};

/// One active pod.
#[derive(Debug, Clone)]
pub struct ActivePod {
    /// Name, namespace and UID.
    pub identity: PodIdentity,
    /// Its spec.
    pub plan: Arc<PodPlan>,
    /// Its pod cgroup below each hierarchy's root (`/podgrace/4242/kubepods/besteffort/pod<UID>`).
    pub cgroup: String,
    /// When it was registered.
    pub since: Instant,
    commands: mpsc::UnboundedSender<PodCommand>,
    status: watch::Receiver<PodStatus>,
}

impl ActivePod {
    /// A pod as its task registers it.
    pub fn new(
        identity: PodIdentity,
        plan: Arc<PodPlan>,
        cgroup: String,
        commands: mpsc::UnboundedSender<PodCommand>,
        status: watch::Receiver<PodStatus>,
    ) -> ActivePod {
        ActivePod {
            identity,
            plan,
            cgroup,
            since: Instant::now(),
            commands,
            status,
        }
    }

    /// Sends a command to its task; `false` if it has ended.
    pub fn send(&self, command: PodCommand) -> bool {
        self.commands.send(command).is_ok()
    }

    /// Its status as its task publishes it.
    pub fn status(&self) -> watch::Receiver<PodStatus> {
        self.status.clone()
    }

    /// `namespace/name`.
    pub fn display(&self) -> String {
        format!("{}/{}", self.identity.namespace, self.identity.name)
    }
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    pods: BTreeMap<u64, ActivePod>,
}

/// The node's active pods, shared by the pod tasks (which register) and the managers (which
/// read). Cheap to clone.
#[derive(Debug, Clone)]
pub struct ActivePods {
    state: Arc<Mutex<State>>,
    /// Bumped at every change.
    changed: Arc<watch::Sender<u64>>,
}

impl Default for ActivePods {
    fn default() -> Self {
        ActivePods {
            state: Arc::default(),
            changed: Arc::new(watch::channel(0).0),
        }
    }
}

/// A pod's place in [`ActivePods`]; dropping it removes the pod.
#[derive(Debug)]
pub struct Registration {
    pods: ActivePods,
    key: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut s) = self.pods.state.lock() {
            s.pods.remove(&self.key);
        }
        self.pods.changed.send_modify(|n| *n += 1);
    }
}

impl ActivePods {
    /// No pod yet.
    pub fn new() -> ActivePods {
        ActivePods::default()
    }

    /// Adds a pod until the returned registration is dropped.
    pub fn register(&self, pod: ActivePod) -> Registration {
        let key = match self.state.lock() {
            Ok(mut s) => {
                s.next += 1;
                let key = s.next;
                s.pods.insert(key, pod);
                key
            }
            Err(_) => 0,
        };
        self.changed.send_modify(|n| *n += 1);
        Registration {
            pods: self.clone(),
            key,
        }
    }

    /// The active pods, in the order they were registered.
    pub fn list(&self) -> Vec<ActivePod> {
        self.state
            .lock()
            .map(|s| s.pods.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many pods are active.
    pub fn len(&self) -> usize {
        self.state.lock().map(|s| s.pods.len()).unwrap_or(0)
    }

    /// No pod is active.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the pod with this UID is still active.
    pub fn contains(&self, uid: &str) -> bool {
        self.state
            .lock()
            .map(|s| s.pods.values().any(|p| p.identity.uid == uid))
            .unwrap_or(false)
    }

    /// A receiver that sees every addition and removal from now on (`changed().await`).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}
