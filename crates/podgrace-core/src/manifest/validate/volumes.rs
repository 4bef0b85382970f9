//! `ValidateVolumes`: each volume's name (a DNS-1123 label, unique) and exactly one source,
//! with the checks of the sources podgrace's kubelet provides (`emptyDir`, `hostPath`,
//! `configMap`, `secret`). Other sources are counted (`may not specify more than 1 volume
//! type`) but their fields are not checked: the kubelet of `podgrace run` refuses them when a
//! container mounts one.
//!
//! Upstream: `pkg/apis/core/validation/validation.go` (1.36 tree): `ValidateVolumes`,
//! `validateVolumeSource`, `validateHostPathVolumeSource`, `validateHostPathType`,
//! `validatePathNoBacksteps`, `validateSecretVolumeSource`, `validateConfigMapVolumeSource`,
//! `validateKeyToPath`, `ValidateLocalNonReservedPath`. A relative `hostPath.path` is
//! accepted there, as here.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{KeyToPath, Volume};

use super::containers::{local_descending_path, no_backsteps};
use super::{with, Checker, FieldErrorKind, Seg};
use crate::manifest::excerpt::quote;
use crate::rules::quantity::{canonical, Quantity};
use crate::rules::validation::format;

/// `fileModeErrorMsg`.
const FILE_MODE: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// `supportedHostPathTypes`, sorted as `sets.List` sorts them (the unset type first).
const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

/// The sources of a volume in `validateVolumeSource`'s order: the JSON key, and the name
/// upstream puts in the path of `may not specify more than 1 volume type` (its own spelling:
/// `cephFS`, `downwarAPI`).
fn sources(v: &Volume) -> [(bool, &'static str, &'static str); 30] {
    [
        (v.empty_dir.is_some(), "emptyDir", "emptyDir"),
        (v.host_path.is_some(), "hostPath", "hostPath"),
        (v.git_repo.is_some(), "gitRepo", "gitRepo"),
        (
            v.gce_persistent_disk.is_some(),
            "gcePersistentDisk",
            "gcePersistentDisk",
        ),
        (
            v.aws_elastic_block_store.is_some(),
            "awsElasticBlockStore",
            "awsElasticBlockStore",
        ),
        (v.secret.is_some(), "secret", "secret"),
        (v.nfs.is_some(), "nfs", "nfs"),
        (v.iscsi.is_some(), "iscsi", "iscsi"),
        (v.glusterfs.is_some(), "glusterfs", "glusterfs"),
        (v.flocker.is_some(), "flocker", "flocker"),
        (
            v.persistent_volume_claim.is_some(),
            "persistentVolumeClaim",
            "persistentVolumeClaim",
        ),
        (v.rbd.is_some(), "rbd", "rbd"),
        (v.cinder.is_some(), "cinder", "cinder"),
        (v.cephfs.is_some(), "cephfs", "cephFS"),
        (v.quobyte.is_some(), "quobyte", "quobyte"),
        (v.downward_api.is_some(), "downwardAPI", "downwarAPI"),
        (v.fc.is_some(), "fc", "fc"),
        (v.flex_volume.is_some(), "flexVolume", "flexVolume"),
        (v.config_map.is_some(), "configMap", "configMap"),
        (v.azure_file.is_some(), "azureFile", "azureFile"),
        (v.vsphere_volume.is_some(), "vsphereVolume", "vsphereVolume"),
        (
            v.photon_persistent_disk.is_some(),
            "photonPersistentDisk",
            "photonPersistentDisk",
        ),
        (
            v.portworx_volume.is_some(),
            "portworxVolume",
            "portworxVolume",
        ),
        (v.azure_disk.is_some(), "azureDisk", "azureDisk"),
        (v.storageos.is_some(), "storageos", "storageos"),
        (v.projected.is_some(), "projected", "projected"),
        (v.scale_io.is_some(), "scaleIO", "scaleIO"),
        (v.csi.is_some(), "csi", "csi"),
        (v.ephemeral.is_some(), "ephemeral", "ephemeral"),
        (v.image.is_some(), "image", "image"),
    ]
}

