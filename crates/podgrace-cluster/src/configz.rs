//! A node's kubelet settings that decide how its pods end, read from the kubelet's `configz`
//! endpoint (`GET /api/v1/nodes/NODE/proxy/configz`, which needs `get` on `nodes/proxy`), or
//! the kubelet's defaults when that is not allowed, each value saying which it is.
//!
//! The endpoint answers `{"kubeletconfig": {...}}`, the running `KubeletConfiguration` in its
//! `kubelet.config.k8s.io/v1beta1` form after defaulting (durations as Go writes them, `30s`,
//! `1m0s`). Upstream: `cmd/kubelet/app/server.go` (`setConfigz`), `pkg/kubelet/apis/config/
//! v1beta1/defaults.go` (`SetDefaults_KubeletConfiguration`: evictionHard
//! `memory.available<100Mi`, `nodefs.available<10%`, `imagefs.available<15%`,
//! `nodefs.inodesFree<5%`, `imagefs.inodesFree<5%`; evictionMaxPodGracePeriod 0;
//! shutdownGracePeriod and shutdownGracePeriodCriticalPods `0s`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The settings podgrace uses, with kubelet defaults for what the answer leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeKubelet {
    /// `evictionMaxPodGracePeriod`, seconds (a soft eviction's longest grace; default 0).
    pub eviction_max_pod_grace_period: i64,
    /// `evictionHard`: signal → threshold (`memory.available` → `100Mi`).
    pub eviction_hard: BTreeMap<String, String>,
    /// `evictionSoft` (empty by default: the kubelet then never evicts softly).
    pub eviction_soft: BTreeMap<String, String>,
    /// `evictionSoftGracePeriod`: signal → how long the soft threshold must hold (`1m30s`).
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    /// `shutdownGracePeriod`, whole seconds (0, the default: graceful node shutdown is off).
    pub shutdown_grace_period_seconds: i64,
    /// `shutdownGracePeriodCriticalPods`, whole seconds.
    pub shutdown_grace_period_critical_pods_seconds: i64,
    /// Whether `shutdownGracePeriodByPodPriority` is set (it then replaces the two above).
    pub shutdown_by_pod_priority: bool,
}

impl Default for NodeKubelet {
    /// The kubelet's defaults (`SetDefaults_KubeletConfiguration`).
    fn default() -> Self {
        NodeKubelet {
            eviction_max_pod_grace_period: 0,
            eviction_hard: default_eviction_hard(),
            eviction_soft: BTreeMap::new(),
            eviction_soft_grace_period: BTreeMap::new(),
            shutdown_grace_period_seconds: 0,
            shutdown_grace_period_critical_pods_seconds: 0,
            shutdown_by_pod_priority: false,
        }
    }
}

