//! Quantization ops (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
//! QLinearMatMul, ConvInteger, QLinearConv) plus Shrink. Integer products and sums are
//! done in integers (i32 / i64), never through floats; floats only for scales.
use super::cast::cast;
use super::qint;
use super::util::{arg, norm_axis_or_scalar, one, opt_arg};
use super::OpResult;
use crate::float8;
use crate::interp::RtValue;
use crate::ir::{DType, Op};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::quant::{self as qk, QParam};

/// The first `N` inputs, each optional.
fn opt_args<const N: usize>(args: &[Option<RtValue>]) -> Result<[Option<&Tensor>; N], String> {
    let mut out = [None; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = opt_arg(args, i)?;
    }
    Ok(out)
}

pub fn eval(op: &Op, args: &[Option<RtValue>], _n: usize) -> OpResult {
    match op {
        Op::QuantizeLinear { axis, block_size, output_dtype, saturate } => one(quantize(
            arg(args, 0)?,
            arg(args, 1)?,
            opt_arg(args, 2)?,
            *axis,
            *block_size,
            *output_dtype,
            *saturate,
        )?),
        Op::DequantizeLinear { axis, block_size, output_dtype } => {
            one(dequantize(arg(args, 0)?, arg(args, 1)?, opt_arg(args, 2)?, *axis, *block_size, *output_dtype)?)
        }
        Op::DynamicQuantizeLinear => dynamic_quantize(arg(args, 0)?),
        Op::MatMulInteger => {
            one(qint::matmul_integer(arg(args, 0)?, arg(args, 1)?, opt_arg(args, 2)?, opt_arg(args, 3)?)?)
        }
        Op::QLinearMatMul => one(qint::qlinear_matmul(opt_args(args)?)?),
        Op::ConvInteger { window, group } => {
            one(qint::conv_integer(arg(args, 0)?, arg(args, 1)?, opt_arg(args, 2)?, opt_arg(args, 3)?, window, *group)?)
        }
        Op::QLinearConv { window, group } => one(qint::qlinear_conv(opt_args(args)?, window, *group)?),
        Op::Shrink { lambd, bias } => {
            let x = arg(args, 0)?;
            let (l, b) = (*lambd as f64, *bias as f64);
            let v: Vec<f64> =
                x.to_f64_vec().into_iter().map(|v| if v < -l { v + b } else if v > l { v - b } else { 0.0 }).collect();
            one(cast(&Tensor::new(x.shape.clone(), Data::F64(v)), x.dtype(), false)?)
        }
        _ => Err(format!("{} is not a quantization op", op.name())),
    }
}

/// Where each element's scale / zero point lives: per-tensor (one element), per-axis (1-D
/// along `axis`) or blocked (same rank, `block` elements per scale along `axis`).
pub fn qparam(x: &[usize], p: &[usize], axis: i64, block: usize) -> Result<QParam, String> {
    let pn: usize = p.iter().product();
    if pn == 1 && p.len() <= 1 {
        return Ok(QParam::TENSOR);
    }
    let a = norm_axis_or_scalar(axis, x.len())?;
    let inner: usize = x[a + 1..].iter().product();
    if block == 0 {
        if p.len() != 1 || p[0] != x[a] {
            return Err(format!("scale/zero point of shape {p:?} does not fit axis {a} of input {x:?}"));
        }
        return Ok(QParam { d: x[a], inner, block: 0 });
    }
    if p.len() != x.len() {
        return Err(format!("blocked scale {p:?} must have the rank of the input {x:?}"));
    }
    for d in 0..x.len() {
        let want = if d == a { x[d].div_ceil(block) } else { x[d] };
        if p[d] != want {
            return Err(format!("blocked scale {p:?} does not fit input {x:?} with block size {block} on axis {a}"));
        }
    }
    Ok(QParam { d: x[a], inner, block })
}

