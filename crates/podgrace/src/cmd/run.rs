//! `podgrace run FILE`: the pod's containers as local processes under kubelet semantics.
//!
//! Ctrl-C (or SIGTERM to podgrace) is `kubectl delete pod`; a second one is
//! `kubectl delete pod --grace-period=0 --force` (which, as on a real node, does not shorten a
//! termination already running); a third stops podgrace at once. `--delete-after` deletes (or,
//! with `--evict`, evicts) the pod by itself after a delay, `--second-delete` deletes again
//! later. At the end, a report of what each container received and when, and what the pod
//! object went through.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use podgrace_core::manifest;
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_core::rules::latency::RuntimeProfile;
use podgrace_core::timeline::LaterDelete;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{build_report, check_pod, run_pod, PodCommand, PodOptions, RunReport};
use podgrace_node::process::{namespaces_permitted, OutputLine, Stream};
use podgrace_node::runtime::{CallContext, ProcessRuntime, RuntimeChoice, RuntimeService};
use tokio::signal::unix::{signal, SignalKind};

use super::args::{
    DeleteArgs, FileArgs, Format, KubeletArgs, OutputArgs, PodNetworkArgs, VersionArgs,
};
use crate::render::run::{delete_note, describe, summary};
use crate::{input, out::Out, BadInput, OnMachine as _, Outcome};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    file: FileArgs,
    /// The cluster a `TYPE/NAME` in place of FILE is read from (`run deployment/web`: its pod
    /// template, with the ConfigMaps and Secrets it takes values from), as kubectl reads it.
    #[command(flatten)]
    cluster: super::args::ClusterArgs,
    /// Which pod of the file, by name, when it holds several.
    #[arg(long)]
    pod: Option<String>,
    /// Start the termination by itself this long (`10s`, `1m30s`, `500ms`) after the pod's first
    /// container started (or failed to start): the delete (with --grace-period, --force, --now),
    /// or the eviction of --trigger.
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration)]
    delete_after: Option<Duration>,
    #[command(flatten)]
    delete: DeleteArgs,
    /// What happens at --delete-after: delete (kubectl delete pod, the default), evict-soft or
    /// evict-hard (node-pressure eviction at a soft or hard threshold), spelled as explain's
    /// triggers and drill's scenarios.
    #[arg(long, value_name = "T", value_parser = parse_trigger, requires = "delete_after")]
    trigger: Option<RunTrigger>,
    /// The older spelling of --trigger evict-soft / evict-hard.
    #[arg(
        long,
        value_enum,
        hide = true,
        requires = "delete_after",
        conflicts_with = "trigger"
    )]
    evict: Option<Eviction>,
    #[command(flatten)]
    kubelet: KubeletArgs,
    #[command(flatten)]
    eviction: super::args::EvictionArgs,
    /// Override a container's stop signal: CONTAINER=SIGNAL (repeatable), for images whose
    /// STOPSIGNAL podgrace cannot know.
    #[arg(long = "stop-signal", value_name = "CONTAINER=SIGNAL", value_parser = parse_assignment)]
    stop_signals: Vec<(String, String)>,
    /// A second `kubectl delete` this long after the first: GRACE@SECONDS, GRACE a
    /// --grace-period, `force` or `now` (3@2.3: --grace-period=3 2.3 s after the first delete).
    #[arg(long, value_name = "GRACE@SECONDS")]
    second_delete: Option<LaterDelete>,
    /// Add the measured latencies of a real runtime (containerd 1.6) to every stop and restart.
    #[arg(long, value_name = "RUNTIME")]
    runtime_latency: Option<RuntimeProfile>,
    /// The seed of the latency draws (default: a new one each run, printed).
    #[arg(long, value_name = "N", requires = "runtime_latency")]
    runtime_latency_seed: Option<u64>,
    #[command(flatten)]
    version: VersionArgs,
    #[command(flatten)]
    pod_network: PodNetworkArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    runtime: super::RuntimeArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Eviction {
    Soft,
    Hard,
}

/// What `--delete-after` starts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RunTrigger {
    Delete,
    Evict { hard: bool },
}

