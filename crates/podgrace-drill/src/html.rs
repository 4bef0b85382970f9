//! The self-contained HTML report (`--report FILE.html`): a summary table and an inline SVG
//! timeline of requests per 100 ms (successes green, failures red, stacked) with the pods'
//! termination events drawn as labelled vertical lines. No external assets: one file that opens
//! in any browser.
//!
//! SVG shape (what tests and scripts may rely on): one `<rect class="ok">` per 100 ms bucket with
//! at least one success and one `<rect class="fail">` per bucket with at least one failure, each
//! with `data-t` (bucket start, ms since the epoch) and `data-count`; one `<line class="event">`
//! with `data-t` (ms) and one `<text class="event-label">` per event.

use crate::load::RequestRecord;
use crate::report::DrillReport;
use std::fmt::Write;
use std::time::Duration;

/// The width of one chart bucket: 100 ms.
pub const BUCKET: Duration = Duration::from_millis(100);

/// A marked instant on the timeline, e.g. `web-1: SIGTERM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartEvent {
    /// Since the epoch.
    pub at: Duration,
    /// What happened, as the chart labels it.
    pub label: String,
}

/// Escapes text for HTML and XML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Requests per 100 ms bucket, by intended send time: `(successes, failures)` per bucket, from
/// the epoch to the last request.
pub fn buckets(records: &[RequestRecord]) -> Vec<(u64, u64)> {
    let width = BUCKET.as_nanos();
    let n = records
        .iter()
        .map(|r| r.intended.as_nanos() / width + 1)
        .max()
        .unwrap_or(0);
    let mut out = vec![(0u64, 0u64); n as usize];
    for r in records {
        let i = (r.intended.as_nanos() / width) as usize;
        if let Some(b) = out.get_mut(i) {
            if r.outcome.is_failure() {
                b.1 += 1;
            } else {
                b.0 += 1;
            }
        }
    }
    out
}

/// The chart's width in pixels: it fills a 1,400 px page (less the page's margins).
pub const CHART_WIDTH: f64 = 1_300.0;
/// Event label font size, px, and the width a character takes at most (sans-serif, 11 px).
const LABEL_FONT: f64 = 11.0;
const LABEL_CHAR_W: f64 = 6.6;
const LANE_H: f64 = 15.0;

/// The colour of an event's line and label, by what the label says (every one dark enough on
/// white: the labels sit above the plot, never on a bar).
fn event_colour(label: &str) -> &'static str {
    if label.ends_with("SIGKILL") {
        "#000000"
    } else if label.ends_with("stop signal") {
        "#b35900"
    } else if label.ends_with("endpoint removed") {
        "#1f3b8c"
    } else if label.ends_with("gave up") {
        "#6a1b9a"
    } else {
        "#444444"
    }
}

/// The label lanes: events in time order, each label in the first lane (0 nearest the plot)
/// where it does not touch the label before it; `(event index, lane)`.
fn lanes(xs: &[(usize, f64, f64)]) -> (Vec<(usize, usize)>, usize) {
    let mut sorted: Vec<&(usize, f64, f64)> = xs.iter().collect();
    sorted.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut ends: Vec<f64> = Vec::new();
    let mut out = Vec::new();
    for (i, x, w) in sorted {
        let lane = match ends.iter().position(|e| *e + 6.0 <= *x) {
            Some(l) => l,
            None => {
                ends.push(f64::MIN);
                ends.len() - 1
            }
        };
        ends[lane] = x + w;
        out.push((*i, lane));
    }
    (out, ends.len())
}

