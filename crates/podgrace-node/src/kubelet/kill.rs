//! `killContainer` with real timers: the Killing event, the preStop hook bounded by the budget,
//! the sidecar's wait for its turn, then StopContainer with the remainder (at least 2 s).
//!
//! The arithmetic is the core's [`KillContainer`]; this module only measures real elapsed
//! times and feeds them in, so `explain` and `run` cannot disagree.
//!
//! Upstream: `pkg/kubelet/kuberuntime/kuberuntime_container.go` `killContainer` and
//! `executePreStopHook` (Kubernetes 1.28+ order; older orders through [`KillContainer`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use podgrace_core::plan::{ContainerPlan, Handler};
use podgrace_core::rules::kuberuntime::KillContainer;
use podgrace_core::KubeVersion;

use crate::events::{message, reason, EventRecorder};
use crate::hooks::{run_handler, HookTarget};
use crate::kubelet::ordering::TerminationOrdering;
use crate::runtime::{CallContext, RuntimeError, RuntimeService};

/// How a preStop hook ended, as the run report says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookOutcome {
    /// It returned success within its budget.
    Completed,
    /// It returned an error within its budget (`FailedPreStopHook`).
    Failed,
    /// The budget ran out first; the kubelet stopped waiting (the hook is not cancelled).
    Cut,
}

impl HookOutcome {
    /// `completed`, `failed` or `cut` (the run JSON contract).
    pub fn as_str(self) -> &'static str {
        match self {
            HookOutcome::Completed => "completed",
            HookOutcome::Failed => "failed",
            HookOutcome::Cut => "cut",
        }
    }
}

/// What happened to the preStop hook of one kill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRecord {
    /// The handler's kind: `exec`, `httpGet`, `sleep` or `tcpSocket`.
    pub action: &'static str,
    /// When the hook was started (monotonic).
    pub started: Instant,
    /// When the kubelet stopped waiting (the hook's end, or the budget).
    pub ended: Instant,
    /// Completed, failed or cut by its budget.
    pub outcome: HookOutcome,
    /// Why it failed, in a few words ([`crate::hooks::HookError::why`]: `exited with 3`, `/bin/x
    /// is not in the container`, `connection refused`), or what an httpGet hook got back
    /// (`HTTP 503`, which the kubelet counts as success); `None` otherwise.
    pub detail: Option<String>,
}

/// The record of one `killContainer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillRecord {
    /// When `killContainer` began (monotonic).
    pub started: Instant,
    /// The grace the kill started with (after the override), seconds.
    pub grace_period_seconds: i64,
    /// The preStop hook's run, when the container has one.
    pub pre_stop: Option<HookRecord>,
    /// Time waited for the container's turn (sidecars).
    pub waited_for_turn: Duration,
    /// The StopContainer timeout handed to the runtime, seconds.
    pub stop_timeout_seconds: i64,
    /// When StopContainer was called.
    pub stop_called: Instant,
}

/// One container to kill.
pub struct KillTarget<'a> {
    /// The container's plan (its preStop, stop signal, role).
    pub container: &'a ContainerPlan,
    /// Runtime container id.
    pub id: &'a str,
    /// Base grace from `setTerminationGracePeriod`, seconds.
    pub base_grace: i64,
    /// `gracePeriodOverride`, seconds.
    pub override_seconds: Option<i64>,
    /// The Killing event's message (`Stopping container NAME` unless a probe kill).
    pub message: String,
    /// What its preStop hook needs: the pod, the container id, the pod IP, the ports.
    pub hook: HookTarget<'a>,
}

/// Hooks the kubelet stopped waiting for (their budget ran out) that still run: each records
/// `FailedPreStopHook` if it fails later, as `executePreStopHook`'s goroutine does (recorded on
/// 1.32, case b: the hook cut at 1 s failed with exit 137 when the container was SIGKILLed at
/// 3.1 s, and the event came then, after the force-deleted object was gone). Cheap to clone;
/// the pod task waits for them before it reports.
#[derive(Clone, Default)]
pub struct LateHooks(Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>);

impl LateHooks {
    fn push(&self, h: tokio::task::JoinHandle<()>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(h);
    }

    /// Waits up to `bound` for every late hook to end; the ones still running then are left
    /// (they end with the sandbox).
    pub async fn wait(&self, bound: Duration) {
        let handles: Vec<_> =
            std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        let all = join_each(handles);
        let _ = tokio::time::timeout(bound, all).await;
    }
}

async fn join_each(handles: Vec<tokio::task::JoinHandle<()>>) {
    for h in handles {
        let _ = h.await;
    }
}

