//! Elementwise maps with numpy broadcasting, given per-input strides (0 on broadcast dims).

/// `out[i] = f(a[ia], b[ib])` over `out_shape`, where `a_strides`/`b_strides` are the inputs'
/// strides against the output's dims (0 where broadcast).
pub fn binary<A: Copy, B: Copy, O>(
    a: &[A],
    a_strides: &[usize],
    b: &[B],
    b_strides: &[usize],
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(A, B) -> O,
) {
    let n = out.len();
    if n == 0 {
        return;
    }
    // Fast paths: both dense and equal, or one side a scalar.
    if a.len() == n && b.len() == n {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
        return;
    }
    if b.len() == 1 && a.len() == n {
        let y = b[0];
        for (o, &x) in out.iter_mut().zip(a) {
            *o = f(x, y);
        }
        return;
    }
    if a.len() == 1 && b.len() == n {
        let x = a[0];
        for (o, &y) in out.iter_mut().zip(b) {
            *o = f(x, y);
        }
        return;
    }
    let rank = out_shape.len();
    let inner = out_shape[rank - 1];
    let (sa, sb) = (a_strides[rank - 1], b_strides[rank - 1]);
    let mut idx = [0usize; 16];
    let mut big_idx;
    let idx: &mut [usize] = if rank <= 16 {
        &mut idx[..rank]
    } else {
        big_idx = alloc_index(rank);
        &mut big_idx[..]
    };
    let (mut oa, mut ob) = (0usize, 0usize);
    let mut pos = 0;
    while pos < n {
        for j in 0..inner {
            out[pos + j] = f(a[oa + j * sa], b[ob + j * sb]);
        }
        pos += inner;
        // Advance the outer multi-index.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                break;
            }
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
    let mut idx = [0usize; 16];
    let mut big_idx;
    let idx: &mut [usize] = if rank <= 16 {
        &mut idx[..rank]
    } else {
        big_idx = alloc_index(rank);
        &mut big_idx[..]
    };
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
