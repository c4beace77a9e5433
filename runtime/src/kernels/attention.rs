//! ONNX Attention (opset 23+): scaled dot-product attention with an additive or boolean mask,
//! causal and sliding-window rules, KV cache (past + current keys/values), grouped-query heads
//! and softcap. Every size is explicit; the only working memory is the caller's `scratch`
//! (`scratch_len(kv_seq)` f64s). Arithmetic in f64; f32/f64 results are rounded once to `R`,
//! f16/bf16 ones after every step as the ONNX reference computes them (see `Steps`).
use crate::elem::Elem;

/// Sizes. Q is `[batch, q_heads, q_seq, head_dim]` (or `[batch, q_seq, q_heads * head_dim]`
/// when `q_3d`), K/V likewise with `kv_heads` and `cur_seq` (`kv_3d`), past K/V are
/// `[batch, kv_heads, past_seq, head_dim | v_head_dim]`; keys span `past_seq + cur_seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub batch: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub q_seq: usize,
    pub past_seq: usize,
    pub cur_seq: usize,
    pub head_dim: usize,
    pub v_head_dim: usize,
    pub q_3d: bool,
    pub kv_3d: bool,
}

impl Dims {
    pub fn kv_seq(&self) -> usize {
        self.past_seq + self.cur_seq
    }
}

/// Attributes, resolved.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub is_causal: bool,
    /// Q·Kᵀ scale (applied as √scale to each side, as the reference does).
    pub scale: f64,
    /// Tanh softcap when > 0.
    pub softcap: f64,
    /// Window sizes (negative: unbounded).
    pub left_window: i64,
    pub right_window: i64,
    /// What `qk` receives: 0/1 the scaled scores, 2 scores + bias, 3 the softmax.
    pub qk_mode: i64,
    /// Rounding of the probabilities before P·V (to Q's storage type, as the reference).
    pub round_p: fn(f64) -> f64,
    /// Rounding of intermediate results.
    pub steps: Steps,
}

/// How intermediate results are rounded. The reference computes in the input type: with
/// f16/bf16 every elementwise result is rounded to it, dot products accumulate in f32 (numpy's
/// matmul), and a row sum accumulates in f32 for f16 (numpy's half reduction) but rounds each
/// add to bf16 (ml_dtypes' add). `Wide` keeps f64 throughout (f32/f64 inputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steps {
    Wide,
    F16,
    Bf16,
}

impl Steps {
    /// An elementwise result.
    #[inline]
    fn op(self, x: f64) -> f64 {
        match self {
            Steps::Wide => x,
            Steps::F16 => round_f16(x),
            Steps::Bf16 => round_bf16(x),
        }
    }
    /// A partial dot product.
    #[inline]
    fn dot(self, x: f64) -> f64 {
        match self {
            Steps::Wide => x,
            Steps::F16 | Steps::Bf16 => round_f32(x),
        }
    }
    /// A partial row sum.
    #[inline]
    fn sum(self, x: f64) -> f64 {
        match self {
            Steps::Wide => x,
            Steps::F16 => round_f32(x),
            Steps::Bf16 => round_bf16(x),
        }
    }
}

/// The mask input: booleans (0/1 bytes; false masks out) or additive values, with its shape
/// right-aligned to `[batch, q_heads, q_seq, kv_seq]` and left-padded with ones. Its last
/// dimension may be shorter than `kv_seq`: keys beyond it are masked out.
#[derive(Clone, Copy)]
pub enum Mask<'a, R> {
    None,
    Bool(&'a [u8], [usize; 4]),
    Add(&'a [R], [usize; 4]),
}

pub fn scratch_len(kv_seq: usize) -> usize {
    2 * kv_seq
}

pub fn round_f32(x: f64) -> f64 {
    x as f32 as f64
}

pub fn round_f16(x: f64) -> f64 {
    half::f16::from_f64(x).to_f64()
}

pub fn round_bf16(x: f64) -> f64 {
    half::bf16::from_f64(x).to_f64()
}

pub fn round_none(x: f64) -> f64 {
    x
}

/// Inputs (K/V current, past optional). `nonpad` gives per-batch valid key lengths.
pub struct Inputs<'a, R> {
    pub q: &'a [R],
    pub k: &'a [R],
    pub v: &'a [R],
    pub mask: Mask<'a, R>,
    pub past_k: Option<&'a [R]>,
    pub past_v: Option<&'a [R]>,
    pub nonpad: Option<&'a [i64]>,
}

