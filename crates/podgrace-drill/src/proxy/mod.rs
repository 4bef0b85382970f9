//! A local service proxy that models kube-proxy (and, optionally, an L7 ingress) while pods
//! terminate.
//!
//! One [`Proxy`] is one listener in one [`Mode`]: HTTP/1.1 (keep-alive, each request reverse
//! proxied by hyper), cleartext HTTP/2 with prior knowledge (h2c), or plain TCP (bytes spliced
//! both ways). Endpoints come from an [`EndpointsHandle`](crate::endpoints::EndpointsHandle)'s
//! [`View`]: the Service's EndpointSlice endpoints as the proxy sees them, `L` late, filtered by
//! kube-proxy's rule (ready, else serving-and-terminating), chosen round robin.
//!
//! # What it models
//! * **Connection pinning, as conntrack does** ([`Balancing::PerConnection`], the default): a new
//!   client connection picks a current endpoint; the proxy opens one upstream connection to it and
//!   every request of the client connection goes there for its lifetime, even after the endpoint
//!   has left the view. When the pod closes that upstream connection (exit, drain with
//!   `Connection: close`, HTTP/2 GOAWAY), the proxy closes the client connection the same way
//!   (graceful when idle), as the client would see the pod's FIN through DNAT.
//! * **A pod's HTTP/2 GOAWAY reaches the client as it would through kube-proxy**: the proxy
//!   passes it on when the pod closes the connection, and a stream the client opens in between
//!   (one the pod refuses) is reset with `REFUSED_STREAM` (not processed; clients send it again on
//!   a new connection) while the GOAWAY is passed on at once ([`ProxyOutcome::RefusedStream`]).
//! * **Per-request balancing, as an L7 ingress does** ([`Balancing::PerRequest`], HTTP/1.1 mode):
//!   each request picks a current endpoint and reuses an upstream keep-alive pool per endpoint,
//!   like ingress-nginx or an ALB in IP mode. With keep-alive clients this is the mode in which the
//!   field's "rate × L × share" failure count holds (every request during the lag window can land
//!   on the gone pod, not only new connections).
//! * **Upstream failures are what the client would get**: HTTP modes answer 502 (like an
//!   ingress) when the upstream connection cannot be made or breaks during a request, 503 when no
//!   endpoint is usable, and then close the client connection; TCP mode resets the client
//!   connection (RST, `SO_LINGER` 0), as a DNAT'd SYN to a closed port would. The kind is recorded.
//! * **Every proxied request (HTTP) or connection (TCP) is recorded** ([`ProxyRecord`]): start,
//!   end, pod, endpoint, outcome, so the drill can attribute each failure to a pod and a phase;
//!   and every pinned client connection ([`PinnedConnection`]: client address, pod), so a request
//!   the pod's close crossed on the wire, which the proxy never saw, is still put on its pod.
//!
//! kube-proxy mode of the drill runs on the kernel's own DNAT and conntrack
//! ([`netfilter::Netfilter`]), where the client's TCP connection itself reaches the pod; this
//! user-space proxy is what it falls back to when netfilter cannot be used ([`Mode::Tcp`], an L4
//! splice that pins each connection), and what `--proxy ingress` uses (L7, HTTP answers).
//!
//! # What it does not model
//! * that a connect through kube-proxy can time out: this proxy accepts the client's connection
//!   itself, so a pod that is gone shows as a reset after connect, not as a connect timeout;
//! * conntrack expiry and timeouts (an idle pinned connection never expires), conntrack table
//!   limits, and the stale-conntrack-entry UDP problems;
//! * session affinity (`sessionAffinity: ClientIP`), topology hints, the Local traffic policy,
//!   weights, and iptables' random choice (round robin gives the same long-run shares);
//! * the network: a pod that is gone answers "connection refused" here (its port is closed on a
//!   live address), where a deleted pod IP in a cluster may instead time out (no route / dropped
//!   SYN);
//! * retries: unlike ingress-nginx's `proxy_next_upstream`, a failed request is not retried on
//!   another endpoint;
//! * the end of a response body: a record ends when the response head arrives.

