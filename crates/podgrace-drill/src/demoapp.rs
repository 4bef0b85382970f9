//! The demo app: a small HTTP server (HTTP/1.1 and h2c) whose behaviour on SIGTERM is chosen by
//! flags. It is what the default drill runs as each pod's process.
//!
//! Behaviours on SIGTERM ([`OnSigterm`]):
//! * `exit`: exit at once, closing the listener; requests in flight are cut (the app of cases
//!   R07 and R02, and of every "no preStop" 502 report).
//! * `drain` (on [`podgrace_shutdown`]'s hyper integration): stop accepting (the listener is
//!   closed), finish the requests in flight, close
//!   keep-alive connections gracefully (HTTP/1.1: `Connection: close` on the next response, or
//!   closed after [`DRAIN_IDLE_CLOSE`] idle; HTTP/2: GOAWAY at once) and return once no
//!   connection and no request's work is left, or at the drain deadline ([`DemoConfig::drain`]; none: wait for ever,
//!   as gRPC's `GracefulStop()` without a timeout does).
//! * `ignore`: keep serving (what a PID 1 without a handler does; R01).
//!
//! Endpoints (app role):
//! * the readiness path ([`DemoConfig::ready_path`]): 200 while serving, 503 once draining;
//! * `/stream`: a server stream ([`STREAM_PATH`]): `?seconds=S[&interval_ms=I]` sends
//!   `tick 0\n` at once, then one line every I milliseconds (default
//!   [`DEFAULT_TICK_INTERVAL`]), and ends after S seconds; without `seconds` it is an idle
//!   stream (headers, then nothing until the client goes away or the app exits), like an idle
//!   gRPC stream. It counts as a request in flight for its whole life;
//! * any other path: `200 ok` after [`DemoConfig::latency`]. That work runs to its end even
//!   when the client has gone away meanwhile, as a handler of Go's net/http, a servlet or a
//!   Node.js handler does (closing the connection cancels nothing the handler does not check
//!   for), and a draining app waits for it before it exits: a sidecar stopped in front of the
//!   app cuts its clients, not the app's work (field case R22: "the app's outbound calls after
//!   t=5 fail", so the app is still at work then).
//!
//! Sidecar role ([`DemoConfig::upstream`]): a forwarding proxy like istio-proxy in front of an
//! app in the same pod. Every request but the readiness path is forwarded to the upstream over
//! HTTP/1.1 (keep-alive), its response streamed back as it arrives; the SIGTERM behaviours apply
//! as to the app (a draining sidecar keeps forwarding on the connections it has, until they are
//! done or the drain deadline cuts them).
//!
//! The caller delivers SIGTERMs through a channel, so the same code serves the real process
//! (`podgrace demo-app`, which installs its own SIGTERM handler with `tokio::signal::unix` and so
//! is not "ignored by PID 1") and in-process tests. Lifecycle changes are logged to stderr, one
//! line each, prefixed `demo-app: ` (`demo-app (sidecar): ` in the sidecar role).

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Uri, Version};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

/// What the app does on SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSigterm {
    /// Exit at once: the listener closes and requests in flight are cut.
    Exit,
    /// Stop accepting and return once no connection or request's work is left, or at the drain
    /// deadline.
    Drain,
    /// Keep serving until SIGKILL (a PID 1 without a handler).
    Ignore,
}

/// A `--on-sigterm` value that is not `exit`, `drain` or `ignore`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown SIGTERM behaviour {0:?} (expected exit, drain or ignore)")]
pub struct UnknownBehaviour(pub String);

impl std::str::FromStr for OnSigterm {
    type Err = UnknownBehaviour;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "exit" => Ok(OnSigterm::Exit),
            "drain" => Ok(OnSigterm::Drain),
            "ignore" => Ok(OnSigterm::Ignore),
            other => Err(UnknownBehaviour(other.to_string())),
        }
    }
}

impl std::fmt::Display for OnSigterm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OnSigterm::Exit => "exit",
            OnSigterm::Drain => "drain",
            OnSigterm::Ignore => "ignore",
        })
    }
}

