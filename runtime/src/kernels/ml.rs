//! Classic-ML ops (ai.onnx.ml and TfIdfVectorizer): n-gram counting and tree ensembles over
//! flat tables the compiler builds from the node's attributes.
use super::real::Real;

/// TfIdfVectorizer weighting modes.
pub const TF: u8 = 1;
pub const IDF: u8 = 2;
pub const TFIDF: u8 = 3;

/// TfIdfVectorizer geometry: `rows` × `cols` input ids, `out` columns per output row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TfIdf {
    pub rows: usize,
    pub cols: usize,
    pub out: usize,
    pub min_gram: usize,
    pub max_gram: usize,
    pub max_skip: usize,
    pub mode: u8,
}

/// Why a pool/ngram_counts/ngram_indexes triple is malformed, if it is.
pub fn tfidf_check(pool_len: usize, counts: &[i64], indexes: &[i64], out: usize) -> Result<(), &'static str> {
    let mut prev = 0i64;
    let mut grams = 0usize;
    for (lvl, &c) in counts.iter().enumerate() {
        if c < prev || c as usize > pool_len {
            return Err("ngram_counts must be non-decreasing offsets into the pool");
        }
        prev = c;
        let end = counts.get(lvl + 1).map_or(pool_len as i64, |&e| e.max(c)) as usize;
        grams += (end.min(pool_len) - c as usize) / (lvl + 1);
    }
    if indexes.len() < grams {
        return Err("ngram_indexes has fewer entries than the pool has n-grams");
    }
    if indexes.iter().any(|&i| i < 0 || i as usize >= out) {
        return Err("ngram_indexes out of range");
    }
    Ok(())
}

/// Id (position in pool order, over all levels) of the last pooled n-gram of size `n` equal to
/// `row[s], row[s + d], …`.
fn find<T: Copy + Into<i64>>(row: &[T], s: usize, d: usize, n: usize, pool: &[i64], counts: &[i64]) -> Option<usize> {
    let mut base = 0usize;
    for (lvl, &c) in counts.iter().enumerate() {
        let size = lvl + 1;
        let start = (c.max(0) as usize).min(pool.len());
        let end = counts.get(lvl + 1).map_or(pool.len(), |&e| (e.max(0) as usize).min(pool.len())).max(start);
        let grams = (end - start) / size;
        if size == n {
            let mut hit = None;
            for k in 0..grams {
                let g = &pool[start + k * size..start + (k + 1) * size];
                if g.iter().enumerate().all(|(j, &p)| row.get(s + j * d).map(|&v| v.into()) == Some(p)) {
                    hit = Some(base + k);
                }
            }
            return hit;
        }
        base += grams;
    }
    None
}

/// TfIdfVectorizer (the ONNX reference's trie walk, flattened): for each skip distance, every
/// n-gram of sizes `min_gram..=max_gram` (unigrams only at distance 1) found in the pool counts
/// towards its `indexes` column; then the mode's weighting. `y` has `rows * out` elements.
pub fn tfidf<T: Copy + Into<i64>>(x: &[T], p: &TfIdf, pool: &[i64], counts: &[i64], indexes: &[i64], weights: &[f32], y: &mut [f32]) {
    y.fill(0.0);
    for r in 0..p.rows {
        let (Some(row), Some(yr)) = (x.get(r * p.cols..(r + 1) * p.cols), y.get_mut(r * p.out..(r + 1) * p.out)) else { return };
        for d in 1..=p.max_skip + 1 {
            let start_n = if d == 1 { p.min_gram.max(1) } else { p.min_gram.max(2) };
            if start_n > p.max_gram {
                break;
            }
            for s in 0..p.cols {
                if s + d * (start_n - 1) >= p.cols {
                    break;
                }
                for n in start_n..=p.max_gram {
                    if s + d * (n - 1) >= p.cols {
                        break;
                    }
                    let col = find(row, s, d, n, pool, counts).and_then(|id| indexes.get(id)).map(|&c| c as usize);
                    if let Some(v) = col.and_then(|c| yr.get_mut(c)) {
                        *v += 1.0;
                    }
                }
            }
        }
    }
    let out = p.out.max(1);
    for (i, v) in y.iter_mut().enumerate() {
        let w = weights.get(i % out).copied();
        *v = match (p.mode, w) {
            (IDF, Some(w)) => if *v > 0.0 { w } else { 0.0 },
            (IDF, None) => if *v > 0.0 { 1.0 } else { 0.0 },
            (TFIDF, Some(w)) => w * *v,
            _ => *v,
        };
    }
}

/// Tree-ensemble node comparison modes (ONNX `nodes_modes`).
pub const LEQ: u32 = 0;
pub const LT: u32 = 1;
pub const GTE: u32 = 2;
pub const GT: u32 = 3;
pub const EQ: u32 = 4;
pub const NEQ: u32 = 5;
pub const MEMBER: u32 = 6;

/// Words per node record in `nodes`: mode, feature, true id, false id, flags (bit 0: true
/// branch is a leaf, bit 1: false branch is a leaf, bit 2: NaN goes true), set start, set length.
pub const NODE_WORDS: usize = 7;

