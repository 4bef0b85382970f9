//! A real containerd for the `--runtime containerd` tests, and the images they run, built here
//! without a registry: one-layer OCI archives of static binaries (Debian's busybox-static, the
//! signal logger `tests/images/siglog.c` built static with gcc), imported with `ctr`.
//!
//! The containerd is the one `.ci/containerd.sh start` runs (its socket in
//! `$PODGRACE_CONTAINERD`, else `/tmp/podgrace-containerd/containerd.sock`). Under `CI=true` a
//! missing containerd fails the test; elsewhere the test is skipped with a note saying how to
//! start one.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The busybox image: `/bin/busybox` and its applets' links; ENTRYPOINT `sh -c`, CMD a sleep.
pub const BUSYBOX: &str = "podgrace.test/busybox:1";
/// The busybox image with `STOPSIGNAL SIGQUIT` in its config, as nginx's official image has.
pub const BUSYBOX_QUIT: &str = "podgrace.test/busybox-quit:1";
/// The signal logger (ENTRYPOINT `/bin/siglog`, which exits on SIGTERM), with busybox beside
/// it for exec hooks and probes.
pub const SIGLOG: &str = "podgrace.test/siglog:1";
/// The signal logger whose image config says `STOPSIGNAL SIGQUIT` (and which exits on it), as
/// nginx's official image does.
pub const SIGLOG_QUIT: &str = "podgrace.test/siglog-quit:1";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace root")
        .to_path_buf()
}

/// The containerd socket, or `None` (test skipped, with a note) outside CI.
///
/// # Panics
/// Under `CI=true` when no containerd answers: CI starts one, so its absence is a failure.
pub fn socket(test: &str) -> Option<PathBuf> {
    let sock = std::env::var_os("PODGRACE_CONTAINERD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/podgrace-containerd/containerd.sock"));
    let up = sock.exists()
        && Command::new("ctr")
            .args(["-a"])
            .arg(&sock)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
    if up {
        images(&sock);
        return Some(sock);
    }
    let how = format!(
        "no containerd at {} (start one with `sudo .ci/containerd.sh start`, or set PODGRACE_CONTAINERD to a socket)",
        sock.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {how}");
    }
    eprintln!("SKIP {test}: {how}");
    None
}

/// The ids of the containers (sandboxes included) in containerd's `k8s.io` namespace that
/// match `filter`, a `ctr` filter such as `labels."io.kubernetes.pod.name"==web`.
pub fn containers(sock: &Path, filter: &str) -> Vec<String> {
    let o = Command::new("ctr")
        .arg("-a")
        .arg(sock)
        .args(["-n", "k8s.io", "containers", "ls", "-q", filter])
        .output()
        .expect("run ctr");
    assert!(
        o.status.success(),
        "ctr containers ls {filter}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Builds and imports the test images once per test binary.
fn images(sock: &Path) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("podgrace-images-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let bin = dir.join("rootfs/bin");
        std::fs::create_dir_all(&bin).expect("image dir");
        std::fs::create_dir_all(dir.join("rootfs/tmp")).expect("image /tmp");
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("busybox-static (apt-get install busybox-static)");
        std::fs::copy(busybox, bin.join("busybox")).expect("copy busybox");
        for applet in [
            "sh", "sleep", "echo", "cat", "true", "false", "ls", "kill", "date", "test", "touch",
        ] {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).expect("applet link");
        }
        let cc = Command::new("gcc")
            .args(["-static", "-O2", "-o"])
            .arg(bin.join("siglog"))
            .arg(repo_root().join("crates/podgrace-node/tests/images/siglog.c"))
            .status()
            .expect("gcc");
        assert!(cc.success(), "building siglog failed");
        let dir_arg = sock.parent().expect("socket dir");
        let import = |reference: &str, config: &str| {
            let st = Command::new("bash")
                .arg(repo_root().join(".ci/containerd.sh"))
                .args(["image", reference])
                .arg(dir.join("rootfs"))
                .arg(config)
                .arg(dir_arg)
                .status()
                .expect("containerd.sh image");
            assert!(st.success(), "importing {reference} failed");
        };
        import(
            BUSYBOX,
            r#"{"Entrypoint":["/bin/sh","-c"],"Cmd":["sleep 3600"],"Env":["PATH=/bin"]}"#,
        );
        import(
            BUSYBOX_QUIT,
            r#"{"Entrypoint":["/bin/sh","-c"],"Cmd":["sleep 3600"],"Env":["PATH=/bin"],"StopSignal":"SIGQUIT"}"#,
        );
        import(
            SIGLOG,
            r#"{"Entrypoint":["/bin/siglog"],"Env":["PATH=/bin"]}"#,
        );
        import(
            SIGLOG_QUIT,
            r#"{"Entrypoint":["/bin/siglog","3"],"Env":["PATH=/bin"],"StopSignal":"SIGQUIT"}"#,
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}
