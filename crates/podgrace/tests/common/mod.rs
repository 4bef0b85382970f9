//! Helpers shared by the CLI tests: run the real binary, find `shared/`, list the corpus.
// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]

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

/// A fresh directory of this test process under the system temp dir.
pub fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("podgrace-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir
}

/// Writes `text` to `name` in [`tempdir`] and returns its path.
pub fn tmp_file(tag: &str, name: &str, text: &str) -> PathBuf {
    let p = tempdir(tag).join(name);
    std::fs::write(&p, text).expect("write tmp");
    p
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
