//! Normalizations by statistics over the spatial dims of an `[N, C, …]` input:
//! InstanceNormalization (per sample and channel), GroupNormalization (per sample and group of
//! channels), MeanVarianceNormalization (over any axes, no scale), LRN (over neighbouring
//! channels at each position) and training-mode BatchNormalization (per channel, over the batch
//! too). Each computes its statistics at run time, so every dim may be bounded; the sizes the scale and bias must have are relations the shape rule declares.
//! Inference-mode BatchNormalization, whose statistics are inputs, is here too.
use super::{input, numel, product, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::f64_lit;
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, Op, ValueId};
use crate::tensor::Tensor;

/// X's dims, which must be at least `[N, C]`, and output 0 typed like X.
fn like_nc(cx: &ShapeCx, what: &str) -> R<(Vec<DimExpr>, Vec<OutType>)> {
    let x = cx.arg(0)?;
    if !x.dtype.is_float() {
        return Err(format!("{what} needs a float input, got {}", x.dtype));
    }
    let xs = x.dims()?.to_vec();
    if xs.len() < 2 {
        return Err(format!("{what} needs an input of rank at least 2, got {}", xs.len()));
    }
    Ok((xs.clone(), vec![OutType { dtype: x.dtype, dims: Some(xs) }]))
}

/// Inputs `i` (scale, bias) hold `len` elements of X's dtype.
fn params_of(cx: &mut ShapeCx, ins: &[usize], len: &DimExpr) -> R<()> {
    let dt = cx.arg(0)?.dtype;
    for &i in ins {
        let a = cx.arg(i)?.clone();
        if a.dtype != dt {
            return Err(format!("input #{i} is {}, X is {dt}", a.dtype));
        }
        cx.equal(&format!("input #{i}'s size"), &product(a.dims()?), len)?;
    }
    Ok(())
}

/// The kernels' precision: f32 and f64 (the runtime's statistics kernels are generic over it).
fn float_only(cx: &EmitCx) -> Result<(ValueId, Vec<DimExpr>), CodegenError> {
    let x = cx.input(0)?;
    cx.dtype_among(x, &[DType::F32, DType::F64])?;
    Ok((x, cx.dims(x)?))
}

/// Instance- and GroupNormalization's kernels' leading arguments: X, Y and X's `[N, C,
/// spatial]` sizes.
fn x_y_nc_spatial(cx: &EmitCx) -> Result<String, CodegenError> {
    let (x, xs) = float_only(cx)?;
    let sizes = [xs[0].clone(), xs[1].clone(), product(&xs[2..])].iter().map(|d| cx.size(d)).collect::<Result<Vec<_>, _>>()?;
    Ok(format!("{}, {}, {}", cx.read(x)?, cx.write(cx.output(0)?)?, sizes.join(", ")))
}

/// InstanceNormalization: `(x − mean)/sqrt(var + ε)·scale[c] + bias[c]`, statistics per
/// sample and channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceNorm {
    pub epsilon: f32,
}

impl InstanceNorm {
    pub fn op(epsilon: f32) -> Op {
        Op::Def(OpRef::new(InstanceNorm { epsilon }))
    }
}

impl OpDef for InstanceNorm {
    name!("InstanceNormalization");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (xs, out) = like_nc(cx, "InstanceNormalization")?;
        params_of(cx, &[1, 2], &xs[1])?;
        Ok(out)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let y = crate::interp::ops::norm::stats::instance_norm(input(ins, 0)?, input(ins, 1)?, input(ins, 2)?, self.epsilon as f64)?;
        Ok(vec![y])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        Ok(format!(
            "rt::kernels::norm::instance_norm({}, {}, {}, {});",
            x_y_nc_spatial(cx)?,
            cx.read_input(1)?,
            cx.read_input(2)?,
            f64_lit(self.epsilon as f64)
        ))
    }

    flops!(per_input 5);

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let need: Vec<bool> = (0..cx.n.inputs.len()).map(|i| cx.wants(i)).collect();
        crate::autodiff::norm::channel_norm(cx.b, cx.n, cx.dys, &need, self.epsilon, false)
    }
}

/// GroupNormalization: statistics per sample and group of `C / num_groups` channels; scale
/// and bias per channel (opset 21) or per group (opset 18).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupNorm {
    pub num_groups: usize,
    pub epsilon: f32,
    pub per_channel: bool,
}

