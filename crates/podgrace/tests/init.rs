//! `podgrace init` as PID 1 of a container's PID namespace under `podgrace run`: the kubelet's
//! stop signal reaches init, which forwards (or maps, or holds) it; orphans re-parent to it and
//! are reaped; the container's exit code is the command's. Plus init outside a PID namespace
//! (a child subreaper) and its usage errors.
//!
//! The tests under `podgrace run` need root (PID and network namespaces); elsewhere they print
//! why they skip.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const PODGRACE: &str = env!("CARGO_BIN_EXE_podgrace");

fn run(tag: &str, yaml: &str, extra: &[&str]) -> (Value, String) {
    let tmpdir = tempdir(tag);
    let dir = tmpdir.path();
    let yaml = yaml
        .replace("{podgrace}", PODGRACE)
        .replace("{dir}", &dir.display().to_string());
    let file = tmp_file(tag, "pod.yaml", &yaml);
    let mut args = vec!["run", file.to_str().unwrap(), "-o", "json"];
    args.extend_from_slice(extra);
    let out = podgrace(&args);
    assert!(
        out.status.success(),
        "podgrace run failed: {}",
        stderr(&out)
    );
    (json(&out), stderr(&out))
}

fn termination<'a>(r: &'a Value, container: &str) -> &'a Value {
    r["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == container)
        .map(|c| &c["terminations"][0])
        .unwrap_or_else(|| panic!("no container {container} in {r}"))
}

fn secs(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn pod(name: &str, tgps: u32, command: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: {tgps}\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: app\n    command: {command}\n")
}

#[test]
fn a_command_without_a_sigterm_handler_stops_on_sigterm_behind_init() {
    if !privileged("init sigterm") {
        return;
    }
    // `sleep` as PID 1 would ignore SIGTERM and be SIGKILLed at 10 s (case R01); behind init it
    // is not PID 1, SIGTERM's default action applies, and init reports 128 + 15.
    let (r, err) = run(
        "init-term",
        &pod(
            "initterm",
            10,
            "[\"{podgrace}\", init, --, sleep, \"1000\"]",
        ),
        &["--delete-after", "2s"],
    );
    let t = termination(&r, "app");
    assert_eq!(t["stopSignal"], "SIGTERM", "{t}");
    assert_eq!(t["killAfterSeconds"], Value::Null, "{t}\n{err}");
    assert!(secs(&t["exitAfterSeconds"]) < 0.2, "{t}");
    assert_eq!(t["exitCode"], 143, "{t}");
}

/// The delete comes 2 s after the container started: init (a large debug binary, eleven of
/// these tests starting at once on two cores) must have set up its signal handling and the
/// shell its trap, or the SIGTERM to a PID 1 without a handler is lost, as the kernel does.
#[test]
fn map_turns_the_runtimes_sigterm_into_the_signal_the_app_wants() {
    if !privileged("init map") {
        return;
    }
    let (r, _) = run(
        "init-map",
        &pod(
            "initmap",
            10,
            "[\"{podgrace}\", init, --map, SIGTERM=SIGQUIT, --, sh, -c, \"trap 'exit 30' QUIT; trap 'exit 40' TERM; while :; do sleep 0.02; done\"]",
        ),
        &["--delete-after", "2s"],
    );
    let t = termination(&r, "app");
    assert_eq!(t["exitCode"], 30, "{t}");
    assert!(secs(&t["exitAfterSeconds"]) < 0.3, "{t}");
}

/// nginx behind `init --map SIGTERM=SIGQUIT`: the runtime sends SIGTERM (nginx's fast shutdown,
/// which cuts downloads, see `run.rs`); init turns it into SIGQUIT, nginx's graceful quit, and
/// a download in flight completes.
#[test]
fn nginx_behind_init_with_map_finishes_a_download_that_sigterm_would_cut() {
    if !privileged("init nginx") || !std::path::Path::new("/usr/sbin/nginx").exists() {
        eprintln!("SKIP init nginx: needs root and /usr/sbin/nginx (Debian package nginx-light)");
        return;
    }
    let tmpdir = tempdir("init-nginx");
    let dir = tmpdir.path();
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let size = 1_000_000;
    std::fs::write(www.join("big"), vec![b'x'; size]).unwrap();
    let port = 19000 + (std::process::id() % 1000) as u16;
    let d = dir.display();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!("daemon off;\nuser root;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\nhttp {{\n  access_log off;\n  client_body_temp_path {d}/t1;\n  proxy_temp_path {d}/t2;\n  fastcgi_temp_path {d}/t3;\n  uwsgi_temp_path {d}/t4;\n  scgi_temp_path {d}/t5;\n  server {{\n    listen 127.0.0.1:{port};\n    root {d}/www;\n    limit_rate 200k;\n  }}\n}}\n"),
    )
    .unwrap();
    // A non-nginx image name: the stop signal stays SIGTERM, as a runtime sends by default.
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: initnginx}}\nspec:\n  hostNetwork: true\n  containers:\n  - name: web\n    image: example/web\n    command: [\"{PODGRACE}\", init, --map, SIGTERM=SIGQUIT, --, /usr/sbin/nginx, -c, \"{}\"]\n",
        conf.display()
    );
    let file = tmp_file("init-nginx", "pod.yaml", &yaml);
    let child = Command::new(PODGRACE)
        .args([
            "run",
            file.to_str().unwrap(),
            "--delete-after",
            "2s",
            "-o",
            "json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut conn = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(c) => break c,
            Err(_) if start.elapsed() < Duration::from_secs(2) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("nginx did not come up: {e}"),
        }
    };
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = Vec::new();
    let _ = conn.read_to_end(&mut body);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(termination(&r, "web")["stopSignal"], "SIGTERM", "{r}");
    let header_end = body
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(body.len(), |p| p + 4);
    assert_eq!(
        body.len() - header_end,
        size,
        "the graceful quit lets the download complete"
    );
}

