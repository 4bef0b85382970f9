//! `podgrace run`'s text: the notes on a later delete and the summary of the run report.

use podgrace_core::rules::apiserver::{format_timestamp, KubectlDeleteFlags};
use podgrace_core::KubeVersion;
use podgrace_node::kubelet::{DeleteApi, DeleteKubelet, DeleteRecord, RunReport};

/// `kubectl delete --grace-period=3`, as the notes name a delete.
pub(crate) fn describe(flags: KubectlDeleteFlags) -> String {
    if flags.force {
        format!(
            "kubectl delete pod --grace-period={} --force",
            flags.grace_period.max(0)
        )
    } else if flags.now {
        "kubectl delete pod --now".into()
    } else if flags.grace_period >= 0 {
        format!("kubectl delete pod --grace-period={}", flags.grace_period)
    } else {
        "kubectl delete pod".into()
    }
}

/// What a delete did, said once it has happened: nothing for the one that started the
/// termination (the events say it); for a later one, whether it shortened anything.
pub(crate) fn delete_note(d: &DeleteRecord, version: KubeVersion) -> Option<String> {
    let what = describe(d.flags);
    let api = match d.api {
        DeleteApi::NotFound => {
            return Some(format!(
                "note: {what}: Error from server (NotFound): the pod object is already gone; the kubelet goes on terminating"
            ))
        }
        DeleteApi::Unchanged => {
            return Some(format!(
                "note: {what} is not shorter than the grace already set: the API server changes nothing"
            ))
        }
        DeleteApi::Graceful {
            deletion_grace_period_seconds,
            deletion_timestamp,
        } => format!(
            "deletionGracePeriodSeconds {deletion_grace_period_seconds}, deletionTimestamp {}",
            format_timestamp(deletion_timestamp)
        ),
        DeleteApi::Deleted { .. } => "the object is removed (force deleted)".to_string(),
    };
    match d.kubelet {
        DeleteKubelet::Ignored {
            kept_seconds,
            recorded_seconds,
        } => Some(format!(
            "note: {what} does not shorten the termination in flight: the API now says {api}, and the kubelet's pod worker takes {recorded_seconds} s, but Kubernetes {version}'s SyncTerminatingPod kills on a context of its own, so the preStop wait, StopContainer and SIGKILL keep the grace of {kept_seconds} s (as recorded on a real 1.32 node)"
        )),
        DeleteKubelet::KilledAgain => Some(format!(
            "note: {what}: {api}; Kubernetes {version}'s kubelet kills every container again at once beside the kill in flight (its pod killer: no preStop, StopContainer with 2 s)"
        )),
        DeleteKubelet::NotShorter => Some(format!(
            "note: {what}: the API now says {api}; the kubelet's grace does not get shorter, nothing changes"
        )),
        DeleteKubelet::BeforeKill {
            grace_period_seconds,
        } => Some(format!(
            "note: {what}: the API now says {api}; the kill had not begun and starts with {grace_period_seconds} s"
        )),
        DeleteKubelet::Started { .. } | DeleteKubelet::Nothing => None,
    }
}

