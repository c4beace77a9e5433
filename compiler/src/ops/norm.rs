//! Normalizations along the trailing axes or one axis that keep the input's shape:
//! RMSNormalization, LpNormalization and Hardmax. Each is a runtime kernel over the
//! `[outer, len, inner]` view around its axis.
use super::{around, input, numel, product, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::emit::f32_lit;
use crate::codegen::CodegenError;
use crate::ir::axis::{norm_axis, norm_axis_or_scalar};
use crate::ir::{DType, DimExpr, Op, ValueId};
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

/// RMSNormalization: `x / sqrt(mean(x², axes [axis, rank)) + ε) · scale`, scale broadcast
/// to X (numpy rules).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsNorm {
    pub axis: i64,
    pub epsilon: f32,
}

impl RmsNorm {
    pub fn op(self) -> Op {
        Op::Def(OpRef::new(self))
    }
}

impl OpDef for RmsNorm {
    fn name(&self) -> &'static str {
        "RMSNormalization"
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
        // The kernel takes the scale over the normalized dims or over all of X, unbroadcast:
        // past its leading 1s, each scale dim is X's (right-aligned) or 1 where X's is 1.
        let one = DimExpr::constant(1);
        let lead = ss.iter().take_while(|d| **d == one).count();
        let cover = ss.len() - lead;
        let unbroadcast = cover <= xs.len() && ss[lead..].iter().zip(&xs[xs.len() - cover..]).all(|(s, x)| *s != one || *x == one);
        let len = product(&xs[xs.len() - cover.min(xs.len())..]);
        if !unbroadcast || (len != product(&xs[a..]) && len != product(&xs)) {
            return Err(cx.err("a broadcast scale is not supported by codegen yet"));
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

    fn scratch_bytes(&self, _: &[Option<(DType, Vec<usize>)>]) -> usize {
        0
    }

    fn in_place(&self, _: usize) -> bool {
        false
    }

    // Square, sum, scale: about four per element.
    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        numel(ins.first()?)?.checked_mul(4)
    }

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let dy = cx.dy()?;
        let need: Vec<bool> = (0..cx.n.inputs.len()).map(|i| cx.wants(i)).collect();
        crate::autodiff::norm::scale_norm(cx.b, cx.n, dy, &need, self.axis, self.epsilon, false)
    }

    fn forwards_values(&self) -> Option<usize> {
        None
    }
}

/// LpNormalization: `x / ‖x‖_p` along one axis, p 1 or 2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LpNorm {
    pub axis: i64,
    pub p: i64,
}

impl LpNorm {
    pub fn op(self) -> Op {
        Op::Def(OpRef::new(self))
    }
}

impl OpDef for LpNorm {
    fn name(&self) -> &'static str {
        "LpNormalization"
    }

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
        let [outer, len, inner] = around(&xs, a);
        Ok(format!(
            "rt::kernels::norm::lp_norm({}, {}, {}, {}, {}, {});",
            cx.read(x)?,
            cx.write(cx.output(0)?)?,
            cx.size(&outer)?,
            cx.size(&len)?,
            cx.size(&inner)?,
            self.p
        ))
    }

    fn scratch_bytes(&self, _: &[Option<(DType, Vec<usize>)>]) -> usize {
        0
    }

    fn in_place(&self, _: usize) -> bool {
        false
    }

    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        numel(ins.first()?)?.checked_mul(3)
    }

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err("LpNormalization has no gradient yet".into())
    }

    fn forwards_values(&self) -> Option<usize> {
        None
    }
}

/// Hardmax: 1 at the first largest element along the axis (or, with `coerce_2d`, over the
/// flattened trailing dims from the axis, as opset < 13), 0 elsewhere.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hardmax {
    pub axis: i64,
    pub coerce_2d: bool,
}

impl Hardmax {
    pub fn op(self) -> Op {
        Op::Def(OpRef::new(self))
    }

    /// `[outer, len, inner]` of the input.
    fn view(&self, xs: &[DimExpr]) -> R<[DimExpr; 3]> {
        if xs.is_empty() {
            return Err("Hardmax needs an input of rank >= 1".into());
        }
        let a = norm_axis_or_scalar(self.axis, xs.len())?;
        Ok(if self.coerce_2d { [product(&xs[..a]), product(&xs[a..]), DimExpr::constant(1)] } else { around(xs, a) })
    }
}

impl OpDef for Hardmax {
    fn name(&self) -> &'static str {
        "Hardmax"
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        if cx.arg(0)?.dtype == DType::Bool {
            return Err("Hardmax needs a numeric input".into());
        }
        if let Some(xs) = x_dims(cx)? {
            self.view(&xs)?;
        }
        like_x(cx)
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![crate::interp::ops::norm::softmax::hardmax(input(ins, 0)?, self.axis, self.coerce_2d)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let x = cx.input(0)?;
        let [outer, len, inner] = self.view(&cx.dims(x)?).map_err(|e| cx.err(e))?;
        Ok(format!(
            "rt::kernels::softmax::hardmax({}, {}, {}, {}, {});",
            cx.read(x)?,
            cx.size(&outer)?,
            cx.size(&len)?,
            cx.size(&inner)?,
            cx.write(cx.output(0)?)?
        ))
    }

    fn scratch_bytes(&self, _: &[Option<(DType, Vec<usize>)>]) -> usize {
        0
    }

    fn in_place(&self, _: usize) -> bool {
        false
    }

    fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        numel(ins.first()?)
    }

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err("Hardmax has no gradient: its output is piecewise constant".into())
    }

    fn forwards_values(&self) -> Option<usize> {
        None
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect());
    let scale = Tensor::from_f32s(vec![4], vec![1.0, 0.5, -1.5, 2.0]);
    vec![
        super::Example { consts: vec![], op: OpRef::new(RmsNorm { axis: -1, epsilon: 1e-5 }), inputs: vec![x.clone(), scale] },
        super::Example { consts: vec![], op: OpRef::new(LpNorm { axis: 1, p: 2 }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(Hardmax { axis: 1, coerce_2d: false }), inputs: vec![x] },
    ]
}
