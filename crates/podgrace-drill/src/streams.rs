//! Long-lived server-streaming requests held open during a drill, as gRPC clients hold
//! server-streaming RPCs or Envoy holds an idle ext_proc stream.
//!
//! [`Streams::start`] spawns one task per *slot*: `data_streams` data slots, then `idle_streams`
//! idle slots. Each slot owns one cleartext HTTP/2 connection (prior knowledge) to the target, so
//! behind a connection-pinning proxy each stream is pinned to one pod, and keeps one stream open
//! on it at a time:
//! * a data stream is `GET {path}?seconds=S`: the server sends body chunks for `S` seconds and
//!   ends the stream;
//! * an idle stream is `GET {path}`: response headers, then nothing; it never ends by itself.
//!
//! Each stream carries its index in the header
//! [`REQUEST_ID_HEADER`](crate::load::REQUEST_ID_HEADER), so that the proxy's records can be
//! joined with these. When a stream ends, the slot opens the next one at once: on the same
//! connection if it is still usable, else on a new one (after a GOAWAY or a close, as a gRPC
//! channel reconnects). After a failure (a rejected stream included) the slot waits
//! [`RETRY_DELAY`] (100 ms) first, so that a dead endpoint, or a server that rejects every
//! stream, does not make it spin. The one timeout is the connect's
//! ([`StreamConfig::connect_timeout`]): a SYN nobody answers (a pod whose address is gone,
//! reached through a rule or a conntrack entry not yet cleaned up) fails the stream as
//! `connectTimeout`, as a gRPC channel's connect deadline would; an open stream has none (idle
//! streams are meant to stay open).
//!
//! Each record keeps the local port of its stream's connection ([`StreamRecord::client_port`]),
//! known from the moment the SYN went out, so that behind the kernel's DNAT (kube-proxy mode) the
//! stream is joined with the conntrack entry that took it to its pod.
//!
//! A stream refused by a GOAWAY is opened again on a new connection, as gRPC and Go's HTTP/2
//! client do: a server that starts a graceful shutdown sends GOAWAY(last_stream_id), and a stream
//! the client opened with a higher id was not processed and may safely go elsewhere (e.g. a stream
//! re-opened on a connection a fraction of a millisecond before its GOAWAY arrived). The case is
//! detected precisely (hyper canceled the request before sending it, or the error's source is the
//! server's GOAWAY with reason `NO_ERROR`, see [`load`](crate::load)); the slot then drops the
//! connection and sends the same stream (same index) on a new one, at most once more. The refused
//! attempt leaves no record; the stream's `opened` time stays that of the first attempt. If the
//! second attempt fails too, that outcome is recorded.
//!
//! How a stream ended ([`StreamOutcome`]): `completed` (a 2xx status, and the body ended
//! cleanly), `refused` (the connection could not be made), `connectTimeout` (its SYN got no
//! answer within the connect timeout), `reset` (the stream or its connection
//! broke before the end of the body, or the HTTP/2 handshake failed), `http5xx` (a 5xx status:
//! recorded, and the stream is ended by the client), `rejected` (any other status, e.g. 400 or
//! 404: the server does not serve this stream; recorded, and the stream is ended by the client),
//! `unfinished` (still open, or still connecting, when [`Streams::stop`] cancelled it).

use crate::load::{self, Conn, ConnectError, Protocol, RequestOutcome, REQUEST_ID_HEADER};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{Request, Uri};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How long a slot waits after a failed stream before it opens the next one (100 ms).
pub const RETRY_DELAY: Duration = Duration::from_millis(100);

