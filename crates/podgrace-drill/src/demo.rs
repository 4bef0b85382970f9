//! The built-in demo (`podgrace drill` with no FILE): three drills of the demo app under the
//! same load and lags, without a preStop (the app exits on SIGTERM), with a fixed preStop sleep
//! and an app that drains, and with `podgrace prestop-wait` as an exec preStop hook and the same
//! draining app. This module holds its plan arithmetic (the sleep, the hooks' limits, how long
//! the load must run) and its pod templates; the CLI runs the drills and renders them.

use std::path::Path;
use std::time::Duration;

use podgrace_core::manifest;
use podgrace_core::plan::PodPlan;

use crate::endpoints::{LagModel, LagRange};

/// The demo's replicas when `--replicas` is not given: with the default seed their lags (0.71,
/// 2.93 and 4.70 s) fall below, near and above the fixed sleep's 3 s.
pub const REPLICAS: usize = 3;

/// The demo's `prestop-wait --quiet`: 1 s.
pub const QUIET: Duration = Duration::from_secs(1);

/// The demo's endpoint lags when `--endpoint-lag` is not given: per pod, uniform from half a
/// second (an in-cluster kube-proxy) to five (a slow external load balancer).
pub const LAG_MIN: Duration = Duration::from_millis(500);
/// The upper end of the demo's default per-pod lags: 5 s (see [`LAG_MIN`]).
pub const LAG_MAX: Duration = Duration::from_secs(5);

/// The demo's default lag model, with `seed` for the per-pod draws.
pub fn default_lag(seed: u64) -> LagModel {
    LagModel::PerPod(LagRange {
        min: LAG_MIN,
        max: LAG_MAX,
        seed,
    })
}

/// The demo app's port for the load (the probes go to 8081).
pub const PORT: u16 = 8080;

/// How long the demo app drains after SIGTERM, seconds (`demo-app --drain-seconds`).
pub const DRAIN_SECONDS: i64 = 20;

/// The demo's fixed preStop sleep, seconds: for a single lag L, `ceil(L) + 1` (longer than the
/// lag, the usual advice); for per-pod lags, the middle of their range rounded up, the guess a
/// user makes who knows the range: too short for the pods above it, longer than needed for those
/// below.
pub fn sleep_seconds(lag: LagModel) -> i64 {
    match lag {
        LagModel::PerPod(r) => ((r.min + r.max).as_secs_f64() / 2.0).ceil() as i64,
        other => other.nominal().as_secs_f64().ceil() as i64 + 1,
    }
}

/// The demo's prestop-wait hook: quiet for [`QUIET`], at most the nominal lag rounded up plus
/// 5 s.
pub fn wait_hook(lag: LagModel) -> PreStop {
    PreStop::Wait {
        quiet: QUIET,
        max_seconds: lag.nominal().as_secs_f64().ceil() as i64 + 5,
    }
}

/// How long the load must run so that every run's shutdowns are under load: the fixed run's stop
/// signals come a preStop sleep after each deletion, prestop-wait's a quiet moment after each
/// pod's lag, and a rollout deletes one pod every few seconds (2 s per replica is allowed); a
/// PASS would say nothing if the load had ended before them. `None` when `duration` is already
/// long enough, else the duration needed (whole seconds).
pub fn load_needed(
    duration: Duration,
    disrupt_after: Duration,
    replicas: usize,
    lag: LagModel,
) -> Option<Duration> {
    let longest_hook = longest_hook_seconds(lag);
    let needed =
        disrupt_after + Duration::from_secs(2 * replicas as u64 + longest_hook.ceil() as u64 + 1);
    (duration < needed).then_some(needed)
}

/// The longest any run's hook holds a pod after its deletion, seconds: the fixed sleep, or the
/// lag plus prestop-wait's quiet moment.
pub fn longest_hook_seconds(lag: LagModel) -> f64 {
    (sleep_seconds(lag).max(0) as f64).max(lag.nominal().as_secs_f64() + QUIET.as_secs_f64())
}

/// The demo pod's preStop hook.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PreStop {
    /// None, and an app that exits on SIGTERM.
    None,
    /// `sleep: {seconds: N}`, and an app that drains.
    Sleep(i64),
    /// `exec: podgrace prestop-wait --quiet Q --max M --port 8080` (the serving port: the
    /// probes go to 8081), and an app that drains; `max_seconds` in seconds.
    Wait {
        /// `--quiet`.
        quiet: Duration,
        /// `--max`, seconds.
        max_seconds: i64,
    },
}

/// Why the demo's template could not be built (a bug in the built-in YAML, not the user's
/// input).
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The generated manifest did not load.
    #[error("the built-in demo: {0}")]
    Manifest(String),
    /// The generated manifest has no pod template.
    #[error("the built-in demo has no pod template")]
    NoTemplate,
}

