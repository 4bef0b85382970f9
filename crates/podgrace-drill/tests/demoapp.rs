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
        drain: Some(Duration::from_millis(200)),
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

// ---- /stream, unlimited drain, sidecar ----

type H2 = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

async fn connect_h2(addr: SocketAddr) -> H2 {
    let s = TcpStream::connect(addr).await.expect("connect");
    let (tx, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(s),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    tx
}

fn get_req(path: &str) -> Request<Empty<Bytes>> {
    Request::get(path)
        .header("host", "x")
        .body(Empty::new())
        .expect("req")
}

fn get_req_h2(addr: SocketAddr, path: &str) -> Request<Empty<Bytes>> {
    Request::get(format!("http://{addr}{path}"))
        .body(Empty::new())
        .expect("req")
}

/// A body read to its end: each `tick N` line with its arrival time after `t0`, and how the
/// body ended (`Ok` clean end, `Err` cut) and when.
struct Read {
    lines: Vec<(String, Duration)>,
    end: Result<(), String>,
    at: Duration,
}

async fn read_lines(mut body: hyper::body::Incoming, t0: tokio::time::Instant) -> Read {
    let mut lines = Vec::new();
    let mut partial = String::new();
    loop {
        match body.frame().await {
            None => {
                return Read {
                    lines,
                    end: Ok(()),
                    at: t0.elapsed(),
                }
            }
            Some(Err(e)) => {
                return Read {
                    lines,
                    end: Err(e.to_string()),
                    at: t0.elapsed(),
                }
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    partial.push_str(std::str::from_utf8(&data).expect("utf-8"));
                    while let Some(i) = partial.find('\n') {
                        lines.push((partial[..i].to_string(), t0.elapsed()));
                        partial.drain(..=i);
                    }
                }
            }
        }
    }
}

fn assert_ticks(read: &Read, n: usize, interval: Duration) {
    let names: Vec<&str> = read.lines.iter().map(|(l, _)| l.as_str()).collect();
    let want: Vec<String> = (0..n).map(|i| format!("tick {i}")).collect();
    assert_eq!(names, want);
    for (i, (_, at)) in read.lines.iter().enumerate() {
        // Never early (the app's clock starts after t0); late by at most a scheduling hiccup.
        let due = interval * i as u32;
        assert!(*at >= due, "tick {i} at {at:?}, due {due:?}");
        assert!(
            *at < due + Duration::from_millis(300),
            "tick {i} at {at:?}, due {due:?}"
        );
    }
}

#[tokio::test]
async fn a_stream_sends_a_line_per_interval_and_ends_cleanly_over_http1_and_h2c() {
    let (addr, _term, _task) = start(DemoConfig::default()).await;
    let path = "/stream?seconds=1&interval_ms=100";

    let mut h1 = connect(addr).await;
    let t0 = tokio::time::Instant::now();
    let resp = h1.send_request(get_req(path)).await.expect("response");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/plain");
    assert_eq!(resp.headers()["transfer-encoding"], "chunked");
    let read = read_lines(resp.into_body(), t0).await;
    assert_ticks(&read, 11, Duration::from_millis(100));
    assert_eq!(read.end, Ok(()));
    assert!(
        read.at >= Duration::from_secs(1) && read.at < Duration::from_millis(1300),
        "ended at {:?}",
        read.at
    );
    // The connection is kept alive after the stream.
    assert_eq!(get(&mut h1, "/").await, (200, None));

    let mut h2 = connect_h2(addr).await;
    let t0 = tokio::time::Instant::now();
    let resp = h2
        .send_request(get_req_h2(addr, path))
        .await
        .expect("response");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    let read = read_lines(resp.into_body(), t0).await;
    assert_ticks(&read, 11, Duration::from_millis(100));
    assert_eq!(read.end, Ok(()));
    assert!(
        read.at >= Duration::from_secs(1) && read.at < Duration::from_millis(1300),
        "ended at {:?}",
        read.at
    );
}

#[tokio::test]
async fn bad_stream_queries_are_400() {
    let (addr, _term, _task) = start(DemoConfig::default()).await;
    let mut c = connect(addr).await;
    for q in [
        "seconds=0",
        "seconds=abc",
        "seconds=1&interval_ms=-5",
        "interval_ms=100",
        "second=1",
    ] {
        assert_eq!(
            get(&mut c, &format!("/stream?{q}")).await,
            (400, None),
            "{q}"
        );
    }
}

