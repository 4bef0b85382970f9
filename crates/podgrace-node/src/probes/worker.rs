//! The periodic worker of one probe of one container (`worker.go` `worker.run` / `doProbe`),
//! its published status and its handle.

use std::time::Duration;

use podgrace_core::plan::Probe;
use podgrace_core::rules::prober::{ProbeKind, ProbeState};
use podgrace_core::rules::prober::{ProbeWorker, Tick};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::prober::{ProbeResult, Prober};
use crate::events::{message, reason, EventRecorder};

/// `maxProbeRetries` (`prober.go`): attempts of one probe while the prober errors.
pub(super) const MAX_PROBE_RETRIES: usize = 3;

/// What a worker publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeStatus {
    /// The current result. Readiness: ready iff `Success`.
    pub result: ProbeState,
    /// The container the result is about.
    pub container_id: Option<String>,
    /// How many times the result was set to `Failure` by reaching `failureThreshold`
    /// (liveness and startup: once per container, the signal to kill it; readiness: once per
    /// transition to not ready).
    pub threshold_failures: u64,
}

impl ProbeStatus {
    /// Readiness: `true` iff the result is `Success`.
    pub fn is_ready(&self) -> bool {
        self.result == ProbeState::Success
    }
}

/// The container a worker probes, as the status manager would report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRun {
    /// Runtime id; a new id is a new container (restart): the worker resets.
    pub container_id: String,
    /// When it started (monotonic; `tokio::time::Instant` so paused-clock tests work).
    pub started_at: Instant,
    /// `false` once it exited.
    pub running: bool,
}

/// A running probe worker. Dropping it stops the worker.
pub struct ProbeHandle {
    kind: ProbeKind,
    status: watch::Receiver<ProbeStatus>,
    container: watch::Sender<Option<ContainerRun>>,
    stop: watch::Sender<bool>,
}

impl ProbeHandle {
    /// The kind of probe.
    pub fn kind(&self) -> ProbeKind {
        self.kind
    }

    /// A receiver of the published status (changes when the result is set).
    pub fn subscribe(&self) -> watch::Receiver<ProbeStatus> {
        self.status.clone()
    }

    /// The status now.
    pub fn status(&self) -> ProbeStatus {
        self.status.borrow().clone()
    }

    /// Tells the worker about the container (`None`: not created yet). Read at the next tick,
    /// as the kubelet's worker reads the status manager. A new `container_id` resets the
    /// worker to the initial value and ends a hold.
    pub fn set_container(&self, run: Option<ContainerRun>) {
        self.container.send_replace(run);
    }

    /// Stops the worker; an attempt in flight is cancelled. Idempotent.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Whether the worker has been asked to stop.
    pub fn is_stopped(&self) -> bool {
        *self.stop.borrow()
    }
}

impl Drop for ProbeHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the worker of `probe` (of kind `kind`) for container `container` on the current tokio
/// runtime. `startup` is the status of the same container's startup worker, if it has one
/// (liveness and readiness wait for it to succeed). Events go to `events`. The worker idles
/// until [`ProbeHandle::set_container`] names a container.
pub fn spawn_probe_worker<P: Prober>(
    kind: ProbeKind,
    probe: &Probe,
    container: &str,
    prober: P,
    events: EventRecorder,
    startup: Option<watch::Receiver<ProbeStatus>>,
) -> ProbeHandle {
    let (status_tx, status_rx) = watch::channel(ProbeStatus {
        result: ProbeState::Unknown,
        container_id: None,
        threshold_failures: 0,
    });
    let (container_tx, container_rx) = watch::channel(None);
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let mut worker = Worker {
        kind,
        probe: probe.clone(),
        name: container.to_string(),
        prober,
        events,
        startup,
        container: container_rx,
        status: status_tx,
        container_id: None,
        rules: ProbeWorker::new(kind, probe),
    };
    tokio::spawn(async move {
        let period = Duration::from_secs(
            u64::try_from(worker.probe.period_seconds)
                .unwrap_or(1)
                .max(1),
        );
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                biased;
                _ = stop_rx.wait_for(|s| *s) => break,
                _ = ticker.tick() => {}
            }
            tokio::select! {
                biased;
                _ = stop_rx.wait_for(|s| *s) => break,
                _ = worker.do_probe() => {}
            }
        }
    });
    ProbeHandle {
        kind,
        status: status_rx,
        container: container_tx,
        stop: stop_tx,
    }
}

