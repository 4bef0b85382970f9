//! The recorded facts of `shared/cases/real-cluster-1.32.md` as inputs: the statuses and events
//! the real 1.32 cluster stored, and what `why` must conclude from them.

use super::*;
use serde_json::{json, Value};

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn event(v: Value) -> Event {
    serde_json::from_value(v).unwrap()
}

/// A kubelet event about container `c` of pod `name`, at `ts` (whole seconds, as recorded:
/// firstTimestamp = lastTimestamp, count 1).
fn kubelet_event(name: &str, c: &str, type_: &str, reason: &str, ts: &str, message: &str) -> Event {
    event(json!({
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": format!("{name}.{reason}"), "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": name,
                           "apiVersion": "v1", "fieldPath": format!("spec.containers{{{c}}}")},
        "type": type_, "reason": reason, "message": message, "count": 1,
        "firstTimestamp": ts, "lastTimestamp": ts,
        "source": {"component": "kubelet", "host": "sanode"},
        "reportingComponent": "kubelet", "reportingInstance": "sanode"
    }))
}

/// A pod object as the recorded cluster stored it, built from its name up: the metadata the
/// API set (namespace `default`), one spec, the status the kubelet wrote.
struct RecordedPod {
    metadata: serde_json::Map<String, Value>,
    spec: Value,
    status: serde_json::Map<String, Value>,
}

impl RecordedPod {
    /// A pod named `name` in `default` with one container `app` (image `x`) and no grace of
    /// its own.
    fn new(name: &str) -> RecordedPod {
        let mut metadata = serde_json::Map::new();
        metadata.insert("name".into(), json!(name));
        metadata.insert("namespace".into(), json!("default"));
        RecordedPod {
            metadata,
            spec: json!({"containers": [{"name": "app", "image": "x"}]}),
            status: serde_json::Map::new(),
        }
    }

    /// The pod of cases a to c (uid `uid-NAME`): TGPS 10, exec preStop `sleep 3`, an app that
    /// ignores SIGTERM.
    fn term(name: &str) -> RecordedPod {
        RecordedPod::new(name)
            .meta("uid", json!(format!("uid-{name}")))
            .spec(json!({"terminationGracePeriodSeconds": 10, "containers": [{
                "name": "app", "image": "docker.io/library/sa-app:1",
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "3"]}}}
            }]}))
    }

    /// Sets `metadata.KEY`.
    fn meta(mut self, key: &str, value: Value) -> RecordedPod {
        self.metadata.insert(key.into(), value);
        self
    }

    /// `deletionTimestamp` (RFC 3339, whole seconds) and `deletionGracePeriodSeconds`.
    fn deleted(self, timestamp: &str, grace_seconds: i64) -> RecordedPod {
        self.meta("deletionTimestamp", json!(timestamp))
            .meta("deletionGracePeriodSeconds", json!(grace_seconds))
    }

    /// Replaces the spec.
    fn spec(mut self, spec: Value) -> RecordedPod {
        self.spec = spec;
        self
    }

    /// Sets `status.KEY` (`phase`, `reason`, `message`, `conditions`).
    fn status(mut self, key: &str, value: Value) -> RecordedPod {
        self.status.insert(key.into(), value);
        self
    }

    /// `status.phase`.
    fn phase(self, phase: &str) -> RecordedPod {
        self.status("phase", json!(phase))
    }

    /// Appends one entry of `status.containerStatuses`.
    fn container(mut self, status: Value) -> RecordedPod {
        let list = self
            .status
            .entry("containerStatuses")
            .or_insert_with(|| json!([]));
        list.as_array_mut().expect("a list").push(status);
        self
    }

    fn build(self) -> Pod {
        pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": self.metadata, "spec": self.spec, "status": self.status
        }))
    }
}

/// The status of container `app` that terminated with `code` and `reason`.
fn terminated(code: i32, reason: &str, started: &str, finished: &str) -> Value {
    json!({"name": "app", "ready": false, "restartCount": 0, "image": "sa-app:1", "imageID": "",
           "state": {"terminated": {"exitCode": code, "reason": reason,
                                    "startedAt": started, "finishedAt": finished}}})
}

/// `status` (of [`terminated`]) after the kubelet restarted the container `restarts` times:
/// its state moves to `lastState`, `state` is the new one.
fn restarted(mut status: Value, state: Value, restarts: u32) -> Value {
    status["lastState"] = status["state"].take();
    status["state"] = state;
    status["restartCount"] = json!(restarts);
    status
}

