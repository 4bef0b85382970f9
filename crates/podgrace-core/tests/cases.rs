//! The field cases of `shared/cases/README.md` that `explain` can speak to, with the numbers
//! written there. Each test loads a manifest restating the case and checks the timeline.

use podgrace_core::manifest;
use podgrace_core::timeline::{
    explain, ContainerTimeline, KubeletConfig, Options, Timeline, Trigger,
};
use podgrace_core::KubeVersion;

fn timeline_with(yaml: &str, trigger: Trigger, opts: Options) -> Timeline {
    let m = manifest::load_with(
        yaml,
        "case.yaml",
        &manifest::LoadOptions {
            kube_version: opts.version,
        },
    )
    .unwrap_or_else(|e| panic!("case manifest does not load: {e}"));
    let pod = m.pods().next().expect("one pod");
    explain(pod, &trigger, &opts).expect("explain")
}

fn timeline(yaml: &str, trigger: Trigger) -> Timeline {
    timeline_with(yaml, trigger, Options::default())
}

fn container<'a>(t: &'a Timeline, name: &str) -> &'a ContainerTimeline {
    t.containers
        .iter()
        .find(|c| c.name == name)
        .expect("container")
}

/// Asserts a span is exactly `[min, max]` seconds.
fn span(s: podgrace_core::timeline::Span, min: f64, max: f64) {
    assert!(
        (s.min.as_f64() - min).abs() < 1e-9 && (s.max.as_f64() - max).abs() < 1e-9,
        "got {s:?}, want [{min}, {max}]"
    );
}

fn pod(spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: case\nspec:\n{spec}")
}

#[test]
fn r01_no_sigterm_handler_takes_the_full_grace_period() {
    let t = timeline(&pod("  containers:\n    - name: echo\n      image: ealen/echo-server\n      command: [node, index.js]\n"), Trigger::Delete);
    assert_eq!(t.grace_period_seconds, 30);
    let c = container(&t, "echo");
    assert_eq!(c.stop_signal, "SIGTERM");
    span(c.stop_signal_seconds, 0.0, 0.0);
    span(c.kill_seconds, 30.0, 30.0);
}

#[test]
fn r04_long_grace_kills_only_at_600() {
    let t = timeline(&pod("  terminationGracePeriodSeconds: 600\n  containers:\n    - name: worker\n      image: apache/airflow\n      command: [dumb-init, --, bash, -c, exec airflow celery worker]\n"), Trigger::Delete);
    span(container(&t, "worker").kill_seconds, 600.0, 600.0);
}

#[test]
fn r09_pre_stop_longer_than_the_grace_period_is_cut() {
    let yaml = pod("  containers:\n    - name: app\n      image: busybox\n      command: [/app]\n      lifecycle:\n        preStop:\n          exec:\n            command: [/shutdown.sh]\n");
    let t = timeline(&yaml, Trigger::Delete);
    let c = container(&t, "app");
    let hook = c.pre_stop.as_ref().expect("hook runs");
    span(hook.end_seconds, 0.0, 30.0);
    // The hook that runs for minutes: SIGTERM at t=30, SIGKILL at t=32.
    assert_eq!(c.stop_signal_seconds.max.as_f64(), 30.0);
    assert_eq!(c.kill_seconds.max.as_f64(), 32.0);

    let known = pod("  containers:\n    - name: app\n      image: busybox\n      command: [/app]\n      lifecycle:\n        preStop:\n          exec:\n            command: [sh, -c, sleep 300]\n");
    let t = timeline(&known, Trigger::Delete);
    let c = container(&t, "app");
    span(c.stop_signal_seconds, 30.0, 30.0);
    span(c.kill_seconds, 32.0, 32.0);
    assert!(t.findings.iter().any(|f| f.rule == "prestop-exceeds-grace"));
}

const R10: &str = "  terminationGracePeriodSeconds: 60\n  containers:\n    - name: app\n      image: busybox\n      command: [sh, -c, \"trap '' TERM; while :; do sleep 1; done\"]\n      lifecycle:\n        preStop:\n          exec:\n            command: [sleep, \"999999\"]\n";