#[tokio::test]
async fn drain_sends_goaway_keeps_a_stream_flowing_and_cuts_it_at_the_deadline() {
    let (addr, term, task) = start(DemoConfig {
        on_sigterm: OnSigterm::Drain,
        drain: Some(Duration::from_secs(1)),
        ..DemoConfig::default()
    })
    .await;
    let mut h2 = connect_h2(addr).await;
    let resp = h2
        .send_request(get_req_h2(addr, "/stream?seconds=60&interval_ms=100"))
        .await
        .expect("response");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    // The first line arrived: the stream is flowing.
    let first = body.frame().await.expect("a frame").expect("data");
    assert_eq!(first.into_data().expect("data"), "tick 0\n");

    let t_term = tokio::time::Instant::now();
    term.send(()).expect("sigterm");
    let reader = tokio::spawn(read_lines(body, t_term));
    // GOAWAY: the connection takes no new stream (the client refuses it, or the server resets
    // it as refused); the listener is closed.
    let refused = async {
        loop {
            let r = h2.ready().await;
            let r = match r {
                Err(e) => Err(e),
                Ok(()) => h2.send_request(get_req_h2(addr, "/")).await.map(|_| ()),
            };
            match r {
                Err(e) => return e,
                // Sent before the GOAWAY arrived: a request in flight, answered; try again.
                Ok(()) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    };
    let e = tokio::time::timeout(Duration::from_millis(500), refused)
        .await
        .expect("a new stream is refused soon after SIGTERM");
    assert!(t_term.elapsed() < Duration::from_millis(500), "{e}");
    let refused = TcpStream::connect(addr).await.expect_err("refused");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

    let exit = tokio::time::timeout(Duration::from_secs(3), task)
        .await
        .expect("exited at the deadline")
        .expect("join");
    let exited_at = t_term.elapsed();
    assert_eq!(exit, DemoExit::DrainTimedOut);
    assert!(
        exited_at >= Duration::from_millis(950) && exited_at < Duration::from_millis(1300),
        "exited at {exited_at:?}"
    );
    let read = reader.await.expect("join");
    assert!(read.end.is_err(), "the stream is cut, not ended");
    assert!(
        read.at >= Duration::from_millis(950) && read.at < Duration::from_millis(1300),
        "cut at {:?}",
        read.at
    );
    // Ticks kept coming during the drain, up to the cut.
    assert!(
        read.lines.len() >= 7,
        "{} ticks during the drain",
        read.lines.len()
    );
    let last = read.lines.last().map(|(_, at)| *at).unwrap_or_default();
    assert!(last >= Duration::from_millis(700), "last tick at {last:?}");
}

#[tokio::test]
async fn unlimited_drain_waits_for_an_idle_stream_as_long_as_it_is_open() {
    let (addr, term, mut task) = start(DemoConfig {
        on_sigterm: OnSigterm::Drain,
        drain: None,
        ..DemoConfig::default()
    })
    .await;
    let mut h2 = connect_h2(addr).await;
    let resp = h2
        .send_request(get_req_h2(addr, "/stream"))
        .await
        .expect("the head comes at once");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    term.send(()).expect("sigterm");
    // No data, no end, no exit.
    let waited = tokio::time::timeout(Duration::from_secs(2), async {
        tokio::select! {
            frame = body.frame() => panic!("the idle stream sent {frame:?}"),
            exit = &mut task => panic!("the app exited: {exit:?}"),
        }
    })
    .await;
    assert!(waited.is_err());
    // The client goes away: the drain is over at once.
    let t0 = tokio::time::Instant::now();
    drop(body);
    let exit = tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("drained once the stream is gone")
        .expect("join");
    assert_eq!(exit, DemoExit::Drained);
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    drop(h2);
}

/// An app (latency as given) behind a sidecar (`sidecar` with its upstream set to the app).
async fn app_and_sidecar(
    latency: Duration,
    sidecar: DemoConfig,
) -> (
    SocketAddr,
    mpsc::UnboundedSender<()>,
    tokio::task::JoinHandle<DemoExit>,
    mpsc::UnboundedSender<()>,
) {
    let (app, app_term, _app_task) = start(DemoConfig {
        latency,
        ..DemoConfig::default()
    })
    .await;
    let (addr, term, task) = start(DemoConfig {
        upstream: Some(app),
        ..sidecar
    })
    .await;
    (addr, term, task, app_term)
}

/// Sends a slow `GET /` through the sidecar on a connection it has accepted; returns the
/// request's task (status and body, or the error) and a probe connection.
async fn slow_request_through(
    sidecar: SocketAddr,
) -> (tokio::task::JoinHandle<Result<(u16, Bytes), String>>, H1) {
    let mut c = connect(sidecar).await;
    let mut probe = connect(sidecar).await;
    // Both connections accepted (answered by the sidecar itself).
    assert_eq!(get(&mut c, "/ready").await, (200, None));
    assert_eq!(get(&mut probe, "/ready").await, (200, None));
    let req = tokio::spawn(async move {
        let resp = c
            .send_request(
                Request::get("/slow")
                    .header("host", "x")
                    .header("x-podgrace-request", "1")
                    .body(Empty::new())
                    .expect("req"),
            )
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok((status, body.to_bytes()))
    });
    // Let the request reach the app through the sidecar.
    tokio::time::sleep(Duration::from_millis(200)).await;
    (req, probe)
}

#[tokio::test]
async fn a_draining_sidecar_cuts_a_forwarded_request_at_its_drain_deadline() {
    let (sidecar, term, task, _app_term) = app_and_sidecar(
        Duration::from_secs(3),
        DemoConfig {
            on_sigterm: OnSigterm::Drain,
            drain: Some(Duration::from_secs(1)),
            ..DemoConfig::default()
        },
    )
    .await;
    let (req, mut probe) = slow_request_through(sidecar).await;
    let t_term = tokio::time::Instant::now();
    term.send(()).expect("sigterm");
    // Readiness fails once the sidecar drains, and by then its listener is closed.
    assert_eq!(get(&mut probe, "/ready").await, (503, Some("close".into())));
    let refused = TcpStream::connect(sidecar).await.expect_err("refused");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let result = req.await.expect("join");
    let cut_at = t_term.elapsed();
    assert!(result.is_err(), "the request is cut: {result:?}");
    assert!(
        cut_at >= Duration::from_millis(950) && cut_at < Duration::from_millis(1300),
        "cut at {cut_at:?}"
    );
    assert_eq!(task.await.expect("join"), DemoExit::DrainTimedOut);
}

/// R22's pod in small: the sidecar's drain deadline cuts the forwarded request (its client sees
/// it fail), but the draining app behind it goes on with that request's work until it is done,
/// as real servers do (the field case: the app's outbound calls after t = 5 s fail, so it is
/// still at work), and exits only then. Before, the app exited as its connection from the
/// sidecar closed, together with the sidecar.
#[tokio::test]
async fn a_draining_app_finishes_the_work_of_a_request_whose_client_went_away() {
    let latency = Duration::from_millis(1500);
    let (app, app_term, app_task) = start(DemoConfig {
        on_sigterm: OnSigterm::Drain,
        latency,
        drain: Some(Duration::from_secs(10)),
        ..DemoConfig::default()
    })
    .await;
    let (sidecar, term, sidecar_task) = start(DemoConfig {
        on_sigterm: OnSigterm::Drain,
        drain: Some(Duration::from_millis(300)),
        upstream: Some(app),
        ..DemoConfig::default()
    })
    .await;
    let t0 = tokio::time::Instant::now();
    let (req, _probe) = slow_request_through(sidecar).await;
    term.send(()).expect("sigterm");
    app_term.send(()).expect("sigterm");
    assert!(req.await.expect("join").is_err(), "the sidecar cut it");
    assert_eq!(sidecar_task.await.expect("join"), DemoExit::DrainTimedOut);
    let cut_at = t0.elapsed();
    let exit = tokio::time::timeout(Duration::from_secs(5), app_task)
        .await
        .expect("the app drained")
        .expect("join");
    let app_exit = t0.elapsed();
    assert_eq!(exit, DemoExit::Drained);
    // The request reached the app within the first 200 ms; its work took `latency`.
    assert!(
        app_exit >= latency && app_exit > cut_at + Duration::from_millis(500),
        "the app exited at {app_exit:?}, the sidecar cut at {cut_at:?}"
    );
}

#[tokio::test]
async fn a_sidecar_with_a_long_enough_drain_lets_a_forwarded_request_finish() {
    let (sidecar, term, task, _app_term) = app_and_sidecar(
        Duration::from_secs(3),
        DemoConfig {
            on_sigterm: OnSigterm::Drain,
            drain: Some(Duration::from_secs(5)),
            ..DemoConfig::default()
        },
    )
    .await;
    let t0 = tokio::time::Instant::now();
    let (req, _probe) = slow_request_through(sidecar).await;
    term.send(()).expect("sigterm");
    let result = req.await.expect("join");
    let done_at = t0.elapsed();
    assert_eq!(result, Ok((200, Bytes::from_static(b"ok\n"))));
    assert!(
        done_at >= Duration::from_secs(3) && done_at < Duration::from_millis(3400),
        "answered at {done_at:?}"
    );
    // The sidecar exits once its connections are gone, before its deadline.
    let exit = tokio::time::timeout(Duration::from_secs(4), task)
        .await
        .expect("drained")
        .expect("join");
    assert_eq!(exit, DemoExit::Drained);
}

#[tokio::test]
async fn a_stream_flows_through_the_sidecar_over_http1_and_h2c() {
    let (sidecar, _term, _task, _app_term) =
        app_and_sidecar(Duration::ZERO, DemoConfig::default()).await;
    let path = "/stream?seconds=0.5&interval_ms=100";
    let mut h1 = connect(sidecar).await;
    let t0 = tokio::time::Instant::now();
    let resp = h1.send_request(get_req(path)).await.expect("response");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/plain");
    let read = read_lines(resp.into_body(), t0).await;
    assert_ticks(&read, 6, Duration::from_millis(100));
    assert_eq!(read.end, Ok(()));

    let mut h2 = connect_h2(sidecar).await;
    let t0 = tokio::time::Instant::now();
    let resp = h2
        .send_request(get_req_h2(sidecar, path))
        .await
        .expect("response");
    assert_eq!(resp.status(), 200);
    let read = read_lines(resp.into_body(), t0).await;
    assert_ticks(&read, 6, Duration::from_millis(100));
    assert_eq!(read.end, Ok(()));
}

/// A one-shot upstream on a raw socket: reads one request head, answers `reply`, closes.
/// Returns its address and the request head it got.
async fn raw_upstream(reply: &'static [u8]) -> (SocketAddr, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.expect("accept");
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.ends_with(b"\r\n\r\n") {
            let n = s.read(&mut buf).await.expect("read");
            assert!(n > 0, "the request head is complete");
            head.extend_from_slice(&buf[..n]);
        }
        s.write_all(reply).await.expect("write");
        String::from_utf8(head).expect("utf-8")
    });
    (addr, task)
}

