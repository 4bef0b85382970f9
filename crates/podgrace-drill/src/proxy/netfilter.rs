//! kube-proxy mode on the kernel's own netfilter: a NodePort on 127.0.0.1 whose connections the
//! kernel DNATs to the pods, with conntrack pinning each connection to its pod, as kube-proxy in
//! iptables mode programs it. No byte goes through podgrace: the client's own TCP connection
//! reaches the pod, so what it sees is what a client of a real kube-proxy sees (recorded in
//! `cases/real-kube-proxy-1.32.md`):
//! * **refused**: the pod's network namespace still exists but nothing listens on the port (the
//!   app exited): the pod's kernel answers the SYN with RST;
//! * **connect timeout**: the pod's address is gone with its sandbox, yet the rules (not yet
//!   synced) or a conntrack entry still send the SYN there; nothing answers it. A dead pod's
//!   address is routed into a sink of this drill's own (a network namespace with no address, like
//!   a bridge port nobody answers ARP on), so the SYN leaves the host's stack and its conntrack
//!   entry is made, as on a real node;
//! * **EOF / reset on a reused connection** and **pinning**: conntrack keeps a keep-alive
//!   connection on its pod after the endpoint was removed, until the pod closes it;
//! * **stale entries**: an unanswered entry lives 120 s (`nf_conntrack_tcp_timeout_syn_sent`)
//!   and kube-proxy 1.32 clears no TCP entry, so a new connection from a client port that such
//!   an entry holds follows it to the dead pod. The entries are read from `conntrack -E`
//!   ([`Netfilter::pinned`]), which tells each request's pod and such late timeouts
//!   ([`crate::report::Attribution::stale_conntrack`]).
//!
//! Rules, as kube-proxy writes them (`pkg/proxy/iptables/proxier.go` `syncProxyRules`, in our
//! own words and chains): in `nat OUTPUT`, traffic to `127.0.0.1:PORT` jumps to the service chain
//! `PGD-<pid>-<n>`, which picks an endpoint with `-m statistic --mode random --probability 1/k`
//! rules and DNATs to it; in `nat POSTROUTING`, DNAT'd connections of the port are SNAT'd to the
//! host's pod-side address (kube-proxy's masquerade of localhost NodePort traffic). The port is
//! held by a bound, not listening socket (as kube-proxy holds NodePorts), so no other program
//! takes it and, without endpoints, a connection is refused. `route_localnet` is set on the
//! interfaces this drill sends to (kube-proxy sets it host-wide for localhost NodePorts).
//! Everything is written with `iptables-restore --noflush` and `ip`, as kube-proxy does.
//!
//! Isolation: every rule carries the comment `podgrace-drill-<pid>` and every chain and sink the
//! pid, so concurrent drills never touch each other's; at exit the drill removes its own (and its
//! conntrack entries, so that a later drill given the same port follows none of them), and at
//! start it removes those of podgrace processes that are gone.
//!
//! Needs root, `iptables` (nf_tables or legacy) and `conntrack` (conntrack-tools);
//! [`Netfilter::available`] says why not. Without them kube-proxy mode falls back to the
//! user-space TCP splice ([`super::Mode::Tcp`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustix::fd::OwnedFd;
use tokio::time::Instant;

use super::PinnedConnection;
use crate::endpoints::{RouteSink, Routes};

/// Why kube-proxy mode cannot use the kernel's netfilter.
#[derive(Debug, thiserror::Error)]
pub enum NetfilterError {
    /// `iptables` or `conntrack` cannot be run.
    #[error("{tool} is not usable ({reason}); install Debian's iptables and conntrack packages")]
    Missing {
        /// `iptables` or `conntrack`.
        tool: &'static str,
        /// Why it cannot be run.
        reason: String,
    },
    /// A command failed.
    #[error("{argv}: {reason}")]
    Command {
        /// The command line.
        argv: String,
        /// What went wrong: its spawn error, exit status or stderr.
        reason: String,
    },
    /// A NodePort on 127.0.0.1 could not be bound to hold it.
    #[error("cannot hold a NodePort on 127.0.0.1: {0}")]
    Port(std::io::Error),
}

