//! The quiescence wait as a blocking loop (what `podgrace prestop-wait` runs): sample the
//! connection counters every [`SAMPLE_INTERVAL`], feed [`Quiescence`], report each second.
//!
//! No async runtime and no thread of its own: a preStop hook that waits should cost almost
//! nothing (one small `/proc` read per sample). Endpoint readiness, when watched, comes from
//! elsewhere through [`EndpointsView`] (an atomic another thread keeps up to date).

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::connections::{ConnectionCounter, CounterError};
use crate::quiesce::{Outcome, Quiescence, QuietPolicy, Reason, Step};

/// How often the counters are read: 100 ms, so a wait ends at most 100 ms after its quiet window
/// (plus the time the hook takes to exit).
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// What another thread last learned about the pod's EndpointSlice entries (0: nothing yet).
#[derive(Debug, Default)]
pub struct EndpointsView(AtomicU8);

const READY: u8 = 1;
const NOT_READY: u8 = 2;

impl EndpointsView {
    /// Records whether some entry of the pod is still `ready`.
    pub fn set(&self, ready: bool) {
        self.0
            .store(if ready { READY } else { NOT_READY }, Ordering::SeqCst);
    }

    /// `None` until the first [`EndpointsView::set`].
    pub fn get(&self) -> Option<bool> {
        match self.0.load(Ordering::SeqCst) {
            READY => Some(true),
            NOT_READY => Some(false),
            _ => None,
        }
    }
}

/// What the wait reports as it goes. `Display` gives one log line (without a prefix).
#[derive(Debug)]
pub enum Progress<'a> {
    /// The wait began.
    Started {
        /// The quiet window, minimum and maximum the wait follows.
        policy: QuietPolicy,
        /// The ports watched; empty: every port of the network namespace.
        ports: &'a [u16],
        /// Whether the pod's EndpointSlice entries are watched too.
        endpoints: bool,
    },
    /// The whole second `second` (1, 2, ...) is over; `connections` arrived during it.
    Second {
        /// The second that ended, counted from 1 at the wait's start.
        second: u64,
        /// New connections seen during that second.
        connections: u64,
    },
    /// The pod's endpoints were first seen not ready.
    EndpointsNotReady {
        /// When, since the wait began.
        at: Duration,
    },
    /// The counters could not be read; the wait goes on as if connections were still arriving.
    CounterFailed {
        /// The first read error (later ones are not reported).
        error: &'a CounterError,
    },
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl fmt::Display for Progress<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Started {
                policy,
                ports,
                endpoints,
            } => {
                let on = if ports.is_empty() {
                    "in this network namespace".to_string()
                } else {
                    let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                    format!("on port {}", list.join(", "))
                };
                write!(
                    f,
                    "waiting until no new connection has arrived {on} for {} (at least {}, at most {})",
                    secs(policy.quiet),
                    secs(policy.min),
                    secs(policy.max)
                )?;
                if *endpoints {
                    write!(f, " and the pod's EndpointSlice entries are no longer ready")?;
                }
                Ok(())
            }
            Progress::Second {
                second,
                connections,
            } => write!(
                f,
                "{second} s: {connections} new connection{} in the last second",
                if *connections == 1 { "" } else { "s" }
            ),
            Progress::EndpointsNotReady { at } => {
                write!(f, "{}: the pod's endpoints are no longer ready", secs(*at))
            }
            Progress::CounterFailed { error } => write!(
                f,
                "cannot read the connection counters ({error}); waiting as if connections were still arriving"
            ),
        }
    }
}

/// The final line of a wait (without a prefix).
#[derive(Debug, Clone, Copy)]
pub struct Summary(pub Outcome, pub QuietPolicy);

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Summary(o, policy) = *self;
        let last = match o.last_connection {
            Some(t) => format!("the last new connection at {}", secs(t)),
            None => "no new connection".to_string(),
        };
        let n = o.connections;
        let all = format!("{n} connection{} in all", if n == 1 { "" } else { "s" });
        let endpoints = match o.endpoints_not_ready {
            Some(t) => format!(", endpoints not ready from {}", secs(t)),
            None => String::new(),
        };
        match o.reason {
            Reason::Quiet => write!(
                f,
                "quiet since {} ({last}, {all}{endpoints}): done after {}",
                secs(o.quiet_since),
                secs(o.at)
            ),
            Reason::Max => write!(
                f,
                "not quiet at the maximum of {} ({last}, {all}{endpoints}): done after {}",
                secs(policy.max),
                secs(o.at)
            ),
        }
    }
}

