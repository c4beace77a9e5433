//! Rewrites for generated code (the interpreter runs the unfused graph as the reference):
//! - a BatchNormalization that only normalizes a convolution's output is folded into the
//!   convolution's weights and bias at compile time (this one changes rounding);
//! - per-channel constant Mul and Add, a residual Add and an activation (Relu, LeakyRelu,
//!   Clip, HardSwish, Sigmoid, SiLU as Sigmoid·Mul) after a convolution become its epilogue (`Op::FusedConv`), applied per output tile
//!   while it is in cache;
//! - a standalone BatchNormalization with the per-channel Mul/Add and activation after it
//!   becomes one pass (`ops::channel_norm::ScaleShift`).
//!
//! - an attention spelled out as MatMul → scale/mask → Softmax → MatMul (with the Transposes
//!   that only reorder its operands; `passes::attention`) becomes one `FusedAttention` (f32),
//!   which never writes the scores to memory (this one changes rounding: the softmax's
//!   division comes after the second product).
//!
//! The two before the last keep the unfused ops' order of operations, so they give the same bits; each
//! saves one or more full passes over a tensor in memory.
use burnc_runtime::kernels::norm::batch_norm_coeffs;
use super::fold::renumber;
use super::PassError;
use crate::ir::{Act, BinaryOp, DType, Graph, NodeId, Op, UnaryOp, ValueId, ValueKind};
use crate::tensor::{Data, Tensor};
use std::collections::HashMap;

/// How a node joined a fused group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The node the group is built on (a Conv, or the BatchNormalization of a scale/shift).
    Base,
    /// Constants folded into the convolution's weights and bias.
    Folded,
    /// Computed in the output loop of the base node.
    Epilogue,
}

/// One fused group: (ONNX op, node name, role), base first.
#[derive(Debug, Default, Clone)]
pub struct FusedGroup {
    pub nodes: Vec<(String, String, Role)>,
}

/// What the fusion passes did, for `burnc inspect`.
#[derive(Debug, Default, Clone)]
pub struct FusionReport {
    pub groups: Vec<FusedGroup>,
}

impl FusionReport {
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The group built on node `base`, created if new.
    pub(super) fn group(&mut self, base: (String, String)) -> &mut FusedGroup {
        match self.groups.iter().position(|gr| gr.nodes.first().is_some_and(|n| n.1 == base.1)) {
            Some(i) => &mut self.groups[i],
            None => {
                self.groups.push(FusedGroup { nodes: vec![(base.0, base.1, Role::Base)] });
                self.groups.last_mut().expect("just pushed")
            }
        }
    }
}

fn f32s(t: &Tensor) -> Option<Vec<f32>> {
    match &t.data {
        Data::F32(v) => Some(v.clone()),
        _ => None,
    }
}

/// The epsilon of an inference-mode BatchNormalization.
fn batch_norm_epsilon(op: &Op) -> Option<f32> {
    match op {
        Op::Def(d) => d.get::<crate::ops::channel_norm::BatchNorm>().map(|b| b.epsilon),
        _ => None,
    }
}

/// The op name and node name of node `i`, as the source spelled the op.
pub(super) fn label(g: &Graph, i: usize) -> (String, String) {
    let n = &g.nodes[i];
    let op = n.source_op.as_ref().map(|(o, _)| o.clone()).unwrap_or_else(|| match &n.op {
        op if batch_norm_epsilon(op).is_some() => "BatchNormalization".into(),
        op => op.name(),
    });
    (op, n.name.clone())
}

/// Whether the sizes of the graph's values are the ones it will run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    /// Every dim is fixed.
    Static,
    /// The graph is pinned at its dims' bounds, and runs at any size up to them: fusions whose
    /// fused op keeps the sizes it was made at (the attention's strides) are left out.
    Bounded,
}

