//! Open-loop HTTP load (HTTP/1.1 or h2c) at a fixed rate, without coordinated omission.
//!
//! Request `i` is due at the intended time `t0 + i / rps` whatever happened to earlier ones; its
//! latency is measured from that intended time, so a stalled server cannot hide failures or slow
//! answers by delaying the sends (the "coordinated omission" of closed-loop tools). `connections`
//! worker tasks share the schedule ([`Schedule`]): a free worker claims the next request index (an
//! atomic counter, so indices go out in order), waits until it is due and sends it; when every
//! worker is busy the next request waits to be claimed, and its latency still counts from its due
//! time. Each worker owns one connection as a real client pool does: the connection is reused, and
//! replaced when it errors or the server closes it. No task is spawned per request and no queue
//! sits between the schedule and the workers.
//!
//! The [`Protocol`] is HTTP/1.1 (keep-alive; each worker drives its connection itself, no hop
//! between tasks) or cleartext HTTP/2 with prior knowledge (h2c): each worker owns one HTTP/2
//! connection and sends its requests on it one at a time (one stream at a time, so the pool still
//! bounds concurrency), as a gRPC channel per worker would. A connection that gets a GOAWAY or
//! closes is replaced for the next request. hyper runs the HTTP/2 connection itself in a task of
//! its own; the worker drives the request dispatch.
//!
//! An h2c request refused by a GOAWAY is retried once on a new connection, as gRPC and Go's
//! HTTP/2 client do: a server that starts a graceful shutdown sends GOAWAY(last_stream_id), and a
//! stream the client opened with a higher id was not processed, so it may safely go elsewhere
//! (e.g. a request sent a fraction of a millisecond before the GOAWAY arrived). The case is
//! detected precisely ([`refused_by_goaway`]): hyper says the request was canceled (never sent,
//! the connection was closing), or the error's source is the server's GOAWAY with reason
//! `NO_ERROR`. The worker then drops the connection and sends the same request (same index) on a
//! new one, at most once more; the refused attempt leaves no record, the request's `sent` time
//! and latency still count from the first attempt and its intended time, and one timeout covers
//! both attempts. If the retry fails too, that outcome is recorded. HTTP/1.1 requests are never
//! retried.
//!
//! # Client kinds ([`ClientKind`])
//! What a client does with its connections decides what it sees when a pod goes (case
//! `real-kube-proxy-1.32.md`): `new-connection` opens one connection per request (with
//! `Connection: close`), as `curl` in a loop or a client without a pool does; `keep-alive` reuses
//! its connection and writes the next request into it without looking whether the server closed
//! it meanwhile (many HTTP/1.1 clients: Python's `http.client`, Java's `HttpURLConnection`, a
//! blocking socket client), so a close that came while it was idle costs that request;
//! `keep-alive-careful` (the default) notices a connection the server closed while it was idle and
//! opens a new one for the next request, as urllib3 (`is_connection_dropped`), Go's `net/http`
//! (its read loop sees the EOF) and hyper's pool do.
//!
//! Failure kinds ([`RequestOutcome`]), named as the client sees them: `refused` (the connect was
//! refused, or failed otherwise), `connectTimeout` (the request timeout ran out while the TCP
//! connect was still waiting for the SYN's answer), `eof` (the connection was closed before a
//! full response; on a reused connection, "EOF on reuse"), `reset` (the connection was reset:
//! ECONNRESET or EPIPE), `timeout` (connected, but no full response within the request timeout,
//! counted from the actual send), `http5xx` (a 5xx status; only a proxy that answers HTTP, an
//! ingress, or the app itself sends one). Other statuses count as successes (the exchange worked);
//! the status is kept in the record.

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper::header::HOST;
use hyper::{Method, Request, Response, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The request header carrying a request's schedule index, so that the proxy's records can be
/// joined with the load's (`x-podgrace-request: 17`).
pub const REQUEST_ID_HEADER: &str = "x-podgrace-request";

/// The HTTP version the load speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// HTTP/1.1 with keep-alive (the default).
    #[default]
    Http1,
    /// Cleartext HTTP/2 with prior knowledge (no Upgrade), one stream at a time per connection.
    H2c,
}

/// What a client does with its connections (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientKind {
    /// One connection per request, closed after it (`Connection: close`).
    NewConnection,
    /// Reuses its connection and writes the next request into it without checking whether the
    /// server closed it while it was idle.
    KeepAlive,
    /// Reuses its connection, but drops one the server closed while it was idle and opens a new
    /// one for the next request (urllib3, Go's net/http, hyper's pool). The default.
    #[default]
    KeepAliveCareful,
}

impl ClientKind {
    /// `new-connection`, `keep-alive` or `keep-alive-careful`.
    pub fn name(self) -> &'static str {
        match self {
            ClientKind::NewConnection => "new-connection",
            ClientKind::KeepAlive => "keep-alive",
            ClientKind::KeepAliveCareful => "keep-alive-careful",
        }
    }
}

