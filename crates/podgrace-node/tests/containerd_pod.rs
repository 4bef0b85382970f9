//! What the kubelet hands containerd for a pod beyond its containers' commands, checked on a
//! real containerd: the pod's cgroup parent for its QoS class, and its volumes. Needs
//! `.ci/containerd.sh start` (CI runs it); see `containerd_support`.

mod containerd_support;
#[path = "containerd_support/pods.rs"]
mod pods;

use std::sync::Arc;
use std::time::Duration;

use containerd_support::{socket, BUSYBOX};
use podgrace_core::manifest;
use podgrace_core::rules::apiserver::KubectlDeleteFlags;
use podgrace_node::events::EventRecorder;
use podgrace_node::kubelet::{run_pod, PodCommand, PodHandle, PodOptions};
use podgrace_node::runtime::{cgroup, CallContext, ContainerdRuntime, RuntimeService};
use pods::{delete, pids_with_env, uid};

/// Starts the pod of `yaml` with `uid` and waits until it runs.
async fn start(rt: &Arc<ContainerdRuntime>, yaml: &str, uid: &str) -> PodHandle {
    let pod = pods::start(rt, yaml, uid);
    pods::running(&pod).await;
    pod
}

/// A Burstable pod (a cpu request, no limits) and a BestEffort one get the cgroup parent the
/// kubelet computes with the cgroupfs driver, `/kubepods/<qos>/pod<UID>`: created before the
/// sandbox, holding the container's own cgroup (runc's `<parent>/<container id>`), removed once
/// the sandbox is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_pods_run_in_the_cgroup_of_their_qos_class() {
    let Some(sock) = socket("containerd_pods_run_in_the_cgroup_of_their_qos_class") else {
        return;
    };
    let rt = pods::runtime(&sock, "pod").await;
    for (qos, resources) in [
        ("burstable", "    resources: {requests: {cpu: 10m}}\n"),
        ("besteffort", ""),
    ] {
        let marker = format!("PODGRACE_CGROUP_{qos}_{}", std::process::id());
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: cg-{qos}}}\nspec:\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, \"1000\"]\n    env: [{{name: {marker}, value: '1'}}]\n{resources}"
        );
        let uid = uid(if qos == "burstable" { "b1" } else { "e1" });
        let parent = format!("/kubepods/{qos}/pod{uid}");
        let pod = start(&rt, &yaml, &uid).await;
        assert!(
            cgroup::exists(&parent),
            "{parent} exists while the pod runs"
        );
        // The pod worker's Running may come just before runc has exec'd the app.
        let t0 = std::time::Instant::now();
        let mut pids = pids_with_env(&format!("{marker}=1"));
        while pids.is_empty() && t0.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            pids = pids_with_env(&format!("{marker}=1"));
        }
        assert_eq!(pids.len(), 1, "{pids:?}");
        let cg = std::fs::read_to_string(format!("/proc/{}/cgroup", pids[0])).unwrap();
        let memory = cg
            .lines()
            .find(|l| {
                l.split(':')
                    .nth(1)
                    .is_some_and(|c| c.split(',').any(|c| c == "memory"))
                    || l.starts_with("0::")
            })
            .and_then(|l| l.splitn(3, ':').nth(2))
            .unwrap_or_default()
            .to_string();
        assert!(
            memory.starts_with(&format!("{parent}/")),
            "the container's cgroup is under the pod's: {cg}"
        );
        delete(&rt, pod).await;
        assert!(
            !cgroup::exists(&parent),
            "{parent} removed with the sandbox"
        );
    }
}

