//! `podgrace drill --runtime containerd` as a user runs it: the demo (no FILE) on a real
//! containerd (`.ci/containerd.sh start`; CI runs it), its app image built from podgrace's own
//! binary by the drill, the pods on containerd's CNI bridge behind the drill's kube-proxy (the
//! kernel's DNAT and conntrack).

mod common;

use common::containerd_support::{containers, socket};

/// The demo pods' containers and sandboxes containerd still holds.
fn demo_containers(sock: &std::path::Path) -> usize {
    containers(sock, "labels.\"io.kubernetes.pod.name\"~=^demo-").len()
}

/// The demo's three runs on containerd, through kube-proxy on the kernel's netfilter to the
/// pods' CNI addresses, with per-pod endpoint lags of 0.71, 2.93 and 4.70 s (seed 1): without a
/// preStop the rollout loses requests; the fixed 3 s sleep loses them on the pod whose lag is
/// longer than the sleep; `podgrace prestop-wait` (run inside the image, as the exec hook) loses
/// none (the drill exits 0); nothing of the pods is left behind.
#[test]
fn the_demo_drill_on_containerd_loses_requests_without_the_fix_and_none_with_it() {
    let Some(sock) = socket("the_demo_drill_on_containerd") else {
        return;
    };
    let runtime = format!("containerd:{}", sock.display());
    let out = common::podgrace(&["drill", "--runtime", &runtime, "--duration", "5s"]);
    let text = common::stdout(&out);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    assert!(
        text.contains("through kube-proxy on the kernel's netfilter"),
        "{text}"
    );
    let failed: Vec<u64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("requests "))
        .filter_map(|l| l.split("failed ").nth(1))
        .filter_map(|l| l.split([' ', ',']).next()?.parse().ok())
        .collect();
    assert_eq!(failed.len(), 3, "{text}");
    assert!(failed[0] > 0, "the unfixed rollout loses requests: {text}");
    assert!(
        failed[1] > 0,
        "a fixed sleep shorter than the longest lag loses requests: {text}"
    );
    assert_eq!(failed[2], 0, "prestop-wait loses none: {text}");
    assert_eq!(demo_containers(&sock), 0, "nothing left behind");
}

/// A drill whose pods cannot start (their image cannot be pulled) says why, exits 2 at once
/// (not after the 30 s readiness window), and leaves no sandbox behind (containerd holds no
/// container of its pods): the pods it made are deleted and their sandboxes removed first.
#[test]
fn a_drill_whose_image_cannot_be_pulled_fails_at_once_and_leaves_nothing() {
    let Some(sock) = socket("a_drill_whose_image_cannot_be_pulled") else {
        return;
    };
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nopull}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: nopull}}\n  template:\n    metadata: {labels: {app: nopull}}\n    spec:\n      containers:\n      - name: app\n        image: 127.0.0.1:1/podgrace/nopull:1\n        ports: [{containerPort: 8080}]\n";
    let file = common::tmp_file("drill-nopull", "nopull.yaml", yaml);
    let runtime = format!("containerd:{}", sock.display());
    let t0 = std::time::Instant::now();
    let out = common::podgrace(&["drill", file.to_str().unwrap(), "--runtime", &runtime]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(20), "{err}");
    assert!(
        err.contains("error: pod nopull-1: container app could not start: Failed to pull image \"127.0.0.1:1/podgrace/nopull:1\": rpc error: code = "),
        "{err}"
    );
    let left = containers(&sock, "labels.\"io.kubernetes.pod.name\"~=^nopull-");
    assert!(left.is_empty(), "left behind: {left:?}");
}
