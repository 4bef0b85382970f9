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
    InCluster,
    Ingress,
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

/// The proxy's current view, shared by its connections: routes plus a round-robin cursor.
#[derive(Debug, Default)]
pub struct View {
    routes: RwLock<Arc<Routes>>,
    cursor: AtomicUsize,
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

    fn set(&self, set: &[Endpoint]) {
        let routes = Arc::new(Routes::from_set(set));
        match self.routes.write() {
            Ok(mut r) => *r = routes,
            Err(poisoned) => *poisoned.into_inner() = routes,
        }
    }
}

/// Feeds EndpointSet updates to a proxy's [`View`], each `lag` after it is published.
///
/// Must be created inside a tokio runtime (it spawns the delivery task, which ends when every
/// clone of the handle is dropped).
#[derive(Debug, Clone)]
pub struct EndpointsHandle {
    view: Arc<View>,
    lag: Duration,
    tx: mpsc::UnboundedSender<(Instant, EndpointSet)>,
}

impl EndpointsHandle {
    /// A handle and its view, with endpoint lag `lag`, starting with no endpoints.
    pub fn new(lag: Duration) -> Self {
        let view = Arc::new(View::default());
        let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, EndpointSet)>();
        let v = Arc::clone(&view);
        tokio::spawn(async move {
            // Updates arrive in publication order and share one lag, so delivering them in order
            // after sleeping until each one's due time keeps the order and the lag exact.
            while let Some((due, set)) = rx.recv().await {
                tokio::time::sleep_until(due).await;
                v.set(&set);
                tracing::debug!(
                    routes = ?v.routes().targets.iter().map(|e| e.pod.as_str()).collect::<Vec<_>>(),
                    "endpoint change reached the proxy"
                );
            }
        });
        EndpointsHandle { view, lag, tx }
    }

    /// The endpoint lag L.
    pub fn lag(&self) -> Duration {
        self.lag
    }

    /// The view the proxy reads.
    pub fn view(&self) -> Arc<View> {
        Arc::clone(&self.view)
    }

    /// Publishes a new EndpointSet; the proxy sees it `lag` from now.
    pub fn publish(&self, set: EndpointSet) {
        let due = Instant::now() + self.lag;
        // The delivery task lives as long as a sender does, so the send cannot fail here.
        let _ = self.tx.send((due, set));
    }

    /// Sets the proxy's view at once (no lag): for the initial endpoints. Updates published
    /// earlier and still pending are delivered later and overwrite it.
    pub fn publish_now(&self, set: EndpointSet) {
        self.view.set(&set);
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
}