/// Run every fusion on `g`.
pub fn fuse(g: &mut Graph, sizes: Sizes) -> Result<FusionReport, PassError> {
    let mut report = FusionReport::default();
    if sizes == Sizes::Static {
        attention(g, &mut report);
    }
    compact(g, &mut report)?;
    super::qdq::qdq_products(g, &mut report);
    compact(g, &mut report)?;
    fold_into_conv(g, &mut report);
    compact(g, &mut report)?;
    scale_shift(g, &mut report);
    compact(g, &mut report)?;
    conv_epilogue(g, &mut report);
    compact(g, &mut report)?;
    super::fuse_chain::fuse_chains(g, &mut report);
    compact(g, &mut report)?;
    Ok(report)
}

/// Only the fusions that keep every bit and every op's kernel: elementwise chains into one
/// loop (`fuse_chain`). Generated code that must round as the interpreter does runs these.
pub fn fuse_exact(g: &mut Graph) -> Result<FusionReport, PassError> {
    let mut report = FusionReport::default();
    super::fuse_chain::fuse_chains(g, &mut report);
    compact(g, &mut report)?;
    Ok(report)
}

/// Renumber and drop dead values after a phase removed nodes.
fn compact(g: &mut Graph, report: &mut FusionReport) -> Result<(), PassError> {
    if !report.is_empty() {
        renumber(g);
        super::dce::dce(g)?;
    }
    Ok(())
}

/// The one node reading `v`, when `v` is read once and is not a graph output.
fn sole_consumer(g: &Graph, cons: &HashMap<ValueId, Vec<usize>>, v: ValueId) -> Option<usize> {
    match cons.get(&v).map(|c| c.as_slice()) {
        Some([c]) if !g.outputs.contains(&v) && g.nodes[*c].inputs.iter().flatten().filter(|&&i| i == v).count() == 1 => Some(*c),
        _ => None,
    }
}

fn fixed_shape(g: &Graph, v: ValueId) -> Option<Vec<usize>> {
    g.tensor_type(v)?.shape.as_ref()?.as_fixed()
}

/// The other operand of a binary node `n` that reads `v`, if `v` is one operand.
fn other_operand(n: &crate::ir::Node, v: ValueId) -> Option<ValueId> {
    match n.inputs.as_slice() {
        [Some(a), Some(b)] if *a == v => Some(*b),
        [Some(a), Some(b)] if *b == v => Some(*a),
        _ => None,
    }
}

/// `k` as one f32 per channel of `out` (`[N, C, …]`) when it is an f32 constant that
/// broadcasts along axis 1 only (a scalar, `[C, 1, 1]`, `[1, C, 1, 1]`, …).
fn per_channel(g: &Graph, k: ValueId, out: &[usize]) -> Option<Vec<f32>> {
    let t = g.const_value(k)?;
    let v = f32s(&t)?;
    let c = *out.get(1)?;
    if t.shape.len() > out.len() {
        return None;
    }
    let off = out.len() - t.shape.len();
    for (i, &d) in t.shape.iter().enumerate() {
        let axis = i + off;
        if d != 1 && !(axis == 1 && d == c) {
            return None;
        }
    }
    match v.len() {
        1 => Some(vec![v[0]; c]),
        n if n == c => Some(v),
        _ => None,
    }
}

