//! A pod's network: its own network namespace and an address reachable from the host only.
//!
//! Layout for pod index `n` (2..=254) in the configured /24 (default [`DEFAULT_POD_NETWORK`],
//! in 198.18.0.0/15, the RFC 2544 benchmarking range: neither private nor routed on the
//! Internet, and accepted by Kubernetes in Endpoints and EndpointSlices, which link-local
//! 169.254.0.0/16 is not; checked on this machine: no address or route used any of
//! 198.18.0.0/15):
//! * netns `podgrace-<n>-<owner pid>` (named, under `/run/netns`), `lo` up;
//! * a veth pair: `pgh<n>` on the host with `<base>.1/32` and a route `<base>.n/32` to it,
//!   `eth0` in the pod with `<base>.n/32` and one route, to `<base>.1` (scope link).
//!   No default route, so a pod reaches only the host, never another pod or the outside;
//!   podgrace enables no forwarding. On the host, an `unreachable` route covers the whole /24,
//!   so traffic to a pod that is gone fails at once and never leaves the machine.
//!
//! Indexes are handed out round robin across podgrace processes, as the CNI host-local IPAM
//! plugin does (`candidates`): a released address is reused last, not next.
//!
//! Built with iproute2 (`ip`), run through podgrace's own spawner and reaper, behind the
//! [`NetOps`] seam ([`IpCommand`] the real one): the set-up's logic is unit-tested against a fake. `hostNetwork`
//! pods get no namespace. Without the privilege to create namespaces every pod falls back to
//! the host network with one warning. Stale namespaces of dead podgrace processes are removed
//! before the first sandbox of a process is created.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::process::{run_helper_blocking, ExitStatus, ProcessError};

/// Errors of the sandbox module.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{argv:?}: {reason}")]
    Command { argv: Vec<String>, reason: String },
    #[error("running {argv:?}: {source}")]
    Spawn {
        argv: Vec<String>,
        source: ProcessError,
    },
    #[error("no free pod address left in {base}/24")]
    AllocateAddress { base: Ipv4Addr },
    /// [`teardown_own`] has run: this process is exiting and makes no new sandbox.
    #[error("podgrace is exiting: no new pod network is made")]
    Closed,
}

/// The default pod range (`--pod-network`), a /24 of 198.18.0.0/15 (RFC 2544).
///
/// Pod addresses must be ones kube-apiserver accepts in Endpoints and EndpointSlices
/// (`ValidateEndpointIP`, [`podgrace_core::rules::validation::validate_endpoint_ip`]): on a
/// real 1.32 cluster, pods on a link-local 169.254.88.0/24 bridge were Running and Ready but
/// the endpointslice controller published no endpoint (`FailedToUpdateEndpointSlices ... may
/// not be in the link-local range`), while on 198.18.88.0/24 it published them
/// (`shared/cases/real-cluster-1.32.md`, issue 19). podgrace's range before was 169.254.77.0/24.
pub const DEFAULT_POD_NETWORK: &str = "198.18.77.0/24";

/// The address range pods get their IPs from: `base` is the /24 network address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkConfig {
    pub base: Ipv4Addr,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        // DEFAULT_POD_NETWORK parses (a unit test holds it to that).
        DEFAULT_POD_NETWORK.parse().unwrap_or(NetworkConfig {
            base: Ipv4Addr::new(198, 18, 77, 0),
        })
    }
}

/// Why a pod range (`--pod-network`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodNetworkError {
    /// Not of the form `A.B.C.0/24`.
    #[error("expected A.B.C.0/24, got {0:?}")]
    Syntax(String),
    /// A prefix other than /24.
    #[error("only /24 pod networks are supported, got /{0}")]
    Prefix(String),
    /// The host part is not 0.
    #[error("{0}: the host part must be 0 (A.B.C.0/24)")]
    HostPart(String),
    /// Pods in this range would get addresses kube-apiserver rejects in Endpoints and
    /// EndpointSlices, so no Service would ever route to them.
    #[error("{range}: pod addresses such as {example} are rejected by kube-apiserver in Endpoints and EndpointSlices, so a Service would never route to these pods: {error}; use a range such as {DEFAULT_POD_NETWORK} (198.18.0.0/15, RFC 2544)")]
    Special {
        range: String,
        example: Ipv4Addr,
        error: String,
    },
    /// Multicast, broadcast or the unspecified network: no unicast pod address at all.
    #[error(
        "{0}: a pod range must be an ordinary unicast range (not multicast, broadcast or 0.0.0.0)"
    )]
    NotUnicast(String),
}

