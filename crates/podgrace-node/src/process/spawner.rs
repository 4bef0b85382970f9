//! The spawner threads: every child of podgrace is started on one of them.
//!
//! Why dedicated threads:
//! * `PR_SET_PDEATHSIG` fires when the *thread* that started the child exits, not the process.
//!   These threads are never stopped, so the death signal fires exactly when podgrace dies.
//! * Entering a container's PID namespace (`setns`) changes only the calling thread's
//!   namespace *for children*; doing it here, then starting the child, then moving back to the
//!   host namespace keeps every other thread untouched.
//!
//! A start waits until the child has exec'd ([`super::clone`]: the thread is suspended while
//! the child runs on podgrace's memory), and a container's child first sets up its mount
//! namespace and mounts `/proc`: a good part of a millisecond in which one thread could start
//! nothing else. So there is a small pool: one thread at first, another started whenever a
//! job waits with no thread free, up to [`MAX_SPAWNERS`]; pods started together are started
//! side by side.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::process::{pidfd_open, PidfdFlags, Signal};
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType, UnshareFlags};

use tokio::sync::watch;

use super::clone::{self, ChildSteps};
use super::reaper::{self, Exit, OnExit};
use super::ProcessError;

/// The default `PATH` of a container when its env gives none (containerd's `oci.DefaultPathEnv`).
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Set when a spawner thread could not return to the host PID namespace: children forked
/// afterwards would land in a container's namespace, so every later spawn is refused.
static POISONED: AtomicBool = AtomicBool::new(false);

pub(crate) struct SpawnerState {
    /// This process's own PID namespace (to return to after creating or joining another).
    host_pidns: OwnedFd,
    /// A pidfd of this very process; a child polls it before exec to close the
    /// fork-then-podgrace-died race of `PR_SET_PDEATHSIG`.
    self_pidfd: OwnedFd,
    /// `/dev/null`, every child's standard input.
    devnull: OwnedFd,
}

type Job = Box<dyn FnOnce(&SpawnerState) + Send>;

/// At most this many spawner threads run (they are started on demand).
pub(crate) const MAX_SPAWNERS: usize = 4;

/// The spawner threads' ids: every child of podgrace is a child of one of them, listed in
/// `/proc/self/task/<tid>/children`.
static SPAWNER_TIDS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// The ids of the spawner threads running now.
pub(crate) fn spawner_tids() -> Vec<i32> {
    SPAWNER_TIDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// The spawner pool: one queue of jobs, taken by whichever thread is free.
struct Pool {
    tx: mpsc::Sender<Job>,
    rx: Mutex<mpsc::Receiver<Job>>,
    /// Threads started.
    threads: AtomicUsize,
    /// Threads waiting for a job.
    idle: AtomicUsize,
    /// Jobs sent and not yet taken.
    queued: AtomicUsize,
    /// What each thread's state is cloned from.
    state: SpawnerState,
}

static SPAWNER: OnceLock<Result<Pool, String>> = OnceLock::new();

fn pool() -> Result<&'static Pool, ProcessError> {
    let p = SPAWNER.get_or_init(|| {
        let host_pidns = std::fs::File::open("/proc/self/ns/pid")
            .map(OwnedFd::from)
            .map_err(|e| format!("open /proc/self/ns/pid: {e}"))?;
        let self_pidfd = pidfd_open(rustix::process::getpid(), PidfdFlags::empty())
            .map_err(|e| format!("pidfd_open(self): {e}"))?;
        let devnull = std::fs::File::open("/dev/null")
            .map(OwnedFd::from)
            .map_err(|e| format!("open /dev/null: {e}"))?;
        let (tx, rx) = mpsc::channel::<Job>();
        Ok(Pool {
            tx,
            rx: Mutex::new(rx),
            threads: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            state: SpawnerState {
                host_pidns,
                self_pidfd,
                devnull,
            },
        })
    });
    let pool = p
        .as_ref()
        .map_err(|e| ProcessError::StartSpawner { reason: e.clone() })?;
    if pool.threads.load(Ordering::SeqCst) == 0 {
        pool.grow()
            .map_err(|reason| ProcessError::StartSpawner { reason })?;
    }
    Ok(pool)
}

