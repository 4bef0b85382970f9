//! A container whose definition changed (`kubectl set image` on a bare pod): killed and
//! started again with the new image, as `computePodActions` does when the container's hash
//! changes.
//!
//! Upstream: `pkg/kubelet/kuberuntime/kuberuntime_manager.go` (`computePodActions`,
//! `containerChanged`), `kuberuntime_container.go` (`computeInitContainerActions`),
//! `pkg/kubelet/container/helpers.go` (`HashContainer`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use podgrace_core::plan::ContainerRole;
use podgrace_core::rules::backoff::Backoff;
use podgrace_core::rules::kuberuntime::{self, GraceFields, KillReason};

use super::status::TerminationReason;
use super::Pod;
use crate::events::message;
use crate::kubelet::spec::container_spec;
use crate::runtime::RuntimeService;

impl<R: RuntimeService + 'static> Pod<R> {
    /// The object's images changed (`kubectl set image`): each container whose image differs
    /// takes the new one; a running one is killed as `computePodActions` kills a container
    /// whose hash changed (`Killing` with `Container NAME definition changed, will be
    /// restarted`, or `Init container NAME definition changed` for a native sidecar; the pod's
    /// grace, its preStop hook) and started again once stopped, whatever `restartPolicy`
    /// says. One waiting out its back-off starts at once (the back-off key holds the hash).
    /// Regular init containers and a terminating pod are left alone, as upstream does.
    ///
    /// Upstream: `pkg/kubelet/kuberuntime/kuberuntime_manager.go` (`computePodActions`,
    /// `containerChanged`), `kuberuntime_container.go` (`computeInitContainerActions`,
    /// `killContainer`), `pkg/kubelet/container/helpers.go` (`HashContainer`: name and image),
    /// Kubernetes 1.27 to 1.37.
    pub(super) fn images_changed(&mut self, images: &BTreeMap<String, String>) {
        if self.terminating() || self.failed {
            return;
        }
        for i in 0..self.ctrs.len() {
            let c = &self.ctrs[i];
            let Some(image) = images.get(&c.plan.name) else {
                continue;
            };
            if c.plan.image.as_deref() == Some(image.as_str())
                || (c.plan.role == ContainerRole::Init)
            {
                continue;
            }
            let over = self
                .opts
                .stop_signal_overrides
                .get(&c.plan.name)
                .map(String::as_str);
            let mut plan = c.plan.clone();
            plan.image = Some(image.clone());
            let Ok(spec) = container_spec(&plan, over, self.opts.force_host, self.opts.images)
            else {
                continue;
            };
            let pod = Arc::make_mut(&mut self.plan);
            if let Some(pc) = pod
                .init_containers
                .iter_mut()
                .chain(pod.containers.iter_mut())
                .find(|pc| pc.name == plan.name)
            {
                pc.image = Some(image.clone());
            }
            let c = &mut self.ctrs[i];
            c.plan = plan;
            c.spec = spec;
            if !c.running || c.probe_kill_in_flight {
                if c.restart_at.is_some() {
                    c.back_off = Backoff::crash_loop();
                    c.epoch = Instant::now();
                    c.restart_at = Some(Instant::now());
                }
                continue;
            }
            let Some(id) = c.id.clone() else {
                continue;
            };
            c.definition_changed = true;
            c.probe_kill_in_flight = true;
            let message = if c.plan.role == ContainerRole::Sidecar {
                message::init_definition_changed(&c.plan.name)
            } else {
                message::definition_changed(&c.plan.name)
            };
            let base = kuberuntime::set_termination_grace_period(
                GraceFields::of_pod_kill(None, self.plan.termination_grace_period_seconds),
                KillReason::Other,
            );
            self.spawn_container_kill(i, id, base, message, TerminationReason::DefinitionChanged);
        }
    }
}
