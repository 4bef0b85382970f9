//! `podgrace prestop-wait`: an exec preStop hook that returns once new connections have stopped
//! arriving at the pod (see [`podgrace_shutdown::quiesce`] for the decision and
//! [`podgrace_shutdown::connections`] for the counters), with no shell and no `sleep` binary.
//!
//! Every line goes to the hook's own stdout and to the container's PID 1's stdout
//! (`/proc/1/fd/1`), because the kubelet shows a hook's output only when the hook fails, while
//! `kubectl logs` shows PID 1's. It runs no async runtime unless `--endpoints` asks for the
//! Kubernetes API, so that waiting costs almost nothing.
//!
//! Exit codes: 0 when the wait ended (quiet, or at `--max`); 2 bad usage; 3 when the counters or
//! the EndpointSlice watch failed (after waiting until `--max`, the safe side of a fixed sleep),
//! so that the kubelet's `FailedPreStopHook` event carries the reason.

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use podgrace_shutdown::connections::ConnectionCounter;
use podgrace_shutdown::quiesce::QuietPolicy;
use podgrace_shutdown::wait::{self, EndpointsView, Progress, Summary};

use crate::{BadInput, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Return once no new TCP connection has arrived for this long (`1s`, `500ms`, `2.5`).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = super::parse_duration)]
    quiet: Duration,
    /// Never return before this.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = super::parse_duration)]
    min: Duration,
    /// Return at this at the latest, quiet or not (keep it below terminationGracePeriodSeconds,
    /// which also bounds the hook).
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = super::parse_duration)]
    max: Duration,
    /// Count only connections to this local port (repeatable, or comma-separated); default:
    /// every connection into the pod's network namespace.
    #[arg(long = "port", value_name = "PORT", value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..))]
    ports: Vec<u16>,
    /// Also wait until the pod's EndpointSlice entries are no longer ready, through the
    /// Kubernetes API with the pod's service account (or KUBECONFIG); the pod's name is
    /// POD_NAME or the hostname, its namespace POD_NAMESPACE or the service account's.
    #[arg(long)]
    endpoints: bool,
}

impl Args {
    /// The flags parsed without clap, for the lean start-up path (see `main`): `None` for
    /// anything but their plain forms (`--help`, a flag twice, a value clap would refuse), which
    /// then go through clap for its messages. The tests check that it agrees with clap.
    pub fn parse_lean(args: &[std::ffi::OsString]) -> Option<Args> {
        let (mut quiet, mut min, mut max) = (None, None, None);
        let mut a = Args {
            quiet: Duration::ZERO,
            min: Duration::ZERO,
            max: Duration::ZERO,
            ports: Vec::new(),
            endpoints: false,
        };
        for (flag, value) in super::lean::split(args, &["--endpoints"], false)?.flags {
            let (slot, v) = match (flag, value) {
                ("--endpoints", None) if !a.endpoints => {
                    a.endpoints = true;
                    continue;
                }
                ("--port", Some(v)) => {
                    for p in v.split(',') {
                        a.ports.push(p.parse::<u16>().ok().filter(|p| *p > 0)?);
                    }
                    continue;
                }
                ("--quiet", Some(v)) => (&mut quiet, v),
                ("--min", Some(v)) => (&mut min, v),
                ("--max", Some(v)) => (&mut max, v),
                _ => return None,
            };
            if slot.replace(super::parse_duration(&v).ok()?).is_some() {
                return None;
            }
        }
        a.quiet = quiet.unwrap_or(Duration::from_secs(1));
        a.min = min.unwrap_or(Duration::ZERO);
        a.max = max.unwrap_or(Duration::from_secs(20));
        Some(a)
    }
}

/// Where each line goes: the hook's stdout and, if it is another file, PID 1's.
struct Lines {
    pid1: Option<std::fs::File>,
}

impl Lines {
    fn open() -> Self {
        Lines {
            pid1: pid1_stdout(),
        }
    }

