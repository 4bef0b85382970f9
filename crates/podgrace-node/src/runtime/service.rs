//! [`RuntimeService`]: the CRI `RuntimeService` and `ImageService` shape the kubelet side calls,
//! implemented by the process runtime and by containerd.

use std::future::Future;

use super::context::CallContext;
use super::{
    ContainerConfig, ContainerEvent, ContainerStatus, ExecSyncResponse, ImageInfo,
    PodSandboxConfig, PodSandboxStatus, RuntimeError,
};

/// The CRI RuntimeService, as far as termination needs it. All durations in seconds as in CRI.
pub trait RuntimeService: Send + Sync {
    /// `RunPodSandbox`: creates the pod's network namespace (unless host network) and returns
    /// the sandbox id.
    fn run_pod_sandbox(
        &self,
        ctx: &CallContext,
        config: PodSandboxConfig,
    ) -> impl Future<Output = Result<String, RuntimeError>> + Send;
    /// `StopPodSandbox`: SIGKILLs containers still running (containerd stops them with
    /// timeout 0) and tears the network down. Unknown id → Ok.
    fn stop_pod_sandbox(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// `RemovePodSandbox`: stops it if needed and forgets it and its containers. Unknown id → Ok.
    fn remove_pod_sandbox(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// `CreateContainer` in a sandbox; returns the container id.
    fn create_container(
        &self,
        ctx: &CallContext,
        pod_sandbox_id: &str,
        config: ContainerConfig,
    ) -> impl Future<Output = Result<String, RuntimeError>> + Send;
    /// `StartContainer`: spawns the entry process.
    fn start_container(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// `StopContainer(id, timeout)`, timeout in seconds. See [`ProcessRuntime`] for semantics.
    fn stop_container(
        &self,
        ctx: &CallContext,
        id: &str,
        timeout_seconds: i64,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// `ExecSync(id, cmd, timeout)`; `timeout_seconds <= 0` means no timeout (CRI).
    fn exec_sync(
        &self,
        ctx: &CallContext,
        id: &str,
        cmd: Vec<String>,
        timeout_seconds: i64,
    ) -> impl Future<Output = Result<ExecSyncResponse, RuntimeError>> + Send;
    /// `PodSandboxStatus`: the pod IP.
    fn pod_sandbox_status(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<PodSandboxStatus, RuntimeError>> + Send;
    /// `GetContainerEvents` for the containers of one sandbox: their lifecycle events from now
    /// on (lossy if a receiver lags by more than the channel's capacity, as a stream behind a
    /// slow client would be). The kubelet's evented PLEG dispatches CRI's one stream to the pod
    /// workers; a stream per sandbox saves every pod task from waking for every other pod's
    /// containers. `None` for an unknown sandbox.
    fn container_events(
        &self,
        pod_sandbox_id: &str,
    ) -> Option<tokio::sync::broadcast::Receiver<ContainerEvent>>;
    /// `ContainerStatus`.
    fn container_status(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<ContainerStatus, RuntimeError>> + Send;
    /// `RemoveContainer`: forgets a stopped container (SIGKILLs it first if it runs). Unknown
    /// id → Ok.
    fn remove_container(
        &self,
        ctx: &CallContext,
        id: &str,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
    /// The runtime's name as `Version` gives it (`containerd`): the scheme of the API's
    /// `containerID` (`containerd://ID`, `kubecontainer.ContainerID`'s `Type`). The process
    /// runtime is `podgrace`.
    fn runtime_type(&self) -> &str {
        "podgrace"
    }
    /// The cgroup the runtime puts the kubelet's pod cgroups under (`--cgroup-root`), below
    /// each hierarchy's root: empty for a runtime at the machine's root (containerd:
    /// `/kubepods/...`), `/podgrace/<PID>` for the process runtime. The node's pods are all in
    /// `<root>/kubepods`, which the eviction manager measures.
    fn cgroup_root(&self) -> String {
        String::new()
    }
    /// Whether containers run from images: then the kubelet ensures each container's image
    /// ([`Self::image_status`], [`Self::pull_image`]) before creating it, and a container
    /// without `command` runs the image's ENTRYPOINT. The process runtime runs host commands.
    fn uses_images(&self) -> bool {
        false
    }
    /// `ImageService.ImageStatus`: the image when it is present, `None` when it is not.
    fn image_status(
        &self,
        _ctx: &CallContext,
        _image: &str,
    ) -> impl Future<Output = Result<Option<ImageInfo>, RuntimeError>> + Send {
        async { Ok(None) }
    }
    /// `ImageService.PullImage`: pulls the image, returns its reference.
    fn pull_image(
        &self,
        _ctx: &CallContext,
        image: &str,
    ) -> impl Future<Output = Result<String, RuntimeError>> + Send {
        let image = image.to_string();
        async move { Err(RuntimeError::ImageNeverPull { image }) }
    }
}
