//! The IR verifier, run after every pass in debug builds: a bug is caught at the pass that
//! made it.
use super::{Graph, NodeId, ValueKind};
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum VerifyError {
    #[error("node {node} ({op}): input #{index} refers to value {value} which does not exist")]
    DanglingInput { node: String, op: String, index: usize, value: u32 },
    #[error("node {node} ({op}): input `{value}` is used before it is defined")]
    UseBeforeDef { node: String, op: String, value: String },
    #[error("node {node} ({op}): output `{value}` does not record this node as its producer")]
    BadProducer { node: String, op: String, value: String },
    #[error("graph output `{0}` is never defined")]
    UndefinedOutput(String),
    #[error("graph output refers to value {0} which does not exist")]
    DanglingOutput(u32),
    #[error("in subgraph of node {node}: {inner}")]
    Subgraph { node: String, inner: Box<VerifyError> },
}

pub fn verify(g: &Graph) -> Result<(), VerifyError> {
    let mut defined = vec![false; g.values.len()];
    for (i, v) in g.values.iter().enumerate() {
        if matches!(v.kind, ValueKind::Input | ValueKind::Param(_) | ValueKind::Const(_) | ValueKind::Outer) {
            defined[i] = true;
        }
    }
    for (ni, n) in g.nodes.iter().enumerate() {
        for (index, inp) in n.inputs.iter().enumerate() {
            let Some(v) = inp else { continue };
            let Some(&d) = defined.get(v.0 as usize) else {
                return Err(VerifyError::DanglingInput { node: n.name.clone(), op: n.op.name(), index, value: v.0 });
            };
            if !d {
                return Err(VerifyError::UseBeforeDef {
                    node: n.name.clone(),
                    op: n.op.name(),
                    value: g.value(*v).name.clone(),
                });
            }
        }
        for o in &n.outputs {
            let ok = matches!(g.values.get(o.0 as usize).map(|v| &v.kind), Some(ValueKind::Node(id)) if *id == NodeId(ni as u32));
            if !ok {
                let value = g.values.get(o.0 as usize).map(|v| v.name.clone()).unwrap_or_default();
                return Err(VerifyError::BadProducer { node: n.name.clone(), op: n.op.name(), value });
            }
            defined[o.0 as usize] = true;
        }
        for sg in n.op.subgraphs() {
            verify(sg).map_err(|e| VerifyError::Subgraph { node: n.name.clone(), inner: Box::new(e) })?;
        }
    }
    for o in &g.outputs {
        match defined.get(o.0 as usize) {
            None => return Err(VerifyError::DanglingOutput(o.0)),
            Some(false) => return Err(VerifyError::UndefinedOutput(g.value(*o).name.clone())),
            Some(true) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Op, UnaryOp, ValueKind, ValueType};

    #[test]
    fn catches_use_before_def() {
        let mut g = Graph::default();
        let x = g.add_value("x", ValueType::Unknown, ValueKind::Input);
        let (_, outs) = g.add_node("a", Op::Unary(UnaryOp::Relu), vec![Some(x)], &["y".into()]);
        g.outputs = outs.clone();
        assert_eq!(verify(&g), Ok(()));
        // A node that reads a value produced after it.
        let (_, outs2) = g.add_node("b", Op::Unary(UnaryOp::Relu), vec![Some(x)], &["z".into()]);
        g.nodes[0].inputs[0] = Some(outs2[0]);
        assert!(matches!(verify(&g), Err(VerifyError::UseBeforeDef { .. })));
    }

    #[test]
    fn catches_dangling_output() {
        let mut g = Graph::default();
        g.outputs.push(crate::ir::ValueId(7));
        assert_eq!(verify(&g), Err(VerifyError::DanglingOutput(7)));
    }
}