pub(super) struct Worker<P> {
    kind: ProbeKind,
    probe: Probe,
    name: String,
    prober: P,
    events: EventRecorder,
    startup: Option<watch::Receiver<ProbeStatus>>,
    container: watch::Receiver<Option<ContainerRun>>,
    status: watch::Sender<ProbeStatus>,
    container_id: Option<String>,
    /// The thresholds, the initial delay, the startup gate and the hold.
    rules: ProbeWorker,
}

impl<P: Prober> Worker<P> {
    fn set(&self, result: ProbeState, by_threshold: bool) {
        let id = self.container_id.clone();
        let kind = self.kind;
        self.status.send_if_modified(|s| {
            let counts = by_threshold
                && result == ProbeState::Failure
                && (kind != ProbeKind::Readiness || s.result != ProbeState::Failure);
            let changed = s.result != result || s.container_id != id || counts;
            s.result = result;
            s.container_id = id;
            if counts {
                s.threshold_failures += 1;
            }
            changed
        });
    }

    /// `worker.doProbe`: one tick.
    async fn do_probe(&mut self) {
        let Some(run) = self.container.borrow().clone() else {
            return;
        };
        if self.container_id.as_deref() != Some(run.container_id.as_str()) {
            self.container_id = Some(run.container_id.clone());
            let initial = self.rules.new_container();
            self.set(initial, false);
        }
        // int32(time.Since(startedAt).Seconds())
        let ran = Instant::now()
            .saturating_duration_since(run.started_at)
            .as_secs();
        // `c.Started`: the startup probe succeeded for this container (or there is none).
        let started = match (self.kind, &self.startup) {
            (ProbeKind::Startup, _) => self.startup_succeeded(),
            (_, None) => true,
            (_, Some(rx)) => {
                let s = rx.borrow();
                s.result == ProbeState::Success
                    && s.container_id.as_deref() == Some(run.container_id.as_str())
            }
        };
        match self
            .rules
            .tick(run.running, i64::try_from(ran).unwrap_or(i64::MAX), started)
        {
            Tick::Skip => return,
            Tick::NotRunning => {
                self.set(ProbeState::Failure, false);
                return;
            }
            Tick::Probe => {}
        }
        let mut attempt = ProbeResult::Unknown(String::new());
        for _ in 0..MAX_PROBE_RETRIES {
            attempt = self.prober.probe(&run.container_id).await;
            if !matches!(attempt, ProbeResult::Unknown(_)) {
                break;
            }
        }
        let probe = self.kind.as_str();
        let container = Some(self.name.as_str());
        let result = match attempt {
            ProbeResult::Unknown(e) => {
                self.events.warning(
                    reason::UNHEALTHY,
                    container,
                    message::probe_errored(probe, &e),
                );
                return;
            }
            ProbeResult::Warning(out) => {
                self.events.warning(
                    reason::PROBE_WARNING,
                    container,
                    message::probe_warning(probe, &out),
                );
                ProbeState::Success
            }
            ProbeResult::Failure(out) => {
                self.events.warning(
                    reason::UNHEALTHY,
                    container,
                    message::probe_failed(probe, &out),
                );
                ProbeState::Failure
            }
            ProbeResult::Success => ProbeState::Success,
        };
        if let Some(published) = self.rules.result(result) {
            self.set(published, true);
        }
    }

