//! General matrix multiply: `C = alpha * A @ B + beta * C` with arbitrary strides.
//! f32/f64 go to `matrixmultiply` (packed, SIMD) with the `alloc` feature (it allocates its
//! packing buffers from the global allocator); without it (firmware: no_std, no alloc) they use
//! a portable loop, [`gemm_portable`]. Other types use a plain loop.
use crate::elem::Elem;

/// Strided matrix view description.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub row_stride: isize,
    pub col_stride: isize,
}

impl Layout {
    pub const fn row_major(cols: usize) -> Layout {
        Layout { row_stride: cols as isize, col_stride: 1 }
    }
    pub const fn col_major(rows: usize) -> Layout {
        Layout { row_stride: 1, col_stride: rows as isize }
    }
}

/// f32 GEMM. `a` is m×k, `b` is k×n, `c` is m×n (all with given layouts).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(m: usize, k: usize, n: usize, alpha: f32, a: &[f32], la: Layout, b: &[f32], lb: Layout, beta: f32, c: &mut [f32], lc: Layout) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        scale(c, m, n, lc, beta);
        return;
    }
    assert!(fits(a.len(), m, k, la) && fits(b.len(), k, n, lb) && fits(c.len(), m, n, lc), "sgemm: slice too short");
    // One row (batch-1 dense layers): packing panels costs more than the product itself.
    if m == 1 && sgemv(k, n, alpha, a, la, b, lb, beta, c, lc) {
        return;
    }
    #[cfg(not(feature = "alloc"))]
    gemm_portable(m, k, n, alpha, a, la, b, lb, beta, c, lc);
    #[cfg(feature = "alloc")]
    if let Some((lda, ldb, ldc)) = row_major_product(k, n, alpha, la, lb, beta, lc) {
        own_sgemm(m, k, n, a, lda, b, ldb, c, ldc);
        return;
    }
    #[cfg(feature = "std")]
    if would_split(m, k, n) {
        sgemm_split(m, k, n, alpha, a, la, b, lb, beta, c, lc);
        return;
    }
    // SAFETY: the asserts above check every index the kernel touches is inside the slices.
    #[cfg(feature = "alloc")]
    unsafe {
        matrixmultiply::sgemm(
            m, k, n, alpha, a.as_ptr(), la.row_stride, la.col_stride, b.as_ptr(), lb.row_stride, lb.col_stride, beta,
            c.as_mut_ptr(), lc.row_stride, lc.col_stride,
        );
    }
}

/// Row strides of A, B and C when [`sgemm`] is a plain `C = A · B` (alpha 1, beta 0, as
/// MatMul and Gemm nodes call it) over row-major operands (unit column strides), which
/// burnc's packed kernel takes; `None` otherwise (matrixmultiply handles any layout).
#[cfg(feature = "alloc")]
fn row_major_product(k: usize, n: usize, alpha: f32, la: Layout, lb: Layout, beta: f32, lc: Layout) -> Option<(usize, usize, usize)> {
    let unit = la.col_stride == 1 && lb.col_stride == 1 && lc.col_stride == 1;
    let wide = la.row_stride >= k as isize && lb.row_stride >= n as isize && lc.row_stride >= n as isize;
    (alpha == 1.0 && beta == 0.0 && unit && wide).then_some((la.row_stride as usize, lb.row_stride as usize, lc.row_stride as usize))
}

