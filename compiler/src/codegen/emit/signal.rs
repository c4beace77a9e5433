//! Windows and MelWeightMatrix: calls into
//! the runtime kernels the interpreter uses, with the geometry the interpreter resolves
//! (`interp::ops::signal`). Unique has data-dependent shapes: only a constant input,
//! folded before codegen, gets through.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::signal;
use crate::ir::{DType, Graph, Node, NodeId, Op};

/// A scalar operand known at compile time: `Ok(None)` when absent, `Err(())` when not constant.
fn opt_scalar(g: &Graph, n: &Node, i: usize) -> Result<Option<i64>, ()> {
    match n.inputs.get(i).copied().flatten() {
        None => Ok(None),
        Some(v) => g.const_value(v).and_then(|t| t.to_i64_vec()).and_then(|v| v.first().copied()).map(Some).ok_or(()),
    }
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
}

pub fn emit(cx: &Ctx, _id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    if let Op::Unique { .. } = n.op {
        return Err(cx.err(n, "Unique's output shapes depend on its input's values: codegen needs the input to be a constant"));
    }
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let (od, _) = cx.ty(n, out)?;
    if !is_float(od) {
        return Err(cx.err(n, format!("output type {od} is not supported by codegen")));
    }
    let y = cx.write(n, out)?;
    let code = match &n.op {
        Op::Window { kind, periodic, .. } => {
            let [a0, a1, a2] = signal::window_coeffs(*kind);
            format!("rt::kernels::spectral::cosine_window([{a0:?}_f64, {a1:?}_f64, {a2:?}_f64], {periodic}, {y});")
        }
        Op::MelWeightMatrix { .. } => {
            let (_, ys) = cx.ty(n, out)?;
            let &[rows, bins] = ys.as_slice() else { return Err(cx.err(n, "output must be 2-D")) };
            let dft_len = match opt_scalar(cx.g, n, 1) {
                Ok(Some(v)) if v > 0 && (v as usize) / 2 + 1 == rows => v as usize,
                _ => return Err(cx.err(n, "dft_length must be a constant matching the output shape")),
            };
            // sample_rate and the edges may be run-time values: one element each.
            let scalar = |i: usize| -> Result<String, CodegenError> { Ok(format!("rt::Elem::to_f64(({})[0])", cx.read(n, cx.input(n, i)?)?)) };
            format!(
                "let _ = rt::kernels::spectral::mel_weight_matrix({bins}, {dft_len}, {}, {}, {}, {y});",
                scalar(2)?,
                scalar(3)?,
                scalar(4)?
            )
        }
        _ => return Err(cx.err(n, "not a signal op")),
    };
    Ok(Some(code))
}
