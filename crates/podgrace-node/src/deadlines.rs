//! The node's one deadline structure: every SIGKILL due at a grace deadline, and every precise
//! wake-up (a sleep preStop's end), kept in one heap by one thread that fires what is due in a
//! batch.
//!
//! Why not a tokio timer per container: tokio's timer wheel has a resolution of 1 ms and rounds
//! a deadline up to its next tick, and each due timer wakes its own task, which must then be
//! scheduled on the runtime's workers before it can send its signal. With 1,000 containers due
//! at the same instant on 2 workers, the last SIGKILL went out 100+ ms late. Here the thread
//! sleeps until the earliest deadline (a futex wait with a timer slack of 1 ns), takes every
//! entry that is due, sends the signals first, back to back through their pidfds (a few
//! microseconds each), and only then tells the tasks that wait on them.
//!
//! Entries are cancelled by dropping their handle ([`Armed`], or the
//! future of [`sleep_until`]); a cancelled entry
//! stays in the heap until its time and is skipped then, or until cancelled entries outnumber
//! the live ones and the heap is compacted.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::num::NonZeroU64;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Instant;

use rustix::fd::{AsFd, OwnedFd};
use rustix::process::{pidfd_send_signal, Signal};
use tokio::sync::oneshot;

/// What a signal entry did when it fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    /// When the signal was sent (just before the syscall; monotonic).
    pub at: Instant,
    /// `Ok(true)` sent, `Ok(false)` the process was already gone (`ESRCH`), or the error.
    pub sent: Result<bool, rustix::io::Errno>,
}

enum Action {
    /// Send `signal` through the pidfd, then report.
    Signal {
        pidfd: Arc<OwnedFd>,
        signal: Signal,
        done: oneshot::Sender<Fired>,
    },
    /// Wake a task (its precise sleep ended).
    Wake(oneshot::Sender<Instant>),
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    actions: HashMap<u64, Action>,
    next: u64,
}

impl State {
    /// Drops the heap's cancelled entries once they outnumber the live ones (and there are more
    /// than [`COMPACT_ABOVE`]), so that a node stopping containers with long grace periods over
    /// and over keeps a heap the size of what is armed, at an amortised O(1) per cancel.
    fn compact(&mut self) {
        if self.heap.len() > COMPACT_ABOVE && self.heap.len() > 2 * self.actions.len() {
            let live = &self.actions;
            self.heap.retain(|Reverse((_, id))| live.contains_key(id));
        }
    }
}

/// Heap entries below which cancelled ones are left to be skipped at their time.
const COMPACT_ABOVE: usize = 1024;

struct Deadlines {
    state: Mutex<State>,
    wake: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

static DEADLINES: OnceLock<Option<&'static Deadlines>> = OnceLock::new();

/// The process's deadline thread, started on first use; `None` if the thread could not be
/// started (callers then fall back to tokio's timers).
fn global() -> Option<&'static Deadlines> {
    *DEADLINES.get_or_init(|| {
        let d: &'static Deadlines = Box::leak(Box::new(Deadlines {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }));
        match std::thread::Builder::new()
            .name("podgrace-deadlines".into())
            .spawn(move || d.run())
        {
            Ok(_) => Some(d),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the deadline thread; using tokio's timers");
                None
            }
        }
    })
}

impl Deadlines {
    fn insert(&self, at: Instant, action: Action) -> u64 {
        let mut st = lock(&self.state);
        let id = st.next;
        st.next += 1;
        let earliest = st.heap.peek().is_none_or(|Reverse((first, _))| at < *first);
        st.heap.push(Reverse((at, id)));
        st.actions.insert(id, action);
        drop(st);
        if earliest {
            self.wake.notify_one();
        }
        id
    }

    fn cancel(&self, id: u64) {
        let mut st = lock(&self.state);
        if st.actions.remove(&id).is_some() {
            st.compact();
        }
    }

