//! Resize as separable resampling: one axis at a time, each output position along the axis a
//! weighted sum of `taps` input positions (indices already clamped into range). The tap
//! tables depend only on shapes and attributes, so the compiler can compute them once.

/// `out[o, y, i] = Σ_j w[y*taps + j] * x[o, idx[y*taps + j], i]`, or `extrap_value` where
/// `extrap[y]` is set (tf_crop_and_resize outside the crop). `x` is `[outer, in_len, inner]`,
/// `out` is `[outer, out_len, inner]` with `out_len = idx.len() / taps`.
#[allow(clippy::too_many_arguments)]
pub fn resample_axis(
    x: &[f64],
    outer: usize,
    in_len: usize,
    inner: usize,
    idx: &[usize],
    w: &[f64],
    taps: usize,
    extrap: &[bool],
    extrap_value: f64,
    out: &mut [f64],
) {
    let out_len = idx.len().checked_div(taps).unwrap_or(0);
    for o in 0..outer {
        let xb = o * in_len * inner;
        let ob = o * out_len * inner;
        for y in 0..out_len {
            let dst = &mut out[ob + y * inner..ob + (y + 1) * inner];
            if extrap.get(y).copied().unwrap_or(false) {
                dst.fill(extrap_value);
                continue;
            }
            dst.fill(0.0);
            for j in 0..taps {
                let wt = w[y * taps + j];
                if wt == 0.0 {
                    continue;
                }
                let src = &x[xb + idx[y * taps + j] * inner..xb + (idx[y * taps + j] + 1) * inner];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += wt * s;
                }
            }
        }
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
        resample_axis(&x, 1, 2, 2, &idx, &w, 2, &[false, false, true], -1.0, &mut out);
        assert_eq!(out, [0.0, 10.0, 1.0, 15.0, -1.0, -1.0]);
    }
}
