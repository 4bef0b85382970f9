//! `podgrace lint`'s machine-readable output contracts: the `--output json` document
//! ([`JsonDocument`]) and the SARIF 2.1.0 log of `--output sarif` ([`SarifLog`], the subset of
//! the OASIS schema lint fills in).
//!
//! Every struct declares its fields in the byte order of their JSON names, the order these
//! documents have always had (they were first written through `serde_json::Value`, whose maps
//! are sorted), so that the bytes of the output stay what CI pipelines and the tests read.

use serde::Serialize;

use super::{catalogue, severity_str, LintFinding, Severity};

/// What a finding's position names: a place in a file (`deploy.yaml:20:11`, the default) or,
/// for objects read from a cluster, the object and the field path (`deployment/web`,
/// `spec.template.spec.containers[0].lifecycle`), the object's reference being the span's
/// `file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Positions {
    /// File, line, column.
    #[default]
    Files,
    /// The object (`kind/name`) and the field path; no file, line or column.
    Objects,
}

/// An input that could not be linted (unreadable, not YAML, rejected by validation), as both
/// documents report it. `line` and `column` are 1-based, when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct InputProblem<'a> {
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The file as the user named it (`-` for standard input), when the problem has one.
    pub file: Option<&'a str>,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The error as printed on stderr.
    pub message: &'a str,
}

/// The `--output json` document: every finding, every input error, and the counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JsonDocument<'a> {
    /// The findings, in the order lint produced them.
    pub findings: Vec<JsonFinding<'a>>,
    /// The inputs that could not be linted.
    #[serde(rename = "inputErrors")]
    pub input_errors: Vec<InputProblem<'a>>,
    /// How many findings of each severity, and how many input errors.
    pub summary: JsonSummary,
}

/// One finding in the JSON document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JsonFinding<'a> {
    /// 1-based column of the field involved (`null` for an object read from a cluster).
    pub column: Option<usize>,
    /// The container involved, if any (`null` otherwise).
    pub container: Option<&'a str>,
    /// The file as the user named it (`null` for an object read from a cluster).
    pub file: Option<&'a str>,
    /// 1-based line of the field involved (`null` for an object read from a cluster).
    pub line: Option<usize>,
    /// What is wrong, with the numbers involved and the fix.
    pub message: &'a str,
    /// The object the finding is about.
    pub object: JsonObject<'a>,
    /// The field path from the document root, kubectl style.
    pub path: &'a str,
    /// For an object read from a cluster, kubectl's reference to it (`deployment/web`);
    /// absent for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<&'a str>,
    /// The stable rule id ([`catalogue::CATALOGUE`]).
    pub rule: &'static str,
    /// `error`, `warning` or `info`.
    pub severity: &'static str,
}

/// The object of a finding: kind, name, namespace (`null` when the manifest gives none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JsonObject<'a> {
    /// `Pod`, `Deployment`, ...
    pub kind: &'a str,
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.namespace`, when given.
    pub namespace: Option<&'a str>,
}

/// The counts of the JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct JsonSummary {
    /// Findings at severity error.
    pub error: usize,
    /// Findings at severity info.
    pub info: usize,
    /// Inputs that could not be linted.
    #[serde(rename = "inputErrors")]
    pub input_errors: usize,
    /// Findings at severity warning.
    pub warning: usize,
}

/// How many findings are at severity (error, warning, info).
pub fn counts(findings: &[LintFinding]) -> (usize, usize, usize) {
    let n = |s| findings.iter().filter(|f| f.severity == s).count();
    (n(Severity::Error), n(Severity::Warning), n(Severity::Info))
}

impl<'a> JsonDocument<'a> {
    /// The document of `findings` and `problems`, positioned as `positions` says.
    pub fn new(
        findings: &'a [LintFinding],
        problems: &[InputProblem<'a>],
        positions: Positions,
    ) -> Self {
        let (error, warning, info) = counts(findings);
        let files = positions == Positions::Files;
        JsonDocument {
            findings: findings
                .iter()
                .map(|f| JsonFinding {
                    column: files.then_some(f.span.column),
                    container: f.container.as_deref(),
                    file: files.then_some(f.span.file.as_str()),
                    line: files.then_some(f.span.line),
                    message: &f.message,
                    object: JsonObject {
                        kind: &f.object.kind,
                        name: &f.object.name,
                        namespace: f.object.namespace.as_deref(),
                    },
                    path: &f.span.path,
                    resource: (!files).then_some(f.span.file.as_str()),
                    rule: f.rule,
                    severity: severity_str(f.severity),
                })
                .collect(),
            input_errors: problems.to_vec(),
            summary: JsonSummary {
                error,
                info,
                input_errors: problems.len(),
                warning,
            },
        }
    }
}

/// The `$schema` of the SARIF log.
pub const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// A SARIF 2.1.0 log (§3.13) with one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifLog {
    /// [`SARIF_SCHEMA`].
    #[serde(rename = "$schema")]
    pub schema: &'static str,
    /// The one run of lint.
    pub runs: Vec<SarifRun>,
    /// `2.1.0`.
    pub version: &'static str,
}

/// A run (§3.14): the tool, its one invocation, the results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifRun {
    /// One invocation.
    pub invocations: Vec<SarifInvocation>,
    /// One result per finding.
    pub results: Vec<SarifResult>,
    /// podgrace and its rules.
    pub tool: SarifTool,
}

/// `tool` (§3.18).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifTool {
    /// The driver: podgrace.
    pub driver: SarifDriver,
}

/// `tool.driver` (§3.19): name, version, and the catalogue as `rules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifDriver {
    /// `podgrace`.
    pub name: &'static str,
    /// Every rule of the catalogue, in catalogue order (a result's `ruleIndex` points here).
    pub rules: Vec<SarifRule>,
    /// podgrace's version.
    pub version: &'static str,
}

