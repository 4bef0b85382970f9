//! A tiny h2c (prior knowledge) test server on hyper, independent of the demo app:
//! * `GET /stream?seconds=S`: 200, then a body chunk every 100 ms for `S` seconds, then the end
//!   of the stream;
//! * `GET /stream`: 200 (headers), then nothing, ever (an idle stream);
//! * `GET /unavailable`: 503, empty body;
//! * `GET /stream-rejected` (with or without a query): 400, empty body;
//! * anything else: 200, empty body.
//!
//! [`H2cServer::start_refusing`] serves the same answers on the h2 crate's server directly, to
//! send a GOAWAY whose last stream id is below a stream the client has already opened.

#![allow(dead_code)] // each test crate uses a part of it

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::time::{Instant, Sleep};

/// The interval between the chunks of a data stream.
pub const CHUNK_EVERY: Duration = Duration::from_millis(100);

/// A response body: `left` chunks, one every [`CHUNK_EVERY`]; `None`: no chunk and no end.
pub struct Ticks {
    left: Option<u64>,
    next: Pin<Box<Sleep>>,
}

impl Ticks {
    fn new(left: Option<u64>) -> Self {
        Ticks {
            left,
            next: Box::pin(tokio::time::sleep(CHUNK_EVERY)),
        }
    }
}

impl Body for Ticks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this.left {
            None => Poll::Pending,
            Some(0) => Poll::Ready(None),
            Some(n) => {
                if this.next.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.left = Some(n - 1);
                let at = this.next.deadline() + CHUNK_EVERY;
                this.next.as_mut().reset(at);
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"tick\n")))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == Some(0)
    }
}

/// The status of the answer to `uri` and its body: `Some(n)` chunks, one every
/// [`CHUNK_EVERY`], then the end; `None`: no chunk and no end.
fn plan(uri: &hyper::Uri) -> (StatusCode, Option<u64>) {
    let seconds = uri.query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("seconds="))
            .and_then(|v| v.parse::<f64>().ok())
    });
    match uri.path() {
        "/stream" => match seconds {
            Some(s) => (
                StatusCode::OK,
                Some((s / CHUNK_EVERY.as_secs_f64()).round() as u64),
            ),
            None => (StatusCode::OK, None),
        },
        "/unavailable" => (StatusCode::SERVICE_UNAVAILABLE, Some(0)),
        "/stream-rejected" => (StatusCode::BAD_REQUEST, Some(0)),
        _ => (StatusCode::OK, Some(0)),
    }
}

fn answer(req: &Request<Incoming>) -> Response<Ticks> {
    let (status, left) = plan(req.uri());
    let mut r = Response::new(Ticks::new(left));
    *r.status_mut() = status;
    r
}

/// A running server; dropping it (or [`H2cServer::kill`]) closes the listener and every
/// connection at once.
pub struct H2cServer {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl H2cServer {
    /// Serves on a free loopback port; each connection is closed gracefully (GOAWAY) after
    /// `goaway_after` requests if given.
    pub async fn start_with(goaway_after: Option<usize>) -> Self {
        Self::accepting(move |stream| serve(stream, goaway_after)).await
    }

    /// Accepts connections on a free loopback port and serves each with `serve`, counting them.
    async fn accepting<F, Fut>(serve: F) -> Self
    where
        F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&connections);
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        count.fetch_add(1, Ordering::SeqCst);
                        conns.spawn(serve(stream));
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        H2cServer {
            addr,
            connections,
            task,
        }
    }

    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// Serves on a free loopback port with the h2 crate's server. On each connection, once the
    /// `after`-th request has arrived the server reads nothing more; [`GOAWAY_DELAY`] after that
    /// request's response ended it sends GOAWAY(last_stream_id = that request's stream,
    /// `NO_ERROR`) and closes the connection. A request the client opened on the connection in the
    /// meantime (it is free to: the GOAWAY has not come yet) has a higher stream id: the server did
    /// not process it, and the GOAWAY refuses it.
    pub async fn start_refusing(after: usize) -> Self {
        Self::accepting(move |stream| serve_refusing(stream, after)).await
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Closes the listener and every connection (no GOAWAY: the sockets are dropped); returns
    /// when they are.
    pub async fn kill(mut self) -> Instant {
        self.task.abort();
        let _ = (&mut self.task).await;
        Instant::now()
    }
}

