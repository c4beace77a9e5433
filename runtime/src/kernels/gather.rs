//! Gather: rows along an axis picked by index. GatherElements: `out[i…] = x[i…]` with the
//! coordinate along `axis` replaced by the index at the same position, and GatherND, for dims
//! given at run time. An index outside its dim
//! (after adding the dim to a negative one) reads `zero`: generated code does not fail.
//! Compress: listed rows along an axis.
use crate::Elem;

/// Gather over `x` seen as `[outer, len, inner]`: `out[o, j, ..] = x[o, idx[j], ..]`, rows of
/// `inner` elements (`out` is `[outer, idx.len(), inner]`).
pub fn gather<T: Copy, I: Elem>(x: &[T], [outer, len, inner]: [usize; 3], idx: &[I], zero: T, out: &mut [T]) {
    let m = idx.len();
    assert!(x.len() >= outer * len * inner && out.len() == outer * m * inner, "gather: slices too short");
    if m == 0 || inner == 0 {
        return;
    }
    for (o, rows) in out.chunks_exact_mut(m * inner).enumerate() {
        let src = &x[o * len * inner..(o + 1) * len * inner];
        // One element per index (a gather along the last axis): a copy call per element
        // would cost more than the element.
        if inner == 1 {
            for (d, i) in rows.iter_mut().zip(idx) {
                *d = match row_of(i, len) {
                    Some(v) => src[v],
                    None => zero,
                };
            }
            continue;
        }
        for (dst, i) in rows.chunks_exact_mut(inner).zip(idx) {
            match row_of(i, len) {
                Some(v) => dst.copy_from_slice(&src[v * inner..(v + 1) * inner]),
                None => dst.fill(zero),
            }
        }
    }
}

/// Index `i` along an axis of `len` (negative counts from the end), `None` out of range.
#[inline(always)]
fn row_of<I: Elem>(i: &I, len: usize) -> Option<usize> {
    let v = i.to_i64();
    let v = if v < 0 { v + len as i64 } else { v };
    (0..len as i64).contains(&v).then_some(v as usize)
}

/// `out` has `idx`'s dims; `idx`'s dims are at most `x`'s off the axis.
pub fn gather_elements<T: Copy, I: Elem>(x: &[T], x_dims: &[usize], idx: &[I], idx_dims: &[usize], axis: usize, zero: T, out: &mut [T]) {
    let r = x_dims.len();
    assert!(idx_dims.len() == r && axis < r, "gather_elements: ranks or axis");
    assert!((0..r).all(|d| d == axis || idx_dims[d] <= x_dims[d]), "gather_elements: indices exceed the data off the axis");
    let n: usize = idx_dims.iter().product();
    assert!(x.len() >= x_dims.iter().product::<usize>() && idx.len() >= n && out.len() >= n, "gather_elements: slices too short");
    if n > 0 {
        walk(x, x_dims, idx, idx_dims, axis, zero, out, 0, 0, 0);
    }
}

/// Dim `d` onwards: `xo` the data offset without the axis coordinate, `o` the output offset.
#[allow(clippy::too_many_arguments)]
fn walk<T: Copy, I: Elem>(x: &[T], xd: &[usize], idx: &[I], id: &[usize], axis: usize, zero: T, out: &mut [T], d: usize, xo: usize, o: usize) {
    let (xs, os): (usize, usize) = (xd[d + 1..].iter().product(), id[d + 1..].iter().product());
    let last = d + 1 == xd.len();
    for j in 0..id[d] {
        let xj = if d == axis { xo } else { xo + j * xs };
        let oj = o + j * os;
        if !last {
            walk(x, xd, idx, id, axis, zero, out, d + 1, xj, oj);
            continue;
        }
        let len = xd[axis] as i64;
        let v = idx[oj].to_i64();
        let v = if v < 0 { v + len } else { v };
        let step: usize = xd[axis + 1..].iter().product();
        out[oj] = if (0..len).contains(&v) { x[xj + v as usize * step] } else { zero };
    }
}

