//! RoiAlign and DeformConv: the runtime's detection kernels with the geometry the interpreter
//! resolves (`interp::ops::detect`). NonMaxSuppression's output length depends on the values,
//! so it reaches codegen only when its inputs are not constants, and is refused.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::detect::{deform_dims, roi_dims};
use crate::ir::{DType, Graph, Node, NodeId, Op};
use burnc_runtime::kernels::detect::deform_conv_scratch_len;

const K: &str = "rt::kernels::detect";

/// Static shape of input `i` (`None` when absent or not static).
fn shape_of(g: &Graph, n: &Node, i: usize) -> Option<Vec<usize>> {
    let t = g.tensor_type(n.inputs.get(i).copied().flatten()?)?;
    t.shape.as_ref()?.as_fixed()
}

fn deform_geom(g: &Graph, n: &Node) -> Option<burnc_runtime::kernels::detect::DeformConv> {
    let (x, w, o) = (shape_of(g, n, 0)?, shape_of(g, n, 1)?, shape_of(g, n, 2)?);
    let (b, m) = (shape_of(g, n, 3), shape_of(g, n, 4));
    deform_dims(&n.op, &x, &w, &o, b.as_deref(), m.as_deref()).ok()
}

fn elem_size(g: &Graph, n: &Node) -> usize {
    let d = n.inputs.first().copied().flatten().and_then(|v| g.tensor_type(v)).map(|t| t.dtype);
    if d == Some(DType::F64) {
        8
    } else {
        4
    }
}

/// Scratch: DeformConv's column buffer.
pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    let n = g.node(id);
    match &n.op {
        Op::DeformConv { .. } => deform_geom(g, n).map_or(0, |d| deform_conv_scratch_len(&d) * elem_size(g, n)),
        _ => 0,
    }
}

/// Optional input `i` as a read expression (`&[]` when absent).
fn opt(cx: &Ctx, n: &Node, i: usize) -> Result<String, CodegenError> {
    match n.inputs.get(i).copied().flatten() {
        Some(v) => cx.read(n, v),
        None => Ok("&[]".into()),
    }
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let e = |m: String| cx.err(n, m);
    if let Op::NonMaxSuppression { .. } = n.op {
        return Err(e("NonMaxSuppression's output length depends on its inputs' values: codegen needs them to be constants".into()));
    }
    let x = cx.input(n, 0)?;
    let (xd, xs) = cx.ty(n, x)?;
    let t = match xd {
        DType::F32 => "f32",
        DType::F64 => "f64",
        d => return Err(e(format!("{} of {d} is not supported by codegen yet", n.op.name()))),
    };
    // Float operands share X's type (the interpreter checks the same).
    let same = |i: usize| -> Result<(), CodegenError> {
        match n.inputs.get(i).copied().flatten() {
            Some(v) if cx.ty(n, v)?.0 != xd => Err(e(format!("input #{i} must have X's type {xd}"))),
            _ => Ok(()),
        }
    };
    let y = cx.write(n, out)?;
    match &n.op {
        Op::RoiAlign { .. } => {
            same(1)?;
            let (rois, bi) = (cx.input(n, 1)?, cx.input(n, 2)?);
            let (bd, bs) = cx.ty(n, bi)?;
            if bd != DType::I64 {
                return Err(e(format!("batch_indices must be int64, got {bd}")));
            }
            let (d, _) = roi_dims(&n.op, &xs, &cx.ty(n, rois)?.1, &bs).map_err(e)?;
            Ok(Some(format!(
                "{K}::roi_align::<{t}>({}, {}, {}, &{K}::{d:?}, {y});",
                cx.read(n, x)?,
                cx.read(n, rois)?,
                cx.read(n, bi)?
            )))
        }
        Op::DeformConv { .. } => {
            (1..5).try_for_each(same)?;
            let d = deform_geom(cx.g, n).ok_or_else(|| e("DeformConv needs static, consistent shapes".into()))?;
            let col = cx.scratch(n, id, t, deform_conv_scratch_len(&d))?;
            Ok(Some(format!(
                "let col = {col};\n{K}::deform_conv::<{t}>({}, {}, {}, {}, {}, &{K}::{d:?}, col, {y});",
                cx.read(n, x)?,
                cx.read(n, cx.input(n, 1)?)?,
                cx.read(n, cx.input(n, 2)?)?,
                opt(cx, n, 3)?,
                opt(cx, n, 4)?
            )))
        }
        _ => Err(cx.err(n, "not a detection op")),
    }
}