#[test]
fn r10_hanging_pre_stop_is_abandoned_at_the_grace_period() {
    let t = timeline(&pod(R10), Trigger::Delete);
    let c = container(&t, "app");
    span(c.stop_signal_seconds, 60.0, 60.0);
    span(c.kill_seconds, 62.0, 62.0);
    // Invariant: stop-signal time + remainder <= TGPS + 2.
    assert!(c.kill_seconds.max.as_f64() <= 60.0 + 2.0);
}

#[test]
fn r10_kubelets_1_22_to_1_27_took_twice_the_grace_period() {
    let opts = Options {
        version: KubeVersion::new(1, 27),
        ..Default::default()
    };
    let t = timeline_with(&pod(R10), Trigger::Delete, opts);
    let c = container(&t, "app");
    span(c.stop_signal_seconds, 60.0, 60.0);
    span(c.kill_seconds, 120.0, 120.0);
    assert!(t.findings.iter().any(|f| f.rule == "kill-beyond-grace"));
}

#[test]
fn r12_sigterm_when_the_hook_returns_sigkill_at_the_grace_period() {
    let t = timeline(&pod("  terminationGracePeriodSeconds: 300\n  containers:\n    - name: app\n      image: example/app\n      command: [sh, -c, /app]\n      lifecycle:\n        preStop:\n          exec:\n            command: [sleep, \"120\"]\n"), Trigger::Delete);
    let c = container(&t, "app");
    span(c.stop_signal_seconds, 120.0, 120.0);
    // 300 - 120 = 180 s left for the app: SIGKILL at t=300.
    span(c.kill_seconds, 300.0, 300.0);
}

#[test]
fn r14_exec_sleep_longer_than_tgps_is_silently_truncated() {
    let t = timeline(&pod("  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      lifecycle:\n        preStop:\n          exec:\n            command: [sh, -c, sleep 60]\n"), Trigger::Delete);
    let c = container(&t, "app");
    span(c.pre_stop.as_ref().unwrap().end_seconds, 30.0, 30.0);
    span(c.stop_signal_seconds, 30.0, 30.0);
    span(c.kill_seconds, 32.0, 32.0);
}

#[test]
fn r14_sleep_action_above_tgps_is_rejected() {
    let yaml = pod("  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: 60\n");
    let err = manifest::load(&yaml, "case.yaml").expect_err("the API server rejects it");
    let text = err.to_string();
    // Upstream validateSleepAction reports the error on the sleep action itself.
    assert_eq!(
        text,
        "case.yaml:13:13: spec.containers[0].lifecycle.preStop.sleep: Invalid value: 60: must be non-negative and less than terminationGracePeriodSeconds (30)"
    );
}

#[test]
fn r15_http_get_hook_that_fails_at_once_gives_sigterm_at_zero() {
    let t = timeline(&pod("  terminationGracePeriodSeconds: 90\n  containers:\n    - name: server\n      image: kserve/modelmesh\n      command: [/server]\n      lifecycle:\n        preStop:\n          httpGet:\n            path: /prestop\n            port: 8090\n"), Trigger::Delete);
    let c = container(&t, "server");
    assert_eq!(c.pre_stop.as_ref().unwrap().action, "httpGet");
    // Refused at t≈0: SIGTERM at t≈0 and SIGKILL at t=90 (the min case); a hook that blocks
    // uses the whole budget (the max case).
    assert_eq!(c.stop_signal_seconds.min.as_f64(), 0.0);
    assert_eq!(c.kill_seconds.min.as_f64(), 90.0);
}

#[test]
fn r16_quit_hook_returns_at_once_and_sigterm_follows() {
    let t = timeline(&pod("  containers:\n    - name: web\n      image: bitnami/nginx:1.27\n      command: [nginx, -g, daemon off;]\n      lifecycle:\n        preStop:\n          exec:\n            command: [nginx, -s, quit]\n"), Trigger::Delete);
    let c = container(&t, "web");
    assert_eq!(c.stop_signal, "SIGTERM");
    assert_eq!(c.stop_signal_seconds.min.as_f64(), 0.0);
    // The official image stops with SIGQUIT (its STOPSIGNAL), the graceful quit.
    let t = timeline(&pod("  containers:\n    - name: web\n      image: nginx:1.27\n      command: [nginx, -g, daemon off;]\n"), Trigger::Delete);
    assert_eq!(container(&t, "web").stop_signal, "SIGQUIT");
}

