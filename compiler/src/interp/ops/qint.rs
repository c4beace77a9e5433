//! Integer products (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv): the geometry and
//! checks, shared with codegen, around burnc_runtime::kernels::quant. Values go through the
//! kernels as i64 / f64, which hold every quantized value exactly, so the results are the ones
//! generated code gets with the native types.
use super::quant::{from_ints, ints};
use super::util::{broadcast_shapes, broadcast_strides, numel};
use crate::codegen::index::{matmul_dims, MatMulDims};
use crate::ir::{AutoPad, DType, Window};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::quant::{self as qk, ConvGeom, ScalePrec, MAX_SPATIAL};

/// Precision of the scale product: the scales' own type (f32 for anything else).
pub fn scale_prec(d: DType) -> ScalePrec {
    match d {
        DType::F64 => ScalePrec::F64,
        DType::F16 => ScalePrec::F16,
        _ => ScalePrec::F32,
    }
}

/// Checks a zero point against its tensor: same type, and one value or `along` values (the
/// length of the axis it may vary along; `None`: must be one value).
pub fn check_zp(z: &[usize], zd: DType, td: DType, along: Option<usize>, what: &str) -> Result<(), String> {
    if zd != td {
        return Err(format!("{what} zero point type {zd} differs from {what} type {td}"));
    }
    let len: usize = z.iter().product();
    let one_axis = z.iter().filter(|&&d| d != 1).count() <= 1;
    if len == 1 || (Some(len) == along && one_axis) {
        return Ok(());
    }
    Err(format!("{what} zero point of shape {z:?} does not fit {what}"))
}

/// A scale: one value, or `along` values.
pub fn check_scale(s: &[usize], along: usize, what: &str) -> Result<(), String> {
    let len: usize = s.iter().product();
    if len == 1 || len == along {
        return Ok(());
    }
    Err(format!("{what} of shape {s:?} must hold 1 or {along} values"))
}

/// Batched MatMul geometry (numpy rules): `dims` as the GPU targets take them, the output
/// shape, and each batch's element offset into a and b (broadcast batches repeat offsets).
pub struct MmGeom {
    pub dims: MatMulDims,
    pub shape: Vec<usize>,
    pub a_base: Vec<u32>,
    pub b_base: Vec<u32>,
}

pub fn mm_geom(ash: &[usize], bsh: &[usize]) -> Result<MmGeom, String> {
    if ash.is_empty() || bsh.is_empty() {
        return Err("MatMul inputs must have rank >= 1".into());
    }
    // numpy's promotion and batch dims, as the GPU targets take them; a promoted dim is left
    // out of the output.
    let dims = matmul_dims(ash, bsh);
    let MatMulDims { m, k, n, ref pa, ref pb, .. } = dims;
    // B's rows: its only dim when 1-D.
    if k != bsh[bsh.len().saturating_sub(2)] {
        return Err(format!("MatMul inner dims differ: {ash:?} @ {bsh:?}"));
    }
    let batch = broadcast_shapes(pa, pb)?;
    let nb = numel(&batch)?;
    numel(&[nb, m, n])?;
    let (sa, sb) = (broadcast_strides(pa, &batch), broadcast_strides(pb, &batch));
    let big = || "MatMul operands too large".to_string();
    let (mut a_base, mut b_base) = (Vec::with_capacity(nb), Vec::with_capacity(nb));
    for bi in 0..nb {
        let (mut rem, mut oa, mut ob) = (bi, 0usize, 0usize);
        for d in (0..batch.len()).rev() {
            let ix = rem % batch[d];
            rem /= batch[d];
            oa += ix * sa[d];
            ob += ix * sb[d];
        }
        a_base.push(u32::try_from(oa * m * k).map_err(|_| big())?);
        b_base.push(u32::try_from(ob * k * n).map_err(|_| big())?);
    }
    let mut shape = batch;
    if ash.len() > 1 {
        shape.push(m);
    }
    if bsh.len() > 1 {
        shape.push(n);
    }
    Ok(MmGeom { dims, shape, a_base, b_base })
}

