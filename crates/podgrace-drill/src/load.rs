//! Open-loop HTTP/1.1 load at a fixed rate, without coordinated omission.
//!
//! Request `i` is due at the intended time `t0 + i / rps` whatever happened to earlier ones; its
//! latency is measured from that intended time, so a stalled server cannot hide failures or slow
//! answers by delaying the sends (the "coordinated omission" of closed-loop tools). One timer task
//! dispatches due requests, a millisecond tick at a time, into a queue that `connections` worker
//! tasks pull from; each worker owns one keep-alive connection as a real client pool does: the
//! connection is reused, and replaced when it errors or the server closes it. No task is spawned
//! per request, and each worker drives its connection itself (no hop between tasks).
//!
//! Failure kinds ([`RequestOutcome`]): `refused` (the connect was refused, or failed otherwise),
//! `reset` (the connection broke or closed before a full response), `timeout` (no full response
//! within the request timeout, counted from the actual send), `http5xx` (a 5xx status). Other
//! statuses count as successes (the exchange worked); the status is kept in the record.

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::HOST;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The request header carrying a request's schedule index, so that the proxy's records can be
/// joined with the load's (`x-podgrace-request: 17`).
pub const REQUEST_ID_HEADER: &str = "x-podgrace-request";

/// The load's settings.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Where requests go (the proxy).
    pub target: SocketAddr,
    /// `--rps`: requests per second (default 200).
    pub rps: f64,
    /// `--duration`: how long requests are scheduled for.
    pub duration: Duration,
    /// Keep-alive connections in the pool (default 32).
    pub connections: usize,
    /// `--path` (default `/`).
    pub path: String,
    /// `--method` (default GET).
    pub method: Method,
    /// Per-request timeout, from the actual send (default 5 s).
    pub timeout: Duration,
    /// The instant record times count from (the drill's t = 0); the schedule starts at `run`.
    pub epoch: Instant,
}

impl LoadConfig {
    /// Defaults: 200 rps for `duration`, 32 connections, `GET /`, 5 s timeout, epoch now.
    pub fn new(target: SocketAddr, duration: Duration) -> Self {
        LoadConfig {
            target,
            rps: 200.0,
            duration,
            connections: 32,
            path: "/".to_string(),
            method: Method::GET,
            timeout: Duration::from_secs(5),
            epoch: Instant::now(),
        }
    }
}

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RequestOutcome {
    /// A full response with a status below 500.
    Ok,
    /// The connection could not be made (refused or otherwise failed).
    Refused,
    /// The connection broke or closed before a full response.
    Reset,
    /// No full response within the request timeout.
    Timeout,
    /// A 5xx response.
    Http5xx,
}

impl RequestOutcome {
    /// `true` for every outcome but [`RequestOutcome::Ok`].
    pub fn is_failure(self) -> bool {
        self != RequestOutcome::Ok
    }
}

/// One request; times are since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// Its number in the schedule (from 0).
    pub index: u64,
    /// When it was due: `start + index / rps`.
    pub intended: Duration,
    /// When a worker took it up (connect included in what follows).
    pub sent: Duration,
    /// When it completed or failed.
    pub done: Duration,
    pub outcome: RequestOutcome,
    pub status: Option<u16>,
}

impl RequestRecord {
    /// Latency from the intended send time (no coordinated omission).
    pub fn latency(&self) -> Duration {
        self.done.saturating_sub(self.intended)
    }
}

/// The result of a [`run`].
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// Every request, ordered by index.
    pub records: Vec<RequestRecord>,
    /// Latencies from the intended send time, in microseconds (every request, failures too).
    pub latency_us: Histogram<u64>,
    /// Requests sent per second, from the first actual send to the last
    /// (`(n − 1) / (last − first)`); `0` with fewer than 2 requests.
    pub achieved_rps: f64,
    /// The worst delay of an actual send behind its intended time.
    pub max_send_lag: Duration,
}

/// Errors of [`run`].
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LoadError {
    #[error("the rate must be a positive, finite number of requests per second, not {0}")]
    BadRate(f64),
    #[error("the connection pool needs at least one connection")]
    NoConnections,
    #[error("the path {0:?} is not a valid request target")]
    BadPath(String),
    #[error("cannot make the latency histogram: {0}")]
    Histogram(String),
}

/// One pooled keep-alive connection: the request sender and the connection itself, which the
/// worker drives in its own task (no hop to another task per request).
struct Conn {
    tx: SendRequest<Empty<Bytes>>,
    driver: Pin<Box<http1::Connection<TokioIo<TcpStream>, Empty<Bytes>>>>,
}

struct Worker {
    cfg: Arc<LoadConfig>,
    start: Instant,
    conn: Option<Conn>,
    records: Vec<RequestRecord>,
    host: String,
}

