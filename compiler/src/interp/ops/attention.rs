//! ONNX Attention (opset 23+): scaled dot-product attention with masks, causal and
//! sliding-window biases, KV cache, grouped-query heads and softcap. The computation is the
//! runtime kernel `kernels::attention` (f64 here; the result is cast to Q's type); this file
//! checks and resolves the shapes (shared with codegen).
use super::util::{arg, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{AttentionAttrs, DType};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::attention as k;

/// `[b, h, s, d]` of a 4-D input, or of a 3-D `[b, s, h * d]` one given its head count.
fn dims4(shape: &[usize], heads: Option<usize>, what: &str) -> Result<([usize; 4], bool), String> {
    match *shape {
        [b, h, s, d] => Ok(([b, h, s, d], false)),
        [b, s, hidden] => {
            let h = heads.ok_or_else(|| format!("{what} is 3-D: q_num_heads and kv_num_heads are required"))?;
            if h == 0 || hidden % h != 0 {
                return Err(format!("{what} hidden size {hidden} is not divisible by {h} heads"));
            }
            Ok(([b, h, s, hidden / h], true))
        }
        _ => Err(format!("{what} must be 3-D or 4-D, got {shape:?}")),
    }
}

/// Resolve and check the kernel's sizes from the input shapes.
pub fn resolve_dims(a: &AttentionAttrs, q: &[usize], kk: &[usize], v: &[usize], past: Option<(&[usize], &[usize])>) -> Result<k::Dims, String> {
    let (qd, q_3d) = dims4(q, a.q_num_heads, "Q")?;
    let (kd, kv_3d) = dims4(kk, a.kv_num_heads, "K")?;
    let (vd, v_3d) = dims4(v, a.kv_num_heads, "V")?;
    if kv_3d != v_3d {
        return Err(format!("K {kk:?} and V {v:?} must have the same rank"));
    }
    let mut past_seq = 0;
    if let Some((pk, pv)) = past {
        let (pk, _) = dims4(pk, None, "past_key")?;
        let (pv, _) = dims4(pv, None, "past_value")?;
        for (p, c) in [(pk, kd), (pv, vd)] {
            if p[0] != c[0] || p[1] != c[1] || p[3] != c[3] {
                return Err(format!("past {p:?} and current {c:?} do not concatenate"));
            }
        }
        if pk[2] != pv[2] {
            return Err(format!("past_key {pk:?} and past_value {pv:?} differ in length"));
        }
        past_seq = pk[2];
    }
    let [b, hq, sq, dq] = qd;
    let [bk, hk, skv, dk] = kd;
    let [bv, hv, skv2, dv] = vd;
    if bk != b || bv != b || dk != dq || skv2 != skv || hk != hv || hk == 0 || hq % hk != 0 {
        return Err(format!("Q {qd:?}, K {kd:?}, V {vd:?} do not fit together"));
    }
    Ok(k::Dims { batch: b, q_heads: hq, kv_heads: hk, q_seq: sq, past_seq, cur_seq: skv, head_dim: dq, v_head_dim: dv, q_3d, kv_3d })
}

/// The mask shape right-aligned and padded to 4-D, checked against `[b, hq, sq, kv_seq]`.
pub fn mask_dims(ms: &[usize], d: &k::Dims) -> Result<[usize; 4], String> {
    if ms.is_empty() || ms.len() > 4 {
        return Err(format!("attn_mask must have rank 1..4, got {ms:?}"));
    }
    let full = [d.batch, d.q_heads, d.q_seq, d.kv_seq()];
    let mut out = [1usize; 4];
    let off = 4 - ms.len();
    for (i, &n) in ms.iter().enumerate() {
        let want = full[off + i];
        let ok = if i + 1 == ms.len() { n <= want } else { n == want || n == 1 };
        if !ok || n == 0 {
            return Err(format!("attn_mask {ms:?} does not broadcast to {full:?}"));
        }
        out[off + i] = n;
    }
    Ok(out)
}

/// Resolved scalar attributes; `dtype` is Q's (P is rounded to it before P·V).
pub fn params(a: &AttentionAttrs, d: &k::Dims, dtype: DType) -> k::Params {
    k::Params {
        is_causal: a.is_causal,
        scale: a.scale.map(|s| s as f64).unwrap_or(1.0 / (d.head_dim as f64).sqrt()),
        softcap: a.softcap as f64,
        left_window: a.left_window_size,
        right_window: a.right_window_size,
        qk_mode: a.qk_matmul_output_mode,
        round_p: match dtype {
            DType::F32 => k::round_f32,
            DType::F16 => k::round_f16,
            DType::BF16 => k::round_bf16,
            _ => k::round_none,
        },
        steps: match dtype {
            DType::F16 => k::Steps::F16,
            DType::BF16 => k::Steps::Bf16,
            _ => k::Steps::Wide,
        },
    }
}

fn from_f64(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor, String> {
    super::cast::cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

pub fn eval(a: &AttentionAttrs, args: &[Option<RtValue>]) -> OpResult {
    let (q, kt, v) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
    let dtype = q.dtype();
    if !dtype.is_float() {
        return Err(format!("Q must be a float tensor, got {dtype}"));
    }
    let mask = opt_arg(args, 3)?;
    let past_k = opt_arg(args, 4)?;
    let past_v = opt_arg(args, 5)?;
    let nonpad = opt_arg(args, 6)?.map(|t| t.to_i64_vec().ok_or("nonpad_kv_seqlen must be integers")).transpose()?;
    let past = match (past_k, past_v) {
        (Some(pk), Some(pv)) => Some((&pk.shape[..], &pv.shape[..])),
        (None, None) => None,
        _ => return Err("past_key and past_value must be given together".into()),
    };
    let d = resolve_dims(a, &q.shape, &kt.shape, &v.shape, past)?;
    if let Some(np) = &nonpad {
        if np.len() < d.batch {
            return Err("nonpad_kv_seqlen is shorter than the batch".into());
        }
    }
    let (qv, kv, vv) = (q.to_f64_vec(), kt.to_f64_vec(), v.to_f64_vec());
    let (pk, pv) = (past_k.map(|t| t.to_f64_vec()), past_v.map(|t| t.to_f64_vec()));
    let (bool_mask, add_mask);
    let mask = match mask {
        None => k::Mask::None,
        Some(m) => {
            let ms = mask_dims(&m.shape, &d)?;
            if m.dtype() == DType::Bool {
                bool_mask = m.to_f64_vec().into_iter().map(|x| (x != 0.0) as u8).collect::<Vec<u8>>();
                k::Mask::Bool(&bool_mask, ms)
            } else {
                add_mask = m.to_f64_vec();
                k::Mask::Add(&add_mask, ms)
            }
        }
    };
    let skv = d.kv_seq();
    let (b, hq, hk, sq, dq, dv) = (d.batch, d.q_heads, d.kv_heads, d.q_seq, d.head_dim, d.v_head_dim);
    let mut y = vec![0.0f64; b * hq * sq * dv];
    let mut present_k = vec![0.0f64; b * hk * skv * dq];
    let mut present_v = vec![0.0f64; b * hk * skv * dv];
    let mut qk = vec![0.0f64; b * hq * sq * skv];
    let mut scratch = vec![0.0f64; k::scratch_len(skv)];
    let inputs = k::Inputs { q: &qv, k: &kv, v: &vv, mask, past_k: pk.as_deref(), past_v: pv.as_deref(), nonpad: nonpad.as_deref() };
    let outputs = k::Outputs { y: &mut y, present_k: Some(&mut present_k), present_v: Some(&mut present_v), qk: Some(&mut qk) };
    k::attention(&d, &params(a, &d, dtype), &inputs, outputs, &mut scratch);
    let y_shape = if d.q_3d { vec![b, sq, hq * dv] } else { vec![b, hq, sq, dv] };
    Ok(vec![
        RtValue::Tensor(from_f64(dtype, y_shape, y)?),
        RtValue::Tensor(from_f64(kt.dtype(), vec![b, hk, skv, dq], present_k)?),
        RtValue::Tensor(from_f64(v.dtype(), vec![b, hk, skv, dv], present_v)?),
        RtValue::Tensor(from_f64(dtype, vec![b, hq, sq, skv], qk)?),
    ])
}
