//! The EndpointSlice controller: for each Service with a selector, its slices (managed by
//! `endpointslice-controller.k8s.io`) from the pods the selector selects: ready, serving and
//! terminating conditions, publishNotReadyAddresses, named target ports, the
//! `last-change-trigger-time` annotation. A Service is synced when it, its pods, its slices
//! or the nodes changed. Per-pod problems (a pod on a node that does not exist) are reported
//! as upstream does: a Warning `FailedToUpdateEndpointSlices` from `endpointslice-controller`.
//!
//! Upstream: `pkg/controller/endpointslice/endpointslice_controller.go` (`syncService`),
//! `staging/src/k8s.io/endpointslice/reconciler.go` (`Reconcile`, `finalize`),
//! `staging/src/k8s.io/endpointslice/util/trigger_time_tracker.go`; decisions in
//! podgrace-core `rules::endpointslice`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, PostParams};
use podgrace_core::rules::{endpointslice as rules, labels, podutil};
use tokio::task::JoinSet;

use crate::events::{Recorder, ENDPOINTSLICE_CONTROLLER};
use crate::informer::{self, Change, Informer, Informers};
use crate::queue::{self, Queue, Synced};

/// kube-controller-manager's `--concurrent-service-endpoint-syncs` default: Services synced at
/// once (never one Service by two workers).
pub const WORKERS: usize = 5;

/// When a Service whose sync found the cache stale is looked at again if no event of its
/// slices came meanwhile.
const STALE_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// A slice as this controller last wrote it (`EndpointSliceTracker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Created or updated; its resourceVersion then.
    At(u64),
    /// Deleted.
    Deleted,
}

/// The slices this controller wrote, by Service key and slice name, and the Services whose
/// last sync found the cache behind those writes (synced again when the cache catches up).
#[derive(Default)]
struct Tracker(Mutex<Tracked>);

#[derive(Default)]
struct Tracked {
    written: HashMap<String, HashMap<String, Written>>,
    waiting: HashSet<String>,
}

fn rv(s: &EndpointSlice) -> u64 {
    s.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Tracker {
    fn record(&self, svc: &str, slice: &str, w: Written) {
        if let Ok(mut m) = self.0.lock() {
            m.written
                .entry(svc.to_string())
                .or_default()
                .insert(slice.to_string(), w);
        }
    }

    /// `ShouldSync`: whether a change of a slice is not this controller's own write.
    fn should_sync(&self, svc: &str, c: &Change<'_, EndpointSlice>) -> bool {
        let Ok(m) = self.0.lock() else { return true };
        let name = c.object().metadata.name.as_deref().unwrap_or("");
        let w = m.written.get(svc).and_then(|s| s.get(name)).copied();
        match c {
            Change::Deleted(_) => w != Some(Written::Deleted),
            _ => w != Some(Written::At(rv(c.object()))),
        }
    }

    /// Whether a Service waited for the cache (see [`Tracker::fresh`]); forgets it.
    fn take_waiting(&self, svc: &str) -> bool {
        self.0.lock().is_ok_and(|mut m| m.waiting.remove(svc))
    }

    /// `StaleSlices`: whether the cache has not yet seen a write of this controller to the
    /// Service's slices (a sync now would work on what it already changed). A stale Service
    /// waits: the cache's event of that write queues it again. `read` gives the Service's
    /// slices from the cache; it is read under the tracker's lock, so that the event of a
    /// write either is in what it gives or comes after the Service is marked waiting (the
    /// informer updates its cache before it calls the handlers, which take this lock).
    /// Returns the slices read, or `None` when stale.
    fn fresh(
        &self,
        svc: &str,
        read: impl FnOnce() -> Vec<Arc<EndpointSlice>>,
    ) -> Option<Vec<Arc<EndpointSlice>>> {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let cached = read();
        let m = &mut *guard;
        let Some(own) = m.written.get_mut(svc) else {
            return Some(cached);
        };
        let find = |n: &str| {
            cached
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(n))
        };
        let stale = own.iter().any(|(n, w)| match w {
            Written::At(at) => find(n).is_none_or(|s| rv(s) < *at),
            Written::Deleted => find(n).is_some(),
        });
        if stale {
            m.waiting.insert(svc.to_string());
            return None;
        }
        own.retain(|_, w| *w != Written::Deleted);
        Some(cached)
    }

    fn forget(&self, svc: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.written.remove(svc);
            m.waiting.remove(svc);
        }
    }
}

