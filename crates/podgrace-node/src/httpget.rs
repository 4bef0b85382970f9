//! The kubelet's HTTP GET client, shared by `httpGet` lifecycle hooks and `httpGet` probes.
//!
//! Mirrors `pkg/probe/http` (`request.go` `NewRequestForHTTPGetAction`, `http.go`
//! `RedirectChecker`, `DoHTTPProbe`) and `pkg/probe/util.go` `ResolveContainerPort`
//! (Kubernetes 1.26 to 1.37):
//! * URL `scheme://host:port/path` with `scheme` lower-cased (`HTTP` → `http`), host =
//!   `httpGet.host` or the pod IP, the port by number or by the name of a declared containerPort;
//! * headers as given, then `User-Agent: kube-probe/<major.minor>` (or `kube-lifecycle/...`) and
//!   `Accept: */*` unless given (an `Accept` given empty is removed); a `Host` header overrides
//!   the request's host;
//! * HTTPS without certificate verification (`InsecureSkipVerify`);
//! * redirects to the same host name are followed (at most 10 requests), a redirect to another
//!   host ends the chain and its 3xx response is returned (`RedirectChecker(false)`, used by both
//!   the prober and the lifecycle client);
//! * at most 10 KiB of the body is read (`maxRespBodyLength`).
//!
//! One TCP connection per request, as with `DisableKeepAlives`. Transport errors are worded
//! like Go's `net/http` (`Get "URL": dial tcp ADDR: connect: connection refused`) because the
//! kubelet puts them in events verbatim. hyper does the HTTP; this module only adds the
//! kubelet's rules.

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use podgrace_core::plan::{ContainerPort, HttpGet, PortRef};
use podgrace_core::KubeVersion;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// At most this many bytes of a response body are read (`maxRespBodyLength`, 10 KiB).
pub const MAX_BODY_BYTES: usize = 10 * 1024;

/// Redirect chains stop after this many requests (`RedirectChecker`).
const MAX_REQUESTS: usize = 10;

/// Errors of the HTTP GET client. Each `Display`s the way the kubelet words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpGetError {
    /// The port named no declared containerPort and is no number, or is out of 1..=65535
    /// (`ResolveContainerPort`).
    #[error("{reason}")]
    ResolvePort {
        /// The kubelet's message.
        reason: String,
    },
    /// No `host` and no pod IP to send to.
    #[error("failed to find networking container: the pod has no IP")]
    NoPodIp,
    /// The path or host does not make a valid URL.
    #[error("parse {url:?}: {reason}")]
    BuildUrl {
        /// The URL as put together.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Connecting, TLS, sending or reading failed, or the timeout passed (Go's `url.Error`).
    #[error("Get {url:?}: {reason}")]
    Get {
        /// The URL of the request that failed.
        url: String,
        /// Go's wording of the failure (`dial tcp ...: connect: connection refused`).
        reason: String,
    },
    /// An HTTPS request reached a plain HTTP server (`http: server gave HTTP response to HTTPS
    /// client`), the case the lifecycle handler falls back to HTTP for.
    #[error("Get {url:?}: http: server gave HTTP response to HTTPS client")]
    HttpResponseToHttpsClient {
        /// The `https://` URL requested.
        url: String,
    },
}

/// Whose request it is: decides the User-Agent (`kube-probe/...` or `kube-lifecycle/...`,
/// `request.go` `userAgent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A probe: `User-Agent: kube-probe/MAJOR.MINOR`.
    Probe,
    /// A lifecycle hook (preStop, postStart): `User-Agent: kube-lifecycle/MAJOR.MINOR`.
    Lifecycle,
}

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTPS without certificate verification (as the kubelet's probes and hooks).
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A GET request built from an `httpGet` action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `httpGet.scheme`.
    pub scheme: Scheme,
    /// Host as in the URL: an IP or a name.
    pub host: String,
    /// The resolved TCP port.
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Final header list, defaults applied, in order. Names as given.
    pub headers: Vec<(String, String)>,
}

