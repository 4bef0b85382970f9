//! `PodPlan`: a pod as the kubelet sees it, with upstream defaults applied.
//!
//! A manifest is converted into plans exactly once (see [`crate::manifest`]); everything above
//! (rules, timelines, lint, the local kubelet) reads plans, never raw YAML. All durations are
//! whole seconds (`i64`), as in the Kubernetes API.

use crate::Seconds;
use std::collections::BTreeMap;

/// Where something came from in the input: file, 1-based line and column, and the field path
/// (`spec.template.spec.containers[0].lifecycle.preStop`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceSpan {
    /// File name as given by the user (`-` for stdin).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Field path from the document root, kubectl style.
    pub path: String,
}

/// The workload kind a pod template came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    /// A bare `v1` Pod.
    Pod,
    /// An `apps/v1` Deployment's `spec.template`.
    Deployment,
    /// An `apps/v1` StatefulSet's `spec.template`.
    StatefulSet,
    /// An `apps/v1` DaemonSet's `spec.template`.
    DaemonSet,
    /// An `apps/v1` ReplicaSet's `spec.template`.
    ReplicaSet,
    /// A `v1` ReplicationController's `spec.template`.
    ReplicationController,
    /// A `batch/v1` Job's `spec.template`.
    Job,
    /// A `batch/v1` CronJob's `spec.jobTemplate.spec.template`.
    CronJob,
}

impl WorkloadKind {
    /// The API `kind` string.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Pod => "Pod",
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::ReplicationController => "ReplicationController",
            WorkloadKind::Job => "Job",
            WorkloadKind::CronJob => "CronJob",
        }
    }
}

/// The pod's restartPolicy (default `Always`; Jobs require `OnFailure` or `Never`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    /// `Always`: every exited container is restarted, whatever its exit code (the default).
    #[default]
    Always,
    /// `OnFailure`: a container that exited with a code other than 0 is restarted.
    OnFailure,
    /// `Never`: no container is restarted; the pod ends Succeeded or Failed.
    Never,
}

/// The role a container plays in termination ordering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerRole {
    /// A regular init container: runs to completion before the main containers.
    Init,
    /// A native sidecar: an init container with `restartPolicy: Always`.
    Sidecar,
    /// A regular container in `spec.containers`.
    Main,
}

impl ContainerRole {
    /// The word used in the explain and run JSON contracts (`"main"` or `"sidecar"`; a regular
    /// init container reports as `"init"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerRole::Init => "init",
            ContainerRole::Sidecar => "sidecar",
            ContainerRole::Main => "main",
        }
    }
}

/// A lifecycle handler (postStart or preStop), `core/v1 LifecycleHandler`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler {
    /// `exec.command`, run inside the container.
    Exec {
        /// The argv, run without a shell unless it names one (`sh -c ...`).
        command: Vec<String>,
    },
    /// `httpGet`. `host` empty means the pod IP.
    HttpGet(HttpGet),
    /// `sleep.seconds`.
    Sleep {
        /// How long the kubelet sleeps, seconds.
        seconds: i64,
    },
    /// `tcpSocket`: accepted by the API for backward compatibility, never executed by the kubelet.
    TcpSocket {
        /// `tcpSocket.port`.
        port: PortRef,
    },
}

