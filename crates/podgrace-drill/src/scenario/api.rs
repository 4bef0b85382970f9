//! The drill through the Kubernetes API (`PODGRACE_DRILL_API=1`): the manifest is applied
//! through a `kube::Client` (the embedded serve's, [`crate::embedded`]), the pods are the
//! Deployment's, run by the embedded kubelet, and the scenario is a sequence of API calls:
//!
//! * rollout: the pod template's `kubectl.kubernetes.io/restartedAt` annotation is set, as
//!   `kubectl rollout restart` sets it, and the Deployment controller replaces the pods;
//! * delete: the first pod is deleted with the `kubectl delete` flags' DeleteOptions;
//! * evict-soft / evict-hard: the first pod is evicted through `pods/eviction` with
//!   `gracePeriodSeconds` the kubelet's override for a node-pressure eviction
//!   (min(evictionMaxPodGracePeriod, terminationGracePeriodSeconds), or 1 for a hard threshold
//!   since 1.31, 0 before);
//! * drain: the node is cordoned (`spec.unschedulable`), then every pod is evicted, each
//!   eviction refused with 429 retried after 5 s, as `kubectl drain` does.
//!
//! The drill's proxy (or the kernel's netfilter) follows the Service's EndpointSlices as
//! kube-proxy does ([`crate::kubeproxy::endpoints_of`], with the endpoint lag), so an endpoint
//! leaves it when the EndpointSlice controller marks it terminating. The report has the shape
//! of the drill's own path: each pod's run report comes from the embedded kubelet's pod
//! worker ([`crate::embedded::EndedPod`]).
//!
//! Upstream: `staging/src/k8s.io/kubectl/pkg/polymorphichelpers/objectrestarter.go`
//! (`restartedAt`), `staging/src/k8s.io/kubectl/pkg/drain/drain.go` (`evictPods`: a 429 is
//! retried after 5 s), `staging/src/k8s.io/kubectl/pkg/drain/cordon.go`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::kubectl_delete;
use podgrace_node::kubelet::PodReport;
use podgrace_node::process::namespaces_permitted;
use podgrace_node::runtime::StopEvent;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use super::steps::{self, Context, Disruption, PodSet};
use super::{DrillConfig, DrillError, DrillOutcome, Scenario};
use crate::embedded::{EmbeddedConfig, EmbeddedServe, EndedPod};
use crate::endpoints::EndpointsHandle;
use crate::kubeproxy::{endpoints_of, LABEL_SERVICE_NAME};

/// The environment variable that sends `podgrace drill FILE` (and the demo) through the API:
/// `1` (or `true`) for [`run_drill_api`], anything else (or unset) for the drill's own pods.
pub const API_SWITCH: &str = "PODGRACE_DRILL_API";

/// Whether [`API_SWITCH`] asks for the API path.
pub fn api_requested() -> bool {
    matches!(
        std::env::var(API_SWITCH).as_deref(),
        Ok("1") | Ok("true") | Ok("yes")
    )
}

/// How long a pod may take to become ready (the drill's own path gives it as long), and a
/// disrupted pod to end after the load (plus its grace period).
const READY_WITHIN: Duration = Duration::from_secs(30);

/// How long the pods left after the drill have to end (deleted with grace period 1).
const END_WITHIN: Duration = Duration::from_secs(15);

/// Runs one drill of `manifest` (YAML: a Deployment, or a bare pod that becomes a Deployment
/// of `config.replicas` with `maxSurge: 1, maxUnavailable: 0`, the drill's own rollout; a
/// Service and PodDisruptionBudgets as given, else a NodePort Service on `config.port`) in an
/// embedded serve. `template` is the same pod template, parsed, for the advice. `latencies`
/// are added to the process runtime as `--runtime-latency` adds them.
///
/// # Errors
/// [`DrillError::NoNamespaces`] without root, [`DrillError::Api`] for a manifest the API
/// refuses or an API call that fails, [`DrillError::NotReady`] for a pod that does not get
/// ready, and as [`super::run_drill`].
pub async fn run_drill_api(
    manifest: &str,
    template: &PodPlan,
    config: &DrillConfig,
    latencies: Option<(
        &'static podgrace_core::rules::latency::RuntimeLatencies,
        u64,
    )>,
    log: mpsc::UnboundedSender<String>,
) -> Result<DrillOutcome, DrillError> {
    if !namespaces_permitted() {
        return Err(DrillError::NoNamespaces);
    }
    let serve = EmbeddedServe::start(&EmbeddedConfig {
        node_name: podgrace_node::kubelet::pod::NODE_NAME.to_string(),
        version: config.version,
        network: config.network.clone(),
        lag: config.lag,
        claims_dir: podgrace_api::claims::DEFAULT_DIR.into(),
        latencies,
        // The drill's own proxy follows the EndpointSlices (`feed_slices`).
        kube_proxy: false,
    })
    .map_err(|e| DrillError::Api(e.to_string()))?;
    let result = drill_with(&serve, manifest, template, config, log).await;
    tracing::debug!("drill api: shutting the embedded serve down");
    serve.shutdown(Duration::from_secs(5)).await;
    tracing::debug!("drill api: the embedded serve is down");
    result
}

