//! `Real`: the two working float types (f32, f64) of the softmax and normalization kernels.
//! Half types are widened to f32 by the caller.
use crate::math;

pub trait Real: Copy + PartialOrd + Default + Send + Sync + 'static {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
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
    ($t:ty, $exp:path, $ln:path, $sqrt:path, $pow:path, $tanh:path, $gemm:path) => {
        impl Real for $t {
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn exp(self) -> Self { $exp(self) }
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
real!(f32, math::expf, math::logf, math::sqrtf, math::powf, math::tanhf, super::gemm::sgemm);
real!(f64, math::exp, math::log, math::sqrt, math::pow, math::tanh, super::gemm::dgemm);

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

/// `y[j] += Σ_k m[j·cols + k] · x[k]` for every row j of the row-major `m` (`y.len()` rows,
/// `cols = x.len()`), each row by [`dot`]. (Blocks of four rows sharing the loads of `x`
/// measured slower: LLVM vectorizes them across rows, with shuffles.)
pub fn matvec_add<R: Real>(m: &[R], x: &[R], y: &mut [R]) {
    let cols = x.len();
    if cols == 0 {
        return;
    }
    for (yj, row) in y.iter_mut().zip(m.chunks_exact(cols)) {
        *yj = yj.add(dot(row, x));
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// Every row-count remainder (blocks of four) and column tail (lanes of eight).
    #[test]
    fn matvec_add_matches_the_plain_sums() {
        for rows in 0..11 {
            for cols in [0usize, 1, 7, 8, 9, 23] {
                let m: Vec<f64> = (0..rows * cols).map(|i| (i % 13) as f64 - 6.0).collect();
                let x: Vec<f64> = (0..cols).map(|i| (i % 5) as f64 * 0.5).collect();
                let mut y: Vec<f64> = (0..rows).map(|j| j as f64).collect();
                matvec_add(&m, &x, &mut y);
                for j in 0..rows {
                    let want = j as f64 + (0..cols).map(|k| m[j * cols + k] * x[k]).sum::<f64>();
                    assert_eq!(y[j], want, "rows {rows} cols {cols} row {j}");
                }
            }
        }
    }
}
