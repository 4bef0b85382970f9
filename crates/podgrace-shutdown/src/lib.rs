//! podgrace-shutdown: shut a Rust service down the way Kubernetes terminates its pod, without
//! losing requests.
//!
//! When a pod is deleted, the kubelet sends the stop signal (SIGTERM) while kube-proxy, ingresses
//! and cloud load balancers are still removing the pod's endpoint: for their **endpoint lag**
//! (about 1 s in-cluster, up to minutes behind a cloud load balancer) new connections keep
//! arriving. SIGKILL follows `terminationGracePeriodSeconds` later. A service that stops
//! accepting at SIGTERM refuses those connections; one that never stops is SIGKILLed with
//! requests in flight. On the first SIGTERM or SIGINT a [`Shutdown`] goes through:
//!
//! 1. [`Phase::Quiescing`]: readiness fails at once ([`Shutdown::is_ready`]), but the service
//!    keeps accepting and serving until no new connection has arrived for a quiet window
//!    (read from the network namespace's own counters, as `podgrace prestop-wait` does; see
//!    [`quiesce`] and [`connections`]), or for a fixed delay ([`Quiesce::Delay`]);
//! 2. [`Phase::Draining`]: the listener closes, requests in flight finish, keep-alive
//!    connections are closed properly (HTTP/1.1 `Connection: close`, HTTP/2 GOAWAY);
//! 3. [`Phase::Cut`]: at the drain deadline, derived from the grace period (`grace − 1 s`;
//!    [`grace::GRACE_ENV`] or [`Builder::grace_period`]), or at once on a second signal,
//!    whatever is left is cut and the servers return, so the process exits before SIGKILL.
//!
//! Integrations: [`hyper::serve`] (feature `hyper`) and [`axum::serve`] with
//! [`axum::readiness`] (feature `axum`). Other servers use [`Shutdown::reached`] with the
//! phases. Numbered runnable examples are in `examples/` (`cargo run -p podgrace-shutdown
//! --example 01_axum`).
//!
//! Without the `runtime` feature only the pure parts and the blocking wait remain
//! ([`quiesce`], [`connections`], [`grace`], [`wait`]), which `podgrace prestop-wait` uses.
//! The `endpoints` feature adds [`endpoints`]: whether the pod's EndpointSlice entries are
//! still ready, through the Kubernetes API.
#![forbid(unsafe_code)]

pub mod connections;
pub mod grace;
pub mod quiesce;
pub mod wait;

#[cfg(feature = "runtime")]
mod shutdown;
#[cfg(feature = "runtime")]
pub use shutdown::{Builder, Phase, Quiesce, Shutdown, ShutdownError};

#[cfg(feature = "hyper")]
pub mod hyper;

#[cfg(feature = "axum")]
pub mod axum;

#[cfg(feature = "endpoints")]
pub mod endpoints;
