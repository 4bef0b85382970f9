//! The Kubernetes Container Runtime Interface, version 1 (`runtime.v1`), as generated Rust types
//! and tonic clients ([`v1::runtime_service_client::RuntimeServiceClient`],
//! [`v1::image_service_client::ImageServiceClient`]).
//!
//! Generated at build time from `proto/runtime/v1/api.proto`, kept verbatim from upstream
//! Kubernetes (`staging/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto`, the v1.36 tree; it
//! has `ContainerConfig.stop_signal` of KEP-4960, which the `k8s-cri` crate's older copy
//! lacks). Fields unknown to an older runtime are ignored by it, as protobuf does.
#![forbid(unsafe_code)]

/// `runtime.v1`: the generated messages, enums and clients, documented by the proto file's own
/// comments where it has them (prost copies them) and not otherwise.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("runtime.v1");
}
