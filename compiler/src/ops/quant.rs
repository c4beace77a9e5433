//! Linear quantization: QuantizeLinear `(x, scale, zero_point?)`, DequantizeLinear and
//! DynamicQuantizeLinear, through `kernels::quant`. Scales (and zero points) are per tensor (one
//! element), per axis (1-D along `axis`) or blocked (x's rank, `block_size` elements per scale
//! along `axis`); the shape rule declares which dims must agree. Integer targets round half to
//! even and saturate; float8 and 4-bit targets go through `rt::small`.
use super::{input, numel, EmitCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::float8;
use crate::interp::ops::cast::cast;
use crate::interp::ops::quant::{from_ints, int_range, ints, is_small_quant};
use crate::ir::axis::norm_axis_or_scalar;
use crate::ir::{DType, DimExpr, Op};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::quant::{self as qk, QParam};

const K: &str = "rt::kernels::quant";

/// Where each element's scale lives, as dims: `None` per tensor, else `(d, inner, block)` as
/// [`QParam`]'s fields.
type Layout = Option<(DimExpr, DimExpr, usize)>;

/// The layout of a scale of dims `p` for an input of dims `x`, declaring the dims that must
/// agree.
fn layout(cx: &mut ShapeCx, x: &[DimExpr], p: &[DimExpr], axis: i64, block: usize) -> R<Layout> {
    let one = DimExpr::constant(1);
    if p.len() <= 1 && p.iter().all(|d| *d == one) {
        return Ok(None);
    }
    let a = norm_axis_or_scalar(axis, x.len())?;
    let inner = super::product(&x[a + 1..]);
    if block == 0 {
        if p.len() != 1 {
            return Err(format!("a per-axis scale must be 1-D, got rank {}", p.len()));
        }
        cx.equal(&format!("the scale's length and input dim {a}"), &p[0], &x[a])?;
        return Ok(Some((x[a].clone(), inner, 0)));
    }
    if p.len() != x.len() {
        return Err(format!("a blocked scale must have the input's rank {}, got {}", x.len(), p.len()));
    }
    for d in 0..x.len() {
        let want = if d == a { x[d].ceil_div(block as i64) } else { x[d].clone() };
        cx.equal(&format!("blocked scale dim {d} (block size {block})"), &p[d], &want)?;
    }
    Ok(Some((x[a].clone(), inner, block)))
}

/// The scale's layout and, when present, the zero point's fit to it.
fn params(cx: &mut ShapeCx, axis: i64, block: usize) -> R<Layout> {
    let x = cx.arg(0)?.dims()?.to_vec();
    let s = cx.arg(1)?.dims()?.to_vec();
    if let Some(z) = cx.opt(2).map(|z| z.dims.clone()) {
        let z = z.ok_or("the rank of the zero point is not known")?;
        let single = |d: &[DimExpr]| d.iter().all(|e| *e == DimExpr::constant(1));
        if !(single(&z) && single(&s)) {
            if z.len() != s.len() {
                return Err(format!("the zero point has rank {}, the scale {}", z.len(), s.len()));
            }
            for (k, (a, b)) in z.iter().zip(&s).enumerate() {
                cx.equal(&format!("dim {k} of the zero point and the scale"), a, b)?;
            }
        }
    }
    layout(cx, &x, &s, axis, block)
}

/// Output 0 of type `to` and x's dims, the scale's (and zero point's) fit to x declared when
/// their dims are known.
fn out_type(cx: &mut ShapeCx, to: DType, axis: i64, block: usize) -> R<Vec<OutType>> {
    let dims = cx.arg(0)?.dims.clone();
    if dims.is_some() && cx.arg(1)?.dims.is_some() {
        params(cx, axis, block)?;
    }
    Ok(vec![OutType { dtype: to, dims }])
}

/// An evaluation's output type (by `op`'s shape rule) and scale layout.
fn eval_types(op: &dyn OpDef, ins: &[Option<&Tensor>], axis: i64, block: usize) -> R<(DType, QParam)> {
    let to = op.shapes(&mut ShapeCx::of_tensors(ins))?[0].dtype;
    Ok((to, qparam(&params(&mut ShapeCx::of_tensors(ins), axis, block)?)?))
}

fn qparam(l: &Layout) -> R<QParam> {
    let u = super::fixed_size;
    Ok(match l {
        None => QParam::TENSOR,
        Some((d, inner, block)) => QParam { d: u(d)?, inner: u(inner)?, block: *block },
    })
}

fn qparam_lit(cx: &EmitCx, l: &Layout) -> Result<String, CodegenError> {
    Ok(match l {
        None => format!("{K}::QParam::TENSOR"),
        Some((d, inner, block)) => format!("{K}::QParam {{ d: {}, inner: {}, block: {block} }}", cx.size(d)?, cx.size(inner)?),
    })
}

/// How generated code holds a quantized type: float8 and 4-bit types as `rt::small` bits (the
/// `Small` literal naming the type), integers as themselves.
enum Coded {
    Small(String),
    Int,
}

/// The quantized type `d`'s [`Coded`]; `what` starts the error for a type codegen lacks.
fn coded(cx: &EmitCx, d: DType, what: &str) -> Result<Coded, CodegenError> {
    if is_small_quant(d) {
        let s = float8::small_of(d).ok_or_else(|| cx.err(format!("{d} is not a small type")))?;
        Ok(Coded::Small(format!("rt::small::Small::{s:?}")))
    } else if is_qint(d) {
        Ok(Coded::Int)
    } else {
        Err(cx.err(format!("{what} {d} is not supported by codegen yet")))
    }
}

pub(crate) fn is_qint(d: DType) -> bool {
    matches!(d, DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32 | DType::U32)
}

/// A zero point's bytes (float8 and 4-bit types), empty when absent.
fn small_bytes(zp: Option<&Tensor>) -> Vec<u8> {
    match zp.map(|z| &z.data) {
        Some(Data::F8(_, b)) => b.clone(),
        // Absent, or of a type read as its elements (every variant named, so a new small type
        // is decided here).
        None
        | Some(
            Data::F32(_) | Data::F64(_) | Data::F16(_) | Data::BF16(_) | Data::I8(_) | Data::I16(_) | Data::I32(_) | Data::I64(_) | Data::U8(_)
            | Data::U16(_) | Data::U32(_) | Data::U64(_) | Data::Bool(_) | Data::Str(_),
        ) => vec![],
    }
}

/// What QuantizeLinear's and DequantizeLinear's code is built from: the dtypes of x, the scale
/// and y; the scale's layout, reads of x, the scale and the zero point (`&[]` when absent) and
/// the write of y.
struct QArgs {
    xd: DType,
    sd: DType,
    yd: DType,
    p: String,
    rx: String,
    rs: String,
    rz: String,
    wy: String,
}

impl QArgs {
    fn of(cx: &EmitCx, axis: i64, block: usize) -> Result<QArgs, CodegenError> {
        let (x, s, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
        let l = params(&mut cx.shape_cx()?, axis, block).map_err(|e| cx.err(e))?;
        let rz = match cx.opt_input(2) {
            Some(z) => cx.read(z)?,
            None => "&[]".into(),
        };
        let (xd, sd, yd) = (cx.dtype(x)?, cx.dtype(s)?, cx.dtype(y)?);
        Ok(QArgs { xd, sd, yd, p: qparam_lit(cx, &l)?, rx: cx.read(x)?, rs: cx.read(s)?, rz, wy: cx.write(y)? })
    }
}

/// A multiply and an add (or subtract) per output element.
fn two_per_output(outs: &[Option<Vec<usize>>]) -> Option<u64> {
    numel(outs.first()?).map(|n| n.saturating_mul(2))
}

/// QuantizeLinear: `saturate(round(x / scale) + zero_point)` in the zero point's type (else
/// `output_dtype`, else u8).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantize {
    pub axis: i64,
    pub block_size: usize,
    pub output_dtype: Option<DType>,
    pub saturate: bool,
}

impl Quantize {
    fn target(&self, zp: Option<DType>) -> R<DType> {
        match (zp, self.output_dtype) {
            (Some(z), Some(o)) if z != o => Err(format!("zero point type {z} differs from output_dtype {o}")),
            (Some(z), _) => Ok(z),
            (None, Some(o)) => Ok(o),
            (None, None) => Ok(DType::U8),
        }
    }
}

impl OpDef for Quantize {
    name!("QuantizeLinear");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (x, s) = (cx.arg(0)?.dtype, cx.arg(1)?.dtype);
        if !x.is_float() || !s.is_float() {
            return Err(format!("QuantizeLinear needs float x and scale, got {x} and {s}"));
        }
        let to = self.target(cx.opt(2).map(|z| z.dtype))?;
        if !is_small_quant(to) && int_range(to).is_none() {
            return Err(format!("QuantizeLinear to {to} is not supported"));
        }
        out_type(cx, to, self.axis, self.block_size)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, scale, zp) = (input(ins, 0)?, input(ins, 1)?, ins.get(2).copied().flatten());
        let (to, p) = eval_types(self, ins, self.axis, self.block_size)?;
        let (xv, sv) = (x.to_f64_vec(), scale.to_f64_vec());
        // x / scale in the input's precision (f32 unless f64), as the ONNX reference does.
        let wide = x.dtype() == DType::F64;
        if is_small_quant(to) {
            let mut bits = vec![0u8; xv.len()];
            let sm = float8::small_of(to).ok_or("internal: small type")?;
            qk::quantize_small(&xv, &sv, &small_bytes(zp), p, wide, sm, self.saturate, &mut bits);
            return Ok(vec![Tensor::new(x.shape.clone(), Data::F8(to, bits))]);
        }
        let zv = zp.map(|z| ints(z, "zero point")).transpose()?.unwrap_or_default();
        let mut q = vec![0i64; xv.len()];
        qk::quantize(&xv, &sv, &zv, p, wide, &mut q);
        Ok(vec![from_ints(x.shape.clone(), q, to)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let QArgs { xd, yd, p, rx, rs, rz, wy, .. } = QArgs::of(cx, self.axis, self.block_size)?;
        let wide = xd == DType::F64;
        Ok(match coded(cx, yd, "QuantizeLinear to")? {
            Coded::Small(sm) => format!("{K}::quantize_small({rx}, {rs}, {rz}, {p}, {wide}, {sm}, {}, {wy});", self.saturate),
            Coded::Int => format!("{K}::quantize({rx}, {rs}, {rz}, {p}, {wide}, {wy});"),
        })
    }

    fn flops(&self, _: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        two_per_output(outs)
    }
}

/// DequantizeLinear: `(x - zero_point) · scale` in the scale's type (else `output_dtype`),
/// the zero point subtracted exactly in integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dequantize {
    pub axis: i64,
    pub block_size: usize,
    pub output_dtype: Option<DType>,
}