/// A `reportingDescriptor` for one rule (§3.49).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifRule {
    /// The rule's default level.
    #[serde(rename = "defaultConfiguration")]
    pub default_configuration: SarifConfiguration,
    /// The rule's documentation.
    #[serde(rename = "fullDescription")]
    pub full_description: SarifText,
    /// The rule's documentation again, as `help`.
    pub help: SarifText,
    /// The stable rule id.
    pub id: &'static str,
    /// The rule's title.
    #[serde(rename = "shortDescription")]
    pub short_description: SarifText,
}

/// `defaultConfiguration` (§3.50).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SarifConfiguration {
    /// `error`, `warning` or `note`.
    pub level: &'static str,
}

/// A `message` or description: `{"text": ...}` (§3.11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifText {
    /// The plain text.
    pub text: String,
}

/// The invocation (§3.20): whether every input was analysed, and the input errors as
/// `toolExecutionNotifications` (§3.20.21), present only when there are some.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifInvocation {
    /// `false` when some input could not be linted.
    #[serde(rename = "executionSuccessful")]
    pub execution_successful: bool,
    /// One per input error, level `error`.
    #[serde(
        rename = "toolExecutionNotifications",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_execution_notifications: Vec<SarifNotification>,
}

/// A notification (§3.58) of an input error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifNotification {
    /// `error`.
    pub level: &'static str,
    /// Where, when the error names a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<SarifNotificationLocation>>,
    /// The error as printed on stderr.
    pub message: SarifText,
}

/// A notification's location: the physical location only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifNotificationLocation {
    /// The file, and the region when line and column are known.
    #[serde(rename = "physicalLocation")]
    pub physical_location: SarifPhysicalLocation,
}

/// A result (§3.27): one finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifResult {
    /// The finding's severity as a SARIF level.
    pub level: &'static str,
    /// One location: the field involved, and the object as a logical location.
    pub locations: Vec<SarifLocation>,
    /// The finding's message.
    pub message: SarifText,
    /// The stable rule id.
    #[serde(rename = "ruleId")]
    pub rule_id: &'static str,
    /// The rule's index in `tool.driver.rules`, -1 if it is not there.
    #[serde(rename = "ruleIndex")]
    pub rule_index: i64,
}

/// A location (§3.28) of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifLocation {
    /// The object (and container) involved; for an object read from a cluster, the field
    /// too.
    #[serde(rename = "logicalLocations")]
    pub logical_locations: Vec<SarifLogicalLocation>,
    /// The field involved, in its file; absent for an object read from a cluster (a result
    /// may have logical locations only, §3.28.1).
    #[serde(rename = "physicalLocation", skip_serializing_if = "Option::is_none")]
    pub physical_location: Option<SarifPhysicalLocation>,
}

/// A logical location (§3.33): `Pod ns/name container c`, kind `object`; for an object read
/// from a cluster also its field, `deployment/web spec.template...`, kind `property`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifLogicalLocation {
    /// `KIND [NAMESPACE/]NAME[ container C]`, or `[NAMESPACE/]TYPE/NAME FIELD.PATH`.
    #[serde(rename = "fullyQualifiedName")]
    pub fully_qualified_name: String,
    /// `object` or `property`.
    pub kind: &'static str,
}

/// A physical location (§3.29): the file as a relative URI reference, and a region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifPhysicalLocation {
    /// The file.
    #[serde(rename = "artifactLocation")]
    pub artifact_location: SarifArtifactLocation,
    /// Line and column, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<SarifRegion>,
}

