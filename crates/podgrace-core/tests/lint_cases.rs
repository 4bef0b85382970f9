//! The field cases of `shared/cases/README.md` that name `lint`, restated as manifests, with the
//! findings lint must give (rule ids, lines, and the numbers written in the case).

use podgrace_core::lint::{self, LintFinding, LintOptions, Severity};
use podgrace_core::manifest::{self, LoadOptions};

fn lint_with(yaml: &str, opts: &LintOptions) -> Vec<LintFinding> {
    let (m, errors) = manifest::load_partial(
        yaml,
        "case.yaml",
        &LoadOptions {
            kube_version: opts.version,
        },
    );
    let (mut findings, rest) = lint::rejections(errors, opts);
    assert!(rest.is_empty(), "case manifest does not load: {rest:?}");
    findings.extend(lint::lint(&[m], opts));
    findings
}

fn lint(yaml: &str) -> Vec<LintFinding> {
    lint_with(yaml, &LintOptions::default())
}

/// `(rule, line)` of every finding.
fn ids(f: &[LintFinding]) -> Vec<(&'static str, usize)> {
    f.iter().map(|f| (f.rule, f.span.line)).collect()
}

fn one<'a>(f: &'a [LintFinding], rule: &str) -> &'a LintFinding {
    let hits: Vec<&LintFinding> = f.iter().filter(|f| f.rule == rule).collect();
    assert_eq!(hits.len(), 1, "{rule}: {f:#?}");
    hits[0]
}

fn pod(spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: case\nspec:\n{spec}")
}

#[test]
fn r02_npm_start_wrapper() {
    let f = lint(&pod("  containers:\n    - name: web\n      image: node:20-alpine\n      command: [npm, start]\n"));
    assert_eq!(ids(&f), vec![("package-manager-wrapper", 9)]);
    assert!(f[0].message.contains("`npm start`"), "{}", f[0].message);
}

#[test]
fn r04_dumb_init_signals_the_group_as_info() {
    let f = lint(&pod("  terminationGracePeriodSeconds: 600\n  containers:\n    - name: worker\n      image: apache/airflow\n      command: [dumb-init, --, bash, -c, exec airflow celery worker]\n"));
    assert_eq!(
        ids(&f),
        vec![
            ("grace-period-too-long", 6),
            ("init-signals-process-group", 10)
        ]
    );
    let g = one(&f, "init-signals-process-group");
    assert_eq!(g.severity, Severity::Info);
    assert!(g.message.contains("terminationGracePeriodSeconds is 600 s"));
    assert!(g.message.contains("DUMB_INIT_SETSID=0"));
}

#[test]
fn r09_prestop_longer_than_grace_is_cut() {
    let f = lint(&pod("  containers:\n    - name: app\n      image: app\n      lifecycle:\n        preStop:\n          exec:\n            command: [sleep, \"60\"]\n"));
    assert_eq!(ids(&f), vec![("prestop-exceeds-grace", 10)]);
    assert_eq!(f[0].severity, Severity::Error);
    assert!(
        f[0].message
            .contains("SIGTERM comes at t=30 and SIGKILL at t=32"),
        "{}",
        f[0].message
    );
    // TGPS ≥ hook + drain: the hook fits (330 s is long enough to be noted, though).
    let ok = lint(&pod("  terminationGracePeriodSeconds: 330\n  containers:\n    - name: app\n      image: app\n      lifecycle:\n        preStop:\n          exec:\n            command: [sleep, \"300\"]\n"));
    assert_eq!(ids(&ok), vec![("grace-period-too-long", 6)]);
}

#[test]
fn r14_sleep_action_above_grace_is_rejected_exec_sleep_is_cut() {
    let f = lint(&pod("  containers:\n    - name: app\n      image: app\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: 60\n"));
    assert_eq!(ids(&f), vec![("sleep-action-rejected", 12)]);
    assert!(f[0].message.contains("sleep.seconds 60"));
    assert!(f[0].message.contains("terminationGracePeriodSeconds (30)"));
    let exec = lint(&pod("  containers:\n    - name: app\n      image: app\n      lifecycle:\n        preStop:\n          exec:\n            command: [sh, -c, \"sleep 60\"]\n"));
    assert_eq!(ids(&exec), vec![("prestop-exceeds-grace", 10)]);
    // The reduced value of the report (20) is accepted and leaves 10 s.
    let ok = lint(&pod("  containers:\n    - name: app\n      image: app\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: 20\n"));
    assert!(ids(&ok).is_empty(), "{ok:#?}");
}

