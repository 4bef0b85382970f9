//! 04: the drain deadline from a `--grace SECONDS` flag (else `POD_TERMINATION_GRACE_PERIOD`,
//! else Kubernetes' default 30 s), and what happens to a request longer than it: it is cut
//! at grace − 1 s, so that the process exits before the kubelet's SIGKILL.
//!
//! ```sh
//! cargo run -p podgrace-shutdown --example 04_grace -- 127.0.0.1:8080 --grace 5
//! curl 'localhost:8080/slow?ms=20000' & sleep 1; kill -TERM %cargo   # cut at 4 s
//! ```
//!
//! Set `--grace` to the pod's terminationGracePeriodSeconds (minus any preStop hook in front of
//! the app): the app cannot learn it from the downward API.

use std::time::Duration;

use axum::extract::Query;
use axum::routing::get;
use podgrace_shutdown::{Quiesce, Shutdown};

#[derive(serde::Deserialize)]
struct Slow {
    ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let listen = args
        .first()
        .cloned()
        .unwrap_or_else(|| "0.0.0.0:8080".into());
    let grace = args
        .iter()
        .position(|a| a == "--grace")
        .and_then(|i| args.get(i + 1))
        .map(|s| podgrace_shutdown::grace::parse_grace_period(s))
        .transpose()?;

    let mut builder = Shutdown::builder().quiesce(Quiesce::Skip);
    if let Some(grace) = grace {
        builder = builder.grace_period(grace);
    }
    // A bad POD_TERMINATION_GRACE_PERIOD is an error before anything listens.
    let shutdown = builder.build().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    shutdown.listen_for_signals()?;
    eprintln!(
        "grace period {:.1} s: the drain ends {:.1} s after SIGTERM",
        shutdown.grace_period().as_secs_f64(),
        shutdown.budget().drain_deadline.as_secs_f64()
    );

    let app = axum::Router::new().route(
        "/slow",
        get(|Query(q): Query<Slow>| async move {
            tokio::time::sleep(Duration::from_millis(q.ms)).await;
            "slow\n"
        }),
    );
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    let report = podgrace_shutdown::axum::serve(listener, app, &shutdown).await?;
    eprintln!("exiting: {} cut", report.cut);
    Ok(())
}