impl OpDef for Dequantize {
    name!("DequantizeLinear");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (x, s) = (cx.arg(0)?.dtype, cx.arg(1)?.dtype);
        if !s.is_float() {
            return Err(format!("DequantizeLinear needs a float scale, got {s}"));
        }
        if let Some(z) = cx.opt(2).map(|z| z.dtype).filter(|z| *z != x) {
            return Err(format!("zero point type {z} differs from input type {x}"));
        }
        if !is_small_quant(x) && !x.is_int() {
            return Err(format!("DequantizeLinear of {x} is not supported"));
        }
        let to = self.output_dtype.unwrap_or(s);
        if !to.is_float() {
            return Err(format!("DequantizeLinear to {to}: the output must be a float type"));
        }
        out_type(cx, to, self.axis, self.block_size)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, scale, zp) = (input(ins, 0)?, input(ins, 1)?, ins.get(2).copied().flatten());
        let (to, p) = eval_types(self, ins, self.axis, self.block_size)?;
        let sv = scale.to_f64_vec();
        let wide = scale.dtype() == DType::F64 || to == DType::F64;
        let mut y = vec![0f64; x.numel()];
        if let (true, Data::F8(d, xb)) = (is_small_quant(x.dtype()), &x.data) {
            let sm = float8::small_of(*d).ok_or("internal: small type")?;
            qk::dequantize_small(xb, sm, &sv, &small_bytes(zp), p, wide, &mut y);
        } else {
            let zv = zp.map(|z| ints(z, "zero point")).transpose()?.unwrap_or_default();
            qk::dequantize(&ints(x, "x")?, &sv, &zv, p, wide, &mut y);
        }
        Ok(vec![cast(&Tensor::new(x.shape.clone(), Data::F64(y)), to, false)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let QArgs { xd, sd, yd, p, rx, rs, rz, wy } = QArgs::of(cx, self.axis, self.block_size)?;
        let wide = sd == DType::F64 || yd == DType::F64;
        Ok(match coded(cx, xd, "DequantizeLinear of")? {
            Coded::Small(sm) => format!("{K}::dequantize_small({rx}, {sm}, {rs}, {rz}, {p}, {wide}, {wy});"),
            Coded::Int => format!("{K}::dequantize({rx}, {rs}, {rz}, {p}, {wide}, {wy});"),
        })
    }

    fn flops(&self, _: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        two_per_output(outs)
    }
}

