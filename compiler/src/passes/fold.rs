//! Constant folding and shape folding.
//!
//! - `Shape` of a value whose (selected) dims are fixed becomes a constant, and so does a
//!   `Gather` of constant indices from a `Shape` when the gathered dims are fixed, and an op
//!   whose shape rule gives its values from its inputs' dims alone (`Size`) when they are fixed.
//! - A node whose inputs are all constants (Const or Param) and whose outputs are small is run
//!   through the interpreter (`interp::run` on a one-node graph); its outputs become
//!   `ValueKind::Const` and the node goes. An interpreter error means "do not fold".
//! - `If` with a constant condition is replaced by the taken branch's nodes; an op that repeats
//!   one input given its constant inputs (`OpDef::forwards_values`: a Where with a decided
//!   condition) becomes that input's Identity.
//! - `Loop` (with a small constant trip count) and `Scan` fold like other nodes when the
//!   enclosing values their bodies read are constants as well.
//!
//! After each sweep inference runs again, so `Shape → Gather → Concat → Reshape` ends as a
//! static Reshape; sweeps repeat to a fixed point. Value ids stay stable (removed nodes leave
//! their values as constants); node ids are renumbered.
use super::infer::{infer, node_err};
use super::PassError;
use crate::interp::{self, RtValue};
use crate::ir::{BinaryOp, Dim, DimExpr, Graph, Node, NodeId, Op, TensorType, ValueId, ValueKind, ValueType};
use crate::tensor::Tensor;
use std::collections::HashMap;

/// Fold only when every output has at most this many elements.
pub const MAX_FOLD_ELEMS: usize = 1 << 16;
/// ... and the inputs together hold at most this many (skip big weight-only subgraphs).
pub const MAX_FOLD_INPUT_ELEMS: usize = 1 << 22;

/// Infer + fold to a fixed point.
pub fn fold(g: &mut Graph) -> Result<(), PassError> {
    for _ in 0..64 {
        infer(g)?;
        if !fold_once(g)? {
            break;
        }
    }
    Ok(())
}

/// One sweep; returns whether anything changed.
pub fn fold_once(g: &mut Graph) -> Result<bool, PassError> {
    let mut changed = false;
    let mut removed = vec![false; g.nodes.len()];
    let integer_dequantized = super::qdq::integer_dequantized(g);
    let mut ni = 0;
    while ni < g.nodes.len() {
        if let Op::If { .. } = &g.nodes[ni].op {
            if let Some(cond) = g.nodes[ni].inputs.first().copied().flatten().and_then(|c| const_small(g, c)) {
                let taken = match cond.to_f64_vec().first() {
                    Some(v) => *v != 0.0,
                    None => return Err(node_err(&g.nodes[ni], "the condition is empty".into())),
                };
                if let Some(added) = inline_if(g, ni, taken)? {
                    removed.splice(ni..=ni, std::iter::repeat_n(false, added));
                    changed = true;
                    continue; // Look at the spliced nodes next.
                }
            }
        }
        if let Some(i) = forwarded_input(g, &g.nodes[ni]) {
            let n = &mut g.nodes[ni];
            n.op = Op::Unary(crate::ir::UnaryOp::Identity);
            n.inputs = vec![n.inputs[i]];
            changed = true;
        }
        if let Some(op) = crate::ops::reduce::with_constant_axes(g, &g.nodes[ni]) {
            let n = &mut g.nodes[ni];
            n.op = op;
            n.inputs.truncate(1);
            changed = true;
        }
        // Dequantized weights a Conv, MatMul or Gemm reads stay for the QDQ fusion (`qdq`),
        // which reads their integers.
        let kept = g.nodes[ni].outputs.iter().any(|o| integer_dequantized.contains(o));
        if let Some(outs) = if kept { None } else { try_fold(g, &g.nodes[ni]) } {
            for (&o, t) in g.nodes[ni].outputs.clone().iter().zip(outs) {
                let v = g.value_mut(o);
                v.ty = ValueType::Tensor(TensorType { dtype: t.dtype(), shape: Some(crate::ir::Shape::fixed(&t.shape)) });
                v.kind = ValueKind::Const(t);
            }
            removed[ni] = true;
            changed = true;
        }
        ni += 1;
    }
    if removed.iter().any(|&r| r) {
        let nodes = std::mem::take(&mut g.nodes);
        g.nodes = nodes.into_iter().zip(removed).filter(|(_, r)| !r).map(|(n, _)| n).collect();
        renumber(g);
    }
    Ok(changed)
}

