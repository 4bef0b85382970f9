//! The probe worker's decisions, without the probing: when a tick probes, and when results reach
//! a threshold and change the published result.
//!
//! Source: `pkg/kubelet/prober/worker.go` `worker.doProbe` (the initial delay, the startup gate,
//! `resultRun` against `successThreshold`/`failureThreshold`, `onHold` after a liveness failure or
//! any startup result) and `newWorker` (each kind's initial value). Holds for Kubernetes 1.18 to
//! 1.37 (the startup probe from 1.18; the startup hold after success from 1.28, PR #117153, is
//! applied for every release).

use crate::plan::Probe;

/// Which probe a worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// `startupProbe`: until it succeeds the other probes do not run; its failure restarts the
    /// container.
    Startup,
    /// `livenessProbe`: a failure restarts the container (killed with its grace period).
    Liveness,
    /// `readinessProbe`: a failure marks the container not ready, which takes it out of the
    /// Service's endpoints.
    Readiness,
}

impl ProbeKind {
    /// `probeType.String()`: `Startup`, `Liveness`, `Readiness` (used in event messages).
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }

    /// `newWorker`'s `initialValue`: readiness starts failed, liveness succeeded, startup
    /// unknown.
    pub fn initial_value(self) -> ProbeState {
        match self {
            ProbeKind::Readiness => ProbeState::Failure,
            ProbeKind::Liveness => ProbeState::Success,
            ProbeKind::Startup => ProbeState::Unknown,
        }
    }
}

/// The results-manager value (`results.Result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeState {
    /// No result yet (`results.Unknown`); a startup probe starts here.
    Unknown,
    /// Passed `successThreshold` times in a row (`results.Success`); liveness starts here.
    Success,
    /// Failed `failureThreshold` times in a row, or the container is not running
    /// (`results.Failure`); readiness starts here.
    Failure,
}

/// What one tick of the worker does before any probe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Nothing: on hold until a new container, within the initial delay, or gated by startup.
    Skip,
    /// The container is not running: publish `Failure` (not a threshold failure).
    NotRunning,
    /// Run the probe, then give its result to [`ProbeWorker::result`].
    Probe,
}

/// One worker's thresholds and hold, as `worker` keeps them per container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeWorker {
    kind: ProbeKind,
    initial_delay_seconds: i64,
    success_threshold: i64,
    failure_threshold: i64,
    last_result: ProbeState,
    result_run: i64,
    on_hold: bool,
}

impl ProbeWorker {
    /// A worker of `kind` for `probe` (its thresholds and initial delay, in seconds).
    pub fn new(kind: ProbeKind, probe: &Probe) -> Self {
        ProbeWorker {
            kind,
            initial_delay_seconds: probe.initial_delay_seconds,
            success_threshold: probe.success_threshold,
            failure_threshold: probe.failure_threshold,
            last_result: ProbeState::Success,
            result_run: 0,
            on_hold: false,
        }
    }

    /// A new container (a new container ID): the hold ends and the result to publish is the
    /// kind's initial value. The run of equal results carries over, as upstream's does.
    pub fn new_container(&mut self) -> ProbeState {
        self.on_hold = false;
        self.kind.initial_value()
    }

    /// The tick of a container that `running` or not, `ran_seconds` whole seconds since it
    /// started (`int32(time.Since(startedAt).Seconds())`), and `started` (`c.Started`: its startup
    /// probe has succeeded, or it has none).
    pub fn tick(&self, running: bool, ran_seconds: i64, started: bool) -> Tick {
        if self.on_hold {
            return Tick::Skip;
        }
        if !running {
            return Tick::NotRunning;
        }
        if ran_seconds < self.initial_delay_seconds {
            return Tick::Skip;
        }
        // Startup stops once the container has started; the others wait for it.
        if started == (self.kind == ProbeKind::Startup) {
            return Tick::Skip;
        }
        Tick::Probe
    }

