//! The kubelet eviction manager (node-pressure eviction), spec `termination.md` §5.
//!
//! Upstream: `pkg/kubelet/eviction/eviction_manager.go` (`synchronize`, `Admit`) and
//! `helpers.go` (thresholds, ranking). Quantities are plain integers (bytes, inodes or PIDs);
//! grace periods are whole seconds (`i64`); points in time are [`std::time::Duration`]s since an arbitrary
//! origin chosen by the caller (no clock is read here).
//!
//! One concept per module: signals and thresholds (`thresholds`), the kubelet's flags
//! (`config`), the eviction order (`ranking`), the manager's `synchronize` and `Admit`
//! (`manager`); the grace-period override of an eviction is here.

use crate::KubeVersion;

mod config;
mod manager;
mod ranking;
mod thresholds;

pub use config::{
    parse_threshold_config, EvictionFlagError, EvictionFlags, DEFAULT_MONITORING_INTERVAL,
};
pub use manager::{
    admit, choose, signal_resource, AdmitPod, Eviction, EvictionConfig, EvictionManager,
    Observation, Reclaim, SyncOutcome, SynchronizeError,
};
pub use ranking::{
    disk, exceed_disk_requests, exceed_memory_requests, memory, ordered_by, priority, process,
    rank, rank_keys_for, sort_by_eviction_priority, sort_signals_by_eviction_priority,
    ContainerEvictionStats, PodEvictionStats, QosClass, RankFn, RANK_DISK_PRESSURE,
    RANK_MEMORY_PRESSURE, RANK_PID_PRESSURE,
};
pub use thresholds::{
    default_eviction_hard, parse_threshold, pressure_transition_period, EvictionSignal,
    NodePressureCondition, ParseThresholdError, Threshold, ThresholdValue,
    DEFAULT_PRESSURE_TRANSITION_PERIOD,
};

/// The override of a hard eviction since Kubernetes 1.31 (`immediateEvictionGracePeriodSeconds`).
pub const IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS: i64 = 1;

/// The release from which a hard eviction gets [`IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS`] instead
/// of 0 (PR #124063).
pub const IMMEDIATE_EVICTION_GRACE_SINCE: KubeVersion = KubeVersion::new(1, 31);
/// Pods at or above this priority are critical and never evicted (`SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// `evictionMaxPodGracePeriod` default, seconds.
pub const DEFAULT_EVICTION_MAX_POD_GRACE_PERIOD_SECONDS: i64 = 0;
/// Pod status reason of an evicted pod.
pub const EVICTED_REASON: &str = "Evicted";