/// The demo app's settings (the `podgrace demo-app` flags).
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// `--on-sigterm`: what to do on SIGTERM (default `exit`).
    pub on_sigterm: OnSigterm,
    /// `--drain-seconds`: the drain deadline, counted from the SIGTERM (default 30 s). `None`
    /// (`--drain-seconds unlimited`): no deadline; the drain waits until every connection is
    /// gone, however long (gRPC's `GracefulStop()` without a timeout).
    pub drain: Option<Duration>,
    /// `--latency-ms`: how long each request takes before it is answered (the sidecar: before it
    /// is forwarded); default 0. The readiness path and `/stream` do not wait it.
    pub latency: Duration,
    /// `--ready-path`: answers 200 while serving, 503 once draining (default `/ready`). The
    /// sidecar answers it itself.
    pub ready_path: String,
    /// `--fail-ready-after-sigterm`: readiness answers 503 from the first SIGTERM on, whatever
    /// the behaviour.
    pub fail_ready_after_sigterm: bool,
    /// `--upstream`: the sidecar role. Every request but the readiness path is forwarded to this
    /// address over HTTP/1.1 and its response streamed back (502 if the upstream cannot be
    /// reached or breaks before its response head; a reset if it breaks after). Default `None`:
    /// the app role.
    pub upstream: Option<SocketAddr>,
    /// `--pod-name` (or `POD_NAME` from the downward API): the pod the app runs in, sent on
    /// every response as [`POD_NAME_HEADER`] so that a client behind a Service, an ingress or a
    /// load balancer knows which pod answered (the drill's and `podgrace lag`'s attribution).
    /// `None`: no such header.
    pub pod_name: Option<HeaderValue>,
}

/// The response header naming the pod that answered (`x-podgrace-pod: web-7d4f-x2k`).
pub const POD_NAME_HEADER: &str = "x-podgrace-pod";

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            on_sigterm: OnSigterm::Exit,
            drain: Some(Duration::from_secs(30)),
            latency: Duration::ZERO,
            ready_path: "/ready".to_string(),
            fail_ready_after_sigterm: false,
            upstream: None,
            pod_name: None,
        }
    }
}

impl DemoConfig {
    /// The prefix of the app's stderr lines, without the colon: `demo-app`, or
    /// `demo-app (sidecar)` in the sidecar role.
    pub fn log_name(&self) -> &'static str {
        if self.upstream.is_some() {
            "demo-app (sidecar)"
        } else {
            "demo-app"
        }
    }
}

/// How [`serve`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoExit {
    /// `exit` on SIGTERM.
    ExitedOnSigterm,
    /// `drain` finished: no connection left.
    Drained,
    /// `drain` hit the drain deadline with connections left (they are cut).
    DrainTimedOut,
    /// The SIGTERM channel closed (no more signals can come) in `ignore` mode, or before any.
    SignalsClosed,
}

/// The path of the server-streaming endpoint.
pub const STREAM_PATH: &str = "/stream";

/// The time between two lines of `/stream` when `interval_ms` is not given: 200 ms.
pub const DEFAULT_TICK_INTERVAL: Duration = Duration::from_millis(200);

/// The longest `/stream` length (`seconds`): one day, 86 400 s.
pub const MAX_STREAM_SECONDS: f64 = 86_400.0;

/// `1 in-flight request`, `3 in-flight requests`.
fn in_flight(n: usize) -> String {
    if n == 1 {
        "1 in-flight request".to_string()
    } else {
        format!("{n} in-flight requests")
    }
}

/// How long a draining app leaves an idle HTTP/1.1 keep-alive connection open for a last request
/// (answered with `Connection: close`) before closing it: 1 s.
///
/// Closing an idle HTTP/1.1 connection races with a request the client may be sending on it at
/// that instant (the client sees a reset); answering the next request with `Connection: close`
/// does not. So a draining app closes a connection after its next response, and closes it
/// itself only once it has been idle this long. HTTP/2 connections get GOAWAY at once, which
/// has no such race.
pub const DRAIN_IDLE_CLOSE: Duration = Duration::from_secs(1);

