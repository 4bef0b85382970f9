//! The CRI-RuntimeService-shaped trait the kubelet side calls, and its two runtimes.
//!
//! The kubelet-side parts of podgrace (pod worker, hooks, probes) call only [`RuntimeService`],
//! as the kubelet calls CRI. Every method takes a [`CallContext`] (Go's `ctx`: deadline and
//! cancellation). The runtimes:
//! * [`ProcessRuntime`] (`process.rs`): containers are local processes in namespaces of their
//!   own; the embedded default, with no dependency;
//! * [`ContainerdRuntime`] (`containerd.rs`): a real containerd over CRI v1 (gRPC on its
//!   socket), images and CNI networking included.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::process::{ExitStatus, Isolation, ProcessError};
use crate::sandbox::SandboxError;

pub mod cgroup;
pub mod containerd;
pub mod oci;
mod process;
pub mod stale_cgroups;

pub use containerd::ContainerdRuntime;
pub use process::ProcessRuntime;

mod context;
mod service;

pub use context::{CallContext, Canceller};
pub use service::RuntimeService;

/// Which runtime runs the pods: `process` (the built-in one) or `containerd[:SOCKET]`
/// (a real containerd over CRI, default socket [`containerd::DEFAULT_SOCKET`]), as the
/// `--runtime` flag of `run`, `drill` and `serve` spells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RuntimeChoice {
    /// The built-in process runtime ([`ProcessRuntime`]).
    #[default]
    Process,
    /// A real containerd over CRI v1 ([`ContainerdRuntime`]).
    Containerd {
        /// containerd's gRPC socket.
        socket: PathBuf,
    },
}

impl std::str::FromStr for RuntimeChoice {
    type Err = String;

    /// `process`, `containerd` or `containerd:/path/to/containerd.sock`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            None if s == "process" => Ok(RuntimeChoice::Process),
            None if s == "containerd" => Ok(RuntimeChoice::Containerd {
                socket: PathBuf::from(containerd::DEFAULT_SOCKET),
            }),
            Some(("containerd", sock)) if !sock.is_empty() => Ok(RuntimeChoice::Containerd {
                socket: PathBuf::from(sock),
            }),
            _ => Err(format!(
                "expected process, containerd or containerd:SOCKET, got {s:?}"
            )),
        }
    }
}

impl std::fmt::Display for RuntimeChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeChoice::Process => f.write_str("process"),
            RuntimeChoice::Containerd { socket } => write!(f, "containerd:{}", socket.display()),
        }
    }
}

