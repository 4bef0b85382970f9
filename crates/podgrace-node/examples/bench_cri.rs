//! The overhead podgrace's kubelet adds on top of containerd, for `bench/cri.sh`.
//!
//! ```text
//! cargo run --release -p podgrace-node --example bench_cri -- --socket SOCK --image REF
//!                                                              [--pods 50] [--host-network]
//! ```
//!
//! `--pods` times (default 50), alternately, one pod of one container (`--image`, whose
//! ENTRYPOINT must exit on SIGTERM at once: `bench/cri.sh` builds the signal logger of the
//! tests) is started and stopped two ways on the containerd at `--socket`:
//!
//! * **direct**: a minimal CRI client (tonic over the socket, the calls `crictl` makes for
//!   `crictl runp`, `create`, `start`, `inspect`, `stop`, `stopp`, `rmp`): ImageStatus,
//!   RunPodSandbox, CreateContainer, StartContainer, then ContainerStatus until `RUNNING`;
//!   StopContainer(timeout 30), ContainerStatus until `EXITED`, StopPodSandbox; then
//!   RemovePodSandbox and the removal of the pod's cgroup (not timed). Its sandbox config has
//!   the cgroup parent the kubelet computes (`/kubepods/besteffort/pod<UID>`), as podgrace's;
//!   runc creates it, where podgrace's kubelet creates it before RunPodSandbox (timed).
//! * **podgrace**: the same pod as a manifest through podgrace's kubelet
//!   ([`run_pod`] on a [`ContainerdRuntime`], what `podgrace run --runtime containerd` does):
//!   from `run_pod` until the pod's phase is `Running` (the kubelet saw the container start),
//!   then `kubectl delete` with default flags (grace 30 s, no preStop) until the pod worker has
//!   seen the container exit and stopped the sandbox ([`PodHandle::wait`] returns); then
//!   RemovePodSandbox (not timed).
//!
//! Between the two, 300 ms pass untimed (the signal logger installs its SIGTERM handler as it
//! starts; a PID 1 without one ignores SIGTERM).
//!
//! Figures, milliseconds, nearest-rank percentiles over the pods of each way:
//! * **start**: the request until the container is seen running;
//! * **stop**: the delete (or StopContainer) until the exit is seen and the sandbox stopped.
//!
//! Pods use the CNI network unless `--host-network` is given. The two ways alternate pod by
//! pod so that both see the same load. Every sandbox either way made is removed; the sandboxes
//! labelled by this run that containerd still lists at the end are printed (`leaked
//! sandboxes`, 0 expected).

use std::collections::HashMap;
use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use podgrace_core::manifest;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_cri::v1 as cri;
use podgrace_cri::v1::image_service_client::ImageServiceClient;
use podgrace_cri::v1::runtime_service_client::RuntimeServiceClient;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{run_pod, PodCommand, PodHandle, PodOptions, PodWorkerState};
use podgrace_node::runtime::{CallContext, ContainerdRuntime, RuntimeService};
use tonic::transport::{Channel, Endpoint, Uri};

type BoxError = Box<dyn Error + Send + Sync>;

/// The label every sandbox of this run carries (both ways), with the run's pid as its value.
const BENCH_LABEL: &str = "podgrace.io/bench";
/// Bounds on one pod's phases, so a broken run ends with an error instead of hanging.
const LIMIT: Duration = Duration::from_secs(60);
/// Time left between the start and the stop, not timed: the signal logger installs its SIGTERM
/// handler right after it starts, and a PID 1 without one ignores SIGTERM (an early stop would
/// wait out the 30 s grace, either way).
const SETTLE: Duration = Duration::from_millis(300);
/// How often the direct client asks ContainerStatus while it waits for a state.
const POLL: Duration = Duration::from_millis(2);

struct Args {
    socket: PathBuf,
    image: String,
    pods: usize,
    host_network: bool,
}

fn usage() -> String {
    "usage: bench_cri --socket SOCK --image REF [--pods N] [--host-network]".into()
}

fn parse_args(args: &[String]) -> Result<Args, BoxError> {
    let mut socket = None;
    let mut image = None;
    let mut pods = 50;
    let mut host_network = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value\n{}", usage()))
        };
        match a.as_str() {
            "--socket" => socket = Some(PathBuf::from(value("--socket")?)),
            "--image" => image = Some(value("--image")?),
            "--pods" => pods = value("--pods")?.parse()?,
            "--host-network" => host_network = true,
            "-h" | "--help" => {
                println!("{}", usage());
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}\n{}", usage()).into()),
        }
    }
    if !(1..=500).contains(&pods) {
        return Err("--pods must be 1 to 500".into());
    }
    Ok(Args {
        socket: socket.ok_or_else(|| format!("--socket is required\n{}", usage()))?,
        image: image.ok_or_else(|| format!("--image is required\n{}", usage()))?,
        pods,
        host_network,
    })
}

