//! The demo app: a small HTTP server (HTTP/1.1 and h2c) whose behaviour on SIGTERM is chosen by
//! flags. It is what the default drill runs as each pod's process.
//!
//! Behaviours on SIGTERM ([`OnSigterm`]):
//! * `exit`: exit at once, closing the listener; requests in flight are cut (the app of cases
//!   R07 and R02, and of every "no preStop" 502 report).
//! * `drain`: stop accepting (the listener is closed), finish the requests in flight, close
//!   keep-alive connections gracefully (HTTP/1.1: `Connection: close` on the next response, or
//!   closed after [`DRAIN_IDLE_CLOSE`] idle; HTTP/2: GOAWAY) and return once no connection is
//!   left, or after the drain time.
//! * `ignore`: keep serving (what a PID 1 without a handler does; R01).
//!
//! The caller delivers SIGTERMs through a channel, so the same code serves the real process
//! (`podgrace demo-app`, which installs its own SIGTERM handler with `tokio::signal::unix` and so
//! is not "ignored by PID 1") and in-process tests. Lifecycle changes are logged to stderr, one
//! line each, prefixed `demo-app: `.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// What the app does on SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSigterm {
    Exit,
    Drain,
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
    pub on_sigterm: OnSigterm,
    /// `--drain-seconds`: the longest drain (default 30 s).
    pub drain: Duration,
    /// `--latency-ms`: how long each request takes (default 0).
    pub latency: Duration,
    /// `--ready-path`: answers 200 while serving, 503 once draining (default `/ready`).
    pub ready_path: String,
    /// `--fail-ready-after-sigterm`: readiness answers 503 from the first SIGTERM on, whatever
    /// the behaviour.
    pub fail_ready_after_sigterm: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            on_sigterm: OnSigterm::Exit,
            drain: Duration::from_secs(30),
            latency: Duration::ZERO,
            ready_path: "/ready".to_string(),
            fail_ready_after_sigterm: false,
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
    /// `drain` hit the drain time with connections left (they are cut).
    DrainTimedOut,
    /// The SIGTERM channel closed (no more signals can come) in `ignore` mode, or before any.
    SignalsClosed,
}

struct State {
    draining: AtomicBool,
    sigterm: AtomicBool,
    in_flight: AtomicUsize,
}

struct InFlight(Arc<State>);
impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn log(msg: &str) {
    eprintln!("demo-app: {msg}");
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
    config: Arc<DemoConfig>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    state.in_flight.fetch_add(1, Ordering::SeqCst);
    let _guard = InFlight(Arc::clone(&state));
    let draining = state.draining.load(Ordering::SeqCst);
    let mut resp = if req.uri().path() == config.ready_path {
        let not_ready =
            draining || (config.fail_ready_after_sigterm && state.sigterm.load(Ordering::SeqCst));
        let (status, text) = if not_ready {
            (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
        } else {
            (StatusCode::OK, "ready\n")
        };
        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *r.status_mut() = status;
        r
    } else {
        if !config.latency.is_zero() {
            tokio::time::sleep(config.latency).await;
        }
        Response::new(Full::new(Bytes::from_static(b"ok\n")))
    };
    if state.draining.load(Ordering::SeqCst) && req.version() == Version::HTTP_11 {
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(resp)
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

/// Per-connection bookkeeping for the drain.
#[derive(Default)]
struct ConnState {
    in_flight: AtomicUsize,
    /// Milliseconds since the app's start at the end of the last request.
    last_active_ms: std::sync::atomic::AtomicU64,
    h2: AtomicBool,
}

/// Serves HTTP/1.1 and h2c (prior knowledge) on `listener`; each message on `sigterm` is one
/// SIGTERM. Returns when the behaviour says the process should exit.
pub async fn serve(
    listener: TcpListener,
    config: DemoConfig,
    mut sigterm: mpsc::UnboundedReceiver<()>,
) -> DemoExit {
    let config = Arc::new(config);
    let state = Arc::new(State {
        draining: AtomicBool::new(false),
        sigterm: AtomicBool::new(false),
        in_flight: AtomicUsize::new(0),
    });
    let (drain_tx, drain_rx) = tokio::sync::watch::channel(false);
    let started = tokio::time::Instant::now();
    let mut conns = tokio::task::JoinSet::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    if let Ok(addr) = listener.local_addr() {
        log(&format!(
            "listening on {addr} (on SIGTERM: {})",
            config.on_sigterm
        ));
    }
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let cs = Arc::new(ConnState::default());
                let (state, config, cs2) = (Arc::clone(&state), Arc::clone(&config), Arc::clone(&cs));
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (state, config, cs) = (Arc::clone(&state), Arc::clone(&config), Arc::clone(&cs2));
                    async move {
                        if req.version() == Version::HTTP_2 {
                            cs.h2.store(true, Ordering::Relaxed);
                        }
                        cs.in_flight.fetch_add(1, Ordering::SeqCst);
                        let r = handle(req, state, config).await;
                        cs.last_active_ms.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
                        cs.in_flight.fetch_sub(1, Ordering::SeqCst);
                        r
                    }
                });
                let conn = builder.serve_connection(TokioIo::new(stream), svc).into_owned();
                let mut drain = drain_rx.clone();
                conns.spawn(async move {
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => return,
                        _ = drain.wait_for(|d| *d) => {}
                    }
                    // Draining: HTTP/2 gets GOAWAY now; HTTP/1.1 closes after its next response
                    // (Connection: close) or once idle for DRAIN_IDLE_CLOSE.
                    if !cs.h2.load(Ordering::Relaxed) {
                        let drain_started = started.elapsed().as_millis() as u64;
                        loop {
                            tokio::select! {
                                _ = conn.as_mut() => return,
                                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                            }
                            let now = started.elapsed().as_millis() as u64;
                            let idle_since = cs.last_active_ms.load(Ordering::SeqCst).max(drain_started);
                            if cs.in_flight.load(Ordering::SeqCst) == 0
                                && now.saturating_sub(idle_since) >= DRAIN_IDLE_CLOSE.as_millis() as u64
                            {
                                break;
                            }
                        }
                    }
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            signal = sigterm.recv() => {
                if signal.is_none() {
                    // No more signals can come; keep serving in ignore mode would never end.
                    return DemoExit::SignalsClosed;
                }
                state.sigterm.store(true, Ordering::SeqCst);
                let n = state.in_flight.load(Ordering::SeqCst);
                match config.on_sigterm {
                    OnSigterm::Exit => {
                        log(&format!("received SIGTERM, exiting at once ({n} in-flight requests cut)"));
                        return DemoExit::ExitedOnSigterm;
                    }
                    OnSigterm::Ignore => log(&format!("received SIGTERM, ignoring it ({n} in-flight requests)")),
                    OnSigterm::Drain => {
                        log(&format!("received SIGTERM, draining {n} in-flight requests"));
                        break;
                    }
                }
            }
        }
    }
    state.draining.store(true, Ordering::SeqCst);
    drop(listener);
    let _ = drain_tx.send(true);
    log(&format!(
        "listener closed, {} connections open",
        conns.len()
    ));
    let drain_secs = config.drain.as_secs_f64();
    let deadline = tokio::time::sleep(config.drain);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            joined = conns.join_next() => {
                if joined.is_none() {
                    log("drained, exiting");
                    return DemoExit::Drained;
                }
            }
            _ = &mut deadline => {
                let n = state.in_flight.load(Ordering::SeqCst);
                log(&format!("drain time of {drain_secs} s is over, exiting with {n} in-flight requests"));
                return DemoExit::DrainTimedOut;
            }
        }
    }
}
