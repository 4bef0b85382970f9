//! The store: objects by resource and key, one global resourceVersion counter (etcd's
//! revision), and per resource a bounded history of changes (the watch cache) from which
//! watches are served and consistent lists at an older resourceVersion are rebuilt.
//!
//! Pure: no I/O, no clock, no locking; the server wraps it in a mutex and wakes watchers.
//!
//! Keys are the etcd keys below the resource's prefix, as kube-apiserver's storage orders them:
//! `NAMESPACE/NAME` for namespaced resources, `NAME` for cluster-scoped ones. Every write bumps
//! the global counter and stamps `metadata.resourceVersion` with it.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go` (keys, revisions,
//! continue tokens) and `storage/cacher/watch_cache.go` (`getAllEventsSinceLocked`: a watch
//! from a resourceVersion older than the history gets `410 Gone`, "too old resource version").

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

/// A stored object, shared between the store, its history and watchers.
pub type Obj = Arc<Stored>;

/// The field selector labels indexed at write time (`fields.Set` of every served kind, in the
/// stored form: Events as core/v1).
const INDEXED: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "spec.clusterIP",
    "spec.type",
    "spec.unschedulable",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
    "type",
    "reason",
    "reportingComponent",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
];

/// An object as stored: its JSON (compact, as served, without `kind` and `apiVersion`, which
/// the resource gives), and what selectors and the registry read without parsing it: name,
/// namespace, resourceVersion, labels and the selectable fields. About the size of its JSON,
/// where a parsed `serde_json::Value` takes ten to twenty times that.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    json: Box<str>,
    kind_head: Box<str>,
    rv: u64,
    name: Box<str>,
    namespace: Box<str>,
    labels: Box<[(Box<str>, Box<str>)]>,
    fields: Box<[(&'static str, Box<str>)]>,
}

fn field_text(v: &Value, label: &str) -> Option<String> {
    if label == "source" {
        // Events' `source` selects on the reporting component (`source.component`).
        return v
            .pointer("/source/component")
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    let path: String = label.split('.').map(|p| format!("/{p}")).collect();
    match v.pointer(&path)? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Stored {
    /// Indexes and serializes `v` (its `kind` and `apiVersion` are kept apart).
    pub fn new(v: &Value) -> Stored {
        Stored::from_value(v.clone())
    }

    /// [`Stored::new`] of an object the store takes over (no copy of it is made).
    pub fn from_value(mut body: Value) -> Stored {
        let (mut kind, mut av) = (String::new(), String::new());
        if let Some(m) = body.as_object_mut() {
            kind = m
                .remove("kind")
                .and_then(|k| k.as_str().map(str::to_string))
                .unwrap_or_default();
            av = m
                .remove("apiVersion")
                .and_then(|k| k.as_str().map(str::to_string))
                .unwrap_or_default();
        }
        let v = &body;
        let labels = v
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str().into(), v.into())))
                    .collect()
            })
            .unwrap_or_default();
        let mut fields: Vec<(&'static str, Box<str>)> = INDEXED
            .iter()
            .filter_map(|l| field_text(v, l).map(|t| (*l, t.into_boxed_str())))
            .collect();
        if let Some(src) = field_text(v, "source") {
            fields.push(("source", src.into()));
        }
        let head = if kind.is_empty() {
            String::new()
        } else {
            format!(
                "\"kind\":{},\"apiVersion\":{},",
                Value::String(kind),
                Value::String(av)
            )
        };
        Stored {
            json: serde_json::to_string(&body)
                .unwrap_or_default()
                .into_boxed_str(),
            kind_head: head.into_boxed_str(),
            rv: resource_version(v).unwrap_or(0),
            name: v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            namespace: v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            labels,
            fields: fields.into_boxed_slice(),
        }
    }

    /// The object, parsed (with `kind` and `apiVersion`).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.object_json()).unwrap_or(Value::Null)
    }

    /// The object's JSON with `kind` and `apiVersion` (as a get or a watch event serves it).
    pub fn object_json(&self) -> String {
        if self.kind_head.is_empty() || self.json.len() < 2 {
            return self.json.to_string();
        }
        let rest = &self.json[1..];
        let sep = if rest == "}" {
            self.kind_head.trim_end_matches(',')
        } else {
            &self.kind_head
        };
        format!("{{{sep}{rest}")
    }

    /// The JSON without `kind` and `apiVersion` (as a list's item).
    pub fn item_json(&self) -> &str {
        &self.json
    }

    /// `metadata.resourceVersion`.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> std::collections::BTreeMap<String, String> {
        self.labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The value of label `key`, if set.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &**v)
    }

    /// An indexed field selector value (`None`: absent).
    pub fn field(&self, label: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(l, _)| *l == label)
            .map(|(_, v)| &**v)
    }

    /// The serialized size, bytes.
    pub fn size(&self) -> usize {
        self.json.len()
    }
}

