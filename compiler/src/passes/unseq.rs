//! Sequences and optionals out of the graph, for code generation. When the number of elements
//! of every sequence and the presence of every optional are known at compile time (the graph's
//! sequence inputs are pinned to a length and element shapes), a sequence is just a list of
//! tensors: SequenceConstruct/Insert/Erase/At/Length become bookkeeping, SplitToSequence a
//! Split, ConcatFromSequence a Concat, SequenceMap its body inlined once per element, and the
//! optional ops constants or copies. What is left is a graph of tensors only.
use crate::ops::view::{Squeeze, Unsqueeze};
use super::fold::renumber;
use super::PassError;
use crate::ir::{DType, Graph, Node, NodeId, Op, SeqOp, TensorType, UnaryOp, ValueId, ValueKind, ValueType};
use crate::ops::IntoOp;
use crate::tensor::{Data, Tensor};
use std::collections::{HashMap, VecDeque};

/// How a graph input is fed when sequences are unrolled.
#[derive(Debug, Clone)]
pub enum InputForm {
    Tensor,
    /// A sequence of this many tensors of these types.
    Sequence(Vec<TensorType>),
    /// An optional: a tensor of this type, or absent.
    Optional(Option<TensorType>),
    /// An optional holding a sequence of tensors of these types.
    OptionalSequence(Vec<TensorType>),
}

/// What one original graph output became: how many of the new graph outputs it spans.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputForm {
    Tensor,
    Sequence { len: usize, dtype: Option<DType> },
    /// An optional tensor, present or not (absent: no output).
    Optional { present: bool },
    /// An optional sequence.
    OptionalSequence { len: usize, dtype: Option<DType> },
}

/// A value that is not a plain tensor, as the pass sees it.
#[derive(Debug, Clone)]
enum Abs {
    Seq(Vec<ValueId>),
    Opt(Option<Box<Abs>>),
    /// A plain tensor inside an optional.
    Tensor(ValueId),
}

fn err(n: &Node, reason: impl Into<String>) -> PassError {
    super::infer::node_err(n, reason.into())
}

struct Unroll<'g> {
    g: &'g mut Graph,
    abs: HashMap<ValueId, Abs>,
    nodes: Vec<Node>,
    fresh: usize,
    /// Dequantized product weights left for the QDQ fusion (`qdq::integer_dequantized`).
    keep: std::collections::HashSet<ValueId>,
}

