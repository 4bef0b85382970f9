//! Terminating the pod: a delete through kubectl's flags and the API server, an eviction,
//! the pod worker's update, the kills of every container in the termination ordering.
//!
//! Upstream: `pkg/kubelet/pod_workers.go` (`UpdatePod`), `kubelet.go` (`SyncTerminatingPod`),
//! `kuberuntime_container.go` (`killContainersWithSyncResult`), `eviction_manager.go`
//! (`killPodNow`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use podgrace_core::plan::{ContainerPlan, ContainerRole};
use podgrace_core::rules::apiserver::{self, KubectlDeleteError};
use podgrace_core::rules::eviction;
use podgrace_core::rules::kuberuntime::{self, GraceFields, KillReason, OrderedContainer};
use podgrace_core::rules::podworker::{
    self, InFlightEffect, KillPodOptions, LaterUpdate, PodUpdate, UpdateType,
};
use podgrace_core::rules::runtime::Signal;
use tokio::task::JoinHandle;

use super::status::{
    DeleteKubelet, DeleteRecord, Killer, PodWorkerState, Termination, TerminationReason,
};
use super::{InFlight, Pod, PodCommand};
use crate::events::{message, EventRecorder};
use crate::hooks::HookTarget;
use crate::kubelet::kill::{kill_container, KillTarget};
use crate::kubelet::object::DeleteApi;
use crate::kubelet::ordering::TerminationOrdering;
use crate::probes::ProbeKind;
use crate::runtime::{CallContext, RuntimeService};

/// How long the pod waits, once its containers have stopped, for preStop hooks cut at their
/// budget to end (they die with their container, so this is a bound, not a delay).
pub(super) const LATE_HOOK_WAIT: Duration = Duration::from_secs(1);

/// The target of a container's lifecycle hooks.
pub(super) fn hook_target<'a>(
    pod: &'a str,
    plan: &'a ContainerPlan,
    id: &'a str,
    pod_ip: Option<IpAddr>,
    events: &'a EventRecorder,
) -> HookTarget<'a> {
    HookTarget {
        pod,
        container: &plan.name,
        container_id: id,
        pod_ip,
        ports: &plan.ports,
        events: Some(events),
    }
}