mod http;
pub mod netfilter;
mod tcp;

use crate::endpoints::{Endpoint, View};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The protocol a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// HTTP/1.1 with keep-alive; each request is reverse proxied.
    Http1,
    /// Cleartext HTTP/2, prior knowledge (no Upgrade); each stream is reverse proxied.
    H2c,
    /// Plain TCP: bytes spliced both ways.
    Tcp,
}

/// Which unit picks an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balancing {
    /// kube-proxy: a client connection picks an endpoint once and stays pinned (conntrack).
    PerConnection,
    /// An L7 ingress: each request picks an endpoint (HTTP/1.1 mode only; other modes pin).
    PerRequest,
}

/// A proxy's settings.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// HTTP/1.1, h2c or TCP.
    pub mode: Mode,
    /// Per connection (kube-proxy) or per request (an L7 ingress).
    pub balancing: Balancing,
    /// How long an upstream connect may take before it counts as `ConnectTimeout` (default 1 s).
    pub connect_timeout: Duration,
    /// The instant record times count from (the drill's t = 0).
    pub epoch: Instant,
    /// Runtimes to serve connections on, in turn (connection `i` on `workers[i % n]`); empty
    /// (the default) serves them on the runtime that started the proxy. One single-threaded
    /// runtime per core, each on its own thread, is the shape of nginx's one worker process per
    /// core: a connection stays on one thread, and connections are spread evenly.
    pub workers: Vec<tokio::runtime::Handle>,
}

impl ProxyConfig {
    /// `mode` with per-connection balancing, a 1 s connect timeout and epoch now.
    pub fn new(mode: Mode) -> Self {
        ProxyConfig {
            mode,
            balancing: Balancing::PerConnection,
            connect_timeout: Duration::from_secs(1),
            epoch: Instant::now(),
            workers: Vec::new(),
        }
    }
}

/// How one proxied request (HTTP) or connection (TCP) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProxyOutcome {
    /// Forwarded; the upstream answered (any status) or, for TCP, the splice ended cleanly.
    Forwarded,
    /// No endpoint was usable (503; TCP: reset).
    NoEndpoints,
    /// The upstream refused the connection (502; TCP: reset).
    ConnectRefused,
    /// The upstream connect did not finish within the connect timeout (502; TCP: reset).
    ConnectTimeout,
    /// The upstream connect failed otherwise (502; TCP: reset).
    ConnectFailed,
    /// The upstream connection broke or closed during the request (502; TCP: reset).
    UpstreamReset,
    /// h2c: the pod had sent GOAWAY and did not take the stream; the client's stream is reset
    /// with `REFUSED_STREAM` (not processed, so clients send it again elsewhere) and the GOAWAY
    /// is passed on, as the client would have seen it through kube-proxy.
    RefusedStream,
}

impl ProxyOutcome {
    /// `true` unless the request was forwarded.
    pub fn is_failure(self) -> bool {
        self != ProxyOutcome::Forwarded
    }
}

/// One proxied request (HTTP modes) or connection (TCP mode).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyRecord {
    /// The client connection's number (from 0, in accept order).
    pub connection: u64,
    /// The load's request index (header [`REQUEST_ID_HEADER`](crate::load::REQUEST_ID_HEADER)),
    /// if the request carried one.
    pub request: Option<u64>,
    /// Since the epoch: request head received (TCP: accepted).
    pub start: Duration,
    /// Since the epoch: response head sent (TCP: both directions closed).
    pub end: Duration,
    /// The pod the request went to; `None` with [`ProxyOutcome::NoEndpoints`].
    pub pod: Option<String>,
    /// The pod's address and port; `None` with [`ProxyOutcome::NoEndpoints`].
    pub endpoint: Option<SocketAddr>,
    /// How it ended.
    pub outcome: ProxyOutcome,
    /// The HTTP status sent to the client (HTTP modes).
    pub status: Option<u16>,
}

