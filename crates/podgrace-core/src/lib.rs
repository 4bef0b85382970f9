//! podgrace-core: the decisions upstream Kubernetes makes when a pod is terminated, without I/O.
//!
//! Layer 1 of podgrace (see `design.md`): nothing here reads a clock, touches a file or spawns a
//! task. Every function takes time as an argument, so each rule can be checked against the
//! upstream unit-test vectors (`conformance`) and composed into timelines (`timeline`).
//!
//! - [`manifest`]: YAML into `k8s-openapi` types, converted once into a [`plan::PodPlan`].
//! - [`rules`]: one module per upstream owner (apiserver, pod worker, kuberuntime, eviction,
//!   node shutdown, endpoints, container runtime, the kubelet's pod status, the API server's
//!   table printer and address validation), plus the measured latencies of a real runtime.
//! - [`seconds`]: exact times (milliseconds in an `i128`) for timelines.
//! - [`timeline`]: the rules composed into one pod's termination timeline for one trigger.
//! - [`lint`]: termination pitfalls in manifests, with stable rule ids.
//! - [`conformance`]: evaluation of upstream-derived test vectors against the rules.
//! - [`init`]: `podgrace init`'s signal forwarding, mapping, drain delay and exit code.
//! - [`forensics`]: `podgrace why`: a past termination read from a pod's status and events.
#![forbid(unsafe_code)]

pub mod conformance;
pub mod features;
pub mod forensics;
pub mod init;
pub mod lint;
pub mod manifest;
pub mod plan;
pub mod rules;
pub mod seconds;
pub mod timeline;
pub mod version;

pub use seconds::Seconds;
pub use version::KubeVersion;