impl OpDef for GroupNorm {
    name!("GroupNormalization");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (xs, out) = like_nc(cx, "GroupNormalization")?;
        if self.num_groups == 0 {
            return Err("num_groups must be positive".into());
        }
        let groups = DimExpr::constant(self.num_groups as i64);
        cx.divides("the channels into num_groups groups", &groups, &xs[1])?;
        params_of(cx, &[1, 2], if self.per_channel { &xs[1] } else { &groups })?;
        Ok(out)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let y = crate::interp::ops::extra::group_norm(input(ins, 0)?, input(ins, 1)?, input(ins, 2)?, self.num_groups, self.epsilon as f64, self.per_channel)?;
        Ok(vec![y])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        Ok(format!(
            "rt::kernels::norm::group_norm({}, {}, {}, {}, {}, {});",
            x_y_nc_spatial(cx)?,
            self.num_groups,
            cx.read_input(1)?,
            cx.read_input(2)?,
            self.per_channel,
            f64_lit(self.epsilon as f64)
        ))
    }

    flops!(per_input 5);

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::norm::group_norm(cx, self.num_groups, self.epsilon, self.per_channel)
    }
}

/// MeanVarianceNormalization: `(x − mean)/(std + 1e-9)` over `axes`. The reduced axes are
/// moved last, normalized as rows and moved back (no move when they are last already).
#[derive(Debug, Clone, PartialEq)]
pub struct MeanVarianceNorm {
    pub axes: Vec<i64>,
}

impl MeanVarianceNorm {
    pub fn op(axes: Vec<i64>) -> Op {
        Op::Def(OpRef::new(MeanVarianceNorm { axes }))
    }

    /// The permutation putting the reduced axes last, and how many axes are kept.
    fn perm(&self, rank: usize) -> R<(Vec<usize>, usize)> {
        if rank > 16 {
            return Err(format!("MeanVarianceNormalization supports rank <= 16, got {rank}"));
        }
        let red = crate::interp::ops::util::norm_axes(&self.axes, rank)?;
        let mut perm: Vec<usize> = (0..rank).filter(|d| !red.contains(d)).collect();
        let kept = perm.len();
        perm.extend(red.iter().copied());
        Ok((perm, kept))
    }
}

fn is_identity(p: &[usize]) -> bool {
    p.iter().enumerate().all(|(i, &d)| i == d)
}

impl OpDef for MeanVarianceNorm {
    name!("MeanVarianceNormalization");
    none_of!(cuda, wgsl, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        if !x.dtype.is_float() {
            return Err(format!("MeanVarianceNormalization needs a float input, got {}", x.dtype));
        }
        if let Some(xs) = &x.dims {
            self.perm(xs.len())?;
        }
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims.clone() }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![crate::interp::ops::norm::stats::mean_var_norm(input(ins, 0)?, &self.axes)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, xs) = float_only(cx)?;
        let (perm, kept) = self.perm(xs.len()).map_err(|e| cx.err(e))?;
        let pshape: Vec<DimExpr> = perm.iter().map(|&d| xs[d].clone()).collect();
        let (outer, inner) = (cx.size(&product(&pshape[..kept]))?, cx.size(&product(&pshape[kept..]))?);
        let (rx, y) = (cx.read(x)?, cx.write(cx.output(0)?)?);
        if is_identity(&perm) {
            return Ok(format!("rt::kernels::norm::mean_var_norm({rx}, {y}, {outer}, {inner});"));
        }
        let mut inv = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inv[p] = i;
        }
        Ok(format!(
            "let len = {};\nlet (xp, rest) = {}.split_at_mut(len);\nlet yp = &mut rest[..len];\n\
             rt::kernels::permute::permute({rx}, &{}, &{perm:?}, xp);\n\
             rt::kernels::norm::mean_var_norm(xp, yp, {outer}, {inner});\n\
             rt::kernels::permute::permute(yp, &{}, &{inv:?}, {y});",
            cx.numel(x)?,
            cx.scratch(cx.dtype(x)?)?,
            cx.sizes(&xs)?,
            cx.sizes(&pshape)?
        ))
    }

    /// The permuted input and output, when the reduced axes are not last already.
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        let Some(Some((d, xs))) = ins.first() else { return 0 };
        match self.perm(xs.len()) {
            Ok((p, _)) if !is_identity(&p) => xs.iter().product::<usize>().saturating_mul(2 * d.size()),
            _ => 0,
        }
    }

    flops!(per_input 5);
}

