//! Probe rules: probe kills and their grace period (KEP-2238).

use super::{PodCx, Sink};
use crate::plan::{PortRef, ProbeAction};
use crate::timeline;

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    let tgps = cx.tgps();
    for c in cx.pod.running_containers() {
        port_not_found(cx, c, sink);
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

/// `probe-port-not-found`: a probe whose named port the container does not declare. The API
/// server accepts it; the kubelet's `ResolveContainerPort` (`pkg/probe/util.go`) finds no such
/// port, tries the name as a number and fails, so every probe errors (`Unhealthy`: "probe
/// errored and resulted in failure state") and counts as a failure.
fn port_not_found(cx: &PodCx<'_>, c: &crate::plan::ContainerPlan, sink: &mut Sink<'_>) {
    for (key, probe, outcome) in [
        ("livenessProbe", &c.liveness_probe, "after failureThreshold × periodSeconds the kubelet kills the container (with its grace) and restarts it, over and over"),
        ("startupProbe", &c.startup_probe, "after failureThreshold × periodSeconds the kubelet kills the container (with its grace) and restarts it, over and over"),
        ("readinessProbe", &c.readiness_probe, "the container never becomes ready, so the pod gets no traffic and a rollout never progresses"),
    ] {
        let Some(p) = probe else { continue };
        let port = match &p.action {
            ProbeAction::HttpGet(g) => &g.port,
            ProbeAction::TcpSocket { port, .. } => port,
            _ => continue,
        };
        let PortRef::Name(name) = port else { continue };
        if c.ports.iter().any(|p| p.name.as_deref() == Some(name)) || name.parse::<i64>().is_ok() {
            continue;
        }
        let declared: Vec<String> = c
            .ports
            .iter()
            .filter_map(|p| p.name.as_deref().map(|n| format!("{n:?}")))
            .collect();
        let list = if declared.is_empty() {
            "none".to_string()
        } else {
            declared.join(", ")
        };
        sink.push(
            cx,
            "probe-port-not-found",
            Some(c),
            c.field_span(key),
            format!(
                "container {}: the {key}'s port {name:?} is not a port name of the container (named ports: {list}); the API server accepts it, but every probe errors (strconv.Atoi: parsing {name:?}: invalid syntax) and counts as failed: {outcome}; name the port in ports[] or give its number",
                c.name
            ),
        );
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
