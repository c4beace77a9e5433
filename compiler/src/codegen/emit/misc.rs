//! Shrink and ConvTranspose: loops with literal
//! geometry, or calls into the runtime kernels the interpreter uses.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::nn::conv::conv_transpose_geometry;
use crate::ir::{DType, Graph, Node, NodeId, Op, ValueId};
use burnc_runtime::kernels::conv::{conv_transpose_scratch_len, ConvDims};
use burnc_runtime::kernels::window::Window3;

fn fixed(g: &Graph, v: Option<ValueId>) -> Option<(DType, Vec<usize>)> {
    let t = g.tensor_type(v?)?;
    Some((t.dtype, t.shape.as_ref()?.as_fixed()?))
}

fn conv_transpose_geom(g: &Graph, n: &Node) -> Option<(ConvDims, Window3, DType)> {
    let Op::ConvTranspose { window, group, output_padding, output_shape } = &n.op else { return None };
    let (d, x) = fixed(g, n.inputs.first().copied().flatten())?;
    let (_, w) = fixed(g, n.inputs.get(1).copied().flatten())?;
    if x.len() < 3 || w.len() != x.len() {
        return None;
    }
    let (dims, win) = conv_transpose_geometry(&x, &w, &w[2..], window, *group, output_padding, output_shape).ok()?;
    Some((dims, win, d))
}

pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    let n = g.node(id);
    match &n.op {
        Op::ConvTranspose { .. } => conv_transpose_geom(g, n).map(|(d, w, dt)| conv_transpose_scratch_len(&d, &w) * dt.size()).unwrap_or(0),
        _ => 0,
    }
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    match &n.op {
        Op::ConvTranspose { group, .. } => {
            let (d, win, dt) = conv_transpose_geom(cx.g, n).ok_or_else(|| cx.err(n, "ConvTranspose geometry is not static"))?;
            let (t, gemm) = match dt {
                DType::F32 => ("f32", "rt::kernels::conv::Sgemm"),
                DType::F64 => ("f64", "rt::kernels::conv::Dgemm"),
                _ => return Err(cx.err(n, format!("ConvTranspose on {dt} is not supported by codegen yet"))),
            };
            let col_len = conv_transpose_scratch_len(&d, &win);
            let bias = match n.inputs.get(2).copied().flatten() {
                Some(b) => format!("Some({})", cx.read(n, b)?),
                None => "None".into(),
            };
            Ok(Some(format!(
                "let d = rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: {group} }};\n\
                 let win = {};\n\
                 rt::kernels::conv::conv_transpose({}, {}, {bias}, {}, &d, &win, {}, &{gemm});",
                d.batch,
                d.c_in,
                d.c_out,
                super::nn::window_lit(&win),
                cx.read(n, cx.input(n, 0)?)?,
                cx.read(n, cx.input(n, 1)?)?,
                cx.write(n, out)?,
                cx.scratch(n, id, t, col_len)?
            )))
        }
        _ => Err(cx.err(n, "not supported by codegen yet")),
    }
}

/// Shrink: elementwise, so one emitter serves fixed and bounded dims (sizes only reach it
/// through the views).
pub(crate) fn emit_shrink(cx: &crate::ops::EmitCx) -> Result<Option<String>, CodegenError> {
    let Op::Shrink { lambd, bias } = &cx.node().op else { return Err(cx.err("not a Shrink")) };
    let x = cx.input(0)?;
    let t = cx.elem(x)?;
    let (l, b) = (*lambd as f64, *bias as f64);
    if !l.is_finite() || !b.is_finite() {
        return Err(cx.err("non-finite Shrink parameters"));
    }
    // Through f64 and back, as the interpreter.
    let e = format!("<{t} as rt::Elem>::from_f64({{ let v = rt::Elem::to_f64(v); if v < -{l:?} {{ v + {b:?} }} else if v > {l:?} {{ v - {b:?} }} else {{ 0.0 }} }})");
    Ok(Some(format!("for (o, &v) in {}.iter_mut().zip({}) {{ *o = {e}; }}", cx.write(cx.output(0)?)?, cx.read(x)?)))
}
