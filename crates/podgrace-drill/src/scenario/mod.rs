//! A drill: replicas of a pod run by the local kubelet, a service proxy in front whose view of
//! the endpoints lags like kube-proxy's, open-loop load through it, and a disruption (rollout,
//! delete or eviction) while the load runs. Every failed request is attributed to a pod and a
//! termination phase.
//!
//! The pods are real: `podgrace-node`'s pod task runs them with the kubelet's rules, each in
//! its own network namespace (pod IP). Their readiness and termination drive the EndpointSlice
//! conditions of their endpoints (ready / serving / terminating), which the proxy sees after
//! the endpoint lag L.
//!
//! A rollout is a Deployment's with `maxSurge: 1, maxUnavailable: 0`: a new pod is created, and
//! once it is ready one old pod is deleted (terminating pods do not count as available, so the
//! next new pod follows at once); repeated for every replica.
//!
//! A drill runs in named steps ([`steps`]: plan, start, load, trigger, observe, attribute); the
//! replicas ([`replicas`]), the EndpointSlice view of their statuses ([`endpoint_table`]) and the
//! reading of a pod's termination ([`termination`]) are modules of their own. [`api`] is the
//! same drill through the Kubernetes API (`PODGRACE_DRILL_API=1`): the embedded serve's
//! Deployment controller, kubelet and EndpointSlices instead of the drill's own pods.

pub mod api;
mod endpoint_table;
mod replicas;
mod steps;
mod termination;

use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_core::rules::latency::RuntimeLatencies;
use podgrace_core::KubeVersion;
use podgrace_node::process::namespaces_permitted;
use podgrace_node::runtime::{
    CallContext, ContainerdRuntime, ProcessRuntime, RuntimeService, StopEvent,
};
use podgrace_node::sandbox::NetworkConfig;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::endpoints::LagModel;
use crate::html::ChartEvent;
use crate::load::{self, ClientKind, Protocol};
use crate::proxy::Balancing;
use crate::report::{Attribution, DrillReport};
use crate::streams::StreamRecord;

/// What happens to the pods while the load runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// One pod at a time is replaced, as a Deployment with maxSurge 1, maxUnavailable 0 does.
    Rollout,
    /// One replica is deleted (`kubectl delete pod`).
    Delete,
    /// One replica is evicted at a soft or hard threshold.
    Evict {
        /// A hard threshold (grace period 0) rather than a soft one.
        hard: bool,
    },
    /// The node is drained as `kubectl drain` does it: cordoned, then every pod evicted
    /// through `pods/eviction`, each eviction the PodDisruptionBudgets refuse (429) retried
    /// after 5 s. Only through the API ([`api`]).
    Drain,
}

impl Scenario {
    /// `rollout`, `delete`, `evict-soft` or `evict-hard`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Rollout => "rollout",
            Scenario::Delete => "delete",
            Scenario::Evict { hard: false } => "evict-soft",
            Scenario::Evict { hard: true } => "evict-hard",
            Scenario::Drain => "drain",
        }
    }
}

/// A drill's settings.
#[derive(Debug, Clone)]
pub struct DrillConfig {
    /// What happens to the pods while the load runs.
    pub scenario: Scenario,
    /// How many pods serve (at least one).
    pub replicas: usize,
    /// Requests per second; 0 sends no requests (a drill of streams only).
    pub rps: f64,
    /// The protocol of the requests (HTTP/1.1 or h2c); the proxy speaks the same.
    pub protocol: Protocol,
    /// Long-lived data streams held open through the drill (each re-opened when it ends).
    pub data_streams: usize,
    /// How long each data stream lasts, seconds.
    pub stream_seconds: f64,
    /// Idle streams (no data, never ending by themselves) held open through the drill.
    pub idle_streams: usize,
    /// How long the load runs.
    pub duration: Duration,
    /// How endpoint changes reach the proxy: a fixed lag L, or kube-proxy's sync.
    pub lag: LagModel,
    /// kube-proxy (per connection, L4) or an L7 ingress (per request).
    pub balancing: Balancing,
    /// What the load's client does with its connections.
    pub client: ClientKind,
    /// The path every request asks for (`/` by default).
    pub path: String,
    /// The method of every request (`GET` by default).
    pub method: Method,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Keep-alive connections of the load.
    pub connections: usize,
    /// The port the pods serve on.
    pub port: u16,
    /// When the disruption starts, after the load started.
    pub disrupt_after: Duration,
    /// The Kubernetes release whose kubelet (and, through the API, API server and
    /// controllers) is reproduced.
    pub version: KubeVersion,
    /// kubelet evictionMaxPodGracePeriod for a soft eviction, seconds.
    pub eviction_max_pod_grace_period: i64,
    /// The flags of [`Scenario::Delete`]'s delete (`kubectl delete pod --grace-period N
    /// --force --now`); a rollout's deletes come from the ReplicaSet controller, with the pod's
    /// own grace.
    pub delete: KubectlDeleteFlags,
    /// The host-only range the pods take their addresses from.
    pub network: NetworkConfig,
}

