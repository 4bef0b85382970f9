//! The drill's numbers: failures by kind, latency percentiles, and the attribution of each failed
//! request to a pod (by the endpoint the proxy sent it to) and to a termination phase of that pod.
//! The shapes are those of the `drill` JSON contract (`design.md`), plus `streams` (when the drill
//! held long-lived streams) and `advice`.

use crate::load::{LoadResult, RequestOutcome, RequestRecord};
use crate::proxy::{PinnedConnection, ProxyRecord};
use crate::streams::{StreamOutcome, StreamRecord};
use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::time::Duration;

/// `failuresByKind`: failed requests per kind, as the client saw them
/// ([`RequestOutcome`](crate::load::RequestOutcome)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailuresByKind {
    /// The connect was refused (RST: the pod's port is closed) or failed otherwise.
    pub refused: u64,
    /// The connect got no answer within the request timeout (the pod's address is gone).
    pub connect_timeout: u64,
    /// The connection was closed before a full response (on a reused connection: EOF on reuse).
    pub eof: u64,
    /// Of `eof`, those on a reused keep-alive connection.
    pub eof_on_reuse: u64,
    /// The connection was reset.
    pub reset: u64,
    /// Connected, but no full response within the request timeout.
    pub timeout: u64,
    /// A 5xx answer (from an ingress, or from the app).
    pub http5xx: u64,
}

impl FailuresByKind {
    /// Counts the failures of `records` by kind.
    pub fn count(records: &[RequestRecord]) -> Self {
        let mut f = FailuresByKind::default();
        for r in records {
            f.add(r.outcome);
            if r.outcome == RequestOutcome::Eof && r.reused {
                f.eof_on_reuse += 1;
            }
        }
        f
    }

    /// Counts one request of kind `outcome` (nothing for [`RequestOutcome::Ok`]).
    pub fn add(&mut self, outcome: RequestOutcome) {
        match outcome {
            RequestOutcome::Ok => {}
            RequestOutcome::Refused => self.refused += 1,
            RequestOutcome::ConnectTimeout => self.connect_timeout += 1,
            RequestOutcome::Eof => self.eof += 1,
            RequestOutcome::Reset => self.reset += 1,
            RequestOutcome::Timeout => self.timeout += 1,
            RequestOutcome::Http5xx => self.http5xx += 1,
        }
    }

    /// All failures (`eofOnReuse` is part of `eof`).
    pub fn total(&self) -> u64 {
        self.refused + self.connect_timeout + self.eof + self.reset + self.timeout + self.http5xx
    }
}

/// `latencyMs`: percentiles of the latency from the intended send time, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LatencyMs {
    /// The median, milliseconds.
    pub p50: f64,
    /// The 99th percentile, milliseconds.
    pub p99: f64,
    /// The slowest request, milliseconds.
    pub max: f64,
}

impl LatencyMs {
    /// From a histogram of microseconds; all zero when it is empty.
    pub fn from_histogram_us(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencyMs::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        LatencyMs {
            p50: ms(h.value_at_quantile(0.50)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
        }
    }
}

/// A termination phase of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// Before the stop signal (the preStop window, or before termination started at all).
    BeforeStopSignal,
    /// From the stop signal until SIGKILL (or ever, if none came).
    AfterStopSignal,
    /// From SIGKILL on.
    AfterKill,
}

/// The termination instants of one pod, in seconds since the drill's epoch as [`Duration`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTermination {
    /// The pod's name.
    pub pod: String,
    /// When its termination started (deletion, eviction: t = 0 of its termination).
    pub started: Duration,
    /// When its stop signal was sent, if it was.
    pub stop_signal: Option<Duration>,
    /// When it was SIGKILLed, if it was.
    pub killed: Option<Duration>,
}

impl PodTermination {
    /// The pod's phase at `at`.
    pub fn phase_at(&self, at: Duration) -> Phase {
        match (self.stop_signal, self.killed) {
            (_, Some(k)) if at >= k => Phase::AfterKill,
            (Some(s), _) if at >= s => Phase::AfterStopSignal,
            _ => Phase::BeforeStopSignal,
        }
    }
}

/// `failuresByPhase`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailuresByPhase {
    /// Failures before the pod's stop signal (its preStop window, or before it terminated).
    pub before_stop_signal: u64,
    /// Failures from the stop signal until SIGKILL.
    pub after_stop_signal: u64,
    /// Failures from SIGKILL on.
    pub after_kill: u64,
}