/// MatMulInteger / QLinearMatMul checks: the geometry, with A's zero point per row and B's per
/// column.
pub fn mm_checked(a: (&[usize], DType), b: (&[usize], DType), az: Option<(&[usize], DType)>, bz: Option<(&[usize], DType)>) -> Result<MmGeom, String> {
    let g = mm_geom(a.0, b.0)?;
    if let Some(z) = az {
        check_zp(z.0, z.1, a.1, (a.0.len() >= 2).then_some(g.dims.m), "A")?;
    }
    if let Some(z) = bz {
        check_zp(z.0, z.1, b.1, (b.0.len() >= 2).then_some(g.dims.n), "B")?;
    }
    Ok(g)
}

fn sd(t: &Tensor) -> (&[usize], DType) {
    (&t.shape, t.dtype())
}

fn zp_ints(z: Option<&Tensor>, what: &str) -> Result<Vec<i64>, String> {
    z.map(|z| ints(z, what)).transpose().map(|v| v.unwrap_or_default())
}

/// MatMulInteger: (a - a_zp) @ (b - b_zp) in i32.
pub fn matmul_integer(a: &Tensor, b: &Tensor, az: Option<&Tensor>, bz: Option<&Tensor>) -> Result<Tensor, String> {
    let g = mm_checked(sd(a), sd(b), az.map(sd), bz.map(sd))?;
    let mut y = vec![0i32; numel(&g.shape)?];
    let (av, bv) = (ints(a, "A")?, ints(b, "B")?);
    let (azv, bzv) = (zp_ints(az, "A zero point")?, zp_ints(bz, "B zero point")?);
    qk::matmul_integer(&av, &bv, &azv, &bzv, &g.a_base, &g.b_base, g.dims.m, g.dims.k, g.dims.n, &mut y);
    Ok(Tensor::new(g.shape, Data::I32(y)))
}

/// QLinearMatMul's output type: y's zero point's, else a's.
pub fn qlinear_out(x: DType, yz: Option<DType>) -> DType {
    yz.unwrap_or(x)
}

/// QLinearMatMul; input 8, an i32 bias per column, is burnc's own (not ONNX's): the QGemm form
/// `passes::qdq` gives a quantized Gemm with a bias.
pub fn qlinear_matmul(args: [Option<&Tensor>; 9]) -> Result<Tensor, String> {
    let need = |i: usize| args[i].ok_or_else(|| format!("QLinearMatMul input #{i} is missing"));
    let (a, a_s, b, b_s, y_s) = (need(0)?, need(1)?, need(3)?, need(4)?, need(6)?);
    let (a_z, b_z, y_z) = (args[2], args[5], args[7]);
    let g = mm_checked(sd(a), sd(b), a_z.map(sd), b_z.map(sd))?;
    check_scale(&a_s.shape, g.dims.m, "a_scale")?;
    check_scale(&b_s.shape, g.dims.n, "b_scale")?;
    check_scale(&y_s.shape, 1, "y_scale")?;
    if let Some(z) = y_z {
        check_scale(&z.shape, 1, "y_zero_point")?;
    }
    let mut acc = vec![0i32; numel(&g.shape)?];
    let (av, bv) = (ints(a, "A")?, ints(b, "B")?);
    let (azv, bzv) = (zp_ints(a_z, "a_zero_point")?, zp_ints(b_z, "b_zero_point")?);
    qk::matmul_integer(&av, &bv, &azv, &bzv, &g.a_base, &g.b_base, g.dims.m, g.dims.k, g.dims.n, &mut acc);
    let mut q = vec![0i64; acc.len()];
    let (asv, bsv, ysv) = (a_s.to_f64_vec(), b_s.to_f64_vec(), y_s.to_f64_vec());
    let yzv = zp_ints(y_z, "y_zero_point")?;
    let bias: Vec<i32> = match args[8] {
        Some(b) => {
            check_qmm_bias(sd(b), g.dims.n)?;
            ints(b, "bias")?.iter().map(|&v| v as i32).collect()
        }
        None => vec![],
    };
    qk::qlinear_matmul_requant(&acc, &bias, &asv, &bsv, &ysv, &yzv, scale_prec(a_s.dtype()), g.dims.m, g.dims.n, &mut q);
    from_ints(g.shape, q, qlinear_out(a.dtype(), y_z.map(|z| z.dtype())))
}