/// The streams' settings.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// Where streams go: kube-proxy mode's NodePort, a proxy (an L7 one in
    /// [`Mode::H2c`](crate::proxy::Mode::H2c), or an L4 splice), or a server.
    pub target: SocketAddr,
    /// Slots whose streams carry data: `GET {path}?seconds=S` (default 0).
    pub data_streams: usize,
    /// `S`: how many seconds each data stream lasts (finite, > 0; default 60 s).
    pub stream_seconds: f64,
    /// Slots whose streams carry no data and never end by themselves: `GET {path}` (default 0).
    pub idle_streams: usize,
    /// The request path, origin-form (default `/stream`).
    pub path: String,
    /// How long a connect may wait for the answer to its SYN (default 2 s, the drill's
    /// `--timeout`).
    pub connect_timeout: Duration,
    /// The instant record times count from (the drill's t = 0).
    pub epoch: Instant,
}

impl StreamConfig {
    /// Defaults: no data streams (of 60 s each), no idle streams, path `/stream`, a 2 s connect
    /// timeout, epoch now.
    pub fn new(target: SocketAddr) -> Self {
        StreamConfig {
            target,
            data_streams: 0,
            stream_seconds: 60.0,
            idle_streams: 0,
            path: "/stream".to_string(),
            connect_timeout: Duration::from_secs(2),
            epoch: Instant::now(),
        }
    }
}

/// How one stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamOutcome {
    /// The response body ended cleanly (end of stream), with a 2xx status.
    Completed,
    /// The connection could not be made (refused or otherwise failed).
    Refused,
    /// The connect's SYN got no answer within the connect timeout (the pod's address is gone).
    ConnectTimeout,
    /// The stream or its connection broke or closed before the end of the body (or the HTTP/2
    /// handshake failed).
    Reset,
    /// A 5xx response (the client then ends the stream).
    Http5xx,
    /// A response with a status that is neither 2xx nor 5xx (a 4xx such as 400 for a bad query or
    /// 404 for an app without the path, or a 1xx/3xx): the server does not serve this stream (the
    /// client then ends it).
    Rejected,
    /// Still open (or still connecting) when [`Streams::stop`] cancelled it.
    Unfinished,
}

impl StreamOutcome {
    /// `true` for `refused`, `connectTimeout`, `reset`, `http5xx` and `rejected`; `completed`
    /// and `unfinished` are not failures.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            StreamOutcome::Refused
                | StreamOutcome::ConnectTimeout
                | StreamOutcome::Reset
                | StreamOutcome::Http5xx
                | StreamOutcome::Rejected
        )
    }
}

/// One stream; times are since the epoch.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamRecord {
    /// The stream's number, from 0, across all slots (sent as `x-podgrace-request`). The first
    /// stream of slot `k` has index `k`; later ones are numbered in the order they open.
    pub index: u64,
    /// The slot that opened it (data slots first, then idle slots).
    pub slot: usize,
    /// `true` for an idle stream (no `seconds`).
    pub idle: bool,
    /// When the stream was opened: its request sent, or, when the slot needed a new connection,
    /// the connect started (for a stream sent again after a GOAWAY refused it: its first attempt).
    pub opened: Duration,
    /// When the last body chunk (HTTP/2 DATA frame) arrived; `None` if none did.
    pub last_data: Option<Duration>,
    /// When it ended, failed or was cancelled.
    pub done: Duration,
    /// Body chunks (HTTP/2 DATA frames) received.
    pub chunks: u64,
    /// The response status, if the response head arrived.
    pub status: Option<u16>,
    /// How it ended.
    pub outcome: StreamOutcome,
    /// The local port of the connection it went out on (its connect's, if it got no further);
    /// `None` if no socket could be had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_port: Option<u16>,
    /// When that connection started connecting, since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connected: Option<Duration>,
}

/// Errors of [`Streams::start`].
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StreamError {
    /// The length of data streams is not a positive, finite number of seconds.
    #[error("data streams need a positive, finite number of seconds, not {0}")]
    BadSeconds(f64),
    /// The path is not a valid origin-form request target.
    #[error("the path {0:?} is not a valid origin-form request target")]
    BadPath(String),
    /// Not called from within a tokio runtime.
    #[error("the streams must be started from within a tokio runtime")]
    NoRuntime,
}

