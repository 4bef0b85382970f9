//! Stop-signal and SIGKILL lateness of the local kubelet, with coreutils `timeout` as the
//! reference, for `bench/stop.sh`.
//!
//! ```text
//! cargo run --release -p podgrace-node --example bench_stop -- [--pods 100] [--grace 2]
//!                                                               [--host-network | --pod-network]
//! ```
//!
//! # podgrace
//! `--pods` pods (default 100) are started on one shared [`ProcessRuntime`], on a multi-thread
//! tokio runtime with 2 workers, as `podgrace run` would run them. Each pod has one container,
//! `sleep 100000`: as PID 1 of its PID namespace without a SIGTERM handler it ignores SIGTERM,
//! so it is SIGKILLed at its deadline. `terminationGracePeriodSeconds` is `--grace` (default 2)
//! and a preStop `sleep: {seconds: 1}` gives the stop signal a computed instant of its own.
//! Pods use `hostNetwork: true` unless `--pod-network` is given: creating 100 network
//! namespaces and veth pairs is not what is measured. Once every pod is Running, all of them
//! are deleted at once (`kubectl delete` with default flags, t_delete recorded per pod as its
//! command is sent). From the kill records and the runtime's stop events:
//! * stop signal sent − the kubelet's computed instant (the preStop hook's end as the kubelet
//!   saw it, `KillRecord.pre_stop.ended`), and − the schedule (t_delete + 1 s);
//! * SIGKILL sent − its deadline (`stop_called` + the StopContainer timeout);
//! * exit observed (the reaper collects PID 1) − the same deadline, and − the schedule
//!   (t_delete + 1 s + timeout): the "death" method, the one that can also be applied to
//!   `timeout`.
//!
//! podgrace's own resident memory (this process: kubelet, runtime, reaper, and the bench's
//! bookkeeping) is sampled from `/proc/self/status` (VmRSS) every 50 ms from the first pod
//! start until every pod has terminated; the maximum and the kernel's high-water mark (VmHWM)
//! are reported.
//!
//! # Reference: coreutils `timeout`
//! Then, in the same run, the same number of `timeout --kill-after=K D PROBE` processes, where K
//! is the StopContainer timeout the pods got (the same SIGTERM → SIGKILL gap) and D is chosen
//! per process so that every SIGTERM is due at the same instant, at least 1 s after the last
//! spawn (one burst, as the pods' stop signals are). They are spawned 3 ms apart so that each
//! starts on a quiet machine. PROBE is this binary in `--term-probe` mode: it writes `S` to its
//! stdout when running and `T` on every SIGTERM and keeps running, so `timeout` must SIGKILL
//! it. `timeout` signals the child and its own process group, so the SIGKILL ends `timeout` too.
//! One observer thread waits in `epoll_wait` on every `timeout`'s pidfd and stdout pipe, stamps
//! each line as it is read, and collects each exit with `waitid(P_PIDFD)` (podgrace's reaper
//! does the same for its containers). When `timeout` arms its timer (after it has started,
//! before the probe it forks runs) is not observable without tracing it, so each figure is
//! given twice: from the spawn (an upper bound: it counts `timeout`'s start-up) and from the
//! probe running (a lower bound):
//! * SIGTERM received (the probe's `T` read) − (start + D): this also counts the probe's
//!   wake-up, where podgrace's figure is the moment of sending;
//! * exit observed − (start + D + K), the death method.
//!
//! Percentiles are nearest-rank over all pods or processes; times in milliseconds. Run as root:
//! without PID namespaces `sleep` is a plain host process, dies on SIGTERM, and no SIGKILL is
//! ever needed.

use std::error::Error;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use podgrace_core::manifest;
use podgrace_core::plan::PodPlan;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{run_pod, PodCommand, PodHandle, PodOptions, PodWorkerState};
use podgrace_node::process::namespaces_permitted;
use podgrace_node::runtime::{ProcessRuntime, StopEventKind};
use podgrace_node::sandbox::NetworkConfig;
use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use rustix::process::{pidfd_open, waitid, Pid, PidfdFlags, WaitId, WaitIdOptions};

