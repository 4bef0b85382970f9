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

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_core::rules::latency::RuntimeLatencies;
use podgrace_core::KubeVersion;
use podgrace_node::events::{EventRecorder, EventType};
use podgrace_node::kubelet::{
    build_report, run_pod, PodCommand, PodHandle, PodOptions, PodReport, PodStatus, PodWorkerState,
};
use podgrace_node::process::namespaces_permitted;
use podgrace_node::runtime::{
    CallContext, ContainerdRuntime, ProcessRuntime, RuntimeService, StopEvent, StopEventKind,
};
use podgrace_node::sandbox::NetworkConfig;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::advice::{self, ContainerStop, Inputs, Routable};
use crate::endpoints::{Endpoint, EndpointsHandle, LagModel, RouteSink};
use crate::html::ChartEvent;
use crate::load::{self, ClientKind, LoadConfig, LoadResult, Protocol};
use crate::proxy::netfilter::Netfilter;
use crate::proxy::{Balancing, Mode, PinnedConnection, Proxy, ProxyConfig, ProxyRecord};
use crate::report::{
    attribute, attribute_streams, by_index, Attribution, DrillReport, DrillSettings,
    LagRangeSettings, PodTermination, StreamSummary, TerminationFigures,
};
use crate::streams::{StreamConfig, StreamRecord, Streams};

/// What happens to the pods while the load runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// One pod at a time is replaced, as a Deployment with maxSurge 1, maxUnavailable 0 does.
    Rollout,
    /// One replica is deleted (`kubectl delete pod`).
    Delete,
    /// One replica is evicted at a soft or hard threshold.
    Evict { hard: bool },
}

impl Scenario {
    /// `rollout`, `delete`, `evict-soft` or `evict-hard`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Rollout => "rollout",
            Scenario::Delete => "delete",
            Scenario::Evict { hard: false } => "evict-soft",
            Scenario::Evict { hard: true } => "evict-hard",
        }
    }
}

