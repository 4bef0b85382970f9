//! `podgrace demo-app` as a real process: flags, lifecycle log lines, SIGTERM handling.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn demo_app(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_podgrace"));
    // The pod name comes from the flags a test gives, not from the environment it runs in.
    c.arg("demo-app").args(args).env_remove("POD_NAME");
    c
}

/// Starts the app on a free port; returns it, its address and a channel of its stderr lines.
fn start(args: &[&str]) -> (Child, SocketAddr, mpsc::Receiver<String>) {
    let mut child = demo_app(&[&["--listen", "127.0.0.1:0"], args].concat())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("first line");
    let addr = first
        .split_whitespace()
        .nth(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    (child, addr, rx)
}

fn sigterm(child: &Child) {
    rustix::process::kill_process(
        rustix::process::Pid::from_child(child),
        rustix::process::Signal::TERM,
    )
    .expect("kill -TERM");
}

#[test]
fn drain_logs_each_step_finishes_the_request_in_flight_and_exits_0() {
    let (mut child, addr, lines) = start(&["--on-sigterm", "drain", "--latency-ms", "500"]);
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .expect("write");
    std::thread::sleep(Duration::from_millis(150));
    sigterm(&child);
    let mut resp = String::new();
    s.read_to_string(&mut resp)
        .expect("read until the app closes");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("connection: close"), "{resp}");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    let log: Vec<String> = lines.iter().collect();
    assert!(
        log.iter()
            .any(|l| l == "demo-app: received SIGTERM, draining 1 in-flight request"),
        "{log:?}"
    );
    assert!(
        log.iter().any(|l| l == "demo-app: drained, exiting"),
        "{log:?}"
    );
}

#[test]
fn exit_cuts_the_request_in_flight() {
    let (mut child, addr, _lines) = start(&["--latency-ms", "2000"]);
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .expect("write");
    std::thread::sleep(Duration::from_millis(150));
    sigterm(&child);
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    assert!(resp.is_empty(), "no response: the app exited at once");
    assert!(child.wait().expect("wait").success());
}

#[test]
fn a_bad_flag_is_bad_usage() {
    let out = demo_app(&["--on-sigterm", "linger"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected exit, drain or ignore"), "{err}");
    let out = demo_app(&["--ready-path", "ready"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unlimited_drain_waits_for_an_idle_stream_until_the_client_goes_away() {
    let (mut child, addr, lines) =
        start(&["--on-sigterm", "drain", "--drain-seconds", "unlimited"]);
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        .expect("write");
    // The head comes at once, then nothing.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).expect("read the head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    sigterm(&child);
    let drain_line = lines
        .recv_timeout(Duration::from_secs(5))
        .expect("a line on SIGTERM");
    assert_eq!(
        drain_line,
        "demo-app: received SIGTERM, draining 1 in-flight request"
    );
    // No deadline: still running with the stream open (the kubelet would SIGKILL it).
    s.set_read_timeout(Some(Duration::from_millis(1500)))
        .expect("timeout");
    let mut buf = [0u8; 64];
    let err = s.read(&mut buf).expect_err("no data and no end");
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{err}"
    );
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    // The client goes away: the app has drained and exits 0.
    drop(s);
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "exits once drained");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let log: Vec<String> = lines.iter().collect();
    assert!(
        log.iter()
            .any(|l| l == "demo-app: listener closed with 1 in-flight request, no drain deadline"),
        "{log:?}"
    );
    assert!(
        log.iter().any(|l| l == "demo-app: drained, exiting"),
        "{log:?}"
    );
}

#[test]
fn bad_drain_seconds_and_upstream_are_bad_usage() {
    for (args, want) in [
        (
            &["--drain-seconds", "-1"][..],
            "expected a number of seconds at least 0 (such as 30 or 2.5) or unlimited, not \"-1\"",
        ),
        (
            &["--drain-seconds", "abc"][..],
            "expected a number of seconds at least 0 (such as 30 or 2.5) or unlimited, not \"abc\"",
        ),
        (
            &["--upstream", "notanaddr"][..],
            "expected IP:PORT (such as 127.0.0.1:8081), not \"notanaddr\"",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:18080",
                "--upstream",
                "127.0.0.1:18080",
            ][..],
            "it would forward to itself",
        ),
        (
            // The default --listen 0.0.0.0:8080 answers on loopback too.
            &["--upstream", "127.0.0.1:8080"][..],
            "--upstream 127.0.0.1:8080 is where the app itself listens (--listen 0.0.0.0:8080): it would forward to itself",
        ),
        (
            &["--upstream", "127.0.0.1:0"][..],
            "expected a reachable IP:PORT (not port 0, not 0.0.0.0)",
        ),
    ] {
        let out = demo_app(args).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn the_sidecar_forwards_to_the_app_and_says_so() {
    let (mut app, app_addr, _app_lines) = start(&[]);
    let upstream = app_addr.to_string();
    let mut child = demo_app(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &upstream,
        "--on-sigterm",
        "drain",
        "--drain-seconds",
        "2.5",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    stderr.read_line(&mut first).expect("first line");
    let want = format!(" (on SIGTERM: drain, forwarding to {upstream})\n");
    assert!(
        first.starts_with("demo-app (sidecar): listening on 127.0.0.1:"),
        "{first}"
    );
    assert!(first.ends_with(&want), "{first}");
    let addr: SocketAddr = first
        .trim_start_matches("demo-app (sidecar): listening on ")
        .trim_end_matches(&want)
        .parse()
        .expect("address");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(
        b"GET /stream?seconds=0.3&interval_ms=100 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .expect("write");
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("read");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    for n in 0..4 {
        assert!(resp.contains(&format!("tick {n}\n")), "{resp}");
    }
    assert!(resp.ends_with("0\r\n\r\n"), "ended cleanly: {resp}");
    sigterm(&child);
    assert!(child.wait().expect("wait").success());
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).expect("stderr");
    assert!(
        rest.contains("demo-app (sidecar): drained, exiting\n"),
        "{rest}"
    );
    sigterm(&app);
    assert!(app.wait().expect("wait").success());
}

/// One `GET PATH` on a new connection: the whole response as text.
fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .expect("write");
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("read");
    resp
}

/// Issue 14 item 6: the app says which pod answered, on every path, from `--pod-name` or from
/// `POD_NAME` (the downward API's `fieldRef: metadata.name`); without either, no such header.
#[test]
fn the_app_names_its_pod_in_a_header() {
    let (mut child, addr, _lines) = start(&["--pod-name", "web-7d4f-x2k"]);
    for path in ["/", "/ready", "/anything?x=1"] {
        let resp = get(addr, path);
        assert!(
            resp.contains("\r\nx-podgrace-pod: web-7d4f-x2k\r\n"),
            "{path}: {resp}"
        );
    }
    child.kill().expect("kill");
    let _ = child.wait();
    let mut c = demo_app(&["--listen", "127.0.0.1:0"]);
    c.env("POD_NAME", "web-from-env");
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut first = String::new();
    BufReader::new(child.stderr.take().expect("stderr"))
        .read_line(&mut first)
        .expect("first line");
    let addr: SocketAddr = first
        .split_whitespace()
        .nth(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    assert!(get(addr, "/").contains("\r\nx-podgrace-pod: web-from-env\r\n"));
    child.kill().expect("kill");
    let _ = child.wait();
    let (mut child, addr, _lines) = start(&[]);
    assert!(!get(addr, "/").contains("x-podgrace-pod"));
    child.kill().expect("kill");
    let _ = child.wait();
}
