//! The field cases on both runtimes at once: the same manifest (busybox commands; only the
//! image reference differs) runs on the process runtime and on a real containerd side by side,
//! and the instants each runtime measured from the delete (the stop signal, the death) must
//! agree within ±150 ms. Where they cannot, because of what containerd itself does, the test
//! says so and bounds the difference by what containerd 1.6 was recorded doing
//! (`rules::latency::CONTAINERD_1_6`). The figures are printed (`--nocapture`) for the README.
//! Needs root (PID namespaces for the process runtime) and `.ci/containerd.sh start` (CI runs
//! both).

mod common;
mod containerd_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::need_namespaces;
use containerd_support::{socket, BUSYBOX, BUSYBOX_QUIT};
use podgrace_core::manifest;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_core::rules::runtime::Signal;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{
    run_pod, PodCommand, PodOptions, PodReport, PodWorkerState, TerminationReason,
};
use podgrace_node::process::ExitStatus;
use podgrace_node::runtime::{
    CallContext, ContainerdRuntime, ProcessRuntime, RuntimeService, StopEvent, StopEventKind,
};
use podgrace_node::sandbox::NetworkConfig;

const TOLERANCE: Duration = Duration::from_millis(150);

/// What is done to the running pod.
#[derive(Clone, Copy)]
enum Action {
    /// `kubectl delete pod` once it is Running and ready.
    Delete,
    /// Wait for the liveness kill's restart (a second `Started`), then delete with grace 1.
    LivenessRestart,
}

/// One runtime's run of a case.
struct Outcome {
    deleted: Instant,
    report: PodReport,
    /// Each killed container instance's stop events, by runtime id.
    stops: HashMap<String, Vec<StopEvent>>,
}

impl Outcome {
    fn termination(
        &self,
        container: &str,
        reason: TerminationReason,
    ) -> &podgrace_node::kubelet::Termination {
        self.report
            .containers
            .iter()
            .find(|c| c.name == container)
            .unwrap_or_else(|| panic!("no container {container}"))
            .terminations
            .iter()
            .find(|t| t.reason == reason)
            .unwrap_or_else(|| panic!("{container}: no {reason:?} termination"))
    }