/// DynamicQuantizeLinear: u8 values, and the scale and zero point that map the input's range
/// (widened to include 0) onto 0..=255.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DynamicQuantize;

impl DynamicQuantize {
    pub fn op() -> Op {
        Op::Def(OpRef::new(DynamicQuantize))
    }
}

impl OpDef for DynamicQuantize {
    name!("DynamicQuantizeLinear");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        if x.dtype != DType::F32 {
            return Err(format!("DynamicQuantizeLinear needs f32 input, got {}", x.dtype));
        }
        Ok(vec![
            OutType { dtype: DType::U8, dims: x.dims.clone() },
            OutType { dtype: DType::F32, dims: Some(vec![]) },
            OutType { dtype: DType::U8, dims: Some(vec![]) },
        ])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let Data::F32(v) = &x.data else { return Err(format!("DynamicQuantizeLinear needs f32 input, got {}", x.dtype())) };
        let mut q = vec![0u8; v.len()];
        let (scale, zp) = qk::dynamic_quantize(v, &mut q);
        Ok(vec![Tensor::new(x.shape.clone(), Data::U8(q)), Tensor::new(vec![], Data::F32(vec![scale])), Tensor::new(vec![], Data::U8(vec![zp]))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let mut s = format!("let (s, z) = {K}::dynamic_quantize({}, {});\n", cx.read_input(0)?, cx.write(cx.output(0)?)?);
        for (k, v) in ["s", "z"].iter().enumerate() {
            if let Some(o) = cx.used_output(k + 1) {
                // Bound first: `unsafe { … }[0]` would parse as a block, then an array.
                s += &format!("let o = {};\no[0] = {v};\n", cx.write(o)?);
            }
        }
        Ok(s)
    }

    // A pass for the range, one to quantize.
    flops!(per_input 4);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|i| (i as f32 - 10.0) * 0.37).collect());
    let per_axis = Tensor::from_f32s(vec![3], vec![0.1, 0.25, 0.5]);
    let blocked = Tensor::from_f32s(vec![2, 3, 2], (0..12).map(|i| 0.05 + i as f32 * 0.03).collect());
    let q = Tensor::new(vec![2, 3, 4], Data::I8((0..24).map(|i| (i * 11 % 255 - 127) as i8).collect()));
    let zp = Tensor::new(vec![3], Data::I8(vec![-3, 0, 5]));
    let quant = |axis, block_size| OpRef::new(Quantize { axis, block_size, output_dtype: Some(DType::I8), saturate: true });
    vec![
        super::Example { consts: vec![], op: quant(1, 0), inputs: vec![x.clone(), per_axis.clone()] },
        super::Example { consts: vec![], op: quant(-1, 2), inputs: vec![x.clone(), blocked] },
        super::Example { consts: vec![], op: OpRef::new(Dequantize { axis: 1, block_size: 0, output_dtype: None }), inputs: vec![q, per_axis, zp] },
        super::Example { consts: vec![], op: OpRef::new(DynamicQuantize), inputs: vec![x] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_axis_quantization_rounds_half_to_even_and_saturates() {
        let x = Tensor::from_f32s(vec![1, 2, 2], vec![0.25, -0.75, 100.0, 1.0]);
        let s = Tensor::from_f32s(vec![2], vec![0.5, 0.5]);
        let op = Quantize { axis: 1, block_size: 0, output_dtype: Some(DType::I8), saturate: true };
        let y = op.eval(&[Some(&x), Some(&s)]).expect("eval");
        assert_eq!(y[0].to_i64_vec(), Some(vec![0, -2, 127, 2]));
        let bad = Tensor::from_f32s(vec![3], vec![0.5; 3]);
        let e = op.eval(&[Some(&x), Some(&bad)]).expect_err("a scale of the wrong length");
        assert!(e.contains("scale"), "{e}");
    }
}
