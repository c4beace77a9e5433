//! Inference for the windows, MelWeightMatrix and Unique: exact shapes from the
//! interpreter's own geometry functions when the shape-deciding operands are known.
use super::{t, Cx, R};
use crate::interp::ops::signal;
use crate::ir::{DType, Dim, Op, ValueType};

fn dims(v: Vec<usize>) -> Option<Vec<Dim>> {
    Some(v.into_iter().map(Dim::Fixed).collect())
}

pub(super) fn infer(cx: &Cx, op: &Op) -> R<Vec<ValueType>> {
    Ok(match op {
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
