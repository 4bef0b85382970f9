//! An axum server that follows a [`Shutdown`]: [`serve`] is [`crate::hyper::serve`] with the
//! router as its service (same phases, same HTTP/1.1 `Connection: close` and HTTP/2 GOAWAY), and
//! [`readiness`] is a route that fails once the shutdown has begun.

use axum::http::StatusCode;
use axum::routing::MethodRouter;
use tokio::net::TcpListener;

use crate::hyper::ServeReport;
use crate::shutdown::Shutdown;

/// Serves `router` on `listener` until the shutdown says stop (see [`crate::hyper`]).
/// Errors: as [`crate::hyper::serve`].
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: &Shutdown,
) -> std::io::Result<ServeReport> {
    let service = hyper_util::service::TowerToHyperService::new(router);
    crate::hyper::serve(listener, service, shutdown).await
}

/// A `GET` route answering `200 ready` before the first signal and `503 not ready` after it:
/// `Router::new().route("/ready", readiness(&shutdown))`.
pub fn readiness(shutdown: &Shutdown) -> MethodRouter {
    let shutdown = shutdown.clone();
    axum::routing::get(move || {
        let ready = shutdown.is_ready();
        async move {
            if ready {
                (StatusCode::OK, "ready\n")
            } else {
                (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
            }
        }
    })
}