/// `net.JoinHostPort`: brackets around IPv6 literals.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `probe.ResolveContainerPort` (`pkg/probe/util.go`): a number is used as is; a name is looked
/// up among the declared ports, then tried as a decimal number; the result must be 1..=65535.
/// Errors: [`HttpGetError::ResolvePort`] with Go's wording.
pub fn resolve_container_port(
    port: &PortRef,
    ports: &[ContainerPort],
) -> Result<u16, HttpGetError> {
    let n: i64 = match port {
        PortRef::Number(n) => i64::from(*n),
        PortRef::Name(name) => match ports.iter().find(|p| p.name.as_deref() == Some(name)) {
            Some(p) => i64::from(p.container_port),
            None => match name.parse::<i64>() {
                Ok(n) => n,
                Err(_) => {
                    return Err(HttpGetError::ResolvePort {
                        reason: format!("strconv.Atoi: parsing {name:?}: invalid syntax"),
                    })
                }
            },
        },
    };
    if (1..=65535).contains(&n) {
        Ok(n as u16)
    } else {
        Err(HttpGetError::ResolvePort {
            reason: format!("invalid port number: {n}"),
        })
    }
}

impl Request {
    /// `NewRequestForHTTPGetAction`: resolves host (`httpGet.host`, else `pod_ip`), port and
    /// scheme, and applies the default headers for `purpose`; `version` gives the User-Agent's
    /// `major.minor`. Errors: [`HttpGetError::NoPodIp`], [`HttpGetError::ResolvePort`],
    /// [`HttpGetError::BuildUrl`].
    pub fn new(
        get: &HttpGet,
        ports: &[ContainerPort],
        pod_ip: Option<IpAddr>,
        purpose: Purpose,
        version: KubeVersion,
    ) -> Result<Request, HttpGetError> {
        let scheme = if get.scheme.eq_ignore_ascii_case("https") {
            Scheme::Https
        } else {
            Scheme::Http
        };
        let host = match get.host.as_deref().filter(|h| !h.is_empty()) {
            Some(h) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
            None => pod_ip.ok_or(HttpGetError::NoPodIp)?.to_string(),
        };
        let port = resolve_container_port(&get.port, ports)?;
        let path = if get.path.starts_with('/') {
            get.path.clone()
        } else {
            format!("/{}", get.path)
        };
        let mut headers = get.headers.clone();
        let has =
            |hs: &[(String, String)], n: &str| hs.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        if !has(&headers, "user-agent") {
            let fragment = match purpose {
                Purpose::Probe => "probe",
                Purpose::Lifecycle => "lifecycle",
            };
            headers.push(("User-Agent".into(), format!("kube-{fragment}/{version}")));
        }
        if !has(&headers, "accept") {
            headers.push(("Accept".into(), "*/*".into()));
        } else {
            // An Accept header given empty is removed (only the first value is looked at).
            let first_empty = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("accept"))
                .is_some_and(|(_, v)| v.is_empty());
            if first_empty {
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case("accept"));
            }
        }
        let req = Request {
            scheme,
            host,
            port,
            path,
            headers,
        };
        req.uri()?;
        Ok(req)
    }

    /// `scheme://host:port/path`.
    pub fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.as_str(),
            join_host_port(&self.host, self.port),
            self.path
        )
    }

    /// `host:port` (`req.URL.Host`).
    pub fn host_port(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    fn uri(&self) -> Result<Uri, HttpGetError> {
        self.url()
            .parse::<Uri>()
            .map_err(|e| HttpGetError::BuildUrl {
                url: self.url(),
                reason: e.to_string(),
            })
    }

    /// The same request over plain HTTP without `Authorization` (the lifecycle fallback).
    pub fn http_fallback(&self) -> Request {
        let mut r = self.clone();
        r.scheme = Scheme::Http;
        r.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
        r
    }
}

/// The final response of a (possibly redirected) GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// At most [`MAX_BODY_BYTES`] of the body.
    pub body: Vec<u8>,
}

/// Sends `req`, following same-host redirects, and reads at most [`MAX_BODY_BYTES`] of the final
/// body. `timeout` bounds everything (the prober's `Client.Timeout`); `None` for the lifecycle
/// client, which has none. Cancel by dropping the future (the connection closes).
/// `close` sends `Connection: close` (the prober's `DisableKeepAlives`).
/// Errors: [`HttpGetError::Get`], [`HttpGetError::HttpResponseToHttpsClient`].
pub async fn get(
    req: &Request,
    timeout: Option<Duration>,
    close: bool,
) -> Result<Response, HttpGetError> {
    let work = follow(req, close);
    match timeout {
        None => work.await,
        Some(t) => match tokio::time::timeout(t, work).await {
            Ok(r) => r,
            Err(_) => Err(HttpGetError::Get {
                url: req.url(),
                reason:
                    "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                        .into(),
            }),
        },
    }
}

