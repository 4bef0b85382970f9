//! The API server's validation of the pod fields termination depends on, worded as the API
//! server words it (`field.Error` of `k8s.io/apimachinery/pkg/util/validation/field`).
//!
//! Every check runs on the typed spec after upstream defaulting would have applied (TGPS 30,
//! probe defaults, restartPolicy `Always`), exactly as the API server validates defaulted objects.

use std::collections::HashSet;

use std::fmt;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::excerpt::quote;
use super::tree::{Node, Pos};
use crate::plan::WorkloadKind;
use crate::KubeVersion;

/// The body of an upstream `field.Error` (`ErrorBody()`), without the field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Invalid value: VALUE: DETAIL` (`field.Invalid`); `value` is rendered as Go's `%v`
    /// (numbers bare, strings quoted, a long string cut, as `excerpt::quote` does).
    Invalid {
        /// The rejected value, rendered as Go's `%v`.
        value: String,
        /// Why it is rejected, in the API server's words.
        detail: String,
    },
    /// `Required value[: DETAIL]` (`field.Required`).
    Required {
        /// What is required, in the API server's words; may be empty.
        detail: String,
    },
    /// `Forbidden: DETAIL` (`field.Forbidden`).
    Forbidden {
        /// Why it is forbidden, in the API server's words.
        detail: String,
    },
    /// `Unsupported value: VALUE: supported values: "A", "B"` (`field.NotSupported`).
    NotSupported {
        /// The rejected value, quoted as Go's `%q`.
        value: String,
        /// The values the field accepts, in the API server's order.
        supported: Vec<String>,
    },
    /// `Duplicate value: VALUE` (`field.Duplicate`).
    Duplicate {
        /// The repeated value, rendered as Go's `%v`.
        value: String,
    },
}

impl fmt::Display for FieldErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldErrorKind::Invalid { value, detail } => {
                write!(f, "Invalid value: {value}")?;
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
            FieldErrorKind::Required { detail } => {
                f.write_str("Required value")?;
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
            FieldErrorKind::Forbidden { detail } => write!(f, "Forbidden: {detail}"),
            FieldErrorKind::NotSupported { value, supported } => {
                let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
                write!(
                    f,
                    "Unsupported value: {value}: supported values: {}",
                    list.join(", ")
                )
            }
            FieldErrorKind::Duplicate { value } => write!(f, "Duplicate value: {value}"),
        }
    }
}

/// One segment of a field path below the pod spec.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seg<'s> {
    Key(&'s str),
    Index(usize),
}

/// A validation failure: path from the object root, the position of the closest node that
/// exists in the input, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub path: String,
    pub pos: Pos,
    pub kind: FieldErrorKind,
}

/// Where the pod spec (or the part of a document checked) sits: its node (if written) and its
/// path from the object root.
pub(crate) struct SpecAt<'n, 'a> {
    pub node: Option<&'n Node<'a>>,
    /// Position used when `node` is absent (the object).
    pub fallback: Pos,
    /// Path segments from the object root to the pod spec (`spec.template.spec`).
    pub prefix: &'static [&'static str],
}

impl<'n, 'a> SpecAt<'n, 'a> {
    /// The node at `segs` below the pod spec, if written.
    pub fn node_at(&self, segs: &[Seg<'_>]) -> Option<&'n Node<'a>> {
        let mut node = self.node;
        for s in segs {
            node = match s {
                Seg::Key(k) => node.and_then(|n| n.get(k)),
                Seg::Index(i) => node.and_then(|n| n.index(*i)),
            };
        }
        node
    }

    /// Renders `prefix + segs` and finds the deepest existing node along it.
    pub fn locate(&self, segs: &[Seg<'_>]) -> (String, Pos) {
        let mut path = String::new();
        for p in self.prefix {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(p);
        }
        let mut node = self.node;
        let mut pos = node.map_or(self.fallback, |n| n.pos);
        for s in segs {
            match s {
                Seg::Key(k) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                    node = node.and_then(|n| n.get(k));
                }
                Seg::Index(i) => {
                    path.push_str(&format!("[{i}]"));
                    node = node.and_then(|n| n.index(*i));
                }
            }
            if let Some(n) = node {
                pos = n.pos;
            }
        }
        (path, pos)
    }
}

struct Checker<'c, 'n, 'a> {
    at: &'c SpecAt<'n, 'a>,
    version: KubeVersion,
    errors: Vec<FieldError>,
}

