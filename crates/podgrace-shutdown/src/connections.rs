//! New TCP connections arriving in this network namespace, read from the kernel's own counters.
//!
//! * Without ports: `Tcp: PassiveOpens` of `/proc/net/snmp`, the namespace's count of
//!   connections accepted from the network (RFC 1213 `tcpPassiveOpens`, incremented when the
//!   three-way handshake completes). One small file read per sample, whatever the traffic.
//! * With ports: when every listening socket of the namespace is on one of them (a pod whose
//!   only other port is not listening), every passive open is theirs and `PassiveOpens` is
//!   enough; the listeners are checked again at every [`LISTENER_RECHECK`]th sample that saw
//!   passive opens. Otherwise: the sockets of `/proc/net/tcp` and `/proc/net/tcp6` whose local
//!   port is one of them, in any state but `LISTEN` and `SYN_RECV`, keyed by their address pair:
//!   a pair not seen at the previous sample is a new connection. The tables are read only when
//!   `PassiveOpens` moved (no passive open anywhere in the namespace means none on these ports
//!   either), so an idle pod costs one small read per sample. A table read is expensive: the
//!   kernel walks its whole established-connection hash table (several milliseconds on a host
//!   with much memory, whatever the namespace holds), which is why it is avoided when it can be.
//!   A connection that opens and is gone entirely between two samples on a watched port is
//!   missed (one the server closed first stays in `TIME_WAIT` and is seen).
//!
//! `/proc/net` is the reading process's own network namespace, so inside a pod these are the
//! pod's connections only. Parsing is pure ([`parse_passive_opens`], [`parse_tcp_table`]);
//! [`ConnectionCounter`] does the reading.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

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

/// With ports and only watched listeners, the listeners are read again at every this many
/// samples that saw passive opens: 50 (5 s under constant traffic at 100 ms samples).
pub const LISTENER_RECHECK: u32 = 50;

/// Counts new connections between samples (see the module docs).
#[derive(Debug)]
pub struct ConnectionCounter {
    proc_net: PathBuf,
    ports: Vec<u16>,
    passive_opens: u64,
    /// With ports: the address pairs seen at the last table read.
    seen: HashSet<(String, String)>,
    /// With ports: every listener was on a watched port at the last table read.
    only_watched_listeners: bool,
    /// Samples with passive opens since the last table read.
    since_read: u32,
}

impl ConnectionCounter {
    /// A counter over `/proc/net`, limited to `ports` if not empty; its baseline is read now.
    /// Errors: [`CounterError`] if the counters cannot be read.
    pub fn new(ports: &[u16]) -> Result<Self, CounterError> {
        Self::at(Path::new("/proc/net"), ports)
    }

    /// [`ConnectionCounter::new`] over another directory laid out as `/proc/net` (for tests).
    pub fn at(proc_net: &Path, ports: &[u16]) -> Result<Self, CounterError> {
        let mut c = ConnectionCounter {
            proc_net: proc_net.to_path_buf(),
            ports: ports.to_vec(),
            passive_opens: 0,
            seen: HashSet::new(),
            only_watched_listeners: false,
            since_read: 0,
        };
        c.passive_opens = c.read_passive_opens()?;
        if !c.ports.is_empty() {
            (c.seen, c.only_watched_listeners) = c.read_port_pairs()?;
        }
        Ok(c)
    }

    /// The ports watched (empty: every port).
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// New connections since the previous sample (or the baseline). Errors: [`CounterError`].
    pub fn sample(&mut self) -> Result<u64, CounterError> {
        let opens = self.read_passive_opens()?;
        // A counter that went backwards (it cannot in one namespace) counts as no change.
        let moved = opens.saturating_sub(self.passive_opens);
        self.passive_opens = opens;
        if moved == 0 {
            return Ok(0);
        }
        if self.ports.is_empty() {
            return Ok(moved);
        }
        self.since_read += 1;
        if self.only_watched_listeners && self.since_read < LISTENER_RECHECK {
            return Ok(moved);
        }
        self.since_read = 0;
        let (now, only_watched) = self.read_port_pairs()?;
        // While every listener was watched, the passive opens were all ours (and the pairs
        // were not kept up to date, so their difference would count old connections again).
        let new = if self.only_watched_listeners {
            moved
        } else {
            now.difference(&self.seen).count() as u64
        };
        self.seen = now;
        self.only_watched_listeners = only_watched;
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

    /// The address pairs of connections on the watched ports, from `tcp` and `tcp6` (a missing
    /// `tcp6`, on a kernel without IPv6, is an empty table), and whether every listening socket
    /// is on a watched port.
    fn read_port_pairs(&self) -> Result<(HashSet<(String, String)>, bool), CounterError> {
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
                    pairs.insert((s.local, s.remote));
                }
            }
        }
        Ok((pairs, only_watched))
    }
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
}