type BoxError = Box<dyn Error + Send + Sync>;

/// The preStop sleep of every pod, seconds.
const PRE_STOP_SECONDS: u64 = 1;
/// How often podgrace's resident memory is sampled.
const RSS_EVERY: Duration = Duration::from_millis(50);
/// Bounds on the phases, so a broken run ends with an error instead of hanging.
const START_LIMIT: Duration = Duration::from_secs(60);
const STOP_LIMIT: Duration = Duration::from_secs(120);

struct Args {
    pods: usize,
    grace: u64,
    host_network: bool,
}

fn usage() -> String {
    "usage: bench_stop [--pods N] [--grace SECONDS] [--host-network | --pod-network]".into()
}

fn parse_args(args: &[String]) -> Result<Args, BoxError> {
    let mut out = Args {
        pods: 100,
        grace: 2,
        host_network: true,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("{name} needs a value\n{}", usage()))
        };
        match a.as_str() {
            "--pods" => out.pods = value("--pods")?.parse()?,
            "--grace" => out.grace = value("--grace")?.parse()?,
            "--host-network" => out.host_network = true,
            "--pod-network" => out.host_network = false,
            "-h" | "--help" => {
                println!("{}", usage());
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}\n{}", usage()).into()),
        }
    }
    if out.pods == 0 {
        return Err("--pods must be at least 1".into());
    }
    if !out.host_network && out.pods > 250 {
        return Err("--pod-network: at most 250 pods (one /24 of pod addresses)".into());
    }
    if out.grace < PRE_STOP_SECONDS {
        return Err(format!(
            "--grace must be at least {PRE_STOP_SECONDS} (the preStop sleep; the API server \
             rejects a longer sleep action)"
        )
        .into());
    }
    Ok(out)
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--term-probe") {
        return term_probe();
    }
    let args = parse_args(&args)?;
    if !namespaces_permitted() {
        eprintln!(
            "warning: PID namespaces are not permitted (run as root): `sleep` runs as a plain \
             host process, dies on SIGTERM, and no SIGKILL is measured"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let pg = rt.block_on(podgrace_phase(&args))?;
    // The pods' SIGTERM → SIGKILL gap, for the reference.
    let kill_after = pg.stop_timeout_seconds;
    let reference = reference_phase(args.pods, kill_after)?;
    print_table(&args, &pg, &reference, kill_after);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// podgrace

fn pod_yaml(i: usize, grace: u64, host_network: bool) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: bench-{i}}}\nspec:\n  \
         hostNetwork: {host_network}\n  terminationGracePeriodSeconds: {grace}\n  containers:\n  \
         - name: app\n    image: busybox\n    command: [sleep, \"100000\"]\n    lifecycle:\n      \
         preStop:\n        sleep: {{seconds: {PRE_STOP_SECONDS}}}\n"
    )
}

fn pod_plan(yaml: &str) -> Result<PodPlan, BoxError> {
    let m = manifest::load(yaml, "bench.yaml")?;
    let pod = m.pods().next().cloned();
    pod.ok_or_else(|| "the manifest holds no pod".into())
}

/// Lateness samples, milliseconds.
#[derive(Default)]
struct Samples(Vec<f64>);

impl Samples {
    /// `got − want` in milliseconds (negative if early).
    fn push(&mut self, got: Instant, want: Instant) {
        let ms = match got.checked_duration_since(want) {
            Some(d) => d.as_secs_f64() * 1e3,
            None => -(want.duration_since(got).as_secs_f64() * 1e3),
        };
        self.0.push(ms);
    }

    /// (p50, p99, max), nearest rank; `None` without samples.
    fn summary(&self) -> Option<(f64, f64, f64)> {
        let mut v = self.0.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let r = (p * v.len() as f64).ceil() as usize;
            v[r.clamp(1, v.len()) - 1]
        };
        Some((rank(0.50), rank(0.99), v[v.len() - 1]))
    }
}

