//! Local images for containerd without a registry: a one-layer OCI image archive made from
//! host files (an executable and the shared libraries it loads), imported into containerd's
//! `k8s.io` namespace with `ctr images import`, as a user would `ctr import` a `docker save`.
//!
//! `drill --runtime containerd` runs its built-in demo app this way: podgrace's own binary is
//! the image, so the demo needs no registry and no image of anyone else's.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors of image building and import.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A file of the image could not be read, or the archive written.
    #[error("{what}: {source}")]
    Io {
        /// The step and its path.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `ldd` did not list the executable's libraries.
    #[error("cannot list the shared libraries of {exe} with ldd: {reason}")]
    Ldd {
        /// The executable.
        exe: PathBuf,
        /// `ldd`'s error or output.
        reason: String,
    },
    /// `ctr images import` failed.
    #[error("ctr images import {reference}: {reason}")]
    Import {
        /// The image reference imported.
        reference: String,
        /// `ctr`'s error or output.
        reason: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ImageError {
    let what = what.into();
    move |source| ImageError::Io { what, source }
}

/// The sha256 of `bytes`, in lowercase hex (an OCI digest without its `sha256:`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The files an executable needs: itself and what `ldd` says it loads (absolute paths).
///
/// # Errors
/// [`ImageError::Ldd`] when `ldd` cannot run or fails (a static executable needs none: `ldd`
/// says "not a dynamic executable", which gives no libraries).
pub fn executable_files(exe: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let out = Command::new("ldd")
        .arg(exe)
        .output()
        .map_err(|e| ImageError::Ldd {
            exe: exe.into(),
            reason: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut files = vec![exe.to_path_buf()];
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if text.contains("not a dynamic executable") || err.contains("not a dynamic executable") {
            return Ok(files);
        }
        return Err(ImageError::Ldd {
            exe: exe.into(),
            reason: err.trim().to_string(),
        });
    }
    for line in text.lines() {
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux... (0x...)"
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            files.push(PathBuf::from(p));
        }
    }
    Ok(files)
}

/// Writes a one-layer OCI image archive (`oci-layout`, `index.json`, `blobs/sha256/...`) to
/// `out`: each host file of `files` at `in_image` (the same path when `None`), with its mode,
/// owner root; the image config's `config` object is `config` (Entrypoint, Env, StopSignal);
/// the index names it `reference` (`io.containerd.image.name`).
///
/// # Errors
/// [`ImageError::Io`] when a file cannot be read or the archive written.
pub fn write_archive(
    reference: &str,
    files: &[(PathBuf, PathBuf)],
    config: &serde_json::Value,
    out: &Path,
) -> Result<(), ImageError> {
    let mut layer = tar::Builder::new(Vec::new());
    layer.mode(tar::HeaderMode::Deterministic);
    let mut dirs = std::collections::BTreeSet::new();
    for (_, dst) in files {
        let mut d = dst.parent();
        while let Some(p) = d.filter(|p| !p.as_os_str().is_empty() && *p != Path::new("/")) {
            dirs.insert(p.to_path_buf());
            d = p.parent();
        }
    }
    for d in &dirs {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        let name = d.strip_prefix("/").unwrap_or(d);
        layer
            .append_data(&mut h, name, std::io::empty())
            .map_err(io("write the image layer"))?;
    }
    for (src, dst) in files {
        let data = std::fs::read(src).map_err(io(format!("read {}", src.display())))?;
        let mode = std::fs::metadata(src)
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()))
            .unwrap_or(0o755);
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(mode & 0o7777);
        h.set_size(data.len() as u64);
        let name = dst.strip_prefix("/").unwrap_or(dst);
        layer
            .append_data(&mut h, name, data.as_slice())
            .map_err(io("write the image layer"))?;
    }
    let layer = layer.into_inner().map_err(io("write the image layer"))?;
    let layer_sha = sha256_hex(&layer);
    let cfg = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_sha}")]},
    })
    .to_string();
    let cfg_sha = sha256_hex(cfg.as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{cfg_sha}"), "size": cfg.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": format!("sha256:{layer_sha}"), "size": layer.len()}],
    })
    .to_string();
    let man_sha = sha256_hex(manifest.as_bytes());
    let tag = reference.rsplit_once(':').map_or("latest", |(_, t)| t);
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{man_sha}"),
            "size": manifest.len(),
            "annotations": {"io.containerd.image.name": reference, "org.opencontainers.image.ref.name": tag},
        }],
    })
    .to_string();
    let file = std::fs::File::create(out).map_err(io(format!("create {}", out.display())))?;
    let mut archive = tar::Builder::new(file);
    archive.mode(tar::HeaderMode::Deterministic);
    let mut add = |name: String, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        archive
            .append_data(&mut h, name, data)
            .map_err(io(format!("write {}", out.display())))
    };
    add("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    add("index.json".into(), index.as_bytes())?;
    add(format!("blobs/sha256/{layer_sha}"), &layer)?;
    add(format!("blobs/sha256/{cfg_sha}"), cfg.as_bytes())?;
    add(format!("blobs/sha256/{man_sha}"), manifest.as_bytes())?;
    archive
        .into_inner()
        .map_err(io(format!("write {}", out.display())))?;
    Ok(())
}

