//! `podgrace serve` driven by real clients: scripted kubectl sessions (every kubectl build the
//! machine has: `/usr/bin/kubectl` and `kubectl.1.27` ... `kubectl.1.33` of the Google Cloud
//! SDK), the Python client (Debian's python3-kubernetes, for `/usr/bin/python3`) for watch
//! semantics, curl for the closed API (401, plain HTTP, the kubeconfig's mode), and bad input.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running `podgrace serve` on 127.0.0.1 with a port of its own; killed on drop.
struct Serve {
    child: Child,
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
}

impl Serve {
    fn start(name: &str, extra: &[&str]) -> Serve {
        let dir =
            std::env::temp_dir().join(format!("podgrace-serve-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_podgrace"))
            .args(["serve", "--bind", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start podgrace serve");
        let out = child.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines();
        let mut server = String::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(rest) = line.split(" API on ").nth(1) {
                server = rest.split(' ').next().unwrap().to_string();
            }
            if line.starts_with("export KUBECONFIG=") {
                assert_eq!(line, format!("export KUBECONFIG={}", kubeconfig.display()));
                break;
            }
        }
        assert!(
            server.starts_with("https://127.0.0.1:"),
            "server line: {server:?}"
        );
        std::thread::spawn(move || for _ in lines {});
        Serve {
            child,
            dir,
            kubeconfig,
            server,
        }
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn kubectl(&self, bin: &Path, args: &[&str]) -> Output {
        Command::new(bin)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .output()
            .expect("run kubectl")
    }

    fn token(&self) -> String {
        let text = std::fs::read_to_string(&self.kubeconfig).unwrap();
        text.lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .unwrap()
            .to_string()
    }

    fn ca(&self) -> PathBuf {
        use base64::Engine;
        let text = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let b64 = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
            .unwrap();
        let pem = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let p = self.dir.join("ca.pem");
        std::fs::write(&p, pem).unwrap();
        p
    }

    /// curl against the server: (HTTP code, body).
    fn curl(&self, args: &[&str], path: &str) -> (u16, String) {
        let out = Command::new("curl")
            .args(["-sS", "--cacert"])
            .arg(self.ca())
            .args(["-w", "\n%{http_code}"])
            .args(args)
            .arg(format!("{}{path}", self.server))
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.trim().parse().unwrap_or(0), body.to_string())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every kubectl build on the machine: the default one first (required), then the versioned
/// builds of the Google Cloud SDK that are present.
fn kubectls() -> Vec<PathBuf> {
    let mut v = Vec::new();
    let main = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("kubectl is needed for the serve tests (/usr/bin/kubectl, or Debian's kubernetes-client)");
    v.push(main);
    for minor in 27..=33 {
        let p = PathBuf::from(format!("/usr/lib/google-cloud-sdk/bin/kubectl.1.{minor}"));
        if p.exists() {
            v.push(p);
        }
    }
    v
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: app
    image: nginx:1.27
    command: [sleep, '100']
    lifecycle:
      preStop:
        sleep: {seconds: 3}
";

fn assert_ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        out(o),
        err(o)
    );
}

#[test]
fn kubectl_sessions_of_every_version() {
    for bin in kubectls() {
        let tag = bin.file_name().unwrap().to_string_lossy().replace('.', "-");
        let s = Serve::start(&tag, &[]);
        let k = |args: &[&str]| s.kubectl(&bin, args);
        let who = bin.display().to_string();
        let f = s.file("pod.yaml", POD);
        let f = f.to_str().unwrap();

        let o = k(&["apply", "-f", f]);
        assert_ok(&o, &who);
        assert_eq!(out(&o), "pod/web created\n", "{who}");
        let o = k(&["apply", "-f", f]);
        // kubectl 1.27 and 1.28 compute apply's patch from the OpenAPI v2 document; against
        // podgrace's they send the containers whole, so they say "configured" where newer
        // builds (OpenAPI v3) say "unchanged". The object does not change either way.
        let old = ["kubectl.1.27", "kubectl.1.28"]
            .iter()
            .any(|o| who.ends_with(o));
        if old {
            assert!(
                out(&o) == "pod/web unchanged\n" || out(&o) == "pod/web configured\n",
                "{who}: {}",
                out(&o)
            );
        } else {
            assert_eq!(out(&o), "pod/web unchanged\n", "{who}");
        }
        s.file("pod.yaml", &POD.replace("app: web", "app: web2"));
        let o = k(&["apply", "-f", f]);
        assert_eq!(out(&o), "pod/web configured\n", "{who}: {}", err(&o));

        let o = k(&["get", "pods"]);
        assert_ok(&o, &who);
        let text = out(&o);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
            "{who}"
        );
        let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(row[..4], ["web", "0/1", "Pending", "0"], "{who}");
        let o = k(&["get", "pods", "-o", "wide"]);
        let head = out(&o);
        assert!(
            head.starts_with("NAME")
                && head
                    .lines()
                    .next()
                    .unwrap()
                    .ends_with("IP       NODE       NOMINATED NODE   READINESS GATES"),
            "{who}: {head}"
        );
        assert!(head.contains(" podgrace "), "{who}: {head}");

        assert_eq!(
            out(&k(&["label", "pod", "web", "tier=front"])),
            "pod/web labeled\n",
            "{who}"
        );
        // kubectl 1.27 itself prints "annotate" (its own wording of the time).
        let a = out(&k(&["annotate", "pod", "web", "note=hi"]));
        assert!(
            a == "pod/web annotated\n" || (old && a == "pod/web annotate\n"),
            "{who}: {a}"
        );
        let yaml = out(&k(&["get", "pod", "web", "-o", "yaml"]));
        for want in [
            "    app: web2\n",
            "    tier: front\n",
            "    note: hi\n",
            "  nodeName: podgrace\n",
            "  phase: Pending\n",
            "  qosClass: BestEffort\n",
        ] {
            assert!(yaml.contains(want), "{who}: {want:?} not in\n{yaml}");
        }
        let d = out(&k(&["describe", "pod", "web"]));
        let d = d
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n");
        for want in [
            "Name: web",
            "Node: podgrace/",
            "Status: Pending",
            "Normal Scheduled",
            "default-scheduler Successfully assigned default/web to podgrace",
        ] {
            assert!(d.contains(want), "{who}: {want:?} not in\n{d}");
        }
        let ev = out(&k(&["get", "events"]));
        assert!(ev.starts_with("LAST SEEN"), "{who}: {ev}");
        assert!(
            ev.contains("Normal")
                && ev.contains("pod/web")
                && ev.contains("Successfully assigned default/web to podgrace"),
            "{who}: {ev}"
        );

        // Bad input, worded as kube-apiserver words it.
        let bad = s.file(
            "bad.yaml",
            &POD.replace("name: web\n", "name: g-sleep-too-long\n")
                .replace("seconds: 3", "seconds: 20"),
        );
        let o = k(&["apply", "-f", bad.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{who}");
        assert_eq!(err(&o).trim_end(), "The Pod \"g-sleep-too-long\" is invalid: spec.containers[0].lifecycle.preStop.sleep: Invalid value: 20: must be non-negative and less than terminationGracePeriodSeconds (10)", "{who}");
        let unknown = s.file(
            "unknown.yaml",
            &POD.replace("name: web\n", "name: u\n").replace(
                "  terminationGracePeriodSeconds: 10",
                "  terminationGracePeriod: 10",
            ),
        );
        let o = k(&["apply", "-f", unknown.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{who}");
        assert!(err(&o).contains("Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.terminationGracePeriod\""), "{who}: {}", err(&o));
        let o = k(&["apply", "--validate=warn", "-f", unknown.to_str().unwrap()]);
        assert_ok(&o, &who);
        assert!(
            err(&o).contains("Warning: unknown field \"spec.terminationGracePeriod\""),
            "{who}: {}",
            err(&o)
        );
        let o = k(&["get", "pod", "nosuchpod"]);
        assert_eq!(
            err(&o).trim_end(),
            "Error from server (NotFound): pods \"nosuchpod\" not found",
            "{who}"
        );

        // Delete with a grace period: Terminating, deletionGracePeriodSeconds 5.
        let o = k(&["delete", "pod", "web", "--grace-period=5", "--wait=false"]);
        assert_ok(&o, &who);
        assert!(
            out(&o).starts_with("pod \"web\" deleted"),
            "{who}: {}",
            out(&o)
        );
        let row = out(&k(&["get", "pod", "web", "--no-headers"]));
        assert_eq!(
            row.split_whitespace().nth(2),
            Some("Terminating"),
            "{who}: {row}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&out(&k(&["get", "pod", "web", "-o", "json"]))).unwrap();
        assert_eq!(json["metadata"]["deletionGracePeriodSeconds"], 5, "{who}");
        let o = k(&["delete", "pod", "web", "--force", "--grace-period=0"]);
        assert_ok(&o, &who);
        assert!(err(&o).contains("Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated."), "{who}");
        assert!(
            out(&o).starts_with("pod \"web\" force deleted"),
            "{who}: {}",
            out(&o)
        );
        let o = k(&["get", "pod", "web"]);
        assert_eq!(o.status.code(), Some(1), "{who}");

        // kubectl explain reads the OpenAPI v3 document.
        let o = k(&["explain", "pod.spec.terminationGracePeriodSeconds"]);
        assert_ok(&o, &who);
        assert!(
            out(&o).contains("terminationGracePeriodSeconds") && out(&o).contains("<integer>"),
            "{who}: {}",
            out(&o)
        );
    }
}

#[test]
fn kubectl_get_watch_shows_terminating_then_gone() {
    let bin = kubectls().remove(0);
    let s = Serve::start("watch", &[]);
    let f = s.file("pod.yaml", POD);
    assert_ok(
        &s.kubectl(&bin, &["apply", "-f", f.to_str().unwrap()]),
        "apply",
    );
    let mut w = Command::new(&bin)
        .args(["get", "pods", "-w", "--request-timeout=20s"])
        .env("KUBECONFIG", &s.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(w.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("NAME"), "{first}");
    let row = lines.next().unwrap().unwrap();
    assert_eq!(row.split_whitespace().nth(2), Some("Pending"), "{row}");
    assert_ok(
        &s.kubectl(
            &bin,
            &["delete", "pod", "web", "--grace-period=5", "--wait=false"],
        ),
        "delete",
    );
    let row = lines.next().unwrap().unwrap();
    assert_eq!(row.split_whitespace().nth(2), Some("Terminating"), "{row}");
    assert_ok(
        &s.kubectl(
            &bin,
            &["delete", "pod", "web", "--force", "--grace-period=0"],
        ),
        "force delete",
    );
    // The force delete: a MODIFIED (grace 0) and the DELETED row, both Terminating.
    let a = lines.next().unwrap().unwrap();
    let b = lines.next().unwrap().unwrap();
    assert_eq!(
        (a.split_whitespace().nth(2), b.split_whitespace().nth(2)),
        (Some("Terminating"), Some("Terminating")),
        "{a}\n{b}"
    );
    let _ = w.kill();
    let _ = w.wait();
}

#[test]
fn the_api_is_closed_without_the_token_over_tls_only() {
    let s = Serve::start("security", &[]);
    let mode = std::fs::metadata(&s.kubeconfig)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let unauthorized = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
    assert_eq!(
        s.curl(&[], "/api/v1/namespaces"),
        (401, unauthorized.to_string())
    );
    assert_eq!(
        s.curl(&["-H", "Authorization: Bearer wrong"], "/api/v1/namespaces"),
        (401, unauthorized.to_string())
    );
    assert_eq!(
        s.curl(&["-H", "Authorization: Basic YWRtaW46YWRtaW4="], "/version"),
        (401, unauthorized.to_string())
    );
    let auth = format!("Authorization: Bearer {}", s.token());
    let (code, body) = s.curl(&["-H", &auth], "/api/v1/namespaces/default");
    assert_eq!(code, 200, "{body}");
    // Plain HTTP gets Go's answer and no API.
    let port = s.server.rsplit(':').next().unwrap();
    let mut tcp = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        tcp,
        "GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        s.token()
    )
    .unwrap();
    let mut reply = String::new();
    let _ = tcp.read_to_string(&mut reply);
    assert_eq!(
        reply,
        "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    );
    // Only TLS with the server's own CA is trusted: the system store does not know it.
    let o = Command::new("curl")
        .args(["-sS", "-o", "/dev/null"])
        .arg(format!("{}/version", s.server))
        .output()
        .unwrap();
    assert!(!o.status.success(), "curl without the CA must fail");
    // A token from another serve does not open this one.
    let other = Serve::start("security-other", &[]);
    let stale = format!("Authorization: Bearer {}", other.token());
    drop(other);
    assert_eq!(s.curl(&["-H", &stale], "/api/v1/namespaces").0, 401);
    // A kubectl with a wrong token says what kube-apiserver's 401 makes it say.
    let text = std::fs::read_to_string(&s.kubeconfig)
        .unwrap()
        .replace(&s.token(), "not-the-token");
    let wrong = s.file("wrong.kubeconfig", &text);
    let o = Command::new(kubectls().remove(0))
        .args(["get", "pods"])
        .env("KUBECONFIG", &wrong)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("error: You must be logged in to the server ("),
        "{}",
        err(&o)
    );
    // The default bind address is loopback.
    let help = common::stdout(&common::podgrace(&["serve", "--help"]));
    assert!(help.contains("[default: 127.0.0.1:6443]"), "{help}");
}

#[test]
fn bad_input_gets_clean_errors_and_the_server_keeps_serving() {
    let s = Serve::start("badinput", &[]);
    let auth = format!("Authorization: Bearer {}", s.token());
    let json = ["-H", "Content-Type: application/json", "-X", "POST"];
    let mut a: Vec<&str> = vec!["-H", &auth];
    a.extend(json);
    let (code, body) = s.curl(
        &[a.as_slice(), &["--data", "{\"metadata\": "]].concat(),
        "/api/v1/namespaces/default/pods",
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("\"message\":\"couldn't get version/kind; json parse error: "),
        "{body}"
    );
    let big = s.file(
        "big.json",
        &format!(
            "{{\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"k\":\"{}\"}}}}",
            "x".repeat(4 << 20)
        ),
    );
    let at = format!("@{}", big.display());
    let (code, body) = s.curl(
        &[a.as_slice(), &["--data-binary", &at]].concat(),
        "/api/v1/namespaces/default/configmaps",
    );
    assert_eq!(code, 413, "{body}");
    assert_eq!(
        body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is 3145728","reason":"RequestEntityTooLarge","code":413}"#
    );
    let widget = s.file(
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
    );
    let bin = kubectls().remove(0);
    let o = s.kubectl(&bin, &["apply", "-f", widget.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("no matches for kind \"Widget\" in version \"example.com/v1\""),
        "{}",
        err(&o)
    );
    let (code, _) = s.curl(&["-H", &auth], "/apis/example.com/v1/widgets");
    assert_eq!(code, 404);
    let o = s.kubectl(&bin, &["get", "namespaces", "-o", "name"]);
    assert_ok(&o, "get namespaces after bad input");
    assert_eq!(out(&o), "namespace/default\nnamespace/kube-node-lease\nnamespace/kube-public\nnamespace/kube-system\n");
}

const PY_WATCH: &str = r#"
import json, sys
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
out = {}
def cm(name):
    return v1.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"k": name}))
first = cm("a")
start = first.metadata.resource_version
# Events after a resourceVersion, with bookmarks (the server sends one every second here).
cm("b")
w = watch.Watch()
seen = []
for ev in w.stream(v1.list_namespaced_config_map, "default", resource_version=start, allow_watch_bookmarks=True, timeout_seconds=3):
    seen.append(ev["type"] if ev["type"] == "BOOKMARK" else ev["type"] + ":" + ev["object"].metadata.name)
    if ev["type"] == "BOOKMARK":
        out["bookmark_rv"] = ev["raw_object"]["metadata"]["resourceVersion"]
        w.stop()
out["seen"] = seen
# Past the history: 410, then the client relists and watches on from the list's version.
for i in range(8):
    cm("c%d" % i)
try:
    for ev in watch.Watch().stream(v1.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=3):
        out.setdefault("unexpected", []).append(ev["type"])
except ApiException as e:
    out["gone"] = e.status
lst = v1.list_namespaced_config_map("default")
out["relisted"] = len(lst.items)
rv = lst.metadata.resource_version
w = watch.Watch()
after = []
cm("d")
for ev in w.stream(v1.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=3):
    after.append(ev["type"] + ":" + ev["object"].metadata.name)
    w.stop()
out["after_relist"] = after
# Paging with continue tokens.
names, token = [], None
while True:
    page = v1.list_namespaced_config_map("default", limit=4, _continue=token)
    names += [i.metadata.name for i in page.items]
    token = page.metadata._continue
    if not token:
        break
out["paged"] = names
print(json.dumps(out))
"#;

#[test]
fn the_python_client_watches_gets_bookmarks_and_recovers_from_410() {
    let s = Serve::start(
        "python",
        &["--watch-history", "5", "--bookmark-interval", "1s"],
    );
    let script = s.file("watch.py", PY_WATCH);
    let started = Instant::now();
    let o = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(&s.kubeconfig)
        .output()
        .expect("run /usr/bin/python3 (python3-kubernetes)");
    assert_ok(&o, "python watch script");
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    assert_eq!(v["seen"], serde_json::json!(["ADDED:b", "BOOKMARK"]), "{v}");
    assert!(v["bookmark_rv"].as_str().unwrap().parse::<u64>().unwrap() > 0);
    assert_eq!(v["gone"], 410, "{v}");
    assert!(v.get("unexpected").is_none(), "{v}");
    assert_eq!(v["relisted"], 10);
    assert_eq!(v["after_relist"], serde_json::json!(["ADDED:d"]));
    let paged: Vec<&str> = v["paged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(
        paged,
        ["a", "b", "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "d"]
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

fn interrupt(child: &Child) {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT)
        .expect("SIGINT to podgrace serve");
}

fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn ctrl_c_drains_every_pod_and_a_second_exits_at_once() {
    let bin = kubectls().remove(0);
    // No pod: the drain is done at once.
    let mut empty = Serve::start("ctrlc-empty", &[]);
    interrupt(&empty.child);
    let st = wait_exit(&mut empty.child, Duration::from_secs(5))
        .expect("serve exits after Ctrl-C with no pods");
    assert!(st.success(), "{st:?}");
    // A pod: the drain deletes it with its own grace period and waits for it; without a
    // kubelet nothing finishes it, so the second Ctrl-C ends serve.
    let mut s = Serve::start("ctrlc", &[]);
    let f = s.file("pod.yaml", POD);
    assert_ok(
        &s.kubectl(&bin, &["apply", "-f", f.to_str().unwrap()]),
        "apply",
    );
    interrupt(&s.child);
    let until = Instant::now() + Duration::from_secs(5);
    let grace = loop {
        let o = s.kubectl(
            &bin,
            &[
                "get",
                "pod",
                "web",
                "-o",
                "jsonpath={.metadata.deletionGracePeriodSeconds}",
            ],
        );
        if !out(&o).is_empty() || Instant::now() > until {
            break out(&o);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        grace, "10",
        "the drain deletes with the pod's own terminationGracePeriodSeconds"
    );
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "serve waits for the pod"
    );
    interrupt(&s.child);
    let st =
        wait_exit(&mut s.child, Duration::from_secs(5)).expect("a second Ctrl-C exits at once");
    assert!(st.success(), "{st:?}");
}
