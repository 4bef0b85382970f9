//! The pod's API object as an API server would hold it while the local kubelet terminates the
//! pod: the deletion timestamp and grace at the clock's precision, the status the kubelet
//! writes, the table row `kubectl get pods` would print, and the watch events a
//! `kubectl get -w --output-watch-events` would see. `run` has no API server (that is
//! `serve`); this keeps what one would have recorded, with the same rules.
//!
//! Every decision comes from `podgrace-core`: [`apiserver::store_delete_ms`] for deletes (and
//! the kubelet's final delete, [`apiserver::kubelet_final_delete`]), [`podstatus::get_phase`]
//! and [`podstatus::can_be_deleted`] for the status and the end, [`printers::print_pod`] for
//! the row, containerd's exit reasons ([`runtime::containerd_exit_reason`]).
//!
//! Recorded on a real 1.32 cluster (`shared/cases/real-cluster-1.32.md`, case a): `MODIFIED`
//! (deletionTimestamp set, still Running and Ready), `MODIFIED` (phase Failed, container
//! terminated reason Error exit 137), `MODIFIED` (DGPS 0, deletionTimestamp moved back by the
//! old grace: the kubelet's final delete), `DELETED`.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use podgrace_core::plan::{ContainerRole, PodPlan};
use podgrace_core::rules::apiserver::{
    self, DeletionState, KubectlDeleteRequest, PodForDelete, PodPhase as ApiPhase, StoredPod,
};
use podgrace_core::rules::podstatus::{self, ContainerStatus, PhaseSpec};
use podgrace_core::rules::printers::{self, PodForPrint, PodRow};
use podgrace_core::KubeVersion;

/// A watch event's type (`kubectl get -w --output-watch-events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchKind {
    /// `MODIFIED`: the object changed.
    Modified,
    /// `DELETED`: the object was removed.
    Deleted,
}

impl WatchKind {
    /// `MODIFIED` or `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchKind::Modified => "MODIFIED",
            WatchKind::Deleted => "DELETED",
        }
    }
}

/// One watch event of the pod object, with the object as it was then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEvent {
    /// When it happened (monotonic).
    pub at: Instant,
    /// `MODIFIED` or `DELETED`.
    pub kind: WatchKind,
    /// `metadata.deletionTimestamp`, whole seconds since the Unix epoch.
    pub deletion_timestamp: Option<i64>,
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// `status.phase`.
    pub phase: ApiPhase,
    /// `status.reason` (`Evicted` after an eviction, `Terminated` after a node shutdown),
    /// empty otherwise.
    pub reason: String,
    /// `status.message` (the eviction's or the node shutdown's), empty otherwise.
    pub message: String,
    /// The pod's `Ready` condition.
    pub ready: bool,
    /// What `kubectl get pods` prints for it.
    pub row: PodRow,
}

/// What the API server did with one delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteApi {
    /// The object was already gone: `Error from server (NotFound): pods "X" not found`.
    NotFound,
    /// Not shorter than the grace already set: nothing changed (a pending graceful delete).
    Unchanged,
    /// A graceful delete: the object stays with this DGPS and deletion timestamp (Unix s).
    Graceful {
        /// `metadata.deletionGracePeriodSeconds` now set, in seconds.
        deletion_grace_period_seconds: i64,
        /// `metadata.deletionTimestamp` now set, whole seconds since the Unix epoch.
        deletion_timestamp: i64,
    },
    /// Grace 0: the object was removed (after a `MODIFIED` with this deletion timestamp).
    Deleted {
        /// `metadata.deletionTimestamp`, whole seconds since the Unix epoch.
        deletion_timestamp: i64,
    },
}

/// The kubelet's status of the pod as last written: phase, reason, Ready and container states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletStatus {
    /// `status.phase`.
    pub phase: ApiPhase,
    /// `status.reason` (`Evicted`, `Terminated`), empty otherwise.
    pub reason: String,
    /// `status.message`, empty otherwise.
    pub message: String,
    /// The pod's `Ready` condition.
    pub ready: bool,
    /// Init containers' statuses (native sidecars and regular init containers), then the
    /// regular containers', each by name.
    pub init_containers: Vec<ContainerStatus>,
    /// The regular containers' statuses (`status.containerStatuses`).
    pub containers: Vec<ContainerStatus>,
}

