//! podgrace node layer: the local kubelet and container runtime.
//!
//! * [`process`]: spawning container processes (PID 1 of their own PID namespace when
//!   permitted), the one reaper, signalling through pidfds, whole-container kill, exec inside.
//! * [`runtime`]: a CRI-RuntimeService-shaped trait and [`runtime::ProcessRuntime`], which
//!   implements it with containerd's StopContainer semantics.
//! * [`sandbox`]: a pod's network namespace and address.
//! * [`deadlines`]: the one deadline structure: SIGKILLs due at grace deadlines and precise
//!   wake-ups, fired in batches by one thread.
//! * [`events`]: kubelet-style events (reasons and wordings of upstream) with monotonic
//!   timestamps, stored and streamed to subscribers.
//! * [`hooks`]: lifecycle handlers (exec, httpGet, sleep) run as the kubelet's handler runner.
//! * [`probes`]: startup, liveness and readiness probes (exec, httpGet, tcpSocket, grpc): one
//!   attempt, and the periodic worker.
//! * [`httpget`]: the kubelet's HTTP GET client shared by hooks and probes.
//! * [`init`]: `podgrace init`, a PID 1 for containers (signal forwarding, reaping).
//! * [`pages`]: unmapping the executable's start-up pages for the verbs that stay resident in
//!   users' containers (init, prestop-wait).
//! * [`kubelet`]: the pod task that starts, supervises and terminates a pod with the rules of
//!   `podgrace-core`, calling the runtime only through the CRI-shaped trait.
//!
//! # System requirements
//! Linux ≥ 5.4 (pidfd_open, waitid(P_PIDFD)). Namespaced mode and pod networks need root (or
//! `CAP_SYS_ADMIN` + `CAP_NET_ADMIN`); without them podgrace falls back to host processes and
//! the host network, saying so once. Pod networks are made through rtnetlink (no `ip` process);
//! the tests look at them with iproute2's `ip`, and run `sh`, `sleep` and `tr` (dash/coreutils)
//! inside containers.

pub mod deadlines;
pub mod events;
pub mod eviction;
pub mod hooks;
pub mod httpget;
#[allow(unsafe_code)] // signal masks and kill(2) as PID 1
pub mod init;
pub mod kubelet;
pub mod nodeshutdown;
#[allow(unsafe_code)] // madvise(2) of the executable's start-up pages
pub mod pages;
pub mod probes;
#[allow(unsafe_code)] // fork/exec of containers (spawner)
pub mod process;
pub mod runtime;
pub mod sandbox;
