//! What a drill tells its user to change, with the numbers that show it, and what it warns
//! about (shutdowns the load did not see, SIGKILLs at the deadline).
//!
//! Each line names the setting and the measured numbers behind it:
//! * failures after the stop signal while the proxy still routed to the pod: a preStop sleep of
//!   at least the endpoint lag (the endpoint race, field cases R01–R25);
//! * failures at a container's own exit, well before its deadline: the container **gave up**,
//!   cutting requests or streams in flight: a drain that ends too soon (an istio-style sidecar's
//!   5 s `terminationDrainDuration` under 20 s requests, R22; a gRPC server force-stopped 1 s
//!   after SIGTERM with 120 s of grace, R26);
//! * a pod SIGKILLed at its deadline that served nothing in its last grace period: it **reached
//!   SIGKILL while idle**, typically because an idle stream kept a graceful stop without a
//!   deadline waiting (gRPC `GracefulStop()`, R27);
//! * failures after SIGKILL, failures before the stop signal, requests that found no endpoint.
//!
//! It reads the report's attribution ([`crate::report`]) and fills the report's [`Findings`];
//! the report does not depend on it (the caller puts the [`Diagnosis`] into the report).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use podgrace_core::plan::PodPlan;

use crate::load::{RequestOutcome, RequestRecord};
use crate::report::{Attribution, Findings, GaveUpFinding, IdleKill, Phase, PodTermination};
use crate::streams::{StreamOutcome, StreamRecord};

/// One container's stop, in times since the drill's epoch (measured by the runtime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStop {
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// When its stop signal was sent.
    pub stop_signal: Option<Duration>,
    /// When it was SIGKILLed.
    pub killed: Option<Duration>,
    /// When it exited.
    pub exited: Option<Duration>,
    /// The StopContainer timeout: seconds from the stop signal to SIGKILL.
    pub budget_seconds: i64,
}

impl ContainerStop {
    /// When SIGKILL was due: the stop signal plus the budget.
    pub fn deadline(&self) -> Option<Duration> {
        self.stop_signal
            .map(|s| s + Duration::from_secs(self.budget_seconds.max(0) as u64))
    }

    /// The container exited by itself at least [`GAVE_UP_AFTER`] after its stop signal and at
    /// least [`GAVE_UP_BEFORE`] before its deadline: its own shutdown ended, not the kubelet.
    fn gave_up_at(&self) -> Option<Duration> {
        let (s, e, d) = (self.stop_signal?, self.exited?, self.deadline()?);
        (self.killed.is_none() && e >= s + GAVE_UP_AFTER && e + GAVE_UP_BEFORE <= d).then_some(e)
    }
}

/// A container that exits sooner than this after its stop signal is an app that exits on the
/// signal (the endpoint race), not one whose drain ended: 0.5 s.
pub const GAVE_UP_AFTER: Duration = Duration::from_millis(500);
/// A container that exits later than this before its deadline is taken as SIGKILL-bound, not as
/// one that gave up: 1 s.
pub const GAVE_UP_BEFORE: Duration = Duration::from_secs(1);
/// A failure this close to a container's exit (0.5 s before to 0.25 s after, measured where the
/// failure was seen) was cut by that exit.
const CUT_BEFORE: Duration = Duration::from_millis(500);
const CUT_AFTER: Duration = Duration::from_millis(250);

/// Everything the advice looks at.
pub struct Inputs<'a> {
    /// The failed requests, attributed.
    pub requests: &'a [Attribution],
    /// The failed data streams, attributed.
    pub streams: &'a [Attribution],
    /// Every request and the pod the proxy sent it to (by request index).
    pub request_records: &'a [RequestRecord],
    /// The pod each request went to, by request index.
    pub request_pods: &'a HashMap<u64, String>,
    /// Every stream and the pod its connection was pinned to (by stream index).
    pub stream_records: &'a [StreamRecord],
    /// The pod each stream's connection was pinned to, by stream index.
    pub stream_pods: &'a HashMap<u64, String>,
    /// The disrupted pods.
    pub terminations: &'a [PodTermination],
    /// Their containers' stops.
    pub containers: &'a [ContainerStop],
    /// The endpoint lag L the drill ran with.
    pub endpoint_lag: Duration,
    /// What the load's client does with its connections, and how many it pools.
    pub client: crate::load::ClientKind,
    /// The connections the load's client pools.
    pub connections: usize,
    /// When each disrupted pod's endpoint left the proxy's routes, since the epoch (measured).
    pub removed: &'a [(String, Duration)],
    /// Since the epoch: when the load's schedule started.
    pub load_start: Duration,
    /// Since the epoch: when the load's schedule ended.
    pub load_end: Duration,
    /// The port the load went to.
    pub port: u16,
    /// The load's per-request timeout.
    pub timeout: Duration,
    /// The pod template's plan (its containers' preStop hooks and grace).
    pub template: &'a PodPlan,
    /// When each pod's endpoint reached the proxy as ready (empty: not known, the check of
    /// failures with no live pod routable is skipped).
    pub routable: &'a [Routable],
}

/// A pod and, since the epoch, when its ready endpoint reached the proxy: at once for the
/// pods that were ready before the load, a lag after Ready for the pods a rollout adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routable {
    /// The pod's name.
    pub pod: String,
    /// Since the epoch: when its ready endpoint reached the proxy.
    pub since: Duration,
}

