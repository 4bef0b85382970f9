//! Cluster access as kubectl does it, for every podgrace verb that reads live objects (`why`,
//! `explain`, `lint`, `lag`): which kubeconfig, context and namespace, in kubectl's order, and
//! API failures worded as kubectl words them; the objects themselves ([`resources`],
//! [`read`], [`workloads`]) and the nodes' kubelet settings ([`configz`]).
//!
//! Which configuration (client-go's `clientcmd` loading rules, as kubectl applies them):
//! 1. `--kubeconfig FILE` (a missing file is an error: `stat FILE: no such file or
//!    directory`);
//! 2. else `KUBECONFIG` (a list of files, merged; missing ones skipped);
//! 3. else `~/.kube/config` when it exists;
//! 4. else the in-cluster config (the service account's token and CA, when
//!    `KUBERNETES_SERVICE_HOST` is set);
//! 5. else `http://localhost:8080`, as kubectl falls back to (and then fails to connect).
//!
//! `--context` picks a context of the file (`context was not found for specified context:
//! NAME` otherwise); the namespace is `-n`, else the context's, else `default`; `-A` reads
//! every namespace.
//!
//! Built on `kube` (its `Kubeconfig` and `Config`); nothing here is special to `podgrace serve`.

#![forbid(unsafe_code)]

pub mod configz;
pub mod read;
pub mod resources;
pub mod safety;
pub mod workloads;

use std::path::{Path, PathBuf};

use kube::config::{Config, KubeConfigOptions, Kubeconfig, KubeconfigError};

/// Where to connect, as kubectl's flags say it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterOptions {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `-n/--namespace`.
    pub namespace: Option<String>,
    /// `-A/--all-namespaces`.
    pub all_namespaces: bool,
}

/// A client for one cluster, with the namespace to use.
#[derive(Clone)]
pub struct Cluster {
    /// The kube client for the context's server and credentials.
    pub client: kube::Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// The API server's URL, as configured.
    pub server: String,
    /// `-A`: lists cover every namespace.
    pub all_namespaces: bool,
    /// The kubeconfig context in use (`--context`, else the current context); `None` for the
    /// in-cluster configuration and the `localhost:8080` fallback.
    pub context: Option<String>,
}

/// A failure to reach or read the cluster. `Display` is the line kubectl prints for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// `--kubeconfig` names a file that does not exist.
    #[error("error: stat {}: no such file or directory", .0.display())]
    KubeconfigMissing(PathBuf),
    /// The kubeconfig cannot be read or parsed.
    #[error("error: error loading config file \"{}\": {message}", path.display())]
    KubeconfigInvalid {
        /// The kubeconfig file.
        path: PathBuf,
        /// Why it cannot be read or parsed.
        message: String,
    },
    /// `--context` names no context of the kubeconfig.
    #[error("Error in configuration: context was not found for specified context: {0}")]
    ContextNotFound(String),
    /// Another problem of the configuration (a user or cluster the context names is missing,
    /// a certificate that cannot be read...).
    #[error("Error in configuration: {0}")]
    Configuration(String),
    /// The server refused the connection (`HOST:PORT`).
    #[error(
        "The connection to the server {0} was refused - did you specify the right host or port?"
    )]
    Refused(String),
    /// Any other transport failure (DNS, TLS, a timeout).
    #[error("Unable to connect to the server: {0}")]
    Unreachable(String),
    /// The client cannot be set up from a configuration that loaded (`unable to load root
    /// certificates: unable to parse bytes as PEM block`), printed after `error: ` as kubectl
    /// prints it.
    #[error("error: {0}")]
    Client(String),
    /// A namespace no request can carry (`-n a/b`), refused before any request as kubectl
    /// refuses it ([`resources::path_segment_problems`]).
    #[error("error: invalid namespace {0:?}: [{1}]")]
    InvalidNamespace(String, String),
    /// 401.
    #[error("error: You must be logged in to the server (Unauthorized)")]
    Unauthorized,
    /// Any other API error: kube-apiserver's `Status` reason and message (`Forbidden`,
    /// `NotFound`, ...), as `Error from server (REASON): MESSAGE`.
    #[error("Error from server ({reason}): {message}")]
    Api {
        /// The HTTP status code (`Status.code`).
        code: u16,
        /// `Status.reason` (`Forbidden`, `NotFound`, ...).
        reason: String,
        /// `Status.message`.
        message: String,
    },
}

