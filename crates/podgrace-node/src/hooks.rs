//! Lifecycle handlers (postStart, preStop), run the way the kubelet's handler runner runs them.
//!
//! Mirrors `pkg/kubelet/lifecycle/handlers.go` `handlerRunner.Run` (Kubernetes 1.30 to 1.37):
//! * **exec**: CRI `ExecSync(id, command, timeout = 0)`, so no exec timeout, bounded only by the
//!   caller's context. A non-zero exit, or an exec that cannot start (missing binary, container
//!   not running), is an error worded like the kubelet's: `Exec lifecycle hook ([cmd]) for
//!   Container "c" in Pod "p" failed - error: command 'cmd' exited with 3: ..., message: "..."`.
//! * **httpGet**: to `httpGet.host`, else the pod IP (never 127.0.0.1 unless `host` says so; a
//!   server bound to loopback inside the pod is unreachable, case R15); port by number or by
//!   the name of a declared containerPort; scheme, path and headers as given; User-Agent
//!   `kube-lifecycle/<major.minor>`; HTTPS without certificate verification; same-host
//!   redirects followed. **Any HTTP status counts as success**: only transport errors fail a
//!   hook (`runHTTPHandler` never looks at the status; kubernetes/kubernetes#56963). At most
//!   10 KiB of the body is drained. If an HTTPS request reaches a plain HTTP server ("server
//!   gave HTTP response to HTTPS client") it is retried over HTTP without `Authorization`, and
//!   if that succeeds a `LifecycleHTTPFallback` Warning is recorded and the hook succeeds.
//! * **sleep**: waits `seconds`; if the context ends first, the error is "container terminated
//!   before sleep hook finished" (`runSleepHandler`).
//! * **tcpSocket**: accepted by the API but never run: `Run` falls to its default case and
//!   fails with "invalid handler" (so a preStop of this kind is a `FailedPreStopHook`).
//!
//! # Budget and cancellation
//! [`run_handler`] applies no grace arithmetic: the pod worker bounds it with the preStop budget
//! from `podgrace_core::rules::kuberuntime::KillContainer`. It ends early when `ctx` ends, and
//! dropping its future cancels it: an exec process is SIGKILLed (see
//! [`crate::runtime::ProcessRuntime`]'s `exec_sync`), an HTTP connection is closed, a sleep
//! stops. Nothing is left behind.
//!
//! The kubelet itself does **not** cancel a preStop when the budget runs out
//! (`kuberuntime_container.go` `executePreStopHook` stops *waiting*; the hook goroutine keeps
//! running, e.g. an exec keeps running inside the container until it exits or the container
//! dies). To get that behaviour, spawn the future with a context that does not end at the
//! budget and stop waiting for it instead of dropping it:
//!
//! ```ignore
//! let hook = tokio::spawn(async move { run_handler(&*rt, &ctx, &target, &handler).await });
//! let _ = tokio::time::timeout(budget, &mut hook).await; // the hook goes on if it is cut
//! ```
//!
//! Upstream's HTTP request is not bound to the context at all (it is built without one); here
//! it is, which only matters for a caller that cancels the context.

use std::net::IpAddr;
use std::time::Duration;

use podgrace_core::plan::{ContainerPort, Handler, HttpGet};
use podgrace_core::KubeVersion;

use crate::events::{message, reason, EventRecorder};
use crate::httpget::{self, HttpGetError, Purpose};
use crate::runtime::{CallContext, RuntimeError, RuntimeService};

