//! [`Netlink`], the real [`NetOps`]: each [`NetStep`] is one or two rtnetlink requests
//! (`netlink-packet-route` messages over a `netlink-sys` socket), answered by the kernel in
//! microseconds, where an `ip` process costs a fork, an exec and its start-up (milliseconds).
//!
//! A step inside a pod's namespace goes through a netlink socket opened in that namespace: a
//! socket stays bound to the network namespace it was created in, so it is created by a
//! short-lived thread that has joined the namespace (`setns`), and used from the caller's thread.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd};

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL,
    NLM_F_REPLACE, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage, AddressScope};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkInfo, LinkMessage, State,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};

use super::{netns, NetOps, NetStep, SandboxError};

/// The real [`NetOps`]: rtnetlink requests, and `/run/netns` files for the namespaces.
#[derive(Debug, Clone, Copy, Default)]
pub struct Netlink;

impl NetOps for Netlink {
    fn apply(&self, in_netns: Option<&str>, steps: &[NetStep]) -> Result<(), SandboxError> {
        let mut conn: Option<Rtnl> = None;
        for step in steps {
            let t = std::time::Instant::now();
            let done = match step {
                NetStep::AddNetns { name } => netns::add(name),
                NetStep::DelNetns { name } => netns::del(name),
                _ => {
                    let rtnl = match &mut conn {
                        Some(c) => Ok(c),
                        None => Rtnl::open(in_netns).map(|c| conn.insert(c)),
                    };
                    rtnl.and_then(|c| c.step(step))
                }
            };
            tracing::debug!(target: "podgrace::start", step = %step.render(in_netns), us = t.elapsed().as_micros() as u64, "net step");
            done.map_err(|source| SandboxError::Net {
                step: step.render(in_netns),
                source,
            })?;
        }
        Ok(())
    }
}

/// One rtnetlink socket, in the namespace it was opened in.
struct Rtnl {
    socket: Socket,
    seq: u32,
}

impl Rtnl {
    /// A socket in the network namespace `/run/netns/<name>`, or in the caller's (the host's).
    fn open(in_netns: Option<&str>) -> io::Result<Rtnl> {
        let Some(name) = in_netns else {
            return Rtnl::here();
        };
        let file = std::fs::File::open(netns::path(name))?;
        std::thread::scope(|s| {
            s.spawn(|| {
                move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network))?;
                Rtnl::here()
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the netlink thread panicked")))
        })
    }

