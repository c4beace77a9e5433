//! Reductions: the gradient is dY broadcast back over the reduced axes, divided by the count
//! for the mean, times the local derivative for the others (2x, sign x, x/y, exp(x - y), …).
use crate::ops::view::Unsqueeze;
use super::builder::{const_ints, norm_axis, B, R};
use super::{dy0, input, output};
use crate::ir::{BinaryOp, Node, Op, ReduceOp, UnaryOp, ValueId};
use crate::ops::IntoOp;

pub fn rule(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], _need: &[bool]) -> R<Vec<Option<ValueId>>> {
    let dy = dy0(dys)?;
    let x = input(n, 0)?;
    match &n.op {
        Op::Reduce { op, axes, keepdims, noop_with_empty_axes } => {
            let axes = match axes {
                Some(a) => a.clone(),
                None => match n.inputs.get(1).copied().flatten() {
                    None => vec![],
                    Some(v) => const_ints(b.g, Some(v)).ok_or("the axes input must be a constant to differentiate")?,
                },
            };
            let mut out = vec![None; n.inputs.len()];
            out[0] = Some(reduce(b, *op, x, output(n, 0)?, dy, axes, *keepdims, *noop_with_empty_axes)?);
            Ok(out)
        }
        other => Err(format!("no gradient rule for {}", other.name())),
    }
}

#[allow(clippy::too_many_arguments)]
fn reduce(b: &mut B<'_>, op: ReduceOp, x: ValueId, y: ValueId, dy: ValueId, axes: Vec<i64>, keepdims: bool, noop: bool) -> R<ValueId> {
    let r = b.rank(x)?;
    if axes.is_empty() && noop {
        // No reduction: the op is the identity for Sum/Mean/Max/Min, elementwise otherwise.
        if !matches!(op, ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min) {
            return Err(format!("Reduce{op:?} with empty axes and noop_with_empty_axes"));
        }
        return Ok(dy);
    }
    let axes: Vec<i64> = if axes.is_empty() {
        (0..r as i64).collect()
    } else {
        let mut v = axes.iter().map(|&a| norm_axis(a, r).map(|a| a as i64)).collect::<R<Vec<_>>>()?;
        v.sort_unstable();
        v.dedup();
        v
    };
    let scaled = match op {
        ReduceOp::Mean => {
            let dt = b.dtype(x)?;
            let dims = b.dims(x)?;
            let count: Option<usize> = axes.iter().map(|&a| dims[a as usize].fixed()).product();
            let k = match count {
                Some(c) => b.scalar(1.0 / c as f64, dt)?,
                None => {
                    // Unknown reduced dims: count = size(x) / size(y) at run time.
                    let sx = b.node(crate::ops::dim_values::Size.op(), &[x])?;
                    let sy = b.node(crate::ops::dim_values::Size.op(), &[dy])?;
                    let sx = b.node(crate::ops::cast::op(dt, false), &[sx])?;
                    let sy = b.node(crate::ops::cast::op(dt, false), &[sy])?;
                    b.div(sy, sx)?
                }
            };
            b.mul(dy, k)?
        }
        _ => dy,
    };
    // Restore the reduced axes as size-1 dims (Unsqueeze's axes index the output, x's rank),
    // then broadcast over them.
    let s = b.shape_of(x)?;
    let kept = if keepdims { scaled } else { b.node(Unsqueeze { axes: Some(axes.clone()) }.op(), &[scaled])? };
    let dyx = b.node(Op::Expand, &[kept, s])?;
    if matches!(op, ReduceOp::Sum | ReduceOp::Mean) {
        return Ok(dyx);
    }
    // The other reductions' local derivative, from x and y broadcast back to x's shape.
    let dt = b.dtype(x)?;
    let yk = if keepdims { y } else { b.node(Unsqueeze { axes: Some(axes.clone()) }.op(), &[y])? };
    let d = match op {
        ReduceOp::SumSquare => {
            let two = b.scalar(2.0, dt)?;
            b.mul(x, two)?
        }
        ReduceOp::L1 => b.un(UnaryOp::Sign, x)?,
        // x / ‖x‖
        ReduceOp::L2 => b.div(x, yk)?,
        // softmax over the reduced axes: exp(x - y)
        ReduceOp::LogSumExp => {
            let t = b.sub(x, yk)?;
            b.un(UnaryOp::Exp, t)?
        }
        // 1 / Σx = exp(-y)
        ReduceOp::LogSum => {
            let t = b.neg(yk)?;
            b.un(UnaryOp::Exp, t)?
        }
        // Π/x (undefined where an element is 0)
        ReduceOp::Prod => b.div(yk, x)?,
        // Shared evenly among the elements equal to the extreme, as PyTorch's amax/amin do.
        ReduceOp::Max | ReduceOp::Min => {
            let eq = b.bin(BinaryOp::Equal, x, yk)?;
            let m = b.node(crate::ops::cast::op(dt, false), &[eq])?;
            let cnt = b.reduce_sum(m, axes, true)?;
            b.div(m, cnt)?
        }
        ReduceOp::Sum | ReduceOp::Mean => unreachable!("returned above"),
    };
    b.mul(dyx, d)
}