impl Checker<'_, '_, '_> {
    fn push(&mut self, segs: &[Seg<'_>], kind: FieldErrorKind) {
        let (path, pos) = self.at.locate(segs);
        self.errors.push(FieldError { path, pos, kind });
    }
}

/// The message of `IsDNS1123Label` (`k8s.io/apimachinery/pkg/util/validation`).
const DNS1123_LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// `IsDNS1123Label`: at most 63 characters of `[a-z0-9-]`, starting and ending alphanumeric.
fn is_dns1123_label(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(|&b| alnum(b) || b == b'-')
        && bytes.first().is_some_and(|&b| alnum(b))
        && bytes.last().is_some_and(|&b| alnum(b))
}

fn with<'s>(base: &[Seg<'s>], more: &[Seg<'s>]) -> Vec<Seg<'s>> {
    let mut v = Vec::with_capacity(base.len() + more.len());
    v.extend_from_slice(base);
    v.extend_from_slice(more);
    v
}

/// Validates a pod spec (after defaulting) as the API server would for `kind`.
///
/// Upstream: `ValidatePodSpec`, `validateContainers`, `validateInitContainers`,
/// `validateLifecycle`, `validateHandler`, `validateSleepAction`, `validateProbe`,
/// `validateContainerStopSignal` (`pkg/apis/core/validation/validation.go`) and
/// `ValidateJobSpec`'s restartPolicy rule (`pkg/apis/batch/validation/validation.go`).
pub(crate) fn pod_spec(
    spec: &PodSpec,
    kind: WorkloadKind,
    at: &SpecAt<'_, '_>,
    version: KubeVersion,
) -> Vec<FieldError> {
    let mut c = Checker {
        at,
        version,
        errors: Vec::new(),
    };
    let grace = spec.termination_grace_period_seconds.unwrap_or(30);
    restart_policy(&mut c, spec, kind);
    if spec.containers.is_empty() {
        c.push(
            &[Seg::Key("containers")],
            FieldErrorKind::Required {
                detail: String::new(),
            },
        );
    }
    let mut names: HashSet<&str> = HashSet::new();
    let init = spec.init_containers.as_deref().unwrap_or_default();
    for (i, ctr) in init.iter().enumerate() {
        let base = [Seg::Key("initContainers"), Seg::Index(i)];
        let sidecar = ctr.restart_policy.as_deref() == Some("Always");
        container(
            &mut c,
            ctr,
            &base,
            &mut names,
            grace,
            spec,
            if sidecar { Role::Sidecar } else { Role::Init },
        );
    }
    for (i, ctr) in spec.containers.iter().enumerate() {
        let base = [Seg::Key("containers"), Seg::Index(i)];
        container(&mut c, ctr, &base, &mut names, grace, spec, Role::Main);
    }
    c.errors
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Init,
    Sidecar,
    Main,
}

/// `ValidatePodSpec` restartPolicy (`validateRestartPolicy`): one of Always, OnFailure, Never;
/// `ValidateJobSpec`: a Job's template must use OnFailure or Never (the pod default `Always` is
/// rejected, so Job templates must set it explicitly).
fn restart_policy(c: &mut Checker<'_, '_, '_>, spec: &PodSpec, kind: WorkloadKind) {
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let segs = [Seg::Key("restartPolicy")];
    if !matches!(policy, "Always" | "OnFailure" | "Never") {
        c.push(
            &segs,
            FieldErrorKind::NotSupported {
                value: quote(policy),
                supported: vec!["Always".into(), "Never".into(), "OnFailure".into()],
            },
        );
        return;
    }
    if matches!(kind, WorkloadKind::Job | WorkloadKind::CronJob) && policy == "Always" {
        c.push(
            &segs,
            FieldErrorKind::NotSupported {
                value: quote(policy),
                supported: vec!["OnFailure".into(), "Never".into()],
            },
        );
    }
}

/// Per-container checks: `validateContainerCommon` (name required and unique across init and
/// regular containers, `field.Duplicate`), `validateInitContainers` (probes and lifecycle only on
/// native sidecars), `validateLifecycle`, probes and `validateContainerStopSignal`.
fn container<'s>(
    c: &mut Checker<'_, '_, '_>,
    ctr: &'s Container,
    base: &[Seg<'s>],
    names: &mut HashSet<&'s str>,
    grace: i64,
    spec: &PodSpec,
    role: Role,
) {
    if ctr.name.is_empty() {
        c.push(
            &with(base, &[Seg::Key("name")]),
            FieldErrorKind::Required {
                detail: String::new(),
            },
        );
    } else if !is_dns1123_label(&ctr.name) {
        c.push(
            &with(base, &[Seg::Key("name")]),
            FieldErrorKind::Invalid {
                value: quote(&ctr.name),
                detail: DNS1123_LABEL_ERROR.into(),
            },
        );
    } else if !names.insert(&ctr.name) {
        c.push(
            &with(base, &[Seg::Key("name")]),
            FieldErrorKind::Duplicate {
                value: quote(&ctr.name),
            },
        );
    }
    if role == Role::Sidecar && !c.version.sidecar_containers() {
        let v = c.version;
        c.push(
            &with(base, &[Seg::Key("restartPolicy")]),
            FieldErrorKind::Forbidden {
                detail: format!("native sidecars need Kubernetes 1.29 or newer (SidecarContainers: alpha in 1.28, beta and on by default in 1.29); on Kubernetes {v} this init container would never finish and the pod would not start"),
            },
        );
    }
    if let Some(r) = &ctr.resources {
        for (which, list) in [("requests", &r.requests), ("limits", &r.limits)] {
            for (name, q) in list.iter().flatten() {
                // The API server refuses a quantity that does not parse when it decodes the
                // object (`resource.ParseQuantity`), a negative one in validation
                // (`ValidateNonnegativeQuantity`).
                let detail = match crate::rules::quantity::Quantity::parse(&q.0) {
                    Err(e) => e.to_string(),
                    Ok(v) if v.is_negative() => "must be greater than or equal to 0".into(),
                    Ok(_) => continue,
                };
                c.push(
                    &with(
                        base,
                        &[Seg::Key("resources"), Seg::Key(which), Seg::Key(name)],
                    ),
                    FieldErrorKind::Invalid {
                        value: quote(&q.0),
                        detail,
                    },
                );
            }
        }
    }
    if let Some(policy) = ctr.restart_policy.as_deref() {
        if role == Role::Main {
            c.push(
                &with(base, &[Seg::Key("restartPolicy")]),
                FieldErrorKind::Forbidden {
                    detail: "may not be set for non-init containers".into(),
                },
            );
        } else if policy != "Always" {
            c.push(
                &with(base, &[Seg::Key("restartPolicy")]),
                FieldErrorKind::NotSupported {
                    value: quote(policy),
                    supported: vec!["Always".into()],
                },
            );
        }
    }
    if role == Role::Init {
        let detail = "may not be set for init containers without restartPolicy=Always";
        for (set, key) in [
            (ctr.lifecycle.is_some(), "lifecycle"),
            (ctr.liveness_probe.is_some(), "livenessProbe"),
            (ctr.readiness_probe.is_some(), "readinessProbe"),
            (ctr.startup_probe.is_some(), "startupProbe"),
        ] {
            if set {
                c.push(
                    &with(base, &[Seg::Key(key)]),
                    FieldErrorKind::Forbidden {
                        detail: detail.into(),
                    },
                );
            }
        }
        return;
    }
    if let Some(lc) = &ctr.lifecycle {
        if let Some(h) = &lc.post_start {
            lifecycle_handler(
                c,
                h,
                &with(base, &[Seg::Key("lifecycle"), Seg::Key("postStart")]),
                grace,
            );
        }
        if let Some(h) = &lc.pre_stop {
            lifecycle_handler(
                c,
                h,
                &with(base, &[Seg::Key("lifecycle"), Seg::Key("preStop")]),
                grace,
            );
        }
        if let (Some(_), false) = (&lc.stop_signal, c.version.container_stop_signals()) {
            let v = c.version;
            c.push(
                &with(base, &[Seg::Key("lifecycle"), Seg::Key("stopSignal")]),
                FieldErrorKind::Forbidden {
                    detail: format!("lifecycle.stopSignal needs Kubernetes 1.33 or newer (ContainerStopSignals, KEP-4960); Kubernetes {v} does not have the field"),
                },
            );
        } else if let Some(sig) = &lc.stop_signal {
            stop_signal(
                c,
                sig,
                spec,
                &with(base, &[Seg::Key("lifecycle"), Seg::Key("stopSignal")]),
            );
        }
    }
    for (probe, key) in [
        (&ctr.liveness_probe, "livenessProbe"),
        (&ctr.readiness_probe, "readinessProbe"),
        (&ctr.startup_probe, "startupProbe"),
    ] {
        if let Some(p) = probe {
            self::probe(c, p, &with(base, &[Seg::Key(key)]), key);
        }
    }
}

/// `validateHandler` over a lifecycle handler: exactly one of exec, httpGet, tcpSocket, sleep
/// (`Required value: must specify a handler type`; a second one is `Forbidden: may not specify
/// more than 1 handler type`), then each action's own rules.
fn lifecycle_handler(
    c: &mut Checker<'_, '_, '_>,
    h: &LifecycleHandler,
    base: &[Seg<'_>],
    grace: i64,
) {
    let set = [
        ("exec", h.exec.is_some()),
        ("httpGet", h.http_get.is_some()),
        ("tcpSocket", h.tcp_socket.is_some()),
        ("sleep", h.sleep.is_some()),
    ];
    if !handler_count(c, &set, base) {
        return;
    }
    if let Some(e) = &h.exec {
        if e.command.as_deref().unwrap_or_default().is_empty() {
            c.push(
                &with(base, &[Seg::Key("exec"), Seg::Key("command")]),
                FieldErrorKind::Required {
                    detail: String::new(),
                },
            );
        }
    } else if let Some(g) = &h.http_get {
        http_get(
            c,
            g.scheme.as_deref(),
            &g.port,
            &with(base, &[Seg::Key("httpGet")]),
        );
    } else if let Some(t) = &h.tcp_socket {
        port_num_or_name(
            c,
            &t.port,
            &with(base, &[Seg::Key("tcpSocket"), Seg::Key("port")]),
        );
    } else if let Some(s) = &h.sleep {
        if c.version.pod_lifecycle_sleep_action() {
            sleep_action(c, s.seconds, grace, &with(base, &[Seg::Key("sleep")]));
        } else {
            let v = c.version;
            c.push(
                &with(base, &[Seg::Key("sleep")]),
                FieldErrorKind::Forbidden {
                    detail: format!("the sleep action needs Kubernetes 1.30 or newer (PodLifecycleSleepAction: alpha in 1.29, beta and on by default in 1.30); the API server of Kubernetes {v} drops it and the handler is left empty"),
                },
            );
        }
    }
}

/// Counts handlers; reports none or more than one. `true` if exactly one is set.
fn handler_count(c: &mut Checker<'_, '_, '_>, set: &[(&str, bool)], base: &[Seg<'_>]) -> bool {
    let mut n = 0;
    for (name, on) in set {
        if *on {
            if n > 0 {
                c.push(
                    &with(base, &[Seg::Key(name)]),
                    FieldErrorKind::Forbidden {
                        detail: "may not specify more than 1 handler type".into(),
                    },
                );
            }
            n += 1;
        }
    }
    if n == 0 {
        c.push(
            base,
            FieldErrorKind::Required {
                detail: "must specify a handler type".into(),
            },
        );
    }
    n == 1
}

/// `validateSleepAction`: `0 < seconds <= TGPS` (the message says "less than", the code accepts
/// equality); from 1.33 (`PodLifecycleSleepActionAllowZero`, beta and on by default; GA 1.34)
/// `0 <= seconds <= TGPS` with the message "must be non-negative and less than ...". The path is
/// the `sleep` field, as upstream reports it.
fn sleep_action(c: &mut Checker<'_, '_, '_>, seconds: i64, grace: i64, base: &[Seg<'_>]) {
    let allow_zero = c.version.pod_lifecycle_sleep_action_allow_zero();
    let (bad, words) = if allow_zero {
        (!(0..=grace).contains(&seconds), "must be non-negative")
    } else {
        (seconds <= 0 || seconds > grace, "must be greater than 0")
    };
    if bad {
        c.push(
            base,
            FieldErrorKind::Invalid {
                value: seconds.to_string(),
                detail: format!("{words} and less than terminationGracePeriodSeconds ({grace})"),
            },
        );
    }
}