impl Unroll<'_> {
    fn push(&mut self, n: Node) {
        let id = NodeId(self.nodes.len() as u32);
        for &o in &n.outputs {
            self.g.value_mut(o).kind = ValueKind::Node(id);
        }
        self.nodes.push(n);
    }

    /// A new node with fresh output values.
    fn add(&mut self, name: String, op: Op, inputs: Vec<Option<ValueId>>, n_out: usize) -> Vec<ValueId> {
        let outs: Vec<ValueId> = (0..n_out)
            .map(|k| {
                self.fresh += 1;
                self.g.add_value(format!("{name}_{k}_u{}", self.fresh), ValueType::Unknown, ValueKind::Node(NodeId(0)))
            })
            .collect();
        self.push(Node { name, op, inputs, outputs: outs.clone(), source_op: None });
        outs
    }

    fn identity(&mut self, name: &str, src: ValueId, out: ValueId) {
        self.push(Node { name: name.to_string(), op: Op::Unary(UnaryOp::Identity), inputs: vec![Some(src)], outputs: vec![out], source_op: None });
    }

    fn konst(&self, v: Option<ValueId>) -> Option<Tensor> {
        v.and_then(|v| self.g.const_value(v))
    }

    fn seq(&self, n: &Node, i: usize) -> Result<Vec<ValueId>, PassError> {
        match n.inputs.get(i).copied().flatten().and_then(|v| self.abs.get(&v)) {
            Some(Abs::Seq(s)) => Ok(s.clone()),
            _ => Err(err(n, format!("input #{i} is not a sequence of known length"))),
        }
    }

    fn position(&self, n: &Node, i: usize, len: usize, insert: bool) -> Result<Option<usize>, PassError> {
        let Some(v) = n.inputs.get(i).copied().flatten() else { return Ok(None) };
        let t = self.konst(Some(v)).ok_or_else(|| err(n, "the position must be a constant for codegen"))?;
        let p = t.to_i64_vec().and_then(|v| v.first().copied()).ok_or_else(|| err(n, "the position must be an integer"))?;
        let hi = if insert { len } else { len.saturating_sub(1) } as i64;
        let q = if p < 0 { p + len as i64 } else { p };
        if q < 0 || q > hi || (!insert && len == 0) {
            return Err(err(n, format!("position {p} is out of range for a sequence of {len}")));
        }
        Ok(Some(q as usize))
    }

    fn set_const(&mut self, v: ValueId, t: Tensor) {
        let ty = ValueType::Tensor(TensorType { dtype: t.dtype(), shape: Some(crate::ir::Shape::fixed(&t.shape)) });
        let val = self.g.value_mut(v);
        val.ty = ty;
        val.kind = ValueKind::Const(t);
    }

    fn fixed_shape(&self, v: ValueId) -> Option<Vec<usize>> {
        self.g.tensor_type(v)?.shape.as_ref()?.as_fixed()
    }

    /// Rewrite one node; nodes of SequenceMap bodies are queued in front of the rest.
    fn node(&mut self, n: Node, queue: &mut VecDeque<Node>) -> Result<(), PassError> {
        let out0 = n.outputs.first().copied();
        match &n.op {
            Op::Seq(SeqOp::Construct) => {
                let items: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
                if let Some(o) = out0 {
                    self.abs.insert(o, Abs::Seq(items));
                }
            }
            Op::Seq(SeqOp::Empty { .. }) => {
                if let Some(o) = out0 {
                    self.abs.insert(o, Abs::Seq(vec![]));
                }
            }
            Op::Seq(SeqOp::Insert) => {
                let mut s = self.seq(&n, 0)?;
                let t = n.inputs.get(1).copied().flatten().ok_or_else(|| err(&n, "missing tensor"))?;
                let p = self.position(&n, 2, s.len(), true)?.unwrap_or(s.len());
                s.insert(p, t);
                self.abs.insert(out0.ok_or_else(|| err(&n, "no output"))?, Abs::Seq(s));
            }
            Op::Seq(SeqOp::Erase) => {
                let mut s = self.seq(&n, 0)?;
                if s.is_empty() {
                    return Err(err(&n, "erase from an empty sequence"));
                }
                let p = self.position(&n, 1, s.len(), false)?.unwrap_or(s.len() - 1);
                s.remove(p);
                self.abs.insert(out0.ok_or_else(|| err(&n, "no output"))?, Abs::Seq(s));
            }
            Op::Seq(SeqOp::At) => {
                let s = self.seq(&n, 0)?;
                let p = self.position(&n, 1, s.len(), false)?.ok_or_else(|| err(&n, "missing position"))?;
                self.identity(&n.name, s[p], out0.ok_or_else(|| err(&n, "no output"))?);
            }
            Op::Seq(SeqOp::Length) => {
                let s = self.seq(&n, 0)?;
                self.set_const(out0.ok_or_else(|| err(&n, "no output"))?, Tensor::scalar_i64(s.len() as i64));
            }
            Op::Seq(SeqOp::ConcatFrom { axis, new_axis }) => {
                let s = self.seq(&n, 0)?;
                if s.is_empty() {
                    return Err(err(&n, "ConcatFromSequence of an empty sequence"));
                }
                let items: Vec<Option<ValueId>> = if *new_axis {
                    s.iter()
                        .map(|&v| Some(self.add(format!("{}_unsqueeze", n.name), Unsqueeze { axes: Some(vec![*axis]) }.op(), vec![Some(v)], 1)[0]))
                        .collect()
                } else {
                    s.iter().map(|&v| Some(v)).collect()
                };
                self.push(Node { name: n.name.clone(), op: Op::Concat { axis: *axis }, inputs: items, outputs: n.outputs.clone(), source_op: n.source_op.clone() });
            }
            Op::Seq(SeqOp::SplitTo { axis, keepdims }) => self.split_to(&n, *axis, *keepdims)?,
            Op::Seq(SeqOp::OptionalMake) => {
                let inner = match n.inputs.first().copied().flatten() {
                    None => None,
                    Some(v) => Some(Box::new(self.abs.get(&v).cloned().unwrap_or(Abs::Tensor(v)))),
                };
                self.abs.insert(out0.ok_or_else(|| err(&n, "no output"))?, Abs::Opt(inner));
            }
            Op::Seq(SeqOp::OptionalHasElement) => {
                let has = match n.inputs.first().copied().flatten() {
                    None => false,
                    Some(v) => !matches!(self.abs.get(&v), Some(Abs::Opt(None))),
                };
                let t = Tensor::new(vec![], Data::Bool(vec![has]));
                self.set_const(out0.ok_or_else(|| err(&n, "no output"))?, t);
            }
            Op::Seq(SeqOp::OptionalGetElement) => {
                let v = n.inputs.first().copied().flatten().ok_or_else(|| err(&n, "missing input"))?;
                let o = out0.ok_or_else(|| err(&n, "no output"))?;
                match self.abs.get(&v).cloned() {
                    None | Some(Abs::Tensor(_)) => {
                        let src = match self.abs.get(&v) {
                            Some(Abs::Tensor(t)) => *t,
                            _ => v,
                        };
                        self.identity(&n.name, src, o);
                    }
                    Some(Abs::Opt(None)) => return Err(err(&n, "the optional is empty")),
                    Some(Abs::Opt(Some(inner))) => match *inner {
                        Abs::Tensor(t) => self.identity(&n.name, t, o),
                        other => {
                            self.abs.insert(o, other);
                        }
                    },
                    Some(s @ Abs::Seq(_)) => {
                        self.abs.insert(o, s);
                    }
                }
            }
            Op::Unary(UnaryOp::Identity) if n.inputs.first().copied().flatten().is_some_and(|v| self.abs.contains_key(&v)) => {
                let v = n.inputs[0].ok_or_else(|| err(&n, "missing input"))?;
                let a = self.abs[&v].clone();
                self.abs.insert(out0.ok_or_else(|| err(&n, "no output"))?, a);
            }
            Op::SequenceMap { body } => self.sequence_map(&n, body, queue)?,
            // Counted loops are unrolled when they carry sequences, or when shapes inside
            // depend on the iteration number (a Slice at `i`): each copy then has static shapes.
            Op::Loop { body }
                if n.inputs.iter().flatten().any(|v| self.abs.contains_key(v))
                    || has_seq_ops(body)
                    || (!is_static(body) && super::infer::loop_is_counted(self.g, &n, body)) =>
            {
                self.unroll_loop(&n, body, queue)?
            }
            Op::If { then_branch, else_branch } if self.konst(n.inputs.first().copied().flatten()).is_some() => {
                let c = self.konst(n.inputs.first().copied().flatten()).ok_or_else(|| err(&n, "missing condition"))?;
                let take_then = c.to_f64_vec().first().is_some_and(|&v| v != 0.0);
                let branch = if take_then { then_branch } else { else_branch };
                let (mut copies, outs) = self.inline(&n, branch, &format!("_{}", n.name), &[])?;
                for (k, (&o, &v)) in n.outputs.iter().zip(&outs).enumerate() {
                    copies.push(Node { name: format!("{}_out{k}", n.name), op: Op::Unary(UnaryOp::Identity), inputs: vec![Some(v)], outputs: vec![o], source_op: None });
                }
                for c in copies.into_iter().rev() {
                    queue.push_front(c);
                }
            }
            _ => {
                if let Some(i) = n.inputs.iter().position(|v| v.is_some_and(|v| self.abs.contains_key(&v))) {
                    return Err(err(&n, format!("input #{i} is a sequence or optional; codegen unrolls those only through the sequence ops")));
                }
                if !self.fold(&n) {
                    self.push(n);
                }
            }
        }
        Ok(())
    }

    /// Evaluate a node whose inputs are all small constants (unrolled copies often have them:
    /// the iteration number, a presence flag), so conditions and positions downstream are
    /// known. Returns whether the node was replaced by constants.
    fn fold(&mut self, n: &Node) -> bool {
        const MAX_FOLD: usize = 1 << 12;
        if matches!(n.op, Op::If { .. } | Op::Loop { .. } | Op::Scan { .. } | Op::SequenceMap { .. } | Op::Seq(_)) || n.inputs.is_empty() || n.outputs.iter().any(|o| self.keep.contains(o)) {
            return false;
        }
        let mut args = Vec::with_capacity(n.inputs.len());
        for v in &n.inputs {
            match v {
                None => args.push(None),
                Some(v) => match self.g.const_value(*v) {
                    Some(t) if t.numel() <= MAX_FOLD => args.push(Some(crate::interp::RtValue::Tensor(t))),
                    _ => return false,
                },
            }
        }
        let frame = crate::interp::Frame::empty(self.g);
        let Ok(outs) = crate::interp::eval_op(&n.op, args, n.outputs.len(), &frame) else { return false };
        let mut ts = Vec::with_capacity(outs.len());
        for o in outs {
            match o {
                crate::interp::RtValue::Tensor(t) if t.numel() <= MAX_FOLD => ts.push(t),
                _ => return false,
            }
        }
        for (&o, t) in n.outputs.iter().zip(ts) {
            self.set_const(o, t);
        }
        true
    }

    fn split_to(&mut self, n: &Node, axis: i64, keepdims: bool) -> Result<(), PassError> {
        let x = n.inputs.first().copied().flatten().ok_or_else(|| err(n, "missing input"))?;
        let shape = self.fixed_shape(x).ok_or_else(|| err(n, "the input needs a static shape"))?;
        let r = shape.len() as i64;
        let ax = if axis < 0 { axis + r } else { axis };
        if ax < 0 || ax >= r {
            return Err(err(n, format!("axis {axis} is out of range for rank {r}")));
        }
        let dim = shape[ax as usize];
        let split = n.inputs.get(1).copied().flatten();
        let sizes: Vec<i64> = match split {
            None => vec![1; dim],
            Some(v) => {
                let t = self.konst(Some(v)).ok_or_else(|| err(n, "split must be a constant for codegen"))?;
                let s = t.to_i64_vec().ok_or_else(|| err(n, "split must be integers"))?;
                if t.rank() == 0 {
                    let c = *s.first().ok_or_else(|| err(n, "empty split"))?;
                    if c <= 0 {
                        return Err(err(n, format!("split size must be positive, got {c}")));
                    }
                    (0..dim.div_ceil(c as usize)).map(|i| (c as usize).min(dim - i * c as usize) as i64).collect()
                } else {
                    s
                }
            }
        };
        let parts = self.add(n.name.clone(), crate::ops::split::Split { axis, sizes: Some(sizes.clone()), outputs: sizes.len() }.op(), vec![Some(x)], sizes.len());
        let items = if split.is_none() && !keepdims {
            parts.iter().map(|&p| self.add(format!("{}_squeeze", n.name), Squeeze { axes: Some(vec![axis]) }.op(), vec![Some(p)], 1)[0]).collect()
        } else {
            parts
        };
        let o = n.outputs.first().copied().ok_or_else(|| err(n, "no output"))?;
        self.abs.insert(o, Abs::Seq(items));
        Ok(())
    }

    /// A copy of `body` with its inputs bound to `inputs` and its values renamed with
    /// `suffix`: the copied nodes and the values of the body's outputs.
    fn inline(&mut self, n: &Node, body: &Graph, suffix: &str, inputs: &[ValueId]) -> Result<(Vec<Node>, Vec<ValueId>), PassError> {
        let mut map: HashMap<ValueId, ValueId> = body.inputs.iter().copied().zip(inputs.iter().copied()).collect();
        for (k, bv) in body.values.iter().enumerate() {
            let id = ValueId(k as u32);
            match &bv.kind {
                ValueKind::Const(_) | ValueKind::Param(_) => {
                    let nv = self.g.add_value(format!("{}{suffix}", bv.name), bv.ty.clone(), bv.kind.clone());
                    map.insert(id, nv);
                }
                ValueKind::Outer => {
                    let ov = (0..self.g.values.len())
                        .rev()
                        .map(|o| ValueId(o as u32))
                        .find(|&o| self.g.value(o).name == bv.name)
                        .ok_or_else(|| err(n, format!("the body reads `{}`, which is not defined", bv.name)))?;
                    map.insert(id, ov);
                }
                ValueKind::Node(_) => {
                    let nv = self.g.add_value(format!("{}{suffix}", bv.name), ValueType::Unknown, ValueKind::Node(NodeId(0)));
                    map.insert(id, nv);
                }
                ValueKind::Input => {}
            }
        }
        let m = |v: &ValueId| map.get(v).copied().ok_or_else(|| err(n, "the body refers to an unknown value"));
        // Nested subgraphs name the body's values; their copies must name the copies.
        let renames: HashMap<String, String> = map.iter().map(|(&b, &v)| (body.value(b).name.clone(), self.g.value(v).name.clone())).collect();
        let mut copies = Vec::with_capacity(body.nodes.len());
        for bn in &body.nodes {
            let inputs = bn.inputs.iter().map(|v| v.as_ref().map(m).transpose()).collect::<Result<Vec<_>, _>>()?;
            let outputs = bn.outputs.iter().map(m).collect::<Result<Vec<_>, _>>()?;
            let mut op = bn.op.clone();
            rename_outer(&mut op, &renames);
            copies.push(Node { name: format!("{}{suffix}", bn.name), op, inputs, outputs, source_op: bn.source_op.clone() });
        }
        let outs = body.outputs.iter().map(m).collect::<Result<Vec<_>, _>>()?;
        Ok((copies, outs))
    }

    /// The body once per element; each output a sequence.
    fn sequence_map(&mut self, n: &Node, body: &Graph, queue: &mut VecDeque<Node>) -> Result<(), PassError> {
        let len = self.seq(n, 0)?.len();
        if body.inputs.len() != n.inputs.len() {
            return Err(err(n, "the body's inputs do not match the node's"));
        }
        let mut outs: Vec<Vec<ValueId>> = vec![Vec::new(); body.outputs.len()];
        let mut copies = Vec::new();
        for i in 0..len {
            let mut ins = Vec::with_capacity(n.inputs.len());
            for j in 0..n.inputs.len() {
                let v = n.inputs[j].ok_or_else(|| err(n, format!("input #{j} is missing")))?;
                ins.push(match self.abs.get(&v) {
                    Some(Abs::Seq(s)) if s.len() == len => s[i],
                    Some(_) => return Err(err(n, format!("input #{j} is a sequence of another length or an optional"))),
                    None => v,
                });
            }
            let (c, o) = self.inline(n, body, &format!("_map{i}"), &ins)?;
            copies.extend(c);
            for (k, v) in o.into_iter().enumerate() {
                outs[k].push(v);
            }
        }
        for (k, &o) in n.outputs.iter().enumerate() {
            self.abs.insert(o, Abs::Seq(outs.get(k).cloned().unwrap_or_default()));
        }
        for c in copies.into_iter().rev() {
            queue.push_front(c);
        }
        Ok(())
    }

    /// A Loop that carries sequences, unrolled: its trip count must be a constant and its body
    /// must pass the condition through unchanged.
    fn unroll_loop(&mut self, n: &Node, body: &Graph, queue: &mut VecDeque<Node>) -> Result<(), PassError> {
        const MAX_TRIPS: i64 = 1 << 12;
        let trips = self
            .konst(n.inputs.first().copied().flatten())
            .and_then(|t| t.to_i64_vec()?.first().copied())
            .ok_or_else(|| err(n, "a Loop over sequences needs a constant trip count for codegen"))?;
        if !(0..=MAX_TRIPS).contains(&trips) {
            return Err(err(n, format!("trip count {trips} is out of range for unrolling")));
        }
        if let Some(c) = n.inputs.get(1).copied().flatten() {
            let t = self.konst(Some(c)).ok_or_else(|| err(n, "the loop condition must be a constant for codegen"))?;
            if !matches!(&t.data, Data::Bool(b) if b.first() == Some(&true)) {
                return Err(err(n, "a loop that does not run is not unrolled"));
            }
        }
        let nc = n.inputs.len().saturating_sub(2);
        if body.inputs.len() != nc + 2 || body.outputs.len() < nc + 1 {
            return Err(err(n, "the body's inputs and outputs do not match the node's"));
        }
        let cond_in = body.inputs[1];
        let cond_out = body.outputs[0];
        let passes = cond_out == cond_in
            || body.nodes.iter().any(|b| b.outputs.first() == Some(&cond_out) && matches!(b.op, Op::Unary(UnaryOp::Identity)) && b.inputs.first() == Some(&Some(cond_in)))
            || matches!(&body.value(cond_out).kind, ValueKind::Const(t) if matches!(&t.data, Data::Bool(b) if b.first() == Some(&true)));
        if !passes {
            return Err(err(n, "the loop condition changes inside the body; only counted loops over sequences are unrolled"));
        }
        let mut carried: Vec<ValueId> = (0..nc).map(|k| n.inputs[k + 2].ok_or_else(|| err(n, format!("carried value #{k} is missing")))).collect::<Result<_, _>>()?;
        let mut scans: Vec<Vec<ValueId>> = vec![Vec::new(); body.outputs.len() - 1 - nc];
        let mut copies = Vec::new();
        let t_true = self.g.add_const(format!("{}_true", n.name), Tensor::new(vec![], Data::Bool(vec![true])));
        for i in 0..trips {
            let iter = self.g.add_const(format!("{}_iter{i}", n.name), Tensor::scalar_i64(i));
            let mut ins = vec![iter, t_true];
            ins.extend(&carried);
            let (c, o) = self.inline(n, body, &format!("_it{i}"), &ins)?;
            copies.extend(c);
            carried = o[1..1 + nc].to_vec();
            for (j, &v) in o[1 + nc..].iter().enumerate() {
                scans[j].push(v);
            }
        }
        for (k, &v) in carried.iter().enumerate() {
            copies.push(Node { name: format!("{}_out{k}", n.name), op: Op::Unary(UnaryOp::Identity), inputs: vec![Some(v)], outputs: vec![n.outputs[k]], source_op: None });
        }
        for (j, items) in scans.iter().enumerate() {
            let Some(&o) = n.outputs.get(nc + j) else { continue };
            if items.is_empty() {
                return Err(err(n, "a scan output of a loop that does not run"));
            }
            let mut parts = Vec::new();
            for &v in items {
                self.fresh += 1;
                let u = self.g.add_value(format!("{}_stack{j}_u{}", n.name, self.fresh), ValueType::Unknown, ValueKind::Node(NodeId(0)));
                copies.push(Node { name: format!("{}_stack{j}", n.name), op: Unsqueeze { axes: Some(vec![0]) }.op(), inputs: vec![Some(v)], outputs: vec![u], source_op: None });
                parts.push(Some(u));
            }
            copies.push(Node { name: format!("{}_scan{j}", n.name), op: Op::Concat { axis: 0 }, inputs: parts, outputs: vec![o], source_op: None });
        }
        for c in copies.into_iter().rev() {
            queue.push_front(c);
        }
        Ok(())
    }
}