    fn line(&mut self, text: &str) {
        let line = crate::render::prestop_wait::line(text);
        // A reader that went away must not stop the wait: errors are dropped.
        let _ = std::io::stdout().lock().write_all(line.as_bytes());
        if let Some(f) = &mut self.pid1 {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The container's PID 1's stdout, unless this is PID 1 or it is the same file as ours.
fn pid1_stdout() -> Option<std::fs::File> {
    if std::process::id() == 1 {
        return None;
    }
    // Append: when PID 1's stdout is a regular file, write at its end, not over it.
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open("/proc/1/fd/1")
        .ok()?;
    let same =
        |a: &rustix::fs::Stat, b: &rustix::fs::Stat| a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    match (rustix::fs::fstat(&f), rustix::fs::fstat(std::io::stdout())) {
        (Ok(theirs), Ok(ours)) if same(&theirs, &ours) => None,
        _ => Some(f),
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let policy = QuietPolicy {
        quiet: args.quiet,
        min: args.min,
        max: args.max,
    }
    .validate()
    .map_err(|e| BadInput(e.to_string()))?;
    let lines = Arc::new(Mutex::new(Lines::open()));
    let say = |text: &str| {
        if let Ok(mut l) = lines.lock() {
            l.line(text);
        }
    };
    let failed = Arc::new(Mutex::new(None::<String>));
    let fail = |msg: String| {
        if let Ok(mut f) = failed.lock() {
            f.get_or_insert(msg);
        }
    };
    let mut counter = match ConnectionCounter::new(&args.ports) {
        Ok(c) => c,
        Err(e) => {
            say(&crate::render::prestop_wait::counters_unreadable(
                &e, policy.max,
            ));
            std::thread::sleep(policy.max);
            say(crate::render::prestop_wait::DONE);
            return Ok(Outcome::Exit(3));
        }
    };
    let view = args.endpoints.then(|| Arc::new(EndpointsView::default()));
    if let Some(view) = &view {
        let (view, lines, failed) = (Arc::clone(view), Arc::clone(&lines), Arc::clone(&failed));
        std::thread::spawn(move || watch_endpoints(view, lines, failed));
    }
    // Start-up is over: what it left mapped of the executable goes (the wait maps back the
    // few pages it uses). See the README's prestop-wait benchmark.
    podgrace_node::pages::release_start_up_pages();
    let outcome = wait::wait_blocking(policy, &mut counter, view.as_deref(), |p| {
        if let Progress::CounterFailed { error } = &p {
            fail(error.to_string());
        }
        say(&p.to_string());
    });
    say(&Summary(outcome, policy).to_string());
    let failed = failed.lock().ok().and_then(|f| f.clone());
    Ok(match failed {
        Some(_) => Outcome::Exit(3),
        None => Outcome::Success,
    })
}

/// The `--endpoints` thread: a single-threaded runtime for the Kubernetes API watch.
fn watch_endpoints(
    view: Arc<EndpointsView>,
    lines: Arc<Mutex<Lines>>,
    failed: Arc<Mutex<Option<String>>>,
) {
    use podgrace_shutdown::endpoints;
    let report = move |msg: String| {
        if let Ok(mut l) = lines.lock() {
            l.line(&msg);
        }
        if let Ok(mut f) = failed.lock() {
            f.get_or_insert(msg);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return report(format!("cannot start the runtime for --endpoints: {e}")),
    };
    rt.block_on(async move {
        match endpoints::connect().await {
            Ok((client, pod)) => {
                let r = report.clone();
                endpoints::watch(client, pod, view, move |e| r(e.to_string())).await
            }
            Err(e) => report(e.to_string()),
        }
    });
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

    fn os(v: &[&str]) -> Vec<std::ffi::OsString> {
        v.iter().map(std::ffi::OsString::from).collect()
    }

    #[test]
    fn the_lean_parser_agrees_with_clap_or_leaves_it_to_clap() {
        let cases: &[&[&str]] = &[
            &[],
            &["--quiet", "1s", "--max", "60s"],
            &["--quiet=500ms", "--min=2", "--max", "1m30s", "--endpoints"],
            &["--port", "8080", "--port=9090,9091"],
            &["--endpoints", "--port", "1"],
        ];
        for case in cases {
            let lean =
                Args::parse_lean(&os(case)).unwrap_or_else(|| panic!("lean refused {case:?}"));
            let mut argv = vec!["prestop-wait"];
            argv.extend_from_slice(case);
            let clap = Clap::try_parse_from(argv).unwrap_or_else(|e| panic!("{case:?}: {e}"));
            assert_eq!(format!("{lean:?}"), format!("{:?}", clap.args), "{case:?}");
        }
        for case in [
            &["--help"][..],
            &["-h"],
            &["--quiet", "soon"],
            &["--quiet", "1s", "--quiet", "2s"],
            &["--port", "0"],
            &["--port", "70000"],
            &["--port", "8080,"],
            &["--endpoints", "--endpoints"],
            &["--endpoints=true"],
            &["--max"],
            &["--max", "-1"],
            &["stray"],
        ] {
            assert!(Args::parse_lean(&os(case)).is_none(), "{case:?}");
        }
    }
}
