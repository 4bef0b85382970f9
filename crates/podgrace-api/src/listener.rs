//! The TLS listener: accepts connections, refuses plain HTTP as Go's server does (a 400
//! "Client sent an HTTP request to an HTTPS server."), terminates TLS with rustls and serves
//! the authenticated router over HTTP/2 or HTTP/1.1.
//!
//! A client cannot hold a connection without using it ([`Limits`], kube-apiserver's values):
//! the TLS handshake must end within 10 s of the connection, the first request must have begun
//! within 32 s (kube-apiserver's `ReadHeaderTimeout`: a slowloris that sends its headers a byte
//! at a time, or nothing at all, is closed), and a connection with no request in flight is
//! closed 90 s after its last one ended (`IdleTimeout`, for HTTP/1.1 keep-alive and HTTP/2
//! alike). A watch is a request in flight for as long as it runs, so an idle watch keeps its
//! connection. HTTP/2 connections take 250 concurrent streams (kube-apiserver's
//! `--http2-max-streams-per-connection` default). When accepting fails (no file descriptor
//! left: `EMFILE`), the loop waits 5 ms, doubling up to 1 s, as Go's `http.Server.Serve` does,
//! instead of spinning.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/server/secure_serving.go` (`Serve`: the
//! timeouts and HTTP/2 settings), Go's `net/http/server.go` (`Serve`'s accept back-off).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

/// How long a connection may go unused, and how many streams it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From the connection to the end of the TLS handshake (10 s).
    pub handshake_timeout: Duration,
    /// From the connection to the start of its first request: its headers all read (32 s,
    /// kube-apiserver's `ReadHeaderTimeout`).
    pub first_request_timeout: Duration,
    /// From the end of a connection's last request, with none in flight, to its close (90 s,
    /// kube-apiserver's `IdleTimeout`).
    pub idle_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection (250).
    pub max_concurrent_streams: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_concurrent_streams: 250,
        }
    }
}

/// Serves `router` on `listener` with `tls` and the default [`Limits`] until `shutdown`
/// resolves.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_with(listener, tls, router, shutdown, Limits::default()).await
}

/// [`serve`] with other [`Limits`].
pub async fn serve_with(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()>,
    limits: Limits,
) {
    let acceptor = TlsAcceptor::from(tls);
    tokio::pin!(shutdown);
    let mut backoff = Duration::ZERO;
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => {
                    backoff = Duration::ZERO;
                    x
                }
                Err(e) => {
                    backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                    tracing::warn!("accept: {e}; retrying in {backoff:?}");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => continue,
                        _ = &mut shutdown => return,
                    }
                }
            },
            _ = &mut shutdown => return,
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move { connection(stream, peer, acceptor, router, limits).await });
    }
}

/// The requests of one connection: how many are in flight (until their response bodies are
/// done or dropped), and when the last one ended.
struct Activity {
    in_flight: AtomicUsize,
    /// `None` until a request has begun.
    last_end: Mutex<Option<Instant>>,
}

impl Activity {
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut l) = self.last_end.lock() {
            l.get_or_insert_with(Instant::now);
        }
        InFlight(self.clone())
    }

    /// When the connection is to be closed if nothing happens before: `None` while a request
    /// is in flight.
    fn deadline(&self, opened: Instant, limits: &Limits) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        match *self.last_end.lock().ok()? {
            None => Some(opened + limits.first_request_timeout),
            Some(t) => Some(t + limits.idle_timeout),
        }
    }
}

/// One request in flight; dropped with its response body.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut l) = self.0.last_end.lock() {
            *l = Some(Instant::now());
        }
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that holds its request's [`InFlight`] until it is done or dropped.
struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    router: axum::Router,
    limits: Limits,
) {
    let opened = Instant::now();
    let _ = stream.set_nodelay(true);
    let handshake = async {
        // A TLS connection starts with a handshake record (0x16); anything else is plain text.
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(1) if first[0] != 0x16 => {
                let mut s = stream;
                let _ = s
                    .write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
                    .await;
                let _ = s.shutdown().await;
                None
            }
            Ok(1) => match acceptor.accept(stream).await {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::debug!("TLS handshake with {peer}: {e}");
                    None
                }
            },
            _ => None,
        }
    };
    let Ok(Some(tls)) = tokio::time::timeout(limits.handshake_timeout, handshake).await else {
        return;
    };
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        last_end: Mutex::new(None),
    });
    let tracked = activity.clone();
    let service = tower::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let in_flight = tracked.begin();
        let router = router.clone();
        async move {
            let resp = router.oneshot(req.map(Body::new)).await?;
            Ok::<_, std::convert::Infallible>(resp.map(|inner| {
                Body::new(Tracked {
                    inner,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(limits.max_concurrent_streams);
    let conn = builder
        .serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(service));
    tokio::pin!(conn);
    loop {
        let deadline = activity.deadline(opened, &limits);
        // While a request is in flight, look again after the idle timeout.
        let wake = deadline.unwrap_or_else(|| Instant::now() + limits.idle_timeout);
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = tokio::time::sleep_until(wake) => {}
        }
        if activity
            .deadline(opened, &limits)
            .is_some_and(|d| d <= Instant::now())
        {
            // Unused for too long: HTTP/2 gets a GOAWAY, HTTP/1.1 a close; a client still
            // sending its first request's headers is cut a second later.
            tracing::debug!("closing the unused connection of {peer}");
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
            return;
        }
    }
}