impl Handler {
    /// The action name used in the JSON contracts: `exec`, `httpGet`, `sleep` or `tcpSocket`.
    pub fn action(&self) -> &'static str {
        match self {
            Handler::Exec { .. } => "exec",
            Handler::HttpGet(_) => "httpGet",
            Handler::Sleep { .. } => "sleep",
            Handler::TcpSocket { .. } => "tcpSocket",
        }
    }

    /// How long the handler runs if it is of known length, exactly: the sleep action, exec
    /// `sleep N`, `sh -c "sleep N"` / `bash -c "sleep N"` (also `exec sleep N`), with N a plain
    /// number of seconds or a `s`/`m`/`h` suffixed one; a tcpSocket handler takes 0 (the
    /// kubelet refuses to run it). `None` when it can't be known.
    pub fn known_duration(&self) -> Option<Seconds> {
        match self {
            Handler::Sleep { seconds } => Some(Seconds::from_secs((*seconds).max(0))),
            Handler::Exec { command } => {
                exec_sleep_ms(command).map(|ms| Seconds::from_ms(ms.into()))
            }
            // The kubelet has no runner for tcpSocket lifecycle handlers: it fails at once.
            Handler::TcpSocket { .. } => Some(Seconds::ZERO),
            Handler::HttpGet(_) => None,
        }
    }

    /// The least time the handler runs: [`Self::known_duration`] when that is known, else for an
    /// exec `sh -c` (or `bash -c` ...) script that begins with sleeps run in sequence (`sleep 10
    /// && nginx -s quit`, `sleep 5; kill -TERM 1`) the length of those sleeps, since what
    /// follows them can only add to it. A sleep sent to the background (`sleep 10 &`) or piped
    /// does not count. `None` when nothing is known.
    pub fn min_duration(&self) -> Option<Seconds> {
        if let Some(d) = self.known_duration() {
            return Some(d);
        }
        match self {
            Handler::Exec { command } => match command.as_slice() {
                [shell, flag, script] if is_shell(shell) && flag == "-c" => {
                    leading_sleeps_ms(script).map(|ms| Seconds::from_ms(ms.into()))
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// [`Self::known_duration`] in milliseconds, saturating at `i64::MAX` (a sleep action of
    /// more than about 292 million years).
    pub fn known_duration_ms(&self) -> Option<i64> {
        self.known_duration()
            .map(|d| i64::try_from(d.ms()).unwrap_or(i64::MAX))
    }
}

fn is_sleep(s: &str) -> bool {
    s == "sleep" || s.ends_with("/sleep")
}

fn is_shell(s: &str) -> bool {
    let base = s.rsplit('/').next().unwrap_or(s);
    matches!(base, "sh" | "bash" | "ash" | "dash" | "zsh")
}

/// The sleeps a shell script begins with, run one after the other, in milliseconds: each
/// `sleep N` (or `exec sleep N`) followed by `;`, `&&`, `||`, a newline or the end counts (after
/// `||` nothing more runs once the sleep succeeded); one followed by `&` or `|` does not block.
/// `None` when the script does not begin with a sleep.
fn leading_sleeps_ms(script: &str) -> Option<i64> {
    let mut rest = script;
    let mut total: Option<i64> = None;
    loop {
        let cut = rest.find([';', '&', '|', '\n']).unwrap_or(rest.len());
        let (cmd, tail) = rest.split_at(cut);
        let ms = match cmd.split_whitespace().collect::<Vec<_>>().as_slice() {
            [s, n] if is_sleep(s) => parse_sleep_arg(n),
            ["exec", s, n] if is_sleep(s) => parse_sleep_arg(n),
            _ => None,
        };
        let Some(ms) = ms else {
            return total;
        };
        let (sep, next) = if let Some(t) = tail.strip_prefix("&&") {
            ("&&", t)
        } else if let Some(t) = tail.strip_prefix("||") {
            ("||", t)
        } else if let Some(t) = tail.strip_prefix(';').or(tail.strip_prefix('\n')) {
            (";", t)
        } else if tail.is_empty() {
            ("", tail)
        } else {
            // `&` (background) or `|` (a pipe): this sleep does not hold the script.
            return total;
        };
        total = Some(total.unwrap_or(0).saturating_add(ms));
        if sep.is_empty() || sep == "||" {
            return total;
        }
        rest = next;
    }
}

/// Recognises `sleep N`, `/bin/sleep N` and `sh -c "sleep N"` style commands.
fn exec_sleep_ms(command: &[String]) -> Option<i64> {
    match command {
        [prog, arg] if is_sleep(prog) => parse_sleep_arg(arg),
        [shell, flag, script] if is_shell(shell.as_str()) && flag == "-c" => {
            let words: Vec<&str> = script.split_whitespace().collect();
            match words.as_slice() {
                [s, n] if is_sleep(s) => parse_sleep_arg(n),
                ["exec", s, n] if is_sleep(s) => parse_sleep_arg(n),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `sleep` argument (coreutils/busybox syntax) in milliseconds.
fn parse_sleep_arg(arg: &str) -> Option<i64> {
    let arg = arg.trim().trim_end_matches(';');
    let (num, mult) = match arg.char_indices().last()? {
        (i, 's') => (&arg[..i], 1000.0),
        (i, 'm') => (&arg[..i], 60_000.0),
        (i, 'h') => (&arg[..i], 3_600_000.0),
        (i, 'd') => (&arg[..i], 86_400_000.0),
        _ => (arg, 1000.0),
    };
    let value: f64 = num.parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    let ms = value * mult;
    if ms > i64::MAX as f64 / 2.0 {
        return None;
    }
    Some(ms.round() as i64)
}

/// A port given by number or by the name of a declared containerPort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    /// A port number, 1 to 65535.
    Number(i32),
    /// The `name` of one of the container's `ports` (an IANA_SVC_NAME, at most 15 characters).
    Name(String),
}

/// `httpGet` action of a handler or probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGet {
    /// `host`; `None` means the pod IP.
    pub host: Option<String>,
    /// `port`, by number or by name.
    pub port: PortRef,
    /// `path`, default `/`.
    pub path: String,
    /// `scheme`: `HTTP` (default) or `HTTPS`.
    pub scheme: String,
    /// `httpHeaders`, in order.
    pub headers: Vec<(String, String)>,
}

/// A probe's action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    /// `exec`: the command runs in the container; exit code 0 is success.
    Exec {
        /// The argv, run without a shell unless it names one.
        command: Vec<String>,
    },
    /// `httpGet`: a status code from 200 to 399 is success.
    HttpGet(HttpGet),
    /// `tcpSocket`: a connection that opens is success.
    TcpSocket {
        /// `host`; `None` means the pod IP.
        host: Option<String>,
        /// `port`, by number or by name.
        port: PortRef,
    },
    /// `grpc`: the gRPC health checking protocol's `SERVING` is success.
    Grpc {
        /// `port`: a number only.
        port: i32,
        /// `service` sent in the `HealthCheckRequest`; `None` is the empty name.
        service: Option<String>,
    },
}

/// A liveness, readiness or startup probe with upstream defaults applied
/// (period 10 s, timeout 1 s, success 1, failure 3, initial delay 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// What the probe does: exec, httpGet, tcpSocket or grpc.
    pub action: ProbeAction,
    /// `initialDelaySeconds`, seconds.
    pub initial_delay_seconds: i64,
    /// `periodSeconds`, seconds.
    pub period_seconds: i64,
    /// `timeoutSeconds`, seconds.
    pub timeout_seconds: i64,
    /// `successThreshold`: passes in a row that count as success after a failure (1 for liveness
    /// and startup).
    pub success_threshold: i64,
    /// `failureThreshold`: failures in a row that count as failure.
    pub failure_threshold: i64,
    /// Probe-level `terminationGracePeriodSeconds` (KEP-2238; liveness and startup only), seconds.
    pub termination_grace_period_seconds: Option<i64>,
}

/// One `envFrom` source: every key of a ConfigMap or Secret, with an optional prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvFrom {
    /// `ConfigMap` or `Secret`.
    pub kind: &'static str,
    /// `configMapRef.name` or `secretRef.name`.
    pub name: String,
    /// `prefix` added to every variable's name; empty when not set.
    pub prefix: String,
    /// `optional: true`: a missing source is no error.
    pub optional: bool,
}

/// One of the pod's `volumes`, the kinds podgrace's kubelet provides to a runtime with images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// `name`, what `volumeMounts` refer to.
    pub name: String,
    /// What the volume is made from.
    pub source: VolumeSource,
}

/// What a volume is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeSource {
    /// `emptyDir`: a fresh directory for the pod's life.
    EmptyDir,
    /// `hostPath.path` and `hostPath.type` (`None` or empty: no check; `DirectoryOrCreate`,
    /// `Directory`, `FileOrCreate`, `File`, `Socket`, `CharDevice`, `BlockDevice`).
    HostPath {
        /// `hostPath.path` on the node.
        path: String,
        /// `hostPath.type`; `None` when not set.
        path_type: Option<String>,
    },
    /// `configMap` (`kind` `ConfigMap`, `name`) or `secret` (`kind` `Secret`, `secretName`):
    /// the object's keys as files, or only `items` (key → path) when given; `data` is filled
    /// from the same input by [`crate::manifest::Manifest::resolve_env_from`].
    Data {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// The ConfigMap's `name` or the Secret's `secretName`.
        name: String,
        /// `optional: true`: a missing object or key is no error.
        optional: bool,
        /// `items`: key → path relative to the mount; empty means every key, each as a file named
        /// after it.
        items: Vec<(String, String)>,
        /// `defaultMode`, when written.
        default_mode: Option<i32>,
        /// The object's data, from the same input; `None` when it is not there.
        data: Option<BTreeMap<String, String>>,
    },
    /// Any other kind (persistentVolumeClaim, projected, downwardAPI, ...), by its field name.
    Other {
        /// The volume source's field name (`persistentVolumeClaim`, `projected`, ...).
        kind: String,
    },
}

