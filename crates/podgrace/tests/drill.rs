//! `podgrace drill` as a user runs it: real pods (the local kubelet), a real proxy, real load.
//! Needs root (each pod gets its own network namespace); elsewhere the tests print why they
//! skip. The tests run one at a time: failure counts depend on timing, and two drills at once
//! on a 2-core machine would disturb each other.

mod common;

use common::*;

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The demo app as a Deployment: exits at once on SIGTERM (unfixed), or drains after a preStop
/// sleep (fixed).
fn demo(pre_stop: Option<u32>) -> String {
    let exe = env!("CARGO_BIN_EXE_podgrace");
    let (mode, lifecycle) = match pre_stop {
        None => ("exit", String::new()),
        Some(s) => (
            "drain",
            format!(
                "        lifecycle:\n          preStop:\n            sleep: {{seconds: {s}}}\n"
            ),
        ),
    };
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: app\n        image: demo\n        command: [\"{exe}\", demo-app, --listen, \"0.0.0.0:8080\", --on-sigterm, {mode}]\n        ports: [{{containerPort: 8080}}]\n        readinessProbe:\n          httpGet: {{path: /ready, port: 8080}}\n          periodSeconds: 1\n{lifecycle}"
    )
}

#[test]
fn without_pre_stop_an_ingress_loses_rate_times_lag_times_share() {
    if !privileged("model") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // Model: one of two pods is deleted and exits at once on SIGTERM; behind a per-request (L7)
    // proxy, half of the requests still go to it until the proxy drops it, L = 1 s later:
    // 200 requests/s × 1 s × 1/2 = 100 failures. The band is wide (50 to 150): the lag, the
    // exit and the endpoint update are real and a little late or early.
    let (code, r, log) = drill_logged(
        "model",
        &demo(None),
        &[
            "--scenario",
            "delete",
            "--proxy",
            "ingress",
            "--duration",
            "4s",
            "--endpoint-lag",
            "1s",
        ],
    );
    assert_eq!(code, Some(1), "a failing drill exits 1");
    assert_eq!(r["verdict"], "fail");
    let failed = r["failed"].as_u64().unwrap();
    assert!(
        (50..=150).contains(&failed),
        "failed {failed}, model 100: {r}\n{log}"
    );
    // They happened after the stop signal (the app had closed its listener), not before.
    assert_eq!(
        r["failuresByPhase"]["afterStopSignal"].as_u64().unwrap(),
        failed,
        "{r}\n{log}"
    );
    // All on the deleted pod.
    assert_eq!(
        r["failuresByPod"],
        serde_json::json!([{"pod": "web-1", "failed": failed, "failuresByPhase": {"beforeStopSignal": 0, "afterStopSignal": failed, "afterKill": 0}}]),
        "{log}"
    );
    assert_eq!(r["requests"], 800);
    // The settings it ran with.
    assert_eq!(
        (
            &r["scenario"],
            &r["proxy"],
            &r["protocol"],
            &r["durationSeconds"],
            &r["replicas"]
        ),
        (
            &serde_json::json!("delete"),
            &serde_json::json!("ingress"),
            &serde_json::json!("http1"),
            &serde_json::json!(4.0),
            &serde_json::json!(2)
        )
    );
}

#[test]
fn with_a_pre_stop_longer_than_the_lag_nothing_is_lost_ten_times_in_a_row() {
    if !privileged("fixed") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for run in 1..=10 {
        let (code, r, log) = drill_logged(
            "fixed",
            &demo(Some(2)),
            &[
                "--scenario",
                "delete",
                "--duration",
                "4s",
                "--endpoint-lag",
                "1s",
            ],
        );
        assert_eq!(r["failed"], 0, "run {run}: {r}\nthe drill's log:\n{log}");
        assert_eq!(code, Some(0));
        assert_eq!(r["verdict"], "pass");
    }
}

