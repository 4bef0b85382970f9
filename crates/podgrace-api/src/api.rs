//! The API server's operations on the store, without HTTP: create, get, list, update, patch,
//! delete and deletecollection as kube-apiserver's generic registry carries them out, with the
//! pod strategy's delete semantics from `podgrace-core::rules::apiserver`.
//!
//! [`Api`] is a cheap handle (an `Arc`). The store sits behind one mutex; every write wakes
//! the watchers of its resource ([`Api::subscribe`]). The HTTP layer ([`crate::http`]) and
//! in-process components call the same methods.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`
//! (`Create`, `Update`, `Delete`, `DeleteCollection`, `ShouldDeleteDuringUpdate`),
//! `staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go` (`BeforeDelete`),
//! `pkg/registry/core/pod/strategy.go` (`CheckGracefulDelete`), `plugin/pkg/admission/
//! namespace/lifecycle` (no new content in a missing or terminating namespace).

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use podgrace_core::rules::apiserver::{self, DeletionState, PodForDelete, PodPhase, StoredPod};
use podgrace_core::rules::garbagecollector as gc;
use podgrace_core::KubeVersion;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::meta;
use crate::options::{encode_continue, DeleteOptions, ListOptions};
use crate::patch;
use crate::registry::{self, Context, Decoded, FieldValidation};
use crate::resource::{self, Resource, RESOURCES};
use crate::status::{self, ApiError};
use crate::store::{self, Obj, Page, ReadAt, Store, StoreError};

/// The node port range (kube-apiserver's `--service-node-port-range` default).
pub const NODE_PORT_RANGE: std::ops::RangeInclusive<i64> = 30000..=32767;

/// How the server is configured.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The one node (this machine); every pod is bound to it.
    pub node_name: String,
    /// Events kept per resource for watches (the watch cache's history).
    pub history: usize,
    /// The release whose API server behaviour is reproduced.
    pub kube_version: KubeVersion,
    /// How often a watch that allows bookmarks gets one (kube-apiserver: about a minute).
    pub bookmark_interval: Duration,
    /// The watch timeout when the client sets none is this to twice this, at random
    /// (`--min-request-timeout`, 1800 s).
    pub min_request_timeout: Duration,
    /// The largest request body accepted, bytes (kube-apiserver: 3 MiB).
    pub max_body_bytes: usize,
    /// Where the kubelet writes container logs (`<ns>_<pod>_<uid>/<container>/<n>.log`).
    pub log_dir: Option<PathBuf>,
    /// The first address and prefix length of the Service ClusterIP range.
    pub service_cidr: (Ipv4Addr, u8),
    /// The machine's claims on Service addresses ([`crate::claims`]): with them, a ClusterIP or
    /// NodePort allocated automatically is one no other serve on this machine holds and nothing
    /// has bound; `None` (the default) allocates as upstream does, within this API only.
    pub claims: Option<Arc<crate::claims::Claims>>,
    /// The kubelets `GET /api/v1/nodes/NODE/proxy/PATH` reaches ([`NodeProxy`]); `None`: no
    /// kubelet can be reached (503, as kube-apiserver answers when it cannot dial one).
    pub node_proxy: Option<NodeProxy>,
}

/// What the API server's node proxy reaches: given the node and the path after `proxy/`
/// (`configz`), the kubelet's answer as JSON, `Ok(None)` for a path that kubelet does not serve
/// (its `404 page not found`), or `Err` with why it cannot be reached.
#[derive(Clone)]
pub struct NodeProxy(pub Arc<NodeProxyFn>);

/// The function behind a [`NodeProxy`].
pub type NodeProxyFn = dyn Fn(&str, &str) -> Result<Option<Value>, String> + Send + Sync;

impl std::fmt::Debug for NodeProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeProxy")
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            node_name: "podgrace".into(),
            history: store::DEFAULT_HISTORY,
            kube_version: KubeVersion::default(),
            bookmark_interval: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
            max_body_bytes: podgrace_core::manifest::MAX_OBJECT_BYTES,
            log_dir: None,
            service_cidr: (Ipv4Addr::new(127, 96, 0, 0), 12),
            claims: None,
            node_proxy: None,
        }
    }
}

struct Inner {
    cfg: ApiConfig,
    store: Mutex<Store>,
    notify: HashMap<&'static str, watch::Sender<u64>>,
    next_ip: Mutex<u32>,
}

/// The API server (see the module documentation). Clone it freely.
#[derive(Clone)]
pub struct Api(Arc<Inner>);

/// A write's result: the object (or a `Status`), the HTTP code, and warnings.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object as stored (with its new `metadata.resourceVersion`), or the `Status` a
    /// delete answers with once the object is gone.
    pub object: Value,
    /// The HTTP status code: 201 for a create, 200 for an update, a patch or a delete that
    /// removed the object, 202 for a delete that only set `deletionTimestamp` (kube-apiserver's
    /// `handlers.createHandler` / `deleteResource`).
    pub code: u16,
    /// The `Warning` headers to send (`299 - "..."`: deprecations, field validation's `Warn`).
    pub warnings: Vec<String>,
}

/// The patch types kube-apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`: RFC 6902 operations.
    Json,
    /// `application/merge-patch+json`: RFC 7386.
    Merge,
    /// `application/strategic-merge-patch+json`: upstream's strategicpatch, by the
    /// patchMergeKey of each list.
    Strategic,
}

impl PatchType {
    /// From the request's Content-Type.
    ///
    /// # Errors
    /// 415 for another type (server-side apply is not served).
    pub fn from_content_type(ct: &str) -> Result<PatchType, ApiError> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

pub(crate) fn store_err(r: &Resource, name: &str, e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound => ApiError::not_found(r, name),
        StoreError::AlreadyExists => ApiError::already_exists(r, name),
        StoreError::Expired { requested, oldest } => {
            ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
        }
        StoreError::TooLarge { requested, current } => ApiError::too_large_rv(requested, current),
    }
}

