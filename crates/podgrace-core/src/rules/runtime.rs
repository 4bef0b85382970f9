//! Container runtime rules: which stop signal a container gets, and what `StopContainer(id,
//! timeout)` does in containerd, CRI-O and Docker (moby).
//!
//! Spec: `termination.md` §3.8 (stop signal, KEP-4960) and §6 (StopContainer). Times are whole
//! seconds for timeouts (as in the CRI) and milliseconds (`_ms`) for points on a plan, counted
//! from the moment the StopContainer call starts.

use std::fmt;

/// A Linux signal, kept as its number (`SIGTERM` = 15, `SIGRTMIN` = 34, `SIGRTMAX` = 64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Signal(i32);

/// Lowest real-time signal number as glibc and Go report it on Linux (`SIGRTMIN`).
const RTMIN: i32 = 34;
/// Highest signal number on Linux (`SIGRTMAX`).
const RTMAX: i32 = 64;

/// Classic signal names (without the `SIG` prefix) and their Linux numbers (x86/arm generic
/// numbering), aliases included (`IOT`, `POLL`, `CLD`).
const NAMES: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("IOT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("POLL", 29),
    ("PWR", 30),
    ("SYS", 31),
];

impl Signal {
    /// Signal 1, hangup: nginx and many daemons reload their configuration on it.
    pub const SIGHUP: Signal = Signal(1);
    /// Signal 2, interrupt (what Ctrl-C sends); Python raises `KeyboardInterrupt` on it.
    pub const SIGINT: Signal = Signal(2);
    /// Signal 3, quit: nginx's graceful shutdown (the official nginx image's STOPSIGNAL).
    pub const SIGQUIT: Signal = Signal(3);
    /// Signal 9, kill: cannot be caught; what every runtime sends when the stop timeout ends.
    pub const SIGKILL: Signal = Signal(9);
    /// Signal 10, user-defined 1.
    pub const SIGUSR1: Signal = Signal(10);
    /// Signal 12, user-defined 2.
    pub const SIGUSR2: Signal = Signal(12);
    /// Signal 15, terminate: the default stop signal of every runtime when neither the image's
    /// STOPSIGNAL nor the container's `lifecycle.stopSignal` sets one.
    pub const SIGTERM: Signal = Signal(15);
    /// Signal 19, stop (pause the process): cannot be caught.
    pub const SIGSTOP: Signal = Signal(19);
    /// Signal 28, window change: httpd's graceful stop (the official httpd image's STOPSIGNAL).
    pub const SIGWINCH: Signal = Signal(28);

    /// The signal with Linux number `n`, if `1 <= n <= 64`.
    pub fn from_number(n: i32) -> Option<Signal> {
        (1..=RTMAX).contains(&n).then_some(Signal(n))
    }

    /// The Linux signal number.
    pub fn number(self) -> i32 {
        self.0
    }

