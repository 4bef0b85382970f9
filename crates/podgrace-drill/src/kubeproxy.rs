//! kube-proxy for `podgrace serve`: every Service of the API gets listeners on this machine,
//! its ClusterIP:port (the ClusterIPs are loopback addresses, so they need no setup) and, for a
//! NodePort or LoadBalancer Service, `node_address:nodePort`, each served by the drill's
//! user-space [`Proxy`] in [`Mode::Tcp`] (an L4 splice that pins every client connection to one
//! endpoint, as conntrack does). The endpoints follow the EndpointSlices from the API (a
//! kube-runtime watcher and its cache), reach the proxy with the endpoint lag ([`LagModel`]:
//! fixed, or kube-proxy's bounded-frequency sync) and are filtered by kube-proxy's rule (ready,
//! else serving-and-terminating: `CategorizeEndpoints`, in [`crate::endpoints::Routes`]).
//!
//! Upstream: `pkg/proxy/endpointslicecache.go` (`endpointInfoByServicePort`, `addEndpoints`:
//! a slice port with no name or no port is ignored; an endpoint's first address is used; a nil
//! `ready` or `serving` condition counts as true, a nil `terminating` as false; of two endpoints
//! with one address the non-terminating one is kept), `pkg/proxy/serviceport.go` (headless and
//! ExternalName Services get no rules), `pkg/proxy/topology.go` (`CategorizeEndpoints`).
//! Kubernetes 1.26 and later (the terminating fallback is GA in 1.28, on by default from 1.26).
//!
//! Every proxied connection and every pinning is recorded ([`ProxyRecord`],
//! [`PinnedConnection`]) and handed, every [`RECORD_INTERVAL`], to the configured writer as
//! JSON lines ([`RecordLine`]); nothing is kept beyond that interval, so a long-running serve
//! holds no growing history.
//!
//! Not modelled: UDP and SCTP ports (skipped), the Local traffic policies, session affinity,
//! topology hints, externalIPs and load balancer ingress addresses, and the kernel's DNAT (the
//! drill's [`crate::proxy::netfilter`] mode); a pod's own network namespace does not reach the
//! ClusterIPs (they are this machine's loopback).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::Store;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::endpoints::{Endpoint, EndpointSet, EndpointsHandle, LagModel};
use crate::proxy::{Mode, PinnedConnection, Proxy, ProxyConfig, ProxyRecord};

/// The label that ties an EndpointSlice to its Service (`discovery.LabelServiceName`).
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";

/// How often the records of the listeners are handed to the writer: 100 ms.
pub const RECORD_INTERVAL: Duration = Duration::from_millis(100);

/// How long a listener waits for a pod to answer its connect: 30 s. Through kube-proxy's DNAT
/// the client's own SYN reaches the pod and only the client's timeout applies; the splice has
/// to connect itself, and waits long enough that a SYN the pod's full accept queue dropped (and
/// the kernel sends again after 1 s, then 3 s ...) still gets through, as the client's would.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// kube-proxy's settings.
pub struct KubeProxyConfig {
    /// How endpoint changes reach the listeners (`serve --endpoint-lag`).
    pub lag: LagModel,
    /// The address NodePorts listen on (kube-proxy's `--nodeport-addresses`; serve: 127.0.0.1).
    pub node_address: IpAddr,
    /// Where the records go, as JSON lines ([`RecordLine`]); `None` drops them.
    pub records: Option<Box<dyn Write + Send>>,
}

/// One JSON line of the record stream: the epoch first, then connections and pinnings as the
/// listeners record them. Times of records are since the epoch (`Duration`s as serde writes
/// them: `{"secs":S,"nanos":N}`).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "kind"
)]
pub enum RecordLine {
    /// The instant record times count from, as the wall clock read it: microseconds since the
    /// Unix epoch.
    Epoch {
        /// Microseconds since the Unix epoch.
        unix_micros: u128,
    },
    /// A proxied client connection (its request, for a client that sends one per connection).
    Connection {
        /// `namespace/name` of the Service.
        service: String,
        /// The Service port's name (`""` when unnamed).
        port: String,
        /// The listener it came in on (ClusterIP:port or node address:nodePort).
        listen: SocketAddr,
        /// The request or connection, as the proxy recorded it.
        #[serde(flatten)]
        record: ProxyRecord,
    },
    /// A client connection pinned to a pod (the conntrack entry).
    Pinned {
        /// `namespace/name` of the Service.
        service: String,
        /// The Service port's name (`""` when unnamed).
        port: String,
        /// The listener it came in on (ClusterIP:port or node address:nodePort).
        listen: SocketAddr,
        /// The pod it is pinned to, and since when.
        #[serde(flatten)]
        pinned: PinnedConnection,
    },
}