/// LRN (local response normalization): `x / (bias + alpha/size · Σ x²)^beta`, the sum over the
/// `size` channels around each one (`⌊(size−1)/2⌋` before, `⌈(size−1)/2⌉` after) at the same
/// sample and position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lrn {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

impl OpDef for Lrn {
    name!("LRN");
    none_of!(scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims.clone() }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![crate::interp::ops::norm::local::lrn(input(ins, 0)?, self.size, self.alpha as f64, self.beta as f64, self.bias as f64)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let out = cx.output(0)?;
        cx.dtype_among(out, &[DType::F32, DType::F64])?;
        let s = cx.dims(out)?;
        if s.len() < 2 {
            return Err(cx.err("needs rank at least 2"));
        }
        Ok(format!(
            "rt::kernels::norm::lrn({}, {}, {}, {}, {}, {}, {}, {}, {});",
            cx.read_input(0)?,
            cx.write(out)?,
            cx.size(&s[0])?,
            cx.size(&s[1])?,
            cx.size(&product(&s[2..]))?,
            self.size,
            f64_lit(self.alpha as f64),
            f64_lit(self.beta as f64),
            f64_lit(self.bias as f64)
        ))
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        use crate::codegen::cuda::scalar::f32_lit;
        let (x, out) = (cx.input(0)?, cx.output(0)?);
        let (od, oshape) = cx.ty(out)?;
        let at = cx.acc(od)?;
        let c = oshape.get(1).copied().unwrap_or(1);
        let inner: usize = oshape.get(2..).map(|s| s.iter().product()).unwrap_or(1);
        let (x, y) = (cx.ptr(x)?, cx.ptr(out)?);
        let size = self.size;
        let (lo, hi) = ((size.max(1) - 1) / 2, (size.max(1) - 1).div_ceil(2));
        let body = format!(
            "int c = (i / {inner}) % {c};\n{at} s = 0;\n\
             for (int k = max(0, c - {lo}); k <= min({}, c + {hi}); ++k) {{ {at} v = {x}[i + (k - c) * {inner}]; s += v * v; }}\n\
             {y}[i] = {x}[i] / ({at})pow((double){} + (double){} / {size}.0 * (double)s, (double){});",
            c - 1,
            f32_lit(self.bias),
            f32_lit(self.alpha),
            f32_lit(self.beta)
        );
        Ok(vec![cx.pointwise(oshape.iter().product(), &body)])
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        use crate::codegen::wgsl::scalar;
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let od = y.dtype;
        if !scalar::is_float(od) {
            return Err(cx.err(format!("LRN on {od} is not supported by the wgpu target")));
        }
        let c = y.shape.get(1).copied().unwrap_or(1);
        let inner: usize = y.shape.get(2..).map(|s| s.iter().product()).unwrap_or(1);
        let size = self.size.max(1);
        let (lo, hi) = ((size - 1) / 2, (size - 1).div_ceil(2));
        let (bias, alpha, beta) = (scalar::f32_lit(self.bias), scalar::f32_lit(self.alpha / size as f32), scalar::f32_lit(self.beta));
        Ok(vec![cx.pointwise(&y, |i| {
            Ok((
                format!(
                    "let c = i32(({i} / {inner}u) % {c}u);\nvar s = 0.0;\nfor (var k = max(0, c - {lo}); k <= min({}, c + {hi}); k++) {{ let v = {}; s += v * v; }}\n",
                    c - 1,
                    x.load(&format!("u32(i32({i}) + (k - c) * {inner})"))
                ),
                format!("{} / pow_f32({bias} + {alpha} * s, {beta})", x.load(i)),
            ))
        })?])
    }

    // A multiply-add per channel summed, `size` per element.
    fn flops(&self, _: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        Some(numel(outs.first()?)?.saturating_mul(2).saturating_mul(self.size as u64))
    }
}

/// BatchNormalization in training mode, `(X, scale, B, input_mean, input_var)` → `(Y,
/// running_mean, running_var)`: normalized by the batch's statistics per channel, the running
/// statistics updated with `momentum`. (Inference BatchNorm is another op: BN folding takes it.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchNormTraining {
    pub epsilon: f32,
    pub momentum: f32,
}