impl<R: RuntimeService + 'static> Pod<R> {
    /// `kubectl delete` through the API server, or an eviction through `killPodNow`.
    pub(super) fn command(&mut self, cmd: PodCommand) {
        let tgps = self.plan.termination_grace_period_seconds;
        let version = self.opts.version;
        match cmd {
            PodCommand::Delete(flags) => {
                let request = match apiserver::kubectl_delete(flags) {
                    Ok(r) => r,
                    Err(e) => {
                        self.kubectl_error(e);
                        return;
                    }
                };
                let at = Instant::now();
                self.observe_status();
                let api = self.api.delete(&request, at);
                let mut record = DeleteRecord {
                    at,
                    flags,
                    api,
                    kubelet: DeleteKubelet::Nothing,
                };
                if matches!(api, DeleteApi::NotFound | DeleteApi::Unchanged) {
                    self.deletes.push(record);
                    self.publish_current();
                    return;
                }
                let deletion = self.api.deletion();
                let mut u = PodUpdate::new(UpdateType::SyncPodUpdate, Some(tgps));
                u.deletion_timestamp = deletion.deletion_timestamp.is_some();
                u.deletion_grace_period_seconds = deletion.deletion_grace_period_seconds;
                record.kubelet = self.enter_termination(
                    u,
                    TerminationReason::Deleted,
                    matches!(api, DeleteApi::Deleted { .. }),
                );
                self.deletes.push(record);
                self.publish_current();
            }
            PodCommand::Evict {
                hard,
                eviction_max_pod_grace_period,
            } => {
                let o = eviction::grace_period_override(
                    hard,
                    eviction_max_pod_grace_period,
                    Some(tgps),
                    version,
                );
                self.kill_pod_now(o, true, TerminationReason::Evicted);
            }
            PodCommand::KillPodNow(k) => {
                if let Some((reason, message)) = &k.event {
                    self.events.warning(reason, None, message.clone());
                }
                if self.killed.is_none() {
                    self.killed = Some(k.status.clone());
                }
                let reason = if k.evict {
                    TerminationReason::Evicted
                } else {
                    TerminationReason::NodeShutdown
                };
                self.kill_pod_now(k.grace_period_override, k.evict, reason);
                self.publish_current();
            }
            PodCommand::Images(images) => self.images_changed(&images),
        }
    }

    /// `killPodNow`: the pod worker's `SyncPodKill` with the override, and the wait of
    /// `override + override/2` (at least 10 s) after which the kubelet says
    /// `ExceededGracePeriod`.
    fn kill_pod_now(&mut self, override_seconds: i64, evict: bool, reason: TerminationReason) {
        let tgps = self.plan.termination_grace_period_seconds;
        let mut u = PodUpdate::new(UpdateType::SyncPodKill, Some(tgps));
        u.kill = Some(KillPodOptions {
            evict,
            override_seconds: Some(override_seconds),
        });
        let wait = podworker::kill_pod_now_wait_seconds(Some(override_seconds), Some(tgps));
        self.kill_pod_now_deadline = Some(Instant::now() + crate::runtime::timeout_after(wait));
        self.enter_termination(u, reason, false);
    }

    pub(super) fn kubectl_error(&self, e: KubectlDeleteError) {
        tracing::warn!(pod = %self.display, error = %e, "delete refused");
    }

    /// `UpdatePod`: records the update. The first one that asks for termination starts it; a
    /// later one can only lower the pod worker's grace, which reaches a kill not started yet
    /// but not one in flight ([`podworker::later_update_in_flight`]). `object_removed`: the
    /// update is the API object's removal (a delete with grace 0).
    pub(super) fn enter_termination(
        &mut self,
        u: PodUpdate,
        reason: TerminationReason,
        object_removed: bool,
    ) -> DeleteKubelet {
        let before = self.worker.grace_period;
        let was_terminating = self.worker.terminating_requested;
        let dgps = u.deletion_grace_period_seconds;
        self.worker.update_pod(u);
        if !self.worker.terminating_requested {
            return DeleteKubelet::Nothing;
        }
        let g = self.worker.grace_period;
        if !was_terminating {
            self.termination_reason = Some(reason);
            // SyncTerminatingPod stops the liveness and startup probes only; readiness goes
            // on (EndpointSlice serving). Probe kills in flight belonged to the cancelled
            // SyncPod.
            for c in &self.ctrs {
                for p in c.probes.iter().filter(|p| p.kind() != ProbeKind::Readiness) {
                    p.stop();
                }
            }
            for k in self.probe_kill_cancel.drain(..) {
                k.cancel();
            }
            self.status
                .send_modify(|s| s.terminating_since = Some(Instant::now()));
            self.publish(PodWorkerState::Terminating);
            return DeleteKubelet::Started {
                grace_period_seconds: g,
            };
        }
        if matches!(
            reason,
            TerminationReason::Evicted | TerminationReason::NodeShutdown
        ) {
            self.termination_reason = Some(reason);
        }
        let Some(kill_grace) = self.kill_grace else {
            // The kill has not started yet: it starts with the lowered grace.
            return if g < before {
                DeleteKubelet::BeforeKill {
                    grace_period_seconds: g,
                }
            } else {
                DeleteKubelet::NotShorter
            };
        };
        let effect = podworker::later_update_in_flight(
            self.opts.version,
            kill_grace,
            LaterUpdate {
                effective_grace_seconds: g,
                object_removed,
                deletion_grace_period_seconds: dgps,
            },
        );
        match effect {
            InFlightEffect::NotShorter => DeleteKubelet::NotShorter,
            InFlightEffect::Ignored {
                kept_seconds,
                recorded_seconds,
            } => {
                // UpdatePod cancels the sync's context ("Cancelling current pod sync"); the
                // running SyncTerminatingPod does not read it, so nothing stops.
                tracing::debug!(pod = %self.display, kept_seconds, recorded_seconds, "Cancelling current pod sync (the kill in flight keeps its grace)");
                DeleteKubelet::Ignored {
                    kept_seconds,
                    recorded_seconds,
                }
            }
            InFlightEffect::KilledAgain { base_grace_seconds } => {
                let task = self.spawn_kills(base_grace_seconds, None, false, Killer::PodKiller);
                self.pod_killer
                    .spawn(async move { task.await.unwrap_or_default() });
                DeleteKubelet::KilledAgain
            }
        }
    }

    /// `SyncTerminatingPod` → `killPod`: every running container in parallel, with the pod
    /// worker's effective grace.
    pub(super) fn start_termination(&mut self) {
        let g = self.worker.grace_period;
        let version = self.opts.version;
        let tgps = self.plan.termination_grace_period_seconds;
        let override_seconds = podworker::kill_pod_override(
            g,
            self.worker.pending_kill.and_then(|k| k.override_seconds),
            version,
        );
        let base = kuberuntime::set_termination_grace_period(
            GraceFields::of_pod_kill(self.api.deletion().deletion_grace_period_seconds, tgps),
            KillReason::Other,
        );
        let ordering = kuberuntime::kills_in_termination_order(&self.plan, version);
        let task = self.spawn_kills(base, override_seconds, ordering, Killer::PodWorker);
        self.in_flight = Some(InFlight { task });
        self.kill_grace = Some(g);
    }

    /// `killContainersWithSyncResult`: kills every running container in parallel with base
    /// grace `base` and `override_seconds`, in sidecar order when `ordering`. The kills run on a
    /// context nothing cancels, as `SyncTerminatingPod`'s (`context.TODO()`).
    pub(super) fn spawn_kills(
        &self,
        base: i64,
        override_seconds: Option<i64>,
        ordering: bool,
        killer: Killer,
    ) -> JoinHandle<Vec<(String, Termination)>> {
        let version = self.opts.version;
        let reason = self
            .termination_reason
            .unwrap_or(TerminationReason::Deleted);
        let targets: Vec<(ContainerPlan, String, Signal)> = self
            .ctrs
            .iter()
            .filter(|c| c.running)
            .filter_map(|c| Some((c.plan.clone(), c.id.clone()?, c.spec.stop_signal)))
            .collect();
        let ordering = ordering.then(|| {
            let running: Vec<String> = targets.iter().map(|t| t.0.name.clone()).collect();
            let order: Vec<OrderedContainer> = self
                .plan
                .running_containers()
                .map(|c| OrderedContainer {
                    name: c.name.clone(),
                    sidecar: c.role == ContainerRole::Sidecar,
                })
                .collect();
            Arc::new(TerminationOrdering::new(&order, |n| {
                running.iter().any(|r| r == n)
            }))
        });
        let ctx = CallContext::background();
        let rt = self.rt.clone();
        let events = self.events.clone();
        let pod_name = self.kubelet_name.clone();
        let pod_ip = self.pod_ip;
        let late = self.late_hooks.clone();
        tokio::spawn(async move {
            let mut kills = tokio::task::JoinSet::new();
            for (plan, id, signal) in targets {
                let rt = rt.clone();
                let ctx = ctx.clone();
                let events = events.clone();
                let ordering = ordering.clone();
                let pod_name = pod_name.clone();
                let late = late.clone();
                kills.spawn(async move {
                    let target = KillTarget {
                        container: &plan,
                        id: &id,
                        base_grace: base,
                        override_seconds,
                        message: message::killing(&plan.name),
                        hook: hook_target(&pod_name, &plan, &id, pod_ip, &events),
                    };
                    let (kill, result) = kill_container(
                        &rt,
                        &ctx,
                        target,
                        ordering.as_deref(),
                        version,
                        &events,
                        &late,
                    )
                    .await;
                    if let Err(e) = result {
                        tracing::debug!(container = %plan.name, error = %e, "StopContainer");
                    }
                    (
                        plan.name.clone(),
                        Termination {
                            reason,
                            container_id: id,
                            stop_signal: signal,
                            kill,
                            killer,
                        },
                    )
                });
            }
            kills.join_all().await
        })
    }
}