/// The load's settings.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Where requests go (the proxy).
    pub target: SocketAddr,
    /// `--rps`: requests per second (default 200).
    pub rps: f64,
    /// `--duration`: how long requests are scheduled for.
    pub duration: Duration,
    /// Connections in the pool (default 32), one per worker: HTTP/1.1 keep-alive connections or
    /// HTTP/2 connections, each with one request in flight at most.
    pub connections: usize,
    /// HTTP/1.1 (default) or h2c.
    pub protocol: Protocol,
    /// What the client does with its connections (default [`ClientKind::KeepAliveCareful`]).
    pub client: ClientKind,
    /// `--path` (default `/`).
    pub path: String,
    /// `--method` (default GET).
    pub method: Method,
    /// Per-request timeout, from the actual send (default 5 s).
    pub timeout: Duration,
    /// The instant record times count from (the drill's t = 0); the schedule starts at `run`.
    pub epoch: Instant,
}

impl LoadConfig {
    /// Defaults: 200 rps for `duration`, 32 HTTP/1.1 connections, `GET /`, 5 s timeout, epoch now.
    pub fn new(target: SocketAddr, duration: Duration) -> Self {
        LoadConfig {
            target,
            rps: 200.0,
            duration,
            connections: 32,
            protocol: Protocol::Http1,
            client: ClientKind::KeepAliveCareful,
            path: "/".to_string(),
            method: Method::GET,
            timeout: Duration::from_secs(5),
            epoch: Instant::now(),
        }
    }
}

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RequestOutcome {
    /// A full response with a status below 500.
    Ok,
    /// The connection could not be made: refused (RST to the SYN) or otherwise failed.
    Refused,
    /// The request timeout ran out while the TCP connect still waited for an answer to its SYN
    /// (the pod's address is gone; the client's whole timeout is spent).
    ConnectTimeout,
    /// The connection was closed (FIN, read EOF) before a full response: on a reused keep-alive
    /// connection, "EOF on reuse".
    Eof,
    /// The connection was reset (ECONNRESET, or EPIPE writing into a reset connection).
    Reset,
    /// Connected, but no full response within the request timeout.
    Timeout,
    /// A 5xx response.
    Http5xx,
}

impl RequestOutcome {
    /// `true` for every outcome but [`RequestOutcome::Ok`].
    pub fn is_failure(self) -> bool {
        self != RequestOutcome::Ok
    }
}

/// One request; times are since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// Its number in the schedule (from 0).
    pub index: u64,
    /// When it was due: `start + index / rps`.
    pub intended: Duration,
    /// When a worker took it up (connect included in what follows).
    pub sent: Duration,
    /// When it completed or failed.
    pub done: Duration,
    /// How it ended, as the client saw it.
    pub outcome: RequestOutcome,
    /// The HTTP status, if a response head arrived.
    pub status: Option<u16>,
    /// The local port of the connection it went out on (`None` if no connection was had): with a
    /// pinning proxy it names the pod even when the proxy never saw the request (one written
    /// just as the pod's close reached the client).
    pub client_port: Option<u16>,
    /// When the connection it went out on started connecting, since the epoch (`None` if none
    /// was tried).
    pub connected: Option<Duration>,
    /// It went out on a connection that had carried an earlier request (keep-alive reuse).
    pub reused: bool,
    /// Its first attempt was refused by a GOAWAY (h2c, not processed) and it was sent again on a
    /// new connection; `sent` is still the first attempt's, `connected` the new connection's.
    pub retried: bool,
}

impl RequestRecord {
    /// Latency from the intended send time (no coordinated omission).
    pub fn latency(&self) -> Duration {
        self.done.saturating_sub(self.intended)
    }
}

/// The result of a [`run`].
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// Every request, ordered by index.
    pub records: Vec<RequestRecord>,
    /// Latencies from the intended send time, in microseconds (every request, failures too).
    pub latency_us: Histogram<u64>,
    /// Requests sent per second, from the first actual send to the last
    /// (`(n − 1) / (last − first)`); `0` with fewer than 2 requests.
    pub achieved_rps: f64,
    /// The worst delay of an actual send behind its intended time.
    pub max_send_lag: Duration,
}

/// Errors of [`run`].
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LoadError {
    /// The rate is not a positive, finite number of requests per second.
    #[error("the rate must be a positive, finite number of requests per second, not {0}")]
    BadRate(f64),
    /// The connection pool size is 0.
    #[error("the connection pool needs at least one connection")]
    NoConnections,
    /// The path is not a valid request target.
    #[error("the path {0:?} is not a valid request target")]
    BadPath(String),
    /// hdrhistogram refused the bounds.
    #[error("cannot make the latency histogram: {0}")]
    Histogram(String),
    /// The schedule holds more than `MAX_REQUESTS` requests.
    #[error("{0} requests is more than one run keeps records of (at most {MAX_REQUESTS}); lower the rate or the duration")]
    TooManyRequests(u64),
}

/// The most requests one run schedules: 10,000,000 (its records take about 640 MB).
pub const MAX_REQUESTS: u64 = 10_000_000;

/// A connection's request sender.
enum Sender {
    H1(http1::SendRequest<Empty<Bytes>>),
    H2(http2::SendRequest<Empty<Bytes>>),
}

