//! `podgrace explain FILE...`: the termination timeline of every pod, per trigger, with the
//! findings lint gives the same input. What is valid is explained; what is not is reported on
//! stderr (exit 2); objects of kinds explain does not use under an apiVersion the API server
//! does not serve are skipped with a note. `podgrace explain deployment/web` (or `pod/NAME`,
//! `-n NS`, `-A`) reads live objects from a cluster instead, with the kubelet settings of the
//! node each one's pods run on.

use super::args::{ClusterArgs, DeleteArgs, FilesArgs, Format, OutputArgs};
use super::live::{self, KubeletSource, Live};
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
use podgrace_core::KubeVersion;
use std::collections::HashMap;
use std::io::Write as _;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    files: FilesArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Every namespace of the cluster (with no TYPE/NAME).
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// delete, evict-soft, evict-hard, liveness:CONTAINER, startup:CONTAINER or
    /// node-shutdown; repeatable [default: delete]. --grace-period, --force and --now shape the
    /// delete (the older delete:N and force-delete still work).
    #[arg(long = "trigger", short = 't', value_name = "T")]
    triggers: Vec<Trigger>,
    #[command(flatten)]
    delete: DeleteArgs,
    /// The Kubernetes version whose API server and kubelet to reproduce [default: the
    /// cluster's for live objects, else 1.37].
    #[arg(long, value_name = "X.Y")]
    kubernetes_version: Option<KubeVersion>,
    /// kubelet evictionMaxPodGracePeriod, seconds (a soft eviction's longest grace) [default:
    /// the node's for live objects, else the kubelet's 0]
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    eviction_max_pod_grace_period: Option<i64>,
    /// kubelet shutdownGracePeriod, seconds (node-shutdown) [default: the node's for live
    /// objects, else 30 s, 10 s of them for critical pods, as podgrace assumes when neither is
    /// given]
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
    let live::Input {
        paths: files,
        docs,
        mut problems,
        live,
    } = match live::input(
        &args.files,
        &args.cluster,
        args.all_namespaces,
        args.kubernetes_version,
        "the kubelet's defaults are assumed for their pods (see each pod's kubelet line)",
    ) {
        Ok(i) => i,
        Err(Ok(exit)) => return Ok(exit),
        Err(Err(bad)) => return Err(bad.into()),
    };
    let version = live
        .as_ref()
        .map_or(args.kubernetes_version.unwrap_or_default(), |l| l.version);
    let opts = Options {
        version,
        kubelet: KubeletConfig {
            eviction_max_pod_grace_period: args.eviction_max_pod_grace_period.unwrap_or(0),
            shutdown_grace_period,
            shutdown_grace_period_critical_pods,
        },
        second_delete: args.second_delete,
        runtime: args.runtime,
    };
    let load_opts = manifest::LoadOptions {
        kube_version: version,
    };
    let mut manifests = Vec::with_capacity(docs.len());
    for doc in &docs {
        let (m, errs) = manifest::load_partial(&doc.text, &doc.name, &load_opts);
        let mut bad = false;
        for e in &errs {
            match (skipped_note(e), &live) {
                (Some(note), None) => eprintln!("note: {note}"),
                (_, Some(_)) => problems.push(InputError::general(live::error_text(e))),
                (None, None) => {
                    problems.push(InputError::manifest(e));
                    bad = true;
                }
            }
        }
        if bad {
            problems.extend(input::template_hint(doc).map(InputError::general));
        }
        manifests.push(m);
    }
    let mut pods: Vec<PodPlan> = manifests.iter().flat_map(|m| m.pods().cloned()).collect();
    super::read_image_stop_signals(&args.image_source.image_source, pods.iter_mut())?;
    if pods.is_empty() && problems.is_empty() {
        // An empty namespace is no error for kubectl (`kubectl get`'s line, exit 0); a file
        // without a pod is.
        let Some(l) = &live else {
            return Err(BadInput(input::no_pod_found(&files, &docs)).into());
        };
        eprintln!("{}", l.none_found());
        if args.output.output == Format::Json {
            writeln!(Out, "[]")?;
        }
        return Ok(Outcome::Success);
    }
    // Each pod's kubelet: the node's for live objects (flags given win), else the flags'.
    let kubelets: Vec<(KubeletConfig, Option<KubeletView>)> = pods
        .iter()
        .map(|p| match &live {
            Some(l) => {
                let (k, v) = live_kubelet(&args, l, p, opts.kubelet);
                (k, Some(v))
            }
            None => (opts.kubelet, None),
        })
        .collect();
    // The findings lint gives each object, for the same input, version and node settings:
    // explain shows them for each of its pods (one code path), with each trigger's own.
    let mut lint_opts = LintOptions {
        version,
        ..Default::default()
    };
    if let Some(l) = &live {
        lint_opts.kubelet_by_object = l.lint_kubelets(args.eviction_max_pod_grace_period);
    }
    // Objects are told apart by where they start; live ones, which all start at the top of
    // their own document, by namespace too.
    let key = |file: &str, line: usize, column: usize, ns: Option<&str>| {
        (
            file.to_string(),
            line,
            column,
            live.as_ref().and(ns.map(str::to_string)),
        )
    };
    type Key = (String, usize, usize, Option<String>);
    let mut by_object: HashMap<Key, Vec<Finding>> = HashMap::new();
    for f in lint::lint(&manifests, &lint_opts) {
        let s = &f.object_span;
        by_object
            .entry(key(
                &s.file,
                s.line,
                s.column,
                f.object.namespace.as_deref(),
            ))
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
        explain_all(
            &pods,
            &triggers,
            |i| Options {
                kubelet: kubelets[i].0,
                ..opts
            },
            live.is_some(),
        )
        .map_err(|e| {
            // The input's own errors first: they may be why a trigger applies to nothing.
            let mut lines: Vec<String> = problems.iter().map(|p| p.text.clone()).collect();
            lines.push(e.0);
            BadInput(lines.join("\n"))
        })?
    };
    for (pod, tl, _) in &mut timelines {
        let s = &pod.span;
        let mut findings = by_object
            .get(&key(&s.file, s.line, s.column, pod.namespace.as_deref()))
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
            let mut w = std::io::BufWriter::new(Out);
            match &live {
                None => {
                    let all: Vec<&Timeline> = timelines.iter().map(|(_, t, _)| t).collect();
                    serde_json::to_writer_pretty(&mut w, &all)?;
                }
                Some(_) => {
                    let all: Vec<serde_json::Value> = timelines
                        .iter()
                        .map(|(pod, t, i)| live_json(pod, t, kubelets[*i].1.as_ref()))
                        .collect::<Result<_, _>>()?;
                    serde_json::to_writer_pretty(&mut w, &all)?;
                }
            }
            writeln!(w)?;
            w.flush()?;
        }
        Format::Text => {
            let mut out = String::new();
            for (n, (pod, tl, i)) in timelines.iter().enumerate() {
                if n > 0 {
                    out.push('\n');
                }
                let s = &pod.span;
                let place = match &live {
                    None => format!("{}:{}:{}", s.file, s.line, s.column),
                    Some(_) => s.file.clone(),
                };
                let kubelet = kubelets[*i].1.as_ref().map(KubeletView::line);
                render(&mut out, pod, tl, &place, kubelet.as_deref());
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

/// Where one of a live pod's kubelet settings comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Read from its node (`configz`).
    Node,
    /// Given on the command line.
    Flag,
    /// Assumed: the kubelet's default, or podgrace's assumption for node shutdown.
    Assumed,
}

impl Origin {
    fn word(self) -> &'static str {
        match self {
            Origin::Node => "node",
            Origin::Flag => "flag",
            Origin::Assumed => "assumed",
        }
    }
}

