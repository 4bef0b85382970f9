//! The shutdown sequence of a Kubernetes-friendly service (tokio): readiness, quiescence, drain,
//! cut. See the crate docs for the order and why.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::connections::ConnectionCounter;
use crate::grace::{
    self, budget, Budget, DEFAULT_GRACE, DEFAULT_MARGIN, DEFAULT_QUIESCE_MAX, GRACE_ENV,
};
use crate::quiesce::{Quiescence, QuietPolicy, Reason, Step};
use crate::wait::SAMPLE_INTERVAL;

/// Where a shutdown is. Phases only move forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// No signal yet: ready, accepting.
    Serving,
    /// After the first signal: readiness fails, but new connections are still accepted and
    /// served (proxies keep sending them for their endpoint lag) until they stop arriving.
    Quiescing,
    /// New connections have stopped (or the quiescence wait ended): the listener is closed,
    /// requests in flight finish, keep-alive connections are closed gracefully.
    Draining,
    /// The drain deadline passed, or a second signal came: whatever is left is cut.
    Cut,
}

/// How the quiescence phase waits before the listener closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiesce {
    /// Until no new connection has arrived for `quiet` (as `podgrace prestop-wait`), on the
    /// ports of the servers using this shutdown (every port of the network namespace if none
    /// registered), at least `min`, at most `max` (and never past half of the drain budget).
    Connections(QuietPolicy),
    /// A fixed delay (a preStop sleep inside the app), at most half of the drain budget.
    Delay(Duration),
    /// None: the listener closes at the first signal.
    Skip,
}

/// Errors of building a [`Shutdown`] or listening for signals.
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    /// [`GRACE_ENV`] holds something that is not a duration.
    #[error("{GRACE_ENV}={value:?}: {reason}")]
    GraceEnv {
        /// The variable's value as found.
        value: String,
        /// What is wrong with it ([`crate::grace::parse_grace_period`]'s message).
        reason: String,
    },
    /// A signal handler could not be installed.
    #[error("installing the {signal} handler: {source}")]
    Signal {
        /// `SIGTERM` or `SIGINT`.
        signal: &'static str,
        /// The error of registering the handler.
        source: std::io::Error,
    },
}

/// Builds a [`Shutdown`]. Defaults: the grace period from [`GRACE_ENV`], else 30 s; a margin
/// of 1 s; quiescence on connections (quiet 1 s, at most 20 s).
#[derive(Debug, Clone)]
pub struct Builder {
    grace: Option<Duration>,
    margin: Duration,
    quiesce: Quiesce,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            grace: None,
            margin: DEFAULT_MARGIN,
            quiesce: Quiesce::Connections(QuietPolicy {
                max: DEFAULT_QUIESCE_MAX,
                ..QuietPolicy::default()
            }),
        }
    }
}

impl Builder {
    /// The time from the first signal to SIGKILL: the pod's terminationGracePeriodSeconds
    /// (minus any preStop hook in front of the app). Overrides [`GRACE_ENV`]. `Duration::MAX`
    /// means no deadline at all (the drain waits for every connection, however long).
    pub fn grace_period(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    /// The time kept back before SIGKILL for the process to exit once its drain is cut.
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// How the quiescence phase waits.
    pub fn quiesce(mut self, quiesce: Quiesce) -> Self {
        self.quiesce = quiesce;
        self
    }

    /// The shutdown, not yet listening for signals (see [`Shutdown::listen_for_signals`]).
    /// Errors: [`ShutdownError::GraceEnv`] when the grace period is not set in code and
    /// [`GRACE_ENV`] holds a bad value.
    pub fn build(self) -> Result<Shutdown, ShutdownError> {
        let grace = match self.grace {
            Some(g) => g,
            None => match std::env::var(GRACE_ENV) {
                Ok(value) => grace::parse_grace_period(&value)
                    .map_err(|reason| ShutdownError::GraceEnv { value, reason })?,
                Err(_) => DEFAULT_GRACE,
            },
        };
        let (phase, _) = watch::channel(Phase::Serving);
        Ok(Shutdown {
            inner: Arc::new(Inner {
                phase,
                grace,
                margin: self.margin,
                quiesce: self.quiesce,
                ports: Mutex::new(Vec::new()),
                signals: AtomicUsize::new(0),
                escalated: AtomicBool::new(false),
                in_flight: AtomicUsize::new(0),
            }),
        })
    }
}

/// One service's shutdown, shared (cheap to clone) by its servers, its readiness endpoint and
/// its signal listener.
#[derive(Debug, Clone)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    phase: watch::Sender<Phase>,
    grace: Duration,
    margin: Duration,
    quiesce: Quiesce,
    ports: Mutex<Vec<u16>>,
    signals: AtomicUsize,
    escalated: AtomicBool,
    in_flight: AtomicUsize,
}

