//! 03: a fixed delay instead of watching connections: the `preStop: sleep` of the manifest,
//! moved into the app (no shell, no `sleep` binary in the image).
//!
//! ```sh
//! cargo run -p podgrace-shutdown --example 03_fixed_delay -- 127.0.0.1:8080 5
//! ```
//!
//! The second argument is the delay in seconds (default 5). The delay is capped at half of the
//! drain budget (here (30 s − 1 s) / 2), so that draining keeps time too.

use std::time::Duration;

use axum::routing::get;
use podgrace_shutdown::{Quiesce, Shutdown};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "0.0.0.0:8080".into());
    let delay: f64 = args.next().map_or(Ok(5.0), |s| s.parse())?;

    let shutdown = Shutdown::builder()
        .quiesce(Quiesce::Delay(Duration::from_secs_f64(delay)))
        .build()?;
    shutdown.listen_for_signals()?;

    let app = axum::Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/ready", podgrace_shutdown::axum::readiness(&shutdown));
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    podgrace_shutdown::axum::serve(listener, app, &shutdown).await?;
    Ok(())
}
