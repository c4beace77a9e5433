//! Scan and Loop for codegen: with static shapes a Scan's trip count is known (a Loop's when
//! it is a constant and the condition cannot stop it early), so the node becomes its body
//! repeated once per step (each scan input's slice a Gather of a constant index, each scan
//! output an Unsqueeze + Concat of the steps' values), which the ordinary emitters handle.
//! The interpreter keeps running the loops itself; only generated code sees them unrolled.
use super::CodegenError;
use crate::interp::ops::util::norm_axis;
use crate::ir::{Graph, Node, Op, UnaryOp, ValueId, ValueKind, ValueType};
use crate::passes::fold::renumber;
use crate::tensor::Tensor;
use std::collections::HashMap;

/// Body nodes times steps above which a Scan is left alone (generated code grows with it).
const MAX_UNROLLED_NODES: usize = 4096;

/// The graph with every unrollable top-level Scan and Loop unrolled, re-prepared; `None` if
/// none was.
pub fn unroll_scans(g: &Graph) -> Result<Option<Graph>, CodegenError> {
    if !g.nodes.iter().any(|n| matches!(n.op, Op::Scan { .. } | Op::Loop { .. })) {
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

/// Parent values visible at node `ni`, by name (the latest definition wins), mapped from the
/// body's outer references; `None` if one cannot be resolved here.
fn outer_refs(g: &Graph, ni: usize, body: &Graph) -> Option<HashMap<ValueId, ValueId>> {
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
    let mut outer = HashMap::new();
    for (i, v) in body.values.iter().enumerate() {
        if let ValueKind::Outer = v.kind {
            outer.insert(ValueId(i as u32), *visible.get(v.name.as_str())?);
        }
    }
    Some(outer)
}

/// Stacking axes of the `k` scan outputs (body outputs from `first`); a negative one counts
/// from the stacked rank (one step's rank + 1), which needs the body output's declared rank.
fn stack_axes(body: &Graph, first: usize, axes: &[i64], k: usize) -> Option<Vec<i64>> {
    let mut out = Vec::with_capacity(k);
    for j in 0..k {
        let ax = axes.get(j).copied().unwrap_or(0);
        if ax >= 0 {
            out.push(ax);
            continue;
        }
        let rank = body.tensor_type(body.outputs[first + j])?.shape.as_ref()?.0.len() as i64;
        let a = ax + rank + 1;
        if a < 0 {
            return None;
        }
        out.push(a);
    }
    Some(out)
}

/// What an unrolled loop looks like, whether Scan or Loop.
struct Unroll<'b> {
    node: Node,
    body: &'b Graph,
    len: usize,
    /// Initial state values, fed to body inputs `state_in..`; body outputs `state_out..` are
    /// the next states, and the body outputs after the states are stacked.
    init: Vec<ValueId>,
    state_in: usize,
    state_out: usize,
    out_axes: Vec<i64>,
    out_reverse: Vec<bool>,
    outer: HashMap<ValueId, ValueId>,
}

/// Replace the node at `ni` by `len` copies of the body; `per_step` adds the nodes that feed
/// the body's other inputs at a step and says which values they are. How many nodes now
/// stand in the node's place.
fn expand(g: &mut Graph, ni: usize, u: Unroll, mut per_step: impl FnMut(&mut Graph, usize, &mut Vec<Node>) -> Vec<(ValueId, ValueId)>) -> usize {
    let Unroll { node, body, len, init, state_in, state_out, out_axes, out_reverse, outer } = u;
    let n_state = init.len();
    let first_scan = state_out + n_state;
    let k = body.outputs.len() - first_scan;
    let mut new_nodes: Vec<Node> = Vec::new();
    let mut state = init;
    let mut scans: Vec<Vec<ValueId>> = vec![Vec::with_capacity(len); k];
    let placeholder = || ValueKind::Node(crate::ir::NodeId(0));
    for it in 0..len {
        let mut map: HashMap<ValueId, ValueId> = outer.clone();
        for (s, &v) in state.iter().enumerate() {
            map.insert(body.inputs[state_in + s], v);
        }
        map.extend(per_step(g, it, &mut new_nodes));
        for (i, v) in body.values.iter().enumerate() {
            let id = ValueId(i as u32);
            if map.contains_key(&id) {
                continue;
            }
            let ty = if matches!(v.kind, ValueKind::Node(_)) { ValueType::Unknown } else { v.ty.clone() };
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
        state = body.outputs[state_out..first_scan].iter().map(|v| map[v]).collect();
        for (j, items) in scans.iter_mut().enumerate() {
            items.push(map[&body.outputs[first_scan + j]]);
        }
    }
    let step = |name: String, op: Op, inputs: Vec<Option<ValueId>>, out: ValueId| Node {
        name,
        op,
        inputs,
        outputs: vec![out],
        source_op: node.source_op.clone(),
    };
    for (s, &out) in node.outputs.iter().enumerate().take(n_state) {
        new_nodes.push(step(format!("{}#state{s}", node.name), Op::Unary(UnaryOp::Identity), vec![Some(state[s])], out));
    }
    for (j, mut items) in scans.into_iter().enumerate() {
        let Some(&out) = node.outputs.get(n_state + j) else { break };
        if out_reverse.get(j).copied().unwrap_or(false) {
            items.reverse();
        }
        let ax = out_axes[j];
        let mut parts = Vec::with_capacity(items.len());
        for (it, v) in items.into_iter().enumerate() {
            let u = g.add_value(format!("{}#scan_out{j}_{it}", node.name), ValueType::Unknown, placeholder());
            new_nodes.push(step(format!("{}#unsqueeze{j}_{it}", node.name), Op::Unsqueeze { axes: Some(vec![ax]) }, vec![Some(v)], u));
            parts.push(Some(u));
        }
        new_nodes.push(step(format!("{}#stack{j}", node.name), Op::Concat { axis: ax }, parts, out));
    }
    let added = new_nodes.len();
    g.nodes.splice(ni..=ni, new_nodes);
    renumber(g);
    added
}

/// Nested subgraphs resolve names at run time: renamed copies could change what they see.
fn has_subgraphs(body: &Graph) -> bool {
    body.nodes.iter().any(|n| matches!(n.op, Op::If { .. } | Op::Loop { .. } | Op::Scan { .. } | Op::SequenceMap { .. }))
}

/// Replace the Scan or Loop at `ni` by its unrolled nodes; how many nodes now stand in its place.
fn unroll_at(g: &mut Graph, ni: usize) -> Option<usize> {
    match &g.nodes[ni].op {
        Op::Scan { .. } => unroll_scan(g, ni),
        Op::Loop { .. } => unroll_loop(g, ni),
        _ => None,
    }
}

fn unroll_scan(g: &mut Graph, ni: usize) -> Option<usize> {
    let node = g.nodes[ni].clone();
    let Op::Scan { body, num_scan_inputs: m, input_axes, output_axes, input_directions, output_directions } = &node.op else {
        return None;
    };
    let m = *m;
    let n_state = node.inputs.len().checked_sub(m)?;
    if body.inputs.len() != n_state + m || body.outputs.len() < n_state || node.outputs.len() > body.outputs.len() || has_subgraphs(body) {
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
    let k = body.outputs.len() - n_state;
    let u = Unroll {
        node: node.clone(),
        body,
        len,
        init: inputs[..n_state].to_vec(),
        state_in: 0,
        state_out: 0,
        out_axes: stack_axes(body, n_state, output_axes, k)?,
        out_reverse: (0..k).map(|j| output_directions.get(j).copied().unwrap_or(0) != 0).collect(),
        outer: outer_refs(g, ni, body)?,
    };
    let name = node.name.clone();
    // Each scan input's slice at this step: a Gather of a constant index along its axis.
    let src = node.source_op.clone();
    Some(expand(g, ni, u, |g, it, nodes| {
        let mut fed = Vec::with_capacity(m);
        for (j, &(x, ax, _, rev)) in scan_in.iter().enumerate() {
            let at = if rev { len - 1 - it } else { it };
            let idx = g.add_const(format!("{name}#scan{j}_index{it}"), Tensor::scalar_i64(at as i64));
            let slice = g.add_value(format!("{name}#scan{j}_slice{it}"), ValueType::Unknown, ValueKind::Node(crate::ir::NodeId(0)));
            nodes.push(Node {
                name: format!("{name}#slice{j}_{it}"),
                op: Op::Gather { axis: ax as i64 },
                inputs: vec![Some(x), Some(idx)],
                outputs: vec![slice],
                source_op: src.clone(),
            });
            fed.push((body.inputs[n_state + j], slice));
        }
        fed
    }))
}

/// Whether body value `v` is the body's condition input passed through unchanged (directly
/// or by Identity nodes) or a constant true: then a loop entered runs its full trip count.
fn cond_passthrough(body: &Graph, v: ValueId) -> bool {
    let Some(&cond_in) = body.inputs.get(1) else { return false };
    let mut v = v;
    for _ in 0..=body.nodes.len() {
        if v == cond_in {
            return true;
        }
        match &body.value(v).kind {
            ValueKind::Const(t) => return t.numel() == 1 && t.to_f64_vec().first().is_some_and(|&c| c != 0.0),
            ValueKind::Node(p) => {
                let n = body.node(*p);
                match (&n.op, n.inputs.first().copied().flatten()) {
                    (Op::Unary(UnaryOp::Identity), Some(i)) => v = i,
                    _ => return false,
                }
            }
            _ => return false,
        }
    }
    false
}

/// A Loop with a constant trip count whose condition starts true and passes through the body
/// unchanged runs exactly that many times: unroll it like a Scan, the iteration number a
/// constant at each step.
fn unroll_loop(g: &mut Graph, ni: usize) -> Option<usize> {
    let node = g.nodes[ni].clone();
    let Op::Loop { body } = &node.op else { return None };
    let trip = g.const_value(node.inputs.first().copied().flatten()?)?.to_i64_vec()?;
    let &[trip] = trip.as_slice() else { return None };
    let len = usize::try_from(trip).ok()?;
    if let Some(c) = node.inputs.get(1).copied().flatten() {
        let c = g.const_value(c)?;
        if c.numel() != 1 || c.to_f64_vec().first().is_none_or(|&c| c == 0.0) {
            return None;
        }
    }
    let init: Vec<ValueId> = node.inputs.get(2..)?.iter().copied().collect::<Option<_>>()?;
    let n_state = init.len();
    if body.inputs.len() != n_state + 2 || body.outputs.len() < n_state + 1 || has_subgraphs(body) || !cond_passthrough(body, body.outputs[0]) {
        return None;
    }
    if len == 0 || len.saturating_mul(body.nodes.len()) > MAX_UNROLLED_NODES {
        return None;
    }
    let k = body.outputs.len() - 1 - n_state;
    let u = Unroll {
        node: node.clone(),
        body,
        len,
        init,
        state_in: 2,
        state_out: 1,
        out_axes: vec![0; k],
        out_reverse: vec![false; k],
        outer: outer_refs(g, ni, body)?,
    };
    let name = node.name.clone();
    Some(expand(g, ni, u, |g, it, _| {
        let iter = g.add_const(format!("{name}#iter{it}"), Tensor::scalar_i64(it as i64));
        let cond = g.add_const(format!("{name}#cond{it}"), Tensor::new(vec![], crate::tensor::Data::Bool(vec![true])));
        vec![(body.inputs[0], iter), (body.inputs[1], cond)]
    }))
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

    #[test]
    fn unrolled_loop_matches_the_interpreter() {
        let i64_ty = |shape: &[usize]| ValueType::Tensor(TensorType { dtype: DType::I64, shape: Some(Shape::fixed(shape)) });
        let mut body = Graph { name: "body".into(), ..Default::default() };
        let iter = body.add_value("iter", i64_ty(&[]), ValueKind::Input);
        let cond = body.add_value("cond", ValueType::Tensor(TensorType { dtype: DType::Bool, shape: Some(Shape::fixed(&[])) }), ValueKind::Input);
        let y = body.add_value("y", i64_ty(&[1]), ValueKind::Input);
        body.inputs = vec![iter, cond, y];
        let (_, c) = body.add_node("c", Op::Unary(UnaryOp::Identity), vec![Some(cond)], &["cond_out".into()]);
        let (_, s) = body.add_node("add", Op::Binary(BinaryOp::Add), vec![Some(y), Some(iter)], &["y_out".into()]);
        body.outputs = vec![c[0], s[0], s[0]];
        let mut g = Graph::default();
        let m = g.add_const("m", Tensor::scalar_i64(4));
        let y0 = g.add_value("y0", i64_ty(&[1]), ValueKind::Input);
        g.inputs = vec![y0];
        let (_, outs) = g.add_node("loop", Op::Loop { body: Box::new(body) }, vec![Some(m), None, Some(y0)], &["y".into(), "ys".into()]);
        g.outputs = outs;
        let u = unroll_scans(&g).expect("unrolls").expect("changed");
        assert!(!u.nodes.iter().any(|n| matches!(n.op, Op::Loop { .. })));
        let ins = || vec![RtValue::Tensor(Tensor::from_i64s(vec![1], vec![10]))];
        let vals = |v: Vec<RtValue>| v.iter().map(|t| t.as_tensor().ok().and_then(|t| Some((t.shape.clone(), t.to_i64_vec()?)))).collect::<Vec<_>>();
        let want = vals(interp::run(&g, ins()).expect("loop runs"));
        assert_eq!(vals(interp::run(&u, ins()).expect("unrolled runs")), want);
        assert_eq!(want[1], Some((vec![4, 1], vec![10, 11, 13, 16])));
    }
}
