//! The endpoint race with a real proxy, real load and real processes: two `podgrace demo-app`
//! backends (child processes of the built binary, so the SIGTERM, the process exit and the kernel
//! closing its sockets are the real thing), the drill's service proxy in front with an endpoint
//! lag L = 1 s, and open-loop load at 200 requests/s. The termination of one backend is done by
//! hand, as the drill will do it through the pod worker: at t its endpoint turns terminating
//! (the proxy sees it at t + L) and it gets SIGTERM at t (no preStop) or at t + L + 0.5 s (a
//! preStop sleep ≥ L).
//!
//! These tests live in the binary's crate because only here does Cargo provide
//! `CARGO_BIN_EXE_podgrace`. They run one at a time (a shared lock): their failure counts depend
//! on timing, and two of them at once on a 2-core machine would disturb each other.

use podgrace_drill::endpoints::{Endpoint, EndpointsHandle};
use podgrace_drill::load::{self, LoadConfig};
use podgrace_drill::proxy::{Balancing, Mode, Proxy, ProxyConfig};
use podgrace_drill::report::{attribute, FailuresByKind, PodTermination};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const RPS: f64 = 200.0;
const LAG: Duration = Duration::from_secs(1);
const CONNECTIONS: usize = 16;
/// When the termination of pod `a` starts (t), since the load's start.
const T: Duration = Duration::from_millis(1_500);
const LOAD_FOR: Duration = Duration::from_secs(4);

struct Pod {
    name: &'static str,
    child: Child,
    addr: SocketAddr,
}

impl Pod {
    /// Starts `podgrace demo-app --on-sigterm MODE` on a free loopback port.
    fn start(name: &'static str, on_sigterm: &str) -> Pod {
        let mut child = Command::new(env!("CARGO_BIN_EXE_podgrace"))
            .args([
                "demo-app",
                "--listen",
                "127.0.0.1:0",
                "--on-sigterm",
                on_sigterm,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn podgrace demo-app");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        // "demo-app: listening on 127.0.0.1:PORT (on SIGTERM: exit)"
        let first = lines.next().expect("a first line").expect("utf-8");
        let addr = first
            .split_whitespace()
            .nth(3)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {first:?}"));
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Pod { name, child, addr }
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::ready(self.name, self.addr)
    }

    fn sigterm(&self) {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::TERM,
        )
        .expect("kill -TERM");
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Outcome {
    failures: FailuresByKind,
    requests: usize,
    /// Failed requests the proxy sent to pod `a`.
    on_a: usize,
}

/// One drill by hand: `a` terminates at T; its SIGTERM comes `pre_stop` later.
async fn race(balancing: Balancing, on_sigterm: &str, pre_stop: Duration) -> Outcome {
    let a = Pod::start("a", on_sigterm);
    let b = Pod::start("b", on_sigterm);
    let endpoints = EndpointsHandle::new(LAG);
    endpoints.publish_now(vec![a.endpoint(), b.endpoint()]);
    let epoch = Instant::now();
    let mut pc = ProxyConfig::new(Mode::Http1);
    pc.balancing = balancing;
    pc.epoch = epoch;
    let proxy = Proxy::start("127.0.0.1:0".parse().expect("addr"), pc, endpoints.view())
        .await
        .expect("proxy");
    let mut lc = LoadConfig::new(proxy.local_addr(), LOAD_FOR);
    lc.rps = RPS;
    lc.connections = CONNECTIONS;
    lc.timeout = Duration::from_secs(2);
    lc.epoch = epoch;
    let load = tokio::spawn(load::run(lc));
    tokio::time::sleep_until(epoch + T).await;
    // t: the pod's deletion; its endpoint turns terminating (the proxy sees it at t + L).
    endpoints.publish(vec![a.endpoint().terminating(true), b.endpoint()]);
    tokio::time::sleep_until(epoch + T + pre_stop).await;
    a.sigterm();
    let stop_signal = Instant::now() - epoch;
    let result = load.await.expect("join").expect("load");
    let proxy_records = proxy.records();
    let failures = FailuresByKind::count(&result.records);
    let attributed = attribute(
        &result.records,
        &proxy_records,
        &proxy.pinned(),
        &[PodTermination {
            pod: "a".into(),
            started: T,
            stop_signal: Some(stop_signal),
            killed: None,
        }],
    );
    let on_a = attributed
        .iter()
        .filter(|f| f.pod.as_deref() == Some("a"))
        .count();
    eprintln!(
        "{balancing:?} {on_sigterm} preStop {pre_stop:?}: {} of {} failed {failures:?}, {on_a} on pod a",
        failures.total(),
        result.records.len()
    );
    Outcome {
        failures,
        requests: result.records.len(),
        on_a,
    }
}

/// Model (cases README, reference model item 8; R25's "rate × LB share × window"): a proxy that
/// balances each request keeps sending pod a its share of the requests until it sees the
/// removal at t + L; a exits at t, so every one of them fails:
/// failures ≈ rate × L × share = 200 × 1 s × 1/2 = 100. Band: 50..=150, for a 2-core machine
/// shared with other work (a late timer or a slow exit moves the edges of the 1 s window).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_pre_stop_behind_an_l7_proxy_fails_rate_times_lag_times_share() {
    let _one = ONE_AT_A_TIME.lock().await;
    let o = race(Balancing::PerRequest, "exit", Duration::ZERO).await;
    let model = RPS * LAG.as_secs_f64() * 0.5;
    let failed = o.failures.total() as f64;
    assert_eq!(o.requests, 800);
    assert!(
        (0.5 * model..=1.5 * model).contains(&failed),
        "{failed} failures, model {model}"
    );
    assert_eq!(
        o.failures.http5xx,
        o.failures.total(),
        "the proxy answers 502"
    );
    assert_eq!(
        o.on_a as u64,
        o.failures.total(),
        "every failure went to pod a"
    );
}

/// The fix: a preStop sleep of L + 0.5 s keeps a serving until the proxy no longer sends it
/// anything, so its exit fails nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_stop_of_at_least_the_lag_behind_an_l7_proxy_fails_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let o = race(
        Balancing::PerRequest,
        "exit",
        LAG + Duration::from_millis(500),
    )
    .await;
    assert_eq!(o.requests, 800);
    assert_eq!(o.failures.total(), 0, "{:?}", o.failures);
}