/// A container's `volumeMounts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMount {
    /// `name` of one of the pod's `volumes`.
    pub name: String,
    /// `mountPath` in the container.
    pub mount_path: String,
    /// `readOnly`: writes through this mount fail.
    pub read_only: bool,
    /// `subPath` inside the volume; `None` mounts the whole volume.
    pub sub_path: Option<String>,
}

/// A declared `containerPort`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPort {
    /// `name`, which probes and handlers can refer to; `None` when not set.
    pub name: Option<String>,
    /// `containerPort`, 1 to 65535.
    pub container_port: i32,
    /// `TCP` (default), `UDP` or `SCTP`.
    pub protocol: String,
    /// `hostPort` (0 when absent: not mapped on the host).
    pub host_port: i32,
    /// `hostIP` (empty when absent).
    pub host_ip: String,
}

/// One container of a pod, with the fields termination depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPlan {
    /// `name`, unique in the pod.
    pub name: String,
    /// Main container, native sidecar, or regular init container.
    pub role: ContainerRole,
    /// Index in its list (`initContainers` or `containers`).
    pub index: usize,
    /// `image` as written; `None` when absent.
    pub image: Option<String>,
    /// `imagePullPolicy` as written (`Always`, `IfNotPresent`, `Never`); `None` when absent.
    pub image_pull_policy: Option<String>,
    /// `command` (the image's ENTRYPOINT when empty).
    pub command: Vec<String>,
    /// `args` (the image's CMD when `command` and `args` are both empty).
    pub args: Vec<String>,
    /// `workingDir`; `None` for the image's default.
    pub working_dir: Option<String>,
    /// Literal `env` values in order; values from references are recorded as `None`.
    pub env: Vec<(String, Option<String>)>,
    /// The `valueFrom.fieldRef.fieldPath` of the `env` entries that have one, by variable
    /// name (`POD_IP` → `status.podIP`): the node layer resolves the pod's addresses
    /// (`status.podIP`, `status.podIPs`) once the sandbox has them.
    pub env_field_refs: BTreeMap<String, String>,
    /// `envFrom` sources in order.
    pub env_from: Vec<EnvFrom>,
    /// `ports` in order.
    pub ports: Vec<ContainerPort>,
    /// `volumeMounts` in order.
    pub volume_mounts: Vec<VolumeMount>,
    /// `lifecycle.postStart`.
    pub post_start: Option<Handler>,
    /// `lifecycle.preStop`: run before the stop signal, within the grace period.
    pub pre_stop: Option<Handler>,
    /// `lifecycle.stopSignal` (KEP-4960), as written (`SIGTERM`, `SIGQUIT`, ...).
    pub stop_signal: Option<String>,
    /// The image's STOPSIGNAL as a container runtime holds it (`--image-source containerd`):
    /// `Some(None)` when the image's config sets none; `None` when it was not read, and the
    /// table of known official images applies ([`crate::rules::runtime::image_stop_signal`]).
    pub image_config_stop_signal: Option<Option<String>>,
    /// `livenessProbe`: its failure kills and restarts the container.
    pub liveness_probe: Option<Probe>,
    /// `readinessProbe`: its failure takes the pod out of the Service's endpoints.
    pub readiness_probe: Option<Probe>,
    /// `startupProbe`: holds the other probes until it passes; its failure kills the container.
    pub startup_probe: Option<Probe>,
    /// `resources.requests` and `resources.limits` as written (not defaulted).
    pub resources: crate::rules::qos::ContainerResources,
    /// Where the container is declared.
    pub span: SourceSpan,
    /// Positions (line, column) of the fields lint points at, keyed by their path below the
    /// container (`lifecycle.preStop`, `command`, `livenessProbe.terminationGracePeriodSeconds`);
    /// only fields present in the input. See [`ContainerPlan::field_span`].
    pub field_positions: BTreeMap<&'static str, (usize, usize)>,
}

