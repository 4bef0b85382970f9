//! `podgrace serve` as a cluster around its API, with real clients: kube-proxy (real kubectl
//! applies a Deployment of python3 `http.server` pods and a NodePort Service, real curl reaches
//! them through the NodePort and the ClusterIP and follows a scale, and the drill's load
//! generator runs through a `kubectl rollout restart` with and without a preStop longer than the
//! endpoint lag, failures counted and put on pods as the drill does: by the proxy's pinning of
//! each connection), and the node's lifecycle (`kubectl cordon`, `uncordon` and `drain` against
//! a PodDisruptionBudget, the unschedulable taint, `FailedScheduling`).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::serve::Serve;

use podgrace_drill::load::{self, LoadConfig};
use podgrace_drill::proxy::PinnedConnection;

/// kube-proxy's records, in the serve's directory.
const RECORDS: &str = "records.jsonl";

/// `podgrace serve --proxy-records DIR/records.jsonl EXTRA...`.
fn serve_with_records(tag: &str, extra: &[&str]) -> Serve {
    let records = format!("{{dir}}/{RECORDS}");
    let mut args = vec!["--proxy-records", &records];
    args.extend_from_slice(extra);
    Serve::start(tag, &args)
}

/// What these tests ask of a serve besides kubectl.
trait ServeExt {
    /// `kubectl rollout status DEPLOY --timeout=90s`, which must succeed.
    fn rollout_status(&self, deploy: &str);
    /// `pod name → pod IP` of the pods with label `app=APP` that are not terminating.
    fn pod_ips(&self, app: &str) -> Vec<(String, String)>;
    /// The record lines written so far.
    fn record_lines(&self) -> Vec<serde_json::Value>;
}

impl ServeExt for Serve {
    fn rollout_status(&self, deploy: &str) {
        ok(
            &self.kubectl(&["rollout", "status", deploy, "--timeout=90s"]),
            "rollout status",
        );
    }

    fn pod_ips(&self, app: &str) -> Vec<(String, String)> {
        let o = self.kubectl(&[
            "get",
            "pods",
            "-l",
            &format!("app={app}"),
            "-o",
            "jsonpath={range .items[?(@.status.podIP)]}{.metadata.name} {.status.podIP} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
        ]);
        text(&o)
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 2).then(|| (f[0].to_string(), f[1].to_string()))
            })
            .collect()
    }

    fn record_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join(RECORDS))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        text(o),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A ClusterIP and a NodePort of this test process's own (tests of other processes on the
/// machine run their own serve, whose listeners must not collide with these).
fn addresses(offset: u32) -> (String, u16) {
    let n = std::process::id() % 600 * 4 + offset;
    let ip = format!("127.100.{}.{}", (n >> 8) & 0xff, (n & 0xff).max(1));
    (ip, 30000 + (n % 2700) as u16)
}

/// A Deployment of python3 `http.server` pods that answer every GET with the pod's own IP
/// (HTTP/1.0: one request per connection), exit at once on SIGTERM (python as PID 1 would
/// otherwise ignore it until SIGKILL), are ready once the port is open, with an optional exec
/// preStop of `sleep SECONDS`, and a NodePort Service in front.
fn app(
    name: &str,
    replicas: u32,
    pre_stop: Option<u32>,
    cluster_ip: &str,
    node_port: u16,
) -> String {
    let hook = match pre_stop {
        Some(s) => {
            format!("\n        lifecycle: {{preStop: {{exec: {{command: [sleep, '{s}']}}}}}}")
        }
        None => String::new(),
    };
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: web
        image: python:3
        command: [python3, -c, "import http.server,os,signal\nsignal.signal(signal.SIGTERM, lambda *a: os._exit(0))\nclass H(http.server.BaseHTTPRequestHandler):\n  def do_GET(self):\n    b=self.connection.getsockname()[0].encode()\n    self.send_response(200); self.send_header('Content-Length',str(len(b))); self.end_headers(); self.wfile.write(b)\n  def log_message(self,*a): pass\nhttp.server.ThreadingHTTPServer.request_queue_size=128\nhttp.server.ThreadingHTTPServer(('',8080),H).serve_forever()"]
        ports: [{{name: http, containerPort: 8080}}]
        readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 1}}{hook}
---
apiVersion: v1
kind: Service
metadata: {{name: {name}}}
spec:
  type: NodePort
  clusterIP: {cluster_ip}
  selector: {{app: {name}}}
  ports: [{{name: http, port: 80, targetPort: http, nodePort: {node_port}}}]
"#
    )
}

