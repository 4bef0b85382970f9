//! The pod cgroups of podgrace processes that were killed. A podgrace that gets SIGKILL has no
//! time to remove its pods' cgroups: its container processes die with it (their death signal),
//! but their empty cgroup directories stay. Each process runtime records every pod cgroup it
//! makes in `/run/podgrace/cgroups/<pid>.<pod cgroup's name>` (the file holds the cgroup's path)
//! and forgets it once the cgroup is removed; the next podgrace that makes a pod cgroup first
//! removes the cgroups recorded by processes that no longer run, as the network namespaces of
//! [`crate::sandbox::cleanup_stale`] are.
//!
//! The kubelet does the same for the pod cgroups of pods it does not know:
//! `cleanupOrphanedPodCgroups` (`pkg/kubelet/kubelet_pods.go`, Kubernetes 1.18 to 1.36), at
//! every housekeeping; podgrace, with one kubelet per process, knows its own pods only, hence
//! the owner's pid. A cgroup that still holds a process (the killed podgrace's last processes
//! still exiting) is not removable (`rmdir` fails): its record stays for the next start.

use std::path::{Path, PathBuf};

/// Where the records are.
const OWNERS: &str = "/run/podgrace/cgroups";

fn file_in(dir: &Path, pid: u32, cgroup: &str) -> PathBuf {
    let name = cgroup.rsplit('/').next().unwrap_or(cgroup);
    dir.join(format!("{pid}.{name}"))
}

/// Records that this process made the pod cgroup `cgroup` (`/podgrace/<PID>/kubepods/.../pod<UID>`).
/// Best effort: without `/run` (not root) nothing is recorded, and nothing is left either.
pub fn record(cgroup: &str) {
    record_in(Path::new(OWNERS), std::process::id(), cgroup);
}

fn record_in(dir: &Path, pid: u32, cgroup: &str) {
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(file_in(dir, pid, cgroup), cgroup);
}

/// Forgets the record of `cgroup` (removed by this process). A cgroup never recorded (a
/// container's) is a no-op.
pub fn forget(cgroup: &str) {
    let _ = std::fs::remove_file(file_in(Path::new(OWNERS), std::process::id(), cgroup));
}

/// Removes the cgroups recorded by podgrace processes that no longer run, with
/// [`super::cgroup::remove`]; returns the paths removed. A record whose cgroup stays (busy)
/// is kept.
pub fn cleanup() -> Vec<String> {
    cleanup_in(Path::new(OWNERS), |cg| {
        super::cgroup::remove(cg);
        !super::cgroup::exists(cg)
    })
}

/// [`cleanup`] over the records in `dir`: `remove` removes one cgroup and says whether it is
/// gone.
fn cleanup_in(dir: &Path, remove: impl Fn(&str) -> bool) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split_once('.'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let Ok(cgroup) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        // Only what a process runtime records: a pod cgroup under the owner's root
        // (`/podgrace/<PID>/kubepods/`, [`super::cgroup::process_root`]).
        let ours = cgroup.starts_with(&format!(
            "{}/{pid}/kubepods/",
            super::cgroup::PROCESS_ROOT_PARENT
        )) && !cgroup.contains("..");
        if !ours {
            let _ = std::fs::remove_file(e.path());
            continue;
        }
        if remove(&cgroup) {
            let _ = std::fs::remove_file(e.path());
            removed.push(cgroup);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A pid that no process has: a child that has been waited for.
    fn dead_pid() -> u32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    }

    #[test]
    fn only_the_cgroups_of_dead_owners_are_removed_and_a_busy_one_is_kept() {
        let dir =
            std::env::temp_dir().join(format!("podgrace-stale-cgroups-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let dead = dead_pid();
        let me = std::process::id();
        let gone = format!("/podgrace/{dead}/kubepods/besteffort/pod-a");
        let busy = format!("/podgrace/{dead}/kubepods/burstable/pod-b");
        let alive = format!("/podgrace/{me}/kubepods/besteffort/pod-c");
        let (gone, busy, alive) = (gone.as_str(), busy.as_str(), alive.as_str());
        record_in(&dir, dead, gone);
        record_in(&dir, dead, busy);
        record_in(&dir, me, alive);
        // Not a process runtime's pod cgroup: never removed, the record dropped.
        record_in(&dir, dead, "/kubepods/besteffort/pod-d");
        let asked = RefCell::new(Vec::new());
        let removed = cleanup_in(&dir, |cg| {
            asked.borrow_mut().push(cg.to_string());
            cg != busy
        });
        assert_eq!(removed, vec![gone.to_string()]);
        let mut asked = asked.into_inner();
        asked.sort();
        assert_eq!(asked, vec![gone.to_string(), busy.to_string()]);
        // The busy one's record stays for the next start; the live owner's is untouched.
        assert!(file_in(&dir, dead, busy).exists());
        assert!(file_in(&dir, me, alive).exists());
        assert!(!file_in(&dir, dead, gone).exists());
        assert!(!file_in(&dir, dead, "/kubepods/besteffort/pod-d").exists());
        let removed = cleanup_in(&dir, |_| true);
        assert_eq!(removed, vec![busy.to_string()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
