//! Interpreter semantics of each core op, grouped by family. Each family module exposes
//! `eval(op, args, n_outputs) -> OpResult`; kernels come from burnc-runtime.
pub(crate) mod cast;
mod control;
pub(crate) mod elementwise;
pub(crate) mod extra;
pub(crate) mod grid;
pub(crate) mod index;
pub(crate) mod loss;
pub(crate) mod nn;
pub(crate) mod norm;
pub(crate) mod qint;
pub(crate) mod quant;
mod seq;
pub(crate) mod shape;
pub(crate) mod util;

use super::{Frame, RtValue};
use crate::ir::Op;

/// Result of one op: its outputs, or the reason it failed (the caller adds the node).
pub type OpResult = Result<Vec<RtValue>, String>;

/// A data-movement op (Reshape, Gather, Concat, Transpose, Slice …) on string tensors: the
/// strings are numbered (0 is the empty string, which fills), the op moves the numbers, and
/// output 0 is read back as strings. Every movement op thus moves strings too.
fn move_strings(op: &Op, args: Vec<Option<RtValue>>, n_outputs: usize, frame: &Frame<'_>) -> OpResult {
    use crate::tensor::{Data, Tensor};
    let mut pool = vec![String::new()];
    let mut numbered = Vec::with_capacity(args.len());
    for a in args {
        numbered.push(match a {
            Some(RtValue::Tensor(Tensor { shape, data: Data::Str(v) })) => {
                let ids = (pool.len() as i64..).take(v.len()).collect();
                pool.extend(v);
                Some(RtValue::Tensor(Tensor::new(shape, Data::I64(ids))))
            }
            a => a,
        });
    }
    let mut out = eval_op(op, numbered, n_outputs, frame)?;
    if let Some(RtValue::Tensor(t)) = out.first_mut() {
        let ids = t.to_i64_vec().ok_or("string ids lost their type")?;
        let v = ids.iter().map(|&i| pool.get(i as usize).cloned().ok_or("string ids out of range")).collect::<Result<Vec<_>, _>>()?;
        t.data = Data::Str(v);
    }
    Ok(out)
}

pub fn eval_op(op: &Op, args: Vec<Option<RtValue>>, n_outputs: usize, frame: &Frame<'_>) -> OpResult {
    if crate::codegen::emit::data::is_movement(op) && args.iter().any(|a| matches!(a, Some(RtValue::Tensor(t)) if t.dtype() == crate::ir::DType::Str)) {
        return move_strings(op, args, n_outputs, frame);
    }
    match op {
        Op::Def(d) => {
            let ins = args.iter().map(|a| a.as_ref().map(RtValue::as_tensor).transpose()).collect::<Result<Vec<_>, _>>()?;
            Ok(d.eval(&ins)?.into_iter().map(RtValue::Tensor).collect())
        }
        // Identity passes sequences and optionals through unchanged.
        Op::Unary(crate::ir::UnaryOp::Identity) if matches!(args.first(), Some(Some(v)) if !matches!(v, RtValue::Tensor(_))) => {
            Ok(vec![args.into_iter().next().flatten().ok_or("missing input #0")?])
        }
        Op::Unary(_) | Op::Binary(_) => elementwise::eval(op, &args, n_outputs),
        Op::Conv { .. } => nn::eval(op, &args),
        Op::FusedConv { .. } => nn::eval_fused(op, &args),
        Op::Elementwise(p) => elementwise::eval_program(p, &args),
        Op::Gather { .. } => index::eval(op, &args, n_outputs),
        Op::If { .. } | Op::Loop { .. } | Op::Scan { .. } | Op::SequenceMap { .. } => control::eval(op, &args, n_outputs, frame),
        Op::Seq(_) => seq::eval(op, &args, n_outputs),
        _ => shape::eval(op, &args, n_outputs),
    }
}
