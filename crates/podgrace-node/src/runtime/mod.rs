//! The CRI-RuntimeService-shaped trait the kubelet side calls, and its two runtimes.
//!
//! The kubelet-side parts of podgrace (pod worker, hooks, probes) call only [`RuntimeService`],
//! as the kubelet calls CRI. Every method takes a [`CallContext`] (Go's `ctx`: deadline and
//! cancellation). The runtimes:
//! * [`ProcessRuntime`] (`process.rs`): containers are local processes in namespaces of their
//!   own; the embedded default, with no dependency;
//! * [`ContainerdRuntime`] (`containerd.rs`): a real containerd over CRI v1 (gRPC on its
//!   socket), images and CNI networking included.

use std::future::Future;
use std::path::PathBuf;
use std::time::Instant;

use tokio::sync::watch;

use crate::process::{ExitStatus, Isolation, ProcessError};
use crate::sandbox::SandboxError;

mod process;

pub use process::ProcessRuntime;

/// Errors of the runtime module.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("run pod sandbox {name}: {source}")]
    RunPodSandbox { name: String, source: SandboxError },
    #[error("pod sandbox {id} not found")]
    PodSandboxNotFound { id: String },
    #[error("container {id} not found")]
    ContainerNotFound { id: String },
    #[error("start container {id}: it is not in state Created")]
    StartContainerState { id: String },
    #[error("start container {id}: {source}")]
    StartContainer { id: String, source: ProcessError },
    #[error("stop container {id}: signal {signal}: {source}")]
    StopContainerSignal {
        id: String,
        signal: i32,
        source: ProcessError,
    },
    #[error("stop container {id}: caller's context ended before the container exited")]
    StopContainerCancelled { id: String },
    #[error("exec in container {id}: {source}")]
    ExecSync { id: String, source: ProcessError },
    #[error("exec in container {id}: caller's context ended first; the exec was killed")]
    ExecSyncCancelled { id: String },
    #[error("exec in container {id}: it is not running")]
    ExecSyncNotRunning { id: String },
}

/// The caller's context: an optional deadline and an optional cancellation, like Go's
/// `context.Context` that every CRI call carries.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    deadline: Option<Instant>,
    cancel: Option<watch::Receiver<bool>>,
}

/// Cancels the [`CallContext`] made by [`CallContext::with_cancel`]; dropping it cancels nothing.
#[derive(Debug)]
pub struct Canceller(watch::Sender<bool>);

impl Canceller {
    /// Cancels every context made from this canceller.
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
}

impl CallContext {
    /// No deadline, never cancelled (Go's `context.Background()`).
    pub fn background() -> Self {
        Self::default()
    }

    /// This context with a deadline (monotonic).
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
        self
    }

    /// This context plus a cancellation handle.
    pub fn with_cancel(mut self) -> (Self, Canceller) {
        let (tx, rx) = watch::channel(false);
        self.cancel = Some(rx);
        (self, Canceller(tx))
    }

    /// Completes when the deadline passes or the context is cancelled; never otherwise.
    pub async fn done(&self) {
        let deadline = async {
            match self.deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = async {
            match &self.cancel {
                Some(rx) => {
                    let mut rx = rx.clone();
                    // A dropped canceller never cancels.
                    if rx.wait_for(|c| *c).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! { _ = deadline => {}, _ = cancelled => {} }
    }
}

/// CRI `PodSandboxConfig`, the parts podgrace uses.
#[derive(Debug, Clone, Default)]
pub struct PodSandboxConfig {
    /// Pod name (metadata.name).
    pub name: String,
    /// `spec.hostNetwork`: no network namespace.
    pub host_network: bool,
}

/// CRI `ContainerConfig`, the parts podgrace uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerConfig {
    pub name: String,
    /// `command` + `args` as one argv.
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<PathBuf>,
    /// The stop signal as a Linux signal number (default SIGTERM = 15); containerd captures it
    /// at create time (`container_create.go`).
    pub stop_signal: Option<i32>,
    /// Run as a plain host process even when namespaces are permitted.
    pub force_host: bool,
}

/// CRI `PodSandboxStatus`, the parts podgrace uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSandboxStatus {
    pub id: String,
    /// `network.ip`: the pod IP; `None` for a sandbox on the host network.
    pub ip: Option<std::net::IpAddr>,
}

/// CRI `ContainerEventResponse` (`GetContainerEvents`, the evented PLEG's stream), the parts
/// podgrace uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEvent {
    pub container_id: String,
    pub kind: ContainerEventKind,
}