/// The activation node `i` applies to its input `v` (and, for a Max followed by a Min, that
/// second node): Relu, LeakyRelu, HardSwish, Sigmoid, or Clip as ONNX Clip lowers (Max with a
/// scalar constant, then Min with one). f32 only for Clip (so its bounds are exact as `Act`'s
/// f32s), HardSwish and Sigmoid.
fn activation(g: &Graph, cons: &HashMap<ValueId, Vec<usize>>, i: usize, v: ValueId, dtype: DType) -> Option<(Act, Vec<usize>)> {
    let n = &g.nodes[i];
    let scalar = |k: ValueId| -> Option<f32> {
        let t = g.const_value(k)?;
        match &t.data {
            Data::F32(d) if d.len() == 1 => Some(d[0]),
            _ => None,
        }
    };
    let first = |n: &crate::ir::Node| n.inputs.first().copied().flatten() == Some(v);
    match &n.op {
        Op::Unary(UnaryOp::Relu) => Some((Act::Relu, vec![i])),
        Op::Unary(UnaryOp::LeakyRelu { alpha }) => Some((Act::LeakyRelu(*alpha), vec![i])),
        // The runtime computes these in f32 (`eval_f32`), so f32 outputs only.
        Op::Unary(UnaryOp::HardSwish) if dtype == DType::F32 => Some((Act::HardSwish, vec![i])),
        Op::Unary(UnaryOp::Sigmoid) if dtype == DType::F32 => Some((Act::Sigmoid, vec![i])),
        // Max(v, lo) — v first, so a signed zero comes out as the unfused kernel gives it.
        Op::Binary(BinaryOp::Max) if dtype == DType::F32 && first(n) => {
            let lo = scalar(n.inputs.get(1).copied().flatten()?)?;
            let out = n.outputs[0];
            if let Some(j) = sole_consumer(g, cons, out) {
                let m = &g.nodes[j];
                if matches!(m.op, Op::Binary(BinaryOp::Min)) && m.inputs.first().copied().flatten() == Some(out) {
                    if let Some(hi) = m.inputs.get(1).copied().flatten().and_then(scalar) {
                        return Some((Act::Clip(lo, hi), vec![i, j]));
                    }
                }
            }
            Some((Act::Clip(lo, f32::INFINITY), vec![i]))
        }
        Op::Binary(BinaryOp::Min) if dtype == DType::F32 && first(n) => {
            let hi = scalar(n.inputs.get(1).copied().flatten()?)?;
            Some((Act::Clip(f32::NEG_INFINITY, hi), vec![i]))
        }
        _ => None,
    }
}

/// SiLU as exporters write it: `v` read by exactly a Sigmoid and a Mul of `v` with the
/// Sigmoid's output, which nothing else reads (f32, not graph outputs). The two nodes, in order.
fn silu(g: &Graph, cons: &HashMap<ValueId, Vec<usize>>, v: ValueId, dtype: DType) -> Option<Vec<usize>> {
    if dtype != DType::F32 || g.outputs.contains(&v) {
        return None;
    }
    let readers = cons.get(&v)?;
    let &[a, b] = readers.as_slice() else { return None };
    let is_sigmoid = |i: usize| matches!(g.nodes[i].op, Op::Unary(UnaryOp::Sigmoid)) && g.nodes[i].inputs.first().copied().flatten() == Some(v);
    let (s, m) = if is_sigmoid(a) { (a, b) } else if is_sigmoid(b) { (b, a) } else { return None };
    let sv = *g.nodes[s].outputs.first()?;
    if sole_consumer(g, cons, sv) != Some(m) || !matches!(g.nodes[m].op, Op::Binary(BinaryOp::Mul)) || other_operand(&g.nodes[m], sv) != Some(v) {
        return None;
    }
    (s < m).then(|| vec![s, m])
}

/// Move node `from`'s single output onto node `to` (which keeps its position in the order),
/// so `to` now computes what `from` computed.
fn take_output(g: &mut Graph, to: usize, from: usize) {
    let out = g.nodes[from].outputs[0];
    g.nodes[to].outputs[0] = out;
    g.value_mut(out).kind = ValueKind::Node(NodeId(to as u32));
}

pub(super) fn drop_nodes(g: &mut Graph, remove: &[bool]) {
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().zip(remove).filter(|(_, r)| !**r).map(|(n, _)| n).collect();
}

