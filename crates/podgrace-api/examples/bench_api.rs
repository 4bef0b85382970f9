//! Benchmark of `serve`'s API (issue 12's performance targets): at 1,000 pods, the latency of
//! create, get, list and delete over one keep-alive HTTPS/1.1 connection with the bearer
//! token (as the field record's latency anchor measured kube-apiserver, case h), the delay
//! from a write to its watch event on a second connection, and the server's resident memory
//! per 1,000 pod objects.
//!
//! `cargo run --release -p podgrace-api --example bench_api -- [--pods N]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use podgrace_api::{http::authenticated_router, listener, tls, Api, ApiConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

type Sender = http1::SendRequest<Full<Bytes>>;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn connect(addr: std::net::SocketAddr, ca: &str) -> (Sender, tokio::task::JoinHandle<()>) {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    let (send, conn) = http1::handshake(TokioIo::new(tls)).await.unwrap();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, task)
}

async fn call(
    s: &mut Sender,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Bytes) {
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))
        .unwrap();
    s.ready().await.unwrap();
    let resp = s.send_request(req).await.unwrap();
    let code = resp.status().as_u16();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (code, b)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn report(name: &str, v: &mut [f64]) {
    println!(
        "{name:<34} n={:<5} p50 {:>7.3} ms  p99 {:>7.3} ms  max {:>7.3} ms",
        v.len(),
        pct(v, 0.5),
        pct(v, 0.99),
        pct(v, 1.0)
    );
}

fn pod(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("bench-{i:04}"), "labels": {"app": "bench", "n": i.to_string()}},
        "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "app", "image": "nginx:1.27", "command": ["sleep", "100000"],
            "ports": [{"containerPort": 80}], "readinessProbe": {"httpGet": {"path": "/ready", "port": 80}},
            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}]}})
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .iter()
        .position(|a| a == "--pods")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let api = Api::new(ApiConfig::default());
    let creds = tls::generate(&[]).unwrap();
    let cfg = tls::server_config(&creds).unwrap();
    let listener_sock = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener_sock.local_addr().unwrap();
    tokio::spawn(listener::serve(
        listener_sock,
        cfg,
        authenticated_router(api.clone(), creds.token.clone()),
        std::future::pending(),
    ));
    let token = creds.token.clone();
    let (mut c, _t) = connect(addr, &creds.ca_pem).await;
    // Warm up TLS, the OpenAPI-free paths and the allocator.
    for _ in 0..50 {
        call(&mut c, &token, "GET", "/api/v1/namespaces/default", None).await;
    }
    let rss0 = rss_kib();
    let mut create = Vec::with_capacity(n);
    for i in 0..n {
        let body = pod(i);
        let t = Instant::now();
        let (code, _) = call(
            &mut c,
            &token,
            "POST",
            "/api/v1/namespaces/default/pods",
            Some(&body),
        )
        .await;
        create.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(code, 201);
    }
    let rss1 = rss_kib();
    let mut get = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let (code, _) = call(
            &mut c,
            &token,
            "GET",
            &format!("/api/v1/namespaces/default/pods/bench-{i:04}"),
            None,
        )
        .await;
        get.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(code, 200);
    }
    let mut list500 = Vec::new();
    let mut list_all = Vec::new();
    let mut list_sel = Vec::new();
    for _ in 0..100 {
        let t = Instant::now();
        let (code, _) = call(
            &mut c,
            &token,
            "GET",
            "/api/v1/namespaces/default/pods?limit=500",
            None,
        )
        .await;
        list500.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(code, 200);
        let t = Instant::now();
        let (_, b) = call(
            &mut c,
            &token,
            "GET",
            "/api/v1/namespaces/default/pods",
            None,
        )
        .await;
        list_all.push(t.elapsed().as_secs_f64() * 1e3);
        if list_all.len() == 1 {
            println!(
                "a full list of {n} pods is {:.1} MB of JSON",
                b.len() as f64 / 1e6
            );
        }
        let t = Instant::now();
        call(
            &mut c,
            &token,
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=n%3D7",
            None,
        )
        .await;
        list_sel.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // Write -> watch event, on a second connection.
    let (mut w, _wt) = connect(addr, &creds.ca_pem).await;
    let req = hyper::Request::builder()
        .uri("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0")
        .header("host", "127.0.0.1")
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = w.send_request(req).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    tokio::spawn(async move {
        let mut body = resp.into_body();
        let mut buf = String::new();
        while let Some(Ok(f)) = body.frame().await {
            let now = Instant::now();
            if let Ok(d) = f.into_data() {
                buf.push_str(std::str::from_utf8(&d).unwrap());
                while let Some(i) = buf.find('\n') {
                    let line: String = buf.drain(..=i).collect();
                    let v: Value = serde_json::from_str(&line).unwrap();
                    let name = v["object"]["metadata"]["name"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    let _ = tx.send((name, now));
                }
            }
        }
    });
    let mut after_response = Vec::new();
    let mut after_request = Vec::new();
    for i in 0..n {
        let name = format!("w-{i}");
        let body = json!({"metadata": {"name": name}, "data": {"k": "v"}});
        let sent = Instant::now();
        let (code, _) = call(
            &mut c,
            &token,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(&body),
        )
        .await;
        let answered = Instant::now();
        assert_eq!(code, 201);
        let (got, at) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, name);
        // Negative: the event arrived before the response (kube-apiserver shows both, case h).
        let signed = if at >= answered {
            (at - answered).as_secs_f64()
        } else {
            -(answered - at).as_secs_f64()
        };
        after_response.push(signed * 1e3);
        after_request.push((at - sent).as_secs_f64() * 1e3);
    }
    let mut delete = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let (code, _) = call(
            &mut c,
            &token,
            "DELETE",
            &format!("/api/v1/namespaces/default/pods/bench-{i:04}"),
            Some(&json!({"gracePeriodSeconds": 0})),
        )
        .await;
        delete.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(code, 200);
    }
    println!("{n} pods, one keep-alive HTTPS/1.1 connection with a bearer token:");
    report("create pod", &mut create);
    report("get pod", &mut get);
    report("list pods (limit=500)", &mut list500);
    report(&format!("list pods (all {n})"), &mut list_all);
    report("list pods (labelSelector, 1 hit)", &mut list_sel);
    report("delete pod (grace 0)", &mut delete);
    report("watch event - write sent", &mut after_request);
    report("watch event - write answered", &mut after_response);
    println!(
        "resident memory: {:.1} MB before, {:.1} MB with {n} pods: {:.1} MB per 1,000 pod objects (with their watch history)",
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        (rss1.saturating_sub(rss0)) as f64 / 1024.0 * 1000.0 / n as f64
    );
}