impl std::str::FromStr for NetworkConfig {
    type Err = PodNetworkError;

    /// `A.B.C.0/24`. The pod addresses (`.2` to `.254`; `.1` is the host side) must pass
    /// kube-apiserver's `ValidateEndpointIP`: not loopback, link-local or link-local
    /// multicast.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, len) = s
            .split_once('/')
            .ok_or_else(|| PodNetworkError::Syntax(s.to_string()))?;
        if len != "24" {
            return Err(PodNetworkError::Prefix(len.to_string()));
        }
        let base: Ipv4Addr = addr
            .parse()
            .map_err(|_| PodNetworkError::Syntax(s.to_string()))?;
        if base.octets()[3] != 0 {
            return Err(PodNetworkError::HostPart(s.to_string()));
        }
        if base.is_multicast() || base.is_broadcast() || base.is_unspecified() {
            return Err(PodNetworkError::NotUnicast(s.to_string()));
        }
        let config = NetworkConfig { base };
        // A /24 lies wholly inside or outside each special range, so one address decides.
        let example = config.addr(2);
        let errs = podgrace_core::rules::validation::validate_endpoint_ip(
            &example.to_string(),
            "endpoints[0].addresses[0]",
        );
        if let Some(e) = errs.first() {
            return Err(PodNetworkError::Special {
                range: s.to_string(),
                example,
                error: e.to_string(),
            });
        }
        Ok(config)
    }
}

impl NetworkConfig {
    fn addr(&self, n: u8) -> Ipv4Addr {
        let o = self.base.octets();
        Ipv4Addr::new(o[0], o[1], o[2], n)
    }
}

/// A pod sandbox's network. Torn down by [`Sandbox::teardown`] or on drop.
#[derive(Debug)]
pub struct Sandbox {
    name: String,
    net: Option<PodNet>,
}

#[derive(Debug)]
struct PodNet {
    netns: String,
    path: PathBuf,
    host_if: String,
    ip: Ipv4Addr,
    index: u8,
    /// What made it, and removes it.
    ops: &'static dyn NetOps,
}

impl std::fmt::Debug for dyn NetOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NetOps")
    }
}

/// Keeps pod traffic on the host: an `unreachable` route for the whole pod range, below the
/// per-pod /32 routes. A connection to the address of a pod that is gone fails at once with
/// "no route to host" instead of following the default route off the machine.
struct RangeFence(OnceLock<()>);

impl RangeFence {
    const fn new() -> Self {
        RangeFence(OnceLock::new())
    }

    fn install(&self, config: &NetworkConfig) {
        self.0.get_or_init(|| {
            let range = format!("{}/24", config.base);
            if let Err(e) = ip(&["route", "replace", "unreachable", &range]) {
                tracing::warn!(error = %e, range, "cannot fence the pod address range");
            }
        });
    }
}

