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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_circular_writes() {
        // Two batches, cache of 3 rows of 1, updates of 2 rows.
        let d = CacheDims { batch: 2, mid: 1, max_seq: 3, seq: 2, inner: 1 };
        let past = [0, 0, 0, 0, 0, 0];
        let upd = [1, 2, 3, 4];
        let mut out = [9; 6];
        assert!(tensor_scatter(&past, &upd, Some(&[0, 1]), &d, false, &mut out));
        assert_eq!(out, [1, 2, 0, 0, 3, 4]);
        assert!(tensor_scatter(&past, &upd, Some(&[2, 1]), &d, true, &mut out));
        assert_eq!(out, [2, 0, 1, 0, 3, 4]);
        // Linear past the end: that row is skipped and reported.
        assert!(!tensor_scatter(&past, &upd, Some(&[2, 0]), &d, false, &mut out));
        assert_eq!(out, [0, 0, 1, 3, 4, 0]);
    }
}
