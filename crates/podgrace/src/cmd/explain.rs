//! `podgrace explain FILE...`: the termination timeline of every pod, per trigger, with the
//! findings lint gives the same input. What is valid is explained; what is not is reported on
//! stderr (exit 2); objects of kinds explain does not use under an apiVersion the API server
//! does not serve are skipped with a note.

use super::args::{DeleteArgs, FilesArgs, Format, KubeletArgs, OutputArgs, VersionArgs};
use crate::input::{self, InputError};
use crate::render::explain::render;
use crate::{out::Out, BadInput, Outcome};
use podgrace_core::lint::{self, LintOptions};
use podgrace_core::manifest::{self, ManifestError, ManifestErrorKind};
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::{kubectl_delete, KubectlDeleteFlags};
use podgrace_core::rules::latency::RuntimeProfile;
use podgrace_core::timeline::{
    self, Finding, KubeletConfig, LaterDelete, Options, Timeline, Trigger,
};
use std::collections::HashMap;
use std::io::Write as _;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    files: FilesArgs,
    /// delete, evict-soft, evict-hard, liveness:CONTAINER, startup:CONTAINER or
    /// node-shutdown; repeatable [default: delete]. --grace-period, --force and --now shape the
    /// delete (the older delete:N and force-delete still work).
    #[arg(long = "trigger", short = 't', value_name = "T")]
    triggers: Vec<Trigger>,
    #[command(flatten)]
    delete: DeleteArgs,
    #[command(flatten)]
    version: VersionArgs,
    #[command(flatten)]
    kubelet: KubeletArgs,
    /// kubelet shutdownGracePeriod, seconds (node-shutdown) [default: 30 s, 10 s of them for
    /// critical pods, as podgrace assumes when neither is given]
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(i64).range(0..))]
    shutdown_grace_period: Option<i64>,
    /// kubelet shutdownGracePeriodCriticalPods, seconds (node-shutdown) [default: the kubelet's
    /// 0 when --shutdown-grace-period is given, else 10]
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(i64).range(0..))]
    shutdown_grace_period_critical_pods: Option<i64>,
    /// A second `kubectl delete` while the termination runs: GRACE@SECONDS, GRACE a
    /// --grace-period, `force` or `now`, SECONDS after the termination started (3@2.3).
    #[arg(long, value_name = "GRACE@SECONDS")]
    second_delete: Option<LaterDelete>,
    /// Include the measured latencies of this runtime (containerd) in the times.
    #[arg(long, value_name = "RUNTIME")]
    runtime: Option<RuntimeProfile>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    image_source: super::ImageSourceArgs,
}

/// podgrace's node-shutdown settings when the user gives none: the kubelet's own default is 0
/// (graceful node shutdown off), which leaves nothing to explain.
const ASSUMED_SHUTDOWN_GRACE_PERIOD: i64 = 30;
const ASSUMED_SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS: i64 = 10;

/// The node-shutdown settings from the flags the user gave: podgrace's assumption (30 s, 10 s)
/// when neither is given; with `--shutdown-grace-period` alone, the kubelet's default 0 for
/// critical pods; with `--shutdown-grace-period-critical-pods` alone, the assumed 30 s.
/// Errors: critical pods' time above the whole (the kubelet refuses that configuration), worded
/// after what the user gave.
fn shutdown_settings(args: &Args) -> Result<(i64, i64), BadInput> {
    let kubelet = "invalid kubelet configuration: shutdownGracePeriodCriticalPods must be <= shutdownGracePeriod";
    match (args.shutdown_grace_period, args.shutdown_grace_period_critical_pods) {
        (None, None) => Ok((
            ASSUMED_SHUTDOWN_GRACE_PERIOD,
            ASSUMED_SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS,
        )),
        (Some(p), None) => Ok((p, 0)),
        (None, Some(c)) if c > ASSUMED_SHUTDOWN_GRACE_PERIOD => Err(BadInput(format!(
            "--shutdown-grace-period-critical-pods {c} is above shutdownGracePeriod, which is {ASSUMED_SHUTDOWN_GRACE_PERIOD} s when --shutdown-grace-period is not given ({kubelet}); give --shutdown-grace-period too"
        ))),
        (None, Some(c)) => Ok((ASSUMED_SHUTDOWN_GRACE_PERIOD, c)),
        (Some(p), Some(c)) if c > p => Err(BadInput(format!(
            "--shutdown-grace-period-critical-pods {c} is above --shutdown-grace-period {p} ({kubelet})"
        ))),
        (Some(p), Some(c)) => Ok((p, c)),
    }
}