#[test]
fn r17_probe_kills_run_pre_stop_with_the_probe_grace() {
    let yaml = pod("  terminationGracePeriodSeconds: 300\n  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      livenessProbe:\n        httpGet:\n          path: /healthz\n          port: 8080\n        terminationGracePeriodSeconds: 10\n      lifecycle:\n        preStop:\n          exec:\n            command: [/upload-state.sh]\n");
    let t = timeline(&yaml, Trigger::Liveness("app".into()));
    assert_eq!(t.grace_period_seconds, 10);
    let c = container(&t, "app");
    span(
        c.pre_stop
            .as_ref()
            .expect("hook runs on a liveness kill")
            .end_seconds,
        0.0,
        10.0,
    );
    span(c.kill_seconds, 10.0, 12.0);
    // On API deletion the hook runs too, bounded by TGPS.
    let t = timeline(&yaml, Trigger::Delete);
    span(container(&t, "app").kill_seconds, 300.0, 302.0);
}

const R19: &str = "  terminationGracePeriodSeconds: 120\n  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n";

fn evict_soft(max: i64) -> Timeline {
    let opts = Options {
        kubelet: KubeletConfig {
            eviction_max_pod_grace_period: max,
            ..Default::default()
        },
        ..Default::default()
    };
    timeline_with(&pod(R19), Trigger::EvictSoft, opts)
}

#[test]
fn r19_soft_eviction_with_zero_or_negative_max_kills_at_once() {
    for max in [-1, 0] {
        let t = evict_soft(max);
        assert_eq!(t.grace_period_seconds, 1, "max {max}");
        let c = container(&t, "app");
        span(c.stop_signal_seconds, 0.0, 0.0);
        span(c.kill_seconds, 2.0, 2.0);
        assert!(t
            .findings
            .iter()
            .any(|f| f.rule == "soft-eviction-is-immediate"));
    }
    // Positive N: SIGKILL at min(N, 120).
    span(container(&evict_soft(60), "app").kill_seconds, 60.0, 60.0);
    span(
        container(&evict_soft(500), "app").kill_seconds,
        120.0,
        120.0,
    );
}

#[test]
fn r22_a_regular_proxy_container_gets_sigterm_with_the_app() {
    let t = timeline(&pod("  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n    - name: istio-proxy\n      image: istio/proxyv2:1.22.0\n      command: [pilot-agent, proxy]\n"), Trigger::Delete);
    for name in ["app", "istio-proxy"] {
        span(container(&t, name).stop_signal_seconds, 0.0, 0.0);
    }
}

#[test]
fn r25_pre_stop_shorter_than_the_load_balancer_lag() {
    let t = timeline(&pod("  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: 15\n"), Trigger::Delete);
    let c = container(&t, "app");
    span(c.stop_signal_seconds, 15.0, 15.0);
    span(c.kill_seconds, 30.0, 30.0);
    let t = timeline(&pod("  terminationGracePeriodSeconds: 160\n  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: 130\n"), Trigger::Delete);
    let c = container(&t, "app");
    span(c.stop_signal_seconds, 130.0, 130.0);
    span(c.kill_seconds, 160.0, 160.0);
}

#[test]
fn r26_the_pod_would_allow_120_seconds() {
    let t = timeline(&pod("  terminationGracePeriodSeconds: 120\n  containers:\n    - name: grpc\n      image: example/grpc\n      command: [/server]\n"), Trigger::Delete);
    span(container(&t, "grpc").kill_seconds, 120.0, 120.0);
}

#[test]
fn r27_graceful_stop_that_never_returns_hits_sigkill_at_30() {
    let t = timeline(&pod("  containers:\n    - name: gateway\n      image: aibrix/gateway-plugins\n      command: [/gateway]\n"), Trigger::Delete);
    span(container(&t, "gateway").kill_seconds, 30.0, 30.0);
}