/// Errors of the runtime module.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `RunPodSandbox` could not make the sandbox (its network namespace or address).
    #[error("run pod sandbox {name}: {source}")]
    RunPodSandbox {
        /// The sandbox's `metadata.name` (the pod's name).
        name: String,
        /// The sandbox step that failed.
        source: SandboxError,
    },
    /// No sandbox has this id (CRI `NotFound`).
    #[error("pod sandbox {id} not found")]
    PodSandboxNotFound {
        /// The sandbox id asked for.
        id: String,
    },
    /// No container has this id (CRI `NotFound`).
    #[error("container {id} not found")]
    ContainerNotFound {
        /// The container id asked for.
        id: String,
    },
    /// `StartContainer` of a container that is not `CONTAINER_CREATED`.
    #[error("start container {id}: it is not in state Created")]
    StartContainerState {
        /// The container's runtime id.
        id: String,
    },
    /// `StartContainer` could not spawn the container's process.
    #[error("start container {id}: {source}")]
    StartContainer {
        /// The container's runtime id.
        id: String,
        /// The spawn error.
        source: ProcessError,
    },
    /// `StopContainer` could not send the stop signal or SIGKILL.
    #[error("stop container {id}: signal {signal}: {source}")]
    StopContainerSignal {
        /// The container's runtime id.
        id: String,
        /// The signal's number (15 SIGTERM, 9 SIGKILL, or the image's `StopSignal`).
        signal: i32,
        /// The signalling error.
        source: ProcessError,
    },
    /// The caller's [`CallContext`] ended during `StopContainer` (the kubelet's ctx deadline).
    #[error("stop container {id}: caller's context ended before the container exited")]
    StopContainerCancelled {
        /// The container's runtime id.
        id: String,
    },
    /// `ExecSync` could not spawn the command inside the container.
    #[error("exec in container {id}: {source}")]
    ExecSync {
        /// The container's runtime id.
        id: String,
        /// The spawn error.
        source: ProcessError,
    },
    /// The caller's [`CallContext`] ended during `ExecSync`; the command was killed.
    #[error("exec in container {id}: caller's context ended first; the exec was killed")]
    ExecSyncCancelled {
        /// The container's runtime id.
        id: String,
    },
    /// The exec ran past its CRI timeout and was killed (the kubelet's `exec.TimeoutError`).
    #[error("exec in container {id}: command timed out after {timeout_seconds} s")]
    ExecSyncTimeout {
        /// The container's runtime id.
        id: String,
        /// `ExecSyncRequest.timeout`, in seconds.
        timeout_seconds: i64,
    },
    /// `ExecSync` in a container that is not running.
    #[error("exec in container {id}: it is not running")]
    ExecSyncNotRunning {
        /// The container's runtime id.
        id: String,
    },
    /// The runtime's socket could not be reached. The message names the socket; the machine's
    /// words are the source, once (`No such file or directory (os error 2)`, `no answer to CRI
    /// Version within 10 s`), not the transport's nested wrappers.
    #[error("cannot reach the container runtime at {socket}")]
    Connect {
        /// The runtime's socket (containerd's `containerd.sock`).
        socket: PathBuf,
        /// What the machine said: the innermost cause of the transport's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A CRI call failed (the gRPC status, with the runtime's message).
    #[error("CRI {call}: {}: {}", status.code(), status.message())]
    Cri {
        /// The CRI method (`RunPodSandbox`, `CreateContainer`, `StopContainer` ...).
        call: &'static str,
        /// The gRPC status the runtime answered.
        #[source]
        status: Box<tonic::Status>,
    },
    /// A CRI call's answer lacked what it must hold.
    #[error("CRI {call}: {what}")]
    CriAnswer {
        /// The CRI method.
        call: &'static str,
        /// What was missing or malformed.
        what: String,
    },
    /// The image is absent and `imagePullPolicy: Never` forbids pulling it (`ErrImageNeverPull`).
    #[error("container image \"{image}\" is not present with pull policy of Never")]
    ImageNeverPull {
        /// The image reference of the container spec.
        image: String,
    },
    /// A host-side step (log directory, mount source) failed.
    #[error("{what}: {source}")]
    Host {
        /// The step and its path.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl RuntimeError {
    /// What the kubelet takes from a failed call for its `"Error: ..."` event and the
    /// container's waiting message: `grpcstatus.FromError(err).Message()`, the runtime's own
    /// message without the gRPC code (`failed to create containerd task: ...`); this error's
    /// text for a runtime that is not remote (the process runtime).
    ///
    /// Upstream: `pkg/kubelet/kuberuntime/kuberuntime_container.go` `startContainer`.
    pub fn status_message(&self) -> String {
        match self {
            RuntimeError::Cri { status, .. } => status.message().to_string(),
            other => other.to_string(),
        }
    }

    /// The error as grpc-go prints it, as the kubelet's `Failed to pull image "IMAGE": ERR`
    /// shows it: `rpc error: code = NotFound desc = failed to pull and unpack image ...`
    /// (`status.Error`'s `Error()`, the code in Go's spelling); this error's text for a
    /// runtime that is not remote.
    pub fn grpc_text(&self) -> String {
        match self {
            RuntimeError::Cri { status, .. } => format!(
                "rpc error: code = {} desc = {}",
                go_code_name(status.code()),
                status.message()
            ),
            other => other.to_string(),
        }
    }
}

/// A timeout of `seconds` as a [`std::time::Duration`] to add to an instant (a
/// StopContainer's SIGKILL deadline, the kubelet's wait for a pod it kills at once, a node
/// shutdown's period): a negative one is 0, and one above 100 years (the API takes any
/// `terminationGracePeriodSeconds` up to 2^63 − 1 seconds) is 100 years, a deadline that
/// never comes, so that adding it to an instant cannot overflow and panic.
pub(crate) fn timeout_after(seconds: i64) -> std::time::Duration {
    const NEVER: u64 = 100 * 365 * 24 * 3600;
    std::time::Duration::from_secs(u64::try_from(seconds).unwrap_or(0).min(NEVER))
}

/// grpc-go's `codes.Code.String()`: the names tonic's `Debug` gives, except `OK` and `Canceled`.
fn go_code_name(code: tonic::Code) -> String {
    match code {
        tonic::Code::Ok => "OK".into(),
        tonic::Code::Cancelled => "Canceled".into(),
        other => format!("{other:?}"),
    }
}

/// CRI `PodSandboxConfig`, the parts podgrace uses, as the kubelet's
/// `generatePodSandboxConfig` fills them (`pkg/kubelet/kuberuntime/kuberuntime_sandbox.go`).
/// The process runtime uses `name` and `host_network`; containerd gets all of it.
#[derive(Debug, Clone, Default)]
pub struct PodSandboxConfig {
    /// Pod name (metadata.name).
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// How many sandboxes of this pod were created before this one.
    pub attempt: u32,
    /// `spec.hostNetwork`: no network namespace.
    pub host_network: bool,
    /// The pod's hostname (none on the host network, where the node's applies).
    pub hostname: Option<String>,
    /// `newPodLabels`: the pod's labels plus `io.kubernetes.pod.{name,namespace,uid}`.
    pub labels: BTreeMap<String, String>,
    /// `newPodAnnotations`: the pod's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The DNS the pod's resolv.conf gets (`GetPodDNS`).
    pub dns: Option<DnsConfig>,
    /// Every declared container port (`MakePortMappings`); the runtime maps those with a host
    /// port.
    pub port_mappings: Vec<PortMapping>,
    /// The pod's cgroup (`GetPodCgroupParent`), with the cgroupfs driver's path syntax.
    pub cgroup_parent: Option<String>,
    /// `spec.shareProcessNamespace`: one PID namespace for the pod.
    pub share_process_namespace: bool,
    /// The directory the runtime writes container logs under (`BuildPodLogsDirectory`).
    pub log_directory: Option<PathBuf>,
    /// `linux.resources`: the pod's summed resources (`calculateSandboxResources`), which the
    /// kubelet hands the runtime for information.
    pub resources: Option<podgrace_core::rules::resources::LinuxContainerResources>,
    /// The limits of the pod cgroup (`ResourceConfigForPod`), which the kubelet's pod
    /// container manager writes when it creates `cgroup_parent`; the runtimes do it here
    /// (not a CRI field).
    pub pod_cgroup: Option<podgrace_core::rules::resources::ResourceConfig>,
}

/// CRI `DNSConfig`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsConfig {
    /// `nameserver` addresses, in order.
    pub servers: Vec<String>,
    /// `search` domains, in order.
    pub searches: Vec<String>,
    /// `options` entries (`ndots:5` ...).
    pub options: Vec<String>,
}

