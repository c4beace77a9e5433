//! Loss functions appended to a model's output, made of core ops that have gradient rules.
use crate::ir::{BinaryOp, DType, Graph, Op, ReduceOp, Shape, TensorType, ValueId, ValueKind, ValueType};
use crate::passes::infer::infer_node;
use crate::tensor::Tensor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Mean over samples of −log softmax(output)[target], classes on axis 1; the target holds
    /// class indices (i64) shaped like the output without axis 1. A target outside
    /// [0, classes) contributes zero (as an ignored sample, still counted in the mean).
    CrossEntropy,
    /// Mean of (output − target)² over all elements; the target is shaped like the output.
    Mse,
}

impl std::str::FromStr for Loss {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cross-entropy" | "ce" => Ok(Loss::CrossEntropy),
            "mse" => Ok(Loss::Mse),
            other => Err(format!("unknown loss `{other}` (cross-entropy, mse)")),
        }
    }
}

/// Add a node and type its outputs.
fn node(g: &mut Graph, name: &str, op: Op, inputs: &[ValueId]) -> Result<ValueId, String> {
    let out = format!("{name}:0");
    let (id, outs) = g.add_node(name.to_string(), op, inputs.iter().map(|&v| Some(v)).collect(), &[out]);
    let tys = infer_node(g, g.node(id))?;
    let ty = tys.into_iter().next().ok_or("internal: no output type")?;
    g.value_mut(outs[0]).ty = ty;
    Ok(outs[0])
}

fn konst(g: &mut Graph, name: &str, t: Tensor) -> ValueId {
    g.add_const(name.to_string(), t)
}

/// Append the target input and the loss for model output `pred`; returns (target, loss).
pub fn append(g: &mut Graph, pred: ValueId, loss: Loss) -> Result<(ValueId, ValueId), String> {
    let pt = g.tensor_type(pred).cloned().ok_or("the output is not a tensor")?;
    let dims = pt.shape.as_ref().and_then(|s| s.as_fixed()).ok_or("the output has no static shape (pin the inputs)")?;
    if pt.dtype != DType::F32 {
        return Err(format!("the output is {}, training needs f32", pt.dtype));
    }
    let base = super::fresh(g, "loss");
    let target_name = super::fresh(g, "target");
    let tshape: Vec<usize> = match loss {
        Loss::CrossEntropy => {
            if dims.len() < 2 {
                return Err(format!("cross-entropy needs an output of rank >= 2 (batch, classes, …), got {dims:?}"));
            }
            dims.iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, &d)| d).collect()
        }
        Loss::Mse => dims.clone(),
    };
    let tdtype = if loss == Loss::CrossEntropy { DType::I64 } else { DType::F32 };
    let target = g.add_value(target_name, ValueType::Tensor(TensorType { dtype: tdtype, shape: Some(Shape::fixed(&tshape)) }), ValueKind::Input);
    g.inputs.push(target);
    let all = Op::Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false };
    let l = match loss {
        Loss::CrossEntropy => {
            let classes = dims[1];
            let count = tshape.iter().product::<usize>().max(1);
            let logp = node(g, &format!("{base}/log_softmax"), Op::Softmax { axis: 1, log: true, coerce_2d: false }, &[pred])?;
            let depth = konst(g, &format!("{base}/classes"), Tensor::scalar_i64(classes as i64));
            let values = konst(g, &format!("{base}/off_on"), Tensor::from_f32s(vec![2], vec![0.0, 1.0]));
            let onehot = node(g, &format!("{base}/one_hot"), Op::OneHot { axis: 1 }, &[target, depth, values])?;
            let picked = node(g, &format!("{base}/picked"), Op::Binary(BinaryOp::Mul), &[logp, onehot])?;
            let sum = node(g, &format!("{base}/sum"), all, &[picked])?;
            let scale = konst(g, &format!("{base}/scale"), Tensor::from_f32s(vec![], vec![-1.0 / count as f32]));
            node(g, &base, Op::Binary(BinaryOp::Mul), &[sum, scale])?
        }
        Loss::Mse => {
            let d = node(g, &format!("{base}/diff"), Op::Binary(BinaryOp::Sub), &[pred, target])?;
            let sq = node(g, &format!("{base}/square"), Op::Binary(BinaryOp::Mul), &[d, d])?;
            node(g, &base, Op::Reduce { op: ReduceOp::Mean, axes: None, keepdims: false, noop_with_empty_axes: false }, &[sq])?
        }
    };
    Ok((target, l))
}
