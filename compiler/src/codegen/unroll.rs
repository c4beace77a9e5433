//! Scan for codegen: with static shapes the trip count is known, so a Scan becomes its body
//! repeated once per step (each scan input's slice a Gather of a constant index, each scan
//! output an Unsqueeze + Concat of the steps' values), which the ordinary emitters handle.
//! The interpreter keeps running Scan itself; only generated code sees the unrolled graph.
use super::CodegenError;
use crate::interp::ops::util::norm_axis;
use crate::ir::{Graph, Node, Op, UnaryOp, ValueId, ValueKind, ValueType};
use crate::passes::fold::renumber;
use crate::tensor::Tensor;
use std::collections::HashMap;

/// Body nodes times steps above which a Scan is left alone (generated code grows with it).
const MAX_UNROLLED_NODES: usize = 4096;

/// The graph with every unrollable top-level Scan unrolled, re-prepared; `None` if none was.
pub fn unroll_scans(g: &Graph) -> Result<Option<Graph>, CodegenError> {
    if !g.nodes.iter().any(|n| matches!(n.op, Op::Scan { .. })) {
        return Ok(None);
    }
    let mut g = g.clone();
    let mut changed = false;
    let mut ni = 0;
    while ni < g.nodes.len() {
        match unroll_at(&mut g, ni) {
            Some(added) => {
                changed = true;
                ni += added;
            }
            None => ni += 1,
        }
    }
    if !changed {
        return Ok(None);
    }
    crate::passes::prepare(&mut g).map_err(|e| CodegenError::Graph { what: "after unrolling Scan".into(), reason: e.to_string() })?;
    Ok(Some(g))
}

fn fixed_shape(g: &Graph, v: ValueId) -> Option<Vec<usize>> {
    g.tensor_type(v)?.shape.as_ref()?.as_fixed()
}

