//! Integer products: MatMulInteger `(A, B, a_zero_point?, b_zero_point?)` and ConvInteger `(x,
//! w, x_zero_point?, w_zero_point?)` in i32, QLinearMatMul `(a, a_scale, a_zero_point, b,
//! b_scale, b_zero_point, y_scale, y_zero_point)` and QLinearConv `(x, x_scale, x_zero_point, w,
//! w_scale, w_zero_point, y_scale, y_zero_point, B?)` requantized to y's type. Products and sums
//! are done in integers, floats only for scales. The geometry and checks (`interp::ops::qint`)
//! and the kernels (`kernels::quant`) serve the interpreter and generated code alike; the
//! generated calls take their batch offsets and window geometry as tables and literals, so
//! these ops compile with fixed shapes only.
use super::{input, numel, EmitCx, OpDef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::qint::{self, QConv};
use crate::ir::{AutoPad, DType, DimExpr, Graph, Node, Op, ValueKind, Window};
use crate::ops::matmul::{matmul_dims, matmul_flops};
use crate::ops::quant::is_qint;
use crate::tensor::Tensor;

use burnc_runtime::kernels::conv::ConvDims;
use burnc_runtime::kernels::qconv;
use burnc_runtime::kernels::qgemm::{self, QGemmDims};
use burnc_runtime::kernels::window::Window3;

const K: &str = "rt::kernels::quant";

/// A value's dtype and static shape.
type Ty = (DType, Vec<usize>);

fn c(v: i64) -> DimExpr {
    DimExpr::constant(v)
}

/// The dims of a convolution of input `xi` by weights `wi` (Conv's rules): `[N, M, spatial…]`,
/// X's channels declared equal to W's times `group`.
fn conv_dims(cx: &mut ShapeCx, xi: usize, wi: usize, w: &Window, group: usize) -> R<Option<Vec<DimExpr>>> {
    let xs = cx.opt(xi).and_then(|a| a.dims.clone());
    let (Some(xs), Some(ws)) = (xs.clone(), cx.opt(wi).and_then(|a| a.dims.clone())) else {
        return Ok(xs.map(|xs| xs.iter().map(|_| cx.unknown()).collect()));
    };
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(format!("input rank {} and weight rank {} do not fit a convolution", xs.len(), ws.len()));
    }
    let g = i64::try_from(group).map_err(|_| format!("group {group} is out of range"))?;
    cx.equal("X's channels and W's input channels times group", &xs[1], &ws[1].scale(g))?;
    if g > 1 {
        cx.divides("the output channels into groups", &c(g), &ws[0])?;
    }
    let kernel: Vec<DimExpr> = if w.kernel_shape.is_empty() { ws[2..].to_vec() } else { w.kernel_shape.iter().map(|&k| c(k as i64)).collect() };
    let nsp = xs.len() - 2;
    if kernel.len() != nsp {
        return Err(format!("kernel has {} dims for {nsp} spatial dims", kernel.len()));
    }
    let fill = |v: &[usize], n: usize, d: usize| if v.is_empty() { vec![d; n] } else { v.to_vec() };
    let (s, d, p) = (fill(&w.strides, nsp, 1), fill(&w.dilations, nsp, 1), fill(&w.pads, 2 * nsp, 0));
    if s.len() != nsp || d.len() != nsp || p.len() != 2 * nsp {
        return Err(format!("strides/dilations/pads do not fit {nsp} spatial dims"));
    }
    if s.contains(&0) || d.contains(&0) || kernel.iter().any(|k| k.as_const().is_some_and(|k| k < 1)) {
        return Err("kernel, strides and dilations must be positive".into());
    }
    let mut out = vec![xs[0].clone(), ws[0].clone()];
    for i in 0..nsp {
        let (x, st) = (&xs[2 + i], s[i] as i64);
        let extent = kernel[i].sub(&c(1)).scale(d[i] as i64).add(&c(1));
        out.push(match w.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => x.ceil_div(st),
            pad => {
                let padded = if pad == AutoPad::Valid { x.clone() } else { x.add(&c((p[i] + p[nsp + i]) as i64)) };
                cx.at_most(&format!("the kernel extent and the padded input along spatial dim {i}"), &extent, &padded)?;
                padded.sub(&extent).floor_div(st).add(&c(1))
            }
        });
    }
    Ok(Some(out))
}