/// The controller's caches and what it keeps between syncs.
struct Ctl {
    client: kube::Client,
    rec: Recorder,
    svcs: Arc<Informer<Service>>,
    pods: Arc<Informer<Pod>>,
    slices: Arc<Informer<EndpointSlice>>,
    nodes: Arc<Informer<Node>>,
    triggers: Mutex<BTreeMap<String, rules::TriggerState>>,
    tracker: Arc<Tracker>,
}

/// The keys of the Services in the pod's namespace whose selector selects it
/// (`GetPodServiceMemberships`).
fn services_of(svcs: &Informer<Service>, pod: &Pod) -> BTreeSet<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let l = podutil::labels(&pod.metadata);
    svcs.in_namespace(ns)
        .iter()
        .filter(|s| {
            s.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_some_and(|sel| labels::Selector::from_map(sel).matches(&l))
        })
        .map(|s| informer::key_of(&**s))
        .collect()
}

/// The key of the Service a slice of this controller belongs to.
fn service_of_slice(s: &EndpointSlice) -> Option<String> {
    let l = podutil::labels(&s.metadata);
    if l.get(rules::LABEL_MANAGED_BY).map(String::as_str) != Some(rules::CONTROLLER_NAME) {
        return None;
    }
    let name = l.get(rules::LABEL_SERVICE_NAME)?;
    Some(format!(
        "{}/{name}",
        s.metadata.namespace.as_deref().unwrap_or("")
    ))
}

/// Starts the controller on the shared informers: a Service is synced when it changes, when a
/// pod it selects (before or after the change) changes in a way its endpoint shows, when one
/// of its slices changes other than by this controller's own write, and when a node appears,
/// goes or changes its zone. Runs until the returned set is dropped.
pub async fn run(informers: Informers) -> JoinSet<()> {
    let svcs = informers.get::<Service>();
    let pods = informers.get::<Pod>();
    let slices = informers.get::<EndpointSlice>();
    let nodes = informers.get::<Node>();
    let q = Queue::new();
    let tracker = Arc::new(Tracker::default());
    {
        let (q, tracker) = (q.clone(), tracker.clone());
        svcs.add_handler(move |c| {
            let k = informer::key_of(c.object());
            if let Change::Deleted(_) = c {
                tracker.forget(&k);
            }
            q.add(k);
        });
    }
    {
        let (q, svcs) = (q.clone(), svcs.clone());
        pods.add_handler(move |c| {
            let keys = match c {
                Change::Added(p) | Change::Deleted(p) => services_of(&svcs, p),
                Change::Updated { old, new } => {
                    if old.metadata.resource_version == new.metadata.resource_version {
                        return;
                    }
                    let changed = rules::pod_endpoints_changed(old, new);
                    if changed == (false, false) {
                        return;
                    }
                    let now = services_of(&svcs, new);
                    let before = if changed.1 {
                        services_of(&svcs, old)
                    } else {
                        BTreeSet::new()
                    };
                    rules::services_to_update(changed, &before, &now)
                }
            };
            for k in keys {
                q.add(k);
            }
        });
    }
    {
        let (q, tracker) = (q.clone(), tracker.clone());
        slices.add_handler(move |c| {
            if let Some(k) = service_of_slice(c.object()) {
                // Not its own write, or its own write that a stale sync waited for.
                if tracker.should_sync(&k, c) || tracker.take_waiting(&k) {
                    q.add(k);
                }
            }
        });
    }
    {
        let (q, svcs) = (q.clone(), svcs.clone());
        nodes.add_handler(move |c| {
            let zone = |n: &Node| {
                podutil::labels(&n.metadata)
                    .get("topology.kubernetes.io/zone")
                    .cloned()
            };
            if let Change::Updated { old, new } = c {
                if zone(old) == zone(new) {
                    return;
                }
            }
            for s in svcs.store().state() {
                q.add(informer::key_of(&*s));
            }
        });
    }
    svcs.synced().await;
    pods.synced().await;
    slices.synced().await;
    nodes.synced().await;
    let ctl = Arc::new(Ctl {
        client: informers.client().clone(),
        rec: Recorder::new(informers.client().clone(), ENDPOINTSLICE_CONTROLLER),
        svcs,
        pods,
        slices,
        nodes,
        triggers: Mutex::default(),
        tracker,
    });
    queue::run_workers(&q, WORKERS, move |key| {
        let ctl = ctl.clone();
        async move { ctl.sync(&key).await }
    })
}