/// One request with real curl: the body (the pod's IP) or `None` if it failed.
fn curl(url: &str) -> Option<String> {
    let o = Command::new("curl")
        .args(["-sS", "-m", "2", "--noproxy", "*", url])
        .output()
        .expect("run curl");
    o.status.success().then(|| text(&o))
}

/// Curls `url` until `want` holds for the bodies of the last `n` requests (each a pod IP), or
/// panics after 30 s with the last bodies.
fn curl_until(url: &str, n: usize, what: &str, want: impl Fn(&[Option<String>]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last: Vec<Option<String>> = Vec::new();
    while Instant::now() < deadline {
        last.push(curl(url));
        if last.len() > n {
            last.remove(0);
        }
        if last.len() == n && want(&last) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: the last curls through {url} answered {last:?}");
}

fn set_of(bodies: &[Option<String>]) -> std::collections::BTreeSet<String> {
    bodies.iter().flatten().cloned().collect()
}

#[test]
fn curl_reaches_the_pods_through_the_node_port_and_the_cluster_ip_and_follows_a_scale() {
    let s = serve_with_records("cluster-curl", &["--endpoint-lag", "in-cluster"]);
    assert!(
        s.stdout.last().unwrap().ends_with("endpoint lag 1.0 s"),
        "{:?}",
        s.stdout
    );
    let (ip, node_port) = addresses(0);
    s.apply("web.yaml", &app("web", 2, None, &ip, node_port));
    s.rollout_status("deployment/web");
    let o = s.kubectl(&[
        "get",
        "service",
        "web",
        "-o",
        "jsonpath={.spec.clusterIP} {.spec.ports[0].nodePort}",
    ]);
    assert_eq!(text(&o), format!("{ip} {node_port}"));
    let node_url = format!("http://127.0.0.1:{node_port}/");
    let cluster_url = format!("http://{ip}/");
    let pods = s.pod_ips("web");
    assert_eq!(pods.len(), 2, "{pods:?}");
    let ips: std::collections::BTreeSet<String> = pods.iter().map(|(_, i)| i.clone()).collect();
    // Round robin over the two ready endpoints, once they reached the proxy (1 s late).
    for url in [&node_url, &cluster_url] {
        curl_until(url, 4, "both pods answer", |b| {
            b.iter().all(Option::is_some) && set_of(b) == ips
        });
    }

    // Scaled up: the third pod gets traffic once its endpoint is ready and has reached the proxy.
    ok(
        &s.kubectl(&["scale", "deployment", "web", "--replicas=3"]),
        "scale up",
    );
    s.rollout_status("deployment/web");
    let three: std::collections::BTreeSet<String> =
        s.pod_ips("web").into_iter().map(|(_, i)| i).collect();
    assert_eq!(three.len(), 3);
    curl_until(&node_url, 6, "three pods answer", |b| {
        b.iter().all(Option::is_some) && set_of(b) == three
    });

    // Scaled down to one: once the victims' endpoints have left the proxy, every connection goes
    // to the one pod left.
    ok(
        &s.kubectl(&["scale", "deployment", "web", "--replicas=1"]),
        "scale down",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let left = loop {
        let p = s.pod_ips("web");
        if p.len() == 1 {
            break p;
        }
        assert!(Instant::now() < deadline, "scale down: {p:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let only = left[0].1.clone();
    curl_until(&cluster_url, 5, "only the pod left answers", |b| {
        b.iter().all(|x| x.as_deref() == Some(only.as_str()))
    });

    // The records name each connection's Service, listener and pod.
    std::thread::sleep(Duration::from_millis(300));
    let lines = s.record_lines();
    assert_eq!(lines[0]["kind"], "epoch");
    assert!(lines[0]["unixMicros"].as_u64().unwrap() > 0);
    let conns: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["kind"] == "connection" && l["outcome"] == "forwarded")
        .collect();
    let node_listen = format!("127.0.0.1:{node_port}");
    let cluster_listen = format!("{ip}:80");
    for listen in [&node_listen, &cluster_listen] {
        assert!(
            conns.iter().any(|c| c["listen"] == listen.as_str()),
            "no connection through {listen}"
        );
    }
    let names: std::collections::BTreeSet<&str> =
        conns.iter().filter_map(|c| c["pod"].as_str()).collect();
    assert!(
        names.contains(left[0].0.as_str()) && names.len() == 3,
        "{names:?}"
    );
    assert!(conns
        .iter()
        .all(|c| c["service"] == "default/web" && c["port"] == "http"));
}

/// The outcome of a `kubectl rollout restart` under load: the load's failures, each with the
/// pod its connection was pinned to, and the pods of the Deployment before the restart.
struct Rollout {
    requests: usize,
    failures: Vec<(podgrace_drill::load::RequestOutcome, Option<String>)>,
    old_pods: Vec<String>,
}

/// 100 requests/s for 8 s through the ClusterIP of `name`; a `kubectl rollout restart` 1 s in.
fn restart_under_load(s: &Serve, name: &str, ip: &str) -> Rollout {
    let old_pods: Vec<String> = s.pod_ips(name).into_iter().map(|(n, _)| n).collect();
    let url = format!("http://{ip}/");
    curl_until(&url, 4, "the pods answer", |b| {
        b.iter().all(Option::is_some)
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut cfg = LoadConfig::new(format!("{ip}:80").parse().unwrap(), Duration::from_secs(8));
    cfg.rps = 100.0;
    cfg.connections = 8;
    cfg.timeout = Duration::from_secs(2);
    let load_epoch_wall = SystemTime::now();
    cfg.epoch = tokio::time::Instant::now();
    let result = rt.block_on(async {
        let load = tokio::spawn(load::run(cfg));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let o = s.kubectl(&["rollout", "restart", &format!("deployment/{name}")]);
        assert_eq!(text(&o), format!("deployment.apps/{name} restarted\n"));
        load.await.unwrap().unwrap()
    });
    s.rollout_status(&format!("deployment/{name}"));
    std::thread::sleep(Duration::from_millis(300));
    // The proxy's pinnings, on the load's clock.
    let lines = s.record_lines();
    let epoch_us = lines[0]["unixMicros"].as_u64().unwrap() as i128;
    let load_us = load_epoch_wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i128;
    let shift = load_us - epoch_us;
    let pinned: Vec<PinnedConnection> = lines
        .iter()
        .filter(|l| l["kind"] == "pinned" && l["service"] == format!("default/{name}"))
        .filter_map(|l| {
            let opened_us = l["opened"]["secs"].as_u64()? as i128 * 1_000_000
                + l["opened"]["nanos"].as_u64()? as i128 / 1000;
            Some(PinnedConnection {
                connection: l["connection"].as_u64()?,
                client: l["client"].as_str()?.parse().ok()?,
                opened: Duration::from_micros((opened_us - shift).max(0) as u64),
                pod: l["pod"].as_str()?.to_string(),
            })
        })
        .collect();
    let attributions = podgrace_drill::report::attribute(&result.records, &[], &pinned, &[]);
    Rollout {
        requests: result.records.len(),
        failures: attributions
            .into_iter()
            .map(|a| (a.outcome, a.pod))
            .collect(),
        old_pods,
    }
}

/// The endpoint race of a rollout, through serve's own controllers, kubelet and kube-proxy
/// (endpoint lag 1 s): an old pod's endpoint leaves the proxy 1 s after its termination starts.
/// With a preStop of 3 s the pod still serves until then: no request fails. Without one the pod
/// exits at its SIGTERM, and the connections the proxy still sends it in that second fail;
/// every failure is on an old pod.
#[test]
fn a_rollout_restart_under_load_fails_without_a_prestop_and_not_with_one_longer_than_the_lag() {
    let s = serve_with_records("cluster-rollout", &["--endpoint-lag", "1s"]);
    let (ip_a, np_a) = addresses(1);
    let (ip_b, np_b) = addresses(2);
    s.apply("safe.yaml", &app("safe", 2, Some(3), &ip_a, np_a));
    s.apply("bare.yaml", &app("bare", 2, None, &ip_b, np_b));
    s.rollout_status("deployment/safe");
    s.rollout_status("deployment/bare");

    let safe = restart_under_load(&s, "safe", &ip_a);
    assert!(safe.requests >= 790, "{} requests", safe.requests);
    assert!(
        safe.failures.is_empty(),
        "with a preStop of 3 s and a lag of 1 s: {:?} (old pods {:?})",
        safe.failures,
        safe.old_pods
    );

    let bare = restart_under_load(&s, "bare", &ip_b);
    assert!(bare.requests >= 790, "{} requests", bare.requests);
    assert!(
        !bare.failures.is_empty(),
        "without a preStop, connections sent to an exited pod within the lag fail"
    );
    for (outcome, pod) in &bare.failures {
        let pod = pod.as_deref().unwrap_or("-");
        assert!(
            bare.old_pods.iter().any(|p| p == pod),
            "a {outcome:?} on {pod}, not one of the old pods {:?}",
            bare.old_pods
        );
    }
    eprintln!(
        "rollout restart under load: with preStop 3 s {} failures of {}; without {} of {}",
        safe.failures.len(),
        safe.requests,
        bare.failures.len(),
        bare.requests
    );
}

#[test]
fn a_bad_endpoint_lag_is_refused_with_exit_2() {
    let o = Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(["serve", "--endpoint-lag", "soon"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--endpoint-lag") && e.contains("in-cluster, ingress, cloud-lb, kube-proxy"),
        "{e}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_podgrace"))
        .args(["serve", "--endpoint-lag", "25h"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--endpoint-lag must be at most 24h"));
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Polls `kubectl ARGS` until its output is `want`, or panics after 30 s with the last output.
fn kubectl_until(s: &Serve, args: &[&str], want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = text(&s.kubectl(args));
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?}: {got:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

const DRAIN_APP: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      terminationGracePeriodSeconds: 10\n      containers: [{name: app, image: 'busybox:1.36', command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 0.1; done']}]\n";

fn pdb(min_available: u32) -> String {
    format!("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web-pdb}}\nspec:\n  minAvailable: {min_available}\n  selector: {{matchLabels: {{app: web}}}}\n")
}

const FAILED_SCHEDULING: &str = "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";

/// `kubectl cordon` sets `spec.unschedulable` and the node lifecycle controller adds the
/// unschedulable taint; a pod created meanwhile stays Pending with `PodScheduled=False
/// Unschedulable` and the scheduler's `FailedScheduling` event in the recorded words; after
/// `kubectl uncordon` the taint goes and the scheduler binds the pod, which then runs.
#[test]
fn a_pod_created_on_a_cordoned_node_stays_pending_until_uncordon() {
    let s = serve_with_records("cluster-cordon", &[]);
    kubectl_until(&s, &["get", "nodes", "-o", "name"], "node/podgrace\n");
    let o = s.kubectl(&["cordon", "podgrace"]);
    assert_eq!(text(&o), "node/podgrace cordoned\n", "{}", stderr(&o));
    kubectl_until(
        &s,
        &[
            "get",
            "node",
            "podgrace",
            "-o",
            "jsonpath={.spec.unschedulable} {.spec.taints[*].key} {.spec.taints[*].effect}",
        ],
        "true node.kubernetes.io/unschedulable NoSchedule",
    );
    // SwapNodeControllerTaint stamps the taint it adds.
    let added = s.ok(&[
        "get",
        "node",
        "podgrace",
        "-o",
        "jsonpath={.spec.taints[0].timeAdded}",
    ]);
    assert!(added.ends_with('Z') && added.len() == 20, "{added:?}");
    s.apply(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: late}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers: [{name: app, image: 'busybox:1.36', command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 0.1; done']}]\n",
    );
    kubectl_until(
        &s,
        &["get", "pod", "late", "-o", "jsonpath={.status.phase}|{.spec.nodeName}|{.status.conditions[0].type} {.status.conditions[0].status} {.status.conditions[0].reason}|{.status.conditions[0].message}"],
        &format!("Pending||PodScheduled False Unschedulable|{FAILED_SCHEDULING}"),
    );
    let o = s.kubectl(&["get", "events", "--field-selector", "involvedObject.name=late,reason=FailedScheduling", "-o", "jsonpath={range .items[*]}{.type} {.reportingComponent} {.action}: {.message}{\"\\n\"}{end}"]);
    assert_eq!(
        text(&o),
        format!("Warning default-scheduler Scheduling: {FAILED_SCHEDULING}\n"),
        "one event: the node did not change"
    );
    let o = s.kubectl(&["describe", "pod", "late"]);
    assert!(
        text(&o).contains("Warning  FailedScheduling  ")
            && text(&o).contains(&format!("default-scheduler  {FAILED_SCHEDULING}")),
        "{}",
        text(&o)
    );

    let o = s.kubectl(&["uncordon", "podgrace"]);
    assert_eq!(text(&o), "node/podgrace uncordoned\n", "{}", stderr(&o));
    kubectl_until(
        &s,
        &[
            "get",
            "node",
            "podgrace",
            "-o",
            "jsonpath={.spec.unschedulable}|{.spec.taints}",
        ],
        "|",
    );
    kubectl_until(
        &s,
        &[
            "get",
            "pod",
            "late",
            "-o",
            "jsonpath={.spec.nodeName} {.status.phase}",
        ],
        "podgrace Running",
    );
    let o = s.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=late,reason=Scheduled",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert_eq!(text(&o), "Successfully assigned default/late to podgrace");
}

/// `kubectl drain --ignore-daemonsets --grace-period=1` against a budget with minAvailable 2:
/// both evictions are refused with kubectl's retry line every 5 s and the drain gives up at its
/// timeout, as on a 1.32 cluster (case e). Then a drain without a timeout, with the budget
/// lowered to 1 (one pod evicted, its replacement Pending on the cordoned node with
/// `FailedScheduling`, the other refused) and to 0 (the other evicted): the drain completes.
/// `kubectl uncordon` lets the replacements run.
#[test]
fn kubectl_drain_is_held_by_a_budget_then_completes_when_it_allows() {
    let s = serve_with_records("cluster-drain", &[]);
    s.apply("web.yaml", DRAIN_APP);
    s.apply("pdb.yaml", &pdb(2));
    s.rollout_status("deployment/web");
    kubectl_until(
        &s,
        &["get", "pdb", "web-pdb", "-o", "jsonpath={.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed}"],
        "2 2 0",
    );
    let old: Vec<String> = s.pod_ips("web").into_iter().map(|(n, _)| n).collect();
    assert_eq!(old.len(), 2);

    let o = s.kubectl(&[
        "drain",
        "podgrace",
        "--ignore-daemonsets",
        "--grace-period=1",
        "--timeout=6s",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", text(&o), stderr(&o));
    assert!(
        text(&o).starts_with("node/podgrace cordoned\n"),
        "{}",
        text(&o)
    );
    for p in &old {
        assert!(
            text(&o).contains(&format!("evicting pod default/{p}\n")),
            "{}",
            text(&o)
        );
        let retry = format!("error when evicting pods/\"{p}\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.");
        assert!(stderr(&o).contains(&retry), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!(
                "error when evicting pods/\"{p}\" -n \"default\": global timeout reached: 6s"
            )),
            "{}",
            stderr(&o)
        );
    }
    assert!(
        stderr(&o).contains("There are pending nodes to be drained:\n podgrace\n"),
        "{}",
        stderr(&o)
    );
    assert_eq!(s.pod_ips("web").len(), 2, "nothing was evicted");

    // A drain that waits; the budget is lowered while it retries.
    let mut drain = Command::new("/usr/bin/kubectl")
        .args([
            "drain",
            "podgrace",
            "--ignore-daemonsets",
            "--grace-period=1",
        ])
        .env("KUBECONFIG", &s.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out_lines = BufReader::new(drain.stdout.take().unwrap()).lines();
    let err_lines = BufReader::new(drain.stderr.take().unwrap()).lines();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        out_lines
            .map_while(Result::ok)
            .for_each(|l| drop(tx.send(l)))
    });
    std::thread::spawn(move || {
        err_lines
            .map_while(Result::ok)
            .for_each(|l| drop(tx2.send(l)))
    });
    let mut seen: Vec<String> = Vec::new();
    let mut wait_for = |pred: &dyn Fn(&str) -> bool, what: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) => {
                    seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(_) => panic!("{what}: drain printed {seen:#?}"),
            }
        }
    };
    assert_eq!(
        wait_for(&|l| l.starts_with("node/"), "cordon"),
        "node/podgrace already cordoned"
    );
    wait_for(&|l| l.contains("(will retry after 5s)"), "refused");
    s.apply("pdb.yaml", &pdb(1));
    let first = wait_for(&|l| l.ends_with(" evicted"), "one evicted");
    let evicted = first
        .trim_start_matches("pod/")
        .trim_end_matches(" evicted")
        .to_string();
    assert!(old.contains(&evicted), "{first}");
    // Its replacement cannot be scheduled on the cordoned node.
    kubectl_until(
        &s,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=FailedScheduling",
            "-o",
            "jsonpath={.items[0].message}",
        ],
        FAILED_SCHEDULING,
    );
    let o = s.kubectl(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "--field-selector=status.phase=Pending",
        "-o",
        "name",
    ]);
    assert_eq!(text(&o).lines().count(), 1, "{}", text(&o));
    // The other is refused while the replacement is not healthy.
    wait_for(
        &|l| l.contains("(will retry after 5s)"),
        "the other refused",
    );
    s.apply("pdb.yaml", &pdb(0));
    let second = wait_for(&|l| l.ends_with(" evicted"), "the other evicted");
    assert_ne!(first, second);
    assert_eq!(
        wait_for(&|l| l.starts_with("node/"), "drained"),
        "node/podgrace drained"
    );
    let status = drain.wait().unwrap();
    assert!(status.success(), "{seen:#?}");

    let o = s.kubectl(&["uncordon", "podgrace"]);
    assert_eq!(text(&o), "node/podgrace uncordoned\n");
    s.rollout_status("deployment/web");
    let now: Vec<String> = s.pod_ips("web").into_iter().map(|(n, _)| n).collect();
    assert_eq!(now.len(), 2);
    assert!(now.iter().all(|p| !old.contains(p)), "{now:?} {old:?}");
}