/// One failed request, attributed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attribution {
    /// The request's schedule index.
    pub request: u64,
    /// How it failed, as the client saw it.
    pub outcome: RequestOutcome,
    /// The pod the proxy sent it to; `None` if it reached none (no endpoint, or the proxy has no
    /// record of it).
    pub pod: Option<String>,
    /// When the failure happened, since the epoch: the proxy's record end when there is one
    /// (when it saw the upstream fail), else the load's completion time.
    pub at: Duration,
    /// The pod's termination phase at `at` (before the stop signal for a pod that was not
    /// terminating).
    pub phase: Phase,
    /// The request's new connection followed a conntrack entry left by an earlier connection
    /// from the same client port (kube-proxy does not clear TCP entries; an unanswered one lives
    /// 120 s), to a pod whose address was gone: a late timeout long after the endpoint was
    /// removed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stale_conntrack: bool,
}

/// The proxy records by the request (or stream) index they carry.
pub fn by_index(proxy: &[ProxyRecord]) -> HashMap<u64, &ProxyRecord> {
    proxy
        .iter()
        .filter_map(|p| p.request.map(|r| (r, p)))
        .collect()
}

/// Attributes every failed request of `load` to a pod and a phase.
///
/// The pod is the endpoint of the proxy record with the same request index (the load sends it in
/// a header). A failed request the proxy has no record of (its connection was closed by the pod
/// as it was written) goes to the pod its connection was pinned to, found in `pinned` by the
/// request's client port ([`pinned_pod`]). The phase is that pod's phase at the failure instant;
/// a pod without a termination in `pods` counts as [`Phase::BeforeStopSignal`]. A failure that
/// reached no pod is given the phase of the pod whose termination started last before it, if
/// any.
pub fn attribute(
    load: &[RequestRecord],
    proxy: &[ProxyRecord],
    pinned: &[PinnedConnection],
    pods: &[PodTermination],
) -> Vec<Attribution> {
    let by_request = by_index(proxy);
    load.iter()
        .filter(|r| r.outcome.is_failure())
        .map(|r| {
            let (pod, at, stale) = match by_request.get(&r.index) {
                Some(p) => (p.pod.clone(), p.end, false),
                None => match pinned_connection(pinned, r) {
                    Some(c) => (Some(c.pod.clone()), r.done, follows_stale_entry(c, r)),
                    None => (None, r.done, false),
                },
            };
            let mut a = attributed(r.index, r.outcome, pod, at, pods);
            a.stale_conntrack = stale;
            a
        })
        .collect()
}

/// How much earlier than the client's connect a conntrack entry must have been made to be an
/// older connection's (the entry of a new connection is made by its first SYN, within a
/// millisecond here): 100 ms.
pub const STALE_ENTRY_BEFORE: Duration = Duration::from_millis(100);

/// `true` when `r` went out on a new connection that did not make a conntrack entry of its own
/// but followed `entry`, made by an earlier connection from the same client port.
fn follows_stale_entry(entry: &PinnedConnection, r: &RequestRecord) -> bool {
    !r.reused
        && r.connected
            .is_some_and(|c| entry.opened + STALE_ENTRY_BEFORE < c)
}

/// The pod the connection of request `r` was pinned to ([`pinned_entry`]).
pub fn pinned_pod(pinned: &[PinnedConnection], r: &RequestRecord) -> Option<String> {
    pinned_connection(pinned, r).map(|c| c.pod.clone())
}

/// The pinned connection (conntrack entry) of [`pinned_pod`].
fn pinned_connection<'a>(
    pinned: &'a [PinnedConnection],
    r: &RequestRecord,
) -> Option<&'a PinnedConnection> {
    pinned_entry(pinned, r.client_port?, r.connected, r.done)
}

/// How long after a connect starts its pinning may be recorded: 1 s. `conntrack -E` reports a
/// new entry when it reads the kernel's event, some milliseconds after the SYN (more on a
/// loaded machine), and a user-space proxy pins a connection once its upstream connect is done;
/// a refused connect is over long before either.
pub const ENTRY_WITHIN: Duration = Duration::from_secs(1);
/// The error allowed between the clocks an entry's time and a connect's are read on: 20 ms.
const CLOCK_SKEW: Duration = Duration::from_millis(20);