/// The drill's steps against the API `serve` gives.
async fn drill_with(
    serve: &EmbeddedServe,
    manifest: &str,
    template: &PodPlan,
    config: &DrillConfig,
    log: mpsc::UnboundedSender<String>,
) -> Result<DrillOutcome, DrillError> {
    let client = serve.client();
    let cx = Context {
        config,
        template,
        log: log.clone(),
        epoch: Instant::now(),
    };
    let applied = apply(&client, manifest, config).await?;
    let mut plan = steps::plan(&cx);
    let mut pods = ApiPods::start(serve, &client, &applied, cx.epoch);
    pods.wait_ready(&cx, &applied, &plan.endpoints).await?;
    steps::say_proxy(&cx, &plan);
    plan.feeder = Some(feed_slices(
        client.clone(),
        applied.service.clone(),
        applied.port_name.clone(),
        plan.endpoints.clone(),
    ));
    let loaded = steps::load(&cx, &plan).await?;
    tokio::time::sleep(config.disrupt_after).await;
    let sent = pods.trigger(&cx, &applied).await?;
    let observed = steps::observe(&cx, plan, &mut pods, loaded, &sent).await?;
    // The report's order is the pods that have a run report; a rollout's deletions are the
    // ReplicaSet controller's, at the instant the watcher saw each.
    let deleted = pods.deleted.lock().map(|m| m.clone()).unwrap_or_default();
    let order = observed.pod_names();
    let mut d = Disruption::default();
    for i in &sent.disrupted {
        let Some(name) = pods.names.get(*i) else {
            continue;
        };
        let Some(j) = order.iter().position(|n| n == name) else {
            continue;
        };
        match sent.deleted_at.get(i).or_else(|| deleted.get(name)) {
            Some(at) => d.hit(j, *at),
            None => d.disrupted.push(j),
        }
    }
    let stop_events = pods.stop_events.clone();
    let events = move |id: &str| stop_events.get(id).cloned().unwrap_or_default();
    Ok(steps::attribute(&cx, observed, &d, &events, true))
}

/// What was applied: the namespace, the Deployment, its Service and the port the load goes to.
struct Applied {
    namespace: String,
    deployment: String,
    /// `matchLabels` of the Deployment's selector, as a label selector.
    selector: String,
    service: String,
    /// The Service port's name (`""` when unnamed).
    port_name: String,
}

