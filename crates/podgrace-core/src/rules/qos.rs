//! A pod's QoS class from its containers' cpu and memory requests and limits.
//!
//! Upstream: `pkg/apis/core/v1/helper/qos/qos.go` (`GetPodQOS`, `ComputePodQOS`), Kubernetes
//! 1.18 to 1.36 (pod-level resources, alpha from 1.32, are not read).

use std::collections::BTreeMap;

pub use super::eviction::QosClass;
use super::quantity::Quantity;
use super::resources::{ResourceList, ResourceRequirements};

/// One container's `resources`: quantities as written, by resource name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerResources {
    /// `requests`, as written (`100m`, `64Mi`).
    pub requests: BTreeMap<String, String>,
    /// `limits`, as written.
    pub limits: BTreeMap<String, String>,
}

impl ContainerResources {
    /// The quantities parsed ([`Quantity::parse`]); one that does not parse is left out.
    pub fn parsed(&self) -> ResourceRequirements {
        ResourceRequirements {
            requests: parsed(&self.requests),
            limits: parsed(&self.limits),
        }
    }
}

/// The resources QoS is computed from (`supportedQoSComputeResources`).
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

fn parsed(m: &BTreeMap<String, String>) -> ResourceList {
    // A quantity that does not parse is left out (validation reports it with its position).
    m.iter()
        .filter_map(|(k, v)| Some((k.clone(), Quantity::parse(v.trim()).ok()?)))
        .collect()
}

/// `ComputePodQOS` over every container (init containers included), on the pod as the API
/// server stores it: a missing request is its limit (`SetDefaults_Pod`; a manifest read from a
/// file has not been through it). See [`compute_pod_qos`].
pub fn pod_qos(containers: &[ContainerResources]) -> QosClass {
    let defaulted: Vec<ResourceRequirements> = containers
        .iter()
        .map(|c| {
            ResourceRequirements {
                requests: parsed(&c.requests),
                limits: parsed(&c.limits),
            }
            .defaulted()
        })
        .collect();
    compute_pod_qos(&defaulted.iter().collect::<Vec<_>>())
}

/// `ComputePodQOS`, exactly: BestEffort when no container has a positive cpu or memory
/// request or limit; Guaranteed when every container has positive cpu and memory limits and
/// the summed requests equal the summed limits for every resource that has requests, and as
/// many resources have requests as have limits; Burstable otherwise.
pub fn compute_pod_qos(containers: &[&ResourceRequirements]) -> QosClass {
    let mut requests: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    for c in containers {
        for r in QOS_RESOURCES {
            if let Some(q) = c.requests.get(r).filter(|q| **q > Quantity::default()) {
                *requests.entry(r).or_default() += *q;
            }
        }
        let mut with_limit = 0;
        for r in QOS_RESOURCES {
            if let Some(q) = c.limits.get(r).filter(|q| **q > Quantity::default()) {
                with_limit += 1;
                *limits.entry(r).or_default() += *q;
            }
        }
        if with_limit != QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed && requests.iter().any(|(r, q)| limits.get(r) != Some(q)) {
        guaranteed = false;
    }
    if guaranteed && requests.len() == limits.len() {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(req: &[(&str, &str)], lim: &[(&str, &str)]) -> ContainerResources {
        let m = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        ContainerResources {
            requests: m(req),
            limits: m(lim),
        }
    }

    #[test]
    fn classes_as_upstream_computes_them() {
        assert_eq!(pod_qos(&[res(&[], &[])]), QosClass::BestEffort);
        assert_eq!(pod_qos(&[res(&[("cpu", "0")], &[])]), QosClass::BestEffort);
        // Only cpu and memory count.
        assert_eq!(
            pod_qos(&[res(&[("ephemeral-storage", "1Gi")], &[])]),
            QosClass::BestEffort
        );
        assert_eq!(
            pod_qos(&[res(&[("cpu", "100m")], &[])]),
            QosClass::Burstable
        );
        let g = res(&[], &[("cpu", "1"), ("memory", "64Mi")]);
        assert_eq!(pod_qos(std::slice::from_ref(&g)), QosClass::Guaranteed);
        assert_eq!(
            pod_qos(&[res(
                &[("cpu", "1000m"), ("memory", "67108864")],
                &[("cpu", "1"), ("memory", "64Mi")]
            )]),
            QosClass::Guaranteed
        );
        assert_eq!(
            pod_qos(&[res(&[("cpu", "500m")], &[("cpu", "1"), ("memory", "64Mi")])]),
            QosClass::Burstable
        );
        // Summed over containers, each request defaulted from its limit.
        assert_eq!(
            pod_qos(&[
                res(&[("cpu", "1")], &[("cpu", "1"), ("memory", "1Gi")]),
                res(&[], &[("cpu", "2"), ("memory", "1Gi")])
            ]),
            QosClass::Guaranteed
        );
        // One container without limits makes the pod Burstable.
        assert_eq!(pod_qos(&[g, res(&[], &[])]), QosClass::Burstable);
        assert_eq!(
            pod_qos(&[res(&[], &[("memory", "64Mi")])]),
            QosClass::Burstable
        );
    }
}
