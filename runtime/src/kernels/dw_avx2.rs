//! K×K depthwise convolution of one zero-padded f32 plane with AVX2 (K = 3, 5 or 7): the
//! inner kernel of [`super::conv`]'s direct depthwise path for the windows of MobileNet-,
//! ShuffleNet- and EfficientNet-style networks, at stride 1 or 2.
//!
//! The generic path computes a stride-1 run over the padded plane, copies it (subsampled at
//! stride 2) to the output and then runs the epilogue as another pass: at stride 2 it did
//! twice the arithmetic and 2.6–7.9 ns per output, onnxruntime's NCHWc kernel 0.6–1.3; on a
//! 7×7 map with a 5×5 window its run also computed the 4 padding columns of every 11-wide
//! row. Here each output row is written once, in blocks of 8 outputs, from its K padded input
//! rows; stride 2 splits each row into even and odd columns with shuffles. Each output adds
//! its taps in (kh, kw) order, from zero, with a separate multiply and add, as the generic
//! loop does, so the bits are the same; the bias and ReLU, when they are the whole epilogue,
//! are applied before the store as the epilogue pass would.

/// One output plane `y` (`oh × ow`) of a K×K depthwise convolution at stride `s` (1 or 2)
/// from the padded plane `p` (row pitch `cols`, at least `(oh − 1)·s + K` rows and
/// `(ow − 1)·s + K` columns, followed by slack for the last block's reads), weights `w` (K·K,
/// row by row), then `+ bias` and a ReLU when given. Returns false, computing nothing, when
/// the sizes do not fit (the caller takes the generic loop).
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn plane<const K: usize>(p: &[f32], cols: usize, w: &[f32], y: &mut [f32], oh: usize, ow: usize, s: usize, bias: Option<f32>, relu: bool) -> bool {
    use super::lanes::{even, odd};
    use core::arch::x86_64::*;
    // A row's last block starts at column j0 = ow − 8 (0 for shorter rows) and reads 8 + K − 1
    // elements from there at stride 1; at stride 2, two vectors from 2·j0 + kw rounded down
    // to even, for kw up to K − 1.
    let j0_last = ow.saturating_sub(8);
    let reach = if s == 1 { j0_last + 8 + K - 1 } else { 2 * j0_last + (K - 1) / 2 * 2 + 16 };
    let fits = (s == 1 || s == 2) && ow > 0 && cols >= (ow - 1) * s + K && y.len() >= oh * ow && w.len() >= K * K;
    if !fits || (oh > 0 && ((oh - 1) * s + K - 1) * cols + reach > p.len()) {
        return false;
    }
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(ow.min(8) as i32), lanes);
    let bv = bias.map(|b| _mm256_set1_ps(b));
    let z = _mm256_setzero_ps();
    let pp = p.as_ptr();
    for h in 0..oh {
        let yr = y.as_mut_ptr().add(h * ow);
        let mut j0 = 0;
        loop {
            let mut acc = z;
            for kh in 0..K {
                // SAFETY: inside the plane (and its slack) by the check above.
                let r = unsafe { pp.add((h * s + kh) * cols + j0 * s) };
                for kw in 0..K {
                    let wv = _mm256_set1_ps(w[kh * K + kw]);
                    let v = if s == 1 {
                        unsafe { _mm256_loadu_ps(r.add(kw)) }
                    } else {
                        let base = kw & !1;
                        let (a, b) = unsafe { (_mm256_loadu_ps(r.add(base)), _mm256_loadu_ps(r.add(base + 8))) };
                        if kw % 2 == 0 { even(a, b) } else { odd(a, b) }
                    };
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(wv, v));
                }
            }
            if let Some(b) = bv {
                acc = _mm256_add_ps(acc, b);
            }
            if relu {
                acc = _mm256_max_ps(acc, z);
            }
            if ow < 8 {
                // SAFETY: the mask keeps the store to the row's ow outputs.
                unsafe { _mm256_maskstore_ps(yr, keep, acc) };
                break;
            }
            // SAFETY: j0 + 8 ≤ ow.
            unsafe { _mm256_storeu_ps(yr.add(j0), acc) };
            if j0 + 8 == ow {
                break;
            }
            // The last block overlaps the one before: the same taps, the same values.
            j0 = (j0 + 8).min(ow - 8);
        }
    }
    true
}