/// Applies the manifest's objects: the Deployment (or the bare pod as one), the Service (or a
/// NodePort one), PodDisruptionBudgets.
async fn apply(
    client: &kube::Client,
    manifest: &str,
    config: &DrillConfig,
) -> Result<Applied, DrillError> {
    let bad = |e: String| DrillError::Api(e);
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(manifest).map_err(|e| bad(format!("the manifest: {e}")))?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| d.is_object()).collect();
    let kind = |d: &Value| d["kind"].as_str().unwrap_or_default().to_string();
    let namespace = docs
        .iter()
        .find_map(|d| d["metadata"]["namespace"].as_str())
        .unwrap_or("default")
        .to_string();
    let mut deployment = match docs.iter().find(|d| kind(d) == "Deployment") {
        Some(d) => d.clone(),
        None => {
            let pod = docs
                .iter()
                .find(|d| kind(d) == "Pod")
                .ok_or_else(|| bad("the manifest has no Deployment and no Pod".into()))?;
            let name = pod["metadata"]["name"].as_str().unwrap_or("drill");
            let mut labels = pod["metadata"]["labels"].clone();
            if !labels.is_object() || labels.as_object().is_some_and(|l| l.is_empty()) {
                labels = json!({"app": name});
            }
            let mut meta = pod["metadata"].clone();
            meta["labels"] = labels.clone();
            if let Some(m) = meta.as_object_mut() {
                m.remove("name");
                m.remove("namespace");
            }
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "selector": {"matchLabels": labels},
                    "strategy": {"type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                    "template": {"metadata": meta, "spec": pod["spec"].clone()},
                },
            })
        }
    };
    deployment["spec"]["replicas"] = json!(config.replicas.max(1));
    deployment["metadata"]["namespace"] = json!(namespace);
    let name = deployment["metadata"]["name"]
        .as_str()
        .unwrap_or("drill")
        .to_string();
    let labels: BTreeMap<String, String> =
        serde_json::from_value(deployment["spec"]["selector"]["matchLabels"].clone())
            .unwrap_or_default();
    let selector = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let d: Deployment =
        serde_json::from_value(deployment).map_err(|e| bad(format!("the Deployment: {e}")))?;
    Api::<Deployment>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &d)
        .await
        .map_err(|e| bad(format!("creating deployment {name}: {e}")))?;
    let service = match docs.iter().find(|d| kind(d) == "Service") {
        Some(s) => s.clone(),
        None => json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": "NodePort", "selector": labels,
                "ports": [{"name": "http", "port": 80, "targetPort": config.port}]},
        }),
    };
    let svc: Service =
        serde_json::from_value(service).map_err(|e| bad(format!("the Service: {e}")))?;
    let svc = Api::<Service>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &svc)
        .await
        .map_err(|e| bad(format!("creating the Service: {e}")))?;
    let port_name = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .and_then(|p| p.name.clone())
        .unwrap_or_default();
    for pdb in docs.iter().filter(|d| kind(d) == "PodDisruptionBudget") {
        let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
            serde_json::from_value(pdb.clone())
                .map_err(|e| bad(format!("the PodDisruptionBudget: {e}")))?;
        Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(
            client.clone(),
            &namespace,
        )
        .create(&PostParams::default(), &pdb)
        .await
        .map_err(|e| bad(format!("creating the PodDisruptionBudget: {e}")))?;
    }
    Ok(Applied {
        namespace,
        deployment: name,
        selector,
        service: svc.metadata.name.unwrap_or_default(),
        port_name,
    })
}

/// Feeds `endpoints` from the Service's EndpointSlices, as kube-proxy follows them.
fn feed_slices(
    client: kube::Client,
    service: String,
    port_name: String,
    endpoints: EndpointsHandle,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let wake = Arc::new(Notify::new());
        let slices: Store<EndpointSlice> =
            podgrace_controllers::informer::start(&client, wake.clone());
        let _ = slices.wait_until_ready().await;
        let mut last = None;
        loop {
            let set = slice_endpoints(&slices, &service, &port_name);
            if last.as_ref() != Some(&set) {
                endpoints.publish(set.clone());
                last = Some(set);
            }
            wake.notified().await;
        }
    })
}

/// The endpoints of the Service's port from the slices in `store`.
fn slice_endpoints(
    store: &Store<EndpointSlice>,
    service: &str,
    port_name: &str,
) -> crate::endpoints::EndpointSet {
    let all = store.state();
    let own: Vec<&EndpointSlice> = all
        .iter()
        .filter(|s| {
            s.metadata.deletion_timestamp.is_none()
                && s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_SERVICE_NAME))
                    .map(String::as_str)
                    == Some(service)
        })
        .map(|s| s.as_ref())
        .collect();
    endpoints_of(&own, port_name, "TCP")
}

/// The Deployment's pods as the drill sees them through the API: their names in the order they
/// appeared, when each was seen deleted, and each one's run report once it ended.
struct ApiPods<'a> {
    serve: &'a EmbeddedServe,
    client: kube::Client,
    namespace: String,
    /// Every pod of the Deployment, in the order it appeared (the drill's order).
    names: Vec<String>,
    seen: Arc<Mutex<Vec<String>>>,
    /// When each pod was first seen with a deletionTimestamp, since the epoch.
    deleted: Arc<Mutex<HashMap<String, Duration>>>,
    watcher: tokio::task::JoinHandle<()>,
    ended: HashMap<String, EndedPod>,
    /// The runtime's stop events of every ended pod's containers, by container id.
    stop_events: HashMap<String, Vec<StopEvent>>,
}

