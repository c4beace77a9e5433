//! Convolution: calls into the runtime's kernels with geometry resolved at compile time (the
//! same resolution the interpreter uses), weights prepacked or Winograd-transformed where that
//! pays; and the scratch space of the ops `layer.rs` emits.
use super::elementwise::f32_lit;
use super::wide::{carve, is_half, narrow, widen};
use super::Ctx;
use crate::codegen::{CodegenError, Lowering};
use crate::interp::ops::nn::geom::resolve;
use crate::ir::{DType, Graph, Node, NodeId, Op};
use burnc_runtime::kernels::conv::{conv_prepacked_scratch_len, conv_scratch_len, takes_prepacked, ConvDims};
use burnc_runtime::kernels::window::Window3;

fn fixed(g: &Graph, v: Option<crate::ir::ValueId>) -> Option<(DType, Vec<usize>)> {
    let t = g.tensor_type(v?)?;
    Some((t.dtype, t.shape.as_ref()?.as_fixed()?))
}

fn conv_geometry(g: &Graph, n: &Node) -> Option<(ConvDims, Window3, DType)> {
    let (Op::Conv { window, group } | Op::FusedConv { window, group, .. }) = &n.op else { return None };
    let (d, x) = fixed(g, n.inputs.first().copied().flatten())?;
    let (_, w) = fixed(g, n.inputs.get(1).copied().flatten())?;
    if x.len() < 3 || w.len() != x.len() {
        return None;
    }
    let win = resolve(window, &w[2..], &x[2..]).ok()?;
    Some((ConvDims { batch: x[0], c_in: x[1], c_out: w[0], group: *group }, win, d))
}

/// Whether a [`prepacked_conv`] runs as F(4×4, 3×3) Winograd (`runtime::kernels::winograd`):
/// its weights are stored transformed and packed, and it has its own scratch.
pub(crate) fn winograd_conv(g: &Graph, n: &Node, lw: Lowering) -> bool {
    lw.winograd && prepacked_conv(g, n, lw).is_some_and(|(d, win)| burnc_runtime::kernels::winograd::applies(&d, &win))
}

/// Elements of a [`prepacked_conv`]'s stored weights, and the weights in that layout.
pub(crate) fn packed_conv_weights(g: &Graph, n: &Node, lw: Lowering, d: &ConvDims, win: &Window3, plain: &[f32]) -> Vec<f32> {
    use burnc_runtime::kernels::{conv, winograd};
    if winograd_conv(g, n, lw) {
        let mut wp = vec![0f32; winograd::packed_len(d)];
        winograd::pack_weights(d, plain, &mut wp);
        wp
    } else {
        let mut wp = vec![0f32; conv::conv_packed_len(d, win)];
        conv::pack_conv_weights(d, win, plain, &mut wp);
        wp
    }
}

/// The runtime function a [`prepacked_conv`] calls; both take `(x, packed, y, &d, &win,
/// scratch, &ep)`.
pub(crate) fn prepacked_fn(g: &Graph, n: &Node, lw: Lowering) -> &'static str {
    if winograd_conv(g, n, lw) {
        "rt::kernels::winograd::conv_winograd"
    } else {
        "rt::kernels::conv::conv_fused_prepacked"
    }
}

/// The geometry of a convolution whose weights the weights blob stores packed for the GEMM
/// (`conv_fused_prepacked`): f32, weights known at compile time (a parameter or constant),
/// computed as GEMMs (not the direct depthwise loop).
pub(crate) fn prepacked_conv(g: &Graph, n: &Node, lw: Lowering) -> Option<(ConvDims, Window3)> {
    if !lw.prepack {
        return None;
    }
    let (d, win, dt) = conv_geometry(g, n)?;
    let w = n.inputs.get(1).copied().flatten()?;
    let is_weight = matches!(g.value(w).kind, crate::ir::ValueKind::Param(_) | crate::ir::ValueKind::Const(_));
    let w_f32 = g.tensor_type(w).map(|t| t.dtype) == Some(DType::F32);
    (dt == DType::F32 && w_f32 && is_weight && takes_prepacked(&d)).then_some((d, win))
}