fn int_range(d: DType) -> Option<(i64, i64)> {
    Some(match d {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::U8 => (0, u8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::U16 => (0, u16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        _ => return None,
    })
}

pub fn is_f8(d: DType) -> bool {
    matches!(d, DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ)
}

/// Small types QuantizeLinear/DequantizeLinear handle through the `*_small` kernels (raw bits).
pub fn is_small_quant(d: DType) -> bool {
    is_f8(d) || matches!(d, DType::F4E2M1 | DType::I4 | DType::U4 | DType::I2 | DType::U2)
}

/// Integer values of an integer tensor.
pub fn ints(t: &Tensor, what: &str) -> Result<Vec<i64>, String> {
    if !t.dtype().is_int() {
        return Err(format!("{what} must be an integer tensor, got {}", t.dtype()));
    }
    t.to_i64_vec().ok_or_else(|| format!("{what} must be an integer tensor"))
}

/// Clamp integers into `to`'s range and store them as `to`.
pub fn from_ints(shape: Vec<usize>, v: Vec<i64>, to: DType) -> Result<Tensor, String> {
    let (lo, hi) = int_range(to).ok_or_else(|| format!("{to} is not a quantized integer type"))?;
    let v: Vec<i64> = v.into_iter().map(|x| x.clamp(lo, hi)).collect();
    cast(&Tensor::new(shape, Data::I64(v)), to, false)
}

#[allow(clippy::too_many_arguments)]
fn quantize(
    x: &Tensor,
    scale: &Tensor,
    zp: Option<&Tensor>,
    axis: i64,
    block: usize,
    output_dtype: Option<DType>,
    saturate: bool,
) -> Result<Tensor, String> {
    if !x.dtype().is_float() || !scale.dtype().is_float() {
        return Err(format!("QuantizeLinear needs float x and scale, got {} and {}", x.dtype(), scale.dtype()));
    }
    let to = match (zp, output_dtype) {
        (Some(z), Some(o)) if z.dtype() != o => {
            return Err(format!("zero point type {} differs from output_dtype {o}", z.dtype()));
        }
        (Some(z), _) => z.dtype(),
        (None, Some(o)) => o,
        (None, None) => DType::U8,
    };
    let p = qparam(&x.shape, &scale.shape, axis, block)?;
    if let Some(z) = zp {
        if z.shape != scale.shape && !(z.numel() == 1 && scale.numel() == 1) {
            return Err(format!("zero point shape {:?} differs from scale shape {:?}", z.shape, scale.shape));
        }
    }
    let xv = x.to_f64_vec();
    let sv = scale.to_f64_vec();
    // x / scale in the input's precision (f32 unless f64), as the ONNX reference does.
    let wide = x.dtype() == DType::F64;
    if is_small_quant(to) {
        let zb: Vec<u8> = match zp.map(|z| &z.data) {
            Some(Data::F8(_, b)) => b.clone(),
            _ => vec![],
        };
        let mut bits = vec![0u8; xv.len()];
        let sm = float8::small_of(to).ok_or("internal: small type")?;
        qk::quantize_small(&xv, &sv, &zb, p, wide, sm, saturate, &mut bits);
        return Ok(Tensor::new(x.shape.clone(), Data::F8(to, bits)));
    }
    int_range(to).ok_or_else(|| format!("QuantizeLinear to {to} is not supported"))?;
    let zv = match zp {
        Some(z) => ints(z, "zero point")?,
        None => vec![],
    };
    let mut q = vec![0i64; xv.len()];
    qk::quantize(&xv, &sv, &zv, p, wide, &mut q);
    from_ints(x.shape.clone(), q, to)
}

fn dequantize(
    x: &Tensor,
    scale: &Tensor,
    zp: Option<&Tensor>,
    axis: i64,
    block: usize,
    output_dtype: Option<DType>,
) -> Result<Tensor, String> {
    if !scale.dtype().is_float() {
        return Err(format!("DequantizeLinear needs a float scale, got {}", scale.dtype()));
    }
    if let Some(z) = zp {
        if z.dtype() != x.dtype() {
            return Err(format!("zero point type {} differs from input type {}", z.dtype(), x.dtype()));
        }
    }
    let to = output_dtype.unwrap_or(scale.dtype());
    let p = qparam(&x.shape, &scale.shape, axis, block)?;
    let sv = scale.to_f64_vec();
    let wide = scale.dtype() == DType::F64 || to == DType::F64;
    let mut y = vec![0f64; x.numel()];
    if let (true, Data::F8(d, xb)) = (is_small_quant(x.dtype()), &x.data) {
        let zb: Vec<u8> = match zp.map(|z| &z.data) {
            Some(Data::F8(_, b)) => b.clone(),
            _ => vec![],
        };
        let sm = float8::small_of(*d).ok_or("internal: small type")?;
        qk::dequantize_small(xb, sm, &sv, &zb, p, wide, &mut y);
    } else if x.dtype().is_int() {
        // Subtract the zero point exactly, in integers.
        let xv = ints(x, "x")?;
        let zv = match zp {
            Some(z) => ints(z, "zero point")?,
            None => vec![],
        };
        qk::dequantize(&xv, &sv, &zv, p, wide, &mut y);
    } else {
        return Err(format!("DequantizeLinear of {} is not supported", x.dtype()));
    }
    cast(&Tensor::new(x.shape.clone(), Data::F64(y)), to, false)
}

fn dynamic_quantize(x: &Tensor) -> OpResult {
    let Data::F32(v) = &x.data else { return Err(format!("DynamicQuantizeLinear needs f32 input, got {}", x.dtype())) };
    let mut q = vec![0u8; v.len()];
    let (scale, zp) = qk::dynamic_quantize(v, &mut q);
    Ok(vec![
        RtValue::Tensor(Tensor::new(x.shape.clone(), Data::U8(q))),
        RtValue::Tensor(Tensor::new(vec![], Data::F32(vec![scale]))),
        RtValue::Tensor(Tensor::new(vec![], Data::U8(vec![zp]))),
    ])
}
