//! The spawner thread: every fork of podgrace happens on this one thread.
//!
//! Why a dedicated thread:
//! * `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the process.
//!   This thread is never stopped, so the death signal fires exactly when podgrace dies.
//! * Entering a new PID namespace (`unshare(CLONE_NEWPID)`) or a container's one (`setns`)
//!   changes only the calling thread's namespace *for children*; doing it here, then forking,
//!   then moving back to the host namespace keeps every other thread untouched.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::mount::{mount, mount_change, MountFlags, MountPropagationFlags};
use rustix::process::{pidfd_open, set_parent_process_death_signal, Pid, PidfdFlags, Signal};
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType, UnshareFlags};

use super::ProcessError;

/// The default `PATH` of a container when its env gives none (containerd's `oci.DefaultPathEnv`).
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Set when the spawner thread could not return to the host PID namespace: children forked
/// afterwards would land in a container's namespace, so every later spawn is refused.
static POISONED: AtomicBool = AtomicBool::new(false);

pub(crate) struct SpawnerState {
    /// This process's own PID namespace (to return to after creating or joining another).
    host_pidns: OwnedFd,
    /// A pidfd of this very process; a child polls it before exec to close the
    /// fork-then-podgrace-died race of `PR_SET_PDEATHSIG`.
    self_pidfd: OwnedFd,
}

type Job = Box<dyn FnOnce(&SpawnerState) + Send>;

static SPAWNER: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();

fn sender() -> Result<&'static mpsc::Sender<Job>, ProcessError> {
    let s = SPAWNER.get_or_init(|| {
        let host_pidns = std::fs::File::open("/proc/self/ns/pid")
            .map(OwnedFd::from)
            .map_err(|e| format!("open /proc/self/ns/pid: {e}"))?;
        let self_pidfd = pidfd_open(rustix::process::getpid(), PidfdFlags::empty())
            .map_err(|e| format!("pidfd_open(self): {e}"))?;
        let state = SpawnerState {
            host_pidns,
            self_pidfd,
        };
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("podgrace-spawner".into())
            .spawn(move || {
                // Never returns while the process lives: the sender is in a static.
                while let Ok(job) = rx.recv() {
                    job(&state);
                }
            })
            .map_err(|e| format!("spawn thread: {e}"))?;
        Ok(tx)
    });
    s.as_ref()
        .map_err(|e| ProcessError::StartSpawner { reason: e.clone() })
}

/// Runs `f` on the spawner thread and blocks until it returns.
pub(crate) fn on_spawner_blocking<R: Send + 'static>(
    f: impl FnOnce(&SpawnerState) -> R + Send + 'static,
) -> Result<R, ProcessError> {
    let (tx, rx) = mpsc::channel();
    sender()?
        .send(Box::new(move |st| {
            let _ = tx.send(f(st));
        }))
        .map_err(|_| ProcessError::StartSpawner {
            reason: "spawner thread is gone".into(),
        })?;
    rx.recv().map_err(|_| ProcessError::StartSpawner {
        reason: "spawner thread is gone".into(),
    })
}

/// Runs `f` on the spawner thread without blocking the async caller.
pub(crate) async fn on_spawner<R: Send + 'static>(
    f: impl FnOnce(&SpawnerState) -> R + Send + 'static,
) -> Result<R, ProcessError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    sender()?
        .send(Box::new(move |st| {
            let _ = tx.send(f(st));
        }))
        .map_err(|_| ProcessError::StartSpawner {
            reason: "spawner thread is gone".into(),
        })?;
    rx.await.map_err(|_| ProcessError::StartSpawner {
        reason: "spawner thread is gone".into(),
    })
}

/// Whether this process may create PID and mount namespaces. Probed once (on the spawner
/// thread) and logged once.
pub(crate) fn namespaces_permitted() -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    *PROBE.get_or_init(|| {
        let result = on_spawner_blocking(|st| {
            // SAFETY: NEWPID does not unshare the fd table; only this thread's
            // pid_for_children changes, and it is restored right below.
            let r = unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWPID) };
            match r {
                Ok(()) => match move_into_link_name_space(
                    st.host_pidns.as_fd(),
                    Some(LinkNameSpaceType::ProcessID),
                ) {
                    Ok(()) => Ok(()),
                    Err(e) => Err(format!("setns back to the host PID namespace: {e}")),
                },
                Err(e) => Err(format!("unshare(CLONE_NEWPID): {e}")),
            }
        });
        match result {
            Ok(Ok(())) => {
                tracing::info!("process isolation: each container is PID 1 of its own PID namespace");
                true
            }
            Ok(Err(reason)) | Err(ProcessError::StartSpawner { reason }) => {
                tracing::warn!(
                    %reason,
                    "process isolation: namespaces not permitted; containers run as plain host processes \
                     (a PID 1 without a handler will die on SIGTERM instead of ignoring it)"
                );
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "process isolation: namespaces not permitted; plain host processes");
                false
            }
        }
    })
}