/// The packed weights of a [`prepacked_conv`] as an expression of type `&[f32]` (`None` for
/// other convolutions): where the weights layout stored them packed, or else (a weight the
/// layout placed plain, e.g. shared with another graph) packed now into a table, so the
/// call always matches the scratch the memory plan gave it ([`scratch_bytes`]).
pub(crate) fn prepacked_weights(cx: &Ctx, n: &Node) -> Result<Option<String>, CodegenError> {
    let Some((d, win)) = prepacked_conv(cx.g, n, cx.lowering) else { return Ok(None) };
    let w = cx.input(n, 1)?;
    if let Some(&(off, len)) = cx.weights.borrow().packed.get(&(w, winograd_conv(cx.g, n, cx.lowering))) {
        return Ok(Some(format!("unsafe {{ rt::arena::weights::<f32>(w, {off}, {len}) }}")));
    }
    let t = cx.konst(w).ok_or_else(|| cx.err(n, "conv weights are not constant"))?;
    let plain: Vec<f32> = t.to_f64_vec().iter().map(|&v| v as f32).collect();
    Ok(Some(cx.table(&packed_conv_weights(cx.g, n, cx.lowering, &d, &win, &plain))))
}

/// Scratch elements of a convolution: what `conv_fused_prepacked` needs when the weights come
/// packed, else what `conv` / `conv_fused` need.
fn conv_col_len(g: &Graph, n: &Node, lw: Lowering, d: &ConvDims, win: &Window3) -> usize {
    if winograd_conv(g, n, lw) {
        burnc_runtime::kernels::winograd::scratch_len(d, win)
    } else if prepacked_conv(g, n, lw).is_some() {
        conv_prepacked_scratch_len(d, win)
    } else {
        conv_scratch_len(d, win)
    }
}

pub fn scratch_bytes(g: &Graph, id: NodeId, lw: Lowering) -> usize {
    let n = g.node(id);
    if let Op::Softmax { log, .. } = n.op {
        // f16 / bf16 LogSoftmax: the input widened to f32, and the f32 result.
        return match fixed(g, n.outputs.first().copied()) {
            Some((d, s)) if is_half(d) && log => 2 * s.iter().product::<usize>() * 4,
            _ => 0,
        };
    }
    if let Some((perm, _)) = reduce_perm(g, n) {
        let x = n.inputs.first().copied().flatten().and_then(|x| g.tensor_type(x));
        return x.and_then(|t| Some(t.shape.as_ref()?.numel()? * t.dtype.size())).filter(|_| !perm.is_empty()).unwrap_or(0);
    }
    match conv_geometry(g, n) {
        Some((d, win, dt)) if is_half(dt) => half_conv_parts(g, n, &d, &win).iter().map(|p| p.1).sum::<usize>() * 4,
        Some((d, win, dt)) => conv_col_len(g, n, lw, &d, &win) * dt.size(),
        None => 0,
    }
}

