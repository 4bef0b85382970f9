//! `podgrace prestop-wait` as the exec preStop hook of a pod under `podgrace run`: the pod has its
//! own network namespace, the hook runs inside it (as the kubelet's exec does), and the test opens
//! real TCP connections to the pod's address from the host, as a lagging proxy would. The
//! deletion is SIGTERM to podgrace (`kubectl delete`); the hook's end comes from the run report.
//!
//! These tests need root (PID and network namespaces); elsewhere they print why they skip.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// A client that opens a new connection to `addr` every `period` (one `GET /` each, then
/// close), as requests a proxy still sends; it records when its last connection was made.
struct Client {
    stop: Arc<AtomicBool>,
    last: Arc<Mutex<Option<Instant>>>,
    made: Arc<Mutex<u64>>,
    thread: Option<JoinHandle<()>>,
}

impl Client {
    fn start(addr: SocketAddr, period: Duration) -> Client {
        let stop = Arc::new(AtomicBool::new(false));
        let last = Arc::new(Mutex::new(None));
        let made = Arc::new(Mutex::new(0));
        let (s, l, m) = (Arc::clone(&stop), Arc::clone(&last), Arc::clone(&made));
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now();
            while !s.load(Ordering::SeqCst) {
                if let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                    *l.lock().unwrap() = Some(Instant::now());
                    *m.lock().unwrap() += 1;
                    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ =
                        c.write_all(b"GET / HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n");
                    let mut sink = Vec::new();
                    let _ = c.read_to_end(&mut sink);
                }
                next += period;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        });
        Client {
            stop,
            last,
            made,
            thread: Some(thread),
        }
    }

    /// Stops the client; returns when its last connection was made and how many it made.
    fn stop(mut self) -> (Instant, u64) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let last = self
            .last
            .lock()
            .unwrap()
            .expect("the client never connected");
        let made = *self.made.lock().unwrap();
        (last, made)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A pod whose app is `podgrace demo-app` on 8080 (draining on SIGTERM) behind the hook
/// `prestop-wait HOOK_ARGS`, with a second server (another demo app, serving for 4 s after the delete behind a preStop
/// sleep) on 8081 in the same network
/// namespace; its first container writes the pod's address to `{dir}/ip`.
fn pod(name: &str, hook_args: &[&str]) -> String {
    let hook: Vec<String> = ["{podgrace}", "prestop-wait"]
        .iter()
        .chain(hook_args)
        .map(|a| format!("\"{a}\""))
        .collect();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: app\n    image: app\n    command: [sh, -c, \"ip -o -4 addr show dev eth0 > {{dir}}/ip.tmp && mv {{dir}}/ip.tmp {{dir}}/ip; exec {{podgrace}} demo-app --listen 0.0.0.0:8080 --on-sigterm drain --drain-seconds 5\"]\n    lifecycle:\n      preStop:\n        exec: {{command: [{}]}}\n  - name: other\n    image: app\n    command: [{{podgrace}}, demo-app, --listen, \"0.0.0.0:8081\"]\n    lifecycle: {{preStop: {{sleep: {{seconds: 4}}}}}}\n",
        hook.join(", ")
    )
}

fn termination<'a>(r: &'a Value, container: &str) -> &'a Value {
    r["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == container)
        .map(|c| &c["terminations"][0])
        .unwrap_or_else(|| panic!("no container {container} in {r}"))
}