    /// The canonical name: `SIGTERM`, `SIGRTMIN`, `SIGRTMIN+3`, `SIGRTMAX-1`, `SIGRTMAX`; numbers
    /// 32 and 33 (reserved by glibc) are shown as `SIG32` / `SIG33`.
    pub fn name(self) -> String {
        if let Some((n, _)) = NAMES.iter().find(|(_, v)| *v == self.0) {
            return format!("SIG{n}");
        }
        match self.0 {
            RTMIN => "SIGRTMIN".to_string(),
            RTMAX => "SIGRTMAX".to_string(),
            n if n > RTMIN && n <= RTMIN + 15 => format!("SIGRTMIN+{}", n - RTMIN),
            n if n > RTMIN + 15 && n < RTMAX => format!("SIGRTMAX-{}", RTMAX - n),
            n => format!("SIG{n}"),
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Why a signal name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseSignalError {
    /// Not a known name, nor a number in 1..=64.
    #[error("invalid signal {0:?}")]
    Unknown(String),
}

impl std::str::FromStr for Signal {
    type Err = ParseSignalError;

    /// See [`parse_signal`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_signal(s)
    }
}

/// Parses a signal written as `SIGTERM`, `TERM`, `sigterm`, `15`, `SIGRTMIN+1`, `RTMAX-2`, or a
/// CRI enum name (`SIGRTMINPLUS1`, `SIGRTMAXMINUS1`).
///
/// Table-driven, after moby's `signal.ParseSignal` (`moby/sys/signal`, used by `docker stop` and
/// image STOPSIGNAL) extended with the CRI enum spellings of `cri-api` `Signal`. Numbers must be
/// within 1..=64 (moby accepts any non-zero number; podgrace refuses what Linux cannot deliver).
///
/// # Errors
/// [`ParseSignalError::Unknown`] for anything else (including `0`, empty and `RUNTIME_DEFAULT`).
pub fn parse_signal(s: &str) -> Result<Signal, ParseSignalError> {
    let unknown = || ParseSignalError::Unknown(s.to_string());
    let t = s.trim();
    if let Ok(n) = t.parse::<i64>() {
        return i32::try_from(n)
            .ok()
            .and_then(Signal::from_number)
            .ok_or_else(unknown);
    }
    let upper = t.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some((_, n)) = NAMES.iter().find(|(name, _)| *name == bare) {
        return Ok(Signal(*n));
    }
    let rt = |base: i32, rest: &str, sign: i32| -> Option<Signal> {
        if rest.is_empty() {
            return Signal::from_number(base);
        }
        let k: i32 = rest.parse().ok()?;
        let n = base.checked_add(sign.checked_mul(k)?)?;
        (RTMIN..=RTMAX).contains(&n).then_some(Signal(n))
    };
    let parsed = if let Some(rest) = bare.strip_prefix("RTMINPLUS") {
        rt(RTMIN, rest, 1).filter(|_| !rest.is_empty())
    } else if let Some(rest) = bare.strip_prefix("RTMAXMINUS") {
        rt(RTMAX, rest, -1).filter(|_| !rest.is_empty())
    } else if let Some(rest) = bare.strip_prefix("RTMIN") {
        match rest.strip_prefix('+') {
            Some(k) => rt(RTMIN, k, 1).filter(|_| !k.is_empty()),
            None if rest.is_empty() => Some(Signal(RTMIN)),
            None => None,
        }
    } else if let Some(rest) = bare.strip_prefix("RTMAX") {
        match rest.strip_prefix('-') {
            Some(k) => rt(RTMAX, k, -1).filter(|_| !k.is_empty()),
            None if rest.is_empty() => Some(Signal(RTMAX)),
            None => None,
        }
    } else {
        None
    };
    parsed.ok_or_else(unknown)
}

/// The CRI enum value that means "let the runtime decide" (`cri-api` `Signal.RUNTIME_DEFAULT`).
pub const CRI_RUNTIME_DEFAULT: &str = "RUNTIME_DEFAULT";

/// Why a CRI `stop_signal` enum value could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertCriSignalError {
    /// Not a value of the CRI `Signal` enum (Go prints those as `Signal(999)`).
    #[error("unknown CRI stop signal {0:?}")]
    Unknown(String),
}

/// Converts a CRI `Signal` enum name to the OCI signal name: `SIGRTMINPLUS1` → `SIGRTMIN+1`,
/// `SIGRTMAXMINUS1` → `SIGRTMAX-1`, others unchanged.
///
/// Upstream: containerd `internal/cri/server/container_stop_signal.go` `convertFromCRISignal`
/// (containerd ≥ 2.3.0, KEP-4960; read at `301026e5`).
///
/// # Errors
/// [`ConvertCriSignalError::Unknown`] for a name that is not a CRI signal (`RUNTIME_DEFAULT` is
/// not a signal either: use [`cri_signal_to_oci_stop_signal`]).
pub fn convert_from_cri_signal(cri_name: &str) -> Result<Signal, ConvertCriSignalError> {
    let t = cri_name.trim();
    let unknown = || ConvertCriSignalError::Unknown(cri_name.to_string());
    // The CRI enum only has SIG-prefixed upper-case names; numbers are not names.
    if !t.starts_with("SIG") || t.bytes().any(|b| b.is_ascii_lowercase()) {
        return Err(unknown());
    }
    if t.contains('+') || t[3..].starts_with("RTMAX-") {
        return Err(unknown());
    }
    parse_signal(t).map_err(|_| unknown())
}

/// The stop signal containerd records for a CRI `ContainerConfig.stop_signal` value:
/// `Ok(None)` for `RUNTIME_DEFAULT` (image STOPSIGNAL or SIGTERM apply later), else the OCI signal.
///
/// Upstream: containerd `internal/cri/server/container_stop_signal.go`
/// `criSignalToOCIStopSignal` (containerd ≥ 2.3.0; read at `301026e5`).
///
/// # Errors
/// [`ConvertCriSignalError::Unknown`] for a value outside the CRI enum.
pub fn cri_signal_to_oci_stop_signal(cri: &str) -> Result<Option<Signal>, ConvertCriSignalError> {
    if cri.trim() == CRI_RUNTIME_DEFAULT {
        return Ok(None);
    }
    convert_from_cri_signal(cri).map(Some)
}

/// The stop signal a CRI runtime sends first: `lifecycle.stopSignal` (CRI `stop_signal`) unless
/// absent or `RUNTIME_DEFAULT`, else the image STOPSIGNAL, else SIGTERM.
///
/// Upstream: containerd `container_stop.go` `stopContainer` with `container_create.go` (the
/// same precedence in CRI-O `server/container_create.go`). `lifecycle.stopSignal` needs the
/// `ContainerStopSignals` gate (alpha since Kubernetes 1.33) and containerd ≥ 2.3.0; on older
/// versions pass `None` for it.
///
/// # Errors
/// [`ParseSignalError`] if the chosen value (spec or image) is not a signal.
pub fn effective_stop_signal(
    lifecycle_stop_signal: Option<&str>,
    image_stop_signal: Option<&str>,
) -> Result<Signal, ParseSignalError> {
    match lifecycle_stop_signal.map(str::trim) {
        Some(s) if !s.is_empty() && s != CRI_RUNTIME_DEFAULT => return parse_signal(s),
        _ => {}
    }
    match image_stop_signal.map(str::trim) {
        Some(s) if !s.is_empty() => parse_signal(s),
        _ => Ok(Signal::SIGTERM),
    }
}

/// moby's stop signal for a container: `Config.StopSignal` if it parses, else SIGTERM
/// (`defaultStopSignal`). An invalid value falls back silently.
///
/// Upstream: moby `daemon/container/container.go` `Container.StopSignal` (read at `b985e231`,
/// Docker 29). The image STOPSIGNAL was merged into `Config.StopSignal` at create time.
pub fn docker_stop_signal(config_stop_signal: &str) -> Signal {
    parse_signal(config_stop_signal).unwrap_or(Signal::SIGTERM)
}

/// The operating system of a node or a Docker daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeOs {
    /// Linux: Docker's default stop timeout is 10 seconds.
    #[default]
    Linux,
    /// Windows: Docker's default stop timeout is 30 seconds.
    Windows,
}