/// Set every node output's producer to its node's position (outputs already turned into
/// constants by a fold whose node is not yet removed stay constants).
pub fn renumber(g: &mut Graph) {
    for (i, n) in g.nodes.iter().enumerate() {
        for &o in &n.outputs {
            let k = &mut g.values[o.0 as usize].kind;
            if matches!(k, ValueKind::Node(_)) {
                *k = ValueKind::Node(NodeId(i as u32));
            }
        }
    }
}

/// The input an op repeats unchanged given its constant inputs (a Where whose condition is
/// all true or all false), when it has the output's type and shape: the node is then that
/// input's Identity, and the other side's computation goes.
fn forwarded_input(g: &Graph, n: &Node) -> Option<usize> {
    let Op::Def(d) = &n.op else { return None };
    let known: Vec<Option<Vec<i64>>> = n.inputs.iter().map(|v| const_small(g, (*v)?).filter(|t| t.numel() <= MAX_FOLD_ELEMS)?.to_i64_vec()).collect();
    let i = d.forwards_values(&known)?;
    let x = g.tensor_type(n.inputs.get(i).copied().flatten()?)?;
    let y = g.tensor_type(*n.outputs.first()?)?;
    (n.outputs.len() == 1 && x.dtype == y.dtype && x.shape.is_some() && x.shape == y.shape && x.shape.as_ref()?.as_fixed().is_some()).then_some(i)
}

fn const_small(g: &Graph, v: ValueId) -> Option<Tensor> {
    match &g.value(v).kind {
        ValueKind::Const(t) => Some(t.clone()),
        ValueKind::Param(p) if p.shape.iter().product::<usize>() <= MAX_FOLD_INPUT_ELEMS => p.to_tensor(),
        _ => None,
    }
}

fn fixed_dims(g: &Graph, v: ValueId) -> Option<Vec<Option<usize>>> {
    let s = g.tensor_type(v)?.shape.as_ref()?;
    Some(s.0.iter().map(Dim::fixed).collect())
}

