//! `podgrace lint`: termination pitfalls in manifests, with stable rule ids.
//!
//! Layer 1 (no I/O): the caller loads the manifests (with [`crate::manifest::load_partial`], so
//! one bad object does not hide the findings of the others), turns the API server's rejections
//! of the preStop sleep action into findings with [`rejections`], and runs [`lint`].
//!
//! Every number comes from the rules engine: the preStop budget, stop-signal and SIGKILL times
//! from [`timeline::explain`] for the `delete` trigger, the stop signal from
//! [`crate::rules::runtime`], hook lengths from [`crate::plan::Handler::known_duration`].
//! Findings explain also reports (`prestop-exceeds-grace`, `negative-grace-period`,
//! `zero-grace-force-deletes`,
//! `probe-kill-uses-pod-grace`, `soft-eviction-is-immediate`) come from the same functions in
//! [`timeline`], under the same ids.
//!
//! Rules are grouped by concern: `budget` (grace period and preStop length), `signals`
//! (what receives the stop signal), `hooks` (whether the preStop can run), `probes`,
//! `traffic` (endpoint removal, Services), `sidecars` and `kill` (what the kubelet and the
//! runtime do in the delete timeline). The [`catalogue`] documents each. `podgrace explain`
//! shows these same findings for each pod (it runs [`lint`]), with its trigger's own.

mod budget;
pub mod catalogue;
mod config;
pub mod document;
mod hooks;
mod kill;
mod probes;
mod sidecars;
mod signals;
mod traffic;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::manifest::{
    FieldErrorKind, Manifest, ManifestError, ManifestErrorKind, Object, ObjectBody, ObjectRef,
};
use crate::plan::{ContainerPlan, PodPlan, SourceSpan};
use crate::timeline::{self, Finding, Timeline, Trigger};
use crate::KubeVersion;

pub use crate::timeline::Severity;
pub use catalogue::{Rule, CATALOGUE};
pub use config::{ConfigError, KubeletSettings, LintConfig};

/// Everything lint depends on besides the manifests.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LintOptions {
    /// The Kubernetes release whose API server and kubelet are mirrored.
    pub version: KubeVersion,
    /// Rules switched off, severities changed, thresholds (`--config`, `--disable`).
    pub config: LintConfig,
    /// The kubelet settings of the node each object's pods run on, when known (live objects:
    /// read from the node); they replace `config.kubelet` for that object.
    pub kubelet_by_object: BTreeMap<ObjectRef, KubeletSettings>,
}

/// One finding: a rule broken by one object (and container), placed at the field involved.
#[derive(Debug, Clone, PartialEq)]
pub struct LintFinding {
    /// Stable rule id (see [`CATALOGUE`]).
    pub rule: &'static str,
    /// How serious: the rule's default, or the one `.podgrace.yaml`'s `severity` sets.
    pub severity: Severity,
    /// What is wrong, with the numbers involved and the fix.
    pub message: String,
    /// The field involved: file, line, column, field path.
    pub span: SourceSpan,
    /// The object (kind, namespace, name).
    pub object: ObjectRef,
    /// Where the object starts (for grouping).
    pub object_span: SourceSpan,
    /// The container involved, if any.
    pub container: Option<String>,
}

/// Parses a severity word (`error`, `warning`, `info`).
pub fn parse_severity(s: &str) -> Option<Severity> {
    match s {
        "error" => Some(Severity::Error),
        "warning" => Some(Severity::Warning),
        "info" => Some(Severity::Info),
        _ => None,
    }
}

/// The word for a severity (`error`, `warning`, `info`).
pub fn severity_str(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// Runs every enabled rule over all objects of `manifests` (Services and
/// PodDisruptionBudgets are matched across files). Findings come per object in input order,
/// each object's ordered by position.
pub fn lint(manifests: &[Manifest], opts: &LintOptions) -> Vec<LintFinding> {
    let objects: Vec<&Object> = manifests.iter().flat_map(|m| m.objects.iter()).collect();
    let services: Vec<(&Object, &Service)> = manifests.iter().flat_map(|m| m.services()).collect();
    let pdbs: Vec<(&Object, &PodDisruptionBudget)> = manifests
        .iter()
        .flat_map(|m| m.pod_disruption_budgets())
        .collect();
    let pods: Vec<(&Object, &PodPlan)> = objects
        .iter()
        .filter_map(|o| match &o.body {
            ObjectBody::Workload(p) => Some((*o, p.as_ref())),
            _ => None,
        })
        .collect();
    let topts = timeline::Options {
        version: opts.version,
        ..Default::default()
    };
    let mut sink = Sink {
        out: Vec::new(),
        opts,
    };
    for o in &objects {
        let start = sink.out.len();
        match &o.body {
            ObjectBody::Workload(pod) => {
                let Ok(tl) = timeline::explain(pod, &Trigger::Delete, &topts) else {
                    continue;
                };
                let by_name = tl
                    .containers
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (t.name.as_str(), i))
                    .collect();
                let cx = PodCx {
                    object: o,
                    pod,
                    timeline: &tl,
                    by_name,
                    opts,
                    service_targets: traffic::ServiceTargets::new(&services, o, pod),
                    pdbs: &pdbs,
                };
                budget::check(&cx, &mut sink);
                signals::check(&cx, &mut sink);
                hooks::check(&cx, &mut sink);
                probes::check(&cx, &mut sink);
                traffic::check(&cx, &mut sink);
                sidecars::check(&cx, &mut sink);
                kill::check(&cx, &mut sink);
            }
            ObjectBody::Service(svc) => traffic::check_service(o, svc, &pods, &mut sink),
            _ => {}
        }
        sink.out[start..].sort_by(|a, b| {
            (a.span.line, a.span.column, a.rule).cmp(&(b.span.line, b.span.column, b.rule))
        });
    }
    sink.out
}

