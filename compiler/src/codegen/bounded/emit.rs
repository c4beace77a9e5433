//! Emitters for nodes whose shapes depend on bounded dims: the same runtime kernels as the
//! static emitters, with sizes read from the run-time table `sz` instead of literals. Here:
//! the helpers, the dispatch and the compute ops. Ops not listed are an error naming the node ("pin
//! the dims with --input").
use super::Sizes;
use crate::codegen::emit::Ctx;
use crate::codegen::{CodegenError, Lowering};
use crate::interp::ops::nn::geom::resolve;
use crate::ir::{AutoPad, DType, DimExpr, Graph, Node, NodeId, Op, UnaryOp, ValueId, ValueKind, Window};
use crate::passes::symbolic::SymInfo;
use crate::codegen::emit::nn::{act_lit, prepacked_conv, prepacked_weights};
use burnc_runtime::kernels::conv::{conv_scratch_len, is_direct_depthwise, ConvDims};
use burnc_runtime::kernels::packed;
use burnc_runtime::kernels::window::Window3;

pub(crate) struct Bx<'a> {
    pub cx: &'a Ctx<'a>,
    pub info: &'a SymInfo,
    pub sizes: &'a Sizes,
}

pub(super) fn fixed(g: &Graph, v: Option<ValueId>) -> Option<Vec<usize>> {
    g.tensor_type(v?)?.shape.as_ref()?.as_fixed()
}

