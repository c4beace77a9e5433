//! The reference interpreter: walks the IR and calls the runtime's kernels, with shapes known
//! only at run time. Conformance tests run through it; generated code must agree with it.
pub(crate) mod ops;
mod value;

use crate::ir::{Graph, Node, ValueId, ValueKind};
use std::collections::{HashMap, HashSet};
use thiserror::Error;

pub use ops::eval_op;
pub use value::RtValue;

#[derive(Debug, Error)]
pub enum InterpError {
    #[error("node `{node}` ({op}, opset {opset}): {reason}")]
    Node { node: String, op: String, opset: i64, reason: String },
    #[error("expected {expected} inputs, got {got}")]
    InputCount { expected: usize, got: usize },
    #[error("input `{name}`: {reason}")]
    Input { name: String, reason: String },
    #[error("value `{0}` was never computed")]
    Missing(String),
}

/// Values of one graph invocation; subgraphs see the enclosing frame's values by name.
pub struct Frame<'a> {
    graph: &'a Graph,
    values: HashMap<ValueId, RtValue>,
    parent: Option<&'a Frame<'a>>,
}

impl<'a> Frame<'a> {
    /// A frame with no values, for evaluating single ops outside a graph run.
    pub fn empty(graph: &'a Graph) -> Frame<'a> {
        Frame { graph, values: HashMap::new(), parent: None }
    }

    /// Look a name up through the enclosing frames (for `ValueKind::Outer`).
    fn outer(&self, name: &str) -> Option<RtValue> {
        let mut f = self.parent;
        while let Some(p) = f {
            if let Some((i, _)) = p.graph.values.iter().enumerate().rev().find(|(_, v)| v.name == name) {
                if let Some(v) = p.get(ValueId(i as u32)) {
                    return Some(v);
                }
            }
            f = p.parent;
        }
        None
    }

    fn get(&self, id: ValueId) -> Option<RtValue> {
        if let Some(v) = self.values.get(&id) {
            return Some(v.clone());
        }
        let val = self.graph.values.get(id.0 as usize)?;
        match &val.kind {
            ValueKind::Const(t) => Some(RtValue::Tensor(t.clone())),
            ValueKind::Param(p) => p.to_tensor().map(RtValue::Tensor),
            ValueKind::Outer => self.outer(&val.name),
            _ => None,
        }
    }
}

/// Run a graph on inputs given in `graph.inputs` order.
pub fn run(graph: &Graph, inputs: Vec<RtValue>) -> Result<Vec<RtValue>, InterpError> {
    run_in(graph, inputs, None)
}

/// Run a (sub)graph with an enclosing frame for outer-scope names.
pub fn run_in(graph: &Graph, inputs: Vec<RtValue>, parent: Option<&Frame<'_>>) -> Result<Vec<RtValue>, InterpError> {
    if inputs.len() != graph.inputs.len() {
        return Err(InterpError::InputCount { expected: graph.inputs.len(), got: inputs.len() });
    }
    let mut frame = Frame { graph, values: HashMap::new(), parent };
    for (&id, v) in graph.inputs.iter().zip(inputs) {
        frame.values.insert(id, v);
    }
    // Free a value after its last use so large models run in bounded memory. Values a
    // subgraph reads by name (`ValueKind::Outer`, at any depth) count as uses of its node.
    let mut remaining = graph.use_counts();
    let implicit = implicit_inputs(graph);
    for ids in implicit.values() {
        for id in ids {
            *remaining.entry(*id).or_insert(0) += 1;
        }
    }
    for (ni, node) in graph.nodes.iter().enumerate() {
        let outs = eval_node(&frame, node)?;
        let extra = implicit.get(&ni).map(|v| v.as_slice()).unwrap_or(&[]);
        for inp in node.inputs.iter().flatten().chain(extra) {
            if let Some(c) = remaining.get_mut(inp) {
                *c -= 1;
                if *c == 0 {
                    frame.values.remove(inp);
                }
            }
        }
        for (&id, v) in node.outputs.iter().zip(outs) {
            if remaining.get(&id).copied().unwrap_or(0) > 0 || graph.outputs.contains(&id) {
                frame.values.insert(id, v);
            }
        }
    }
    graph
        .outputs
        .iter()
        .map(|&o| frame.get(o).ok_or_else(|| InterpError::Missing(graph.value(o).name.clone())))
        .collect()
}

/// Names a graph reads from enclosing scopes, its nested subgraphs' included.
fn outer_names(g: &Graph, out: &mut HashSet<String>) {
    let defined: HashSet<&str> =
        g.values.iter().filter(|v| !matches!(v.kind, ValueKind::Outer)).map(|v| v.name.as_str()).collect();
    for v in &g.values {
        if matches!(v.kind, ValueKind::Outer) {
            out.insert(v.name.clone());
        }
    }
    for n in &g.nodes {
        for sg in n.op.subgraphs() {
            let mut inner = HashSet::new();
            outer_names(sg, &mut inner);
            out.extend(inner.into_iter().filter(|name| !defined.contains(name.as_str())));
        }
    }
}

/// For each node with subgraphs: the values of `graph` its subgraphs read by name.
fn implicit_inputs(graph: &Graph) -> HashMap<usize, Vec<ValueId>> {
    let mut res = HashMap::new();
    if !graph.nodes.iter().any(|n| !n.op.subgraphs().is_empty()) {
        return res;
    }
    let mut by_name: HashMap<&str, ValueId> = HashMap::new();
    for (i, v) in graph.values.iter().enumerate() {
        by_name.insert(v.name.as_str(), ValueId(i as u32));
    }
    for (ni, n) in graph.nodes.iter().enumerate() {
        let sgs = n.op.subgraphs();
        if sgs.is_empty() {
            continue;
        }
        let mut names = HashSet::new();
        for sg in sgs {
            outer_names(sg, &mut names);
        }
        let mut ids: Vec<ValueId> = names.iter().filter_map(|nm| by_name.get(nm.as_str()).copied()).collect();
        ids.sort();
        if !ids.is_empty() {
            res.insert(ni, ids);
        }
    }
    res
}

fn eval_node(frame: &Frame<'_>, node: &Node) -> Result<Vec<RtValue>, InterpError> {
    let mut args = Vec::with_capacity(node.inputs.len());
    for inp in &node.inputs {
        match inp {
            None => args.push(None),
            Some(id) => match frame.get(*id) {
                Some(v) => args.push(Some(v)),
                None => return Err(InterpError::Missing(frame.graph.value(*id).name.clone())),
            },
        }
    }
    let result = ops::eval_op(&node.op, args, node.outputs.len(), frame);
    result.map_err(|reason| {
        let (op, opset) = node.source_op.clone().unwrap_or_else(|| (node.op.name(), 0));
        InterpError::Node { node: node.name.clone(), op, opset, reason }
    })
}
