//! The controllers of `podgrace serve`, each a client of the API as kube-controller-manager's
//! are: shared informers ([`informer`]: one watch and cache per resource for all of them),
//! event handlers that map each change to the keys of the objects it concerns, a work queue
//! per controller ([`queue`]) whose workers sync one key at a time (a change, or a timer the
//! sync asked for, brings a key back; nothing polls), writes through the API (optimistic
//! concurrency: a conflict is retried after the key's back-off), and Events with the
//! controllers' wording and sources.
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
pub mod queue;
pub mod replicaset;
pub mod scheduler;

use podgrace_core::KubeVersion;
use tokio::task::JoinSet;

/// What the controllers need to know of the cluster they run in.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The release whose behaviour (feature gates) the controllers follow.
    pub kube_version: KubeVersion,
}

/// Starts every controller on `client`, on one set of shared informers; they run until the
/// returned set is dropped or aborted.
pub fn spawn(client: kube::Client, cfg: Config) -> JoinSet<()> {
    let informers = informer::Informers::new(client);
    let mut set = JoinSet::new();
    let i = informers.clone();
    set.spawn(workers(replicaset::run(i, cfg)));
    let i = informers.clone();
    set.spawn(workers(deployment::run(i, cfg)));
    let i = informers.clone();
    set.spawn(workers(garbagecollector::run(i)));
    let i = informers.clone();
    set.spawn(workers(disruption::run(i)));
    let i = informers.clone();
    set.spawn(workers(endpointslice::run(i)));
    let i = informers.clone();
    set.spawn(workers(nodelifecycle::run(i)));
    set.spawn(workers(scheduler::run(informers)));
    set
}

/// Runs a controller's workers once its caches are synced, as long as this task lives.
async fn workers(start: impl std::future::Future<Output = JoinSet<()>>) {
    let mut w = start.await;
    while w.join_next().await.is_some() {}
}

/// The clock's milliseconds since the epoch (the controllers' only clock read).
pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// A kube error as the controllers log it.
pub(crate) fn is_conflict_or_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 || s.code == 404)
}
