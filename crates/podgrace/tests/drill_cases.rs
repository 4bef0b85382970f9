//! The field cases of `shared/cases/README.md` that a drill can express, with their numbers:
//! R22 (a sidecar's 5 s drain window under 20 s requests), R26 (gRPC-style streams cut by an app
//! that force-stops 1 s after SIGTERM with 120 s of grace) and R27 (a graceful stop without a
//! deadline that an idle stream keeps waiting until SIGKILL). Real pods, real streams over h2c,
//! through kube-proxy mode's L4 path (the kernel's DNAT and conntrack, as kube-proxy programs
//! it), which picks a pod per connection at random as kube-proxy's `-m statistic` rules do: the
//! stream tests hold 16 streams, so that the deleted pod holds some (all 16 miss it once in
//! 65,536 runs), and assert what happened to as many as it held. Needs root (pod network
//! namespaces); elsewhere the tests print why they skip. One drill at a time: they are timed,
//! and the machine has two cores.

mod common;

use common::*;
use serde_json::Value;

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A two-replica Deployment `web` with the given TGPS and containers (YAML list items, indented
/// for `containers:`).
fn deployment(tgps: u32, containers: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      terminationGracePeriodSeconds: {tgps}\n      containers:\n{containers}"
    )
}

/// The demo app as a container serving on `listen` with `flags`, and (with `port`) a declared
/// containerPort and readiness probe.
fn container(name: &str, listen: &str, flags: &str, port: Option<u16>) -> String {
    let exe = env!("CARGO_BIN_EXE_podgrace");
    let served = match port {
        Some(p) => format!(
            "        ports: [{{containerPort: {p}}}]\n        readinessProbe:\n          httpGet: {{path: /ready, port: {p}}}\n          periodSeconds: 1\n"
        ),
        None => String::new(),
    };
    let flags: Vec<String> = flags
        .split_whitespace()
        .map(|f| format!("\"{f}\""))
        .collect();
    format!(
        "      - name: {name}\n        image: demo\n        command: [\"{exe}\", demo-app, --listen, \"{listen}\", {}]\n{served}",
        flags.join(", ")
    )
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The run report of pod `name` in a drill report.
fn pod<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["pods"]
        .as_array()
        .and_then(|pods| pods.iter().find(|p| p["pod"] == format!("default/{name}")))
        .unwrap_or_else(|| panic!("no pod {name} in {}", r["pods"]))
}

/// The last termination of container `c` of pod `p`.
fn termination<'a>(r: &'a Value, p: &str, c: &str) -> &'a Value {
    pod(r, p)["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|x| x["name"] == c))
        .and_then(|x| x["terminations"].as_array())
        .and_then(|t| t.last())
        .unwrap_or_else(|| panic!("no termination of {p}/{c}"))
}

