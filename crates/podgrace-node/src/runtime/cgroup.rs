//! The pod's cgroup, as the kubelet's pod container manager keeps it for a runtime with the
//! cgroupfs driver: created in every mounted hierarchy before the sandbox runs
//! (`podContainerManagerImpl.EnsureExists`), removed once the sandbox is gone (`Destroy`, which
//! the kubelet's `cleanupOrphanedPodCgroups` calls for a pod that has terminated); the runtime
//! (runc) creates and removes each container's own cgroup beneath it.
//!
//! The path is the cgroupfs driver's (`/kubepods/burstable/pod<UID>`, see
//! [`crate::kubelet::cri::pod_cgroup_parent`]); the QoS level cgroups (`/kubepods`,
//! `/kubepods/burstable`, `/kubepods/besteffort`), which the kubelet keeps for its life, are
//! removed with the last pod that used them (a busy one stays: `rmdir` of a cgroup with
//! children or processes fails, so a cgroup another podgrace still uses is never removed).
//!
//! Upstream: `pkg/kubelet/cm/pod_container_manager_linux.go`, `pkg/kubelet/cm/cgroup_manager_linux.go`
//! (`CgroupName.ToCgroupfs`), `pkg/kubelet/kubelet_pods.go` (`cleanupOrphanedPodCgroups`),
//! Kubernetes 1.18 to 1.36.

use std::path::{Path, PathBuf};

/// The mount points of the cgroup hierarchies of this mount namespace (v1 `cgroup` and v2
/// `cgroup2`) whose root is the hierarchy's root.
pub fn hierarchies() -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            let mut f = left.split(' ');
            let root = f.nth(3)?;
            let mount = f.next()?;
            ((fstype == "cgroup" || fstype == "cgroup2") && root == "/")
                .then(|| PathBuf::from(mount))
        })
        .collect()
}

fn relative(cgroup: &str) -> &Path {
    Path::new(cgroup.trim_start_matches('/'))
}

/// Creates `cgroup` (`/kubepods/burstable/pod<UID>`) and its parents in every hierarchy.
///
/// # Errors
/// The first directory that cannot be created, with its path.
pub fn ensure(cgroup: &str) -> Result<(), (PathBuf, std::io::Error)> {
    for h in hierarchies() {
        let dir = h.join(relative(cgroup));
        std::fs::create_dir_all(&dir).map_err(|e| (dir, e))?;
    }
    Ok(())
}

/// Removes `cgroup` from every hierarchy (with any empty cgroups left beneath it), then each
/// of its parents that no other cgroup or process uses. Best effort: a busy cgroup stays.
pub fn remove(cgroup: &str) {
    for h in hierarchies() {
        let dir = h.join(relative(cgroup));
        remove_tree(&dir);
        let mut parent = dir.parent();
        while let Some(p) = parent.filter(|p| *p != h.as_path() && p.starts_with(&h)) {
            if std::fs::remove_dir(p).is_err() {
                break;
            }
            parent = p.parent();
        }
    }
}

/// `rmdir` bottom-up (a cgroup directory's files cannot and need not be removed).
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Whether `cgroup` exists in any hierarchy.
pub fn exists(cgroup: &str) -> bool {
    hierarchies()
        .iter()
        .any(|h| h.join(relative(cgroup)).is_dir())
}
