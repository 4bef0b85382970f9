//! A drill's steps, in order: [`plan`] (the epoch, kube-proxy's netfilter or its stand-in, the
//! endpoint feed), [`start`] (the replicas, ready, and the initial endpoints), [`load`] (the
//! proxy, the streams and the request load), [`trigger`] (the rollout, delete or eviction),
//! [`observe`] (the load's end, the disrupted pods' end, the records of the proxies and of the
//! kernel) and [`attribute`] (every failure to a pod and a phase, the report and the advice).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_node::kubelet::{build_report, PodCommand, PodReport};
use podgrace_node::process::namespaces_permitted;
use podgrace_node::runtime::{RuntimeService, StopEvent};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::endpoint_table::{feed_endpoints, EndpointTable};
use super::replicas::{wait_pod, wait_ready, Replica, Replicas};
use super::termination::{container_stops_of, pod_termination};
use super::{lag_text, DrillConfig, DrillError, DrillOutcome, Scenario};
use crate::advice::{self, Inputs, Routable};
use crate::endpoints::{EndpointsHandle, RouteSink};
use crate::html::ChartEvent;
use crate::load::{self, LoadConfig, LoadResult, Protocol};
use crate::proxy::netfilter::Netfilter;
use crate::proxy::{Balancing, Mode, PinnedConnection, Proxy, ProxyConfig, ProxyRecord};
use crate::report::{
    attribute as attribute_requests, attribute_streams, by_index, DrillReport, DrillSettings,
    LagRangeSettings, StreamSummary, TerminationFigures,
};
use crate::streams::{StreamConfig, StreamRecord, Streams};

/// What every step shares: the drill's settings, its pod template, its log and its epoch.
pub(super) struct Context<'a> {
    pub config: &'a DrillConfig,
    pub template: &'a PodPlan,
    pub log: mpsc::UnboundedSender<String>,
    /// The instant every time of the drill counts from.
    pub epoch: Instant,
}

impl Context<'_> {
    pub(super) fn say(&self, line: String) {
        let _ = self.log.send(line);
    }
}

/// Step 1's result: how the Service is reached, and the feed its endpoints go through.
pub(super) struct Plan {
    /// kube-proxy on the kernel's DNAT and conntrack (kube-proxy mode with netfilter).
    netfilter: Option<Arc<Netfilter>>,
    /// The Service's endpoints, reaching the proxy (or netfilter) with the lag.
    pub(super) endpoints: EndpointsHandle,
    /// The task that feeds the endpoints (from the replicas' statuses, or from the
    /// EndpointSlices through the API), aborted once the pods are gone.
    pub(super) feeder: Option<JoinHandle<()>>,
}

