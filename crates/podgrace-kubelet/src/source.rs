//! The pod source: a watch of the pods bound to this node, as the kubelet's API server source
//! watches `pods` with `fieldSelector=spec.nodeName=NODE` (a list, then a watch from its
//! resourceVersion, relisted after a `410 Gone`). Each pod seen for the first time gets a
//! [`worker`](crate::worker); later versions of it and its removal go to that worker. After a
//! relist, a pod that is no longer listed is removed (the watch missed its `DELETED`).
//!
//! Upstream: `pkg/kubelet/config/apiserver.go` (`NewSourceApiserver`), `pkg/kubelet/config/
//! config.go` (`podStorage.merge`: ADD, UPDATE, DELETE/REMOVE), kube-rs's `watcher`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::runtimes::RuntimeSource;
use crate::worker::{self, Update};
use crate::{Clock, KubeletConfig};

/// The running kubelet.
pub struct KubeletHandle {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl KubeletHandle {
    /// Stops watching and waits for the kubelet to end. Pods still running are deleted as a
    /// force delete would (each is killed with the pod worker's minimum grace); their workers
    /// are awaited.
    pub async fn shutdown(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = self.task.await;
    }
}

/// Starts the local kubelet on the current tokio runtime: it watches the pods bound to
/// `config.node_name` through `client` and runs each on the runtime `runtimes` gives it.
pub fn start<S: RuntimeSource>(
    client: kube::Client,
    runtimes: S,
    config: KubeletConfig,
) -> KubeletHandle {
    let (stop_tx, stop_rx) = oneshot::channel();
    let task = tokio::spawn(run(client, runtimes, config, stop_rx));
    KubeletHandle {
        stop: Some(stop_tx),
        task,
    }
}

struct Known {
    updates: mpsc::UnboundedSender<Update>,
}

async fn run<S: RuntimeSource>(
    client: kube::Client,
    runtimes: S,
    config: KubeletConfig,
    mut stop: oneshot::Receiver<()>,
) {
    let shared = Arc::new(worker::Shared {
        client: client.clone(),
        runtimes,
        config: config.clone(),
        clock: Clock::now(),
    });
    let node = tokio::spawn(crate::node::keep_node(
        client.clone(),
        config.clone(),
        shared.clock,
    ));
    let pods: kube::Api<Pod> = kube::Api::all(client);
    let wc = watcher::Config::default().fields(&format!("spec.nodeName={}", config.node_name));
    let mut stream = watcher::watcher(pods, wc).default_backoff().boxed();
    let mut known: HashMap<String, Known> = HashMap::new();
    // Pods whose worker has ended (terminated and finally deleted): a late MODIFIED of theirs
    // does not start them again. Forgotten at their DELETED.
    let mut finished: HashSet<String> = HashSet::new();
    let mut relisted: Option<HashSet<String>> = None;
    let mut workers: JoinSet<String> = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(done) = workers.join_next(), if !workers.is_empty() => {
                if let Ok(uid) = done {
                    known.remove(&uid);
                    finished.insert(uid);
                }
            }
            ev = stream.next() => {
                let Some(ev) = ev else { break };
                match ev {
                    Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => {
                        let Some(uid) = p.metadata.uid.clone() else { continue };
                        if let Some(set) = relisted.as_mut() {
                            set.insert(uid.clone());
                        }
                        if finished.contains(&uid) {
                            continue;
                        }
                        match known.get(&uid) {
                            Some(k) => {
                                let _ = k.updates.send(Update::Changed(Box::new(p)));
                            }
                            None => {
                                let (tx, rx) = mpsc::unbounded_channel();
                                known.insert(uid.clone(), Known { updates: tx });
                                let shared = shared.clone();
                                workers.spawn(async move {
                                    worker::sync_pod(shared, p, rx).await;
                                    uid
                                });
                            }
                        }
                    }
                    Ok(Event::Delete(p)) => {
                        let Some(uid) = p.metadata.uid.clone() else { continue };
                        finished.remove(&uid);
                        if let Some(k) = known.get(&uid) {
                            let _ = k.updates.send(Update::Removed);
                        }
                    }
                    Ok(Event::Init) => relisted = Some(HashSet::new()),
                    Ok(Event::InitDone) => {
                        if let Some(set) = relisted.take() {
                            for (uid, k) in &known {
                                if !set.contains(uid) {
                                    let _ = k.updates.send(Update::Removed);
                                }
                            }
                            finished.retain(|uid| set.contains(uid));
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "pod watch"),
                }
            }
        }
    }
    // Shutting down: every pod still running is killed as after a force delete.
    for k in known.values() {
        let _ = k.updates.send(Update::Removed);
    }
    while workers.join_next().await.is_some() {}
    node.abort();
}