/// The pinning of a connection from client port `port` that started connecting at `connected`
/// (since the epoch; `None` if not known) and was last used until `done`: the first entry of
/// that port recorded from `connected` on, within [`ENTRY_WITHIN`] (the entry its own SYN made);
/// else, when its SYN made none (it followed a stale entry), or without `connected`, the entry
/// of that port made last before `done` (a port is reused only by a later connection).
pub fn pinned_entry(
    pinned: &[PinnedConnection],
    port: u16,
    connected: Option<Duration>,
    done: Duration,
) -> Option<&PinnedConnection> {
    let of_port = || pinned.iter().filter(move |c| c.client.port() == port);
    let own = connected.and_then(|at| {
        of_port()
            .filter(|c| c.opened + CLOCK_SKEW >= at && c.opened <= at + ENTRY_WITHIN)
            .min_by_key(|c| c.opened)
    });
    own.or_else(|| {
        of_port()
            .filter(|c| c.opened <= done)
            .max_by_key(|c| c.opened)
    })
}

impl FailuresByPhase {
    /// Counts attributed failures by phase.
    pub fn count(attributions: &[Attribution]) -> Self {
        let mut f = FailuresByPhase::default();
        for a in attributions {
            f.add(a.phase);
        }
        f
    }

    /// Counts one failure in `phase`.
    fn add(&mut self, phase: Phase) {
        match phase {
            Phase::BeforeStopSignal => self.before_stop_signal += 1,
            Phase::AfterStopSignal => self.after_stop_signal += 1,
            Phase::AfterKill => self.after_kill += 1,
        }
    }
}

/// `verdict`: pass means zero failed requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// No request failed.
    Pass,
    /// At least one request failed.
    Fail,
}

/// The `drill` JSON document (design.md, "Contracts").
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrillReport {
    /// What was done to the pods: `rollout`, `delete`, `evict-soft` or `evict-hard`.
    pub scenario: String,
    /// The load's rate, requests per second.
    pub rps: f64,
    /// The endpoint lag L the advice reckons with, seconds
    /// ([`LagModel::nominal`](crate::endpoints::LagModel::nominal)).
    pub endpoint_lag_seconds: f64,
    /// The drill's other settings, so that a saved report says what it measured (set by the
    /// caller; [`DrillSettings::default`] after [`DrillReport::build`]).
    #[serde(flatten)]
    pub settings: DrillSettings,
    /// Requests the load sent.
    pub requests: u64,
    /// Requests that succeeded.
    pub succeeded: u64,
    /// Requests that failed.
    pub failed: u64,
    /// The failed requests by kind.
    pub failures_by_kind: FailuresByKind,
    /// The failed requests by the termination phase of the pod they reached.
    pub failures_by_phase: FailuresByPhase,
    /// Failed requests whose new connection followed a stale conntrack entry to a pod that was
    /// gone ([`Attribution::stale_conntrack`]).
    pub stale_conntrack: u64,
    /// The failed requests per pod they reached, by phase, in pod order; failures that reached
    /// no pod under `pod: null`, last. Empty when none failed.
    pub failures_by_pod: Vec<PodFailures>,
    /// Latency percentiles from the intended send time, every request included.
    pub latency_ms: LatencyMs,
    /// The `run` report of each pod (built by the node layer).
    pub pods: Vec<serde_json::Value>,
    /// Each disrupted pod's termination against its own endpoint lag, in pod order (set by the
    /// caller; empty after [`DrillReport::build`]).
    pub terminations: Vec<TerminationFigures>,
    /// The long-lived streams, when the drill held any (`--streams`, `--idle-streams`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamSummary>,
    /// What to change, with numbers (the same lines the text summary prints).
    pub advice: Vec<String>,
    /// The findings behind the advice, as data.
    pub findings: Findings,
    /// Pass when no request failed.
    pub verdict: Verdict,
}

/// `findings` of the drill JSON: what the advice found, as data (filled by the `advice` module,
/// which reads this module's attribution; this module does not use it).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Findings {
    /// Containers that exited well before their deadline with work in flight.
    pub gave_up: Vec<GaveUpFinding>,
    /// Pods SIGKILLed at their deadline with nothing in flight.
    pub reached_sigkill_while_idle: Vec<IdleKill>,
}

