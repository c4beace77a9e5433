//! One input's part of a Concat (and one output's of a Split, its inverse): `outer` runs of `chunk` elements, each copied into a row of
//! `row` elements at offset `start`. Large copies split over the pool (DenseNet concatenates
//! hundreds of KiB per layer; a copy that stays in a core's L2 goes about twice as fast on two
//! cores).

/// Elements below which a copy stays on one thread.
#[cfg(feature = "std")]
const PARALLEL_ELEMS: usize = 1 << 16;

/// `y[o·row + start .. o·row + start + chunk] = x[o·chunk .. (o + 1)·chunk]` for `o < outer`.
pub fn concat_part<T: Copy + Send + Sync>(y: &mut [T], x: &[T], outer: usize, row: usize, start: usize, chunk: usize) {
    assert!(start + chunk <= row && x.len() >= outer * chunk && (outer == 0 || y.len() >= (outer - 1) * row + start + chunk), "concat_part: slices too short");
    let total = outer * chunk;
    #[cfg(feature = "std")]
    {
        let threads = crate::pool::threads();
        if threads > 1 && total >= PARALLEL_ELEMS {
            let pieces = threads * 2;
            let per = total.div_ceil(pieces);
            let yp = y.as_mut_ptr() as usize;
            crate::pool::parallel_for(pieces, &|t| {
                let (a, b) = (t * per, ((t + 1) * per).min(total));
                // Elements a..b of the flattened source, run by run.
                let mut i = a;
                while i < b {
                    let (o, off) = (i / chunk, i % chunk);
                    let n = (chunk - off).min(b - i);
                    let at = o * row + start + off;
                    // SAFETY: pieces cover disjoint ranges of the source, so disjoint runs of
                    // `y` (each inside it by the assert above); `y` is not otherwise used until
                    // every piece has returned.
                    let dst = unsafe { core::slice::from_raw_parts_mut((yp as *mut T).add(at), n) };
                    dst.copy_from_slice(&x[i..i + n]);
                    i += n;
                }
            });
            return;
        }
    }
    let _ = total;
    for o in 0..outer {
        y[o * row + start..o * row + start + chunk].copy_from_slice(&x[o * chunk..(o + 1) * chunk]);
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn parts_land_where_concat_puts_them() {
        // Two inputs along axis 1 of [3, 5+7, 4]: outer 3, rows of 48.
        let (outer, a, b, inner) = (3, 5, 7, 4);
        let xa: Vec<f32> = (0..outer * a * inner).map(|v| v as f32).collect();
        let xb: Vec<f32> = (0..outer * b * inner).map(|v| 1000.0 + v as f32).collect();
        let row = (a + b) * inner;
        let mut y = vec![f32::NAN; outer * row];
        concat_part(&mut y, &xa, outer, row, 0, a * inner);
        concat_part(&mut y, &xb, outer, row, a * inner, b * inner);
        for o in 0..outer {
            assert_eq!(&y[o * row..o * row + a * inner], &xa[o * a * inner..(o + 1) * a * inner]);
            assert_eq!(&y[o * row + a * inner..(o + 1) * row], &xb[o * b * inner..(o + 1) * b * inner]);
        }
    }
}

/// The inverse of [`concat_part`], one part of a Split: `y[o·chunk .. (o + 1)·chunk] =
/// x[o·row + start .. o·row + start + chunk]` for `o < outer`.
pub fn split_part<T: Copy>(x: &[T], y: &mut [T], outer: usize, row: usize, start: usize, chunk: usize) {
    assert!(start + chunk <= row && y.len() >= outer * chunk && (outer == 0 || x.len() >= (outer - 1) * row + start + chunk), "split_part: slices too short");
    for o in 0..outer {
        y[o * chunk..(o + 1) * chunk].copy_from_slice(&x[o * row + start..o * row + start + chunk]);
    }
}