impl Ctl {
    /// `syncService` of the Service `key`.
    async fn sync(&self, key: &str) -> Synced {
        let (ns, name) = informer::split_key(key);
        let Some(svc) = self.svcs.get(ns, name) else {
            // Deleted: its slices go with it (their owner reference).
            if let Ok(mut t) = self.triggers.lock() {
                t.remove(key);
            }
            return Synced::Done;
        };
        let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.clone()) else {
            return Synced::Done;
        };
        let selector = labels::Selector::from_map(&sel);
        let svc_pods: Vec<Arc<Pod>> = self
            .pods
            .in_namespace(ns)
            .into_iter()
            .filter(|p| selector.matches(&podutil::labels(&p.metadata)))
            .collect();
        let read = || {
            self.slices
                .in_namespace(ns)
                .into_iter()
                .filter(|s| {
                    service_of_slice(s).as_deref() == Some(key)
                        && s.metadata.deletion_timestamp.is_none()
                })
                .collect()
        };
        let Some(own) = self.tracker.fresh(key, read) else {
            // The cache has not seen this controller's last write yet: that write's event
            // brings the Service back (a second look after a second, should it never come).
            return Synced::After(STALE_RECHECK);
        };
        let pod_refs: Vec<&Pod> = svc_pods.iter().map(|p| &**p).collect();
        let previous = self.triggers.lock().ok().and_then(|t| t.get(key).cloned());
        let (trigger, state) = rules::trigger_time(previous.as_ref(), &svc, &pod_refs);
        let existing: Vec<&EndpointSlice> = own.iter().map(|s| &**s).collect();
        let nodes = self.nodes.store().state();
        let node_zone = |n: &str| {
            nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == Some(n))
                .map(|x| {
                    podutil::labels(&x.metadata)
                        .get("topology.kubernetes.io/zone")
                        .cloned()
                })
        };
        let plan = rules::reconcile(
            &svc,
            &pod_refs,
            &existing,
            node_zone,
            rules::MAX_ENDPOINTS_PER_SLICE,
            rules::CONTROLLER_NAME,
            trigger,
        );
        let api: kube::Api<EndpointSlice> = kube::Api::namespaced(self.client.clone(), ns);
        let mut ok = true;
        for s in &plan.create {
            match api.create(&PostParams::default(), s).await {
                Ok(w) => self.track(key, &w),
                Err(e) => {
                    tracing::debug!("slice create: {e}");
                    ok = false;
                }
            }
        }
        for s in &plan.update {
            let n = s.metadata.name.clone().unwrap_or_default();
            match api.replace(&n, &PostParams::default(), s).await {
                Ok(w) => self.track(key, &w),
                Err(e) => {
                    tracing::debug!("slice update: {e}");
                    ok = false;
                }
            }
        }
        for s in &plan.delete {
            let n = s.metadata.name.clone().unwrap_or_default();
            if api.delete(&n, &DeleteParams::default()).await.is_ok() {
                self.tracker.record(key, &n, Written::Deleted);
            }
        }
        if !plan.errors.is_empty() {
            let msg = format!(
                "Error updating Endpoint Slices for Service {ns}/{name}: {}",
                aggregate(&plan.errors)
            );
            self.rec
                .event(
                    "v1",
                    "Service",
                    &svc.metadata,
                    "Warning",
                    "FailedToUpdateEndpointSlices",
                    &msg,
                )
                .await;
        }
        if let Ok(mut t) = self.triggers.lock() {
            t.insert(key.to_string(), state);
        }
        if ok {
            Synced::Done
        } else {
            Synced::Retry
        }
    }

    fn track(&self, svc: &str, written: &EndpointSlice) {
        let n = written.metadata.name.as_deref().unwrap_or("");
        self.tracker.record(svc, n, Written::At(rv(written)));
    }
}

/// `utilerrors.NewAggregate(...).Error()`: one error as it is, several in brackets.
fn aggregate(errs: &[String]) -> String {
    if errs.len() == 1 {
        errs[0].clone()
    } else {
        format!("[{}]", errs.join(", "))
    }
}
