//! The classic-ML ops, their attributes already in the flat-table form the runtime kernels take
//! (`burnc_runtime::kernels::ml`; the frontend builds and validates them): TfIdfVectorizer
//! (n-gram counts over integer ids) and TreeEnsemble (ai.onnx.ml 5). The tables go to the
//! weights blob; the rows and columns are run-time sizes, so bounded dims need nothing more.
use super::{input, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::ml as k;

const K: &str = "rt::kernels::ml";

/// TfIdfVectorizer over integer pools: ids `[C]` or `[B, C]` to f32 `[out]` or `[B, out]`.
#[derive(Debug, Clone, PartialEq)]
pub struct TfIdfVectorizer {
    /// `kernels::ml::{TF, IDF, TFIDF}`.
    pub mode: u8,
    pub min_gram: usize,
    pub max_gram: usize,
    pub max_skip: usize,
    /// Start offset in `pool` of each n-gram size (1, 2, …).
    pub ngram_counts: Vec<i64>,
    pub ngram_indexes: Vec<i64>,
    pub pool: Vec<i64>,
    pub weights: Vec<f32>,
    /// Output columns: max(ngram_indexes) + 1.
    pub out: usize,
}

impl TfIdfVectorizer {
    /// The tables' own consistency (the frontend checks it too: ops may be built elsewhere).
    fn check(&self) -> R<()> {
        k::tfidf_check(self.pool.len(), &self.ngram_counts, &self.ngram_indexes, self.out).map_err(str::to_string)?;
        if self.weights.len() > self.out {
            return Err(format!("{} weights for {} output columns", self.weights.len(), self.out));
        }
        Ok(())
    }

    /// Rows and columns of the ids, and the output dims.
    fn view(&self, xs: &[DimExpr]) -> R<([DimExpr; 2], Vec<DimExpr>)> {
        self.check()?;
        let (one, out) = (DimExpr::constant(1), DimExpr::constant(self.out as i64));
        Ok(match xs {
            [] => ([one.clone(), one], vec![out]),
            [c] => ([one, c.clone()], vec![out]),
            [b, c] => ([b.clone(), c.clone()], vec![b.clone(), out]),
            _ => return Err(format!("TfIdfVectorizer input must be [C] or [B, C], got rank {}", xs.len())),
        })
    }

    fn params(&self, rows: String, cols: String) -> String {
        let (out, min, max, skip, mode) = (self.out, self.min_gram, self.max_gram, self.max_skip, self.mode);
        format!("{K}::TfIdf {{ rows: {rows}, cols: {cols}, out: {out}, min_gram: {min}, max_gram: {max}, max_skip: {skip}, mode: {mode} }}")
    }
}

impl OpDef for TfIdfVectorizer {
    name!("TfIdfVectorizer");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        if !matches!(x.dtype, DType::I32 | DType::I64) {
            return Err(format!("TfIdfVectorizer needs int32 or int64 ids, got {}", x.dtype));
        }
        let dims = x.dims.as_deref().map(|xs| self.view(xs)).transpose()?.map(|(_, out)| out);
        Ok(vec![OutType { dtype: DType::F32, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let (view, shape) = self.view(&consts(&x.shape))?;
        let [rows, cols] = view.map(|d| d.as_const().unwrap_or(0).max(0) as usize);
        let p = k::TfIdf { rows, cols, out: self.out, min_gram: self.min_gram, max_gram: self.max_gram, max_skip: self.max_skip, mode: self.mode };
        let shape: Vec<usize> = shape.iter().map(|d| d.as_const().unwrap_or(0).max(0) as usize).collect();
        let mut y = vec![0f32; shape.iter().product()];
        let (pool, counts, indexes, weights) = (&self.pool, &self.ngram_counts, &self.ngram_indexes, &self.weights);
        match &x.data {
            Data::I32(v) => k::tfidf(v, &p, pool, counts, indexes, weights, &mut y),
            Data::I64(v) => k::tfidf(v, &p, pool, counts, indexes, weights, &mut y),
            _ => return Err(format!("TfIdfVectorizer needs int32 or int64 ids, got {}", x.dtype())),
        }
        Ok(vec![Tensor::new(shape, Data::F32(y))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let ([rows, cols], _) = self.view(&cx.dims(x)?).map_err(|e| cx.err(e))?;
        let p = self.params(cx.size(&rows)?, cx.size(&cols)?);
        Ok(format!(
            "{K}::tfidf({}, &{p}, {}, {}, {}, {}, {});",
            cx.read(x)?,
            cx.table(&self.pool),
            cx.table(&self.ngram_counts),
            cx.table(&self.ngram_indexes),
            cx.table(&self.weights),
            cx.write(cx.output(0)?)?
        ))
    }

    // Value-dependent: a hash-free scan of every n-gram start, a few compares each.
    fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        None
    }
}

/// TreeEnsemble (ai.onnx.ml 5) as `kernels::ml::TreeTables`: features `[N, F]` (or `[F]`, one
/// row) to `[N, targets]` in the features' float type.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeEnsemble {
    pub nodes: Vec<u32>,
    pub splits: Vec<f64>,
    pub members: Vec<f64>,
    pub leaf_weights: Vec<f64>,
    pub leaf_targets: Vec<u32>,
    pub roots: Vec<u32>,
    pub targets: usize,
    /// `kernels::ml::{AVERAGE, SUM, MIN, MAX}`.
    pub aggregate: u8,
}

impl TreeEnsemble {
    fn tables(&self) -> k::TreeTables<'_> {
        k::TreeTables {
            nodes: &self.nodes,
            splits: &self.splits,
            members: &self.members,
            leaf_weights: &self.leaf_weights,
            leaf_targets: &self.leaf_targets,
            roots: &self.roots,
        }
    }

    /// Rows and features, with every node's feature checked to lie inside the row.
    fn view(&self, cx: &mut ShapeCx, xs: &[DimExpr]) -> R<[DimExpr; 2]> {
        let (n, f) = match xs {
            [n, f] => (n.clone(), f.clone()),
            [f] => (DimExpr::constant(1), f.clone()),
            _ => return Err(format!("TreeEnsemble input must be [N, F], got rank {}", xs.len())),
        };
        let read = self.nodes.chunks_exact(k::NODE_WORDS).map(|r| r[1] as i64 + 1).max().unwrap_or(0);
        cx.at_most("the features the nodes read and the input's features", &DimExpr::constant(read), &f)?;
        Ok([n, f])
    }
}

impl OpDef for TreeEnsemble {
    name!("TreeEnsemble");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        if !matches!(x.dtype, DType::F32 | DType::F64) {
            return Err(format!("TreeEnsemble needs float or double features, got {}", x.dtype));
        }
        let dims = match x.dims.as_deref() {
            Some(xs) => Some(vec![self.view(cx, xs)?[0].clone(), DimExpr::constant(self.targets as i64)]),
            None => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let mut cx = ShapeCx::of_tensors(ins);
        let [n, features] = self.view(&mut cx, &consts(&x.shape))?.map(|d| d.as_const().unwrap_or(0).max(0) as usize);
        let p = k::Trees { n, features, targets: self.targets, aggregate: self.aggregate };
        let len = n.checked_mul(self.targets).ok_or("the output size overflows")?;
        let data = match &x.data {
            Data::F32(v) => {
                let mut y = vec![0f32; len];
                k::tree_ensemble(v, &p, &self.tables(), f32::MAX as f64, &mut y);
                Data::F32(y)
            }
            Data::F64(v) => {
                let mut y = vec![0f64; len];
                k::tree_ensemble(v, &p, &self.tables(), f64::MAX, &mut y);
                Data::F64(y)
            }
            _ => return Err(format!("TreeEnsemble needs float or double features, got {}", x.dtype())),
        };
        Ok(vec![Tensor::new(vec![n, self.targets], data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let (t, max) = match cx.dtype(x)? {
            DType::F32 => ("f32", "f32::MAX as f64"),
            _ => ("f64", "f64::MAX"),
        };
        let [n, f] = self.view(&mut cx.shape_cx()?, &cx.dims(x)?).map_err(|e| cx.err(e))?;
        Ok(format!(
            "let t = {K}::TreeTables {{ nodes: {}, splits: {}, members: {}, leaf_weights: {}, leaf_targets: {}, roots: {} }};\n\
             let p = {K}::Trees {{ n: {}, features: {}, targets: {}, aggregate: {} }};\n\
             {K}::tree_ensemble::<{t}>({}, &p, &t, {max}, {});",
            cx.table(&self.nodes),
            cx.table(&self.splits),
            cx.table(&self.members),
            cx.table(&self.leaf_weights),
            cx.table(&self.leaf_targets),
            cx.table(&self.roots),
            cx.size(&n)?,
            cx.size(&f)?,
            self.targets,
            self.aggregate,
            cx.read(x)?,
            cx.write(cx.output(0)?)?
        ))
    }

    // Value-dependent: the depth each row walks.
    fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        None
    }
}

fn consts(shape: &[usize]) -> Vec<DimExpr> {
    shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()
}

pub fn examples() -> Vec<super::Example> {
    // Bigrams and unigrams over ids 0..4, TF-IDF weighted.
    let tfidf = TfIdfVectorizer {
        mode: k::TFIDF,
        min_gram: 1,
        max_gram: 2,
        max_skip: 1,
        ngram_counts: vec![0, 3],
        ngram_indexes: vec![0, 1, 2, 3, 4],
        pool: vec![1, 2, 3, 1, 2, 2, 3],
        weights: vec![1.0, 0.5, 2.0, 1.5, 0.25],
        out: 5,
    };
    let ids = Tensor::new(vec![2, 6], Data::I64(vec![1, 2, 3, 1, 2, 0, 2, 3, 2, 3, 1, 1]));
    let ids1 = Tensor::new(vec![7], Data::I32(vec![3, 1, 2, 2, 3, 0, 1]));
    // Two stumps, summed: x0 <= 0.5 and x1 > -0.25, each to two leaves (node rows of
    // `kernels::ml::NODE_WORDS` words: mode, feature, true id, false id, flags 3 = both leaves).
    let trees = TreeEnsemble {
        nodes: vec![k::LEQ, 0, 0, 1, 3, 0, 0, k::GT, 1, 2, 3, 3, 0, 0],
        splits: vec![0.5, -0.25],
        members: vec![],
        leaf_weights: vec![1.0, -1.0, 0.5, 2.0],
        leaf_targets: vec![0, 1, 0, 1],
        roots: vec![0, 0, 1, 0],
        targets: 2,
        aggregate: k::SUM,
    };
    let x = Tensor::from_f32s(vec![3, 2], vec![0.1, 0.9, 0.7, -0.5, -1.0, 0.0]);
    let op = |o: OpRef, t: Tensor| super::Example { consts: vec![], op: o, inputs: vec![t] };
    vec![
        op(OpRef::new(tfidf.clone()), ids),
        op(OpRef::new(tfidf), ids1),
        op(OpRef::new(trees.clone()), x.clone()),
        op(OpRef::new(trees), Tensor::new(vec![3, 2], Data::F64(x.to_f64_vec()))),
    ]
}

