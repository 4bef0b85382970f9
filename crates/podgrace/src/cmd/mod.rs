//! One module per verb, and the flag groups they share.

pub mod args;
pub mod conformance;
pub mod demo_app;
pub mod drill;
pub mod explain;
pub mod lint;
pub mod run;

/// `--pod-network A.B.C.0/24`: the range pods take their addresses from (`.1` is the host side,
/// pods get `.2` to `.254`). Only /24 ranges are supported.
pub fn parse_pod_network(s: &str) -> Result<podgrace_node::sandbox::NetworkConfig, String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("expected A.B.C.0/24, got {s:?}"))?;
    if len != "24" {
        return Err(format!("only /24 pod networks are supported, got /{len}"));
    }
    let base: std::net::Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("not an IPv4 address: {addr:?}"))?;
    if base.octets()[3] != 0 {
        return Err(format!("{s}: the host part must be 0 (A.B.C.0/24)"));
    }
    if base.is_loopback() || base.is_multicast() || base.is_broadcast() || base.is_unspecified() {
        return Err(format!(
            "{s}: a pod range must be an ordinary unicast range (not loopback, multicast or 0.0.0.0)"
        ));
    }
    Ok(podgrace_node::sandbox::NetworkConfig { base })
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