/// `validateHTTPGetAction` (scheme `HTTP` or `HTTPS` after defaulting) and `ValidatePortNumOrName`.
fn http_get(
    c: &mut Checker<'_, '_, '_>,
    scheme: Option<&str>,
    port: &IntOrString,
    base: &[Seg<'_>],
) {
    port_num_or_name(c, port, &with(base, &[Seg::Key("port")]));
    let scheme = scheme.unwrap_or("HTTP");
    if scheme != "HTTP" && scheme != "HTTPS" {
        c.push(
            &with(base, &[Seg::Key("scheme")]),
            FieldErrorKind::NotSupported {
                value: quote(scheme),
                supported: vec!["HTTP".into(), "HTTPS".into()],
            },
        );
    }
}

/// `ValidatePortNumOrName`: a number in 1..=65535, or an IANA service name (1-15 lowercase
/// alphanumerics or '-', at least one letter, no leading, trailing or double '-').
fn port_num_or_name(c: &mut Checker<'_, '_, '_>, port: &IntOrString, segs: &[Seg<'_>]) {
    match port {
        IntOrString::Int(n) => {
            if !(1..=65535).contains(n) {
                c.push(
                    segs,
                    FieldErrorKind::Invalid {
                        value: n.to_string(),
                        detail: "must be between 1 and 65535, inclusive".into(),
                    },
                );
            }
        }
        IntOrString::String(s) => {
            let ok = !s.is_empty()
                && s.len() <= 15
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && s.bytes().any(|b| b.is_ascii_lowercase())
                && !s.starts_with('-')
                && !s.ends_with('-')
                && !s.contains("--");
            if !ok {
                c.push(
                    segs,
                    FieldErrorKind::Invalid {
                        value: quote(s),
                        detail:
                            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
                                .into(),
                    },
                );
            }
        }
    }
}

