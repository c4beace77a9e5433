//! `Real`: the two working float types (f32, f64) of the softmax and normalization kernels.
//! Half types are widened to f32 by the caller.
use crate::math;

pub trait Real: Copy + PartialOrd + Default + Send + Sync + 'static {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
    /// e^x for x ≤ 0 (a softmax's `x − max`): f32 skips `exp`'s second scaling.
    fn exp_nonpositive(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn tanh(self) -> Self;
    fn abs(self) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// `c = a · b` for row-major `a` (m×k), `b` (k×n) and `c` (m×n): the runtime's GEMM of
    /// this type.
    fn matmul(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]);
}

macro_rules! real {
    ($t:ty, $exp:path, $expnp:path, $ln:path, $sqrt:path, $pow:path, $tanh:path, $gemm:path) => {
        impl Real for $t {
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn exp(self) -> Self { $exp(self) }
            #[inline] fn exp_nonpositive(self) -> Self { $expnp(self) }
            #[inline] fn ln(self) -> Self { $ln(self) }
            #[inline] fn sqrt(self) -> Self { $sqrt(self) }
            #[inline] fn powf(self, e: Self) -> Self { $pow(self, e) }
            #[inline] fn tanh(self) -> Self { $tanh(self) }
            #[inline] fn abs(self) -> Self { if self < 0.0 { -self } else { self } }
            #[inline] fn add(self, o: Self) -> Self { self + o }
            #[inline] fn sub(self, o: Self) -> Self { self - o }
            #[inline] fn mul(self, o: Self) -> Self { self * o }
            #[inline] fn div(self, o: Self) -> Self { self / o }
            fn matmul(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]) {
                use super::gemm::Layout;
                $gemm(m, k, n, 1.0, a, Layout::row_major(k), b, Layout::row_major(n), 0.0, c, Layout::row_major(n));
            }
        }
    };
}
real!(f32, math::expf, math::expf_nonpositive, math::logf, math::sqrtf, math::powf, math::tanhf, super::gemm::sgemm);
real!(f64, math::exp, math::exp, math::log, math::sqrt, math::pow, math::tanh, super::gemm::dgemm);

/// Σ a·b over the common length, in eight interleaved partial sums: independent chains the
/// compiler keeps in SIMD registers (one serial chain is bound by the add latency).
pub fn dot<R: Real>(a: &[R], b: &[R]) -> R {
    const LANES: usize = 8;
    let n = a.len().min(b.len());
    let split = n / LANES * LANES;
    let mut acc = [R::default(); LANES];
    for (ac, bc) in a[..split].chunks_exact(LANES).zip(b[..split].chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] = acc[l].add(ac[l].mul(bc[l]));
        }
    }
    let mut tail = R::default();
    for i in split..n {
        tail = tail.add(a[i].mul(b[i]));
    }
    acc.iter().fold(R::default(), |s, &v| s.add(v)).add(tail)
}

/// `y[r] += Σ_k mt[k·ld + r] · x[k]` for the `y.len()` rows: the product of a matrix stored
/// transposed (`mt` row k holds column k, rows `ld` apart) and `x`. Each column is a contiguous
/// run of rows, so a block of 64 rows stays in registers while the loop walks the columns:
/// plain vertical multiply-adds, no horizontal sums (1.7× a [`dot`] per row on 256×64 f32).
/// With AVX-512's 32 registers the even and odd columns go to two sets of sums (added at the
/// end): the 64 rows are only 4 registers there, and 4 chains of adds wait on their latency.
pub fn matvec_t_add<R: Real>(mt: &[R], ld: usize, x: &[R], y: &mut [R]) {
    const B: usize = 64;
    const SETS: usize = if cfg!(target_feature = "avx512f") { 2 } else { 1 };
    let rows = y.len();
    let mut blocks = y.chunks_exact_mut(B);
    for (bi, yb) in blocks.by_ref().enumerate() {
        let r0 = bi * B;
        let mut acc = [[R::default(); B]; SETS];
        acc[0].copy_from_slice(yb);
        let whole = x.len() / SETS * SETS;
        for k0 in (0..whole).step_by(SETS) {
            for (s, a) in acc.iter_mut().enumerate() {
                let k = k0 + s;
                let col: &[R; B] = mt[k * ld + r0..][..B].try_into().expect("a block of B");
                for i in 0..B {
                    a[i] = a[i].add(col[i].mul(x[k]));
                }
            }
        }
        for (k, &xk) in x.iter().enumerate().skip(whole) {
            let col: &[R; B] = mt[k * ld + r0..][..B].try_into().expect("a block of B");
            for i in 0..B {
                acc[0][i] = acc[0][i].add(col[i].mul(xk));
            }
        }
        for i in 0..B {
            yb[i] = acc.iter().skip(1).fold(acc[0][i], |v, a| v.add(a[i]));
        }
    }
    let r0 = rows - blocks.into_remainder().len();
    for (k, &xk) in x.iter().enumerate() {
        for (yr, &m) in y[r0..].iter_mut().zip(&mt[k * ld + r0..k * ld + rows]) {
            *yr = yr.add(m.mul(xk));
        }
    }
}

/// `out[c·rows + r] = m[r·cols + c]`: the transpose of the row-major `rows × cols` matrix `m`,
/// in 8×8 tiles.
pub fn transpose<R: Real>(m: &[R], rows: usize, cols: usize, out: &mut [R]) {
    const T: usize = 8;
    for r0 in (0..rows).step_by(T) {
        for c0 in (0..cols).step_by(T) {
            for r in r0..(r0 + T).min(rows) {
                for c in c0..(c0 + T).min(cols) {
                    out[c * rows + r] = m[r * cols + c];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// Every block remainder (64 rows) and column count, with a leading dimension wider than
    /// the rows used; against the plain sums.
    #[test]
    fn matvec_t_add_matches_the_plain_sums() {
        for rows in [0usize, 1, 63, 64, 65, 130, 256] {
            for cols in [0usize, 1, 7, 64] {
                let m: Vec<f64> = (0..rows * cols).map(|i| (i % 13) as f64 - 6.0).collect();
                let x: Vec<f64> = (0..cols).map(|i| (i % 5) as f64 * 0.5).collect();
                let ld = rows + 3;
                let mut mt = std::vec![0.0; cols * ld];
                let mut t = std::vec![0.0; rows * cols];
                transpose(&m, rows, cols, &mut t);
                for k in 0..cols {
                    mt[k * ld..k * ld + rows].copy_from_slice(&t[k * rows..(k + 1) * rows]);
                }
                let want: Vec<f64> = (0..rows).map(|j| j as f64 + (0..cols).map(|k| m[j * cols + k] * x[k]).sum::<f64>()).collect();
                let mut got: Vec<f64> = (0..rows).map(|j| j as f64).collect();
                matvec_t_add(&mt, ld, &x, &mut got);
                assert_eq!(got, want, "rows {rows} cols {cols}");
            }
        }
    }
}