impl Drop for H2cServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(stream: tokio::net::TcpStream, goaway_after: Option<usize>) {
    let served = Arc::new(AtomicUsize::new(0));
    let enough = Arc::new(tokio::sync::Notify::new());
    let (s, e) = (Arc::clone(&served), Arc::clone(&enough));
    let svc = service_fn(move |req: Request<Incoming>| {
        let n = s.fetch_add(1, Ordering::SeqCst) + 1;
        if goaway_after.is_some_and(|max| n >= max) {
            e.notify_one();
        }
        std::future::ready(Ok::<_, Infallible>(answer(&req)))
    });
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = enough.notified() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// How long [`H2cServer::start_refusing`] waits after the last response on a connection before
/// its GOAWAY: long enough for the client to open the next stream on the connection.
pub const GOAWAY_DELAY: Duration = Duration::from_millis(20);

/// A socket whose reads can be held: once `held` is set, reads stay pending (and are never woken).
struct Holdable {
    inner: tokio::net::TcpStream,
    held: Arc<AtomicBool>,
}

impl tokio::io::AsyncRead for Holdable {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.held.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Holdable {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

async fn serve_refusing(stream: tokio::net::TcpStream, after: usize) {
    // No Nagle delay for the GOAWAY, a small write right after the last response.
    let _ = stream.set_nodelay(true);
    let held = Arc::new(AtomicBool::new(false));
    let io = Holdable {
        inner: stream,
        held: Arc::clone(&held),
    };
    let Ok(mut conn) = h2::server::handshake(io).await else {
        return;
    };
    let (ended_tx, mut ended_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut served = 0;
    let goaway = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(goaway);
    let mut armed = false;
    loop {
        tokio::select! {
            accepted = conn.accept() => match accepted {
                Some(Ok((req, respond))) => {
                    served += 1;
                    let last = served == after;
                    if last {
                        // Nothing the client sends from now on is read: no stream after this one
                        // is processed.
                        held.store(true, Ordering::SeqCst);
                    }
                    tokio::spawn(respond_h2(req, respond, last.then(|| ended_tx.clone())));
                }
                _ => return,
            },
            Some(()) = ended_rx.recv() => {
                goaway.as_mut().reset(Instant::now() + GOAWAY_DELAY);
                armed = true;
            }
            () = goaway.as_mut(), if armed => {
                armed = false;
                conn.abrupt_shutdown(h2::Reason::NO_ERROR);
            }
        }
    }
}

/// Answers one request on the h2 crate's server as [`answer`] does; then tells `ended`, if any.
async fn respond_h2(
    req: Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    ended: Option<tokio::sync::mpsc::UnboundedSender<()>>,
) {
    let (status, left) = plan(req.uri());
    let mut head = Response::new(());
    *head.status_mut() = status;
    match left {
        Some(0) => {
            let _ = respond.send_response(head, true);
        }
        Some(n) => {
            let Ok(mut body) = respond.send_response(head, false) else {
                return;
            };
            for k in 1..=n {
                tokio::time::sleep(CHUNK_EVERY).await;
                if body
                    .send_data(Bytes::from_static(b"tick\n"), k == n)
                    .is_err()
                {
                    return;
                }
            }
        }
        None => {
            let _body = respond.send_response(head, false);
            std::future::pending::<()>().await;
        }
    }
    if let Some(tx) = ended {
        let _ = tx.send(());
    }
}

/// A proxy in `mode` (no endpoint lag) whose one ready endpoint, pod `pod`, is `addr`; keep the
/// handle alive as long as the proxy is used.
pub async fn proxy_to(
    mode: podgrace_drill::proxy::Mode,
    pod: &str,
    addr: SocketAddr,
) -> (
    podgrace_drill::endpoints::EndpointsHandle,
    podgrace_drill::proxy::Proxy,
) {
    use podgrace_drill::endpoints::{Endpoint, EndpointsHandle};
    use podgrace_drill::proxy::{Proxy, ProxyConfig};
    let h = EndpointsHandle::new(Duration::ZERO);
    h.publish_now(vec![Endpoint::ready(pod, addr)]);
    let p = Proxy::start(
        "127.0.0.1:0".parse().expect("addr"),
        ProxyConfig::new(mode),
        h.view(),
    )
    .await
    .expect("proxy");
    (h, p)
}

/// [`proxy_to`] in h2c mode, pod `a`.
pub async fn h2c_proxy_to(
    addr: SocketAddr,
) -> (
    podgrace_drill::endpoints::EndpointsHandle,
    podgrace_drill::proxy::Proxy,
) {
    proxy_to(podgrace_drill::proxy::Mode::H2c, "a", addr).await
}