struct PodgraceResult {
    pods: usize,
    /// Stop signal sent − preStop end.
    term_vs_hook: Samples,
    /// Stop signal sent − (t_delete + 1 s).
    term_vs_schedule: Samples,
    /// preStop start − t_delete (the delete reaching the kill).
    hook_start_vs_delete: Samples,
    /// preStop end − (preStop start + 1 s) (the hook's timer).
    hook_end_vs_timer: Samples,
    /// SIGKILL sent − (stop_called + timeout).
    kill_vs_deadline: Samples,
    /// Exit observed − (stop_called + timeout).
    exit_vs_deadline: Samples,
    /// Exit observed − (t_delete + 1 s + timeout).
    exit_vs_schedule: Samples,
    stop_timeout_seconds: u64,
    /// Pods whose container was never SIGKILLed (it exited before the deadline).
    no_kill: usize,
    /// Time to start all pods (until all Running).
    start_all: Duration,
    rss_max_kb: u64,
    rss_samples: usize,
    hwm_kb: Option<u64>,
}

async fn podgrace_phase(args: &Args) -> Result<PodgraceResult, BoxError> {
    let (runtime, mut output) = ProcessRuntime::new(NetworkConfig::default());
    let runtime = Arc::new(runtime);
    // Nothing is printed by `sleep`, but keep the output stream drained anyway.
    tokio::spawn(async move { while output.recv().await.is_some() {} });

    let plans = (0..args.pods)
        .map(|i| pod_plan(&pod_yaml(i, args.grace, args.host_network)))
        .collect::<Result<Vec<_>, _>>()?;

    // podgrace's resident memory, sampled while it supervises the pods.
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = Arc::clone(&sampling);
        std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                let (mut max_kb, mut n) = (0u64, 0usize);
                while sampling.load(Ordering::Relaxed) {
                    if let Some(kb) = proc_status_kb("VmRSS") {
                        max_kb = max_kb.max(kb);
                        n += 1;
                    }
                    std::thread::sleep(RSS_EVERY);
                }
                (max_kb, n)
            })?
    };

    let started = Instant::now();
    let handles: Vec<PodHandle> = plans
        .into_iter()
        .map(|plan| {
            run_pod(
                runtime.clone(),
                plan,
                PodOptions::default(),
                EventRecorder::new(),
            )
        })
        .collect();
    for (i, h) in handles.iter().enumerate() {
        let mut st = h.status();
        let running = tokio::time::timeout_at(
            (started + START_LIMIT).into(),
            st.wait_for(|s| s.phase == PodWorkerState::Running && s.ready),
        )
        .await;
        match running {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(format!("pod bench-{i} ended before it ran").into()),
            Err(_) => return Err(format!("pod bench-{i} not running after {START_LIMIT:?}").into()),
        }
    }
    let start_all = started.elapsed();
    // Supervise the running pods for a moment before the burst of deletes.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Delete all at once.
    let mut deleted = Vec::with_capacity(handles.len());
    for h in &handles {
        deleted.push(Instant::now());
        if !h.send(PodCommand::Delete(KubectlDeleteFlags::default())) {
            return Err("a pod task ended before its delete".into());
        }
    }
    let mut reports = Vec::with_capacity(handles.len());
    for h in handles {
        let report = tokio::time::timeout(STOP_LIMIT, h.wait())
            .await
            .map_err(|_| format!("pods not terminated after {STOP_LIMIT:?}"))??;
        reports.push(report);
    }
    sampling.store(false, Ordering::Relaxed);
    let (rss_max_kb, rss_samples) = sampler
        .join()
        .map_err(|_| "the RSS sampler thread panicked")?;
    let hwm_kb = proc_status_kb("VmHWM");

    let schedule_term = Duration::from_secs(PRE_STOP_SECONDS);
    let mut out = PodgraceResult {
        pods: reports.len(),
        term_vs_hook: Samples::default(),
        term_vs_schedule: Samples::default(),
        hook_start_vs_delete: Samples::default(),
        hook_end_vs_timer: Samples::default(),
        kill_vs_deadline: Samples::default(),
        exit_vs_deadline: Samples::default(),
        exit_vs_schedule: Samples::default(),
        stop_timeout_seconds: 0,
        no_kill: 0,
        start_all,
        rss_max_kb,
        rss_samples,
        hwm_kb,
    };
    for (report, t_delete) in reports.iter().zip(deleted) {
        let t = report
            .containers
            .first()
            .and_then(|c| c.terminations.first())
            .ok_or_else(|| format!("{}: no termination recorded", report.pod))?;
        let hook = t
            .kill
            .pre_stop
            .as_ref()
            .ok_or_else(|| format!("{}: the preStop hook did not run", report.pod))?;
        let timeout = Duration::from_secs(u64::try_from(t.kill.stop_timeout_seconds)?);
        out.stop_timeout_seconds = out.stop_timeout_seconds.max(timeout.as_secs());
        let deadline = t.kill.stop_called + timeout;
        let events = runtime.stop_events(&t.container_id);
        let find =
            |want: fn(&StopEventKind) -> bool| events.iter().find(|e| want(&e.kind)).map(|e| e.at);
        let term = find(|k| matches!(k, StopEventKind::StopSignalSent { .. }))
            .ok_or_else(|| format!("{}: no stop signal sent", report.pod))?;
        out.term_vs_hook.push(term, hook.ended);
        out.hook_start_vs_delete.push(hook.started, t_delete);
        out.hook_end_vs_timer
            .push(hook.ended, hook.started + schedule_term);
        out.term_vs_schedule.push(term, t_delete + schedule_term);
        match find(|k| matches!(k, StopEventKind::KillSent)) {
            Some(kill) => out.kill_vs_deadline.push(kill, deadline),
            None => out.no_kill += 1,
        }
        if let Some(exit) = find(|k| matches!(k, StopEventKind::Exited { .. })) {
            out.exit_vs_deadline.push(exit, deadline);
            out.exit_vs_schedule
                .push(exit, t_delete + schedule_term + timeout);
        }
    }
    Ok(out)
}