/// The pod object. Times are the local monotonic clock mapped onto the wall clock at creation.
#[derive(Debug, Clone)]
pub struct ApiObject {
    name: String,
    version: KubeVersion,
    origin: (Instant, SystemTime),
    stored: StoredPod,
    removed: bool,
    status: KubeletStatus,
    spec: PhaseSpec,
    containers: usize,
    events: Vec<ObjectEvent>,
}

impl ApiObject {
    /// The object of `plan`, created now, scheduled on `node`, phase Running.
    pub fn new(plan: &PodPlan, node: &str, version: KubeVersion) -> Self {
        let init: Vec<(String, bool)> = plan
            .init_containers
            .iter()
            .map(|c| (c.name.clone(), c.role == ContainerRole::Sidecar))
            .collect();
        ApiObject {
            name: plan.name.clone(),
            version,
            origin: (Instant::now(), SystemTime::now()),
            stored: StoredPod {
                pod: PodForDelete {
                    node_name: node.to_string(),
                    phase: ApiPhase::Running,
                    termination_grace_period_seconds: Some(plan.termination_grace_period_seconds),
                },
                ..Default::default()
            },
            removed: false,
            status: KubeletStatus {
                phase: ApiPhase::Running,
                reason: String::new(),
                message: String::new(),
                ready: false,
                init_containers: Vec::new(),
                containers: Vec::new(),
            },
            spec: PhaseSpec {
                restart_policy: plan.restart_policy,
                init_containers: init,
                containers: plan.containers.iter().map(|c| c.name.clone()).collect(),
                static_pod: false,
            },
            containers: plan.containers.len(),
            events: Vec::new(),
        }
    }

    /// `at` on the wall clock, milliseconds since the Unix epoch.
    pub fn unix_ms(&self, at: Instant) -> i64 {
        let (mono, wall) = self.origin;
        let t = if at >= mono {
            wall + at.duration_since(mono)
        } else {
            wall - mono.duration_since(at)
        };
        let ms = t
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        i64::try_from(ms).unwrap_or(i64::MAX)
    }

    /// The deletion state stored now.
    pub fn deletion(&self) -> DeletionState {
        self.stored.deletion
    }

    /// The object still exists (it was not deleted).
    pub fn exists(&self) -> bool {
        !self.removed
    }

    /// Every watch event so far, in order.
    pub fn events(&self) -> &[ObjectEvent] {
        &self.events
    }

    /// The kubelet's status as last written.
    pub fn status(&self) -> &KubeletStatus {
        &self.status
    }

    fn push(&mut self, at: Instant, kind: WatchKind) {
        let pod = PodForPrint {
            name: self.name.clone(),
            containers: self.containers,
            init_containers: self.spec.init_containers.clone(),
            phase: self.status.phase.as_str().to_string(),
            reason: self.status.reason.clone(),
            deletion_timestamp: self.stored.deletion.deletion_timestamp.is_some(),
            scheduling_gated: false,
            initialized: true,
            ready_condition: self.status.ready,
            init_container_statuses: self.status.init_containers.clone(),
            container_statuses: self.status.containers.clone(),
            created_ms: Some(self.unix_ms(self.origin.0)),
        };
        let row = printers::print_pod(&pod, self.unix_ms(at), self.version);
        self.events.push(ObjectEvent {
            at,
            kind,
            deletion_timestamp: self.stored.deletion.deletion_timestamp,
            deletion_grace_period_seconds: self.stored.deletion.deletion_grace_period_seconds,
            phase: self.status.phase,
            reason: self.status.reason.clone(),
            message: self.status.message.clone(),
            ready: self.status.ready,
            row,
        });
    }

    /// The kubelet's running status, kept without a watch event (podgrace records the events
    /// of the termination only): Ready and the containers' states.
    pub fn observe(
        &mut self,
        ready: bool,
        init: Vec<ContainerStatus>,
        containers: Vec<ContainerStatus>,
    ) {
        self.status.ready = ready;
        self.status.init_containers = init;
        self.status.containers = containers;
    }

