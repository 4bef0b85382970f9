//! `podgrace serve`'s start-up lines: where the API listens, the kubeconfig, and kube-proxy's
//! endpoint lag.

use std::path::Path;

use podgrace_core::KubeVersion;
use podgrace_drill::endpoints::LagModel;

/// The API's address and the kubeconfig (its path, and the `export KUBECONFIG=` to paste).
pub(crate) fn banner(version: KubeVersion, server: &str, kubeconfig: &Path) -> String {
    format!(
        "podgrace serve: Kubernetes {version} API on {server} (TLS, bearer token)\n\
         kubeconfig: {k} (mode 0600)\n\
         export KUBECONFIG={k}\n",
        k = kubeconfig.display()
    )
}

/// kube-proxy's line: what it listens on and the endpoint lag, in seconds.
pub(crate) fn kube_proxy(lag: LagModel) -> String {
    format!(
        "kube-proxy: Services on their ClusterIPs and 127.0.0.1:nodePort (user-space, TCP), endpoint lag {}\n",
        match lag {
            LagModel::Fixed(l) => format!("{:.1} s", l.as_secs_f64()),
            LagModel::KubeProxy {
                min_sync_period, ..
            } => format!(
                "kube-proxy's sync (minSyncPeriod {:.1} s)",
                min_sync_period.as_secs_f64()
            ),
            LagModel::PerPod(r) => format!(
                "{:.1} to {:.1} s per pod",
                r.min.as_secs_f64(),
                r.max.as_secs_f64()
            ),
        }
    )
}

/// What a node shutdown did, one line per pod in the order the kills were sent: its group,
/// its grace-period override, and how long its kill took (or that the group's period ran
/// out first).
pub(crate) fn shutdown_records(records: &[podgrace_node::nodeshutdown::ShutdownRecord]) -> String {
    let t0 = records.first().map(|r| r.sent_at);
    let mut out = String::new();
    for r in records {
        let at = t0.map_or(0.0, |t| {
            r.sent_at.saturating_duration_since(t).as_secs_f64()
        });
        let done = match r.killed_at {
            Some(k) => format!(
                "killed {:.1} s later",
                k.saturating_duration_since(r.sent_at).as_secs_f64()
            ),
            None => "not killed within its group's period".into(),
        };
        out.push_str(&format!(
            "  t={at:.1}s pod/{} (priority group {}): grace {} s, {done}\n",
            r.pod, r.group_priority, r.grace_period_override
        ));
    }
    out
}

/// The answer of `POST .../shutdown`: `{pods: [{pod, groupPriority, gracePeriodSeconds,
/// sentSeconds, killedSeconds}]}`, seconds from the start of the shutdown (`t0`).
pub(crate) fn shutdown_json(
    records: &[podgrace_node::nodeshutdown::ShutdownRecord],
    t0: std::time::Instant,
) -> serde_json::Value {
    let secs = |t: std::time::Instant| {
        (t.saturating_duration_since(t0).as_secs_f64() * 1000.0).round() / 1000.0
    };
    serde_json::json!({
        "pods": records.iter().map(|r| serde_json::json!({
            "pod": r.pod,
            "groupPriority": r.group_priority,
            "gracePeriodSeconds": r.grace_period_override,
            "sentSeconds": secs(r.sent_at),
            "killedSeconds": r.killed_at.map(secs),
        })).collect::<Vec<_>>(),
    })
}
