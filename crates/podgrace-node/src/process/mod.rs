//! Container processes: spawning, the reaper, signalling through pidfds, whole-container kill,
//! and exec inside a running container.
//!
//! # Modes
//! * **Namespaced** (root or `CAP_SYS_ADMIN`): the entry process is PID 1 of a new PID
//!   namespace with its own mount namespace and a private `/proc` mounted, so `kill -TERM 1`
//!   in a preStop hook addresses the container's PID 1 and a PID 1 without a handler ignores
//!   SIGTERM, as in a real container. When PID 1 exits the kernel kills everything else in the
//!   namespace (containerd relies on the same rule).
//! * **Host** (fallback, chosen once per process and logged once): a plain host process that
//!   leads its own session; when it exits, its process group is SIGKILLed. Processes that
//!   leave the group (`setsid`) escape this; the namespaced mode has no such hole.
//!
//! In both modes a container (and an exec in it) leads its own session, as under a container
//! runtime, so a terminal's Ctrl-C (SIGINT to podgrace's foreground process group) reaches
//! podgrace alone, which deletes the pod.
//!
//! # Lifetime
//! Every child is forked from one long-lived thread with `PR_SET_PDEATHSIG(SIGKILL)`, so if
//! podgrace dies (even by SIGKILL) each container's PID 1 is killed, and with it its PID
//! namespace. A child that finds podgrace already dead before exec does not start.
//!
//! # Waiting
//! Only the [reaper](reaper) waits; an exit is published to any number of waiters. Every
//! process (container, exec of a probe or hook) is registered with it on the spawner
//! thread right after its fork, so it is reaped whatever happens to the task that started it:
//! a caller that is cancelled or times out before it got the process leaves it SIGKILLed and
//! reaped, never running and never an unreaped zombie.

mod clone;
mod reaper;
mod spawner;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fd::{AsFd, OwnedFd};
use rustix::process::{pidfd_send_signal, Pid, Signal};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::{mpsc, watch};

pub use reaper::Exit;
use spawner::{on_spawner, spawn_here, ChildSetup, Placement, SpawnRequest};

/// Errors of the process module. Each names the failing operation and the pid or path involved.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The spawner thread (which forks the containers) could not be started.
    #[error("starting the spawner thread: {reason}")]
    StartSpawner {
        /// Why.
        reason: String,
    },
    /// The reaper (the one waiter for every child) could not be started.
    #[error("starting the reaper: {reason}")]
    StartReaper {
        /// Why.
        reason: String,
    },
    /// fork/exec of a container's process or an exec command failed.
    #[error("spawning {argv:?}: {source}")]
    Spawn {
        /// The command line.
        argv: Vec<String>,
        /// The OS error.
        source: std::io::Error,
    },
    /// `pidfd_open(2)` of a new process failed.
    #[error("pidfd_open({pid}): {source}")]
    PidfdOpen {
        /// The host pid.
        pid: i32,
        /// The OS error.
        source: std::io::Error,
    },
    /// A namespace file of `/proc/PID/ns` could not be opened (exec into a container).
    #[error("opening namespace {path}: {source}")]
    OpenNamespace {
        /// The namespace file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The reaper could not watch a new process.
    #[error("registering pid {pid} with the reaper: {source}")]
    Register {
        /// The host pid.
        pid: i32,
        /// The OS error.
        source: std::io::Error,
    },
    /// `pidfd_send_signal(2)` failed (the process still exists).
    #[error("sending signal {signal} to pid {pid}: {source}")]
    Signal {
        /// The host pid.
        pid: i32,
        /// The Linux signal number.
        signal: i32,
        /// The OS error.
        source: std::io::Error,
    },
    /// A signal number Linux does not have.
    #[error("signal number {signal} is not a valid signal")]
    InvalidSignal {
        /// The number given.
        signal: i32,
    },
    /// A process's stdout or stderr pipe could not be read.
    #[error("reading output of pid {pid}: {source}")]
    ReadOutput {
        /// The host pid.
        pid: i32,
        /// The OS error.
        source: std::io::Error,
    },
    /// An exec command ran past its timeout and was killed.
    #[error("exec {argv:?} in pid {pid} timed out after {timeout_ms} ms")]
    ExecTimeout {
        /// The exec's host pid.
        pid: i32,
        /// The command line.
        argv: Vec<String>,
        /// The timeout, in milliseconds.
        timeout_ms: u128,
    },
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
    /// Collected by someone other than the reaper (should not happen).
    Unknown,
}