/// Docker's default stop timeout when neither `-t` nor `Config.StopTimeout` is set, in seconds:
/// 10 on Linux, 30 on Windows. Upstream: moby `daemon/config` `DefaultStopTimeout` (`b985e231`).
pub fn docker_default_stop_timeout_seconds(os: NodeOs) -> i64 {
    match os {
        NodeOs::Linux => 10,
        NodeOs::Windows => 30,
    }
}

/// The `reason` containerd's CRI reports for a container whose StartContainer failed (runc
/// could not exec its entry point, a mount failed ...), with exit code 128; kubectl shows it as
/// the pod's STATUS. Source: containerd `pkg/cri/server/container_start.go`
/// (`errorStartReason`, `errorStartExitCode`), containerd 1.6 to 2.x.
pub const CONTAINERD_START_ERROR_REASON: &str = "StartError";

/// The `reason` containerd's CRI reports for an exited container, which the kubelet copies
/// into `state.terminated.reason`: `OOMKilled` when the kernel's OOM killer ended it, else
/// `Completed` for exit code 0 and `Error` for any other (a SIGKILLed container exits 137:
/// `Error`, as recorded on 1.32 in case a; an app that exits 0 on SIGTERM: `Completed`, case d).
///
/// Source: containerd `internal/cri/server/container_status.go` `toCRIContainerStatus`
/// (`completeExitReason`, `errorExitReason`; the OOM reason from the task's OOM event),
/// containerd 1.6 to 2.x.
pub fn containerd_exit_reason(exit_code: i32, oom_killed: bool) -> &'static str {
    if oom_killed {
        "OOMKilled"
    } else if exit_code == 0 {
        "Completed"
    } else {
        "Error"
    }
}