fn secs(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Runs the pod, deletes it, keeps `client_port` busy for `busy_after` after the delete (every
/// 100 ms), and returns (the hook's end after the delete, the last connection after the
/// delete, the report, podgrace's stderr).
fn drill(
    name: &str,
    hook: &[&str],
    client_port: u16,
    busy_after: Duration,
) -> (f64, f64, Value, String) {
    let p = RunningPod::start(name, &pod(name, hook), &[]);
    let ip = p.ip();
    wait_listening(SocketAddr::from((ip, 8080)));
    wait_listening(SocketAddr::from((ip, 8081)));
    let client = Client::start(
        SocketAddr::from((ip, client_port)),
        Duration::from_millis(100),
    );
    std::thread::sleep(Duration::from_millis(500));
    let deleted = p.delete();
    std::thread::sleep(busy_after);
    let (last, made) = client.stop();
    assert!(made >= 5, "the client made only {made} connections");
    let (status, r, err) = p.finish();
    assert!(status.success(), "{err}");
    let t = termination(&r, "app");
    assert_eq!(t["preStop"]["outcome"], "completed", "{t}\n{err}");
    let end = secs(&t["preStop"]["endAfterSeconds"]);
    let last = last.saturating_duration_since(deleted).as_secs_f64();
    // The traffic did reach the pod until the client stopped (or the app on 8080 closed its
    // listener after the hook).
    assert!(
        last >= busy_after.as_secs_f64().min(end) - 0.3,
        "the last connection came {last:.3} s after the delete\n{err}"
    );
    (end, last, r, err)
}

#[test]
fn the_hook_returns_one_quiet_window_after_the_last_new_connection() {
    if !privileged("prestop-wait quiet") {
        return;
    }
    let (end, last, r, err) = drill(
        "pwquiet",
        &["--quiet", "1s", "--max", "20s"],
        8080,
        Duration::from_secs(2),
    );
    // The last connection came about 2 s after the delete; the hook sees it at its next sample
    // (100 ms at most), then waits 1 s of quiet: it ends 1.0 to 1.1 s after it, plus the time
    // the hook takes to exit and the kubelet to see it.
    let after = end - last;
    assert!((0.95..=1.35).contains(&after), "hook ended {end:.3} s after the delete, {after:.3} s after the last connection ({last:.3} s)\n{err}");
    // The stop signal follows the hook at once.
    let t = termination(&r, "app");
    assert!(
        (secs(&t["stopSignalAfterSeconds"]) - end).abs() < 0.05,
        "{t}"
    );
    // Its report reached the container's log (PID 1's stdout), which is where kubectl logs
    // would show it: the run prints container output with the pod/container prefix.
    assert!(err.contains("[pod/pwquiet/app] prestop-wait: waiting until no new connection has arrived in this network namespace for 1.0 s"), "{err}");
    assert!(
        err.contains("[pod/pwquiet/app] prestop-wait: 1 s: "),
        "{err}"
    );
    let done = err
        .lines()
        .find(|l| l.starts_with("[pod/pwquiet/app] prestop-wait: quiet since "))
        .unwrap_or_else(|| panic!("no summary line in {err}"));
    assert!(
        done.contains("the last new connection at ") && done.contains(": done after "),
        "{done}"
    );
}

#[test]
fn connections_that_never_stop_end_the_hook_at_max() {
    if !privileged("prestop-wait max") {
        return;
    }
    let (end, _, _, err) = drill(
        "pwmax",
        &["--quiet", "1s", "--max", "2s"],
        8080,
        Duration::from_secs(3),
    );
    assert!(
        (2.0..=2.25).contains(&end),
        "hook ended {end:.3} s after the delete\n{err}"
    );
    assert!(
        err.contains("[pod/pwmax/app] prestop-wait: not quiet at the maximum of 2.0 s ("),
        "{err}"
    );
}

#[test]
fn with_port_only_connections_to_that_port_count() {
    if !privileged("prestop-wait port") {
        return;
    }
    // The client keeps port 8081 (the other server) busy for 3 s after the delete: the hook
    // watches 8080 only, which is quiet, so it ends after its quiet window ...
    let (end, _, _, err) = drill(
        "pwport",
        &["--quiet", "1s", "--max", "10s", "--port", "8080"],
        8081,
        Duration::from_secs(3),
    );
    assert!(
        (1.0..=1.35).contains(&end),
        "hook ended {end:.3} s after the delete\n{err}"
    );
    assert!(
        err.contains(
            "prestop-wait: waiting until no new connection has arrived on port 8080 for 1.0 s"
        ),
        "{err}"
    );
    // ... while watching the whole namespace it waits for the 8081 traffic too.
    let (end, last, _, err) = drill(
        "pwall",
        &["--quiet", "1s", "--max", "10s"],
        8081,
        Duration::from_secs(3),
    );
    let after = end - last;
    assert!(
        (0.95..=1.35).contains(&after),
        "hook ended {end:.3} s after the delete, {after:.3} s after the last connection\n{err}"
    );
}

#[test]
fn min_holds_a_quiet_pod() {
    if !privileged("prestop-wait min") {
        return;
    }
    let (end, _, _, err) = drill(
        "pwmin",
        &["--quiet", "200ms", "--min", "1500ms", "--max", "5s"],
        8081,
        Duration::ZERO,
    );
    // Nothing arrives after the delete; the quiet window is over at 0.2 s, min holds it to 1.5 s.
    // (The client's last connection may land just after the delete.)
    assert!(
        (1.5..=1.75).contains(&end),
        "hook ended {end:.3} s after the delete\n{err}"
    );
}

#[test]
fn bad_flags_are_refused_before_anything_waits() {
    let out = podgrace(&["prestop-wait", "--min", "5s", "--max", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out).trim(), "error: --max (1s) is below --min (5s)");
    let out = podgrace(&["prestop-wait", "--quiet", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid value 'soon' for '--quiet <DURATION>'"),
        "{}",
        stderr(&out)
    );
    let out = podgrace(&["prestop-wait", "--port", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A stand-in for the Kubernetes API server, as much of it as `--endpoints` uses: the list and
/// watch of EndpointSlices in namespace `default` (the paths, query, bearer token, watch event
/// stream and `Status` errors of the real API). Real kube-apiserver is not available here; the
/// client is the real kube-rs one.
struct FakeApi {
    port: u16,
    /// The watch streams open now; each event is written to all of them.
    watchers: Arc<Mutex<Vec<std::net::TcpStream>>>,
    /// The request lines seen, with the instant each came.
    seen: Arc<Mutex<Vec<(Instant, String)>>>,
}

const TOKEN: &str = "podgrace-test-token";

fn slice(pod: &str, ip: &str, ready: bool, rv: u32) -> Value {
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "web-x7k2p", "namespace": "default", "resourceVersion": rv.to_string(),
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{
            "addresses": [ip],
            "conditions": {"ready": ready, "serving": ready, "terminating": !ready},
            "targetRef": {"kind": "Pod", "namespace": "default", "name": pod}
        }],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    })
}

impl FakeApi {
    /// Serves on all addresses (the pod reaches the host through its gateway). `forbid`: every
    /// request gets the 403 `Status` of a service account without the RBAC.
    fn start(pod: &'static str, pod_ip: String, forbid: bool) -> FakeApi {
        let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let watchers = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (w, s) = (Arc::clone(&watchers), Arc::clone(&seen));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (w, s, ip) = (Arc::clone(&w), Arc::clone(&s), pod_ip.clone());
                std::thread::spawn(move || serve_api(conn, pod, &ip, forbid, &w, &s));
            }
        });
        FakeApi {
            port,
            watchers,
            seen,
        }
    }

    /// Sends a MODIFIED event with the pod's entry no longer ready (terminating) to every watch.
    fn pod_not_ready(&self, pod: &str, ip: &str) {
        let event = serde_json::json!({"type": "MODIFIED", "object": slice(pod, ip, false, 2)});
        let body = format!("{event}\n");
        let chunk = format!("{:x}\r\n{body}\r\n", body.len());
        for w in self.watchers.lock().unwrap().iter_mut() {
            let _ = w.write_all(chunk.as_bytes());
        }
    }

    fn watching(&self) -> usize {
        self.watchers.lock().unwrap().len()
    }
}

