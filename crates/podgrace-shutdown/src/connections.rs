//! New TCP connections arriving in this network namespace, read from the kernel's own counters.
//!
//! * Without ports: `Tcp: PassiveOpens` of `/proc/net/snmp`, the namespace's count of
//!   connections accepted from the network (RFC 1213 `tcpPassiveOpens`, incremented when the
//!   three-way handshake completes). One small file read per sample, whatever the traffic.
//! * With ports, `PassiveOpens` still comes first: no passive open anywhere in the namespace
//!   means none on these ports either, so an idle pod costs one small read per sample. When it
//!   moved, the listening sockets are listed through `NETLINK_SOCK_DIAG` ([`crate::sock_diag`],
//!   tens of microseconds): when every listener of the namespace is on a watched port (a pod
//!   whose only other port is not listening), every passive open is theirs and `PassiveOpens`
//!   is the count. Otherwise the connections on the watched ports are dumped, the kernel
//!   filtering them by local port and state (any but `LISTEN` and `SYN_RECV`), and keyed by
//!   their socket cookie: a cookie not seen at the previous dump is a new connection. A dump
//!   makes the kernel walk the host's whole established-connection hash table (2–4 ms on a host
//!   with much memory, whatever the namespace holds), so dumps are spaced to take at most
//!   1/[`TABLE_BUDGET`] of the time (never more than [`MAX_TABLE_INTERVAL`] apart): the passive
//!   opens in between are *pending* ([`ConnectionCounter::pending`]), counted at the next dump,
//!   and a wait about to end settles them first ([`ConnectionCounter::settle`]). A connection
//!   that opens and is gone entirely between two dumps on a watched port is missed (one the
//!   server closed first stays in `TIME_WAIT` and is seen).
//! * Where the netlink socket is refused (a sandbox without `inet_diag`, a seccomp policy), the
//!   same is done with `/proc/net/tcp` and `/proc/net/tcp6` ([`ConnectionCounter::fallback`]
//!   says why): whole text tables, so the listeners are checked only at a table read, and with
//!   only watched listeners again at every [`LISTENER_RECHECK`]th sample that saw passive opens.
//!
//! `/proc/net` and the netlink socket are the reading process's own network namespace, so
//! inside a pod these are the pod's connections only. Parsing is pure ([`parse_passive_opens`],
//! [`parse_tcp_table`]); [`ConnectionCounter`] does the reading.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sock_diag::{self, SockDiag, FAMILIES};

/// Errors of reading the counters. Each names the file involved.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// A file of `/proc/net` could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file (`/proc/net/snmp`, `tcp` or `tcp6`).
        path: PathBuf,
        /// The read error.
        source: std::io::Error,
    },
    /// `/proc/net/snmp` has no readable `Tcp: PassiveOpens`.
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is missing or malformed ([`parse_passive_opens`]'s message).
        reason: String,
    },
    /// A `NETLINK_SOCK_DIAG` dump failed (after the socket was opened and had worked once).
    #[error("listing sockets through NETLINK_SOCK_DIAG: {0}")]
    Netlink(std::io::Error),
}

/// `PassiveOpens` of the `Tcp:` lines of `/proc/net/snmp` (a header line of names and a line of
/// values). Errors: a description of what is missing or malformed.
pub fn parse_passive_opens(snmp: &str) -> Result<u64, String> {
    let mut tcp = snmp.lines().filter_map(|l| l.strip_prefix("Tcp:"));
    let (Some(names), Some(values)) = (tcp.next(), tcp.next()) else {
        return Err("no Tcp: header and value lines".into());
    };
    let index = names
        .split_whitespace()
        .position(|n| n == "PassiveOpens")
        .ok_or("no PassiveOpens in the Tcp: header")?;
    let value = values
        .split_whitespace()
        .nth(index)
        .ok_or("the Tcp: value line is shorter than its header")?;
    value
        .parse::<u64>()
        .map_err(|_| format!("PassiveOpens is not a count: {value:?}"))
}

