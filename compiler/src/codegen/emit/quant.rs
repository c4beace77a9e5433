//! Integer products (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv): calls into
//! burnc_runtime::kernels::quant with the geometry and checks the interpreter uses.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::interp::ops::qint::{self, QConv};
use crate::ir::{DType, Graph, Node, NodeId, Op, ValueId};
use crate::ops::quant::is_qint;

const K: &str = "rt::kernels::quant";

/// A value's dtype and static shape.
type Ty = (DType, Vec<usize>);

fn fixed(g: &Graph, v: Option<ValueId>) -> Option<(DType, Vec<usize>)> {
    let t = g.tensor_type(v?)?;
    Some((t.dtype, t.shape.as_ref()?.as_fixed()?))
}

/// Scratch: QLinearMatMul's i32 product.
pub fn scratch_bytes(g: &Graph, id: NodeId) -> usize {
    let n = g.node(id);
    match &n.op {
        Op::QLinearMatMul => fixed(g, n.outputs.first().copied()).map_or(0, |(_, s)| s.iter().product::<usize>() * 4),
        _ => 0,
    }
}

fn conv_lit(g: &QConv) -> String {
    format!(
        "&{K}::ConvGeom {{ nb: {}, c: {}, m: {}, group: {}, ins: &{:?}, outs: &{:?}, ks: &{:?}, strides: &{:?}, dil: &{:?}, pad_begin: &{:?} }}",
        g.nb, g.c, g.m, g.group, g.ins, g.outs, g.ks, g.strides, g.dil, g.pad_begin
    )
}

/// Optional input `i`: its type and a read expression (`&[]` when absent).
fn opt(cx: &Ctx, n: &Node, i: usize) -> Result<(Option<Ty>, String), CodegenError> {
    match n.inputs.get(i).copied().flatten() {
        Some(v) => Ok((Some(cx.ty(n, v)?), cx.read(n, v)?)),
        None => Ok((None, "&[]".into())),
    }
}

/// Required input `i`: its type and a read expression.
fn req(cx: &Ctx, n: &Node, i: usize) -> Result<(Ty, String), CodegenError> {
    let v = cx.input(n, i)?;
    Ok((cx.ty(n, v)?, cx.read(n, v)?))
}

fn sd(t: &Ty) -> (&[usize], DType) {
    (&t.1, t.0)
}

/// Scales of QLinearMatMul / QLinearConv must share a float type (one kernel type parameter).
fn same_scales(cx: &Ctx, n: &Node, s: &[&Ty]) -> Result<DType, CodegenError> {
    let d = s[0].0;
    if !d.is_float() || s.iter().any(|t| t.0 != d) {
        return Err(cx.err(n, "scales of different or non-float types are not supported by codegen"));
    }
    Ok(d)
}