/// The advice lines (what to change, then warnings) and the findings behind them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnosis {
    /// What to change, then warnings, one line each (the text summary's lines).
    pub advice: Vec<String>,
    /// The same, as data.
    pub findings: Findings,
}

/// Everything a drill has to say about its pods' terminations.
pub fn diagnose(inp: &Inputs) -> Diagnosis {
    let mut d = Diagnosis::default();
    d.advice = advice(inp, &mut d.findings);
    let warnings = coverage(inp, &mut d.findings);
    d.advice.extend(warnings);
    d
}

/// What a preStop needs beyond the endpoint lag: 1 s. A preStop of exactly the lag still races
/// the removal (the drill measured 2 and 1 failed of 1,600 requests with a 1 s preStop against a
/// 1 s lag: the stop signal and the removal land within the same few milliseconds, give or take
/// the scheduling of both), and kube-proxy applies a removal up to its minSyncPeriod (1 s) late
/// when its sync slots are used up (recorded: 906–1077 ms for 10 of 12 pods). The lag plus 1 s
/// is what the built-in fix waits, and what lost nothing in the drill's tests and on the real
/// kube-proxy (a 2 s preStop against its ~1 s lag: 0 of 2,800 in 3 rollouts).
pub const RACE_MARGIN_SECONDS: i64 =
    podgrace_core::rules::endpoints::ENDPOINT_RACE_MARGIN_SECONDS as i64;

/// The preStop sleep the race advice proposes for an endpoint lag of `lag` seconds: the lag
/// rounded up, plus [`RACE_MARGIN_SECONDS`].
pub fn pre_stop_for_lag(lag: f64) -> i64 {
    (lag.ceil() as i64).max(0) + RACE_MARGIN_SECONDS
}

/// The advice for requests and streams that reached `pod` after its stop signal while the proxy
/// still routed to it (`raced`, already counted in words). `lag` and `pre_stop` in seconds.
///
/// A preStop shorter than the lag plus the margin gets "at least ⌈lag⌉ + 1 s" and why; one
/// already that long still raced it (a removal later than the lag says): a whole second more
/// than it waits now.
fn race_line(lag: f64, pre_stop: f64, raced: &str, pod: &str) -> String {
    let need = pre_stop_for_lag(lag);
    let tail = format!(
        "{raced} reached pod {pod} after its stop signal, while the proxy still sent it traffic; the app must also keep serving until it has drained"
    );
    if pre_stop < need as f64 {
        format!(
            "add a preStop sleep of at least {need} s, the endpoint lag plus {RACE_MARGIN_SECONDS} s (the endpoint lag is {lag:.1} s; the preStop now waits {pre_stop:.1} s; a preStop of just the lag still races the removal, and kube-proxy applies a removal up to its minSyncPeriod, 1 s, late): {tail}"
        )
    } else {
        let need = pre_stop.floor() as i64 + 1;
        format!(
            "make the preStop sleep longer than the endpoint lag, at least {need} s (it waits {pre_stop:.1} s and the endpoint lag is {lag:.1} s, so the stop signal and the endpoint removal race): {tail}"
        )
    }
}

/// Requests that failed after their pod's stop signal while no other live pod was routable:
/// the rollout deleted an old pod before its replacement's endpoint had reached the proxy (a
/// new pod joins a lag after it is Ready, as a leaving one stays a lag after it is deleted).
/// A pod counts as live until its stop signal; as routable from its [`Routable::since`] until
/// a lag after its termination started. The Deployment controller deletes the old pod once the
/// new one is available, Ready for `minReadySeconds` (`deployment/util`
/// `IsPodAvailable`), so a `minReadySeconds` of at least the lag keeps a replacement routable
/// before its predecessor goes.
fn no_live_endpoint(inp: &Inputs) -> Option<String> {
    if inp.routable.is_empty() {
        return None;
    }
    let lag = inp.endpoint_lag;
    let termination = |pod: &str| inp.terminations.iter().find(|t| t.pod == pod);
    let live = |pod: &str, at: Duration| {
        termination(pod)
            .and_then(|t| t.stop_signal)
            .is_none_or(|s| s > at)
    };
    let routed = |r: &Routable, at: Duration| {
        r.since <= at && termination(&r.pod).is_none_or(|t| t.started + lag > at)
    };
    // Routing is decided when the request goes out (its connect), not when it fails: a connect
    // to a gone pod fails only at its timeout.
    let sent: HashMap<u64, Duration> = inp
        .request_records
        .iter()
        .map(|r| (r.index, r.sent))
        .collect();
    let stranded = inp
        .requests
        .iter()
        .filter(|a| a.phase == Phase::AfterStopSignal)
        .filter(|a| {
            let at = sent.get(&a.request).copied().unwrap_or(a.at);
            !inp.routable.iter().any(|r| {
                a.pod.as_deref() != Some(r.pod.as_str()) && routed(r, at) && live(&r.pod, at)
            })
        })
        .count();
    if stranded == 0 {
        return None;
    }
    let need = (lag.as_secs_f64().ceil() as i64).max(1);
    Some(format!(
        "{} while no live pod was routable: the rollout deleted old pods before their replacements' endpoints reached the proxy (a new pod joins {:.1} s after it is Ready); set the Deployment's minReadySeconds to at least {need} s (it is {}), so that an old pod goes only once its replacement is routable",
        counted(stranded, "request failed", "requests failed"),
        lag.as_secs_f64(),
        inp.template.min_ready_seconds
    ))
}

