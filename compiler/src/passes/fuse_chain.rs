//! Elementwise chains into one loop: connected f32 Unary/Binary nodes over one shape (SiLU as
//! Sigmoid·Mul, HardSwish written out, a bias Add before an activation …) become one
//! `Op::Elementwise` whose scalar program computes each output element from the group's inputs,
//! so the tensor makes one trip through memory instead of one per node. Same functions in the
//! same order: the fused group gives the unfused nodes' bits.
use super::fuse::{label, FusionReport, Role};
use crate::ir::scalar::{Operand, ScalarOp, ScalarProgram, Step};
use crate::ir::{DType, Graph, NodeId, Op, ValueId, ValueKind};
use std::collections::HashMap;

/// How a chain node's input lines up with its output.
fn fits(s: &[usize], shape: &[usize]) -> Option<Option<usize>> {
    let n: usize = s.iter().product();
    if s == shape || n == 1 {
        return Some(None);
    }
    // The output's last dims: it repeats with period `n`.
    crate::ir::scalar::repeats_along(s, shape).then_some(Some(n))
}

/// The scalar step of node `i` when it can join a chain: f32 in and out, a function with a
/// scalar program step, every input of the output's shape, one element, or the output's last
/// dims (a bias, repeating with a period). Returns the step, the output shape and the period.
fn step_of(g: &Graph, i: usize) -> Option<(ScalarOp, Vec<usize>, Option<usize>)> {
    let n = &g.nodes[i];
    let op = match &n.op {
        Op::Unary(u) => ScalarOp::unary(*u)?,
        Op::Binary(b) => ScalarOp::binary(*b)?,
        _ => return None,
    };
    if n.outputs.len() != 1 || n.inputs.len() != op.arity() {
        return None;
    }
    let out = g.tensor_type(n.outputs[0])?;
    let shape = out.shape.as_ref()?.as_fixed()?;
    if out.dtype != DType::F32 || shape.iter().product::<usize>() < 2 {
        return None;
    }
    let mut period = None;
    for v in &n.inputs {
        let t = g.tensor_type((*v)?)?;
        if t.dtype != DType::F32 {
            return None;
        }
        if let Some(p) = fits(&t.shape.as_ref()?.as_fixed()?, &shape)? {
            if period.replace(p).is_some_and(|q| q != p) {
                return None;
            }
        }
    }
    Some((op, shape, period))
}

/// Fuse every chain of two or more elementwise nodes; returns how many groups were made.
pub fn fuse_chains(g: &mut Graph, report: &mut FusionReport) -> usize {
    let steps: Vec<Option<(ScalarOp, Vec<usize>, Option<usize>)>> = (0..g.nodes.len()).map(|i| step_of(g, i)).collect();
    let readers = g.consumers();
    // A producer joins its consumer's group when the consumer is the only node that reads its
    // output (once or more) and the output is not a graph output; then only the group's last
    // node has an output anyone else reads. Groups are keyed by that last node; the inputs
    // that repeat (biases) of one group share one period, so its loop is rows of that period.
    let mut group_of: Vec<usize> = (0..g.nodes.len()).collect();
    let mut period_of: Vec<Option<usize>> = steps.iter().map(|s| s.as_ref().and_then(|s| s.2)).collect();
    for i in (0..g.nodes.len()).rev() {
        let Some((_, shape, _)) = &steps[i] else { continue };
        for v in g.nodes[i].inputs.iter().flatten() {
            let ValueKind::Node(NodeId(p)) = g.value(*v).kind else { continue };
            let p = p as usize;
            let only_here = readers.get(v).is_some_and(|r| r.iter().all(|&c| c == i)) && !g.outputs.contains(v);
            let root = group_of[i];
            let Some((_, ps, pp)) = &steps[p] else { continue };
            let period_fits = match (period_of[root], pp) {
                (Some(a), Some(b)) => a == *b,
                _ => true,
            };
            if only_here && ps == shape && period_fits {
                group_of[p] = root;
                period_of[root] = period_of[root].or(*pp);
            }
        }
    }
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, &r) in group_of.iter().enumerate() {
        if steps[i].is_some() {
            members.entry(r).or_default().push(i);
        }
    }
    let mut remove = vec![false; g.nodes.len()];
    let mut made = 0;
    let mut roots: Vec<usize> = members.keys().copied().filter(|r| members[r].len() >= 2).collect();
    roots.sort_unstable();
    for root in roots {
        let nodes = &members[&root];
        // Node order is a topological order, so each step reads earlier steps only.
        let mut program = ScalarProgram::default();
        let mut inputs: Vec<ValueId> = Vec::new();
        let mut step_at: HashMap<ValueId, usize> = HashMap::new();
        for &i in nodes {
            let n = &g.nodes[i];
            let (op, _, _) = steps[i].clone().expect("members have steps");
            let args = n
                .inputs
                .iter()
                .flatten()
                .map(|&v| {
                    if let Some(&k) = step_at.get(&v) {
                        return Operand::Step(k);
                    }
                    if let Some(c) = g.const_value(v).filter(|t| t.numel() == 1).and_then(|t| t.to_f64_vec().first().map(|&x| x as f32)) {
                        return Operand::Const(c);
                    }
                    let k = inputs.iter().position(|&x| x == v).unwrap_or_else(|| {
                        inputs.push(v);
                        inputs.len() - 1
                    });
                    Operand::Input(k)
                })
                .collect();
            program.steps.push(Step { op, args, node: n.name.clone() });
            step_at.insert(n.outputs[0], program.steps.len() - 1);
        }
        let labels: Vec<(String, String)> = nodes.iter().map(|&i| label(g, i)).collect();
        let mut roles = labels.into_iter();
        if let Some((op, name)) = roles.next() {
            let gr = report.group((op, name));
            gr.nodes.extend(roles.map(|(o, n)| (o, n, Role::Epilogue)));
        }
        let last = &mut g.nodes[root];
        last.op = Op::Elementwise(Box::new(program));
        last.inputs = inputs.into_iter().map(Some).collect();
        for &i in &nodes[..nodes.len() - 1] {
            remove[i] = true;
        }
        made += 1;
    }
    if made > 0 {
        super::fuse::drop_nodes(g, &remove);
    }
    made
}
