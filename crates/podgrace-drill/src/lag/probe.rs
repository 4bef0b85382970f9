//! The prober of `podgrace lag`: open-loop HTTP/1.1 GETs to the target, each on a new
//! connection (a load balancer, an ingress or kube-proxy routes each new connection anew; a
//! reused one stays pinned to its pod), recording for each request when its connection was
//! opened (the moment the route was chosen), whether it was answered, and which pod answered
//! (the response header that names it, such as the demo app's `x-podgrace-pod`).
//!
//! Request `i` starts at `start + i / rps` whatever happened to earlier ones (open loop), each in
//! a task of its own, with a timeout; at most [`MAX_IN_FLIGHT`] at once (beyond that a request
//! is recorded as not sent, so a stalled target cannot pile up tasks).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper::header::{HeaderName, CONNECTION, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The most requests in flight at once.
pub const MAX_IN_FLIGHT: usize = 2048;

/// Where the probes go: `http://HOST[:PORT]/PATH` or `https://...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// `https`: TLS to the target (server name: the host).
    pub https: bool,
    /// The `Host` header (`HOST[:PORT]` as written in the URL).
    pub authority: String,
    /// The path and query (`/`, `/healthz?x=1`).
    pub path: String,
    /// The host and port to connect to.
    pub host: String,
    /// The port (80 by default).
    pub port: u16,
}

/// Why a `--target` URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not an `http://` or `https://` URL with a host.
    #[error("--target {0}: expected an http:// or https:// URL with a host, such as http://203.0.113.7:30080/")]
    NotHttp(String),
    /// A port that is not a number from 1 to 65535.
    #[error("--target {0}: the port is not a number from 1 to 65535")]
    Port(String),
}

impl std::str::FromStr for Target {
    type Err = TargetError;

    /// Parses `http[s]://HOST[:PORT][/PATH]` (an IPv6 host in brackets; port 80, or 443 for
    /// https, by default).
    fn from_str(url: &str) -> Result<Target, TargetError> {
        let (https, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(r), _) => (false, r),
            (_, Some(r)) => (true, r),
            _ => return Err(TargetError::NotHttp(url.to_string())),
        };
        let default_port = if https { 443 } else { 80 };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(TargetError::NotHttp(url.to_string()));
        }
        let bad = || TargetError::NotHttp(url.to_string());
        let port_of = |p: &str| -> Result<u16, TargetError> {
            p.parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| TargetError::Port(url.to_string()))
        };
        let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
            let (h, after) = inner.split_once(']').ok_or_else(bad)?;
            match after {
                "" => (h, default_port),
                p => (h, port_of(p.strip_prefix(':').ok_or_else(bad)?)?),
            }
        } else {
            match authority.split_once(':') {
                Some((_, p)) if p.contains(':') => return Err(bad()),
                Some((h, p)) => (h, port_of(p)?),
                None => (authority, default_port),
            }
        };
        if host.is_empty() {
            return Err(TargetError::NotHttp(url.to_string()));
        }
        Ok(Target {
            url: url.to_string(),
            https,
            authority: authority.to_string(),
            path,
            host: host.to_string(),
            port,
        })
    }
}

/// One probe, times since the prober's epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// When its connection was opened (the route was chosen then).
    pub sent: Duration,
    /// When it ended.
    pub done: Duration,
    /// Answered (a response head arrived) with this status.
    pub status: Option<u16>,
    /// The pod that answered, from the response header.
    pub pod: Option<String>,
}

/// The prober's settings.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// Where to send.
    pub target: Target,
    /// Requests per second.
    pub rps: f64,
    /// Each request's timeout, from its connect.
    pub timeout: Duration,
    /// The response header naming the pod.
    pub pod_header: HeaderName,
    /// The TLS client for an `https` target ([`tls_config`]).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// The TLS client of an `https` target: verified against the system's roots, or `ca` (PEM)
