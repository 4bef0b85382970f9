//! The pod's volumes as the kubelet's volume manager provides them to a runtime with images,
//! and each container's mounts of them (`makeMounts`): the CRI `Mount`s of its container
//! config.
//!
//! * `emptyDir`: a directory of the pod's (`<root>/<UID>/volumes/kubernetes.io~empty-dir/NAME`,
//!   mode 0777 as the kubelet's on-disk emptyDir), removed with the pod;
//! * `hostPath`: the host's path, after the kubelet's `hostPath.type` checks
//!   (`DirectoryOrCreate` makes a 0755 directory, `FileOrCreate` an empty 0644 file; `Directory`,
//!   `File`, `Socket`, `CharDevice`, `BlockDevice` must already be one), with its messages;
//! * `configMap` and `secret`: the object's keys (or only `items`, key to path) as files with
//!   `defaultMode` (0644 when unset), in a directory of the pod's
//!   (`kubernetes.io~configmap/NAME`, `kubernetes.io~secret/NAME`); the kubelet's atomic writer
//!   (`..data` symlinks for live updates) is not reproduced: the files are written once;
//! * `volumeMounts`: `readOnly` is the mount's; `subPath` mounts a path inside the volume (made
//!   as a directory when missing, as the kubelet does), which must be relative and must not
//!   climb out of it (`..`).
//!
//! Upstream: `pkg/volume/emptydir/empty_dir.go`, `pkg/volume/hostpath/host_path.go`
//! (`checkType`, `hostPathTypeChecker`), `pkg/volume/configmap/configmap.go`,
//! `pkg/volume/secret/secret.go`, `pkg/volume/util/atomic_writer.go`,
//! `pkg/kubelet/kubelet_pods.go` (`makeMounts`, subPath), Kubernetes 1.18 to 1.36.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use podgrace_core::plan::{ContainerPlan, PodPlan, VolumeSource};

use crate::runtime::Mount;

