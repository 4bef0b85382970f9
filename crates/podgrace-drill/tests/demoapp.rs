//! The demo app's SIGTERM behaviours, in-process on real sockets.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;
use podgrace_drill::demoapp::{self, DemoConfig, DemoExit, OnSigterm};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

async fn start(
    config: DemoConfig,
) -> (
    SocketAddr,
    mpsc::UnboundedSender<()>,
    tokio::task::JoinHandle<DemoExit>,
) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    (addr, tx, tokio::spawn(demoapp::serve(l, config, rx)))
}

type H1 = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn connect(addr: SocketAddr) -> H1 {
    let s = TcpStream::connect(addr).await.expect("connect");
    let (tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    tx
}

/// `(status, Connection header)` of `GET path`.
async fn get(tx: &mut H1, path: &str) -> (u16, Option<String>) {
    tx.ready().await.expect("ready");
    let resp = tx
        .send_request(
            Request::get(path)
                .header("host", "x")
                .body(Empty::new())
                .expect("req"),
        )
        .await
        .expect("response");
    let status = resp.status().as_u16();
    let conn = resp
        .headers()
        .get("connection")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    resp.into_body().collect().await.expect("body");
    (status, conn)
}

#[tokio::test]
async fn drain_finishes_in_flight_requests_closes_keep_alive_and_refuses_new_connections() {
    let (addr, term, task) = start(DemoConfig {
        on_sigterm: OnSigterm::Drain,
        latency: Duration::from_millis(300),
        ..DemoConfig::default()
    })
    .await;
    let mut busy = connect(addr).await;
    let mut idle = connect(addr).await;
    assert_eq!(get(&mut idle, "/ready").await, (200, None));
    let in_flight = tokio::spawn(async move { get(&mut busy, "/").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    term.send(()).expect("sigterm");
    // The request in flight completes, told to close its connection.
    assert_eq!(
        in_flight.await.expect("join"),
        (200, Some("close".to_string()))
    );
    // The idle keep-alive connection gets one more answer, with Connection: close; readiness fails.
    assert_eq!(
        get(&mut idle, "/ready").await,
        (503, Some("close".to_string()))
    );
    // The listener is closed.
    let refused = TcpStream::connect(addr).await.expect_err("refused");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let exit = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("drained in time")
        .expect("join");
    assert_eq!(exit, DemoExit::Drained);
}

#[tokio::test]
async fn drain_gives_up_after_the_drain_time() {
    let (addr, term, task) = start(DemoConfig {
        on_sigterm: OnSigterm::Drain,
        latency: Duration::from_secs(10),
        drain: Duration::from_millis(200),
        ..DemoConfig::default()
    })
    .await;
    let mut c = connect(addr).await;
    let slow = tokio::spawn(async move {
        c.ready().await.expect("ready");
        c.send_request(Request::get("/").body(Empty::<Bytes>::new()).expect("req"))
            .await
            .is_err()
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    term.send(()).expect("sigterm");
    assert_eq!(task.await.expect("join"), DemoExit::DrainTimedOut);
    assert!(slow.await.expect("join"), "the cut request fails");
}

#[tokio::test]
async fn ignore_keeps_serving_and_can_fail_readiness() {
    let (addr, term, task) = start(DemoConfig {
        on_sigterm: OnSigterm::Ignore,
        fail_ready_after_sigterm: true,
        ..DemoConfig::default()
    })
    .await;
    let mut c = connect(addr).await;
    term.send(()).expect("sigterm");
    term.send(()).expect("sigterm");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(get(&mut c, "/").await, (200, None));
    assert_eq!(get(&mut c, "/ready").await, (503, None));
    let mut fresh = connect(addr).await;
    assert_eq!(get(&mut fresh, "/").await, (200, None));
    assert!(!task.is_finished());
    task.abort();
}

#[tokio::test]
async fn exit_stops_at_once() {
    let (addr, term, task) = start(DemoConfig::default()).await;
    let mut c = connect(addr).await;
    assert_eq!(get(&mut c, "/").await, (200, None));
    term.send(()).expect("sigterm");
    assert_eq!(task.await.expect("join"), DemoExit::ExitedOnSigterm);
    let refused = TcpStream::connect(addr).await.expect_err("refused");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}
