//! Adapter for the endpoint address validation vectors (`ValidateEndpointIP`).

use super::{Check, VectorError};
use crate::manifest::FieldErrorKind;
use crate::rules::validation::validate_endpoint_ip;
use serde_json::Value;

pub(super) fn validate_endpoint_ip_vector(c: &mut Check<'_>) -> Result<(), VectorError> {
    let ip = c.input_str("ip")?;
    let errs = validate_endpoint_ip(ip, "ip");
    c.expect_eq("valid", errs.is_empty());
    let details: Vec<Value> = errs
        .iter()
        .map(|e| match &e.kind {
            FieldErrorKind::Invalid { detail, .. } => Value::String(detail.clone()),
            other => Value::String(other.to_string()),
        })
        .collect();
    c.expect_eq("errors", details.clone());
    c.expect_eq("derived_errors", details);
    Ok(())
}