impl ExitStatus {
    /// The code a container runtime reports: the exit code, or 128 + signal (137 for SIGKILL).
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
            ExitStatus::Unknown => 255,
        }
    }
}

/// Which isolation a container actually got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// PID 1 of its own PID namespace, own mount namespace, private `/proc`.
    Namespaced,
    /// A plain host process in its own session (fallback).
    Host,
}

/// Whether containers will run [`Isolation::Namespaced`]. Probed once per process; the
/// fallback is logged once (a `tracing` warning).
pub fn namespaces_permitted() -> bool {
    spawner::namespaces_permitted()
}

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// File descriptor 1.
    Stdout,
    /// File descriptor 2.
    Stderr,
}

/// One line of a container's output, without its trailing newline (invalid UTF-8 replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    /// The container's name as given in [`ContainerSpec::name`].
    pub container: String,
    /// Which stream it was written to.
    pub stream: Stream,
    /// The text.
    pub line: String,
}

/// What to run as a container's entry process.
#[derive(Debug, Clone, Default)]
pub struct ContainerSpec {
    /// Name used in output lines and logs.
    pub name: String,
    /// `command` + `args`; the first element is looked up in `PATH`.
    pub argv: Vec<String>,
    /// Environment, in order. The host environment is not inherited; `PATH` defaults to
    /// containerd's `/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`.
    pub env: Vec<(String, String)>,
    /// Working directory (default: podgrace's own).
    pub working_dir: Option<PathBuf>,
    /// A network namespace to join (the pod sandbox's), e.g. `/run/netns/<name>`;
    /// `None` keeps the host network.
    pub netns: Option<PathBuf>,
    /// Ask for host mode even when namespaces are permitted (tests, `--no-namespaces`).
    pub force_host: bool,
    /// The `cgroup.procs` files of the container's cgroup (one per hierarchy): PID 1 and
    /// every exec join it before exec, as under runc. Empty: podgrace's own cgroup.
    pub cgroup_procs: Vec<PathBuf>,
    /// PID 1's `oom_score_adj` (-1000..=1000), set before exec; `None`: inherited.
    pub oom_score_adj: Option<i64>,
}

/// A running (or exited) container entry process.
///
/// Dropping the handle does not kill the process; [`ContainerProcess::kill`] does, and
/// podgrace's death does.
#[derive(Debug, Clone)]
pub struct ContainerProcess {
    name: String,
    pid: i32,
    pidfd: Arc<OwnedFd>,
    isolation: Isolation,
    /// `[pid, mnt, net]` namespaces of PID 1, opened at spawn time.
    /// `None` when PID 1 exited before its namespaces could be opened.
    ns: Option<Arc<[OwnedFd; 3]>>,
    /// PID 1's network namespace is podgrace's own (no pod network, or `hostNetwork`): an exec
    /// does not need to join it, which takes a privilege the fallback mode does not have.
    host_netns: bool,
    /// The container's cgroup, which every exec joins.
    exec_setup: Option<Arc<ChildSetup>>,
    exit: watch::Receiver<Option<Exit>>,
    started_at: Instant,
}

fn signal_from_raw(signal: i32) -> Result<Signal, ProcessError> {
    match Signal::from_named_raw(signal) {
        Some(s) => Ok(s),
        None => {
            // Real-time signals (SIGRTMIN..SIGRTMAX as the kernel numbers them, 32..=64).
            if (32..=64).contains(&signal) {
                // SAFETY: a valid kernel signal number; it is only sent, never handled here.
                Ok(unsafe { Signal::from_raw_unchecked(signal) })
            } else {
                Err(ProcessError::InvalidSignal { signal })
            }
        }
    }
}

