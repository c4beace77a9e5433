//! Data movement. Reshapes move no data, so the gradient is reshaped back; Transpose is undone
//! by the inverse permutation; Concat's gradient is a Split at the operands' sizes and Split's
//! a Concat; Expand's is summed over the broadcast dims. Slice, Gather, GatherElements, Tile
//! and Pad pick elements, so their gradient scatters dY back,
//! adding where an element was picked twice: the same op applied to an "iota" (each element holding its own flat index) tells
//! where each output element came from, and ScatterElements(add) into zeros puts it there.
//! That reuses the forward op's own index semantics (negative indices, steps, clamping), so
//! the backward cannot disagree with it; with static shapes the index table folds to a constant.
use super::builder::{norm_axis, B, R};
use super::{dy0, dy_or_zeros, input};
use crate::ir::{Node, Op, PadMode, ReduceOp, ScatterReduction, ValueId};
use crate::ops::IntoOp;
use crate::tensor::Tensor;
use crate::ops::scatter::ScatterElements;
use crate::ops::GradCx;

pub fn rule(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], need: &[bool]) -> R<Vec<Option<ValueId>>> {
    let x = input(n, 0)?;
    let dy = dy0(dys)?;
    let mut out = vec![None; n.inputs.len()];
    match &n.op {
        Op::Reshape { .. } => {
            out[0] = Some(b.reshape_like(dy, x)?);
            Ok(out)
        }
        Op::Concat { axis } => concat(b, n, *axis, dy, need),
        // Only the data input is differentiable; starts, indices, repeats are integers.
        Op::Gather { .. } => {
            out[0] = Some(scatter_back(b, n, x, dy, false)?);
            Ok(out)
        }
        // Broadcasting: summed back.
        Op::Expand => {
            out[0] = Some(b.sum_to(dy, x)?);
            Ok(out)
        }
        other => Err(format!("no gradient rule for {}", other.name())),
    }
}

/// Pad's gradient, any mode, through the index table (reflect/edge/wrap pick some elements
/// twice); the constant pad value gets what the padding took: Σdy - Σdx.
pub(crate) fn pad(cx: &mut GradCx, mode: PadMode) -> R<Vec<Option<ValueId>>> {
    let (dy, want_fill) = (cx.dy()?, cx.wants(2));
    let (b, n) = (&mut *cx.b, cx.n);
    let x = input(n, 0)?;
    let mut out = vec![None; n.inputs.len()];
    let dx = scatter_back(b, n, x, dy, true)?;
    if let (Some(cv), true, PadMode::Constant) = (n.inputs.get(2).copied().flatten(), want_fill, mode) {
        let all = b.node(crate::ops::reduce::Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false }.op(), &[dy])?;
        let inner = b.node(crate::ops::reduce::Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false }.op(), &[dx])?;
        let d = b.sub(all, inner)?;
        out[2] = Some(b.reshape_like(d, cv)?);
    }
    out[0] = Some(dx);
    Ok(out)
}

/// Split's gradient: the parts' gradients concatenated back along `axis`; a part nobody used
/// contributes zeros.
pub(crate) fn split(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], axis: i64) -> R<Vec<Option<ValueId>>> {
    let mut parts = Vec::with_capacity(n.outputs.len());
    for k in 0..n.outputs.len() {
        parts.push(dy_or_zeros(b, n, dys, k)?);
    }
    let dx = if parts.len() == 1 { parts[0] } else { b.node(Op::Concat { axis }, &parts)? };
    let mut out = vec![None; n.inputs.len()];
    out[0] = Some(dx);
    Ok(out)
}

/// The gradient of an op that picks elements of input 0 (its other inputs are indices):
/// dY scattered back.
pub(crate) fn picked(cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
    let dy = cx.dy()?;
    let mut out = vec![None; cx.n.inputs.len()];
    out[0] = Some(scatter_back(cx.b, cx.n, input(cx.n, 0)?, dy, false)?);
    Ok(out)
}

fn concat(b: &mut B<'_>, n: &Node, axis: i64, dy: ValueId, need: &[bool]) -> R<Vec<Option<ValueId>>> {
    let ins: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
    if ins.len() != n.inputs.len() {
        return Err("Concat with an omitted input".into());
    }
    let ax = norm_axis(axis, b.rank(dy)?)?;
    // The split sizes: each operand's dim at the axis (a Shape slice when not static).
    let mut sizes = Vec::with_capacity(ins.len());
    for &v in &ins {
        sizes.push(match b.dims(v)?.get(ax).and_then(|d| d.fixed()) {
            Some(d) => b.ints(&[d as i64]),
            None => b.node(crate::ops::dim_values::Shape { start: ax as i64, end: Some(ax as i64 + 1) }.op(), &[v])?,
        });
    }
    let split = if sizes.len() == 1 { sizes[0] } else { b.node(Op::Concat { axis: 0 }, &sizes)? };
    let parts = b.node_n(crate::ops::split::Split { axis: ax as i64, sizes: None, outputs: ins.len() }.op(), vec![Some(dy), Some(split)], ins.len())?;
    Ok(parts.into_iter().zip(need).map(|(p, &w)| w.then_some(p)).collect())
}