/// What a drill produced.
#[derive(Debug, Clone)]
pub struct DrillOutcome {
    /// The report (`drill -o json`).
    pub report: DrillReport,
    /// Every request, for the chart.
    pub requests: Vec<load::RequestRecord>,
    /// Every stream (empty without streams).
    pub streams: Vec<StreamRecord>,
    /// Termination events of the pods, for the chart.
    pub events: Vec<ChartEvent>,
    /// Every failed request, with its pod and termination phase.
    pub attributions: Vec<Attribution>,
    /// What to change, with numbers.
    pub advice: Vec<String>,
}

/// `1.0 s`, or `kube-proxy's sync (minSyncPeriod 1.0 s)`.
pub fn lag_text(lag: LagModel) -> String {
    match lag {
        LagModel::Fixed(l) => format!("{:.1} s", l.as_secs_f64()),
        LagModel::KubeProxy {
            min_sync_period, ..
        } => format!(
            "kube-proxy's sync, minSyncPeriod {:.1} s",
            min_sync_period.as_secs_f64()
        ),
        LagModel::PerPod(r) => format!(
            "per pod, uniform in {:.1}..{:.1} s (seed {})",
            r.min.as_secs_f64(),
            r.max.as_secs_f64(),
            r.seed
        ),
    }
}

