//! The HTTP modes of the proxy: HTTP/1.1 (pinned or per request) and h2c (pinned), on hyper.

use super::{connect_error_kind, ProxyConfig, ProxyOutcome, RawRecord, Shared};
use crate::endpoints::Endpoint;
use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::Notify;

type Body = Either<Incoming, Full<Bytes>>;

/// The upstream keep-alive pools of per-request balancing (one pool per endpoint address).
#[derive(Clone)]
pub(crate) struct UpstreamPool(Client<HttpConnector, Incoming>);

impl UpstreamPool {
    pub fn new(config: &ProxyConfig) -> Self {
        let mut c = HttpConnector::new();
        c.set_nodelay(true);
        c.set_connect_timeout(Some(config.connect_timeout));
        UpstreamPool(
            Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_max_idle_per_host(1024)
                .build(c),
        )
    }
}

/// The answer to a request the proxy could not forward: 503 without endpoints, else 502.
/// `close` adds `Connection: close` (HTTP/1.1 only; HTTP/2 has no such header).
fn error_response(kind: ProxyOutcome, close: bool) -> Response<Body> {
    let (status, text) = match kind {
        ProxyOutcome::NoEndpoints => (StatusCode::SERVICE_UNAVAILABLE, "no endpoints\n"),
        _ => (StatusCode::BAD_GATEWAY, "bad gateway\n"),
    };
    let mut r = Response::new(Either::Right(Full::new(Bytes::from_static(
        text.as_bytes(),
    ))));
    *r.status_mut() = status;
    if close {
        r.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// The load's request index of a request, if it has one.
fn request_id<B>(req: &Request<B>) -> Option<u64> {
    req.headers()
        .get(crate::load::REQUEST_ID_HEADER)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[allow(clippy::too_many_arguments)]
fn record(
    s: &Shared,
    id: u64,
    request: Option<u64>,
    start: Duration,
    ep: Option<&Arc<Endpoint>>,
    outcome: ProxyOutcome,
    status: u16,
) {
    s.record(RawRecord {
        connection: id,
        request,
        start,
        end: s.now(),
        ep: ep.cloned(),
        outcome,
        status: Some(status),
    });
}

/// The response to the client for an upstream answer (`Some`) or a broken upstream (`None`),
/// recorded as forwarded or as an upstream reset.
fn respond(
    s: &Shared,
    id: u64,
    request: Option<u64>,
    start: Duration,
    ep: &Arc<Endpoint>,
    upstream: Option<Response<Incoming>>,
    close: bool,
) -> Response<Body> {
    let (outcome, resp) = match upstream {
        Some(resp) => (ProxyOutcome::Forwarded, resp.map(Either::Left)),
        None => (
            ProxyOutcome::UpstreamReset,
            error_response(ProxyOutcome::UpstreamReset, close),
        ),
    };
    let status = resp.status().as_u16();
    record(s, id, request, start, Some(ep), outcome, status);
    resp
}

/// Picks an endpoint and connects to it: the conntrack entry of a new client connection.
async fn pick_and_connect(
    s: &Shared,
) -> Result<(Arc<Endpoint>, TcpStream), (Option<Arc<Endpoint>>, ProxyOutcome)> {
    let Some(ep) = s.view.pick() else {
        return Err((None, ProxyOutcome::NoEndpoints));
    };
    match s.connect(&ep).await {
        Ok(up) => Ok((ep, up)),
        Err(kind) => Err((Some(ep), kind)),
    }
}

/// Answers every request of a client connection whose upstream could not be had with the error,
/// then closes it (HTTP/1.1: `Connection: close`; HTTP/2: GOAWAY after the first answer).
async fn serve_failed(
    stream: TcpStream,
    id: u64,
    s: Arc<Shared>,
    ep: Option<Arc<Endpoint>>,
    kind: ProxyOutcome,
    h2: bool,
) {
    let s2 = Arc::clone(&s);
    let svc = service_fn(move |req: Request<Incoming>| {
        let rid = request_id(&req);
        let start = s2.now();
        let resp = error_response(kind, !h2);
        record(
            &s2,
            id,
            rid,
            start,
            ep.as_ref(),
            kind,
            resp.status().as_u16(),
        );
        std::future::ready(Ok::<_, Infallible>(resp))
    });
    let io = TokioIo::new(stream);
    if h2 {
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(io, svc);
        tokio::pin!(conn);
        // Let the first request(s) be answered, then send GOAWAY.
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        conn.as_mut().graceful_shutdown();
        let _ = conn.await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(io, svc)
            .await;
    }
}

/// HTTP/1.1, pinned: one upstream connection per client connection, for its lifetime.
pub(crate) async fn serve_h1_pinned(stream: TcpStream, id: u64, peer: SocketAddr, s: Arc<Shared>) {
    let (ep, up) = match pick_and_connect(&s).await {
        Ok(x) => x,
        Err((ep, kind)) => return serve_failed(stream, id, s, ep, kind, false).await,
    };
    s.pin(id, peer, &ep);
    let (sender, up_conn) = match hyper::client::conn::http1::handshake(TokioIo::new(up)).await {
        Ok(x) => x,
        Err(_) => {
            return serve_failed(stream, id, s, Some(ep), ProxyOutcome::UpstreamReset, false).await
        }
    };
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let s2 = Arc::clone(&s);
    let svc = service_fn(move |req: Request<Incoming>| {
        let sender = Arc::clone(&sender);
        let s = Arc::clone(&s2);
        let ep = Arc::clone(&ep);
        let rid = request_id(&req);
        async move {
            let start = s.now();
            let mut tx = sender.lock().await;
            let result = match tx.ready().await {
                Ok(()) => tx.send_request(req).await.ok(),
                Err(_) => None,
            };
            drop(tx);
            Ok::<_, Infallible>(respond(&s, id, rid, start, &ep, result, true))
        }
    });
    let down =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
    // Both connections are driven by this one task: a request goes down → up → down without a
    // hop between tasks (or threads).
    tokio::pin!(down);
    tokio::pin!(up_conn);
    let mut up_open = true;
    loop {
        tokio::select! {
            _ = down.as_mut() => break,
            _ = up_conn.as_mut(), if up_open => {
                // The pod closed the connection: close the client's too (at once when idle,
                // after the response in flight otherwise), as its FIN would reach the client
                // through DNAT.
                up_open = false;
                down.as_mut().graceful_shutdown();
            }
        }
    }
}

/// h2c, pinned: one upstream HTTP/2 connection per client connection; streams are multiplexed.
pub(crate) async fn serve_h2_pinned(stream: TcpStream, id: u64, peer: SocketAddr, s: Arc<Shared>) {
    let (ep, up) = match pick_and_connect(&s).await {
        Ok(x) => x,
        Err((ep, kind)) => return serve_failed(stream, id, s, ep, kind, true).await,
    };
    s.pin(id, peer, &ep);
    let (sender, conn) =
        match hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(up)).await {
            Ok(x) => x,
            Err(_) => {
                return serve_failed(stream, id, s, Some(ep), ProxyOutcome::UpstreamReset, true)
                    .await
            }
        };
    let closed = Arc::new(Notify::new());
    let c = Arc::clone(&closed);
    tokio::spawn(async move {
        let _ = conn.await;
        c.notify_one();
    });
    // Notified when the pod refused a stream after its GOAWAY.
    let refused = Arc::new(Notify::new());
    let refused2 = Arc::clone(&refused);
    let s2 = Arc::clone(&s);
    let svc = service_fn(move |req: Request<Incoming>| {
        let mut tx = sender.clone();
        let s = Arc::clone(&s2);
        let ep = Arc::clone(&ep);
        let rid = request_id(&req);
        let refused = Arc::clone(&refused2);
        async move {
            let start = s.now();
            let result = match tx.ready().await {
                Ok(()) => tx.send_request(req).await,
                Err(e) => Err(e),
            };
            let answer: Result<Response<Body>, h2::Error> = match result {
                Err(e) if crate::load::refused_by_goaway(&e) => {
                    // The pod had sent GOAWAY and did not take this stream. Through kube-proxy
                    // the client would have seen that GOAWAY itself and opened the stream
                    // elsewhere: refuse it as not processed (RST_STREAM REFUSED_STREAM, which
                    // clients retry) and pass the GOAWAY on.
                    s.record(RawRecord {
                        connection: id,
                        request: rid,
                        start,
                        end: s.now(),
                        ep: Some(Arc::clone(&ep)),
                        outcome: ProxyOutcome::RefusedStream,
                        status: None,
                    });
                    refused.notify_one();
                    Err(h2::Error::from(h2::Reason::REFUSED_STREAM))
                }
                r => Ok(respond(&s, id, rid, start, &ep, r.ok(), false)),
            };
            answer
        }
    });
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = async { tokio::select! { _ = closed.notified() => {}, _ = refused.notified() => {} } } => {
            // The pod's GOAWAY or close: pass a GOAWAY on to the client.
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// The first `std::io::Error` in an error's source chain.
fn io_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cur: Option<&'a (dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cur = err.source();
    }
    None
}

/// HTTP/1.1, per request (an L7 ingress): every request picks an endpoint.
pub(crate) async fn serve_h1_per_request(
    stream: TcpStream,
    id: u64,
    s: Arc<Shared>,
    pool: UpstreamPool,
) {
    let svc = service_fn(move |req: Request<Incoming>| {
        let s = Arc::clone(&s);
        let client = pool.0.clone();
        let rid = request_id(&req);
        async move {
            let start = s.now();
            let Some(ep) = s.view.pick() else {
                let resp = error_response(ProxyOutcome::NoEndpoints, false);
                record(
                    &s,
                    id,
                    rid,
                    start,
                    None,
                    ProxyOutcome::NoEndpoints,
                    resp.status().as_u16(),
                );
                return Ok::<_, Infallible>(resp);
            };
            let (mut parts, body) = req.into_parts();
            let pq = parts
                .uri
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/")
                .to_string();
            match Uri::builder()
                .scheme("http")
                .authority(ep.address.to_string())
                .path_and_query(pq)
                .build()
            {
                Ok(uri) => parts.uri = uri,
                Err(_) => {
                    let resp = error_response(ProxyOutcome::ConnectFailed, false);
                    record(
                        &s,
                        id,
                        rid,
                        start,
                        Some(&ep),
                        ProxyOutcome::ConnectFailed,
                        resp.status().as_u16(),
                    );
                    return Ok(resp);
                }
            }
            Ok(
                match client.request(Request::from_parts(parts, body)).await {
                    Ok(resp) => {
                        record(
                            &s,
                            id,
                            rid,
                            start,
                            Some(&ep),
                            ProxyOutcome::Forwarded,
                            resp.status().as_u16(),
                        );
                        resp.map(Either::Left)
                    }
                    Err(e) => {
                        let kind = if e.is_connect() {
                            io_error(&e)
                                .map(connect_error_kind)
                                .unwrap_or(ProxyOutcome::ConnectFailed)
                        } else {
                            ProxyOutcome::UpstreamReset
                        };
                        let resp = error_response(kind, false);
                        record(&s, id, rid, start, Some(&ep), kind, resp.status().as_u16());
                        resp
                    }
                },
            )
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), svc)
        .await;
}