/// `C = A · B` by [`packed::sgemm_packed`] (burnc's own kernel: 100 GFLOP/s on one Zen 4
/// core where matrixmultiply reached about 60 at 1024³), with its packing space from the
/// heap; over the thread pool (row blocks of C, or column blocks when C is wide, each block
/// with its own packing space) when [`would_split`] says so. Bounds were checked by the caller.
///
/// [`packed::sgemm_packed`]: super::packed::sgemm_packed
#[cfg(feature = "alloc")]
#[allow(clippy::too_many_arguments)]
fn own_sgemm(m: usize, k: usize, n: usize, a: &[f32], lda: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    use super::packed;
    #[cfg(feature = "std")]
    if would_split(m, k, n) {
        use packed::{MR, NR};
        let threads = crate::pool::threads();
        // Two blocks per thread, so a thread that starts late leaves its share to the others.
        let by_rows = split_by_rows(m, n, threads);
        let (len, unit) = if by_rows { (m, MR) } else { (n, NR) };
        let per = len.div_ceil(2 * threads).div_ceil(unit) * unit;
        let cp = SendPtr(c.as_mut_ptr());
        let clen = c.len();
        crate::pool::parallel_for(len.div_ceil(per), &|t| {
            let (lo, hi) = (t * per, ((t + 1) * per).min(len));
            let (rows, cols) = if by_rows { (hi - lo, n) } else { (m, hi - lo) };
            let mut scratch = alloc::vec![0f32; packed::scratch_len(rows, k)];
            let (a, b, off) = if by_rows { (&a[lo * lda..], b, lo * ldc) } else { (a, &b[lo..], lo) };
            // SAFETY: blocks of rows (or of columns) of C are disjoint between tasks; the view
            // starts inside C (off < clen: the caller checked C holds m × n at stride ldc) and
            // ends at C's end; C is not otherwise used until every task has returned.
            let c = unsafe { core::slice::from_raw_parts_mut(cp.get().add(off), clen - off) };
            packed::sgemm_packed(rows, k, cols, a, lda, b, ldb, c, ldc, &mut scratch);
        });
        return;
    }
    let mut scratch = alloc::vec![0f32; packed::scratch_len(m, k)];
    packed::sgemm_packed(m, k, n, a, lda, b, ldb, c, ldc, &mut scratch);
}

/// Whether [`sgemm`] splits an m×k×n product over the thread pool.
#[cfg(feature = "std")]
pub fn would_split(m: usize, k: usize, n: usize) -> bool {
    crate::pool::threads() > 1 && m * n * k >= PARALLEL_MACS && (m >= 16 || n >= 16)
}

/// Whether a split product goes by blocks of C's rows (every task then packs all of B) or of
/// its columns (every task packs all of A): the side packed again in every task is the
/// smaller one, unless the other dim is too short to give each thread two blocks. (Rows
/// whenever m ≥ 32 packed an encoder's 384×1536 weights once per task: 2 threads ran its
/// 128-row products only 1.2× faster.)
#[cfg(feature = "std")]
fn split_by_rows(m: usize, n: usize, threads: usize) -> bool {
    use super::packed::{MR, NR};
    match (m >= 2 * threads * MR, n >= 2 * threads * NR) {
        (true, true) => m > n,
        (true, false) => true,
        (false, true) => false,
        (false, false) => m * NR >= n * MR,
    }
}

/// Products smaller than this (multiply-adds) stay on one thread: waking a worker costs more.
#[cfg(feature = "std")]
const PARALLEL_MACS: usize = 1 << 20;

#[cfg(feature = "std")]
use super::SendPtr;