/// A running kube-proxy; dropping it stops every listener.
pub struct KubeProxy {
    task: JoinHandle<()>,
}

impl KubeProxy {
    /// Starts following the Services and EndpointSlices `client` sees (all namespaces). Must be
    /// called within a tokio runtime.
    pub fn start(client: kube::Client, config: KubeProxyConfig) -> KubeProxy {
        let task = tokio::spawn(run(client, config));
        KubeProxy { task }
    }
}

impl Drop for KubeProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One Service port: `namespace/name` and the port's name and protocol
/// (kube-proxy's `ServicePortName`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct PortKey {
    service: String,
    port: String,
    protocol: String,
}

/// A Service port's state: its endpoint feed and the listeners that share its view.
struct PortState {
    endpoints: EndpointsHandle,
    published: Option<EndpointSet>,
    listeners: BTreeMap<SocketAddr, Proxy>,
}

async fn run(client: kube::Client, mut config: KubeProxyConfig) {
    let wake = Arc::new(Notify::new());
    let services: Store<Service> = podgrace_controllers::informer::start(&client, wake.clone());
    let slices: Store<EndpointSlice> = podgrace_controllers::informer::start(&client, wake.clone());
    let epoch = Instant::now();
    let unix_micros = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    write_line(&mut config.records, &RecordLine::Epoch { unix_micros });
    let _ = services.wait_until_ready().await;
    let _ = slices.wait_until_ready().await;
    let mut ports: BTreeMap<PortKey, PortState> = BTreeMap::new();
    // Listen addresses that could not be bound, logged once each.
    let mut failed: BTreeMap<SocketAddr, String> = BTreeMap::new();
    let mut tick = tokio::time::interval(RECORD_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let wanted = desired(&services.state(), &slices.state(), config.node_address);
        // Ports gone: their records first, then their listeners.
        let gone: Vec<PortKey> = ports
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .cloned()
            .collect();
        for k in gone {
            if let Some(st) = ports.remove(&k) {
                drain(&k, &st, &mut config.records);
            }
        }
        for (key, want) in wanted {
            let st = ports.entry(key.clone()).or_insert_with(|| PortState {
                endpoints: EndpointsHandle::with_model(config.lag, None),
                published: None,
                listeners: BTreeMap::new(),
            });
            if st.published.as_ref() != Some(&want.endpoints) {
                st.endpoints.publish(want.endpoints.clone());
                st.published = Some(want.endpoints);
            }
            let stale: Vec<SocketAddr> = st
                .listeners
                .keys()
                .filter(|a| !want.listen.contains(a))
                .copied()
                .collect();
            for a in stale {
                drain_one(&key, a, st.listeners.get(&a), &mut config.records);
                st.listeners.remove(&a);
            }
            for addr in want.listen {
                if st.listeners.contains_key(&addr) {
                    continue;
                }
                let mut pc = ProxyConfig::new(Mode::Tcp);
                pc.epoch = epoch;
                pc.connect_timeout = CONNECT_TIMEOUT;
                match Proxy::start(addr, pc, st.endpoints.view()).await {
                    Ok(p) => {
                        failed.remove(&addr);
                        st.listeners.insert(addr, p);
                    }
                    Err(e) => {
                        let msg = e.to_string();
                        if failed.get(&addr) != Some(&msg) {
                            tracing::warn!(
                                service = %key.service,
                                port = %key.port,
                                "kube-proxy: {msg}"
                            );
                            failed.insert(addr, msg);
                        }
                    }
                }
            }
        }
        for (k, st) in &ports {
            drain(k, st, &mut config.records);
        }
        if let Some(w) = config.records.as_mut() {
            let _ = w.flush();
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tick.tick() => {}
        }
    }
}

/// What one Service port should have: its listen addresses and endpoints.
#[derive(Debug, Default, PartialEq, Eq)]
struct Wanted {
    listen: Vec<SocketAddr>,
    endpoints: EndpointSet,
}

