//! Idle watches against a running `podgrace serve` (issue 18 item 5): opens N watches of
//! ConfigMaps (HTTP/2, as kubectl and client-go open them, 250 streams per connection, so N/250
//! connections), holds them, and reports serve's resident memory before and with them, the
//! latency of gets on another connection meanwhile, how long one write takes to reach every
//! watch, and the memory once they are closed.
//!
//! `cargo run --release -p podgrace-api --example idle_watches -- --kubeconfig PATH --pid PID [--watches 10000]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

type Sender = http2::SendRequest<Full<Bytes>>;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

fn field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in the kubeconfig"))
        .trim()
        .to_string()
}

struct Target {
    addr: String,
    tls: Arc<rustls::ClientConfig>,
    token: String,
}

impl Target {
    async fn connect(&self) -> Sender {
        let tcp = TcpStream::connect(&self.addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let tls = TlsConnector::from(self.tls.clone())
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .unwrap();
        let (send, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        send
    }

    fn request(&self, method: &str, path: &str, body: &str) -> hyper::Request<Full<Bytes>> {
        hyper::Request::builder()
            .method(method)
            .uri(format!("https://{}{path}", self.addr))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap()
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let kubeconfig = arg("--kubeconfig").expect("--kubeconfig PATH");
    let pid = arg("--pid").expect("--pid PID of serve");
    let n: usize = arg("--watches")
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let server = field(&text, "server:");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(field(&text, "certificate-authority-data:"))
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(&ca).unwrap())
        .unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let t = Arc::new(Target {
        addr: server.trim_start_matches("https://").to_string(),
        tls: Arc::new(cfg),
        token: field(&text, "token:"),
    });
    let mut probe = t.connect().await;
    let get = |s: &mut Sender, path: &str| {
        let req = t.request("GET", path, "");
        let fut = s.send_request(req);
        async move {
            let r = fut.await.unwrap();
            let code = r.status().as_u16();
            let b = r.into_body().collect().await.unwrap().to_bytes();
            (code, b)
        }
    };
    let (_, list) = get(&mut probe, "/api/v1/namespaces/default/configmaps").await;
    let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let rss0 = rss_kib(&pid);
    let t0 = Instant::now();
    let mut bodies = Vec::with_capacity(n);
    let per_conn = 250;
    for chunk in 0..n.div_ceil(per_conn) {
        let mut s = t.connect().await;
        for _ in 0..per_conn.min(n - chunk * per_conn) {
            let req = t.request(
                "GET",
                &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"),
                "",
            );
            s.ready().await.unwrap();
            let resp = s.send_request(req).await.unwrap();
            assert_eq!(resp.status(), 200);
            bodies.push(resp.into_body());
        }
    }
    let opened = t0.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss1 = rss_kib(&pid);
    let mut lat = Vec::new();
    for _ in 0..200 {
        let t1 = Instant::now();
        let (code, _) = get(&mut probe, "/api/v1/namespaces/default/configmaps?limit=1").await;
        assert_eq!(code, 200);
        lat.push(t1.elapsed().as_secs_f64() * 1e3);
    }
    // One write, every watch gets it.
    let name = format!("idle-{}", std::process::id());
    let t2 = Instant::now();
    let req = t.request(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &format!(r#"{{"metadata":{{"name":"{name}"}}}}"#),
    );
    let r = probe.send_request(req).await.unwrap();
    assert_eq!(r.status(), 201);
    let mut tasks = tokio::task::JoinSet::new();
    for mut b in bodies {
        tasks.spawn(async move {
            let f = tokio::time::timeout(Duration::from_secs(60), b.frame()).await;
            (f.is_ok_and(|f| f.is_some_and(|f| f.is_ok())), b)
        });
    }
    let mut got = 0;
    let mut kept = Vec::new();
    while let Some(r) = tasks.join_next().await {
        let (ok, b) = r.unwrap();
        got += usize::from(ok);
        kept.push(b);
    }
    let fanout = t2.elapsed();
    drop(kept);
    let _ = probe
        .send_request(t.request(
            "DELETE",
            &format!("/api/v1/namespaces/default/configmaps/{name}"),
            "",
        ))
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss2 = rss_kib(&pid);
    println!(
        "{n} idle watches opened in {:.1} s over {} HTTP/2 connections",
        opened.as_secs_f64(),
        n.div_ceil(per_conn)
    );
    println!(
        "serve's resident memory: {:.1} MB before, {:.1} MB with them ({:.1} KB per watch), {:.1} MB after they closed",
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        (rss1.saturating_sub(rss0)) as f64 / n as f64,
        rss2 as f64 / 1024.0
    );
    println!(
        "get on another connection meanwhile: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        pct(&mut lat, 1.0)
    );
    println!(
        "one write reached {got} of {n} watches in {:.2} s",
        fanout.as_secs_f64()
    );
}