    /// A probe's result (`Success` or `Failure`; an error that outlived the retries is thrown
    /// away by the caller). Returns the result to publish once the run of equal results reaches
    /// its threshold, else `None` (the published result stays). After a liveness failure or any
    /// startup result, the worker holds until [`new_container`](Self::new_container).
    pub fn result(&mut self, result: ProbeState) -> Option<ProbeState> {
        if self.last_result == result {
            self.result_run = self.result_run.saturating_add(1);
        } else {
            self.last_result = result;
            self.result_run = 1;
        }
        let below = match result {
            ProbeState::Failure => self.result_run < self.failure_threshold,
            ProbeState::Success => self.result_run < self.success_threshold,
            ProbeState::Unknown => false,
        };
        if below {
            return None;
        }
        if (self.kind == ProbeKind::Liveness && result == ProbeState::Failure)
            || self.kind == ProbeKind::Startup
        {
            self.on_hold = true;
            self.result_run = 0;
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ProbeAction;

    fn probe(delay: i64, success: i64, failure: i64) -> Probe {
        Probe {
            action: ProbeAction::Exec {
                command: vec!["true".into()],
            },
            initial_delay_seconds: delay,
            period_seconds: 1,
            timeout_seconds: 1,
            success_threshold: success,
            failure_threshold: failure,
            termination_grace_period_seconds: None,
        }
    }

    /// `worker_test.go` `TestSuccessThreshold`: readiness with successThreshold 3 and
    /// failureThreshold 1 goes Success only after three successes, and one failure resets it.
    #[test]
    fn success_threshold_like_upstream() {
        let mut w = ProbeWorker::new(ProbeKind::Readiness, &probe(0, 3, 1));
        assert_eq!(w.new_container(), ProbeState::Failure);
        for _ in 0..2 {
            assert_eq!(w.result(ProbeState::Success), None);
            assert_eq!(w.result(ProbeState::Success), None);
            assert_eq!(w.result(ProbeState::Success), Some(ProbeState::Success));
            assert_eq!(w.result(ProbeState::Failure), Some(ProbeState::Failure));
        }
    }

    /// `worker_test.go` `TestFailureThreshold`: failureThreshold 3 keeps Success through two
    /// failures; the third flips it.
    #[test]
    fn failure_threshold_like_upstream() {
        let mut w = ProbeWorker::new(ProbeKind::Readiness, &probe(0, 1, 3));
        assert_eq!(w.result(ProbeState::Success), Some(ProbeState::Success));
        assert_eq!(w.result(ProbeState::Failure), None);
        assert_eq!(w.result(ProbeState::Failure), None);
        assert_eq!(w.result(ProbeState::Failure), Some(ProbeState::Failure));
        assert_eq!(w.result(ProbeState::Failure), Some(ProbeState::Failure));
    }

    /// `worker_test.go` `TestOnHoldOnLivenessOrStartupCheckFailure`: a liveness failure holds
    /// the worker until a new container; readiness never holds.
    #[test]
    fn liveness_failure_holds_until_a_new_container() {
        let mut w = ProbeWorker::new(ProbeKind::Liveness, &probe(0, 1, 1));
        assert_eq!(w.tick(true, 0, true), Tick::Probe);
        assert_eq!(w.result(ProbeState::Failure), Some(ProbeState::Failure));
        assert_eq!(w.tick(true, 5, true), Tick::Skip);
        assert_eq!(w.new_container(), ProbeState::Success);
        assert_eq!(w.tick(true, 0, true), Tick::Probe);
        let mut r = ProbeWorker::new(ProbeKind::Readiness, &probe(0, 1, 1));
        assert_eq!(r.result(ProbeState::Failure), Some(ProbeState::Failure));
        assert_eq!(r.tick(true, 0, true), Tick::Probe);
    }

    /// `worker_test.go` `TestInitialDelay` and `TestStartupProbeDisabledByStarted`: nothing
    /// probes within the initial delay; startup stops once started, the others wait for it; a
    /// container that is not running publishes Failure.
    #[test]
    fn initial_delay_and_the_startup_gate() {
        let live = ProbeWorker::new(ProbeKind::Liveness, &probe(10, 1, 1));
        assert_eq!(live.tick(true, 9, true), Tick::Skip);
        assert_eq!(live.tick(true, 10, true), Tick::Probe);
        assert_eq!(live.tick(true, 10, false), Tick::Skip);
        assert_eq!(live.tick(false, 0, true), Tick::NotRunning);
        let startup = ProbeWorker::new(ProbeKind::Startup, &probe(0, 1, 1));
        assert_eq!(startup.tick(true, 0, false), Tick::Probe);
        assert_eq!(startup.tick(true, 0, true), Tick::Skip);
    }
}
