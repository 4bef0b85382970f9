//! What the kubelet's PLEG and `GetPodStatus` see of one pod: its sandbox and every container
//! instance created in it, in order. [`ObservedRuntime`] wraps the node's runtime for one pod
//! and passes every CRI call through, noting the sandbox and the containers it creates, so the
//! status manager can ask the runtime for their states (`ContainerStatus`) as the kubelet does,
//! without the pod worker exposing its own bookkeeping.
//!
//! Upstream: `pkg/kubelet/kuberuntime/kuberuntime_manager.go` `GetPodStatus` (the sandbox and
//! every container of the pod, found by its labels), `pkg/kubelet/pleg/evented.go`.

use std::sync::{Arc, Mutex};

use podgrace_node::runtime::{
    CallContext, ContainerConfig, ContainerEvent, ContainerStatus, ExecSyncResponse, ImageInfo,
    PodSandboxConfig, PodSandboxStatus, RuntimeError, RuntimeService,
};
use tokio::sync::Notify;

/// The sandbox and the container instances of one pod (`(container name, runtime id)` in
/// creation order).
#[derive(Debug, Default, Clone)]
pub struct PodRecord {
    /// The sandbox's id from `RunPodSandbox`; `None` before it.
    pub sandbox: Option<String>,
    /// `(container name, runtime id)` of each `CreateContainer`, oldest first.
    pub containers: Vec<(String, String)>,
    /// `StopPodSandbox` was called.
    pub sandbox_stopped: bool,
}

/// The node's runtime, seen through one pod.
pub struct ObservedRuntime<R> {
    inner: Arc<R>,
    record: Arc<Mutex<PodRecord>>,
    changed: Arc<Notify>,
}

impl<R> ObservedRuntime<R> {
    /// Wraps `inner` for one pod.
    pub fn new(inner: Arc<R>) -> Self {
        ObservedRuntime {
            inner,
            record: Arc::new(Mutex::new(PodRecord::default())),
            changed: Arc::new(Notify::new()),
        }
    }

    /// A snapshot of what was created so far.
    pub fn record(&self) -> PodRecord {
        self.record.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The record itself, shared (for readers that must not keep the runtime alive).
    pub fn shared_record(&self) -> Arc<Mutex<PodRecord>> {
        self.record.clone()
    }

    /// Notified after each sandbox or container call that changes what the pod holds.
    pub fn changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }

    /// The wrapped runtime.
    pub fn inner(&self) -> &Arc<R> {
        &self.inner
    }

    fn note(&self, f: impl FnOnce(&mut PodRecord)) {
        if let Ok(mut r) = self.record.lock() {
            f(&mut r);
        }
        self.changed.notify_one();
    }
}

impl<R: RuntimeService> RuntimeService for ObservedRuntime<R> {
    async fn run_pod_sandbox(
        &self,
        ctx: &CallContext,
        config: PodSandboxConfig,
    ) -> Result<String, RuntimeError> {
        let id = self.inner.run_pod_sandbox(ctx, config).await?;
        self.note(|r| r.sandbox = Some(id.clone()));
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        let r = self.inner.stop_pod_sandbox(ctx, id).await;
        self.note(|r| r.sandbox_stopped = true);
        r
    }

    async fn remove_pod_sandbox(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        self.inner.remove_pod_sandbox(ctx, id).await
    }

    async fn create_container(
        &self,
        ctx: &CallContext,
        pod_sandbox_id: &str,
        config: ContainerConfig,
    ) -> Result<String, RuntimeError> {
        let name = config.name.clone();
        let id = self
            .inner
            .create_container(ctx, pod_sandbox_id, config)
            .await?;
        self.note(|r| r.containers.push((name, id.clone())));
        Ok(id)
    }

    async fn start_container(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        let r = self.inner.start_container(ctx, id).await;
        self.changed.notify_one();
        r
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
        pod_sandbox_id: &str,
    ) -> Option<tokio::sync::broadcast::Receiver<ContainerEvent>> {
        self.inner.container_events(pod_sandbox_id)
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

    fn runtime_type(&self) -> &str {
        self.inner.runtime_type()
    }

    fn uses_images(&self) -> bool {
        self.inner.uses_images()
    }

    fn cgroup_root(&self) -> String {
        self.inner.cgroup_root()
    }

    async fn image_status(
        &self,
        ctx: &CallContext,
        image: &str,
    ) -> Result<Option<ImageInfo>, RuntimeError> {
        self.inner.image_status(ctx, image).await
    }

    async fn pull_image(&self, ctx: &CallContext, image: &str) -> Result<String, RuntimeError> {
        self.inner.pull_image(ctx, image).await
    }
}
