//! Scenario: podgrace itself is SIGKILLed. No process of its containers may survive it.
//!
//! The test re-invokes its own binary as the "supervisor" (env `PODGRACE_SUPERVISOR_MARK`),
//! which starts a container whose PID 1 has a background grandchild, prints `READY`, and
//! blocks. The test SIGKILLs the supervisor and checks /proc until nothing of the container is
//! left.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use podgrace_node::process::{ContainerProcess, ContainerSpec};

const MARK_VAR: &str = "PODGRACE_SUPERVISOR_MARK";

/// The supervisor role. Without the env var (a normal test run) it does nothing.
#[tokio::test]
async fn supervisor_role() {
    let Ok(mark) = std::env::var(MARK_VAR) else {
        return;
    };
    let force_host = std::env::var("PODGRACE_SUPERVISOR_HOST").is_ok();
    let spec = ContainerSpec {
        name: "victim".into(),
        argv: common::argv(&["sh", "-c", "sleep 1000 & exec sleep 1001"]),
        env: vec![("PODGRACE_MARK".into(), mark)],
        force_host,
        ..Default::default()
    };
    let c = ContainerProcess::spawn(spec, None).await.expect("spawn");
    // Wait until the grandchild exists too.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ready = format!("{} {:?}", c.pid(), c.isolation());
    if let Ok(path) = std::env::var("PODGRACE_SUPERVISOR_READY") {
        std::fs::write(path, ready).expect("write ready file");
    }
    c.wait().await;
}

/// Starts the supervisor, waits until its container runs, SIGKILLs it; returns the ready line
/// (`<pid 1> <isolation>`) and the marker of the container's processes.
fn start_and_kill_supervisor(mark: &str, host: bool) -> (String, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let ready_file = std::env::temp_dir().join(format!("podgrace-ready-{mark}"));
    let _ = std::fs::remove_file(&ready_file);
    let mut cmd = Command::new(exe);
    cmd.args([
        "supervisor_role",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(MARK_VAR, mark)
    .env("PODGRACE_SUPERVISOR_READY", &ready_file)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if host {
        cmd.env("PODGRACE_SUPERVISOR_HOST", "1");
    }
    let mut sup = cmd.spawn().expect("spawn supervisor");
    let became_ready = common::eventually(Duration::from_secs(10), || ready_file.exists());
    if !became_ready {
        let _ = sup.kill();
        let _ = sup.wait();
        panic!("supervisor never became ready");
    }
    let ready = std::fs::read_to_string(&ready_file).unwrap_or_default();
    let _ = std::fs::remove_file(&ready_file);
    let marker = format!("PODGRACE_MARK={mark}");
    let before = common::pids_with_env(&marker);
    assert!(
        before.len() >= 2,
        "expected PID 1 and a grandchild ({ready}), found {before:?}"
    );

    sup.kill().expect("SIGKILL supervisor");
    sup.wait().expect("wait supervisor");
    (ready, marker)
}

fn run_supervisor_and_kill_it(mark: &str, host: bool) {
    let (ready, marker) = start_and_kill_supervisor(mark, host);
    let gone = common::eventually(Duration::from_secs(3), || {
        common::pids_with_env(&marker).is_empty()
    });
    assert!(
        gone,
        "processes outlived the supervisor ({ready}): {:?}",
        common::pids_with_env(&marker)
    );
}

/// Namespaced mode: PDEATHSIG kills PID 1, the kernel tears the PID namespace down.
#[test]
fn no_container_process_outlives_a_killed_supervisor() {
    if std::env::var(MARK_VAR).is_ok()
        || !common::need_namespaces("no_container_process_outlives_a_killed_supervisor")
    {
        return;
    }
    run_supervisor_and_kill_it(&format!("ns-{}", std::process::id()), false);
}

/// Host (fallback) mode: PDEATHSIG still kills PID 1. A grandchild is NOT covered in this mode
/// (nothing is left alive to kill it once podgrace is gone); the test checks PID 1 and then
/// cleans the grandchild up itself.
#[test]
fn host_mode_pid_1_dies_with_a_killed_supervisor() {
    if std::env::var(MARK_VAR).is_ok() {
        return;
    }
    let (ready, marker) = start_and_kill_supervisor(&format!("host-{}", std::process::id()), true);
    let pid1: i32 = ready
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("pid in ready line");
    assert!(ready.ends_with("Host"), "{ready}");
    let pid1_gone = common::eventually(Duration::from_secs(3), || {
        // Gone, or a zombie about to be collected by init.
        std::fs::read_to_string(format!("/proc/{pid1}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .map(|r| r.trim_start().starts_with('Z'))
                    .unwrap_or(false)
            })
            .unwrap_or(true)
    });
    for pid in common::pids_with_env(&marker) {
        if let Some(p) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
    assert!(
        pid1_gone,
        "PID 1 ({pid1}) outlived the supervisor in host mode"
    );
}
