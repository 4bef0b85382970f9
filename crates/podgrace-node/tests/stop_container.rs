//! Scenarios for StopContainer, mirroring containerd `internal/cri/server/container_stop.go`.

mod common;

use std::time::{Duration, Instant};

use podgrace_node::process::ExitStatus;
use podgrace_node::runtime::{
    CallContext, ContainerConfig, PodSandboxConfig, ProcessRuntime, RuntimeService, StopEvent,
    StopEventKind,
};
use podgrace_node::sandbox::NetworkConfig;

async fn start(rt: &ProcessRuntime, name: &str, argv: &[&str]) -> String {
    let ctx = CallContext::background();
    let pod = rt
        .run_pod_sandbox(
            &ctx,
            PodSandboxConfig {
                name: name.into(),
                host_network: true,
                ..Default::default()
            },
        )
        .await
        .expect("sandbox");
    let id = rt
        .create_container(
            &ctx,
            &pod,
            ContainerConfig {
                name: name.into(),
                command: common::argv(argv),
                ..Default::default()
            },
        )
        .await
        .expect("create");
    rt.start_container(&ctx, &id).await.expect("start");
    id
}

fn first(events: &[StopEvent], f: impl Fn(&StopEventKind) -> bool) -> Option<StopEvent> {
    events.iter().copied().find(|e| f(&e.kind))
}

fn count(events: &[StopEvent], f: impl Fn(&StopEventKind) -> bool) -> usize {
    events.iter().filter(|e| f(&e.kind)).count()
}

/// R01: a PID 1 with no SIGTERM handler ignores SIGTERM and is SIGKILLed at the deadline.
#[tokio::test]
async fn pid_1_without_handler_is_killed_at_the_deadline() {
    if !common::need_namespaces("pid_1_without_handler_is_killed_at_the_deadline") {
        return;
    }
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let id = start(&rt, "sleeper", &["sleep", "1000"]).await;
    rt.stop_container(&CallContext::background(), &id, 2)
        .await
        .expect("stop");
    let ev = rt.stop_events(&id);
    let sig = first(&ev, |k| {
        matches!(k, StopEventKind::StopSignalSent { signal: 15 })
    })
    .expect("SIGTERM sent");
    let kill = first(&ev, |k| matches!(k, StopEventKind::KillSent)).expect("SIGKILL sent");
    let exit = first(&ev, |k| matches!(k, StopEventKind::Exited { .. })).expect("exited");
    let after = kill.at.duration_since(sig.at);
    let late_ms = after.as_secs_f64() * 1000.0 - 2000.0;
    eprintln!("SIGKILL {:.3} ms after the 2 s deadline", late_ms);
    assert!(
        (-150.0..=150.0).contains(&late_ms),
        "SIGKILL at {after:?} after SIGTERM, want 2 s ± 150 ms"
    );
    assert_eq!(
        exit.kind,
        StopEventKind::Exited {
            status: ExitStatus::Signal(9)
        }
    );
}

/// A PID 1 that traps SIGTERM exits at once with code 0, and no SIGKILL is sent.
#[tokio::test]
async fn pid_1_with_handler_exits_before_the_deadline() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let id = start(
        &rt,
        "trapper",
        &[
            "sh",
            "-c",
            "trap 'exit 0' TERM; while :; do sleep 0.1; done",
        ],
    )
    .await;
    // Give the shell time to install its trap (the container has no readiness signal here).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    rt.stop_container(&CallContext::background(), &id, 10)
        .await
        .expect("stop");
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t0.elapsed()
    );
    let ev = rt.stop_events(&id);
    assert_eq!(
        count(&ev, |k| matches!(k, StopEventKind::KillSent)),
        0,
        "{ev:?}"
    );
    assert!(
        first(&ev, |k| *k
            == StopEventKind::Exited {
                status: ExitStatus::Code(0)
            })
        .is_some(),
        "{ev:?}"
    );
}

