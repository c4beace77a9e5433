//! RNN, GRU and LSTM: one call of the runtime's recurrent kernel, with the sizes the
//! interpreter resolves (`interp::ops::rnn::resolve_dims`) written out as literals.
use super::elementwise::f32_lit;
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::rnn::resolve_dims;
use crate::ir::{DType, Graph, Node, NodeId, Op, RnnAct, ValueId};
use burnc_runtime::kernels::rnn::{scratch_len, Dims};

fn fixed(g: &Graph, v: Option<ValueId>) -> Option<(DType, Vec<usize>)> {
    let t = g.tensor_type(v?)?;
    Some((t.dtype, t.shape.as_ref()?.as_fixed()?))
}

fn dims(g: &Graph, n: &Node) -> Result<Dims, String> {
    let Op::Rnn(a) = &n.op else { return Err("not a recurrent op".into()) };
    let shape = |i: usize| fixed(g, n.inputs.get(i).copied().flatten()).map(|t| t.1);
    let (Some(x), Some(w), Some(r)) = (shape(0), shape(1), shape(2)) else { return Err("X, W and R need static shapes".into()) };
    let opt: Vec<Option<Vec<usize>>> = (3..n.inputs.len()).map(|i| n.inputs[i].map(|_| shape(i).ok_or("optional input without a static shape")).transpose()).collect::<Result<_, _>>()?;
    let opt: Vec<Option<&[usize]>> = opt.iter().map(|s| s.as_deref()).collect();
    resolve_dims(a, &x, &w, &r, &opt)
}

pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    let n = g.node(id);
    let Ok(d) = dims(g, n) else { return 0 };
    let size = fixed(g, n.inputs.first().copied().flatten()).map_or(0, |t| t.0.size());
    scratch_len(d.cell, d.hidden) * size
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

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let Op::Rnn(a) = &n.op else { return Err(cx.err(n, "not a recurrent op")) };
    let d = dims(cx.g, n).map_err(|e| cx.err(n, e))?;
    let x = cx.input(n, 0)?;
    let t = cx.elem(n, x)?;
    if !matches!(t, "f32" | "f64") {
        return Err(cx.err(n, format!("{} on {t} is not supported by codegen yet", n.op.name())));
    }
    let opt = |i: usize| -> Result<String, CodegenError> {
        match n.inputs.get(i).copied().flatten() {
            Some(v) => Ok(format!("Some({})", cx.read(n, v)?)),
            None => Ok("None".into()),
        }
    };
    if let Some(sl) = n.inputs.get(4).copied().flatten() {
        if cx.elem(n, sl)? != "i32" {
            return Err(cx.err(n, "sequence_lens must be int32"));
        }
    }
    // Outputs nothing reads have no slot: the kernel skips them.
    let out = |i: usize| -> Result<String, CodegenError> {
        match n.outputs.get(i) {
            Some(&v) if cx.plan.slots.contains_key(&v) => Ok(format!("Some({})", cx.write(n, v)?)),
            _ => Ok("None".into()),
        }
    };
    let acts: Vec<String> = a.activations.iter().map(act_lit).collect();
    let clip = match d.clip {
        Some(c) => format!("Some({})", f32_lit(c)),
        None => "None".into(),
    };
    Ok(Some(format!(
        "let d = rt::kernels::rnn::Dims {{ cell: rt::kernels::rnn::Cell::{:?}, direction: rt::kernels::rnn::Direction::{:?}, \
         seq: {}, batch: {}, input: {}, hidden: {}, batch_first: {}, clip: {clip} }};\n\
         let inp = rt::kernels::rnn::Inputs {{ x: {}, w: {}, r: {}, b: {}, seq_lens: {}, h0: {}, c0: {}, p: {} }};\n\
         let mut out = rt::kernels::rnn::Outputs {{ y: {}, y_h: {}, y_c: {} }};\n\
         rt::kernels::rnn::rnn::<{t}>(&d, &[{}], &inp, &mut out, {});",
        d.cell,
        d.direction,
        d.seq,
        d.batch,
        d.input,
        d.hidden,
        d.batch_first,
        cx.read(n, x)?,
        cx.read(n, cx.input(n, 1)?)?,
        cx.read(n, cx.input(n, 2)?)?,
        opt(3)?,
        opt(4)?,
        opt(5)?,
        opt(6)?,
        opt(7)?,
        out(0)?,
        out(1)?,
        out(2)?,
        acts.join(", "),
        cx.scratch(n, id, t, scratch_len(d.cell, d.hidden))?
    )))
}