async fn follow(first: &Request, close: bool) -> Result<Response, HttpGetError> {
    let host_override = first
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.clone());
    let mut current = first.clone();
    let mut requests = 0usize;
    loop {
        requests += 1;
        let (status, location, body) = send_once(&current, close).await?;
        let is_redirect = matches!(status, 301 | 302 | 303 | 307 | 308);
        let Some(location) = location.filter(|_| is_redirect) else {
            return Ok(Response { status, body });
        };
        let (next, relative) = match resolve_location(&current, &location) {
            Some(v) => v,
            None => {
                return Err(HttpGetError::Get {
                    url: current.url(),
                    reason: format!("failed to parse Location header {location:?}"),
                })
            }
        };
        // RedirectChecker(false): another host name ends the chain with this response.
        if next.host != first.host {
            return Ok(Response { status, body });
        }
        if requests >= MAX_REQUESTS {
            return Err(HttpGetError::Get {
                url: next.url(),
                reason: "stopped after 10 redirects".into(),
            });
        }
        let mut next = next;
        // Go keeps an overriding Host header only across relative redirects.
        if !relative {
            if let Some(h) = &host_override {
                next.headers
                    .retain(|(k, v)| !(k.eq_ignore_ascii_case("host") && v == h));
            }
        }
        current = next;
    }
}

/// Resolves a `Location` against the current request as Go's `URL.ResolveReference` does (RFC
/// 3986 section 5.2, dot segments removed); the bool says whether it was relative (`!IsAbs()`: no
/// scheme, so `//host/path` is relative too, and keeps an overriding Host header). `None` for a
/// Location that does not parse or leaves http and https.
///
/// Upstream: Go's `net/http` `Client.do` (redirects) and `net/url` `ResolveReference`.
fn resolve_location(current: &Request, location: &str) -> Option<(Request, bool)> {
    let base = url::Url::parse(&current.url()).ok()?;
    let target = base.join(location).ok()?;
    let relative = matches!(
        url::Url::parse(location),
        Err(url::ParseError::RelativeUrlWithoutBase)
    );
    let mut next = current.clone();
    next.scheme = match target.scheme() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        _ => return None,
    };
    next.host = match target.host()? {
        url::Host::Domain(d) => d.to_string(),
        url::Host::Ipv4(a) => a.to_string(),
        url::Host::Ipv6(a) => a.to_string(),
    };
    next.port = target.port_or_known_default()?;
    next.path = match target.query() {
        Some(q) => format!("{}?{q}", target.path()),
        None => target.path().to_string(),
    };
    Some((next, relative))
}

/// Go's wording of a socket error: `connection refused`, not `Connection refused (os error 111)`.
pub(crate) fn go_errno(e: &std::io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    };
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => s,
    }
}

/// `net.Dial("tcp", host:port)`; errors worded `dial tcp ADDR: connect: REASON`.
pub(crate) async fn dial(host: &str, port: u16) -> Result<TcpStream, String> {
    let target = join_host_port(host, port);
    let addrs: Vec<std::net::SocketAddr> = match tokio::net::lookup_host((host, port)).await {
        Ok(a) => a.collect(),
        Err(e) => return Err(format!("dial tcp: lookup {host}: {}", go_errno(&e))),
    };
    let mut last = format!("dial tcp {target}: no addresses");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = format!("dial tcp {addr}: connect: {}", go_errno(&e)),
        }
    }
    Err(last)
}

