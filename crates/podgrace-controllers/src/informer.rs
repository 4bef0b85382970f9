//! Shared informers: one watch per resource for every controller of the process, a
//! kube-runtime reflector cache of it, and event handlers called with each change (the old
//! and the new object), as client-go's `SharedInformerFactory` gives kube-controller-manager's
//! controllers. A handler only maps the change to the keys of the objects to sync and adds them
//! to its controller's [`crate::queue::Queue`]; it must not block.
//!
//! The watch lists, then watches from the list's resourceVersion, and relists after a `410
//! Gone` (kube-runtime's `watcher`). A relist is delivered as client-go's `Replace` is: an
//! update for every object listed, an add for every new one, a delete for every one that is no
//! longer listed. A handler added after the first list is called with an add for every object
//! already in the cache (client-go's `AddEventHandler`).
//!
//! Upstream: `staging/src/k8s.io/client-go/tools/cache/shared_informer.go`
//! (`sharedIndexInformer.HandleDeltas`, `AddEventHandler`), `informers/factory.go`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Resource;
use serde::de::DeserializeOwned;

/// One change of an object in an informer's cache.
#[derive(Debug)]
pub enum Change<'a, K> {
    /// The object appeared (created, or first listed).
    Added(&'a K),
    /// The object changed (or was listed again by a relist).
    Updated {
        /// The object as the cache had it.
        old: &'a K,
        /// The object as it is now.
        new: &'a K,
    },
    /// The object is gone (deleted, or missing from a relist).
    Deleted(&'a K),
}

impl<K> Change<'_, K> {
    /// The object as it is now (as it last was, for a deletion).
    pub fn object(&self) -> &K {
        match self {
            Change::Added(o) | Change::Deleted(o) => o,
            Change::Updated { new, .. } => new,
        }
    }

    /// The object as the cache had it before the change (`None` for an addition).
    pub fn old(&self) -> Option<&K> {
        match self {
            Change::Added(_) => None,
            Change::Updated { old, .. } => Some(old),
            Change::Deleted(o) => Some(o),
        }
    }
}

/// An event handler: called on the informer's task with every change, in order.
pub type Handler<K> = Box<dyn Fn(&Change<'_, K>) + Send + Sync>;

/// The cache of one resource (every namespace) and the handlers of its changes.
pub struct Informer<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store: Store<K>,
    handlers: Arc<Mutex<Vec<Handler<K>>>>,
    /// True once the first list is in the cache. (Not the store's `wait_until_ready`: its
    /// `DelayedInit` keeps the waker of one waiter only, and several controllers wait.)
    ready: tokio::sync::watch::Sender<bool>,
}

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    /// Starts the watch of every `K` the client sees, on the current tokio runtime; it runs
    /// until the runtime ends.
    fn start(client: &kube::Client) -> Self {
        let api: kube::Api<K> = kube::Api::all(client.clone());
        let mut writer = reflector::store::Writer::<K>::default();
        let store = writer.as_reader();
        let handlers: Arc<Mutex<Vec<Handler<K>>>> = Arc::default();
        let ready = tokio::sync::watch::Sender::new(false);
        let (reader, hs, tx) = (store.clone(), handlers.clone(), ready.clone());
        let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(ev) => {
                        tracing::trace!(kind = %K::kind(&Default::default()), "informer event");
                        // The cache and the handlers change under one lock, so that a handler
                        // added meanwhile sees either the old cache and this change, or the new
                        // cache.
                        let hs = hs.lock().unwrap_or_else(|p| p.into_inner());
                        apply(&mut writer, &reader, &ev, &hs);
                        if matches!(ev, Event::InitDone) {
                            tx.send_replace(true);
                        }
                    }
                    Err(e) => tracing::debug!("informer: {e}"),
                }
            }
        });
        Informer {
            store,
            handlers,
            ready,
        }
    }

    /// The cache.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Adds a handler; it is called at once with an add for every object in the cache.
    pub fn add_handler(&self, h: impl Fn(&Change<'_, K>) + Send + Sync + 'static) {
        let mut hs = self.handlers.lock().unwrap_or_else(|p| p.into_inner());
        for o in self.store.state() {
            h(&Change::Added(&o));
        }
        hs.push(Box::new(h));
    }

    /// Waits until the first list is in the cache.
    pub async fn synced(&self) {
        let mut rx = self.ready.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }

    /// The object `namespace/name` from the cache (`namespace` empty for a cluster-scoped one).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let r = ObjectRef::<K>::new(name);
        let r = if namespace.is_empty() {
            r
        } else {
            r.within(namespace)
        };
        self.store.get(&r)
    }

    /// The objects of the cache in namespace `ns`.
    pub fn in_namespace(&self, ns: &str) -> Vec<Arc<K>> {
        in_namespace(&self.store, ns)
    }
}