/// Streams held open until [`Streams::stop`]. Dropping it without `stop` cancels them too (the
/// records are then lost).
pub struct Streams {
    stop: watch::Sender<bool>,
    slots: JoinSet<Vec<StreamRecord>>,
}

impl Streams {
    /// Starts one task per slot (`data_streams + idle_streams`), each opening its first stream at
    /// once. Must be called within a tokio runtime.
    ///
    /// Errors: [`StreamError::BadSeconds`] when there are data streams and `stream_seconds` is
    /// not finite and positive; [`StreamError::BadPath`] when `path` is not a valid origin-form
    /// target (or the data query cannot be added to it); [`StreamError::NoRuntime`] outside a
    /// tokio runtime.
    pub fn start(config: StreamConfig) -> Result<Streams, StreamError> {
        if config.data_streams > 0
            && !(config.stream_seconds.is_finite() && config.stream_seconds > 0.0)
        {
            return Err(StreamError::BadSeconds(config.stream_seconds));
        }
        let bad_path = || StreamError::BadPath(config.path.clone());
        if !load::is_origin_form(&config.path) {
            return Err(bad_path());
        }
        let sep = if config.path.contains('?') { '&' } else { '?' };
        let data_path = format!("{}{sep}seconds={}", config.path, config.stream_seconds);
        let data_uri =
            load::request_uri(Protocol::H2c, config.target, &data_path).map_err(|_| bad_path())?;
        let idle_uri = load::request_uri(Protocol::H2c, config.target, &config.path)
            .map_err(|_| bad_path())?;
        let handle = tokio::runtime::Handle::try_current().map_err(|_| StreamError::NoRuntime)?;
        let total = config.data_streams + config.idle_streams;
        let shared = Arc::new(Shared {
            target: config.target,
            connect_timeout: config.connect_timeout,
            epoch: config.epoch,
            next_index: AtomicU64::new(total as u64),
        });
        let (stop, stop_rx) = watch::channel(false);
        let mut slots = JoinSet::new();
        for slot in 0..total {
            let idle = slot >= config.data_streams;
            let s = Slot {
                shared: Arc::clone(&shared),
                slot,
                idle,
                uri: if idle {
                    idle_uri.clone()
                } else {
                    data_uri.clone()
                },
                conn: None,
                records: Vec::new(),
            };
            slots.spawn_on(s.run(stop_rx.clone()), &handle);
        }
        Ok(Streams { stop, slots })
    }

    /// Stops opening new streams, cancels the open ones (recorded
    /// [`StreamOutcome::Unfinished`], done now), and returns every record, sorted by index.
    pub async fn stop(mut self) -> Vec<StreamRecord> {
        let _ = self.stop.send(true);
        let mut records = Vec::new();
        while let Some(r) = self.slots.join_next().await {
            if let Ok(mut v) = r {
                records.append(&mut v);
            }
        }
        records.sort_by_key(|r| r.index);
        records
    }
}

/// State shared by the slots.
struct Shared {
    target: SocketAddr,
    connect_timeout: Duration,
    epoch: Instant,
    /// The index of the next stream opened after each slot's first.
    next_index: AtomicU64,
}

/// One slot: one connection, one stream at a time.
struct Slot {
    shared: Arc<Shared>,
    slot: usize,
    idle: bool,
    uri: Uri,
    conn: Option<Conn>,
    records: Vec<StreamRecord>,
}

impl Slot {
    fn since(&self, t: Instant) -> Duration {
        t.saturating_duration_since(self.shared.epoch)
    }

