//! Scenarios for container processes: PID 1, whole-container kill, exec inside.

mod common;

use std::time::Duration;

use common::{argv, need_namespaces, pids_with_env};
use podgrace_node::process::{ContainerProcess, ContainerSpec, ExitStatus, Isolation, Stream};

fn spec(name: &str, a: &[&str]) -> ContainerSpec {
    ContainerSpec {
        name: name.into(),
        argv: argv(a),
        ..Default::default()
    }
}

/// The entry process sees itself as PID 1, and its output arrives line by line.
#[tokio::test]
async fn entry_process_is_pid_1_and_output_is_captured() {
    if !need_namespaces("entry_process_is_pid_1_and_output_is_captured") {
        return;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = ContainerProcess::spawn(
        spec("app", &["sh", "-c", "echo $$; echo oops >&2"]),
        Some(tx),
    )
    .await
    .expect("spawn");
    assert_eq!(c.isolation(), Isolation::Namespaced);
    let exit = c.wait().await;
    assert_eq!(exit.status, ExitStatus::Code(0));
    let mut lines = Vec::new();
    while let Some(l) = rx.recv().await {
        lines.push((l.container, l.stream, l.line));
    }
    assert!(
        lines.contains(&("app".into(), Stream::Stdout, "1".into())),
        "{lines:?}"
    );
    assert!(
        lines.contains(&("app".into(), Stream::Stderr, "oops".into())),
        "{lines:?}"
    );
}

/// When PID 1 exits, a background grandchild is gone too (PID namespace teardown).
#[tokio::test]
async fn grandchild_dies_with_pid_1() {
    if !need_namespaces("grandchild_dies_with_pid_1") {
        return;
    }
    let marker = "PODGRACE_TEST=grandchild_ns";
    let mut s = spec("bg", &["sh", "-c", "sleep 1000 & sleep 0.3; exit 0"]);
    s.env = vec![("PODGRACE_TEST".into(), "grandchild_ns".into())];
    let c = ContainerProcess::spawn(s, None).await.expect("spawn");
    let exit = c.wait().await;
    assert_eq!(exit.status, ExitStatus::Code(0));
    // The reaper reports PID 1 only after the namespace is empty: nothing may remain now.
    assert_eq!(pids_with_env(marker), Vec::<i32>::new());
}

/// Host (fallback) mode: the grandchild in PID 1's process group is killed when PID 1 exits.
#[tokio::test]
async fn grandchild_dies_with_pid_1_in_host_mode() {
    let marker = "PODGRACE_TEST=grandchild_host";
    let mut s = spec("bg", &["sh", "-c", "sleep 1000 & sleep 0.3; exit 0"]);
    s.env = vec![("PODGRACE_TEST".into(), "grandchild_host".into())];
    s.force_host = true;
    let c = ContainerProcess::spawn(s, None).await.expect("spawn");
    assert_eq!(c.isolation(), Isolation::Host);
    assert_eq!(c.wait().await.status, ExitStatus::Code(0));
    // The orphan is SIGKILLed by the reaper; init (not us) collects it, so allow it a moment.
    assert!(
        common::eventually(Duration::from_secs(2), || pids_with_env(marker).is_empty()),
        "left over: {:?}",
        pids_with_env(marker)
    );
}

/// A PID 1 without a SIGTERM handler ignores SIGTERM (kernel rule for namespace init).
#[tokio::test]
async fn pid_1_without_handler_ignores_sigterm() {
    if !need_namespaces("pid_1_without_handler_ignores_sigterm") {
        return;
    }
    let c = ContainerProcess::spawn(spec("sleeper", &["sleep", "1000"]), None)
        .await
        .expect("spawn");
    assert!(c.signal(15).expect("signal"));
    let waited = tokio::time::timeout(Duration::from_millis(500), c.wait()).await;
    assert!(waited.is_err(), "PID 1 died of SIGTERM: {waited:?}");
    assert!(c.kill().expect("kill"));
    assert_eq!(c.wait().await.status, ExitStatus::Signal(9));
}

/// exec runs inside the container: it sees the container's private /proc, where PID 1 is the
/// entry process, and `kill -TERM 1` (the case R08 preStop) reaches that PID 1.
#[tokio::test]
async fn exec_runs_inside_the_container() {
    if !need_namespaces("exec_runs_inside_the_container") {
        return;
    }
    let c = ContainerProcess::spawn(
        spec(
            "app",
            &[
                "sh",
                "-c",
                "trap 'echo got-term; exit 7' TERM; while :; do sleep 0.05; done",
            ],
        ),
        None,
    )
    .await
    .expect("spawn");
    let out = c
        .exec(
            argv(&["sh", "-c", "echo $$; tr '\\0' ' ' < /proc/1/cmdline"]),
            vec![],
            None,
            Some(Duration::from_secs(5)),
        )
        .await
        .expect("exec");
    assert_eq!(out.status, ExitStatus::Code(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let own_pid: i32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("pid line");
    assert!(own_pid > 1, "exec got pid {own_pid} in the container");
    assert!(
        lines.next().unwrap_or("").starts_with("sh -c trap"),
        "{text}"
    );

    let out = c
        .exec(
            argv(&["sh", "-c", "kill -TERM 1"]),
            vec![],
            None,
            Some(Duration::from_secs(5)),
        )
        .await
        .expect("exec kill");
    assert_eq!(out.status, ExitStatus::Code(0));
    let exit = tokio::time::timeout(Duration::from_secs(5), c.wait())
        .await
        .expect("PID 1 exits");
    assert_eq!(exit.status, ExitStatus::Code(7));
}

/// A missing binary in exec is an error naming the command; an exec that outlives its timeout
/// is killed and reported as a timeout.
#[tokio::test]
async fn exec_missing_binary_and_timeout() {
    let c = ContainerProcess::spawn(spec("app", &["sleep", "1000"]), None)
        .await
        .expect("spawn");
    let err = c
        .exec(argv(&["/nonexistent/bin"]), vec![], None, None)
        .await;
    assert!(err.is_err(), "{err:?}");
    let start = std::time::Instant::now();
    let err = c
        .exec(
            argv(&["sleep", "1000"]),
            vec![],
            None,
            Some(Duration::from_millis(300)),
        )
        .await;
    assert!(
        matches!(
            err,
            Err(podgrace_node::process::ProcessError::ExecTimeout { .. })
        ),
        "{err:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(3));
    c.kill().expect("kill");
    c.wait().await;
}

/// An exec whose caller gives up while the spawner thread is still starting it (a probe or hook
/// cancelled at that moment, issue 9 item 1): the process still starts, and it must still be
/// reaped and killed. Otherwise it stays an unreaped zombie of podgrace inside the container's
/// PID namespace, the container's PID 1 waits for it forever in the kernel's namespace teardown
/// (`zap_pid_ns_processes`), and the container's exit is never seen.
#[tokio::test]
async fn an_exec_dropped_while_spawning_is_reaped_and_pid_1_exits() {
    if !need_namespaces("an_exec_dropped_while_spawning_is_reaped_and_pid_1_exits") {
        return;
    }
    let marker = "PODGRACE_TEST=dropped_exec";
    let c = ContainerProcess::spawn(spec("app", &["sleep", "1000"]), None)
        .await
        .expect("spawn");
    for _ in 0..5 {
        // A zero timeout polls the exec once (the spawn is queued on the spawner thread) and
        // then drops it: the caller is gone before the process exists.
        let exec = c.exec(
            argv(&["sleep", "1000"]),
            vec![("PODGRACE_TEST".into(), "dropped_exec".into())],
            None,
            None,
        );
        assert!(tokio::time::timeout(Duration::ZERO, exec).await.is_err());
    }
    // The spawner works in order: once this exec has run, the dropped ones have started.
    let out = c
        .exec(argv(&["true"]), vec![], None, Some(Duration::from_secs(5)))
        .await
        .expect("exec");
    assert_eq!(out.status, ExitStatus::Code(0));
    // Nobody waits for those execs: they are killed, not left running in the container.
    assert!(
        common::eventually(Duration::from_secs(5), || pids_with_env(marker).is_empty()),
        "left running: {:?}",
        pids_with_env(marker)
    );
    assert!(c.kill().expect("kill"));
    let exit = tokio::time::timeout(Duration::from_secs(5), c.wait())
        .await
        .expect("PID 1's exit is seen: nothing of its namespace is left unreaped");
    assert_eq!(exit.status, ExitStatus::Signal(9));
}
