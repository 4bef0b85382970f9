//! `podgrace explain FILE...`: the termination timeline of every pod, per trigger.

use crate::{input, out::Out, BadInput, Outcome};
use podgrace_core::manifest;
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::latency::RuntimeProfile;
use podgrace_core::timeline::{
    self, ContainerTimeline, KubeletConfig, LaterDelete, Options, Severity, Timeline,
    TimelineError, Trigger,
};
use podgrace_core::{KubeVersion, Seconds};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Manifest files or directories (`-` for stdin).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// delete, delete:N, force-delete, evict-soft, evict-hard, liveness:CONTAINER,
    /// startup:CONTAINER or node-shutdown; repeatable [default: delete]
    #[arg(long = "trigger", short = 't', value_name = "T")]
    triggers: Vec<Trigger>,
    /// The Kubernetes version whose kubelet to reproduce.
    #[arg(long, value_name = "X.Y", default_value_t = KubeVersion::LATEST)]
    kubernetes_version: KubeVersion,
    /// kubelet evictionMaxPodGracePeriod, seconds (used by evict-soft).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    eviction_max_pod_grace_period: i64,
    /// kubelet shutdownGracePeriod, seconds (used by node-shutdown).
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(i64).range(0..))]
    shutdown_grace_period: i64,
    /// kubelet shutdownGracePeriodCriticalPods, seconds (used by node-shutdown).
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(i64).range(0..))]
    shutdown_grace_period_critical_pods: i64,
    /// A second `kubectl delete` while the termination runs: GRACE@SECONDS, GRACE a
    /// --grace-period, `force` or `now`, SECONDS after the termination started (3@2.3).
    #[arg(long, value_name = "GRACE@SECONDS")]
    second_delete: Option<LaterDelete>,
    /// Include the measured latencies of this runtime (containerd) in the times.
    #[arg(long, value_name = "RUNTIME")]
    runtime: Option<RuntimeProfile>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    output: Format,
    #[command(flatten)]
    image_source: super::ImageSourceArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    if args.shutdown_grace_period_critical_pods > args.shutdown_grace_period {
        return Err(BadInput(format!(
            "--shutdown-grace-period-critical-pods ({}) must not exceed --shutdown-grace-period ({})",
            args.shutdown_grace_period_critical_pods, args.shutdown_grace_period
        ))
        .into());
    }
    let triggers = if args.triggers.is_empty() {
        vec![Trigger::Delete]
    } else {
        args.triggers.clone()
    };
    if let (Some(_), Some(t)) = (
        args.second_delete,
        triggers
            .iter()
            .find(|t| matches!(t, Trigger::Liveness(_) | Trigger::Startup(_))),
    ) {
        return Err(BadInput(format!(
            "--second-delete applies to the delete, eviction and node-shutdown triggers, not to --trigger {t} (a probe kill restarts one container; the pod is not terminating)"
        ))
        .into());
    }
    let opts = Options {
        version: args.kubernetes_version,
        kubelet: KubeletConfig {
            eviction_max_pod_grace_period: args.eviction_max_pod_grace_period,
            shutdown_grace_period: args.shutdown_grace_period,
            shutdown_grace_period_critical_pods: args.shutdown_grace_period_critical_pods,
        },
        second_delete: args.second_delete,
        runtime: args.runtime,
    };
    let docs = input::read_all(&args.files)?;
    let load_opts = manifest::LoadOptions {
        kube_version: opts.version,
    };
    let mut errors = Vec::new();
    let mut pods = Vec::new();
    for doc in &docs {
        match manifest::load_with(&doc.text, &doc.name, &load_opts) {
            Ok(m) => pods.extend(m.pods().cloned()),
            Err(errs) => {
                errors.extend(errs.0.iter().map(ToString::to_string));
                errors.extend(input::template_hint(doc));
            }
        }
    }
    if !errors.is_empty() {
        return Err(BadInput(errors.join("\n")).into());
    }
    if pods.is_empty() {
        return Err(BadInput(input::no_pod_found(&args.files, &docs)).into());
    }
    super::read_image_stop_signals(&args.image_source.image_source, pods.iter_mut())?;
    let timelines = explain_all(&pods, &triggers, &opts)?;
    match args.output {
        Format::Json => {
            let all: Vec<&Timeline> = timelines.iter().map(|(_, t)| t).collect();
            let mut w = std::io::BufWriter::new(Out);
            serde_json::to_writer_pretty(&mut w, &all)?;
            writeln!(w)?;
            w.flush()?;
        }
        Format::Text => {
            let mut out = String::new();
            for (i, (pod, tl)) in timelines.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                render(&mut out, pod, tl);
            }
            write!(Out, "{out}")?;
        }
    }
    Ok(Outcome::Success)
}

