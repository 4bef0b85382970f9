//! `podgrace prestop-wait`'s lines (the progress and the summary themselves are
//! `podgrace_shutdown::wait`'s `Display`).

use std::time::Duration;

/// One output line: `prestop-wait: TEXT` and a newline.
pub(crate) fn line(text: &str) -> String {
    format!("prestop-wait: {text}\n")
}

/// Said when the connection counters cannot be read: the hook waits its `--max` (seconds, one
/// decimal) instead, the safe side of a fixed sleep.
pub(crate) fn counters_unreadable(error: &dyn std::fmt::Display, max: Duration) -> String {
    format!(
        "cannot read the connection counters ({error}): waiting the maximum of {:.1} s instead",
        max.as_secs_f64()
    )
}

/// The last line after such a wait.
pub(crate) const DONE: &str = "done";