impl Pool {
    /// Starts one more thread unless [`MAX_SPAWNERS`] run. Errors: the thread could not be
    /// made (with none running, nothing can be spawned).
    fn grow(&'static self) -> Result<(), String> {
        let mut n = self.threads.load(Ordering::SeqCst);
        loop {
            if n >= MAX_SPAWNERS {
                return Ok(());
            }
            match self
                .threads
                .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
        let state = (|| -> std::io::Result<SpawnerState> {
            Ok(SpawnerState {
                host_pidns: self.state.host_pidns.try_clone()?,
                self_pidfd: self.state.self_pidfd.try_clone()?,
                devnull: self.state.devnull.try_clone()?,
            })
        })();
        let started = state.map_err(|e| e.to_string()).and_then(|state| {
            std::thread::Builder::new()
                .name("podgrace-spawner".into())
                .spawn(move || self.serve(state))
                .map(drop)
                .map_err(|e| format!("spawn thread: {e}"))
        });
        if started.is_err() {
            self.threads.fetch_sub(1, Ordering::SeqCst);
        }
        started
    }

    /// A spawner thread's loop. Never returns while the process lives: the sender is in a
    /// static.
    fn serve(&self, state: SpawnerState) {
        SPAWNER_TIDS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(rustix::thread::gettid().as_raw_nonzero().get());
        loop {
            self.idle.fetch_add(1, Ordering::SeqCst);
            let job = self.rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            self.idle.fetch_sub(1, Ordering::SeqCst);
            let Ok(job) = job else { return };
            self.queued.fetch_sub(1, Ordering::SeqCst);
            job(&state);
        }
    }

    /// Queues `job`; starts another thread when more jobs wait than threads are free.
    fn submit(&'static self, job: Job) -> Result<(), ProcessError> {
        let waiting = self.queued.fetch_add(1, Ordering::SeqCst) + 1;
        if self.tx.send(job).is_err() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Err(ProcessError::StartSpawner {
                reason: "spawner thread is gone".into(),
            });
        }
        if waiting > self.idle.load(Ordering::SeqCst) {
            if let Err(reason) = self.grow() {
                tracing::debug!(%reason, "spawner: cannot start another thread");
            }
        }
        Ok(())
    }
}

/// Runs `f` on a spawner thread and blocks until it returns. If the caller is gone when `f`
/// returns, its result is dropped there (a [`Spawned`] kills its process when dropped).
pub(crate) fn on_spawner_blocking<R: Send + 'static>(
    f: impl FnOnce(&SpawnerState) -> R + Send + 'static,
) -> Result<R, ProcessError> {
    let (tx, rx) = mpsc::channel();
    pool()?.submit(Box::new(move |st| {
        let _ = tx.send(f(st));
    }))?;
    rx.recv().map_err(|_| ProcessError::StartSpawner {
        reason: "spawner thread is gone".into(),
    })
}

/// Runs `f` on a spawner thread without blocking the async caller. Dropping the returned
/// future does not stop `f`: its result is dropped on the spawner thread (a [`Spawned`] then
/// kills its process, which the reaper still collects).
pub(crate) async fn on_spawner<R: Send + 'static>(
    f: impl FnOnce(&SpawnerState) -> R + Send + 'static,
) -> Result<R, ProcessError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    pool()?.submit(Box::new(move |st| {
        let _ = tx.send(f(st));
    }))?;
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
            // Verbs say it to the user once, in their own words (`podgrace run`'s warning).
            Ok(Err(reason)) | Err(ProcessError::StartSpawner { reason }) => {
                tracing::info!(
                    %reason,
                    "process isolation: namespaces not permitted; containers run as plain host processes \
                     (a PID 1 without a handler will die on SIGTERM instead of ignoring it)"
                );
                false
            }
            Err(e) => {
                tracing::info!(error = %e, "process isolation: namespaces not permitted; plain host processes");
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
}

