//! ONNX Attention (opset 23+): scaled dot-product attention with masks, causal and
//! sliding-window biases, KV cache, grouped-query heads and softcap. One shape rule
//! ([`Attention::geometry`], over dim expressions) serves inference, the interpreter, codegen
//! and the scratch size; the computation is the runtime kernel `kernels::attention` (in f64,
//! rounded to Q's type as the reference does).
use super::{input, numel, Arg, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::f64_lit;
use crate::codegen::CodegenError;
use crate::interp::ops::cast::cast;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::attention as k;

/// Attributes as ONNX gives them; `None` heads: the inputs are 4-D.
#[derive(Debug, Clone, PartialEq)]
pub struct Attention {
    pub is_causal: bool,
    pub q_num_heads: Option<usize>,
    pub kv_num_heads: Option<usize>,
    pub qk_matmul_output_mode: i64,
    pub scale: Option<f32>,
    pub softcap: f32,
    pub left_window_size: i64,
    pub right_window_size: i64,
}

/// The kernel's sizes as dim expressions (see `kernels::attention::Dims`).
#[derive(Debug, Clone)]
struct Geometry {
    batch: DimExpr,
    q_heads: DimExpr,
    kv_heads: DimExpr,
    q_seq: DimExpr,
    past_seq: DimExpr,
    cur_seq: DimExpr,
    head_dim: DimExpr,
    v_head_dim: DimExpr,
    q_3d: bool,
    kv_3d: bool,
}

kernel_dims!(Geometry => k::Dims, "rt::kernels::attention::Dims" () {
    batch: dim batch, q_heads: dim q_heads, kv_heads: dim kv_heads, q_seq: dim q_seq, past_seq: dim past_seq, cur_seq: dim cur_seq,
    head_dim: dim head_dim, v_head_dim: dim v_head_dim, q_3d: same q_3d, kv_3d: same kv_3d,
});

impl Geometry {
    fn kv_seq(&self) -> DimExpr {
        self.past_seq.add(&self.cur_seq)
    }

    fn y(&self) -> Vec<DimExpr> {
        if self.q_3d {
            vec![self.batch.clone(), self.q_seq.clone(), self.q_heads.mul(&self.v_head_dim)]
        } else {
            vec![self.batch.clone(), self.q_heads.clone(), self.q_seq.clone(), self.v_head_dim.clone()]
        }
    }

    fn present(&self, d: &DimExpr) -> Vec<DimExpr> {
        vec![self.batch.clone(), self.kv_heads.clone(), self.kv_seq(), d.clone()]
    }

    fn qk(&self) -> Vec<DimExpr> {
        vec![self.batch.clone(), self.q_heads.clone(), self.q_seq.clone(), self.kv_seq()]
    }
}

/// `[b, h, s, d]` of a 4-D input, or of a 3-D `[b, s, h * d]` one given its head count.
fn dims4(cx: &mut ShapeCx, a: &Arg, heads: Option<usize>, what: &str) -> R<([DimExpr; 4], bool)> {
    match a.dims()? {
        [b, h, s, d] => Ok(([b.clone(), h.clone(), s.clone(), d.clone()], false)),
        [b, s, hidden] => {
            let h = heads.ok_or_else(|| format!("{what} is 3-D: q_num_heads and kv_num_heads are required"))?;
            let d = cx.divide(&format!("{what}'s hidden size and its {h} heads"), hidden, h as i64)?;
            Ok(([b.clone(), DimExpr::constant(h as i64), s.clone(), d], true))
        }
        s => Err(format!("{what} must be 3-D or 4-D, got rank {}", s.len())),
    }
}

impl Attention {
    /// The sizes from Q, K, V and the past, with the relations they need declared on `cx`.
    fn geometry(&self, cx: &mut ShapeCx) -> R<Geometry> {
        let (q, kk, v) = (cx.arg(0)?.clone(), cx.arg(1)?.clone(), cx.arg(2)?.clone());
        let (qd, q_3d) = dims4(cx, &q, self.q_num_heads, "Q")?;
        let (kd, kv_3d) = dims4(cx, &kk, self.kv_num_heads, "K")?;
        let (vd, v_3d) = dims4(cx, &v, self.kv_num_heads, "V")?;
        if kv_3d != v_3d {
            return Err("K and V must have the same rank".into());
        }
        let past_seq = match (cx.opt(4).cloned(), cx.opt(5).cloned()) {
            (None, None) => DimExpr::constant(0),
            (Some(pk), Some(pv)) => {
                let (pk, _) = dims4(cx, &pk, None, "past_key")?;
                let (pv, _) = dims4(cx, &pv, None, "past_value")?;
                for (p, c, name) in [(&pk, &kd, "past_key and K"), (&pv, &vd, "past_value and V")] {
                    for i in [0, 1, 3] {
                        cx.equal(&format!("dims {i} of {name}"), &p[i], &c[i])?;
                    }
                }
                cx.equal("the lengths of past_key and past_value", &pk[2], &pv[2])?;
                pk[2].clone()
            }
            _ => return Err("past_key and past_value must be given together".into()),
        };
        let [b, hq, sq, dq] = qd;
        let [bk, hk, skv, dk] = kd;
        let [bv, hv, skv2, dv] = vd;
        cx.equal("the batches of Q and K", &b, &bk)?;
        cx.equal("the batches of Q and V", &b, &bv)?;
        cx.equal("the head sizes of Q and K", &dq, &dk)?;
        cx.equal("the lengths of K and V", &skv, &skv2)?;
        cx.equal("the head counts of K and V", &hk, &hv)?;
        if hk.as_const() == Some(0) {
            return Err("K has no heads".into());
        }
        cx.divides("K's heads into Q's (grouped-query attention)", &hk, &hq)?;
        let g = Geometry { batch: b, q_heads: hq, kv_heads: hk, q_seq: sq, past_seq, cur_seq: skv, head_dim: dq, v_head_dim: dv, q_3d, kv_3d };
        if let Some(m) = cx.opt(3).cloned() {
            mask_dims(cx, m.dims()?, &g)?;
        }
        if let Some(np) = cx.opt(6).cloned() {
            if np.dtype != DType::I64 {
                return Err(format!("nonpad_kv_seqlen must be int64, got {}", np.dtype));
            }
            let len = np.dims()?.iter().fold(DimExpr::constant(1), |a, d| a.mul(d));
            cx.at_most("the batch and the length of nonpad_kv_seqlen", &g.batch, &len)?;
        }
        Ok(g)
    }

    /// Resolved scalar attributes; `dtype` is Q's (P is rounded to it before P·V).
    fn params(&self, head_dim: usize, dtype: DType) -> k::Params {
        k::Params {
            is_causal: self.is_causal,
            scale: self.scale.map(|s| s as f64).unwrap_or(1.0 / (head_dim as f64).sqrt()),
            softcap: self.softcap as f64,
            left_window: self.left_window_size,
            right_window: self.right_window_size,
            qk_mode: self.qk_matmul_output_mode,
            round_p: round(dtype).0,
            steps: match dtype {
                DType::F16 => k::Steps::F16,
                DType::BF16 => k::Steps::Bf16,
                _ => k::Steps::Wide,
            },
        }
    }
}

/// The kernel's rounding of probabilities for Q's dtype, and its name in generated code.
fn round(dtype: DType) -> (fn(f64) -> f64, &'static str) {
    match dtype {
        DType::F32 => (k::round_f32, "round_f32"),
        DType::F16 => (k::round_f16, "round_f16"),
        DType::BF16 => (k::round_bf16, "round_bf16"),
        _ => (k::round_none, "round_none"),
    }
}

/// The mask's shape right-aligned and padded to 4-D, checked against `[b, hq, sq, kv_seq]`:
/// each dim equal or 1, the last at most the keys (keys past it are masked out).
fn mask_dims(cx: &mut ShapeCx, ms: &[DimExpr], g: &Geometry) -> R<[DimExpr; 4]> {
    if ms.is_empty() || ms.len() > 4 {
        return Err(format!("attn_mask must have rank 1..4, got rank {}", ms.len()));
    }
    let full = [g.batch.clone(), g.q_heads.clone(), g.q_seq.clone(), g.kv_seq()];
    let one = DimExpr::constant(1);
    let mut out = [one.clone(), one.clone(), one.clone(), one.clone()];
    let off = 4 - ms.len();
    for (i, m) in ms.iter().enumerate() {
        if m.as_const() == Some(0) {
            return Err("attn_mask has an empty dim".into());
        }
        let want = &full[off + i];
        if i + 1 == ms.len() {
            cx.at_most("attn_mask's last dim and the keys", m, want)?;
        } else if *m != one {
            cx.equal(&format!("attn_mask's dim {i} and the scores'"), m, want)?;
        }
        out[off + i] = m.clone();
    }
    Ok(out)
}

fn from_f64(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> R<Tensor> {
    cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

impl OpDef for Attention {
    name!("Attention");
    none_of!(cuda, in_place, decides_shapes, forwards_values, gradient);

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        wgsl_attention(self, cx)
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (qt, kt, vt) = (cx.arg(0)?.dtype, cx.arg(1)?.dtype, cx.arg(2)?.dtype);
        if !qt.is_float() {
            return Err(format!("Q must be a float tensor, got {qt}"));
        }
        let unknown = (0..7).any(|i| cx.opt(i).is_some_and(|a| a.dims.is_none()));
        let g = if unknown { None } else { Some(self.geometry(cx)?) };
        let out = |dtype, f: &dyn Fn(&Geometry) -> Vec<DimExpr>| OutType { dtype, dims: g.as_ref().map(f) };
        Ok(vec![
            out(qt, &|g| g.y()),
            out(kt, &|g| g.present(&g.head_dim)),
            out(vt, &|g| g.present(&g.v_head_dim)),
            out(qt, &|g| g.qk()),
        ])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (q, kt, v) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        let dtype = q.dtype();
        let mut cx = ShapeCx::of_shapes(ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..]))));
        let g = self.geometry(&mut cx)?;
        let d = g.fixed_dims()?;
        let opt = |i: usize| ins.get(i).copied().flatten();
        let nonpad = opt(6).map(|t| t.to_i64_vec().ok_or("nonpad_kv_seqlen must be integers")).transpose()?;
        let (qv, kv, vv) = (q.to_f64_vec(), kt.to_f64_vec(), v.to_f64_vec());
        let (pk, pv) = (opt(4).map(|t| t.to_f64_vec()), opt(5).map(|t| t.to_f64_vec()));
        let (bool_mask, add_mask);
        let mask = match opt(3) {
            None => k::Mask::None,
            Some(m) => {
                let ms = fixed4(&mask_dims(&mut cx, &g_dims(&m.shape), &g)?)?;
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
        let len = |dims: &[usize]| dims.iter().try_fold(1usize, |a, &x| a.checked_mul(x)).ok_or_else(|| "attention sizes overflow".to_string());
        let mut y = vec![0.0f64; len(&[b, hq, sq, dv])?];
        let mut present_k = vec![0.0f64; len(&[b, hk, skv, dq])?];
        let mut present_v = vec![0.0f64; len(&[b, hk, skv, dv])?];
        let mut qk = vec![0.0f64; len(&[b, hq, sq, skv])?];
        let mut scratch = vec![0.0f64; k::scratch_len(skv)];
        let inputs = k::Inputs { q: &qv, k: &kv, v: &vv, mask, past_k: pk.as_deref(), past_v: pv.as_deref(), nonpad: nonpad.as_deref() };
        let outputs = k::Outputs { y: &mut y, present_k: Some(&mut present_k), present_v: Some(&mut present_v), qk: Some(&mut qk) };
        k::attention(&d, &self.params(dq, dtype), &inputs, outputs, &mut scratch);
        let y_shape = if d.q_3d { vec![b, sq, hq * dv] } else { vec![b, hq, sq, dv] };
        Ok(vec![
            from_f64(dtype, y_shape, y)?,
            from_f64(kt.dtype(), vec![b, hk, skv, dq], present_k)?,
            from_f64(v.dtype(), vec![b, hk, skv, dv], present_v)?,
            from_f64(dtype, vec![b, hq, sq, skv], qk)?,
        ])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let q = cx.input(0)?;
        let xd = cx.dtype_among(q, &[DType::F32, DType::F64, DType::F16, DType::BF16])?;
        for i in 1..3 {
            if cx.dtype(cx.input(i)?)? != xd {
                return Err(cx.err("K/V of another type than Q"));
            }
        }
        let mut scx = cx.shape_cx()?;
        let g = self.geometry(&mut scx).map_err(|e| cx.err(e))?;
        let mask = match cx.opt_input(3) {
            None => "rt::kernels::attention::Mask::None".to_string(),
            Some(m) => {
                let dims = cx.sizes(&mask_dims(&mut scx, &cx.dims(m)?, &g).map_err(|e| cx.err(e))?)?;
                match cx.dtype(m)? {
                    DType::Bool => format!("rt::kernels::attention::Mask::Bool({}, {dims})", cx.read(m)?),
                    md if md == xd => format!("rt::kernels::attention::Mask::Add({}, {dims})", cx.read(m)?),
                    md => return Err(cx.err(format!("attn_mask of type {md}"))),
                }
            }
        };
        let p = self.params(g.head_dim.as_const().unwrap_or(1).max(0) as usize, xd);
        // The default scale 1/√head_dim, computed as the interpreter does: a literal for a
        // fixed head size, else at run time.
        let scale = match (self.scale, g.head_dim.as_const()) {
            (None, None) => format!("1.0 / ({} as f64).sqrt()", cx.size(&g.head_dim)?),
            _ => f64_lit(p.scale),
        };
        let [past_k, past_v, nonpad] = cx.read_opts(4)?;
        Ok(format!(
            "let d = {};\n\
             let p = rt::kernels::attention::Params {{ is_causal: {}, scale: {}, softcap: {}, left_window: {}, right_window: {}, qk_mode: {}, round_p: rt::kernels::attention::{}, steps: rt::kernels::attention::Steps::{:?} }};\n\
             let inp = rt::kernels::attention::Inputs {{ q: {}, k: {}, v: {}, mask: {mask}, past_k: {past_k}, past_v: {past_v}, nonpad: {nonpad} }};\n\
             let outp = rt::kernels::attention::Outputs {{ y: {}, present_k: {}, present_v: {}, qk: {} }};\n\
             rt::kernels::attention::attention(&d, &p, &inp, outp, {});",
            g.dims_lit(cx)?,
            p.is_causal,
            scale,
            f64_lit(p.softcap),
            p.left_window,
            p.right_window,
            p.qk_mode,
            round(xd).1,
            p.steps,
            cx.read(q)?,
            cx.read_input(1)?,
            cx.read_input(2)?,
            cx.write(cx.output(0)?)?,
            cx.write_used(1)?,
            cx.write_used(2)?,
            cx.write_used(3)?,
            cx.scratch(DType::F64)?
        ))
    }

    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        let mut cx = ShapeCx::of_shapes(ins.iter().map(|i| i.as_ref().map(|(d, s)| (*d, &s[..]))));
        match self.geometry(&mut cx).map(|g| g.kv_seq().as_const()) {
            Ok(Some(kv)) => k::scratch_len(kv.max(0) as usize) * 8,
            _ => 0,
        }
    }

    // Q·Kᵀ and P·V: 4 FLOPs per query element per key position.
    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        let k = ins.get(1)?.as_ref()?;
        numel(ins.first()?)?.checked_mul(4)?.checked_mul(*k.get(k.len().checked_sub(2)?)? as u64)
    }
}