/// `validateProbe`: one handler (exec, httpGet, tcpSocket, grpc), non-negative numbers
/// (`must be greater than or equal to 0`), probe-level `terminationGracePeriodSeconds > 0`
/// (`must be greater than 0`); from `validateContainers`: readiness probes may not set it
/// (`must not be set for readinessProbes`), liveness and startup need `successThreshold` 1.
fn probe(c: &mut Checker<'_, '_, '_>, p: &Probe, base: &[Seg<'_>], which: &str) {
    let set = [
        ("exec", p.exec.is_some()),
        ("httpGet", p.http_get.is_some()),
        ("tcpSocket", p.tcp_socket.is_some()),
        ("grpc", p.grpc.is_some()),
    ];
    if handler_count(c, &set, base) {
        if let Some(e) = &p.exec {
            if e.command.as_deref().unwrap_or_default().is_empty() {
                c.push(
                    &with(base, &[Seg::Key("exec"), Seg::Key("command")]),
                    FieldErrorKind::Required {
                        detail: String::new(),
                    },
                );
            }
        } else if let Some(g) = &p.http_get {
            http_get(
                c,
                g.scheme.as_deref(),
                &g.port,
                &with(base, &[Seg::Key("httpGet")]),
            );
        } else if let Some(t) = &p.tcp_socket {
            port_num_or_name(
                c,
                &t.port,
                &with(base, &[Seg::Key("tcpSocket"), Seg::Key("port")]),
            );
        }
    }
    for (v, key) in [
        (p.initial_delay_seconds, "initialDelaySeconds"),
        (p.timeout_seconds, "timeoutSeconds"),
        (p.period_seconds, "periodSeconds"),
        (p.success_threshold, "successThreshold"),
        (p.failure_threshold, "failureThreshold"),
    ] {
        if let Some(v) = v.filter(|v| *v < 0) {
            c.push(
                &with(base, &[Seg::Key(key)]),
                FieldErrorKind::Invalid {
                    value: v.to_string(),
                    detail: "must be greater than or equal to 0".into(),
                },
            );
        }
    }
    if let Some(t) = p.termination_grace_period_seconds {
        let segs = with(base, &[Seg::Key("terminationGracePeriodSeconds")]);
        if which == "readinessProbe" {
            c.push(
                &segs,
                FieldErrorKind::Invalid {
                    value: t.to_string(),
                    detail: "must not be set for readinessProbes".into(),
                },
            );
        } else if t <= 0 {
            c.push(
                &segs,
                FieldErrorKind::Invalid {
                    value: t.to_string(),
                    detail: "must be greater than 0".into(),
                },
            );
        }
    }
    if which != "readinessProbe" {
        let st = p.success_threshold.filter(|v| *v != 0).unwrap_or(1);
        if st != 1 {
            c.push(
                &with(base, &[Seg::Key("successThreshold")]),
                FieldErrorKind::Invalid {
                    value: st.to_string(),
                    detail: "must be 1".into(),
                },
            );
        }
    }
}