/// One socket of `/proc/net/tcp` or `/proc/net/tcp6`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TcpSocket {
    /// The local address as the kernel prints it (hex, with `:PORT`), to key the pair.
    pub local: String,
    /// The remote address, likewise.
    pub remote: String,
    /// The local port.
    pub local_port: u16,
    /// The `st` column: `0A` LISTEN, `01` ESTABLISHED, `03` SYN_RECV, `06` TIME_WAIT ...
    pub state: u8,
}

/// `TCP_LISTEN` in the kernel's `st` column.
pub const STATE_LISTEN: u8 = 0x0A;
/// `TCP_SYN_RECV`: a handshake not yet complete (a request socket).
pub const STATE_SYN_RECV: u8 = 0x03;

/// The sockets of a `/proc/net/tcp` or `tcp6` table (the header line and malformed lines are
/// skipped).
pub fn parse_tcp_table(text: &str) -> impl Iterator<Item = TcpSocket> + '_ {
    text.lines().skip(1).filter_map(|line| {
        let mut cols = line.split_whitespace();
        let _sl = cols.next()?;
        let local = cols.next()?;
        let remote = cols.next()?;
        let state = u8::from_str_radix(cols.next()?, 16).ok()?;
        let (_, port) = local.rsplit_once(':')?;
        let local_port = u16::from_str_radix(port, 16).ok()?;
        Some(TcpSocket {
            local: local.to_string(),
            remote: remote.to_string(),
            local_port,
            state,
        })
    })
}

/// With ports, only watched listeners and `/proc/net/tcp` (the fallback), the listeners are read
/// again at every this many samples that saw passive opens: 50 (5 s under constant traffic at
/// 100 ms samples).
pub const LISTENER_RECHECK: u32 = 50;

/// Table reads (netlink dumps or `/proc/net/tcp`) take at most 1/200 of the time (0.5% of a
/// core): after a read that cost `d` of CPU time, the next comes no sooner than `200 × d` later.
pub const TABLE_BUDGET: u32 = 200;

/// Table reads are never spaced more than this (1 s), whatever they cost.
pub const MAX_TABLE_INTERVAL: Duration = Duration::from_secs(1);

/// Where the connections on the watched ports are read.
enum Tables {
    /// `NETLINK_SOCK_DIAG`.
    Diag(SockDiag),
    /// `/proc/net/tcp` and `tcp6` under the counter's directory.
    Proc,
}

/// Counts new connections between samples (see the module docs).
pub struct ConnectionCounter {
    proc_net: PathBuf,
    ports: Vec<u16>,
    tables: Tables,
    /// Why `/proc/net/tcp` is read instead of netlink, when it is.
    fallback: Option<String>,
    passive_opens: u64,
    /// With ports: the keys of the watched ports' connections at the last table read (socket
    /// cookies through netlink, a hash of the address pair from `/proc`).
    seen: HashSet<u64>,
    /// With ports: every listener was on a watched port at the last check.
    only_watched_listeners: bool,
    /// `/proc` only: samples with passive opens since the last table read.
    since_read: u32,
    /// Passive opens since the last table read, not yet told apart by port.
    pending: u64,
    /// Whether table reads are spaced by their cost ([`TABLE_BUDGET`]).
    spaced: bool,
    /// The earliest next table read.
    next_read: Option<Instant>,
}

impl std::fmt::Debug for ConnectionCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionCounter")
            .field("ports", &self.ports)
            .field("netlink", &matches!(self.tables, Tables::Diag(_)))
            .field("passive_opens", &self.passive_opens)
            .field("pending", &self.pending)
            .finish()
    }
}

impl ConnectionCounter {
    /// A counter over this network namespace, limited to `ports` if not empty (through
    /// `NETLINK_SOCK_DIAG`, else `/proc/net/tcp`); its baseline is read now.
    /// Errors: [`CounterError`] if the counters cannot be read.
    pub fn new(ports: &[u16]) -> Result<Self, CounterError> {
        let (tables, fallback) = if ports.is_empty() {
            (Tables::Proc, None)
        } else {
            match SockDiag::open().and_then(|mut d| d.listeners(FAMILIES[0], |_| {}).map(|()| d)) {
                Ok(d) => (Tables::Diag(d), None),
                Err(e) => (
                    Tables::Proc,
                    Some(format!(
                        "the NETLINK_SOCK_DIAG socket is refused ({e}): reading /proc/net/tcp and /proc/net/tcp6 instead, which costs more CPU"
                    )),
                ),
            }
        };
        Self::build(Path::new("/proc/net"), ports, tables, fallback, true)
    }

