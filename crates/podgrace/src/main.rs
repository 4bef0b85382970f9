//! `podgrace`: Kubernetes pod termination, reproduced on one machine.
//!
//! The binary is thin: it parses the command line and hands each verb to its module in `cmd/`.
//! Exit codes: 0 success, 1 the check failed, 2 bad usage or bad input.

mod cmd;
mod input;

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
    /// Check the rules engine against upstream-derived test vectors.
    Conformance(cmd::conformance::Args),
    /// A small HTTP server whose SIGTERM behaviour is chosen by flags (what the drill runs).
    DemoApp(cmd::demo_app::Args),
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
    let result = match cli.command {
        Command::Explain(args) => cmd::explain::run(args),
        Command::Conformance(args) => cmd::conformance::run(args),
        Command::DemoApp(args) => cmd::demo_app::run(args),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::CheckFailed) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