/// A connection's driver: the HTTP/1.1 connection itself, or hyper's HTTP/2 request dispatch
/// (the HTTP/2 connection runs in a task of hyper's own). It ends when the connection closes, or,
/// for HTTP/2, when a GOAWAY arrives.
enum Driver {
    H1(ConnTask),
    /// HTTP/1.1 of the `keep-alive` client: driven only while a request is in flight, and reading
    /// only after the request was written ([`WriteFirst`]).
    H1Inline(Pin<Box<H1Inline>>),
    H2(Pin<Box<H2Dispatch>>),
}

type H1Inline = http1::Connection<TokioIo<WriteFirst>, Empty<Bytes>>;

/// The socket of the `keep-alive` client: like a blocking client, it reads only once the request
/// has been written, so a close the server sent while the connection was idle is found only
/// after the next request went into it (EOF, or a reset once the server's kernel answers the
/// data with RST). Reads are closed again after each response ([`WriteFirst::close_reads`]).
pub(crate) struct WriteFirst {
    inner: TcpStream,
    reads: Arc<std::sync::atomic::AtomicBool>,
}

impl WriteFirst {
    fn gate(&self) -> Arc<std::sync::atomic::AtomicBool> {
        Arc::clone(&self.reads)
    }
}

impl tokio::io::AsyncRead for WriteFirst {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !this.reads.load(Ordering::Acquire) {
            // Not looking at the socket between requests; the write that opens the gate wakes
            // the task again.
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for WriteFirst {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) && !this.reads.swap(true, Ordering::AcqRel) {
            cx.waker().wake_by_ref();
        }
        if matches!(r, Poll::Ready(Err(_))) {
            // Writing failed (EPIPE after the server's RST): what follows is read from the socket.
            this.reads.store(true, Ordering::Release);
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// An HTTP/1.1 connection running in a task of its own (hyper's usual shape): on a
/// multi-threaded runtime the connection's I/O and the worker's request handling run in parallel,
/// which measured 15% more requests per second than driving both in one task. Dropping it aborts
/// the task, closing the connection.
struct ConnTask(tokio::task::JoinHandle<()>);

impl Drop for ConnTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
type H2Dispatch = http2::Connection<TokioIo<TcpStream>, Empty<Bytes>, TokioExecutor>;

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.get_mut() {
            Driver::H1(t) => Pin::new(&mut t.0).poll(cx).map(|_| ()),
            Driver::H1Inline(d) => d.as_mut().poll(cx).map(|_| ()),
            Driver::H2(d) => d.as_mut().poll(cx).map(|_| ()),
        }
    }
}

/// One client connection (HTTP/1.1 or h2c), driven by the task that uses it.
pub(crate) struct Conn {
    tx: Sender,
    /// The connection's local port.
    local_port: Option<u16>,
    /// `None` once the driver has ended: the connection closed (or got a GOAWAY) and takes no new
    /// request. An ended driver is dropped at once, which fails any request it still held.
    driver: Option<Driver>,
    /// The read gate of a `keep-alive` client's connection ([`WriteFirst`]).
    reads: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// A duplicate of an HTTP/1.1 connection's socket, to look at while it is idle
    /// ([`Conn::has_ended`]) without waiting for the connection's own task to run.
    socket: Option<std::os::fd::OwnedFd>,
    /// When it started connecting (monotonic).
    pub(crate) opened: Instant,
    /// Requests sent on it so far.
    pub(crate) used: u64,
}

/// Why a connection could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectError {
    /// The TCP connect failed; the I/O error's kind as a request outcome (`Refused`, or
    /// `Timeout`/`Reset` for those kinds).
    Connect(RequestOutcome),
    /// The HTTP handshake failed.
    Handshake,
}

impl ConnectError {
    fn outcome(self) -> RequestOutcome {
        match self {
            ConnectError::Connect(kind) => kind,
            ConnectError::Handshake => RequestOutcome::Reset,
        }
    }
}

impl Conn {
    /// Finishes a connect begun by [`start_connect`] and makes the HTTP handshake (HTTP/2: prior
    /// knowledge); `writing` makes an HTTP/1.1 connection of the `keep-alive` client
    /// ([`WriteFirst`]).
    pub(crate) async fn handshake(
        pending: PendingConnect,
        protocol: Protocol,
        writing: bool,
    ) -> Result<Conn, ConnectError> {
        let opened = pending.opened;
        let stream = pending
            .finish()
            .await
            .map_err(|e| ConnectError::Connect(classify_io(&e)))?;
        let _ = stream.set_nodelay(true);
        let local_port = stream.local_addr().ok().map(|a| a.port());
        if writing && protocol == Protocol::Http1 {
            let io = WriteFirst {
                inner: stream,
                reads: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            };
            let gate = io.gate();
            let (tx, driver) = http1::handshake(TokioIo::new(io))
                .await
                .map_err(|_| ConnectError::Handshake)?;
            return Ok(Conn {
                tx: Sender::H1(tx),
                local_port,
                driver: Some(Driver::H1Inline(Box::pin(driver))),
                reads: Some(gate),
                socket: None,
                opened,
                used: 0,
            });
        }
        let socket = match protocol {
            Protocol::Http1 => std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned().ok(),
            Protocol::H2c => None,
        };
        let io = TokioIo::new(stream);
        let (tx, driver) = match protocol {
            Protocol::Http1 => {
                let (tx, driver) = http1::handshake(io)
                    .await
                    .map_err(|_| ConnectError::Handshake)?;
                let task = tokio::spawn(async move {
                    let _ = driver.await;
                });
                (Sender::H1(tx), Driver::H1(ConnTask(task)))
            }
            Protocol::H2c => {
                let (tx, driver) = http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(|_| ConnectError::Handshake)?;
                (Sender::H2(tx), Driver::H2(Box::pin(driver)))
            }
        };
        Ok(Conn {
            tx,
            local_port,
            driver: Some(driver),
            reads: None,
            socket,
            opened,
            used: 0,
        })
    }

