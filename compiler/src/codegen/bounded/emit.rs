//! Emitters for nodes whose shapes depend on bounded dims: the same runtime kernels as the
//! static emitters, with sizes read from the run-time table `sz` instead of literals. Here:
//! the helpers, the dispatch and the compute ops; data movement is in `data.rs`, recurrent
//! ops in `rnn.rs`. Ops not listed are an error naming the node ("pin
//! the dims with --input").
use super::Sizes;
use crate::codegen::emit::Ctx;
use crate::codegen::{CodegenError, Lowering};
use crate::interp::ops::nn::geom::resolve;
use crate::ir::{AutoPad, DType, DimExpr, Graph, Node, NodeId, Op, PoolKind, UnaryOp, ValueId, ValueKind, Window};
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

pub(super) fn f32_lit(v: f32) -> String {
    crate::codegen::emit::f32_lit(v)
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

    pub(super) fn dims(&self, n: &Node, v: ValueId) -> Result<Vec<String>, CodegenError> {
        Ok(self.shape(n, v)?.iter().map(|d| self.sizes.dim(d)).collect())
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

    /// A `Window3` literal: the static geometry at the bounds with the spatial input and output
    /// sizes from the run-time table.
    fn window(&self, w: &Window, win_at_bound: &Window3, xs: &[DimExpr], ys: &[DimExpr]) -> String {
        let k = xs.len();
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
                let dk = ((win_at_bound.kernel[j] - 1) * win_at_bound.dilations[j] + 1) as i64;
                let pads = (win_at_bound.pads_begin[j] + win_at_bound.pads_end[j]) as i64;
                let _ = self.sizes.dim(&x.add(&DimExpr::constant(pads - dk + 1)));
            }
        }
        if matches!(w.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
            // SAME pads depend on the size: total = (out − 1)·s + dk − len, split as geom::resolve.
            for i in 0..k {
                let j = 3 - k + i;
                let dk = (win_at_bound.kernel[j] - 1) * win_at_bound.dilations[j] + 1;
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
            "rt::kernels::window::Window3 {{ input: {}, output: {}, kernel: {:?}, strides: {:?}, dilations: {:?}, pads_begin: [{}], pads_end: [{}] }}",
            fill(xs),
            fill(ys),
            win_at_bound.kernel,
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
            Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Unary(UnaryOp::Identity) | Op::Dropout { training: false, .. } => {
                if self.cx.plan.aliases.contains_key(&out) {
                    return Ok(None);
                }
                Ok(Some(format!("{}.copy_from_slice({});", self.write(n, out)?, self.read(n, self.input(n, 0)?)?)))
            }
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
                let win = self.window(window, &win_b, &xs[2..], &ys[2..]);
                let d = format!(
                    "rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: {group} }}",
                    self.sizes.dim(&xs[0]),
                    self.sizes.dim(&xs[1]),
                    self.sizes.dim(&ws[0])
                );
                let col_bytes = conv_scratch_at_bound(g, id, self.cx.lowering).unwrap_or(0);
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
            Op::Pool { kind, window, storage_order } => {
                if !od.is_float() && !matches!(kind, PoolKind::Max) {
                    return Err(self.err(n, format!("{kind:?} pooling on {od} is not supported by codegen yet")));
                }
                if n.outputs.get(1).is_some_and(|iv| self.cx.plan.slots.contains_key(iv)) {
                    return Err(self.err(n, "MaxPool's indices with bounded dims are not supported yet; pin them with --input"));
                }
                let x = self.input(n, 0)?;
                let (xs, ys) = (self.shape(n, x)?, self.shape(n, out)?);
                let xb = fixed(g, Some(x)).unwrap_or_default();
                let xsp = xb.get(2..).ok_or_else(|| self.err(n, "pooling needs rank at least 3"))?;
                let win_b = resolve(window, &window.kernel_shape, xsp).map_err(|e| self.err(n, e))?;
                let win = self.window(window, &win_b, &xs[2..], &ys[2..]);
                let planes = self.sizes.numel(&xs[..2]);
                let (rx, y) = (self.read(n, x)?, self.write(n, out)?);
                Ok(Some(match kind {
                    PoolKind::Max => format!("let win = {win}; rt::kernels::pool::max_pool({rx}, {planes}, &win, {y}, None, {});", *storage_order != 0),
                    PoolKind::Avg { count_include_pad } => {
                        format!("let win = {win}; rt::kernels::pool::avg_pool({rx}, {planes}, &win, {y}, {count_include_pad});")
                    }
                    PoolKind::Lp { p } => format!("let win = {win}; rt::kernels::pool::lp_pool({rx}, {planes}, &win, {y}, {});", crate::codegen::emit::f64_lit(*p as f64)),
                }))
            }
            Op::GlobalPool { kind } => {
                f32_only("GlobalPool")?;
                let x = self.input(n, 0)?;
                let xs = self.shape(n, x)?;
                let (code, p) = match kind {
                    PoolKind::Max => (0, 0.0),
                    PoolKind::Avg { .. } => (1, 0.0),
                    PoolKind::Lp { p } => (2, *p as f64),
                };
                Ok(Some(format!(
                    "rt::kernels::pool::global_pool({}, {}, {}, {}, {code}, {});",
                    self.read(n, x)?,
                    self.sizes.numel(&xs[..2]),
                    self.sizes.numel(&xs[2..]),
                    self.write(n, out)?,
                    crate::codegen::emit::f64_lit(p)
                )))
            }
            Op::Gemm { alpha, beta, trans_a, trans_b } => {
                f32_only("Gemm")?;
                let (a, b) = (self.input(n, 0)?, self.input(n, 1)?);
                let (ash, osh) = (self.dims(n, a)?, self.dims(n, out)?);
                let (m, k) = if *trans_a { (&ash[1], &ash[0]) } else { (&ash[0], &ash[1]) };
                let nn = &osh[1];
                let la = if *trans_a { layout("1usize", m) } else { layout(k, "1usize") };
                let lb = if *trans_b { layout("1usize", k) } else { layout(nn, "1usize") };
                // As the static emitter (and the interpreter): A @ B, then alpha, then beta·C.
                let mut s = format!(
                    "let (m, k, nn) = ({m}, {k}, {nn});\nlet y = {};\nrt::kernels::gemm::sgemm(m, k, nn, 1.0, {}, {la}, {}, {lb}, 0.0, y, rt::kernels::gemm::Layout {{ row_stride: nn as isize, col_stride: 1 }});\n",
                    self.write(n, out)?,
                    self.read(n, a)?,
                    self.read(n, b)?
                );
                if *alpha != 1.0 {
                    s += &format!("for v in y.iter_mut() {{ *v = *v * {}; }}\n", f32_lit(*alpha));
                }
                if let Some(c) = n.inputs.get(2).copied().flatten() {
                    let cs = self.shape(n, c)?;
                    let os = self.shape(n, out)?;
                    let st = self.bcast_strides(&cs, &os);
                    let scaled = if *beta == 1.0 { "c[i * s0 + j * s1]".to_string() } else { format!("c[i * s0 + j * s1] * {}", f32_lit(*beta)) };
                    s += &format!(
                        "let c = {}; let (s0, s1) = ({}, {}); for i in 0..m {{ for j in 0..nn {{ y[i * nn + j] = y[i * nn + j] + {scaled}; }} }}\n",
                        self.read(n, c)?,
                        st[0],
                        st[1]
                    );
                }
                Ok(Some(s))
            }
            Op::MatMul => {
                f32_only("MatMul")?;
                let (a, b) = (self.input(n, 0)?, self.input(n, 1)?);
                let (ash, bsh, osh) = (self.shape(n, a)?, self.shape(n, b)?, self.shape(n, out)?);
                let r = osh.len();
                let (m, k, nn) = (self.sizes.dim(&ash[ash.len() - 2]), self.sizes.dim(&ash[ash.len() - 1]), self.sizes.dim(&bsh[bsh.len() - 1]));
                let batch = &osh[..r - 2];
                let sa = self.bcast_strides(&ash[..ash.len() - 2], batch);
                let sb = self.bcast_strides(&bsh[..bsh.len() - 2], batch);
                let bd: Vec<String> = batch.iter().map(|d| self.sizes.dim(d)).collect();
                Ok(Some(format!(
                    "let (a, b, y) = ({}, {}, {});\nlet (m, k, nn) = ({m}, {k}, {nn});\n\
                     let bd: [usize; {nb}] = [{}]; let sa: [usize; {nb}] = [{}]; let sb: [usize; {nb}] = [{}];\n\
                     for bi in 0..bd.iter().product::<usize>() {{\n\
                       let (mut rem, mut oa, mut ob) = (bi, 0usize, 0usize);\n\
                       for d in (0..{nb}).rev() {{ let ix = rem % bd[d]; rem /= bd[d]; oa += ix * sa[d]; ob += ix * sb[d]; }}\n\
                       let (oa, ob) = (oa * m * k, ob * k * nn);\n\
                       rt::kernels::gemm::sgemm(m, k, nn, 1.0, &a[oa..oa + m * k], {}, &b[ob..ob + k * nn], {}, 0.0, &mut y[bi * m * nn..(bi + 1) * m * nn], {});\n\
                     }}",
                    self.read(n, a)?,
                    self.read(n, b)?,
                    self.write(n, out)?,
                    bd.join(", "),
                    sa.join(", "),
                    sb.join(", "),
                    layout("k", "1usize"),
                    layout("nn", "1usize"),
                    layout("nn", "1usize"),
                    nb = batch.len()
                )))
            }
            Op::Softmax { axis, log, coerce_2d } => {
                f32_only("Softmax")?;
                let os = self.shape(n, out)?;
                let r = os.len() as i64;
                let ax = if *axis < 0 { axis + r } else { *axis };
                if ax < 0 || ax >= r.max(1) {
                    return Err(self.err(n, format!("axis {axis} out of range")));
                }
                let ax = ax as usize;
                let outer = self.sizes.numel(&os[..ax]);
                let (nn, inner) = if *coerce_2d { (self.sizes.numel(&os[ax..]), "1usize".to_string()) } else { (self.sizes.dim(&os[ax]), self.sizes.numel(&os[ax + 1..])) };
                Ok(Some(format!(
                    "rt::kernels::softmax::softmax({}, {outer}, {nn}, {inner}, {}, {log});",
                    self.read(n, self.input(n, 0)?)?,
                    self.write(n, out)?
                )))
            }
            // BatchNormalization (with its activation) as fusion rewrote it when it could not fold
            // it into a conv: per-channel scale and shift over run-time batch and plane.
            Op::ScaleShift { act } => {
                f32_only("ScaleShift")?;
                let x = self.input(n, 0)?;
                let xs = self.shape(n, x)?;
                if xs.len() < 2 {
                    return Err(self.err(n, "ScaleShift needs rank at least 2"));
                }
                let (sc, sh) = (self.input(n, 1)?, self.input(n, 2)?);
                Ok(Some(format!(
                    "rt::kernels::norm::scale_shift({}, {}, {}, {}, {}, {}, {}, {}, {}, {});",
                    self.read(n, x)?,
                    self.write(n, out)?,
                    self.sizes.dim(&xs[0]),
                    self.sizes.dim(&xs[1]),
                    self.sizes.numel(&xs[2..]),
                    self.read(n, sc)?,
                    self.read(n, sh)?,
                    self.opt_read(n, 3)?,
                    self.opt_read(n, 4)?,
                    act_lit(*act)
                )))
            }
            // Inference BatchNormalization that fusion could not fold into a conv (e.g. after a
            // separate bias Add): the same per-channel kernel with run-time batch and plane.
            Op::BatchNorm { epsilon } => {
                f32_only("BatchNormalization")?;
                let x = self.input(n, 0)?;
                let xs = self.shape(n, x)?;
                if xs.len() < 2 {
                    return Err(self.err(n, "BatchNormalization needs rank at least 2"));
                }
                let args: Vec<String> = (1..5).map(|i| self.input(n, i).and_then(|v| self.read(n, v))).collect::<Result<_, _>>()?;
                Ok(Some(format!(
                    "rt::kernels::norm::batch_norm({}, {}, {}, {}, {}, {}, {}, {}, {}, {:?}_f64);",
                    self.read(n, x)?,
                    self.write(n, out)?,
                    self.sizes.dim(&xs[0]),
                    self.sizes.dim(&xs[1]),
                    self.sizes.numel(&xs[2..]),
                    args[0],
                    args[1],
                    args[2],
                    args[3],
                    *epsilon as f64
                )))
            }
            Op::Transpose { .. } => self.transpose(n, out, od),
            Op::Gather { .. } => self.gather(n, out),
            Op::Reduce { op, axes, noop_with_empty_axes, .. } => {
                let x = self.input(n, 0)?;
                if self.cx.ty(n, x)?.0 == DType::Bool {
                    return Err(self.err(n, "reductions over bool are not supported by codegen yet"));
                }
                let xs = self.shape(n, x)?;
                let axes: Vec<i64> = match axes {
                    Some(a) => a.clone(),
                    None => match n.inputs.get(1).copied().flatten() {
                        Some(v) => self.cx.konst(v).and_then(|t| t.to_i64_vec()).ok_or_else(|| self.err(n, "axes must be a constant"))?,
                        None => vec![],
                    },
                };
                let (rx, y) = (self.read(n, x)?, self.write(n, out)?);
                if axes.is_empty() && *noop_with_empty_axes {
                    return Ok(Some(format!("{y}.copy_from_slice({rx});")));
                }
                let mut ax: Vec<usize> = if axes.is_empty() { (0..xs.len()).collect() } else { axes.iter().map(|&a| norm(a, xs.len())).collect::<Result<_, _>>().map_err(|e| self.err(n, e))? };
                ax.sort_unstable();
                ax.dedup();
                let (lo, hi) = (ax[0], ax[ax.len() - 1]);
                if hi - lo + 1 != ax.len() {
                    return Err(self.err(n, "a reduction over non-adjacent axes with bounded dims is not supported yet; pin them with --input"));
                }
                let kind = crate::interp::ops::reduce::kind(*op);
                Ok(Some(format!(
                    "rt::kernels::reduce::reduce(rt::kernels::reduce::ReduceKind::{kind:?}, {rx}, {}, {}, {}, {y});",
                    self.sizes.numel(&xs[..lo]),
                    self.sizes.numel(&xs[lo..=hi]),
                    self.sizes.numel(&xs[hi + 1..])
                )))
            }
            Op::Slice => self.slice(n, out, od),
            Op::ConstantOfShape { value } => {
                f32_only("ConstantOfShape")?;
                let v = value.to_f64_vec().first().copied().unwrap_or(0.0) as f32;
                Ok(Some(format!("{}.fill({});", self.write(n, out)?, f32_lit(v))))
            }
            Op::Concat { .. } => self.concat(n, out),
            Op::Expand => self.expand(n, out, od),
            _ => Err(self.unsupported(n)),
        }
    }

    /// numpy-broadcast strides of `shape` against `out` as `usize` expressions (0 on
    /// broadcast dims, which are the constant 1).
    pub(super) fn bcast_strides(&self, shape: &[DimExpr], out: &[DimExpr]) -> Vec<String> {
        let r = out.len();
        let one = DimExpr::constant(1);
        let mut st = vec!["0usize".to_string(); r];
        let mut acc: Vec<String> = Vec::new();
        for i in (0..r).rev() {
            let j = (i + shape.len()).checked_sub(r);
            let d = j.map(|j| &shape[j]).unwrap_or(&one);
            if *d == one && out[i] != one {
                st[i] = "0usize".into();
            } else {
                st[i] = if acc.is_empty() { "1usize".into() } else { format!("({})", acc.join(" * ")) };
            }
            if j.is_some() {
                acc.push(self.sizes.dim(d));
            }
        }
        st
    }
}

pub(super) fn norm(a: i64, r: usize) -> Result<usize, String> {
    let v = if a < 0 { a + r as i64 } else { a };
    if v < 0 || v >= r as i64 {
        return Err(format!("axis {a} out of range for rank {r}"));
    }
    Ok(v as usize)
}

fn layout(row: &str, col: &str) -> String {
    format!("rt::kernels::gemm::Layout {{ row_stride: ({row}) as isize, col_stride: ({col}) as isize }}")
}

