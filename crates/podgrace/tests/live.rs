//! Issue 14: `explain` and `lint` on live objects, against a real `podgrace serve` (TLS, the
//! token, the kubeconfig it wrote, its controllers and kubelet), read as any cluster would be
//! read: the client code has no case for serve. Real kubectl reads the same objects beside
//! podgrace: the findings of `podgrace lint deployment/web` are those of `kubectl get deployment
//! web -o json` linted as a file, and every error line is kubectl's own. A plain-HTTP front that
//! refuses requests as RBAC does (`tests/data/forbidding_proxy.py`, python3) stands in for a
//! cluster where nodes/proxy, or a list, is forbidden.

mod common;

use std::collections::BTreeSet;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::serve::{kubectl_bin, Serve};
use serde_json::Value;

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `podgrace ARGS` with `kubeconfig` in `KUBECONFIG`, as a user would run it.
fn podgrace(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .output()
        .expect("run podgrace")
}

/// `kubectl ARGS` with `kubeconfig`.
fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(kubectl_bin())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("run kubectl")
}

/// A Deployment of two pods whose app (a shell) serves nothing but has a readiness probe that
/// passes, a Service selecting them, a bare pod, and a Deployment in namespace `shop`.
const OBJECTS: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        command: [sh, -c, 'sleep 3600']
        readinessProbe:
          exec: {command: ['true']}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: app
    image: busybox
    command: [sleep, '3600']
";

const SHOP: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  replicas: 0
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      terminationGracePeriodSeconds: 600
      containers:
      - name: api
        image: api
        command: [npm, start]
";

