//! `podgrace demo-app`: the demo HTTP server the default drill runs as each pod's process.
//!
//! It installs its own SIGTERM handler (`tokio::signal::unix`), so it behaves the same as PID 1 of
//! a PID namespace, where a signal without a handler would be ignored. SIGINT (Ctrl-C) exits at
//! once whatever `--on-sigterm` says. Endpoints: the readiness path, `/stream` (a server stream,
//! see [`podgrace_drill::demoapp`]) and any other path (`200 ok`); with `--upstream` it is a
//! sidecar proxy forwarding to the app in its pod instead.

use crate::{BadInput, Outcome};
use anyhow::Context;
use podgrace_drill::demoapp::{self, DemoConfig, OnSigterm};
use std::net::SocketAddr;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// A second address serving the same paths, for the kubelet's probes, so that a preStop
    /// `podgrace prestop-wait --port PORT` counting the serving port's new connections does
    /// not count the probes' (the kubelet keeps probing readiness while a pod terminates).
    #[arg(long, value_name = "IP:PORT")]
    probe_listen: Option<SocketAddr>,
    /// What to do on SIGTERM: exit (at once, closing the listener), drain (stop accepting, finish
    /// in-flight requests and streams, close keep-alive connections, exit when no connection is
    /// left or at the --drain-seconds deadline), ignore (keep serving).
    #[arg(long, default_value = "exit")]
    on_sigterm: OnSigterm,
    /// The drain deadline, in seconds after the SIGTERM (fractions allowed), or `unlimited`: no
    /// deadline, wait until every connection is gone (gRPC's GracefulStop() without a timeout)
    /// [default: 30]. Only with --on-sigterm drain.
    #[arg(long, value_name = "SECONDS|unlimited",
          value_parser = parse_drain_seconds, allow_negative_numbers = true)]
    drain_seconds: Option<DrainSeconds>,
    /// How long each request takes, in milliseconds (the sidecar: before it forwards it). The
    /// readiness path and /stream do not wait it.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// The readiness endpoint: 200 while serving, 503 once draining.
    #[arg(long, default_value = "/ready")]
    ready_path: String,
    /// Fail readiness (503) from the first SIGTERM on, whatever --on-sigterm says.
    #[arg(long)]
    fail_ready_after_sigterm: bool,
    /// Sidecar role (like istio-proxy): forward every request but the readiness path to this
    /// IP:PORT over HTTP/1.1 and stream the responses back (502 when the upstream fails).
    #[arg(long, value_name = "IP:PORT", value_parser = parse_upstream)]
    upstream: Option<SocketAddr>,
    /// The pod's name, sent on every response as `x-podgrace-pod: NAME` so that clients
    /// behind a Service know which pod answered [default: $POD_NAME, as the downward API sets
    /// it with `env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]`;
    /// neither: no such header].
    #[arg(long, value_name = "NAME")]
    pod_name: Option<String>,
}

/// A `--drain-seconds` value: `None` is `unlimited`.
#[derive(Debug, Clone, Copy)]
struct DrainSeconds(Option<Duration>);

/// `unlimited`, or a number of seconds at least 0 (fractions allowed).
fn parse_drain_seconds(s: &str) -> Result<DrainSeconds, String> {
    if s == "unlimited" {
        return Ok(DrainSeconds(None));
    }
    s.parse::<f64>()
        .ok()
        .filter(|secs| *secs >= 0.0)
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .map(|d| DrainSeconds(Some(d)))
        .ok_or_else(|| {
            format!("expected a number of seconds at least 0 (such as 30 or 2.5) or unlimited, not {s:?}")
        })
}

fn parse_upstream(s: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = s
        .parse()
        .map_err(|_| format!("expected IP:PORT (such as 127.0.0.1:8081), not {s:?}"))?;
    if addr.port() == 0 || addr.ip().is_unspecified() {
        return Err(format!(
            "expected a reachable IP:PORT (not port 0, not 0.0.0.0), not {s:?}"
        ));
    }
    Ok(addr)
}

/// Whether a sidecar listening on `listen` would forward to itself at `upstream`: same port, and
/// the same address, or a local one that an unspecified (`0.0.0.0`) listener also answers.
fn forwards_to_itself(listen: SocketAddr, upstream: SocketAddr) -> bool {
    listen.port() == upstream.port()
        && (listen.ip() == upstream.ip()
            || (listen.ip().is_unspecified() && upstream.ip().is_loopback()))
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    if !args.ready_path.starts_with('/') {
        return Err(BadInput(format!(
            "--ready-path must start with '/', not {:?}",
            args.ready_path
        ))
        .into());
    }
    let pod_name = args
        .pod_name
        .clone()
        .or_else(|| std::env::var("POD_NAME").ok())
        .filter(|n| !n.is_empty())
        .map(|n| {
            hyper::header::HeaderValue::from_str(&n)
                .map_err(|_| BadInput(format!("--pod-name {n:?}: not a valid header value")))
        })
        .transpose()?;
    let config = DemoConfig {
        on_sigterm: args.on_sigterm,
        drain: args
            .drain_seconds
            .map_or(Some(Duration::from_secs(30)), |d| d.0),
        latency: Duration::from_millis(args.latency_ms),
        ready_path: args.ready_path,
        fail_ready_after_sigterm: args.fail_ready_after_sigterm,
        upstream: args.upstream,
        pod_name,
    };
    if args
        .upstream
        .is_some_and(|up| forwards_to_itself(args.listen, up))
    {
        return Err(BadInput(format!(
            "--upstream {} is where the app itself listens (--listen {}): it would forward to itself",
            args.upstream.map(|u| u.to_string()).unwrap_or_default(),
            args.listen
        ))
        .into());
    }
    let name = config.log_name();
    if args.drain_seconds.is_some() && args.on_sigterm != OnSigterm::Drain {
        eprintln!(
            "{name}: warning: --drain-seconds has no effect with --on-sigterm {}",
            args.on_sigterm
        );
    }
    let listener = std::net::TcpListener::bind(args.listen)
        .map_err(|e| BadInput(format!("cannot listen on {}: {e}", args.listen)))?;
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let probe = match args.probe_listen {
        Some(addr) => {
            let l = std::net::TcpListener::bind(addr)
                .map_err(|e| BadInput(format!("cannot listen on {addr} (--probe-listen): {e}")))?;
            l.set_nonblocking(true)
                .context("cannot make the probe listener non-blocking")?;
            Some(l)
        }
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let listener =
            tokio::net::TcpListener::from_std(listener).context("cannot register the listener")?;
        let probe = probe
            .map(tokio::net::TcpListener::from_std)
            .transpose()
            .context("cannot register the probe listener")?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("cannot install the SIGTERM handler")?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while term.recv().await.is_some() {
                if tx.send(()).is_err() {
                    break;
                }
            }
        });
        tokio::select! {
            exit = demoapp::serve_with_probe(listener, probe, config, rx) => {
                eprintln!("{name}: exiting ({exit:?})");
            }
            _ = tokio::signal::ctrl_c() => eprintln!("{name}: received SIGINT, exiting"),
        }
        anyhow::Ok(())
    })?;
    // Do not wait for connection tasks still running: exiting closes their sockets, as the
    // process's end would.
    rt.shutdown_background();
    Ok(Outcome::Success)
}