/// Errors of the hooks module, one per handler kind. `Display` is the kubelet's message for
/// the failure (the `msg` of `handlerRunner.Run`), which podgrace shows in logs; the
/// `FailedPreStopHook` / `FailedPostStartHook` events themselves carry no output, as upstream
/// (so that secrets do not leak into events). [`HookError::why`] says why in a few words, for
/// podgrace's own summaries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The exec did not start, or exited non-zero. `command` is Go's `%v` of the argv
    /// (`[sh -c exit 3]`); `output` is stdout followed by stderr, Go-quoted.
    #[error("Exec lifecycle hook ({command}) for Container {container} in Pod {pod} failed - error: {error}, message: {output}")]
    Exec {
        /// The argv as Go's `%v` prints it (`[sh -c exit 3]`).
        command: String,
        /// The container's name.
        container: String,
        /// The pod as the kubelet names it in messages.
        pod: String,
        /// The exec's error (`command '...' exited with 3: `).
        error: String,
        /// Stdout then stderr, Go-quoted.
        output: String,
        /// Why, in a few words: `exited with 3`, `/bin/drain is not in the container`.
        why: String,
    },
    /// The GET failed at the transport level (or could not be built, or the context ended).
    #[error("HTTP lifecycle hook ({path}) for Container {container} in Pod {pod} failed - error: {error}")]
    HttpGet {
        /// `httpGet.path`.
        path: String,
        /// The container's name.
        container: String,
        /// The pod as the kubelet names it in messages.
        pod: String,
        /// The HTTP client's error, in Go's wording.
        error: String,
    },
    /// The context ended before the sleep did.
    #[error("Sleep lifecycle hook ({seconds}) for Container {container} in Pod {pod} failed - error: container terminated before sleep hook finished")]
    Sleep {
        /// `sleep.seconds`, in seconds.
        seconds: i64,
        /// The container's name.
        container: String,
        /// The pod as the kubelet names it in messages.
        pod: String,
    },
    /// A handler kind the kubelet does not run (`tcpSocket`).
    #[error("Cannot run handler: invalid handler: {action}")]
    InvalidHandler {
        /// The handler's kind.
        action: &'static str,
    },
}

impl HookError {
    /// Why the hook failed, in a few words: `exited with 3`, `/bin/drain is not in the
    /// container`, the HTTP transport error (`connection refused`), `the container stopped
    /// before the sleep ended`, `the kubelet does not run tcpSocket handlers`.
    pub fn why(&self) -> String {
        match self {
            HookError::Exec { why, .. } => why.clone(),
            HookError::HttpGet { error, .. } => error.clone(),
            HookError::Sleep { .. } => "the container stopped before the sleep ended".into(),
            HookError::InvalidHandler { action } => {
                format!("the kubelet does not run {action} handlers")
            }
        }
    }
}

/// What a handler that succeeded reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookDone {
    /// The HTTP status of an httpGet handler (any status is success for the kubelet).
    pub http_status: Option<u16>,
}

/// The container a handler runs for.
#[derive(Debug, Clone, Copy)]
pub struct HookTarget<'a> {
    /// The pod as the kubelet names it in messages, see [`format_pod`].
    pub pod: &'a str,
    /// Container name.
    pub container: &'a str,
    /// Runtime container id (for exec).
    pub container_id: &'a str,
    /// The pod's IP (`status.podIPs[0]`), the host of an httpGet without `host`. `None` makes
    /// such a hook fail ("failed to find networking container"), as upstream. For
    /// `hostNetwork` pods pass the node's address.
    pub pod_ip: Option<IpAddr>,
    /// Declared containerPorts, for ports given by name.
    pub ports: &'a [ContainerPort],
    /// Where a `LifecycleHTTPFallback` event goes (`None`: not recorded).
    pub events: Option<&'a EventRecorder>,
}

/// `format.Pod`: `name_namespace(uid)`, how the kubelet names a pod in messages.
pub fn format_pod(name: &str, namespace: &str, uid: &str) -> String {
    format!("{name}_{namespace}({uid})")
}

/// The Kubernetes version in the `kube-lifecycle/<major.minor>` User-Agent.
pub const USER_AGENT_VERSION: KubeVersion = KubeVersion::LATEST;