/// Replace the Scan at `ni` by its unrolled nodes; how many nodes now stand in its place.
fn unroll_at(g: &mut Graph, ni: usize) -> Option<usize> {
    let node = g.nodes[ni].clone();
    let Op::Scan { body, num_scan_inputs: m, input_axes, output_axes, input_directions, output_directions } = &node.op else {
        return None;
    };
    let m = *m;
    let n_state = node.inputs.len().checked_sub(m)?;
    if body.inputs.len() != n_state + m || body.outputs.len() < n_state || node.outputs.len() > body.outputs.len() {
        return None;
    }
    // Nested subgraphs resolve names at run time: renamed copies could change what they see.
    if body.nodes.iter().any(|n| matches!(n.op, Op::If { .. } | Op::Loop { .. } | Op::Scan { .. } | Op::SequenceMap { .. })) {
        return None;
    }
    let inputs: Vec<ValueId> = node.inputs.iter().copied().collect::<Option<_>>()?;
    let mut scan_in = Vec::with_capacity(m);
    for j in 0..m {
        let x = inputs[n_state + j];
        let shape = fixed_shape(g, x)?;
        let ax = norm_axis(input_axes.get(j).copied().unwrap_or(0), shape.len()).ok()?;
        scan_in.push((x, ax, shape[ax], input_directions.get(j).copied().unwrap_or(0) != 0));
    }
    let len = scan_in.first()?.2;
    if len == 0 || scan_in.iter().any(|s| s.2 != len) || len.saturating_mul(body.nodes.len()) > MAX_UNROLLED_NODES {
        return None;
    }
    // Parent values visible at this node, by name (the latest definition wins), for the
    // body's outer references.
    let mut defined_before = vec![false; g.values.len()];
    for n in &g.nodes[..ni] {
        for o in &n.outputs {
            defined_before[o.0 as usize] = true;
        }
    }
    let mut visible: HashMap<&str, ValueId> = HashMap::new();
    for (i, v) in g.values.iter().enumerate() {
        if !matches!(v.kind, ValueKind::Node(_)) || defined_before[i] {
            visible.insert(v.name.as_str(), ValueId(i as u32));
        }
    }
    let mut outer: HashMap<ValueId, ValueId> = HashMap::new();
    for (i, v) in body.values.iter().enumerate() {
        if let ValueKind::Outer = v.kind {
            outer.insert(ValueId(i as u32), *visible.get(v.name.as_str())?);
        }
    }
    let k = body.outputs.len() - n_state;
    // Stacking axes; a negative one counts from the stacked rank (one step's rank + 1), which
    // needs the body output's declared rank.
    let mut out_axes = Vec::with_capacity(k);
    for j in 0..k {
        let ax = output_axes.get(j).copied().unwrap_or(0);
        if ax >= 0 {
            out_axes.push(ax);
            continue;
        }
        let rank = body.tensor_type(body.outputs[n_state + j])?.shape.as_ref()?.0.len() as i64;
        let a = ax + rank + 1;
        if a < 0 {
            return None;
        }
        out_axes.push(a);
    }
    let mut new_nodes: Vec<Node> = Vec::new();
    let mut state: Vec<ValueId> = inputs[..n_state].to_vec();
    let mut scans: Vec<Vec<ValueId>> = vec![Vec::with_capacity(len); k];
    let unknown = ValueType::Unknown;
    let placeholder = || ValueKind::Node(crate::ir::NodeId(0));
    for it in 0..len {
        let mut map: HashMap<ValueId, ValueId> = outer.clone();
        for (s, &bi) in body.inputs.iter().enumerate().take(n_state) {
            map.insert(bi, state[s]);
        }
        for (j, &(x, ax, _, rev)) in scan_in.iter().enumerate() {
            let at = if rev { len - 1 - it } else { it };
            let idx = g.add_const(format!("{}#scan{j}_index{it}", node.name), Tensor::scalar_i64(at as i64));
            let slice = g.add_value(format!("{}#scan{j}_slice{it}", node.name), unknown.clone(), placeholder());
            new_nodes.push(Node {
                name: format!("{}#slice{j}_{it}", node.name),
                op: Op::Gather { axis: ax as i64 },
                inputs: vec![Some(x), Some(idx)],
                outputs: vec![slice],
                source_op: node.source_op.clone(),
            });
            map.insert(body.inputs[n_state + j], slice);
        }
        for (i, v) in body.values.iter().enumerate() {
            let id = ValueId(i as u32);
            if map.contains_key(&id) {
                continue;
            }
            let ty = if matches!(v.kind, ValueKind::Node(_)) { unknown.clone() } else { v.ty.clone() };
            let nv = g.add_value(format!("{}#{it}", v.name), ty, v.kind.clone());
            map.insert(id, nv);
        }
        for bn in &body.nodes {
            new_nodes.push(Node {
                name: format!("{}#{it}", bn.name),
                op: bn.op.clone(),
                inputs: bn.inputs.iter().map(|v| v.map(|v| map[&v])).collect(),
                outputs: bn.outputs.iter().map(|v| map[v]).collect(),
                source_op: bn.source_op.clone(),
            });
        }
        state = body.outputs[..n_state].iter().map(|v| map[v]).collect();
        for (j, items) in scans.iter_mut().enumerate() {
            items.push(map[&body.outputs[n_state + j]]);
        }
    }
    let identity = |from: ValueId, to: ValueId, name: String| Node {
        name,
        op: Op::Unary(UnaryOp::Identity),
        inputs: vec![Some(from)],
        outputs: vec![to],
        source_op: node.source_op.clone(),
    };
    for (s, &out) in node.outputs.iter().enumerate().take(n_state) {
        new_nodes.push(identity(state[s], out, format!("{}#state{s}", node.name)));
    }
    for (j, mut items) in scans.into_iter().enumerate() {
        let Some(&out) = node.outputs.get(n_state + j) else { break };
        if output_directions.get(j).copied().unwrap_or(0) != 0 {
            items.reverse();
        }
        let ax = out_axes[j];
        let mut parts = Vec::with_capacity(items.len());
        for (it, v) in items.into_iter().enumerate() {
            let u = g.add_value(format!("{}#scan_out{j}_{it}", node.name), unknown.clone(), placeholder());
            new_nodes.push(Node {
                name: format!("{}#unsqueeze{j}_{it}", node.name),
                op: Op::Unsqueeze { axes: Some(vec![ax]) },
                inputs: vec![Some(v)],
                outputs: vec![u],
                source_op: node.source_op.clone(),
            });
            parts.push(Some(u));
        }
        new_nodes.push(Node {
            name: format!("{}#stack{j}", node.name),
            op: Op::Concat { axis: ax },
            inputs: parts,
            outputs: vec![out],
            source_op: node.source_op.clone(),
        });
    }
    let added = new_nodes.len();
    g.nodes.splice(ni..=ni, new_nodes);
    renumber(g);
    Some(added)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{self, RtValue};
    use crate::ir::{BinaryOp, DType, Shape, TensorType};

    fn tensor_ty(shape: &[usize]) -> ValueType {
        ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(shape)) })
    }

    /// Running sum over the rows of x (plus an outer bias), with the per-step sums stacked in
    /// reverse along axis 1.
    fn scan_graph() -> Graph {
        let mut body = Graph { name: "body".into(), ..Default::default() };
        let acc = body.add_value("acc", tensor_ty(&[2]), ValueKind::Input);
        let row = body.add_value("row", tensor_ty(&[2]), ValueKind::Input);
        let bias = body.add_value("bias", ValueType::Unknown, ValueKind::Outer);
        body.inputs = vec![acc, row];
        let (_, s) = body.add_node("add", Op::Binary(BinaryOp::Add), vec![Some(acc), Some(row)], &["sum".into()]);
        let (_, o) = body.add_node("bias", Op::Binary(BinaryOp::Add), vec![Some(s[0]), Some(bias)], &["out".into()]);
        body.outputs = vec![s[0], o[0]];
        // As ONNX bodies declare them (the negative output axis needs the rank).
        body.values[o[0].0 as usize].ty = tensor_ty(&[2]);
        let mut g = Graph::default();
        let init = g.add_value("init", tensor_ty(&[2]), ValueKind::Input);
        let x = g.add_value("x", tensor_ty(&[3, 2]), ValueKind::Input);
        g.add_const("bias", Tensor::from_f32s(vec![2], vec![10.0, 20.0]));
        g.inputs = vec![init, x];
        let scan = Op::Scan {
            body: Box::new(body),
            num_scan_inputs: 1,
            input_axes: vec![0],
            output_axes: vec![-1],
            input_directions: vec![0],
            output_directions: vec![1],
        };
        let (_, outs) = g.add_node("scan", scan, vec![Some(init), Some(x)], &["final".into(), "stacked".into()]);
        g.outputs = outs;
        g
    }

    #[test]
    fn unrolled_scan_matches_the_interpreter() {
        let g = scan_graph();
        let u = unroll_scans(&g).expect("unrolls").expect("changed");
        assert!(!u.nodes.iter().any(|n| matches!(n.op, Op::Scan { .. })));
        let ins = || {
            vec![
                RtValue::Tensor(Tensor::from_f32s(vec![2], vec![1.0, 2.0])),
                RtValue::Tensor(Tensor::from_f32s(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
            ]
        };
        let want = interp::run(&g, ins()).expect("scan runs");
        let got = interp::run(&u, ins()).expect("unrolled runs");
        let vals = |v: &[RtValue]| v.iter().map(|t| t.as_tensor().map(|t| (t.shape.clone(), t.to_f64_vec())).ok()).collect::<Vec<_>>();
        assert_eq!(vals(&got), vals(&want));
        assert_eq!(vals(&got)[1].as_ref().map(|t| t.0.clone()), Some(vec![2, 3]));
    }
}
