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
use podgrace_drill::demoapp::MAX_STREAM_SECONDS;
use podgrace_drill::endpoints::{LagModel, LagPreset};
use podgrace_drill::html::{html_report, write_report};
use podgrace_drill::load::{scheduled_requests, ClientKind, Protocol, MAX_REQUESTS};
use podgrace_drill::proxy::Balancing;
use podgrace_drill::report::{DrillReport, Verdict};
use podgrace_drill::scenario::{run_drill_on, DrillConfig, DrillOutcome, PodRuntime, Scenario};
use podgrace_node::kubelet::spec::SpecError;
use podgrace_node::runtime::{RuntimeChoice, RuntimeService as _};

use super::args::{
    DeleteArgs, FileArgs, Format, KubeletArgs, OutputArgs, PodNetworkArgs, VersionArgs,
};
use crate::{input, out::Out, BadInput, OnMachine as _, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// A manifest with the pod or Deployment to drill (`-` for stdin, or -f FILE); none runs
    /// the built-in demo, without and with the fix.
    #[command(flatten)]
    file: FileArgs,
    /// rollout (maxSurge 1, maxUnavailable 0), delete (one replica), evict-soft or evict-hard.
    #[arg(long, default_value = "rollout", value_parser = parse_scenario)]
    scenario: Scenario,
    /// --scenario delete's delete: kubectl's --grace-period, --force and --now.
    #[command(flatten)]
    delete: DeleteArgs,
    /// Replicas [default: the Deployment's, else 2].
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
    /// The endpoint lag L: a duration, in-cluster (1 s), ingress (30 s), cloud-lb (120 s), or
    /// kube-proxy (its bounded-frequency sync: at once while a sync slot is free, else about
    /// --iptables-min-sync-period later).
    #[arg(long, default_value = "1s", value_parser = parse_lag)]
    endpoint_lag: LagArg,
    /// kube-proxy's --iptables-min-sync-period, for --endpoint-lag kube-proxy (`1s`).
    #[arg(long, default_value = "1s", value_parser = super::parse_duration)]
    iptables_min_sync_period: Duration,
    /// The load's client: keep-alive-careful (reuses connections, drops one the server closed
    /// while idle: urllib3, Go's net/http), keep-alive (writes into a reused connection without
    /// checking), or new-connection (one connection per request).
    #[arg(long, value_enum, default_value_t = ClientArg::KeepAliveCareful)]
    client: ClientArg,
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
}

/// Defaults of the request and stream flags, shared by their declarations and by
/// [`warn_unused_flags`], which names the ones set away from them.
const DEFAULT_CONNECTIONS: usize = 16;
const DEFAULT_STREAM_SECONDS: f64 = 60.0;
const DEFAULT_PATH: &str = "/";
const DEFAULT_METHOD: &str = "GET";
const DEFAULT_TIMEOUT: &str = "2s";

/// Each replica is a pod with its own network namespace; the /24 pod range holds 253.
const MAX_REPLICAS: usize = 100;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProtocolArg {
    Http1,
    H2c,
}

/// The longest drill: 24 hours.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Streams per drill: each holds a connection of its own.
const MAX_STREAMS: usize = 1000;
/// Connections of the request load.
const MAX_CONNECTIONS: usize = 10_000;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ClientArg {
    NewConnection,
    KeepAlive,
    KeepAliveCareful,
}

/// `--endpoint-lag`: a fixed lag, or kube-proxy's sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LagArg {
    Fixed(Duration),
    KubeProxy,
}