/// Step 1: kube-proxy mode gets the kernel's DNAT and conntrack, else the user-space L4 splice
/// stands in (said on the log); the endpoint feed with the configured lag.
pub(super) fn plan(cx: &Context<'_>) -> Plan {
    let config = cx.config;
    let netfilter = match config.balancing {
        Balancing::PerConnection => {
            let host_ip = std::net::Ipv4Addr::from(u32::from(config.network.base) | 1);
            match Netfilter::available().and_then(|()| Netfilter::start(host_ip, cx.epoch)) {
                Ok(nf) => Some(Arc::new(nf)),
                Err(e) => {
                    cx.say(format!(
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
    Plan {
        netfilter,
        endpoints,
        feeder: None,
    }
}

/// Step 2's result: the replicas, ready, and the task that feeds their endpoints.
pub(super) struct Started<R: RuntimeService + 'static> {
    pub(super) plan: Plan,
    pub(super) replicas: Replicas<R>,
}

/// Step 2: starts `config.replicas` pods (at least one), waits for each to be ready, and puts
/// their endpoints in place before any load (the statuses queued while they started are settled
/// into them, not replayed with the lag).
///
/// # Errors
/// [`DrillError::NotReady`] or [`DrillError::Pod`] for a pod that does not get ready.
pub(super) async fn start<R: RuntimeService + 'static>(
    cx: &Context<'_>,
    plan: Plan,
    mut replicas: Replicas<R>,
    mut change_rx: mpsc::UnboundedReceiver<(String, podgrace_node::kubelet::PodStatus)>,
) -> Result<Started<R>, DrillError> {
    let config = cx.config;
    for _ in 0..config.replicas.max(1) {
        replicas.start_pod();
    }
    for i in 0..replicas.len() {
        if let Err(e) = wait_ready(replicas.get(i), config.port).await {
            replicas.abandon().await;
            return Err(e);
        }
    }
    say_proxy(cx, &plan);
    // The initial endpoints are in place before the load starts. The statuses queued while the
    // pods started are already in them: replayed later, with the lag, they would briefly put
    // the proxy back to the pods' not-ready past (no endpoint at all for a moment).
    let mut table = EndpointTable::new(config.port);
    table.settle(&mut change_rx);
    for r in replicas.all() {
        table.update(&r.name, &r.status.borrow());
    }
    plan.endpoints.publish_now(table.set());
    let mut plan = plan;
    plan.feeder = Some(tokio::spawn(feed_endpoints(
        change_rx,
        table,
        plan.endpoints.clone(),
    )));
    Ok(Started { plan, replicas })
}

/// Says on the log how the Service is carried.
pub(super) fn say_proxy(cx: &Context<'_>, plan: &Plan) {
    let config = cx.config;
    cx.say(match (&plan.netfilter, config.balancing) {
        (Some(nf), _) => format!(
            "kube-proxy: NodePort {} through the kernel's DNAT and conntrack",
            nf.local_addr()
        ),
        (None, Balancing::PerConnection) => "kube-proxy: user-space TCP proxy".to_string(),
        (None, Balancing::PerRequest) => "ingress: user-space HTTP proxy".to_string(),
    });
}

/// Step 3's result: the load under way.
pub(super) struct Loaded {
    /// The user-space proxy of the requests (none through netfilter).
    proxy: Option<Proxy>,
    /// The streams and their own user-space proxy (none through netfilter).
    streams: Option<(Option<Proxy>, Streams)>,
    /// When the load started, since the epoch.
    load_started: Duration,
    load_task: JoinHandle<Result<LoadResult, load::LoadError>>,
}

/// Step 3: the proxy in front (kube-proxy's L4 splice or an ingress), the streams the way a
/// client of the Service sends them, and the open-loop request load.
///
/// # Errors
/// [`DrillError::Proxy`] or [`DrillError::Streams`] when they cannot start.
pub(super) async fn load(cx: &Context<'_>, plan: &Plan) -> Result<Loaded, DrillError> {
    let config = cx.config;
    let (netfilter, endpoints) = (&plan.netfilter, &plan.endpoints);
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut pc = ProxyConfig::new(match (config.balancing, config.protocol) {
        // kube-proxy carries bytes (L4); only an ingress speaks HTTP.
        (Balancing::PerConnection, _) => Mode::Tcp,
        (Balancing::PerRequest, Protocol::Http1) => Mode::Http1,
        (Balancing::PerRequest, Protocol::H2c) => Mode::H2c,
    });
    pc.balancing = config.balancing;
    pc.epoch = cx.epoch;
    let proxy = match netfilter {
        Some(_) => None,
        None => Some(Proxy::start(loopback, pc, endpoints.view()).await?),
    };
    let target = match (netfilter, &proxy) {
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
        let (sproxy, starget) = match netfilter {
            Some(nf) => (None, nf.local_addr()),
            None => {
                let mut spc = ProxyConfig::new(match config.balancing {
                    Balancing::PerConnection => Mode::Tcp,
                    Balancing::PerRequest => Mode::H2c,
                });
                spc.epoch = cx.epoch;
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
        sc.epoch = cx.epoch;
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
        cx.say(format!("streams: {} held open", held.join(" and ")));
        Some((sproxy, streams))
    } else {
        None
    };
    let load_started = cx.epoch.elapsed();
    let load_task = if config.rps > 0.0 {
        let mut lc = LoadConfig::new(target, config.duration);
        lc.rps = config.rps;
        lc.protocol = config.protocol;
        lc.client = config.client;
        lc.path = config.path.clone();
        lc.method = config.method.clone();
        lc.timeout = config.timeout;
        lc.connections = config.connections;
        lc.epoch = cx.epoch;
        cx.say(format!(
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
    Ok(Loaded {
        proxy,
        streams,
        load_started,
        load_task,
    })
}

/// The pods a disruption hit, by their index among the replicas, and when each deletion (or
/// eviction) was sent, since the epoch.
#[derive(Debug, Default)]
pub(super) struct Disruption {
    pub(super) disrupted: Vec<usize>,
    pub(super) deleted_at: HashMap<usize, Duration>,
}

impl Disruption {
    pub(super) fn hit(&mut self, i: usize, at: Duration) {
        self.deleted_at.insert(i, at);
        self.disrupted.push(i);
    }
}

/// Step 4: `disrupt_after` into the load, the scenario. A rollout is a Deployment's with
/// `maxSurge: 1, maxUnavailable: 0`: a new pod is created, and once it is available (Ready for
/// minReadySeconds, `IsPodAvailable`) one old pod is deleted; repeated for every replica. A
/// delete deletes the first replica with the drill's delete flags; an eviction evicts it.
///
/// # Errors
/// As [`start`], for a rollout's new pod.
pub(super) async fn trigger<R: RuntimeService + 'static>(
    cx: &Context<'_>,
    replicas: &mut Replicas<R>,
) -> Result<Disruption, DrillError> {
    let config = cx.config;
    tokio::time::sleep(config.disrupt_after).await;
    let mut d = Disruption::default();
    match config.scenario {
        Scenario::Rollout => {
            let old: Vec<usize> = (0..replicas.len()).collect();
            let min_ready = Duration::from_secs(cx.template.min_ready_seconds.max(0) as u64);
            for i in old {
                let new = replicas.start_pod();
                wait_ready(replicas.get(new), config.port).await?;
                if !min_ready.is_zero() {
                    cx.say(format!(
                        "{}: ready; available after minReadySeconds {} s",
                        replicas.get(new).name,
                        min_ready.as_secs()
                    ));
                    tokio::time::sleep(min_ready).await;
                }
                cx.say(format!(
                    "{}: available; deleting {}",
                    replicas.get(new).name,
                    replicas.get(i).name
                ));
                replicas
                    .get(i)
                    .handle
                    .send(PodCommand::Delete(KubectlDeleteFlags::default()));
                d.hit(i, cx.epoch.elapsed());
            }
        }
        Scenario::Delete => {
            cx.say(format!("{}: deleting", replicas.get(0).name));
            replicas
                .get(0)
                .handle
                .send(PodCommand::Delete(config.delete));
            d.hit(0, cx.epoch.elapsed());
        }
        Scenario::Evict { hard } => {
            cx.say(format!("{}: evicting", replicas.get(0).name));
            replicas.get(0).handle.send(PodCommand::Evict {
                hard,
                eviction_max_pod_grace_period: config.eviction_max_pod_grace_period,
            });
            d.hit(0, cx.epoch.elapsed());
        }
        Scenario::Drain => return Err(DrillError::NeedsApi("drain")),
    }
    Ok(d)
}

/// The drill's pods as step 5 ends them: the disrupted ones awaited to the end of their
/// termination, then the rest removed quickly; every pod's run report in the drill's order.
pub(super) trait PodSet {
    /// Waits for the disrupted pods (`d.disrupted`) to end their termination.
    async fn end_disrupted(&mut self, cx: &Context<'_>, d: &Disruption) -> Result<(), DrillError>;
    /// Removes the other pods (grace period 1) and returns every pod's run report, in the
    /// drill's order.
    async fn end_rest(&mut self, cx: &Context<'_>) -> Result<Vec<(String, PodReport)>, DrillError>;
}

/// The replicas the drill runs itself, as [`PodSet`].
pub(super) struct OwnPods<R: RuntimeService + 'static> {
    pub(super) runtime: Arc<R>,
    waiting: Vec<(usize, Replica)>,
    reports: Vec<(usize, String, PodReport)>,
}

impl<R: RuntimeService + 'static> OwnPods<R> {
    pub(super) fn new(replicas: Replicas<R>) -> Self {
        let (runtime, all) = replicas.into_parts();
        OwnPods {
            runtime,
            waiting: all.into_iter().enumerate().collect(),
            reports: Vec::new(),
        }
    }
}

impl<R: RuntimeService + 'static> PodSet for OwnPods<R> {
    async fn end_disrupted(&mut self, _: &Context<'_>, d: &Disruption) -> Result<(), DrillError> {
        let (gone, rest): (Vec<_>, Vec<_>) = self
            .waiting
            .drain(..)
            .partition(|(i, _)| d.disrupted.contains(i));
        self.waiting = rest;
        for (i, r) in gone {
            self.reports.push((i, r.name.clone(), wait_pod(r).await?));
        }
        Ok(())
    }

    async fn end_rest(&mut self, _: &Context<'_>) -> Result<Vec<(String, PodReport)>, DrillError> {
        for (_, r) in &self.waiting {
            r.handle.send(PodCommand::Delete(KubectlDeleteFlags {
                grace_period: 1,
                ..Default::default()
            }));
        }
        for (i, r) in std::mem::take(&mut self.waiting) {
            self.reports.push((i, r.name.clone(), wait_pod(r).await?));
        }
        let mut reports = std::mem::take(&mut self.reports);
        reports.sort_by_key(|(i, _, _)| *i);
        Ok(reports.into_iter().map(|(_, n, r)| (n, r)).collect())
    }
}

/// Step 5's result: everything measured, with the pods gone.
pub(super) struct Observed {
    endpoints: EndpointsHandle,
    load_started: Duration,
    load: LoadResult,
    proxy_records: Vec<ProxyRecord>,
    /// Every request connection's pod (the user-space proxy's, else the kernel's conntrack).
    pinned: Vec<PinnedConnection>,
    stream_records: Vec<StreamRecord>,
    stream_proxy_records: Vec<ProxyRecord>,
    stream_pinned: Vec<PinnedConnection>,
    /// Every pod's run report, in replica order.
    reports: Vec<(String, PodReport)>,
    /// Whether the kernel's netfilter carried the Service.
    kernel: bool,
}

/// Step 5: waits for the load to end, then for the disrupted pods to end their termination with
/// the streams still held (as clients hold them: an idle stream may keep a pod's graceful stop
/// waiting until SIGKILL), stops the streams, reads the pinning of every connection (through
/// the kernel, once the streams have ended too: they share the NodePort), and removes the
/// remaining pods quickly (their terminations are not part of the drill).
///
/// # Errors
/// [`DrillError::Load`] for the load, [`DrillError::Pod`] for a pod task that failed.
pub(super) async fn observe<P: PodSet>(
    cx: &Context<'_>,
    plan: Plan,
    pods: &mut P,
    loaded: Loaded,
    d: &Disruption,
) -> Result<Observed, DrillError> {
    let Loaded {
        proxy,
        streams,
        load_started,
        load_task,
    } = loaded;
    let Plan {
        mut netfilter,
        endpoints,
        feeder,
    } = plan;
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
    if !d.disrupted.is_empty() {
        cx.say("load done; waiting for the disrupted pods to end".into());
    }
    pods.end_disrupted(cx, d).await?;
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
    cx.say("removing the remaining pods".into());
    let reports = pods.end_rest(cx).await?;
    if let Some(f) = feeder {
        f.abort();
    }
    let kernel = netfilter.is_some();
    if let Some(nf) = netfilter.take() {
        let _ = tokio::task::spawn_blocking(move || nf.close()).await;
    }
    Ok(Observed {
        endpoints,
        load_started,
        load,
        proxy_records,
        pinned,
        stream_records,
        stream_proxy_records,
        stream_pinned,
        reports,
        kernel,
    })
}

/// Step 6: every failed request and stream to a pod and a termination phase, each disrupted
/// pod's termination against its lag, the report, the findings and the advice.
pub(super) fn attribute(
    cx: &Context<'_>,
    o: Observed,
    d: &Disruption,
    stop_events: &(dyn Fn(&str) -> Vec<StopEvent> + Send + Sync),
    process: bool,
) -> DrillOutcome {
    let (config, epoch) = (cx.config, cx.epoch);
    let lag = config.lag.nominal();
    let reports = &o.reports;
    // When each pod's endpoint reached the proxy and left it, measured on its view.
    let view = o.endpoints.view();
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
        if !d.disrupted.contains(&i) {
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
    let removed: Vec<(String, Duration)> = terminations
        .iter()
        .filter_map(|t| Some((t.pod.clone(), left_at(&t.pod)?)))
        .collect();
    let attributions =
        attribute_requests(&o.load.records, &o.proxy_records, &o.pinned, &terminations);
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
        &o.stream_records,
        &o.stream_proxy_records,
        &o.stream_pinned,
        &terminations,
    );
    let stream_summary = (config.data_streams + config.idle_streams > 0)
        .then(|| StreamSummary::build(&o.stream_records, &stream_attributions));
    let mut report = DrillReport::build(
        config.scenario.name(),
        config.rps,
        lag,
        &o.load,
        &attributions,
        pods,
        stream_summary,
    );
    report.terminations = figures(
        config,
        reports,
        d,
        &container_stops,
        &terminations,
        &report,
        &left_at,
    );
    let pods_of = |records: &[ProxyRecord]| -> HashMap<u64, String> {
        by_index(records)
            .into_iter()
            .filter_map(|(i, p)| Some((i, p.pod.clone()?)))
            .collect()
    };
    let (mut request_pods, mut stream_pods) =
        (pods_of(&o.proxy_records), pods_of(&o.stream_proxy_records));
    // A stream through L4 is on the pod conntrack (or the splice) pinned its connection to.
    for r in &o.stream_records {
        if let Some(pod) = crate::report::stream_pod(&o.stream_pinned, r) {
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
        request_records: &o.load.records,
        request_pods: &request_pods,
        stream_records: &o.stream_records,
        stream_pods: &stream_pods,
        terminations: &terminations,
        containers: &container_stops,
        endpoint_lag: lag,
        client: config.client,
        connections: config.connections,
        removed: &removed,
        load_start: o.load_started,
        load_end: o.load_started + config.duration,
        port: config.port,
        timeout: config.timeout,
        template: cx.template,
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
    report.settings = settings(config, o.kernel);
    report.advice = diagnosis.advice.clone();
    report.findings = diagnosis.findings;
    let advice = diagnosis.advice;
    DrillOutcome {
        report,
        requests: o.load.records,
        streams: o.stream_records,
        events: chart,
        attributions,
        advice,
    }
}

impl Observed {
    /// The sandboxes of every pod, for their removal once the report is made.
    pub(super) fn sandboxes(&self) -> Vec<String> {
        self.reports
            .iter()
            .filter_map(|(_, r)| r.sandbox.clone())
            .collect()
    }

    /// The pods in the report's order.
    pub(super) fn pod_names(&self) -> Vec<String> {
        self.reports.iter().map(|(n, _)| n.clone()).collect()
    }
}

/// Each disrupted pod's termination in seconds after its deletion: when its endpoint left the
/// proxy, its stop signal, its last container's exit (none while any has not exited), against
/// its own lag, and the requests it lost.
fn figures(
    config: &DrillConfig,
    reports: &[(String, PodReport)],
    d: &Disruption,
    container_stops: &[advice::ContainerStop],
    terminations: &[crate::report::PodTermination],
    report: &DrillReport,
    left_at: &dyn Fn(&str) -> Option<Duration>,
) -> Vec<TerminationFigures> {
    reports
        .iter()
        .enumerate()
        .filter_map(|(i, (name, _))| {
            let deleted = *d.deleted_at.get(&i)?;
            let after = |t: Duration| t.as_secs_f64() - deleted.as_secs_f64();
            let own_lag = config.lag.lag_of(name).as_secs_f64();
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
        .collect()
}

/// The report's settings: the proxy and how it was carried, the client, the lag, the protocol.
fn settings(config: &DrillConfig, kernel: bool) -> DrillSettings {
    DrillSettings {
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
            crate::endpoints::LagModel::Fixed(_) => "fixed",
            crate::endpoints::LagModel::KubeProxy { .. } => "kube-proxy",
            crate::endpoints::LagModel::PerPod(_) => "per-pod",
        },
        endpoint_lag_range: match config.lag {
            crate::endpoints::LagModel::PerPod(r) => Some(LagRangeSettings {
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
    }
}