const FORCE: &str = "  terminationGracePeriodSeconds: 30\n  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      lifecycle:\n        preStop:\n          exec:\n            command: [/drain]\n";

#[test]
fn model_10_force_delete_kills_with_budget_one() {
    let t = timeline(&pod(FORCE), Trigger::ForceDelete);
    assert_eq!(t.grace_period_seconds, 1);
    let c = container(&t, "app");
    span(c.pre_stop.as_ref().unwrap().end_seconds, 0.0, 1.0);
    // SIGKILL about 2 s after SIGTERM.
    span(c.kill_seconds, 2.0, 3.0);
    assert!(t
        .findings
        .iter()
        .any(|f| f.rule == "force-delete-keeps-running"));
}

#[test]
fn model_10_grace_period_zero_without_force_is_one() {
    let t = timeline(&pod(FORCE), Trigger::DeleteWithGrace(0));
    assert_eq!(t.grace_period_seconds, 1);
}

#[test]
fn r20_old_kubelets_gave_force_deleted_pods_the_full_tgps() {
    let opts = Options {
        version: KubeVersion::new(1, 28),
        ..Default::default()
    };
    let t = timeline_with(&pod(FORCE), Trigger::ForceDelete, opts);
    assert_eq!(t.grace_period_seconds, 30);
}

#[test]
fn model_7_hard_eviction_uses_one_second() {
    let t = timeline(&pod(FORCE), Trigger::EvictHard);
    assert_eq!(t.grace_period_seconds, 1);
    span(container(&t, "app").kill_seconds, 2.0, 3.0);
}

#[test]
fn model_3_native_sidecar_stops_after_the_main_container() {
    let yaml = pod("  terminationGracePeriodSeconds: 30\n  initContainers:\n    - name: proxy\n      image: envoyproxy/envoy\n      command: [envoy]\n      restartPolicy: Always\n  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: 5\n");
    let t = timeline(&yaml, Trigger::Delete);
    let app = container(&t, "app");
    span(app.stop_signal_seconds, 5.0, 5.0);
    span(app.kill_seconds, 30.0, 30.0);
    let proxy = container(&t, "proxy");
    assert_eq!(proxy.role, "sidecar");
    // The proxy's stop signal waits for the app: at 5 s if the app exits on SIGTERM, at 30 s if
    // it runs until SIGKILL; the wait is deducted, so SIGKILL comes 2 s later at the latest.
    span(proxy.stop_signal_seconds, 5.0, 30.0);
    span(proxy.kill_seconds, 30.0, 32.0);
}

#[test]
fn critical_pods_are_not_evicted_and_get_the_critical_shutdown_period() {
    let yaml = pod("  priorityClassName: system-node-critical\n  containers:\n    - name: proxy\n      image: registry.k8s.io/kube-proxy:v1.31.0\n      command: [kube-proxy]\n");
    for t in [Trigger::EvictHard, Trigger::EvictSoft] {
        let tl = timeline(&yaml, t);
        assert!(tl.containers.is_empty());
        assert!(tl
            .findings
            .iter()
            .any(|f| f.rule == "critical-pod-not-evicted"));
    }
    // shutdownGracePeriod 30 s with 10 s for critical pods: the critical group gets 10 s.
    let tl = timeline(&yaml, Trigger::NodeShutdown);
    assert_eq!(tl.grace_period_seconds, 10);
    let plain =
        pod("  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n");
    assert_eq!(
        timeline(&plain, Trigger::NodeShutdown).grace_period_seconds,
        20
    );
}

#[test]
fn graceful_node_shutdown_disabled_is_an_error() {
    let opts = Options {
        kubelet: KubeletConfig {
            shutdown_grace_period: 0,
            shutdown_grace_period_critical_pods: 0,
            ..Default::default()
        },
        ..Default::default()
    };
    let m = manifest::load(&pod(R19), "case.yaml").unwrap();
    let err = explain(m.pods().next().unwrap(), &Trigger::NodeShutdown, &opts).unwrap_err();
    assert!(
        err.to_string()
            .contains("graceful node shutdown is disabled"),
        "{err}"
    );
}

