//! Starting the pod's containers in order (init containers to completion, native sidecars,
//! then the main containers with their postStart hooks), the image pull, a failed start.
//!
//! Upstream: `pkg/kubelet/kuberuntime/kuberuntime_manager.go` (`SyncPod`),
//! `kuberuntime_container.go` (`startContainer`), `kuberuntime_image.go` (`EnsureImageExists`).

use std::net::IpAddr;
use std::time::Instant;

use podgrace_core::plan::{ContainerPlan, ContainerRole};
use podgrace_core::rules::runtime::Signal;
use tokio::task::JoinHandle;

use super::status::PodWorkerState;
use super::Pod;
use crate::events::{message, reason};
use crate::hooks::{run_handler, HookTarget};
use crate::probes::{ContainerRun as ProbeRun, ProbeKind, ProbeState};
use crate::process::ExitStatus;
use crate::runtime::{CallContext, RuntimeError, RuntimeService};

/// A `StartContainer` call in flight: the container's index and id, and the call's task.
pub(super) struct StartInFlight {
    index: usize,
    id: String,
    task: JoinHandle<Result<(), RuntimeError>>,
}

/// The end of a runtime call's task; a task that panicked is the runtime's error.
async fn joined<T>(
    task: impl std::future::Future<Output = Result<Result<T, RuntimeError>, tokio::task::JoinError>>,
) -> Result<T, RuntimeError> {
    task.await.unwrap_or_else(|e| {
        Err(RuntimeError::Host {
            what: "StartContainer".into(),
            source: std::io::Error::other(e.to_string()),
        })
    })
}

/// The exit code the runtime reports for a container it could not start (`StartError`).
pub(super) const START_ERROR_EXIT_CODE: i32 = 128;

