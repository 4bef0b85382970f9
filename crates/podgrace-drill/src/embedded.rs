//! `podgrace serve` inside the drill's own process: the API (no listener), the local kubelet on
//! the process runtime, the controllers (ReplicaSet, Deployment, garbage collector,
//! EndpointSlice, disruption, node lifecycle, scheduler) and, when asked, kube-proxy following
//! the EndpointSlices with the drill's endpoint lag, every one a client of the API over an
//! in-process `kube::Client` as they are of serve's. A drill that goes through the API applies
//! its manifest with [`EmbeddedServe::client`] and performs its scenarios as API calls, exactly
//! as it would against a cluster reached through a kubeconfig.
//!
//! The ClusterIPs and NodePorts it allocates are claimed on this machine
//! ([`podgrace_api::claims`]), so that it never collides with a `podgrace serve` or another
//! drill running at the same time.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use podgrace_api::options::DeleteOptions;
use podgrace_api::{Api, ApiConfig};
use podgrace_core::rules::latency::RuntimeLatencies;
use podgrace_core::KubeVersion;
use podgrace_kubelet::{KubeletConfig, KubeletHandle, PodReport, ReportSink, RuntimeSource};
use podgrace_node::runtime::{ProcessRuntime, StopEvent};
use podgrace_node::sandbox::NetworkConfig;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::endpoints::LagModel;
use crate::kubeproxy::{KubeProxy, KubeProxyConfig};

/// The embedded serve's settings.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// The node's name (serve's `--node-name`).
    pub node_name: String,
    /// The release whose API server, controllers and kubelet are reproduced.
    pub version: KubeVersion,
    /// The host-only range the pods take their addresses from.
    pub network: NetworkConfig,
    /// kube-proxy's endpoint lag (serve's `--endpoint-lag`).
    pub lag: LagModel,
    /// The directory of the machine's Service address claims
    /// ([`podgrace_api::claims::DEFAULT_DIR`] for every serve on this machine).
    pub claims_dir: PathBuf,
    /// A real runtime's measured latencies added around every stop and restart of the process
    /// runtime (`drill --runtime-latency`), drawn by a sampler seeded with the `u64`; `None`:
    /// none. Every pod runs on one process runtime (its output is not collected).
    pub latencies: Option<(&'static RuntimeLatencies, u64)>,
    /// Whether serve's kube-proxy runs (listeners on the Services' ClusterIPs and NodePorts,
    /// following the EndpointSlices with `lag`). A drill says no: its own proxy follows the
    /// same EndpointSlices with the lag and records every request, and a second proxy would
    /// only claim addresses and follow the slices again.
    pub kube_proxy: bool,
}

/// A pod's run report as the embedded kubelet's pod worker ended it, with the runtime's
/// measured stop events of every container instance it ran (read before its sandbox was
/// removed, which forgets them).
#[derive(Debug, Clone)]
pub struct EndedPod {
    /// The pod worker's report (kill start, container terminations, sandbox).
    pub report: PodReport,
    /// The runtime's stop events by container id (stop requested, stop signal, SIGKILL, exit),
    /// in order.
    pub stop_events: HashMap<String, Vec<StopEvent>>,
}

/// The ended pods by `(namespace, name)`, and a wake-up for each new one.
#[derive(Default)]
struct Ended {
    pods: Mutex<HashMap<(String, String), EndedPod>>,
    changed: Notify,
}

/// One process runtime for every pod (as the drill's own path has one per drill), kept so
/// that a pod's stop events can be read when it ends (container ids are the runtime's own).
#[derive(Clone)]
struct KeptRuntimes {
    runtime: Arc<ProcessRuntime>,
}