/// What a runtime does at a point of a stop, in milliseconds from the StopContainer call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopStep {
    /// The stop signal is sent to the container's PID 1.
    Signal {
        /// When, in milliseconds from the StopContainer call.
        at_ms: i64,
        /// The stop signal sent (the image's STOPSIGNAL, `lifecycle.stopSignal` or SIGTERM).
        signal: Signal,
    },
    /// SIGKILL is sent if the container has not exited yet.
    Kill {
        /// When, in milliseconds from the StopContainer call.
        at_ms: i64,
    },
    /// The runtime stops waiting for the exit (Docker's bounded waits after SIGKILL).
    GiveUp {
        /// When, in milliseconds from the StopContainer call.
        at_ms: i64,
    },
}

/// The container runtimes podgrace models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// containerd's CRI plugin (`internal/cri/server/container_stop.go`, containerd 1.6 to 2.x).
    Containerd,
    /// CRI-O (`internal/oci/runtime_oci.go`, 1.36).
    CriO,
    /// Docker (moby, Docker 29), as cri-dockerd or `docker stop` drive it.
    Docker,
}

impl Runtime {
    /// The steps of ONE first StopContainer call with `timeout_s` seconds and the given stop
    /// signal, for a container that does not exit by itself. Times in milliseconds from the call.
    ///
    /// * containerd (`internal/cri/server/container_stop.go` `stopContainer`, 2.x): timeout > 0
    ///   → signal at 0, SIGKILL at timeout; timeout ≤ 0 → SIGKILL at 0 without a stop signal;
    ///   then waits for the exit with no internal cap.
    /// * CRI-O (`internal/oci/runtime_oci.go` `StopLoopForContainer`, 1.36): signal at 0 even for
    ///   timeout 0; SIGKILL (repeated with back-off) from `max(timeout, 0)`.
    /// * Docker (`daemon/stop.go` `containerStop`, `daemon/kill.go`, Docker 29, Linux): signal
    ///   at 0; a negative timeout waits forever (no SIGKILL); otherwise SIGKILL at timeout, a
    ///   direct kill after 10 s more, and a last 2 s wait.
    pub fn stop_plan(self, timeout_s: i64, signal: Signal) -> Vec<StopStep> {
        let at = |s: i64| s.saturating_mul(1000);
        match self {
            Runtime::Containerd if timeout_s <= 0 => vec![StopStep::Kill { at_ms: 0 }],
            Runtime::Containerd => {
                vec![
                    StopStep::Signal { at_ms: 0, signal },
                    StopStep::Kill {
                        at_ms: at(timeout_s),
                    },
                ]
            }
            Runtime::CriO => vec![
                StopStep::Signal { at_ms: 0, signal },
                StopStep::Kill {
                    at_ms: at(timeout_s.max(0)),
                },
            ],
            Runtime::Docker => docker_stop_plan(Some(timeout_s), signal, NodeOs::Linux),
        }
    }
}

/// The steps of `docker stop` (API `ContainerStop`), in milliseconds from the call, for a
/// container that ignores its stop signal. `timeout_s` `None` means the daemon default
/// ([`docker_default_stop_timeout_seconds`]). Negative waits forever: no SIGKILL.
///
/// Upstream: moby `daemon/stop.go` `containerStop` and `daemon/kill.go` `Kill` (Docker 29,
/// `b985e231`): after SIGKILL it waits up to 10 s (Linux; 75 s Windows), kills the process
/// directly, then waits 2 s more. Cancelling the API request does not cancel the stop.
pub fn docker_stop_plan(timeout_s: Option<i64>, signal: Signal, os: NodeOs) -> Vec<StopStep> {
    let timeout = timeout_s.unwrap_or_else(|| docker_default_stop_timeout_seconds(os));
    let mut steps = vec![StopStep::Signal { at_ms: 0, signal }];
    if timeout < 0 {
        return steps;
    }
    let kill = timeout.saturating_mul(1000);
    let after_kill_ms = match os {
        NodeOs::Linux => 10_000,
        NodeOs::Windows => 75_000,
    };
    steps.push(StopStep::Kill { at_ms: kill });
    steps.push(StopStep::Kill {
        at_ms: kill.saturating_add(after_kill_ms),
    });
    steps.push(StopStep::GiveUp {
        at_ms: kill.saturating_add(after_kill_ms).saturating_add(2000),
    });
    steps
}

/// containerd's per-container stop state: the stop signal goes out once per container
/// (`IsStopSignaledWithTimeout`), whatever the number of StopContainer calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerdStopState {
    stop_signaled: bool,
}

