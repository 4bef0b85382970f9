//! `podgrace init`: a PID 1 for containers (the I/O around [`podgrace_core::init::Forwarder`]).
//!
//! As tini does (`src/tini.c` v0.19): every signal but the synchronous faults is blocked and
//! collected with `sigtimedwait`; the child runs the command in a process group of its own
//! (the terminal's foreground group when stdin is a terminal) with the signal mask and
//! dispositions reset; every zombie is reaped (`waitpid(-1)`), its own children's and those
//! re-parented to it; when the child exits, init exits with its code (128 + n for a signal n).
//! When it is not PID 1, init registers as a child subreaper (`PR_SET_CHILD_SUBREAPER`), so
//! orphans still re-parent to it and are reaped.
//!
//! Synchronous: no async runtime, no thread, no allocation in the loop beyond the actions'
//! small vectors, so that init costs what tini costs (see the README's benchmark). Lines go to
//! stderr prefixed `podgrace init: `, only for what changes timing (the drain delay) and for
//! failures.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use podgrace_core::init::{exit_code, Action, ChildExit, Forwarder, InitConfig};
use podgrace_core::rules::runtime::Signal;
use rustix::process::{Pid, WaitOptions};

/// What init runs and how.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// What init was told: the `--map` signal rewrites and the `--drain-delay`.
    pub config: InitConfig,
    /// `-g`: signals go to the child's process group.
    pub group: bool,
    /// `--ready-file`: created once the child runs, removed at the first SIGTERM and at exit.
    pub ready_file: Option<PathBuf>,
    /// The command and its arguments (the first is looked up in `PATH`).
    pub argv: Vec<OsString>,
}

/// Errors of setting init up. Each names the operation.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// `sigprocmask(2)` failed.
    #[error("blocking signals: {0}")]
    SignalMask(std::io::Error),
    /// The command could not be started; `code` is the exit code for it (127 not found, 126
    /// not executable, 1 otherwise, as a shell reports them).
    #[error("cannot run {program:?}: {source}")]
    Exec {
        /// The program as given.
        program: OsString,
        /// The OS error of spawning it.
        source: std::io::Error,
        /// The exit code init exits with.
        code: u8,
    },
    /// No command was given after the options.
    #[error("no command to run")]
    NoCommand,
}

/// Signals init leaves unblocked: the synchronous faults, which must reach init itself.
const SYNCHRONOUS: [i32; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGABRT,
];

/// The set init blocks and waits on: everything but [`SYNCHRONOUS`].
fn wait_set() -> libc::sigset_t {
    // SAFETY: sigfillset/sigdelset initialise and edit a local set.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigfillset(&mut set);
        for s in SYNCHRONOUS {
            libc::sigdelset(&mut set, s);
        }
        set
    }
}

fn say(msg: &str) {
    eprintln!("podgrace init: {msg}");
}

