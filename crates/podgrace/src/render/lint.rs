//! `podgrace lint`'s text: `--explain`, and the findings grouped by object with their counts.

use crate::BadInput;
use podgrace_core::lint::document::{counts, object_label, Positions};
use podgrace_core::lint::{catalogue, severity_str, LintFinding, Severity};
use std::fmt::Write as _;

/// `--explain RULE` (or `all`).
pub(crate) fn explain_text(id: &str) -> Result<String, BadInput> {
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

/// Text: grouped by object (in input order), one line per finding; then the counts, with the
/// input errors (printed on stderr) counted too. Each finding is placed at its file, line and
/// column, or, for objects read from a cluster ([`Positions::Objects`]), at its field path
/// under the object (`deployment/web`).
pub(crate) fn text(
    findings: &[LintFinding],
    input_errors: usize,
    color: bool,
    positions: Positions,
) -> String {
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
        let key = match positions {
            Positions::Files => format!(
                "{} ({}:{}:{})",
                object_label(f),
                f.object_span.file,
                f.object_span.line,
                f.object_span.column
            ),
            Positions::Objects => format!("{} ({})", object_label(f), f.object_span.file),
        };
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
            let at = match positions {
                Positions::Files => format!("{}:{}:{}", f.span.file, f.span.line, f.span.column),
                Positions::Objects if f.span.path.is_empty() => f.span.file.clone(),
                Positions::Objects => f.span.path.clone(),
            };
            let _ = writeln!(
                s,
                "  {at}  {}  {}  {}",
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
