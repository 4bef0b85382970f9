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
//! since the runner's loop started), nothing here reads a clock or sleeps.
//!
//! Upstream, as kube-proxy 1.32 runs it (checked against the source, not from memory):
//! `pkg/util/async/bounded_frequency_runner.go` of kubernetes/kubernetes, read at commit
//! 2d58ef7868e6efda493e876aeaf72fb7dfea7c44 (the runner with `RetryAfter` and `klog/v2`, as it
//! stood until it moved to `pkg/proxy/runner` after 1.32), and its test file
//! `bounded_frequency_runner_test.go` at 478fadccffeb4ab8bf0f61f6a30a54078cc7d328; the iptables
//! proxier (`pkg/proxy/iptables/proxier.go` `NewProxier`, the one with `localhostNodePorts` and
//! `conntrackTCPLiberal`) makes it as `NewBoundedFrequencyRunner("sync-runner", syncProxyRules,
//! minSyncPeriod, time.Hour, burstSyncs = 2)`:
//! * `tryRun`: if `limiter.TryAccept()`, run the function, set `lastRun` to the time it
//!   *ended*, and reset the one timer to `maxInterval` (1 h: an hourly sync without changes);
//!   else reset the timer to `min(minInterval − (now − lastRun), time left on the timer)`;
//! * the limiter is `k8s.io/client-go/util/flowcontrol` `NewTokenBucketRateLimiterWithClock(qps
//!   = 1 s / minInterval, burst)`, i.e. `golang.org/x/time/rate`'s `AllowN(now, 1)`: the bucket
//!   starts full and refills continuously; `minInterval` 0 is `nullLimiter` (always runs);
//! * `Run()` and the timer both call `tryRun`; calls while the function runs are coalesced
//!   into one (a channel of one).
//!
//! So a request can run before `minInterval` has passed since the last sync when the bucket
//! holds a token again (upstream's test: runs at 0 and 1 ms, then one at 1000 ms although the
//! last ran 999 ms before), and a put-off sync runs `minInterval` after the last one *ended*.
//!
//! Where this model differs, and why it does not matter for a drill: a retry that falls due
//! with the bucket a float rounding short of a token is taken at once here (1e-9 tolerance);
//! upstream re-arms its timer for 0 ns and takes it microseconds later. A `minInterval` above
//! `maxInterval` makes upstream panic at construction; here `maxInterval` is raised to it. This
//! model was first written from memory; checked against the source it was right but for the
//! hourly timer, now modelled ([`SyncRunner::timer_at`]), and the unit tests below replay
//! upstream's two runner tests.
//!
//! Releases after 1.32 moved the runner to `pkg/proxy/runner` and dropped the burst (a sync
//! starts at least `minInterval` after the last one ended, `maxInterval` is the periodic sync):
//! `burst 1` comes close to it.

use std::time::Duration;

/// kube-proxy's default `--iptables-min-sync-period`: 1 s.
pub const DEFAULT_MIN_SYNC_PERIOD: Duration = Duration::from_secs(1);
/// kube-proxy's burst of syncs (`burstSyncs` in the iptables proxier): 2.
pub const BURST_SYNCS: u32 = 2;
/// The iptables proxier's `maxInterval` (`time.Hour`): a sync at least this often, changes or
/// not.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// The bounded-frequency runner of kube-proxy's syncs, without its clock.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncRunner {
    min_interval: Duration,
    max_interval: Duration,
    burst: f64,
    /// Tokens in the bucket at `stamp`.
    tokens: f64,
    stamp: Duration,
    /// When the last sync ended.
    last_run: Option<Duration>,
    /// When the runner's timer fires: a put-off sync, or the periodic one.
    timer: Duration,
}

impl SyncRunner {
    /// A runner whose loop starts at time 0, with `min_interval` (`--iptables-min-sync-period`),
    /// `max_interval` (the periodic sync; raised to `min_interval` if below it) and `burst`
    /// syncs (at least 1), its bucket full and its timer at `max_interval`. A zero
    /// `min_interval` lets every sync run at once.
    pub fn new(min_interval: Duration, max_interval: Duration, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        let max_interval = max_interval.max(min_interval);
        SyncRunner {
            min_interval,
            max_interval,
            burst,
            tokens: burst,
            stamp: Duration::ZERO,
            last_run: None,
            timer: max_interval,
        }
    }

    /// kube-proxy 1.32's iptables runner: 1 s, 1 h, burst 2.
    pub fn kube_proxy_default() -> Self {
        SyncRunner::new(DEFAULT_MIN_SYNC_PERIOD, MAX_INTERVAL, BURST_SYNCS)
    }