/// The advice for the race when the termination's grace period cut the preStop short (a hard
/// eviction's 1 s, a forced delete): a longer preStop cannot help, the grace is the limit.
/// Seconds throughout.
fn cut_short_line(lag: f64, pre_stop: f64, waited: f64, raced: &str, pod: &str) -> String {
    format!(
        "{raced} reached pod {pod} after its stop signal, while the proxy still sent it traffic (endpoint lag {lag:.1} s): its preStop of {pre_stop:.1} s was cut after {waited:.1} s by this termination's grace period, so a longer preStop cannot help; the grace is the limit (a hard eviction gives 1 s: set resource requests and limits so the pod is not evicted that way, or use soft eviction thresholds with an evictionMaxPodGracePeriod of at least the preStop plus the drain time)"
    )
}

/// The advice lines of a drill, most specific first for each pod.
fn advice(inp: &Inputs, findings: &mut Findings) -> Vec<String> {
    let mut out = Vec::new();
    let lag = inp.endpoint_lag.as_secs_f64();
    let pre_stop = inp
        .template
        .containers
        .iter()
        .chain(inp.template.init_containers.iter())
        .filter_map(|c| c.pre_stop.as_ref().and_then(|h| h.known_duration_ms()))
        .max()
        .unwrap_or(0) as f64
        / 1000.0;
    let tgps = inp.template.termination_grace_period_seconds;
    let by_index: HashMap<u64, &RequestRecord> =
        inp.request_records.iter().map(|r| (r.index, r)).collect();
    let record = |i: u64| by_index.get(&i).copied();
    for t in inp.terminations {
        let (gave_up, claimed) = gave_up(inp, &t.pod);
        for g in &gave_up {
            out.push(g.line(tgps, pre_stop));
            findings.gave_up.push(g.finding());
        }
        let on_pod = |a: &&Attribution| a.pod.as_deref() == Some(t.pod.as_str());
        let requests = |phase: Phase| {
            inp.requests
                .iter()
                .filter(on_pod)
                .filter(|a| a.phase == phase && !claimed.contains(&(false, a.request)))
                .count()
        };
        let streams = |phase: Phase, cut: bool| {
            inp.streams
                .iter()
                .filter(on_pod)
                .filter(|a| a.phase == phase && !claimed.contains(&(true, a.request)))
                .filter(|a| (a.outcome == RequestOutcome::Reset) == cut)
                .count()
        };
        let both = |phase: Phase| {
            work(
                requests(phase),
                streams(phase, true) + streams(phase, false),
            )
        };
        // Requests on keep-alive connections the pod closed as it exited: conntrack kept them on
        // the pod; a preStop does not help them, the app's drain and the client's handling do.
        let on_reuse: Vec<&Attribution> = inp
            .requests
            .iter()
            .filter(on_pod)
            .filter(|a| a.phase == Phase::AfterStopSignal && !claimed.contains(&(false, a.request)))
            .filter(|a| {
                matches!(a.outcome, RequestOutcome::Eof | RequestOutcome::Reset)
                    && record(a.request).is_some_and(|r| r.reused)
            })
            .collect();
        if !on_reuse.is_empty() {
            out.push(keep_alive_line(inp, &on_reuse, &t.pod, pre_stop));
        }
        // New requests and streams that reached the pod after its stop signal: the race.
        let raced = work(
            requests(Phase::AfterStopSignal) - on_reuse.len(),
            streams(Phase::AfterStopSignal, false),
        );
        if !raced.is_empty() {
            // What the preStop really waited: from the termination's start to the stop signal.
            let waited = t
                .stop_signal
                .map_or(pre_stop, |s| s.saturating_sub(t.started).as_secs_f64());
            out.push(if pre_stop - waited > 0.5 {
                cut_short_line(lag, pre_stop, waited, &raced, &t.pod)
            } else {
                race_line(lag, waited, &raced, &t.pod)
            });
        }
        let cut = streams(Phase::AfterStopSignal, true);
        if cut > 0 {
            out.push(format!(
                "{} to pod {} {} cut after its stop signal: the app stopped with {} open; on SIGTERM let it finish open streams and tell clients to move on (HTTP/2 GOAWAY), with a deadline below terminationGracePeriodSeconds ({tgps} s) − preStop",
                counted(cut, "stream", "streams"),
                t.pod,
                if cut == 1 { "was" } else { "were" },
                if cut == 1 { "it" } else { "them" },
            ));
        }
        let after_kill = both(Phase::AfterKill);
        if !after_kill.is_empty() {
            out.push(format!(
                "{after_kill} to pod {} failed after SIGKILL: raise terminationGracePeriodSeconds ({tgps} s now) above preStop + drain, or make the app finish sooner after its stop signal",
                t.pod
            ));
        }
        let before = both(Phase::BeforeStopSignal);
        if !before.is_empty() {
            out.push(format!(
                "{before} to pod {} failed before its stop signal: the app stopped serving during the preStop (check that the hook does not stop it, and that it stays ready)",
                t.pod
            ));
        }
    }
    let served = inp
        .stream_records
        .iter()
        .filter(|r| r.chunks > 0 || r.status.is_some_and(|s| (200..300).contains(&s)))
        .count();
    let streams_failed = inp
        .stream_records
        .iter()
        .filter(|r| crate::report::stream_failed(r))
        .count();
    if served == 0 && streams_failed > 0 {
        out.insert(
            0,
            format!(
                "no stream was served at all ({} failed): the pods must answer GET /stream?seconds=S over cleartext HTTP/2 (h2c, prior knowledge) on port {}, as the demo app does",
                counted(streams_failed, "stream", "streams"),
                inp.port
            ),
        );
    }
    let succeeded = inp
        .request_records
        .iter()
        .filter(|r| !r.outcome.is_failure())
        .count();
    if succeeded == 0 && !inp.request_records.is_empty() {
        out.insert(
            0,
            format!(
                "no request succeeded at all ({} failed): is the app serving HTTP on port {} (--port; default the first containerPort, else the readiness probe's), and does it start?",
                counted(inp.request_records.len(), "request", "requests"),
                inp.port
            ),
        );
    }
    let rejected = inp
        .stream_records
        .iter()
        .filter(|r| r.outcome == StreamOutcome::Rejected)
        .count();
    if rejected > 0 {
        let status = inp
            .stream_records
            .iter()
            .find(|r| r.outcome == StreamOutcome::Rejected)
            .and_then(|r| r.status)
            .map_or(String::new(), |s| format!(" (HTTP {s})"));
        out.push(format!(
            "{} rejected{status}: the pods do not serve GET /stream?seconds=S (the demo app does); --streams and --idle-streams need such an endpoint",
            counted(rejected, "stream was", "streams were")
        ));
    }
    // A timeout on a pod that had stopped is the pod going away, not a slow app.
    let gone = |a: &Attribution| {
        a.pod.as_deref().is_some_and(|p| {
            inp.terminations
                .iter()
                .any(|t| t.pod == p && t.stop_signal.is_some_and(|s| s <= a.at))
        })
    };
    let timeouts = inp
        .requests
        .iter()
        .filter(|a| a.outcome == RequestOutcome::Timeout && !gone(a))
        .count();
    let stale: Vec<&Attribution> = inp.requests.iter().filter(|a| a.stale_conntrack).collect();
    if !stale.is_empty() {
        let pods: std::collections::BTreeSet<&str> =
            stale.iter().filter_map(|a| a.pod.as_deref()).collect();
        let removed_before = stale
            .iter()
            .filter_map(|a| {
                let gone_at = inp
                    .removed
                    .iter()
                    .find(|(p, _)| Some(p.as_str()) == a.pod.as_deref())?
                    .1;
                Some(a.at.saturating_sub(gone_at).as_secs_f64())
            })
            .fold(0.0_f64, f64::max);
        out.push(format!(
            "{} followed a stale conntrack entry to {} after its endpoint was removed (up to {removed_before:.1} s later): kube-proxy does not clear TCP conntrack entries, an unanswered one lives 120 s, and a new connection from the same client port follows it to the dead pod; they come from connections to the pod that went unanswered once its address was gone, which a preStop longer than the endpoint lag prevents (the pod still answers until it is out of the rules)",
            counted(stale.len(), "new connection", "new connections"),
            pods.iter().map(|p| format!("pod {p}")).collect::<Vec<_>>().join(", ")
        ));
    }
    if timeouts > 0 {
        out.push(format!(
            "{} timed out: no full response within --timeout {:.1} s; if the app is that slow on purpose, raise --timeout above its longest request",
            counted(timeouts, "request", "requests"),
            inp.timeout.as_secs_f64()
        ));
    }
    let unrouted = work(
        inp.requests
            .iter()
            .filter(|a| a.pod.is_none() && a.outcome != RequestOutcome::Timeout)
            .count(),
        inp.streams.iter().filter(|a| a.pod.is_none()).count(),
    );
    if !unrouted.is_empty() {
        out.push(format!(
            "{unrouted} found no endpoint: keep more replicas ready during the disruption (maxUnavailable 0, a readiness probe that passes)"
        ));
    }
    out.extend(no_live_endpoint(inp));
    out
}

