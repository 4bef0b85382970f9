//! The pod status the kubelet writes (`generateAPIPodStatus`): container statuses from what the
//! runtime reports for each container's instances, the phase from `podgrace-core`'s
//! [`get_phase`], the kubelet's conditions (PodReadyToStartContainers, Initialized, Ready,
//! ContainersReady, PodScheduled) with their reasons and messages, podIP/podIPs, hostIP/hostIPs.
//! Pure: every time is given, in milliseconds since the Unix epoch.
//!
//! Upstream: `pkg/kubelet/kubelet_pods.go` (`generateAPIPodStatus`,
//! `convertToAPIContainerStatuses`: the default waiting reasons `ContainerCreating` and
//! `PodInitializing`, `lastTerminationState` from the previous instance, `CrashLoopBackOff`
//! with its `back-off 10s restarting failed container=C pod=P` message),
//! `pkg/kubelet/status/generate.go` (the conditions, read at the 1.36 tree) and
//! `pkg/kubelet/status/status_manager.go` (`updateLastTransitionTime`: a condition keeps its
//! lastTransitionTime while its status stays the same). Kubernetes 1.29 to 1.37 (the
//! PodReadyToStartContainers condition is on by default from 1.29).

use std::net::IpAddr;

use podgrace_core::plan::{ContainerRole, PodPlan};
use podgrace_core::rules::apiserver::PodPhase;
use podgrace_core::rules::podstatus::{
    get_phase, ContainerState, ContainerStatus, PhaseSpec, Terminated,
};
use podgrace_core::rules::runtime::containerd_exit_reason;
use podgrace_core::KubeVersion;
use serde_json::{json, Map, Value};

/// One instance (one CRI container) of a pod's container, as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instance {
    /// Created, not started (or its start failed).
    Created,
    /// Running since `started_at_ms`.
    Running {
        /// `startedAt`, in milliseconds since the Unix epoch.
        started_at_ms: i64,
    },
    /// Exited: PID 1's exit code (128 + signal when a signal ended it).
    Exited {
        /// `startedAt`, ms since the Unix epoch; `None`: it never started.
        started_at_ms: Option<i64>,
        /// `finishedAt`, ms since the Unix epoch.
        finished_at_ms: i64,
        /// `exitCode` of the terminated state.
        exit_code: i32,
        /// The runtime's `reason` (`OOMKilled`, ...); `None`: containerd's from the exit code.
        reason: Option<String>,
    },
}

/// What the kubelet knows of one container of the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerView {
    /// The container's name in the spec.
    pub name: String,
    /// Its instances in creation order (the runtime id and state); empty before the first.
    pub instances: Vec<(String, Instance)>,
    /// The container passes its readiness probe (or has none) while it runs.
    pub ready: bool,
    /// A restart waits out its back-off: `Some(seconds)` of the back-off (the kubelet's
    /// `BackOff` event came after the last exit).
    pub back_off_seconds: Option<u64>,
    /// The latest instance's image as the runtime reports it: `(image, imageID)` (CRI
    /// `ContainerStatus.image.image` and `image_ref`); `None` (the spec's image, imageID
    /// empty) before the first instance or on a runtime without images.
    pub image: Option<(String, String)>,
}

/// Everything [`generate`] reads.
#[derive(Debug, Clone)]
pub struct PodView<'a> {
    /// The pod's plan: its containers, their roles and the restart policy.
    pub plan: &'a PodPlan,
    /// The pod's UID (`CrashLoopBackOff`'s message names `name_namespace(uid)`).
    pub uid: &'a str,
    /// The pod's namespace (also in `CrashLoopBackOff`'s message).
    pub namespace: &'a str,
    /// Every container of the plan, init containers included, by name.
    pub containers: &'a [ContainerView],
    /// The sandbox exists with its network (`PodReadyToStartContainers`).
    pub sandbox_ready: bool,
    /// The pod worker has finished terminating the pod (`podIsTerminal` of `getPhase`).
    pub pod_is_terminal: bool,
    /// `status.podIP` (and `podIPs`); `None` before the sandbox has an address.
    pub pod_ip: Option<IpAddr>,
    /// `status.hostIP` (and `hostIPs`).
    pub host_ip: IpAddr,
    /// `status.startTime`, ms.
    pub start_time_ms: i64,
    /// The status in the API now (conditions kept that the kubelet does not own, such as
    /// PodScheduled and DisruptionTarget; lastTransitionTime kept for unchanged ones; qosClass).
    pub old_status: &'a Value,
    /// Now, ms since the Unix epoch (a changed condition's lastTransitionTime).
    pub now_ms: i64,
    /// The Kubernetes release whose kubelet writes the status.
    pub version: KubeVersion,
    /// The runtime's name, the scheme of `containerID` (`podgrace`, `containerd`).
    pub runtime_type: &'a str,
}

