//! Pooling over the spatial dims of an `N×C×…` input, each `(image, channel)` plane on its
//! own: windowed (MaxPool with its optional Indices, AveragePool, LpPool) and global
//! (GlobalMaxPool, GlobalAveragePool, GlobalLpPool: each plane to one value; the output keeps
//! N and C and has every other dim 1).
use super::window::{extent_and_padded, resolve, window_out};
use super::{input, numel, product, EmitCx, GradCx, IntoOp, OpDef, OpRef, OutType, ShapeCx, R};
use crate::autodiff::builder::filled;
use crate::codegen::emit::f64_lit;
use crate::codegen::gpu::window::{out_coords, pool_divisor, pool_window, window_taps};
use crate::codegen::gpu::Dialect;
use crate::codegen::CodegenError;
use crate::ir::{AutoPad, DType, DimExpr, Op, PoolKind, ValueId, Window};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::pool as k;
use burnc_runtime::kernels::window::Window3;

/// A window of kind `kind` slid over the spatial dims: MaxPool (output 1, when present, the
/// flat index of each maximum), AveragePool, LpPool.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub kind: PoolKind,
    pub window: Window,
    /// MaxPool's indices counted column-major (ONNX's `storage_order` 1) instead of row-major.
    pub column_major: bool,
}

