//! The termination rules, one module per upstream owner.
//!
//! Each public function is pure and names, in its docstring, the upstream file and function it
//! reproduces and the Kubernetes versions it holds for. Times are whole seconds (`i64`) unless a
//! name says otherwise (`_ms` for milliseconds).

pub mod apiserver;
pub mod backoff;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod eviction;
pub mod garbagecollector;
pub mod kuberuntime;
pub mod labels;
pub mod latency;
pub mod nodeshutdown;
pub mod podstatus;
pub mod podutil;
pub mod podworker;
pub mod printers;
pub mod prober;
pub mod qos;
pub mod quantity;
pub mod replicaset;
pub mod resources;
pub mod restart;
pub mod runtime;
pub mod scheduling;
pub mod validation;
