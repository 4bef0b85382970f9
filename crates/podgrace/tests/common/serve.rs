//! One `podgrace serve` harness for the tests that drive it with real clients: start it on
//! 127.0.0.1 with a port of its own, run kubectl against the kubeconfig it wrote, write files
//! in a directory of its own, and stop it. Dropping it stops it as a node's shutdown would
//! (SIGTERM: the drain; a second SIGTERM after [`DRAIN`]: exit at once) and checks that nothing
//! of its pods is left: no process it started, no process in a pod cgroup of its pods, and on
//! containerd no container of its pods.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How long [`Serve::stop`] leaves the drain (every pod deleted with its own grace period)
/// before the second SIGTERM that ends serve at once.
pub const DRAIN: Duration = Duration::from_secs(15);

/// How long serve and its pods' processes may take to be gone after the last signal.
const GONE_WITHIN: Duration = Duration::from_secs(15);

/// The kubectl tests use by default: Debian's (or the image's) `/usr/bin/kubectl`, else
/// `/usr/local/bin/kubectl`.
pub fn kubectl_bin() -> PathBuf {
    ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("kubectl is needed for the serve tests")
}

/// A running `podgrace serve --bind 127.0.0.1:0`, its stderr in a file of its directory
/// (printed when a test fails).
pub struct Serve {
    /// The serve process (tests signal it as Ctrl-C would).
    pub child: Child,
    /// A directory of its own for the test's files, removed when the harness is dropped.
    pub dir: PathBuf,
    /// The kubeconfig serve wrote (mode 0600, with the token).
    pub kubeconfig: PathBuf,
    /// The API's URL, `https://127.0.0.1:PORT`.
    pub server: String,
    /// serve's standard output up to its last start-up line (`kube-proxy: ...`).
    pub stdout: Vec<String>,
    stderr: PathBuf,
    containerd: Option<PathBuf>,
    done: bool,
    _tmp: tempfile::TempDir,
}

impl Serve {
    /// Starts `podgrace serve --bind 127.0.0.1:0 --kubeconfig-out DIR/kubeconfig EXTRA...` and
    /// waits for its start-up lines (the API's address, `export KUBECONFIG=`, kube-proxy's).
    /// `{dir}` in `extra` stands for the harness's directory; `tag` names it; a `--bind` in
    /// `extra` is used instead of `127.0.0.1:0`. Panics with serve's stderr when it does not
    /// start.
    pub fn start(tag: &str, extra: &[&str]) -> Serve {
        Serve::start_under(tag, &[], extra)
    }

