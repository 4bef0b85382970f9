//! kube-proxy's sync timing: when an endpoint change reaches the iptables rules.
//!
//! kube-proxy (iptables mode) does not apply each EndpointSlice change as it arrives: every
//! change asks its bounded-frequency runner for a sync, and the runner runs `syncProxyRules` at
//! once only while its token bucket has a token (burst 2, refilled at one per `minSyncPeriod`,
//! default 1 s); otherwise it schedules the sync for `minSyncPeriod` after the last one ended.
//! So a removal lands within milliseconds when a slot is free, and about a second later when
//! the changes before it (a new pod added, then Ready) used the slots up: recorded on a real
//! kube-proxy 1.32 as 29 and 78 ms for 2 of 12 old pods and 906–1077 ms for the other 10
//! (`cases/real-kube-proxy-1.32.md`).
//!
//! [`SyncRunner`] is that runner as a pure state machine: time is an argument (a [`Duration`]
//! since any fixed instant), nothing here reads a clock or sleeps.
//!
//! Upstream: `pkg/util/async/bounded_frequency_runner.go` (`BoundedFrequencyRunner.tryRun`:
//! `limiter.TryAccept()`, else a retry at `minInterval − elapsed since lastRun`), with the limiter
//! of `k8s.io/client-go/util/flowcontrol` `NewTokenBucketRateLimiter(qps = 1/minInterval,
//! burst)` (`golang.org/x/time/rate`: the bucket starts full), as `pkg/proxy/iptables/proxier.go`
//! makes it (`burstSyncs = 2`); Kubernetes 1.28–1.32. Later releases moved the runner to
//! `pkg/proxy/runner` and dropped the burst (a sync starts at least `minInterval` after the last
//! one ended): `burst 1` comes close to it.

use std::time::Duration;

/// kube-proxy's default `--iptables-min-sync-period`: 1 s.
pub const DEFAULT_MIN_SYNC_PERIOD: Duration = Duration::from_secs(1);
/// kube-proxy's burst of syncs (`burstSyncs` in the iptables proxier): 2.
pub const BURST_SYNCS: u32 = 2;

/// The bounded-frequency runner of kube-proxy's syncs, without its clock.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncRunner {
    min_interval: Duration,
    burst: f64,
    /// Tokens in the bucket at `stamp`.
    tokens: f64,
    stamp: Duration,
    /// When the last sync ended.
    last_run: Option<Duration>,
    /// When a sync that could not run at once is due.
    retry_at: Option<Duration>,
}

impl SyncRunner {
    /// A runner with `min_interval` (`--iptables-min-sync-period`) and `burst` syncs, its bucket
    /// full. A zero `min_interval` lets every sync run at once; `burst` is at least 1.
    pub fn new(min_interval: Duration, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        SyncRunner {
            min_interval,
            burst,
            tokens: burst,
            stamp: Duration::ZERO,
            last_run: None,
            retry_at: None,
        }
    }

    /// kube-proxy's defaults: 1 s, burst 2.
    pub fn kube_proxy_default() -> Self {
        SyncRunner::new(DEFAULT_MIN_SYNC_PERIOD, BURST_SYNCS)
    }

    /// `Run()` (an endpoint change arrived) or the retry timer fired, at `now`: `true` when the
    /// sync runs now (then call [`SyncRunner::completed`] when it has ended); `false` when it was
    /// put off to [`SyncRunner::retry_at`].
    pub fn request(&mut self, now: Duration) -> bool {
        if self.min_interval.is_zero() || self.try_accept(now) {
            self.retry_at = None;
            return true;
        }
        let elapsed = self
            .last_run
            .map_or(Duration::MAX, |l| now.saturating_sub(l));
        let next_possible = self.min_interval.saturating_sub(elapsed);
        let at = now + next_possible;
        self.retry_at = Some(self.retry_at.map_or(at, |r| r.min(at)));
        false
    }

    /// The sync that [`SyncRunner::request`] let run ended at `now` (`lastRun`).
    pub fn completed(&mut self, now: Duration) {
        self.last_run = Some(now);
    }

