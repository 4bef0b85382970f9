//! Startup, liveness and readiness probes, as `pkg/kubelet/prober/` runs them.
//!
//! * [`probe_once`]: one attempt of a probe action (`prober.go` `*ProberAction.Run` and
//!   `pkg/probe/{exec,http,tcp,grpc}`, Kubernetes 1.24 to 1.37).
//! * [`spawn_probe_worker`]: the periodic worker of one probe of one container (`worker.go`
//!   `worker.run` / `doProbe`), publishing its result through a `tokio::sync::watch` and
//!   recording `Unhealthy` / `ProbeWarning` events with the kubelet's wording.
//!
//! # Worker semantics (`worker.go`)
//! * A tick every `periodSeconds`, the first at once. Probes are skipped while the container
//!   has run for fewer than `initialDelaySeconds` whole seconds, so the first attempt comes at
//!   the first tick at or after the delay (ticks keep their phase; a slow attempt skips ticks).
//! * Initial value on each new container: readiness `Failure` (not ready), liveness `Success`,
//!   startup `Unknown`. A container that is not running sets `Failure`.
//! * Liveness and readiness are not run until the container has started: the startup probe
//!   (if any) has succeeded for this container. The startup probe stops once it succeeded.
//! * One attempt is retried up to 3 times while the prober *errors* (`Unknown`, e.g. the exec
//!   could not start); an attempt that errored 3 times is thrown away (not counted), with an
//!   `Unhealthy` "errored" event. Every failed attempt records `Unhealthy`; a success with a
//!   warning (redirect to another host) records `ProbeWarning` and counts as success.
//! * The result changes only after `successThreshold` / `failureThreshold` consecutive results.
//!   When liveness reaches its failure threshold, or startup reaches either threshold, the
//!   worker holds (probes nothing) until a new container id is set: one kill signal per
//!   container ([`ProbeStatus::threshold_failures`] increments once).
//!
//! # Termination (spec §2.3)
//! `SyncTerminatingPod` stops liveness and startup only; readiness keeps running and drives the
//! EndpointSlice `serving` condition. Call [`ProbeHandle::stop`] on liveness and startup
//! handles when termination starts; stop the readiness handle once the containers have stopped
//! (`probeManager.RemovePod` at the end of `SyncTerminatingPod`), before the sandbox goes.
//!
//! # Left out
//! The random initial sleep of up to one period after a kubelet restart; manual triggers
//! (`manualTriggerCh`); metrics; the stop on `restartPolicy: Never` after the container
//! terminated (the caller stops the handle); the status manager (the caller tells the worker
//! about the container through [`ProbeHandle::set_container`]). A stop also cancels an attempt
//! in flight (upstream waits for it) so no exec process outlives the worker.

mod grpc;

pub use podgrace_core::rules::prober::{ProbeKind, ProbeState};

mod prober;
mod worker;

pub use prober::{probe_once, ProbeResult, ProbeTarget, Prober, RuntimeProber, USER_AGENT_VERSION};
pub use worker::{spawn_probe_worker, ContainerRun, ProbeHandle, ProbeStatus};