    /// The connection's local port (`None` if the socket could not say).
    pub(crate) fn local_port(&self) -> Option<u16> {
        self.local_port
    }

    /// After a full response: a `keep-alive` client stops looking at the socket until it writes
    /// the next request.
    pub(crate) fn close_reads(&self) {
        if let Some(g) = &self.reads {
            g.store(false, Ordering::Release);
        }
    }

    /// `true` while the connection can take a new request (not closed, no GOAWAY seen).
    ///
    /// For HTTP/2 this polls hyper's request dispatch once: it notices a GOAWAY only when polled,
    /// and would otherwise fail the next request instead of letting it go on a new connection.
    pub(crate) fn usable(&mut self) -> bool {
        let open = match &self.tx {
            Sender::H1(tx) => !tx.is_closed(),
            Sender::H2(tx) => !tx.is_closed(),
        };
        if let (Sender::H2(_), Some(d)) = (&self.tx, self.driver.as_mut()) {
            let waker = std::task::Waker::noop();
            if Pin::new(d).poll(&mut Context::from_waker(waker)).is_ready() {
                self.driver = None;
            }
        }
        open && self.driver.is_some()
    }

    /// Whether the connection has ended by now, without waiting. An idle HTTP/1.1 connection
    /// whose socket is readable (the server's FIN, a reset, or bytes nobody asked for) has: its
    /// socket is polled at once, as urllib3's `is_connection_dropped` does, since the
    /// connection's own task may not have run since the close came. Otherwise (h2c) its driver
    /// is polled once (a close or a GOAWAY already read). An ended connection has no driver.
    pub(crate) fn has_ended(&mut self) -> bool {
        if let Some(fd) = &self.socket {
            use rustix::event::{PollFd, PollFlags, Timespec};
            let mut fds = [PollFd::new(fd, PollFlags::IN | PollFlags::RDHUP)];
            let now = Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            if rustix::event::poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0) {
                self.driver = None;
            }
        }
        if let Some(d) = self.driver.as_mut() {
            let waker = std::task::Waker::noop();
            if Pin::new(d).poll(&mut Context::from_waker(waker)).is_ready() {
                self.driver = None;
            }
        }
        self.driver.is_none()
    }

    /// Waits until the connection ends (closes or, for HTTP/2, gets a GOAWAY); at once if it
    /// already has.
    pub(crate) async fn ended(&mut self) {
        if let Some(d) = self.driver.as_mut() {
            d.await;
            self.driver = None;
        }
    }

    /// Runs `fut` while driving the connection, and returns its output. When the connection ends
    /// meanwhile, `fut` runs on (it then resolves with what had arrived, or with an error).
    pub(crate) async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        drive(&mut self.driver, fut).await
    }

    /// Sends `req` when the connection is ready, while driving it, and returns the response head.
    ///
    /// Errors: the connection was closed or broke before the response head.
    pub(crate) async fn request(
        &mut self,
        req: Request<Empty<Bytes>>,
    ) -> Result<Response<Incoming>, hyper::Error> {
        drive(&mut self.driver, send(&mut self.tx, req)).await
    }
}

/// A TCP connect in progress: its SYN is out and its local port known.
pub(crate) struct PendingConnect {
    stream: TcpStream,
    opened: Instant,
}

impl PendingConnect {
    /// Waits until the connect is done (writable), and returns its outcome.
    async fn finish(self) -> std::io::Result<TcpStream> {
        self.stream.writable().await?;
        if let Some(e) = self.stream.take_error()? {
            return Err(e);
        }
        // Not connected after all (writable on an error the socket has already forgotten).
        self.stream.peer_addr()?;
        Ok(self.stream)
    }
}

/// Starts a non-blocking TCP connect to `target`, as a client's `connect()` does (the kernel
/// picks the local port, with its own ephemeral-port choice): the local port, and the connect
/// to finish. Knowing the port before the connect ends is what ties a connect that never
/// completes to its conntrack entry.
pub(crate) fn start_connect(target: SocketAddr) -> std::io::Result<(u16, PendingConnect)> {
    use rustix::net::{
        connect, getsockname, ipproto, socket_with, AddressFamily, SocketFlags, SocketType,
    };
    let family = if target.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let opened = Instant::now();
    let fd = socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        Some(ipproto::TCP),
    )?;
    match connect(&fd, &target) {
        Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
        Err(e) => return Err(e.into()),
    }
    let port = SocketAddr::try_from(getsockname(&fd)?)
        .map_err(|_| std::io::Error::other("not an inet socket"))?
        .port();
    let std_stream = std::net::TcpStream::from(fd);
    let stream = TcpStream::from_std(std_stream)?;
    Ok((port, PendingConnect { stream, opened }))
}