/// Tree-ensemble aggregation.
pub const AVERAGE: u8 = 0;
pub const SUM: u8 = 1;
pub const MIN: u8 = 2;
pub const MAX: u8 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trees {
    pub n: usize,
    pub features: usize,
    pub targets: usize,
    pub aggregate: u8,
}

/// The flat tables of an ensemble; `roots` holds (index, is leaf) pairs.
pub struct TreeTables<'a> {
    pub nodes: &'a [u32],
    pub splits: &'a [f64],
    pub members: &'a [f64],
    pub leaf_weights: &'a [f64],
    pub leaf_targets: &'a [u32],
    pub roots: &'a [u32],
}

fn goes_true(x: f64, node: &[u32], split: f64, members: &[f64]) -> bool {
    if x.is_nan() && node[4] & 4 != 0 {
        return true;
    }
    match node[0] {
        LEQ => x <= split,
        LT => x < split,
        GTE => x >= split,
        GT => x > split,
        EQ => x == split,
        NEQ => x != split,
        _ => members.get(node[5] as usize..(node[5] + node[6]) as usize).is_some_and(|m| m.contains(&x)),
    }
}

/// The leaf a row reaches from `(index, is_leaf)`; `None` on a malformed table or a cycle.
fn walk<T: Real>(row: &[T], t: &TreeTables, mut at: usize, mut leaf: bool) -> Option<usize> {
    for _ in 0..=t.splits.len() {
        if leaf {
            return Some(at);
        }
        let node = t.nodes.get(at * NODE_WORDS..(at + 1) * NODE_WORDS)?;
        let x = row.get(node[1] as usize)?.to_f64();
        let go = goes_true(x, node, *t.splits.get(at)?, t.members);
        (at, leaf) = if go { (node[2] as usize, node[4] & 1 != 0) } else { (node[3] as usize, node[4] & 2 != 0) };
    }
    None
}

/// TreeEnsemble (ai.onnx.ml 5) with the reference's arithmetic: each tree's leaf weight joins
/// its target in f64 and the running value is rounded to `T` after every tree. `max_finite` is
/// `T`'s largest finite value (MIN starts there, MAX at its negation).
pub fn tree_ensemble<T: Real>(x: &[T], p: &Trees, t: &TreeTables, max_finite: f64, y: &mut [T]) {
    let init = match p.aggregate {
        MIN => T::from_f64(max_finite),
        MAX => T::from_f64(-max_finite),
        _ => T::default(),
    };
    y.fill(init);
    let trees = t.roots.len() / 2;
    for b in 0..p.n {
        let (Some(xr), Some(yr)) = (x.get(b * p.features..(b + 1) * p.features), y.get_mut(b * p.targets..(b + 1) * p.targets)) else { return };
        for r in t.roots.chunks_exact(2) {
            let Some(l) = walk(xr, t, r[0] as usize, r[1] != 0) else { continue };
            let (Some(&w), Some(&tid)) = (t.leaf_weights.get(l), t.leaf_targets.get(l)) else { continue };
            let Some(acc) = yr.get_mut(tid as usize) else { continue };
            let a = acc.to_f64();
            *acc = T::from_f64(match p.aggregate {
                SUM => a + w,
                AVERAGE => a + w / trees as f64,
                MIN => a.min(w),
                _ => a.max(w),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tfidf_counts_unigrams_and_bigrams() {
        // Pool: unigram [1], bigram [1, 2]; ids 1 2 1 2 hold two of each.
        let p = TfIdf { rows: 1, cols: 4, out: 2, min_gram: 1, max_gram: 2, max_skip: 0, mode: TF };
        let mut y = [0f32; 2];
        tfidf(&[1i64, 2, 1, 2], &p, &[1, 1, 2], &[0, 1], &[0, 1], &[], &mut y);
        assert_eq!(y, [2.0, 2.0]);
        // Skipping one id pairs 1 with the next 1 and 2 with the next 2: no (1, 2) bigram added.
        let p = TfIdf { max_skip: 1, min_gram: 2, ..p };
        tfidf(&[1i64, 2, 1, 2], &p, &[1, 1, 2], &[0, 1], &[0, 1], &[], &mut y);
        assert_eq!(y, [0.0, 2.0]);
    }

    #[test]
    fn tree_splits_on_leq() {
        // One node: x0 <= 0.5 → leaf 0 (weight 1), else leaf 1 (weight 2).
        let t = TreeTables { nodes: &[LEQ, 0, 0, 1, 3, 0, 0], splits: &[0.5], members: &[], leaf_weights: &[1.0, 2.0], leaf_targets: &[0, 0], roots: &[0, 0] };
        let mut y = [0f32; 2];
        tree_ensemble(&[0.0f32, 1.0], &Trees { n: 2, features: 1, targets: 1, aggregate: SUM }, &t, f32::MAX as f64, &mut y);
        assert_eq!(y, [1.0, 2.0]);
    }
}
