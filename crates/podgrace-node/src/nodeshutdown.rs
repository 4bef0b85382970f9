//! The kubelet's graceful node shutdown on this node: the active pods grouped by priority
//! (`shutdownGracePeriodByPodPriority`, or the two groups `shutdownGracePeriod` and
//! `shutdownGracePeriodCriticalPods` make), each group killed together, lowest priority
//! first, every pod with the override `min(group period, TGPS)` and the status function
//! `Failed` (unless it had `Succeeded`), reason `Terminated`, "Pod was terminated in response
//! to imminent node shutdown." and the `DisruptionTarget` condition; the next group starts
//! when every pod of this one is killed or the group's period has passed, whichever is
//! first. The decisions are podgrace-core's ([`podgrace_core::rules::nodeshutdown`]).
//!
//! What starts it is the caller's: systemd-logind's `PrepareForShutdown` on a real node;
//! SIGTERM to `podgrace serve` or `podgrace node shutdown` here.
//!
//! Upstream: `pkg/kubelet/nodeshutdown/nodeshutdown_manager.go` (`podManager.killPods`,
//! `groupByPriority`, `migrateConfig`), `nodeshutdown_manager_linux.go`
//! (`processShutdownEvent`, the `NodeShutdown` event), Kubernetes 1.24 to 1.36
//! (`GracefulNodeShutdownBasedOnPodPriority`).

use std::time::Instant;

use podgrace_core::rules::nodeshutdown::{
    group_by_priority, pod_grace_period_override, ShutdownGracePeriodByPodPriority,
    SHUTDOWN_MESSAGE, SHUTDOWN_REASON,
};

use crate::kubelet::active::{ActivePod, ActivePods};
use crate::kubelet::{KillPodNow, KillStatus, PodCommand, PodWorkerState};

/// The Event the kubelet records on its Node when logind announces the shutdown.
pub const SHUTDOWN_EVENT_MESSAGE: &str = "Shutdown manager detected shutdown event";
/// The Ready condition's message while the node shuts down (`ShutdownStatus`'s error).
pub const NODE_SHUTTING_DOWN: &str = "node is shutting down";
/// `NodeShutdownNotAdmittedReason`: a pod that arrives during the shutdown is rejected.
pub const NOT_ADMITTED_REASON: &str = "NodeShutdown";
/// `nodeShutdownNotAdmittedMessage`.
pub const NOT_ADMITTED_MESSAGE: &str = "Pod was rejected as the node is shutting down.";

/// One pod the shutdown killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownRecord {
    /// `namespace/name`.
    pub pod: String,
    /// The lowest priority of its group.
    pub group_priority: i32,
    /// Its grace-period override, seconds.
    pub grace_period_override: i64,
    /// When its kill was handed to the pod worker.
    pub sent_at: Instant,
    /// When the pod worker had killed it (`None`: not within the group's period).
    pub killed_at: Option<Instant>,
}

/// The status function of a pod killed by the node shutdown.
pub fn shutdown_kill(grace_period_override: i64) -> KillPodNow {
    KillPodNow {
        grace_period_override,
        evict: false,
        status: KillStatus {
            reason: SHUTDOWN_REASON.into(),
            message: SHUTDOWN_MESSAGE.into(),
        },
        event: None,
    }
}

/// `podManager.killPods`: kills the active pods group by group and returns what it did, in
/// the order the kills were sent. Returns once the last group is done or its period has
/// passed.
pub async fn kill_pods(
    pods: &ActivePods,
    groups: &[ShutdownGracePeriodByPodPriority],
) -> Vec<ShutdownRecord> {
    let active: Vec<(ActivePod, Option<i32>)> = pods
        .list()
        .into_iter()
        .map(|p| {
            let prio = p.plan.effective_priority();
            (p, prio)
        })
        .collect();
    let Ok(grouped) = group_by_priority(groups, &active) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for g in grouped {
        if g.pods.is_empty() {
            continue;
        }
        let period = g.group.shutdown_grace_period_seconds;
        let mut waits = tokio::task::JoinSet::new();
        for pod in &g.pods {
            let o =
                pod_grace_period_override(period, Some(pod.plan.termination_grace_period_seconds));
            let mut status = pod.status();
            let sent = pod.send(PodCommand::KillPodNow(shutdown_kill(o)));
            let i = out.len();
            out.push(ShutdownRecord {
                pod: pod.display(),
                group_priority: g.group.priority,
                grace_period_override: o,
                sent_at: Instant::now(),
                killed_at: None,
            });
            tracing::info!(pod = %pod.display(), grace = o, "Shutdown manager killing pod with gracePeriod");
            if sent {
                waits.spawn(async move {
                    let _ = status
                        .wait_for(|s| s.phase == PodWorkerState::Terminated)
                        .await;
                    (i, Instant::now())
                });
            }
        }
        let deadline = tokio::time::Instant::now() + crate::runtime::timeout_after(period);
        loop {
            tokio::select! {
                done = waits.join_next() => match done {
                    Some(Ok((i, at))) => out[i].killed_at = Some(at),
                    Some(Err(_)) => {}
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => {
                    tracing::info!(priority = g.group.priority, "Shutdown manager pod killing time out");
                    break;
                }
            }
        }
        // The group's kills go on past its period, as upstream's goroutines do.
        waits.detach_all();
    }
    out
}