/// Why a volume or a mount could not be provided (the kubelet's `FailedMount` /
/// `CreateContainerConfigError` wording where it has one).
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A volume could not be set up (the `FailedMount` event's `MountVolume.SetUp failed`).
    #[error("MountVolume.SetUp failed for volume {volume:?} : {message}")]
    SetUp {
        /// The volume's name in `spec.volumes`.
        volume: String,
        /// The volume plugin's message (`configmap "x" not found` ...).
        message: String,
    },
    /// A host directory or file of a volume could not be made or written.
    #[error("{path}: {source}")]
    Io {
        /// The host path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A `volumeMounts` entry names no volume of the pod.
    #[error("unable to find volume {volume:?} for container {container:?}")]
    NoVolume {
        /// The container's name.
        container: String,
        /// The volume name the mount gives.
        volume: String,
    },
    /// A volume kind podgrace's kubelet does not provide.
    #[error("volume {volume:?}: podgrace's kubelet does not provide {kind} volumes (emptyDir, hostPath, configMap and secret only)")]
    Unsupported {
        /// The volume's name.
        volume: String,
        /// Its kind (`persistentVolumeClaim`, `projected` ...).
        kind: String,
    },
    /// A `subPath` that is absolute or leaves the volume (`..`).
    #[error("invalid subPath {sub_path:?} of volume {volume:?}: it must be a relative path within the volume")]
    SubPath {
        /// The volume's name.
        volume: String,
        /// The `subPath` as given.
        sub_path: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> VolumeError + '_ {
    move |source| VolumeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The volumes of one pod, set up; removed by [`PodVolumes::remove`].
#[derive(Debug)]
pub struct PodVolumes {
    /// `<root>/<UID>`.
    dir: PathBuf,
    /// Volume name → its host path, or the reason it cannot be mounted.
    paths: BTreeMap<String, Result<PathBuf, String>>,
}

/// The `hostPath.type` checks (`checkType`), creating what the `...OrCreate` types create.
fn check_host_path(volume: &str, path: &Path, kind: Option<&str>) -> Result<(), VolumeError> {
    let set_up = |message: String| VolumeError::SetUp {
        volume: volume.to_string(),
        message,
    };
    let meta = std::fs::metadata(path);
    let p = path.display();
    match kind.unwrap_or("") {
        "" => Ok(()),
        "DirectoryOrCreate" => match meta {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(set_up(format!(
                "hostPath type check failed: {p} is not a directory"
            ))),
            Err(_) => {
                std::fs::create_dir_all(path).map_err(io(path))?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
                    .map_err(io(path))
            }
        },
        "FileOrCreate" => match meta {
            Ok(m) if m.is_file() => Ok(()),
            Ok(_) => Err(set_up(format!(
                "hostPath type check failed: {p} is not a file"
            ))),
            Err(_) => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                }
                std::fs::File::create(path).map_err(io(path))?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
                    .map_err(io(path))
            }
        },
        t => {
            let (ok, what) = match (&meta, t) {
                (Ok(m), "Directory") => (m.is_dir(), "a directory"),
                (Ok(m), "File") => (m.is_file(), "a file"),
                (Ok(m), "Socket") => (m.file_type().is_socket(), "a socket file"),
                (Ok(m), "CharDevice") => (m.file_type().is_char_device(), "a character device"),
                (Ok(m), "BlockDevice") => (m.file_type().is_block_device(), "a block device"),
                (Err(_), "Directory" | "File" | "Socket" | "CharDevice" | "BlockDevice") => {
                    return Err(set_up(format!(
                        "hostPath type check failed: {p} is not {}",
                        match t {
                            "Directory" => "a directory",
                            "File" => "a file",
                            "Socket" => "a socket file",
                            "CharDevice" => "a character device",
                            _ => "a block device",
                        }
                    )))
                }
                _ => return Err(set_up(format!("invalid HostPath type {t:?}"))),
            };
            if ok {
                Ok(())
            } else {
                Err(set_up(format!(
                    "hostPath type check failed: {p} is not {what}"
                )))
            }
        }
    }
}

/// Writes the keys of a configMap or secret volume into `dir`.
fn write_data(
    dir: &Path,
    data: &BTreeMap<String, String>,
    items: &[(String, String)],
    mode: u32,
) -> Result<(), VolumeError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let files: Vec<(&str, &str)> = if items.is_empty() {
        data.keys().map(|k| (k.as_str(), k.as_str())).collect()
    } else {
        items
            .iter()
            .map(|(k, p)| (k.as_str(), p.as_str()))
            .collect()
    };
    for (key, rel) in files {
        let Some(value) = data.get(key) else {
            continue;
        };
        let Some(rel) = relative_within(rel) else {
            continue;
        };
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, value).map_err(io(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(io(&path))?;
    }
    Ok(())
}

/// A `mountPath` as the kubelet hands it to the runtime: a relative one is made absolute
/// (`makeMounts`: `volumeutil.MakeAbsolutePath`, `filepath.Clean("/" + path)` on Linux; the
/// API server accepts relative mount paths).
fn absolute_in_container(mount_path: &str) -> PathBuf {
    if mount_path.starts_with('/') {
        return PathBuf::from(mount_path);
    }
    // `filepath.Clean` of `/` + path: `.` and empty elements go, `..` climbs (never above `/`).
    let mut parts: Vec<&str> = Vec::new();
    for part in mount_path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    PathBuf::from(format!("/{}", parts.join("/")))
}

/// `p` when it is relative and stays inside its base (no `..`, not absolute).
fn relative_within(p: &str) -> Option<&Path> {
    let path = Path::new(p);
    path.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        .then_some(path)
}

impl PodVolumes {
    /// Sets up every volume of `plan` under `root/<uid>` (see the module docs). A volume of a
    /// kind podgrace does not provide is an error only for a container that mounts it.
    ///
    /// # Errors
    /// [`VolumeError`] for the first volume that cannot be set up.
    pub fn set_up(root: &Path, plan: &PodPlan, uid: &str) -> Result<PodVolumes, VolumeError> {
        let dir = root.join(uid);
        let mut paths = BTreeMap::new();
        for v in &plan.volumes {
            let plugin = |p: &str| dir.join("volumes").join(p).join(&v.name);
            let path = match &v.source {
                VolumeSource::EmptyDir => {
                    let d = plugin("kubernetes.io~empty-dir");
                    std::fs::create_dir_all(&d).map_err(io(&d))?;
                    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777))
                        .map_err(io(&d))?;
                    Ok(d)
                }
                VolumeSource::HostPath { path, path_type } => {
                    let p = PathBuf::from(path);
                    check_host_path(&v.name, &p, path_type.as_deref())?;
                    Ok(p)
                }
                VolumeSource::Data {
                    kind,
                    items,
                    default_mode,
                    data,
                    ..
                } => {
                    let d = plugin(if *kind == "Secret" {
                        "kubernetes.io~secret"
                    } else {
                        "kubernetes.io~configmap"
                    });
                    // `defaultMode`'s default: 0644 (`ConfigMapVolumeSourceDefaultMode`,
                    // `SecretVolumeSourceDefaultMode`).
                    let mode = default_mode.map_or(0o644, |m| (m as u32) & 0o777);
                    write_data(&d, &data.clone().unwrap_or_default(), items, mode)?;
                    Ok(d)
                }
                VolumeSource::Other { kind } => Err(kind.clone()),
            };
            paths.insert(v.name.clone(), path);
        }
        Ok(PodVolumes { dir, paths })
    }

    /// `makeMounts`: the container's `volumeMounts` as CRI mounts, in order.
    ///
    /// # Errors
    /// [`VolumeError`] for a mount of an unknown or unsupported volume or a bad `subPath`.
    pub fn mounts(&self, c: &ContainerPlan) -> Result<Vec<Mount>, VolumeError> {
        let mut out = Vec::new();
        for m in &c.volume_mounts {
            let base = match self.paths.get(&m.name) {
                None => {
                    return Err(VolumeError::NoVolume {
                        container: c.name.clone(),
                        volume: m.name.clone(),
                    })
                }
                Some(Err(kind)) => {
                    return Err(VolumeError::Unsupported {
                        volume: m.name.clone(),
                        kind: kind.clone(),
                    })
                }
                Some(Ok(p)) => p,
            };
            let host_path = match &m.sub_path {
                None => base.clone(),
                Some(sub) => {
                    let rel = relative_within(sub).ok_or_else(|| VolumeError::SubPath {
                        volume: m.name.clone(),
                        sub_path: sub.clone(),
                    })?;
                    let p = base.join(rel);
                    if !p.exists() {
                        // The kubelet makes a missing subPath a directory (0750 since 1.14).
                        std::fs::create_dir_all(&p).map_err(io(&p))?;
                    }
                    p
                }
            };
            out.push(Mount {
                container_path: absolute_in_container(&m.mount_path),
                host_path,
                readonly: m.read_only,
            });
        }
        Ok(out)
    }

    /// Removes the pod's volume directories (emptyDir contents, configMap and secret files);
    /// hostPath volumes are the host's and stay.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(root) = self.dir.parent() {
            // The root goes with the last pod of this process.
            let _ = std::fs::remove_dir(root);
        }
    }
}

/// Where a podgrace process keeps its pods' volumes: `<tmp>/podgrace-<PID>-volumes`.
pub fn default_root() -> PathBuf {
    root_of(std::process::id())
}

fn root_of(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("podgrace-{pid}-volumes"))
}

/// Removes the volumes that the podgrace with `pid`, gone, set up for the pod `uid` (the
/// kubelet's `cleanupOrphanedPodDirs` after a restart), and that podgrace's volume root once
/// empty.
pub fn remove_orphaned(pid: u32, uid: &str) {
    if uid.is_empty() || relative_within(uid).is_none() {
        return;
    }
    let root = root_of(pid);
    let _ = std::fs::remove_dir_all(root.join(uid));
    let _ = std::fs::remove_dir(root);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_mount_paths_are_made_absolute_as_the_kubelet_does() {
        assert_eq!(absolute_in_container("/data"), PathBuf::from("/data"));
        assert_eq!(absolute_in_container("data"), PathBuf::from("/data"));
        assert_eq!(absolute_in_container("./a//b/"), PathBuf::from("/a/b"));
        assert_eq!(absolute_in_container("../../etc"), PathBuf::from("/etc"));
    }
}
