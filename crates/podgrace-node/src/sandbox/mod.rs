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
//! plugin does (`candidates`): a released address is reused last, not next. Within a process
//! an index allocator ([`Allocator`]) hands each index to one pod at a time; across processes
//! creating the host veth `pgh<n>` is the claim (the kernel refuses a second one with EEXIST).
//! The allocator's lock is held for the claim only (microseconds), never across a set-up, so
//! any number of pod networks are made at once.
//!
//! Made through rtnetlink ([`Netlink`], the real [`NetOps`]; `/run/netns` bind mounts as
//! `ip netns add` makes them), about a dozen kernel requests per pod and no process started;
//! the set-up's logic (claim, order, teardown of what was made) is unit-tested against a fake
//! [`NetOps`]. `hostNetwork` pods get no namespace. Without the privilege to create namespaces
//! every pod falls back to the host network with one warning. Stale namespaces of dead podgrace
//! processes are removed before the first sandbox of a process is created.

mod netlink;
#[allow(unsafe_code)] // unshare(CLONE_NEWNET) on a thread of its own
mod netns;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, RwLock};

pub use netlink::Netlink;

/// Errors of the sandbox module.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A set-up or teardown step failed; `step` is what it does, in iproute2's syntax
    /// (`-n podgrace-9-42 addr add 198.18.77.9/32 dev eth0`), `source` the kernel's error.
    #[error("{step}: {source}")]
    Net {
        /// The step, as the iproute2 command that does the same.
        step: String,
        /// The kernel's error.
        source: std::io::Error,
    },
    /// The blocking task that makes the network could not run (the runtime is shutting down).
    #[error("pod network task: {reason}")]
    Task {
        /// The join error.
        reason: String,
    },
    /// Every index 2..=254 of the range is held (by this process or another).
    #[error("no free pod address left in {base}/24")]
    AllocateAddress {
        /// The range's network address.
        base: Ipv4Addr,
    },
    /// [`teardown_own`] has run: this process is exiting and makes no new sandbox.
    #[error("podgrace is exiting: no new pod network is made")]
    Closed,
}

impl SandboxError {
    /// Whether the step failed because what it makes exists already (EEXIST).
    fn already_exists(&self) -> bool {
        matches!(self, SandboxError::Net { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists)
    }

    /// Whether the step failed because what it removes is not there (ENOENT, ENODEV).
    fn not_found(&self) -> bool {
        matches!(self, SandboxError::Net { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound
                || source.raw_os_error() == Some(rustix::io::Errno::NODEV.raw_os_error()))
    }
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
    /// The network address `A.B.C.0`; pods get `.2` to `.254`, the host side `.1`.
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
    /// Not an IPv4 CIDR (`A.B.C.0/24`); the second field is the CIDR parser's reason.
    #[error("expected A.B.C.0/24, got {0:?}: {1}")]
    Syntax(String, String),
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
        /// The range as given.
        range: String,
        /// A pod address of it that kube-apiserver rejects.
        example: Ipv4Addr,
        /// `ValidateEndpointIP`'s message for it.
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
        let net: ipnet::Ipv4Net = s.parse().map_err(|e: ipnet::AddrParseError| {
            PodNetworkError::Syntax(s.to_string(), e.to_string())
        })?;
        if net.prefix_len() != 24 {
            return Err(PodNetworkError::Prefix(net.prefix_len().to_string()));
        }
        if net.addr() != net.network() {
            return Err(PodNetworkError::HostPart(s.to_string()));
        }
        let base = net.network();
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
    /// Whether the veth pair was made (the index claimed across processes): only then is
    /// `pgh<index>` this sandbox's to delete.
    veth_made: bool,
    /// Whether the namespace was made.
    netns_made: bool,
    /// What made it, and removes it.
    ops: &'static dyn NetOps,
    /// Who handed out `index`, and takes it back.
    alloc: &'static Allocator,
}

impl std::fmt::Debug for dyn NetOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NetOps")
    }
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Allocator")
    }
}

