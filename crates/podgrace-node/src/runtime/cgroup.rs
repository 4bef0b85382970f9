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

/// The cgroup controllers podgrace sets limits in, as this machine mounts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    /// `memory` (v1 `memory.limit_in_bytes`, v2 `memory.max`).
    Memory,
    /// `cpu` (v1 `cpu.shares` and `cpu.cfs_*`, v2 `cpu.weight` and `cpu.max`).
    Cpu,
    /// `pids`.
    Pids,
}

impl Controller {
    const ALL: [Controller; 3] = [Controller::Memory, Controller::Cpu, Controller::Pids];

    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
            Controller::Pids => "pids",
        }
    }
}

/// Where a controller is mounted: a v1 hierarchy of its own (or shared, `cpu,cpuacct`), or the
/// v2 unified hierarchy when that is where the controller is (`cgroup.controllers` lists it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The hierarchy's mount point (`/sys/fs/cgroup/memory`, `/sys/fs/cgroup`).
    pub path: PathBuf,
    /// cgroup v2.
    pub v2: bool,
}

/// The controllers' mounts in this mount namespace (each at most once; v1 preferred, as the
/// kernel gives a controller to one hierarchy only).
pub fn controller_mounts() -> Vec<(Controller, Mount)> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut v1: Vec<(Vec<String>, PathBuf)> = Vec::new();
    let mut v2: Option<PathBuf> = None;
    for l in info.lines() {
        let Some((left, right)) = l.split_once(" - ") else {
            continue;
        };
        let mut r = right.split(' ');
        let (fstype, _source, options) = (r.next(), r.next(), r.next().unwrap_or_default());
        let mut f = left.split(' ');
        let (Some(root), Some(mount)) = (f.nth(3), f.next()) else {
            continue;
        };
        if root != "/" {
            continue;
        }
        match fstype {
            Some("cgroup") => v1.push((
                options.split(',').map(str::to_string).collect(),
                PathBuf::from(mount),
            )),
            Some("cgroup2") => v2 = Some(PathBuf::from(mount)),
            _ => {}
        }
    }
    let unified: Vec<String> = v2
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p.join("cgroup.controllers")).ok())
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    Controller::ALL
        .into_iter()
        .filter_map(|c| {
            if let Some((_, p)) = v1.iter().find(|(o, _)| o.iter().any(|o| o == c.name())) {
                return Some((
                    c,
                    Mount {
                        path: p.clone(),
                        v2: false,
                    },
                ));
            }
            let p = v2
                .as_ref()
                .filter(|_| unified.iter().any(|u| u == c.name()))?;
            Some((
                c,
                Mount {
                    path: p.clone(),
                    v2: true,
                },
            ))
        })
        .collect()
}

/// The node facts of the kubelet's resource rules, read once: `MemTotal` of `/proc/meminfo`
/// (cadvisor's `MemoryCapacity`), cgroup v2 unified mode (`/sys/fs/cgroup` is cgroup2), a swap
/// controller (`memory.memsw.limit_in_bytes` at the v1 memory root; `memory.swap.max` on v2),
/// and the kubelet's defaults for the rest (`cpuCFSQuota`, a 100 ms period, no
/// `singleProcessOOMKill`).
pub fn node_resources() -> &'static podgrace_core::rules::resources::NodeResources {
    static NODE: std::sync::OnceLock<podgrace_core::rules::resources::NodeResources> =
        std::sync::OnceLock::new();
    NODE.get_or_init(|| {
        let memory_capacity = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let l = m.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kb: i64 = l.split_whitespace().nth(1)?.parse().ok()?;
                Some(kb * 1024)
            })
            .unwrap_or(0);
        let cgroup_v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let memory = controller_mounts()
            .into_iter()
            .find(|(c, _)| *c == Controller::Memory)
            .map(|(_, m)| m);
        let swap_controller = match &memory {
            Some(m) if !m.v2 => m.path.join("memory.memsw.limit_in_bytes").exists(),
            Some(m) => std::fs::read_dir(&m.path)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.path().join("memory.swap.max").exists()),
            None => false,
        };
        podgrace_core::rules::resources::NodeResources {
            memory_capacity,
            cgroup_v2,
            swap_controller,
            ..Default::default()
        }
    })
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), (PathBuf, std::io::Error)> {
    let p = dir.join(file);
    std::fs::write(&p, value).map_err(|e| (p, e))
}

/// `cpu.shares` as cgroup v2's `cpu.weight` (runc's `ConvertCPUSharesToCgroupV2Value`).
fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + ((shares.saturating_sub(2)) * 9999) / 262_142
}

