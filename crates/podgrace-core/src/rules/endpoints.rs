//! Endpoints during termination: the EndpointSlice conditions ready / serving / terminating of a
//! pod, and which endpoints kube-proxy sends traffic to (spec `termination.md` §8).

/// What a preStop delay needs beyond the endpoint lag L so that no request races the removal:
/// 1 s. Measured, not an upstream constant: in the drill a preStop of exactly L = 1 s still lost
/// 2 and 1 of 1,600 requests (the stop signal and the removal land within milliseconds of each
/// other), and a real kube-proxy 1.32 applied removals up to its minSyncPeriod (1 s) late when
/// its sync slots were used up (906–1077 ms for 10 of 12 pods,
/// `cases/real-kube-proxy-1.32.md`); L + 1 s lost nothing in either.
pub const ENDPOINT_RACE_MARGIN_SECONDS: f64 = 1.0;

/// The conditions of one EndpointSlice endpoint (`discovery/v1 EndpointConditions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointConditions {
    /// `ready`: serving and not terminating, or the Service publishes not-ready addresses.
    pub ready: bool,
    /// `serving`: the pod's Ready condition is True (readiness probes keep running while the pod
    /// terminates).
    pub serving: bool,
    /// `terminating`: the pod has a deletionTimestamp.
    pub terminating: bool,
}

/// The EndpointSlice conditions of a pod's endpoint.
///
/// Upstream: `staging/src/k8s.io/endpointslice/utils.go` `podToEndpoint` (read at `daa4d0108`,
/// 2026; the same since EndpointSlice terminating conditions went GA in Kubernetes 1.26).
/// `pod_ready`: the pod's `Ready` condition is True; `deletion_timestamp_set`: DT ≠ nil.
pub fn pod_to_endpoint_conditions(
    pod_ready: bool,
    deletion_timestamp_set: bool,
    publish_not_ready_addresses: bool,
) -> EndpointConditions {
    let serving = pod_ready;
    let terminating = deletion_timestamp_set;
    EndpointConditions {
        ready: publish_not_ready_addresses || (serving && !terminating),
        serving,
        terminating,
    }
}

/// The phase of a pod, as far as endpoints care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    /// `Pending`: accepted, but not every container has started (scheduling, image pulls, init
    /// containers).
    Pending,
    /// `Running`: bound to a node, every container created, at least one running or restarting.
    Running,
    /// `Succeeded`: every container exited 0 and none will restart (terminal).
    Succeeded,
    /// `Failed`: every container terminated, at least one not with 0 (terminal).
    Failed,
    /// `Unknown`: the pod's state could not be read, typically its node is unreachable.
    Unknown,
}

/// `true` if the EndpointSlice controller lists the pod at all: it has an IP, is not in a
/// terminal phase, and (unless `include_terminating`) has no deletionTimestamp.
///
/// Upstream: `staging/src/k8s.io/endpointslice/util/controller_utils.go`
/// `ShouldPodBeInEndpoints` (`daa4d0108`); the EndpointSlice reconciler calls it with
/// `include_terminating = true`.
pub fn should_pod_be_in_endpoints(
    phase: PodPhase,
    has_ip: bool,
    deletion_timestamp_set: bool,
    include_terminating: bool,
) -> bool {
    if !has_ip || matches!(phase, PodPhase::Succeeded | PodPhase::Failed) {
        return false;
    }
    include_terminating || !deletion_timestamp_set
}

/// One endpoint as kube-proxy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyEndpoint {
    /// `ip:port`.
    pub address: String,
    /// On this node.
    pub local: bool,
    /// EndpointSlice `conditions.ready`: serving and not terminating (or
    /// `publishNotReadyAddresses`).
    pub ready: bool,
    /// EndpointSlice `conditions.serving`: the pod's Ready condition, whether or not it is
    /// terminating.
    pub serving: bool,
    /// EndpointSlice `conditions.terminating`: the pod has a `deletionTimestamp`.
    pub terminating: bool,
}

/// A Service traffic policy (`internalTrafficPolicy` / `externalTrafficPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrafficPolicy {
    /// `Cluster`: traffic goes to every ready endpoint of the Service, on any node.
    Cluster,
    /// `Local`: traffic goes only to endpoints on the node it arrived on (falling back to
    /// serving-terminating ones, KEP-1669).
    Local,
}

/// The service port's policies as kube-proxy uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceTrafficPolicies {
    /// `internalTrafficPolicy` (default Cluster).
    pub internal: TrafficPolicy,
    /// `externalTrafficPolicy`, `None` if the port is not externally accessible (no NodePort,
    /// LoadBalancer or external IP).
    pub external: Option<TrafficPolicy>,
}

impl ServiceTrafficPolicies {
    /// kube-proxy `UsesClusterEndpoints`: internal Cluster, or any external access (even with
    /// external Local, cluster endpoints are needed to short-circuit in-cluster traffic).
    pub fn uses_cluster_endpoints(&self) -> bool {
        self.internal == TrafficPolicy::Cluster || self.external.is_some()
    }