/// The text summary: per container, what it received and when, with a diagnosis.
pub(crate) fn summary(r: &RunReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\npod {} ({})",
        r.pod,
        if r.isolation == "namespaces" {
            "each container's entry process ran as PID 1 of its own PID namespace"
        } else {
            "containers ran as plain host processes"
        }
    );
    let event_of = |container: &str, reason: &str| {
        r.events
            .iter()
            .rev()
            .find(|e| e.container.as_deref() == Some(container) && e.reason == reason)
    };
    // Whether a container ever started (a Started event), and why one never did.
    let never_started =
        |name: &str| event_of(name, podgrace_node::events::reason::STARTED).is_none();
    for (i, c) in r.containers.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {} ({}, {} restart{})",
            c.name,
            c.role,
            c.restarts,
            if c.restarts == 1 { "" } else { "s" }
        );
        for e in &c.exits {
            let how = e
                .exit_signal
                .as_deref()
                .map(|s| format!("killed by {s}"))
                .unwrap_or_else(|| format!("exited {}", e.exit_code));
            let _ = writeln!(out, "    {how} at {:.3} s while the pod ran", e.seconds);
        }
        if c.terminations.is_empty() && c.exits.is_empty() {
            // A container the runtime could not create or start never ran at all; one that
            // waited for an init container or native sidecar before it (they start in order)
            // never got its turn.
            let failed = event_of(&c.name, podgrace_node::events::reason::FAILED);
            let waits_for = r.containers[..i].iter().rev().find(|o| o.role != "main");
            match (failed, never_started(&c.name), waits_for) {
                (Some(e), _, _) => {
                    let _ = writeln!(out, "    never started: {}", e.message);
                    // `Error: ErrImagePull` or `ImagePullBackOff` says what, the last pull's
                    // `Failed to pull image ...` why.
                    let image_error = ["Error: ErrImagePull", "Error: ImagePullBackOff"]
                        .contains(&e.message.as_str());
                    let pull = r.events.iter().rev().find(|p| {
                        p.container.as_deref() == Some(c.name.as_str())
                            && p.reason == podgrace_node::events::reason::FAILED
                            && p.message.starts_with("Failed to pull image ")
                    });
                    if let (true, Some(p)) = (image_error, pull) {
                        let _ = writeln!(out, "      {}", p.message);
                    }
                }
                (None, true, Some(b)) => {
                    let why = if never_started(&b.name) {
                        "which never started"
                    } else {
                        "which had not finished starting"
                    };
                    let _ = writeln!(
                        out,
                        "    never started: it waits for {} {}, {why}",
                        b.role, b.name
                    );
                }
                (None, true, None) => {
                    let _ = writeln!(out, "    never started");
                }
                (None, false, _) => {
                    let _ = writeln!(out, "    not terminated by the kubelet");
                }
            }
        }
        for t in &c.terminations {
            let _ = writeln!(
                out,
                "    {} at {:.3} s, grace period {} s{} (times below: since then)",
                t.reason,
                t.start_seconds,
                t.grace_period_seconds,
                if t.killed_by == "podKiller" {
                    " (the pod killer's second kill, after the object was removed)"
                } else {
                    ""
                }
            );
            if let Some(h) = &t.pre_stop {
                let detail = h
                    .detail
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "      preStop {:8} +{:.3} → +{:.3} s  {}{detail}",
                    h.action, h.after_seconds, h.end_after_seconds, h.outcome
                );
            }
            match t.stop_signal_after_seconds {
                Some(s) => {
                    let _ = writeln!(out, "      {:16} +{s:.3} s", t.stop_signal);
                }
                None => {
                    let _ = writeln!(
                        out,
                        "      {:16} not sent in this termination",
                        t.stop_signal
                    );
                }
            }
            if let Some(k) = t.kill_after_seconds {
                let _ = writeln!(out, "      {:16} +{k:.3} s", "SIGKILL");
            }
            if let (Some(e), Some(code)) = (t.exit_after_seconds, t.exit_code) {
                let how = t
                    .exit_signal
                    .as_deref()
                    .map(|s| format!("killed by {s}"))
                    .unwrap_or_else(|| format!("exited {code}"));
                let _ = writeln!(out, "      {how:16} +{e:.3} s");
            }
            if let Some(d) = diagnosis(t) {
                let _ = writeln!(out, "      → {d}");
            }
        }
    }
    if !r.object.is_empty() {
        let _ = writeln!(
            out,
            "  the pod object (kubectl get pods -w --output-watch-events):"
        );
        // The STATUS column as wide as its longest value (ContainerStatusUnknown), as kubectl's.
        let width = r
            .object
            .iter()
            .map(|e| e.table.status.len())
            .max()
            .unwrap_or(0)
            .max(12);
        for e in &r.object {
            let mut meta = Vec::new();
            if let Some(dt) = &e.deletion_timestamp {
                meta.push(format!("deletionTimestamp {dt}"));
            }
            if let Some(g) = e.deletion_grace_period_seconds {
                meta.push(format!("deletionGracePeriodSeconds {g}"));
            }
            meta.push(format!("phase {}", e.phase));
            if let Some(reason) = &e.reason {
                meta.push(format!("reason {reason}"));
            }
            let _ = writeln!(
                out,
                "    {:>8.3} s  {:8}  {:5} {:width$} {}",
                e.seconds,
                e.kind,
                e.table.ready,
                e.table.status,
                meta.join(", ")
            );
        }
    }
    for d in r.deletes.iter().skip(1) {
        let what = match (d.grace_period_seconds, d.force) {
            (Some(g), true) => format!("--grace-period={g} --force"),
            (Some(g), false) => format!("--grace-period={g}"),
            (None, _) => "(the pod's own grace)".into(),
        };
        let effect = match d.kubelet {
            "ignored" => format!(
                "did not shorten the termination: the kill kept {} s",
                d.kill_grace_period_seconds.unwrap_or_default()
            ),
            "killedAgain" => "made the kubelet kill every container again".into(),
            "beforeKill" => "came before the kill began, which took its grace".into(),
            "notShorter" | "nothing" => "changed nothing for the kubelet".into(),
            other => other.to_string(),
        };
        let _ = writeln!(
            out,
            "  the delete at {:.3} s ({what}, API: {}) {effect}",
            d.seconds, d.api
        );
    }
    out
}

/// The diagnosis line of a termination ([`TerminationRun::diagnosis`]), as the summary says it.
///
/// [`TerminationRun::diagnosis`]: podgrace_node::kubelet::report::TerminationRun::diagnosis
pub(crate) fn diagnosis(t: &podgrace_node::kubelet::report::TerminationRun) -> Option<String> {
    use podgrace_node::kubelet::report::Diagnosis;
    Some(match t.diagnosis()? {
        Diagnosis::StopSignalIgnored { after_seconds } => format!(
            "{} was not acted on: the app was SIGKILLed at the deadline, {after_seconds:.3} s after it (a PID 1 without a handler ignores it; a shell without exec does not pass it on)",
            t.stop_signal
        ),
        Diagnosis::ExitedAtOnce { after_seconds } => format!(
            "exited within {:.0} ms of {}: make sure in-flight work was finished, not dropped",
            after_seconds * 1000.0,
            t.stop_signal
        ),
    })
}