/// Scratch bytes of a Conv at the bounds, an upper bound of what the runtime asks for at any
/// smaller size: the GEMM's packing space (B panels, plus A blocks unless the weights come
/// packed) and the whole im2col buffer (the runtime's tiling picks a tile per size, never more
/// than all rows); for a direct depthwise conv, its zero-padded plane, which only grows with
/// the window. `None` for other ops.
pub(crate) fn conv_scratch_at_bound(g: &Graph, id: NodeId, lw: Lowering) -> Option<usize> {
    let n = g.node(id);
    let (Op::Conv { window, group } | Op::FusedConv { window, group, .. }) = &n.op else { return None };
    let x = fixed(g, n.inputs.first().copied().flatten())?;
    let w = fixed(g, n.inputs.get(1).copied().flatten())?;
    let win = resolve(window, w.get(2..)?, x.get(2..)?).ok()?;
    let d = ConvDims { batch: x[0], c_in: x[1], c_out: w[0], group: *group };
    let dt = g.tensor_type(n.inputs.first().copied().flatten()?)?.dtype;
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
        info.shapes.get(&v).cloned().or_else(|| Some(fixed(g, Some(v))?.iter().map(|&d| DimExpr::constant(d as i64)).collect()))
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
    let (xb, wb) = (fixed(g, n.inputs.first().copied().flatten())?, fixed(g, n.inputs.get(1).copied().flatten())?);
    let win_b = resolve(window, wb.get(2..)?, xb.get(2..)?).ok()?;
    let pad3 = |v: &[usize]| -> Option<[usize; 3]> {
        let mut a = [1usize; 3];
        a.get_mut(3usize.checked_sub(v.len())?..)?.copy_from_slice(v);
        Some(a)
    };
    let win = Window3 { output: pad3(&omax)?, kernel: pad3(&kmax)?, ..win_b };
    let plane = conv_scratch_len(&ConvDims { batch: 1, c_in: group, c_out: group, group }, &win);
    let dt = g.tensor_type(n.inputs.first().copied().flatten()?)?.dtype;
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

impl Bx<'_> {
    pub(super) fn err(&self, n: &Node, reason: impl Into<String>) -> CodegenError {
        self.cx.err(n, reason)
    }

    pub(super) fn unsupported(&self, n: &Node) -> CodegenError {
        let op = n.source_op.as_ref().map(|(o, _)| o.clone()).unwrap_or_else(|| n.op.name());
        self.err(n, format!("`{op}` does not support bounded dims yet; pin them with --input"))
    }

    pub(crate) fn shape(&self, n: &Node, v: ValueId) -> Result<Vec<DimExpr>, CodegenError> {
        if let Some(s) = self.info.shapes.get(&v) {
            return Ok(s.clone());
        }
        // Weights and other static values keep their types.
        let s = fixed(self.cx.g, Some(v)).ok_or_else(|| self.err(n, format!("value `{}` has no known shape", self.cx.g.value(v).name)))?;
        Ok(s.iter().map(|&d| DimExpr::constant(d as i64)).collect())
    }

    pub(super) fn numel(&self, n: &Node, v: ValueId) -> Result<String, CodegenError> {
        Ok(self.sizes.numel(&self.shape(n, v)?))
    }

    /// `&[T]` over value `v` with its run-time length.
    pub(crate) fn read(&self, n: &Node, v: ValueId) -> Result<String, CodegenError> {
        let g = self.cx.g;
        match &g.value(v).kind {
            ValueKind::Node(_) => {
                let slot = self.cx.plan.slots.get(&v).ok_or_else(|| self.err(n, format!("value `{}` has no arena slot", g.value(v).name)))?;
                Ok(format!("unsafe {{ rt::arena::view::<{}>(a, {}, {}) }}", self.cx.elem(n, v)?, slot.offset, self.numel(n, v)?))
            }
            // A fill constant (a ConstantOfShape folded at the bounds): its prefix is the fill
            // at the run-time shape.
            ValueKind::Const(_) if self.info.is_symbolic(v) => Ok(format!("&{}[..{}]", self.cx.read(n, v)?, self.numel(n, v)?)),
            // Weights are static; graph inputs are the caller's slices (lengths checked).
            _ => self.cx.read(n, v),
        }
    }

    /// `&mut [T]` over node output `v` with its run-time length.
    pub(crate) fn write(&self, n: &Node, v: ValueId) -> Result<String, CodegenError> {
        let slot = self.cx.plan.slots.get(&v).ok_or_else(|| self.err(n, format!("value `{}` has no arena slot", self.cx.g.value(v).name)))?;
        Ok(format!("unsafe {{ rt::arena::view_mut::<{}>(a, {}, {}) }}", self.cx.elem(n, v)?, slot.offset, self.numel(n, v)?))
    }

    pub(super) fn input(&self, n: &Node, i: usize) -> Result<ValueId, CodegenError> {
        self.cx.input(n, i)
    }

    pub(super) fn opt_read(&self, n: &Node, i: usize) -> Result<String, CodegenError> {
        Ok(match n.inputs.get(i).copied().flatten() {
            Some(v) => format!("Some({})", self.read(n, v)?),
            None => "None".into(),
        })
    }

    /// A `Window3` literal: the static geometry at the bounds with the spatial input, output
    /// and kernel (`ks`, bounded for a convolution whose W is a graph input) sizes from the
    /// run-time table.
    pub(crate) fn window(&self, w: &Window, win_at_bound: &Window3, ks: &[DimExpr], xs: &[DimExpr], ys: &[DimExpr]) -> String {
        let k = xs.len();
        // The dilated kernel extent `(k − 1)·d + 1` of spatial dim `i`, and its code.
        let extent = |i: usize| ks.get(i).cloned().unwrap_or_else(|| DimExpr::constant(win_at_bound.kernel[3 - k + i] as i64)).sub(&DimExpr::constant(1)).scale(win_at_bound.dilations[3 - k + i] as i64).add(&DimExpr::constant(1));
        let extent_code = |i: usize| match extent(i).as_const() {
            Some(dk) => format!("{dk}"),
            None => format!("(({} - 1) * {} + 1)", self.sizes.dim(&ks[i]), win_at_bound.dilations[3 - k + i]),
        };
        let kernel = if ks.iter().all(|d| d.as_const().is_some()) {
            format!("{:?}", win_at_bound.kernel)
        } else {
            let mut a: Vec<String> = vec!["1".into(); 3 - k];
            a.extend(ks.iter().map(|d| self.sizes.dim(d)));
            format!("[{}]", a.join(", "))
        };
        let fill = |v: &[DimExpr]| {
            let mut a: Vec<String> = vec!["1usize".into(); 3 - k];
            a.extend(v.iter().map(|d| self.sizes.dim(d)));
            format!("[{}]", a.join(", "))
        };
        let (mut pb, mut pe): (Vec<String>, Vec<String>) =
            (win_at_bound.pads_begin.iter().map(|p| format!("{p}isize")).collect(), win_at_bound.pads_end.iter().map(|p| format!("{p}isize")).collect());
        if !matches!(w.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
            // The window must fit the padded input (as geom::resolve requires): one more
            // derived size `len + pads − extent + 1` that `forward` checks is at least 1.
            for (i, x) in xs.iter().enumerate() {
                let j = 3 - k + i;
                let pads = (win_at_bound.pads_begin[j] + win_at_bound.pads_end[j]) as i64;
                let _ = self.sizes.dim(&x.add(&DimExpr::constant(pads + 1)).sub(&extent(i)));
            }
        }
        if matches!(w.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
            // SAME pads depend on the size: total = (out − 1)·s + dk − len, split as geom::resolve.
            for i in 0..k {
                let j = 3 - k + i;
                let dk = extent_code(i);
                let total = format!("(({} - 1) * {} + {dk}).saturating_sub({})", self.sizes.dim(&ys[i]), win_at_bound.strides[j], self.sizes.dim(&xs[i]));
                let (small, big) = (format!("(({total}) / 2) as isize"), format!("(({total}) - ({total}) / 2) as isize"));
                if w.auto_pad == AutoPad::SameUpper {
                    (pb[j], pe[j]) = (small, big);
                } else {
                    (pb[j], pe[j]) = (big, small);
                }
            }
        }
        format!(
            "rt::kernels::window::Window3 {{ input: {}, output: {}, kernel: {kernel}, strides: {:?}, dilations: {:?}, pads_begin: [{}], pads_end: [{}] }}",
            fill(xs),
            fill(ys),
            win_at_bound.strides,
            win_at_bound.dilations,
            pb.join(", "),
            pe.join(", ")
        )
    }

    pub fn emit_node(&self, id: NodeId) -> Result<Option<String>, CodegenError> {
        let g = self.cx.g;
        let n = g.node(id);
        let out = *n.outputs.first().ok_or_else(|| self.err(n, "no output"))?;
        let od = g.tensor_type(out).map(|t| t.dtype).ok_or_else(|| self.err(n, "output has no type"))?;
        let f32_only = |what: &str| -> Result<(), CodegenError> {
            if od != DType::F32 {
                return Err(self.err(n, format!("{what} on {od} with bounded dims is not supported yet; pin them with --input")));
            }
            Ok(())
        };
        match &n.op {
            Op::Def(d) => Ok(Some(d.emit(&crate::ops::EmitCx::bounded(self, id))?)),
            Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Unary(UnaryOp::Identity) => {
                if self.cx.plan.aliases.contains_key(&out) {
                    return Ok(None);
                }
                Ok(Some(format!("{}.copy_from_slice({});", self.write(n, out)?, self.read(n, self.input(n, 0)?)?)))
            }
            Op::BatchNormTraining { .. } => crate::codegen::emit::norm::emit(&crate::ops::EmitCx::bounded(self, id)),
            Op::Dropout { .. } => crate::codegen::emit::emit_dropout(&crate::ops::EmitCx::bounded(self, id)),
            Op::Shrink { .. } => crate::codegen::emit::emit_shrink(&crate::ops::EmitCx::bounded(self, id)),
            Op::Elementwise(p) => {
                // Inputs of one element at the bounds have one at every size (dims of bound 1).
                let oshape = self.shape(n, out)?;
                let len = self.sizes.numel(&oshape);
                use crate::codegen::emit::ProgramInput;
                let at_bound = |v: ValueId| g.tensor_type(v).and_then(|t| t.shape.as_ref()?.numel()).unwrap_or(0);
                let mut inputs = Vec::new();
                for &v in n.inputs.iter().flatten() {
                    let period = self.sizes.numel(&self.shape(n, v)?);
                    inputs.push(ProgramInput::of(self.read(n, v)?, at_bound(v), at_bound(out), || period));
                }
                let y = self.write(n, out)?;
                Ok(Some(crate::codegen::emit::program_loop(p, &len, &inputs, &y, self.cx.plan.inplace.get(&id).copied())))
            }
            // The static emitter, with run-time sizes.
            Op::Unary(_) | Op::Binary(_) => crate::codegen::emit::emit_unary_binary(&crate::ops::EmitCx::bounded(self, id)),
            Op::Conv { group, .. } | Op::FusedConv { group, .. } => {
                f32_only("Conv")?;
                let (x, wv) = (self.input(n, 0)?, self.input(n, 1)?);
                let (xs, ys, ws) = (self.shape(n, x)?, self.shape(n, out)?, self.shape(n, wv)?);
                let (Op::Conv { window, .. } | Op::FusedConv { window, .. }) = &n.op else { unreachable!() };
                let (xb, wb) = (fixed(g, Some(x)).unwrap_or_default(), fixed(g, Some(wv)).unwrap_or_default());
                let (Some(wk), Some(xsp)) = (wb.get(2..), xb.get(2..)) else { return Err(self.err(n, "Conv needs rank at least 3")) };
                let win_b = resolve(window, wk, xsp).map_err(|e| self.err(n, e))?;
                let win = self.window(window, &win_b, &kernel_dims(window, &ws), &xs[2..], &ys[2..]);
                let d = format!(
                    "rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: {group} }}",
                    self.sizes.dim(&xs[0]),
                    self.sizes.dim(&xs[1]),
                    self.sizes.dim(&ws[0])
                );
                // The plan's scratch: `conv_scratch_bound`.
                let col_bytes = self.cx.plan.scratch.get(&id).map_or(0, |s| s.bytes);
                let col = self.cx.scratch(n, id, "f32", col_bytes / 4)?;
                let ep = match &n.op {
                    Op::FusedConv { act, .. } => format!(
                        "rt::kernels::conv::Epilogue {{ bias: {}, scale: {}, shift: {}, residual: {}, act: {} }}",
                        self.opt_read(n, 2)?,
                        self.opt_read(n, 4)?,
                        self.opt_read(n, 5)?,
                        self.opt_read(n, 3)?,
                        act_lit(*act)
                    ),
                    _ => format!("rt::kernels::conv::Epilogue::bias({})", self.opt_read(n, 2)?),
                };
                // Weights the layout stored packed (packing does not depend on the spatial dims).
                if let Some(wp) = prepacked_weights(self.cx, n)? {
                    return Ok(Some(format!(
                        "let d = {d};\nlet win = {win};\nlet ep = {ep};\n\
                         rt::kernels::conv::conv_fused_prepacked({}, {wp}, {}, &d, &win, {col}, &ep);",
                        self.read(n, x)?,
                        self.write(n, out)?
                    )));
                }
                Ok(Some(format!(
                    "let d = {d};\nlet win = {win};\nlet ep = {ep};\n\
                     rt::kernels::conv::conv_fused({}, {}, {}, &d, &win, {col}, &rt::kernels::conv::Sgemm, &ep);",
                    self.read(n, x)?,
                    self.read(n, wv)?,
                    self.write(n, out)?
                )))
            }
            // The static emitter, with run-time sizes.
            Op::Pool { .. } | Op::GlobalPool { .. } | Op::Gemm { .. } | Op::MatMul | Op::Softmax { .. } | Op::ScaleShift { .. }
            | Op::BatchNorm { .. } | Op::Lrn { .. } | Op::Reduce { .. } => crate::codegen::emit::emit_layer(&crate::ops::EmitCx::bounded(self, id)),
            Op::Concat { .. } | Op::Transpose { .. } | Op::Gather { .. } | Op::Expand | Op::ConstantOfShape { .. } => {
                crate::codegen::emit::emit_movement(&crate::ops::EmitCx::bounded(self, id))
            }
            Op::Scan { .. } => crate::codegen::emit::control::emit_scan(&crate::ops::EmitCx::bounded(self, id)),
            _ => Err(self.unsupported(n)),
        }
    }
}
