//! When new connections have stopped arriving: the decision of `podgrace prestop-wait` and of
//! [`Shutdown`](crate::Shutdown)'s quiescence phase, as a state machine without I/O or clock.
//!
//! Every instant is a [`Duration`] since the wait began (the preStop hook's start, or the stop
//! signal for an app). The caller reports what it observed ([`Quiescence::connections`],
//! [`Quiescence::endpoints`]) and asks what to do ([`Quiescence::poll`]):
//!
//! * **quiet**: no new connection has arrived for [`QuietPolicy::quiet`], counted from the
//!   observation that saw the last one (so the real quiet time is at least `quiet`, and at most
//!   `quiet` plus one sampling interval), and, when the pod's EndpointSlice entries are
//!   watched, from the moment they were seen no longer `ready` (a proxy still routes for its
//!   own lag after that moment, and a quiet pod with few clients must not return before
//!   the removal has had `quiet` to take effect);
//! * never before [`QuietPolicy::min`];
//! * at [`QuietPolicy::max`] it is done anyway ([`Reason::Max`]).
//!
//! Why a quiet window rather than a fixed `sleep`: the endpoint lag (the time until every
//! kube-proxy, ingress and cloud load balancer stops sending new connections) varies per pod and
//! per cluster; a fixed sleep is too short for a slow load balancer and wastes its whole length
//! behind a fast one. Upstream calls the preStop sleep a workaround (KEP-3960, "Sleep action for
//! PreStop hook": "a common pattern is to add a sleep in the preStop hook ... to allow endpoints
//! to be removed from load balancers"); the quiet window waits for the effect instead.

use std::time::Duration;

/// The three durations of a wait. Defaults: `quiet` 1 s, `min` 0, `max` 20 s (which leaves 10 s
/// of Kubernetes' default 30 s terminationGracePeriodSeconds to the app's own drain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietPolicy {
    /// How long no new connection must have arrived.
    pub quiet: Duration,
    /// The wait never ends before this.
    pub min: Duration,
    /// The wait ends at this at the latest, quiet or not.
    pub max: Duration,
}

impl Default for QuietPolicy {
    fn default() -> Self {
        QuietPolicy {
            quiet: Duration::from_secs(1),
            min: Duration::ZERO,
            max: Duration::from_secs(20),
        }
    }
}

/// A [`QuietPolicy`] that cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuietPolicyError {
    /// `max` is below `min`: the wait would have to end before it may.
    #[error("--max ({max:?}) is below --min ({min:?})")]
    MaxBelowMin {
        /// The policy's `min`.
        min: Duration,
        /// The policy's `max`, below `min`.
        max: Duration,
    },
}

impl QuietPolicy {
    /// Checks the policy. Errors: [`QuietPolicyError::MaxBelowMin`].
    pub fn validate(self) -> Result<QuietPolicy, QuietPolicyError> {
        if self.max < self.min {
            return Err(QuietPolicyError::MaxBelowMin {
                min: self.min,
                max: self.max,
            });
        }
        Ok(self)
    }
}

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Quiet for [`QuietPolicy::quiet`] (and not before `min`; endpoints no longer ready if
    /// watched).
    Quiet,
    /// [`QuietPolicy::max`] was reached first.
    Max,
}

/// How a wait ended, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Quiet, or the maximum reached.
    pub reason: Reason,
    /// When it ended, since the wait began.
    pub at: Duration,
    /// When the quiet window began: the observation that saw the last new connection, or the
    /// moment the endpoints were seen not ready, whichever came later; 0 if neither happened.
    pub quiet_since: Duration,
    /// New connections seen during the whole wait.
    pub connections: u64,
    /// The observation that saw the last new connection, if any came.
    pub last_connection: Option<Duration>,
    /// When the pod's endpoints were first seen not ready (`None`: not watched, or still ready).
    pub endpoints_not_ready: Option<Duration>,
}

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Keep observing. Nothing can end the wait before `until` unless an observation changes
    /// (with no new connection and no endpoint change, the wait ends exactly at `until`).
    Wait {
        /// When the wait ends if nothing changes, since the wait began.
        until: Duration,
    },
    /// The wait is over.
    Done(Outcome),
}

/// Whether the pod's EndpointSlice entries are watched, and what was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoints {
    NotWatched,
    Ready,
    NotReadySince(Duration),
}

/// The state of one wait. See the module docs.
#[derive(Debug, Clone)]
pub struct Quiescence {
    policy: QuietPolicy,
    connections: u64,
    last_connection: Option<Duration>,
    endpoints: Endpoints,
}

impl Quiescence {
    /// A wait that began at 0. With `watch_endpoints`, it is not quiet until
    /// [`Quiescence::endpoints`] reports the pod's entries no longer ready (it begins as ready).
    pub fn new(policy: QuietPolicy, watch_endpoints: bool) -> Self {
        Quiescence {
            policy,
            connections: 0,
            last_connection: None,
            endpoints: if watch_endpoints {
                Endpoints::Ready
            } else {
                Endpoints::NotWatched
            },
        }
    }