/// containerd: a second StopContainer with timeout > 0 does not resend the stop signal; each
/// call waits its own timeout and then SIGKILLs, so the shorter second call kills first.
#[tokio::test]
async fn second_stop_does_not_resend_the_signal_and_kills_at_its_own_deadline() {
    if !common::need_namespaces("second_stop_does_not_resend_the_signal") {
        return;
    }
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let id = start(&rt, "sleeper", &["sleep", "1000"]).await;
    let ctx = CallContext::background();
    let first_call = rt.stop_container(&ctx, &id, 30);
    let second_call = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        rt.stop_container(&ctx, &id, 1).await
    };
    let (a, b) = tokio::join!(first_call, second_call);
    a.expect("first stop");
    b.expect("second stop");
    let ev = rt.stop_events(&id);
    assert_eq!(
        count(&ev, |k| matches!(k, StopEventKind::StopSignalSent { .. })),
        1,
        "{ev:?}"
    );
    assert_eq!(
        count(&ev, |k| matches!(
            k,
            StopEventKind::StopSignalSkipped { .. }
        )),
        1,
        "{ev:?}"
    );
    let sig = first(&ev, |k| matches!(k, StopEventKind::StopSignalSent { .. })).expect("signal");
    let second_req = ev
        .iter()
        .filter(|e| matches!(e.kind, StopEventKind::StopRequested { .. }))
        .nth(1)
        .copied()
        .expect("2nd");
    let kill = first(&ev, |k| matches!(k, StopEventKind::KillSent)).expect("kill");
    let late_ms = kill.at.duration_since(second_req.at).as_secs_f64() * 1000.0 - 1000.0;
    eprintln!("second call: SIGKILL {late_ms:.3} ms after its 1 s deadline");
    assert!((-150.0..=150.0).contains(&late_ms), "{ev:?}");
    assert!(kill.at.duration_since(sig.at) < Duration::from_secs(3));
}

/// timeout <= 0: SIGKILL at once, no stop signal.
#[tokio::test]
async fn zero_timeout_kills_at_once() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let id = start(&rt, "sleeper", &["sleep", "1000"]).await;
    rt.stop_container(&CallContext::background(), &id, 0)
        .await
        .expect("stop");
    let ev = rt.stop_events(&id);
    assert_eq!(
        count(&ev, |k| matches!(k, StopEventKind::StopSignalSent { .. })),
        0,
        "{ev:?}"
    );
    assert_eq!(
        count(&ev, |k| matches!(k, StopEventKind::KillSent)),
        1,
        "{ev:?}"
    );
    assert!(first(&ev, |k| *k
        == StopEventKind::Exited {
            status: ExitStatus::Signal(9)
        })
    .is_some());
}

/// The caller's deadline ends the call with an error and without SIGKILL; unknown ids and
/// exited containers are Ok.
#[tokio::test]
async fn caller_deadline_returns_error_without_kill_and_unknown_is_ok() {
    if !common::need_namespaces("caller_deadline_returns_error_without_kill") {
        return;
    }
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let bg = CallContext::background();
    rt.stop_container(&bg, "no-such-container", 5)
        .await
        .expect("unknown id is ok");
    let id = start(&rt, "sleeper", &["sleep", "1000"]).await;
    let ctx = CallContext::background().with_deadline(Instant::now() + Duration::from_millis(300));
    let r = rt.stop_container(&ctx, &id, 5).await;
    assert!(r.is_err(), "{r:?}");
    let ev = rt.stop_events(&id);
    assert_eq!(
        count(&ev, |k| matches!(k, StopEventKind::KillSent)),
        0,
        "{ev:?}"
    );
    let st = rt.container_status(&bg, &id).await.expect("status");
    assert_eq!(st.state, podgrace_node::runtime::ContainerState::Running);
    rt.stop_container(&bg, &id, 0).await.expect("kill");
    rt.stop_container(&bg, &id, 5)
        .await
        .expect("exited container is ok");
    let st = rt.container_status(&bg, &id).await.expect("status");
    assert_eq!(st.exit, Some(ExitStatus::Signal(9)));
}