async fn send_once(
    req: &Request,
    close: bool,
) -> Result<(u16, Option<String>, Vec<u8>), HttpGetError> {
    let url = req.url();
    let err = |reason: String| HttpGetError::Get {
        url: url.clone(),
        reason,
    };
    let tcp = dial(&req.host, req.port).await.map_err(err)?;
    match req.scheme {
        Scheme::Http => exchange(req, TokioIo::new(tcp), close).await,
        Scheme::Https => {
            let name = server_name(&req.host).map_err(err)?;
            let connector = tokio_rustls::TlsConnector::from(insecure_tls_config().map_err(err)?);
            let seen = Arc::new(Mutex::new(Vec::with_capacity(5)));
            let recording = Recording {
                inner: tcp,
                seen: Arc::clone(&seen),
            };
            match connector.connect(name, recording).await {
                Ok(tls) => exchange(req, TokioIo::new(tls), close).await,
                Err(e) => {
                    // crypto/tls + net/http: a first record that starts "HTTP/" means a plain
                    // HTTP server answered.
                    let first = seen.lock().map(|v| v.clone()).unwrap_or_default();
                    if first == b"HTTP/" {
                        Err(HttpGetError::HttpResponseToHttpsClient { url: url.clone() })
                    } else {
                        Err(err(format!("tls: {}", go_errno(&e))))
                    }
                }
            }
        }
    }
}

async fn exchange<T>(
    req: &Request,
    io: TokioIo<T>,
    close: bool,
) -> Result<(u16, Option<String>, Vec<u8>), HttpGetError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let url = req.url();
    let err = |reason: String| HttpGetError::Get {
        url: url.clone(),
        reason,
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(io)
        .await
        .map_err(|e| err(e.to_string()))?;
    let mut builder = hyper::Request::get(req.path.as_str());
    let host_given = req
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("host"));
    if !host_given {
        builder = builder.header(hyper::header::HOST, req.host_port());
    }
    for (k, v) in &req.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    if close {
        builder = builder.header(hyper::header::CONNECTION, "close");
    }
    let request = builder
        .body(Empty::<Bytes>::new())
        .map_err(|e| err(format!("net/http: invalid header: {e}")))?;
    let work = async {
        let resp = sender
            .send_request(request)
            .await
            .map_err(|e| err(hyper_reason(&e)))?;
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = resp.into_body();
        let mut out = Vec::new();
        while out.len() < MAX_BODY_BYTES {
            match body.frame().await {
                None => break,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        let room = MAX_BODY_BYTES - out.len();
                        out.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                Some(Err(e)) => return Err(err(hyper_reason(&e))),
            }
        }
        Ok((status, location, out))
    };
    let mut work = std::pin::pin!(work);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = &mut work => r,
        c = &mut conn => match c {
            Err(e) => Err(err(hyper_reason(&e))),
            Ok(()) => work.await,
        },
    }
}

fn hyper_reason(e: &hyper::Error) -> String {
    if e.is_incomplete_message() {
        return "EOF".into();
    }
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s = format!("{s}: {inner}");
        src = inner.source();
    }
    s
}

/// The TLS server name of `host` (an IP address, or a DNS name).
///
/// # Errors
/// A host that is neither (`tls: invalid server name ...`).
pub fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, String> {
    match host.parse::<IpAddr>() {
        Ok(ip) => Ok(rustls::pki_types::ServerName::IpAddress(ip.into())),
        Err(_) => rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| format!("tls: invalid server name {host:?}: {e}")),
    }
}

/// A TLS client config that accepts any certificate (Go's `InsecureSkipVerify`: no chain or
/// name check) but still checks the handshake signatures with the certificate's key.
///
/// # Errors
/// rustls refuses the configuration (not with its default provider).
pub fn insecure_tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let verifier = Arc::new(NoVerification(Arc::clone(&provider)));
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| {
                    Arc::new(
                        b.dangerous()
                            .with_custom_certificate_verifier(verifier)
                            .with_no_client_auth(),
                    )
                })
                .map_err(|e| format!("tls: configuring the client: {e}"))
        })
        .clone()
}

