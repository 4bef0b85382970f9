//! One module per verb.

pub mod conformance;
pub mod demo_app;
pub mod drill;
pub mod explain;
pub mod lint;
pub mod run;

/// `--pod-network A.B.C.0/24`: the range pods take their addresses from (`.1` is the host side,
/// pods get `.2` to `.254`). Only /24 ranges are supported, and only ones whose addresses
/// kube-apiserver accepts in EndpointSlices (see `podgrace_node::sandbox::NetworkConfig`).
pub fn parse_pod_network(s: &str) -> Result<podgrace_node::sandbox::NetworkConfig, String> {
    s.parse()
        .map_err(|e: podgrace_node::sandbox::PodNetworkError| e.to_string())
}

/// A duration flag: plain seconds (`2.5`) or humantime (`10s`, `1m30s`, `500ms`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok(std::time::Duration::from_secs_f64(secs));
        }
    }
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 10s, 1m30s, 500ms)"))
}

use anyhow::Context as _;

/// The `--runtime` flag group of `run`, `drill` and `serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct RuntimeArgs {
    /// Which runtime runs the pods: `process` (containers as local processes, the default) or
    /// `containerd[:SOCKET]` (a real containerd over CRI v1, namespace k8s.io; default socket
    /// /run/containerd/containerd.sock): the images run unchanged, networking through
    /// containerd's CNI config.
    #[arg(long, value_name = "RUNTIME", default_value = "process")]
    pub runtime: podgrace_node::runtime::RuntimeChoice,
}

/// Connects to containerd and stops, with their grace, the pods an earlier podgrace left
/// running there (its containers outlive it), saying so.
pub async fn connect_containerd(
    socket: &std::path::Path,
) -> anyhow::Result<(
    podgrace_node::runtime::ContainerdRuntime,
    tokio::sync::mpsc::UnboundedReceiver<podgrace_node::process::OutputLine>,
)> {
    let logs = std::env::temp_dir().join(format!("podgrace-pods-{}", std::process::id()));
    let (rt, output) = podgrace_node::runtime::ContainerdRuntime::connect(socket, &logs)
        .await
        .with_context(|| "--runtime containerd: is containerd running, and is its socket readable? (sudo; or start a private one with .ci/containerd.sh start)")?;
    let rt = rt.with_pull_progress();
    let v = rt.version();
    eprintln!(
        "runtime: {} {} (CRI {}) at {}{}",
        v.runtime_name,
        v.runtime_version,
        v.runtime_api_version,
        socket.display(),
        if rt.evented() {
            ""
        } else {
            "; no GetContainerEvents, so exits are seen by a relist every 1 s as the kubelet's generic PLEG"
        }
    );
    let ctx = podgrace_node::runtime::CallContext::background();
    for sb in rt
        .own_sandboxes(&ctx)
        .await
        .context("listing the pod sandboxes of an earlier podgrace")?
    {
        if sb.owner_alive {
            // Another podgrace that still runs: its pods are its own.
            continue;
        }
        let running = sb.containers.iter().filter(|c| c.running).count();
        eprintln!(
            "found pod {}/{} (sandbox {}, {running} running containers) left by an earlier podgrace: stopping it with its grace",
            sb.namespace,
            sb.pod,
            &sb.id[..sb.id.len().min(13)]
        );
        rt.stop_found(&ctx, &sb)
            .await
            .with_context(|| format!("stopping the earlier pod {}/{}", sb.namespace, sb.pod))?;
    }
    Ok((rt, output))
}