/// Rename the enclosing-graph values that `op`'s subgraphs (at any depth) read.
fn rename_outer(op: &mut Op, renames: &HashMap<String, String>) {
    for g in op.subgraphs_mut() {
        for v in g.values.iter_mut().filter(|v| matches!(v.kind, ValueKind::Outer)) {
            if let Some(new) = renames.get(&v.name) {
                v.name = new.clone();
            }
        }
        for n in g.nodes.iter_mut() {
            rename_outer(&mut n.op, renames);
        }
    }
}

/// Whether every value computed in `g` has a static shape.
fn is_static(g: &Graph) -> bool {
    g.values.iter().all(|v| !matches!(v.kind, ValueKind::Node(_)) || matches!(&v.ty, ValueType::Tensor(t) if t.shape.as_ref().is_some_and(|s| s.as_fixed().is_some())))
}

fn has_seq_ops(g: &Graph) -> bool {
    g.nodes.iter().any(|n| matches!(n.op, Op::Seq(_) | Op::SequenceMap { .. }))
}

/// Whether `g` holds sequences or optionals for [`unroll_sequences`] to unroll.
pub fn has_sequences(g: &Graph) -> bool {
    has_seq_ops(g) || g.nodes.iter().any(|n| n.op.subgraphs().into_iter().any(has_sequences)) || g.values.iter().any(|v| matches!(v.ty, ValueType::Sequence(_) | ValueType::Optional(_)))
}