/// Splits load errors into findings and plain errors: the API server's rejection of a preStop
/// (or postStart) sleep action becomes a finding of `sleep-action-rejected` (the object is
/// left out of the load, so its other findings cannot be reported); every other error stays
/// an error.
pub fn rejections(
    errors: Vec<ManifestError>,
    opts: &LintOptions,
) -> (Vec<LintFinding>, Vec<ManifestError>) {
    let mut findings = Vec::new();
    let mut rest = Vec::new();
    let mut sink = Sink {
        out: Vec::new(),
        opts,
    };
    for e in errors {
        let sleep_hook = e.span.path.ends_with(".lifecycle.preStop.sleep")
            || e.span.path.ends_with(".lifecycle.postStart.sleep");
        match (&e.kind, &e.object) {
            (ManifestErrorKind::Field(FieldErrorKind::Invalid { value, detail }), Some(obj))
                if sleep_hook =>
            {
                let hook = if e.span.path.contains("preStop") {
                    "preStop"
                } else {
                    "postStart"
                };
                let container = container_of_path(&e.span.path);
                // Rejected for being above the grace, or for not being positive (0 is accepted
                // from 1.33): the fix names a value on the right side of the limit.
                let fix = match value.parse::<i64>() {
                    // No grace the API accepts is above it.
                    Ok(v) if v == timeline::MAX_GRACE_PERIOD_SECONDS => "shorten the sleep so that the app has time to drain before terminationGracePeriodSeconds runs out (no terminationGracePeriodSeconds the API accepts is above it)".to_string(),
                    Ok(v) if v > 0 => format!(
                        "shorten the sleep so that the app has time to drain before terminationGracePeriodSeconds runs out, or raise terminationGracePeriodSeconds above {v}, to the sleep's {v} s plus your app's drain time"
                    ),
                    Ok(0) => "use a positive number of seconds, or remove the sleep (Kubernetes 1.33 and later accept 0)".to_string(),
                    _ => "use a positive number of seconds, or remove the sleep".to_string(),
                };
                let message = format!(
                    "{}{hook} sleep.seconds {value} is rejected by the API server (Kubernetes {}: {detail}), so the {} cannot be applied; {fix}",
                    container
                        .as_deref()
                        .map(|c| format!("{c}: "))
                        .unwrap_or_default(),
                    opts.version,
                    obj.kind,
                );
                // The object's start, like every other finding's header (the field's own
                // position is the finding's span).
                let object_span = e.object_span.clone().unwrap_or_else(|| SourceSpan {
                    path: String::new(),
                    ..e.span.clone()
                });
                sink.push_at(
                    "sleep-action-rejected",
                    None,
                    message,
                    e.span.clone(),
                    obj.clone(),
                    object_span,
                    container,
                );
            }
            _ => rest.push(e),
        }
    }
    findings.append(&mut sink.out);
    (findings, rest)
}

/// `spec.template.spec.containers[0].lifecycle...` → `containers[0]`.
fn container_of_path(path: &str) -> Option<String> {
    path.split('.')
        .find(|s| s.starts_with("containers[") || s.starts_with("initContainers["))
        .map(str::to_string)
}

/// One pod (or pod template) and what lint knows around it.
pub(crate) struct PodCx<'a> {
    pub object: &'a Object,
    pub pod: &'a PodPlan,
    /// The `delete` trigger timeline (the pod's own terminationGracePeriodSeconds).
    pub timeline: &'a Timeline,
    /// Each container's index in [`Self::timeline`], by name (lookups in constant time, so
    /// that the rules stay linear in the pod's containers).
    pub by_name: std::collections::HashMap<&'a str, usize>,
    pub opts: &'a LintOptions,
    /// The ports the input's Services that select this pod target.
    pub service_targets: traffic::ServiceTargets<'a>,
    pub pdbs: &'a [(&'a Object, &'a PodDisruptionBudget)],
}