impl ContainerPlan {
    /// Where the field `key` (a path below the container, as in [`Self::field_positions`]) is
    /// written; the container itself when the field is absent.
    pub fn field_span(&self, key: &str) -> SourceSpan {
        field_span(&self.span, &self.field_positions, key)
    }
}

fn field_span(
    base: &SourceSpan,
    positions: &BTreeMap<&'static str, (usize, usize)>,
    key: &str,
) -> SourceSpan {
    match positions.get(key) {
        Some(&(line, column)) => SourceSpan {
            file: base.file.clone(),
            line,
            column,
            path: if base.path.is_empty() {
                key.to_string()
            } else {
                format!("{}.{key}", base.path)
            },
        },
        None => base.clone(),
    }
}

/// A pod (or pod template) with upstream defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPlan {
    /// Pod name; for templates, the workload's name.
    pub name: String,
    /// `metadata.namespace`, if set.
    pub namespace: Option<String>,
    /// The object the pod came from.
    pub kind: WorkloadKind,
    /// Pod template labels (for Service selectors).
    pub labels: BTreeMap<String, String>,
    /// Pod template annotations (settings that live there, such as istio's
    /// `proxy.istio.io/config`).
    pub annotations: BTreeMap<String, String>,
    /// `spec.terminationGracePeriodSeconds`, defaulted to 30, seconds.
    pub termination_grace_period_seconds: i64,
    /// `true` if the manifest left TGPS unset and the default of 30 applies.
    pub termination_grace_period_defaulted: bool,
    /// `spec.terminationGracePeriodSeconds` as written, before defaulting and before a negative
    /// value is treated as 1; `None` when unset.
    pub termination_grace_period_written: Option<i64>,
    /// `spec.priority`, if given.
    pub priority: Option<i32>,
    /// `spec.priorityClassName`, if given.
    pub priority_class_name: Option<String>,
    /// `spec.restartPolicy`, defaulted to `Always`.
    pub restart_policy: RestartPolicy,
    /// `spec.hostNetwork`: the pod uses the node's network namespace.
    pub host_network: bool,
    /// `spec.shareProcessNamespace`: one PID namespace for all containers, so the pause process is
    /// PID 1.
    pub share_process_namespace: bool,
    /// The pod's QoS class (`status.qosClass`, [`crate::rules::qos::pod_qos`]).
    pub qos_class: crate::rules::qos::QosClass,
    /// `spec.volumes` in order.
    pub volumes: Vec<Volume>,
    /// `spec.os.name`, if set.
    pub os: Option<String>,
    /// Replicas of the workload (Deployment, StatefulSet, ReplicaSet, RC); `None` otherwise.
    pub replicas: Option<i32>,
    /// `spec.minReadySeconds` of a Deployment, StatefulSet or ReplicaSet (0 when unset or for
    /// other objects), seconds: how long a new pod must have been Ready before it counts as
    /// available, and so before a rollout deletes an old pod for it.
    pub min_ready_seconds: i64,
    /// Init containers (regular and native sidecars) in declaration order.
    pub init_containers: Vec<ContainerPlan>,
    /// Regular containers in declaration order.
    pub containers: Vec<ContainerPlan>,
    /// Where the object starts.
    pub span: SourceSpan,
    /// Field path from the object root to the pod spec (`spec`, `spec.template.spec`).
    pub spec_path: &'static str,
    /// Positions (line, column) of pod-spec fields present in the input, keyed by their path
    /// below the pod spec (`terminationGracePeriodSeconds`). See [`PodPlan::field_span`].
    pub field_positions: BTreeMap<&'static str, (usize, usize)>,
}