/// `validateContainerStopSignal` (KEP-4960): needs `spec.os.name`; on Windows only SIGKILL and
/// SIGTERM; on Linux a known signal name.
fn stop_signal(c: &mut Checker<'_, '_, '_>, sig: &str, spec: &PodSpec, segs: &[Seg<'_>]) {
    let Some(os) = spec.os.as_ref().map(|o| o.name.as_str()) else {
        c.push(
            segs,
            FieldErrorKind::Forbidden {
                detail: "may not be set for containers with empty `spec.os.name`".into(),
            },
        );
        return;
    };
    let supported: &[&str] = if os == "windows" {
        &["SIGKILL", "SIGTERM"]
    } else {
        LINUX_STOP_SIGNALS
    };
    if !supported.contains(&sig) {
        c.push(
            segs,
            FieldErrorKind::NotSupported {
                value: quote(sig),
                supported: supported.iter().map(|s| s.to_string()).collect(),
            },
        );
    }
}

/// Signal names accepted for Linux pods (`supportedStopSignalsLinux`).
const LINUX_STOP_SIGNALS: &[&str] = &[
    "SIGABRT",
    "SIGALRM",
    "SIGBUS",
    "SIGCHLD",
    "SIGCLD",
    "SIGCONT",
    "SIGFPE",
    "SIGHUP",
    "SIGILL",
    "SIGINT",
    "SIGIO",
    "SIGIOT",
    "SIGKILL",
    "SIGPIPE",
    "SIGPOLL",
    "SIGPROF",
    "SIGPWR",
    "SIGQUIT",
    "SIGSEGV",
    "SIGSTKFLT",
    "SIGSTOP",
    "SIGSYS",
    "SIGTERM",
    "SIGTRAP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGUSR1",
    "SIGUSR2",
    "SIGVTALRM",
    "SIGWINCH",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGRTMIN",
    "SIGRTMIN+1",
    "SIGRTMIN+2",
    "SIGRTMIN+3",
    "SIGRTMIN+4",
    "SIGRTMIN+5",
    "SIGRTMIN+6",
    "SIGRTMIN+7",
    "SIGRTMIN+8",
    "SIGRTMIN+9",
    "SIGRTMIN+10",
    "SIGRTMIN+11",
    "SIGRTMIN+12",
    "SIGRTMIN+13",
    "SIGRTMIN+14",
    "SIGRTMIN+15",
    "SIGRTMAX-14",
    "SIGRTMAX-13",
    "SIGRTMAX-12",
    "SIGRTMAX-11",
    "SIGRTMAX-10",
    "SIGRTMAX-9",
    "SIGRTMAX-8",
    "SIGRTMAX-7",
    "SIGRTMAX-6",
    "SIGRTMAX-5",
    "SIGRTMAX-4",
    "SIGRTMAX-3",
    "SIGRTMAX-2",
    "SIGRTMAX-1",
    "SIGRTMAX",
];