impl ClusterError {
    /// The exit code for it: 3 when the machine or network failed (no connection), 2 for
    /// everything the user can fix in their input (configuration, credentials, a name).
    pub fn exit_code(&self) -> u8 {
        match self {
            ClusterError::Refused(_) | ClusterError::Unreachable(_) => 3,
            _ => 2,
        }
    }

    /// Whether it is the API's 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClusterError::Api { code: 404, .. })
    }
}

fn kubeconfig_error(path: &Path, e: KubeconfigError) -> ClusterError {
    match e {
        KubeconfigError::ReadConfig(io, p) if io.kind() == std::io::ErrorKind::NotFound => {
            ClusterError::KubeconfigMissing(p)
        }
        KubeconfigError::ReadConfig(io, p) => ClusterError::KubeconfigInvalid {
            path: p,
            message: io.to_string(),
        },
        KubeconfigError::Parse(e) => ClusterError::KubeconfigInvalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        },
        other => ClusterError::Configuration(other.to_string()),
    }
}

/// Reads one kubeconfig file; an empty `current-context` is none, as client-go's merge reads
/// an empty string as unset (a later file's then applies).
fn read_kubeconfig(p: &Path) -> Result<Kubeconfig, ClusterError> {
    let mut k = Kubeconfig::read_from(p).map_err(|e| kubeconfig_error(p, e))?;
    if k.current_context.as_deref() == Some("") {
        k.current_context = None;
    }
    Ok(k)
}

fn home_kubeconfig() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(".kube").join("config");
    p.exists().then_some(p)
}

/// Loads the kubeconfig as kubectl would (see the crate documentation): `Ok(None)` when there
/// is none at all (then the in-cluster config or localhost:8080 applies).
///
/// # Errors
/// [`ClusterError::KubeconfigMissing`] for a `--kubeconfig` that does not exist,
/// [`ClusterError::KubeconfigInvalid`] for one that cannot be read or parsed.
pub fn load_kubeconfig(opts: &ClusterOptions) -> Result<Option<Kubeconfig>, ClusterError> {
    if let Some(p) = &opts.kubeconfig {
        return read_kubeconfig(p).map(Some);
    }
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return merged(&v);
    }
    home_kubeconfig().map(|p| read_kubeconfig(&p)).transpose()
}

/// The files of a `KUBECONFIG` list merged as client-go merges them: the first file that sets
/// a value wins (an empty one sets nothing), missing files are skipped; `None` when none
/// exists.
fn merged(list: &std::ffi::OsStr) -> Result<Option<Kubeconfig>, ClusterError> {
    let mut merged: Option<Kubeconfig> = None;
    for p in std::env::split_paths(list).filter(|p| p.exists()) {
        let k = read_kubeconfig(&p)?;
        merged = Some(match merged {
            None => k,
            Some(m) => m
                .merge(k)
                .map_err(|e| ClusterError::Configuration(e.to_string()))?,
        });
    }
    Ok(merged)
}