/// A client connection pinned to one pod (HTTP modes with per-connection balancing): the
/// conntrack entry of a client connection. With it a failure the proxy never saw as a request
/// (the pod's close crossed a request on its way) is still put on the pod.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PinnedConnection {
    /// The client connection's number, as in [`ProxyRecord::connection`].
    pub connection: u64,
    /// The client's address.
    pub client: SocketAddr,
    /// Since the epoch: when the upstream connection to the pod was made.
    pub opened: Duration,
    /// The pod it is pinned to.
    pub pod: String,
}

/// Errors of [`Proxy::start`].
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The bind error.
        source: std::io::Error,
    },
    /// Not called from within a tokio runtime.
    #[error("the proxy must be started from within a tokio runtime")]
    NoRuntime,
}

/// A [`ProxyRecord`] as kept while the proxy runs (the endpoint shared, not copied).
pub(crate) struct RawRecord {
    pub connection: u64,
    pub request: Option<u64>,
    pub start: Duration,
    pub end: Duration,
    pub ep: Option<Arc<Endpoint>>,
    pub outcome: ProxyOutcome,
    pub status: Option<u16>,
}

impl RawRecord {
    fn to_record(&self) -> ProxyRecord {
        ProxyRecord {
            connection: self.connection,
            request: self.request,
            start: self.start,
            end: self.end,
            pod: self.ep.as_ref().map(|e| e.pod.clone()),
            endpoint: self.ep.as_ref().map(|e| e.address),
            outcome: self.outcome,
            status: self.status,
        }
    }
}

/// State shared by a proxy's connections.
pub(crate) struct Shared {
    pub view: Arc<View>,
    pub config: ProxyConfig,
    pub records: Mutex<Vec<RawRecord>>,
    pub pinned: Mutex<Vec<PinnedConnection>>,
}

impl Shared {
    pub fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.config.epoch)
    }

    pub fn record(&self, r: RawRecord) {
        match self.records.lock() {
            Ok(mut v) => v.push(r),
            Err(poisoned) => poisoned.into_inner().push(r),
        }
    }

    /// Records that client connection `id` from `client` is pinned to `ep` from now on.
    pub fn pin(&self, id: u64, client: SocketAddr, ep: &Endpoint) {
        let p = PinnedConnection {
            connection: id,
            client,
            opened: self.now(),
            pod: ep.pod.clone(),
        };
        match self.pinned.lock() {
            Ok(mut v) => v.push(p),
            Err(poisoned) => poisoned.into_inner().push(p),
        }
    }

    /// Connects to `ep` within the connect timeout.
    pub async fn connect(&self, ep: &Endpoint) -> Result<TcpStream, ProxyOutcome> {
        match tokio::time::timeout(self.config.connect_timeout, TcpStream::connect(ep.address))
            .await
        {
            Err(_) => Err(ProxyOutcome::ConnectTimeout),
            Ok(Err(e)) => Err(connect_error_kind(&e)),
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                Ok(s)
            }
        }
    }
}

pub(crate) fn connect_error_kind(e: &std::io::Error) -> ProxyOutcome {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => ProxyOutcome::ConnectRefused,
        std::io::ErrorKind::TimedOut => ProxyOutcome::ConnectTimeout,
        _ => ProxyOutcome::ConnectFailed,
    }
}

