//! podgrace-api: a single-node Kubernetes API server, layer 3 ("api") of podgrace.
pub mod store;
