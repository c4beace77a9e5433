//! Resize as separable resampling: one axis at a time, each output position along the axis a
//! weighted sum of `taps` input positions (indices already clamped into range). The tap
//! tables depend only on shapes and attributes, so the compiler can compute them once.
use crate::Elem;

/// `out[o, y, i] = Σ_j w[y*taps + j] * x[o, idx[y*taps + j], i]`, or `extrap_value` where
/// `extrap[y]` is set (tf_crop_and_resize outside the crop). `x` is `[outer, in_len, inner]`,
/// `out` is `[outer, out_len, inner]` with `out_len = idx.len() / taps`.
#[allow(clippy::too_many_arguments)]
pub fn resample_axis(
    x: &[f64],
    outer: usize,
    in_len: usize,
    inner: usize,
    idx: &[u32],
    w: &[f64],
    taps: usize,
    extrap: &[u8],
    extrap_value: f64,
    out: &mut [f64],
) {
    let out_len = idx.len().checked_div(taps).unwrap_or(0);
    for o in 0..outer {
        let xb = o * in_len * inner;
        let ob = o * out_len * inner;
        for y in 0..out_len {
            let dst = &mut out[ob + y * inner..ob + (y + 1) * inner];
            if extrap.get(y).is_some_and(|&e| e != 0) {
                dst.fill(extrap_value);
                continue;
            }
            dst.fill(0.0);
            for j in 0..taps {
                let wt = w[y * taps + j];
                if wt == 0.0 {
                    continue;
                }
                let i = idx[y * taps + j] as usize;
                let src = &x[xb + i * inner..xb + (i + 1) * inner];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += wt * s;
                }
            }
        }
    }
}

/// Widen the input to the f64 working buffer.
pub fn widen<T: Elem>(x: &[T], out: &mut [f64]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v.to_f64();
    }
}

/// Back to the element type: floats round once, integers round half to even and saturate.
pub fn narrow<T: Elem>(v: &[f64], out: &mut [T]) {
    let (lo, hi) = (T::lowest().to_f64(), T::highest().to_f64());
    for (o, &x) in out.iter_mut().zip(v) {
        *o = if T::IS_FLOAT { T::from_f64(x) } else { T::from_f64(crate::math::rint(x).clamp(lo, hi)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_two_taps() {
        // [1, 2, 1] -> 3 positions along the middle axis.
        let x = [0.0, 10.0, 2.0, 20.0];
        let idx = [0, 1, 0, 1, 1, 1];
        let w = [1.0, 0.0, 0.5, 0.5, 0.0, 1.0];
        let mut out = [0.0; 6];
        resample_axis(&x, 1, 2, 2, &idx, &w, 2, &[0, 0, 1], -1.0, &mut out);
        assert_eq!(out, [0.0, 10.0, 1.0, 15.0, -1.0, -1.0]);
    }
}
