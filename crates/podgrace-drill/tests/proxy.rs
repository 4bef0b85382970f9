//! The service proxy with real sockets, in front of in-process demo-app backends (tokio tasks).
//!
//! The backends run in-process here because these tests are about the proxy's choices (round
//! robin, pinning, fallback, modes), not about processes; the endpoint-race tests with real
//! `podgrace demo-app` processes and real SIGTERMs live in `crates/podgrace/tests/drill_race.rs`,
//! where Cargo gives the built binary's path.

mod common;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use podgrace_drill::demoapp::{self, DemoConfig};
use podgrace_drill::endpoints::{Endpoint, EndpointsHandle};
use podgrace_drill::proxy::{Mode, Proxy, ProxyConfig, ProxyOutcome};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

struct Backend {
    addr: SocketAddr,
    sigterm: mpsc::UnboundedSender<()>,
    task: tokio::task::JoinHandle<demoapp::DemoExit>,
}

async fn backend(config: DemoConfig) -> Backend {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (sigterm, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(demoapp::serve(listener, config, rx));
    Backend {
        addr,
        sigterm,
        task,
    }
}

/// A free loopback port with nothing listening on it.
async fn closed_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    l.local_addr().expect("addr")
}

type H1 = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn h1_connect(addr: SocketAddr) -> H1 {
    let s = TcpStream::connect(addr).await.expect("connect");
    let (tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    tx
}

async fn h1_get(tx: &mut H1, path: &str) -> u16 {
    tx.ready().await.expect("ready");
    let req = Request::get(path)
        .header("host", "svc")
        .body(Empty::new())
        .expect("request");
    let resp = tx.send_request(req).await.expect("response");
    let status = resp.status().as_u16();
    resp.into_body().collect().await.expect("body");
    status
}

async fn two_backends() -> (Backend, Backend, EndpointsHandle, Proxy) {
    let a = backend(DemoConfig::default()).await;
    let b = backend(DemoConfig::default()).await;
    let h = EndpointsHandle::new(Duration::from_secs(1));
    h.publish_now(vec![
        Endpoint::ready("a", a.addr),
        Endpoint::ready("b", b.addr),
    ]);
    let p = Proxy::start(
        "127.0.0.1:0".parse().expect("addr"),
        ProxyConfig::new(Mode::Http1),
        h.view(),
    )
    .await
    .expect("proxy");
    (a, b, h, p)
}

fn pods(p: &Proxy) -> Vec<String> {
    p.records()
        .iter()
        .map(|r| r.pod.clone().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn new_connections_go_round_robin() {
    let (_a, _b, _h, p) = two_backends().await;
    for _ in 0..4 {
        let mut c = h1_connect(p.local_addr()).await;
        assert_eq!(h1_get(&mut c, "/").await, 200);
    }
    assert_eq!(pods(&p), ["a", "b", "a", "b"]);
}

/// Each pinned client connection is listed with the client's address and its pod, the
/// conntrack entry a failure the proxy never saw as a request is attributed by.
#[tokio::test]
async fn pinned_connections_are_listed_by_client_address() {
    let (_a, _b, _h, p) = two_backends().await;
    let mut ports = Vec::new();
    for _ in 0..2 {
        let s = TcpStream::connect(p.local_addr()).await.expect("connect");
        ports.push(s.local_addr().expect("local").port());
        let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        assert_eq!(h1_get(&mut tx, "/").await, 200);
    }
    let pinned: Vec<(u16, String)> = p
        .pinned()
        .iter()
        .map(|c| (c.client.port(), c.pod.clone()))
        .collect();
    assert_eq!(
        pinned,
        [(ports[0], "a".to_string()), (ports[1], "b".to_string())]
    );
}

#[tokio::test]
async fn a_keep_alive_connection_stays_pinned_after_its_endpoint_is_removed() {
    let (a, b, h, p) = two_backends().await;
    let mut pinned = h1_connect(p.local_addr()).await; // picks a
    assert_eq!(h1_get(&mut pinned, "/").await, 200);
    // a's termination reached the proxy: only b is left for new connections.
    h.publish_now(vec![
        Endpoint::ready("a", a.addr).terminating(true),
        Endpoint::ready("b", b.addr),
    ]);
    for _ in 0..3 {
        assert_eq!(h1_get(&mut pinned, "/").await, 200);
    }
    let mut fresh = h1_connect(p.local_addr()).await;
    assert_eq!(h1_get(&mut fresh, "/").await, 200);
    assert_eq!(pods(&p), ["a", "a", "a", "a", "b"]);
    assert!(p
        .records()
        .iter()
        .all(|r| r.outcome == ProxyOutcome::Forwarded && r.status == Some(200)));
}

#[tokio::test]
async fn the_pinned_client_connection_closes_when_the_pod_closes_it() {
    let (a, _b, _h, p) = two_backends().await;
    let mut c = h1_connect(p.local_addr()).await; // picks a
    assert_eq!(h1_get(&mut c, "/").await, 200);
    a.sigterm.send(()).expect("sigterm"); // exit mode: a's connections close
    assert_eq!(
        a.task.await.expect("join"),
        demoapp::DemoExit::ExitedOnSigterm
    );
    // The client sees its connection closed (as the pod's FIN through DNAT), not a 502.
    let closed = tokio::time::timeout(Duration::from_secs(2), async {
        while !c.is_closed() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(closed.is_ok(), "client connection still open");
}

#[tokio::test]
async fn kube_proxy_falls_back_to_serving_terminating_endpoints() {
    let (a, b, h, p) = two_backends().await;
    // Both terminating; only b still passes readiness (serving).
    h.publish_now(vec![
        Endpoint::ready("a", a.addr).terminating(false),
        Endpoint::ready("b", b.addr).terminating(true),
    ]);
    for _ in 0..3 {
        let mut c = h1_connect(p.local_addr()).await;
        assert_eq!(h1_get(&mut c, "/").await, 200);
    }
    assert_eq!(pods(&p), ["b", "b", "b"]);
    // None serving: 503, no endpoint.
    h.publish_now(vec![Endpoint::ready("a", a.addr).terminating(false)]);
    let mut c = h1_connect(p.local_addr()).await;
    assert_eq!(h1_get(&mut c, "/").await, 503);
    assert_eq!(
        p.records().last().map(|r| r.outcome),
        Some(ProxyOutcome::NoEndpoints)
    );
}

#[tokio::test]
async fn a_refused_upstream_is_a_502_and_recorded() {
    let gone = closed_port().await;
    let (_h, p) = common::proxy_to(Mode::Http1, "gone", gone).await;
    let mut c = h1_connect(p.local_addr()).await;
    assert_eq!(h1_get(&mut c, "/").await, 502);
    let r = p.records();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].outcome, ProxyOutcome::ConnectRefused);
    assert_eq!(r[0].pod.as_deref(), Some("gone"));
}

#[tokio::test]
async fn h2c_mode_multiplexes_streams_on_one_pinned_upstream() {
    let a = backend(DemoConfig::default()).await;
    let b = backend(DemoConfig::default()).await;
    let h = EndpointsHandle::new(Duration::ZERO);
    h.publish_now(vec![
        Endpoint::ready("a", a.addr),
        Endpoint::ready("b", b.addr),
    ]);
    let p = Proxy::start(
        "127.0.0.1:0".parse().expect("addr"),
        ProxyConfig::new(Mode::H2c),
        h.view(),
    )
    .await
    .expect("proxy");
    let s = TcpStream::connect(p.local_addr()).await.expect("connect");
    let (tx, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(s))
        .await
        .expect("h2 handshake");
    tokio::spawn(conn);
    let mut streams = Vec::new();
    for _ in 0..10 {
        let mut tx = tx.clone();
        streams.push(tokio::spawn(async move {
            let req = Request::get("http://svc/")
                .body(Empty::<Bytes>::new())
                .expect("request");
            let resp = tx.send_request(req).await.expect("response");
            assert_eq!(resp.version(), hyper::Version::HTTP_2);
            resp.status().as_u16()
        }));
    }
    for s in streams {
        assert_eq!(s.await.expect("join"), 200);
    }
    let r = p.records();
    assert_eq!(r.len(), 10);
    assert!(
        r.iter().all(|r| r.pod.as_deref() == Some("a")),
        "one connection, one pod"
    );
}

#[tokio::test]
async fn tcp_mode_splices_bytes_and_resets_when_the_upstream_refuses() {
    let a = backend(DemoConfig::default()).await;
    let (h, p) = common::proxy_to(Mode::Tcp, "a", a.addr).await;
    let mut s = TcpStream::connect(p.local_addr()).await.expect("connect");
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("ok\n"), "{text}");

    h.publish_now(vec![Endpoint::ready("gone", closed_port().await)]);
    let mut s = TcpStream::connect(p.local_addr()).await.expect("connect");
    let mut one = [0u8; 1];
    let err = s.read(&mut one).await.expect_err("the proxy resets");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    let outcomes: Vec<ProxyOutcome> = p.records().iter().map(|r| r.outcome).collect();
    assert!(
        outcomes.contains(&ProxyOutcome::ConnectRefused),
        "{outcomes:?}"
    );
}

#[test]
fn starting_outside_a_runtime_is_an_error_not_a_panic() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let view = rt.block_on(async { EndpointsHandle::new(Duration::ZERO).view() });
    let r = Proxy::from_std(l, ProxyConfig::new(Mode::Tcp), view);
    assert!(matches!(
        r,
        Err(podgrace_drill::proxy::ProxyError::NoRuntime)
    ));
}

#[tokio::test]
async fn per_request_balancing_spreads_one_keep_alive_connection_over_the_pods() {
    let a = backend(DemoConfig::default()).await;
    let b = backend(DemoConfig::default()).await;
    let h = EndpointsHandle::new(Duration::ZERO);
    h.publish_now(vec![
        Endpoint::ready("a", a.addr),
        Endpoint::ready("b", b.addr),
    ]);
    let mut config = ProxyConfig::new(Mode::Http1);
    config.balancing = podgrace_drill::proxy::Balancing::PerRequest;
    let p = Proxy::start("127.0.0.1:0".parse().expect("addr"), config, h.view())
        .await
        .expect("proxy");
    let mut c = h1_connect(p.local_addr()).await;
    for _ in 0..4 {
        assert_eq!(h1_get(&mut c, "/").await, 200);
    }
    assert_eq!(pods(&p), ["a", "b", "a", "b"]);
    assert!(p.records().iter().all(|r| r.connection == 0));
}

type H2 = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

/// A draining demo-app pod behind an h2c proxy, and an h2c client connection to the proxy (its
/// connection future to be spawned by the test).
async fn draining_pod_behind_h2c_proxy() -> (
    Backend,
    podgrace_drill::endpoints::EndpointsHandle,
    Proxy,
    H2,
    impl std::future::Future<Output = Result<(), hyper::Error>>,
) {
    let a = backend(DemoConfig {
        on_sigterm: demoapp::OnSigterm::Drain,
        ..DemoConfig::default()
    })
    .await;
    let (h, p) = common::h2c_proxy_to(a.addr).await;
    let s = TcpStream::connect(p.local_addr()).await.expect("connect");
    let (tx, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(s))
        .await
        .expect("h2 handshake");
    (a, h, p, tx, conn)
}

#[tokio::test]
async fn h2c_passes_the_pods_goaway_on_when_it_drains() {
    let (a, _h, _p, mut tx, conn) = draining_pod_behind_h2c_proxy().await;
    let conn = tokio::spawn(conn);
    let req = Request::get("http://svc/")
        .body(Empty::<Bytes>::new())
        .expect("request");
    assert_eq!(tx.send_request(req).await.expect("response").status(), 200);
    a.sigterm.send(()).expect("sigterm");
    // The pod's GOAWAY closes its connection to the proxy, and the proxy's GOAWAY ends the
    // client's connection cleanly.
    let ended = tokio::time::timeout(Duration::from_secs(3), conn)
        .await
        .expect("the client connection ends")
        .expect("join");
    assert!(ended.is_ok(), "a graceful end, not an error: {ended:?}");
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(3), a.task)
            .await
            .expect("drained")
            .expect("join"),
        demoapp::DemoExit::Drained
    );
}

