//! TfIdfVectorizer and TreeEnsemble: shapes checked here (shared with inference and codegen),
//! math in `burnc_runtime::kernels::ml`.
use super::util::{arg, numel, one};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{DType, Op, TfIdfAttrs, TreeEnsembleAttrs};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::ml as k;

pub fn eval(op: &Op, args: &[Option<RtValue>]) -> OpResult {
    let x = arg(args, 0)?;
    match op {
        Op::TfIdfVectorizer(a) => {
            let (p, shape) = tfidf_dims(a, &x.shape)?;
            let mut y = vec![0f32; numel(&shape)?];
            match &x.data {
                Data::I32(v) => k::tfidf(v, &p, &a.pool, &a.ngram_counts, &a.ngram_indexes, &a.weights, &mut y),
                Data::I64(v) => k::tfidf(v, &p, &a.pool, &a.ngram_counts, &a.ngram_indexes, &a.weights, &mut y),
                _ => return Err(format!("TfIdfVectorizer needs int32 or int64 ids, got {}", x.dtype())),
            }
            one(Tensor::new(shape, Data::F32(y)))
        }
        Op::TreeEnsemble(a) => {
            let (p, shape) = tree_dims(a, &x.shape)?;
            let mut_len = numel(&shape)?;
            let data = match &x.data {
                Data::F32(v) => {
                    let mut y = vec![0f32; mut_len];
                    k::tree_ensemble(v, &p, &tables(a), f32::MAX as f64, &mut y);
                    Data::F32(y)
                }
                Data::F64(v) => {
                    let mut y = vec![0f64; mut_len];
                    k::tree_ensemble(v, &p, &tables(a), f64::MAX, &mut y);
                    Data::F64(y)
                }
                _ => return Err(format!("TreeEnsemble needs float or double features, got {}", x.dtype())),
            };
            one(Tensor::new(shape, data))
        }
        _ => Err(format!("{} is not an ML op", op.name())),
    }
}

/// Kernel geometry and output shape of TfIdfVectorizer over ids of shape `x`.
pub fn tfidf_dims(a: &TfIdfAttrs, x: &[usize]) -> Result<(k::TfIdf, Vec<usize>), String> {
    let (rows, cols, shape) = match *x {
        [] => (1, 1, vec![a.out]),
        [c] => (1, c, vec![a.out]),
        [b, c] => (b, c, vec![b, a.out]),
        _ => return Err(format!("TfIdfVectorizer input must be [C] or [B, C], got {x:?}")),
    };
    k::tfidf_check(a.pool.len(), &a.ngram_counts, &a.ngram_indexes, a.out).map_err(str::to_string)?;
    if a.weights.len() > a.out {
        return Err(format!("{} weights for {} output columns", a.weights.len(), a.out));
    }
    let p = k::TfIdf { rows, cols, out: a.out, min_gram: a.min_gram, max_gram: a.max_gram, max_skip: a.max_skip, mode: a.mode };
    Ok((p, shape))
}

/// Kernel geometry and output shape of TreeEnsemble over features of shape `x` ([N, F]).
pub fn tree_dims(a: &TreeEnsembleAttrs, x: &[usize]) -> Result<(k::Trees, Vec<usize>), String> {
    let (n, features) = match *x {
        [n, f] => (n, f),
        [f] => (1, f),
        _ => return Err(format!("TreeEnsemble input must be [N, F], got {x:?}")),
    };
    if a.nodes.chunks_exact(k::NODE_WORDS).any(|r| r[1] as usize >= features) {
        return Err(format!("a node reads a feature past the input's {features}"));
    }
    Ok((k::Trees { n, features, targets: a.targets, aggregate: a.aggregate }, vec![n, a.targets]))
}

pub fn tables(a: &TreeEnsembleAttrs) -> k::TreeTables<'_> {
    k::TreeTables {
        nodes: &a.nodes,
        splits: &a.splits,
        members: &a.members,
        leaf_weights: &a.leaf_weights,
        leaf_targets: &a.leaf_targets,
        roots: &a.roots,
    }
}

/// Output dtype of TreeEnsemble for features of type `d`.
pub fn tree_dtype(d: DType) -> Option<DType> {
    matches!(d, DType::F32 | DType::F64).then_some(d)
}
