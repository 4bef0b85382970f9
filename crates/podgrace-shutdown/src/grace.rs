//! The time an app has after its stop signal, from the pod's terminationGracePeriodSeconds.
//!
//! The kubelet sends SIGKILL `gracePeriod` after it starts killing the container: at once after
//! the stop signal when there is no preStop hook, and sooner after it when a preStop hook used
//! part of the budget (`pkg/kubelet/kuberuntime/kuberuntime_container.go` `killContainer`:
//! `gracePeriod - preStop duration`, at least 2 s). The downward API does not expose
//! terminationGracePeriodSeconds, so an app is told it: [`GRACE_ENV`] in the container's `env`
//! (the same number as the pod's `terminationGracePeriodSeconds`, minus any preStop the app
//! sits behind), or in code.
//!
//! Pure: nothing here reads the environment or a clock; [`crate::Builder`] does.

use std::time::Duration;

/// The environment variable an app's grace period is read from: whole seconds (`30`), or a
/// duration with a unit (`30s`, `1m30s`, `500ms`).
pub const GRACE_ENV: &str = "POD_TERMINATION_GRACE_PERIOD";

/// Kubernetes' default terminationGracePeriodSeconds, 30 s (`DefaultTerminationGracePeriodSeconds`,
/// `pkg/apis/core/v1/defaults.go`), used when nothing says otherwise.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// The time kept back before SIGKILL for the app to finish exiting once its drain is over: 1 s.
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(1);

/// The longest quiescence wait by default: 20 s, as `podgrace prestop-wait --max`.
pub const DEFAULT_QUIESCE_MAX: Duration = Duration::from_secs(20);

/// Parses a grace period: whole or fractional seconds (`30`, `2.5`), or a duration with units
/// (`30s`, `1m30s`, `500ms`). Errors: the message for a bad value (negative, not a number).
pub fn parse_grace_period(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| {
            format!("expected a number of seconds at least 0 (such as 30), not {s:?}")
        });
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{s:?} is not a duration ({e}; examples: 30, 30s, 1m30s)"))
}

/// The instants of one shutdown, counted from the first signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// When the drain must be over (in-flight work still open then is cut): grace − margin,
    /// never below 0.
    pub drain_deadline: Duration,
    /// The longest quiescence wait: the policy's own max, but never past half of the drain
    /// deadline, so that draining keeps at least as much time as waiting took.
    pub quiesce_max: Duration,
}

/// The budget of a shutdown with `grace` (the time from the signal to SIGKILL), `margin` kept
/// back for exiting, and a quiescence wait of at most `quiesce_max`.
pub fn budget(grace: Duration, margin: Duration, quiesce_max: Duration) -> Budget {
    let drain_deadline = grace.saturating_sub(margin);
    Budget {
        drain_deadline,
        quiesce_max: quiesce_max.min(drain_deadline / 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_periods_are_seconds_or_durations() {
        assert_eq!(parse_grace_period("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_grace_period(" 2.5 "), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_grace_period("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_grace_period("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_grace_period("0"), Ok(Duration::ZERO));
        for bad in ["-1", "", "thirty", "NaN", "inf", "1e30"] {
            assert!(parse_grace_period(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_budget_keeps_the_margin_and_half_for_draining() {
        let s = Duration::from_secs;
        assert_eq!(
            budget(s(30), s(1), s(20)),
            Budget {
                drain_deadline: s(29),
                quiesce_max: Duration::from_millis(14_500)
            }
        );
        assert_eq!(budget(s(120), s(1), s(20)).quiesce_max, s(20));
        // A grace period shorter than the margin: nothing to wait for, cut at once.
        assert_eq!(
            budget(s(0), s(1), s(20)),
            Budget {
                drain_deadline: s(0),
                quiesce_max: s(0)
            }
        );
    }
}