    /// A counter over another directory laid out as `/proc/net`, reading its `tcp` and `tcp6`
    /// tables at every sample that needs them (for tests).
    /// Errors: [`CounterError`] if the counters cannot be read.
    pub fn at(proc_net: &Path, ports: &[u16]) -> Result<Self, CounterError> {
        Self::build(proc_net, ports, Tables::Proc, None, false)
    }

    fn build(
        proc_net: &Path,
        ports: &[u16],
        tables: Tables,
        fallback: Option<String>,
        spaced: bool,
    ) -> Result<Self, CounterError> {
        let mut c = ConnectionCounter {
            proc_net: proc_net.to_path_buf(),
            ports: ports.to_vec(),
            tables,
            fallback,
            passive_opens: 0,
            seen: HashSet::new(),
            only_watched_listeners: false,
            since_read: 0,
            pending: 0,
            spaced,
            next_read: None,
        };
        c.passive_opens = c.read_passive_opens()?;
        if !c.ports.is_empty() {
            (c.seen, c.only_watched_listeners) = c.read_tables()?;
        }
        Ok(c)
    }

    /// The same counter with its table reads at every sample that needs one, unspaced by their
    /// cost: for an app's own quiescence ([`Shutdown`](crate::Shutdown)), where the end of the
    /// quiet window must be precise to a sample and the CPU is the app's, not a hook's.
    pub fn every_sample(mut self) -> Self {
        self.spaced = false;
        self
    }

    /// The ports watched (empty: every port).
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Why the connections are read from `/proc/net/tcp` rather than through netlink, if they
    /// are (a sentence, to be said once).
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Whether passive opens have been seen since the last table read that are not yet told
    /// apart by port (always `false` without ports): a wait must [`ConnectionCounter::settle`]
    /// before it ends quietly.
    pub fn pending(&self) -> bool {
        self.pending > 0
    }

    /// New connections since the previous sample (or the baseline). With ports, passive opens
    /// that are not yet told apart by port are left [`pending`](ConnectionCounter::pending)
    /// and count at a later sample. Errors: [`CounterError`].
    pub fn sample(&mut self) -> Result<u64, CounterError> {
        let opens = self.read_passive_opens()?;
        // A counter that went backwards (it cannot in one namespace) counts as no change.
        let moved = opens.saturating_sub(self.passive_opens);
        self.passive_opens = opens;
        if moved == 0 || self.ports.is_empty() {
            return Ok(moved);
        }
        match &mut self.tables {
            Tables::Diag(d) => {
                if only_watched_listeners(d, &self.ports)? {
                    // Every passive open since the last read was on a watched port (even the
                    // pending ones, counted now: at worst an over-count, never a miss).
                    let n = moved.saturating_add(std::mem::take(&mut self.pending));
                    self.only_watched_listeners = true;
                    return Ok(n);
                }
            }
            Tables::Proc => {
                self.since_read += 1;
                if self.only_watched_listeners && self.since_read < LISTENER_RECHECK {
                    return Ok(moved);
                }
            }
        }
        self.pending = self.pending.saturating_add(moved);
        if self.only_watched_listeners {
            // The passive opens were all ours until now, and the connections were not kept up
            // to date (their difference would count old connections again): a new baseline.
            let n = std::mem::take(&mut self.pending);
            (self.seen, self.only_watched_listeners) = self.read_tables()?;
            self.since_read = 0;
            return Ok(n);
        }
        if self.spaced && self.next_read.is_some_and(|t| Instant::now() < t) {
            return Ok(0);
        }
        self.read_new()
    }