/// CRI `PortMapping`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// `containerPort`: the port inside the pod's network namespace.
    pub container_port: i32,
    /// 0: not mapped on the host.
    pub host_port: i32,
    /// `hostIP` the host port binds to; empty: every address.
    pub host_ip: String,
}

/// CRI `Mount`: a host path bind-mounted into the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// `volumeMounts[].mountPath`: where it appears inside the container.
    pub container_path: PathBuf,
    /// The volume's directory or file on the host.
    pub host_path: PathBuf,
    /// `volumeMounts[].readOnly`.
    pub readonly: bool,
}

/// When the image is pulled (`imagePullPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PullPolicy {
    /// Pull before every container start.
    Always,
    /// Pull only when the image is absent (Kubernetes' default for a tag other than `:latest`).
    #[default]
    IfNotPresent,
    /// Never pull: an absent image is [`RuntimeError::ImageNeverPull`].
    Never,
}

/// CRI `ContainerConfig`, the parts podgrace uses, as the kubelet's `generateContainerConfig`
/// fills them (`pkg/kubelet/kuberuntime/kuberuntime_container.go`). The process runtime runs
/// `command` + `args` with `env` and `working_dir`; containerd gets all of it and applies the
/// image's ENTRYPOINT and CMD where `command` (and `args`) are empty, as upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerConfig {
    /// `metadata.name`: the container's name in the pod spec.
    pub name: String,
    /// `metadata.attempt`: the container's restart count.
    pub attempt: u32,
    /// `spec.containers[].image` (empty for the process runtime's manifests without one).
    pub image: String,
    /// `imagePullPolicy`.
    pub pull_policy: PullPolicy,
    /// `command` (empty: the image's ENTRYPOINT).
    pub command: Vec<String>,
    /// `args` (empty with an empty `command`: the image's CMD).
    pub args: Vec<String>,
    /// `envs`: the resolved environment, `(name, value)` in order.
    pub env: Vec<(String, String)>,
    /// `workingDir`; `None`: the runtime's default (the image's `WorkingDir` on containerd).
    pub working_dir: Option<PathBuf>,
    /// The stop signal as a Linux signal number; `None`: the runtime's default (the image's
    /// STOPSIGNAL for containerd, SIGTERM for the process runtime). containerd captures it at
    /// create time (`container_create.go`).
    pub stop_signal: Option<i32>,
    /// `newContainerLabels`: `io.kubernetes.pod.{name,namespace,uid}`,
    /// `io.kubernetes.container.name`.
    pub labels: BTreeMap<String, String>,
    /// `newContainerAnnotations`: hash, restart count, termination message path and policy,
    /// the pod's grace, the preStop handler and ports as JSON.
    pub annotations: BTreeMap<String, String>,
    /// Volume mounts (emptyDir, hostPath, configMap, secret), resolved to host paths.
    pub mounts: Vec<Mount>,
    /// The log file, relative to the sandbox's log directory (`NAME/ATTEMPT.log`).
    pub log_path: Option<PathBuf>,
    /// Run as a plain host process even when namespaces are permitted (process runtime).
    pub force_host: bool,
    /// `linux.resources` (`generateLinuxContainerResources`): cpu shares, CFS quota and
    /// period, memory limit, oom_score_adj, swap; `None`: the runtime's defaults.
    pub resources: Option<podgrace_core::rules::resources::LinuxContainerResources>,
}