    /// When a put-off sync is due (call [`SyncRunner::request`] then), if one is.
    pub fn retry_at(&self) -> Option<Duration> {
        self.retry_at
    }

    /// The token bucket's `AllowN(now, 1)`: refill at one token per `min_interval` up to
    /// `burst`, then take one if there is one.
    fn try_accept(&mut self, now: Duration) -> bool {
        let elapsed = now.saturating_sub(self.stamp).as_secs_f64();
        let rate = 1.0 / self.min_interval.as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(self.burst);
        self.stamp = self.stamp.max(now);
        // A hair of tolerance for the float arithmetic of a refill that is due exactly now.
        if self.tokens >= 1.0 - 1e-9 {
            self.tokens = (self.tokens - 1.0).max(0.0);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Runs `changes` (ms) through a default runner, each sync taking `sync_ms`: when each
    /// change reached the rules (the sync that included it ended), ms.
    fn landed(changes: &[u64], sync_ms: u64) -> Vec<u64> {
        let mut r = SyncRunner::kube_proxy_default();
        let mut out = vec![None; changes.len()];
        let mut pending: Vec<usize> = Vec::new();
        let mut events: Vec<(u64, Option<usize>)> = changes
            .iter()
            .enumerate()
            .map(|(i, t)| (*t, Some(i)))
            .collect();
        let mut busy_until = 0;
        while let Some(pos) = (0..events.len()).min_by_key(|&k| events[k].0) {
            let (t, change) = events.remove(pos);
            if let Some(i) = change {
                pending.push(i);
            }
            let now = t.max(busy_until);
            if r.request(ms(now)) {
                let end = now + sync_ms;
                r.completed(ms(end));
                busy_until = end;
                for i in pending.drain(..) {
                    out[i] = Some(end);
                }
            } else if let Some(at) = r.retry_at() {
                if !events
                    .iter()
                    .any(|(t, c)| c.is_none() && *t == at.as_millis() as u64)
                {
                    events.push((at.as_millis() as u64, None));
                }
            }
        }
        out.into_iter()
            .map(|x| x.expect("every change synced"))
            .collect()
    }

    #[test]
    fn a_change_lands_at_once_while_the_burst_lasts() {
        // Two changes in a quiet period: both at once (burst 2).
        assert_eq!(landed(&[0, 300], 5), [5, 305]);
    }

    #[test]
    fn a_third_change_waits_for_the_min_sync_period_after_the_last_sync() {
        // A new pod added at 0 and Ready at 800 used both tokens; the old pod's removal at 850
        // waits until 1 s after the last sync ended (805 + 1000), about a second late, as the
        // recorded 906–1077 ms.
        let l = landed(&[0, 800, 850], 5);
        assert_eq!(l[..2], [5, 805]);
        assert_eq!(l[2], 1810, "{l:?}");
        assert!((900..=1_100).contains(&(l[2] - 850)));
    }

    #[test]
    fn changes_that_wait_together_go_in_one_sync() {
        let l = landed(&[0, 100, 200, 250], 0);
        assert_eq!(l, [0, 100, 1_100, 1_100]);
    }

    #[test]
    fn the_bucket_refills_one_token_per_period() {
        let mut r = SyncRunner::kube_proxy_default();
        assert!(r.request(ms(0)));
        r.completed(ms(0));
        assert!(r.request(ms(10)));
        r.completed(ms(10));
        assert!(!r.request(ms(20)), "both tokens used");
        assert_eq!(r.retry_at(), Some(ms(1_010)));
        // By then one token has come back (0 + 1 s).
        assert!(r.request(ms(1_010)));
        r.completed(ms(1_010));
        assert!(!r.request(ms(1_500)));
        assert_eq!(r.retry_at(), Some(ms(2_010)));
    }

    #[test]
    fn zero_min_sync_period_never_waits() {
        let mut r = SyncRunner::new(Duration::ZERO, BURST_SYNCS);
        for t in 0..10 {
            assert!(r.request(ms(t)));
            r.completed(ms(t));
        }
    }
}