/// R22: requests take 20 s; an istio-style sidecar in front of the app drains for 5 s on SIGTERM
/// and is then stopped, TGPS 30. Every request still in flight on the deleted pod at t = 5 s is
/// cut; with the drain at 25 s (≥ the longest request, < TGPS) none is.
#[test]
fn r22_a_five_second_sidecar_drain_cuts_twenty_second_requests() {
    if !privileged("r22") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let pod_of = |drain: u32| {
        deployment(
            30,
            &(container(
                "istio-proxy",
                "0.0.0.0:8080",
                &format!("--upstream 127.0.0.1:8081 --on-sigterm drain --drain-seconds {drain}"),
                Some(8080),
            ) + &container(
                "app",
                "127.0.0.1:8081",
                "--on-sigterm drain --drain-seconds 25 --latency-ms 20000",
                None,
            )),
        )
    };
    // 2 requests/s for 12 s; web-1 is deleted 10 s in. By then every request sent so far is
    // still running (they take 20 s), about half of them on web-1: 2 × 10 × ½ = 10. Each has a
    // connection of its own (none is idle for 20 s), and kube-proxy's rules pick a pod per
    // connection at random, so web-1's share is Binomial(20, ½): 10 on average, 5 to 15 in 96 % of
    // runs. The test checks that every one it held was cut, and nothing else failed.
    let args = [
        "--scenario",
        "delete",
        "--rps",
        "2",
        "--duration",
        "12s",
        "--disrupt-after",
        "10s",
        "--timeout",
        "30s",
        "--connections",
        "64",
        "--endpoint-lag",
        "1s",
    ];
    let (code, r) = drill("r22-5", &pod_of(5), &args);
    assert_eq!(code, Some(1), "{r}");
    let gave_up = r["findings"]["gaveUp"].as_array().expect("gaveUp");
    let proxy = gave_up
        .iter()
        .find(|g| g["container"] == "istio-proxy")
        .unwrap_or_else(|| panic!("the sidecar gave up: {r}"));
    assert_eq!(proxy["pod"], "web-1");
    assert_eq!(proxy["budgetSeconds"], 30);
    let after = f(&proxy["afterStopSignalSeconds"]);
    assert!(
        (after - 5.0).abs() <= 0.3,
        "sidecar exit {after} s, expected 5 s: {r}"
    );
    let cut = proxy["requestsCut"].as_u64().unwrap();
    assert!(cut >= 1, "web-1 held none of the 20: {r}");
    // Every other failure is the endpoint race of the first second after the stop signal (at
    // 2 requests/s × 1 s lag, at most 3): refused (the sidecar closed its listener at once), reset
    // (a connection the kernel had completed for the sidecar's listener, still in its accept
    // queue when the sidecar closed it: the kernel resets it, as with Envoy, nginx or Go's
    // Shutdown), or a 502 from the sidecar for a request it took as it stopped (its app had closed
    // its listener too). All of them on web-1, none on web-2 or on no pod at all; nothing timed
    // out.
    let failed = r["failed"].as_u64().unwrap();
    assert!(failed >= cut && failed - cut <= 3, "{r}");
    let kind = |k: &str| r["failuresByKind"][k].as_u64().unwrap();
    let closed = kind("eof") + kind("reset");
    assert!(closed >= cut, "the cut ones saw the sidecar's close: {r}");
    assert_eq!(
        kind("connectTimeout") + kind("eofOnReuse") + kind("timeout"),
        0,
        "{r}"
    );
    let by_pod = r["failuresByPod"].as_array().expect("failuresByPod");
    assert!(by_pod.iter().all(|p| p["pod"] == "web-1"), "{r}");
    // The cut requests were all sent before the stop signal (running over 5 s at t = 5), the
    // first about 10 s before it.
    let longest = f(&proxy["longestRunningSeconds"]);
    assert!(longest > 5.0 && longest < 15.5, "{r}");
    let t = termination(&r, "web-1", "istio-proxy");
    assert!((f(&t["exitAfterSeconds"]) - 5.0).abs() <= 0.3, "{t}");
    assert_eq!(t["killAfterSeconds"], Value::Null, "{t}");
    // The app behind it is still at work after t = 5 s (the field case: its outbound calls
    // after t = 5 fail): it ends the work of the requests the sidecar cut (20 s each: the longest
    // one's ends at 25 s − its running time at t = 5, so 10 s at the earliest) and exits before
    // its own 25 s drain deadline. It did not give up: the sidecar did.
    let app = termination(&r, "web-1", "app");
    let app_exit = f(&app["exitAfterSeconds"]);
    assert!(
        app_exit >= 25.0 - longest - 0.3 && app_exit > 9.7 && app_exit < 25.3,
        "app exit {app_exit} s, longest cut request {longest} s: {app}"
    );
    assert_eq!(app["killAfterSeconds"], Value::Null, "{app}");
    assert_eq!(gave_up.len(), 1, "only the sidecar gave up: {r}");
    let advice = r["advice"].to_string();
    assert!(
        advice.contains("container istio-proxy of pod web-1 gave up at 5."),
        "{advice}"
    );

    // The fix: a drain as long as the longest request and below TGPS.
    let (_, r) = drill("r22-25", &pod_of(25), &args);
    // Nothing was cut: no container gave up with work in flight, nothing was killed.
    assert_eq!(r["findings"]["gaveUp"], serde_json::json!([]), "{r}");
    assert_eq!(r["failuresByPhase"]["afterKill"], 0, "{r}");
    // What can still fail is the endpoint race of the first second (the sidecar closed its
    // listener at once): at most 2 requests/s × 1 s, refused, or reset when the kernel had
    // queued the connection for the listener as it closed (see above), or a 502 (its app closed
    // its listener too).
    let failed = r["failed"].as_u64().unwrap();
    assert!(failed <= 3, "{r}");
    let kind = |k: &str| r["failuresByKind"][k].as_u64().unwrap();
    assert_eq!(
        kind("refused") + kind("reset") + kind("http5xx"),
        failed,
        "{r}"
    );
    assert_eq!(r["failuresByPhase"]["beforeStopSignal"], 0, "{r}");
    let t = termination(&r, "web-1", "istio-proxy");
    // It drained every request (the last ones end ~10 s after the stop signal) and was not
    // SIGKILLed.
    assert_eq!(t["killAfterSeconds"], Value::Null, "{t}");
    assert!(f(&t["exitAfterSeconds"]) < 25.0, "{t}");
}

