//! `podgrace lint PATH...`: termination pitfalls in manifests, for people and for CI.

use super::args::{FilesArgs, VersionArgs};
use crate::input::{self, InputError};
use crate::{out::Out, BadInput, Outcome};
use podgrace_core::lint::{
    self, catalogue, severity_str, LintConfig, LintFinding, LintOptions, Severity,
};
use podgrace_core::manifest::{self, Manifest};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    paths: FilesArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    output: Format,
    /// Exit 1 when a finding is at this severity or above.
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    fail_on: FailOn,
    #[command(flatten)]
    version: VersionArgs,
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
    let opts = LintOptions {
        version: args.version.kubernetes_version,
        config,
    };
    let paths = args.paths.all()?;
    let (docs, mut problems) = input::read_all(&paths)?;
    let load_opts = manifest::LoadOptions {
        kube_version: opts.version,
    };
    let mut manifests: Vec<Manifest> = Vec::with_capacity(docs.len());
    let mut findings = Vec::new();
    for doc in &docs {
        let (m, errs) = manifest::load_partial(&doc.text, &doc.name, &load_opts);
        let (rejected, rest) = lint::rejections(errs, &opts);
        findings.extend(rejected);
        problems.extend(rest.iter().map(InputError::manifest));
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
        eprintln!(
            "note: {}: nothing to lint",
            input::no_pod_found(&paths, &docs)
        );
    }
    let mut out = std::io::BufWriter::new(Out);
    match args.output {
        Format::Text => {
            let color = std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            out.write_all(text(&findings, problems.len(), color).as_bytes())?;
        }
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &json_doc(&findings, &problems))?;
            writeln!(out)?;
        }
        Format::Sarif => {
            serde_json::to_writer_pretty(&mut out, &sarif(&findings, &problems))?;
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

/// `--explain RULE` (or `all`).
fn explain_text(id: &str) -> Result<String, BadInput> {
    let mut s = String::new();
    if id == "all" {
        for r in catalogue::CATALOGUE {
            let _ = writeln!(s, "{:32} {:7}  {}", r.id, severity_str(r.severity), r.title);
        }
        return Ok(s);
    }
    let r = catalogue::rule(id).ok_or_else(|| {
        BadInput(format!(
            "unknown rule {id:?} (`podgrace lint --explain all` lists them)"
        ))
    })?;
    let _ = writeln!(s, "{} ({}): {}\n", r.id, severity_str(r.severity), r.title);
    let _ = writeln!(s, "{}", r.doc);
    Ok(s)
}

fn object_label(f: &LintFinding) -> String {
    match &f.object.namespace {
        Some(ns) => format!("{} {ns}/{}", f.object.kind, f.object.name),
        None => format!("{} {}", f.object.kind, f.object.name),
    }
}

fn counts(findings: &[LintFinding]) -> (usize, usize, usize) {
    let n = |s| findings.iter().filter(|f| f.severity == s).count();
    (n(Severity::Error), n(Severity::Warning), n(Severity::Info))
}

/// Text: grouped by object (in input order), one line per finding; then the counts, with the
/// input errors (printed on stderr) counted too.
fn text(findings: &[LintFinding], input_errors: usize, color: bool) -> String {
    let paint = |code: &str, s: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    };
    let mut groups: Vec<(String, Vec<&LintFinding>)> = Vec::new();
    // Group index by header, so that many objects cost linear time.
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for f in findings {
        let key = format!(
            "{} ({}:{}:{})",
            object_label(f),
            f.object_span.file,
            f.object_span.line,
            f.object_span.column
        );
        match index.get(&key) {
            Some(&i) => groups[i].1.push(f),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, vec![f]));
            }
        }
    }
    let mut s = String::new();
    for (i, (key, fs)) in groups.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let _ = writeln!(s, "{}", paint("1", key));
        for f in fs {
            let sev = severity_str(f.severity);
            let code = match f.severity {
                Severity::Error => "31",
                Severity::Warning => "33",
                Severity::Info => "36",
            };
            let _ = writeln!(
                s,
                "  {}:{}:{}  {}  {}  {}",
                f.span.file,
                f.span.line,
                f.span.column,
                paint(code, &format!("{sev:7}")),
                f.rule,
                f.message
            );
        }
    }
    let (e, w, i) = counts(findings);
    if !findings.is_empty() {
        s.push('\n');
    }
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let _ = write!(
        s,
        "{}, {}, {i} info",
        plural(e as u64, "error", "errors"),
        plural(w as u64, "warning", "warnings")
    );
    if input_errors > 0 {
        let _ = write!(
            s,
            "; {} (on stderr): what they name was not linted",
            plural(input_errors as u64, "input error", "input errors")
        );
    }
    s.push('\n');
    s
}