impl ContainerConfig {
    /// `command` followed by `args`, the argv the process runtime runs.
    pub fn argv(&self) -> Vec<String> {
        self.command
            .iter()
            .chain(self.args.iter())
            .cloned()
            .collect()
    }
}

/// CRI `Image`, the parts podgrace uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The image id (`sha256:...`).
    pub id: String,
    /// Its size, bytes.
    pub size_bytes: u64,
}

/// CRI `PodSandboxStatus`, the parts podgrace uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSandboxStatus {
    /// The sandbox's id.
    pub id: String,
    /// `network.ip`: the pod IP; `None` for a sandbox on the host network.
    pub ip: Option<std::net::IpAddr>,
}

/// CRI `ContainerEventResponse` (`GetContainerEvents`, the evented PLEG's stream), the parts
/// podgrace uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEvent {
    /// The container's runtime id.
    pub container_id: String,
    /// What happened to it.
    pub kind: ContainerEventKind,
}

/// CRI `ContainerEventType`, the kinds podgrace emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerEventKind {
    /// `CONTAINER_STARTED_EVENT`.
    Started {
        /// When PID 1 was started (monotonic).
        at: Instant,
    },
    /// `CONTAINER_STOPPED_EVENT`: PID 1 exited (collected by the reaper at `at`);
    /// `oom_killed` when the runtime reports the reason `OOMKilled` (the kernel's OOM killer
    /// killed a process of the container's cgroup).
    Stopped {
        /// When the reaper collected PID 1 (monotonic).
        at: Instant,
        /// PID 1's exit code or signal.
        status: ExitStatus,
        /// The runtime reported `OOMKilled`.
        oom_killed: bool,
    },
}

/// CRI container state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    /// `CONTAINER_CREATED`: created, not started.
    Created,
    /// `CONTAINER_RUNNING`: PID 1 runs.
    Running,
    /// `CONTAINER_EXITED`: PID 1 has exited.
    Exited,
}

/// CRI `ContainerStatus`, the parts podgrace uses. Times are monotonic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStatus {
    /// The container's runtime id.
    pub id: String,
    /// `metadata.name`: the container's name in the pod spec.
    pub name: String,
    /// Created, running or exited.
    pub state: ContainerState,
    /// Host pid of PID 1 while it runs or after.
    pub pid: Option<i32>,
    /// How PID 1 is isolated (namespaced or a host process); `None` when the runtime does not say.
    pub isolation: Option<Isolation>,
    /// `startedAt` (monotonic); `None` before the start.
    pub started_at: Option<Instant>,
    /// `finishedAt` (monotonic); `None` until PID 1 is reaped.
    pub finished_at: Option<Instant>,
    /// PID 1's exit code or signal, once exited.
    pub exit: Option<ExitStatus>,
    /// The signal the runtime stops it with (a Linux signal number), when it says.
    pub stop_signal: Option<i32>,
    /// `image.image`: the image as the runtime names it (containerd: the reference it resolved,
    /// `docker.io/library/nginx:1.27`); `None` for the process runtime.
    pub image: Option<String>,
    /// `image_ref`: the image's digest reference (a repo digest, else the image id
    /// `sha256:...`), the API's `imageID`; `None` for the process runtime.
    pub image_ref: Option<String>,
    /// `reason` of an exited container (`OOMKilled`, `Completed`, `Error`), as containerd
    /// reports it; the kubelet copies it into `state.terminated.reason`.
    pub reason: Option<String>,
}