/// QLinearMatMul's and QLinearConv's output type: y's zero point's (input 7), else u8.
fn qlinear_type(cx: &ShapeCx) -> DType {
    cx.opt(7).map_or(DType::U8, |z| z.dtype)
}

/// The first `N` inputs, each optional.
fn opt_args<'a, const N: usize>(ins: &[Option<&'a Tensor>]) -> [Option<&'a Tensor>; N] {
    std::array::from_fn(|i| ins.get(i).copied().flatten())
}

/// The node with fixed shapes (the generated calls take literal geometry and tables).
fn fixed_only(cx: &EmitCx) -> Result<(), CodegenError> {
    if cx.is_bounded() {
        return Err(cx.unsupported());
    }
    Ok(())
}

/// Required input `i`: its type and a read expression.
fn req(cx: &EmitCx, i: usize) -> Result<(Ty, String), CodegenError> {
    let v = cx.input(i)?;
    Ok((cx.ctx().ty(cx.node(), v)?, cx.read(v)?))
}

/// Optional input `i`: its type and a read expression (`&[]` when absent).
fn opt(cx: &EmitCx, i: usize) -> Result<(Option<Ty>, String), CodegenError> {
    match cx.opt_input(i) {
        Some(v) => Ok((Some(cx.ctx().ty(cx.node(), v)?), cx.read(v)?)),
        None => Ok((None, "&[]".into())),
    }
}

fn sd(t: &Ty) -> (&[usize], DType) {
    (&t.1, t.0)
}

/// The output's type, and its write expression.
fn output(cx: &EmitCx) -> Result<(DType, String), CodegenError> {
    let y = cx.output(0)?;
    Ok((cx.ctx().ty(cx.node(), y)?.0, cx.write(y)?))
}

/// Scales of QLinearMatMul / QLinearConv must share a float type (one kernel type parameter).
fn same_scales(cx: &EmitCx, s: &[&Ty]) -> Result<DType, CodegenError> {
    let d = s[0].0;
    if !d.is_float() || s.iter().any(|t| t.0 != d) {
        return Err(cx.err("scales of different or non-float types are not supported by codegen"));
    }
    Ok(d)
}

/// The geometry `runtime::kernels::qconv` takes for a QLinearConv (2-D or 1-D, one group), as
/// its `ConvDims` and `Window3`.
fn packed_geometry(g: &QConv) -> Option<(ConvDims, Window3)> {
    let end: Vec<isize> = (0..g.ins.len()).map(|i| ((g.outs[i].max(1) - 1) * g.strides[i] + (g.ks[i].max(1) - 1) * g.dil[i] + 1) as isize - (g.ins[i] + g.pad_begin[i]) as isize).collect();
    let begin: Vec<isize> = g.pad_begin.iter().map(|&p| p as isize).collect();
    let win = Window3::new(&g.ins, &g.outs, &g.ks, &g.strides, &g.dil, &begin, &end)?;
    let d = ConvDims { batch: g.nb, c_in: g.c, c_out: g.m, group: g.group };
    qconv::takes(&d, &win).then_some((d, win))
}

/// Whether QLinearConv's inputs fit the packed kernel: u8/i8 activations and outputs, i8
/// weights, f32 scales (so the f32 requantization; the shapes are `packed_geometry`'s).
fn packed_types(ins: &[Option<(DType, Vec<usize>)>]) -> bool {
    let d = |i: usize| ins.get(i).and_then(|t| t.as_ref()).map(|t| t.0);
    let q8 = |t: Option<DType>| matches!(t, Some(DType::U8 | DType::I8));
    q8(d(0)) && d(3) == Some(DType::I8) && [1, 4, 6].iter().all(|&i| d(i) == Some(DType::F32)) && (d(7).is_none() || q8(d(7)))
}