/// Conv → BatchNormalization: folded into the conv's weights and bias (f32; every parameter
/// constant; the conv's output read by the batch norm only). The conv keeps its place in the
/// node order and takes the batch norm's output. (Mul/Add after it are not folded: they
/// become the epilogue, which keeps their rounding.)
fn fold_into_conv(g: &mut Graph, report: &mut FusionReport) {
    let cons = g.consumers();
    let mut remove = vec![false; g.nodes.len()];
    for ci in 0..g.nodes.len() {
        if !matches!(g.nodes[ci].op, Op::Conv { .. }) || g.nodes[ci].outputs.len() != 1 {
            continue;
        }
        let Some(out_shape) = fixed_shape(g, g.nodes[ci].outputs[0]) else { continue };
        if g.tensor_type(g.nodes[ci].outputs[0]).map(|t| t.dtype) != Some(DType::F32) {
            continue;
        }
        let konst = |v: Option<ValueId>| v.and_then(|v| g.const_value(v)).and_then(|t| f32s(&t).map(|d| (t.shape.clone(), d)));
        let Some((wshape, w)) = konst(g.nodes[ci].inputs.get(1).copied().flatten()) else { continue };
        let Some(&m) = wshape.first() else { continue };
        if m == 0 || w.len() % m != 0 || out_shape.get(1) != Some(&m) {
            continue;
        }
        let bias = match g.nodes[ci].inputs.get(2).copied().flatten() {
            Some(v) => match konst(Some(v)) {
                Some((_, b)) if b.len() == m => b,
                _ => continue,
            },
            None => vec![0.0; m],
        };
        // y = conv(x)·s + t, per channel, in f64; rounded once at the end.
        let mut s = vec![1f64; m];
        let mut t: Vec<f64> = bias.iter().map(|&b| b as f64).collect();
        let mut folded = vec![];
        let mut v = g.nodes[ci].outputs[0];
        while let Some(j) = sole_consumer(g, &cons, v) {
            let n = &g.nodes[j];
            if n.outputs.len() != 1 || fixed_shape(g, n.outputs[0]).as_deref() != Some(&out_shape[..]) {
                break;
            }
            let Some(epsilon) = batch_norm_epsilon(&n.op).filter(|_| n.inputs.len() == 5 && n.inputs[0] == Some(v)) else { break };
            let [scale, beta, mean, var] = [1, 2, 3, 4].map(|i| konst(n.inputs[i]).map(|t| t.1).filter(|p| p.len() == m));
            let (Some(scale), Some(beta), Some(mean), Some(var)) = (scale, beta, mean, var) else { break };
            for ch in 0..m {
                let a = scale[ch] as f64 / (var[ch] as f64 + epsilon as f64).sqrt();
                s[ch] *= a;
                t[ch] = (t[ch] - mean[ch] as f64) * a + beta[ch] as f64;
            }
            folded.push(j);
            v = n.outputs[0];
        }
        let Some(&last) = folded.last() else { continue };
        let per = w.len() / m;
        let w2: Vec<f32> = (0..w.len()).map(|i| (w[i] as f64 * s[i / per]) as f32).collect();
        let b2: Vec<f32> = t.iter().map(|&b| b as f32).collect();
        let cname = g.nodes[ci].name.clone();
        let wv = g.add_const(format!("{cname}_w_folded"), Tensor::new(wshape, Data::F32(w2)));
        let bv = g.add_const(format!("{cname}_b_folded"), Tensor::new(vec![m], Data::F32(b2)));
        let conv = &mut g.nodes[ci];
        conv.inputs.resize(3, None);
        conv.inputs[1] = Some(wv);
        conv.inputs[2] = Some(bv);
        take_output(g, ci, last);
        let labels: Vec<_> = folded.iter().map(|&j| label(g, j)).collect();
        let gr = report.group(label(g, ci));
        gr.nodes.extend(labels.into_iter().map(|(o, n)| (o, n, Role::Folded)));
        for j in folded {
            remove[j] = true;
        }
    }
    drop_nodes(g, &remove);
}

/// What [`mul_add`] found: the Mul's and the Add's per-channel constants, their nodes, and the
/// value after them.
type MulAdd = (Option<Vec<f32>>, Option<Vec<f32>>, Vec<usize>, ValueId);

/// A per-channel constant Mul and then a per-channel constant Add after `v` (each optional,
/// in that order; f32; each intermediate read once).
fn mul_add(g: &Graph, cons: &HashMap<ValueId, Vec<usize>>, remove: &[bool], mut v: ValueId, shape: &[usize]) -> MulAdd {
    let mut found: [Option<Vec<f32>>; 2] = [None, None];
    let mut nodes = vec![];
    for (slot, want) in [BinaryOp::Mul, BinaryOp::Add].into_iter().enumerate() {
        let Some(j) = sole_consumer(g, cons, v).filter(|&j| !remove[j]) else { break };
        let n = &g.nodes[j];
        if !matches!(&n.op, Op::Binary(b) if *b == want) || n.outputs.len() != 1 || fixed_shape(g, n.outputs[0]).as_deref() != Some(shape) {
            continue;
        }
        let Some(k) = other_operand(n, v).and_then(|k| per_channel(g, k, shape)) else { continue };
        found[slot] = Some(k);
        nodes.push(j);
        v = n.outputs[0];
    }
    let [mul, add] = found;
    (mul, add, nodes, v)
}

