//! 05: the phases for work that is not an HTTP server: a background worker that stops taking
//! jobs when the drain begins, and a readiness flag for a hand-written health check.
//!
//! ```sh
//! cargo run -p podgrace-shutdown --example 05_phases
//! ```
//!
//! `Shutdown::reached(Phase)` resolves once the sequence is there: `Quiescing` (readiness
//! fails), `Draining` (stop taking new work, finish what is in hand), `Cut` (the deadline or a
//! second signal: stop now).

use std::time::Duration;

use podgrace_shutdown::{Phase, Quiesce, Shutdown};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let shutdown = Shutdown::builder()
        .quiesce(Quiesce::Delay(Duration::from_secs(1)))
        .build()?;
    shutdown.listen_for_signals()?;

    let worker = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut done = 0u64;
            loop {
                tokio::select! {
                    () = shutdown.reached(Phase::Draining) => break,
                    () = tokio::time::sleep(Duration::from_millis(200)) => done += 1,
                }
            }
            eprintln!("worker: draining after {done} jobs; finishing the one in hand");
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(300)) => eprintln!("worker: done"),
                () = shutdown.reached(Phase::Cut) => eprintln!("worker: cut"),
            }
        })
    };
    eprintln!("running; ready: {}", shutdown.is_ready());
    shutdown.reached(Phase::Quiescing).await;
    eprintln!("signal: ready: {}", shutdown.is_ready());
    worker.await?;
    Ok(())
}
