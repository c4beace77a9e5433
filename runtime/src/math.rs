//! Scalar math for no_std: `core` has no `exp`/`ln`/…, so use libm's (correctly rounded enough for
//! ONNX tolerances) everywhere, the same code on every target. `expf` is this crate's own:
//! branch-free, so loops over it (Sigmoid, SiLU, Softmax, GELU-tanh …) vectorize.
pub use libm::{
    acos, acosf, acosh, acoshf, asin, asinf, asinh, asinhf, atan, atan2, atan2f, atanf, atanh,
    atanhf, ceil, ceilf, cos, cosf, cosh, coshf, erf, erff, exp, expm1, expm1f, floor, floorf,
    fmod, fmodf, log, log1p, log1pf, logf, pow, powf, rint, rintf, round, roundf, sin, sinf, sinh,
    sinhf, sqrt, sqrtf, tan, tanf, tanh, tanhf, trunc, truncf,
};

/// `2^n` for `n` in -126..=127, by building the exponent bits.
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// e^x within 1 ulp (tested against f64 over the whole range), with no branches: x is clamped
/// to [-104, 89] (beyond which the result is 0 or +inf anyway), split as `n·ln 2 + r` with
/// `|r| <= ln 2 / 2` (Cody–Waite, `n·C1` exact), e^r by a degree-7 polynomial (Cephes'
/// coefficients), and the scale 2^n applied in two halves so subnormal results and e^88.7 come
/// out right. NaN gives NaN.
#[inline]
pub fn expf(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    // Round to nearest by the 1.5·2^23 trick (|x·log2 e| < 2^22 after the clamp).
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-104.0, 89.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = (x - n * C1) - n * C2;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let er = (p * r * r + r) + 1.0;
    // n is in -151..=129 (NaN: 0); halves keep each scale a normal power of two.
    let n = n as i32;
    let h = n >> 1;
    er * pow2i(h) * pow2i(n - h)
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
}
