//! Elementwise maps with numpy broadcasting, given per-input strides (0 on broadcast dims).

/// `out[i] = f(a[ia], b[ib])` over `out_shape`, where `a_strides`/`b_strides` are the inputs'
/// strides against the output's dims (0 where broadcast). Rows of the last dim split over the
/// thread pool when long.
pub fn binary<A: Copy + Sync, B: Copy + Sync, O: Send>(
    a: &[A],
    a_strides: &[usize],
    b: &[B],
    b_strides: &[usize],
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(A, B) -> O + Sync,
) {
    let n = out.len();
    if n == 0 {
        return;
    }
    // Both dense and equal, or one side a scalar: one flat row.
    let flat = match (a.len() == n, b.len() == n, a.len() == 1, b.len() == 1) {
        (true, true, _, _) => Some((1, 1)),
        (true, _, _, true) => Some((1, 0)),
        (_, true, true, _) => Some((0, 1)),
        _ => None,
    };
    if let Some((sa, sb)) = flat {
        crate::for_plane_ranges(n, 1, n, out, &|j0, _, o| row(o, &a[j0 * sa..], sa, &b[j0 * sb..], sb, &f));
        return;
    }
    if out_shape.len() <= MAX_COALESCED {
        let mut dims = [[0usize; 3]; MAX_COALESCED];
        let rank = coalesce(out_shape, a_strides, b_strides, &mut dims);
        if rank == 0 {
            // Every dim is 1: one element.
            out[0] = f(a[0], b[0]);
            return;
        }
        let shape: [usize; MAX_COALESCED] = core::array::from_fn(|d| dims[d][0]);
        let sa: [usize; MAX_COALESCED] = core::array::from_fn(|d| dims[d][1]);
        let sb: [usize; MAX_COALESCED] = core::array::from_fn(|d| dims[d][2]);
        return rows_of(a, &sa[..rank], b, &sb[..rank], out, &shape[..rank], f);
    }
    rows_of(a, a_strides, b, b_strides, out, out_shape, f)
}

/// Most dims [`coalesce`] takes (more: the rows as given).
const MAX_COALESCED: usize = 16;

/// `shape` with its size-1 dims dropped and adjacent dims that both inputs step through
/// contiguously, or not at all, merged (`dims[d] = [size, a's stride, b's stride]`, outer
/// first); returns how many dims are left. A per-channel scale `[1, C, H, W] × [1, C, 1, 1]`
/// becomes `[C, H·W] × [C, 1]`: rows are whole planes, not rows of W (7 on a squeeze-
/// excitation block's last maps, each with the odometer's bookkeeping).
fn coalesce(shape: &[usize], sa: &[usize], sb: &[usize], dims: &mut [[usize; 3]; MAX_COALESCED]) -> usize {
    let mut k = 0;
    for d in (0..shape.len()).rev() {
        let (n, a, b) = (shape[d], sa[d], sb[d]);
        if n == 1 {
            continue;
        }
        if k > 0 {
            let [m, pa, pb] = dims[k - 1];
            if a == pa * m && b == pb * m {
                dims[k - 1][0] = m * n;
                continue;
            }
        }
        dims[k] = [n, a, b];
        k += 1;
    }
    dims[..k].reverse();
    k
}

/// [`binary`] over rows of the innermost dim, split over the pool in whole rows.
fn rows_of<A: Copy + Sync, B: Copy + Sync, O: Send>(a: &[A], a_strides: &[usize], b: &[B], b_strides: &[usize], out: &mut [O], out_shape: &[usize], f: impl Fn(A, B) -> O + Sync) {
    let n = out.len();
    let rank = out_shape.len();
    let inner = out_shape[rank - 1];
    let (sa, sb) = (a_strides[rank - 1], b_strides[rank - 1]);
    let rows = if inner == 0 { 0 } else { n / inner };
    crate::for_plane_ranges(rows, inner, n, out, &|r0, r1, out| with_index(rank, |idx| {
        // The multi-index of row r0 and its input offsets.
        let (mut oa, mut ob, mut rest) = (0usize, 0usize, r0);
        for d in (0..rank - 1).rev() {
            idx[d] = rest % out_shape[d];
            rest /= out_shape[d];
            oa += idx[d] * a_strides[d];
            ob += idx[d] * b_strides[d];
        }
        for o in out[..(r1 - r0) * inner].chunks_exact_mut(inner) {
            row(o, &a[oa..], sa, &b[ob..], sb, &f);
            // Advance the outer multi-index.
            let mut d = rank - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                oa += a_strides[d];
                ob += b_strides[d];
                if idx[d] < out_shape[d] {
                    break;
                }
                oa -= a_strides[d] * out_shape[d];
                ob -= b_strides[d] * out_shape[d];
                idx[d] = 0;
            }
        }
    }));
}