/// A client for the cluster `opts` names.
///
/// # Errors
/// The configuration's errors ([`load_kubeconfig`], [`ClusterError::ContextNotFound`],
/// [`ClusterError::Configuration`]); no request is made here, so an unreachable server shows
/// on the first call ([`api_error`]).
pub async fn connect(opts: &ClusterOptions) -> Result<Cluster, ClusterError> {
    let mut context = None;
    // A kubeconfig with nothing in it is no kubeconfig (client-go's `IsEmptyConfig`).
    let loaded = load_kubeconfig(opts)?.filter(|kc| {
        !(kc.clusters.is_empty() && kc.contexts.is_empty() && kc.auth_infos.is_empty())
            || kc.current_context.as_deref().is_some_and(|c| !c.is_empty())
    });
    let config = match loaded {
        Some(kc) => {
            if let Some(c) = &opts.context {
                if !kc.contexts.iter().any(|n| &n.name == c) {
                    return Err(ClusterError::ContextNotFound(c.clone()));
                }
            }
            context = opts
                .context
                .clone()
                .or_else(|| kc.current_context.clone())
                .filter(|c| !c.is_empty());
            let Some(name) = context.clone() else {
                // No current context: client-go's defaults, the server localhost:8080.
                return cluster_of(localhost(), opts, None);
            };
            if !kc.contexts.iter().any(|n| n.name == name) {
                return Err(ClusterError::ContextNotFound(name));
            }
            let ko = KubeConfigOptions {
                context: Some(name),
                ..KubeConfigOptions::default()
            };
            let namespace = kc
                .contexts
                .iter()
                .find(|n| Some(&n.name) == context.as_ref())
                .and_then(|n| n.context.as_ref())
                .and_then(|c| c.namespace.clone());
            match Config::from_custom_kubeconfig(kc, &ko).await {
                Ok(c) => c,
                // A context whose cluster is not in the file: client-go fills in its default
                // cluster, localhost:8080 (the context's namespace stays).
                Err(KubeconfigError::LoadClusterOfContext(_)) => {
                    let mut c = localhost();
                    if let Some(ns) = namespace {
                        c.default_namespace = ns;
                    }
                    c
                }
                Err(KubeconfigError::LoadContext(c)) => {
                    return Err(ClusterError::ContextNotFound(c))
                }
                Err(other) => return Err(ClusterError::Configuration(other.to_string())),
            }
        }
        None if opts.context.is_some() => {
            return Err(ClusterError::ContextNotFound(
                opts.context.clone().unwrap_or_default(),
            ))
        }
        None => Config::incluster().unwrap_or_else(|_| localhost()),
    };
    // kube-rs reads certificate-authority-data that holds no certificate as no roots at all,
    // and every TLS handshake then fails; kubectl refuses it before connecting.
    if config.root_cert.as_ref().is_some_and(Vec::is_empty) {
        return Err(ClusterError::Client(
            "unable to load root certificates: unable to parse bytes as PEM block".into(),
        ));
    }
    cluster_of(config, opts, context)
}

/// client-go's default server when nothing names one.
fn localhost() -> Config {
    Config::new(http::Uri::from_static("http://localhost:8080"))
}

/// The [`Cluster`] of a configuration.
fn cluster_of(
    config: Config,
    opts: &ClusterOptions,
    context: Option<String>,
) -> Result<Cluster, ClusterError> {
    let server = config.cluster_url.to_string();
    // An empty -n is no -n, as kubectl reads it.
    let namespace = opts
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| config.default_namespace.clone());
    if !opts.all_namespaces {
        if let Some(why) = resources::path_segment_problems(&namespace) {
            return Err(ClusterError::InvalidNamespace(namespace, why));
        }
    }
    let client =
        kube::Client::try_from(config).map_err(|e| ClusterError::Configuration(e.to_string()))?;
    Ok(Cluster {
        client,
        namespace,
        server,
        all_namespaces: opts.all_namespaces,
        context,
    })
}