/// The Service ports kube-proxy serves and what each should have.
fn desired(
    services: &[Arc<Service>],
    slices: &[Arc<EndpointSlice>],
    node_address: IpAddr,
) -> BTreeMap<PortKey, Wanted> {
    let mut out = BTreeMap::new();
    for svc in services {
        let ns = svc.metadata.namespace.clone().unwrap_or_default();
        let name = svc.metadata.name.clone().unwrap_or_default();
        let Some(spec) = &svc.spec else { continue };
        let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
        if kind == "ExternalName" {
            continue;
        }
        let ips: Vec<IpAddr> = match (&spec.cluster_ips, &spec.cluster_ip) {
            (Some(ips), _) if !ips.is_empty() => {
                ips.iter().filter_map(|s| s.parse().ok()).collect()
            }
            (_, Some(ip)) => ip.parse().ok().into_iter().collect(),
            _ => Vec::new(),
        };
        // Headless ("None") Services get no rules.
        if ips.is_empty() {
            continue;
        }
        let own: Vec<&EndpointSlice> = slices
            .iter()
            .filter(|s| {
                s.metadata.namespace.as_deref() == Some(ns.as_str())
                    && s.metadata.deletion_timestamp.is_none()
                    && s.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(LABEL_SERVICE_NAME))
                        == Some(&name)
            })
            .map(|s| s.as_ref())
            .collect();
        let node_port = matches!(kind, "NodePort" | "LoadBalancer");
        for sp in spec.ports.as_deref().unwrap_or(&[]) {
            let protocol = sp.protocol.clone().unwrap_or_else(|| "TCP".into());
            if protocol != "TCP" {
                continue;
            }
            let Ok(port) = u16::try_from(sp.port) else {
                continue;
            };
            let port_name = sp.name.clone().unwrap_or_default();
            let mut listen: Vec<SocketAddr> =
                ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
            if node_port {
                if let Some(np) = sp.node_port.and_then(|n| u16::try_from(n).ok()) {
                    if np != 0 {
                        listen.push(SocketAddr::new(node_address, np));
                    }
                }
            }
            out.insert(
                PortKey {
                    service: format!("{ns}/{name}"),
                    port: port_name.clone(),
                    protocol: protocol.clone(),
                },
                Wanted {
                    listen,
                    endpoints: endpoints_of(&own, &port_name, &protocol),
                },
            );
        }
    }
    out
}

/// The endpoints of one Service port from its Service's slices, as kube-proxy's
/// `endpointInfoByServicePort` and `addEndpoints` build them, in a stable order (by address).
pub fn endpoints_of(slices: &[&EndpointSlice], port_name: &str, protocol: &str) -> EndpointSet {
    let mut by_address: BTreeMap<SocketAddr, Endpoint> = BTreeMap::new();
    for slice in slices {
        for p in slice.ports.as_deref().unwrap_or(&[]) {
            // A port with no name, or no (or a zero) port number, is ignored.
            let Some(name) = &p.name else { continue };
            let Some(number) = p.port.filter(|n| *n != 0) else {
                continue;
            };
            if name != port_name || p.protocol.as_deref().unwrap_or("TCP") != protocol {
                continue;
            }
            let Ok(number) = u16::try_from(number) else {
                continue;
            };
            for ep in slice.endpoints.iter().flatten() {
                let Some(ip) = ep.addresses.first().and_then(|a| a.parse::<IpAddr>().ok()) else {
                    continue;
                };
                let c = ep.conditions.clone().unwrap_or_default();
                let terminating = c.terminating == Some(true);
                let address = SocketAddr::new(ip, number);
                let pod = ep
                    .target_ref
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_else(|| ip.to_string());
                let e = Endpoint {
                    pod,
                    address,
                    ready: c.ready.unwrap_or(true),
                    serving: c.serving.unwrap_or(true),
                    terminating,
                };
                // Of two endpoints with one address, the one not terminating wins.
                if !by_address.contains_key(&address) || !terminating {
                    by_address.insert(address, e);
                }
            }
        }
    }
    by_address.into_values().collect()
}

fn write_line(w: &mut Option<Box<dyn Write + Send>>, line: &RecordLine) {
    if let Some(w) = w.as_mut() {
        if let Ok(s) = serde_json::to_string(line) {
            let _ = writeln!(w, "{s}");
        }
    }
}

/// Hands every listener's records of port `k` to the writer.
fn drain(k: &PortKey, st: &PortState, w: &mut Option<Box<dyn Write + Send>>) {
    for (addr, p) in &st.listeners {
        drain_one(k, *addr, Some(p), w);
    }
}