impl PodCx<'_> {
    pub fn config(&self) -> &LintConfig {
        &self.opts.config
    }

    /// The kubelet settings of this object's node when known, else the configuration's.
    pub fn kubelet(&self) -> KubeletSettings {
        if self.opts.kubelet_by_object.is_empty() {
            return self.opts.config.kubelet;
        }
        self.opts
            .kubelet_by_object
            .get(&object_ref(self.object))
            .copied()
            .unwrap_or(self.opts.config.kubelet)
    }

    pub fn tgps(&self) -> i64 {
        self.pod.termination_grace_period_seconds
    }

    /// The timeline entry of container `c`.
    pub fn timeline_of(&self, c: &ContainerPlan) -> Option<&timeline::ContainerTimeline> {
        self.by_name
            .get(c.name.as_str())
            .and_then(|&i| self.timeline.containers.get(i))
    }

    /// Whether a Service or PodDisruptionBudget `other` may select this pod (see [`related`]).
    pub fn related(&self, other: &Object) -> bool {
        related(self.object, other)
    }
}

/// Whether two objects may end up in the same namespace: both name the same namespace, or one
/// leaves it unset and both come from the same file (a rendered chart or kustomization; files
/// of a directory without namespaces may be applied to different namespaces).
pub(crate) fn related(a: &Object, b: &Object) -> bool {
    match (a.namespace.as_deref(), b.namespace.as_deref()) {
        (Some(x), Some(y)) => x == y,
        _ => a.span.file == b.span.file,
    }
}

/// `selector` (matchLabels-style) selects `labels`; an empty selector selects nothing here.
pub(crate) fn selects(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

pub(crate) fn object_ref(o: &Object) -> ObjectRef {
    ObjectRef {
        kind: o.kind.clone(),
        namespace: o.namespace.clone(),
        name: o.name.clone(),
    }
}

/// Collects findings, dropping disabled rules and applying configured severities.
pub(crate) struct Sink<'o> {
    pub out: Vec<LintFinding>,
    pub opts: &'o LintOptions,
}

impl Sink<'_> {
    /// Whether `rule` is enabled (check before costly work).
    pub fn enabled(&self, rule: &str) -> bool {
        !self.opts.config.disable.iter().any(|d| d == rule)
    }

    /// A finding of `rule` about container `c` (or the pod) of `cx`, at `span`, with the
    /// catalogue's default severity.
    pub fn push(
        &mut self,
        cx: &PodCx<'_>,
        rule: &'static str,
        c: Option<&ContainerPlan>,
        span: SourceSpan,
        message: String,
    ) {
        self.push_at(
            rule,
            None,
            message,
            span,
            object_ref(cx.object),
            cx.object.span.clone(),
            c.map(|c| c.name.clone()),
        );
    }

    /// A finding computed by a shared timeline function (keeps its severity unless configured).
    pub fn shared(
        &mut self,
        cx: &PodCx<'_>,
        f: Finding,
        c: Option<&ContainerPlan>,
        span: SourceSpan,
    ) {
        self.push_at(
            f.rule,
            Some(f.severity),
            f.message,
            span,
            object_ref(cx.object),
            cx.object.span.clone(),
            c.map(|c| c.name.clone()),
        );
    }

    #[allow(clippy::too_many_arguments)]
    pub fn push_at(
        &mut self,
        rule: &'static str,
        severity: Option<Severity>,
        message: String,
        span: SourceSpan,
        object: ObjectRef,
        object_span: SourceSpan,
        container: Option<String>,
    ) {
        if !self.enabled(rule) {
            return;
        }
        let severity = self
            .opts
            .config
            .severity
            .get(rule)
            .copied()
            .or(severity)
            .or_else(|| catalogue::rule(rule).map(|r| r.severity))
            .unwrap_or(Severity::Warning);
        self.out.push(LintFinding {
            rule,
            severity,
            message,
            span,
            object,
            object_span,
            container,
        });
    }
}

// ---- helpers shared by the rule files -------------------------------------------------------

/// The last path component (`/usr/bin/sleep` → `sleep`).
pub(crate) fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

pub(crate) fn is_shell(s: &str) -> bool {
    matches!(basename(s), "sh" | "bash" | "ash" | "dash" | "zsh" | "ksh")
}

/// The container's entry argv: `command` then `args`.
pub(crate) fn argv(c: &ContainerPlan) -> Vec<&str> {
    c.command
        .iter()
        .chain(c.args.iter())
        .map(String::as_str)
        .collect()
}

