//! Convolution: calls into the runtime's kernels with geometry resolved at compile time (the
//! same resolution the interpreter uses), weights prepacked or Winograd-transformed where that
//! pays; and the scratch space of the ops `layer.rs` emits.
use super::elementwise::f32_lit;
use super::wide::{carve, is_half, narrow, widen};
use super::Ctx;
use crate::codegen::{CodegenError, Lowering};
use crate::ops::window::resolve;
use crate::ir::{DType, DimExpr, Graph, Node, NodeId, Op, ValueId, Window};
use crate::ops::EmitCx;
use crate::passes::symbolic::SymInfo;
use burnc_runtime::kernels::conv::{conv_prepacked_scratch_len, conv_scratch_len, is_direct_depthwise, takes_prepacked, ConvDims};
use burnc_runtime::kernels::packed;
use burnc_runtime::kernels::window::Window3;

fn fixed(g: &Graph, v: Option<ValueId>) -> Option<(DType, Vec<usize>)> {
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
        Act::HardSwish => "rt::kernels::conv::Act::HardSwish".into(),
        Act::Sigmoid => "rt::kernels::conv::Act::Sigmoid".into(),
        Act::Silu => "rt::kernels::conv::Act::Silu".into(),
    }
}

/// Conv and FusedConv: one emitter for fixed shapes and bounded dims (sizes from
/// [`EmitCx::size`] and the window from [`EmitCx::window_of`]: literals for fixed dims). With
/// fixed shapes f16 / bf16 convolutions go through f32 ([`half_conv`]) and the weights blob may
/// hold Winograd-transformed weights; bounded dims take f32 only.
pub(crate) fn emit(e: &EmitCx) -> Result<Option<String>, CodegenError> {
    let (cx, n, id) = (e.ctx(), e.node(), e.id());
    let (Op::Conv { window, group } | Op::FusedConv { window, group, .. }) = &n.op else { return Err(e.err("not a Conv")) };
    let out = e.output(0)?;
    let od = e.dtype(out)?;
    if e.is_bounded() && od != DType::F32 {
        return Err(e.err(format!("Conv on {od} with bounded dims is not supported yet; pin them with --input")));
    }
    let t = e.elem(out)?;
    let fused = matches!(n.op, Op::FusedConv { .. });
    if is_half(od) && !fused {
        return half_conv(cx, id, n, out, t);
    }
    if !matches!(od, DType::F32 | DType::F64) {
        return Err(e.err(if fused { format!("fused Conv on {od} is not supported by codegen") } else { format!("Conv on {od} is not supported by codegen yet") }));
    }
    let gemm_impl = if od == DType::F32 { "rt::kernels::conv::Sgemm" } else { "rt::kernels::conv::Dgemm" };
    let (x, w) = (e.input(0)?, e.input(1)?);
    let (xs, ws) = (e.dims(x)?, e.dims(w)?);
    // The kernel at the bounds (its value with fixed shapes) for the static geometry.
    let w_at_bound = cx.ty(n, w)?.1;
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(e.err("Conv needs X and W of one rank, at least 3"));
    }
    let d = format!("rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: {group} }}", e.size(&xs[0])?, e.size(&xs[1])?, e.size(&ws[0])?);
    let win = e.window_of(window, &w_at_bound[2..], &kernel_dims(window, &ws), x, out)?;
    // The plan's scratch: `scratch_bytes`, or `conv_scratch_bound` under bounded dims.
    let col = e.scratch(od)?;
    let prepacked = prepacked_weights(cx, n)?;
    let call = match &prepacked {
        Some(_) => prepacked_fn(cx.g, n, cx.lowering),
        None => "rt::kernels::conv::conv_fused",
    };
    let ep = match &n.op {
        Op::FusedConv { act, .. } => format!(
            "rt::kernels::conv::Epilogue {{ bias: {}, scale: {}, shift: {}, residual: {}, act: {} }}",
            e.read_opt(2)?,
            e.read_opt(4)?,
            e.read_opt(5)?,
            e.read_opt(3)?,
            act_lit(*act)
        ),
        _ => format!("rt::kernels::conv::Epilogue::bias({})", e.read_opt(2)?),
    };
    let (xr, y) = (e.read(x)?, e.write(out)?);
    Ok(Some(match prepacked {
        Some(wp) => format!("let d = {d};\nlet win = {win};\nlet ep = {ep};\n{call}({xr}, {wp}, {y}, &d, &win, {col}, &ep);"),
        // A plain Conv: `conv` is `conv_fused` with the bias epilogue.
        None if !fused => format!("let d = {d};\nlet win = {win};\nrt::kernels::conv::conv({xr}, {}, {}, {y}, &d, &win, {col}, &{gemm_impl});", e.read(w)?, e.read_opt(2)?),
        None => format!("let d = {d};\nlet win = {win};\nlet ep = {ep};\n{call}({xr}, {}, {y}, &d, &win, {col}, &{gemm_impl}, &ep);", e.read(w)?),
    }))
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

