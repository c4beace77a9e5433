//! Activations of their own: Swish, SwiGLU, BiasSplitGelu and Shrink. Their scalar functions
//! are the runtime's (`kernels::extra`) or, for Shrink, one expression, computed in f64 and
//! rounded to the element type, by the interpreter and generated code alike.
use crate::codegen::emit::f64_lit;
use super::{input, Arg, EmitCx, GradCx, IntoOp, OpDef, OpRef, OutType, ShapeCx, R};
use crate::autodiff::builder::B;
use crate::codegen::CodegenError;
use crate::ir::{Op, UnaryOp, ValueId};
use crate::map_float_data;
use crate::tensor::Tensor;
use burnc_runtime::kernels::extra::{bias_split_gelu, swiglu_map, swish_map};

/// A float input (f16, bf16, f32 or f64) shaped as it is.
fn float_arg<'a>(cx: &'a ShapeCx, i: usize, op: &str) -> R<&'a Arg> {
    let a = cx.arg(i)?;
    if !a.dtype.is_float() || a.dtype.is_small() {
        return Err(format!("{op} is not defined on {}", a.dtype));
    }
    Ok(a)
}

/// `x · sigmoid(alpha · x)` (ONNX Swish, opset 24).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Swish {
    pub alpha: f32,
}

impl OpDef for Swish {
    name!("Swish");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = float_arg(cx, 0, "Swish")?;
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims.clone() }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let a = self.alpha as f64;
        let data = map_float_data!(&x.data, v => {
            let mut y = vec![Default::default(); v.len()];
            swish_map(v, a, &mut y);
            y
        }, other => return Err(format!("Swish is not defined on {}", x.dtype())));
        Ok(vec![Tensor::new(x.shape.clone(), data)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        Ok(format!("rt::kernels::extra::swish_map({}, {}, {});", cx.read(x)?, f64_lit(self.alpha as f64), cx.write(y)?))
    }

    // A multiply, an exponential, an add and a divide per element.
    flops!(per_output 4);

    // dy/dx = s + a·x·s·(1 − s), s = sigmoid(a·x).
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (x, dy) = (cx.input(0)?, cx.dy()?);
        let d = swish_grad(cx.b, x, self.alpha)?;
        Ok(vec![Some(cx.b.mul(dy, d)?)])
    }
}

/// `A · sigmoid(alpha · A) · B` over two inputs of one shape (ONNX SwiGLU, opset 24).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwiGlu {
    pub alpha: f32,
}