impl OpDef for Pool {
    fn name(&self) -> &'static str {
        match self.kind {
            PoolKind::Max => "MaxPool",
            PoolKind::Avg { .. } => "AvgPool",
            PoolKind::Lp { .. } => "LpPool",
        }
    }

    none_of!(scratch_bytes, in_place, decides_shapes, forwards_values);

    /// The output (and MaxPool's indices) keep N and C; each spatial dim is the window's count
    /// of positions ([`window_out`]), which a bounded input must be large enough to give.
    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let dims = match &x.dims {
            Some(xs) => Some(self.out_dims(cx, xs)?),
            None => None,
        };
        let mut outs = vec![OutType { dtype: x.dtype, dims: dims.clone() }];
        if self.kind == PoolKind::Max {
            outs.push(OutType { dtype: DType::I64, dims });
        }
        Ok(outs)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let win = self.fixed_window(&x.shape)?;
        let planes = x.shape[0] * x.shape[1];
        let mut shape = x.shape[..2].to_vec();
        shape.extend_from_slice(&win.output[3 - (x.rank() - 2)..]);
        let n = crate::interp::ops::util::numel(&shape)?;
        let max = self.kind == PoolKind::Max;
        let mut ind = if max { vec![0i64; n] } else { Vec::new() };
        macro_rules! go {
            ($($v:ident),*) => {
                match (&x.data, self.kind) {
                    $((Data::$v(xs), PoolKind::Max) => {
                        let mut y = vec![burnc_runtime::Elem::zero(); n];
                        let ind = if self.column_major { k::Indices::ColumnMajor(&mut ind[..]) } else { k::Indices::RowMajor(&mut ind[..]) };
                        k::max_pool(xs, planes, &win, &mut y, ind);
                        Data::$v(y)
                    })*
                    (Data::F32(xs), kind) => Data::F32(float_pool(xs, planes, &win, kind, n)),
                    (Data::F64(xs), kind) => Data::F64(float_pool(xs, planes, &win, kind, n)),
                    (Data::F16(xs), kind) => Data::F16(float_pool(xs, planes, &win, kind, n)),
                    (Data::BF16(xs), kind) => Data::BF16(float_pool(xs, planes, &win, kind, n)),
                    (_, kind) => return Err(format!("{kind:?} pooling does not support {}", x.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64);
        let mut outs = vec![Tensor::new(shape.clone(), data)];
        if max {
            outs.push(Tensor::new(shape, Data::I64(ind)));
        }
        Ok(outs)
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, out) = (cx.input(0)?, cx.output(0)?);
        let od = cx.dtype(out)?;
        let xs = cx.dims(x)?;
        if xs.len() < 3 {
            return Err(cx.err("pooling needs rank at least 3"));
        }
        let win = cx.window(&self.window, &self.window.kernel_shape, x, out)?;
        let planes = cx.size(&product(&xs[..2]))?;
        let (rx, y) = (cx.read(x)?, cx.write(out)?);
        let float = matches!(od, DType::F32 | DType::F64);
        Ok(match self.kind {
            PoolKind::Max => {
                let ind = match cx.used_output(1) {
                    Some(iv) => format!("rt::kernels::pool::Indices::{}({})", if self.column_major { "ColumnMajor" } else { "RowMajor" }, cx.write(iv)?),
                    None => "rt::kernels::pool::Indices::None".into(),
                };
                format!("let win = {win};\nrt::kernels::pool::max_pool({rx}, {planes}, &win, {y}, {ind});")
            }
            PoolKind::Avg { count_include_pad } if float => {
                format!("let win = {win};\nrt::kernels::pool::avg_pool({rx}, {planes}, &win, {y}, {count_include_pad});")
            }
            PoolKind::Lp { p } if float => format!("let win = {win};\nrt::kernels::pool::lp_pool({rx}, {planes}, &win, {y}, {});", f64_lit(p as f64)),
            kind => return Err(cx.err(format!("{kind:?} pooling on {od} is not supported by codegen yet"))),
        })
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        const D: Dialect = Dialect::Cuda;
        if cx.has_output(1) {
            return Err(cx.err("MaxPool indices are not supported by the CUDA target yet"));
        }
        let out = cx.output(0)?;
        let (od, oshape) = cx.ty(out)?;
        if !matches!(od, DType::F32 | DType::F64 | DType::BF16 | DType::F16) {
            return Err(cx.err(format!("pooling on {od} is not supported by the CUDA target")));
        }
        let (ot, at) = (cx.c(od)?, cx.acc(od)?);
        let on: usize = oshape.iter().product();
        let (xv, y) = (cx.input(0)?, cx.ptr(out)?);
        let (_, xs) = cx.ty(xv)?;
        let win = pool_window(&self.window, &xs).map_err(|e| cx.err(e))?;
        let [id_, ih, iw] = win.input;
        let [od_, oh, ow] = win.output;
        let (init, acc, fin) = match self.kind {
            PoolKind::Max => (format!("{at} acc = -(1.0 / 0.0); int cnt = 0;"), "if (v > acc || v != v) acc = v;".to_string(), "acc".to_string()),
            PoolKind::Avg { .. } => (format!("{at} acc = 0; int cnt = 0;"), "acc += v;".to_string(), format!("acc / ({at})den")),
            PoolKind::Lp { p } => (format!("{at} acc = 0; int cnt = 0;"), format!("acc += pow(fabs((double)v), (double){p});"), format!("({ot})pow((double)acc, 1.0 / (double){p})")),
        };
        let den = pool_divisor(D, &win, matches!(self.kind, PoolKind::Avg { count_include_pad: true }));
        let ch = xs[1];
        let vector = cx.is_nhwc(out) && ch % 8 == 0 && crate::codegen::cuda::scalar::is_half(od) && cx.aligned16(xv) && cx.aligned16(out);
        if let (true, Some(start)) = (vector, match self.kind {
            PoolKind::Max => Some("-(1.0f / 0.0f)"),
            PoolKind::Avg { .. } => Some("0.0f"),
            PoolKind::Lp { .. } => None,
        }) {
            // Channels-last, eight channels per thread: one 16-byte load per tap.
            let x = cx.ptr(xv)?;
            let body = format!(
                "const long long e = (long long)i * 8; const int c = e % {ch}; int ox = (e / {ch}) % {ow}; int oy = (e / {}) % {oh}; int oz = 0; long long p = e / {};\n\
                 const {ot}* xp = {x} + p * {} + c;\nfloat accs[8]; int cnt = 0;\n#pragma unroll\nfor (int u = 0; u < 8; ++u) accs[u] = {start};\n{}\n{den}\n\
                 __align__(16) {ot} outv[8];\n#pragma unroll\nfor (int u = 0; u < 8; ++u) {{ const float acc = accs[u]; outv[u] = {fin}; }}\n*(uint4*)&{y}[e] = *(const uint4*)outv;",
                ch * ow,
                ch * ow * oh,
                ih * iw * ch,
                window_taps(D, &win, &format!("__align__(16) {ot} t[8]; *(uint4*)t = *(const uint4*)&xp[(yy * {iw} + xx) * {ch}];\n#pragma unroll\nfor (int u = 0; u < 8; ++u) {{ float& acc = accs[u]; const float v = (float)t[u]; {acc} }}\n++cnt;")),
            );
            return Ok(vec![cx.pointwise_over(on / 8, on, &body)]);
        }
        let body = if cx.is_nhwc(out) {
            // Channels-last (2-D): i = ((image · OH + oy) · OW + ox) · C + c.
            format!(
                "const int c = i % {ch}; int ox = (i / {ch}) % {ow}; int oy = (i / {}) % {oh}; int oz = 0; long long p = i / {};\nconst {ot}* xp = {x} + p * {} + c;\n{init}\n{}\n{den}\n{y}[i] = {fin};",
                ch * ow,
                ch * ow * oh,
                ih * iw * ch,
                window_taps(D, &win, &format!("{at} v = xp[(yy * {iw} + xx) * {ch}]; {acc} ++cnt;")),
                x = cx.ptr(xv)?,
            )
        } else {
            format!(
                "{} long long p = i / {};\nconst {ot}* xp = {x} + p * {};\n{init}\n{}\n{den}\n{y}[i] = {fin};",
                out_coords(D, &win, "i"),
                od_ * oh * ow,
                id_ * ih * iw,
                window_taps(D, &win, &format!("{at} v = xp[(z * {ih} + yy) * {iw} + xx]; {acc} ++cnt;")),
                x = cx.ptr(xv)?,
            )
        };
        Ok(vec![cx.pointwise(on, &body)])
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        use crate::codegen::wgsl::scalar;
        const D: Dialect = Dialect::Wgsl;
        if cx.has_output(1) {
            return Err(cx.err("MaxPool indices are not supported by the wgpu target yet"));
        }
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        if !scalar::is_float(y.dtype) {
            return Err(cx.err(format!("pooling on {} is not supported by the wgpu target", y.dtype)));
        }
        let win = pool_window(&self.window, &x.shape).map_err(|e| cx.err(e))?;
        let [id_, ih, iw] = win.input;
        let [od_, oh, ow] = win.output;
        let (init, acc, fin) = match self.kind {
            // The first tap seen starts the maximum (WGSL has no infinity literal).
            PoolKind::Max => ("var acc = 0.0;\nvar cnt = 0;".to_string(), "if (cnt == 0 || v > acc || is_nan(v)) { acc = v; }".to_string(), "acc".to_string()),
            PoolKind::Avg { .. } => ("var acc = 0.0;\nvar cnt = 0;".into(), "acc += v;".into(), "acc / f32(den)".into()),
            PoolKind::Lp { p } => ("var acc = 0.0;\nvar cnt = 0;".into(), format!("acc += pow_f32(abs(v), {});", scalar::f32_lit(p)), format!("pow_f32(acc, {})", scalar::f32_lit(1.0 / p))),
        };
        let den = pool_divisor(D, &win, matches!(self.kind, PoolKind::Avg { count_include_pad: true }));
        Ok(vec![cx.pointwise(&y, |i| {
            Ok((
                format!(
                    "{}\nlet p = {i} / {}u;\n{init}\n{}\n{den}\n",
                    out_coords(D, &win, i),
                    od_ * oh * ow,
                    window_taps(D, &win, &format!("let v = {};\n{acc}\ncnt += 1;", x.load(&format!("p * {}u + u32((z * {ih} + yy) * {iw} + xx)", id_ * ih * iw)))),
                ),
                fin.clone(),
            ))
        })?])
    }

    /// One operation per tap of each output's window.
    fn flops(&self, _: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        let taps = self.window.kernel_shape.iter().fold(1u64, |a, &k| a.saturating_mul(k as u64));
        Some(numel(outs.first()?)?.saturating_mul(taps))
    }

    /// Max: dY routed to each window's maximum by a scatter-add over the indices (row-major,
    /// whatever the forward asked); average: dY / count spread over each window by a
    /// depthwise ConvTranspose of ones. The window is resolved at static shapes.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (x, dy, xd) = grad_operands(cx, 3, "batch, channels and spatial dims")?;
        let b = &mut *cx.b;
        let dx = match self.kind {
            PoolKind::Max => {
                let op = Pool { kind: PoolKind::Max, window: self.window.clone(), column_major: false }.op();
                let outs = b.node_n(op, vec![Some(x)], 2)?;
                crate::autodiff::shape::scatter_add(b, x, outs[1], dy)?
            }
            PoolKind::Avg { count_include_pad } => {
                if self.window.ceil_mode {
                    return Err("AveragePool with ceil_mode is not supported".into());
                }
                let g = crate::autodiff::nn::geo(&self.window, &self.window.kernel_shape, &xd[2..])?;
                let dt = b.dtype(x)?;
                let ones = |shape: Vec<usize>| filled(1.0, dt, shape);
                let scaled = if count_include_pad {
                    let k: usize = g.kernel.iter().product();
                    let s = b.scalar(1.0 / k as f64, dt)?;
                    b.mul(dy, s)?
                } else {
                    // Elements of each window inside the input: a conv of ones with ones.
                    let ox = b.konst(ones([vec![1, 1], xd[2..].to_vec()].concat())?);
                    let ok = b.konst(ones([vec![1, 1], g.kernel.clone()].concat())?);
                    let counts = b.node_n(Op::Conv { window: g.window(), group: 1 }, vec![Some(ox), Some(ok), None], 1)?[0];
                    b.div(dy, counts)?
                };
                let c = xd[1];
                let kw = b.konst(ones([vec![c, 1], g.kernel.clone()].concat())?);
                let op = super::conv_transpose::ConvTranspose { window: g.window(), group: c, output_padding: g.out_pad.clone(), output_shape: vec![] }.op();
                b.node(op, &[scaled, kw])?
            }
            PoolKind::Lp { .. } => return Err("no gradient rule for LpPool".into()),
        };
        Ok(vec![Some(dx)])
    }
}