/// The timeline chart as an SVG element, [`CHART_WIDTH`] wide: bars per 100 ms, the seconds
/// along the x axis, and each event as a coloured vertical line with its label in a lane above
/// the plot (labels never overlap each other or the bars; a label that would run past the
/// right edge ends at its line instead).
pub fn timeline_svg(records: &[RequestRecord], events: &[ChartEvent]) -> String {
    let b = buckets(records);
    let last_event = events
        .iter()
        .map(|e| (e.at.as_nanos() / BUCKET.as_nanos() + 1) as usize)
        .max()
        .unwrap_or(0);
    let n = b.len().max(last_event).max(1);
    let (left, right) = (50.0_f64, 20.0_f64);
    let plot_w = CHART_WIDTH - left - right;
    let bar_w = plot_w / n as f64;
    let x_of = |at: Duration| left + at.as_secs_f64() / BUCKET.as_secs_f64() * bar_w;
    // Each label's x (its start) and width; labels near the right edge are drawn leftwards.
    let placed: Vec<(usize, f64, f64)> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let w = e.label.chars().count() as f64 * LABEL_CHAR_W;
            let x = x_of(e.at) + 3.0;
            let x = if x + w > CHART_WIDTH - 2.0 {
                x - w - 6.0
            } else {
                x
            };
            (i, x.max(0.0), w)
        })
        .collect();
    let (lane_of, n_lanes) = lanes(&placed);
    let top = 10.0 + n_lanes as f64 * LANE_H;
    let plot_h = 240.0_f64;
    let base = top + plot_h;
    let height = base + 30.0;
    let width = CHART_WIDTH;
    let max = b.iter().map(|(ok, f)| ok + f).max().unwrap_or(0).max(1) as f64;
    let scale = plot_h / max;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="{LABEL_FONT}">"#
    );
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="#ffffff"/><line x1="{left}" y1="{base}" x2="{x2:.1}" y2="{base}" stroke="#333"/><line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#333"/>"##,
        x2 = width - right
    );
    let _ = write!(
        s,
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="end">{max:.0}</text><text x="{x:.1}" y="{base}" text-anchor="end">0</text>"#,
        x = left - 4.0,
        y = top + 4.0
    );
    for (i, (ok, fail)) in b.iter().enumerate() {
        let x = left + i as f64 * bar_w;
        let t_ms = i as u128 * BUCKET.as_millis();
        let h_ok = *ok as f64 * scale;
        let h_fail = *fail as f64 * scale;
        let w = (bar_w * 0.85).max(0.5);
        if *ok > 0 {
            let _ = write!(
                s,
                r##"<rect class="ok" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h_ok:.1}" fill="#2ca02c" data-t="{t_ms}" data-count="{ok}"><title>{t:.1} s: {ok} ok</title></rect>"##,
                y = base - h_ok,
                t = t_ms as f64 / 1000.0
            );
        }
        if *fail > 0 {
            let _ = write!(
                s,
                r##"<rect class="fail" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h_fail:.1}" fill="#d62728" data-t="{t_ms}" data-count="{fail}"><title>{t:.1} s: {fail} failed</title></rect>"##,
                y = base - h_ok - h_fail,
                t = t_ms as f64 / 1000.0
            );
        }
    }
    // Seconds along the x axis, at most about 20 labels.
    let secs = (n as u128 * BUCKET.as_millis()).div_ceil(1000);
    let step = secs.div_ceil(20).max(1);
    let mut sec = 0;
    while sec <= secs && sec * 10 <= n as u128 {
        let x = left + (sec * 10) as f64 * bar_w;
        let _ = write!(
            s,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="middle">{sec} s</text>"#,
            y = base + 14.0
        );
        sec += step;
    }
    for (i, lane) in lane_of {
        let e = &events[i];
        let (_, tx, _) = placed[i];
        let x = x_of(e.at);
        let colour = event_colour(&e.label);
        let ty = top - 4.0 - lane as f64 * LANE_H;
        let _ = write!(
            s,
            r##"<line class="event" x1="{x:.1}" y1="{y1:.1}" x2="{x:.1}" y2="{base}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="4 2" data-t="{t}"/><text class="event-label" x="{tx:.1}" y="{ty:.1}" fill="{colour}">{label}</text>"##,
            y1 = ty + 3.0,
            t = e.at.as_millis(),
            label = escape(&e.label)
        );
    }
    s.push_str("</svg>");
    s
}

/// Errors of [`write_report`].
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    /// The file could not be written.
    #[error("cannot write the report {path}: {source}")]
    Write {
        /// The report's path.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What the built-in demo adds to `--report FILE.html`'s file stem for its three runs (without a
/// preStop, with a preStop sleep, with `podgrace prestop-wait`), in that order.
pub const DEMO_REPORT_SUFFIXES: [&str; 3] = ["-without-prestop", "-with-prestop", "-prestop-wait"];

/// `path` with `suffix` added to its file stem, before the extension: `out/r.html` and
/// `-with-prestop` give `out/r-with-prestop.html`; a path without an extension gets the suffix
/// at its end.
pub fn suffixed_path(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!("{stem}{suffix}{ext}"))
}

