//! Type and shape inference: output dtypes and shapes of every node from its input types (and
//! from constant inputs where the op needs their values: Reshape's shape, Slice's starts …).
//!
//! What cannot be known stays `ValueType::Unknown` or partially known (rank known, dims
//! symbolic); only a real contradiction (two fixed dims that must agree and do not) is an error.
//! Symbolic dims flow through where they can (a batch dim through Conv, Reshape's `0` …); dims
//! that are not known at all get fresh names `?v<value>.<k>`, deterministic so that running the
//! pass again changes nothing.
use super::PassError;
use crate::ir::{BinaryOp, DType, Dim, Graph, Node, Op, Shape, TensorType, UnaryOp, ValueId, ValueKind, ValueType, Window};
use crate::tensor::Tensor;


/// Run inference over the whole graph (and If/Loop/Scan bodies, with outer types by name).
pub fn infer(g: &mut Graph) -> Result<(), PassError> {
    check_input_sizes(g)?;
    infer_graph(g, &[])
}

fn infer_graph(g: &mut Graph, outer: &[(String, ValueType)]) -> Result<(), PassError> {
    // Outer values take the enclosing graph's types.
    for v in g.values.iter_mut() {
        if matches!(v.kind, ValueKind::Outer) {
            if let Some((_, t)) = outer.iter().rev().find(|(n, _)| *n == v.name) {
                v.ty = merge(&v.ty, t.clone());
            }
        }
    }
    for ni in 0..g.nodes.len() {
        // Subgraphs first: their output types feed If's inference.
        if matches!(g.nodes[ni].op, Op::If { .. } | Op::Loop { .. } | Op::Scan { .. }) {
            let mut scope: Vec<(String, ValueType)> = outer.to_vec();
            scope.extend(g.values.iter().map(|v| (v.name.clone(), v.ty.clone())));
            let mut op = std::mem::replace(&mut g.nodes[ni].op, Op::Expand);
            match &mut op {
                Op::If { then_branch, else_branch } => {
                    inline_outer_consts(g, then_branch);
                    inline_outer_consts(g, else_branch);
                }
                Op::Loop { body } | Op::Scan { body, .. } => inline_outer_consts(g, body),
                _ => {}
            }
            let res = match &mut op {
                Op::If { then_branch, else_branch } => {
                    infer_graph(then_branch, &scope).and_then(|_| infer_graph(else_branch, &scope))
                }
                Op::Scan { body, num_scan_inputs, input_axes, .. } => {
                    scan_body_inputs(g, &g.nodes[ni], body, *num_scan_inputs, input_axes);
                    infer_graph(body, &scope)
                }
                Op::Loop { body } => {
                    loop_body_inputs(g, &g.nodes[ni], body);
                    infer_graph(body, &scope)
                }
                _ => Ok(()),
            };
            g.nodes[ni].op = op;
            res?;
        }
        let node = &g.nodes[ni];
        let tys = infer_node(g, node).map_err(|reason| node_err(node, reason))?;
        let outs = node.outputs.clone();
        for (o, t) in outs.into_iter().zip(tys) {
            let v = g.value_mut(o);
            v.ty = merge(&v.ty, t);
            check_size(&v.ty).map_err(|r| node_err(&g.nodes[ni], format!("output `{}`: {r}", g.value(o).name)))?;
        }
    }
    Ok(())
}

/// Refuse a value no arena could hold (fixed dims, and symbolic ones at their bounds), so that
/// every later product over one value's dims fits a `usize` (see `crate::size`).
fn check_size(ty: &ValueType) -> Result<(), String> {
    if let ValueType::Tensor(TensorType { dtype, shape: Some(s) }) = ty {
        let dims: Vec<usize> = s.0.iter().filter_map(|d| match d {
            Dim::Fixed(n) => Some(*n),
            Dim::Sym { bound, .. } => *bound,
        }).collect();
        crate::size::value_bytes(&dims, *dtype)?;
    }
    Ok(())
}

/// Graph inputs whose declared shape no arena could hold.
fn check_input_sizes(g: &Graph) -> Result<(), PassError> {
    for &i in &g.inputs {
        let v = g.value(i);
        check_size(&v.ty).map_err(|reason| PassError::Node { node: format!("graph input `{}`", v.name), op: "input".into(), reason })?;
    }
    Ok(())
}

/// Outer values that are constants of the enclosing graph become constants of the body, so
/// inference (Unsqueeze axes, Reshape targets …) and codegen see their values.
fn inline_outer_consts(g: &Graph, body: &mut Graph) {
    for bv in body.values.iter_mut().filter(|v| matches!(v.kind, ValueKind::Outer)) {
        let Some(ov) = g.values.iter().rev().find(|v| v.name == bv.name) else { continue };
        if let ValueKind::Const(t) = &ov.kind {
            bv.kind = ValueKind::Const(t.clone());
            bv.ty = ov.ty.clone();
        }
    }
}

