//! One module per verb.

pub mod conformance;
pub mod demo_app;
pub mod drill;
pub mod explain;
pub mod lint;
pub mod run;

/// `--pod-network A.B.C.0/24`: the range pods take their addresses from (`.1` is the host side,
/// pods get `.2` to `.254`). Only /24 ranges are supported, and only ones whose addresses
/// kube-apiserver accepts in EndpointSlices (see `podgrace_node::sandbox::NetworkConfig`).
pub fn parse_pod_network(s: &str) -> Result<podgrace_node::sandbox::NetworkConfig, String> {
    s.parse()
        .map_err(|e: podgrace_node::sandbox::PodNetworkError| e.to_string())
}

/// A duration flag: plain seconds (`2.5`) or humantime (`10s`, `1m30s`, `500ms`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok(std::time::Duration::from_secs_f64(secs));
        }
    }
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 10s, 1m30s, 500ms)"))
}

/// The `--runtime` flag group of `run`, `drill` and `serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct RuntimeArgs {
    /// Which runtime runs the pods: `process` (containers as local processes, the default) or
    /// `containerd[:SOCKET]` (a real containerd over CRI v1, namespace k8s.io; default socket
    /// /run/containerd/containerd.sock): the images run unchanged, networking through
    /// containerd's CNI config.
    #[arg(long, value_name = "RUNTIME", default_value = "process")]
    pub runtime: podgrace_node::runtime::RuntimeChoice,
}