impl Shutdown {
    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The grace period in use (see [`Builder::grace_period`]).
    pub fn grace_period(&self) -> Duration {
        self.inner.grace
    }

    /// The budget of this shutdown, counted from the first signal.
    pub fn budget(&self) -> Budget {
        let quiesce_max = match self.inner.quiesce {
            Quiesce::Connections(p) => p.max,
            Quiesce::Delay(d) => d,
            Quiesce::Skip => Duration::ZERO,
        };
        budget(self.inner.grace, self.inner.margin, quiesce_max)
    }

    /// Installs handlers for SIGTERM and SIGINT (a PID 1 that only handles Ctrl-C would ignore
    /// the kubelet's SIGTERM until SIGKILL) and starts the sequence on the first one; a second
    /// one, of either kind, cuts at once. Must run inside a tokio runtime.
    /// Errors: [`ShutdownError::Signal`].
    pub fn listen_for_signals(&self) -> Result<(), ShutdownError> {
        use tokio::signal::unix::{signal, SignalKind};
        let install = |kind, name| {
            signal(kind).map_err(|source| ShutdownError::Signal {
                signal: name,
                source,
            })
        };
        let mut term = install(SignalKind::terminate(), "SIGTERM")?;
        let mut int = install(SignalKind::interrupt(), "SIGINT")?;
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    Some(()) = term.recv() => "SIGTERM",
                    Some(()) = int.recv() => "SIGINT",
                    else => return,
                };
                me.signal(name);
            }
        });
        Ok(())
    }

    /// Starts the sequence as a first signal would (a second call cuts, as a second signal).
    /// Must run inside a tokio runtime.
    pub fn trigger(&self) {
        self.signal("trigger");
    }

    fn signal(&self, name: &str) {
        let n = self.inner.signals.fetch_add(1, Ordering::SeqCst);
        if n == 0 {
            self.inner.phase.send_replace(Phase::Quiescing);
            let b = self.budget();
            tracing::info!(
                "{name} received: readiness now fails; {}, then draining until {:.1} s after the signal",
                match self.inner.quiesce {
                    Quiesce::Connections(p) => format!(
                        "accepting until no new connection has arrived for {:.1} s (at most {:.1} s)",
                        p.quiet.as_secs_f64(),
                        p.max.min(b.quiesce_max).as_secs_f64()
                    ),
                    Quiesce::Delay(d) => format!(
                        "accepting for {:.1} s",
                        d.min(b.quiesce_max).as_secs_f64()
                    ),
                    Quiesce::Skip => "closing the listener now".to_string(),
                },
                b.drain_deadline.as_secs_f64()
            );
            tokio::spawn(self.clone().sequence(Instant::now()));
        } else if self.phase() < Phase::Cut {
            self.inner.escalated.store(true, Ordering::SeqCst);
            tracing::warn!(
                "second signal ({name}): cutting {} in flight now",
                requests(self.in_flight())
            );
            self.inner.phase.send_replace(Phase::Cut);
        }
    }

    /// Quiescence, drain, cut: on its own task from the first signal.
    async fn sequence(self, signal_at: Instant) {
        let b = self.budget();
        let mut phase = self.inner.phase.subscribe();
        let cut = async move {
            let _ = phase.wait_for(|p| *p >= Phase::Cut).await;
        };
        tokio::pin!(cut);
        let quiesce = async {
            match self.inner.quiesce {
                Quiesce::Connections(p) => {
                    let max = p.max.min(b.quiesce_max);
                    let policy = QuietPolicy {
                        max,
                        min: p.min.min(max),
                        quiet: p.quiet,
                    };
                    self.quiesce_connections(policy, signal_at).await
                }
                Quiesce::Delay(d) => tokio::time::sleep(d.min(b.quiesce_max)).await,
                Quiesce::Skip => {}
            }
        };
        tokio::select! {
            () = quiesce => {}
            () = &mut cut => return,
        }
        self.inner.phase.send_if_modified(|p| {
            let moved = *p < Phase::Draining;
            if moved {
                *p = Phase::Draining;
            }
            moved
        });
        tracing::info!(
            "listener closed; draining {} in flight",
            requests(self.in_flight())
        );
        let deadline = async {
            match signal_at.checked_add(b.drain_deadline) {
                Some(at) if b.drain_deadline != Duration::MAX => tokio::time::sleep_until(at).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            () = deadline => {
                if self.phase() < Phase::Cut {
                    tracing::warn!(
                        "drain deadline ({:.1} s after the signal) reached: cutting {} in flight",
                        b.drain_deadline.as_secs_f64(),
                        requests(self.in_flight())
                    );
                    self.inner.phase.send_replace(Phase::Cut);
                }
            }
            () = &mut cut => {}
        }
    }

    async fn quiesce_connections(&self, policy: QuietPolicy, signal_at: Instant) {
        let ports = self
            .inner
            .ports
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        let mut counter = match ConnectionCounter::new(&ports) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(
                    "cannot read the connection counters ({e}): accepting for the maximum of {:.1} s",
                    policy.max.as_secs_f64()
                );
                tokio::time::sleep_until(signal_at + policy.max).await;
                return;
            }
        };
        let mut q = Quiescence::new(policy, false);
        loop {
            let now = signal_at.elapsed();
            q.connections(now, counter.sample().unwrap_or(1));
            match q.poll(now) {
                Step::Done(o) => {
                    match o.reason {
                        Reason::Quiet => tracing::info!(
                            "no new connection for {:.1} s ({} during the wait): closing the listener",
                            policy.quiet.as_secs_f64(),
                            o.connections
                        ),
                        Reason::Max => tracing::info!(
                            "connections still arriving at the maximum of {:.1} s ({} during the wait): closing the listener",
                            policy.max.as_secs_f64(),
                            o.connections
                        ),
                    }
                    return;
                }
                Step::Wait { until } => {
                    let next = (now + SAMPLE_INTERVAL).min(until.max(now));
                    tokio::time::sleep_until(signal_at + next).await;
                }
            }
        }
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        *self.inner.phase.borrow()
    }

    /// `true` before the first signal: what a readiness endpoint answers (200, else 503).
    pub fn is_ready(&self) -> bool {
        self.phase() == Phase::Serving
    }

    /// Whether the cut came from a second signal (rather than the drain deadline).
    pub fn escalated(&self) -> bool {
        self.inner.escalated.load(Ordering::SeqCst)
    }

    /// Resolves once the shutdown is in `phase` or later.
    pub async fn reached(&self, phase: Phase) {
        let mut rx = self.inner.phase.subscribe();
        let _ = rx.wait_for(|p| *p >= phase).await;
    }

    /// Registers a port the service accepts on, so that quiescence watches it (the servers of
    /// [`crate::hyper`] and [`crate::axum`] do this themselves).
    pub fn watch_port(&self, port: u16) {
        if let Ok(mut ports) = self.inner.ports.lock() {
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
    }

    /// Requests in flight, as counted by the servers of this crate.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    pub(crate) fn in_flight_counter(&self) -> &AtomicUsize {
        &self.inner.in_flight
    }
}