impl<R: RuntimeService + 'static> Pod<R> {
    /// Starts what may start now, as `SyncPod` does: init containers and native sidecars one
    /// by one in declaration order (an init container must exit 0 first; a sidecar must be
    /// running and, if it has a startup probe, started), then the main containers, each with
    /// its postStart hook. Restarts due after their back-off go through here too. Returns when
    /// nothing more can start now.
    pub(super) async fn start_step(&mut self) {
        if self.failed || self.terminating() {
            return;
        }
        // A command (an image change) cancelled the last step during its StartContainer.
        self.finish_start_in_flight().await;
        let n_init = self.plan.init_containers.len();
        for i in 0..self.ctrs.len() {
            let c = &self.ctrs[i];
            let startable = c.want_start && !c.running && c.restart_at.is_none();
            if i < n_init && c.plan.role == ContainerRole::Init {
                if c.completed {
                    continue;
                }
                if startable {
                    self.start_container(i).await;
                }
                // Running, backing off, failed for good, or just started: later ones wait.
                return;
            }
            if startable {
                self.start_container(i).await;
                if self.failed || self.terminating() {
                    // A failed start failed or completed the pod.
                    return;
                }
            }
            let c = &self.ctrs[i];
            if i < n_init && !c.ever_started {
                return;
            }
            if i < n_init && c.running && !self.started(i) && !c.completed {
                // A sidecar gates the next init container until its startup probe succeeds.
                return;
            }
        }
        if !self.terminating() {
            self.publish(PodWorkerState::Running);
        }
    }

    /// A container counts as started once running and past its startup probe, if any.
    pub(super) fn started(&self, i: usize) -> bool {
        let c = &self.ctrs[i];
        c.running
            && c.probes
                .iter()
                .filter(|p| p.kind() == ProbeKind::Startup)
                .all(|p| p.status().result == ProbeState::Success)
    }

    /// `startContainer`: create, start, then the postStart hook; a failed hook kills the
    /// container (`FailedPostStartHook`).
    pub(super) async fn start_container(&mut self, i: usize) {
        let ctx = CallContext::background();
        let Some(sandbox) = self.sandbox.clone() else {
            return;
        };
        let mut config = self.ctrs[i].spec.config.clone();
        config.env = pod_ip_env(&self.ctrs[i].plan, self.pod_ip).unwrap_or(config.env);
        let name = self.ctrs[i].plan.name.clone();
        let restart_count = self.ctrs[i].attempts;
        crate::kubelet::cri::complete_container_config(
            &mut config,
            &self.ctrs[i].plan,
            &self.plan,
            &self.identity,
            restart_count,
            self.api.deletion().deletion_grace_period_seconds,
        );
        if let Some(v) = &self.volumes {
            match v.mounts(&self.ctrs[i].plan) {
                Ok(m) => config.mounts = m,
                Err(e) => {
                    // `CreateContainerConfigError`, as makeMounts' errors are.
                    let e = RuntimeError::Host {
                        what: "CreateContainerConfigError".into(),
                        source: std::io::Error::other(e.to_string()),
                    };
                    self.start_failed(i, &e);
                    return;
                }
            }
        }
        if self.rt.uses_images() {
            if let Err(e) = self.ensure_image(&ctx, &name, &config).await {
                self.start_failed(i, &e);
                return;
            }
        }
        self.ctrs[i].attempts += 1;
        let id = match self.rt.create_container(&ctx, &sandbox, config).await {
            Ok(id) => id,
            Err(e) => {
                tracing::debug!(container = %name, error = %e, "CreateContainer failed");
                self.start_failed(i, &e);
                return;
            }
        };
        self.events
            .normal(reason::CREATED, Some(&name), message::created(&name));
        if self.rt.uses_images() {
            // The signal the runtime will stop it with (containerd: the image's STOPSIGNAL
            // when the config names none), for the kill's records.
            if let Ok(Some(n)) = self
                .rt
                .container_status(&ctx, &id)
                .await
                .map(|st| st.stop_signal)
            {
                if let Some(sig) = Signal::from_number(n) {
                    self.ctrs[i].spec.stop_signal = sig;
                }
            }
        }
        // StartContainer runs in a task of its own, recorded before it is awaited: a
        // termination that cancels this start (the pod loop drops `start_step` for a command)
        // does not abandon the call half-way; the pod finishes it before anything else.
        let rt = self.rt.clone();
        let call_id = id.clone();
        let task = tokio::spawn(async move {
            rt.start_container(&CallContext::background(), &call_id)
                .await
        });
        self.start_in_flight = Some(StartInFlight { index: i, id, task });
        self.finish_start_in_flight().await;
    }

    /// Container `i` runs as `id`: the `Started` event and its records; its probes follow it.
    fn container_started(&mut self, i: usize, id: &str) {
        let c = &mut self.ctrs[i];
        self.events.normal(
            reason::STARTED,
            Some(&c.plan.name),
            message::started(&c.plan.name),
        );
        c.id = Some(id.to_string());
        c.running = true;
        c.exit = None;
        c.want_start = false;
        c.ever_started = true;
        c.probe_killed = false;
        c.started_at = Some(Instant::now());
        c.report.ids.push(id.to_string());
        for p in &c.probes {
            p.set_container(Some(ProbeRun {
                container_id: id.to_string(),
                started_at: tokio::time::Instant::now(),
                running: true,
            }));
        }
    }

    /// Ends the `StartContainer` call in flight, if any: `Started` and the postStart hook (a
    /// failed hook kills the container, `FailedPostStartHook`), or the failed start.
    ///
    /// A termination that cancelled `SyncPod` meanwhile does not abandon the call: the
    /// kubelet's pod worker takes the termination only once `SyncPod` has returned, and the
    /// runtime finishes a start it began. So a container it started is recorded as running,
    /// with its `Started` event, and the termination then stops it with its grace (preStop,
    /// stop signal, SIGKILL at the deadline) like any other. Its postStart hook does not run
    /// then (it would run on the cancelled context), and a failed start is only the `Failed`
    /// warning (no restart: the pod is terminating). Cancel-safe: dropped while it waits, the
    /// call stays in flight.
    ///
    /// Upstream: `pkg/kubelet/pod_workers.go` (`UpdatePod` cancels the sync's context,
    /// `podWorkerLoop` runs `SyncTerminatingPod` after `SyncPod` returns),
    /// `pkg/kubelet/kuberuntime/kuberuntime_container.go` (`startContainer`), 1.22 to 1.37.
    pub(super) async fn finish_start_in_flight(&mut self) {
        let Some(start) = self.start_in_flight.as_mut() else {
            return;
        };
        let result = joined(&mut start.task).await;
        let Some(StartInFlight { index: i, id, .. }) = self.start_in_flight.take() else {
            return;
        };
        let name = self.ctrs[i].plan.name.clone();
        if let Err(e) = result {
            tracing::debug!(container = %name, error = %e, "StartContainer failed");
            if self.terminating() {
                let c = &mut self.ctrs[i];
                self.events
                    .warning(reason::FAILED, Some(&name), message::failed(&e));
                c.running = false;
                c.want_start = false;
                c.exit = Some(ExitStatus::Code(START_ERROR_EXIT_CODE));
            } else {
                self.start_failed(i, &e);
            }
            return;
        }
        self.container_started(i, &id);
        if self.terminating() {
            return;
        }
        if let Some(handler) = self.ctrs[i].plan.post_start.clone() {
            let ctx = CallContext::background();
            let ports = self.ctrs[i].plan.ports.clone();
            let hook = HookTarget {
                pod: &self.kubelet_name,
                container: &name,
                container_id: &id,
                pod_ip: self.pod_ip,
                ports: &ports,
                events: Some(&self.events),
            };
            if let Err(e) = run_handler(self.rt.as_ref(), &ctx, &hook, &handler).await {
                tracing::warn!(container = %name, error = %e, "postStart hook failed");
                self.events.warning(
                    reason::FAILED_POST_START_HOOK,
                    Some(&name),
                    message::FAILED_POST_START_HOOK,
                );
                let _ = self.rt.stop_container(&ctx, &id, 2).await;
            }
        }
        self.publish(PodWorkerState::Running);
    }

    /// `EnsureImageExists` (`pkg/kubelet/images/image_manager.go`): per `imagePullPolicy`,
    /// the `Pulled` (already present), `Pulling`/`Pulled`, `Failed` or `ErrImageNeverPull`
    /// events, and the pull itself.
    pub(super) async fn ensure_image(
        &self,
        ctx: &CallContext,
        container: &str,
        config: &crate::runtime::ContainerConfig,
    ) -> Result<(), RuntimeError> {
        use crate::runtime::PullPolicy;
        let image = config.image.as_str();
        let present = if config.pull_policy == PullPolicy::Always {
            None
        } else {
            self.rt.image_status(ctx, image).await?
        };
        if present.is_some() {
            self.events.normal(
                reason::PULLED,
                Some(container),
                message::image_present(image, self.opts.version),
            );
            return Ok(());
        }
        if config.pull_policy == PullPolicy::Never {
            let e = RuntimeError::ImageNeverPull {
                image: image.to_string(),
            };
            self.events.warning(
                reason::ERR_IMAGE_NEVER_PULL,
                Some(container),
                message::image_never_pull(image),
            );
            return Err(e);
        }
        self.events
            .normal(reason::PULLING, Some(container), message::pulling(image));
        let started = Instant::now();
        match self.rt.pull_image(ctx, image).await {
            Ok(_) => {
                let took = started.elapsed();
                let size = self
                    .rt
                    .image_status(ctx, image)
                    .await
                    .ok()
                    .flatten()
                    .map_or(0, |i| i.size_bytes);
                self.events.normal(
                    reason::PULLED,
                    Some(container),
                    message::pulled(image, took, size),
                );
                Ok(())
            }
            Err(e) => {
                self.events.warning(
                    reason::FAILED,
                    Some(container),
                    message::failed_to_pull(image, &e),
                );
                Err(e)
            }
        }
    }

    /// The runtime could not create or start container `i`: the `Failed` warning
    /// (`"Error: ..."`), then, as `startContainer`'s error in `SyncPod`
    /// (`pkg/kubelet/kuberuntime/kuberuntime_manager.go`) leaves a container that exited
    /// (`StartError`/`RunContainerError`, exit code 128), the same restart decision and
    /// back-off as a crash ([`Pod::after_exit`]).
    pub(super) fn start_failed(&mut self, i: usize, error: &RuntimeError) {
        let c = &mut self.ctrs[i];
        self.events
            .warning(reason::FAILED, Some(&c.plan.name), message::failed(error));
        let status = ExitStatus::Code(START_ERROR_EXIT_CODE);
        let now = Instant::now();
        // The attempt ran for no time: it never resets the back-off.
        c.started_at = Some(now);
        c.running = false;
        c.exit = Some(status);
        c.oom_killed = false;
        c.want_start = false;
        c.probe_killed = false;
        self.after_exit(i, now, status);
    }
}

