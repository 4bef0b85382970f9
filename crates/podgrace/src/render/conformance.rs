//! `podgrace conformance`'s text: each failed vector with its mismatches, then the counts.

use std::fmt::Write as _;

use podgrace_core::conformance::{Report, Verdict};

/// `FAIL SOURCE [FUNCTION] (line N)` and one indented line per mismatch for each failed vector,
/// in file order, then `P passed, F failed`.
pub(crate) fn render(report: &Report) -> String {
    let mut out = String::new();
    for (v, verdict) in &report.results {
        if let Verdict::Fail(mismatches) = verdict {
            let _ = writeln!(out, "FAIL {} [{}] (line {})", v.source, v.function, v.line);
            for m in mismatches {
                let _ = writeln!(out, "     {m}");
            }
        }
    }
    let _ = writeln!(
        out,
        "{} passed, {} failed",
        report.passed(),
        report.failed()
    );
    out
}
