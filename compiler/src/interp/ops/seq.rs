//! Interpreter semantics: seq family.
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;

pub fn eval(op: &Op, _args: &[Option<RtValue>], _n_outputs: usize) -> OpResult {
    Err(format!("{} is not implemented in the interpreter yet", op.name()))
}