#[test]
fn a_tcp_socket_pre_stop_fails_at_once() {
    let t = timeline(&pod("  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      lifecycle:\n        preStop:\n          tcpSocket:\n            port: 8080\n"), Trigger::Delete);
    let c = container(&t, "app");
    span(c.pre_stop.as_ref().unwrap().end_seconds, 0.0, 0.0);
    span(c.stop_signal_seconds, 0.0, 0.0);
    span(c.kill_seconds, 30.0, 30.0);
    assert!(t
        .findings
        .iter()
        .any(|f| f.rule == "tcpsocket-hook-not-run"));
    assert!(!t.findings.iter().any(|f| f.rule == "prestop-exceeds-grace"));
}

#[test]
fn a_sigkill_stop_signal_kills_at_the_stop_signal() {
    let t = timeline(&pod("  os:\n    name: linux\n  containers:\n    - name: app\n      image: example/app\n      command: [/app]\n      lifecycle:\n        stopSignal: SIGKILL\n        preStop:\n          sleep:\n            seconds: 3\n"), Trigger::Delete);
    let c = container(&t, "app");
    assert_eq!(c.stop_signal, "SIGKILL");
    span(c.stop_signal_seconds, 3.0, 3.0);
    span(c.kill_seconds, 3.0, 3.0);
    assert!(t.findings.iter().any(|f| f.rule == "stop-signal-sigkill"));
    assert!(!t.findings.iter().any(|f| f.rule == "immediate-sigkill"));
}

#[test]
fn soft_eviction_before_1_31_falls_back_to_the_full_grace() {
    let opts = Options {
        version: KubeVersion::new(1, 28),
        ..Default::default()
    };
    let t = timeline_with(&pod(R19), Trigger::EvictSoft, opts);
    assert_eq!(t.grace_period_seconds, 120);
    assert!(!t
        .findings
        .iter()
        .any(|f| f.rule == "soft-eviction-is-immediate"));
    assert!(t
        .findings
        .iter()
        .any(|f| f.rule == "zero-override-means-full-grace"));
}

#[test]
fn features_are_gated_by_kubernetes_version() {
    let load = |yaml: &str, v: KubeVersion| {
        manifest::load_with(yaml, "v.yaml", &manifest::LoadOptions { kube_version: v })
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let sleep = pod("  containers:\n    - name: app\n      image: x\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: 5\n");
    assert!(load(&sleep, KubeVersion::new(1, 30)).is_ok());
    let err = load(&sleep, KubeVersion::new(1, 29)).unwrap_err();
    assert!(
        err.contains("preStop.sleep: Forbidden: the sleep action needs Kubernetes 1.30"),
        "{err}"
    );
    let sidecar = pod("  initContainers:\n    - name: proxy\n      image: x\n      restartPolicy: Always\n  containers:\n    - name: app\n      image: x\n");
    assert!(load(&sidecar, KubeVersion::new(1, 29)).is_ok());
    let err = load(&sidecar, KubeVersion::new(1, 28)).unwrap_err();
    assert!(
        err.contains(
            "initContainers[0].restartPolicy: Forbidden: native sidecars need Kubernetes 1.29"
        ),
        "{err}"
    );
    let signal = pod("  os:\n    name: linux\n  containers:\n    - name: app\n      image: x\n      lifecycle:\n        stopSignal: SIGUSR1\n");
    assert!(load(&signal, KubeVersion::new(1, 33)).is_ok());
    let err = load(&signal, KubeVersion::new(1, 32)).unwrap_err();
    assert!(
        err.contains("lifecycle.stopSignal: Forbidden: lifecycle.stopSignal needs Kubernetes 1.33"),
        "{err}"
    );
}

#[test]
fn container_names_must_be_rfc_1123_labels() {
    let err = manifest::load(
        &pod("  containers:\n    - name: My_App\n      image: x\n"),
        "n.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("n.yaml:7:13: spec.containers[0].name: Invalid value: \"My_App\": a lowercase RFC 1123 label"), "{err}");
}

