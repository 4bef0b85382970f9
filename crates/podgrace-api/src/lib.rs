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

pub mod meta;
pub mod patch;
pub mod registry;
pub mod resource;
pub mod selector;
pub mod status;
pub mod store;
pub mod table;

/// Go's `%q` of a string, as upstream messages quote values.
pub(crate) fn status_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}