/// RFC 3339 at whole seconds, as metav1.Time is written (`2026-12-01T09:12:53Z`).
pub fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms.div_euclid(1000) * 1000)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// The container id as the API shows it (`<runtime>://<id>`, `kubecontainer.ContainerID`'s
/// `String()`).
pub fn container_id(runtime_type: &str, id: &str) -> String {
    format!("{runtime_type}://{id}")
}

fn core_terminated(i: &Instance) -> Option<Terminated> {
    match i {
        Instance::Exited {
            exit_code,
            finished_at_ms,
            reason,
            ..
        } => Some(Terminated {
            exit_code: *exit_code,
            reason: reason
                .clone()
                .unwrap_or_else(|| containerd_exit_reason(*exit_code, false).to_string()),
            signal: 0,
            finished_at_ms: Some(*finished_at_ms),
        }),
        _ => None,
    }
}

fn terminated_json(runtime_type: &str, id: &str, i: &Instance) -> Value {
    match i {
        Instance::Exited {
            started_at_ms,
            finished_at_ms,
            exit_code,
            reason,
        } => {
            let mut t = json!({
                "exitCode": exit_code,
                "reason": reason.as_deref().unwrap_or(containerd_exit_reason(*exit_code, false)),
                "finishedAt": rfc3339(*finished_at_ms),
                "containerID": container_id(runtime_type, id),
            });
            if let Some(s) = started_at_ms {
                t["startedAt"] = json!(rfc3339(*s));
            }
            t
        }
        _ => Value::Null,
    }
}