/// Imports the archive at `archive` into the containerd at `socket` (namespace `k8s.io`).
///
/// # Errors
/// [`ImageError::Import`] when `ctr` is missing or fails.
pub fn import(socket: &Path, reference: &str, archive: &Path) -> Result<(), ImageError> {
    let out = Command::new("ctr")
        .arg("-a")
        .arg(socket)
        .args(["-n", "k8s.io", "images", "import"])
        .arg(archive)
        .output()
        .map_err(|e| ImageError::Import {
            reference: reference.into(),
            reason: format!("cannot run ctr (containerd's client): {e}"),
        })?;
    if !out.status.success() {
        return Err(ImageError::Import {
            reference: reference.into(),
            reason: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Makes `reference` an image of the executable `exe` (at `/<file name>` in the image, its
/// libraries at their host paths) and imports it into the containerd at `socket`. The
/// archive is written to a temporary file, removed afterwards.
///
/// # Errors
/// As [`executable_files`], [`write_archive`] and [`import`].
pub fn import_executable(socket: &Path, exe: &Path, reference: &str) -> Result<(), ImageError> {
    let name = exe
        .file_name()
        .map_or_else(|| PathBuf::from("/app"), |n| Path::new("/").join(n));
    let mut files: Vec<(PathBuf, PathBuf)> = vec![(exe.to_path_buf(), name.clone())];
    for lib in executable_files(exe)?.into_iter().skip(1) {
        files.push((lib.clone(), lib));
    }
    let out = std::env::temp_dir().join(format!("podgrace-image-{}.tar", std::process::id()));
    let config = serde_json::json!({
        "Entrypoint": [name.display().to_string()],
        "Env": ["PATH=/"],
    });
    let r = write_archive(reference, &files, &config, &out)
        .and_then(|()| import(socket, reference, &out));
    let _ = std::fs::remove_file(&out);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_hold_the_layout_and_blobs_named_by_their_digests() {
        let dir = std::env::temp_dir().join(format!("podgrace-oci-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("hello");
        std::fs::write(&src, b"#!/bin/sh\necho hi\n").unwrap();
        let out = dir.join("img.tar");
        write_archive(
            "podgrace.test/hello:1",
            &[(src, PathBuf::from("/bin/hello"))],
            &serde_json::json!({"Entrypoint": ["/bin/hello"]}),
            &out,
        )
        .unwrap();
        let mut names = Vec::new();
        let mut ok = true;
        let mut a = tar::Archive::new(std::fs::File::open(&out).unwrap());
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let name = e.path().unwrap().display().to_string();
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut data).unwrap();
            if let Some(d) = name.strip_prefix("blobs/sha256/") {
                ok &= sha256_hex(&data) == d;
            }
            if name == "index.json" {
                let v: serde_json::Value = serde_json::from_slice(&data).unwrap();
                assert_eq!(
                    v["manifests"][0]["annotations"]["io.containerd.image.name"],
                    "podgrace.test/hello:1"
                );
            }
            names.push(name);
        }
        assert!(ok, "every blob is named by its sha256");
        assert_eq!(names[..2], ["oci-layout", "index.json"]);
        assert_eq!(names.len(), 5);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_dynamic_executable_brings_its_loader() {
        let files = executable_files(Path::new("/bin/sh")).unwrap();
        assert_eq!(files[0], PathBuf::from("/bin/sh"));
        assert!(
            files
                .iter()
                .any(|f| f.to_string_lossy().contains("ld-linux")),
            "{files:?}"
        );
    }
}
