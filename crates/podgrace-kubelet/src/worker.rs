//! One pod synced with the API server: the pod worker of the node layer runs it; what the
//! watch shows of the object becomes the pod worker's updates; what the runtime and the pod
//! worker report becomes the object's status; the end is the kubelet's final delete.
//!
//! * **A delete** seen through the watch (the object's `deletionTimestamp` set, or its
//!   `deletionGracePeriodSeconds` lowered by a second delete) goes to the pod worker as the
//!   delete it is, with the object's DGPS as the grace: the pod worker applies it as the
//!   kubelet does (`rules::podworker`: the effective grace only shrinks; a shorter one that
//!   arrives while the kill runs is recorded but does not shorten it, `later_update_in_flight`).
//!   DGPS 0 (a force delete) and the object's removal (`DELETED`) are a force delete: the
//!   processes are still killed, with the kubelet's minimum grace.
//! * **The status** (`generateAPIPodStatus`, [`crate::status`]) is written through the `status`
//!   subresource whenever it changes, as the status manager does.
//! * **The end**: once the pod worker has finished (`SyncTerminatedPod`), the status with every
//!   container stopped (phase Failed or Succeeded), then, when the object carries a deletion
//!   timestamp (`canBeDeleted`), the delete with grace 0 and the pod's UID as a precondition
//!   (`rules::apiserver::kubelet_final_delete` is what the API server makes of it).
//!
//! Upstream: `pkg/kubelet/kubelet.go` (`HandlePodUpdates`, `HandlePodRemoves`: a removed pod is
//! killed), `pkg/kubelet/pod_workers.go` (`UpdatePod`), `pkg/kubelet/status/status_manager.go`
//! (`syncPod`, `canBeDeleted`), Kubernetes 1.27 to 1.37.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use podgrace_core::manifest::{self, LoadOptions};
use podgrace_core::plan::{ContainerRole, PodPlan};
use podgrace_core::rules::apiserver::{KubectlDeleteFlags, PodPhase as ApiPhase};
use podgrace_core::rules::podstatus::{self, can_be_deleted};
use podgrace_node::events::{reason, EventRecorder};
use podgrace_node::kubelet::{check_pod, run_pod, PodCommand, PodOptions, PodWorkerState};
use podgrace_node::runtime::{CallContext, ContainerState, RuntimeService};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use crate::logs::{pod_log_dir, write_logs};
use crate::observed::ObservedRuntime;
use crate::recorder::{InvolvedPod, Recorder};
use crate::runtimes::RuntimeSource;
use crate::status::{generate, terminate_pod, ContainerView, Instance, PodView};
use crate::{Clock, KubeletConfig};

/// What the pod source hands a worker.
#[derive(Debug)]
pub enum Update {
    /// A later version of the object.
    Changed(Box<Pod>),
    /// The object is gone (`DELETED`, or missing from a relist).
    Removed,
}

/// What every worker shares.
pub struct Shared<S> {
    /// The API server's client: the status patches, the final delete, events, ConfigMaps.
    pub client: kube::Client,
    /// Where each pod's runtime comes from.
    pub runtimes: S,
    /// The kubelet's settings (node name, release, host IP, log directory).
    pub config: KubeletConfig,
    /// The clock every API time is read from (ms since the Unix epoch).
    pub clock: Clock,
}

/// The pod worker's delete for the object's `deletionGracePeriodSeconds`: graceful with that
/// grace, or forced at 0.
pub fn delete_for_grace(dgps: i64) -> KubectlDeleteFlags {
    if dgps <= 0 {
        KubectlDeleteFlags {
            grace_period: 0,
            force: true,
            now: false,
        }
    } else {
        KubectlDeleteFlags {
            grace_period: dgps,
            force: false,
            now: false,
        }
    }
}

