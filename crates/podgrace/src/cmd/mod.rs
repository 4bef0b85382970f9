//! One module per verb, and the flag groups they share.

pub mod args;
pub mod conformance;
pub mod demo_app;
pub mod drill;
pub mod explain;
pub mod init;
pub mod lint;
pub mod prestop_wait;
pub mod run;
pub mod serve;

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