/// The type of a change, as in a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A create (`ADDED`).
    Added,
    /// An update, patch or a delete that only set `deletionTimestamp` (`MODIFIED`).
    Modified,
    /// The object left the store (`DELETED`).
    Deleted,
}

impl EventType {
    /// `ADDED`, `MODIFIED` or `DELETED` (the watch event's `type`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change in the history of a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The resourceVersion the change was written at.
    pub rv: u64,
    /// What the change was.
    pub kind: EventType,
    /// The object's key (`NAMESPACE/NAME` or `NAME`).
    pub key: String,
    /// The object after the change; for `Deleted`, its last state stamped with `rv`.
    pub object: Obj,
    /// The object before the change (`None` for `Added`).
    pub prev: Option<Obj>,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No object at the key (the API answers 404 NotFound).
    #[error("not found")]
    NotFound,
    /// A create at a key that holds an object (409 AlreadyExists).
    #[error("already exists")]
    AlreadyExists,
    /// The requested resourceVersion is older than the history kept (`410 Gone`): `oldest` is
    /// the oldest resourceVersion still served (upstream prints it in parentheses).
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The resourceVersion asked for.
        requested: u64,
        /// The oldest resourceVersion the history still holds.
        oldest: u64,
    },
    /// The requested resourceVersion is newer than any written (the API answers 504 Timeout
    /// with cause `ResourceVersionTooLarge`, as the watch cache's `waitUntilFreshAndBlock`).
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// The resourceVersion asked for.
        requested: u64,
        /// The store's current resourceVersion.
        current: u64,
    },
}

/// Which state a read sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAt {
    /// The latest state.
    Latest,
    /// The state exactly at this resourceVersion (rebuilt from the history).
    Exact(u64),
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The resourceVersion the list is consistent at.
    pub rv: u64,
    /// `(key, object)` in key order.
    pub items: Vec<(String, Obj)>,
    /// The key of the last item when more matching items follow (for a continue token).
    pub more_after: Option<String>,
    /// How many matching items follow the page.
    pub remaining: usize,
}

/// The history length kept per resource unless configured otherwise.
pub const DEFAULT_HISTORY: usize = 10_000;

#[derive(Debug, Default)]
struct Table {
    objects: BTreeMap<String, Obj>,
    history: VecDeque<Arc<Event>>,
    /// The resourceVersion of the newest event dropped from the history (0: none): watches
    /// and exact lists from before it are `Expired`.
    compacted: u64,
}

/// The store of every resource. See the module documentation.
#[derive(Debug)]
pub struct Store {
    rv: u64,
    tables: HashMap<String, Table>,
    history: usize,
}

impl Default for Store {
    fn default() -> Self {
        Store::new(DEFAULT_HISTORY)
    }
}

/// Sets `metadata.resourceVersion` of `obj` to `rv` (as a string, as the API serves it).
pub fn stamp(obj: &mut Value, rv: u64) {
    if let Some(map) = obj.as_object_mut() {
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
    }
}

/// `metadata.resourceVersion` of `obj` as a number, if it is one.
pub fn resource_version(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion")?
        .as_str()?
        .parse()
        .ok()
}

impl Store {
    /// An empty store keeping `history` events per resource (at least 1).
    pub fn new(history: usize) -> Store {
        Store {
            rv: 0,
            tables: HashMap::new(),
            history: history.max(1),
        }
    }

    /// The newest resourceVersion written (0 before any write).
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// The oldest resourceVersion a watch of `resource` may start from.
    pub fn oldest_rv(&self, resource: &str) -> u64 {
        self.tables.get(resource).map_or(0, |t| t.compacted)
    }

