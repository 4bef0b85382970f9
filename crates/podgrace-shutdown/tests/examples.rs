//! The numbered examples as a user runs them: real processes, real signals, real HTTP over
//! TCP. Each test is a scenario of a pod's termination: the kubelet's SIGTERM while a proxy
//! still sends new connections, keep-alive clients, requests in flight, the grace deadline, a
//! second signal.
//!
//! The examples are built by `cargo test` (all targets); they are found next to this test's
//! binary (`target/<profile>/examples/`). Quiescence watches the example's own port, so other
//! traffic on this machine does not disturb it.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running example, its stderr lines arriving on a channel with the instant each came.
struct Example {
    child: Child,
    addr: SocketAddr,
    lines: mpsc::Receiver<(Instant, String)>,
    seen: Vec<(Instant, String)>,
}

fn example_path(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    // target/<profile>/deps/examples-<hash> → target/<profile>/examples/<name>
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is not built: run the tests with `cargo test -p podgrace-shutdown` (which builds the examples)",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Example {
    fn start(name: &str, extra: &[&str], env: &[(&str, &str)]) -> Example {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut cmd = Command::new(example_path(name));
        cmd.arg(addr.to_string())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd.env_remove("POD_TERMINATION_GRACE_PERIOD")
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start example");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        let mut ex = Example {
            child,
            addr,
            lines,
            seen: Vec::new(),
        };
        ex.wait_line("listening on");
        ex
    }

    /// Waits (up to 10 s) for a stderr line containing `text`; the instant it came.
    fn wait_line(&mut self, text: &str) -> Instant {
        if let Some((at, _)) = self.seen.iter().find(|(_, l)| l.contains(text)) {
            return *at;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((at, line)) => {
                    let hit = line.contains(text);
                    self.seen.push((at, line));
                    if hit {
                        return at;
                    }
                }
                Err(_) => panic!("no line with {text:?}; seen: {:#?}", self.seen),
            }
        }
    }

    fn signal(&self, sig: rustix::process::Signal) -> Instant {
        let at = Instant::now();
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), sig).unwrap();
        at
    }

    /// Waits (up to 10 s) for the exit; its code and when it came.
    fn exit(&mut self) -> (Option<i32>, Instant) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), Instant::now());
            }
            assert!(
                Instant::now() < deadline,
                "the example did not exit; seen: {:#?}",
                self.seen
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on a new connection (`Connection: close`); the status code and body.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    c.set_read_timeout(Some(Duration::from_secs(30)))?;
    c.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut text = String::new();
    c.read_to_string(&mut text)?;
    parse_response(&text)
}

