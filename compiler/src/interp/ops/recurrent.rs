//! The opset-27 recurrent ops: CausalConvWithState and LinearAttention. The math is the runtime
//! kernels' (`kernels::causal_conv`, `kernels::linear_attention`, run here on f64 copies and
//! cast back); this file checks shapes and resolves the kernels' sizes (shared with inference
//! and codegen).
use super::util::{arg, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{DType, LinearAttentionAttrs};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::{causal_conv as cc, linear_attention as la};

/// CausalConvWithState sizes from input `[b, c, len]`, weight `[c, 1, k]`, bias and past shapes.
pub fn causal_conv_dims(x: &[usize], w: &[usize], bias: Option<&[usize]>, past: Option<&[usize]>) -> Result<cc::Dims, String> {
    let &[batch, channels, len] = x else { return Err(format!("input must be [batch, channels, length], got {x:?}")) };
    let &[wc, 1, k] = w else { return Err(format!("weight must be [channels, 1, k], got {w:?}")) };
    if wc != channels || k == 0 {
        return Err(format!("weight {w:?} does not fit input {x:?}"));
    }
    if let Some(b) = bias {
        let n: usize = b.iter().product();
        if b.len() > 1 || (n != channels && n != 1) {
            return Err(format!("bias {b:?} must have {channels} or 1 elements"));
        }
    }
    if let Some(p) = past {
        if p != [batch, channels, k - 1] {
            return Err(format!("past_state {p:?} must be [{batch}, {channels}, {}]", k - 1));
        }
    }
    Ok(cc::Dims { batch, channels, len, k })
}

/// LinearAttention sizes from the query, key, value, decay and beta shapes.
pub fn linear_attention_dims(
    a: &LinearAttentionAttrs,
    q: &[usize],
    k: &[usize],
    v: &[usize],
    decay: Option<&[usize]>,
    beta: Option<&[usize]>,
) -> Result<la::Dims, String> {
    let (hq, hk) = (a.q_num_heads, a.kv_num_heads);
    if hq == 0 || hk == 0 || hq % hk != 0 {
        return Err(format!("q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hk})"));
    }
    let (&[b, t, qh], &[kb, kt, kh], &[vb, vt, vh]) = (q, k, v) else {
        return Err(format!("query {q:?}, key {k:?} and value {v:?} must be rank 3"));
    };
    if kb != b || vb != b || kt != t || vt != t || qh % hq != 0 || vh % hk != 0 || kh != hk * (qh / hq) {
        return Err(format!("query {q:?}, key {k:?} and value {v:?} do not fit {hq} query and {hk} KV heads"));
    }
    let (dk, dv) = (qh / hq, vh / hk);
    let mut decay_per_key = false;
    if let Some(ds) = decay {
        match *ds {
            [db, dt, n] if db == b && dt == t && n == hk => {}
            [db, dt, n] if db == b && dt == t && n == hk * dk => decay_per_key = true,
            _ => return Err(format!("decay {ds:?} must be [{b}, {t}, {hk}] or [{b}, {t}, {}]", hk * dk)),
        }
    }
    if a.gated != decay.is_some() {
        return Err(if a.gated { "this update_rule needs decay".into() } else { "this update_rule takes no decay".into() });
    }
    let mut beta_per_head = false;
    if let Some(bs) = beta {
        match *bs {
            [bb, bt, n] if bb == b && bt == t && n == hk => beta_per_head = true,
            [bb, bt, 1] if bb == b && bt == t => {}
            _ => return Err(format!("beta {bs:?} must be [{b}, {t}, {hk}] or [{b}, {t}, 1]")),
        }
    }
    if a.delta != beta.is_some() {
        return Err(if a.delta { "this update_rule needs beta".into() } else { "this update_rule takes no beta".into() });
    }
    Ok(la::Dims { batch: b, seq: t, q_heads: hq, kv_heads: hk, dk, dv, decay_per_key, beta_per_head })
}

/// The scale the kernel multiplies by: the attribute, or 1/sqrt(d_k) (as f32, as the reference).
pub fn linear_attention_params(a: &LinearAttentionAttrs, d: &la::Dims) -> la::Params {
    let scale = match a.scale {
        Some(s) if s != 0.0 => s,
        _ => (1.0 / (d.dk as f64).sqrt()) as f32,
    };
    la::Params { gated: a.gated, delta: a.delta, scale }
}

fn float_arg<'a>(args: &'a [Option<RtValue>], i: usize, what: &str) -> Result<Option<&'a Tensor>, String> {
    let t = opt_arg(args, i)?;
    if let Some(t) = t {
        if !t.dtype().is_float() {
            return Err(format!("{what} must be a float tensor, got {}", t.dtype()));
        }
    }
    Ok(t)
}