    fn table(&mut self, resource: &str) -> &mut Table {
        self.tables.entry(resource.to_string()).or_default()
    }

    fn record(&mut self, resource: &str, event: Event) {
        let cap = self.history;
        let t = self.table(resource);
        t.history.push_back(Arc::new(event));
        while t.history.len() > cap {
            if let Some(old) = t.history.pop_front() {
                t.compacted = old.rv;
            }
        }
    }

    /// The object at `key`, if any.
    pub fn get(&self, resource: &str, key: &str) -> Option<Obj> {
        self.tables.get(resource)?.objects.get(key).cloned()
    }

    /// Number of objects of `resource`.
    pub fn len(&self, resource: &str) -> usize {
        self.tables.get(resource).map_or(0, |t| t.objects.len())
    }

    /// Whether the store holds no object of `resource`.
    pub fn is_empty(&self, resource: &str) -> bool {
        self.len(resource) == 0
    }

    /// Stores a new object at `key`, stamped with the next resourceVersion.
    ///
    /// # Errors
    /// [`StoreError::AlreadyExists`] when `key` holds an object.
    pub fn create(&mut self, resource: &str, key: &str, mut obj: Value) -> Result<Obj, StoreError> {
        if self.get(resource, key).is_some() {
            return Err(StoreError::AlreadyExists);
        }
        self.rv += 1;
        stamp(&mut obj, self.rv);
        let obj = Arc::new(Stored::from_value(obj));
        self.table(resource)
            .objects
            .insert(key.to_string(), obj.clone());
        let rv = self.rv;
        self.record(
            resource,
            Event {
                rv,
                kind: EventType::Added,
                key: key.to_string(),
                object: obj.clone(),
                prev: None,
            },
        );
        Ok(obj)
    }

    /// Replaces the object at `key`, stamped with the next resourceVersion. The caller checks
    /// preconditions (the object's resourceVersion) under the same lock.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when `key` holds no object.
    pub fn update(&mut self, resource: &str, key: &str, mut obj: Value) -> Result<Obj, StoreError> {
        let Some(prev) = self.get(resource, key) else {
            return Err(StoreError::NotFound);
        };
        self.rv += 1;
        stamp(&mut obj, self.rv);
        let obj = Arc::new(Stored::from_value(obj));
        self.table(resource)
            .objects
            .insert(key.to_string(), obj.clone());
        let rv = self.rv;
        self.record(
            resource,
            Event {
                rv,
                kind: EventType::Modified,
                key: key.to_string(),
                object: obj.clone(),
                prev: Some(prev),
            },
        );
        Ok(obj)
    }

    /// Removes the object at `key`; returns its last state stamped with the delete's
    /// resourceVersion (what the `DELETED` event carries and a delete returns).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when `key` holds no object.
    pub fn delete(&mut self, resource: &str, key: &str) -> Result<Obj, StoreError> {
        let Some(prev) = self.table(resource).objects.remove(key) else {
            return Err(StoreError::NotFound);
        };
        self.rv += 1;
        let mut last = prev.value();
        stamp(&mut last, self.rv);
        let last = Arc::new(Stored::from_value(last));
        let rv = self.rv;
        self.record(
            resource,
            Event {
                rv,
                kind: EventType::Deleted,
                key: key.to_string(),
                object: last.clone(),
                prev: Some(prev),
            },
        );
        Ok(last)
    }

    /// Drops the history of `resource` up to and including `rv` (etcd's compaction): watches
    /// and exact lists from before it get [`StoreError::Expired`].
    pub fn compact(&mut self, resource: &str, rv: u64) {
        let current = self.rv;
        let t = self.table(resource);
        while t.history.front().is_some_and(|e| e.rv <= rv) {
            if let Some(old) = t.history.pop_front() {
                t.compacted = old.rv;
            }
        }
        t.compacted = t.compacted.max(rv.min(current));
    }

