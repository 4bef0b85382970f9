//! The local kubelet: one task per pod that starts its containers, restarts them as
//! `restartPolicy` says, and terminates the pod exactly as the kubelet's pod worker does.
//!
//! It calls the container runtime only through [`crate::runtime::RuntimeService`], as the
//! kubelet calls CRI, and takes every decision from the pure rules of `podgrace-core`
//! (API server delete, pod worker grace, `killContainer` arithmetic, sidecar ordering,
//! eviction override). One concept per module:
//! * [`spec`]: a container of the plan → the runtime's container config;
//! * [`cri`]: the rest of what the kubelet hands CRI (sandbox config, labels, annotations, log
//!   paths, DNS, the pull policy's default);
//! * [`ordering`]: the sidecar termination ordering with real waits;
//! * [`kill`]: `killContainer` with real timers;
//! * [`pod`]: the pod task, one module per concept: its start, a container's exit and restart,
//!   the probes and their kills, its termination, what it publishes and reports;
//! * [`object`]: the pod's API object as an API server would hold it (deletes, status, table
//!   row, watch events, the final delete);
//! * [`report`]: the run report (the `run` JSON contract) from the records and measured stops.

pub mod active;
pub mod cri;
pub mod kill;
pub mod object;
pub mod ordering;
pub mod pod;
pub mod report;
pub mod spec;
pub mod volumes;

pub use kill::{HookOutcome, HookRecord, KillRecord};
pub use object::{DeleteApi, ObjectEvent, WatchKind};
pub use pod::{
    check_pod, run_pod, ContainerWaiting, DeleteKubelet, DeleteRecord, KillPodNow, KillStatus,
    Killer, PodCommand, PodError, PodHandle, PodOptions, PodReport, PodStatus, PodWorkerState,
    Termination, TerminationReason,
};
pub use report::{build_report, RunReport};