#[test]
fn r15_httpget_hook_goes_to_the_pod_ip() {
    let f = lint(&pod("  terminationGracePeriodSeconds: 90\n  containers:\n    - name: modelmesh\n      image: kserve/modelmesh\n      ports:\n        - containerPort: 8090\n      lifecycle:\n        preStop:\n          httpGet:\n            path: /prestop\n            port: 8090\n"));
    assert_eq!(ids(&f), vec![("prestop-httpget-pod-ip", 13)]);
    assert_eq!(f[0].severity, Severity::Info);
    assert!(f[0].message.contains("curl localhost:8090/prestop"));
}

#[test]
fn r16_hook_quits_nginx_and_returns() {
    let f = lint(&pod("  containers:\n    - name: nginx\n      image: nginx:1.27\n      lifecycle:\n        preStop:\n          exec:\n            command: [nginx, -s, quit]\n"));
    // The stop signal SIGQUIT comes from the image (an info, as explain gives it).
    assert_eq!(
        ids(&f),
        vec![
            ("stop-signal-from-image", 8),
            ("prestop-signals-without-wait", 10)
        ]
    );
    // Below, the findings besides that info.
    let lint = |y: &str| -> Vec<LintFinding> {
        lint(y)
            .into_iter()
            .filter(|f| f.rule != "stop-signal-from-image")
            .collect()
    };
    let f = lint(&pod("  containers:\n    - name: nginx\n      image: nginx:1.27\n      lifecycle:\n        preStop:\n          exec:\n            command: [nginx, -s, quit]\n"));
    // The official image's stop signal is SIGQUIT, so nginx-stop-signal stays quiet, and the
    // kubelet's SIGQUIT repeats the graceful quit: what the hook gets wrong is that it gives no
    // delay before the endpoint removal, not a fast shutdown.
    assert!(
        f[0].message.contains(
            "sends SIGQUIT, the same signal the kubelet sends as the stop signal right after the hook returns (t≈0), so the hook delays nothing"
        ),
        "{}",
        f[0].message
    );
    assert!(!f[0].message.contains("fast shutdown"), "{}", f[0].message);
    // With a readiness probe the container serves traffic: endpoint-race reports the race
    // (the hook gets no benefit of the doubt), once.
    let f = lint(&pod("  containers:\n    - name: nginx\n      image: nginx:1.27\n      readinessProbe:\n        httpGet:\n          path: /\n          port: 80\n      lifecycle:\n        preStop:\n          exec:\n            command: [nginx, -s, quit]\n"));
    assert_eq!(ids(&f), vec![("endpoint-race", 14)]);
    assert!(
        f[0].message.contains("gets SIGQUIT at t=0 with a preStop (`nginx -s quit`) that signals the app and returns at once"),
        "{}",
        f[0].message
    );
    let ok = lint(&pod("  containers:\n    - name: nginx\n      image: nginx:1.27\n      lifecycle:\n        preStop:\n          exec:\n            command: [sh, -c, \"nginx -s quit; while pgrep -x nginx; do sleep 1; done\"]\n"));
    assert!(ids(&ok).is_empty(), "{ok:#?}");
    // A custom nginx image with the default SIGTERM and no hook.
    let f = lint(&pod(
        "  containers:\n    - name: nginx\n      image: registry.example.com/team/nginx:1.2\n",
    ));
    assert_eq!(ids(&f), vec![("nginx-stop-signal", 8)]);
}

#[test]
fn r17_state_export_hook_does_not_run_on_oom() {
    let f = lint(&pod("  containers:\n    - name: app\n      image: app\n      resources:\n        limits:\n          memory: 256Mi\n      lifecycle:\n        preStop:\n          exec:\n            command: [/upload-state.sh]\n"));
    assert_eq!(ids(&f), vec![("prestop-not-run-on-crash", 13)]);
    assert_eq!(f[0].severity, Severity::Info);
}

#[test]
fn r19_kubelet_eviction_max_pod_grace_period() {
    let y = pod(
        "  terminationGracePeriodSeconds: 120\n  containers:\n    - name: app\n      image: app\n",
    );
    for max in [-1, 0] {
        let mut opts = LintOptions::default();
        opts.config.kubelet.eviction_max_pod_grace_period = Some(max);
        let f = lint_with(&y, &opts);
        assert_eq!(ids(&f), vec![("soft-eviction-is-immediate", 6)]);
        assert!(f[0]
            .message
            .contains(&format!("evictionMaxPodGracePeriod is {max}")));
        assert!(f[0].message.contains("raises to 1 s"));
        assert!(f[0].message.contains("pod's 120 s"));
    }
    let mut opts = LintOptions::default();
    opts.config.kubelet.eviction_max_pod_grace_period = Some(120);
    assert!(ids(&lint_with(&y, &opts)).is_empty());
}

