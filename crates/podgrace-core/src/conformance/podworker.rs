use super::{Check, VectorError};

pub(super) fn effective_grace(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

pub(super) fn update_pod(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

pub(super) fn kill_pod_now(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

