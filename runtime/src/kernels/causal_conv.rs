//! CausalConvWithState (opset 27): a depthwise 1-D convolution over `[batch, channels, len]`
//! whose left context is the previous call's last `k - 1` inputs (zeros without a state), with
//! an optional SiLU. Rounding follows the ONNX reference: the convolution is rounded to the
//! storage type, then the bias add, and SiLU is computed in f32 and rounded once.
use crate::elem::Elem;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub batch: usize,
    pub channels: usize,
    pub len: usize,
    /// Kernel size (≥ 1); the state holds `k - 1` steps.
    pub k: usize,
}

/// Inputs: `x` `[batch, channels, len]`, `w` `[channels, 1, k]`, `bias` of `channels` or 1
/// elements, `past` `[batch, channels, k - 1]`.
pub struct Inputs<'a, T> {
    pub x: &'a [T],
    pub w: &'a [T],
    pub bias: Option<&'a [T]>,
    pub past: Option<&'a [T]>,
}

/// `y` is `[batch, channels, len]`, `present` `[batch, channels, k - 1]`.
pub fn causal_conv<T: Elem>(d: &Dims, inp: &Inputs<T>, silu: bool, y: &mut [T], mut present: Option<&mut [T]>) {
    let Dims { batch, channels, len, k } = *d;
    let hist = k.saturating_sub(1);
    for b in 0..batch {
        for c in 0..channels {
            let row = b * channels + c;
            // Element `p` of the left-padded input (state, then x).
            let padded = |p: usize| -> f64 {
                if p < hist {
                    inp.past.map_or(0.0, |s| s[row * hist + p].to_f64())
                } else {
                    inp.x[row * len + p - hist].to_f64()
                }
            };
            for t in 0..len {
                let mut acc = 0.0f64;
                for j in 0..k {
                    acc += inp.w[c * k + j].to_f64() * padded(t + j);
                }
                let mut v = T::from_f64(acc);
                if let Some(bias) = inp.bias {
                    let bv = if bias.len() == 1 { bias[0] } else { bias[c] };
                    v = T::from_f64(v.to_f64() + bv.to_f64());
                }
                if silu {
                    let x = v.to_f64() as f32;
                    let s = 1.0f32 / (1.0f32 + crate::math::expf(-x));
                    v = T::from_f64((x * s) as f64);
                }
                y[row * len + t] = v;
            }
            if let Some(ps) = present.as_deref_mut() {
                for i in 0..hist {
                    ps[row * hist + i] = T::from_f64(padded(len + i));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_the_state_and_returns_the_last_inputs() {
        let d = Dims { batch: 1, channels: 1, len: 3, k: 2 };
        let (x, w) = ([1.0f32, 2.0, 3.0], [1.0f32, 1.0]);
        let (mut y, mut st) = ([0f32; 3], [0f32; 1]);
        causal_conv(&d, &Inputs { x: &x, w: &w, bias: None, past: None }, false, &mut y, Some(&mut st));
        assert_eq!((y, st), ([1.0, 3.0, 5.0], [3.0]));
        causal_conv(&d, &Inputs { x: &x, w: &w, bias: Some(&[1.0]), past: Some(&[5.0]) }, false, &mut y, None);
        assert_eq!(y, [7.0, 4.0, 6.0]);
    }
}