/// A container that gave up: it exited `afterStopSignalSeconds` after its stop signal, of a
/// budget of `budgetSeconds`, and its exit cut requests or streams in flight.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GaveUpFinding {
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// Seconds from its stop signal to its exit.
    pub after_stop_signal_seconds: f64,
    /// The StopContainer timeout, seconds.
    pub budget_seconds: i64,
    /// Failed requests cut by the exit.
    pub requests_cut: u64,
    /// Failed data streams cut by the exit.
    pub streams_cut: u64,
    /// The longest a cut request or stream had been running, seconds.
    pub longest_running_seconds: f64,
}

/// A pod that reached SIGKILL while idle.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleKill {
    /// The pod's name.
    pub pod: String,
    /// The containers SIGKILLed (with the pod's stop, at its deadline).
    pub containers: Vec<String>,
    /// Seconds from its stop signal to SIGKILL.
    pub waited_seconds: f64,
    /// Idle streams still open on it at SIGKILL.
    pub idle_streams: u64,
}

/// `streams`: the long-lived streams of a drill. A data stream that did not end cleanly is a
/// failure; an idle stream (no data, never ends by itself) that was cut is counted in `idleCut`
/// but is not a failure: no work was lost on it (case R27).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamSummary {
    /// Streams opened (data and idle).
    pub opened: u64,
    /// Data streams that ended cleanly.
    pub completed: u64,
    /// Streams that failed: data streams by `failures_by_kind`, plus every `rejected` one.
    pub failed: u64,
    /// Streams (data or idle) answered with a status neither 2xx nor 5xx: the pods do not serve
    /// them (a 404 from an app without `/stream`). Failures.
    pub rejected: u64,
    /// Streams still open when the drill ended (not failures).
    pub unfinished: u64,
    /// Idle streams that were open and then cut (reset); not failures. An idle stream that never
    /// opened (refused, HTTP 5xx, rejected) is a failure instead.
    pub idle_cut: u64,
    /// Failed streams by kind (`timeout` is always 0: streams have no timeout; rejected ones are
    /// counted in `rejected`).
    pub failures_by_kind: FailuresByKind,
    /// Failed data streams by the phase of their pod when they failed (rejected ones left out).
    pub failures_by_phase: FailuresByPhase,
}

impl StreamSummary {
    /// Counts `records`; `attributions` are those of the failed data streams.
    pub fn build(records: &[StreamRecord], attributions: &[Attribution]) -> Self {
        let mut s = StreamSummary {
            opened: records.len() as u64,
            failures_by_phase: FailuresByPhase::count(attributions),
            ..Default::default()
        };
        for r in records {
            match (r.outcome, r.idle) {
                (StreamOutcome::Unfinished, _) => s.unfinished += 1,
                (StreamOutcome::Completed, _) => s.completed += 1,
                (StreamOutcome::Rejected, _) => s.rejected += 1,
                (StreamOutcome::Reset, true) => s.idle_cut += 1,
                (StreamOutcome::Reset, false) => s.failures_by_kind.reset += 1,
                (StreamOutcome::Refused, _) => s.failures_by_kind.refused += 1,
                (StreamOutcome::ConnectTimeout, _) => s.failures_by_kind.connect_timeout += 1,
                (StreamOutcome::Http5xx, _) => s.failures_by_kind.http5xx += 1,
            }
        }
        s.failed = s.failures_by_kind.total() + s.rejected;
        s
    }
}

/// `true` for a data stream that did not end cleanly, and for any stream that never opened
/// (refused, HTTP 5xx, rejected). An idle stream that was open and then cut is not a failure (no
/// work was on it); one still open at the end has not failed.
pub fn stream_failed(r: &StreamRecord) -> bool {
    match r.outcome {
        StreamOutcome::Completed | StreamOutcome::Unfinished => false,
        StreamOutcome::Reset => !r.idle,
        StreamOutcome::Rejected
        | StreamOutcome::Refused
        | StreamOutcome::ConnectTimeout
        | StreamOutcome::Http5xx => true,
    }
}

