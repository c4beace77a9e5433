//! LinearAttention (opset 27): a recurrent state `S` of `[d_k, d_v]` per batch and KV head,
//! updated each step (`linear`: S += k vᵀ; `gated`: S is first scaled by exp(decay); `delta`:
//! v is replaced by β (v − Sᵀk)), and read by each query head of the group: o = scale · qᵀS.
//! Arithmetic in f32, as the ONNX reference; the only working memory is the caller's
//! `scratch` (`scratch_len` f32s).
use crate::elem::Elem;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub batch: usize,
    pub seq: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub dk: usize,
    pub dv: usize,
    /// Decay has one value per key dim (`[b, t, kv_heads * dk]`), else one per head.
    pub decay_per_key: bool,
    /// Beta has one value per KV head, else one shared (`[b, t, 1]`).
    pub beta_per_head: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub gated: bool,
    pub delta: bool,
    pub scale: f32,
}

/// Query `[b, t, q_heads * dk]`, key `[b, t, kv_heads * dk]`, value `[b, t, kv_heads * dv]`,
/// past state `[b, kv_heads, dk, dv]` (type `S`), decay and beta as `Dims` says.
pub struct Inputs<'a, T, S> {
    pub q: &'a [T],
    pub k: &'a [T],
    pub v: &'a [T],
    pub past: Option<&'a [S]>,
    pub decay: Option<&'a [T]>,
    pub beta: Option<&'a [T]>,
}

pub fn scratch_len(d: &Dims) -> usize {
    d.dk * d.dv + d.dv
}

#[inline]
fn f<T: Elem>(x: T) -> f32 {
    x.to_f64() as f32
}

/// `y` is `[b, t, q_heads * dv]`, `present` `[b, kv_heads, dk, dv]`.
pub fn linear_attention<T: Elem, S: Elem>(d: &Dims, p: &Params, inp: &Inputs<T, S>, y: &mut [T], mut present: Option<&mut [S]>, scratch: &mut [f32]) {
    let Dims { batch, seq, q_heads: hq, kv_heads: hk, dk, dv, .. } = *d;
    let group = hq / hk.max(1);
    let (state, vt) = scratch[..dk * dv + dv].split_at_mut(dk * dv);
    for b in 0..batch {
        for h in 0..hk {
            let soff = (b * hk + h) * dk * dv;
            match inp.past {
                Some(ps) => state.iter_mut().zip(&ps[soff..soff + dk * dv]).for_each(|(s, &x)| *s = f(x)),
                None => state.fill(0.0),
            }
            for t in 0..seq {
                let bt = b * seq + t;
                if let (true, Some(dec)) = (p.gated, inp.decay) {
                    for i in 0..dk {
                        let g = if d.decay_per_key { dec[(bt * hk + h) * dk + i] } else { dec[bt * hk + h] };
                        let e = crate::math::expf(f(g));
                        state[i * dv..(i + 1) * dv].iter_mut().for_each(|s| *s *= e);
                    }
                }
                let kt = |i: usize| f(inp.k[(bt * hk + h) * dk + i]);
                for (m, x) in vt.iter_mut().enumerate() {
                    *x = f(inp.v[(bt * hk + h) * dv + m]);
                }
                if let (true, Some(beta)) = (p.delta, inp.beta) {
                    let bv = f(if d.beta_per_head { beta[bt * hk + h] } else { beta[bt] });
                    for (m, x) in vt.iter_mut().enumerate() {
                        let mut r = 0.0f32;
                        for i in 0..dk {
                            r += state[i * dv + m] * kt(i);
                        }
                        *x = bv * (*x - r);
                    }
                }
                for i in 0..dk {
                    let ki = kt(i);
                    for m in 0..dv {
                        state[i * dv + m] += ki * vt[m];
                    }
                }
                for qh in h * group..(h + 1) * group {
                    for m in 0..dv {
                        let mut o = 0.0f32;
                        for i in 0..dk {
                            o += f(inp.q[(bt * hq + qh) * dk + i]) * state[i * dv + m];
                        }
                        y[(bt * hq + qh) * dv + m] = T::from_f64((p.scale * o) as f64);
                    }
                }
            }
            if let Some(ps) = present.as_deref_mut() {
                for (o, &s) in ps[soff..soff + dk * dv].iter_mut().zip(state.iter()) {
                    *o = S::from_f64(s as f64);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_delta_rules_by_hand() {
        let d = Dims { batch: 1, seq: 2, q_heads: 1, kv_heads: 1, dk: 1, dv: 1, decay_per_key: false, beta_per_head: true };
        let (q, k, v) = ([1.0f32, 2.0], [1.0f32, 1.0], [3.0f32, 4.0]);
        let (mut y, mut st, mut scratch) = ([0f32; 2], [0f32; 1], [0f32; 2]);
        let inp = Inputs::<f32, f32> { q: &q, k: &k, v: &v, past: None, decay: None, beta: None };
        let p = Params { gated: false, delta: false, scale: 1.0 };
        linear_attention(&d, &p, &inp, &mut y, Some(&mut st), &mut scratch);
        // S = 3, then 3 + 4.
        assert_eq!((y, st), ([3.0, 14.0], [7.0]));
        let inp = Inputs::<f32, f32> { beta: Some(&[1.0, 1.0]), ..inp };
        linear_attention(&d, &Params { delta: true, ..p }, &inp, &mut y, Some(&mut st), &mut scratch);
        // The second write is 4 - 3 (what S already returns for k = 1).
        assert_eq!((y, st), ([3.0, 8.0], [4.0]));
    }
}
