//! Softmax, LogSoftmax and Hardmax: rows along one axis, the input viewed as `[outer, len,
//! inner]` around it (or, with `coerce_2d`, the opset < 13 form, every dim from the axis on as
//! one row). The view is [`rows`], which the shape rule, the interpreter and every emitter use.
use super::{around, input, product, view_sizes, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::wide::{is_half, narrow, widen};
use crate::codegen::CodegenError;
use crate::interp::ops::norm::float::{by_precision, Work};
use crate::ir::axis::norm_axis_or_scalar;
use crate::ir::{DType, DimExpr, Op, UnaryOp, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::softmax as k;

/// `[outer, len, inner]` of an input of dims `xs` around `axis`.
fn rows(xs: &[DimExpr], axis: i64, coerce_2d: bool) -> R<[DimExpr; 3]> {
    if xs.is_empty() {
        return Err("softmax-like ops need an input of rank >= 1".into());
    }
    let a = norm_axis_or_scalar(axis, xs.len())?;
    Ok(if coerce_2d { [product(&xs[..a]), product(&xs[a..]), DimExpr::constant(1)] } else { around(xs, a) })
}

/// [`rows`] of a fixed shape.
fn fixed_rows(shape: &[usize], axis: i64, coerce_2d: bool) -> R<(usize, usize, usize)> {
    let dims: Vec<DimExpr> = shape.iter().map(|&d| DimExpr::constant(d as i64)).collect();
    let [outer, len, inner] = rows(&dims, axis, coerce_2d)?;
    Ok((super::fixed_size(&outer)?, super::fixed_size(&len)?, super::fixed_size(&inner)?))
}

/// Output 0 typed and shaped like input 0, whose rows must exist.
fn like_x(cx: &ShapeCx, axis: i64, coerce_2d: bool) -> R<Vec<OutType>> {
    let x = cx.arg(0)?;
    if let Some(xs) = &x.dims {
        rows(xs, axis, coerce_2d)?;
    }
    Ok(vec![OutType { dtype: x.dtype, dims: x.dims.clone() }])
}

/// Softmax (`log`: LogSoftmax) over `axis`; `coerce_2d` is the opset < 13 semantics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Softmax {
    pub axis: i64,
    pub log: bool,
    pub coerce_2d: bool,
}

impl Softmax {
    /// The op over the last axis (attention's scores).
    pub fn last() -> Softmax {
        Softmax { axis: -1, log: false, coerce_2d: false }
    }
}

/// Whether `op` is a Softmax (not LogSoftmax) over the last axis of an input of rank `rank`
/// (the attention matchers).
pub fn is_last_axis_softmax(op: &Op, rank: usize) -> bool {
    matches!(op, Op::Def(d) if d.get::<Softmax>().is_some_and(|s| !s.log && norm_axis_or_scalar(s.axis, rank).ok() == Some(rank.wrapping_sub(1))))
}

impl OpDef for Softmax {
    name!("Softmax");
    none_of!(in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        like_x(cx, self.axis, self.coerce_2d)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let (outer, n, inner) = fixed_rows(&x.shape, self.axis, self.coerce_2d)?;
        // f16/bf16 Softmax rounds step by step as the reference does (LogSoftmax stays in f32).
        match &x.data {
            Data::F16(xs) if !self.log => {
                let mut y = vec![half::f16::ZERO; xs.len()];
                k::softmax_stepped(xs, outer, n, inner, &mut y, false);
                return Ok(vec![Tensor::new(x.shape.clone(), Data::F16(y))]);
            }
            Data::BF16(xs) if !self.log => {
                let mut y = vec![half::bf16::ZERO; xs.len()];
                k::softmax_stepped(xs, outer, n, inner, &mut y, true);
                return Ok(vec![Tensor::new(x.shape.clone(), Data::BF16(y))]);
            }
            _ => {}
        }
        fn go<W: Work>(x: &Tensor, outer: usize, n: usize, inner: usize, log: bool) -> R<Tensor> {
            let xs = W::view(x);
            let mut y = vec![W::default(); xs.len()];
            k::softmax(&xs, outer, n, inner, &mut y, log);
            Ok(Tensor::new(x.shape.clone(), W::into_data(y, x.dtype())))
        }
        Ok(vec![by_precision!(x.dtype(), "Softmax", go(x, outer, n, inner, self.log))?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let out = cx.output(0)?;
        let od = cx.dtype_among(out, &[DType::F32, DType::F64, DType::F16, DType::BF16])?;
        let view = rows(&cx.dims(out)?, self.axis, self.coerce_2d).map_err(|e| cx.err(e))?;
        let sizes = view_sizes(cx, &view)?;
        let (rx, y, log) = (cx.read(cx.input(0)?)?, cx.write(out)?, self.log);
        if !is_half(od) {
            return Ok(format!("rt::kernels::softmax::softmax({rx}, {sizes}, {y}, {log});"));
        }
        if !log {
            // As the interpreter: rounded to the storage type step by step.
            let sum_in_t = od == DType::BF16;
            return Ok(format!("rt::kernels::softmax::softmax_stepped({rx}, {sizes}, {y}, {sum_in_t});"));
        }
        // As the interpreter: in f32, rounded once at the end.
        let len = cx.numel(out)?;
        let mut s = format!("let len = {len};\nlet (xw, rest) = {}.split_at_mut(len);\nlet yw = &mut rest[..len];\n", cx.scratch(DType::F32)?);
        s += &widen("xw", &rx, "f32");
        s += &format!("rt::kernels::softmax::softmax(xw, {sizes}, yw, {log});\n");
        s += &narrow(&y, "yw", cx.elem(out)?, "f32");
        Ok(s)
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        let out = cx.output(0)?;
        let (od, oshape) = cx.ty(out)?;
        let ot = cx.c(od)?;
        // Arithmetic runs in `at` (f32 for the 16-bit floats).
        let at = cx.acc(od)?;
        let (outer, len, inner) = fixed_rows(&oshape, self.axis, self.coerce_2d).map_err(|e| cx.err(e))?;
        let (x, y) = (cx.ptr(cx.input(0)?)?, cx.ptr(out)?);
        let (exp, logf) = if at == "float" { ("expf", "logf") } else { ("exp", "log") };
        let rows = outer * inner;
        if inner == 1 {
            // Contiguous rows: a warp per row.
            let t = at;
            let fin = if self.log { format!("{y}[at + k] = ({t}){x}[at + k] - m - {logf}(s);") } else { format!("{y}[at + k] = {exp}(({t}){x}[at + k] - m) / s;") };
            let body = format!(
                "const long long at = (long long)row * {len};\n\
                 {t} m = -(1.0 / 0.0);\nfor (int k = lane; k < {len}; k += 32) {{ {t} v = {x}[at + k]; if (v > m) m = v; }}\n{}\
                 {t} s = 0;\nfor (int k = lane; k < {len}; k += 32) s += {exp}(({t}){x}[at + k] - m);\n{}\
                 for (int k = lane; k < {len}; k += 32) {fin}",
                crate::codegen::cuda::kernels::warp_reduce("m", true),
                crate::codegen::cuda::kernels::warp_reduce("s", false),
            );
            return Ok(vec![cx.warp_rows(rows, &body)]);
        }
        let fin = if self.log { format!("{y}[base + k * {inner}] = xr[k * {inner}] - m - {logf}(s);") } else { format!("{y}[base + k * {inner}] = {exp}(xr[k * {inner}] - m) / s;") };
        let body = format!(
            "long long base = (i / {inner}) * {} + i % {inner};\nconst {ot}* xr = {x} + base;\n\
             {at} m = -(1.0 / 0.0);\nfor (int k = 0; k < {len}; ++k) {{ {at} v = xr[k * {inner}]; if (v > m) m = v; }}\n\
             {at} s = 0;\nfor (int k = 0; k < {len}; ++k) s += {exp}(({at})xr[k * {inner}] - m);\n\
             for (int k = 0; k < {len}; ++k) {{ {fin} }}",
            len * inner
        );
        Ok(vec![cx.pointwise_over(rows, oshape.iter().product(), &body)])
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let od = y.dtype;
        if !crate::codegen::wgsl::scalar::is_float(od) {
            return Err(cx.err(format!("Softmax on {od} is not supported by the wgpu target")));
        }
        let (outer, len, inner) = fixed_rows(&y.shape, self.axis, self.coerce_2d).map_err(|e| cx.err(e))?;
        let at = |k: &str| format!("base + {k} * {inner}u");
        // A row of a 16-bit output must fill whole words for one invocation to write it.
        if !y.owns_words(1) && !(inner == 1 && y.owns_words(len)) {
            return Err(cx.err(format!("Softmax with a {od} output across a strided axis is not supported by the wgpu target yet")));
        }
        let fin = if self.log { format!("{} - m - log(s)", x.load(&at("k"))) } else { format!("exp({} - m) / s", x.load(&at("k"))) };
        let store = y.store_in_word(&at("k"), &fin).ok_or_else(|| cx.err("output type"))?;
        let body = format!(
            "let base = (row / {inner}u) * {}u + row % {inner}u;\n\
             var m = {};\nfor (var k = 1u; k < {len}u; k++) {{ m = max(m, {}); }}\n\
             var s = 0.0;\nfor (var k = 0u; k < {len}u; k++) {{ s += exp({} - m); }}\n\
             for (var k = 0u; k < {len}u; k++) {{ {store} }}",
            len * inner,
            x.load(&at("0u")),
            x.load(&at("k")),
            x.load(&at("k")),
        );
        Ok(vec![cx.rows(outer * inner, &body)])
    }

    /// f16 / bf16 LogSoftmax: the input widened to f32, and the f32 result.
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        match ins.first() {
            Some(Some((d, s))) if is_half(*d) && self.log => 2 * s.iter().product::<usize>() * 4,
            _ => 0,
        }
    }

    flops!(per_output 3);

    /// The Jacobian-vector product written with the forward output: `y (dy - Σ dy·y)`, and
    /// `dy - exp(y) Σ dy` for LogSoftmax.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (x, y, dy) = (cx.input(0)?, cx.output(0)?, cx.dy()?);
        let b = &mut *cx.b;
        let r = b.rank(x)?;
        let ax = crate::ir::axis::norm_axis(self.axis, r)? as i64;
        // Before opset 13 the op normalises over everything from `axis` on, jointly.
        let axes: Vec<i64> = if self.coerce_2d { (ax..r as i64).collect() } else { vec![ax] };
        let dx = if self.log {
            let s = b.reduce_sum(dy, axes, true)?;
            let p = b.node(Op::Unary(UnaryOp::Exp), &[y])?;
            let t = b.mul(p, s)?;
            b.sub(dy, t)?
        } else {
            let dyy = b.mul(dy, y)?;
            let s = b.reduce_sum(dyy, axes, true)?;
            let t = b.sub(dy, s)?;
            b.mul(y, t)?
        };
        Ok(vec![Some(dx)])
    }
}

/// Hardmax: 1 at the first largest element along the axis (or, with `coerce_2d`, over the
/// flattened trailing dims from the axis, as opset < 13), 0 elsewhere.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hardmax {
    pub axis: i64,
    pub coerce_2d: bool,
}