/// Two containers share an emptyDir (what one writes the other reads, through a read-only
/// mount that refuses writes, and a subPath mount that writes into it), and a configMap's keys
/// appear as files (`items` with a nested path, `defaultMode` 0755 making one executable). Each
/// container's readiness probe checks what it must see, so the pod is ready only once every
/// check passes inside the containers. The pod's volume directory is gone after the pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_volumes_emptydir_shared_configmap_files_and_readonly_mounts() {
    let Some(sock) = socket("containerd_volumes_emptydir_shared_configmap_files") else {
        return;
    };
    let rt = pods::runtime(&sock, "pod").await;
    let yaml = format!(
        r#"apiVersion: v1
kind: ConfigMap
metadata: {{name: cfg}}
data:
  greeting: hello
  run: "echo run"
  unused: "not mounted"
---
apiVersion: v1
kind: Pod
metadata: {{name: vols}}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: shared
    emptyDir: {{}}
  - name: cfg
    configMap:
      name: cfg
      defaultMode: 493
      items:
      - {{key: greeting, path: greeting}}
      - {{key: run, path: bin/run.sh}}
  containers:
  - name: writer
    image: {BUSYBOX}
    command: [sh, -c, "echo hi-from-writer > /data/msg; sleep 1000"]
    volumeMounts:
    - {{name: shared, mountPath: /data}}
    - {{name: cfg, mountPath: /etc/cfg}}
    readinessProbe:
      exec: {{command: [sh, -c, 'test "$(cat /etc/cfg/greeting)" = hello && test -x /etc/cfg/bin/run.sh && ! test -e /etc/cfg/unused && test -e /data/sub/from-reader']}}
      periodSeconds: 1
  - name: reader
    image: {BUSYBOX}
    command: [sh, -c, "touch /sub/from-reader; sleep 1000"]
    volumeMounts:
    - {{name: shared, mountPath: /data, readOnly: true}}
    - {{name: shared, mountPath: /sub, subPath: sub}}
    readinessProbe:
      exec: {{command: [sh, -c, 'test "$(cat /data/msg)" = hi-from-writer && ! touch /data/denied']}}
      periodSeconds: 1
"#
    );
    let uid = uid("v1");
    let pod = start(&rt, &yaml, &uid).await;
    let mut st = pod.status();
    let ready = tokio::time::timeout(Duration::from_secs(30), st.wait_for(|s| s.ready))
        .await
        .map(|r| r.map(|_| ()));
    let dir = podgrace_node::kubelet::volumes::default_root().join(&uid);
    let empty_dir = dir.join("volumes/kubernetes.io~empty-dir/shared");
    assert_eq!(
        std::fs::read_to_string(empty_dir.join("msg"))
            .ok()
            .as_deref(),
        Some("hi-from-writer\n"),
        "the emptyDir on the host"
    );
    assert!(
        !empty_dir.join("denied").exists(),
        "the read-only mount refused the write"
    );
    assert!(
        ready.is_ok(),
        "every container saw its volumes as it should: {:?}",
        *st.borrow()
    );
    delete(&rt, pod).await;
    assert!(!dir.exists(), "{} removed with the pod", dir.display());
}

/// `hostPath` with the kubelet's type checks: `DirectoryOrCreate` makes the directory, and
/// what the container writes there is on the host; `Directory` on a missing path fails the pod
/// with the kubelet's message before any sandbox exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_host_path_volumes_with_the_kubelets_type_checks() {
    let Some(sock) = socket("containerd_host_path_volumes_with_the_kubelets_type_checks") else {
        return;
    };
    let rt = pods::runtime(&sock, "pod").await;
    let host = std::env::temp_dir().join(format!("podgrace-hostpath-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&host);
    let yaml = |kind: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: hp}}\nspec:\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: h\n    hostPath: {{path: {}, type: {kind}}}\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, \"echo from-the-container > /host/out; sleep 1000\"]\n    volumeMounts:\n    - {{name: h, mountPath: /host}}\n",
            host.display()
        )
    };
    let m = manifest::load(&yaml("Directory"), "hp.yaml").unwrap();
    let plan = m.pods().next().unwrap().clone();
    let r = run_pod(
        rt.clone(),
        plan,
        PodOptions::default(),
        EventRecorder::new(),
    )
    .wait()
    .await;
    let err = r.expect_err("a missing Directory fails").to_string();
    assert!(
        err.contains(&format!(
            "MountVolume.SetUp failed for volume \"h\" : hostPath type check failed: {} is not a directory",
            host.display()
        )),
        "{err}"
    );
    let pod = start(&rt, &yaml("DirectoryOrCreate"), &uid("h1")).await;
    let t0 = std::time::Instant::now();
    while !host.join("out").exists() && t0.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        std::fs::read_to_string(host.join("out")).ok().as_deref(),
        Some("from-the-container\n")
    );
    delete(&rt, pod).await;
    assert!(
        host.join("out").exists(),
        "a hostPath is the host's: it stays"
    );
    let _ = std::fs::remove_dir_all(&host);
}

