//! `podgrace why`'s text: the forensics report as people read it (`-o json` prints
//! [`Forensics`] as it is).

use std::fmt::Write as _;

use podgrace_core::forensics::Forensics;

/// The text report: the pod's phase and grace, the delete, each container's last state, the
/// findings (`[inferred]` where the timestamps say it, not a message), the events.
pub(crate) fn render(r: &Forensics) -> String {
    let mut s = String::new();
    let _ = write!(s, "pod {}/{}", r.namespace, r.pod);
    if r.object_present {
        let _ = write!(s, ": phase {}", r.phase);
        if !r.reason.is_empty() {
            let _ = write!(s, " ({})", r.reason);
        }
        if let Some(g) = r.termination_grace_period_seconds {
            let _ = write!(s, ", terminationGracePeriodSeconds {g}");
        }
    } else {
        s.push_str(": gone (read from its events)");
    }
    s.push('\n');
    if let Some(d) = &r.deletion {
        let _ = writeln!(
            s,
            "  deletionTimestamp {}, deletionGracePeriodSeconds {}{}",
            d.deletion_timestamp,
            d.deletion_grace_period_seconds
                .map_or("unset".to_string(), |g| g.to_string()),
            d.deleted_at
                .as_ref()
                .map(|a| format!(" (deleted at {a})"))
                .unwrap_or_default()
        );
    }
    for c in &r.containers {
        let _ = write!(s, "  {}: ", c.name);
        if c.last != Some("state") {
            let _ = write!(s, "{}, ", c.state);
        }
        let _ = write!(s, "restarts {}", c.restart_count);
        if let (Some(t), Some(last)) = (&c.terminated, c.last) {
            let _ = write!(
                s,
                "; {} exit {}{}{}{}",
                if last == "state" {
                    "terminated"
                } else {
                    "last terminated"
                },
                t.exit_code,
                if t.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", t.reason)
                },
                t.finished_at
                    .as_ref()
                    .map(|f| format!(" at {f}"))
                    .unwrap_or_default(),
                t.after_delete_seconds
                    .map(|a| format!(", {a} s after the delete"))
                    .unwrap_or_default()
            );
        }
        s.push('\n');
    }
    if !r.findings.is_empty() {
        s.push_str("why:\n");
        for f in &r.findings {
            let _ = writeln!(
                s,
                "  - {}{}{}",
                f.container
                    .as_ref()
                    .map(|c| format!("{c}: "))
                    .unwrap_or_default(),
                f.message,
                if f.inferred { " [inferred]" } else { "" }
            );
        }
    }
    if r.events.is_empty() {
        s.push_str("events: none left\n");
    } else {
        s.push_str("events:\n");
        for e in &r.events {
            let _ = writeln!(
                s,
                "  {}  {:<7}  {}{}{}  {}",
                if e.time.is_empty() {
                    "-"
                } else {
                    e.time.as_str()
                },
                e.type_,
                e.reason,
                e.container
                    .as_ref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default(),
                if e.count > 1 {
                    format!(" x{}", e.count)
                } else {
                    String::new()
                },
                e.message
            );
        }
    }
    s
}