/// BatchNormalization → per-channel Mul? → per-channel Add? → activation?: one `ScaleShift`
/// (f32, rank ≥ 2; only when it saves at least one pass). It computes the batch norm's
/// per-channel a and b as the batch-norm kernel does and then the same steps in the same
/// order. The last node of the chain becomes the ScaleShift.
fn scale_shift(g: &mut Graph, report: &mut FusionReport) {
    let cons = g.consumers();
    let mut remove = vec![false; g.nodes.len()];
    for bi in 0..g.nodes.len() {
        let Some(epsilon) = batch_norm_epsilon(&g.nodes[bi].op) else { continue };
        let b = &g.nodes[bi];
        if b.inputs.len() != 5 || b.outputs.len() != 1 {
            continue;
        }
        let Some(x) = b.inputs[0] else { continue };
        let Some(shape) = fixed_shape(g, x) else { continue };
        if shape.len() < 2 || g.tensor_type(x).map(|t| t.dtype) != Some(DType::F32) {
            continue;
        }
        let m = shape[1];
        let konst = |v: Option<ValueId>| v.and_then(|v| g.const_value(v)).and_then(|t| f32s(&t)).filter(|p| p.len() == m);
        let [scale, beta, mean, var] = [1, 2, 3, 4].map(|i| konst(b.inputs[i]));
        let (Some(scale), Some(beta), Some(mean), Some(var)) = (scale, beta, mean, var) else { continue };
        // The coefficients `kernels::norm::batch_norm` uses, rounded the same way.
        let (a, bb): (Vec<f32>, Vec<f32>) = (0..m).map(|c| batch_norm_coeffs(scale[c], beta[c], mean[c], var[c], epsilon as f64)).unzip();
        let (mul, add, mut chain, v) = mul_add(g, &cons, &remove, b.outputs[0], &shape);
        let act = trailing_activation(g, &cons, &remove, v, DType::F32, &mut chain);
        if chain.is_empty() {
            continue;
        }
        let bname = g.nodes[bi].name.clone();
        let c = |g: &mut Graph, what: &str, v: Option<Vec<f32>>| v.map(|v| g.add_const(format!("{bname}_{what}"), Tensor::new(vec![m], Data::F32(v))));
        let inputs = vec![c(g, "a", Some(a)), c(g, "b", Some(bb)), c(g, "mul", mul), c(g, "add", add)];
        let inputs = std::iter::once(Some(x)).chain(inputs).collect();
        fuse_into_last(g, report, &mut remove, bi, &chain, crate::ops::IntoOp::op(crate::ops::channel_norm::ScaleShift { act }), inputs, None);
    }
    drop_nodes(g, &remove);
}

/// The activation reading `v` alone (none of its nodes taken by another fusion yet), its nodes
/// appended to `chain`; `Act::None` when there is none.
fn trailing_activation(g: &Graph, cons: &HashMap<ValueId, Vec<usize>>, remove: &[bool], v: ValueId, dtype: DType, chain: &mut Vec<usize>) -> Act {
    if let Some(nodes) = silu(g, cons, v, dtype).filter(|ns| ns.iter().all(|&k| !remove[k])) {
        chain.extend(nodes);
        return Act::Silu;
    }
    let Some(j) = sole_consumer(g, cons, v).filter(|&j| !remove[j]) else { return Act::None };
    match activation(g, cons, j, v, dtype).filter(|(_, ns)| ns.iter().all(|&k| !remove[k])) {
        Some((act, nodes)) => {
            chain.extend(nodes);
            act
        }
        None => Act::None,
    }
}

