//! The TCP mode of the proxy: a byte splice to the endpoint picked at accept.

use super::{ProxyOutcome, RawRecord, Shared};
use crate::endpoints::Endpoint;
use std::sync::Arc;
use tokio::net::TcpStream;

/// Resets a connection: RST instead of FIN (`SO_LINGER` 0, then close).
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Splices `client` to a picked endpoint; a connect failure or an upstream reset resets the
/// client, as kube-proxy's DNAT to a closed port would.
pub(crate) async fn serve(
    mut client: TcpStream,
    id: u64,
    peer: std::net::SocketAddr,
    s: Arc<Shared>,
) {
    let start = s.now();
    let ep = s.view.pick();
    let rec = |ep: Option<&Arc<Endpoint>>, outcome| RawRecord {
        connection: id,
        request: None,
        start,
        end: s.now(),
        ep: ep.cloned(),
        outcome,
        status: None,
    };
    let Some(ep) = ep else {
        s.record(rec(None, ProxyOutcome::NoEndpoints));
        return reset(client);
    };
    // The conntrack entry: this client connection goes to `ep` for its lifetime.
    s.pin(id, peer, &ep);
    let mut up = match s.connect(&ep).await {
        Ok(up) => up,
        Err(kind) => {
            s.record(rec(Some(&ep), kind));
            return reset(client);
        }
    };
    match tokio::io::copy_bidirectional(&mut client, &mut up).await {
        Ok(_) => s.record(rec(Some(&ep), ProxyOutcome::Forwarded)),
        Err(_) => {
            s.record(rec(Some(&ep), ProxyOutcome::UpstreamReset));
            reset(up);
            reset(client);
        }
    }
}
