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

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_core::KubeVersion;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{
    build_report, run_pod, PodCommand, PodHandle, PodOptions, PodPhase, PodReport, PodStatus,
};
use podgrace_node::process::namespaces_permitted;
use podgrace_node::runtime::{CallContext, ProcessRuntime, RuntimeService, StopEventKind};
use podgrace_node::sandbox::NetworkConfig;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::endpoints::{Endpoint, EndpointsHandle};
use crate::html::ChartEvent;
use crate::load::{self, LoadConfig, LoadResult};
use crate::proxy::{Balancing, Mode, Proxy, ProxyConfig, ProxyRecord};
use crate::report::{attribute, Attribution, DrillReport, Phase, PodTermination};

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
    /// Requests per second.
    pub rps: f64,
    /// How long the load runs.
    pub duration: Duration,
    /// The endpoint lag L.
    pub endpoint_lag: Duration,
    /// kube-proxy (per connection) or an L7 ingress (per request).
    pub balancing: Balancing,
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
    /// The host-only range the pods take their addresses from.
    pub network: NetworkConfig,
}

/// What a drill produced.
#[derive(Debug, Clone)]
pub struct DrillOutcome {
    pub report: DrillReport,
    /// Every request, for the chart.
    pub requests: Vec<load::RequestRecord>,
    /// Termination events of the pods, for the chart.
    pub events: Vec<ChartEvent>,
    pub attributions: Vec<Attribution>,
    /// What to change, with numbers.
    pub advice: Vec<String>,
}

