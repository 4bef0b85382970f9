//! The demo app: a small HTTP server (HTTP/1.1 and h2c) whose behaviour on SIGTERM is chosen by
//! flags. It is what the default drill runs as each pod's process.
//!
//! Behaviours on SIGTERM ([`OnSigterm`]):
//! * `exit`: exit at once, closing the listener; requests in flight are cut (the app of cases
//!   R07 and R02, and of every "no preStop" 502 report).
//! * `drain`: stop accepting (the listener is closed), finish the requests in flight, close
//!   keep-alive connections gracefully (HTTP/1.1 `Connection: close`, HTTP/2 GOAWAY) and return
//!   once no connection is left, or after the drain time.
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
use hyper_util::server::graceful::GracefulShutdown;
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
    let graceful = GracefulShutdown::new();
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
                let state = Arc::clone(&state);
                let config = Arc::clone(&config);
                let svc = service_fn(move |req| handle(req, Arc::clone(&state), Arc::clone(&config)));
                let conn = builder.serve_connection(TokioIo::new(stream), svc).into_owned();
                let conn = graceful.watch(conn);
                conns.spawn(async move { let _ = conn.await; });
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
    log(&format!(
        "listener closed, {} connections open",
        graceful.count()
    ));
    let drain_secs = config.drain.as_secs_f64();
    tokio::select! {
        _ = graceful.shutdown() => {
            log("drained, exiting");
            DemoExit::Drained
        }
        _ = tokio::time::sleep(config.drain) => {
            let n = state.in_flight.load(Ordering::SeqCst);
            log(&format!("drain time of {drain_secs} s is over, exiting with {n} in-flight requests"));
            DemoExit::DrainTimedOut
        }
    }
}