/// The plan of the API object (its JSON through `podgrace-core`'s loader, for `version`).
///
/// # Errors
/// The loader's message when the object cannot be planned.
pub fn plan_of(pod: &Value, version: podgrace_core::KubeVersion) -> Result<PodPlan, String> {
    let text = serde_json::to_string(pod).map_err(|e| e.to_string())?;
    let name = format!(
        "pod {}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or("default"),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    );
    let m = manifest::load_with(
        &text,
        &name,
        &LoadOptions {
            kube_version: version,
        },
    )
    .map_err(|e| e.to_string())?;
    let plan = m.pods().next().cloned();
    plan.ok_or_else(|| format!("{name}: not a pod"))
}

fn phase_of(obj: &Value) -> ApiPhase {
    obj["status"]["phase"]
        .as_str()
        .and_then(ApiPhase::parse)
        .unwrap_or(ApiPhase::Pending)
}

struct Sync<S> {
    shared: Arc<Shared<S>>,
    api: kube::Api<Pod>,
    name: String,
    namespace: String,
    uid: String,
    /// The object as the watch last showed it.
    latest: Value,
    /// The status last written.
    written: Option<Value>,
    start_ms: i64,
    removed: bool,
    /// When a status with a terminal phase was first written (the final delete waits
    /// [`podstatus::final_delete_at_ms`] from then).
    terminal_written: Option<Instant>,
}

impl<S: RuntimeSource> Sync<S> {
    fn deletion_grace(&self) -> Option<i64> {
        self.latest["metadata"]
            .get("deletionTimestamp")
            .filter(|v| !v.is_null())
            .map(|_| {
                self.latest["metadata"]["deletionGracePeriodSeconds"]
                    .as_i64()
                    .unwrap_or(0)
            })
    }

    /// The status in the API as the generator should see it: the kubelet's own conditions as
    /// last written (the watch may not have shown that write yet), the others' as in the API.
    fn old_status(&self) -> Value {
        let mut old = self.latest.get("status").cloned().unwrap_or(json!({}));
        if let Some(w) = &self.written {
            let owned = [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
            ];
            let mut conds: Vec<Value> = old["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|c| !c["type"].as_str().is_some_and(|t| owned.contains(&t)))
                .collect();
            conds.extend(
                w["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| c["type"].as_str().is_some_and(|t| owned.contains(&t))),
            );
            old["conditions"] = json!(conds);
        }
        old
    }

    /// Writes `status` through the status subresource unless it is what was written last.
    async fn write(&mut self, status: Value) {
        if self.removed || self.written.as_ref() == Some(&status) {
            return;
        }
        let patch = json!({"status": status});
        match self
            .api
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(p) => {
                tracing::debug!(target: "podgrace::start", pod = %self.name, phase = ?p.status.as_ref().and_then(|s| s.phase.clone()), "status written");
                if let Ok(v) = serde_json::to_value(&p) {
                    self.latest = v;
                }
                if self.terminal_written.is_none() && phase_of(&self.latest).is_terminal() {
                    self.terminal_written = Some(Instant::now());
                }
                self.written = Some(status);
            }
            Err(e) => tracing::debug!(pod = %self.name, error = %e, "status update"),
        }
    }

    /// The status manager's final delete: grace 0, the UID as a precondition.
    async fn final_delete(&mut self) {
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        if let Err(e) = self.api.delete(&self.name, &dp).await {
            tracing::debug!(pod = %self.name, error = %e, "final delete");
        }
    }
}

/// Syncs one pod until it has terminated and its object is deleted (or gone).
pub async fn sync_pod<S: RuntimeSource>(
    shared: Arc<Shared<S>>,
    pod: Pod,
    mut updates: mpsc::UnboundedReceiver<Update>,
) {
    let latest = serde_json::to_value(&pod).unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let mut s = Sync {
        api: kube::Api::namespaced(shared.client.clone(), &namespace),
        start_ms: shared.clock.now_ms(),
        shared: shared.clone(),
        name,
        namespace: namespace.clone(),
        uid: uid.clone(),
        latest,
        written: None,
        removed: false,
        terminal_written: None,
    };
    let version = shared.config.version;
    let opts = PodOptions {
        version,
        namespace: namespace.clone(),
        force_host: shared.config.force_host,
        uid: Some(uid.clone()),
        images: shared.runtimes.uses_images(),
        node: Some(shared.config.active.clone()),
        ..PodOptions::default()
    };
    // The environment as makeEnvironmentVariables builds it (ConfigMaps and Secrets read
    // from the API), then the plan of the pod with it.
    tracing::debug!(target: "podgrace::start", pod = %s.name, "sync begins");
    let env = crate::env::resolve(&shared.client, &s.latest, shared.config.host_ip).await;
    tracing::debug!(target: "podgrace::start", pod = %s.name, "env resolved");
    let parsed = plan_of(env.as_ref().unwrap_or(&s.latest), version);
    let plan = match &env {
        Ok(_) => parsed.clone().and_then(|p| {
            check_pod(&p, &opts).map_err(|e| e.to_string())?;
            Ok(p)
        }),
        Err(e) => Err(e.message.clone()),
    };
    if phase_of(&s.latest).is_terminal() || plan.is_err() {
        // A pod that has finished (seen again after a restart of the kubelet) is not run
        // again; one that cannot be run stays as it is, with a Warning saying why and, when
        // its containers are known, their CreateContainerError.
        if let (Ok(p), Err(_)) = (&parsed, &plan) {
            if !phase_of(&s.latest).is_terminal() {
                let st = create_error_status(&s, p, &opts, env.as_ref().err());
                s.write(st).await;
            }
        }
        if let Err(msg) = &plan {
            let events = EventRecorder::new();
            events.warning(reason::FAILED, None, format!("Error: {msg}"));
            let mut rec = recorder_for(&s, None);
            for e in events.events() {
                rec.record(&e).await;
            }
        }
        idle_until_deleted(&mut s, &mut updates).await;
        return;
    }
    let Ok(plan) = plan else { return };
    tracing::debug!(target: "podgrace::start", pod = %s.name, "planned");
    if let Some((reason, message)) = shared.config.admit.as_ref().and_then(|a| (a.0)(&plan)) {
        // rejectPod: a Warning event, then phase Failed with the reason and the message.
        let mut rec = recorder_for(&s, Some(&plan));
        let events = EventRecorder::new();
        let reason: &'static str = match reason.as_str() {
            "Evicted" => "Evicted",
            "NodeShutdown" => "NodeShutdown",
            _ => "UnexpectedAdmissionError",
        };
        events.warning(reason, None, message.clone());
        for e in events.events() {
            rec.record(&e).await;
        }
        let mut st = json!({
            "phase": "Failed",
            "reason": reason,
            "message": format!("Pod was rejected: {message}"),
        });
        if let Some(q) = s.latest["status"].get("qosClass") {
            st["qosClass"] = q.clone();
        }
        s.write(st).await;
        idle_until_deleted(&mut s, &mut updates).await;
        return;
    }
    let mut plan = match volume_data(&shared.client, &namespace, plan).await {
        Ok(p) => p,
        Err(msg) => {
            // The volume manager keeps the pod in ContainerCreating, with the reason.
            let events = EventRecorder::new();
            events.warning(reason::FAILED_MOUNT, None, msg);
            let mut rec = recorder_for(&s, None);
            for e in events.events() {
                rec.record(&e).await;
            }
            idle_until_deleted(&mut s, &mut updates).await;
            return;
        }
    };
    tracing::debug!(target: "podgrace::start", pod = %s.name, "volumes read");
    let (runtime, output) = shared.runtimes.for_pod();
    let observed = Arc::new(ObservedRuntime::new(runtime));
    let log_task = match (output, &shared.config.log_dir) {
        (Some(out), Some(root)) => {
            let record = observed.shared_record();
            Some(tokio::spawn(write_logs(
                pod_log_dir(root, &namespace, &s.name, &uid),
                out,
                move |c| {
                    record
                        .lock()
                        .map(|r| r.containers.iter().filter(|(n, _)| n == c).count())
                        .unwrap_or(0)
                        .saturating_sub(1)
                },
            )))
        }
        _ => None,
    };
    let events = EventRecorder::new();
    let mut own_events = events.subscribe();
    // The events go to the API in order, beside the status writes.
    let mut rec = recorder_for(&s, Some(&plan));
    let mut rec_events = events.subscribe();
    let rec_task = tokio::spawn(async move {
        while let Some(e) = rec_events.recv().await {
            rec.record(&e).await;
        }
    });
    let handle = run_pod(observed.clone(), plan.clone(), opts, events.clone());
    let mut status_rx = handle.status();
    let changed = observed.changed();
    let mut container_events: Option<broadcast::Receiver<_>> = None;
    let mut back_offs: HashMap<String, Instant> = HashMap::new();
    let mut sent_grace: Option<i64> = None;
    // The status function of a kill by the eviction or node shutdown manager, once its
    // condition is written (at the start of SyncTerminatingPod).
    let mut kill_written = false;
    loop {
        if let Some(g) = s.deletion_grace() {
            if sent_grace.is_none_or(|sent| g < sent) {
                sent_grace = Some(g);
                handle.send(PodCommand::Delete(delete_for_grace(g)));
            }
        }
        tokio::select! {
            u = updates.recv() => match u {
                Some(Update::Changed(p)) => {
                    if let Ok(v) = serde_json::to_value(&*p) {
                        s.latest = v;
                    }
                    // `kubectl set image`: the pod worker restarts what changed.
                    let images = images_of(&s.latest);
                    if changed_images(&mut plan, &images) {
                        handle.send(PodCommand::Images(images));
                    }
                }
                Some(Update::Removed) | None => {
                    if !s.removed {
                        s.removed = true;
                        sent_grace = Some(0);
                        handle.send(PodCommand::Delete(delete_for_grace(0)));
                    }
                }
            },
            r = status_rx.changed() => {
                if r.is_err() || status_rx.borrow_and_update().phase == PodWorkerState::Terminated {
                    break;
                }
            }
            () = changed.notified() => {}
            Some(e) = own_events.recv() => {
                if e.reason == reason::BACK_OFF {
                    if let Some(c) = e.container {
                        back_offs.insert(c, e.at);
                    }
                }
            }
            _ = recv_container_event(&mut container_events) => {}
        }
        if container_events.is_none() {
            if let Some(sb) = observed.record().sandbox {
                container_events = observed.inner().container_events(&sb);
            }
        }
        let st = status_rx.borrow().clone();
        if let (Some(k), false) = (&st.killed, kill_written) {
            // SyncTerminatingPod's first status with the status function applied: the API gets
            // the DisruptionTarget condition at once; the phase, reason and message are held
            // back while containers may run (`mergePodStatus`).
            kill_written = true;
            let mut status = compute(&s, &plan, &observed, &st, &back_offs, false).await;
            crate::status::set_disruption_target(&mut status, &k.message, s.shared.clock.now_ms());
            s.write(status).await;
            continue;
        }
        if st.phase == PodWorkerState::Terminating || sent_grace.is_some() {
            // The pod worker is in SyncTerminatingPod, or has been handed the delete and is
            // about to be: the next status it generates is the one with every container
            // stopped (a real 1.32 node went from Running, Ready straight to Failed with the
            // container terminated; a write in between showed `0/1 Terminating`).
            continue;
        }
        let status = compute(&s, &plan, &observed, &st, &back_offs, false).await;
        tracing::debug!(target: "podgrace::start", pod = %s.name, "status computed");
        s.write(status).await;
    }
    let report = handle.wait().await;
    if let (Some(sink), Ok(r)) = (&shared.config.reports, &report) {
        (sink.0)(&namespace, &s.name, r);
    }
    // SyncTerminatedPod: the status with every container stopped.
    let st = status_rx.borrow().clone();
    let mut status = compute(&s, &plan, &observed, &st, &back_offs, true).await;
    terminate_pod(&mut status);
    if let Some(k) = &st.killed {
        crate::status::set_disruption_target(&mut status, &k.message, s.shared.clock.now_ms());
        let computed = phase_of(&json!({"status": status}));
        let (phase, reason, message) = k.after_kill(computed, version);
        status["phase"] = json!(phase.as_str());
        if !reason.is_empty() {
            status["reason"] = json!(reason);
            status["message"] = json!(message);
        }
    }
    s.write(status).await;
    // The sandbox is stopped now (its network torn down) and removed once the object is gone,
    // as the kubelet's garbage collector removes the sandboxes of deleted pods: until then the
    // containers' logs stay readable (`kubectl logs` of a Completed pod).
    let sandbox = report.ok().and_then(|r| r.sandbox);
    if let Some(sb) = &sandbox {
        let _ = observed
            .inner()
            .stop_pod_sandbox(&CallContext::background(), sb)
            .await;
    }
    // The events of the termination are written before the object goes.
    drop(events);
    let _ = rec_task.await;
    idle_until_deleted(&mut s, &mut updates).await;
    if let Some(sb) = &sandbox {
        let _ = observed
            .inner()
            .remove_pod_sandbox(&CallContext::background(), sb)
            .await;
    }
    drop(observed);
    if let Some(t) = log_task {
        // The output ends when the pod's processes and runtime are gone.
        let _ = t.await;
    }
}

/// The object's container images by container name (`spec.initContainers[*].image` and
/// `spec.containers[*].image`; a container without one is left out).
fn images_of(pod: &Value) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for list in ["initContainers", "containers"] {
        for c in pod["spec"][list].as_array().into_iter().flatten() {
            if let (Some(n), Some(i)) = (c["name"].as_str(), c["image"].as_str()) {
                out.insert(n.to_string(), i.to_string());
            }
        }
    }
    out
}