/// R26: server-streaming RPCs of ~60 s, TGPS 120, no preStop; on SIGTERM the server stops
/// gracefully (GOAWAY) but force-stops after 1 s: every stream open on the pod is reset at
/// t ≈ 1 s, "the app gave up at 1 s of a 120 s budget". With a graceful stop that waits for the
/// streams (here 5 s streams), none is lost.
///
/// The streams' connections go through the NodePort, so each lands on a pod at random: the
/// deleted pod holds `k` of the 16 (about 8), and exactly those `k` are reset and re-opened on
/// the other pod. (Before the streams went L4, a user-space h2c proxy put them round robin, two
/// of four on each pod.)
#[test]
fn r26_streams_are_reset_when_the_app_gives_up_after_one_second() {
    if !privileged("r26") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let pod_of = |drain: u32| {
        deployment(
            120,
            &container(
                "app",
                "0.0.0.0:8080",
                &format!("--on-sigterm drain --drain-seconds {drain}"),
                Some(8080),
            ),
        )
    };
    // Sixteen streams over sixteen connections, each pinned to the pod its connection's DNAT
    // picked. The endpoint lag is short so that a stream re-opened after the cut does not race
    // the endpoint removal.
    let args = |seconds: &'static str| {
        [
            "--scenario",
            "delete",
            "--rps",
            "0",
            "--streams",
            "16",
            "--stream-seconds",
            seconds,
            "--duration",
            "4s",
            "--disrupt-after",
            "2s",
            "--endpoint-lag",
            "0.5s",
        ]
    };
    let (code, r) = drill("r26-1", &pod_of(1), &args("60"));
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["verdict"], "fail");
    assert_eq!(r["proxyImplementation"], "netfilter", "{r}");
    let st = &r["streams"];
    // The streams web-1 held: each failed once, reset, after the stop signal, and was opened
    // again (on web-2, where all 16 are still open at the end).
    let k = st["failed"].as_u64().unwrap();
    assert!((1..16).contains(&k), "web-1 held {k} of 16: {r}");
    assert_eq!(st["failuresByKind"]["reset"], k, "{r}");
    assert_eq!(st["failuresByPhase"]["afterStopSignal"], k, "{r}");
    assert_eq!(st["opened"], 16 + k, "{r}");
    assert_eq!(st["unfinished"], 16, "{r}");
    assert_eq!(st["completed"], 0, "{r}");
    assert_eq!(r["requests"], 0);
    let gave_up = &r["findings"]["gaveUp"];
    assert_eq!(gave_up.as_array().map(Vec::len), Some(1), "{r}");
    let g = &gave_up[0];
    assert_eq!(
        (g["pod"].as_str(), g["container"].as_str()),
        (Some("web-1"), Some("app"))
    );
    assert_eq!(g["budgetSeconds"], 120);
    assert_eq!(g["streamsCut"], k);
    assert!((f(&g["afterStopSignalSeconds"]) - 1.0).abs() <= 0.3, "{g}");
    let advice = r["advice"].to_string();
    let cut = if k == 1 {
        "cut 1 stream in flight".to_string()
    } else {
        format!("cut {k} streams in flight")
    };
    assert!(
        advice.contains("of its 120 s budget") && advice.contains(&cut),
        "{advice}"
    );
    let t = termination(&r, "web-1", "app");
    assert!((f(&t["exitAfterSeconds"]) - 1.0).abs() <= 0.3, "{t}");

    // Fixed: the graceful stop waits for the streams (5 s each), and clients move on after
    // GOAWAY.
    let (code, r) = drill("r26-fixed", &pod_of(115), &args("5"));
    assert_eq!(r["streams"]["failed"], 0, "{r}");
    // At least those on web-1 ended cleanly (web-1 ends only after them).
    assert!(r["streams"]["completed"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["findings"]["gaveUp"], serde_json::json!([]), "{r}");
    assert_eq!(code, Some(0), "{r}");
    let t = termination(&r, "web-1", "app");
    assert!(f(&t["exitAfterSeconds"]) <= 5.5, "{t}");
}