/// Ends a fusion headed by node `head`: the head and `chain` (the nodes after it, in order)
/// are reported as one group; the chain's last node computes the whole chain as `op` on
/// `inputs`, under the head's name and `source`; the head and the chain's other nodes go.
#[allow(clippy::too_many_arguments)]
fn fuse_into_last(g: &mut Graph, report: &mut FusionReport, remove: &mut [bool], head: usize, chain: &[usize], op: Op, inputs: Vec<Option<ValueId>>, source: Option<(String, i64)>) {
    let Some((&last, rest)) = chain.split_last() else { return };
    let labels: Vec<_> = chain.iter().map(|&j| label(g, j)).collect();
    let gr = report.group(label(g, head));
    gr.nodes.extend(labels.into_iter().map(|(o, n)| (o, n, Role::Epilogue)));
    let name = g.nodes[head].name.clone();
    let ln = &mut g.nodes[last];
    ln.op = op;
    ln.inputs = inputs;
    ln.name = name;
    ln.source_op = source;
    remove[head] = true;
    for &j in rest {
        remove[j] = true;
    }
}

/// Each f32 attention whose score steps the fused kernel runs (Mul or Div by a constant scalar
/// with the scores on the left, Add of a tensor that broadcasts to the scores) becomes one
/// [`FusedAttention`](crate::ops::fused_attention::FusedAttention) in place of its last node,
/// where the kernel's scratch is no larger than the scores.
fn attention(g: &mut Graph, report: &mut FusionReport) {
    use crate::ops::fused_attention::{FusedAttention, ScoreStep, Strides};
    use crate::ops::IntoOp;
    let mut remove = vec![false; g.nodes.len()];
    for a in super::attention::find(g, |dt| dt == DType::F32) {
        let mut inputs = vec![Some(a.q.value), Some(a.kt.value), Some(a.v.value)];
        let Some(scores_shape) = fixed_shape(g, g.node(a.scores).outputs[0]) else { continue };
        let mut cur = g.node(a.scores).outputs[0];
        let mut steps = Vec::new();
        for &c in &a.chain {
            let n = g.node(c);
            let Some(step) = score_step(g, n, cur, &scores_shape, inputs.len()) else { break };
            if let ScoreStep::Add { .. } = step {
                inputs.push(other_operand(n, cur));
            }
            steps.push(step);
            cur = n.outputs[0];
        }
        if steps.len() != a.chain.len() {
            continue;
        }
        let strides = |v: &super::attention::View| Strides { batch: v.batch_strides.clone(), rows: v.rs, cols: v.cs };
        let Some(out_shape) = fixed_shape(g, a.out.value) else { continue };
        let op = FusedAttention { batch: a.batch.clone(), sq: a.sq, sk: a.sk, d: a.d, dv: a.dv, q: strides(&a.q), kt: strides(&a.kt), v: strides(&a.v), steps, out: strides(&a.out), out_shape };
        // Never more memory than the scores the unfused nodes hold: tiny attentions (an MCU's)
        // keep their nodes, whose buffers are smaller than the kernel's packing space.
        if op.scratch_elements() > a.batch.iter().product::<usize>() * a.sq * a.sk {
            continue;
        }
        let head = a.scores.0 as usize;
        let mut chain: Vec<usize> = a.nodes.iter().map(|n| n.0 as usize).filter(|&n| n != head && n != a.emit.0 as usize).collect();
        chain.push(a.emit.0 as usize);
        fuse_into_last(g, report, &mut remove, head, &chain, op.op(), inputs, None);
    }
    drop_nodes(g, &remove);
}

