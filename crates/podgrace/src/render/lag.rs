//! `podgrace lag`'s text and JSON: one line per trial as it ends, then the lag over the trials,
//! the preStop sleep it calls for and the README's presets beside it.

use std::fmt::Write as _;
use std::time::Duration;

use podgrace_drill::lag::{LagConfig, LagReport, PreStopUse, Trial};
use serde_json::{json, Value};

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// `trial 1: pod web-7d4f-x2k: lag 1.512 s (...)`.
pub(crate) fn trial_line(t: &Trial) -> String {
    format!(
        "trial: pod {} marked terminating at {:.3} s (delete round trip {:.0} ms): last answer to a connection opened {} later{}; {} answers after the mark",
        t.pod,
        t.marked_at.as_secs_f64(),
        t.delete_round_trip.as_secs_f64() * 1000.0,
        secs(t.lag),
        if t.censored {
            " (at the end of its preStop: the lag is at least this; raise --prestop-seconds)"
        } else {
            ""
        },
        t.answered_after_mark
    )
}

/// The summary after the trials.
pub(crate) fn summary(r: &LagReport) -> String {
    let mut s = String::new();
    let censored = r.trials.iter().filter(|t| t.censored).count();
    match &r.summary {
        Some(sum) => {
            let _ = writeln!(
                s,
                "endpoint lag over {} trials: p50 {}, p99 {}, max {}{}",
                r.trials.len(),
                secs(sum.p50),
                secs(sum.p99),
                secs(sum.max),
                if censored > 0 {
                    format!(" ({censored} reached the end of the preStop: lower bounds)")
                } else {
                    String::new()
                }
            );
            let _ = writeln!(
                s,
                "recommended preStop sleep: {} s (p99 {} + margin {}, rounded up to whole seconds): lifecycle.preStop.sleep.seconds: {}",
                sum.recommended_prestop_seconds,
                secs(sum.p99),
                secs(r.margin),
                sum.recommended_prestop_seconds
            );
        }
        None => {
            let _ = writeln!(s, "no trial ran");
        }
    }
    let presets: Vec<String> = r
        .presets
        .iter()
        .map(|(name, lag, pre)| format!("{name} {} s → {pre} s", lag.as_secs()))
        .collect();
    let _ = writeln!(
        s,
        "the drill's presets (endpoint lag → preStop sleep): {}",
        presets.join(", ")
    );
    s
}

fn pre_stop_json(p: &PreStopUse) -> Value {
    match p {
        PreStopUse::Existing {
            container,
            seconds,
            what,
        } => json!({"use": "existing", "container": container, "seconds": seconds, "what": what}),
        PreStopUse::Patched {
            container,
            seconds,
            action,
            grace,
        } => json!({"use": "patched", "container": container, "seconds": seconds, "action": action,
            "terminationGracePeriodSeconds": {"before": grace.0, "during": grace.1}}),
    }
}

/// The `-o json` document.
pub(crate) fn json(r: &LagReport, cfg: &LagConfig, context: Option<&str>) -> Value {
    let f = |d: Duration| d.as_secs_f64();
    json!({
        "deployment": cfg.deployment,
        "namespace": cfg.namespace,
        "context": context,
        "target": cfg.probe.target.url,
        "rps": cfg.probe.rps,
        "podHeader": cfg.probe.pod_header.as_str(),
        "preStop": pre_stop_json(&r.pre_stop),
        "trials": r.trials.iter().map(|t| json!({
            "pod": t.pod,
            "markedAtSeconds": f(t.marked_at),
            "deleteRoundTripSeconds": f(t.delete_round_trip),
            "lagSeconds": f(t.lag),
            "answeredAfterMark": t.answered_after_mark,
            "censored": t.censored,
        })).collect::<Vec<_>>(),
        "lagSeconds": r.summary.as_ref().map(|s| json!({"p50": f(s.p50), "p99": f(s.p99), "max": f(s.max)})),
        "marginSeconds": f(r.margin),
        "recommendedPreStopSeconds": r.summary.as_ref().map(|s| s.recommended_prestop_seconds),
        "presets": r.presets.iter().map(|(name, lag, pre)| json!({
            "name": name, "lagSeconds": f(*lag), "preStopSeconds": pre,
        })).collect::<Vec<_>>(),
    })
}