/// A Loop body's inputs: the iteration number, the condition and the carried values as the
/// node feeds them.
fn loop_body_inputs(g: &Graph, n: &Node, body: &mut Graph) {
    let scalar = |d| ValueType::Tensor(TensorType { dtype: d, shape: Some(Shape(vec![])) });
    for (i, b) in body.inputs.clone().into_iter().enumerate() {
        let ty = match i {
            0 => scalar(DType::I64),
            1 => scalar(DType::Bool),
            _ => match n.inputs.get(i).copied().flatten() {
                Some(v) => g.value(v).ty.clone(),
                None => continue,
            },
        };
        let bv = body.value_mut(b);
        bv.ty = merge(&bv.ty, ty);
    }
}

/// Whether a Loop runs exactly its trip count: no condition, or a constant true one that the
/// body passes through unchanged. Then its scan outputs have the trip count as their length.
pub fn loop_is_counted(g: &Graph, n: &Node, body: &Graph) -> bool {
    let is_true = |t: &Tensor| matches!(&t.data, crate::tensor::Data::Bool(b) if b.first() == Some(&true));
    let cond_ok = match n.inputs.get(1).copied().flatten() {
        None => true,
        Some(c) => g.const_value(c).is_some_and(|t| is_true(&t)),
    };
    let (Some(&cin), Some(&cout)) = (body.inputs.get(1), body.outputs.first()) else { return false };
    let passes = cout == cin
        || body.nodes.iter().any(|b| b.outputs.first() == Some(&cout) && matches!(b.op, Op::Unary(UnaryOp::Identity)) && b.inputs.first() == Some(&Some(cin)))
        || body.const_value(cout).is_some_and(|t| is_true(&t));
    cond_ok && passes
}

/// A Scan body's inputs take the types the node feeds them: the states as they are, each
/// scan input without its scan axis (what the ONNX body declares may be less precise).
fn scan_body_inputs(g: &Graph, n: &Node, body: &mut Graph, m: usize, input_axes: &[i64]) {
    let n_state = n.inputs.len().saturating_sub(m);
    for (i, inp) in n.inputs.iter().enumerate() {
        let (Some(v), Some(&b)) = (inp, body.inputs.get(i)) else { continue };
        let ty = match &g.value(*v).ty {
            ValueType::Tensor(tt) if i >= n_state => {
                let shape = tt.shape.as_ref().and_then(|s| {
                    let ax = norm_axis(input_axes.get(i - n_state).copied().unwrap_or(0), s.rank()).ok()?;
                    let mut d = s.0.clone();
                    d.remove(ax);
                    Some(Shape(d))
                });
                ValueType::Tensor(TensorType { dtype: tt.dtype, shape })
            }
            t => t.clone(),
        };
        let bv = body.value_mut(b);
        bv.ty = merge(&bv.ty, ty);
    }
}

pub(crate) fn node_err(node: &Node, reason: String) -> PassError {
    let op = node.source_op.as_ref().map(|(o, _)| o.clone()).unwrap_or_else(|| node.op.name());
    PassError::Node { node: node.name.clone(), op, reason }
}

fn is_fresh(d: &Dim) -> bool {
    matches!(d, Dim::Sym { name, .. } if name.starts_with('?'))
}

/// Combine a value's existing type (declared in the file, or from an earlier run) with the
/// inferred one: fixed dims win, then named symbols over fresh ones; the inference wins on rank
/// or dtype disagreement (declared value_info can be stale).
pub fn merge(old: &ValueType, new: ValueType) -> ValueType {
    match (old, new) {
        (o, ValueType::Unknown) => o.clone(),
        (ValueType::Tensor(o), ValueType::Tensor(n)) => {
            let shape = match (&o.shape, n.shape) {
                (Some(os), None) => Some(os.clone()),
                (None, ns) => ns,
                (Some(os), Some(ns)) if os.rank() != ns.rank() => Some(ns),
                (Some(os), Some(ns)) => Some(Shape(
                    os.0.iter()
                        .zip(ns.0)
                        .map(|(od, nd)| match (od, &nd) {
                            (_, Dim::Fixed(_)) => nd,
                            (Dim::Fixed(_), _) => od.clone(),
                            (Dim::Sym { .. }, _) if is_fresh(&nd) => od.clone(),
                            (Dim::Sym { bound: Some(b), .. }, Dim::Sym { name, bound: None }) => {
                                Dim::Sym { name: name.clone(), bound: Some(*b) }
                            }
                            _ => nd,
                        })
                        .collect(),
                )),
            };
            ValueType::Tensor(TensorType { dtype: n.dtype, shape })
        }
        (_, n) => n,
    }
}

