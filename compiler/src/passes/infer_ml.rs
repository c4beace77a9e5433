//! Inference for TfIdfVectorizer and TreeEnsemble: the output width comes from the attributes,
//! the rows from the input.
use super::{t, Cx, R};
use crate::interp::ops::ml;
use crate::ir::{DType, Dim, Op, ValueType};

pub(super) fn infer(cx: &Cx, op: &Op) -> R<Vec<ValueType>> {
    let fixed: Option<Vec<usize>> = cx.shape(0).and_then(|s| s.iter().map(Dim::fixed).collect());
    let dims = |v: Vec<usize>| Some(v.into_iter().map(Dim::Fixed).collect::<Vec<_>>());
    Ok(match op {
        Op::TfIdfVectorizer(a) => {
            let shape = match (fixed, cx.shape(0)) {
                (Some(x), _) => dims(ml::tfidf_dims(a, &x)?.1),
                (None, Some(s)) if s.len() == 2 => Some(vec![s[0].clone(), Dim::Fixed(a.out)]),
                (None, Some(s)) if s.len() < 2 => Some(vec![Dim::Fixed(a.out)]),
                _ => None,
            };
            vec![t(Some(DType::F32), shape)]
        }
        Op::TreeEnsemble(a) => {
            let shape = match (fixed, cx.shape(0)) {
                (Some(x), _) => dims(ml::tree_dims(a, &x)?.1),
                (None, Some(s)) if s.len() == 2 => Some(vec![s[0].clone(), Dim::Fixed(a.targets)]),
                _ => None,
            };
            vec![t(cx.dtype(0).and_then(ml::tree_dtype), shape)]
        }
        _ => vec![],
    })
}
