//! Stop-signal, SIGKILL and forwarding lateness seen from outside, for `bench/stop.sh`: the
//! workload stamps its signals and its death is seen by the harness, so podgrace and the
//! anchors (tini, dumb-init, coreutils `timeout -k`) are measured the same way.
//!
//! ```text
//! bench_lateness --runner node|run|tini|dumb-init|timeout [--pods N] [--grace SECONDS]
//!                [--pre-stop SECONDS] [--probe PATH] [--podgrace PATH] [--settle MS]
//! ```
//!
//! # The workload
//! `lateness_probe SOCKET ID` (the example next to this one) connects to the harness's unix
//! socket, says when it runs, and stamps every SIGTERM with `CLOCK_MONOTONIC` the moment
//! `sigwaitinfo` returns; it never exits by itself. Its death is the moment the harness reads
//! end-of-file on its connection (one observer thread in `epoll_wait` on every connection; one
//! clock reading per wake-up, so a burst of deaths is stamped when the observer saw it, not
//! when it got round to each one). Every instant below is `CLOCK_MONOTONIC`, the probe's and the
//! harness's alike.
//!
//! # Runners
//! * `node`: `--pods` pods in this one process on podgrace's node library (one
//!   [`ProcessRuntime`], a tokio runtime of 2 workers, as `serve` and `drill` run them), each a
//!   single container whose PID 1 is the probe, `hostNetwork: true`,
//!   `terminationGracePeriodSeconds: --grace`, and with `--pre-stop P` a preStop
//!   `sleep: {seconds: P}`. Once every pod is Running and every probe has said so, all are
//!   deleted at one instant (`kubectl delete` with default flags, one command per pod, each
//!   stamped as it is sent).
//! * `run`: `--pods` separate `podgrace run POD.yaml` processes (`--podgrace`), the same pod each;
//!   SIGTERM to every `podgrace run` at one instant is its delete.
//! * `tini`, `dumb-init`, `timeout`: the probe under `tini -s --`, `dumb-init`, or
//!   `timeout -k GRACE 1d`, `--pods` of each; SIGTERM to every init at one instant. tini and
//!   dumb-init only forward it (the harness SIGKILLs the probes afterwards, unmeasured);
//!   `timeout` forwards it and SIGKILLs the probe `--grace` seconds later, every deadline at the
//!   same instant.
//!
//! The inits run as plain host processes, podgrace's containers as PID 1 of their own PID
//! namespace (run as root).
//!
//! # What is reported (milliseconds; p50, p99, max, nearest rank)
//! * **stop signal**: the probe's SIGTERM stamp − (the delete + the preStop's `P` s); for the
//!   inits and `podgrace run`, **forwarding**: the stamp − the SIGTERM the harness sent;
//! * **SIGKILL** (death): the death − the schedule's deadline, delete + `P` + max(grace − `P`, 2)
//!   (the kubelet gives StopContainer at least 2 s), for `node`, `run` and `timeout`;
//! * for `node`, podgrace's own records as a second view: the stop signal sent − the preStop's
//!   end as the kubelet saw it (or − the delete without a preStop), SIGKILL sent − the kubelet's
//!   deadline (StopContainer + its timeout), the exit its reaper saw − that deadline; and the
//!   process's resident memory (VmRSS sampled every 50 ms, VmHWM).
#![allow(unsafe_code)] // clock_gettime (libc), the probe's clock

use std::collections::HashMap;
use std::error::Error;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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
use rustix::process::{kill_process, Pid, Signal};

type BoxError = Box<dyn Error + Send + Sync>;

/// The kubelet's floor for StopContainer's timeout (`minimumGracePeriodInSeconds`).
const MIN_STOP_SECONDS: u64 = 2;
/// How often the node runner samples its resident memory.
const RSS_EVERY: Duration = Duration::from_millis(50);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Runner {
    Node,
    Run,
    Tini,
    DumbInit,
    Timeout,
}

