//! `podgrace why pod/NAME` against a real `podgrace serve` driven by real kubectl: terminations
//! happen (a delete with grace of an app ignoring SIGTERM, a preStop cut short, a force
//! delete, a liveness kill), then `why` reads them from the API as it would from any cluster
//! (the kubeconfig serve wrote; no special case), and from kubectl's own JSON output (`-f`).
//! Bad input (a missing pod, a bad token, an unknown context, a refused connection, a
//! malformed file) gets kubectl's wording and exit 2 (3 for no connection).

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::serve::{kubectl_bin, Serve};
use serde_json::Value;

/// What these tests ask of a serve besides kubectl.
trait ServeExt {
    /// `podgrace why` with the kubeconfig in `KUBECONFIG`, as a user would run it.
    fn why(&self, args: &[&str]) -> Output;
    /// `podgrace why POD -o json`, which must succeed.
    fn why_json(&self, pod: &str) -> Value;
    /// `kubectl get pod NAME -o json`, when the pod exists.
    fn pod_json(&self, name: &str) -> Option<Value>;
    /// Polls `get pod NAME -o json` until `want` holds (every 100 ms, up to `within`).
    fn wait_pod(&self, name: &str, within: Duration, want: impl Fn(&Value) -> bool) -> Value;
}

impl ServeExt for Serve {
    fn why(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_podgrace"))
            .arg("why")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .unwrap()
    }