/// Applies one watch event to the cache and calls the handlers with the changes it made.
fn apply<K>(
    writer: &mut reflector::store::Writer<K>,
    reader: &Store<K>,
    ev: &Event<K>,
    handlers: &[Handler<K>],
) where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let call = |c: Change<'_, K>| {
        for h in handlers {
            h(&c);
        }
    };
    match ev {
        Event::Apply(o) => {
            let old = reader.get(&ObjectRef::from_obj(o));
            writer.apply_watcher_event(ev);
            match old {
                Some(old) => call(Change::Updated { old: &old, new: o }),
                None => call(Change::Added(o)),
            }
        }
        Event::Delete(o) => {
            let old = reader.get(&ObjectRef::from_obj(o));
            writer.apply_watcher_event(ev);
            call(Change::Deleted(old.as_deref().unwrap_or(o)));
        }
        Event::Init | Event::InitApply(_) => writer.apply_watcher_event(ev),
        Event::InitDone => {
            // client-go's Replace: what the relist changed.
            let before: HashMap<ObjectRef<K>, Arc<K>> = reader
                .state()
                .into_iter()
                .map(|o| (ObjectRef::from_obj(&*o), o))
                .collect();
            writer.apply_watcher_event(ev);
            let after = reader.state();
            for o in &after {
                match before.get(&ObjectRef::from_obj(&**o)) {
                    Some(old) => call(Change::Updated { old, new: o }),
                    None => call(Change::Added(o)),
                }
            }
            for (r, o) in &before {
                if reader.get(r).is_none() {
                    call(Change::Deleted(o));
                }
            }
        }
    }
}

/// The informers of one process, one per resource, started by the first controller that asks
/// for it (client-go's `SharedInformerFactory`).
#[derive(Clone)]
pub struct Informers {
    client: kube::Client,
    started: Arc<Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl Informers {
    /// No informer yet; each starts on `client` when first asked for.
    pub fn new(client: kube::Client) -> Self {
        Informers {
            client,
            started: Arc::default(),
        }
    }

    /// The informer of `K`, started now if no controller asked for it before.
    pub fn get<K>(&self) -> Arc<Informer<K>>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    {
        let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        let any = started
            .entry(TypeId::of::<K>())
            .or_insert_with(|| Arc::new(Informer::<K>::start(&self.client)));
        any.clone()
            .downcast::<Informer<K>>()
            .unwrap_or_else(|_| unreachable!("one informer type per TypeId"))
    }

    /// The client the informers watch through.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }
}

/// An informer of one consumer: the cache of every `K` the client sees, and `wake.notify_one()`
/// at every change (for a task that reads the whole cache again at each wake-up, as serve's
/// kube-proxy does). The cache is ready once the first list has been read
/// ([`Store::wait_until_ready`], which wakes one waiter only: one task may wait on it).
pub fn start<K>(client: &kube::Client, wake: Arc<tokio::sync::Notify>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let i = Informer::<K>::start(client);
    i.add_handler(move |_| wake.notify_one());
    i.store.clone()
}

/// The objects of `store` in namespace `ns`.
pub fn in_namespace<K>(store: &Store<K>, ns: &str) -> Vec<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.state_filter(|o| o.meta().namespace.as_deref() == Some(ns))
}

/// `namespace/name` of an object (client-go's `MetaNamespaceKeyFunc`; `name` alone for a
/// cluster-scoped one).
pub fn key_of<K: Resource>(o: &K) -> String {
    let m = o.meta();
    match m.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", m.name.as_deref().unwrap_or("")),
        _ => m.name.clone().unwrap_or_default(),
    }
}

/// `(namespace, name)` of a key made by [`key_of`].
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_back_into_namespace_and_name() {
        assert_eq!(split_key("default/web"), ("default", "web"));
        assert_eq!(split_key("node-1"), ("", "node-1"));
    }
}
