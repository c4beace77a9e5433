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
    // Strides of the input walked in output order, with size-1 axes dropped and runs of output
    // axes that are consecutive in the input merged (a channel shuffle [1, g, c, h, w] →
    // [1, c, g, h, w] becomes [c, g, h·w] with a contiguous inner axis, copied by rows).
    let mut st = [0usize; 16];
    let mut dims = [0usize; 16];
    let mut r = 0;
    for &p in &perm[..rank] {
        let (d, s) = (shape[p], in_strides[p]);
        if d == 1 {
            continue;
        }
        if r > 0 && st[r - 1] == s * d {
            dims[r - 1] *= d;
            st[r - 1] = s;
            continue;
        }
        dims[r] = d;
        st[r] = s;
        r += 1;
    }
    if r == 0 {
        out.copy_from_slice(x);
        return;
    }
    let rank = r;
    let mut idx = [0usize; 16];
    let mut off = 0usize;
    let inner = dims[rank - 1];
    let inner_stride = st[rank - 1];
    let mut pos = 0;
    while pos < out.len() {
        if inner_stride == 1 {
            out[pos..pos + inner].copy_from_slice(&x[off..off + inner]);
        } else {
            for j in 0..inner {
                out[pos + j] = x[off + j * inner_stride];
            }
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

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// Index by index, no coalescing.
    fn naive(x: &[u32], shape: &[usize], perm: &[usize]) -> Vec<u32> {
        let rank = shape.len();
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let n: usize = shape.iter().product();
        let mut strides = std::vec![1usize; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        (0..n)
            .map(|mut i| {
                let mut src = 0;
                for d in (0..rank).rev() {
                    src += (i % out_shape[d]) * strides[perm[d]];
                    i /= out_shape[d];
                }
                x[src]
            })
            .collect()
    }

    #[test]
    fn permute_matches_naive() {
        let cases: [(&[usize], &[usize]); 10] = [
            (&[1, 8, 37, 20], &[0, 1, 3, 2]),
            (&[3, 2, 5, 4], &[1, 0, 3, 2]),
            (&[40, 33], &[1, 0]),
            (&[1, 3, 4, 5, 6], &[0, 2, 1, 3, 4]),
            (&[2, 3, 4], &[2, 0, 1]),
            (&[5, 7], &[1, 0]),
            (&[1, 1, 4], &[2, 0, 1]),
            (&[3, 1, 2, 4], &[1, 3, 2, 0]),
            (&[2, 3, 4, 5], &[0, 1, 2, 3]),
            (&[1, 1], &[1, 0]),
        ];
        for (shape, perm) in cases {
            let n: usize = shape.iter().product();
            let x: Vec<u32> = (0..n as u32).collect();
            let mut y = std::vec![0u32; n];
            permute(&x, shape, perm, &mut y);
            assert_eq!(y, naive(&x, shape, perm), "{shape:?} {perm:?}");
        }
    }
}