fn classify_io(e: &std::io::Error) -> RequestOutcome {
    use std::io::ErrorKind::*;
    match e.kind() {
        TimedOut => RequestOutcome::Timeout,
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => RequestOutcome::Reset,
        _ => RequestOutcome::Refused,
    }
}

/// Sends `req` when the connection is ready and reads the whole response.
async fn send(
    tx: &mut SendRequest<Empty<Bytes>>,
    req: Request<Empty<Bytes>>,
) -> Result<u16, RequestOutcome> {
    tx.ready().await.map_err(|_| RequestOutcome::Reset)?;
    let resp = tx
        .send_request(req)
        .await
        .map_err(|_| RequestOutcome::Reset)?;
    let status = resp.status().as_u16();
    resp.into_body()
        .collect()
        .await
        .map_err(|_| RequestOutcome::Reset)?;
    Ok(status)
}

impl Worker {
    fn due(&self, index: u64) -> Instant {
        self.start + Duration::from_secs_f64(index as f64 / self.cfg.rps)
    }

    async fn connect(&mut self) -> Result<(), RequestOutcome> {
        let stream = TcpStream::connect(self.cfg.target)
            .await
            .map_err(|e| classify_io(&e))?;
        let _ = stream.set_nodelay(true);
        let (tx, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|_| RequestOutcome::Reset)?;
        self.conn = Some(Conn {
            tx,
            driver: Box::pin(driver),
        });
        Ok(())
    }

    /// Takes requests off the queue until it closes. While idle, it keeps driving its connection,
    /// so that one the server closes is noticed and replaced without a failed request, as a
    /// client pool does.
    async fn run(mut self, rx: async_channel::Receiver<u64>) -> Vec<RequestRecord> {
        loop {
            let job = match self.conn.as_mut() {
                Some(c) => tokio::select! {
                    biased;
                    job = rx.recv() => job,
                    _ = c.driver.as_mut() => {
                        self.conn = None;
                        continue;
                    }
                },
                None => rx.recv().await,
            };
            let Ok(index) = job else {
                break;
            };
            self.one(index).await;
        }
        self.records
    }

    /// One exchange on the pooled connection (connecting first if needed).
    async fn exchange(&mut self, index: u64) -> Result<u16, RequestOutcome> {
        if self.conn.is_none() {
            self.connect().await?;
        }
        let req = Request::builder()
            .method(self.cfg.method.clone())
            .uri(self.cfg.path.as_str())
            .header(HOST, self.host.as_str())
            .header(REQUEST_ID_HEADER, index)
            .body(Empty::<Bytes>::new())
            .map_err(|_| RequestOutcome::Refused)?;
        let Some(c) = self.conn.as_mut() else {
            return Err(RequestOutcome::Refused);
        };
        let mut driving = true;
        let result = {
            let exchange = send(&mut c.tx, req);
            tokio::pin!(exchange);
            loop {
                tokio::select! {
                    r = exchange.as_mut() => break r,
                    _ = c.driver.as_mut(), if driving => {
                        // The connection ended; the exchange now resolves (with its response if
                        // it was complete, else with an error).
                        driving = false;
                    }
                }
            }
        };
        if !driving {
            self.conn = None;
        }
        result
    }

    async fn one(&mut self, index: u64) {
        let intended = self.due(index);
        let sent = Instant::now();
        let result = tokio::time::timeout(self.cfg.timeout, self.exchange(index)).await;
        let (outcome, status) = match result {
            Err(_) => (RequestOutcome::Timeout, None),
            Ok(Err(kind)) => (kind, None),
            Ok(Ok(s)) if s >= 500 => (RequestOutcome::Http5xx, Some(s)),
            Ok(Ok(s)) => (RequestOutcome::Ok, Some(s)),
        };
        if !matches!(outcome, RequestOutcome::Ok | RequestOutcome::Http5xx) {
            // Whatever state the connection is in, it is not reusable.
            self.conn = None;
        }
        let epoch = self.cfg.epoch;
        let since = |t: Instant| t.saturating_duration_since(epoch);
        self.records.push(RequestRecord {
            index,
            intended: since(intended),
            sent: since(sent),
            done: since(Instant::now()),
            outcome,
            status,
        });
    }
}

/// The timer: hands request `i` to the queue at `start + i / rps`, for `i` in `0..total`.
///
/// It dispatches everything due, then sleeps until the next request is due; tokio's timer wakes
/// on millisecond ticks, so at high rates several requests go out per tick, each keeping its exact
/// intended time. Returns early if the queue is closed.
pub(crate) async fn schedule(
    start: Instant,
    rps: f64,
    total: u64,
    tx: &async_channel::Sender<u64>,
) {
    let due = |i: u64| start + Duration::from_secs_f64(i as f64 / rps);
    let mut i = 0;
    while i < total {
        let now = Instant::now();
        while i < total && due(i) <= now {
            if tx.try_send(i).is_err() {
                return;
            }
            i += 1;
        }
        if i < total {
            tokio::time::sleep_until(due(i)).await;
        }
    }
}