impl<'a> ApiPods<'a> {
    fn start(serve: &'a EmbeddedServe, client: &kube::Client, a: &Applied, epoch: Instant) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let deleted = Arc::new(Mutex::new(HashMap::new()));
        let watcher = {
            let (seen, deleted) = (seen.clone(), deleted.clone());
            let pods: Api<Pod> = Api::namespaced(client.clone(), &a.namespace);
            let selector = a.selector.clone();
            tokio::spawn(async move {
                use futures_util::StreamExt;
                let cfg = kube::runtime::watcher::Config::default().labels(&selector);
                let mut stream =
                    std::pin::pin!(kube::runtime::watcher(pods, cfg).default_backoff());
                use kube::runtime::WatchStreamExt;
                while let Some(ev) = stream.next().await {
                    let Ok(ev) = ev else { continue };
                    let objs: Vec<Pod> = match ev {
                        kube::runtime::watcher::Event::Apply(p)
                        | kube::runtime::watcher::Event::InitApply(p)
                        | kube::runtime::watcher::Event::Delete(p) => vec![p],
                        _ => Vec::new(),
                    };
                    for p in objs {
                        let Some(name) = p.metadata.name.clone() else {
                            continue;
                        };
                        if let Ok(mut s) = seen.lock() {
                            if !s.contains(&name) {
                                s.push(name.clone());
                            }
                        }
                        if p.metadata.deletion_timestamp.is_some() {
                            if let Ok(mut d) = deleted.lock() {
                                d.entry(name).or_insert_with(|| epoch.elapsed());
                            }
                        }
                    }
                }
            })
        };
        ApiPods {
            serve,
            client: client.clone(),
            namespace: a.namespace.clone(),
            names: Vec::new(),
            seen,
            deleted,
            watcher,
            ended: HashMap::new(),
            stop_events: HashMap::new(),
        }
    }

    fn api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Brings the names seen by the watcher into the drill's order.
    fn refresh(&mut self) {
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        for n in seen {
            if !self.names.contains(&n) {
                self.names.push(n);
            }
        }
    }