/// Scratch bytes of a Conv at the bounds, an upper bound of what the runtime asks for at any
/// smaller size: the GEMM's packing space (B panels, plus A blocks unless the weights come
/// packed) and the whole im2col buffer (the runtime's tiling picks a tile per size, never more
/// than all rows); for a direct depthwise conv, its zero-padded plane, which only grows with
/// the window. `None` for other ops.
pub(crate) fn conv_scratch_at_bound(g: &Graph, id: NodeId, lw: Lowering) -> Option<usize> {
    let n = g.node(id);
    let (Op::Conv { window, group } | Op::FusedConv { window, group, .. }) = &n.op else { return None };
    let (dt, x) = fixed(g, n.inputs.first().copied().flatten())?;
    let (_, w) = fixed(g, n.inputs.get(1).copied().flatten())?;
    let win = resolve(window, w.get(2..)?, x.get(2..)?).ok()?;
    let d = ConvDims { batch: x[0], c_in: x[1], c_out: w[0], group: *group };
    if is_direct_depthwise(&d) {
        return Some(conv_scratch_len(&d, &win) * dt.size());
    }
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let kdim = cg * win.kernel_size();
    let pack = if prepacked_conv(g, n, lw).is_some() { packed::prepacked_scratch_len(kdim) } else { packed::scratch_len(mg, kdim) };
    let col = if win.is_pointwise() { 0 } else { kdim * win.out_size() };
    Some((pack + col) * dt.size())
}