/// The grace-period override an evicted pod gets, in seconds.
///
/// * Hard threshold (and local-storage evictions): 1 since Kubernetes 1.31 (PR #124063); 0
///   before, which the pod workers of those releases turned into the full TGPS.
/// * Soft threshold: `min(evictionMaxPodGracePeriod, TGPS)`, or evictionMaxPodGracePeriod when
///   TGPS is unset. A negative maximum is passed on as is (it does NOT defer to the pod: bug
///   #118172, fixes still open); the pod worker floors it to 1.
///
/// Upstream: `eviction_manager.go` `synchronize` (v1.35+ era read). The `min` with TGPS is
/// applied for every modelled version; the release that introduced it was not pinned.
pub fn grace_period_override(
    hard: bool,
    eviction_max_pod_grace_period_seconds: i64,
    pod_tgps: Option<i64>,
    version: KubeVersion,
) -> i64 {
    if hard {
        return if version >= IMMEDIATE_EVICTION_GRACE_SINCE {
            IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS
        } else {
            0
        };
    }
    match pod_tgps {
        Some(t) => eviction_max_pod_grace_period_seconds.min(t),
        None => eviction_max_pod_grace_period_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::quantity::Quantity;

    use std::collections::{BTreeMap, BTreeSet};
    use std::time::Duration;

    const V: KubeVersion = KubeVersion::LATEST;

    #[test]
    fn override_values() {
        assert_eq!(grace_period_override(true, 60, Some(30), V), 1);
        assert_eq!(
            grace_period_override(true, 60, Some(30), KubeVersion::new(1, 30)),
            0
        );
        assert_eq!(grace_period_override(false, 0, Some(30), V), 0);
        assert_eq!(grace_period_override(false, -1, Some(30), V), -1);
        assert_eq!(grace_period_override(false, 60, Some(120), V), 60);
        assert_eq!(grace_period_override(false, 60, Some(10), V), 10);
        assert_eq!(grace_period_override(false, 5, None, V), 5);
    }

    /// `parseThresholdStatement`'s cases where the hand-written parser differed: a zero quantity
    /// is refused, `0%` and `100%` are ignored, decimal exponents parse, percentages are
    /// float32, and the errors carry upstream's words.
    #[test]
    fn thresholds_are_read_as_parse_threshold_statement_reads_them() {
        let parse = |s: &str| parse_threshold(s, Duration::ZERO);
        assert_eq!(
            parse("memory.available<0").unwrap_err().to_string(),
            "threshold \"memory.available<0\": eviction threshold memory.available must be positive: 0"
        );
        assert_eq!(
            parse("memory.available<-1Gi").unwrap_err().to_string(),
            "threshold \"memory.available<-1Gi\": eviction threshold memory.available must be positive: -1Gi"
        );
        assert_eq!(parse("nodefs.available<0%"), Ok(None));
        assert_eq!(parse("nodefs.available<100%"), Ok(None));
        let t = parse("memory.available<1e9").unwrap().unwrap();
        assert_eq!(t.quantity(None), Some(1_000_000_000));
        let t = parse("memory.available<1Gi").unwrap().unwrap();
        assert_eq!(t.quantity(None), Some(1 << 30));
        // 10% is float32(10)/100 = 0.100000001490116...: of 10Gi, 16 bytes more than a tenth.
        let t = parse("nodefs.available<10%").unwrap().unwrap();
        assert_eq!(t.value, ThresholdValue::Percentage(f64::from(0.1f32)));
        assert_eq!(t.quantity(Some(10 << 30)), Some(1_073_741_840));
        assert_eq!(
            parse("nodefs.available<120%").unwrap_err().to_string(),
            "threshold \"nodefs.available<120%\": eviction percentage threshold nodefs.available must be <= 100%: 120%"
        );
        assert_eq!(
            parse("nodefs.available<-5%").unwrap_err().to_string(),
            "threshold \"nodefs.available<-5%\": eviction percentage threshold nodefs.available must be >= 0%: -5%"
        );
        assert_eq!(
            parse("memory.available<1Kb").unwrap_err().to_string(),
            "threshold \"memory.available<1Kb\": invalid value: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            parse("memory.available<1K").unwrap_err().to_string(),
            "threshold \"memory.available<1K\": invalid value: unable to parse quantity's suffix"
        );
        assert!(matches!(
            parse("nodefs.available<ten%"),
            Err(ParseThresholdError::Value { .. })
        ));
        assert_eq!(
            parse("memory.available>1Gi"),
            Err(ParseThresholdError::Syntax("memory.available>1Gi".into()))
        );
        assert_eq!(
            parse("bogus<1"),
            Err(ParseThresholdError::UnknownSignal("bogus<1".into()))
        );
    }

    #[test]
    fn quantities_and_thresholds() {
        // The quantities thresholds are read with (`resource.ParseQuantity`, then `Value()`).
        let parse_quantity = |s: &str| Quantity::parse(s).map(|q| q.value());
        assert_eq!(parse_quantity("100Mi"), Ok(100 << 20));
        assert_eq!(parse_quantity("1.5Gi"), Ok(1536 << 20));
        assert_eq!(parse_quantity("1200"), Ok(1200));
        assert_eq!(parse_quantity("1k"), Ok(1000));
        assert_eq!(parse_quantity("1500m"), Ok(2));
        assert!(parse_quantity("1Xi").is_err());
        assert!(parse_quantity("").is_err());
        // Upstream caps a binary-SI quantity at 2^63-1 instead of refusing it (the hand-written
        // parser this replaced refused it).
        assert_eq!(parse_quantity("99999999999Ei"), Ok(i64::MAX));
        assert!(parse_quantity("1e40").is_err());
        let t = parse_threshold("memory.available<100Mi", Duration::ZERO)
            .unwrap()
            .unwrap();
        assert!(t.is_hard());
        assert_eq!(t.quantity(None), Some(100 << 20));
        let p = parse_threshold("nodefs.available<10%", Duration::from_secs(60))
            .unwrap()
            .unwrap();
        assert_eq!(p.quantity(Some(1000)), Some(100));
        assert!(!p.is_hard());
        assert!(parse_threshold("memory.available>1Gi", Duration::ZERO).is_err());
        assert!(parse_threshold("bogus<1", Duration::ZERO).is_err());
        assert!(parse_threshold("memory.available<-1", Duration::ZERO).is_err());
        assert!(parse_threshold("nodefs.available<120%", Duration::ZERO).is_err());
        assert_eq!(
            default_eviction_hard(crate::rules::runtime::NodeOs::Linux).len(),
            4
        );
    }

    #[test]
    fn critical_pods_are_refused_and_one_pod_per_round() {
        let cfg = EvictionConfig {
            thresholds: vec![parse_threshold("memory.available<1Gi", Duration::ZERO)
                .unwrap()
                .unwrap()],
            eviction_max_pod_grace_period_seconds: 0,
            pressure_transition_period: Duration::ZERO,
        };
        let pod = |name: &str, prio, ws| PodEvictionStats {
            name: name.into(),
            priority: Some(prio),
            memory_working_set_bytes: Some(ws),
            ..Default::default()
        };
        let mut pods = [
            pod("critical", 0, 900 << 20),
            pod("a", 0, 100),
            pod("b", 0, 50),
        ];
        pods[0].static_or_mirror = true;
        assert!(pod("p", SYSTEM_CRITICAL_PRIORITY, 0).is_critical());
        let obs = BTreeMap::from([(EvictionSignal::MemoryAvailable, Observation::new(1, None))]);
        let mut m = EvictionManager::new();
        let out = m.synchronize(&cfg, Duration::ZERO, &obs, &pods, V).unwrap();
        assert_eq!(out.refused_critical, vec!["critical".to_string()]);
        assert_eq!(out.eviction.unwrap().pod, "a");
        // 0 transition period means 5 minutes.
        let calm = BTreeMap::from([(
            EvictionSignal::MemoryAvailable,
            Observation::new(2 << 30, None),
        )]);
        let out = m
            .synchronize(&cfg, Duration::from_secs(299), &calm, &pods, V)
            .unwrap();
        assert!(out
            .node_conditions
            .contains(&NodePressureCondition::MemoryPressure));
        let out = m
            .synchronize(&cfg, Duration::from_secs(300), &calm, &pods, V)
            .unwrap();
        assert!(out.node_conditions.is_empty());
        assert!(m
            .synchronize(&cfg, Duration::from_secs(1), &calm, &pods, V)
            .is_err());
    }

    fn mem(available: &str) -> BTreeMap<EvictionSignal, Observation> {
        let q = Quantity::parse(available).unwrap().value();
        BTreeMap::from([(EvictionSignal::MemoryAvailable, Observation::new(q, None))])
    }

    fn mem_pod(name: &str, prio: i32, request_mi: i64, ws_mi: i64) -> PodEvictionStats {
        PodEvictionStats {
            name: name.into(),
            priority: Some(prio),
            termination_grace_period_seconds: None,
            memory_request_bytes: request_mi << 20,
            memory_working_set_bytes: Some(ws_mi << 20),
            ..Default::default()
        }
    }

    /// `TestMinReclaim` (eviction_manager_test.go): `memory.available<1Gi` with a minimum
    /// reclaim of 500Mi. At 1.2Gi the threshold is still met (not 1.5Gi yet) and the same pod
    /// is evicted again; at 2Gi nothing is evicted but the condition stays for the transition
    /// period.
    #[test]
    fn min_reclaim_as_upstream_test_min_reclaim() {
        let mut t = parse_threshold("memory.available<1Gi", Duration::ZERO)
            .unwrap()
            .unwrap();
        t.min_reclaim = Some(ThresholdValue::bytes(500 << 20));
        let cfg = EvictionConfig {
            thresholds: vec![t],
            eviction_max_pod_grace_period_seconds: 5,
            pressure_transition_period: Duration::from_secs(300),
        };
        let pods = [
            mem_pod("guaranteed-low-priority-high-usage", -1, 1024, 900),
            mem_pod("burstable-below-requests", 0, 100, 50),
            mem_pod("burstable-above-requests", 0, 100, 400),
            mem_pod("best-effort-high-priority-high-usage", 1, 0, 400),
            mem_pod("best-effort-low-priority-low-usage", -1, 0, 100),
        ];
        let mut m = EvictionManager::new();
        let min = Duration::from_secs(60);
        let out = m
            .synchronize(&cfg, Duration::ZERO, &mem("2Gi"), &pods, V)
            .unwrap();
        assert!(out.node_conditions.is_empty() && out.eviction.is_none());
        for (at, available, evicted, pressure) in [
            (1, "500Mi", Some("best-effort-low-priority-low-usage"), true),
            (2, "1.2Gi", Some("best-effort-low-priority-low-usage"), true),
            (3, "2Gi", None, true),
            (8, "2Gi", None, false),
        ] {
            let out = m
                .synchronize(&cfg, min * at, &mem(available), &pods, V)
                .unwrap();
            let e = out.eviction.as_ref();
            assert_eq!(e.map(|e| e.pod.as_str()), evicted, "{available} at {at}m");
            if let Some(e) = e {
                assert_eq!(e.grace_period_override, 1, "a hard threshold");
            }
            assert_eq!(
                out.node_conditions
                    .contains(&NodePressureCondition::MemoryPressure),
                pressure,
                "{available} at {at}m"
            );
        }
    }

    /// `TestMemoryPressure_VerifyPodStatus`: the status message of a pod without container
    /// statistics, and the node's `EvictionThresholdMet` event.
    #[test]
    fn the_eviction_message_in_the_kubelet_words() {
        let cfg = EvictionConfig {
            thresholds: vec![parse_threshold("memory.available<2Gi", Duration::ZERO)
                .unwrap()
                .unwrap()],
            eviction_max_pod_grace_period_seconds: 0,
            pressure_transition_period: Duration::from_secs(300),
        };
        let pods = [
            mem_pod("below-requests", 0, 1024, 900),
            mem_pod("above-requests", 0, 100, 700),
        ];
        let mut m = EvictionManager::new();
        let out = m
            .synchronize(&cfg, Duration::ZERO, &mem("1500Mi"), &pods, V)
            .unwrap();
        let r = out.reclaim.as_ref().unwrap();
        assert_eq!(r.event_message(), "Attempting to reclaim memory");
        let e = out.eviction.unwrap();
        assert_eq!(e.pod, "above-requests");
        assert_eq!(
            e.message,
            "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. "
        );
        // With container statistics: the containers above their request are named, their
        // usage in binary SI (not divisible by 1024: plain bytes).
        let mut hog = mem_pod("hog", 0, 0, 210);
        hog.containers = vec![
            ContainerEvictionStats {
                name: "hog".into(),
                memory_request: "0".into(),
                memory_request_bytes: 0,
                memory_working_set_bytes: Some(215_440 << 10),
            },
            ContainerEvictionStats {
                name: "side".into(),
                memory_request: "64Mi".into(),
                memory_request_bytes: 64 << 20,
                memory_working_set_bytes: Some((1 << 20) + 1),
            },
        ];
        let mut m = EvictionManager::new();
        let obs = BTreeMap::from([(
            EvictionSignal::MemoryAvailable,
            Observation::new(94_371_841, None),
        )]);
        let cfg = EvictionConfig {
            thresholds: vec![parse_threshold("memory.available<100Mi", Duration::ZERO)
                .unwrap()
                .unwrap()],
            ..cfg
        };
        let e = m
            .synchronize(&cfg, Duration::ZERO, &obs, &[hog], V)
            .unwrap()
            .eviction
            .unwrap();
        assert_eq!(
            e.message,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 94371841. Container hog was using 215440Ki, request is 0, has larger consumption of memory. "
        );
        assert_eq!(e.annotations["offending_containers"], "hog");
        assert_eq!(e.annotations["offending_containers_usage"], "215440Ki");
        assert_eq!(e.annotations["starved_resource"], "memory");
    }

    /// `thresholdsUpdatedStats`: a round whose statistics are not newer than the last one's
    /// evicts nothing, though the threshold is met.
    #[test]
    fn stale_statistics_evict_nothing() {
        let cfg = EvictionConfig {
            thresholds: vec![parse_threshold("memory.available<1Gi", Duration::ZERO)
                .unwrap()
                .unwrap()],
            eviction_max_pod_grace_period_seconds: 0,
            pressure_transition_period: Duration::from_secs(300),
        };
        let at = |t: u64| {
            BTreeMap::from([(
                EvictionSignal::MemoryAvailable,
                Observation {
                    available: 1,
                    capacity: None,
                    time: Some(Duration::from_secs(t)),
                },
            )])
        };
        let pods = [mem_pod("a", 0, 0, 1)];
        let mut m = EvictionManager::new();
        let s = Duration::from_secs;
        assert!(m
            .synchronize(&cfg, s(0), &at(0), &pods, V)
            .unwrap()
            .eviction
            .is_some());
        let out = m.synchronize(&cfg, s(10), &at(0), &pods, V).unwrap();
        assert!(out.eviction.is_none() && !out.node_conditions.is_empty());
        assert!(m
            .synchronize(&cfg, s(20), &at(15), &pods, V)
            .unwrap()
            .eviction
            .is_some());
    }

    #[test]
    fn admission() {
        let mem = BTreeSet::from([NodePressureCondition::MemoryPressure]);
        let be = AdmitPod {
            qos: QosClass::BestEffort,
            critical: false,
            tolerates_memory_pressure: false,
        };
        assert!(!admit(&mem, be));
        assert!(admit(
            &mem,
            AdmitPod {
                tolerates_memory_pressure: true,
                ..be
            }
        ));
        assert!(admit(
            &mem,
            AdmitPod {
                critical: true,
                ..be
            }
        ));
        let disk = BTreeSet::from([NodePressureCondition::DiskPressure]);
        assert!(!admit(
            &disk,
            AdmitPod {
                qos: QosClass::Guaranteed,
                ..be
            }
        ));
        assert!(admit(&BTreeSet::new(), be));
    }
}
