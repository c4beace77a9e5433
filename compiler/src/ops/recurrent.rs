//! RNN, GRU and LSTM `(X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P?)`: one call of
//! the runtime's recurrent kernel `kernels::rnn::rnn` over the sequence, each direction's
//! gates from W·x + R·h (+ B), outputs Y, Y_h and (LSTM) Y_c. One shape rule serves fixed and
//! bounded dims: the sequence length and batch may be bounded; W, R, B and P must match the
//! hidden size, which bounded code then pins or checks at run time.
use super::{input, numel, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::f32_lit;
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, Op, RnnAct, RnnAttrs, RnnCell};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::rnn;

#[derive(Debug, Clone, PartialEq)]
pub struct Recurrent(pub RnnAttrs);

impl Recurrent {
    pub fn op(a: RnnAttrs) -> Op {
        Op::Def(OpRef::new(Recurrent(a)))
    }

    fn is_lstm(&self) -> bool {
        matches!(self.0.cell, RnnCell::Lstm { .. })
    }
}

/// The sizes of one node, as dim expressions.
struct Sizes {
    seq: DimExpr,
    batch: DimExpr,
    input: DimExpr,
    hidden: DimExpr,
}

impl Recurrent {
    /// The sizes from X, W and R, declaring the shapes every input must have.
    fn sizes(&self, cx: &mut ShapeCx) -> R<Sizes> {
        let a = &self.0;
        let dims = |cx: &ShapeCx, i: usize| -> R<Vec<DimExpr>> { Ok(cx.arg(i)?.dims()?.to_vec()) };
        let (x, w, r) = (dims(cx, 0)?, dims(cx, 1)?, dims(cx, 2)?);
        let [d0, d1, input] = &x[..] else { return Err(format!("X must have rank 3, got {}", x.len())) };
        let (seq, batch) = if a.batch_first { (d1.clone(), d0.clone()) } else { (d0.clone(), d1.clone()) };
        let hidden = match a.hidden_size {
            Some(h) => DimExpr::constant(h as i64),
            None => r.last().cloned().ok_or("R must have rank 3")?,
        };
        let k = |v: usize| DimExpr::constant(v as i64);
        let (dirs, gates) = (k(a.direction.count()), k(a.cell.gates()));
        let gh = gates.mul(&hidden);
        let state = if a.batch_first { [batch.clone(), dirs.clone(), hidden.clone()] } else { [dirs.clone(), batch.clone(), hidden.clone()] };
        let want = |cx: &mut ShapeCx, name: &str, got: &[DimExpr], exp: &[DimExpr]| -> R<()> {
            if got.len() != exp.len() {
                return Err(format!("{name} must have rank {}, got {}", exp.len(), got.len()));
            }
            for (j, (g, e)) in got.iter().zip(exp).enumerate() {
                cx.equal(&format!("{name} dim {j}"), g, e)?;
            }
            Ok(())
        };
        want(cx, "W", &w, &[dirs.clone(), gh.clone(), input.clone()])?;
        want(cx, "R", &r, &[dirs.clone(), gh.clone(), hidden.clone()])?;
        let names = ["B", "sequence_lens", "initial_h", "initial_c", "P"];
        for (j, name) in names.iter().enumerate() {
            let Some(arg) = cx.opt(3 + j) else { continue };
            let got = arg.dims()?.to_vec();
            match j {
                0 => want(cx, name, &got, &[dirs.clone(), gh.scale(2)])?,
                1 => want(cx, name, &got, &[batch.clone()])?,
                2 => want(cx, name, &got, &state)?,
                3 | 4 if !self.is_lstm() => return Err(format!("{name} is an input of LSTM only")),
                3 => want(cx, name, &got, &state)?,
                _ => want(cx, name, &got, &[dirs.clone(), hidden.scale(3)])?,
            }
        }
        if a.activations.len() != a.cell.acts() * a.direction.count() {
            return Err(format!("{} activations for {} direction(s)", a.activations.len(), a.direction.count()));
        }
        Ok(Sizes { seq, batch, input: input.clone(), hidden })
    }

    /// Y's and the states' dims.
    fn out_dims(&self, s: &Sizes) -> [Vec<DimExpr>; 2] {
        let dirs = DimExpr::constant(self.0.direction.count() as i64);
        let (b, t, h) = (s.batch.clone(), s.seq.clone(), s.hidden.clone());
        if self.0.batch_first {
            [vec![b.clone(), t, dirs.clone(), h.clone()], vec![b, dirs, h]]
        } else {
            [vec![t, dirs.clone(), b.clone(), h.clone()], vec![dirs, b, h]]
        }
    }

    fn kernel_dims(&self, s: &Sizes) -> R<rnn::Dims> {
        let u = super::fixed_size;
        let a = &self.0;
        Ok(rnn::Dims { cell: a.cell, direction: a.direction, seq: u(&s.seq)?, batch: u(&s.batch)?, input: u(&s.input)?, hidden: u(&s.hidden)?, batch_first: a.batch_first, clip: a.clip })
    }
}