    fn check_rv(&self, resource: &str, rv: u64) -> Result<(), StoreError> {
        if rv > self.rv {
            return Err(StoreError::TooLarge {
                requested: rv,
                current: self.rv,
            });
        }
        let oldest = self.oldest_rv(resource);
        if rv < oldest {
            return Err(StoreError::Expired {
                requested: rv,
                oldest,
            });
        }
        Ok(())
    }

    /// The changes of `resource` after `rv`, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Expired`] when events after `rv` were dropped from the history;
    /// [`StoreError::TooLarge`] when `rv` is newer than any write.
    pub fn events_since(&self, resource: &str, rv: u64) -> Result<Vec<Arc<Event>>, StoreError> {
        self.check_rv(resource, rv)?;
        let Some(t) = self.tables.get(resource) else {
            return Ok(Vec::new());
        };
        let start = t.history.partition_point(|e| e.rv <= rv);
        Ok(t.history.range(start..).cloned().collect())
    }

    /// One page of `resource`: the objects whose key starts with `prefix` (`NAMESPACE/` for
    /// one namespace, `""` for all), from the first key after `start_after` (exclusive; a
    /// continue token's start key is `LAST\0`, so it is the same), that `matches` accepts, at
    /// most `limit` of them (0: no limit), as seen at `at`.
    ///
    /// # Errors
    /// [`StoreError::Expired`] for an exact resourceVersion older than the history;
    /// [`StoreError::TooLarge`] for one newer than any write.
    pub fn list(
        &self,
        resource: &str,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        at: ReadAt,
        mut matches: impl FnMut(&Stored) -> bool,
    ) -> Result<Page, StoreError> {
        let empty = Table::default();
        let t = self.tables.get(resource).unwrap_or(&empty);
        let rv = match at {
            ReadAt::Latest => self.rv,
            ReadAt::Exact(rv) => {
                self.check_rv(resource, rv)?;
                rv
            }
        };
        // Changes since `rv`, undone: key -> state at `rv` (None: absent then).
        let mut undo: BTreeMap<&str, Option<&Obj>> = BTreeMap::new();
        if rv < self.rv {
            for e in t.history.iter().rev() {
                if e.rv <= rv {
                    break;
                }
                undo.insert(&e.key, e.prev.as_ref());
            }
        }
        let lower = match start_after {
            Some(s) => Bound::Excluded(s),
            None => Bound::Included(prefix),
        };
        let in_prefix = |k: &str| k.starts_with(prefix);
        let mut cur = t
            .objects
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(k, v)| (k.as_str(), v))
            .take_while(|(k, _)| in_prefix(k))
            .peekable();
        let mut old = undo
            .range::<str, _>((lower, Bound::Unbounded))
            .map(|(k, v)| (*k, *v))
            .take_while(|(k, _)| in_prefix(k))
            .peekable();
        let mut page = Page {
            rv,
            items: Vec::new(),
            more_after: None,
            remaining: 0,
        };
        loop {
            // Merge the current keys with the undone ones; an undone key wins.
            let next: (&str, Option<&Obj>) = match (cur.peek(), old.peek()) {
                (None, None) => break,
                (Some(&(ck, cv)), None) => {
                    cur.next();
                    (ck, Some(cv))
                }
                (None, Some(&(ok, ov))) => {
                    old.next();
                    (ok, ov)
                }
                (Some(&(ck, cv)), Some(&(ok, ov))) => {
                    if ck < ok {
                        cur.next();
                        (ck, Some(cv))
                    } else {
                        if ck == ok {
                            cur.next();
                        }
                        old.next();
                        (ok, ov)
                    }
                }
            };
            let (key, Some(obj)) = next else { continue };
            if !matches(obj) {
                continue;
            }
            if limit > 0 && page.items.len() == limit {
                page.remaining += 1;
                if page.more_after.is_none() {
                    page.more_after = page.items.last().map(|(k, _)| k.clone());
                }
                continue;
            }
            page.items.push((key.to_string(), obj.clone()));
        }
        Ok(page)
    }
}