/// One row: `o[j] = f(a[j·sa], b[j·sb])`, the unit and zero strides as loops over slices
/// (which vectorize).
#[inline(always)]
fn row<A: Copy, B: Copy, O>(o: &mut [O], a: &[A], sa: usize, b: &[B], sb: usize, f: &impl Fn(A, B) -> O) {
    let n = o.len();
    match (sa, sb) {
        (1, 1) => o.iter_mut().zip(&a[..n]).zip(&b[..n]).for_each(|((o, &x), &y)| *o = f(x, y)),
        (1, 0) => {
            let y = b[0];
            o.iter_mut().zip(&a[..n]).for_each(|(o, &x)| *o = f(x, y));
        }
        (0, 1) => {
            let x = a[0];
            o.iter_mut().zip(&b[..n]).for_each(|(o, &y)| *o = f(x, y));
        }
        _ => {
            for (j, o) in o.iter_mut().enumerate() {
                *o = f(a[j * sa], b[j * sb]);
            }
        }
    }
}

/// `out[i] = f(c[ic], a[ia], b[ib])` with broadcasting (Where).
#[allow(clippy::too_many_arguments)]
pub fn ternary<C: Copy, A: Copy, B: Copy, O>(
    c: &[C],
    c_strides: &[usize],
    a: &[A],
    a_strides: &[usize],
    b: &[B],
    b_strides: &[usize],
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(C, A, B) -> O,
) {
    let rank = out_shape.len();
    with_index(rank, |idx| ternary_walk(c, c_strides, a, a_strides, b, b_strides, out, out_shape, idx, &f));
}

/// [`ternary`]'s odometer over the output, `idx` its multi-index (zeros).
#[allow(clippy::too_many_arguments)]
fn ternary_walk<C: Copy, A: Copy, B: Copy, O>(
    c: &[C],
    c_strides: &[usize],
    a: &[A],
    a_strides: &[usize],
    b: &[B],
    b_strides: &[usize],
    out: &mut [O],
    out_shape: &[usize],
    idx: &mut [usize],
    f: &impl Fn(C, A, B) -> O,
) {
    let rank = out_shape.len();
    let (mut oc, mut oa, mut ob) = (0usize, 0usize, 0usize);
    for o in out.iter_mut() {
        *o = f(c[oc], a[oa], b[ob]);
        let mut d = rank;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            oc += c_strides[d];
            oa += a_strides[d];
            ob += b_strides[d];
            if idx[d] < out_shape[d] {
                break;
            }
            oc -= c_strides[d] * out_shape[d];
            oa -= a_strides[d] * out_shape[d];
            ob -= b_strides[d] * out_shape[d];
            idx[d] = 0;
        }
    }
}

/// `f` given a multi-index of `rank` zeros: on the stack up to rank 16, else allocated.
#[inline(always)]
fn with_index<R>(rank: usize, f: impl FnOnce(&mut [usize]) -> R) -> R {
    if rank <= 16 {
        f(&mut [0usize; 16][..rank])
    } else {
        f(&mut alloc_index(rank)[..])
    }
}

#[cfg(feature = "alloc")]
fn alloc_index(rank: usize) -> alloc::vec::Vec<usize> {
    alloc::vec![0; rank]
}

/// Without an allocator ranks above 16 cannot be indexed; generated code never emits them.
#[cfg(not(feature = "alloc"))]
fn alloc_index(_rank: usize) -> [usize; 16] {
    panic!("rank > 16 needs the `alloc` feature")
}

