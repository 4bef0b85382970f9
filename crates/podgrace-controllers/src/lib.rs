//! The controllers of `podgrace serve`, each a client of the API as kube-controller-manager's
//! are: informers (kube-runtime's watcher and reflector caches) over the objects they follow,
//! a sync of every object they own when any of them changes (or when a timer they asked for
//! fires), writes through the API (optimistic concurrency: a conflict is retried at the next
//! sync), and Events with the controllers' wording and sources.
//!
//! Beside kube-controller-manager's controllers, the node lifecycle controller's NoSchedule
//! tainting ([`nodelifecycle`]) and kube-scheduler for the pods the API could not bind at
//! create ([`scheduler`]).
//!
//! The decisions are podgrace-core's pure rules (`rules::replicaset`, `rules::deployment`,
//! `rules::disruption`, `rules::garbagecollector`, `rules::endpointslice`); this crate is the
//! I/O around them.
//!
//! Upstream: `cmd/kube-controller-manager` and `pkg/controller/{replicaset,deployment,
//! garbagecollector,endpointslice,disruption}`.

#![forbid(unsafe_code)]

pub mod deployment;
pub mod disruption;
pub mod endpointslice;
pub mod events;
pub mod garbagecollector;
pub mod informer;
pub mod nodelifecycle;
pub mod replicaset;
pub mod scheduler;

use std::time::Duration;

use podgrace_core::KubeVersion;
use tokio::task::JoinSet;

/// What the controllers need to know of the cluster they run in.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The release whose behaviour (feature gates) the controllers follow.
    pub kube_version: KubeVersion,
}

/// Starts every controller on `client`; they run until the returned set is dropped or
/// aborted.
pub fn spawn(client: kube::Client, cfg: Config) -> JoinSet<()> {
    let mut set = JoinSet::new();
    set.spawn(replicaset::run(client.clone(), cfg));
    set.spawn(deployment::run(client.clone(), cfg));
    set.spawn(garbagecollector::run(client.clone()));
    set.spawn(disruption::run(client.clone()));
    set.spawn(endpointslice::run(client.clone()));
    set.spawn(nodelifecycle::run(client.clone()));
    set.spawn(scheduler::run(client));
    set
}

/// The clock's milliseconds since the epoch (the controllers' only clock read).
pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Waits until `wake` fires, or for the delay the last sync asked for (at most a minute: a
/// periodic resync, as informers' resync periods give).
pub(crate) async fn wait(wake: &tokio::sync::Notify, next: Option<Duration>) {
    let next = next
        .unwrap_or(Duration::from_secs(60))
        .min(Duration::from_secs(60));
    tokio::select! {
        _ = wake.notified() => {}
        _ = tokio::time::sleep(next) => {}
    }
}

/// The earlier of two optional delays.
pub(crate) fn earlier(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// A kube error as the controllers log it.
pub(crate) fn is_conflict_or_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 || s.code == 404)
}
