//! A pod's QoS class from its containers' cpu and memory requests and limits.
//!
//! Upstream: `pkg/apis/core/v1/helper/qos/qos.go` (`GetPodQOS`, `ComputePodQOS`), Kubernetes
//! 1.18 to 1.36 (pod-level resources, alpha from 1.32, are not read).

use std::collections::BTreeMap;

pub use super::eviction::QosClass;

/// One container's `resources`: quantities as written, by resource name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerResources {
    pub requests: BTreeMap<String, String>,
    pub limits: BTreeMap<String, String>,
}

/// The resources QoS is computed from (`supportedQoSComputeResources`).
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// A quantity's value (`1`, `100m`, `1.5Gi`, `2e3`), or `None` when it does not parse.
fn value(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let n: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    Some(n * factor)
}

fn nonzero(q: &str) -> bool {
    value(q).is_some_and(|v| v != 0.0)
}

/// `ComputePodQOS` over every container (init containers included): BestEffort when none has
/// a nonzero cpu or memory request or limit; Guaranteed when every container has cpu and
/// memory limits and its requests equal them (a missing request is the limit, as the API
/// server defaults it); Burstable otherwise.
pub fn pod_qos(containers: &[ContainerResources]) -> QosClass {
    let mut requests: BTreeMap<&str, f64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, f64> = BTreeMap::new();
    let mut guaranteed = true;
    for c in containers {
        for r in QOS_RESOURCES {
            // A missing request is its limit (`SetDefaults_ResourceRequirements` of the API
            // server; a manifest read from a file has not been through it).
            let request = c.requests.get(r).or_else(|| c.limits.get(r));
            if let Some(q) = request.filter(|q| nonzero(q)) {
                *requests.entry(r).or_default() += value(q).unwrap_or_default();
            }
        }
        let mut with_limit = 0;
        for r in QOS_RESOURCES {
            if let Some(q) = c.limits.get(r).filter(|q| nonzero(q)) {
                with_limit += 1;
                *limits.entry(r).or_default() += value(q).unwrap_or_default();
            }
        }
        if with_limit != QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    for (r, q) in &requests {
        let equal = limits
            .get(r)
            .is_some_and(|l| (q - l).abs() <= l.abs() * 1e-9);
        if !equal {
            guaranteed = false;
        }
    }
    if guaranteed {
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