/// [`sgemm`] split into blocks of rows of C (or of columns, for few rows), one per task of the
/// thread pool. Bounds were checked by the caller.
#[cfg(feature = "std")]
#[allow(clippy::too_many_arguments)]
fn sgemm_split(m: usize, k: usize, n: usize, alpha: f32, a: &[f32], la: Layout, b: &[f32], lb: Layout, beta: f32, c: &mut [f32], lc: Layout) {
    let threads = crate::pool::threads();
    let by_rows = split_by_rows(m, n, threads);
    let len = if by_rows { m } else { n };
    let tasks = threads.min(len);
    let chunk = len.div_ceil(tasks);
    let cp = SendPtr(c.as_mut_ptr());
    let (ap, bp) = (a.as_ptr() as usize, b.as_ptr() as usize);
    crate::pool::parallel_for(tasks, &|t| {
        let lo = t * chunk;
        let hi = ((t + 1) * chunk).min(len);
        if lo >= hi {
            return;
        }
        // SAFETY: the blocks [lo, hi) of rows (or columns) are disjoint between tasks and inside
        // the matrices the caller checked; offsets follow the layouts' strides.
        unsafe {
            let (ap, bp) = (ap as *const f32, bp as *const f32);
            if by_rows {
                matrixmultiply::sgemm(
                    hi - lo, k, n, alpha, ap.offset(lo as isize * la.row_stride), la.row_stride, la.col_stride, bp,
                    lb.row_stride, lb.col_stride, beta, cp.get().offset(lo as isize * lc.row_stride), lc.row_stride, lc.col_stride,
                );
            } else {
                matrixmultiply::sgemm(
                    m, k, hi - lo, alpha, ap, la.row_stride, la.col_stride, bp.offset(lo as isize * lb.col_stride),
                    lb.row_stride, lb.col_stride, beta, cp.get().offset(lo as isize * lc.col_stride), lc.row_stride, lc.col_stride,
                );
            }
        }
    });
}

/// Lanes of the vector-shaped loops below: independent accumulators the compiler keeps in one
/// SIMD register (8 × f32 = AVX; it splits them on narrower targets).
const LANES: usize = 8;

/// Σ x·y over contiguous slices of equal length, in LANES interleaved partial sums.
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let split = n / LANES * LANES;
    let mut acc = [0f32; LANES];
    for (xc, yc) in x[..split].chunks_exact(LANES).zip(y[..split].chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] += xc[l] * yc[l];
        }
    }
    let mut tail = 0f32;
    for i in split..n {
        tail += x[i] * y[i];
    }
    let mut s = 0f32;
    for v in acc {
        s += v;
    }
    s + tail
}

/// C[0, :] = alpha · A[0, :] · B + beta · C[0, :] when B's layout makes it a run of dot products
/// (k contiguous: transposed weights) or of row updates (n contiguous in B and C). Returns false
/// for other layouts.
#[allow(clippy::too_many_arguments)]
fn sgemv(k: usize, n: usize, alpha: f32, a: &[f32], la: Layout, b: &[f32], lb: Layout, beta: f32, c: &mut [f32], lc: Layout) -> bool {
    // Ranges of columns over the pool (each column's sum is the same chain in any range): a
    // classifier's 1024 → 1000 layer is a weight stream one core does not saturate.
    #[cfg(feature = "std")]
    if lc.col_stride == 1 && lb.col_stride >= 0 && n >= 2 && crate::pool::threads() > 1 {
        if !((lb.row_stride == 1 && la.col_stride == 1) || lb.col_stride == 1) {
            return false;
        }
        let bs = lb.col_stride as usize;
        crate::for_plane_ranges(n, 1, k.saturating_mul(n), &mut c[..n], &|j0, j1, part| {
            sgemv_cols(k, j1 - j0, alpha, a, la, &b[j0 * bs..], lb, beta, part, lc);
        });
        return true;
    }
    sgemv_cols(k, n, alpha, a, la, b, lb, beta, c, lc)
}

/// [`sgemv`] on the calling thread.
#[allow(clippy::too_many_arguments)]
fn sgemv_cols(k: usize, n: usize, alpha: f32, a: &[f32], la: Layout, b: &[f32], lb: Layout, beta: f32, c: &mut [f32], lc: Layout) -> bool {
    let at = |i: usize| a[(i as isize * la.col_stride) as usize];
    let cp = |j: usize| (j as isize * lc.col_stride) as usize;
    if lb.row_stride == 1 && la.col_stride == 1 {
        let x = &a[..k];
        for j in 0..n {
            let start = (j as isize * lb.col_stride) as usize;
            let v = alpha * dot(x, &b[start..start + k]);
            let p = cp(j);
            c[p] = if beta == 0.0 { v } else { v + beta * c[p] };
        }
        return true;
    }
    if lb.col_stride == 1 && lc.col_stride == 1 {
        let row = &mut c[..n];
        if beta == 0.0 {
            row.fill(0.0);
        } else if beta != 1.0 {
            row.iter_mut().for_each(|v| *v *= beta);
        }
        for i in 0..k {
            let s = alpha * at(i);
            let start = (i as isize * lb.row_stride) as usize;
            for (cv, bv) in row.iter_mut().zip(&b[start..start + n]) {
                *cv += s * bv;
            }
        }
        return true;
    }
    false
}

