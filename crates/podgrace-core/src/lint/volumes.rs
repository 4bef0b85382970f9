//! Volume rules: what the API server accepts in `spec.volumes` but no node can provide.

use super::{PodCx, Sink};
use crate::plan::VolumeSource;

pub(super) fn check(cx: &PodCx<'_>, sink: &mut Sink<'_>) {
    for v in &cx.pod.volumes {
        let VolumeSource::HostPath { path, .. } = &v.source else {
            continue;
        };
        if path.starts_with('/') {
            continue;
        }
        sink.push(
            cx,
            "hostpath-relative",
            None,
            cx.pod.field_span("volumes"),
            format!(
                "volume {:?}: hostPath.path {path:?} is relative; the API server accepts it and the kubelet hands it on unchanged, but containerd creates it relative to its own working directory and runc looks for it in the container's bundle, so every container that mounts it fails to start (error mounting \".../<bundle>/{path}\" ...: no such file or directory); give the absolute path on the node",
                v.name
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::lint::testutil::*;

    #[test]
    fn a_relative_host_path_is_reported() {
        let y = deploy("      containers:\n        - name: web\n          image: web\n      volumes:\n        - name: data\n          hostPath: {path: data}\n        - name: abs\n          hostPath: {path: /data}\n");
        let f = run(&y);
        let h = of(&f, "hostpath-relative");
        assert_eq!(h.len(), 1, "{f:?}");
        assert!(
            h[0].message
                .starts_with("volume \"data\": hostPath.path \"data\" is relative"),
            "{}",
            h[0].message
        );
        assert_eq!(h[0].span.path, "spec.template.spec.volumes");
    }
}