fn parse_response(text: &str) -> std::io::Result<(u16, String)> {
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no response: {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}

/// A keep-alive HTTP/1.1 connection: requests one at a time, responses read by length.
struct KeepAlive {
    reader: BufReader<TcpStream>,
}

impl KeepAlive {
    fn open(addr: SocketAddr) -> KeepAlive {
        let c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        KeepAlive {
            reader: BufReader::new(c),
        }
    }

    /// Sends `GET path`; returns the status and the response's headers, lower-cased.
    fn get(&mut self, path: &str) -> (u16, Vec<String>) {
        self.reader
            .get_mut()
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes())
            .unwrap();
        let mut status_line = String::new();
        self.reader.read_line(&mut status_line).unwrap();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h).unwrap();
            if h == "\r\n" || h.is_empty() {
                break;
            }
            headers.push(h.trim_end().to_ascii_lowercase());
        }
        let len: usize = headers
            .iter()
            .find_map(|h| {
                h.strip_prefix("content-length: ")
                    .map(|v| v.parse().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body).unwrap();
        (status, headers)
    }

    /// Waits for the server to close the connection; the instant of the EOF.
    fn wait_closed(&mut self) -> Instant {
        let mut buf = [0u8; 64];
        loop {
            match self.reader.read(&mut buf) {
                Ok(0) | Err(_) => return Instant::now(),
                Ok(_) => {}
            }
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

use rustix::process::Signal;

#[test]
fn readiness_fails_at_once_and_new_connections_are_served_until_they_stop() {
    let mut ex = Example::start("01_axum", &[], &[]);
    assert_eq!(get(ex.addr, "/ready").unwrap(), (200, "ready\n".into()));
    let signalled = ex.signal(Signal::TERM);
    ex.wait_line("SIGTERM received: readiness now fails");
    // A proxy that has not seen the endpoint removal yet sends new connections: all served,
    // while readiness already answers 503.
    assert_eq!(get(ex.addr, "/ready").unwrap().0, 503);
    let mut last = Instant::now();
    while signalled.elapsed() < Duration::from_millis(1_500) {
        // The server counts a connection when its handshake completes, so the last one is
        // dated from before its connect, not from its response (slow under load).
        let connecting = Instant::now();
        assert_eq!(get(ex.addr, "/").unwrap(), (200, "hello\n".into()));
        last = connecting;
        std::thread::sleep(Duration::from_millis(100));
    }
    // Quiet for 1 s after the last one (sampled every 100 ms): the listener closes.
    let closed = ex.wait_line("closing the listener");
    let quiet = secs(closed - last);
    assert!(
        (1.0..=1.3).contains(&quiet),
        "listener closed {quiet:.3} s after the last new connection; {:#?}",
        ex.seen
    );
    let (code, exited) = ex.exit();
    assert_eq!(code, Some(0));
    assert!(secs(exited - closed) < 0.3, "{:#?}", ex.seen);
    assert!(get(ex.addr, "/").is_err(), "still accepting after exit");
}

#[test]
fn keep_alive_connections_get_connection_close_or_are_closed_when_idle() {
    let mut ex = Example::start("01_axum", &[], &[]);
    let mut busy = KeepAlive::open(ex.addr);
    let mut idle = KeepAlive::open(ex.addr);
    let (status, headers) = busy.get("/");
    assert_eq!(status, 200);
    assert!(
        !headers.iter().any(|h| h == "connection: close"),
        "{headers:?}"
    );
    assert_eq!(idle.get("/").0, 200);
    ex.signal(Signal::TERM);
    // Before the drain, the old connection is served as before (no close yet).
    let (_, headers) = busy.get("/");
    assert!(
        !headers.iter().any(|h| h == "connection: close"),
        "{headers:?}"
    );
    let draining = ex.wait_line("listener closed; draining");
    // Draining: the next response says Connection: close, then the server closes.
    let (status, headers) = busy.get("/");
    assert_eq!(status, 200);
    assert!(
        headers.iter().any(|h| h == "connection: close"),
        "{headers:?}"
    );
    let eof = busy.wait_closed();
    assert!(secs(eof - draining) < 0.5);
    // The idle connection is closed by the server after 1 s idle (IDLE_CLOSE).
    let idle_eof = idle.wait_closed();
    let after = secs(idle_eof - draining);
    assert!(
        (0.95..=1.3).contains(&after),
        "idle connection closed {after:.3} s into the drain"
    );
    assert_eq!(ex.exit().0, Some(0));
}

#[test]
fn an_http2_connection_gets_goaway_when_the_drain_begins() {
    let mut ex = Example::start("02_hyper", &[], &[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = ex.addr;
    let (mut sender, conn) = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .unwrap()
    });
    let conn = rt.spawn(conn);
    let req = || {
        hyper::Request::get(format!("http://{addr}/"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap()
    };
    let status = rt.block_on(async { sender.send_request(req()).await.unwrap().status() });
    assert_eq!(status, 200);
    ex.signal(Signal::TERM);
    let draining = ex.wait_line("listener closed; draining");
    // GOAWAY: the client connection ends cleanly, soon after the drain began.
    let ended = rt.block_on(async { tokio::time::timeout(Duration::from_secs(2), conn).await });
    let at = Instant::now();
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
    assert!(secs(at - draining) < 0.5);
    assert!(rt.block_on(sender.send_request(req())).is_err());
    assert_eq!(ex.exit().0, Some(0));
}

#[test]
fn a_request_in_flight_finishes_during_the_drain() {
    let mut ex = Example::start("01_axum", &[], &[]);
    let addr = ex.addr;
    let slow = std::thread::spawn(move || get(addr, "/slow?ms=2500"));
    std::thread::sleep(Duration::from_millis(200));
    let signalled = ex.signal(Signal::TERM);
    ex.wait_line("listener closed; draining 1 request in flight");
    assert_eq!(slow.join().unwrap().unwrap(), (200, "slow\n".into()));
    let (code, exited) = ex.exit();
    assert_eq!(code, Some(0));
    // It exits once the request is done (2.3 s after the signal), not at the deadline.
    let after = secs(exited - signalled);
    assert!(
        (2.2..=2.8).contains(&after),
        "exited {after:.3} s after SIGTERM"
    );
}

#[test]
fn the_drain_deadline_cuts_what_is_left_one_second_before_the_grace_period() {
    let mut ex = Example::start("04_grace", &["--grace", "3"], &[]);
    ex.wait_line("grace period 3.0 s: the drain ends 2.0 s after SIGTERM");
    let addr = ex.addr;
    let slow = std::thread::spawn(move || get(addr, "/slow?ms=20000"));
    std::thread::sleep(Duration::from_millis(200));
    let signalled = ex.signal(Signal::TERM);
    let (code, exited) = ex.exit();
    assert_eq!(code, Some(0));
    let after = secs(exited - signalled);
    assert!(
        (2.0..=2.3).contains(&after),
        "exited {after:.3} s after SIGTERM; {:#?}",
        ex.seen
    );
    assert!(
        slow.join().unwrap().is_err(),
        "the 20 s request should have been cut"
    );
    ex.wait_line("drain deadline (2.0 s after the signal) reached: cutting 1 request in flight");
    ex.wait_line("exiting: 1 cut");
}

#[test]
fn the_grace_period_comes_from_the_environment() {
    let mut ex = Example::start("04_grace", &[], &[("POD_TERMINATION_GRACE_PERIOD", "45")]);
    ex.wait_line("grace period 45.0 s: the drain ends 44.0 s after SIGTERM");
    // A bad value is an error before anything listens.
    let out = Command::new(example_path("04_grace"))
        .arg("127.0.0.1:0")
        .env("POD_TERMINATION_GRACE_PERIOD", "soon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with(
            "error: POD_TERMINATION_GRACE_PERIOD=\"soon\": \"soon\" is not a duration"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_second_signal_cuts_at_once() {
    let mut ex = Example::start("01_axum", &[], &[]);
    let addr = ex.addr;
    let slow = std::thread::spawn(move || get(addr, "/slow?ms=10000"));
    std::thread::sleep(Duration::from_millis(200));
    ex.signal(Signal::TERM);
    std::thread::sleep(Duration::from_millis(300));
    let second = ex.signal(Signal::INT);
    let (code, exited) = ex.exit();
    assert_eq!(code, Some(0));
    assert!(secs(exited - second) < 0.2, "{:#?}", ex.seen);
    ex.wait_line("second signal (SIGINT): cutting 1 request in flight now");
    assert!(slow.join().unwrap().is_err());
}

#[test]
fn sigint_alone_starts_the_shutdown_too() {
    // An app that handles only Ctrl-C hangs as PID 1 until SIGKILL; this one handles both.
    let mut ex = Example::start("02_hyper", &[], &[]);
    ex.signal(Signal::INT);
    ex.wait_line("SIGINT received: readiness now fails");
    assert_eq!(get(ex.addr, "/ready").unwrap(), (503, "not ready\n".into()));
    assert_eq!(ex.exit().0, Some(0));
}

#[test]
fn a_fixed_delay_keeps_accepting_for_exactly_that_long() {
    let mut ex = Example::start("03_fixed_delay", &["1.5"], &[]);
    let signalled = ex.signal(Signal::TERM);
    ex.wait_line("accepting for 1.5 s");
    // No traffic at all: the delay still holds the listener open.
    let closed = ex.wait_line("listener closed; draining");
    let after = secs(closed - signalled);
    assert!(
        (1.5..=1.7).contains(&after),
        "listener closed {after:.3} s after SIGTERM"
    );
    assert_eq!(ex.exit().0, Some(0));
}

#[test]
fn phases_drive_work_that_is_not_a_server() {
    let mut child = Command::new(example_path("05_phases"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
    assert_eq!(lines.next().as_deref(), Some("running; ready: true"));
    std::thread::sleep(Duration::from_millis(700));
    rustix::process::kill_process(rustix::process::Pid::from_child(&child), Signal::TERM).unwrap();
    let rest: Vec<String> = lines.filter(|l| !l.contains("INFO")).collect();
    assert_eq!(rest[0], "signal: ready: false");
    let jobs: u64 = rest[1]
        .strip_prefix("worker: draining after ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{rest:?}"));
    // 200 ms per job, for 0.7 s before the signal and the 1 s delay after it.
    assert!((7..=9).contains(&jobs), "{rest:?}");
    assert_eq!(rest[2], "worker: done");
    assert!(child.wait().unwrap().success());
}
