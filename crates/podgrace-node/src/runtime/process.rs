//! The built-in runtime: containers are local processes ([`crate::process`]), pods get a
//! network namespace ([`crate::sandbox`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use podgrace_core::rules::latency::{Range, RuntimeLatencies, Sampler};
use tokio::sync::mpsc;

use super::cgroup::OwnedCgroup;
use super::{
    CallContext, ContainerConfig, ContainerEvent, ContainerEventKind, ContainerState,
    ContainerStatus, ExecSyncResponse, PodSandboxConfig, PodSandboxStatus, RuntimeError,
    RuntimeService, StopEvent, StopEventKind,
};
use crate::process::{ContainerProcess, ContainerSpec, OutputLine};
use crate::sandbox::{NetworkConfig, Sandbox, SandboxError};
use podgrace_core::rules::runtime::containerd_exit_reason;

struct ContainerEntry {
    id: String,
    sandbox_id: String,
    config: ContainerConfig,
    process: Option<ContainerProcess>,
    /// containerd's `IsStopSignaledWithTimeout`.
    stop_signaled: Arc<AtomicBool>,
    events: Arc<Mutex<Vec<StopEvent>>>,
    /// The container's cgroup, beneath the pod's (removed once it exited).
    cgroup: Option<OwnedCgroup>,
    /// The kernel's OOM killer killed a process of the container's cgroup (read at its exit).
    oom_killed: Arc<AtomicBool>,
}

/// What a stop or exec needs of a container, taken out of the state lock.
struct Handles {
    process: Option<ContainerProcess>,
    stop_signal: i32,
    signaled: Arc<AtomicBool>,
    events: Arc<Mutex<Vec<StopEvent>>>,
}

struct SandboxEntry {
    sandbox: Option<Sandbox>,
    /// The pod's cgroup ([`super::cgroup::process_root`] + the kubelet's cgroup parent), with its limits.
    cgroup: Option<OwnedCgroup>,
    /// Lifecycle events of this sandbox's containers.
    events: tokio::sync::broadcast::Sender<ContainerEvent>,
}

#[derive(Default)]
struct State {
    sandboxes: HashMap<String, SandboxEntry>,
    containers: HashMap<String, ContainerEntry>,
    next: u64,
}

/// The built-in runtime: containers are local processes (see [`crate::process`]), pods get a
/// network namespace (see [`crate::sandbox`]). StopContainer mirrors containerd
/// (`internal/cri/server/container_stop.go` `stopContainer`):
/// * unknown id → Ok; container not running → Ok;
/// * `timeout > 0`: the stop signal is sent only on the first such call (an atomic flag), then
///   the call waits up to its own `timeout` seconds for the exit; on exit → Ok; if the
///   caller's context ends first → [`RuntimeError::StopContainerCancelled`], no SIGKILL;
/// * `timeout <= 0`, or the wait timed out: SIGKILL, then wait for the exit bounded only by the
///   caller's context.
///
/// So a second call with a smaller timeout sends no second signal but SIGKILLs at its own,
/// earlier deadline (as containerd does; CRI-O instead keeps the earliest deadline in one loop).
///
/// By default it adds no latency of its own. [`ProcessRuntime::with_latencies`] makes it add a
/// real runtime's measured ones (see [`podgrace_core::rules::latency`]): the stop signal (or an
/// immediate SIGKILL) goes out that long after the call, the SIGKILL that long after the
/// deadline, StopContainer returns that long after the death, and a container restarted in the
/// same sandbox starts no earlier than that long after the previous instance died.
pub struct ProcessRuntime {
    state: Mutex<State>,
    output: mpsc::UnboundedSender<OutputLine>,
    network: NetworkConfig,
    latency: Option<Latencies>,
}

/// The measured latencies the runtime adds, with the seeded sampler that draws them.
struct Latencies {
    of: RuntimeLatencies,
    sampler: Mutex<Sampler>,
}