impl LagArg {
    /// The lag model with `min_sync` as kube-proxy's minSyncPeriod.
    fn model(self, min_sync: Duration) -> LagModel {
        match self {
            LagArg::Fixed(l) => LagModel::Fixed(l),
            LagArg::KubeProxy => LagModel::KubeProxy {
                min_sync_period: min_sync,
                burst: podgrace_drill::sync::BURST_SYNCS,
            },
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
        _ => Err("expected rollout, delete, evict-soft or evict-hard".into()),
    }
}

fn parse_lag(s: &str) -> Result<LagArg, String> {
    if s == "kube-proxy" {
        return Ok(LagArg::KubeProxy);
    }
    match LagPreset::parse(s) {
        Ok(p) => Ok(LagArg::Fixed(p.lag())),
        Err(_) => super::parse_duration(s)
            .map(LagArg::Fixed)
            .map_err(|e| format!("{e}; or a preset: in-cluster, ingress, cloud-lb, kube-proxy")),
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let delete_flags = args.delete.flags()?;
    if args.delete.given() && args.scenario != Scenario::Delete {
        return Err(BadInput(
            "--grace-period, --force and --now shape the delete of --scenario delete; a rollout's deletes come from the ReplicaSet controller with the pod's own grace, and an eviction's grace from the kubelet (--eviction-max-pod-grace-period)".into(),
        )
        .into());
    }
    let with_streams = args.streams + args.idle_streams > 0;
    if args.streams > MAX_STREAMS || args.idle_streams > MAX_STREAMS {
        return Err(BadInput(format!(
            "--streams and --idle-streams must be at most {MAX_STREAMS}"
        ))
        .into());
    }
    if !(args.stream_seconds > 0.0 && args.stream_seconds <= MAX_STREAM_SECONDS) {
        return Err(BadInput(format!(
            "--stream-seconds must be above 0 and at most {MAX_STREAM_SECONDS} (the demo app's longest stream)"
        ))
        .into());
    }
    if !(0.0..=1_000_000.0).contains(&args.rps) || (args.rps == 0.0 && !with_streams) {
        return Err(BadInput(
            "--rps must be above 0 and at most 1000000 (0 only with --streams or --idle-streams)"
                .into(),
        )
        .into());
    }
    if !(1..=MAX_CONNECTIONS).contains(&args.connections) {
        return Err(BadInput(format!("--connections must be 1 to {MAX_CONNECTIONS}")).into());
    }
    if args.protocol == ProtocolArg::H2c && args.proxy == ProxyKind::Ingress {
        return Err(BadInput(
            "--proxy ingress balances HTTP/1.1 requests; with --protocol h2c the proxy pins each connection (use --proxy kube-proxy)".into(),
        )
        .into());
    }
    if args.duration.is_zero() || args.duration > MAX_DURATION {
        return Err(BadInput("--duration must be above 0 and at most 24h".into()).into());
    }
    let scheduled = scheduled_requests(args.rps, args.duration);
    if scheduled > MAX_REQUESTS {
        return Err(BadInput(format!(
            "--rps × --duration schedules {scheduled} requests; a drill keeps records of at most {MAX_REQUESTS}"
        ))
        .into());
    }
    if args.rps > 0.0 && scheduled == 0 {
        return Err(BadInput(format!(
            "--rps {} for --duration {:.1} s schedules no request at all",
            args.rps,
            args.duration.as_secs_f64()
        ))
        .into());
    }
    if matches!(args.endpoint_lag, LagArg::Fixed(l) if l > MAX_DURATION) {
        return Err(BadInput("--endpoint-lag must be at most 24h".into()).into());
    }
    if args.iptables_min_sync_period > MAX_DURATION {
        return Err(BadInput("--iptables-min-sync-period must be at most 24h".into()).into());
    }
    if args.path.parse::<hyper::Uri>().is_err() {
        return Err(BadInput(format!(
            "--path {:?} is not a valid request target (no spaces; percent-encode them)",
            args.path
        ))
        .into());
    }
    if args.disrupt_after >= args.duration {
        return Err(BadInput(format!(
            "--disrupt-after ({:.1} s) must come before the load ends (--duration {:.1} s)",
            args.disrupt_after.as_secs_f64(),
            args.duration.as_secs_f64()
        ))
        .into());
    }
    if let Some(r) = args.replicas {
        if !(1..=MAX_REPLICAS).contains(&r) {
            return Err(BadInput(format!("--replicas must be 1 to {MAX_REPLICAS}")).into());
        }
    }
    if args.timeout.is_zero() {
        return Err(BadInput("--timeout must be above 0".into()).into());
    }
    if args.port == Some(0) {
        return Err(BadInput("--port must be 1 to 65535".into()).into());
    }
    if let Some(path) = &args.report {
        // Found now, not after the whole drill has run.
        if args.file.get().is_some() {
            check_writable(path)?;
        } else {
            check_writable(&suffixed(path, "-without-prestop"))?;
            check_writable(&suffixed(path, "-with-prestop"))?;
        }
    }
    warn_unused_flags(&args);
    let method = hyper::Method::from_bytes(args.method.as_bytes())
        .map_err(|_| BadInput(format!("--method: not an HTTP method: {:?}", args.method)))?;
    if !args.path.starts_with('/') {
        return Err(BadInput(format!("--path must start with '/': {:?}", args.path)).into());
    }
    let config = |port: u16, replicas: usize| DrillConfig {
        scenario: args.scenario,
        replicas,
        rps: args.rps,
        protocol: match args.protocol {
            ProtocolArg::Http1 => Protocol::Http1,
            ProtocolArg::H2c => Protocol::H2c,
        },
        data_streams: args.streams,
        stream_seconds: args.stream_seconds,
        idle_streams: args.idle_streams,
        duration: args.duration,
        lag: args.endpoint_lag.model(args.iptables_min_sync_period),
        client: match args.client {
            ClientArg::NewConnection => ClientKind::NewConnection,
            ClientArg::KeepAlive => ClientKind::KeepAlive,
            ClientArg::KeepAliveCareful => ClientKind::KeepAliveCareful,
        },
        balancing: match args.proxy {
            ProxyKind::KubeProxy => Balancing::PerConnection,
            ProxyKind::Ingress => Balancing::PerRequest,
        },
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
    let pods = match &args.runtime.runtime {
        RuntimeChoice::Process => PodRuntime::Process,
        RuntimeChoice::Containerd { socket } => {
            // Connecting stops an earlier podgrace's pods with their grace: a signal meanwhile
            // ends podgrace, as the same signal before the handlers were installed would.
            let (rt, mut output) =
                interrupt.or_exit(&runtime, super::connect_containerd(socket))?;
            // The pods' own output is not part of the drill's report.
            runtime.spawn(async move { while output.recv().await.is_some() {} });
            PodRuntime::Containerd(Arc::new(rt))
        }
    };
    match template {
        Some((plan, replicas, port)) => {
            let cfg = config(port, args.replicas.unwrap_or(replicas));
            let outcome = runtime.block_on(drill_once(
                &mut interrupt,
                &pods,
                &plan,
                &cfg,
                &args,
                "drill",
            ))?;
            match args.output.output {
                Format::Json => print_json(&outcome.report)?,
                Format::Text => write!(Out, "{}", summary(&outcome))?,
            }
            if let Some(path) = &args.report {
                write_html(path, &format!("podgrace drill: {}", plan.name), &outcome)?;
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

/// Says which request or stream flags the drill will not use (set away from their defaults
/// where nothing reads them), on stderr: a drill that ignores a flag must not look as if it
/// honoured it.
fn warn_unused_flags(args: &Args) {
    let say = |flags: &[&str], why: &str| {
        if !flags.is_empty() {
            let verb = if flags.len() == 1 { "has" } else { "have" };
            eprintln!("drill: {} {verb} no effect: {why}", flags.join(", "));
        }
    };
    if args.rps == 0.0 {
        let request_flags = [
            ("--protocol", args.protocol != ProtocolArg::Http1),
            ("--connections", args.connections != DEFAULT_CONNECTIONS),
            ("--path", args.path != DEFAULT_PATH),
            ("--method", args.method != DEFAULT_METHOD),
        ];
        let set: Vec<&str> = request_flags
            .iter()
            .filter(|(_, set)| *set)
            .map(|(f, _)| *f)
            .collect();
        say(&set, "--rps 0 sends no requests, only streams");
    }
    if args.streams == 0 && args.stream_seconds != DEFAULT_STREAM_SECONDS {
        say(
            &["--stream-seconds"],
            "it is the length of the data streams of --streams, and there are none",
        );
    }
}

/// The built-in demo: the demo app without a preStop (it exits on SIGTERM), then with a preStop
/// sleep longer than the endpoint lag and an app that drains.
fn demo(
    runtime: &tokio::runtime::Runtime,
    interrupt: &mut Interrupt,
    pods: &PodRuntime,
    args: &Args,
    config: impl Fn(u16, usize) -> DrillConfig,
) -> anyhow::Result<Outcome> {
    let exe = std::env::current_exe().context("cannot find podgrace's own executable")?;
    let lag = args
        .endpoint_lag
        .model(args.iptables_min_sync_period)
        .nominal();
    let pre_stop = lag.as_secs_f64().ceil() as i64 + 1;
    let image = match pods {
        PodRuntime::Process => None,
        PodRuntime::Containerd(rt) => Some(demo_image(runtime, rt, &exe)?),
    };
    let unfixed = demo_plan(&exe, image.as_deref(), None)?;
    let fixed = demo_plan(&exe, image.as_deref(), Some(pre_stop))?;
    let mut cfg = config(8080, args.replicas.unwrap_or(2));
    // The fixed run's stop signals come a preStop after each deletion; the load must still run
    // then, or its PASS would say nothing (a rollout deletes one pod every few seconds).
    let needed = args.disrupt_after
        + Duration::from_secs(2 * cfg.replicas as u64 + pre_stop.max(0) as u64 + 1);
    if cfg.duration < needed {
        eprintln!(
            "drill: the load runs {:.0} s (not {:.1} s) so that the fixed run's shutdowns, {pre_stop} s after each deletion, are under load",
            needed.as_secs_f64(),
            cfg.duration.as_secs_f64()
        );
        cfg.duration = needed;
    }
    let a = runtime.block_on(drill_once(
        interrupt,
        pods,
        &unfixed,
        &cfg,
        args,
        "1/2 without preStop",
    ))?;
    let b = runtime.block_on(drill_once(
        interrupt,
        pods,
        &fixed,
        &cfg,
        args,
        "2/2 with preStop",
    ))?;
    match args.output.output {
        Format::Json => {
            let mut out = std::io::BufWriter::new(Out);
            serde_json::to_writer_pretty(&mut out, &[&a.report, &b.report])?;
            writeln!(out)?;
            out.flush()?;
        }
        Format::Text => {
            write!(
                Out,
                "\n1/2 without preStop, the app exits on SIGTERM:{}",
                summary(&a)
            )?;
            write!(
                Out,
                "\n2/2 with a {pre_stop} s preStop sleep, the app drains:{}",
                summary(&b)
            )?;
            write!(Out, "{}", side_by_side(&a.report, &b.report, pre_stop, lag))?;
        }
    }
    if let Some(path) = &args.report {
        write_html(
            &suffixed(path, "-without-prestop"),
            "podgrace drill demo: without preStop",
            &a,
        )?;
        write_html(
            &suffixed(path, "-with-prestop"),
            &format!("podgrace drill demo: with a {pre_stop} s preStop sleep"),
            &b,
        )?;
    }
    // The demo shows the race and its fix: it succeeds when the fixed run loses nothing.
    Ok(if b.report.verdict == Verdict::Pass {
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

/// The demo app as a Deployment template: `podgrace demo-app` as each pod's process, a
/// readiness probe, and (fixed) a preStop sleep with an app that drains. With `image` (the
/// containerd runtime), the container runs that image of podgrace's binary, at its root.
fn demo_plan(
    exe: &Path,
    image: Option<&str>,
    pre_stop_seconds: Option<i64>,
) -> anyhow::Result<PodPlan> {
    // The grace covers the preStop plus the app's drain (20 s), as the fix needs.
    let tgps = pre_stop_seconds.unwrap_or(0) + 30;
    let (on_sigterm, lifecycle) = match pre_stop_seconds {
        None => ("exit", String::new()),
        Some(s) => (
            "drain",
            format!(
                "        lifecycle:\n          preStop:\n            sleep: {{seconds: {s}}}\n"
            ),
        ),
    };
    let yaml = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: demo}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: demo}}}}\n  template:\n    metadata: {{labels: {{app: demo}}}}\n    spec:\n      terminationGracePeriodSeconds: {tgps}\n      containers:\n      - name: app\n        image: {image}\n        imagePullPolicy: {policy}\n        command: [\"{}\", demo-app, --listen, \"0.0.0.0:8080\", --on-sigterm, {on_sigterm}, --drain-seconds, \"20\"]\n        ports: [{{containerPort: 8080}}]\n        readinessProbe:\n          httpGet: {{path: /ready, port: 8080}}\n          periodSeconds: 1\n{lifecycle}",
        match image {
            Some(_) => Path::new("/")
                .join(exe.file_name().unwrap_or_default())
                .display()
                .to_string(),
            None => exe.display().to_string(),
        },
        image = image.unwrap_or("podgrace/demo-app"),
        policy = if image.is_some() { "Never" } else { "IfNotPresent" },
    );
    let m = manifest::load(&yaml, "<built-in demo>").map_err(|e| anyhow::anyhow!("{e}"))?;
    let plan = m
        .pods()
        .next()
        .cloned()
        .context("the built-in demo has no pod template")?;
    Ok(plan)
}

/// The pod template of FILE, the replicas it asks for, and the port it serves on.
fn load_template(file: &Path, args: &Args, images: bool) -> anyhow::Result<(PodPlan, usize, u16)> {
    let doc = input::read_one(file)?;
    let m = manifest::load_with(
        &doc.text,
        &doc.name,
        &manifest::LoadOptions {
            kube_version: args.version.kubernetes_version,
        },
    )
    .map_err(|e| BadInput(e.to_string()))?;
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
        None => service_port(&plan).ok_or_else(|| {
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
    let replicas = match plan.replicas {
        Some(0) if args.replicas.is_none() => {
            return Err(BadInput(format!(
                "{}: the Deployment has replicas: 0, nothing to drill; give --replicas",
                doc.name
            ))
            .into())
        }
        r => r.and_then(|r| usize::try_from(r).ok()).unwrap_or(2).max(1),
    };
    Ok((plan, replicas, port))
}

/// The port a Service would target: the first declared TCP containerPort, else the numeric port of
/// the first readiness probe (httpGet, tcpSocket or grpc), which is where the app serves.
fn service_port(plan: &PodPlan) -> Option<u16> {
    use podgrace_core::plan::{PortRef, ProbeAction};
    let declared = plan
        .containers
        .iter()
        .flat_map(|c| c.ports.iter())
        .filter(|p| p.protocol == "TCP")
        .find_map(|p| u16::try_from(p.container_port).ok());
    declared.or_else(|| {
        plan.containers.iter().find_map(|c| {
            let port = match &c.readiness_probe.as_ref()?.action {
                ProbeAction::HttpGet(h) => match &h.port {
                    PortRef::Number(n) => *n,
                    PortRef::Name(_) => return None,
                },
                ProbeAction::TcpSocket {
                    port: PortRef::Number(n),
                    ..
                } => *n,
                ProbeAction::Grpc { port, .. } => *port,
                _ => return None,
            };
            u16::try_from(port).ok().filter(|p| *p > 0)
        })
    })
}

/// Runs one drill with a progress bar (text) or log lines on stderr (JSON).
async fn drill_once(
    interrupt: &mut Interrupt,
    pods: &PodRuntime,
    plan: &PodPlan,
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
                    Some(b) => b.println(format!("{t:>7.2}s  {line}")),
                    None => eprintln!("{title}: {t:>7.2}s  {line}"),
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
        r = run_drill_on(pods, plan, cfg, tx) => r,
        code = interrupt.recv() => {
            if let Some(b) = &bar {
                b.abandon();
            }
            if let PodRuntime::Containerd(rt) = pods {
                // containerd's containers outlive podgrace: this drill's pods go first.
                let n = rt.remove_own_sandboxes(&podgrace_node::runtime::CallContext::background()).await;
                eprintln!("interrupted: the drill's {n} pods on containerd are stopped and removed");
                std::process::exit(code);
            }
            // The pods die with podgrace (their death signal); their namespaces are removed
            // here, since no pod task will get to tear its sandbox down.
            let removed = podgrace_node::sandbox::teardown_own();
            eprintln!(
                "interrupted: the drill's pods are stopped and {} removed",
                match removed.len() {
                    1 => "1 pod network namespace".to_string(),
                    n => format!("{n} pod network namespaces"),
                }
            );
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
        use podgrace_drill::scenario::DrillError;
        // No namespaces or no proxy is this machine's failure (exit 3); a pod that does not
        // start or get ready is the manifest's (exit 2).
        if matches!(e, DrillError::NoNamespaces | DrillError::Proxy(_)) {
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

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!("{stem}{suffix}{ext}"))
}

/// The text summary of one drill.
fn summary(o: &DrillOutcome) -> String {
    use std::fmt::Write as _;
    let r = &o.report;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\ndrill {}: {} requests/s ({}, {} client, through {}{}), endpoint lag {}",
        r.scenario,
        r.rps,
        r.settings.protocol,
        r.settings.client,
        r.settings.proxy,
        match r.settings.proxy_implementation {
            Some("netfilter") => " on the kernel's netfilter",
            Some(_) => " in user space",
            None => "",
        },
        if r.settings.endpoint_lag_model == "kube-proxy" {
            format!(
                "kube-proxy's sync (minSyncPeriod {:.1} s)",
                r.endpoint_lag_seconds
            )
        } else {
            format!("{:.1} s", r.endpoint_lag_seconds)
        }
    );
    if r.rps == 0.0 {
        let _ = writeln!(s, "  requests: none (--rps 0)");
    } else {
        request_lines(&mut s, r);
    }
    if let Some(st) = &r.streams {
        let k = &st.failures_by_kind;
        let _ = writeln!(
            s,
            "  streams {}: completed {}, failed {} (refused {}, connect timeout {}, reset {}, HTTP 5xx {}, rejected {}), still open at the end {}, idle streams cut {}",
            st.opened, st.completed, st.failed, k.refused, k.connect_timeout, k.reset, k.http5xx, st.rejected, st.unfinished, st.idle_cut
        );
        let p = &st.failures_by_phase;
        let _ = writeln!(
            s,
            "  stream failures by phase: before the stop signal {}, after it {}, after SIGKILL {}",
            p.before_stop_signal, p.after_stop_signal, p.after_kill
        );
    }
    let _ = writeln!(
        s,
        "  verdict: {}",
        match r.verdict {
            Verdict::Pass => "PASS (no request or stream failed)",
            Verdict::Fail => "FAIL",
        }
    );
    for a in &o.advice {
        let _ = writeln!(s, "  advice: {a}");
    }
    s
}

/// The request lines of the text summary.
fn request_lines(s: &mut String, r: &DrillReport) {
    use std::fmt::Write as _;
    let k = &r.failures_by_kind;
    let p = &r.failures_by_phase;
    let _ = writeln!(
        s,
        "  requests {}, failed {} (connect timeout {}, refused {}, EOF {} ({} on a reused connection), reset {}, timeout {}, HTTP 5xx {})",
        r.requests,
        r.failed,
        k.connect_timeout,
        k.refused,
        k.eof,
        k.eof_on_reuse,
        k.reset,
        k.timeout,
        k.http5xx
    );
    if r.stale_conntrack > 0 {
        let _ = writeln!(
            s,
            "  of them {} new connections that followed a stale conntrack entry to a pod that was gone",
            r.stale_conntrack
        );
    }
    let _ = writeln!(
        s,
        "  failures by phase: before the stop signal {}, after it {}, after SIGKILL {}",
        p.before_stop_signal, p.after_stop_signal, p.after_kill
    );
    if !r.failures_by_pod.is_empty() {
        let per_pod: Vec<String> = r
            .failures_by_pod
            .iter()
            .map(|f| format!("{} {}", f.pod.as_deref().unwrap_or("no pod"), f.failed))
            .collect();
        let _ = writeln!(s, "  failed requests by pod: {}", per_pod.join(", "));
    }
    let _ = writeln!(
        s,
        "  latency from the intended send time: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        r.latency_ms.p50, r.latency_ms.p99, r.latency_ms.max
    );
}

fn side_by_side(a: &DrillReport, b: &DrillReport, pre_stop: i64, lag: Duration) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let with = format!("with preStop {pre_stop} s + drain");
    let _ = writeln!(
        s,
        "\nthe endpoint race, endpoint lag {:.1} s:\n  {:28} {:>18} {:>24}",
        lag.as_secs_f64(),
        "",
        "without preStop",
        with
    );
    let mut rows: Vec<(&str, String, String)> = vec![
        ("requests", a.requests.to_string(), b.requests.to_string()),
        ("failed", a.failed.to_string(), b.failed.to_string()),
        (
            "  connect timeout / refused",
            format!(
                "{} / {}",
                a.failures_by_kind.connect_timeout, a.failures_by_kind.refused
            ),
            format!(
                "{} / {}",
                b.failures_by_kind.connect_timeout, b.failures_by_kind.refused
            ),
        ),
        (
            "  EOF / reset",
            format!("{} / {}", a.failures_by_kind.eof, a.failures_by_kind.reset),
            format!("{} / {}", b.failures_by_kind.eof, b.failures_by_kind.reset),
        ),
        (
            "  timeout / HTTP 5xx",
            format!(
                "{} / {}",
                a.failures_by_kind.timeout, a.failures_by_kind.http5xx
            ),
            format!(
                "{} / {}",
                b.failures_by_kind.timeout, b.failures_by_kind.http5xx
            ),
        ),
        (
            "latency p99",
            format!("{:.2} ms", a.latency_ms.p99),
            format!("{:.2} ms", b.latency_ms.p99),
        ),
        (
            "verdict",
            format!("{:?}", a.verdict).to_uppercase(),
            format!("{:?}", b.verdict).to_uppercase(),
        ),
    ];
    if a.streams.is_some() || b.streams.is_some() {
        let failed = |r: &DrillReport| {
            r.streams
                .map(|s| format!("{} of {}", s.failed, s.opened))
                .unwrap_or_default()
        };
        // Before the verdict.
        rows.insert(6, ("streams failed", failed(a), failed(b)));
    }
    for (name, x, y) in rows {
        let _ = writeln!(s, "  {name:28} {x:>18} {y:>24}");
    }
    s
}