type R<T> = Result<T, String>;

/// Inference context for one node.
struct Cx<'a> {
    g: &'a Graph,
    n: &'a Node,
    fresh: std::cell::Cell<usize>,
}

impl<'a> Cx<'a> {
    fn ty(&self, i: usize) -> Option<&'a TensorType> {
        let v = (*self.n.inputs.get(i)?)?;
        self.g.tensor_type(v)
    }
    fn dtype(&self, i: usize) -> Option<DType> {
        self.ty(i).map(|t| t.dtype)
    }
    fn shape(&self, i: usize) -> Option<&'a [Dim]> {
        self.ty(i)?.shape.as_ref().map(|s| s.0.as_slice())
    }
    fn has(&self, i: usize) -> bool {
        matches!(self.n.inputs.get(i), Some(Some(_)))
    }
    fn konst(&self, i: usize) -> Option<Tensor> {
        let v: ValueId = (*self.n.inputs.get(i)?)?;
        match &self.g.value(v).kind {
            ValueKind::Const(t) => Some(t.clone()),
            ValueKind::Param(p) if p.shape.iter().product::<usize>() <= 1 << 16 => p.to_tensor(),
            _ => None,
        }
    }
    fn ints(&self, i: usize) -> Option<Vec<i64>> {
        self.konst(i)?.to_i64_vec()
    }
    /// A dim nothing is known about.
    fn fresh(&self) -> Dim {
        let k = self.fresh.get();
        self.fresh.set(k + 1);
        let out = self.n.outputs.first().map(|v| v.0).unwrap_or(0);
        Dim::Sym { name: format!("?v{out}.{k}"), bound: None }
    }
    fn fresh_dims(&self, r: usize) -> Vec<Dim> {
        (0..r).map(|_| self.fresh()).collect()
    }
}

fn t(dtype: Option<DType>, dims: Option<Vec<Dim>>) -> ValueType {
    match dtype {
        Some(dtype) => ValueType::Tensor(TensorType { dtype, shape: dims.map(Shape) }),
        None => ValueType::Unknown,
    }
}

use crate::ir::axis::norm_axis;

/// numpy broadcast of two dims.
fn bcast_dim(cx: &Cx, a: &Dim, b: &Dim) -> R<Dim> {
    Ok(match (a, b) {
        (Dim::Fixed(x), Dim::Fixed(y)) => {
            if x == y || *y == 1 {
                a.clone()
            } else if *x == 1 {
                b.clone()
            } else {
                return Err(format!("dims {x} and {y} do not broadcast"));
            }
        }
        (Dim::Fixed(1), s) | (s, Dim::Fixed(1)) => s.clone(),
        // A symbol broadcast against k != 1 must be k (or 1): the result is k.
        (Dim::Fixed(_), _) => a.clone(),
        (_, Dim::Fixed(_)) => b.clone(),
        (Dim::Sym { name: x, .. }, Dim::Sym { name: y, .. }) if x == y => a.clone(),
        _ => cx.fresh(),
    })
}

fn bcast(cx: &Cx, a: &[Dim], b: &[Dim]) -> R<Vec<Dim>> {
    let r = a.len().max(b.len());
    let one = Dim::Fixed(1);
    (0..r)
        .map(|i| {
            let da = if i + a.len() >= r { &a[i + a.len() - r] } else { &one };
            let db = if i + b.len() >= r { &b[i + b.len() - r] } else { &one };
            bcast_dim(cx, da, db).map_err(|e| format!("shapes {} and {} do not broadcast: {e}", Shape(a.to_vec()), Shape(b.to_vec())))
        })
        .collect()
}

/// Two dims that must be equal: the more specific one, or an error if both fixed and differ.
fn unify(a: &Dim, b: &Dim, what: &str) -> R<Dim> {
    match (a, b) {
        (Dim::Fixed(x), Dim::Fixed(y)) if x != y => Err(format!("{what}: {x} vs {y}")),
        (Dim::Fixed(_), _) => Ok(a.clone()),
        (_, Dim::Fixed(_)) => Ok(b.clone()),
        _ if is_fresh(a) => Ok(b.clone()),
        _ => Ok(a.clone()),
    }
}

fn is_bool_op(b: BinaryOp) -> bool {
    matches!(
        b,
        BinaryOp::Equal
            | BinaryOp::Less
            | BinaryOp::LessOrEqual
            | BinaryOp::Greater
            | BinaryOp::GreaterOrEqual
            | BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor
    )
}

