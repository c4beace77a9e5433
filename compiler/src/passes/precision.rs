//! Lower a graph's float precision (`--dtype bf16|f16`): every f32 tensor — weights,
//! constants and activations — becomes `to`, as `model.to(torch.bfloat16)` makes a PyTorch
//! model; kernels then load 16-bit values and do their arithmetic (and accumulate) in f32.
//!
//! The graph's inputs and outputs keep their f32 types, so callers feed and read f32: a Cast
//! after each f32 input and before each f32 output converts at the boundary.
use super::fold::renumber;
use super::PassError;
use crate::ir::{DType, Graph, Node, Param, TensorType, ValueKind, ValueType};
use crate::tensor::Tensor;

/// Turn every f32 value of `g` into `to` (BF16 or F16), keeping f32 at the graph boundary.
pub fn lower_floats(g: &mut Graph, to: DType) -> Result<(), PassError> {
    if !matches!(to, DType::BF16 | DType::F16) {
        return Err(PassError::Node { node: g.name.clone(), op: "precision".into(), reason: format!("cannot lower f32 to {to}") });
    }
    let is_f32 = |ty: &ValueType| matches!(ty, ValueType::Tensor(TensorType { dtype: DType::F32, .. }));
    let inputs: Vec<_> = g.inputs.iter().copied().filter(|&i| is_f32(&g.value(i).ty)).collect();
    let outputs: Vec<_> = g.outputs.iter().copied().filter(|&o| is_f32(&g.value(o).ty)).collect();
    for v in g.values.iter_mut() {
        if !is_f32(&v.ty) {
            continue;
        }
        if let ValueType::Tensor(t) = &mut v.ty {
            t.dtype = to;
        }
        let lowered = |t: &Tensor| crate::interp::ops::cast::cast(t, to, false);
        let err = |reason: String| PassError::Node { node: v.name.clone(), op: "precision".into(), reason };
        match &mut v.kind {
            ValueKind::Const(t) => *t = lowered(t).map_err(err)?,
            ValueKind::Param(p) => {
                let t = p.to_tensor().ok_or_else(|| err("weights do not decode".into()))?;
                let t = lowered(&t).map_err(err)?;
                *p = Param { dtype: to, shape: p.shape.clone(), bytes: t.data.to_le_bytes().into() };
            }
            _ => {}
        }
    }
    // The boundary: a fresh f32 input under the input's name, cast to the old value (now
    // `to`); a Cast of each old output into a fresh f32 value under its name.
    let mut front = Vec::new();
    for i in inputs {
        let name = g.value(i).name.clone();
        let ty = f32_like(&g.value(i).ty);
        let fresh = g.add_value(name.clone(), ty, ValueKind::Input);
        g.value_mut(i).name = format!("{name}.{to}");
        g.value_mut(i).kind = ValueKind::Node(crate::ir::NodeId(0));
        front.push(Node { name: format!("{name}.to_{to}"), op: crate::ops::cast::op(to, false), inputs: vec![Some(fresh)], outputs: vec![i], source_op: None });
        for x in g.inputs.iter_mut().filter(|x| **x == i) {
            *x = fresh;
        }
    }
    for o in outputs {
        let name = g.value(o).name.clone();
        let ty = f32_like(&g.value(o).ty);
        g.value_mut(o).name = format!("{name}.{to}");
        let (_, outs) = g.add_node(format!("{name}.to_f32"), crate::ops::cast::op(DType::F32, false), vec![Some(o)], std::slice::from_ref(&name));
        g.value_mut(outs[0]).ty = ty;
        for x in g.outputs.iter_mut().filter(|x| **x == o) {
            *x = outs[0];
        }
    }
    front.append(&mut g.nodes);
    g.nodes = front;
    renumber(g);
    Ok(())
}

/// `ty` (a lowered tensor type) with dtype f32.
fn f32_like(ty: &ValueType) -> ValueType {
    match ty {
        ValueType::Tensor(t) => ValueType::Tensor(TensorType { dtype: DType::F32, shape: t.shape.clone() }),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Op, Shape};

    #[test]
    fn lowers_weights_and_keeps_f32_at_the_boundary() {
        let mut g = Graph::default();
        let t = |d| ValueType::Tensor(TensorType { dtype: d, shape: Some(Shape::fixed(&[2])) });
        let x = g.add_value("x", t(DType::F32), ValueKind::Input);
        let w = g.add_const("w", Tensor::from_f32s(vec![2], vec![1.0, 1.0 / 3.0]));
        let (_, ys) = g.add_node("mul", Op::Binary(crate::ir::BinaryOp::Mul), vec![Some(x), Some(w)], &["y".to_string()]);
        g.value_mut(ys[0]).ty = t(DType::F32);
        g.inputs = vec![x];
        g.outputs = vec![ys[0]];
        lower_floats(&mut g, DType::BF16).unwrap();
        // Cast in, the product in bf16, cast out.
        let ops: Vec<String> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["Cast", "Mul", "Cast"]);
        assert_eq!(g.value(g.inputs[0]).name, "x");
        assert_eq!(g.tensor_type(g.inputs[0]).unwrap().dtype, DType::F32);
        assert_eq!(g.value(g.outputs[0]).name, "y");
        assert_eq!(g.tensor_type(g.outputs[0]).unwrap().dtype, DType::F32);
        assert_eq!(g.tensor_type(ys[0]).unwrap().dtype, DType::BF16);
        let wv = g.const_value(w).unwrap();
        assert_eq!(wv.dtype(), DType::BF16);
        // 1/3 rounds to bf16's nearest value.
        assert_eq!(wv.to_f64_vec()[1], burnc_runtime::half::bf16::from_f32(1.0 / 3.0).to_f64());
        // Every node's outputs name it as their producer.
        for (i, n) in g.nodes.iter().enumerate() {
            for &o in &n.outputs {
                assert!(matches!(g.value(o).kind, ValueKind::Node(id) if id.0 as usize == i));
            }
        }
    }
}
