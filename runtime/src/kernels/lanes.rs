//! AVX2 lane moves shared by the stride-2 kernels (pooling, 3×3 depthwise): splitting 16
//! consecutive f32 into their even and odd columns, and widening f32 sums to f64.
use core::arch::x86_64::*;

/// Elements 0, 2, …, 14 of the 16 in `a` (0–7) and `b` (8–15), in order.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn even(a: __m256, b: __m256) -> __m256 {
    _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(_mm256_shuffle_ps::<0x88>(a, b))))
}

/// Elements 1, 3, …, 15 of the 16 in `a` and `b`, in order.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn odd(a: __m256, b: __m256) -> __m256 {
    _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(_mm256_shuffle_ps::<0xDD>(a, b))))
}

/// `e` moved one lane down with `next` in lane 7: from the evens 0, 2, …, 14, the evens
/// 2, 4, …, 16 (a stride-2 window's third tap).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn shift_in(e: __m256, next: __m256) -> __m256 {
    _mm256_blend_ps::<0x80>(_mm256_permutevar8x32_ps(e, _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7)), next)
}

/// `acc += v` with `v`'s 8 values widened to f64 (low half in `acc[0]`).
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn add_f64(acc: &mut [__m256d; 2], v: __m256) {
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)));
}
