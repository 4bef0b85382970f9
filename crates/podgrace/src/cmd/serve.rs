//! `podgrace serve`: a single-node Kubernetes API server on this machine, closed by default
//! (127.0.0.1 only unless `--bind`, TLS with its own CA, a bearer token), with a kubeconfig
//! for kubectl and client libraries. Ctrl-C (or SIGTERM) deletes every pod as a node drain
//! would and exits when they are gone; a second one exits at once. With graceful node
//! shutdown configured (`--shutdown-grace-period`, as on the kubelet, where it is off by
//! default), Ctrl-C or SIGTERM is the node shutting down instead: the kubelet's shutdown
//! manager kills the pods by priority group without deleting them (they stay `Failed`,
//! reason `Terminated`), then serve exits. `podgrace node shutdown` shuts the node down
//! while serve keeps serving the API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use podgrace_api::options::DeleteOptions;
use podgrace_api::{Api, ApiConfig};

use podgrace_kubelet::runtimes::Shared;
use podgrace_kubelet::{KubeletConfig, KubeletHandle, ProcessRuntimes};
use podgrace_node::runtime::RuntimeChoice;

use crate::{BadInput, OnMachine as _, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// The address to listen on. The API starts processes on this machine: anything but
    /// 127.0.0.1 lets others reach it (they still need the token).
    #[arg(long, default_value = "127.0.0.1:6443")]
    bind: SocketAddr,
    /// Where to write the kubeconfig (mode 0600: it holds the token).
    #[arg(long, default_value = "./podgrace.kubeconfig")]
    kubeconfig_out: PathBuf,
    /// The node's name (the one node every pod is bound to): a lowercase RFC 1123 subdomain,
    /// as the Node object's name must be.
    #[arg(long, default_value = "podgrace", value_parser = parse_node_name)]
    node_name: String,
    #[command(flatten)]
    version: super::args::VersionArgs,
    /// Watch events kept per resource; a watch from an older resourceVersion gets 410 Gone.
    #[arg(long, default_value_t = podgrace_api::store::DEFAULT_HISTORY)]
    watch_history: usize,
    /// How often a watch that allows bookmarks gets one (kube-apiserver: 1m).
    #[arg(long, default_value = "1m", value_parser = super::parse_duration)]
    bookmark_interval: Duration,
    #[command(flatten)]
    pod_network: super::args::PodNetworkArgs,
    /// kube-proxy's endpoint lag L, how long an EndpointSlice change takes to reach the
    /// Services' listeners: a duration, in-cluster (1 s), ingress (30 s), cloud-lb (120 s), or
    /// kube-proxy (its bounded-frequency sync: at once while a sync slot is free, else about
    /// --iptables-min-sync-period later).
    #[arg(long, default_value = "1s", value_parser = super::drill::parse_lag)]
    endpoint_lag: super::drill::LagArg,
    /// kube-proxy's --iptables-min-sync-period, for --endpoint-lag kube-proxy (`1s`).
    #[arg(long, default_value = "1s", value_parser = super::parse_duration)]
    iptables_min_sync_period: Duration,
    /// Write every connection kube-proxy proxies (Service, listener, pod, outcome) and every
    /// pinning of a client connection to a pod to FILE, as JSON lines.
    #[arg(long, value_name = "FILE")]
    proxy_records: Option<PathBuf>,
    #[command(flatten)]
    runtime: super::RuntimeArgs,
    #[command(flatten)]
    kubelet: super::args::KubeletArgs,
    #[command(flatten)]
    eviction: super::args::EvictionArgs,
    #[command(flatten)]
    shutdown: super::args::ShutdownArgs,
    /// The kubelet's nodeStatusUpdateFrequency: how often the Node's conditions are computed
    /// and written when they changed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::parse_duration)]
    node_status_update_frequency: Duration,
}

/// The longest endpoint lag: 24 hours.
const MAX_LAG: Duration = Duration::from_secs(24 * 3600);
/// `--node-name`: the Node's `metadata.name` rule (`ValidateNodeName`, a DNS subdomain), so
/// that the kubelet's registration is not refused after start.
fn parse_node_name(s: &str) -> Result<String, String> {
    let problems = podgrace_api::meta::subdomain_messages(s);
    if s.is_empty() {
        return Err("must be non-empty".into());
    }
    match problems.is_empty() {
        true => Ok(s.to_string()),
        false => Err(problems.join(", ")),
    }
}

/// The container logs of this serve (the kubelet's `/var/log/pods`), removed at exit.
struct LogDir {
    path: PathBuf,
}

