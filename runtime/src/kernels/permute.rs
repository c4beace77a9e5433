//! Axis permutation (Transpose) as a strided copy.

/// `out` = `x` (of `shape`) with axes permuted by `perm`. `out_shape[i] = shape[perm[i]]`.
pub fn permute<T: Copy + Send + Sync>(x: &[T], shape: &[usize], perm: &[usize], out: &mut [T]) {
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
    let n: usize = shape.iter().product();
    assert!(x.len() >= n && out.len() == n, "permute: buffers do not hold the shape");
    // Ranges of the outermost output axis split over the thread pool, each the same walk over
    // a shorter first axis.
    let (outer, st0) = (dims[0], st[0]);
    let inner = n / outer;
    crate::for_plane_ranges(outer, inner, n, out, &|p0, p1, o| {
        let mut sub = dims;
        sub[0] = p1 - p0;
        walk(&x[p0 * st0..], &sub[..r], &st[..r], o);
    });
}

/// `out` = the elements of `x` at the offsets of an odometer over `dims` (last axis fastest),
/// each axis' input stride in `st`; `out` holds the product of `dims`, and every offset is
/// inside `x` (the caller's shape guarantees both).
fn walk<T: Copy>(x: &[T], dims: &[usize], st: &[usize], out: &mut [T]) {
    let rank = dims.len();
    let mut idx = [0usize; 16];
    let mut off = 0usize;
    #[cfg(target_arch = "x86_64")]
    if core::mem::size_of::<T>() == 4 && rank >= 2 && st[rank - 1] != 1 && st[rank - 2] == 1 && super::has_avx2() {
        let last: usize = dims.iter().zip(st).map(|(&d, &s)| (d.max(1) - 1) * s).sum();
        assert!(last < x.len() && out.len() == dims.iter().product::<usize>(), "permute: buffers do not hold the shape");
        // SAFETY: T is 4 bytes and Copy, so its values move as u32 bits; the CPU has AVX2; every
        // index the plane walk makes is at most `last` (asserted inside x) or below out's length.
        unsafe { transpose_planes_avx2(x.as_ptr() as *const f32, x.len(), dims, st, out.as_mut_ptr() as *mut f32, out.len()) };
        return;
    }
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
        off = advance(&mut idx, off, &dims[..rank - 1], &st[..rank - 1]);
    }
}

/// The input offset after one step of an odometer over `dims` (last axis fastest), each
/// axis' input stride in `st`; `idx` holds the position and wraps to zeros at the end.
pub(crate) fn advance(idx: &mut [usize; 16], mut off: usize, dims: &[usize], st: &[usize]) -> usize {
    let mut d = dims.len();
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
    off
}

/// The permutation of 4-byte values when its two innermost (merged) output axes are a plain
/// transpose (attention's keys, [.., n, d] → [.., d, n]): the next-to-last output axis reads the
/// input's contiguous one, the last a strided one. Each plane goes in 8×8 tiles through AVX2
/// registers (eight row loads, a register transpose, eight row stores) instead of one strided
/// load per element; the edges element by element. Values move as bits (shuffles only).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose_planes_avx2(x: *const f32, xlen: usize, dims: &[usize], st: &[usize], out: *mut f32, olen: usize) {
    use core::arch::x86_64::*;
    let rank = dims.len();
    let (rows, cols, s) = (dims[rank - 2], dims[rank - 1], st[rank - 1]);
    let plane = rows * cols;
    let mut idx = [0usize; 16];
    let (mut off, mut pos) = (0usize, 0usize);
    while pos < olen {
        // Plane: out[pos + a·cols + b] = x[off + a + b·s], a < rows, b < cols; the caller's
        // shape bounds every such index inside x (xlen) and out (olen).
        debug_assert!(off + (rows - 1) + (cols - 1) * s < xlen && pos + plane <= olen);
        let (r8, c8) = (rows / 8 * 8, cols / 8 * 8);
        for a0 in (0..r8).step_by(8) {
            for b0 in (0..c8).step_by(8) {
                let p = x.add(off + a0 + b0 * s);
                let r: [__m256; 8] = core::array::from_fn(|i| _mm256_loadu_ps(p.add(i * s)));
                let t0 = _mm256_unpacklo_ps(r[0], r[1]);
                let t1 = _mm256_unpackhi_ps(r[0], r[1]);
                let t2 = _mm256_unpacklo_ps(r[2], r[3]);
                let t3 = _mm256_unpackhi_ps(r[2], r[3]);
                let t4 = _mm256_unpacklo_ps(r[4], r[5]);
                let t5 = _mm256_unpackhi_ps(r[4], r[5]);
                let t6 = _mm256_unpacklo_ps(r[6], r[7]);
                let t7 = _mm256_unpackhi_ps(r[6], r[7]);
                let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
                let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
                let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
                let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
                let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
                let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
                let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
                let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
                let c = [
                    _mm256_permute2f128_ps::<0x20>(u0, u4),
                    _mm256_permute2f128_ps::<0x20>(u1, u5),
                    _mm256_permute2f128_ps::<0x20>(u2, u6),
                    _mm256_permute2f128_ps::<0x20>(u3, u7),
                    _mm256_permute2f128_ps::<0x31>(u0, u4),
                    _mm256_permute2f128_ps::<0x31>(u1, u5),
                    _mm256_permute2f128_ps::<0x31>(u2, u6),
                    _mm256_permute2f128_ps::<0x31>(u3, u7),
                ];
                let q = out.add(pos + a0 * cols + b0);
                for (j, v) in c.iter().enumerate() {
                    _mm256_storeu_ps(q.add(j * cols), *v);
                }
            }
        }
        // The edges: columns past the last whole tile for every row, rows past the last whole
        // tile for the tiled columns.
        for a in 0..rows {
            let from = if a < r8 { c8 } else { 0 };
            for b in from..cols {
                *out.add(pos + a * cols + b) = *x.add(off + a + b * s);
            }
        }
        pos += plane;
        off = advance(&mut idx, off, &dims[..rank - 2], &st[..rank - 2]);
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
        let cases: [(&[usize], &[usize]); 13] = [
            (&[2, 8, 129, 64], &[0, 1, 3, 2]),
            (&[16, 24], &[1, 0]),
            (&[3, 9, 17, 5], &[0, 3, 1, 2]),
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
