//! The drill with per-pod endpoint lags (`--endpoint-lag 0.5s..5s --seed N`): a fixed preStop
//! sleep loses requests on the pods whose lag is longer and wastes time on the others, while
//! `podgrace prestop-wait`, run by the kubelet as the exec preStop hook inside each pod (counting
//! the new connections of the pod's own network namespace), loses none and ends each pod's
//! termination a quiet moment after its own lag. Real pods, the kernel's DNAT and conntrack,
//! real load (a new connection per request: prestop-wait watches new connections). Needs root.

mod common;

use common::*;
use podgrace_drill::endpoints::LagRange;
use std::time::Duration;

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const QUIET: f64 = 1.0;
const SLEEP: u32 = 3;
const MIN: Duration = Duration::from_millis(500);
const MAX: Duration = Duration::from_secs(5);

/// The demo app as a Deployment of 3, serving on 8080 and answering the readiness probe on 8081
/// (the kubelet keeps probing while a pod terminates; prestop-wait counts 8080 only), with
/// `lifecycle` as its preStop.
fn web(pre_stop: &str) -> String {
    let exe = env!("CARGO_BIN_EXE_podgrace");
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: 3\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      terminationGracePeriodSeconds: 40\n      containers:\n      - name: app\n        image: demo\n        command: [\"{exe}\", demo-app, --listen, \"0.0.0.0:8080\", --probe-listen, \"0.0.0.0:8081\", --on-sigterm, drain, --drain-seconds, \"20\"]\n        ports: [{{containerPort: 8080}}]\n        readinessProbe:\n          httpGet: {{path: /ready, port: 8081}}\n          periodSeconds: 1\n        lifecycle:\n          preStop:\n{pre_stop}"
    )
}

/// The first seed whose lags for the three pods a rollout deletes (web-1 to web-3) include one
/// at least 0.5 s longer and one at least 0.5 s shorter than the fixed sleep, so that both of
/// its failures show.
fn seed() -> u64 {
    (1..1000)
        .find(|&seed| {
            let r = LagRange {
                min: MIN,
                max: MAX,
                seed,
            };
            let lags: Vec<f64> = (1..=3)
                .map(|i| r.lag_of(&format!("web-{i}")).as_secs_f64())
                .collect();
            lags.iter().any(|l| *l > f64::from(SLEEP) + 0.5)
                && lags.iter().any(|l| *l < f64::from(SLEEP) - 0.5)
        })
        .expect("a seed")
}

fn run(pre_stop: &str, seed: u64) -> (serde_json::Value, String) {
    let (_, r, log) = drill_logged(
        "lag",
        &web(pre_stop),
        &[
            "--endpoint-lag",
            "0.5s..5s",
            "--seed",
            &seed.to_string(),
            "--client",
            "new-connection",
            "--duration",
            "14s",
        ],
    );
    assert_eq!(r["endpointLagModel"], "per-pod", "{r}");
    assert_eq!(
        r["endpointLagRange"],
        serde_json::json!({"minSeconds": 0.5, "maxSeconds": 5.0, "seed": seed})
    );
    (r, log)
}

fn f(v: &serde_json::Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// Each pod's reported lag is the one `--seed` draws for it, and the proxy stopped routing to it
/// then (within 0.2 s: the status watch, the rules' programming).
fn check_lags(terminations: &[serde_json::Value], seed: u64, log: &str) {
    let r = LagRange {
        min: MIN,
        max: MAX,
        seed,
    };
    assert_eq!(terminations.len(), 3, "{log}");
    for t in terminations {
        let pod = t["pod"].as_str().unwrap();
        let lag = f(t, "endpointLagSeconds");
        assert!((lag - r.lag_of(pod).as_secs_f64()).abs() < 1e-9, "{t}");
        let removed = f(t, "endpointRemovedSeconds");
        assert!(
            (lag..=lag + 0.2).contains(&removed),
            "{pod}: removed {removed} s, lag {lag} s\n{log}"
        );
    }
}

#[test]
fn prestop_wait_loses_nothing_and_ends_each_pod_a_quiet_moment_after_its_own_lag() {
    if !privileged("prestop-wait-lag") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let seed = seed();
    let exe = env!("CARGO_BIN_EXE_podgrace");
    let (r, log) = run(
        &format!("            exec:\n              command: [\"{exe}\", prestop-wait, --quiet, 1s, --max, 10s, --port, \"8080\"]\n"),
        seed,
    );
    assert_eq!(r["failed"], 0, "{r}\n{log}");
    assert_eq!(r["verdict"], "pass");
    let terminations = r["terminations"].as_array().unwrap();
    check_lags(terminations, seed, &log);
    for t in terminations {
        let (pod, lag) = (t["pod"].as_str().unwrap(), f(t, "endpointLagSeconds"));
        // The hook returned a quiet moment after the last new connection, which came just before
        // the proxy stopped sending them at the lag: never before lag + quiet (less the 0.1 s
        // sampling), and within quiet + 0.3 s of the lag (the bound: sampling, the
        // stop signal, the app's exit).
        let beyond = f(t, "endMinusLagSeconds");
        eprintln!("prestop-wait: {pod}: lag {lag:.2} s, ended {beyond:+.3} s past it");
        assert!(
            (QUIET - 0.1..=QUIET + 0.3).contains(&beyond),
            "{pod}: ended {beyond:.3} s after its lag {lag:.2} s\n{t}\n{log}"
        );
        assert_eq!(t["failed"], 0);
    }
}

#[test]
fn a_fixed_sleep_loses_requests_on_the_slower_pods_and_wastes_time_on_the_faster() {
    if !privileged("sleep-lag") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let seed = seed();
    let (r, log) = run(&format!("            sleep: {{seconds: {SLEEP}}}\n"), seed);
    let terminations = r["terminations"].as_array().unwrap();
    check_lags(terminations, seed, &log);
    let sleep = f64::from(SLEEP);
    let mut lost = 0;
    for t in terminations {
        let (pod, lag) = (t["pod"].as_str().unwrap(), f(t, "endpointLagSeconds"));
        let stop = f(t, "stopSignalSeconds");
        assert!(
            (sleep..sleep + 0.2).contains(&stop),
            "{pod}: the stop signal {stop} s after the deletion, not the sleep's {sleep} s\n{log}"
        );
        let failed = t["failed"].as_u64().unwrap();
        eprintln!(
            "sleep {sleep} s: {pod}: lag {lag:.2} s, ended {:+.3} s past it, lost {failed}",
            f(t, "endMinusLagSeconds")
        );
        if lag > sleep + 0.5 {
            // Too short: its listener closed while the proxy still sent it new connections
            // for lag - sleep (100 connections/s to each of the pods).
            assert!(failed > 0, "{pod}: lag {lag:.2} s, none lost\n{t}\n{log}");
            lost += failed;
        } else if lag < sleep - 0.5 {
            // Too long: nothing lost, but the termination went on sleep - lag past the lag.
            assert_eq!(failed, 0, "{pod}\n{t}\n{log}");
            let beyond = f(t, "endMinusLagSeconds");
            assert!(
                beyond >= sleep - lag - 0.05,
                "{pod}: ended {beyond:.2} s after its lag {lag:.2} s\n{t}\n{log}"
            );
        }
    }
    assert_eq!(
        r["failed"], lost,
        "every failure on a pod whose lag outlasted the sleep\n{log}"
    );
    assert_eq!(r["verdict"], "fail");
}