/// Scratch bytes of a Conv whose shapes depend on bounded dims, an upper bound over every size
/// within the bounds: [`conv_scratch_at_bound`] when the kernel is fixed and every size grows
/// with the dims; else (a bounded kernel, W a graph input) the GEMM's packing space and the
/// whole im2col buffer, and the direct depthwise loop's plane, each at the largest channels,
/// taps and output sizes the dims allow (`range`: each dim's least and greatest value), which
/// every one of them grows with. `None` for other ops.
pub(crate) fn conv_scratch_bound(g: &Graph, info: &SymInfo, id: NodeId, range: &dyn Fn(&str) -> Option<(i64, i64)>, lw: Lowering) -> Option<usize> {
    let n = g.node(id);
    let (Op::Conv { window, group } | Op::FusedConv { window, group, .. }) = &n.op else { return None };
    let at_bound = conv_scratch_at_bound(g, id, lw)?;
    let shape = |v: Option<ValueId>| -> Option<Vec<DimExpr>> {
        let v = v?;
        info.shapes.get(&v).cloned().or_else(|| Some(fixed(g, Some(v))?.1.iter().map(|&d| DimExpr::constant(d as i64)).collect()))
    };
    let (xs, ws, ys) = (shape(n.inputs.first().copied().flatten())?, shape(n.inputs.get(1).copied().flatten())?, shape(n.outputs.first().copied())?);
    let ks = kernel_dims(window, &ws);
    // The size at the bounds holds every smaller one only when the kernel is fixed, and W's
    // channels too (X's must match them): whether the conv runs depthwise (a padded plane, not
    // im2col) depends on them.
    let fixed_channels = [ws.first(), ws.get(1)].iter().all(|d| d.is_some_and(|d| d.as_const().is_some()));
    if fixed_channels && ks.iter().all(|k| k.as_const().is_some()) && xs.iter().chain(&ys).all(|e| e.is_monotone()) {
        return Some(at_bound);
    }
    let most = |e: &DimExpr| usize::try_from(e.max_over(range)?.max(1)).ok();
    let most_of = |es: &[DimExpr]| es.iter().map(most).collect::<Option<Vec<usize>>>();
    let (kmax, omax) = (most_of(&ks)?, most_of(ys.get(2..)?)?);
    let (c_in, c_out, group) = (most(xs.get(1)?)?, most(ws.first()?)?, (*group).max(1));
    let taps = kmax.iter().try_fold(1usize, |a, &k| a.checked_mul(k))?;
    let outs = omax.iter().try_fold(1usize, |a, &o| a.checked_mul(o))?;
    let kdim = (c_in / group).checked_mul(taps)?;
    let gemm = packed::scratch_len(c_out / group, kdim).checked_add(kdim.checked_mul(outs)?)?;
    let ((dt, xb), (_, wb)) = (fixed(g, n.inputs.first().copied().flatten())?, fixed(g, n.inputs.get(1).copied().flatten())?);
    let win_b = resolve(window, wb.get(2..)?, xb.get(2..)?).ok()?;
    let pad3 = |v: &[usize]| -> Option<[usize; 3]> {
        let mut a = [1usize; 3];
        a.get_mut(3usize.checked_sub(v.len())?..)?.copy_from_slice(v);
        Some(a)
    };
    let win = Window3 { output: pad3(&omax)?, kernel: pad3(&kmax)?, ..win_b };
    let plane = conv_scratch_len(&ConvDims { batch: 1, c_in: group, c_out: group, group }, &win);
    Some(at_bound.max(gemm.max(plane).checked_mul(dt.size())?))
}

/// A convolution's spatial kernel dims: `kernel_shape` (which W's dims are checked to equal),
/// else W's spatial dims, bounded when W is a graph input.
fn kernel_dims(window: &Window, ws: &[DimExpr]) -> Vec<DimExpr> {
    if window.kernel_shape.is_empty() {
        ws.get(2..).unwrap_or_default().to_vec()
    } else {
        window.kernel_shape.iter().map(|&k| DimExpr::constant(k as i64)).collect()
    }
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
        let g = conv_graph(64, 28);
        let on = generate(&g, &CodegenOptions::default()).expect("generate");
        assert!(on.source.contains("conv_winograd"), "fused code of a 64→64 3×3 conv at 28×28 uses Winograd");
        let off = generate(&g, &CodegenOptions { winograd: false, ..Default::default() }).expect("generate");
        assert!(!off.source.contains("conv_winograd") && off.source.contains("conv_fused_prepacked"));
        // 36 transformed numbers per filter instead of 9.
        assert!(on.weights_bytes >= 3 * off.weights_bytes, "{} vs {}", on.weights_bytes, off.weights_bytes);
        // Code that must round as the interpreter does never uses it.
        let exact = generate(&g, &CodegenOptions { fuse: false, ..Default::default() }).expect("generate");
        assert!(!exact.source.contains("conv_winograd"));
        // Too few tiles for 64 channels, or too few channels: the GEMM is faster there.
        let small = generate(&conv_graph(64, 12), &CodegenOptions::default()).expect("generate");
        assert!(!small.source.contains("conv_winograd"));
        let narrow = generate(&conv_graph(32, 28), &CodegenOptions::default()).expect("generate");
        assert!(!narrow.source.contains("conv_winograd"));
    }
}
