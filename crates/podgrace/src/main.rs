//! `podgrace`: Kubernetes pod termination, reproduced on one machine.
//!
//! The binary is thin: it parses the command line and hands each verb to its module in `cmd/`.
//! Exit codes: 0 success, 1 the check failed, 2 bad usage or bad input, 3 a failure of this
//! machine (a port in use, a container runtime that cannot be reached, no network namespaces).
#![forbid(unsafe_code)]

mod cmd;
mod input;
mod out;
mod render;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "podgrace",
    version,
    about = "Kubernetes pod termination, reproduced on one machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show when each container's preStop, stop signal and SIGKILL happen, per trigger.
    Explain(cmd::explain::Args),
    /// Find termination pitfalls in manifests (exit 1 on findings at or above --fail-on).
    Lint(cmd::lint::Args),
    /// Run a pod's containers as local processes; Ctrl-C deletes it like `kubectl delete`.
    Run(cmd::run::Args),
    /// Load through a service proxy with endpoint lag while pods roll, are deleted or evicted;
    /// every failed request attributed. With no FILE: the built-in demo, without and with fix.
    Drill(cmd::drill::Args),
    /// Check the rules engine against upstream-derived test vectors.
    Conformance(cmd::conformance::Args),
    /// A small HTTP server whose SIGTERM behaviour is chosen by flags (what the drill runs);
    /// with --upstream, a sidecar proxy in front of it.
    DemoApp(cmd::demo_app::Args),
    /// An exec preStop hook: returns once new connections have stopped arriving at the pod
    /// (and, with --endpoints, its EndpointSlice entries are no longer ready). No shell needed.
    PrestopWait(cmd::prestop_wait::Args),
    /// A PID 1 for container images: forwards (and maps) signals to CMD, reaps zombies, exits
    /// with CMD's status, and can hold SIGTERM for a drain delay.
    Init(cmd::init::Args),
    /// A single-node Kubernetes API server for kubectl and client libraries (TLS, a token,
    /// 127.0.0.1); writes a kubeconfig. Ctrl-C deletes every pod as a node drain would.
    Serve(cmd::serve::Args),
    /// Forensics of a termination that already happened: what a pod's status and events say
    /// (exit 137 at the grace deadline, OOMKilled, Evicted, a liveness kill, a cut preStop),
    /// from a cluster or from kubectl's JSON output (-f).
    Why(cmd::why::Args),
    /// The node of a running `serve`: `node shutdown` shuts it down gracefully, as the
    /// kubelet's node shutdown manager does on logind's shutdown signal.
    Node(cmd::node::Args),
    /// The real endpoint lag of a Deployment on its cluster: terminates pods one at a time
    /// (their preStop keeps them serving), measures how long the load balancer, ingress or
    /// kube-proxy still routes to each, and recommends the preStop sleep.
    Lag(cmd::lag::Args),
}

/// How a verb ended, beyond success.
#[derive(Debug)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the check ran and failed.
    CheckFailed,
    /// This exit code (`init`: the child's; `prestop-wait`: 3 when the machine failed it).
    Exit(u8),
}

/// Bad usage or bad input: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// A failure of this machine, not of the input (exit 3): what podgrace was doing when the
/// machine refused, as context over the cause, whose chain is kept (`{:#}` prints it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MachineFailure(pub String);

/// Attaches [`MachineFailure`] context to a fallible call.
pub trait OnMachine<T> {
    /// `what` podgrace was doing, over the error's own chain.
    fn on_machine(self, what: impl FnOnce() -> String) -> anyhow::Result<T>;
}

impl<T, E> OnMachine<T> for Result<T, E>
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn on_machine(self, what: impl FnOnce() -> String) -> anyhow::Result<T> {
        self.map_err(|e| anyhow::Error::new(e).context(MachineFailure(what())))
    }
}

/// The exit code of an error: 2 for bad usage or input (the default), 3 for a failure of the
/// machine: a [`MachineFailure`] anywhere in its context, or a cause that is one by its kind (an
/// address in use or not available, a refused connection).
fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<BadInput>().is_some() {
        return 2;
    }
    if e.downcast_ref::<MachineFailure>().is_some() {
        return 3;
    }
    let machine = e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::AddrInUse
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::ConnectionRefused
            )
        })
    });
    if machine {
        3
    } else {
        2
    }
}

/// `podgrace init` and `podgrace prestop-wait` alone, parsed without the rest of the CLI.
#[derive(Parser)]
#[command(name = "podgrace", version)]
struct Lean {
    #[command(subcommand)]
    command: LeanCommand,
}

#[derive(Subcommand)]
enum LeanCommand {
    Init(cmd::init::Args),
    PrestopWait(cmd::prestop_wait::Args),
}

fn main() -> ExitCode {
    // The verbs that run inside users' containers (PID 1, a preStop hook) take a lean path:
    // only their own flags are parsed and no log subscriber is set up, so that they cost what
    // tini and a shell's sleep cost (see the README's benchmarks), not what the whole CLI does.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let verb = argv.get(1).and_then(|a| a.to_str());
    if matches!(verb, Some("init" | "prestop-wait")) {
        // Their plain flags are read without clap; anything else (help, errors) goes to clap.
        let rest = &argv[2..];
        let result = match verb {
            Some("init") => cmd::init::Args::parse_lean(rest).map(cmd::init::run),
            _ => cmd::prestop_wait::Args::parse_lean(rest).map(cmd::prestop_wait::run),
        };
        if let Some(result) = result {
            return exit(result);
        }
        let result = match Lean::parse_from(&argv).command {
            LeanCommand::Init(args) => cmd::init::run(args),
            LeanCommand::PrestopWait(args) => cmd::prestop_wait::run(args),
        };
        return exit(result);
    }
    let cli = Cli::parse();
    // Diagnostics go to stderr; RUST_LOG=debug shows the local kubelet's decisions. kube's
    // client logs every failed request at ERROR; the verbs on live objects print the failure
    // themselves, as kubectl words it, so that line is left out unless RUST_LOG asks for it.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,kube_client::client::builder=off")
            }),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Command::Explain(args) => cmd::explain::run(args),
        Command::Lint(args) => cmd::lint::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Drill(args) => cmd::drill::run(args),
        Command::Conformance(args) => cmd::conformance::run(args),
        Command::DemoApp(args) => cmd::demo_app::run(args),
        Command::PrestopWait(args) => cmd::prestop_wait::run(args),
        Command::Init(args) => cmd::init::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Why(args) => cmd::why::run(args),
        Command::Node(args) => cmd::node::run(args),
        Command::Lag(args) => cmd::lag::run(args),
    };
    exit(result)
}

/// The exit code of a verb's result; errors are printed to stderr.
fn exit(result: anyhow::Result<Outcome>) -> ExitCode {
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::CheckFailed) => ExitCode::from(1),
        Ok(Outcome::Exit(code)) => ExitCode::from(code),
        Err(e) => {
            for line in format!("{e:#}").lines() {
                eprintln!("error: {line}");
            }
            ExitCode::from(exit_code(&e))
        }
    }
}
