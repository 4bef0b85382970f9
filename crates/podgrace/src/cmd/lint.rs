//! `podgrace lint PATH...`: termination pitfalls in manifests, for people and for CI; or
//! `podgrace lint deployment/web`, `lint -A`: the live objects of a cluster, read as kubectl
//! reads them, with each node's kubelet settings.

use super::args::{ClusterArgs, FilesArgs};
use super::live;
use crate::input::{self, InputError};
use crate::render::lint::{explain_text, text};
use crate::{out::Out, BadInput, Outcome};
use podgrace_core::lint::document::{InputProblem, JsonDocument, Positions, SarifLog};
use podgrace_core::lint::{self, catalogue, LintConfig, LintOptions, Severity};
use podgrace_core::manifest::{self, Manifest};
use podgrace_core::KubeVersion;
use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    paths: FilesArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Every namespace of the cluster (with no TYPE/NAME).
    #[arg(long, short = 'A')]
    all_namespaces: bool,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    output: Format,
    /// Exit 1 when a finding is at this severity or above.
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    fail_on: FailOn,
    /// The Kubernetes version whose API server and kubelet to reproduce [default: the
    /// cluster's for live objects, else 1.37].
    #[arg(long, value_name = "X.Y")]
    kubernetes_version: Option<KubeVersion>,
    /// Switch a rule off; repeatable.
    #[arg(long, value_name = "RULE")]
    disable: Vec<String>,
    /// A YAML file: `disable`, `severity`, `endpointLagSeconds`, `kubelet`, ... (see README).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print a rule's documentation (`all` lists every rule) and exit.
    #[arg(long, value_name = "RULE")]
    explain: Option<String>,
    #[command(flatten)]
    image_source: super::ImageSourceArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Sarif,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FailOn {
    Error,
    Warning,
    Info,
}

impl FailOn {
    fn severity(self) -> Severity {
        match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
            FailOn::Info => Severity::Info,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    if let Some(id) = &args.explain {
        write!(Out, "{}", explain_text(id)?)?;
        return Ok(Outcome::Success);
    }
    let mut config = match &args.config {
        Some(path) => {
            let doc = input::read_one(path)?;
            LintConfig::parse(&doc.text, &doc.name).map_err(|e| BadInput(e.to_string()))?
        }
        None => LintConfig::default(),
    };
    for id in &args.disable {
        if catalogue::rule(id).is_none() {
            return Err(BadInput(format!(
                "--disable {id}: unknown rule (see `podgrace lint --explain all`)"
            ))
            .into());
        }
        config.disable.push(id.clone());
    }
    let mut opts = LintOptions {
        version: args.kubernetes_version.unwrap_or_default(),
        config,
        ..LintOptions::default()
    };
    let live::Input {
        paths,
        docs,
        mut problems,
        live,
    } = match live::input(
        &args.paths,
        &args.cluster,
        args.all_namespaces,
        args.kubernetes_version,
        "their pods are linted without them (soft-eviction-is-immediate needs a node's evictionMaxPodGracePeriod and evictionSoft)",
    ) {
        Ok(i) => i,
        Err(Ok(exit)) => return Ok(exit),
        Err(Err(bad)) => return Err(bad.into()),
    };
    let positions = match &live {
        None => Positions::Files,
        Some(l) => {
            opts.version = l.version;
            opts.kubelet_by_object = l.lint_kubelets(None);
            Positions::Objects
        }
    };
    let load_opts = manifest::LoadOptions {
        kube_version: opts.version,
    };
    let mut manifests: Vec<Manifest> = Vec::with_capacity(docs.len());
    let mut findings = Vec::new();
    for doc in &docs {
        let (m, errs) = manifest::load_partial(&doc.text, &doc.name, &load_opts);
        let (rejected, rest) = lint::rejections(errs, &opts);
        findings.extend(rejected);
        problems.extend(rest.iter().map(|e| match positions {
            Positions::Files => InputError::manifest(e),
            Positions::Objects => InputError::general(live::error_text(e)),
        }));
        manifests.push(m);
    }
    super::read_image_stop_signals(
        &args.image_source.image_source,
        manifests.iter_mut().flat_map(Manifest::pods_mut),
    )?;
    findings.extend(lint::lint(&manifests, &opts));
    // Nothing to lint is not a failure (a chart may render no pod for some values), but it is
    // said, so that a wrong path does not pass silently.
    if problems.is_empty()
        && findings.is_empty()
        && manifests.iter().all(|m| m.pods().next().is_none())
    {
        match &live {
            None => eprintln!(
                "note: {}: nothing to lint",
                input::no_pod_found(&paths, &docs)
            ),
            Some(l) => eprintln!("{}", l.none_found()),
        }
    }
    let mut out = std::io::BufWriter::new(Out);
    match args.output {
        Format::Text => {
            let color = std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            out.write_all(text(&findings, problems.len(), color, positions).as_bytes())?;
        }
        Format::Json => {
            let doc = JsonDocument::new(&findings, &input_problems(&problems), positions);
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        }
        Format::Sarif => {
            let log = SarifLog::new(
                &findings,
                &input_problems(&problems),
                env!("CARGO_PKG_VERSION"),
                positions,
            );
            serde_json::to_writer_pretty(&mut out, &log)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    // Input errors fail the run (exit 2) after the findings of everything else were written.
    if !problems.is_empty() {
        let lines: Vec<&str> = problems.iter().map(|p| p.text.as_str()).collect();
        return Err(BadInput(lines.join("\n")).into());
    }
    let fail = args.fail_on.severity();
    Ok(if findings.iter().any(|f| f.severity >= fail) {
        Outcome::CheckFailed
    } else {
        Outcome::Success
    })
}

/// The input errors as the output documents carry them.
fn input_problems(problems: &[InputError]) -> Vec<InputProblem<'_>> {
    problems
        .iter()
        .map(|p| InputProblem {
            column: p.column,
            file: p.file.as_deref(),
            line: p.line,
            message: &p.text,
        })
        .collect()
}
