//! TfIdfVectorizer and TreeEnsemble: the runtime's ML kernels over tables in the weights blob,
//! with the geometry the interpreter resolves (`interp::ops::ml`).
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::ml::{tfidf_dims, tree_dims};
use crate::ir::{DType, Node, Op};

const K: &str = "rt::kernels::ml";

pub fn emit(cx: &Ctx, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let e = |m: String| cx.err(n, m);
    let x = cx.input(n, 0)?;
    let (xd, xs) = cx.ty(n, x)?;
    let y = cx.write(n, out)?;
    match &n.op {
        Op::TfIdfVectorizer(a) => {
            if !matches!(xd, DType::I32 | DType::I64) {
                return Err(e(format!("TfIdfVectorizer of {xd} is not supported")));
            }
            let (p, _) = tfidf_dims(a, &xs).map_err(e)?;
            Ok(Some(format!(
                "{K}::tfidf({}, &{K}::{p:?}, {}, {}, {}, {}, {y});",
                cx.read(n, x)?,
                cx.table_i64(&a.pool),
                cx.table_i64(&a.ngram_counts),
                cx.table_i64(&a.ngram_indexes),
                cx.table_f32(&a.weights)
            )))
        }
        Op::TreeEnsemble(a) => {
            let (t, max) = match xd {
                DType::F32 => ("f32", "f32::MAX as f64"),
                DType::F64 => ("f64", "f64::MAX"),
                d => return Err(e(format!("TreeEnsemble of {d} is not supported"))),
            };
            let (p, _) = tree_dims(a, &xs).map_err(e)?;
            Ok(Some(format!(
                "let t = {K}::TreeTables {{ nodes: {}, splits: {}, members: {}, leaf_weights: {}, leaf_targets: {}, roots: {} }};\n{K}::tree_ensemble::<{t}>({}, &{K}::{p:?}, &t, {max}, {y});",
                cx.table(&a.nodes),
                cx.table_f64(&a.splits),
                cx.table_f64(&a.members),
                cx.table_f64(&a.leaf_weights),
                cx.table(&a.leaf_targets),
                cx.table(&a.roots),
                cx.read(n, x)?
            )))
        }
        _ => Err(cx.err(n, "not an ML op")),
    }
}