/// The host pid of the `podgrace init` whose environment holds `marker`.
fn init_pid(marker: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_string_lossy().parse().ok()?;
        let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let has_marker = env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes());
        let is_init = cmd.split(|b| *b == 0).nth(1) == Some(b"init".as_slice());
        (has_marker && is_init).then_some(pid)
    })
}

/// The children of host pid `parent`, with their state letter (`S`, `Z` ...).
fn children(parent: i32) -> Vec<(i32, char)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces, so split after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if f.next().and_then(|p| p.parse::<i32>().ok()) == Some(parent) {
            out.push((pid, state));
        }
    }
    out
}

#[test]
fn orphans_re_parent_to_init_as_pid_1_and_are_reaped() {
    if !privileged("init reap") {
        return;
    }
    let marker = format!("PODGRACE_INIT_REAP={}", std::process::id());
    let (k, v) = marker.split_once('=').unwrap();
    // Five orphans (their subshell exits at once), each living 0.6 s.
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: initreap}}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: app\n    command: [\"{{podgrace}}\", init, --, sh, -c, \"for i in 1 2 3 4 5; do (sleep 0.6 &); done; touch {{dir}}/spawned; exec sleep 1000\"]\n    env:\n    - {{name: {k}, value: \"{v}\"}}\n"
    );
    let p = RunningPod::start("init-reap", &yaml, &[]);
    p.wait_file_exists("spawned");
    let pid = init_pid(&marker).expect("init's host pid");
    let kids = children(pid);
    // The command and the five orphans, all alive: they re-parented to init (PID 1).
    assert_eq!(kids.len(), 6, "{kids:?}");
    assert!(kids.iter().all(|(_, s)| *s != 'Z'), "{kids:?}");
    std::thread::sleep(Duration::from_millis(1_000));
    let kids = children(pid);
    assert_eq!(
        kids.len(),
        1,
        "the orphans exited and were reaped: {kids:?}"
    );
    assert_ne!(kids[0].1, 'Z', "{kids:?}");
    p.delete();
    let (status, r, err) = p.finish();
    assert!(status.success(), "{err}");
    assert_eq!(termination(&r, "app")["exitCode"], 143, "{r}");
}

#[test]
fn init_exits_with_the_commands_code_or_128_plus_its_signal() {
    if !privileged("init exit") {
        return;
    }
    let (r, _) = run(
        "init-exit3",
        &pod(
            "initexit",
            5,
            "[\"{podgrace}\", init, --, sh, -c, \"exit 3\"]",
        ),
        &["--delete-after", "5s"],
    );
    assert_eq!(r["containers"][0]["exits"][0]["exitCode"], 3, "{r}");
    let (r, _) = run(
        "init-usr1",
        &pod(
            "initusr1",
            5,
            "[\"{podgrace}\", init, --, sh, -c, \"kill -USR1 $$\"]",
        ),
        &["--delete-after", "5s"],
    );
    assert_eq!(r["containers"][0]["exits"][0]["exitCode"], 138, "{r}");
}