#[test]
fn r22_istio_proxy_as_regular_container() {
    let f = lint(&pod("  containers:\n    - name: app\n      image: app\n    - name: istio-proxy\n      image: docker.io/istio/proxyv2:1.22\n"));
    assert_eq!(ids(&f), vec![("sidecar-as-regular-container", 9)]);
    assert!(f[0].message.contains("5 s by default"));
    assert!(f[0].message.contains("until t=30"));
    let drain = lint(&pod("  containers:\n    - name: app\n      image: app\n    - name: istio-proxy\n      image: docker.io/istio/proxyv2:1.22\n      env:\n        - name: TERMINATION_DRAIN_DURATION_SECONDS\n          value: \"45\"\n"));
    assert!(one(&drain, "sidecar-as-regular-container")
        .message
        .contains("drain of 45 s"));
}

/// R22 with its numbers: 20 s requests, istio's drain of 5 s set per pod in
/// `proxy.istio.io/config`, TGPS 30. The drain ends at t=5 and cuts the requests in flight; the
/// fix is a drain ≥ the longest request and < TGPS (25 s), or a native sidecar.
#[test]
fn r22_a_drain_shorter_than_the_longest_request() {
    let spec = |drain: &str| {
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: case}}\nspec:\n  selector: {{matchLabels: {{app: case}}}}\n  template:\n    metadata:\n      labels: {{app: case}}\n      annotations:\n        proxy.istio.io/config: |\n          terminationDrainDuration: {drain}\n    spec:\n      terminationGracePeriodSeconds: 30\n      containers:\n        - name: app\n          image: app\n        - name: istio-proxy\n          image: docker.io/istio/proxyv2:1.22\n")
    };
    let mut opts = LintOptions::default();
    opts.config.longest_request_seconds = Some(20);
    let f = lint_with(&spec("5s"), &opts);
    let m = &one(&f, "sidecar-as-regular-container").message;
    assert!(
        m.contains("stops after its 5 s drain (terminationDrainDuration in proxy.istio.io/config); that drain is shorter than the longest request (20 s, longestRequestSeconds): requests still in flight through the proxy at t=5 fail, and so do the app's calls out through it from then on; set the drain to at least 20 s and below terminationGracePeriodSeconds (30 s)"),
        "{m}"
    );
    // The fix's drain of 25 s: no cut; still a regular container (the finding stays, without
    // the request note). A Go duration with minutes reads the same.
    for fixed in ["25s", "0m25s"] {
        let f = lint_with(&spec(fixed), &opts);
        let m = &one(&f, "sidecar-as-regular-container").message;
        assert!(m.contains("stops after its 25 s drain"), "{m}");
        assert!(!m.contains("longest request"), "{m}");
    }
    // A drain at or past the grace period: SIGKILLed mid-drain.
    let f = lint_with(&spec("30s"), &opts);
    assert!(one(&f, "sidecar-as-regular-container")
        .message
        .contains("its drain of 30 s (terminationDrainDuration in proxy.istio.io/config) would end at t=30, not before its SIGKILL at t=30"));
    // Without longestRequestSeconds, lint cannot know the requests' length and says nothing of it.
    let f = lint(&spec("5s"));
    assert!(!one(&f, "sidecar-as-regular-container")
        .message
        .contains("longest request"));
    // istio's default drain (5 s) counts too when the pod sets none.
    let plain = pod("  containers:\n    - name: app\n      image: app\n    - name: istio-proxy\n      image: docker.io/istio/proxyv2:1.22\n");
    let f = lint_with(&plain, &opts);
    assert!(one(&f, "sidecar-as-regular-container")
        .message
        .contains("5 s by default); that drain is shorter than the longest request (20 s"));
}

#[test]
fn r25_cloud_lb_lag_longer_than_prestop() {
    let spec = |sleep: i64, tgps: i64| {
        pod(&format!("  terminationGracePeriodSeconds: {tgps}\n  containers:\n    - name: app\n      image: app\n      readinessProbe:\n        httpGet:\n          path: /ready\n          port: 8080\n      lifecycle:\n        preStop:\n          sleep:\n            seconds: {sleep}\n"))
    };
    let mut opts = LintOptions::default();
    opts.config.endpoint_lag_seconds = 120.0;
    let f = lint_with(&spec(15, 30), &opts);
    assert_eq!(ids(&f), vec![("endpoint-race", 15)]);
    assert!(
        f[0].message.contains("at t=15 with a preStop of only 15 s"),
        "{}",
        f[0].message
    );
    assert!(f[0].message.contains("about 120 s"));
    // The variant: preStop 130 > L, TGPS 160 = 130 + drain 20 + margin.
    assert!(ids(&lint_with(&spec(130, 160), &opts)).is_empty());
    // With the default L of 1 s, the 15 s delay is enough.
    assert!(ids(&lint(&spec(15, 30))).is_empty());
}