impl Pool {
    /// Output dims for input dims `xs`; a bounded input must be large enough for the window.
    fn out_dims(&self, cx: &mut ShapeCx, xs: &[DimExpr]) -> R<Vec<DimExpr>> {
        if xs.len() < 3 {
            return Err(format!("pooling needs rank at least 3, got {}", xs.len()));
        }
        let k = &self.window.kernel_shape;
        if k.len() != xs.len() - 2 {
            return Err(format!("kernel_shape has {} dims for a rank-{} input", k.len(), xs.len()));
        }
        let ks: Vec<DimExpr> = k.iter().map(|&v| DimExpr::constant(v as i64)).collect();
        let mut dims = xs[..2].to_vec();
        for d in window_out(&self.window, &ks, &xs[2..])? {
            // ceil_mode's last window, dropped or not by the size's value.
            dims.push(d.unwrap_or_else(|| cx.unknown()));
        }
        for (i, kd) in ks.iter().enumerate() {
            if let Some((extent, padded)) = extent_and_padded(&self.window, ks.len(), i, kd, &xs[2 + i]) {
                cx.at_most(&format!("the pooling window and the padded input along spatial dim {i}"), &extent, &padded)?;
            }
        }
        Ok(dims)
    }

    /// The window at the fixed shape `xs` of an input.
    fn fixed_window(&self, xs: &[usize]) -> R<Window3> {
        if xs.len() < 3 {
            return Err(format!("pooling needs an input of rank >= 3, got {xs:?}"));
        }
        if self.window.kernel_shape.len() != xs.len() - 2 {
            return Err(format!("kernel_shape {:?} does not fit input {xs:?}", self.window.kernel_shape));
        }
        resolve(&self.window, &self.window.kernel_shape, &xs[2..])
    }
}