/// R27: idle streams held open on the pods (as Envoy holds ext_proc streams), TGPS 30; on
/// SIGTERM the server calls GracefulStop() without a deadline, which never returns: SIGKILL at
/// t = 30, exit 137. Nothing fails, but the pod "reached SIGKILL while idle". Sixteen idle
/// streams through the NodePort, so that the deleted pod holds `k` of them (about 8; before the
/// streams went L4, two were put round robin, one on each pod).
#[test]
fn r27_an_idle_stream_keeps_graceful_stop_waiting_until_sigkill() {
    if !privileged("r27") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let yaml = deployment(
        30,
        &container(
            "app",
            "0.0.0.0:8080",
            "--on-sigterm drain --drain-seconds unlimited",
            Some(8080),
        ),
    );
    let (code, r) = drill(
        "r27",
        &yaml,
        &[
            "--scenario",
            "delete",
            "--rps",
            "0",
            "--idle-streams",
            "16",
            "--duration",
            "3s",
            "--disrupt-after",
            "1s",
        ],
    );
    let t = termination(&r, "web-1", "app");
    assert!((f(&t["killAfterSeconds"]) - 30.0).abs() <= 0.2, "{t}");
    assert_eq!(t["exitCode"], 137, "{t}");
    assert_eq!(t["exitSignal"], "SIGKILL", "{t}");
    assert_eq!(r["proxyImplementation"], "netfilter", "{r}");
    let idle = &r["findings"]["reachedSigkillWhileIdle"];
    assert_eq!(idle.as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(idle[0]["pod"], "web-1");
    // The idle streams web-1 held were cut by SIGKILL, and may have been opened again on web-2
    // before the drill ended (it ends once web-1's object is gone, a moment later); every other
    // stream was still open at the end.
    let k = idle[0]["idleStreams"].as_u64().unwrap();
    assert!((1..16).contains(&k), "web-1 held {k} of 16: {r}");
    let opened = r["streams"]["opened"].as_u64().unwrap();
    assert!((16..=16 + k).contains(&opened), "{r}");
    assert_eq!(
        r["streams"]["unfinished"].as_u64().unwrap() + k,
        opened,
        "{r}"
    );
    assert_eq!(idle[0]["containers"], serde_json::json!(["app"]));
    assert!((f(&idle[0]["waitedSeconds"]) - 30.0).abs() <= 0.2, "{r}");
    assert!(
        r["advice"]
            .to_string()
            .contains("pod web-1 (container app) reached SIGKILL while idle"),
        "{r}"
    );
    // Work did not fail: the idle streams cut by SIGKILL are counted, not failed.
    assert_eq!(r["streams"]["idleCut"], k, "{r}");
    assert_eq!(r["streams"]["failed"], 0, "{r}");
    assert_eq!(r["verdict"], "pass");
    assert_eq!(code, Some(0));
}
