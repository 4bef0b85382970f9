//! `podgrace why pod/NAME`: what a pod's status and events say about a termination that already
//! happened, in termination terms.
//!
//! Pure: [`explain`] takes the pod as the API returned it (`None` when it is gone) and its
//! events, and returns [`Forensics`]: the facts read (the deletion, each container's last
//! termination) and [`Finding`]s, each with a stable id and whether it is read from a field or
//! an event (`inferred: false`) or inferred from timestamps (`inferred: true`). Nothing here
//! reads a clock; every time comes from the objects.
//!
//! What the kubelet leaves behind, and what it does not (upstream, 1.27 to the 1.36 tree):
//! * `deletionTimestamp` = the delete's time + `deletionGracePeriodSeconds`, truncated to whole
//!   seconds (`pkg/registry/core/pod/strategy.go` `CheckGracefulDelete` through
//!   `BeforeDelete`); a later, shorter delete moves it earlier, but the kubelet's kill already
//!   running keeps its grace (README "A second delete"); the kubelet's final delete (grace 0)
//!   moves it back by the old grace a few hundred milliseconds before the object goes
//!   ([`crate::rules::podstatus::final_delete_at_ms`]).
//! * `containerStatuses[].state.terminated` / `lastState.terminated`: `exitCode` (137 = SIGKILL,
//!   143 = SIGTERM's default action), `reason` (`Error`, `Completed`, `OOMKilled` from the
//!   runtime), `startedAt`/`finishedAt` in whole seconds.
//! * Events: `Killing` (`Stopping container NAME`, or `Container NAME failed liveness probe,
//!   will be restarted`), `Unhealthy` (`Liveness probe failed: ...`), `FailedPreStopHook`
//!   (`PreStopHook failed`, a hook that failed or died with its container), `BackOff`,
//!   `Evicted` (the eviction manager's message), `Preempting`. No event says SIGKILL, and none
//!   says that a preStop ran out of its grace (`executePreStopHook` only logs `PreStop hook not
//!   completed in grace period`): that is inferred here from the timestamps, and said so.
//!
//! Sources: `pkg/kubelet/kuberuntime/kuberuntime_container.go` (`killContainer`,
//! `executePreStopHook`, `minimumGracePeriodInSeconds` = 2), `kuberuntime_manager.go`
//! (`computePodActions`: the probe kill's message), `pkg/kubelet/prober/worker.go` (the
//! `Unhealthy` event), `pkg/kubelet/eviction/eviction_manager.go` (`evictPod`: status reason
//! `Evicted`, the hard eviction's 1 s), `pkg/apis/core/types.go` (`DisruptionTarget` reasons).

mod input;

pub use input::{parse, Parsed, MAX_INPUT_BYTES};

use k8s_openapi::api::core::v1::{
    Container, ContainerStateTerminated, ContainerStatus, Event, Pod,
};
use serde::Serialize;

use crate::rules::eviction::IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS;

/// The kubelet's floor for the time between the stop signal and SIGKILL once a preStop has used
/// its budget (`minimumGracePeriodInSeconds`), seconds.
const MINIMUM_GRACE_SECONDS: i64 = 2;

/// The default `terminationGracePeriodSeconds`, seconds.
const DEFAULT_TGPS: i64 = 30;