#[tokio::test]
async fn the_sidecar_passes_the_request_on_and_reports_upstream_failures() {
    // Method, path, query and headers reach the upstream; hop-by-hop headers do not.
    let (up, head) =
        raw_upstream(b"HTTP/1.1 201 Created\r\ncontent-length: 3\r\nx-up: 1\r\n\r\nyes").await;
    let (sidecar, _t, _task) = start(DemoConfig {
        upstream: Some(up),
        ..DemoConfig::default()
    })
    .await;
    let mut c: hyper::client::conn::http1::SendRequest<Empty<Bytes>> = connect(sidecar).await;
    let resp = c
        .send_request(
            Request::delete("/items/7?force=1")
                .header("host", "svc")
                .header("x-podgrace-request", "42")
                .header("keep-alive", "timeout=5")
                .body(Empty::new())
                .expect("req"),
        )
        .await
        .expect("response");
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["x-up"], "1");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(body, "yes");
    let head = head.await.expect("join").to_ascii_lowercase();
    assert!(
        head.starts_with("delete /items/7?force=1 http/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nx-podgrace-request: 42\r\n"), "{head}");
    assert!(head.contains("\r\nhost: svc\r\n"), "{head}");
    assert!(!head.contains("keep-alive: timeout"), "{head}");

    // The upstream breaks after its head: the client's body read fails.
    let (up, _head) = raw_upstream(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort").await;
    let (sidecar, _t, _task) = start(DemoConfig {
        upstream: Some(up),
        ..DemoConfig::default()
    })
    .await;
    let mut c = connect(sidecar).await;
    let resp = c.send_request(get_req("/")).await.expect("response");
    assert_eq!(resp.status(), 200);
    assert!(resp.into_body().collect().await.is_err(), "the body is cut");

    // The upstream is not there: 502.
    let gone = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let gone_addr = gone.local_addr().expect("addr");
    drop(gone);
    let (sidecar, _t, _task) = start(DemoConfig {
        upstream: Some(gone_addr),
        ..DemoConfig::default()
    })
    .await;
    let mut c = connect(sidecar).await;
    assert_eq!(get(&mut c, "/").await, (502, None));
    // The sidecar answers its readiness itself.
    assert_eq!(get(&mut c, "/ready").await, (200, None));
}
