//! One attempt of a probe action (`prober.go` `*ProberAction.Run`, `pkg/probe/{exec,http,tcp,grpc}`)
//! and the [`Prober`] a worker calls, with the real one on the container runtime
//! ([`RuntimeProber`]).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use podgrace_core::plan::{ContainerPort, Probe, ProbeAction};
use podgrace_core::KubeVersion;

use super::grpc;
use crate::httpget::{self, Purpose};
use crate::process::ProcessError;
use crate::runtime::{CallContext, RuntimeError, RuntimeService};

/// At most this much exec output is kept (`pkg/probe/exec` `maxReadLength`, 10 KiB).
pub(super) const MAX_EXEC_OUTPUT: usize = 10 * 1024;

/// The Kubernetes version in the `kube-probe/<major.minor>` User-Agent.
pub const USER_AGENT_VERSION: KubeVersion = KubeVersion::LATEST;

/// The outcome of one attempt (`probe.Result` plus its output or error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    /// The check passed (`probe.Success`).
    Success,
    /// Success with a warning (`probe.Warning`), e.g. `Probe terminated redirects, Response
    /// body: ...` for a redirect to another host. Counts as success.
    Warning(String),
    /// The check failed; the text is the kubelet's output (`HTTP probe failed with statuscode:
    /// 503`, the exec's output, `dial tcp ...: connect: connection refused`).
    Failure(String),
    /// The prober itself errored (could not build the request, exec could not start, no pod
    /// IP); the text is the error.
    Unknown(String),
}

/// What one probe attempt runs against.
#[derive(Debug, Clone, Copy)]
pub struct ProbeTarget<'a> {
    /// Runtime container id (exec probes).
    pub container_id: &'a str,
    /// The pod IP: the host of httpGet/tcpSocket probes without `host`, and of grpc probes.
    pub pod_ip: Option<IpAddr>,
    /// Declared containerPorts, for ports given by name.
    pub ports: &'a [ContainerPort],
    /// The container's env (values from references are `None`), for `$(VAR)` in exec commands.
    pub env: &'a [(String, Option<String>)],
}

/// One attempt of `probe`'s action against `target`, bounded by `timeoutSeconds` and by `ctx`:
/// * exec: CRI `ExecSync(cmd, timeoutSeconds)` with `$(VAR)` expanded from the static env;
///   exit 0 success, other exits `Failure(output)` (stdout then stderr, at most 10 KiB), a
///   timeout `Failure("command \"...\" timed out")`, an exec that cannot run `Unknown`;
/// * httpGet: 200..=399 success (3xx = a redirect to another host, not followed: `Warning`),
///   else `Failure("HTTP probe failed with statuscode: N")`, transport errors `Failure`;
/// * tcpSocket: a connection within the timeout is success;
/// * grpc: `grpc.health.v1.Health/Check`, `SERVING` is success.
pub async fn probe_once(
    runtime: &impl RuntimeService,
    ctx: &CallContext,
    target: &ProbeTarget<'_>,
    probe: &Probe,
) -> ProbeResult {
    let timeout = Duration::from_secs(u64::try_from(probe.timeout_seconds).unwrap_or(0).max(1));
    let user_agent = format!("kube-probe/{USER_AGENT_VERSION}");
    let network = async {
        match &probe.action {
            // Handled below, through the runtime.
            ProbeAction::Exec { .. } => {
                ProbeResult::Unknown("exec probes run in the runtime".into())
            }
            ProbeAction::HttpGet(get) => {
                let req = match httpget::Request::new(
                    get,
                    target.ports,
                    target.pod_ip,
                    Purpose::Probe,
                    USER_AGENT_VERSION,
                ) {
                    Ok(r) => r,
                    Err(e) => return ProbeResult::Unknown(e.to_string()),
                };
                match httpget::get(&req, Some(timeout), true).await {
                    Ok(resp) if (200..400).contains(&resp.status) => {
                        if resp.status >= 300 {
                            ProbeResult::Warning(format!(
                                "Probe terminated redirects, Response body: {}",
                                String::from_utf8_lossy(&resp.body)
                            ))
                        } else {
                            ProbeResult::Success
                        }
                    }
                    Ok(resp) => ProbeResult::Failure(format!(
                        "HTTP probe failed with statuscode: {}",
                        resp.status
                    )),
                    Err(e) => ProbeResult::Failure(e.to_string()),
                }
            }
            ProbeAction::TcpSocket { host, port } => {
                let port = match httpget::resolve_container_port(port, target.ports) {
                    Ok(p) => p,
                    Err(e) => return ProbeResult::Unknown(e.to_string()),
                };
                let host = match (host.as_deref().filter(|h| !h.is_empty()), target.pod_ip) {
                    (Some(h), _) => h.to_string(),
                    (None, Some(ip)) => ip.to_string(),
                    (None, None) => return ProbeResult::Unknown("the pod has no IP".into()),
                };
                match tokio::time::timeout(timeout, httpget::dial(&host, port)).await {
                    Ok(Ok(_stream)) => ProbeResult::Success,
                    Ok(Err(e)) => ProbeResult::Failure(e),
                    Err(_) => ProbeResult::Failure(format!(
                        "dial tcp {}: i/o timeout",
                        httpget::join_host_port(&host, port)
                    )),
                }
            }
            ProbeAction::Grpc { port, service } => {
                let Some(ip) = target.pod_ip else {
                    return ProbeResult::Unknown("the pod has no IP".into());
                };
                let Ok(port) = u16::try_from(*port) else {
                    return ProbeResult::Unknown(format!("invalid port number: {port}"));
                };
                grpc::check(
                    &ip.to_string(),
                    port,
                    service.as_deref().unwrap_or(""),
                    timeout,
                    &user_agent,
                )
                .await
            }
        }
    };
    if let ProbeAction::Exec { command } = &probe.action {
        return probe_exec(runtime, ctx, target, command, probe.timeout_seconds).await;
    }
    tokio::select! {
        r = network => r,
        _ = ctx.done() => ProbeResult::Unknown("context canceled".into()),
    }
}