/// Runs `fut` while polling `driver`; an ended driver is dropped (set to `None`).
async fn drive<F: Future>(driver: &mut Option<Driver>, fut: F) -> F::Output {
    tokio::pin!(fut);
    loop {
        // An HTTP/1.1 connection runs in its own task: `fut` fails by itself if it ends.
        let Some(d) = driver.as_mut().filter(|d| !matches!(d, Driver::H1(_))) else {
            return fut.await;
        };
        tokio::select! {
            r = fut.as_mut() => return r,
            _ = d => {}
        }
        // The connection ended; `fut` now resolves (with its response if it was complete, else
        // with an error).
        *driver = None;
    }
}

/// `true` when `e`, the error of an h2c request, says that the server did not process the
/// request, so that it may be sent again on another connection: hyper canceled it (it was never
/// sent: the connection was closing), or an [`h2::Error`] in its source chain is a GOAWAY the
/// server sent with reason `NO_ERROR` (a graceful shutdown whose last stream id is below the
/// request's, or one that had arrived before the request was sent), or a stream reset by the
/// server with `REFUSED_STREAM` (RFC 9113 §8.7: not processed; the proxy sends it for a stream its
/// pod refused). Any other error (another reset, a broken connection, a GOAWAY with an error
/// code) is `false`.
pub(crate) fn refused_by_goaway(e: &hyper::Error) -> bool {
    if e.is_canceled() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h2) = s.downcast_ref::<h2::Error>() {
            return h2.is_remote()
                && match h2.reason() {
                    Some(h2::Reason::NO_ERROR) => h2.is_go_away(),
                    Some(h2::Reason::REFUSED_STREAM) => h2.is_reset(),
                    _ => false,
                };
        }
        source = s.source();
    }
    false
}

/// Sends `req` when the connection is ready and returns the response head.
async fn send(
    tx: &mut Sender,
    req: Request<Empty<Bytes>>,
) -> Result<Response<Incoming>, hyper::Error> {
    match tx {
        Sender::H1(tx) => {
            tx.ready().await?;
            tx.send_request(req).await
        }
        Sender::H2(tx) => {
            tx.ready().await?;
            tx.send_request(req).await
        }
    }
}

/// The requests of a run, shared by its workers: request `i` (of `total`) is due at
/// `start + i / rps`, and each index is claimed by exactly one worker, in order.
pub(crate) struct Schedule {
    start: Instant,
    rps: f64,
    total: u64,
    next: AtomicU64,
}

impl Schedule {
    pub(crate) fn new(start: Instant, rps: f64, total: u64) -> Self {
        Schedule {
            start,
            rps,
            total,
            next: AtomicU64::new(0),
        }
    }

    /// The next unclaimed request index, or `None` when all are claimed.
    pub(crate) fn claim(&self) -> Option<u64> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.total).then_some(i)
    }

    /// When request `index` is due.
    pub(crate) fn due(&self, index: u64) -> Instant {
        self.start + Duration::from_secs_f64(index as f64 / self.rps)
    }
}

struct Worker {
    cfg: Arc<LoadConfig>,
    schedule: Arc<Schedule>,
    conn: Option<Conn>,
    /// The local port of the connection the current request last went out on.
    port: Option<u16>,
    /// The current request is waiting in a TCP connect.
    connecting: bool,
    /// When the connection of the current request started connecting.
    opened: Option<Instant>,
    /// The current request went out on a reused connection.
    reused: bool,
    /// The current request was refused by a GOAWAY and sent again.
    retried: bool,
    records: Vec<RequestRecord>,
    /// The request target: the path (HTTP/1.1, with a Host header) or the absolute URI (HTTP/2,
    /// whose `:authority` and `:scheme` come from it).
    uri: Uri,
    host: String,
}

/// Why an attempt at a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// It failed with this outcome.
    Outcome(RequestOutcome),
    /// The server refused it with a GOAWAY before processing it (h2c only): it may be retried.
    NotProcessed,
}

impl Failure {
    /// The outcome to record: a request refused again on its retry counts as `reset`.
    fn outcome(self) -> RequestOutcome {
        match self {
            Failure::Outcome(o) => o,
            Failure::NotProcessed => RequestOutcome::Reset,
        }
    }
}

fn classify_io(e: &std::io::Error) -> RequestOutcome {
    use std::io::ErrorKind::*;
    match e.kind() {
        TimedOut => RequestOutcome::ConnectTimeout,
        ConnectionReset | ConnectionAborted | BrokenPipe => RequestOutcome::Reset,
        UnexpectedEof => RequestOutcome::Eof,
        _ => RequestOutcome::Refused,
    }
}

