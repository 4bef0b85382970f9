//! The local kubelet's pod task, as scenarios with real processes and real signals: a pod is
//! started from a manifest, deleted or evicted, and the measured instants are compared with what
//! the kubelet would do (±150 ms).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::need_namespaces;
use podgrace_core::manifest;
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{
    run_pod, DeleteApi, DeleteKubelet, HookOutcome, Killer, PodCommand, PodHandle, PodOptions,
    PodReport, PodWorkerState,
};
use podgrace_node::process::ExitStatus;
use podgrace_node::runtime::{
    CallContext, ContainerConfig, ContainerEvent, ContainerStatus, ExecSyncResponse,
    PodSandboxConfig, PodSandboxStatus, ProcessRuntime, RuntimeError, RuntimeService, StopEvent,
    StopEventKind,
};
use podgrace_node::sandbox::NetworkConfig;

const TOLERANCE: Duration = Duration::from_millis(150);

fn plan(yaml: &str) -> PodPlan {
    let m = manifest::load(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let pod = m.pods().next().expect("a pod").clone();
    pod
}

struct Run {
    runtime: Arc<ProcessRuntime>,
    pod: PodHandle,
    events: EventRecorder,
}

fn start(yaml: &str) -> Run {
    start_with(yaml, PodOptions::default())
}

fn start_with(yaml: &str, opts: PodOptions) -> Run {
    let (runtime, _output) = ProcessRuntime::new(NetworkConfig::default());
    let runtime = Arc::new(runtime);
    let events = EventRecorder::new();
    let pod = run_pod(runtime.clone(), plan(yaml), opts, events.clone());
    Run {
        runtime,
        pod,
        events,
    }
}

impl Run {
    /// Waits until every container runs (the pod is Running and ready).
    async fn running(&self) {
        let mut st = self.pod.status();
        tokio::time::timeout(
            Duration::from_secs(10),
            st.wait_for(|s| s.phase == PodWorkerState::Running && s.ready),
        )
        .await
        .expect("pod running within 10 s")
        .expect("status");
    }

    /// Waits until the pod runs, deletes it like `kubectl delete pod`, and waits for its
    /// report; returns when the delete was sent.
    async fn delete_when_running(self) -> (Instant, Arc<ProcessRuntime>, PodReport) {
        self.running().await;
        let deleted = Instant::now();
        self.pod
            .send(PodCommand::Delete(KubectlDeleteFlags::default()));
        let (rt, report) = self.finish().await;
        (deleted, rt, report)
    }

    async fn finish(self) -> (Arc<ProcessRuntime>, PodReport) {
        let report = tokio::time::timeout(Duration::from_secs(60), self.pod.wait())
            .await
            .expect("pod ended within 60 s")
            .expect("pod report");
        (self.runtime, report)
    }
}

fn near(got: Duration, want: Duration) -> bool {
    got + TOLERANCE >= want && got <= want + TOLERANCE
}

fn at(
    events: &[StopEvent],
    from: Instant,
    pick: impl Fn(&StopEventKind) -> bool,
) -> Option<Duration> {
    events
        .iter()
        .find(|e| pick(&e.kind))
        .map(|e| e.at.saturating_duration_since(from))
}

fn signal_sent(k: &StopEventKind) -> bool {
    matches!(k, StopEventKind::StopSignalSent { .. })
}

fn kill_sent(k: &StopEventKind) -> bool {
    matches!(k, StopEventKind::KillSent)
}

fn exited(k: &StopEventKind) -> bool {
    matches!(k, StopEventKind::Exited { .. })
}

fn exit_status(events: &[StopEvent]) -> Option<ExitStatus> {
    events.iter().find_map(|e| match e.kind {
        StopEventKind::Exited { status } => Some(status),
        _ => None,
    })
}

const DRAINS_ON_TERM: &str = "trap 'exit 0' TERM; while :; do sleep 0.05; done";

/// A container spec (YAML lines at 2-space list indentation) whose shell traps SIGTERM with
/// `on_term`, and is ready only once the trap is installed: a readiness probe looks for a file
/// the script writes right after `trap`. Without it a SIGTERM sent just after the start can
/// reach PID 1 before its handler exists, and PID 1 ignores it.
fn trapping(name: &str, on_term: &str, extra: &str) -> String {
    let marker = format!(
        "/tmp/podgrace-test-{}-{name}-{}",
        std::process::id(),
        MARKERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    format!(
        "  - name: {name}\n    image: busybox\n    command: [sh, -c, \"trap '{on_term}' TERM; touch {marker}; while :; do sleep 0.05; done\"]\n    readinessProbe:\n      exec: {{command: [test, -e, {marker}]}}\n      periodSeconds: 1\n{extra}"
    )
}

static MARKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_stop_then_sigterm_then_a_clean_exit() {
    if !need_namespaces("pre_stop_then_sigterm_then_a_clean_exit") {
        return;
    }
    let run = start(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: drain}}\nspec:\n  terminationGracePeriodSeconds: 10\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, \"{DRAINS_ON_TERM}\"]\n    lifecycle:\n      preStop:\n        sleep: {{seconds: 1}}\n"
    ));
    let (deleted, rt, report) = run.delete_when_running().await;
    let app = &report.containers[0];
    assert_eq!(app.terminations.len(), 1);
    let t = &app.terminations[0];
    assert_eq!(t.kill.grace_period_seconds, 10);
    let hook = t.kill.pre_stop.as_ref().expect("preStop ran");
    assert_eq!(hook.outcome, HookOutcome::Completed);
    // 1 s hook: 1 whole second deducted, StopContainer gets 9.
    assert_eq!(t.kill.stop_timeout_seconds, 9);
    let ev = rt.stop_events(&t.container_id);
    let sig = at(&ev, deleted, signal_sent).expect("SIGTERM sent");
    assert!(near(sig, Duration::from_secs(1)), "SIGTERM at {sig:?}");
    assert!(
        at(&ev, deleted, kill_sent).is_none(),
        "no SIGKILL for an app that exits"
    );
    assert_eq!(exit_status(&ev), Some(ExitStatus::Code(0)));
    assert!(report.events.iter().any(|e| e.reason == "Killing"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r01_pid_1_without_a_handler_is_killed_at_the_deadline() {
    if !need_namespaces("r01_pid_1_without_a_handler_is_killed_at_the_deadline") {
        return;
    }
    // `sleep` as PID 1 has no SIGTERM handler, so the kernel ignores SIGTERM for it.
    let run = start("apiVersion: v1\nkind: Pod\nmetadata: {name: r01}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1000\"]\n");
    let (deleted, rt, report) = run.delete_when_running().await;
    let t = &report.containers[0].terminations[0];
    let ev = rt.stop_events(&t.container_id);
    let sig = at(&ev, deleted, signal_sent).expect("SIGTERM");
    let kill = at(&ev, deleted, kill_sent).expect("SIGKILL");
    assert!(near(sig, Duration::ZERO), "SIGTERM at {sig:?}");
    assert!(near(kill, Duration::from_secs(2)), "SIGKILL at {kill:?}");
    assert_eq!(exit_status(&ev), Some(ExitStatus::Signal(9)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r09_a_hook_longer_than_the_budget_is_cut_and_sigkill_follows_two_seconds_later() {
    if !need_namespaces("r09") {
        return;
    }
    let run = start("apiVersion: v1\nkind: Pod\nmetadata: {name: r09}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, \"trap '' TERM; while :; do sleep 0.05; done\"]\n    lifecycle:\n      preStop:\n        exec: {command: [sleep, \"30\"]}\n");
    let (deleted, rt, report) = run.delete_when_running().await;
    let t = &report.containers[0].terminations[0];
    assert_eq!(t.kill.pre_stop.as_ref().unwrap().outcome, HookOutcome::Cut);
    assert_eq!(t.kill.stop_timeout_seconds, 2, "the 2-second floor");
    let ev = rt.stop_events(&t.container_id);
    let sig = at(&ev, deleted, signal_sent).expect("SIGTERM");
    let kill = at(&ev, deleted, kill_sent).expect("SIGKILL");
    assert!(near(sig, Duration::from_secs(2)), "SIGTERM at {sig:?}");
    assert!(near(kill, Duration::from_secs(4)), "SIGKILL at {kill:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_exec_hook_is_reported_and_sigterm_follows_at_once() {
    if !need_namespaces("a_failed_exec_hook") {
        return;
    }
    let run = start(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: missing}}\nspec:\n  containers:\n{}",
        trapping(
            "app",
            "exit 0",
            "    lifecycle:\n      preStop:\n        exec: {command: [/no/such/binary]}\n"
        )
    ));
    let (deleted, rt, report) = run.delete_when_running().await;
    let t = &report.containers[0].terminations[0];
    assert_eq!(
        t.kill.pre_stop.as_ref().unwrap().outcome,
        HookOutcome::Failed
    );
    assert!(report
        .events
        .iter()
        .any(|e| e.reason == "FailedPreStopHook"));
    let sig = at(&rt.stop_events(&t.container_id), deleted, signal_sent).expect("SIGTERM");
    assert!(near(sig, Duration::ZERO), "SIGTERM at {sig:?}");
}

/// Recorded on a real 1.32 node (`real-cluster-1.32.md` case c): a second, shorter delete
/// while the kill runs does not shorten it; SIGKILL comes on the first deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_second_delete_does_not_shorten_the_kill_in_flight() {
    if !need_namespaces("a_shorter_second_delete") {
        return;
    }
    let run = start("apiVersion: v1\nkind: Pod\nmetadata: {name: twice}\nspec:\n  terminationGracePeriodSeconds: 4\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1000\"]\n");
    run.running().await;
    let deleted = Instant::now();
    run.pod
        .send(PodCommand::Delete(KubectlDeleteFlags::default()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    run.pod.send(PodCommand::Delete(KubectlDeleteFlags {
        grace_period: 1,
        ..Default::default()
    }));
    let (rt, report) = run.finish().await;
    let ts = &report.containers[0].terminations;
    assert_eq!(ts.len(), 1, "one kill only: {ts:?}");
    assert_eq!(ts[0].kill.grace_period_seconds, 4);
    assert_eq!(ts[0].kill.stop_timeout_seconds, 4);
    let ev = rt.stop_events(&ts[0].container_id);
    let kill = at(&ev, deleted, kill_sent).expect("SIGKILL");
    // On the first deadline (4 s), not 0.5 s + 2 s.
    assert!(near(kill, Duration::from_secs(4)), "SIGKILL at {kill:?}");
    let second = report.deletes[1];
    assert_eq!(
        second.kubelet,
        DeleteKubelet::Ignored {
            kept_seconds: 4,
            recorded_seconds: 1
        }
    );
    assert!(matches!(
        second.api,
        DeleteApi::Graceful {
            deletion_grace_period_seconds: 1,
            ..
        }
    ));
}

/// Kubelets up to 1.21: a second delete that removes the object (`--grace-period=0 --force`)
/// reaches the pod killer, which kills again at once beside the pod worker: no preStop,
/// StopContainer(2), so SIGKILL 2 s after the second delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_1_22_a_second_force_delete_kills_again() {
    if !need_namespaces("before_1_22_a_second_force_delete") {
        return;
    }
    let opts = PodOptions {
        version: podgrace_core::KubeVersion::new(1, 21),
        ..Default::default()
    };
    let run = start_with("apiVersion: v1\nkind: Pod\nmetadata: {name: twice-old}\nspec:\n  terminationGracePeriodSeconds: 8\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1000\"]\n", opts);
    run.running().await;
    run.pod
        .send(PodCommand::Delete(KubectlDeleteFlags::default()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let second = Instant::now();
    run.pod.send(PodCommand::Delete(KubectlDeleteFlags {
        grace_period: 0,
        force: true,
        now: false,
    }));
    let (rt, report) = run.finish().await;
    let ts = &report.containers[0].terminations;
    assert_eq!(ts.len(), 2, "{ts:?}");
    let by_killer = ts
        .iter()
        .find(|t| t.killer == Killer::PodKiller)
        .expect("pod killer");
    assert_eq!(by_killer.kill.stop_timeout_seconds, 2);
    let ev = rt.stop_events(&by_killer.container_id);
    let kill = at(&ev, second, kill_sent).expect("SIGKILL");
    assert!(near(kill, Duration::from_secs(2)), "SIGKILL at {kill:?}");
    let signals = ev.iter().filter(|e| signal_sent(&e.kind)).count();
    assert_eq!(signals, 1, "containerd sends the stop signal once: {ev:?}");
    assert_eq!(report.deletes[1].kubelet, DeleteKubelet::KilledAgain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_sidecar_gets_its_stop_signal_after_the_main_container_exits() {
    if !need_namespaces("a_native_sidecar") {
        return;
    }
    let run = start(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: sidecar}}\nspec:\n  terminationGracePeriodSeconds: 10\n  initContainers:\n{}  containers:\n{}",
        trapping("proxy", "exit 0", "    restartPolicy: Always\n"),
        trapping("app", "sleep 1; exit 0", "")
    ));
    let (deleted, rt, report) = run.delete_when_running().await;
    let find = |n: &str| report.containers.iter().find(|c| c.name == n).unwrap();
    let app = &find("app").terminations[0];
    let proxy = &find("proxy").terminations[0];
    let app_ev = rt.stop_events(&app.container_id);
    let proxy_ev = rt.stop_events(&proxy.container_id);
    let app_exit = at(&app_ev, deleted, exited).expect("app exits");
    let proxy_sig = at(&proxy_ev, deleted, signal_sent).expect("proxy SIGTERM");
    assert!(
        near(app_exit, Duration::from_secs(1)),
        "app exit at {app_exit:?}"
    );
    assert!(
        proxy_sig >= app_exit,
        "proxy signalled at {proxy_sig:?} before app exit {app_exit:?}"
    );
    assert!(
        near(proxy_sig, app_exit),
        "proxy signalled at {proxy_sig:?}"
    );
    // The 1 s wait is deducted: 10 - 1 = 9.
    assert_eq!(proxy.kill.stop_timeout_seconds, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_eviction_gives_one_second_of_pre_stop_and_two_of_stop() {
    if !need_namespaces("hard_eviction") {
        return;
    }
    let run = start("apiVersion: v1\nkind: Pod\nmetadata: {name: evicted}\nspec:\n  terminationGracePeriodSeconds: 60\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1000\"]\n    lifecycle:\n      preStop:\n        sleep: {seconds: 30}\n");
    run.running().await;
    let evicted = Instant::now();
    run.pod.send(PodCommand::Evict {
        hard: true,
        eviction_max_pod_grace_period: 0,
    });
    let (rt, report) = run.finish().await;
    let t = &report.containers[0].terminations[0];
    assert_eq!(t.kill.grace_period_seconds, 1);
    assert_eq!(t.kill.pre_stop.as_ref().unwrap().outcome, HookOutcome::Cut);
    let ev = rt.stop_events(&t.container_id);
    let sig = at(&ev, evicted, signal_sent).expect("SIGTERM");
    let kill = at(&ev, evicted, kill_sent).expect("SIGKILL");
    assert!(near(sig, Duration::from_secs(1)), "SIGTERM at {sig:?}");
    assert!(near(kill, Duration::from_secs(3)), "SIGKILL at {kill:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_liveness_kill_uses_the_probe_grace_period_and_restarts_the_container() {
    if !need_namespaces("a_liveness_kill") {
        return;
    }
    // The probe always fails: after one failure the kubelet kills the container with the
    // probe's own terminationGracePeriodSeconds (2 s), not the pod's 30 s, then restarts it.
    let run = start("apiVersion: v1\nkind: Pod\nmetadata: {name: live}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1000\"]\n    livenessProbe:\n      exec: {command: [\"false\"]}\n      periodSeconds: 1\n      failureThreshold: 1\n      terminationGracePeriodSeconds: 2\n");
    // Wait for the restart (a second Started event): the report then holds the liveness kill.
    let mut live = run.events.subscribe();
    let restarted = tokio::time::timeout(Duration::from_secs(15), async {
        let mut started = 0;
        while let Some(e) = live.recv().await {
            if e.reason == "Started" {
                started += 1;
                if started == 2 {
                    return true;
                }
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(
        restarted,
        "the container was restarted after its liveness kill"
    );
    run.pod.send(PodCommand::Delete(KubectlDeleteFlags {
        grace_period: 1,
        ..Default::default()
    }));
    let (rt, report) = run.finish().await;
    let app = &report.containers[0];
    assert!(app.restarts >= 1);
    let live = app
        .terminations
        .iter()
        .find(|t| t.reason == podgrace_node::kubelet::TerminationReason::LivenessProbe)
        .expect("a liveness termination");
    assert_eq!(live.kill.grace_period_seconds, 2);
    assert_eq!(live.kill.stop_timeout_seconds, 2);
    let ev = rt.stop_events(&live.container_id);
    let sig = at(&ev, live.kill.started, signal_sent).expect("SIGTERM");
    let kill = at(&ev, live.kill.started, kill_sent).expect("SIGKILL");
    assert!(
        near(kill - sig, Duration::from_secs(2)),
        "SIGKILL {kill:?} after SIGTERM {sig:?}"
    );
    assert!(report.events.iter().any(|e| e.reason == "Killing"
        && e.message == "Container app failed liveness probe, will be restarted"));
    assert!(report.events.iter().any(|e| e.reason == "Unhealthy"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_to_completion_then_sidecars_then_mains_in_order() {
    if !need_namespaces("init_order") {
        return;
    }
    let run = start("apiVersion: v1\nkind: Pod\nmetadata: {name: order}\nspec:\n  terminationGracePeriodSeconds: 2\n  initContainers:\n  - name: setup\n    image: busybox\n    command: [sleep, \"0.5\"]\n  - name: proxy\n    image: envoy\n    restartPolicy: Always\n    command: [sleep, \"1000\"]\n  - name: migrate\n    image: busybox\n    command: [sleep, \"0.3\"]\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1000\"]\n");
    run.running().await;
    let started: Vec<(String, Instant)> = run
        .events
        .events()
        .into_iter()
        .filter(|e| e.reason == "Started")
        .map(|e| (e.container.unwrap_or_default(), e.at))
        .collect();
    let names: Vec<&str> = started.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["setup", "proxy", "migrate", "app"]);
    // Each regular init container ran to completion before the next container started.
    let gap = |a: usize, b: usize| started[b].1.duration_since(started[a].1);
    assert!(
        gap(0, 1) >= Duration::from_millis(450),
        "setup ran {:?}",
        gap(0, 1)
    );
    assert!(
        gap(2, 3) >= Duration::from_millis(250),
        "migrate ran {:?}",
        gap(2, 3)
    );
    run.pod.send(PodCommand::Delete(KubectlDeleteFlags {
        grace_period: 1,
        ..Default::default()
    }));
    let (_, report) = run.finish().await;
    // Only the running containers are terminated: the native sidecar and the app.
    let terminated: Vec<&str> = report
        .containers
        .iter()
        .filter(|c| !c.terminations.is_empty())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(terminated, ["proxy", "app"]);
}

/// The process runtime with its `StartContainer` held open: the call starts the process, says
/// so, then returns only once the test lets it (the window in which a delete reaches a pod
/// between its container's `Created` and `Started`).
struct HeldStart {
    inner: ProcessRuntime,
    in_start: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

impl RuntimeService for HeldStart {
    async fn run_pod_sandbox(
        &self,
        ctx: &CallContext,
        config: PodSandboxConfig,
    ) -> Result<String, RuntimeError> {
        self.inner.run_pod_sandbox(ctx, config).await
    }
    async fn stop_pod_sandbox(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        self.inner.stop_pod_sandbox(ctx, id).await
    }
    async fn remove_pod_sandbox(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        self.inner.remove_pod_sandbox(ctx, id).await
    }
    async fn create_container(
        &self,
        ctx: &CallContext,
        sandbox: &str,
        config: ContainerConfig,
    ) -> Result<String, RuntimeError> {
        self.inner.create_container(ctx, sandbox, config).await
    }
    async fn start_container(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        self.inner.start_container(ctx, id).await?;
        self.in_start.notify_one();
        self.release.notified().await;
        Ok(())
    }
    async fn stop_container(
        &self,
        ctx: &CallContext,
        id: &str,
        timeout_seconds: i64,
    ) -> Result<(), RuntimeError> {
        self.inner.stop_container(ctx, id, timeout_seconds).await
    }
    async fn exec_sync(
        &self,
        ctx: &CallContext,
        id: &str,
        cmd: Vec<String>,
        timeout_seconds: i64,
    ) -> Result<ExecSyncResponse, RuntimeError> {
        self.inner.exec_sync(ctx, id, cmd, timeout_seconds).await
    }
    async fn pod_sandbox_status(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> Result<PodSandboxStatus, RuntimeError> {
        self.inner.pod_sandbox_status(ctx, id).await
    }
    fn container_events(
        &self,
        sandbox: &str,
    ) -> Option<tokio::sync::broadcast::Receiver<ContainerEvent>> {
        self.inner.container_events(sandbox)
    }
    async fn container_status(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> Result<ContainerStatus, RuntimeError> {
        self.inner.container_status(ctx, id).await
    }
    async fn remove_container(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        self.inner.remove_container(ctx, id).await
    }
}

/// Issue 11's bug: a delete that reached the pod while its container's StartContainer was in
/// flight cancelled the start, and the container died at once by SIGKILL without its SIGTERM
/// or its grace, reported as never terminated. The kubelet's pod worker takes the termination
/// only once SyncPod (and its StartContainer) returned, then stops the started container with
/// its grace: SIGTERM at once (`sleep` as PID 1 ignores it), SIGKILL 2 s later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_during_start_container_stops_the_started_container_with_its_grace() {
    if !need_namespaces("a_delete_during_start_container") {
        return;
    }
    let (inner, _output) = ProcessRuntime::new(NetworkConfig::default());
    let runtime = Arc::new(HeldStart {
        inner,
        in_start: tokio::sync::Notify::new(),
        release: tokio::sync::Notify::new(),
    });
    let events = EventRecorder::new();
    let pod = run_pod(
        runtime.clone(),
        plan("apiVersion: v1\nkind: Pod\nmetadata: {name: mid-start}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1000\"]\n"),
        PodOptions::default(),
        events.clone(),
    );
    tokio::time::timeout(Duration::from_secs(10), runtime.in_start.notified())
        .await
        .expect("StartContainer called within 10 s");
    let deleted = Instant::now();
    pod.send(PodCommand::Delete(KubectlDeleteFlags::default()));
    // The pod task has taken the delete (its status says Terminating) before the call returns.
    let mut st = pod.status();
    tokio::time::timeout(
        Duration::from_secs(10),
        st.wait_for(|s| s.phase == PodWorkerState::Terminating),
    )
    .await
    .expect("terminating within 10 s")
    .expect("status");
    runtime.release.notify_one();
    let report = tokio::time::timeout(Duration::from_secs(60), pod.wait())
        .await
        .expect("pod ended within 60 s")
        .expect("pod report");
    let app = &report.containers[0];
    assert!(
        report
            .events
            .iter()
            .any(|e| e.reason == "Started" && e.container.as_deref() == Some("app")),
        "{:?}",
        report.events
    );
    assert_eq!(app.terminations.len(), 1, "{app:?}");
    let t = &app.terminations[0];
    assert_eq!(t.kill.grace_period_seconds, 2);
    let ev = runtime.inner.stop_events(&t.container_id);
    let sig = at(&ev, deleted, signal_sent).expect("SIGTERM sent");
    let kill = at(&ev, deleted, kill_sent).expect("SIGKILL sent");
    assert!(near(sig, Duration::ZERO), "SIGTERM at {sig:?}");
    assert!(near(kill, Duration::from_secs(2)), "SIGKILL at {kill:?}");
    assert_eq!(exit_status(&ev), Some(ExitStatus::Signal(9)));
}