/// Constant dims of a fixed shape.
fn g_dims(s: &[usize]) -> Vec<DimExpr> {
    s.iter().map(|&d| DimExpr::constant(d as i64)).collect()
}

fn fixed4(d: &[DimExpr; 4]) -> R<[usize; 4]> {
    let mut out = [0usize; 4];
    for (o, e) in out.iter_mut().zip(d) {
        *o = e.as_const().and_then(|c| usize::try_from(c).ok()).ok_or("a mask dim is not fixed")?;
    }
    Ok(out)
}

pub fn examples() -> Vec<super::Example> {
    let f = |shape: Vec<usize>, k: usize| Tensor::from_f32s(shape.clone(), (0..shape.iter().product::<usize>()).map(|i| (((i * k) % 13) as f32 - 6.0) / 7.0).collect());
    let plain = Attention { is_causal: false, q_num_heads: None, kv_num_heads: None, qk_matmul_output_mode: 0, scale: None, softcap: 0.0, left_window_size: -1, right_window_size: -1 };
    let three_d = Attention { is_causal: true, q_num_heads: Some(2), kv_num_heads: Some(1), ..plain.clone() };
    let mask = Tensor::from_f32s(vec![3, 4], (0..12).map(|i| if i % 5 == 0 { -1.0 } else { 0.0 }).collect());
    vec![
        // 4-D with an additive mask broadcast over batch and heads.
        super::Example { consts: vec![], op: OpRef::new(plain), inputs: vec![f(vec![2, 2, 3, 4], 3), f(vec![2, 2, 4, 4], 5), f(vec![2, 2, 4, 3], 7), mask] },
        // 3-D, causal, grouped-query (two Q heads per KV head).
        super::Example { consts: vec![], op: OpRef::new(three_d), inputs: vec![f(vec![1, 3, 8], 3), f(vec![1, 3, 4], 5), f(vec![1, 3, 4], 7)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_dims_become_checks() {
        let a = |dims: Vec<DimExpr>| Some(Arg { dtype: DType::F32, dims: Some(dims), value: None });
        let (s, h) = (DimExpr::var("s"), DimExpr::var("h"));
        let c = DimExpr::constant;
        let op = Attention { is_causal: false, q_num_heads: Some(2), kv_num_heads: Some(2), qk_matmul_output_mode: 0, scale: None, softcap: 0.0, left_window_size: -1, right_window_size: -1 };
        let mut cx = ShapeCx::new(vec![a(vec![c(1), s.clone(), h.clone()]), a(vec![c(1), s.clone(), c(8)]), a(vec![c(1), s.clone(), c(8)])]);
        let out = op.shapes(&mut cx).expect("shapes");
        // Y is [1, s, heads · V's head size].
        assert_eq!(out[0].dims, Some(vec![c(1), s.clone(), c(8)]));
        // Q's hidden size must split into 2 heads and match K's head size 4.
        assert_eq!(cx.checks.len(), 2, "{:?}", cx.checks);
        let mut bad = ShapeCx::new(vec![a(vec![c(1), c(3), c(7)]), a(vec![c(1), c(3), c(8)]), a(vec![c(1), c(3), c(8)])]);
        assert!(op.shapes(&mut bad).is_err());
    }
}

/// The most keys a WGSL attention row holds (its probabilities live in invocation memory).
const WGSL_MAX_KEYS: usize = 1024;

/// Attention on the wgpu target, f32: one invocation per query row computes the row's bias
/// (mask, causal and window rules, padding) and scores, the softmax, and P·V, as
/// `kernels::attention` does (in f32, where the kernel uses f64); present K/V are copies.
fn wgsl_attention(at: &Attention, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
    use crate::codegen::wgsl::scalar::f32_lit;
    let ins: Vec<Option<crate::codegen::wgsl::kernels::Tensor>> = (0..7).map(|i| cx.opt_input(i)).collect::<Result<_, _>>()?;
    let t = |i: usize| ins[i].clone().ok_or_else(|| cx.err(format!("missing input #{i}")));
    let (q, kt, v) = (t(0)?, t(1)?, t(2)?);
    if q.dtype != DType::F32 || kt.dtype != DType::F32 || v.dtype != DType::F32 {
        return Err(cx.err(format!("Attention on {} is not supported by the wgpu target yet (f32 only)", q.dtype)));
    }
    let mut scx = ShapeCx::of_shapes(ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, &t.shape[..]))));
    let g = at.geometry(&mut scx).map_err(|e| cx.err(e))?;
    let d = g.fixed_dims().map_err(|e| cx.err(e))?;
    let skv = d.kv_seq();
    if skv > WGSL_MAX_KEYS {
        return Err(cx.err(format!("Attention over {skv} keys is not supported by the wgpu target yet (at most {WGSL_MAX_KEYS})")));
    }
    let p = at.params(d.head_dim, DType::F32);
    let (hq, hk, sq, dq, dv) = (d.q_heads, d.kv_heads, d.q_seq, d.head_dim, d.v_head_dim);
    let group = hq / hk.max(1);
    // Element [b, h, s, e] of K or V (past rows first), as a WGSL expression.
    let kv = |past: &Option<crate::codegen::wgsl::kernels::Tensor>, cur: &crate::codegen::wgsl::kernels::Tensor, dd: usize, b: &str, h: &str, s: &str, e: &str| -> String {
        let cur_i = if d.kv_3d { format!("((({b}) * {}u + ({s}) - {}u) * {hk}u + ({h})) * {dd}u + ({e})", d.cur_seq, d.past_seq) } else { format!("((({b}) * {hk}u + ({h})) * {}u + ({s}) - {}u) * {dd}u + ({e})", d.cur_seq, d.past_seq) };
        match past {
            Some(pt) if d.past_seq > 0 => format!("select({}, {}, ({s}) < {}u)", cur.load(&cur_i), pt.load(&format!("((({b}) * {hk}u + ({h})) * {}u + ({s})) * {dd}u + ({e})", d.past_seq)), d.past_seq),
            _ => cur.load(&cur_i),
        }
    };
    let mut ks = Vec::new();
    for (out, past, cur, dd, suffix) in [(1, &ins[4], &kt, dq, "pk"), (2, &ins[5], &v, dv, "pv")] {
        if let Some(y) = cx.used_output(out)? {
            let k = cx.pointwise(&y, |i| Ok((format!("let e = {i} % {dd}u;\nlet s = ({i} / {dd}u) % {skv}u;\nlet h = ({i} / {}u) % {hk}u;\nlet b = {i} / {};\n", dd * skv, dd * skv * hk), kv(past, cur, dd, "b", "h", "s", "e"))))?;
            let new = format!("{}_{suffix}", k.name);
            ks.push(k.renamed(&new));
        }
    }
    let y = cx.output(0)?;
    let nonpad = ins[6].clone();
    let offset = match (&nonpad, &ins[4]) {
        (Some(np), None) => format!("({} - {sq})", np.load("b")),
        _ => format!("{}", d.past_seq),
    };
    // The row's bias for key j (0, or -inf through `masked`).
    let mut bias = String::from("var x = 0.0;\nvar masked = false;\n");
    if let Some(m) = &ins[3] {
        let ms = fixed4(&mask_dims(&mut scx, &g_dims(&m.shape), &g).map_err(|e| cx.err(e))?).map_err(|e| cx.err(e))?;
        let coord = ["b", "h", "i", "j"];
        let mut flat = "0u".to_string();
        for k in 0..4 {
            flat = if ms[k] == 1 { format!("({flat}) * 1u") } else { format!("({flat}) * {}u + {}", ms[k], coord[k]) };
        }
        let inside = format!("j < {}u", ms[3]);
        if m.dtype == DType::Bool {
            bias += &format!("if (!({inside}) || {} == 0u) {{ masked = true; }}\n", m.load(&format!("select(0u, {flat}, {inside})")));
        } else {
            bias += &format!("if ({inside}) {{ x += {}; }} else {{ masked = true; }}\n", m.load(&format!("select(0u, {flat}, {inside})")));
        }
    }
    let ii = format!("(i32(i) + {offset})");
    if p.is_causal {
        bias += &format!("if (i32(j) > {ii}) {{ masked = true; }}\n");
    }
    if p.left_window >= 0 {
        bias += &format!("if ({ii} - i32(j) > {}) {{ masked = true; }}\n", p.left_window);
    }
    if p.right_window >= 0 {
        bias += &format!("if (i32(j) - {ii} > {}) {{ masked = true; }}\n", p.right_window);
    }
    if let Some(np) = &nonpad {
        bias += &format!("if (i32(j) >= {}) {{ masked = true; }}\n", np.load("b"));
    }
    let q_at = |e: &str| if d.q_3d { q.load(&format!("((b * {sq}u + i) * {hq}u + h) * {dq}u + {e}")) } else { q.load(&format!("((b * {hq}u + h) * {sq}u + i) * {dq}u + {e}")) };
    let sc = f32_lit(p.scale.sqrt() as f32);
    let mut score = format!("var acc = 0.0;\nfor (var e = 0u; e < {dq}u; e++) {{ acc += ({} * {sc}) * ({} * {sc}); }}\n", q_at("e"), kv(&ins[4], &kt, dq, "b", "kh", "j", "e"));
    if p.softcap > 0.0 {
        let cap = f32_lit(p.softcap as f32);
        score += &format!("acc = {cap} * tanh(clamp(acc / {cap}, -20.0, 20.0));\n");
    }
    let qk = cx.used_output(3)?;
    let qk_store = |what: &str| -> Result<String, CodegenError> {
        match &qk {
            Some(t) => t.store(&format!("((b * {hq}u + h) * {sq}u + i) * {skv}u + j"), what).ok_or_else(|| cx.err("qk output type")),
            None => Ok(String::new()),
        }
    };
    let (qk_raw, qk_soft) = match p.qk_mode {
        0 | 1 => (qk_store("acc")?, String::new()),
        2 => (qk_store("select(acc + x, inf_f32(0xff800000u), masked)")?, String::new()),
        3 => (String::new(), qk_store("pr[j]")?),
        _ => (qk_store("0.0")?, String::new()),
    };
    let y_at = if d.q_3d { format!("((b * {sq}u + i) * {hq}u + h) * {dv}u + e") } else { format!("((b * {hq}u + h) * {sq}u + i) * {dv}u + e") };
    let y_store = y.store(&y_at, "acc").ok_or_else(|| cx.err("output type"))?;
    let body = format!(
        "let i = row % {sq}u;\nlet h = (row / {sq}u) % {hq}u;\nlet b = row / {};\nlet kh = h / {}u;\n\
         var pr: array<f32, {skv}>;\nvar mx = inf_f32(0xff800000u);\nvar all_masked = true;\n\
         for (var j = 0u; j < {skv}u; j++) {{\n{bias}{score}{qk_raw}\n\
         if (masked) {{ pr[j] = inf_f32(0xff800000u); }} else {{ pr[j] = acc + x; all_masked = false; mx = max(mx, pr[j]); }}\n}}\n\
         var sum = 0.0;\nfor (var j = 0u; j < {skv}u; j++) {{ if (pr[j] == inf_f32(0xff800000u)) {{ pr[j] = 0.0; }} else {{ pr[j] = exp(pr[j] - mx); }} sum += pr[j]; }}\n\
         if (sum == 0.0) {{ sum = 1.0; }}\n\
         for (var j = 0u; j < {skv}u; j++) {{ pr[j] = select(pr[j] / sum, 0.0, all_masked); {qk_soft} }}\n\
         for (var e = 0u; e < {dv}u; e++) {{\nvar acc = 0.0;\nfor (var j = 0u; j < {skv}u; j++) {{ acc += pr[j] * {}; }}\n{y_store}\n}}",
        sq * hq,
        group.max(1),
        kv(&ins[5], &v, dv, "b", "kh", "j", "e"),
    );
    ks.push(cx.rows(d.batch * hq * sq, &body));
    Ok(ks)
}