/// The number of requests a run schedules: `round(rps × duration)`.
pub fn scheduled_requests(rps: f64, duration: Duration) -> u64 {
    (rps * duration.as_secs_f64()).round().max(0.0) as u64
}

/// Runs the load: schedules `round(rps × duration)` requests from now, waits for each to end
/// (at most the request timeout after the last is due) and returns every record.
///
/// Errors: a rate that is not positive and finite, zero connections, a path that is not a valid
/// request target.
pub async fn run(config: LoadConfig) -> Result<LoadResult, LoadError> {
    if !(config.rps.is_finite() && config.rps > 0.0) {
        return Err(LoadError::BadRate(config.rps));
    }
    if config.connections == 0 {
        return Err(LoadError::NoConnections);
    }
    if config.path.parse::<hyper::Uri>().is_err() || !config.path.starts_with('/') {
        return Err(LoadError::BadPath(config.path.clone()));
    }
    let total = scheduled_requests(config.rps, config.duration);
    let cfg = Arc::new(config);
    let start = Instant::now();
    let (tx, rx) = async_channel::unbounded::<u64>();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..cfg.connections {
        let w = Worker {
            cfg: Arc::clone(&cfg),
            start,
            conn: None,
            records: Vec::new(),
            host: cfg.target.to_string(),
        };
        workers.spawn(w.run(rx.clone()));
    }
    drop(rx);
    schedule(start, cfg.rps, total, &tx).await;
    tx.close();
    let mut records = Vec::with_capacity(total as usize);
    while let Some(r) = workers.join_next().await {
        if let Ok(mut v) = r {
            records.append(&mut v);
        }
    }
    records.sort_by_key(|r| r.index);
    summarize(records)
}

/// The histogram, achieved rate and send lag of a set of records.
///
/// Errors: [`LoadError::Histogram`] if the histogram cannot be made (not with these constant
/// bounds: 1 µs to 1 hour, 3 significant figures).
pub fn summarize(records: Vec<RequestRecord>) -> Result<LoadResult, LoadError> {
    let mut latency_us = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
        .map_err(|e| LoadError::Histogram(e.to_string()))?;
    latency_us.auto(true);
    let mut first = None::<Duration>;
    let mut last = None::<Duration>;
    let mut max_send_lag = Duration::ZERO;
    for r in &records {
        let us = r.latency().as_micros().clamp(1, u64::MAX as u128) as u64;
        let _ = latency_us.record(us);
        first = Some(first.map_or(r.sent, |f| f.min(r.sent)));
        last = Some(last.map_or(r.sent, |l| l.max(r.sent)));
        max_send_lag = max_send_lag.max(r.sent.saturating_sub(r.intended));
    }
    let achieved_rps = match (first, last) {
        (Some(f), Some(l)) if records.len() >= 2 && l > f => {
            (records.len() - 1) as f64 / (l - f).as_secs_f64()
        }
        _ => 0.0,
    };
    Ok(LoadResult {
        records,
        latency_us,
        achieved_rps,
        max_send_lag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With tokio's paused clock (no sockets involved), every request is handed out at its
    /// intended time, to the millisecond tick, at 200 and at 20,000 requests/s.
    #[tokio::test(start_paused = true)]
    async fn the_timer_dispatches_each_request_on_its_tick() {
        for rps in [200.0, 20_000.0] {
            let total = scheduled_requests(rps, Duration::from_millis(500));
            let (tx, rx) = async_channel::unbounded::<u64>();
            let start = Instant::now();
            let taker = tokio::spawn(async move {
                let mut got = Vec::new();
                while let Ok(i) = rx.recv().await {
                    got.push((i, Instant::now() - start));
                }
                got
            });
            schedule(start, rps, total, &tx).await;
            tx.close();
            let got = taker.await.expect("join");
            assert_eq!(got.len() as u64, total);
            for (n, (i, at)) in got.iter().enumerate() {
                assert_eq!(*i, n as u64, "in order");
                let due = Duration::from_secs_f64(*i as f64 / rps);
                assert!(*at >= due, "request {i} went out early: {at:?} < {due:?}");
                assert!(
                    *at - due <= Duration::from_millis(1),
                    "request {i} went out {:?} late",
                    *at - due
                );
            }
        }
    }

    #[test]
    fn the_schedule_size_is_rate_times_duration() {
        assert_eq!(scheduled_requests(200.0, Duration::from_secs(4)), 800);
        assert_eq!(
            scheduled_requests(20_000.0, Duration::from_millis(1_500)),
            30_000
        );
        assert_eq!(scheduled_requests(0.5, Duration::from_secs(3)), 2);
    }
}