    fn events(&self, container: &str, reason: TerminationReason) -> &[StopEvent] {
        let t = self.termination(container, reason);
        self.stops
            .get(&t.container_id)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// When `pick` first happened to `container`, from `from`.
    fn at(
        &self,
        container: &str,
        reason: TerminationReason,
        from: Instant,
        pick: impl Fn(&StopEventKind) -> bool,
    ) -> Duration {
        self.events(container, reason)
            .iter()
            .find(|e| pick(&e.kind))
            .map(|e| e.at.saturating_duration_since(from))
            .unwrap_or_else(|| {
                panic!(
                    "{container}: no such event in {:?}",
                    self.events(container, reason)
                )
            })
    }

    fn death(&self, container: &str) -> Duration {
        self.at(container, TerminationReason::Deleted, self.deleted, |k| {
            matches!(k, StopEventKind::Exited { .. })
        })
    }

    fn signal(&self, container: &str) -> Duration {
        self.at(container, TerminationReason::Deleted, self.deleted, |k| {
            matches!(k, StopEventKind::StopSignalSent { .. })
        })
    }

    /// The preStop hook as the kubelet saw it: (its start, its end), from the delete.
    fn hook(&self, container: &str) -> (Duration, Duration) {
        let h = self
            .termination(container, TerminationReason::Deleted)
            .kill
            .pre_stop
            .clone()
            .expect("a preStop record");
        (
            h.started.saturating_duration_since(self.deleted),
            h.ended.saturating_duration_since(self.deleted),
        )
    }

    fn exit_status(&self, container: &str, reason: TerminationReason) -> ExitStatus {
        self.events(container, reason)
            .iter()
            .find_map(|e| match e.kind {
                StopEventKind::Exited { status } => Some(status),
                _ => None,
            })
            .expect("an exit")
    }
}

async fn run_on<R: RuntimeService + 'static>(
    rt: Arc<R>,
    yaml: &str,
    action: Action,
    stop_events: impl Fn(&R, &str) -> Vec<StopEvent>,
) -> Outcome {
    let m = manifest::load(yaml, "case.yaml").unwrap_or_else(|e| panic!("{e}"));
    let events = EventRecorder::new();
    let mut live = events.subscribe();
    let pod = run_pod(
        Arc::clone(&rt),
        m.pods().next().expect("a pod").clone(),
        PodOptions::default(),
        events,
    );
    let flags = match action {
        Action::Delete => {
            let mut st = pod.status();
            tokio::time::timeout(
                Duration::from_secs(60),
                st.wait_for(|s| s.phase == PodWorkerState::Running && s.ready),
            )
            .await
            .expect("running and ready within 60 s")
            .expect("status");
            KubectlDeleteFlags::default()
        }
        Action::LivenessRestart => {
            let restarted = tokio::time::timeout(Duration::from_secs(30), async {
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
            assert!(restarted, "restarted after the liveness kill");
            KubectlDeleteFlags {
                grace_period: 1,
                ..Default::default()
            }
        }
    };
    let deleted = Instant::now();
    pod.send(PodCommand::Delete(flags));
    let report = tokio::time::timeout(Duration::from_secs(90), pod.wait())
        .await
        .expect("ended within 90 s")
        .expect("report");
    let stops = report
        .containers
        .iter()
        .flat_map(|c| &c.terminations)
        .map(|t| (t.container_id.clone(), stop_events(&rt, &t.container_id)))
        .collect();
    if let Some(sb) = &report.sandbox {
        rt.remove_pod_sandbox(&CallContext::background(), sb)
            .await
            .expect("remove the sandbox");
    }
    Outcome {
        deleted,
        report,
        stops,
    }
}

/// Runs `yaml` (with `{IMAGE}` for the image and `{NGINX}` for an image whose STOPSIGNAL is
/// SIGQUIT) on both runtimes at once: (process, containerd), or `None` when skipped.
async fn both(case: &str, yaml: &str, action: Action) -> Option<(Outcome, Outcome)> {
    if !need_namespaces(case) {
        return None;
    }
    let sock = socket(case)?;
    let logs = std::env::temp_dir().join(format!("podgrace-vs-{}-{case}", std::process::id()));
    let (cd, mut out) = ContainerdRuntime::connect(&sock, &logs)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    tokio::spawn(async move { while out.recv().await.is_some() {} });
    let (pr, _output) = ProcessRuntime::new(NetworkConfig::default());
    // The known-images table gives nginx SIGQUIT on the process runtime; containerd reads it
    // from BUSYBOX_QUIT's config.
    let on_process = yaml
        .replace("{IMAGE}", "busybox")
        .replace("{NGINX}", "nginx:1.27");
    let on_containerd = yaml
        .replace("{IMAGE}", BUSYBOX)
        .replace("{NGINX}", BUSYBOX_QUIT);
    let (p, c) = tokio::join!(
        run_on(Arc::new(pr), &on_process, action, |r, id| r.stop_events(id)),
        run_on(Arc::new(cd), &on_containerd, action, |r, id| r
            .stop_events(id)),
    );
    Some((p, c))
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// Asserts that the two runtimes' `what` agree within the tolerance, and prints both.
fn agree(case: &str, what: &str, process: Duration, containerd: Duration) {
    eprintln!(
        "{case}: {what}: process {} ms, containerd {} ms",
        ms(process),
        ms(containerd)
    );
    let diff = process.abs_diff(containerd);
    assert!(
        diff <= TOLERANCE,
        "{case}: {what}: process {process:?}, containerd {containerd:?}: {diff:?} apart"
    );
}

/// An exec hook on containerd is an ExecSync: runc starts the command inside the container
/// through the shim, which costs more than a fork on the host (not in the 1.32 record; 30 to
/// 300 ms more here, on a loaded machine). The kubelet's own step after the hook, the stop
/// signal, must agree within the tolerance from the hook's end; the hook's length may differ
/// by the exec's set-up, at most this much.
const EXEC_SET_UP: Duration = Duration::from_millis(500);

/// Compares the exec preStop hooks of `container` and what follows them.
fn agree_after_exec_hook(case: &str, p: &Outcome, c: &Outcome, container: &str) {
    let ((ps, pe), (cs, ce)) = (p.hook(container), c.hook(container));
    agree(case, "hook start", ps, cs);
    eprintln!(
        "{case}: exec hook length: process {} ms, containerd {} ms",
        ms(pe - ps),
        ms(ce - cs)
    );
    assert!(
        (ce - cs) <= (pe - ps) + EXEC_SET_UP,
        "{case}: the hook took {:?} on containerd, {:?} on the process runtime",
        ce - cs,
        pe - ps
    );
    agree(
        case,
        "stop signal after the hook's end",
        p.signal(container).saturating_sub(pe),
        c.signal(container).saturating_sub(ce),
    );
    agree(
        case,
        "death after the stop signal",
        p.death(container).saturating_sub(p.signal(container)),
        c.death(container).saturating_sub(c.signal(container)),
    );
}

/// A busybox shell that handles SIGTERM with `on_term` and is ready only once its trap is
/// installed (a readiness probe looks for the file it writes right after `trap`).
fn trapping(name: &str, image: &str, signal: &str, on_term: &str, extra: &str) -> String {
    static MARKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let marker = format!(
        "/tmp/podgrace-vs-{}-{name}-{}",
        std::process::id(),
        MARKERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    format!(
        "  - name: {name}\n    image: {image}\n    command: [sh, -c, \"trap '{on_term}' {signal}; touch {marker}; while :; do sleep 0.05; done\"]\n    readinessProbe:\n      exec: {{command: [test, -e, {marker}]}}\n      periodSeconds: 1\n{extra}"
    )
}

fn pod(name: &str, grace: u32, init: &str, containers: &str) -> String {
    let init = if init.is_empty() {
        String::new()
    } else {
        format!("  initContainers:\n{init}")
    };
    format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: {grace}\n{init}  containers:\n{containers}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r01_both_runtimes_sigkill_pid_1_at_the_deadline() {
    let yaml = pod(
        "r01",
        2,
        "",
        "  - name: app\n    image: {IMAGE}\n    command: [sleep, \"1000\"]\n",
    );
    let Some((p, c)) = both("r01", &yaml, Action::Delete).await else {
        return;
    };
    for o in [&p, &c] {
        assert_eq!(
            o.exit_status("app", TerminationReason::Deleted),
            ExitStatus::Signal(9)
        );
    }
    agree("r01", "death", p.death("app"), c.death("app"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_pre_stop_delays_the_stop_signal_alike() {
    let yaml = pod(
        "exec",
        10,
        "",
        &trapping(
            "app",
            "{IMAGE}",
            "TERM",
            "exit 0",
            "    lifecycle:\n      preStop:\n        exec: {command: [sleep, \"1\"]}\n",
        ),
    );
    let Some((p, c)) = both("exec", &yaml, Action::Delete).await else {
        return;
    };
    agree_after_exec_hook("exec preStop", &p, &c, "app");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_hook_binary_fails_the_hook_alike() {
    let yaml = pod(
        "nohook",
        10,
        "",
        &trapping(
            "app",
            "{IMAGE}",
            "TERM",
            "exit 0",
            "    lifecycle:\n      preStop:\n        exec: {command: [/no/such/binary]}\n",
        ),
    );
    let Some((p, c)) = both("nohook", &yaml, Action::Delete).await else {
        return;
    };
    for o in [&p, &c] {
        assert!(o
            .report
            .events
            .iter()
            .any(|e| e.reason == "FailedPreStopHook"));
    }
    agree_after_exec_hook("missing hook", &p, &c, "app");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r09_a_hook_cut_at_the_grace_alike() {
    let yaml = pod(
        "r09",
        2,
        "",
        &trapping(
            "app",
            "{IMAGE}",
            "TERM",
            "",
            "    lifecycle:\n      preStop:\n        exec: {command: [sleep, \"30\"]}\n",
        ),
    );
    let Some((p, c)) = both("r09", &yaml, Action::Delete).await else {
        return;
    };
    agree("r09", "stop signal", p.signal("app"), c.signal("app"));
    agree("r09", "death (SIGKILL)", p.death("app"), c.death("app"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_signal_of_nginx_s_image_alike() {
    let yaml = pod(
        "nginx",
        10,
        "",
        &trapping("app", "{NGINX}", "QUIT", "exit 0", ""),
    );
    let Some((p, c)) = both("nginx", &yaml, Action::Delete).await else {
        return;
    };
    for (runtime, o) in [("process", &p), ("containerd", &c)] {
        let t = o.termination("app", TerminationReason::Deleted);
        assert_eq!(t.stop_signal, Signal::SIGQUIT, "{runtime}");
        // Seen failing now and then with SIGKILL at the deadline (not yet diagnosed): the
        // message names the runtime and the stop events, for whoever looks next.
        assert_eq!(
            o.exit_status("app", TerminationReason::Deleted),
            ExitStatus::Code(0),
            "{runtime}: {t:?}; stop events {:?}",
            o.stops
        );
    }
    agree("nginx", "death", p.death("app"), c.death("app"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_liveness_kill_uses_the_probe_grace_alike() {
    let yaml = pod("live", 30, "", "  - name: app\n    image: {IMAGE}\n    command: [sleep, \"1000\"]\n    livenessProbe:\n      exec: {command: [\"false\"]}\n      periodSeconds: 1\n      failureThreshold: 1\n      terminationGracePeriodSeconds: 2\n");
    let Some((p, c)) = both("live", &yaml, Action::LivenessRestart).await else {
        return;
    };
    let kill_to_death = |o: &Outcome| {
        let t = o.termination("app", TerminationReason::LivenessProbe);
        assert_eq!(t.kill.stop_timeout_seconds, 2);
        o.at(
            "app",
            TerminationReason::LivenessProbe,
            t.kill.started,
            |k| matches!(k, StopEventKind::Exited { .. }),
        )
    };
    agree(
        "liveness",
        "kill to death",
        kill_to_death(&p),
        kill_to_death(&c),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecar_order_alike_but_for_containerd_s_stop_container_return() {
    let yaml = pod(
        "sidecar",
        10,
        &trapping(
            "proxy",
            "{IMAGE}",
            "TERM",
            "exit 0",
            "    restartPolicy: Always\n",
        ),
        &trapping("app", "{IMAGE}", "TERM", "sleep 1; exit 0", ""),
    );
    let Some((p, c)) = both("sidecar", &yaml, Action::Delete).await else {
        return;
    };
    agree("sidecar", "app death", p.death("app"), c.death("app"));
    // The kubelet stops the sidecar once StopContainer of the app returned. The process
    // runtime returns at the death; containerd some time after it (38 ms to 2.9 s on 1.6, as
    // recorded): a difference of the runtime, bounded by the record, not by the tolerance.
    let lag = |o: &Outcome| o.signal("proxy").saturating_sub(o.death("app"));
    let (pl, cl) = (lag(&p), lag(&c));
    eprintln!(
        "sidecar: proxy's stop signal after the app's death: process {} ms, containerd {} ms",
        ms(pl),
        ms(cl)
    );
    assert!(pl <= TOLERANCE, "process runtime: {pl:?}");
    let recorded = &podgrace_core::rules::latency::CONTAINERD_1_6
        .stop_returns_after_exit
        .range;
    let most = Duration::from_millis(u64::try_from(recorded.max_ms).unwrap()) + TOLERANCE;
    assert!(cl <= most, "containerd: {cl:?} (recorded at most {most:?})");
    for o in [&p, &c] {
        assert_eq!(
            o.termination("proxy", TerminationReason::Deleted)
                .kill
                .stop_timeout_seconds,
            9
        );
    }
}