/// Attributes every failed data stream to its pod and to that pod's phase when the client saw
/// the stream fail. The pod is the stream proxy's record with the same index (an L7 proxy), else
/// the one its connection was pinned to, found in `pinned` by its client port ([`stream_pod`]:
/// the kernel's DNAT, or an L4 splice). Rejected streams are left out: the pods never served
/// them, whatever their phase.
pub fn attribute_streams(
    streams: &[StreamRecord],
    proxy: &[ProxyRecord],
    pinned: &[PinnedConnection],
    pods: &[PodTermination],
) -> Vec<Attribution> {
    let by_stream = by_index(proxy);
    streams
        .iter()
        .filter(|r| stream_failed(r) && r.outcome != StreamOutcome::Rejected)
        .map(|r| {
            let pod = match by_stream.get(&r.index) {
                Some(p) => p.pod.clone(),
                None => stream_pod(pinned, r),
            };
            let outcome = match r.outcome {
                StreamOutcome::Refused => RequestOutcome::Refused,
                StreamOutcome::ConnectTimeout => RequestOutcome::ConnectTimeout,
                StreamOutcome::Http5xx => RequestOutcome::Http5xx,
                _ => RequestOutcome::Reset,
            };
            attributed(r.index, outcome, pod, r.done, pods)
        })
        .collect()
}

/// The pod stream `r`'s connection was pinned to ([`pinned_entry`]); `None` without a port or
/// an entry.
pub fn stream_pod(pinned: &[PinnedConnection], r: &StreamRecord) -> Option<String> {
    pinned_entry(pinned, r.client_port?, r.connected, r.done).map(|c| c.pod.clone())
}

fn attributed(
    request: u64,
    outcome: RequestOutcome,
    pod: Option<String>,
    at: Duration,
    pods: &[PodTermination],
) -> Attribution {
    let termination = match &pod {
        Some(name) => pods.iter().find(|t| &t.pod == name),
        None => pods
            .iter()
            .filter(|t| t.started <= at)
            .max_by_key(|t| t.started),
    };
    Attribution {
        request,
        outcome,
        pod,
        at,
        phase: termination.map_or(Phase::BeforeStopSignal, |t| t.phase_at(at)),
        stale_conntrack: false,
    }
}

/// The settings of a drill that its JSON echoes beside `scenario`, `rps` and
/// `endpointLagSeconds`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrillSettings {
    /// `kube-proxy` (connections pinned) or `ingress` (each request picks an endpoint).
    pub proxy: &'static str,
    /// How kube-proxy mode ran: `netfilter` (the kernel's DNAT and conntrack) or `userspace`
    /// (the fallback: a TCP splice); `null` for an ingress.
    pub proxy_implementation: Option<&'static str>,
    /// `new-connection`, `keep-alive` or `keep-alive-careful`.
    pub client: &'static str,
    /// `fixed` (`endpointLagSeconds` after each change), `kube-proxy` (its sync, with
    /// `endpointLagSeconds` its minSyncPeriod) or `per-pod` (each pod's own lag, drawn from
    /// `endpointLagRange`; `endpointLagSeconds` its maximum).
    pub endpoint_lag_model: &'static str,
    /// `per-pod` lags: the range they are drawn from (uniform) and the seed; else `null`.
    pub endpoint_lag_range: Option<LagRangeSettings>,
    /// `http1` or `h2c`.
    pub protocol: &'static str,
    /// How long the load ran, seconds.
    pub duration_seconds: f64,
    /// Replicas before the disruption.
    pub replicas: usize,
}

/// `endpointLagRange`: `--endpoint-lag MIN..MAX` and `--seed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LagRangeSettings {
    /// The shortest lag, seconds.
    pub min_seconds: f64,
    /// The longest lag, seconds.
    pub max_seconds: f64,
    /// The seed the per-pod lags were drawn with.
    pub seed: u64,
}

/// `terminations[]`: one disrupted pod's termination measured against its own endpoint lag.
/// Every instant is in seconds after the pod's deletion (or eviction) was sent.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminationFigures {
    /// The pod's name.
    pub pod: String,
    /// The lag of its endpoint changes (`--endpoint-lag`, drawn for this pod when it is a
    /// range), seconds.
    pub endpoint_lag_seconds: f64,
    /// When its endpoint left the proxy's routes, as measured on the proxy's view; `null` if it
    /// was still routed when the drill ended.
    pub endpoint_removed_seconds: Option<f64>,
    /// When its stop signal was sent (after the preStop hook); `null` if it was not.
    pub stop_signal_seconds: Option<f64>,
    /// When the last of its containers exited: the end of its termination; `null` if none did
    /// while the drill watched.
    pub ended_seconds: Option<f64>,
    /// `endedSeconds - endpointLagSeconds`: how long the termination went on after the proxy
    /// stopped sending it new connections (negative: it ended before that, and requests sent to
    /// it in between failed).
    pub end_minus_lag_seconds: Option<f64>,
    /// Failed requests that reached it.
    pub failed: u64,
}

