//! Property tests for the invariants of pod termination (1.28+ kubelets):
//! SIGKILL never later than hook start + grace + 2 s for a container that waits for no other,
//! the grace period only shrinks, and StopContainer never gets less than 2 s.

use podgrace_core::plan::{
    ContainerPlan, ContainerRole, Handler, PodPlan, RestartPolicy, SourceSpan, WorkloadKind,
};
use podgrace_core::rules::kuberuntime::KillContainer;
use podgrace_core::rules::podworker::{PodUpdate, PodWorker, UpdateType};
use podgrace_core::timeline::{explain, KubeletConfig, Options, Trigger};
use podgrace_core::{KubeVersion, Seconds};
use proptest::prelude::*;

fn container(name: &str, role: ContainerRole, pre_stop: Option<Handler>) -> ContainerPlan {
    ContainerPlan {
        name: name.into(),
        role,
        index: 0,
        image: None,
        image_pull_policy: None,
        image_config_stop_signal: None,
        command: vec!["/app".into()],
        args: vec![],
        working_dir: None,
        env: vec![],
        env_from: vec![],
        ports: vec![],
        volume_mounts: vec![],
        post_start: None,
        pre_stop,
        stop_signal: None,
        liveness_probe: None,
        readiness_probe: None,
        startup_probe: None,
        resources: Default::default(),
        span: SourceSpan::default(),
        field_positions: Default::default(),
    }
}

fn pod(tgps: i64, mains: Vec<ContainerPlan>, sidecars: Vec<ContainerPlan>) -> PodPlan {
    PodPlan {
        name: "p".into(),
        namespace: None,
        kind: WorkloadKind::Pod,
        labels: Default::default(),
        annotations: Default::default(),
        termination_grace_period_seconds: tgps,
        termination_grace_period_defaulted: false,
        termination_grace_period_written: Some(tgps),
        priority: None,
        priority_class_name: None,
        restart_policy: RestartPolicy::Always,
        host_network: false,
        share_process_namespace: false,
        qos_class: podgrace_core::rules::qos::QosClass::BestEffort,
        volumes: vec![],
        os: None,
        replicas: None,
        min_ready_seconds: 0,
        init_containers: sidecars,
        containers: mains,
        span: SourceSpan::default(),
        spec_path: "spec",
        field_positions: Default::default(),
    }
}

fn hook() -> impl Strategy<Value = Option<Handler>> {
    prop_oneof![
        Just(None),
        (0i64..700).prop_map(|s| Some(Handler::Sleep { seconds: s })),
        (0u32..700_000).prop_map(|ms| Some(Handler::Exec {
            command: vec!["sleep".into(), format!("{}.{:03}", ms / 1000, ms % 1000)]
        })),
        Just(Some(Handler::Exec {
            command: vec!["/drain".into()]
        })),
    ]
}

fn trigger() -> impl Strategy<Value = Trigger> {
    prop_oneof![
        Just(Trigger::Delete),
        (0i64..700).prop_map(Trigger::DeleteWithGrace),
        Just(Trigger::ForceDelete),
        Just(Trigger::EvictSoft),
        Just(Trigger::EvictHard),
        Just(Trigger::NodeShutdown),
    ]
}

fn version() -> impl Strategy<Value = KubeVersion> {
    (28u32..=37).prop_map(|m| KubeVersion::new(1, m))
}