fn act_lit(a: &RnnAct) -> String {
    let p = "rt::kernels::rnn::Act";
    match *a {
        RnnAct::Affine(x, y) => format!("{p}::Affine({}, {})", f32_lit(x), f32_lit(y)),
        RnnAct::ScaledTanh(x, y) => format!("{p}::ScaledTanh({}, {})", f32_lit(x), f32_lit(y)),
        RnnAct::HardSigmoid(x, y) => format!("{p}::HardSigmoid({}, {})", f32_lit(x), f32_lit(y)),
        RnnAct::LeakyRelu(x) => format!("{p}::LeakyRelu({})", f32_lit(x)),
        RnnAct::ThresholdedRelu(x) => format!("{p}::ThresholdedRelu({})", f32_lit(x)),
        RnnAct::Elu(x) => format!("{p}::Elu({})", f32_lit(x)),
        other => format!("{p}::{other:?}"),
    }
}

impl OpDef for Recurrent {
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values, gradient);

    fn name(&self) -> &'static str {
        match self.0.cell {
            RnnCell::Rnn => "RNN",
            RnnCell::Gru { .. } => "GRU",
            RnnCell::Lstm { .. } => "LSTM",
        }
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        let s = self.sizes(cx)?;
        let [y, st] = self.out_dims(&s);
        let mut outs = vec![OutType { dtype, dims: Some(y) }, OutType { dtype, dims: Some(st.clone()) }];
        if self.is_lstm() {
            outs.push(OutType { dtype, dims: Some(st) });
        }
        Ok(outs)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let d = self.kernel_dims(&self.sizes(&mut ShapeCx::of_tensors(ins))?)?;
        let get = |i: usize| ins.get(i).copied().flatten();
        let seq_lens: Option<Vec<i32>> = match get(4) {
            Some(t) => {
                let v = t.to_i64_vec().ok_or("sequence_lens must be integers")?;
                if let Some(bad) = v.iter().find(|&&l| l < 0 || l as usize > d.seq) {
                    return Err(format!("sequence_lens value {bad} is outside 0..={}", d.seq));
                }
                Some(v.into_iter().map(|l| l as i32).collect())
            }
            None => None,
        };
        let shapes: Vec<Vec<usize>> = {
            let c = |v: usize| DimExpr::constant(v as i64);
            let s = Sizes { seq: c(d.seq), batch: c(d.batch), input: c(d.input), hidden: c(d.hidden) };
            let [y, st] = self.out_dims(&s);
            [y, st.clone(), st].iter().map(|v| v.iter().map(|e| e.as_const().unwrap_or(0) as usize).collect()).collect()
        };
        macro_rules! go {
            ($variant:ident, $t:ty) => {{
                let f = |t: &Tensor, name: &str| -> R<Vec<$t>> {
                    match &t.data {
                        Data::$variant(v) => Ok(v.clone()),
                        other => Err(format!("{name} must have X's type {}, got {}", x.dtype(), other.dtype())),
                    }
                };
                let opt_f = |i: usize, name: &str| get(i).map(|t| f(t, name)).transpose();
                let (xv, wv, rv) = (f(x, "X")?, f(input(ins, 1)?, "W")?, f(input(ins, 2)?, "R")?);
                let (bv, h0, c0, pv) = (opt_f(3, "B")?, opt_f(5, "initial_h")?, opt_f(6, "initial_c")?, opt_f(7, "P")?);
                let inp = rnn::Inputs { x: &xv, w: &wv, r: &rv, b: bv.as_deref(), seq_lens: seq_lens.as_deref(), h0: h0.as_deref(), c0: c0.as_deref(), p: pv.as_deref() };
                let mut bufs: Vec<Vec<$t>> = shapes.iter().map(|s| vec![0.0; s.iter().product()]).collect();
                let mut scratch = vec![0.0; rnn::scratch_len(d.cell, d.hidden, d.input, d.seq)];
                {
                    let [y, yh, yc] = &mut bufs[..] else { return Err("internal: three output buffers".into()) };
                    let mut out = rnn::Outputs { y: Some(y), y_h: Some(yh), y_c: Some(yc) };
                    rnn::rnn(&d, &self.0.activations, &inp, &mut out, &mut scratch);
                }
                let n = if self.is_lstm() { 3 } else { 2 };
                bufs.into_iter().zip(shapes).take(n).map(|(b, s)| Tensor::new(s, Data::$variant(b))).collect()
            }};
        }
        Ok(match &x.data {
            Data::F32(_) => go!(F32, f32),
            Data::F64(_) => go!(F64, f64),
            other => return Err(format!("{} on {} is not supported (f32 and f64 are)", self.name(), other.dtype())),
        })
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let s = self.sizes(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        let x = cx.input(0)?;
        let t = cx.elem(x)?;
        if !matches!(t, "f32" | "f64") {
            return Err(cx.err(format!("{} on {t} is not supported by codegen yet", self.name())));
        }
        if let Some(sl) = cx.opt_input(4) {
            if cx.elem(sl)? != "i32" {
                return Err(cx.err("sequence_lens must be int32"));
            }
        }
        let a = &self.0;
        let acts: Vec<String> = a.activations.iter().map(act_lit).collect();
        let clip = match a.clip {
            Some(c) => format!("Some({})", f32_lit(c)),
            None => "None".into(),
        };
        let [b, seq_lens, h0, c0, p] = cx.read_opts(3)?;
        Ok(format!(
            "let d = rt::kernels::rnn::Dims {{ cell: rt::kernels::rnn::Cell::{:?}, direction: rt::kernels::rnn::Direction::{:?}, \
             seq: {}, batch: {}, input: {}, hidden: {}, batch_first: {}, clip: {clip} }};\n\
             let inp = rt::kernels::rnn::Inputs {{ x: {}, w: {}, r: {}, b: {b}, seq_lens: {seq_lens}, h0: {h0}, c0: {c0}, p: {p} }};\n\
             let mut out = rt::kernels::rnn::Outputs {{ y: {}, y_h: {}, y_c: {} }};\n\
             rt::kernels::rnn::rnn::<{t}>(&d, &[{}], &inp, &mut out, {});",
            a.cell,
            a.direction,
            cx.size(&s.seq)?,
            cx.size(&s.batch)?,
            cx.size(&s.input)?,
            cx.size(&s.hidden)?,
            a.batch_first,
            cx.read(x)?,
            cx.read_input(1)?,
            cx.read_input(2)?,
            cx.write_used(0)?,
            cx.write_used(1)?,
            cx.write_used(2)?,
            acts.join(", "),
            cx.scratch(cx.dtype(x)?)?
        ))
    }

    /// The kernel's state and gate rows, and a block of steps' inputs and input projections.
    fn scratch_bytes(&self, inputs: &[Option<(DType, Vec<usize>)>]) -> usize {
        let mut cx = ShapeCx::of_shapes(inputs.iter().map(|i| i.as_ref().map(|(d, s)| (*d, s.as_slice()))));
        let Ok(s) = self.sizes(&mut cx) else { return 0 };
        let dim = |e: &DimExpr| e.as_const().map(|v| v.max(0) as usize);
        let (Some(h), Some(i), Some(seq), Some(Some((dt, _)))) = (dim(&s.hidden), dim(&s.input), dim(&s.seq), inputs.first()) else {
            return 0;
        };
        rnn::scratch_len(self.0.cell, h, i, seq).saturating_mul(dt.size())
    }

    /// 2 FLOPs per weight per step for the input and recurrent GEMMs (X is `[seq, batch, ·]`
    /// or, batch first, `[batch, seq, ·]`: the same product).
    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        let x = ins.first()?.as_ref()?;
        let steps = x.get(..2)?.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
        let weights = numel(ins.get(1)?)?.saturating_add(numel(ins.get(2)?)?);
        Some(2u64.saturating_mul(steps).saturating_mul(weights))
    }
}