impl PodPlan {
    /// Where the pod-spec field `key` is written; the object itself when it is absent.
    pub fn field_span(&self, key: &str) -> SourceSpan {
        match self.field_positions.get(key) {
            Some(&(line, column)) => SourceSpan {
                file: self.span.file.clone(),
                line,
                column,
                path: format!("{}.{key}", self.spec_path),
            },
            None => self.span.clone(),
        }
    }

    /// Native sidecars, in declaration order.
    pub fn sidecars(&self) -> impl Iterator<Item = &ContainerPlan> {
        self.init_containers
            .iter()
            .filter(|c| c.role == ContainerRole::Sidecar)
    }

    /// Every container that runs during termination: native sidecars, then main containers.
    pub fn running_containers(&self) -> impl Iterator<Item = &ContainerPlan> {
        self.sidecars().chain(self.containers.iter())
    }

    /// The priority the Priority admission plugin gives the pod: `spec.priority` if set, else
    /// the value of a built-in class (`system-node-critical` 2000001000,
    /// `system-cluster-critical` 2000000000). Other class names need the cluster's
    /// PriorityClass objects, so they give `None`.
    ///
    /// Source: `pkg/apis/scheduling/types.go` (`SystemCriticalPriority`) and
    /// `plugin/pkg/admission/priority/admission.go`.
    pub fn effective_priority(&self) -> Option<i32> {
        self.priority.or(match self.priority_class_name.as_deref() {
            Some("system-node-critical") => Some(2_000_001_000),
            Some("system-cluster-critical") => Some(2_000_000_000),
            _ => None,
        })
    }