/// An image that cannot be had keeps its container waiting, as the kubelet's image manager and
/// pod worker do: a failed pull is `Failed to pull image "IMAGE": rpc error: code = ... desc =
/// ...` and `Error: ErrImagePull` (the container waits with reason `ErrImagePull`), the pod
/// worker's next sync 10 s later pulls again (the image back-off of 10 s has passed), and the
/// one after that, within the doubled back-off, records `Back-off pulling image` and waits with
/// `ImagePullBackOff` and the last pull's error. An absent image under `imagePullPolicy:
/// Never` waits with `ErrImageNeverPull`. Nothing ran, so nothing is restarted or counted, and
/// `restartPolicy: Never` does not end the pod: it stays Pending until deleted, then is Failed
/// with its containers `ContainerStatusUnknown` (the status manager's `TerminatePod`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_an_image_that_cannot_be_pulled_waits_in_err_image_pull_then_back_off() {
    let Some(sock) =
        socket("containerd_an_image_that_cannot_be_pulled_waits_in_err_image_pull_then_back_off")
    else {
        return;
    };
    let rt = pods::runtime(&sock, "pod").await;
    // A registry that refuses at once (no DNS, no network needed).
    let absent = "127.0.0.1:1/podgrace/absent:1";
    let never = "127.0.0.1:1/podgrace/absent:2";
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: nopull}}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: {absent}\n    imagePullPolicy: IfNotPresent\n  - name: never\n    image: {never}\n    imagePullPolicy: Never\n"
    );
    let m = manifest::load(&yaml, "nopull.yaml").unwrap_or_else(|e| panic!("{e}"));
    let plan = m.pods().next().expect("a pod").clone();
    let events = EventRecorder::new();
    let pod = run_pod(
        rt.clone(),
        plan,
        PodOptions {
            uid: Some(uid("n1")),
            ..PodOptions::default()
        },
        events.clone(),
    );
    let mut st = pod.status();
    let reason_of = |s: &podgrace_node::kubelet::PodStatus, c: &str| {
        s.waiting
            .iter()
            .find(|w| w.container == c)
            .map(|w| (w.reason, w.message.clone()))
    };
    let waits = tokio::time::timeout(
        Duration::from_secs(30),
        st.wait_for(|s| reason_of(s, "app").is_some() && reason_of(s, "never").is_some()),
    )
    .await
    .expect("both containers waiting within 30 s")
    .expect("status")
    .clone();
    let first_failure = std::time::Instant::now();
    let (reason, message) = reason_of(&waits, "app").unwrap();
    assert_eq!(reason, "ErrImagePull");
    assert!(message.starts_with("rpc error: code = "), "{message}");
    assert_eq!(
        reason_of(&waits, "never").unwrap(),
        (
            "ErrImageNeverPull",
            format!("Container image \"{never}\" is not present with pull policy of Never")
        )
    );
    let of = |reason: &str, container: &str| -> Vec<String> {
        events
            .events()
            .into_iter()
            .filter(|e| e.reason == reason && e.container.as_deref() == Some(container))
            .map(|e| e.message)
            .collect()
    };
    let failed = of("Failed", "app");
    assert!(
        failed[0].starts_with(&format!(
            "Failed to pull image \"{absent}\": rpc error: code = "
        )),
        "{failed:?}"
    );
    assert_eq!(failed[1], "Error: ErrImagePull");
    assert_eq!(of("Failed", "never"), ["Error: ErrImageNeverPull"]);
    // The next syncs: a second pull about 10 s later, then the back-off.
    let backed_off = tokio::time::timeout(
        Duration::from_secs(40),
        st.wait_for(|s| reason_of(s, "app").is_some_and(|(r, _)| r == "ImagePullBackOff")),
    )
    .await
    .expect("ImagePullBackOff within 40 s")
    .expect("status")
    .clone();
    let took = first_failure.elapsed();
    assert!(
        took >= Duration::from_secs(19) && took < Duration::from_secs(25),
        "ImagePullBackOff {took:?} after the first failed pull (want about 20 s)"
    );
    let (_, message) = reason_of(&backed_off, "app").unwrap();
    assert!(
        message.starts_with(&format!(
            "Back-off pulling image \"{absent}\": ErrImagePull: rpc error: code = "
        )),
        "{message}"
    );
    assert_eq!(of("Pulling", "app").len(), 2);
    assert_eq!(
        of("BackOff", "app"),
        [format!("Back-off pulling image \"{absent}\"")]
    );
    assert_eq!(
        of("Failed", "app").last().unwrap(),
        "Error: ImagePullBackOff"
    );
    assert!(of("Created", "app").is_empty() && of("Started", "never").is_empty());
    assert_ne!(
        st.borrow().phase,
        podgrace_node::kubelet::PodWorkerState::Terminated
    );
    // A graceful delete: the kubelet's own terminal status then reaches the object.
    pod.send(PodCommand::Delete(KubectlDeleteFlags::default()));
    let report = tokio::time::timeout(Duration::from_secs(60), pod.wait())
        .await
        .expect("pod ended within 60 s")
        .expect("pod report");
    if let Some(sb) = &report.sandbox {
        rt.remove_pod_sandbox(&CallContext::background(), sb)
            .await
            .expect("remove sandbox");
    }
    for c in &report.containers {
        assert_eq!(c.restarts, 0, "{}", c.name);
    }
    let before = &report.object[0];
    assert_eq!(before.phase.as_str(), "Pending", "{:?}", report.object);
    let terminal = &report.object[1];
    assert_eq!(terminal.phase.as_str(), "Failed", "{:?}", report.object);
    assert_eq!(
        terminal.row.status, "ContainerStatusUnknown",
        "{:?}",
        report.object
    );
}

