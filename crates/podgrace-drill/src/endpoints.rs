//! The service proxy's view of a Service's endpoints: EndpointSlice conditions fed in by the
//! drill, delivered to the proxy after the endpoint lag L, filtered by kube-proxy's rule and
//! balanced round robin.
//!
//! What is modelled (spec `termination.md` §8, cases README reference-model item 8):
//! * Every [`EndpointSet`] update takes effect in the proxy's view `L` after it was published
//!   ([`EndpointsHandle::publish`]): a pod whose termination starts at `t` (its endpoint turns
//!   `terminating`, not `ready`) leaves the proxy's view at `t + L`. The lag is the sum of what it
//!   is upstream (EndpointSlice controller → apiserver → kube-proxy watch → iptables/nftables sync,
//!   or a cloud load balancer's deregistration); it applies alike to pods joining and leaving, as a
//!   propagation delay does. [`EndpointsHandle::publish_now`] bypasses it (initial setup).
//! * Which endpoints get traffic is kube-proxy's `CategorizeEndpoints` for the Cluster traffic
//!   policy, reused from [`podgrace_core::rules::endpoints::categorize_endpoints`]: the ready
//!   ones, or, when none is ready, the serving-and-terminating ones (KEP-1669).
//! * New connections (or requests, with per-request balancing) are spread round robin over that
//!   list, as IPVS `rr` does (iptables mode picks at random with equal probability; the long-run
//!   shares are the same).
//!
//! Not modelled: topology hints, the Local traffic policy, session affinity, weights.

use podgrace_core::rules::endpoints::{
    categorize_endpoints, ProxyEndpoint, ServiceTrafficPolicies, TrafficPolicy,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// One EndpointSlice endpoint: a pod's address and its conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The pod's name (for attribution).
    pub pod: String,
    /// The pod's `ip:port`.
    pub address: SocketAddr,
    /// `ready`: serving and not terminating.
    pub ready: bool,
    /// `serving`: the pod's Ready condition is True.
    pub serving: bool,
    /// `terminating`: the pod has a deletionTimestamp.
    pub terminating: bool,
}

impl Endpoint {
    /// A ready, serving, not terminating endpoint (a running pod that passed readiness).
    pub fn ready(pod: impl Into<String>, address: SocketAddr) -> Self {
        Endpoint {
            pod: pod.into(),
            address,
            ready: true,
            serving: true,
            terminating: false,
        }
    }

    /// The same endpoint once its pod's termination has started: `terminating`, not `ready`;
    /// `serving` stays as the pod's readiness says (`pod_ready`).
    pub fn terminating(&self, pod_ready: bool) -> Self {
        Endpoint {
            ready: false,
            serving: pod_ready,
            terminating: true,
            ..self.clone()
        }
    }
}

/// The endpoints of one Service port (the union of its EndpointSlices).
pub type EndpointSet = Vec<Endpoint>;

/// How long a proxy keeps its old view after an endpoint change: the endpoint lag L.
///
/// Presets, with their sources (cases `R25`):
/// * `in-cluster`: 1 s, kube-proxy's usual programming delay (the drill's default, issue 4).
/// * `ingress`: 30 s, an ALB ingress in IP mode whose health checks remove a target after up to
///   15 s × 2 = 30 s (quay/quay#6871, which raised preStop 30 → 45 s because of it).
/// * `cloud-lb`: 120 s, an NLB/ALB with IP targets measured to keep sending new connections
///   ~2 minutes after deregistration (kubernetes-sigs/aws-load-balancer-controller#2366).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LagPreset {
    /// `in-cluster`: 1 s.
    InCluster,
    /// `ingress`: 30 s.
    Ingress,
    /// `cloud-lb`: 120 s.
    CloudLb,
}

/// A lag preset name that is not one of `in-cluster`, `ingress`, `cloud-lb`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown endpoint lag preset {0:?} (expected in-cluster, ingress or cloud-lb)")]
pub struct UnknownPreset(pub String);

