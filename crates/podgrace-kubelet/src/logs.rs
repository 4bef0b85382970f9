//! Container logs in the kubelet's CRI layout, which the API's `log` subresource reads:
//! `LOG_DIR/NAMESPACE_POD_UID/CONTAINER/RESTARTCOUNT.log`, one line per output line,
//! `2016-10-06T00:17:09.669794202Z stdout F the line` (RFC 3339 with nanoseconds, the stream,
//! `F` for a full line).
//!
//! Upstream: `pkg/kubelet/kuberuntime/kuberuntime_manager.go` / `helpers.go` (`BuildPodLogsDirectory`,
//! `BuildContainerLogsDirectory`, `<restartCount>.log`), the CRI logging format
//! (`staging/src/k8s.io/cri-api`, containerd's `cio` writer).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use podgrace_node::process::{OutputLine, Stream};
use tokio::sync::mpsc;

/// The directory of one pod's logs.
pub fn pod_log_dir(root: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    root.join(format!("{namespace}_{name}_{uid}"))
}

/// One CRI log line (with its newline) for `line`, written at `now`.
pub fn cri_line(now: jiff::Timestamp, line: &OutputLine) -> String {
    let stream = match line.stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    };
    format!("{now} {stream} F {}\n", line.line)
}

/// Writes `output` under `dir` until it ends; `restarts(container)` gives the restart count of
/// the container's instance running now (its file). Errors (a full disk) drop lines.
pub async fn write_logs(
    dir: PathBuf,
    mut output: mpsc::UnboundedReceiver<OutputLine>,
    restarts: impl Fn(&str) -> usize,
) {
    let mut files: HashMap<(String, usize), std::fs::File> = HashMap::new();
    while let Some(line) = output.recv().await {
        let n = restarts(&line.container);
        let key = (line.container.clone(), n);
        if !files.contains_key(&key) {
            let cdir = dir.join(&line.container);
            let file = std::fs::create_dir_all(&cdir).and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(cdir.join(format!("{n}.log")))
            });
            match file {
                Ok(f) => {
                    files.insert(key.clone(), f);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "container log");
                    continue;
                }
            }
        }
        if let Some(f) = files.get_mut(&key) {
            let _ = f.write_all(cri_line(jiff::Timestamp::now(), &line).as_bytes());
        }
    }
}
