//! One module per verb.

pub mod conformance;
pub mod demo_app;
pub mod drill;
pub mod explain;
pub mod lint;
pub mod run;