/// A drill's settings.
#[derive(Debug, Clone)]
pub struct DrillConfig {
    pub scenario: Scenario,
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
    pub path: String,
    pub method: Method,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Keep-alive connections of the load.
    pub connections: usize,
    /// The port the pods serve on.
    pub port: u16,
    /// When the disruption starts, after the load started.
    pub disrupt_after: Duration,
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
    pub report: DrillReport,
    /// Every request, for the chart.
    pub requests: Vec<load::RequestRecord>,
    /// Every stream (empty without streams).
    pub streams: Vec<StreamRecord>,
    /// Termination events of the pods, for the chart.
    pub events: Vec<ChartEvent>,
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
        pod: String,
        seconds: u64,
        port: u16,
        /// The pod's last Warning event, as `REASON (container C): MESSAGE`.
        last_warning: Option<String>,
    },
    /// A pod could not be run.
    #[error("pod {pod}: {reason}")]
    Pod { pod: String, reason: String },
    #[error("the proxy: {0}")]
    Proxy(#[from] crate::proxy::ProxyError),
    #[error("the load: {0}")]
    Load(#[from] crate::load::LoadError),
    #[error("the streams: {0}")]
    Streams(#[from] crate::streams::StreamError),
}

/// How long a new pod may take to become ready.
const READY_WITHIN: Duration = Duration::from_secs(30);

struct Replica {
    name: String,
    handle: PodHandle,
    events: EventRecorder,
    status: tokio::sync::watch::Receiver<PodStatus>,
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

async fn drill<R: RuntimeService + 'static>(
    runtime: Arc<R>,
    stop_events: &(dyn Fn(&str) -> Vec<StopEvent> + Send + Sync),
    process: bool,
    template: &PodPlan,
    config: &DrillConfig,
    log: mpsc::UnboundedSender<String>,
) -> Result<DrillOutcome, DrillError> {
    let epoch = Instant::now();
    let lag = config.lag.nominal();
    // kube-proxy mode: the kernel's DNAT and conntrack, else the user-space L4 splice.
    let mut netfilter = match config.balancing {
        Balancing::PerConnection => {
            let host_ip = std::net::Ipv4Addr::from(u32::from(config.network.base) | 1);
            match Netfilter::available().and_then(|()| Netfilter::start(host_ip, epoch)) {
                Ok(nf) => Some(Arc::new(nf)),
                Err(e) => {
                    let _ = log.send(format!(
                        "kube-proxy mode without netfilter ({e}): a user-space TCP proxy stands in, which cannot show connect timeouts or stale conntrack entries"
                    ));
                    None
                }
            }
        }
        Balancing::PerRequest => None,
    };
    let endpoints = EndpointsHandle::with_model(
        config.lag,
        netfilter.clone().map(|n| n as Arc<dyn RouteSink>),
    );
    let (change_tx, change_rx) = mpsc::unbounded_channel();
    let mut replicas: Vec<Replica> = Vec::new();
    let mut next_index = 1;
    let mut start_pod = |replicas: &mut Vec<Replica>| {
        let mut plan = template.clone();
        plan.name = format!("{}-{next_index}", template.name);
        next_index += 1;
        let opts = PodOptions {
            version: config.version,
            namespace: "default".into(),
            stop_signal_overrides: BTreeMap::new(),
            force_host: false,
            images: !process,
            uid: None,
        };
        // One recorder per pod: each pod's run report holds its own events only.
        let events = EventRecorder::new();
        let handle = run_pod(runtime.clone(), plan.clone(), opts, events.clone());
        let status = handle.status();
        watch_status(plan.name.clone(), status.clone(), change_tx.clone());
        let _ = log.send(match config.lag {
            LagModel::PerPod(r) => format!(
                "{}: created (its endpoint lag {:.2} s)",
                plan.name,
                r.lag_of(&plan.name).as_secs_f64()
            ),
            _ => format!("{}: created", plan.name),
        });
        replicas.push(Replica {
            name: plan.name,
            handle,
            events,
            status,
        });
        replicas.len() - 1
    };
    for _ in 0..config.replicas.max(1) {
        start_pod(&mut replicas);
    }
    for r in &replicas {
        wait_ready(r, config.port).await?;
    }
    let _ = log.send(match (&netfilter, config.balancing) {
        (Some(nf), _) => format!(
            "kube-proxy: NodePort {} through the kernel's DNAT and conntrack",
            nf.local_addr()
        ),
        (None, Balancing::PerConnection) => "kube-proxy: user-space TCP proxy".to_string(),
        (None, Balancing::PerRequest) => "ingress: user-space HTTP proxy".to_string(),
    });
    // The initial endpoints are in place before the load starts. The statuses queued while the
    // pods started are already in them: replayed later, with the lag, they would briefly put
    // the proxy back to the pods' not-ready past (no endpoint at all for a moment).
    let mut change_rx = change_rx;
    let mut table = EndpointTable::new(config.port);
    table.settle(&mut change_rx);
    for r in &replicas {
        table.update(&r.name, &r.status.borrow());
    }
    endpoints.publish_now(table.set());
    let feeder = tokio::spawn(feed_endpoints(change_rx, table, endpoints.clone()));

    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut pc = ProxyConfig::new(match (config.balancing, config.protocol) {
        // kube-proxy carries bytes (L4); only an ingress speaks HTTP.
        (Balancing::PerConnection, _) => Mode::Tcp,
        (Balancing::PerRequest, Protocol::Http1) => Mode::Http1,
        (Balancing::PerRequest, Protocol::H2c) => Mode::H2c,
    });
    pc.balancing = config.balancing;
    pc.epoch = epoch;
    let proxy = match &netfilter {
        Some(_) => None,
        None => Some(Proxy::start(loopback, pc, endpoints.view()).await?),
    };
    let target = match (&netfilter, &proxy) {
        (Some(nf), _) => nf.local_addr(),
        (None, Some(p)) => p.local_addr(),
        (None, None) => unreachable!("a proxy or netfilter"),
    };
    // Streams go the way a client of the Service sends them. In kube-proxy mode that is the L4
    // path of the requests: the same NodePort through the kernel's DNAT, so that the pod's
    // GOAWAY and reset, a refused connect and a SYN nobody answers reach the stream's client
    // itself, and conntrack's entry tells its pod by the client port (without netfilter, an L4
    // splice of their own, pinned the same way). Through an ingress, an h2c proxy of their own
    // that pins each connection. Stream indices are their own, apart from the requests'.
    let streams = if config.data_streams + config.idle_streams > 0 {
        let (sproxy, starget) = match &netfilter {
            Some(nf) => (None, nf.local_addr()),
            None => {
                let mut spc = ProxyConfig::new(match config.balancing {
                    Balancing::PerConnection => Mode::Tcp,
                    Balancing::PerRequest => Mode::H2c,
                });
                spc.epoch = epoch;
                let p = Proxy::start(loopback, spc, endpoints.view()).await?;
                let at = p.local_addr();
                (Some(p), at)
            }
        };
        let mut sc = StreamConfig::new(starget);
        sc.data_streams = config.data_streams;
        sc.stream_seconds = config.stream_seconds;
        sc.idle_streams = config.idle_streams;
        sc.connect_timeout = config.timeout;
        sc.epoch = epoch;
        let streams = Streams::start(sc)?;
        let mut held = Vec::new();
        if config.data_streams > 0 {
            held.push(format!(
                "{} of {:.1} s",
                if config.data_streams == 1 {
                    "1 data stream".to_string()
                } else {
                    format!("{} data streams", config.data_streams)
                },
                config.stream_seconds
            ));
        }
        if config.idle_streams > 0 {
            held.push(if config.idle_streams == 1 {
                "1 idle stream".to_string()
            } else {
                format!("{} idle streams", config.idle_streams)
            });
        }
        let _ = log.send(format!("streams: {} held open", held.join(" and ")));
        Some((sproxy, streams))
    } else {
        None
    };
    let load_started = epoch.elapsed();
    let load_task = if config.rps > 0.0 {
        let mut lc = LoadConfig::new(target, config.duration);
        lc.rps = config.rps;
        lc.protocol = config.protocol;
        lc.client = config.client;
        lc.path = config.path.clone();
        lc.method = config.method.clone();
        lc.timeout = config.timeout;
        lc.connections = config.connections;
        lc.epoch = epoch;
        let _ = log.send(format!(
            "load: {} requests/s for {:.1} s through the proxy ({} client, endpoint lag {})",
            config.rps,
            config.duration.as_secs_f64(),
            config.client.name(),
            lag_text(config.lag)
        ));
        tokio::spawn(load::run(lc))
    } else {
        let duration = config.duration;
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            load::summarize(Vec::new())
        })
    };

    tokio::time::sleep(config.disrupt_after).await;
    let mut disrupted: Vec<usize> = Vec::new();
    // When each disrupted pod's deletion (or eviction) was sent, since the epoch.
    let mut deleted_at: HashMap<usize, Duration> = HashMap::new();
    match config.scenario {
        Scenario::Rollout => {
            let old: Vec<usize> = (0..replicas.len()).collect();
            // The Deployment controller deletes an old pod once the new one is available:
            // Ready for minReadySeconds (`IsPodAvailable`).
            let min_ready = Duration::from_secs(template.min_ready_seconds.max(0) as u64);
            for i in old {
                let new = start_pod(&mut replicas);
                wait_ready(&replicas[new], config.port).await?;
                if !min_ready.is_zero() {
                    let _ = log.send(format!(
                        "{}: ready; available after minReadySeconds {} s",
                        replicas[new].name,
                        min_ready.as_secs()
                    ));
                    tokio::time::sleep(min_ready).await;
                }
                let _ = log.send(format!(
                    "{}: available; deleting {}",
                    replicas[new].name, replicas[i].name
                ));
                replicas[i]
                    .handle
                    .send(PodCommand::Delete(KubectlDeleteFlags::default()));
                deleted_at.insert(i, epoch.elapsed());
                disrupted.push(i);
            }
        }
        Scenario::Delete => {
            let _ = log.send(format!("{}: deleting", replicas[0].name));
            replicas[0].handle.send(PodCommand::Delete(config.delete));
            deleted_at.insert(0, epoch.elapsed());
            disrupted.push(0);
        }
        Scenario::Evict { hard } => {
            let _ = log.send(format!("{}: evicting", replicas[0].name));
            replicas[0].handle.send(PodCommand::Evict {
                hard,
                eviction_max_pod_grace_period: config.eviction_max_pod_grace_period,
            });
            deleted_at.insert(0, epoch.elapsed());
            disrupted.push(0);
        }
    }
    let load: LoadResult = load_task.await.map_err(|e| DrillError::Pod {
        pod: "load".into(),
        reason: e.to_string(),
    })??;
    if let Some(nf) = &netfilter {
        let answered = load
            .records
            .iter()
            .any(|r| r.outcome != crate::load::RequestOutcome::ConnectTimeout);
        if !answered && !load.records.is_empty() {
            let nf = Arc::clone(nf);
            let state = tokio::task::spawn_blocking(move || nf.diagnose())
                .await
                .unwrap_or_default();
            tracing::warn!(
                "no connection to the NodePort got an answer; the kernel's state:\n{state}"
            );
        }
    }
    // Through the kernel, the pinning is read once the streams have ended too (they share the
    // NodePort).
    let (proxy_records, user_space_pinned): (Vec<ProxyRecord>, Option<Vec<PinnedConnection>>) =
        match proxy {
            Some(proxy) => {
                let r = (proxy.records(), Some(proxy.pinned()));
                proxy.shutdown().await;
                r
            }
            None => (Vec::new(), None),
        };
    // The disrupted pods end their termination with the streams still held, as clients hold
    // them (an idle stream may keep a pod's graceful stop waiting until SIGKILL).
    let mut waiting: Vec<(usize, Replica)> = replicas.into_iter().enumerate().collect();
    let mut reports: Vec<(usize, String, PodReport)> = Vec::new();
    if !disrupted.is_empty() {
        let _ = log.send("load done; waiting for the disrupted pods to end".into());
    }
    let (gone, rest): (Vec<_>, Vec<_>) =
        waiting.drain(..).partition(|(i, _)| disrupted.contains(i));
    for (i, r) in gone {
        reports.push((i, r.name.clone(), wait_pod(r).await?));
    }
    let (stream_records, stream_proxy_records, stream_pinned) = match streams {
        Some((Some(sproxy), streams)) => {
            let records = streams.stop().await;
            let (p, pinned) = (sproxy.records(), sproxy.pinned());
            sproxy.shutdown().await;
            (records, p, Some(pinned))
        }
        Some((None, streams)) => (streams.stop().await, Vec::new(), None),
        None => (Vec::new(), Vec::new(), None),
    };
    // The kernel's pinning of every connection to the NodePort, requests' and streams'.
    let kernel_pinned = match &netfilter {
        Some(nf) => {
            let nf = Arc::clone(nf);
            tokio::task::spawn_blocking(move || nf.pinned())
                .await
                .unwrap_or_default()
        }
        None => Vec::new(),
    };
    let pinned = user_space_pinned.unwrap_or_else(|| kernel_pinned.clone());
    let stream_pinned = stream_pinned.unwrap_or(kernel_pinned);
    let _ = log.send("removing the remaining pods".into());
    // The rest go quickly: their terminations are not part of the drill.
    for (_, r) in &rest {
        r.handle.send(PodCommand::Delete(KubectlDeleteFlags {
            grace_period: 1,
            ..Default::default()
        }));
    }
    for (i, r) in rest {
        reports.push((i, r.name.clone(), wait_pod(r).await?));
    }
    reports.sort_by_key(|(i, _, _)| *i);
    let reports: Vec<(String, PodReport)> = reports.into_iter().map(|(_, n, r)| (n, r)).collect();
    feeder.abort();
    let kernel = netfilter.is_some();
    if let Some(nf) = netfilter.take() {
        let _ = tokio::task::spawn_blocking(move || nf.close()).await;
    }
    // When each pod's endpoint reached the proxy and left it, measured on its view.
    let view = endpoints.view();
    let route_changes = view.changes();
    let since_epoch = |t: Instant| t.saturating_duration_since(epoch);
    let mut routable: Vec<Routable> = Vec::new();
    for c in route_changes.iter().filter(|c| c.joined) {
        if !routable.iter().any(|r| r.pod == c.pod) {
            routable.push(Routable {
                pod: c.pod.clone(),
                since: since_epoch(c.at),
            });
        }
    }
    let left_at = |pod: &str| view.left_at(pod).map(since_epoch);

    let std_epoch: std::time::Instant = epoch.into_std();
    let mut terminations = Vec::new();
    let mut container_stops = Vec::new();
    let mut chart = Vec::new();
    for (i, (name, rep)) in reports.iter().enumerate() {
        if !disrupted.contains(&i) {
            continue;
        }
        let t = pod_termination(name, rep, stop_events, std_epoch);
        container_stops.extend(container_stops_of(name, rep, stop_events, std_epoch));
        chart.push(ChartEvent {
            at: t.started,
            label: format!("{name}: terminating"),
        });
        if let Some(s) = t.stop_signal {
            chart.push(ChartEvent {
                at: s,
                label: format!("{name}: stop signal"),
            });
        }
        if let Some(k) = t.killed {
            chart.push(ChartEvent {
                at: k,
                label: format!("{name}: SIGKILL"),
            });
        }
        chart.push(ChartEvent {
            at: left_at(name).unwrap_or(t.started + config.lag.lag_of(name)),
            label: format!("{name}: endpoint removed"),
        });
        terminations.push(t);
    }
    // containerd gives every container its own PID namespace.
    let namespaced = !process || namespaces_permitted();
    let pods: Vec<serde_json::Value> = reports
        .iter()
        .map(|(_, r)| {
            serde_json::to_value(build_report(r, stop_events, namespaced))
                .unwrap_or(serde_json::Value::Null)
        })
        .collect();
    for (_, r) in &reports {
        if let Some(sb) = &r.sandbox {
            let _ = runtime
                .remove_pod_sandbox(&CallContext::background(), sb)
                .await;
        }
    }
    let removed: Vec<(String, Duration)> = terminations
        .iter()
        .filter_map(|t| Some((t.pod.clone(), left_at(&t.pod)?)))
        .collect();
    let attributions = attribute(&load.records, &proxy_records, &pinned, &terminations);
    for a in &attributions {
        tracing::debug!(
            request = a.request,
            outcome = ?a.outcome,
            pod = a.pod.as_deref().unwrap_or("-"),
            at_ms = a.at.as_millis() as u64,
            phase = ?a.phase,
            "failed request"
        );
    }
    for t in &terminations {
        tracing::debug!(
            pod = %t.pod,
            started_ms = t.started.as_millis() as u64,
            stop_signal_ms = t.stop_signal.map(|d| d.as_millis() as u64),
            killed_ms = t.killed.map(|d| d.as_millis() as u64),
            "termination"
        );
    }
    let stream_attributions = attribute_streams(
        &stream_records,
        &stream_proxy_records,
        &stream_pinned,
        &terminations,
    );
    let stream_summary = (config.data_streams + config.idle_streams > 0)
        .then(|| StreamSummary::build(&stream_records, &stream_attributions));
    let mut report = DrillReport::build(
        config.scenario.name(),
        config.rps,
        lag,
        &load,
        &attributions,
        pods,
        stream_summary,
    );
    let figures = reports
        .iter()
        .enumerate()
        .filter_map(|(i, (name, _))| {
            let deleted = *deleted_at.get(&i)?;
            let after = |t: Duration| t.as_secs_f64() - deleted.as_secs_f64();
            let own_lag = config.lag.lag_of(name).as_secs_f64();
            // The last container's exit; none while any container has not exited.
            let exits: Vec<Option<Duration>> = container_stops
                .iter()
                .filter(|c| &c.pod == name)
                .map(|c| c.exited)
                .collect();
            let ended = if exits.iter().any(Option::is_none) {
                None
            } else {
                exits.iter().flatten().max().map(|e| after(*e))
            };
            Some(TerminationFigures {
                pod: name.clone(),
                endpoint_lag_seconds: own_lag,
                endpoint_removed_seconds: left_at(name).map(after),
                stop_signal_seconds: terminations
                    .iter()
                    .find(|t| &t.pod == name)
                    .and_then(|t| t.stop_signal)
                    .map(after),
                ended_seconds: ended,
                end_minus_lag_seconds: ended.map(|e| e - own_lag),
                failed: report
                    .failures_by_pod
                    .iter()
                    .find(|f| f.pod.as_deref() == Some(name.as_str()))
                    .map_or(0, |f| f.failed),
            })
        })
        .collect();
    report.terminations = figures;
    let pods_of = |records: &[ProxyRecord]| -> HashMap<u64, String> {
        by_index(records)
            .into_iter()
            .filter_map(|(i, p)| Some((i, p.pod.clone()?)))
            .collect()
    };
    let (mut request_pods, mut stream_pods) =
        (pods_of(&proxy_records), pods_of(&stream_proxy_records));
    // A stream through L4 is on the pod conntrack (or the splice) pinned its connection to.
    for r in &stream_records {
        if let Some(pod) = crate::report::stream_pod(&stream_pinned, r) {
            stream_pods.entry(r.index).or_insert(pod);
        }
    }
    // A failure the proxy never saw is on the pod its connection was pinned to.
    for a in &attributions {
        if let Some(pod) = &a.pod {
            request_pods.entry(a.request).or_insert_with(|| pod.clone());
        }
    }
    let inputs = Inputs {
        routable: &routable,
        requests: &attributions,
        streams: &stream_attributions,
        request_records: &load.records,
        request_pods: &request_pods,
        stream_records: &stream_records,
        stream_pods: &stream_pods,
        terminations: &terminations,
        containers: &container_stops,
        endpoint_lag: lag,
        client: config.client,
        connections: config.connections,
        removed: &removed,
        load_start: load_started,
        load_end: load_started + config.duration,
        port: config.port,
        timeout: config.timeout,
        template,
    };
    let diagnosis = advice::diagnose(&inputs);
    for g in &diagnosis.findings.gave_up {
        if let Some(at) = container_stops
            .iter()
            .find(|c| c.pod == g.pod && c.container == g.container)
            .and_then(|c| c.exited)
        {
            chart.push(ChartEvent {
                at,
                label: format!("{}/{}: gave up", g.pod, g.container),
            });
        }
    }
    report.settings = DrillSettings {
        proxy: match config.balancing {
            Balancing::PerConnection => "kube-proxy",
            Balancing::PerRequest => "ingress",
        },
        proxy_implementation: match (config.balancing, kernel) {
            (Balancing::PerRequest, _) => None,
            (_, true) => Some("netfilter"),
            (_, false) => Some("userspace"),
        },
        client: config.client.name(),
        endpoint_lag_model: match config.lag {
            LagModel::Fixed(_) => "fixed",
            LagModel::KubeProxy { .. } => "kube-proxy",
            LagModel::PerPod(_) => "per-pod",
        },
        endpoint_lag_range: match config.lag {
            LagModel::PerPod(r) => Some(LagRangeSettings {
                min_seconds: r.min.as_secs_f64(),
                max_seconds: r.max.as_secs_f64(),
                seed: r.seed,
            }),
            _ => None,
        },
        protocol: match config.protocol {
            Protocol::Http1 => "http1",
            Protocol::H2c => "h2c",
        },
        duration_seconds: config.duration.as_secs_f64(),
        replicas: config.replicas.max(1),
    };
    report.advice = diagnosis.advice.clone();
    report.findings = diagnosis.findings;
    let advice = diagnosis.advice;
    Ok(DrillOutcome {
        report,
        requests: load.records,
        streams: stream_records,
        events: chart,
        attributions,
        advice,
    })
}

