//! Activations with parameters of their own: Swish and SwiGLU. Their scalar functions are the
//! runtime's (`kernels::extra`), computed in f64 and rounded to the element type, by the
//! interpreter and generated code alike.
use super::cx::f64_lit;
use super::{Arg, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::autodiff::builder::B;
use crate::codegen::CodegenError;
use crate::ir::{DType, Op, UnaryOp, ValueId};
use crate::map_float_data;
use crate::tensor::Tensor;
use burnc_runtime::kernels::extra::{swiglu_map, swish_map};

/// A float input (f16, bf16, f32 or f64) shaped as it is.
fn float_arg<'a>(cx: &'a ShapeCx, i: usize, op: &str) -> R<&'a Arg> {
    let a = cx.arg(i)?;
    if !a.dtype.is_float() || a.dtype.is_small() {
        return Err(format!("{op} is not defined on {}", a.dtype));
    }
    Ok(a)
}

fn input<'a>(ins: &[Option<&'a Tensor>], i: usize) -> R<&'a Tensor> {
    ins.get(i).copied().flatten().ok_or_else(|| format!("input #{i} is missing"))
}

fn numel(shape: &Option<Vec<usize>>) -> Option<u64> {
    shape.as_ref().map(|s| s.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64)))
}

/// `x · sigmoid(alpha · x)` (ONNX Swish, opset 24).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Swish {
    pub alpha: f32,
}

impl OpDef for Swish {
    fn name(&self) -> &'static str {
        "Swish"
    }

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

    fn scratch_bytes(&self, _: &[Option<(DType, Vec<usize>)>]) -> usize {
        0
    }

    fn in_place(&self, _: usize) -> bool {
        false
    }

    // A multiply, an exponential, an add and a divide per element.
    fn flops(&self, _: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        Some(numel(outs.first()?)?.saturating_mul(4))
    }

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
    fn name(&self) -> &'static str {
        "SwiGlu"
    }

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

    fn scratch_bytes(&self, _: &[Option<(DType, Vec<usize>)>]) -> usize {
        0
    }

    fn in_place(&self, _: usize) -> bool {
        false
    }

    // Swish's four and the product with B.
    fn flops(&self, _: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        Some(numel(outs.first()?)?.saturating_mul(5))
    }

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
        super::Example { op: OpRef::new(Swish { alpha: 1.7 }), inputs: vec![ramp(&[2, 3, 5], 0)] },
        super::Example { op: OpRef::new(SwiGlu { alpha: 0.8 }), inputs: vec![ramp(&[3, 4], 0), ramp(&[3, 4], 1)] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn swish_and_swiglu_gradients_match_finite_differences() {
        check_gradient(Op::Def(OpRef::new(Swish { alpha: 1.7 })), &[&[3, 4]], -3.0, 3.0);
        check_gradient(Op::Def(OpRef::new(SwiGlu { alpha: 0.8 })), &[&[3, 4], &[3, 4]], -3.0, 3.0);
    }
}