/// What the client saw when an exchange failed: `eof` when the connection was closed before a
/// full response (hyper: an incomplete message, or a request that could not go out because the
/// connection had closed), `reset` for ECONNRESET or EPIPE, else `reset`.
fn classify_exchange(e: &hyper::Error) -> RequestOutcome {
    if e.is_incomplete_message() || e.is_canceled() {
        return RequestOutcome::Eof;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::UnexpectedEof => RequestOutcome::Eof,
                _ => RequestOutcome::Reset,
            };
        }
        source = s.source();
    }
    RequestOutcome::Reset
}

/// `true` if `path` is a valid origin-form request target (`/path?query`).
pub(crate) fn is_origin_form(path: &str) -> bool {
    path.starts_with('/')
        && path
            .parse::<Uri>()
            .is_ok_and(|u| u.scheme().is_none() && u.authority().is_none())
}

/// The URI a request for `path` (origin-form) to `target` carries: the path itself for HTTP/1.1
/// (the authority goes in `Host`), the absolute `http://target/path` for HTTP/2.
pub(crate) fn request_uri(
    protocol: Protocol,
    target: SocketAddr,
    path: &str,
) -> Result<Uri, hyper::http::Error> {
    match protocol {
        Protocol::Http1 => Ok(path.parse::<Uri>()?),
        Protocol::H2c => Ok(Uri::builder()
            .scheme("http")
            .authority(target.to_string())
            .path_and_query(path)
            .build()?),
    }
}

impl Worker {
    fn new(cfg: Arc<LoadConfig>, schedule: Arc<Schedule>, uri: Uri, capacity: usize) -> Self {
        let host = cfg.target.to_string();
        Worker {
            cfg,
            schedule,
            conn: None,
            port: None,
            connecting: false,
            opened: None,
            reused: false,
            retried: false,
            records: Vec::with_capacity(capacity),
            uri,
            host,
        }
    }

    /// Claims requests until none is left, sending each when it is due. While it waits, it keeps
    /// driving its idle connection, so that one the server closes is noticed and replaced without
    /// a failed request, as a client pool does.
    async fn run(mut self) -> Vec<RequestRecord> {
        while let Some(index) = self.schedule.claim() {
            let due = self.schedule.due(index);
            self.next(index, due).await;
        }
        self.records
    }

    /// Waits until request `index` is `due` (watching the idle connection meanwhile, for the
    /// careful client), then sends it.
    async fn next(&mut self, index: u64, due: Instant) {
        // A `keep-alive` client does not look at its idle connection; the others have none
        // (`new-connection`) or watch it (`keep-alive-careful`).
        let watch_idle = self.cfg.client == ClientKind::KeepAliveCareful;
        while Instant::now() < due {
            match self.conn.as_mut().filter(|_| watch_idle) {
                Some(c) => tokio::select! {
                    biased;
                    () = tokio::time::sleep_until(due) => break,
                    () = c.ended() => self.conn = None,
                },
                None => tokio::time::sleep_until(due).await,
            }
        }
        // A worker behind its schedule did not wait above: look at the idle connection once
        // before reusing it, as urllib3 does at checkout (`is_connection_dropped`), so a close
        // that already came is seen however late the worker runs.
        if watch_idle && self.conn.as_mut().is_some_and(Conn::has_ended) {
            self.conn = None;
        }
        self.one(index, due).await;
    }

    /// One request: an exchange on the pooled connection, and, for h2c, once more on a new
    /// connection if the server refused the first with a GOAWAY ([`refused_by_goaway`]).
    async fn exchange(&mut self, index: u64) -> Result<u16, RequestOutcome> {
        match self.attempt(index).await {
            Err(Failure::NotProcessed) => {
                self.conn = None;
                self.retried = true;
                self.attempt(index).await.map_err(Failure::outcome)
            }
            r => r.map_err(Failure::outcome),
        }
    }

    /// One exchange on the pooled connection (connecting first if needed).
    async fn attempt(&mut self, index: u64) -> Result<u16, Failure> {
        let client = self.cfg.client;
        if client == ClientKind::NewConnection || self.conn.as_mut().is_some_and(|c| !c.usable()) {
            self.conn = None;
        }
        let c = match self.conn.as_mut() {
            Some(c) => c,
            None => {
                self.connecting = true;
                self.opened = Some(Instant::now());
                self.reused = false;
                let (port, pending) = start_connect(self.cfg.target)
                    .map_err(|e| Failure::Outcome(classify_io(&e)))?;
                self.port = Some(port);
                let c =
                    Conn::handshake(pending, self.cfg.protocol, client == ClientKind::KeepAlive)
                        .await
                        .map_err(|e| Failure::Outcome(e.outcome()));
                self.connecting = false;
                self.conn.insert(c?)
            }
        };
        self.port = c.local_port;
        self.opened = Some(c.opened);
        self.reused = c.used > 0;
        c.used += 1;
        let mut req = Request::builder()
            .method(self.cfg.method.clone())
            .uri(self.uri.clone());
        if self.cfg.protocol == Protocol::Http1 {
            req = req.header(HOST, self.host.as_str());
            if client == ClientKind::NewConnection {
                req = req.header(hyper::header::CONNECTION, "close");
            }
        }
        let req = req
            .header(REQUEST_ID_HEADER, index)
            .body(Empty::<Bytes>::new())
            .map_err(|_| Failure::Outcome(RequestOutcome::Refused))?;
        let h2c = self.cfg.protocol == Protocol::H2c;
        let result = drive(&mut c.driver, async {
            let resp = send(&mut c.tx, req).await.map_err(|e| {
                if h2c && refused_by_goaway(&e) {
                    Failure::NotProcessed
                } else {
                    Failure::Outcome(classify_exchange(&e))
                }
            })?;
            let status = resp.status().as_u16();
            resp.into_body()
                .collect()
                .await
                .map_err(|e| Failure::Outcome(classify_exchange(&e)))?;
            Ok(status)
        })
        .await;
        c.close_reads();
        if c.driver.is_none() || client == ClientKind::NewConnection {
            self.conn = None;
        }
        result
    }