impl OpDef for Hardmax {
    name!("Hardmax");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        if cx.arg(0)?.dtype == DType::Bool {
            return Err("Hardmax needs a numeric input".into());
        }
        like_x(cx, self.axis, self.coerce_2d)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let (outer, n, inner) = fixed_rows(&x.shape, self.axis, self.coerce_2d)?;
        macro_rules! go {
            ($($v:ident),*) => {
                match &x.data {
                    $(Data::$v(xs) => {
                        let mut y = vec![burnc_runtime::Elem::zero(); xs.len()];
                        k::hardmax(xs, outer, n, inner, &mut y);
                        Data::$v(y)
                    })*
                    _ => return Err(format!("Hardmax needs a numeric input, got {}", x.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
        Ok(vec![Tensor::new(x.shape.clone(), data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let view = rows(&cx.dims(x)?, self.axis, self.coerce_2d).map_err(|e| cx.err(e))?;
        Ok(format!(
            "rt::kernels::softmax::hardmax({}, {}, {});",
            cx.read(x)?,
            view_sizes(cx, &view)?,
            cx.write(cx.output(0)?)?
        ))
    }

    flops!(per_input 1);

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err("Hardmax has no gradient: its output is piecewise constant".into())
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect());
    let ex = |op: OpRef| super::Example { consts: vec![], op, inputs: vec![x.clone()] };
    vec![
        ex(OpRef::new(Softmax { axis: 1, log: false, coerce_2d: false })),
        ex(OpRef::new(Softmax { axis: -1, log: true, coerce_2d: false })),
        ex(OpRef::new(Softmax { axis: 1, log: false, coerce_2d: true })),
        ex(OpRef::new(Hardmax { axis: 1, coerce_2d: false })),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::IntoOp;

    #[test]
    fn rows_follow_the_axis_and_the_old_flattening() {
        let d = |v: &[i64]| v.iter().map(|&x| DimExpr::constant(x)).collect::<Vec<_>>();
        assert_eq!(rows(&d(&[2, 3, 4]), 1, false), Ok([DimExpr::constant(2), DimExpr::constant(3), DimExpr::constant(4)]));
        assert_eq!(rows(&d(&[2, 3, 4]), -1, false), Ok([DimExpr::constant(6), DimExpr::constant(4), DimExpr::constant(1)]));
        assert_eq!(rows(&d(&[2, 3, 4]), 1, true), Ok([DimExpr::constant(2), DimExpr::constant(12), DimExpr::constant(1)]));
        assert!(rows(&d(&[2, 3]), 2, false).is_err());
        assert!(rows(&[], 0, false).is_err());
    }

    #[test]
    fn softmax_rows_sum_to_one_and_log_softmax_is_their_log() {
        let x = Tensor::from_f32s(vec![2, 3], vec![1.0, 2.0, 3.0, -1.0, 0.0, 1.0]);
        let p = Softmax { axis: 1, log: false, coerce_2d: false }.eval(&[Some(&x)]).expect("softmax");
        let l = Softmax { axis: 1, log: true, coerce_2d: false }.eval(&[Some(&x)]).expect("log softmax");
        let (p, l) = (p[0].to_f64_vec(), l[0].to_f64_vec());
        for r in 0..2 {
            let sum: f64 = p[r * 3..r * 3 + 3].iter().sum();
            assert!((sum - 1.0).abs() < 1e-6, "row {r} sums to {sum}");
        }
        for (a, b) in p.iter().zip(&l) {
            assert!((a.ln() - b).abs() < 1e-5, "{a} {b}");
        }
        // Shifting a row leaves it unchanged.
        let e0 = (1.0f64).exp() + (2.0f64).exp() + (3.0f64).exp();
        assert!((p[2] - (3.0f64).exp() / e0).abs() < 1e-6 && (p[5] - p[2]).abs() < 1e-6);
    }

    #[test]
    fn softmax_gradient_matches_finite_differences() {
        for log in [false, true] {
            for (axis, coerce_2d) in [(1, false), (-1, false), (1, true)] {
                crate::ops::testing::check_gradient(Softmax { axis, log, coerce_2d }.op(), &[&[2, 3, 4]], -2.0, 2.0);
            }
        }
    }
}
