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
