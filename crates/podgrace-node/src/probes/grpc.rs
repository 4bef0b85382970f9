//! The gRPC probe: one unary `grpc.health.v1.Health/Check` call, as `pkg/probe/grpc/grpc.go`
//! `grpcProber.Probe` makes it (Kubernetes 1.24 to 1.37).
//!
//! hyper carries the HTTP/2; the two one-field protobuf messages and the 5-byte gRPC framing
//! are encoded here (a few lines, instead of compiling tonic and prost into podgrace). The
//! tests check it against a real `tonic-health` server.
//!
//! Upstream semantics kept: the dial blocks (`grpc.WithBlock`), so a refused connection is
//! retried until `timeoutSeconds` passes and then reported as a timeout; any failure is a
//! probe failure, never an error; `SERVING` is success, any other status a failure.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::time::Instant;

use super::ProbeResult;
use crate::httpget::{dial, join_host_port};

/// Go's `time.Duration` `String()` for whole seconds: `1s`, `1m30s`, `1h0m0s`.
pub(crate) fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}h{m}m{sec}s")
    } else if m > 0 {
        format!("{m}m{sec}s")
    } else if d.subsec_millis() > 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{sec}s")
    }
}

/// Runs one health check of `service` ("" = the whole server) at `host:port`, everything
/// bounded by `timeout`. `user_agent` is `kube-probe/<major.minor>`.
pub(crate) async fn check(
    host: &str,
    port: u16,
    service: &str,
    timeout: Duration,
    user_agent: &str,
) -> ProbeResult {
    let addr = join_host_port(host, port);
    let deadline = Instant::now() + timeout;
    let connect_timeout = || {
        ProbeResult::Failure(format!(
            "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
            go_duration(timeout)
        ))
    };
    // grpc.WithBlock: keep dialling (grpc-go's first backoff is 1 s) until the deadline.
    let mut backoff = Duration::from_secs(1);
    let stream = loop {
        match tokio::time::timeout_at(deadline, dial(host, port)).await {
            Ok(Ok(s)) => break s,
            Ok(Err(_)) => {
                if tokio::time::timeout_at(deadline, tokio::time::sleep(backoff))
                    .await
                    .is_err()
                {
                    return connect_timeout();
                }
                backoff = (backoff * 8 / 5).min(Duration::from_secs(120));
            }
            Err(_) => return connect_timeout(),
        }
    };
    let rpc = call(stream, &addr, service, deadline, timeout, user_agent);
    match tokio::time::timeout_at(deadline, rpc).await {
        Ok(r) => r,
        Err(_) => ProbeResult::Failure(format!(
            "timeout: health rpc did not complete within {}",
            go_duration(timeout)
        )),
    }
}