/// Not a field case: the largest grace period the API accepts (int64) is timed to the second,
/// where an f64 of seconds or an i64 of milliseconds would round or saturate.
#[test]
fn int64_grace_periods_are_timed_exactly() {
    use podgrace_core::Seconds;
    let max = Seconds::from_secs(i64::MAX);
    let two = Seconds::from_secs(2);
    let yaml = pod("  terminationGracePeriodSeconds: 9223372036854775807\n  containers:\n    - name: app\n      image: x\n    - name: sleeper\n      image: x\n      lifecycle:\n        preStop:\n          sleep: {seconds: 9223372036854775807}\n    - name: curl\n      image: x\n      lifecycle:\n        preStop:\n          exec: {command: [curl, -s, localhost/drain]}\n");
    let t = timeline(&yaml, Trigger::Delete);
    assert_eq!(t.grace_period_seconds, i64::MAX);
    let app = container(&t, "app");
    assert_eq!((app.kill_seconds.min, app.kill_seconds.max), (max, max));
    assert_eq!(app.kill_seconds.max.to_string(), "9223372036854775807");
    let sleeper = container(&t, "sleeper");
    let end = sleeper.pre_stop.as_ref().expect("hook").end_seconds;
    assert_eq!((end.min, end.max), (max, max));
    // The hook uses the whole budget: the stop signal at the budget, SIGKILL 2 s (the floor)
    // later, beyond i64::MAX seconds.
    assert_eq!(sleeper.kill_seconds.max, max.saturating_add(two));
    assert_eq!(sleeper.kill_seconds.max.to_string(), "9223372036854775809");
    let curl = container(&t, "curl");
    assert_eq!(curl.stop_signal_seconds.min, Seconds::ZERO);
    assert_eq!(curl.stop_signal_seconds.max, max);
    assert_eq!(
        (curl.kill_seconds.min, curl.kill_seconds.max),
        (max, max.saturating_add(two))
    );
    let json = serde_json::to_string(&curl.kill_seconds).expect("json");
    assert_eq!(
        json,
        r#"{"min":9223372036854775807,"max":9223372036854775809}"#
    );

    // 1.22–1.27 re-grant the whole grace after the hook: SIGKILL at twice i64::MAX seconds.
    let opts = Options {
        version: KubeVersion::new(1, 27),
        ..Options::default()
    };
    let curl_only = pod("  terminationGracePeriodSeconds: 9223372036854775807\n  containers:\n    - name: curl\n      image: x\n      lifecycle:\n        preStop:\n          exec: {command: [curl, -s, localhost/drain]}\n");
    let t = timeline_with(&curl_only, Trigger::Delete, opts);
    let curl = container(&t, "curl");
    assert_eq!(curl.kill_seconds.max, max.saturating_add(max));
    assert_eq!(curl.kill_seconds.max.to_string(), "18446744073709551614");
    assert!(t.findings.iter().any(|f| f.rule == "kill-beyond-grace"
        && f.message.contains("as late as t=18446744073709551614,")));
}

// ---- The recorded 1.32 cluster (`shared/cases/real-cluster-1.32.md`) ----

/// The pod of cases a to c: TGPS 10, exec preStop `sleep 3`, an app that ignores SIGTERM.
const RECORDED: &str = "  terminationGracePeriodSeconds: 10\n  containers:\n    - name: app\n      image: docker.io/library/sa-app:1\n      command: [/sigapp, --ignore-term]\n      lifecycle:\n        preStop:\n          exec: {command: [sleep, \"3\"]}\n";

fn v1_32() -> Options {
    Options {
        version: KubeVersion::new(1, 32),
        ..Default::default()
    }
}

