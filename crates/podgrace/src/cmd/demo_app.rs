//! `podgrace demo-app`: the demo HTTP server the default drill runs as each pod's process.
//!
//! It installs its own SIGTERM handler (`tokio::signal::unix`), so it behaves the same as PID 1 of
//! a PID namespace, where a signal without a handler would be ignored. SIGINT (Ctrl-C) exits at
//! once whatever `--on-sigterm` says.

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
    /// What to do on SIGTERM: exit (at once, closing the listener), drain (stop accepting, finish
    /// in-flight requests, close keep-alive connections, exit when idle or after
    /// --drain-seconds), ignore (keep serving).
    #[arg(long, default_value = "exit")]
    on_sigterm: OnSigterm,
    /// The longest drain, in seconds.
    #[arg(long, default_value_t = 30)]
    drain_seconds: u64,
    /// How long each request takes, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// The readiness endpoint: 200 while serving, 503 once draining.
    #[arg(long, default_value = "/ready")]
    ready_path: String,
    /// Fail readiness (503) from the first SIGTERM on, whatever --on-sigterm says.
    #[arg(long)]
    fail_ready_after_sigterm: bool,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    if !args.ready_path.starts_with('/') {
        return Err(BadInput(format!(
            "--ready-path must start with '/', not {:?}",
            args.ready_path
        ))
        .into());
    }
    let config = DemoConfig {
        on_sigterm: args.on_sigterm,
        drain: Duration::from_secs(args.drain_seconds),
        latency: Duration::from_millis(args.latency_ms),
        ready_path: args.ready_path,
        fail_ready_after_sigterm: args.fail_ready_after_sigterm,
    };
    let listener = std::net::TcpListener::bind(args.listen)
        .map_err(|e| BadInput(format!("cannot listen on {}: {e}", args.listen)))?;
    listener
        .set_nonblocking(true)
        .context("cannot make the listener non-blocking")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let listener =
            tokio::net::TcpListener::from_std(listener).context("cannot register the listener")?;
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
            exit = demoapp::serve(listener, config, rx) => {
                eprintln!("demo-app: exiting ({exit:?})");
            }
            _ = tokio::signal::ctrl_c() => eprintln!("demo-app: received SIGINT, exiting"),
        }
        anyhow::Ok(())
    })?;
    // Do not wait for connection tasks still running: exiting closes their sockets, as the
    // process's end would.
    rt.shutdown_background();
    Ok(Outcome::Success)
}