/// The error of a response body: only a proxied body whose upstream broke fails.
type BodyError = Box<dyn std::error::Error + Send + Sync>;
type RespBody = UnsyncBoxBody<Bytes, BodyError>;

/// The whole app, shared by every connection.
struct App {
    config: DemoConfig,
    draining: AtomicBool,
    sigterm: AtomicBool,
    /// Requests in flight: from the request's arrival until its response body is done (or cut),
    /// and, for a request whose client went away, until its work has ended.
    in_flight: AtomicUsize,
    /// Woken when `in_flight` drops to 0.
    idle: tokio::sync::Notify,
    /// The sidecar's client to the upstream (keep-alive, HTTP/1.1).
    client: Option<Client<HttpConnector, Incoming>>,
}

impl App {
    fn log(&self, msg: &str) {
        eprintln!("{}: {msg}", self.config.log_name());
    }
}

/// One request in flight, counted in the app until dropped (with the
/// response body, or with the request's future when it is cut).
struct InFlight {
    app: Arc<App>,
}

impl InFlight {
    fn new(app: Arc<App>) -> Self {
        app.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight { app }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.app.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.app.idle.notify_waiters();
        }
    }
}

/// A response body that keeps its request counted in flight until it is done or dropped.
struct Counted {
    inner: RespBody,
    _in_flight: Option<InFlight>,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What a `/stream` request asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum StreamSpec {
    /// Headers, then nothing.
    Idle,
    /// A line at once and every `interval`; the end after `length`.
    Ticks {
        length: Duration,
        interval: Duration,
    },
}

/// Parses the query of `/stream`; the error is the 400 message.
fn parse_stream_query(query: Option<&str>) -> Result<StreamSpec, String> {
    let (mut seconds, mut interval_ms) = (None, None);
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|d| d.into_owned())
            .map_err(|_| format!("{s:?} is not UTF-8 once percent-decoded"))
    };
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (key, value) = (decode(key)?, decode(value)?);
        let slot = match key.as_str() {
            "seconds" => &mut seconds,
            "interval_ms" => &mut interval_ms,
            _ => {
                return Err(format!(
                    "unknown query parameter {key:?} (expected seconds, interval_ms)"
                ))
            }
        };
        if slot.replace(value).is_some() {
            return Err(format!("{key} is given twice"));
        }
    }
    let Some(seconds) = seconds else {
        if interval_ms.is_some() {
            return Err("interval_ms needs seconds (without seconds the stream is idle)".into());
        }
        return Ok(StreamSpec::Idle);
    };
    let length = seconds
        .parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s <= MAX_STREAM_SECONDS)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            format!("seconds must be a number of seconds above 0 and at most {MAX_STREAM_SECONDS}, not {seconds:?}")
        })?;
    let interval = match interval_ms {
        None => DEFAULT_TICK_INTERVAL,
        Some(ms) => ms
            .parse::<u64>()
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
            .ok_or_else(|| {
                format!("interval_ms must be a whole number of milliseconds above 0, not {ms:?}")
            })?,
    };
    Ok(StreamSpec::Ticks { length, interval })
}

/// The body of a `/stream?seconds=…`: `tick N\n` at `start + N × interval` while that is within
/// `length` (1 µs of slack against rounding), then the end at `start + length`.
struct Ticks {
    start: Instant,
    interval: Duration,
    /// How many lines in all.
    count: u64,
    next: u64,
    end: Instant,
    sleep: Pin<Box<Sleep>>,
}

impl Ticks {
    fn new(length: Duration, interval: Duration) -> Self {
        let start = Instant::now();
        let slack = Duration::from_micros(1);
        let count = (length.saturating_add(slack).as_nanos() / interval.as_nanos().max(1))
            .saturating_add(1);
        Ticks {
            start,
            interval,
            count: u64::try_from(count).unwrap_or(u64::MAX),
            next: 0,
            // `length` is at most a day: no overflow; if it did, the stream would end at once.
            end: start.checked_add(length).unwrap_or(start),
            sleep: Box::pin(tokio::time::sleep_until(start)),
        }
    }

