//! Interpreter semantics: convolution and pooling. Geometry (auto_pad, ceil_mode, defaults)
//! is resolved in `ops/window.rs`; the kernels live in burnc-runtime
//! (`kernels::{conv, im2col, pool}`).
pub(crate) mod conv;

use super::util::{arg, one, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{Act, Op};
use crate::tensor::Tensor;

/// FusedConv (generated code only, `passes::fuse`), evaluated as the ops it replaces, one after
/// another, so the interpreter can run a fused graph too: the convolution, the per-channel
/// multiply and add, the residual, the activation.
pub fn eval_fused(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    let Op::FusedConv { window, group, act } = op else { return Err(format!("{} is not a fused convolution", op.name())) };
    let x = arg(args, 0)?;
    let y = RtValue::Tensor(conv::conv(x, arg(args, 1)?, opt_arg(args, 2)?, window, *group)?);
    let y = mul_add(y, opt_arg(args, 4)?, opt_arg(args, 5)?)?;
    let y = match args.get(3).cloned().flatten() {
        Some(r) => binary(crate::ir::BinaryOp::Add, y, r)?,
        None => y,
    };
    Ok(vec![activate(y, *act)?])
}

fn binary(b: crate::ir::BinaryOp, p: RtValue, q: RtValue) -> Result<RtValue, String> {
    let mut r = super::elementwise::eval(&Op::Binary(b), &[Some(p), Some(q)], 1)?;
    r.pop().ok_or_else(|| "no result".to_string())
}

fn unary(u: crate::ir::UnaryOp, p: RtValue) -> Result<RtValue, String> {
    let mut r = super::elementwise::eval(&Op::Unary(u), &[Some(p)], 1)?;
    r.pop().ok_or_else(|| "no result".to_string())
}

/// `y · mul[c] + add[c]` along axis 1 of `y` (an `[N, C, …]` tensor), each step as its
/// broadcast Mul or Add would compute it.
pub(crate) fn mul_add(mut y: RtValue, mul: Option<&Tensor>, add: Option<&Tensor>) -> Result<RtValue, String> {
    let rank = y.as_tensor()?.shape.len();
    // Per-channel constants are [C]: as [C, 1, …] they broadcast along axis 1.
    let per_channel = |t: &Tensor| {
        let mut shape = vec![t.shape.iter().product::<usize>()];
        shape.resize(rank.saturating_sub(1).max(1), 1);
        RtValue::Tensor(Tensor::new(shape, t.data.clone()))
    };
    if let Some(m) = mul {
        y = binary(crate::ir::BinaryOp::Mul, y, per_channel(m))?;
    }
    if let Some(a) = add {
        y = binary(crate::ir::BinaryOp::Add, y, per_channel(a))?;
    }
    Ok(y)
}

/// A fused activation, as the unfused graph's nodes compute it.
pub(crate) fn activate(y: RtValue, act: Act) -> Result<RtValue, String> {
    use crate::ir::{BinaryOp, UnaryOp};
    let scalar = |v: f32, like: &RtValue| -> Result<RtValue, String> {
        let RtValue::Tensor(t) = like else { return Err("fused op on a non-tensor".into()) };
        // The fuse pass only makes activations with constants for f32 and f64 outputs.
        match t.dtype() {
            crate::ir::DType::F32 => Ok(RtValue::Tensor(Tensor::new(vec![], crate::tensor::Data::F32(vec![v])))),
            crate::ir::DType::F64 => Ok(RtValue::Tensor(Tensor::new(vec![], crate::tensor::Data::F64(vec![v as f64])))),
            d => Err(format!("Clip activation on {d}")),
        }
    };
    Ok(match act {
        Act::None => y,
        Act::Relu => unary(UnaryOp::Relu, y)?,
        Act::LeakyRelu(alpha) => unary(UnaryOp::LeakyRelu { alpha }, y)?,
        Act::Clip(lo, hi) => {
            let (lo, hi) = (scalar(lo, &y)?, scalar(hi, &y)?);
            let y = binary(BinaryOp::Max, y, lo)?;
            binary(BinaryOp::Min, y, hi)?
        }
        Act::HardSwish => unary(UnaryOp::HardSwish, y)?,
        Act::Sigmoid => unary(UnaryOp::Sigmoid, y)?,
        Act::Silu => {
            let s = unary(UnaryOp::Sigmoid, y.clone())?;
            binary(BinaryOp::Mul, y, s)?
        }
    })
}

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    let x = arg(args, 0)?;
    match op {
        Op::Conv { window, group } => one(conv::conv(x, arg(args, 1)?, opt_arg(args, 2)?, window, *group)?),
        _ => Err(format!("{} is not a convolution", op.name())),
    }
}