    /// A socket in the calling thread's network namespace.
    fn here() -> io::Result<Rtnl> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(Rtnl { socket, seq: 0 })
    }

    /// Sends `msg` with `flags` (plus REQUEST and ACK) and returns the messages of the answer
    /// before its acknowledgement. Errors: the kernel's errno for the request.
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        packet.finalize();
        let mut out = vec![0; packet.buffer_len()];
        packet.serialize(&mut out);
        self.socket.send(&out, 0)?;
        let mut answers = Vec::new();
        let mut buf: Vec<u8> = Vec::with_capacity(32 * 1024);
        loop {
            buf.clear();
            self.socket.recv(&mut buf, 0)?;
            let mut at = 0;
            while at < buf.len() {
                let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[at..])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = reply.header.length as usize;
                if len == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "empty netlink message",
                    ));
                }
                at += (len + 3) & !3;
                if reply.header.sequence_number != self.seq {
                    continue;
                }
                match reply.payload {
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(answers),
                            Some(_) => Err(e.to_io()),
                        }
                    }
                    NetlinkPayload::Done(_) => return Ok(answers),
                    NetlinkPayload::InnerMessage(m) => answers.push(m),
                    _ => {}
                }
            }
        }
    }

    /// Link `name` in this socket's namespace. Errors: ENODEV when there is none.
    fn link(&mut self, name: &str) -> io::Result<LinkMessage> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        let answers = self.request(RouteNetlinkMessage::GetLink(msg), 0)?;
        answers
            .into_iter()
            .find_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(l),
                _ => None,
            })
            .ok_or_else(|| io::Error::from_raw_os_error(rustix::io::Errno::NODEV.raw_os_error()))
    }

    /// The index of link `name` in this socket's namespace. Errors: ENODEV when there is none.
    fn index(&mut self, name: &str) -> io::Result<u32> {
        Ok(self.link(name)?.header.index)
    }

    /// Waits until link `name` is operationally up: the kernel's link watch has run for it
    /// and attached its queueing discipline. Until then (a workqueue, asynchronous to the
    /// request that set the link up) the device drops what is sent through it, so a pod's
    /// first SYN would be lost and retried only after TCP's 1 s initial timeout.
    /// Errors: `TimedOut` after [`LINK_UP_TIMEOUT`].
    fn wait_up(&mut self, name: &str) -> io::Result<()> {
        let deadline = std::time::Instant::now() + LINK_UP_TIMEOUT;
        let mut pause = std::time::Duration::from_micros(50);
        loop {
            let link = self.link(name)?;
            let up = link
                .attributes
                .iter()
                .any(|a| matches!(a, LinkAttribute::OperState(State::Up)));
            if up {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{name} not operationally up after {} ms",
                        LINK_UP_TIMEOUT.as_millis()
                    ),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(5));
        }
    }

    fn step(&mut self, step: &NetStep) -> io::Result<()> {
        let create = NLM_F_CREATE | NLM_F_EXCL;
        match step {
            NetStep::AddVeth { host, peer, netns } => {
                let ns = std::fs::File::open(netns::path(netns))?;
                // One queue each way on both ends, said explicitly: a veth left to its default
                // gets a queue per possible CPU and is then cut to one real queue, and that cut
                // (`netif_set_real_num_tx_queues` on a registered device) waits for an RCU grace
                // period while holding the RTNL lock, once per end: every other pod's network
                // set-up waited for it (seen with `perf record -e sched:sched_switch -g`).
                let queues = [LinkAttribute::NumTxQueues(1), LinkAttribute::NumRxQueues(1)];
                let mut peer_msg = LinkMessage::default();
                peer_msg
                    .attributes
                    .push(LinkAttribute::IfName(peer.clone()));
                peer_msg
                    .attributes
                    .push(LinkAttribute::NetNsFd(ns.as_raw_fd()));
                peer_msg.attributes.extend(queues.iter().cloned());
                let mut msg = LinkMessage::default();
                msg.attributes.push(LinkAttribute::IfName(host.clone()));
                msg.attributes.extend(queues.iter().cloned());
                msg.attributes.push(LinkAttribute::LinkInfo(vec![
                    LinkInfo::Kind(InfoKind::Veth),
                    LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer_msg))),
                ]));
                self.request(RouteNetlinkMessage::NewLink(msg), create)?;
                drop(ns);
            }
            NetStep::LinkUp { link } => {
                let index = self.index(link)?;
                let mut msg = LinkMessage::default();
                msg.header.index = index;
                msg.header.flags = LinkFlags::Up;
                msg.header.change_mask = LinkFlags::Up;
                self.request(RouteNetlinkMessage::SetLink(msg), 0)?;
            }
            NetStep::AddAddress { link, addr } => {
                let index = self.index(link)?;
                let mut msg = AddressMessage::default();
                msg.header.family = AddressFamily::Inet;
                msg.header.prefix_len = 32;
                msg.header.scope = AddressScope::Universe;
                msg.header.index = index;
                // IFA_LOCAL and IFA_ADDRESS, as iproute2 sends for an IPv4 address.
                msg.attributes.push(AddressAttribute::Local((*addr).into()));
                msg.attributes
                    .push(AddressAttribute::Address((*addr).into()));
                self.request(RouteNetlinkMessage::NewAddress(msg), create)?;
            }
            NetStep::AddRoute { dest, link, src } => {
                let index = self.index(link)?;
                let mut msg = route(*dest, 32, RouteType::Unicast, RouteScope::Link);
                msg.attributes.push(RouteAttribute::Oif(index));
                if let Some(src) = src {
                    msg.attributes
                        .push(RouteAttribute::PrefSource(RouteAddress::Inet(*src)));
                }
                self.request(RouteNetlinkMessage::NewRoute(msg), create)?;
            }
            NetStep::FenceRange { base } => {
                let msg = route(*base, 24, RouteType::Unreachable, RouteScope::Universe);
                self.request(
                    RouteNetlinkMessage::NewRoute(msg),
                    NLM_F_CREATE | NLM_F_REPLACE,
                )?;
            }
            NetStep::WaitUp { link } => self.wait_up(link)?,
            NetStep::DelLink { link } => {
                let index = self.index(link)?;
                let mut msg = LinkMessage::default();
                msg.header.index = index;
                self.request(RouteNetlinkMessage::DelLink(msg), 0)?;
            }
            NetStep::AddNetns { .. } | NetStep::DelNetns { .. } => {
                return Err(io::Error::other("a namespace step has no netlink request"))
            }
        }
        Ok(())
    }
}

/// How long [`NetStep::WaitUp`] waits for a link to be operationally up.
const LINK_UP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A main-table IPv4 route to `dest/len`, protocol `boot` (what `ip route add` sets).
fn route(dest: Ipv4Addr, len: u8, kind: RouteType, scope: RouteScope) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = AddressFamily::Inet;
    msg.header.destination_prefix_length = len;
    msg.header.table = RouteHeader::RT_TABLE_MAIN;
    msg.header.protocol = RouteProtocol::Boot;
    msg.header.scope = scope;
    msg.header.kind = kind;
    msg.attributes
        .push(RouteAttribute::Destination(RouteAddress::Inet(dest)));
    msg
}
