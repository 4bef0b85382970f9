//! Probe attempts and a probe worker against real containers, HTTP and gRPC servers.

mod common;
mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{argv, pod_with};
use podgrace_core::plan::{ContainerPort, HttpGet, PortRef, Probe, ProbeAction};
use podgrace_node::events::EventRecorder;
use podgrace_node::probes::{
    probe_once, spawn_probe_worker, ContainerRun, ProbeKind, ProbeResult, ProbeTarget,
    RuntimeProber,
};
use podgrace_node::runtime::{CallContext, ProcessRuntime, RuntimeService};
use podgrace_node::sandbox::NetworkConfig;
use support::{closed_port, header, local_listener, response, serve};

const LOCAL: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));

fn probe(action: ProbeAction, timeout_seconds: i64) -> Probe {
    Probe {
        action,
        initial_delay_seconds: 0,
        period_seconds: 1,
        timeout_seconds,
        success_threshold: 1,
        failure_threshold: 1,
        termination_grace_period_seconds: None,
    }
}

fn http(port: u16, path: &str, scheme: &str) -> ProbeAction {
    ProbeAction::HttpGet(HttpGet {
        host: None,
        port: PortRef::Number(i32::from(port)),
        path: path.into(),
        scheme: scheme.into(),
        headers: vec![],
    })
}

fn target(ports: &[ContainerPort]) -> ProbeTarget<'_> {
    ProbeTarget {
        container_id: "none",
        pod_ip: LOCAL,
        ports,
        env: &[],
    }
}

async fn once(action: ProbeAction, timeout: i64) -> ProbeResult {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    probe_once(
        &rt,
        &CallContext::background(),
        &target(&[]),
        &probe(action, timeout),
    )
    .await
}

#[tokio::test]
async fn http_probe_status_codes_redirects_and_headers() {
    let (listener, port) = local_listener().await;
    let seen = serve(
        listener,
        Arc::new(|head: &str| {
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            match path {
                "/ok" => response("200 OK", "", "fine"),
                "/down" => response("503 Service Unavailable", "", "busy"),
                "/same" => response("302 Found", "Location: /ok\r\n", ""),
                "/away" => response("302 Found", "Location: http://127.0.0.2:1/x\r\n", "moved"),
                _ => response("404 Not Found", "", ""),
            }
        }),
    );
    assert_eq!(
        once(http(port, "/ok", "HTTP"), 1).await,
        ProbeResult::Success
    );
    assert_eq!(
        once(http(port, "/down", "HTTP"), 1).await,
        ProbeResult::Failure("HTTP probe failed with statuscode: 503".into())
    );
    assert_eq!(
        once(http(port, "/same", "HTTP"), 1).await,
        ProbeResult::Success,
        "a same-host redirect is followed"
    );
    assert_eq!(
        once(http(port, "/away", "HTTP"), 1).await,
        ProbeResult::Warning("Probe terminated redirects, Response body: moved".into()),
        "a redirect to another host is not followed"
    );
    let seen = seen.lock().unwrap().clone();
    let paths: Vec<_> = seen
        .iter()
        .map(|h| h.split_whitespace().nth(1).unwrap_or("").to_string())
        .collect();
    assert_eq!(paths, vec!["/ok", "/down", "/same", "/ok", "/away"]);
    assert_eq!(header(&seen[0], "user-agent"), Some("kube-probe/1.37"));
    assert_eq!(header(&seen[0], "accept"), Some("*/*"));
    assert_eq!(header(&seen[0], "connection"), Some("close"));
}

#[tokio::test]
async fn http_probe_transport_failures_read_like_go() {
    let port = closed_port();
    assert_eq!(
        once(http(port, "/healthz", "HTTP"), 1).await,
        ProbeResult::Failure(format!(
            "Get \"http://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        ))
    );
    // A server that accepts and never answers: the probe's timeoutSeconds ends it.
    let (silent, sport) = local_listener().await;
    let hold = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            conns.push(s);
        }
    });
    let start = Instant::now();
    let r = once(http(sport, "/", "HTTP"), 1).await;
    let took = start.elapsed();
    assert!(
        matches!(&r, ProbeResult::Failure(m) if m.contains("Client.Timeout exceeded")),
        "{r:?}"
    );
    assert!(
        took >= Duration::from_millis(990) && took < Duration::from_millis(2500),
        "{took:?}"
    );
    hold.abort();
    // HTTPS against a plain HTTP server: no fallback for probes.
    let (listener, hport) = local_listener().await;
    let _seen = serve(listener, Arc::new(|_| response("200 OK", "", "")));
    assert_eq!(
        once(http(hport, "/", "HTTPS"), 1).await,
        ProbeResult::Failure(format!(
            "Get \"https://127.0.0.1:{hport}/\": http: server gave HTTP response to HTTPS client"
        ))
    );
}

#[tokio::test]
async fn tcp_probe_connects_by_number_or_port_name() {
    let (listener, port) = local_listener().await;
    let _keep = listener;
    let ports = [ContainerPort {
        name: Some("db".into()),
        container_port: i32::from(port),
        protocol: "TCP".into(),
        host_port: 0,
        host_ip: String::new(),
    }];
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let ctx = CallContext::background();
    let by_name = ProbeAction::TcpSocket {
        host: None,
        port: PortRef::Name("db".into()),
    };
    assert_eq!(
        probe_once(&rt, &ctx, &target(&ports), &probe(by_name, 1)).await,
        ProbeResult::Success
    );
    let closed = closed_port();
    let refused = ProbeAction::TcpSocket {
        host: Some("127.0.0.1".into()),
        port: PortRef::Number(i32::from(closed)),
    };
    assert_eq!(
        probe_once(&rt, &ctx, &target(&[]), &probe(refused, 1)).await,
        ProbeResult::Failure(format!(
            "dial tcp 127.0.0.1:{closed}: connect: connection refused"
        ))
    );
    let unknown = ProbeAction::TcpSocket {
        host: None,
        port: PortRef::Name("nope".into()),
    };
    assert!(matches!(
        probe_once(&rt, &ctx, &target(&[]), &probe(unknown, 1)).await,
        ProbeResult::Unknown(_)
    ));
}