#[test]
fn drain_delay_holds_sigterm_and_fails_readiness_through_the_ready_file() {
    if !privileged("init drain") {
        return;
    }
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: initdrain}\nspec:\n  terminationGracePeriodSeconds: 10\n  containers:\n  - name: app\n    image: app\n    command: [\"{podgrace}\", init, --drain-delay, 1500ms, --ready-file, \"{dir}/ready\", --, sh, -c, \"trap 'exit 0' TERM; while :; do sleep 0.02; done\"]\n    readinessProbe:\n      exec: {command: [cat, \"{dir}/ready\"]}\n      periodSeconds: 1\n";
    let p = RunningPod::start("init-drain", yaml, &[]);
    p.wait_file_exists("ready");
    // Ready before the delete (the probe passes on the file).
    let ready = p.dir.join("ready");
    std::thread::sleep(Duration::from_millis(1_500));
    let deleted = p.delete();
    let deadline = Instant::now() + Duration::from_secs(1);
    while ready.exists() {
        assert!(
            Instant::now() < deadline,
            "the ready file is still there 1 s after the delete"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let removed = deleted.elapsed().as_secs_f64();
    let (status, r, err) = p.finish();
    assert!(status.success(), "{err}");
    assert!(
        removed < 0.2,
        "ready file removed {removed:.3} s after the delete"
    );
    let t = termination(&r, "app");
    // SIGTERM reached init at 0 and the command 1.5 s later; its trap exits at once.
    assert!(secs(&t["stopSignalAfterSeconds"]) < 0.05, "{t}");
    let exit = secs(&t["exitAfterSeconds"]);
    assert!(
        (1.5..=1.7).contains(&exit),
        "exited {exit:.3} s after the delete\n{err}"
    );
    assert_eq!(t["exitCode"], 0, "{t}");
    assert!(err.contains("[pod/initdrain/app] podgrace init: SIGTERM received: holding it for 1.5 s (--drain-delay), then sending SIGTERM to the command"), "{err}");
    // The kubelet's readiness probe saw the file gone while the container still ran.
    let unhealthy: Vec<&Value> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["reason"] == "Unhealthy"
                && e["message"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("Readiness probe failed")
        })
        .collect();
    assert!(!unhealthy.is_empty(), "{r}");
}

#[test]
fn a_second_sigterm_during_the_drain_delay_goes_through_at_once() {
    if !privileged("init second sigterm") {
        return;
    }
    let marker = format!("PODGRACE_INIT_SECOND={}", std::process::id());
    let (k, v) = marker.split_once('=').unwrap();
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: initsecond}}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    image: app\n    command: [\"{{podgrace}}\", init, --drain-delay, 20s, --, sh, -c, \"trap 'exit 0' TERM; touch {{dir}}/started; while :; do sleep 0.02; done\"]\n    env:\n    - {{name: {k}, value: \"{v}\"}}\n"
    );
    let p = RunningPod::start("init-second", &yaml, &[]);
    p.wait_file_exists("started");
    let pid = init_pid(&marker).expect("init's host pid");
    p.delete();
    std::thread::sleep(Duration::from_millis(500));
    // The runtime sends its stop signal once; a second SIGTERM comes from elsewhere (an
    // operator, a `kill` in another hook): here from the host, to init's host pid.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let (status, r, err) = p.finish();
    assert!(status.success(), "{err}");
    let t = termination(&r, "app");
    let exit = secs(&t["exitAfterSeconds"]);
    assert!(
        (0.5..=0.75).contains(&exit),
        "exited {exit:.3} s after the delete\n{err}"
    );
    assert!(
        err.contains("podgrace init: second SIGTERM: forwarding it now"),
        "{err}"
    );
}