    fn run(&self) {
        // The futex wait's timer may fire up to its slack late (50 µs by default).
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
        realtime();
        let mut due = Vec::new();
        let mut st = lock(&self.state);
        loop {
            let now = Instant::now();
            while let Some(Reverse((at, id))) = st.heap.peek().copied() {
                if at > now {
                    break;
                }
                st.heap.pop();
                if let Some(a) = st.actions.remove(&id) {
                    due.push(a);
                }
            }
            if !due.is_empty() {
                drop(st);
                fire(&mut due);
                st = lock(&self.state);
                continue;
            }
            st = match st.heap.peek() {
                Some(Reverse((at, _))) => {
                    let left = at.saturating_duration_since(now);
                    self.wake
                        .wait_timeout(st, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.wake.wait(st).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

/// Puts the calling thread (the deadline thread) in `SCHED_FIFO` at the lowest real-time
/// priority, where permitted (root, or `CAP_SYS_NICE`): a process woken by its SIGKILL, or any
/// other work of a loaded machine, then cannot preempt it before the whole batch has gone out,
/// and it wakes at its deadline even when every core is busy. Its work is bounded (a batch of
/// signals, microseconds each) and the kernel's real-time throttling still applies. Elsewhere it
/// stays an ordinary thread, with a debug log.
#[allow(unsafe_code)]
fn realtime() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: pthread_self() is the calling thread; `param` is a valid sched_param.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc != 0 {
        tracing::debug!(
            error = %std::io::Error::from_raw_os_error(rc),
            "the deadline thread stays SCHED_OTHER"
        );
    }
}

/// Fires a batch: every signal first, then the reports and wake-ups.
fn fire(due: &mut Vec<Action>) {
    let mut reports = Vec::with_capacity(due.len());
    for a in due.iter() {
        if let Action::Signal { pidfd, signal, .. } = a {
            let at = Instant::now();
            let sent = match pidfd_send_signal(pidfd.as_fd(), *signal) {
                Ok(()) => Ok(true),
                Err(rustix::io::Errno::SRCH) => Ok(false),
                Err(e) => Err(e),
            };
            reports.push(Fired { at, sent });
        }
    }
    let mut reports = reports.into_iter();
    let now = Instant::now();
    for a in due.drain(..) {
        match a {
            Action::Signal { done, .. } => {
                if let Some(f) = reports.next() {
                    let _ = done.send(f);
                }
            }
            Action::Wake(tx) => {
                let _ = tx.send(now);
            }
        }
    }
}

/// A signal armed for a deadline; dropping it cancels the signal if it has not gone out.
pub struct Armed {
    id: u64,
    rx: oneshot::Receiver<Fired>,
    fired: Option<Fired>,
}

impl Armed {
    /// Waits until the signal has been sent (or found the process gone). If the deadline thread
    /// is gone, never completes.
    pub async fn fired(&mut self) -> Fired {
        if let Some(f) = self.fired {
            return f;
        }
        match (&mut self.rx).await {
            Ok(f) => {
                self.fired = Some(f);
                f
            }
            Err(_) => std::future::pending().await,
        }
    }

    /// Cancels the signal; returns what it did if it had already fired.
    pub fn cancel(mut self) -> Option<Fired> {
        if let Some(d) = global() {
            d.cancel(self.id);
        }
        self.fired.or_else(|| self.rx.try_recv().ok())
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        if let Some(d) = global() {
            d.cancel(self.id);
        }
    }
}

/// Arms `signal` to be sent through `pidfd` at `at` by the deadline thread, in one batch with
/// every other entry due then. `None` if the deadline thread could not be started.
pub(crate) fn signal_at(at: Instant, pidfd: Arc<OwnedFd>, signal: Signal) -> Option<Armed> {
    let d = global()?;
    let (done, rx) = oneshot::channel();
    let id = d.insert(
        at,
        Action::Signal {
            pidfd,
            signal,
            done,
        },
    );
    Some(Armed {
        id,
        rx,
        fired: None,
    })
}

/// A precise wake-up at `at`; dropping it cancels it.
struct Sleep {
    id: u64,
    rx: oneshot::Receiver<Instant>,
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(d) = global() {
            d.cancel(self.id);
        }
    }
}

/// Sleeps until `at`, woken by the deadline thread within microseconds of it rather than at
/// tokio's next millisecond tick. Completes at tokio's own timer too if that comes first: on a
/// paused test clock, which advances tokio's time alone, it behaves as `tokio::time::sleep_until`.
pub async fn sleep_until(at: Instant) {
    let precise = async {
        let Some(d) = global() else {
            return std::future::pending().await;
        };
        let (tx, rx) = oneshot::channel();
        let mut s = Sleep {
            id: d.insert(at, Action::Wake(tx)),
            rx,
        };
        if (&mut s.rx).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = precise => {}
        () = tokio::time::sleep_until(at.into()) => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn sleeps_end_never_early_and_a_cancelled_one_never() {
        // Deadlines out of order, one cancelled: each of the others ends, none before its
        // instant (the precision is the benchmark's business: bench/stop.sh). The order in which
        // the woken tasks report is the scheduler's, so it is not asserted.
        let base = Instant::now() + Duration::from_millis(20);
        let offsets = [7u64, 1, 5, 3, 9, 2];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for (i, ms) in offsets.into_iter().enumerate() {
            let at = base + Duration::from_millis(ms);
            let tx = tx.clone();
            let sleep = tokio::spawn(async move {
                sleep_until(at).await;
                let _ = tx.send((ms, Instant::now() >= at));
            });
            if i == 4 {
                sleep.abort();
            }
        }
        drop(tx);
        let mut ended = Vec::new();
        while let Some((ms, on_time)) = rx.recv().await {
            assert!(on_time, "the {ms} ms sleep ended early");
            ended.push(ms);
        }
        ended.sort_unstable();
        assert_eq!(ended, [1, 2, 3, 5, 7]);
    }

    #[test]
    fn cancelled_entries_are_compacted_once_they_outnumber_the_live_ones() {
        let mut st = State::default();
        let far = Instant::now() + Duration::from_secs(3600);
        let mut rxs = Vec::new();
        for id in 0..3000u64 {
            let (tx, rx) = oneshot::channel();
            rxs.push(rx);
            st.heap.push(Reverse((far, id)));
            st.actions.insert(id, Action::Wake(tx));
        }
        // Cancel as Deadlines::cancel does: the heap keeps its entries while they are few or
        // the live ones are at least half.
        for id in 0..1500u64 {
            st.actions.remove(&id);
            st.compact();
        }
        assert_eq!(st.heap.len(), 3000);
        st.actions.remove(&1500);
        st.compact();
        assert_eq!((st.heap.len(), st.actions.len()), (1499, 1499));
        assert!(st.heap.iter().all(|Reverse((_, id))| *id > 1500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_sleep_follows_a_paused_clock() {
        let start = tokio::time::Instant::now();
        sleep_until(Instant::now() + Duration::from_secs(7)).await;
        assert!(start.elapsed() >= Duration::from_secs(7));
    }

    #[tokio::test]
    async fn a_signal_goes_out_at_its_deadline_and_a_cancelled_one_never() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
        let pidfd = Arc::new(
            rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).expect("pidfd"),
        );
        let cancelled = signal_at(
            Instant::now() + Duration::from_millis(10),
            Arc::clone(&pidfd),
            Signal::TERM,
        )
        .expect("deadline thread");
        assert_eq!(cancelled.cancel(), None);
        let at = Instant::now() + Duration::from_millis(30);
        let mut armed = signal_at(at, pidfd, Signal::KILL).expect("deadline thread");
        let fired = armed.fired().await;
        assert_eq!(fired.sent, Ok(true));
        assert!(fired.at >= at);
        let status = child.wait().expect("wait");
        use std::os::unix::process::ExitStatusExt;
        // SIGKILL ended it, not the cancelled SIGTERM (which would have come first).
        assert_eq!(status.signal(), Some(9));
    }
}