/// The trigger a delete with these (valid) flags is: the pod's own grace, `delete:N`, or a force
/// delete.
fn delete_trigger(flags: KubectlDeleteFlags) -> Trigger {
    match kubectl_delete(flags).map(|r| r.grace_period_seconds) {
        Ok(Some(0)) => Trigger::ForceDelete,
        // --grace-period 0 without --force: the timeline says that kubectl sends 1.
        _ if flags.grace_period == 0 => Trigger::DeleteWithGrace(0),
        Ok(Some(n)) => Trigger::DeleteWithGrace(n),
        _ => Trigger::Delete,
    }
}

/// The triggers to explain: `--trigger`s (default `delete`), each plain `delete` shaped by the
/// delete flags. Errors: bad delete flags (kubectl's wording); delete flags without a delete.
fn triggers(args: &Args) -> Result<Vec<Trigger>, BadInput> {
    let flags = args.delete.flags()?;
    let mut triggers = if args.triggers.is_empty() {
        vec![Trigger::Delete]
    } else {
        args.triggers.clone()
    };
    if args.delete.given() {
        let shaped = delete_trigger(flags);
        let mut any = false;
        for t in triggers.iter_mut().filter(|t| **t == Trigger::Delete) {
            *t = shaped.clone();
            any = true;
        }
        if !any {
            return Err(BadInput(
                "--grace-period, --force and --now shape the delete trigger, and the --trigger list has no delete".into(),
            ));
        }
    }
    if let (Some(_), Some(t)) = (
        args.second_delete,
        triggers
            .iter()
            .find(|t| matches!(t, Trigger::Liveness(_) | Trigger::Startup(_))),
    ) {
        return Err(BadInput(format!(
            "--second-delete applies to the delete, eviction and node-shutdown triggers, not to --trigger {t} (a probe kill restarts one container; the pod is not terminating)"
        )));
    }
    Ok(triggers)
}

/// Kinds explain does not use on their own: an object of one of them that the API server would
/// not take under its apiVersion is skipped with a note (explain reads it only for lint's
/// findings, which leave it out too), not an error.
const UNUSED_KINDS: &[&str] = &["PodDisruptionBudget", "Service", "ConfigMap", "Secret"];

