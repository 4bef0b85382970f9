//! The probe workers of the pod's containers and what their results do: readiness into the
//! Ready condition, a liveness or startup failure into a kill of the container.
//!
//! Upstream: `pkg/kubelet/prober/prober_manager.go`, `pkg/kubelet/kuberuntime/kuberuntime_manager.go`
//! (`computePodActions`: a failed liveness or startup probe kills the container).

use podgrace_core::plan::{ContainerRole, RestartPolicy};
use podgrace_core::rules::kuberuntime::{self, GraceFields, KillReason};

use super::status::{Killer, PodWorkerState, Termination, TerminationReason};
use super::terminate::hook_target;
use super::Pod;
use crate::events::message;
use crate::kubelet::kill::{kill_container, KillTarget};
use crate::probes::{spawn_probe_worker, ProbeHandle, ProbeKind, ProbeStatus, RuntimeProber};
use crate::runtime::{CallContext, RuntimeService};

impl<R: RuntimeService + 'static> Pod<R> {
    /// Starts each container's probe workers (`prober_manager.AddPod`): they idle until the
    /// container runs, and their results come back to the pod loop.
    pub(super) fn spawn_probes(&mut self) {
        for (i, c) in self.ctrs.iter_mut().enumerate() {
            if c.plan.role == ContainerRole::Init {
                continue;
            }
            let prober = |probe: &podgrace_core::plan::Probe| RuntimeProber {
                runtime: self.rt.clone(),
                probe: probe.clone(),
                pod_ip: self.pod_ip,
                ports: c.plan.ports.clone(),
                env: c.plan.env.clone(),
            };
            let name = c.plan.name.clone();
            let startup = c.plan.startup_probe.as_ref().map(|p| {
                spawn_probe_worker(
                    ProbeKind::Startup,
                    p,
                    &name,
                    prober(p),
                    self.events.clone(),
                    None,
                )
            });
            let gate = startup.as_ref().map(ProbeHandle::subscribe);
            let mut handles: Vec<ProbeHandle> = startup.into_iter().collect();
            for (kind, probe) in [
                (ProbeKind::Liveness, &c.plan.liveness_probe),
                (ProbeKind::Readiness, &c.plan.readiness_probe),
            ] {
                if let Some(p) = probe {
                    handles.push(spawn_probe_worker(
                        kind,
                        p,
                        &name,
                        prober(p),
                        self.events.clone(),
                        gate.clone(),
                    ));
                }
            }
            for h in &handles {
                let mut rx = h.subscribe();
                let tx = self.probe_tx.clone();
                let kind = h.kind();
                tokio::spawn(async move {
                    while rx.changed().await.is_ok() {
                        let st = rx.borrow_and_update().clone();
                        if tx.send((i, kind, st)).is_err() {
                            break;
                        }
                    }
                });
            }
            c.probes = handles;
        }
    }

    /// A probe worker published a result: readiness changes the Ready condition; a liveness
    /// or startup failure past its threshold kills the container (`computePodActions`).
    pub(super) fn probe_result(&mut self, i: usize, kind: ProbeKind, st: ProbeStatus) {
        let phase = if self.terminating() {
            PodWorkerState::Terminating
        } else {
            PodWorkerState::Running
        };
        if kind == ProbeKind::Readiness {
            self.publish(phase);
            return;
        }
        let Some(c) = self.ctrs.get_mut(i) else {
            return;
        };
        let current = c.id.clone();
        if st.threshold_failures <= c.failures_seen
            || c.probe_kill_in_flight
            || self.worker.terminating_requested
            || !c.running
            || st.container_id != current
        {
            c.failures_seen = c.failures_seen.max(st.threshold_failures);
            return;
        }
        c.failures_seen = st.threshold_failures;
        c.probe_killed = true;
        c.probe_kill_in_flight = true;
        let Some(id) = current else {
            return;
        };
        let (reason, probe_word, term_reason) = match kind {
            ProbeKind::Startup => (
                KillReason::StartupProbe,
                "startup",
                TerminationReason::StartupProbe,
            ),
            _ => (
                KillReason::LivenessProbe,
                "liveness",
                TerminationReason::LivenessProbe,
            ),
        };
        // The container-restart path: no pod-level override; the probe's own
        // terminationGracePeriodSeconds (KEP-2238) when it has one.
        let base = kuberuntime::set_termination_grace_period(
            GraceFields::of_probe_kill(&self.plan, &c.plan),
            reason,
        );
        let will_restart = self.plan.restart_policy != RestartPolicy::Never;
        let plan = c.plan.clone();
        let signal = c.spec.stop_signal;
        let (ctx, canceller) = CallContext::background().with_cancel();
        self.probe_kill_cancel.push(canceller);
        let rt = self.rt.clone();
        let events = self.events.clone();
        let pod_name = self.kubelet_name.clone();
        let pod_ip = self.pod_ip;
        let version = self.opts.version;
        let done = self.probe_kill_tx.clone();
        let late = self.late_hooks.clone();
        tokio::spawn(async move {
            let target = KillTarget {
                container: &plan,
                id: &id,
                base_grace: base,
                override_seconds: None,
                message: message::killing_after_probe(&plan.name, probe_word, will_restart),
                hook: hook_target(&pod_name, &plan, &id, pod_ip, &events),
            };
            let (kill, _) = kill_container(&rt, &ctx, target, None, version, &events, &late).await;
            let _ = done.send((
                i,
                Termination {
                    reason: term_reason,
                    container_id: id.clone(),
                    stop_signal: signal,
                    kill,
                    killer: Killer::PodWorker,
                },
            ));
        });
    }
}
