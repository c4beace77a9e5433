//! `Real`: the two working float types (f32, f64) of the softmax and normalization kernels.
//! Half types are widened to f32 by the caller.
use crate::math;

pub trait Real: Copy + PartialOrd + Default + 'static {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn abs(self) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
}

macro_rules! real {
    ($t:ty, $exp:path, $ln:path, $sqrt:path, $pow:path) => {
        impl Real for $t {
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn exp(self) -> Self { $exp(self) }
            #[inline] fn ln(self) -> Self { $ln(self) }
            #[inline] fn sqrt(self) -> Self { $sqrt(self) }
            #[inline] fn powf(self, e: Self) -> Self { $pow(self, e) }
            #[inline] fn abs(self) -> Self { if self < 0.0 { -self } else { self } }
            #[inline] fn add(self, o: Self) -> Self { self + o }
            #[inline] fn sub(self, o: Self) -> Self { self - o }
            #[inline] fn mul(self, o: Self) -> Self { self * o }
            #[inline] fn div(self, o: Self) -> Self { self / o }
        }
    };
}
real!(f32, math::expf, math::logf, math::sqrtf, math::powf);
real!(f64, math::exp, math::log, math::sqrt, math::pow);

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