impl OpDef for BatchNormTraining {
    name!("BatchNormTraining");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values);

    /// The running mean and variance have the input statistics' types and dims, one value per
    /// channel.
    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = batch_norm_inputs(cx)?;
        let like = |a: &super::Arg| OutType { dtype: a.dtype, dims: a.dims.clone() };
        Ok(vec![like(&x), like(cx.arg(3)?), like(cx.arg(4)?)])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let ps = [input(ins, 1)?, input(ins, 2)?, input(ins, 3)?, input(ins, 4)?];
        let (y, m, v) = crate::interp::ops::norm::stats::batch_norm_train(input(ins, 0)?, ps, self.epsilon as f64, self.momentum as f64)?;
        Ok(vec![y, m, v])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let (xd, xs) = (cx.dtype(x)?, cx.dims(x)?);
        if !matches!(xd, DType::F32 | DType::F64) {
            return Err(cx.err(format!("BatchNormalization on {xd} is not supported by codegen yet")));
        }
        let c = xs.get(1).ok_or_else(|| cx.err("BatchNormalization needs rank >= 2"))?;
        let dims = format!("[{}, {}, {}]", cx.size(&xs[0])?, cx.size(c)?, cx.size(&product(&xs[2..]))?);
        let mut args = Vec::new();
        for i in 1..5 {
            let v = cx.input(i)?;
            // Bounded sizes are checked at run time (the shape rule's constraints); fixed ones here.
            let len = product(&cx.dims(v)?);
            if cx.dtype(v)? != xd || matches!((len.as_const(), c.as_const()), (Some(a), Some(b)) if a != b) {
                return Err(cx.err(format!("input #{i} must be one {xd} per channel")));
            }
            args.push(cx.read(v)?);
        }
        // Running statistics nobody reads have no slot: the kernel skips empty outputs.
        let stat = |k: usize| cx.used_output(k).map_or_else(|| Ok("&mut []".to_string()), |o| cx.write(o));
        let (rm, rv) = (stat(1)?, stat(2)?);
        Ok(format!(
            "rt::kernels::norm::batch_norm_train({}, {}, {dims}, {}, {}, {}, {}, {}, {}, {rm}, {rv});",
            cx.read(x)?,
            cx.write(cx.output(0)?)?,
            args[0],
            args[1],
            args[2],
            args[3],
            f64_lit(self.epsilon as f64),
            f64_lit(self.momentum as f64)
        ))
    }

    // Statistics, then normalize and scale.
    flops!(per_input 5);

    /// Output 0's only: the running statistics feed the next step's state, not the loss.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let need: Vec<bool> = (0..cx.n.inputs.len()).map(|i| cx.wants(i)).collect();
        crate::autodiff::norm::channel_norm(cx.b, cx.n, cx.dys, &need, self.epsilon, true)
    }
}

/// X of a BatchNormalization, `(X, scale, B, mean, var)`, whose four per-channel inputs hold one
/// value per channel (relations the bounded analysis checks at run time).
fn batch_norm_inputs(cx: &mut ShapeCx) -> R<super::Arg> {
    let x = cx.arg(0)?.clone();
    if let Some(xs) = &x.dims {
        let ch = xs.get(1).ok_or("BatchNormalization needs rank >= 2")?;
        for i in 1..5 {
            if let Some(d) = cx.arg(i)?.dims.clone() {
                cx.equal(&format!("input #{i}'s size and the channels"), &product(&d), ch)?;
            }
        }
    }
    Ok(x)
}

/// Batch, channels and plane size (the product of the other dims) of an `[N, C, …]` f32 or f64
/// value, as kernel arguments (`what`: the op, in the error for another dtype).
fn float_planes(cx: &EmitCx, v: ValueId, what: &str) -> Result<[String; 3], CodegenError> {
    let dt = cx.dtype(v)?;
    if !matches!(dt, DType::F32 | DType::F64) {
        return Err(cx.err(format!("{what} on {dt} is not supported by codegen yet")));
    }
    let s = cx.dims(v)?;
    if s.len() < 2 {
        return Err(cx.err("needs rank at least 2"));
    }
    Ok([cx.size(&s[0])?, cx.size(&s[1])?, cx.size(&product(&s[2..]))?])
}

