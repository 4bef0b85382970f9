//! Lifecycle handlers, probes and the stop signal, as `validateLifecycle`, `validateHandler`,
//! `validateSleepAction`, `validateHTTPGetAction`, `ValidatePortNumOrName`, `validateProbe`
//! and `validateContainerStopSignal` check them (`pkg/apis/core/validation/validation.go`).

use k8s_openapi::api::core::v1::{LifecycleHandler, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{with, Checker, FieldErrorKind, Seg};
use crate::manifest::excerpt::quote;
use crate::rules::validation::format;

/// `validateHandler` over a lifecycle handler: exactly one of exec, httpGet, tcpSocket, sleep
/// (`Required value: must specify a handler type`; a second one is `Forbidden: may not specify
/// more than 1 handler type`), then each action's own rules.
pub(super) fn lifecycle_handler(
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

/// `ValidatePortNumOrName`: a number in 1..=65535 (`IsValidPortNum`), or an IANA service
/// name (`IsValidPortName`), each broken rule its own error.
pub(super) fn port_num_or_name(c: &mut Checker<'_, '_, '_>, port: &IntOrString, segs: &[Seg<'_>]) {
    match port {
        IntOrString::Int(n) => {
            for m in format::is_valid_port_num(i64::from(*n)) {
                c.invalid(segs, n.to_string(), m);
            }
        }
        IntOrString::String(s) => c.invalid_each(segs, s, format::is_valid_port_name(s)),
    }
}

/// `validateProbe`: one handler (exec, httpGet, tcpSocket, grpc), non-negative numbers
/// (`must be greater than or equal to 0`), probe-level `terminationGracePeriodSeconds > 0`
/// (`must be greater than 0`); from `validateContainers`: readiness probes may not set it
/// (`must not be set for readinessProbes`), liveness and startup need `successThreshold` 1.
pub(super) fn probe(c: &mut Checker<'_, '_, '_>, p: &Probe, base: &[Seg<'_>], which: &str) {
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
pub(super) fn stop_signal(
    c: &mut Checker<'_, '_, '_>,
    sig: &str,
    spec: &PodSpec,
    segs: &[Seg<'_>],
) {
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
