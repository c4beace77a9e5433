//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (`NllLoss`), input [N, C, d…],
//! integer targets [N, d…], optional class weights w [C]. Per sample the loss is
//! l = -w[t]·x[t] (x = LogSoftmax(scores) with `softmax`), 0 where t is ignore_index; the
//! reduction sums, or divides the sum by W = Σ w[t] over the samples not ignored (ONNX's mean).
//! With c = w[t]·valid, the per-sample factor g = dy (none, sum) or dy / W (mean):
//!   dx = -onehot(t)·c·g                         (NLL)
//!   dx = (softmax(x) - onehot(t))·c·g           (softmax cross-entropy)
//! The one-hot is Equal(classes, t) so an out-of-range ignore_index (e.g. -100) needs no
//! special case; ignored targets are replaced by 0 before w is gathered.
//! The log-probabilities output of SoftmaxCrossEntropyLoss is LogSoftmax(x); a gradient on it
//! adds LogSoftmax's rule. The class weights get dw[k] = Σ_{t = k} valid·g·(u - L·[mean]),
//! with u = -x[t] the unweighted per-sample loss and L the mean loss.
use super::builder::{B, R};
use super::{input, output};
use crate::ir::{BinaryOp, DType, LossReduction, Node, Op, ReduceOp, UnaryOp, ValueId};
use crate::tensor::Tensor;

pub fn rule(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], need: &[bool]) -> R<Vec<Option<ValueId>>> {
    let Op::NllLoss { softmax, reduction, ignore_index } = n.op else { return Err(format!("no gradient rule for {}", n.op.name())) };
    let want = |i: usize| need.get(i).copied().unwrap_or(false);
    let x = input(n, 0)?;
    let t = input(n, 1)?;
    let w = n.inputs.get(2).copied().flatten();
    let dt = b.dtype(x)?;
    let xd = b.dims(x)?;
    let r = xd.len();
    if r < 2 {
        return Err(format!("input of rank {r} (need [N, C, …])"));
    }
    let c = xd[1].fixed().ok_or("the class dim must be static")?;
    let mut out = vec![None; n.inputs.len()];
    let dloss = dys.first().copied().flatten();
    let dlogp = dys.get(1).copied().flatten();
    if dlogp.is_some() && !softmax {
        return Err("internal: a gradient on output 1 of NegativeLogLikelihoodLoss".into());
    }

    // Targets as i64, ignored ones replaced by class 0 (their weight is zeroed via `valid`).
    let t64 = if b.dtype(t)? == DType::I64 { t } else { b.node(crate::ops::cast::op(DType::I64, false), &[t])? };
    let (t_safe, valid) = match ignore_index {
        Some(ig) => {
            let igv = b.konst(Tensor::scalar_i64(ig));
            let is_ig = b.bin(BinaryOp::Equal, t64, igv)?;
            let zero = b.konst(Tensor::scalar_i64(0));
            let safe = b.node(crate::ops::select::op(), &[is_ig, zero, t64])?;
            let keep = b.node(Op::Unary(UnaryOp::Not), &[is_ig])?;
            (safe, Some(b.node(crate::ops::cast::op(dt, false), &[keep])?))
        }
        None => (t64, None),
    };
    // Per-sample weight c = w[t]·valid, [N, d…].
    let wt = match w {
        Some(w) => Some(b.node(Op::Gather { axis: 0 }, &[w, t_safe])?),
        None => None,
    };
    let coef = match (wt, valid) {
        (Some(a), Some(v)) => Some(b.mul(a, v)?),
        (a, v) => a.or(v),
    };
    // onehot [N, C, d…]: classes shaped [C, 1…] against t unsqueezed at axis 1.
    let mut cshape = vec![c];
    cshape.extend(std::iter::repeat_n(1, r - 2));
    let classes = b.konst(Tensor::from_i64s(cshape, (0..c as i64).collect()));
    let tu = b.node(Op::Unsqueeze { axes: Some(vec![1]) }, &[t_safe])?;
    let eq = b.bin(BinaryOp::Equal, tu, classes)?;
    let onehot = b.node(crate::ops::cast::op(dt, false), &[eq])?;
    // x as log-probabilities.
    let logp = if softmax {
        match n.outputs.get(1) {
            Some(&lp) => lp,
            None => b.node(Op::Softmax { axis: 1, log: true, coerce_2d: false }, &[x])?,
        }
    } else {
        x
    };
    // W = Σ c (or the count N·d when every weight is 1).
    let denom = if reduction == LossReduction::Mean {
        Some(match coef {
            Some(cf) => b.node(Op::Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false }, &[cf])?,
            None => {
                let s = b.node(Op::Size, &[t])?;
                b.node(crate::ops::cast::op(dt, false), &[s])?
            }
        })
    } else {
        None
    };
    // g: dy per sample, [N, d…] or a scalar.
    let g = match dloss {
        Some(dy) => Some(match denom {
            Some(wsum) => b.div(dy, wsum)?,
            None => dy,
        }),
        None => None,
    };
    // Factor on the one-hot: c·g, [N, 1, d…] (or a scalar when neither depends on the sample).
    let cg = match (g, coef) {
        (Some(g), Some(cf)) => Some(b.mul(cf, g)?),
        (g, _) => g,
    };
    let cg_u = match cg {
        Some(v) if b.rank(v)? > 0 => Some(b.node(Op::Unsqueeze { axes: Some(vec![1]) }, &[v])?),
        v => v,
    };
    if want(0) {
        let mut dx = match cg_u {
            Some(f) => {
                let base = if softmax {
                    let p = b.un(UnaryOp::Exp, logp)?;
                    b.sub(p, onehot)?
                } else {
                    b.neg(onehot)?
                };
                // f is [N, 1, d…] or a scalar, so the product has x's shape.
                Some(b.mul(base, f)?)
            }
            None => None,
        };
        // LogSoftmax's rule for a gradient on the log-probabilities: dl - p·Σ_c dl.
        if let Some(dl) = dlogp {
            let s = b.reduce_sum(dl, vec![1], true)?;
            let p = b.un(UnaryOp::Exp, logp)?;
            let ps = b.mul(p, s)?;
            let d = b.sub(dl, ps)?;
            dx = Some(match dx {
                Some(prev) => b.add(prev, d)?,
                None => d,
            });
        }
        out[0] = dx;
    }
    if let (true, Some(w), Some(g)) = (want(2), w, g) {
        out[2] = Some(weight_grad(b, onehot, logp, valid, g, reduction, w, n, c, r)?);
    }
    Ok(out)
}