/// Inference-mode BatchNormalization, `(X, scale, B, mean, var)`: each channel's
/// `(x − mean) / √(var + ε) · scale + B`. Opsets before 9 may declare the statistics as outputs
/// in inference mode too: the interpreter passes the running statistics through; they have no
/// type, so code that reads them is refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchNorm {
    pub epsilon: f32,
}

impl OpDef for BatchNorm {
    name!("BatchNorm");
    none_of!(scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = batch_norm_inputs(cx)?;
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (scale, bias, mean, var) = (input(ins, 1)?, input(ins, 2)?, input(ins, 3)?, input(ins, 4)?);
        let y = crate::interp::ops::norm::stats::batch_norm(input(ins, 0)?, scale, bias, mean, var, self.epsilon as f64)?;
        Ok(vec![y, mean.clone(), var.clone(), mean.clone(), var.clone()])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let out = cx.output(0)?;
        let [b, c, plane] = float_planes(cx, out, "BatchNormalization")?;
        let args: Vec<String> = (1..5).map(|i| cx.read(cx.input(i)?)).collect::<Result<_, _>>()?;
        Ok(format!(
            "rt::kernels::norm::batch_norm({}, {}, {b}, {c}, {plane}, {}, {}, {}, {}, {});",
            cx.read(cx.input(0)?)?,
            cx.write(out)?,
            args[0],
            args[1],
            args[2],
            args[3],
            f64_lit(self.epsilon as f64)
        ))
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        use crate::codegen::cuda::scalar;
        let out = cx.output(0)?;
        let (od, oshape) = cx.ty(out)?;
        let y = cx.ptr(out)?;
        // Arithmetic in f32 for the 16-bit floats.
        let at = scalar::compute_type(od).map_or_else(|| cx.c(od), Ok)?;
        let c = oshape.get(1).copied().unwrap_or(1);
        let inner: usize = oshape.get(2..).map(|s| s.iter().product()).unwrap_or(1);
        let p = |k| cx.ptr(cx.input(k)?);
        let eps = format!("({at}){}", scalar::f32_lit(self.epsilon));
        let sqrt = if at == "float" { "sqrtf" } else { "sqrt" };
        Ok(vec![cx.pointwise(
            oshape.iter().product(),
            &format!(
                "int c = (i / {inner}) % {c};\n{y}[i] = ({x}[i] - {mean}[c]) / {sqrt}({var}[c] + {eps}) * {scale}[c] + {bias}[c];",
                x = p(0)?,
                scale = p(1)?,
                bias = p(2)?,
                mean = p(3)?,
                var = p(4)?
            ),
        )])
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        use crate::codegen::wgsl::scalar;
        let y = cx.output(0)?;
        let c = y.shape.get(1).copied().unwrap_or(1);
        let inner: usize = y.shape.get(2..).map(|s| s.iter().product()).unwrap_or(1);
        let ts: Vec<_> = (0..5).map(|k| cx.input(k)).collect::<Result<_, _>>()?;
        if !scalar::is_float(y.dtype) {
            return Err(cx.err(format!("BatchNorm on {} is not supported by the wgpu target", y.dtype)));
        }
        let eps = scalar::f32_lit(self.epsilon);
        Ok(vec![cx.pointwise(&y, |i| {
            Ok((format!("let c = ({i} / {inner}u) % {c}u;\n"), format!("({} - {}) / sqrt({} + {eps}) * {} + {}", ts[0].load(i), ts[3].load("c"), ts[4].load("c"), ts[1].load("c"), ts[2].load("c"))))
        })?])
    }

    // A multiply and an add per element once the per-channel factors are known.
    flops!(per_output 2);

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::norm::batch_norm(cx, self.epsilon)
    }
}

/// Generated code only (`passes::fuse`): `act((x · a[c] + b[c]) · M[c] + A[c])` along axis 1 of
/// `(X, a, b, M?, A?)`, in that order: a BatchNormalization (`a`, `b` as the batch-norm kernel
/// computes them) with the per-channel Mul and Add and the activation after it, in one pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleShift {
    pub act: crate::ir::Act,
}