/// A pooling's X, dY and X's static dims, X of rank at least `rank` (`what`: the dims it needs).
fn grad_operands(cx: &mut GradCx, rank: usize, what: &str) -> R<(ValueId, ValueId, Vec<usize>)> {
    let (x, dy) = (cx.input(0)?, cx.dy()?);
    let xd = cx.b.fixed_dims(x)?;
    if xd.len() < rank {
        return Err(format!("input of rank {} (need {what})", xd.len()));
    }
    Ok((x, dy, xd))
}

/// Average or Lp pooling (max of floats too) of a float type.
fn float_pool<T: burnc_runtime::Elem>(xs: &[T], planes: usize, win: &Window3, kind: PoolKind, n: usize) -> Vec<T> {
    let mut y = vec![T::zero(); n];
    match kind {
        PoolKind::Avg { count_include_pad } => k::avg_pool(xs, planes, win, &mut y, count_include_pad),
        PoolKind::Lp { p } => k::lp_pool(xs, planes, win, &mut y, p as f64),
        PoolKind::Max => k::max_pool(xs, planes, win, &mut y, k::Indices::None),
    }
    y
}

/// Global pooling of kind `kind` (the window ops' `PoolKind`; Avg's `count_include_pad` has no
/// meaning without padding).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalPool {
    pub kind: PoolKind,
}

