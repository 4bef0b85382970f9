//! `podgrace demo-app` as a real process: flags, lifecycle log lines, SIGTERM handling.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn demo_app(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_podgrace"));
    c.arg("demo-app").args(args);
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
            .any(|l| l == "demo-app: received SIGTERM, draining 1 in-flight requests"),
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