    fn due(&self, n: u64) -> Instant {
        let offset = u32::try_from(n)
            .ok()
            .and_then(|n| self.interval.checked_mul(n))
            .unwrap_or(Duration::MAX);
        self.start
            .checked_add(offset)
            .unwrap_or(self.end)
            .min(self.end)
    }
}

impl Body for Ticks {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.next > this.count {
            return Poll::Ready(None);
        }
        let at = if this.next < this.count {
            this.due(this.next)
        } else {
            this.end
        };
        if at > Instant::now() {
            if this.sleep.deadline() != at {
                this.sleep.as_mut().reset(at);
            }
            if this.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        let n = this.next;
        this.next += 1;
        if n < this.count {
            Poll::Ready(Some(Ok(Frame::data(Bytes::from(format!("tick {n}\n"))))))
        } else {
            Poll::Ready(None)
        }
    }

    fn is_end_stream(&self) -> bool {
        self.next > self.count
    }
}

/// The body of an idle `/stream`: never a byte, never an end.
struct Idle;

impl Body for Idle {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        Poll::Pending
    }
}

fn text(status: StatusCode, text: impl Into<Bytes>) -> Response<RespBody> {
    let body = Full::new(text.into())
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

fn stream(query: Option<&str>) -> Response<RespBody> {
    let body = match parse_stream_query(query) {
        Err(msg) => return text(StatusCode::BAD_REQUEST, format!("{msg}\n")),
        Ok(StreamSpec::Idle) => Idle.boxed_unsync(),
        Ok(StreamSpec::Ticks { length, interval }) => Ticks::new(length, interval).boxed_unsync(),
    };
    let mut r = Response::new(body);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

/// The hop-by-hop headers a proxy does not pass on (RFC 9110 7.6.1), and those `Connection`
/// names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        headers.remove(name);
    }
}

/// The error and its sources, `: `-joined.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// The sidecar: forwards `req` to `upstream` and streams the response back.
async fn forward(
    client: &Client<HttpConnector, Incoming>,
    upstream: SocketAddr,
    req: Request<Incoming>,
) -> Response<RespBody> {
    let (mut parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = match format!("http://{upstream}{path}").parse::<Uri>() {
        Ok(uri) => uri,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("bad request target: {e}\n"),
            )
        }
    };
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    match client.request(Request::from_parts(parts, body)).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            let body = body
                .map_err(|e| -> BodyError { Box::new(e) })
                .boxed_unsync();
            Response::from_parts(parts, body)
        }
        Err(e) => text(
            StatusCode::BAD_GATEWAY,
            format!("upstream {upstream} failed: {}\n", error_chain(&e)),
        ),
    }
}

/// Answers `req` ([`answer`]), saying which pod answered when the app knows its name
/// ([`POD_NAME_HEADER`]; in the sidecar role it replaces the app's own, naming the same pod).
async fn handle(
    req: Request<Incoming>,
    app: &App,
    in_flight: InFlight,
) -> (Response<RespBody>, Option<InFlight>) {
    let (mut resp, in_flight) = answer(req, app, in_flight).await;
    if let Some(name) = &app.config.pod_name {
        resp.headers_mut()
            .insert(HeaderName::from_static(POD_NAME_HEADER), name.clone());
    }
    (resp, in_flight)
}

