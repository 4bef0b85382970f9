//! A hyper server (HTTP/1.1 and HTTP/2, cleartext) that follows a [`Shutdown`].
//!
//! [`serve`] accepts until the shutdown reaches [`Phase::Draining`] (so connections a lagging
//! proxy still sends during [`Phase::Quiescing`] are served), then closes the listener and
//! closes each connection gracefully:
//!
//! * **HTTP/1.1**: every response from then on carries `Connection: close`, so a client's next
//!   request goes to a new connection (to another pod); a connection idle for
//!   [`IDLE_CLOSE`] is closed by the server. Closing an idle keep-alive connection at once would
//!   race with a request the client may be sending on it at that instant (it would see a reset);
//!   answering the next request with `Connection: close` cannot.
//! * **HTTP/2**: GOAWAY at once (hyper's graceful shutdown): streams in flight finish, new ones
//!   go to a new connection.
//!
//! It returns once every connection is closed, or at [`Phase::Cut`] (the drain deadline or a
//! second signal), aborting what is left.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, CONNECTION};
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::shutdown::{Phase, Shutdown};

/// How long a draining server leaves an idle HTTP/1.1 keep-alive connection open for a last
/// request (answered with `Connection: close`) before closing it: 1 s.
pub const IDLE_CLOSE: Duration = Duration::from_secs(1);

type BoxError = Box<dyn StdError + Send + Sync>;

/// How [`serve`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeReport {
    /// Connections accepted in all.
    pub accepted: u64,
    /// Connections still open at the cut (0 when every connection closed in time).
    pub cut: usize,
}

/// Per-connection bookkeeping for the drain.
struct ConnState {
    in_flight: AtomicUsize,
    /// When the last request ended.
    last_active: std::sync::Mutex<Instant>,
    h2: AtomicBool,
}

/// Serves `service` on `listener` until the shutdown says stop (see the module docs). The
/// listener's port is registered with [`Shutdown::watch_port`]. Errors: none so far; accept
/// errors (too many open files) are retried after 5 ms, as a server must not exit on them.
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    shutdown: &Shutdown,
) -> std::io::Result<ServeReport>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    if let Ok(addr) = listener.local_addr() {
        shutdown.watch_port(addr.port());
    }
    let builder = auto::Builder::new(TokioExecutor::new());
    let mut conns = tokio::task::JoinSet::new();
    let mut accepted = 0u64;
    loop {
        tokio::select! {
            accepted_conn = listener.accept() => {
                let Ok((stream, _)) = accepted_conn else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                accepted += 1;
                let _ = stream.set_nodelay(true);
                let cs = Arc::new(ConnState {
                    in_flight: AtomicUsize::new(0),
                    last_active: std::sync::Mutex::new(Instant::now()),
                    h2: AtomicBool::new(false),
                });
                let svc = Tracked { inner: service.clone(), shutdown: shutdown.clone(), conn: Arc::clone(&cs) };
                let conn = builder.serve_connection(TokioIo::new(stream), svc).into_owned();
                let shutdown = shutdown.clone();
                conns.spawn(async move {
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => return,
                        () = shutdown.reached(Phase::Draining) => {}
                    }
                    if !cs.h2.load(Ordering::SeqCst) {
                        let drain_started = Instant::now();
                        loop {
                            tokio::select! {
                                _ = conn.as_mut() => return,
                                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                            }
                            let last = cs.last_active.lock().map(|t| *t).unwrap_or(drain_started);
                            if cs.in_flight.load(Ordering::SeqCst) == 0
                                && last.max(drain_started).elapsed() >= IDLE_CLOSE
                            {
                                break;
                            }
                        }
                    }
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            () = shutdown.reached(Phase::Draining) => break,
        }
    }
    drop(listener);
    loop {
        tokio::select! {
            joined = conns.join_next() => {
                if joined.is_none() {
                    tracing::info!("drained: every connection closed");
                    return Ok(ServeReport { accepted, cut: 0 });
                }
            }
            () = shutdown.reached(Phase::Cut) => {
                let cut = conns.len();
                conns.abort_all();
                return Ok(ServeReport { accepted, cut });
            }
        }
    }
}

/// The user's service, with requests counted in flight (in the connection and the shutdown)
/// and `Connection: close` on HTTP/1.1 responses once draining.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    shutdown: Shutdown,
    conn: Arc<ConnState>,
}

/// One request in flight until dropped (with its response body, or with the request's future).
struct InFlight {
    shutdown: Shutdown,
    conn: Arc<ConnState>,
}

impl InFlight {
    fn new(shutdown: Shutdown, conn: Arc<ConnState>) -> Self {
        shutdown.in_flight_counter().fetch_add(1, Ordering::SeqCst);
        conn.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight { shutdown, conn }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut t) = self.conn.last_active.lock() {
            *t = Instant::now();
        }
        self.conn.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.shutdown
            .in_flight_counter()
            .fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted until it is done or dropped.
pub struct Counted<B> {
    inner: Pin<Box<B>>,
    _in_flight: InFlight,
}

impl<B: Body> Body for Counted<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.inner.as_mut().poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
{
    type Response = Response<Counted<B>>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        if req.version() == Version::HTTP_2 {
            self.conn.h2.store(true, Ordering::SeqCst);
        }
        let http11 = req.version() == Version::HTTP_11;
        let in_flight = InFlight::new(self.shutdown.clone(), Arc::clone(&self.conn));
        let fut = self.inner.call(req);
        let shutdown = self.shutdown.clone();
        Box::pin(async move {
            let (mut parts, body) = fut.await?.into_parts();
            if http11 && shutdown.phase() >= Phase::Draining {
                parts
                    .headers
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(Response::from_parts(
                parts,
                Counted {
                    inner: Box::pin(body),
                    _in_flight: in_flight,
                },
            ))
        })
    }
}

/// A readiness answer for a hyper service: `200 ready` before the first signal, `503 not
/// ready` after it.
pub fn readiness(shutdown: &Shutdown) -> Response<http_body_util::Full<Bytes>> {
    let (status, text) = if shutdown.is_ready() {
        (hyper::StatusCode::OK, "ready\n")
    } else {
        (hyper::StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    };
    let mut r = Response::new(http_body_util::Full::new(Bytes::from_static(
        text.as_bytes(),
    )));
    *r.status_mut() = status;
    r
}

/// `Infallible` as a service error, for [`hyper::service::service_fn`] closures.
pub type Never = Infallible;
