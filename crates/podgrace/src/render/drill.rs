//! `podgrace drill`'s text: the progress lines, one drill's summary, the built-in demo's three
//! summaries and its side-by-side table, and the notes printed on stderr (`-o json` prints
//! [`DrillReport`] as it is).

use std::fmt::Write as _;
use std::time::Duration;

use podgrace_drill::endpoints::LagModel;
use podgrace_drill::report::{DrillReport, Verdict};
use podgrace_drill::scenario::DrillOutcome;

/// One progress line: `t` seconds since the drill started (right-aligned, two decimals), then
/// the scenario's log line.
pub(crate) fn progress(t: f64, line: &str) -> String {
    format!("{t:>7.2}s  {line}")
}

/// One progress line on stderr when no progress bar is drawn: the drill's `title` first.
pub(crate) fn progress_titled(title: &str, t: f64, line: &str) -> String {
    format!("{title}: {}", progress(t, line))
}

/// The note that `--runtime-latency` is on: the profile's name and the seed that repeats it.
pub(crate) fn runtime_latencies(runtime: impl std::fmt::Display, seed: u64) -> String {
    format!(
        "runtime latencies: {runtime} as measured (--runtime-latency-seed {seed} repeats these draws)"
    )
}

/// The note that the demo's load runs longer than `--duration` (`needed`): `longest_hook` is the
/// longest shutdown after a deletion, seconds.
pub(crate) fn load_extended(needed: Duration, duration: Duration, longest_hook: f64) -> String {
    format!(
        "drill: the load runs {:.0} s (not {:.1} s) so that every run's shutdowns, up to {:.1} s after each deletion, are under load",
        needed.as_secs_f64(),
        duration.as_secs_f64(),
        longest_hook
    )
}

/// The note after SIGINT or SIGTERM ended a drill on the process runtime: `removed` pod
/// network namespaces were removed.
pub(crate) fn interrupted(removed: usize) -> String {
    format!(
        "interrupted: the drill's pods are stopped and {} removed",
        match removed {
            1 => "1 pod network namespace".to_string(),
            n => format!("{n} pod network namespaces"),
        }
    )
}

/// The note after SIGINT or SIGTERM ended a drill on containerd: `n` pods were removed.
pub(crate) fn interrupted_containerd(n: usize) -> String {
    format!("interrupted: the drill's {n} pods on containerd are stopped and removed")
}

/// The HTML report's title of `drill FILE` for the pod `name`.
pub(crate) fn html_title(name: &str) -> String {
    format!("podgrace drill: {name}")
}

/// The HTML reports' titles of the demo's three runs, with a `sleep` seconds preStop sleep in
/// the second.
pub(crate) fn demo_html_titles(sleep: i64) -> [String; 3] {
    [
        "podgrace drill demo: without preStop".to_string(),
        format!("podgrace drill demo: with a {sleep} s preStop sleep"),
        "podgrace drill demo: with podgrace prestop-wait as the preStop hook".to_string(),
    ]
}

/// The demo's text: each run's summary under its heading, then the side-by-side table. `sleep`
/// is the second run's preStop sleep, seconds; `quiet` the third's `prestop-wait --quiet`,
/// seconds.
pub(crate) fn demo(runs: [&DrillOutcome; 3], sleep: i64, quiet: f64, lag: LagModel) -> String {
    let [a, b, c] = runs;
    let mut s = String::new();
    let _ = write!(
        s,
        "\n1/3 without preStop, the app exits on SIGTERM:{}",
        summary(a)
    );
    let _ = write!(
        s,
        "\n2/3 with a {sleep} s preStop sleep, the app drains:{}",
        summary(b)
    );
    let _ = write!(
        s,
        "\n3/3 with `podgrace prestop-wait --quiet {quiet}s` as the preStop hook, the app drains:{}",
        summary(c)
    );
    s.push_str(&side_by_side(
        &[&a.report, &b.report, &c.report],
        sleep,
        lag,
    ));
    s
}

