//! The reaper: the one place in podgrace that waits for processes.
//!
//! Every process podgrace spawns is registered here with its pidfd. One thread (started on first
//! use, alive for the life of the process) sleeps in `epoll_wait` on all registered pidfds; when
//! one becomes readable the process has exited and the thread collects it with
//! `waitid(P_PIDFD, WEXITED)`. It never calls `waitpid(-1)`, so it does not steal children that
//! other code (tests, libraries) spawned and waits on itself.
//!
//! For the init process of a PID namespace the pidfd becomes readable only after the kernel has
//! killed and reaped everything else in the namespace, so "exited" means "the whole container is
//! gone", as containerd's exit event does.
//!
//! That wait (`zap_pid_ns_processes`) includes processes of the namespace whose parent is
//! podgrace (the execs of probes and hooks): if one of them were never reaped, PID 1 would stay
//! in the kernel's teardown for ever and its exit would never come. Every process is registered
//! on a spawner thread right after its fork, before anything can fail, so this cannot happen
//! through podgrace's own spawns; as a second line, while a registered PID 1 is in that teardown
//! (exiting, not yet a zombie) the reaper checks once a second for zombie children of the
//! spawner threads that are not registered, and reaps them (with a warning), which lets the
//! teardown finish.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use rustix::fd::{AsFd, OwnedFd};
use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
use tokio::sync::watch;

use super::{ExitStatus, ProcessError};

/// What the reaper publishes when a process has been collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// How it ended.
    pub status: ExitStatus,
    /// When the reaper collected it (monotonic).
    pub at: Instant,
}

/// Run in the reaper thread right after the process (its pid is the argument) was collected and
/// before waiters are told (used by the fallback mode to kill what is left of a container).
pub(crate) type OnExit = Box<dyn FnOnce(i32) + Send>;

struct Entry {
    pid: i32,
    pidfd: Arc<OwnedFd>,
    tx: watch::Sender<Option<Exit>>,
    on_exit: Option<OnExit>,
    /// The init process of a PID namespace (a namespaced container's PID 1).
    namespace_init: bool,
}

pub(crate) struct Reaper {
    epoll: OwnedFd,
    table: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
    /// Registered namespace inits: while there are any, the reaper looks once a second for one
    /// stuck in its namespace's teardown.
    inits: AtomicUsize,
}

static REAPER: OnceLock<Result<Reaper, String>> = OnceLock::new();

/// Held by the spawner from a fork until the child is registered, and by a sweep: a sweep never
/// sees a child that is about to be registered.
static SPAWN_GATE: RwLock<()> = RwLock::new(());

/// Held by a spawn from its fork to the child's registration (spawns share it).
pub(crate) fn spawn_gate() -> std::sync::RwLockReadGuard<'static, ()> {
    SPAWN_GATE.read().unwrap_or_else(|p| p.into_inner())
}

/// Held by a sweep: no spawn is between its fork and its registration meanwhile.
fn sweep_gate() -> std::sync::RwLockWriteGuard<'static, ()> {
    SPAWN_GATE.write().unwrap_or_else(|p| p.into_inner())
}

/// How often the reaper looks for a namespace init stuck in its teardown.
const TEARDOWN_CHECK: Duration = Duration::from_secs(1);