/// A `kB` field of `/proc/self/status` (VmRSS, VmHWM), in kB.
fn proc_status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

// ---------------------------------------------------------------------------------------------
// Reference: coreutils timeout

/// `--term-probe`: print `S` at start and `T` on every SIGTERM, never exit on its own.
fn term_probe() -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "S")?;
        stdout.flush()?;
        while term.recv().await.is_some() {
            writeln!(stdout, "T")?;
            stdout.flush()?;
        }
        Ok::<(), BoxError>(())
    })
}

#[derive(Default)]
struct ReferenceResult {
    procs: usize,
    /// SIGTERM received − (spawn + D): an upper bound.
    term_upper: Samples,
    /// SIGTERM received − (probe running + D): a lower bound.
    term_lower: Samples,
    /// Exit observed − (spawn + D + K): an upper bound.
    exit_upper: Samples,
    /// Exit observed − (probe running + D + K): a lower bound.
    exit_lower: Samples,
    /// Probe running (its `S` read) − spawn: `timeout`'s and the probe's start-up.
    startup: Samples,
    /// Probes that never reported SIGTERM.
    no_term: usize,
}

/// One `timeout` process as the observer sees it.
struct Slot {
    spawned: Instant,
    term_due: Instant,
    pidfd: OwnedFd,
    stdout: ChildStdout,
    started: Option<Instant>,
    term: Option<Instant>,
    /// When it was collected, and the signal that ended it.
    exited: Option<(Instant, Option<i32>)>,
}