#[test]
fn recorded_a_delete_with_grace_5_sigterm_after_the_hook_sigkill_at_5() {
    // Recorded: preStop +124 → +3126 ms, SIGTERM +3134, exit 137 at +5145 (ms after the
    // delete command; the kubelet's Killing event came at +92). StopContainer got 5 − 3 = 2.
    let t = timeline_with(&pod(RECORDED), Trigger::DeleteWithGrace(5), v1_32());
    let c = container(&t, "app");
    assert_eq!(t.grace_period_seconds, 5);
    span(c.pre_stop.as_ref().unwrap().end_seconds, 3.0, 3.0);
    span(c.stop_signal_seconds, 3.0, 3.0);
    span(c.kill_seconds, 5.0, 5.0);
    assert_eq!(c.stop_timeout_seconds, (2, 2));
}

#[test]
fn recorded_a_with_containerd_latencies_lands_on_the_recorded_instants() {
    // With the measured containerd 1.6 latencies the stop signal comes 8–10 ms after the hook
    // and the death 20–30 ms after the deadline: recorded 3134 − 3126 = 8 ms and
    // 5145 − 5126 = 19 ms (the StopContainer call came about when the hook ended).
    let opts = Options {
        runtime: Some(podgrace_core::rules::latency::RuntimeProfile::Containerd),
        ..v1_32()
    };
    let t = timeline_with(&pod(RECORDED), Trigger::DeleteWithGrace(5), opts);
    let c = container(&t, "app");
    span(c.stop_signal_seconds, 3.008, 3.010);
    span(c.kill_seconds, 5.020, 5.030);
    let rt = t.runtime.as_ref().expect("runtime latencies listed");
    assert_eq!(rt.latencies.len(), 4);
    assert!(rt.latencies.iter().all(|l| !l.source.is_empty()));
}

#[test]
fn recorded_b_force_delete_cuts_the_hook_at_1_and_kills_at_3() {
    // Recorded: preStop +127, cut after 1 s; SIGTERM +1084; SIGKILL +3095 (2 s floor).
    let t = timeline_with(&pod(RECORDED), Trigger::ForceDelete, v1_32());
    let c = container(&t, "app");
    assert_eq!(t.grace_period_seconds, 1);
    span(c.pre_stop.as_ref().unwrap().end_seconds, 1.0, 1.0);
    span(c.stop_signal_seconds, 1.0, 1.0);
    span(c.kill_seconds, 3.0, 3.0);
    assert!(t
        .findings
        .iter()
        .any(|f| f.rule == "force-delete-keeps-running"));
}

#[test]
fn recorded_c_a_second_shorter_delete_does_not_shorten_the_kill_in_flight() {
    // Recorded twice on 1.32: --grace-period=30, then --grace-period=3 2.3 s (5.3 s) later.
    // The API: DGPS 3, deletionTimestamp 27 s earlier. The kubelet: preStop its full 3 s,
    // StopContainer timeout 27, SIGKILL at 30.1–30.2 s.
    for at in ["3@2.329", "3@5.263"] {
        let opts = Options {
            second_delete: Some(at.parse().unwrap()),
            ..v1_32()
        };
        let t = timeline_with(&pod(RECORDED), Trigger::DeleteWithGrace(30), opts);
        let c = container(&t, "app");
        span(c.stop_signal_seconds, 3.0, 3.0);
        span(c.kill_seconds, 30.0, 30.0);
        assert_eq!(c.stop_timeout_seconds, (27, 27));
        let sd = t.second_delete.as_ref().expect("second delete");
        assert_eq!(sd.api, "shortened");
        assert_eq!(sd.deletion_grace_period_seconds, Some(3));
        assert_eq!(sd.deletion_timestamp_seconds, Some(3));
        assert_eq!(sd.kubelet, "ignored");
        assert!(!sd.shortens);
        assert_eq!(sd.kill_grace_period_seconds, 30);
        let f = t
            .findings
            .iter()
            .find(|f| f.rule == "second-delete-does-not-shorten")
            .expect("finding");
        assert!(
            f.message.contains("moves deletionTimestamp back 27 s"),
            "{}",
            f.message
        );
        assert!(
            f.message.contains("Cancelling current pod sync"),
            "{}",
            f.message
        );
    }
}