/// Answers `req`; `in_flight` counts it and comes back with the response (to be held by its
/// body). The app's own work (the latency) runs in a task of its own that holds `in_flight`, so
/// that it ends when it is done, not when the connection closes (which drops this future).
async fn answer(
    req: Request<Incoming>,
    app: &App,
    in_flight: InFlight,
) -> (Response<RespBody>, Option<InFlight>) {
    let config = &app.config;
    let path = req.uri().path();
    if path == config.ready_path {
        let not_ready = app.draining.load(Ordering::SeqCst)
            || (config.fail_ready_after_sigterm && app.sigterm.load(Ordering::SeqCst));
        let resp = if not_ready {
            text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
        } else {
            text(StatusCode::OK, "ready\n")
        };
        return (resp, Some(in_flight));
    }
    if let (Some(client), Some(upstream)) = (&app.client, config.upstream) {
        // A proxy's forwarding ends with its client's connection (Envoy resets the upstream
        // request when the downstream goes away).
        if !config.latency.is_zero() {
            tokio::time::sleep(config.latency).await;
        }
        return (forward(client, upstream, req).await, Some(in_flight));
    }
    if path == STREAM_PATH {
        return (stream(req.uri().query()), Some(in_flight));
    }
    if config.latency.is_zero() {
        return (text(StatusCode::OK, "ok\n"), Some(in_flight));
    }
    let latency = config.latency;
    let work = tokio::spawn(async move {
        tokio::time::sleep(latency).await;
        in_flight
    });
    match work.await {
        Ok(in_flight) => (text(StatusCode::OK, "ok\n"), Some(in_flight)),
        // Only a runtime that shuts down cancels the work: the app is exiting.
        Err(_) => (text(StatusCode::SERVICE_UNAVAILABLE, "exiting\n"), None),
    }
}

/// `drain` on [`podgrace_shutdown`]: its hyper integration serves until the first SIGTERM,
/// then closes the listeners (no quiescence: the demo's preStop, if any, has already run),
/// closes keep-alive connections gracefully (HTTP/1.1 `Connection: close`, or closed after
/// [`podgrace_shutdown::hyper::IDLE_CLOSE`] idle, the same 1 s as [`DRAIN_IDLE_CLOSE`]; HTTP/2
/// GOAWAY) and cuts what is left at the drain deadline (the shutdown's grace period with no
/// margin; none for `unlimited`) or at a second SIGTERM. The app then still waits, within the
/// same deadline, for requests whose work outlived their connection (R22).
async fn serve_draining(
    listener: TcpListener,
    probe: Option<TcpListener>,
    app: Arc<App>,
    mut sigterm: mpsc::UnboundedReceiver<()>,
) -> DemoExit {
    use podgrace_shutdown::{Phase, Quiesce, Shutdown};
    let built = Shutdown::builder()
        .grace_period(app.config.drain.unwrap_or(Duration::MAX))
        .margin(Duration::ZERO)
        .quiesce(Quiesce::Skip)
        .build();
    let shutdown = match built {
        Ok(s) => s,
        // Only a grace period left to the environment can fail; this one is set.
        Err(e) => {
            app.log(&format!("cannot set up the drain ({e}), exiting"));
            return DemoExit::DrainTimedOut;
        }
    };
    let svc = {
        let app = Arc::clone(&app);
        service_fn(move |req: Request<Incoming>| {
            let app = Arc::clone(&app);
            async move {
                // podgrace-shutdown keeps the connections' books; the app counts its own work.
                let in_flight = InFlight::new(Arc::clone(&app));
                let (resp, in_flight) = handle(req, &app, in_flight).await;
                let (parts, inner) = resp.into_parts();
                let body = Counted {
                    inner,
                    _in_flight: in_flight,
                };
                Ok::<_, Infallible>(Response::from_parts(parts, body))
            }
        })
    };
    let serving = async {
        let probes = async {
            match probe {
                Some(p) => podgrace_shutdown::hyper::serve(p, svc.clone(), &shutdown)
                    .await
                    .map(|r| r.cut)
                    .unwrap_or(0),
                None => 0,
            }
        };
        let (main, probes) = tokio::join!(
            podgrace_shutdown::hyper::serve(listener, svc.clone(), &shutdown),
            probes
        );
        main.map(|r| r.cut).unwrap_or(0) + probes
    };
    tokio::pin!(serving);
    let deadline_text = match app.config.drain {
        Some(d) => format!("drain deadline in {} s", d.as_secs_f64()),
        None => "no drain deadline".to_string(),
    };
    let mut signals = 0;
    let cut = loop {
        tokio::select! {
            cut = &mut serving => break cut,
            signal = sigterm.recv(), if signals < 2 => {
                let Some(()) = signal else {
                    if signals == 0 {
                        return DemoExit::SignalsClosed;
                    }
                    // No more signals can come: the drain goes on to its end.
                    signals = 2;
                    continue;
                };
                signals += 1;
                let n = app.in_flight.load(Ordering::SeqCst);
                if signals == 1 {
                    app.sigterm.store(true, Ordering::SeqCst);
                    app.draining.store(true, Ordering::SeqCst);
                    app.log(&format!("received SIGTERM, draining {}", in_flight(n)));
                    shutdown.trigger();
                    app.log(&format!("listener closed with {}, {deadline_text}", in_flight(n)));
                } else {
                    app.log(&format!("received a second SIGTERM, exiting with {} cut", in_flight(n)));
                    shutdown.trigger();
                }
            }
        }
    };
    let over = |app: &App| {
        let n = app.in_flight.load(Ordering::SeqCst);
        let secs = app.config.drain.map_or(0.0, |d| d.as_secs_f64());
        if !shutdown.escalated() {
            app.log(&format!(
                "drain time of {secs} s is over, exiting with {} cut",
                in_flight(n)
            ));
        }
        DemoExit::DrainTimedOut
    };
    if cut > 0 || shutdown.phase() == Phase::Cut {
        return over(&app);
    }
    // Every connection is closed; work whose client went away may still run.
    loop {
        let idle = app.idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        if app.in_flight.load(Ordering::SeqCst) == 0 {
            app.log("drained, exiting");
            return DemoExit::Drained;
        }
        tokio::select! {
            () = &mut idle => {}
            () = shutdown.reached(Phase::Cut) => return over(&app),
        }
    }
}

