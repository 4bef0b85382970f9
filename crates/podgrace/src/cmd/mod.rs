//! One module per verb.

pub mod conformance;
pub mod explain;
pub mod lint;
pub mod run;
