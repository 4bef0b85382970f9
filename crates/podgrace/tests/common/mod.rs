//! Helpers shared by the CLI tests: run the real binary, find `shared/`, list the corpus.
// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]

#[path = "../../../podgrace-node/tests/containerd_support/mod.rs"]
pub mod containerd_support;
pub mod serve;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `shared/` beside the checkout (or `PODGRACE_SHARED`), if present.
pub fn shared() -> Option<PathBuf> {
    let dir = std::env::var_os("PODGRACE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared"));
    dir.is_dir().then_some(dir)
}

/// Runs `podgrace ARGS` in the repository root, with `stdin` as standard input if given.
pub fn podgrace_in(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(args)
        .current_dir(repo())
        .env_remove("NO_COLOR")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run podgrace");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("wait")
}

/// Runs `podgrace ARGS` with no standard input.
pub fn podgrace(args: &[&str]) -> Output {
    podgrace_in(args, None)
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output parsed as one JSON document.
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

/// A fresh directory of its own for one test, `podgrace-TAG-XXXXXX` under the system temp dir
/// (the tag only names it: two tests with one tag get two directories), removed when the
/// returned guard is dropped: hold it for as long as any process uses the files.
pub fn tempdir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("podgrace-{tag}-"))
        .tempdir()
        .expect("tmp dir")
}

/// A file written in a [`tempdir`] of its own; the directory goes when this is dropped. Derefs
/// to the file's path.
pub struct TmpFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for TmpFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TmpFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for TmpFile {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

/// Writes `text` to `name` in a fresh [`tempdir`] and returns the file, which holds the
/// directory.
pub fn tmp_file(tag: &str, name: &str, text: &str) -> TmpFile {
    let dir = tempdir(tag);
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write tmp");
    TmpFile { path, _dir: dir }
}

/// Files of the shared corpus that the API server itself would reject, with the reason.
pub fn invalid_corpus() -> Vec<(String, String)> {
    include_str!("../../../podgrace-core/tests/data/invalid-corpus.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
        .map(|(p, r)| (p.to_string(), r.to_string()))
        .collect()
}

/// Every manifest of `shared/corpus`, sorted, with its path relative to the corpus.
pub fn corpus_files(shared: &Path) -> Vec<(PathBuf, String)> {
    let corpus = shared.join("corpus");
    let mut files = Vec::new();
    let mut stack = vec![corpus.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read corpus").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                let rel = p
                    .strip_prefix(&corpus)
                    .expect("below corpus")
                    .to_string_lossy()
                    .into_owned();
                files.push((p, rel));
            }
        }
    }
    files.sort();
    files
}

/// `true` when running as root, which `run` and `drill` need for PID and network namespaces;
/// otherwise prints why `test` skips.
pub fn privileged(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        eprintln!("SKIP {test}: needs root for PID and network namespaces");
    }
    root
}

/// Runs `podgrace drill FILE -o json EXTRA...` on `yaml` and returns its exit code and JSON; it
/// must have run (exit 0 or 1).
pub fn drill(tag: &str, yaml: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    let (code, r, _) = drill_logged(tag, yaml, extra);
    (code, r)
}

/// [`drill`] with the drill's debug log (every failed request and termination instant), for
/// assertion messages.
pub fn drill_logged(
    tag: &str,
    yaml: &str,
    extra: &[&str],
) -> (Option<i32>, serde_json::Value, String) {
    let file = tmp_file(tag, "web.yaml", yaml);
    let mut args = vec!["drill", file.to_str().unwrap(), "-o", "json"];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(&args)
        .current_dir(repo())
        .env(
            "RUST_LOG",
            "warn,podgrace_drill::scenario=debug,podgrace_drill::endpoints=debug",
        )
        .stdin(Stdio::null())
        .output()
        .expect("run podgrace");
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(1),
        "drill failed to run: {}",
        stderr(&out)
    );
    (code, json(&out), stderr(&out))
}

/// A `podgrace run` in the background, with its output collected, for tests that act on the
/// pod while it runs (connect to it, signal it) and then delete it with SIGTERM to podgrace,
/// as `kubectl delete` would.
pub struct RunningPod {
    pub child: std::process::Child,
    pub dir: PathBuf,
    tmp: Option<tempfile::TempDir>,
    stdout: Option<std::thread::JoinHandle<Vec<u8>>>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
}

impl RunningPod {
    /// Starts `podgrace run FILE -o json EXTRA...` on `yaml`, in which `{dir}` stands for a fresh
    /// directory of this test (for files the containers write) and `{podgrace}` for the binary.
    pub fn start(tag: &str, yaml: &str, extra: &[&str]) -> RunningPod {
        use std::io::Read as _;
        let tmp = tempdir(tag);
        let dir = tmp.path().to_path_buf();
        let yaml = yaml
            .replace("{dir}", &dir.display().to_string())
            .replace("{podgrace}", env!("CARGO_BIN_EXE_podgrace"));
        let file = dir.join("pod.yaml");
        std::fs::write(&file, yaml).expect("write pod");
        let mut child = Command::new(env!("CARGO_BIN_EXE_podgrace"))
            .arg("run")
            .arg(&file)
            .args(["-o", "json"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run podgrace");
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let stdout = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        let stderr = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        });
        RunningPod {
            child,
            dir,
            tmp: Some(tmp),
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Takes the guard of `{dir}` so that its files outlive [`RunningPod::finish`] (the
    /// directory goes when the returned guard is dropped).
    pub fn keep_dir(&mut self) -> tempfile::TempDir {
        self.tmp.take().expect("the directory is kept once")
    }

    /// Waits (up to 10 s) for a file a container writes into `{dir}`, and returns its text.
    pub fn wait_file(&self, name: &str) -> String {
        let path = self.dir.join(name);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                if text.ends_with('\n') {
                    return text;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} never appeared",
                path.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits (up to 10 s) for a file a container creates in `{dir}`.
    pub fn wait_file_exists(&self, name: &str) {
        let path = self.dir.join(name);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !path.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{} never appeared",
                path.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The pod's IPv4 address, which its container wrote to `{dir}/ip` with
    /// `ip -o -4 addr show dev eth0`.
    pub fn ip(&self) -> std::net::Ipv4Addr {
        let text = self.wait_file("ip");
        text.split_whitespace()
            .skip_while(|w| *w != "inet")
            .nth(1)
            .and_then(|cidr| cidr.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {text:?}"))
    }

    /// Sends SIGTERM to podgrace: `kubectl delete pod`. Returns the instant it was sent.
    pub fn delete(&self) -> std::time::Instant {
        let pid = rustix::process::Pid::from_child(&self.child);
        let at = std::time::Instant::now();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("signal podgrace");
        at
    }

    /// Waits for podgrace to exit; returns its exit status, the JSON report and stderr.
    pub fn finish(mut self) -> (std::process::ExitStatus, serde_json::Value, String) {
        let status = self.child.wait().expect("wait podgrace");
        let out = self.stdout.take().expect("once").join().expect("stdout");
        let err =
            String::from_utf8_lossy(&self.stderr.take().expect("once").join().expect("stderr"))
                .into_owned();
        let report = serde_json::from_slice(&out).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\nstderr:\n{err}",
                String::from_utf8_lossy(&out)
            )
        });
        (status, report, err)
    }
}

impl Drop for RunningPod {
    fn drop(&mut self) {
        // A test that failed half-way must not leave its pod running.
        if self.stdout.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Connects to `addr` until it answers (up to 10 s).
pub fn wait_listening(addr: std::net::SocketAddr) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(200))
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{addr} never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
