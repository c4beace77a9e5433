//! Normalizations. Each normalizes x over some axes, x̂ = (x - mean)·inv with inv =
//! 1/sqrt(var + eps) (population variance), then scales and shifts. The backward recomputes
//! the statistics with core reductions (no saved state: the forward kernels keep none) and
//! uses the closed form for the normalized input:
//!   dx = inv · (dx̂ - mean(dx̂) - x̂ · mean(dx̂ · x̂))   with dx̂ = dy · scale,
//! means taken over the normalized axes; RMSNorm (no centring) drops the mean(dx̂) term.
//! Scale and bias gradients are dy·x̂ and dy summed over the axes they are broadcast along.
//!
//! Inference BatchNorm normalizes by its mean/var inputs instead, so it is affine in x and all
//! five inputs get gradients. BatchNormTraining's running-statistics outputs carry none (they
//! feed the next step's state, not the loss), so only output 0's gradient is used.
use crate::ops::view::Unsqueeze;
use crate::ops::IntoOp;
use super::builder::{norm_axis, B, R};
use super::input;
use crate::ir::{Node, Op, ReduceOp, UnaryOp, ValueId};
use crate::ops::GradCx;

/// The normalized input and the reciprocal standard deviation, recomputed from x.
struct Stats {
    xhat: ValueId,
    inv: ValueId,
    axes: Vec<i64>,
    centred: bool,
}

fn mean(b: &mut B<'_>, v: ValueId, axes: &[i64]) -> R<ValueId> {
    b.node(crate::ops::reduce::Reduce { op: ReduceOp::Mean, axes: Some(axes.to_vec()), keepdims: true, noop_with_empty_axes: false }.op(), &[v])
}

fn stats(b: &mut B<'_>, x: ValueId, axes: Vec<i64>, eps: f32, centred: bool) -> R<Stats> {
    let dt = b.dtype(x)?;
    let xc = if centred {
        let m = mean(b, x, &axes)?;
        b.sub(x, m)?
    } else {
        x
    };
    let sq = b.mul(xc, xc)?;
    let var = mean(b, sq, &axes)?;
    let e = b.scalar(eps as f64, dt)?;
    let t = b.add(var, e)?;
    let t = b.un(UnaryOp::Sqrt, t)?;
    let inv = b.un(UnaryOp::Reciprocal, t)?;
    let xhat = b.mul(xc, inv)?;
    Ok(Stats { xhat, inv, axes, centred })
}

impl Stats {
    fn dx(&self, b: &mut B<'_>, dxhat: ValueId) -> R<ValueId> {
        let p = b.mul(dxhat, self.xhat)?;
        let m2 = mean(b, p, &self.axes)?;
        let t = b.mul(self.xhat, m2)?;
        let mut d = b.sub(dxhat, t)?;
        if self.centred {
            let m1 = mean(b, dxhat, &self.axes)?;
            d = b.sub(d, m1)?;
        }
        b.mul(d, self.inv)
    }
}

/// LayerNormalization (`centred`) and RMSNormalization over the axes from `axis`: X's, the
/// scale's and the bias's gradients (scale and bias broadcast numpy-style against X).
pub(crate) fn scale_norm(cx: &mut GradCx, axis: i64, epsilon: f32, centred: bool) -> R<Vec<Option<ValueId>>> {
    let (dy, want, b, n) = (cx.dy()?, [cx.wants(0), cx.wants(1), cx.wants(2)], &mut *cx.b, cx.n);
    let x = input(n, 0)?;
    let r = b.rank(x)?;
    let mut out = vec![None; n.inputs.len()];
    let ax = norm_axis(axis, r)?;
    let st = stats(b, x, (ax as i64..r as i64).collect(), epsilon, centred)?;
    let scale = input(n, 1)?;
    if want[0] {
        let dxhat = b.mul(dy, scale)?;
        out[0] = Some(st.dx(b, dxhat)?);
    }
    if want[1] {
        let t = b.mul(dy, st.xhat)?;
        out[1] = Some(b.sum_to(t, scale)?);
    }
    if let Some(bias) = n.inputs.get(2).copied().flatten().filter(|_| want[2]) {
        out[2] = Some(b.sum_to(dy, bias)?);
    }
    Ok(out)
}

/// InstanceNormalization (statistics per sample and channel) and training-mode
/// BatchNormalization (`with_batch`: per channel over the batch too): X's, the scale's and
/// the bias's gradients.
pub(crate) fn channel_norm(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], need: &[bool], epsilon: f32, with_batch: bool) -> R<Vec<Option<ValueId>>> {
    let want = |i: usize| need.get(i).copied().unwrap_or(false);
    let x = input(n, 0)?;
    let r = b.rank(x)?;
    let mut out = vec![None; n.inputs.len()];
    let Some(dy) = dys.first().copied().flatten() else { return Ok(out) };
    if r < 2 {
        return Err(format!("input of rank {r} (need batch and channels)"));
    }
    let spatial: Vec<i64> = (2..r as i64).collect();
    let axes = if with_batch { [vec![0], spatial].concat() } else { spatial };
    let st = stats(b, x, axes, epsilon, true)?;
    let not_c: Vec<i64> = std::iter::once(0).chain(2..r as i64).collect();
    if want(0) {
        let s = per_channel(b, input(n, 1)?, r)?;
        let dxhat = b.mul(dy, s)?;
        out[0] = Some(st.dx(b, dxhat)?);
    }
    if want(1) {
        let t = b.mul(dy, st.xhat)?;
        out[1] = Some(b.reduce_sum(t, not_c.clone(), false)?);
    }
    if want(2) {
        out[2] = Some(b.reduce_sum(dy, not_c, false)?);
    }
    Ok(out)
}