/// The fused kernel's step for chain node `n` applied to the scores `cur` (of `shape`), whose
/// other operand would be input `next_input` of the fused node; `None` when it has none.
fn score_step(g: &Graph, n: &crate::ir::Node, cur: ValueId, shape: &[usize], next_input: usize) -> Option<crate::ops::fused_attention::ScoreStep> {
    use crate::ops::fused_attention::{ScoreStep, Strides};
    let Op::Binary(op) = &n.op else { return None };
    let (lhs, rhs) = (n.inputs.first().copied().flatten()?, n.inputs.get(1).copied().flatten()?);
    let other = other_operand(n, cur).filter(|&o| o != cur)?;
    let scalar = || match g.const_value(other).map(|t| t.data) {
        Some(Data::F32(v)) if v.len() == 1 => Some(v[0]),
        _ => None,
    };
    match op {
        BinaryOp::Mul => scalar().map(ScoreStep::Mul),
        BinaryOp::Div if lhs == cur && rhs != cur => scalar().map(ScoreStep::Div),
        BinaryOp::Add if g.tensor_type(other).map(|t| t.dtype) == Some(DType::F32) => {
            let bs = fixed_shape(g, other)?;
            let rank = shape.len();
            if bs.len() > rank {
                return None;
            }
            let own = crate::codegen::index::strides(&bs);
            let mut st = vec![0usize; rank];
            for (i, (&b, &s)) in bs.iter().zip(&own).enumerate() {
                let o = rank - bs.len() + i;
                match b {
                    1 => {}
                    _ if b == shape[o] => st[o] = s,
                    _ => return None,
                }
            }
            Some(ScoreStep::Add { input: next_input, at: Strides { batch: st[..rank - 2].to_vec(), rows: st[rank - 2], cols: st[rank - 1] } })
        }
        _ => None,
    }
}

/// Conv → per-channel Mul? → per-channel Add? → Add(residual)? → activation?: one
/// `FusedConv` (f32/f64, the Mul/Add for f32 only; each intermediate read once; the residual
/// a tensor of the output's shape and type), inputs (X, W, B?, R?, mul?, add?). The last node of the chain
/// becomes the FusedConv, so the residual's producer stays before it in the node order.
fn conv_epilogue(g: &mut Graph, report: &mut FusionReport) {
    let cons = g.consumers();
    let mut remove = vec![false; g.nodes.len()];
    for ci in 0..g.nodes.len() {
        let Op::Conv { window, group } = &g.nodes[ci].op else { continue };
        let (window, group) = (window.clone(), *group);
        if g.nodes[ci].outputs.len() != 1 {
            continue;
        }
        let y = g.nodes[ci].outputs[0];
        let Some(ty) = g.tensor_type(y) else { continue };
        let dtype = ty.dtype;
        if !matches!(dtype, DType::F32 | DType::F64) {
            continue;
        }
        let Some(shape) = fixed_shape(g, y) else { continue };
        let mut residual = None;
        let (mul, add, mut chain, mut v) = if dtype == DType::F32 { mul_add(g, &cons, &remove, y, &shape) } else { (None, None, vec![], y) };
        // A node another conv already took (an Add both branches of a residual block feed) is
        // skipped: `remove` marks the removed ones, and the rewritten one is no longer an Add.
        if let Some(j) = sole_consumer(g, &cons, v).filter(|&j| !remove[j]) {
            let n = &g.nodes[j];
            let same = |r: ValueId| fixed_shape(g, r).as_deref() == Some(&shape[..]) && g.tensor_type(r).map(|t| t.dtype) == Some(dtype);
            if matches!(n.op, Op::Binary(BinaryOp::Add)) && n.outputs.len() == 1 && same(n.outputs[0]) {
                if let Some(r) = other_operand(n, v).filter(|&r| same(r)) {
                    residual = Some(r);
                    chain.push(j);
                    v = n.outputs[0];
                }
            }
        }
        let act = trailing_activation(g, &cons, &remove, v, dtype, &mut chain);
        if chain.is_empty() {
            continue;
        }
        let mut inputs = g.nodes[ci].inputs.clone();
        inputs.resize(3, None);
        inputs.push(residual);
        let m = shape.get(1).copied().unwrap_or(0);
        let cname = g.nodes[ci].name.clone();
        for (what, k) in [("mul", mul), ("add", add)] {
            inputs.push(k.map(|k| g.add_const(format!("{cname}_{what}"), Tensor::new(vec![m], Data::F32(k)))));
        }
        let source = g.nodes[ci].source_op.clone();
        fuse_into_last(g, report, &mut remove, ci, &chain, Op::FusedConv { window, group, act }, inputs, source);
    }
    drop_nodes(g, &remove);
}