    /// The policy this wait follows.
    pub fn policy(&self) -> QuietPolicy {
        self.policy
    }

    /// `new` connections arrived since the previous observation, observed at `at`. The quiet
    /// window restarts at `at` when `new > 0`.
    pub fn connections(&mut self, at: Duration, new: u64) {
        if new > 0 {
            self.connections = self.connections.saturating_add(new);
            self.last_connection = Some(self.last_connection.map_or(at, |l| l.max(at)));
        }
    }

    /// The pod's endpoints were seen `ready` (some entry still ready) or not at `at`. Ignored
    /// when endpoints are not watched. Once seen not ready, a later "ready" (an entry that came
    /// back) restarts the watch.
    pub fn endpoints(&mut self, at: Duration, ready: bool) {
        self.endpoints = match (self.endpoints, ready) {
            (Endpoints::NotWatched, _) => Endpoints::NotWatched,
            (_, true) => Endpoints::Ready,
            (Endpoints::Ready, false) => Endpoints::NotReadySince(at),
            (Endpoints::NotReadySince(t), false) => Endpoints::NotReadySince(t),
        };
    }

    /// Total new connections seen so far.
    pub fn total_connections(&self) -> u64 {
        self.connections
    }

    /// When the quiet window began, `None` while the endpoints are still ready.
    fn quiet_since(&self) -> Option<Duration> {
        let last = self.last_connection.unwrap_or(Duration::ZERO);
        match self.endpoints {
            Endpoints::NotWatched => Some(last),
            Endpoints::Ready => None,
            Endpoints::NotReadySince(t) => Some(last.max(t)),
        }
    }