/// The advice for requests that failed on reused keep-alive connections when pod `pod` closed
/// them (EOF or reset on reuse), with the drill's numbers: how many connections, and what the
/// preStop did not change.
fn keep_alive_line(inp: &Inputs, failed: &[&Attribution], pod: &str, pre_stop: f64) -> String {
    let ports: HashSet<u16> = failed
        .iter()
        .filter_map(|a| {
            inp.request_records
                .iter()
                .find(|r| r.index == a.request)
                .and_then(|r| r.client_port)
        })
        .collect();
    let eof = failed
        .iter()
        .filter(|a| a.outcome == RequestOutcome::Eof)
        .count();
    let client = match inp.client {
        crate::load::ClientKind::KeepAlive => "this client writes its next request into a connection without checking whether the server closed it (--client keep-alive)",
        _ => "the close crossed a request on its way",
    };
    let pre_stop_note = if pre_stop > 0.0 {
        format!(" a preStop sleep ({pre_stop:.0} s here) does not save them: conntrack keeps each connection on its pod for its lifetime, so the pod kept answering them through the preStop and they failed when the app closed them at its exit;")
    } else {
        " conntrack keeps each connection on its pod, so they reached it until the app closed them;"
            .to_string()
    };
    format!(
        "{} to pod {pod} failed on reused keep-alive connections the app closed ({eof} EOF on reuse, {} reset; {} of {} connections):{pre_stop_note} {client}; let the app drain before it exits (answer with Connection: close, or close idle connections, during the preStop or after SIGTERM, and exit only once they are closed), and let the client drop connections the server closed before reusing them (urllib3, Go's net/http do: --client keep-alive-careful) or retry idempotent requests on a new connection",
        counted(failed.len(), "request", "requests"),
        failed.len() - eof,
        ports.len(),
        inp.connections,
    )
}