    /// [`Serve::start`] with serve run by `wrapper` (`["prlimit", "--nofile=64:64"]`: the
    /// wrapper's arguments, then serve's command line).
    pub fn start_under(tag: &str, wrapper: &[&str], extra: &[&str]) -> Serve {
        let tmp = super::tempdir(&format!("serve-{tag}"));
        let dir = tmp.path().to_path_buf();
        let extra: Vec<String> = extra
            .iter()
            .map(|a| a.replace("{dir}", &dir.display().to_string()))
            .collect();
        let kubeconfig = dir.join("kubeconfig");
        let stderr = dir.join("serve.stderr");
        let containerd = extra
            .iter()
            .zip(extra.iter().skip(1))
            .find(|(flag, _)| *flag == "--runtime")
            .and_then(|(_, v)| v.strip_prefix("containerd:"))
            .map(PathBuf::from);
        // `--bind` in `extra` replaces the harness's `127.0.0.1:0`.
        let bind: &[&str] = if extra.iter().any(|a| a == "--bind") {
            &[]
        } else {
            &["--bind", "127.0.0.1:0"]
        };
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(env!("CARGO_BIN_EXE_podgrace"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_podgrace")),
        };
        let mut child = cmd
            .arg("serve")
            .args(bind)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .args(&extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("serve's stderr file"))
            .spawn()
            .expect("start podgrace serve");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut stdout = Vec::new();
        let mut server = String::new();
        let mut up = false;
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split(" API on ").nth(1) {
                server = rest.split(' ').next().unwrap_or_default().to_string();
            }
            if let Some(path) = line.strip_prefix("export KUBECONFIG=") {
                assert_eq!(path, kubeconfig.display().to_string(), "{line}");
            }
            up = line.starts_with("kube-proxy: ");
            stdout.push(line);
            if up {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        let s = Serve {
            child,
            dir,
            kubeconfig,
            server,
            stdout,
            stderr,
            containerd,
            done: false,
            _tmp: tmp,
        };
        assert!(
            up && s.server.starts_with("https://127.0.0.1:"),
            "serve did not start: {:?}\nserve: {}",
            s.stdout,
            s.stderr()
        );
        s
    }

    /// serve's stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// serve's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes `text` to `name` in the harness's directory and returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).expect("write test file");
        p
    }

    /// Writes `text` to `name` and `kubectl apply -f`s it (must succeed).
    pub fn apply(&self, name: &str, text: &str) {
        let f = self.file(name, text);
        self.ok(&["apply", "-f", f.to_str().expect("utf-8 path")]);
    }

    /// Polls `kubectl ARGS` every 100 ms until it succeeds with an output `done` accepts, at
    /// most `within`; returns that output.
    pub fn wait_for_output(
        &self,
        args: &[&str],
        within: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let t0 = Instant::now();
        loop {
            let o = self.kubectl(args);
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            if o.status.success() && done(&out) {
                return out;
            }
            assert!(
                t0.elapsed() < within,
                "kubectl {args:?} gave {out:?} for {within:?}\nserve: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs [`kubectl_bin`] `ARGS` with this serve's kubeconfig (no proxy).
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with(&kubectl_bin(), args)
    }

    /// Runs the kubectl build `bin` with this serve's kubeconfig (no proxy).
    pub fn kubectl_with(&self, bin: &Path, args: &[&str]) -> Output {
        Command::new(bin)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .output()
            .expect("run kubectl")
    }

    /// [`Serve::kubectl`] that must succeed; returns its stdout (the failure shows serve's
    /// stderr).
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.kubectl(args);
        assert!(
            o.status.success(),
            "kubectl {args:?}: {}\nserve: {}",
            String::from_utf8_lossy(&o.stderr),
            self.stderr()
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Sends `signal` to serve (SIGINT is Ctrl-C).
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, signal).expect("signal podgrace serve");
    }

    /// Waits up to `within` for serve to exit.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().expect("wait serve") {
                return Some(st);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills serve with SIGKILL, as a kubelet may die, and checks nothing: on containerd its
    /// pods outlive it (the next serve finds them).
    pub fn kill(mut self) {
        self.done = true;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops serve as [`Drop`] does and returns its exit status; panics when anything of its
    /// pods is left.
    pub fn stop(mut self) -> ExitStatus {
        self.done = true;
        match self.stop_and_check() {
            Ok(st) => st,
            Err(e) => panic!("{e}\nserve: {}", self.stderr()),
        }
    }

    /// SIGTERM (the drain), a second one after [`DRAIN`] (exit at once), SIGKILL when serve is
    /// still there [`GONE_WITHIN`] later (an error); then waits for its pods' processes and
    /// containers to go. Errors say what is left.
    fn stop_and_check(&mut self) -> Result<ExitStatus, String> {
        let uids = self.pod_uids();
        let tree = descendants(self.child.id() as i32);
        let mut problems = Vec::new();
        let status = match self.child.try_wait().expect("wait serve") {
            Some(st) => st,
            None => {
                self.signal(rustix::process::Signal::TERM);
                match self.wait_exit(DRAIN) {
                    Some(st) => st,
                    None => {
                        self.signal(rustix::process::Signal::TERM);
                        match self.wait_exit(GONE_WITHIN) {
                            Some(st) => st,
                            None => {
                                problems.push(format!(
                                    "serve did not exit {GONE_WITHIN:?} after a second SIGTERM"
                                ));
                                let _ = self.child.kill();
                                self.child.wait().expect("wait serve")
                            }
                        }
                    }
                }
            }
        };
        let until = Instant::now() + GONE_WITHIN;
        let left = loop {
            let left = self.left_of(&tree, &uids);
            if left.is_empty() || Instant::now() >= until {
                break left;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if !left.is_empty() {
            problems.push(format!(
                "left behind by serve (pods {uids:?}): {}",
                left.join("; ")
            ));
        }
        if problems.is_empty() {
            Ok(status)
        } else {
            Err(problems.join("\n"))
        }
    }

    /// The UIDs of every pod the API holds (none when it does not answer).
    fn pod_uids(&self) -> Vec<String> {
        let o = self.kubectl(&[
            "get",
            "pods",
            "-A",
            "-o",
            "jsonpath={.items[*].metadata.uid}",
            "--request-timeout=5s",
        ]);
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    /// What is still there of serve's pods: processes it started (by pid and start time),
    /// processes in a pod cgroup of one of `uids`, containerd containers of one of `uids`.
    fn left_of(&self, tree: &[(i32, u64)], uids: &[String]) -> Vec<String> {
        let mut left: Vec<String> = tree
            .iter()
            .filter(|(pid, start)| running(*pid).is_some_and(|s| s == *start))
            .map(|(pid, _)| format!("process {pid} ({})", cmdline(*pid)))
            .collect();
        if !uids.is_empty() {
            for pid in all_pids() {
                let Ok(cg) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
                    continue;
                };
                let mine = uids.iter().any(|u| {
                    cg.contains(&format!("pod{u}"))
                        || cg.contains(&format!("pod{}", u.replace('-', "_")))
                });
                if mine
                    && running(pid).is_some()
                    && !left
                        .iter()
                        .any(|l| l.starts_with(&format!("process {pid} ")))
                {
                    left.push(format!("process {pid} in a pod cgroup ({})", cmdline(pid)));
                }
            }
        }
        if let Some(sock) = &self.containerd {
            for uid in uids {
                let filter = format!("labels.\"io.kubernetes.pod.uid\"=={uid}");
                for id in super::containerd_support::containers(sock, &filter) {
                    left.push(format!("containerd container {id} of pod {uid}"));
                }
            }
        }
        left
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let result = self.stop_and_check();
        if std::thread::panicking() {
            eprintln!("serve's stderr:\n{}", self.stderr());
            if let Err(e) = result {
                eprintln!("{e}");
            }
        } else if let Err(e) = result {
            panic!("{e}\nserve: {}", self.stderr());
        }
    }
}

/// The pids whose environment holds `marker` (`NAME=VALUE`: every process of one container
/// given that variable), seen from the host.
pub fn pids_with_env(marker: &str) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()))
        })
        .collect()
}