/// An artifact location (§3.4): the file as a URI reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarifArtifactLocation {
    /// The file name, percent-encoded where a URI may not hold it ([`uri`]).
    pub uri: String,
}

/// A region (§3.30): 1-based start line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SarifRegion {
    /// 1-based column (at least 1).
    #[serde(rename = "startColumn")]
    pub start_column: usize,
    /// 1-based line (at least 1).
    #[serde(rename = "startLine")]
    pub start_line: usize,
}

/// A severity as a SARIF level: `error`, `warning`, or `note` for info.
pub fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A file name as a relative URI reference: RFC 3986's unreserved characters, `/`, `:`, `@`
/// and the sub-delims stay as they are; every other byte is percent-encoded (`%20`).
pub fn uri(file: &str) -> String {
    use std::fmt::Write as _;
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

fn physical(file: &str, region: Option<(usize, usize)>) -> SarifPhysicalLocation {
    SarifPhysicalLocation {
        artifact_location: SarifArtifactLocation { uri: uri(file) },
        region: region.map(|(line, column)| SarifRegion {
            start_column: column.max(1),
            start_line: line.max(1),
        }),
    }
}

/// `KIND [NAMESPACE/]NAME`, as the text output and SARIF's logical locations name an object.
pub fn object_label(f: &LintFinding) -> String {
    match &f.object.namespace {
        Some(ns) => format!("{} {ns}/{}", f.object.kind, f.object.name),
        None => format!("{} {}", f.object.kind, f.object.name),
    }
}

impl SarifLog {
    /// The SARIF log of `findings` and `problems`: the catalogue as `tool.driver.rules`, one
    /// result per finding, and one invocation, `executionSuccessful` false when some input
    /// could not be linted, each such error a `toolExecutionNotifications` entry (with its
    /// location when known). `version` is podgrace's. With [`Positions::Objects`] a result has
    /// no physical location: its logical locations name the object and the field.
    pub fn new(
        findings: &[LintFinding],
        problems: &[InputProblem<'_>],
        version: &'static str,
        positions: Positions,
    ) -> Self {
        let rules = catalogue::CATALOGUE
            .iter()
            .map(|r| SarifRule {
                default_configuration: SarifConfiguration {
                    level: sarif_level(r.severity),
                },
                full_description: SarifText {
                    text: r.doc.to_string(),
                },
                help: SarifText {
                    text: r.doc.to_string(),
                },
                id: r.id,
                short_description: SarifText {
                    text: r.title.to_string(),
                },
            })
            .collect();
        let results = findings
            .iter()
            .map(|f| {
                let rule_index = catalogue::CATALOGUE
                    .iter()
                    .position(|r| r.id == f.rule)
                    .map_or(-1, |i| i64::try_from(i).unwrap_or(-1));
                let mut logical = object_label(f);
                if let Some(c) = &f.container {
                    logical.push_str(" container ");
                    logical.push_str(c);
                }
                let mut logical_locations = vec![SarifLogicalLocation {
                    fully_qualified_name: logical,
                    kind: "object",
                }];
                let physical_location = match positions {
                    Positions::Files => {
                        Some(physical(&f.span.file, Some((f.span.line, f.span.column))))
                    }
                    Positions::Objects => {
                        let reference = match &f.object.namespace {
                            Some(ns) => format!("{ns}/{}", f.span.file),
                            None => f.span.file.clone(),
                        };
                        logical_locations.push(SarifLogicalLocation {
                            fully_qualified_name: format!("{reference} {}", f.span.path),
                            kind: "property",
                        });
                        None
                    }
                };
                SarifResult {
                    level: sarif_level(f.severity),
                    locations: vec![SarifLocation {
                        logical_locations,
                        physical_location,
                    }],
                    message: SarifText {
                        text: f.message.clone(),
                    },
                    rule_id: f.rule,
                    rule_index,
                }
            })
            .collect();
        let notifications = problems
            .iter()
            .map(|p| SarifNotification {
                level: "error",
                locations: p.file.map(|file| {
                    let region = match (p.line, p.column) {
                        (Some(line), Some(column)) => Some((line, column)),
                        _ => None,
                    };
                    vec![SarifNotificationLocation {
                        physical_location: physical(file, region),
                    }]
                }),
                message: SarifText {
                    text: p.message.to_string(),
                },
            })
            .collect();
        SarifLog {
            schema: SARIF_SCHEMA,
            runs: vec![SarifRun {
                invocations: vec![SarifInvocation {
                    execution_successful: problems.is_empty(),
                    tool_execution_notifications: notifications,
                }],
                results,
                tool: SarifTool {
                    driver: SarifDriver {
                        name: "podgrace",
                        rules,
                        version,
                    },
                },
            }],
            version: "2.1.0",
        }
    }
}
