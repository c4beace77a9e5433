//! Axis permutation (Transpose) as a strided copy.

/// `out` = `x` (of `shape`) with axes permuted by `perm`. `out_shape[i] = shape[perm[i]]`.
pub fn permute<T: Copy>(x: &[T], shape: &[usize], perm: &[usize], out: &mut [T]) {
    let rank = shape.len();
    if rank == 0 || x.is_empty() {
        out.copy_from_slice(x);
        return;
    }
    let mut in_strides = [0usize; 16];
    let mut s = 1;
    for d in (0..rank).rev() {
        in_strides[d] = s;
        s *= shape[d];
    }
    // Strides of the input walked in output order.
    let mut st = [0usize; 16];
    let mut dims = [0usize; 16];
    for i in 0..rank {
        st[i] = in_strides[perm[i]];
        dims[i] = shape[perm[i]];
    }
    let mut idx = [0usize; 16];
    let mut off = 0usize;
    let inner = dims[rank - 1];
    let inner_stride = st[rank - 1];
    let mut pos = 0;
    while pos < out.len() {
        for j in 0..inner {
            out[pos + j] = x[off + j * inner_stride];
        }
        pos += inner;
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            off += st[d];
            if idx[d] < dims[d] {
                break;
            }
            off -= st[d] * dims[d];
            idx[d] = 0;
        }
    }
}