impl Latencies {
    fn draw(&self, pick: impl Fn(&RuntimeLatencies) -> &Range) -> Duration {
        let ms = lock(&self.sampler).sample(pick(&self.of));
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn record(events: &Mutex<Vec<StopEvent>>, at: Instant, kind: StopEventKind) {
    lock(events).push(StopEvent { at, kind });
}

/// Records the deadline thread's SIGKILL, if it reached the process, at the instant it was sent.
fn record_kill(events: &Mutex<Vec<StopEvent>>, f: crate::deadlines::Fired) {
    if f.sent == Ok(true) {
        // In time order: the exit it caused may have been recorded first.
        let mut ev = lock(events);
        let at = ev.iter().position(|e| e.at > f.at).unwrap_or(ev.len());
        ev.insert(
            at,
            StopEvent {
                at: f.at,
                kind: StopEventKind::KillSent,
            },
        );
    }
}

impl ProcessRuntime {
    /// A runtime and the stream of all its containers' output lines.
    pub fn new(network: NetworkConfig) -> (Self, mpsc::UnboundedReceiver<OutputLine>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            ProcessRuntime {
                state: Mutex::new(State::default()),
                output: tx,
                network,
                latency: None,
            },
            rx,
        )
    }

    /// This runtime, adding the measured latencies `of` around every stop and restart, each
    /// drawn from its recorded range by a sampler seeded with `seed` (the same seed gives the
    /// same draws in the same order of calls).
    pub fn with_latencies(mut self, of: RuntimeLatencies, seed: u64) -> Self {
        self.latency = Some(Latencies {
            of,
            sampler: Mutex::new(Sampler::new(seed)),
        });
        self
    }

    /// The latencies this runtime adds, if any.
    pub fn latencies(&self) -> Option<&RuntimeLatencies> {
        self.latency.as_ref().map(|l| &l.of)
    }

    /// Sleeps for a drawn latency (none without latencies), or until `ctx` ends.
    async fn lag(&self, ctx: &CallContext, pick: impl Fn(&RuntimeLatencies) -> &Range) -> bool {
        let Some(l) = &self.latency else {
            return true;
        };
        let d = l.draw(pick);
        tokio::select! {
            () = tokio::time::sleep(d) => true,
            () = ctx.done() => false,
        }
    }

    /// The stop events of a container so far, in order (empty for an unknown id).
    pub fn stop_events(&self, id: &str) -> Vec<StopEvent> {
        let st = lock(&self.state);
        st.containers
            .get(id)
            .map(|c| lock(&c.events).clone())
            .unwrap_or_default()
    }

    /// The sandbox's pod IP, if it has its own network namespace.
    pub fn pod_ip(&self, sandbox_id: &str) -> Option<std::net::Ipv4Addr> {
        let st = lock(&self.state);
        st.sandboxes.get(sandbox_id)?.sandbox.as_ref()?.ip()
    }

    fn process_of(&self, id: &str) -> Result<Handles, RuntimeError> {
        let st = lock(&self.state);
        let c = st
            .containers
            .get(id)
            .ok_or_else(|| RuntimeError::ContainerNotFound { id: id.into() })?;
        Ok(Handles {
            process: c.process.clone(),
            stop_signal: c.config.stop_signal.unwrap_or(15),
            signaled: Arc::clone(&c.stop_signaled),
            events: Arc::clone(&c.events),
        })
    }

    /// StopContainer returning after the container died: at once, or after the measured
    /// latency (containerd 1.6 returned 38 ms to 2.9 s after the death).
    async fn returned(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        if self.lag(ctx, |r| &r.stop_returns_after_exit.range).await {
            Ok(())
        } else {
            Err(RuntimeError::StopContainerCancelled { id: id.into() })
        }
    }

    /// The rest of a StopContainer whose SIGKILL is armed on the deadline thread: the exit
    /// before the deadline (the SIGKILL is cancelled), or the SIGKILL (recorded when it was
    /// sent) and then the exit, or the caller's context ending first.
    async fn killed_at_deadline(
        &self,
        ctx: &CallContext,
        id: &str,
        process: &ContainerProcess,
        events: &Mutex<Vec<StopEvent>>,
        mut armed: crate::deadlines::Armed,
    ) -> Result<(), RuntimeError> {
        let fired = tokio::select! {
            _ = Self::wait_exit(process, events) => armed.cancel(),
            _ = ctx.done() => {
                if let Some(f) = armed.cancel() {
                    record_kill(events, f);
                }
                return Err(RuntimeError::StopContainerCancelled { id: id.into() });
            }
            f = armed.fired() => Some(f),
        };
        if let Some(f) = fired {
            record_kill(events, f);
            if let Err(e) = f.sent {
                return Err(RuntimeError::StopContainerSignal {
                    id: id.into(),
                    signal: 9,
                    source: crate::process::ProcessError::Signal {
                        pid: process.pid(),
                        signal: 9,
                        source: e.into(),
                    },
                });
            }
        }
        tokio::select! {
            _ = Self::wait_exit(process, events) => self.returned(ctx, id).await,
            _ = ctx.done() => Err(RuntimeError::StopContainerCancelled { id: id.into() }),
        }
    }

    async fn wait_exit(process: &ContainerProcess, events: &Mutex<Vec<StopEvent>>) {
        let exit = process.wait().await;
        let mut ev = lock(events);
        if !ev
            .iter()
            .any(|e| matches!(e.kind, StopEventKind::Exited { .. }))
        {
            ev.push(StopEvent {
                at: exit.at,
                kind: StopEventKind::Exited {
                    status: exit.status,
                },
            });
        }
    }
}

impl RuntimeService for ProcessRuntime {
    async fn run_pod_sandbox(
        &self,
        _ctx: &CallContext,
        config: PodSandboxConfig,
    ) -> Result<String, RuntimeError> {
        let network = self.network.clone();
        let name = config.name.clone();
        let host_network = config.host_network;
        let task_name = config.name.clone();
        // The pod cgroup (the kubelet's `EnsureExists`, before the sandbox), then the network:
        // both are blocking system calls that may wait for the kernel's locks (cgroup_mutex,
        // RTNL), so they run off the async workers: a pod waiting there holds up no other
        // pod's task.
        let (cgroup, sandbox) = tokio::task::spawn_blocking(move || {
            tracing::debug!(target: "podgrace::start", pod = %config.name, "pod cgroup begins");
            let cgroup = pod_cgroup(&config)?;
            tracing::debug!(target: "podgrace::start", pod = %config.name, "pod cgroup made");
            match Sandbox::create(&name, host_network, &network) {
                Ok(sb) => {
                    tracing::debug!(target: "podgrace::start", pod = %config.name, "sandbox network made");
                    Ok((cgroup, sb))
                }
                Err(source) => {
                    if let Some(cg) = cgroup {
                        cg.remove();
                    }
                    Err(RuntimeError::RunPodSandbox { name, source })
                }
            }
        })
        .await
        .map_err(|e| RuntimeError::RunPodSandbox {
            name: task_name,
            source: SandboxError::Task {
                reason: e.to_string(),
            },
        })??;
        let name = sandbox.name().to_string();
        let mut st = lock(&self.state);
        st.next += 1;
        let id = format!("sandbox-{}-{}", st.next, name);
        st.sandboxes.insert(
            id.clone(),
            SandboxEntry {
                sandbox: Some(sandbox),
                cgroup,
                events: tokio::sync::broadcast::channel(256).0,
            },
        );
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        let ids: Vec<String> = {
            let st = lock(&self.state);
            if !st.sandboxes.contains_key(id) {
                return Ok(());
            }
            st.containers
                .values()
                .filter(|c| c.sandbox_id == id)
                .map(|c| c.id.clone())
                .collect()
        };
        for cid in ids {
            self.stop_container(ctx, &cid, 0).await?;
        }
        let sandbox = lock(&self.state)
            .sandboxes
            .get_mut(id)
            .and_then(|s| s.sandbox.take());
        if let Some(mut sb) = sandbox {
            let _ = tokio::task::spawn_blocking(move || sb.teardown()).await;
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        self.stop_pod_sandbox(ctx, id).await?;
        let cgroups: Vec<OwnedCgroup> = {
            let mut st = lock(&self.state);
            let pod = st.sandboxes.remove(id).and_then(|s| s.cgroup);
            let mut v: Vec<OwnedCgroup> = st
                .containers
                .values()
                .filter(|c| c.sandbox_id == id)
                .filter_map(|c| c.cgroup.clone())
                .collect();
            st.containers.retain(|_, c| c.sandbox_id != id);
            v.extend(pod);
            v
        };
        // The kubelet removes the pod cgroup once the pod is gone (`cleanupOrphanedPodCgroups`).
        for cg in cgroups {
            remove_cgroup(cg).await;
        }
        Ok(())
    }

    async fn create_container(
        &self,
        ctx: &CallContext,
        pod_sandbox_id: &str,
        config: ContainerConfig,
    ) -> Result<String, RuntimeError> {
        if let Some(l) = &self.latency {
            // A restart: the previous instance of this container in this sandbox died at
            // `died`; a real runtime and kubelet start the new one that long after the death.
            let died = {
                let st = lock(&self.state);
                st.containers
                    .values()
                    .filter(|c| c.sandbox_id == pod_sandbox_id && c.config.name == config.name)
                    .filter_map(|c| c.process.as_ref()?.try_exit().map(|e| e.at))
                    .max()
            };
            if let Some(died) = died {
                let at = died + l.draw(|r| &r.restart_after_exit.range);
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = ctx.done() => {}
                }
            }
        }
        let mut st = lock(&self.state);
        if !st.sandboxes.contains_key(pod_sandbox_id) {
            return Err(RuntimeError::PodSandboxNotFound {
                id: pod_sandbox_id.into(),
            });
        }
        st.next += 1;
        let id = format!("ctr-{}-{}", st.next, config.name);
        st.containers.insert(
            id.clone(),
            ContainerEntry {
                id: id.clone(),
                sandbox_id: pod_sandbox_id.into(),
                config,
                process: None,
                stop_signaled: Arc::new(AtomicBool::new(false)),
                events: Arc::new(Mutex::new(Vec::new())),
                cgroup: None,
                oom_killed: Arc::new(AtomicBool::new(false)),
            },
        );
        Ok(id)
    }