    async fn one(&mut self, index: u64, intended: Instant) {
        let sent = Instant::now();
        self.port = None;
        self.connecting = false;
        self.opened = None;
        self.reused = false;
        self.retried = false;
        let result = tokio::time::timeout(self.cfg.timeout, self.exchange(index)).await;
        let (outcome, status) = match result {
            Err(_) if self.connecting => (RequestOutcome::ConnectTimeout, None),
            Err(_) => (RequestOutcome::Timeout, None),
            Ok(Err(kind)) => (kind, None),
            Ok(Ok(s)) if s >= 500 => (RequestOutcome::Http5xx, Some(s)),
            Ok(Ok(s)) => (RequestOutcome::Ok, Some(s)),
        };
        if !matches!(outcome, RequestOutcome::Ok | RequestOutcome::Http5xx) {
            // Whatever state the connection is in, it is not reusable.
            self.conn = None;
        }
        let epoch = self.cfg.epoch;
        let since = |t: Instant| t.saturating_duration_since(epoch);
        self.records.push(RequestRecord {
            index,
            intended: since(intended),
            sent: since(sent),
            done: since(Instant::now()),
            outcome,
            status,
            client_port: self.port,
            connected: self.opened.map(since),
            reused: self.reused,
            retried: self.retried,
        });
    }
}

/// The most requests a `new-connection` client has in flight: 10,000.
pub const MAX_IN_FLIGHT: usize = 10_000;

/// How many workers send the load: one per pooled connection for the keep-alive clients; for
/// `new-connection`, enough that requests stalled for the whole timeout (a connect nobody
/// answers) do not hold the next ones back: `connections + ⌈rps × timeout⌉` (at most
/// [`MAX_IN_FLIGHT`]), so the load stays open-loop as one connection per request is.
pub fn workers_for(cfg: &LoadConfig) -> usize {
    match cfg.client {
        ClientKind::NewConnection => {
            let stalled = (cfg.rps * cfg.timeout.as_secs_f64()).ceil();
            let stalled = if stalled.is_finite() {
                stalled.min(MAX_IN_FLIGHT as f64) as usize
            } else {
                MAX_IN_FLIGHT
            };
            (cfg.connections + stalled).min(MAX_IN_FLIGHT)
        }
        _ => cfg.connections,
    }
}

/// The number of requests a run schedules: `round(rps × duration)`.
pub fn scheduled_requests(rps: f64, duration: Duration) -> u64 {
    (rps * duration.as_secs_f64()).round().max(0.0) as u64
}

/// Runs the load: schedules `round(rps × duration)` requests from now, waits for each to end
/// (at most the request timeout after the last is due) and returns every record.
///
/// Errors: a rate that is not positive and finite, zero connections, a path that is not a valid
/// request target, more than [`MAX_REQUESTS`] requests.
pub async fn run(config: LoadConfig) -> Result<LoadResult, LoadError> {
    if !(config.rps.is_finite() && config.rps > 0.0) {
        return Err(LoadError::BadRate(config.rps));
    }
    if config.connections == 0 {
        return Err(LoadError::NoConnections);
    }
    if !is_origin_form(&config.path) {
        return Err(LoadError::BadPath(config.path.clone()));
    }
    let uri = request_uri(config.protocol, config.target, &config.path)
        .map_err(|_| LoadError::BadPath(config.path.clone()))?;
    let total = scheduled_requests(config.rps, config.duration);
    if total > MAX_REQUESTS {
        return Err(LoadError::TooManyRequests(total));
    }
    let cfg = Arc::new(config);
    let schedule = Arc::new(Schedule::new(Instant::now(), cfg.rps, total));
    let mut workers = tokio::task::JoinSet::new();
    let n = workers_for(&cfg);
    for _ in 0..n {
        // Each worker's share of the records, so that pushing them never copies.
        let w = Worker::new(
            Arc::clone(&cfg),
            Arc::clone(&schedule),
            uri.clone(),
            (total / n as u64 + 1).min(1 << 20) as usize,
        );
        workers.spawn(w.run());
    }
    let mut records = Vec::with_capacity(total as usize);
    while let Some(r) = workers.join_next().await {
        if let Ok(mut v) = r {
            records.append(&mut v);
        }
    }
    records.sort_by_key(|r| r.index);
    summarize(records)
}