#[test]
fn process_group_forwarding_reaches_the_commands_children() {
    if !privileged("init -g") {
        return;
    }
    // The shell's background child is in its process group (no job control): -g signals it
    // too, without -g only the shell gets SIGTERM. The shell's trap leaves the child 0.3 s to
    // act before the shell, and with it init and the whole PID namespace, exits.
    let cmd = |g: &str| {
        format!("[\"{{podgrace}}\", init, {g}--, sh, -c, \"trap 'echo sh >> {{dir}}/got; sleep 0.3; exit 0' TERM; sh -c 'trap \\\"echo child >> {{dir}}/got; exit 0\\\" TERM; while :; do sleep 0.02; done' & touch {{dir}}/started; wait\"]")
    };
    for (tag, g, want) in [("init-g", "-g, ", "child\nsh\n"), ("init-nog", "", "sh\n")] {
        let mut p = RunningPod::start(tag, &pod(tag, 5, &cmd(g)), &[]);
        let dir = p.keep_dir();
        p.wait_file_exists("started");
        std::thread::sleep(Duration::from_millis(200));
        p.delete();
        let (status, _, err) = p.finish();
        assert!(status.success(), "{err}");
        let mut got: Vec<String> = std::fs::read_to_string(dir.path().join("got"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        got.sort();
        let got: String = got.iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(got, want, "{tag}\n{err}");
    }
}

#[test]
fn outside_a_pid_namespace_init_is_a_subreaper() {
    // No root needed: init as a plain process. The command's subshell leaves an orphan, which
    // re-parents to init (not to the host's PID 1) because init registered as a child
    // subreaper.
    let tmpdir = tempdir("init-subreaper");
    let dir = tmpdir.path();
    let pidfile = dir.join("orphan");
    let _ = std::fs::remove_file(&pidfile);
    let mut child = Command::new(PODGRACE)
        .args(["init", "--", "sh", "-c"])
        .arg(format!(
            "(sleep 1000 & echo $! > {0}.tmp; mv {0}.tmp {0}); sleep 1; exit 5",
            pidfile.display()
        ))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let init = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(5);
    let orphan: i32 = loop {
        if let Ok(t) = std::fs::read_to_string(&pidfile) {
            break t.trim().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the orphan never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    let parent = || -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{orphan}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    // The subshell exits right after writing the pid: wait for the re-parenting.
    let deadline = Instant::now() + Duration::from_secs(1);
    while parent() != Some(init) {
        assert!(
            Instant::now() < deadline,
            "orphan {orphan} has parent {:?}, not init {init}",
            parent()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // When the command exits, init exits with its code, as tini does.
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(5));
    // Outside a PID namespace nothing kills the orphan with init: do it here.
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(orphan).unwrap(),
        rustix::process::Signal::KILL,
    );
}

#[test]
fn usage_errors_are_refused_with_exit_2_and_a_missing_command_is_127() {
    let out = podgrace(&["init"]);
    assert_eq!(out.status.code(), Some(2));
    let out = podgrace(&["init", "--map", "SIGTERM", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim(),
        "error: --map \"SIGTERM\": expected FROM=TO, such as SIGTERM=SIGQUIT"
    );
    let out = podgrace(&["init", "--map", "SIGKILL=SIGTERM", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("init does not forward SIGKILL"),
        "{}",
        stderr(&out)
    );
    let out = podgrace(&["init", "--", "/nonexistent/app"]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(
        stderr(&out).trim(),
        "podgrace init: cannot run \"/nonexistent/app\": No such file or directory (os error 2)"
    );
    let not_executable = tmp_file("init-usage", "data.txt", "not a program\n");
    let out = podgrace(&["init", "--", not_executable.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    // Arguments after -- are the command's, flags included.
    let out = podgrace(&["init", "--", "sh", "-c", "echo $0 $1", "-g", "--map"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "-g --map\n");
}

/// Every catchable signal sent to init reaches the command, in order, and init keeps running
/// (as tini, all but SIGCHLD, which init reaps for, SIGTTIN and SIGTTOU, which it absorbs, and
/// the synchronous faults). The command is a python3 process that handles each and prints its
/// name; SIGTERM last ends it, and init exits with its code.
#[test]
fn every_catchable_signal_is_forwarded_to_the_command() {
    use rustix::process::Signal;
    use std::io::BufRead as _;
    let script = "import signal, sys\n\
def on(n, f):\n    print(signal.Signals(n).name, flush=True)\n    if n == signal.SIGTERM: sys.exit(7)\n\
for s in sys.argv[1:]: signal.signal(getattr(signal, s), on)\n\
print('ready', flush=True)\n\
while True: signal.pause()\n";
    let signals = [
        ("SIGHUP", Signal::HUP),
        ("SIGINT", Signal::INT),
        ("SIGQUIT", Signal::QUIT),
        ("SIGUSR1", Signal::USR1),
        ("SIGUSR2", Signal::USR2),
        ("SIGPIPE", Signal::PIPE),
        ("SIGALRM", Signal::ALARM),
        ("SIGCONT", Signal::CONT),
        ("SIGTSTP", Signal::TSTP),
        ("SIGURG", Signal::URG),
        ("SIGXCPU", Signal::XCPU),
        ("SIGXFSZ", Signal::XFSZ),
        ("SIGVTALRM", Signal::VTALARM),
        ("SIGPROF", Signal::PROF),
        ("SIGWINCH", Signal::WINCH),
        ("SIGIO", Signal::IO),
        ("SIGPWR", Signal::POWER),
        ("SIGTERM", Signal::TERM),
    ];
    let mut child = Command::new(PODGRACE)
        .args(["init", "--", "/usr/bin/python3", "-c", script])
        .args(signals.iter().map(|(name, _)| name))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let init = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    // Lines through a channel, so that a signal that is not forwarded fails the test instead of
    // hanging it.
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| {
        lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the command never printed {what}"))
    };
    assert_eq!(next("ready"), "ready");
    for (name, signal) in signals {
        rustix::process::kill_process(init, signal).unwrap();
        let got = next(name);
        // python3 names SIGIO by its other name.
        let want = if name == "SIGIO" { "SIGPOLL" } else { name };
        assert!(
            got == want || got == name,
            "sent {name} to init, the command got {got}"
        );
    }
    assert_eq!(child.wait().unwrap().code(), Some(7));
}