/// The kubelet's default `evictionHard` (Linux).
pub fn default_eviction_hard() -> BTreeMap<String, String> {
    [
        ("imagefs.available", "15%"),
        ("imagefs.inodesFree", "5%"),
        ("memory.available", "100Mi"),
        ("nodefs.available", "10%"),
        ("nodefs.inodesFree", "5%"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Configz {
    kubeletconfig: KubeletConfiguration,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct KubeletConfiguration {
    eviction_max_pod_grace_period: Option<i64>,
    eviction_hard: Option<BTreeMap<String, String>>,
    eviction_soft: Option<BTreeMap<String, String>>,
    eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    shutdown_grace_period: Option<String>,
    shutdown_grace_period_critical_pods: Option<String>,
    shutdown_grace_period_by_pod_priority: Option<Vec<Value>>,
}

/// Whole seconds of a Go duration (`30s`, `1m30s`, `1.5s` → 1).
fn seconds(field: &str, s: &str) -> Result<i64, String> {
    let d: kube_core::Duration = s
        .parse()
        .map_err(|e| format!("{field}: {s:?} is not a duration: {e}"))?;
    let d: std::time::Duration = d.into();
    i64::try_from(d.as_secs()).map_err(|_| format!("{field}: {s:?} is too long"))
}

/// Reads a `configz` answer.
///
/// # Errors
/// What is wrong with it (no `kubeletconfig`, a field of the wrong type, a duration Go would
/// not parse), as one sentence.
pub fn parse_configz(v: &Value) -> Result<NodeKubelet, String> {
    let c: Configz = serde_json::from_value(v.clone())
        .map_err(|e| format!("the configz answer is not a kubelet configuration: {e}"))?;
    let k = c.kubeletconfig;
    let d = NodeKubelet::default();
    Ok(NodeKubelet {
        eviction_max_pod_grace_period: k
            .eviction_max_pod_grace_period
            .unwrap_or(d.eviction_max_pod_grace_period),
        eviction_hard: k.eviction_hard.unwrap_or(d.eviction_hard),
        eviction_soft: k.eviction_soft.unwrap_or_default(),
        eviction_soft_grace_period: k.eviction_soft_grace_period.unwrap_or_default(),
        shutdown_grace_period_seconds: k
            .shutdown_grace_period
            .map(|s| seconds("shutdownGracePeriod", &s))
            .transpose()?
            .unwrap_or(0),
        shutdown_grace_period_critical_pods_seconds: k
            .shutdown_grace_period_critical_pods
            .map(|s| seconds("shutdownGracePeriodCriticalPods", &s))
            .transpose()?
            .unwrap_or(0),
        shutdown_by_pod_priority: k
            .shutdown_grace_period_by_pod_priority
            .is_some_and(|v| !v.is_empty()),
    })
}

/// Where a node's settings came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeSettings {
    /// Read from the node's kubelet (`configz`).
    Read(NodeKubelet),
    /// Not readable: the kubelet's defaults are assumed; `why` says what refused (the API's
    /// own words: `nodes "n1" is forbidden: User "x" cannot get resource "nodes/proxy" ...`).
    Assumed {
        /// Why the settings could not be read.
        why: String,
    },
}

impl NodeSettings {
    /// The settings: read, or the kubelet's defaults.
    pub fn kubelet(&self) -> NodeKubelet {
        match self {
            NodeSettings::Read(k) => k.clone(),
            NodeSettings::Assumed { .. } => NodeKubelet::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kubelet_configuration_as_configz_serves_it() {
        // Shaped as `kubectl get --raw /api/v1/nodes/NODE/proxy/configz` prints it.
        let v = json!({"kubeletconfig": {
            "enableServer": true,
            "syncFrequency": "1m0s",
            "evictionHard": {"imagefs.available": "0%", "nodefs.available": "0%", "nodefs.inodesFree": "0%"},
            "evictionSoft": {"memory.available": "500Mi"},
            "evictionSoftGracePeriod": {"memory.available": "1m30s"},
            "evictionPressureTransitionPeriod": "5m0s",
            "evictionMaxPodGracePeriod": 60,
            "shutdownGracePeriod": "1m0s",
            "shutdownGracePeriodCriticalPods": "10s"
        }});
        let k = parse_configz(&v).unwrap();
        assert_eq!(k.eviction_max_pod_grace_period, 60);
        assert_eq!(k.eviction_soft["memory.available"], "500Mi");
        assert_eq!(k.eviction_hard.len(), 3);
        assert_eq!(k.shutdown_grace_period_seconds, 60);
        assert_eq!(k.shutdown_grace_period_critical_pods_seconds, 10);
        assert!(!k.shutdown_by_pod_priority);
    }

    #[test]
    fn what_configz_leaves_out_is_the_kubelets_default() {
        let k = parse_configz(&json!({"kubeletconfig": {}})).unwrap();
        assert_eq!(k, NodeKubelet::default());
        assert_eq!(k.eviction_hard["memory.available"], "100Mi");
        assert!(parse_configz(&json!({"kind": "Status"})).is_err());
        let e =
            parse_configz(&json!({"kubeletconfig": {"shutdownGracePeriod": "soon"}})).unwrap_err();
        assert!(e.starts_with("shutdownGracePeriod: \"soon\""), "{e}");
    }
}
