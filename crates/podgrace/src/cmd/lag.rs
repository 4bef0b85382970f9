//! `podgrace lag deployment/web --target URL`: the real endpoint lag of a Deployment, measured
//! on its cluster (any cluster kubectl reaches: `--kubeconfig`, `--context`, `-n`), over
//! `--trials` pod deletions, and the preStop sleep it calls for. The measurement is
//! `podgrace_drill::lag`'s; this file parses the flags, guards the context, and renders.

use std::io::Write as _;
use std::time::Duration;

use hyper::header::HeaderName;
use podgrace_cluster::resources::{parse_target, DEPLOYMENT};
use podgrace_cluster::safety::check_context;
use podgrace_cluster::{api_error, ClusterError};
use podgrace_drill::demoapp::POD_NAME_HEADER;
use podgrace_drill::lag::probe::{ProbeConfig, Target};
use podgrace_drill::lag::{self, LagConfig, LagError};
use tokio::signal::unix::{signal, SignalKind};

use super::args::{ClusterArgs, Format, OutputArgs};
use super::parse_duration;
use crate::{out::Out, BadInput, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// The Deployment: `deployment/NAME` (also `deploy/NAME`).
    target: String,
    /// Where its traffic comes in: an ingress, a LoadBalancer or a NodePort address
    /// (`http[s]://HOST[:PORT][/PATH]`).
    #[arg(long = "target", value_name = "URL")]
    url: String,
    /// For an https target: verify it with this CA (PEM) instead of the system's roots.
    #[arg(long, value_name = "FILE")]
    target_ca: Option<std::path::PathBuf>,
    /// For an https target: do not verify its certificate (as curl -k).
    #[arg(long, conflicts_with = "target_ca")]
    target_insecure: bool,
    /// How many pods to terminate, one after the other.
    #[arg(long, default_value_t = 5)]
    trials: u32,
    /// Requests per second to the target, each on a new connection (the lag is read to 1/rps).
    #[arg(long, default_value_t = 100.0)]
    rps: f64,
    /// The response header that names the pod that answered (the demo app's by default).
    #[arg(long, value_name = "NAME", default_value = POD_NAME_HEADER)]
    pod_header: String,
    /// The container whose preStop keeps the pod serving [default: the first].
    #[arg(long, value_name = "NAME")]
    container: Option<String>,
    /// The least time, whole seconds, the preStop must keep a pod serving: an existing preStop
    /// at least this long is used; else a sleep this long is patched in (and restored after).
    /// Lags that reach it are only lower bounds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(i64).range(1..=3600))]
    prestop_seconds: i64,
    /// Added to the p99 lag for the recommended preStop sleep.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    margin: Duration,
    /// A trial ends this long after the pod's last answer.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    quiet: Duration,
    /// Each request's timeout (shorter than --quiet).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    request_timeout: Duration,
    /// The longest wait for a rollout, or for the pods to answer at the target.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    timeout: Duration,
    /// Run against a context whose name contains WORD (repeatable); any other needs --yes.
    #[arg(long, value_name = "WORD")]
    allow_context: Vec<String>,
    /// Run whatever the context (it deletes pods of a live workload).
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// The flags, checked before anything starts.
fn config(args: &Args, namespace: String, deployment: String) -> Result<LagConfig, BadInput> {
    if !(args.rps.is_finite() && args.rps > 0.0 && args.rps <= 1000.0) {
        return Err(BadInput(format!(
            "--rps {}: expected more than 0 and at most 1000 requests per second",
            args.rps
        )));
    }
    if args.trials == 0 || args.trials > 1000 {
        return Err(BadInput(format!(
            "--trials {}: expected 1 to 1000",
            args.trials
        )));
    }
    if args.request_timeout.is_zero() || args.quiet <= args.request_timeout {
        return Err(BadInput(format!(
            "--quiet {:?} must be longer than --request-timeout {:?} (above 0): a trial ends only once every request sent to the pod has ended",
            args.quiet, args.request_timeout
        )));
    }
    let target: Target = args.url.parse().map_err(|e| BadInput(format!("{e}")))?;
    if !target.https && (args.target_ca.is_some() || args.target_insecure) {
        return Err(BadInput(format!(
            "--target {}: --target-ca and --target-insecure are for an https target",
            target.url
        )));
    }
    let tls = if target.https {
        Some(
            podgrace_drill::lag::probe::tls_config(args.target_ca.as_deref(), args.target_insecure)
                .map_err(|e| BadInput(format!("--target {}: {e}", target.url)))?,
        )
    } else {
        None
    };
    let pod_header = HeaderName::from_bytes(args.pod_header.as_bytes()).map_err(|_| {
        BadInput(format!(
            "--pod-header {:?}: not a header name",
            args.pod_header
        ))
    })?;
    Ok(LagConfig {
        namespace,
        deployment,
        trials: args.trials,
        probe: ProbeConfig {
            target,
            rps: args.rps,
            timeout: args.request_timeout,
            pod_header,
            tls,
        },
        container: args.container.clone(),
        prestop_seconds: args.prestop_seconds,
        margin: args.margin,
        quiet: args.quiet,
        timeout: args.timeout,
    })
}

/// How a failure of the measurement ends the run: printed as kubectl prints API errors, with
/// podgrace's exit codes (2 what the user can change, 3 the cluster or the network failed).
fn failed(server: &str, e: LagError) -> Outcome {
    let (line, code) = match e {
        LagError::Api { doing, source } => {
            let e: ClusterError = api_error(server, source);
            let code = e.exit_code();
            (format!("{e}\n(while {doing})"), code)
        }
        LagError::Timeout(m) => (format!("error: {m}"), 3),
        other => (format!("error: {other}"), 2),
    };
    eprintln!("{line}");
    Outcome::Exit(code)
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let t = parse_target(&args.target).map_err(|e| BadInput(e.to_string()))?;
    if t.resource != DEPLOYMENT {
        return Err(BadInput(format!(
            "{}: podgrace lag measures a Deployment (deployment/NAME)",
            args.target
        ))
        .into());
    }
    // Checked before connecting: bad flags never touch the cluster.
    config(&args, String::new(), t.name.clone())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run_async(args, t.name))
}