/// How the child is placed.
pub(crate) enum Placement {
    /// A container's entry process. `namespaced`: PID 1 of a new PID namespace, with its own
    /// mount namespace and a private `/proc`. Otherwise a host process leading its own session.
    Container {
        namespaced: bool,
        netns: Option<Arc<OwnedFd>>,
    },
    /// A process inside a running container: joins these namespaces (`None`: stay in the host's).
    /// `pgid`: in fallback mode, the container's process group to join.
    Exec {
        pidns: Option<Arc<OwnedFd>>,
        mntns: Option<Arc<OwnedFd>>,
        netns: Option<Arc<OwnedFd>>,
        pgid: Option<i32>,
    },
    /// A host helper (iproute2).
    Helper,
}

pub(crate) struct SpawnRequest {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub placement: Placement,
}

pub(crate) struct Spawned {
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// `/proc/<pid>/ns/{pid,mnt,net}` opened right after the fork (containers only).
    pub ns: Option<[OwnedFd; 3]>,
}

fn io_err(e: rustix::io::Errno) -> std::io::Error {
    e.into()
}

/// Forks and execs on the spawner thread. Must be called from the spawner thread.
pub(crate) fn spawn_here(st: &SpawnerState, req: SpawnRequest) -> Result<Spawned, ProcessError> {
    let Some(program) = req.argv.first().cloned() else {
        return Err(ProcessError::Spawn {
            argv: req.argv.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"),
        });
    };
    if POISONED.load(Ordering::SeqCst) {
        return Err(ProcessError::Spawn {
            argv: req.argv.clone(),
            source: std::io::Error::other("spawner thread is stuck in another PID namespace"),
        });
    }
    let mut cmd = Command::new(&program);
    cmd.args(&req.argv[1..]);
    cmd.env_clear();
    if !req.env.iter().any(|(k, _)| k == "PATH") {
        cmd.env("PATH", DEFAULT_PATH);
    }
    for (k, v) in &req.env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let cwd_c: Option<CString> = match &req.cwd {
        Some(dir) => {
            cmd.current_dir(dir);
            CString::new(dir.as_os_str().as_encoded_bytes()).ok()
        }
        None => None,
    };
    let self_pidfd = st.self_pidfd.try_clone().map_err(|e| ProcessError::Spawn {
        argv: req.argv.clone(),
        source: e,
    })?;

    // Namespace changes of this thread that must be undone after the fork.
    let mut entered_pidns = false;
    let fail = |argv: &Vec<String>, e: std::io::Error| ProcessError::Spawn {
        argv: argv.clone(),
        source: e,
    };

    match &req.placement {
        Placement::Container {
            namespaced: true,
            netns,
        } => {
            // SAFETY: NEWPID touches no fd table; restored below.
            unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWPID) }
                .map_err(|e| fail(&req.argv, io_err(e)))?;
            entered_pidns = true;
            let netns = netns.clone();
            // SAFETY: the closure runs in the forked child before exec and only makes raw
            // syscalls on memory prepared before the fork (no allocation, no locks).
            unsafe {
                cmd.pre_exec(move || {
                    child_common(&self_pidfd)?;
                    // Its own session, as under a container runtime: a Ctrl-C at podgrace's
                    // terminal (SIGINT to the foreground process group) must reach podgrace
                    // only, which then deletes the pod; never the container directly.
                    rustix::process::setsid().map_err(io_err)?;
                    rustix::thread::unshare_unsafe(UnshareFlags::NEWNS).map_err(io_err)?;
                    mount_change(
                        c"/",
                        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
                    )
                    .map_err(io_err)?;
                    mount(
                        c"proc",
                        c"/proc",
                        c"proc",
                        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                        None::<&std::ffi::CStr>,
                    )
                    .map_err(io_err)?;
                    if let Some(fd) = &netns {
                        move_into_link_name_space(fd.as_fd(), Some(LinkNameSpaceType::Network))
                            .map_err(io_err)?;
                    }
                    Ok(())
                });
            }
        }
        Placement::Container {
            namespaced: false,
            netns,
        } => {
            let netns = netns.clone();
            // SAFETY: as above.
            unsafe {
                cmd.pre_exec(move || {
                    child_common(&self_pidfd)?;
                    // Own session and process group: the handle for the whole-container kill.
                    rustix::process::setsid().map_err(io_err)?;
                    if let Some(fd) = &netns {
                        move_into_link_name_space(fd.as_fd(), Some(LinkNameSpaceType::Network))
                            .map_err(io_err)?;
                    }
                    Ok(())
                });
            }
        }
        Placement::Exec {
            pidns,
            mntns,
            netns,
            pgid,
        } => {
            if let Some(fd) = pidns {
                move_into_link_name_space(fd.as_fd(), Some(LinkNameSpaceType::ProcessID))
                    .map_err(|e| fail(&req.argv, io_err(e)))?;
                entered_pidns = true;
            }
            let (mntns, netns, pgid) = (mntns.clone(), netns.clone(), *pgid);
            // SAFETY: as above.
            unsafe {
                cmd.pre_exec(move || {
                    child_common(&self_pidfd)?;
                    if let Some(fd) = &mntns {
                        move_into_link_name_space(fd.as_fd(), Some(LinkNameSpaceType::Mount))
                            .map_err(io_err)?;
                        // Joining a mount namespace resets the cwd to its root.
                        match &cwd_c {
                            Some(dir) => rustix::process::chdir(dir.as_c_str()).map_err(io_err)?,
                            None => rustix::process::chdir(c"/").map_err(io_err)?,
                        }
                    }
                    if let Some(fd) = &netns {
                        move_into_link_name_space(fd.as_fd(), Some(LinkNameSpaceType::Network))
                            .map_err(io_err)?;
                    }
                    match pgid.and_then(Pid::from_raw) {
                        // Best effort: the group is gone if the container exited.
                        Some(pgid) => {
                            let _ = rustix::process::setpgid(None, Some(pgid));
                        }
                        // Out of podgrace's process group, as the container is.
                        None => {
                            let _ = rustix::process::setsid();
                        }
                    }
                    Ok(())
                });
            }
        }
        Placement::Helper => {
            // SAFETY: as above.
            unsafe {
                cmd.pre_exec(move || {
                    child_common(&self_pidfd)?;
                    // A terminal's Ctrl-C must not cut a helper (an `ip` step of a sandbox)
                    // half-way: podgrace handles it and tears down in order.
                    let _ = rustix::process::setsid();
                    Ok(())
                });
            }
        }
    }

    let spawned = cmd.spawn();
    if entered_pidns {
        if let Err(e) =
            move_into_link_name_space(st.host_pidns.as_fd(), Some(LinkNameSpaceType::ProcessID))
        {
            // Children forked later would land in the wrong namespace: refuse loudly.
            POISONED.store(true, Ordering::SeqCst);
            tracing::error!(error = %e, "spawner: cannot return to the host PID namespace");
        }
    }
    let mut child = spawned.map_err(|e| fail(&req.argv, e))?;
    let pid = child.id() as i32;
    let stdout: OwnedFd = match child.stdout.take() {
        Some(s) => s.into(),
        None => {
            return Err(fail(
                &req.argv,
                std::io::Error::other("stdout pipe missing"),
            ))
        }
    };
    let stderr: OwnedFd = match child.stderr.take() {
        Some(s) => s.into(),
        None => {
            return Err(fail(
                &req.argv,
                std::io::Error::other("stderr pipe missing"),
            ))
        }
    };
    // The child is ours and unreaped (only the reaper waits), so its pid cannot be reused yet.
    let rpid = Pid::from_raw(pid).ok_or_else(|| fail(&req.argv, std::io::Error::other("pid 0")))?;
    let pidfd = pidfd_open(rpid, PidfdFlags::empty()).map_err(|e| ProcessError::PidfdOpen {
        pid,
        source: e.into(),
    })?;
    let ns = match &req.placement {
        Placement::Container { .. } => {
            let open = |kind: &str| -> Result<OwnedFd, ProcessError> {
                let path = PathBuf::from(format!("/proc/{pid}/ns/{kind}"));
                std::fs::File::open(&path)
                    .map(OwnedFd::from)
                    .map_err(|source| ProcessError::OpenNamespace { path, source })
            };
            match (open("pid"), open("mnt"), open("net")) {
                (Ok(p), Ok(m), Ok(n)) => Some([p, m, n]),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                    // A PID 1 that exits at once (`sh -c 'echo $$'`) takes its namespaces with
                    // it before they can be opened: nothing can be exec'd in it any more.
                    if has_exited(&pidfd) {
                        None
                    } else {
                        return Err(e);
                    }
                }
            }
        }
        _ => None,
    };
    // `child` is dropped without waiting: the reaper owns the wait.
    drop(child);
    Ok(Spawned {
        pid,
        pidfd,
        stdout,
        stderr,
        ns,
    })
}

/// `true` if the process behind `pidfd` is exiting: its pidfd polls readable within 200 ms.
/// (The kernel drops a task's namespaces in `do_exit` a moment before it notifies its pidfd.)
fn has_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::from_borrowed_fd(borrow(pidfd), PollFlags::IN)];
    let bound = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    poll(&mut fds, Some(&bound)).is_ok_and(|n| n > 0)
}

/// In the child, before exec: die with podgrace, and do not start at all if podgrace already died.
fn child_common(self_pidfd: &OwnedFd) -> std::io::Result<()> {
    set_parent_process_death_signal(Some(Signal::KILL)).map_err(io_err)?;
    let mut fds = [PollFd::from_borrowed_fd(borrow(self_pidfd), PollFlags::IN)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if poll(&mut fds, Some(&zero)).map_err(io_err)? > 0 {
        // podgrace exited between fork and prctl: the death signal would never come.
        return Err(std::io::Error::other("podgrace exited"));
    }
    Ok(())
}

fn borrow(fd: &OwnedFd) -> BorrowedFd<'_> {
    fd.as_fd()
}
