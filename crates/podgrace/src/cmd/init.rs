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

#[derive(clap::Args, Debug)]
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

impl Args {
    /// The flags parsed without clap, for `init`'s lean start-up path (see `main`): `None` for
    /// anything but their plain forms (`--help`, `--version`, a flag twice, a value clap would
    /// refuse), which then go through clap for its messages. The tests check that it agrees
    /// with clap.
    pub fn parse_lean(args: &[OsString]) -> Option<Args> {
        let mut a = Args {
            group: false,
            map: Vec::new(),
            drain_delay: None,
            ready_file: None,
            command: Vec::new(),
        };
        let lean = super::lean::split(args, &["-g", "--process-group"], true)?;
        for (flag, value) in lean.flags {
            match (flag, value) {
                ("-g" | "--process-group", None) if !a.group => a.group = true,
                ("--map", Some(v)) => a.map.push(v),
                ("--drain-delay", Some(v)) if a.drain_delay.is_none() => {
                    a.drain_delay = Some(super::parse_duration(&v).ok()?)
                }
                ("--ready-file", Some(v)) if a.ready_file.is_none() && !v.is_empty() => {
                    a.ready_file = Some(PathBuf::from(v))
                }
                _ => return None,
            }
        }
        a.command = lean.rest.to_vec();
        (!a.command.is_empty()).then_some(a)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Clap {
        #[command(flatten)]
        args: Args,
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_lean_parser_agrees_with_clap_or_leaves_it_to_clap() {
        let cases: &[&[&str]] = &[
            &["--", "sleep", "1"],
            &["sleep", "1", "-g"],
            &["-g", "--", "sh", "-c", "x", "--map"],
            &[
                "--process-group",
                "--map",
                "SIGTERM=SIGQUIT",
                "--map=USR1=HUP",
                "--",
                "nginx",
            ],
            &[
                "--drain-delay",
                "5s",
                "--ready-file",
                "/tmp/r",
                "app",
                "--drain-delay",
                "1",
            ],
            &[
                "--drain-delay=2.5",
                "--ready-file=/tmp/r",
                "--",
                "--weird-program",
            ],
            &["--map", "TERM=QUIT", "--", "a", "--", "b"],
        ];
        for case in cases {
            let lean =
                Args::parse_lean(&os(case)).unwrap_or_else(|| panic!("lean refused {case:?}"));
            let mut argv = vec!["init"];
            argv.extend_from_slice(case);
            let clap = Clap::try_parse_from(argv).unwrap_or_else(|e| panic!("{case:?}: {e}"));
            assert_eq!(format!("{lean:?}"), format!("{:?}", clap.args), "{case:?}");
        }
        // Everything else goes to clap: help, version, bad or repeated values, no command.
        for case in [
            &["--help"][..],
            &["-h"],
            &["-V"],
            &[],
            &["--"],
            &["-g", "-g", "x"],
            &["-gx", "y"],
            &["--drain-delay", "soon", "x"],
            &["--drain-delay", "1s", "--drain-delay", "2s", "x"],
            &["--ready-file", "--", "x"],
            &["--map"],
            &["--unknown", "x"],
            &["--process-group=yes", "x"],
        ] {
            assert!(Args::parse_lean(&os(case)).is_none(), "{case:?}");
        }
    }
}
