//! The controllers' work queue, as client-go's rate-limited delaying work queue: keys
//! (`namespace/name`) added by the informers' handlers, each handed to one worker at a time.
//!
//! * A key added while it waits is not queued twice; a key added while a worker syncs it is
//!   queued again when that worker is done (`dirty` and `processing`), so a change during a
//!   sync is never lost and one key is never synced by two workers at once.
//! * [`Queue::add_after`]: the key comes back after a delay (minReadySeconds, the progress
//!   deadline, a budget's recheck), the earliest of several delays winning.
//! * A sync that fails is retried after a per-key exponential back-off, 5 ms doubling to
//!   1000 s, forgotten once a sync of that key succeeds
//!   (`DefaultControllerRateLimiter`'s `ItemExponentialFailureRateLimiter(5ms, 1000s)`).
//!
//! Upstream: `staging/src/k8s.io/client-go/util/workqueue/queue.go` (`Add`, `Get`, `Done`),
//! `delaying_queue.go` (`AddAfter`), `default_rate_limiters.go`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The first retry's delay after a failed sync.
pub const BASE_DELAY: Duration = Duration::from_millis(5);

/// The longest retry delay.
pub const MAX_DELAY: Duration = Duration::from_secs(1000);

#[derive(Default)]
struct State {
    queue: VecDeque<String>,
    dirty: HashSet<String>,
    processing: HashSet<String>,
    /// Failed syncs of each key since its last success.
    failures: HashMap<String, u32>,
    /// The earliest instant each delayed key is due.
    delayed: HashMap<String, Instant>,
}

/// A work queue of keys (cheap to clone: one queue).
#[derive(Clone, Default)]
pub struct Queue {
    state: Arc<Mutex<State>>,
    ready: Arc<Notify>,
}

impl Queue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `key` now (a no-op when it already waits).
    pub fn add(&self, key: impl Into<String>) {
        let key = key.into();
        let mut s = self.state();
        if !s.dirty.insert(key.clone()) {
            return;
        }
        if s.processing.contains(&key) {
            return;
        }
        s.queue.push_back(key);
        drop(s);
        self.ready.notify_one();
    }

    /// Queues `key` once `delay` has passed; an earlier delay of the same key wins.
    pub fn add_after(&self, key: impl Into<String>, delay: Duration) {
        let key = key.into();
        if delay.is_zero() {
            return self.add(key);
        }
        let due = Instant::now() + delay;
        {
            let mut s = self.state();
            match s.delayed.get(&key) {
                Some(t) if *t <= due => return,
                _ => {
                    s.delayed.insert(key.clone(), due);
                }
            }
        }
        let q = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(due).await;
            let still = {
                let mut s = q.state();
                if s.delayed.get(&key) == Some(&due) {
                    s.delayed.remove(&key);
                    true
                } else {
                    false
                }
            };
            if still {
                q.add(key);
            }
        });
    }

    /// Queues `key` after its back-off (5 ms doubling with every failure, at most 1000 s).
    pub fn add_rate_limited(&self, key: impl Into<String>) {
        let key = key.into();
        let n = {
            let mut s = self.state();
            let n = s.failures.entry(key.clone()).or_insert(0);
            *n += 1;
            *n
        };
        self.add_after(key, back_off(n));
    }

    /// Forgets the failures of `key` (its sync succeeded).
    pub fn forget(&self, key: &str) {
        self.state().failures.remove(key);
    }

    /// The next key to sync, waiting for one; the caller calls [`Queue::done`] with it.
    pub async fn get(&self) -> String {
        loop {
            let ready = self.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            {
                let mut s = self.state();
                if let Some(k) = s.queue.pop_front() {
                    s.dirty.remove(&k);
                    s.processing.insert(k.clone());
                    let more = !s.queue.is_empty();
                    drop(s);
                    if more {
                        // Another worker may be waiting for the rest.
                        self.ready.notify_one();
                    }
                    return k;
                }
            }
            ready.await;
        }
    }

    /// Ends the sync of `key`; queued again if it was added meanwhile.
    pub fn done(&self, key: &str) {
        let mut s = self.state();
        s.processing.remove(key);
        if s.dirty.contains(key) {
            s.queue.push_back(key.to_string());
            drop(s);
            self.ready.notify_one();
        }
    }

    /// How many keys wait (not counting delayed ones).
    pub fn len(&self) -> usize {
        self.state().queue.len()
    }

    /// Whether no key waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The delay after the `n`-th failure in a row (`n` ≥ 1).
