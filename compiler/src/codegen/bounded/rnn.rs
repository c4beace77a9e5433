//! RNN / GRU / LSTM over a bounded sequence length and batch: the runtime's recurrent kernel
//! with `seq` and `batch` from the table `sz` (its scratch depends on the hidden size only).
use super::emit::{f32_lit, fixed, Bx};
use crate::codegen::CodegenError;
use crate::ir::{DType, Node, NodeId, Op};

impl Bx<'_> {
    /// RNN / GRU / LSTM as the static emitter, with the sequence length and batch at run time.
    pub(super) fn rnn(&self, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
        let Op::Rnn(a) = &n.op else { return Err(self.unsupported(n)) };
        let g = self.cx.g;
        let x = self.input(n, 0)?;
        if g.tensor_type(x).map(|t| t.dtype) != Some(DType::F32) {
            return Err(self.err(n, "recurrent ops on other types than f32 with bounded dims are not supported yet; pin them with --input"));
        }
        let shape = |i: usize| fixed(g, n.inputs.get(i).copied().flatten());
        let (Some(xb), Some(wb), Some(rb)) = (shape(0), shape(1), shape(2)) else { return Err(self.err(n, "X, W and R need shapes")) };
        let opt_shapes: Vec<Option<Vec<usize>>> = (3..n.inputs.len()).map(|i| n.inputs[i].and_then(|_| shape(i))).collect();
        let opt_refs: Vec<Option<&[usize]>> = opt_shapes.iter().map(|s| s.as_deref()).collect();
        let d = crate::interp::ops::rnn::resolve_dims(a, &xb, &wb, &rb, &opt_refs).map_err(|e| self.err(n, e))?;
        if n.inputs.get(4).copied().flatten().is_some() {
            return Err(self.err(n, "sequence_lens with bounded dims is not supported yet; pin them with --input"));
        }
        let xs = self.shape(n, x)?;
        let (seq, batch) = if a.batch_first { (&xs[1], &xs[0]) } else { (&xs[0], &xs[1]) };
        let opt = |i: usize| -> Result<String, CodegenError> { self.opt_read(n, i) };
        let outp = |i: usize| -> Result<String, CodegenError> {
            match n.outputs.get(i) {
                Some(&v) if self.cx.plan.slots.contains_key(&v) => Ok(format!("Some({})", self.write(n, v)?)),
                _ => Ok("None".into()),
            }
        };
        let acts: Vec<String> = a.activations.iter().map(rnn_act_lit).collect();
        let clip = match d.clip {
            Some(c) => format!("Some({})", f32_lit(c)),
            None => "None".into(),
        };
        Ok(Some(format!(
            "let d = rt::kernels::rnn::Dims {{ cell: rt::kernels::rnn::Cell::{:?}, direction: rt::kernels::rnn::Direction::{:?}, \
             seq: {}, batch: {}, input: {}, hidden: {}, batch_first: {}, clip: {clip} }};\n\
             let inp = rt::kernels::rnn::Inputs {{ x: {}, w: {}, r: {}, b: {}, seq_lens: None, h0: {}, c0: {}, p: {} }};\n\
             let mut out = rt::kernels::rnn::Outputs {{ y: {}, y_h: {}, y_c: {} }};\n\
             rt::kernels::rnn::rnn::<f32>(&d, &[{}], &inp, &mut out, {});",
            d.cell,
            d.direction,
            self.sizes.dim(seq),
            self.sizes.dim(batch),
            d.input,
            d.hidden,
            d.batch_first,
            self.read(n, x)?,
            self.read(n, self.input(n, 1)?)?,
            self.read(n, self.input(n, 2)?)?,
            opt(3)?,
            opt(5)?,
            opt(6)?,
            opt(7)?,
            outp(0)?,
            outp(1)?,
            outp(2)?,
            acts.join(", "),
            self.cx.scratch(n, id, "f32", burnc_runtime::kernels::rnn::scratch_len(d.cell, d.hidden))?
        )))
    }
}

fn rnn_act_lit(a: &crate::ir::RnnAct) -> String {
    use crate::ir::RnnAct;
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

