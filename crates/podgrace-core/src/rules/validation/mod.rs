//! The API server's validation of the addresses it publishes in Endpoints and EndpointSlices.
//!
//! A pod address that fails it never reaches a Service: kube-apiserver rejects the
//! EndpointSlice write, and the endpointslice controller then publishes no endpoint for the
//! Service at all (recorded on a real 1.32 cluster whose pods sat on a 169.254.88.0/24 bridge:
//! `FailedToUpdateEndpointSlices ... may not be in the link-local range (169.254.0.0/16,
//! fe80::/10)`, while the same pods on 198.18.88.0/24 were published;
//! `shared/cases/real-cluster-1.32.md`, issue 19). `podgrace serve` validates what it
//! publishes with [`validate_endpoint_ip`], and pod ranges are checked with it before any pod
//! gets an address.

pub mod format;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::manifest::FieldErrorKind;

/// One `field.Error` of [`validate_endpoint_ip`]: the field path and the error body, printed
/// as kube-apiserver prints it (`endpoints[0].addresses[0]: Invalid value: "169.254.1.2": may
/// not be in the link-local range (169.254.0.0/16, fe80::/10)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, such as `endpoints[0].addresses[0]`.
    pub path: String,
    /// The error type and body (`Invalid value: "…": …`).
    pub kind: FieldErrorKind,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.kind)
    }
}

impl std::error::Error for FieldError {}

/// Detail for 0.0.0.0 or `::`. This and the details below are worded as kube-apiserver words
/// them (`pkg/apis/core/validation` `ValidateEndpointIP`).
pub const UNSPECIFIED: &str = "may not be unspecified";
/// Detail for an address in 127.0.0.0/8 or ::1.
pub const LOOPBACK: &str = "may not be in the loopback range (127.0.0.0/8, ::1/128)";
/// Detail for an address in 169.254.0.0/16 or fe80::/10.
pub const LINK_LOCAL: &str = "may not be in the link-local range (169.254.0.0/16, fe80::/10)";
/// Detail for an address in 224.0.0.0/24 or ff02::/10.
pub const LINK_LOCAL_MULTICAST: &str =
    "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)";

/// Parses an IP address as Kubernetes' `netutils.ParseIPSloppy` does: IPv4 octets may carry
/// leading zeros (`010.1.2.3` is 10.1.2.3, read as decimal, as Go's old `net.ParseIP` did);
/// IPv6 as usual, zones refused. `None` when it is no address.
///
/// Source: `k8s.io/utils/net` `ParseIPSloppy` (the forked Go 1.16 parser); Kubernetes 1.22 to
/// 1.37.
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if s.contains(':') {
        return None;
    }
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for o in &mut octets {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *o = p.parse::<u16>().ok().and_then(|v| u8::try_from(v).ok())?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// The address as Go's `net.IP` classifies it: an IPv4-mapped IPv6 address counts as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

fn is_link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 169 && v4.octets()[1] == 254,
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

fn is_link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 224 && o[1] == 0 && o[2] == 0
        }
        // Go: ip[0] == 0xff && ip[1]&0x0f == 0x02 (any flags, link-local scope).
        IpAddr::V6(v6) => {
            let o = v6.octets();
            o[0] == 0xff && (o[1] & 0x0f) == 0x02
        }
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 127,
        IpAddr::V6(v6) => v6 == Ipv6Addr::LOCALHOST,
    }
}

/// `ValidateEndpointIP` (called `ValidateNonSpecialIP` before Kubernetes 1.32): the errors
/// kube-apiserver returns for `ip` as an Endpoints or EndpointSlice address at `path`. Empty
/// when the address is accepted. An address that does not parse gets `must be a valid IP
/// address`; otherwise every special range it falls in gets one error, in this order:
/// unspecified (`0.0.0.0`, `::`), loopback (127.0.0.0/8, ::1), link-local unicast
/// (169.254.0.0/16, fe80::/10), link-local multicast (224.0.0.0/24, ff02::/16 with any flags:
/// the message says /10, the check is Go's `IsLinkLocalMulticast`). Global multicast and
/// class E are accepted ("probably should not have been allowed", says upstream's test).
///
/// Source: `pkg/apis/core/validation/validation.go` `ValidateEndpointIP` (read at the 1.36
/// tree); the same checks and wording under the name `ValidateNonSpecialIP` since Kubernetes
/// 1.11, used for Endpoints, EndpointSlices (`pkg/apis/discovery/validation`) and
/// `spec.externalIPs`. Holds for 1.18 to 1.37.
pub fn validate_endpoint_ip(ip: &str, path: &str) -> Vec<FieldError> {
    let invalid = |detail: String| FieldError {
        path: path.to_string(),
        kind: FieldErrorKind::Invalid {
            value: format!("{ip:?}"),
            detail,
        },
    };
    let Some(parsed) = parse_ip_sloppy(ip) else {
        return vec![invalid("must be a valid IP address".into())];
    };
    let addr = canonical(parsed);
    let mut errs = Vec::new();
    if addr.is_unspecified() {
        errs.push(invalid(format!("{UNSPECIFIED} ({ip})")));
    }
    if is_loopback(addr) {
        errs.push(invalid(LOOPBACK.into()));
    }
    if is_link_local_unicast(addr) {
        errs.push(invalid(LINK_LOCAL.into()));
    }
    if is_link_local_multicast(addr) {
        errs.push(invalid(LINK_LOCAL_MULTICAST.into()));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_link_local_rejection_is_worded_as_kube_apiserver_words_it() {
        let errs = validate_endpoint_ip("169.254.88.2", "endpoints[0].addresses[0]");
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "endpoints[0].addresses[0]: Invalid value: \"169.254.88.2\": may not be in the link-local range (169.254.0.0/16, fe80::/10)"
        );
        assert!(validate_endpoint_ip("198.18.88.2", "ip").is_empty());
    }

    #[test]
    fn sloppy_parsing_and_mapped_addresses() {
        assert_eq!(
            parse_ip_sloppy("010.001.2.3"),
            Some(IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)))
        );
        assert_eq!(parse_ip_sloppy("1.2.3"), None);
        assert_eq!(parse_ip_sloppy("1.2.3.256"), None);
        assert_eq!(parse_ip_sloppy("fe80::1%eth0"), None);
        // ::ffff:127.0.0.1 is loopback to Go, as it is IPv4 underneath.
        assert_eq!(validate_endpoint_ip("::ffff:127.0.0.1", "ip").len(), 1);
        assert_eq!(
            validate_endpoint_ip("nope", "ip")[0].to_string(),
            "ip: Invalid value: \"nope\": must be a valid IP address"
        );
        assert_eq!(
            validate_endpoint_ip("0.0.0.0", "ip")[0].to_string(),
            "ip: Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)"
        );
    }
}