/// The constant outputs of `n`, if it can be folded.
fn try_fold(g: &Graph, n: &Node) -> Option<Vec<Tensor>> {
    match &n.op {
        // `false ∧ x` and `true ∨ x`, whatever x (a decided comparison of dims beside a
        // run-time one).
        Op::Binary(b @ (BinaryOp::And | BinaryOp::Or)) => {
            let absorbing = *b == BinaryOp::Or;
            let decides = |v: Option<ValueId>| v.and_then(|v| const_small(g, v)).and_then(|t| t.to_i64_vec()).is_some_and(|v| !v.is_empty() && v.iter().all(|&x| (x != 0) == absorbing));
            if decides(n.inputs.first().copied().flatten()) || decides(n.inputs.get(1).copied().flatten()) {
                let shape = fixed_dims(g, *n.outputs.first()?)?.into_iter().collect::<Option<Vec<usize>>>()?;
                let len = shape.iter().product::<usize>();
                if len <= MAX_FOLD_ELEMS {
                    return Some(vec![Tensor::new(shape, crate::tensor::Data::Bool(vec![absorbing; len]))]);
                }
            }
        }
        Op::Def(d) => {
            if let Some(outs) = values_from_dims(g, n, d) {
                return Some(outs);
            }
        }
        Op::Gather { axis } => {
            // Gather of constant indices from a shape value (a Shape's output): fold when the
            // gathered dims are fixed.
            let data = (*n.inputs.first()?)?;
            if let ValueKind::Node(p) = g.value(data).kind {
                let pn = g.node(p);
                if let Some(sel) = dims_of_values(g, pn, data) {
                    let idx = const_small(g, (*n.inputs.get(1)?)?)?;
                    if *axis != 0 && *axis != -1 {
                        return None;
                    }
                    let len = sel.len() as i64;
                    let vals: Option<Vec<i64>> = idx
                        .to_i64_vec()?
                        .iter()
                        .map(|&i| {
                            let i = if i < 0 { i + len } else { i };
                            if i < 0 || i >= len {
                                return None;
                            }
                            sel[i as usize].as_const()
                        })
                        .collect();
                    return Some(vec![Tensor::from_i64s(idx.shape.clone(), vals?)]);
                }
            }
        }
        Op::If { .. } | Op::Seq(_) => return None,
        _ => {}
    }
    // Loop and Scan bodies read enclosing values by name: those must be constants too.
    let mut outer = Vec::new();
    if matches!(n.op, Op::Loop { .. } | Op::Scan { .. }) {
        if matches!(n.op, Op::Loop { .. }) {
            // Only a loop with a small constant trip count (a while-loop might not end).
            let m = g.const_value((*n.inputs.first()?)?)?.to_i64_vec()?;
            if m.first().is_none_or(|&m| !(0..=MAX_FOLD_ELEMS as i64).contains(&m)) {
                return None;
            }
        }
        let mut names = std::collections::HashSet::new();
        super::dce::outer_names(&n.op, &mut names);
        for name in names {
            // Names no value of this graph has are defined inside the body.
            if let Some(v) = g.values.iter().rposition(|v| v.name == name) {
                outer.push((name, g.const_value(ValueId(v as u32))?));
            }
        }
    }
    // General case: every input a constant.
    n.inputs.iter().flatten().next()?;
    let mut in_elems = 0usize;
    for v in n.inputs.iter().flatten() {
        match &g.value(*v).kind {
            ValueKind::Const(t) => in_elems += t.numel(),
            ValueKind::Param(p) => in_elems += p.shape.iter().product::<usize>(),
            _ => return None,
        }
    }
    // Dequantized weights fold whatever their size: the float weights the graph computes with
    // (onnxruntime dequantizes them once as well), not a dequantization on every run.
    let weights = matches!(&n.op, Op::Def(d) if d.get::<crate::ops::quant::Dequantize>().is_some());
    if in_elems > MAX_FOLD_INPUT_ELEMS && !weights {
        return None;
    }
    // Outputs whose size inference knows must be small; unknown ones are checked after.
    for &o in &n.outputs {
        if let Some(numel) = g.tensor_type(o).and_then(|t| t.shape.as_ref()).and_then(|s| s.numel()) {
            if numel > MAX_FOLD_ELEMS && !weights {
                return None;
            }
        }
    }
    let outs = eval_one(g, n, outer).or_else(|| builtin_eval(g, n))?;
    if outs.iter().any(|t| t.numel() > MAX_FOLD_ELEMS) && !weights {
        return None;
    }
    Some(outs)
}

/// The shape rule of `d` at node `n`'s inputs' dims (fixed dims as constants, named dims as
/// variables): the output types and the values it gives from those dims alone
/// (`ShapeCx::out_ints`: a Size's, a Shape's).
fn rule_at_dims(g: &Graph, n: &Node, d: &crate::ops::OpRef) -> Option<(Vec<crate::ops::OutType>, Vec<Option<Vec<DimExpr>>>)> {
    let args = n
        .inputs
        .iter()
        .map(|v| {
            let t = g.tensor_type((*v)?)?;
            let dims = t.shape.as_ref().map(|s| s.0.iter().map(Dim::expr).collect());
            Some(crate::ops::Arg { dtype: t.dtype, dims, value: None })
        })
        .collect();
    let mut cx = crate::ops::ShapeCx::new(args);
    let types = d.shapes(&mut cx).ok()?;
    Some((types, cx.out_ints))
}

