//! `podgrace serve` inside the drill's own process: the API (no listener), the local kubelet on
//! the process runtime, the controllers (ReplicaSet, Deployment, garbage collector,
//! EndpointSlice, disruption, node lifecycle, scheduler) and kube-proxy following the
//! EndpointSlices with the drill's endpoint lag, every one a client of the API over an
//! in-process `kube::Client` as they are of serve's. A drill that goes through the API applies
//! its manifest with [`EmbeddedServe::client`] and performs its scenarios as API calls, exactly
//! as it would against a cluster reached through a kubeconfig.
//!
//! The ClusterIPs and NodePorts it allocates are claimed on this machine
//! ([`podgrace_api::claims`]), so that it never collides with a `podgrace serve` or another
//! drill running at the same time.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use podgrace_api::options::DeleteOptions;
use podgrace_api::{Api, ApiConfig};
use podgrace_core::KubeVersion;
use podgrace_kubelet::{KubeletConfig, KubeletHandle, ProcessRuntimes};
use podgrace_node::sandbox::NetworkConfig;
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
    controllers: JoinSet<()>,
    kube_proxy: Option<KubeProxy>,
    log_dir: PathBuf,
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
        let kubelet = podgrace_kubelet::start(
            podgrace_api::in_process_client(api.clone()),
            ProcessRuntimes {
                network: config.network.clone(),
            },
            KubeletConfig {
                node_name: config.node_name.clone(),
                version: config.version,
                log_dir: Some(log_dir.clone()),
                ..KubeletConfig::default()
            },
        );
        let controllers = podgrace_controllers::spawn(
            podgrace_api::in_process_client(api.clone()),
            podgrace_controllers::Config {
                kube_version: config.version,
            },
        );
        let kube_proxy = KubeProxy::start(
            podgrace_api::in_process_client(api.clone()),
            KubeProxyConfig {
                lag: config.lag,
                node_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
                records: None,
            },
        );
        Ok(EmbeddedServe {
            client: podgrace_api::in_process_client(api.clone()),
            api,
            kubelet: Some(kubelet),
            controllers,
            kube_proxy: Some(kube_proxy),
            log_dir,
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

    /// Ends the serve as `podgrace serve` ends on SIGTERM: the controllers stop (so that no
    /// replacement pod is created), every pod is deleted with its own grace period and awaited
    /// (at most `within`; then the kubelet kills what is left with its minimum grace), and the
    /// kubelet and kube-proxy stop.
    pub async fn shutdown(mut self, within: Duration) {
        self.controllers.abort_all();
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
        self.controllers.abort_all();
        let _ = std::fs::remove_dir_all(&self.log_dir);
    }
}

/// Numbers the embedded serves of one process (their log directories).
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