/// The text summary of one drill.
pub(crate) fn summary(o: &DrillOutcome) -> String {
    let r = &o.report;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\ndrill {}: {} requests/s ({}, {} client, through {}{}), endpoint lag {}",
        r.scenario,
        r.rps,
        r.settings.protocol,
        r.settings.client,
        r.settings.proxy,
        match r.settings.proxy_implementation {
            Some("netfilter") => " on the kernel's netfilter",
            Some(_) => " in user space",
            None => "",
        },
        match (r.settings.endpoint_lag_model, r.settings.endpoint_lag_range) {
            ("kube-proxy", _) => format!(
                "kube-proxy's sync (minSyncPeriod {:.1} s)",
                r.endpoint_lag_seconds
            ),
            (_, Some(g)) => format!(
                "per pod, uniform in {:.1}..{:.1} s (seed {})",
                g.min_seconds, g.max_seconds, g.seed
            ),
            _ => format!("{:.1} s", r.endpoint_lag_seconds),
        }
    );
    if r.rps == 0.0 {
        let _ = writeln!(s, "  requests: none (--rps 0)");
    } else {
        request_lines(&mut s, r);
    }
    if let Some(st) = &r.streams {
        let k = &st.failures_by_kind;
        let _ = writeln!(
            s,
            "  streams {}: completed {}, failed {} (refused {}, connect timeout {}, reset {}, HTTP 5xx {}, rejected {}), still open at the end {}, idle streams cut {}",
            st.opened, st.completed, st.failed, k.refused, k.connect_timeout, k.reset, k.http5xx, st.rejected, st.unfinished, st.idle_cut
        );
        let p = &st.failures_by_phase;
        let _ = writeln!(
            s,
            "  stream failures by phase: before the stop signal {}, after it {}, after SIGKILL {}",
            p.before_stop_signal, p.after_stop_signal, p.after_kill
        );
    }
    for t in &r.terminations {
        let at = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{x:.2} s"));
        let _ = writeln!(
            s,
            "  {}: endpoint lag {:.2} s; after its deletion: endpoint removed {}, stop signal {}, ended {}{}; failed {}",
            t.pod,
            t.endpoint_lag_seconds,
            at(t.endpoint_removed_seconds),
            at(t.stop_signal_seconds),
            at(t.ended_seconds),
            t.end_minus_lag_seconds
                .map(|d| format!(" ({d:+.2} s past its lag)"))
                .unwrap_or_default(),
            t.failed
        );
    }
    let _ = writeln!(
        s,
        "  verdict: {}",
        match r.verdict {
            Verdict::Pass => "PASS (no request or stream failed)",
            Verdict::Fail => "FAIL",
        }
    );
    for a in &o.advice {
        let _ = writeln!(s, "  advice: {a}");
    }
    s
}

/// The request lines of the text summary.
fn request_lines(s: &mut String, r: &DrillReport) {
    let k = &r.failures_by_kind;
    let p = &r.failures_by_phase;
    let _ = writeln!(
        s,
        "  requests {}, failed {} (connect timeout {}, refused {}, EOF {} ({} on a reused connection), reset {}, timeout {}, HTTP 5xx {})",
        r.requests,
        r.failed,
        k.connect_timeout,
        k.refused,
        k.eof,
        k.eof_on_reuse,
        k.reset,
        k.timeout,
        k.http5xx
    );
    if r.stale_conntrack > 0 {
        let _ = writeln!(
            s,
            "  of them {} new connections that followed a stale conntrack entry to a pod that was gone",
            r.stale_conntrack
        );
    }
    let _ = writeln!(
        s,
        "  failures by phase: before the stop signal {}, after it {}, after SIGKILL {}",
        p.before_stop_signal, p.after_stop_signal, p.after_kill
    );
    if !r.failures_by_pod.is_empty() {
        let per_pod: Vec<String> = r
            .failures_by_pod
            .iter()
            .map(|f| format!("{} {}", f.pod.as_deref().unwrap_or("no pod"), f.failed))
            .collect();
        let _ = writeln!(s, "  failed requests by pod: {}", per_pod.join(", "));
    }
    let _ = writeln!(
        s,
        "  latency from the intended send time: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        r.latency_ms.p50, r.latency_ms.p99, r.latency_ms.max
    );
}