/// GroupNormalization: statistics per sample and group of channels; scale and bias per
/// channel or per group.
pub(crate) fn group_norm(cx: &mut GradCx, num_groups: usize, epsilon: f32, per_channel: bool) -> R<Vec<Option<ValueId>>> {
    let (dy, want, b, n) = (cx.dy()?, [cx.wants(0), cx.wants(1), cx.wants(2)], &mut *cx.b, cx.n);
    let x = input(n, 0)?;
    let r = b.rank(x)?;
    let mut out = vec![None; n.inputs.len()];
    let xd = b.fixed_dims(x)?;
    let (nb, c, g) = (xd[..1].iter().product::<usize>(), xd.get(1).copied().unwrap_or(1), num_groups);
    if r < 2 || g == 0 || c % g != 0 {
        return Err(format!("{c} channels of {xd:?} do not split into {g} groups"));
    }
    let sp: usize = xd[2..].iter().product();
    let v4 = b.ints(&[nb as i64, g as i64, (c / g) as i64, sp as i64]);
    let x4 = b.node(Op::Reshape { allowzero: false }, &[x, v4])?;
    let dy4 = b.node(Op::Reshape { allowzero: false }, &[dy, v4])?;
    let st = stats(b, x4, vec![2, 3], epsilon, true)?;
    // Scale/bias as [1, G, C/G, 1] (per channel) or [1, G, 1, 1] (per group).
    let (pshape, paxes): (Vec<i64>, Vec<i64>) =
        if per_channel { (vec![1, g as i64, (c / g) as i64, 1], vec![0, 3]) } else { (vec![1, g as i64, 1, 1], vec![0, 2, 3]) };
    if want[0] {
        let ps = b.ints(&pshape);
        let s = b.node(Op::Reshape { allowzero: false }, &[input(n, 1)?, ps])?;
        let dxhat = b.mul(dy4, s)?;
        let dx4 = st.dx(b, dxhat)?;
        out[0] = Some(b.reshape_like(dx4, x)?);
    }
    if want[1] {
        let t = b.mul(dy4, st.xhat)?;
        let t = b.reduce_sum(t, paxes.clone(), false)?;
        out[1] = Some(b.reshape_like(t, input(n, 1)?)?);
    }
    if want[2] {
        let t = b.reduce_sum(dy4, paxes, false)?;
        out[2] = Some(b.reshape_like(t, input(n, 2)?)?);
    }
    Ok(out)
}

/// A `[C]` per-channel vector shaped `[C, 1, …]` to broadcast along axis 1 of a rank-`r` x.
fn per_channel(b: &mut B<'_>, v: ValueId, r: usize) -> R<ValueId> {
    if r <= 2 {
        return Ok(v);
    }
    b.node(Unsqueeze { axes: Some((1..r as i64 - 1).collect()) }.op(), &[v])
}

/// Inference-mode BatchNormalization, y = (x - mean)·inv·scale + B with inv = 1/sqrt(var +
/// eps), all per channel: every input's gradient.
pub(crate) fn batch_norm(cx: &mut GradCx, eps: f32) -> R<Vec<Option<ValueId>>> {
    let (dy, n) = (cx.dy()?, cx.n);
    let want: Vec<bool> = (0..n.inputs.len()).map(|i| cx.wants(i)).collect();
    let want = |i: usize| want.get(i).copied().unwrap_or(false);
    let b = &mut *cx.b;
    let r = b.rank(input(n, 0)?)?;
    let mut out = vec![None; n.inputs.len()];
    if r < 2 {
        return Err(format!("input of rank {r} (need batch and channels)"));
    }
    let x = input(n, 0)?;
    let (scale, mu, var) = (input(n, 1)?, input(n, 3)?, input(n, 4)?);
    let dt = b.dtype(x)?;
    let e = b.scalar(eps as f64, dt)?;
    let t = b.add(var, e)?;
    let t = b.un(UnaryOp::Sqrt, t)?;
    let inv = b.un(UnaryOp::Reciprocal, t)?;
    let not_c: Vec<i64> = std::iter::once(0).chain(2..r as i64).collect();
    if want(0) {
        let a = b.mul(scale, inv)?;
        let a = per_channel(b, a, r)?;
        out[0] = Some(b.mul(dy, a)?);
    }
    // Σ dy and Σ dy·(x - mean) per channel serve B, mean, scale and var.
    let sum_dy = if want(2) || want(3) { Some(b.reduce_sum(dy, not_c.clone(), false)?) } else { None };
    let sum_dyxc = if want(1) || want(4) {
        let m = per_channel(b, mu, r)?;
        let xc = b.sub(x, m)?;
        let t = b.mul(dy, xc)?;
        Some(b.reduce_sum(t, not_c, false)?)
    } else {
        None
    };
    if let (true, Some(s)) = (want(1), sum_dyxc) {
        out[1] = Some(b.mul(s, inv)?);
    }
    if let (true, Some(s)) = (want(2), sum_dy) {
        out[2] = Some(s);
    }
    // d/dmean = -Σdy·scale·inv
    if let (true, Some(s)) = (want(3), sum_dy) {
        let t = b.mul(s, scale)?;
        let t = b.mul(t, inv)?;
        out[3] = Some(b.neg(t)?);
    }
    // d/dvar = Σdy·(x - mean)·scale·(-½)·inv³
    if let (true, Some(s)) = (want(4), sum_dyxc) {
        let i2 = b.mul(inv, inv)?;
        let i3 = b.mul(i2, inv)?;
        let t = b.mul(s, scale)?;
        let t = b.mul(t, i3)?;
        let h = b.scalar(-0.5, dt)?;
        out[4] = Some(b.mul(t, h)?);
    }
    Ok(out)
}