fn from_f64(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor, String> {
    super::cast::cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

pub fn causal_conv(silu: bool, args: &[Option<RtValue>]) -> OpResult {
    let (x, w) = (arg(args, 0)?, arg(args, 1)?);
    let (bias, past) = (opt_arg(args, 2)?, opt_arg(args, 3)?);
    let dtype = x.dtype();
    for (t, what) in [(Some(w), "weight"), (bias, "bias"), (past, "past_state")] {
        if let Some(t) = t.filter(|t| t.dtype() != dtype) {
            return Err(format!("{what} is {} but input is {dtype}", t.dtype()));
        }
    }
    let d = causal_conv_dims(&x.shape, &w.shape, bias.map(|t| &t.shape[..]), past.map(|t| &t.shape[..]))?;
    let state_shape = vec![d.batch, d.channels, d.k - 1];
    // The kernel rounds to the storage type where the reference does, so it runs on it.
    macro_rules! go {
        ($($v:ident),*) => {
            match (&x.data, &w.data) {
                $((Data::$v(xv), Data::$v(wv)) => {
                    let (bias, past) = (bias.map(|t| &t.data), past.map(|t| &t.data));
                    let inp = cc::Inputs {
                        x: xv,
                        w: wv,
                        bias: if let Some(Data::$v(b)) = bias { Some(&b[..]) } else { None },
                        past: if let Some(Data::$v(p)) = past { Some(&p[..]) } else { None },
                    };
                    let mut y = vec![Default::default(); xv.len()];
                    let mut present = vec![Default::default(); state_shape.iter().product()];
                    cc::causal_conv(&d, &inp, silu, &mut y, Some(&mut present));
                    (Data::$v(y), Data::$v(present))
                })*
                _ => return Err(format!("input must be a float tensor, got {dtype}")),
            }
        };
    }
    let (y, present) = go!(F32, F64, F16, BF16);
    Ok(vec![RtValue::Tensor(Tensor::new(x.shape.clone(), y)), RtValue::Tensor(Tensor::new(state_shape, present))])
}

pub fn linear_attention(a: &LinearAttentionAttrs, args: &[Option<RtValue>]) -> OpResult {
    let (q, k, v) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
    let dtype = q.dtype();
    if !dtype.is_float() {
        return Err(format!("query must be a float tensor, got {dtype}"));
    }
    let past = float_arg(args, 3, "past_state")?;
    let (decay, beta) = (float_arg(args, 4, "decay")?, float_arg(args, 5, "beta")?);
    let d = linear_attention_dims(a, &q.shape, &k.shape, &v.shape, decay.map(|t| &t.shape[..]), beta.map(|t| &t.shape[..]))?;
    let state_shape = vec![d.batch, d.kv_heads, d.dk, d.dv];
    if let Some(p) = past.filter(|p| p.shape != state_shape) {
        return Err(format!("past_state {:?} must be {state_shape:?}", p.shape));
    }
    // The kernel works in f32 and rounds each result once, so f64 copies give the same bits.
    let vecs = |t: Option<&Tensor>| t.map(|t| t.to_f64_vec());
    let (qv, kv, vv) = (q.to_f64_vec(), k.to_f64_vec(), v.to_f64_vec());
    let (pv, dv, bv) = (vecs(past), vecs(decay), vecs(beta));
    let inp = la::Inputs { q: &qv, k: &kv, v: &vv, past: pv.as_deref(), decay: dv.as_deref(), beta: bv.as_deref() };
    let mut y = vec![0.0f64; d.batch * d.seq * d.q_heads * d.dv];
    let mut present = vec![0.0f64; state_shape.iter().product()];
    let mut scratch = vec![0.0f32; la::scratch_len(&d)];
    la::linear_attention(&d, &linear_attention_params(a, &d), &inp, &mut y, Some(&mut present), &mut scratch);
    let state_dtype = past.map_or(dtype, |p| p.dtype());
    Ok(vec![
        RtValue::Tensor(from_f64(dtype, vec![d.batch, d.seq, d.q_heads * d.dv], y)?),
        RtValue::Tensor(from_f64(state_dtype, state_shape, present)?),
    ])
}