    /// Waits until the Deployment's `replicas` pods are Ready and in the EndpointSlices, and
    /// puts their endpoints in place before any load.
    async fn wait_ready(
        &mut self,
        cx: &Context<'_>,
        a: &Applied,
        endpoints: &EndpointsHandle,
    ) -> Result<(), DrillError> {
        let want = cx.config.replicas.max(1);
        let wake = Arc::new(Notify::new());
        let slices: Store<EndpointSlice> =
            podgrace_controllers::informer::start(&self.client, wake.clone());
        let _ = slices.wait_until_ready().await;
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let set = slice_endpoints(&slices, &a.service, &a.port_name);
            if set.iter().filter(|e| e.ready).count() >= want {
                // Settled, not replayed with the lag: the initial endpoints.
                endpoints.publish_now(set);
                break;
            }
            if let Some(e) = self.failed_start(&a.selector).await {
                return Err(e);
            }
            if Instant::now() >= deadline {
                let pods = self
                    .api()
                    .list(&ListParams::default().labels(&a.selector))
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default();
                let pod = pods
                    .iter()
                    .find(|p| !is_ready(p))
                    .and_then(|p| p.metadata.name.clone())
                    .unwrap_or_else(|| a.deployment.clone());
                return Err(DrillError::NotReady {
                    pod,
                    seconds: READY_WITHIN.as_secs(),
                    port: cx.config.port,
                    last_warning: None,
                });
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), wake.notified()).await;
        }
        // The ready pods, first, in name order (the ReplicaSet's random suffixes).
        let mut ready: Vec<String> = self
            .api()
            .list(&ListParams::default().labels(&a.selector))
            .await
            .map_err(|e| DrillError::Api(e.to_string()))?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        ready.sort();
        self.names = ready;
        self.refresh();
        cx.say(format!(
            "{}: {} ready through the API ({})",
            a.deployment,
            self.names.len(),
            self.names.join(", ")
        ));
        Ok(())
    }

    /// A container of the Deployment's pods that could not be created or started: the
    /// kubelet's `Failed` Warning event on the pod (no such file, a bad working directory), known
    /// at once, as the drill's own path knows it from its pod workers.
    async fn failed_start(&self, selector: &str) -> Option<DrillError> {
        let pods: Vec<String> = self
            .api()
            .list(&ListParams::default().labels(selector))
            .await
            .ok()?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let list = events.list(&ListParams::default()).await.ok()?;
        let e = list.items.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(podgrace_node::events::reason::FAILED)
                && e.involved_object.kind.as_deref() == Some("Pod")
                && e.involved_object
                    .name
                    .as_ref()
                    .is_some_and(|n| pods.contains(n))
        })?;
        let message = e.message.unwrap_or_default();
        let container = e
            .involved_object
            .field_path
            .as_deref()
            .and_then(|f| {
                f.strip_prefix("spec.containers{")
                    .or(f.strip_prefix("spec.initContainers{"))
            })
            .and_then(|f| f.strip_suffix('}'))
            .map(str::to_string);
        let why = match container {
            Some(c) => format!("container {c} could not start: {message}"),
            None => format!("it could not start: {message}"),
        };
        Some(DrillError::Pod {
            pod: e.involved_object.name.unwrap_or_default(),
            reason: format!("{why} (`podgrace run FILE` shows more)"),
        })
    }

    /// The scenario as API calls.
    async fn trigger(&mut self, cx: &Context<'_>, a: &Applied) -> Result<Disruption, DrillError> {
        let config = cx.config;
        let mut d = Disruption::default();
        let api_err = |e: kube::Error| DrillError::Api(e.to_string());
        let first = self.names.first().cloned().unwrap_or_default();
        match config.scenario {
            Scenario::Rollout => {
                let now = podgrace_kubelet::status::rfc3339(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64),
                );
                let patch = json!({"spec": {"template": {"metadata": {"annotations": {
                    "kubectl.kubernetes.io/restartedAt": now}}}}});
                cx.say(format!("deployment.apps/{} restarted", a.deployment));
                Api::<Deployment>::namespaced(self.client.clone(), &a.namespace)
                    .patch(
                        &a.deployment,
                        &PatchParams::default(),
                        &Patch::Strategic(patch),
                    )
                    .await
                    .map_err(api_err)?;
                // Every old pod is replaced; its deletion instant is the watcher's.
                d.disrupted = (0..self.names.len()).collect();
            }
            Scenario::Delete => {
                let req =
                    kubectl_delete(config.delete).map_err(|e| DrillError::Api(e.to_string()))?;
                let dp = DeleteParams {
                    grace_period_seconds: req.grace_period_seconds.map(|g| g as u32),
                    ..DeleteParams::default()
                };
                cx.say(format!("pod \"{first}\" deleted"));
                let at = cx.epoch.elapsed();
                self.api().delete(&first, &dp).await.map_err(api_err)?;
                d.hit(0, at);
            }
            Scenario::Evict { hard } => {
                // The kubelet's override for its node-pressure eviction, sent as the
                // eviction's DeleteOptions.
                let grace = podgrace_core::rules::eviction::grace_period_override(
                    hard,
                    config.eviction_max_pod_grace_period,
                    Some(cx.template.termination_grace_period_seconds),
                    config.version,
                )
                .max(0);
                let ep = EvictParams {
                    delete_options: Some(DeleteParams {
                        grace_period_seconds: Some(grace as u32),
                        ..DeleteParams::default()
                    }),
                    ..EvictParams::default()
                };
                cx.say(format!("evicting pod {}/{first}", a.namespace));
                let at = cx.epoch.elapsed();
                self.api().evict(&first, &ep).await.map_err(api_err)?;
                d.hit(0, at);
            }
            Scenario::Drain => {
                let node = podgrace_node::kubelet::pod::NODE_NAME;
                Api::<Node>::all(self.client.clone())
                    .patch(
                        node,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"unschedulable": true}})),
                    )
                    .await
                    .map_err(api_err)?;
                cx.say(format!("node/{node} cordoned"));
                let evicted = Arc::new(Mutex::new(HashMap::new()));
                let mut tasks = tokio::task::JoinSet::new();
                for (i, name) in self.names.clone().into_iter().enumerate() {
                    let (api, evicted, log, epoch) =
                        (self.api(), evicted.clone(), cx.log.clone(), cx.epoch);
                    let ns = a.namespace.clone();
                    tasks.spawn(async move {
                        let _ = log.send(format!("evicting pod {ns}/{name}"));
                        loop {
                            match api.evict(&name, &EvictParams::default()).await {
                                Ok(_) => {
                                    if let Ok(mut e) = evicted.lock() {
                                        e.insert(i, epoch.elapsed());
                                    }
                                    let _ = log.send(format!("pod/{name} evicted"));
                                    return;
                                }
                                Err(kube::Error::Api(s)) if s.code == 429 => {
                                    let _ = log.send(format!(
                                        "error when evicting pods/\"{name}\" -n \"{ns}\" (will retry after 5s): {}",
                                        s.message
                                    ));
                                    tokio::time::sleep(Duration::from_secs(5)).await;
                                }
                                Err(kube::Error::Api(s)) if s.code == 404 => return,
                                Err(e) => {
                                    let _ =
                                        log.send(format!("error when evicting pods/\"{name}\": {e}"));
                                    return;
                                }
                            }
                        }
                    });
                }
                // kubectl drain waits for its evictions (no --timeout); the drill waits until
                // the load ends, then gives up on the pods a PodDisruptionBudget still
                // protects, as `kubectl drain --timeout` would.
                let until = config.duration.saturating_sub(config.disrupt_after);
                let all = async { while tasks.join_next().await.is_some() {} };
                if tokio::time::timeout(until, all).await.is_err() {
                    tasks.abort_all();
                    let done = evicted.lock().map(|e| e.len()).unwrap_or(0);
                    cx.say(format!(
                        "error: unable to drain node \"{node}\": {} of {} pods not evicted before the load ended",
                        self.names.len() - done,
                        self.names.len()
                    ));
                }
                for (i, at) in evicted.lock().map(|e| e.clone()).unwrap_or_default() {
                    d.hit(i, at);
                }
                d.disrupted.sort_unstable();
            }
        }
        Ok(d)
    }

    /// Waits for pod `name`'s worker to end (at most `within`) and keeps its report.
    async fn wait_ended(&mut self, name: &str, within: Duration) -> Result<(), DrillError> {
        if self.ended.contains_key(name) {
            return Ok(());
        }
        let p = self
            .serve
            .ended_pod(&self.namespace, name, within)
            .await
            .ok_or_else(|| DrillError::Pod {
                pod: name.to_string(),
                reason: format!("did not end within {} s", within.as_secs()),
            })?;
        self.stop_events
            .extend(p.stop_events.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.ended.insert(name.to_string(), p);
        Ok(())
    }
}