pub fn examples() -> Vec<super::Example> {
    use crate::ir::RnnDirection;
    let (seq, batch, input, hidden) = (3usize, 2usize, 2usize, 3usize);
    let vals = |n: usize, k: f32| (0..n).map(|i| ((i as f32 * k).sin()) * 0.5).collect::<Vec<f32>>();
    let lstm = RnnAttrs {
        cell: RnnCell::Lstm { input_forget: false },
        direction: RnnDirection::Bidirectional,
        hidden_size: Some(hidden),
        activations: vec![rnn::Act::Sigmoid, rnn::Act::Tanh, rnn::Act::Tanh, rnn::Act::Sigmoid, rnn::Act::Tanh, rnn::Act::Tanh],
        clip: None,
        batch_first: false,
    };
    let (g, dirs) = (4, 2);
    let x = Tensor::from_f32s(vec![seq, batch, input], vals(seq * batch * input, 0.7));
    let w = Tensor::from_f32s(vec![dirs, g * hidden, input], vals(dirs * g * hidden * input, 1.3));
    let r = Tensor::from_f32s(vec![dirs, g * hidden, hidden], vals(dirs * g * hidden * hidden, 0.9));
    vec![super::Example { consts: vec![], op: OpRef::new(Recurrent(lstm)), inputs: vec![x, w, r] }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Arg;

    #[test]
    fn weights_must_match_the_hidden_size() {
        let Some(super::super::Example { op, inputs, .. }) = examples().into_iter().next() else { panic!("an example") };
        let arg = |t: &Tensor| Some(Arg { dtype: DType::F32, dims: Some(t.shape.iter().map(|&d| DimExpr::constant(d as i64)).collect()), value: None });
        let ok = op.shapes(&mut ShapeCx::new(inputs.iter().map(arg).collect())).expect("shapes");
        assert_eq!(ok.len(), 3);
        let mut bad: Vec<Option<Arg>> = inputs.iter().map(arg).collect();
        if let Some(Some(w)) = bad.get_mut(1) {
            w.dims = Some([2, 24, 2].iter().map(|&d| DimExpr::constant(d)).collect());
        }
        let e = op.shapes(&mut ShapeCx::new(bad)).expect_err("a W of the wrong hidden size");
        assert!(e.contains("W dim 1"), "{e}");
    }
}