/// CRI `ExecSyncResponse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSyncResponse {
    /// The command's standard output, as bytes.
    pub stdout: Vec<u8>,
    /// The command's standard error, as bytes.
    pub stderr: Vec<u8>,
    /// Exit code; 128 + signal if killed.
    pub exit_code: i32,
}

/// What happened during stops of a container, with monotonic timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopEvent {
    /// When it happened (monotonic).
    pub at: Instant,
    /// What happened.
    pub kind: StopEventKind,
}

/// The kinds of [`StopEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopEventKind {
    /// `StopContainer(timeout)` was called (timeout in seconds).
    StopRequested {
        /// `StopContainerRequest.timeout`, in seconds.
        timeout_seconds: i64,
    },
    /// The stop signal (number) was sent to PID 1.
    StopSignalSent {
        /// The Linux signal number.
        signal: i32,
    },
    /// A later call with timeout > 0 found the stop signal already sent and did not resend it.
    StopSignalSkipped {
        /// The Linux signal number already sent.
        signal: i32,
    },
    /// SIGKILL was sent to PID 1.
    KillSent,
    /// The container exited (collected by the reaper at `at`).
    Exited {
        /// PID 1's exit code or signal.
        status: ExitStatus,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grace of 2^63 − 1 seconds (valid in the API) is a deadline that never comes, not an
    /// overflow panic; an ordinary one is the timeout, a negative one 0.
    #[test]
    fn timeouts_of_any_grace_can_be_added_to_an_instant() {
        let now = Instant::now();
        assert_eq!(timeout_after(30), std::time::Duration::from_secs(30));
        assert_eq!(timeout_after(-5), std::time::Duration::ZERO);
        let far = now + timeout_after(i64::MAX);
        assert!(far >= now + std::time::Duration::from_secs(99 * 365 * 24 * 3600));
        let _ = tokio::time::Instant::now() + timeout_after(i64::MAX);
    }

    /// The kubelet's two renderings of a CRI error: grpc-go's `Error()` for `Failed to pull
    /// image`, the status message alone for `Error: ...`.
    #[test]
    fn cri_errors_as_the_kubelet_words_them() {
        let e = |code, msg: &str| RuntimeError::Cri {
            call: "PullImage",
            status: Box::new(tonic::Status::new(code, msg)),
        };
        let pull = e(
            tonic::Code::NotFound,
            "failed to pull and unpack image \"x\"",
        );
        assert_eq!(
            pull.grpc_text(),
            "rpc error: code = NotFound desc = failed to pull and unpack image \"x\""
        );
        assert_eq!(
            pull.status_message(),
            "failed to pull and unpack image \"x\""
        );
        assert_eq!(
            e(tonic::Code::Cancelled, "context canceled").grpc_text(),
            "rpc error: code = Canceled desc = context canceled"
        );
        assert_eq!(
            e(tonic::Code::Unknown, "m").grpc_text(),
            "rpc error: code = Unknown desc = m"
        );
        let host = RuntimeError::ContainerNotFound { id: "c1".into() };
        assert_eq!(host.grpc_text(), "container c1 not found");
        assert_eq!(host.status_message(), "container c1 not found");
    }

    #[test]
    fn runtime_choices() {
        assert_eq!("process".parse(), Ok(RuntimeChoice::Process));
        assert_eq!(
            "containerd".parse(),
            Ok(RuntimeChoice::Containerd {
                socket: PathBuf::from("/run/containerd/containerd.sock")
            })
        );
        assert_eq!(
            "containerd:/tmp/c.sock".parse(),
            Ok(RuntimeChoice::Containerd {
                socket: PathBuf::from("/tmp/c.sock")
            })
        );
        assert!("containerd:".parse::<RuntimeChoice>().is_err());
        assert!("docker".parse::<RuntimeChoice>().is_err());
    }
}