/// Why a drill could not run.
#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    /// The pods need their own network namespaces (pod IPs); that needs root.
    #[error("the drill gives each pod its own network namespace and address, which needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN)")]
    NoNamespaces,
    /// A pod did not become ready.
    #[error("pod {pod} did not become ready within {seconds} s (is it listening on port {port}, and does its readiness probe pass?){}", last_warning.as_ref().map(|w| format!("; its last warning: {w}")).unwrap_or_default())]
    NotReady {
        /// The pod's name.
        pod: String,
        /// How long it was given, seconds.
        seconds: u64,
        /// The port the load would go to.
        port: u16,
        /// The pod's last Warning event, as `REASON (container C): MESSAGE`.
        last_warning: Option<String>,
    },
    /// The scenario exists only through the API (`PODGRACE_DRILL_API=1`).
    #[error("the {0} scenario goes through the API: set PODGRACE_DRILL_API=1")]
    NeedsApi(&'static str),
    /// The API refused a call of the drill, or the manifest could not be applied.
    #[error("the API: {0}")]
    Api(String),
    /// A pod could not be run.
    #[error("pod {pod}: {reason}")]
    Pod {
        /// The pod's name.
        pod: String,
        /// Why, as the pod task or the API said it.
        reason: String,
    },
    /// The service proxy could not start.
    #[error("the proxy: {0}")]
    Proxy(#[from] crate::proxy::ProxyError),
    /// The load could not start or failed.
    #[error("the load: {0}")]
    Load(#[from] crate::load::LoadError),
    /// The streams could not start.
    #[error("the streams: {0}")]
    Streams(#[from] crate::streams::StreamError),
}

impl DrillError {
    /// Whether this machine failed, not the manifest or the flags: no network namespaces
    /// (no root) or a proxy that could not bind. `podgrace drill` exits 3 for these and 2 for
    /// the rest (a pod that does not start or get ready is the manifest's).
    pub fn is_machine_failure(&self) -> bool {
        matches!(self, DrillError::NoNamespaces | DrillError::Proxy(_))
    }
}

/// Runs one drill of `template` (the pod every replica runs). `log` receives one line per
/// lifecycle step (for a progress display).
///
/// # Errors
/// [`DrillError`] if pods cannot run or become ready, or the proxy or load cannot start.
pub async fn run_drill(
    template: &PodPlan,
    config: &DrillConfig,
    log: mpsc::UnboundedSender<String>,
) -> Result<DrillOutcome, DrillError> {
    run_drill_on(&PodRuntime::Process, template, config, log).await
}

/// Which runtime the drill's pods run on.
#[derive(Clone)]
pub enum PodRuntime {
    /// The built-in process runtime (a new one per drill, on [`DrillConfig::network`]).
    Process,
    /// The process runtime with a real runtime's measured latencies added around every stop
    /// and restart (`drill --runtime-latency containerd`), drawn by a sampler seeded with the
    /// `u64` (`podgrace_core::rules::latency`): a native sidecar then outlives its app as on
    /// containerd 1.6.
    ProcessWithLatencies(&'static RuntimeLatencies, u64),
    /// A real containerd, already connected (its output stream is the caller's); the pods'
    /// addresses come from its CNI config.
    Containerd(Arc<ContainerdRuntime>),
}

impl PodRuntime {
    /// `Some` for the process runtime, with the latencies and their seed of
    /// [`PodRuntime::ProcessWithLatencies`] (`None` inside without them); `None` for containerd.
    /// The drill through the API ([`api::run_drill_api`]) runs on the process runtime only.
    pub fn process_latencies(&self) -> Option<Option<(&'static RuntimeLatencies, u64)>> {
        match self {
            PodRuntime::Process => Some(None),
            PodRuntime::ProcessWithLatencies(l, seed) => Some(Some((*l, *seed))),
            PodRuntime::Containerd(_) => None,
        }
    }
}

/// [`run_drill`] on the runtime `on`.
///
/// # Errors
/// As [`run_drill`]; [`DrillError::NoNamespaces`] only for the process runtime.
pub async fn run_drill_on(
    on: &PodRuntime,
    template: &PodPlan,
    config: &DrillConfig,
    log: mpsc::UnboundedSender<String>,
) -> Result<DrillOutcome, DrillError> {
    match on {
        PodRuntime::Process | PodRuntime::ProcessWithLatencies(..) => {
            if !namespaces_permitted() {
                return Err(DrillError::NoNamespaces);
            }
            let (runtime, mut output) = ProcessRuntime::new(config.network.clone());
            let runtime = match on {
                PodRuntime::ProcessWithLatencies(l, seed) => runtime.with_latencies(**l, *seed),
                _ => runtime,
            };
            let runtime = Arc::new(runtime);
            // The pods' own output is not part of the drill's report.
            tokio::spawn(async move { while output.recv().await.is_some() {} });
            let events = runtime.clone();
            drill(
                runtime,
                &move |id| events.stop_events(id),
                true,
                template,
                config,
                log,
            )
            .await
        }
        PodRuntime::Containerd(runtime) => {
            let events = runtime.clone();
            drill(
                runtime.clone(),
                &move |id| events.stop_events(id),
                false,
                template,
                config,
                log,
            )
            .await
        }
    }
}

/// The drill's steps in order ([`steps`]), on `runtime`.
async fn drill<R: RuntimeService + 'static>(
    runtime: Arc<R>,
    stop_events: &(dyn Fn(&str) -> Vec<StopEvent> + Send + Sync),
    process: bool,
    template: &PodPlan,
    config: &DrillConfig,
    log: mpsc::UnboundedSender<String>,
) -> Result<DrillOutcome, DrillError> {
    let cx = steps::Context {
        config,
        template,
        log: log.clone(),
        epoch: Instant::now(),
    };
    let plan = steps::plan(&cx);
    let (change_tx, change_rx) = mpsc::unbounded_channel();
    let replicas = replicas::Replicas::new(runtime, template, config, !process, log, change_tx);
    let steps::Started { plan, mut replicas } =
        steps::start(&cx, plan, replicas, change_rx).await?;
    let loaded = steps::load(&cx, &plan).await?;
    let disruption = steps::trigger(&cx, &mut replicas).await?;
    let mut pods = steps::OwnPods::new(replicas);
    let observed = steps::observe(&cx, plan, &mut pods, loaded, &disruption).await?;
    let sandboxes = observed.sandboxes();
    let outcome = steps::attribute(&cx, observed, &disruption, stop_events, process);
    for sb in sandboxes {
        let _ = pods
            .runtime
            .remove_pod_sandbox(&CallContext::background(), &sb)
            .await;
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_namespaces_and_the_proxy_are_the_machine_s_failures() {
        assert!(DrillError::NoNamespaces.is_machine_failure());
        let proxy = crate::proxy::ProxyError::Listen {
            addr: ([127, 0, 0, 1], 8080).into(),
            source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
        };
        assert!(DrillError::Proxy(proxy).is_machine_failure());
        assert!(!DrillError::NeedsApi("drain").is_machine_failure());
        assert!(!DrillError::Api("refused".into()).is_machine_failure());
        let not_ready = DrillError::NotReady {
            pod: "web-1".into(),
            seconds: 30,
            port: 8080,
            last_warning: None,
        };
        assert!(!not_ready.is_machine_failure());
        let pod = DrillError::Pod {
            pod: "web-1".into(),
            reason: "no command".into(),
        };
        assert!(!pod.is_machine_failure());
    }

    #[test]
    fn only_the_process_runtime_has_process_latencies() {
        assert!(matches!(
            PodRuntime::Process.process_latencies(),
            Some(None)
        ));
        let l = podgrace_core::rules::latency::RuntimeProfile::Containerd.latencies();
        match PodRuntime::ProcessWithLatencies(l, 7).process_latencies() {
            Some(Some((got, 7))) => assert!(std::ptr::eq(got, l)),
            other => panic!(
                "expected the latencies with seed 7, got {:?}",
                other.map(|o| o.map(|x| x.1))
            ),
        }
    }
}