/// The comment on every rule of this process.
fn comment(pid: u32) -> String {
    format!("podgrace-drill-{pid}")
}

/// Runs `argv` (with `stdin`) to completion; its stdout, or why it failed.
fn run(argv: &[&str], stdin: Option<&str>) -> Result<String, NetfilterError> {
    let text = || argv.join(" ");
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| NetfilterError::Command {
            argv: text(),
            reason: e.to_string(),
        })?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(input.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| NetfilterError::Command {
            argv: text(),
            reason: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(NetfilterError::Command {
            argv: text(),
            reason: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `true` if process `pid` runs.
fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// One conntrack entry a connection to the port made.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// Since the epoch.
    at: Duration,
    sport: u16,
    pod_ip: Ipv4Addr,
}

/// Parses one `conntrack -E -o timestamp` line: `[SECS.USECS] [NEW] tcp 6 120 SYN_SENT
/// src=.. dst=.. sport=P dport=.. [UNREPLIED] src=POD dst=.. sport=.. dport=..`: its wall time,
/// the original source port and the reply source (the pod's address).
fn parse_event(line: &str) -> Option<(SystemTime, u16, Ipv4Addr)> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (stamp, rest) = rest.split_once(']')?;
    let secs: f64 = stamp.trim().parse().ok()?;
    let wall = SystemTime::UNIX_EPOCH + Duration::try_from_secs_f64(secs).ok()?;
    if !rest.contains("[NEW]") {
        return None;
    }
    let mut sport = None;
    let mut srcs = Vec::new();
    for w in rest.split_whitespace() {
        if let Some(v) = w.strip_prefix("sport=") {
            sport = sport.or(v.parse().ok());
        } else if let Some(v) = w.strip_prefix("src=") {
            srcs.push(v);
        }
    }
    let pod_ip = srcs.get(1)?.parse().ok()?;
    Some((wall, sport?, pod_ip))
}

/// The drill's NodePort through the kernel (see the module docs). Dropping it removes its rules,
/// conntrack entries and sink.
pub struct Netfilter {
    pid: u32,
    chain: String,
    sink_ns: String,
    sink_if: String,
    port: u16,
    snat_to: Ipv4Addr,
    _hold: OwnedFd,
    /// Pod addresses already routed to the sink, with the pod's name.
    pods: Mutex<HashMap<Ipv4Addr, String>>,
    entries: Arc<Mutex<Vec<Entry>>>,
    events: Mutex<Option<std::process::Child>>,
    /// The thread reading the events (ends at the child's EOF).
    reader: Mutex<Option<std::thread::JoinHandle<()>>>,
    closed: std::sync::atomic::AtomicBool,
}

static NEXT: AtomicU32 = AtomicU32::new(1);

impl Netfilter {
    /// Whether `iptables-restore` and `conntrack` can run here (they need root).
    pub fn available() -> Result<(), NetfilterError> {
        for (tool, argv) in [
            ("iptables", &["iptables-save", "-t", "nat"][..]),
            ("conntrack", &["conntrack", "-C"][..]),
        ] {
            run(argv, None).map_err(|e| NetfilterError::Missing {
                tool,
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Holds a NodePort on 127.0.0.1, installs its rules (no endpoints yet: connections are
    /// refused) and starts reading its conntrack entries. `host_ip` is the host's address on the
    /// pods' side (the pod range's `.1`), what the pods answer to; `epoch` is the drill's t = 0.
    ///
    /// Errors: [`NetfilterError::Port`], [`NetfilterError::Command`] (every step made so far is
    /// undone).
    pub fn start(host_ip: Ipv4Addr, epoch: Instant) -> Result<Netfilter, NetfilterError> {
        cleanup_stale();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let (hold, port) = hold_port().map_err(NetfilterError::Port)?;
        let nf = Netfilter {
            pid,
            chain: format!("PGD-{pid}-{n}"),
            sink_ns: format!("pgsink-{pid}-{n}"),
            sink_if: format!("pgs{pid}-{n}"),
            port,
            snat_to: host_ip,
            _hold: hold,
            pods: Mutex::new(HashMap::new()),
            entries: Arc::new(Mutex::new(Vec::new())),
            events: Mutex::new(None),
            reader: Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
        };
        // On error `nf` is dropped, which undoes what was made.
        nf.make_sink()?;
        nf.install()?;
        nf.read_events(epoch)?;
        Ok(nf)
    }

    /// Where clients connect: `127.0.0.1:PORT`.
    pub fn local_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn make_sink(&self) -> Result<(), NetfilterError> {
        let (ns, ifname) = (self.sink_ns.as_str(), self.sink_if.as_str());
        run(&["ip", "netns", "add", ns], None)?;
        run(
            &[
                "ip", "link", "add", ifname, "type", "veth", "peer", "name", "eth0", "netns", ns,
            ],
            None,
        )?;
        run(&["ip", "-n", ns, "link", "set", "eth0", "up"], None)?;
        run(&["ip", "link", "set", ifname, "up"], None)?;
        route_localnet(ifname);
        Ok(())
    }

    /// Writes the NodePort's rules. They go first in `OUTPUT` and `POSTROUTING`, ahead of
    /// rules another program left for the same port: a rule of a dead drill (or of an older
    /// podgrace whose removal failed) that SNATs this port to another address would otherwise
    /// win, and every reply would go where no pod answers (all connections time out).
    fn install(&self) -> Result<(), NetfilterError> {
        let c = comment(self.pid);
        let rules = format!(
            "*nat\n:{chain} - [0:0]\n-I OUTPUT 1 -m comment --comment {c} -d 127.0.0.1/32 -p tcp -m tcp --dport {port} -j {chain}\n-I POSTROUTING 1 -m comment --comment {c} -p tcp -m conntrack --ctstate DNAT --ctorigdst 127.0.0.1/32 --ctorigdstport {port} -j SNAT --to-source {snat}\nCOMMIT\n",
            chain = self.chain,
            port = self.port,
            snat = self.snat_to,
        );
        run(&["iptables-restore", "--noflush", "-w", "5"], Some(&rules))?;
        Ok(())
    }

    /// Starts `conntrack -E` for the port's new entries, read by a thread of its own (which
    /// forked it: the child dies with that thread, so with podgrace).
    fn read_events(&self, epoch: Instant) -> Result<(), NetfilterError> {
        let wall_epoch = SystemTime::now()
            .checked_sub(epoch.elapsed())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let port = self.port.to_string();
        let argv = [
            "conntrack",
            "-E",
            "-e",
            "NEW",
            "-p",
            "tcp",
            "--orig-port-dst",
            port.as_str(),
            "-o",
            "timestamp",
        ]
        .map(String::from);
        let (tx, rx) = std::sync::mpsc::channel();
        let entries = Arc::clone(&self.entries);
        let reader = std::thread::Builder::new()
            .name("podgrace-conntrack".into())
            .spawn(move || {
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null());
                // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
                #[allow(unsafe_code)]
                unsafe {
                    std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                        rustix::process::set_parent_process_death_signal(Some(
                            rustix::process::Signal::KILL,
                        ))
                        .map_err(std::io::Error::from)
                    });
                }
                let mut child = match cmd.spawn() {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let stdout = child.stdout.take();
                let _ = tx.send(Ok(child));
                let Some(stdout) = stdout else { return };
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some((wall, sport, pod_ip)) = parse_event(&line) {
                        let at = wall.duration_since(wall_epoch).unwrap_or_default();
                        let mut v = entries.lock().unwrap_or_else(|p| p.into_inner());
                        v.push(Entry { at, sport, pod_ip });
                    }
                }
            })
            .map_err(|e| NetfilterError::Command {
                argv: "conntrack -E".into(),
                reason: e.to_string(),
            })?;
        *self.reader.lock().unwrap_or_else(|p| p.into_inner()) = Some(reader);
        match rx.recv() {
            Ok(Ok(child)) => {
                *self.events.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
                // conntrack subscribes as it starts; give it that moment before traffic flows.
                std::thread::sleep(Duration::from_millis(50));
                Ok(())
            }
            Ok(Err(reason)) => Err(NetfilterError::Command {
                argv: "conntrack -E".into(),
                reason,
            }),
            Err(_) => Err(NetfilterError::Command {
                argv: "conntrack -E".into(),
                reason: "it did not start".into(),
            }),
        }
    }

    /// Stops reading conntrack events: `conntrack -E` gets SIGTERM, on which it writes out what
    /// it still buffers (its output to a pipe is block-buffered) and exits; the reader then
    /// reaches the end.
    fn stop_events(&self) {
        // Events reach conntrack a moment after the SYN.
        std::thread::sleep(Duration::from_millis(100));
        if let Some(mut child) = self.events.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(t) = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }

    /// Every connection to the port with the pod its conntrack entry DNATs it to, in order: the
    /// kernel's pinning, as [`PinnedConnection`]s (connection numbers count entries). Call it
    /// once the load has ended: it stops reading events.
    pub fn pinned(&self) -> Vec<PinnedConnection> {
        self.stop_events();
        let pods = self.pods.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                Some(PinnedConnection {
                    connection: i as u64,
                    client: SocketAddr::from(([127, 0, 0, 1], e.sport)),
                    opened: e.at,
                    pod: pods.get(&e.pod_ip)?.clone(),
                })
            })
            .collect()
    }

    /// What the kernel holds for this NodePort, as text for a log: its rules in `nat`, and for
    /// every pod address seen, the route the kernel picks, the routes of exactly that address
    /// and `route_localnet` of the interface it picks. For a drill in which no connection got
    /// an answer (a fault of the node's set-up, not of the app), so the log says where the SYNs
    /// went.
    pub fn diagnose(&self) -> String {
        let mut out = String::new();
        let c = comment(self.pid);
        if let Ok(saved) = run(&["iptables-save", "-t", "nat"], None) {
            for l in saved
                .lines()
                .filter(|l| l.contains(&c) || l.contains(&self.chain))
            {
                out.push_str(l);
                out.push('\n');
            }
        }
        let pods = self.pods.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (ip, pod) in pods {
            let get = run(&["ip", "-o", "route", "get", &ip.to_string()], None)
                .unwrap_or_else(|e| e.to_string());
            let dev = route_dev(&get).unwrap_or("").to_string();
            let localnet =
                std::fs::read_to_string(format!("/proc/sys/net/ipv4/conf/{dev}/route_localnet"))
                    .unwrap_or_default();
            let exact = run(
                &["ip", "-o", "route", "show", "exact", &format!("{ip}/32")],
                None,
            )
            .unwrap_or_else(|e| e.to_string());
            out.push_str(&format!(
                "{pod} {ip}: route get: {} | routes: {} | {dev} route_localnet={}\n",
                get.trim(),
                exact.trim().replace('\n', "; "),
                localnet.trim()
            ));
            // The pod's side (the process runtime's sandbox `podgrace-<index>-<owner>`): link
            // state and counters, its neighbours (the answer to its ARP for the host's
            // address) and its listening sockets.
            let netns = format!("podgrace-{}-{}", ip.octets()[3], self.pid);
            let mut show = |argv: &[&str]| {
                let text = run(argv, None).unwrap_or_else(|e| e.to_string());
                out.push_str(&format!(
                    "  {}: {}\n",
                    argv.join(" "),
                    text.trim().replace('\n', " / ")
                ));
            };
            show(&["ip", "-s", "link", "show", "dev", &dev]);
            show(&["ip", "neigh", "show", "dev", &dev]);
            show(&["ip", "-n", &netns, "-s", "link", "show", "eth0"]);
            show(&["ip", "-n", &netns, "-o", "addr"]);
            show(&["ip", "-n", &netns, "route"]);
            show(&["ip", "-n", &netns, "neigh"]);
            show(&["ip", "netns", "exec", &netns, "ss", "-ltn"]);
        }
        let host = self.snat_to.to_string();
        let text = run(&["ip", "route", "show", "table", "local", &host], None)
            .unwrap_or_else(|e| e.to_string());
        out.push_str(&format!(
            "local routes of {host}: {}\n",
            text.trim().replace('\n', " / ")
        ));
        out
    }

    /// Removes the rules, the conntrack entries of the port, the sink; stops `conntrack -E`.
    /// Idempotent; errors are logged.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.stop_events();
        remove_rules(|pid| pid == self.pid, Some(&self.chain));
        let port = self.port.to_string();
        // Exit 1 when there was nothing to delete.
        let _ = run(
            &[
                "conntrack",
                "-D",
                "-p",
                "tcp",
                "--orig-dst",
                "127.0.0.1",
                "--orig-port-dst",
                &port,
            ],
            None,
        );
        if let Err(e) = run(&["ip", "netns", "del", &self.sink_ns], None) {
            tracing::debug!(error = %e, "removing the drill's sink");
        }
        let _ = run(&["ip", "link", "del", &self.sink_if], None);
    }
}

impl RouteSink for Netfilter {
    /// One kube-proxy sync: routes a new pod address's leftovers to the sink and sets
    /// `route_localnet` on its interface, then rewrites the service chain.
    fn program(&self, routes: &Routes) {
        for e in &routes.targets {
            let std::net::IpAddr::V4(ip) = e.address.ip() else {
                continue;
            };
            let mut pods = self.pods.lock().unwrap_or_else(|p| p.into_inner());
            if pods.contains_key(&ip) {
                continue;
            }
            pods.insert(ip, e.pod.clone());
            drop(pods);
            let addr = format!("{ip}/32");
            if let Ok(out) = run(&["ip", "-o", "route", "get", &ip.to_string()], None) {
                if let Some(dev) = route_dev(&out) {
                    route_localnet(dev);
                }
            }
            // Below the pod's own route (metric 0): it takes over when the sandbox is gone. Only
            // for a pod with a route of its own (the process runtime's veth): a /32 beneath a
            // CNI bridge's subnet route would win over it at once (longest prefix first); there
            // a gone pod's address is one nobody answers ARP for on the bridge, as on a node.
            let own_route = run(&["ip", "-o", "route", "show", "exact", &addr], None)
                .is_ok_and(|o| !o.trim().is_empty());
            if !own_route {
                continue;
            }
            if let Err(e) = run(
                &[
                    "ip",
                    "route",
                    "add",
                    &addr,
                    "dev",
                    &self.sink_if,
                    "metric",
                    "1024",
                ],
                None,
            ) {
                tracing::warn!(error = %e, "routing a pod address to the drill's sink");
            }
        }
        let mut rules = format!("*nat\n:{} - [0:0]\n", self.chain);
        let n = routes.targets.len();
        for (i, e) in routes.targets.iter().enumerate() {
            let left = n - i;
            let pick = if left > 1 {
                format!(
                    "-m statistic --mode random --probability {:.10} ",
                    1.0 / left as f64
                )
            } else {
                String::new()
            };
            rules.push_str(&format!(
                "-A {} -m comment --comment {} -p tcp {pick}-j DNAT --to-destination {}\n",
                self.chain,
                comment(self.pid),
                e.address
            ));
        }
        rules.push_str("COMMIT\n");
        if let Err(e) = run(&["iptables-restore", "--noflush", "-w", "5"], Some(&rules)) {
            tracing::warn!(error = %e, "kube-proxy sync");
        }
    }
}

impl Drop for Netfilter {
    fn drop(&mut self) {
        self.close();
    }
}

/// The interface an `ip -o route get ADDR` answer names (the word after `dev`).
fn route_dev(answer: &str) -> Option<&str> {
    answer.split_whitespace().skip_while(|w| *w != "dev").nth(1)
}

/// `net.ipv4.conf.IF.route_localnet = 1`: traffic from 127.0.0.1 may leave through `ifname`
/// once DNAT'd (and SNAT'd), as kube-proxy allows for localhost NodePorts.
fn route_localnet(ifname: &str) {
    let path = format!("/proc/sys/net/ipv4/conf/{ifname}/route_localnet");
    if let Err(e) = std::fs::write(&path, "1") {
        tracing::debug!(error = %e, path, "route_localnet");
    }
}

/// A TCP socket bound to 127.0.0.1:0, not listening: the NodePort it holds.
fn hold_port() -> std::io::Result<(OwnedFd, u16)> {
    use rustix::net::{
        bind, getsockname, ipproto, socket_with, AddressFamily, SocketAddrAny, SocketFlags,
        SocketType,
    };
    let fd = socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        Some(ipproto::TCP),
    )?;
    bind(&fd, &SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let addr: SocketAddrAny = getsockname(&fd)?;
    let port = SocketAddr::try_from(addr)
        .map_err(|_| std::io::Error::other("not an inet address"))?
        .port();
    Ok((fd, port))
}

/// Removes the rules (and the chains) of the podgrace processes `remove` picks by pid; with
/// `only_chain`, of that chain only.
fn remove_rules(remove: impl Fn(u32) -> bool, only_chain: Option<&str>) {
    let Ok(saved) = run(&["iptables-save", "-t", "nat"], None) else {
        return;
    };
    let owner = |s: &str| -> Option<u32> { s.split('-').nth(1)?.parse().ok() };
    let mut chains = Vec::new();
    for line in saved.lines() {
        if let Some(c) = line.strip_prefix(":PGD-") {
            let name = format!("PGD-{}", c.split_whitespace().next().unwrap_or(""));
            if owner(&name).is_some_and(&remove) && only_chain.is_none_or(|o| o == name) {
                chains.push(name);
            }
            continue;
        }
        let Some(rule) = line.strip_prefix("-A ") else {
            continue;
        };
        let Some(i) = rule.find("podgrace-drill-") else {
            continue;
        };
        let pid: Option<u32> = rule[i + "podgrace-drill-".len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|p| p.parse().ok());
        if !pid.is_some_and(&remove) {
            continue;
        }
        let chain = rule.split_whitespace().next().unwrap_or("");
        if chain.starts_with("PGD-") {
            continue; // flushed with its chain
        }
        // A top-level rule (OUTPUT, POSTROUTING): of this chain or port only, if asked.
        if let Some(o) = only_chain {
            let ours = rule.contains(&format!("-j {o}"))
                || rule.contains(&format!("--ctorigdstport {}", port_of_chain(&saved, o)));
            if !ours {
                continue;
            }
        }
        let spec = delete_spec(rule);
        let mut argv = vec!["iptables", "-w", "5", "-t", "nat", "-D"];
        argv.extend(spec.iter().map(String::as_str));
        if let Err(e) = run(&argv, None) {
            tracing::debug!(error = %e, "removing a drill rule");
        }
    }
    for c in chains {
        let _ = run(&["iptables", "-w", "5", "-t", "nat", "-F", &c], None);
        let _ = run(&["iptables", "-w", "5", "-t", "nat", "-X", &c], None);
    }
}

/// The arguments that delete `rule` (an `iptables-save` line without its `-A `): the rule as
/// saved, except that a conntrack address without a mask gets `/32`. iptables-save prints
/// `--ctorigdst 127.0.0.1` for a rule written with `127.0.0.1/32`, and iptables (nf_tables
/// backend, 1.8) does not find the rule from that spelling ("Bad rule (does a matching rule exist
/// in that chain?)"): the SNAT rules of every drill stayed behind until this was done, and a
/// later drill given one of their ports had its replies sent to the wrong address.
fn delete_spec(rule: &str) -> Vec<String> {
    const ADDRESSES: [&str; 4] = ["--ctorigsrc", "--ctorigdst", "--ctreplsrc", "--ctrepldst"];
    let mut out: Vec<String> = Vec::new();
    for w in rule.split_whitespace() {
        let after_address_flag = out.last().is_some_and(|p| ADDRESSES.contains(&p.as_str()));
        if after_address_flag && !w.contains('/') {
            out.push(format!("{w}/32"));
        } else {
            out.push(w.to_string());
        }
    }
    out
}

/// The NodePort that jumps to `chain`, from an `iptables-save` listing (empty if none).
fn port_of_chain(saved: &str, chain: &str) -> String {
    saved
        .lines()
        .find(|l| l.starts_with("-A OUTPUT") && l.contains(&format!("-j {chain}")))
        .and_then(|l| {
            let mut w = l.split_whitespace();
            w.by_ref().skip_while(|x| *x != "--dport").nth(1)
        })
        .unwrap_or("")
        .to_string()
}

/// Removes the rules, chains and sinks of podgrace processes that no longer run.
pub fn cleanup_stale() {
    static ONCE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        remove_rules(|pid| !alive(pid), None);
        let Ok(list) = run(&["ip", "netns", "list"], None) else {
            return;
        };
        for line in list.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            let Some(rest) = name.strip_prefix("pgsink-") else {
                continue;
            };
            let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if !alive(pid) {
                let _ = run(&["ip", "netns", "del", name], None);
                tracing::info!(netns = name, "removed a stale drill sink");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conntrack_events_are_read() {
        let line = "[1796120416.688230]\t    [NEW] tcp      6 120 SYN_SENT src=127.0.0.1 dst=127.0.0.1 sport=45555 dport=39999 [UNREPLIED] src=169.254.77.250 dst=169.254.77.1 sport=8080 dport=45555";
        let (wall, sport, ip) = parse_event(line).expect("parsed");
        assert_eq!(sport, 45555);
        assert_eq!(ip, Ipv4Addr::new(169, 254, 77, 250));
        let secs = wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!((secs - 1_796_120_416.688_23).abs() < 1e-5);
        assert_eq!(
            parse_event("[1.0] [DESTROY] tcp 6 src=1.2.3.4 sport=1"),
            None
        );
        assert_eq!(parse_event("garbage"), None);
    }

    #[test]
    fn a_saved_snat_rule_is_deleted_with_its_conntrack_address_masked() {
        let saved = "POSTROUTING -p tcp -m comment --comment podgrace-drill-6928 -m conntrack --ctstate DNAT --ctorigdst 127.0.0.1 --ctorigdstport 33303 -j SNAT --to-source 198.18.77.1";
        assert_eq!(
            delete_spec(saved).join(" "),
            "POSTROUTING -p tcp -m comment --comment podgrace-drill-6928 -m conntrack --ctstate DNAT --ctorigdst 127.0.0.1/32 --ctorigdstport 33303 -j SNAT --to-source 198.18.77.1"
        );
        // Other addresses (and ones with a mask) are left as saved.
        let output = "OUTPUT -d 127.0.0.1/32 -p tcp -m comment --comment podgrace-drill-1 -m tcp --dport 40000 -j PGD-1-1";
        assert_eq!(delete_spec(output).join(" "), output);
    }

    #[test]
    fn the_port_of_a_chain_is_found_in_a_listing() {
        let saved = "*nat\n:PGD-7-1 - [0:0]\n-A OUTPUT -d 127.0.0.1/32 -p tcp -m comment --comment podgrace-drill-7 -m tcp --dport 40001 -j PGD-7-1\nCOMMIT\n";
        assert_eq!(port_of_chain(saved, "PGD-7-1"), "40001");
        assert_eq!(port_of_chain(saved, "PGD-7-2"), "");
    }
}
