//! The kubelet's `configz` endpoint: its running configuration as `{"kubeletconfig": {...}}`,
//! the `kubelet.config.k8s.io/v1beta1` KubeletConfiguration after defaulting (durations as Go
//! writes them), which the API server serves at `GET /api/v1/nodes/NODE/proxy/configz`.
//!
//! Only what this kubelet really works with is reported, each with the value it uses:
//! `evictionHard` as the thresholds allocatable is computed from ([`crate::node`]), no
//! `evictionSoft`, `evictionMaxPodGracePeriod` 0 and graceful node shutdown off
//! (`shutdownGracePeriod` 0s), the node status and lease periods, `maxPods`. This kubelet has no
//! eviction manager and no node shutdown manager, so those are also what a kubelet with these
//! settings does: nothing is evicted softly and a node shutdown does not terminate pods
//! gracefully.
//!
//! Upstream: `cmd/kubelet/app/server.go` (`setConfigz`, `initConfigz`),
//! `staging/src/k8s.io/component-base/configz/configz.go` (the handler writes the map of
//! registered configurations as JSON), `pkg/kubelet/apis/config/v1beta1/defaults.go`.

use serde_json::{json, Value};

use crate::node::{LEASE_DURATION_SECONDS, NODE_STATUS_REPORT_FREQUENCY};

/// The path under `nodes/NODE/proxy/` that [`configz`] answers.
pub const CONFIGZ_PATH: &str = "configz";

/// A duration as Go's `time.Duration.String()` writes whole seconds (`5m0s`, `40s`, `0s`).
fn go_duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// The `configz` answer of this kubelet.
pub fn configz() -> Value {
    json!({"kubeletconfig": {
        "nodeStatusReportFrequency": go_duration(NODE_STATUS_REPORT_FREQUENCY.as_secs()),
        "nodeLeaseDurationSeconds": LEASE_DURATION_SECONDS,
        "maxPods": 110,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%"},
        "evictionPressureTransitionPeriod": "5m0s",
        "evictionMaxPodGracePeriod": 0,
        "shutdownGracePeriod": "0s",
        "shutdownGracePeriodCriticalPods": "0s",
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(40), "40s");
        assert_eq!(go_duration(300), "5m0s");
        assert_eq!(go_duration(3725), "1h2m5s");
    }

    #[test]
    fn the_settings_this_kubelet_uses() {
        let v = configz();
        let k = &v["kubeletconfig"];
        assert_eq!(k["evictionMaxPodGracePeriod"], 0);
        assert_eq!(k["shutdownGracePeriod"], "0s");
        assert_eq!(k["nodeStatusReportFrequency"], "5m0s");
        assert_eq!(k["evictionHard"]["memory.available"], "100Mi");
        assert!(k.get("evictionSoft").is_none());
    }
}