impl LogDir {
    fn create() -> std::io::Result<LogDir> {
        let path = std::env::temp_dir().join(format!("podgrace-serve-{}-pods", std::process::id()));
        std::fs::create_dir_all(&path)?;
        Ok(LogDir { path })
    }
}

impl Drop for LogDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    if args.watch_history == 0 {
        return Err(BadInput("--watch-history must be at least 1".into()).into());
    }
    if args.bookmark_interval.is_zero() {
        return Err(BadInput("--bookmark-interval must be more than 0".into()).into());
    }
    if matches!(args.endpoint_lag, super::drill::LagArg::Range { .. }) {
        return Err(BadInput(
            "--endpoint-lag: serve takes one lag (a duration, a preset or kube-proxy); a range of per-pod lags is the drill's"
                .into(),
        )
        .into());
    }
    if matches!(args.endpoint_lag, super::drill::LagArg::Fixed(l) if l > MAX_LAG) {
        return Err(BadInput("--endpoint-lag must be at most 24h".into()).into());
    }
    if args.iptables_min_sync_period > MAX_LAG {
        return Err(BadInput("--iptables-min-sync-period must be at most 24h".into()).into());
    }
    if args.node_status_update_frequency.is_zero() {
        return Err(BadInput("--node-status-update-frequency must be more than 0".into()).into());
    }
    // Checked before anything starts.
    args.eviction
        .settings(&args.kubelet, args.version.kubernetes_version)?;
    args.shutdown.groups()?;
    let rt = tokio::runtime::Runtime::new().on_machine(|| "starting the runtime".into())?;
    rt.block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<Outcome> {
    use tokio::signal::unix::{signal, SignalKind};
    // Installed before anything is printed, so that a Ctrl-C right after start is a drain.
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let log_dir = LogDir::create().on_machine(|| "creating the container log directory".into())?;
    // containerd first: nothing is served when it cannot be reached, and the pods an earlier
    // serve left there are stopped before this one's API answers.
    let containerd = match &args.runtime.runtime {
        RuntimeChoice::Process => None,
        RuntimeChoice::Containerd { socket } => {
            // containerd writes the CRI log files itself, where the API's `log` reads them.
            let (rt, _output) = super::connect_containerd(
                socket,
                Some(&log_dir.path),
                " (no pod object has its UID: this API's store is new at each start, and the kubelet kills the pods it does not know)",
            )
            .await?;
            Some(Arc::new(rt))
        }
    };
    // The ClusterIPs and NodePorts this serve's kube-proxy binds on this machine's loopback:
    // none that another serve holds or anything has bound.
    let claims = podgrace_api::claims::Claims::new(
        std::path::Path::new(podgrace_api::claims::DEFAULT_DIR),
        std::net::Ipv4Addr::LOCALHOST.into(),
    )
    .on_machine(|| format!("creating {}", podgrace_api::claims::DEFAULT_DIR))?;
    let api = Api::new(ApiConfig {
        claims: Some(Arc::new(claims)),
        log_dir: Some(log_dir.path.clone()),
        node_name: args.node_name.clone(),
        history: args.watch_history,
        kube_version: args.version.kubernetes_version,
        bookmark_interval: args.bookmark_interval,
        node_proxy: Some(kubelet_proxy(args.node_name.clone())),
        ..ApiConfig::default()
    });
    let creds = podgrace_api::tls::generate(&[args.bind.ip()])
        .context("creating the server's certificate")?;
    let tls = podgrace_api::tls::server_config(&creds).context("configuring TLS")?;
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .on_machine(|| format!("listening on {}", args.bind))?;
    let addr = listener
        .local_addr()
        .context("reading the listening address")?;
    let server = podgrace_api::kubeconfig::server_url(addr);
    let text = podgrace_api::kubeconfig::render(&server, &creds.ca_pem, &creds.token);
    podgrace_api::kubeconfig::write(&args.kubeconfig_out, &text)
        .with_context(|| format!("writing {}", args.kubeconfig_out.display()))?;
    let abs = std::fs::canonicalize(&args.kubeconfig_out).unwrap_or(args.kubeconfig_out.clone());
    print!(
        "{}",
        crate::render::serve::banner(args.version.kubernetes_version, &server, &abs)
    );
    // The kubelet's eviction and node shutdown managers, their Events on the Node
    // written through the API.
    let eviction = args
        .eviction
        .settings(&args.kubelet, args.version.kubernetes_version)?;
    let memory_reservation = hard_memory_reservation(&eviction);
    let node_memory = eviction.node_memory_bytes;
    let managers = Arc::new(podgrace_kubelet::managers::NodeManagers::start(
        podgrace_api::in_process_client(api.clone()),
        podgrace_kubelet::Clock::now(),
        podgrace_kubelet::managers::ManagersConfig {
            node_name: args.node_name.clone(),
            cgroup_root: match &args.runtime.runtime {
                RuntimeChoice::Process => podgrace_node::runtime::cgroup::process_root(),
                RuntimeChoice::Containerd { .. } => String::new(),
            },
            eviction: Some(eviction),
            shutdown: args.shutdown.groups()?,
        },
    ));
    let router = podgrace_api::http::authenticated_router(api.clone(), creds.token.clone()).route(
        &shutdown_path(&args.node_name),
        axum::routing::post({
            let managers = managers.clone();
            let token = creds.token.clone();
            move |req: axum::extract::Request| node_shutdown(managers.clone(), token.clone(), req)
        }),
    );
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let listen = tokio::spawn(podgrace_api::listener::serve(
        listener,
        tls,
        router,
        async {
            let _ = stop_rx.await;
        },
    ));
    // The local kubelet: a client of this API like any other (in-process, over the router).
    let kubelet_config = KubeletConfig {
        node_name: args.node_name.clone(),
        version: args.version.kubernetes_version,
        log_dir: Some(log_dir.path.clone()),
        active: managers.active(),
        health: Some(managers.health()),
        admit: Some(managers.admission()),
        node_status_update_frequency: args.node_status_update_frequency,
        node_memory_bytes: u64::try_from(node_memory).ok(),
        memory_eviction_reservation: memory_reservation,
        ..KubeletConfig::default()
    };
    let kubelet_client = podgrace_api::in_process_client(api.clone());
    let kubelet: KubeletHandle = match &containerd {
        None => podgrace_kubelet::start(
            kubelet_client,
            ProcessRuntimes {
                network: args.pod_network.pod_network.clone(),
            },
            kubelet_config,
        ),
        Some(rt) => {
            let v = rt.version();
            let kubelet_config = KubeletConfig {
                container_runtime_version: format!("{}://{}", v.runtime_name, v.runtime_version),
                ..kubelet_config
            };
            podgrace_kubelet::start(kubelet_client, Shared(rt.clone()), kubelet_config)
        }
    };
    // The controllers (ReplicaSet, Deployment, garbage collector, EndpointSlice, disruption),
    // clients of the API in this process as kube-controller-manager's are of a cluster's.
    let mut controllers = podgrace_controllers::spawn(
        podgrace_api::in_process_client(api.clone()),
        podgrace_controllers::Config {
            kube_version: args.version.kubernetes_version,
        },
    );
    // kube-proxy: every Service's ClusterIP:port and 127.0.0.1:nodePort, following the
    // EndpointSlices with the endpoint lag.
    let records: Option<Box<dyn std::io::Write + Send>> = match &args.proxy_records {
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        ))),
        None => None,
    };
    let lag = args.endpoint_lag.model(args.iptables_min_sync_period, 1);
    let kube_proxy = podgrace_drill::kubeproxy::KubeProxy::start(
        podgrace_api::in_process_client(api.clone()),
        podgrace_drill::kubeproxy::KubeProxyConfig {
            lag,
            node_address: std::net::Ipv4Addr::LOCALHOST.into(),
            records,
        },
    );
    print!("{}", crate::render::serve::kube_proxy(lag));
    tokio::select! {
        _ = sigint.recv() => {}
        _ = sigterm.recv() => {}
    }
    if managers.shutdown_configured() && !managers.shutting_down() {
        // Graceful node shutdown (logind's PrepareForShutdown on a real node): the pods are
        // killed by priority group and stay as the kubelet leaves them; then the node is gone.
        eprintln!("podgrace serve: node shutdown: killing the pods by priority group (Ctrl-C again to exit at once)");
        let done = tokio::select! {
            r = managers.shutdown() => Some(r),
            _ = sigint.recv() => None,
            _ = sigterm.recv() => None,
        };
        match done {
            Some(records) => {
                eprint!("{}", crate::render::serve::shutdown_records(&records));
                controllers.abort_all();
                kubelet.shutdown().await;
                eprintln!("podgrace serve: the node has shut down");
            }
            None => {
                eprintln!("podgrace serve: exiting at once");
                podgrace_node::sandbox::teardown_own();
            }
        }
        drop(kube_proxy);
        let _ = stop_tx.send(());
        let _ = listen.await;
        drop(log_dir);
        return Ok(Outcome::Success);
    }
    // Stopped first, so that the drain's deletes are not answered with replacement pods.
    controllers.abort_all();
    eprintln!("podgrace serve: draining: deleting every pod (Ctrl-C again to exit at once)");
    drain(&api);
    let drained = tokio::select! {
        _ = wait_gone(&api) => true,
        _ = sigint.recv() => false,
        _ = sigterm.recv() => false,
    };
    if drained {
        kubelet.shutdown().await;
        eprintln!("podgrace serve: every pod is gone");
    } else {
        // Not a Kubernetes action: serve exits, and every container process dies with it
        // (PR_SET_PDEATHSIG); the pods' network namespaces go first.
        eprintln!("podgrace serve: exiting at once");
        podgrace_node::sandbox::teardown_own();
        if let Some(rt) = &containerd {
            // containerd's containers outlive serve: its sandboxes are removed at once.
            rt.remove_own_sandboxes(&podgrace_node::runtime::CallContext::background())
                .await;
        }
    }
    drop(kube_proxy);
    let _ = stop_tx.send(());
    let _ = listen.await;
    drop(log_dir);
    Ok(Outcome::Success)
}