/// A pod that drains with a stream still open sends GOAWAY at once; the proxy passes it on to
/// the client at once too (as the bytes would pass through kube-proxy), not only when the pod
/// finally closes: a new stream the client opens on that connection meanwhile would otherwise
/// reach a pod that no longer takes any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_passes_the_goaway_on_while_a_stream_is_still_open() {
    let (a, _h, _p, mut tx, conn) = draining_pod_behind_h2c_proxy().await;
    tokio::spawn(conn);
    let req = Request::get("http://svc/stream?seconds=2")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = tx.send_request(req).await.expect("response");
    assert_eq!(resp.status(), 200);
    let body = tokio::spawn(async move { resp.into_body().collect().await.map(|b| b.to_bytes()) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = tokio::time::Instant::now();
    a.sigterm.send(()).expect("sigterm");
    // Within half a second the client's connection takes no new stream.
    let refused = loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let req = Request::get("http://svc/")
            .body(Empty::<Bytes>::new())
            .expect("request");
        let probe = async {
            tx.ready().await?;
            tx.send_request(req).await
        };
        match probe.await {
            Err(_) => break t.elapsed(),
            Ok(r) => {
                assert_eq!(
                    r.status(),
                    200,
                    "a new stream reached the draining pod {:?} after SIGTERM",
                    t.elapsed()
                );
                assert!(t.elapsed() < Duration::from_millis(500), "still open");
            }
        }
    };
    assert!(refused < Duration::from_millis(500), "{refused:?}");
    // The open stream itself finishes.
    let body = body.await.expect("join").expect("the stream ends cleanly");
    assert!(body.starts_with(b"tick 0\n"));
}