/// `3 requests`, `1 stream`, `3 requests and 1 stream`; empty for none.
fn work(requests: usize, streams: usize) -> String {
    let mut parts = Vec::new();
    if requests > 0 {
        parts.push(counted(requests, "request", "requests"));
    }
    if streams > 0 {
        parts.push(counted(streams, "stream", "streams"));
    }
    parts.join(" and ")
}

/// A container that gave up with work in flight.
struct GaveUp<'a> {
    stop: &'a ContainerStop,
    at: Duration,
    requests: usize,
    streams: usize,
    /// The longest a cut request or stream had been running, seconds.
    longest: f64,
}

impl GaveUp<'_> {
    fn after_stop_signal(&self) -> f64 {
        self.at
            .saturating_sub(self.stop.stop_signal.unwrap_or_default())
            .as_secs_f64()
    }

    fn finding(&self) -> GaveUpFinding {
        GaveUpFinding {
            pod: self.stop.pod.clone(),
            container: self.stop.container.clone(),
            after_stop_signal_seconds: self.after_stop_signal(),
            budget_seconds: self.stop.budget_seconds,
            requests_cut: self.requests as u64,
            streams_cut: self.streams as u64,
            longest_running_seconds: self.longest,
        }
    }

    fn line(&self, tgps: i64, pre_stop: f64) -> String {
        let s = self.stop;
        let after = self.after_stop_signal();
        let left = s
            .deadline()
            .unwrap_or_default()
            .saturating_sub(self.at)
            .as_secs_f64();
        let room = (tgps as f64 - pre_stop - 2.0).max(1.0);
        format!(
            "container {} of pod {} gave up at {after:.1} s of its {} s budget: it exited {after:.1} s after its stop signal, {left:.1} s before SIGKILL was due, and cut {} in flight (the longest had run {:.1} s); let its drain or graceful stop last as long as the longest request or stream, up to terminationGracePeriodSeconds − preStop − a margin (about {room:.0} s here), and tell clients to reconnect (HTTP/2 GOAWAY, Connection: close)",
            s.container,
            s.pod,
            s.budget_seconds,
            work(self.requests, self.streams),
            self.longest
        )
    }
}

/// The containers of `pod` that gave up, each with the failures its exit cut, and those failures
/// (`(is a stream, index)`).
fn gave_up<'a>(inp: &'a Inputs, pod: &str) -> (Vec<GaveUp<'a>>, HashSet<(bool, u64)>) {
    let candidates: Vec<(&ContainerStop, Duration)> = inp
        .containers
        .iter()
        .filter(|c| c.pod == pod)
        .filter_map(|c| c.gave_up_at().map(|at| (c, at)))
        .collect();
    let mut found: Vec<GaveUp> = Vec::new();
    let mut claimed = HashSet::new();
    // The container whose exit is the earliest within the window cut the failure.
    let cutter = |at: Duration| {
        candidates
            .iter()
            .filter(|(_, e)| *e <= at + CUT_AFTER && at <= *e + CUT_BEFORE)
            .min_by_key(|(_, e)| *e)
            .copied()
    };
    let mut claim = |index: u64, at: Duration, started: Duration, stream: bool| {
        let Some((c, e)) = cutter(at) else { return };
        claimed.insert((stream, index));
        let running = at.saturating_sub(started).as_secs_f64();
        let g = match found.iter_mut().position(|g| std::ptr::eq(g.stop, c)) {
            Some(i) => &mut found[i],
            None => {
                found.push(GaveUp {
                    stop: c,
                    at: e,
                    requests: 0,
                    streams: 0,
                    longest: 0.0,
                });
                let last = found.len() - 1;
                &mut found[last]
            }
        };
        if stream {
            g.streams += 1;
        } else {
            g.requests += 1;
        }
        g.longest = g.longest.max(running);
    };
    let sent: HashMap<u64, Duration> = inp
        .request_records
        .iter()
        .map(|r| (r.index, r.sent))
        .collect();
    let opened: HashMap<u64, Duration> = inp
        .stream_records
        .iter()
        .map(|r| (r.index, r.opened))
        .collect();
    for (failures, began, stream) in [(inp.requests, &sent, false), (inp.streams, &opened, true)] {
        for a in failures {
            if a.pod.as_deref() == Some(pod) && a.phase == Phase::AfterStopSignal {
                let started = began.get(&a.request).copied().unwrap_or(a.at);
                claim(a.request, a.at, started, stream);
            }
        }
    }
    (found, claimed)
}

