//! 02: the same behaviour with hyper alone (no router): a `service_fn` and
//! [`podgrace_shutdown::hyper::serve`], HTTP/1.1 and HTTP/2 (cleartext) on one port.
//!
//! ```sh
//! cargo run -p podgrace-shutdown --example 02_hyper -- 127.0.0.1:8080
//! ```

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use podgrace_shutdown::Shutdown;

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

    let ready = shutdown.clone();
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let ready = ready.clone();
        async move {
            if req.uri().path() == "/ready" {
                return Ok::<_, Infallible>(podgrace_shutdown::hyper::readiness(&ready));
            }
            Ok(Response::new(Full::new(Bytes::from_static(b"hello\n"))))
        }
    });

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    let report = podgrace_shutdown::hyper::serve(listener, service, &shutdown).await?;
    eprintln!(
        "exiting: {} connections served, {} cut",
        report.accepted, report.cut
    );
    Ok(())
}