impl LagPreset {
    /// The lag L of the preset.
    pub fn lag(self) -> Duration {
        Duration::from_secs(match self {
            LagPreset::InCluster => 1,
            LagPreset::Ingress => 30,
            LagPreset::CloudLb => 120,
        })
    }

    /// Parses `in-cluster`, `ingress` or `cloud-lb`.
    pub fn parse(name: &str) -> Result<Self, UnknownPreset> {
        match name {
            "in-cluster" => Ok(LagPreset::InCluster),
            "ingress" => Ok(LagPreset::Ingress),
            "cloud-lb" => Ok(LagPreset::CloudLb),
            other => Err(UnknownPreset(other.to_string())),
        }
    }
}

/// The default endpoint lag: 1 s ([`LagPreset::InCluster`]).
pub const DEFAULT_ENDPOINT_LAG: Duration = Duration::from_secs(1);

/// The endpoints traffic may go to right now, in EndpointSet order.
#[derive(Debug, Default)]
pub struct Routes {
    /// kube-proxy's Cluster-policy list (ready, else serving-and-terminating).
    pub targets: Vec<Arc<Endpoint>>,
}

impl Routes {
    /// Applies kube-proxy's `CategorizeEndpoints` (Cluster traffic policy) to `set`.
    pub fn from_set(set: &[Endpoint]) -> Routes {
        let proxy_eps: Vec<ProxyEndpoint> = set
            .iter()
            .map(|e| ProxyEndpoint {
                address: e.address.to_string(),
                local: true,
                ready: e.ready,
                serving: e.serving,
                terminating: e.terminating,
            })
            .collect();
        let cluster = ServiceTrafficPolicies {
            internal: TrafficPolicy::Cluster,
            external: None,
        };
        let picked = categorize_endpoints(&proxy_eps, cluster)
            .cluster
            .unwrap_or_default();
        let mut targets = Vec::with_capacity(picked.len());
        for addr in picked {
            if let Some(e) = set.iter().find(|e| e.address.to_string() == addr) {
                if !targets
                    .iter()
                    .any(|t: &Arc<Endpoint>| t.address == e.address)
                {
                    targets.push(Arc::new(e.clone()));
                }
            }
        }
        Routes { targets }
    }
}

/// The proxy's current view, shared by its connections: routes plus a round-robin cursor, and
/// when each pod joined and left the routes.
#[derive(Debug, Default)]
pub struct View {
    routes: RwLock<Arc<Routes>>,
    cursor: AtomicUsize,
    changes: std::sync::Mutex<Vec<RouteChange>>,
}

/// A pod joining or leaving a [`View`]'s routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteChange {
    /// The pod's name.
    pub pod: String,
    /// `true`: it joined; `false`: it left.
    pub joined: bool,
    /// When the change reached the view.
    pub at: Instant,
}

impl View {
    /// The next endpoint, round robin over the current routes; `None` if there is none (kube-proxy
    /// then rejects the connection).
    pub fn pick(&self) -> Option<Arc<Endpoint>> {
        let routes = match self.routes.read() {
            Ok(r) => Arc::clone(&r),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        };
        if routes.targets.is_empty() {
            return None;
        }
        let i = self.cursor.fetch_add(1, Ordering::Relaxed) % routes.targets.len();
        routes.targets.get(i).cloned()
    }