/// `PF_EXITING` in `/proc/<pid>/stat`'s flags: the task is in `do_exit`.
const PF_EXITING: u32 = 0x4;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Reaper {
    /// The process-wide reaper, started on first use.
    pub(crate) fn global() -> Result<&'static Reaper, ProcessError> {
        let r = REAPER.get_or_init(|| {
            let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| e.to_string())?;
            Ok(Reaper {
                epoll,
                table: Mutex::new(HashMap::new()),
                next: AtomicU64::new(1),
                inits: AtomicUsize::new(0),
            })
        });
        match r {
            Ok(reaper) => {
                static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
                let started = STARTED.get_or_init(|| {
                    std::thread::Builder::new()
                        .name("podgrace-reaper".into())
                        .spawn(move || reaper.run())
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                });
                match started {
                    Ok(()) => Ok(reaper),
                    Err(e) => Err(ProcessError::StartReaper { reason: e.clone() }),
                }
            }
            Err(e) => Err(ProcessError::StartReaper { reason: e.clone() }),
        }
    }

    /// Registers a child (not yet waited on by anyone) and returns the receiver its exit is
    /// published on (`None` while it runs). `namespace_init`: it is PID 1 of its own PID
    /// namespace (see the module docs).
    pub(crate) fn register(
        &self,
        pid: i32,
        pidfd: Arc<OwnedFd>,
        on_exit: Option<OnExit>,
        namespace_init: bool,
    ) -> Result<watch::Receiver<Option<Exit>>, ProcessError> {
        let (tx, rx) = watch::channel(None);
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let fd = Arc::clone(&pidfd);
        lock(&self.table).insert(
            key,
            Entry {
                pid,
                pidfd,
                tx,
                on_exit,
                namespace_init,
            },
        );
        if namespace_init {
            self.inits.fetch_add(1, Ordering::SeqCst);
        }
        // Level-triggered: a process that already exited makes this fire at once.
        if let Err(e) = epoll::add(
            &self.epoll,
            fd.as_fd(),
            epoll::EventData::new_u64(key),
            epoll::EventFlags::IN,
        ) {
            if lock(&self.table).remove(&key).is_some() && namespace_init {
                self.inits.fetch_sub(1, Ordering::SeqCst);
            }
            return Err(ProcessError::Register {
                pid,
                source: e.into(),
            });
        }
        Ok(rx)
    }

    fn run(&self) {
        let mut events = Vec::with_capacity(32);
        let mut last_check = Instant::now();
        let tick = rustix::event::Timespec {
            tv_sec: TEARDOWN_CHECK.as_secs() as i64,
            tv_nsec: 0,
        };
        loop {
            events.clear();
            // A wake-up a second, so that an init registered while this thread slept is watched.
            if let Err(e) = epoll::wait(&self.epoll, spare_capacity(&mut events), Some(&tick)) {
                if e == rustix::io::Errno::INTR {
                    continue;
                }
                tracing::error!(error = %e, "reaper: epoll_wait failed");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            for event in events.drain(..) {
                self.collect(event.data.u64());
            }
            if self.inits.load(Ordering::SeqCst) > 0 && last_check.elapsed() >= TEARDOWN_CHECK {
                last_check = Instant::now();
                if self.an_init_is_in_teardown() {
                    self.sweep();
                }
            }
        }
    }

    /// Whether a registered namespace init is exiting but not yet a zombie: it waits in
    /// `zap_pid_ns_processes` for the rest of its namespace to be reaped.
    fn an_init_is_in_teardown(&self) -> bool {
        let inits: Vec<i32> = lock(&self.table)
            .values()
            .filter(|e| e.namespace_init)
            .map(|e| e.pid)
            .collect();
        inits.into_iter().any(|pid| {
            procfs::process::Process::new(pid)
                .and_then(|p| p.stat())
                .is_ok_and(|st| st.state != 'Z' && st.flags & PF_EXITING != 0)
        })
    }

    /// Reaps zombie children of the spawner threads that are not registered (a process some
    /// code path lost track of), so that the PID-namespace teardown waiting for them ends.
    /// Returns the pids reaped.
    fn sweep(&self) -> Vec<i32> {
        let _gate = sweep_gate();
        let mut children = Vec::new();
        for tid in super::spawner::spawner_tids() {
            match procfs::process::Process::myself()
                .and_then(|me| me.task_from_tid(tid))
                .and_then(|t| t.children())
            {
                Ok(c) => children.extend(c),
                Err(e) => {
                    tracing::warn!(error = %e, tid, "reaper: cannot list a spawner's children");
                }
            }
        }
        let known: HashSet<i32> = lock(&self.table).values().map(|e| e.pid).collect();
        let mut reaped = Vec::new();
        for child in children {
            let Ok(pid) = i32::try_from(child) else {
                continue;
            };
            if known.contains(&pid) {
                continue;
            }
            let zombie = procfs::process::Process::new(pid)
                .and_then(|p| p.stat())
                .is_ok_and(|st| st.state == 'Z');
            let Some(p) = Pid::from_raw(pid).filter(|_| zombie) else {
                continue;
            };
            if let Ok(Some(_)) = waitid(
                WaitId::Pid(p),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            ) {
                tracing::warn!(
                    pid,
                    "reaper: reaped a process podgrace had lost track of (it held up a container's PID-namespace teardown)"
                );
                reaped.push(pid);
            }
        }
        reaped
    }

    fn collect(&self, key: u64) {
        let status = {
            let table = lock(&self.table);
            let Some(entry) = table.get(&key) else { return };
            match waitid(
                WaitId::PidFd(entry.pidfd.as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            ) {
                Ok(Some(st)) => {
                    if let Some(code) = st.exit_status() {
                        ExitStatus::Code(code)
                    } else if let Some(sig) = st.terminating_signal() {
                        ExitStatus::Signal(sig)
                    } else {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    // ECHILD: someone else reaped it (a bug elsewhere); report it as unknown.
                    tracing::warn!(pid = entry.pid, error = %e, "reaper: waitid failed");
                    ExitStatus::Unknown
                }
            }
        };
        let at = Instant::now();
        let Some(mut entry) = lock(&self.table).remove(&key) else {
            return;
        };
        let _ = epoll::delete(&self.epoll, entry.pidfd.as_fd());
        if entry.namespace_init {
            self.inits.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some(f) = entry.on_exit.take() {
            f(entry.pid);
        }
        tracing::debug!(pid = entry.pid, ?status, "reaped");
        entry.tx.send_replace(Some(Exit { status, at }));
    }
}
