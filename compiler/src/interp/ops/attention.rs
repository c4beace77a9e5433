//! ONNX Attention (opset 23+): scaled dot-product attention with masks, causal and
//! sliding-window biases, KV cache, grouped-query heads and softcap. Computed in f64 and
//! returned in Q's type.
use super::util::{arg, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{AttentionAttrs, DType};
use crate::tensor::{Data, Tensor};

/// A 4-D f64 view [b, h, s, d].
struct T4 {
    dims: [usize; 4],
    v: Vec<f64>,
}

impl T4 {
    fn at(&self, b: usize, h: usize, s: usize, d: usize) -> f64 {
        let [_, hh, ss, dd] = self.dims;
        self.v[((b * hh + h) * ss + s) * dd + d]
    }
}

fn to4(t: &Tensor, heads: Option<usize>, what: &str) -> Result<T4, String> {
    let v = t.to_f64_vec();
    match t.shape.as_slice() {
        &[b, h, s, d] => Ok(T4 { dims: [b, h, s, d], v }),
        &[b, s, hidden] => {
            let h = heads.ok_or_else(|| format!("{what} is 3-D: q_num_heads and kv_num_heads are required"))?;
            if h == 0 || hidden % h != 0 {
                return Err(format!("{what} hidden size {hidden} is not divisible by {h} heads"));
            }
            let d = hidden / h;
            // [b, s, h, d] → [b, h, s, d]
            let mut out = vec![0.0; v.len()];
            for bi in 0..b {
                for si in 0..s {
                    for hi in 0..h {
                        for di in 0..d {
                            out[((bi * h + hi) * s + si) * d + di] = v[((bi * s + si) * h + hi) * d + di];
                        }
                    }
                }
            }
            Ok(T4 { dims: [b, h, s, d], v: out })
        }
        s => Err(format!("{what} must be 3-D or 4-D, got {s:?}")),
    }
}

/// Concatenate along the sequence axis (2).
fn cat_seq(past: &T4, cur: &T4) -> Result<T4, String> {
    let [b, h, s1, d] = past.dims;
    let [b2, h2, s2, d2] = cur.dims;
    if b != b2 || h != h2 || d != d2 {
        return Err(format!("past {:?} and current {:?} do not concatenate", past.dims, cur.dims));
    }
    let mut v = Vec::with_capacity(b * h * (s1 + s2) * d);
    for bi in 0..b {
        for hi in 0..h {
            let p0 = (bi * h + hi) * s1 * d;
            v.extend_from_slice(&past.v[p0..p0 + s1 * d]);
            let c0 = (bi * h + hi) * s2 * d;
            v.extend_from_slice(&cur.v[c0..c0 + s2 * d]);
        }
    }
    Ok(T4 { dims: [b, h, s1 + s2, d], v })
}

fn from_f64(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor, String> {
    super::cast::cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

pub fn eval(a: &AttentionAttrs, args: &[Option<RtValue>]) -> OpResult {
    let (q, k, v) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
    let dtype = q.dtype();
    if !dtype.is_float() {
        return Err(format!("Q must be a float tensor, got {dtype}"));
    }
    let rank3 = q.rank() == 3;
    let qq = to4(q, a.q_num_heads, "Q")?;
    let mut kk = to4(k, a.kv_num_heads, "K")?;
    let mut vv = to4(v, a.kv_num_heads, "V")?;
    let mask = opt_arg(args, 3)?;
    let past_k = opt_arg(args, 4)?;
    let past_v = opt_arg(args, 5)?;
    let nonpad = opt_arg(args, 6)?.map(|t| t.to_i64_vec().ok_or("nonpad_kv_seqlen must be integers")).transpose()?;
    if past_k.is_some() != past_v.is_some() {
        return Err("past_key and past_value must be given together".into());
    }
    let past_len = past_k.map(|t| t.shape.get(2).copied().unwrap_or(0)).unwrap_or(0);
    if let (Some(pk), Some(pv)) = (past_k, past_v) {
        kk = cat_seq(&to4(pk, None, "past_key")?, &kk)?;
        vv = cat_seq(&to4(pv, None, "past_value")?, &vv)?;
    }
    let [b, hq, sq, dq] = qq.dims;
    let [bk, hk, skv, dk] = kk.dims;
    let [bv, hv, skv2, dv] = vv.dims;
    if bk != b || bv != b || dk != dq || skv2 != skv || hk != hv || hk == 0 || hq % hk != 0 {
        return Err(format!("Q {:?}, K {:?}, V {:?} do not fit together", qq.dims, kk.dims, vv.dims));
    }
    let group = hq / hk;
    let scale = a.scale.map(|s| s as f64).unwrap_or(1.0 / (dq as f64).sqrt());
    let s = scale.sqrt();

    // Additive bias [b, hq, sq, skv], from the mask (right-aligned broadcast) and the
    // causal / window / padding rules.
    let mask_at = match mask {
        None => None,
        Some(m) => {
            if m.rank() == 0 || m.rank() > 4 {
                return Err(format!("attn_mask must have rank 1..4, got {:?}", m.shape));
            }
            let is_bool = m.dtype() == DType::Bool;
            let mv = m.to_f64_vec();
            let ms = m.shape.clone();
            let full = [b, hq, sq, skv];
            let off = 4 - ms.len();
            for (i, &d) in ms.iter().enumerate() {
                let want = full[off + i];
                let ok = if i + 1 == ms.len() { d <= skv } else { d == want || d == 1 };
                if !ok {
                    return Err(format!("attn_mask {ms:?} does not broadcast to {full:?}"));
                }
            }
            Some((mv, ms, is_bool))
        }
    };
    let mut bias = vec![0.0f64; b * hq * sq * skv];
    for bi in 0..b {
        let offset: i64 = match (&nonpad, past_k) {
            (Some(np), None) => *np.get(bi).ok_or("nonpad_kv_seqlen is shorter than the batch")? - sq as i64,
            _ => past_len as i64,
        };
        for hi in 0..hq {
            for i in 0..sq {
                for j in 0..skv {
                    let mut x = 0.0;
                    if let Some((mv, ms, is_bool)) = &mask_at {
                        let idx = [bi, hi, i, j];
                        let off = 4 - ms.len();
                        let last = ms[ms.len() - 1];
                        let mut flat = 0usize;
                        let mut padded = false;
                        for (d, &n) in ms.iter().enumerate() {
                            let ix = idx[off + d];
                            let ix = if n == 1 && d + 1 < ms.len() { 0 } else { ix };
                            if d + 1 == ms.len() && ix >= last {
                                padded = true;
                            }
                            flat = flat * n + ix.min(n - 1);
                        }
                        let m = if padded { if *is_bool { 0.0 } else { f64::NEG_INFINITY } } else { mv[flat] };
                        x += if *is_bool { if m != 0.0 && !padded { 0.0 } else { f64::NEG_INFINITY } } else { m };
                    }
                    let (ii, jj) = (i as i64 + offset, j as i64);
                    if a.is_causal && jj > ii {
                        x = f64::NEG_INFINITY;
                    }
                    if a.left_window_size >= 0 && ii - jj > a.left_window_size {
                        x = f64::NEG_INFINITY;
                    }
                    if a.right_window_size >= 0 && jj - ii > a.right_window_size {
                        x = f64::NEG_INFINITY;
                    }
                    if let Some(np) = &nonpad {
                        if jj >= *np.get(bi).ok_or("nonpad_kv_seqlen is shorter than the batch")? {
                            x = f64::NEG_INFINITY;
                        }
                    }
                    bias[((bi * hq + hi) * sq + i) * skv + j] = x;
                }
            }
        }
    }

    let mut y = vec![0.0f64; b * hq * sq * dv];
    let mut qk_out = vec![0.0f64; b * hq * sq * skv];
    let mut row = vec![0.0f64; skv];
    for bi in 0..b {
        for hi in 0..hq {
            let kh = hi / group;
            for i in 0..sq {
                let brow = &bias[((bi * hq + hi) * sq + i) * skv..][..skv];
                for (j, r) in row.iter_mut().enumerate() {
                    let mut acc = 0.0;
                    for d in 0..dq {
                        acc += (qq.at(bi, hi, i, d) * s) * (kk.at(bi, kh, j, d) * s);
                    }
                    if a.softcap > 0.0 {
                        let c = a.softcap as f64;
                        acc = c * (acc / c).tanh();
                    }
                    *r = acc;
                }
                let qrow = &mut qk_out[((bi * hq + hi) * sq + i) * skv..][..skv];
                match a.qk_matmul_output_mode {
                    0 | 1 => qrow.copy_from_slice(&row),
                    2 => {
                        for j in 0..skv {
                            qrow[j] = row[j] + brow[j];
                        }
                    }
                    _ => {}
                }
                for j in 0..skv {
                    row[j] += brow[j];
                }
                // Softmax; a row whose bias is all -inf attends nothing and gives zeros.
                let all_masked = brow.iter().all(|&x| x == f64::NEG_INFINITY);
                let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let safe = if mx == f64::NEG_INFINITY { 0.0 } else { mx };
                let mut sum = 0.0;
                for r in row.iter_mut() {
                    *r = (*r - safe).exp();
                    sum += *r;
                }
                let sum = if sum == 0.0 { 1.0 } else { sum };
                for r in row.iter_mut() {
                    *r = if all_masked { 0.0 } else { *r / sum };
                }
                if a.qk_matmul_output_mode == 3 {
                    qrow.copy_from_slice(&row);
                }
                // P is rounded to Q's type before P @ V, as the reference does.
                if dtype != DType::F64 {
                    for r in row.iter_mut() {
                        *r = round_to(dtype, *r);
                    }
                }
                for d in 0..dv {
                    let mut acc = 0.0;
                    for (j, p) in row.iter().enumerate() {
                        acc += p * vv.at(bi, kh, j, d);
                    }
                    y[((bi * hq + hi) * sq + i) * dv + d] = acc;
                }
            }
        }
    }
    let y = if rank3 {
        // [b, h, s, dv] → [b, s, h*dv]
        let mut out = vec![0.0; y.len()];
        for bi in 0..b {
            for hi in 0..hq {
                for i in 0..sq {
                    for d in 0..dv {
                        out[((bi * sq + i) * hq + hi) * dv + d] = y[((bi * hq + hi) * sq + i) * dv + d];
                    }
                }
            }
        }
        from_f64(dtype, vec![b, sq, hq * dv], out)?
    } else {
        from_f64(dtype, vec![b, hq, sq, dv], y)?
    };
    let pk = from_f64(k.dtype(), kk.dims.to_vec(), kk.v)?;
    let pv = from_f64(v.dtype(), vv.dims.to_vec(), vv.v)?;
    let qk = from_f64(dtype, vec![b, hq, sq, skv], qk_out)?;
    Ok(vec![RtValue::Tensor(y), RtValue::Tensor(pk), RtValue::Tensor(pv), RtValue::Tensor(qk)])
}

fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 => x as f32 as f64,
        DType::F16 => half::f16::from_f64(x).to_f64(),
        DType::BF16 => half::bf16::from_f64(x).to_f64(),
        _ => x,
    }
}