/// How a watcher that filters objects sees one change (`cacheWatcher.convertToWatchEvent`):
/// `ADDED` when the object starts to match, `MODIFIED` while it matches, `DELETED` (with its
/// previous state, stamped with the change's resourceVersion) when it stops matching or is
/// deleted, nothing when it matches neither before nor after.
///
/// Source: `staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go`
/// `convertToWatchEvent` (Kubernetes 1.18 to 1.37).
pub fn watch_event(
    event: &Event,
    mut matches: impl FnMut(&Stored) -> bool,
) -> Option<(EventType, Obj)> {
    let cur = event.kind != EventType::Deleted && matches(&event.object);
    let old = event.prev.as_ref().is_some_and(|p| matches(p));
    match (cur, old) {
        (true, false) => Some((EventType::Added, event.object.clone())),
        (true, true) => Some((EventType::Modified, event.object.clone())),
        (false, true) => {
            if event.kind == EventType::Deleted {
                return Some((EventType::Deleted, event.object.clone()));
            }
            let mut prev = event.prev.as_ref()?.value();
            stamp(&mut prev, event.rv);
            Some((EventType::Deleted, Arc::new(Stored::from_value(prev))))
        }
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, v: i64) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}, "v": v})
    }

    #[test]
    fn stored_objects_keep_their_json_and_index_selectors() {
        let v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default",
            "labels": {"app": "web"}, "resourceVersion": "7"}, "spec": {"nodeName": "n", "hostNetwork": true}, "status": {"phase": "Running"}});
        let s = Stored::new(&v);
        assert_eq!(s.value(), v);
        assert!(
            s.object_json()
                .starts_with(r#"{"kind":"Pod","apiVersion":"v1","metadata""#),
            "{}",
            s.object_json()
        );
        assert!(!s.item_json().contains("\"kind\""));
        assert_eq!((s.name(), s.namespace(), s.rv()), ("web", "default", 7));
        assert_eq!(s.labels().get("app").map(String::as_str), Some("web"));
        assert_eq!(s.field("status.phase"), Some("Running"));
        assert_eq!(s.field("spec.hostNetwork"), Some("true"));
        assert_eq!(s.field("spec.restartPolicy"), None);
        let bare = Stored::new(&json!({"kind": "Status", "apiVersion": "v1"}));
        assert_eq!(bare.value(), json!({"kind": "Status", "apiVersion": "v1"}));
        let ev = Stored::new(
            &json!({"kind": "Event", "apiVersion": "v1", "source": {"component": "kubelet"}}),
        );
        assert_eq!(ev.field("source"), Some("kubelet"));
    }

    #[test]
    fn writes_stamp_one_global_counter() {
        let mut s = Store::new(10);
        let a = s.create("pods", "default/a", obj("a", 1)).unwrap();
        let b = s.create("configmaps", "default/b", obj("b", 1)).unwrap();
        assert_eq!(a.rv(), 1);
        assert_eq!(b.rv(), 2);
        assert_eq!(
            s.create("pods", "default/a", obj("a", 1)),
            Err(StoreError::AlreadyExists)
        );
        let a2 = s.update("pods", "default/a", obj("a", 2)).unwrap();
        assert_eq!(a2.rv(), 3);
        let gone = s.delete("pods", "default/a").unwrap();
        assert_eq!(gone.rv(), 4);
        assert_eq!(gone.value()["v"], 2);
        assert_eq!(s.delete("pods", "default/a"), Err(StoreError::NotFound));
        let evs = s.events_since("pods", 0).unwrap();
        let kinds: Vec<_> = evs.iter().map(|e| (e.rv, e.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (1, EventType::Added),
                (3, EventType::Modified),
                (4, EventType::Deleted)
            ]
        );
        assert_eq!(s.events_since("pods", 3).unwrap().len(), 1);
    }

    #[test]
    fn history_is_bounded_and_old_watches_expire() {
        let mut s = Store::new(2);
        for i in 0..5 {
            s.create("pods", &format!("default/p{i}"), obj("p", i))
                .unwrap();
        }
        // Events 4 and 5 are kept; 3 was dropped last.
        assert_eq!(s.oldest_rv("pods"), 3);
        assert_eq!(
            s.events_since("pods", 2),
            Err(StoreError::Expired {
                requested: 2,
                oldest: 3
            })
        );
        assert_eq!(s.events_since("pods", 3).unwrap().len(), 2);
        assert_eq!(
            s.events_since("pods", 9),
            Err(StoreError::TooLarge {
                requested: 9,
                current: 5
            })
        );
        s.compact("pods", 4);
        assert!(s.events_since("pods", 3).is_err());
        assert_eq!(s.events_since("pods", 4).unwrap().len(), 1);
    }

    #[test]
    fn lists_page_in_key_order_and_rebuild_older_states() {
        let mut s = Store::new(100);
        s.create("pods", "default/b", obj("b", 1)).unwrap(); // 1
        s.create("pods", "default/a", obj("a", 1)).unwrap(); // 2
        s.create("pods", "other/c", obj("c", 1)).unwrap(); // 3
        s.update("pods", "default/a", obj("a", 2)).unwrap(); // 4
        s.delete("pods", "default/b").unwrap(); // 5
        s.create("pods", "default/d", obj("d", 1)).unwrap(); // 6

        let now = s
            .list("pods", "default/", None, 0, ReadAt::Latest, |_| true)
            .unwrap();
        let keys: Vec<_> = now.items.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["default/a", "default/d"]);
        assert_eq!(now.rv, 6);

        let then = s
            .list("pods", "default/", None, 0, ReadAt::Exact(4), |_| true)
            .unwrap();
        let got: Vec<_> = then
            .items
            .iter()
            .map(|(k, v)| (k.as_str(), v.value()["v"].as_i64().unwrap()))
            .collect();
        assert_eq!(got, [("default/a", 2), ("default/b", 1)]);

        let first = s
            .list("pods", "", None, 1, ReadAt::Exact(4), |_| true)
            .unwrap();
        assert_eq!(first.items.len(), 1);
        assert_eq!(first.more_after.as_deref(), Some("default/a"));
        assert_eq!(first.remaining, 2);
        let second = s
            .list("pods", "", Some("default/a\0"), 5, ReadAt::Exact(4), |_| {
                true
            })
            .unwrap();
        let keys: Vec<_> = second.items.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["default/b", "other/c"]);
        assert_eq!(second.more_after, None);

        let filtered = s
            .list("pods", "", None, 0, ReadAt::Latest, |o| o.value()["v"] == 1)
            .unwrap();
        assert_eq!(filtered.items.len(), 2);
    }

    #[test]
    fn a_filtered_watcher_sees_objects_enter_and_leave() {
        let mut s = Store::new(100);
        s.create("pods", "default/a", obj("a", 1)).unwrap();
        s.update("pods", "default/a", obj("a", 2)).unwrap();
        s.update("pods", "default/a", obj("a", 3)).unwrap();
        s.delete("pods", "default/a").unwrap();
        let evs = s.events_since("pods", 0).unwrap();
        let seen: Vec<_> = evs
            .iter()
            .filter_map(|e| watch_event(e, |o| o.value()["v"] == 2 || o.value()["v"] == 3))
            .map(|(t, o)| (t, o.rv(), o.value()["v"].as_i64().unwrap()))
            .collect();
        assert_eq!(
            seen,
            [
                (EventType::Added, 2, 2),
                (EventType::Modified, 3, 3),
                (EventType::Deleted, 4, 3)
            ]
        );
        let only_two: Vec<_> = evs
            .iter()
            .filter_map(|e| watch_event(e, |o| o.value()["v"] == 2))
            .map(|(t, o)| (t, o.rv(), o.value()["v"].as_i64().unwrap()))
            .collect();
        // Leaving the selector is a DELETED of the previous state at the change's version.
        assert_eq!(
            only_two,
            [(EventType::Added, 2, 2), (EventType::Deleted, 3, 2)]
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap as Map;

        #[derive(Debug, Clone)]
        enum Op {
            Write(u8, u8),
            Watch(u8),
            Poll(u8),
            Compact(u8),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (0u8..6, 0u8..3).prop_map(|(k, w)| Op::Write(k, w)),
                1 => (0u8..4).prop_map(Op::Watch),
                2 => (0u8..4).prop_map(Op::Poll),
                1 => (0u8..8).prop_map(Op::Compact),
            ]
        }

        struct Watcher {
            rv: u64,
            state: Map<String, i64>,
            delivered: Vec<u64>,
            relisted: bool,
        }

        fn relist(s: &Store, w: &mut Watcher) {
            let page = s
                .list("pods", "", None, 0, ReadAt::Latest, |_| true)
                .unwrap();
            w.state = page
                .items
                .iter()
                .map(|(k, v)| (k.clone(), v.value()["v"].as_i64().unwrap()))
                .collect();
            w.rv = page.rv;
            w.relisted = true;
        }

        fn poll(s: &Store, w: &mut Watcher) {
            match s.events_since("pods", w.rv) {
                Ok(evs) => {
                    for e in evs {
                        assert!(e.rv > w.rv, "out of order: {} after {}", e.rv, w.rv);
                        let v = e.object.value()["v"].as_i64().unwrap();
                        match e.kind {
                            EventType::Added => {
                                assert!(w.state.insert(e.key.clone(), v).is_none(), "ADDED twice")
                            }
                            EventType::Modified => {
                                assert!(
                                    w.state.insert(e.key.clone(), v).is_some(),
                                    "MODIFIED unseen"
                                )
                            }
                            EventType::Deleted => {
                                assert!(w.state.remove(&e.key).is_some(), "DELETED unseen")
                            }
                        }
                        w.rv = e.rv;
                        w.delivered.push(e.rv);
                    }
                }
                // 410: the client recovers by relisting, as client-go's reflector does.
                Err(StoreError::Expired { .. }) => relist(s, w),
                Err(e) => panic!("unexpected {e}"),
            }
        }

        proptest! {
            /// Issue 18 item 2: any interleaving of writes and watches delivers every event
            /// exactly once, in resourceVersion order, or a 410 that a relist recovers from.
            #[test]
            fn every_event_once_in_order_or_gone(ops in proptest::collection::vec(op(), 1..120), cap in 1usize..12) {
                let mut s = Store::new(cap);
                let mut watchers: Vec<Watcher> = Vec::new();
                let mut n = 0i64;
                for op in ops {
                    match op {
                        Op::Write(k, w) => {
                            n += 1;
                            let key = format!("default/p{k}");
                            let exists = s.get("pods", &key).is_some();
                            let o = obj("p", n);
                            match (exists, w) {
                                (false, _) => { s.create("pods", &key, o).unwrap(); }
                                (true, 0) => { s.delete("pods", &key).unwrap(); }
                                (true, _) => { s.update("pods", &key, o).unwrap(); }
                            }
                            // Writes to another resource move the global counter too.
                            if w == 2 { s.create("configmaps", &format!("default/c{n}"), obj("c", n)).unwrap(); }
                        }
                        Op::Watch(back) => {
                            let mut w = Watcher { rv: s.current_rv().saturating_sub(back as u64), state: Map::new(), delivered: Vec::new(), relisted: false };
                            // A watch from an older version starts from the list at that version.
                            match s.list("pods", "", None, 0, ReadAt::Exact(w.rv), |_| true) {
                                Ok(page) => w.state = page.items.iter().map(|(k, v)| (k.clone(), v.value()["v"].as_i64().unwrap())).collect(),
                                Err(StoreError::Expired { .. }) => relist(&s, &mut w),
                                Err(e) => panic!("unexpected {e}"),
                            }
                            watchers.push(w);
                        }
                        Op::Poll(i) => {
                            if let Some(w) = watchers.get_mut(i as usize) { poll(&s, w); }
                        }
                        Op::Compact(back) => {
                            let rv = s.current_rv().saturating_sub(back as u64);
                            s.compact("pods", rv);
                        }
                    }
                }
                let truth: Map<String, i64> = s.list("pods", "", None, 0, ReadAt::Latest, |_| true).unwrap()
                    .items.iter().map(|(k, v)| (k.clone(), v.value()["v"].as_i64().unwrap())).collect();
                let all: Vec<u64> = s.tables.get("pods").map(|t| t.history.iter().map(|e| e.rv).collect()).unwrap_or_default();
                for w in &mut watchers {
                    let start = w.rv;
                    w.delivered.clear();
                    poll(&s, w);
                    prop_assert_eq!(&w.state, &truth);
                    if !w.relisted {
                        let want: Vec<u64> = all.iter().copied().filter(|&rv| rv > start).collect();
                        prop_assert_eq!(&w.delivered, &want);
                    }
                }
            }
        }
    }
}