/// QLinearMatMul's bias (input 8, burnc's QGemm form): i32, one value per column.
pub fn check_qmm_bias((shape, d): (&[usize], DType), n: usize) -> Result<(), String> {
    if d != DType::I32 || shape.iter().product::<usize>() != n || shape.iter().filter(|&&v| v != 1).count() > 1 {
        return Err(format!("QLinearMatMul bias of type {d} and shape {shape:?} must be int32 with one value per column ({n})"));
    }
    Ok(())
}

/// Integer convolution geometry, owned (`ConvGeom` borrows from it).
pub struct QConv {
    pub nb: usize,
    pub c: usize,
    pub m: usize,
    pub group: usize,
    pub ins: Vec<usize>,
    pub outs: Vec<usize>,
    pub ks: Vec<usize>,
    pub strides: Vec<usize>,
    pub dil: Vec<usize>,
    pub pad_begin: Vec<usize>,
    /// Output shape [nb, m, outs…].
    pub shape: Vec<usize>,
}

impl QConv {
    pub fn geom(&self) -> ConvGeom<'_> {
        ConvGeom {
            nb: self.nb,
            c: self.c,
            m: self.m,
            group: self.group,
            ins: &self.ins,
            outs: &self.outs,
            ks: &self.ks,
            strides: &self.strides,
            dil: &self.dil,
            pad_begin: &self.pad_begin,
        }
    }
}

/// Geometry of x [N, C, …] * w [M, C/group, k…].
pub fn conv_geom(xs: &[usize], ws: &[usize], win: &Window, group: usize) -> Result<QConv, String> {
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(format!("conv needs x [N, C, ...] and w of the same rank, got {xs:?} and {ws:?}"));
    }
    let sp = xs.len() - 2;
    if sp > MAX_SPATIAL {
        return Err(format!("conv with {sp} spatial dims (at most {MAX_SPATIAL})"));
    }
    let (nb, c, m) = (xs[0], xs[1], ws[0]);
    let group = group.max(1);
    if c % group != 0 || m % group != 0 || ws[1] * group != c {
        return Err(format!("channels do not fit group {group}: x {xs:?}, w {ws:?}"));
    }
    let ks: Vec<usize> = if win.kernel_shape.is_empty() { ws[2..].to_vec() } else { win.kernel_shape.clone() };
    if ks.len() != sp || ks[..] != ws[2..] {
        return Err(format!("kernel_shape {ks:?} does not match weights {ws:?}"));
    }
    let get = |v: &Vec<usize>, i: usize, d: usize| if v.is_empty() { d } else { v.get(i).copied().unwrap_or(d) };
    let strides: Vec<usize> = (0..sp).map(|i| get(&win.strides, i, 1).max(1)).collect();
    let dil: Vec<usize> = (0..sp).map(|i| get(&win.dilations, i, 1).max(1)).collect();
    let ins = xs[2..].to_vec();
    let mut pad_begin = vec![0usize; sp];
    let mut outs = vec![0usize; sp];
    for i in 0..sp {
        let ek = dil[i] * (ks[i].max(1) - 1) + 1;
        match win.auto_pad {
            AutoPad::NotSet => {
                let (pb, pe) = (get(&win.pads, i, 0), get(&win.pads, i + sp, 0));
                pad_begin[i] = pb;
                let span = ins[i] + pb + pe;
                outs[i] = if span < ek { 0 } else { (span - ek) / strides[i] + 1 };
            }
            AutoPad::Valid => outs[i] = if ins[i] < ek { 0 } else { (ins[i] - ek) / strides[i] + 1 },
            AutoPad::SameUpper | AutoPad::SameLower => {
                outs[i] = ins[i].div_ceil(strides[i]);
                let total = ((outs[i].max(1) - 1) * strides[i] + ek).saturating_sub(ins[i]);
                pad_begin[i] = if win.auto_pad == AutoPad::SameUpper { total / 2 } else { total - total / 2 };
            }
        }
    }
    let mut shape = vec![nb, m];
    shape.extend(&outs);
    numel(&shape)?;
    Ok(QConv { nb, c, m, group, ins, outs, ks, strides, dil, pad_begin, shape })
}