/// Gap between two `timeout` spawns, so each starts on a quiet machine.
const SPAWN_GAP: Duration = Duration::from_millis(3);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn reference_phase(n: usize, kill_after: u64) -> Result<ReferenceResult, BoxError> {
    let probe = std::env::current_exe()?;
    let ep = Arc::new(epoll::create(epoll::CreateFlags::CLOEXEC)?);
    let slots: Arc<Mutex<Vec<Slot>>> = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let observer = {
        let (ep, slots) = (Arc::clone(&ep), Arc::clone(&slots));
        std::thread::Builder::new()
            .name("reference-observer".into())
            .spawn(move || observe(&ep, &slots, n))?
    };
    let spread = SPAWN_GAP * u32::try_from(n)? + Duration::from_millis(300);
    let term_due = Instant::now() + spread + Duration::from_secs(PRE_STOP_SECONDS);
    for i in 0..n {
        let spawned = Instant::now();
        let d = term_due
            .checked_duration_since(spawned)
            .filter(|d| *d >= Duration::from_secs(PRE_STOP_SECONDS))
            .ok_or("spawning the reference processes took too long")?;
        let mut child = Command::new("timeout")
            .arg(format!("--kill-after={kill_after}s"))
            .arg(format!("{:.9}s", d.as_secs_f64()))
            .arg(&probe)
            .arg("--term-probe")
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning coreutils timeout: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let pid = Pid::from_raw(i32::try_from(child.id())?).ok_or("pid 0")?;
        // `child` is dropped without waiting: the observer collects it through this pidfd.
        let pidfd = pidfd_open(pid, PidfdFlags::empty())?;
        {
            let mut table = lock(&slots);
            // In the table before its fds are in the epoll set, for the observer to find it.
            table.push(Slot {
                spawned,
                term_due: spawned + d,
                pidfd,
                stdout,
                started: None,
                term: None,
                exited: None,
            });
            let slot = &table[i];
            let key = 2 * u64::try_from(i)?;
            let flags = epoll::EventFlags::IN;
            epoll::add(
                &*ep,
                slot.pidfd.as_fd(),
                epoll::EventData::new_u64(key),
                flags,
            )?;
            epoll::add(
                &*ep,
                slot.stdout.as_fd(),
                epoll::EventData::new_u64(key + 1),
                flags,
            )?;
        }
        std::thread::sleep(SPAWN_GAP);
    }
    observer
        .join()
        .map_err(|_| "the observer thread panicked")??;

    let kill_after = Duration::from_secs(kill_after);
    let mut out = ReferenceResult {
        procs: n,
        ..Default::default()
    };
    for s in lock(&slots).iter() {
        let (exited, signal) = s.exited.ok_or("a timeout process was not collected")?;
        if signal != Some(9) {
            return Err(format!("timeout ended by signal {signal:?}, not by SIGKILL").into());
        }
        out.exit_upper.push(exited, s.term_due + kill_after);
        match s.term {
            Some(t) => out.term_upper.push(t, s.term_due),
            None => out.no_term += 1,
        }
        if let Some(started) = s.started {
            out.startup.push(started, s.spawned);
            // timeout arms its timer before the probe it forks is running.
            let due = started + (s.term_due - s.spawned);
            if let Some(t) = s.term {
                out.term_lower.push(t, due);
            }
            out.exit_lower.push(exited, due + kill_after);
        }
    }
    Ok(out)
}