/// The histogram, achieved rate and send lag of a set of records.
///
/// Errors: [`LoadError::Histogram`] if the histogram cannot be made (not with these constant
/// bounds: 1 µs to 1 hour, 3 significant figures).
pub fn summarize(records: Vec<RequestRecord>) -> Result<LoadResult, LoadError> {
    let mut latency_us = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
        .map_err(|e| LoadError::Histogram(e.to_string()))?;
    latency_us.auto(true);
    let mut first = None::<Duration>;
    let mut last = None::<Duration>;
    let mut max_send_lag = Duration::ZERO;
    for r in &records {
        let us = r.latency().as_micros().clamp(1, u64::MAX as u128) as u64;
        let _ = latency_us.record(us);
        first = Some(first.map_or(r.sent, |f| f.min(r.sent)));
        last = Some(last.map_or(r.sent, |l| l.max(r.sent)));
        max_send_lag = max_send_lag.max(r.sent.saturating_sub(r.intended));
    }
    let achieved_rps = match (first, last) {
        (Some(f), Some(l)) if records.len() >= 2 && l > f => {
            (records.len() - 1) as f64 / (l - f).as_secs_f64()
        }
        _ => 0.0,
    };
    Ok(LoadResult {
        records,
        latency_us,
        achieved_rps,
        max_send_lag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The careful client sees a close that came while its connection was idle and nobody drove
    /// it, even when the next request is already overdue (a worker behind its schedule, as on a
    /// loaded machine, never waits for it): the request goes on a new connection. Before the
    /// check at send time it went into the closed connection: EOF on reuse. (One thread: the
    /// connection's own task runs only when the test yields.)
    #[tokio::test(flavor = "current_thread")]
    async fn a_late_careful_worker_does_not_reuse_a_connection_the_server_closed() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let target = l.local_addr().expect("addr");
        let (closed_tx, mut closed) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let closed_tx = closed_tx.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                        .await;
                    // Idle now: the server closes the keep-alive connection.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    drop(s);
                    let _ = closed_tx.send(());
                });
            }
        });
        let mut cfg = LoadConfig::new(target, Duration::from_secs(1));
        cfg.connections = 1;
        cfg.client = ClientKind::KeepAliveCareful;
        let cfg = Arc::new(cfg);
        let uri = request_uri(cfg.protocol, cfg.target, &cfg.path).expect("uri");
        let schedule = Arc::new(Schedule::new(Instant::now(), cfg.rps, 2));
        let mut w = Worker::new(cfg, schedule, uri, 2);
        w.next(0, Instant::now()).await;
        closed
            .recv()
            .await
            .expect("the server closed the connection");
        // The FIN is in the client's socket (loopback delivers it at once); the thread is held
        // so that the connection's own task does not run before the next request, as on a
        // loaded machine.
        std::thread::sleep(Duration::from_millis(20));
        // Overdue: sent without waiting.
        w.next(1, Instant::now() - Duration::from_millis(50)).await;
        let r = &w.records;
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|x| x.outcome == RequestOutcome::Ok), "{r:?}");
        assert!(!r[1].reused, "{r:?}");
        assert_ne!(
            r[0].client_port, r[1].client_port,
            "a new connection: {r:?}"
        );
    }

    /// With tokio's paused clock (no sockets involved), workers that claim from the shared
    /// schedule and wait for each request's due time send every request at its intended time, to
    /// the millisecond tick, in order, at 200 and at 20,000 requests/s, and each exactly once.
    #[tokio::test(start_paused = true)]
    async fn workers_send_each_request_on_its_tick() {
        for rps in [200.0, 20_000.0] {
            let total = scheduled_requests(rps, Duration::from_millis(500));
            let start = Instant::now();
            let schedule = Arc::new(Schedule::new(start, rps, total));
            let mut workers = tokio::task::JoinSet::new();
            for _ in 0..4 {
                let schedule = Arc::clone(&schedule);
                workers.spawn(async move {
                    let mut sent = Vec::new();
                    while let Some(i) = schedule.claim() {
                        tokio::time::sleep_until(schedule.due(i)).await;
                        sent.push((i, Instant::now() - start));
                    }
                    sent
                });
            }
            let mut got = Vec::new();
            while let Some(r) = workers.join_next().await {
                got.extend(r.expect("join"));
            }
            got.sort();
            assert_eq!(got.len() as u64, total);
            for (n, (i, at)) in got.iter().enumerate() {
                assert_eq!(*i, n as u64, "each index once");
                let due = Duration::from_secs_f64(*i as f64 / rps);
                assert!(*at >= due, "request {i} went out early: {at:?} < {due:?}");
                assert!(
                    *at - due <= Duration::from_millis(1),
                    "request {i} went out {:?} late",
                    *at - due
                );
            }
        }
    }

    #[test]
    fn the_schedule_size_is_rate_times_duration() {
        assert_eq!(scheduled_requests(200.0, Duration::from_secs(4)), 800);
        assert_eq!(
            scheduled_requests(20_000.0, Duration::from_millis(1_500)),
            30_000
        );
        assert_eq!(scheduled_requests(0.5, Duration::from_secs(3)), 2);
    }
}