    /// Opens streams one after the other until `stop` turns true (or its sender is dropped).
    async fn run(mut self, mut stop: watch::Receiver<bool>) -> Vec<StreamRecord> {
        let mut index = self.slot as u64;
        loop {
            let mut rec = StreamRecord {
                index,
                slot: self.slot,
                idle: self.idle,
                opened: self.since(Instant::now()),
                last_data: None,
                done: Duration::ZERO,
                chunks: 0,
                status: None,
                outcome: StreamOutcome::Unfinished,
                client_port: None,
                connected: None,
            };
            let stopped = {
                let stream = self.stream(&mut rec);
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => true,
                    outcome = stream => {
                        rec.outcome = outcome;
                        false
                    }
                }
            };
            rec.done = self.since(Instant::now());
            let failed = rec.outcome.is_failure();
            self.records.push(rec);
            if stopped {
                break;
            }
            if failed {
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => break,
                    _ = tokio::time::sleep(RETRY_DELAY) => {}
                }
            }
            index = self.shared.next_index.fetch_add(1, Ordering::Relaxed);
        }
        self.records
    }

    /// One stream, on the slot's connection if it is still usable, else on a new one; once more on
    /// a new connection if a GOAWAY refused it ([`load::refused_by_goaway`]). Fills in the status,
    /// chunks and last data time of `rec` as they happen (so that a cancelled stream keeps them),
    /// and returns how the stream ended.
    async fn stream(&mut self, rec: &mut StreamRecord) -> StreamOutcome {
        let mut retried = false;
        let epoch = self.shared.epoch;
        let resp = loop {
            if !self.conn.as_mut().is_some_and(Conn::usable) {
                self.conn = None;
                let (port, pending) = match load::start_connect(self.shared.target) {
                    Ok(started) => started,
                    Err(_) => return StreamOutcome::Refused,
                };
                rec.client_port = Some(port);
                rec.connected = Some(self.since(Instant::now()));
                let handshake = Conn::handshake(pending, Protocol::H2c, false);
                match tokio::time::timeout(self.shared.connect_timeout, handshake).await {
                    Err(_) => return StreamOutcome::ConnectTimeout,
                    Ok(Ok(c)) => self.conn = Some(c),
                    Ok(Err(ConnectError::Connect(RequestOutcome::ConnectTimeout))) => {
                        return StreamOutcome::ConnectTimeout
                    }
                    Ok(Err(ConnectError::Connect(_))) => return StreamOutcome::Refused,
                    Ok(Err(ConnectError::Handshake)) => return StreamOutcome::Reset,
                }
            }
            let Some(c) = self.conn.as_mut() else {
                return StreamOutcome::Refused;
            };
            rec.client_port = c.local_port();
            rec.connected = Some(c.opened.saturating_duration_since(epoch));
            let Ok(req) = Request::get(self.uri.clone())
                .header(REQUEST_ID_HEADER, rec.index)
                .body(Empty::<Bytes>::new())
            else {
                return StreamOutcome::Refused;
            };
            match c.request(req).await {
                Ok(resp) => break resp,
                Err(e) if !retried && load::refused_by_goaway(&e) => {
                    // Not processed by the server: send it again on a new connection.
                    self.conn = None;
                    retried = true;
                }
                Err(_) => return StreamOutcome::Reset,
            }
        };
        let epoch = self.shared.epoch;
        let Some(c) = self.conn.as_mut() else {
            return StreamOutcome::Reset;
        };
        let status = resp.status();
        rec.status = Some(status.as_u16());
        // Dropping the body of a stream the client ends resets it (RST_STREAM CANCEL).
        if status.is_server_error() {
            return StreamOutcome::Http5xx;
        }
        if !status.is_success() {
            return StreamOutcome::Rejected;
        }
        let mut body = resp.into_body();
        loop {
            match c.drive(body.frame()).await {
                None => return StreamOutcome::Completed,
                Some(Err(_)) => return StreamOutcome::Reset,
                Some(Ok(frame)) => {
                    if frame.is_data() {
                        rec.chunks += 1;
                        rec.last_data = Some(Instant::now().saturating_duration_since(epoch));
                    }
                }
            }
        }
    }
}