fn ids(f: &Forensics) -> Vec<&'static str> {
    f.findings.iter().map(|x| x.id).collect()
}

fn find<'a>(f: &'a Forensics, id: &str) -> &'a Finding {
    f.findings
        .iter()
        .find(|x| x.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:#?}", f.findings))
}

#[test]
fn case_a_exit_137_at_the_grace_deadline_is_a_sigkill_of_an_app_ignoring_sigterm() {
    // Delete at 09:12:53.24 with --grace-period=5: deletionTimestamp 09:12:58Z, DGPS 5; at
    // +5223 ms phase Failed, terminated reason Error exit 137 (the app died at +5145 ms:
    // 09:12:58.385, stored as 09:12:58Z).
    let p = RecordedPod::term("term-a")
        .deleted("2026-12-01T09:12:58Z", 5)
        .phase("Failed")
        .container(terminated(
            137,
            "Error",
            "2026-12-01T09:12:40Z",
            "2026-12-01T09:12:58Z",
        ))
        .build();
    let events = [
        kubelet_event(
            "term-a",
            "app",
            "Normal",
            "Started",
            "2026-12-01T09:12:40Z",
            "Started container app",
        ),
        kubelet_event(
            "term-a",
            "app",
            "Normal",
            "Killing",
            "2026-12-01T09:12:53Z",
            "Stopping container app",
        ),
    ];
    let f = explain(Some(&p), "default", "term-a", &events);
    assert_eq!(f.phase, "Failed");
    let d = f.deletion.as_ref().unwrap();
    assert_eq!(d.deletion_timestamp, "2026-12-01T09:12:58Z");
    assert_eq!(d.deletion_grace_period_seconds, Some(5));
    assert_eq!(d.deleted_at.as_deref(), Some("2026-12-01T09:12:53Z"));
    let t = f.containers[0].terminated.as_ref().unwrap();
    assert_eq!((t.exit_code, t.reason.as_str()), (137, "Error"));
    assert_eq!(t.after_delete_seconds, Some(5));
    assert_eq!(ids(&f), ["deleted", "killedAtGraceDeadline"]);
    let k = find(&f, "killedAtGraceDeadline");
    assert!(k.inferred);
    assert_eq!(k.container.as_deref(), Some("app"));
    assert!(
        k.message.starts_with("exit 137 5 s after the delete (grace 5 s): SIGKILL at the grace deadline; the app did not exit on the stop signal (PID 1 without a handler?"),
        "{}",
        k.message
    );
    assert!(
        k.message.contains("preStop (exec sleep 3) ran first"),
        "{}",
        k.message
    );
    assert_eq!(f.events.len(), 2);
    assert_eq!(f.events[1].reason, "Killing");
}

#[test]
fn case_a_after_the_final_delete_dgps_0_is_read_as_such() {
    // The MODIFIED at +5811 ms: DGPS 0, deletionTimestamp moved back to 09:12:53Z.
    let p = RecordedPod::term("term-a")
        .deleted("2026-12-01T09:12:53Z", 0)
        .phase("Failed")
        .container(terminated(
            137,
            "Error",
            "2026-12-01T09:12:40Z",
            "2026-12-01T09:12:58Z",
        ))
        .build();
    let f = explain(Some(&p), "default", "term-a", &[]);
    // The timestamp is now the delete's time itself.
    assert_eq!(
        f.deletion.as_ref().unwrap().deleted_at.as_deref(),
        Some("2026-12-01T09:12:53Z")
    );
    assert_eq!(ids(&f), ["deleted", "killedAtGraceDeadline"]);
    assert!(find(&f, "deleted")
        .message
        .contains("the kubelet's final delete moved deletionTimestamp back"));
    let k = find(&f, "killedAtGraceDeadline");
    assert!(
        k.message.starts_with("exit 137 5 s after the delete: SIGKILL, at the grace deadline if the delete's grace was about 5 s (or 3 s with a preStop that used it all)"),
        "{}",
        k.message
    );
    assert_eq!(
        f.containers[0]
            .terminated
            .as_ref()
            .unwrap()
            .after_delete_seconds,
        Some(5)
    );
}