fn ip(args: &[&str]) -> Result<String, SandboxError> {
    let mut argv = vec!["ip"];
    argv.extend_from_slice(args);
    let owned = || argv.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let out = run_helper_blocking(&argv).map_err(|source| SandboxError::Spawn {
        argv: owned(),
        source,
    })?;
    if out.status != ExitStatus::Code(0) {
        return Err(SandboxError::Command {
            argv: owned(),
            reason: format!(
                "{:?}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The privileged network operations a sandbox needs, as iproute2 commands (`args` are `ip`'s
/// arguments; the result is its standard output): the seam between the sandbox's logic (address
/// claim, set-up order, teardown on failure) and the kernel, so that the logic is tested without
/// root against a fake (the way youki puts syscalls behind its `Syscall` trait).
///
/// Errors: [`SandboxError::Command`] when the operation fails, [`SandboxError::Spawn`] when it
/// cannot be run.
pub trait NetOps: Send + Sync {
    /// Runs `ip ARGS...`.
    fn ip(&self, args: &[&str]) -> Result<String, SandboxError>;
}

/// The real [`NetOps`]: iproute2's `ip`, run through podgrace's own spawner and reaper.
#[derive(Debug, Clone, Copy, Default)]
pub struct IpCommand;

impl NetOps for IpCommand {
    fn ip(&self, args: &[&str]) -> Result<String, SandboxError> {
        ip(args)
    }
}

const PREFIX: &str = "podgrace-";

/// Removes namespaces (and their veth pairs) left by podgrace processes that no longer run.
/// Returns the names removed.
pub fn cleanup_stale() -> Vec<String> {
    remove_namespaces(|owner| !Path::new(&format!("/proc/{owner}")).exists())
}

/// Removes the network namespaces and veth pairs of this process's own pods, for a process that
/// is about to exit without tearing its sandboxes down one by one (an interrupted drill). Returns
/// the namespaces removed. Processes still inside them die with podgrace (their death signal).
///
/// No sandbox is made after it: one being made meanwhile is finished first (so that it is
/// removed too), and later [`Sandbox::create`] calls fail with [`SandboxError::Closed`].
pub fn teardown_own() -> Vec<String> {
    let _guard = allocation_lock().lock().unwrap_or_else(|p| p.into_inner());
    CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
    let me = std::process::id();
    remove_namespaces(|owner| owner == me)
}

/// Set by [`teardown_own`].
static CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Removes every podgrace namespace whose owner pid matches `remove`, with its host veth.
fn remove_namespaces(remove: impl Fn(u32) -> bool) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(list) = ip(&["netns", "list"]) else {
        return removed;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let mut parts = rest.splitn(2, '-');
        let (Some(n), Some(owner)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(owner) = owner.parse::<u32>() else {
            continue;
        };
        if !remove(owner) {
            continue;
        }
        let _ = ip(&["netns", "del", name]);
        let _ = ip(&["link", "del", &format!("pgh{n}")]);
        removed.push(name.to_string());
    }
    removed
}

/// The pod indexes to try, in order: round robin from the one after `last` (the index handed
/// out last, by any podgrace process), wrapping around to 2; every index 2..=254 once.
///
/// Mirrors the CNI host-local IPAM plugin (containernetworking/plugins,
/// `plugins/ipam/host-local/backend/allocator`: `IPAllocator.GetIter` starts after the range's
/// `lastReservedIP`), the default of kubenet and of most kubeadm CNI setups: an address that
/// was just released is handed out again only after every other free one.
fn candidates(last: Option<u8>) -> impl Iterator<Item = u8> {
    let start = match last {
        Some(l) if (2..254).contains(&l) => l + 1,
        _ => 2,
    };
    (start..=254).chain(2..start)
}

/// Where the last index handed out in `config`'s range is kept: one small file per range
/// under `/run` (tmpfs; gone at reboot, as the host-local plugin's state under `/run` is).
fn last_reserved_path(config: &NetworkConfig) -> PathBuf {
    PathBuf::from(format!("/run/podgrace/last_reserved_ip.{}", config.base))
}

/// The last index handed out in the range, if it was recorded.
fn last_reserved(config: &NetworkConfig) -> Option<u8> {
    std::fs::read_to_string(last_reserved_path(config))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Records `n` as the last index handed out. A failure only costs the round robin (the veth
/// claim stays atomic), so it is logged, not returned.
fn set_last_reserved(config: &NetworkConfig, n: u8) {
    let path = last_reserved_path(config);
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = PathBuf::from(format!("{}.tmp{}", path.display(), std::process::id()));
        std::fs::write(&tmp, format!("{n}\n"))?;
        std::fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        tracing::debug!(error = %e, path = %path.display(), "cannot record the last pod address");
    }
}

fn allocation_lock() -> &'static Mutex<()> {
    static L: OnceLock<Mutex<()>> = OnceLock::new();
    L.get_or_init(|| Mutex::new(()))
}

impl Sandbox {
    /// Creates the network of pod `name`: a namespace with its own address, or none for
    /// `host_network` or when namespaces are not permitted (one warning per process).
    /// Blocking (runs `ip` a few times, some milliseconds each).
    /// Errors: [`SandboxError::Command`] when an `ip` step fails after the namespace was made,
    /// [`SandboxError::AllocateAddress`].
    pub fn create(
        name: &str,
        host_network: bool,
        config: &NetworkConfig,
    ) -> Result<Sandbox, SandboxError> {
        if host_network {
            return Ok(Sandbox {
                name: name.into(),
                net: None,
            });
        }
        // Everything below is made under the lock, so that teardown_own sees all of it.
        let _guard = allocation_lock().lock().unwrap_or_else(|p| p.into_inner());
        if CLOSED.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(SandboxError::Closed);
        }
        static STALE: OnceLock<()> = OnceLock::new();
        STALE.get_or_init(|| {
            for n in cleanup_stale() {
                tracing::info!(netns = %n, "removed stale podgrace network namespace");
            }
        });
        static PERMITTED: OnceLock<bool> = OnceLock::new();
        let permitted = *PERMITTED.get_or_init(|| {
            let probe = format!("{PREFIX}probe-{}", std::process::id());
            match ip(&["netns", "add", &probe]) {
                Ok(_) => {
                    let _ = ip(&["netns", "del", &probe]);
                    true
                }
                Err(e) => {
                    // The verb warns the user once (no namespaces without root): a detail here.
                    tracing::info!(error = %e, "pod networking: cannot create network namespaces; pods use the host network");
                    false
                }
            }
        });
        if !permitted {
            return Ok(Sandbox {
                name: name.into(),
                net: None,
            });
        }
        static FENCE: RangeFence = RangeFence::new();
        FENCE.install(config);
        let sb = Sandbox::build(
            &IpCommand,
            name,
            config,
            last_reserved(config),
            std::process::id(),
        )?;
        if let Some(n) = sb.index() {
            set_last_reserved(config, n);
        }
        Ok(sb)
    }

    /// The set-up of a pod network through `ops`, after the address range is fenced: claims the
    /// first free index after `last` (creating the host veth fails when another process holds
    /// it), then makes the namespace `podgrace-<n>-<owner>`, moves the pod's veth end into it as
    /// `eth0`, and sets addresses and routes; a failing step tears down what was made.
    ///
    /// Errors: [`SandboxError::AllocateAddress`] when every index is taken, the failing step's
    /// error otherwise.
    fn build(
        ops: &'static dyn NetOps,
        name: &str,
        config: &NetworkConfig,
        last: Option<u8>,
        owner: u32,
    ) -> Result<Sandbox, SandboxError> {
        // The search starts after the last index handed out, so a pod that just went does not
        // pass its address on at once (a proxy may still send it traffic for the endpoint lag).
        let mut claimed = None;
        for n in candidates(last) {
            let host_if = format!("pgh{n}");
            if ops
                .ip(&[
                    "link",
                    "add",
                    &host_if,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &format!("pgc{n}"),
                ])
                .is_ok()
            {
                claimed = Some(n);
                break;
            }
        }
        let Some(n) = claimed else {
            return Err(SandboxError::AllocateAddress { base: config.base });
        };
        let netns = format!("{PREFIX}{n}-{owner}");
        let mut sb = Sandbox {
            name: name.into(),
            net: Some(PodNet {
                path: PathBuf::from(format!("/run/netns/{netns}")),
                netns: netns.clone(),
                host_if: format!("pgh{n}"),
                ip: config.addr(n),
                index: n,
                ops,
            }),
        };
        let host_ip = format!("{}", config.addr(1));
        let pod_ip = format!("{}", config.addr(n));
        let pod_if = format!("pgc{n}");
        let host_if = format!("pgh{n}");
        let (pod_cidr, host_cidr) = (format!("{pod_ip}/32"), format!("{host_ip}/32"));
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &netns],
            vec!["link", "set", &pod_if, "netns", &netns],
            vec!["-n", &netns, "link", "set", &pod_if, "name", "eth0"],
            vec!["-n", &netns, "link", "set", "lo", "up"],
            vec!["-n", &netns, "addr", "add", &pod_cidr, "dev", "eth0"],
            vec!["-n", &netns, "link", "set", "eth0", "up"],
            vec![
                "-n", &netns, "route", "add", &host_cidr, "dev", "eth0", "scope", "link",
            ],
            vec!["addr", "add", &host_cidr, "dev", &host_if],
            vec!["link", "set", &host_if, "up"],
            vec!["route", "add", &pod_cidr, "dev", &host_if, "src", &host_ip],
        ];
        for step in steps {
            if let Err(e) = ops.ip(&step) {
                sb.teardown();
                return Err(e);
            }
        }
        tracing::debug!(pod = %name, %pod_ip, %netns, "pod sandbox network ready");
        Ok(sb)
    }

    /// The pod's index in the range (its address is `<base>.<index>`), `None` on the host
    /// network.
    fn index(&self) -> Option<u8> {
        self.net.as_ref().map(|n| n.index)
    }

    /// The pod's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pod IP, `None` on the host network.
    pub fn ip(&self) -> Option<Ipv4Addr> {
        self.net.as_ref().map(|n| n.ip)
    }

    /// The network namespace file containers join (`/run/netns/<name>`), `None` on the host
    /// network.
    pub fn netns_path(&self) -> Option<&Path> {
        self.net.as_ref().map(|n| n.path.as_path())
    }

    /// Deletes the namespace and the veth pair (idempotent, errors logged).
    pub fn teardown(&mut self) {
        if let Some(net) = self.net.take() {
            // Already gone when an interrupted podgrace removed its namespaces at once.
            if let Err(e) = net.ops.ip(&["netns", "del", &net.netns]) {
                // Removed meanwhile by an interrupted podgrace's teardown_own: nothing to do.
                if net.path.exists() {
                    tracing::warn!(error = %e, "pod sandbox: deleting the network namespace");
                }
            }
            // Normally gone with the namespace (its peer lived there).
            let _ = net.ops.ip(&["link", "del", &net.host_if]);
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_range_is_one_kubernetes_accepts_and_special_ranges_are_refused() {
        let d = NetworkConfig::default();
        assert_eq!(d.base, Ipv4Addr::new(198, 18, 77, 0));
        assert_eq!(DEFAULT_POD_NETWORK.parse::<NetworkConfig>(), Ok(d.clone()));
        assert!(podgrace_core::rules::validation::validate_endpoint_ip(
            &d.addr(254).to_string(),
            "ip"
        )
        .is_empty());
        let err = "169.254.77.0/24".parse::<NetworkConfig>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "169.254.77.0/24: pod addresses such as 169.254.77.2 are rejected by kube-apiserver in Endpoints and EndpointSlices, so a Service would never route to these pods: endpoints[0].addresses[0]: Invalid value: \"169.254.77.2\": may not be in the link-local range (169.254.0.0/16, fe80::/10); use a range such as 198.18.77.0/24 (198.18.0.0/15, RFC 2544)"
        );
        assert!(matches!(
            "127.0.5.0/24".parse::<NetworkConfig>(),
            Err(PodNetworkError::Special { .. })
        ));
        assert!(matches!(
            "224.0.0.0/24".parse::<NetworkConfig>(),
            Err(PodNetworkError::NotUnicast(_))
        ));
        assert!(matches!(
            "10.1.2.0/16".parse::<NetworkConfig>(),
            Err(PodNetworkError::Prefix(_))
        ));
        assert!(matches!(
            "10.1.2.3/24".parse::<NetworkConfig>(),
            Err(PodNetworkError::HostPart(_))
        ));
        assert!("10.1.2.0/24".parse::<NetworkConfig>().is_ok());
    }

    /// A fake kernel: records every `ip` call; `link add pgh<N>` fails for the indexes in
    /// `taken` (held by another process), and the first call containing `fail` fails.
    struct FakeNet {
        calls: Mutex<Vec<String>>,
        taken: Vec<u8>,
        fail: Option<&'static str>,
    }

    impl NetOps for FakeNet {
        fn ip(&self, args: &[&str]) -> Result<String, SandboxError> {
            let call = args.join(" ");
            self.calls.lock().unwrap().push(call.clone());
            let taken = self
                .taken
                .iter()
                .any(|n| call.starts_with(&format!("link add pgh{n} ")));
            if taken || self.fail.is_some_and(|f| call.contains(f)) {
                return Err(SandboxError::Command {
                    argv: args.iter().map(|a| a.to_string()).collect(),
                    reason: "RTNETLINK answers: File exists".into(),
                });
            }
            Ok(String::new())
        }
    }

    fn fake(taken: Vec<u8>, fail: Option<&'static str>) -> &'static FakeNet {
        Box::leak(Box::new(FakeNet {
            calls: Mutex::new(Vec::new()),
            taken,
            fail,
        }))
    }

    fn calls(f: &FakeNet) -> Vec<String> {
        f.calls.lock().unwrap().clone()
    }

    #[test]
    fn a_pod_network_claims_the_next_free_index_and_is_set_up_then_removed_in_order() {
        let net = fake(vec![8], None);
        let config = NetworkConfig::default();
        let mut sb = Sandbox::build(net, "web", &config, Some(7), 42).unwrap();
        assert_eq!(sb.ip(), Some(Ipv4Addr::new(198, 18, 77, 9)));
        assert_eq!(sb.netns_path(), Some(Path::new("/run/netns/podgrace-9-42")));
        assert_eq!(
            calls(net),
            [
                "link add pgh8 type veth peer name pgc8",
                "link add pgh9 type veth peer name pgc9",
                "netns add podgrace-9-42",
                "link set pgc9 netns podgrace-9-42",
                "-n podgrace-9-42 link set pgc9 name eth0",
                "-n podgrace-9-42 link set lo up",
                "-n podgrace-9-42 addr add 198.18.77.9/32 dev eth0",
                "-n podgrace-9-42 link set eth0 up",
                "-n podgrace-9-42 route add 198.18.77.1/32 dev eth0 scope link",
                "addr add 198.18.77.1/32 dev pgh9",
                "link set pgh9 up",
                "route add 198.18.77.9/32 dev pgh9 src 198.18.77.1",
            ]
        );
        sb.teardown();
        sb.teardown();
        let all = calls(net);
        assert_eq!(all[12..], ["netns del podgrace-9-42", "link del pgh9"]);
    }

    #[test]
    fn a_failing_step_removes_what_was_made_and_returns_its_error() {
        let net = fake(vec![], Some("addr add 198.18.77.2/32"));
        let err = Sandbox::build(net, "web", &NetworkConfig::default(), None, 42).unwrap_err();
        assert!(err.to_string().contains("File exists"), "{err}");
        let all = calls(net);
        assert_eq!(
            all[all.len() - 3..],
            [
                "-n podgrace-2-42 addr add 198.18.77.2/32 dev eth0",
                "netns del podgrace-2-42",
                "link del pgh2",
            ]
        );
    }

    #[test]
    fn a_full_range_is_an_allocation_error_without_a_namespace() {
        let net = fake((2..=254).collect(), None);
        let err = Sandbox::build(net, "web", &NetworkConfig::default(), None, 42).unwrap_err();
        assert!(matches!(err, SandboxError::AllocateAddress { .. }), "{err}");
        assert_eq!(calls(net).len(), 253);
        assert!(calls(net).iter().all(|c| c.starts_with("link add pgh")));
    }

    #[test]
    fn addresses_are_handed_out_round_robin_after_the_last_one() {
        let all: Vec<u8> = candidates(None).collect();
        assert_eq!(all, (2..=254).collect::<Vec<u8>>());
        let after_7: Vec<u8> = candidates(Some(7)).collect();
        assert_eq!(after_7[..3], [8, 9, 10]);
        assert_eq!(after_7.last(), Some(&7));
        assert_eq!(after_7.len(), 253);
        // The last index wraps around to the first; nonsense falls back to the start.
        assert_eq!(candidates(Some(254)).next(), Some(2));
        assert_eq!(candidates(Some(0)).next(), Some(2));
        assert_eq!(candidates(Some(255)).next(), Some(2));
        assert_eq!(candidates(Some(253)).take(2).collect::<Vec<_>>(), [254, 2]);
    }
}