    async fn start_container(&self, _ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        let spec = {
            let st = lock(&self.state);
            let c = st
                .containers
                .get(id)
                .ok_or_else(|| RuntimeError::ContainerNotFound { id: id.into() })?;
            if c.process.is_some() {
                return Err(RuntimeError::StartContainerState { id: id.into() });
            }
            let netns = st
                .sandboxes
                .get(&c.sandbox_id)
                .and_then(|s| s.sandbox.as_ref())
                .and_then(|s| s.netns_path().map(|p| p.to_path_buf()));
            let pod_cgroup = st
                .sandboxes
                .get(&c.sandbox_id)
                .and_then(|s| s.cgroup.clone());
            (
                ContainerSpec {
                    name: c.config.name.clone(),
                    argv: c.config.argv(),
                    env: c.config.env.clone(),
                    working_dir: c.config.working_dir.clone(),
                    netns,
                    force_host: c.config.force_host,
                    cgroup_procs: Vec::new(),
                    oom_score_adj: c
                        .config
                        .resources
                        .as_ref()
                        .map(|r| effective_oom_score_adj(r.oom_score_adj)),
                },
                pod_cgroup,
                c.config.resources.clone(),
            )
        };
        let (mut spec, pod_cgroup, resources) = spec;
        // runc's container cgroup: `<cgroup parent>/<container id>`, limits written before
        // the process joins it.
        let cgroup = match pod_cgroup {
            Some(pod) => {
                let path = format!("{}/{id}", pod.path());
                let made = tokio::task::spawn_blocking(move || {
                    OwnedCgroup::create(&path).and_then(|cg| match &resources {
                        Some(r) => cg.apply_container(r).map(|()| cg.clone()).inspect_err(|_| {
                            cg.remove();
                        }),
                        None => Ok(cg),
                    })
                })
                .await
                .unwrap_or_else(|e| Err((PathBuf::new(), std::io::Error::other(e.to_string()))));
                let cg = made.map_err(|(path, source)| RuntimeError::StartContainer {
                    id: id.into(),
                    source: crate::process::ProcessError::Spawn {
                        argv: spec.argv.clone(),
                        source: std::io::Error::new(
                            source.kind(),
                            format!("container cgroup {}: {source}", path.display()),
                        ),
                    },
                })?;
                spec.cgroup_procs = cg.procs_files();
                Some(cg)
            }
            None => None,
        };
        tracing::debug!(target: "podgrace::start", pod = %id, "container cgroup made");
        let process = match ContainerProcess::spawn(spec, Some(self.output.clone())).await {
            Ok(p) => p,
            Err(source) => {
                if let Some(cg) = cgroup {
                    remove_cgroup(cg).await;
                }
                return Err(RuntimeError::StartContainer {
                    id: id.into(),
                    source,
                });
            }
        };
        let mut st = lock(&self.state);
        let sandbox_events = st
            .containers
            .get(id)
            .and_then(|c| st.sandboxes.get(&c.sandbox_id))
            .map(|s| s.events.clone());
        match (st.containers.get_mut(id), sandbox_events) {
            (Some(c), Some(events)) => {
                let _ = events.send(ContainerEvent {
                    container_id: id.to_string(),
                    kind: ContainerEventKind::Started {
                        at: process.started_at(),
                    },
                });
                // The evented PLEG: one watcher per container reports its exit, with
                // containerd's OOM reason from the cgroup's OOM kill count; then runc's
                // delete removes the container's cgroup.
                let (watched, tx, cid) = (process.clone(), events, id.to_string());
                let (watched_cgroup, oom) = (cgroup.clone(), Arc::clone(&c.oom_killed));
                tokio::spawn(async move {
                    let exit = watched.wait().await;
                    let oom_killed = watched_cgroup.as_ref().is_some_and(|cg| cg.oom_kills() > 0);
                    oom.store(oom_killed, Ordering::SeqCst);
                    if let Some(cg) = watched_cgroup {
                        remove_cgroup(cg).await;
                    }
                    let _ = tx.send(ContainerEvent {
                        container_id: cid,
                        kind: ContainerEventKind::Stopped {
                            at: exit.at,
                            status: exit.status,
                            oom_killed,
                        },
                    });
                });
                c.process = Some(process);
                c.cgroup = cgroup;
                Ok(())
            }
            _ => {
                let _ = process.kill();
                if let Some(cg) = cgroup {
                    tokio::spawn(remove_cgroup(cg));
                }
                Err(RuntimeError::ContainerNotFound { id: id.into() })
            }
        }
    }