/// Expand: `out` (of `out_dims`, rank at most 16) reads `x` at `x_strides` against the
/// output's dims (0 where broadcast). The trailing dims `x` holds contiguously are copied as
/// runs, or, when the last dim is broadcast, the trailing broadcast dims are filled.
pub fn expand<T: Copy>(x: &[T], x_strides: &[usize], out: &mut [T], out_dims: &[usize]) {
    let rank = out_dims.len();
    assert!(rank <= 16 && x_strides.len() == rank && out.len() == out_dims.iter().product::<usize>(), "expand: shapes do not match");
    if out.is_empty() {
        return;
    }
    let (mut d, mut run) = (rank, 1usize);
    while d > 0 && (out_dims[d - 1] == 1 || x_strides[d - 1] == run) {
        run *= out_dims[d - 1];
        d -= 1;
    }
    let fill = run == 1;
    if fill {
        while d > 0 && (out_dims[d - 1] == 1 || x_strides[d - 1] == 0) {
            run *= out_dims[d - 1];
            d -= 1;
        }
    }
    let (dims, st) = (&out_dims[..d], &x_strides[..d]);
    let mut idx = [0usize; 16];
    let mut off = 0usize;
    for chunk in out.chunks_exact_mut(run) {
        if fill {
            chunk.fill(x[off]);
        } else {
            chunk.copy_from_slice(&x[off..off + run]);
        }
        off = super::permute::advance(&mut idx, off, dims, st);
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Broadcast strides of `xs` against `os` (trailing alignment, 0 where broadcast).
    fn strides(xs: &[usize], os: &[usize]) -> Vec<usize> {
        let r = os.len();
        let mut st = alloc::vec![0usize; r];
        let mut acc = 1;
        for i in (0..r).rev() {
            let d = (i + xs.len()).checked_sub(r).map_or(1, |j| xs[j]);
            if d != 1 {
                st[i] = acc;
            }
            acc *= d;
        }
        st
    }

    /// `binary` (whose dims are coalesced first) against an element-by-element walk of the
    /// output's multi-index: per-channel scales, size-1 dims between others, a scalar, equal
    /// shapes, both sides broadcast, a transposed (non-contiguous) view, one element.
    #[test]
    fn binary_matches_the_index_walk() {
        type Case = (&'static [usize], Option<&'static [usize]>, &'static [usize], &'static [usize]);
        let cases: [Case; 9] = [
            (&[1, 6, 5, 7], None, &[1, 6, 1, 1], &[1, 6, 5, 7]),
            (&[2, 6, 5, 7], None, &[6, 1, 1], &[2, 6, 5, 7]),
            (&[3, 1, 4], None, &[1, 5, 1], &[3, 5, 4]),
            (&[4, 1, 1, 3], None, &[1], &[4, 1, 1, 3]),
            (&[2, 3, 4], None, &[2, 3, 4], &[2, 3, 4]),
            (&[5, 1], None, &[1, 6], &[5, 6]),
            // a is the transpose of a 4×3 matrix (strides [1, 3] over a [3, 4] output).
            (&[4, 3], Some(&[1, 3]), &[3, 1], &[3, 4]),
            (&[1, 1], None, &[1, 1, 1], &[1, 1, 1]),
            (&[2, 1, 3, 1, 2], None, &[1, 4, 1, 5, 1], &[2, 4, 3, 5, 2]),
        ];
        for (ash, ast, bsh, os) in cases {
            let sa = ast.map_or_else(|| strides(ash, os), |s| s.to_vec());
            let sb = strides(bsh, os);
            let a: Vec<i64> = (0..ash.iter().product::<usize>() as i64).collect();
            let b: Vec<i64> = (0..bsh.iter().product::<usize>() as i64).map(|v| 1000 * v).collect();
            let n: usize = os.iter().product();
            let mut got = alloc::vec![0i64; n];
            binary(&a, &sa, &b, &sb, &mut got, os, |x, y| x + y);
            for (i, g) in got.iter().enumerate() {
                let (mut rest, mut ia, mut ib) = (i, 0, 0);
                for d in (0..os.len()).rev() {
                    let c = rest % os[d];
                    rest /= os[d];
                    ia += c * sa[d];
                    ib += c * sb[d];
                }
                assert_eq!(*g, a[ia] + b[ib], "{ash:?} {bsh:?} -> {os:?} at {i}");
            }
        }
    }

    #[test]
    fn expand_matches_broadcast_binary() {
        let cases: [(&[usize], &[usize]); 7] = [
            (&[3, 1], &[2, 3, 4]),
            (&[1, 4], &[3, 4]),
            (&[2, 1, 5], &[2, 3, 5]),
            (&[1], &[2, 2]),
            (&[3, 1, 1], &[3, 2, 2]),
            (&[1, 3, 1, 2], &[2, 3, 2, 2]),
            (&[2, 3], &[2, 3]),
        ];
        for (xs, os) in cases {
            let r = os.len();
            let mut st = alloc::vec![0usize; r];
            let mut acc = 1;
            for i in (0..r).rev() {
                let j = (i + xs.len()).checked_sub(r);
                let d = j.map_or(1, |j| xs[j]);
                if d != 1 {
                    st[i] = acc;
                }
                acc *= d;
            }
            let x: Vec<u32> = (0..xs.iter().product::<usize>() as u32).collect();
            let n = os.iter().product();
            let (mut want, mut got) = (alloc::vec![0u32; n], alloc::vec![0u32; n]);
            binary(&x, &st, &x, &st, &mut want, os, |p, _| p);
            expand(&x, &st, &mut got, os);
            assert_eq!(got, want, "{xs:?} -> {os:?}");
        }
    }
}