/// Waits until `kubectl get pods` shows `n` Running pods.
fn wait_running(s: &Serve, n: usize) {
    let start = Instant::now();
    loop {
        let pods = s.ok(&["get", "pods", "-o", "jsonpath={.items[*].status.phase}"]);
        if pods.split_whitespace().filter(|p| *p == "Running").count() >= n {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "pods not running: {pods}\nserve: {}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The findings of a `lint -o json` document as comparable rows: rule, object, path, message.
fn rows(doc: &Value) -> BTreeSet<(String, String, String, String)> {
    doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or_default().to_string(),
                format!(
                    "{}/{}/{}",
                    f["object"]["kind"].as_str().unwrap_or_default(),
                    f["object"]["namespace"].as_str().unwrap_or_default(),
                    f["object"]["name"].as_str().unwrap_or_default()
                ),
                f["path"].as_str().unwrap_or_default().to_string(),
                f["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn json_of(o: &Output) -> Value {
    assert!(
        o.status.code().is_some_and(|c| c <= 1),
        "exit {:?}: {}",
        o.status.code(),
        err(o)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", out(o)))
}

#[test]
fn lint_and_explain_read_the_objects_kubectl_reads() {
    let s = Serve::start("live-read", &[]);
    let kc = s.kubeconfig.clone();
    s.ok(&[
        "apply",
        "-f",
        s.file("objects.yaml", OBJECTS).to_str().unwrap(),
    ]);
    s.ok(&["create", "namespace", "shop"]);
    s.ok(&["apply", "-f", s.file("shop.yaml", SHOP).to_str().unwrap()]);
    wait_running(&s, 3);

    // The same Deployment, read by kubectl into a file and by podgrace from the API: the same
    // findings, placed at the same field paths.
    let file = s.file(
        "web.json",
        &s.ok(&["get", "deployment", "web", "-o", "json"]),
    );
    let from_file = json_of(&podgrace(
        &kc,
        &["lint", file.to_str().unwrap(), "-o", "json"],
    ));
    let live = json_of(&podgrace(&kc, &["lint", "deployment/web", "-o", "json"]));
    assert!(!rows(&live).is_empty(), "{live:#}");
    assert_eq!(rows(&live), rows(&from_file));
    let f = &live["findings"][0];
    assert_eq!(f["resource"], "deployment/web", "{f:#}");
    assert!(
        f["file"].is_null() && f["line"].is_null() && f["column"].is_null(),
        "{f:#}"
    );

    // -A: every workload where its template is written (not the ReplicaSet nor its pods), in
    // every namespace, with the Service beside them; the shop's npm start and 600 s grace.
    let all = json_of(&podgrace(&kc, &["lint", "-A", "-o", "json"]));
    let objects: BTreeSet<String> = rows(&all).into_iter().map(|r| r.1).collect();
    assert_eq!(
        objects,
        BTreeSet::from([
            "Deployment/default/web".to_string(),
            "Deployment/shop/api".into(),
            "Pod/default/solo".into()
        ]),
        "{all:#}"
    );
    let rules: BTreeSet<String> = rows(&all).into_iter().map(|r| r.0).collect();
    for want in [
        "package-manager-wrapper",
        "grace-period-too-long",
        "zero-grace-force-deletes",
    ] {
        assert!(rules.contains(want), "no {want}: {rules:?}");
    }
    // -n narrows to one namespace.
    let shop = json_of(&podgrace(&kc, &["lint", "-n", "shop", "-o", "json"]));
    assert!(
        rows(&shop).iter().all(|r| r.1 == "Deployment/shop/api"),
        "{shop:#}"
    );

    // A namespace with nothing in it: kubectl's line, exit 0 (explain prints no pod).
    let k = kubectl(&kc, &["get", "deployments", "-n", "empty"]);
    for verb in ["lint", "explain"] {
        let o = podgrace(&kc, &[verb, "-n", "empty"]);
        assert_eq!(o.status.code(), Some(0), "{verb}: {}", err(&o));
        assert_eq!(
            err(&o),
            "No resources found in empty namespace.\n",
            "{verb}"
        );
        assert_eq!(last_line(&o), last_line(&k));
    }
    // Forms kubectl refuses, in its words; a qualified type it takes.
    for arg in ["pod/", "deployment/web/x"] {
        let o = podgrace(&kc, &["explain", arg]);
        let k = kubectl(&kc, &["get", arg]);
        assert_eq!(o.status.code(), Some(2), "{arg}: {}", err(&o));
        assert_eq!(last_line(&o), last_line(&k), "{arg}");
    }
    let o = podgrace(&kc, &["lint", "deployments.v1.apps/web", "-o", "json"]);
    assert_eq!(rows(&json_of(&o)), rows(&from_file));

    // Text: the object and the field path instead of file:line:column.
    let text = out(&podgrace(&kc, &["lint", "deployment/web"]));
    assert!(
        text.starts_with(
            "Deployment default/web (deployment/web)\n  spec.template.spec.containers[0]."
        ),
        "{text}"
    );

    // SARIF as today, valid against the 2.1.0 schema, the field as a logical location.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sarif-schema-2.1.0.json"),
        )
        .expect("schema"),
    )
    .expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let sarif = json_of(&podgrace(&kc, &["lint", "-A", "-o", "sarif"]));
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let loc = &sarif["runs"][0]["results"][0]["locations"][0];
    assert!(loc.get("physicalLocation").is_none(), "{loc:#}");
    assert_eq!(loc["logicalLocations"][1]["kind"], "property", "{loc:#}");

    // explain: the node's kubelet settings, read through the API server's node proxy, are the
    // ones kubectl reads there too; the timeline is the file's.
    let configz: Value =
        serde_json::from_str(&s.ok(&["get", "--raw", "/api/v1/nodes/podgrace/proxy/configz"]))
            .expect("configz JSON");
    let k = &configz["kubeletconfig"];
    let live = json_of(&podgrace(
        &kc,
        &[
            "explain",
            "deployment/web",
            "--trigger",
            "evict-soft",
            "-o",
            "json",
        ],
    ));
    let kubelet = &live[0]["kubelet"];
    assert_eq!(kubelet["node"], "podgrace", "{kubelet:#}");
    assert_eq!(
        kubelet["evictionMaxPodGracePeriod"]["value"],
        k["evictionMaxPodGracePeriod"]
    );
    assert_eq!(kubelet["evictionMaxPodGracePeriod"]["from"], "node");
    assert_eq!(kubelet["shutdownGracePeriodSeconds"]["value"], 0);
    assert_eq!(live[0]["resource"], "deployment/web");
    let from_file = json_of(&podgrace(
        &kc,
        &[
            "explain",
            file.to_str().unwrap(),
            "--trigger",
            "evict-soft",
            "--eviction-max-pod-grace-period",
            &k["evictionMaxPodGracePeriod"].to_string(),
            "-o",
            "json",
        ],
    ));
    assert_eq!(live[0]["containers"], from_file[0]["containers"]);
    assert_eq!(
        live[0]["gracePeriodSeconds"],
        from_file[0]["gracePeriodSeconds"]
    );
    // A flag given wins over the node's value, and says so.
    let flagged = json_of(&podgrace(
        &kc,
        &[
            "explain",
            "pod/solo",
            "--eviction-max-pod-grace-period",
            "20",
            "-o",
            "json",
        ],
    ));
    assert_eq!(
        flagged[0]["kubelet"]["evictionMaxPodGracePeriod"]["from"],
        "flag"
    );
    let text = out(&podgrace(&kc, &["explain", "pod/solo"]));
    assert!(
        text.starts_with("Pod default/solo (pod/solo)  trigger delete"),
        "{text}"
    );
    assert!(
        text.contains("\n  kubelet of node podgrace (configz): evictionMaxPodGracePeriod 0 s, evictionSoft none (it never evicts softly), shutdownGracePeriod 0 s (graceful node shutdown off)\n"),
        "{text}"
    );
    // A workload with no pod on a node: the kubelet's defaults, said to be assumed.
    let text = out(&podgrace(&kc, &["explain", "deployment/api", "-n", "shop"]));
    assert!(
        text.contains("kubelet settings assumed (no pod of it runs on a node)"),
        "{text}"
    );

    // run: a live pod's template runs here, with the ConfigMap it takes its environment from.
    s.ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=GREETING=hello-from-the-api",
    ]);
    s.ok(&[
        "apply",
        "-f",
        s.file(
            "greeter.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: greeter}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'echo $GREETING; exec sleep 30']\n    envFrom: [{configMapRef: {name: settings}}]\n",
        )
        .to_str()
        .unwrap(),
    ]);
    let o = podgrace(&kc, &["run", "pod/greeter", "--delete-after", "1s"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).contains("[pod/greeter/app] hello-from-the-api"),
        "{}",
        out(&o)
    );
    let o = podgrace(&kc, &["run", "pod/nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert_eq!(
        err(&o),
        "Error from server (NotFound): pods \"nope\" not found\n"
    );
}

/// The forbidding front: started on a free port, stopped when dropped.
struct Front {
    child: Child,
    kubeconfig: PathBuf,
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain-HTTP front for `s` that refuses as RBAC would each of `rules`
/// (`VERB|PATH_REGEX|USER|RESOURCE|GROUP|NAME_GROUP`), and a kubeconfig for it (the same token,
/// which podgrace sends; the front adds it for kubectl, which sends none over plain HTTP).
fn front(s: &Serve, rules: &[&str]) -> Front {
    let text = std::fs::read_to_string(&s.kubeconfig).expect("kubeconfig");
    let ca = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .expect("CA in the kubeconfig");
    let ca_pem = base64_decode(ca);
    let ca_file = s.file(&format!("ca-{}.crt", rules.len()), &ca_pem);
    let token = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("token");
    let mut child = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/forbidding_proxy.py"))
        .env("UPSTREAM_TOKEN", token)
        .arg(&s.server)
        .arg(&ca_file)
        .args(rules)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs the forbidding front");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its port");
    let port: u16 = line.trim().parse().expect("a port");
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("server");
    let fronted = text
        .replace(server, &format!("http://127.0.0.1:{port}"))
        .lines()
        .filter(|l| !l.contains("certificate-authority-data"))
        .collect::<Vec<_>>()
        .join("\n");
    let kubeconfig = s.file(&format!("front-{port}.kubeconfig"), &fronted);
    Front { child, kubeconfig }
}

fn base64_decode(s: &str) -> String {
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .expect("base64"),
    )
    .expect("PEM text")
}

/// The last line of kubectl's stderr (kubectl may log warnings before it).
fn last_line(o: &Output) -> String {
    err(o).lines().last().unwrap_or_default().to_string()
}

#[test]
fn errors_are_worded_as_kubectl_words_them() {
    let s = Serve::start("live-errors", &[]);
    let kc = s.kubeconfig.clone();
    s.ok(&[
        "apply",
        "-f",
        s.file("objects.yaml", OBJECTS).to_str().unwrap(),
    ]);
    wait_running(&s, 3);

    // An unknown type, a name with -A: kubectl's lines, exit 2.
    for (ours, theirs) in [
        (vec!["lint", "foo/x"], vec!["get", "foo/x"]),
        (
            vec!["explain", "-A", "deployment/web"],
            vec!["get", "-A", "deployment/web"],
        ),
    ] {
        let o = podgrace(&kc, &ours);
        let k = kubectl(&kc, &theirs);
        assert_eq!(o.status.code(), Some(2), "{ours:?}: {}", err(&o));
        assert_eq!(last_line(&o), last_line(&k), "{ours:?}");
    }

    // Every verb that reads workloads, against each failure kubectl words: not found, a bad
    // token (401), nothing listening (refused, exit 3), RBAC refusing the read (403 with the
    // verb and the resource). Each line is the one `kubectl get` prints for the same object
    // through the same kubeconfig.
    let pod = s.ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let text = std::fs::read_to_string(&kc).expect("kubeconfig");
    let token = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("token");
    let bad = s.file("bad-token", &text.replace(token, "not-the-token"));
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("server");
    let refused = s.file("refused", &text.replace(server, "https://127.0.0.1:1"));
    // The system's roots (ca-certificates) in place of serve's CA: no root signed its cert.
    let roots = std::fs::read("/etc/ssl/certs/ca-certificates.crt").expect("ca-certificates");
    let ca_line = text
        .lines()
        .find(|l| l.trim().starts_with("certificate-authority-data: "))
        .expect("CA in the kubeconfig");
    let wrong_ca = s.file(
        "wrong-ca",
        &text.replace(
            ca_line.trim(),
            &format!(
                "certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(roots)
            ),
        ),
    );
    let f = front(
        &s,
        &[
            "get|/apis/apps/v1/namespaces/([^/]+)/deployments/([^/]+)|jane|deployments|apps|2",
            "get|/api/v1/namespaces/([^/]+)/pods/([^/]+)|jane|pods||2",
        ],
    );
    // (podgrace's arguments, kubectl get's) for an object named NAME of the type.
    let verbs = |deploy: &str, pod: &str| -> Vec<(Vec<String>, Vec<String>)> {
        let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let d = format!("deployment/{deploy}");
        let p = format!("pod/{pod}");
        vec![
            (v(&["explain", &d]), v(&["get", &d])),
            (v(&["lint", &d]), v(&["get", &d])),
            (v(&["explain", &p]), v(&["get", &p])),
            (v(&["run", &d]), v(&["get", &d])),
            (v(&["why", &p]), v(&["get", &p])),
            (
                v(&[
                    "lag",
                    &d,
                    "--target",
                    "http://127.0.0.1:9/",
                    "--allow-context",
                    "podgrace",
                ]),
                v(&["get", &d]),
            ),
        ]
    };
    let cases: [(&str, &Path, &str, &str, i32, &str); 5] = [
        (
            "not found",
            &kc,
            "nope",
            "nope",
            2,
            "Error from server (NotFound): ",
        ),
        (
            "401",
            &bad,
            "web",
            &pod,
            2,
            "error: You must be logged in to the server (Unauthorized)",
        ),
        (
            "refused",
            &refused,
            "web",
            &pod,
            3,
            "The connection to the server 127.0.0.1:1 was refused",
        ),
        (
            "unknown CA",
            &wrong_ca,
            "web",
            &pod,
            3,
            "Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by unknown authority",
        ),
        (
            "403",
            &f.kubeconfig,
            "web",
            &pod,
            2,
            "Error from server (Forbidden): ",
        ),
    ];
    for (what, file, deploy, pod, code, starts) in cases {
        for (ours, theirs) in verbs(deploy, pod) {
            let ours: Vec<&str> = ours.iter().map(String::as_str).collect();
            let theirs: Vec<&str> = theirs.iter().map(String::as_str).collect();
            let o = podgrace(file, &ours);
            let k = kubectl(file, &theirs);
            assert_eq!(o.status.code(), Some(code), "{what}: {ours:?}: {}", err(&o));
            // The line is kubectl's; lag says on a second line what it was doing.
            let line = err(&o).lines().next().unwrap_or_default().to_string();
            assert!(line.starts_with(starts), "{what}: {ours:?}: {}", err(&o));
            assert_eq!(line, last_line(&k), "{what}: {ours:?}");
            if what == "403" {
                assert!(
                    line.contains("\" cannot get resource \""),
                    "{what}: {ours:?}: {line}"
                );
            }
        }
    }
    drop(f);

    // RBAC refuses nodes/proxy (most users' case): the kubelet's defaults are assumed, and
    // said so with the API's own words; kubectl reading configz gets the same 403.
    let f = front(
        &s,
        &["get|/api/v1/nodes/([^/]+)/proxy/.*|jane|nodes/proxy||1"],
    );
    let k = kubectl(
        &f.kubeconfig,
        &["get", "--raw", "/api/v1/nodes/podgrace/proxy/configz"],
    );
    let refusal = "Error from server (Forbidden): nodes \"podgrace\" is forbidden: User \"jane\" cannot get resource \"nodes/proxy\" in API group \"\" at the cluster scope";
    assert_eq!(last_line(&k), refusal);
    let o = podgrace(&f.kubeconfig, &["explain", "deployment/web", "-o", "json"]);
    let doc = json_of(&o);
    let kubelet = &doc[0]["kubelet"];
    assert_eq!(
        kubelet["notRead"],
        format!("node podgrace: {refusal}"),
        "{kubelet:#}"
    );
    assert_eq!(kubelet["evictionMaxPodGracePeriod"]["from"], "assumed");
    assert_eq!(kubelet["shutdownGracePeriodSeconds"]["from"], "assumed");
    assert_eq!(kubelet["shutdownGracePeriodSeconds"]["value"], 30);
    assert!(
        err(&o).contains(&format!(
            "note: the kubelet settings of 1 of 1 nodes could not be read ({refusal})"
        )),
        "{}",
        err(&o)
    );
    let o = podgrace(&f.kubeconfig, &["lint", "deployment/web"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains("their pods are linted without them"),
        "{}",
        err(&o)
    );
    drop(f);

    // RBAC refuses listing Deployments in every namespace: kubectl's line, with the verb and
    // the resource, exit 2.
    let f = front(
        &s,
        &["list|/apis/apps/v1/deployments|jane|deployments|apps|0"],
    );
    let o = podgrace(&f.kubeconfig, &["lint", "-A"]);
    let k = kubectl(&f.kubeconfig, &["get", "deployments", "-A"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert_eq!(
        last_line(&o),
        "Error from server (Forbidden): deployments.apps is forbidden: User \"jane\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"
    );
    assert_eq!(last_line(&o), last_line(&k));
}