/// Model for kube-proxy (conntrack pins each keep-alive connection): only new connections can
/// land on pod a. When a exits, its C/2 pinned connections close and the client replaces them
/// (a closed idle connection is not a failed request); round robin sends half of the new ones
/// to a, whose 502 closes the connection, and so on: ≈ C/2 × (1/2 + 1/4 + …) = C/2 failures,
/// whatever L and the rate, as long as each connection is used within L. With C = 16: ≈ 8.
/// Band 1..=C.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_pre_stop_behind_kube_proxy_fails_about_half_the_connections() {
    let _one = ONE_AT_A_TIME.lock().await;
    let o = race(Balancing::PerConnection, "exit", Duration::ZERO).await;
    let failed = o.failures.total() as usize;
    assert_eq!(o.requests, 800);
    assert!((1..=CONNECTIONS).contains(&failed), "{failed} failures");
    // Every failure is on pod a, except a request that raced the close of an idle pinned
    // connection (the client sent it as the proxy closed the connection pod a had closed): a
    // reset the proxy has no upstream record of.
    let unattributed = failed - o.on_a;
    assert!(
        unattributed as u64 <= o.failures.reset,
        "{unattributed} failures not on pod a, {:?}",
        o.failures
    );
}

/// The fix behind kube-proxy: preStop ≥ L, then an app that drains (pinned keep-alive
/// connections still reach a after its removal; draining closes them with `Connection: close`
/// so the client moves on without a failed request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_stop_of_at_least_the_lag_and_a_drain_behind_kube_proxy_fail_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let o = race(
        Balancing::PerConnection,
        "drain",
        LAG + Duration::from_millis(500),
    )
    .await;
    assert_eq!(o.requests, 800);
    assert_eq!(o.failures.total(), 0, "{:?}", o.failures);
}
