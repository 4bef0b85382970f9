use super::{Check, VectorError};

pub(super) fn set_termination_grace_period(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

pub(super) fn kill_container_prestop(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

pub(super) fn kill_container_error(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

pub(super) fn wait_for_turn(c: &mut Check<'_>) -> Result<(), VectorError> {
    Err(c.bad("function", "not implemented yet"))
}