/// `failuresByPod[]`: the failed requests that reached one pod (or none: `pod` is `null`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodFailures {
    /// The pod's name; `None` (`null`) for failures that reached no pod.
    pub pod: Option<String>,
    /// Failed requests that reached it.
    pub failed: u64,
    /// Those failures by termination phase.
    pub failures_by_phase: FailuresByPhase,
}

impl PodFailures {
    /// Groups `attributions` by pod: pods in name order, then the failures of no pod.
    pub fn group(attributions: &[Attribution]) -> Vec<PodFailures> {
        let mut by_pod: std::collections::BTreeMap<Option<&str>, PodFailures> =
            std::collections::BTreeMap::new();
        for a in attributions {
            let f = by_pod
                .entry(a.pod.as_deref())
                .or_insert_with(|| PodFailures {
                    pod: a.pod.clone(),
                    failed: 0,
                    failures_by_phase: FailuresByPhase::default(),
                });
            f.failed += 1;
            f.failures_by_phase.add(a.phase);
        }
        let mut out: Vec<PodFailures> = by_pod.into_values().collect();
        // `None` sorts first in a BTreeMap; it goes last.
        out.sort_by_key(|p| p.pod.is_none());
        out
    }
}

impl DrillReport {
    /// Builds the report of one drill run; `streams` and `advice` are set by the caller.
    /// The verdict is pass when no request and no data stream failed.
    pub fn build(
        scenario: &str,
        rps: f64,
        endpoint_lag: Duration,
        load: &LoadResult,
        attributions: &[Attribution],
        pods: Vec<serde_json::Value>,
        streams: Option<StreamSummary>,
    ) -> Self {
        let kinds = FailuresByKind::count(&load.records);
        let failed = kinds.total();
        let requests = load.records.len() as u64;
        let streams_failed = streams.map_or(0, |s| s.failed);
        DrillReport {
            scenario: scenario.to_string(),
            rps,
            endpoint_lag_seconds: endpoint_lag.as_secs_f64(),
            settings: DrillSettings::default(),
            requests,
            succeeded: requests - failed,
            failed,
            failures_by_kind: kinds,
            failures_by_phase: FailuresByPhase::count(attributions),
            stale_conntrack: attributions.iter().filter(|a| a.stale_conntrack).count() as u64,
            failures_by_pod: PodFailures::group(attributions),
            latency_ms: LatencyMs::from_histogram_us(&load.latency_us),
            pods,
            terminations: Vec::new(),
            streams,
            advice: Vec::new(),
            findings: Findings::default(),
            verdict: if failed == 0 && streams_failed == 0 {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::ProxyOutcome;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn req(index: u64, at: u64, outcome: RequestOutcome) -> RequestRecord {
        RequestRecord {
            index,
            intended: ms(at),
            sent: ms(at),
            done: ms(at + 2),
            outcome,
            status: None,
            client_port: None,
            connected: None,
            reused: false,
            retried: false,
        }
    }

    fn prox(request: u64, end: u64, pod: Option<&str>) -> ProxyRecord {
        ProxyRecord {
            connection: 0,
            request: Some(request),
            start: ms(end - 1),
            end: ms(end),
            pod: pod.map(str::to_string),
            endpoint: None,
            outcome: ProxyOutcome::ConnectRefused,
            status: Some(502),
        }
    }

    #[test]
    fn kinds_and_phases() {
        let load = [
            req(0, 100, RequestOutcome::Ok),
            req(1, 1_100, RequestOutcome::Http5xx),
            req(2, 3_100, RequestOutcome::Reset),
            req(3, 40_000, RequestOutcome::Refused),
            req(4, 500, RequestOutcome::Timeout),
        ];
        let proxy = [
            prox(1, 1_101, Some("web-1")),
            prox(2, 3_101, Some("web-1")),
            prox(3, 40_001, Some("web-1")),
            prox(4, 502, Some("web-2")),
        ];
        let pods = [PodTermination {
            pod: "web-1".into(),
            started: ms(1_000),
            stop_signal: Some(ms(3_000)),
            killed: Some(ms(33_000)),
        }];
        let k = FailuresByKind::count(&load);
        assert_eq!((k.refused, k.reset, k.timeout, k.http5xx), (1, 1, 1, 1));
        let a = attribute(&load, &proxy, &[], &pods);
        let phases: Vec<(u64, Option<&str>, Phase)> = a
            .iter()
            .map(|a| (a.request, a.pod.as_deref(), a.phase))
            .collect();
        assert_eq!(
            phases,
            [
                (1, Some("web-1"), Phase::BeforeStopSignal),
                (2, Some("web-1"), Phase::AfterStopSignal),
                (3, Some("web-1"), Phase::AfterKill),
                (4, Some("web-2"), Phase::BeforeStopSignal),
            ]
        );
        let p = FailuresByPhase::count(&a);
        assert_eq!(
            (p.before_stop_signal, p.after_stop_signal, p.after_kill),
            (2, 1, 1)
        );
        let groups = PodFailures::group(&a);
        let by_pod: Vec<(Option<&str>, u64, u64, u64, u64)> = groups
            .iter()
            .map(|f| {
                let p = &f.failures_by_phase;
                (
                    f.pod.as_deref(),
                    f.failed,
                    p.before_stop_signal,
                    p.after_stop_signal,
                    p.after_kill,
                )
            })
            .collect();
        // The Timeout of request 4 is attributed too (to web-2, the pod its proxy record names).
        assert_eq!(
            by_pod,
            [(Some("web-1"), 3, 1, 1, 1), (Some("web-2"), 1, 1, 0, 0)]
        );
        let none = PodFailures::group(&attribute(
            &[req(5, 10, RequestOutcome::Refused)],
            &[],
            &[],
            &[],
        ));
        assert_eq!((none[0].pod.clone(), none[0].failed), (None, 1));
    }

    /// The pod closed a pinned connection just as a request was written on it: the proxy never
    /// saw the request, the client got a reset. It is the pod's failure (the connection's pod),
    /// not one that "found no endpoint"; a later connection from the same port does not count.
    #[test]
    fn a_reset_the_proxy_never_saw_goes_to_the_pod_of_its_connection() {
        let mut r = req(9, 2_000, RequestOutcome::Reset);
        r.client_port = Some(40_000);
        let pin = |port: u16, opened: u64, pod: &str| PinnedConnection {
            connection: 0,
            client: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            opened: ms(opened),
            pod: pod.into(),
        };
        let pinned = [
            pin(40_000, 100, "web-1"),
            pin(40_001, 150, "web-2"),
            pin(40_000, 5_000, "web-3"),
        ];
        let pods = [PodTermination {
            pod: "web-1".into(),
            started: ms(1_000),
            stop_signal: Some(ms(1_000)),
            killed: None,
        }];
        let a = attribute(&[r], &[], &pinned, &pods);
        assert_eq!(
            (a[0].pod.as_deref(), a[0].at, a[0].phase),
            (Some("web-1"), ms(2_002), Phase::AfterStopSignal)
        );
        // Without its port (no connection was had), it reached no pod.
        r.client_port = None;
        assert_eq!(attribute(&[r], &[], &pinned, &pods)[0].pod, None);
    }

    /// A connect refused within a millisecond is over before `conntrack -E` reports the entry
    /// its SYN made (tens of milliseconds later on a loaded machine): it is still that entry's,
    /// not "no endpoint", and not an older connection's from the same port. A connect that made
    /// no entry of its own followed the older one (a stale entry).
    #[test]
    fn a_refused_connect_goes_to_the_entry_its_syn_made_though_it_was_read_later() {
        let pin = |port: u16, opened: u64, pod: &str| PinnedConnection {
            connection: 0,
            client: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            opened: ms(opened),
            pod: pod.into(),
        };
        let pinned = [pin(42_000, 100, "web-2"), pin(42_000, 5_040, "web-1")];
        let mut r = req(3, 5_000, RequestOutcome::Refused);
        r.client_port = Some(42_000);
        r.connected = Some(ms(5_000));
        // Refused at 5002 ms; its entry was read at 5040 ms.
        let pods = [PodTermination {
            pod: "web-1".into(),
            started: ms(4_000),
            stop_signal: Some(ms(4_000)),
            killed: None,
        }];
        let a = attribute(&[r], &[], &pinned, &pods);
        assert_eq!(
            (a[0].pod.as_deref(), a[0].stale_conntrack),
            (Some("web-1"), false)
        );
        // Without an entry of its own, it followed the one of 100 ms: stale.
        let a = attribute(&[r], &[], &pinned[..1], &pods);
        assert_eq!(
            (a[0].pod.as_deref(), a[0].stale_conntrack),
            (Some("web-2"), true)
        );
    }

    /// Streams through the kernel's DNAT have no proxy record: each goes to the pod conntrack
    /// pinned its connection's client port to, and a connect timeout stays one.
    #[test]
    fn a_stream_through_l4_goes_to_the_pod_of_its_connection() {
        let stream = |index: u64, port: u16, done: u64, outcome: StreamOutcome| StreamRecord {
            index,
            slot: index as usize,
            idle: false,
            opened: ms(10),
            last_data: None,
            done: ms(done),
            chunks: 0,
            status: None,
            outcome,
            client_port: Some(port),
            connected: Some(ms(10)),
        };
        let pin = |port: u16, opened: u64, pod: &str| PinnedConnection {
            connection: 0,
            client: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            opened: ms(opened),
            pod: pod.into(),
        };
        let pinned = [
            pin(41_000, 10, "web-1"),
            pin(41_001, 10, "web-2"),
            // A later connection from the port of stream 0, after the stream ended.
            pin(41_000, 9_000, "web-2"),
        ];
        let pods = [PodTermination {
            pod: "web-1".into(),
            started: ms(1_000),
            stop_signal: Some(ms(1_000)),
            killed: None,
        }];
        let records = [
            stream(0, 41_000, 2_000, StreamOutcome::Reset),
            stream(1, 41_001, 2_100, StreamOutcome::Unfinished),
            stream(2, 41_002, 3_000, StreamOutcome::ConnectTimeout),
        ];
        let a = attribute_streams(&records, &[], &pinned, &pods);
        let got: Vec<(u64, RequestOutcome, Option<&str>, Phase)> = a
            .iter()
            .map(|a| (a.request, a.outcome, a.pod.as_deref(), a.phase))
            .collect();
        assert_eq!(
            got,
            [
                (
                    0,
                    RequestOutcome::Reset,
                    Some("web-1"),
                    Phase::AfterStopSignal
                ),
                // No entry for its port: it reached no pod (the last termination's phase).
                (
                    2,
                    RequestOutcome::ConnectTimeout,
                    None,
                    Phase::AfterStopSignal
                ),
            ]
        );
        assert_eq!(stream_pod(&pinned, &records[1]).as_deref(), Some("web-2"));
        let summary = StreamSummary::build(&records, &a);
        assert_eq!(
            (
                summary.failed,
                summary.failures_by_kind.reset,
                summary.failures_by_kind.connect_timeout,
                summary.unfinished
            ),
            (2, 1, 1, 1)
        );
    }

    #[test]
    fn a_failure_without_a_proxy_record_takes_the_latest_termination() {
        let load = [req(7, 5_000, RequestOutcome::Refused)];
        let pods = [
            PodTermination {
                pod: "a".into(),
                started: ms(1_000),
                stop_signal: Some(ms(1_000)),
                killed: None,
            },
            PodTermination {
                pod: "b".into(),
                started: ms(9_000),
                stop_signal: Some(ms(9_000)),
                killed: None,
            },
        ];
        let a = attribute(&load, &[], &[], &pods);
        assert_eq!(a.len(), 1);
        assert_eq!(
            (a[0].pod.clone(), a[0].phase),
            (None, Phase::AfterStopSignal)
        );
        assert_eq!(a[0].at, ms(5_002));
    }

    #[test]
    fn latency_percentiles_in_ms() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("bounds");
        for us in 1..=1000u64 {
            h.record(us * 1000).expect("in range");
        }
        let l = LatencyMs::from_histogram_us(&h);
        assert!((l.p50 - 500.0).abs() < 1.0, "{l:?}");
        assert!((l.p99 - 990.0).abs() < 1.0, "{l:?}");
        assert!((l.max - 1000.0).abs() < 1.0, "{l:?}");
        let empty = Histogram::<u64>::new(3).expect("sigfig");
        assert_eq!(LatencyMs::from_histogram_us(&empty), LatencyMs::default());
    }
}
