//! Newer ONNX activations and RotaryEmbedding: arithmetic in f64, rounded once to the
//! element type (the interpreter calls these too, so both give the same bits).
use crate::math::{erf, exp};
use crate::Elem;

/// Swish: `x * sigmoid(alpha * x)`, written as `x / (1 + exp(-alpha * x))`.
#[inline]
pub fn swish(x: f64, alpha: f64) -> f64 {
    x / (1.0 + exp(-alpha * x))
}

pub fn swish_map<T: Elem>(x: &[T], alpha: f64, y: &mut [T]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = T::from_f64(swish(v.to_f64(), alpha));
    }
}

/// BiasSplitGelu (onnxruntime's contrib op): each row of `x` (`bias.len()` = 2h values) plus
/// `bias`, split in half, gives `h` values `left · gelu(right)`, gelu(v) = v/2 · (1 + erf(v/√2)).
pub fn bias_split_gelu<T: Elem>(x: &[T], bias: &[T], y: &mut [T]) {
    let h = bias.len() / 2;
    if h == 0 {
        return;
    }
    let (bl, br) = bias.split_at(h);
    for (row, out) in x.chunks_exact(2 * h).zip(y.chunks_exact_mut(h)) {
        let (xl, xr) = row.split_at(h);
        for ((((o, &l), &r), &bl), &br) in out.iter_mut().zip(xl).zip(xr).zip(bl).zip(br) {
            let (a, b) = (l.to_f64() + bl.to_f64(), r.to_f64() + br.to_f64());
            *o = T::from_f64(a * 0.5 * b * (1.0 + erf(b * core::f64::consts::FRAC_1_SQRT_2)));
        }
    }
}

/// SwiGLU: `swish(a) * b`, elementwise over equal shapes.
pub fn swiglu_map<T: Elem>(a: &[T], b: &[T], alpha: f64, y: &mut [T]) {
    for ((o, &p), &q) in y.iter_mut().zip(a).zip(b) {
        *o = T::from_f64(swish(p.to_f64(), alpha) * q.to_f64());
    }
}

/// RotaryEmbedding geometry: X is `[batch, heads, seq, head]` (`four`) or
/// `[batch, seq, heads * head]`; the first `2 * half` entries of each head are rotated.
#[derive(Clone, Copy, Debug)]
pub struct Rotary {
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub head: usize,
    pub half: usize,
    pub four: bool,
    pub interleaved: bool,
}

/// Rotate `x` into `out`. Cache row for (batch b, position s) is `pos[b * seq + s]` when
/// position ids are given (caches `[max_pos, half]`), else `b * seq + s` (caches
/// `[batch, seq, half]`). A position id outside `0..max_pos` is returned as the error, with
/// nothing written.
#[allow(clippy::too_many_arguments)]
pub fn rotary<T: Elem, C: Elem, P: Elem>(
    x: &[T],
    cos: &[C],
    sin: &[C],
    pos: Option<&[P]>,
    max_pos: usize,
    r: Rotary,
    out: &mut [T],
) -> Result<(), i64> {
    if let Some(p) = pos {
        if let Some(&bad) = p.iter().find(|&&v| v.to_i64() < 0 || v.to_i64() as u64 >= max_pos as u64) {
            return Err(bad.to_i64());
        }
    }
    out.copy_from_slice(x);
    let Rotary { batch, seq, heads, head, half, four, interleaved } = r;
    for bi in 0..batch {
        for si in 0..seq {
            let row = match pos {
                Some(p) => p[bi * seq + si].to_i64() as usize,
                None => bi * seq + si,
            } * half;
            for hi in 0..heads {
                let base = if four { ((bi * heads + hi) * seq + si) * head } else { ((bi * seq + si) * heads + hi) * head };
                for i in 0..half {
                    let (c, sn) = (cos[row + i].to_f64(), sin[row + i].to_f64());
                    let (i1, i2) = if interleaved { (base + 2 * i, base + 2 * i + 1) } else { (base + i, base + i + half) };
                    let (x1, x2) = (x[i1].to_f64(), x[i2].to_f64());
                    out[i1] = T::from_f64(c * x1 - sn * x2);
                    out[i2] = T::from_f64(sn * x1 + c * x2);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotary_quarter_turn() {
        let r = Rotary { batch: 1, seq: 1, heads: 1, head: 2, half: 1, four: false, interleaved: false };
        let mut out = [0.0f32; 2];
        rotary(&[1.0f32, 0.0], &[0.0f32], &[1.0f32], None::<&[i64]>, 0, r, &mut out).unwrap();
        assert_eq!(out, [0.0, 1.0]);
        assert_eq!(rotary(&[1.0f32, 0.0], &[0.0f32], &[1.0f32], Some(&[3i64][..]), 1, r, &mut out), Err(3));
    }

    #[test]
    fn swish_at_zero_and_large() {
        assert_eq!(swish(0.0, 1.0), 0.0);
        assert!((swish(50.0, 1.0) - 50.0).abs() < 1e-12);
    }
}