impl ContainerProcess {
    /// Spawns a container's entry process. Output lines go to `output` (if given) until both
    /// streams close. Errors: [`ProcessError::Spawn`] (missing binary, bad working dir,
    /// namespace setup), [`ProcessError::PidfdOpen`], [`ProcessError::Register`].
    pub async fn spawn(
        spec: ContainerSpec,
        output: Option<mpsc::UnboundedSender<OutputLine>>,
    ) -> Result<ContainerProcess, ProcessError> {
        let namespaced = !spec.force_host && namespaces_permitted();
        let netns = match &spec.netns {
            Some(path) => Some(Arc::new(
                std::fs::File::open(path)
                    .map(OwnedFd::from)
                    .map_err(|source| ProcessError::OpenNamespace {
                        path: path.clone(),
                        source,
                    })?,
            )),
            None => None,
        };
        let on_exit: Option<reaper::OnExit> = if namespaced {
            None
        } else {
            // Whole-container kill in host mode: what is left in PID 1's process group.
            Some(Box::new(|pid| {
                if let Some(pgid) = Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
                }
            }))
        };
        let open_procs = || -> Result<Vec<OwnedFd>, ProcessError> {
            spec.cgroup_procs
                .iter()
                .map(|p| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(p)
                        .map(OwnedFd::from)
                        .map_err(|source| ProcessError::Spawn {
                            argv: spec.argv.clone(),
                            source: std::io::Error::new(
                                source.kind(),
                                format!("joining the cgroup {}: {source}", p.display()),
                            ),
                        })
                })
                .collect()
        };
        let setup = (!spec.cgroup_procs.is_empty() || spec.oom_score_adj.is_some()).then(|| {
            Ok::<_, ProcessError>(Arc::new(ChildSetup {
                cgroup_procs: open_procs()?,
                oom_score_adj: spec.oom_score_adj.map(|v| v.to_string().into_bytes()),
            }))
        });
        let setup = setup.transpose()?;
        let exec_setup = if spec.cgroup_procs.is_empty() {
            None
        } else {
            Some(Arc::new(ChildSetup {
                cgroup_procs: open_procs()?,
                oom_score_adj: None,
            }))
        };
        let req = SpawnRequest {
            argv: spec.argv.clone(),
            env: spec.env.clone(),
            cwd: spec.working_dir.clone(),
            placement: Placement::Container { namespaced, netns },
            setup,
            on_exit,
        };
        let queued = Instant::now();
        let mut spawned = on_spawner(move |st| {
            let picked = Instant::now();
            let r = spawn_here(st, req);
            tracing::debug!(target: "podgrace::start", queued_us = picked.duration_since(queued).as_micros() as u64, fork_us = picked.elapsed().as_micros() as u64, "spawned");
            r
        })
        .await??;
        let pid = spawned.pid;
        let pidfd = Arc::clone(&spawned.pidfd);
        let exit = spawned.exit.clone();
        let isolation = if namespaced {
            Isolation::Namespaced
        } else {
            Isolation::Host
        };
        tracing::debug!(container = %spec.name, pid, ?isolation, "container started");
        if let Some(tx) = output {
            forward_lines(
                spec.name.clone(),
                Stream::Stdout,
                spawned.stdout,
                tx.clone(),
            );
            forward_lines(spec.name.clone(), Stream::Stderr, spawned.stderr, tx);
        } else {
            drain(spawned.stdout);
            drain(spawned.stderr);
        }
        spawned.guard.disarm();
        let host_netns = spawned
            .ns
            .as_ref()
            .is_some_and(|ns| same_namespace(&ns[2], "/proc/self/ns/net"));
        Ok(ContainerProcess {
            name: spec.name,
            pid,
            pidfd,
            isolation,
            ns: spawned.ns.map(Arc::new),
            host_netns,
            exec_setup,
            exit,
            started_at: Instant::now(),
        })
    }

    /// The container's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// PID 1's pid as seen from the host.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Which isolation this container got.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// When it was spawned (monotonic).
    pub fn started_at(&self) -> Instant {
        self.started_at
    }

    /// Sends `signal` (a Linux signal number, e.g. 15) to PID 1 only, through its pidfd (never to
    /// a process group; containerd's `task.Kill` without `--all`). Returns `Ok(false)` if the
    /// process had already been collected, `Ok(true)` if the signal was sent.
    /// Errors: [`ProcessError::InvalidSignal`], [`ProcessError::Signal`].
    pub fn signal(&self, signal: i32) -> Result<bool, ProcessError> {
        let sig = signal_from_raw(signal)?;
        match pidfd_send_signal(self.pidfd.as_fd(), sig) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::SRCH) => Ok(false),
            Err(e) => Err(ProcessError::Signal {
                pid: self.pid,
                signal,
                source: e.into(),
            }),
        }
    }

    /// Arms `signal` for PID 1 at `at`, sent by the node's deadline thread in one batch with
    /// everything else due then ([`crate::deadlines`]); dropping the handle cancels it. `None`
    /// if the deadline thread could not be started. Errors: [`ProcessError::InvalidSignal`].
    pub fn signal_at(
        &self,
        at: Instant,
        signal: i32,
    ) -> Result<Option<crate::deadlines::Armed>, ProcessError> {
        let sig = signal_from_raw(signal)?;
        Ok(crate::deadlines::signal_at(
            at,
            Arc::clone(&self.pidfd),
            sig,
        ))
    }

    /// SIGKILL to PID 1 (the rest of the container follows, see the module docs).
    pub fn kill(&self) -> Result<bool, ProcessError> {
        self.signal(Signal::KILL.as_raw())
    }

    /// The exit, if the reaper has collected it.
    pub fn try_exit(&self) -> Option<Exit> {
        *self.exit.borrow()
    }

    /// Waits until the whole container has exited (in namespaced mode the reaper sees PID 1's
    /// exit only after everything else in the namespace is gone).
    pub async fn wait(&self) -> Exit {
        let mut rx = self.exit.clone();
        loop {
            if let Some(exit) = *rx.borrow_and_update() {
                return exit;
            }
            if rx.changed().await.is_err() {
                // The reaper never drops a sender before publishing; treat as unknown.
                return Exit {
                    status: ExitStatus::Unknown,
                    at: Instant::now(),
                };
            }
        }
    }

    /// Runs `argv` inside this container: same PID, mount (so the container's `/proc`) and
    /// network namespaces in namespaced mode; in host mode the container's network namespace
    /// (unless it is podgrace's own) and, where the kernel allows it, its process group (else a
    /// session of its own, so that a terminal's Ctrl-C still reaches podgrace only). Output is
    /// collected whole. `timeout` bounds the run (`None`: unbounded); on timeout, or when the
    /// returned future is dropped, the exec process is SIGKILLed. Mirrors CRI `ExecSync`.
    /// Errors: [`ProcessError::Spawn`] (e.g. missing binary), [`ProcessError::ExecTimeout`].
    pub async fn exec(
        &self,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        working_dir: Option<PathBuf>,
        timeout: Option<Duration>,
    ) -> Result<ExecOutput, ProcessError> {
        let Some(ns) = &self.ns else {
            return Err(ProcessError::OpenNamespace {
                path: format!("/proc/{}/ns", self.pid).into(),
                source: std::io::Error::other("the container's PID 1 has exited"),
            });
        };
        let placement = match self.isolation {
            Isolation::Namespaced => Placement::Exec {
                pidns: Some(Arc::new(dup(&ns[0], self.pid)?)),
                mntns: Some(Arc::new(dup(&ns[1], self.pid)?)),
                netns: Some(Arc::new(dup(&ns[2], self.pid)?)),
                pgid: None,
            },
            Isolation::Host => Placement::Exec {
                pidns: None,
                mntns: None,
                // Joining a network namespace takes CAP_SYS_ADMIN; the host's needs no joining.
                netns: if self.host_netns {
                    None
                } else {
                    Some(Arc::new(dup(&ns[2], self.pid)?))
                },
                pgid: Some(self.pid),
            },
        };
        run_collect(
            SpawnRequest {
                argv,
                env,
                cwd: working_dir,
                placement,
                setup: self.exec_setup.clone(),
                on_exit: None,
            },
            timeout,
        )
        .await
    }
}