impl ContainerdStopState {
    /// `true` once a StopContainer with timeout > 0 has sent the stop signal.
    pub fn stop_signaled(&self) -> bool {
        self.stop_signaled
    }

    /// One StopContainer call with `timeout_s` seconds; the steps are in milliseconds from this
    /// call. A second call with timeout > 0 sends no signal and only waits; timeout ≤ 0 is an
    /// immediate SIGKILL.
    ///
    /// Upstream: containerd `internal/cri/server/container_stop.go` `stopContainer` (2.x).
    pub fn stop_container(&mut self, timeout_s: i64, signal: Signal) -> Vec<StopStep> {
        if timeout_s <= 0 {
            return vec![StopStep::Kill { at_ms: 0 }];
        }
        let mut steps = Vec::with_capacity(2);
        if !self.stop_signaled {
            self.stop_signaled = true;
            steps.push(StopStep::Signal { at_ms: 0, signal });
        }
        steps.push(StopStep::Kill {
            at_ms: timeout_s.saturating_mul(1000),
        });
        steps
    }
}

/// Why containerd's wait for a container's exit ended without the exit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitContainerStopError {
    /// The caller's context was cancelled.
    #[error("wait container: context canceled")]
    Cancelled,
    /// The caller's context deadline passed (after `after_ms` milliseconds).
    #[error("wait container: context deadline exceeded after {after_ms} ms")]
    DeadlineExceeded {
        /// Milliseconds waited before the deadline passed.
        after_ms: i64,
    },
}

/// containerd's wait for a stopping container: returns the milliseconds waited once it has
/// exited, or an error when the caller's context ends first. The error is returned as is: no
/// SIGKILL follows it.
///
/// `exits_after_ms`: when the container exits (`Some(0)` = already exited, `None` = never);
/// `ctx_deadline_ms`: the caller's deadline (`None` = none); `ctx_cancelled`: cancelled already.
///
/// Upstream: containerd `internal/cri/server/container_stop.go` `waitContainerStop` (2.x).
///
/// # Errors
/// [`WaitContainerStopError`] as above. An already exited container wins over a cancelled
/// context only if it exited before the call (`Some(0)`).
pub fn containerd_wait_container_stop(
    exits_after_ms: Option<i64>,
    ctx_deadline_ms: Option<i64>,
    ctx_cancelled: bool,
) -> Result<i64, WaitContainerStopError> {
    match (exits_after_ms, ctx_deadline_ms) {
        (Some(e), _) if e <= 0 => Ok(0),
        _ if ctx_cancelled => Err(WaitContainerStopError::Cancelled),
        (Some(e), Some(d)) if e <= d => Ok(e),
        (Some(e), None) => Ok(e),
        (_, Some(d)) => Err(WaitContainerStopError::DeadlineExceeded { after_ms: d.max(0) }),
        // Never exits and no deadline: upstream blocks forever; report the never-ending wait
        // as a deadline at i64::MAX.
        (None, None) => Err(WaitContainerStopError::DeadlineExceeded { after_ms: i64::MAX }),
    }
}

/// CRI-O's per-container stop loop: the first StopContainer starts it and sends the stop signal
/// at once (even for timeout 0); every call may move the SIGKILL deadline earlier, never later.
///
/// Upstream: CRI-O `internal/oci/runtime_oci.go` `StopContainer` / `StopLoopForContainer` and
/// `internal/oci/container.go` `WaitOnStopTimeout` (1.36).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrioStopLoop {
    /// SIGKILL deadline in milliseconds on the caller's clock; `None` before the first call.
    kill_at_ms: Option<i64>,
}

impl CrioStopLoop {
    /// One StopContainer call made at `now_ms` (milliseconds, any fixed origin) with `timeout_s`
    /// seconds. Returns the steps it adds (times on the same clock as `now_ms`).
    pub fn stop_container(&mut self, now_ms: i64, timeout_s: i64, signal: Signal) -> Vec<StopStep> {
        let target = now_ms.saturating_add(timeout_s.max(0).saturating_mul(1000));
        match self.kill_at_ms {
            None => {
                self.kill_at_ms = Some(target);
                vec![
                    StopStep::Signal {
                        at_ms: now_ms,
                        signal,
                    },
                    StopStep::Kill { at_ms: target },
                ]
            }
            Some(old) if target < old => {
                self.kill_at_ms = Some(target);
                vec![StopStep::Kill { at_ms: target }]
            }
            Some(_) => Vec::new(),
        }
    }