/// The allocatable memory the hard `memory.available` threshold keeps back, bytes
/// (`hardEvictionReservation`: its quantity, or its percentage of the capacity).
fn hard_memory_reservation(e: &podgrace_node::eviction::EvictionSettings) -> u64 {
    e.config
        .thresholds
        .iter()
        .filter(|t| {
            t.is_hard()
                && t.signal == podgrace_core::rules::eviction::EvictionSignal::MemoryAvailable
        })
        .filter_map(|t| t.quantity(Some(e.node_memory_bytes)))
        .map(|q| u64::try_from(q).unwrap_or(0))
        .sum()
}

/// The path `podgrace node shutdown` posts to (not a Kubernetes API: the node's own
/// announcement of its shutdown, what systemd-logind's `PrepareForShutdown` is to a kubelet).
pub fn shutdown_path(node: &str) -> String {
    format!("/podgrace/v1/nodes/{node}/shutdown")
}

/// `POST /podgrace/v1/nodes/NODE/shutdown` with the API's bearer token: the node shuts down
/// (its shutdown manager kills the pods by priority group) and the answer, once it is done, is
/// the JSON of what was killed; serve goes on serving the API (the node stays NotReady).
/// Without graceful node shutdown configured: 409 with the kubelet's reason.
async fn node_shutdown(
    managers: Arc<podgrace_kubelet::managers::NodeManagers>,
    token: String,
    req: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !podgrace_api::http::authenticated(&req, &token) {
        return (http::StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
    }
    if !managers.shutdown_configured() {
        return (
            http::StatusCode::CONFLICT,
            "graceful node shutdown is off: serve was started without --shutdown-grace-period or --shutdown-grace-period-by-pod-priority\n",
        )
            .into_response();
    }
    let t0 = std::time::Instant::now();
    let records = managers.shutdown().await;
    let body = crate::render::serve::shutdown_json(&records, t0);
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Deletes every pod with default options (each its own grace period), as a node drain does.
fn drain(api: &Api) {
    let pods = podgrace_api::resource::find("", "v1", "pods").expect("pods are served");
    for (ns, name) in api.pod_names() {
        let opts = DeleteOptions {
            present: true,
            ..Default::default()
        };
        if let Err(e) = api.delete(pods, &ns, &name, &opts) {
            eprintln!("podgrace serve: deleting pod {ns}/{name}: {e}");
        }
    }
}

async fn wait_gone(api: &Api) {
    let mut changes = api.subscribe("pods");
    while !api.pod_names().is_empty() {
        let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
    }
}

/// The API server's node proxy to this machine's kubelet: it serves `configz` (its settings,
/// [`podgrace_kubelet::configz`]) and nothing else (`404 page not found`); other nodes have no
/// kubelet to reach.
fn kubelet_proxy(node: String) -> podgrace_api::api::NodeProxy {
    podgrace_api::api::NodeProxy(Arc::new(move |n: &str, path: &str| {
        if n != node {
            return Err(format!("node {n} has no kubelet here"));
        }
        Ok((path == podgrace_kubelet::configz::CONFIGZ_PATH)
            .then(podgrace_kubelet::configz::configz))
    }))
}
