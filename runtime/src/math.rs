//! Scalar math for no_std: `core` has no `exp`/`ln`/…, so use libm's (correctly rounded enough for
//! ONNX tolerances) everywhere, the same code on every target. `expf`, `erff` and `tanhf` are this
//! crate's own: branch-free, so loops over them (Sigmoid, SiLU, Softmax, GELU, LSTM gates …)
//! vectorize.
pub use libm::{
    acos, acosf, acosh, acoshf, asin, asinf, asinh, asinhf, atan, atan2, atan2f, atanf, atanh,
    atanhf, ceil, ceilf, cos, cosf, cosh, coshf, erf, exp, expm1, expm1f, floor, floorf,
    fmod, fmodf, log, log1p, log1pf, logf, pow, powf, rint, rintf, round, roundf, sin, sinf, sinh,
    sinhf, sqrt, sqrtf, tan, tanf, tanh, trunc, truncf,
};

/// `2^n` for `n` in -126..=127, by building the exponent bits.
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127) as u32) << 23)
}

/// e^x within 1 ulp (tested against f64 over the whole range), with no branches: x is clamped
/// to [-104, 89] (beyond which the result is 0 or +inf anyway), split as `n·ln 2 + r` with
/// `|r| <= ln 2 / 2` (Cody–Waite, `n·C1` exact), e^r by a degree-7 polynomial (Cephes'
/// coefficients), and the scale 2^n applied in two halves so subnormal results and e^88.7 come
/// out right. NaN gives NaN.
#[inline]
pub fn expf(x: f32) -> f32 {
    let (er, ni) = exp_reduced(x.clamp(-104.0, 89.0));
    // n is in -151..=129 (for NaN, er is NaN whatever the scale); halves keep each scale a
    // normal power of two.
    let h = ni >> 1;
    er * pow2i(h) * pow2i(ni - h)
}

/// e^x for x ≤ 0 (a softmax's `x − max`) within 1 ulp down to e^-87 (the smallest normal
/// results); below, e^-87 (1.6e-38) instead of a subnormal or 0. One scale instead of
/// [`expf`]'s two: softmax's exponentials are most of the fused attention's non-GEMM time.
/// NaN gives NaN.
#[inline]
pub fn expf_nonpositive(x: f32) -> f32 {
    let x = if x < -87.0 { -87.0 } else { x };
    let (er, ni) = exp_reduced(x);
    er * pow2i(ni)
}

/// `(e^r, n)` with `e^x = e^r · 2^n`, for x in [-104, 89]: x split as `n·ln 2 + r` with
/// `|r| <= ln 2 / 2` (Cody–Waite, `n·C1` exact), e^r by a degree-7 polynomial (Cephes'
/// coefficients).
#[inline(always)]
fn exp_reduced(x: f32) -> (f32, i32) {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    // Round to nearest by the 1.5·2^23 trick (|x·log2 e| < 2^22 after the clamp).
    const ROUND: f32 = 12_582_912.0;
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    // The same n as an integer, from the mantissa bits of t (in [2^23, 2^24), so the bits
    // differ from ROUND's by n): `n as i32` would saturate, which does not vectorize.
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = (x - n * C1) - n * C2;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    ((p * r * r + r) + 1.0, ni)
}

/// erf(x) within 4 ulp (tested against f64 over the whole range), in f32 with no branches,
/// so GELU loops run 8 lanes wide (the f64 form this replaced, within 1 ulp, took 2.5 ns per
/// element of an encoder's GELU). Below 0.9, `x·P(x²)`; from there `1 − e^Q(|x|)`, with Q a
/// polynomial in `|x| − 2.4` fitted to ln erfc on [0.9, 3.92] (beyond, the result rounds to
/// ±1). P and Q are least-squares fits (Chebyshev nodes) made for this function.
#[inline]
pub fn erff(x: f32) -> f32 {
    const P: [f32; 6] = [1.12837916, -0.376125476, 0.112823284, -0.0267845122, 0.0050191238, -0.000612325421];
    const Q: [f32; 10] = [
        -7.28097506, -5.16423661, -0.940501899, -0.0117680542, 0.00238742612, -0.000469649422, 8.70813723e-05, -1.45111356e-05, 1.63306997e-06, -1.43988871e-08,
    ];
    let t = if x < 0.0 { -x } else { x };
    let small = x * horner32(&P, x * x);
    // Q is ln erfc: from -1.6 down to -19 on [0.9, 3.92], where one scale does.
    let large = 1.0 - expf_nonpositive(horner32(&Q, t.clamp(0.9, 3.92) - 2.4));
    let large = if x < 0.0 { -large } else { large };
    let r = if t < 0.9 { small } else { large };
    if x.is_nan() { x } else { r }
}