impl GlobalPool {
    /// The runtime kernel's kind.
    fn kernel_kind(&self) -> k::GlobalKind {
        match self.kind {
            PoolKind::Max => k::GlobalKind::Max,
            PoolKind::Avg { .. } => k::GlobalKind::Average,
            PoolKind::Lp { p } => k::GlobalKind::Lp(p as f64),
        }
    }
}

/// `[planes, plane size]` of an input of dims `xs` (batch × channels, the rest).
fn planes(xs: &[DimExpr]) -> R<[DimExpr; 2]> {
    if xs.len() < 2 {
        return Err(format!("global pooling needs rank at least 2, got {}", xs.len()));
    }
    Ok([product(&xs[..2]), product(&xs[2..])])
}

impl OpDef for GlobalPool {
    name!("GlobalPool");
    none_of!(scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        let dims = match &x.dims {
            Some(xs) => {
                planes(xs)?;
                Some(xs.iter().enumerate().map(|(i, d)| if i < 2 { d.clone() } else { DimExpr::constant(1) }).collect())
            }
            None => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        if x.rank() < 2 {
            return Err(format!("global pooling needs an input of rank >= 2, got {:?}", x.shape));
        }
        let planes = x.shape[0] * x.shape[1];
        let size: usize = x.shape[2..].iter().product();
        let shape: Vec<usize> = x.shape.iter().enumerate().map(|(i, &d)| if i < 2 { d } else { 1 }).collect();
        let kind = self.kernel_kind();
        macro_rules! go {
            ($($v:ident),*) => {
                match &x.data {
                    $(Data::$v(xs) if kind == k::GlobalKind::Max || x.dtype().is_float() => {
                        let mut y = vec![burnc_runtime::Elem::zero(); planes];
                        k::global_pool(xs, planes, size, &mut y, kind);
                        Data::$v(y)
                    })*
                    _ => return Err(format!("global {:?} pooling does not support {}", self.kind, x.dtype())),
                }
            };
        }
        let data = go!(F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64);
        Ok(vec![Tensor::new(shape, data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let [n, len] = planes(&cx.dims(x)?).map_err(|_| cx.err("global pooling needs rank at least 2"))?;
        let kind = match self.kernel_kind() {
            k::GlobalKind::Lp(p) => format!("Lp({})", f64_lit(p)),
            other => format!("{other:?}"),
        };
        Ok(format!(
            "rt::kernels::pool::global_pool({}, {}, {}, {}, rt::kernels::pool::GlobalKind::{kind});",
            cx.read(x)?,
            cx.size(&n)?,
            cx.size(&len)?,
            cx.write(cx.output(0)?)?,
        ))
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        let out = cx.output(0)?;
        let (od, oshape) = cx.ty(out)?;
        let (ot, at) = (cx.c(od)?, cx.acc(od)?);
        let xv = cx.input(0)?;
        let (_, xs) = cx.ty(xv)?;
        let len: usize = xs[2..].iter().product();
        let (init, step, fin) = match self.kind {
            PoolKind::Max => ("-(1.0 / 0.0)".to_string(), "if (v > acc || v != v) acc = v;".to_string(), "acc".to_string()),
            PoolKind::Avg { .. } => ("0".into(), "acc += v;".into(), format!("acc / ({at}){len}")),
            PoolKind::Lp { p } => ("0".into(), format!("acc += pow(fabs((double)v), (double){p});"), format!("({ot})pow((double)acc, 1.0 / (double){p})")),
        };
        if !matches!(od, DType::F32 | DType::F64 | DType::BF16 | DType::F16) {
            return Err(cx.err(format!("pooling on {od} is not supported by the CUDA target")));
        }
        let (x, y, on) = (cx.ptr(xv)?, cx.ptr(out)?, oshape.iter().product());
        if cx.is_nhwc(xv) {
            // Channels-last input: output (image, c) strides over the pixels, C apart.
            let ch = xs[1];
            return Ok(vec![cx.pointwise(on, &format!("const {ot}* xp = {x} + (long long)(i / {ch}) * {} + i % {ch};\n{at} acc = {init};\nfor (int k = 0; k < {len}; ++k) {{ {at} v = xp[(long long)k * {ch}]; {step} }}\n{y}[i] = {fin};", len * ch))]);
        }
        Ok(vec![cx.pointwise(on, &format!("const {ot}* xp = {x} + (long long)i * {len};\n{at} acc = {init};\nfor (int k = 0; k < {len}; ++k) {{ {at} v = xp[k]; {step} }}\n{y}[i] = {fin};"))])
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        use crate::codegen::wgsl::scalar;
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let len: usize = x.shape[2..].iter().product();
        if !scalar::is_float(y.dtype) {
            return Err(cx.err(format!("pooling on {} is not supported by the wgpu target", y.dtype)));
        }
        let (step, fin) = match self.kind {
            PoolKind::Max => ("if (v > acc || is_nan(v)) { acc = v; }".to_string(), "acc".to_string()),
            PoolKind::Avg { .. } => ("acc += v;".into(), format!("acc / {}", scalar::f32_lit(len as f32))),
            PoolKind::Lp { p } => (format!("acc += pow_f32(abs(v), {});", scalar::f32_lit(p)), format!("pow_f32(acc, {})", scalar::f32_lit(1.0 / p))),
        };
        Ok(vec![cx.pointwise(&y, |i| {
            // The maximum starts at the first element (WGSL has no infinity literal).
            let init = if matches!(self.kind, PoolKind::Max) { x.load(&format!("{i} * {len}u")) } else { "0.0".into() };
            Ok((format!("var acc = {init};\nfor (var k = 0u; k < {len}u; k++) {{ let v = {}; {step} }}\n", x.load(&format!("{i} * {len}u + k"))), fin.clone()))
        })?])
    }

    flops!(per_input 1);

    /// Average: dY spread evenly over the plane; max: dY routed to the plane's first maximum.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (x, dy, xd) = grad_operands(cx, 2, "batch and channels")?;
        let b = &mut *cx.b;
        let plane: usize = xd[2..].iter().product();
        let dt = b.dtype(x)?;
        let dx = match self.kind {
            PoolKind::Avg { .. } => {
                let k = b.scalar(1.0 / plane.max(1) as f64, dt)?;
                let t = b.mul(dy, k)?;
                let s = b.shape_of(x)?;
                b.node(Op::Expand, &[t, s])?
            }
            PoolKind::Max => {
                let v3 = b.ints(&[xd[0] as i64, xd[1] as i64, plane as i64]);
                let x3 = b.node(Op::Reshape { allowzero: false }, &[x, v3])?;
                let am = b.node(super::reduce::ArgReduce { max: true, axis: 2, keepdims: true, select_last_index: false }.op(), &[x3])?;
                let pos = b.konst(Tensor::from_i64s(vec![plane], (0..plane as i64).collect()));
                let eq = b.bin(crate::ir::BinaryOp::Equal, pos, am)?;
                let m = b.node(super::cast::op(dt, false), &[eq])?;
                let v31 = b.ints(&[xd[0] as i64, xd[1] as i64, 1]);
                let dy3 = b.node(Op::Reshape { allowzero: false }, &[dy, v31])?;
                let d = b.mul(m, dy3)?;
                b.reshape_like(d, x)?
            }
            PoolKind::Lp { .. } => return Err("no gradient rule for GlobalLpPool".into()),
        };
        Ok(vec![Some(dx)])
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 2, 3], (0..36).map(|i| ((i * 7 % 13) as f32 - 6.0) / 4.0).collect());
    let mut v: Vec<super::Example> = [PoolKind::Max, PoolKind::Avg { count_include_pad: false }, PoolKind::Lp { p: 2.0 }]
        .into_iter()
        .map(|kind| super::Example { consts: vec![], op: OpRef::new(GlobalPool { kind }), inputs: vec![x.clone()] })
        .collect();
    let x4 = Tensor::from_f32s(vec![2, 3, 7, 6], (0..252).map(|i| ((i * 37 % 29) as f32 - 14.0) / 8.0).collect());
    let x3 = Tensor::from_f32s(vec![2, 2, 9], (0..36).map(|i| ((i * 11 % 17) as f32 - 8.0) / 4.0).collect());
    let window = |kernel: Vec<usize>, strides: Vec<usize>, pads: Vec<usize>, dilations: Vec<usize>, ceil_mode| Window { kernel_shape: kernel, strides, pads, dilations, auto_pad: AutoPad::NotSet, ceil_mode };
    let pools = [
        // Indices counted column-major, dilated rows, padding.
        (Pool { kind: PoolKind::Max, window: window(vec![3, 2], vec![2, 2], vec![1, 1, 1, 0], vec![2, 1], false), column_major: true }, x4.clone()),
        // Padding left out of the average; ceil_mode's extra window.
        (Pool { kind: PoolKind::Avg { count_include_pad: false }, window: window(vec![3, 3], vec![2, 2], vec![1, 0, 0, 1], vec![], true), column_major: false }, x4),
        (Pool { kind: PoolKind::Lp { p: 2.0 }, window: window(vec![3], vec![2], vec![], vec![], false), column_major: false }, x3),
    ];
    v.extend(pools.into_iter().map(|(p, x)| super::Example { consts: vec![], op: OpRef::new(p), inputs: vec![x] }));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::check_gradient;

    #[test]
    fn global_pools_reduce_each_plane() {
        let x = Tensor::from_f32s(vec![1, 2, 2], vec![3.0, -4.0, 1.0, 2.0]);
        let run = |kind| GlobalPool { kind }.eval(&[Some(&x)]).expect("pool").remove(0);
        let (max, avg, lp) = (run(PoolKind::Max), run(PoolKind::Avg { count_include_pad: true }), run(PoolKind::Lp { p: 2.0 }));
        assert_eq!(max.shape, vec![1, 2, 1]);
        assert_eq!(max.to_f64_vec(), vec![3.0, 2.0]);
        assert_eq!(avg.to_f64_vec(), vec![-0.5, 1.5]);
        let l = lp.to_f64_vec();
        assert!((l[0] - 5.0).abs() < 1e-6 && (l[1] - 5f64.sqrt()).abs() < 1e-6, "{l:?}");
        assert!(GlobalPool { kind: PoolKind::Max }.eval(&[Some(&Tensor::from_f32s(vec![3], vec![1.0; 3]))]).is_err());
    }

    #[test]
    fn window_pool_shapes_over_named_dims() {
        let (n, h) = (DimExpr::var("n"), DimExpr::var("h"));
        let arg = |dims: Vec<DimExpr>| crate::ops::Arg { dtype: DType::F32, dims: Some(dims), value: None };
        let win = |kernel: usize, stride: usize, pads: Vec<usize>, ceil_mode| Window { kernel_shape: vec![kernel], strides: vec![stride], pads, dilations: vec![], auto_pad: AutoPad::NotSet, ceil_mode };
        let shapes = |p: Pool| {
            let mut cx = ShapeCx::new(vec![Some(arg(vec![n.clone(), DimExpr::constant(3), h.clone()]))]);
            let outs = p.shapes(&mut cx).expect("shapes");
            (outs, cx.checks.len())
        };
        // A "same" window keeps the named dim; MaxPool's indices share the output's dims.
        let (outs, checks) = shapes(Pool { kind: PoolKind::Max, window: win(3, 1, vec![1, 1], false), column_major: false });
        assert_eq!(outs.len(), 2);
        assert_eq!(outs[0].dims, Some(vec![n.clone(), DimExpr::constant(3), h.clone()]));
        assert_eq!((outs[1].dtype, &outs[1].dims), (DType::I64, &outs[0].dims));
        assert_eq!(checks, 1, "the window must fit the padded input");
        // Stride 2: an expression of h, which gives resolve's size at every h.
        let (outs, _) = shapes(Pool { kind: PoolKind::Avg { count_include_pad: false }, window: win(3, 2, vec![0, 1], false), column_major: false });
        assert_eq!(outs.len(), 1);
        let d = outs[0].dims.as_ref().expect("dims")[2].clone();
        for len in 2..20 {
            let want = resolve(&win(3, 2, vec![0, 1], false), &[3], &[len]).expect("window").output[2] as i64;
            assert_eq!(d.eval(&|v| (v == "h").then_some(len as i64)), Some(want), "h = {len}");
        }
        // ceil_mode whose last window may start in the padding: the size depends on h's value.
        let (outs, _) = shapes(Pool { kind: PoolKind::Max, window: win(2, 2, vec![1, 1], true), column_major: false });
        assert!(crate::ops::is_unknown(&outs[0].dims.as_ref().expect("dims")[2]));
        // Unknown rank: unknown dims, no error.
        let mut cx = ShapeCx::new(vec![Some(crate::ops::Arg { dtype: DType::F32, dims: None, value: None })]);
        assert_eq!(Pool { kind: PoolKind::Max, window: win(2, 2, vec![], false), column_major: false }.shapes(&mut cx).expect("shapes")[0].dims, None);
    }

    #[test]
    fn window_pool_gradients_match_finite_differences() {
        let window = Window { kernel_shape: vec![3, 2], strides: vec![2, 1], pads: vec![1, 0, 1, 1], dilations: vec![], auto_pad: AutoPad::NotSet, ceil_mode: false };
        for kind in [PoolKind::Max, PoolKind::Avg { count_include_pad: false }, PoolKind::Avg { count_include_pad: true }] {
            check_gradient(Pool { kind, window: window.clone(), column_major: true }.op(), &[&[2, 3, 5, 4]], -2.0, 2.0);
        }
    }

    #[test]
    fn global_pool_gradients_match_finite_differences() {
        for kind in [PoolKind::Max, PoolKind::Avg { count_include_pad: true }] {
            check_gradient(GlobalPool { kind }.op(), &[&[2, 3, 4, 5]], -2.0, 2.0);
            check_gradient(GlobalPool { kind }.op(), &[&[2, 3, 7]], -2.0, 2.0);
        }
    }
}