struct Args {
    runner: Runner,
    pods: usize,
    grace: u64,
    pre_stop: u64,
    probe: PathBuf,
    podgrace: PathBuf,
    /// How long the probes run before the burst of deletes (`--settle MS`, default 500; a
    /// profiler can be attached meanwhile).
    settle: Duration,
}

fn usage() -> &'static str {
    "usage: bench_lateness --runner node|run|tini|dumb-init|timeout [--pods N] [--grace SECONDS] \
     [--pre-stop SECONDS] [--probe PATH] [--podgrace PATH] [--settle MS]"
}

fn parse_args() -> Result<Args, BoxError> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let mut out = Args {
        runner: Runner::Node,
        pods: 100,
        grace: 2,
        pre_stop: 0,
        probe: dir.join("lateness_probe"),
        podgrace: dir.join("../podgrace"),
        settle: Duration::from_millis(500),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{a} needs a value\n{}", usage()))
        };
        match a.as_str() {
            "--runner" => {
                out.runner = match value()?.as_str() {
                    "node" => Runner::Node,
                    "run" => Runner::Run,
                    "tini" => Runner::Tini,
                    "dumb-init" => Runner::DumbInit,
                    "timeout" => Runner::Timeout,
                    other => return Err(format!("unknown runner {other:?}\n{}", usage()).into()),
                }
            }
            "--pods" => out.pods = value()?.parse()?,
            "--grace" => out.grace = value()?.parse()?,
            "--pre-stop" => out.pre_stop = value()?.parse()?,
            "--probe" => out.probe = value()?.into(),
            "--podgrace" => out.podgrace = value()?.into(),
            "--settle" => out.settle = Duration::from_millis(value()?.parse()?),
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
    if out.pre_stop > 0 && out.runner != Runner::Node {
        return Err("--pre-stop is for the node runner".into());
    }
    if out.pre_stop > out.grace {
        return Err("--pre-stop longer than --grace (the API server rejects the sleep)".into());
    }
    if !out.probe.exists() {
        return Err(format!("the probe {} does not exist", out.probe.display()).into());
    }
    Ok(out)
}

/// `CLOCK_MONOTONIC`, nanoseconds (the probe's clock).
fn now_ns() -> i128 {
    // SAFETY: clock_gettime writes the timespec it is given.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
}

fn secs_ns(s: u64) -> i128 {
    i128::from(s) * 1_000_000_000
}

// ---------------------------------------------------------------------------------------------
// The observer: every probe's stamps and death.

/// What the harness knows of one probe, `CLOCK_MONOTONIC` ns.
#[derive(Default, Clone, Copy)]
struct Probe {
    pid: Option<i32>,
    started: Option<i128>,
    term: Option<i128>,
    death: Option<i128>,
}

#[derive(Default)]
struct Table {
    probes: HashMap<usize, Probe>,
    started: usize,
    termed: usize,
    dead: usize,
    error: Option<String>,
}