/// At most this many pods are listed when a trigger applies to none of them.
const MAX_LISTED: usize = 10;

/// The timelines of every pod for every trigger that applies to it, pods in input order and the
/// triggers of each pod in the order given. A probe trigger (`liveness:C`, `startup:C`) that
/// does not apply to some pods (no container C, or C without that probe) skips them with a note
/// on stderr; one that applies to no pod at all is bad input, as is any other failure.
fn explain_all<'p>(
    pods: &'p [PodPlan],
    triggers: &[Trigger],
    opts: &Options,
) -> Result<Vec<(&'p PodPlan, Timeline)>, BadInput> {
    let at = |pod: &PodPlan| {
        let s = &pod.span;
        format!("{}:{}:{}", s.file, s.line, s.column)
    };
    let mut timelines = Vec::new();
    // Per trigger, the pods it skipped: (location, pod, why).
    let mut skipped: Vec<Vec<(String, String, String)>> = vec![Vec::new(); triggers.len()];
    let mut applied = vec![false; triggers.len()];
    for pod in pods {
        for (i, t) in triggers.iter().enumerate() {
            match timeline::explain(pod, t, opts) {
                Ok(tl) => {
                    applied[i] = true;
                    timelines.push((pod, tl));
                }
                Err(TimelineError::NotApplicable { pod: name, reason }) => {
                    skipped[i].push((at(pod), name, reason.to_string()));
                }
                Err(e) => return Err(BadInput(format!("{}: {e}", at(pod)))),
            }
        }
    }
    let mut errors = Vec::new();
    for (i, t) in triggers.iter().enumerate() {
        let why = &skipped[i];
        if applied[i] {
            for (at, pod, reason) in why {
                eprintln!("note: {at}: --trigger {t} skips pod {pod}: {reason}");
            }
        } else if let [(at, pod, reason)] = why.as_slice() {
            errors.push(format!("{at}: pod {pod}: {reason}"));
        } else {
            errors.push(format!(
                "--trigger {t} applies to none of the {} pods of the input:",
                why.len()
            ));
            for (at, pod, reason) in why.iter().take(MAX_LISTED) {
                errors.push(format!("  {at}: pod {pod}: {reason}"));
            }
            if why.len() > MAX_LISTED {
                errors.push(format!("  ... and {} more", why.len() - MAX_LISTED));
            }
        }
    }
    if errors.is_empty() {
        Ok(timelines)
    } else {
        Err(BadInput(errors.join("\n")))
    }
}

/// Width of the chart, in characters.
const CHART: usize = 48;

/// `5 s`, or `0–30 s` when the time depends on how long hooks and apps take (exact).
fn range(s: timeline::Span) -> String {
    if s.min == s.max {
        format!("{} s", s.min)
    } else {
        format!("{}–{} s", s.min, s.max)
    }
}

fn render(out: &mut String, pod: &PodPlan, tl: &Timeline) {
    let span = &pod.span;
    let _ = writeln!(
        out,
        "{} {} ({}:{}:{})  trigger {}  Kubernetes {}  grace period {} s",
        pod.kind.as_str(),
        tl.pod,
        span.file,
        span.line,
        span.column,
        tl.trigger,
        tl.kubernetes_version,
        tl.grace_period_seconds
    );
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
fn short(s: Seconds) -> String {
    if s.ms() < 1000 {
        format!("{} ms", s.ms())
    } else {
        format!("{s} s")
    }
}

/// The chart column of `t` on a chart ending at `end` (> 0).
fn col(t: Seconds, end: Seconds) -> usize {
    // Only the ratio matters, so f64 precision is plenty here.
    (((t.as_f64() / end.as_f64()) * CHART as f64).round() as usize).min(CHART)
}

/// The time axis: `0` at the left, the last SIGKILL at the right.
fn axis(end: Seconds) -> String {
    let label = format!("{end} s");
    let pad = (CHART + 1).saturating_sub(1 + label.len());
    format!("0{}{label}", " ".repeat(pad))
}

/// One run of a container through termination: hooks and apps at their fastest or slowest.
#[derive(PartialEq)]
struct Scenario {
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
