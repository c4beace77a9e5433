//! DFT, STFT, windows and MelWeightMatrix: calls into
//! the runtime kernels the interpreter uses, with the geometry the interpreter resolves
//! (`interp::ops::signal`). Unique has data-dependent shapes: only a constant input,
//! folded before codegen, gets through.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::signal;
use crate::ir::{DType, Graph, Node, NodeId, Op, ValueId};
use burnc_runtime::kernels::spectral::{DftDims, StftDims};

fn fixed(g: &Graph, v: Option<ValueId>) -> Option<Vec<usize>> {
    g.tensor_type(v?)?.shape.as_ref()?.as_fixed()
}

/// A scalar operand known at compile time: `Ok(None)` when absent, `Err(())` when not constant.
fn opt_scalar(g: &Graph, n: &Node, i: usize) -> Result<Option<i64>, ()> {
    match n.inputs.get(i).copied().flatten() {
        None => Ok(None),
        Some(v) => g.const_value(v).and_then(|t| t.to_i64_vec()).and_then(|v| v.first().copied()).map(Some).ok_or(()),
    }
}

fn dft_geom(g: &Graph, n: &Node) -> Option<DftDims> {
    let Op::Dft { inverse, onesided } = &n.op else { return None };
    let xs = fixed(g, n.inputs.first().copied().flatten())?;
    let (len, axis) = (opt_scalar(g, n, 1).ok()?, opt_scalar(g, n, 2).ok()?);
    signal::dft_dims(&xs, len, axis, *inverse, *onesided).ok().map(|(d, _)| d)
}

fn stft_geom(g: &Graph, n: &Node) -> Option<StftDims> {
    let Op::Stft { onesided } = &n.op else { return None };
    let xs = fixed(g, n.inputs.first().copied().flatten())?;
    let step = opt_scalar(g, n, 1).ok()??;
    let window = match n.inputs.get(2).copied().flatten() {
        Some(w) => Some(fixed(g, Some(w))?.iter().product()),
        None => None,
    };
    signal::stft_dims(&xs, step, window, opt_scalar(g, n, 3).ok()?, *onesided).ok()
}

/// Twiddle tables: 2n f64s.
pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    let n = g.node(id);
    match &n.op {
        Op::Dft { .. } => dft_geom(g, n).map_or(0, |d| 2 * d.n * 8),
        Op::Stft { .. } => stft_geom(g, n).map_or(0, |d| 2 * d.frame_length * 8),
        _ => 0,
    }
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
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
        Op::Dft { .. } => {
            let d = dft_geom(cx.g, n).ok_or_else(|| cx.err(n, "DFT needs a static input shape and constant dft_length and axis"))?;
            let x = cx.read(n, cx.input(n, 0)?)?;
            format!("rt::kernels::spectral::dft({x}, &rt::kernels::spectral::{d:?}, {}, {y});", cx.scratch(n, id, "f64", 2 * d.n)?)
        }
        Op::Stft { .. } => {
            let d = stft_geom(cx.g, n).ok_or_else(|| cx.err(n, "STFT needs static shapes and constant frame_step and frame_length"))?;
            let x = cx.read(n, cx.input(n, 0)?)?;
            let w = match n.inputs.get(2).copied().flatten() {
                Some(w) => format!("Some({})", cx.read(n, w)?),
                None => "None".into(),
            };
            let tw = cx.scratch(n, id, "f64", 2 * d.frame_length)?;
            format!("rt::kernels::spectral::stft({x}, {w}, &rt::kernels::spectral::{d:?}, {tw}, {y});")
        }
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