/// f16 / bf16 Conv's f32 scratch: X, W, B widened, the f32 output, then im2col.
fn half_conv_parts(g: &Graph, n: &Node, d: &ConvDims, win: &Window3) -> [(&'static str, usize); 5] {
    let len = |i: usize| fixed(g, n.inputs.get(i).copied().flatten()).map_or(0, |(_, s)| s.iter().product());
    let out = fixed(g, n.outputs.first().copied()).map_or(0, |(_, s)| s.iter().product());
    [("xw", len(0)), ("ww", len(1)), ("bw", len(2)), ("yw", out), ("col", conv_scratch_len(d, win))]
}

/// A Reduce over non-contiguous axes moves its input (kept axes first, then the reduced ones,
/// as the interpreter does) into scratch: that permutation and the input shape.
fn reduce_perm(g: &Graph, n: &Node) -> Option<(Vec<usize>, Vec<usize>)> {
    let Op::Reduce { axes, noop_with_empty_axes, .. } = &n.op else { return None };
    let xs = g.tensor_type(n.inputs.first().copied().flatten()?)?.shape.as_ref()?.as_fixed()?;
    let given = match n.inputs.get(1).copied().flatten() {
        Some(v) => Some(g.const_value(v)?.to_i64_vec()?),
        None => None,
    };
    let ax = super::layer::reduce_axes(axes, given, *noop_with_empty_axes, xs.len()).ok()??;
    if super::layer::contiguous(&ax) {
        return None;
    }
    let perm: Vec<usize> = (0..xs.len()).filter(|d| !ax.contains(d)).chain(ax.iter().copied()).collect();
    Some((perm, xs))
}

pub(crate) fn window_lit(w: &Window3) -> String {
    format!(
        "rt::kernels::window::Window3 {{ input: {:?}, output: {:?}, kernel: {:?}, strides: {:?}, dilations: {:?}, pads_begin: {:?}, pads_end: {:?} }}",
        w.input, w.output, w.kernel, w.strides, w.dilations, w.pads_begin, w.pads_end
    )
}

/// A fused op's activation as a runtime `Act` literal.
pub(crate) fn act_lit(a: crate::ir::Act) -> String {
    use crate::ir::Act;
    match a {
        Act::None => "rt::kernels::conv::Act::None".into(),
        Act::Relu => "rt::kernels::conv::Act::Relu".into(),
        Act::LeakyRelu(alpha) => format!("rt::kernels::conv::Act::LeakyRelu({})", f32_lit(alpha)),
        Act::Clip(lo, hi) => format!("rt::kernels::conv::Act::Clip({}, {})", f32_lit(lo), f32_lit(hi)),
    }
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let (od, _) = cx.ty(n, out)?;
    let t = cx.elem(n, out)?;
    let float = matches!(od, DType::F32 | DType::F64);
    let gemm_impl = if od == DType::F32 { "rt::kernels::conv::Sgemm" } else { "rt::kernels::conv::Dgemm" };
    match &n.op {
        Op::Conv { group, .. } => {
            if is_half(od) {
                return half_conv(cx, id, n, out, t);
            }
            if !float {
                return Err(cx.err(n, format!("Conv on {od} is not supported by codegen yet")));
            }
            let (d, win, _) = conv_geometry(cx.g, n).ok_or_else(|| cx.err(n, "conv geometry is not static"))?;
            let col_len = conv_col_len(cx.g, n, cx.lowering, &d, &win);
            let bias = match n.inputs.get(2).copied().flatten() {
                Some(b) => format!("Some({})", cx.read(n, b)?),
                None => "None".into(),
            };
            if let Some(wp) = prepacked_weights(cx, n)? {
                return Ok(Some(format!(
                    "let d = rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: {group} }};\n\
                     let win = {};\n\
                     let ep = rt::kernels::conv::Epilogue::bias({bias});\n\
                     {}({}, {wp}, {}, &d, &win, {}, &ep);",
                    d.batch,
                    d.c_in,
                    d.c_out,
                    window_lit(&win),
                    prepacked_fn(cx.g, n, cx.lowering),
                    cx.read(n, cx.input(n, 0)?)?,
                    cx.write(n, out)?,
                    cx.scratch(n, id, t, col_len)?
                )));
            }
            Ok(Some(format!(
                "let d = rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: {group} }};\n\
                 let win = {};\n\
                 rt::kernels::conv::conv({}, {}, {bias}, {}, &d, &win, {}, &{gemm_impl});",
                d.batch,
                d.c_in,
                d.c_out,
                window_lit(&win),
                cx.read(n, cx.input(n, 0)?)?,
                cx.read(n, cx.input(n, 1)?)?,
                cx.write(n, out)?,
                cx.scratch(n, id, t, col_len)?
            )))
        }
        Op::FusedConv { group, act, .. } => {
            if !float {
                return Err(cx.err(n, format!("fused Conv on {od} is not supported by codegen")));
            }
            let (d, win, _) = conv_geometry(cx.g, n).ok_or_else(|| cx.err(n, "conv geometry is not static"))?;
            let col_len = conv_col_len(cx.g, n, cx.lowering, &d, &win);
            let opt = |i: usize| -> Result<String, CodegenError> {
                Ok(match n.inputs.get(i).copied().flatten() {
                    Some(v) => format!("Some({})", cx.read(n, v)?),
                    None => "None".into(),
                })
            };
            let (call, w, mm) = match prepacked_weights(cx, n)? {
                Some(wp) => (prepacked_fn(cx.g, n, cx.lowering), wp, String::new()),
                None => ("rt::kernels::conv::conv_fused", cx.read(n, cx.input(n, 1)?)?, format!(", &{gemm_impl}")),
            };
            Ok(Some(format!(
                "let d = rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: {group} }};\n\
                 let win = {};\n\
                 let ep = rt::kernels::conv::Epilogue {{ bias: {}, scale: {}, shift: {}, residual: {}, act: {} }};\n\
                 {call}({}, {w}, {}, &d, &win, {}{mm}, &ep);",
                d.batch,
                d.c_in,
                d.c_out,
                window_lit(&win),
                opt(2)?,
                opt(4)?,
                opt(5)?,
                opt(3)?,
                act_lit(*act),
                cx.read(n, cx.input(n, 0)?)?,
                cx.write(n, out)?,
                cx.scratch(n, id, t, col_len)?
            )))
        }
        _ => Err(cx.err(n, "not an nn op")),
    }
}

/// f16 / bf16 Conv as the interpreter runs it: X, W and B widened to f32, the f32 kernel
/// (sgemm), the output rounded once.
fn half_conv(cx: &Ctx, id: NodeId, n: &Node, out: crate::ir::ValueId, t: &str) -> Result<Option<String>, CodegenError> {
    let Op::Conv { group, .. } = &n.op else { return Err(cx.err(n, "not a Conv")) };
    let (d, win, _) = conv_geometry(cx.g, n).ok_or_else(|| cx.err(n, "conv geometry is not static"))?;
    let x = cx.input(n, 0)?;
    for i in 1..3 {
        if let Some(v) = n.inputs.get(i).copied().flatten() {
            if cx.ty(n, v)?.0 != cx.ty(n, x)?.0 {
                return Err(cx.err(n, "Conv inputs of different types"));
            }
        }
    }
    let parts = half_conv_parts(cx.g, n, &d, &win);
    let total: usize = parts.iter().map(|p| p.1).sum();
    let mut s = carve(&cx.scratch(n, id, "f32", total)?, "f32", &parts);
    s += &widen("xw", &cx.read(n, x)?, "f32");
    s += &widen("ww", &cx.read(n, cx.input(n, 1)?)?, "f32");
    let bias = match n.inputs.get(2).copied().flatten() {
        Some(b) => {
            s += &widen("bw", &cx.read(n, b)?, "f32");
            "Some(&bw[..])"
        }
        None => {
            s += "let _ = bw;\n";
            "None"
        }
    };
    s += &format!(
        "let d = rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: {group} }};\n\
         let win = {};\n\
         rt::kernels::conv::conv(xw, ww, {bias}, yw, &d, &win, col, &rt::kernels::conv::Sgemm);\n",
        d.batch,
        d.c_in,
        d.c_out,
        window_lit(&win)
    );
    s += &narrow(&cx.write(n, out)?, "yw", t, "f32");
    Ok(Some(s))
}

#[cfg(test)]
mod tests {
    use crate::codegen::{generate, CodegenOptions};
    use crate::ir::{AutoPad, DType, Graph, Op, Shape, TensorType, ValueKind, ValueType, Window};
    use crate::tensor::Tensor;

    /// x [1, c, hw, hw] → 3×3 conv with pad 1 (c → c) → y.
    fn conv_graph(c: usize, hw: usize) -> Graph {
        let mut g = Graph::default();
        let ty = TensorType { dtype: DType::F32, shape: Some(Shape::fixed(&[1, c, hw, hw])) };
        let x = g.add_value("x", ValueType::Tensor(ty), ValueKind::Input);
        g.inputs.push(x);
        let w = g.add_const("w", Tensor::from_f32s(vec![c, c, 3, 3], (0..c * c * 9).map(|i| (i % 7) as f32 * 0.1).collect()));
        let window = Window { kernel_shape: vec![3, 3], strides: vec![1, 1], pads: vec![1, 1, 1, 1], dilations: vec![], auto_pad: AutoPad::NotSet, ceil_mode: false };
        let y = g.add_node("conv", Op::Conv { window, group: 1 }, vec![Some(x), Some(w), None], &["y".to_string()]).1[0];
        g.outputs.push(y);
        crate::passes::prepare(&mut g).expect("prepare");
        g
    }

    #[test]
    fn winograd_only_in_fused_code_and_where_it_pays() {
        let g = conv_graph(32, 28);
        let on = generate(&g, &CodegenOptions::default()).expect("generate");
        assert!(on.source.contains("conv_winograd"), "fused code of a 32→32 3×3 conv at 28×28 uses Winograd");
        let off = generate(&g, &CodegenOptions { winograd: false, ..Default::default() }).expect("generate");
        assert!(!off.source.contains("conv_winograd") && off.source.contains("conv_fused_prepacked"));
        // 36 transformed numbers per filter instead of 9.
        assert!(on.weights_bytes >= 3 * off.weights_bytes, "{} vs {}", on.weights_bytes, off.weights_bytes);
        // Code that must round as the interpreter does never uses it.
        let exact = generate(&g, &CodegenOptions { fuse: false, ..Default::default() }).expect("generate");
        assert!(!exact.source.contains("conv_winograd"));
        // Too few tiles for 32 channels: the GEMM is faster there.
        let small = generate(&conv_graph(32, 12), &CodegenOptions::default()).expect("generate");
        assert!(!small.source.contains("conv_winograd"));
    }
}