/// Output `v` of node `n` as dims, when `n`'s shape rule gives its values from its inputs'
/// dims (a Shape's output).
fn dims_of_values(g: &Graph, n: &Node, v: ValueId) -> Option<Vec<DimExpr>> {
    let Op::Def(d) = &n.op else { return None };
    let k = n.outputs.iter().position(|&o| o == v)?;
    rule_at_dims(g, n, d)?.1.into_iter().nth(k)?
}

/// The outputs of an op whose shape rule gives every output's values from the inputs' dims
/// (`ShapeCx::out_ints`: a Size, a Shape), when those values are constants.
fn values_from_dims(g: &Graph, n: &Node, d: &crate::ops::OpRef) -> Option<Vec<Tensor>> {
    let (types, out_ints) = rule_at_dims(g, n, d)?;
    if types.len() != n.outputs.len() {
        return None;
    }
    let mut outs = Vec::with_capacity(types.len());
    for (k, t) in types.iter().enumerate() {
        let vals: Vec<i64> = out_ints.get(k)?.as_ref()?.iter().map(DimExpr::as_const).collect::<Option<_>>()?;
        let shape: Vec<usize> = t.dims.as_ref()?.iter().map(|e| usize::try_from(e.as_const()?).ok()).collect::<Option<_>>()?;
        if shape.iter().product::<usize>() != vals.len() {
            return None;
        }
        outs.push(interp::ops::cast::cast(&Tensor::from_i64s(shape, vals), t.dtype, false).ok()?);
    }
    Some(outs)
}

/// Shape-computation ops folded here when the interpreter cannot (yet) run them: Gather of an
/// integer tensor.
fn builtin_eval(g: &Graph, n: &Node) -> Option<Vec<Tensor>> {
    match &n.op {
        Op::Gather { axis } => {
            let data = g.const_value((*n.inputs.first()?)?)?;
            let idx = g.const_value((*n.inputs.get(1)?)?)?;
            if !matches!(data.dtype(), crate::ir::DType::I64 | crate::ir::DType::I32) || data.rank() == 0 {
                return None;
            }
            let r = data.rank() as i64;
            let a = if *axis < 0 { axis + r } else { *axis };
            if a < 0 || a >= r {
                return None;
            }
            let a = a as usize;
            let dim = data.shape[a] as i64;
            let outer: usize = data.shape[..a].iter().product();
            let inner: usize = data.shape[a + 1..].iter().product();
            let vals = data.to_i64_vec()?;
            let ix = idx.to_i64_vec()?;
            let mut out = Vec::with_capacity(outer * ix.len() * inner);
            for o in 0..outer {
                for &i in &ix {
                    let i = if i < 0 { i + dim } else { i };
                    if i < 0 || i >= dim {
                        return None;
                    }
                    let base = (o * dim as usize + i as usize) * inner;
                    out.extend_from_slice(&vals[base..base + inner]);
                }
            }
            let mut shape = data.shape[..a].to_vec();
            shape.extend_from_slice(&idx.shape);
            shape.extend_from_slice(&data.shape[a + 1..]);
            let t = match data.dtype() {
                crate::ir::DType::I32 => Tensor::new(shape, crate::tensor::Data::I32(out.into_iter().map(|v| v as i32).collect())),
                _ => Tensor::from_i64s(shape, out),
            };
            Some(vec![t])
        }
        _ => None,
    }
}

