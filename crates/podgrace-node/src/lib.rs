//! podgrace node layer: the local kubelet and container runtime.
//!
//! * [`process`]: spawning container processes (PID 1 of their own PID namespace when
//!   permitted), the one reaper, signalling through pidfds, whole-container kill, exec inside.
//! * [`runtime`]: a CRI-RuntimeService-shaped trait and [`runtime::ProcessRuntime`], which
//!   implements it with containerd's StopContainer semantics.
//! * [`sandbox`]: a pod's network namespace and address.

pub mod process;
pub mod runtime;
pub mod sandbox;