    /// The current routes.
    pub fn routes(&self) -> Arc<Routes> {
        match self.routes.read() {
            Ok(r) => Arc::clone(&r),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Every pod that joined or left the routes, in order.
    pub fn changes(&self) -> Vec<RouteChange> {
        match self.changes.lock() {
            Ok(v) => v.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// When `pod` last left the routes, if it did.
    pub fn left_at(&self, pod: &str) -> Option<Instant> {
        self.changes()
            .iter()
            .rev()
            .find(|c| c.pod == pod && !c.joined)
            .map(|c| c.at)
    }

    fn set(&self, set: &[Endpoint]) -> Arc<Routes> {
        let routes = Arc::new(Routes::from_set(set));
        let old = {
            let mut w = match self.routes.write() {
                Ok(w) => w,
                Err(poisoned) => poisoned.into_inner(),
            };
            std::mem::replace(&mut *w, Arc::clone(&routes))
        };
        let now = Instant::now();
        let has = |r: &Routes, pod: &str| r.targets.iter().any(|e| e.pod == pod);
        let mut changes = match self.changes.lock() {
            Ok(v) => v,
            Err(p) => p.into_inner(),
        };
        for e in &old.targets {
            if !has(&routes, &e.pod) {
                changes.push(RouteChange {
                    pod: e.pod.clone(),
                    joined: false,
                    at: now,
                });
            }
        }
        for e in &routes.targets {
            if !has(&old, &e.pod) {
                changes.push(RouteChange {
                    pod: e.pod.clone(),
                    joined: true,
                    at: now,
                });
            }
        }
        routes
    }
}

/// How endpoint changes reach the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LagModel {
    /// Every change arrives this long after it was published.
    Fixed(Duration),
    /// kube-proxy's bounded-frequency sync ([`crate::sync::SyncRunner`]): at once while a sync
    /// slot is free, else `min_sync_period` after the last sync.
    KubeProxy {
        /// kube-proxy's `--iptables-min-sync-period`: the least time between two syncs.
        min_sync_period: Duration,
        /// Syncs allowed at once before the minimum period applies (kube-proxy: 2).
        burst: u32,
    },
    /// Each pod's changes arrive after a lag of its own, drawn from a uniform range
    /// ([`LagRange::lag_of`]): pods behind load balancers (or nodes) that are slow or fast to
    /// follow the EndpointSlice.
    PerPod(LagRange),
}

impl LagModel {
    /// The lag the advice reckons with: the fixed lag, for kube-proxy's sync the longest it
    /// can put a change off (`min_sync_period`), for per-pod lags the largest of the range.
    pub fn nominal(self) -> Duration {
        match self {
            LagModel::Fixed(l) => l,
            LagModel::KubeProxy {
                min_sync_period, ..
            } => min_sync_period,
            LagModel::PerPod(r) => r.max,
        }
    }

    /// The lag of `pod`'s changes: [`LagRange::lag_of`] for per-pod lags, else
    /// [`LagModel::nominal`].
    pub fn lag_of(self, pod: &str) -> Duration {
        match self {
            LagModel::PerPod(r) => r.lag_of(pod),
            other => other.nominal(),
        }
    }
}

/// `--endpoint-lag MIN..MAX` with `--seed`: per-pod endpoint lags, uniform in `[min, max]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LagRange {
    /// The shortest lag.
    pub min: Duration,
    /// The longest lag.
    pub max: Duration,
    /// `--seed`: the same seed gives each pod the same lag in every run.
    pub seed: u64,
}

impl LagRange {
    /// The lag of `pod`: uniform in `[min, max]`, drawn by a generator seeded with the seed and
    /// the pod's name (FNV-1a), so the same seed gives a pod the same lag in every run, whatever
    /// order the pods start in.
    pub fn lag_of(&self, pod: &str) -> Duration {
        use rand::{RngExt as _, SeedableRng as _};
        let name = pod.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        let mut rng = rand::rngs::SmallRng::seed_from_u64(self.seed ^ name);
        let span = self.max.saturating_sub(self.min);
        self.min + span.mul_f64(rng.random::<f64>())
    }
}

/// What the handle sends its delivery task.
enum Update {
    /// The view was set to this at once ([`EndpointsHandle::publish_now`]).
    Baseline(EndpointSet),
    /// A set published at this instant.
    Published(Instant, EndpointSet),
}

/// What a sync programs besides the view: the kernel's rules of kube-proxy mode
/// ([`crate::proxy::netfilter::Netfilter`]). Called from a blocking thread, like kube-proxy's
/// `iptables-restore`; the sync ends when it returns.
pub trait RouteSink: Send + Sync {
    /// Programs `routes`; returns once they are in place.
    fn program(&self, routes: &Routes);
}

/// Feeds EndpointSet updates to a proxy's [`View`], each `lag` after it is published.
///
/// Must be created inside a tokio runtime (it spawns the delivery task, which ends when every
/// clone of the handle is dropped).
#[derive(Clone)]
pub struct EndpointsHandle {
    view: Arc<View>,
    model: LagModel,
    tx: mpsc::UnboundedSender<Update>,
    sink: Option<Arc<dyn RouteSink>>,
}

impl std::fmt::Debug for EndpointsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointsHandle")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl EndpointsHandle {
    /// A handle and its view, with a fixed endpoint lag `lag`, starting with no endpoints.
    pub fn new(lag: Duration) -> Self {
        Self::with_model(LagModel::Fixed(lag), None)
    }

    /// A handle whose changes reach the view as `model` says, each sync also programming `sink`.
    pub fn with_model(model: LagModel, sink: Option<Arc<dyn RouteSink>>) -> Self {
        let view = Arc::new(View::default());
        let (tx, rx) = mpsc::unbounded_channel::<Update>();
        let v = Arc::clone(&view);
        let s = sink.clone();
        match model {
            LagModel::Fixed(lag) => tokio::spawn(deliver_fixed(rx, v, s, lag)),
            LagModel::PerPod(range) => tokio::spawn(deliver_per_pod(rx, v, s, range)),
            LagModel::KubeProxy {
                min_sync_period,
                burst,
            } => tokio::spawn(deliver_synced(
                rx,
                v,
                s,
                crate::sync::SyncRunner::new(min_sync_period, crate::sync::MAX_INTERVAL, burst),
            )),
        };
        EndpointsHandle {
            view,
            model,
            tx,
            sink,
        }
    }

    /// The endpoint lag the advice reckons with ([`LagModel::nominal`]).
    pub fn lag(&self) -> Duration {
        self.model.nominal()
    }

    /// How changes reach the proxy.
    pub fn model(&self) -> LagModel {
        self.model
    }

    /// The view the proxy reads.
    pub fn view(&self) -> Arc<View> {
        Arc::clone(&self.view)
    }

    /// Publishes a new EndpointSet; the proxy sees it `lag` from now (fixed lag) or with the
    /// sync that takes it (kube-proxy).
    pub fn publish(&self, set: EndpointSet) {
        // The delivery task lives as long as a sender does, so the send cannot fail here.
        let _ = self.tx.send(Update::Published(Instant::now(), set));
    }

    /// Sets the proxy's view at once (no lag): for the initial endpoints. Updates published
    /// earlier and still pending are delivered later and overwrite it. Programs the sink on the
    /// calling thread (blocking for its few milliseconds).
    pub fn publish_now(&self, set: EndpointSet) {
        let routes = self.view.set(&set);
        if let Some(sink) = &self.sink {
            sink.program(&routes);
        }
        let _ = self.tx.send(Update::Baseline(set));
    }
}

/// Sets the view and programs the sink (on a blocking thread); returns when both are done.
async fn apply(view: &Arc<View>, sink: &Option<Arc<dyn RouteSink>>, set: &[Endpoint]) {
    let routes = view.set(set);
    if let Some(sink) = sink {
        let sink = Arc::clone(sink);
        let _ = tokio::task::spawn_blocking(move || sink.program(&routes)).await;
    }
    tracing::debug!(
        routes = ?view.routes().targets.iter().map(|e| e.pod.as_str()).collect::<Vec<_>>(),
        "endpoint change reached the proxy"
    );
}

/// A fixed lag: updates arrive in publication order and share one lag, so delivering them in
/// order after sleeping until each one's due time keeps the order and the lag exact.
async fn deliver_fixed(
    mut rx: mpsc::UnboundedReceiver<Update>,
    view: Arc<View>,
    sink: Option<Arc<dyn RouteSink>>,
    lag: Duration,
) {
    while let Some(update) = rx.recv().await {
        let Update::Published(at, set) = update else {
            continue;
        };
        tokio::time::sleep_until(at + lag).await;
        apply(&view, &sink, &set).await;
    }
}

/// Per-pod lags: each pod's change (joined, changed, left) is due its own lag after the set
/// that made it was published; due changes are applied to the delivered set in due order (one
/// pod's changes share its lag, so they keep their order), and the proxy gets the whole set.
async fn deliver_per_pod(
    mut rx: mpsc::UnboundedReceiver<Update>,
    view: Arc<View>,
    sink: Option<Arc<dyn RouteSink>>,
    range: LagRange,
) {
    let by_pod = |set: EndpointSet| -> BTreeMap<String, Endpoint> {
        set.into_iter().map(|e| (e.pod.clone(), e)).collect()
    };
    let mut published: BTreeMap<String, Endpoint> = BTreeMap::new();
    let mut delivered: BTreeMap<String, Endpoint> = BTreeMap::new();
    // (due, sequence) -> (pod, its endpoint then, or none: it left).
    let mut pending: BTreeMap<(Instant, u64), (String, Option<Endpoint>)> = BTreeMap::new();
    let mut seq = 0u64;
    loop {
        let next = pending.keys().next().map(|(due, _)| *due);
        tokio::select! {
            got = rx.recv() => match got {
                None => return,
                Some(Update::Baseline(set)) => {
                    published = by_pod(set);
                    delivered = published.clone();
                    pending.clear();
                }
                Some(Update::Published(at, set)) => {
                    let new = by_pod(set);
                    let pods: std::collections::BTreeSet<&String> =
                        published.keys().chain(new.keys()).collect();
                    for pod in pods {
                        if published.get(pod) != new.get(pod) {
                            seq += 1;
                            pending.insert(
                                (at + range.lag_of(pod), seq),
                                (pod.clone(), new.get(pod).cloned()),
                            );
                        }
                    }
                    published = new;
                }
            },
            () = async { tokio::time::sleep_until(next.unwrap_or_else(Instant::now)).await }, if next.is_some() => {
                let now = Instant::now();
                while let Some(entry) = pending.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let (pod, endpoint) = entry.remove();
                    match endpoint {
                        Some(e) => delivered.insert(pod, e),
                        None => delivered.remove(&pod),
                    };
                }
                let set: EndpointSet = delivered.values().cloned().collect();
                apply(&view, &sink, &set).await;
            }
        }
    }
}