/// Checks `spec.volumes`; returns the names of the volumes without errors (those that mounts
/// may name), with `claim_volumes` (a StatefulSet's claim templates, which replace volumes of
/// the same name).
pub(super) fn volumes(
    c: &mut Checker<'_, '_, '_>,
    vols: &[Volume],
    claim_volumes: &[String],
) -> HashSet<String> {
    let mut valid: HashSet<String> = claim_volumes.iter().cloned().collect();
    for (i, v) in vols.iter().enumerate() {
        if claim_volumes.contains(&v.name) {
            continue;
        }
        let base = [Seg::Key("volumes"), Seg::Index(i)];
        let before = c.errors.len();
        source(c, v, &base);
        let name = with(&base, &[Seg::Key("name")]);
        if v.name.is_empty() {
            c.required(&name, "");
        } else {
            c.invalid_each(&name, &v.name, format::is_dns1123_label(&v.name));
        }
        if valid.contains(&v.name) {
            c.push(
                &name,
                FieldErrorKind::Duplicate {
                    value: quote(&v.name),
                },
            );
        }
        if c.errors.len() == before {
            valid.insert(v.name.clone());
        }
    }
    valid
}

/// `validateVolumeSource`: exactly one source, then the source's own checks.
fn source(c: &mut Checker<'_, '_, '_>, v: &Volume, base: &[Seg<'_>]) {
    let mut n = 0;
    for (set, key, upstream) in sources(v) {
        if !set {
            continue;
        }
        if n > 0 {
            c.push_as(
                &with(base, &[Seg::Key(key)]),
                &with(base, &[Seg::Key(upstream)]),
                FieldErrorKind::Forbidden {
                    detail: "may not specify more than 1 volume type".into(),
                },
            );
            continue;
        }
        n += 1;
        let at = with(base, &[Seg::Key(key)]);
        if let Some(e) = v.empty_dir.as_ref().filter(|_| key == "emptyDir") {
            if let Some(q) = &e.size_limit {
                let limit = with(&at, &[Seg::Key("sizeLimit")]);
                match (Quantity::parse(&q.0), canonical(&q.0)) {
                    (Ok(v), Ok(_)) if v.is_negative() => {
                        c.forbidden(&limit, "SizeLimit field must be a valid resource quantity")
                    }
                    (Err(e), _) | (_, Err(e)) => c.invalid(&limit, quote(&q.0), e.to_string()),
                    _ => {}
                }
            }
        }
        if let Some(h) = v.host_path.as_ref().filter(|_| key == "hostPath") {
            let path = with(&at, &[Seg::Key("path")]);
            if h.path.is_empty() {
                c.required(&path, "");
            } else {
                no_backsteps(c, &h.path, &path, &path);
                if let Some(t) = &h.type_ {
                    if !HOST_PATH_TYPES.contains(&t.as_str()) {
                        c.not_supported(&with(&at, &[Seg::Key("type")]), t, HOST_PATH_TYPES);
                    }
                }
            }
        }
        let data = match key {
            "configMap" => v.config_map.as_ref().map(|m| {
                (
                    Some(m.name.as_str()),
                    "name",
                    m.default_mode,
                    m.items.as_deref(),
                )
            }),
            "secret" => v.secret.as_ref().map(|s| {
                (
                    s.secret_name.as_deref(),
                    "secretName",
                    s.default_mode,
                    s.items.as_deref(),
                )
            }),
            _ => None,
        };
        if let Some((name, name_key, mode, items)) = data {
            if name.unwrap_or("").is_empty() {
                c.required(&with(&at, &[Seg::Key(name_key)]), "");
            }
            if let Some(m) = mode.filter(|m| !(0..=0o777).contains(m)) {
                c.invalid(
                    &with(&at, &[Seg::Key("defaultMode")]),
                    m.to_string(),
                    FILE_MODE,
                );
            }
            for (j, item) in items.unwrap_or_default().iter().enumerate() {
                key_to_path(c, item, &with(&at, &[Seg::Key("items"), Seg::Index(j)]));
            }
        }
    }
    if n == 0 {
        c.required(base, "must specify a volume type");
    }
}

/// `validateKeyToPath`: a key and a relative path inside the volume
/// (`ValidateLocalNonReservedPath`: no `..` element, not starting with `..`), a file mode in
/// 0..=0777.
fn key_to_path(c: &mut Checker<'_, '_, '_>, kp: &KeyToPath, at: &[Seg<'_>]) {
    if kp.key.is_empty() {
        c.required(&with(at, &[Seg::Key("key")]), "");
    }
    let path = with(at, &[Seg::Key("path")]);
    if kp.path.is_empty() {
        c.required(&path, "");
    }
    local_descending_path(c, &kp.path, &path, &path);
    if kp.path.starts_with("..") && !kp.path.starts_with("../") {
        c.invalid(&path, quote(&kp.path), "must not start with '..'");
    }
    if let Some(m) = kp.mode.filter(|m| !(0..=0o777).contains(m)) {
        c.invalid(&with(at, &[Seg::Key("mode")]), m.to_string(), FILE_MODE);
    }
}