async fn call(
    stream: tokio::net::TcpStream,
    addr: &str,
    service: &str,
    deadline: Instant,
    timeout: Duration,
    user_agent: &str,
) -> ProbeResult {
    let failed = |desc: String| {
        ProbeResult::Failure(format!("error: health rpc probe failed: rpc error: {desc}"))
    };
    let (mut sender, conn) =
        match hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
        {
            Ok(v) => v,
            Err(e) => {
                return ProbeResult::Failure(format!(
                    "error: failed to connect service at {addr:?}: {e}"
                ))
            }
        };
    let request = hyper::Request::post(format!("http://{addr}/grpc.health.v1.Health/Check"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("user-agent", user_agent)
        .header(
            "grpc-timeout",
            format!(
                "{}m",
                deadline
                    .saturating_duration_since(Instant::now())
                    .as_millis()
                    .max(1)
            ),
        )
        .body(Full::new(encode_request(service)));
    let request = match request {
        Ok(r) => r,
        Err(e) => return failed(format!("code = Internal desc = {e}")),
    };
    let work = async {
        let resp = sender
            .send_request(request)
            .await
            .map_err(|e| format!("code = Unavailable desc = {e}"))?;
        let http_status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let collected = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("code = Unavailable desc = {e}"))?;
        let trailers = collected.trailers().cloned();
        Ok::<_, String>((http_status, headers, trailers, collected.to_bytes()))
    };
    let mut work = std::pin::pin!(work);
    let mut conn = std::pin::pin!(conn);
    let outcome = tokio::select! {
        r = &mut work => r,
        c = &mut conn => match c {
            Err(e) => Err(format!("code = Unavailable desc = {e}")),
            Ok(()) => work.await,
        },
    };
    let (http_status, headers, trailers, body) = match outcome {
        Ok(v) => v,
        Err(desc) => return failed(desc),
    };
    if http_status != 200 {
        return failed(format!(
            "code = Unknown desc = unexpected HTTP status code received from server: {http_status}"
        ));
    }
    // grpc-status is in the trailers, or in the headers of a trailers-only response.
    let field = |name: &str| {
        trailers
            .as_ref()
            .and_then(|t| t.get(name))
            .or_else(|| headers.get(name))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let code: u32 = field("grpc-status")
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let message = percent_decode(&field("grpc-message").unwrap_or_default());
    match code {
        0 => {}
        12 => {
            return ProbeResult::Failure(format!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {message}"
            ))
        }
        4 => {
            return ProbeResult::Failure(format!(
                "timeout: health rpc did not complete within {}",
                go_duration(timeout)
            ))
        }
        c => return failed(format!("code = {} desc = {message}", code_name(c))),
    }
    match decode_response(body) {
        Some(1) => ProbeResult::Success,
        Some(status) => ProbeResult::Failure(format!(
            "service unhealthy (responded with {:?})",
            status_name(status)
        )),
        None => {
            failed("code = Internal desc = grpc: failed to unmarshal the received message".into())
        }
    }
}

/// `HealthCheckRequest { string service = 1; }` in a gRPC frame.
fn encode_request(service: &str) -> Bytes {
    let mut msg = BytesMut::new();
    if !service.is_empty() {
        msg.put_u8(0x0a);
        put_varint(&mut msg, service.len() as u64);
        msg.put_slice(service.as_bytes());
    }
    let mut frame = BytesMut::with_capacity(msg.len() + 5);
    frame.put_u8(0);
    frame.put_u32(msg.len() as u32);
    frame.put_slice(&msg);
    frame.freeze()
}

fn put_varint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn get_varint(buf: &mut Bytes) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        if !buf.has_remaining() {
            return None;
        }
        let b = buf.get_u8();
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The `status` of a framed `HealthCheckResponse` (0 = UNKNOWN when absent); `None` if the
/// frame or message is malformed or compressed.
fn decode_response(mut body: Bytes) -> Option<u64> {
    if body.remaining() < 5 {
        return None;
    }
    let compressed = body.get_u8();
    let len = body.get_u32() as usize;
    if compressed != 0 || body.remaining() < len {
        return None;
    }
    let mut msg = body.split_to(len);
    let mut status = 0;
    while msg.has_remaining() {
        let tag = get_varint(&mut msg)?;
        match (tag >> 3, tag & 7) {
            (1, 0) => status = get_varint(&mut msg)?,
            (_, 0) => {
                get_varint(&mut msg)?;
            }
            (_, 1) if msg.remaining() >= 8 => msg.advance(8),
            (_, 5) if msg.remaining() >= 4 => msg.advance(4),
            (_, 2) => {
                let n = usize::try_from(get_varint(&mut msg)?).ok()?;
                if msg.remaining() < n {
                    return None;
                }
                msg.advance(n);
            }
            _ => return None,
        }
    }
    Some(status)
}

/// `HealthCheckResponse_ServingStatus.String()`.
fn status_name(status: u64) -> String {
    match status {
        0 => "UNKNOWN".into(),
        1 => "SERVING".into(),
        2 => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        n => n.to_string(),
    }
}

/// grpc-go's `codes.Code.String()`.
fn code_name(code: u32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    NAMES
        .get(code as usize)
        .map_or_else(|| format!("Code({code})"), |s| s.to_string())
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_encoding() {
        assert_eq!(&encode_request("")[..], &[0, 0, 0, 0, 0]);
        assert_eq!(
            &encode_request("ab")[..],
            &[0, 0, 0, 0, 4, 0x0a, 2, b'a', b'b']
        );
    }

    #[test]
    fn response_decoding_never_panics() {
        assert_eq!(
            decode_response(Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1])),
            Some(1)
        );
        assert_eq!(
            decode_response(Bytes::from_static(&[0, 0, 0, 0, 0])),
            Some(0)
        );
        for bad in [
            &[][..],
            &[0, 0, 0, 0, 9, 8],
            &[1, 0, 0, 0, 0],
            &[0, 0, 0, 0, 1, 0xff],
        ] {
            assert_eq!(decode_response(Bytes::copy_from_slice(bad)), None);
        }
    }

    #[test]
    fn go_wordings() {
        assert_eq!(go_duration(Duration::from_secs(1)), "1s");
        assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(code_name(5), "NotFound");
        assert_eq!(code_name(99), "Code(99)");
        assert_eq!(percent_decode("a%20b%"), "a b%");
        assert_eq!(percent_decode("é%é%4"), "é%é%4");
    }
}
