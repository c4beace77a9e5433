//! Interpreter semantics: control family.
use super::OpResult;
use crate::interp::{Frame, RtValue};
use crate::ir::Op;

pub fn eval(op: &Op, _args: &[Option<RtValue>], _n_outputs: usize, _frame: &Frame<'_>) -> OpResult {
    Err(format!("{} is not implemented in the interpreter yet", op.name()))
}