/// Takes `images` into the containers of `plan` (the status shows the spec's image); `true`
/// when one of them changed.
fn changed_images(plan: &mut PodPlan, images: &std::collections::BTreeMap<String, String>) -> bool {
    let mut changed = false;
    for c in plan
        .init_containers
        .iter_mut()
        .chain(plan.containers.iter_mut())
    {
        if let Some(i) = images.get(&c.name) {
            if c.image.as_deref() != Some(i.as_str()) {
                c.image = Some(i.clone());
                changed = true;
            }
        }
    }
    changed
}

/// The data of the pod's configMap and secret volumes, read from the API in the pod's
/// namespace as the kubelet's configmap and secret volume plugins read them (a Secret's `data`
/// decoded; a missing object that is `optional` is an empty volume).
///
/// # Errors
/// `MountVolume.SetUp failed for volume "V" : configmap "N" not found` (or `secret`), the
/// kubelet's FailedMount message, for a missing object that is not optional, or the API's error.
async fn volume_data(
    client: &kube::Client,
    namespace: &str,
    mut plan: PodPlan,
) -> Result<PodPlan, String> {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use podgrace_core::plan::VolumeSource;
    for v in &mut plan.volumes {
        let VolumeSource::Data {
            kind,
            name,
            optional,
            data,
            ..
        } = &mut v.source
        else {
            continue;
        };
        let found: Option<std::collections::BTreeMap<String, String>> = if *kind == "Secret" {
            kube::Api::<Secret>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())?
                .map(|s| {
                    s.data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, b)| (k, String::from_utf8_lossy(&b.0).into_owned()))
                        .collect()
                })
        } else {
            kube::Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())?
                .map(|c| c.data.unwrap_or_default())
        };
        match found {
            Some(d) => *data = Some(d),
            None if *optional => *data = Some(Default::default()),
            None => {
                return Err(format!(
                    "MountVolume.SetUp failed for volume {:?} : {} {:?} not found",
                    v.name,
                    kind.to_ascii_lowercase(),
                    name
                ))
            }
        }
    }
    Ok(plan)
}