fn serve_api(
    mut conn: std::net::TcpStream,
    pod: &str,
    ip: &str,
    forbid: bool,
    watchers: &Mutex<Vec<std::net::TcpStream>>,
    seen: &Mutex<Vec<(Instant, String)>>,
) {
    let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            match std::io::BufRead::read_line(&mut reader, &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            head.push(line.trim_end().to_string());
        }
        let request = head.first().cloned().unwrap_or_default();
        seen.lock().unwrap().push((Instant::now(), request.clone()));
        let authorized = head
            .iter()
            .any(|h| h.eq_ignore_ascii_case(&format!("authorization: Bearer {TOKEN}")));
        let path = request.split_whitespace().nth(1).unwrap_or("");
        let ok_path =
            path.starts_with("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices");
        let respond = |conn: &mut std::net::TcpStream, code: &str, body: &Value| {
            let body = body.to_string();
            let _ = conn.write_all(
                format!("HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).as_bytes(),
            );
        };
        let status = |code: u16, reason: &str, message: String| {
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": message, "reason": reason, "code": code})
        };
        if !authorized {
            respond(
                &mut conn,
                "401 Unauthorized",
                &status(401, "Unauthorized", "Unauthorized".into()),
            );
        } else if forbid || !ok_path {
            respond(&mut conn, "403 Forbidden", &status(403, "Forbidden",
                "endpointslices.discovery.k8s.io is forbidden: User \"system:serviceaccount:default:default\" cannot list resource \"endpointslices\" in API group \"discovery.k8s.io\" in the namespace \"default\"".into()));
        } else if path.contains("watch=true") || path.contains("watch=1") {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
            watchers.lock().unwrap().push(conn.try_clone().unwrap());
        } else {
            let list = serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSliceList",
                "metadata": {"resourceVersion": "1"},
                "items": [slice(pod, ip, true, 1)]
            });
            respond(&mut conn, "200 OK", &list);
        }
    }
}

/// A pod whose hook waits for its EndpointSlice entry (`--endpoints`), with the kubeconfig of
/// [`FakeApi`] at `{dir}/kubeconfig`, written once the pod's address (and so the host's, its
/// gateway) is known.
fn endpoints_pod(name: &str, hook: &[&str]) -> String {
    let mut yaml = pod(name, hook);
    yaml = yaml.replacen(
        "    lifecycle:\n",
        "    env:\n    - {name: KUBECONFIG, value: \"{dir}/kubeconfig\"}\n    - {name: POD_NAME, value: NAME}\n    lifecycle:\n",
        1,
    );
    yaml.replace("value: NAME}", &format!("value: {name}}}"))
}

