//! Inference for Unique: the inverse indices' length is known, the other outputs' is not.
use super::{t, Cx, R};
use crate::ir::{DType, Dim, Op, ValueType};

pub(super) fn infer(cx: &Cx, op: &Op) -> R<Vec<ValueType>> {
    Ok(match op {
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