/// An integer product whose i8 weights (input 3) are packed at compile time, and the kernel's
/// geometry.
pub(crate) enum PackedQ8 {
    /// QLinearConv on `runtime::kernels::qconv`.
    Conv(ConvDims, Window3),
    /// QLinearMatMul on `runtime::kernels::qgemm`.
    MatMul(QGemmDims),
}

/// A QLinearConv or QLinearMatMul node of `g` that runs on a packed integer kernel: constant
/// i8 weights with zero points all 0 (onnxruntime's static quantizer writes them so), one
/// activation scale and zero point, and types and geometry the kernel takes. The weights
/// layout (which stores only the packed form) and the emitters ask this one question.
pub(crate) fn packed_q8(g: &Graph, n: &Node) -> Option<PackedQ8> {
    let Op::Def(def) = &n.op else { return None };
    let input = |i: usize| n.inputs.get(i).copied().flatten();
    let ins: Vec<Option<(DType, Vec<usize>)>> = (0..9).map(|i| input(i).and_then(|v| g.tensor_type(v)).and_then(|t| Some((t.dtype, t.shape.as_ref()?.as_fixed()?)))).collect();
    if !packed_types(&ins) || !matches!(g.value(input(3)?).kind, ValueKind::Param(_) | ValueKind::Const(_)) {
        return None;
    }
    if !input(5).is_none_or(|z| g.const_value(z).is_some_and(|t| t.to_f64_vec().iter().all(|&v| v == 0.0))) {
        return None;
    }
    let (x, w) = (ins[0].as_ref()?, ins[3].as_ref()?);
    if let Some(op) = def.get::<QLinearConv>() {
        let geom = qint::conv_checked((&x.1, x.0), (&w.1, w.0), None, None, &op.window, op.group).ok()?;
        return packed_geometry(&geom).map(|(d, win)| PackedQ8::Conv(d, win));
    }
    def.get::<QLinearMatMul>()?;
    // A of any rank over a 2-D B: every batch item's rows are one run of A's rows.
    let one = |i: usize| ins[i].as_ref().is_none_or(|t| t.1.iter().product::<usize>() == 1);
    let (&k, &[kb, nn]) = (x.1.last()?, &w.1[..]) else { return None };
    if k != kb || !one(1) || !one(2) {
        return None;
    }
    let d = QGemmDims { m: x.1.iter().product::<usize>() / k.max(1), k, n: nn };
    qgemm::takes(&d).then_some(PackedQ8::MatMul(d))
}

/// The packed weights of a [`packed_q8`] node.
pub(crate) fn packed_q8_weights(g: &Graph, n: &Node, p: &PackedQ8) -> Option<Vec<u8>> {
    let w: Vec<i8> = g.const_value(n.inputs.get(3).copied().flatten()?)?.to_f64_vec().iter().map(|&v| v as i8).collect();
    Some(match p {
        PackedQ8::Conv(d, win) => {
            let mut wp = vec![0u8; qconv::packed_len(d, win)];
            qconv::pack_weights(d, win, &w, &mut wp);
            wp
        }
        PackedQ8::MatMul(d) => {
            let mut wp = vec![0u8; qgemm::packed_len(d)];
            qgemm::pack_weights(d, &w, false, &mut wp);
            wp
        }
    })
}