/// A running proxy listener. Dropping it (or [`Proxy::shutdown`]) stops accepting and cuts every
/// proxied connection.
pub struct Proxy {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on `listen` (port 0 picks a free port) and proxies to the endpoints of `view`.
    ///
    /// Errors: [`ProxyError::Listen`] if the address cannot be bound.
    pub async fn start(
        listen: SocketAddr,
        config: ProxyConfig,
        view: Arc<View>,
    ) -> Result<Proxy, ProxyError> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| ProxyError::Listen {
                addr: listen,
                source,
            })?;
        Self::serve(listener, config, view)
    }

    /// Proxies the connections of an already bound `listener` (it is made non-blocking). Several
    /// proxies may share one listening socket (`try_clone`), each on its own single-threaded
    /// runtime, the way nginx's worker processes share theirs: an idle worker accepts sooner, so
    /// connections go where there is time to serve them.
    ///
    /// Errors: [`ProxyError::NoRuntime`] when called outside a tokio runtime,
    /// [`ProxyError::Listen`] if the socket cannot be registered with it.
    pub fn from_std(
        listener: std::net::TcpListener,
        config: ProxyConfig,
        view: Arc<View>,
    ) -> Result<Proxy, ProxyError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ProxyError::NoRuntime);
        }
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
            .map_err(|source| ProxyError::Listen { addr, source })?;
        Self::serve(listener, config, view)
    }

    fn serve(
        listener: TcpListener,
        config: ProxyConfig,
        view: Arc<View>,
    ) -> Result<Proxy, ProxyError> {
        let listen = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let local_addr = listener.local_addr().map_err(|source| ProxyError::Listen {
            addr: listen,
            source,
        })?;
        let shared = Arc::new(Shared {
            view,
            config,
            records: Mutex::new(Vec::new()),
            pinned: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&shared);
        let accept = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            let pool = http::UpstreamPool::new(&s.config);
            let mut next_id: u64 = 0;
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, peer)) = accepted else {
                            // EMFILE and the like: back off briefly rather than spin.
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            continue;
                        };
                        let _ = stream.set_nodelay(true);
                        let id = next_id;
                        next_id += 1;
                        let s = Arc::clone(&s);
                        let pool = pool.clone();
                        let worker = s.config.workers.get(id as usize % s.config.workers.len().max(1)).cloned();
                        let fut = async move {
                            match (s.config.mode, s.config.balancing) {
                                (Mode::Tcp, _) => tcp::serve(stream, id, peer, s).await,
                                (Mode::Http1, Balancing::PerRequest) => {
                                    http::serve_h1_per_request(stream, id, s, pool).await
                                }
                                (Mode::Http1, Balancing::PerConnection) => {
                                    http::serve_h1_pinned(stream, id, peer, s).await
                                }
                                (Mode::H2c, _) => http::serve_h2_pinned(stream, id, peer, s).await,
                            }
                        };
                        match worker {
                            Some(handle) => { conns.spawn_on(fut, &handle); }
                            None => { conns.spawn(fut); }
                        }
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(Proxy {
            local_addr,
            shared,
            accept,
        })
    }

    /// The address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A copy of the records so far, in completion order.
    pub fn records(&self) -> Vec<ProxyRecord> {
        match self.shared.records.lock() {
            Ok(v) => v.iter().map(RawRecord::to_record).collect(),
            Err(poisoned) => poisoned
                .into_inner()
                .iter()
                .map(RawRecord::to_record)
                .collect(),
        }
    }

    /// The client connections pinned to a pod so far, in the order they were pinned.
    pub fn pinned(&self) -> Vec<PinnedConnection> {
        match self.shared.pinned.lock() {
            Ok(v) => v.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Takes the records and pinned connections so far, which the proxy then no longer keeps
    /// (for a long-running proxy: serve's kube-proxy hands them on as they come).
    pub fn take_records(&self) -> (Vec<ProxyRecord>, Vec<PinnedConnection>) {
        let records = match self.shared.records.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        let pinned = match self.shared.pinned.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        (records.iter().map(RawRecord::to_record).collect(), pinned)
    }

    /// Stops accepting and cuts every proxied connection.
    pub async fn shutdown(mut self) {
        self.accept.abort();
        let _ = (&mut self.accept).await;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
