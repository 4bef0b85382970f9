//! Text rendering, one module per verb: what the verb's `cmd` module computed, as people read
//! it. The JSON documents are the libraries' typed contracts, serialized as they are.

pub mod conformance;
pub mod drill;
pub mod explain;
pub mod lag;
pub mod lint;
pub mod prestop_wait;
pub mod run;
pub mod serve;
pub mod why;
