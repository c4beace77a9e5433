//! Interpreter semantics: convolution and pooling. Geometry (auto_pad, ceil_mode, defaults)
//! is resolved in `nn/geom.rs`; the kernels live in burnc-runtime
//! (`kernels::{conv, im2col, pool}`).
pub(crate) mod conv;
pub(crate) mod geom;
mod pool;

use super::util::{arg, one, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;

pub fn eval(op: &Op, args: &[Option<RtValue>], n_outputs: usize) -> OpResult {
    let x = arg(args, 0)?;
    match op {
        Op::Conv { window, group } => one(conv::conv(x, arg(args, 1)?, opt_arg(args, 2)?, window, *group)?),
        Op::ConvTranspose { window, group, output_padding, output_shape } => {
            one(conv::conv_transpose(x, arg(args, 1)?, opt_arg(args, 2)?, window, *group, output_padding, output_shape)?)
        }
        Op::Pool { kind, window, storage_order } => {
            let (y, ind) = pool::pool(x, *kind, window, *storage_order != 0, n_outputs > 1)?;
            Ok(std::iter::once(y).chain(ind).map(RtValue::Tensor).collect())
        }
        Op::GlobalPool { kind } => one(pool::global_pool(x, *kind)?),
        _ => Err(format!("{} is not a convolution or pooling op", op.name())),
    }
}