fn recorder_for<S>(s: &Sync<S>, plan: Option<&PodPlan>) -> Recorder {
    Recorder::new(
        s.shared.client.clone(),
        InvolvedPod {
            kind: "Pod",
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            uid: s.uid.clone(),
            resource_version: s.latest["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            init_containers: plan
                .map(|p| p.init_containers.iter().map(|c| c.name.clone()).collect())
                .unwrap_or_default(),
        },
        s.shared.config.node_name.clone(),
        s.shared.clock,
    )
}

/// After the pod worker: the final delete as soon as the object carries a deletion timestamp
/// and a terminal phase (`canBeDeleted`), or nothing more once the object is gone.
/// The status of a pod whose containers cannot be created: each container the process runtime
/// cannot run waits with `CreateContainerError` and the reason as its message, as the kubelet
/// reports a failed `CreateContainer` (`startContainer`'s `ErrCreateContainer`, surfaced by
/// `convertToAPIContainerStatuses` from the pod sync result); the others wait in
/// `ContainerCreating`; phase Pending, ContainersReady and Ready False. No sandbox is created
/// for it (PodReadyToStartContainers False, no pod IP), where the kubelet would have one.
///
/// The message for a container without `command` is containerd's ("no command specified")
/// with why: the process runtime runs no images, so it has no ENTRYPOINT to fall back on.
///
/// Upstream: `pkg/kubelet/kuberuntime/kuberuntime_container.go` (`startContainer`),
/// `pkg/kubelet/images/types.go` / `kuberuntime` errors (`CreateContainerError`),
/// `pkg/kubelet/kubelet_pods.go` (`convertToAPIContainerStatuses`), Kubernetes 1.27 to 1.37.
///
/// A container whose environment cannot be built (`env`: a ConfigMap or Secret, or one of
/// their keys, missing) waits with `CreateContainerConfigError` and the kubelet's message
/// instead (`configmap "x" not found`).
fn create_error_status<S: RuntimeSource>(
    s: &Sync<S>,
    plan: &PodPlan,
    opts: &PodOptions,
    env: Option<&crate::env::EnvError>,
) -> Value {
    use podgrace_node::kubelet::spec::{container_spec, SpecError};
    let old = s.old_status();
    let view = PodView {
        plan,
        uid: &s.uid,
        namespace: &s.namespace,
        containers: &[],
        sandbox_ready: false,
        pod_is_terminal: false,
        pod_ip: None,
        host_ip: s.shared.config.host_ip,
        start_time_ms: s.start_ms,
        old_status: &old,
        now_ms: s.shared.clock.now_ms(),
        version: s.shared.config.version,
        // No container was created, so no containerID is written.
        runtime_type: "",
    };
    let (mut status, _) = generate(&view);
    for (list, containers) in [
        ("initContainerStatuses", &plan.init_containers),
        ("containerStatuses", &plan.containers),
    ] {
        for c in containers {
            let over = opts.stop_signal_overrides.get(&c.name).map(String::as_str);
            let (reason, message) = match (env, container_spec(c, over, opts.force_host, opts.images)) {
                (Some(e), _) if e.container == c.name => ("CreateContainerConfigError", e.message.clone()),
                (Some(_), _) | (None, Ok(_)) => continue,
                (None, Err(SpecError::NoCommand { .. })) => ("CreateContainerError", "no command specified: the process runtime runs local processes and cannot read the image's ENTRYPOINT; set command (and args)".to_string()),
                (None, Err(other)) => ("CreateContainerError", other.to_string()),
            };
            if let Some(cs) = status
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .and_then(|a| {
                    a.iter_mut()
                        .find(|x| x.get("name").and_then(Value::as_str) == Some(&c.name))
                })
            {
                cs["state"] = json!({"waiting": {"reason": reason, "message": message}});
            }
        }
    }
    status
}

async fn idle_until_deleted<S: RuntimeSource>(
    s: &mut Sync<S>,
    updates: &mut mpsc::UnboundedReceiver<Update>,
) {
    loop {
        if s.removed {
            return;
        }
        let deleting = s.deletion_grace().is_some();
        if deleting && !phase_of(&s.latest).is_terminal() {
            // A pod that never ran (or whose worker ended early): TerminatePod's status.
            let mut st = s.latest.get("status").cloned().unwrap_or(json!({}));
            terminate_pod(&mut st);
            s.write(st).await;
        }
        let deletable = can_be_deleted(
            deleting,
            false,
            phase_of(&s.latest),
            true,
            s.shared.config.version,
        );
        // The status manager deletes once SyncTerminatedPod has finished: the recorded delay
        // after the terminal status (the PLEG relist and the volume waits upstream).
        let due = s.terminal_written.map(|at| {
            at + Duration::from_millis(
                u64::try_from(podstatus::final_delete_at_ms(0)).unwrap_or_default(),
            )
        });
        if deletable && due.is_none_or(|d| d <= Instant::now()) {
            s.final_delete().await;
            return;
        }
        let wait = async {
            match due.filter(|_| deletable) {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            u = updates.recv() => match u {
                Some(Update::Changed(p)) => {
                    if let Ok(v) = serde_json::to_value(&*p) {
                        s.latest = v;
                    }
                }
                Some(Update::Removed) | None => s.removed = true,
            },
            () = wait => {}
        }
    }
}

async fn recv_container_event<T: Clone>(rx: &mut Option<broadcast::Receiver<T>>) {
    match rx {
        Some(r) => match r.recv().await {
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => {
                *rx = None;
                std::future::pending::<()>().await;
            }
        },
        None => std::future::pending().await,
    }
}

/// The kubelet's back-off before the restart that follows `instances` exited runs (`doBackOff`
/// as the node layer's pod worker applies it: the first restart at once, then 10 s doubling up
/// to 300 s), seconds.
fn back_off_seconds(instances: usize) -> u64 {
    match instances {
        0 | 1 => 0,
        n => (10u64 << (n - 2).min(5)).min(300),
    }
}

async fn compute<S: RuntimeSource, R: RuntimeService>(
    s: &Sync<S>,
    plan: &PodPlan,
    observed: &ObservedRuntime<R>,
    st: &podgrace_node::kubelet::PodStatus,
    back_offs: &HashMap<String, Instant>,
    terminal: bool,
) -> Value {
    let record = observed.record();
    let ctx = CallContext::background();
    let clock = s.shared.clock;
    let mut views: Vec<ContainerView> = Vec::new();
    for c in plan.init_containers.iter().chain(&plan.containers) {
        let mut instances = Vec::new();
        let mut last_finished: Option<Instant> = None;
        let mut image = None;
        for (_, id) in record.containers.iter().filter(|(n, _)| *n == c.name) {
            let Ok(cs) = observed.container_status(&ctx, id).await else {
                continue;
            };
            image = cs
                .image
                .clone()
                .map(|i| (i, cs.image_ref.clone().unwrap_or_default()));
            let inst = match cs.state {
                ContainerState::Created => Instance::Created,
                ContainerState::Running => Instance::Running {
                    started_at_ms: cs.started_at.map(|t| clock.ms(t)).unwrap_or(s.start_ms),
                },
                ContainerState::Exited => {
                    last_finished = cs.finished_at;
                    Instance::Exited {
                        started_at_ms: cs.started_at.map(|t| clock.ms(t)),
                        finished_at_ms: cs.finished_at.map(|t| clock.ms(t)).unwrap_or(s.start_ms),
                        exit_code: cs.exit.map(|e| e.code()).unwrap_or(0),
                        reason: cs.reason.clone(),
                    }
                }
            };
            instances.push((id.clone(), inst));
        }
        let has_probe = c.readiness_probe.is_some();
        let running = matches!(instances.last(), Some((_, Instance::Running { .. })));
        let back_off = match (back_offs.get(&c.name), last_finished) {
            (Some(at), Some(fin)) if *at >= fin && c.role != ContainerRole::Init => {
                Some(back_off_seconds(instances.len()))
            }
            _ => None,
        };
        views.push(ContainerView {
            name: c.name.clone(),
            ready: running && (st.ready || !has_probe),
            instances,
            back_off_seconds: back_off,
            waiting: st
                .waiting
                .iter()
                .find(|w| w.container == c.name)
                .map(|w| (w.reason.to_string(), w.message.clone())),
            image,
        });
    }
    let old = s.old_status();
    let view = PodView {
        plan,
        uid: &s.uid,
        namespace: &s.namespace,
        containers: &views,
        sandbox_ready: record.sandbox.is_some() && !record.sandbox_stopped && !terminal,
        pod_is_terminal: terminal,
        pod_ip: st.pod_ip,
        host_ip: s.shared.config.host_ip,
        start_time_ms: s.start_ms,
        old_status: &old,
        now_ms: clock.now_ms(),
        version: s.shared.config.version,
        runtime_type: observed.runtime_type(),
    };
    generate(&view).0
}
