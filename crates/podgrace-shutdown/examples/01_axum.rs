//! 01: an axum service that Kubernetes can terminate without losing a request.
//!
//! ```sh
//! cargo run -p podgrace-shutdown --example 01_axum -- 0.0.0.0:8080
//! ```
//!
//! On SIGTERM (or Ctrl-C): `/ready` answers 503 at once; new connections are still served
//! until none has arrived for 1 s (proxies stop sending them once the endpoint is gone); then
//! the listener closes, requests in flight finish, keep-alive connections are closed
//! (`Connection: close`, GOAWAY), and the process exits. At `POD_TERMINATION_GRACE_PERIOD`
//! (default 30 s) minus 1 s, or on a second signal, whatever is left is cut.
//!
//! `/slow?ms=N` answers after N milliseconds, to watch a request in flight finish.

use std::time::Duration;

use axum::extract::Query;
use axum::routing::get;
use podgrace_shutdown::Shutdown;

#[derive(serde::Deserialize)]
struct Slow {
    ms: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "0.0.0.0:8080".into());

    let shutdown = Shutdown::builder().build()?;
    shutdown.listen_for_signals()?;

    let app = axum::Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route(
            "/slow",
            get(|Query(q): Query<Slow>| async move {
                tokio::time::sleep(Duration::from_millis(q.ms)).await;
                "slow\n"
            }),
        )
        .route("/ready", podgrace_shutdown::axum::readiness(&shutdown));

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    let report = podgrace_shutdown::axum::serve(listener, app, &shutdown).await?;
    eprintln!(
        "exiting: {} connections served, {} cut",
        report.accepted, report.cut
    );
    Ok(())
}
