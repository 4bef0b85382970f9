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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use rustix::fd::{AsFd, OwnedFd};
use rustix::process::{waitid, WaitId, WaitIdOptions};
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

/// Run in the reaper thread right after the process was collected and before waiters are told
/// (used by the fallback mode to kill what is left of a container).
pub(crate) type OnExit = Box<dyn FnOnce() + Send>;

struct Entry {
    pid: i32,
    pidfd: Arc<OwnedFd>,
    tx: watch::Sender<Option<Exit>>,
    on_exit: Option<OnExit>,
}

pub(crate) struct Reaper {
    epoll: OwnedFd,
    table: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
}

static REAPER: OnceLock<Result<Reaper, String>> = OnceLock::new();

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
    /// published on (`None` while it runs).
    pub(crate) fn register(
        &self,
        pid: i32,
        pidfd: Arc<OwnedFd>,
        on_exit: Option<OnExit>,
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
            },
        );
        // Level-triggered: a process that already exited makes this fire at once.
        if let Err(e) = epoll::add(
            &self.epoll,
            fd.as_fd(),
            epoll::EventData::new_u64(key),
            epoll::EventFlags::IN,
        ) {
            lock(&self.table).remove(&key);
            return Err(ProcessError::Register {
                pid,
                source: e.into(),
            });
        }
        Ok(rx)
    }

    fn run(&self) {
        let mut events = Vec::with_capacity(32);
        loop {
            events.clear();
            if let Err(e) = epoll::wait(&self.epoll, spare_capacity(&mut events), None) {
                if e == rustix::io::Errno::INTR {
                    continue;
                }
                tracing::error!(error = %e, "reaper: epoll_wait failed");
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            for event in events.drain(..) {
                self.collect(event.data.u64());
            }
        }
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
        if let Some(f) = entry.on_exit.take() {
            f();
        }
        tracing::debug!(pid = entry.pid, ?status, "reaped");
        entry.tx.send_replace(Some(Exit { status, at }));
    }
}