/// `sh -c SCRIPT` (also `-ec`, `-xc`, `-lc`): the shell and the script.
pub(crate) fn shell_script<'a>(argv: &[&'a str]) -> Option<(&'a str, &'a str)> {
    let (first, rest) = argv.split_first()?;
    if !is_shell(first) {
        return None;
    }
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        if a.starts_with('-')
            && !a.starts_with("--")
            && a.len() > 1
            && a[1..].chars().all(|ch| ch.is_ascii_alphabetic())
        {
            if a.contains('c') {
                return it.next().map(|s| (*first, *s));
            }
            continue;
        }
        return None;
    }
    None
}

/// The simple commands of a shell script, split at `;`, `&&`, `||`, `|`, `&` and newlines
/// (good enough for the one-liners found in manifests), trimmed, empty ones left out.
pub(crate) fn script_commands(script: &str) -> Vec<&str> {
    script
        .split(['\n', ';', '&', '|'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The words of every command a hook or entrypoint runs: argv itself, plus the words of a
/// `sh -c` script.
pub(crate) fn all_words<'a>(argv: &[&'a str]) -> Vec<&'a str> {
    match shell_script(argv) {
        Some((_, script)) => script.split_whitespace().collect(),
        None => argv.to_vec(),
    }
}

/// The image repository's last path component without tag or digest
/// (`docker.io/bitnami/nginx:1.25` → `nginx`).
pub(crate) fn image_name(image: &str) -> String {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    last.split(':').next().unwrap_or(last).to_ascii_lowercase()
}

/// Shortens a command for a message (`…` after 60 characters).
pub(crate) fn show_cmd(words: &[&str]) -> String {
    let s = words.join(" ");
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(57).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// Seconds as f64 for messages (`1.5`, `30`).
pub(crate) fn secs(s: f64) -> String {
    timeline::fmt_secs((s * 1000.0).round() as i64)
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::manifest::{self, LoadOptions};

    /// Lints one YAML text with default options.
    pub fn run(yaml: &str) -> Vec<LintFinding> {
        run_with(yaml, &LintOptions::default())
    }

    pub fn run_with(yaml: &str, opts: &LintOptions) -> Vec<LintFinding> {
        let (m, errors) = manifest::load_partial(
            yaml,
            "t.yaml",
            &LoadOptions {
                kube_version: opts.version,
            },
        );
        let (mut findings, rest) = rejections(errors, opts);
        assert!(rest.is_empty(), "load errors: {rest:?}");
        findings.extend(lint(&[m], opts));
        findings
    }

    /// The findings of `rule`.
    pub fn of<'a>(findings: &'a [LintFinding], rule: &str) -> Vec<&'a LintFinding> {
        findings.iter().filter(|f| f.rule == rule).collect()
    }

    /// A Deployment with `spec` below `spec.template.spec` (indented 6 spaces) and labels app=web.
    pub fn deploy(spec: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: prod\nspec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n{spec}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(
            shell_script(&["sh", "-c", "exec node x"]),
            Some(("sh", "exec node x"))
        );
        assert_eq!(
            shell_script(&["/bin/bash", "-ec", "x"]),
            Some(("/bin/bash", "x"))
        );
        assert_eq!(shell_script(&["node", "-c", "x"]), None);
        assert_eq!(
            image_name("docker.io/bitnami/nginx:1.25@sha256:ab"),
            "nginx"
        );
        assert_eq!(image_name("localhost:5000/app"), "app");
        assert_eq!(script_commands("a; b && c\nd"), vec!["a", "b", "c", "d"]);
    }

    #[test]
    fn disable_and_severity_override() {
        let y = deploy("      terminationGracePeriodSeconds: 0\n      containers:\n        - name: app\n          image: app\n");
        assert_eq!(of(&run(&y), "zero-grace-force-deletes").len(), 1);
        let mut opts = LintOptions::default();
        opts.config.disable.push("zero-grace-force-deletes".into());
        assert!(of(&run_with(&y, &opts), "zero-grace-force-deletes").is_empty());
        let mut opts = LintOptions::default();
        opts.config
            .severity
            .insert("zero-grace-force-deletes".into(), Severity::Info);
        let f = run_with(&y, &opts);
        assert_eq!(
            of(&f, "zero-grace-force-deletes")[0].severity,
            Severity::Info
        );
    }

    #[test]
    fn every_emitted_rule_is_catalogued() {
        // Shared ids emitted by the timeline are in the catalogue too.
        for id in [
            "prestop-exceeds-grace",
            "negative-grace-period",
            "zero-grace-force-deletes",
            "probe-kill-uses-pod-grace",
            "soft-eviction-is-immediate",
        ] {
            assert!(catalogue::rule(id).is_some(), "{id}");
        }
    }
}