    /// The decision at `at` (not earlier than the last observation).
    pub fn poll(&self, at: Duration) -> Step {
        let p = self.policy;
        let outcome = |reason, quiet_since: Option<Duration>| Outcome {
            reason,
            at,
            quiet_since: quiet_since.unwrap_or(Duration::ZERO),
            connections: self.connections,
            last_connection: self.last_connection,
            endpoints_not_ready: match self.endpoints {
                Endpoints::NotReadySince(t) => Some(t),
                _ => None,
            },
        };
        let quiet_since = self.quiet_since();
        let quiet_end = quiet_since.map(|s| s.saturating_add(p.quiet).max(p.min));
        match quiet_end {
            Some(end) if at >= end && end <= p.max => {
                Step::Done(outcome(Reason::Quiet, quiet_since))
            }
            _ if at >= p.max => Step::Done(outcome(Reason::Max, quiet_since)),
            Some(end) => Step::Wait {
                until: end.min(p.max),
            },
            None => Step::Wait { until: p.max },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    fn policy(quiet: f64, min: f64, max: f64) -> QuietPolicy {
        QuietPolicy {
            quiet: s(quiet),
            min: s(min),
            max: s(max),
        }
    }

    fn done(step: Step) -> Outcome {
        match step {
            Step::Done(o) => o,
            Step::Wait { until } => panic!("still waiting until {until:?}"),
        }
    }

    #[test]
    fn with_no_connection_it_is_quiet_after_the_quiet_window() {
        let q = Quiescence::new(policy(1.0, 0.0, 60.0), false);
        assert_eq!(q.poll(s(0.0)), Step::Wait { until: s(1.0) });
        assert_eq!(q.poll(s(0.9)), Step::Wait { until: s(1.0) });
        let o = done(q.poll(s(1.0)));
        assert_eq!(o.reason, Reason::Quiet);
        assert_eq!(o.at, s(1.0));
        assert_eq!(o.connections, 0);
        assert_eq!(o.last_connection, None);
    }

    #[test]
    fn each_new_connection_restarts_the_quiet_window() {
        let mut q = Quiescence::new(policy(1.0, 0.0, 60.0), false);
        for t in [0.1, 0.5, 1.2, 2.0] {
            q.connections(s(t), 3);
            assert_eq!(q.poll(s(t)), Step::Wait { until: s(t + 1.0) }, "at {t}");
        }
        // No connection in (2.0, 2.9]: still within the window.
        q.connections(s(2.9), 0);
        assert_eq!(q.poll(s(2.9)), Step::Wait { until: s(3.0) });
        let o = done(q.poll(s(3.0)));
        assert_eq!(o.reason, Reason::Quiet);
        assert_eq!(o.connections, 12);
        assert_eq!(o.last_connection, Some(s(2.0)));
        assert_eq!(o.quiet_since, s(2.0));
    }

    #[test]
    fn it_never_ends_before_min() {
        let q = Quiescence::new(policy(1.0, 5.0, 60.0), false);
        assert_eq!(q.poll(s(1.0)), Step::Wait { until: s(5.0) });
        assert_eq!(q.poll(s(4.999)), Step::Wait { until: s(5.0) });
        assert_eq!(done(q.poll(s(5.0))).reason, Reason::Quiet);
        // A connection at 4.5 s pushes the end past min.
        let mut q = Quiescence::new(policy(1.0, 5.0, 60.0), false);
        q.connections(s(4.5), 1);
        assert_eq!(q.poll(s(5.0)), Step::Wait { until: s(5.5) });
        assert_eq!(done(q.poll(s(5.5))).at, s(5.5));
    }

    #[test]
    fn at_max_it_ends_while_connections_still_arrive() {
        let mut q = Quiescence::new(policy(1.0, 0.0, 3.0), false);
        let mut t = 0.0;
        while t < 3.0 {
            q.connections(s(t), 1);
            assert!(matches!(q.poll(s(t)), Step::Wait { .. }), "at {t}");
            t += 0.25;
        }
        // The last window (from 2.75 s) would end at 3.75 s: max comes first.
        q.connections(s(2.75), 1);
        assert_eq!(q.poll(s(2.75)), Step::Wait { until: s(3.0) });
        let o = done(q.poll(s(3.0)));
        assert_eq!(o.reason, Reason::Max);
        assert_eq!(o.at, s(3.0));
        assert_eq!(o.last_connection, Some(s(2.75)));
    }

    #[test]
    fn a_quiet_window_that_ends_exactly_at_max_is_quiet() {
        let mut q = Quiescence::new(policy(1.0, 0.0, 3.0), false);
        q.connections(s(2.0), 1);
        assert_eq!(done(q.poll(s(3.0))).reason, Reason::Quiet);
    }

    #[test]
    fn zero_quiet_ends_at_min_and_zero_max_at_once() {
        let q = Quiescence::new(policy(0.0, 0.0, 10.0), false);
        assert_eq!(done(q.poll(s(0.0))).reason, Reason::Quiet);
        let q = Quiescence::new(policy(1.0, 0.0, 0.0), false);
        assert_eq!(done(q.poll(s(0.0))).reason, Reason::Max);
    }

    #[test]
    fn watched_endpoints_hold_the_wait_until_not_ready_then_a_quiet_window_more() {
        let mut q = Quiescence::new(policy(1.0, 0.0, 60.0), true);
        // Quiet for a long time, but still ready: wait (until max at the latest).
        assert_eq!(q.poll(s(5.0)), Step::Wait { until: s(60.0) });
        q.endpoints(s(5.0), true);
        assert_eq!(q.poll(s(6.0)), Step::Wait { until: s(60.0) });
        // Not ready at 7 s: one more quiet window from then, although no connection came.
        q.endpoints(s(7.0), false);
        assert_eq!(q.poll(s(7.0)), Step::Wait { until: s(8.0) });
        // Later "not ready" reports keep the first instant.
        q.endpoints(s(7.5), false);
        assert_eq!(q.poll(s(7.5)), Step::Wait { until: s(8.0) });
        // A connection after the removal (a lagging proxy) restarts the window.
        q.connections(s(7.6), 2);
        assert_eq!(q.poll(s(8.0)), Step::Wait { until: s(8.6) });
        let o = done(q.poll(s(8.6)));
        assert_eq!(o.reason, Reason::Quiet);
        assert_eq!(o.endpoints_not_ready, Some(s(7.0)));
        assert_eq!(o.quiet_since, s(7.6));
    }

    #[test]
    fn an_endpoint_that_becomes_ready_again_restarts_the_watch() {
        let mut q = Quiescence::new(policy(1.0, 0.0, 60.0), true);
        q.endpoints(s(1.0), false);
        q.endpoints(s(1.5), true);
        assert_eq!(q.poll(s(3.0)), Step::Wait { until: s(60.0) });
        q.endpoints(s(4.0), false);
        assert_eq!(q.poll(s(4.0)), Step::Wait { until: s(5.0) });
    }

    #[test]
    fn endpoint_reports_are_ignored_when_not_watched() {
        let mut q = Quiescence::new(policy(1.0, 0.0, 60.0), false);
        q.endpoints(s(0.5), true);
        assert_eq!(done(q.poll(s(1.0))).reason, Reason::Quiet);
    }

    #[test]
    fn max_below_min_is_refused() {
        assert_eq!(
            policy(1.0, 5.0, 2.0).validate(),
            Err(QuietPolicyError::MaxBelowMin {
                min: s(5.0),
                max: s(2.0)
            })
        );
        assert!(policy(1.0, 5.0, 5.0).validate().is_ok());
    }

    #[test]
    fn connection_counts_saturate_instead_of_overflowing() {
        let mut q = Quiescence::new(policy(1.0, 0.0, 60.0), false);
        q.connections(s(0.1), u64::MAX);
        q.connections(s(0.2), 5);
        assert_eq!(q.total_connections(), u64::MAX);
    }

    #[test]
    fn huge_durations_do_not_overflow() {
        let mut q = Quiescence::new(policy(f64::from(u32::MAX), 0.0, 1.0e12), false);
        q.connections(Duration::MAX, 1);
        assert!(matches!(q.poll(s(1.0)), Step::Wait { .. }));
        assert_eq!(done(q.poll(Duration::MAX)).reason, Reason::Max);
    }
}
