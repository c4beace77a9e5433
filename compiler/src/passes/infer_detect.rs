//! Inference for NonMaxSuppression, RoiAlign and DeformConv: exact shapes from the
//! interpreter's geometry; NonMaxSuppression's row count is data-dependent (a fresh dim).
use super::{t, Cx, R};
use crate::interp::ops::detect;
use crate::ir::{DType, Dim, Op, ValueType};

fn fixed(cx: &Cx, i: usize) -> Option<Vec<usize>> {
    cx.shape(i)?.iter().map(Dim::fixed).collect()
}

fn dims(v: Vec<usize>) -> Option<Vec<Dim>> {
    Some(v.into_iter().map(Dim::Fixed).collect())
}

pub(super) fn infer(cx: &Cx, op: &Op) -> R<Vec<ValueType>> {
    Ok(match op {
        Op::NonMaxSuppression { .. } => vec![t(Some(DType::I64), Some(vec![cx.fresh(), Dim::Fixed(3)]))],
        Op::RoiAlign { .. } => {
            let shape = match (fixed(cx, 0), fixed(cx, 1), fixed(cx, 2)) {
                (Some(x), Some(r), Some(b)) => dims(detect::roi_dims(op, &x, &r, &b)?.1),
                _ => None,
            };
            vec![t(cx.dtype(0), shape)]
        }
        Op::DeformConv { .. } => {
            // Absent optional inputs are "known" (None); present ones need a static shape.
            let opt = |i: usize| if cx.has(i) { fixed(cx, i).map(Some) } else { Some(None) };
            let shape = match (fixed(cx, 0), fixed(cx, 1), fixed(cx, 2), opt(3), opt(4)) {
                (Some(x), Some(w), Some(o), Some(b), Some(m)) => {
                    let d = detect::deform_dims(op, &x, &w, &o, b.as_deref(), m.as_deref())?;
                    dims(vec![d.n, d.m, d.oh, d.ow])
                }
                _ => None,
            };
            vec![t(cx.dtype(0), shape)]
        }
        _ => vec![],
    })
}
