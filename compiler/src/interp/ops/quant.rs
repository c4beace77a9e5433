//! Quantization ops (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
//! QLinearMatMul, ConvInteger, QLinearConv) plus Shrink and Det. Integer products and sums are
//! done in integers (i32 / i64), never through floats; floats only for scales.
use super::cast::cast;
use super::linalg::matmul;
use super::shape::index_map;
use super::util::{arg, norm_axis, numel, one, opt_arg};
use super::OpResult;
use crate::float8;
use crate::interp::RtValue;
use crate::ir::{AutoPad, DType, Op, Window};
use burnc_runtime::kernels::quant::{self as qk, ConvGeom, QParam, ScalePrec};
use crate::tensor::{Data, Tensor};

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
        Op::MatMulInteger => one(matmul_integer(arg(args, 0)?, arg(args, 1)?, opt_arg(args, 2)?, opt_arg(args, 3)?)?),
        Op::QLinearMatMul => one(qlinear_matmul(args)?),
        Op::ConvInteger { window, group } => {
            let x = shifted(arg(args, 0)?, opt_arg(args, 2)?, ZpLayout::Scalar, "x")?;
            let w = shifted(arg(args, 1)?, opt_arg(args, 3)?, ZpLayout::Leading, "w")?;
            let (shape, acc) = conv_i64(&x, &w, window, *group)?;
            one(Tensor::new(shape, Data::I32(acc.into_iter().map(|v| v as i32).collect())))
        }
        Op::QLinearConv { window, group } => one(qlinear_conv(args, window, *group)?),
        Op::Shrink { lambd, bias } => {
            let x = arg(args, 0)?;
            let (l, b) = (*lambd as f64, *bias as f64);
            let v: Vec<f64> =
                x.to_f64_vec().into_iter().map(|v| if v < -l { v + b } else if v > l { v - b } else { 0.0 }).collect();
            one(cast(&Tensor::new(x.shape.clone(), Data::F64(v)), x.dtype(), false)?)
        }
        Op::Det => one(det(arg(args, 0)?)?),
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
    let a = norm_axis(axis, x.len())?;
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

/// Integer values of an integer tensor.
fn ints(t: &Tensor, what: &str) -> Result<Vec<i64>, String> {
    if !t.dtype().is_int() {
        return Err(format!("{what} must be an integer tensor, got {}", t.dtype()));
    }
    t.to_i64_vec().ok_or_else(|| format!("{what} must be an integer tensor"))
}

