//! The drill's replicas on the local kubelet: each a pod task of `podgrace-node` with its own
//! event recorder, its status watched and forwarded to the endpoint feed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use podgrace_core::plan::PodPlan;
use podgrace_node::events::{EventRecorder, EventType};
use podgrace_node::kubelet::{
    run_pod, PodHandle, PodOptions, PodReport, PodStatus, PodWorkerState,
};
use podgrace_node::runtime::RuntimeService;
use tokio::sync::mpsc;

use super::{DrillConfig, DrillError};
use crate::endpoints::LagModel;

/// How long a new pod may take to become ready: 30 s.
pub(super) const READY_WITHIN: Duration = Duration::from_secs(30);

/// One replica: its pod task, events and status.
pub(super) struct Replica {
    pub name: String,
    pub handle: PodHandle,
    pub events: EventRecorder,
    pub status: tokio::sync::watch::Receiver<PodStatus>,
}

/// The replicas of a drill, named `TEMPLATE-1`, `TEMPLATE-2` ... in the order they start.
pub(super) struct Replicas<R: RuntimeService + 'static> {
    runtime: Arc<R>,
    template: PodPlan,
    config: DrillConfig,
    images: bool,
    log: mpsc::UnboundedSender<String>,
    changes: mpsc::UnboundedSender<(String, PodStatus)>,
    all: Vec<Replica>,
    next_index: usize,
}

impl<R: RuntimeService + 'static> Replicas<R> {
    /// No replica yet; each one started sends its statuses to `changes`. `images`: the
    /// runtime pulls images (containerd), else the process runtime runs commands.
    pub fn new(
        runtime: Arc<R>,
        template: &PodPlan,
        config: &DrillConfig,
        images: bool,
        log: mpsc::UnboundedSender<String>,
        changes: mpsc::UnboundedSender<(String, PodStatus)>,
    ) -> Self {
        Replicas {
            runtime,
            template: template.clone(),
            config: config.clone(),
            images,
            log,
            changes,
            all: Vec::new(),
            next_index: 1,
        }
    }

    /// Starts the next replica and returns its index.
    pub fn start_pod(&mut self) -> usize {
        let mut plan = self.template.clone();
        plan.name = format!("{}-{}", self.template.name, self.next_index);
        self.next_index += 1;
        let opts = PodOptions {
            version: self.config.version,
            namespace: "default".into(),
            stop_signal_overrides: BTreeMap::new(),
            force_host: false,
            images: self.images,
            uid: None,
            node: None,
        };
        // One recorder per pod: each pod's run report holds its own events only.
        let events = EventRecorder::new();
        let handle = run_pod(self.runtime.clone(), plan.clone(), opts, events.clone());
        let status = handle.status();
        watch_status(plan.name.clone(), status.clone(), self.changes.clone());
        let _ = self.log.send(match self.config.lag {
            LagModel::PerPod(r) => format!(
                "{}: created (its endpoint lag {:.2} s)",
                plan.name,
                r.lag_of(&plan.name).as_secs_f64()
            ),
            _ => format!("{}: created", plan.name),
        });
        self.all.push(Replica {
            name: plan.name,
            handle,
            events,
            status,
        });
        self.all.len() - 1
    }

    /// How many replicas were started.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Replica `i` (by start order). Panics for an index not returned by [`Self::start_pod`].
    pub fn get(&self, i: usize) -> &Replica {
        &self.all[i]
    }

    /// Every replica, in start order.
    pub fn all(&self) -> &[Replica] {
        &self.all
    }

    /// The runtime and every replica, in start order.
    pub fn into_parts(self) -> (Arc<R>, Vec<Replica>) {
        (self.runtime, self.all)
    }
}

/// Waits for replica `r`'s pod task to end, with its run report.
pub(super) async fn wait_pod(r: Replica) -> Result<PodReport, DrillError> {
    r.handle.wait().await.map_err(|e| DrillError::Pod {
        pod: r.name.clone(),
        reason: e.to_string(),
    })
}

/// Forwards every status change of a pod to the endpoint feeder.
fn watch_status(
    name: String,
    mut status: tokio::sync::watch::Receiver<PodStatus>,
    tx: mpsc::UnboundedSender<(String, PodStatus)>,
) {
    tokio::spawn(async move {
        loop {
            let st = status.borrow_and_update().clone();
            if tx.send((name.clone(), st)).is_err() {
                return;
            }
            if status.changed().await.is_err() {
                return;
            }
        }
    });
}

/// Waits until replica `r` is ready and running; fails at once when a container could not
/// start, else after [`READY_WITHIN`] with the pod's last warning.
pub(super) async fn wait_ready(r: &Replica, port: u16) -> Result<(), DrillError> {
    let mut st = r.status.clone();
    let last_warning = || {
        r.events
            .events()
            .iter()
            .rev()
            .find(|e| e.kind == EventType::Warning)
            .map(|e| match &e.container {
                Some(c) => format!("{} (container {c}): {}", e.reason, e.message),
                None => format!("{}: {}", e.reason, e.message),
            })
    };
    // A container that could not be created or started (`Failed`: no such file, a bad working
    // directory) is known at once: no need to wait out the readiness window for it.
    let failed_start = async {
        loop {
            if let Some(e) = r.events.events().iter().find(|e| {
                e.kind == EventType::Warning && e.reason == podgrace_node::events::reason::FAILED
            }) {
                return match &e.container {
                    Some(c) => format!("container {c} could not start: {}", e.message),
                    None => format!("it could not start: {}", e.message),
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let ok = tokio::time::timeout(READY_WITHIN, async {
        tokio::select! {
            r = st.wait_for(|s| s.ready && s.phase == PodWorkerState::Running) => Ok(r.is_ok()),
            why = failed_start => Err(why),
        }
    })
    .await;
    match ok {
        Ok(Ok(true)) => Ok(()),
        Ok(Err(why)) => Err(DrillError::Pod {
            pod: r.name.clone(),
            reason: format!("{why} (`podgrace run FILE` shows more)"),
        }),
        Ok(Ok(false)) => Err(DrillError::Pod {
            pod: r.name.clone(),
            reason: "it stopped before it became ready (`podgrace run FILE` shows why)".into(),
        }),
        Err(_) => Err(DrillError::NotReady {
            pod: r.name.clone(),
            seconds: READY_WITHIN.as_secs(),
            port,
            last_warning: last_warning(),
        }),
    }
}