#[test]
fn from_1_33_the_final_delete_leaves_its_own_time_and_the_killing_event_dates_the_delete() {
    // The same termination on 1.33+: the final delete's timestamp is not put in the past, so
    // it is the final delete's time (after the exit); the Killing event dates the delete.
    let p = RecordedPod::term("term-a")
        .deleted("2026-12-01T09:12:59Z", 0)
        .meta("finalizers", json!(["example.com/keep"]))
        .phase("Failed")
        .container(terminated(
            137,
            "Error",
            "2026-12-01T09:12:40Z",
            "2026-12-01T09:12:58Z",
        ))
        .build();
    let events = [kubelet_event(
        "term-a",
        "app",
        "Normal",
        "Killing",
        "2026-12-01T09:12:53Z",
        "Stopping container app",
    )];
    let f = explain(Some(&p), "default", "term-a", &events);
    assert_eq!(
        f.deletion.as_ref().unwrap().deleted_at.as_deref(),
        Some("2026-12-01T09:12:53Z")
    );
    let d = find(&f, "deleted");
    assert!(d.inferred);
    assert!(
        d.message
            .starts_with("deleted at about 2026-12-01T09:12:53Z (the kubelet's Killing event)"),
        "{}",
        d.message
    );
    assert_eq!(
        f.containers[0]
            .terminated
            .as_ref()
            .unwrap()
            .after_delete_seconds,
        Some(5)
    );
    // Without the event the delete's time is unknown, and said so.
    let f = explain(Some(&p), "default", "term-a", &[]);
    assert_eq!(f.deletion.as_ref().unwrap().deleted_at, None);
    assert!(find(&f, "deleted")
        .message
        .contains("when the delete came is no longer stored"));
}

#[test]
fn a_force_deleted_pod_kept_by_a_finalizer_is_read_with_the_kubelets_minimum_grace() {
    // Case b's arithmetic with the object kept: DGPS 0 while the container still ran; the
    // preStop (exec sleep 3) cut at 1 s, SIGKILL 2 s later: exit 137 3 s after the delete.
    let p = RecordedPod::term("term-b")
        .deleted("2026-12-01T09:01:52Z", 0)
        .meta("finalizers", json!(["example.com/keep"]))
        .phase("Running")
        .container(terminated(
            137,
            "Error",
            "2026-12-01T09:01:00Z",
            "2026-12-01T09:01:55Z",
        ))
        .build();
    let f = explain(Some(&p), "default", "term-b", &[]);
    assert_eq!(ids(&f), ["forceDeleted", "preStopCut"]);
    assert!(find(&f, "preStopCut")
        .message
        .contains("3 s after the delete (grace 1 s)"));
}

#[test]
fn case_b_a_force_deleted_pod_is_gone_and_its_events_show_the_cut_prestop() {
    // Force delete at 09:01:52; the object is gone 88 ms later. Killing at +89 ms, and after
    // the object was gone FailedPreStopHook at +3110 ms (the hook cut at 1 s died with the
    // container, SIGKILLed at +3.1 s).
    let events = [
        kubelet_event(
            "term-b",
            "app",
            "Normal",
            "Killing",
            "2026-12-01T09:01:52Z",
            "Stopping container app",
        ),
        kubelet_event(
            "term-b",
            "app",
            "Warning",
            "FailedPreStopHook",
            "2026-12-01T09:01:55Z",
            "PreStopHook failed",
        ),
        // Another pod's event is not read.
        kubelet_event(
            "web-x",
            "app",
            "Normal",
            "Killing",
            "2026-12-01T09:01:52Z",
            "Stopping container app",
        ),
    ];
    let f = explain(None, "default", "term-b", &events);
    assert!(!f.object_present);
    assert_eq!(f.events.len(), 2);
    assert_eq!(ids(&f), ["podGone", "preStopFailed", "deleted"]);
    let h = find(&f, "preStopFailed");
    assert!(h.inferred);
    assert!(
        h.message.starts_with("FailedPreStopHook \"PreStopHook failed\" 3 s after Killing: the hook was still running when its container was killed"),
        "{}",
        h.message
    );
    assert!(find(&f, "deleted").message.contains("2026-12-01T09:01:52Z"));
}

#[test]
fn case_c_a_second_shorter_delete_did_not_shorten_the_kill() {
    // First delete at 09:02:35 with grace 30 (deletionTimestamp 09:03:05Z), a second with
    // grace 3 moved it to 09:02:38Z; SIGKILL at +30185 ms (09:03:05.2), phase Failed at +30290.
    let p = RecordedPod::term("term-c")
        .deleted("2026-12-01T09:02:38Z", 3)
        .phase("Failed")
        .container(terminated(
            137,
            "Error",
            "2026-12-01T09:02:20Z",
            "2026-12-01T09:03:05Z",
        ))
        .build();
    let f = explain(Some(&p), "default", "term-c", &[]);
    let s = find(&f, "secondDeleteDidNotShorten");
    assert!(s.inferred);
    assert!(
        s.message
            .starts_with("exit 137 27 s after the deletionTimestamp"),
        "{}",
        s.message
    );
    assert!(!ids(&f).contains(&"killedAtGraceDeadline"));
}