    /// kube-proxy `UsesLocalEndpoints`: either policy is Local.
    pub fn uses_local_endpoints(&self) -> bool {
        self.internal == TrafficPolicy::Local || self.external == Some(TrafficPolicy::Local)
    }
}

/// The result of [`categorize_endpoints`]: endpoint addresses, in input order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CategorizedEndpoints {
    /// Endpoints for Cluster policy; `None` if no policy of the port is Cluster.
    pub cluster: Option<Vec<String>>,
    /// Endpoints for Local policy; `None` if no policy of the port is Local.
    pub local: Option<Vec<String>>,
    /// Every endpoint reachable through any policy (the union).
    pub all_reachable: Vec<String>,
    /// `true` if some endpoint is usable anywhere (traffic is dropped rather than rejected when
    /// the Local list is empty).
    pub has_any_endpoints: bool,
}

/// Which endpoints kube-proxy programs for a service port.
///
/// * Cluster: Ready endpoints; if there are none at all, the serving-and-terminating ones
///   (KEP-1669 ProxyTerminatingEndpoints, GA; unconditional in current kube-proxy).
/// * Local: local Ready endpoints, else local serving-and-terminating ones, else none.
///
/// Upstream: `pkg/proxy/topology.go` `CategorizeEndpoints` (≥ v1.33 era). Topology hints
/// (PreferSameZone / PreferSameNode) are not modelled: every Ready endpoint counts as
/// available for topology.
pub fn categorize_endpoints(
    endpoints: &[ProxyEndpoint],
    policies: ServiceTrafficPolicies,
) -> CategorizedEndpoints {
    let pick = |f: &dyn Fn(&ProxyEndpoint) -> bool| -> Vec<String> {
        endpoints
            .iter()
            .filter(|e| f(e))
            .map(|e| e.address.clone())
            .collect()
    };
    let mut out = CategorizedEndpoints::default();
    if policies.uses_cluster_endpoints() {
        let mut cluster = pick(&|e| e.ready);
        if cluster.is_empty() {
            cluster = pick(&|e| e.serving && e.terminating);
        }
        out.has_any_endpoints = !cluster.is_empty();
        out.cluster = Some(cluster);
    }
    if !policies.uses_local_endpoints() {
        out.all_reachable = out.cluster.clone().unwrap_or_default();
        return out;
    }
    let usable_anywhere = endpoints
        .iter()
        .any(|e| e.ready || (e.serving && e.terminating));
    out.has_any_endpoints |= usable_anywhere;
    let local_ready = endpoints.iter().any(|e| e.local && e.ready);
    let local = if local_ready {
        pick(&|e| e.local && e.ready)
    } else {
        pick(&|e| e.local && !e.ready && e.serving && e.terminating)
    };
    let mut all = out.cluster.clone().unwrap_or_default();
    for a in &local {
        if !all.contains(a) {
            all.push(a.clone());
        }
    }
    out.all_reachable = all;
    out.local = Some(local);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(addr: &str, local: bool, ready: bool, serving: bool, terminating: bool) -> ProxyEndpoint {
        ProxyEndpoint {
            address: addr.into(),
            local,
            ready,
            serving,
            terminating,
        }
    }

    #[test]
    fn conditions_table() {
        let c = pod_to_endpoint_conditions(false, false, true);
        assert_eq!((c.ready, c.serving, c.terminating), (true, false, false));
        let c = pod_to_endpoint_conditions(true, true, true);
        assert!(
            c.ready,
            "publishNotReadyAddresses keeps even a terminating pod ready"
        );
    }

    #[test]
    fn endpoints_membership() {
        assert!(should_pod_be_in_endpoints(
            PodPhase::Running,
            true,
            true,
            true
        ));
        assert!(!should_pod_be_in_endpoints(
            PodPhase::Running,
            true,
            true,
            false
        ));
        assert!(!should_pod_be_in_endpoints(
            PodPhase::Failed,
            true,
            false,
            true
        ));
        assert!(!should_pod_be_in_endpoints(
            PodPhase::Running,
            false,
            false,
            true
        ));
    }

    #[test]
    fn ready_endpoints_win_over_terminating_ones() {
        let eps = [
            ep("a", false, true, true, false),
            ep("b", true, false, true, true),
        ];
        let cluster = ServiceTrafficPolicies {
            internal: TrafficPolicy::Cluster,
            external: None,
        };
        assert_eq!(
            categorize_endpoints(&eps, cluster).cluster,
            Some(vec!["a".to_string()])
        );
        let local = ServiceTrafficPolicies {
            internal: TrafficPolicy::Local,
            external: None,
        };
        let r = categorize_endpoints(&eps, local);
        assert_eq!(r.cluster, None);
        assert_eq!(r.local, Some(vec!["b".to_string()]));
        assert!(r.has_any_endpoints);
        let none = categorize_endpoints(&[ep("c", true, false, false, true)], local);
        assert_eq!(none.local, Some(vec![]));
        assert!(!none.has_any_endpoints);
    }
}