/// `c[0] + v·(c[1] + v·(…))` in f32: fused multiply-adds where the build targets a CPU with
/// them (one rounding instead of two per step; erf 1.25× faster), else a multiply and an add
/// (`mul_add` without the instruction is a slow library call; core has no `mul_add`).
#[inline(always)]
fn horner32(c: &[f32], v: f32) -> f32 {
    #[cfg(all(feature = "std", target_feature = "fma"))]
    return c.iter().rev().fold(0.0, |r: f32, &ci| r.mul_add(v, ci));
    #[cfg(not(all(feature = "std", target_feature = "fma")))]
    c.iter().rev().fold(0.0, |r, &ci| r * v + ci)
}

/// tanh(x) within 2 ulp (tested against f64 over the whole range), in f32 with no branches,
/// so rows of LSTM gates run 8 lanes wide: below 0.7, `x·P(x²)` (P a least-squares fit of
/// tanh(x)/x made for this function); from there `1 − 2/(e^(2|x|) + 1)` with [`expf`], which
/// rounds to ±1 from 9.1 on.
#[inline]
pub fn tanhf(x: f32) -> f32 {
    const P: [f32; 8] = [1.0, -0.333333328, 0.133333059, -0.0539634137, 0.0218281762, -0.00867079118, 0.00308252271, -0.000699625106];
    let t = if x < 0.0 { -x } else { x };
    let small = x * horner32(&P, x * x);
    let large = 1.0 - 2.0 / (expf(2.0 * t.min(9.1)) + 1.0);
    let large = if x < 0.0 { -large } else { large };
    let r = if t < 0.7 { small } else { large };
    if x.is_nan() { x } else { r }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    /// Distance in units in the last place between `a` and the f64 value `want`.
    fn ulps(a: f32, want: f64) -> f64 {
        let w = want as f32;
        if a == w {
            return 0.0;
        }
        let ulp = (f32::from_bits(w.to_bits() + 1) - w).abs().max(f32::from_bits(1)) as f64;
        (a as f64 - want).abs() / ulp
    }

    #[test]
    fn expf_nonpositive_within_one_ulp_down_to_the_normals() {
        for b in ((1u32 << 31)..=(-87.0f32).to_bits()).step_by(31) {
            let x = f32::from_bits(b);
            let u = ulps(expf_nonpositive(x), (x as f64).exp());
            assert!(u <= 1.0, "{x}: {u} ulps");
        }
        assert_eq!(expf_nonpositive(-1000.0), expf_nonpositive(-87.0));
        assert!(expf_nonpositive(f32::NAN).is_nan());
        assert_eq!(expf_nonpositive(0.0), 1.0);
    }

    #[test]
    fn expf_within_one_ulp_everywhere() {
        let mut worst = (0.0f64, 0.0f32);
        // Every 97th float from -104 to 89, both signs, subnormal results included.
        let (lo, hi) = ((-104.0f32).to_bits(), 89.0f32.to_bits());
        let mut check = |x: f32| {
            let u = ulps(expf(x), (x as f64).exp());
            if u > worst.0 {
                worst = (u, x);
            }
        };
        for b in (0..=hi).step_by(97) {
            check(f32::from_bits(b));
        }
        for b in ((1u32 << 31)..=lo).step_by(97) {
            check(f32::from_bits(b));
        }
        assert!(worst.0 <= 1.0, "worst {} ulp at {}", worst.0, worst.1);
        assert_eq!(expf(0.0), 1.0);
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(-200.0), 0.0);
        assert_eq!(expf(f32::INFINITY), f32::INFINITY);
        assert_eq!(expf(89.0), f32::INFINITY);
        assert!(expf(88.72).is_finite());
        assert!(expf(f32::NAN).is_nan());
    }

    /// The worst distance in ulps of `f` from `want` over every 97th float, both signs.
    fn worst_ulps(f: impl Fn(f32) -> f32, want: impl Fn(f64) -> f64) -> (f64, f32) {
        let mut worst = (0.0f64, 0.0f32);
        for b in (0..f32::INFINITY.to_bits()).step_by(97).flat_map(|b| [b, b | 1 << 31]) {
            let x = f32::from_bits(b);
            let u = ulps(f(x), want(x as f64));
            if u > worst.0 {
                worst = (u, x);
            }
        }
        worst
    }

    #[test]
    fn erff_within_four_ulp_everywhere() {
        let worst = worst_ulps(erff, libm::erf);
        assert!(worst.0 <= 4.0, "worst {} ulp at {}", worst.0, worst.1);
        assert_eq!(erff(0.0), 0.0);
        assert_eq!(erff(f32::INFINITY), 1.0);
        assert_eq!(erff(f32::NEG_INFINITY), -1.0);
        assert!(ulps(erff(1e-30), 1.128_379_167_095_512_6e-30) <= 1.0);
        assert!(erff(f32::NAN).is_nan());
    }

    #[test]
    fn tanhf_within_two_ulp_everywhere() {
        let worst = worst_ulps(tanhf, f64::tanh);
        assert!(worst.0 <= 2.0, "worst {} ulp at {}", worst.0, worst.1);
        assert_eq!(tanhf(0.0), 0.0);
        assert_eq!(tanhf(f32::INFINITY), 1.0);
        assert_eq!(tanhf(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanhf(-1e-30), -1e-30);
        assert!(tanhf(f32::NAN).is_nan());
    }
}
