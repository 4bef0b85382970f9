//! The containerd runtime: [`RuntimeService`] over CRI v1, gRPC on containerd's unix socket
//! (containerd's CRI plugin keeps its pods in the `k8s.io` namespace).
//!
//! Every trait call is the CRI call of the same name, with the caller's [`CallContext`] as the
//! gRPC deadline (and cancellation: a dropped call is a cancelled stream, which containerd
//! turns into a cancelled context, as for the kubelet). What containerd does not tell a CRI
//! client is inferred, and says so:
//! * **container events**: `GetContainerEvents` (containerd 1.7+, the evented PLEG) when it is
//!   served; otherwise a relist of the containers every [`RELIST_PERIOD`], as the kubelet's
//!   generic PLEG does (`pkg/kubelet/pleg/generic.go`), so an exit is seen up to 1 s late;
//! * **stop events** for the run report: the StopContainer call; the stop signal at the call
//!   (containerd sends it 8–10 ms later, `rules::latency::CONTAINERD_1_6`); SIGKILL at the
//!   call's timeout when the container outlived it (containerd kills then); the exit at the
//!   `finished_at` containerd recorded;
//! * **output**: the CRI log files containerd writes (`<log_directory>/<log_path>`, lines
//!   `TIMESTAMP STREAM P|F TEXT`), tailed into [`OutputLine`]s;
//! * **the stop signal**: `ContainerStatus.stop_signal` where the runtime reports it
//!   (KEP-4960), else the image's STOPSIGNAL (`ImageStatus` verbose `info.imageSpec`), else
//!   SIGTERM, which is what containerd sends.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hyper_util::rt::TokioIo;
use podgrace_cri::v1 as cri;
use podgrace_cri::v1::image_service_client::ImageServiceClient;
use podgrace_cri::v1::runtime_service_client::RuntimeServiceClient;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint, Uri};

use super::{
    CallContext, ContainerConfig, ContainerEvent, ContainerEventKind, ContainerState,
    ContainerStatus, ExecSyncResponse, ImageInfo, PodSandboxConfig, PodSandboxStatus, RuntimeError,
    RuntimeService, StopEvent, StopEventKind,
};
use crate::process::{ExitStatus, OutputLine, Stream};

/// containerd's default socket.
pub const DEFAULT_SOCKET: &str = "/run/containerd/containerd.sock";

/// The kubelet's generic PLEG relist period (`genericPlegRelistPeriod`, 1 s,
/// `pkg/kubelet/kubelet.go`), used when the runtime serves no `GetContainerEvents`.
pub const RELIST_PERIOD: Duration = Duration::from_secs(1);

/// The label podgrace adds to the sandboxes it creates, beside the kubelet's
/// `io.kubernetes.pod.*`, so that a restarted podgrace finds its own and never touches a real
/// kubelet's pods on a shared containerd.
pub const MANAGED_BY_LABEL: &str = "podgrace.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "podgrace";
/// The label naming the podgrace process that created a sandbox (`PID.STARTTIME`, the start
/// time in clock ticks from `/proc/PID/stat`, so that a reused pid is not taken for it): a
/// podgrace that starts stops only the sandboxes whose creator is gone, never those of another
/// podgrace that still runs.
pub const OWNER_LABEL: &str = "podgrace.io/owner";

/// This process as [`OWNER_LABEL`] names it.
pub fn owner_id() -> String {
    process_id(std::process::id()).unwrap_or_else(|| std::process::id().to_string())
}

/// `PID.STARTTIME` of a live process, `None` when there is none.
fn process_id(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: the fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    // starttime is field 22 of stat, the 20th after the command.
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("{pid}.{start}"))
}

/// Whether the podgrace named by an [`OWNER_LABEL`] value still runs.
fn owner_alive(owner: &str) -> bool {
    let Some(pid) = owner.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    process_id(pid).is_some_and(|id| id == owner)
}

/// `runtimeRequestTimeout`'s default (2 min): the kubelet adds it to the StopContainer and
/// ExecSync timeouts for the call's own deadline (`cri-client` `remote_runtime.go`).
pub const RUNTIME_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// What `Version` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeVersion {
    /// `containerd`.
    pub runtime_name: String,
    /// `1.6.20~ds1`.
    pub runtime_version: String,
    /// `v1`.
    pub runtime_api_version: String,
}

/// A sandbox found on the runtime (see [`ContainerdRuntime::own_sandboxes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundSandbox {
    /// The sandbox's id.
    pub id: String,
    /// `io.kubernetes.pod.name`.
    pub pod: String,
    /// `io.kubernetes.pod.namespace`.
    pub namespace: String,
    /// `io.kubernetes.pod.uid`.
    pub uid: String,
    /// `SANDBOX_READY`.
    pub ready: bool,
    /// The podgrace that created it still runs (then it is that podgrace's to stop).
    pub owner_alive: bool,
    /// Its [`OWNER_LABEL`] (`PID.STARTTIME` of the podgrace that created it).
    pub owner: String,
    /// Its containers, as `ListContainers` gives them.
    pub containers: Vec<FoundContainer>,
}

/// A container of a [`FoundSandbox`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundContainer {
    /// The container's id.
    pub id: String,
    /// `io.kubernetes.container.name`.
    pub name: String,
    /// `CONTAINER_RUNNING`.
    pub running: bool,
    /// The grace the kubelet would kill it with after a restart: `restoreSpecsFromContainerLabels`
    /// reads `io.kubernetes.pod.deletionGracePeriod`, else `...terminationGracePeriod`
    /// (seconds), else none (then [`ContainerdRuntime::stop_found`] uses the kubelet's 2 s
    /// minimum).
    pub grace_period_seconds: Option<i64>,
}

struct SandboxEntry {
    events: broadcast::Sender<ContainerEvent>,
    log_directory: Option<PathBuf>,
    /// The namespaces its containers join (`namespacesForPod`): the kubelet sets them on
    /// every container too, or containerd would share the pod's PID namespace.
    namespaces: Option<cri::NamespaceOption>,
    /// `linux.cgroup_parent`: the pod's cgroup, created before the sandbox and removed after.
    cgroup_parent: Option<String>,
}

struct ContainerEntry {
    sandbox_id: String,
    name: String,
    image: String,
    log_file: Option<PathBuf>,
    /// The CRI state last seen (relist).
    state: i32,
    /// Set once it exited; ends the log tail after its last read.
    exited: Arc<AtomicBool>,
    stop_events: Vec<StopEvent>,
    tail: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct State {
    sandboxes: HashMap<String, SandboxEntry>,
    containers: HashMap<String, ContainerEntry>,
    /// The STOPSIGNAL of each image seen (by the image name given in the config).
    image_signals: HashMap<String, Option<i32>>,
}

/// Monotonic time from CRI's Unix nanoseconds, through one reading of both clocks.
#[derive(Clone, Copy)]
struct Clock {
    base: Instant,
    base_unix_ns: i128,
}

impl Clock {
    fn now() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Clock {
            base: Instant::now(),
            base_unix_ns: unix.as_nanos() as i128,
        }
    }

    /// `None` for 0 (unset in CRI).
    fn instant(&self, unix_ns: i64) -> Option<Instant> {
        if unix_ns <= 0 {
            return None;
        }
        let d = i128::from(unix_ns) - self.base_unix_ns;
        let abs = Duration::from_nanos(u64::try_from(d.unsigned_abs()).unwrap_or(u64::MAX));
        if d >= 0 {
            self.base.checked_add(abs)
        } else {
            self.base.checked_sub(abs)
        }
    }
}

