//! Service addresses claimed on this machine, so that two `podgrace serve` at once (or a serve
//! and a drill's embedded one) never allocate the same ClusterIP or NodePort.
//!
//! In a cluster the apiserver's allocators (`pkg/registry/core/service/ipallocator` and
//! `portallocator`: bitmaps over `--service-cluster-ip-range` and `--service-node-port-range`,
//! kept in etcd) are the only authority: ClusterIPs are virtual (DNAT rules in each node's own
//! network namespace) and kube-proxy no longer holds NodePort sockets open (v1.36's `pkg/proxy`
//! has no port opener), so the
//! allocators never look at what the host has bound, and two clusters (two kind clusters on one
//! laptop) do not share a network namespace. Here every serve's kube-proxy binds real sockets on
//! this machine's one loopback, so two serves share one address space: each serve's allocator
//! works as upstream's within its own Services, and an address it hands out automatically must
//! also be free on the machine:
//!
//! * claimed by no other serve: one lock file per address (`clusterip-IP.lock`,
//!   `nodeport-PORT.lock`) in [`Claims::dir`], held (`flock`, exclusive) by the serve that
//!   allocated it for as long as one of its Services uses it; the kernel drops the lock when that
//!   serve exits, however it exits;
//! * bound by nothing on the machine (a probe bind of each of the Service's ports on the
//!   ClusterIP, of the NodePort on the node address).
//!
//! A ClusterIP or NodePort the user asks for is checked as upstream checks it (range, and the
//! serve's own Services) and no more: a cluster would not know either.

use std::collections::{BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The machine-wide directory of the lock files when none is configured:
/// `/tmp/podgrace-service-claims` (every serve on this machine must use the same one).
pub const DEFAULT_DIR: &str = "/tmp/podgrace-service-claims";

/// The addresses this serve holds (see the module documentation). Its locks are released when
/// it is dropped, or when no Service of the serve uses them any more ([`Claims::retain`]).
#[derive(Debug)]
pub struct Claims {
    dir: PathBuf,
    node_address: IpAddr,
    held: Mutex<HashMap<String, File>>,
}

/// What a claim is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim<'a> {
    /// A ClusterIP, to be served on `ports` (TCP).
    ClusterIp {
        /// The address.
        ip: Ipv4Addr,
        /// The Service's ports.
        ports: &'a [u16],
    },
    /// A NodePort on the node address.
    NodePort(u16),
}

impl Claim<'_> {
    fn key(&self) -> String {
        match self {
            Claim::ClusterIp { ip, .. } => format!("clusterip-{ip}"),
            Claim::NodePort(p) => format!("nodeport-{p}"),
        }
    }
}

impl Claims {
    /// Claims in `dir` (created, mode 1777 so that serves of other users share it), for NodePorts
    /// served on `node_address`.
    ///
    /// # Errors
    /// The I/O error when `dir` cannot be created.
    pub fn new(dir: &Path, node_address: IpAddr) -> std::io::Result<Claims> {
        std::fs::create_dir_all(dir)?;
        {
            use std::os::unix::fs::PermissionsExt as _;
            // Best effort: a directory another user created keeps its mode.
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
        }
        Ok(Claims {
            dir: dir.to_path_buf(),
            node_address,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// The directory of the lock files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Takes `claim` for this serve when no other serve holds it and nothing on the machine has
    /// bound it; `true` when this serve holds it now (already held counts).
    pub fn try_claim(&self, claim: Claim<'_>) -> bool {
        let key = claim.key();
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.contains_key(&key) {
            return true;
        }
        let Ok(file) = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(format!("{key}.lock")))
        else {
            // No lock to take: only the probe bind decides.
            return self.free_on_machine(claim);
        };
        if file.try_lock().is_err() {
            return false;
        }
        if !self.free_on_machine(claim) {
            return false;
        }
        held.insert(key, file);
        true
    }

    /// Keeps only the claims of addresses this serve's Services still use (`cluster_ips`,
    /// `node_ports`), releasing the others to every serve.
    pub fn retain(&self, cluster_ips: &BTreeSet<Ipv4Addr>, node_ports: &BTreeSet<u16>) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|key, _| {
            if let Some(ip) = key.strip_prefix("clusterip-") {
                ip.parse().is_ok_and(|ip| cluster_ips.contains(&ip))
            } else if let Some(p) = key.strip_prefix("nodeport-") {
                p.parse().is_ok_and(|p| node_ports.contains(&p))
            } else {
                false
            }
        });
    }

    /// How many addresses this serve holds.
    pub fn held(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }

    /// Whether every socket `claim` needs can be bound now.
    fn free_on_machine(&self, claim: Claim<'_>) -> bool {
        let can_bind = |a: SocketAddr| TcpListener::bind(a).is_ok();
        match claim {
            Claim::ClusterIp { ip, ports } => ports
                .iter()
                .all(|p| can_bind(SocketAddr::new(IpAddr::V4(ip), *p))),
            Claim::NodePort(p) => can_bind(SocketAddr::new(self.node_address, p)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "podgrace-claims-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_claim_held_by_one_serve_is_refused_to_another_until_released() {
        let d = dir("two");
        let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let a = Claims::new(&d, local).unwrap();
        let b = Claims::new(&d, local).unwrap();
        let ip = Ipv4Addr::new(127, 96, 200, 1);
        let one = Claim::ClusterIp { ip, ports: &[8080] };
        assert!(a.try_claim(one));
        assert!(a.try_claim(one), "held already");
        assert!(!b.try_claim(one));
        // Released once none of a's Services uses it.
        a.retain(&BTreeSet::new(), &BTreeSet::new());
        assert_eq!(a.held(), 0);
        assert!(b.try_claim(one));
        // Dropping a serve releases everything it held.
        drop(b);
        assert!(a.try_claim(one));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_address_bound_by_another_process_is_not_claimed() {
        let d = dir("bound");
        let c = Claims::new(&d, IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(!c.try_claim(Claim::NodePort(port)));
        drop(l);
        assert!(c.try_claim(Claim::NodePort(port)));
        let l = TcpListener::bind("127.96.201.7:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let ip = Ipv4Addr::new(127, 96, 201, 7);
        assert!(!c.try_claim(Claim::ClusterIp { ip, ports: &[port] }));
        let _ = std::fs::remove_dir_all(&d);
    }
}
