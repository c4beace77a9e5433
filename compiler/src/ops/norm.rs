//! Normalizations along the trailing axes or one axis that keep the input's shape:
//! LayerNormalization, RMSNormalization and LpNormalization. Each is a runtime kernel
//! over the `[outer, len, inner]` view around its axis.
use super::{around, input, product, view_sizes, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::f32_lit;
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis;
use crate::ir::{DType, DimExpr, ValueId};
use crate::tensor::Tensor;

/// The input's dims, which the rule needs.
fn x_dims(cx: &ShapeCx) -> R<Option<Vec<DimExpr>>> {
    Ok(cx.arg(0)?.dims.clone())
}

/// Output 0 typed and shaped like input 0.
fn like_x(cx: &ShapeCx) -> R<Vec<OutType>> {
    let x = cx.arg(0)?;
    Ok(vec![OutType { dtype: x.dtype, dims: x.dims.clone() }])
}

/// LayerNormalization `(X, scale, B?)` over the axes from `axis`: `(x - mean) / sqrt(var + ε)
/// · scale + B`, and optionally the statistics Mean and InvStdDev (f32, X's dims with the
/// normalized ones 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerNorm {
    pub axis: i64,
    pub epsilon: f32,
}

/// The element count of the dims of X (`xs`) a scale or bias of dims `ss` covers, right-aligned
/// past its leading 1s, when it covers them unbroadcast (each dim X's, or 1 where X's is 1:
/// the shape rule made the others checks); `None` for a broadcast one.
fn covered(xs: &[DimExpr], ss: &[DimExpr]) -> Option<DimExpr> {
    let one = DimExpr::constant(1);
    let cover = ss.len() - ss.iter().take_while(|d| **d == one).count();
    let tail = &xs[xs.len().checked_sub(cover)?..];
    ss[ss.len() - cover..].iter().zip(tail).all(|(s, x)| *s != one || *x == one).then(|| product(tail))
}

/// Scale and bias must cover the normalized dims exactly: the kernel takes `inner` values.
fn covers_inner(cx: &EmitCx, v: ValueId, inner: &DimExpr) -> Result<bool, CodegenError> {
    let (xs, ss) = (cx.dims(cx.input(0)?)?, cx.dims(v)?);
    Ok(covered(&xs, &ss).as_ref() == Some(inner))
}

impl OpDef for LayerNorm {
    name!("LayerNormalization");
    none_of!(in_place, decides_shapes, forwards_values);