    fn why_json(&self, pod: &str) -> Value {
        let o = self.why(&[pod, "-o", "json"]);
        assert!(o.status.success(), "why {pod}: {}", err(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn pod_json(&self, name: &str) -> Option<Value> {
        let o = self.kubectl(&["get", "pod", name, "-o", "json"]);
        o.status
            .success()
            .then(|| serde_json::from_slice(&o.stdout).unwrap())
    }

    fn wait_pod(&self, name: &str, within: Duration, want: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            if let Some(p) = self.pod_json(name) {
                if want(&p) {
                    return p;
                }
            }
            assert!(
                start.elapsed() < within,
                "pod {name}: not as wanted in {within:?}: {:?}",
                self.pod_json(name)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A pod whose app (bash as PID 1) ignores SIGTERM, with an exec preStop `sleep PRESTOP`.
fn pod(name: &str, tgps: i64, pre_stop: i64, finalizer: bool, extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
{}spec:
  terminationGracePeriodSeconds: {tgps}
  containers:
  - name: app
    image: busybox
    command: [bash, -c, \"trap '' TERM; while true; do sleep 0.2; done\"]
    lifecycle:
      preStop:
        exec: {{command: [sleep, '{pre_stop}']}}
{extra}",
        if finalizer {
            "  finalizers: [podgrace.test/keep]\n"
        } else {
            ""
        }
    )
}

fn finding<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {r:#}"))
}

fn ids(r: &Value) -> Vec<String> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

fn terminal(p: &Value) -> bool {
    matches!(p["status"]["phase"].as_str(), Some("Failed" | "Succeeded"))
}

fn release(s: &Serve, name: &str) {
    s.ok(&[
        "patch",
        "pod",
        name,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
}

#[test]
fn why_reads_real_terminations_from_serve_as_from_any_cluster() {
    let s = Serve::start("why-live", &[]);
    // sigkill: TGPS 30, preStop 1 s, deleted with --grace-period=4: SIGKILL at 4 s.
    // cut: TGPS 2, preStop sleep 10: cut at 2 s, SIGKILL 2 s later (the kubelet's minimum).
    // force: preStop sleep 5, force deleted: cut at 1 s, SIGKILL at 3 s, FailedPreStopHook then
    // (the recorded hook was 3 s and died 32 ms before its end; podgrace's exec starts sooner,
    // so a 3 s hook would race the kill: this one outlives it).
    // live: a liveness probe that always fails (period 1 s, threshold 3, probe grace 2 s).
    let live_probe = "    livenessProbe:
      exec: {command: ['false']}
      periodSeconds: 1
      failureThreshold: 3
      terminationGracePeriodSeconds: 2
";
    let files = [
        s.file("sigkill.yaml", &pod("sigkill", 30, 1, true, "")),
        s.file("cut.yaml", &pod("cut", 2, 10, true, "")),
        s.file("force.yaml", &pod("force", 10, 5, false, "")),
        s.file("live.yaml", &pod("live", 30, 1, false, live_probe)),
    ];
    for f in &files {
        s.ok(&["apply", "-f", f.to_str().unwrap()]);
    }
    s.ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/sigkill",
        "pod/cut",
        "pod/force",
        "--timeout=60s",
    ]);
    s.ok(&[
        "delete",
        "pod",
        "sigkill",
        "--grace-period=4",
        "--wait=false",
    ]);
    s.ok(&["delete", "pod", "cut", "--wait=false"]);
    let o = s.kubectl(&["delete", "pod", "force", "--force", "--grace-period=0"]);
    assert!(
        out(&o).contains("pod \"force\" force deleted"),
        "{}",
        out(&o)
    );

    // sigkill: the kubelet's final delete sets DGPS 0 once phase Failed; the finalizer keeps
    // the object for why.
    let p = s.wait_pod("sigkill", Duration::from_secs(20), |p| {
        terminal(p) && p["metadata"]["deletionGracePeriodSeconds"] == 0
    });
    let r = s.why_json("pod/sigkill");
    assert_eq!(r["objectPresent"], true);
    assert_eq!(r["phase"], "Failed");
    let c = &r["containers"][0];
    assert_eq!(c["terminated"]["exitCode"], 137, "{r:#}");
    let after = c["terminated"]["afterDeleteSeconds"].as_i64().unwrap();
    assert!((4..=5).contains(&after), "{r:#}");
    let k = finding(&r, "killedAtGraceDeadline");
    assert_eq!(k["inferred"], true);
    assert!(
        k["message"]
            .as_str()
            .unwrap()
            .contains("SIGKILL, at the grace deadline if the delete's grace was about"),
        "{k}"
    );
    // The same from kubectl's own JSON output, offline.
    let pod_file = s.file("sigkill.json", &serde_json::to_string(&p).unwrap());
    let ev = s.ok(&["get", "events", "-o", "json"]);
    let ev_file = s.file("events.json", &ev);
    let o = Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(["why", "-o", "json", "-f"])
        .arg(&pod_file)
        .arg("-f")
        .arg(&ev_file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let offline: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(ids(&offline), ids(&r));
    assert!(offline["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["reason"] == "Killing" && e["message"] == "Stopping container app"));
    // The text form.
    let text = out(&s.why(&["pod/sigkill"]));
    assert!(
        text.starts_with("pod default/sigkill: phase Failed, terminationGracePeriodSeconds 30\n"),
        "{text}"
    );
    assert!(text.contains("\nwhy:\n"), "{text}");
    assert!(
        text.contains("Normal   Killing (app)  Stopping container app"),
        "{text}"
    );
    release(&s, "sigkill");

    // cut: exit 137 at TGPS + 2 s, a preStop cut short (inferred), and its FailedPreStopHook.
    s.wait_pod("cut", Duration::from_secs(20), |p| {
        terminal(p) && p["metadata"]["deletionGracePeriodSeconds"] == 0
    });
    let r = s.why_json("pod/cut");
    let after = r["containers"][0]["terminated"]["afterDeleteSeconds"]
        .as_i64()
        .unwrap();
    assert!((4..=5).contains(&after), "{r:#}");
    let c = finding(&r, "preStopCut");
    assert_eq!(c["inferred"], true);
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("the preStop (exec sleep 10) used the whole grace and was cut off"),
        "{c}"
    );
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("upstream emits no event"),
        "{c}"
    );
    release(&s, "cut");

    // force: the object went at once; the events alone: Killing, then FailedPreStopHook when
    // the hook died with its container about 3 s later.
    let start = Instant::now();
    let r = loop {
        let r = s.why_json("pod/force");
        if ids(&r).contains(&"preStopFailed".to_string()) {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "{r:#}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(r["objectPresent"], false);
    assert_eq!(ids(&r)[0], "podGone");
    let h = finding(&r, "preStopFailed");
    assert_eq!(h["container"], "app");
    let m = h["message"].as_str().unwrap();
    assert!(
        m.starts_with("FailedPreStopHook \"PreStopHook failed\" "),
        "{m}"
    );
    // 3 s after Killing (whole-second timestamps: 2 to 4 s).
    let secs: i64 = m
        .trim_start_matches("FailedPreStopHook \"PreStopHook failed\" ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((2..=4).contains(&secs), "{m}");
    assert_eq!(h["inferred"], true);

    // live: restarted by the failing liveness probe.
    s.wait_pod("live", Duration::from_secs(30), |p| {
        p["status"]["containerStatuses"][0]["restartCount"].as_i64() >= Some(1)
    });
    let r = s.why_json("live");
    let l = finding(&r, "livenessKill");
    let m = l["message"].as_str().unwrap();
    assert!(m.starts_with("liveness probe failed "), "{m}");
    assert!(m.contains("(failureThreshold 3)"), "{m}");
    assert!(
        m.contains("with the probe's terminationGracePeriodSeconds of 2 s"),
        "{m}"
    );
    let failures: i64 = m["liveness probe failed ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(failures >= 3, "{m}");
    assert_eq!(r["containers"][0]["last"], "lastState", "{r:#}");
    s.ok(&["delete", "pod", "live", "--force", "--grace-period=0"]);

    // Bad input, in kubectl's words.
    let o = s.why(&["pod/nosuchpod"]);
    let k = s.kubectl(&["get", "pod", "nosuchpod"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(err(&o).trim_end(), err(&k).trim_end());
    assert_eq!(
        err(&o).trim_end(),
        "Error from server (NotFound): pods \"nosuchpod\" not found"
    );
    let o = s.why(&["pod/x", "--context", "nope"]);
    let k = s.kubectl(&["get", "pod", "x", "--context", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(err(&o).trim_end(), err(&k).trim_end());
    // A wrong token: 401.
    let text = std::fs::read_to_string(&s.kubeconfig).unwrap();
    let token = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap();
    let bad = s.file("bad-token", &text.replace(token, "not-the-token"));
    let o = s.why(&["pod/x", "--kubeconfig", bad.to_str().unwrap()]);
    let k = s.kubectl(&["get", "pod", "x", "--kubeconfig", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        err(&o).trim_end(),
        "error: You must be logged in to the server (Unauthorized)"
    );
    assert_eq!(err(&k).lines().last(), err(&o).lines().last());
    // Nothing listening: refused, exit 3.
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap();
    let refused = s.file("refused", &text.replace(server, "https://127.0.0.1:1"));
    let o = s.why(&["pod/x", "--kubeconfig", refused.to_str().unwrap()]);
    let k = s.kubectl(&["get", "pod", "x", "--kubeconfig", refused.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert_eq!(err(&k).lines().last(), err(&o).lines().last());
}

#[test]
fn bad_files_and_kubeconfigs_get_clear_errors_and_exit_2() {
    let tmpdir = common::tempdir("why-bad");
    let dir = tmpdir.path();
    let w = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_podgrace"))
            .arg("why")
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"kind\": \"Pod\",\n \"metadata\": {\"name\": [}\n").unwrap();
    let o = w(&["-f", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).starts_with(&format!("error: {}:2:", bad.display())),
        "{}",
        err(&o)
    );
    let svc = dir.join("svc.yaml");
    std::fs::write(&svc, "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n").unwrap();
    let o = w(&["-f", svc.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("kind \"Service\": expected a Pod"),
        "{}",
        err(&o)
    );
    let events = dir.join("events.json");
    std::fs::write(
        &events,
        "{\"kind\": \"List\", \"apiVersion\": \"v1\", \"items\": []}\n",
    )
    .unwrap();
    let o = w(&["-f", events.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("no pod in the files: name it"),
        "{}",
        err(&o)
    );
    let o = w(&["pod/gone", "-f", events.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        err(&o),
        "error: pod default/gone: neither the pod nor any event about it is in the files\n"
    );
    let o = w(&["pod/x", "-f", "/nonexistent/pod.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).starts_with("error: /nonexistent/pod.json: No such file"),
        "{}",
        err(&o)
    );
    let o = w(&["pod/x", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        err(&o),
        "error: stat /nonexistent/kubeconfig: no such file or directory\n"
    );
    let k = Command::new(kubectl_bin())
        .args(["get", "pod", "x", "--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .unwrap();
    assert_eq!(err(&k), err(&o));
    let o = w(&["deployment/web", "-f", svc.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("podgrace why reads pods only"),
        "{}",
        err(&o)
    );
}