/// Output types of an op defined in `crate::ops`, from its shape rule: fixed dims are
/// constants, named dims variables, and an output dim that is an expression of them a named
/// dim spelled as that expression (bounded by it at the inputs' bounds). Until every input's
/// type and rank are known, the outputs stay unknown.
fn def_types(cx: &Cx, d: &crate::ops::OpRef) -> R<Vec<ValueType>> {
    use crate::ir::DimExpr;
    let mut bounds: std::collections::HashMap<String, Option<usize>> = std::collections::HashMap::new();
    let mut args = Vec::with_capacity(cx.n.inputs.len());
    for i in 0..cx.n.inputs.len() {
        if !cx.has(i) {
            args.push(None);
            continue;
        }
        let Some(dtype) = cx.dtype(i) else { return Ok(vec![]) };
        let dims = cx.shape(i).map(|shape| {
            shape
                .iter()
                .map(|d| {
                    if let Dim::Sym { name, bound } = d {
                        bounds.insert(name.clone(), *bound);
                    }
                    d.expr()
                })
                .collect()
        });
        // Operands that decide shapes are small; weights are not copied for the rule.
        let value = cx.konst(i).filter(|t| t.numel() <= 1 << 16);
        args.push(Some(crate::ops::Arg { dtype, dims, value }));
    }
    let rank_unknown = args.iter().flatten().any(|a| a.dims.is_none());
    let outs = match d.shapes(&mut crate::ops::ShapeCx::new(args)) {
        Ok(o) => o,
        // The rule needs a rank not known yet: a later round of inference decides.
        Err(_) if rank_unknown => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    let bound = |name: &str| bounds.get(name).copied().flatten().map(|b| b as i64);
    // A dim that depends on values is a fresh one, the same for the same expression (Unique's
    // count of distinct values, which two outputs share).
    let unknown: std::cell::RefCell<Vec<(DimExpr, Dim)>> = Default::default();
    let dim = |e: &DimExpr| -> R<Dim> {
        if crate::ops::is_unknown(e) {
            let mut u = unknown.borrow_mut();
            if let Some((_, d)) = u.iter().find(|(x, _)| x == e) {
                return Ok(d.clone());
            }
            let d = cx.fresh();
            u.push((e.clone(), d.clone()));
            return Ok(d);
        }
        dim_of_expr(e, &bound)
    };
    outs.iter()
        .map(|o| {
            let shape = o.dims.as_ref().map(|ds| ds.iter().map(dim).collect::<R<Vec<Dim>>>()).transpose()?;
            Ok(ValueType::Tensor(TensorType { dtype: o.dtype, shape: shape.map(Shape) }))
        })
        .collect()
}

/// The dim an expression of named dims stands for: a number, or a named dim whose name is the
/// expression (its bound the expression at the named dims' bounds).
fn dim_of_expr(e: &crate::ir::DimExpr, bound: &dyn Fn(&str) -> Option<i64>) -> R<Dim> {
    Ok(match e.as_const() {
        Some(c) => Dim::Fixed(usize::try_from(c).map_err(|_| format!("an output dim would be {c}"))?),
        None => Dim::Sym { name: e.to_string(), bound: e.eval(bound).map(|b| b.max(0) as usize) },
    })
}

/// Output types of one node, in output order (fewer than the outputs means the rest unknown).
pub(crate) fn infer_node(g: &Graph, n: &Node) -> R<Vec<ValueType>> {
    let cx = Cx { g, n, fresh: std::cell::Cell::new(0) };
    let cx = &cx;
    let same = || vec![t(cx.dtype(0), cx.shape(0).map(|s| s.to_vec()))];
    Ok(match &n.op {
        Op::Def(d) => def_types(cx, d)?,
        Op::Unary(u) => {
            let dt = match u {
                UnaryOp::IsNaN | UnaryOp::IsInf { .. } => Some(DType::Bool),
                _ => cx.dtype(0),
            };
            vec![t(dt, cx.shape(0).map(|s| s.to_vec()))]
        }
        // Slope broadcasts to x (per channel before opset 7): the output is shaped like x.
        Op::Binary(BinaryOp::PRelu) => same(),
        Op::Binary(b) => {
            let dt = if is_bool_op(*b) { cx.dtype(0).or(cx.dtype(1)).map(|_| DType::Bool) } else { cx.dtype(0).or(cx.dtype(1)) };
            let dims = match (cx.shape(0), cx.shape(1)) {
                (Some(a), Some(b)) => Some(bcast(cx, a, b)?),
                _ => None,
            };
            vec![t(dt, dims)]
        }
        Op::Conv { window, group } | Op::FusedConv { window, group, .. } => vec![t(cx.dtype(0), conv(cx, window, *group)?)],
        // Integer products: i32 accumulators, or requantized to y_zero_point's type (uint8
        // when it is absent).
        // Inputs have the output's shape or one element: the output is the largest input.
        Op::Elementwise(_) => {
            let mut dims: Option<Vec<Dim>> = Some(vec![]);
            for i in 0..n.inputs.len() {
                dims = match (dims, cx.shape(i)) {
                    (Some(a), Some(b)) => Some(bcast(cx, &a, b)?),
                    _ => None,
                };
            }
            vec![t(Some(DType::F32), dims)]
        }
        Op::Reshape { allowzero } => vec![t(cx.dtype(0), reshape(cx, *allowzero)?)],
        Op::Concat { axis } => {
            let shapes: Vec<Option<&[Dim]>> = (0..n.inputs.len()).filter(|&i| cx.has(i)).map(|i| cx.shape(i)).collect();
            let dt = (0..n.inputs.len()).find_map(|i| cx.dtype(i));
            let dims = if shapes.iter().all(|s| s.is_some()) && !shapes.is_empty() {
                let shapes: Vec<&[Dim]> = shapes.into_iter().flatten().collect();
                let r = shapes[0].len();
                if shapes.iter().any(|s| s.len() != r) {
                    return Err("inputs differ in rank".into());
                }
                let a = norm_axis(*axis, r)?;
                let mut o = shapes[0].to_vec();
                for s in &shapes[1..] {
                    for i in 0..r {
                        if i != a {
                            o[i] = unify(&o[i], &s[i], &format!("inputs differ on axis {i}"))?;
                        }
                    }
                }
                let cat: Vec<Dim> = shapes.iter().map(|s| s[a].clone()).collect();
                o[a] = if cat.iter().all(|d| d.fixed().is_some()) {
                    Dim::Fixed(cat.iter().filter_map(Dim::fixed).fold(0usize, usize::saturating_add))
                } else {
                    let nonzero: Vec<&Dim> = cat.iter().filter(|d| **d != Dim::Fixed(0)).collect();
                    if nonzero.len() == 1 { nonzero[0].clone() } else { cx.fresh() }
                };
                Some(o)
            } else {
                // Rank is still known from any input with a shape.
                shapes.iter().flatten().next().map(|s| cx.fresh_dims(s.len()))
            };
            vec![t(dt, dims)]
        }
        Op::Gather { axis } => {
            let dims = match (cx.shape(0), cx.shape(1)) {
                (Some(d), Some(i)) => {
                    let a = norm_axis(*axis, d.len())?;
                    if let (Dim::Fixed(size), Some(idx)) = (&d[a], cx.ints(1)) {
                        let s = *size as i64;
                        if let Some(bad) = idx.iter().find(|&&v| v < -s || v >= s) {
                            return Err(format!("index {bad} is out of range for axis {a} of size {s}"));
                        }
                    }
                    let mut o = d[..a].to_vec();
                    o.extend_from_slice(i);
                    o.extend_from_slice(&d[a + 1..]);
                    Some(o)
                }
                _ => None,
            };
            vec![t(cx.dtype(0), dims)]
        }
        Op::Expand => {
            let dims = match (cx.shape(0), cx.ints(1)) {
                (Some(x), Some(s)) => {
                    let s: Vec<Dim> = s.iter().map(|&v| Dim::Fixed(v.max(0) as usize)).collect();
                    Some(bcast(cx, x, &s)?)
                }
                (Some(x), None) => match (cx.sym_shape(1), cx.shape(1)) {
                    (Some(s), _) => Some(bcast(cx, x, &s)?),
                    (None, Some([Dim::Fixed(k)])) => Some(cx.fresh_dims(x.len().max(*k))),
                    _ => None,
                },
                _ => None,
            };
            vec![t(cx.dtype(0), dims)]
        }
        Op::ConstantOfShape { value } => {
            let dims = match cx.ints(0) {
                Some(s) => Some(s.iter().map(|&v| usize::try_from(v).map(Dim::Fixed).map_err(|_| format!("negative dim {v}"))).collect::<R<_>>()?),
                None => match (cx.sym_shape(0), cx.shape(0)) {
                    (Some(d), _) => Some(d),
                    (None, Some([Dim::Fixed(k)])) => Some(cx.fresh_dims(*k)),
                    _ => None,
                },
            };
            vec![t(Some(value.dtype()), dims)]
        }
        Op::If { then_branch, else_branch } => {
            let k = n.outputs.len();
            (0..k)
                .map(|i| {
                    let a = then_branch.outputs.get(i).map(|&v| then_branch.value(v).ty.clone());
                    let b = else_branch.outputs.get(i).map(|&v| else_branch.value(v).ty.clone());
                    match (a, b) {
                        (Some(a), Some(b)) if a == b => a,
                        (Some(ValueType::Tensor(a)), Some(ValueType::Tensor(b))) if a.dtype == b.dtype => {
                            let shape = match (&a.shape, &b.shape) {
                                (Some(x), Some(y)) if x.rank() == y.rank() => Some(Shape(
                                    x.0.iter().zip(&y.0).map(|(p, q)| if p == q { p.clone() } else { cx.fresh() }).collect(),
                                )),
                                _ => None,
                            };
                            ValueType::Tensor(TensorType { dtype: a.dtype, shape })
                        }
                        _ => ValueType::Unknown,
                    }
                })
                .collect()
        }
        Op::Scan { body, num_scan_inputs, input_axes, output_axes, .. } => {
            let m = *num_scan_inputs;
            let n_state = n.inputs.len().saturating_sub(m);
            // Trip count: the first scan input's length along its axis.
            let len = cx.shape(n_state).and_then(|s| Some(s.get(norm_axis(input_axes.first().copied().unwrap_or(0), s.len()).ok()?)?.clone()));
            body.outputs
                .iter()
                .enumerate()
                .map(|(i, &o)| {
                    let ty = body.value(o).ty.clone();
                    if i < n_state {
                        return ty;
                    }
                    let ValueType::Tensor(tt) = ty else { return ValueType::Unknown };
                    let shape = match (&tt.shape, &len) {
                        (Some(s), Some(l)) => {
                            let ax = norm_axis(output_axes.get(i - n_state).copied().unwrap_or(0), s.rank() + 1).ok();
                            ax.map(|ax| {
                                let mut d = s.0.clone();
                                d.insert(ax, l.clone());
                                Shape(d)
                            })
                        }
                        _ => None,
                    };
                    ValueType::Tensor(TensorType { dtype: tt.dtype, shape })
                })
                .collect()
        }
        Op::Loop { body } => {
            let nc = n.inputs.len().saturating_sub(2);
            let trips = match cx.ints(0).and_then(|v| v.first().copied()) {
                Some(m) if m >= 0 && loop_is_counted(cx.g, n, body) => Dim::Fixed(m as usize),
                _ => cx.fresh(),
            };
            body.outputs
                .iter()
                .enumerate()
                .skip(1)
                .map(|(i, &o)| {
                    let ty = body.value(o).ty.clone();
                    if i <= nc {
                        return ty;
                    }
                    match ty {
                        ValueType::Tensor(tt) => {
                            let shape = tt.shape.map(|s| Shape(std::iter::once(trips.clone()).chain(s.0).collect()));
                            ValueType::Tensor(TensorType { dtype: tt.dtype, shape })
                        }
                        _ => ValueType::Unknown,
                    }
                })
                .collect()
        }
        // The row count depends on the values: a fresh dim.
        // No rule yet: the outputs keep the types the model declares (value_info), and a pass
        // that needs a shape refuses the value. Listed, so a new op has to choose.
        Op::Seq(_)
        | Op::SequenceMap { .. } => vec![],
    })
}

fn conv(cx: &Cx, w: &Window, group: usize) -> R<Option<Vec<Dim>>> {
    conv_of(cx, 0, 1, w, group)
}

/// The dims of a convolution of input `xi` by weights `wi` (Conv's rules).
fn conv_of(cx: &Cx, xi: usize, wi: usize, w: &Window, group: usize) -> R<Option<Vec<Dim>>> {
    let (Some(x), Some(wt)) = (cx.shape(xi), cx.shape(wi)) else {
        return Ok(cx.shape(xi).map(|x| cx.fresh_dims(x.len())));
    };
    if x.len() < 3 || wt.len() != x.len() {
        return Err(format!("input rank {} and weight rank {} do not fit a convolution", x.len(), wt.len()));
    }
    if let (Dim::Fixed(c), Dim::Fixed(cw)) = (&x[1], &wt[1]) {
        if *c != cw.saturating_mul(group) {
            return Err(format!("input has {c} channels, weight expects {cw} x group {group}"));
        }
    }
    if let Dim::Fixed(m) = wt[0] {
        if m % group != 0 {
            return Err(format!("{m} output channels are not divisible by group {group}"));
        }
    }
    let k: Vec<usize> = if w.kernel_shape.is_empty() {
        match wt[2..].iter().map(Dim::fixed).collect::<Option<Vec<_>>>() {
            Some(k) => k,
            None => return Ok(Some(cx.fresh_dims(x.len()))),
        }
    } else {
        w.kernel_shape.clone()
    };
    if k.len() != x.len() - 2 {
        return Err(format!("kernel has {} dims for {} spatial dims", k.len(), x.len() - 2));
    }
    let mut out = vec![x[0].clone(), wt[0].clone()];
    // The window's one size rule (`ops::window`), over the input's dims as expressions.
    let ks: Vec<crate::ir::DimExpr> = k.iter().map(|&v| crate::ir::DimExpr::constant(v as i64)).collect();
    let xs: Vec<crate::ir::DimExpr> = x[2..].iter().map(Dim::expr).collect();
    let bound = |name: &str| x.iter().find_map(|d| match d {
        Dim::Sym { name: n, bound } if n == name => bound.map(|b| b as i64),
        _ => None,
    });
    for d in crate::ops::window::window_out(w, &ks, &xs)? {
        out.push(match d {
            Some(e) => dim_of_expr(&e, &bound)?,
            None => cx.fresh(),
        });
    }
    Ok(Some(out))
}

/// An element of a shape vector computed at run time: a known integer or a (symbolic) dim.
#[derive(Debug, Clone, PartialEq)]
enum SV {
    I(i64),
    D(Dim),
}

/// The elements of an integer vector value, following Shape → Gather → Unsqueeze → Concat
/// chains so that symbolic dims survive (e.g. `[batch, 8, -1]` when `batch` is symbolic).
fn sym_ints(g: &Graph, v: ValueId, depth: usize) -> Option<Vec<SV>> {
    if depth > 32 {
        return None;
    }
    match &g.value(v).kind {
        ValueKind::Const(t) => return Some(t.to_i64_vec()?.into_iter().map(SV::I).collect()),
        ValueKind::Param(p) if p.shape.iter().product::<usize>() <= 64 => {
            return Some(p.to_tensor()?.to_i64_vec()?.into_iter().map(SV::I).collect())
        }
        ValueKind::Node(_) => {}
        _ => return None,
    }
    let ValueKind::Node(p) = g.value(v).kind else { return None };
    let n = g.node(p);
    let input = |i: usize| n.inputs.get(i).copied().flatten();
    match &n.op {
        Op::Gather { axis: 0 | -1 } => {
            let data = sym_ints(g, input(0)?, depth + 1)?;
            let idx = g.const_value(input(1)?)?.to_i64_vec()?;
            let len = data.len() as i64;
            idx.iter()
                .map(|&i| {
                    let i = if i < 0 { i + len } else { i };
                    (0..len).contains(&i).then(|| data[i as usize].clone())
                })
                .collect()
        }
        Op::Reshape { .. } | Op::Unary(UnaryOp::Identity) => {
            sym_ints(g, input(0)?, depth + 1)
        }
        // An op whose values are its input's dims (a Shape), or that repeats an input's values
        // into an integer output (a Cast to int).
        Op::Def(d) if g.tensor_type(v).is_some_and(|t| t.dtype.is_int()) => {
            if let Some(dims) = dims_as_values(g, n, d, v) {
                return Some(dims);
            }
            let known: Vec<Option<Vec<i64>>> = n.inputs.iter().map(|i| g.const_value((*i)?)?.to_i64_vec()).collect();
            let out = sym_ints(g, input(d.forwards_values(&known)?)?, depth + 1)?;
            let len = g.tensor_type(v)?.shape.as_ref()?.as_fixed()?.iter().product::<usize>();
            (out.len() == len).then_some(out)
        }
        Op::Concat { .. } => {
            let mut out = vec![];
            for i in n.inputs.iter().flatten() {
                out.extend(sym_ints(g, *i, depth + 1)?);
            }
            Some(out)
        }
        // The values of other ops are not followed (every variant named, so a new op is
        // decided here).
        Op::Def(_) | Op::Gather { .. } | Op::Unary(_) | Op::Binary(_) | Op::Conv { .. }
        | Op::FusedConv { .. } | Op::Elementwise(_)
        | Op::Expand | Op::ConstantOfShape { .. } | Op::Seq(_) | Op::If { .. } | Op::Loop { .. }
        | Op::SequenceMap { .. } | Op::Scan { .. } => None,
    }
}

/// Output `v`'s values when the shape rule of `d` gives them as its inputs' dims (a Shape's):
/// fixed dims as integers, named dims as themselves; `None` for other expressions of dims.
fn dims_as_values(g: &Graph, n: &Node, d: &crate::ops::OpRef, v: ValueId) -> Option<Vec<SV>> {
    use crate::ir::DimExpr;
    let mut named: Vec<(DimExpr, Dim)> = Vec::new();
    let mut args = Vec::with_capacity(n.inputs.len());
    for i in &n.inputs {
        let Some(t) = i.and_then(|i| g.tensor_type(i)) else {
            args.push(None);
            continue;
        };
        let dims = t.shape.as_ref().map(|s| s.0.iter().map(Dim::expr).collect());
        named.extend(t.shape.iter().flat_map(|s| &s.0).filter(|d| d.fixed().is_none()).map(|d| (d.expr(), d.clone())));
        args.push(Some(crate::ops::Arg { dtype: t.dtype, dims, value: None }));
    }
    let mut cx = crate::ops::ShapeCx::new(args);
    d.shapes(&mut cx).ok()?;
    let k = n.outputs.iter().position(|&o| o == v)?;
    cx.out_ints.get(k)?.as_ref()?
        .iter()
        .map(|e| match e.as_const() {
            Some(c) => Some(SV::I(c)),
            None => named.iter().find(|(x, _)| x == e).map(|(_, dim)| SV::D(dim.clone())),
        })
        .collect()
}

impl Cx<'_> {
    /// Shape-vector input `i` as dims (negative entries are not dims: `None`).
    fn sym_shape(&self, i: usize) -> Option<Vec<Dim>> {
        let v = self.n.inputs.get(i).copied().flatten()?;
        sym_ints(self.g, v, 0)?
            .into_iter()
            .map(|e| match e {
                SV::I(v) if v >= 0 => Some(Dim::Fixed(v as usize)),
                SV::I(_) => None,
                SV::D(d) => Some(d),
            })
            .collect()
    }
}