pub(crate) struct SpawnRequest {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub placement: Placement,
    /// The container's cgroup and oom_score_adj, applied in the child before exec (containers
    /// and their execs only).
    pub setup: Option<Arc<ChildSetup>>,
    /// Run by the reaper right after the process is collected (see [`OnExit`]).
    pub on_exit: Option<OnExit>,
}

/// A process just started, already registered with the reaper.
pub(crate) struct Spawned {
    pub pid: i32,
    pub pidfd: Arc<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// `/proc/<pid>/ns/{pid,mnt,net}` opened right after the fork (containers only).
    pub ns: Option<[OwnedFd; 3]>,
    /// Where the reaper publishes the exit. The process was registered on the spawner thread
    /// before anything else could fail, so it is reaped whatever happens to its caller.
    pub exit: watch::Receiver<Option<Exit>>,
    /// SIGKILLs the process when dropped, until its owner disarms it: a caller that went away
    /// before it got the process (a probe or hook cancelled while it was being started) leaves
    /// nothing running.
    pub guard: KillGuard,
}

/// SIGKILLs a process through its pidfd when dropped while armed. The reaper collects it.
pub(crate) struct KillGuard {
    pidfd: Arc<OwnedFd>,
    armed: bool,
}

impl KillGuard {
    /// The process has an owner now: dropping the guard leaves it alone.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = rustix::process::pidfd_send_signal(self.pidfd.as_fd(), Signal::KILL);
        }
    }
}

/// What a container's process gets in the child before exec, as runc gives it: its cgroup
/// (`0` written to each `cgroup.procs`, opened before the fork) and, for PID 1, its
/// `oom_score_adj`.
#[derive(Debug)]
pub(crate) struct ChildSetup {
    pub cgroup_procs: Vec<OwnedFd>,
    /// The decimal value for `/proc/self/oom_score_adj`.
    pub oom_score_adj: Option<Vec<u8>>,
}

