//! Benchmark of `podgrace init` against Debian's tini, tini-static and dumb-init, in the same
//! run: each init runs as PID 1 of a fresh PID namespace with the same child, a probe that
//! waits for SIGUSR1 with `sigwaitinfo` and prints `CLOCK_MONOTONIC` when one arrives.
//!
//! * **forwarding latency**: `kill(init, SIGUSR1)` from here, at CLOCK_MONOTONIC t0, until the
//!   probe's timestamp t1 (same clock, no time namespace); `--signals` of them, 2 ms apart;
//!   p50/p99/max in µs. `direct` is the probe itself as PID 1 (no init), the floor.
//! * **memory**: the init's VmRSS, split into RssAnon (its private memory) and RssFile (pages of
//!   its binary and libraries, shared with every process mapping them), and its PSS
//!   (`/proc/PID/smaps_rollup`: shared pages divided among the processes mapping them) after
//!   the signals; and its VmHWM, the peak (for `podgrace init`, the start-up pages it then
//!   drops).
//!
//! Rounds alternate the inits; each figure is the median over rounds.
//!
//! ```sh
//! cargo build --release -p podgrace-node --example bench_init
//! sudo target/release/examples/bench_init --podgrace target/x86_64-unknown-linux-gnu/release/podgrace
//! ```
//! Needs root (a PID namespace per init).
#![allow(unsafe_code)] // raw signal masks, clock_gettime and unshare for the measurement

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::fd::AsFd as _;
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType, UnshareFlags};

fn now_ns() -> u64 {
    // SAFETY: clock_gettime(2) into a local.
    let mut t = unsafe { std::mem::zeroed::<libc::timespec>() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The probe: SIGUSR1 and SIGTERM blocked and waited for; a timestamp per SIGUSR1.
fn probe() -> ! {
    // SAFETY: local sets, one thread.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
        loop {
            let mut info = std::mem::zeroed::<libc::siginfo_t>();
            let sig = libc::sigwaitinfo(&set, &mut info);
            if sig == libc::SIGUSR1 {
                let _ = writeln!(out, "{}", now_ns());
                let _ = out.flush();
            } else if sig == libc::SIGTERM {
                std::process::exit(0);
            }
        }
    }
}

struct Measure {
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    rss_kb: u64,
    /// VmHWM: the peak, at start-up (before `podgrace init` drops its start-up pages).
    hwm_kb: u64,
    anon_kb: u64,
    file_kb: u64,
    pss_kb: u64,
}

fn status_kb(pid: i32, file: &str, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn run_one(argv: &[String], signals: usize) -> Measure {
    let me = std::env::current_exe().unwrap();
    let host_pidns = std::fs::File::open("/proc/self/ns/pid").unwrap();
    // SAFETY: NEWPID only changes where this thread's next child goes; restored below.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWPID) }
        .expect("unshare(CLONE_NEWPID): run as root");
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).arg(&me).arg("probe");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    move_into_link_name_space(host_pidns.as_fd(), Some(LinkNameSpaceType::ProcessID)).unwrap();
    let pid = child.id() as i32;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready", "{argv:?}");
    let mut lat = Vec::with_capacity(signals);
    for _ in 0..signals {
        let t0 = now_ns();
        // SAFETY: kill(2).
        unsafe { libc::kill(pid, libc::SIGUSR1) };
        let t1: u64 = lines.next().unwrap().unwrap().trim().parse().unwrap();
        lat.push((t1.saturating_sub(t0)) as f64 / 1_000.0);
        std::thread::sleep(Duration::from_millis(2));
    }
    let m = {
        lat.sort_by(f64::total_cmp);
        let q = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1];
        Measure {
            p50_us: q(0.50),
            p99_us: q(0.99),
            max_us: *lat.last().unwrap(),
            rss_kb: status_kb(pid, "status", "VmRSS:"),
            hwm_kb: status_kb(pid, "status", "VmHWM:"),
            anon_kb: status_kb(pid, "status", "RssAnon:"),
            file_kb: status_kb(pid, "status", "RssFile:"),
            pss_kb: status_kb(pid, "smaps_rollup", "Pss:"),
        }
    };
    // PID 1 goes, and its namespace with it.
    let _ = child.kill();
    let _ = child.wait();
    m
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("probe") {
        probe();
    }
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let rounds: usize = flag("--rounds").map_or(3, |v| v.parse().unwrap());
    let signals: usize = flag("--signals").map_or(2000, |v| v.parse().unwrap());
    let podgrace = flag("--podgrace").unwrap_or_else(|| "target/release/podgrace".into());
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    // `direct`: env execs the probe, which is then PID 1 itself (run_one appends `<me> probe`).
    let mut inits: Vec<(String, Vec<String>)> =
        vec![("direct (no init)".into(), s(&["/usr/bin/env"]))];
    for (name, argv) in [
        ("tini 0.19 (Debian, dynamic)", s(&["/usr/bin/tini", "--"])),
        (
            "tini-static 0.19 (Debian)",
            s(&["/usr/bin/tini-static", "--"]),
        ),
        ("dumb-init 1.2.5 (Debian)", s(&["/usr/bin/dumb-init"])),
        (
            "podgrace init",
            vec![podgrace.clone(), "init".into(), "--".into()],
        ),
    ] {
        if std::path::Path::new(&argv[0]).exists() {
            inits.push((name.into(), argv));
        } else {
            eprintln!("skipping {name}: {} not found", argv[0]);
        }
    }
    let mut results: Vec<Vec<Measure>> = inits.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        for (i, (_, argv)) in inits.iter().enumerate() {
            results[i].push(run_one(argv, signals));
        }
    }
    println!(
        "{} cores, load average {}, {rounds} rounds of {signals} signals",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{:<30} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}",
        "init (PID 1)",
        "VmRSS kB",
        "anon kB",
        "file kB",
        "PSS kB",
        "VmHWM kB",
        "p50 µs",
        "p99 µs",
        "max µs"
    );
    for ((name, _), ms) in inits.iter().zip(&results) {
        let col = |f: fn(&Measure) -> f64| median(ms.iter().map(f).collect());
        println!(
            "{:<30} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>10.1} {:>10.1} {:>10.1}",
            name,
            col(|m| m.rss_kb as f64),
            col(|m| m.anon_kb as f64),
            col(|m| m.file_kb as f64),
            col(|m| m.pss_kb as f64),
            col(|m| m.hwm_kb as f64),
            col(|m| m.p50_us),
            col(|m| m.p99_us),
            col(|m| m.max_us)
        );
    }
}