/// What the status and events say, for `podgrace why` (`-o json` prints it as is).
///
/// JSON (camelCase): `{pod, namespace, objectPresent, phase, reason, message,
/// terminationGracePeriodSeconds, deletion: null | {deletionTimestamp,
/// deletionGracePeriodSeconds, deletedAt}, containers: [{name, restartCount, state,
/// terminated: null | {exitCode, signal, reason, startedAt, finishedAt, afterDeleteSeconds},
/// last: "state" | "lastState" | null}], findings: [{id, container, inferred, message}],
/// events: [{time, type, reason, container, count, message}]}`. Times are RFC 3339 strings as
/// the API gave them; `afterDeleteSeconds` is a number of whole seconds (±1 s: both ends are
/// stored in whole seconds).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forensics {
    /// `metadata.name` of the pod.
    pub pod: String,
    /// `metadata.namespace` of the pod.
    pub namespace: String,
    /// Whether the pod object was there (else only its events were read).
    pub object_present: bool,
    /// `status.phase` (empty when gone).
    pub phase: String,
    /// `status.reason` (`Evicted`, ...), empty if unset.
    pub reason: String,
    /// `status.message`, empty if unset.
    pub message: String,
    /// `spec.terminationGracePeriodSeconds` (30 when unset); `None` when the object is gone.
    pub termination_grace_period_seconds: Option<i64>,
    /// The deletion as stored; `None` when the object was not being deleted or is gone.
    pub deletion: Option<Deletion>,
    /// Each container's facts: `status.initContainerStatuses`, then `status.containerStatuses`.
    pub containers: Vec<ContainerFacts>,
    /// The conclusions, in the order they were drawn.
    pub findings: Vec<Finding>,
    /// The pod's events, oldest first.
    pub events: Vec<EventLine>,
}

/// The object's deletion as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deletion {
    /// `metadata.deletionTimestamp` (RFC 3339).
    pub deletion_timestamp: String,
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_period_seconds: Option<i64>,
    /// When the delete was made, `deletionTimestamp - deletionGracePeriodSeconds` (RFC 3339,
    /// whole seconds); `None` when the grace is 0 (a force delete, or the kubelet's final
    /// delete, which moved the timestamp back).
    pub deleted_at: Option<String>,
}

/// One container's termination facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerFacts {
    /// The container's name.
    pub name: String,
    /// `restartCount`.
    pub restart_count: i32,
    /// `running`, `waiting (REASON)`, `terminated` or `unknown`.
    pub state: String,
    /// The termination read: `state.terminated`, else `lastState.terminated`.
    pub terminated: Option<TerminatedFacts>,
    /// Which field [`Self::terminated`] came from: `state` or `lastState`.
    pub last: Option<&'static str>,
}

/// A container termination as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminatedFacts {
    /// `exitCode`: 128 + n for a process ended by signal n (137 for SIGKILL, 143 for SIGTERM).
    pub exit_code: i32,
    /// `signal`, 0 when unset.
    pub signal: i32,
    /// `reason` (`Completed`, `Error`, `OOMKilled`, ...), empty if unset.
    pub reason: String,
    /// `startedAt` (RFC 3339), if set.
    pub started_at: Option<String>,
    /// `finishedAt` (RFC 3339), if set.
    pub finished_at: Option<String>,
    /// `finishedAt` minus the delete's time, whole seconds, when both are known.
    pub after_delete_seconds: Option<i64>,
}

/// One conclusion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Stable id: `podGone`, `deleted`, `forceDeleted`, `killedAtGraceDeadline`,
    /// `preStopCut`, `secondDeleteDidNotShorten`, `killedBeforeDeadline`,
    /// `exitedOnStopSignal`, `oomKilled`, `livenessKill`, `startupKill`, `preStopFailed`,
    /// `evicted`, `disruptionTarget`, `exitedByItself`, `crashLoopBackOff`, `stillTerminating`.
    pub id: &'static str,
    /// The container it is about, if one.
    pub container: Option<String>,
    /// True when it is inferred from timestamps rather than read from a field or an event.
    pub inferred: bool,
    /// What happened and why, in one or two sentences.
    pub message: String,
}

/// One of the pod's events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    /// `lastTimestamp`, else `eventTime`, else `firstTimestamp` (RFC 3339); empty if none.
    pub time: String,
    /// `type`: `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `reason` (`Killing`, `Unhealthy`, `Evicted`, ...).
    pub reason: String,
    /// The container named by `involvedObject.fieldPath` (`spec.containers{app}`).
    pub container: Option<String>,
    /// `count` (how many times the event was seen; 1 when unset).
    pub count: i32,
    /// `message`, as the component wrote it.
    pub message: String,
    #[serde(skip)]
    at_ms: Option<i64>,
}