/// One privileged operation of a pod network's set-up or teardown, shown (`Display`) in the
/// syntax of the iproute2 command that does the same (`link add pgh9 type veth peer name pgc9`).
/// Addresses and routes are /32; routes are in the main table, scope link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetStep {
    /// A veth pair: `host` in the current namespace, `peer` made directly inside the named
    /// namespace `netns` (the kernel creates it there: no move between namespaces, whose
    /// `dev_change_net_namespace` waits for RCU grace periods under the RTNL lock, 30-45 ms
    /// on this machine, during which no other pod network can be changed). Fails with
    /// `AlreadyExists` when `host` is taken: the cross-process address claim.
    AddVeth {
        /// The end that stays on the host (`pghN`).
        host: String,
        /// The pod's end (`eth0`), made in `netns`.
        peer: String,
        /// The namespace the pod's end is made in.
        netns: String,
    },
    /// The named network namespace `/run/netns/<name>`.
    AddNetns {
        /// The namespace's name (`podgrace-N-OWNER`).
        name: String,
    },
    /// Sets `link` up.
    LinkUp {
        /// The interface.
        link: String,
    },
    /// Waits until `link` is operationally up (the kernel's link watch, asynchronous to
    /// [`NetStep::LinkUp`], has attached its queue: until then what is sent through it is
    /// dropped). Fails with `TimedOut`.
    WaitUp {
        /// The interface.
        link: String,
    },
    /// Adds `addr/32` to `link`.
    AddAddress {
        /// The interface.
        link: String,
        /// The address, with prefix length 32.
        addr: Ipv4Addr,
    },
    /// A route to `dest/32` through `link` (scope link), from `src` when given.
    AddRoute {
        /// The destination host.
        dest: Ipv4Addr,
        /// The interface it is reached through.
        link: String,
        /// The preferred source address.
        src: Option<Ipv4Addr>,
    },
    /// An `unreachable` route for the whole `base/24` (added or replaced).
    FenceRange {
        /// The range's network address.
        base: Ipv4Addr,
    },
    /// Deletes `link` (a veth goes with its peer). Fails with `NotFound`/ENODEV when absent.
    DelLink {
        /// The interface.
        link: String,
    },
    /// Deletes the named namespace. Fails with `NotFound` when absent.
    DelNetns {
        /// The namespace's name.
        name: String,
    },
}

impl std::fmt::Display for NetStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetStep::AddVeth { host, peer, netns } => {
                write!(
                    f,
                    "link add {host} type veth peer name {peer} netns {netns}"
                )
            }
            NetStep::AddNetns { name } => write!(f, "netns add {name}"),
            NetStep::LinkUp { link } => write!(f, "link set {link} up"),
            NetStep::WaitUp { link } => write!(f, "link wait {link} operstate up"),
            NetStep::AddAddress { link, addr } => write!(f, "addr add {addr}/32 dev {link}"),
            NetStep::AddRoute { dest, link, src } => {
                write!(f, "route add {dest}/32 dev {link} scope link")?;
                match src {
                    Some(src) => write!(f, " src {src}"),
                    None => Ok(()),
                }
            }
            NetStep::FenceRange { base } => write!(f, "route replace unreachable {base}/24"),
            NetStep::DelLink { link } => write!(f, "link del {link}"),
            NetStep::DelNetns { name } => write!(f, "netns del {name}"),
        }
    }
}

impl NetStep {
    /// The step as `ip` would be given it, with `-n <netns>` when it runs in a namespace.
    fn render(&self, in_netns: Option<&str>) -> String {
        match in_netns {
            Some(ns) => format!("-n {ns} {self}"),
            None => self.to_string(),
        }
    }
}

