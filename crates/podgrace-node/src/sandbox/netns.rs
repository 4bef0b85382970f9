//! Named network namespaces under `/run/netns`, made and removed the way iproute2's
//! `ip netns add` / `ip netns del` do (iproute2 `ip/ipnetns.c`, `netns_add` and `netns_delete`),
//! without running `ip`: the directory is a shared mount point, each namespace is a file there
//! with the namespace bind-mounted on it, and deleting is a lazy unmount and an unlink.
//!
//! The namespace is created by a short-lived thread of its own (`unshare(CLONE_NEWNET)` changes
//! only the calling thread), so no other thread of podgrace ever leaves the host network.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::io::Errno;
use rustix::mount::{mount_bind, mount_change, unmount, MountPropagationFlags, UnmountFlags};
use rustix::thread::UnshareFlags;

/// Where named network namespaces live (iproute2's `NETNS_RUN_DIR`).
pub(crate) const NETNS_RUN_DIR: &str = "/run/netns";

/// The file of the namespace `name`.
pub(crate) fn path(name: &str) -> PathBuf {
    Path::new(NETNS_RUN_DIR).join(name)
}

/// Makes `/run/netns` exist and be a shared mount point, once per process, as `ip netns add`
/// does: a namespace mounted there later is seen in every mount namespace that shares it.
fn prepare_run_dir() -> io::Result<()> {
    static PREPARED: OnceLock<Result<(), (io::ErrorKind, String)>> = OnceLock::new();
    PREPARED
        .get_or_init(|| {
            let prepare = || -> io::Result<()> {
                std::fs::create_dir_all(NETNS_RUN_DIR)?;
                let shared = MountPropagationFlags::SHARED | MountPropagationFlags::REC;
                match mount_change(NETNS_RUN_DIR, shared) {
                    Ok(()) => Ok(()),
                    // Not a mount point yet: bind it onto itself first (iproute2 does the same).
                    Err(Errno::INVAL) => {
                        mount_bind(NETNS_RUN_DIR, NETNS_RUN_DIR)?;
                        mount_change(NETNS_RUN_DIR, shared)?;
                        Ok(())
                    }
                    Err(e) => Err(e.into()),
                }
            };
            prepare().map_err(|e| (e.kind(), e.to_string()))
        })
        .clone()
        .map_err(|(kind, msg)| io::Error::new(kind, format!("preparing {NETNS_RUN_DIR}: {msg}")))
}

/// Creates the network namespace `name` (`/run/netns/<name>`, only `lo` in it, down).
/// Errors: `AlreadyExists` when the file exists, the failing syscall's error otherwise (the
/// file is removed again then).
pub(crate) fn add(name: &str) -> io::Result<()> {
    prepare_run_dir()?;
    let file = path(name);
    std::fs::File::create_new(&file)?;
    let made = std::thread::scope(|s| {
        s.spawn(|| -> io::Result<()> {
            // SAFETY: CLONE_NEWNET unshares no fd table, files or memory: only this short-lived
            // thread's network namespace changes, and the thread ends right after.
            unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }?;
            mount_bind("/proc/thread-self/ns/net", &file)?;
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
    });
    if made.is_err() {
        let _ = std::fs::remove_file(&file);
    }
    made
}

/// Deletes the network namespace `name`: a lazy unmount of its file, then the file. The
/// namespace itself goes when nothing holds it any more (a process in it, an open fd).
/// Errors: `NotFound` when there is no such namespace file, the failing syscall's error
/// otherwise.
pub(crate) fn del(name: &str) -> io::Result<()> {
    let file = path(name);
    match unmount(&file, UnmountFlags::DETACH) {
        // EINVAL: the file exists but nothing is mounted on it (a half-made namespace).
        Ok(()) | Err(Errno::INVAL) => {}
        Err(e) => return Err(e.into()),
    }
    std::fs::remove_file(&file)
}

/// The names of the namespaces under `/run/netns` (none when it does not exist).
pub(crate) fn list() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_RUN_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}