/// f64 GEMM.
#[allow(clippy::too_many_arguments)]
pub fn dgemm(m: usize, k: usize, n: usize, alpha: f64, a: &[f64], la: Layout, b: &[f64], lb: Layout, beta: f64, c: &mut [f64], lc: Layout) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                let p = (i as isize * lc.row_stride + j as isize * lc.col_stride) as usize;
                c[p] = if beta == 0.0 { 0.0 } else { c[p] * beta };
            }
        }
        return;
    }
    assert!(fits(a.len(), m, k, la) && fits(b.len(), k, n, lb) && fits(c.len(), m, n, lc), "dgemm: slice too short");
    #[cfg(not(feature = "alloc"))]
    gemm_portable(m, k, n, alpha, a, la, b, lb, beta, c, lc);
    // SAFETY: bounds checked above.
    #[cfg(feature = "alloc")]
    unsafe {
        matrixmultiply::dgemm(
            m, k, n, alpha, a.as_ptr(), la.row_stride, la.col_stride, b.as_ptr(), lb.row_stride, lb.col_stride, beta,
            c.as_mut_ptr(), lc.row_stride, lc.col_stride,
        );
    }
}

/// Generic GEMM for any element type (ints wrap; f16/bf16 accumulate in f32 via f64 path).
#[allow(clippy::too_many_arguments)]
pub fn gemm_generic<T: Elem>(m: usize, k: usize, n: usize, a: &[T], la: Layout, b: &[T], lb: Layout, c: &mut [T], lc: Layout) {
    for i in 0..m {
        for j in 0..n {
            if T::IS_FLOAT {
                let mut acc = 0.0f64;
                for p in 0..k {
                    acc += a[idx(i, p, la)].to_f64() * b[idx(p, j, lb)].to_f64();
                }
                c[idx(i, j, lc)] = T::from_f64(acc);
            } else {
                let mut acc = T::zero();
                for p in 0..k {
                    acc = acc.add(a[idx(i, p, la)].mul(b[idx(p, j, lb)]));
                }
                c[idx(i, j, lc)] = acc;
            }
        }
    }
}

/// `C = alpha * A @ B + beta * C` by plain loops, for builds without a global allocator
/// (`matrixmultiply` needs one). Same contract as `matrixmultiply`: with `beta == 0` C is only
/// written, never read (it may hold NaN). The caller has checked the slices with [`fits`].
#[allow(clippy::too_many_arguments)]
#[cfg_attr(feature = "alloc", allow(dead_code))]
pub(crate) fn gemm_portable<T>(m: usize, k: usize, n: usize, alpha: T, a: &[T], la: Layout, b: &[T], lb: Layout, beta: T, c: &mut [T], lc: Layout)
where
    T: Copy + PartialEq + Default + core::ops::Add<Output = T> + core::ops::Mul<Output = T>,
{
    let zero = T::default();
    for i in 0..m {
        for j in 0..n {
            let mut acc = zero;
            for p in 0..k {
                acc = acc + a[idx(i, p, la)] * b[idx(p, j, lb)];
            }
            let q = idx(i, j, lc);
            c[q] = if beta == zero { alpha * acc } else { alpha * acc + beta * c[q] };
        }
    }
}

#[inline]
fn idx(r: usize, c: usize, l: Layout) -> usize {
    (r as isize * l.row_stride + c as isize * l.col_stride) as usize
}

fn fits(len: usize, rows: usize, cols: usize, l: Layout) -> bool {
    if l.row_stride < 0 || l.col_stride < 0 {
        return false;
    }
    let last = (rows - 1) as isize * l.row_stride + (cols - 1) as isize * l.col_stride;
    (last as usize) < len
}