/// Clamp integers into `to`'s range and store them as `to`.
fn from_ints(shape: Vec<usize>, v: Vec<i64>, to: DType) -> Result<Tensor, String> {
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
    if is_f8(to) {
        let zb: Vec<u8> = match zp.map(|z| &z.data) {
            Some(Data::F8(_, b)) => b.clone(),
            _ => vec![],
        };
        let mut bits = vec![0u8; xv.len()];
        let sm = crate::float8::small_of(to).ok_or("internal: small type")?;
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
    if x.dtype().is_int() {
        // Subtract the zero point exactly, in integers.
        let xv = ints(x, "x")?;
        let zv = match zp {
            Some(z) => ints(z, "zero point")?,
            None => vec![],
        };
        qk::dequantize(&xv, &sv, &zv, p, wide, &mut y);
    } else if let Data::F8(d, xb) = &x.data {
        let zb: Vec<u8> = match zp.map(|z| &z.data) {
            Some(Data::F8(_, b)) => b.clone(),
            _ => vec![],
        };
        let sm = crate::float8::small_of(*d).ok_or("internal: small type")?;
        qk::dequantize_small(xb, sm, &sv, &zb, p, wide, &mut y);
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

/// How a zero point lines up with its tensor.
#[derive(Clone, Copy)]
enum ZpLayout {
    /// One value.
    Scalar,
    /// 1-D along the second-to-last axis (MatMul A: per row).
    Row,
    /// 1-D along the last axis (MatMul B: per column).
    Col,
    /// 1-D along axis 0 (conv weights: per output channel).
    Leading,
}

/// `t - zp` as an i32 tensor (integer arithmetic).
fn shifted(t: &Tensor, zp: Option<&Tensor>, layout: ZpLayout, what: &str) -> Result<Tensor, String> {
    let v = ints(t, what)?;
    let Some(z) = zp else {
        return Ok(Tensor::new(t.shape.clone(), Data::I32(v.into_iter().map(|x| x as i32).collect())));
    };
    if z.dtype() != t.dtype() {
        return Err(format!("{what} zero point type {} differs from {what} type {}", z.dtype(), t.dtype()));
    }
    let zv = ints(z, "zero point")?;
    let r = t.rank();
    let axis = match layout {
        _ if zv.len() == 1 => None,
        ZpLayout::Scalar => return Err(format!("{what} zero point must be a scalar, got shape {:?}", z.shape)),
        ZpLayout::Row if r >= 2 => Some(r - 2),
        ZpLayout::Col if r >= 1 => Some(r - 1),
        ZpLayout::Leading if r >= 1 => Some(0),
        _ => return Err(format!("{what} zero point of shape {:?} does not fit {what} {:?}", z.shape, t.shape)),
    };
    let idx: Vec<usize> = match axis {
        None => vec![0; v.len()],
        Some(a) => {
            if zv.len() != t.shape[a] || z.rank() > 1 && z.shape.iter().filter(|&&d| d != 1).count() > 1 {
                return Err(format!("{what} zero point of shape {:?} does not fit {what} {:?}", z.shape, t.shape));
            }
            index_map(&t.shape, |ix| ix[a])?
        }
    };
    let out: Vec<i32> = v.iter().zip(&idx).map(|(&x, &i)| (x - zv[i]) as i32).collect();
    Ok(Tensor::new(t.shape.clone(), Data::I32(out)))
}

fn matmul_integer(a: &Tensor, b: &Tensor, az: Option<&Tensor>, bz: Option<&Tensor>) -> Result<Tensor, String> {
    let a32 = shifted(a, az, ZpLayout::Row, "A")?;
    let b32 = shifted(b, bz, ZpLayout::Col, "B")?;
    matmul(&a32, &b32)
}

/// Requantize an i32/i64 accumulator: round(acc * multiplier) + zp, saturated to `to`.
fn requantize(acc: &[i64], mult: impl Fn(usize) -> f64, zp: impl Fn(usize) -> i64, to: DType) -> Result<Vec<i64>, String> {
    let (lo, hi) = int_range(to).ok_or_else(|| format!("{to} is not a quantized integer type"))?;
    Ok(acc
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let r = (c as f64 * mult(i)).round_ties_even() as i64;
            r.saturating_add(zp(i)).clamp(lo, hi)
        })
        .collect())
}

/// Product of scales in the scales' own precision (f32 unless f64), as the reference does.
fn scale_ratio(a: f64, b: f64, y: f64, dt: DType) -> f64 {
    match dt {
        DType::F64 => a * b / y,
        DType::F16 => {
            let h = |v: f64| half::f16::from_f64(v);
            (h(a) * h(b) / h(y)).to_f64()
        }
        _ => (a as f32 * b as f32 / y as f32) as f64,
    }
}

/// One scale or zero point per element of `len`-long vector, or a single one.
fn per(v: &[f64], i: usize) -> f64 {
    if v.len() == 1 {
        v[0]
    } else {
        v.get(i).copied().unwrap_or(0.0)
    }
}

fn qlinear_matmul(args: &[Option<RtValue>]) -> Result<Tensor, String> {
    let (a, a_s, a_z) = (arg(args, 0)?, arg(args, 1)?, opt_arg(args, 2)?);
    let (b, b_s, b_z) = (arg(args, 3)?, arg(args, 4)?, opt_arg(args, 5)?);
    let (y_s, y_z) = (arg(args, 6)?, opt_arg(args, 7)?);
    let c = matmul_integer(a, b, a_z, b_z)?;
    let acc = c.to_i64_vec().ok_or("internal: integer product")?;
    let to = y_z.map(|z| z.dtype()).unwrap_or(a.dtype());
    let (asv, bsv, ysv) = (a_s.to_f64_vec(), b_s.to_f64_vec(), y_s.to_f64_vec());
    if ysv.len() != 1 {
        return Err("y_scale must hold one value".into());
    }
    let yz = match y_z {
        Some(z) => ints(z, "y_zero_point")?,
        None => vec![0],
    };
    if yz.len() != 1 {
        return Err("y_zero_point must hold one value".into());
    }
    let r = c.rank();
    let n = if r >= 1 && b.rank() >= 2 { c.shape[r - 1] } else { 1 };
    let m = if a.rank() >= 2 && r >= 2 { c.shape[r - 2] } else { 1 };
    let dt = a_s.dtype();
    let mult = |i: usize| {
        let col = i % n;
        let row = (i / n) % m;
        scale_ratio(per(&asv, row), per(&bsv, col), ysv[0], dt)
    };
    let q = requantize(&acc, mult, |_| yz[0], to)?;
    from_ints(c.shape.clone(), q, to)
}

/// Integer N-d convolution of already shifted x [N, C, …] and w [M, C/group, k…] (i32 data).
fn conv_i64(x: &Tensor, w: &Tensor, win: &Window, group: usize) -> Result<(Vec<usize>, Vec<i64>), String> {
    let (Data::I32(xv), Data::I32(wv)) = (&x.data, &w.data) else { return Err("internal: conv needs i32".into()) };
    if x.rank() < 3 || w.rank() != x.rank() {
        return Err(format!("conv needs x [N, C, ...] and w of the same rank, got {:?} and {:?}", x.shape, w.shape));
    }
    let sp = x.rank() - 2;
    let (nb, c) = (x.shape[0], x.shape[1]);
    let m = w.shape[0];
    let group = group.max(1);
    if c % group != 0 || m % group != 0 || w.shape[1] * group != c {
        return Err(format!("channels do not fit group {group}: x {:?}, w {:?}", x.shape, w.shape));
    }
    let ks: Vec<usize> = if win.kernel_shape.is_empty() { w.shape[2..].to_vec() } else { win.kernel_shape.clone() };
    if ks.len() != sp || ks[..] != w.shape[2..] {
        return Err(format!("kernel_shape {ks:?} does not match weights {:?}", w.shape));
    }
    let get = |v: &Vec<usize>, i: usize, d: usize| if v.is_empty() { d } else { v.get(i).copied().unwrap_or(d) };
    let strides_: Vec<usize> = (0..sp).map(|i| get(&win.strides, i, 1).max(1)).collect();
    let dil: Vec<usize> = (0..sp).map(|i| get(&win.dilations, i, 1).max(1)).collect();
    let ins = &x.shape[2..];
    let mut pad_begin = vec![0usize; sp];
    let mut outs = vec![0usize; sp];
    for i in 0..sp {
        let ek = dil[i] * (ks[i] - 1) + 1;
        match win.auto_pad {
            AutoPad::NotSet => {
                let (pb, pe) = (get(&win.pads, i, 0), get(&win.pads, i + sp, 0));
                pad_begin[i] = pb;
                let span = ins[i] + pb + pe;
                outs[i] = if span < ek { 0 } else { (span - ek) / strides_[i] + 1 };
            }
            AutoPad::Valid => outs[i] = if ins[i] < ek { 0 } else { (ins[i] - ek) / strides_[i] + 1 },
            AutoPad::SameUpper | AutoPad::SameLower => {
                outs[i] = ins[i].div_ceil(strides_[i]);
                let total = ((outs[i].max(1) - 1) * strides_[i] + ek).saturating_sub(ins[i]);
                pad_begin[i] = if win.auto_pad == AutoPad::SameUpper { total / 2 } else { total - total / 2 };
            }
        }
    }
    let mut shape = vec![nb, m];
    shape.extend(&outs);
    let total = numel(&shape)?;
    let ckg = c / group;
    let mg = m / group;
    let xs = strides(&x.shape);
    let ws = strides(&w.shape);
    let kn: usize = ks.iter().product();
    let on: usize = outs.iter().product();
    let mut acc = vec![0i64; total];
    let mut o = 0;
    let mut opos = vec![0usize; sp];
    let mut kpos = vec![0usize; sp];
    for n in 0..nb {
        for mo in 0..m {
            let g = mo / mg;
            for oi in 0..on {
                // Output position.
                let mut r = oi;
                for d in (0..sp).rev() {
                    opos[d] = r % outs[d];
                    r /= outs[d];
                }
                let mut sum = 0i64;
                for ki in 0..kn {
                    let mut r = ki;
                    for d in (0..sp).rev() {
                        kpos[d] = r % ks[d];
                        r /= ks[d];
                    }
                    let mut xoff = n * xs[0];
                    let mut inside = true;
                    for d in 0..sp {
                        let p = (opos[d] * strides_[d] + kpos[d] * dil[d]) as i64 - pad_begin[d] as i64;
                        if p < 0 || p >= ins[d] as i64 {
                            inside = false;
                            break;
                        }
                        xoff += p as usize * xs[d + 2];
                    }
                    if !inside {
                        continue;
                    }
                    let mut woff = mo * ws[0];
                    for d in 0..sp {
                        woff += kpos[d] * ws[d + 2];
                    }
                    for ci in 0..ckg {
                        let xi = xv[xoff + (g * ckg + ci) * xs[1]] as i64;
                        let wi = wv[woff + ci * ws[1]] as i64;
                        sum += xi * wi;
                    }
                }
                acc[o] = sum;
                o += 1;
            }
        }
    }
    Ok((shape, acc))
}

fn qlinear_conv(args: &[Option<RtValue>], win: &Window, group: usize) -> Result<Tensor, String> {
    let (x, x_s, x_z) = (arg(args, 0)?, arg(args, 1)?, opt_arg(args, 2)?);
    let (w, w_s, w_z) = (arg(args, 3)?, arg(args, 4)?, opt_arg(args, 5)?);
    let (y_s, y_z) = (arg(args, 6)?, opt_arg(args, 7)?);
    let bias = opt_arg(args, 8)?;
    let xi = shifted(x, x_z, ZpLayout::Scalar, "x")?;
    let wi = shifted(w, w_z, ZpLayout::Leading, "w")?;
    let (shape, mut acc) = conv_i64(&xi, &wi, win, group)?;
    let m = shape[1];
    let per_n: usize = shape[2..].iter().product();
    if let Some(b) = bias {
        let bv = ints(b, "B")?;
        if bv.len() != m {
            return Err(format!("bias has {} values for {m} output channels", bv.len()));
        }
        for (i, v) in acc.iter_mut().enumerate() {
            *v += bv[(i / per_n.max(1)) % m];
        }
    }
    let (xsv, wsv, ysv) = (x_s.to_f64_vec(), w_s.to_f64_vec(), y_s.to_f64_vec());
    if xsv.len() != 1 || ysv.len() != 1 || (wsv.len() != 1 && wsv.len() != m) {
        return Err("x_scale and y_scale must be scalars, w_scale scalar or per output channel".into());
    }
    let to = y_z.map(|z| z.dtype()).unwrap_or(x.dtype());
    let yz = match y_z {
        Some(z) => ints(z, "y_zero_point")?,
        None => vec![0],
    };
    let dt = x_s.dtype();
    let mult = |i: usize| scale_ratio(xsv[0], per(&wsv, (i / per_n.max(1)) % m), ysv[0], dt);
    let q = requantize(&acc, mult, |_| yz[0], to)?;
    from_ints(shape, q, to)
}

/// Determinant of [..., n, n] by LU with partial pivoting (f64).
fn det(x: &Tensor) -> Result<Tensor, String> {
    if x.rank() < 2 || x.shape[x.rank() - 1] != x.shape[x.rank() - 2] {
        return Err(format!("Det needs [..., n, n], got {:?}", x.shape));
    }
    if !x.dtype().is_float() {
        return Err(format!("Det needs a float tensor, got {}", x.dtype()));
    }
    let n = x.shape[x.rank() - 1];
    let batch: Vec<usize> = x.shape[..x.rank() - 2].to_vec();
    let nb = numel(&batch)?;
    let v = x.to_f64_vec();
    let mut out = Vec::with_capacity(nb);
    for b in 0..nb {
        let mut a = v[b * n * n..(b + 1) * n * n].to_vec();
        let mut d = 1.0f64;
        for k in 0..n {
            let p = (k..n).max_by(|&i, &j| a[i * n + k].abs().total_cmp(&a[j * n + k].abs())).unwrap_or(k);
            if a[p * n + k] == 0.0 {
                d = 0.0;
                break;
            }
            if p != k {
                for j in 0..n {
                    a.swap(k * n + j, p * n + j);
                }
                d = -d;
            }
            let piv = a[k * n + k];
            d *= piv;
            for i in k + 1..n {
                let f = a[i * n + k] / piv;
                for j in k..n {
                    a[i * n + j] -= f * a[k * n + j];
                }
            }
        }
        out.push(d);
    }
    cast(&Tensor::new(batch, Data::F64(out)), x.dtype(), false)
}
