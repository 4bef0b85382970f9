//! Probe rules: probe kills and their grace period (KEP-2238).

use super::{PodCx, Sink};
use crate::timeline;

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    let tgps = cx.tgps();
    for c in cx.pod.running_containers() {
        for (kind, key, probe) in [
            ("liveness", "livenessProbe", &c.liveness_probe),
            ("startup", "startupProbe", &c.startup_probe),
        ] {
            let Some(p) = probe else {
                continue;
            };
            if let Some(mut f) = timeline::probe_kill_uses_pod_grace(cx.pod, kind, p) {
                f.message = format!("container {}: {}", c.name, f.message);
                sink.shared(cx, f, Some(c), c.field_span(key));
            }
            if let Some(pt) = p.termination_grace_period_seconds {
                if pt > tgps {
                    let field = if kind == "liveness" {
                        "livenessProbe.terminationGracePeriodSeconds"
                    } else {
                        "startupProbe.terminationGracePeriodSeconds"
                    };
                    sink.push(
                        cx,
                        "probe-grace-exceeds-pod-grace",
                        Some(c),
                        c.field_span(field),
                        format!(
                            "container {}: {key}.terminationGracePeriodSeconds {pt} s is longer than the pod's terminationGracePeriodSeconds {tgps} s: after a failed {kind} probe the hung container waits up to {pt} s for SIGKILL, longer than a deletion would; make it shorter than {tgps}",
                            c.name
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::testutil::*;

    fn pod(tgps: i64, probe_extra: &str) -> String {
        deploy(&format!("      terminationGracePeriodSeconds: {tgps}\n      containers:\n        - name: app\n          image: app\n          livenessProbe:\n            httpGet:\n              path: /healthz\n              port: 8080\n{probe_extra}"))
    }

    #[test]
    fn probe_kill_uses_pod_grace() {
        let f = run(&pod(300, ""));
        let f = of(&f, "probe-kill-uses-pod-grace");
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message
                .starts_with("container app: the liveness probe"),
            "{}",
            f[0].message
        );
        assert_eq!(f[0].span.line, 19);
        assert!(of(&run(&pod(30, "")), "probe-kill-uses-pod-grace").is_empty());
        let own = pod(300, "            terminationGracePeriodSeconds: 10\n");
        assert!(of(&run(&own), "probe-kill-uses-pod-grace").is_empty());
    }

    #[test]
    fn probe_grace_exceeds_pod_grace() {
        let f = run(&pod(30, "            terminationGracePeriodSeconds: 120\n"));
        let f = of(&f, "probe-grace-exceeds-pod-grace");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].span.line, 23);
        let ok = run(&pod(30, "            terminationGracePeriodSeconds: 10\n"));
        assert!(of(&ok, "probe-grace-exceeds-pod-grace").is_empty());
    }
}