impl OpDef for ScaleShift {
    name!("ScaleShift");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims.clone() }])
    }

    /// As the nodes it replaces compute it, step by step: the fused graph gives the unfused
    /// graph's bits.
    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        use crate::interp::{ops::nn, RtValue};
        let x = RtValue::Tensor(input(ins, 0)?.clone());
        let opt = |i: usize| ins.get(i).copied().flatten();
        let y = nn::mul_add(x, Some(input(ins, 1)?), Some(input(ins, 2)?))?;
        let y = nn::activate(nn::mul_add(y, opt(3), opt(4))?, self.act)?;
        Ok(vec![y.as_tensor()?.clone()])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let out = cx.output(0)?;
        let [b, c, plane] = float_planes(cx, out, "ScaleShift")?;
        let opt = |i: usize| cx.opt_input(i).map_or_else(|| Ok("None".to_string()), |v| cx.read(v).map(|r| format!("Some({r})")));
        Ok(format!(
            "rt::kernels::norm::scale_shift({}, {}, {b}, {c}, {plane}, {}, {}, {}, {}, {});",
            cx.read(cx.input(0)?)?,
            cx.write(out)?,
            cx.read(cx.input(1)?)?,
            cx.read(cx.input(2)?)?,
            opt(3)?,
            opt(4)?,
            crate::codegen::emit::nn::act_lit(self.act)
        ))
    }

    // A multiply and an add per element, and the optional ones.
    flops!(per_output 2);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 4, 3], (0..24).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect());
    let c4 = |v: [f32; 4]| Tensor::from_f32s(vec![4], v.to_vec());
    let g2 = |v: [f32; 2]| Tensor::from_f32s(vec![2], v.to_vec());
    vec![
        super::Example { consts: vec![], op: OpRef::new(InstanceNorm { epsilon: 1e-5 }), inputs: vec![x.clone(), c4([1.0, 0.5, -1.5, 2.0]), c4([0.25, -0.5, 0.0, 1.0])] },
        super::Example {
            consts: vec![],
            op: OpRef::new(GroupNorm { num_groups: 2, epsilon: 1e-5, per_channel: true }),
            inputs: vec![x.clone(), c4([1.0, 0.5, -1.5, 2.0]), c4([0.25, -0.5, 0.0, 1.0])],
        },
        super::Example { consts: vec![], op: OpRef::new(GroupNorm { num_groups: 2, epsilon: 1e-3, per_channel: false }), inputs: vec![x.clone(), g2([1.5, -1.0]), g2([0.5, 0.0])] },
        super::Example { consts: vec![], op: OpRef::new(MeanVarianceNorm { axes: vec![0, 2] }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(MeanVarianceNorm { axes: vec![2] }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(Lrn { size: 3, alpha: 1e-2, beta: 0.75, bias: 1.0 }), inputs: vec![x.clone()] },
        super::Example {
            consts: vec![],
            op: OpRef::new(Lrn { size: 2, alpha: 0.5, beta: 0.5, bias: 2.0 }),
            inputs: vec![Tensor::from_f32s(vec![2, 3, 2, 2], (0..24).map(|i| (i as f32 - 11.5) / 4.0).collect())],
        },
        super::Example { consts: vec![], op: OpRef::new(ScaleShift { act: crate::ir::Act::HardSwish }), inputs: vec![x.clone(), c4([1.0, 0.5, -1.5, 2.0]), c4([0.25, -0.5, 0.0, 1.0])] },
        super::Example {
            consts: vec![],
            op: OpRef::new(ScaleShift { act: crate::ir::Act::Clip(-0.5, 0.75) }),
            inputs: vec![x.clone(), c4([1.0, 0.5, -1.5, 2.0]), c4([0.25, -0.5, 0.0, 1.0]), c4([0.1, 2.0, -0.2, 0.3]), c4([1.0, -2.0, 0.5, 1.5])],
        },
        super::Example {
            consts: vec![],
            op: OpRef::new(BatchNorm { epsilon: 1e-3 }),
            inputs: vec![x.clone(), c4([1.0, 0.5, -1.5, 2.0]), c4([0.25, -0.5, 0.0, 1.0]), c4([0.1, 0.0, -0.2, 0.3]), c4([1.0, 2.0, 0.5, 1.5])],
        },
        super::Example {
            consts: vec![],
            op: OpRef::new(BatchNormTraining { epsilon: 1e-5, momentum: 0.9 }),
            inputs: vec![x, c4([1.0, 0.5, -1.5, 2.0]), c4([0.25, -0.5, 0.0, 1.0]), c4([0.1, 0.0, -0.2, 0.3]), c4([1.0, 2.0, 0.5, 1.5])],
        },
    ]
}
