//! Resize (and Upsample, lowered to it): the interpreter's per-axis tap tables computed at
//! compile time and stored in the weights blob; generated code widens X to f64 in scratch,
//! runs the runtime's `resample_axis` once per resized axis (ping-ponging between two scratch
//! halves) and narrows into Y, exactly as the interpreter does.
use crate::codegen::emit::f64_lit;
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::resize::{plan, AxisStep};
use crate::ir::{Graph, Node, NodeId, Op};

type Plan = (Vec<AxisStep>, Vec<usize>);

fn resize_plan(g: &Graph, n: &Node) -> Result<Plan, String> {
    let Op::Resize(at) = &n.op else { return Err("not a Resize".into()) };
    let x = n.inputs.first().copied().flatten().ok_or("missing X")?;
    let xs = g.tensor_type(x).and_then(|t| t.shape.as_ref()?.as_fixed()).ok_or("X has no static shape")?;
    // An optional input; an empty tensor counts as absent. Non-constant inputs can't be planned.
    let opt = |i: usize| -> Result<Option<crate::tensor::Tensor>, String> {
        match n.inputs.get(i).copied().flatten() {
            None => Ok(None),
            Some(v) => match g.const_value(v) {
                Some(t) => Ok(Some(t).filter(|t| t.numel() > 0)),
                None => match g.tensor_type(v).and_then(|t| t.shape.as_ref()?.as_fixed()) {
                    Some(s) if s.iter().product::<usize>() == 0 => Ok(None),
                    _ => Err(format!("Resize input #{i} is not a constant")),
                },
            },
        }
    };
    let roi = opt(1)?.map(|t| t.to_f64_vec());
    let scales = opt(2)?.map(|t| t.to_f64_vec());
    let sizes = match opt(3)? {
        Some(t) => Some(t.to_i64_vec().filter(|_| t.dtype().is_int()).ok_or("sizes must be an integer tensor")?),
        None => None,
    };
    plan(at, &xs, roi, scales, sizes)
}

/// Two f64 buffers, each as large as the largest intermediate.
fn half_len(xs_numel: usize, steps: &[AxisStep]) -> usize {
    steps.iter().map(|s| s.outer * s.out_len * s.inner).fold(xs_numel, usize::max)
}

pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    let n = g.node(id);
    if !matches!(n.op, Op::Resize(_)) {
        return 0;
    }
    let Ok((steps, _)) = resize_plan(g, n) else { return 0 };
    if steps.is_empty() {
        return 0;
    }
    let xs: usize = n.inputs.first().copied().flatten().and_then(|x| g.tensor_type(x)?.shape.as_ref()?.as_fixed()).map_or(0, |s| s.iter().product());
    2 * half_len(xs, &steps) * 8
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let Op::Resize(at) = &n.op else { return Err(cx.err(n, "not a Resize")) };
    let x = cx.input(n, 0)?;
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let (xd, xs) = cx.ty(n, x)?;
    let (_, ys) = cx.ty(n, out)?;
    if !(xd.is_float() || xd.is_int()) || xd.is_small() {
        return Err(cx.err(n, format!("Resize on {xd} is not supported by codegen yet")));
    }
    let (steps, shape) = resize_plan(cx.g, n).map_err(|e| cx.err(n, e))?;
    if shape != ys {
        return Err(cx.err(n, format!("planned output shape {shape:?} differs from the inferred {ys:?}")));
    }
    let rx = cx.read(n, x)?;
    let y = cx.write(n, out)?;
    if steps.is_empty() {
        return Ok(Some(format!("{y}.copy_from_slice({rx});\n")));
    }
    let xn: usize = xs.iter().product();
    let half = half_len(xn, &steps);
    let ev = f64_lit(at.extrapolation_value as f64);
    let mut s = format!("let sc = {};\nlet (b0, b1) = sc.split_at_mut({half});\n", cx.scratch(n, id, "f64", 2 * half)?);
    s += &format!("rt::kernels::resize::widen({rx}, &mut b0[..{xn}]);\n");
    let mut cur_len = xn;
    for (k, st) in steps.iter().enumerate() {
        let (src, dst) = if k % 2 == 0 { ("b0", "b1") } else { ("b1", "b0") };
        let on = st.outer * st.out_len * st.inner;
        let idx = cx.table(&st.idx);
        let w = cx.table_f64(&st.w);
        let ex = cx.table_u8(&st.extrap);
        s += &format!(
            "rt::kernels::resize::resample_axis(&{src}[..{cur_len}], {}, {}, {}, {idx}, {w}, {}, {ex}, {ev}, &mut {dst}[..{on}]);\n",
            st.outer, st.in_len, st.inner, st.taps
        );
        cur_len = on;
    }
    let last = if steps.len() % 2 == 1 { "b1" } else { "b0" };
    s += &format!("rt::kernels::resize::narrow(&{last}[..{cur_len}], {y});\n");
    Ok(Some(s))
}
