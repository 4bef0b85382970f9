//! Informers: a kube-runtime reflector cache of one resource, kept by a watcher (list, then
//! watch from the list's resourceVersion, relist after a 410), and a wake-up of the
//! controller on every change, as client-go's shared informers and event handlers are.

use std::fmt::Debug;
use std::sync::Arc;

use futures_util::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

/// Starts an informer of every `K` the client sees (all namespaces) and returns its cache.
/// Each change (and each relist) calls `wake.notify_one()`. The cache is ready once the first
/// list has been read ([`Store::wait_until_ready`]).
pub fn start<K>(client: &kube::Client, wake: Arc<Notify>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let api: kube::Api<K> = kube::Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => wake.notify_one(),
                Err(e) => tracing::debug!("informer: {e}"),
            }
        }
    });
    reader
}

/// The objects of `store` in namespace `ns`.
pub fn in_namespace<K>(store: &Store<K>, ns: &str) -> Vec<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.state_filter(|o| o.meta().namespace.as_deref() == Some(ns))
}