    async fn stop_container(
        &self,
        ctx: &CallContext,
        id: &str,
        timeout_seconds: i64,
    ) -> Result<(), RuntimeError> {
        let Handles {
            process,
            stop_signal,
            signaled,
            events,
        } = match self.process_of(id) {
            Ok(v) => v,
            // containerd: an unknown container is already stopped.
            Err(RuntimeError::ContainerNotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let Some(process) = process else {
            return Ok(());
        };
        if process.try_exit().is_some() {
            return Ok(());
        }
        let called = Instant::now();
        record(
            &events,
            called,
            StopEventKind::StopRequested { timeout_seconds },
        );
        let deadline = tokio::time::Instant::from(called) + super::timeout_after(timeout_seconds);
        if timeout_seconds > 0 {
            if signaled
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                if !self.lag(ctx, |r| &r.stop_signal_after_call.range).await {
                    return Err(RuntimeError::StopContainerCancelled { id: id.into() });
                }
                if process.try_exit().is_some() {
                    return self.returned(ctx, id).await;
                }
                let at = Instant::now();
                process.signal(stop_signal).map_err(|source| {
                    RuntimeError::StopContainerSignal {
                        id: id.into(),
                        signal: stop_signal,
                        source,
                    }
                })?;
                record(
                    &events,
                    at,
                    StopEventKind::StopSignalSent {
                        signal: stop_signal,
                    },
                );
            } else {
                record(
                    &events,
                    Instant::now(),
                    StopEventKind::StopSignalSkipped {
                        signal: stop_signal,
                    },
                );
            }
            if self.latency.is_none() {
                // The deadline thread sends the SIGKILL at the deadline, in one batch with every
                // other container due then.
                if let Some(armed) =
                    process
                        .signal_at(deadline.into_std(), 9)
                        .map_err(|source| RuntimeError::StopContainerSignal {
                            id: id.into(),
                            signal: 9,
                            source,
                        })?
                {
                    return self
                        .killed_at_deadline(ctx, id, &process, &events, armed)
                        .await;
                }
            }
            tokio::select! {
                _ = Self::wait_exit(&process, &events) => return self.returned(ctx, id).await,
                _ = ctx.done() => return Err(RuntimeError::StopContainerCancelled { id: id.into() }),
                _ = crate::deadlines::sleep_until(deadline.into_std()) => {}
            }
            // A real runtime's SIGKILL lands this long after the deadline.
            if self.latency.is_some() {
                tokio::select! {
                    _ = Self::wait_exit(&process, &events) => return self.returned(ctx, id).await,
                    ok = self.lag(ctx, |r| &r.kill_after_deadline.range) => if !ok {
                        return Err(RuntimeError::StopContainerCancelled { id: id.into() });
                    },
                }
            }
        } else if !self.lag(ctx, |r| &r.stop_signal_after_call.range).await {
            return Err(RuntimeError::StopContainerCancelled { id: id.into() });
        }
        let at = Instant::now();
        let sent = process
            .kill()
            .map_err(|source| RuntimeError::StopContainerSignal {
                id: id.into(),
                signal: 9,
                source,
            })?;
        if sent {
            record(&events, at, StopEventKind::KillSent);
        }
        tokio::select! {
            _ = Self::wait_exit(&process, &events) => self.returned(ctx, id).await,
            _ = ctx.done() => Err(RuntimeError::StopContainerCancelled { id: id.into() }),
        }
    }

    async fn exec_sync(
        &self,
        ctx: &CallContext,
        id: &str,
        cmd: Vec<String>,
        timeout_seconds: i64,
    ) -> Result<ExecSyncResponse, RuntimeError> {
        let Handles { process, .. } = self.process_of(id)?;
        let Some(process) = process.filter(|p| p.try_exit().is_none()) else {
            return Err(RuntimeError::ExecSyncNotRunning { id: id.into() });
        };
        let (env, dir) = {
            let st = lock(&self.state);
            st.containers
                .get(id)
                .map(|c| (c.config.env.clone(), c.config.working_dir.clone()))
                .unwrap_or_default()
        };
        let timeout = (timeout_seconds > 0).then(|| Duration::from_secs(timeout_seconds as u64));
        tokio::select! {
            r = process.exec(cmd, env, dir, timeout) => {
                let out = r.map_err(|source| RuntimeError::ExecSync { id: id.into(), source })?;
                Ok(ExecSyncResponse { stdout: out.stdout, stderr: out.stderr, exit_code: out.status.code() })
            }
            // Dropping the exec future SIGKILLs the exec process.
            _ = ctx.done() => Err(RuntimeError::ExecSyncCancelled { id: id.into() }),
        }
    }

    async fn pod_sandbox_status(
        &self,
        _ctx: &CallContext,
        id: &str,
    ) -> Result<PodSandboxStatus, RuntimeError> {
        let st = lock(&self.state);
        let sb = st
            .sandboxes
            .get(id)
            .ok_or_else(|| RuntimeError::PodSandboxNotFound { id: id.into() })?;
        Ok(PodSandboxStatus {
            id: id.to_string(),
            ip: sb
                .sandbox
                .as_ref()
                .and_then(|s| s.ip())
                .map(std::net::IpAddr::V4),
        })
    }

    async fn remove_container(&self, ctx: &CallContext, id: &str) -> Result<(), RuntimeError> {
        self.stop_container(ctx, id, 0).await?;
        lock(&self.state).containers.remove(id);
        Ok(())
    }

    fn cgroup_root(&self) -> String {
        super::cgroup::process_root()
    }

    fn container_events(
        &self,
        pod_sandbox_id: &str,
    ) -> Option<tokio::sync::broadcast::Receiver<ContainerEvent>> {
        lock(&self.state)
            .sandboxes
            .get(pod_sandbox_id)
            .map(|s| s.events.subscribe())
    }

    async fn container_status(
        &self,
        _ctx: &CallContext,
        id: &str,
    ) -> Result<ContainerStatus, RuntimeError> {
        let st = lock(&self.state);
        let c = st
            .containers
            .get(id)
            .ok_or_else(|| RuntimeError::ContainerNotFound { id: id.into() })?;
        let exit = c.process.as_ref().and_then(|p| p.try_exit());
        Ok(ContainerStatus {
            id: c.id.clone(),
            name: c.config.name.clone(),
            state: match (&c.process, exit) {
                (None, _) => ContainerState::Created,
                (Some(_), None) => ContainerState::Running,
                (Some(_), Some(_)) => ContainerState::Exited,
            },
            pid: c.process.as_ref().map(|p| p.pid()),
            isolation: c.process.as_ref().map(|p| p.isolation()),
            started_at: c.process.as_ref().map(|p| p.started_at()),
            finished_at: exit.map(|e| e.at),
            exit: exit.map(|e| e.status),
            stop_signal: Some(c.config.stop_signal.unwrap_or(15)),
            image: None,
            image_ref: None,
            // containerd's reason, backfilled for any exit (`toCRIContainerStatus`).
            reason: exit.map(|e| {
                containerd_exit_reason(e.status.code(), c.oom_killed.load(Ordering::SeqCst))
                    .to_string()
            }),
        })
    }
}

/// The pod's cgroup for a sandbox config with a cgroup parent: `/podgrace/<PID>` + the parent, made
/// with the pod's limits (the kubelet's `podContainerManagerImpl.EnsureExists`). `None` when the
/// machine gives podgrace no cgroups (not root, a read-only cgroup file system): the pod then
/// runs without limits, said once in the log.
///
/// # Errors
/// [`RuntimeError::Host`] when the cgroup cannot be made for another reason, or its limits
/// cannot be written.
fn pod_cgroup(config: &PodSandboxConfig) -> Result<Option<OwnedCgroup>, RuntimeError> {
    let Some(parent) = &config.cgroup_parent else {
        return Ok(None);
    };
    let path = format!("{}{parent}", super::cgroup::process_root());
    static STALE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    STALE.get_or_init(|| {
        for cg in super::stale_cgroups::cleanup() {
            tracing::info!(cgroup = %cg, "removed the pod cgroup of a podgrace that no longer runs");
        }
    });
    let cg = match OwnedCgroup::create(&path) {
        Ok(cg) => {
            super::stale_cgroups::record(&path);
            cg
        }
        Err((dir, source)) if !no_cgroups(&source) => {
            return Err(RuntimeError::Host {
                what: format!("create the pod cgroup {}", dir.display()),
                source,
            });
        }
        Err((dir, e)) => {
            static ONCE: std::sync::Once = std::sync::Once::new();
            // Without the permission for namespaces either (not root), the verb has warned the
            // user once in its own words, cgroups included: a detail here. With it (root, a
            // read-only cgroup tree), this is the only word of it.
            ONCE.call_once(|| {
                if crate::process::namespaces_permitted() {
                    tracing::warn!(
                        dir = %dir.display(),
                        error = %e,
                        "process runtime: cannot create cgroups; pods run without resource limits"
                    );
                } else {
                    tracing::info!(
                        dir = %dir.display(),
                        error = %e,
                        "process runtime: cannot create cgroups; pods run without resource limits"
                    );
                }
            });
            return Ok(None);
        }
    };
    if let Some(limits) = &config.pod_cgroup {
        if let Err((file, source)) = cg.apply_pod(limits) {
            cg.remove();
            return Err(RuntimeError::Host {
                what: format!("set the pod cgroup's limits in {}", file.display()),
                source,
            });
        }
    }
    Ok(Some(cg))
}

/// The machine gives podgrace no cgroups: not root, or a read-only cgroup file system.
fn no_cgroups(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    )
}

/// Removes a cgroup whose last processes may still be exiting (host mode's group kill, an
/// exec being reaped): a few tries over about a second.
async fn remove_cgroup(cg: OwnedCgroup) {
    for _ in 0..50 {
        // rmdir in cgroupfs waits for the kernel's cgroup lock: off the async workers.
        let attempt = cg.clone();
        if tokio::task::spawn_blocking(move || attempt.remove())
            .await
            .unwrap_or(false)
        {
            super::stale_cgroups::forget(cg.path());
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::warn!(
        cgroup = cg.path(),
        "process runtime: cgroup still busy, left in place"
    );
}

/// The `oom_score_adj` a container's PID 1 gets for the kubelet's `requested` one. Without
/// `CAP_SYS_RESOURCE` a process cannot lower its score below its parent's, so it is raised to
/// podgrace's own, as containerd's `restrict_oom_score_adj = true` does
/// (`internal/cri/server/container_create_linux.go`); with the capability, as requested.
pub fn effective_oom_score_adj(requested: i64) -> i64 {
    static OWN: std::sync::OnceLock<(bool, i64)> = std::sync::OnceLock::new();
    let (capable, own) = *OWN.get_or_init(|| {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let cap_eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
            .unwrap_or(0);
        // CAP_SYS_RESOURCE is capability 24.
        let capable = cap_eff & (1 << 24) != 0;
        let own = std::fs::read_to_string("/proc/self/oom_score_adj")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        (capable, own)
    });
    let r = requested.clamp(-1000, 1000);
    if capable {
        r
    } else {
        r.max(own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_ids() {
        let (rt, _out) = ProcessRuntime::new(NetworkConfig::default());
        let ctx = CallContext::background();
        assert!(rt.stop_container(&ctx, "nope", 30).await.is_ok());
        assert!(rt.stop_pod_sandbox(&ctx, "nope").await.is_ok());
        assert!(rt.remove_pod_sandbox(&ctx, "nope").await.is_ok());
        assert!(matches!(
            rt.container_status(&ctx, "nope").await,
            Err(RuntimeError::ContainerNotFound { .. })
        ));
        assert!(matches!(
            rt.create_container(&ctx, "nope", ContainerConfig::default())
                .await,
            Err(RuntimeError::PodSandboxNotFound { .. })
        ));
        assert!(matches!(
            rt.exec_sync(&ctx, "nope", vec!["true".into()], 1).await,
            Err(RuntimeError::ContainerNotFound { .. })
        ));
    }
}