/// Runs `handler` for `target` (see the module docs for each kind). Returns when the handler
/// finished (with what it reported, see [`HookDone`]), failed, or `ctx` ended. Errors: one
/// [`HookError`] variant per handler kind.
pub async fn run_handler(
    runtime: &impl RuntimeService,
    ctx: &CallContext,
    target: &HookTarget<'_>,
    handler: &Handler,
) -> Result<HookDone, HookError> {
    match handler {
        Handler::Exec { command } => run_exec(runtime, ctx, target, command).await,
        Handler::HttpGet(get) => run_http(ctx, target, get).await,
        Handler::Sleep { seconds } => run_sleep(ctx, target, *seconds)
            .await
            .map(|()| HookDone::default()),
        Handler::TcpSocket { .. } => Err(HookError::InvalidHandler {
            action: handler.action(),
        }),
    }
}

async fn run_exec(
    runtime: &impl RuntimeService,
    ctx: &CallContext,
    target: &HookTarget<'_>,
    command: &[String],
) -> Result<HookDone, HookError> {
    let fail = |error: String, output: &[u8], why: String| HookError::Exec {
        command: format!("[{}]", command.join(" ")),
        container: go_quote(target.container),
        pod: go_quote(target.pod),
        error,
        output: go_quote(&String::from_utf8_lossy(output)),
        why,
    };
    match runtime
        .exec_sync(ctx, target.container_id, command.to_vec(), 0)
        .await
    {
        Ok(resp) if resp.exit_code == 0 => Ok(HookDone::default()),
        Ok(resp) => {
            // cri-client ExecSync: CodeExitError "command '%s' exited with %d: %s" (stderr);
            // kuberuntime RunInContainer returns stdout followed by stderr as the output.
            let error = format!(
                "command '{}' exited with {}: {}",
                command.join(" "),
                resp.exit_code,
                String::from_utf8_lossy(&resp.stderr)
            );
            let why = format!("exited with {}", resp.exit_code);
            let mut output = resp.stdout;
            output.extend_from_slice(&resp.stderr);
            Err(fail(error, &output, why))
        }
        Err(e) => {
            let why = exec_why(&e, command);
            Err(fail(runtime_reason(&e), &[], why))
        }
    }
}

/// Why an exec did not run, in a few words: a missing binary, one that cannot be executed, a
/// container that is not running, or the runtime's own error.
fn exec_why(e: &RuntimeError, command: &[String]) -> String {
    let program = command.first().map(String::as_str).unwrap_or_default();
    match e {
        RuntimeError::ExecSync {
            source: crate::process::ProcessError::Spawn { source, .. },
            ..
        } => match source.kind() {
            std::io::ErrorKind::NotFound => format!("{program} is not in the container"),
            std::io::ErrorKind::PermissionDenied => {
                format!("{program} cannot be executed (permission denied)")
            }
            _ => format!("{program} did not start: {source}"),
        },
        RuntimeError::ExecSyncNotRunning { .. } => "the container is not running".into(),
        other => other.to_string(),
    }
}

fn runtime_reason(e: &RuntimeError) -> String {
    e.to_string()
}

async fn run_http(
    ctx: &CallContext,
    target: &HookTarget<'_>,
    get: &HttpGet,
) -> Result<HookDone, HookError> {
    let fail = |error: String| HookError::HttpGet {
        path: get.path.clone(),
        container: go_quote(target.container),
        pod: go_quote(target.pod),
        error,
    };
    let request = httpget::Request::new(
        get,
        target.ports,
        target.pod_ip,
        Purpose::Lifecycle,
        USER_AGENT_VERSION,
    )
    .map_err(|e| fail(e.to_string()))?;
    let done = |status: u16| HookDone {
        http_status: Some(status),
    };
    let work = async {
        match httpget::get(&request, None, false).await {
            Ok(resp) => Ok(done(resp.status)),
            Err(first @ HttpGetError::HttpResponseToHttpsClient { .. }) => {
                let fallback = request.http_fallback();
                match httpget::get(&fallback, None, false).await {
                    Ok(resp) => {
                        if let Some(events) = target.events {
                            events.warning(
                                reason::LIFECYCLE_HTTP_FALLBACK,
                                Some(target.container),
                                message::lifecycle_http_fallback(&fallback.host_port()),
                            );
                        }
                        Ok(done(resp.status))
                    }
                    // The fallback's own error is dropped; the HTTPS error is reported.
                    Err(_) => Err(first),
                }
            }
            Err(e) => Err(e),
        }
    };
    tokio::select! {
        r = work => r.map_err(|e| fail(e.to_string())),
        _ = ctx.done() => Err(fail(format!("Get {:?}: context canceled", request.url()))),
    }
}

