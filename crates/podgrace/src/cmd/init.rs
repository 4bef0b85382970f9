//! `podgrace init [FLAGS] -- CMD ARGS...`: a PID 1 for container images (see
//! [`podgrace_node::init`] for what it does, [`podgrace_core::init`] for its decisions).
//!
//! Exit code: the command's, or 128 + n when signal n killed it; 127 when the command is not
//! found, 126 when it cannot be executed; 2 for bad usage.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use podgrace_core::init::InitConfig;
use podgrace_node::init::{self, InitError, InitOptions};

use crate::{BadInput, Outcome};

#[derive(clap::Args)]
#[command(override_usage = "podgrace init [OPTIONS] -- CMD [ARGS]...")]
pub struct Args {
    /// Send signals to the command's whole process group, not only to the command (tini -g).
    #[arg(short = 'g', long = "process-group")]
    group: bool,
    /// When FROM arrives, send TO instead (repeatable): SIGTERM=SIGQUIT gives nginx its
    /// graceful quit behind a runtime that sends SIGTERM.
    #[arg(long, value_name = "FROM=TO")]
    map: Vec<String>,
    /// Hold the first SIGTERM this long before sending it on (a preStop sleep without a
    /// shell); a second SIGTERM sends it at once (`5s`, `500ms`, `2.5`).
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration)]
    drain_delay: Option<Duration>,
    /// A file that exists while the container is ready: created once the command runs,
    /// removed at the first SIGTERM (before any drain delay) and at exit. Point an exec
    /// readinessProbe (`cat FILE`) or the app's own readiness check at it.
    #[arg(long, value_name = "PATH")]
    ready_file: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let drain_delay_ms = args
        .drain_delay
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let config = InitConfig::new(&args.map, drain_delay_ms).map_err(|e| BadInput(e.to_string()))?;
    let opts = InitOptions {
        config,
        group: args.group,
        ready_file: args.ready_file,
        argv: args.command,
    };
    match init::run(opts) {
        Ok(code) => Ok(Outcome::Exit(code)),
        Err(InitError::Exec {
            program,
            source,
            code,
        }) => {
            eprintln!("podgrace init: cannot run {:?}: {source}", program);
            Ok(Outcome::Exit(code))
        }
        Err(e) => Err(BadInput(e.to_string()).into()),
    }
}
