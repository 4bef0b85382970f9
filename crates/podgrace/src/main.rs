//! `podgrace`: Kubernetes pod termination, reproduced on one machine.
//!
//! The binary is thin: it parses the command line and hands each verb to its module in `cmd/`.
//! Exit codes: 0 success, 1 the check failed, 2 bad usage or bad input.

mod cmd;
mod input;
mod out;

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
    /// A single-node Kubernetes API server for kubectl and client libraries (TLS, a token,
    /// 127.0.0.1); writes a kubeconfig. Ctrl-C deletes every pod as a node drain would.
    Serve(cmd::serve::Args),
}

/// How a verb ended, beyond success.
#[derive(Debug)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the check ran and failed.
    CheckFailed,
}

/// Bad usage or bad input: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Diagnostics go to stderr; RUST_LOG=debug shows the local kubelet's decisions.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
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
        Command::Serve(args) => cmd::serve::run(args),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::CheckFailed) => ExitCode::from(1),
        Err(e) => {
            for line in format!("{e:#}").lines() {
                eprintln!("error: {line}");
            }
            ExitCode::from(2)
        }
    }
}