async fn channel(socket: &std::path::Path) -> Result<Channel, BoxError> {
    let path = socket.to_path_buf();
    Ok(Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(5))
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(s))
            }
        }))
        .await?)
}

/// One pod's figures.
#[derive(Clone, Copy)]
struct Sample {
    start: Duration,
    stop: Duration,
}

fn namespaces(host_network: bool) -> cri::NamespaceOption {
    cri::NamespaceOption {
        network: if host_network {
            cri::NamespaceMode::Node as i32
        } else {
            cri::NamespaceMode::Pod as i32
        },
        pid: cri::NamespaceMode::Container as i32,
        ipc: cri::NamespaceMode::Pod as i32,
        ..Default::default()
    }
}

async fn wait_state(
    rt: &mut RuntimeServiceClient<Channel>,
    id: &str,
    want: cri::ContainerState,
) -> Result<(), BoxError> {
    let until = Instant::now() + LIMIT;
    loop {
        let s = rt
            .container_status(cri::ContainerStatusRequest {
                container_id: id.into(),
                verbose: false,
            })
            .await?
            .into_inner()
            .status
            .ok_or("ContainerStatus without a status")?;
        if s.state == want as i32 {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!("container {id} not {want:?} within {LIMIT:?}").into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The direct way: crictl's calls, timed.
async fn direct(
    ch: &Channel,
    args: &Args,
    i: usize,
    log_root: &std::path::Path,
) -> Result<Sample, BoxError> {
    let mut rt = RuntimeServiceClient::new(ch.clone());
    let mut img = ImageServiceClient::new(ch.clone());
    let name = format!("direct-{i}");
    let log_dir = log_root.join(&name);
    std::fs::create_dir_all(&log_dir)?;
    let ns = namespaces(args.host_network);
    let labels: HashMap<String, String> =
        [(BENCH_LABEL.to_string(), std::process::id().to_string())].into();
    let uid = format!("bench-{}-{i}", std::process::id());
    // The cgroup parent the kubelet hands containerd for this BestEffort pod, as podgrace
    // does (runc creates it here; it is removed after, untimed).
    let cgroup_parent = podgrace_node::kubelet::cri::pod_cgroup_parent(
        podgrace_core::rules::qos::QosClass::BestEffort,
        &uid,
    );
    let sandbox_config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.clone(),
            uid: uid.clone(),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: name.clone(),
        log_directory: log_dir.display().to_string(),
        labels: labels.clone(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: cgroup_parent.clone(),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(ns.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let t0 = Instant::now();
    let present = img
        .image_status(cri::ImageStatusRequest {
            image: Some(cri::ImageSpec {
                image: args.image.clone(),
                ..Default::default()
            }),
            verbose: false,
        })
        .await?
        .into_inner()
        .image
        .is_some();
    if !present {
        return Err(format!("image {} is not in containerd", args.image).into());
    }
    let sandbox = rt
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(sandbox_config.clone()),
            runtime_handler: String::new(),
        })
        .await?
        .into_inner()
        .pod_sandbox_id;
    let timed = async {
        let id = rt
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: sandbox.clone(),
                config: Some(cri::ContainerConfig {
                    metadata: Some(cri::ContainerMetadata {
                        name: "app".into(),
                        attempt: 0,
                    }),
                    image: Some(cri::ImageSpec {
                        image: args.image.clone(),
                        ..Default::default()
                    }),
                    log_path: "app/0.log".into(),
                    linux: Some(cri::LinuxContainerConfig {
                        resources: None,
                        security_context: Some(cri::LinuxContainerSecurityContext {
                            namespace_options: Some(ns.clone()),
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                }),
                sandbox_config: Some(sandbox_config.clone()),
            })
            .await?
            .into_inner()
            .container_id;
        rt.start_container(cri::StartContainerRequest {
            container_id: id.clone(),
        })
        .await?;
        wait_state(&mut rt, &id, cri::ContainerState::ContainerRunning).await?;
        let start = t0.elapsed();
        tokio::time::sleep(SETTLE).await;
        let t1 = Instant::now();
        rt.stop_container(cri::StopContainerRequest {
            container_id: id.clone(),
            timeout: 30,
        })
        .await?;
        wait_state(&mut rt, &id, cri::ContainerState::ContainerExited).await?;
        rt.stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: sandbox.clone(),
        })
        .await?;
        Ok::<_, BoxError>(Sample {
            start,
            stop: t1.elapsed(),
        })
    }
    .await;
    rt.remove_pod_sandbox(cri::RemovePodSandboxRequest {
        pod_sandbox_id: sandbox,
    })
    .await?;
    let _ = std::fs::remove_dir_all(&log_dir);
    podgrace_node::runtime::cgroup::remove(&cgroup_parent);
    timed
}

/// The podgrace way: the kubelet over the containerd runtime.
async fn podgrace(rt: &Arc<ContainerdRuntime>, args: &Args, i: usize) -> Result<Sample, BoxError> {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: podgrace-{i}\n  labels: {{{BENCH_LABEL}: \"{}\"}}\nspec:\n  hostNetwork: {}\n  containers:\n  - name: app\n    image: {}\n    imagePullPolicy: IfNotPresent\n",
        std::process::id(),
        args.host_network,
        args.image
    );
    let m = manifest::load(&yaml, "bench.yaml").map_err(|e| e.to_string())?;
    let plan = m.pods().next().ok_or("no pod")?.clone();
    let t0 = Instant::now();
    let pod: PodHandle = run_pod(
        Arc::clone(rt),
        plan,
        PodOptions::default(),
        EventRecorder::new(),
    );
    let mut st = pod.status();
    tokio::time::timeout(LIMIT, st.wait_for(|s| s.phase == PodWorkerState::Running))
        .await
        .map_err(|_| "pod not Running within the limit")??;
    let start = t0.elapsed();
    tokio::time::sleep(SETTLE).await;
    let t1 = Instant::now();
    pod.send(PodCommand::Delete(KubectlDeleteFlags::default()));
    let report = tokio::time::timeout(LIMIT, pod.wait())
        .await
        .map_err(|_| "pod not ended within the limit")??;
    let stop = t1.elapsed();
    if let Some(sb) = &report.sandbox {
        rt.remove_pod_sandbox(&CallContext::background(), sb)
            .await?;
    }
    Ok(Sample { start, stop })
}

fn pct(sorted: &[Duration], p: usize) -> f64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1].as_secs_f64() * 1000.0
}

fn line(way: &str, what: &str, mut v: Vec<Duration>) -> f64 {
    v.sort();
    let p50 = pct(&v, 50);
    println!(
        "{way:<9} {what:<6} p50 {p50:7.1}  p90 {:7.1}  p99 {:7.1}  max {:7.1}  (ms, {} pods)",
        pct(&v, 90),
        pct(&v, 99),
        pct(&v, 100),
        v.len()
    );
    p50
}

async fn leaked(ch: &Channel) -> Result<usize, BoxError> {
    let mut rt = RuntimeServiceClient::new(ch.clone());
    let list = rt
        .list_pod_sandbox(cri::ListPodSandboxRequest {
            filter: Some(cri::PodSandboxFilter {
                label_selector: [(BENCH_LABEL.to_string(), std::process::id().to_string())].into(),
                ..Default::default()
            }),
        })
        .await?
        .into_inner();
    Ok(list.items.len())
}

async fn bench(args: Args) -> Result<(), BoxError> {
    let log_root = std::env::temp_dir().join(format!("podgrace-bench-cri-{}", std::process::id()));
    let ch = channel(&args.socket).await?;
    let (rt, mut output) = ContainerdRuntime::connect(&args.socket, &log_root.join("podgrace"))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move { while output.recv().await.is_some() {} });
    let v = rt.version();
    println!(
        "{} {} (CRI {}), {} PLEG; {} pods each way, {} network; load average {}",
        v.runtime_name,
        v.runtime_version,
        v.runtime_api_version,
        if rt.evented() { "evented" } else { "relist" },
        args.pods,
        if args.host_network { "host" } else { "CNI" },
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let rt = Arc::new(rt);
    // One warm-up of each way (first connections, the image's first unpack).
    direct(&ch, &args, usize::MAX, &log_root).await?;
    podgrace(&rt, &args, usize::MAX).await?;
    let mut d = Vec::new();
    let mut p = Vec::new();
    for i in 0..args.pods {
        d.push(direct(&ch, &args, i, &log_root).await?);
        p.push(podgrace(&rt, &args, i).await?);
    }
    let ds = line("direct", "start", d.iter().map(|s| s.start).collect());
    let ps = line("podgrace", "start", p.iter().map(|s| s.start).collect());
    let dt = line("direct", "stop", d.iter().map(|s| s.stop).collect());
    let pt = line("podgrace", "stop", p.iter().map(|s| s.stop).collect());
    println!(
        "podgrace / direct (p50): start {:.2}x, stop {:.2}x",
        ps / ds,
        pt / dt
    );
    println!("leaked sandboxes: {}", leaked(&ch).await?);
    drop(rt);
    let _ = std::fs::remove_dir_all(&log_root);
    Ok(())
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_cri: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(bench(args)) {
        eprintln!("bench_cri: {e}");
        std::process::exit(1);
    }
}