    /// A critical pod for the kubelet: priority at least `SystemCriticalPriority` (2000000000).
    /// Static and mirror pods are critical too, but a manifest cannot say it is one.
    ///
    /// Source: `pkg/kubelet/types/pod_update.go` `IsCriticalPod`.
    pub fn is_critical(&self) -> bool {
        self.effective_priority()
            .is_some_and(|p| p >= 2_000_000_000)
    }

    /// The pod's containers' resources as the kubelet reads them (requests defaulted from
    /// limits as the API server stores them), for the cgroup rules of
    /// [`crate::rules::resources`]; node-critical when critical and of the
    /// `system-node-critical` class (`IsNodeCriticalPod`).
    pub fn resources(&self) -> crate::rules::resources::PodResources {
        use crate::rules::resources::{PodResources, ResourceContainer};
        let ctr = |c: &ContainerPlan| ResourceContainer {
            name: c.name.clone(),
            resources: c.resources.parsed(),
            sidecar: c.role == ContainerRole::Sidecar,
        };
        PodResources {
            init_containers: self.init_containers.iter().map(ctr).collect(),
            containers: self.containers.iter().map(ctr).collect(),
            node_critical: self.is_critical()
                && self.priority_class_name.as_deref() == Some("system-node-critical"),
        }
        .defaulted()
    }

    /// Looks a container up by name among init and regular containers.
    pub fn container(&self, name: &str) -> Option<&ContainerPlan> {
        self.init_containers
            .iter()
            .chain(self.containers.iter())
            .find(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(args: &[&str]) -> Handler {
        Handler::Exec {
            command: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn known_durations() {
        assert_eq!(
            Handler::Sleep { seconds: 5 }.known_duration_ms(),
            Some(5000)
        );
        assert_eq!(exec(&["sleep", "10"]).known_duration_ms(), Some(10_000));
        assert_eq!(exec(&["/bin/sleep", "1.5"]).known_duration_ms(), Some(1500));
        assert_eq!(
            exec(&["sh", "-c", "sleep 15"]).known_duration_ms(),
            Some(15_000)
        );
        assert_eq!(
            exec(&["/bin/bash", "-c", "exec sleep 2m"]).known_duration_ms(),
            Some(120_000)
        );
        assert_eq!(
            exec(&["sh", "-c", "sleep 5; kill -TERM 1"]).known_duration_ms(),
            None
        );
        assert_eq!(exec(&["nginx", "-s", "quit"]).known_duration_ms(), None);
        assert_eq!(exec(&["sleep", "inf"]).known_duration_ms(), None);
        assert_eq!(exec(&["sleep", "-1"]).known_duration_ms(), None);
    }

    #[test]
    fn least_durations_of_scripts_that_begin_with_sleeps() {
        let min = |script: &str| exec(&["sh", "-c", script]).min_duration().map(|d| d.ms());
        assert_eq!(min("sleep 10 && nginx -s quit"), Some(10_000));
        assert_eq!(min("sleep 5; kill -TERM 1"), Some(5_000));
        assert_eq!(min("sleep 2 && sleep 3 && /drain"), Some(5_000));
        assert_eq!(min("sleep 1\nexec sleep 2\necho done"), Some(3_000));
        assert_eq!(min("sleep 4 || echo failed; sleep 100"), Some(4_000));
        assert_eq!(min("exec sleep 7"), Some(7_000));
        // Not holding the script, or not first.
        assert_eq!(min("sleep 10 & nginx -s quit"), None);
        assert_eq!(min("sleep 10 | cat"), None);
        assert_eq!(min("nginx -s quit && sleep 10"), None);
        assert_eq!(min("sleep $DELAY && x"), None);
        // Exact lengths stay exact, and are their own least.
        assert_eq!(exec(&["sh", "-c", "sleep 10 && x"]).known_duration(), None);
        assert_eq!(min("sleep 15"), Some(15_000));
        assert_eq!(
            Handler::Sleep { seconds: 3 }.min_duration().map(|d| d.ms()),
            Some(3_000)
        );
    }
}
