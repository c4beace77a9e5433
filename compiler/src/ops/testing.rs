//! Checks every op's unit tests share: the shape rule and the interpreter against a formula,
//! and the gradient rule against finite differences.
use super::{Arg, OpDef, ShapeCx};
use crate::ir::{DType, DimExpr, Op};
use crate::tensor::{Data, Tensor};

/// `op` on f32 inputs of `shape` gives that shape and, element `i`, `want(i)` (computed in f64)
/// to 1e-6 relative; the shape rule gives the same dtype and dims as the evaluation.
pub(crate) fn check_shapes_and_eval(op: &dyn OpDef, inputs: &[&[f32]], shape: &[usize], want: impl Fn(usize) -> f64) {
    let ts: Vec<Tensor> = inputs.iter().map(|v| Tensor::new(shape.to_vec(), Data::F32(v.to_vec()))).collect();
    let args = ts.iter().map(|t| Some(Arg { dtype: DType::F32, dims: Some(dims(&t.shape)), value: None })).collect();
    let types = op.shapes(&mut ShapeCx::new(args)).expect("shape rule");
    let outs = op.eval(&ts.iter().map(Some).collect::<Vec<_>>()).expect("eval");
    assert_eq!(types.len(), outs.len(), "{}: outputs", op.name());
    for (t, o) in types.iter().zip(&outs) {
        assert_eq!((t.dtype, t.dims.clone()), (o.dtype(), Some(dims(&o.shape))), "{}: shape rule against eval", op.name());
    }
    for (i, got) in outs[0].to_f64_vec().into_iter().enumerate() {
        let w = want(i);
        assert!((got - w).abs() <= 1e-6 * w.abs().max(1.0), "{} element {i}: {got} vs {w}", op.name());
    }
}

/// `op`'s gradient rule against central finite differences on f64 inputs of `shapes`.
pub(crate) fn check_gradient(op: Op, shapes: &[&[usize]], lo: f64, hi: f64) {
    crate::autodiff::tests::check_op(op, shapes, lo, hi).expect("gradients agree");
}

/// An f32 tensor of `shape` (a test's literal).
pub(crate) fn f(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_f32s(shape.to_vec(), v.to_vec())
}

/// An i64 tensor of `shape` (a test's literal).
pub(crate) fn i(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_i64s(shape.to_vec(), v.to_vec())
}

fn dims(s: &[usize]) -> Vec<DimExpr> {
    s.iter().map(|&d| DimExpr::constant(d as i64)).collect()
}