/// An entry point the image does not have: runc refuses it in StartContainer, the kubelet's
/// `Failed` event is `Error: ` and containerd's message once (not the gRPC code, not the error
/// chain twice), and the container is terminated as containerd reports it, `StartError` with
/// exit code 128, which kubectl shows as the pod's STATUS; under `restartPolicy: Never` the pod
/// is then Failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_an_entry_point_the_image_lacks_is_a_start_error() {
    let Some(sock) = socket("containerd_an_entry_point_the_image_lacks_is_a_start_error") else {
        return;
    };
    let rt = pods::runtime(&sock, "pod").await;
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: nostart}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [/no/such/binary]\n"
    );
    let events = EventRecorder::new();
    let m = manifest::load(&yaml, "nostart.yaml").unwrap_or_else(|e| panic!("{e}"));
    let pod = run_pod(
        rt.clone(),
        m.pods().next().expect("a pod").clone(),
        PodOptions {
            uid: Some(uid("s1")),
            ..PodOptions::default()
        },
        events.clone(),
    );
    let report = tokio::time::timeout(Duration::from_secs(60), pod.wait())
        .await
        .expect("pod ended within 60 s")
        .expect("pod report");
    if let Some(sb) = &report.sandbox {
        rt.remove_pod_sandbox(&CallContext::background(), sb)
            .await
            .expect("remove sandbox");
    }
    let failed: Vec<String> = events
        .events()
        .into_iter()
        .filter(|e| e.reason == "Failed")
        .map(|e| e.message)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    let m = &failed[0];
    assert!(
        m.starts_with("Error: failed to create containerd task: ")
            && m.contains(
                "exec: \"/no/such/binary\": stat /no/such/binary: no such file or directory"
            )
            && m.matches("failed to create containerd task").count() == 1,
        "{m}"
    );
    let last = report.object.last().expect("a status");
    assert_eq!(last.phase.as_str(), "Failed", "{:?}", report.object);
    assert_eq!(last.row.status, "StartError", "{:?}", report.object);
}
