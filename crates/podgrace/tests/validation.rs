//! The API server's validation of pods (`ValidatePod`) at load time: each manifest that
//! kube-apiserver refuses is refused by `explain`, `lint` and `run` with exit 2, the file, line,
//! column and field path, and kube-apiserver's own message, before anything starts; what it
//! accepts (a relative mountPath or hostPath, a probe's unknown named port, a fractional byte
//! quantity) is accepted, with its warning or lint finding.
//!
//! The files are real manifests under `tests/data/invalid/`.

mod common;
use common::*;

/// The file under `tests/data/invalid/` and the one error line each verb prints for it.
const REFUSED: &[(&str, &str)] = &[
    ("requests-above-limits", "requests-above-limits.yaml:11:26: spec.containers[0].resources.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi"),
    ("container-port-out-of-range", "container-port-out-of-range.yaml:11:22: spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"),
    ("host-port-negative", "host-port-negative.yaml:12:17: spec.containers[0].ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive"),
    ("pull-policy-unknown", "pull-policy-unknown.yaml:10:22: spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\""),
    ("no-image", "no-image.yaml:7:5: spec.containers[0].image: Required value"),
    ("env-name-with-equals", "env-name-with-equals.yaml:11:13: spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='"),
    ("pod-name-not-dns", "pod-name-not-dns.yaml:4:9: metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ("mount-of-no-volume", "mount-of-no-volume.yaml:11:13: spec.containers[0].volumeMounts[0].name: Not found: \"data\""),
    ("volume-twice", "volume-twice.yaml:13:11: spec.volumes[1].name: Duplicate value: \"data\""),
    ("volume-two-sources", "volume-two-sources.yaml:13:15: spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type"),
    ("volume-no-source", "volume-no-source.yaml:11:5: spec.volumes[0]: Required value: must specify a volume type"),
    // Upstream reports a subPath under `volumeMounts.subPath`, without the mount's index.
    ("subpath-climbs", "subpath-climbs.yaml:13:16: spec.containers[0].volumeMounts.subPath: Invalid value: \"../../etc\": must not contain '..'"),
    ("hostpath-type-unknown", "hostpath-type-unknown.yaml:12:34: spec.volumes[0].hostPath.type: Unsupported value: \"Bogus\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\""),
    ("default-mode-too-large", "default-mode-too-large.yaml:12:44: spec.volumes[0].configMap.defaultMode: Invalid value: 99999: must be a number between 0 and 0777 (octal), both inclusive"),
    ("size-limit-not-a-quantity", "size-limit-not-a-quantity.yaml:12:27: spec.volumes[0].emptyDir.sizeLimit: Invalid value: \"1.2.3\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("resource-name-typo", "resource-name-typo.yaml:11:24: spec.containers[0].resources.limits[memroy]: Invalid value: \"memroy\": must be a standard resource type or fully qualified"),
    ("port-name-invalid", "port-name-invalid.yaml:11:13: spec.containers[0].ports[0].name: Invalid value: \"HTTP_PORT\": must contain at least one letter (a-z)"),
    ("mount-path-twice", "mount-path-twice.yaml:12:28: spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/data\": must be unique"),
    ("env-field-path-unknown", "env-field-path-unknown.yaml:13:31: spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"status.podIp\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\""),
    ("items-path-climbs", "items-path-climbs.yaml:15:24: spec.volumes[0].configMap.items[0].path: Invalid value: \"../a\": must not contain '..'"),
    ("deployment-restart-never", "deployment-restart-never.yaml:12:22: spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""),
];

fn data_dir() -> std::path::PathBuf {
    repo().join("crates/podgrace/tests/data/invalid")
}

#[test]
fn manifests_kube_apiserver_refuses_are_refused_by_explain_lint_and_run() {
    let dir = data_dir();
    for (name, line) in REFUSED {
        let file = format!("{name}.yaml");
        for verb in ["explain", "lint", "run"] {
            let mut args = vec![verb, file.as_str()];
            if verb == "run" {
                // Nothing may start: the manifest is refused before the runtime is touched.
                args.extend(["--runtime", "containerd:/nonexistent/containerd.sock"]);
            }
            let o = podgrace_in_dir(&dir, &args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{verb} {file}: {err}");
            assert!(
                err.lines().any(|l| l == format!("error: {line}")),
                "{verb} {file}: expected\nerror: {line}\ngot:\n{err}"
            );
            assert!(!err.contains("cannot reach"), "{verb} {file}: {err}");
        }
    }
}

/// What kube-apiserver accepts is accepted: a relative mountPath (the kubelet makes it
/// absolute), a relative hostPath, a probe's named port that no container port has (the
/// kubelet's probes then fail: lint says so), a fractional byte quantity (with the API server's
/// warning, from every verb); lint says what a relative hostPath does on containerd.
#[test]
fn what_kube_apiserver_accepts_is_accepted_with_its_warnings() {
    let f = tmp_file(
        "accepted",
        "web.yaml",
        "apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, \"3600\"]
    resources:
      limits: {memory: 1m}
    env:
    - {name: MODE, value: a}
    - {name: MODE, value: b}
    livenessProbe:
      httpGet: {port: http}
    volumeMounts:
    - {name: data, mountPath: data}
  volumes:
  - name: data
    hostPath: {path: relative/dir}
",
    );
    let p = f.to_str().unwrap();
    let o = podgrace(&["explain", p]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("warning: {p}:11:24: spec.containers[0].resources.limits[memory]: fractional byte value \"1m\" is invalid, must be an integer")), "{err}");
    assert!(err.contains(&format!("warning: {p}:14:7: spec.containers[0].env[1]: hides previous definition of \"MODE\", which may be dropped when using apply")), "{err}");
    let o = podgrace(&["lint", p]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("{p}:11:24  warning  api-server-warning  the API server warns: spec.containers[0].resources.limits[memory]: fractional byte value \"1m\" is invalid, must be an integer")), "{out}");
    assert!(out.contains(&format!("{p}:15:5  error    probe-port-not-found  container app: the livenessProbe's port \"http\" is not a port name of the container (named ports: none)")), "{out}");
    assert!(out.contains(&format!("{p}:19:3  error    hostpath-relative  volume \"data\": hostPath.path \"relative/dir\" is relative")), "{out}");
}

/// Runs podgrace in `dir`, so that messages name the file as given.
fn podgrace_in_dir(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("podgrace runs")
}