/// Outputs: `y` is `[batch, q_heads, q_seq, v_head_dim]` (`[batch, q_seq, q_heads * v_head_dim]`
/// when `q_3d`); present K/V `[batch, kv_heads, kv_seq, head_dim | v_head_dim]`; `qk`
/// `[batch, q_heads, q_seq, kv_seq]`.
pub struct Outputs<'a, R> {
    pub y: &'a mut [R],
    pub present_k: Option<&'a mut [R]>,
    pub present_v: Option<&'a mut [R]>,
    pub qk: Option<&'a mut [R]>,
}

/// Element `[b, h, s, d]` of a K- or V-like input: past rows first, then the current ones.
#[inline]
#[allow(clippy::too_many_arguments)]
fn kv_at<R: Elem>(past: Option<&[R]>, cur: &[R], dm: &Dims, dd: usize, b: usize, h: usize, s: usize, d: usize) -> f64 {
    let h_n = dm.kv_heads;
    if s < dm.past_seq {
        return past.map_or(0.0, |p| p[((b * h_n + h) * dm.past_seq + s) * dd + d].to_f64());
    }
    let s = s - dm.past_seq;
    let i = if dm.kv_3d { ((b * dm.cur_seq + s) * h_n + h) * dd + d } else { ((b * h_n + h) * dm.cur_seq + s) * dd + d };
    cur[i].to_f64()
}

