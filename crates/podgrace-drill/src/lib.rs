//! podgrace layer 3: the drill's building blocks.
//!
//! * [`endpoints`]: the Service's endpoints as a proxy sees them (EndpointSlice conditions,
//!   endpoint lag L, kube-proxy's terminating fallback, round robin).
//! * [`proxy`]: the local service proxy (HTTP/1.1, h2c, TCP) that models kube-proxy.
//! * [`kubeproxy`]: serve's kube-proxy: listeners on every Service's ClusterIP and NodePort,
//!   following the EndpointSlices from the API with the endpoint lag.
//! * [`load`]: open-loop load at a fixed rate, latency from the intended send time.
//! * [`lag`]: `podgrace lag`: a cluster's real endpoint lag, measured by deleting pods whose
//!   preStop keeps them serving, through the Kubernetes API.
//! * [`flags`]: the drill's limits and the checks of its settings, before anything starts.
//! * [`template`]: the pod template's Service port and replicas.
//! * [`demo`]: the built-in demo's plan (its hooks, sleep and load length) and templates.
//! * [`demoapp`]: the demo HTTP server whose SIGTERM behaviour is chosen by flags.
//! * [`streams`]: long-lived server-streaming requests held open through a drill (data streams
//!   and idle ones), as gRPC clients and Envoy hold them.
//! * [`report`]: failures by kind and phase, latency percentiles, attribution to pods.
//! * [`advice`] (uses [`report`], not the other way): what to change, with numbers: the endpoint
//!   race, containers that gave up with work in flight, pods that reached SIGKILL while idle.
//! * [`html`]: the self-contained HTML report with its SVG timeline.
//! * [`sync`]: kube-proxy's bounded-frequency sync as a pure state machine (when an endpoint
//!   change reaches the rules).
//! * [`embedded`]: `podgrace serve` in the drill's own process (API, kubelet, controllers,
//!   kube-proxy), reached through an in-process `kube::Client`.
//! * [`scenario`]: a whole drill: replicas run by the local kubelet, the proxy, the load, a
//!   rollout, delete or eviction, and the attributed report.

pub mod advice;
pub mod demo;
pub mod demoapp;
pub mod embedded;
pub mod endpoints;
pub mod flags;
pub mod html;
pub mod kubeproxy;
pub mod lag;
pub mod load;
pub mod proxy;
pub mod report;
pub mod scenario;
pub mod streams;
pub mod sync;
pub mod template;