    /// A startup worker's own success for the current container.
    fn startup_succeeded(&self) -> bool {
        let s = self.status.borrow();
        s.result == ProbeState::Success && s.container_id == self.container_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use podgrace_core::plan::ProbeAction;

    use std::sync::Mutex;

    /// A prober that plays a script (then repeats its last entry) and records call times.
    #[derive(Clone)]
    struct Script {
        results: Arc<Mutex<Vec<ProbeResult>>>,
        calls: Arc<Mutex<Vec<(Duration, String)>>>,
        t0: Instant,
    }

    impl Script {
        fn new(results: Vec<ProbeResult>) -> Self {
            Script {
                results: Arc::new(Mutex::new(results)),
                calls: Arc::new(Mutex::new(Vec::new())),
                t0: Instant::now(),
            }
        }
        fn call_secs(&self) -> Vec<u64> {
            self.calls
                .lock()
                .unwrap()
                .iter()
                .map(|(d, _)| d.as_secs())
                .collect()
        }
    }

    impl Prober for Script {
        async fn probe(&self, container_id: &str) -> ProbeResult {
            self.calls
                .lock()
                .unwrap()
                .push((self.t0.elapsed(), container_id.to_string()));
            let mut r = self.results.lock().unwrap();
            if r.len() > 1 {
                r.remove(0)
            } else {
                r[0].clone()
            }
        }
    }

    fn spec(period: i64, delay: i64, success: i64, failure: i64) -> Probe {
        Probe {
            action: ProbeAction::TcpSocket {
                host: None,
                port: podgrace_core::plan::PortRef::Number(1),
            },
            initial_delay_seconds: delay,
            period_seconds: period,
            timeout_seconds: 1,
            success_threshold: success,
            failure_threshold: failure,
            termination_grace_period_seconds: None,
        }
    }

    /// A readiness worker probing every second from the start (threshold 1 each way), with a
    /// recorder of its own.
    fn readiness_every_second(script: Script) -> ProbeHandle {
        spawn_probe_worker(
            ProbeKind::Readiness,
            &spec(1, 0, 1, 1),
            "app",
            script,
            EventRecorder::new(),
            None,
        )
    }

    fn run(id: &str) -> Option<ContainerRun> {
        Some(ContainerRun {
            container_id: id.into(),
            started_at: Instant::now(),
            running: true,
        })
    }

    async fn sleep_s(s: f64) {
        tokio::time::sleep(Duration::from_secs_f64(s)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn readiness_starts_not_ready_and_probes_on_the_period_after_the_delay() {
        let script = Script::new(vec![ProbeResult::Success]);
        let events = EventRecorder::new();
        let h = spawn_probe_worker(
            ProbeKind::Readiness,
            &spec(10, 5, 1, 3),
            "app",
            script.clone(),
            events.clone(),
            None,
        );
        h.set_container(run("c1"));
        assert!(!h.status().is_ready());
        sleep_s(0.5).await;
        assert_eq!(h.status().result, ProbeState::Failure, "initial value");
        sleep_s(9.0).await;
        assert!(
            !h.status().is_ready(),
            "t=9.5: still in the initial delay window"
        );
        // Ticks keep their phase: the delay of 5 s makes the first attempt the t=10 tick.
        sleep_s(26.0).await;
        assert_eq!(script.call_secs(), vec![10, 20, 30]);
        assert!(h.status().is_ready());
        assert!(events.events().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn liveness_signals_once_per_container_then_holds() {
        let script = Script::new(vec![ProbeResult::Failure("boom".into())]);
        let events = EventRecorder::new();
        let h = spawn_probe_worker(
            ProbeKind::Liveness,
            &spec(10, 0, 1, 3),
            "app",
            script.clone(),
            events.clone(),
            None,
        );
        let rx = h.subscribe();
        h.set_container(run("c1"));
        sleep_s(0.5).await;
        assert_eq!(
            h.status().result,
            ProbeState::Success,
            "liveness starts healthy"
        );
        sleep_s(55.0).await;
        assert_eq!(
            script.call_secs(),
            vec![0, 10, 20],
            "held after the threshold"
        );
        let st = h.status();
        assert_eq!((st.result, st.threshold_failures), (ProbeState::Failure, 1));
        assert!(rx.has_changed().unwrap_or(false));
        let ev = events.events();
        assert_eq!(ev.len(), 3);
        assert!(ev
            .iter()
            .all(|e| e.reason == "Unhealthy" && e.message == "Liveness probe failed: boom"));
        // A restarted container resets the worker.
        h.set_container(run("c2"));
        sleep_s(30.0).await;
        let st = h.status();
        assert_eq!(st.container_id.as_deref(), Some("c2"));
        assert_eq!(st.threshold_failures, 2);
        assert_eq!(script.call_secs(), vec![0, 10, 20, 60, 70, 80]);
    }

    #[tokio::test(start_paused = true)]
    async fn liveness_and_readiness_wait_for_startup() {
        let startup = Script::new(vec![
            ProbeResult::Failure("no".into()),
            ProbeResult::Failure("no".into()),
            ProbeResult::Success,
        ]);
        let live = Script::new(vec![ProbeResult::Success]);
        let events = EventRecorder::new();
        let s = spawn_probe_worker(
            ProbeKind::Startup,
            &spec(1, 0, 1, 30),
            "app",
            startup.clone(),
            events.clone(),
            None,
        );
        let l = spawn_probe_worker(
            ProbeKind::Liveness,
            &spec(1, 0, 1, 3),
            "app",
            live.clone(),
            events.clone(),
            Some(s.subscribe()),
        );
        s.set_container(run("c1"));
        l.set_container(run("c1"));
        sleep_s(6.5).await;
        assert_eq!(
            startup.call_secs(),
            vec![0, 1, 2],
            "startup stops once it succeeded"
        );
        let first_live = live.call_secs().first().copied();
        assert!(matches!(first_live, Some(2 | 3)), "{first_live:?}");
        assert_eq!(s.status().result, ProbeState::Success);
        assert_eq!(events.events().len(), 2);
        assert_eq!(events.events()[0].message, "Startup probe failed: no");
    }

    #[tokio::test(start_paused = true)]
    async fn prober_errors_are_retried_then_thrown_away() {
        let script = Script::new(vec![ProbeResult::Unknown("exec failed".into())]);
        let events = EventRecorder::new();
        let h = spawn_probe_worker(
            ProbeKind::Liveness,
            &spec(10, 0, 1, 1),
            "app",
            script.clone(),
            events.clone(),
            None,
        );
        h.set_container(run("c1"));
        sleep_s(15.0).await;
        assert_eq!(script.call_secs(), vec![0, 0, 0, 10, 10, 10]);
        assert_eq!(
            h.status().result,
            ProbeState::Success,
            "errors are not counted"
        );
        assert_eq!(h.status().threshold_failures, 0);
        assert_eq!(
            events.events()[0].message,
            "Liveness probe errored and resulted in unknown state: exec failed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn thresholds_and_warnings_for_readiness() {
        let script = Script::new(vec![
            ProbeResult::Success,
            ProbeResult::Warning("Probe terminated redirects, Response body: ".into()),
            ProbeResult::Failure("HTTP probe failed with statuscode: 503".into()),
            ProbeResult::Success,
        ]);
        let events = EventRecorder::new();
        let h = spawn_probe_worker(
            ProbeKind::Readiness,
            &spec(1, 0, 2, 1),
            "app",
            script.clone(),
            events.clone(),
            None,
        );
        h.set_container(run("c1"));
        sleep_s(0.5).await;
        assert!(!h.status().is_ready(), "one success of two");
        sleep_s(1.0).await;
        assert!(h.status().is_ready(), "a warning counts as success");
        sleep_s(1.0).await;
        let st = h.status();
        assert!(!st.is_ready());
        assert_eq!(st.threshold_failures, 1);
        let msgs: Vec<_> = events
            .events()
            .into_iter()
            .map(|e| (e.reason, e.message))
            .collect();
        assert_eq!(
            msgs,
            vec![
                (
                    "ProbeWarning",
                    "Readiness probe warning: Probe terminated redirects, Response body: "
                        .to_string()
                ),
                (
                    "Unhealthy",
                    "Readiness probe failed: HTTP probe failed with statuscode: 503".to_string()
                ),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stopped_and_dropped_workers_probe_no_more() {
        let script = Script::new(vec![ProbeResult::Success]);
        let h = readiness_every_second(script.clone());
        h.set_container(run("c1"));
        sleep_s(2.5).await;
        h.stop();
        sleep_s(5.0).await;
        assert_eq!(script.call_secs(), vec![0, 1, 2]);
        let other = Script::new(vec![ProbeResult::Success]);
        let h2 = readiness_every_second(other.clone());
        h2.set_container(run("c1"));
        sleep_s(1.5).await;
        drop(h2);
        sleep_s(5.0).await;
        assert_eq!(other.call_secs(), vec![0, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_exited_container_is_not_ready() {
        let script = Script::new(vec![ProbeResult::Success]);
        let h = readiness_every_second(script.clone());
        h.set_container(run("c1"));
        sleep_s(1.5).await;
        assert!(h.status().is_ready());
        let mut exited = run("c1");
        if let Some(r) = exited.as_mut() {
            r.running = false;
        }
        h.set_container(exited);
        sleep_s(1.0).await;
        assert!(!h.status().is_ready());
        assert_eq!(script.call_secs(), vec![0, 1]);
    }
}
