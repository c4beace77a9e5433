//! Loss functions appended to a model's output, made of core ops that have gradient rules.
use crate::ir::{BinaryOp, DType, Graph, Op, ReduceOp, Shape, TensorType, ValueId, ValueKind, ValueType};
use crate::ops::IntoOp;
use crate::passes::infer::infer_node;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Mean over samples of −log softmax(output)[target], classes on axis 1; the target holds
    /// class indices (i64) in [0, classes) shaped like the output without axis 1. One core op
    /// (`NllLoss` with softmax, as ONNX SoftmaxCrossEntropyLoss) with its own gradient rule.
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
    let l = match loss {
        Loss::CrossEntropy => node(
            g,
            &base,
            crate::ops::loss::NllLoss { softmax: true, reduction: crate::ir::LossReduction::Mean, ignore_index: None }.op(),
            &[pred, target],
        )?,
        Loss::Mse => {
            let d = node(g, &format!("{base}/diff"), Op::Binary(BinaryOp::Sub), &[pred, target])?;
            let sq = node(g, &format!("{base}/square"), Op::Binary(BinaryOp::Mul), &[d, d])?;
            node(g, &base, crate::ops::reduce::Reduce { op: ReduceOp::Mean, axes: None, keepdims: false, noop_with_empty_axes: false }.op(), &[sq])?
        }
    };
    Ok((target, l))
}
