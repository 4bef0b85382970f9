use super::{Check, VectorError};

pub(super) fn before_delete(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

pub(super) fn store_delete(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

pub(super) fn check_graceful_delete(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

pub(super) fn kubectl_delete(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