pub fn attention<R: Elem>(dm: &Dims, p: &Params, inp: &Inputs<R>, out: Outputs<R>, scratch: &mut [f64]) {
    let Dims { batch: b_n, q_heads: hq, kv_heads: hk, q_seq: sq, head_dim: dq, v_head_dim: dv, .. } = *dm;
    let skv = dm.kv_seq();
    let group = hq / hk.max(1);
    let st = p.steps;
    let s = st.op(crate::math::sqrt(p.scale));
    let cap = st.op(p.softcap);
    let Outputs { y, present_k, present_v, mut qk } = out;
    if let Some(pk) = present_k {
        for b in 0..b_n {
            for h in 0..hk {
                for j in 0..skv {
                    for d in 0..dq {
                        pk[((b * hk + h) * skv + j) * dq + d] = R::from_f64(kv_at(inp.past_k, inp.k, dm, dq, b, h, j, d));
                    }
                }
            }
        }
    }
    if let Some(pv) = present_v {
        for b in 0..b_n {
            for h in 0..hk {
                for j in 0..skv {
                    for d in 0..dv {
                        pv[((b * hk + h) * skv + j) * dv + d] = R::from_f64(kv_at(inp.past_v, inp.v, dm, dv, b, h, j, d));
                    }
                }
            }
        }
    }
    let (row, brow) = scratch[..2 * skv].split_at_mut(skv);
    for bi in 0..b_n {
        let offset: i64 = match (inp.nonpad, inp.past_k) {
            (Some(np), None) => np[bi] - sq as i64,
            _ => dm.past_seq as i64,
        };
        for hi in 0..hq {
            let kh = hi / group.max(1);
            for i in 0..sq {
                // Additive bias of this row.
                for (j, bj) in brow.iter_mut().enumerate() {
                    let mut x = 0.0f64;
                    let idx = [bi, hi, i, j];
                    let at = |ms: &[usize; 4]| -> Option<usize> {
                        if j >= ms[3] {
                            return None;
                        }
                        let mut flat = 0usize;
                        for d in 0..4 {
                            let ix = if ms[d] == 1 { 0 } else { idx[d] };
                            flat = flat * ms[d] + ix;
                        }
                        Some(flat)
                    };
                    match inp.mask {
                        Mask::None => {}
                        Mask::Bool(m, ms) => {
                            if at(&ms).is_none_or(|f| m[f] == 0) {
                                x = f64::NEG_INFINITY;
                            }
                        }
                        Mask::Add(m, ms) => x += at(&ms).map_or(f64::NEG_INFINITY, |f| m[f].to_f64()),
                    }
                    let (ii, jj) = (i as i64 + offset, j as i64);
                    if p.is_causal && jj > ii {
                        x = f64::NEG_INFINITY;
                    }
                    if p.left_window >= 0 && ii - jj > p.left_window {
                        x = f64::NEG_INFINITY;
                    }
                    if p.right_window >= 0 && jj - ii > p.right_window {
                        x = f64::NEG_INFINITY;
                    }
                    if let Some(np) = inp.nonpad {
                        if jj >= np[bi] {
                            x = f64::NEG_INFINITY;
                        }
                    }
                    *bj = x;
                }
                // Scores.
                for (j, r) in row.iter_mut().enumerate() {
                    let mut acc = 0.0;
                    for d in 0..dq {
                        let qv = if dm.q_3d { inp.q[((bi * sq + i) * hq + hi) * dq + d] } else { inp.q[((bi * hq + hi) * sq + i) * dq + d] };
                        acc = st.dot(acc + st.op(qv.to_f64() * s) * st.op(kv_at(inp.past_k, inp.k, dm, dq, bi, kh, j, d) * s));
                    }
                    acc = st.op(acc);
                    if p.softcap > 0.0 {
                        acc = st.op(cap * st.op(crate::math::tanh(st.op(acc / cap))));
                    }
                    *r = acc;
                }
                let qoff = ((bi * hq + hi) * sq + i) * skv;
                if let Some(q) = qk.as_deref_mut() {
                    match p.qk_mode {
                        0 | 1 => {
                            for j in 0..skv {
                                q[qoff + j] = R::from_f64(row[j]);
                            }
                        }
                        2 => {
                            for j in 0..skv {
                                q[qoff + j] = R::from_f64(st.op(row[j] + brow[j]));
                            }
                        }
                        3 => {}
                        _ => q[qoff..qoff + skv].fill(R::default()),
                    }
                }
                for j in 0..skv {
                    row[j] = st.op(row[j] + brow[j]);
                }
                // Softmax; a row whose bias is all -inf attends nothing and gives zeros.
                let all_masked = brow.iter().all(|&x| x == f64::NEG_INFINITY);
                let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let safe = if mx == f64::NEG_INFINITY { 0.0 } else { mx };
                let mut sum = 0.0;
                for r in row.iter_mut() {
                    *r = st.op(crate::math::exp(st.op(*r - safe)));
                    sum = st.sum(sum + *r);
                }
                let sum = if sum == 0.0 { 1.0 } else { st.op(sum) };
                for r in row.iter_mut() {
                    *r = if all_masked { 0.0 } else { st.op(*r / sum) };
                }
                if p.qk_mode == 3 {
                    if let Some(q) = qk.as_deref_mut() {
                        for j in 0..skv {
                            q[qoff + j] = R::from_f64(row[j]);
                        }
                    }
                }
                for r in row.iter_mut() {
                    *r = (p.round_p)(*r);
                }
                for d in 0..dv {
                    let mut acc = 0.0;
                    for (j, pj) in row.iter().enumerate() {
                        acc = st.dot(acc + pj * kv_at(inp.past_v, inp.v, dm, dv, bi, kh, j, d));
                    }
                    let yi = if dm.q_3d { ((bi * sq + i) * hq + hi) * dv + d } else { ((bi * hq + hi) * sq + i) * dv + d };
                    y[yi] = R::from_f64(acc);
                }
            }
        }
    }
}