/// Whether the namespace `fd` is the one at `path` (same device and inode).
fn same_namespace(fd: &OwnedFd, path: &str) -> bool {
    match (rustix::fs::fstat(fd), rustix::fs::stat(path)) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    }
}

fn dup(fd: &OwnedFd, pid: i32) -> Result<OwnedFd, ProcessError> {
    fd.try_clone()
        .map_err(|source| ProcessError::OpenNamespace {
            path: format!("/proc/{pid}/ns").into(),
            source,
        })
}

/// The result of an exec command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// The command's exit code or signal.
    pub status: ExitStatus,
    /// Its standard output, as bytes.
    pub stdout: Vec<u8>,
    /// Its standard error, as bytes.
    pub stderr: Vec<u8>,
}

async fn run_collect(
    req: SpawnRequest,
    timeout: Option<Duration>,
) -> Result<ExecOutput, ProcessError> {
    let argv = req.argv.clone();
    // Dropped before it resolves (a cancelled probe or hook), the spawn still happens on the
    // spawner thread; the process is then killed there, and reaped (see `Spawned::guard`).
    let spawned = on_spawner(move |st| spawn_here(st, req)).await??;
    let pid = spawned.pid;
    // Armed until the exec has been collected: a timeout, or dropping this future, kills it.
    let mut guard = spawned.guard;
    let mut exit = spawned.exit;
    let work = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut so = pipe_reader(spawned.stdout, pid)?;
        let mut se = pipe_reader(spawned.stderr, pid)?;
        let (a, b) = tokio::join!(so.read_to_end(&mut out), se.read_to_end(&mut err));
        a.map_err(|source| ProcessError::ReadOutput { pid, source })?;
        b.map_err(|source| ProcessError::ReadOutput { pid, source })?;
        let status = loop {
            if let Some(e) = *exit.borrow_and_update() {
                break e.status;
            }
            if exit.changed().await.is_err() {
                break ExitStatus::Unknown;
            }
        };
        Ok::<_, ProcessError>(ExecOutput {
            status,
            stdout: out,
            stderr: err,
        })
    };
    let result = match timeout {
        Some(t) => match tokio::time::timeout(t, work).await {
            Ok(r) => r,
            Err(_) => Err(ProcessError::ExecTimeout {
                pid,
                argv,
                timeout_ms: t.as_millis(),
            }),
        },
        None => work.await,
    };
    if result.is_ok() {
        guard.disarm();
    }
    result
}