proptest! {
    #[test]
    fn sigkill_never_later_than_grace_plus_two(
        tgps in 0i64..700,
        main_hooks in proptest::collection::vec(hook(), 1..3),
        sidecar_hooks in proptest::collection::vec(hook(), 0..3),
        t in trigger(),
        v in version(),
        max_grace in -5i64..700,
    ) {
        let mains = main_hooks.into_iter().enumerate()
            .map(|(i, h)| container(&format!("m{i}"), ContainerRole::Main, h)).collect();
        let sidecars = sidecar_hooks.into_iter().enumerate()
            .map(|(i, h)| container(&format!("s{i}"), ContainerRole::Sidecar, h)).collect();
        let p = pod(tgps, mains, sidecars);
        let opts = Options { version: v, kubelet: KubeletConfig { eviction_max_pod_grace_period: max_grace, ..Default::default() }, ..Default::default() };
        let tl = explain(&p, &t, &opts).unwrap();
        let g = tl.grace_period_seconds;
        prop_assert!(g >= 1);
        let secs = Seconds::from_secs;
        for c in &tl.containers {
            prop_assert!(c.stop_signal_seconds.min <= c.stop_signal_seconds.max);
            prop_assert!(c.kill_seconds.min >= c.stop_signal_seconds.min.saturating_add(secs(2)), "{c:?}");
            if c.role == "main" {
                prop_assert!(c.kill_seconds.max <= secs(g + 2), "{c:?} grace {g}");
            } else {
                // A sidecar deducts two truncated waits (its preStop and its turn), each of which
                // can hide up to a second below the 2 s floor: upstream's bound is g + 3 (strict).
                prop_assert!(c.kill_seconds.max < secs(g + 3), "{c:?} grace {g}");
            }
        }
    }

    #[test]
    fn stop_timeout_is_never_below_two(
        base in -10i64..1000,
        override_seconds in proptest::option::of(-10i64..1000),
        hook_ms in 0i64..2_000_000,
        wait_ms in 0i64..2_000_000,
        v in version(),
    ) {
        let mut k = KillContainer::new(base, override_seconds, v);
        if k.pre_stop_budget(true).is_some() {
            k.pre_stop_finished(hook_ms);
        }
        k.turn_finished(wait_ms);
        prop_assert!(k.stop_timeout() >= 2);
    }

    #[test]
    fn grace_period_only_shrinks(
        tgps in 0i64..700,
        updates in proptest::collection::vec((proptest::option::of(-5i64..700), proptest::option::of(-5i64..700)), 1..8),
        // Before 1.31 a 0 fell back to the full TGPS, which could lengthen a running
        // termination (issues #115819, #120449); the invariant holds from the fix on.
        v in (31u32..=37).prop_map(|m| KubeVersion::new(1, m)),
    ) {
        let mut w = PodWorker::new(v);
        w.update_pod(PodUpdate::new(UpdateType::SyncPodCreate, Some(tgps)));
        let mut last: Option<i64> = None;
        for (dgps, kill_override) in updates {
            let mut u = PodUpdate::new(UpdateType::SyncPodKill, Some(tgps));
            u.deletion_timestamp = dgps.is_some();
            u.deletion_grace_period_seconds = dgps;
            u.kill = Some(podgrace_core::rules::podworker::KillPodOptions { evict: false, override_seconds: kill_override });
            w.update_pod(u);
            prop_assert!(w.grace_period >= 1);
            // Upstream quirk, kept on purpose: a DGPS of 0 drops the running value to 0, and an
            // override in the same update then wins because "0 means unset" (see the unit test
            // `zero_dgps_with_an_override_can_lengthen` in rules::podworker).
            let quirk = dgps == Some(0) && kill_override.is_some_and(|o| o > 0);
            if let (Some(prev), false) = (last, quirk) {
                prop_assert!(w.grace_period <= prev, "grew from {prev} to {}", w.grace_period);
            }
            last = Some(w.grace_period);
        }
    }
}

proptest! {
    /// No input value makes the arithmetic overflow (debug builds panic on overflow).
    #[test]
    fn extreme_values_do_not_overflow(
        tgps in prop_oneof![Just(i64::MAX), Just(i64::MAX / 2), Just(i64::MIN), 0i64..10, (i64::MAX - 10)..=i64::MAX],
        sleep in prop_oneof![Just(i64::MAX), Just(i64::MIN), 0i64..100],
        t in prop_oneof![Just(Trigger::Delete), Just(Trigger::DeleteWithGrace(i64::MAX)), Just(Trigger::ForceDelete), Just(Trigger::EvictSoft), Just(Trigger::EvictHard), Just(Trigger::NodeShutdown)],
        max_grace in prop_oneof![Just(i64::MAX), Just(i64::MIN), -5i64..5],
        v in version(),
    ) {
        let p = pod(
            tgps,
            vec![container("m", ContainerRole::Main, Some(Handler::Sleep { seconds: sleep }))],
            vec![container("s", ContainerRole::Sidecar, Some(Handler::Exec { command: vec!["/x".into()] }))],
        );
        let opts = Options { version: v, kubelet: KubeletConfig { eviction_max_pod_grace_period: max_grace, shutdown_grace_period: i64::MAX, shutdown_grace_period_critical_pods: 1 }, ..Default::default() };
        let tl = explain(&p, &t, &opts).unwrap();
        for c in &tl.containers {
            prop_assert!(c.kill_seconds.max >= c.kill_seconds.min);
            prop_assert!(c.kill_seconds.min >= Seconds::ZERO, "{c:?}");
        }
    }
}
