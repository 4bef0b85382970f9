//! One module per verb, and the flag groups they share.

pub mod args;
pub mod conformance;
pub mod demo_app;
pub mod drill;
pub mod explain;
pub mod init;
pub mod lag;
pub mod lean;
pub mod lint;
pub mod live;
pub mod node;
pub mod prestop_wait;
pub mod run;
pub mod serve;
pub mod why;

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

use crate::OnMachine as _;

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

/// What a podgrace that starts says of a pod an earlier one left on containerd, before it
/// stops it with its grace: `run` and `drill` stop every such pod; `serve` stops them because
/// its API store is new at each start, so no pod object knows them.
pub const LEFT_BY_AN_EARLIER_PODGRACE: &str = "stopping it with its grace";

/// Connects to containerd (container logs under `log_root`, or a directory of this process
/// under the temporary directory) and stops, with their grace, the pods an earlier podgrace
/// left running there (its containers outlive it), saying so; `why` ends the sentence
/// (`run`/`drill`: empty; `serve`: that its API does not know them).
pub async fn connect_containerd(
    socket: &std::path::Path,
    log_root: Option<&std::path::Path>,
    why: &str,
) -> anyhow::Result<(
    podgrace_node::runtime::ContainerdRuntime,
    tokio::sync::mpsc::UnboundedReceiver<podgrace_node::process::OutputLine>,
)> {
    let logs = log_root.map_or_else(
        || std::env::temp_dir().join(format!("podgrace-pods-{}", std::process::id())),
        std::path::Path::to_path_buf,
    );
    let (rt, output) = podgrace_node::runtime::ContainerdRuntime::connect(socket, &logs)
        .await
        .on_machine(|| "--runtime containerd: is containerd running, and is its socket readable? (sudo; or start a private one with .ci/containerd.sh start)".into())?;
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
            "found pod {}/{} (sandbox {}, {running} running containers) left by an earlier podgrace{why}: {LEFT_BY_AN_EARLIER_PODGRACE}",
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

/// Where `explain` and `lint` take an image's STOPSIGNAL from: `known` (the table of official
/// images podgrace knows, the default) or `containerd[:SOCKET]` (the image's config as the
/// containerd at SOCKET holds it, when the image is present there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ImageSource {
    #[default]
    Known,
    Containerd(std::path::PathBuf),
}

impl std::str::FromStr for ImageSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "known" {
            return Ok(ImageSource::Known);
        }
        match s.parse::<podgrace_node::runtime::RuntimeChoice>() {
            Ok(podgrace_node::runtime::RuntimeChoice::Containerd { socket }) => {
                Ok(ImageSource::Containerd(socket))
            }
            _ => Err(format!(
                "expected known, containerd or containerd:SOCKET, got {s:?}"
            )),
        }
    }
}

/// The `--image-source` flag of `explain` and `lint`.
#[derive(clap::Args, Debug, Clone)]
pub struct ImageSourceArgs {
    /// Where an image's STOPSIGNAL comes from: `known` (the official images podgrace knows) or
    /// `containerd[:SOCKET]` (the image's config in containerd, namespace k8s.io, when the
    /// image is present there; default socket /run/containerd/containerd.sock).
    #[arg(long, value_name = "SOURCE", default_value = "known")]
    pub image_source: ImageSource,
}

/// With `--image-source containerd`, reads the STOPSIGNAL of every container's image from
/// containerd into the plans ([`podgrace_core::plan::ContainerPlan::image_config_stop_signal`]);
/// an image containerd does not hold keeps the table of known images, with a note on stderr.
///
/// # Errors
/// containerd cannot be reached (a failure of the machine, not of the input).
pub fn read_image_stop_signals<'a>(
    source: &ImageSource,
    pods: impl Iterator<Item = &'a mut podgrace_core::plan::PodPlan>,
) -> anyhow::Result<()> {
    let ImageSource::Containerd(socket) = source else {
        return Ok(());
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .on_machine(|| "cannot start the async runtime".into())?;
    rt.block_on(async {
        let logs = std::env::temp_dir().join(format!("podgrace-images-{}", std::process::id()));
        let (cri, _output) = podgrace_node::runtime::ContainerdRuntime::connect(socket, &logs)
            .await
            .on_machine(|| "--image-source containerd: is containerd running, and is its socket readable?".into())?;
        let ctx = podgrace_node::runtime::CallContext::background();
        let mut absent = std::collections::BTreeSet::new();
        for pod in pods {
            for c in pod.init_containers.iter_mut().chain(pod.containers.iter_mut()) {
                let Some(image) = c.image.clone() else {
                    continue;
                };
                match cri.image_stop_signal(&ctx, &image).await {
                    Ok(sig) => {
                        c.image_config_stop_signal = Some(sig.and_then(|n| {
                            podgrace_core::rules::runtime::Signal::from_number(n)
                                .map(|s| s.to_string())
                        }));
                    }
                    Err(_) => {
                        absent.insert(image);
                    }
                }
            }
        }
        for image in absent {
            eprintln!("note: image {image} is not present in containerd at {}: its stop signal comes from the table of known images", socket.display());
        }
        Ok(())
    })
}