    // One warp per normalized row: mean, then the centred variance, then the output (the row
    // is read three times, from cache after the first).
    // One invocation per normalized row: mean, centred variance, output.
    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let (x, y, scale) = (cx.input(0)?, cx.output(0)?, cx.input(1)?);
        if !crate::codegen::wgsl::scalar::is_float(x.dtype) {
            return Err(cx.err(format!("LayerNormalization on {} is not supported by the wgpu target yet", x.dtype)));
        }
        let a = norm_axis(self.axis, x.shape.len()).map_err(|e| cx.err(e))?;
        let (outer, inner): (usize, usize) = (x.shape[..a].iter().product(), x.shape[a..].iter().product());
        let bias = cx.opt_input(2)?;
        if scale.numel() != inner || bias.as_ref().is_some_and(|b| b.numel() != inner) {
            return Err(cx.err("a broadcast Scale or B is not supported by the wgpu target yet"));
        }
        let b = bias.map(|b| format!(" + {}", b.load("k"))).unwrap_or_default();
        let mut stats = String::new();
        for (k, what) in [(1, "mean"), (2, "inv")] {
            if let Some(t) = cx.used_output(k)? {
                stats += &t.store("row", what).ok_or_else(|| cx.err("statistics type"))?;
            }
        }
        if !y.owns_words(inner) {
            return Err(cx.err(format!("rows of {inner} {} elements are not supported by the wgpu target yet", y.dtype)));
        }
        let store = y.store_in_word("at + k", &format!("({} - mean) * inv * {}{b}", x.load("at + k"), scale.load("k"))).ok_or_else(|| cx.err("output type"))?;
        let body = format!(
            "let at = row * {inner}u;\nvar s = 0.0;\nfor (var k = 0u; k < {inner}u; k++) {{ s += {x}; }}\nlet mean = s / {n};\n\
             s = 0.0;\nfor (var k = 0u; k < {inner}u; k++) {{ let d = {x} - mean; s += d * d; }}\n\
             let inv = 1.0 / sqrt(s / {n} + {eps});\nfor (var k = 0u; k < {inner}u; k++) {{ {store} }}\n{stats}",
            x = x.load("at + k"),
            n = crate::codegen::wgsl::scalar::f32_lit(inner as f32),
            eps = crate::codegen::wgsl::scalar::f32_lit(self.epsilon),
        );
        Ok(vec![cx.rows(outer, &body)])
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        let x = cx.input(0)?;
        let (xd, xs) = cx.ty(x)?;
        let a = norm_axis(self.axis, xs.len()).map_err(|e| cx.err(e))?;
        let (outer, inner): (usize, usize) = (xs[..a].iter().product(), xs[a..].iter().product());
        let dims = |s: &[usize]| s.iter().map(|&d| DimExpr::constant(d as i64)).collect::<Vec<_>>();
        let covers = |v: ValueId| -> Result<bool, CodegenError> { Ok(covered(&dims(&xs), &dims(&cx.ty(v)?.1)) == Some(DimExpr::constant(inner as i64))) };
        let scale = cx.input(1)?;
        if !covers(scale)? || cx.opt_input(2).map(covers).transpose()? == Some(false) {
            return Err(cx.err("a broadcast Scale or B is not supported by the CUDA target yet"));
        }
        let t = cx.acc(xd)?;
        let bias = match cx.opt_input(2) {
            Some(b) => format!(" + ({t}){}[k]", cx.ptr(b)?),
            None => String::new(),
        };
        let mut stats = String::new();
        for (k, what) in [(1, "mean"), (2, "inv")] {
            if let Some(v) = cx.used_output(k) {
                stats += &format!("if (lane == 0) {}[row] = {what};\n", cx.ptr(v)?);
            }
        }
        let (sqrt, eps) = if t == "double" { ("sqrt", format!("{}", self.epsilon as f64)) } else { ("sqrtf", crate::codegen::cuda::scalar::f32_lit(self.epsilon)) };
        let sum = crate::codegen::cuda::kernels::warp_reduce("s", false);
        let body = format!(
            "const long long at = (long long)row * {inner};\n\
             {t} s = 0;\nfor (int k = lane; k < {inner}; k += 32) s += ({t}){x}[at + k];\n{sum}\
             const {t} mean = s / {inner};\n\
             s = 0;\nfor (int k = lane; k < {inner}; k += 32) {{ {t} d = ({t}){x}[at + k] - mean; s += d * d; }}\n{sum}\
             const {t} inv = 1 / {sqrt}(s / {inner} + {eps});\n\
             for (int k = lane; k < {inner}; k += 32) {y}[at + k] = (({t}){x}[at + k] - mean) * inv * ({t}){scale}[k]{bias};\n{stats}",
            x = cx.ptr(x)?,
            y = cx.ptr(cx.output(0)?)?,
            scale = cx.ptr(scale)?,
        );
        Ok(vec![cx.warp_rows(outer, &body)])
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let stat = match &x.dims {
            Some(xs) => {
                let a = norm_axis(self.axis, xs.len())?;
                for i in 1..3 {
                    if let Some(ds) = cx.opt(i).and_then(|p| p.dims.clone()) {
                        if cx.broadcast(xs, &ds)?.len() != xs.len() {
                            return Err(format!("input #{i} of rank {} does not broadcast to X of rank {}", ds.len(), xs.len()));
                        }
                    }
                }
                Some(xs.iter().enumerate().map(|(i, d)| if i < a { d.clone() } else { DimExpr::constant(1) }).collect())
            }
            None => None,
        };
        Ok(vec![
            OutType { dtype: x.dtype, dims: x.dims.clone() },
            OutType { dtype: DType::F32, dims: stat.clone() },
            OutType { dtype: DType::F32, dims: stat },
        ])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let bias = ins.get(2).copied().flatten();
        let (y, mean, inv) = crate::interp::ops::norm::stats::layer_norm(input(ins, 0)?, input(ins, 1)?, bias, self.axis, self.epsilon as f64)?;
        Ok(vec![y, mean, inv])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let xd = cx.dtype_among(x, &[DType::F32, DType::F64])?;
        let xs = cx.dims(x)?;
        let a = norm_axis(self.axis, xs.len()).map_err(|e| cx.err(e))?;
        let (outer, inner) = (product(&xs[..a]), product(&xs[a..]));
        let scale = cx.input(1)?;
        if !covers_inner(cx, scale, &inner)? {
            return Err(cx.err("a broadcast Scale is not supported by codegen yet"));
        }
        let bias = match cx.opt_input(2) {
            Some(b) if !covers_inner(cx, b, &inner)? => return Err(cx.err("a broadcast B is not supported by codegen yet")),
            Some(b) => format!("Some({})", cx.read(b)?),
            None => "None".into(),
        };
        // Statistics wanted in another type than X's go through scratch in X's type.
        let stats: Vec<Option<(ValueId, bool)>> =
            (1..3).map(|k| cx.used_output(k).map(|v| cx.dtype(v).map(|d| (v, d != xd))).transpose()).collect::<Result<_, _>>()?;
        let n = cx.size(&outer)?;
        let mut s = String::new();
        if stats.iter().flatten().any(|st| st.1) {
            s += &format!("let st = {};\nlet (sm, si) = st.split_at_mut({n});\n", cx.scratch(xd)?);
        }
        let arg = |k: usize| -> Result<String, CodegenError> {
            Ok(match stats[k] {
                None => "None".to_string(),
                Some((_, true)) => format!("Some(&mut {}[..{n}])", if k == 0 { "sm" } else { "si" }),
                Some((v, false)) => format!("Some({})", cx.write(v)?),
            })
        };
        s += &format!(
            "rt::kernels::norm::layer_norm({}, {}, {n}, {}, {}, {bias}, {}, {}, {});\n",
            cx.read(x)?,
            cx.write(cx.output(0)?)?,
            cx.size(&inner)?,
            cx.read(scale)?,
            crate::codegen::emit::f64_lit(self.epsilon as f64),
            arg(0)?,
            arg(1)?
        );
        for (k, st) in stats.iter().enumerate() {
            if let Some((v, true)) = st {
                let ot = cx.elem(*v)?;
                if !matches!(ot, "f32" | "f64") {
                    return Err(cx.err(format!("LayerNormalization statistics in {ot} are not supported by codegen yet")));
                }
                s += &format!("for (o, i) in {}.iter_mut().zip({}.iter()) {{ *o = *i as {ot}; }}\n", cx.write(*v)?, if k == 0 { "sm" } else { "si" });
            }
        }
        Ok(s)
    }

    // Statistics in f32 of an f64 X go through scratch: two per normalized row.
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        match ins.first() {
            Some(Some((DType::F64, xs))) => match norm_axis(self.axis, xs.len()) {
                Ok(a) => 2 * xs[..a].iter().product::<usize>() * 8,
                Err(_) => 0,
            },
            _ => 0,
        }
    }

    flops!(per_input 5);

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::norm::scale_norm(cx, self.axis, self.epsilon, true)
    }
}