#[test]
fn case_d_a_rollout_pod_that_exits_0_on_sigterm_stopped_on_the_stop_signal() {
    // Deleted at +845 ms with grace 10 (preStop sleep 2; the app exits on SIGTERM); phase
    // Succeeded at +3064 ms, container Completed exit 0.
    let p = RecordedPod::new("web-6648d7dcdb-6md6d")
        .meta("uid", json!("u1"))
        .deleted("2026-12-01T10:00:10Z", 10)
        .spec(
            json!({"terminationGracePeriodSeconds": 10, "containers": [{"name": "app", "image": "x",
                 "lifecycle": {"preStop": {"sleep": {"seconds": 2}}}}]}),
        )
        .phase("Succeeded")
        .container(terminated(
            0,
            "Completed",
            "2026-12-01T09:59:00Z",
            "2026-12-01T10:00:02Z",
        ))
        .build();
    let f = explain(Some(&p), "default", "web-6648d7dcdb-6md6d", &[]);
    assert_eq!(ids(&f), ["deleted", "exitedOnStopSignal"]);
    let e = find(&f, "exitedOnStopSignal");
    assert_eq!(
        e.message,
        "exited 0 2 s after the delete (grace 10 s), before the grace deadline: it stopped on the stop signal (after its preStop, sleep 2 s)"
    );
}

#[test]
fn a_hung_prestop_shows_as_sigkill_two_seconds_past_the_deadline() {
    // The kubelet's arithmetic (real-cluster-1.32.md b, README "Reference model" 2): a hook
    // that uses the whole grace gets cut, the stop signal then gets the 2 s minimum.
    let p = RecordedPod::term("hung")
        .deleted("2026-12-01T11:00:10Z", 10)
        .phase("Failed")
        .container(terminated(
            137,
            "Error",
            "2026-12-01T10:59:00Z",
            "2026-12-01T11:00:12Z",
        ))
        .build();
    let f = explain(Some(&p), "default", "hung", &[]);
    let c = find(&f, "preStopCut");
    assert!(c.inferred);
    assert!(
        c.message
            .contains("the preStop (exec sleep 3) used the whole grace and was cut off"),
        "{}",
        c.message
    );
    assert!(
        c.message
            .contains("Inferred from the timestamps: upstream emits no event"),
        "{}",
        c.message
    );
}

