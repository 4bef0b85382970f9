//! The kill rules: what the kubelet and the container runtime do to each container when the
//! pod is deleted, as the `delete` timeline computes it ([`timeline::container_findings_of`],
//! the same function `podgrace explain` reports them with, under the same ids): a tcpSocket
//! preStop that is never run, a preStop skipped for a budget of 0, SIGKILL as the stop signal,
//! `lifecycle.stopSignal` and its feature gate, a stop signal taken from the image, and a
//! SIGKILL later than grace + 2 s. `prestop-exceeds-grace` comes from the same function but is
//! reported by [`super::budget`]. Findings that only other triggers give (`immediate-sigkill`:
//! an override of 0 on an old kubelet) are not lint rules.

use super::{catalogue, PodCx, Sink};
use crate::plan::ContainerPlan;
use crate::plan::SourceSpan;
use crate::timeline;

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    let grace = cx.timeline.grace_period_seconds;
    for c in cx.pod.running_containers() {
        let Some(t) = cx.timeline_of(c) else {
            continue;
        };
        for f in timeline::container_findings_of(cx.pod, c, t, grace, cx.opts.version) {
            if f.rule == "prestop-exceeds-grace" || catalogue::rule(f.rule).is_none() {
                continue;
            }
            let span = span_of(f.rule, c);
            sink.shared(cx, f, Some(c), span);
        }
    }
}

/// The field a kill finding points at.
fn span_of(rule: &str, c: &ContainerPlan) -> SourceSpan {
    match rule {
        "tcpsocket-hook-not-run" | "prestop-skipped" => c.field_span("lifecycle.preStop"),
        "stop-signal-sigkill" | "stop-signal-feature-gate" => c.field_span("lifecycle.stopSignal"),
        "stop-signal-from-image" => c.field_span("image"),
        _ => c.span.clone(),
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::testutil::*;
    use crate::lint::{LintOptions, Severity};
    use crate::KubeVersion;

    #[test]
    fn the_delete_timeline_findings_are_lint_findings() {
        let y = deploy("      containers:\n        - name: web\n          image: nginx:1.25\n          lifecycle:\n            preStop:\n              tcpSocket: {port: 80}\n");
        let f = run(&y);
        let t = of(&f, "tcpsocket-hook-not-run");
        assert_eq!(t.len(), 1, "{f:?}");
        assert_eq!(t[0].container.as_deref(), Some("web"));
        assert_eq!(
            (t[0].span.line, t[0].span.column),
            (19, 13),
            "{:?}",
            t[0].span
        );
        let i = of(&f, "stop-signal-from-image");
        assert_eq!(i.len(), 1, "{f:?}");
        assert_eq!(i[0].severity, Severity::Info);
        assert_eq!(i[0].span.path, "spec.template.spec.containers[0].image");
    }

    #[test]
    fn a_stop_signal_of_sigkill_is_found_at_the_field() {
        let y = deploy("      os: {name: linux}\n      containers:\n        - name: app\n          image: app\n          lifecycle:\n            stopSignal: SIGKILL\n");
        let opts = LintOptions {
            version: KubeVersion::new(1, 33),
            ..Default::default()
        };
        let f = run_with(&y, &opts);
        let k = of(&f, "stop-signal-sigkill");
        assert_eq!(k.len(), 1, "{f:?}");
        assert_eq!(
            k[0].span.path,
            "spec.template.spec.containers[0].lifecycle.stopSignal"
        );
        assert_eq!(of(&f, "stop-signal-feature-gate").len(), 1, "{f:?}");
    }
}
