//! A tiny h2c (prior knowledge) test server on hyper, independent of the demo app:
//! * `GET /stream?seconds=S`: 200, then a body chunk every 100 ms for `S` seconds, then the end
//!   of the stream;
//! * `GET /stream`: 200 (headers), then nothing, ever (an idle stream);
//! * `GET /unavailable`: 503, empty body;
//! * anything else: 200, empty body.

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
use std::sync::atomic::{AtomicUsize, Ordering};
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

fn answer(req: &Request<Incoming>) -> Response<Ticks> {
    let seconds = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("seconds="))
            .and_then(|v| v.parse::<f64>().ok())
    });
    let (status, body) = match req.uri().path() {
        "/stream" => match seconds {
            Some(s) => (
                StatusCode::OK,
                Ticks::new(Some((s / CHUNK_EVERY.as_secs_f64()).round() as u64)),
            ),
            None => (StatusCode::OK, Ticks::new(None)),
        },
        "/unavailable" => (StatusCode::SERVICE_UNAVAILABLE, Ticks::new(Some(0))),
        _ => (StatusCode::OK, Ticks::new(Some(0))),
    };
    let mut r = Response::new(body);
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
                        conns.spawn(serve(stream, goaway_after));
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

/// An h2c proxy (`Mode::H2c`, no endpoint lag) whose one ready endpoint, pod `a`, is `addr`; keep
/// the handle alive as long as the proxy is used.
pub async fn h2c_proxy_to(
    addr: SocketAddr,
) -> (
    podgrace_drill::endpoints::EndpointsHandle,
    podgrace_drill::proxy::Proxy,
) {
    use podgrace_drill::endpoints::{Endpoint, EndpointsHandle};
    use podgrace_drill::proxy::{Mode, Proxy, ProxyConfig};
    let h = EndpointsHandle::new(Duration::ZERO);
    h.publish_now(vec![Endpoint::ready("a", addr)]);
    let p = Proxy::start(
        "127.0.0.1:0".parse().expect("addr"),
        ProxyConfig::new(Mode::H2c),
        h.view(),
    )
    .await
    .expect("proxy");
    (h, p)
}