/// Unroll every sequence and optional of `g`. `inputs` gives each graph input's form (a
/// sequence input becomes one graph input per element, in place); graph outputs that are
/// sequences or optionals become their elements, and the returned forms say how to regroup.
pub fn unroll_sequences(g: &mut Graph, inputs: &[InputForm]) -> Result<Vec<OutputForm>, PassError> {
    let keep = super::qdq::integer_dequantized(g);
    let mut u = Unroll { g, abs: HashMap::new(), nodes: Vec::new(), fresh: 0, keep };
    let old_inputs = std::mem::take(&mut u.g.inputs);
    let mut new_inputs = Vec::new();
    for (pos, &v) in old_inputs.iter().enumerate() {
        let name = u.g.value(v).name.clone();
        let fresh = |u: &mut Unroll, i: usize, t: &TensorType| -> ValueId {
            u.g.add_value(format!("{name}_{i}"), ValueType::Tensor(t.clone()), ValueKind::Input)
        };
        match inputs.get(pos).unwrap_or(&InputForm::Tensor) {
            InputForm::Tensor => new_inputs.push(v),
            InputForm::Sequence(items) => {
                let ids: Vec<ValueId> = items.iter().enumerate().map(|(i, t)| fresh(&mut u, i, t)).collect();
                new_inputs.extend(&ids);
                u.abs.insert(v, Abs::Seq(ids));
            }
            InputForm::Optional(None) => {
                u.abs.insert(v, Abs::Opt(None));
            }
            InputForm::OptionalSequence(items) => {
                let ids: Vec<ValueId> = items.iter().enumerate().map(|(i, t)| fresh(&mut u, i, t)).collect();
                new_inputs.extend(&ids);
                u.abs.insert(v, Abs::Opt(Some(Box::new(Abs::Seq(ids)))));
            }
            InputForm::Optional(Some(t)) => {
                let id = fresh(&mut u, 0, t);
                new_inputs.push(id);
                u.abs.insert(v, Abs::Opt(Some(Box::new(Abs::Tensor(id)))));
            }
        }
    }
    u.g.inputs = new_inputs;
    let mut queue: VecDeque<Node> = std::mem::take(&mut u.g.nodes).into();
    while let Some(n) = queue.pop_front() {
        u.node(n, &mut queue)?;
    }
    let nodes = std::mem::take(&mut u.nodes);
    let abs = std::mem::take(&mut u.abs);
    let g = u.g;
    g.nodes = nodes;
    let elem = |g: &Graph, v: ValueId| match &g.value(v).ty {
        ValueType::Sequence(d) => *d,
        ValueType::Optional(inner) => match inner.as_ref() {
            ValueType::Sequence(d) => *d,
            _ => None,
        },
        _ => None,
    };
    let mut outputs = Vec::new();
    let mut forms = Vec::new();
    for &o in &g.outputs.clone() {
        let form = match abs.get(&o) {
            None => {
                outputs.push(o);
                OutputForm::Tensor
            }
            Some(Abs::Tensor(t)) => {
                outputs.push(*t);
                OutputForm::Tensor
            }
            Some(Abs::Seq(s)) => {
                outputs.extend(s);
                OutputForm::Sequence { len: s.len(), dtype: elem(g, o) }
            }
            Some(Abs::Opt(None)) => OutputForm::Optional { present: false },
            Some(Abs::Opt(Some(inner))) => match inner.as_ref() {
                Abs::Tensor(t) => {
                    outputs.push(*t);
                    OutputForm::Optional { present: true }
                }
                Abs::Seq(s) => {
                    outputs.extend(s);
                    OutputForm::OptionalSequence { len: s.len(), dtype: elem(g, o) }
                }
                Abs::Opt(_) => return Err(PassError::Node { node: g.value(o).name.clone(), op: "Optional".into(), reason: "nested optionals are not supported by codegen".into() }),
            },
        };
        forms.push(form);
    }
    g.outputs = outputs;
    renumber(g);
    super::dce::dce(g)?;
    Ok(forms)
}