/// The drill's kube-proxy rules in `nat` (its NodePort's DNAT, the SNAT of its replies) are
/// gone when it ends: a SNAT rule left behind for a port would catch the replies of a later
/// drill given that port, whose every connection then times out (the CI failure of the
/// ten-in-a-row test, root-caused to SNAT rules that were never removed).
#[test]
fn a_drill_through_the_kernel_leaves_no_rule_behind() {
    if !privileged("rules") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let file = tmp_file("rules", "web.yaml", &demo(Some(2)));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(["drill", file.to_str().unwrap(), "-o", "json"])
        .args(["--scenario", "delete", "--duration", "2s"])
        .current_dir(repo())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run podgrace");
    let comment = format!("podgrace-drill-{}", child.id());
    let out = child.wait_with_output().expect("the drill ends");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    if r["proxyImplementation"] != "netfilter" {
        eprintln!("SKIP rules: kube-proxy mode without netfilter here");
        return;
    }
    assert_eq!(r["failed"], 0, "{r}");
    let saved = std::process::Command::new("iptables-save")
        .args(["-t", "nat"])
        .output()
        .expect("iptables-save");
    let left: Vec<String> = String::from_utf8_lossy(&saved.stdout)
        .lines()
        .filter(|l| l.contains(&comment))
        .map(String::from)
        .collect();
    assert!(left.is_empty(), "rules left behind: {left:#?}");
}

#[test]
fn the_html_report_charts_every_failure_in_red() {
    if !privileged("html") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmpdir = tempdir("drillhtml");
    let page = tmpdir.path().join("report.html");
    let (_, r) = drill(
        "html",
        &demo(None),
        &[
            "--scenario",
            "delete",
            "--proxy",
            "ingress",
            "--duration",
            "3s",
            "--report",
            page.to_str().unwrap(),
        ],
    );
    let html = std::fs::read_to_string(&page).expect("the report was written");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        !html.contains("<script src") && !html.contains("href=\"http"),
        "self-contained"
    );
    // Red bars add up to the failures; every termination event is marked.
    let red: u64 = html
        .split("<rect class=\"fail\"")
        .skip(1)
        .filter_map(|rest| {
            let i = rest.find("data-count=\"")? + "data-count=\"".len();
            rest[i..].split('"').next()?.parse::<u64>().ok()
        })
        .sum();
    assert_eq!(red, r["failed"].as_u64().unwrap());
    assert!(red > 0);
    assert!(html.contains("web-1: stop signal"));
    assert!(html.contains("web-1: endpoint removed"));
}