#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Remembers the first 5 bytes read from the server (a TLS record header, or `HTTP/`).
struct Recording<S> {
    inner: S,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Recording<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Ok(mut seen) = self.seen.lock() {
            if seen.len() < 5 {
                let new = &buf.filled()[before..];
                let take = new.len().min(5 - seen.len());
                seen.extend_from_slice(&new[..take]);
            }
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Recording<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(host: Option<&str>, port: PortRef, path: &str, scheme: &str) -> HttpGet {
        HttpGet {
            host: host.map(str::to_owned),
            port,
            path: path.into(),
            scheme: scheme.into(),
            headers: vec![],
        }
    }

    #[test]
    fn ports_resolve_like_resolve_container_port() {
        let ports = [ContainerPort {
            name: Some("http".into()),
            container_port: 8080,
            protocol: "TCP".into(),
            host_port: 0,
            host_ip: String::new(),
        }];
        let r = |p: PortRef| resolve_container_port(&p, &ports);
        assert_eq!(r(PortRef::Number(80)), Ok(80));
        assert_eq!(r(PortRef::Name("http".into())), Ok(8080));
        assert_eq!(r(PortRef::Name("9090".into())), Ok(9090));
        assert_eq!(
            r(PortRef::Name("web".into())).map_err(|e| e.to_string()),
            Err("strconv.Atoi: parsing \"web\": invalid syntax".into())
        );
        assert_eq!(
            r(PortRef::Number(0)).map_err(|e| e.to_string()),
            Err("invalid port number: 0".into())
        );
        assert!(r(PortRef::Number(70000)).is_err());
    }

    #[test]
    fn requests_take_host_scheme_path_and_default_headers() {
        let ip = Some("10.0.0.7".parse().unwrap());
        let v = KubeVersion::new(1, 31);
        let r = Request::new(
            &get(None, PortRef::Number(8080), "healthz", "HTTPS"),
            &[],
            ip,
            Purpose::Probe,
            v,
        )
        .unwrap();
        assert_eq!(r.url(), "https://10.0.0.7:8080/healthz");
        assert!(r
            .headers
            .contains(&("User-Agent".into(), "kube-probe/1.31".into())));
        assert!(r.headers.contains(&("Accept".into(), "*/*".into())));
        let mut g = get(Some("::1"), PortRef::Number(80), "/", "HTTP");
        g.headers = vec![
            ("Accept".into(), "".into()),
            ("Authorization".into(), "x".into()),
        ];
        let r = Request::new(&g, &[], None, Purpose::Lifecycle, v).unwrap();
        assert_eq!(r.url(), "http://[::1]:80/");
        assert!(!r.headers.iter().any(|(k, _)| k == "Accept"));
        assert!(r
            .headers
            .contains(&("User-Agent".into(), "kube-lifecycle/1.31".into())));
        assert!(!r
            .http_fallback()
            .headers
            .iter()
            .any(|(k, _)| k == "Authorization"));
        assert_eq!(
            Request::new(
                &get(None, PortRef::Number(80), "/", "HTTP"),
                &[],
                None,
                Purpose::Probe,
                v
            ),
            Err(HttpGetError::NoPodIp)
        );
    }

    #[test]
    fn redirect_locations_resolve_against_the_request() {
        let base = Request {
            scheme: Scheme::Http,
            host: "10.0.0.7".into(),
            port: 8080,
            path: "/a/b?x=1".into(),
            headers: vec![],
        };
        let url = |l: &str| resolve_location(&base, l).map(|(r, rel)| (r.url(), rel));
        assert_eq!(url("/ok"), Some(("http://10.0.0.7:8080/ok".into(), true)));
        assert_eq!(url("c"), Some(("http://10.0.0.7:8080/a/c".into(), true)));
        assert_eq!(
            url("https://example.com/z"),
            Some(("https://example.com:443/z".into(), false))
        );
        // Scheme-relative is relative for Go (`IsAbs` is false): the Host override stays.
        assert_eq!(url("//other:81/"), Some(("http://other:81/".into(), true)));
        assert_eq!(url("ftp://x/"), None);
        // Dot segments are removed, as ResolveReference does.
        assert_eq!(url("../c"), Some(("http://10.0.0.7:8080/c".into(), true)));
        assert_eq!(
            url("./d/../e?y=2"),
            Some(("http://10.0.0.7:8080/a/e?y=2".into(), true))
        );
        assert_eq!(
            url("/x/./y/../z"),
            Some(("http://10.0.0.7:8080/x/z".into(), true))
        );
    }

    #[test]
    fn errno_wording_is_go_like() {
        let e = std::io::Error::from_raw_os_error(111);
        assert_eq!(go_errno(&e), "connection refused");
    }
}