fn drain_one(
    k: &PortKey,
    listen: SocketAddr,
    p: Option<&Proxy>,
    w: &mut Option<Box<dyn Write + Send>>,
) {
    let Some(p) = p else { return };
    let (records, pinned) = p.take_records();
    if w.is_none() {
        return;
    }
    for pinned in pinned {
        write_line(
            w,
            &RecordLine::Pinned {
                service: k.service.clone(),
                port: k.port.clone(),
                listen,
                pinned,
            },
        );
    }
    for record in records {
        write_line(
            w,
            &RecordLine::Connection {
                service: k.service.clone(),
                port: k.port.clone(),
                listen,
                record,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ObjectReference, ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::{
        Endpoint as SliceEndpoint, EndpointConditions, EndpointPort,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn slice(
        name: &str,
        svc: &str,
        ports: Vec<EndpointPort>,
        eps: Vec<SliceEndpoint>,
    ) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: Some([(LABEL_SERVICE_NAME.to_string(), svc.to_string())].into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: Some(eps),
            ports: Some(ports),
        }
    }

    fn port(name: Option<&str>, n: Option<i32>) -> EndpointPort {
        EndpointPort {
            name: name.map(str::to_string),
            port: n,
            protocol: Some("TCP".into()),
            app_protocol: None,
        }
    }

    fn ep(
        pod: &str,
        ip: &str,
        c: Option<(Option<bool>, Option<bool>, Option<bool>)>,
    ) -> SliceEndpoint {
        SliceEndpoint {
            addresses: vec![ip.into()],
            conditions: c.map(|(ready, serving, terminating)| EndpointConditions {
                ready,
                serving,
                terminating,
            }),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                name: Some(pod.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// `addEndpoints`: nil ready/serving count as true and nil terminating as false; a port with
    /// a nil name or port is ignored; of two endpoints with one address the non-terminating wins.
    #[test]
    fn endpoints_follow_kube_proxys_endpointslice_cache() {
        let s1 = slice(
            "web-a",
            "web",
            vec![port(Some("http"), Some(8080)), port(None, Some(9))],
            vec![
                ep("a", "10.0.0.1", None),
                ep("b", "10.0.0.2", Some((Some(false), Some(true), Some(true)))),
                ep(
                    "old",
                    "10.0.0.3",
                    Some((Some(false), Some(false), Some(true))),
                ),
            ],
        );
        let s2 = slice(
            "web-b",
            "web",
            vec![port(Some("http"), Some(8080)), port(Some("http"), None)],
            vec![ep("new", "10.0.0.3", Some((Some(true), None, None)))],
        );
        let set = endpoints_of(&[&s1, &s2], "http", "TCP");
        let got: Vec<(&str, String, bool, bool, bool)> = set
            .iter()
            .map(|e| {
                (
                    e.pod.as_str(),
                    e.address.to_string(),
                    e.ready,
                    e.serving,
                    e.terminating,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", "10.0.0.1:8080".to_string(), true, true, false),
                ("b", "10.0.0.2:8080".to_string(), false, true, true),
                ("new", "10.0.0.3:8080".to_string(), true, true, false),
            ]
        );
        // The unnamed port of s1 has a nil name: nothing for port "".
        assert!(endpoints_of(&[&s1], "", "TCP").is_empty());
        // The same address terminating after a running one does not replace it.
        let set = endpoints_of(&[&s2, &s1], "http", "TCP");
        assert_eq!(set[2].pod, "new");
    }

    fn service(kind: &str, cluster_ip: &str, node_port: Option<i32>) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(kind.into()),
                cluster_ip: Some(cluster_ip.into()),
                cluster_ips: Some(vec![cluster_ip.into()]),
                ports: Some(vec![
                    ServicePort {
                        name: Some("http".into()),
                        port: 80,
                        node_port,
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    },
                    ServicePort {
                        name: Some("dns".into()),
                        port: 53,
                        protocol: Some("UDP".into()),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn listeners_on_the_cluster_ip_and_the_node_port_of_tcp_ports_only() {
        let node = IpAddr::from([127, 0, 0, 1]);
        let s = slice(
            "web-a",
            "web",
            vec![port(Some("http"), Some(8080))],
            vec![ep("a", "10.0.0.1", None)],
        );
        let slices = vec![Arc::new(s)];
        let w = desired(
            &[Arc::new(service("NodePort", "127.96.0.10", Some(30080)))],
            &slices,
            node,
        );
        assert_eq!(w.len(), 1, "the UDP port is skipped");
        let (k, v) = w.iter().next().unwrap();
        assert_eq!(
            (k.service.as_str(), k.port.as_str()),
            ("default/web", "http")
        );
        assert_eq!(
            v.listen,
            [
                "127.96.0.10:80".parse::<SocketAddr>().unwrap(),
                "127.0.0.1:30080".parse().unwrap()
            ]
        );
        assert_eq!(v.endpoints.len(), 1);
        let w = desired(
            &[Arc::new(service("ClusterIP", "127.96.0.10", None))],
            &slices,
            node,
        );
        assert_eq!(w.values().next().unwrap().listen.len(), 1);
        let w = desired(
            &[Arc::new(service("ClusterIP", "None", None))],
            &slices,
            node,
        );
        assert!(w.is_empty(), "headless");
        let w = desired(
            &[Arc::new(service("ExternalName", "", None))],
            &slices,
            node,
        );
        assert!(w.is_empty());
    }
}
