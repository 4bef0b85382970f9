//! TCP sockets of this network namespace through `NETLINK_SOCK_DIAG` (the kernel's `inet_diag`,
//! what `ss` uses), for [`ConnectionCounter`](crate::connections::ConnectionCounter) with ports.
//!
//! Why not `/proc/net/tcp`: the kernel formats a text line for every socket of the namespace
//! (thousands of `TIME_WAIT` sockets of another listener under traffic), and the reader then
//! parses them all. A dump here is filtered by the kernel before anything is copied: by state
//! (the request's state mask) and by local port (the request's `idiag_sport`), so only the
//! watched port's sockets come back, as fixed-size binary records. The kernel still walks its
//! whole established-connection hash table for each dump of one family (it is the host's, shared
//! by every namespace: 262,144 buckets on a 24 GB host, about 2–4 ms), which is why the counter
//! dumps only when and as often as it must. Listening sockets are in a much smaller table of
//! their own: a dump of the listeners costs tens of microseconds.
//!
//! Upstream: `net/ipv4/inet_diag.c` (`inet_diag_dump_icsk`: the `idiag_sport` and state
//! checks), `include/uapi/linux/inet_diag.h` (the request and its records).

use std::io;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};

/// The two families a TCP socket can have.
pub const FAMILIES: [u8; 2] = [AF_INET, AF_INET6];

/// `TCP_LISTEN` (as in `/proc/net/tcp`'s `st` column).
const TCP_LISTEN: u8 = 10;

/// The receive buffer: 8 KiB (two pages). The kernel sizes each dump message to the reader's
/// buffer, so a small one costs more `recv` calls but never truncates.
const RECV_BUFFER: usize = 8 * 1024;

/// One socket of a dump, as far as the counter needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiagSocket {
    /// The local port.
    pub local_port: u16,
    /// The kernel's state number (`TCP_ESTABLISHED` 1 ... `TCP_LISTEN` 10).
    pub state: u8,
    /// The socket's cookie: the kernel's unique 64-bit identifier of the socket, kept when it
    /// goes to `TIME_WAIT` (`sock_gen_cookie`, `inet_twsk_alloc`).
    pub cookie: u64,
}

/// A `NETLINK_SOCK_DIAG` socket of the calling thread's network namespace.
pub struct SockDiag {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl std::fmt::Debug for SockDiag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SockDiag").field("seq", &self.seq).finish()
    }
}

impl SockDiag {
    /// Opens the socket. Errors: the kernel's refusal (`EPROTONOSUPPORT` without `inet_diag`,
    /// `EACCES`/`EPERM` under a seccomp or LSM policy that forbids it).
    pub fn open() -> io::Result<SockDiag> {
        let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(SockDiag {
            socket,
            seq: 0,
            buf: Vec::with_capacity(RECV_BUFFER),
        })
    }

    /// The listening TCP sockets of `family` (any port).
    /// Errors: the kernel's errno for the dump, or a message it sent that does not parse.
    pub fn listeners(&mut self, family: u8, each: impl FnMut(DiagSocket)) -> io::Result<()> {
        self.dump(family, StateFlags::LISTEN, 0, each)
    }

    /// The TCP sockets of `family` on local port `port` in any state but `LISTEN` and
    /// `SYN_RECV` (and the request sockets of half-open handshakes, which a state mask without
    /// bit 12, `TCP_NEW_SYN_RECV`, leaves out): the connections accepted or being closed.
    /// Errors: as [`SockDiag::listeners`].
    pub fn connections(
        &mut self,
        family: u8,
        port: u16,
        each: impl FnMut(DiagSocket),
    ) -> io::Result<()> {
        let states = StateFlags::all() - StateFlags::LISTEN - StateFlags::SYN_RECV;
        self.dump(family, states, port, each)
    }

    fn dump(
        &mut self,
        family: u8,
        states: StateFlags,
        port: u16,
        mut each: impl FnMut(DiagSocket),
    ) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let mut socket_id = if family == AF_INET6 {
            SocketId::new_v6()
        } else {
            SocketId::new_v4()
        };
        // The kernel compares a non-zero idiag_sport with each socket's local port.
        socket_id.source_port = port;
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(
            header,
            SockDiagMessage::InetRequest(InetRequest {
                family,
                protocol: IPPROTO_TCP,
                extensions: ExtensionFlags::empty(),
                states,
                socket_id,
            })
            .into(),
        );
        packet.finalize();
        let mut out = [0u8; 128];
        let len = packet.buffer_len();
        let out = out
            .get_mut(..len)
            .ok_or_else(|| invalid("request too long"))?;
        packet.serialize(out);
        self.socket.send(out, 0)?;
        loop {
            self.buf.clear();
            self.socket.recv(&mut self.buf, 0)?;
            let mut at = 0;
            while at < self.buf.len() {
                let reply = NetlinkMessage::<SockDiagMessage>::deserialize(&self.buf[at..])
                    .map_err(|e| invalid(&e.to_string()))?;
                let len = reply.header.length as usize;
                if len == 0 {
                    return Err(invalid("empty netlink message"));
                }
                at += (len + 3) & !3;
                if reply.header.sequence_number != self.seq {
                    continue;
                }
                match reply.payload {
                    NetlinkPayload::Done(_) => return Ok(()),
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(()),
                            Some(_) => Err(e.to_io()),
                        }
                    }
                    NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                        each(DiagSocket {
                            local_port: r.header.socket_id.source_port,
                            state: r.header.state,
                            cookie: u64::from_ne_bytes(r.header.socket_id.cookie),
                        })
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Whether `s` is a listening socket.
pub fn is_listener(s: &DiagSocket) -> bool {
    s.state == TCP_LISTEN
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("sock_diag: {msg}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn dumps_list_listeners_and_the_connections_of_one_port_only() {
        let mut d = SockDiag::open().expect("NETLINK_SOCK_DIAG");
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        let (pa, pb) = (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        );
        let mut listening = HashSet::new();
        d.listeners(AF_INET, |s| {
            assert!(is_listener(&s));
            listening.insert(s.local_port);
        })
        .unwrap();
        assert!(listening.contains(&pa) && listening.contains(&pb));
        let _c1 = TcpStream::connect(a.local_addr().unwrap()).unwrap();
        let _c2 = TcpStream::connect(a.local_addr().unwrap()).unwrap();
        let _c3 = TcpStream::connect(b.local_addr().unwrap()).unwrap();
        // The server sides exist once the handshake is done, accepted or not.
        let (_s1, _s2) = (a.accept().unwrap(), a.accept().unwrap());
        let mut on_a = Vec::new();
        d.connections(AF_INET, pa, |s| on_a.push(s)).unwrap();
        assert_eq!(on_a.len(), 2, "{on_a:?}");
        assert!(on_a.iter().all(|s| s.local_port == pa && s.state == 1));
        assert_ne!(on_a[0].cookie, on_a[1].cookie);
        let mut on_b = 0;
        d.connections(AF_INET, pb, |_| on_b += 1).unwrap();
        assert_eq!(on_b, 1);
    }
}