async fn run_async(args: Args, name: String) -> anyhow::Result<Outcome> {
    let c = match podgrace_cluster::connect(&args.cluster.options(false)).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return Ok(Outcome::Exit(e.exit_code()));
        }
    };
    let what = format!(
        "deployment/{name} in namespace {} (it deletes its pods one at a time)",
        c.namespace
    );
    check_context(
        "podgrace lag",
        &what,
        c.context.as_deref(),
        &args.allow_context,
        args.yes,
    )
    .map_err(|e| BadInput(e.to_string()))?;
    let (_, minor) = match c.server_version().await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return Ok(Outcome::Exit(e.exit_code()));
        }
    };
    let cfg = config(&args, c.namespace.clone(), name.clone())?;
    let json = args.output.output == Format::Json;
    let mut say = |line: String| {
        if json {
            eprintln!("{line}");
        } else {
            let _ = writeln!(Out, "{line}");
        }
    };
    say(format!(
        "podgrace lag: deployment/{name} in namespace {}{}, {} trials, {} requests/s to {} (a new connection each; pods named by {})",
        c.namespace,
        c.context
            .as_deref()
            .map(|x| format!(" (context {x})"))
            .unwrap_or_default(),
        cfg.trials,
        cfg.probe.rps,
        cfg.probe.target.url,
        cfg.probe.pod_header
    ));
    let prober = match lag::start_prober(&cfg).await {
        Ok(p) => p,
        Err(e) => return Ok(failed(&c.server, e)),
    };
    // Ctrl-C or SIGTERM from here on is held until the template is put back: the handlers are
    // in place before the patch goes out.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let prepared = match lag::prepare(&c.client, &cfg, minor, &mut say).await {
        Ok(p) => p,
        Err(e) => return Ok(failed(&c.server, e)),
    };
    let mut on_trial = |t: &lag::Trial| {
        let line = crate::render::lag::trial_line(t);
        if json {
            eprintln!("{line}");
        } else {
            let _ = writeln!(Out, "{line}");
        }
    };
    let trials = async {
        lag::rolled_out_patch(&c.client, &cfg, &prepared).await?;
        lag::measure(&c.client, &cfg, &prepared, &prober, &mut on_trial).await
    };
    let measured = tokio::select! {
        r = trials => Some(r),
        _ = interrupt.recv() => None,
        _ = terminate.recv() => None,
    };
    prober.stop();
    let patched = matches!(prepared.pre_stop, lag::PreStopUse::Patched { .. });
    if measured.is_none() && patched {
        eprintln!("interrupted: putting deployment/{name} back first (interrupt again to leave it to you)");
    }
    // Whatever happened, what was patched is put back; a second interrupt leaves it to the user.
    let restored = tokio::select! {
        r = lag::restore(&c.client, &cfg, &prepared) => r,
        _ = interrupt.recv() => Err(LagError::Timeout("interrupted".into())),
        _ = terminate.recv() => Err(LagError::Timeout("interrupted".into())),
    };
    match &restored {
        Ok(true) => say(format!(
            "restored deployment/{name}: its preStop and terminationGracePeriodSeconds as they were (rolled out)"
        )),
        Ok(false) => {}
        Err(e) => eprintln!(
            "error: restoring deployment/{name} failed: {e}; put its preStop and grace back by hand: kubectl patch deployment/{name} -n {} -p '{}'",
            cfg.namespace,
            prepared.restore_patch().map(|p| p.to_string()).unwrap_or_default()
        ),
    }
    let report = match measured {
        None => {
            eprintln!("interrupted: no summary");
            return Ok(Outcome::Exit(130));
        }
        Some(Err(e)) => return Ok(failed(&c.server, e)),
        Some(Ok(r)) => r,
    };
    let mut out = std::io::BufWriter::new(Out);
    if json {
        serde_json::to_writer_pretty(
            &mut out,
            &crate::render::lag::json(&report, &cfg, c.context.as_deref()),
        )?;
        writeln!(out)?;
    } else {
        write!(out, "{}", crate::render::lag::summary(&report))?;
    }
    out.flush()?;
    if restored.is_err() {
        return Ok(Outcome::Exit(3));
    }
    Ok(Outcome::Success)
}