    /// A `kubectl delete` with DeleteOptions `request` at `at`, through `Store.Delete`.
    pub fn delete(&mut self, request: &KubectlDeleteRequest, at: Instant) -> DeleteApi {
        if self.removed {
            return DeleteApi::NotFound;
        }
        let out = apiserver::store_delete_ms(
            &self.stored,
            true,
            request.grace_period_seconds,
            self.unix_ms(at),
            apiserver::clamps_deletion_timestamp(self.version),
        );
        if out.decision.graceful_pending {
            return DeleteApi::Unchanged;
        }
        if let Some(written) = &out.written {
            self.stored = written.clone();
            self.push(at, WatchKind::Modified);
        }
        let dt = self.stored.deletion.deletion_timestamp.unwrap_or_default();
        if out.was_deleted {
            self.removed = true;
            self.push(at, WatchKind::Deleted);
            return DeleteApi::Deleted {
                deletion_timestamp: dt,
            };
        }
        DeleteApi::Graceful {
            deletion_grace_period_seconds: self
                .stored
                .deletion
                .deletion_grace_period_seconds
                .unwrap_or_default(),
            deletion_timestamp: dt,
        }
    }

    /// The kubelet's status once every container has stopped (`SyncTerminatingPod`'s last
    /// `generateAPIPodStatus` with `podIsTerminal`): the phase from [`podstatus::get_phase`],
    /// or what the status function of a kubelet-initiated kill leaves of it (`killed`: the
    /// eviction's `Failed`/`Evicted` with its message, the node shutdown's
    /// `Failed`/`Terminated`; from 1.27 `Succeeded` without them when every container exited
    /// 0, [`podstatus::status_after_kill`]), Ready false. A `MODIFIED` if the object still exists. No
    /// terminal phase reaches the API earlier: the status manager holds it back while
    /// containers could still run (`pkg/kubelet/status/status_manager.go` `mergePodStatus`),
    /// so an evicted pod shows `Failed` only once its containers are gone.
    pub fn terminated(
        &mut self,
        at: Instant,
        killed: Option<&crate::kubelet::pod::KillStatus>,
        init: Vec<ContainerStatus>,
        containers: Vec<ContainerStatus>,
    ) {
        let mut all = init.clone();
        all.extend(containers.iter().cloned());
        let computed = podstatus::get_phase(&self.spec, &all, true, true, self.version);
        let (phase, reason, message) = match killed {
            Some(k) => k.after_kill(computed, self.version),
            None => (computed, String::new(), String::new()),
        };
        self.status = KubeletStatus {
            phase,
            reason,
            message,
            ready: false,
            init_containers: init,
            containers,
        };
        self.stored.pod.phase = phase;
        if !self.removed {
            self.push(at, WatchKind::Modified);
        }
    }

    /// The status manager's final delete once `SyncTerminatedPod` has finished, if
    /// [`podstatus::can_be_deleted`] allows it: `MODIFIED` (DGPS 0, the deletion timestamp moved
    /// back by the old grace) then `DELETED`. Returns whether it deleted.
    ///
    /// The caller gives the time: the recorded 1.32 kubelet deleted 0.49–0.77 s after
    /// reporting the terminal phase (`SyncTerminatedPod` waiting for the generic PLEG's next
    /// 1 s relist and for the volumes), which [`podstatus::final_delete_at_ms`] models.
    pub fn final_delete(&mut self, at: Instant) -> bool {
        if self.removed
            || !podstatus::can_be_deleted(
                self.stored.deletion.deletion_timestamp.is_some(),
                false,
                self.stored.pod.phase,
                true,
                self.version,
            )
        {
            return false;
        }
        let out = apiserver::kubelet_final_delete(&self.stored, self.unix_ms(at), self.version);
        if let Some(written) = out.written {
            self.stored = written;
            self.push(at, WatchKind::Modified);
        }
        if out.was_deleted {
            self.removed = true;
            self.push(at, WatchKind::Deleted);
        }
        out.was_deleted
    }
}