struct Observer {
    path: PathBuf,
    table: Arc<(Mutex<Table>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Observer {
    fn start() -> Result<Observer, BoxError> {
        let path =
            std::env::temp_dir().join(format!("podgrace-lateness-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        listener.set_nonblocking(true)?;
        let table: Arc<(Mutex<Table>, Condvar)> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (table, stop) = (Arc::clone(&table), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("observer".into())
                .spawn(move || {
                    if let Err(e) = observe(&listener, &table, &stop) {
                        lock(&table.0).error = Some(e.to_string());
                        table.1.notify_all();
                    }
                })?
        };
        Ok(Observer {
            path,
            table,
            stop,
            thread: Some(thread),
        })
    }

    /// Waits until `done` holds of the table, or `limit` passes (an error naming `what`).
    fn wait(
        &self,
        what: &str,
        limit: Duration,
        done: impl Fn(&Table) -> bool,
    ) -> Result<(), BoxError> {
        let end = Instant::now() + limit;
        let (m, cv) = &*self.table;
        let mut t = lock(m);
        loop {
            if let Some(e) = &t.error {
                return Err(format!("observer: {e}").into());
            }
            if done(&t) {
                return Ok(());
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "{what} not within {limit:?} (started {}, SIGTERM {}, dead {})",
                    t.started, t.termed, t.dead
                )
                .into());
            }
            t = cv
                .wait_timeout(t, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn probes(&self) -> HashMap<usize, Probe> {
        lock(&self.table.0).probes.clone()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

struct Conn {
    stream: UnixStream,
    buf: Vec<u8>,
    id: Option<usize>,
}

const LISTENER: u64 = u64::MAX;

fn observe(
    listener: &UnixListener,
    table: &(Mutex<Table>, Condvar),
    stop: &AtomicBool,
) -> Result<(), BoxError> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    epoll::add(
        &ep,
        listener.as_fd(),
        epoll::EventData::new_u64(LISTENER),
        epoll::EventFlags::IN,
    )?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = Vec::with_capacity(1024);
    let mut chunk = [0u8; 256];
    let tick = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    while !stop.load(Ordering::SeqCst) {
        events.clear();
        match epoll::wait(&ep, spare_capacity(&mut events), Some(&tick)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        // One reading for the whole batch: what the observer saw at this wake-up.
        let seen = now_ns();
        let mut changed = false;
        for ev in events.drain(..) {
            let key = ev.data.u64();
            if key == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            stream.set_nonblocking(true)?;
                            let k = conns.len() as u64;
                            epoll::add(
                                &ep,
                                stream.as_fd(),
                                epoll::EventData::new_u64(k),
                                epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
                            )?;
                            conns.push(Some(Conn {
                                stream,
                                buf: Vec::new(),
                                id: None,
                            }));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e.into()),
                    }
                }
                continue;
            }
            let Some(slot) = conns.get_mut(key as usize) else {
                continue;
            };
            let Some(conn) = slot.as_mut() else { continue };
            let mut eof = false;
            loop {
                match conn.stream.read(&mut chunk) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => conn.buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                        eof = true;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            let mut t = lock(&table.0);
            while let Some(nl) = conn.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = conn.buf.drain(..=nl).collect();
                let text = String::from_utf8_lossy(&line);
                let mut f = text.split_whitespace();
                let (Some(kind), Some(id), Some(a)) = (f.next(), f.next(), f.next()) else {
                    continue;
                };
                let id: usize = id.parse()?;
                conn.id = Some(id);
                let p = t.probes.entry(id).or_default();
                match kind {
                    "S" => {
                        p.pid = Some(a.parse()?);
                        let at = f.next().ok_or("S without a time")?.parse()?;
                        if p.started.replace(at).is_none() {
                            t.started += 1;
                        }
                    }
                    "T" if p.term.is_none() => {
                        p.term = Some(a.parse()?);
                        t.termed += 1;
                    }
                    _ => {}
                }
                changed = true;
            }
            if eof {
                if let Some(id) = conn.id {
                    let p = t.probes.entry(id).or_default();
                    if p.death.is_none() {
                        p.death = Some(seen);
                        t.dead += 1;
                    }
                }
                epoll::delete(&ep, conn.stream.as_fd())?;
                *slot = None;
                changed = true;
            }
        }
        if changed {
            table.1.notify_all();
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Samples

/// Lateness samples, milliseconds.
#[derive(Default)]
struct Samples(Vec<f64>);

impl Samples {
    fn push_ns(&mut self, got: i128, want: i128) {
        self.0.push((got - want) as f64 / 1e6);
    }

    fn push(&mut self, got: Instant, want: Instant) {
        let ms = match got.checked_duration_since(want) {
            Some(d) => d.as_secs_f64() * 1e3,
            None => -(want.duration_since(got).as_secs_f64() * 1e3),
        };
        self.0.push(ms);
    }

    fn row(&self, what: &str) {
        let mut v = self.0.clone();
        if v.is_empty() {
            println!("  {what:<58} {:>9} {:>9} {:>9} {:>5}", "-", "-", "-", 0);
            return;
        }
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let r = (p * v.len() as f64).ceil() as usize;
            v[r.clamp(1, v.len()) - 1]
        };
        println!(
            "  {what:<58} {:>9.3} {:>9.3} {:>9.3} {:>5}",
            rank(0.50),
            rank(0.99),
            v[v.len() - 1],
            v.len()
        );
    }
}

fn header(title: &str) {
    println!("{title}");
    println!(
        "  {:<58} {:>9} {:>9} {:>9} {:>5}",
        "lateness (ms)", "p50", "p99", "max", "n"
    );
}

/// The schedule's SIGKILL deadline after the delete, ns: the preStop, then StopContainer's
/// timeout of the grace left (whole seconds), at least 2 s.
fn kill_offset_ns(grace: u64, pre_stop: u64) -> i128 {
    secs_ns(pre_stop + (grace - pre_stop).max(MIN_STOP_SECONDS))
}

// ---------------------------------------------------------------------------------------------
// The node runner

fn pod_yaml(i: usize, a: &Args, socket: &Path) -> String {
    let pre_stop = if a.pre_stop > 0 {
        format!(
            "    lifecycle:\n      preStop:\n        sleep: {{seconds: {}}}\n",
            a.pre_stop
        )
    } else {
        String::new()
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: lateness-{i}}}\nspec:\n  hostNetwork: true\n  \
         terminationGracePeriodSeconds: {}\n  containers:\n  - name: probe\n    image: probe\n    \
         command: [{:?}, {:?}, \"{i}\"]\n{pre_stop}",
        a.grace,
        a.probe.display().to_string(),
        socket.display().to_string(),
    )
}

fn pod_plan(yaml: &str) -> Result<PodPlan, BoxError> {
    let m = manifest::load(yaml, "lateness.yaml")?;
    let pod = m.pods().next().cloned();
    pod.ok_or_else(|| "the manifest holds no pod".into())
}

fn start_limit(pods: usize) -> Duration {
    Duration::from_secs(120) + Duration::from_millis(100) * u32::try_from(pods).unwrap_or(u32::MAX)
}

fn stop_limit(a: &Args) -> Duration {
    Duration::from_secs(a.grace + 60)
        + Duration::from_millis(50) * u32::try_from(a.pods).unwrap_or(u32::MAX)
}

fn node(a: &Args, obs: &Observer) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(node_async(a, obs))
}

fn proc_status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

async fn node_async(a: &Args, obs: &Observer) -> Result<(), BoxError> {
    let (runtime, mut output) = ProcessRuntime::new(NetworkConfig::default());
    let runtime = Arc::new(runtime);
    tokio::spawn(async move { while output.recv().await.is_some() {} });
    let plans = (0..a.pods)
        .map(|i| pod_plan(&pod_yaml(i, a, &obs.path)))
        .collect::<Result<Vec<_>, _>>()?;
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = Arc::clone(&sampling);
        std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                let mut max_kb = 0u64;
                while sampling.load(Ordering::Relaxed) {
                    max_kb = max_kb.max(proc_status_kb("VmRSS").unwrap_or(0));
                    std::thread::sleep(RSS_EVERY);
                }
                max_kb
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
        let limit = (started + start_limit(a.pods)).into();
        let running =
            tokio::time::timeout_at(limit, st.wait_for(|s| s.phase == PodWorkerState::Running))
                .await
                .map(|r| r.map(drop));
        match running {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(format!("pod lateness-{i} ended before it ran").into()),
            Err(_) => return Err(format!("pod lateness-{i} not running in time").into()),
        }
    }
    let n = a.pods;
    tokio::task::block_in_place(|| obs.wait("probes running", start_limit(n), |t| t.started >= n))?;
    let start_all = started.elapsed();
    eprintln!("all running; deleting in {} ms", a.settle.as_millis());
    tokio::time::sleep(a.settle).await;

    let mut deleted = Vec::with_capacity(n);
    for h in &handles {
        deleted.push((now_ns(), Instant::now()));
        if !h.send(PodCommand::Delete(KubectlDeleteFlags::default())) {
            return Err("a pod task ended before its delete".into());
        }
    }
    let limit = stop_limit(a);
    tokio::task::block_in_place(|| obs.wait("deaths", limit, |t| t.dead >= n))?;
    let mut reports = Vec::with_capacity(n);
    for h in handles {
        reports.push(
            tokio::time::timeout(limit, h.wait())
                .await
                .map_err(|_| "pods not terminated")??,
        );
    }
    sampling.store(false, Ordering::Relaxed);
    let rss_max_kb = sampler.join().map_err(|_| "the RSS sampler panicked")?;
    let hwm_kb = proc_status_kb("VmHWM").unwrap_or(0);

    let probes = obs.probes();
    let (mut term, mut death) = (Samples::default(), Samples::default());
    let (mut own_term, mut own_kill, mut own_exit) =
        (Samples::default(), Samples::default(), Samples::default());
    let mut no_kill = 0;
    let kill_at = kill_offset_ns(a.grace, a.pre_stop);
    for (i, (report, (d_ns, d_at))) in reports.iter().zip(&deleted).enumerate() {
        let p = probes.get(&i).copied().unwrap_or_default();
        if let Some(t) = p.term {
            term.push_ns(t, d_ns + secs_ns(a.pre_stop));
        }
        if let Some(x) = p.death {
            death.push_ns(x, d_ns + kill_at);
        }
        let Some(t) = report
            .containers
            .first()
            .and_then(|c| c.terminations.first())
        else {
            continue;
        };
        let events = runtime.stop_events(&t.container_id);
        let find =
            |want: fn(&StopEventKind) -> bool| events.iter().find(|e| want(&e.kind)).map(|e| e.at);
        let deadline =
            t.kill.stop_called + Duration::from_secs(u64::try_from(t.kill.stop_timeout_seconds)?);
        if let Some(sent) = find(|k| matches!(k, StopEventKind::StopSignalSent { .. })) {
            match &t.kill.pre_stop {
                Some(h) => own_term.push(sent, h.ended),
                None => own_term.push(sent, *d_at),
            }
        }
        match find(|k| matches!(k, StopEventKind::KillSent)) {
            Some(k) => own_kill.push(k, deadline),
            None => no_kill += 1,
        }
        if let Some(x) = find(|k| matches!(k, StopEventKind::Exited { .. })) {
            own_exit.push(x, deadline);
        }
    }
    let after = if a.pre_stop > 0 {
        format!("(delete + preStop {} s)", a.pre_stop)
    } else {
        "delete".to_string()
    };
    header(&format!(
        "node: {n} pods in one process, grace {} s, preStop {} s, {}; all Running after {:.0} ms",
        a.grace,
        a.pre_stop,
        if namespaces_permitted() {
            "PID 1 of a PID namespace"
        } else {
            "host processes"
        },
        start_all.as_secs_f64() * 1e3
    ));
    term.row(&format!("stop signal received - {after}"));
    death.row(&format!(
        "death - deadline (delete + {} s)",
        kill_at / 1_000_000_000
    ));
    println!("  podgrace's own records:");
    own_term.row(if a.pre_stop > 0 {
        "  stop signal sent - preStop end (as the kubelet saw it)"
    } else {
        "  stop signal sent - delete"
    });
    own_kill.row("  SIGKILL sent - deadline (StopContainer + timeout)");
    own_exit.row("  exit reaped - deadline");
    println!(
        "  resident memory: max VmRSS {:.1} MB, VmHWM {:.1} MB; {no_kill} not SIGKILLed",
        rss_max_kb as f64 / 1024.0,
        hwm_kb as f64 / 1024.0
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The process runners: `podgrace run`, tini, dumb-init, timeout

/// Children and probes that must not outlive the harness.
struct Children {
    children: Vec<Child>,
    probes: Vec<i32>,
    dir: Option<PathBuf>,
}

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
        }
        for pid in &self.probes {
            if let Some(p) = Pid::from_raw(*pid) {
                let _ = kill_process(p, Signal::KILL);
            }
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn processes(a: &Args, obs: &Observer) -> Result<(), BoxError> {
    let n = a.pods;
    let socket = obs.path.display().to_string();
    let probe = a.probe.display().to_string();
    let mut kids = Children {
        children: Vec::with_capacity(n),
        probes: Vec::new(),
        dir: None,
    };
    if a.runner == Runner::Run {
        let dir = std::env::temp_dir().join(format!("podgrace-lateness-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        kids.dir = Some(dir);
    }
    let started = Instant::now();
    for i in 0..n {
        let id = i.to_string();
        let mut cmd = match a.runner {
            Runner::Run => {
                let dir = kids.dir.as_ref().ok_or("no directory")?;
                let file = dir.join(format!("pod-{i}.yaml"));
                std::fs::write(&file, pod_yaml(i, a, &obs.path))?;
                let mut c = Command::new(&a.podgrace);
                c.arg("run").arg(&file);
                c
            }
            Runner::Tini => {
                let mut c = Command::new("tini");
                c.args(["-s", "--", &probe, &socket, &id]);
                c
            }
            Runner::DumbInit => {
                let mut c = Command::new("dumb-init");
                c.args([&probe, &socket, &id]);
                c
            }
            Runner::Timeout => {
                let mut c = Command::new("timeout");
                c.args([&format!("-k{}s", a.grace), "1d", &probe, &socket, &id]);
                c
            }
            Runner::Node => unreachable!("the node runner has its own path"),
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning {:?}: {e}", cmd.get_program()))?;
        kids.children.push(child);
    }
    obs.wait("probes running", start_limit(n), |t| t.started >= n)?;
    if matches!(a.runner, Runner::Tini | Runner::DumbInit) {
        // Host processes (nothing SIGKILLs them): the harness does, at the end.
        kids.probes = obs
            .probes()
            .values()
            .filter_map(|p| p.pid)
            .filter(|p| *p > 1)
            .collect();
    }
    let start_all = started.elapsed();
    eprintln!("all running; SIGTERM in {} ms", a.settle.as_millis());
    std::thread::sleep(a.settle);
    let mut sent = Vec::with_capacity(n);
    for c in &kids.children {
        let pid = Pid::from_raw(i32::try_from(c.id())?).ok_or("pid 0")?;
        sent.push(now_ns());
        kill_process(pid, Signal::TERM)?;
    }
    let kills = matches!(a.runner, Runner::Run | Runner::Timeout);
    let limit = stop_limit(a);
    if kills {
        obs.wait("deaths", limit, |t| t.dead >= n)?;
    } else {
        obs.wait("SIGTERM forwarded", limit, |t| t.termed >= n)?;
    }
    let probes = obs.probes();
    let (mut fwd, mut death) = (Samples::default(), Samples::default());
    let kill_at = kill_offset_ns(a.grace, 0);
    for (i, d) in sent.iter().enumerate() {
        let p = probes.get(&i).copied().unwrap_or_default();
        if let Some(t) = p.term {
            fwd.push_ns(t, *d);
        }
        if let (true, Some(x)) = (kills, p.death) {
            death.push_ns(x, d + kill_at);
        }
    }
    let what = match a.runner {
        Runner::Run => "podgrace run",
        Runner::Tini => "tini -s",
        Runner::DumbInit => "dumb-init",
        Runner::Timeout => "timeout -k",
        Runner::Node => "",
    };
    header(&format!(
        "{what}: {n} processes, each with the probe; grace {} s; all probes running after {:.0} ms",
        a.grace,
        start_all.as_secs_f64() * 1e3
    ));
    fwd.row("forwarding: SIGTERM received - SIGTERM sent");
    if kills {
        death.row(&format!(
            "death - deadline (SIGTERM sent + {} s)",
            kill_at / 1_000_000_000
        ));
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let a = parse_args()?;
    let obs = Observer::start()?;
    match a.runner {
        Runner::Node => node(&a, &obs),
        _ => processes(&a, &obs),
    }
}