#[test]
fn a_second_delete_from_1_33_keeps_the_timestamp_out_of_the_past() {
    // 5.263 s in, old DT − 30 + 3 = 3 s lies in the past: from 1.33 it becomes now (5 s, as
    // stored in whole seconds) and DGPS 1. The kill in flight is not shortened either way.
    let opts = Options {
        version: KubeVersion::new(1, 33),
        second_delete: Some("3@5.263".parse().unwrap()),
        ..Default::default()
    };
    let t = timeline_with(&pod(RECORDED), Trigger::DeleteWithGrace(30), opts);
    let sd = t.second_delete.as_ref().unwrap();
    assert_eq!(sd.deletion_grace_period_seconds, Some(1));
    assert_eq!(sd.deletion_timestamp_seconds, Some(5));
    assert_eq!(sd.kubelet, "ignored");
    span(container(&t, "app").kill_seconds, 30.0, 30.0);
}

#[test]
fn a_second_force_delete_shortens_only_before_1_22() {
    let with = |v: KubeVersion| {
        let opts = Options {
            version: v,
            second_delete: Some("force@5".parse().unwrap()),
            ..Default::default()
        };
        timeline_with(&pod(RECORDED), Trigger::DeleteWithGrace(30), opts)
    };
    let new = with(KubeVersion::new(1, 32));
    assert_eq!(new.second_delete.as_ref().unwrap().api, "deleted");
    assert_eq!(new.second_delete.as_ref().unwrap().kubelet, "ignored");
    span(container(&new, "app").kill_seconds, 30.0, 30.0);
    // 1.21: the object's removal reaches the pod killer, which kills again at once with
    // StopContainer(2): SIGKILL at 5 + 2 s; the stop signal (after the 3 s hook) is unchanged.
    let old = with(KubeVersion::new(1, 21));
    let sd = old.second_delete.as_ref().unwrap();
    assert_eq!(sd.kubelet, "killedAgain");
    assert!(sd.shortens);
    let c = container(&old, "app");
    span(c.stop_signal_seconds, 3.0, 3.0);
    span(c.kill_seconds, 7.0, 7.0);
    assert!(old
        .findings
        .iter()
        .any(|f| f.rule == "second-delete-kills-again"));
}

#[test]
fn a_second_delete_after_a_force_delete_finds_no_object() {
    let opts = Options {
        second_delete: Some("3@0.5".parse().unwrap()),
        ..v1_32()
    };
    let t = timeline_with(&pod(RECORDED), Trigger::ForceDelete, opts);
    let sd = t.second_delete.as_ref().unwrap();
    assert_eq!(sd.api, "notFound");
    let f = t
        .findings
        .iter()
        .find(|f| f.rule == "second-delete-does-not-shorten")
        .unwrap();
    assert!(
        f.message.contains("pods \"case\" not found"),
        "{}",
        f.message
    );
}

#[test]
fn a_native_sidecar_waits_for_the_mains_stop_container_to_return() {
    // containerd 1.6 returned the main container's StopContainer 38 ms–2.9 s after its death;
    // the kubelet stops the sidecar only then.
    let yaml = pod("  terminationGracePeriodSeconds: 30\n  initContainers:\n    - name: proxy\n      image: envoyproxy/envoy\n      command: [envoy]\n      restartPolicy: Always\n  containers:\n    - name: app\n      image: app\n      command: [app]\n");
    let opts = Options {
        runtime: Some(podgrace_core::rules::latency::RuntimeProfile::Containerd),
        ..v1_32()
    };
    let t = timeline_with(&yaml, Trigger::Delete, opts);
    let proxy = container(&t, "proxy");
    // Fastest: app's stop signal at 8 ms, it exits at once, StopContainer returns 38 ms later,
    // the proxy's StopContainer is called then and its stop signal 8 ms after that.
    assert_eq!(proxy.stop_signal_seconds.min.ms(), 8 + 38 + 8);
    // Slowest: app SIGKILLed at 30 s + 30 ms and its StopContainer returning 2.9 s later would
    // be past the proxy's own 30 s bound on waitForTurn, so the proxy's turn comes at 30 s.
    assert_eq!(proxy.stop_signal_seconds.max.ms(), 30_000 + 10);
}