/// One container's status: the core form (for the phase and the conditions) and the JSON.
fn container_status(
    view: &PodView<'_>,
    role: ContainerRole,
    image: &str,
    c: Option<&ContainerView>,
    default_waiting: &str,
    name: &str,
) -> (ContainerStatus, Value) {
    let instances = c.map(|c| c.instances.as_slice()).unwrap_or_default();
    let restart_count = i32::try_from(instances.len().saturating_sub(1)).unwrap_or(i32::MAX);
    let current = instances.last();
    let previous = instances.len().checked_sub(2).map(|i| &instances[i]);
    let ready_flag = c.is_some_and(|c| c.ready);
    let mut state_json = json!({"waiting": {"reason": default_waiting}});
    let mut last_json = json!({});
    let mut core_state = ContainerState::Waiting {
        reason: default_waiting.to_string(),
    };
    let mut last_core = previous.and_then(|(_, i)| core_terminated(i));
    if let Some((id, p)) = previous {
        if matches!(p, Instance::Exited { .. }) {
            last_json = json!({"terminated": terminated_json(view.runtime_type, id, p)});
        }
    }
    let mut running = false;
    let mut container_id_json = None;
    match current {
        None => {}
        Some((id, Instance::Created)) => {
            container_id_json = Some(container_id(view.runtime_type, id));
        }
        Some((id, Instance::Running { started_at_ms })) => {
            running = true;
            container_id_json = Some(container_id(view.runtime_type, id));
            state_json = json!({"running": {"startedAt": rfc3339(*started_at_ms)}});
            core_state = ContainerState::Running;
        }
        Some((id, exited @ Instance::Exited { .. })) => {
            container_id_json = Some(container_id(view.runtime_type, id));
            let back_off = c
                .and_then(|c| c.back_off_seconds)
                .filter(|_| !view.pod_is_terminal);
            match back_off {
                Some(secs) => {
                    // convertToAPIContainerStatuses: a container waiting out its back-off shows
                    // waiting CrashLoopBackOff, the exit it comes from as lastState.
                    let reason = "CrashLoopBackOff";
                    let message = format!(
                        "back-off {secs}s restarting failed container={name} pod={}_{}({})",
                        view.plan.name, view.namespace, view.uid
                    );
                    state_json = json!({"waiting": {"reason": reason, "message": message}});
                    last_json =
                        json!({"terminated": terminated_json(view.runtime_type, id, exited)});
                    last_core = core_terminated(exited);
                    core_state = ContainerState::Waiting {
                        reason: reason.into(),
                    };
                }
                None => {
                    state_json =
                        json!({"terminated": terminated_json(view.runtime_type, id, exited)});
                    core_state =
                        ContainerState::Terminated(core_terminated(exited).unwrap_or_default());
                }
            }
        }
    }
    // A regular init container is "ready" once it completed (exit 0), as the kubelet marks it.
    let ready = match role {
        ContainerRole::Init => matches!(current, Some((_, Instance::Exited { exit_code: 0, .. }))),
        _ => running && ready_flag,
    };
    let started = running;
    let mut v = json!({
        "name": name,
        "state": state_json,
        "lastState": last_json,
        "ready": ready,
        "restartCount": restart_count,
        "image": c.and_then(|c| c.image.as_ref()).map_or(image, |(i, _)| i.as_str()),
        "imageID": c.and_then(|c| c.image.as_ref()).map_or("", |(_, id)| id.as_str()),
        "started": started,
    });
    if let Some(id) = container_id_json {
        v["containerID"] = json!(id);
    }
    (
        ContainerStatus {
            name: name.to_string(),
            state: core_state,
            last_terminated: last_core,
            ready,
            started: Some(started),
            restart_count,
        },
        v,
    )
}

/// A kubelet-owned condition: type, status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Condition {
    kind: &'static str,
    status: bool,
    reason: Option<&'static str>,
    message: Option<String>,
}

fn cond(kind: &'static str, status: bool) -> Condition {
    Condition {
        kind,
        status,
        reason: None,
        message: None,
    }
}

/// Go's `%s` of a `[]string`: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// `GenerateContainersReadyCondition`.
fn containers_ready(plan: &PodPlan, statuses: &[ContainerStatus], phase: PodPhase) -> Condition {
    let mut unready = Vec::new();
    for c in plan.init_containers.iter().chain(&plan.containers) {
        if c.role == ContainerRole::Init {
            continue;
        }
        if !statuses.iter().any(|s| s.name == c.name && s.ready) {
            unready.push(c.name.as_str());
        }
    }
    let terminal = |reason| Condition {
        reason: Some(reason),
        ..cond("ContainersReady", false)
    };
    match phase {
        PodPhase::Succeeded => return terminal("PodCompleted"),
        PodPhase::Failed => return terminal("PodFailed"),
        _ => {}
    }
    if unready.is_empty() {
        cond("ContainersReady", true)
    } else {
        Condition {
            reason: Some("ContainersNotReady"),
            message: Some(format!(
                "containers with unready status: {}",
                go_list(&unready)
            )),
            ..cond("ContainersReady", false)
        }
    }
}

/// `GeneratePodInitializedCondition`.
fn initialized(plan: &PodPlan, statuses: &[ContainerStatus], phase: PodPhase) -> Condition {
    if phase == PodPhase::Succeeded {
        return Condition {
            reason: Some("PodCompleted"),
            ..cond("Initialized", true)
        };
    }
    let regular_started = plan.containers.iter().any(|c| {
        statuses.iter().any(|s| {
            s.name == c.name
                && (s.state == ContainerState::Running
                    || matches!(s.state, ContainerState::Terminated(_))
                    || s.last_terminated.is_some())
        })
    });
    if regular_started {
        return cond("Initialized", true);
    }
    let incomplete: Vec<&str> = plan
        .init_containers
        .iter()
        .filter(|c| {
            let st = statuses.iter().find(|s| s.name == c.name);
            match c.role {
                ContainerRole::Sidecar => st.is_none_or(|s| s.started != Some(true)),
                _ => st.is_none_or(|s| !s.ready),
            }
        })
        .map(|c| c.name.as_str())
        .collect();
    if incomplete.is_empty() {
        cond("Initialized", true)
    } else {
        Condition {
            reason: Some("ContainersNotInitialized"),
            message: Some(format!(
                "containers with incomplete status: {}",
                go_list(&incomplete)
            )),
            ..cond("Initialized", false)
        }
    }
}

