//! Interpreter semantics: batch normalization. Float math runs in f32 (f32, f16,
//! bf16 inputs) or f64; the kernels live in burnc-runtime (`kernels::{norm, softmax}`).
pub(crate) mod float;
pub(crate) mod local;
pub(crate) mod stats;

use super::util::arg;
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;

pub fn eval(op: &Op, args: &[Option<RtValue>], n_outputs: usize) -> OpResult {
    let x = arg(args, 0)?;
    match op {
        Op::BatchNorm { epsilon } => {
            let (scale, bias, mean, var) = (arg(args, 1)?, arg(args, 2)?, arg(args, 3)?, arg(args, 4)?);
            let y = stats::batch_norm(x, scale, bias, mean, var, *epsilon as f64)?;
            // Old opsets may declare running/saved statistics outputs in inference mode:
            // pass the running statistics through.
            let mut outs = vec![RtValue::Tensor(y)];
            for i in 1..n_outputs {
                outs.push(RtValue::Tensor(if i % 2 == 1 { mean.clone() } else { var.clone() }));
            }
            Ok(outs)
        }
        _ => Err(format!("{} is not a normalization op", op.name())),
    }
}