    /// The current SIGKILL deadline (milliseconds), once a call was made.
    pub fn kill_at_ms(&self) -> Option<i64> {
        self.kill_at_ms
    }
}

/// The stop signal of a container as the kubelet and containerd settle it: `lifecycle.stopSignal`
/// (KEP-4960) if set, else the image's STOPSIGNAL (known for the official images of
/// [`image_stop_signal`]; podgrace cannot pull images), else SIGTERM.
///
/// # Errors
/// [`ParseSignalError`] for a `lifecycle.stopSignal` that is not a signal name.
///
/// Upstream: containerd `internal/cri/server/container_stop.go` `stopContainer` (precedence),
/// `container_create.go` (image STOPSIGNAL captured at create time).
pub fn container_stop_signal(
    lifecycle_stop_signal: Option<&str>,
    image: Option<&str>,
) -> Result<Signal, ParseSignalError> {
    let from_image = image.and_then(image_stop_signal).map(|s| s.to_string());
    effective_stop_signal(lifecycle_stop_signal, from_image.as_deref())
}

/// The image's STOPSIGNAL of a container, by name: the one a runtime read from the image's
/// config ([`crate::plan::ContainerPlan::image_config_stop_signal`], `--image-source
/// containerd`), else the table of known official images ([`image_stop_signal`]). `None`: none
/// known (SIGTERM applies).
pub fn container_image_stop_signal(c: &crate::plan::ContainerPlan) -> Option<String> {
    match &c.image_config_stop_signal {
        Some(read) => read.clone(),
        None => c
            .image
            .as_deref()
            .and_then(image_stop_signal)
            .map(|s| s.to_string()),
    }
}

/// [`container_stop_signal`] of a container, its image's STOPSIGNAL from
/// [`container_image_stop_signal`].
///
/// # Errors
/// As [`container_stop_signal`].
pub fn stop_signal_of(c: &crate::plan::ContainerPlan) -> Result<Signal, ParseSignalError> {
    effective_stop_signal(
        c.stop_signal.as_deref(),
        container_image_stop_signal(c).as_deref(),
    )
}

/// The STOPSIGNAL of a well-known official image, when its Dockerfile sets one.
///
///
/// Matches `nginx`, `nginx:1.27`, `docker.io/library/nginx:1.27-alpine`, `nginx@sha256:...`.
/// Only entries checked against the image's Dockerfile are listed (evidence per entry below);
/// anything else is `None`, which means "not known", not "SIGTERM".
pub fn image_stop_signal(image: &str) -> Option<Signal> {
    let (repo, tag) = split_image_reference(image)?;
    let tag_has = |word: &str| tag.split(['-', '.']).any(|t| t == word);
    match repo.as_str() {
        // nginxinc/docker-nginx mainline/debian/Dockerfile: `STOPSIGNAL SIGQUIT`, since commit
        // 3fb70dd (2020-11-24, PR #457; nginx 1.19.5). Older version tags stop with SIGTERM.
        "library/nginx" if tag_version(&tag).is_some_and(|v| v < (1, 19, 5)) => None,
        "library/nginx" => Some(Signal::SIGQUIT),
        // nginxinc/docker-nginx-unprivileged mainline/debian/Dockerfile: `STOPSIGNAL SIGQUIT`.
        "nginxinc/nginx-unprivileged" => Some(Signal::SIGQUIT),
        // docker-library/httpd 2.4/Dockerfile: `STOPSIGNAL SIGWINCH` (graceful-stop).
        "library/httpd" => Some(Signal::SIGWINCH),
        // docker-library/haproxy 3.2/Dockerfile: `STOPSIGNAL SIGUSR1` (graceful stop).
        "library/haproxy" => Some(Signal::SIGUSR1),
        // docker-library/php 8.3/bookworm/apache/Dockerfile: `STOPSIGNAL SIGWINCH`;
        // 8.3/bookworm/fpm/Dockerfile: `STOPSIGNAL SIGQUIT`. The cli variants set none.
        "library/php" if tag_has("apache") => Some(Signal::SIGWINCH),
        "library/php" if tag_has("fpm") => Some(Signal::SIGQUIT),
        _ => None,
    }
}