/// GatherND: `idx` (dims `[b…, m…, k]`) holds `k`-tuples indexing `x`'s dims after its
/// `batch` leading ones (which it shares); `out` is `[b…, m…, rest…]`, each tuple's slice of
/// `x` (`rest`: `x`'s dims after the tuple's). A tuple entry outside its dim (after adding the
/// dim to a negative one) gives a slice of `zero`.
pub fn gather_nd<T: Copy, I: Elem>(x: &[T], x_dims: &[usize], idx: &[I], idx_dims: &[usize], batch: usize, zero: T, out: &mut [T]) {
    let q = idx_dims.len();
    assert!(q > batch && x_dims.len() >= batch + idx_dims[q - 1] && x_dims[..batch] == idx_dims[..batch], "gather_nd: ranks or batch dims");
    let k = idx_dims[q - 1];
    let nb: usize = x_dims[..batch].iter().product();
    let per: usize = idx_dims[batch..q - 1].iter().product();
    let slice: usize = x_dims[batch + k..].iter().product();
    let bstride: usize = x_dims[batch..].iter().product();
    assert!(x.len() >= nb * bstride && idx.len() >= nb * per * k && out.len() >= nb * per * slice, "gather_nd: slices too short");
    for b in 0..nb {
        for t in 0..per {
            let tuple = &idx[(b * per + t) * k..(b * per + t + 1) * k];
            // The tuple's offset, innermost entry first.
            let (mut off, mut stride, mut inside) = (b * bstride, slice, true);
            for j in (0..k).rev() {
                let d = x_dims[batch + j];
                let v = tuple[j].to_i64();
                let v = if v < 0 { v + d as i64 } else { v };
                if !(0..d as i64).contains(&v) {
                    inside = false;
                    break;
                }
                off += v as usize * stride;
                stride *= d;
            }
            let o = (b * per + t) * slice;
            let dst = &mut out[o..o + slice];
            if inside {
                dst.copy_from_slice(&x[off..off + slice]);
            } else {
                dst.fill(zero);
            }
        }
    }
}

/// Compress: `out` holds the `keep` entries, in order, along the middle dim of `x` viewed as
/// `[outer, len, inner]`. An entry outside `0..len` gives `zero`s (the interpreter and the
/// bounded module's size checks refuse it before).
pub fn compress<T: Copy>(x: &[T], [outer, len, inner]: [usize; 3], keep: &[i64], zero: T, out: &mut [T]) {
    let m = keep.len();
    assert!(x.len() >= outer * len * inner && out.len() >= outer * m * inner, "compress: slices too short");
    for o in 0..outer {
        for (j, &k) in keep.iter().enumerate() {
            let d = &mut out[(o * m + j) * inner..(o * m + j + 1) * inner];
            if (0..len as i64).contains(&k) {
                let s = (o * len + k as usize) * inner;
                d.copy_from_slice(&x[s..s + inner]);
            } else {
                d.fill(zero);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn along_each_axis_and_out_of_range() {
        let x = [1, 2, 3, 4, 5, 6]; // [[1, 2, 3], [4, 5, 6]]
        let mut y = [0; 4];
        gather_elements(&x, &[2, 3], &[2i64, 0, -1, 1], &[2, 2], 1, 0, &mut y);
        assert_eq!(y, [3, 1, 6, 5]);
        let mut y = [0; 3];
        gather_elements(&x, &[2, 3], &[1i32, 0, 5], &[1, 3], 0, 0, &mut y);
        assert_eq!(y, [4, 2, 0]);
    }

    #[test]
    fn gather_nd_tuples_batches_and_out_of_range() {
        let x = [0, 1, 2, 3, 4, 5, 6, 7]; // [2, 2, 2]
        // Whole rows by 2-tuples; one out of range.
        let mut y = [9; 6];
        gather_nd(&x, &[2, 2, 2], &[0i64, 1, 1, -1, 2, 0], &[3, 2], 0, -1, &mut y);
        assert_eq!(y, [2, 3, 6, 7, -1, -1]);
        // One batch dim: index 1 of batch 0, index 0 of batch 1.
        let mut y = [0; 4];
        gather_nd(&x, &[2, 2, 2], &[1i32, 0], &[2, 1], 1, 0, &mut y);
        assert_eq!(y, [2, 3, 4, 5]);
    }

    #[test]
    fn compress_keeps_the_listed_rows() {
        let x = [1, 2, 3, 4, 5, 6]; // [[1, 2, 3], [4, 5, 6]]
        let mut y = [0; 4];
        compress(&x, [2, 3, 1], &[0, 2], -1, &mut y);
        assert_eq!(y, [1, 3, 4, 6]);
        let mut y = [0; 6];
        compress(&x, [1, 2, 3], &[1, 5], -1, &mut y);
        assert_eq!(y, [4, 5, 6, -1, -1, -1]);
    }
}