/// The demo's runs side by side: failures, latency, and each disrupted pod's termination
/// against its own lag (the same pod names, so the same lags, in every run).
fn side_by_side(runs: &[&DrillReport], sleep: i64, lag: LagModel) -> String {
    let mut s = String::new();
    let heads = [
        "without preStop".to_string(),
        format!("preStop sleep {sleep} s"),
        "prestop-wait".to_string(),
    ];
    let lag_text = match lag {
        LagModel::PerPod(r) => format!(
            "each pod's own, uniform in {:.1}..{:.1} s (seed {})",
            r.min.as_secs_f64(),
            r.max.as_secs_f64(),
            r.seed
        ),
        other => format!("{:.1} s", other.nominal().as_secs_f64()),
    };
    let _ = write!(
        s,
        "\nthe endpoint race, endpoint lag {lag_text}:\n  {:34}",
        ""
    );
    for h in heads.iter().take(runs.len()) {
        let _ = write!(s, " {h:>24}");
    }
    let _ = writeln!(s);
    type Cell = Box<dyn Fn(&DrillReport) -> String>;
    let mut rows: Vec<(String, Cell)> = vec![
        ("requests".into(), Box::new(|r| r.requests.to_string())),
        ("failed".into(), Box::new(|r| r.failed.to_string())),
        (
            "  connect timeout / refused".into(),
            Box::new(|r| {
                format!(
                    "{} / {}",
                    r.failures_by_kind.connect_timeout, r.failures_by_kind.refused
                )
            }),
        ),
        (
            "  EOF / reset".into(),
            Box::new(|r| format!("{} / {}", r.failures_by_kind.eof, r.failures_by_kind.reset)),
        ),
        (
            "  timeout / HTTP 5xx".into(),
            Box::new(|r| {
                format!(
                    "{} / {}",
                    r.failures_by_kind.timeout, r.failures_by_kind.http5xx
                )
            }),
        ),
        (
            "latency p99".into(),
            Box::new(|r| format!("{:.2} ms", r.latency_ms.p99)),
        ),
    ];
    if runs.iter().any(|r| r.streams.is_some()) {
        rows.push((
            "streams failed".into(),
            Box::new(|r| {
                r.streams
                    .map(|s| format!("{} of {}", s.failed, s.opened))
                    .unwrap_or_default()
            }),
        ));
    }
    // One row per disrupted pod: when its termination ended after its deletion, how far past its
    // own lag, and what it lost.
    if let Some(first) = runs.first() {
        for t in &first.terminations {
            let pod = t.pod.clone();
            rows.push((
                format!("{pod}, lag {:.2} s: ended", t.endpoint_lag_seconds),
                Box::new(move |r| {
                    r.terminations
                        .iter()
                        .find(|x| x.pod == pod)
                        .map(|x| match (x.ended_seconds, x.end_minus_lag_seconds) {
                            (Some(e), Some(d)) => format!("{e:.2} s ({d:+.2}), lost {}", x.failed),
                            _ => format!("-, lost {}", x.failed),
                        })
                        .unwrap_or_default()
                }),
            ));
        }
    }
    rows.push((
        "verdict".into(),
        Box::new(|r| format!("{:?}", r.verdict).to_uppercase()),
    ));
    for (name, cell) in rows {
        let _ = write!(s, "  {name:34}");
        for r in runs {
            let _ = write!(s, " {:>24}", cell(r));
        }
        let _ = writeln!(s);
    }
    s
}
