//! Training-mode dropout with a counter-based generator: whether element `i` is kept is a
//! pure function of (key, i), so the backward pass recomputes the forward mask from the key
//! instead of storing it, and the interpreter and generated code drop the same elements.
use crate::elem::Elem;

/// splitmix64's finalizer: a bijective mix in which every input bit affects every output bit.
#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform 24-bit integer for element `i` under `key` (24 bits: exactly comparable with an
/// f32 ratio).
#[inline]
pub fn uniform24(key: u64, i: u64) -> u32 {
    // Mixing the index first keeps neighbouring keys' streams unrelated (key ^ i alone would
    // make key k, element j equal key k ^ 1, element j ^ 1).
    (mix64(key ^ mix64(i.wrapping_add(0x9e37_79b9_7f4a_7c15))) >> 40) as u32
}

/// Elements whose uniform draw is below this are dropped (probability `ratio`).
#[inline]
pub fn threshold(ratio: f32) -> u32 {
    let r = if ratio.is_nan() { 0.0 } else { ratio.clamp(0.0, 1.0) };
    // r·2^24 is exact in f64 and at most 2^24, so the cast neither wraps nor rounds up past it.
    (r as f64 * (1u64 << 24) as f64) as u32
}

/// Whether element `i` is kept.
#[inline]
pub fn keep(key: u64, i: u64, ratio: f32) -> bool {
    uniform24(key, i) >= threshold(ratio)
}

/// `y[i] = x[i] / (1 - ratio)` where kept, else 0; `mask[i]` (when not empty) is 1 where kept.
/// A ratio of 1 drops everything (zeros, not 0·inf).
pub fn dropout<T: Elem>(x: &[T], y: &mut [T], key: u64, ratio: f32, mask: &mut [u8]) {
    let th = threshold(ratio);
    let scale = if th >= 1 << 24 { T::zero() } else { T::from_f64(1.0 / (1.0 - ratio as f64)) };
    for (i, (o, &v)) in y.iter_mut().zip(x).enumerate() {
        let k = uniform24(key, i as u64) >= th;
        *o = if k { v.mul(scale) } else { T::zero() };
        if let Some(m) = mask.get_mut(i) {
            *m = k as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_about_ratio_and_scales_the_rest() {
        let x = [1.0f32; 10000];
        let mut y = [0.0f32; 10000];
        let mut m = [0u8; 10000];
        dropout(&x, &mut y, 42, 0.3, &mut m);
        let kept = m.iter().filter(|&&k| k == 1).count();
        assert!((6700..7300).contains(&kept), "{kept}");
        for (&v, &k) in y.iter().zip(&m) {
            assert_eq!(v, if k == 1 { 1.0 / 0.7 } else { 0.0 });
        }
        // Same key, same mask; another key, another mask.
        let mut y2 = [0.0f32; 10000];
        dropout(&x, &mut y2, 42, 0.3, &mut []);
        assert_eq!(y, y2);
        dropout(&x, &mut y2, 43, 0.3, &mut []);
        assert_ne!(y, y2);
    }

    #[test]
    fn edge_ratios() {
        let x = [2.0f64; 64];
        let mut y = [0.0f64; 64];
        dropout(&x, &mut y, 1, 0.0, &mut []);
        assert_eq!(y, x);
        dropout(&x, &mut y, 1, 1.0, &mut []);
        assert_eq!(y, [0.0; 64]);
    }
}