/// The status to write: `(status JSON, phase)`.
pub fn generate(view: &PodView<'_>) -> (Value, PodPhase) {
    let plan = view.plan;
    let has_init = !plan.init_containers.is_empty();
    let mut core = Vec::new();
    let mut init_json = Vec::new();
    let mut main_json = Vec::new();
    for c in &plan.init_containers {
        let cv = view.containers.iter().find(|v| v.name == c.name);
        let (s, j) = container_status(
            view,
            c.role,
            c.image.as_deref().unwrap_or_default(),
            cv,
            "PodInitializing",
            &c.name,
        );
        core.push(s);
        init_json.push(j);
    }
    let default_waiting = if has_init {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    for c in &plan.containers {
        let cv = view.containers.iter().find(|v| v.name == c.name);
        let (s, j) = container_status(
            view,
            c.role,
            c.image.as_deref().unwrap_or_default(),
            cv,
            default_waiting,
            &c.name,
        );
        core.push(s);
        main_json.push(j);
    }
    let spec = PhaseSpec {
        restart_policy: plan.restart_policy,
        init_containers: plan
            .init_containers
            .iter()
            .map(|c| (c.name.clone(), c.role == ContainerRole::Sidecar))
            .collect(),
        containers: plan.containers.iter().map(|c| c.name.clone()).collect(),
        static_pod: false,
    };
    let init_cond = initialized(plan, &core, PodPhase::Pending);
    let phase = get_phase(
        &spec,
        &core,
        view.pod_is_terminal,
        init_cond.status,
        view.version,
    );
    let initialized_c = initialized(plan, &core, phase);
    let cr = containers_ready(plan, &core, phase);
    let ready = Condition {
        kind: "Ready",
        ..cr.clone()
    };
    let mut owned = vec![
        cond("PodReadyToStartContainers", view.sandbox_ready),
        initialized_c,
        ready,
        cr,
    ];
    owned.push(cond("PodScheduled", true));
    // Conditions others own (DisruptionTarget, readiness gates' ...) stay first, as upstream
    // copies them before appending its own.
    let old_conditions: Vec<Value> = view
        .old_status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let kubelet_owned = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ];
    let mut conditions: Vec<Value> = old_conditions
        .iter()
        .filter(|c| {
            !c.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| kubelet_owned.contains(&t))
        })
        .cloned()
        .collect();
    for c in owned {
        let status = if c.status { "True" } else { "False" };
        let old = old_conditions
            .iter()
            .find(|o| o.get("type").and_then(Value::as_str) == Some(c.kind));
        // updateLastTransitionTime: unchanged status keeps its time.
        let transition = match old {
            Some(o) if o.get("status").and_then(Value::as_str) == Some(status) => o
                .get("lastTransitionTime")
                .cloned()
                .unwrap_or_else(|| json!(rfc3339(view.now_ms))),
            _ => json!(rfc3339(view.now_ms)),
        };
        let mut m = Map::new();
        m.insert("type".into(), json!(c.kind));
        m.insert("status".into(), json!(status));
        m.insert("lastProbeTime".into(), Value::Null);
        m.insert("lastTransitionTime".into(), transition);
        if let Some(r) = c.reason {
            m.insert("reason".into(), json!(r));
        }
        if let Some(msg) = c.message {
            m.insert("message".into(), json!(msg));
        }
        conditions.push(Value::Object(m));
    }
    let host_ip = view.host_ip.to_string();
    let pod_ip = if plan.host_network {
        Some(host_ip.clone())
    } else {
        view.pod_ip.map(|ip| ip.to_string())
    };
    let mut status = json!({
        "phase": phase.as_str(),
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": rfc3339(view.start_time_ms),
        "containerStatuses": main_json,
    });
    if has_init {
        status["initContainerStatuses"] = json!(init_json);
    }
    if let Some(ip) = pod_ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    if let Some(q) = view.old_status.get("qosClass") {
        status["qosClass"] = q.clone();
    }
    (status, phase)
}

