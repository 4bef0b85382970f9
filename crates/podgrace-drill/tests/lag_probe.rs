//! `podgrace lag`'s prober against real servers: plain HTTP to the demo app (each answer names
//! its pod), and HTTPS verified with the server's CA; a server its roots do not vouch for is no
//! answer at all.

use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderName;
use podgrace_drill::demoapp::{self, DemoConfig, POD_NAME_HEADER};
use podgrace_drill::lag::probe::{tls_config, ProbeConfig, Prober};

fn probe_config(url: &str, tls: Option<Arc<rustls::ClientConfig>>) -> ProbeConfig {
    ProbeConfig {
        target: url.parse().expect("URL"),
        rps: 50.0,
        timeout: Duration::from_secs(1),
        pod_header: HeaderName::from_static(POD_NAME_HEADER),
        tls,
    }
}

/// Waits (up to 10 s) until the prober has `n` records; returns them.
async fn records(p: &Prober, n: usize) -> Vec<podgrace_drill::lag::probe::Probe> {
    for _ in 0..200 {
        let r = p.records();
        if r.len() >= n {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {n} probes in 10 s: {:?}", p.records());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_answers_name_their_pod() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_term, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = tokio::spawn(demoapp::serve(
        listener,
        DemoConfig {
            pod_name: Some("web-1".parse().unwrap()),
            ..DemoConfig::default()
        },
        rx,
    ));
    let p = Prober::start(probe_config(&format!("http://{addr}/"), None))
        .await
        .unwrap();
    let r = records(&p, 5).await;
    assert!(
        r.iter()
            .all(|x| x.status == Some(200) && x.pod.as_deref() == Some("web-1")),
        "{r:?}"
    );
    // Open loop: 50 a second, each on its own connection, from its start.
    let first = r.iter().map(|x| x.sent).min().unwrap();
    assert!(first < Duration::from_millis(100), "{first:?}");
    p.stop();
    app.abort();
}

/// An HTTPS server (podgrace serve's own CA and certificate for 127.0.0.1) whose every answer
/// names pod `tls-pod`.
async fn tls_server() -> (std::net::SocketAddr, String) {
    let creds = podgrace_api::tls::generate(&["127.0.0.1".parse().unwrap()]).unwrap();
    let acceptor =
        tokio_rustls::TlsAcceptor::from(podgrace_api::tls::server_config(&creds).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(|_req| async {
                    hyper::Response::builder()
                        .header(POD_NAME_HEADER, "tls-pod")
                        .body(http_body_util::Full::new(bytes::Bytes::from_static(
                            b"ok\n",
                        )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (addr, creds.ca_pem)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_is_verified_with_the_ca_given() {
    let (addr, ca) = tls_server().await;
    let dir = std::env::temp_dir().join(format!("podgrace-lag-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, ca).unwrap();
    let url = format!("https://{addr}/");
    let p = Prober::start(probe_config(
        &url,
        Some(tls_config(Some(&ca_file), false).unwrap()),
    ))
    .await
    .unwrap();
    let r = records(&p, 5).await;
    assert!(
        r.iter()
            .all(|x| x.status == Some(200) && x.pod.as_deref() == Some("tls-pod")),
        "{r:?}"
    );
    p.stop();
    // Another CA does not vouch for it: no answer is taken.
    let (_, other_ca) = tls_server().await;
    std::fs::write(&ca_file, other_ca).unwrap();
    let p = Prober::start(probe_config(
        &url,
        Some(tls_config(Some(&ca_file), false).unwrap()),
    ))
    .await
    .unwrap();
    let r = records(&p, 5).await;
    assert!(
        r.iter().all(|x| x.status.is_none() && x.pod.is_none()),
        "{r:?}"
    );
    p.stop();
    // Without verification (curl -k) it answers again.
    let p = Prober::start(probe_config(&url, Some(tls_config(None, true).unwrap())))
        .await
        .unwrap();
    let r = records(&p, 5).await;
    assert!(
        r.iter().all(|x| x.pod.as_deref() == Some("tls-pod")),
        "{r:?}"
    );
    p.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
