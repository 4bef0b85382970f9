//! The kubelet's crash back-off: `flowcontrol.Backoff` for one container, and `doBackOff`.
//!
//! Times are milliseconds on any monotonic axis the caller chooses (the local kubelet uses the
//! pod's start); durations are milliseconds. No clock is read here: every call takes `now`.
//!
//! Source: `staging/src/k8s.io/client-go/util/flowcontrol/backoff.go` (`Backoff`: `Get`, `Next`,
//! `IsInBackOffSince`, `IsInBackOffSinceUpdate`, `hasExpired`) and
//! `pkg/kubelet/kuberuntime/kuberuntime_manager.go` `doBackOff`; the kubelet's back-off is
//! `flowcontrol.NewBackOff(backOffPeriod, MaxContainerBackOff)` (`pkg/kubelet/kubelet.go`), 10 s
//! doubling to 300 s, without jitter. Holds for Kubernetes 1.18 to 1.37 with default feature gates
//! (`KubeletCrashLoopBackOffMax` and `ReduceDefaultCrashLoopBackOffDecay`, alpha from 1.32/1.33 and
//! off by default, change the figures; not modelled).

/// `backOffPeriod`: the kubelet's first back-off, 10 s, in milliseconds.
pub const CRASH_LOOP_INITIAL_MS: u64 = 10_000;
/// `MaxContainerBackOff`: the kubelet's longest back-off, 300 s, in milliseconds.
pub const CRASH_LOOP_MAX_MS: u64 = 300_000;

/// `flowcontrol.Backoff` for one key (the kubelet keys it by pod UID, container name and
/// container spec hash): the current back-off and when it was last moved, without jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial_ms: u64,
    max_ms: u64,
    /// `(backoff, lastUpdate)`, both milliseconds; `None` before the first `Next` or after
    /// `Reset`.
    entry: Option<(u64, u64)>,
}

impl Backoff {
    /// A back-off starting at `initial_ms` and doubling up to `max_ms` (milliseconds).
    pub const fn new(initial_ms: u64, max_ms: u64) -> Self {
        Backoff {
            initial_ms,
            max_ms,
            entry: None,
        }
    }

    /// The kubelet's container back-off: 10 s doubling to 300 s.
    pub const fn crash_loop() -> Self {
        Backoff::new(CRASH_LOOP_INITIAL_MS, CRASH_LOOP_MAX_MS)
    }

    /// `Get`: the current back-off in milliseconds, 0 when there is none.
    pub fn get(&self) -> u64 {
        self.entry.map_or(0, |(b, _)| b)
    }

    /// `hasExpired`: stable again once an event comes more than twice the maximum after the last
    /// update (strictly more).
    fn has_expired(&self, event_ms: u64, last_update_ms: u64) -> bool {
        event_ms.saturating_sub(last_update_ms) > self.max_ms.saturating_mul(2)
    }

    /// `Next(id, eventTime)` at `now_ms`: starts at the initial back-off when there is none or it
    /// has expired at `event_ms`, else doubles it up to the maximum; the last update becomes
    /// `now_ms`.
    pub fn next(&mut self, event_ms: u64, now_ms: u64) {
        let backoff = match self.entry {
            Some((b, last)) if !self.has_expired(event_ms, last) => {
                b.saturating_mul(2).min(self.max_ms)
            }
            _ => self.initial_ms,
        };
        self.entry = Some((backoff, now_ms));
    }

    /// `Reset`: forgets the back-off.
    pub fn reset(&mut self) {
        self.entry = None;
    }

    /// `IsInBackOffSince(id, eventTime)` at `now_ms`: less than the back-off has passed since
    /// `event_ms`, unless it has expired at `event_ms`.
    pub fn is_in_back_off_since(&self, event_ms: u64, now_ms: u64) -> bool {
        match self.entry {
            None => false,
            Some((_, last)) if self.has_expired(event_ms, last) => false,
            Some((b, _)) => now_ms.saturating_sub(event_ms) < b,
        }
    }

    /// `IsInBackOffSinceUpdate(id, eventTime)`: less than the back-off has passed between the
    /// last update and `event_ms`, unless it has expired.
    pub fn is_in_back_off_since_update(&self, event_ms: u64) -> bool {
        match self.entry {
            None => false,
            Some((_, last)) if self.has_expired(event_ms, last) => false,
            Some((b, last)) => event_ms.saturating_sub(last) < b,
        }
    }

    /// `doBackOff` for a container that finished at `finished_ms`, then the sync that restarts
    /// it: the wait in milliseconds before the restart (0 for the first exit, and again once the
    /// back-off has expired: a container that ran more than 10 minutes since its last restart
    /// starts over). While it waits the kubelet reports `CrashLoopBackOff` and the `BackOff`
    /// event ("Back-off restarting failed container"); at the restart it calls `Next` with the
    /// exit's finish time, which moves the back-off (last update: the restart).
    pub fn restart_after_exit(&mut self, finished_ms: u64) -> u64 {
        // The sync right after the exit: in back-off while less than the back-off has passed.
        let wait = if self.is_in_back_off_since(finished_ms, finished_ms) {
            self.get()
        } else {
            0
        };
        let restart_ms = finished_ms.saturating_add(wait);
        self.next(finished_ms, restart_ms);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_loop_waits_0_then_10_s_doubling_to_300_s() {
        let mut b = Backoff::crash_loop();
        let mut t = 0;
        let mut waits = Vec::new();
        for _ in 0..9 {
            // Each instance crashes 1 s after it started.
            t += 1_000;
            let w = b.restart_after_exit(t);
            waits.push(w / 1000);
            t += w;
        }
        assert_eq!(waits, [0, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn a_container_that_ran_over_ten_minutes_since_its_restart_starts_over() {
        let mut b = Backoff::crash_loop();
        assert_eq!(b.restart_after_exit(1_000), 0);
        assert_eq!(b.restart_after_exit(2_000), 10_000);
        // Restarted at 12 s; runs 600 s: not more than twice the maximum, still in back-off.
        assert_eq!(b.restart_after_exit(612_000), 20_000);
        // Restarted at 632 s; runs 600.001 s: expired, restarts at once, then 10 s.
        assert_eq!(b.restart_after_exit(1_232_001), 0);
        assert_eq!(b.restart_after_exit(1_233_000), 10_000);
    }
}