/// ConvInteger / QLinearConv checks: the geometry, x's zero point one value, w's one or per
/// output channel.
pub fn conv_checked(x: (&[usize], DType), w: (&[usize], DType), xz: Option<(&[usize], DType)>, wz: Option<(&[usize], DType)>, win: &Window, group: usize) -> Result<QConv, String> {
    let g = conv_geom(x.0, w.0, win, group)?;
    if let Some(z) = xz {
        check_zp(z.0, z.1, x.1, None, "x")?;
    }
    if let Some(z) = wz {
        check_zp(z.0, z.1, w.1, Some(g.m), "w")?;
    }
    Ok(g)
}

pub fn conv_integer(x: &Tensor, w: &Tensor, xz: Option<&Tensor>, wz: Option<&Tensor>, win: &Window, group: usize) -> Result<Tensor, String> {
    let g = conv_checked(sd(x), sd(w), xz.map(sd), wz.map(sd), win, group)?;
    let mut y = vec![0i32; numel(&g.shape)?];
    let (xv, wv) = (ints(x, "x")?, ints(w, "w")?);
    let (xzv, wzv) = (zp_ints(xz, "x zero point")?, zp_ints(wz, "w zero point")?);
    qk::conv_integer_i32(&xv, &wv, &xzv, &wzv, &g.geom(), &mut y);
    Ok(Tensor::new(g.shape, Data::I32(y)))
}

/// QLinearConv's scale and bias checks.
pub fn qconv_params(g: &QConv, xs: &[usize], ws: &[usize], ys: &[usize], yz: Option<&[usize]>, bias: Option<(&[usize], DType)>) -> Result<(), String> {
    check_scale(xs, 1, "x_scale")?;
    check_scale(ws, g.m, "w_scale")?;
    check_scale(ys, 1, "y_scale")?;
    if let Some(z) = yz {
        check_scale(z, 1, "y_zero_point")?;
    }
    if let Some((b, d)) = bias {
        if d != DType::I32 || b.iter().product::<usize>() != g.m {
            return Err(format!("bias must be {} int32 values, got {d} {b:?}", g.m));
        }
    }
    Ok(())
}

pub fn qlinear_conv(args: [Option<&Tensor>; 9], win: &Window, group: usize) -> Result<Tensor, String> {
    let need = |i: usize| args[i].ok_or_else(|| format!("QLinearConv input #{i} is missing"));
    let (x, x_s, w, w_s, y_s) = (need(0)?, need(1)?, need(3)?, need(4)?, need(6)?);
    let (x_z, w_z, y_z, bias) = (args[2], args[5], args[7], args[8]);
    let g = conv_checked(sd(x), sd(w), x_z.map(sd), w_z.map(sd), win, group)?;
    qconv_params(&g, &x_s.shape, &w_s.shape, &y_s.shape, y_z.map(|z| &z.shape[..]), bias.map(sd))?;
    let bv: Vec<i32> = match bias.map(|b| &b.data) {
        Some(Data::I32(b)) => b.clone(),
        None => vec![],
        // `qconv_params` refused every other type already.
        Some(_) => return Err("QLinearConv's bias must be int32".into()),
    };
    let mut q = vec![0i64; numel(&g.shape)?];
    let (xv, wv) = (ints(x, "x")?, ints(w, "w")?);
    let (xzv, wzv, yzv) = (zp_ints(x_z, "x_zero_point")?, zp_ints(w_z, "w_zero_point")?, zp_ints(y_z, "y_zero_point")?);
    let (xsv, wsv, ysv) = (x_s.to_f64_vec(), w_s.to_f64_vec(), y_s.to_f64_vec());
    let prec = scale_prec(x_s.dtype());
    qk::qlinear_conv(&xv, &wv, &xzv, &wzv, &bv, &xsv, &wsv, &ysv, &yzv, prec, &g.geom(), &mut q);
    from_ints(g.shape, q, qlinear_out(x.dtype(), y_z.map(|z| z.dtype())))
}