/// The note for an error that only says an object of a kind explain does not use comes under
/// an apiVersion the API server does not serve.
fn skipped_note(e: &ManifestError) -> Option<String> {
    let ManifestErrorKind::UnsupportedVersion {
        kind, api_version, ..
    } = &e.kind
    else {
        return None;
    };
    let known = UNUSED_KINDS.iter().find(|k| k.eq_ignore_ascii_case(kind))?;
    Some(format!(
        "{}:{}:{}: {kind} {api_version} skipped: explain does not use {known}s ({})",
        e.span.file, e.span.line, e.span.column, e.kind
    ))
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let (shutdown_grace_period, shutdown_grace_period_critical_pods) = shutdown_settings(&args)?;
    let triggers = triggers(&args)?;
    let files = args.files.all()?;
    let version = args.version.kubernetes_version;
    let opts = Options {
        version,
        kubelet: KubeletConfig {
            eviction_max_pod_grace_period: args.kubelet.eviction_max_pod_grace_period,
            shutdown_grace_period,
            shutdown_grace_period_critical_pods,
        },
        second_delete: args.second_delete,
        runtime: args.runtime,
    };
    let (docs, mut problems) = input::read_all(&files)?;
    let load_opts = manifest::LoadOptions {
        kube_version: version,
    };
    let mut manifests = Vec::with_capacity(docs.len());
    for doc in &docs {
        let (m, errs) = manifest::load_partial(&doc.text, &doc.name, &load_opts);
        let mut bad = false;
        for e in &errs {
            match skipped_note(e) {
                Some(note) => eprintln!("note: {note}"),
                None => {
                    problems.push(InputError::manifest(e));
                    bad = true;
                }
            }
        }
        if bad {
            problems.extend(input::template_hint(doc).map(InputError::general));
        }
        super::print_warnings(&m);
        manifests.push(m);
    }
    let mut pods: Vec<PodPlan> = manifests.iter().flat_map(|m| m.pods().cloned()).collect();
    super::read_image_stop_signals(&args.image_source.image_source, pods.iter_mut())?;
    if pods.is_empty() && problems.is_empty() {
        return Err(BadInput(input::no_pod_found(&files, &docs)).into());
    }
    // The findings lint gives each object, for the same input and version: explain shows them
    // for each of its pods (one code path), with each trigger's own.
    let lint_opts = LintOptions {
        version,
        ..Default::default()
    };
    let mut by_object: HashMap<(String, usize, usize), Vec<Finding>> = HashMap::new();
    for f in lint::lint(&manifests, &lint_opts) {
        let s = &f.object_span;
        by_object
            .entry((s.file.clone(), s.line, s.column))
            .or_default()
            .push(Finding {
                rule: f.rule,
                severity: f.severity,
                message: f.message,
            });
    }
    let mut timelines = if pods.is_empty() {
        Vec::new()
    } else {
        explain_all(&pods, &triggers, &opts).map_err(|e| {
            // The input's own errors first: they may be why a trigger applies to nothing.
            let mut lines: Vec<String> = problems.iter().map(|p| p.text.clone()).collect();
            lines.push(e.0);
            BadInput(lines.join("\n"))
        })?
    };
    for (pod, tl) in &mut timelines {
        let s = &pod.span;
        let mut findings = by_object
            .get(&(s.file.clone(), s.line, s.column))
            .cloned()
            .unwrap_or_default();
        for f in std::mem::take(&mut tl.findings) {
            if !findings
                .iter()
                .any(|l| l.rule == f.rule && l.message == f.message)
            {
                findings.push(f);
            }
        }
        tl.findings = findings;
    }
    match args.output.output {
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
    // What could not be read or is invalid fails the run (exit 2), after the rest was explained.
    if !problems.is_empty() {
        let lines: Vec<&str> = problems.iter().map(|p| p.text.as_str()).collect();
        return Err(BadInput(lines.join("\n")).into());
    }
    Ok(Outcome::Success)
}

/// The timelines of every pod for every trigger that applies to it
/// ([`timeline::explain_all`]): a probe trigger (`liveness:C`, `startup:C`) that skips some pods
/// (no container C, or C without that probe) says so on stderr; one that applies to no pod at
/// all is bad input, as is any other failure.
fn explain_all<'p>(
    pods: &'p [PodPlan],
    triggers: &[Trigger],
    opts: &Options,
) -> Result<Vec<(&'p PodPlan, Timeline)>, BadInput> {
    let e = timeline::explain_all(pods, triggers, opts).map_err(|e| BadInput(e.to_string()))?;
    for o in e.triggers.iter().filter(|o| o.applied) {
        for s in &o.skipped {
            eprintln!(
                "note: {}: --trigger {} skips pod {}: {}",
                s.at, o.trigger, s.pod, s.reason
            );
        }
    }
    match e.not_applied() {
        None => Ok(e.timelines),
        Some(msg) => Err(BadInput(msg)),
    }
}