#[test]
fn r25_a_pre_stop_shorter_than_the_load_balancer_lag_still_loses_requests() {
    if !privileged("r25") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // R25 scaled down: a load balancer that keeps routing L = 3 s after the pod's termination
    // starts, a preStop of 1 s, an app that drains: requests fail from the app's exit (about
    // t = 1 s plus the drain) until t = L, and the advice names the setting.
    let (code, r) = drill(
        "r25",
        &demo(Some(1)),
        &[
            "--scenario",
            "delete",
            "--proxy",
            "ingress",
            "--duration",
            "6s",
            "--endpoint-lag",
            "3s",
        ],
    );
    assert_eq!(code, Some(1));
    assert!(r["failed"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn bad_drill_values_are_refused_before_anything_starts() {
    for args in [
        vec!["drill", "--replicas", "0"],
        vec!["drill", "--replicas", "100000"],
        vec!["drill", "--timeout", "0"],
        vec!["drill", "--port", "0"],
        vec!["drill", "--rps", "0"],
        vec!["drill", "--duration", "3s", "--disrupt-after", "5s"],
        vec!["drill", "--method", "BAD METHOD"],
        vec!["drill", "--path", "nopath"],
        vec!["drill", "--rps", "-1"],
        vec!["drill", "--rps", "NaN"],
        vec!["drill", "--connections", "0"],
        vec!["drill", "--stream-seconds", "0", "--streams", "1"],
        vec!["drill", "--stream-seconds", "inf", "--streams", "1"],
        vec!["drill", "--streams", "100000"],
        vec!["drill", "--protocol", "h2c", "--proxy", "ingress"],
        vec!["drill", "--protocol", "h3"],
        vec!["drill", "--path", "/a b"],
        vec!["drill", "--endpoint-lag", "99999999d"],
        vec!["drill", "--endpoint-lag", "5s..1s"],
        vec!["drill", "--endpoint-lag", "1s..99999999d"],
        vec!["drill", "--endpoint-lag", "1s..soon"],
        vec!["drill", "--seed", "-1"],
        vec!["drill", "--pod-network", "127.0.0.0/24"],
        vec!["drill", "--duration", "1000h"],
    ] {
        let out = podgrace(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    // A pod with nothing that says where it serves.
    let file = tmp_file(
        "noport",
        "web.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: app, image: x, command: [sleep, \"60\"]}\n",
    );
    let out = podgrace(&["drill", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr(&out).contains("created"), "nothing started");
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: {}:6:5: spec.containers[0]: no TCP containerPort and no readiness probe port to send load to; give --port",
            file.display()
        )
    );
    // A Deployment: the path runs through the pod template; a UDP port is named.
    let file = tmp_file(
        "noport-deploy",
        "web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: app\n        image: x\n        command: [sleep, \"60\"]\n        ports: [{containerPort: 53, protocol: UDP}]\n",
    );
    let out = podgrace(&["drill", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: {}:13:9: spec.template.spec.containers[0].ports: no TCP containerPort and no readiness probe port to send load to; give --port",
            file.display()
        )
    );
}

#[test]
fn a_container_without_command_is_refused_before_anything_starts() {
    let file = tmp_file(
        "nocmd",
        "web.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: app, image: nginx, ports: [{containerPort: 80}]}\n",
    );
    let out = podgrace(&["drill", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {}:6:5: spec.containers[0]: container \"app\" has no command: podgrace runs local processes and cannot read the image's ENTRYPOINT; set command (and args)",
            file.display()
        )
    );
    assert!(!err.contains("created"), "nothing started: {err}");
    // In a Deployment, an empty command is placed at the field, under the pod template.
    let file = tmp_file(
        "nocmd-deploy",
        "web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: app\n        image: nginx\n        command: []\n        ports: [{containerPort: 80}]\n",
    );
    let out = podgrace(&["drill", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "error: {}:12:9: spec.template.spec.containers[0].command: container \"app\" has no command: podgrace runs local processes and cannot read the image's ENTRYPOINT; set command (and args)",
            file.display()
        )
    );
}

/// Issue 9 item 10: a pod whose container cannot start (its command is not there) is reported
/// with the runtime's reason as soon as the kubelet's `Failed` event says so, not as "did not
/// become ready" once the 30 s readiness window is over.
#[test]
fn a_pod_that_cannot_start_is_reported_at_once_with_the_reason() {
    if !privileged("nostart") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let file = tmp_file(
        "nostart",
        "web.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    image: demo\n    command: [/nonexistent/server]\n    ports: [{containerPort: 8080}]\n",
    );
    let started = std::time::Instant::now();
    let out = podgrace(&["drill", file.to_str().unwrap(), "--duration", "2s"]);
    let took = started.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "error: pod web-1: container app could not start: Error: start container ctr-"
        ) && err.contains("spawning [\"/nonexistent/server\"]: No such file or directory"),
        "{err}"
    );
    assert!(!err.contains("did not become ready"), "{err}");
    // It did not wait out the readiness window (30 s).
    assert!(took < std::time::Duration::from_secs(30), "{took:?}: {err}");
}

/// Flags that a drill will not read are named on stderr (here before a refusal, so that
/// nothing runs).
#[test]
fn flags_without_effect_are_named() {
    let file = tmp_file(
        "unused",
        "web.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: app, image: nginx, ports: [{containerPort: 80}]}\n",
    );
    let f = file.to_str().unwrap();
    let out = podgrace(&[
        "drill",
        f,
        "--rps",
        "0",
        "--idle-streams",
        "1",
        "--path",
        "/x",
        "--connections",
        "4",
        "--stream-seconds",
        "5",
        "--seed",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("drill: --seed has no effect: it draws the per-pod lags of --endpoint-lag MIN..MAX, and the lag is not a range"),
        "{err}"
    );
    assert!(
        err.contains(
            "drill: --connections, --path have no effect: --rps 0 sends no requests, only streams"
        ),
        "{err}"
    );
    assert!(
        err.contains("drill: --stream-seconds has no effect: it is the length of the data streams of --streams, and there are none"),
        "{err}"
    );
    // Flags that are used, or left at their defaults, are not named.
    let out = podgrace(&[
        "drill",
        f,
        "--path",
        "/x",
        "--streams",
        "1",
        "--stream-seconds",
        "5",
    ]);
    assert!(!stderr(&out).contains("no effect"), "{}", stderr(&out));
}

/// Without a containerPort the load goes to the readiness probe's port, where the app serves.
#[test]
fn the_port_comes_from_the_readiness_probe_when_none_is_declared() {
    if !privileged("probe-port") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let exe = env!("CARGO_BIN_EXE_podgrace");
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  containers:\n  - name: app\n    image: demo\n    command: [\"{exe}\", demo-app, --listen, \"0.0.0.0:9090\", --on-sigterm, drain]\n    readinessProbe:\n      httpGet: {{path: /ready, port: 9090}}\n      periodSeconds: 1\n    lifecycle:\n      preStop:\n        sleep: {{seconds: 2}}\n"
    );
    let (code, r) = drill(
        "probe-port",
        &yaml,
        &["--scenario", "delete", "--rps", "50", "--duration", "3s"],
    );
    assert_eq!(r["requests"], 150, "{r}");
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(code, Some(0));
}

/// A rollout whose new pods are Ready at once deletes both old pods within a probe period,
/// before either replacement's endpoint has reached the proxy (L = 3 s): for the rest of the
/// lag no live pod is routable and nearly every request fails. `minReadySeconds: 3` (≥ L)
/// makes the rollout wait until each replacement is routable: only the usual race is left.
#[test]
fn a_rollout_faster_than_the_lag_strands_the_traffic_until_min_ready_seconds() {
    if !privileged("min-ready") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let exe = env!("CARGO_BIN_EXE_podgrace");
    let yaml = |min_ready: u32| {
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: 2\n  minReadySeconds: {min_ready}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: app\n        image: demo\n        command: [\"{exe}\", demo-app, --listen, \"0.0.0.0:8080\", --on-sigterm, exit]\n        ports: [{{containerPort: 8080}}]\n        readinessProbe:\n          exec: {{command: [\"true\"]}}\n          periodSeconds: 1\n")
    };
    // One connection per request: with kube-proxy on the kernel's DNAT a request to a gone pod
    // is a connect that waits out its timeout, and a pool of 16 keep-alive connections would
    // stall behind them (the recorded kube-proxy run: requests queued behind a connect timeout
    // waited up to 0.9 s) instead of failing them; an open-loop client shows the stranded
    // traffic itself, as the HTTP proxy's immediate 502s did before the proxy was L4.
    let (code, r, log) = drill_logged(
        "min-ready-0",
        &yaml(0),
        &[
            "--duration",
            "6s",
            "--endpoint-lag",
            "3s",
            "--client",
            "new-connection",
        ],
    );
    assert_eq!(code, Some(1));
    let advice: Vec<&str> = r["advice"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let stranded = advice
        .iter()
        .find(|a| a.contains("while no live pod was routable"))
        .unwrap_or_else(|| panic!("no stranded-traffic advice: {advice:?}\n{log}"));
    assert!(
        stranded.contains("set the Deployment's minReadySeconds to at least 3 s (it is 0)"),
        "{stranded}"
    );
    // Model: the second old pod goes a probe period (≤ 1 s) after the first, both before any
    // replacement is routable; the rest of the 3 s lag, 2 to 3 s at 200 requests/s, strands
    // 400 to 600 requests.
    let n: u64 = stranded.split_whitespace().next().unwrap().parse().unwrap();
    assert!((250..=650).contains(&n), "{n} stranded: {r}");

    let (_, r, log) = drill_logged(
        "min-ready-3",
        &yaml(3),
        &["--duration", "12s", "--endpoint-lag", "3s"],
    );
    let advice = r["advice"].to_string();
    assert!(!advice.contains("no live pod"), "{advice}\n{log}");
    // What is left is the race on each deleted pod's pinned connections (kube-proxy).
    assert!(r["failed"].as_u64().unwrap() <= 50, "{r}");
}

/// `--scenario delete` takes kubectl's delete flags (the deleted pod gets --grace-period's
/// grace); a rollout does not (its deletes come from the ReplicaSet controller).
#[test]
fn the_delete_scenario_takes_the_grace_period_flags() {
    let file = tmp_file("drillflags", "web.yaml", &demo(None));
    let o = podgrace(&["drill", file.to_str().unwrap(), "--grace-period", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("a rollout's deletes come from the ReplicaSet controller"),
        "{}",
        stderr(&o)
    );
    if !privileged("drill grace flags") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (_, r) = drill(
        "drillflags",
        &demo(None),
        &[
            "--scenario",
            "delete",
            "--grace-period",
            "3",
            "--duration",
            "3s",
        ],
    );
    let graces: Vec<i64> = r["pods"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["containers"][0]["terminations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|t| t["reason"] == "Deleted")
        .filter_map(|t| t["gracePeriodSeconds"].as_i64())
        .collect();
    // The deleted replica got 3 s; the one removed at the end gets the drill's quick 1 s.
    assert!(graces.contains(&3), "{graces:?}: {r}");
}

/// A SIGTERM to `podgrace drill` exits 143 (128 + 15), a SIGINT 130, as a shell reports a
/// process ended by that signal; the drill's pods go with it.
#[test]
fn a_signal_to_drill_exits_128_plus_its_number() {
    if !privileged("drill signals") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let file = tmp_file("drillsig", "web.yaml", &demo(None));
    for (signal, code) in [
        (rustix::process::Signal::TERM, 143),
        (rustix::process::Signal::INT, 130),
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_podgrace"))
            .args([
                "drill",
                file.to_str().unwrap(),
                "-o",
                "json",
                "--duration",
                "20s",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = rustix::process::Pid::from_child(&child);
        // The signal goes once the drill reports its first step (its pods are starting), not
        // after a fixed sleep that a loaded machine outruns.
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            let n = std::io::BufRead::read_line(&mut err, &mut line).unwrap();
            assert!(
                n > 0,
                "{signal:?}: the drill ended before its first step: {seen}"
            );
            seen.push_str(&line);
            if line.starts_with("drill: ") && line.contains("s  ") {
                break;
            }
        }
        rustix::process::kill_process(pid, signal).unwrap();
        std::io::Read::read_to_string(&mut err, &mut seen).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{signal:?}: {seen}");
        assert!(seen.contains("interrupted"), "{seen}");
    }
}

/// A signal while the drill still sets up (here: containerd's socket accepts and never answers)
/// ends podgrace with 128 + the signal and a word, not with the signal's default death.
#[test]
fn a_signal_while_the_drill_connects_to_containerd_exits_128_plus_its_number() {
    let tmpdir = tempdir("drillsig-setup");
    let socket = tmpdir.path().join("containerd.sock");
    let _ = std::fs::remove_file(&socket);
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(["drill", "--runtime"])
        .arg(format!("containerd:{}", socket.display()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The drill has connected: it is past its argument checks and waits on containerd.
    let (_conn, _) = listener.accept().unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(
        err.contains("interrupted before the drill started"),
        "{err}"
    );
}

/// The examples that serve traffic drill as they are (issue 9 item 12); web.yaml, whose preStop
/// covers the endpoint lag and whose app drains, passes: the README's example drill.
#[test]
fn the_serving_examples_drill() {
    if !privileged("example drills") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for (example, pass) in [
        ("examples/web.yaml", true),
        ("examples/sidecar.yaml", false),
    ] {
        let out = podgrace(&["drill", example, "-o", "json", "--duration", "12s"]);
        let code = out.status.code();
        assert!(
            code == Some(0) || code == Some(1),
            "{example}: {}",
            stderr(&out)
        );
        let r = json(&out);
        if pass {
            assert_eq!(r["verdict"], "pass", "{example}: {r}");
        }
        assert!(r["requests"].as_u64().unwrap() > 1000, "{example}: {r}");
    }
}
