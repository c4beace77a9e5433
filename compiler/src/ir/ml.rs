//! Attributes of the classic-ML ops, already in the flat-table form the runtime kernels take
//! (`burnc_runtime::kernels::ml`); the frontend builds and validates them.

/// TfIdfVectorizer (integer pools).
#[derive(Debug, Clone, PartialEq)]
pub struct TfIdfAttrs {
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

/// TreeEnsemble (ai.onnx.ml 5) as `kernels::ml::TreeTables`.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeEnsembleAttrs {
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