/// Splits an image reference into its Docker Hub repository path (`library/nginx`) and tag
/// (`latest` if absent). `None` for images of other registries or an empty reference.
/// The version at the start of an image tag (`1.19.0-alpine` → 1.19.0), if it has one.
fn tag_version(tag: &str) -> Option<(u32, u32, u32)> {
    let mut nums = tag
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()?
        .split('.')
        .map(|n| n.parse::<u32>().ok());
    let major = nums.next()??;
    let minor = nums.next().flatten().unwrap_or(0);
    let patch = nums.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

fn split_image_reference(image: &str) -> Option<(String, String)> {
    let image = image.trim();
    let without_digest = image.split('@').next().unwrap_or(image);
    if without_digest.is_empty() {
        return None;
    }
    let (name, tag) = match without_digest.rfind(':') {
        Some(i) if !without_digest[i..].contains('/') => {
            (&without_digest[..i], &without_digest[i + 1..])
        }
        _ => (without_digest, "latest"),
    };
    let mut parts: Vec<&str> = name.split('/').collect();
    if parts.len() > 1 {
        let first = parts[0];
        if first.contains('.') || first.contains(':') || first == "localhost" {
            // Docker Hub itself and Google's pull-through mirror of it.
            if !matches!(
                first,
                "docker.io" | "index.docker.io" | "registry-1.docker.io" | "mirror.gcr.io"
            ) {
                return None;
            }
            parts.remove(0);
        }
    }
    let repo = match parts.as_slice() {
        [one] => format!("library/{one}"),
        _ => parts.join("/"),
    };
    if repo.is_empty() || repo.ends_with('/') {
        return None;
    }
    Some((repo.to_ascii_lowercase(), tag.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling() {
        for s in ["SIGTERM", "TERM", "sigterm", "15", " SIGTERM "] {
            assert_eq!(parse_signal(s), Ok(Signal::SIGTERM), "{s}");
        }
        assert_eq!(parse_signal("SIGRTMIN+1").unwrap().number(), 35);
        assert_eq!(parse_signal("SIGRTMINPLUS1").unwrap().name(), "SIGRTMIN+1");
        assert_eq!(parse_signal("SIGRTMAXMINUS1").unwrap().name(), "SIGRTMAX-1");
        assert_eq!(parse_signal("RTMAX").unwrap().number(), 64);
        assert_eq!(
            parse_signal("SIGIOT").unwrap(),
            parse_signal("SIGABRT").unwrap()
        );
        for bad in [
            "",
            "0",
            "65",
            "-1",
            "NOSUCHSIGNAL",
            "SIGRTMIN+31",
            "RTMAX-31",
            "RTMIN+",
            "SIG",
        ] {
            assert!(parse_signal(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_round_trip() {
        for n in 1..=64 {
            let s = Signal::from_number(n).unwrap();
            if n == 32 || n == 33 {
                continue;
            }
            assert_eq!(parse_signal(&s.name()), Ok(s), "{n}");
        }
        assert_eq!(Signal::SIGWINCH.to_string(), "SIGWINCH");
    }

    #[test]
    fn cri_conversion() {
        assert_eq!(cri_signal_to_oci_stop_signal("RUNTIME_DEFAULT"), Ok(None));
        assert_eq!(
            cri_signal_to_oci_stop_signal("SIGQUIT"),
            Ok(Some(Signal::SIGQUIT))
        );
        assert!(cri_signal_to_oci_stop_signal("Signal(999)").is_err());
        assert!(convert_from_cri_signal("SIGRTMIN+1").is_err());
        assert!(convert_from_cri_signal("15").is_err());
    }

    #[test]
    fn stop_signal_precedence() {
        assert_eq!(
            effective_stop_signal(Some("SIGUSR1"), Some("SIGQUIT")),
            Ok(Signal::SIGUSR1)
        );
        assert_eq!(
            effective_stop_signal(Some("RUNTIME_DEFAULT"), Some("SIGQUIT")),
            Ok(Signal::SIGQUIT)
        );
        assert_eq!(effective_stop_signal(None, None), Ok(Signal::SIGTERM));
        assert!(effective_stop_signal(None, Some("BOGUS")).is_err());
        assert_eq!(docker_stop_signal("BOGUS"), Signal::SIGTERM);
    }

    #[test]
    fn containerd_signals_once_and_kills_at_zero() {
        let mut st = ContainerdStopState::default();
        assert_eq!(
            st.stop_container(0, Signal::SIGTERM),
            vec![StopStep::Kill { at_ms: 0 }]
        );
        assert!(!st.stop_signaled());
        let first = st.stop_container(30, Signal::SIGTERM);
        assert_eq!(first.len(), 2);
        assert_eq!(
            st.stop_container(5, Signal::SIGTERM),
            vec![StopStep::Kill { at_ms: 5000 }]
        );
        assert_eq!(
            containerd_wait_container_stop(None, Some(200), false),
            Err(WaitContainerStopError::DeadlineExceeded { after_ms: 200 })
        );
        assert_eq!(
            containerd_wait_container_stop(Some(50), Some(200), false),
            Ok(50)
        );
    }

    #[test]
    fn crio_signals_at_timeout_zero_and_only_shortens() {
        let mut l = CrioStopLoop::default();
        let s = l.stop_container(0, 0, Signal::SIGTERM);
        assert_eq!(
            s[0],
            StopStep::Signal {
                at_ms: 0,
                signal: Signal::SIGTERM
            }
        );
        let mut l = CrioStopLoop::default();
        l.stop_container(0, 30, Signal::SIGTERM);
        assert!(l.stop_container(1000, 60, Signal::SIGTERM).is_empty());
        assert_eq!(l.kill_at_ms(), Some(30_000));
        assert_eq!(
            l.stop_container(2000, 2, Signal::SIGTERM),
            vec![StopStep::Kill { at_ms: 4000 }]
        );
    }

    #[test]
    fn docker_plan() {
        let p = docker_stop_plan(None, Signal::SIGTERM, NodeOs::Linux);
        assert_eq!(p[1], StopStep::Kill { at_ms: 10_000 });
        assert_eq!(p[3], StopStep::GiveUp { at_ms: 22_000 });
        assert_eq!(
            docker_stop_plan(Some(-1), Signal::SIGTERM, NodeOs::Linux).len(),
            1
        );
        assert_eq!(
            Runtime::Containerd.stop_plan(-3, Signal::SIGTERM),
            vec![StopStep::Kill { at_ms: 0 }]
        );
        assert_eq!(
            Runtime::CriO.stop_plan(0, Signal::SIGQUIT)[1],
            StopStep::Kill { at_ms: 0 }
        );
    }

    #[test]
    fn image_stop_signals() {
        assert_eq!(image_stop_signal("nginx"), Some(Signal::SIGQUIT));
        assert_eq!(image_stop_signal("nginx:1.27"), Some(Signal::SIGQUIT));
        assert_eq!(image_stop_signal("nginx:1.19.5"), Some(Signal::SIGQUIT));
        assert_eq!(
            image_stop_signal("nginx:1.19.0"),
            None,
            "before docker-nginx PR #457"
        );
        assert_eq!(image_stop_signal("nginx:1.15-alpine"), None);
        assert_eq!(
            image_stop_signal("nginx:stable-alpine"),
            Some(Signal::SIGQUIT)
        );
        assert_eq!(
            image_stop_signal("mirror.gcr.io/library/nginx:1.27"),
            Some(Signal::SIGQUIT)
        );
        assert_eq!(
            image_stop_signal("docker.io/library/nginx:1.27-alpine"),
            Some(Signal::SIGQUIT)
        );
        assert_eq!(
            image_stop_signal("nginx@sha256:abcd"),
            Some(Signal::SIGQUIT)
        );
        assert_eq!(
            image_stop_signal("nginxinc/nginx-unprivileged:stable"),
            Some(Signal::SIGQUIT)
        );
        assert_eq!(image_stop_signal("httpd:2.4"), Some(Signal::SIGWINCH));
        assert_eq!(image_stop_signal("php:8.3-apache"), Some(Signal::SIGWINCH));
        assert_eq!(
            image_stop_signal("php:8.3-fpm-alpine"),
            Some(Signal::SIGQUIT)
        );
        assert_eq!(image_stop_signal("php:8.3-cli"), None);
        assert_eq!(image_stop_signal("ghcr.io/library/nginx"), None);
        assert_eq!(image_stop_signal("localhost:5000/nginx"), None);
        assert_eq!(image_stop_signal("busybox"), None);
        assert_eq!(image_stop_signal(""), None);
    }
}