/// The `DisruptionTarget` condition a kubelet-initiated kill's status function sets
/// (`podutil.UpdatePodCondition`: its transition time kept when it already was True): True,
/// reason `TerminationByKubelet`, the eviction's or the node shutdown's message.
///
/// Upstream: `pkg/kubelet/eviction/eviction_manager.go` (`synchronize`'s condition),
/// `pkg/kubelet/nodeshutdown/nodeshutdown_manager.go` (`killPods`), Kubernetes 1.26 to 1.36.
pub fn set_disruption_target(status: &mut Value, message: &str, now_ms: i64) {
    let mut c = json!({
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": rfc3339(now_ms),
        "reason": "TerminationByKubelet",
        "message": message,
    });
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(conds) = status["conditions"].as_array_mut() else {
        return;
    };
    match conds.iter_mut().find(|x| x["type"] == "DisruptionTarget") {
        Some(old) => {
            if old["status"] == "True" {
                c["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = c;
        }
        None => conds.insert(0, c),
    }
}

/// The status manager's `TerminatePod`: the status of a pod the kubelet has finished with. A
/// container not terminated (it never ran, or was not found) is given up as terminated with
/// exit code 137, reason `ContainerStatusUnknown` (regular containers once the pod has
/// initialized, init containers that ran); a phase that is not terminal becomes `Failed`.
///
/// Upstream: `pkg/kubelet/status/status_manager.go` `TerminatePod` (1.27 to 1.37).
pub fn terminate_pod(status: &mut Value) {
    let unknown = json!({"terminated": {
        "exitCode": 137,
        "reason": "ContainerStatusUnknown",
        "message": "The container could not be located when the pod was terminated",
    }});
    let initialized = status["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Initialized" && c["status"] == "True")
    });
    if initialized {
        if let Some(cs) = status["containerStatuses"].as_array_mut() {
            for c in cs {
                if c["state"].get("terminated").is_none() {
                    c["state"] = unknown.clone();
                }
            }
        }
    }
    if let Some(cs) = status["initContainerStatuses"].as_array_mut() {
        for c in cs {
            let ran =
                c["state"].get("running").is_some() || c["lastState"].get("terminated").is_some();
            if ran && c["state"].get("terminated").is_none() {
                c["state"] = unknown.clone();
            }
        }
    }
    let phase = status["phase"].as_str().unwrap_or("Pending");
    if phase != "Succeeded" && phase != "Failed" {
        status["phase"] = json!("Failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podgrace_core::manifest;

    fn plan(yaml: &str) -> PodPlan {
        manifest::load(yaml, "t.yaml")
            .unwrap()
            .pods()
            .next()
            .unwrap()
            .clone()
    }

    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: app, image: busybox:1.36, command: [sleep, '100']}\n";

    fn view<'a>(p: &'a PodPlan, cs: &'a [ContainerView], old: &'a Value) -> PodView<'a> {
        PodView {
            plan: p,
            uid: "u1",
            namespace: "default",
            containers: cs,
            sandbox_ready: true,
            pod_is_terminal: false,
            pod_ip: Some("198.18.77.2".parse().unwrap()),
            host_ip: "127.0.0.1".parse().unwrap(),
            start_time_ms: 1_780_000_000_000,
            old_status: old,
            now_ms: 1_780_000_001_000,
            version: KubeVersion::LATEST,
            runtime_type: "podgrace",
        }
    }

    fn cond_of<'a>(s: &'a Value, t: &str) -> &'a Value {
        s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .unwrap()
    }

    #[test]
    fn a_pod_without_containers_yet_is_pending_with_container_creating() {
        let p = plan(POD);
        let old = json!({"phase": "Pending", "qosClass": "BestEffort", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "lastProbeTime": null}]});
        let (s, phase) = generate(&view(&p, &[], &old));
        assert_eq!(phase, PodPhase::Pending);
        assert_eq!(
            s["containerStatuses"][0]["state"],
            json!({"waiting": {"reason": "ContainerCreating"}})
        );
        assert_eq!(cond_of(&s, "Ready")["reason"], "ContainersNotReady");
        assert_eq!(
            cond_of(&s, "Ready")["message"],
            "containers with unready status: [app]"
        );
        // PodScheduled keeps the scheduler's time; qosClass stays.
        assert_eq!(
            cond_of(&s, "PodScheduled")["lastTransitionTime"],
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(s["qosClass"], "BestEffort");
        assert_eq!(s["podIP"], "198.18.77.2");
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled"
            ]
        );
    }

    #[test]
    fn running_then_killed_while_deleted_is_failed_with_error_137() {
        let p = plan(POD);
        let old = json!({});
        let running = [ContainerView {
            name: "app".into(),
            instances: vec![(
                "c1".into(),
                Instance::Running {
                    started_at_ms: 1_780_000_000_500,
                },
            )],
            ready: true,
            back_off_seconds: None,
            image: None,
        }];
        let (s, phase) = generate(&view(&p, &running, &old));
        assert_eq!(phase, PodPhase::Running);
        assert_eq!(cond_of(&s, "Ready")["status"], "True");
        assert_eq!(
            s["containerStatuses"][0]["state"]["running"]["startedAt"],
            "2026-05-28T20:26:40Z"
        );
        let killed = [ContainerView {
            instances: vec![(
                "c1".into(),
                Instance::Exited {
                    started_at_ms: Some(1_780_000_000_500),
                    finished_at_ms: 1_780_000_005_000,
                    exit_code: 137,
                    reason: None,
                },
            )],
            ready: false,
            ..running[0].clone()
        }];
        let mut v = view(&p, &killed, &s);
        v.pod_is_terminal = true;
        v.sandbox_ready = false;
        let (s2, phase) = generate(&v);
        assert_eq!(phase, PodPhase::Failed);
        let t = &s2["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(
            (t["exitCode"].as_i64(), t["reason"].as_str()),
            (Some(137), Some("Error"))
        );
        assert_eq!(cond_of(&s2, "Ready")["reason"], "PodFailed");
        assert_eq!(cond_of(&s2, "PodReadyToStartContainers")["status"], "False");
        // Initialized stays True: its time is kept.
        assert_eq!(
            cond_of(&s2, "Initialized")["lastTransitionTime"],
            cond_of(&s, "Initialized")["lastTransitionTime"]
        );
    }

    #[test]
    fn a_crash_waiting_out_its_back_off_is_crash_loop_back_off() {
        let p = plan(&POD.replace("'100'", "'0'"));
        let cs = [ContainerView {
            name: "app".into(),
            instances: vec![
                (
                    "c1".into(),
                    Instance::Exited {
                        started_at_ms: Some(1_780_000_000_000),
                        finished_at_ms: 1_780_000_000_100,
                        exit_code: 1,
                        reason: None,
                    },
                ),
                (
                    "c2".into(),
                    Instance::Exited {
                        started_at_ms: Some(1_780_000_000_200),
                        finished_at_ms: 1_780_000_000_300,
                        exit_code: 1,
                        reason: None,
                    },
                ),
            ],
            ready: false,
            back_off_seconds: Some(10),
            image: None,
        }];
        let (s, phase) = generate(&view(&p, &cs, &json!({})));
        assert_eq!(phase, PodPhase::Running);
        let c = &s["containerStatuses"][0];
        assert_eq!(c["restartCount"], 1);
        assert_eq!(c["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(
            c["state"]["waiting"]["message"],
            "back-off 10s restarting failed container=app pod=web_default(u1)"
        );
        assert_eq!(c["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(c["lastState"]["terminated"]["containerID"], "podgrace://c2");
    }
}