/// Run one node with constant inputs through the interpreter.
fn eval_one(g: &Graph, n: &Node, outer: Vec<(String, Tensor)>) -> Option<Vec<Tensor>> {
    let mut mini = Graph { name: "fold".into(), ..Default::default() };
    for (name, t) in outer {
        mini.add_const(name, t);
    }
    let mut inputs = Vec::with_capacity(n.inputs.len());
    for v in &n.inputs {
        inputs.push(match v {
            None => None,
            Some(v) => Some(mini.add_const(g.value(*v).name.clone(), g.const_value(*v)?)),
        });
    }
    let names: Vec<String> = n.outputs.iter().map(|&o| g.value(o).name.clone()).collect();
    let (_, outs) = mini.add_node(n.name.clone(), n.op.clone(), inputs, &names);
    mini.outputs = outs;
    // Interpreter kernels are being written concurrently: a panic is also "do not fold".
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| interp::run(&mini, vec![])));
    let vals = res.ok()?.ok()?;
    vals.into_iter()
        .map(|v| match v {
            RtValue::Tensor(t) => Some(t),
            _ => None,
        })
        .collect()
}

/// Replace the If node at `ni` by the taken branch's nodes; returns how many nodes now stand
/// in its place, or `None` when it was left alone.
fn inline_if(g: &mut Graph, ni: usize, taken: bool) -> Result<Option<usize>, PassError> {
    let node = g.nodes[ni].clone();
    let Op::If { then_branch, else_branch } = &node.op else { return Ok(None) };
    let br: &Graph = if taken { then_branch } else { else_branch };
    if br.outputs.len() != node.outputs.len() {
        return Err(node_err(&node, format!("the branch has {} outputs, the node {}", br.outputs.len(), node.outputs.len())));
    }
    // Parent values visible at this node, by name (the latest definition wins).
    let mut visible: HashMap<&str, ValueId> = HashMap::new();
    let mut defined_here = vec![false; g.values.len()];
    for n in &g.nodes[..ni] {
        for o in &n.outputs {
            defined_here[o.0 as usize] = true;
        }
    }
    for (i, v) in g.values.iter().enumerate() {
        let ok = match v.kind {
            ValueKind::Node(_) => defined_here[i],
            _ => true,
        };
        if ok {
            visible.insert(v.name.as_str(), ValueId(i as u32));
        }
    }
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    for (i, v) in br.values.iter().enumerate() {
        if let ValueKind::Outer = v.kind {
            // A name this graph cannot resolve (it lives further out): leave the If alone.
            let Some(&pv) = visible.get(v.name.as_str()) else { return Ok(None) };
            map.insert(ValueId(i as u32), pv);
        }
    }
    // Branch outputs produced by branch nodes become the If's own output values.
    let mut out_identity = vec![];
    for (k, &bo) in br.outputs.iter().enumerate() {
        let is_node = matches!(br.value(bo).kind, ValueKind::Node(_));
        if is_node && !map.contains_key(&bo) {
            map.insert(bo, node.outputs[k]);
        } else {
            out_identity.push((k, bo));
        }
    }
    for (i, v) in br.values.iter().enumerate() {
        let id = ValueId(i as u32);
        if map.contains_key(&id) {
            continue;
        }
        let nv = g.add_value(v.name.clone(), v.ty.clone(), v.kind.clone());
        map.insert(id, nv);
    }
    let mut new_nodes: Vec<Node> = br
        .nodes
        .iter()
        .map(|bn| Node {
            name: bn.name.clone(),
            op: bn.op.clone(),
            inputs: bn.inputs.iter().map(|v| v.map(|v| map[&v])).collect(),
            outputs: bn.outputs.iter().map(|v| map[v]).collect(),
            source_op: bn.source_op.clone(),
        })
        .collect();
    for (k, bo) in out_identity {
        new_nodes.push(Node {
            name: node.name.clone(),
            op: Op::Unary(crate::ir::UnaryOp::Identity),
            inputs: vec![Some(map[&bo])],
            outputs: vec![node.outputs[k]],
            source_op: node.source_op.clone(),
        });
    }
    let added = new_nodes.len();
    g.nodes.splice(ni..=ni, new_nodes);
    renumber(g);
    Ok(Some(added))
}