/// Why a drill could not run.
#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    /// The pods need their own network namespaces (pod IPs); that needs root.
    #[error("the drill gives each pod its own network namespace and address, which needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN)")]
    NoNamespaces,
    /// A pod did not become ready.
    #[error("pod {pod} did not become ready within {seconds} s (is it listening on port {port}, and does its readiness probe pass?)")]
    NotReady {
        pod: String,
        seconds: u64,
        port: u16,
    },
    /// A pod could not be run.
    #[error("pod {pod}: {reason}")]
    Pod { pod: String, reason: String },
    #[error("the proxy: {0}")]
    Proxy(#[from] crate::proxy::ProxyError),
    #[error("the load: {0}")]
    Load(#[from] crate::load::LoadError),
}

/// How long a new pod may take to become ready.
const READY_WITHIN: Duration = Duration::from_secs(30);

struct Replica {
    name: String,
    handle: PodHandle,
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
    if !namespaces_permitted() {
        return Err(DrillError::NoNamespaces);
    }
    let (runtime, mut output) = ProcessRuntime::new(config.network.clone());
    let runtime = Arc::new(runtime);
    // The pods' own output is not part of the drill's report.
    tokio::spawn(async move { while output.recv().await.is_some() {} });
    let epoch = Instant::now();
    let endpoints = EndpointsHandle::new(config.endpoint_lag);
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
        };
        // One recorder per pod: each pod's run report holds its own events only.
        let handle = run_pod(runtime.clone(), plan.clone(), opts, EventRecorder::new());
        let status = handle.status();
        watch_status(plan.name.clone(), status.clone(), change_tx.clone());
        let _ = log.send(format!("{}: created", plan.name));
        replicas.push(Replica {
            name: plan.name,
            handle,
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
    // The initial endpoints are in place before the load starts.
    let mut table = EndpointTable::new(config.port);
    for r in &replicas {
        table.update(&r.name, &r.status.borrow());
    }
    endpoints.publish_now(table.set());
    let feeder = tokio::spawn(feed_endpoints(change_rx, table, endpoints.clone()));

    let mut pc = ProxyConfig::new(Mode::Http1);
    pc.balancing = config.balancing;
    pc.epoch = epoch;
    let proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], 0)), pc, endpoints.view()).await?;
    let mut lc = LoadConfig::new(proxy.local_addr(), config.duration);
    lc.rps = config.rps;
    lc.path = config.path.clone();
    lc.method = config.method.clone();
    lc.timeout = config.timeout;
    lc.connections = config.connections;
    lc.epoch = epoch;
    let load_started = epoch.elapsed();
    let load_task = tokio::spawn(load::run(lc));
    let _ = log.send(format!(
        "load: {} requests/s for {:.1} s through the proxy (endpoint lag {:.1} s)",
        config.rps,
        config.duration.as_secs_f64(),
        config.endpoint_lag.as_secs_f64()
    ));

    tokio::time::sleep(config.disrupt_after).await;
    let mut disrupted: Vec<usize> = Vec::new();
    match config.scenario {
        Scenario::Rollout => {
            let old: Vec<usize> = (0..replicas.len()).collect();
            for i in old {
                let new = start_pod(&mut replicas);
                wait_ready(&replicas[new], config.port).await?;
                let _ = log.send(format!(
                    "{}: ready; deleting {}",
                    replicas[new].name, replicas[i].name
                ));
                replicas[i]
                    .handle
                    .send(PodCommand::Delete(KubectlDeleteFlags::default()));
                disrupted.push(i);
            }
        }
        Scenario::Delete => {
            let _ = log.send(format!("{}: deleting", replicas[0].name));
            replicas[0]
                .handle
                .send(PodCommand::Delete(KubectlDeleteFlags::default()));
            disrupted.push(0);
        }
        Scenario::Evict { hard } => {
            let _ = log.send(format!("{}: evicting", replicas[0].name));
            replicas[0].handle.send(PodCommand::Evict {
                hard,
                eviction_max_pod_grace_period: config.eviction_max_pod_grace_period,
            });
            disrupted.push(0);
        }
    }
    let load: LoadResult = load_task.await.map_err(|e| DrillError::Pod {
        pod: "load".into(),
        reason: e.to_string(),
    })??;
    let proxy_records: Vec<ProxyRecord> = proxy.records();
    proxy.shutdown().await;
    let _ = log.send("load done; removing the remaining pods".into());
    // The rest go quickly: their terminations are not part of the drill.
    for (i, r) in replicas.iter().enumerate() {
        if !disrupted.contains(&i) {
            r.handle.send(PodCommand::Delete(KubectlDeleteFlags {
                grace_period: 1,
                ..Default::default()
            }));
        }
    }
    let mut reports: Vec<(String, PodReport)> = Vec::new();
    for r in replicas {
        let report = r.handle.wait().await.map_err(|e| DrillError::Pod {
            pod: r.name.clone(),
            reason: e.to_string(),
        })?;
        reports.push((r.name, report));
    }
    feeder.abort();

    let std_epoch: std::time::Instant = epoch.into_std();
    let mut terminations = Vec::new();
    let mut chart = Vec::new();
    for (i, (name, rep)) in reports.iter().enumerate() {
        if !disrupted.contains(&i) {
            continue;
        }
        let t = pod_termination(name, rep, &runtime, std_epoch);
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
            at: t.started + config.endpoint_lag,
            label: format!("{name}: endpoint removed"),
        });
        terminations.push(t);
    }
    let namespaced = namespaces_permitted();
    let pods: Vec<serde_json::Value> = reports
        .iter()
        .map(|(_, r)| {
            serde_json::to_value(build_report(r, |id| runtime.stop_events(id), namespaced))
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
    let attributions = attribute(&load.records, &proxy_records, &terminations);
    let report = DrillReport::build(
        config.scenario.name(),
        config.rps,
        config.endpoint_lag,
        &load,
        &attributions,
        pods,
    );
    let load_end = load_started + config.duration;
    let mut advice = advice(&attributions, &terminations, config, template);
    advice.extend(coverage(&terminations, load_end));
    Ok(DrillOutcome {
        report,
        requests: load.records,
        events: chart,
        attributions,
        advice,
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
    let ok = tokio::time::timeout(
        READY_WITHIN,
        st.wait_for(|s| s.ready && s.phase == PodPhase::Running),
    )
    .await;
    match ok {
        Ok(Ok(_)) => Ok(()),
        _ => Err(DrillError::NotReady {
            pod: r.name.clone(),
            seconds: READY_WITHIN.as_secs(),
            port,
        }),
    }
}

/// The endpoints of the Service as the EndpointSlice controller writes them: one per pod with
/// an IP that is not terminal; `ready` / `serving` / `terminating` from the pod's Ready condition
/// and its deletion (`podToEndpoint`).
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
        if st.phase == PodPhase::Terminated || st.phase == PodPhase::Starting {
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
            endpoints.publish(after);
        }
    }
}

/// A disrupted pod's termination instants, from the kubelet's records and the runtime's
/// measured signals (the first container that got them).
fn pod_termination(
    name: &str,
    report: &PodReport,
    runtime: &ProcessRuntime,
    epoch: std::time::Instant,
) -> PodTermination {
    let mut started = None;
    let mut stop_signal = None;
    let mut killed = None;
    for c in &report.containers {
        for t in &c.terminations {
            let s = t.kill.started;
            started = Some(started.map_or(s, |x: std::time::Instant| x.min(s)));
            for e in runtime.stop_events(&t.container_id) {
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

/// Warnings about what the drill did not see: a disrupted pod whose stop signal or SIGKILL came
/// after the load had ended (its shutdown was not under load), and pods SIGKILLed at their
/// deadline (their app did not act on the stop signal).
fn coverage(terminations: &[PodTermination], load_end: Duration) -> Vec<String> {
    let mut out = Vec::new();
    for t in terminations {
        match t.stop_signal {
            Some(s) if s > load_end => out.push(format!(
                "the load ended at {:.1} s, before pod {} got its stop signal at {:.1} s: its shutdown was not under load; raise --duration to at least {:.0} s",
                load_end.as_secs_f64(),
                t.pod,
                s.as_secs_f64(),
                (s.as_secs_f64() + 3.0).ceil()
            )),
            None => out.push(format!(
                "pod {} got no stop signal while the drill watched it: raise --duration",
                t.pod
            )),
            _ => {}
        }
        if let (Some(s), Some(k)) = (t.stop_signal, t.killed) {
            out.push(format!(
                "pod {} was SIGKILLed {:.1} s after its stop signal, at its deadline: the app did not act on the stop signal (a PID 1 without a handler ignores it; a shell without exec does not pass it on)",
                t.pod,
                k.saturating_sub(s).as_secs_f64()
            ));
        }
    }
    out
}

/// What to change, with the numbers that show it.
fn advice(
    attributions: &[Attribution],
    terminations: &[PodTermination],
    config: &DrillConfig,
    template: &PodPlan,
) -> Vec<String> {
    let mut out = Vec::new();
    let lag = config.endpoint_lag.as_secs_f64();
    let pre_stop = template
        .containers
        .iter()
        .filter_map(|c| c.pre_stop.as_ref().and_then(|h| h.known_duration_ms()))
        .max()
        .unwrap_or(0) as f64
        / 1000.0;
    for t in terminations {
        let mine: Vec<&Attribution> = attributions
            .iter()
            .filter(|a| a.pod.as_deref() == Some(t.pod.as_str()))
            .collect();
        let after_signal = mine
            .iter()
            .filter(|a| a.phase == Phase::AfterStopSignal)
            .count();
        let after_kill = mine.iter().filter(|a| a.phase == Phase::AfterKill).count();
        let before = mine
            .iter()
            .filter(|a| a.phase == Phase::BeforeStopSignal)
            .count();
        if after_signal > 0 {
            let need = (lag.ceil() as i64).max(1);
            out.push(format!(
                "add a preStop sleep of at least {need} s (the endpoint lag is {lag:.1} s; the preStop now waits {pre_stop:.1} s): {after_signal} requests reached pod {} after its stop signal, while the proxy still sent it traffic; the app must also keep serving until it has drained",
                t.pod
            ));
        }
        if after_kill > 0 {
            out.push(format!(
                "{after_kill} requests to pod {} failed after SIGKILL: raise terminationGracePeriodSeconds ({} s now) above preStop + drain, or make the app finish sooner after its stop signal",
                t.pod, template.termination_grace_period_seconds
            ));
        }
        if before > 0 {
            out.push(format!(
                "{before} requests to pod {} failed before its stop signal: the app stopped serving during the preStop (check that the hook does not stop it, and that it stays ready)",
                t.pod
            ));
        }
    }
    let unrouted = attributions.iter().filter(|a| a.pod.is_none()).count();
    if unrouted > 0 {
        out.push(format!(
            "{unrouted} requests found no endpoint: keep more replicas ready during the disruption (maxUnavailable 0, a readiness probe that passes)"
        ));
    }
    out
}
