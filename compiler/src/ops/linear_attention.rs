//! LinearAttention `(query, key, value, past_state?, decay?, beta?) → (output, present_state)`:
//! a recurrent state of `[d_k, d_v]` per batch and KV head, updated each step (`gated`: decayed
//! by exp(decay) first; `delta`: the written value corrected by beta) and read by each query
//! head of its group. One call of the runtime kernel `kernels::linear_attention`, which takes
//! its sizes at run time; the head counts are attributes, the head sizes follow from them.
use super::{input, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::f32_lit;
use crate::codegen::CodegenError;
use crate::interp::ops::cast::cast;
use crate::ir::{DType, DimExpr};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::linear_attention as la;

/// The update rule is `linear` (neither flag), `gated`, `delta` or `gated_delta` (both).
#[derive(Debug, Clone, PartialEq)]
pub struct LinearAttention {
    pub q_num_heads: usize,
    pub kv_num_heads: usize,
    /// `None`: 1/sqrt(d_k).
    pub scale: Option<f32>,
    /// The state decays by exp(decay) each step; takes decay.
    pub gated: bool,
    /// Delta-rule correction of the written value by beta; takes beta.
    pub delta: bool,
}

/// The kernel's sizes as dim expressions (see `kernels::linear_attention::Dims`).
struct Sizes {
    batch: DimExpr,
    seq: DimExpr,
    dk: DimExpr,
    dv: DimExpr,
    decay_per_key: bool,
    beta_per_head: bool,
}

kernel_dims!(Sizes => la::Dims, "rt::kernels::linear_attention::Dims" (q_heads: usize, kv_heads: usize) {
    batch: dim batch, seq: dim seq, q_heads: arg q_heads, kv_heads: arg kv_heads, dk: dim dk, dv: dim dv,
    decay_per_key: same decay_per_key, beta_per_head: same beta_per_head,
});

impl LinearAttention {
    /// The sizes from query `[b, t, hq·dk]`, key `[b, t, hk·dk]` and value `[b, t, hk·dv]`,
    /// declaring what past_state, decay and beta must be.
    fn sizes(&self, cx: &mut ShapeCx) -> R<Sizes> {
        let (hq, hk) = (self.q_num_heads, self.kv_num_heads);
        if hq == 0 || hk == 0 || hq % hk != 0 {
            return Err(format!("q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hk})"));
        }
        let dims = |cx: &ShapeCx, i: usize, what: &str| -> R<[DimExpr; 3]> {
            let d = cx.arg(i)?.dims()?;
            <[DimExpr; 3]>::try_from(d.to_vec()).map_err(|_| format!("{what} must be [batch, sequence, hidden], got rank {}", d.len()))
        };
        let [b, t, qh] = dims(cx, 0, "query")?;
        let [kb, kt, kh] = dims(cx, 1, "key")?;
        let [vb, vt, vh] = dims(cx, 2, "value")?;
        for (what, x, y) in [("key's batch", &kb, &b), ("value's batch", &vb, &b), ("key's length", &kt, &t), ("value's length", &vt, &t)] {
            cx.equal(&format!("{what} and the query's"), x, y)?;
        }
        let dk = cx.divide(&format!("the query's hidden size into {hq} heads"), &qh, hq as i64)?;
        let dv = cx.divide(&format!("the value's hidden size into {hk} heads"), &vh, hk as i64)?;
        let kv_keys = dk.scale(hk as i64);
        cx.equal(&format!("the key's hidden size and {hk} heads of the query's head size"), &kh, &kv_keys)?;
        let hk_e = DimExpr::constant(hk as i64);
        let mut decay_per_key = false;
        if let Some(a) = cx.opt(4) {
            let [db, dt, n] = <[DimExpr; 3]>::try_from(a.dims()?.to_vec()).map_err(|_| "decay must have rank 3".to_string())?;
            cx.equal("decay's batch and the query's", &db, &b)?;
            cx.equal("decay's length and the query's", &dt, &t)?;
            // One value per KV head or one per key dim. A size that is not a constant is taken
            // per key dim: a per-head decay has the head count, which models keep fixed.
            if n != hk_e {
                decay_per_key = true;
                cx.equal(&format!("decay's last dim and {hk} or {hk} × the key head size"), &n, &kv_keys)?;
            }
        }
        if self.gated != cx.opt(4).is_some() {
            return Err(if self.gated { "this update_rule needs decay".into() } else { "this update_rule takes no decay".into() });
        }
        let mut beta_per_head = false;
        if let Some(a) = cx.opt(5) {
            let [bb, bt, n] = <[DimExpr; 3]>::try_from(a.dims()?.to_vec()).map_err(|_| "beta must have rank 3".to_string())?;
            cx.equal("beta's batch and the query's", &bb, &b)?;
            cx.equal("beta's length and the query's", &bt, &t)?;
            // One value shared by the heads, or one per KV head.
            if n.as_const() != Some(1) {
                beta_per_head = true;
                cx.equal(&format!("beta's last dim and 1 or {hk}"), &n, &hk_e)?;
            }
        }
        if self.delta != cx.opt(5).is_some() {
            return Err(if self.delta { "this update_rule needs beta".into() } else { "this update_rule takes no beta".into() });
        }
        let s = Sizes { batch: b, seq: t, dk, dv, decay_per_key, beta_per_head };
        if let Some(a) = cx.opt(3) {
            let pd = a.dims()?.to_vec();
            let want = self.state(&s);
            if pd.len() != 4 {
                return Err(format!("past_state must be [batch, kv_num_heads, d_k, d_v], got rank {}", pd.len()));
            }
            for (i, (got, want)) in pd.iter().zip(&want).enumerate() {
                cx.equal(&format!("past_state dim {i}"), got, want)?;
            }
        }
        Ok(s)
    }

    fn state(&self, s: &Sizes) -> Vec<DimExpr> {
        vec![s.batch.clone(), DimExpr::constant(self.kv_num_heads as i64), s.dk.clone(), s.dv.clone()]
    }

    fn y(&self, s: &Sizes) -> Vec<DimExpr> {
        vec![s.batch.clone(), s.seq.clone(), s.dv.scale(self.q_num_heads as i64)]
    }

    /// The attribute, or 1/sqrt(d_k) (rounded to f32, as the reference).
    fn scale(&self, dk: usize) -> f32 {
        match self.scale {
            Some(s) if s != 0.0 => s,
            _ => (1.0 / (dk as f64).sqrt()) as f32,
        }
    }
}

fn from_f64(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> R<Tensor> {
    cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

impl OpDef for LinearAttention {
    name!("LinearAttention");
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let names = ["query", "key", "value", "past_state", "decay", "beta"];
        for (i, what) in names.iter().enumerate() {
            if let Some(a) = cx.opt(i).filter(|a| !a.dtype.is_float()) {
                return Err(format!("{what} must be a float tensor, got {}", a.dtype));
            }
        }
        let dtype = cx.arg(0)?.dtype;
        let state = cx.opt(3).map_or(dtype, |a| a.dtype);
        let unknown = (0..6).any(|i| cx.opt(i).is_some_and(|a| a.dims.is_none()));
        let s = if unknown { None } else { Some(self.sizes(cx)?) };
        Ok(vec![OutType { dtype, dims: s.as_ref().map(|s| self.y(s)) }, OutType { dtype: state, dims: s.as_ref().map(|s| self.state(s)) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (q, k, v) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        let mut cx = ShapeCx::of_tensors(ins);
        let outs = self.shapes(&mut cx)?;
        let s = self.sizes(&mut cx)?;
        let u = super::fixed_size;
        let d = s.fixed_dims(self.q_num_heads, self.kv_num_heads)?;
        let shape = |k: usize| outs[k].dims.iter().flatten().map(u).collect::<R<Vec<usize>>>();
        let (y_shape, state_shape) = (shape(0)?, shape(1)?);
        // The kernel works in f32 and rounds each result once, so f64 copies give the same bits.
        let opt = |i: usize| ins.get(i).copied().flatten().map(|t| t.to_f64_vec());
        let (qv, kv, vv) = (q.to_f64_vec(), k.to_f64_vec(), v.to_f64_vec());
        let (pv, dv, bv) = (opt(3), opt(4), opt(5));
        let inp = la::Inputs { q: &qv, k: &kv, v: &vv, past: pv.as_deref(), decay: dv.as_deref(), beta: bv.as_deref() };
        let mut y = vec![0.0f64; y_shape.iter().product()];
        let mut present = vec![0.0f64; state_shape.iter().product()];
        let mut scratch = vec![0.0f32; la::scratch_len(&d)];
        let p = la::Params { gated: self.gated, delta: self.delta, scale: self.scale(d.dk) };
        la::linear_attention(&d, &p, &inp, &mut y, Some(&mut present), &mut scratch);
        Ok(vec![from_f64(outs[0].dtype, y_shape, y)?, from_f64(outs[1].dtype, state_shape, present)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let s = self.sizes(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        let q = cx.input(0)?;
        let qd = cx.dtype_among(q, &[DType::F32, DType::F64, DType::F16, DType::BF16])?;
        for i in [1, 2, 4, 5] {
            if let Some(v) = cx.opt_input(i).filter(|&v| cx.dtype(v).is_ok_and(|d| d != qd)) {
                return Err(cx.err(format!("input #{i} is {} but the query is {qd}", cx.dtype(v)?)));
            }
        }
        let y = cx.output(0)?;
        // The state's type: past_state's, else the query's.
        let (t, st) = (cx.elem(q)?, cx.elem(cx.opt_input(3).unwrap_or(q))?);
        let present = cx.write_used(1)?;
        // The default scale 1/√d_k as the interpreter computes it: a literal for a fixed head
        // size, else at run time.
        let scale = match (self.scale.filter(|&s| s != 0.0), s.dk.as_const()) {
            (None, None) => format!("(1.0 / ({} as f64).sqrt()) as f32", cx.size(&s.dk)?),
            (_, dk) => f32_lit(self.scale(dk.unwrap_or(1).max(0) as usize)),
        };
        let [past, decay, beta] = cx.read_opts(3)?;
        Ok(format!(
            "let d = {};\n\
             let p = rt::kernels::linear_attention::Params {{ gated: {}, delta: {}, scale: {scale} }};\n\
             let inp = rt::kernels::linear_attention::Inputs {{ q: {}, k: {}, v: {}, past: {past}, decay: {decay}, beta: {beta} }};\n\
             rt::kernels::linear_attention::linear_attention::<{t}, {st}>(&d, &p, &inp, {}, {present}, {});",
            s.dims_lit(cx, self.q_num_heads, self.kv_num_heads)?,
            self.gated,
            self.delta,
            cx.read(q)?,
            cx.read_input(1)?,
            cx.read_input(2)?,
            cx.write(y)?,
            cx.scratch(DType::F32)?,
        ))
    }

    /// The kernel's state and value row (f32), which grow with the head sizes only.
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        let mut cx = ShapeCx::of_shapes(ins.iter().map(|i| i.as_ref().map(|(d, s)| (*d, &s[..]))));
        let Ok(s) = self.sizes(&mut cx) else { return 0 };
        match (s.dk.as_const(), s.dv.as_const()) {
            (Some(dk), Some(dv)) => {
                let (dk, dv) = (dk.max(0) as usize, dv.max(0) as usize);
                dk.saturating_mul(dv).saturating_add(dv).saturating_mul(4)
            }
            _ => 0,
        }
    }

    fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        None
    }
}

pub fn examples() -> Vec<super::Example> {
    let f = |shape: Vec<usize>, k: usize| Tensor::from_f32s(shape.clone(), (0..shape.iter().product::<usize>()).map(|i| (((i * k) % 13) as f32 - 6.0) / 9.0).collect());
    // Decay is a log factor: keep it negative.
    let neg = |shape: Vec<usize>| Tensor::from_f32s(shape.clone(), (0..shape.iter().product::<usize>()).map(|i| -0.1 - (i % 5) as f32 * 0.1).collect());
    let gated_delta = LinearAttention { q_num_heads: 4, kv_num_heads: 2, scale: None, gated: true, delta: true };
    let linear = LinearAttention { q_num_heads: 1, kv_num_heads: 1, scale: Some(0.5), gated: false, delta: false };
    vec![
        // Grouped-query (two query heads per KV head), a past state, decay per key dim, beta
        // per head: q [b, t, 4·2], k [b, t, 2·2], v [b, t, 2·3].
        super::Example {
            consts: vec![],
            op: OpRef::new(gated_delta),
            inputs: vec![f(vec![2, 3, 8], 3), f(vec![2, 3, 4], 5), f(vec![2, 3, 6], 7), f(vec![2, 2, 2, 3], 2), neg(vec![2, 3, 4]), f(vec![2, 3, 2], 1)],
        },
        super::Example { consts: vec![], op: OpRef::new(linear), inputs: vec![f(vec![3, 2, 4], 3), f(vec![3, 2, 4], 5), f(vec![3, 2, 3], 7)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_and_beta_layouts_and_hostile_inputs() {
        let t = |shape: Vec<usize>| Tensor::from_f32s(shape.clone(), vec![0.25; shape.iter().product()]);
        let op = LinearAttention { q_num_heads: 2, kv_num_heads: 2, scale: None, gated: true, delta: true };
        let (q, k, v) = (t(vec![1, 2, 4]), t(vec![1, 2, 4]), t(vec![1, 2, 6]));
        let run = |decay: Vec<usize>, beta: Vec<usize>, past: Option<Vec<usize>>| {
            let (d, b, p) = (t(decay), t(beta), past.map(t));
            op.eval(&[Some(&q), Some(&k), Some(&v), p.as_ref(), Some(&d), Some(&b)])
        };
        let out = run(vec![1, 2, 2], vec![1, 2, 1], Some(vec![1, 2, 2, 3])).expect("per-head decay, one beta");
        assert_eq!((out[0].shape.clone(), out[1].shape.clone()), (vec![1, 2, 6], vec![1, 2, 2, 3]));
        assert!(run(vec![1, 2, 4], vec![1, 2, 2], None).is_ok(), "per-key decay, beta per head");
        assert!(run(vec![1, 2, 3], vec![1, 2, 2], None).is_err(), "decay of neither size");
        assert!(run(vec![1, 2, 2], vec![1, 2, 3], None).is_err(), "beta of neither size");
        assert!(run(vec![1, 2, 2], vec![1, 2, 1], Some(vec![1, 2, 3, 2])).is_err(), "past_state of the wrong size");
        assert!(op.eval(&[Some(&q), Some(&k), Some(&v)]).is_err(), "gated_delta without decay and beta");
        let odd = LinearAttention { q_num_heads: 3, ..op.clone() };
        assert!(odd.eval(&[Some(&q), Some(&k), Some(&v)]).is_err(), "3 query heads over 2 KV heads");
    }
}