/// CRI `ContainerEventType`, the kinds podgrace emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerEventKind {
    /// `CONTAINER_STARTED_EVENT`.
    Started { at: Instant },
    /// `CONTAINER_STOPPED_EVENT`: PID 1 exited (collected by the reaper at `at`).
    Stopped { at: Instant, status: ExitStatus },
}

/// CRI container state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
}

/// CRI `ContainerStatus`, the parts podgrace uses. Times are monotonic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStatus {
    pub id: String,
    pub name: String,
    pub state: ContainerState,
    /// Host pid of PID 1 while it runs or after.
    pub pid: Option<i32>,
    pub isolation: Option<Isolation>,
    pub started_at: Option<Instant>,
    pub finished_at: Option<Instant>,
    pub exit: Option<ExitStatus>,
}

/// CRI `ExecSyncResponse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSyncResponse {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Exit code; 128 + signal if killed.
    pub exit_code: i32,
}

/// What happened during stops of a container, with monotonic timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopEvent {
    pub at: Instant,
    pub kind: StopEventKind,
}

/// The kinds of [`StopEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopEventKind {
    /// `StopContainer(timeout)` was called (timeout in seconds).
    StopRequested { timeout_seconds: i64 },
    /// The stop signal (number) was sent to PID 1.
    StopSignalSent { signal: i32 },
    /// A later call with timeout > 0 found the stop signal already sent and did not resend it.
    StopSignalSkipped { signal: i32 },
    /// SIGKILL was sent to PID 1.
    KillSent,
    /// The container exited (collected by the reaper at `at`).
    Exited { status: ExitStatus },
}

/// The CRI RuntimeService, as far as termination needs it. All durations in seconds as in CRI.
pub trait RuntimeService: Send + Sync {
    /// `RunPodSandbox`: creates the pod's network namespace (unless host network) and returns
    /// the sandbox id.
    fn run_pod_sandbox(
        &self,
        ctx: &CallContext,
        config: PodSandboxConfig,
    ) -> impl Future<Output = Result<String, RuntimeError>> + Send;
    /// `StopPodSandbox`: SIGKILLs containers still running (containerd stops them with
    /// timeout 0) and tears the network down. Unknown id → Ok.
    fn stop_pod_sandbox(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// `RemovePodSandbox`: stops it if needed and forgets it and its containers. Unknown id → Ok.
    fn remove_pod_sandbox(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// `CreateContainer` in a sandbox; returns the container id.
    fn create_container(
        &self,
        ctx: &CallContext,
        pod_sandbox_id: &str,
        config: ContainerConfig,
    ) -> impl Future<Output = Result<String, RuntimeError>> + Send;
    /// `StartContainer`: spawns the entry process.
    fn start_container(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// `StopContainer(id, timeout)`, timeout in seconds. See [`ProcessRuntime`] for semantics.
    fn stop_container(
        &self,
        ctx: &CallContext,
        id: &str,
        timeout_seconds: i64,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// `ExecSync(id, cmd, timeout)`; `timeout_seconds <= 0` means no timeout (CRI).
    fn exec_sync(
        &self,
        ctx: &CallContext,
        id: &str,
        cmd: Vec<String>,
        timeout_seconds: i64,
    ) -> impl Future<Output = Result<ExecSyncResponse, RuntimeError>> + Send;
    /// `PodSandboxStatus`: the pod IP.
    fn pod_sandbox_status(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<PodSandboxStatus, RuntimeError>> + Send;
    /// `GetContainerEvents` for the containers of one sandbox: their lifecycle events from now
    /// on (lossy if a receiver lags by more than the channel's capacity, as a stream behind a
    /// slow client would be). The kubelet's evented PLEG dispatches CRI's one stream to the pod
    /// workers; a stream per sandbox saves every pod task from waking for every other pod's
    /// containers. `None` for an unknown sandbox.
    fn container_events(
        &self,
        pod_sandbox_id: &str,
    ) -> Option<tokio::sync::broadcast::Receiver<ContainerEvent>>;
    /// `ContainerStatus`.
    fn container_status(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<ContainerStatus, RuntimeError>> + Send;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn context_done_fires_at_the_deadline() {
        let start = Instant::now();
        let ctx = CallContext::background().with_deadline(start + Duration::from_millis(50));
        ctx.done().await;
        assert!(start.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn context_done_fires_on_cancel_only() {
        let (ctx, cancel) = CallContext::background().with_cancel();
        let not_yet = tokio::time::timeout(Duration::from_millis(20), ctx.done()).await;
        assert!(not_yet.is_err());
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(1), ctx.done())
            .await
            .expect("cancelled");
    }
}