    /// Reads the tables now if passive opens are [`pending`](ConnectionCounter::pending), and
    /// returns the new connections on the watched ports (0 when nothing was pending).
    /// Errors: [`CounterError`].
    pub fn settle(&mut self) -> Result<u64, CounterError> {
        if self.pending == 0 {
            return Ok(0);
        }
        self.read_new()
    }

    fn read_new(&mut self) -> Result<u64, CounterError> {
        let (now, only_watched) = self.read_tables()?;
        let new = now.difference(&self.seen).count() as u64;
        self.seen = now;
        self.only_watched_listeners = only_watched;
        self.since_read = 0;
        self.pending = 0;
        Ok(new)
    }

    fn read(&self, name: &str) -> Result<(PathBuf, String), CounterError> {
        let path = self.proc_net.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok((path, text)),
            Err(source) => Err(CounterError::Read { path, source }),
        }
    }

    fn read_passive_opens(&self) -> Result<u64, CounterError> {
        let (path, text) = self.read("snmp")?;
        parse_passive_opens(&text).map_err(|reason| CounterError::Parse { path, reason })
    }

    /// The keys of the connections on the watched ports and whether every listening socket is
    /// on a watched port; the next read is scheduled by this one's cost.
    fn read_tables(&mut self) -> Result<(HashSet<u64>, bool), CounterError> {
        // The cost is this thread's CPU time (the kernel's walk is charged to it), not the wall
        // time, which a busy machine stretches.
        let cpu = || {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
            Duration::new(
                t.tv_sec.max(0) as u64,
                t.tv_nsec.clamp(0, 999_999_999) as u32,
            )
        };
        let began = cpu();
        let r = match &mut self.tables {
            Tables::Diag(d) => diag_connections(d, &self.ports),
            Tables::Proc => self.read_port_pairs(),
        };
        let cost = cpu().saturating_sub(began);
        self.next_read = Some(Instant::now() + (cost * TABLE_BUDGET).min(MAX_TABLE_INTERVAL));
        r
    }

    /// [`ConnectionCounter::read_tables`] from `tcp` and `tcp6` (a missing `tcp6`, on a kernel
    /// without IPv6, is an empty table).
    fn read_port_pairs(&self) -> Result<(HashSet<u64>, bool), CounterError> {
        let mut pairs = HashSet::new();
        let mut only_watched = true;
        for name in ["tcp", "tcp6"] {
            let text = match self.read(name) {
                Ok((_, text)) => text,
                Err(CounterError::Read { source, .. })
                    if name == "tcp6" && source.kind() == std::io::ErrorKind::NotFound =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            for s in parse_tcp_table(&text) {
                let watched = self.ports.contains(&s.local_port);
                if s.state == STATE_LISTEN {
                    only_watched &= watched;
                } else if s.state != STATE_SYN_RECV && watched {
                    pairs.insert(pair_key(&s.local, &s.remote));
                }
            }
        }
        Ok((pairs, only_watched))
    }
}

/// A 64-bit key for an address pair of `/proc/net/tcp` (SipHash with fixed keys: two pairs
/// collide with a probability of about 2^-64, which would hide one new connection).
fn pair_key(local: &str, remote: &str) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::hash::DefaultHasher::new();
    (local, remote).hash(&mut h);
    h.finish()
}

/// Whether every listening TCP socket of the namespace is on one of `ports`.
fn only_watched_listeners(d: &mut SockDiag, ports: &[u16]) -> Result<bool, CounterError> {
    let mut only = true;
    for family in FAMILIES {
        d.listeners(family, |s| only &= ports.contains(&s.local_port))
            .map_err(CounterError::Netlink)?;
    }
    Ok(only)
}

