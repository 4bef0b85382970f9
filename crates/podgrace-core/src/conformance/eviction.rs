use super::{Check, VectorError};

pub(super) fn evaluate(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}
