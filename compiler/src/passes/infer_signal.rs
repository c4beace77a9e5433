//! Inference for the signal ops and Unique: exact shapes from the
//! interpreter's own geometry functions when the shape-deciding operands are known.
use super::{t, Cx, R};
use crate::interp::ops::signal;
use crate::ir::{DType, Dim, Op, ValueType};

fn fixed(cx: &Cx, i: usize) -> Option<Vec<usize>> {
    cx.shape(i)?.iter().map(Dim::fixed).collect()
}

/// An optional scalar operand: `Some(None)` when absent, `None` when present but not constant.
fn opt_scalar(cx: &Cx, i: usize) -> Option<Option<i64>> {
    if !cx.has(i) {
        return Some(None);
    }
    cx.ints(i)?.first().copied().map(Some)
}

fn dims(v: Vec<usize>) -> Option<Vec<Dim>> {
    Some(v.into_iter().map(Dim::Fixed).collect())
}

fn rank_like(cx: &Cx, i: usize) -> Option<Vec<Dim>> {
    cx.shape(i).map(|s| cx.fresh_dims(s.len()))
}

pub(super) fn infer(cx: &Cx, op: &Op) -> R<Vec<ValueType>> {
    Ok(match op {
        Op::Dft { inverse, onesided } => {
            let shape = match (fixed(cx, 0), opt_scalar(cx, 1), opt_scalar(cx, 2)) {
                (Some(xs), Some(len), Some(axis)) => dims(signal::dft_dims(&xs, len, axis, *inverse, *onesided)?.1),
                _ => rank_like(cx, 0),
            };
            vec![t(cx.dtype(0), shape)]
        }
        Op::Stft { onesided } => {
            let window = if cx.has(2) { fixed(cx, 2).map(|w| Some(w.iter().product())) } else { Some(None) };
            let step = cx.ints(1).and_then(|v| v.first().copied());
            let shape = match (fixed(cx, 0), step, window, opt_scalar(cx, 3)) {
                (Some(xs), Some(step), Some(w), Some(fl)) => dims(signal::stft_shape(&signal::stft_dims(&xs, step, w, fl, *onesided)?)),
                _ => Some(cx.fresh_dims(4)),
            };
            vec![t(cx.dtype(0), shape)]
        }
        Op::Window { dtype, .. } => {
            let len = cx.ints(0).and_then(|v| v.first().copied()).map(|n| Dim::Fixed(n.max(0) as usize)).unwrap_or_else(|| cx.fresh());
            vec![t(Some(*dtype), Some(vec![len]))]
        }
        Op::MelWeightMatrix { dtype } => {
            let scalar = |i| cx.ints(i).and_then(|v| v.first().copied());
            let shape = match (scalar(0), scalar(1)) {
                (Some(bins), Some(len)) => dims(signal::mel_shape(bins, len)?),
                _ => Some(cx.fresh_dims(2)),
            };
            vec![t(Some(*dtype), shape)]
        }
        // Counts of unique values are data-dependent; the inverse indices' length is not.
        Op::Unique { axis, .. } => {
            let x = cx.shape(0);
            let inverse = match (axis, x) {
                (None, Some(x)) => Some(x.iter().map(Dim::fixed).collect::<Option<Vec<_>>>().map_or_else(|| cx.fresh(), |v| Dim::Fixed(v.iter().product()))),
                (Some(a), Some(x)) => crate::interp::ops::util::norm_axis_or_scalar(*a, x.len()).ok().map(|a| x[a].clone()),
                _ => None,
            };
            let y = match (axis, x) {
                (None, _) => Some(vec![cx.fresh()]),
                (Some(a), Some(x)) => crate::interp::ops::util::norm_axis_or_scalar(*a, x.len()).ok().map(|a| {
                    let mut s = x.to_vec();
                    s[a] = cx.fresh();
                    s
                }),
                _ => None,
            };
            let k = cx.fresh();
            vec![
                t(cx.dtype(0), y),
                t(Some(DType::I64), Some(vec![k.clone()])),
                t(Some(DType::I64), Some(vec![inverse.unwrap_or_else(|| cx.fresh())])),
                t(Some(DType::I64), Some(vec![k])),
            ]
        }
        _ => vec![],
    })
}