pub(super) async fn probe_exec(
    runtime: &impl RuntimeService,
    ctx: &CallContext,
    target: &ProbeTarget<'_>,
    command: &[String],
    timeout_seconds: i64,
) -> ProbeResult {
    let env: HashMap<&str, &str> = target
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_deref().unwrap_or("")))
        .collect();
    let cmd: Vec<String> = command.iter().map(|c| expand(c, &env)).collect();
    match runtime
        .exec_sync(
            ctx,
            target.container_id,
            cmd.clone(),
            timeout_seconds.max(1),
        )
        .await
    {
        Ok(resp) => {
            let mut out = resp.stdout;
            out.extend_from_slice(&resp.stderr);
            out.truncate(MAX_EXEC_OUTPUT);
            let out = String::from_utf8_lossy(&out).into_owned();
            if resp.exit_code == 0 {
                ProbeResult::Success
            } else {
                ProbeResult::Failure(out)
            }
        }
        Err(RuntimeError::ExecSync {
            source: ProcessError::ExecTimeout { .. },
            ..
        }) => ProbeResult::Failure(format!("command {:?} timed out", cmd.join(" "))),
        Err(e) => ProbeResult::Unknown(e.to_string()),
    }
}

/// `expansion.Expand` with the static env (`ExpandContainerCommandOnlyStatic`): `$(VAR)` is
/// replaced when `VAR` is defined (values from references expand to ""), kept otherwise;
/// `$$` is a literal `$`.
pub(super) fn expand(input: &str, env: &HashMap<&str, &str>) -> String {
    let b = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            out.push_str(&input[copied..i]);
            match b[i + 1] {
                b'$' => {
                    out.push('$');
                    i += 2;
                }
                b'(' => match input[i + 2..].find(')') {
                    Some(j) => {
                        let name = &input[i + 2..i + 2 + j];
                        match env.get(name) {
                            Some(v) => out.push_str(v),
                            None => {
                                out.push_str("$(");
                                out.push_str(name);
                                out.push(')');
                            }
                        }
                        i += 3 + j;
                    }
                    None => {
                        out.push_str("$(");
                        i += 2;
                    }
                },
                _ => {
                    out.push('$');
                    i += 1;
                }
            }
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&input[copied..]);
    out
}

/// One probe attempt for the worker, given the current container id. [`RuntimeProber`] is the
/// real one; tests use fakes.
pub trait Prober: Send + Sync + 'static {
    /// Runs one attempt against container `container_id`.
    fn probe(&self, container_id: &str) -> impl Future<Output = ProbeResult> + Send;
}

/// [`probe_once`] through a runtime, for a worker.
pub struct RuntimeProber<R> {
    /// The runtime exec probes run through (`ExecSync`).
    pub runtime: Arc<R>,
    /// The probe as planned: its handler and `timeoutSeconds`.
    pub probe: Probe,
    /// The pod's IP, the host of an httpGet, tcpSocket or grpc probe without `host`.
    pub pod_ip: Option<IpAddr>,
    /// The container's declared ports, for ports given by name.
    pub ports: Vec<ContainerPort>,
    /// The container's env (values from references are `None`), for `$(VAR)` in exec commands.
    pub env: Vec<(String, Option<String>)>,
}

impl<R: RuntimeService + 'static> Prober for RuntimeProber<R> {
    async fn probe(&self, container_id: &str) -> ProbeResult {
        let target = ProbeTarget {
            container_id,
            pod_ip: self.pod_ip,
            ports: &self.ports,
            env: &self.env,
        };
        probe_once(
            &*self.runtime,
            &CallContext::background(),
            &target,
            &self.probe,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_like_upstream() {
        let env: HashMap<&str, &str> = [("A", "1"), ("SECRET", "")].into_iter().collect();
        assert_eq!(
            expand("$(A)-$(B)-$$(A)-$A-$(SECRET)", &env),
            "1-$(B)-$(A)-$A-"
        );
        assert_eq!(expand("x$(A", &env), "x$(A");
        assert_eq!(expand("end$", &env), "end$");
        assert_eq!(expand("é$(A)é", &env), "é1é");
    }
}