fn parse_trigger(s: &str) -> Result<RunTrigger, String> {
    match s {
        "delete" => Ok(RunTrigger::Delete),
        "evict-soft" => Ok(RunTrigger::Evict { hard: false }),
        "evict-hard" => Ok(RunTrigger::Evict { hard: true }),
        _ => Err("expected delete, evict-soft or evict-hard".into()),
    }
}

impl Args {
    /// `--trigger`, or the older `--evict`.
    fn trigger(&self) -> RunTrigger {
        match (self.trigger, self.evict) {
            (Some(t), _) => t,
            (None, Some(e)) => RunTrigger::Evict {
                hard: e == Eviction::Hard,
            },
            (None, None) => RunTrigger::Delete,
        }
    }
}

fn parse_assignment(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((c, sig)) if !c.is_empty() && !sig.is_empty() => Ok((c.to_string(), sig.to_string())),
        _ => Err(format!("expected CONTAINER=SIGNAL, got {s:?}")),
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    // Everything that can be wrong with the input is found before anything starts.
    let flags = args.delete.flags()?;
    if args.delete.given() && args.trigger() != RunTrigger::Delete {
        return Err(BadInput(
            "--grace-period, --force and --now shape the delete; an eviction takes its grace from the kubelet (--eviction-max-pod-grace-period)".into(),
        )
        .into());
    }
    if args.second_delete.is_some() && args.trigger() != RunTrigger::Delete {
        return Err(BadInput(
            "--second-delete follows a delete; with an eviction there is none (the kubelet evicts without touching the API object)".into(),
        )
        .into());
    }
    let plan =
        match live_target(&args) {
            Some(_) if args.pod.is_some() => return Err(BadInput(
                "--pod picks a pod of a manifest file; a TYPE/NAME of a cluster names one already"
                    .into(),
            )
            .into()),
            Some(target) => match load_live_pod(&args, target?)? {
                Ok(plan) => plan,
                Err(e) => {
                    eprintln!("{e}");
                    return Ok(Outcome::Exit(e.exit_code()));
                }
            },
            None => load_pod(&args)?,
        };
    let eviction = args
        .eviction
        .settings(&args.kubelet, args.version.kubernetes_version)?;
    let opts = PodOptions {
        version: args.version.kubernetes_version,
        namespace: "default".into(),
        stop_signal_overrides: args
            .stop_signals
            .iter()
            .cloned()
            .collect::<BTreeMap<_, _>>(),
        force_host: false,
        images: args.runtime.runtime != RuntimeChoice::Process,
        uid: None,
        node: Some(podgrace_node::kubelet::active::ActivePods::new()),
    };
    for name in opts.stop_signal_overrides.keys() {
        if plan.container(name).is_none() {
            return Err(BadInput(format!(
                "--stop-signal: pod {} has no container {name:?}",
                plan.name
            ))
            .into());
        }
    }
    check_pod(&plan, &opts).map_err(|e| BadInput(e.to_string()))?;
    for c in plan.init_containers.iter().chain(plan.containers.iter()) {
        for (name, value) in &c.env {
            if value.is_none() {
                eprintln!("warning: container {}: env {name} comes from valueFrom, which podgrace does not resolve; it is left out", c.name);
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .on_machine(|| "cannot start the async runtime".into())?;
    if args.runtime_latency.is_some() && args.runtime.runtime != RuntimeChoice::Process {
        return Err(BadInput(
            "--runtime-latency adds a real runtime's latencies to the process runtime; with --runtime containerd the real ones apply".into(),
        )
        .into());
    }
    let report = runtime.block_on(async {
        match &args.runtime.runtime {
            RuntimeChoice::Process => {
                let (rt, output) = ProcessRuntime::new(args.pod_network.pod_network.clone());
                let rt = match args.runtime_latency {
                    Some(profile) => {
                        let seed = args.runtime_latency_seed.unwrap_or_else(fresh_seed);
                        let l = profile.latencies();
                        eprintln!(
                            "runtime latencies: {} as measured (--runtime-latency-seed {seed} repeats these draws)",
                            l.runtime
                        );
                        rt.with_latencies(*l, seed)
                    }
                    None => rt,
                };
                let rt = Arc::new(rt);
                let namespaced = namespaces_permitted();
                if !namespaced {
                    eprintln!("warning: no permission for PID and network namespaces: containers run as plain host processes on the host network, without cgroups or resource limits, so a process without a SIGTERM handler dies on SIGTERM instead of ignoring it as PID 1 does; run as root for kubelet fidelity");
                }
                let events = rt.clone();
                let node = (eviction, podgrace_node::runtime::cgroup::process_root());
                supervise(rt, output, move |id| events.stop_events(id), namespaced, plan, opts, &args, flags, node).await
            }
            RuntimeChoice::Containerd { socket } => {
                let (rt, output) = super::connect_containerd(socket, None, "").await?;
                let rt = Arc::new(rt);
                let events = rt.clone();
                supervise(rt, output, move |id| events.stop_events(id), true, plan, opts, &args, flags, (eviction, String::new())).await
            }
        }
    })?;
    match args.output.output {
        Format::Json => {
            let mut out = std::io::BufWriter::new(Out);
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
            out.flush()?;
        }
        Format::Text => write!(Out, "{}", summary(&report))?,
    }
    Ok(Outcome::Success)
}

/// The object of a cluster FILE names instead of a file (`deployment/web`, where no such path
/// exists), if it does.
fn live_target(args: &Args) -> Option<Result<podgrace_cluster::resources::Target, BadInput>> {
    let file = args.file.get()?;
    let text = file.to_str()?;
    (!file.exists() && podgrace_cluster::resources::looks_like_target(text)).then(|| {
        podgrace_cluster::resources::parse_target(text).map_err(|e| BadInput(e.to_string()))
    })
}

/// The pod (or pod template) of a live object, with the ConfigMaps and Secrets it takes values
/// from read beside it (one that is not there stays missing, as in a file: the kubelet's
/// `CreateContainerConfigError` unless it is optional). The outer error is bad input; the
/// inner one the cluster's, to be printed as kubectl prints it.
fn load_live_pod(
    args: &Args,
    target: podgrace_cluster::resources::Target,
) -> anyhow::Result<Result<PodPlan, podgrace_cluster::ClusterError>> {
    use podgrace_cluster::resources::{CONFIG_MAP, SECRET};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .on_machine(|| "cannot start the async runtime".into())?;
    let read = rt.block_on(async {
        let c = podgrace_cluster::connect(&args.cluster.options(false)).await?;
        let mut obj = c
            .get_object(&target.resource, &c.namespace, &target.name)
            .await?;
        podgrace_cluster::workloads::strip_unread(&mut obj);
        let mut docs = vec![obj.to_string()];
        for (kind, name) in podgrace_cluster::workloads::env_sources(&obj) {
            let r = if kind == "Secret" {
                &SECRET
            } else {
                &CONFIG_MAP
            };
            match c.get_object(r, &c.namespace, &name).await {
                Ok(v) => docs.push(v.to_string()),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(docs.join("\n---\n"))
    });
    let text = match read {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    let name = target.to_string();
    let m = manifest::load_with(
        &text,
        &name,
        &manifest::LoadOptions {
            kube_version: args.version.kubernetes_version,
        },
    )
    .map_err(|e| {
        let lines: Vec<String> = e.0.iter().map(super::live::error_text).collect();
        BadInput(lines.join("\n"))
    })?;
    let pod = m
        .pods()
        .next()
        .ok_or_else(|| BadInput(format!("{name}: no pod or pod template")))?;
    Ok(Ok(m
        .resolve_env_from(pod)
        .map_err(|e| BadInput(format!("{name}: {e}")))?))
}

fn load_pod(args: &Args) -> anyhow::Result<PodPlan> {
    let file = args.file.get().ok_or_else(|| {
        BadInput("no manifest given: name a FILE (or -f FILE; `-` reads standard input)".into())
    })?;
    let doc = input::read_one(file)?;
    let m = manifest::load_with(
        &doc.text,
        &doc.name,
        &manifest::LoadOptions {
            kube_version: args.version.kubernetes_version,
        },
    )
    .map_err(|e| {
        let mut msg = e.to_string();
        if let Some(hint) = input::template_hint(&doc) {
            msg.push('\n');
            msg.push_str(&hint);
        }
        BadInput(msg)
    })?;
    let pods: Vec<&PodPlan> = m.pods().collect();
    let chosen = match (&args.pod, pods.as_slice()) {
        (_, []) => {
            return Err(
                BadInput(format!("{}: no pod or pod template in the file", doc.name)).into(),
            )
        }
        (None, [one]) => *one,
        (None, many) => {
            let names: Vec<&str> = many.iter().map(|p| p.name.as_str()).collect();
            return Err(BadInput(format!(
                "{}: {} pods in the file ({}); choose one with --pod NAME",
                doc.name,
                many.len(),
                names.join(", ")
            ))
            .into());
        }
        (Some(name), many) => many
            .iter()
            .find(|p| &p.name == name)
            .copied()
            .ok_or_else(|| BadInput(format!("{}: no pod named {name:?}", doc.name)))?,
    };
    m.resolve_env_from(chosen)
        .map_err(|e| BadInput(format!("{}: {e}", doc.name)).into())
}

/// Runs the pod until it has terminated; prints container output and events as they happen.
#[allow(clippy::too_many_arguments)]
async fn supervise<R: RuntimeService + 'static>(
    runtime: Arc<R>,
    mut output: tokio::sync::mpsc::UnboundedReceiver<OutputLine>,
    stop_events: impl Fn(&str) -> Vec<podgrace_node::runtime::StopEvent>,
    namespaced: bool,
    plan: PodPlan,
    opts: PodOptions,
    args: &Args,
    flags: KubectlDeleteFlags,
    (eviction, cgroup_root): (podgrace_node::eviction::EvictionSettings, String),
) -> anyhow::Result<RunReport> {
    let events = EventRecorder::new();
    let pod_name = plan.name.clone();
    let json = args.output.output == Format::Json;
    // Container output, prefixed as `kubectl logs --prefix` does; to stderr in JSON mode.
    let logs = tokio::spawn(async move {
        while let Some(OutputLine {
            container,
            stream,
            line,
        }) = output.recv().await
        {
            let text = format!("[pod/{pod_name}/{container}] {line}");
            if json || stream == Stream::Stderr {
                eprintln!("{text}");
            } else {
                // A closed stdout drops the line; the pod goes on.
                let _ = writeln!(Out, "{text}");
            }
        }
    });
    let mut live = events.subscribe();
    let node_start = std::time::Instant::now();
    let start = node_start;
    let printer = tokio::spawn(async move {
        while let Some(e) = live.recv().await {
            eprintln!(
                "{:>9.3}s  {:7}  {:20} {:12} {}",
                e.at.saturating_duration_since(start).as_secs_f64(),
                e.kind.as_str(),
                e.reason,
                e.container.as_deref().unwrap_or("-"),
                e.message
            );
        }
    });
    let mut container_events = events.subscribe();
    // The kubelet's eviction manager on this one-pod node; its node events printed as the
    // pod's are.
    let manager = opts.node.clone().map(|active| {
        podgrace_node::eviction::start(
            eviction,
            active,
            &cgroup_root,
            Arc::new(move |e: podgrace_node::eviction::NodeEvent| {
                eprintln!(
                    "{:>9.3}s  {:7}  {:20} {:12} {}",
                    node_start.elapsed().as_secs_f64(),
                    if e.warning { "Warning" } else { "Normal" },
                    e.reason,
                    "node",
                    e.message
                );
            }),
        )
    });
    let pod = run_pod(runtime.clone(), plan, opts, events);
    let mut interrupts = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut terms = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    // --delete-after counts from the pod's first container start (or failed start), as a user
    // deletes a pod they saw start: the sandbox's set-up, slower on a loaded machine, is not
    // part of the app's time.
    let deleter = async {
        match args.delete_after {
            Some(d) => {
                while let Some(e) = container_events.recv().await {
                    if e.container.is_some()
                        && (e.reason == podgrace_node::events::reason::STARTED
                            || e.reason == podgrace_node::events::reason::FAILED)
                    {
                        break;
                    }
                }
                tokio::time::sleep(d).await
            }
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deleter);
    let eviction = match args.trigger() {
        RunTrigger::Evict { hard } => Some(PodCommand::Evict {
            hard,
            eviction_max_pod_grace_period: args.kubelet.eviction_max_pod_grace_period,
        }),
        RunTrigger::Delete => None,
    };
    let mut deletes = 0;
    let mut status = pod.status();
    let mut seen_deletes: Option<std::time::Instant> = None;
    // When the first delete went out, for --second-delete.
    let mut first_delete: Option<tokio::time::Instant> = None;
    let version = args.version.kubernetes_version;
    loop {
        let second_at = match (args.second_delete, first_delete) {
            (Some(later), Some(first)) if deletes == 1 => {
                Some(first + Duration::from_millis(u64::try_from(later.at_ms).unwrap_or(0)))
            }
            _ => None,
        };
        tokio::select! {
            _ = interrupts.recv() => deletes = request_delete(&pod, deletes, flags, 130),
            _ = terms.recv() => deletes = request_delete(&pod, deletes, flags, 143),
            () = &mut deleter, if deletes == 0 => {
                match &eviction {
                    Some(cmd) => {
                        eprintln!("evicting the pod");
                        pod.send(cmd.clone());
                        deletes = 1;
                    }
                    None => {
                        eprintln!("deleting the pod after --delete-after (kubectl delete pod)");
                        pod.send(PodCommand::Delete(flags));
                        deletes = 1;
                    }
                }
            }
            () = sleep_until(second_at) => {
                if let Some(later) = args.second_delete {
                    eprintln!("deleting the pod again after --second-delete ({})", describe(later.flags));
                    pod.send(PodCommand::Delete(later.flags));
                    deletes = 2;
                }
            }
            changed = status.changed() => {
                if changed.is_err() {
                    break;
                }
                let st = status.borrow_and_update().clone();
                if let Some(d) = st.last_delete.filter(|d| Some(d.at) != seen_deletes) {
                    seen_deletes = Some(d.at);
                    if first_delete.is_none() {
                        first_delete = Some(tokio::time::Instant::from(d.at));
                    }
                    if let Some(note) = delete_note(&d, version) {
                        eprintln!("{note}");
                    }
                }
                if st.phase == podgrace_node::kubelet::PodWorkerState::Terminated {
                    break;
                }
            }
        }
    }
    let report = pod.wait().await.map_err(|e| BadInput(e.to_string()))?;
    drop(manager);
    let run = build_report(&report, stop_events, namespaced);
    if let Some(sb) = &report.sandbox {
        let _ = runtime
            .remove_pod_sandbox(&CallContext::background(), sb)
            .await;
    }
    drop(runtime);
    printer.abort();
    let _ = logs.await;
    Ok(run)
}

/// The first interrupt deletes like `kubectl delete pod` (with --grace-period/--force if
/// given); the second is `--grace-period=0 --force`; a third stops podgrace at once with `code`
/// (130 for SIGINT, 143 for SIGTERM), whatever its containers are doing (not a Kubernetes
/// action): their processes die with podgrace (`PR_SET_PDEATHSIG`), and nothing of a container
/// that the kernel is still tearing down can hold podgrace up.
fn request_delete(
    pod: &podgrace_node::kubelet::PodHandle,
    done: u32,
    flags: KubectlDeleteFlags,
    code: i32,
) -> u32 {
    match done {
        0 => {
            eprintln!("deleting the pod (kubectl delete pod); press Ctrl-C again for --grace-period=0 --force");
            pod.send(PodCommand::Delete(flags));
        }
        1 => {
            eprintln!("force-deleting the pod (kubectl delete pod --grace-period=0 --force); press Ctrl-C a third time to stop podgrace at once");
            pod.send(PodCommand::Delete(KubectlDeleteFlags {
                grace_period: 0,
                force: true,
                now: false,
            }));
        }
        _ => {
            // Not a Kubernetes action: podgrace exits, and every container process dies with it
            // (PR_SET_PDEATHSIG); the pods' network namespaces go first.
            eprintln!("stopping podgrace now: every container is killed with it, no report");
            podgrace_node::sandbox::teardown_own();
            std::process::exit(code);
        }
    }
    done + 1
}

/// A fresh seed for the latency draws when none is given.
/// A seed for the latency draws when none is given (`--runtime-latency-seed`).
pub(crate) fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