/// The pod's Ready condition is True.
fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl PodSet for ApiPods<'_> {
    async fn end_disrupted(&mut self, cx: &Context<'_>, d: &Disruption) -> Result<(), DrillError> {
        let within = READY_WITHIN
            + Duration::from_secs(cx.template.termination_grace_period_seconds.max(0) as u64);
        for i in d.disrupted.clone() {
            let name = self.names[i].clone();
            self.wait_ended(&name, within).await?;
        }
        Ok(())
    }

    async fn end_rest(&mut self, cx: &Context<'_>) -> Result<Vec<(String, PodReport)>, DrillError> {
        // Nothing replaces the pods any more, then each goes with grace period 1.
        self.serve.stop_controllers();
        tracing::debug!("drill api: controllers stopped");
        self.refresh();
        let dp = DeleteParams {
            grace_period_seconds: Some(1),
            ..DeleteParams::default()
        };
        let rest: Vec<String> = self
            .names
            .iter()
            .filter(|n| !self.ended.contains_key(*n))
            .cloned()
            .collect();
        for n in &rest {
            tracing::debug!(pod = %n, "drill api: deleting");
            let _ = self.api().delete(n, &dp).await;
        }
        let deadline = Instant::now() + END_WITHIN;
        for n in &rest {
            // A pod that never started (a rollout's pod deleted before it ran) has no report.
            // A pod the scheduler never bound (a drain's replacement on the cordoned node) is
            // gone from the API at once, with no pod worker and no report.
            loop {
                if self.wait_ended(n, Duration::from_millis(500)).await.is_ok() {
                    break;
                }
                if matches!(self.api().get_opt(n).await, Ok(None)) && !self.ended.contains_key(n) {
                    break;
                }
                if Instant::now() >= deadline {
                    cx.say(format!(
                        "pod {n}: did not end within {} s",
                        END_WITHIN.as_secs()
                    ));
                    break;
                }
            }
        }
        self.watcher.abort();
        Ok(self
            .names
            .iter()
            .filter_map(|n| Some((n.clone(), self.ended.get(n)?.report.clone())))
            .collect())
    }
}
