//! `podgrace drill [FILE]`: replicas behind a local service proxy whose endpoint removal lags
//! like kube-proxy's, steady load, a rollout, delete or eviction, and every failed request
//! counted and attributed to a termination phase. With no FILE it runs the built-in demo app
//! twice, without and with the fix, and shows both side by side.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use podgrace_core::manifest;
use podgrace_core::plan::PodPlan;
use podgrace_drill::endpoints::{LagModel, LagPreset, LagRange};
use podgrace_drill::flags::defaults::{
    CONNECTIONS as DEFAULT_CONNECTIONS, METHOD as DEFAULT_METHOD, PATH as DEFAULT_PATH,
    STREAM_SECONDS as DEFAULT_STREAM_SECONDS, TIMEOUT as DEFAULT_TIMEOUT,
};
use podgrace_drill::flags::DrillFlags;
use podgrace_drill::html::{html_report, suffixed_path, write_report, DEMO_REPORT_SUFFIXES};
use podgrace_drill::load::{ClientKind, Protocol};
use podgrace_drill::proxy::Balancing;
use podgrace_drill::report::{DrillReport, Verdict};
use podgrace_drill::scenario::{
    api, run_drill_on, DrillConfig, DrillOutcome, PodRuntime, Scenario,
};
use podgrace_drill::{demo, template};
use podgrace_node::kubelet::spec::SpecError;
use podgrace_node::runtime::{RuntimeChoice, RuntimeService as _};