/// kube-proxy's sync: each change (`Run()`) and the runner's timer ask the runner for a sync
/// (`tryRun`); a sync applies the latest set (a periodic sync without a change has nothing to
/// apply, and takes its token as upstream's does).
async fn deliver_synced(
    mut rx: mpsc::UnboundedReceiver<Update>,
    view: Arc<View>,
    sink: Option<Arc<dyn RouteSink>>,
    mut runner: crate::sync::SyncRunner,
) {
    let origin = Instant::now();
    let since = |t: Instant| t.saturating_duration_since(origin);
    let mut latest: Option<EndpointSet> = None;
    loop {
        let timer = origin + runner.timer_at();
        tokio::select! {
            got = rx.recv() => match got {
                Some(Update::Published(_, set)) => latest = Some(set),
                // The view was set directly: no change for the sync to take.
                Some(Update::Baseline(_)) => continue,
                None => return,
            },
            () = tokio::time::sleep_until(timer) => {}
        }
        if runner.request(since(Instant::now())) {
            if let Some(set) = latest.take() {
                apply(&view, &sink, &set).await;
            }
            runner.completed(since(Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn round_robin_over_ready_endpoints() {
        let view = View::default();
        view.set(&[Endpoint::ready("a", addr(1)), Endpoint::ready("b", addr(2))]);
        let picks: Vec<String> = (0..6)
            .filter_map(|_| view.pick())
            .map(|e| e.pod.clone())
            .collect();
        assert_eq!(picks, ["a", "b", "a", "b", "a", "b"]);
    }

    #[test]
    fn terminating_endpoints_only_when_none_is_ready() {
        let a = Endpoint::ready("a", addr(1));
        let b = Endpoint::ready("b", addr(2));
        // One terminating, one ready: only the ready one gets traffic.
        let r = Routes::from_set(&[a.terminating(true), b.clone()]);
        assert_eq!(r.targets.iter().map(|e| &e.pod).collect::<Vec<_>>(), ["b"]);
        // All terminating: kube-proxy falls back to the serving-and-terminating ones.
        let r = Routes::from_set(&[a.terminating(true), b.terminating(false)]);
        assert_eq!(r.targets.iter().map(|e| &e.pod).collect::<Vec<_>>(), ["a"]);
        // None serving: no route at all.
        let r = Routes::from_set(&[a.terminating(false), b.terminating(false)]);
        assert!(r.targets.is_empty());
        let view = View::default();
        view.set(&[a.terminating(false)]);
        assert_eq!(view.pick(), None);
    }

    #[test]
    fn presets() {
        assert_eq!(
            LagPreset::parse("in-cluster").map(|p| p.lag()),
            Ok(DEFAULT_ENDPOINT_LAG)
        );
        assert_eq!(
            LagPreset::parse("cloud-lb").map(|p| p.lag().as_secs()),
            Ok(120)
        );
        assert_eq!(
            LagPreset::parse("ingress").map(|p| p.lag().as_secs()),
            Ok(30)
        );
        assert!(LagPreset::parse("nlb").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn an_update_reaches_the_view_after_the_lag() {
        let h = EndpointsHandle::new(Duration::from_secs(1));
        let a = Endpoint::ready("a", addr(1));
        let b = Endpoint::ready("b", addr(2));
        h.publish_now(vec![a.clone(), b.clone()]);
        let t0 = Instant::now();
        h.publish(vec![a.terminating(true), b.clone()]);
        tokio::time::sleep(Duration::from_millis(999)).await;
        assert_eq!(
            h.view().routes().targets.len(),
            2,
            "still the old view at t+999 ms"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(
            h.view()
                .routes()
                .targets
                .iter()
                .map(|e| &e.pod)
                .collect::<Vec<_>>(),
            ["b"],
            "removed at t + L"
        );
        assert!(Instant::now() - t0 >= Duration::from_secs(1));
    }

    #[test]
    fn per_pod_lags_are_uniform_in_the_range_and_seeded() {
        let r = LagRange {
            min: Duration::from_millis(500),
            max: Duration::from_secs(5),
            seed: 7,
        };
        let lags: Vec<Duration> = (1..=200).map(|i| r.lag_of(&format!("web-{i}"))).collect();
        assert!(lags.iter().all(|l| (r.min..=r.max).contains(l)), "{lags:?}");
        // Uniform: about a quarter in each quarter of the range (200 draws, 50 ± 20).
        let quarter = (r.max - r.min) / 4;
        for q in 0..4u32 {
            let lo = r.min + quarter * q;
            let n = lags
                .iter()
                .filter(|l| **l >= lo && **l < lo + quarter)
                .count();
            assert!((30..=70).contains(&n), "quarter {q}: {n} of 200");
        }
        // The same seed and name give the same lag; another seed another one.
        assert_eq!(r.lag_of("web-1"), lags[0]);
        assert_ne!(LagRange { seed: 8, ..r }.lag_of("web-1"), lags[0]);
    }

    /// Two pods with lags of their own: each one's removal reaches the proxy at its own lag,
    /// a pod that joins later at its own lag after it joined.
    #[tokio::test(start_paused = true)]
    async fn per_pod_lags_deliver_each_pods_change_after_its_own_lag() {
        let range = LagRange {
            min: Duration::from_millis(500),
            max: Duration::from_secs(5),
            seed: 1,
        };
        let (la, lb) = (range.lag_of("a"), range.lag_of("b"));
        assert!(la != lb, "the test needs two different lags: {la:?} {lb:?}");
        let h = EndpointsHandle::with_model(LagModel::PerPod(range), None);
        let (a, b, c) = (
            Endpoint::ready("a", addr(1)),
            Endpoint::ready("b", addr(2)),
            Endpoint::ready("c", addr(3)),
        );
        h.publish_now(vec![a.clone(), b.clone(), c.clone()]);
        let t0 = Instant::now();
        h.publish(vec![a.terminating(true), b.terminating(true), c.clone()]);
        let routed = |h: &EndpointsHandle| -> Vec<String> {
            h.view()
                .routes()
                .targets
                .iter()
                .map(|e| e.pod.clone())
                .collect()
        };
        let (first, second, l1, l2) = if la < lb {
            ("a", "b", la, lb)
        } else {
            ("b", "a", lb, la)
        };
        tokio::time::sleep_until(t0 + l1 - Duration::from_millis(1)).await;
        assert_eq!(routed(&h).len(), 3, "nothing before the shorter lag");
        tokio::time::sleep_until(t0 + l1 + Duration::from_millis(1)).await;
        assert!(!routed(&h).contains(&first.to_string()), "{:?}", routed(&h));
        assert!(routed(&h).contains(&second.to_string()));
        tokio::time::sleep_until(t0 + l2 - Duration::from_millis(1)).await;
        assert!(routed(&h).contains(&second.to_string()));
        tokio::time::sleep_until(t0 + l2 + Duration::from_millis(1)).await;
        assert_eq!(routed(&h), ["c"]);
        // Measured on the view: each at its own lag (the paused clock's timers are whole
        // milliseconds, so up to 1 ms late).
        for (pod, l) in [(first, l1), (second, l2)] {
            let left = h.view().left_at(pod).map(|t| t - t0).unwrap();
            assert!(
                left >= l && left <= l + Duration::from_millis(1),
                "{pod}: {left:?} {l:?}"
            );
        }
    }

    /// kube-proxy's sync (minSyncPeriod 1 s, burst 2) on tokio's paused clock: a new pod added at
    /// 0 and another at 800 ms land at once (the burst); the old pod's removal at 850 ms waits
    /// for 1 s after the last sync (1800 ms), the "about a second late" of the recorded rollout.
    #[tokio::test(start_paused = true)]
    async fn kube_proxy_sync_puts_a_third_change_off_until_a_second_after_the_last() {
        let h = EndpointsHandle::with_model(
            LagModel::KubeProxy {
                min_sync_period: Duration::from_secs(1),
                burst: 2,
            },
            None,
        );
        let (a, b, c) = (
            Endpoint::ready("a", addr(1)),
            Endpoint::ready("b", addr(2)),
            Endpoint::ready("c", addr(3)),
        );
        h.publish_now(vec![a.clone()]);
        let t0 = Instant::now();
        let pods = |h: &EndpointsHandle| -> Vec<String> {
            h.view()
                .routes()
                .targets
                .iter()
                .map(|e| e.pod.clone())
                .collect()
        };
        h.publish(vec![a.clone(), b.clone()]);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(pods(&h), ["a", "b"], "at once");
        tokio::time::sleep_until(t0 + Duration::from_millis(800)).await;
        h.publish(vec![a.clone(), b.clone(), c.clone()]);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(pods(&h), ["a", "b", "c"], "at once: the second token");
        tokio::time::sleep_until(t0 + Duration::from_millis(850)).await;
        h.publish(vec![b.clone(), c.clone()]);
        tokio::time::sleep_until(t0 + Duration::from_millis(1_799)).await;
        assert_eq!(pods(&h), ["a", "b", "c"], "put off");
        tokio::time::sleep_until(t0 + Duration::from_millis(1_801)).await;
        assert_eq!(pods(&h), ["b", "c"]);
        let left = h.view().left_at("a").expect("a left") - t0;
        assert_eq!(left, Duration::from_millis(1_800), "{left:?}");
    }
}