/// RMSNormalization: `x / sqrt(mean(x², axes [axis, rank)) + ε) · scale`, scale broadcast
/// to X (numpy rules).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsNorm {
    pub axis: i64,
    pub epsilon: f32,
}

impl OpDef for RmsNorm {
    name!("RMSNormalization");
    none_of!(cuda, scratch_bytes, in_place, decides_shapes, forwards_values);

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let (x, y, scale) = (cx.input(0)?, cx.output(0)?, cx.input(1)?);
        if !crate::codegen::wgsl::scalar::is_float(x.dtype) {
            return Err(cx.err(format!("RMSNormalization on {} is not supported by the wgpu target yet", x.dtype)));
        }
        let a = norm_axis(self.axis, x.shape.len()).map_err(|e| cx.err(e))?;
        let (outer, inner): (usize, usize) = (x.shape[..a].iter().product(), x.shape[a..].iter().product());
        // The scale over the normalized dims or over all of X (as the CPU kernel takes it).
        let sl = scale.numel();
        if sl != inner && sl != x.numel() {
            return Err(cx.err("a broadcast scale is not supported by the wgpu target yet"));
        }
        if !y.owns_words(inner) {
            return Err(cx.err(format!("rows of {inner} {} elements are not supported by the wgpu target yet", y.dtype)));
        }
        let store = y.store_in_word("at + k", &format!("{} * inv * {}", x.load("at + k"), scale.load(&format!("(at + k) % {sl}u")))).ok_or_else(|| cx.err("output type"))?;
        let body = format!(
            "let at = row * {inner}u;\nvar s = 0.0;\nfor (var k = 0u; k < {inner}u; k++) {{ let v = {x}; s += v * v; }}\n\
             let inv = 1.0 / sqrt(s / {n} + {eps});\nfor (var k = 0u; k < {inner}u; k++) {{ {store} }}",
            x = x.load("at + k"),
            n = crate::codegen::wgsl::scalar::f32_lit(inner as f32),
            eps = crate::codegen::wgsl::scalar::f32_lit(self.epsilon),
        );
        Ok(vec![cx.rows(outer, &body)])
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        if let (Some(xs), Some(ss)) = (x_dims(cx)?, cx.arg(1)?.dims.clone()) {
            if xs.is_empty() {
                return Err("input must have rank >= 1".into());
            }
            norm_axis(self.axis, xs.len())?;
            if cx.broadcast(&xs, &ss)?.len() != xs.len() {
                return Err(format!("scale of rank {} does not broadcast to X of rank {}", ss.len(), xs.len()));
            }
        }
        like_x(cx)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![crate::interp::ops::loss::rms_norm(input(ins, 0)?, input(ins, 1)?, self.axis, self.epsilon)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, scale) = (cx.input(0)?, cx.input(1)?);
        if !matches!(cx.dtype(x)?, DType::F32 | DType::F64) {
            return Err(cx.err(format!("RMSNormalization on {} is not supported by codegen yet", cx.dtype(x)?)));
        }
        let (xs, ss) = (cx.dims(x)?, cx.dims(scale)?);
        let a = norm_axis(self.axis, xs.len()).map_err(|e| cx.err(e))?;
        // The kernel takes the scale over the normalized dims or over all of X.
        match covered(&xs, &ss) {
            Some(len) if len == product(&xs[a..]) || len == product(&xs) => {}
            _ => return Err(cx.err("a broadcast scale is not supported by codegen yet")),
        }
        Ok(format!(
            "rt::kernels::norm::rms_norm({}, {}, {}, {}, {}, {});",
            cx.read(x)?,
            cx.write(cx.output(0)?)?,
            cx.size(&product(&xs[..a]))?,
            cx.size(&product(&xs[a..]))?,
            cx.read(scale)?,
            f32_lit(self.epsilon)
        ))
    }

    // Square, sum, scale: about four per element.
    flops!(per_input 4);

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::norm::scale_norm(cx, self.axis, self.epsilon, false)
    }
}