impl OpDef for SwiGlu {
    name!("SwiGlu");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let a = float_arg(cx, 0, "SwiGLU")?.clone();
        cx.same_type(0, 1)?;
        Ok(vec![OutType { dtype: a.dtype, dims: a.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (a, b) = (input(ins, 0)?, input(ins, 1)?);
        if a.shape != b.shape || a.dtype() != b.dtype() {
            return Err(format!("SwiGLU needs inputs of one shape and type, got {:?} {} and {:?} {}", a.shape, a.dtype(), b.shape, b.dtype()));
        }
        let alpha = self.alpha as f64;
        macro_rules! go {
            ($($variant:ident),*) => {
                match (&a.data, &b.data) {
                    $((crate::tensor::Data::$variant(p), crate::tensor::Data::$variant(q)) => {
                        let mut y = vec![Default::default(); p.len()];
                        swiglu_map(p, q, alpha, &mut y);
                        crate::tensor::Data::$variant(y)
                    })*
                    _ => return Err(format!("SwiGLU is not defined on {}", a.dtype())),
                }
            };
        }
        Ok(vec![Tensor::new(a.shape.clone(), go!(F32, F64, F16, BF16))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (a, b, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
        Ok(format!("rt::kernels::extra::swiglu_map({}, {}, {}, {});", cx.read(a)?, cx.read(b)?, f64_lit(self.alpha as f64), cx.write(y)?))
    }

    // Swish's four and the product with B.
    flops!(per_output 5);

    // dA = dy·B·swish'(A), dB = dy·swish(A).
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (a, c, dy) = (cx.input(0)?, cx.input(1)?, cx.dy()?);
        let da = if cx.wants(0) {
            let d = swish_grad(cx.b, a, self.alpha)?;
            let t = cx.b.mul(dy, c)?;
            Some(cx.b.mul(t, d)?)
        } else {
            None
        };
        let dc = if cx.wants(1) {
            let sw = cx.b.node(Op::Def(OpRef::new(Swish { alpha: self.alpha })), &[a])?;
            Some(cx.b.mul(dy, sw)?)
        } else {
            None
        };
        Ok(vec![da, dc])
    }
}

/// onnxruntime's BiasSplitGelu (`com.microsoft`, as its transformer optimizer writes for
/// diffusion models): `(X, bias)` with X `[…, 2h]` and bias `[2h]`; `t = X + bias` split in half
/// along the last axis gives `t_left · gelu(t_right)`, `[…, h]` (gelu with erf).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BiasSplitGelu;

impl OpDef for BiasSplitGelu {
    // Not in place: the output is half as large as X.

    name!("BiasSplitGelu");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = float_arg(cx, 0, "BiasSplitGelu")?.clone();
        let bias = cx.arg(1)?.clone();
        let (xd, bdims) = (x.dims()?, bias.dims()?);
        let (Some(d), [bd]) = (xd.last(), bdims) else {
            return Err(format!("BiasSplitGelu needs X of rank >= 1 and a 1-D bias, got ranks {} and {}", xd.len(), bdims.len()));
        };
        if bias.dtype != x.dtype {
            return Err(format!("X is {} and bias {}", x.dtype, bias.dtype));
        }
        cx.equal("X's last dim and the bias length", d, bd)?;
        let h = d.floor_div(2);
        cx.equal("X's last dim and twice its half (it must be even)", d, &h.scale(2))?;
        let mut dims = xd.to_vec();
        *dims.last_mut().ok_or("rank 0")? = h;
        Ok(vec![OutType { dtype: x.dtype, dims: Some(dims) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, bias) = (input(ins, 0)?, input(ins, 1)?);
        let d = bias.numel();
        if bias.rank() != 1 || x.shape.last() != Some(&d) || d % 2 != 0 {
            return Err(format!("BiasSplitGelu needs X [..., 2h] and bias [2h], got {:?} and {:?}", x.shape, bias.shape));
        }
        let mut shape = x.shape.clone();
        if let Some(l) = shape.last_mut() {
            *l = d / 2;
        }
        let n = shape.iter().product();
        macro_rules! go {
            ($($variant:ident),*) => {
                match (&x.data, &bias.data) {
                    $((crate::tensor::Data::$variant(p), crate::tensor::Data::$variant(q)) => {
                        let mut y = vec![Default::default(); n];
                        bias_split_gelu(p, q, &mut y);
                        crate::tensor::Data::$variant(y)
                    })*
                    _ => return Err(format!("BiasSplitGelu is not defined on {} and {}", x.dtype(), bias.dtype())),
                }
            };
        }
        Ok(vec![Tensor::new(shape, go!(F32, F64, F16, BF16))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, bias, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
        Ok(format!("rt::kernels::extra::bias_split_gelu({}, {}, {});", cx.read(x)?, cx.read(bias)?, cx.write(y)?))
    }

    // Two bias adds, the erf (counted as one) and four multiplies or adds per output element.
    flops!(per_output 7);

    // y = a·gelu(b): dA = dy·gelu(b), dB = dy·a·(Φ(b) + b·φ(b)); dX is both halves side by side
    // and dbias their sum over the rows.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (x, bias, dy) = (cx.input(0)?, cx.input(1)?, cx.dy()?);
        let b = &mut *cx.b;
        let d = *b.fixed_dims(bias)?.first().ok_or("bias has rank 0")? as i64;
        let t = b.add(x, bias)?;
        let half = |b: &mut B<'_>, from: i64| -> R<ValueId> {
            let (s, e, ax) = (b.ints(&[from]), b.ints(&[from + d / 2]), b.ints(&[-1]));
            b.node(super::slice::Slice.op(), &[t, s, e, ax])
        };
        let (left, right) = (half(b, 0)?, half(b, d / 2)?);
        let (cdf, dgelu) = crate::autodiff::elementwise::gelu_cdf_and_grad(b, right)?;
        let gelu = b.mul(right, cdf)?;
        let da = b.mul(dy, gelu)?;
        let db = b.mul(dy, left)?;
        let db = b.mul(db, dgelu)?;
        let dx = b.node(Op::Concat { axis: -1 }, &[da, db])?;
        let want = (cx.wants(0), cx.wants(1));
        let dbias = if want.1 { Some(cx.b.sum_to(dx, bias)?) } else { None };
        Ok(vec![want.0.then_some(dx), dbias])
    }
}

/// Shrink: `x + bias` where `x < -lambd`, `x - bias` where `x > lambd`, 0 between; on every
/// numeric type, through f64 and rounded back to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shrink {
    pub lambd: f32,
    pub bias: f32,
}

impl OpDef for Shrink {
    name!("Shrink");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        Ok(vec![OutType { dtype: x.dtype, dims: x.dims.clone() }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let (l, b) = (self.lambd as f64, self.bias as f64);
        let v: Vec<f64> = x.to_f64_vec().into_iter().map(|v| if v < -l { v + b } else if v > l { v - b } else { 0.0 }).collect();
        Ok(vec![crate::interp::ops::cast::cast(&Tensor::new(x.shape.clone(), crate::tensor::Data::F64(v)), x.dtype(), false)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let t = cx.elem(x)?;
        let (l, b) = (self.lambd as f64, self.bias as f64);
        if !l.is_finite() || !b.is_finite() {
            return Err(cx.err("non-finite Shrink parameters"));
        }
        // Through f64 and back, as the interpreter.
        let e = format!("<{t} as rt::Elem>::from_f64({{ let v = rt::Elem::to_f64(v); if v < -{l:?} {{ v + {b:?} }} else if v > {l:?} {{ v - {b:?} }} else {{ 0.0 }} }})");
        Ok(format!("for (o, &v) in {}.iter_mut().zip({}) {{ *o = {e}; }}", cx.write(cx.output(0)?)?, cx.read(x)?))
    }

    // One comparison and add per element.
    flops!(per_output 1);
}

/// swish'(x) = s · (1 + a·x·(1 − s)), s = sigmoid(a·x).
fn swish_grad(b: &mut B<'_>, x: ValueId, alpha: f32) -> R<ValueId> {
    let dt = b.dtype(x)?;
    let a = b.scalar(alpha as f64, dt)?;
    let ax = b.mul(x, a)?;
    let s = b.un(UnaryOp::Sigmoid, ax)?;
    let one = b.scalar(1.0, dt)?;
    let oms = b.sub(one, s)?;
    let t = b.mul(ax, oms)?;
    let t = b.add(one, t)?;
    b.mul(s, t)
}

/// Inputs spanning both tails and zero (values in [-6, 6)), one batch of rows.
fn ramp(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|i| ((i * 37 + seed * 11) % 97) as f32 / 97.0 * 12.0 - 6.0).collect();
    Tensor::new(shape.to_vec(), crate::tensor::Data::F32(v))
}

pub fn examples() -> Vec<super::Example> {
    vec![
        super::Example { consts: vec![], op: OpRef::new(Swish { alpha: 1.7 }), inputs: vec![ramp(&[2, 3, 5], 0)] },
        super::Example { consts: vec![], op: OpRef::new(SwiGlu { alpha: 0.8 }), inputs: vec![ramp(&[3, 4], 0), ramp(&[3, 4], 1)] },
        super::Example { consts: vec![], op: OpRef::new(BiasSplitGelu), inputs: vec![ramp(&[2, 3, 8], 0), ramp(&[8], 1)] },
        super::Example { consts: vec![], op: OpRef::new(Shrink { lambd: 1.5, bias: 0.5 }), inputs: vec![ramp(&[3, 5], 2)] },
        super::Example { consts: vec![], op: OpRef::new(Shrink { lambd: 2.0, bias: 1.0 }), inputs: vec![Tensor::from_i64s(vec![2, 4], vec![-4, -3, -2, -1, 0, 1, 2, 5])] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::{check_gradient, check_shapes_and_eval};

    #[test]
    fn swish_and_swiglu_follow_their_formulas() {
        let x: Vec<f32> = vec![-4.0, -1.5, -0.25, 0.0, 0.5, 2.0, 6.0, 30.0];
        let y: Vec<f32> = vec![0.5, -2.0, 3.0, 1.0, -1.0, 0.25, 2.0, -0.5];
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let sw = |v: f64, a: f64| v * sig(a * v);
        check_shapes_and_eval(&Swish { alpha: 1.7 }, &[&x], &[2, 4], |i| sw(x[i] as f64, 1.7));
        check_shapes_and_eval(&SwiGlu { alpha: 0.8 }, &[&x, &y], &[2, 4], |i| sw(x[i] as f64, 0.8) * y[i] as f64);
    }

    #[test]
    fn shrink_follows_its_formula() {
        let x: Vec<f32> = vec![-4.0, -1.5, -0.25, 0.0, 0.5, 1.5, 2.0, 6.0];
        let want = |v: f64| if v < -1.5 { v + 0.5 } else if v > 1.5 { v - 0.5 } else { 0.0 };
        check_shapes_and_eval(&Shrink { lambd: 1.5, bias: 0.5 }, &[&x], &[2, 4], |i| want(x[i] as f64));
    }

    #[test]
    fn bias_split_gelu_follows_its_formula() {
        let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.7 - 4.0).collect();
        let bias = [0.5f32, -1.0, 0.25, 2.0];
        let gelu = |v: f64| 0.5 * v * (1.0 + erf_f64(v / std::f64::consts::SQRT_2));
        let xt = Tensor::new(vec![3, 4], crate::tensor::Data::F32(x.clone()));
        let bt = Tensor::new(vec![4], crate::tensor::Data::F32(bias.to_vec()));
        let y = BiasSplitGelu.eval(&[Some(&xt), Some(&bt)]).expect("eval");
        assert_eq!(y[0].shape, vec![3, 2]);
        for (i, got) in y[0].to_f64_vec().into_iter().enumerate() {
            let (r, j) = (i / 2, i % 2);
            let a = x[r * 4 + j] as f64 + bias[j] as f64;
            let b = x[r * 4 + 2 + j] as f64 + bias[2 + j] as f64;
            let want = a * gelu(b);
            assert!((got - want).abs() <= 1e-6 * want.abs().max(1.0), "{i}: {got} vs {want}");
        }
        // The shape rule: half the last dim, and a bias of another length or an odd one refused.
        let arg = |d: &[i64]| Some(Arg { dtype: DType::F32, dims: Some(d.iter().map(|&v| crate::ir::DimExpr::constant(v)).collect()), value: None });
        let out = BiasSplitGelu.shapes(&mut ShapeCx::new(vec![arg(&[3, 4]), arg(&[4])])).expect("shapes");
        assert_eq!(out[0].dims, Some(vec![crate::ir::DimExpr::constant(3), crate::ir::DimExpr::constant(2)]));
        assert!(BiasSplitGelu.shapes(&mut ShapeCx::new(vec![arg(&[3, 4]), arg(&[6])])).is_err());
        assert!(BiasSplitGelu.shapes(&mut ShapeCx::new(vec![arg(&[3, 5]), arg(&[5])])).is_err());
        // A bounded last dim: its evenness becomes a run-time check.
        let sym = Some(Arg { dtype: DType::F32, dims: Some(vec![crate::ir::DimExpr::var("d")]), value: None });
        let mut cx = ShapeCx::new(vec![sym.clone(), sym]);
        BiasSplitGelu.shapes(&mut cx).expect("shapes");
        assert_eq!(cx.checks.len(), 1);
    }

    fn erf_f64(x: f64) -> f64 {
        burnc_runtime::math::erf(x)
    }

    #[test]
    fn gradients_match_finite_differences() {
        check_gradient(Op::Def(OpRef::new(BiasSplitGelu)), &[&[2, 3, 6], &[6]], -2.0, 2.0);
        check_gradient(Op::Def(OpRef::new(Swish { alpha: 1.7 })), &[&[3, 4]], -3.0, 3.0);
        check_gradient(Op::Def(OpRef::new(SwiGlu { alpha: 0.8 })), &[&[3, 4], &[3, 4]], -3.0, 3.0);
    }
}