/// The next connection of `main` or, if there is one, `probe`.
async fn accept_either(
    main: &TcpListener,
    probe: Option<&TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match probe {
        None => main.accept().await,
        Some(probe) => tokio::select! {
            a = main.accept() => a,
            a = probe.accept() => a,
        },
    }
}

/// Serves HTTP/1.1 and h2c (prior knowledge) on `listener`; each message on `sigterm` is one
/// SIGTERM. Returns when the behaviour says the process should exit; connections still open are
/// then cut (their tasks are aborted). Never fails: accept errors are retried after 5 ms.
pub async fn serve(
    listener: TcpListener,
    config: DemoConfig,
    sigterm: mpsc::UnboundedReceiver<()>,
) -> DemoExit {
    serve_with_probe(listener, None, config, sigterm).await
}

/// [`serve`], also answering on `probe` (`--probe-listen`): a second listener for the
/// kubelet's probes, so that a preStop hook counting new connections on the serving port
/// (`podgrace prestop-wait --port`) does not count the probes. Both listeners serve the same
/// paths and close together when the drain starts.
pub async fn serve_with_probe(
    listener: TcpListener,
    probe: Option<TcpListener>,
    config: DemoConfig,
    mut sigterm: mpsc::UnboundedReceiver<()>,
) -> DemoExit {
    let client = config.upstream.map(|_| {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Client::builder(TokioExecutor::new()).build(connector)
    });
    let app = Arc::new(App {
        config,
        draining: AtomicBool::new(false),
        sigterm: AtomicBool::new(false),
        in_flight: AtomicUsize::new(0),
        idle: tokio::sync::Notify::new(),
        client,
    });
    let mut conns = tokio::task::JoinSet::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    if let Ok(addr) = listener.local_addr() {
        let role = match app.config.upstream {
            Some(upstream) => format!(", forwarding to {upstream}"),
            None => String::new(),
        };
        app.log(&format!(
            "listening on {addr} (on SIGTERM: {}{role})",
            app.config.on_sigterm
        ));
    }
    if let Some(addr) = probe.as_ref().and_then(|p| p.local_addr().ok()) {
        app.log(&format!("answering probes on {addr} too"));
    }
    if app.config.on_sigterm == OnSigterm::Drain {
        return serve_draining(listener, probe, app, sigterm).await;
    }
    loop {
        tokio::select! {
            accepted = accept_either(&listener, probe.as_ref()) => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let app2 = Arc::clone(&app);
                let svc = service_fn(move |req: Request<Incoming>| {
                    let app = Arc::clone(&app2);
                    async move {
                        let in_flight = InFlight::new(Arc::clone(&app));
                        let (resp, in_flight) = handle(req, &app, in_flight).await;
                        let (parts, inner) = resp.into_parts();
                        let body = Counted { inner, _in_flight: in_flight };
                        Ok::<_, Infallible>(Response::from_parts(parts, body))
                    }
                });
                let conn = builder.serve_connection(TokioIo::new(stream), svc).into_owned();
                conns.spawn(async move {
                    let _ = conn.await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            signal = sigterm.recv() => {
                if signal.is_none() {
                    // No more signals can come; keep serving in ignore mode would never end.
                    return DemoExit::SignalsClosed;
                }
                app.sigterm.store(true, Ordering::SeqCst);
                let n = app.in_flight.load(Ordering::SeqCst);
                match app.config.on_sigterm {
                    OnSigterm::Exit => {
                        app.log(&format!("received SIGTERM, exiting at once ({} cut)", in_flight(n)));
                        return DemoExit::ExitedOnSigterm;
                    }
                    OnSigterm::Ignore => app.log(&format!("received SIGTERM, ignoring it ({})", in_flight(n))),
                    // Served by serve_draining from the start: never here.
                    OnSigterm::Drain => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_queries() {
        let ticks = |s: f64, i: u64| StreamSpec::Ticks {
            length: Duration::from_secs_f64(s),
            interval: Duration::from_millis(i),
        };
        assert_eq!(parse_stream_query(None), Ok(StreamSpec::Idle));
        assert_eq!(parse_stream_query(Some("")), Ok(StreamSpec::Idle));
        assert_eq!(parse_stream_query(Some("seconds=1.5")), Ok(ticks(1.5, 200)));
        assert_eq!(
            parse_stream_query(Some("interval_ms=100&seconds=2")),
            Ok(ticks(2.0, 100))
        );
        // Percent-encoded, as clients may send it.
        assert_eq!(
            parse_stream_query(Some("seconds=%30.3")),
            Ok(ticks(0.3, 200))
        );
        assert_eq!(parse_stream_query(Some("%73econds=1")), Ok(ticks(1.0, 200)));
        for bad in [
            "seconds=%FF",
            "seconds=%30.3&%73econds=1",
            "seconds=0",
            "seconds=-1",
            "seconds=abc",
            "seconds=inf",
            "seconds=NaN",
            "seconds=1e9",
            "seconds",
            "seconds=1&interval_ms=0",
            "seconds=1&interval_ms=1.5",
            "seconds=1&seconds=2",
            "interval_ms=100",
            "secs=1",
        ] {
            assert!(parse_stream_query(Some(bad)).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn tick_count_includes_the_line_at_the_end() {
        let t = Ticks::new(Duration::from_secs(1), Duration::from_millis(100));
        assert_eq!(t.count, 11);
        let t = Ticks::new(Duration::from_secs_f64(0.3), Duration::from_millis(100));
        assert_eq!(t.count, 4);
        let t = Ticks::new(Duration::from_millis(50), Duration::from_millis(100));
        assert_eq!(t.count, 1);
    }

    #[test]
    fn hop_by_hop_headers_are_not_passed_on() {
        let mut h = HeaderMap::new();
        h.insert(CONNECTION, HeaderValue::from_static("close, x-hop"));
        h.insert("x-hop", HeaderValue::from_static("1"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("x-podgrace-request", HeaderValue::from_static("7"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert_eq!(h["x-podgrace-request"], "7");
    }
}