/// Warnings about what the drill did not see or what ended badly without failing a request: a
/// disrupted pod whose stop signal came after the load ended (its shutdown was not under load),
/// a pod that reached SIGKILL while idle (an idle stream holding a graceful stop open, R27), and
/// pods SIGKILLed at their deadline while busy (the app did not act on the stop signal).
fn coverage(inp: &Inputs, findings: &mut Findings) -> Vec<String> {
    let mut out = Vec::new();
    let load_end = inp.load_end;
    for t in inp.terminations {
        match t.stop_signal {
            Some(s) if s > load_end => out.push(format!(
                "the load ended at {:.1} s, before pod {} got its stop signal at {:.1} s: its shutdown was not under load; raise --duration to at least {:.0} s",
                load_end.as_secs_f64(),
                t.pod,
                s.as_secs_f64(),
                (s.saturating_sub(inp.load_start).as_secs_f64() + 3.0).ceil()
            )),
            None => out.push(format!(
                "pod {} got no stop signal while the drill watched it: raise --duration",
                t.pod
            )),
            _ => {}
        }
        let (Some(s), Some(k)) = (t.stop_signal, t.killed) else {
            continue;
        };
        let waited = k.saturating_sub(s).as_secs_f64();
        if busy(inp, &t.pod, k.saturating_sub(IDLE_BEFORE_KILL).max(s), k) {
            out.push(format!(
                "pod {} was SIGKILLed {waited:.1} s after its stop signal, at its deadline: the app did not act on the stop signal (a PID 1 without a handler ignores it; a shell without exec does not pass it on)",
                t.pod
            ));
            continue;
        }
        let idle_streams = inp
            .stream_records
            .iter()
            .filter(|r| {
                r.idle
                    && inp.stream_pods.get(&r.index).map(String::as_str) == Some(t.pod.as_str())
                    && r.opened <= k
                    && r.done + CUT_BEFORE >= k
            })
            .count();
        let killed: Vec<String> = inp
            .containers
            .iter()
            .filter(|c| c.pod == t.pod && c.killed.is_some())
            .map(|c| c.container.clone())
            .collect();
        let named = if killed.is_empty() {
            String::new()
        } else {
            format!(" (container {})", killed.join(", "))
        };
        findings.reached_sigkill_while_idle.push(IdleKill {
            pod: t.pod.clone(),
            containers: killed.clone(),
            waited_seconds: waited,
            idle_streams: idle_streams as u64,
        });
        if idle_streams > 0 {
            out.push(format!(
                "pod {}{named} reached SIGKILL while idle: SIGKILLed {waited:.1} s after its stop signal with no request in flight and no stream carrying data, yet {} still open on it; a graceful stop that waits for every stream to end (gRPC GracefulStop() without a deadline) never returns: give it a deadline below terminationGracePeriodSeconds, or end idle streams on SIGTERM (GOAWAY, then close)",
                t.pod,
                counted(idle_streams, "idle stream was", "idle streams were")
            ));
        } else {
            out.push(format!(
                "pod {}{named} reached SIGKILL while idle: SIGKILLed {waited:.1} s after its stop signal with no request in flight and no stream open, yet it had not exited: the app did not act on the stop signal (a PID 1 without a handler ignores it; a shell without exec does not pass it on)",
                t.pod
            ));
        }
    }
    out
}

/// A pod SIGKILLed with no request in flight and no stream data in this last stretch before the
/// SIGKILL (or since its stop signal, if that is shorter) reached SIGKILL while idle: 1 s.
pub const IDLE_BEFORE_KILL: Duration = Duration::from_secs(1);