fn back_off(n: u32) -> Duration {
    let factor = 2u32.saturating_pow(n.saturating_sub(1).min(31));
    BASE_DELAY.saturating_mul(factor).min(MAX_DELAY)
}

/// What a sync asks of the queue when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synced {
    /// Done until something changes.
    Done,
    /// Done; look again after this delay (a timer the sync asked for).
    After(Duration),
    /// Failed: try again after the key's back-off.
    Retry,
}

impl Synced {
    /// [`Synced::After`] for `Some`, else [`Synced::Done`].
    pub fn after(d: Option<Duration>) -> Self {
        d.map_or(Synced::Done, Synced::After)
    }
}

/// Runs `workers` workers on `queue` until the returned set is dropped: each takes a key,
/// runs `sync` on it and does what the result says (client-go's `processNextWorkItem`).
pub fn run_workers<F, Fut>(queue: &Queue, workers: usize, sync: F) -> JoinSet<()>
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Synced> + Send + 'static,
{
    let sync = Arc::new(sync);
    let mut set = JoinSet::new();
    for _ in 0..workers.max(1) {
        let (q, sync) = (queue.clone(), sync.clone());
        set.spawn(async move {
            loop {
                let key = q.get().await;
                tracing::trace!(%key, "sync");
                let r = sync(key.clone()).await;
                tracing::trace!(%key, ?r, "synced");
                match r {
                    Synced::Done => q.forget(&key),
                    Synced::After(d) => {
                        q.forget(&key);
                        q.add_after(key.clone(), d);
                    }
                    Synced::Retry => q.add_rate_limited(key.clone()),
                }
                q.done(&key);
            }
        });
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_waits_once_and_comes_back_when_added_during_its_sync() {
        let q = Queue::new();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        let a = q.get().await;
        assert_eq!(a, "a");
        // Added while a worker syncs it: not handed out twice at once.
        q.add("a");
        assert_eq!(q.get().await, "b");
        assert!(q.is_empty());
        q.done("a");
        assert_eq!(q.get().await, "a", "queued again at done");
        q.done("a");
        q.done("b");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delays_keep_the_earliest_and_failures_back_off() {
        let q = Queue::new();
        let t0 = Instant::now();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(2));
        q.add_after("a", Duration::from_secs(5));
        assert_eq!(q.get().await, "a");
        assert_eq!(t0.elapsed(), Duration::from_secs(2));
        q.done("a");
        for (n, want) in [(1, 5), (2, 10), (3, 20)] {
            let t = Instant::now();
            q.add_rate_limited("a");
            assert_eq!(q.get().await, "a");
            assert_eq!(t.elapsed(), Duration::from_millis(want), "failure {n}");
            q.done("a");
        }
        q.forget("a");
        let t = Instant::now();
        q.add_rate_limited("a");
        assert_eq!(q.get().await, "a");
        assert_eq!(t.elapsed(), Duration::from_millis(5), "forgotten");
        assert_eq!(back_off(40), MAX_DELAY);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn workers_never_sync_one_key_twice_at_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let q = Queue::new();
        let busy = Arc::new(Mutex::new(HashSet::<String>::new()));
        let syncs = Arc::new(AtomicUsize::new(0));
        let twice = Arc::new(AtomicUsize::new(0));
        let (b, n, t) = (busy.clone(), syncs.clone(), twice.clone());
        let _workers = run_workers(&q, 4, move |k| {
            let (b, n, t) = (b.clone(), n.clone(), t.clone());
            async move {
                if !b.lock().unwrap().insert(k.clone()) {
                    t.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                b.lock().unwrap().remove(&k);
                n.fetch_add(1, Ordering::SeqCst);
                Synced::Done
            }
        });
        for i in 0..200 {
            q.add(format!("k{}", i % 3));
            tokio::task::yield_now().await;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(q.is_empty() && busy.lock().unwrap().is_empty()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let n = syncs.load(Ordering::SeqCst);
        assert!((3..=200).contains(&n), "{n} syncs");
        assert_eq!(
            twice.load(Ordering::SeqCst),
            0,
            "a key synced twice at once"
        );
    }
}