/// Runs `opts.argv` under init until it exits; returns init's exit code. Must be called before
/// any other thread is started (the signal mask is per thread). Errors: [`InitError`].
pub fn run(opts: InitOptions) -> Result<u8, InitError> {
    let Some(program) = opts.argv.first().cloned() else {
        return Err(InitError::NoCommand);
    };
    let me = rustix::process::getpid();
    if !me.is_init() {
        if let Err(e) = rustix::process::set_child_subreaper(Some(me)) {
            say(&format!("cannot register as a child subreaper ({e}): orphans of the command will not be reaped by init"));
        }
    }
    let set = wait_set();
    // SAFETY: a valid set; this thread is the only one.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(InitError::SignalMask(std::io::Error::from_raw_os_error(r)));
    }
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&opts.argv[1..]).process_group(0);
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls.
    // The child still has init's signal mask (SIGTTOU blocked, so that a child in a background
    // group may take the terminal: POSIX allows tcsetpgrp then); it is cleared before exec, as
    // tini restores it (std resets SIGPIPE's disposition but not the mask).
    unsafe {
        cmd.pre_exec(|| {
            let stdin = std::io::stdin();
            if rustix::termios::isatty(&stdin) {
                let _ = rustix::termios::tcsetpgrp(&stdin, rustix::process::getpgrp());
            }
            let mut empty = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut empty);
            let r = libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            if r != 0 {
                return Err(std::io::Error::from_raw_os_error(r));
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| InitError::Exec {
        code: match source.kind() {
            std::io::ErrorKind::NotFound => 127,
            std::io::ErrorKind::PermissionDenied => 126,
            _ => 1,
        },
        program: program.clone(),
        source,
    })?;
    let child_pid = Pid::from_child(&child);
    // The child is reaped below with waitpid(-1); std's handle never waits.
    drop(child);
    if let Some(path) = &opts.ready_file {
        if let Err(e) = std::fs::write(path, b"") {
            say(&format!(
                "cannot create the ready file {}: {e}",
                path.display()
            ));
        }
    }
    let start = Instant::now();
    let mut forwarder = Forwarder::new(opts.config.clone());
    // Start-up is over: what it left mapped of the executable goes (the loop maps back the
    // few pages it uses). See the README's init benchmark.
    crate::pages::release_start_up_pages();
    loop {
        if let Some(exit) = reap(child_pid) {
            remove_ready_file(&opts);
            return Ok(exit_code(exit));
        }
        let now_ms = millis(start.elapsed());
        let wait_ms = forwarder
            .deadline_ms()
            .map_or(1_000, |d| d.saturating_sub(now_ms).min(1_000));
        let mut actions = match wait_signal(&set, wait_ms) {
            Some(n) => Signal::from_number(n)
                .map(|s| forwarder.on_signal(s, millis(start.elapsed())))
                .unwrap_or_default(),
            None => Vec::new(),
        };
        actions.extend(forwarder.on_time(millis(start.elapsed())));
        for action in actions {
            act(action, &opts, child_pid, start);
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Waits up to `ms` for a signal of `set`; its number, or `None` on timeout or interruption.
fn wait_signal(set: &libc::sigset_t, ms: u64) -> Option<i32> {
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(ms / 1_000).unwrap_or(libc::time_t::MAX),
        tv_nsec: ((ms % 1_000) * 1_000_000) as libc::c_long,
    };
    // SAFETY: valid pointers to a set, an info buffer and a timeout.
    let n = unsafe {
        let mut info = std::mem::zeroed::<libc::siginfo_t>();
        libc::sigtimedwait(set, &mut info, &timeout)
    };
    (n > 0).then_some(n)
}

/// Reaps every zombie waiting; returns how the child ended if it was among them.
fn reap(child: Pid) -> Option<ChildExit> {
    let mut exit = None;
    loop {
        // wait(): waitpid(-1), any child (rustix's waitpid(None) is pid 0, our own group only).
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) => {
                if pid == child {
                    exit = if let Some(code) = status.exit_status() {
                        Some(ChildExit::Code(u8::try_from(code & 0xff).unwrap_or(255)))
                    } else {
                        status.terminating_signal().map(ChildExit::Signal)
                    };
                }
            }
            Err(rustix::io::Errno::INTR) => continue,
            // Ok(None): children left, none exited; ECHILD: none left.
            _ => return exit,
        }
    }
}

fn remove_ready_file(opts: &InitOptions) {
    if let Some(path) = &opts.ready_file {
        let _ = std::fs::remove_file(path);
    }
}

fn act(action: Action, opts: &InitOptions, child: Pid, start: Instant) {
    match action {
        Action::Send(sig) => {
            let pid = child.as_raw_nonzero().get();
            let target = if opts.group { -pid } else { pid };
            // SAFETY: kill(2) with a pid and a signal number; ESRCH (already gone) is fine.
            unsafe { libc::kill(target, sig.number()) };
        }
        Action::FailReadiness => {
            if let Some(path) = &opts.ready_file {
                match std::fs::remove_file(path) {
                    Ok(()) => say(&format!(
                        "SIGTERM received: readiness fails now ({} removed)",
                        path.display()
                    )),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => say(&format!(
                        "cannot remove the ready file {}: {e}",
                        path.display()
                    )),
                }
            }
        }
        Action::Holding { until_ms } => {
            let delay = until_ms.saturating_sub(millis(start.elapsed()));
            let sent = opts.config.mapped(Signal::SIGTERM);
            say(&format!(
                "SIGTERM received: holding it for {:.1} s (--drain-delay), then sending {sent} to the command",
                delay as f64 / 1_000.0
            ));
        }
        Action::HoldCut => say("second SIGTERM: forwarding it now"),
    }
}