/// `n` and the singular or plural words: `1 request`, `2 requests`.
fn counted(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Whether `pod` had a request in flight or a data stream carrying data between `from` and `to`.
fn busy(inp: &Inputs, pod: &str, from: Duration, to: Duration) -> bool {
    let on_pod =
        |pods: &HashMap<u64, String>, i: u64| pods.get(&i).map(String::as_str) == Some(pod);
    inp.request_records
        .iter()
        .any(|r| on_pod(inp.request_pods, r.index) && r.sent <= to && r.done >= from)
        || inp.stream_records.iter().any(|r| {
            on_pod(inp.stream_pods, r.index) && r.last_data.is_some_and(|d| d >= from && d <= to)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_race_advice_never_proposes_the_pre_stop_already_set() {
        // Issue 9 item 4: the lag plus a margin, with the reason; never "at least the lag".
        let none = race_line(1.0, 0.0, "3 requests", "web-1");
        assert!(
            none.starts_with("add a preStop sleep of at least 2 s, the endpoint lag plus 1 s (the endpoint lag is 1.0 s; the preStop now waits 0.0 s; a preStop of just the lag still races the removal, and kube-proxy applies a removal up to its minSyncPeriod, 1 s, late): 3 requests reached pod web-1"),
            "{none}"
        );
        let short = race_line(30.0, 5.0, "3 requests", "web-1");
        assert!(
            short.starts_with("add a preStop sleep of at least 31 s"),
            "{short}"
        );
        // Equal to the lag (the case the drill measured losing 2 and 1 of 1,600): the margin.
        let equal = race_line(1.0, 1.0, "1 request", "web-1");
        assert!(
            equal.starts_with("add a preStop sleep of at least 2 s"),
            "{equal}"
        );
        // Already the lag plus the margin and still raced: a second more than it waits.
        let margin = race_line(1.0, 2.0, "1 request", "web-1");
        assert!(
            margin.starts_with("make the preStop sleep longer than the endpoint lag, at least 3 s (it waits 2.0 s and the endpoint lag is 1.0 s"),
            "{margin}"
        );
        let fraction = race_line(1.5, 3.0, "1 request", "web-1");
        assert!(
            fraction.contains("at least 4 s (it waits 3.0 s"),
            "{fraction}"
        );
        let cut = cut_short_line(3.0, 2.0, 1.0, "199 requests", "web-1");
        assert!(
            cut.starts_with("199 requests reached pod web-1 after its stop signal, while the proxy still sent it traffic (endpoint lag 3.0 s): its preStop of 2.0 s was cut after 1.0 s by this termination's grace period, so a longer preStop cannot help"),
            "{cut}"
        );
    }

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    fn plan(tgps: i64) -> PodPlan {
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  terminationGracePeriodSeconds: {tgps}\n  containers:\n  - {{name: app, image: x}}\n"
        );
        let m = podgrace_core::manifest::load(&yaml, "t.yaml").expect("valid");
        let plan = m.pods().next().cloned().expect("one pod");
        plan
    }

    fn stream(
        index: u64,
        idle: bool,
        opened: f64,
        done: f64,
        outcome: StreamOutcome,
    ) -> StreamRecord {
        StreamRecord {
            index,
            slot: index as usize,
            idle,
            opened: s(opened),
            last_data: (!idle).then(|| s(done - 0.1)),
            done: s(done),
            chunks: if idle { 0 } else { 10 },
            status: Some(200),
            outcome,
            client_port: None,
            connected: None,
        }
    }

    static NO_PODS: std::sync::LazyLock<HashMap<u64, String>> =
        std::sync::LazyLock::new(HashMap::new);

    /// Pod web-1, whose termination and stop signal came at `stop` s (SIGKILL at `killed`).
    fn web1_stopped_at(stop: f64, killed: Option<f64>) -> PodTermination {
        PodTermination {
            pod: "web-1".into(),
            started: s(stop),
            stop_signal: Some(s(stop)),
            killed: killed.map(s),
        }
    }

    /// Container app of web-1: stop signal at `stop` s, exit at `exit` s, a budget in seconds.
    fn app_exited(stop: f64, exit: f64, budget_seconds: i64) -> ContainerStop {
        ContainerStop {
            pod: "web-1".into(),
            container: "app".into(),
            stop_signal: Some(s(stop)),
            killed: None,
            exited: Some(s(exit)),
            budget_seconds,
        }
    }

    /// A streams-only drill: L 1 s, the load from 0.5 s to 10 s on port 8080.
    fn stream_inputs<'a>(
        template: &'a PodPlan,
        streams: &'a [StreamRecord],
        failed: &'a [Attribution],
        pods: &'a HashMap<u64, String>,
        terminations: &'a [PodTermination],
        containers: &'a [ContainerStop],
    ) -> Inputs<'a> {
        Inputs {
            requests: &[],
            streams: failed,
            request_records: &[],
            request_pods: &NO_PODS,
            stream_records: streams,
            stream_pods: pods,
            terminations,
            containers,
            endpoint_lag: s(1.0),
            client: crate::load::ClientKind::KeepAliveCareful,
            connections: 16,
            removed: &[],
            load_start: s(0.5),
            load_end: s(10.0),
            port: 8080,
            timeout: s(2.0),
            template,
            routable: &[],
        }
    }

    fn failed_stream(index: u64, at: f64) -> Attribution {
        Attribution {
            request: index,
            outcome: RequestOutcome::Reset,
            pod: Some("web-1".into()),
            at: s(at),
            phase: Phase::AfterStopSignal,
            stale_conntrack: false,
        }
    }

    /// Case R26: the app exits 1 s after SIGTERM with 120 s of grace; its four open streams are
    /// cut at that instant.
    #[test]
    fn an_app_that_gives_up_after_one_second_of_a_120_second_budget() {
        let template = plan(120);
        let streams: Vec<StreamRecord> = (0..4)
            .map(|i| stream(i, false, 0.5, 3.0, StreamOutcome::Reset))
            .collect();
        let failed: Vec<Attribution> = (0..4).map(|i| failed_stream(i, 3.0)).collect();
        let pods: HashMap<u64, String> = (0..4).map(|i| (i, "web-1".to_string())).collect();
        let terminations = [web1_stopped_at(2.0, None)];
        let containers = [app_exited(2.0, 3.0, 120)];
        let inp = stream_inputs(
            &template,
            &streams,
            &failed,
            &pods,
            &terminations,
            &containers,
        );
        let d = diagnose(&inp);
        let a = &d.advice;
        assert_eq!(a.len(), 1, "{a:?}");
        assert!(
            a[0].starts_with("container app of pod web-1 gave up at 1.0 s of its 120 s budget: it exited 1.0 s after its stop signal, 119.0 s before SIGKILL was due, and cut 4 streams in flight (the longest had run 2.5 s)"),
            "{}",
            a[0]
        );
        assert!(a[0].contains("about 118 s here"), "{}", a[0]);
        assert_eq!(
            d.findings.gave_up,
            [GaveUpFinding {
                pod: "web-1".into(),
                container: "app".into(),
                after_stop_signal_seconds: 1.0,
                budget_seconds: 120,
                requests_cut: 0,
                streams_cut: 4,
                longest_running_seconds: 2.5,
            }]
        );
        assert!(d.findings.reached_sigkill_while_idle.is_empty());
    }

    /// Case R27: SIGKILL at the deadline with only an idle stream open.
    #[test]
    fn a_pod_killed_with_only_an_idle_stream_open_reached_sigkill_while_idle() {
        let template = plan(30);
        let streams = [
            stream(0, true, 0.2, 32.0, StreamOutcome::Reset),
            stream(1, true, 0.2, 40.0, StreamOutcome::Unfinished),
        ];
        let pods: HashMap<u64, String> =
            [(0, "web-1".to_string()), (1, "web-2".to_string())].into();
        let terminations = [web1_stopped_at(2.0, Some(32.0))];
        let inp = Inputs {
            requests: &[],
            streams: &[],
            request_records: &[],
            request_pods: &HashMap::new(),
            stream_records: &streams,
            stream_pods: &pods,
            terminations: &terminations,
            containers: &[],
            endpoint_lag: s(1.0),
            client: crate::load::ClientKind::KeepAliveCareful,
            connections: 16,
            removed: &[],
            load_start: s(0.5),
            load_end: s(5.0),
            port: 8080,
            timeout: s(2.0),
            template: &template,
            routable: &[],
        };
        let d = diagnose(&inp);
        let c = &d.advice;
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            d.findings.reached_sigkill_while_idle,
            [IdleKill {
                pod: "web-1".into(),
                containers: vec![],
                waited_seconds: 30.0,
                idle_streams: 1,
            }]
        );
        assert!(
            c[0].starts_with("pod web-1 reached SIGKILL while idle: SIGKILLed 30.0 s after its stop signal with no request in flight and no stream carrying data, yet 1 idle stream was still open on it"),
            "{}",
            c[0]
        );
        // A request that failed at once in the endpoint race long before the SIGKILL leaves it
        // idle at the SIGKILL.
        let raced = [RequestRecord {
            index: 3,
            intended: s(2.1),
            sent: s(2.1),
            done: s(2.102),
            outcome: RequestOutcome::Http5xx,
            status: Some(502),
            client_port: None,
            connected: None,
            reused: false,
            retried: false,
        }];
        let raced_pods: HashMap<u64, String> = [(3, "web-1".to_string())].into();
        let raced_inp = Inputs {
            request_records: &raced,
            request_pods: &raced_pods,
            ..inp
        };
        assert_eq!(
            diagnose(&raced_inp)
                .findings
                .reached_sigkill_while_idle
                .len(),
            1
        );
        let inp = Inputs {
            request_records: &[],
            request_pods: &HashMap::new(),
            ..raced_inp
        };
        // A request in flight on the pod up to the SIGKILL makes it busy, not idle.
        let req = [RequestRecord {
            index: 7,
            intended: s(10.0),
            sent: s(10.0),
            done: s(32.0),
            outcome: RequestOutcome::Reset,
            status: None,
            client_port: None,
            connected: None,
            reused: false,
            retried: false,
        }];
        let req_pods: HashMap<u64, String> = [(7, "web-1".to_string())].into();
        let busy_inp = Inputs {
            request_records: &req,
            request_pods: &req_pods,
            ..inp
        };
        let d = diagnose(&busy_inp);
        assert!(d.findings.reached_sigkill_while_idle.is_empty());
        let c = &d.advice;
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(
            c[0].starts_with("no request succeeded at all (1 request failed): is the app serving HTTP on port 8080"),
            "{c:?}"
        );
        assert!(
            c[1].starts_with(
                "pod web-1 was SIGKILLed 30.0 s after its stop signal, at its deadline"
            ),
            "{c:?}"
        );
    }

    /// An app that exits at its stop signal with streams open: they are cut (not a container
    /// giving up: it did not try), and a stream opened to it during the lag is the race.
    #[test]
    fn streams_cut_at_the_stop_signal_and_streams_that_raced() {
        let template = plan(30);
        let streams = [
            stream(0, false, 0.5, 2.01, StreamOutcome::Reset),
            stream(1, false, 0.5, 2.01, StreamOutcome::Reset),
            stream(2, false, 2.2, 2.2, StreamOutcome::Http5xx),
        ];
        let mut failed: Vec<Attribution> = (0..2).map(|i| failed_stream(i, 2.01)).collect();
        failed.push(Attribution {
            outcome: RequestOutcome::Http5xx,
            ..failed_stream(2, 2.2)
        });
        let pods: HashMap<u64, String> = (0..3).map(|i| (i, "web-1".to_string())).collect();
        let terminations = [web1_stopped_at(2.0, None)];
        let containers = [app_exited(2.0, 2.01, 30)];
        let inp = stream_inputs(
            &template,
            &streams,
            &failed,
            &pods,
            &terminations,
            &containers,
        );
        let d = diagnose(&inp);
        assert!(d.findings.gave_up.is_empty());
        assert_eq!(d.advice.len(), 2, "{:?}", d.advice);
        assert!(
            d.advice[0].contains("): 1 stream reached pod web-1 after its stop signal"),
            "{}",
            d.advice[0]
        );
        assert!(
            d.advice[1].starts_with("2 streams to pod web-1 were cut after its stop signal"),
            "{}",
            d.advice[1]
        );
    }

    /// An app that exits on its stop signal is the endpoint race, not a container giving up.
    #[test]
    fn an_exit_at_the_stop_signal_is_not_giving_up() {
        let c = ContainerStop {
            pod: "p".into(),
            container: "app".into(),
            stop_signal: Some(s(2.0)),
            killed: None,
            exited: Some(s(2.01)),
            budget_seconds: 30,
        };
        assert_eq!(c.gave_up_at(), None);
        let near_deadline = ContainerStop {
            exited: Some(s(31.5)),
            ..c.clone()
        };
        assert_eq!(near_deadline.gave_up_at(), None);
        let drained_5s = ContainerStop {
            exited: Some(s(7.0)),
            ..c
        };
        assert_eq!(drained_5s.gave_up_at(), Some(s(7.0)));
        assert_eq!(drained_5s.deadline(), Some(s(32.0)));
    }
}