/// A real containerd, reached over CRI v1. See the module docs for what is inferred.
pub struct ContainerdRuntime {
    socket: PathBuf,
    channel: Channel,
    version: RuntimeVersion,
    state: Arc<Mutex<State>>,
    output: mpsc::UnboundedSender<OutputLine>,
    clock: Clock,
    /// `GetContainerEvents` is served (else the relist runs).
    evented: bool,
    watcher: JoinHandle<()>,
    /// Where podgrace asks containerd to write the pods' logs.
    log_root: PathBuf,
    /// Pull progress on stderr.
    progress: bool,
}

impl Drop for ContainerdRuntime {
    fn drop(&mut self) {
        self.watcher.abort();
        // The pods' log directories went with their sandboxes; the root goes if it is empty.
        let _ = std::fs::remove_dir(&self.log_root);
        for c in lock(&self.state).containers.values_mut() {
            if let Some(t) = c.tail.take() {
                t.abort();
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn cri_error(call: &'static str) -> impl Fn(tonic::Status) -> RuntimeError {
    move |status| RuntimeError::Cri {
        call,
        status: Box::new(status),
    }
}

/// The request with the context's deadline as its gRPC timeout.
fn request<T>(ctx: &CallContext, message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    if let Some(d) = ctx.deadline() {
        r.set_timeout(
            d.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        );
    }
    r
}

/// Runs `call` until it answers or `ctx` ends (dropping the call cancels its gRPC stream).
async fn within<T>(
    ctx: &CallContext,
    call: &'static str,
    fut: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, RuntimeError> {
    tokio::select! {
        r = fut => r.map(tonic::Response::into_inner).map_err(cri_error(call)),
        () = ctx.done() => Err(RuntimeError::Cri {
            call,
            status: Box::new(tonic::Status::cancelled("the caller's context ended")),
        }),
    }
}

/// `e`, or `missing()` when CRI answered NotFound (the id is unknown to containerd).
fn not_found_as(e: RuntimeError, missing: impl FnOnce() -> RuntimeError) -> RuntimeError {
    if is_not_found(&e) {
        missing()
    } else {
        e
    }
}

fn is_not_found(e: &RuntimeError) -> bool {
    matches!(e, RuntimeError::Cri { status, .. } if status.code() == tonic::Code::NotFound)
}

/// The Linux signal number of a CRI `Signal` (`RUNTIME_DEFAULT`: `None`).
fn signal_number(s: cri::Signal) -> Option<i32> {
    use cri::Signal as S;
    Some(match s {
        S::RuntimeDefault => return None,
        S::Sigabrt | S::Sigiot => 6,
        S::Sigalrm => 14,
        S::Sigbus => 7,
        S::Sigchld | S::Sigcld => 17,
        S::Sigcont => 18,
        S::Sigfpe => 8,
        S::Sighup => 1,
        S::Sigill => 4,
        S::Sigint => 2,
        S::Sigio | S::Sigpoll => 29,
        S::Sigkill => 9,
        S::Sigpipe => 13,
        S::Sigprof => 27,
        S::Sigpwr => 30,
        S::Sigquit => 3,
        S::Sigsegv => 11,
        S::Sigstkflt => 16,
        S::Sigstop => 19,
        S::Sigsys => 31,
        S::Sigterm => 15,
        S::Sigtrap => 5,
        S::Sigtstp => 20,
        S::Sigttin => 21,
        S::Sigttou => 22,
        S::Sigurg => 23,
        S::Sigusr1 => 10,
        S::Sigusr2 => 12,
        S::Sigvtalrm => 26,
        S::Sigwinch => 28,
        S::Sigxcpu => 24,
        S::Sigxfsz => 25,
        // Real-time signals: SIGRTMIN is 34 on Linux (glibc reserves 32 and 33).
        other => {
            let name = other.as_str_name();
            if let Some(n) = name.strip_prefix("SIGRTMIN_PLUS_") {
                34 + n.parse::<i32>().ok()?
            } else if let Some(n) = name.strip_prefix("SIGRTMAX_MINUS_") {
                64 - n.parse::<i32>().ok()?
            } else if name == "SIGRTMIN" {
                34
            } else if name == "SIGRTMAX" {
                64
            } else {
                return None;
            }
        }
    })
}

/// The CRI `Signal` of a Linux signal number (`RUNTIME_DEFAULT` for none or an unknown one).
fn cri_signal(n: Option<i32>) -> cri::Signal {
    let Some(n) = n else {
        return cri::Signal::RuntimeDefault;
    };
    (1..=64)
        .filter_map(|i| cri::Signal::try_from(i).ok())
        .find(|s| {
            signal_number(*s) == Some(n)
                && !matches!(
                    s,
                    cri::Signal::Sigiot | cri::Signal::Sigcld | cri::Signal::Sigpoll
                )
        })
        .unwrap_or(cri::Signal::RuntimeDefault)
}

/// A signal name from an OCI image config's `StopSignal` (`SIGQUIT`, `QUIT`, `3`).
fn parse_stop_signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let upper = s.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    let name = name.replace('+', "_PLUS_").replace('-', "_MINUS_");
    cri::Signal::from_str_name(&name).and_then(signal_number)
}

/// containerd's exit code as the process module's status: 128 + N is death by signal N (the
/// kubelet cannot tell an `exit(137)` from a SIGKILL either).
fn exit_status(code: i32) -> ExitStatus {
    if (129..=128 + 64).contains(&code) {
        ExitStatus::Signal(code - 128)
    } else {
        ExitStatus::Code(code)
    }
}

/// Parses CRI log lines (`2016-10-06T00:17:09.669794202Z stdout F text`), joining partial
/// (`P`) lines; returns the complete lines and keeps the unfinished rest in `pending`.
fn parse_cri_log(buf: &mut Vec<u8>, partial: &mut [Vec<u8>; 2]) -> Vec<(Stream, String)> {
    let mut out = Vec::new();
    while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = buf.drain(..=nl).collect();
        let line = &line[..line.len() - 1];
        let mut parts = line.splitn(4, |b| *b == b' ');
        let (_ts, stream, tag) = (parts.next(), parts.next(), parts.next());
        let text = parts.next().unwrap_or_default();
        let (stream, slot) = match stream {
            Some(b"stderr") => (Stream::Stderr, 1),
            _ => (Stream::Stdout, 0),
        };
        partial[slot].extend_from_slice(text);
        if tag != Some(b"P") {
            let whole = std::mem::take(&mut partial[slot]);
            out.push((stream, String::from_utf8_lossy(&whole).into_owned()));
        }
    }
    out
}

/// Follows a CRI log file from its start until the container has exited and the file holds
/// nothing more.
fn tail_log(
    path: PathBuf,
    container: String,
    exited: Arc<AtomicBool>,
    output: mpsc::UnboundedSender<OutputLine>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let mut pos = 0u64;
        let mut buf = Vec::new();
        let mut partial = [Vec::new(), Vec::new()];
        loop {
            let done = exited.load(Ordering::SeqCst);
            if let Ok(mut f) = tokio::fs::File::open(&path).await {
                if f.seek(std::io::SeekFrom::Start(pos)).await.is_ok() {
                    let mut chunk = Vec::new();
                    if let Ok(n) = f.read_to_end(&mut chunk).await {
                        pos += n as u64;
                        buf.extend_from_slice(&chunk);
                        for (stream, line) in parse_cri_log(&mut buf, &mut partial) {
                            let _ = output.send(OutputLine {
                                container: container.clone(),
                                stream,
                                line,
                            });
                        }
                    }
                }
            }
            if done {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// How long `connect` waits for containerd's answer to CRI `Version`, in seconds.
const VERSION_TIMEOUT_SECONDS: u64 = 10;

/// What the machine said, once: the innermost cause of a transport error (`No such file or
/// directory (os error 2)`, `Connection refused (os error 111)`), or for a gRPC status its code
/// and message (a timeout: `no answer to CRI Version within 10 s`). tonic's errors repeat their
/// source in their own text and print a status with its metadata; none of that is kept.
fn machine_words(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(status) = e.downcast_ref::<tonic::Status>() {
        // tonic's client-side deadline (`GrpcTimeout`): `Cancelled`, "Timeout expired".
        let timed_out =
            status.code() == tonic::Code::DeadlineExceeded || status.message() == "Timeout expired";
        if timed_out {
            return format!("no answer to CRI Version within {VERSION_TIMEOUT_SECONDS} s");
        }
        if let Some(inner) = std::error::Error::source(status) {
            return machine_words(inner);
        }
        return format!("CRI Version: {}: {}", status.code(), status.message());
    }
    let mut root = e;
    while let Some(next) = root.source() {
        root = next;
    }
    root.to_string()
}

impl ContainerdRuntime {
    /// Connects to containerd's CRI at `socket` and asks its `Version`; returns the runtime and
    /// the stream of every container's output lines (from the CRI log files under `log_root`,
    /// which is created).
    ///
    /// # Errors
    /// [`RuntimeError::Connect`] when the socket cannot be reached or does not serve CRI v1;
    /// [`RuntimeError::Host`] when `log_root` cannot be created.
    pub async fn connect(
        socket: &Path,
        log_root: &Path,
    ) -> Result<(Self, mpsc::UnboundedReceiver<OutputLine>), RuntimeError> {
        let connect_err = |e: &(dyn std::error::Error + 'static)| RuntimeError::Connect {
            socket: socket.to_path_buf(),
            source: machine_words(e).into(),
        };
        // A path that is there but is no socket: connect(2) would say only "Connection refused".
        if let Ok(meta) = std::fs::metadata(socket) {
            use std::os::unix::fs::FileTypeExt;
            let kind = meta.file_type();
            if !kind.is_socket() {
                let what = if kind.is_dir() {
                    "a directory"
                } else if kind.is_file() {
                    "a regular file"
                } else {
                    "a special file"
                };
                return Err(RuntimeError::Connect {
                    socket: socket.to_path_buf(),
                    source: format!("{} is {what}, not a Unix socket", socket.display()).into(),
                });
            }
        }
        let path = socket.to_path_buf();
        let channel = Endpoint::from_static("http://localhost")
            .connect_timeout(Duration::from_secs(5))
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let s = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(s))
                }
            }))
            .await
            .map_err(|e| connect_err(&e))?;
        let mut client = RuntimeServiceClient::new(channel.clone());
        let mut req = tonic::Request::new(cri::VersionRequest {
            version: "v1".into(),
        });
        req.set_timeout(Duration::from_secs(VERSION_TIMEOUT_SECONDS));
        let v = client
            .version(req)
            .await
            .map_err(|e| connect_err(&e))?
            .into_inner();
        let version = RuntimeVersion {
            runtime_name: v.runtime_name,
            runtime_version: v.runtime_version,
            runtime_api_version: v.runtime_api_version,
        };
        std::fs::create_dir_all(log_root).map_err(|source| RuntimeError::Host {
            what: format!("create the pod log directory {}", log_root.display()),
            source,
        })?;
        let state = Arc::new(Mutex::new(State::default()));
        let clock = Clock::now();
        // The evented PLEG where the runtime serves it; the generic PLEG's relist otherwise.
        let (evented, watcher) = match client.get_container_events(cri::GetEventsRequest {}).await {
            Ok(stream) => (
                true,
                tokio::spawn(watch_events(stream.into_inner(), Arc::clone(&state), clock)),
            ),
            Err(s) if s.code() == tonic::Code::Unimplemented => (
                false,
                tokio::spawn(relist(channel.clone(), Arc::clone(&state), clock)),
            ),
            Err(e) => return Err(connect_err(&e)),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        Ok((
            ContainerdRuntime {
                socket: socket.to_path_buf(),
                channel,
                version,
                state,
                output: tx,
                clock,
                evented,
                watcher,
                log_root: log_root.to_path_buf(),
                progress: false,
            },
            rx,
        ))
    }

    /// This runtime, printing progress on stderr while an image is pulled.
    pub fn with_pull_progress(mut self) -> Self {
        self.progress = true;
        self
    }

    /// The socket this runtime talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// What the runtime's `Version` said.
    pub fn version(&self) -> &RuntimeVersion {
        &self.version
    }

    /// Whether container events come from `GetContainerEvents` (else from a relist every
    /// [`RELIST_PERIOD`]).
    pub fn evented(&self) -> bool {
        self.evented
    }

    /// The directory podgrace asks containerd to write the pods' logs under.
    pub fn log_root(&self) -> &Path {
        &self.log_root
    }

    fn rt(&self) -> RuntimeServiceClient<Channel> {
        RuntimeServiceClient::new(self.channel.clone())
    }

    fn images(&self) -> ImageServiceClient<Channel> {
        ImageServiceClient::new(self.channel.clone())
    }

    /// The stop events of a container so far, in order (empty for an unknown id). See the
    /// module docs for which are inferred.
    pub fn stop_events(&self, id: &str) -> Vec<StopEvent> {
        lock(&self.state)
            .containers
            .get(id)
            .map(|c| c.stop_events.clone())
            .unwrap_or_default()
    }

    /// The STOPSIGNAL in the config of `image` as containerd holds it (`ImageStatus` verbose:
    /// `info.imageSpec.config.StopSignal`), as a signal number; `Ok(None)` when the image has
    /// none; [`RuntimeError::CriAnswer`] when the image is not present.
    ///
    /// # Errors
    /// [`RuntimeError::Cri`] when the call fails, [`RuntimeError::CriAnswer`] when the image is
    /// absent or its config unreadable.
    pub async fn image_stop_signal(
        &self,
        ctx: &CallContext,
        image: &str,
    ) -> Result<Option<i32>, RuntimeError> {
        if let Some(s) = lock(&self.state).image_signals.get(image) {
            return Ok(*s);
        }
        let r = within(
            ctx,
            "ImageStatus",
            self.images().image_status(request(
                ctx,
                cri::ImageStatusRequest {
                    image: Some(cri::ImageSpec {
                        image: image.into(),
                        ..Default::default()
                    }),
                    verbose: true,
                },
            )),
        )
        .await?;
        if r.image.is_none() {
            return Err(RuntimeError::CriAnswer {
                call: "ImageStatus",
                what: format!("image {image:?} is not present"),
            });
        }
        let spec = r
            .info
            .get("info")
            .and_then(|i| serde_json::from_str::<serde_json::Value>(i).ok())
            .and_then(|v| v.get("imageSpec").cloned())
            .ok_or_else(|| RuntimeError::CriAnswer {
                call: "ImageStatus",
                what: format!("no imageSpec in the verbose info of {image:?}"),
            })?;
        let signal = spec
            .pointer("/config/StopSignal")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
            .and_then(parse_stop_signal);
        lock(&self.state)
            .image_signals
            .insert(image.to_string(), signal);
        Ok(signal)
    }

    /// The sandboxes podgrace created on this containerd ([`MANAGED_BY_LABEL`]), with their
    /// containers, found by their labels as a restarted kubelet finds its pods.
    ///
    /// # Errors
    /// [`RuntimeError::Cri`] when listing fails.
    pub async fn own_sandboxes(
        &self,
        ctx: &CallContext,
    ) -> Result<Vec<FoundSandbox>, RuntimeError> {
        let filter = cri::PodSandboxFilter {
            label_selector: [(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into(),
            ..Default::default()
        };
        let sandboxes = within(
            ctx,
            "ListPodSandbox",
            self.rt().list_pod_sandbox(request(
                ctx,
                cri::ListPodSandboxRequest {
                    filter: Some(filter),
                },
            )),
        )
        .await?
        .items;
        let containers = within(
            ctx,
            "ListContainers",
            self.rt()
                .list_containers(request(ctx, cri::ListContainersRequest { filter: None })),
        )
        .await?
        .containers;
        let mut found = Vec::new();
        for sb in sandboxes {
            let label = |k: &str| sb.labels.get(k).cloned().unwrap_or_default();
            let mut own = Vec::new();
            for c in containers.iter().filter(|c| c.pod_sandbox_id == sb.id) {
                let grace = c
                    .annotations
                    .get("io.kubernetes.pod.deletionGracePeriod")
                    .or_else(|| {
                        c.annotations
                            .get("io.kubernetes.pod.terminationGracePeriod")
                    })
                    .and_then(|g| g.parse().ok());
                own.push(FoundContainer {
                    id: c.id.clone(),
                    name: c
                        .labels
                        .get("io.kubernetes.container.name")
                        .cloned()
                        .unwrap_or_default(),
                    running: c.state == cri::ContainerState::ContainerRunning as i32,
                    grace_period_seconds: grace,
                });
            }
            found.push(FoundSandbox {
                owner_alive: owner_alive(&label(OWNER_LABEL)),
                owner: label(OWNER_LABEL),
                pod: label("io.kubernetes.pod.name"),
                namespace: label("io.kubernetes.pod.namespace"),
                uid: label("io.kubernetes.pod.uid"),
                ready: sb.state == cri::PodSandboxState::SandboxReady as i32,
                id: sb.id,
                containers: own,
            });
        }
        Ok(found)
    }

    /// Stops a sandbox found by [`Self::own_sandboxes`] as the kubelet stops the containers of
    /// a pod it no longer knows: each running container with StopContainer and the grace its
    /// annotations recorded (at least the kubelet's 2 s minimum), all at once, then the
    /// sandbox is stopped and removed.
    ///
    /// # Errors
    /// The first CRI call that fails.
    pub async fn stop_found(
        &self,
        ctx: &CallContext,
        sb: &FoundSandbox,
    ) -> Result<(), RuntimeError> {
        let mut stops = tokio::task::JoinSet::new();
        for c in sb.containers.iter().filter(|c| c.running) {
            let grace = c.grace_period_seconds.unwrap_or(2).max(2);
            let (mut rt, ctx, id) = (self.rt(), ctx.clone(), c.id.clone());
            stops.spawn(async move {
                within(
                    &ctx,
                    "StopContainer",
                    rt.stop_container(request(
                        &ctx,
                        cri::StopContainerRequest {
                            container_id: id,
                            timeout: grace,
                        },
                    )),
                )
                .await
            });
        }
        while let Some(r) = stops.join_next().await {
            match r {
                Ok(Err(e)) if !is_not_found(&e) => return Err(e),
                _ => {}
            }
        }
        self.remove_pod_sandbox(ctx, &sb.id).await?;
        // The kubelet's cleanupOrphanedPodDirs: the volumes the earlier podgrace set up.
        if let Some(pid) = sb.owner.split('.').next().and_then(|p| p.parse().ok()) {
            crate::kubelet::volumes::remove_orphaned(pid, &sb.uid);
        }
        Ok(())
    }

    /// Stops and removes every sandbox this process created (at once: timeout 0), as an
    /// interrupted podgrace must before it exits, since containerd's containers outlive it.
    /// Returns how many there were; failures are skipped (the next podgrace stops what is
    /// left).
    pub async fn remove_own_sandboxes(&self, ctx: &CallContext) -> usize {
        let me = owner_id();
        let Ok(found) = self.own_sandboxes(ctx).await else {
            return 0;
        };
        let mut n = 0;
        for sb in found {
            let mine = within(
                ctx,
                "PodSandboxStatus",
                self.rt().pod_sandbox_status(request(
                    ctx,
                    cri::PodSandboxStatusRequest {
                        pod_sandbox_id: sb.id.clone(),
                        verbose: false,
                    },
                )),
            )
            .await
            .ok()
            .and_then(|r| r.status)
            .is_some_and(|s| s.labels.get(OWNER_LABEL) == Some(&me));
            if mine && self.remove_pod_sandbox(ctx, &sb.id).await.is_ok() {
                n += 1;
            }
        }
        n
    }

    /// Ensures a sandbox podgrace did not create in this process (adopted) has its event
    /// channel.
    fn sandbox_events(&self, id: &str) -> broadcast::Sender<ContainerEvent> {
        let mut st = lock(&self.state);
        st.sandboxes
            .entry(id.to_string())
            .or_insert_with(|| SandboxEntry {
                events: broadcast::channel(256).0,
                log_directory: None,
                namespaces: None,
                cgroup_parent: None,
            })
            .events
            .clone()
    }

    /// The `linux.cgroup_parent` and `log_directory` of a sandbox's config as containerd keeps
    /// it (`PodSandboxStatus` verbose: `info.config`), each `None` when unset or gone.
    async fn sandbox_config_paths(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> (Option<String>, Option<PathBuf>) {
        let Some(config) = self.sandbox_config_info(ctx, id).await else {
            return (None, None);
        };
        let text = |p: &str| {
            config
                .pointer(p)
                .and_then(|c| c.as_str())
                .filter(|c| !c.is_empty())
                .map(str::to_string)
        };
        (
            text("/linux/cgroup_parent"),
            text("/log_directory").map(PathBuf::from),
        )
    }

    /// `info.config` of a sandbox's verbose `PodSandboxStatus`.
    async fn sandbox_config_info(&self, ctx: &CallContext, id: &str) -> Option<serde_json::Value> {
        let r = within(
            ctx,
            "PodSandboxStatus",
            self.rt().pod_sandbox_status(request(
                ctx,
                cri::PodSandboxStatusRequest {
                    pod_sandbox_id: id.into(),
                    verbose: true,
                },
            )),
        )
        .await
        .ok()?;
        let info: serde_json::Value = serde_json::from_str(r.info.get("info")?).ok()?;
        info.get("config").cloned()
    }

    /// The stop signal containerd will send `id` (see the module docs).
    async fn effective_stop_signal(
        &self,
        ctx: &CallContext,
        reported: cri::Signal,
        image: &str,
    ) -> Option<i32> {
        if let Some(n) = signal_number(reported) {
            return Some(n);
        }
        if image.is_empty() {
            return Some(15);
        }
        match self.image_stop_signal(ctx, image).await {
            Ok(Some(n)) => Some(n),
            Ok(None) => Some(15),
            Err(_) => None,
        }
    }
}

/// Sends `ev` to the sandbox of its container and marks an exit.
fn dispatch(state: &Mutex<State>, ev: ContainerEvent) {
    let mut st = lock(state);
    let Some(c) = st.containers.get_mut(&ev.container_id) else {
        return;
    };
    if let ContainerEventKind::Stopped { at, status, .. } = ev.kind {
        c.exited.store(true, Ordering::SeqCst);
        c.state = cri::ContainerState::ContainerExited as i32;
        if !c
            .stop_events
            .iter()
            .any(|e| matches!(e.kind, StopEventKind::Exited { .. }))
        {
            c.stop_events.push(StopEvent {
                at,
                kind: StopEventKind::Exited { status },
            });
        }
    }
    let sandbox = c.sandbox_id.clone();
    if let Some(sb) = st.sandboxes.get(&sandbox) {
        let _ = sb.events.send(ev);
    }
}

/// The evented PLEG: `GetContainerEvents`' stream, dispatched to the sandboxes.
async fn watch_events(
    mut stream: tonic::Streaming<cri::ContainerEventResponse>,
    state: Arc<Mutex<State>>,
    clock: Clock,
) {
    while let Ok(Some(ev)) = stream.message().await {
        let at = clock.instant(ev.created_at).unwrap_or_else(Instant::now);
        let kind = match cri::ContainerEventType::try_from(ev.container_event_type) {
            Ok(cri::ContainerEventType::ContainerStartedEvent) => {
                ContainerEventKind::Started { at }
            }
            Ok(cri::ContainerEventType::ContainerStoppedEvent) => {
                let status = ev
                    .containers_statuses
                    .iter()
                    .find(|s| s.id == ev.container_id);
                let (at, code) = status
                    .map(|s| (clock.instant(s.finished_at).unwrap_or(at), s.exit_code))
                    .unwrap_or((at, 0));
                ContainerEventKind::Stopped {
                    at,
                    status: exit_status(code),
                    oom_killed: status.is_some_and(|s| s.reason == OOM_KILLED),
                }
            }
            _ => continue,
        };
        dispatch(
            &state,
            ContainerEvent {
                container_id: ev.container_id,
                kind,
            },
        );
    }
}

/// The generic PLEG: every [`RELIST_PERIOD`], the containers' states; an exit seen is read
/// with `ContainerStatus` and dispatched.
async fn relist(channel: Channel, state: Arc<Mutex<State>>, clock: Clock) {
    let mut rt = RuntimeServiceClient::new(channel);
    let mut tick = tokio::time::interval(RELIST_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if lock(&state).containers.is_empty() {
            continue;
        }
        let Ok(list) = rt
            .list_containers(cri::ListContainersRequest { filter: None })
            .await
        else {
            continue;
        };
        let exited = cri::ContainerState::ContainerExited as i32;
        let changed: Vec<String> = {
            let mut st = lock(&state);
            list.into_inner()
                .containers
                .into_iter()
                .filter_map(|c| {
                    let e = st.containers.get_mut(&c.id)?;
                    let was = e.state;
                    e.state = c.state;
                    (c.state == exited && was != exited).then_some(c.id)
                })
                .collect()
        };
        for id in changed {
            let Ok(s) = rt
                .container_status(cri::ContainerStatusRequest {
                    container_id: id.clone(),
                    verbose: false,
                })
                .await
            else {
                continue;
            };
            let Some(s) = s.into_inner().status else {
                continue;
            };
            dispatch(
                &state,
                ContainerEvent {
                    container_id: id,
                    kind: ContainerEventKind::Stopped {
                        at: clock.instant(s.finished_at).unwrap_or_else(Instant::now),
                        status: exit_status(s.exit_code),
                        oom_killed: s.reason == OOM_KILLED,
                    },
                },
            );
        }
    }
}

/// containerd's `oomExitReason`.
const OOM_KILLED: &str = "OOMKilled";

/// CRI `LinuxContainerResources` of the kubelet's computed ones.
fn cri_resources(
    r: &podgrace_core::rules::resources::LinuxContainerResources,
) -> cri::LinuxContainerResources {
    cri::LinuxContainerResources {
        cpu_period: r.cpu_period,
        cpu_quota: r.cpu_quota,
        cpu_shares: r.cpu_shares,
        memory_limit_in_bytes: r.memory_limit_in_bytes,
        oom_score_adj: r.oom_score_adj,
        unified: to_map(&r.unified),
        memory_swap_limit_in_bytes: r.memory_swap_limit_in_bytes,
        ..Default::default()
    }
}

fn to_map(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn protocol(p: &str) -> i32 {
    match p {
        "UDP" => cri::Protocol::Udp as i32,
        "SCTP" => cri::Protocol::Sctp as i32,
        _ => cri::Protocol::Tcp as i32,
    }
}

impl RuntimeService for ContainerdRuntime {
    async fn run_pod_sandbox(
        &self,
        ctx: &CallContext,
        config: PodSandboxConfig,
    ) -> Result<String, RuntimeError> {
        let mut labels = to_map(&config.labels);
        labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
        labels.insert(OWNER_LABEL.into(), owner_id());
        let log_directory = config.log_directory.clone().map(|d| {
            if d.is_absolute() {
                d
            } else {
                self.log_root.join(d)
            }
        });
        if let Some(d) = &log_directory {
            std::fs::create_dir_all(d).map_err(|source| RuntimeError::Host {
                what: format!("create the pod log directory {}", d.display()),
                source,
            })?;
        }
        if let Some(cg) = &config.cgroup_parent {
            // The kubelet's pod container manager creates the pod's cgroup, with the pod's
            // limits, before the sandbox.
            super::cgroup::ensure(cg).map_err(|(dir, source)| RuntimeError::Host {
                what: format!("create the pod cgroup {}", dir.display()),
                source,
            })?;
            if let Some(limits) = &config.pod_cgroup {
                if let Err((file, source)) = super::cgroup::apply_pod_config(cg, limits) {
                    super::cgroup::remove(cg);
                    return Err(RuntimeError::Host {
                        what: format!("set the pod cgroup's limits in {}", file.display()),
                        source,
                    });
                }
            }
        }
        let namespace_mode = |node: bool| {
            if node {
                cri::NamespaceMode::Node as i32
            } else {
                cri::NamespaceMode::Pod as i32
            }
        };
        let pid = if config.share_process_namespace {
            cri::NamespaceMode::Pod as i32
        } else {
            cri::NamespaceMode::Container as i32
        };
        let namespaces = cri::NamespaceOption {
            network: namespace_mode(config.host_network),
            pid,
            ipc: cri::NamespaceMode::Pod as i32,
            ..Default::default()
        };
        let sandbox_config = cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: config.name.clone(),
                uid: config.uid.clone(),
                namespace: config.namespace.clone(),
                attempt: config.attempt,
            }),
            hostname: config.hostname.clone().unwrap_or_default(),
            log_directory: log_directory
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            dns_config: config.dns.as_ref().map(|d| cri::DnsConfig {
                servers: d.servers.clone(),
                searches: d.searches.clone(),
                options: d.options.clone(),
            }),
            port_mappings: config
                .port_mappings
                .iter()
                .map(|p| cri::PortMapping {
                    protocol: protocol(&p.protocol),
                    container_port: p.container_port,
                    host_port: p.host_port,
                    host_ip: p.host_ip.clone(),
                })
                .collect(),
            labels,
            annotations: to_map(&config.annotations),
            linux: Some(cri::LinuxPodSandboxConfig {
                cgroup_parent: config.cgroup_parent.clone().unwrap_or_default(),
                security_context: Some(cri::LinuxSandboxSecurityContext {
                    namespace_options: Some(namespaces.clone()),
                    ..Default::default()
                }),
                // `applySandboxResources`: no overhead (all zero), the pod's resources.
                overhead: config
                    .resources
                    .as_ref()
                    .map(|_| cri::LinuxContainerResources::default()),
                resources: config.resources.as_ref().map(cri_resources),
                ..Default::default()
            }),
            windows: None,
        };
        let id = within(
            ctx,
            "RunPodSandbox",
            self.rt().run_pod_sandbox(request(
                ctx,
                cri::RunPodSandboxRequest {
                    config: Some(sandbox_config),
                    runtime_handler: String::new(),
                },
            )),
        )
        .await;
        let id = match id {
            Ok(r) => r.pod_sandbox_id,
            Err(e) => {
                if let Some(cg) = &config.cgroup_parent {
                    super::cgroup::remove(cg);
                }
                return Err(e);
            }
        };
        lock(&self.state).sandboxes.insert(
            id.clone(),
            SandboxEntry {
                events: broadcast::channel(256).0,
                log_directory,
                namespaces: Some(namespaces),
                cgroup_parent: config.cgroup_parent.clone(),
            },
        );
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        let r = within(
            ctx,
            "StopPodSandbox",
            self.rt().stop_pod_sandbox(request(
                ctx,
                cri::StopPodSandboxRequest {
                    pod_sandbox_id: id.into(),
                },
            )),
        )
        .await;
        match r {
            Err(e) if !is_not_found(&e) => return Err(e),
            _ => {}
        }
        // Its containers are dead now: their log tails may finish.
        let st = lock(&self.state);
        for c in st.containers.values().filter(|c| c.sandbox_id == id) {
            c.exited.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        self.stop_pod_sandbox(ctx, id).await?;
        let known = lock(&self.state)
            .sandboxes
            .get(id)
            .map(|s| s.cgroup_parent.clone());
        let (cgroup_parent, earlier_log_directory) = match known {
            Some(cg) => (cg, None),
            // A sandbox of an earlier podgrace: its cgroup and log directory from the config
            // containerd keeps.
            None => self.sandbox_config_paths(ctx, id).await,
        };
        let r = within(
            ctx,
            "RemovePodSandbox",
            self.rt().remove_pod_sandbox(request(
                ctx,
                cri::RemovePodSandboxRequest {
                    pod_sandbox_id: id.into(),
                },
            )),
        )
        .await;
        match r {
            Err(e) if !is_not_found(&e) => return Err(e),
            _ => {}
        }
        let tails: Vec<JoinHandle<()>> = {
            let mut st = lock(&self.state);
            let dir = st.sandboxes.remove(id).and_then(|s| s.log_directory);
            let ids: Vec<String> = st
                .containers
                .iter()
                .filter(|(_, c)| c.sandbox_id == id)
                .map(|(k, _)| k.clone())
                .collect();
            let tails = ids
                .iter()
                .filter_map(|k| st.containers.get_mut(k).and_then(|c| c.tail.take()))
                .collect();
            if let Some(d) = dir {
                let _ = std::fs::remove_dir_all(d);
            }
            tails
        };
        if let Some(cg) = &cgroup_parent {
            super::cgroup::remove(cg);
        }
        if let Some(d) = earlier_log_directory {
            let _ = std::fs::remove_dir_all(&d);
            // The earlier podgrace's log root goes with its last pod.
            if let Some(root) = d.parent() {
                let _ = std::fs::remove_dir(root);
            }
        }
        for t in tails {
            let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
        }
        Ok(())
    }

    async fn create_container(
        &self,
        ctx: &CallContext,
        pod_sandbox_id: &str,
        config: ContainerConfig,
    ) -> Result<String, RuntimeError> {
        let (log_directory, namespaces, cgroup_parent) = lock(&self.state)
            .sandboxes
            .get(pod_sandbox_id)
            .map(|s| {
                (
                    s.log_directory.clone(),
                    s.namespaces.clone(),
                    s.cgroup_parent.clone(),
                )
            })
            .unwrap_or_default();
        if let (Some(d), Some(p)) = (&log_directory, &config.log_path) {
            if let Some(parent) = d.join(p).parent() {
                std::fs::create_dir_all(parent).map_err(|source| RuntimeError::Host {
                    what: format!("create the container log directory {}", parent.display()),
                    source,
                })?;
            }
        }
        let cri_config = cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata {
                name: config.name.clone(),
                attempt: config.attempt,
            }),
            image: Some(cri::ImageSpec {
                image: config.image.clone(),
                ..Default::default()
            }),
            command: config.command.clone(),
            args: config.args.clone(),
            working_dir: config
                .working_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            envs: config
                .env
                .iter()
                .map(|(k, v)| cri::KeyValue {
                    key: k.clone(),
                    value: v.clone().into_bytes(),
                })
                .collect(),
            mounts: config
                .mounts
                .iter()
                .map(|m| cri::Mount {
                    container_path: m.container_path.display().to_string(),
                    host_path: m.host_path.display().to_string(),
                    readonly: m.readonly,
                    ..Default::default()
                })
                .collect(),
            labels: to_map(&config.labels),
            annotations: to_map(&config.annotations),
            log_path: config
                .log_path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            linux: Some(cri::LinuxContainerConfig {
                resources: config.resources.as_ref().map(cri_resources),
                security_context: Some(cri::LinuxContainerSecurityContext {
                    namespace_options: namespaces,
                    ..Default::default()
                }),
            }),
            stop_signal: cri_signal(config.stop_signal) as i32,
            ..Default::default()
        };
        // CreateContainer carries the sandbox's config; containerd reads its namespaces and
        // labels from its own records, the rest from here.
        let sandbox_config = within(
            ctx,
            "PodSandboxStatus",
            self.rt().pod_sandbox_status(request(
                ctx,
                cri::PodSandboxStatusRequest {
                    pod_sandbox_id: pod_sandbox_id.into(),
                    verbose: false,
                },
            )),
        )
        .await
        .map_err(|e| {
            not_found_as(e, || RuntimeError::PodSandboxNotFound {
                id: pod_sandbox_id.into(),
            })
        })?
        .status
        .map(|s| cri::PodSandboxConfig {
            metadata: s.metadata,
            labels: s.labels,
            annotations: s.annotations,
            log_directory: log_directory
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            // containerd puts the container's cgroup under the sandbox's parent from here.
            linux: cgroup_parent.map(|cg| cri::LinuxPodSandboxConfig {
                cgroup_parent: cg,
                ..Default::default()
            }),
            ..Default::default()
        });
        let id = within(
            ctx,
            "CreateContainer",
            self.rt().create_container(request(
                ctx,
                cri::CreateContainerRequest {
                    pod_sandbox_id: pod_sandbox_id.into(),
                    config: Some(cri_config),
                    sandbox_config,
                },
            )),
        )
        .await?
        .container_id;
        let log_file = match (&log_directory, &config.log_path) {
            (Some(d), Some(p)) => Some(d.join(p)),
            _ => None,
        };
        lock(&self.state).containers.insert(
            id.clone(),
            ContainerEntry {
                sandbox_id: pod_sandbox_id.into(),
                name: config.name.clone(),
                image: config.image.clone(),
                log_file,
                state: cri::ContainerState::ContainerCreated as i32,
                exited: Arc::new(AtomicBool::new(false)),
                stop_events: Vec::new(),
                tail: None,
            },
        );
        Ok(id)
    }

    async fn start_container(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        let r = within(
            ctx,
            "StartContainer",
            self.rt().start_container(request(
                ctx,
                cri::StartContainerRequest {
                    container_id: id.into(),
                },
            )),
        )
        .await;
        if let Err(e) = r {
            return Err(not_found_as(e, || RuntimeError::ContainerNotFound {
                id: id.into(),
            }));
        }
        let started = self.container_status(ctx, id).await.ok();
        let sandbox = {
            let mut st = lock(&self.state);
            let Some(c) = st.containers.get_mut(id) else {
                return Ok(());
            };
            c.state = cri::ContainerState::ContainerRunning as i32;
            if let Some(f) = c.log_file.clone() {
                c.tail = Some(tail_log(
                    f,
                    c.name.clone(),
                    Arc::clone(&c.exited),
                    self.output.clone(),
                ));
            }
            c.sandbox_id.clone()
        };
        let at = started
            .and_then(|s| s.started_at)
            .unwrap_or_else(Instant::now);
        let _ = self.sandbox_events(&sandbox).send(ContainerEvent {
            container_id: id.into(),
            kind: ContainerEventKind::Started { at },
        });
        Ok(())
    }

    async fn stop_container(
        &self,
        ctx: &CallContext,
        id: &str,
        timeout_seconds: i64,
    ) -> Result<(), RuntimeError> {
        let called = Instant::now();
        let (known, signal, image) = {
            let st = lock(&self.state);
            match st.containers.get(id) {
                Some(c) => (
                    true,
                    st.image_signals.get(&c.image).copied().flatten(),
                    c.image.clone(),
                ),
                None => (false, None, String::new()),
            }
        };
        let status_before = if known {
            self.container_status(ctx, id).await.ok()
        } else {
            None
        };
        let running = status_before
            .as_ref()
            .is_some_and(|s| s.state == ContainerState::Running);
        let r = within(
            ctx,
            "StopContainer",
            self.rt().stop_container(request(
                ctx,
                cri::StopContainerRequest {
                    container_id: id.into(),
                    timeout: timeout_seconds,
                },
            )),
        )
        .await;
        match r {
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(RuntimeError::Cri { status, .. }) if status.code() == tonic::Code::Cancelled => {
                return Err(RuntimeError::StopContainerCancelled { id: id.into() })
            }
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        if !running {
            return Ok(());
        }
        let returned = Instant::now();
        let after = self.container_status(ctx, id).await.ok();
        tracing::debug!(
            container = id,
            call_ms = returned.duration_since(called).as_millis() as u64,
            returned_after_death_ms = after
                .as_ref()
                .and_then(|s| s.finished_at)
                .map(|d| returned.saturating_duration_since(d).as_millis() as u64),
            "StopContainer returned"
        );
        let signal = status_before
            .and_then(|s| s.stop_signal)
            .or(signal)
            .or_else(|| image.is_empty().then_some(15))
            .unwrap_or(15);
        let mut st = lock(&self.state);
        if let Some(c) = st.containers.get_mut(id) {
            c.stop_events.push(StopEvent {
                at: called,
                kind: StopEventKind::StopRequested { timeout_seconds },
            });
            let deadline = called + super::timeout_after(timeout_seconds);
            let died = after.as_ref().and_then(|s| s.finished_at);
            if timeout_seconds > 0 {
                c.stop_events.push(StopEvent {
                    at: called,
                    kind: StopEventKind::StopSignalSent { signal },
                });
            }
            if died.is_none_or(|d| d >= deadline) {
                c.stop_events.push(StopEvent {
                    at: deadline,
                    kind: StopEventKind::KillSent,
                });
            }
            if let (Some(at), Some(exit)) = (died, after.as_ref().and_then(|s| s.exit)) {
                if !c
                    .stop_events
                    .iter()
                    .any(|e| matches!(e.kind, StopEventKind::Exited { .. }))
                {
                    c.stop_events.push(StopEvent {
                        at,
                        kind: StopEventKind::Exited { status: exit },
                    });
                }
                c.exited.store(true, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    async fn exec_sync(
        &self,
        ctx: &CallContext,
        id: &str,
        cmd: Vec<String>,
        timeout_seconds: i64,
    ) -> Result<ExecSyncResponse, RuntimeError> {
        let r = within(
            ctx,
            "ExecSync",
            self.rt().exec_sync(request(
                ctx,
                cri::ExecSyncRequest {
                    container_id: id.into(),
                    cmd,
                    timeout: timeout_seconds.max(0),
                },
            )),
        )
        .await;
        match r {
            Ok(r) => Ok(ExecSyncResponse {
                stdout: r.stdout,
                stderr: r.stderr,
                exit_code: r.exit_code,
            }),
            Err(RuntimeError::Cri { status, .. }) if status.code() == tonic::Code::Cancelled => {
                Err(RuntimeError::ExecSyncCancelled { id: id.into() })
            }
            // cri-client: DeadlineExceeded is the exec's own timeout (exec.NewTimeoutError).
            Err(RuntimeError::Cri { status, .. })
                if status.code() == tonic::Code::DeadlineExceeded
                    && timeout_seconds > 0
                    && ctx.deadline().is_none_or(|d| d > Instant::now()) =>
            {
                Err(RuntimeError::ExecSyncTimeout {
                    id: id.into(),
                    timeout_seconds,
                })
            }
            Err(e) if is_not_found(&e) => Err(RuntimeError::ContainerNotFound { id: id.into() }),
            Err(e) => {
                if let RuntimeError::Cri { status, .. } = &e {
                    if status.message().contains("not running")
                        || status.message().contains("CONTAINER_EXITED")
                    {
                        return Err(RuntimeError::ExecSyncNotRunning { id: id.into() });
                    }
                }
                Err(e)
            }
        }
    }

    async fn pod_sandbox_status(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> Result<PodSandboxStatus, RuntimeError> {
        let r = within(
            ctx,
            "PodSandboxStatus",
            self.rt().pod_sandbox_status(request(
                ctx,
                cri::PodSandboxStatusRequest {
                    pod_sandbox_id: id.into(),
                    verbose: false,
                },
            )),
        )
        .await
        .map_err(|e| not_found_as(e, || RuntimeError::PodSandboxNotFound { id: id.into() }))?;
        let ip = r
            .status
            .and_then(|s| s.network)
            .and_then(|n| n.ip.parse().ok());
        Ok(PodSandboxStatus { id: id.into(), ip })
    }

    fn container_events(
        &self,
        pod_sandbox_id: &str,
    ) -> Option<broadcast::Receiver<ContainerEvent>> {
        Some(self.sandbox_events(pod_sandbox_id).subscribe())
    }

    async fn container_status(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> Result<ContainerStatus, RuntimeError> {
        let r = within(
            ctx,
            "ContainerStatus",
            self.rt().container_status(request(
                ctx,
                cri::ContainerStatusRequest {
                    container_id: id.into(),
                    verbose: false,
                },
            )),
        )
        .await
        .map_err(|e| not_found_as(e, || RuntimeError::ContainerNotFound { id: id.into() }))?;
        let s = r.status.ok_or_else(|| RuntimeError::CriAnswer {
            call: "ContainerStatus",
            what: format!("no status for container {id}"),
        })?;
        let state = match cri::ContainerState::try_from(s.state) {
            Ok(cri::ContainerState::ContainerRunning) => ContainerState::Running,
            Ok(cri::ContainerState::ContainerExited) => ContainerState::Exited,
            _ => ContainerState::Created,
        };
        let image = s
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default();
        let configured = lock(&self.state)
            .containers
            .get(id)
            .map(|c| c.image.clone())
            .unwrap_or_else(|| image.clone());
        let stop_signal = self
            .effective_stop_signal(
                ctx,
                cri::Signal::try_from(s.stop_signal).unwrap_or(cri::Signal::RuntimeDefault),
                &configured,
            )
            .await;
        Ok(ContainerStatus {
            id: s.id,
            name: s.metadata.map(|m| m.name).unwrap_or_default(),
            state,
            pid: None,
            isolation: None,
            started_at: self.clock.instant(s.started_at),
            finished_at: if state == ContainerState::Exited {
                self.clock.instant(s.finished_at)
            } else {
                None
            },
            exit: (state == ContainerState::Exited).then(|| exit_status(s.exit_code)),
            stop_signal,
            image: Some(image).filter(|i| !i.is_empty()),
            image_ref: Some(s.image_ref).filter(|i| !i.is_empty()),
            reason: Some(s.reason).filter(|r| !r.is_empty()),
        })
    }

    async fn remove_container(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        let r = within(
            ctx,
            "RemoveContainer",
            self.rt().remove_container(request(
                ctx,
                cri::RemoveContainerRequest {
                    container_id: id.into(),
                },
            )),
        )
        .await;
        match r {
            Err(e) if !is_not_found(&e) => Err(e),
            _ => {
                if let Some(c) = lock(&self.state).containers.get_mut(id) {
                    c.exited.store(true, Ordering::SeqCst);
                }
                Ok(())
            }
        }
    }

    fn runtime_type(&self) -> &str {
        &self.version.runtime_name
    }

    fn uses_images(&self) -> bool {
        true
    }

    async fn image_status(
        &self,
        ctx: &CallContext,
        image: &str,
    ) -> Result<Option<ImageInfo>, RuntimeError> {
        let r = within(
            ctx,
            "ImageStatus",
            self.images().image_status(request(
                ctx,
                cri::ImageStatusRequest {
                    image: Some(cri::ImageSpec {
                        image: image.into(),
                        ..Default::default()
                    }),
                    verbose: false,
                },
            )),
        )
        .await?;
        Ok(r.image.map(|i| ImageInfo {
            id: i.id,
            size_bytes: i.size,
        }))
    }

    async fn pull_image(&self, ctx: &CallContext, image: &str) -> Result<String, RuntimeError> {
        // CRI's PullImage is one unary call with no progress; the progress shown is the time
        // it has taken, every 2 s.
        let started = Instant::now();
        let progress = self.progress;
        let ticker = async {
            if !progress {
                return std::future::pending().await;
            }
            eprintln!("pulling image {image:?}");
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                eprintln!(
                    "pulling image {image:?}: {:.0} s so far",
                    started.elapsed().as_secs_f64()
                );
            }
        };
        let mut images = self.images();
        let call = within(
            ctx,
            "PullImage",
            images.pull_image(request(
                ctx,
                cri::PullImageRequest {
                    image: Some(cri::ImageSpec {
                        image: image.into(),
                        ..Default::default()
                    }),
                    auth: None,
                    sandbox_config: None,
                },
            )),
        );
        let r = tokio::select! {
            r = call => r?,
            () = ticker => unreachable!("the ticker never ends"),
        };
        if progress {
            eprintln!(
                "pulled image {image:?} in {:.3} s",
                started.elapsed().as_secs_f64()
            );
        }
        Ok(r.image_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_log_lines_join_partials_per_stream() {
        let mut buf = b"2024-01-01T00:00:00.000000001Z stdout P hel\n2024-01-01T00:00:00.1Z stderr F oops\n2024-01-01T00:00:00.2Z stdout F lo\n2024-01-01T00:00:00.3Z stdout F tail"
            .to_vec();
        let mut partial = [Vec::new(), Vec::new()];
        let lines = parse_cri_log(&mut buf, &mut partial);
        assert_eq!(
            lines,
            vec![
                (Stream::Stderr, "oops".to_string()),
                (Stream::Stdout, "hello".to_string())
            ]
        );
        assert_eq!(buf, b"2024-01-01T00:00:00.3Z stdout F tail");
    }

    #[test]
    fn signals_both_ways() {
        assert_eq!(signal_number(cri::Signal::Sigterm), Some(15));
        assert_eq!(signal_number(cri::Signal::Sigquit), Some(3));
        assert_eq!(signal_number(cri::Signal::Sigwinch), Some(28));
        assert_eq!(signal_number(cri::Signal::RuntimeDefault), None);
        assert_eq!(cri_signal(Some(15)), cri::Signal::Sigterm);
        assert_eq!(cri_signal(Some(6)), cri::Signal::Sigabrt);
        assert_eq!(cri_signal(None), cri::Signal::RuntimeDefault);
        for n in 1..=31 {
            if n == 9 || n == 19 {
                continue;
            }
            let s = cri_signal(Some(n));
            assert_eq!(signal_number(s), Some(n), "signal {n} as {s:?}");
        }
        assert_eq!(parse_stop_signal("SIGQUIT"), Some(3));
        assert_eq!(parse_stop_signal("quit"), Some(3));
        assert_eq!(parse_stop_signal("SIGWINCH"), Some(28));
        assert_eq!(parse_stop_signal("10"), Some(10));
        assert_eq!(parse_stop_signal("SIGNOPE"), None);
    }

    #[test]
    fn owners_are_told_apart_from_reused_pids() {
        let me = owner_id();
        assert!(owner_alive(&me));
        let pid = me.split('.').next().unwrap();
        assert!(
            !owner_alive(&format!("{pid}.1")),
            "same pid, other start time"
        );
        assert!(!owner_alive("4194399.1"), "no such pid");
        assert!(!owner_alive(""));
    }

    #[test]
    fn exit_codes_above_128_are_signals() {
        assert_eq!(exit_status(137), ExitStatus::Signal(9));
        assert_eq!(exit_status(143), ExitStatus::Signal(15));
        assert_eq!(exit_status(0), ExitStatus::Code(0));
        assert_eq!(exit_status(128), ExitStatus::Code(128));
        assert_eq!(exit_status(255), ExitStatus::Code(255));
    }

    #[test]
    fn unix_nanoseconds_to_instants() {
        let c = Clock::now();
        assert_eq!(c.instant(0), None);
        let later = c
            .instant((c.base_unix_ns + 1_500_000_000) as i64)
            .expect("later");
        assert_eq!(later - c.base, Duration::from_millis(1500));
        let earlier = c
            .instant((c.base_unix_ns - 250_000_000) as i64)
            .expect("earlier");
        assert_eq!(c.base - earlier, Duration::from_millis(250));
    }
}
