//! The TLS listener against clients that do not play along (issue 18 item 5): a slowloris that
//! sends its headers a byte at a time, a TCP connection that sends nothing, a TLS connection
//! that sends no request, an idle keep-alive connection; and an idle watch, which must keep its
//! connection. Real TLS on 127.0.0.1, with [`Limits`] shortened so the test takes seconds
//! (serve uses kube-apiserver's: 10 s, 32 s, 90 s).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use podgrace_api::listener::{serve_with, Limits};
use podgrace_api::{http::authenticated_router, tls, Api, ApiConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

const LIMITS: Limits = Limits {
    handshake_timeout: Duration::from_secs(1),
    first_request_timeout: Duration::from_secs(2),
    idle_timeout: Duration::from_secs(2),
    max_concurrent_streams: 250,
};

struct Server {
    addr: std::net::SocketAddr,
    ca: String,
    token: String,
    api: Api,
}

async fn start() -> Server {
    start_with(ApiConfig::default()).await
}

async fn start_with(cfg: ApiConfig) -> Server {
    let api = Api::new(cfg);
    let creds = tls::generate(&[]).unwrap();
    let cfg = tls::server_config(&creds).unwrap();
    let sock = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(serve_with(
        sock,
        cfg,
        authenticated_router(api.clone(), creds.token.clone()),
        std::future::pending(),
        LIMITS,
    ));
    Server {
        addr,
        ca: creds.ca_pem,
        token: creds.token,
        api,
    }
}

impl Server {
    async fn tls(&self, alpn: &[u8]) -> TlsStream<TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca.as_bytes()).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = vec![alpn.to_vec()];
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .unwrap()
    }

    fn request(&self, path: &str) -> hyper::Request<Empty<Bytes>> {
        hyper::Request::builder()
            .uri(path)
            .header("host", "127.0.0.1")
            .header("authorization", format!("Bearer {}", self.token))
            .body(Empty::new())
            .unwrap()
    }
}

/// Reads until the server closes (EOF or an error); returns how long that took from `since`.
async fn closed_after<S: tokio::io::AsyncRead + Unpin>(s: &mut S, since: Instant) -> Duration {
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return since.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("the server kept the connection open for 20 s"),
        }
    }
}

#[tokio::test]
async fn a_slowloris_is_cut_when_its_headers_take_longer_than_the_limit() {
    let s = start().await;
    let mut c = s.tls(b"http/1.1").await;
    let t = Instant::now();
    // One byte every 100 ms: the headers would take about 6 s.
    let head = format!(
        "GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
        s.token
    );
    let mut cut = None;
    for b in head.bytes() {
        if c.write_all(&[b]).await.is_err() || c.flush().await.is_err() {
            cut = Some(t.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if t.elapsed() > Duration::from_secs(10) {
            break;
        }
    }
    let cut = match cut {
        Some(c) => c,
        None => closed_after(&mut c, t).await,
    };
    // first_request_timeout 2 s from the connection (the handshake came before `t`), then at
    // most 1 s for the close.
    assert!(
        cut >= Duration::from_millis(1000) && cut < Duration::from_secs(5),
        "cut after {cut:?}"
    );
}

#[tokio::test]
async fn a_silent_tcp_connection_and_a_silent_tls_connection_are_closed() {
    let s = start().await;
    let t = Instant::now();
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    let d = closed_after(&mut tcp, t).await;
    assert!(
        d >= Duration::from_millis(500) && d < Duration::from_secs(4),
        "plain TCP closed after {d:?} (handshake timeout 1 s)"
    );
    let t = Instant::now();
    let mut c = s.tls(b"h2").await;
    let d = closed_after(&mut c, t).await;
    assert!(
        d >= Duration::from_millis(1000) && d < Duration::from_secs(5),
        "TLS without a request closed after {d:?} (first request 2 s)"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_but_an_idle_watch_is_kept() {
    let s = start().await;
    // HTTP/1.1: one request, then nothing.
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(s.tls(b"http/1.1").await))
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let resp = send.send_request(s.request("/version")).await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.unwrap();
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), conn).await;
    let d = t.elapsed();
    assert!(r.is_ok(), "the idle connection was kept for 10 s");
    assert!(
        d >= Duration::from_millis(1500) && d < Duration::from_secs(5),
        "idle keep-alive closed after {d:?} (idle timeout 2 s)"
    );
    // HTTP/2: a watch with no event for three idle timeouts keeps its connection and gets the
    // event that comes then.
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(s.tls(b"h2").await),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let resp = send
        .send_request(s.request("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let r = podgrace_api::resource::find("", "v1", "configmaps").unwrap();
    s.api
        .create(
            r,
            "default",
            br#"{"metadata":{"name":"late"}}"#,
            podgrace_api::registry::FieldValidation::Strict,
        )
        .unwrap();
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("the watch's event")
        .expect("a frame")
        .expect("no error");
    let text = String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap();
    assert!(
        text.starts_with(r#"{"type":"ADDED","object":{"kind":"ConfigMap""#),
        "{text}"
    );
    assert!(text.contains(r#""name":"late""#), "{text}");
}

/// 300 slowloris connections at once do not keep a well-behaved client waiting, and each of
/// them is closed at the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_slow_clients_do_not_block_a_good_one() {
    let s = start().await;
    let mut slow = Vec::new();
    for _ in 0..300 {
        let opened = Instant::now();
        let mut c = s.tls(b"http/1.1").await;
        // Headers begun, never ended (on a loaded machine the first ones may be cut already).
        let _ = c
            .write_all(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await;
        let _ = c.flush().await;
        slow.push((opened, c));
    }
    let t = Instant::now();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(s.tls(b"http/1.1").await))
            .await
            .unwrap();
    tokio::spawn(conn);
    let resp = send.send_request(s.request("/version")).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    for (opened, c) in &mut slow {
        let d = closed_after(c, *opened).await;
        // first_request_timeout 2 s, at most 1 s for the close, and the machine's load.
        assert!(d < Duration::from_secs(8), "a slow client kept for {d:?}");
    }
}

/// A request whose body comes a byte at a time gets kube-apiserver's 504 at the request timeout
/// (2 s here, 1 min in serve) instead of holding the request for ever.
#[tokio::test]
async fn a_body_that_never_finishes_gets_504_at_the_request_timeout() {
    let s = start_with(ApiConfig {
        request_timeout: Duration::from_secs(2),
        ..ApiConfig::default()
    })
    .await;
    let mut c = s.tls(b"http/1.1").await;
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"meta",
        s.token
    );
    c.write_all(head.as_bytes()).await.unwrap();
    c.flush().await.unwrap();
    let t = Instant::now();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(b"}") {
        match tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => reply.extend_from_slice(&buf[..n]),
            other => panic!("no answer: {other:?} after {:?}", t.elapsed()),
        }
    }
    let d = t.elapsed();
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with("HTTP/1.1 504 Gateway Timeout\r\n"),
        "{reply}"
    );
    assert!(
        reply.ends_with(r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}"#),
        "{reply}"
    );
    assert!(
        d >= Duration::from_millis(1900) && d < Duration::from_secs(6),
        "answered after {d:?}"
    );
}