/// The environment of `container` with the pod's addresses filled in where `env` takes them
/// from the pod (`valueFrom.fieldRef` `status.podIP`, or `status.podIPs`, the IPs joined by
/// commas: one here, single-stack), as `makeEnvironmentVariables` does when the container is
/// created, after the sandbox gave the pod its address; `None` when no variable needs it or
/// the pod has no address of its own (the host network: the kubelet layer fills in the node's).
///
/// Upstream: `pkg/kubelet/kubelet_pods.go` (`makeEnvironmentVariables`,
/// `podFieldSelectorRuntimeValue`), Kubernetes 1.27 to 1.37.
fn pod_ip_env(container: &ContainerPlan, pod_ip: Option<IpAddr>) -> Option<Vec<(String, String)>> {
    let ip = pod_ip?.to_string();
    let takes_ip = |name: &str| {
        matches!(
            container.env_field_refs.get(name).map(String::as_str),
            Some("status.podIP" | "status.podIPs")
        )
    };
    if !container
        .env
        .iter()
        .any(|(n, v)| v.is_none() && takes_ip(n))
    {
        return None;
    }
    Some(
        container
            .env
            .iter()
            .filter_map(|(n, v)| match v {
                Some(v) => Some((n.clone(), v.clone())),
                None if takes_ip(n) => Some((n.clone(), ip.clone())),
                None => None,
            })
            .collect(),
    )
}