/// The cookies of the connections on `ports`, and whether every listener is on one of them.
/// Only the families with a listener on a watched port are dumped (a connection is accepted in
/// its listener's family: a dual-stack `[::]` listener's IPv4 clients are IPv6 sockets).
fn diag_connections(d: &mut SockDiag, ports: &[u16]) -> Result<(HashSet<u64>, bool), CounterError> {
    let mut only = true;
    let mut cookies = HashSet::new();
    for family in FAMILIES {
        let mut watched_here = false;
        d.listeners(family, |s| {
            let watched = ports.contains(&s.local_port);
            only &= watched;
            watched_here |= watched;
        })
        .map_err(CounterError::Netlink)?;
        if !watched_here {
            continue;
        }
        for &port in ports {
            d.connections(family, port, |s| {
                if !sock_diag::is_listener(&s) {
                    cookies.insert(s.cookie);
                }
            })
            .map_err(CounterError::Netlink)?;
        }
    }
    Ok((cookies, only))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real `/proc/net/snmp` of a Linux 6.1 network namespace (IP and ICMP lines cut short).
    const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives\nIp: 2 64 120\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\nTcp: 1 200 120000 -1 3 17 0 0 1 214 198 0 0 2 0\nUdp: InDatagrams NoPorts\nUdp: 0 0\n";

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 34567 1 0000000000000000 100 0 0 10 0\n   1: 024D FEA9:1F90 014DFEA9:C350 01 00000000:00000000 00:00000000 00000000     0        0 0 1\n   1: 024DFEA9:1F90 014DFEA9:C350 01 00000000:00000000 00:00000000 00000000     0        0 34600 1 0000000000000000 20 4 30 10 -1\n   2: 024DFEA9:1F90 014DFEA9:C352 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000\n   3: 024DFEA9:1F91 014DFEA9:C354 01 00000000:00000000 00:00000000 00000000     0        0 34601 1\n   4: 024DFEA9:1F90 014DFEA9:C356 03 00000000:00000000 00:00000000 00000000     0        0 0 1\n";

    #[test]
    fn passive_opens_is_read_by_its_column_name() {
        assert_eq!(parse_passive_opens(SNMP), Ok(17));
        assert!(parse_passive_opens("Ip: a\nIp: 1\n").is_err());
        assert!(parse_passive_opens("Tcp: ActiveOpens\nTcp: 3\n").is_err());
        assert!(parse_passive_opens("Tcp: PassiveOpens\nTcp: x\n").is_err());
        assert!(parse_passive_opens("Tcp: A PassiveOpens\nTcp: 1\n").is_err());
    }

    #[test]
    fn tcp_tables_give_ports_and_states() {
        let socks: Vec<TcpSocket> = parse_tcp_table(TCP).collect();
        // The malformed line (an address with a space) is skipped.
        assert_eq!(socks.len(), 5);
        assert_eq!(socks[0].local_port, 8080);
        assert_eq!(socks[0].state, STATE_LISTEN);
        assert_eq!(socks[1].remote, "014DFEA9:C350");
        assert_eq!(socks[3].local_port, 8081);
        let v6 = "  sl  local_address                         remote_address                        st\n   0: 0000000000000000FFFF0000024DFEA9:1F90 0000000000000000FFFF0000014DFEA9:D000 01 0\n";
        let s: Vec<TcpSocket> = parse_tcp_table(v6).collect();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].local_port, 8080);
    }

    fn fake_proc(dir: &Path, passive: u64, tcp: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("snmp"),
            SNMP.replace(" 3 17 0", &format!(" 3 {passive} 0")),
        )
        .unwrap();
        std::fs::write(dir.join("tcp"), tcp).unwrap();
    }

    #[test]
    fn with_only_watched_listeners_passive_opens_are_enough_until_the_recheck() {
        let dir = std::env::temp_dir().join(format!("pg-shutdown-watched-{}", std::process::id()));
        // The only listener is 8080's: every passive open is on 8080, the tables are not read.
        fake_proc(&dir, 17, TCP);
        let mut c = ConnectionCounter::at(&dir, &[8080]).unwrap();
        std::fs::write(dir.join("tcp"), "garbage").unwrap();
        fake_proc_snmp(&dir, 20);
        assert_eq!(c.sample().unwrap(), 3);
        // Until the recheck, when a listener on 9090 has appeared: from then on, pairs count.
        let other = TCP.to_string() + "   9: 00000000:2382 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n";
        std::fs::write(dir.join("tcp"), &other).unwrap();
        for n in 1..LISTENER_RECHECK - 1 {
            fake_proc_snmp(&dir, 20 + u64::from(n));
            assert_eq!(c.sample().unwrap(), 1, "sample {n}");
        }
        // The recheck itself still reports the passive opens ...
        fake_proc_snmp(&dir, 20 + u64::from(LISTENER_RECHECK - 2) + 4);
        assert_eq!(c.sample().unwrap(), 4);
        // ... and then only new pairs on 8080 count (none: the 4 opens were elsewhere).
        fake_proc_snmp(&dir, 100);
        assert_eq!(c.sample().unwrap(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn fake_proc_snmp(dir: &Path, passive: u64) {
        std::fs::write(
            dir.join("snmp"),
            SNMP.replace(" 3 17 0", &format!(" 3 {passive} 0")),
        )
        .unwrap();
    }

    #[test]
    fn the_counter_counts_passive_opens_or_new_pairs_on_its_ports() {
        let dir = std::env::temp_dir().join(format!("pg-shutdown-conn-{}", std::process::id()));
        let header = TCP.lines().next().unwrap().to_string() + "\n";
        fake_proc(&dir, 17, &header);
        let mut all = ConnectionCounter::at(&dir, &[]).unwrap();
        // A listener on 8081 too: the tables must be read to tell the ports apart.
        let l8081 = "  10: 00000000:1F91 00000000:0000 0A 0 0 0 0 0 0\n";
        std::fs::write(dir.join("tcp"), header.clone() + l8081).unwrap();
        let mut port = ConnectionCounter::at(&dir, &[8080]).unwrap();
        assert_eq!(all.sample().unwrap(), 0);
        assert_eq!(port.sample().unwrap(), 0);
        // Three passive opens: two ESTABLISHED/TIME_WAIT pairs on 8080, one on 8081; a
        // SYN_RECV on 8080 and the listener do not count.
        let tcp = TCP.to_string() + l8081;
        fake_proc(&dir, 20, &tcp);
        assert_eq!(all.sample().unwrap(), 3);
        assert_eq!(port.sample().unwrap(), 2);
        // The same sockets later, one more passive open elsewhere: nothing new on 8080.
        fake_proc(&dir, 21, &tcp);
        assert_eq!(port.sample().unwrap(), 0);
        // The SYN_RECV completed: now it counts.
        fake_proc(&dir, 22, &tcp.replace(":C356 03", ":C356 01"));
        assert_eq!(port.sample().unwrap(), 1);
        // No passive open: the tables are not even read (a broken table is not noticed).
        std::fs::write(dir.join("tcp"), "garbage").unwrap();
        assert_eq!(port.sample().unwrap(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(all.sample(), Err(CounterError::Read { .. })));
    }

    #[test]
    fn through_netlink_only_connections_to_the_watched_port_count() {
        use std::net::{TcpListener, TcpStream};
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = ConnectionCounter::new(&[a.local_addr().unwrap().port()]).unwrap();
        assert_eq!(c.fallback(), None, "netlink refused here");
        let connect = |l: &TcpListener, n: usize| -> Vec<(TcpStream, TcpStream)> {
            (0..n)
                .map(|_| {
                    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                    (client, l.accept().unwrap().0)
                })
                .collect()
        };
        // Three to the watched port, two to the other one (whose listener means the passive
        // opens alone cannot tell them apart): three. What a sample leaves pending, settling
        // counts.
        let _first = (connect(&a, 3), connect(&b, 2));
        assert_eq!(c.sample().unwrap() + c.settle().unwrap(), 3);
        assert!(!c.pending());
        // Only the other port: none, and the same connections are not counted again.
        let _second = connect(&b, 4);
        assert_eq!(c.sample().unwrap() + c.settle().unwrap(), 0);
        // Closed by the server first (TIME_WAIT on its side): still seen, once.
        for (client, server) in connect(&a, 2) {
            drop(server);
            let _ = std::io::Read::read(&mut &client, &mut [0u8; 1]);
        }
        assert_eq!(c.sample().unwrap() + c.settle().unwrap(), 2);
    }
}