/// exec_sync runs inside the container and returns its output and exit code.
#[tokio::test]
async fn exec_sync_reports_output_and_code() {
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let id = start(&rt, "app", &["sleep", "1000"]).await;
    let bg = CallContext::background();
    let r = rt
        .exec_sync(&bg, &id, common::argv(&["sh", "-c", "echo hi; exit 3"]), 5)
        .await
        .expect("exec");
    assert_eq!((r.stdout.as_slice(), r.exit_code), (&b"hi\n"[..], 3));
    rt.stop_container(&bg, &id, 0).await.expect("stop");
}

/// With containerd 1.6's measured latencies (issue 19, `real-cluster-1.32.md`), a stop of a
/// PID 1 that ignores SIGTERM: the signal 8–10 ms after the call, the SIGKILL 20–30 ms after
/// the deadline, and StopContainer returning 38 ms–2.9 s after the death. The tolerance above
/// each range (+15 ms) is this machine's timer and scheduling lateness, not the runtime's.
#[tokio::test]
async fn containerd_latencies_land_within_their_recorded_ranges() {
    if !common::need_namespaces("containerd_latencies_land_within_their_recorded_ranges") {
        return;
    }
    let lat = podgrace_core::rules::latency::CONTAINERD_1_6;
    for seed in [1, 2, 3] {
        let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
        let rt = rt.with_latencies(lat, seed);
        let id = start(&rt, "sleeper", &["sleep", "1000"]).await;
        let called = Instant::now();
        rt.stop_container(&CallContext::background(), &id, 1)
            .await
            .expect("stop");
        let returned = Instant::now();
        let ev = rt.stop_events(&id);
        let ms = |e: &StopEvent, from: Instant| e.at.saturating_duration_since(from).as_millis();
        let sig = first(&ev, |k| matches!(k, StopEventKind::StopSignalSent { .. })).unwrap();
        let kill = first(&ev, |k| matches!(k, StopEventKind::KillSent)).unwrap();
        let exit = first(&ev, |k| matches!(k, StopEventKind::Exited { .. })).unwrap();
        let (s, k) = (ms(&sig, called), ms(&kill, called));
        let back = returned.saturating_duration_since(exit.at).as_millis();
        eprintln!(
            "seed {seed}: signal +{s} ms, SIGKILL +{k} ms, returned {back} ms after the death"
        );
        assert!((8..=10 + 15).contains(&s), "signal at +{s} ms");
        assert!((1020..=1030 + 15).contains(&k), "SIGKILL at +{k} ms");
        assert!(
            (38..=2900 + 15).contains(&back),
            "returned {back} ms after the death"
        );
    }
}

/// A restart in the same sandbox waits out the measured restart latency (114–822 ms after the
/// previous instance died); without latencies it is immediate.
#[tokio::test]
async fn a_restart_waits_the_measured_restart_latency() {
    let lat = podgrace_core::rules::latency::CONTAINERD_1_6;
    let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
    let rt = rt.with_latencies(lat, 9);
    let ctx = CallContext::background();
    let pod = rt
        .run_pod_sandbox(
            &ctx,
            PodSandboxConfig {
                name: "restarter".into(),
                host_network: true,
                ..Default::default()
            },
        )
        .await
        .expect("sandbox");
    let config = ContainerConfig {
        name: "app".into(),
        command: common::argv(&["true"]),
        ..Default::default()
    };
    let first_id = rt
        .create_container(&ctx, &pod, config.clone())
        .await
        .unwrap();
    rt.start_container(&ctx, &first_id).await.unwrap();
    let mut st = rt.container_status(&ctx, &first_id).await.unwrap();
    while st.exit.is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
        st = rt.container_status(&ctx, &first_id).await.unwrap();
    }
    let died = st.finished_at.expect("finished");
    let second = rt.create_container(&ctx, &pod, config).await.unwrap();
    let waited = Instant::now().saturating_duration_since(died).as_millis();
    eprintln!("restart created {waited} ms after the death");
    assert!(
        (114..=822 + 15).contains(&waited),
        "created {waited} ms after the death"
    );
    assert_ne!(second, first_id);
}