/// alone when given; `insecure`: no verification (Go's `InsecureSkipVerify`, as curl `-k`).
///
/// # Errors
/// A CA file that cannot be read or holds no certificate; no root certificate at all.
pub fn tls_config(
    ca: Option<&std::path::Path>,
    insecure: bool,
) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject as _;
    if insecure {
        return podgrace_node::httpget::insecure_tls_config();
    }
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            for c in certs {
                let c = c.map_err(|e| format!("{}: {e}", path.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        None => {
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    if roots.is_empty() {
        return Err(match ca {
            Some(p) => format!("{}: no certificate in it", p.display()),
            None => "no root certificate on this system (give --target-ca FILE)".into(),
        });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
        .map_err(|e| format!("tls: configuring the client: {e}"))
}

/// A running prober: its records so far, shared.
pub struct Prober {
    epoch: Instant,
    records: Arc<Mutex<Vec<Probe>>>,
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Prober {
    /// Resolves the target's host and starts sending.
    ///
    /// # Errors
    /// The host cannot be resolved (the resolver's words).
    pub async fn start(cfg: ProbeConfig) -> std::io::Result<Prober> {
        let addrs: Vec<SocketAddr> =
            tokio::net::lookup_host((cfg.target.host.as_str(), cfg.target.port))
                .await?
                .collect();
        let Some(addr) = addrs.first().copied() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} resolves to no address", cfg.target.host),
            ));
        };
        let epoch = Instant::now();
        let records = Arc::new(Mutex::new(Vec::new()));
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let cfg = Arc::new(cfg);
        let task = {
            let records = Arc::clone(&records);
            let in_flight = Arc::clone(&in_flight);
            tokio::spawn(async move {
                let period = Duration::from_secs_f64(1.0 / cfg.rps.max(0.001));
                let mut i: u32 = 0;
                loop {
                    let due = epoch + period.saturating_mul(i);
                    tokio::time::sleep_until(due).await;
                    i = i.saturating_add(1);
                    if in_flight.load(std::sync::atomic::Ordering::SeqCst) >= MAX_IN_FLIGHT {
                        continue;
                    }
                    in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let (cfg, records, in_flight) = (
                        Arc::clone(&cfg),
                        Arc::clone(&records),
                        Arc::clone(&in_flight),
                    );
                    tokio::spawn(async move {
                        let sent = epoch.elapsed();
                        let (status, pod) =
                            match tokio::time::timeout(cfg.timeout, one(addr, &cfg)).await {
                                Ok(Some((s, p))) => (Some(s), p),
                                _ => (None, None),
                            };
                        let done = epoch.elapsed();
                        if let Ok(mut r) = records.lock() {
                            r.push(Probe {
                                sent,
                                done,
                                status,
                                pod,
                            });
                        }
                        in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    });
                }
            })
        };
        Ok(Prober {
            epoch,
            records,
            in_flight,
            task,
        })
    }

    /// The instant times count from.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Now, since the epoch.
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// A copy of the records so far (in order of completion).
    pub fn records(&self) -> Vec<Probe> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Requests not yet ended.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops sending (requests in flight end on their own).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One GET on a new connection (TLS for an https target): the status and the pod header,
/// `None` when it failed.
async fn one(addr: SocketAddr, cfg: &ProbeConfig) -> Option<(u16, Option<String>)> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    match (&cfg.tls, cfg.target.https) {
        (Some(tls), true) => {
            let name = podgrace_node::httpget::server_name(&cfg.target.host).ok()?;
            let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
                .connect(name, stream)
                .await
                .ok()?;
            exchange(stream, cfg).await
        }
        _ => exchange(stream, cfg).await,
    }
}

/// The GET over `io`.
async fn exchange<S>(io: S, cfg: &ProbeConfig) -> Option<(u16, Option<String>)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) = http1::handshake(TokioIo::new(io)).await.ok()?;
    let conn = tokio::spawn(conn);
    let req = Request::builder()
        .method(Method::GET)
        .uri(cfg.target.path.as_str())
        .header(HOST, cfg.target.authority.as_str())
        .header(CONNECTION, "close")
        .header(
            "user-agent",
            concat!("podgrace-lag/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .ok()?;
    let resp = send.send_request(req).await.ok()?;
    let status = resp.status().as_u16();
    let pod = resp
        .headers()
        .get(&cfg.pod_header)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let _ = resp.into_body().collect().await;
    conn.abort();
    Some((status, pod))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_urls() {
        let t: Target = "http://127.0.0.1:30080/healthz?x=1".parse().unwrap();
        assert_eq!(
            (
                t.host.as_str(),
                t.port,
                t.path.as_str(),
                t.authority.as_str()
            ),
            ("127.0.0.1", 30080, "/healthz?x=1", "127.0.0.1:30080")
        );
        let t: Target = "http://web.example".parse().unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("web.example", 80, "/")
        );
        let t: Target = "http://[::1]:8080".parse().unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 8080));
        let t: Target = "http://[::1]".parse().unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 80));
        let t: Target = "https://web.example/".parse().unwrap();
        assert_eq!((t.https, t.port), (true, 443));
        assert!(matches!(
            "ftp://web.example/".parse::<Target>(),
            Err(TargetError::NotHttp(_))
        ));
        assert!(matches!(
            "http://web:0/".parse::<Target>(),
            Err(TargetError::Port(_))
        ));
        assert!(matches!(
            "http://::1/".parse::<Target>(),
            Err(TargetError::NotHttp(_))
        ));
    }
}