/// `true` while `pid` runs (exists and is not a zombie).
pub fn alive(pid: i32) -> bool {
    running(pid).is_some()
}

/// Every process id in /proc.
fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `(parent pid, start time in clock ticks)` of a live (not zombie) process.
fn stat(pid: i32) -> Option<(i32, u64, bool)> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state ppid ... starttime (field 22).
    let rest: Vec<&str> = st.rsplit_once(')')?.1.split_whitespace().collect();
    let zombie = rest.first()? == &"Z";
    Some((
        rest.get(1)?.parse().ok()?,
        rest.get(19)?.parse().ok()?,
        zombie,
    ))
}

/// The start time of `pid` when it runs (is not a zombie).
fn running(pid: i32) -> Option<u64> {
    stat(pid).and_then(|(_, start, zombie)| (!zombie).then_some(start))
}

/// The processes below `root` (its children, theirs, ...), with their start times.
fn descendants(root: i32) -> Vec<(i32, u64)> {
    let table: Vec<(i32, i32, u64)> = all_pids()
        .into_iter()
        .filter_map(|pid| stat(pid).map(|(ppid, start, _)| (pid, ppid, start)))
        .collect();
    let mut found = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for (pid, ppid, start) in &table {
            if *ppid == parent {
                found.push((*pid, *start));
                parents.push(*pid);
            }
        }
    }
    found
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}