fn json_doc(findings: &[LintFinding], problems: &[InputError]) -> Value {
    let (e, w, i) = counts(findings);
    json!({
        "findings": findings.iter().map(|f| json!({
            "rule": f.rule,
            "severity": severity_str(f.severity),
            "message": f.message,
            "file": f.span.file,
            "line": f.span.line,
            "column": f.span.column,
            "path": f.span.path,
            "object": {
                "kind": f.object.kind,
                "namespace": f.object.namespace,
                "name": f.object.name,
            },
            "container": f.container,
        })).collect::<Vec<_>>(),
        "inputErrors": problems.iter().map(|p| json!({
            "message": p.text,
            "file": p.file,
            "line": p.line,
            "column": p.column,
        })).collect::<Vec<_>>(),
        "summary": {"error": e, "warning": w, "info": i, "inputErrors": problems.len()},
    })
}

fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A file name as a relative URI reference (percent-encoding what a URI may not hold).
fn uri(file: &str) -> String {
    let mut out = String::new();
    for b in file.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/:@!$&'()*+,;=".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// SARIF 2.1.0: the catalogue as `tool.driver.rules`, one result per finding, and one
/// invocation: `executionSuccessful` false when some input could not be linted, each such input
/// error a `toolExecutionNotifications` entry (level `error`, with its location when known),
/// as SARIF §3.20.21 has a tool report conditions that kept it from analysing some input.
fn sarif(findings: &[LintFinding], problems: &[InputError]) -> Value {
    let rules: Vec<Value> = catalogue::CATALOGUE
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "shortDescription": {"text": r.title},
                "fullDescription": {"text": r.doc},
                "help": {"text": r.doc},
                "defaultConfiguration": {"level": sarif_level(r.severity)},
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let index = catalogue::CATALOGUE
                .iter()
                .position(|r| r.id == f.rule)
                .map_or(-1, |i| i as i64);
            let mut logical = object_label(f);
            if let Some(c) = &f.container {
                let _ = write!(logical, " container {c}");
            }
            json!({
                "ruleId": f.rule,
                "ruleIndex": index,
                "level": sarif_level(f.severity),
                "message": {"text": f.message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(&f.span.file)},
                        "region": {
                            "startLine": f.span.line.max(1),
                            "startColumn": f.span.column.max(1),
                        },
                    },
                    "logicalLocations": [{"fullyQualifiedName": logical, "kind": "object"}],
                }],
            })
        })
        .collect();
    let notifications: Vec<Value> = problems
        .iter()
        .map(|p| {
            let mut n = json!({
                "level": "error",
                "message": {"text": p.text},
            });
            if let Some(file) = &p.file {
                let mut physical = json!({"artifactLocation": {"uri": uri(file)}});
                if let (Some(line), Some(column)) = (p.line, p.column) {
                    physical["region"] =
                        json!({"startLine": line.max(1), "startColumn": column.max(1)});
                }
                n["locations"] = json!([{"physicalLocation": physical}]);
            }
            n
        })
        .collect();
    let mut invocation = json!({"executionSuccessful": problems.is_empty()});
    if !notifications.is_empty() {
        invocation["toolExecutionNotifications"] = Value::Array(notifications);
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "podgrace",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "invocations": [invocation],
            "results": results,
        }],
    })
}
