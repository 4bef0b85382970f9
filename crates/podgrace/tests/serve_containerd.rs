//! `podgrace serve --runtime containerd`: real kubectl against serve, whose kubelet runs the
//! pods on a real containerd (`.ci/containerd.sh start`; CI runs it) from the images the tests
//! build and import (`podgrace-node/tests/containerd_support`).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::containerd_support::{containers, socket, BUSYBOX};
use common::serve::{alive, pids_with_env, Serve};

/// `podgrace serve --runtime containerd:SOCKET` for these tests.
fn serve_on(tag: &str, sock: &Path) -> Serve {
    let runtime = format!("containerd:{}", sock.display());
    Serve::start(tag, &["--runtime", &runtime])
}

/// What these tests ask of a serve besides kubectl.
trait ServeExt {
    /// Polls `kubectl get pod NAME -o json` until `ready` holds of it.
    fn wait_for(&self, pod: &str, what: &str, ready: impl Fn(&serde_json::Value) -> bool);
}

impl ServeExt for Serve {
    fn wait_for(&self, pod: &str, what: &str, ready: impl Fn(&serde_json::Value) -> bool) {
        let t0 = Instant::now();
        loop {
            let o = self.kubectl(&["get", "pod", pod, "-o", "json"]);
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout) {
                if ready(&v) {
                    return;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "pod {pod} never {what}: {}\nserve: {}",
                String::from_utf8_lossy(&o.stdout),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn sandboxes_of(sock: &Path, pod: &str) -> usize {
    containers(sock, &format!("labels.\"io.kubernetes.pod.name\"=={pod}")).len()
}

/// Field case a (`shared/cases/real-cluster-1.32.md`) on containerd, with the preStop as the
/// kubelet's own `sleep` action (3 s; an exec hook's extra set-up on containerd, an ExecSync
/// through the shim, is measured apart by `podgrace-node/tests/containerd_vs_process.rs`): TGPS
/// 10, an app (busybox sh as PID 1) that traps SIGTERM and goes on, `kubectl delete
/// --grace-period=5`. Through real kubectl, serve's kubelet and a real containerd the pod gets
/// Running with the kubelet's status fields (`containerID: containerd://...`, the image and its
/// id), `kubectl logs` shows the container's output from the CRI log file containerd writes,
/// and the termination facts are those `podgrace run` reports for the same manifest on the
/// process runtime, within ±150 ms: SIGTERM after the preStop's 3 s (the time containerd
/// stamped on the trap's line), the kill at 5 s (the process seen from the host).
#[test]
fn kubectl_runs_a_pod_on_containerd_through_serve_as_the_process_runtime_times_it() {
    let Some(sock) = socket("kubectl_runs_a_pod_on_containerd_through_serve") else {
        return;
    };
    const TOLERANCE: f64 = 0.150;
    let s = serve_on("containerd-term", &sock);
    let marker = format!("PODGRACE_SERVE_CTRD_{}", std::process::id());
    let manifest = format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: term-ctrd}}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, \"trap 'echo got TERM' TERM; echo hello from the image; while :; do sleep 0.05; done\"]
    env:
    - {{name: {marker}, value: '1'}}
    lifecycle:
      preStop:
        sleep: {{seconds: 3}}
"
    );
    let file = s.file("term.yaml", &manifest);

    // The reference: podgrace run on the process runtime, the delete 1 s after the start.
    let o = common::podgrace(&[
        "run",
        file.to_str().unwrap(),
        "--delete-after",
        "1s",
        "--grace-period",
        "5",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let r = common::json(&o);
    let t = &r["containers"][0]["terminations"][0];
    let run_term = t["stopSignalAfterSeconds"].as_f64().unwrap();
    let run_exit = t["exitAfterSeconds"]
        .as_f64()
        .or(t["killAfterSeconds"].as_f64())
        .unwrap();

    s.ok(&["apply", "-f", file.to_str().unwrap()]);
    s.wait_for("term-ctrd", "Ready", |v| {
        v["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    });
    let obj: serde_json::Value =
        serde_json::from_str(&s.ok(&["get", "pod", "term-ctrd", "-o", "json"])).unwrap();
    let cs = &obj["status"]["containerStatuses"][0];
    assert_eq!(obj["status"]["phase"], "Running", "{obj}");
    let id = cs["containerID"].as_str().unwrap_or_default();
    assert!(
        id.starts_with("containerd://") && id.len() == "containerd://".len() + 64,
        "{cs}"
    );
    assert_eq!(cs["image"], BUSYBOX, "{cs}");
    assert!(
        cs["imageID"]
            .as_str()
            .is_some_and(|i| i.contains("sha256:")),
        "{cs}"
    );
    assert!(cs["state"]["running"]["startedAt"].is_string(), "{cs}");
    let ip = obj["status"]["podIP"].as_str().unwrap_or_default();
    assert!(ip.starts_with("198.18.78."), "the CNI's range: {obj}");
    let node: serde_json::Value =
        serde_json::from_str(&s.ok(&["get", "node", "podgrace", "-o", "json"])).unwrap();
    assert!(
        node["status"]["nodeInfo"]["containerRuntimeVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("containerd://1.")),
        "{}",
        node["status"]["nodeInfo"]
    );
    let t0 = Instant::now();
    while !s
        .ok(&["logs", "term-ctrd"])
        .contains("hello from the image")
    {
        assert!(t0.elapsed() < Duration::from_secs(10), "kubectl logs");
        std::thread::sleep(Duration::from_millis(100));
    }
    let app = pids_with_env(&format!("{marker}=1"))
        .into_iter()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("trap"))
        })
        .expect("the app's process, seen from the host");

    let uid = obj["metadata"]["uid"].as_str().unwrap().to_string();
    let log_file = std::env::temp_dir()
        .join(format!("podgrace-serve-{}-pods", s.pid()))
        .join(format!("default_term-ctrd_{uid}/app/0.log"));
    s.ok(&[
        "delete",
        "pod",
        "term-ctrd",
        "--grace-period=5",
        "--wait=false",
    ]);
    let deleted = Instant::now();
    let deleted_wall = std::time::SystemTime::now();
    while alive(app) {
        assert!(
            deleted.elapsed() < Duration::from_secs(15),
            "the app is killed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let serve_exit = deleted.elapsed().as_secs_f64();
    // containerd's CRI log line: `TIMESTAMP stdout F got TERM`.
    let log = std::fs::read_to_string(&log_file).unwrap_or_default();
    let serve_term = log
        .lines()
        .find(|l| l.ends_with(" F got TERM"))
        .and_then(|l| l.split(' ').next())
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .and_then(|t| t.duration_since(deleted_wall).ok())
        .map(|d| d.as_secs_f64());
    let facts = format!(
        "SIGTERM run {run_term:.3} serve on containerd {}; death run {run_exit:.3} serve on containerd {serve_exit:.3} (s after the delete)",
        serve_term.map_or("none".into(), |t| format!("{t:.3}"))
    );
    eprintln!("{facts}");
    let serve_term = serve_term.unwrap_or_else(|| panic!("{facts}: {}: {log}", log_file.display()));
    assert!((serve_term - run_term).abs() <= TOLERANCE, "{facts}");
    assert!((serve_exit - run_exit).abs() <= TOLERANCE, "{facts}");
    assert!(
        (run_term - 3.0).abs() <= TOLERANCE && (run_exit - 5.0).abs() <= TOLERANCE,
        "{facts}"
    );
    assert!(
        s.ok(&["logs", "term-ctrd"]).contains("got TERM"),
        "kubectl logs of a terminating pod"
    );

    // The object goes once the kubelet has finished; then its containers and sandbox go.
    let t0 = Instant::now();
    while s.kubectl(&["get", "pod", "term-ctrd"]).status.success() {
        assert!(t0.elapsed() < Duration::from_secs(10), "the pod is deleted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    while sandboxes_of(&sock, "term-ctrd") > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the sandbox is removed once the pod object is gone"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A serve killed without a word leaves its pods running under containerd; the next serve finds
/// them by their labels. Its API store is new, so no pod object has their UID: it stops them
/// with their grace (a sleep as PID 1 ignores SIGTERM: SIGKILL at the 3 s grace), as the kubelet
/// kills the pods it does not know, and says so.
#[test]
fn a_restarted_serve_stops_the_pods_an_earlier_one_left_on_containerd() {
    let Some(sock) = socket("a_restarted_serve_stops_the_pods_an_earlier_one_left") else {
        return;
    };
    let marker = format!("PODGRACE_SERVE_CTRD_LEFT_{}", std::process::id());
    let first = serve_on("containerd-left", &sock);
    let file = first.file(
        "left.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: left-by-serve}}\nspec:\n  terminationGracePeriodSeconds: 3\n  volumes:\n  - {{name: scratch, emptyDir: {{}}}}\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sleep, \"1000\"]\n    env:\n    - {{name: {marker}, value: '1'}}\n    volumeMounts:\n    - {{name: scratch, mountPath: /scratch}}\n"
        ),
    );
    first.ok(&["apply", "-f", file.to_str().unwrap()]);
    first.wait_for("left-by-serve", "Running", |v| {
        v["status"]["phase"] == "Running"
    });
    let app = pids_with_env(&format!("{marker}=1"));
    assert_eq!(app.len(), 1, "one app process: {app:?}");
    let obj: serde_json::Value =
        serde_json::from_str(&first.ok(&["get", "pod", "left-by-serve", "-o", "json"])).unwrap();
    let uid = obj["metadata"]["uid"].as_str().unwrap().to_string();
    let tmp = std::env::temp_dir();
    let volumes = tmp.join(format!("podgrace-{}-volumes/{uid}", first.pid()));
    let logs = tmp.join(format!("podgrace-serve-{}-pods", first.pid()));
    // serve dies as a kubelet may (kill -9); the container goes on under containerd.
    first.kill();
    assert!(
        volumes.is_dir() && logs.is_dir(),
        "a killed serve leaves its pod's directories"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(app[0]), "the container outlives a dead serve");

    let started = Instant::now();
    let second = serve_on("containerd-next", &sock);
    let up = started.elapsed();
    let err = second.stderr();
    assert!(
        err.contains("found pod default/left-by-serve")
            && err.contains("no pod object has its UID")
            && err.contains("stopping it with its grace"),
        "{err}"
    );
    assert!(!alive(app[0]), "stopped before serve answers");
    // Stopped with its 3 s grace: SIGTERM is ignored by sleep as PID 1, SIGKILL at 3 s.
    assert!(up >= Duration::from_secs(3), "{up:?}: {err}");
    assert!(up < Duration::from_secs(10), "{up:?}: {err}");
    assert_eq!(
        sandboxes_of(&sock, "left-by-serve"),
        0,
        "nothing left behind"
    );
    assert!(
        !volumes.exists() && !logs.exists(),
        "the earlier serve's emptyDir and logs are removed with its pod (cleanupOrphanedPodDirs)"
    );
}

/// Volumes through serve: a ConfigMap and a Secret applied with kubectl become files in the
/// container (read from serve's API by its kubelet), an emptyDir is shared by two containers;
/// `kubectl logs` shows what the container read. A pod whose configMap does not exist gets the
/// kubelet's FailedMount event and stays ContainerCreating.
#[test]
fn serve_mounts_configmaps_secrets_and_emptydirs_from_the_api() {
    let Some(sock) = socket("serve_mounts_configmaps_secrets_and_emptydirs_from_the_api") else {
        return;
    };
    let s = serve_on("containerd-vols", &sock);
    // (kubectl's typed `create configmap` sends protobuf, which serve does not read yet.)
    let file = s.file(
        "vols.yaml",
        &format!(
            "apiVersion: v1
kind: ConfigMap
metadata: {{name: app-config}}
data: {{mode: blue}}
---
apiVersion: v1
kind: Secret
metadata: {{name: app-secret}}
stringData: {{token: s3cr3t}}
---
apiVersion: v1
kind: Pod
metadata: {{name: vols}}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - {{name: cfg, configMap: {{name: app-config}}}}
  - {{name: sec, secret: {{secretName: app-secret}}}}
  - {{name: scratch, emptyDir: {{}}}}
  containers:
  - name: app
    image: {BUSYBOX}
    command: [sh, -c, \"while ! test -e /scratch/note; do sleep 0.1; done; echo mode=$(cat /cfg/mode) token=$(cat /sec/token) note=$(cat /scratch/note); sleep 1000\"]
    volumeMounts:
    - {{name: cfg, mountPath: /cfg}}
    - {{name: sec, mountPath: /sec, readOnly: true}}
    - {{name: scratch, mountPath: /scratch}}
  - name: side
    image: {BUSYBOX}
    command: [sh, -c, \"echo from-side > /scratch/note; sleep 1000\"]
    volumeMounts:
    - {{name: scratch, mountPath: /scratch}}
"
        ),
    );
    s.ok(&["apply", "-f", file.to_str().unwrap()]);
    s.wait_for("vols", "Running", |v| v["status"]["phase"] == "Running");
    let t0 = Instant::now();
    loop {
        let logs = s.kubectl(&["logs", "vols", "-c", "app"]);
        let text = String::from_utf8_lossy(&logs.stdout).into_owned();
        if text.contains("mode=blue token=s3cr3t note=from-side") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "kubectl logs: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let missing = s.file(
        "missing.yaml",
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: no-cfg}}\nspec:\n  volumes:\n  - {{name: cfg, configMap: {{name: absent}}}}\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    volumeMounts:\n    - {{name: cfg, mountPath: /cfg}}\n"),
    );
    s.ok(&["apply", "-f", missing.to_str().unwrap()]);
    let t0 = Instant::now();
    loop {
        let ev = s.ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=no-cfg",
            "-o",
            "json",
        ]);
        if ev.contains(
            "MountVolume.SetUp failed for volume \\\"cfg\\\" : configmap \\\"absent\\\" not found",
        ) {
            assert!(ev.contains("FailedMount"), "{ev}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no FailedMount event: {ev}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let pod = s.ok(&["get", "pod", "no-cfg", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(pod, "Pending");
    s.ok(&[
        "delete",
        "pod",
        "vols",
        "no-cfg",
        "--wait=true",
        "--timeout=30s",
    ]);
    let t0 = Instant::now();
    while sandboxes_of(&sock, "vols") > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the sandbox is removed once the pod object is gone"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