/// Kills one container like `killContainer`. `ctx` is the kill's context: the kubelet's
/// `SyncTerminatingPod` kills on a context nothing cancels (see
/// `podgrace_core::rules::podworker::later_update_in_flight`), so callers pass one that only
/// ends with the pod; a probe kill's is cancelled when the pod terminates.
///
/// Returns the record of what was done, with the runtime's StopContainer result.
pub async fn kill_container<R: RuntimeService + 'static>(
    runtime: &Arc<R>,
    ctx: &CallContext,
    target: KillTarget<'_>,
    ordering: Option<&TerminationOrdering>,
    version: KubeVersion,
    events: &EventRecorder,
    late: &LateHooks,
) -> (KillRecord, Result<(), RuntimeError>) {
    let started = Instant::now();
    let name = &target.container.name;
    events.normal(reason::KILLING, Some(name), target.message.clone());
    let mut kill = KillContainer::new(target.base_grace, target.override_seconds, version);
    let grace_period_seconds = kill.grace();
    let mut pre_stop = None;
    if let (Some(budget), Some(handler)) = (
        kill.pre_stop_budget(target.container.pre_stop.is_some()),
        target.container.pre_stop.as_ref(),
    ) {
        let record = run_pre_stop(runtime, ctx, &target, handler, budget, events, late).await;
        kill.pre_stop_finished(millis(record.ended - record.started));
        pre_stop = Some(record);
    }
    let mut waited_for_turn = Duration::ZERO;
    if let Some(o) = ordering {
        waited_for_turn = o.wait_for_turn(name, kill.turn_budget()).await;
        kill.turn_finished(millis(waited_for_turn));
    }
    let stop_timeout_seconds = kill.stop_timeout();
    let stop_called = Instant::now();
    let result = runtime
        .stop_container(ctx, target.id, stop_timeout_seconds)
        .await;
    if let Some(o) = ordering {
        o.container_terminated(name);
    }
    let record = KillRecord {
        started,
        grace_period_seconds,
        pre_stop,
        waited_for_turn,
        stop_timeout_seconds,
        stop_called,
    };
    (record, result)
}

/// `executePreStopHook`: runs the hook in its own task and waits for it or for `budget` seconds,
/// whichever comes first. At the budget the kubelet stops waiting but does not cancel the hook:
/// it goes on (in `late`) and still records `FailedPreStopHook` if it fails.
async fn run_pre_stop<R: RuntimeService + 'static>(
    runtime: &Arc<R>,
    ctx: &CallContext,
    target: &KillTarget<'_>,
    handler: &Handler,
    budget: i64,
    events: &EventRecorder,
    late: &LateHooks,
) -> HookRecord {
    let started = Instant::now();
    let task = {
        let runtime = runtime.clone();
        let ctx = ctx.clone();
        let handler = handler.clone();
        let pod = target.hook.pod.to_string();
        let container = target.hook.container.to_string();
        let container_id = target.hook.container_id.to_string();
        let pod_ip = target.hook.pod_ip;
        let ports = target.hook.ports.to_vec();
        let events = events.clone();
        tokio::spawn(async move {
            let hook = HookTarget {
                pod: &pod,
                container: &container,
                container_id: &container_id,
                pod_ip,
                ports: &ports,
                events: Some(&events),
            };
            run_handler(runtime.as_ref(), &ctx, &hook, &handler).await
        })
    };
    let bound = Duration::from_secs(u64::try_from(budget).unwrap_or(u64::MAX));
    let failed = |e: &dyn std::fmt::Display, events: &EventRecorder, name: &str| {
        // The FailedPreStopHook event says it; the error's detail is for the debug log.
        tracing::debug!(container = %name, error = %e, "preStop hook failed");
        events.warning(
            reason::FAILED_PRE_STOP_HOOK,
            Some(name),
            message::FAILED_PRE_STOP_HOOK.to_string(),
        );
    };
    let mut detail = None;
    let mut task = task;
    let outcome = match tokio::time::timeout(bound, &mut task).await {
        Ok(Ok(Ok(done))) => {
            // Any status is success for the kubelet (runHTTPHandler); one outside 2xx is worth
            // saying.
            detail = done
                .http_status
                .filter(|s| !(200..300).contains(s))
                .map(|s| format!("HTTP {s}, which the kubelet counts as success"));
            HookOutcome::Completed
        }
        Ok(Ok(Err(e))) => {
            failed(&e, events, &target.container.name);
            detail = Some(e.why());
            HookOutcome::Failed
        }
        // The hook task panicked: count it as a failed hook.
        Ok(Err(_)) => HookOutcome::Failed,
        Err(_) => {
            let (events, name) = (events.clone(), target.container.name.clone());
            late.push(tokio::spawn(async move {
                if let Ok(Err(e)) = task.await {
                    failed(&e, &events, &name);
                }
            }));
            HookOutcome::Cut
        }
    };
    HookRecord {
        action: handler.action(),
        started,
        ended: Instant::now(),
        outcome,
        detail,
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
