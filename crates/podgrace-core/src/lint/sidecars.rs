//! Sidecar rules: proxies that run as regular containers and are stopped with the app.

use super::{image_name, PodCx, Sink};
use crate::plan::{ContainerPlan, WorkloadKind};

/// What kind of proxy a container is, judged from its name and image.
fn proxy_kind(c: &ContainerPlan) -> Option<&'static str> {
    let image = c.image.as_deref().map(image_name).unwrap_or_default();
    let name = c.name.to_ascii_lowercase();
    let has = |s: &str| image.contains(s) || name.contains(s);
    if has("istio-proxy") || image == "proxyv2" {
        Some("istio-proxy (envoy)")
    } else if has("envoy") {
        Some("envoy")
    } else if has("linkerd") && has("proxy") {
        Some("linkerd-proxy")
    } else if has("cloud-sql-proxy") || has("cloudsql-proxy") || has("cloud_sql_proxy") {
        Some("cloud-sql-proxy")
    } else {
        None
    }
}

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    let pod = cx.pod;
    if pod.containers.len() < 2 {
        return;
    }
    for c in &pod.containers {
        let Some(kind) = proxy_kind(c) else {
            continue;
        };
        let apps: Vec<&str> = pod
            .containers
            .iter()
            .filter(|o| o.name != c.name && proxy_kind(o).is_none())
            .map(|o| o.name.as_str())
            .collect();
        if apps.is_empty() {
            continue;
        }
        let tgps = cx.tgps();
        let drain = c
            .env
            .iter()
            .find(|(k, _)| k == "TERMINATION_DRAIN_DURATION_SECONDS")
            .and_then(|(_, v)| v.as_deref()?.parse::<i64>().ok());
        let drain_note = match (kind.starts_with("istio"), drain) {
            (_, Some(d)) if d >= tgps => format!(
                "; its drain of {d} s (TERMINATION_DRAIN_DURATION_SECONDS) is not below terminationGracePeriodSeconds {tgps} s, so it is SIGKILLed mid-drain"
            ),
            (_, Some(d)) => format!(" after its {d} s drain"),
            (true, None) => " after its drain (terminationDrainDuration, 5 s by default)".into(),
            (false, None) => String::new(),
        };
        let job = if matches!(pod.kind, WorkloadKind::Job | WorkloadKind::CronJob) {
            "; in a Job the pod does not complete while the proxy runs"
        } else {
            ""
        };
        let fix = if cx.opts.version.at_least(1, 29) {
            "run it as a native sidecar (move it to initContainers with restartPolicy: Always), which is stopped only after the app has exited"
        } else {
            "give the proxy a preStop that waits for the app (native sidecars need Kubernetes 1.29)"
        };
        sink.push(
            cx,
            "sidecar-as-regular-container",
            Some(c),
            c.span.clone(),
            format!(
                "container {}: {kind} runs as a regular container, so it gets its stop signal at t=0 together with {} and stops{drain_note}, while the app may still be serving or calling out through it until t={tgps}{job}; {fix}",
                c.name,
                apps.join(", "),
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::testutil::*;

    #[test]
    fn proxy_as_regular_container() {
        let y = deploy("      containers:\n        - name: app\n          image: app\n        - name: istio-proxy\n          image: docker.io/istio/proxyv2:1.22\n");
        let f = run(&y);
        let s = of(&f, "sidecar-as-regular-container");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].container.as_deref(), Some("istio-proxy"));
        assert!(s[0].message.contains("5 s by default"), "{}", s[0].message);
        let native = deploy("      initContainers:\n        - name: istio-proxy\n          image: docker.io/istio/proxyv2:1.22\n          restartPolicy: Always\n      containers:\n        - name: app\n          image: app\n");
        assert!(of(&run(&native), "sidecar-as-regular-container").is_empty());
        let alone =
            deploy("      containers:\n        - name: envoy\n          image: envoyproxy/envoy\n");
        assert!(of(&run(&alone), "sidecar-as-regular-container").is_empty());
    }
}