fn scale(c: &mut [f32], m: usize, n: usize, lc: Layout, beta: f32) {
    for i in 0..m {
        for j in 0..n {
            let p = idx(i, j, lc);
            c[p] = if beta == 0.0 { 0.0 } else { c[p] * beta };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-row products (dense layers at batch 1), B row-major and transposed, with alpha and
    /// beta, on one thread and split over two: the bits of the serial loops.
    #[cfg(feature = "std")]
    #[test]
    fn gemv_splits_keep_the_bits() {
        extern crate std;
        let (k, n) = (300, 1003);
        let a: std::vec::Vec<f32> = (0..k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: std::vec::Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.011).cos()).collect();
        let c0: std::vec::Vec<f32> = (0..n).map(|i| (i as f32 * 0.3).sin()).collect();
        for (lb, alpha, beta) in [(Layout::row_major(n), 1.0, 0.0), (Layout::col_major(k), 1.0, 0.0), (Layout::row_major(n), 0.5, 2.0), (Layout::col_major(k), -1.5, 1.0)] {
            let mut want = c0.clone();
            assert!(sgemv_cols(k, n, alpha, &a, Layout::row_major(k), &b, lb, beta, &mut want, Layout::row_major(n)));
            for (j, &w) in want.iter().enumerate() {
                let naive: f64 = (0..k).map(|i| a[i] as f64 * b[(i as isize * lb.row_stride + j as isize * lb.col_stride) as usize] as f64).sum();
                let naive = alpha as f64 * naive + beta as f64 * c0[j] as f64;
                assert!((w as f64 - naive).abs() < 1e-3, "{j}: {w} vs {naive}");
            }
            crate::pool::set_threads(2);
            let mut got = c0.clone();
            sgemm(1, k, n, alpha, &a, Layout::row_major(k), &b, lb, beta, &mut got, Layout::row_major(n));
            assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "{lb:?} {alpha} {beta}");
        }
    }

    #[test]
    fn sgemm_matches_naive() {
        let (m, k, n) = (5, 7, 3);
        let a: [f32; 35] = core::array::from_fn(|i| (i as f32 * 0.37).sin());
        let b: [f32; 21] = core::array::from_fn(|i| (i as f32 * 0.11).cos());
        let mut c = [0f32; 15];
        sgemm(m, k, n, 1.0, &a, Layout::row_major(k), &b, Layout::row_major(n), 0.0, &mut c, Layout::row_major(n));
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                assert!((c[i * n + j] - want).abs() < 1e-5);
            }
        }
    }

    /// The no-alloc path, whichever features this build has.
    #[test]
    fn portable_matches_naive() {
        let (m, k, n) = (4, 6, 5);
        let a: [f32; 24] = core::array::from_fn(|i| (i as f32 * 0.37).sin());
        // B column-major, C strided by 2 columns to exercise the layouts.
        let b: [f32; 30] = core::array::from_fn(|i| (i as f32 * 0.11).cos());
        let mut c = [f32::NAN; 40];
        gemm_portable(m, k, n, 2.0, &a, Layout::row_major(k), &b, Layout::col_major(k), 0.0, &mut c, Layout { row_stride: 10, col_stride: 2 });
        for i in 0..m {
            for j in 0..n {
                let want: f32 = 2.0 * (0..k).map(|p| a[i * k + p] * b[j * k + p]).sum::<f32>();
                assert!((c[i * 10 + j * 2] - want).abs() < 1e-5, "{i},{j}");
            }
        }
        let mut c2 = [1.0f64; 4];
        let a2 = [1.0f64, 2.0, 3.0, 4.0];
        gemm_portable(2, 2, 2, 1.0, &a2, Layout::row_major(2), &a2, Layout::row_major(2), 0.5, &mut c2, Layout::row_major(2));
        assert_eq!(c2, [7.5, 10.5, 15.5, 22.5]);
    }
}