/// The kubelet's pod cgroup limits (`ResourceConfigForPod`, written by its cgroup manager):
/// `cpu.shares`, `cpu.cfs_period_us` then `cpu.cfs_quota_us` (a quota of 0 is not written),
/// `memory.limit_in_bytes` (0 is not written); on v2 `cpu.weight`, `cpu.max` and `memory.max`.
/// The cgroup must exist ([`ensure`]).
///
/// # Errors
/// The first file that cannot be written, with its path.
pub fn apply_pod_config(
    cgroup: &str,
    cfg: &podgrace_core::rules::resources::ResourceConfig,
) -> Result<(), (PathBuf, std::io::Error)> {
    for (c, m) in controller_mounts() {
        let dir = m.path.join(relative(cgroup));
        match (c, m.v2) {
            (Controller::Cpu, false) => {
                if let Some(s) = cfg.cpu_shares {
                    write(&dir, "cpu.shares", &s.to_string())?;
                }
                if let Some(p) = cfg.cpu_period {
                    write(&dir, "cpu.cfs_period_us", &p.to_string())?;
                }
                if let Some(q) = cfg.cpu_quota.filter(|q| *q != 0) {
                    write(&dir, "cpu.cfs_quota_us", &q.to_string())?;
                }
            }
            (Controller::Cpu, true) => {
                if let Some(s) = cfg.cpu_shares {
                    write(&dir, "cpu.weight", &shares_to_weight(s).to_string())?;
                }
                if let Some(q) = cfg.cpu_quota.filter(|q| *q != 0) {
                    let quota = if q < 0 {
                        "max".to_string()
                    } else {
                        q.to_string()
                    };
                    let period = cfg.cpu_period.unwrap_or(100_000);
                    write(&dir, "cpu.max", &format!("{quota} {period}"))?;
                }
            }
            (Controller::Memory, v2) => {
                if let Some(m) = cfg.memory.filter(|m| *m != 0) {
                    let file = if v2 {
                        "memory.max"
                    } else {
                        "memory.limit_in_bytes"
                    };
                    write(&dir, file, &m.to_string())?;
                }
            }
            (Controller::Pids, _) => {}
        }
    }
    Ok(())
}

/// The parent of every podgrace's cgroup root.
pub const PROCESS_ROOT_PARENT: &str = "/podgrace";

/// The process runtime's cgroup root: its pods are `/podgrace/<PID>` + the kubelet's pod
/// cgroup (`/podgrace/4242/kubepods/burstable/pod<UID>`), as a kubelet with
/// `--cgroup-root=/podgrace/<PID>` puts them: a real kubelet's `/kubepods` on the same machine
/// is never touched, and each podgrace (each node) has its pods under a cgroup of its own,
/// whose memory use is the node's (`memory.available`) whatever other podgraces run.
pub fn process_root() -> String {
    format!("{PROCESS_ROOT_PARENT}/{}", std::process::id())
}

/// A cgroup podgrace created, in the memory, cpu and pids hierarchies this machine has
/// ([`controller_mounts`]); removed by [`OwnedCgroup::remove`].
#[derive(Debug, Clone)]
pub struct OwnedCgroup {
    path: String,
    dirs: Vec<(Controller, Mount, PathBuf)>,
}