/// The observer: waits until `n` processes of `slots` have been collected, stamping probe lines
/// and exits as they come.
fn observe(ep: &OwnedFd, slots: &Mutex<Vec<Slot>>, n: usize) -> Result<(), BoxError> {
    let limit = Instant::now() + STOP_LIMIT;
    let tick = rustix::event::Timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    let mut events = Vec::with_capacity(64);
    let mut buf = [0u8; 64];
    let mut collected = 0;
    while collected < n {
        if Instant::now() > limit {
            return Err(format!("reference processes still running after {STOP_LIMIT:?}").into());
        }
        events.clear();
        match epoll::wait(ep, spare_capacity(&mut events), Some(&tick)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        for ev in events.drain(..) {
            let key = ev.data.u64();
            let now = Instant::now();
            let mut table = lock(slots);
            let Some(slot) = table.get_mut(usize::try_from(key / 2)?) else {
                continue;
            };
            if key % 2 == 1 {
                // Level-triggered: a readable pipe has data or is at its end.
                let got = slot.stdout.read(&mut buf)?;
                if got == 0 {
                    epoll::delete(ep, slot.stdout.as_fd())?;
                }
                for b in &buf[..got] {
                    match b {
                        b'S' => slot.started = slot.started.or(Some(now)),
                        b'T' => slot.term = slot.term.or(Some(now)),
                        _ => {}
                    }
                }
            } else if let Some(st) = waitid(
                WaitId::PidFd(slot.pidfd.as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            )? {
                slot.exited = Some((Instant::now(), st.terminating_signal()));
                epoll::delete(ep, slot.pidfd.as_fd())?;
                collected += 1;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Output

fn row(what: &str, s: &Samples) {
    match s.summary() {
        Some((p50, p99, max)) => println!(
            "  {what:<60} {p50:>8.3} {p99:>8.3} {max:>8.3} {:>4}",
            s.0.len()
        ),
        None => println!("  {what:<60} {:>8} {:>8} {:>8} {:>4}", "-", "-", "-", 0),
    }
}

fn header() {
    println!(
        "  {:<60} {:>8} {:>8} {:>8} {:>4}",
        "lateness (ms)", "p50", "p99", "max", "n"
    );
}

fn print_table(args: &Args, pg: &PodgraceResult, r: &ReferenceResult, kill_after: u64) {
    let mb = |kb: u64| kb as f64 / 1024.0;
    let network = if args.host_network {
        "hostNetwork"
    } else {
        "pod network"
    };
    let isolation = if namespaces_permitted() {
        "PID namespaces"
    } else {
        "host processes (no namespaces)"
    };
    println!(
        "podgrace: {} pods, terminationGracePeriodSeconds {}, preStop sleep {PRE_STOP_SECONDS} s, \
         StopContainer timeout {} s, {network}, {isolation}",
        pg.pods, args.grace, pg.stop_timeout_seconds,
    );
    header();
    row(
        "stop signal sent - preStop end (computed instant)",
        &pg.term_vs_hook,
    );
    row("stop signal sent - (delete + 1 s)", &pg.term_vs_schedule);
    row(
        "  of which: preStop start - delete",
        &pg.hook_start_vs_delete,
    );
    row(
        "  of which: preStop end - (preStop start + 1 s)",
        &pg.hook_end_vs_timer,
    );
    row(
        "SIGKILL sent - (StopContainer + timeout) (deadline)",
        &pg.kill_vs_deadline,
    );
    row("exit observed - deadline [death]", &pg.exit_vs_deadline);
    row(
        "exit observed - (delete + 1 s + timeout) [death]",
        &pg.exit_vs_schedule,
    );
    println!(
        "  all {} pods Running after {:.0} ms; {} exited without SIGKILL",
        pg.pods,
        pg.start_all.as_secs_f64() * 1e3,
        pg.no_kill
    );
    println!(
        "  podgrace resident memory: max VmRSS {:.1} MB ({} samples, every {} ms), VmHWM {}",
        mb(pg.rss_max_kb),
        pg.rss_samples,
        RSS_EVERY.as_millis(),
        pg.hwm_kb
            .map_or("-".to_string(), |kb| format!("{:.1} MB", mb(kb)))
    );
    println!(
        "coreutils timeout: {} processes, timeout --kill-after={kill_after}s D PROBE, every SIGTERM \
         due at the same instant",
        r.procs
    );
    header();
    row(
        "SIGTERM received - (spawn + D) (upper bound)",
        &r.term_upper,
    );
    row(
        "SIGTERM received - (probe running + D) (lower bound)",
        &r.term_lower,
    );
    row(
        "exit observed - (spawn + D + K) [death, upper bound]",
        &r.exit_upper,
    );
    row(
        "exit observed - (probe running + D + K) [death, lower bound]",
        &r.exit_lower,
    );
    row("(start-up: probe running - spawn)", &r.startup);
    if r.no_term > 0 {
        println!("  {} probes never reported SIGTERM", r.no_term);
    }
}