/// Starts the child on the spawner thread ([`super::clone`]: no copy of podgrace's memory),
/// and registers it with the reaper before returning or failing (a child that exists is
/// always reaped). Must be called from the spawner thread.
pub(crate) fn spawn_here(
    st: &SpawnerState,
    mut req: SpawnRequest,
) -> Result<Spawned, ProcessError> {
    let fail = |argv: &Vec<String>, e: std::io::Error| ProcessError::Spawn {
        argv: argv.clone(),
        source: e,
    };
    if req.argv.is_empty() {
        return Err(fail(
            &req.argv,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"),
        ));
    }
    if POISONED.load(Ordering::SeqCst) {
        return Err(fail(
            &req.argv,
            std::io::Error::other("spawner thread is stuck in another PID namespace"),
        ));
    }
    // An exec enters its container's PID namespace for its children (this thread's
    // `pid_for_children`), undone right after the clone.
    let mut entered_pidns = false;
    let steps = match &req.placement {
        Placement::Container { namespaced, netns } => ChildSteps::Container {
            namespaced: *namespaced,
            netns: netns.as_ref().map(|fd| fd.as_fd()),
        },
        Placement::Exec {
            pidns,
            mntns,
            netns,
            pgid,
        } => {
            if let Some(fd) = pidns {
                move_into_link_name_space(fd.as_fd(), Some(LinkNameSpaceType::ProcessID))
                    .map_err(|e| fail(&req.argv, e.into()))?;
                entered_pidns = true;
            }
            ChildSteps::Exec {
                mntns: mntns.as_ref().map(|fd| fd.as_fd()),
                netns: netns.as_ref().map(|fd| fd.as_fd()),
                pgid: *pgid,
            }
        }
    };
    // No sweep of leaked children (see the reaper) may run between the clone and the
    // registration: it would take this child, not yet registered, for a leaked one.
    let gate = reaper::spawn_gate();
    let started = clone::spawn(
        &req.argv,
        &req.env,
        req.cwd.as_deref(),
        st.devnull.as_fd(),
        st.self_pidfd.as_fd(),
        req.setup.as_deref(),
        steps,
    );
    if entered_pidns {
        if let Err(e) =
            move_into_link_name_space(st.host_pidns.as_fd(), Some(LinkNameSpaceType::ProcessID))
        {
            // Children started later would land in the wrong namespace: refuse loudly.
            POISONED.store(true, Ordering::SeqCst);
            tracing::error!(error = %e, "spawner: cannot return to the host PID namespace");
        }
    }
    let started = started.map_err(|e| fail(&req.argv, e))?;
    let pid = started.pid;
    let pidfd = Arc::new(started.pidfd);
    let namespace_init = matches!(
        req.placement,
        Placement::Container {
            namespaced: true,
            ..
        }
    );
    let registered = reaper::Reaper::global()
        .and_then(|r| r.register(pid, Arc::clone(&pidfd), req.on_exit.take(), namespace_init));
    drop(gate);
    let exit = match registered {
        Ok(exit) => exit,
        Err(e) => {
            // Not registered: kill it and collect it here, off the spawner thread.
            let _ = rustix::process::pidfd_send_signal(pidfd.as_fd(), Signal::KILL);
            let _ = std::thread::Builder::new()
                .name("podgrace-unregistered".into())
                .spawn(move || {
                    let _ = rustix::process::waitid(
                        rustix::process::WaitId::PidFd(pidfd.as_fd()),
                        rustix::process::WaitIdOptions::EXITED,
                    );
                });
            return Err(e);
        }
    };
    // From here on, an error drops the guard, which kills the child; the reaper collects it.
    let guard = KillGuard {
        pidfd: Arc::clone(&pidfd),
        armed: true,
    };
    let (stdout, stderr) = (started.stdout, started.stderr);
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
    Ok(Spawned {
        pid,
        pidfd,
        stdout,
        stderr,
        ns,
        exit,
        guard,
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

fn borrow(fd: &OwnedFd) -> BorrowedFd<'_> {
    fd.as_fd()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{ContainerProcess, ContainerSpec, ExitStatus};
    use std::process::Command;
    use std::time::Duration;

    /// A process of a container's PID namespace whose parent is podgrace and that nobody
    /// registered (what a lost exec used to be): when PID 1 dies the kernel kills it, and the
    /// teardown then waits for podgrace to reap its zombie. The reaper's sweep does, so PID 1's
    /// exit is still seen.
    #[tokio::test]
    async fn the_reaper_frees_a_teardown_held_up_by_an_unregistered_zombie() {
        if !namespaces_permitted() {
            eprintln!("SKIP: PID namespaces not permitted here");
            return;
        }
        let c = ContainerProcess::spawn(
            ContainerSpec {
                name: "app".into(),
                argv: vec!["sleep".into(), "1000".into()],
                ..Default::default()
            },
            None,
        )
        .await
        .expect("spawn");
        let pidns = std::fs::File::open(format!("/proc/{}/ns/pid", c.pid()))
            .map(OwnedFd::from)
            .expect("pidns");
        // Forked on the spawner thread into the container's PID namespace, and never
        // registered with the reaper.
        let lost = on_spawner_blocking(move |st| {
            move_into_link_name_space(pidns.as_fd(), Some(LinkNameSpaceType::ProcessID))
                .expect("setns");
            let child = Command::new("sleep").arg("1000").spawn();
            move_into_link_name_space(st.host_pidns.as_fd(), Some(LinkNameSpaceType::ProcessID))
                .expect("back to the host PID namespace");
            child.expect("spawn the lost process").id()
        })
        .expect("spawner");
        assert!(c.kill().expect("kill"));
        let exit = tokio::time::timeout(Duration::from_secs(10), c.wait())
            .await
            .expect("PID 1's exit is seen once the lost zombie is reaped");
        assert_eq!(exit.status, ExitStatus::Signal(9));
        assert!(
            procfs::process::Process::new(lost as i32).is_err(),
            "the lost process {lost} is reaped"
        );
    }
}
