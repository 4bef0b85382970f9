//! `podgrace explain`'s text: per pod and trigger, the timeline's table, the chart and the findings.

use podgrace_core::plan::PodPlan;
use podgrace_core::timeline::{self, ContainerTimeline, Severity, Timeline};
use podgrace_core::Seconds;
use std::fmt::Write as _;

/// Width of the chart, in characters.
pub(crate) const CHART: usize = 48;

/// `5 s`, or `0–30 s` when the time depends on how long hooks and apps take (exact).
pub(crate) fn range(s: timeline::Span) -> String {
    if s.min == s.max {
        format!("{} s", s.min)
    } else {
        format!("{}–{} s", s.min, s.max)
    }
}

/// One pod's timeline for one trigger; `place` says where the object is (`deploy.yaml:1:1`, or
/// `deployment/web` for a live object), `kubelet` the settings of its node's kubelet (live
/// objects).
pub(crate) fn render(
    out: &mut String,
    pod: &PodPlan,
    tl: &Timeline,
    place: &str,
    kubelet: Option<&str>,
) {
    let _ = writeln!(
        out,
        "{} {} ({place})  trigger {}  Kubernetes {}  grace period {} s",
        pod.kind.as_str(),
        tl.pod,
        tl.trigger,
        tl.kubernetes_version,
        tl.grace_period_seconds
    );
    if let Some(k) = kubelet {
        let _ = writeln!(out, "  {k}");
    }
    let name_w = tl
        .containers
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(4)
        .max(9);
    let _ = writeln!(
        out,
        "  {:name_w$}  {:7}  {:22}  {:24}  SIGKILL IF STILL RUNNING",
        "CONTAINER", "ROLE", "PRESTOP", "STOP SIGNAL"
    );
    for c in &tl.containers {
        let hook = match &c.pre_stop {
            Some(p) => format!("{} 0 → {}", p.action, range(p.end_seconds)),
            None => "-".to_string(),
        };
        let signal = format!("{} at {}", c.stop_signal, range(c.stop_signal_seconds));
        let _ = writeln!(
            out,
            "  {:name_w$}  {:7}  {:22}  {:24}  at {}",
            c.name,
            c.role,
            hook,
            signal,
            range(c.kill_seconds)
        );
    }
    let end = tl
        .containers
        .iter()
        .map(|c| c.kill_seconds.max)
        .fold(Seconds::from_secs(1), Seconds::max);
    let _ = writeln!(out);
    let _ = writeln!(out, "  {:name_w$}  {}", "", axis(end));
    for c in &tl.containers {
        let fastest = Scenario::of(c, |s| s.min);
        let slowest = Scenario::of(c, |s| s.max);
        let _ = writeln!(out, "  {:name_w$}  {}", c.name, fastest.bar(end));
        if slowest != fastest {
            let _ = writeln!(out, "  {:>name_w$}  {}", "(slowest)", slowest.bar(end));
        }
    }
    let turn = if tl.containers.iter().any(|c| c.role == "sidecar") {
        "  - waiting for its turn"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  {:name_w$}  = preStop{turn}  S stop signal  . waiting for exit  K SIGKILL",
        ""
    );
    if let Some(sd) = &tl.second_delete {
        let api = match (
            sd.api,
            sd.deletion_grace_period_seconds,
            sd.deletion_timestamp_seconds,
        ) {
            ("shortened", Some(g), Some(dt)) => {
                format!("deletionGracePeriodSeconds {g}, deletionTimestamp t={dt} s")
            }
            ("deleted", _, _) => "the object is removed".to_string(),
            ("unchanged", _, _) => "nothing changes (not shorter)".to_string(),
            _ => "NotFound (the object is gone)".to_string(),
        };
        let kubelet = match sd.kubelet {
            "ignored" => format!(
                "does not shorten: the kill in flight keeps {} s",
                sd.kill_grace_period_seconds
            ),
            "killedAgain" => "kills every container again (times above include it)".to_string(),
            "over" => "the kill is already over".to_string(),
            _ => "nothing changes".to_string(),
        };
        let _ = writeln!(
            out,
            "  second delete at t={} s: API {api}; kubelet {kubelet}",
            sd.at_seconds
        );
    }
    if let Some(rt) = &tl.runtime {
        let _ = writeln!(
            out,
            "  times include the latencies measured on {}:",
            rt.name
        );
        for l in &rt.latencies {
            let median = l
                .median_seconds
                .map(|m| format!(", median {}", short(m)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    {}: {}–{}{median} (source: {})",
                l.what,
                short(l.min_seconds),
                short(l.max_seconds),
                l.source
            );
        }
    }
    if !tl.findings.is_empty() {
        let _ = writeln!(out, "  findings:");
        for f in &tl.findings {
            let sev = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Info => "info",
            };
            let _ = writeln!(out, "    {sev:7} {}: {}", f.rule, f.message);
        }
    }
}

/// A short latency: `8 ms` below a second, else `2.9 s`.
pub(crate) fn short(s: Seconds) -> String {
    if s.ms() < 1000 {
        format!("{} ms", s.ms())
    } else {
        format!("{s} s")
    }
}

/// The chart column of `t` on a chart ending at `end` (> 0).
pub(crate) fn col(t: Seconds, end: Seconds) -> usize {
    // Only the ratio matters, so f64 precision is plenty here.
    (((t.as_f64() / end.as_f64()) * CHART as f64).round() as usize).min(CHART)
}

/// The time axis: `0` at the left, the last SIGKILL at the right.
pub(crate) fn axis(end: Seconds) -> String {
    let label = format!("{end} s");
    let pad = (CHART + 1).saturating_sub(1 + label.len());
    format!("0{}{label}", " ".repeat(pad))
}

/// One run of a container through termination: hooks and apps at their fastest or slowest.
#[derive(PartialEq)]
pub(crate) struct Scenario {
    hook_end: Option<Seconds>,
    stop: Seconds,
    kill: Seconds,
}

impl Scenario {
    fn of(c: &ContainerTimeline, pick: impl Fn(timeline::Span) -> Seconds) -> Scenario {
        Scenario {
            hook_end: c.pre_stop.as_ref().map(|p| pick(p.end_seconds)),
            stop: pick(c.stop_signal_seconds),
            kill: pick(c.kill_seconds),
        }
    }

    fn bar(&self, end: Seconds) -> String {
        let mut s = vec![' '; CHART + 1];
        let (stop, kill) = (col(self.stop, end), col(self.kill, end));
        let hook_end = col(self.hook_end.unwrap_or(Seconds::ZERO), end);
        for slot in s.iter_mut().take(hook_end) {
            *slot = '=';
        }
        // A sidecar waits for its turn between its hook and its stop signal.
        for slot in s.iter_mut().take(stop).skip(hook_end) {
            *slot = '-';
        }
        for slot in s.iter_mut().take(kill).skip(stop) {
            *slot = '.';
        }
        s[stop] = 'S';
        s[kill] = 'K';
        s.into_iter().collect::<String>().trim_end().to_string()
    }
}
