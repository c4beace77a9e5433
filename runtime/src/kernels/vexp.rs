//! A softmax line's exponentials, `x ← e^((x − max)·c)` with their sum, the inner loop of the
//! fused attention. With AVX2+FMA (detected at run time under std) it runs on explicit 8-lane
//! registers with fused multiply-adds: Rust never contracts `a·b + c`, so the portable form's
//! polynomial costs twice the instructions, and these exponentials were a third of an SVTR
//! attention's time. Both forms compute [`math::expf_nonpositive`]'s steps (within 1 ulp of
//! e^x down to e^-87, e^-87 below).
//!
//! [`math::expf_nonpositive`]: crate::math::expf_nonpositive

/// `line[i] = e^((line[i] − max)·scale)` (`scale` > 0; `max` the line's largest element),
/// returning the sum of the results (f32, in 16 interleaved partial sums). `line` is not
/// empty.
pub(crate) fn exp_shifted(line: &mut [f32], scale: f32) -> f32 {
    let max = super::softmax::line_max(line);
    #[cfg(target_arch = "x86_64")]
    if super::has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { exp_shifted_avx2(line, max, scale) };
    }
    exp_shifted_portable(line, max, scale)
}

fn exp_shifted_portable(line: &mut [f32], max: f32, scale: f32) -> f32 {
    const LANES: usize = 8;
    let split = line.len() / LANES * LANES;
    let mut sums = [0f32; LANES];
    for c in line[..split].chunks_exact_mut(LANES) {
        for l in 0..LANES {
            c[l] = crate::math::expf_nonpositive((c[l] - max) * scale);
            sums[l] += c[l];
        }
    }
    let mut sum = 0.0;
    for x in &mut line[split..] {
        *x = crate::math::expf_nonpositive((*x - max) * scale);
        sum += *x;
    }
    sums.iter().sum::<f32>() + sum
}

/// e^x of 8 lanes of x ≤ 0, the steps of `math::expf_nonpositive` with fused multiply-adds.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp8(x: core::arch::x86_64::__m256) -> core::arch::x86_64::__m256 {
    use core::arch::x86_64::*;
    const ROUND: f32 = 12_582_912.0;
    // max(-87, x) keeps a NaN x (the second operand is returned when either is NaN).
    let x = _mm256_max_ps(_mm256_set1_ps(-87.0), x);
    let t = _mm256_fmadd_ps(x, _mm256_set1_ps(core::f32::consts::LOG2_E), _mm256_set1_ps(ROUND));
    let n = _mm256_sub_ps(t, _mm256_set1_ps(ROUND));
    let ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(ROUND.to_bits() as i32));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(1.987_569_1e-4);
    for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.000_000_1e-1] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let er = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0));
    let pow2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(ni, _mm256_set1_epi32(127))));
    _mm256_mul_ps(er, pow2)
}

/// [`exp_shifted`] on 16 lanes at a time (two independent chains), the tail portable.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted_avx2(line: &mut [f32], max: f32, scale: f32) -> f32 {
    use core::arch::x86_64::*;
    let (m, s) = (_mm256_set1_ps(max), _mm256_set1_ps(scale));
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let split = line.len() / 16 * 16;
    for c in line[..split].chunks_exact_mut(16) {
        // SAFETY: `c` holds 16 elements; unaligned loads and stores.
        unsafe {
            let p = c.as_mut_ptr();
            let e0 = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p), m), s));
            let e1 = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p.add(8)), m), s));
            _mm256_storeu_ps(p, e0);
            _mm256_storeu_ps(p.add(8), e1);
            acc0 = _mm256_add_ps(acc0, e0);
            acc1 = _mm256_add_ps(acc1, e1);
        }
    }
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` holds 8 f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(acc0, acc1)) };
    lanes.iter().sum::<f32>() + exp_shifted_portable(&mut line[split..], max, scale)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// Both forms against e^x in f64: within 2 ulps (the FMA form rounds differently), the sums
    /// close, NaN kept.
    #[test]
    fn exponentials_and_sums_match_f64() {
        for n in [1usize, 7, 16, 17, 960] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 7919 % 2003) as f32 - 1001.0) / 13.0).collect();
            let max = x.iter().cloned().fold(f32::MIN, f32::max);
            for scale in [1.0f32, 0.176_776_7] {
                let mut a = x.clone();
                let mut b = x.clone();
                let sa = exp_shifted(&mut a, scale);
                let sb = exp_shifted_portable(&mut b, max, scale);
                let mut want_sum = 0.0f64;
                for i in 0..n {
                    let arg = (x[i] - max) * scale;
                    let want = (arg as f64).exp();
                    want_sum += want.max(1.6e-38_f64.min(want));
                    for got in [a[i], b[i]] {
                        let tol = if arg < -87.0 { 1.7e-38 } else { 2.5e-7 * want };
                        assert!((got as f64 - want).abs() <= tol, "n={n} scale={scale} i={i}: {got} vs {want}");
                    }
                }
                for s in [sa, sb] {
                    assert!((s as f64 - want_sum).abs() <= 1e-6 * want_sum + 1e-30, "n={n}: sum {s} vs {want_sum}");
                }
            }
        }
        let mut nan = [0.0f32, f32::NAN, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0];
        exp_shifted(&mut nan, 1.0);
        assert!(nan[1].is_nan());
    }
}