/// The privileged network operations a sandbox needs: the seam between the sandbox's logic
/// (address claim, set-up order, teardown of what was made) and the kernel, so that the logic
/// is tested without root against a fake (the way youki puts syscalls behind its `Syscall`
/// trait). The real one is [`Netlink`].
pub trait NetOps: Send + Sync {
    /// Carries out `steps` in order inside the network namespace `/run/netns/<netns>` (`None`:
    /// the host's), stopping at the first that fails.
    ///
    /// Errors: [`SandboxError::Net`] naming the failing step, with the kernel's error
    /// (`AlreadyExists` for a name that is taken, `NotFound` or ENODEV for one that is absent).
    fn apply(&self, netns: Option<&str>, steps: &[NetStep]) -> Result<(), SandboxError>;
}

/// Hands out pod indexes 2..=254 within this process, one pod at a time each, round robin
/// after the last one handed out (recorded for other podgrace processes too, when
/// `shared_last`). Its lock is held only to pick an index (a scan of 253 flags and the record's
/// small file), never while a network is made.
struct Allocator {
    state: Mutex<AllocState>,
    /// Whether the last index is read from and written to `/run/podgrace` (the real
    /// allocator), or kept in memory only (unit tests).
    shared_last: bool,
}

struct AllocState {
    held: [bool; 256],
    last: Option<u8>,
}

impl Allocator {
    const fn new(shared_last: bool) -> Self {
        Allocator {
            state: Mutex::new(AllocState {
                held: [false; 256],
                last: None,
            }),
            shared_last,
        }
    }

    /// The first index after `after` (or after the last one handed out, by any process when
    /// recorded; see `candidates`) that this process does not hold, now held and recorded as
    /// the last; `None` when this process holds them all.
    fn claim(&self, config: &NetworkConfig, after: Option<u8>) -> Option<u8> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let after = after
            .or_else(|| self.shared_last.then(|| last_reserved(config)).flatten())
            .or(st.last);
        let n = candidates(after).find(|n| !st.held[usize::from(*n)])?;
        st.held[usize::from(n)] = true;
        st.last = Some(n);
        if self.shared_last {
            set_last_reserved(config, n);
        }
        Some(n)
    }

    /// Gives `n` back.
    fn release(&self, n: u8) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).held[usize::from(n)] = false;
    }

    /// Whether this process holds `n`.
    fn holds(&self, n: u8) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).held[usize::from(n)]
    }
}

/// This process's pod indexes.
static ALLOCATOR: Allocator = Allocator::new(true);

/// Shared by every set-up and teardown in flight (they never wait for each other), taken
/// exclusively by [`teardown_own`], which so sees every sandbox that is being made finished.
static BUILDING: RwLock<()> = RwLock::new(());

/// Set by [`teardown_own`].
static CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

const PREFIX: &str = "podgrace-";

/// The pod index and owner pid of a podgrace namespace name (`podgrace-<n>-<pid>`).
fn parse_netns(name: &str) -> Option<(u8, u32)> {
    let (n, owner) = name.strip_prefix(PREFIX)?.split_once('-')?;
    Some((n.parse().ok()?, owner.parse().ok()?))
}