/// Waits as [`Quiescence`] decides, reading `counter` every [`SAMPLE_INTERVAL`] and `endpoints`
/// (when given) at each sample; `report` gets each [`Progress`]. Returns the outcome at the end.
/// Never fails: a counter that cannot be read is reported and counts as activity.
pub fn wait_blocking(
    policy: QuietPolicy,
    counter: &mut ConnectionCounter,
    endpoints: Option<&EndpointsView>,
    mut report: impl FnMut(Progress<'_>),
) -> Outcome {
    let start = Instant::now();
    let mut q = Quiescence::new(policy, endpoints.is_some());
    report(Progress::Started {
        policy,
        ports: counter.ports(),
        endpoints: endpoints.is_some(),
    });
    let (mut second, mut in_second) = (1u64, 0u64);
    let mut not_ready_reported = false;
    let mut counter_failed = false;
    loop {
        let now = start.elapsed();
        match counter.sample() {
            Ok(n) => {
                q.connections(now, n);
                in_second = in_second.saturating_add(n);
            }
            Err(error) => {
                q.connections(now, 1);
                if !counter_failed {
                    report(Progress::CounterFailed { error: &error });
                    counter_failed = true;
                }
            }
        }
        if let Some(view) = endpoints {
            // Until the watch has its first answer, the entries count as ready.
            let ready = view.get().unwrap_or(true);
            q.endpoints(now, ready);
            if !ready && !not_ready_reported {
                report(Progress::EndpointsNotReady { at: now });
                not_ready_reported = true;
            }
            not_ready_reported &= !ready;
        }
        while now >= Duration::from_secs(second) {
            report(Progress::Second {
                second,
                connections: in_second,
            });
            in_second = 0;
            second += 1;
        }
        let until = match q.poll(now) {
            Step::Done(outcome) => return outcome,
            Step::Wait { until } => until,
        };
        let next = (now + SAMPLE_INTERVAL).min(until.max(now));
        std::thread::sleep(next.saturating_sub(start.elapsed()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_read_as_sentences() {
        let p = QuietPolicy {
            quiet: Duration::from_secs(1),
            min: Duration::ZERO,
            max: Duration::from_secs(60),
        };
        assert_eq!(
            Progress::Started { policy: p, ports: &[8080, 9090], endpoints: true }.to_string(),
            "waiting until no new connection has arrived on port 8080, 9090 for 1.0 s (at least 0.0 s, at most 60.0 s) and the pod's EndpointSlice entries are no longer ready"
        );
        assert_eq!(
            Progress::Second {
                second: 3,
                connections: 1
            }
            .to_string(),
            "3 s: 1 new connection in the last second"
        );
        let o = Outcome {
            reason: Reason::Quiet,
            at: Duration::from_millis(3_300),
            quiet_since: Duration::from_millis(2_300),
            connections: 154,
            last_connection: Some(Duration::from_millis(2_300)),
            endpoints_not_ready: None,
        };
        assert_eq!(
            Summary(o, p).to_string(),
            "quiet since 2.3 s (the last new connection at 2.3 s, 154 connections in all): done after 3.3 s"
        );
        let o = Outcome {
            reason: Reason::Max,
            at: Duration::from_secs(60),
            ..o
        };
        assert_eq!(
            Summary(o, p).to_string(),
            "not quiet at the maximum of 60.0 s (the last new connection at 2.3 s, 154 connections in all): done after 60.0 s"
        );
    }

    #[test]
    fn the_endpoints_view_starts_unknown() {
        let v = EndpointsView::default();
        assert_eq!(v.get(), None);
        v.set(true);
        assert_eq!(v.get(), Some(true));
        v.set(false);
        assert_eq!(v.get(), Some(false));
    }
}
