//! podgrace-api: a single-node Kubernetes API server, layer 3 ("api") of podgrace
//! (`design.md`): above the node layer, below the drill and the CLI.
//!
//! * [`store`]: the pure store (one global resourceVersion, a bounded history per resource,
//!   exact lists rebuilt from it, watch event conversion).
//! * [`selector`]: label and field selectors.
//! * [`resource`]: the served resources.
//! * [`status`]: errors as `metav1.Status`, worded as kube-apiserver words them.
//! * [`meta`]: object metadata, names, uids, times.
//! * [`registry`]: decoding with field validation, defaulting, validation through
//!   podgrace-core, Events between their two API versions.
//! * [`patch`]: JSON, merge and strategic merge patches.
//! * [`table`]: server-side printing with kubectl's columns.
//! * [`options`]: list, watch and delete options; continue tokens.
//! * [`api`]: the operations (create, get, list, update, patch, delete) on the store.
//! * [`watch`]: watch streams from the store's history, bookmarks, timeouts, 410.
//! * [`http`]: the REST layer as a tower service; [`discovery`], [`openapi`], [`logs`].
//! * [`tls`], [`kubeconfig`], [`listener`]: the closed-by-default listener: TLS with the
//!   server's own CA, a bearer token, a kubeconfig of mode 0600.
//!
//! For in-process use (the drill's embedded serve) build [`Api`] and use
//! [`http::router`] as a tower `Service`: `kube::Client::new(service, "default")` talks to
//! it as to a real cluster, with no listener.
#![forbid(unsafe_code)]

pub mod api;
pub mod claims;
pub mod discovery;
pub mod eviction;
pub mod http;
pub mod kinds;
pub mod kubeconfig;
pub mod listener;
pub mod logs;
pub mod meta;
pub mod openapi;
pub mod openapi_v2;
pub mod options;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod resource;
pub mod selector;
pub mod status;
pub mod store;
pub mod subresource;
pub mod table;
pub mod tls;
pub mod watch;

pub use api::{Api, ApiConfig};

/// A kube-rs client of `api` in this process: requests go straight to [`http::router`] (no
/// listener, no TLS, no token), with the same client code as against a real cluster.
pub fn in_process_client(api: Api) -> kube::Client {
    let svc = tower::ServiceBuilder::new()
        .map_request(|req: ::http::Request<kube::client::Body>| req.map(axum::body::Body::new))
        .service(http::router(api));
    kube::Client::new(svc, "default")
}

/// Go's `%q` of a string, as upstream messages quote values.
pub(crate) fn status_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}