/// The call of a [`packed_q8`] node's kernel (the weights from the layout's packed copy), or
/// `None`: the reference kernel runs. `rd`: the reads of x/a, its zero point, the bias, and the
/// x, w and y scales and y's zero point.
fn emit_packed(cx: &EmitCx, rd: [&str; 7]) -> Result<Option<String>, CodegenError> {
    let (g, n) = (cx.ctx().g, cx.node());
    let Some(p) = packed_q8(g, n) else { return Ok(None) };
    let w = cx.input(3)?;
    let stored = cx.ctx().weights.borrow().packed_q8.get(&w).copied();
    let wp = match stored {
        Some((off, len)) => format!("unsafe {{ rt::arena::weights::<u8>(w, {off}, {len}) }}"),
        None => cx.table(&packed_q8_weights(g, n, &p).ok_or_else(|| cx.err("integer weights are not constant"))?),
    };
    let [rx, rxz, rb, rxs, rws, rys, ryz] = rd;
    let y = cx.write(cx.output(0)?)?;
    Ok(Some(match p {
        PackedQ8::Conv(d, win) => {
            let scratch = cx.ctx().scratch(n, cx.id(), "u32", qconv::scratch_len(&d, &win))?;
            format!(
                "rt::kernels::qconv::qlinear_conv_prepacked({rx}, {wp}, {rxz}, {rb}, {rxs}, {rws}, {rys}, {ryz}, &rt::kernels::conv::ConvDims {{ batch: {}, c_in: {}, c_out: {}, group: 1 }}, &{}, {scratch}, {y});",
                d.batch,
                d.c_in,
                d.c_out,
                crate::codegen::emit::nn::window_lit(&win)
            )
        }
        PackedQ8::MatMul(d) => {
            let scratch = cx.ctx().scratch(n, cx.id(), "u32", qgemm::scratch_len(&d))?;
            format!(
                "rt::kernels::qgemm::qlinear_matmul_prepacked({rx}, {wp}, {rxz}, {rb}, {rxs}, {rws}, {rys}, {ryz}, &rt::kernels::qgemm::QGemmDims {{ m: {}, k: {}, n: {} }}, {scratch}, {y});",
                d.m, d.k, d.n
            )
        }
    }))
}

/// The inputs of QLinearConv and QLinearMatMul (x, x_scale, x_zero_point, w, w_scale,
/// w_zero_point, y_scale, y_zero_point, bias): their types, and their reads in that order in
/// `rd` (`&[]` for an absent one).
struct QInputs {
    x: Ty,
    x_s: Ty,
    xz: Option<Ty>,
    w: Ty,
    w_s: Ty,
    wz: Option<Ty>,
    y_s: Ty,
    yz: Option<Ty>,
    bias: Option<Ty>,
    rd: [String; 9],
}

fn qlinear_inputs(cx: &EmitCx) -> Result<QInputs, CodegenError> {
    let ((x, r0), (x_s, r1), (xz, r2)) = (req(cx, 0)?, req(cx, 1)?, opt(cx, 2)?);
    // Packed weights are stored only packed: their plain form is read only by the reference.
    let w = cx.ctx().ty(cx.node(), cx.input(3)?)?;
    let r3 = if packed_q8(cx.ctx().g, cx.node()).is_some() { String::new() } else { cx.read(cx.input(3)?)? };
    let ((w_s, r4), (wz, r5)) = (req(cx, 4)?, opt(cx, 5)?);
    let ((y_s, r6), (yz, r7)) = (req(cx, 6)?, opt(cx, 7)?);
    let (bias, r8) = opt(cx, 8)?;
    Ok(QInputs { x, x_s, xz, w, w_s, wz, y_s, yz, bias, rd: [r0, r1, r2, r3, r4, r5, r6, r7, r8] })
}

fn conv_lit(g: &QConv) -> String {
    format!(
        "&{K}::ConvGeom {{ nb: {}, c: {}, m: {}, group: {}, ins: &{:?}, outs: &{:?}, ks: &{:?}, strides: &{:?}, dil: &{:?}, pad_begin: &{:?} }}",
        g.nb, g.c, g.m, g.group, g.ins, g.outs, g.ks, g.strides, g.dil, g.pad_begin
    )
}