impl KeptRuntimes {
    fn new(network: NetworkConfig, latencies: Option<(&'static RuntimeLatencies, u64)>) -> Self {
        let (rt, mut output) = ProcessRuntime::new(network);
        let rt = match latencies {
            Some((l, seed)) => rt.with_latencies(*l, seed),
            None => rt,
        };
        // The pods' own output is not part of the drill's report.
        tokio::spawn(async move { while output.recv().await.is_some() {} });
        KeptRuntimes {
            runtime: Arc::new(rt),
        }
    }

    fn stop_events(&self, id: &str) -> Vec<StopEvent> {
        self.runtime.stop_events(id)
    }
}

impl RuntimeSource for KeptRuntimes {
    type Runtime = ProcessRuntime;
    fn for_pod(&self) -> podgrace_kubelet::runtimes::PodRuntime<ProcessRuntime> {
        (self.runtime.clone(), None)
    }
}

/// Why the embedded serve could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// The claims directory or the container log directory could not be created.
    #[error("{what}: {source}")]
    Io {
        /// What was being created.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A running embedded serve; [`EmbeddedServe::shutdown`] ends it (dropping it stops
/// kube-proxy and the controllers, and the pods die with podgrace).
pub struct EmbeddedServe {
    api: Api,
    client: kube::Client,
    kubelet: Option<KubeletHandle>,
    controllers: Mutex<JoinSet<()>>,
    kube_proxy: Option<KubeProxy>,
    log_dir: PathBuf,
    ended: Arc<Ended>,
}

impl EmbeddedServe {
    /// Starts the API, the kubelet, the controllers and kube-proxy on the current tokio
    /// runtime.
    ///
    /// # Errors
    /// [`EmbeddedError::Io`] when the container log directory or the claims directory cannot
    /// be created.
    pub fn start(config: &EmbeddedConfig) -> Result<EmbeddedServe, EmbeddedError> {
        let log_dir = std::env::temp_dir().join(format!(
            "podgrace-drill-{}-{}-pods",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&log_dir).map_err(|source| EmbeddedError::Io {
            what: format!("creating {}", log_dir.display()),
            source,
        })?;
        let claims =
            podgrace_api::claims::Claims::new(&config.claims_dir, IpAddr::V4(Ipv4Addr::LOCALHOST))
                .map_err(|source| EmbeddedError::Io {
                    what: format!("creating {}", config.claims_dir.display()),
                    source,
                })?;
        let api = Api::new(ApiConfig {
            node_name: config.node_name.clone(),
            kube_version: config.version,
            log_dir: Some(log_dir.clone()),
            claims: Some(Arc::new(claims)),
            ..ApiConfig::default()
        });
        let runtimes = KeptRuntimes::new(config.network.clone(), config.latencies);
        let ended = Arc::new(Ended::default());
        let sink = {
            let (ended, runtimes) = (ended.clone(), runtimes.clone());
            ReportSink(Arc::new(move |ns: &str, name: &str, report: &PodReport| {
                let stop_events = report
                    .containers
                    .iter()
                    .flat_map(|c| c.terminations.iter())
                    .map(|t| {
                        (
                            t.container_id.clone(),
                            runtimes.stop_events(&t.container_id),
                        )
                    })
                    .collect();
                if let Ok(mut pods) = ended.pods.lock() {
                    pods.insert(
                        (ns.to_string(), name.to_string()),
                        EndedPod {
                            report: report.clone(),
                            stop_events,
                        },
                    );
                }
                ended.changed.notify_waiters();
            }))
        };
        let kubelet = podgrace_kubelet::start(
            podgrace_api::in_process_client(api.clone()),
            runtimes,
            KubeletConfig {
                node_name: config.node_name.clone(),
                version: config.version,
                log_dir: Some(log_dir.clone()),
                reports: Some(sink),
                ..KubeletConfig::default()
            },
        );
        let controllers = podgrace_controllers::spawn(
            podgrace_api::in_process_client(api.clone()),
            podgrace_controllers::Config {
                kube_version: config.version,
            },
        );
        let kube_proxy = config.kube_proxy.then(|| {
            KubeProxy::start(
                podgrace_api::in_process_client(api.clone()),
                KubeProxyConfig {
                    lag: config.lag,
                    node_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
                    records: None,
                },
            )
        });
        Ok(EmbeddedServe {
            client: podgrace_api::in_process_client(api.clone()),
            api,
            kubelet: Some(kubelet),
            controllers: Mutex::new(controllers),
            kube_proxy,
            log_dir,
            ended,
        })
    }

    /// A client of the embedded API (namespace `default`), as a kubeconfig's would be.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The API itself, for what a client cannot see (its store's pod names).
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// Stops the controllers (nothing replaces a deleted pod any more, no EndpointSlice
    /// changes); the API, the kubelet and kube-proxy go on.
    pub fn stop_controllers(&self) {
        if let Ok(mut c) = self.controllers.lock() {
            c.abort_all();
        }
    }

    /// The run report of pod `namespace/name` once its pod worker has ended it (the pod
    /// terminated), waiting at most `within`; `None` if it has not ended by then.
    pub async fn ended_pod(
        &self,
        namespace: &str,
        name: &str,
        within: Duration,
    ) -> Option<EndedPod> {
        let key = (namespace.to_string(), name.to_string());
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.ended.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(p) = self
                .ended
                .pods
                .lock()
                .ok()
                .and_then(|p| p.get(&key).cloned())
            {
                return Some(p);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }

    /// Ends the serve as `podgrace serve` ends on SIGTERM: the controllers stop (so that no
    /// replacement pod is created), every pod is deleted with its own grace period and awaited
    /// (at most `within`; then the kubelet kills what is left with its minimum grace), and the
    /// kubelet and kube-proxy stop.
    pub async fn shutdown(mut self, within: Duration) {
        self.stop_controllers();
        let pods = podgrace_api::resource::find("", "v1", "pods").expect("pods are served");
        for (ns, name) in self.api.pod_names() {
            let opts = DeleteOptions {
                present: true,
                ..Default::default()
            };
            let _ = self.api.delete(pods, &ns, &name, &opts);
        }
        let api = self.api.clone();
        let _ = tokio::time::timeout(within, async move {
            let mut changes = api.subscribe("pods");
            while !api.pod_names().is_empty() {
                let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
            }
        })
        .await;
        if let Some(k) = self.kubelet.take() {
            k.shutdown().await;
        }
        self.kube_proxy.take();
    }
}

impl Drop for EmbeddedServe {
    fn drop(&mut self) {
        self.stop_controllers();
        let _ = std::fs::remove_dir_all(&self.log_dir);
    }
}

/// Numbers the embedded serves of one process (their log directories).
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