fn reshape(cx: &Cx, allowzero: bool) -> R<Option<Vec<Dim>>> {
    let target: Vec<SV> = match cx.n.inputs.get(1).copied().flatten().and_then(|v| sym_ints(cx.g, v, 0)) {
        Some(t) => t,
        None => {
            // Rank from the shape input's length.
            return Ok(match cx.shape(1) {
                Some([Dim::Fixed(k)]) => Some(cx.fresh_dims(*k)),
                _ => None,
            });
        }
    };
    let x = cx.shape(0);
    let mut out: Vec<Option<Dim>> = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, e) in target.iter().enumerate() {
        let v = match e {
            SV::I(v) => *v,
            SV::D(d) => {
                out.push(Some(d.clone()));
                continue;
            }
        };
        out.push(match v {
            -1 => {
                if infer_at.replace(i).is_some() {
                    return Err("more than one -1 in the shape".into());
                }
                None
            }
            0 if !allowzero => match x {
                Some(x) => Some(x.get(i).cloned().ok_or_else(|| format!("the shape copies dim {i} of a rank-{} input", x.len()))?),
                None => Some(cx.fresh()),
            },
            v if v < 0 => return Err(format!("bad dim {v} in the shape")),
            v => Some(Dim::Fixed(v as usize)),
        });
    }
    // Resolve -1: element count of the input over the known output dims, cancelling symbols.
    if let Some(at) = infer_at {
        let mut d = cx.fresh();
        if let Some(x) = x {
            let mut in_syms: Vec<&Dim> = vec![];
            let mut in_f = 1usize;
            for dd in x {
                match dd {
                    Dim::Fixed(n) => in_f = in_f.saturating_mul(*n),
                    s => in_syms.push(s),
                }
            }
            let mut out_f = 1usize;
            let mut ok = true;
            for dd in out.iter().flatten() {
                match dd {
                    Dim::Fixed(n) => out_f = out_f.saturating_mul(*n),
                    s => match in_syms.iter().position(|q| q == &s) {
                        Some(p) if !is_fresh(s) => {
                            in_syms.remove(p);
                        }
                        _ => ok = false,
                    },
                }
            }
            if ok && out_f != 0 && in_f.is_multiple_of(out_f) {
                let q = in_f / out_f;
                if in_syms.is_empty() {
                    d = Dim::Fixed(q);
                } else if in_syms.len() == 1 && q == 1 {
                    d = in_syms[0].clone();
                }
            } else if ok && x.iter().all(|d| d.fixed().is_some()) {
                return Err(format!("cannot reshape {in_f} elements into {}", Shape(out.iter().map(|d| d.clone().unwrap_or(Dim::Fixed(0))).collect())));
            }
        }
        out[at] = Some(d);
    } else if let Some(x) = x {
        let a: Option<Vec<usize>> = x.iter().map(Dim::fixed).collect();
        let b: Option<Vec<usize>> = out.iter().map(|d| d.as_ref().and_then(Dim::fixed)).collect();
        if let (Some(a), Some(b)) = (a, b) {
            let count = |d: &[usize]| crate::size::numel(d).ok_or_else(|| format!("the shape {d:?} is too large"));
            if count(&a)? != count(&b)? {
                return Err(format!("cannot reshape {a:?} into {b:?}"));
            }
        }
    }
    Ok(Some(out.into_iter().map(|d| d.unwrap_or_else(|| cx.fresh())).collect()))
}

