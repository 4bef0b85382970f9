//! Where each pod's runtime comes from, and its containers' output.
//!
//! The process runtime hands container output to whoever created it (one channel of lines per
//! runtime, by container name), so [`ProcessRuntimes`] gives each pod a runtime of its own: the
//! lines it yields are that pod's, and [`crate::logs`] writes them in the CRI layout. A runtime
//! that writes its own CRI log files (containerd) can be shared by every pod through
//! [`Shared`].

use std::sync::Arc;

use podgrace_node::process::OutputLine;
use podgrace_node::runtime::{ProcessRuntime, RuntimeService};
use podgrace_node::sandbox::NetworkConfig;
use tokio::sync::mpsc;

/// A runtime for one pod and, when the runtime hands it over, its containers' output.
pub type PodRuntime<R> = (Arc<R>, Option<mpsc::UnboundedReceiver<OutputLine>>);

/// Gives each new pod its runtime.
pub trait RuntimeSource: Send + Sync + 'static {
    /// The CRI-shaped runtime service each pod's worker calls (`RunPodSandbox`,
    /// `CreateContainer`, `StopContainer` ...).
    type Runtime: RuntimeService + 'static;
    /// The runtime the next pod runs on.
    fn for_pod(&self) -> PodRuntime<Self::Runtime>;
    /// Whether its runtimes run images (a container without `command` runs the image's
    /// ENTRYPOINT), for the checks made before a pod gets its runtime.
    fn uses_images(&self) -> bool {
        false
    }
}

/// A process runtime per pod, all on one pod network (addresses are allocated across
/// runtimes, as across podgrace processes).
#[derive(Debug, Clone, Default)]
pub struct ProcessRuntimes {
    /// The /24 every runtime gives pod IPs from (`--pod-network`).
    pub network: NetworkConfig,
}

impl RuntimeSource for ProcessRuntimes {
    type Runtime = ProcessRuntime;
    fn for_pod(&self) -> PodRuntime<ProcessRuntime> {
        let (rt, output) = ProcessRuntime::new(self.network.clone());
        (Arc::new(rt), Some(output))
    }
}

/// One runtime for every pod, its output not collected. The field is that runtime.
pub struct Shared<R>(pub Arc<R>);

impl<R: RuntimeService + 'static> RuntimeSource for Shared<R> {
    type Runtime = R;
    fn for_pod(&self) -> PodRuntime<R> {
        (self.0.clone(), None)
    }
    fn uses_images(&self) -> bool {
        self.0.uses_images()
    }
}