use super::args::{
    DeleteArgs, FileArgs, Format, KubeletArgs, OutputArgs, PodNetworkArgs, VersionArgs,
};
use crate::render::drill as render;
use crate::{input, out::Out, BadInput, OnMachine as _, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// A manifest with the pod or Deployment to drill (`-` for stdin, or -f FILE); none runs
    /// the built-in demo, without and with the fix.
    #[command(flatten)]
    file: FileArgs,
    /// rollout (maxSurge 1, maxUnavailable 0), delete (one replica), evict-soft, evict-hard, or
    /// drain (cordon and evict every pod; only through the API: PODGRACE_DRILL_API=1).
    #[arg(long, default_value = "rollout", value_parser = parse_scenario)]
    scenario: Scenario,
    /// --scenario delete's delete: kubectl's --grace-period, --force and --now.
    #[command(flatten)]
    delete: DeleteArgs,
    /// Replicas [default: the Deployment's, else 2; the built-in demo: 3].
    #[arg(long)]
    replicas: Option<usize>,
    /// Requests per second (0: no requests, only the streams of --streams/--idle-streams).
    #[arg(long, default_value_t = 200.0)]
    rps: f64,
    /// The requests' protocol: http1 (HTTP/1.1 keep-alive) or h2c (cleartext HTTP/2, prior
    /// knowledge); the proxy speaks the same.
    #[arg(long, value_enum, default_value_t = ProtocolArg::Http1)]
    protocol: ProtocolArg,
    /// Keep-alive connections of the load (each carries one request at a time).
    #[arg(long, default_value_t = DEFAULT_CONNECTIONS)]
    connections: usize,
    /// Long-lived data streams held open through the drill, like gRPC server-streaming RPCs
    /// (h2c, `GET /stream?seconds=S` to the demo app; each re-opened when it ends).
    #[arg(long, default_value_t = 0)]
    streams: usize,
    /// How long each data stream lasts, seconds.
    #[arg(long, default_value_t = DEFAULT_STREAM_SECONDS)]
    stream_seconds: f64,
    /// Idle streams held open through the drill (h2c, `GET /stream`: no data, never ending by
    /// themselves), like an idle bidi stream an Envoy keeps to an ext_proc server.
    #[arg(long, default_value_t = 0)]
    idle_streams: usize,
    /// How long the load runs (`8s`, `1m`).
    #[arg(long, default_value = "8s", value_parser = super::parse_duration)]
    duration: Duration,
    /// The endpoint lag L: a duration, in-cluster (1 s), ingress (30 s), cloud-lb (120 s),
    /// kube-proxy (its bounded-frequency sync: at once while a sync slot is free, else about
    /// --iptables-min-sync-period later), or MIN..MAX (`0.5s..5s`): each pod a lag of its own,
    /// uniform in the range, drawn with --seed [default: 1s; the built-in demo: 0.5s..5s].
    #[arg(long, value_parser = parse_lag)]
    endpoint_lag: Option<LagArg>,
    /// The seed of the per-pod lags of --endpoint-lag MIN..MAX (the same seed, the same lags)
    /// [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// kube-proxy's --iptables-min-sync-period, for --endpoint-lag kube-proxy (`1s`).
    #[arg(long, default_value = "1s", value_parser = super::parse_duration)]
    iptables_min_sync_period: Duration,
    /// The load's client: keep-alive-careful (reuses connections, drops one the server closed
    /// while idle: urllib3, Go's net/http), keep-alive (writes into a reused connection without
    /// checking), or new-connection (one connection per request) [default: keep-alive-careful;
    /// the built-in demo: new-connection].
    #[arg(long, value_enum)]
    client: Option<ClientArg>,
    /// The proxy in front: kube-proxy (a connection stays on its pod) or ingress (each request
    /// picks an endpoint, as an L7 ingress does).
    #[arg(long, value_enum, default_value_t = ProxyKind::KubeProxy)]
    proxy: ProxyKind,
    /// Request path.
    #[arg(long, default_value = DEFAULT_PATH)]
    path: String,
    /// Request method.
    #[arg(long, default_value = DEFAULT_METHOD)]
    method: String,
    /// Per-request timeout, and the streams' connect timeout (`2s`).
    #[arg(long, default_value = DEFAULT_TIMEOUT, value_parser = super::parse_duration)]
    timeout: Duration,
    /// The port the pods serve on [default: the first containerPort, else the readiness probe's
    /// port].
    #[arg(long)]
    port: Option<u16>,
    /// When the disruption starts after the load (`1s`).
    #[arg(long, default_value = "1s", value_parser = super::parse_duration)]
    disrupt_after: Duration,
    #[command(flatten)]
    kubelet: KubeletArgs,
    #[command(flatten)]
    version: VersionArgs,
    #[command(flatten)]
    pod_network: PodNetworkArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Write a self-contained HTML report with the timeline chart (the demo writes two files,
    /// `-without-prestop` and `-with-prestop` added to the name).
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
    #[command(flatten)]
    runtime: super::RuntimeArgs,
    /// Add the measured latencies of a real runtime (containerd 1.6) to the process runtime's
    /// every stop and restart, as `run --runtime-latency` does: a native sidecar then outlives
    /// the app by what containerd's StopContainer takes to return.
    #[arg(long, value_name = "RUNTIME")]
    runtime_latency: Option<podgrace_core::rules::latency::RuntimeProfile>,
    /// The seed of the latency draws (default: a new one each run, printed).
    #[arg(long, value_name = "N", requires = "runtime_latency")]
    runtime_latency_seed: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProtocolArg {
    Http1,
    H2c,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ClientArg {
    NewConnection,
    KeepAlive,
    KeepAliveCareful,
}

/// `--endpoint-lag`: a fixed lag, kube-proxy's sync, or a range of per-pod lags (drill's;
/// serve's takes the first two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LagArg {
    Fixed(Duration),
    KubeProxy,
    Range { min: Duration, max: Duration },
}

/// `--endpoint-lag` when none is given to `drill FILE`.
const DEFAULT_LAG: LagArg = LagArg::Fixed(Duration::from_secs(1));
/// `--endpoint-lag` when none is given to the built-in demo ([`demo::default_lag`]).
const DEMO_LAG: LagArg = LagArg::Range {
    min: demo::LAG_MIN,
    max: demo::LAG_MAX,
};

impl LagArg {
    /// The lag model with `min_sync` as kube-proxy's minSyncPeriod and `seed` for per-pod lags.
    pub(super) fn model(self, min_sync: Duration, seed: u64) -> LagModel {
        match self {
            LagArg::Fixed(l) => LagModel::Fixed(l),
            LagArg::KubeProxy => LagModel::KubeProxy {
                min_sync_period: min_sync,
                burst: podgrace_drill::sync::BURST_SYNCS,
            },
            LagArg::Range { min, max } => LagModel::PerPod(LagRange { min, max, seed }),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProxyKind {
    KubeProxy,
    Ingress,
}

fn parse_scenario(s: &str) -> Result<Scenario, String> {
    match s {
        "rollout" => Ok(Scenario::Rollout),
        "delete" => Ok(Scenario::Delete),
        "evict-soft" => Ok(Scenario::Evict { hard: false }),
        "evict-hard" => Ok(Scenario::Evict { hard: true }),
        "drain" => Ok(Scenario::Drain),
        _ => Err("expected rollout, delete, evict-soft, evict-hard or drain".into()),
    }
}

pub(super) fn parse_lag(s: &str) -> Result<LagArg, String> {
    if s == "kube-proxy" {
        return Ok(LagArg::KubeProxy);
    }
    if let Some((lo, hi)) = s.split_once("..") {
        let (min, max) = (super::parse_duration(lo)?, super::parse_duration(hi)?);
        if min > max {
            return Err(format!(
                "the range {s:?} ends before it starts (MIN..MAX, such as 0.5s..5s)"
            ));
        }
        return Ok(LagArg::Range { min, max });
    }
    match LagPreset::parse(s) {
        Ok(p) => Ok(LagArg::Fixed(p.lag())),
        Err(_) => super::parse_duration(s)
            .map(LagArg::Fixed)
            .map_err(|e| format!("{e}; or a preset: in-cluster, ingress, cloud-lb, kube-proxy")),
    }
}

/// The settings as the library checks them ([`DrillFlags`]).
fn flags(args: &Args) -> DrillFlags {
    let is_demo = args.file.get().is_none();
    DrillFlags {
        scenario: args.scenario,
        delete_flags_given: args.delete.given(),
        replicas: args.replicas,
        rps: args.rps,
        protocol: protocol(args.protocol),
        balancing: balancing(args.proxy),
        connections: args.connections,
        streams: args.streams,
        stream_seconds: args.stream_seconds,
        idle_streams: args.idle_streams,
        duration: args.duration,
        endpoint_lag_max: match args.endpoint_lag {
            Some(LagArg::Fixed(l) | LagArg::Range { max: l, .. }) => Some(l),
            _ => None,
        },
        // The demo's default lag is a range.
        lag_is_range: match args.endpoint_lag {
            Some(l) => matches!(l, LagArg::Range { .. }),
            None => is_demo,
        },
        seed_given: args.seed.is_some(),
        iptables_min_sync_period: args.iptables_min_sync_period,
        path: args.path.clone(),
        method: args.method.clone(),
        timeout: args.timeout,
        port: args.port,
        disrupt_after: args.disrupt_after,
    }
}

fn protocol(p: ProtocolArg) -> Protocol {
    match p {
        ProtocolArg::Http1 => Protocol::Http1,
        ProtocolArg::H2c => Protocol::H2c,
    }
}

fn balancing(p: ProxyKind) -> Balancing {
    match p {
        ProxyKind::KubeProxy => Balancing::PerConnection,
        ProxyKind::Ingress => Balancing::PerRequest,
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let delete_flags = args.delete.flags()?;
    let flags = flags(&args);
    flags.check().map_err(|e| BadInput(e.0))?;
    if let Some(path) = &args.report {
        // Found now, not after the whole drill has run.
        if args.file.get().is_some() {
            check_writable(path)?;
        } else {
            for suffix in DEMO_REPORT_SUFFIXES {
                check_writable(&suffixed_path(path, suffix))?;
            }
        }
    }
    for u in flags.unused() {
        eprintln!("drill: {u}");
    }
    let method = flags.method_and_path().map_err(|e| BadInput(e.0))?;
    let is_demo = args.file.get().is_none();
    let lag_arg = args
        .endpoint_lag
        .unwrap_or(if is_demo { DEMO_LAG } else { DEFAULT_LAG });
    let client = args.client.unwrap_or(if is_demo {
        ClientArg::NewConnection
    } else {
        ClientArg::KeepAliveCareful
    });
    let config = |port: u16, replicas: usize| DrillConfig {
        scenario: args.scenario,
        replicas,
        rps: args.rps,
        protocol: protocol(args.protocol),
        data_streams: args.streams,
        stream_seconds: args.stream_seconds,
        idle_streams: args.idle_streams,
        duration: args.duration,
        lag: lag_arg.model(args.iptables_min_sync_period, args.seed.unwrap_or(1)),
        client: match client {
            ClientArg::NewConnection => ClientKind::NewConnection,
            ClientArg::KeepAlive => ClientKind::KeepAlive,
            ClientArg::KeepAliveCareful => ClientKind::KeepAliveCareful,
        },
        balancing: balancing(args.proxy),
        path: args.path.clone(),
        method: method.clone(),
        timeout: args.timeout,
        connections: args.connections,
        port,
        disrupt_after: args.disrupt_after,
        version: args.version.kubernetes_version,
        eviction_max_pod_grace_period: args.kubelet.eviction_max_pod_grace_period,
        network: args.pod_network.pod_network.clone(),
        delete: delete_flags,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .on_machine(|| "cannot start the async runtime".into())?;
    let mut interrupt = {
        let _in_runtime = runtime.enter();
        Interrupt::install().on_machine(|| "cannot watch SIGINT and SIGTERM".into())?
    };
    let images = args.runtime.runtime != RuntimeChoice::Process;
    // Bad input is found before anything starts, containerd included.
    let template = match args.file.get() {
        Some(file) => Some(load_template(file, &args, images)?),
        None => None,
    };
    if args.runtime_latency.is_some() && args.runtime.runtime != RuntimeChoice::Process {
        return Err(BadInput(
            "--runtime-latency adds a real runtime's latencies to the process runtime; with --runtime containerd the real ones apply".into(),
        )
        .into());
    }
    let pods = match &args.runtime.runtime {
        RuntimeChoice::Process => match args.runtime_latency {
            Some(profile) => {
                let seed = args
                    .runtime_latency_seed
                    .unwrap_or_else(super::run::fresh_seed);
                let l = profile.latencies();
                eprintln!("{}", render::runtime_latencies(l.runtime, seed));
                PodRuntime::ProcessWithLatencies(l, seed)
            }
            None => PodRuntime::Process,
        },
        RuntimeChoice::Containerd { socket } => {
            // Connecting stops an earlier podgrace's pods with their grace: a signal meanwhile
            // ends podgrace, as the same signal before the handlers were installed would.
            let (rt, mut output) =
                interrupt.or_exit(&runtime, super::connect_containerd(socket, None, ""))?;
            // The pods' own output is not part of the drill's report.
            runtime.spawn(async move { while output.recv().await.is_some() {} });
            PodRuntime::Containerd(Arc::new(rt))
        }
    };
    match template {
        Some((plan, replicas, port, text)) => {
            let cfg = config(port, args.replicas.unwrap_or(replicas));
            let outcome = runtime.block_on(drill_once(
                &mut interrupt,
                &pods,
                &plan,
                Some(&text),
                &cfg,
                &args,
                "drill",
            ))?;
            match args.output.output {
                Format::Json => print_json(&outcome.report)?,
                Format::Text => write!(Out, "{}", render::summary(&outcome))?,
            }
            if let Some(path) = &args.report {
                write_html(path, &render::html_title(&plan.name), &outcome)?;
            }
            Ok(if outcome.report.verdict == Verdict::Pass {
                Outcome::Success
            } else {
                Outcome::CheckFailed
            })
        }
        None => demo(&runtime, &mut interrupt, &pods, &args, config),
    }
}

/// The built-in demo, three drills of the demo app under the same load and lags: without a
/// preStop (it exits on SIGTERM); with a fixed preStop sleep and an app that drains; with
/// `podgrace prestop-wait` as an exec preStop hook and the same draining app.
fn demo(
    runtime: &tokio::runtime::Runtime,
    interrupt: &mut Interrupt,
    pods: &PodRuntime,
    args: &Args,
    config: impl Fn(u16, usize) -> DrillConfig,
) -> anyhow::Result<Outcome> {
    let exe = std::env::current_exe().context("cannot find podgrace's own executable")?;
    let mut cfg = config(demo::PORT, args.replicas.unwrap_or(demo::REPLICAS));
    let sleep = demo::sleep_seconds(cfg.lag);
    let image = match pods {
        PodRuntime::Process | PodRuntime::ProcessWithLatencies(..) => None,
        PodRuntime::Containerd(rt) => Some(demo_image(runtime, rt, &exe)?),
    };
    let unfixed = demo::plan(&exe, image.as_deref(), demo::PreStop::None)?;
    let fixed = demo::plan(&exe, image.as_deref(), demo::PreStop::Sleep(sleep))?;
    let waiting = demo::plan(&exe, image.as_deref(), demo::wait_hook(cfg.lag))?;
    let yaml = |p| demo::manifest_yaml(&exe, image.as_deref(), p);
    let (unfixed_yaml, fixed_yaml, waiting_yaml) = (
        yaml(demo::PreStop::None),
        yaml(demo::PreStop::Sleep(sleep)),
        yaml(demo::wait_hook(cfg.lag)),
    );
    if let Some(needed) = demo::load_needed(cfg.duration, args.disrupt_after, cfg.replicas, cfg.lag)
    {
        eprintln!(
            "{}",
            render::load_extended(needed, cfg.duration, demo::longest_hook_seconds(cfg.lag))
        );
        cfg.duration = needed;
    }
    let a = runtime.block_on(drill_once(
        interrupt,
        pods,
        &unfixed,
        Some(&unfixed_yaml),
        &cfg,
        args,
        "1/3 without preStop",
    ))?;
    let b = runtime.block_on(drill_once(
        interrupt,
        pods,
        &fixed,
        Some(&fixed_yaml),
        &cfg,
        args,
        "2/3 preStop sleep",
    ))?;
    let c = runtime.block_on(drill_once(
        interrupt,
        pods,
        &waiting,
        Some(&waiting_yaml),
        &cfg,
        args,
        "3/3 prestop-wait",
    ))?;
    let quiet = demo::QUIET.as_secs_f64();
    match args.output.output {
        Format::Json => {
            let mut out = std::io::BufWriter::new(Out);
            serde_json::to_writer_pretty(&mut out, &[&a.report, &b.report, &c.report])?;
            writeln!(out)?;
            out.flush()?;
        }
        Format::Text => write!(Out, "{}", render::demo([&a, &b, &c], sleep, quiet, cfg.lag))?,
    }
    if let Some(path) = &args.report {
        let titles = render::demo_html_titles(sleep);
        for ((suffix, title), run) in DEMO_REPORT_SUFFIXES.iter().zip(&titles).zip([&a, &b, &c]) {
            write_html(&suffixed_path(path, suffix), title, run)?;
        }
    }
    // The demo shows the race and its fix: it succeeds when the prestop-wait run loses nothing.
    Ok(if c.report.verdict == Verdict::Pass {
        Outcome::Success
    } else {
        Outcome::CheckFailed
    })
}

/// The demo app's image for containerd: podgrace's own executable and the libraries it loads,
/// imported as `podgrace.local/demo-app:SHA` (SHA: the executable's first 12 hex digits of
/// sha256, so a rebuilt podgrace gets a new image and an unchanged one is not imported twice).
fn demo_image(
    runtime: &tokio::runtime::Runtime,
    rt: &podgrace_node::runtime::ContainerdRuntime,
    exe: &Path,
) -> anyhow::Result<String> {
    let bytes = std::fs::read(exe).with_context(|| format!("reading {}", exe.display()))?;
    let tag = &podgrace_node::runtime::oci::sha256_hex(&bytes)[..12];
    let reference = format!("podgrace.local/demo-app:{tag}");
    let ctx = podgrace_node::runtime::CallContext::background();
    let have = runtime
        .block_on(rt.image_status(&ctx, &reference))
        .context("asking containerd for the demo image")?;
    if have.is_none() {
        eprintln!("drill: importing the demo app's image {reference} (podgrace's own binary) into containerd");
        podgrace_node::runtime::oci::import_executable(rt.socket(), exe, &reference)
            .context("building the demo app's image")?;
    }
    Ok(reference)
}

/// The pod template of FILE, the replicas it asks for, and the port it serves on.
fn load_template(
    file: &Path,
    args: &Args,
    images: bool,
) -> anyhow::Result<(PodPlan, usize, u16, String)> {
    let doc = input::read_one(file)?;
    let m = manifest::load_with(
        &doc.text,
        &doc.name,
        &manifest::LoadOptions {
            kube_version: args.version.kubernetes_version,
        },
    )
    .map_err(|e| BadInput(e.to_string()))?;
    super::print_warnings(&m);
    let plans: Vec<&PodPlan> = m.pods().collect();
    let plan = match plans.as_slice() {
        [one] => m
            .resolve_env_from(one)
            .map_err(|e| BadInput(format!("{}: {e}", doc.name)))?,
        [] => return Err(BadInput(format!("{}: no pod or pod template", doc.name)).into()),
        many => {
            return Err(BadInput(format!(
                "{}: {} pods in the file; drill takes one",
                doc.name,
                many.len()
            ))
            .into())
        }
    };
    // What cannot run as a local process is found now, before any pod starts.
    for c in plan.init_containers.iter().chain(plan.containers.iter()) {
        podgrace_node::kubelet::spec::container_spec(c, None, false, images).map_err(
            |e| match e {
                // Placed at FILE:LINE:COL: PATH already.
                SpecError::NoCommand { .. } => BadInput(e.to_string()),
                SpecError::StopSignal { .. } => {
                    BadInput(format!("{}: pod {}: {e}", doc.name, plan.name))
                }
            },
        )?;
    }
    let port = match args.port {
        Some(p) => p,
        None => template::service_port(&plan).ok_or_else(|| {
            // Where a containerPort would go: the first container's `ports`, or the container.
            let span = plan
                .containers
                .first()
                .map_or_else(|| plan.span.clone(), |c| c.field_span("ports"));
            BadInput(format!(
                "{}:{}:{}: {}: no TCP containerPort and no readiness probe port to send load to; give --port",
                span.file, span.line, span.column, span.path
            ))
        })?,
    };
    let replicas = template::replicas(&plan, args.replicas)
        .map_err(|e| BadInput(format!("{}: {e}", doc.name)))?;
    Ok((plan, replicas, port, doc.text))
}

/// Runs one drill with a progress bar (text) or log lines on stderr (JSON).
/// `manifest` is the YAML of `plan`; with `PODGRACE_DRILL_API=1` (and the process runtime) the
/// drill applies it through the embedded serve's API and performs its scenario as API calls
/// ([`podgrace_drill::scenario::api`]), else it runs its own pods.
#[allow(clippy::too_many_arguments)]
async fn drill_once(
    interrupt: &mut Interrupt,
    pods: &PodRuntime,
    plan: &PodPlan,
    manifest: Option<&str>,
    cfg: &DrillConfig,
    args: &Args,
    title: &str,
) -> anyhow::Result<DrillOutcome> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let bar = if args.output.output == Format::Text
        && std::io::IsTerminal::is_terminal(&std::io::stderr())
    {
        let b = ProgressBar::new(cfg.duration.as_millis() as u64);
        b.set_style(
            ProgressStyle::with_template("{prefix} [{bar:40}] {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b.set_prefix(title.to_string());
        Some(b)
    } else {
        None
    };
    let printer = {
        let bar = bar.clone();
        let title = title.to_string();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            while let Some(line) = rx.recv().await {
                let t = started.elapsed().as_secs_f64();
                match &bar {
                    Some(b) => b.println(render::progress(t, &line)),
                    None => eprintln!("{}", render::progress_titled(&title, t, &line)),
                }
            }
        })
    };
    let ticker = bar.clone().map(|b| {
        tokio::spawn(async move {
            let start = std::time::Instant::now();
            loop {
                b.set_position(start.elapsed().as_millis() as u64);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    });
    let result = tokio::select! {
        r = async {
            match (manifest, pods.process_latencies()) {
                (Some(m), Some(l)) if api::api_requested() => {
                    api::run_drill_api(m, plan, cfg, l, tx).await
                }
                _ => run_drill_on(pods, plan, cfg, tx).await,
            }
        } => r,
        code = interrupt.recv() => {
            if let Some(b) = &bar {
                b.abandon();
            }
            if let PodRuntime::Containerd(rt) = pods {
                // containerd's containers outlive podgrace: this drill's pods go first.
                let n = rt.remove_own_sandboxes(&podgrace_node::runtime::CallContext::background()).await;
                eprintln!("{}", render::interrupted_containerd(n));
                std::process::exit(code);
            }
            // The pods die with podgrace (their death signal); their namespaces are removed
            // here, since no pod task will get to tear its sandbox down.
            let removed = podgrace_node::sandbox::teardown_own();
            eprintln!("{}", render::interrupted(removed.len()));
            std::process::exit(code);
        }
    };
    if let Some(t) = ticker {
        t.abort();
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let _ = printer.await;
    result.map_err(|e| {
        // No namespaces or no proxy is this machine's failure (exit 3); a pod that does not
        // start or get ready is the manifest's (exit 2).
        if e.is_machine_failure() {
            anyhow::Error::new(crate::MachineFailure(e.to_string()))
        } else {
            anyhow::Error::new(BadInput(e.to_string()))
        }
    })
}

/// SIGINT and SIGTERM to a drill, watched from the verb's start (before containerd is reached or
/// any pod starts) to its end, so that a signal at any moment, between the demo's drills too, ends
/// the drill with its pods instead of killing podgrace half-way (a signal handler installed only
/// when a drill starts leaves the signal's default action, death without cleanup, before it, and
/// swallows a signal between two drills).
struct Interrupt {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Interrupt {
    /// Installs the handlers; must run inside the tokio runtime. Errors when the kernel refuses a
    /// signal handler.
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// Runs `setup`, work done before any pod of the drill exists, unless SIGINT or SIGTERM
    /// comes first: then podgrace exits at once with 128 + the signal, and says so.
    fn or_exit<T>(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        setup: impl std::future::Future<Output = T>,
    ) -> T {
        runtime.block_on(async {
            tokio::select! {
                r = setup => r,
                code = self.recv() => {
                    eprintln!("interrupted before the drill started its pods");
                    std::process::exit(code)
                }
            }
        })
    }

    /// The first SIGINT or SIGTERM since `install` (one delivered while nothing waited counts),
    /// as the exit code of a process it ended: 128 + the signal (130 for SIGINT, 143 for
    /// SIGTERM), as a shell reports it.
    async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => 128 + 2,
            _ = self.term.recv() => 128 + 15,
        }
    }
}

fn print_json(report: &DrillReport) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(Out);
    serde_json::to_writer_pretty(&mut out, report)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

fn write_html(path: &Path, title: &str, o: &DrillOutcome) -> anyhow::Result<()> {
    let page = html_report(title, &o.report, &o.requests, &o.events);
    write_report(path, &page).map_err(|e| BadInput(e.to_string()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Fails with exit 2 when `path` cannot be written; leaves no file behind that was not there.
fn check_writable(path: &Path) -> anyhow::Result<()> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| BadInput(format!("cannot write the report {}: {e}", path.display())))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}