/// The demo app as a Deployment manifest: `EXE demo-app` as each pod's process (`exe`: podgrace's
/// own executable), serving on 8080 and answering the readiness probe on 8081 (so that a preStop
/// hook counting the new connections of 8080 does not count the kubelet's probes), and
/// `pre_stop`; terminationGracePeriodSeconds covers the hook plus the app's drain
/// ([`DRAIN_SECONDS`]) and 10 s more. With `image` (the containerd runtime), the container runs
/// that image of podgrace's binary, at its root.
pub fn manifest_yaml(exe: &Path, image: Option<&str>, pre_stop: PreStop) -> String {
    let program = match image {
        Some(_) => Path::new("/")
            .join(exe.file_name().unwrap_or_default())
            .display()
            .to_string(),
        None => exe.display().to_string(),
    };
    let (on_sigterm, hook_seconds, lifecycle) = match pre_stop {
        PreStop::None => ("exit", 0, String::new()),
        PreStop::Sleep(s) => (
            "drain",
            s,
            format!(
                "        lifecycle:\n          preStop:\n            sleep: {{seconds: {s}}}\n"
            ),
        ),
        PreStop::Wait { quiet, max_seconds } => (
            "drain",
            max_seconds,
            format!(
                "        lifecycle:\n          preStop:\n            exec:\n              command: [{program:?}, prestop-wait, --quiet, \"{}ms\", --max, \"{max_seconds}s\", --port, \"8080\"]\n",
                quiet.as_millis()
            ),
        ),
    };
    let tgps = hook_seconds + DRAIN_SECONDS + 10;
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: demo}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: demo}}}}\n  template:\n    metadata: {{labels: {{app: demo}}}}\n    spec:\n      terminationGracePeriodSeconds: {tgps}\n      containers:\n      - name: app\n        image: {image}\n        imagePullPolicy: {policy}\n        command: [{program:?}, demo-app, --listen, \"0.0.0.0:8080\", --probe-listen, \"0.0.0.0:8081\", --on-sigterm, {on_sigterm}, --drain-seconds, \"{DRAIN_SECONDS}\"]\n        ports: [{{containerPort: 8080}}, {{containerPort: 8081, name: probes}}]\n        readinessProbe:\n          httpGet: {{path: /ready, port: 8081}}\n          periodSeconds: 1\n{lifecycle}",
        image = image.unwrap_or("podgrace/demo-app"),
        policy = if image.is_some() { "Never" } else { "IfNotPresent" },
    )
}

/// The demo's pod template ([`manifest_yaml`], loaded).
///
/// # Errors
/// [`DemoError`] if the built-in manifest does not load (a bug).
pub fn plan(exe: &Path, image: Option<&str>, pre_stop: PreStop) -> Result<PodPlan, DemoError> {
    let yaml = manifest_yaml(exe, image, pre_stop);
    let m =
        manifest::load(&yaml, "<built-in demo>").map_err(|e| DemoError::Manifest(e.to_string()))?;
    let plan = m.pods().next().cloned();
    plan.ok_or(DemoError::NoTemplate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_sleep_is_the_lag_plus_one_or_the_middle_of_the_range() {
        assert_eq!(sleep_seconds(LagModel::Fixed(Duration::from_secs(1))), 2);
        assert_eq!(
            sleep_seconds(LagModel::Fixed(Duration::from_millis(1500))),
            3
        );
        // The default range 0.5..5 s: its middle 2.75 s, rounded up.
        assert_eq!(sleep_seconds(default_lag(1)), 3);
    }

    #[test]
    fn prestop_wait_may_wait_out_the_lag_and_five_seconds_more() {
        assert_eq!(
            wait_hook(default_lag(1)),
            PreStop::Wait {
                quiet: Duration::from_secs(1),
                max_seconds: 10
            }
        );
    }

    #[test]
    fn the_load_is_stretched_over_every_runs_shutdowns() {
        let lag = default_lag(1);
        // The longest hook: the lag 5 s plus the quiet 1 s (above the 3 s sleep).
        assert_eq!(longest_hook_seconds(lag), 6.0);
        // 1 s + 2 × 3 replicas + 6 + 1 = 14 s.
        assert_eq!(
            load_needed(Duration::from_secs(8), Duration::from_secs(1), 3, lag),
            Some(Duration::from_secs(14))
        );
        assert_eq!(
            load_needed(Duration::from_secs(14), Duration::from_secs(1), 3, lag),
            None
        );
        // A short fixed lag of 1 s: the sleep 2 s is the longest hook; 1 + 2 + 2 + 1 = 6 s.
        let short = LagModel::Fixed(Duration::from_secs(1));
        assert_eq!(
            load_needed(Duration::from_secs(5), Duration::from_secs(1), 1, short),
            Some(Duration::from_secs(6))
        );
    }

    #[test]
    fn the_three_templates_load_with_their_hooks_and_grace() {
        let exe = Path::new("/usr/local/bin/podgrace");
        let none = plan(exe, None, PreStop::None).unwrap();
        assert_eq!(none.termination_grace_period_seconds, 30);
        assert!(none.containers[0].pre_stop.is_none());
        let sleep = plan(exe, None, PreStop::Sleep(3)).unwrap();
        assert_eq!(sleep.termination_grace_period_seconds, 33);
        assert!(sleep.containers[0].pre_stop.is_some());
        let wait = plan(exe, None, wait_hook(default_lag(1))).unwrap();
        assert_eq!(wait.termination_grace_period_seconds, 40);
        assert_eq!(wait.min_ready_seconds, 0);
        let yaml = manifest_yaml(exe, Some("podgrace.local/demo-app:abc"), PreStop::None);
        assert!(yaml.contains("command: [\"/podgrace\", demo-app"), "{yaml}");
        assert!(yaml.contains("imagePullPolicy: Never"), "{yaml}");
    }
}
