//! Real sockets for the hook and probe tests: a tiny HTTP/1.x server that records what it was
//! sent, and listeners bound inside a container's network namespace.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the server answers: status line + headers + body, given the request head.
pub type Responder = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// `HTTP/1.1 {status}` with `body`.
pub fn response(status: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\n{extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Serves `listener` forever (until the test ends): each connection's request head is recorded
/// and answered by `respond`. Anything that is not an HTTP request (a TLS ClientHello) gets a
/// plain `400 Bad Request`, as Go and most servers do.
pub fn serve(listener: TcpListener, respond: Responder) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let log = Arc::clone(&log);
            let respond = Arc::clone(&respond);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if !buf.starts_with(b"GET ") || buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let answer = if head.starts_with("GET ") {
                    log.lock().unwrap().push(head.clone());
                    respond(&head)
                } else {
                    response("400 Bad Request", "", "")
                };
                let _ = sock.write_all(answer.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    seen
}

/// A listener on 127.0.0.1 with a free port, and that port.
pub async fn local_listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

/// A port nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Binds `addr` inside the network namespace of host pid `pid` (a container's PID 1): a
/// thread joins the namespace, binds, and hands the socket back (a socket stays in the
/// namespace it was made in).
pub fn listener_in_netns(pid: i32, addr: &str) -> TcpListener {
    let addr = addr.to_string();
    let std_listener = std::thread::spawn(move || {
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).expect("open netns");
        rustix::thread::move_into_link_name_space(
            rustix::fd::AsFd::as_fd(&ns),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .expect("setns");
        let l = std::net::TcpListener::bind(&addr).expect("bind in netns");
        l.set_nonblocking(true).expect("nonblocking");
        l
    })
    .join()
    .expect("netns thread");
    TcpListener::from_std(std_listener).expect("tokio listener")
}

/// The value of header `name` in a recorded request head.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}