/// 2 FLOPs per multiply-add of a convolution whose weights are input `w`: each output takes
/// W's `C/group × kernel`.
fn conv_flops(ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>], w: usize) -> Option<u64> {
    let per = ins.get(w)?.as_ref()?.get(1..)?.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
    Some(2u64.saturating_mul(numel(outs.first()?)?).saturating_mul(per))
}

/// MatMulInteger: `(A − a_zero_point) @ (B − b_zero_point)` in i32, numpy's batching.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMulInteger;

impl OpDef for MatMulInteger {
    name!("MatMulInteger");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        Ok(vec![OutType { dtype: DType::I32, dims: matmul_dims(cx, 0, 1)? }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let [_, _, az, bz] = opt_args(ins);
        Ok(vec![qint::matmul_integer(input(ins, 0)?, input(ins, 1)?, az, bz)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        fixed_only(cx)?;
        let ((a, ra), (b, rb)) = (req(cx, 0)?, req(cx, 1)?);
        let ((az, raz), (bz, rbz)) = (opt(cx, 2)?, opt(cx, 3)?);
        let g = qint::mm_checked(sd(&a), sd(&b), az.as_ref().map(sd), bz.as_ref().map(sd)).map_err(|e| cx.err(e))?;
        let (ta, tb) = (cx.table(&g.a_base), cx.table(&g.b_base));
        let (_, y) = output(cx)?;
        Ok(format!("{K}::matmul_integer({ra}, {rb}, {raz}, {rbz}, {ta}, {tb}, {}, {}, {}, {y});", g.dims.m, g.dims.k, g.dims.n))
    }

    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        matmul_flops(ins, outs)
    }
}

/// QLinearMatMul: the integer product of the shifted a and b, requantized with
/// `a_scale · b_scale / y_scale` onto y_zero_point's type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QLinearMatMul;

impl OpDef for QLinearMatMul {
    name!("QLinearMatMul");
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        Ok(vec![OutType { dtype: qlinear_type(cx), dims: matmul_dims(cx, 0, 3)? }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![qint::qlinear_matmul(opt_args(ins))?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        fixed_only(cx)?;
        let QInputs { x: a, x_s: a_s, xz: az, w: b, w_s: b_s, wz: bz, y_s, yz, bias, rd } = qlinear_inputs(cx)?;
        let [ra, ras, raz, rb, rbs, rbz, rys, ryz, rbias] = rd;
        let e = |m: String| cx.err(m);
        let g = qint::mm_checked(sd(&a), sd(&b), az.as_ref().map(sd), bz.as_ref().map(sd)).map_err(e)?;
        let chk = || -> Result<(), String> {
            qint::check_scale(&a_s.1, g.dims.m, "a_scale")?;
            qint::check_scale(&b_s.1, g.dims.n, "b_scale")?;
            qint::check_scale(&y_s.1, 1, "y_scale")?;
            bias.as_ref().map_or(Ok(()), |b| qint::check_qmm_bias(sd(b), g.dims.n))?;
            yz.as_ref().map_or(Ok(()), |z| qint::check_scale(&z.1, 1, "y_zero_point"))
        };
        chk().map_err(e)?;
        let prec = qint::scale_prec(same_scales(cx, &[&a_s, &b_s, &y_s])?);
        let out = cx.output(0)?;
        let od = cx.ctx().ty(cx.node(), out)?.0;
        if od != qint::qlinear_out(a.0, yz.as_ref().map(|z| z.0)) || !is_qint(od) {
            return Err(e(format!("QLinearMatMul output type {od} does not fit its inputs")));
        }
        if let Some(code) = emit_packed(cx, [&ra, &raz, &rbias, &ras, &rbs, &rys, &ryz])? {
            return Ok(code);
        }
        let len: usize = g.shape.iter().product();
        let (ta, tb) = (cx.table(&g.a_base), cx.table(&g.b_base));
        let (acc, y) = (cx.ctx().scratch(cx.node(), cx.id(), "i32", len)?, cx.write(out)?);
        let (m, k, nn) = (g.dims.m, g.dims.k, g.dims.n);
        Ok(format!(
            "let acc = {acc};\n{K}::matmul_integer({ra}, {rb}, {raz}, {rbz}, {ta}, {tb}, {m}, {k}, {nn}, &mut acc[..]);\n\
             {K}::qlinear_matmul_requant(acc, {rbias}, {ras}, {rbs}, {rys}, {ryz}, {K}::ScalePrec::{prec:?}, {m}, {nn}, {y});"
        ))
    }

    /// The i32 product before requantization; where the types fit the packed kernel, at least
    /// its scratch (whether B is constant is not known from types and shapes).
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        let shape = |i: usize| ins.get(i).and_then(|t| t.as_ref()).map(|(_, s)| &s[..]);
        let (Some(a), Some(b)) = (shape(0), shape(3)) else { return 0 };
        let acc = qint::mm_geom(a, b).map_or(0, |g| g.shape.iter().product::<usize>() * 4);
        let packed = match (a.last(), b) {
            (Some(&k), &[_, n]) if packed_types(ins) => qgemm::scratch_len(&QGemmDims { m: a.iter().product::<usize>() / k.max(1), k, n }) * 4,
            _ => 0,
        };
        acc.max(packed)
    }

    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        matmul_flops(ins, outs)
    }
}

/// ConvInteger: the convolution of `x − x_zero_point` by `w − w_zero_point` in i32.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvInteger {
    pub window: Window,
    pub group: usize,
}

impl OpDef for ConvInteger {
    name!("ConvInteger");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        Ok(vec![OutType { dtype: DType::I32, dims: conv_dims(cx, 0, 1, &self.window, self.group)? }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let [_, _, xz, wz] = opt_args(ins);
        Ok(vec![qint::conv_integer(input(ins, 0)?, input(ins, 1)?, xz, wz, &self.window, self.group)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        fixed_only(cx)?;
        let ((x, rx), (w, rw)) = (req(cx, 0)?, req(cx, 1)?);
        let ((xz, rxz), (wz, rwz)) = (opt(cx, 2)?, opt(cx, 3)?);
        let g = qint::conv_checked(sd(&x), sd(&w), xz.as_ref().map(sd), wz.as_ref().map(sd), &self.window, self.group).map_err(|e| cx.err(e))?;
        let (_, y) = output(cx)?;
        Ok(format!("{K}::conv_integer_i32({rx}, {rw}, {rxz}, {rwz}, {}, {y});", conv_lit(&g)))
    }

    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        conv_flops(ins, outs, 1)
    }
}

/// QLinearConv: the integer convolution of the shifted x and w plus the i32 bias, requantized
/// with `x_scale · w_scale / y_scale` onto y_zero_point's type.
#[derive(Debug, Clone, PartialEq)]
pub struct QLinearConv {
    pub window: Window,
    pub group: usize,
}

impl OpDef for QLinearConv {
    name!("QLinearConv");
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values, gradient);

    /// The packed kernel's copy of the input (and im2col matrix) where its types and geometry
    /// fit ([`emit_packed`] may still run the reference, whose constants it checks there).
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        let shape = |i: usize| ins.get(i).and_then(|t| t.as_ref()).map(|t| (&t.1[..], t.0));
        let (Some(x), Some(w), true) = (shape(0), shape(3), packed_types(ins)) else { return 0 };
        let g = qint::conv_checked(x, w, None, None, &self.window, self.group).ok();
        g.and_then(|g| packed_geometry(&g)).map_or(0, |(d, win)| qconv::scratch_len(&d, &win) * 4)
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        Ok(vec![OutType { dtype: qlinear_type(cx), dims: conv_dims(cx, 0, 3, &self.window, self.group)? }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![qint::qlinear_conv(opt_args(ins), &self.window, self.group)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        fixed_only(cx)?;
        let QInputs { x, x_s, xz, w, w_s, wz, y_s, yz, bias, rd } = qlinear_inputs(cx)?;
        let [rx, rxs, rxz, rw, rws, rwz, rys, ryz, rb] = rd;
        let e = |m: String| cx.err(m);
        let g = qint::conv_checked(sd(&x), sd(&w), xz.as_ref().map(sd), wz.as_ref().map(sd), &self.window, self.group).map_err(e)?;
        qint::qconv_params(&g, &x_s.1, &w_s.1, &y_s.1, yz.as_ref().map(|z| &z.1[..]), bias.as_ref().map(sd)).map_err(e)?;
        let prec = qint::scale_prec(same_scales(cx, &[&x_s, &w_s, &y_s])?);
        let (od, y) = output(cx)?;
        if od != qint::qlinear_out(x.0, yz.as_ref().map(|z| z.0)) || !is_qint(od) {
            return Err(e(format!("QLinearConv output type {od} does not fit its inputs")));
        }
        if let Some(code) = emit_packed(cx, [&rx, &rxz, &rb, &rxs, &rws, &rys, &ryz])? {
            return Ok(code);
        }
        Ok(format!(
            "{K}::qlinear_conv({rx}, {rw}, {rxz}, {rwz}, {rb}, {rxs}, {rws}, {rys}, {ryz}, {K}::ScalePrec::{prec:?}, {}, {y});",
            conv_lit(&g)
        ))
    }

    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        conv_flops(ins, outs, 3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Data;

    /// QLinearMatMul's input 8 (burnc's QGemm form): the bias joins the integer sum before the
    /// one requantization, per column; a bias of the wrong length is refused.
    #[test]
    fn qlinear_matmul_adds_its_bias_before_requantizing() {
        let a = Tensor::new(vec![2, 3], Data::U8(vec![0, 7, 200, 255, 3, 90]));
        let b = Tensor::new(vec![3, 2], Data::I8(vec![-128, 5, 127, -9, 33, 64]));
        let (az, yz) = (Tensor::new(vec![], Data::U8(vec![3])), Tensor::new(vec![], Data::U8(vec![10])));
        let (a_s, b_s, y_s) = (Tensor::from_f32s(vec![], vec![0.1]), Tensor::from_f32s(vec![2], vec![0.2, 0.05]), Tensor::from_f32s(vec![], vec![0.3]));
        let bias = Tensor::new(vec![2], Data::I32(vec![100, -2500]));
        fn with<'t>(base: [Option<&'t Tensor>; 8], bias: Option<&'t Tensor>) -> Vec<Option<&'t Tensor>> {
            base.into_iter().chain([bias]).collect()
        }
        let base = [Some(&a), Some(&a_s), Some(&az), Some(&b), Some(&b_s), None, Some(&y_s), Some(&yz)];
        let args = |bias| with(base, bias);
        let y = QLinearMatMul.eval(&args(Some(&bias))).expect("eval");
        let (av, bv) = ([0i64, 7, 200, 255, 3, 90], [-128i64, 5, 127, -9, 33, 64]);
        let want: Vec<f64> = (0..4)
            .map(|i| {
                let (r, c) = (i / 2, i % 2);
                let acc: i64 = (0..3).map(|t| (av[r * 3 + t] - 3) * bv[t * 2 + c]).sum::<i64>() + [100, -2500][c];
                let mult = 0.1f32 * [0.2f32, 0.05][c] / 0.3f32;
                ((acc as f32 * mult).round_ties_even() as f64 + 10.0).clamp(0.0, 255.0)
            })
            .collect();
        assert_eq!(y[0].to_f64_vec(), want);
        let unbiased = QLinearMatMul.eval(&args(None)).expect("eval");
        assert_ne!(unbiased[0].to_f64_vec(), want, "the bias changes the result");
        let short = Tensor::new(vec![1], Data::I32(vec![1]));
        assert!(QLinearMatMul.eval(&args(Some(&short))).is_err());
    }
}