/// Gradient of an op that picks elements of input 0 (its other inputs are indices). With
/// `fill` (Pad), the op also writes a fill value: iota then counts from 1, the fill is 0, and
/// what lands on slot 0 is dropped.
fn scatter_back(b: &mut B<'_>, n: &Node, x: ValueId, dy: ValueId, fill: bool) -> R<ValueId> {
    let base = fill as i64;
    // iota: x's shape, element i = i + base.
    let iota = match b.fixed_dims(x) {
        Ok(d) => {
            let len: usize = d.iter().product();
            b.konst(Tensor::from_i64s(d, (base..len as i64 + base).collect()))
        }
        Err(_) => {
            let zero = b.konst(Tensor::scalar_i64(base));
            let one = b.konst(Tensor::scalar_i64(1));
            let size = b.node(crate::ops::dim_values::Size.op(), &[x])?;
            let end = b.add(size, zero)?;
            let r = b.node(crate::ops::range::Range.op(), &[zero, end, one])?;
            b.reshape_like(r, x)?
        }
    };
    // The forward op on iota: where each output element came from.
    let mut inputs = n.inputs.clone();
    inputs[0] = Some(iota);
    if fill {
        // The constant the op fills with, as an index (Pad's constant_value).
        let z = b.konst(Tensor::scalar_i64(0));
        if inputs.len() < 3 {
            inputs.resize(3, None);
        }
        inputs[2] = Some(z);
    }
    let picked = b.node_n(n.op.clone(), inputs, 1)?[0];
    if !fill {
        return scatter_add(b, x, picked, dy);
    }
    let flat = b.ints(&[-1]);
    let idx = b.node(Op::Reshape { allowzero: false }, &[picked, flat])?;
    let upd = b.node(Op::Reshape { allowzero: false }, &[dy, flat])?;
    let dt = b.dtype(x)?;
    let len = match b.fixed_dims(x) {
        Ok(d) => b.ints(&[d.iter().product::<usize>() as i64 + 1]),
        Err(_) => {
            let s = b.node(crate::ops::dim_values::Size.op(), &[x])?;
            let one = b.konst(Tensor::scalar_i64(1));
            let s = b.add(s, one)?;
            b.node(Op::Reshape { allowzero: false }, &[s, flat])?
        }
    };
    let zeros = b.node(Op::ConstantOfShape { value: super::builder::scalar_tensor(0.0, dt)? }, &[len])?;
    let sc = b.node(ScatterElements { axis: 0, reduction: ScatterReduction::Add }.op(), &[zeros, idx, upd])?;
    let (one, big) = (b.ints(&[1]), b.ints(&[i64::MAX]));
    let cut = b.node(crate::ops::slice::Slice.op(), &[sc, one, big])?;
    b.reshape_like(cut, x)
}

/// Zeros shaped like `x` plus, for each element of `dy`, dy added at the flat position of `x`
/// the matching element of `flat_idx` names (the adjoint of a gather).
pub(crate) fn scatter_add(b: &mut B<'_>, x: ValueId, flat_idx: ValueId, dy: ValueId) -> R<ValueId> {
    let flat = b.ints(&[-1]);
    let idx = b.node(Op::Reshape { allowzero: false }, &[flat_idx, flat])?;
    let upd = b.node(Op::Reshape { allowzero: false }, &[dy, flat])?;
    let dt = b.dtype(x)?;
    let size = match b.fixed_dims(x) {
        Ok(d) => b.ints(&[d.iter().product::<usize>() as i64]),
        Err(_) => {
            let s = b.node(crate::ops::dim_values::Size.op(), &[x])?;
            b.node(Op::Reshape { allowzero: false }, &[s, flat])?
        }
    };
    let zeros = b.node(Op::ConstantOfShape { value: super::builder::scalar_tensor(0.0, dt)? }, &[size])?;
    let sc = b.node(ScatterElements { axis: 0, reduction: ScatterReduction::Add }.op(), &[zeros, idx, upd])?;
    b.reshape_like(sc, x)
}
