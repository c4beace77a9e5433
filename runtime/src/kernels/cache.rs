//! TensorScatter: write an update block into a cache along the sequence axis at a per-batch
//! position (linear, or circular modulo the cache length).

/// Cache [batch, mid…, max_seq, inner…] and update [batch, mid…, seq, inner…] flattened to
/// (batch, mid, max_seq | seq, inner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheDims {
    pub batch: usize,
    pub mid: usize,
    pub max_seq: usize,
    pub seq: usize,
    pub inner: usize,
}

/// `out` = `past` with `update` written at rows write_indices[b] + s (mod max_seq when
/// `circular`); no indices means position 0. Returns false when a row falls outside the cache
/// (that row is skipped) or an index is missing.
pub fn tensor_scatter<T: Copy>(past: &[T], update: &[T], write_indices: Option<&[i64]>, d: &CacheDims, circular: bool, out: &mut [T]) -> bool {
    out.copy_from_slice(past);
    let mut ok = true;
    for b in 0..d.batch {
        let start = match write_indices {
            Some(w) => match w.get(b) {
                Some(&v) => v,
                None => {
                    ok = false;
                    continue;
                }
            },
            None => 0,
        };
        for m in 0..d.mid {
            let outer = b * d.mid + m;
            for s in 0..d.seq {
                let mut row = start + s as i64;
                if circular && d.max_seq > 0 {
                    row = row.rem_euclid(d.max_seq as i64);
                }
                if row < 0 || row as usize >= d.max_seq {
                    ok = false;
                    continue;
                }
                let dst = (outer * d.max_seq + row as usize) * d.inner;
                let src = (outer * d.seq + s) * d.inner;
                out[dst..dst + d.inner].copy_from_slice(&update[src..src + d.inner]);
            }
        }
    }
    ok
}
