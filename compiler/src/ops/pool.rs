//! Global pooling (GlobalMaxPool, GlobalAveragePool, GlobalLpPool): each `(image, channel)`
//! plane of an `N×C×…` input to one value; the output keeps N and C and has every other dim 1.
use super::{input, product, EmitCx, GradCx, IntoOp, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::f64_lit;
use crate::codegen::CodegenError;
use crate::ir::{DType, DimExpr, Op, PoolKind, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::pool as k;

/// Global pooling of kind `kind` (the window ops' `PoolKind`; Avg's `count_include_pad` has no
/// meaning without padding).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlobalPool {
    pub kind: PoolKind,
}

impl GlobalPool {
    /// The runtime kernel's `(code, p)` for the kind: 0 max, 1 average, 2 Lp of order `p`.
    fn code(&self) -> (u8, f64) {
        match self.kind {
            PoolKind::Max => (0, 0.0),
            PoolKind::Avg { .. } => (1, 0.0),
            PoolKind::Lp { p } => (2, p as f64),
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
        let (code, p) = self.code();
        macro_rules! go {
            ($($v:ident),*) => {
                match &x.data {
                    $(Data::$v(xs) if code == 0 || x.dtype().is_float() => {
                        let mut y = vec![burnc_runtime::Elem::zero(); planes];
                        k::global_pool(xs, planes, size, &mut y, code, p);
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
        let (code, p) = self.code();
        Ok(format!(
            "rt::kernels::pool::global_pool({}, {}, {}, {}, {code}, {});",
            cx.read(x)?,
            cx.size(&n)?,
            cx.size(&len)?,
            cx.write(cx.output(0)?)?,
            f64_lit(p)
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
        let (x, dy) = (cx.input(0)?, cx.dy()?);
        let b = &mut *cx.b;
        let xd = b.fixed_dims(x)?;
        if xd.len() < 2 {
            return Err(format!("input of rank {} (need batch and channels)", xd.len()));
        }
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
    [PoolKind::Max, PoolKind::Avg { count_include_pad: false }, PoolKind::Lp { p: 2.0 }]
        .into_iter()
        .map(|kind| super::Example { consts: vec![], op: OpRef::new(GlobalPool { kind }), inputs: vec![x.clone()] })
        .collect()
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
    fn global_pool_gradients_match_finite_differences() {
        for kind in [PoolKind::Max, PoolKind::Avg { count_include_pad: true }] {
            check_gradient(GlobalPool { kind }.op(), &[&[2, 3, 4, 5]], -2.0, 2.0);
            check_gradient(GlobalPool { kind }.op(), &[&[2, 3, 7]], -2.0, 2.0);
        }
    }
}