/// Removes namespaces left by podgrace processes that no longer run (a pod's veth pair goes
/// with its namespace). Returns the names removed. A veth pair of a dead process that never got
/// its namespace is left alone: its name may already be another process's claim.
pub fn cleanup_stale() -> Vec<String> {
    let mut removed = Vec::new();
    for name in netns::list() {
        let Some((_, owner)) = parse_netns(&name) else {
            continue;
        };
        if Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        let del = NetStep::DelNetns { name: name.clone() };
        if Netlink.apply(None, &[del]).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// Removes the network namespaces and veth pairs of this process's own pods, for a process that
/// is about to exit without tearing its sandboxes down one by one (an interrupted drill). Returns
/// the namespaces removed. Processes still inside them die with podgrace (their death signal).
///
/// No sandbox is made after it: those being made or torn down meanwhile are finished first (so
/// that they are removed too), and later [`Sandbox::create`] calls fail with
/// [`SandboxError::Closed`].
pub fn teardown_own() -> Vec<String> {
    let _all = BUILDING.write().unwrap_or_else(|p| p.into_inner());
    CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
    let me = std::process::id();
    let mut removed = Vec::new();
    for name in netns::list() {
        let Some((n, owner)) = parse_netns(&name) else {
            continue;
        };
        if owner != me {
            continue;
        }
        // The host end first: deleting a veth removes its pair at once, while a namespace's
        // devices go only when the kernel cleans the namespace up, later.
        if ALLOCATOR.holds(n) {
            let _ = Netlink.apply(
                None,
                &[NetStep::DelLink {
                    link: format!("pgh{n}"),
                }],
            );
        }
        let _ = Netlink.apply(None, &[NetStep::DelNetns { name: name.clone() }]);
        removed.push(name);
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

impl Sandbox {
    /// Creates the network of pod `name`: a namespace with its own address, or none for
    /// `host_network` or when namespaces are not permitted (one warning per process).
    /// Blocking: about a dozen rtnetlink requests and two short-lived threads, well under a
    /// millisecond of work; sandboxes made at the same time do not wait for each other.
    /// Errors: [`SandboxError::Net`] when a step fails (what was made is removed again),
    /// [`SandboxError::AllocateAddress`], [`SandboxError::Closed`].
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
        // Shared: only teardown_own waits for it, so that it sees all of this set-up.
        let _building = BUILDING.read().unwrap_or_else(|p| p.into_inner());
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
            let name = format!("{PREFIX}probe-{}", std::process::id());
            let probe = NetStep::AddNetns { name: name.clone() };
            match Netlink.apply(None, &[probe]) {
                Ok(()) => {
                    let _ = Netlink.apply(None, &[NetStep::DelNetns { name }]);
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
        static FENCE: OnceLock<()> = OnceLock::new();
        FENCE.get_or_init(|| {
            let fence = NetStep::FenceRange { base: config.base };
            if let Err(e) = Netlink.apply(None, &[fence]) {
                tracing::warn!(error = %e, "cannot fence the pod address range");
            }
        });
        Sandbox::build(&Netlink, &ALLOCATOR, name, config, None, std::process::id())
    }

    /// The set-up of a pod network through `ops`, after the address range is fenced: claims the
    /// first index (after `after`, or after the last one handed out) that `alloc` hands out and
    /// no other process holds: makes the namespace `podgrace-<n>-<owner>`, then the veth pair
    /// `pgh<n>` with its pod end made inside it as `eth0` (creating the host end fails when
    /// another process holds `n`; the namespace is deleted again and the next index tried), and
    /// sets addresses and routes; a failing step tears down what was made.
    ///
    /// Errors: [`SandboxError::AllocateAddress`] when every index is taken, the failing step's
    /// error otherwise.
    fn build(
        ops: &'static dyn NetOps,
        alloc: &'static Allocator,
        name: &str,
        config: &NetworkConfig,
        mut after: Option<u8>,
        owner: u32,
    ) -> Result<Sandbox, SandboxError> {
        // The search starts after the last index handed out, so a pod that just went does not
        // pass its address on at once (a proxy may still send it traffic for the endpoint lag).
        // The index is claimed in the process by `alloc`, across processes by the host veth
        // `pgh<n>`, made with its pod end inside the namespace, so the namespace comes first.
        let mut claimed = None;
        for _ in 0..253 {
            let Some(n) = alloc.claim(config, after) else {
                break;
            };
            let netns = format!("{PREFIX}{n}-{owner}");
            let mut made = Sandbox {
                name: name.into(),
                net: Some(PodNet {
                    path: PathBuf::from(format!("/run/netns/{netns}")),
                    netns: netns.clone(),
                    host_if: format!("pgh{n}"),
                    ip: config.addr(n),
                    index: n,
                    veth_made: false,
                    netns_made: false,
                    ops,
                    alloc,
                }),
            };
            let made_here = ops
                .apply(
                    None,
                    &[NetStep::AddNetns {
                        name: netns.clone(),
                    }],
                )
                .and_then(|()| {
                    if let Some(net) = made.net.as_mut() {
                        net.netns_made = true;
                    }
                    ops.apply(
                        None,
                        &[NetStep::AddVeth {
                            host: format!("pgh{n}"),
                            peer: "eth0".into(),
                            netns: netns.clone(),
                        }],
                    )
                });
            match made_here {
                Ok(()) => {
                    if let Some(net) = made.net.as_mut() {
                        net.veth_made = true;
                    }
                    claimed = Some((made, n, netns));
                    break;
                }
                // Another process holds this index: try the next one.
                Err(e) if e.already_exists() && made.net.as_ref().is_some_and(|n| n.netns_made) => {
                    made.remove();
                    after = Some(n);
                }
                Err(e) => {
                    made.remove();
                    return Err(e);
                }
            }
        }
        let Some((mut sb, n, netns)) = claimed else {
            return Err(SandboxError::AllocateAddress { base: config.base });
        };
        let host_ip = config.addr(1);
        let pod_ip = config.addr(n);
        let host_if = format!("pgh{n}");
        let eth0 = || "eth0".to_string();
        let host_if_up = host_if.clone();
        let made = ops
            .apply(
                None,
                &[
                    NetStep::AddAddress {
                        link: host_if.clone(),
                        addr: host_ip,
                    },
                    NetStep::LinkUp {
                        link: host_if.clone(),
                    },
                    NetStep::AddRoute {
                        dest: pod_ip,
                        link: host_if.clone(),
                        src: Some(host_ip),
                    },
                ],
            )
            .and_then(|()| {
                ops.apply(
                    Some(&netns),
                    &[
                        NetStep::LinkUp { link: "lo".into() },
                        NetStep::AddAddress {
                            link: eth0(),
                            addr: pod_ip,
                        },
                        NetStep::LinkUp { link: eth0() },
                        NetStep::AddRoute {
                            dest: host_ip,
                            link: eth0(),
                            src: None,
                        },
                        NetStep::WaitUp { link: eth0() },
                    ],
                )
            })
            .and_then(|()| ops.apply(None, &[NetStep::WaitUp { link: host_if_up }]));
        if let Err(e) = made {
            sb.remove();
            return Err(e);
        }
        tracing::debug!(pod = %name, %pod_ip, %netns, "pod sandbox network ready");
        Ok(sb)
    }

    /// The pod's index in the range (its address is `<base>.<index>`), `None` on the host
    /// network.
    #[cfg(test)]
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

    /// Deletes what was made of the network, and only that: the veth pair (its host end, which
    /// takes the pod end with it at once), then the namespace if it was made; then the index is
    /// free again. Idempotent; a step that finds its object already gone is no error, others
    /// are logged. After [`teardown_own`] it does nothing: that removed everything already, and
    /// `pgh<n>` may be another process's by now.
    pub fn teardown(&mut self) {
        if self.net.is_none() {
            return;
        }
        let _building = BUILDING.read().unwrap_or_else(|p| p.into_inner());
        self.remove();
    }

    /// [`Sandbox::teardown`]'s work, for a caller that holds `BUILDING` already (a failed
    /// set-up: a second read lock could wait behind a waiting [`teardown_own`] for ever).
    fn remove(&mut self) {
        let Some(net) = self.net.take() else {
            return;
        };
        if !CLOSED.load(std::sync::atomic::Ordering::SeqCst) {
            let mut steps = Vec::new();
            if net.veth_made {
                steps.push((
                    NetStep::DelLink {
                        link: net.host_if.clone(),
                    },
                    "deleting the host veth",
                ));
            }
            if net.netns_made {
                steps.push((
                    NetStep::DelNetns {
                        name: net.netns.clone(),
                    },
                    "deleting the network namespace",
                ));
            }
            for (step, what) in steps {
                match net.ops.apply(None, std::slice::from_ref(&step)) {
                    Err(e) if !e.not_found() => {
                        tracing::warn!(error = %e, pod = %self.name, "pod sandbox: {what}")
                    }
                    _ => {}
                }
            }
        }
        net.alloc.release(net.index);
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
        for bad in [
            "10.1.2.0",
            "10.1.2/24",
            "10.1.2.0/33",
            "ten/24",
            "10.1.2.0/24x",
        ] {
            assert!(
                matches!(
                    bad.parse::<NetworkConfig>(),
                    Err(PodNetworkError::Syntax(..))
                ),
                "{bad}"
            );
        }
        assert_eq!(
            "10.1.2.0".parse::<NetworkConfig>().unwrap_err().to_string(),
            "expected A.B.C.0/24, got \"10.1.2.0\": invalid IP address syntax"
        );
    }

    /// A fake kernel: records every step (as `ip` arguments, `-n <netns>` for a namespace's);
    /// `link add pgh<N>` fails with EEXIST for the indexes in `taken` (held by another
    /// process), and the first step containing `fail` fails with EEXIST too; a step that fails
    /// stops its batch, as the real one does.
    struct FakeNet {
        calls: Mutex<Vec<String>>,
        taken: Vec<u8>,
        fail: Option<&'static str>,
    }

    impl NetOps for FakeNet {
        fn apply(&self, netns: Option<&str>, steps: &[NetStep]) -> Result<(), SandboxError> {
            for step in steps {
                let call = step.render(netns);
                self.calls.lock().unwrap().push(call.clone());
                let taken = self
                    .taken
                    .iter()
                    .any(|n| call.starts_with(&format!("link add pgh{n} ")));
                if taken || self.fail.is_some_and(|f| call.contains(f)) {
                    return Err(SandboxError::Net {
                        step: call,
                        source: std::io::Error::from_raw_os_error(
                            rustix::io::Errno::EXIST.raw_os_error(),
                        ),
                    });
                }
            }
            Ok(())
        }
    }

    fn fake(taken: Vec<u8>, fail: Option<&'static str>) -> &'static FakeNet {
        Box::leak(Box::new(FakeNet {
            calls: Mutex::new(Vec::new()),
            taken,
            fail,
        }))
    }

    fn allocator() -> &'static Allocator {
        Box::leak(Box::new(Allocator::new(false)))
    }

    fn calls(f: &FakeNet) -> Vec<String> {
        f.calls.lock().unwrap().clone()
    }

    #[test]
    fn a_pod_network_claims_the_next_free_index_and_is_set_up_then_removed_in_order() {
        let net = fake(vec![8], None);
        let alloc = allocator();
        let config = NetworkConfig::default();
        let mut sb = Sandbox::build(net, alloc, "web", &config, Some(7), 42).unwrap();
        assert_eq!(sb.ip(), Some(Ipv4Addr::new(198, 18, 77, 9)));
        assert_eq!(sb.netns_path(), Some(Path::new("/run/netns/podgrace-9-42")));
        assert_eq!(
            calls(net),
            [
                // 8 is another process's: its pgh8 exists, so our namespace for 8 goes again
                // and pgh8 is left alone.
                "netns add podgrace-8-42",
                "link add pgh8 type veth peer name eth0 netns podgrace-8-42",
                "netns del podgrace-8-42",
                "netns add podgrace-9-42",
                "link add pgh9 type veth peer name eth0 netns podgrace-9-42",
                "addr add 198.18.77.1/32 dev pgh9",
                "link set pgh9 up",
                "route add 198.18.77.9/32 dev pgh9 scope link src 198.18.77.1",
                "-n podgrace-9-42 link set lo up",
                "-n podgrace-9-42 addr add 198.18.77.9/32 dev eth0",
                "-n podgrace-9-42 link set eth0 up",
                "-n podgrace-9-42 route add 198.18.77.1/32 dev eth0 scope link",
                "-n podgrace-9-42 link wait eth0 operstate up",
                "link wait pgh9 operstate up",
            ]
        );
        assert!(alloc.holds(9) && !alloc.holds(8));
        sb.teardown();
        sb.teardown();
        let all = calls(net);
        assert_eq!(all[14..], ["link del pgh9", "netns del podgrace-9-42"]);
        assert!(!alloc.holds(9), "the index is free again");
    }

    #[test]
    fn pods_of_one_process_get_different_indexes_and_a_released_one_comes_back_last() {
        let net = fake(vec![], None);
        let alloc = allocator();
        let config = NetworkConfig::default();
        let a = Sandbox::build(net, alloc, "a", &config, None, 42).unwrap();
        let mut b = Sandbox::build(net, alloc, "b", &config, None, 42).unwrap();
        assert_eq!((a.index(), b.index()), (Some(2), Some(3)));
        b.teardown();
        // 3 is free again, but handed out only after every other index.
        let c = Sandbox::build(net, alloc, "c", &config, None, 42).unwrap();
        assert_eq!(c.index(), Some(4));
    }

    #[test]
    fn a_failing_step_removes_what_was_made_and_returns_its_error() {
        let net = fake(vec![], Some("addr add 198.18.77.2/32"));
        let alloc = allocator();
        let err =
            Sandbox::build(net, alloc, "web", &NetworkConfig::default(), None, 42).unwrap_err();
        assert!(err.to_string().contains("File exists"), "{err}");
        assert!(
            err.to_string()
                .starts_with("-n podgrace-2-42 addr add 198.18.77.2/32 dev eth0: "),
            "{err}"
        );
        let all = calls(net);
        assert_eq!(
            all[all.len() - 3..],
            [
                "-n podgrace-2-42 addr add 198.18.77.2/32 dev eth0",
                "link del pgh2",
                "netns del podgrace-2-42",
            ]
        );
        assert!(!alloc.holds(2));
    }

    #[test]
    fn a_failing_namespace_is_not_deleted_and_no_veth_is_made() {
        let net = fake(vec![], Some("netns add"));
        let alloc = allocator();
        let err =
            Sandbox::build(net, alloc, "web", &NetworkConfig::default(), None, 42).unwrap_err();
        assert!(
            err.to_string().starts_with("netns add podgrace-2-42: "),
            "{err}"
        );
        assert_eq!(calls(net), ["netns add podgrace-2-42"]);
        assert!(!alloc.holds(2));
    }

    #[test]
    fn a_full_range_is_an_allocation_error_and_leaves_no_namespace() {
        let net = fake((2..=254).collect(), None);
        let alloc = allocator();
        let err =
            Sandbox::build(net, alloc, "web", &NetworkConfig::default(), None, 42).unwrap_err();
        assert!(matches!(err, SandboxError::AllocateAddress { .. }), "{err}");
        let all = calls(net);
        assert_eq!(all.len(), 3 * 253);
        assert_eq!(
            all.iter().filter(|c| c.starts_with("link add pgh")).count(),
            253
        );
        // Every namespace made for a taken index is deleted again; no host veth is touched.
        for t in all.chunks(3) {
            assert!(t[0].starts_with("netns add podgrace-"), "{t:?}");
            assert_eq!(t[2], t[0].replace("netns add", "netns del"), "{t:?}");
        }
        assert!((2..=254).all(|n| !alloc.holds(n)));
    }

    #[test]
    fn namespace_names_parse_to_index_and_owner() {
        assert_eq!(parse_netns("podgrace-9-42"), Some((9, 42)));
        assert_eq!(parse_netns("podgrace-probe-42"), None);
        assert_eq!(parse_netns("other-9-42"), None);
        assert_eq!(parse_netns("podgrace-300-42"), None);
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