fn pipe_reader(fd: OwnedFd, pid: i32) -> Result<tokio::net::unix::pipe::Receiver, ProcessError> {
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
        .map_err(|source| ProcessError::ReadOutput { pid, source })
}

fn forward_lines(
    container: String,
    stream: Stream,
    fd: OwnedFd,
    tx: mpsc::UnboundedSender<OutputLine>,
) {
    let Ok(rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) else {
        return;
    };
    tokio::spawn(async move {
        let mut reader = BufReader::new(rx);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    let line = String::from_utf8_lossy(&buf).into_owned();
                    if tx
                        .send(OutputLine {
                            container: container.clone(),
                            stream,
                            line,
                        })
                        .is_err()
                    {
                        // Nobody listens any more; keep draining so the container never blocks.
                        let _ = tokio::io::copy(&mut reader, &mut tokio::io::sink()).await;
                        break;
                    }
                }
            }
        }
    });
}

fn drain(fd: OwnedFd) {
    let Ok(rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) else {
        return;
    };
    tokio::spawn(async move {
        let mut rx = rx;
        let _ = tokio::io::copy(&mut rx, &mut tokio::io::sink()).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_runtime_convention() {
        assert_eq!(ExitStatus::Code(0).code(), 0);
        assert_eq!(ExitStatus::Code(3).code(), 3);
        assert_eq!(ExitStatus::Signal(9).code(), 137);
        assert_eq!(ExitStatus::Signal(15).code(), 143);
    }

    #[test]
    fn signal_numbers_are_checked() {
        assert_eq!(signal_from_raw(15).map(|s| s.as_raw()).ok(), Some(15));
        assert_eq!(signal_from_raw(3).map(|s| s.as_raw()).ok(), Some(3));
        assert_eq!(signal_from_raw(35).map(|s| s.as_raw()).ok(), Some(35));
        for bad in [0, -1, 65, i32::MAX, i32::MIN] {
            assert!(
                matches!(signal_from_raw(bad), Err(ProcessError::InvalidSignal { signal }) if signal == bad)
            );
        }
    }
}