pub fn emit(cx: &Ctx, id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let (od, _) = cx.ty(n, out)?;
    let e = |m: String| cx.err(n, m);
    match &n.op {
        Op::MatMulInteger => {
            let ((a, ra), (b, rb)) = (req(cx, n, 0)?, req(cx, n, 1)?);
            let ((az, raz), (bz, rbz)) = (opt(cx, n, 2)?, opt(cx, n, 3)?);
            let g = qint::mm_checked(sd(&a), sd(&b), az.as_ref().map(sd), bz.as_ref().map(sd)).map_err(e)?;
            let (ta, tb) = (cx.table(&g.a_base), cx.table(&g.b_base));
            let y = cx.write(n, out)?;
            Ok(Some(format!("{K}::matmul_integer({ra}, {rb}, {raz}, {rbz}, {ta}, {tb}, {}, {}, {}, {y});", g.m, g.k, g.n)))
        }
        Op::QLinearMatMul => {
            let ((a, ra), (a_s, ras), (az, raz)) = (req(cx, n, 0)?, req(cx, n, 1)?, opt(cx, n, 2)?);
            let ((b, rb), (b_s, rbs), (bz, rbz)) = (req(cx, n, 3)?, req(cx, n, 4)?, opt(cx, n, 5)?);
            let ((y_s, rys), (yz, ryz)) = (req(cx, n, 6)?, opt(cx, n, 7)?);
            let g = qint::mm_checked(sd(&a), sd(&b), az.as_ref().map(sd), bz.as_ref().map(sd)).map_err(e)?;
            let chk = || -> Result<(), String> {
                qint::check_scale(&a_s.1, g.m, "a_scale")?;
                qint::check_scale(&b_s.1, g.n, "b_scale")?;
                qint::check_scale(&y_s.1, 1, "y_scale")?;
                yz.as_ref().map_or(Ok(()), |z| qint::check_scale(&z.1, 1, "y_zero_point"))
            };
            chk().map_err(e)?;
            let prec = qint::scale_prec(same_scales(cx, n, &[&a_s, &b_s, &y_s])?);
            if od != qint::qlinear_out(a.0, yz.as_ref().map(|z| z.0)) || !is_qint(od) {
                return Err(e(format!("QLinearMatMul output type {od} does not fit its inputs")));
            }
            let len: usize = g.shape.iter().product();
            let (ta, tb) = (cx.table(&g.a_base), cx.table(&g.b_base));
            let (acc, y) = (cx.scratch(n, id, "i32", len)?, cx.write(n, out)?);
            let (m, k, nn) = (g.m, g.k, g.n);
            Ok(Some(format!(
                "let acc = {acc};\n{K}::matmul_integer({ra}, {rb}, {raz}, {rbz}, {ta}, {tb}, {m}, {k}, {nn}, &mut acc[..]);\n\
                 {K}::qlinear_matmul_requant(acc, {ras}, {rbs}, {rys}, {ryz}, {K}::ScalePrec::{prec:?}, {m}, {nn}, {y});"
            )))
        }
        Op::ConvInteger { window, group } => {
            let ((x, rx), (w, rw)) = (req(cx, n, 0)?, req(cx, n, 1)?);
            let ((xz, rxz), (wz, rwz)) = (opt(cx, n, 2)?, opt(cx, n, 3)?);
            let g = qint::conv_checked(sd(&x), sd(&w), xz.as_ref().map(sd), wz.as_ref().map(sd), window, *group).map_err(e)?;
            let y = cx.write(n, out)?;
            Ok(Some(format!("{K}::conv_integer_i32({rx}, {rw}, {rxz}, {rwz}, {}, {y});", conv_lit(&g))))
        }
        Op::QLinearConv { window, group } => {
            let ((x, rx), (x_s, rxs), (xz, rxz)) = (req(cx, n, 0)?, req(cx, n, 1)?, opt(cx, n, 2)?);
            let ((w, rw), (w_s, rws), (wz, rwz)) = (req(cx, n, 3)?, req(cx, n, 4)?, opt(cx, n, 5)?);
            let ((y_s, rys), (yz, ryz)) = (req(cx, n, 6)?, opt(cx, n, 7)?);
            let (bias, rb) = opt(cx, n, 8)?;
            let g = qint::conv_checked(sd(&x), sd(&w), xz.as_ref().map(sd), wz.as_ref().map(sd), window, *group).map_err(e)?;
            qint::qconv_params(&g, &x_s.1, &w_s.1, &y_s.1, yz.as_ref().map(|z| &z.1[..]), bias.as_ref().map(sd)).map_err(e)?;
            let prec = qint::scale_prec(same_scales(cx, n, &[&x_s, &w_s, &y_s])?);
            if od != qint::qlinear_out(x.0, yz.as_ref().map(|z| z.0)) || !is_qint(od) {
                return Err(e(format!("QLinearConv output type {od} does not fit its inputs")));
            }
            let y = cx.write(n, out)?;
            Ok(Some(format!(
                "{K}::qlinear_conv({rx}, {rw}, {rxz}, {rwz}, {rb}, {rxs}, {rws}, {rys}, {ryz}, {K}::ScalePrec::{prec:?}, {}, {y});",
                conv_lit(&g)
            )))
        }
        _ => Err(cx.err(n, "not a quantization op")),
    }
}