#[test]
fn an_api_eviction_is_read_from_the_disruption_target_condition() {
    // Case e/f: DisruptionTarget=True EvictionByEvictionAPI "Eviction API: evicting", then the
    // delete with grace = TGPS 10.
    let p = RecordedPod::new("web-1")
        .deleted("2026-12-01T12:00:10Z", 10)
        .spec(json!({"terminationGracePeriodSeconds": 10, "containers": [{"name": "app", "image": "x"}]}))
        .phase("Running")
        .status("conditions", json!([{"type": "DisruptionTarget", "status": "True",
                                      "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}]))
        .container(json!({"name": "app", "ready": true, "restartCount": 0,
                          "image": "x", "imageID": "", "state": {"running": {"startedAt": "2026-12-01T11:00:00Z"}}}))
        .build();
    let f = explain(Some(&p), "default", "web-1", &[]);
    assert_eq!(ids(&f), ["deleted", "disruptionTarget", "stillTerminating"]);
    assert!(find(&f, "disruptionTarget")
        .message
        .starts_with("DisruptionTarget EvictionByEvictionAPI: evicted through the Eviction API"));
}

#[test]
fn a_node_pressure_eviction_names_the_threshold_and_the_grace() {
    let p = RecordedPod::new("hog")
        .phase("Failed")
        .status("reason", json!("Evicted"))
        .status("message", json!("The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "))
        .container(terminated(137, "Error", "2026-12-01T11:00:00Z", "2026-12-01T11:10:01Z"))
        .build();
    let f = explain(Some(&p), "default", "hog", &[]);
    assert_eq!(ids(&f), ["evicted"]);
    let e = find(&f, "evicted");
    assert!(e.message.starts_with("Evicted by the kubelet: The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. A hard threshold kills with a grace of 1 s"), "{}", e.message);
}

#[test]
fn an_oom_kill_ran_no_prestop() {
    let cs = restarted(
        terminated(
            137,
            "OOMKilled",
            "2026-12-01T11:00:00Z",
            "2026-12-01T11:00:07Z",
        ),
        json!({"waiting": {"reason": "CrashLoopBackOff"}}),
        4,
    );
    let p = RecordedPod::term("oom")
        .phase("Running")
        .container(cs)
        .build();
    let f = explain(Some(&p), "default", "oom", &[]);
    assert_eq!(f.containers[0].last, Some("lastState"));
    assert_eq!(f.containers[0].state, "waiting (CrashLoopBackOff)");
    let o = find(&f, "oomKilled");
    assert!(!o.inferred);
    assert!(o.message.starts_with("OOMKilled (exit 137) at 2026-12-01T11:00:07Z: the kernel killed it at its memory limit; no preStop ran"), "{}", o.message);
    assert!(o.message.ends_with("restarted 4 times"));
}

#[test]
fn a_liveness_kill_counts_the_failures_and_names_the_probes_grace() {
    let cs = restarted(
        terminated(137, "Error", "2026-12-01T11:00:00Z", "2026-12-01T11:00:12Z"),
        json!({"running": {"startedAt": "2026-12-01T11:00:13Z"}}),
        1,
    );
    let p = RecordedPod::new("live")
        .spec(
            json!({"terminationGracePeriodSeconds": 30, "containers": [{"name": "app", "image": "x",
            "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1,
                              "failureThreshold": 3, "terminationGracePeriodSeconds": 5}}]}),
        )
        .phase("Running")
        .container(cs)
        .build();
    let mut unhealthy = kubelet_event(
        "live",
        "app",
        "Warning",
        "Unhealthy",
        "2026-12-01T11:00:07Z",
        "Liveness probe failed: ",
    );
    unhealthy.count = Some(3);
    let events = [
        unhealthy,
        kubelet_event(
            "live",
            "app",
            "Normal",
            "Killing",
            "2026-12-01T11:00:07Z",
            "Container app failed liveness probe, will be restarted",
        ),
    ];
    let f = explain(Some(&p), "default", "live", &events);
    assert_eq!(ids(&f), ["livenessKill"]);
    let l = find(&f, "livenessKill");
    assert!(
        l.message
            .starts_with("liveness probe failed 3 times (failureThreshold 3)"),
        "{}",
        l.message
    );
    assert!(
        l.message
            .contains("with the probe's terminationGracePeriodSeconds of 5 s"),
        "{}",
        l.message
    );
}

#[test]
fn a_crash_is_not_a_termination() {
    let cs = restarted(
        terminated(1, "Error", "2026-12-01T11:00:00Z", "2026-12-01T11:00:01Z"),
        json!({"waiting": {"reason": "CrashLoopBackOff"}}),
        2,
    );
    let p = RecordedPod::term("crash")
        .phase("Running")
        .container(cs)
        .build();
    let mut b = kubelet_event(
        "crash",
        "app",
        "Warning",
        "BackOff",
        "2026-12-01T11:00:20Z",
        "Back-off restarting failed container app in pod crash_default(uid-crash)",
    );
    b.count = Some(2);
    let f = explain(Some(&p), "default", "crash", &[b]);
    assert_eq!(ids(&f), ["exitedByItself", "crashLoopBackOff"]);
    assert!(find(&f, "exitedByItself").message.starts_with(
        "exited with code 1 (Error) by itself at 2026-12-01T11:00:01Z: not a termination"
    ));
}

#[test]
fn parse_reads_kubectl_output_and_places_errors() {
    let mut p = Parsed::default();
    parse(
        &json!({"kind": "List", "apiVersion": "v1", "items": [
            {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e"},
             "involvedObject": {"kind": "Pod", "name": "x"}, "reason": "Killing"}]})
        .to_string(),
        "events.json",
        &mut p,
    )
    .unwrap();
    assert_eq!(p.events.len(), 1);
    parse(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n",
        "pod.yaml",
        &mut p,
    )
    .unwrap();
    assert_eq!(p.pods.len(), 1);
    let e = parse(
        "{\"kind\": \"Pod\",\n \"metadata\": {\"name\": 3",
        "bad.json",
        &mut p,
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("bad.json:2:"), "{e}");
    let e = parse(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nstatus:\n  phase: [1]\n",
        "t.yaml",
        &mut p,
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("t.yaml:6:"), "{e}");
    assert!(e.to_string().contains("status.phase"), "{e}");
    let e = parse("kind: Service\napiVersion: v1\n", "s.yaml", &mut p).unwrap_err();
    assert!(
        e.to_string().contains("kind \"Service\": expected a Pod"),
        "{e}"
    );
    assert!(parse("", "empty.json", &mut p).is_err());
}