/// What a live pod's kubelet settings are and where each comes from, for the text and JSON.
struct KubeletView {
    /// The node they were read from, or why they were not.
    source: KubeletSource,
    /// A note about the choice, if any.
    note: Option<String>,
    eviction_max_pod_grace_period: (i64, Origin),
    eviction_soft: (std::collections::BTreeMap<String, String>, Origin),
    shutdown: ((i64, i64), Origin),
}

impl KubeletView {
    /// `  kubelet of node n1 (configz): evictionMaxPodGracePeriod 0 s, ...`.
    fn line(&self) -> String {
        let tag = |f: Origin| match f {
            Origin::Node => "",
            Origin::Flag => " (flag)",
            Origin::Assumed => " (assumed)",
        };
        let head = match &self.source {
            KubeletSource::Node(n) => format!("kubelet of node {n} (configz)"),
            KubeletSource::Assumed(why) => format!("kubelet settings assumed ({why})"),
        };
        let (max, mf) = self.eviction_max_pod_grace_period;
        let (soft, sf) = &self.eviction_soft;
        let soft = if soft.is_empty() {
            "none (it never evicts softly)".to_string()
        } else {
            soft.iter()
                .map(|(k, v)| format!("{k}<{v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let ((sgp, crit), shf) = self.shutdown;
        let shutdown = if sgp == 0 {
            "shutdownGracePeriod 0 s (graceful node shutdown off)".to_string()
        } else {
            format!("shutdownGracePeriod {sgp} s, {crit} s of them for critical pods")
        };
        let mut line = format!(
            "{head}: evictionMaxPodGracePeriod {max} s{}, evictionSoft {soft}{}, {shutdown}{}",
            tag(mf),
            tag(*sf),
            tag(shf)
        );
        if let Some(n) = &self.note {
            line.push_str("; ");
            line.push_str(n);
        }
        line
    }

    fn json(&self) -> serde_json::Value {
        let (node, why) = match &self.source {
            KubeletSource::Node(n) => (Some(n.as_str()), None),
            KubeletSource::Assumed(w) => (None, Some(w.as_str())),
        };
        let ((sgp, crit), shf) = self.shutdown;
        serde_json::json!({
            "node": node,
            "notRead": why,
            "note": self.note,
            "evictionMaxPodGracePeriod": {"value": self.eviction_max_pod_grace_period.0, "from": self.eviction_max_pod_grace_period.1.word()},
            "evictionSoft": {"value": self.eviction_soft.0, "from": self.eviction_soft.1.word()},
            "shutdownGracePeriodSeconds": {"value": sgp, "from": shf.word()},
            "shutdownGracePeriodCriticalPodsSeconds": {"value": crit, "from": shf.word()},
        })
    }
}

/// A live pod's kubelet settings: each flag given wins; then its node's, when read; else the
/// kubelet's default (evictionMaxPodGracePeriod 0, no evictionSoft) and podgrace's node-shutdown
/// assumption (30 s, 10 s), as for files.
fn live_kubelet(
    args: &Args,
    l: &Live,
    pod: &PodPlan,
    flags: KubeletConfig,
) -> (KubeletConfig, KubeletView) {
    let info = l.info(&pod.span.file, pod.namespace.as_deref());
    let (source, note, node) = match info {
        Some(i) => (
            i.source.clone(),
            i.note.clone(),
            match i.source {
                KubeletSource::Node(_) => Some(&i.kubelet),
                KubeletSource::Assumed(_) => None,
            },
        ),
        None => (KubeletSource::Assumed("not read".into()), None, None),
    };
    let pick = |given: bool, node: Option<i64>, flag: i64, assumed: i64| match (given, node) {
        (true, _) => (flag, Origin::Flag),
        (false, Some(v)) => (v, Origin::Node),
        (false, None) => (assumed, Origin::Assumed),
    };
    let max = pick(
        args.eviction_max_pod_grace_period.is_some(),
        node.map(|k| k.eviction_max_pod_grace_period),
        flags.eviction_max_pod_grace_period,
        0,
    );
    let shutdown_given =
        args.shutdown_grace_period.is_some() || args.shutdown_grace_period_critical_pods.is_some();
    let shutdown = match (shutdown_given, node) {
        (true, _) => (
            (
                flags.shutdown_grace_period,
                flags.shutdown_grace_period_critical_pods,
            ),
            Origin::Flag,
        ),
        (false, Some(k)) => (
            (
                k.shutdown_grace_period_seconds,
                k.shutdown_grace_period_critical_pods_seconds,
            ),
            Origin::Node,
        ),
        (false, None) => (
            (
                ASSUMED_SHUTDOWN_GRACE_PERIOD,
                ASSUMED_SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS,
            ),
            Origin::Assumed,
        ),
    };
    let soft = match node {
        Some(k) => (k.eviction_soft.clone(), Origin::Node),
        None => (Default::default(), Origin::Assumed),
    };
    let config = KubeletConfig {
        eviction_max_pod_grace_period: max.0,
        shutdown_grace_period: shutdown.0 .0,
        shutdown_grace_period_critical_pods: shutdown.0 .1,
    };
    (
        config,
        KubeletView {
            source,
            note,
            eviction_max_pod_grace_period: max,
            eviction_soft: soft,
            shutdown,
        },
    )
}

/// A live pod's timeline as JSON: the contract's object, with `resource` (`deployment/web`) in
/// place of the file's position (`file`, `line`, `column` null) and the `kubelet` settings used.
fn live_json(
    pod: &PodPlan,
    tl: &Timeline,
    kubelet: Option<&KubeletView>,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut v = serde_json::to_value(tl)?;
    if let Some(m) = v.as_object_mut() {
        m.insert("file".into(), serde_json::Value::Null);
        m.insert("line".into(), serde_json::Value::Null);
        m.insert("column".into(), serde_json::Value::Null);
        m.insert("resource".into(), pod.span.file.clone().into());
        if let Some(k) = kubelet {
            m.insert("kubelet".into(), k.json());
        }
    }
    Ok(v)
}

/// The timelines of every pod for every trigger that applies to it, each pod with its own
/// options ([`timeline::explain_each`]), with the pod's index: a probe trigger (`liveness:C`,
/// `startup:C`) that skips some pods (no container C, or C without that probe) says so on
/// stderr; one that applies to no pod at all is bad input, as is any other failure. `live`:
/// pods are placed by their object (`deployment/web`) instead of `FILE:LINE:COL`.
fn explain_all<'p>(
    pods: &'p [PodPlan],
    triggers: &[Trigger],
    options_of: impl Fn(usize) -> Options,
    live: bool,
) -> Result<Vec<(&'p PodPlan, Timeline, usize)>, BadInput> {
    // Live pods: the position of the JSON podgrace wrote means nothing to the user.
    let place = |text: String| -> String {
        if !live {
            return text;
        }
        pods.iter().fold(text, |t, p| {
            let s = &p.span;
            t.replace(&format!("{}:{}:{}", s.file, s.line, s.column), &s.file)
        })
    };
    let e = timeline::explain_each(pods, triggers, options_of)
        .map_err(|e| BadInput(place(e.to_string())))?;
    for o in e.triggers.iter().filter(|o| o.applied) {
        for s in &o.skipped {
            eprintln!(
                "note: {}: --trigger {} skips pod {}: {}",
                place(s.at.clone()),
                o.trigger,
                s.pod,
                s.reason
            );
        }
    }
    // Each timeline's pod is an element of `pods`: its index from its address.
    let index = |p: &PodPlan| {
        (p as *const PodPlan as usize - pods.as_ptr() as usize)
            / std::mem::size_of::<PodPlan>().max(1)
    };
    match e.not_applied() {
        None => Ok(e
            .timelines
            .into_iter()
            .map(|(p, t)| (p, t, index(p)))
            .collect()),
        Some(msg) => Err(BadInput(place(msg))),
    }
}