/// What a termination of one container looked like, from its stored end.
struct Ended<'a> {
    name: &'a str,
    t: &'a ContainerStateTerminated,
    finished_ms: Option<i64>,
}

fn ms(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    t.0.as_millisecond()
}

fn secs_floor(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

fn rfc3339_s(ms: i64) -> String {
    match k8s_openapi::jiff::Timestamp::from_second(secs_floor(ms)) {
        Ok(t) => t.to_string(),
        Err(_) => String::new(),
    }
}

/// The container named in an event's `involvedObject.fieldPath` (`spec.containers{app}`,
/// `spec.initContainers{x}`).
fn container_of(field_path: Option<&str>) -> Option<String> {
    let p = field_path?;
    let open = p.find('{')?;
    let close = p.rfind('}')?;
    (close > open + 1).then(|| p[open + 1..close].to_string())
}

fn event_line(e: &Event) -> EventLine {
    let at_ms = e
        .last_timestamp
        .as_ref()
        .map(ms)
        .or_else(|| e.event_time.as_ref().map(|t| t.0.as_millisecond()))
        .or_else(|| e.first_timestamp.as_ref().map(ms));
    EventLine {
        time: at_ms.map(rfc3339_s).unwrap_or_default(),
        type_: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        container: container_of(e.involved_object.field_path.as_deref()),
        count: e.count.unwrap_or(1),
        message: e.message.clone().unwrap_or_default(),
        at_ms,
    }
}

/// Whether `e` is about the pod `name` in `namespace` (and, when both are known, the same UID:
/// a StatefulSet's pod of the same name is another object).
fn is_about(e: &Event, namespace: &str, name: &str, uid: Option<&str>) -> bool {
    let o = &e.involved_object;
    let kind_ok = o.kind.as_deref().is_none_or(|k| k == "Pod");
    let ns = o
        .namespace
        .as_deref()
        .or(e.metadata.namespace.as_deref())
        .unwrap_or("default");
    let uid_ok = match (uid, o.uid.as_deref()) {
        (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => a == b,
        _ => true,
    };
    kind_ok && o.name.as_deref() == Some(name) && ns == namespace && uid_ok
}

fn spec_container<'a>(pod: Option<&'a Pod>, name: &str) -> Option<&'a Container> {
    let spec = pod?.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

/// A few words on the container's preStop, if it has one (`exec sleep 3`, `sleep 5 s`,
/// `httpGet /drain`).
fn pre_stop_of(c: Option<&Container>) -> Option<String> {
    let h = c?.lifecycle.as_ref()?.pre_stop.as_ref()?;
    if let Some(s) = &h.sleep {
        return Some(format!("sleep {} s", s.seconds));
    }
    if let Some(e) = &h.exec {
        let cmd = e.command.clone().unwrap_or_default().join(" ");
        return Some(format!("exec {cmd}"));
    }
    if let Some(g) = &h.http_get {
        return Some(format!("httpGet {}", g.path.as_deref().unwrap_or("/")));
    }
    Some("a handler".into())
}

/// Reads the status and events of one pod and explains its last termination.
///
/// `pod`: the object as the API returned it, `None` when it is gone (then `namespace` and
/// `name` say which pod the `events` are about). `events`: any events; only those about this
/// pod are used (same namespace, name and, when known, UID).
///
/// Source: see the module documentation.
pub fn explain(pod: Option<&Pod>, namespace: &str, name: &str, events: &[Event]) -> Forensics {
    let uid = pod.and_then(|p| p.metadata.uid.as_deref());
    let mut evs: Vec<EventLine> = events
        .iter()
        .filter(|e| is_about(e, namespace, name, uid))
        .map(event_line)
        .collect();
    evs.sort_by_key(|e| e.at_ms.unwrap_or(i64::MIN));
    let status = pod.and_then(|p| p.status.as_ref());
    let tgps = pod.map(|p| {
        p.spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(DEFAULT_TGPS)
    });
    let meta = pod.map(|p| &p.metadata);
    let dt_ms = meta.and_then(|m| m.deletion_timestamp.as_ref()).map(ms);
    let dgps = meta.and_then(|m| m.deletion_grace_period_seconds);
    let terminal = matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    );
    // The delete's time: deletionTimestamp − grace (both whole seconds); with a grace of 0 the
    // timestamp is the delete's time itself (a force delete sets it to now; the kubelet's
    // final delete moves it back by the old grace, to the first delete's time).
    //
    // From 1.33 (PR #122646) a shortened deletionTimestamp is never put in the past: the final
    // delete then sets it to its own time, after every container stopped. A timestamp not
    // before the last finishedAt is read that way, and the delete's time is taken from the
    // kubelet's first Killing event (whole seconds; the kubelet sees a delete within
    // milliseconds) instead.
    let last_finished_ms = status
        .into_iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(ms)
        .max();
    let first_killing_ms = evs
        .iter()
        .filter(|e| e.reason == "Killing" && !e.message.contains(" probe"))
        .filter_map(|e| e.at_ms)
        .min();
    let mut deleted_from_event = false;
    let deleted_ms = match (dt_ms, dgps) {
        (Some(dt), Some(g)) if g > 0 => Some(dt - g.saturating_mul(1000)),
        (Some(dt), _)
            if terminal && last_finished_ms.is_some_and(|f| secs_floor(dt) >= secs_floor(f)) =>
        {
            deleted_from_event = first_killing_ms.is_some();
            first_killing_ms
        }
        (Some(dt), _) => Some(dt),
        _ => None,
    };
    // The grace that set the kill's deadline: the stored one; 0 on a pod still running is a
    // force delete (the kubelet's minimum, 1 s); 0 on a terminal pod is the final delete's, and
    // the grace used is no longer stored.
    let kill_grace = match dgps {
        Some(g) if g > 0 => Some(g),
        Some(_) if !terminal => Some(1),
        _ => None,
    };
    let deletion = dt_ms.map(|dt| Deletion {
        deletion_timestamp: rfc3339_s(dt),
        deletion_grace_period_seconds: dgps,
        deleted_at: deleted_ms.map(rfc3339_s),
    });
    let mut out = Forensics {
        pod: name.to_string(),
        namespace: namespace.to_string(),
        object_present: pod.is_some(),
        phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        reason: status.and_then(|s| s.reason.clone()).unwrap_or_default(),
        message: status.and_then(|s| s.message.clone()).unwrap_or_default(),
        termination_grace_period_seconds: tgps,
        deletion,
        containers: Vec::new(),
        findings: Vec::new(),
        events: Vec::new(),
    };
    let all: Vec<&ContainerStatus> = status
        .map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
                .collect()
        })
        .unwrap_or_default();
    let mut ended = Vec::new();
    for cs in &all {
        let st = cs.state.as_ref();
        let state = match st {
            Some(s) if s.running.is_some() => "running".to_string(),
            Some(s) if s.terminated.is_some() => "terminated".to_string(),
            Some(s) => match &s.waiting {
                Some(w) => format!("waiting ({})", w.reason.as_deref().unwrap_or("")),
                None => "unknown".into(),
            },
            None => "unknown".into(),
        };
        let (t, last) = match (
            st.and_then(|s| s.terminated.as_ref()),
            cs.last_state.as_ref().and_then(|s| s.terminated.as_ref()),
        ) {
            (Some(t), _) => (Some(t), Some("state")),
            (None, Some(t)) => (Some(t), Some("lastState")),
            _ => (None, None),
        };
        let finished_ms = t.and_then(|t| t.finished_at.as_ref()).map(ms);
        out.containers.push(ContainerFacts {
            name: cs.name.clone(),
            restart_count: cs.restart_count,
            state,
            terminated: t.map(|t| TerminatedFacts {
                exit_code: t.exit_code,
                signal: t.signal.unwrap_or(0),
                reason: t.reason.clone().unwrap_or_default(),
                started_at: t.started_at.as_ref().map(|x| rfc3339_s(ms(x))),
                finished_at: finished_ms.map(rfc3339_s),
                after_delete_seconds: match (finished_ms, deleted_ms) {
                    (Some(f), Some(d)) if last == Some("state") => {
                        Some(secs_floor(f) - secs_floor(d))
                    }
                    _ => None,
                },
            }),
            last,
        });
        if let Some(t) = t {
            ended.push((
                Ended {
                    name: &cs.name,
                    t,
                    finished_ms,
                },
                last == Some("state"),
                cs.restart_count,
            ));
        }
    }
    let mut f = Vec::new();
    let finding = |id, container: Option<&str>, inferred, message: String| Finding {
        id,
        container: container.map(str::to_string),
        inferred,
        message,
    };
    if pod.is_none() {
        f.push(finding(
            "podGone",
            None,
            false,
            format!(
                "pod {namespace}/{name} is gone: only its events are read (the API server keeps events for 1 h by default, --event-ttl)"
            ),
        ));
    }
    // The deletion.
    match (dt_ms, dgps) {
        (Some(dt), Some(g)) if g > 0 => f.push(finding(
            "deleted",
            None,
            false,
            format!(
                "deleted at {} with a grace of {g} s (deletionTimestamp {} − deletionGracePeriodSeconds; TGPS {})",
                rfc3339_s(dt - g * 1000),
                rfc3339_s(dt),
                tgps.unwrap_or(DEFAULT_TGPS)
            ),
        )),
        (Some(dt), _) if terminal => f.push(finding(
            "deleted",
            None,
            deleted_from_event,
            match (deleted_ms, deleted_from_event) {
                (Some(d), true) => format!(
                    "deleted at about {} (the kubelet's Killing event): deletionGracePeriodSeconds is 0 and deletionTimestamp {} is the kubelet's final delete, made once every container had stopped (from 1.33 the API server does not move it into the past); the grace the kill used is no longer stored, TGPS is {} s",
                    rfc3339_s(d),
                    rfc3339_s(dt),
                    tgps.unwrap_or(DEFAULT_TGPS)
                ),
                (None, _) => format!(
                    "deletionTimestamp {} with deletionGracePeriodSeconds 0 is the kubelet's final delete, made once every container had stopped; when the delete came is no longer stored (no Killing event left)",
                    rfc3339_s(dt)
                ),
                (Some(_), false) => format!(
                    "deleted at {} (deletionGracePeriodSeconds is 0: the kubelet's final delete moved deletionTimestamp back to the delete's time once every container had stopped, as before 1.33; the grace the kill used is no longer stored, TGPS is {} s)",
                    rfc3339_s(dt),
                    tgps.unwrap_or(DEFAULT_TGPS)
                ),
            },
        )),
        (Some(dt), _) => f.push(finding(
            "forceDeleted",
            None,
            false,
            format!(
                "force deleted at {} (deletionGracePeriodSeconds 0): the object may go at once, while the kubelet still kills with its minimum grace of 1 s (a preStop gets at most 1 s, SIGKILL about 2 s after the stop signal)",
                rfc3339_s(dt)
            ),
        )),
        _ => {}
    }
    // The eviction and other disruptions.
    if out.reason == "Evicted" {
        f.push(finding(
            "evicted",
            None,
            false,
            format!(
                "Evicted by the kubelet: {}. A hard threshold kills with a grace of {IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS} s (preStop gets at most that; kubelets before 1.31 used the pod's TGPS), a soft one with min(evictionMaxPodGracePeriod, TGPS); the object stays, phase {}",
                if out.message.is_empty() { "no message" } else { out.message.trim().trim_end_matches('.') },
                out.phase
            ),
        ));
    }
    if let Some(c) = status.and_then(|s| s.conditions.as_ref()).and_then(|cs| {
        cs.iter()
            .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
    }) {
        let why = match c.reason.as_deref() {
            Some("EvictionByEvictionAPI") => "evicted through the Eviction API (kubectl drain, a controller): deleted with the pod's TGPS unless the eviction's deleteOptions gave a grace",
            Some("PreemptionByScheduler") => "preempted by the scheduler for a pod of higher priority: deleted with the pod's TGPS",
            Some("DeletionByTaintManager") => "deleted by the taint manager (a NoExecute taint it does not tolerate)",
            Some("DeletionByPodGC") => "deleted by the pod garbage collector (its node is gone or out of service)",
            Some("TerminationByKubelet") => "terminated by the kubelet (node-pressure eviction or node shutdown)",
            _ => "disrupted",
        };
        f.push(finding(
            "disruptionTarget",
            None,
            false,
            format!(
                "DisruptionTarget {}: {why}{}",
                c.reason.as_deref().unwrap_or(""),
                c.message
                    .as_deref()
                    .map(|m| format!(" (\"{m}\")"))
                    .unwrap_or_default()
            ),
        ));
    }
    for e in evs.iter().filter(|e| e.reason == "Evicted") {
        if out.reason != "Evicted" {
            f.push(finding(
                "evicted",
                None,
                false,
                format!("Evicted event: {}", e.message),
            ));
        }
    }
    // Probe kills.
    for (probe, id) in [("liveness", "livenessKill"), ("startup", "startupKill")] {
        let wanted = format!("failed {probe} probe");
        for k in evs
            .iter()
            .filter(|e| e.reason == "Killing" && e.message.contains(&wanted))
        {
            let c = k.container.clone().unwrap_or_default();
            let prefix = format!("{}{} probe failed", probe[..1].to_uppercase(), &probe[1..]);
            let failures: i32 = evs
                .iter()
                .filter(|e| {
                    e.reason == "Unhealthy"
                        && e.container.as_deref() == Some(&c)
                        && e.message.starts_with(&prefix)
                })
                .map(|e| e.count)
                .sum();
            let sc = spec_container(pod, &c);
            let p = sc.and_then(|s| {
                if probe == "liveness" {
                    s.liveness_probe.as_ref()
                } else {
                    s.startup_probe.as_ref()
                }
            });
            let threshold = p.and_then(|p| p.failure_threshold).unwrap_or(3);
            let grace = match (p.and_then(|p| p.termination_grace_period_seconds), tgps) {
                (Some(g), _) => format!("the probe's terminationGracePeriodSeconds of {g} s"),
                (None, Some(t)) => format!("the pod's TGPS of {t} s (the probe sets none)"),
                (None, None) => "the probe's grace, else the pod's TGPS".into(),
            };
            let detail = evs
                .iter()
                .rev()
                .find(|e| {
                    e.reason == "Unhealthy"
                        && e.container.as_deref() == Some(&c)
                        && e.message.starts_with(&prefix)
                })
                .map(|e| format!(" (last: \"{}\")", e.message))
                .unwrap_or_default();
            f.push(finding(
                id,
                Some(&c),
                false,
                format!(
                    "{probe} probe failed {failures} times (failureThreshold {threshold}){detail}; the kubelet killed the container with {grace}{}, then restarted it as its restartPolicy says",
                    pre_stop_of(sc).map(|h| format!(", after its preStop ({h})")).unwrap_or_default()
                ),
            ));
        }
    }
    // Each container's stored end.
    let killing = |c: &str| {
        evs.iter()
            .filter(|e| e.reason == "Killing" && e.container.as_deref() == Some(c))
            .filter_map(|e| e.at_ms)
            .next_back()
    };
    for (e, current, restarts) in &ended {
        let code = e.t.exit_code;
        let reason = e.t.reason.as_deref().unwrap_or("");
        let sc = spec_container(pod, e.name);
        let hook = pre_stop_of(sc);
        let probe_killed = f.iter().any(|x| {
            (x.id == "livenessKill" || x.id == "startupKill")
                && x.container.as_deref() == Some(e.name)
        });
        if reason == "OOMKilled" {
            f.push(finding(
                "oomKilled",
                Some(e.name),
                false,
                format!(
                    "OOMKilled (exit {code}){}: the kernel killed it at its memory limit; no preStop ran, no stop signal was sent and no grace applied (a container that dies by itself is not terminated by the kubelet){}",
                    e.finished_ms.map(|m| format!(" at {}", rfc3339_s(m))).unwrap_or_default(),
                    if *restarts > 0 { format!("; restarted {restarts} times") } else { String::new() }
                ),
            ));
            continue;
        }
        let in_termination = *current && dt_ms.is_some();
        if !in_termination {
            if probe_killed || out.reason == "Evicted" {
                continue;
            }
            if !*current || killing(e.name).is_none() {
                if code != 0 || !*current {
                    f.push(finding(
                        "exitedByItself",
                        Some(e.name),
                        false,
                        format!(
                            "exited with code {code}{} by itself{}: not a termination (no preStop, no stop signal){}",
                            if reason.is_empty() { String::new() } else { format!(" ({reason})") },
                            e.finished_ms.map(|m| format!(" at {}", rfc3339_s(m))).unwrap_or_default(),
                            if *restarts > 0 { format!("; the kubelet restarted it {restarts} times") } else { String::new() }
                        ),
                    ));
                }
                continue;
            }
        }
        let (Some(fin), Some(deleted)) = (e.finished_ms, deleted_ms) else {
            continue;
        };
        // Offsets in whole seconds: finishedAt and deletionTimestamp are both truncated.
        let after = secs_floor(fin) - secs_floor(deleted);
        let grace = kill_grace;
        let at_text = match grace {
            Some(g) => format!("{after} s after the delete (grace {g} s)"),
            None => format!("{after} s after the delete"),
        };
        let killed = code == 137 || e.t.signal == Some(9);
        // The final delete erased the grace: a kill at TGPS (or TGPS + 2 s with a preStop) is
        // read as a delete with the default grace, TGPS, and says so.
        let assumed = grace.is_none()
            && tgps.is_some_and(|t| {
                killed
                    && ((after - t).abs() <= 1
                        || (hook.is_some() && (after - t - MINIMUM_GRACE_SECONDS).abs() <= 1))
            });
        let grace = if assumed { tgps } else { grace };
        let at_text = if assumed {
            format!(
                "{after} s after the delete (grace {} s: the delete's grace is no longer stored, TGPS assumed)",
                tgps.unwrap_or(DEFAULT_TGPS)
            )
        } else {
            at_text
        };
        let Some(g) = grace else {
            // The final delete erased the grace: say what the exit's time means.
            if killed {
                f.push(finding(
                    "killedAtGraceDeadline",
                    Some(e.name),
                    true,
                    format!(
                        "exit 137 {at_text}: SIGKILL, at the grace deadline if the delete's grace was about {after} s (or {} s with a preStop that used it all); the app did not exit on the stop signal (PID 1 without a handler? a shell that does not pass it on?)",
                        after - MINIMUM_GRACE_SECONDS
                    ),
                ));
            } else {
                f.push(finding(
                    "exitedOnStopSignal",
                    Some(e.name),
                    true,
                    format!("exited with code {code} {at_text}: it stopped on the stop signal"),
                ));
            }
            continue;
        };
        let past_deadline = after - g;
        if killed {
            if past_deadline > MINIMUM_GRACE_SECONDS + 1 {
                f.push(finding(
                    "secondDeleteDidNotShorten",
                    Some(e.name),
                    true,
                    format!(
                        "exit 137 {past_deadline} s after the deletionTimestamp the object shows ({at_text}): a later, shorter delete moved the timestamp earlier but did not shorten the kill already running (the kubelet keeps the grace it started with); SIGKILL came at the first delete's deadline"
                    ),
                ));
            } else if past_deadline >= MINIMUM_GRACE_SECONDS - 1 && hook.is_some() {
                f.push(finding(
                    "preStopCut",
                    Some(e.name),
                    true,
                    format!(
                        "exit 137 about {MINIMUM_GRACE_SECONDS} s past the grace deadline ({at_text}): the preStop ({}) used the whole grace and was cut off, then the stop signal got the kubelet's {MINIMUM_GRACE_SECONDS} s minimum before SIGKILL. Inferred from the timestamps: upstream emits no event when a preStop runs out of time",
                        hook.as_deref().unwrap_or("")
                    ),
                ));
            } else if past_deadline >= -1 {
                f.push(finding(
                    "killedAtGraceDeadline",
                    Some(e.name),
                    true,
                    format!(
                        "exit 137 {at_text}: SIGKILL at the grace deadline; the app did not exit on the stop signal (PID 1 without a handler? a shell that does not pass it on?){}",
                        hook.map(|h| format!("; its preStop ({h}) ran first and took its time out of the same grace")).unwrap_or_default()
                    ),
                ));
            } else {
                f.push(finding(
                    "killedBeforeDeadline",
                    Some(e.name),
                    true,
                    format!(
                        "exit 137 {at_text}, {} s before the grace deadline: a SIGKILL that was not the deadline's (a kill inside the container, the OOM killer of a process other than PID 1, or a runtime that stopped it)",
                        -past_deadline
                    ),
                ));
            }
        } else {
            let how = match code {
                0 => "exited 0".to_string(),
                143 => "was ended by SIGTERM's default action (exit 143)".to_string(),
                c => format!("exited with code {c}"),
            };
            f.push(finding(
                "exitedOnStopSignal",
                Some(e.name),
                true,
                format!(
                    "{how} {at_text}, before the grace deadline: it stopped on the stop signal{}",
                    hook.map(|h| format!(" (after its preStop, {h})"))
                        .unwrap_or_default()
                ),
            ));
        }
    }
    // preStop failures (events).
    for e in evs.iter().filter(|e| e.reason == "FailedPreStopHook") {
        let c = e.container.clone();
        let since_kill = match (
            e.at_ms,
            c.as_deref().and_then(|c| {
                evs.iter()
                    .filter(|k| k.reason == "Killing" && k.container.as_deref() == Some(c))
                    .filter_map(|k| k.at_ms)
                    .find(|k| Some(*k) <= e.at_ms)
            }),
        ) {
            (Some(a), Some(k)) => Some(secs_floor(a) - secs_floor(k)),
            _ => None,
        };
        let cut = since_kill.is_some_and(|s| s >= MINIMUM_GRACE_SECONDS);
        f.push(finding(
            "preStopFailed",
            c.as_deref(),
            cut,
            if cut {
                format!(
                    "FailedPreStopHook \"{}\" {} s after Killing: the hook was still running when its container was killed, so it had been cut at its budget and died with the container (inferred from the timestamps: the event says only that it failed); the stop signal had followed the cut",
                    e.message,
                    since_kill.unwrap_or_default()
                )
            } else {
                format!(
                    "FailedPreStopHook \"{}\": the hook failed (a missing command, a non-zero exit, an HTTP error); termination went on with the stop signal at once",
                    e.message
                )
            },
        ));
    }
    // Crash loops.
    if let Some(b) = evs.iter().rev().find(|e| e.reason == "BackOff") {
        f.push(finding(
            "crashLoopBackOff",
            b.container.as_deref(),
            false,
            format!("BackOff ({} times): \"{}\"", b.count, b.message),
        ));
    }
    // Gone: what the events alone say about the kill.
    if pod.is_none() {
        for k in evs
            .iter()
            .filter(|e| e.reason == "Killing" && !e.message.contains("probe"))
        {
            f.push(finding(
                "deleted",
                k.container.as_deref(),
                false,
                format!(
                    "the kubelet started stopping {} at {} (Killing: \"{}\"); the exit code and time left with the object",
                    k.container.as_deref().unwrap_or("the container"),
                    k.time,
                    k.message
                ),
            ));
        }
    }
    // Deleted, not yet terminal.
    if dt_ms.is_some()
        && !matches!(out.phase.as_str(), "Failed" | "Succeeded")
        && all
            .iter()
            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
    {
        f.push(finding(
            "stillTerminating",
            None,
            false,
            "the pod is still terminating: a container is running; ask again once it has stopped"
                .into(),
        ));
    }
    out.findings = f;
    out.events = evs;
    out
}

#[cfg(test)]
mod tests;