/// `1 request`, `3 requests`.
fn requests(n: usize) -> String {
    if n == 1 {
        "1 request".into()
    } else {
        format!("{n} requests")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shutdown(grace: u64, quiesce: Quiesce) -> Shutdown {
        Shutdown::builder()
            .grace_period(Duration::from_secs(grace))
            .quiesce(quiesce)
            .build()
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_fixed_delay_then_the_drain_until_the_deadline() {
        let s = shutdown(10, Quiesce::Delay(Duration::from_secs(3)));
        assert!(s.is_ready());
        let t0 = Instant::now();
        s.trigger();
        assert_eq!(s.phase(), Phase::Quiescing);
        assert!(!s.is_ready());
        s.reached(Phase::Draining).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(3));
        s.reached(Phase::Cut).await;
        // grace 10 s − margin 1 s.
        assert_eq!(t0.elapsed(), Duration::from_secs(9));
        assert!(!s.escalated());
    }

    #[tokio::test(start_paused = true)]
    async fn a_delay_longer_than_half_the_budget_is_cut_to_it() {
        let s = shutdown(11, Quiesce::Delay(Duration::from_secs(30)));
        let t0 = Instant::now();
        s.trigger();
        s.reached(Phase::Draining).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_signal_cuts_at_once() {
        let s = shutdown(30, Quiesce::Delay(Duration::from_secs(5)));
        let t0 = Instant::now();
        s.trigger();
        tokio::time::sleep(Duration::from_secs(1)).await;
        s.trigger();
        assert_eq!(s.phase(), Phase::Cut);
        assert!(s.escalated());
        s.reached(Phase::Cut).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(1));
        // The sequence does not move the phase back to Draining afterwards.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(s.phase(), Phase::Cut);
    }

    #[tokio::test(start_paused = true)]
    async fn no_deadline_with_an_unlimited_grace_period() {
        let s = Shutdown::builder()
            .grace_period(Duration::MAX)
            .quiesce(Quiesce::Skip)
            .build()
            .unwrap();
        s.trigger();
        s.reached(Phase::Draining).await;
        tokio::time::sleep(Duration::from_secs(86_400 * 365)).await;
        assert_eq!(s.phase(), Phase::Draining);
    }

    #[test]
    fn a_bad_grace_period_in_the_environment_is_an_error() {
        // The only test that touches the variable; it runs in its own child so that the
        // process environment of the other tests is left alone.
        if std::env::var_os("PODGRACE_SHUTDOWN_ENV_CHILD").is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "shutdown::tests::a_bad_grace_period_in_the_environment_is_an_error",
                    "--nocapture",
                ])
                .env("PODGRACE_SHUTDOWN_ENV_CHILD", "1")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
            return;
        }
        std::env::set_var(GRACE_ENV, "45");
        assert_eq!(
            Shutdown::builder().build().unwrap().grace_period(),
            Duration::from_secs(45)
        );
        // Code wins over the environment.
        assert_eq!(
            Shutdown::builder()
                .grace_period(Duration::from_secs(5))
                .build()
                .unwrap()
                .grace_period(),
            Duration::from_secs(5)
        );
        std::env::set_var(GRACE_ENV, "soon");
        let e = Shutdown::builder().build().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("POD_TERMINATION_GRACE_PERIOD=\"soon\": "),
            "{e}"
        );
        std::env::remove_var(GRACE_ENV);
        assert_eq!(
            Shutdown::builder().build().unwrap().grace_period(),
            DEFAULT_GRACE
        );
    }
}