/// dw[k] = Σ_{samples with t = k} valid·g·(u - L) (L only for the mean), u = -logp[t].
#[allow(clippy::too_many_arguments)]
fn weight_grad(
    b: &mut B<'_>,
    onehot: ValueId,
    logp: ValueId,
    valid: Option<ValueId>,
    g: ValueId,
    reduction: LossReduction,
    w: ValueId,
    n: &Node,
    c: usize,
    r: usize,
) -> R<ValueId> {
    let picked = b.mul(onehot, logp)?;
    let picked = b.reduce_sum(picked, vec![1], false)?;
    let mut u = b.neg(picked)?;
    if reduction == LossReduction::Mean {
        let l = output(n, 0)?;
        u = b.sub(u, l)?;
    }
    let mut h = b.mul(u, g)?;
    if let Some(v) = valid {
        h = b.mul(h, v)?;
    }
    let hu = b.node(Op::Unsqueeze { axes: Some(vec![1]) }, &[h])?;
    let t = b.mul(onehot, hu)?;
    let axes: Vec<i64> = std::iter::once(0).chain(2..r as i64).collect();
    let d = b.reduce_sum(t, axes, false)?;
    if b.fixed_dims(d)? != [c] {
        return Err(format!("internal: weight gradient shaped {:?}", b.dims(d)?));
    }
    b.reshape_like(d, w)
}