/// Writes a page made by [`html_report`] to `path` (`--report FILE.html`).
pub fn write_report(path: &std::path::Path, page: &str) -> Result<(), HtmlError> {
    std::fs::write(path, page).map_err(|source| HtmlError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The whole page: title, verdict, the report's numbers, and the timeline.
pub fn html_report(
    title: &str,
    report: &DrillReport,
    records: &[RequestRecord],
    events: &[ChartEvent],
) -> String {
    let mut h = String::new();
    let verdict = match report.verdict {
        crate::report::Verdict::Pass => "pass",
        crate::report::Verdict::Fail => "fail",
    };
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{t}</title>
<style>body{{font-family:sans-serif;margin:2em;background:#fff;color:#111}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}th{{text-align:left}}.pass{{color:#2ca02c}}.fail{{color:#d62728}}</style>
</head><body>
<h1>{t}</h1>
<p>Scenario <b>{scenario}</b>, {rps} requests/s, endpoint lag {lag} s. Verdict: <b class="{verdict}">{verdict}</b> ({failed} of {requests} requests{streams} failed).</p>
<table>
<tr><th>refused</th><td>{refused}</td><th>before stop signal</th><td>{before}</td><th>p50</th><td>{p50:.2} ms</td></tr>
<tr><th>reset</th><td>{reset}</td><th>after stop signal</th><td>{after}</td><th>p99</th><td>{p99:.2} ms</td></tr>
<tr><th>timeout</th><td>{timeout}</td><th>after SIGKILL</th><td>{kill}</td><th>max</th><td>{max:.2} ms</td></tr>
<tr><th>HTTP 5xx</th><td>{http5xx}</td><td colspan="4"></td></tr>
</table>
<h2>Requests per 100 ms</h2>
<p>Green: succeeded; red: failed (by intended send time). Dashed lines: termination events.</p>
"#,
        t = escape(title),
        scenario = escape(&report.scenario),
        rps = report.rps,
        lag = report.endpoint_lag_seconds,
        failed = report.failed,
        requests = report.requests,
        streams = report
            .streams
            .map(|st| format!(" and {} of {} streams", st.failed, st.opened))
            .unwrap_or_default(),
        refused = report.failures_by_kind.refused,
        reset = report.failures_by_kind.reset,
        timeout = report.failures_by_kind.timeout,
        http5xx = report.failures_by_kind.http5xx,
        before = report.failures_by_phase.before_stop_signal,
        after = report.failures_by_phase.after_stop_signal,
        kill = report.failures_by_phase.after_kill,
        p50 = report.latency_ms.p50,
        p99 = report.latency_ms.p99,
        max = report.latency_ms.max,
    );
    h.push_str(&timeline_svg(records, events));
    if !report.failures_by_pod.is_empty() {
        h.push_str("\n<h2>Failures by pod</h2>\n<table class=\"by-pod\">\n<tr><th>pod</th><th>failed</th><th>before stop signal</th><th>after stop signal</th><th>after SIGKILL</th></tr>\n");
        for f in &report.failures_by_pod {
            let p = &f.failures_by_phase;
            let _ = writeln!(
                h,
                "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(f.pod.as_deref().unwrap_or("(no pod)")),
                f.failed,
                p.before_stop_signal,
                p.after_stop_signal,
                p.after_kill
            );
        }
        h.push_str("</table>\n");
    }
    if let Some(st) = &report.streams {
        let _ = write!(
            h,
            "\n<h2>Streams</h2>\n<p>{} opened: {} completed, {} failed (refused {}, reset {}, HTTP 5xx {}, rejected {}), {} still open at the end, {} cut.</p>\n",
            st.opened,
            st.completed,
            st.failed,
            st.failures_by_kind.refused,
            st.failures_by_kind.reset,
            st.failures_by_kind.http5xx,
            st.rejected,
            st.unfinished,
            if st.idle_cut == 1 {
                "1 idle stream".to_string()
            } else {
                format!("{} idle streams", st.idle_cut)
            }
        );
    }
    if !report.advice.is_empty() {
        h.push_str("\n<h2>Advice</h2>\n<ul class=\"advice\">\n");
        for a in &report.advice {
            let _ = writeln!(h, "<li>{}</li>", escape(a));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("\n</body></html>\n");
    h
}

#[cfg(test)]
mod suffix_tests {
    use super::*;
    use std::path::{Path, PathBuf};

    #[test]
    fn the_suffix_goes_between_stem_and_extension() {
        assert_eq!(
            suffixed_path(Path::new("out/r.html"), "-with-prestop"),
            PathBuf::from("out/r-with-prestop.html")
        );
        assert_eq!(
            suffixed_path(Path::new("report.tar.html"), "-prestop-wait"),
            PathBuf::from("report.tar-prestop-wait.html")
        );
        assert_eq!(
            suffixed_path(Path::new("/tmp/report"), "-without-prestop"),
            PathBuf::from("/tmp/report-without-prestop")
        );
    }

    #[test]
    fn the_demo_suffixes_name_three_distinct_files() {
        let names: std::collections::BTreeSet<PathBuf> = DEMO_REPORT_SUFFIXES
            .iter()
            .map(|s| suffixed_path(Path::new("r.html"), s))
            .collect();
        assert_eq!(names.len(), 3);
        assert!(names.contains(Path::new("r-without-prestop.html")));
    }
}
