//! The timeline's output contract (`podgrace explain --output json`): the pod's timeline, each
//! container's, the spans, the findings, a second delete and a runtime's widened times.

use crate::rules::latency::LatencyJson;
use crate::Seconds;
use serde::Serialize;

/// A time that depends on how long hooks and apps take: its earliest and latest value, seconds
/// from t = 0 (exact; see [`Seconds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Span {
    /// The earliest value, seconds from t = 0 (hooks and apps as fast as they can be).
    pub min: Seconds,
    /// The latest value, seconds from t = 0 (hooks and apps use all the time they are given).
    pub max: Seconds,
}

impl Span {
    pub(super) fn ms(min: i128, max: i128) -> Span {
        Span {
            min: Seconds::from_ms(min),
            max: Seconds::from_ms(max),
        }
    }
}

/// A container's preStop in the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreStop {
    /// `exec`, `httpGet` or `sleep`.
    pub action: &'static str,
    /// When the hook starts, seconds (always 0: the kubelet runs it first).
    pub start_seconds: Seconds,
    /// When the kubelet stops waiting for it, seconds.
    pub end_seconds: Span,
}

/// One container's termination.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerTimeline {
    /// The container's name from the pod spec.
    pub name: String,
    /// `main` or `sidecar`.
    pub role: &'static str,
    /// `None` when the container has no preStop or the hook is skipped (budget 0).
    pub pre_stop: Option<PreStop>,
    /// The signal sent first: the stop signal, or `SIGKILL` when the runtime gets a timeout of 0.
    pub stop_signal: String,
    /// When the stop signal is sent, seconds.
    pub stop_signal_seconds: Span,
    /// When SIGKILL comes if the container has not exited by then.
    pub kill_seconds: Span,
    /// The StopContainer timeout, seconds, in the `min` and `max` cases.
    #[serde(skip)]
    pub stop_timeout_seconds: (i64, i64),
    /// The preStop budget, seconds (the cut point).
    #[serde(skip)]
    pub pre_stop_budget_seconds: Option<i64>,
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; the termination behaves as written.
    Info,
    /// Likely not what the author meant (a preStop cut short, a SIGKILL before the app can drain).
    Warning,
    /// The termination cannot work as written (the API server or the kubelet refuses or overrides
    /// it).
    Error,
}

/// Something the user should know about this termination.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable rule id.
    pub rule: &'static str,
    /// How serious it is.
    pub severity: Severity,
    /// What happens and why, in one or two sentences.
    pub message: String,
}

/// The termination of one pod for one trigger (the `explain` JSON contract).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// `namespace/name` (or the name alone).
    pub pod: String,
    /// The object the pod comes from: `Pod`, `Deployment`, ...
    pub kind: &'static str,
    /// `metadata.namespace` as written (`None` when unset).
    pub namespace: Option<String>,
    /// The file the object is in (`<stdin>` for standard input), and where the object starts.
    pub file: String,
    /// The line of the object in `file`, 1-based.
    pub line: usize,
    /// The column of the object in `file`, 1-based.
    pub column: usize,
    /// The trigger as given (`delete`, `delete:N`, `force-delete`, `evict-soft`, `evict-hard`,
    /// `liveness:C`, `startup:C`, `node-shutdown`).
    pub trigger: String,
    /// The Kubernetes version whose rules apply, `major.minor` (such as `1.32`).
    pub kubernetes_version: String,
    /// The grace period the kubelet works with, seconds (pod-level effective grace; for a probe
    /// kill, the container's base grace).
    pub grace_period_seconds: i64,
    /// Every container that is stopped, main containers first, then native sidecars in reverse
    /// order.
    pub containers: Vec<ContainerTimeline>,
    /// What the user should know about this termination.
    pub findings: Vec<Finding>,
    /// What a later delete did (`explain --second-delete`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub second_delete: Option<SecondDeleteTimeline>,
    /// The runtime latencies the times include (`explain --runtime`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeTimeline>,
}

/// The runtime latencies a timeline includes, each with its source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuntimeTimeline {
    /// The runtime measured, e.g. `containerd 1.6.20 (runc 1.1.5)`.
    pub name: &'static str,
    /// Each latency added to the times, seconds, with its source.
    pub latencies: Vec<LatencyJson>,
}

/// What the API server and the kubelet made of a later delete (`--second-delete`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecondDeleteTimeline {
    /// When it reached the API server, seconds after t = 0.
    pub at_seconds: Seconds,
    /// kubectl's `DeleteOptions.gracePeriodSeconds` (`None`: the object's own).
    pub request_grace_period_seconds: Option<i64>,
    /// `--force`.
    pub force: bool,
    /// What the API server did: `notFound` (the object is gone), `unchanged` (not shorter: a
    /// pending graceful delete), `shortened` (new DGPS and DT) or `deleted` (grace 0: removed).
    pub api: &'static str,
    /// `deletionGracePeriodSeconds` afterwards (`None` once removed or never set).
    pub deletion_grace_period_seconds: Option<i64>,
    /// `deletionTimestamp` afterwards, whole seconds after t = 0 (taken on a whole second, as
    /// the API stores whole seconds).
    pub deletion_timestamp_seconds: Option<i64>,
    /// What the kubelet did with it: `notShorter`, `ignored` (the kill in flight keeps its
    /// grace), `killedAgain` (1.18–1.21: the pod killer's second kill), `over` (the kill had
    /// already ended) or `nothing` (no update reached it).
    pub kubelet: &'static str,
    /// The termination ends earlier than without it.
    pub shortens: bool,
    /// The grace the kill in flight works with, seconds.
    pub kill_grace_period_seconds: i64,
}