async fn wait_pod(r: Replica) -> Result<PodReport, DrillError> {
    r.handle.wait().await.map_err(|e| DrillError::Pod {
        pod: r.name.clone(),
        reason: e.to_string(),
    })
}

/// Forwards every status change of a pod to the endpoint feeder.
fn watch_status(
    name: String,
    mut status: tokio::sync::watch::Receiver<PodStatus>,
    tx: mpsc::UnboundedSender<(String, PodStatus)>,
) {
    tokio::spawn(async move {
        loop {
            let st = status.borrow_and_update().clone();
            if tx.send((name.clone(), st)).is_err() {
                return;
            }
            if status.changed().await.is_err() {
                return;
            }
        }
    });
}

async fn wait_ready(r: &Replica, port: u16) -> Result<(), DrillError> {
    let mut st = r.status.clone();
    let last_warning = || {
        r.events
            .events()
            .iter()
            .rev()
            .find(|e| e.kind == EventType::Warning)
            .map(|e| match &e.container {
                Some(c) => format!("{} (container {c}): {}", e.reason, e.message),
                None => format!("{}: {}", e.reason, e.message),
            })
    };
    // A container that could not be created or started (`Failed`: no such file, a bad working
    // directory) is known at once: no need to wait out the readiness window for it.
    let failed_start = async {
        loop {
            if let Some(e) = r.events.events().iter().find(|e| {
                e.kind == EventType::Warning && e.reason == podgrace_node::events::reason::FAILED
            }) {
                return match &e.container {
                    Some(c) => format!("container {c} could not start: {}", e.message),
                    None => format!("it could not start: {}", e.message),
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let ok = tokio::time::timeout(READY_WITHIN, async {
        tokio::select! {
            r = st.wait_for(|s| s.ready && s.phase == PodWorkerState::Running) => Ok(r.is_ok()),
            why = failed_start => Err(why),
        }
    })
    .await;
    match ok {
        Ok(Ok(true)) => Ok(()),
        Ok(Err(why)) => Err(DrillError::Pod {
            pod: r.name.clone(),
            reason: format!("{why} (`podgrace run FILE` shows more)"),
        }),
        Ok(Ok(false)) => Err(DrillError::Pod {
            pod: r.name.clone(),
            reason: "it stopped before it became ready (`podgrace run FILE` shows why)".into(),
        }),
        Err(_) => Err(DrillError::NotReady {
            pod: r.name.clone(),
            seconds: READY_WITHIN.as_secs(),
            port,
            last_warning: last_warning(),
        }),
    }
}

/// The endpoints of the Service as the EndpointSlice controller writes them: one per pod with
/// an IP that is not terminal (`ShouldPodBeInEndpoints` with terminating pods included), so a
/// new pod is listed `ready: false` as soon as its sandbox has an address, before its containers
/// run; `ready` / `serving` / `terminating` from the pod's Ready condition and its deletion
/// (`podToEndpoint`). A terminating pod keeps its Ready condition while its readiness probe
/// passes (the kubelet keeps probing until the containers have stopped), so its endpoint is
/// `ready: false, serving: true, terminating: true`; it is removed once the pod is terminal
/// (every container stopped), before the API object is gone. Recorded on a real 1.32 cluster
/// (`cases/real-cluster-1.32.md` d): the slice gained a new pod 77 ms after it was created
/// (ready=false), turned an old one r=F s=T t=T 17 ms after its deletionTimestamp, and dropped it
/// 6 ms after its phase went Succeeded.
struct EndpointTable {
    port: u16,
    pods: BTreeMap<String, Endpoint>,
}

impl EndpointTable {
    fn new(port: u16) -> Self {
        EndpointTable {
            port,
            pods: BTreeMap::new(),
        }
    }

    fn update(&mut self, pod: &str, st: &PodStatus) {
        let Some(ip) = st.pod_ip else {
            return;
        };
        let phase = match st.phase {
            PodWorkerState::Starting => podgrace_core::rules::endpoints::PodPhase::Pending,
            PodWorkerState::Running | PodWorkerState::Terminating => {
                podgrace_core::rules::endpoints::PodPhase::Running
            }
            // The kubelet reports Succeeded or Failed once every container has stopped.
            PodWorkerState::Terminated => podgrace_core::rules::endpoints::PodPhase::Succeeded,
        };
        if !podgrace_core::rules::endpoints::should_pod_be_in_endpoints(
            phase,
            true,
            st.terminating_since.is_some(),
            true,
        ) {
            self.pods.remove(pod);
            return;
        }
        let address = SocketAddr::new(ip, self.port);
        let conditions = podgrace_core::rules::endpoints::pod_to_endpoint_conditions(
            st.ready,
            st.terminating_since.is_some(),
            false,
        );
        self.pods.insert(
            pod.to_string(),
            Endpoint {
                pod: pod.to_string(),
                address,
                ready: conditions.ready,
                serving: conditions.serving,
                terminating: conditions.terminating,
            },
        );
    }

    /// Applies every status change queued in `changes` now, without publishing any of them.
    fn settle(&mut self, changes: &mut mpsc::UnboundedReceiver<(String, PodStatus)>) {
        while let Ok((pod, st)) = changes.try_recv() {
            self.update(&pod, &st);
        }
    }

    fn set(&self) -> Vec<Endpoint> {
        self.pods.values().cloned().collect()
    }
}

async fn feed_endpoints(
    mut changes: mpsc::UnboundedReceiver<(String, PodStatus)>,
    mut table: EndpointTable,
    endpoints: EndpointsHandle,
) {
    while let Some((pod, st)) = changes.recv().await {
        let before = table.set();
        table.update(&pod, &st);
        let after = table.set();
        if before != after {
            tracing::debug!(
                pod = %pod,
                phase = ?st.phase,
                ready = st.ready,
                terminating = st.terminating_since.is_some(),
                "endpoint change published"
            );
            endpoints.publish(after);
        }
    }
}

/// A disrupted pod's termination instants, from the kubelet's records and the runtime's
/// measured signals (the first container that got them).
fn pod_termination(
    name: &str,
    report: &PodReport,
    stop_events: &dyn Fn(&str) -> Vec<StopEvent>,
    epoch: std::time::Instant,
) -> PodTermination {
    let mut started = None;
    let mut stop_signal = None;
    let mut killed = None;
    for c in &report.containers {
        for t in &c.terminations {
            let s = t.kill.started;
            started = Some(started.map_or(s, |x: std::time::Instant| x.min(s)));
            for e in stop_events(&t.container_id) {
                if e.at < t.kill.started {
                    continue;
                }
                let keep_min = |slot: &mut Option<std::time::Instant>| {
                    *slot = Some(slot.map_or(e.at, |x| x.min(e.at)));
                };
                match e.kind {
                    StopEventKind::StopSignalSent { .. } => keep_min(&mut stop_signal),
                    StopEventKind::KillSent => keep_min(&mut killed),
                    _ => {}
                }
            }
        }
    }
    let rel = |t: std::time::Instant| t.saturating_duration_since(epoch);
    PodTermination {
        pod: name.to_string(),
        started: started.map(rel).unwrap_or_default(),
        stop_signal: stop_signal.map(rel),
        killed: killed.map(rel),
    }
}

/// The stop of every container of a disrupted pod (its last termination), from the runtime's
/// measured signals and exit.
fn container_stops_of(
    name: &str,
    report: &PodReport,
    stop_events: &dyn Fn(&str) -> Vec<StopEvent>,
    epoch: std::time::Instant,
) -> Vec<ContainerStop> {
    let rel = |t: std::time::Instant| t.saturating_duration_since(epoch);
    report
        .containers
        .iter()
        .filter_map(|c| {
            let t = c
                .terminations
                .iter()
                .rev()
                .find(|t| t.killer == podgrace_node::kubelet::Killer::PodWorker)?;
            let mut stop = ContainerStop {
                pod: name.to_string(),
                container: c.name.clone(),
                stop_signal: None,
                killed: None,
                exited: None,
                budget_seconds: t.kill.stop_timeout_seconds,
            };
            for e in stop_events(&t.container_id) {
                if e.at < t.kill.started {
                    continue;
                }
                let slot = match e.kind {
                    StopEventKind::StopSignalSent { .. } => &mut stop.stop_signal,
                    StopEventKind::KillSent => &mut stop.killed,
                    StopEventKind::Exited { .. } => &mut stop.exited,
                    _ => continue,
                };
                slot.get_or_insert(rel(e.at));
            }
            Some(stop)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn status(phase: PodWorkerState, ip: u8, ready: bool) -> PodStatus {
        PodStatus {
            phase,
            pod_ip: Some(IpAddr::V4(Ipv4Addr::new(198, 18, 77, ip))),
            ready,
            terminating_since: None,
            grace_period_seconds: None,
            last_delete: None,
        }
    }

    /// The statuses of two pods' start (not ready, then ready) are settled into the initial
    /// endpoints; the feeder then has nothing stale to publish, so the proxy never sees a set
    /// without a ready endpoint (a 503 that was counted before the stop signal in the drill).
    #[tokio::test(start_paused = true)]
    async fn the_start_of_the_pods_is_not_replayed_after_the_lag() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for (pod, ip) in [("web-1", 2), ("web-2", 3)] {
            for (phase, ready) in [
                (PodWorkerState::Starting, false),
                (PodWorkerState::Running, false),
                (PodWorkerState::Running, true),
            ] {
                tx.send((pod.to_string(), status(phase, ip, ready)))
                    .unwrap();
            }
        }
        let mut table = EndpointTable::new(8080);
        table.settle(&mut rx);
        let set = table.set();
        assert_eq!(set.len(), 2);
        assert!(set.iter().all(|e| e.ready), "{set:?}");

        let endpoints = EndpointsHandle::new(Duration::from_secs(1));
        endpoints.publish_now(set);
        let view = endpoints.view();
        let initial = view.routes();
        let feeder = tokio::spawn(feed_endpoints(rx, table, endpoints.clone()));
        // Through the lag and past it, the proxy keeps the initial routes: nothing of the
        // pods' start is published again.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            Arc::ptr_eq(&initial, &view.routes()),
            "routes were replaced"
        );
        // A real change still goes through, a lag after it happens.
        tx.send((
            "web-1".to_string(),
            status(PodWorkerState::Terminated, 2, false),
        ))
        .unwrap();
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(view.routes().targets.len(), 2);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(view.routes().targets.len(), 1);
        feeder.abort();
    }
}