fn write_kubeconfig(p: &RunningPod, pod_ip: std::net::Ipv4Addr, port: u16) {
    let o = pod_ip.octets();
    let host = std::net::Ipv4Addr::new(o[0], o[1], o[2], 1);
    std::fs::write(
        p.dir.join("kubeconfig"),
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: \"http://{host}:{port}\"}}\nusers:\n- name: sa\n  user: {{token: {TOKEN}}}\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: sa, namespace: default}}\ncurrent-context: fake\n"),
    )
    .unwrap();
}

#[test]
fn with_endpoints_the_hook_waits_for_the_endpointslice_entry_then_a_quiet_window() {
    if !privileged("prestop-wait endpoints") {
        return;
    }
    let name = "pwendpoints";
    let p = RunningPod::start(
        name,
        &endpoints_pod(name, &["--endpoints", "--quiet", "500ms", "--max", "10s"]),
        &[],
    );
    let ip = p.ip();
    let api = FakeApi::start("pwendpoints", ip.to_string(), false);
    write_kubeconfig(&p, ip, api.port);
    wait_listening(SocketAddr::from((ip, 8080)));
    let deleted = p.delete();
    // The hook lists, then watches; the pod's entry is ready: it must wait although no
    // connection arrives.
    let deadline = Instant::now() + Duration::from_secs(5);
    while api.watching() == 0 {
        assert!(
            Instant::now() < deadline,
            "the hook never watched: {:?}",
            api.seen.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_secs(2).saturating_sub(deleted.elapsed()));
    let flipped = deleted.elapsed().as_secs_f64();
    api.pod_not_ready(name, &ip.to_string());
    let (status, r, err) = p.finish();
    assert!(status.success(), "{err}");
    let t = termination(&r, "app");
    assert_eq!(t["preStop"]["outcome"], "completed", "{t}\n{err}");
    let end = secs(&t["preStop"]["endAfterSeconds"]);
    // One quiet window (0.5 s) after the entry left rotation, sampled every 100 ms.
    let after = end - flipped;
    assert!(
        (0.45..=0.85).contains(&after),
        "hook ended {end:.3} s after the delete, {after:.3} s after the entry left rotation\n{err}"
    );
    assert!(err.contains("[pod/pwendpoints/app] prestop-wait: waiting until no new connection has arrived in this network namespace for 0.5 s (at least 0.0 s, at most 10.0 s) and the pod's EndpointSlice entries are no longer ready"), "{err}");
    assert!(
        err.contains(": the pod's endpoints are no longer ready"),
        "{err}"
    );
    assert!(err.contains("endpoints not ready from "), "{err}");
    let seen = api.seen.lock().unwrap();
    assert!(
        seen.iter().any(|(_, l)| l
            .starts_with("GET /apis/discovery.k8s.io/v1/namespaces/default/endpointslices?")),
        "{seen:?}"
    );
}

#[test]
fn with_endpoints_but_no_rbac_the_hook_waits_until_max_and_fails_visibly() {
    if !privileged("prestop-wait endpoints forbidden") {
        return;
    }
    let name = "pwforbidden";
    let p = RunningPod::start(
        name,
        &endpoints_pod(name, &["--endpoints", "--quiet", "500ms", "--max", "2s"]),
        &[],
    );
    let ip = p.ip();
    let api = FakeApi::start("pwforbidden", ip.to_string(), true);
    write_kubeconfig(&p, ip, api.port);
    wait_listening(SocketAddr::from((ip, 8080)));
    p.delete();
    let (status, r, err) = p.finish();
    assert!(status.success(), "{err}");
    let t = termination(&r, "app");
    // Exit 3 after --max: the kubelet records FailedPreStopHook with the reason.
    assert_eq!(t["preStop"]["outcome"], "failed", "{t}\n{err}");
    let end = secs(&t["preStop"]["endAfterSeconds"]);
    assert!(
        (2.0..=2.3).contains(&end),
        "hook ended {end:.3} s after the delete\n{err}"
    );
    assert!(
        err.contains(
            "[pod/pwforbidden/app] prestop-wait: watching EndpointSlices in namespace default: "
        ) && err.contains("cannot list resource \\\"endpointslices\\\"")
            && err.contains(
                "(the pod's service account needs list and watch on endpointslices.discovery.k8s.io)"
            ),
        "{err}"
    );
    assert!(
        r["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "FailedPreStopHook"),
        "{r}"
    );
}