/// Every ClusterIP and NodePort the stored Services use.
fn service_addresses(
    s: &Store,
) -> (
    std::collections::BTreeSet<Ipv4Addr>,
    std::collections::BTreeSet<u16>,
) {
    let mut ips = std::collections::BTreeSet::new();
    let mut ports = std::collections::BTreeSet::new();
    if let Ok(page) = s.list("services", "", None, 0, ReadAt::Latest, |_| true) {
        for (_, o) in &page.items {
            if let Some(ip) = o.field("spec.clusterIP").and_then(|ip| ip.parse().ok()) {
                ips.insert(ip);
            }
            for p in o
                .value()
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(n) = p
                    .get("nodePort")
                    .and_then(Value::as_u64)
                    .and_then(|n| u16::try_from(n).ok())
                {
                    ports.insert(n);
                }
            }
        }
    }
    (ips, ports)
}

fn openapi_def(r: &Resource) -> String {
    let group = match r.group {
        "" => "core",
        "coordination.k8s.io" => "coordination",
        "events.k8s.io" => "events",
        "discovery.k8s.io" => "discovery",
        g => g,
    };
    format!("io.k8s.api.{group}.{}.{}", r.version, r.kind)
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

impl Api {
    /// A server with the default namespaces (`default`, `kube-system`, `kube-public`,
    /// `kube-node-lease`), as a fresh cluster has them.
    pub fn new(cfg: ApiConfig) -> Api {
        let mut notify = HashMap::new();
        for r in RESOURCES {
            notify
                .entry(r.storage)
                .or_insert_with(|| watch::channel(0).0);
        }
        let api = Api(Arc::new(Inner {
            store: Mutex::new(Store::new(cfg.history)),
            cfg,
            notify,
            next_ip: Mutex::new(1),
        }));
        let ns = resource::find("", "v1", "namespaces").expect("namespaces");
        for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"metadata": {"name": n}}).to_string();
            let _ = api.create(ns, "", body.as_bytes(), FieldValidation::Strict);
        }
        api
    }

    /// The configuration.
    pub fn config(&self) -> &ApiConfig {
        &self.0.cfg
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Store> {
        self.0.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` with the store locked (reads for watches).
    pub fn with_store<R>(&self, f: impl FnOnce(&Store) -> R) -> R {
        f(&self.lock())
    }

    /// A receiver that changes on every write to `storage` (its value: the newest
    /// resourceVersion written there).
    pub fn subscribe(&self, storage: &str) -> watch::Receiver<u64> {
        self.0
            .notify
            .get(storage)
            .map(watch::Sender::subscribe)
            .unwrap_or_else(|| watch::channel(0).1)
    }

    pub(crate) fn wake(&self, storage: &str, rv: u64) {
        if let Some(tx) = self.0.notify.get(storage) {
            tx.send_replace(rv);
        }
    }

    fn context(&self) -> Context {
        Context {
            now: now(),
            node_name: self.0.cfg.node_name.clone(),
        }
    }

    /// The stored form of an object served as `r` (Events are stored as core/v1).
    fn to_storage(r: &Resource, v: Value) -> Value {
        if r.group == "events.k8s.io" {
            registry::event_from_events_v1(&v)
        } else {
            v
        }
    }
    /// A stored object as `r` serves it.
    pub fn present_obj(r: &Resource, o: &Obj) -> Value {
        let v = o.value();
        if r.group == "events.k8s.io" {
            registry::event_to_events_v1(&v)
        } else {
            v
        }
    }

    /// The object as `r` serves it.
    pub fn present(r: &Resource, v: &Value) -> Value {
        if r.group == "events.k8s.io" {
            registry::event_to_events_v1(v)
        } else {
            v.clone()
        }
    }

    fn check_namespace(
        &self,
        s: &Store,
        r: &Resource,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if !r.namespaced {
            return Ok(());
        }
        let nsr = resource::find("", "v1", "namespaces").expect("namespaces");
        match s.get("namespaces", ns) {
            None => Err(ApiError::not_found(nsr, ns)),
            Some(n) if n.field("status.phase") == Some("Terminating") => Err(ApiError::forbidden(
                r,
                name,
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Allocates a Service's cluster IP and, for NodePort and LoadBalancer Services, its node
    /// ports (`pkg/registry/core/service/storage/alloc.go`, `initNodePorts`;
    /// `portallocator`'s errors).
    ///
    /// # Errors
    /// 422 for a requested node port outside 30000-32767 or already allocated, 500 when the
    /// range is full.
    fn allocate_service(&self, s: &Store, svc: &mut Value) -> Result<(), ApiError> {
        let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        if spec.get("type").and_then(Value::as_str) == Some("ExternalName") {
            return Ok(());
        }
        let claims = self.0.cfg.claims.as_deref();
        if let Some(c) = claims {
            // Addresses no Service of this API uses any more go back to the machine.
            let (ips, ports) = service_addresses(s);
            c.retain(&ips, &ports);
        }
        let service_ports: Vec<u16> = spec
            .get("ports")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter(|p| p.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == "TCP")
                    .filter_map(|p| p.get("port").and_then(Value::as_u64))
                    .filter_map(|p| u16::try_from(p).ok())
                    .collect()
            })
            .unwrap_or_default();
        let set = spec.get("clusterIP").and_then(Value::as_str).unwrap_or("");
        if set.is_empty() {
            let (base, prefix) = self.0.cfg.service_cidr;
            let size = 1u32 << (32 - u32::from(prefix.min(30)));
            let used: Vec<String> = s
                .list("services", "", None, 0, ReadAt::Latest, |_| true)
                .map(|p| {
                    p.items
                        .iter()
                        .filter_map(|(_, o)| o.field("spec.clusterIP").map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let mut next = self.0.next_ip.lock().unwrap_or_else(|p| p.into_inner());
            for _ in 0..size {
                let addr = Ipv4Addr::from(u32::from(base) + (*next % (size - 2)) + 1);
                let ip = addr.to_string();
                *next += 1;
                let free_here = !used.contains(&ip);
                if free_here
                    && claims.is_none_or(|c| {
                        c.try_claim(crate::claims::Claim::ClusterIp {
                            ip: addr,
                            ports: &service_ports,
                        })
                    })
                {
                    spec.insert("clusterIP".into(), json!(ip));
                    spec.insert("clusterIPs".into(), json!([ip]));
                    break;
                }
            }
        } else if set != "None" {
            // Asked for: upstream's rules only; claimed so that other serves avoid it.
            if let (Some(c), Ok(ip)) = (claims, set.parse::<Ipv4Addr>()) {
                let _ = c.try_claim(crate::claims::Claim::ClusterIp {
                    ip,
                    ports: &service_ports,
                });
            }
            spec.insert("clusterIPs".into(), json!([set]));
        }
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
        spec.insert("ipFamilyPolicy".into(), json!("SingleStack"));
        let node_port = matches!(
            spec.get("type").and_then(Value::as_str),
            Some("NodePort") | Some("LoadBalancer")
        );
        if node_port {
            let mut taken: Vec<i64> = s
                .list("services", "", None, 0, ReadAt::Latest, |_| true)
                .map(|p| {
                    p.items
                        .iter()
                        .flat_map(|(_, o)| {
                            o.value()
                                .pointer("/spec/ports")
                                .and_then(Value::as_array)
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
                                        .collect::<Vec<_>>()
                                })
                                .unwrap_or_default()
                        })
                        .collect()
                })
                .unwrap_or_default();
            // `initNodePorts`: a requested port must be in the range and free; one node port
            // per service port number (TCP and UDP of one port share it).
            let mut by_port: std::collections::HashMap<i64, i64> = Default::default();
            let name = meta::name(svc).to_string();
            let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
                return Ok(());
            };
            let requested = |port: i64, ports: &[Value]| {
                ports
                    .iter()
                    .filter(|p| p.get("port").and_then(Value::as_i64) == Some(port))
                    .find_map(|p| {
                        p.get("nodePort")
                            .and_then(Value::as_i64)
                            .filter(|n| *n != 0)
                    })
            };
            let snapshot = ports.clone();
            for (i, p) in ports.iter_mut().enumerate() {
                let Some(p) = p.as_object_mut() else { continue };
                let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                let own = p
                    .get("nodePort")
                    .and_then(Value::as_i64)
                    .filter(|n| *n != 0);
                let shared = by_port
                    .get(&port)
                    .copied()
                    .filter(|a| own.is_none_or(|n| n == *a));
                let np = if let Some(a) = shared {
                    a
                } else if let Some(n) = own.or_else(|| requested(port, &snapshot)) {
                    let refuse = |why: String| {
                        ApiError::invalid(
                            resource::find("", "v1", "services").expect("services"),
                            &name,
                            vec![status::Cause {
                                reason: "FieldValueInvalid".into(),
                                message: format!("Invalid value: {n}: {why}"),
                                field: format!("spec.ports[{i}].nodePort"),
                            }],
                        )
                    };
                    if !NODE_PORT_RANGE.contains(&n) {
                        return Err(refuse(format!(
                            "provided port is not in the valid range. The range of valid ports is {}-{}",
                            NODE_PORT_RANGE.start(),
                            NODE_PORT_RANGE.end()
                        )));
                    }
                    if taken.contains(&n) {
                        return Err(refuse("provided port is already allocated".into()));
                    }
                    // Asked for: upstream's rules only; claimed so that other serves avoid it.
                    if let (Some(c), Ok(port)) = (claims, u16::try_from(n)) {
                        let _ = c.try_claim(crate::claims::Claim::NodePort(port));
                    }
                    n
                } else {
                    let free = |n: &i64| {
                        !taken.contains(n)
                            && claims.is_none_or(|c| {
                                u16::try_from(*n)
                                    .is_ok_and(|p| c.try_claim(crate::claims::Claim::NodePort(p)))
                            })
                    };
                    match NODE_PORT_RANGE.clone().find(free) {
                        Some(n) => n,
                        None => {
                            return Err(ApiError::internal(
                                "failed to allocate a nodePort: range is full",
                            ))
                        }
                    }
                };
                taken.push(np);
                by_port.insert(port, np);
                p.insert("nodePort".into(), json!(np));
            }
        }
        Ok(())
    }

    /// `POST` of a new object into namespace `ns` (ignored for cluster-scoped kinds).
    ///
    /// # Errors
    /// 400 (decoding), 404/403 (namespace), 409 (exists), 422 (invalid).
    pub fn create(
        &self,
        r: &'static Resource,
        ns: &str,
        body: &[u8],
        fv: FieldValidation,
    ) -> Result<Written, ApiError> {
        let decoded = registry::decode(r, body, fv, self.0.cfg.kube_version)?;
        let warnings = decoded.warnings.clone();
        let mut obj = registry::prepare_create(r, ns, decoded, &self.context())?;
        let name = meta::name(&obj).to_string();
        let mut bound = r.kind == "Pod"
            && r.group.is_empty()
            && obj
                .pointer("/status/conditions/0/type")
                .and_then(Value::as_str)
                == Some("PodScheduled");
        // Whether the node takes the pod is worked out before the store is locked (it decodes
        // the Node and the Pod): a cordon racing with the create is seen by the next one, as
        // the scheduler's cache sees it.
        let refused = bound && {
            let node = self.lock().get("nodes", &self.0.cfg.node_name);
            node.is_some_and(|n| Self::node_refuses(&n, &obj))
        };
        let mut s = self.lock();
        self.check_namespace(&s, r, ns, &name)?;
        if r.plural == "services" {
            self.allocate_service(&s, &mut obj)?;
        }
        let mut obj = Self::to_storage(r, obj);
        let key = r.key(ns, &name);
        if refused {
            // A cordoned or tainted node: the pod stays unbound for the scheduler, which
            // reports FailedScheduling and binds it once the node takes pods again.
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("nodeName");
            }
            if let Some(st) = obj.get_mut("status").and_then(Value::as_object_mut) {
                st.remove("conditions");
            }
            bound = false;
        }
        // The scheduler's binding records `Scheduled` (events.k8s.io/v1, from
        // `pkg/scheduler/schedule_one.go` `bindingCycle`), about the pod as stored (the
        // resourceVersion its create takes).
        let scheduled = bound.then(|| {
            let mut pod_md = json!({"metadata": {
                "name": meta::name(&obj), "namespace": meta::namespace(&obj), "uid": meta::uid(&obj)}});
            store::stamp(&mut pod_md, s.current_rv() + 1);
            scheduled_event(&pod_md, &self.0.cfg.node_name, now())
        });
        let stored = s
            .create(r.storage, &key, obj)
            .map_err(|e| store_err(r, &name, e))?;
        if let Some(ev) = scheduled {
            let ek = format!("{ns}/{}", meta::name(&ev));
            let _ = s.create("events", &ek, ev);
        }
        let rv = s.current_rv();
        drop(s);
        self.wake(r.storage, rv);
        if bound {
            self.wake("events", rv);
        }
        Ok(Written {
            object: Self::present_obj(r, &stored),
            code: 201,
            warnings,
        })
    }

    /// Whether the node object (if one is registered) does not take `pod`: cordoned, or a
    /// NoSchedule/NoExecute taint the pod does not tolerate (podgrace-core's
    /// `rules::scheduling`).
    fn node_refuses(node: &Obj, pod: &Value) -> bool {
        // A schedulable node without taints takes every pod: nothing to decode.
        if node.field("spec.unschedulable") != Some("true")
            && !node.item_json().contains("\"taints\"")
        {
            return false;
        }
        let (Ok(node), Ok(pod)) = (
            serde_json::from_value::<k8s_openapi::api::core::v1::Node>(node.value()),
            serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(pod.clone()),
        ) else {
            return false;
        };
        podgrace_core::rules::scheduling::unfit_reason(&pod, &node).is_some()
    }

    /// `GET` of one object.
    ///
    /// # Errors
    /// 404 when it does not exist.
    pub fn get(&self, r: &'static Resource, ns: &str, name: &str) -> Result<Value, ApiError> {
        let s = self.lock();
        let o = s
            .get(r.storage, &r.key(ns, name))
            .ok_or_else(|| ApiError::not_found(r, name))?;
        Ok(Self::present_obj(r, &o))
    }

    /// Whether `obj` of `r` matches the options' selectors (and namespace, by key).
    pub fn matches(r: &Resource, opts: &ListOptions, obj: &store::Stored) -> bool {
        if !opts.labels.is_empty() && !opts.labels.matches_with(|k| obj.label(k)) {
            return false;
        }
        if opts.fields.is_empty() {
            return true;
        }
        opts.fields.matches(|f| {
            // events.k8s.io/v1 names the stored (core/v1) fields differently.
            let stored = if r.group == "events.k8s.io" {
                match f.split_once('.') {
                    Some(("regarding", rest)) => format!("involvedObject.{rest}"),
                    _ if f == "reportingController" => "reportingComponent".to_string(),
                    _ => f.to_string(),
                }
            } else {
                f.to_string()
            };
            obj.field(&stored).map(str::to_string)
        })
    }

    /// Checks the field selector's labels against what `r` supports.
    ///
    /// # Errors
    /// 400 `field label not supported: X`.
    pub fn check_fields(r: &Resource, opts: &ListOptions) -> Result<(), ApiError> {
        for (f, _, _) in &opts.fields.terms {
            if !r.supports_field(f) {
                return Err(ApiError::bad_request(r.field_error(f)));
            }
        }
        Ok(())
    }

    /// The store key prefix of namespace `ns` (`""`: all namespaces or cluster-scoped).
    pub fn prefix(r: &Resource, ns: Option<&str>) -> String {
        match ns {
            Some(ns) if r.namespaced => format!("{ns}/"),
            _ => String::new(),
        }
    }

    /// One page of a list (`GET` of a collection).
    ///
    /// # Errors
    /// 400 for bad options, 410 for a continue token or exact version older than the
    /// history, 504 for a version newer than any written.
    pub fn list_page(
        &self,
        r: &'static Resource,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<(Page, Option<String>, Option<usize>), ApiError> {
        Self::check_fields(r, opts)?;
        let s = self.lock();
        let (at, start) = opts.read_at(s.current_rv())?;
        let prefix = Self::prefix(r, ns);
        let page = s
            .list(r.storage, &prefix, start.as_deref(), opts.limit, at, |o| {
                Self::matches(r, opts, o)
            })
            .map_err(|e| match e {
                StoreError::Expired { .. } if opts.continue_from.is_some() => ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                ),
                StoreError::Expired { .. } => ApiError::expired(
                    "The resourceVersion for the provided list is too old.",
                ),
                e => store_err(r, "", e),
            })?;
        let cont = page
            .more_after
            .as_ref()
            .map(|k| encode_continue(page.rv as i64, k));
        let remaining = (cont.is_some() && opts.labels.is_empty() && opts.fields.is_empty())
            .then_some(page.remaining);
        Ok((page, cont, remaining))
    }

    /// A list as its `XList` object (items without kind and apiVersion, as served).
    ///
    /// # Errors
    /// As [`Api::list_page`].
    pub fn list(
        &self,
        r: &'static Resource,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Value, ApiError> {
        let (page, cont, remaining) = self.list_page(r, ns, opts)?;
        let items: Vec<Value> = page
            .items
            .iter()
            .map(|(_, o)| {
                let mut v = Self::present_obj(r, o);
                if let Some(m) = v.as_object_mut() {
                    m.remove("kind");
                    m.remove("apiVersion");
                }
                v
            })
            .collect();
        let mut md = json!({"resourceVersion": page.rv.to_string()});
        if let Some(c) = cont {
            md["continue"] = json!(c);
        }
        if let Some(n) = remaining {
            md["remainingItemCount"] = json!(n);
        }
        Ok(
            json!({"kind": format!("{}List", r.kind), "apiVersion": r.api_version(), "metadata": md, "items": items}),
        )
    }

    /// A list as its serialized `XList` (the fast path: stored items are written as they are).
    ///
    /// # Errors
    /// As [`Api::list_page`].
    pub fn list_body(
        &self,
        r: &'static Resource,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<String, ApiError> {
        let (page, cont, remaining) = self.list_page(r, ns, opts)?;
        let mut md = json!({"resourceVersion": page.rv.to_string()});
        if let Some(c) = cont {
            md["continue"] = json!(c);
        }
        if let Some(n) = remaining {
            md["remainingItemCount"] = json!(n);
        }
        let size: usize = page.items.iter().map(|(_, o)| o.size() + 1).sum();
        let mut out = String::with_capacity(size + 128);
        out.push_str(&format!(
            "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{md},\"items\":[",
            r.kind,
            r.api_version()
        ));
        for (i, (_, o)) in page.items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if r.group == "events.k8s.io" {
                let mut v = Self::present_obj(r, o);
                if let Some(m) = v.as_object_mut() {
                    m.remove("kind");
                    m.remove("apiVersion");
                }
                out.push_str(&v.to_string());
            } else {
                out.push_str(o.item_json());
            }
        }
        out.push_str("]}");
        Ok(out)
    }

    /// `PUT` of an object (or of its `status` subresource).
    ///
    /// # Errors
    /// 400 (decoding, name mismatch), 404, 409 (stale resourceVersion), 422.
    pub fn update(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        body: &[u8],
        fv: FieldValidation,
        status_only: bool,
    ) -> Result<Written, ApiError> {
        let decoded = registry::decode(r, body, fv, self.0.cfg.kube_version)?;
        let warnings = decoded.warnings.clone();
        self.write_update(r, ns, name, decoded, status_only, warnings, true)
    }

    /// Decodes `new` as a body would be (unknown fields dropped) and updates with it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_update(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        decoded: Decoded,
        status_only: bool,
        warnings: Vec<String>,
        check_rv: bool,
    ) -> Result<Written, ApiError> {
        let mut s = self.lock();
        let out = self.write_update_locked(
            &mut s,
            r,
            ns,
            name,
            decoded,
            status_only,
            warnings,
            check_rv,
        )?;
        let rv = s.current_rv();
        drop(s);
        self.wake(r.storage, rv);
        self.reap_namespaces();
        Ok(out)
    }

    /// [`Self::write_update`] with the store already locked by the caller, so that a read, a
    /// change and this write are one step (a patch); the caller wakes the watchers once it
    /// lets the lock go.
    #[allow(clippy::too_many_arguments)]
    fn write_update_locked(
        &self,
        s: &mut MutexGuard<'_, Store>,
        r: &'static Resource,
        ns: &str,
        name: &str,
        decoded: Decoded,
        status_only: bool,
        warnings: Vec<String>,
        check_rv: bool,
    ) -> Result<Written, ApiError> {
        let mut new = Self::to_storage(r, decoded.object);
        if meta::name(&new) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta::name(&new)
            )));
        }
        if r.namespaced {
            let got = meta::namespace(&new);
            if !got.is_empty() && got != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        let key = r.key(ns, name);
        let old = s
            .get(r.storage, &key)
            .ok_or_else(|| ApiError::not_found(r, name))?
            .value();
        if check_rv {
            let want = new
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let have = old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !want.is_empty() && want != have {
                return Err(ApiError::conflict(r, name, ApiError::OPTIMISTIC_LOCK));
            }
        }
        // `BeforeUpdate`: an empty uid takes the stored one, a different one is refused
        // (`ValidateObjectMetaAccessorUpdate`), with the labels and annotations checked again.
        {
            let mut causes = Vec::new();
            let uid = meta::uid(&new);
            if !uid.is_empty() && uid != meta::uid(&old) {
                causes.push(status::Cause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {}: field is immutable",
                        crate::status_quote(uid)
                    ),
                    field: "metadata.uid".into(),
                });
            }
            causes.extend(meta::validate_labels_and_annotations(
                new.get("metadata").unwrap_or(&Value::Null),
                "metadata",
            ));
            if !causes.is_empty() {
                return Err(ApiError::invalid(r, name, causes));
            }
        }
        // Fields the server owns stay as stored.
        {
            let om = old.get("metadata").cloned().unwrap_or(json!({}));
            let m = meta::meta_mut(&mut new);
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generateName",
            ] {
                match om.get(k) {
                    Some(v) => m.insert(k.into(), v.clone()),
                    None => m.remove(k),
                };
            }
            if r.namespaced {
                m.insert("namespace".into(), json!(ns));
            }
        }
        let has_status = r.subresources.contains(&"status");
        if crate::kinds::handles(r) {
            let mut causes = crate::kinds::prepare_update(r, &old, &mut new, status_only);
            if !status_only {
                causes.extend(decoded.invalid.iter().cloned());
            }
            if !causes.is_empty() {
                return Err(ApiError::invalid(r, name, causes));
            }
        } else if status_only {
            // Only the status changes (and, as upstream lets the status writer, nothing else).
            let mut merged = old.clone();
            merged["status"] = new.get("status").cloned().unwrap_or(json!({}));
            if let Some(rv) = new.pointer("/metadata/resourceVersion").cloned() {
                merged["metadata"]["resourceVersion"] = rv;
            }
            new = merged;
        } else if has_status {
            match old.get("status") {
                Some(st) => new["status"] = st.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            if r.kind == "Pod" && r.group.is_empty() {
                registry::default_pod(&mut new);
                registry::check_pod_update(r, &old, &new)?;
                if !decoded.invalid.is_empty() {
                    return Err(ApiError::invalid(r, name, decoded.invalid));
                }
            }
        }
        if r.plural == "namespaces" && !status_only {
            new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
        }
        if old == new {
            return Ok(Written {
                object: Self::present(r, &old),
                code: 200,
                warnings,
            });
        }
        // An update that leaves a deleted object without finalizers removes it.
        let deleting = new
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null());
        let dgps = new
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        let stored = StoredPod {
            pod: PodForDelete::default(),
            deletion: DeletionState {
                deletion_timestamp: deleting.then_some(0),
                deletion_grace_period_seconds: dgps,
            },
            finalizers: meta::finalizers(&new),
        };
        let out = if apiserver::should_delete_during_update(&stored) {
            s.update(r.storage, &key, new)
                .map_err(|e| store_err(r, name, e))?;
            s.delete(r.storage, &key)
                .map_err(|e| store_err(r, name, e))?
        } else {
            s.update(r.storage, &key, new)
                .map_err(|e| store_err(r, name, e))?
        };
        Ok(Written {
            object: Self::present_obj(r, &out),
            code: 200,
            warnings,
        })
    }

    /// `PATCH` of an object (or its `status`).
    ///
    /// # Errors
    /// 400/415/422 for the patch, 404, 409 on a stale resourceVersion in the patch.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        pt: PatchType,
        body: &[u8],
        fv: FieldValidation,
        status_only: bool,
    ) -> Result<Written, ApiError> {
        let p: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        // A patch naming a resourceVersion is a precondition; otherwise it applies to the
        // current object, and a write between our read and our write (the kubelet's status,
        // a controller) only means applying it again to the newer object, as upstream's
        // `GuaranteedUpdate` does when `patcher.applyPatch` runs again on a conflict
        // (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go, 1.27–1.33).
        let pinned = p
            .pointer("/metadata/resourceVersion")
            .map(|v| v.as_str().unwrap_or("").to_owned());
        // The read, the patch and the write happen under the store's one lock, so no other
        // writer can come between them: what `GuaranteedUpdate`'s retry loop achieves upstream.
        let mut s = self.lock();
        let current = s
            .get(r.storage, &r.key(ns, name))
            .map(|o| Self::present_obj(r, &o))
            .ok_or_else(|| ApiError::not_found(r, name))?;
        let patched = match pt {
            PatchType::Json => {
                patch::json_patch(&current, &p).map_err(|e| ApiError::bad_request(e.0))?
            }
            PatchType::Merge => patch::merge_patch(&current, &p),
            PatchType::Strategic => patch::strategic_merge_patch(&current, &p, &openapi_def(r))
                .map_err(|e| ApiError::bad_request(e.0))?,
        };
        let text = serde_json::to_vec(&patched).map_err(ApiError::internal)?;
        let decoded = registry::decode(r, &text, fv, self.0.cfg.kube_version)?;
        let warnings = decoded.warnings.clone();
        if let Some(want) = &pinned {
            let have = current
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            if want != have {
                return Err(ApiError::conflict(r, name, ApiError::OPTIMISTIC_LOCK));
            }
        }
        let out =
            self.write_update_locked(&mut s, r, ns, name, decoded, status_only, warnings, true)?;
        let rv = s.current_rv();
        drop(s);
        self.wake(r.storage, rv);
        self.reap_namespaces();
        Ok(out)
    }

    /// `DELETE` of one object with DeleteOptions.
    ///
    /// Pods follow `rest.BeforeDelete` with the pod strategy's `CheckGracefulDelete`
    /// ([`apiserver::store_delete`]): the object gets deletionTimestamp and
    /// deletionGracePeriodSeconds and stays until the kubelet deletes it with grace 0; grace 0
    /// (a force delete, or a pod that never started or has finished) removes it at once,
    /// after one MODIFIED with the deletion timestamp, as upstream's two writes do. A second
    /// delete only shortens. Finalizers keep an object until they are removed.
    ///
    /// # Errors
    /// 404, 409 for failed preconditions.
    pub fn delete(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Written, ApiError> {
        let out = self.delete_locked(r, ns, name, opts)?;
        self.reap_namespaces();
        if r.plural == "services" {
            self.release_claims();
        }
        Ok(out)
    }

    /// Gives the machine back the ClusterIPs and NodePorts no Service uses any more
    /// ([`crate::claims`]).
    fn release_claims(&self) {
        if let Some(c) = self.0.cfg.claims.as_deref() {
            let (ips, ports) = service_addresses(&self.lock());
            c.retain(&ips, &ports);
        }
    }

    pub(crate) fn delete_locked(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Written, ApiError> {
        let mut s = self.lock();
        let key = r.key(ns, name);
        let cur = s
            .get(r.storage, &key)
            .ok_or_else(|| ApiError::not_found(r, name))?
            .value();
        if let Some(uid) = &opts.precondition_uid {
            if uid != meta::uid(&cur) {
                return Err(ApiError::conflict(
                    r,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta::uid(&cur)
                    ),
                ));
            }
        }
        if let Some(rv) = &opts.precondition_rv {
            let have = cur
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            if rv != have {
                return Err(ApiError::conflict(
                    r,
                    name,
                    &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"),
                ));
            }
        }
        if opts.dry_run {
            return Ok(Written {
                object: Self::present(r, &cur),
                code: 200,
                warnings: Vec::new(),
            });
        }
        let now_ms = now().as_millisecond();
        let now_s = apiserver::stored_time_seconds(now_ms);
        let to_secs = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .and_then(meta::parse_time)
                .map(|t| t.as_second())
        };
        let stored = StoredPod {
            pod: PodForDelete {
                node_name: cur
                    .pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                phase: PodPhase::parse(
                    cur.pointer("/status/phase")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                )
                .unwrap_or(PodPhase::Unknown),
                termination_grace_period_seconds: cur
                    .pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64),
            },
            deletion: DeletionState {
                deletion_timestamp: to_secs(cur.pointer("/metadata/deletionTimestamp")),
                deletion_grace_period_seconds: cur
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64),
            },
            finalizers: meta::finalizers(&cur),
        };
        let is_pod = r.kind == "Pod" && r.group.is_empty();
        let is_ns = r.plural == "namespaces";
        // The garbage collector's finalizers the options ask for (`orphan`,
        // `foregroundDeletion`), as `deletionFinalizersForGarbageCollection` sets them.
        let (finalizers, finalizers_changed) = if is_ns {
            (stored.finalizers.clone(), false)
        } else {
            gc::deletion_finalizers(
                &stored.finalizers,
                gc::Cascade {
                    propagation_policy: opts.propagation_policy.as_deref(),
                    orphan_dependents: opts.orphan_dependents,
                },
            )
        };
        let mut stored = stored;
        stored.finalizers = finalizers.clone();
        let clamp = apiserver::clamps_deletion_timestamp(self.0.cfg.kube_version);
        let outcome = if is_pod {
            // At the clock's milliseconds, stored in whole seconds, as the API server does.
            apiserver::store_delete_ms(
                &stored,
                opts.present,
                opts.grace_period_seconds,
                now_ms,
                clamp,
            )
        } else {
            // Other kinds have no graceful deletion: immediate, unless finalizers hold them.
            let decision =
                apiserver::before_delete(stored.deletion, None, now_s, false, clamp, |_| None);
            if stored.finalizers.is_empty() && !is_ns {
                apiserver::StoreDeleteOutcome {
                    was_deleted: true,
                    object: None,
                    written: None,
                    decision,
                }
            } else {
                let mut kept = stored.clone();
                if kept.deletion.deletion_timestamp.is_none() {
                    kept.deletion = DeletionState {
                        deletion_timestamp: Some(now_s),
                        deletion_grace_period_seconds: Some(0),
                    };
                }
                apiserver::StoreDeleteOutcome {
                    was_deleted: false,
                    object: Some(kept.clone()),
                    written: Some(kept),
                    decision,
                }
            }
        };
        let with_deletion = |d: DeletionState| -> Value {
            let mut v = cur.clone();
            let m = meta::meta_mut(&mut v);
            if let Some(dt) = d.deletion_timestamp {
                let t = jiff::Timestamp::from_second(dt).unwrap_or_else(|_| now());
                m.insert("deletionTimestamp".into(), json!(meta::time_string(t)));
            }
            if let Some(g) = d.deletion_grace_period_seconds {
                m.insert("deletionGracePeriodSeconds".into(), json!(g));
            }
            if is_ns {
                v["status"]["phase"] = json!("Terminating");
            }
            if finalizers_changed {
                if finalizers.is_empty() {
                    m_remove(&mut v, "finalizers");
                } else {
                    meta::meta_mut(&mut v).insert("finalizers".into(), json!(finalizers));
                }
            }
            v
        };
        let result = if outcome.decision.graceful_pending && finalizers_changed {
            let marked = with_deletion(stored.deletion);
            let out = s
                .update(r.storage, &key, marked)
                .map_err(|e| store_err(r, name, e))?
                .value();
            Written {
                object: Self::present(r, &out),
                code: 200,
                warnings: Vec::new(),
            }
        } else if outcome.decision.graceful_pending {
            Written {
                object: Self::present(r, &cur),
                code: 200,
                warnings: Vec::new(),
            }
        } else if outcome.was_deleted {
            if outcome.decision.graceful {
                // Upstream writes the deletion timestamp first, then deletes (two events).
                let marked = with_deletion(outcome.decision.object);
                if marked != cur {
                    s.update(r.storage, &key, marked)
                        .map_err(|e| store_err(r, name, e))?;
                }
            }
            let last = s
                .delete(r.storage, &key)
                .map_err(|e| store_err(r, name, e))?;
            let object = if is_ns {
                Self::present_obj(r, &last)
            } else {
                status::success(Some((r, name, meta::uid(&last.value()))))
            };
            Written {
                object,
                code: 200,
                warnings: Vec::new(),
            }
        } else {
            let kept = outcome.object.map(|o| o.deletion).unwrap_or_default();
            let marked = with_deletion(kept);
            let out = if marked != cur {
                s.update(r.storage, &key, marked)
                    .map_err(|e| store_err(r, name, e))?
                    .value()
            } else {
                cur.clone()
            };
            Written {
                object: Self::present(r, &out),
                code: 200,
                warnings: Vec::new(),
            }
        };
        let rv = s.current_rv();
        drop(s);
        self.wake(r.storage, rv);
        if is_ns {
            self.delete_namespace_content(name);
        }
        Ok(result)
    }

    /// `DELETE` of a collection: every matching object, each as [`Api::delete`] does.
    ///
    /// # Errors
    /// 400 for bad selectors.
    pub fn delete_collection(
        &self,
        r: &'static Resource,
        ns: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        Self::check_fields(r, list)?;
        // The list as it was before the deletes is the response, whatever each delete did
        // (a graceful one leaves the object, with its deletion timestamp).
        let (listed_rv, listed) = {
            let s = self.lock();
            let page = s
                .list(
                    r.storage,
                    &Self::prefix(r, ns),
                    None,
                    0,
                    ReadAt::Latest,
                    |o| Self::matches(r, list, o),
                )
                .map_err(|e| store_err(r, "", e))?;
            (page.rv, page.items)
        };
        let mut items = Vec::with_capacity(listed.len());
        for (_, o) in &listed {
            match self.delete_locked(r, o.namespace(), o.name(), opts) {
                Ok(_) => {}
                Err(e) if e.code == 404 => continue,
                Err(e) => return Err(e),
            }
            let mut v = Self::present_obj(r, o);
            if let Some(m) = v.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            items.push(v);
        }
        self.reap_namespaces();
        if r.plural == "services" {
            self.release_claims();
        }
        Ok(
            json!({"kind": format!("{}List", r.kind), "apiVersion": r.api_version(), "metadata": {"resourceVersion": listed_rv.to_string()}, "items": items}),
        )
    }

    /// The namespace controller's content deletion for a terminating namespace.
    fn delete_namespace_content(&self, ns: &str) {
        for r in RESOURCES
            .iter()
            .filter(|r| r.namespaced && r.group != "events.k8s.io")
        {
            let names: Vec<String> = self.with_store(|s| {
                s.list(
                    r.storage,
                    &format!("{ns}/"),
                    None,
                    0,
                    ReadAt::Latest,
                    |_| true,
                )
                .map(|p| p.items.iter().map(|(_, o)| o.name().to_string()).collect())
                .unwrap_or_default()
            });
            for n in names {
                let _ = self.delete_locked(
                    r,
                    ns,
                    &n,
                    &DeleteOptions {
                        present: true,
                        ..Default::default()
                    },
                );
            }
        }
        self.reap_namespaces();
    }

    /// Removes terminating namespaces that hold nothing any more (the namespace controller's
    /// finalize step).
    fn reap_namespaces(&self) {
        let mut s = self.lock();
        let terminating: Vec<String> = s
            .list("namespaces", "", None, 0, ReadAt::Latest, |o| {
                o.field("status.phase") == Some("Terminating")
            })
            .map(|p| p.items.iter().map(|(k, _)| k.clone()).collect())
            .unwrap_or_default();
        let mut changed = false;
        for ns in terminating {
            let empty = RESOURCES.iter().filter(|r| r.namespaced).all(|r| {
                s.list(
                    r.storage,
                    &format!("{ns}/"),
                    None,
                    1,
                    ReadAt::Latest,
                    |_| true,
                )
                .map(|p| p.items.is_empty())
                .unwrap_or(true)
            });
            if empty && s.delete("namespaces", &ns).is_ok() {
                changed = true;
            }
        }
        let rv = s.current_rv();
        drop(s);
        if changed {
            self.wake("namespaces", rv);
        }
    }

    /// Writes `obj` over the stored object as the server itself does (no strategy, no
    /// validation), provided the stored resourceVersion is still the one `obj` carries
    /// (409 otherwise). Bindings and the eviction's condition go this way.
    ///
    /// # Errors
    /// 404, 409.
    pub(crate) fn store_replace(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let mut s = self.lock();
        let key = r.key(ns, name);
        let cur = s
            .get(r.storage, &key)
            .ok_or_else(|| ApiError::not_found(r, name))?;
        let want = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !want.is_empty() && want != cur.rv().to_string() {
            return Err(ApiError::conflict(r, name, ApiError::OPTIMISTIC_LOCK));
        }
        let out = s
            .update(r.storage, &key, obj)
            .map_err(|e| store_err(r, name, e))?
            .value();
        let rv = s.current_rv();
        drop(s);
        self.wake(r.storage, rv);
        Ok(out)
    }

    /// [`Api::store_replace`] for a pod's binding.
    pub(crate) fn replace_pod_binding(
        &self,
        r: &'static Resource,
        ns: &str,
        name: &str,
        pod: Value,
    ) -> Result<Value, ApiError> {
        self.store_replace(r, ns, name, pod)
    }

    /// Every pod's `(namespace, name)`.
    pub fn pod_names(&self) -> Vec<(String, String)> {
        self.with_store(|s| {
            s.list("pods", "", None, 0, ReadAt::Latest, |_| true)
                .map(|p| {
                    p.items
                        .iter()
                        .map(|(_, o)| (o.namespace().to_string(), o.name().to_string()))
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// The labels of served resources by storage, for tests and diagnostics.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        self.with_store(|s| {
            RESOURCES
                .iter()
                .map(|r| (r.storage, s.len(r.storage)))
                .collect()
        })
    }
}

fn m_remove(v: &mut Value, key: &str) {
    meta::meta_mut(v).remove(key);
}

/// The `Scheduled` Event the scheduler writes when it binds `pod` to `node`: `Normal`,
/// `Successfully assigned NS/NAME to NODE`, reported by `default-scheduler` with action
/// `Binding` and an eventTime (no count, no first/last timestamps: an events.k8s.io/v1 event).
pub fn scheduled_event(pod: &Value, node: &str, now: jiff::Timestamp) -> Value {
    let ns = meta::namespace(pod);
    let name = meta::name(pod);
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.{:x}", now.as_nanosecond()), "namespace": ns, "uid": meta::new_uid(), "creationTimestamp": meta::time_string(now)},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": name, "uid": meta::uid(pod), "apiVersion": "v1", "resourceVersion": pod.pointer("/metadata/resourceVersion").cloned().unwrap_or_default()},
        "reason": "Scheduled",
        "message": format!("Successfully assigned {ns}/{name} to {node}"),
        "source": {},
        "firstTimestamp": null, "lastTimestamp": null,
        "type": "Normal",
        "eventTime": meta::micro_time_string(now),
        "action": "Binding",
        "reportingComponent": "default-scheduler",
        "reportingInstance": format!("default-scheduler-{node}"),
    })
}
