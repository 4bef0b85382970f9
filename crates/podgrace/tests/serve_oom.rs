//! An OOM kill as `kubectl get pod` shows it through `podgrace serve`, on both runtimes: a
//! container allocating beyond its 32Mi limit is killed by the kernel, restarted under
//! `restartPolicy: OnFailure`, and its status holds `lastState.terminated` with reason
//! `OOMKilled` and exit code 137, as the kubelet reports it. The pod's cgroups are gone once
//! the pod is deleted. Needs root (cgroups); the containerd run needs `.ci/containerd.sh start`.

mod common;

use std::time::{Duration, Instant};

use common::containerd_support;
use common::serve::Serve;

/// Applies the OOM pod, waits for `lastState.terminated.reason: OOMKilled` and checks what
/// the kubelet reports with it; deletes the pod and checks its cgroup `parent` (below the
/// memory hierarchy's root) is gone.
fn oom_through_serve(s: &Serve, image_and_command: &str, cgroup_root: &str) {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: hog}}\nspec:\n  restartPolicy: OnFailure\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: hog\n{image_and_command}    resources: {{limits: {{memory: 32Mi}}}}\n"
    );
    let file = s.dir.join("hog.yaml");
    std::fs::write(&file, yaml).unwrap();
    s.ok(&["apply", "-f", file.to_str().unwrap()]);
    let t0 = Instant::now();
    let status = loop {
        let o = s.kubectl(&["get", "pod", "hog", "-o", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        let cs = v["status"]["containerStatuses"][0].clone();
        if cs["lastState"]["terminated"]["reason"] == "OOMKilled" {
            break v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no OOMKilled lastState: {cs}\nserve: {}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let cs = &status["status"]["containerStatuses"][0];
    let last = &cs["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 137, "{cs}");
    assert!(cs["restartCount"].as_i64() >= Some(1), "{cs}");
    assert_eq!(status["status"]["qosClass"], "Burstable", "{status}");
    let uid = status["metadata"]["uid"].as_str().unwrap().to_string();
    // No kill by the kubelet: no Killing event for the OOM kills.
    let killing = s.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Killing,involvedObject.name=hog",
        "-o",
        "name",
    ]);
    assert_eq!(killing.trim(), "", "the kubelet killed nothing");
    s.ok(&["delete", "pod", "hog", "--wait=true", "--timeout=60s"]);
    let memory = podgrace_node::runtime::cgroup::controller_mounts()
        .into_iter()
        .find(|(c, _)| *c == podgrace_node::runtime::cgroup::Controller::Memory)
        .map(|(_, m)| m.path)
        .expect("a memory hierarchy");
    let pod_cgroup = memory.join(format!("{cgroup_root}kubepods/burstable/pod{uid}"));
    let t0 = Instant::now();
    while pod_cgroup.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!pod_cgroup.exists(), "{} removed", pod_cgroup.display());
}

#[test]
fn serve_reports_an_oom_kill_as_the_kubelet_on_the_process_runtime() {
    if !common::privileged("serve_reports_an_oom_kill_as_the_kubelet_on_the_process_runtime") {
        return;
    }
    let s = Serve::start("oom-process", &["--runtime", "process"]);
    oom_through_serve(
        &s,
        "    image: demo\n    command: [python3, -c, \"import time; x = b'x' * (64 << 20); time.sleep(60)\"]\n",
        &format!("podgrace/{}/", s.pid()),
    );
}

#[test]
fn serve_reports_an_oom_kill_as_the_kubelet_on_containerd() {
    let Some(sock) =
        containerd_support::socket("serve_reports_an_oom_kill_as_the_kubelet_on_containerd")
    else {
        return;
    };
    let runtime = format!("containerd:{}", sock.display());
    let s = Serve::start("oom-containerd", &["--runtime", &runtime]);
    oom_through_serve(
        &s,
        &format!(
            "    image: {}\n    command: [sh, -c, 'a=xxxxxxxxxxxxxxxx; while true; do a=\"$a$a\"; done']\n",
            containerd_support::BUSYBOX
        ),
        "",
    );
}
