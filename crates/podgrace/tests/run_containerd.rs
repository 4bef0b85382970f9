//! `podgrace run --runtime containerd` as a user runs it: the real binary on a real containerd
//! (`.ci/containerd.sh start`; CI runs it), the images built by the tests
//! (`podgrace-node/tests/containerd_support`).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::containerd_support::{socket, BUSYBOX, SIGLOG_QUIT};
use common::*;

fn tasks(sock: &std::path::Path) -> String {
    let o = Command::new("ctr")
        .arg("-a")
        .arg(sock)
        .args(["-n", "k8s.io", "tasks", "ls"])
        .output()
        .expect("ctr");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn run_on_containerd_reports_the_image_stop_signal() {
    let Some(sock) = socket("run_on_containerd_reports_the_image_stop_signal") else {
        return;
    };
    let file = tmp_file(
        "ctrd-quit",
        "quit.yaml",
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: quit}}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    image: {SIGLOG_QUIT}\n"),
    );
    let runtime = format!("containerd:{}", sock.display());
    let out = podgrace(&[
        "run",
        file.to_str().unwrap(),
        "--runtime",
        &runtime,
        "--delete-after",
        "2s",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = json(&out);
    let t = &r["containers"][0]["terminations"][0];
    assert_eq!(t["stopSignal"], "SIGQUIT", "{r}");
    assert_eq!(t["exitCode"], 0);
    assert!(t["killAfterSeconds"].is_null());
    let exit = t["exitAfterSeconds"].as_f64().expect("exit");
    assert!(exit < 0.15, "exited {exit} s after the delete");
    let err = stderr(&out);
    assert!(err.contains("[pod/quit/app] siglog got SIGQUIT"), "{err}");
    assert!(err.contains("runtime: containerd 1."), "{err}");
    assert!(err.contains("Pulled"), "{err}");
}

#[test]
fn a_restarted_podgrace_stops_the_pods_it_left_on_containerd() {
    let Some(sock) = socket("a_restarted_podgrace_stops_the_pods_it_left_on_containerd") else {
        return;
    };
    let runtime = format!("containerd:{}", sock.display());
    // A pod whose app ignores SIGTERM (busybox sleep as PID 1), with a 3 s grace.
    let left = tmp_file(
        "ctrd-left",
        "left.yaml",
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: left-behind}}\nspec:\n  terminationGracePeriodSeconds: 3\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, \"1000\"]\n"),
    );
    let mut first = Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(["run", left.to_str().unwrap(), "--runtime", &runtime])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("podgrace");
    let t0 = Instant::now();
    let mut up = false;
    while t0.elapsed() < Duration::from_secs(30) {
        if tasks(&sock)
            .lines()
            .filter(|l| l.contains("RUNNING"))
            .count()
            >= 2
        {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // podgrace dies without a word, as a kubelet may; its containers go on under containerd.
    first.kill().expect("kill -9");
    let _ = first.wait();
    assert!(up, "the pod never ran: {}", tasks(&sock));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        tasks(&sock).contains("RUNNING"),
        "the containers outlive a dead podgrace"
    );
    let other = tmp_file(
        "ctrd-next",
        "next.yaml",
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: next}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, \"1000\"]\n"),
    );
    let started = Instant::now();
    let out = podgrace(&[
        "run",
        other.to_str().unwrap(),
        "--runtime",
        &runtime,
        "--delete-after",
        "1s",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("found pod default/left-behind") && err.contains("stopping it with its grace"),
        "{err}"
    );
    // Stopped with its 3 s grace (the app ignores SIGTERM: SIGKILL at the deadline), before
    // the new pod ran.
    assert!(started.elapsed() >= Duration::from_secs(3), "{err}");
    assert_eq!(tasks(&sock).lines().skip(1).count(), 0, "{}", tasks(&sock));
}

#[test]
fn explain_and_lint_read_the_stopsignal_from_containerd() {
    let Some(sock) = socket("explain_and_lint_read_the_stopsignal_from_containerd") else {
        return;
    };
    let file = tmp_file(
        "ctrd-explain",
        "q.yaml",
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: q}}\nspec:\n  containers:\n  - name: app\n    image: {SIGLOG_QUIT}\n  - name: plain\n    image: {BUSYBOX}\n  - name: gone\n    image: nginx:1.27\n"),
    );
    let source = format!("containerd:{}", sock.display());
    let signal = |out: &std::process::Output, c: &str| {
        json(out)[0]["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .find(|x| x["name"] == c)
            .map(|x| x["stopSignal"].clone())
            .unwrap_or_default()
    };
    let known = podgrace(&["explain", file.to_str().unwrap(), "-o", "json"]);
    assert!(known.status.success(), "{}", stderr(&known));
    assert_eq!(signal(&known, "app"), "SIGTERM", "unknown to the table");
    let read = podgrace(&[
        "explain",
        file.to_str().unwrap(),
        "-o",
        "json",
        "--image-source",
        &source,
    ]);
    assert!(read.status.success(), "{}", stderr(&read));
    assert_eq!(signal(&read, "app"), "SIGQUIT", "{}", stdout(&read));
    assert_eq!(signal(&read, "plain"), "SIGTERM");
    // Not in containerd: the table of known images still applies, with a note.
    assert_eq!(signal(&read, "gone"), "SIGQUIT");
    assert!(stderr(&read).contains("note: image nginx:1.27 is not present in containerd"));
    let lint = podgrace(&[
        "lint",
        file.to_str().unwrap(),
        "-o",
        "json",
        "--image-source",
        &source,
        "--fail-on",
        "error",
    ]);
    assert!(lint.status.success(), "{}", stderr(&lint));
    let down = podgrace(&[
        "explain",
        file.to_str().unwrap(),
        "--image-source",
        "containerd:/nonexistent/containerd.sock",
    ]);
    // containerd out of reach is this machine's failure, not the manifest's: exit 3.
    assert_eq!(down.status.code(), Some(3), "{}", stderr(&down));
    assert!(stderr(&down).contains("cannot reach the container runtime"));
}
