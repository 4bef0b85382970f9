//! One module per verb.

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
    Ok(podgrace_node::sandbox::NetworkConfig { base })
}