#[tokio::test]
async fn grpc_probe_against_a_real_health_server() {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("payments", tonic_health::ServingStatus::NotServing)
        .await;
    let (listener, port) = local_listener().await;
    let server = tokio::spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let _ = tonic::transport::Server::builder()
            .serve_with_incoming(service, incoming)
            .await;
    });
    let grpc = |service: Option<&str>| ProbeAction::Grpc {
        port: i32::from(port),
        service: service.map(str::to_owned),
    };
    assert_eq!(once(grpc(None), 2).await, ProbeResult::Success);
    assert_eq!(
        once(grpc(Some("payments")), 2).await,
        ProbeResult::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
    );
    let unknown = once(grpc(Some("nope")), 2).await;
    assert!(
        matches!(&unknown, ProbeResult::Failure(m) if m.starts_with("error: health rpc probe failed: rpc error: code = NotFound")),
        "{unknown:?}"
    );
    server.abort();
    // Nothing listening: the blocking dial retries until the timeout, then reports it.
    let closed = closed_port();
    let start = Instant::now();
    let r = once(
        ProbeAction::Grpc {
            port: i32::from(closed),
            service: None,
        },
        1,
    )
    .await;
    let took = start.elapsed();
    assert_eq!(
        r,
        ProbeResult::Failure(format!(
            "timeout: failed to connect service \"127.0.0.1:{closed}\" within 1s: context deadline exceeded"
        ))
    );
    assert!(
        took >= Duration::from_millis(990) && took < Duration::from_millis(2500),
        "{took:?}"
    );
}

#[tokio::test]
async fn exec_probes_in_a_real_container() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let ctx = CallContext::background();
    let (sb, id) = pod_with(&rt, "probe-exec", argv(&["sleep", "30"]), Vec::new()).await;
    let env = [("MODE".to_string(), Some("ok".to_string()))];
    let t = ProbeTarget {
        container_id: &id,
        pod_ip: None,
        ports: &[],
        env: &env,
    };
    let exec = |a: &[&str]| ProbeAction::Exec { command: argv(a) };
    assert_eq!(
        probe_once(
            &rt,
            &ctx,
            &t,
            &probe(exec(&["sh", "-c", "test $(MODE) = ok"]), 1)
        )
        .await,
        ProbeResult::Success,
        "$(MODE) is expanded from the container env"
    );
    assert_eq!(
        probe_once(
            &rt,
            &ctx,
            &t,
            &probe(exec(&["sh", "-c", "echo not ready; exit 1"]), 1)
        )
        .await,
        ProbeResult::Failure("not ready\n".into())
    );
    let start = Instant::now();
    assert_eq!(
        probe_once(&rt, &ctx, &t, &probe(exec(&["sleep", "5"]), 1)).await,
        ProbeResult::Failure("command \"sleep 5\" timed out".into())
    );
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(990) && took < Duration::from_millis(2500),
        "{took:?}"
    );
    assert!(matches!(
        probe_once(&rt, &ctx, &t, &probe(exec(&["/nonexistent/check"]), 1)).await,
        ProbeResult::Unknown(_)
    ));
    let _ = rt.remove_pod_sandbox(&ctx, &sb).await;
}

/// A readiness worker with the real prober follows a server that turns unhealthy.
#[tokio::test]
async fn readiness_worker_follows_a_real_server() {
    let (listener, port) = local_listener().await;
    let status = Arc::new(AtomicU16::new(200));
    let s = Arc::clone(&status);
    let _seen = serve(
        listener,
        Arc::new(move |_| match s.load(Ordering::SeqCst) {
            200 => response("200 OK", "", ""),
            _ => response("503 Service Unavailable", "", ""),
        }),
    );
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let spec = probe(http(port, "/ready", "HTTP"), 1);
    let events = EventRecorder::new();
    let prober = RuntimeProber {
        runtime: Arc::new(rt),
        probe: spec.clone(),
        pod_ip: LOCAL,
        ports: vec![],
        env: vec![],
    };
    let h = spawn_probe_worker(
        ProbeKind::Readiness,
        &spec,
        "app",
        prober,
        events.clone(),
        None,
    );
    h.set_container(Some(ContainerRun {
        container_id: "c1".into(),
        started_at: tokio::time::Instant::now(),
        running: true,
    }));
    let mut rx = h.subscribe();
    tokio::time::timeout(Duration::from_secs(3), rx.wait_for(|s| s.is_ready()))
        .await
        .expect("ready within 3 s")
        .expect("worker alive");
    status.store(503, Ordering::SeqCst);
    let start = Instant::now();
    tokio::time::timeout(Duration::from_secs(3), rx.wait_for(|s| !s.is_ready()))
        .await
        .expect("not ready within a period or two")
        .expect("worker alive");
    assert!(start.elapsed() < Duration::from_millis(2200));
    assert!(events.events().iter().any(|e| e.reason == "Unhealthy"
        && e.message == "Readiness probe failed: HTTP probe failed with statuscode: 503"));
    h.stop();
}