/// `host:port` of a server URL (`https://127.0.0.1:6443/` → `127.0.0.1:6443`), as kubectl
/// names it in `The connection to the server ... was refused`.
fn host_port(server: &str) -> String {
    let rest = server.split_once("://").map_or(server, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// `e`, from a request to `server`, as the [`ClusterError`] kubectl would print.
pub fn api_error(server: &str, e: kube::Error) -> ClusterError {
    match e {
        kube::Error::Api(s) if s.code == 401 => ClusterError::Unauthorized,
        kube::Error::Api(s) => ClusterError::Api {
            code: s.code,
            reason: if s.reason.is_empty() {
                "Unknown".into()
            } else {
                s.reason.clone()
            },
            message: s.message.clone(),
        },
        other => {
            // Walk the sources: a refused connection is worded apart.
            let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&other);
            let mut last = other.to_string();
            while let Some(s) = src {
                if let Some(io) = s.downcast_ref::<std::io::Error>() {
                    if io.kind() == std::io::ErrorKind::ConnectionRefused {
                        return ClusterError::Refused(host_port(server));
                    }
                    // A TLS failure is an io::Error holding rustls' error, which its
                    // `source()` skips.
                    if let Some(words) = tls_error(io).and_then(go_tls_words) {
                        return ClusterError::Unreachable(words);
                    }
                }
                last = s.to_string();
                src = s.source();
            }
            ClusterError::Unreachable(last)
        }
    }
}

/// The rustls error an io::Error holds, through io::Errors wrapped around it (hyper-util wraps
/// the connector's).
fn tls_error(io: &std::io::Error) -> Option<&rustls::Error> {
    let inner = io.get_ref()?;
    match inner.downcast_ref::<rustls::Error>() {
        Some(t) => Some(t),
        None => tls_error(inner.downcast_ref::<std::io::Error>()?),
    }
}

/// A certificate failure as Go's crypto/tls words it in kubectl's `Unable to connect to the
/// server: ...`, where there is one word for word (`x509: certificate signed by unknown
/// authority`); `None` leaves rustls' own words.
fn go_tls_words(e: &rustls::Error) -> Option<String> {
    use rustls::CertificateError as C;
    let x509 = match e {
        rustls::Error::InvalidCertificate(C::UnknownIssuer) => {
            "certificate signed by unknown authority"
        }
        _ => return None,
    };
    Some(format!("tls: failed to verify certificate: x509: {x509}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_kubeconfig_is_worded_as_kubectl_words_it() {
        let opts = ClusterOptions {
            kubeconfig: Some("/nonexistent/podgrace-kubeconfig".into()),
            ..ClusterOptions::default()
        };
        let e = load_kubeconfig(&opts).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error: stat /nonexistent/podgrace-kubeconfig: no such file or directory"
        );
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn api_statuses_are_printed_as_kubectl_prints_them() {
        let status = |code: u16, reason: &str, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                status: None,
                code,
                message: message.into(),
                metadata: None,
                reason: reason.into(),
                details: None,
            }))
        };
        let forbidden = "pods \"web\" is forbidden: User \"system:serviceaccount:default:default\" cannot get resource \"pods\" in API group \"\" in the namespace \"default\"";
        let e = api_error("https://h:6443", status(403, "Forbidden", forbidden));
        assert_eq!(
            e.to_string(),
            format!("Error from server (Forbidden): {forbidden}")
        );
        assert_eq!(e.exit_code(), 2);
        let e = api_error(
            "https://h:6443",
            status(404, "NotFound", "pods \"web\" not found"),
        );
        assert!(e.is_not_found());
        assert_eq!(
            e.to_string(),
            "Error from server (NotFound): pods \"web\" not found"
        );
        let e = api_error(
            "https://h:6443",
            status(401, "Unauthorized", "Unauthorized"),
        );
        assert_eq!(
            e.to_string(),
            "error: You must be logged in to the server (Unauthorized)"
        );
    }

    /// `connect` of a kubeconfig `text`: the server and namespace, or the error's line.
    fn connect_text(tag: &str, text: &str) -> Result<(String, String), String> {
        let dir =
            std::env::temp_dir().join(format!("podgrace-cluster-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("kc");
        std::fs::write(&p, text).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let r = rt
            .block_on(connect(&ClusterOptions {
                kubeconfig: Some(p),
                ..ClusterOptions::default()
            }))
            .map(|c| (c.server, c.namespace))
            .map_err(|e| e.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    #[test]
    fn what_client_go_fills_in_is_filled_in() {
        // Checked against kubectl 1.32 (/usr/bin/kubectl): each of these is `The connection to the server
        // localhost:8080 was refused`, and a CA that is no PEM is refused before connecting.
        let local = Ok(("http://localhost:8080/".to_string(), "default".to_string()));
        assert_eq!(connect_text("empty", ""), local);
        let cfg = |current: &str, cluster: &str, ca: &str| {
            format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n{ca}contexts:\n- name: x\n  context:\n    cluster: {cluster}\n    user: u\n    namespace: team\ncurrent-context: {current}\nusers:\n- name: u\n  user:\n    token: abc\n")
        };
        assert_eq!(connect_text("nocurrent", &cfg("\"\"", "c", "")), local);
        assert_eq!(
            connect_text("nocluster", &cfg("x", "gone", "")),
            Ok(("http://localhost:8080/".to_string(), "team".to_string()))
        );
        assert_eq!(
            connect_text(
                "badca",
                &cfg(
                    "x",
                    "c",
                    "    certificate-authority-data: bm90IGEgY2VydA==\n"
                )
            ),
            Err(
                "error: unable to load root certificates: unable to parse bytes as PEM block"
                    .into()
            )
        );
        assert_eq!(
            connect_text("ok", &cfg("x", "c", "")),
            Ok(("https://127.0.0.1:6443/".to_string(), "team".to_string()))
        );
    }

    #[test]
    fn kubeconfig_lists_merge_as_client_go_merges_them() {
        let dir =
            std::env::temp_dir().join(format!("podgrace-cluster-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty");
        std::fs::write(
            &empty,
            "apiVersion: v1\nkind: Config\ncurrent-context: \"\"\n",
        )
        .unwrap();
        let second = dir.join("second");
        std::fs::write(
            &second,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\ncontexts:\n- name: second\n  context:\n    cluster: c\n    user: u\ncurrent-context: second\nusers:\n- name: u\n  user:\n    token: abc\n",
        )
        .unwrap();
        let list = std::env::join_paths([dir.join("missing"), empty, second]).unwrap();
        let k = merged(&list).unwrap().unwrap();
        assert_eq!(k.current_context.as_deref(), Some("second"));
        assert_eq!(k.contexts.len(), 1);
        assert!(
            merged(&std::env::join_paths([dir.join("missing")]).unwrap())
                .unwrap()
                .is_none()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn host_port_of_a_server() {
        assert_eq!(host_port("https://127.0.0.1:6443/"), "127.0.0.1:6443");
        assert_eq!(host_port("http://localhost:8080"), "localhost:8080");
    }

    #[test]
    fn an_unknown_context_is_refused() {
        let dir = std::env::temp_dir().join(format!("podgrace-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("kc");
        std::fs::write(
            &p,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: team\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc\n",
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = rt
            .block_on(connect(&ClusterOptions {
                kubeconfig: Some(p.clone()),
                context: Some("nope".into()),
                ..ClusterOptions::default()
            }))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "Error in configuration: context was not found for specified context: nope"
        );
        // The context's namespace, unless -n says otherwise.
        let c = rt
            .block_on(connect(&ClusterOptions {
                kubeconfig: Some(p.clone()),
                ..ClusterOptions::default()
            }))
            .ok()
            .unwrap();
        assert_eq!(c.namespace, "team");
        // An empty -n is none; one no request can carry is refused as kubectl refuses it.
        let with_ns = |ns: &str, all_namespaces: bool| {
            rt.block_on(connect(&ClusterOptions {
                kubeconfig: Some(p.clone()),
                namespace: Some(ns.to_string()),
                all_namespaces,
                ..ClusterOptions::default()
            }))
            .map(|c| c.namespace)
            .map_err(|e| e.to_string())
        };
        assert_eq!(with_ns("", false), Ok("team".to_string()));
        assert_eq!(
            with_ns("a/b", false),
            Err(r#"error: invalid namespace "a/b": [may not contain '/']"#.to_string())
        );
        assert!(with_ns("a/b", true).is_ok());
        assert_eq!(c.server, "https://127.0.0.1:1/");
        // Nothing listens on port 1: kubectl's "refused" line.
        let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(c.client.clone(), "default");
        let e = rt.block_on(api.get("x")).unwrap_err();
        assert_eq!(
            api_error(&c.server, e).to_string(),
            "The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?"
        );
        std::fs::write(&p, "garbage: [\n").unwrap();
        let e = load_kubeconfig(&ClusterOptions {
            kubeconfig: Some(p.clone()),
            ..ClusterOptions::default()
        })
        .unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "error: error loading config file \"{}\": ",
                p.display()
            )),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
