//! podgrace layer 3: the drill's building blocks.
//!
//! * [`endpoints`]: the Service's endpoints as a proxy sees them (EndpointSlice conditions,
//!   endpoint lag L, kube-proxy's terminating fallback, round robin).
//! * [`proxy`]: the local service proxy (HTTP/1.1, h2c, TCP) that models kube-proxy.
//! * [`load`]: open-loop load at a fixed rate, latency from the intended send time.
//! * [`streams`]: long-lived h2c server-streaming requests (data and idle) held open in a drill.
//! * [`demoapp`]: the demo HTTP server whose SIGTERM behaviour is chosen by flags.
//! * [`report`]: failures by kind and phase, latency percentiles, attribution to pods.
//! * [`html`]: the self-contained HTML report with its SVG timeline.
//! * [`scenario`]: a whole drill: replicas run by the local kubelet, the proxy, the load, a
//!   rollout, delete or eviction, and the attributed report.

pub mod demoapp;
pub mod endpoints;
pub mod html;
pub mod load;
pub mod proxy;
pub mod report;
pub mod scenario;
pub mod streams;