    /// `tryRun` at `now`, for `Run()` (an endpoint change arrived) or the timer firing: `true`
    /// when the sync runs now (call [`SyncRunner::completed`] when it has ended); `false` when
    /// it was put off (the timer then fires at [`SyncRunner::timer_at`]).
    pub fn request(&mut self, now: Duration) -> bool {
        if self.min_interval.is_zero() || self.try_accept(now) {
            return true;
        }
        let elapsed = self
            .last_run
            .map_or(Duration::MAX, |l| now.saturating_sub(l));
        let next_possible = now + self.min_interval.saturating_sub(elapsed);
        self.timer = self.timer.min(next_possible);
        false
    }

    /// The sync that [`SyncRunner::request`] let run ended at `now`: `lastRun`, and the timer
    /// reset to the periodic sync.
    pub fn completed(&mut self, now: Duration) {
        self.last_run = Some(now);
        self.timer = now.saturating_add(self.max_interval);
    }

    /// When the timer fires (call [`SyncRunner::request`] then): a put-off sync, or the periodic
    /// one `max_interval` after the last.
    pub fn timer_at(&self) -> Duration {
        self.timer
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
            match change {
                Some(i) => pending.push(i),
                // A timer that a later sync re-armed does not fire.
                None if r.timer_at() != ms(t) => continue,
                None => {}
            }
            let now = t.max(busy_until);
            if r.request(ms(now)) {
                let end = now + sync_ms;
                r.completed(ms(end));
                busy_until = end;
                for i in pending.drain(..) {
                    out[i] = Some(end);
                }
            } else {
                let at = r.timer_at();
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
        assert_eq!(r.timer_at(), ms(1_010));
        // By then one token has come back (0 + 1 s).
        assert!(r.request(ms(1_010)));
        r.completed(ms(1_010));
        assert!(!r.request(ms(1_500)));
        assert_eq!(r.timer_at(), ms(2_010));
    }

    /// One step of upstream's fake-timer tests: at `at` ms, `Run()` or the timer firing; the
    /// sync runs (taking no time, as there) or not, and the timer is then set `timer_in` ms
    /// ahead (`maxInterval` after a run, the put-off sync otherwise).
    fn step(r: &mut SyncRunner, at: u64, ran: bool, timer_in: u64) {
        let now = ms(at);
        assert_eq!(r.request(now), ran, "at {at} ms");
        if ran {
            r.completed(now);
        }
        assert_eq!(r.timer_at(), now + ms(timer_in), "timer after {at} ms");
    }

    /// `Test_BoundedFrequencyRunnerNoBurst` of upstream's `bounded_frequency_runner_test.go`
    /// (minInterval 1 s, maxInterval 10 s, burst 1), replayed on this model.
    #[test]
    fn upstream_timeline_without_burst() {
        let max = 10_000;
        let mut r = SyncRunner::new(ms(1_000), ms(max), 1);
        assert_eq!(
            r.timer_at(),
            ms(max),
            "the loop starts with the timer at maxInterval"
        );
        step(&mut r, 0, true, max);
        step(&mut r, 500, false, 500);
        step(&mut r, 999, false, 1);
        step(&mut r, 1_000, true, max); // the put-off run
        step(&mut r, 1_000, false, 1_000);
        step(&mut r, 1_001, false, 999);
        assert_eq!(r.timer_at(), ms(2_000), "nothing before");
        step(&mut r, 2_000, true, max);
        assert_eq!(
            r.timer_at(),
            ms(12_000),
            "no run queued: the next is periodic"
        );
        step(&mut r, 12_000, true, max); // maxInterval
        step(&mut r, 12_001, false, 999);
        step(&mut r, 13_000, true, max);
    }

    /// `Test_BoundedFrequencyRunnerBurst` (burst 2), replayed.
    #[test]
    fn upstream_timeline_with_burst() {
        let max = 10_000;
        let mut r = SyncRunner::new(ms(1_000), ms(max), 2);
        step(&mut r, 0, true, max);
        step(&mut r, 1, true, max); // the burst
        step(&mut r, 499, false, 502);
        step(&mut r, 500, false, 501);
        step(&mut r, 501, false, 500);
        // The bucket has a token again at 1000 ms, though the last run was 999 ms before: a
        // Run() then runs at once (the put-off one was due at 1001 ms).
        assert_eq!(r.timer_at(), ms(1_001));
        step(&mut r, 1_000, true, max);
        step(&mut r, 1_001, false, 999);
        step(&mut r, 1_999, false, 1);
        step(&mut r, 2_000, true, max);
        // The burst refilled.
        step(&mut r, 4_000, true, max);
        step(&mut r, 4_000, true, max);
        step(&mut r, 4_000, false, 1_000);
        step(&mut r, 5_000, true, max);
        step(&mut r, 15_000, true, max); // maxInterval
    }

    #[test]
    fn zero_min_sync_period_never_waits() {
        let mut r = SyncRunner::new(Duration::ZERO, MAX_INTERVAL, BURST_SYNCS);
        for t in 0..10 {
            assert!(r.request(ms(t)));
            r.completed(ms(t));
        }
    }
}
