//! The TLS listener: accepts connections, refuses plain HTTP as Go's server does (a 400
//! "Client sent an HTTP request to an HTTPS server."), terminates TLS with rustls and serves
//! the authenticated router over HTTP/2 or HTTP/1.1.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Serves `router` on `listener` with `tls` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    continue;
                }
            },
            _ = &mut shutdown => return,
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move { connection(stream, peer, acceptor, router).await });
    }
}

async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    router: axum::Router,
) {
    let _ = stream.set_nodelay(true);
    // A TLS connection starts with a handshake record (0x16); anything else is plain text.
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(1) if first[0] != 0x16 => {
            let mut s = stream;
            let _ = s
                .write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
                .await;
            let _ = s.shutdown().await;
            return;
        }
        Ok(1) => {}
        _ => return,
    }
    let tls =
        match tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(stream))
            .await
        {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                tracing::debug!("TLS handshake with {peer}: {e}");
                return;
            }
            Err(_) => return,
        };
    let service = TowerToHyperService::new(router);
    let _ = auto::Builder::new(TokioExecutor::new())
        .serve_connection_with_upgrades(TokioIo::new(tls), service)
        .await;
}