async fn run_sleep(
    ctx: &CallContext,
    target: &HookTarget<'_>,
    seconds: i64,
) -> Result<(), HookError> {
    let d = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    // Ends at its instant, not at tokio's next millisecond tick: the stop signal follows it.
    let end = tokio::time::Instant::now().into_std().checked_add(d);
    tokio::select! {
        _ = sleep_for(end, d) => Ok(()),
        _ = ctx.done() => Err(HookError::Sleep {
            seconds,
            container: go_quote(target.container),
            pod: go_quote(target.pod),
        }),
    }
}

/// Sleeps until `end` on the deadline thread, or for `d` on tokio's clock when `end` is beyond
/// what an `Instant` holds.
async fn sleep_for(end: Option<std::time::Instant>, d: Duration) {
    match end {
        Some(at) => crate::deadlines::sleep_until(at).await,
        None => tokio::time::sleep(d).await,
    }
}

/// Go's `%q` of a string: double quotes, `\"`, `\\`, `\n`, `\r`, `\t`, and `\xNN`/`\u`
/// escapes for other control characters; printable Unicode is kept.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hook target without a container, pod IP or ports.
    fn bare_target() -> HookTarget<'static> {
        HookTarget {
            pod: "p",
            container: "c",
            container_id: "none",
            pod_ip: None,
            ports: &[],
            events: None,
        }
    }

    #[test]
    fn go_quoting() {
        assert_eq!(
            go_quote("a\"b\\c\n\t\u{1b}é"),
            "\"a\\\"b\\\\c\\n\\t\\x1bé\""
        );
        assert_eq!(go_quote(""), "\"\"");
    }

    #[test]
    fn messages_read_like_the_kubelet() {
        let e = HookError::Exec {
            command: "[sh -c exit 3]".into(),
            container: go_quote("app"),
            pod: go_quote(&format_pod("web", "default", "u1")),
            error: "command 'sh -c exit 3' exited with 3: oops\n".into(),
            output: go_quote("oops\n"),
            why: "exited with 3".into(),
        };
        assert_eq!(
            e.to_string(),
            "Exec lifecycle hook ([sh -c exit 3]) for Container \"app\" in Pod \"web_default(u1)\" failed - error: command 'sh -c exit 3' exited with 3: oops\n, message: \"oops\\n\""
        );
        let s = HookError::Sleep {
            seconds: 5,
            container: go_quote("app"),
            pod: go_quote("p"),
        };
        assert!(s
            .to_string()
            .ends_with("failed - error: container terminated before sleep hook finished"));
        assert_eq!(
            HookError::InvalidHandler {
                action: "tcpSocket"
            }
            .to_string(),
            "Cannot run handler: invalid handler: tcpSocket"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_hook_waits_its_seconds() {
        let (rt, _out) =
            crate::runtime::ProcessRuntime::new(crate::sandbox::NetworkConfig::default());
        let target = bare_target();
        let start = tokio::time::Instant::now();
        run_handler(
            &rt,
            &CallContext::background(),
            &target,
            &Handler::Sleep { seconds: 7 },
        )
        .await
        .expect("sleep completes");
        assert_eq!(start.elapsed(), Duration::from_secs(7));
    }

    #[tokio::test]
    async fn tcp_socket_handlers_are_not_run() {
        let (rt, _out) =
            crate::runtime::ProcessRuntime::new(crate::sandbox::NetworkConfig::default());
        let target = bare_target();
        let h = Handler::TcpSocket {
            port: podgrace_core::plan::PortRef::Number(80),
        };
        assert_eq!(
            run_handler(&rt, &CallContext::background(), &target, &h).await,
            Err(HookError::InvalidHandler {
                action: "tcpSocket"
            })
        );
    }
}