/// LpNormalization: `x / ‖x‖_p` along one axis, p 1 or 2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LpNorm {
    pub axis: i64,
    pub p: i64,
}

impl OpDef for LpNorm {
    name!("LpNormalization");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        if self.p != 1 && self.p != 2 {
            return Err(format!("LpNormalization supports p = 1 or 2, got {}", self.p));
        }
        if let Some(xs) = x_dims(cx)? {
            norm_axis(self.axis, xs.len())?;
        }
        like_x(cx)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![crate::interp::ops::norm::local::lp_norm(input(ins, 0)?, self.axis, self.p)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        if !matches!(cx.dtype(x)?, DType::F32 | DType::F64) {
            return Err(cx.err(format!("LpNormalization on {} is not supported by codegen yet", cx.dtype(x)?)));
        }
        let xs = cx.dims(x)?;
        let a = norm_axis(self.axis, xs.len()).map_err(|e| cx.err(e))?;
        Ok(format!(
            "rt::kernels::norm::lp_norm({}, {}, {}, {});",
            cx.read(x)?,
            cx.write(cx.output(0)?)?,
            view_sizes(cx, &around(&xs, a))?,
            self.p
        ))
    }

    flops!(per_input 3);
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect());
    let scale = Tensor::from_f32s(vec![4], vec![1.0, 0.5, -1.5, 2.0]);
    let bias = Tensor::from_f32s(vec![4], vec![0.25, -0.5, 0.0, 1.0]);
    vec![
        super::Example { consts: vec![], op: OpRef::new(LayerNorm { axis: -1, epsilon: 1e-5 }), inputs: vec![x.clone(), scale.clone(), bias] },
        super::Example { consts: vec![], op: OpRef::new(LayerNorm { axis: 1, epsilon: 1e-3 }), inputs: vec![x.clone(), Tensor::from_f32s(vec![3, 4], (0..12).map(|i| 1.0 + i as f32 / 8.0).collect())] },
        super::Example { consts: vec![], op: OpRef::new(RmsNorm { axis: -1, epsilon: 1e-5 }), inputs: vec![x.clone(), scale] },
        super::Example { consts: vec![], op: OpRef::new(LpNorm { axis: 1, p: 2 }), inputs: vec![x] },
    ]
}
