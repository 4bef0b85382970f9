//! Standard output whose reader goes away (`podgrace … | head`): every verb ends quietly,
//! without a panic, and `run` still deletes its pod in order.

mod common;

use common::*;
use std::io::Read as _;
use std::process::{Command, Output, Stdio};

/// Runs `podgrace ARGS` with standard output a pipe whose reading end is closed at once.
fn with_stdout_closed(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run podgrace");
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read stderr");
    let status = child.wait().expect("wait");
    Output {
        status,
        stdout: Vec::new(),
        stderr: err.into_bytes(),
    }
}

fn assert_quiet(args: &[&str], want: i32) {
    let out = with_stdout_closed(args);
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(out.status.code(), Some(want), "{args:?}: {err}");
}

#[test]
fn a_closed_stdout_ends_the_report_verbs_quietly() {
    assert_quiet(&["conformance"], 0);
    assert_quiet(&["lint", "--explain", "endpoint-race"], 0);
    // 300 pods whose preStop outlasts their grace: findings enough to fill the pipe; lint's own
    // exit code, 1, not a crash.
    let pod = |i: usize| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    image: x\n    lifecycle: {{preStop: {{exec: {{command: [sleep, \"60\"]}}}}}}\n")
    };
    let many: Vec<String> = (0..300).map(pod).collect();
    let file = tmp_file("closed-stdout", "many.yaml", &many.join("---\n"));
    assert_quiet(&["lint", file.to_str().unwrap()], 1);
    assert_quiet(&["explain", file.to_str().unwrap()], 0);
    assert_quiet(&["explain", file.to_str().unwrap(), "-o", "json"], 0);
    assert_quiet(&["lint", file.to_str().unwrap(), "-o", "sarif"], 1);
}

/// A container that writes a line every 10 ms, its output cut: the pod still runs until its
/// deletion and is reported (on stderr nothing but podgrace's own lines).
#[test]
fn a_closed_stdout_does_not_stop_run() {
    if !privileged("closed-stdout") {
        return;
    }
    let file = tmp_file(
        "closed-stdout",
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: chatty}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, \"trap 'exit 0' TERM; while true; do echo line; sleep 0.01; done\"]\n",
    );
    assert_quiet(
        &["run", file.to_str().unwrap(), "--delete-after", "500ms"],
        0,
    );
}