impl OwnedCgroup {
    /// Creates `path` (`/podgrace/kubepods/besteffort/pod<UID>/<id>`) and its parents in every
    /// controller's hierarchy; on v2 the controllers are enabled in each parent's
    /// `cgroup.subtree_control` first.
    ///
    /// # Errors
    /// The first directory or file that cannot be made, with its path.
    pub fn create(path: &str) -> Result<OwnedCgroup, (PathBuf, std::io::Error)> {
        let mounts = controller_mounts();
        let v2_controllers: Vec<&str> = mounts
            .iter()
            .filter(|(_, m)| m.v2)
            .map(|(c, _)| c.name())
            .collect();
        let mut dirs = Vec::new();
        for (c, m) in mounts {
            let dir = m.path.join(relative(path));
            if m.v2 {
                // Every level from the root down to the parent hands the controllers on.
                let control: String = v2_controllers.iter().map(|c| format!("+{c} ")).collect();
                let mut level = m.path.clone();
                for part in relative(path).iter() {
                    std::fs::create_dir_all(&level).map_err(|e| (level.clone(), e))?;
                    let f = level.join("cgroup.subtree_control");
                    let _ = std::fs::write(&f, control.trim_end());
                    level = level.join(part);
                }
            }
            // Another pod's removal may take an empty parent away between two mkdirs.
            let mut made = std::fs::create_dir_all(&dir);
            for _ in 0..3 {
                match &made {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        made = std::fs::create_dir_all(&dir);
                    }
                    _ => break,
                }
            }
            made.map_err(|e| (dir.clone(), e))?;
            dirs.push((c, m, dir));
        }
        Ok(OwnedCgroup {
            path: path.to_string(),
            dirs,
        })
    }

    /// The cgroup's path below each hierarchy's root.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Its directory in `controller`'s hierarchy, when the machine has that controller.
    pub fn dir(&self, controller: Controller) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|(c, _, _)| *c == controller)
            .map(|(_, _, d)| d.as_path())
    }

    /// The `cgroup.procs` files a process writes `0` to to join the cgroup (one per hierarchy).
    pub fn procs_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self
            .dirs
            .iter()
            .map(|(_, _, d)| d.join("cgroup.procs"))
            .collect();
        v.dedup();
        v
    }

    /// The pod's limits ([`apply_pod_config`]).
    ///
    /// # Errors
    /// The first file that cannot be written, with its path.
    pub fn apply_pod(
        &self,
        cfg: &podgrace_core::rules::resources::ResourceConfig,
    ) -> Result<(), (PathBuf, std::io::Error)> {
        apply_pod_config(&self.path, cfg)
    }

    /// A container's CRI resources, as runc writes them: v1 `cpu.shares`, `cpu.cfs_period_us`,
    /// `cpu.cfs_quota_us`, `memory.limit_in_bytes` then `memory.memsw.limit_in_bytes`; v2
    /// `cpu.weight`, `cpu.max`, `memory.max` and the `unified` files (`memory.oom.group`,
    /// `memory.swap.max`). Zero fields are left alone (CRI's unset).
    ///
    /// # Errors
    /// The first file that cannot be written, with its path.
    pub fn apply_container(
        &self,
        r: &podgrace_core::rules::resources::LinuxContainerResources,
    ) -> Result<(), (PathBuf, std::io::Error)> {
        for (c, m, dir) in &self.dirs {
            match (c, m.v2) {
                (Controller::Cpu, false) => {
                    if r.cpu_shares != 0 {
                        write(dir, "cpu.shares", &r.cpu_shares.to_string())?;
                    }
                    if r.cpu_period != 0 {
                        write(dir, "cpu.cfs_period_us", &r.cpu_period.to_string())?;
                    }
                    if r.cpu_quota != 0 {
                        write(dir, "cpu.cfs_quota_us", &r.cpu_quota.to_string())?;
                    }
                }
                (Controller::Cpu, true) => {
                    if r.cpu_shares != 0 {
                        let w = shares_to_weight(r.cpu_shares as u64);
                        write(dir, "cpu.weight", &w.to_string())?;
                    }
                    if r.cpu_quota != 0 {
                        let q = if r.cpu_quota < 0 {
                            "max".into()
                        } else {
                            r.cpu_quota.to_string()
                        };
                        let p = if r.cpu_period != 0 {
                            r.cpu_period
                        } else {
                            100_000
                        };
                        write(dir, "cpu.max", &format!("{q} {p}"))?;
                    }
                }
                (Controller::Memory, false) => {
                    if r.memory_limit_in_bytes != 0 {
                        let l = r.memory_limit_in_bytes.to_string();
                        write(dir, "memory.limit_in_bytes", &l)?;
                    }
                    if r.memory_swap_limit_in_bytes != 0 {
                        let l = r.memory_swap_limit_in_bytes.to_string();
                        write(dir, "memory.memsw.limit_in_bytes", &l)?;
                    }
                }
                (Controller::Memory, true) => {
                    if r.memory_limit_in_bytes != 0 {
                        write(dir, "memory.max", &r.memory_limit_in_bytes.to_string())?;
                    }
                    for (k, v) in r.unified.iter().filter(|(k, _)| k.starts_with("memory.")) {
                        write(dir, k, v)?;
                    }
                }
                (Controller::Pids, _) => {}
            }
        }
        Ok(())
    }

    /// How many processes the kernel's OOM killer killed in this cgroup: `oom_kill` of v1's
    /// `memory.oom_control` (Linux 4.13+) or v2's `memory.events`. 0 without a memory
    /// controller.
    pub fn oom_kills(&self) -> u64 {
        let Some((_, m, dir)) = self.dirs.iter().find(|(c, _, _)| *c == Controller::Memory) else {
            return 0;
        };
        let file = if m.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("oom_kill "))
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// Removes the cgroup (and empty cgroups beneath it) and each parent nobody else uses
    /// ([`remove`]); `true` once it is gone from every hierarchy (a cgroup whose last process
    /// is still exiting stays: call again).
    pub fn remove(&self) -> bool {
        remove(&self.path);
        self.dirs.iter().all(|(_, _, d)| !d.exists())
    }
}
