//! Reverse-mode automatic differentiation over the IR.
//!
//! [`gradients`] appends the backward graph to the forward one: for each forward node between
//! the values differentiated with respect to and the output (in reverse order), its rule builds
//! the input gradients from the output gradients out of core ops, and gradients of a value used
//! several times are summed. The result is an ordinary graph, so the interpreter, the passes
//! (folding turns the shape plumbing into constants) and codegen run it with no new kernels.
//!
//! The ops of `crate::ops` carry their own rule (`OpDef::gradient`); the others' rules live
//! here per family: `elementwise` (unary, binary), `shape` (Reshape, Concat, Gather, Expand),
//! `nn` (Conv), and helpers the op rules share (`norm`: the normalizations' backward; `dropout`,
//! which also switches a graph's Dropouts to training mode: [`enable_dropout`]).
pub(crate) mod builder;
mod dropout;
pub(crate) mod elementwise;
pub(crate) mod nn;
pub(crate) mod norm;
pub(crate) mod shape;
#[cfg(test)]
pub(crate) mod tests;

use crate::ir::{Graph, Node, Op, ValueId};
use crate::passes::{infer, PassError};
use builder::{differentiable, B, R};
pub use dropout::enable_dropout;
use std::collections::{HashMap, HashSet};

/// Append nodes computing d(sum(seed * y))/dx for each x in `wrt`, and return those gradient
/// values (in `wrt` order, each shaped like its x). Without a seed, y is seeded with ones, i.e.
/// the gradient of the sum of y's elements (of y itself when y is a scalar). A wrt value y
/// does not depend on gets zeros.
pub fn gradients(g: &mut Graph, y: ValueId, seed: Option<ValueId>, wrt: &[ValueId]) -> Result<Vec<ValueId>, PassError> {
    infer::infer(g)?;
    let n_fwd = g.nodes.len();
    let active = active_values(g, wrt);
    let mut b = B::new(g);
    b.label = b.g.value(y).name.clone();
    let seed = match seed {
        Some(s) => s,
        None => ones_like(&mut b, y).map_err(|reason| PassError::Node { node: b.label.clone(), op: "Gradient".into(), reason })?,
    };
    let mut grads: HashMap<ValueId, ValueId> = HashMap::new();
    grads.insert(y, seed);
    for ni in (0..n_fwd).rev() {
        let node = b.g.nodes[ni].clone();
        let dys: Vec<Option<ValueId>> = node.outputs.iter().map(|o| grads.get(o).copied()).collect();
        // Integer outputs (MaxPool's indices) never get a gradient; rules of single-output
        // ops read it with `dy0`, which refuses gradients on the other outputs, and the
        // multi-output rules (Split, SoftmaxCrossEntropyLoss's log-probabilities) read each.
        if dys.iter().all(Option::is_none) {
            continue;
        }
        let need: Vec<bool> = node
            .inputs
            .iter()
            .map(|i| i.is_some_and(|v| active.contains(&v) && differentiable(&b.g.value(v).ty)))
            .collect();
        if !need.contains(&true) {
            continue;
        }
        b.label = node.name.clone();
        let dxs = rule(&mut b, &node, &dys, &need).map_err(|reason| PassError::Node {
            node: node.name.clone(),
            op: node.source_op.as_ref().map(|(o, _)| o.clone()).unwrap_or_else(|| node.op.name()),
            reason,
        })?;
        for ((inp, dx), needed) in node.inputs.iter().zip(dxs).zip(&need) {
            let (Some(x), Some(dx), true) = (inp, dx, needed) else { continue };
            let acc = match grads.get(x) {
                Some(&prev) => b.add(prev, dx).map_err(|reason| PassError::Node {
                    node: node.name.clone(),
                    op: "Add".into(),
                    reason,
                })?,
                None => dx,
            };
            grads.insert(*x, acc);
        }
    }
    let mut out = Vec::with_capacity(wrt.len());
    for &x in wrt {
        match grads.get(&x) {
            Some(&d) => out.push(d),
            None => {
                b.label = b.g.value(x).name.clone();
                let z = b.zeros_like(x).map_err(|reason| PassError::Node { node: b.label.clone(), op: "Gradient".into(), reason })?;
                out.push(z);
            }
        }
    }
    Ok(out)
}

/// Values that depend on some value of `wrt` (gradients are only built along those paths, so
/// ops elsewhere in the graph need no rule).
fn active_values(g: &Graph, wrt: &[ValueId]) -> HashSet<ValueId> {
    let mut active: HashSet<ValueId> = wrt.iter().copied().collect();
    for n in &g.nodes {
        if n.inputs.iter().flatten().any(|v| active.contains(v)) {
            active.extend(n.outputs.iter().copied());
        }
    }
    active
}

fn ones_like(b: &mut B<'_>, y: ValueId) -> R<ValueId> {
    let dt = b.dtype(y)?;
    let s = b.shape_of(y)?;
    b.node(Op::ConstantOfShape { value: builder::scalar_tensor(1.0, dt)? }, &[s])
}

/// Input gradients of one node (one entry per input, `None` where not needed or not defined).
fn rule(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], need: &[bool]) -> R<Vec<Option<ValueId>>> {
    match &n.op {
        Op::Unary(_) | Op::Binary(_) => elementwise::rule(b, n, dys, need),
        Op::Reshape { .. }
        | Op::Concat { .. }
        | Op::Gather { .. } => shape::rule(b, n, dys, need),
        Op::Def(d) => d.gradient(&mut crate::ops::GradCx::new(b, n, dys, need)),
        Op::Expand => shape::rule(b, n, dys, need),
        Op::Conv { .. } => nn::rule(b, n, dys, need),
        // Fused forms exist after training graphs are built; control flow, sequences and the
        // optimizer step have no rule yet. Named, so a new op is decided here.
        Op::FusedConv { .. }
        | Op::Elementwise(_)
        | Op::ConstantOfShape { .. }
        | Op::Seq(_)
        | Op::If { .. }
        | Op::Loop { .. }
        | Op::SequenceMap { .. }
        | Op::Scan { .. } => Err(format!("no gradient rule for {}", n.op.name())),
    }
}

/// The first output's gradient, which single-output rules start from; a gradient on another
/// output (LayerNorm's Mean, say) is refused rather than dropped.
pub(crate) fn dy0(dys: &[Option<ValueId>]) -> R<ValueId> {
    if let Some(k) = dys.iter().skip(1).position(Option::is_some) {
        return Err(format!("gradients through output {} are not supported (only through output 0)", k + 1));
    }
    dys.first().copied().flatten().ok_or_else(|| "internal: no gradient for the first output".to_string())
}

/// Output `k`'s gradient, or zeros shaped like it when nothing downstream needs it.
fn dy_or_zeros(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], k: usize) -> R<ValueId> {
    match dys.get(k).copied().flatten() {
        Some(d) => Ok(d),
        None => b.zeros_like(output(n, k)?),
    }
}

/// Input `i` of a node.
fn input(n: &Node, i: usize) -> R<ValueId> {
    n.inputs.get(i).copied().flatten().ok_or_else(|| format!("input {i} is missing"))
}

fn output(n: &Node, i: usize) -> R<ValueId> {
    n.outputs.get(i).copied().ok_or_else(|| format!("output {i} is missing"))
}
