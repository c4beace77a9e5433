//! Cost model: FLOPs per node from static shapes. Every op is listed (no catch-all), so a new
//! op must say what it costs. Data movement costs 0 FLOPs; ops whose cost depends on values or
//! on subgraphs run an unknown number of times are unknown (`None`).
use crate::ir::{Graph, Node, Op};

#[derive(Debug, Default, Clone, Copy)]
pub struct Flops {
    pub total: u64,
    /// Nodes whose shapes are not static or whose cost depends on values, so unknown.
    pub unknown: usize,
}

fn out_numel(g: &Graph, n: &Node) -> Option<u64> {
    let o = *n.outputs.first()?;
    g.tensor_type(o)?.shape.as_ref()?.numel().map(|x| x as u64)
}

fn in_shape(g: &Graph, n: &Node, i: usize) -> Option<Vec<usize>> {
    let v = (*n.inputs.get(i)?)?;
    g.tensor_type(v)?.shape.as_ref()?.as_fixed()
}

/// The product of `xs`, saturating (a hostile model's sizes must not wrap).
fn mul(xs: &[u64]) -> u64 {
    xs.iter().fold(1u64, |a, &b| a.saturating_mul(b))
}

/// The product of dims `d`, saturating.
fn prod(d: &[usize]) -> u64 {
    mul(&d.iter().map(|&x| x as u64).collect::<Vec<_>>())
}

/// 2 FLOPs per multiply-add of a convolution whose weights are input `w`: each output takes
/// W's `C/group × kernel`.
fn conv_flops(g: &Graph, n: &Node, w: usize, out: u64) -> Option<u64> {
    Some(mul(&[2, out, prod(in_shape(g, n, w)?.get(1..)?)]))
}

/// Multiply-adds count as 2 FLOPs.
pub fn node_flops(g: &Graph, n: &Node) -> Option<u64> {
    let out = out_numel(g, n);
    Some(match &n.op {
        Op::Def(d) => {
            let ins: Vec<Option<Vec<usize>>> = (0..n.inputs.len()).map(|i| in_shape(g, n, i)).collect();
            let outs: Vec<Option<Vec<usize>>> = n.outputs.iter().map(|&o| g.tensor_type(o)?.shape.as_ref()?.as_fixed()).collect();
            return d.flops(&ins, &outs);
        }
        // ---- elementwise: one FLOP per output element and step
        Op::Unary(_) | Op::Binary(_) => out?,
        Op::Elementwise(p) => mul(&[out?, p.steps.len() as u64]),

        // ---- convolutions
        Op::Conv { .. } | Op::FusedConv { .. } => conv_flops(g, n, 1, out?)?,


        // ---- data movement
        Op::Reshape { .. }
        | Op::Concat { .. }
        | Op::Gather { .. }
        | Op::Expand
        | Op::ConstantOfShape { .. }
        | Op::Seq(_) => 0,

        // ---- cost depends on values, trees or how often a subgraph runs
        Op::Loop { .. } | Op::Scan { .. } | Op::SequenceMap { .. } => {
            return None
        }
        // One branch runs: the dearer one.
        Op::If { then_branch, else_branch } => {
            let (t, e) = (graph_flops(then_branch), graph_flops(else_branch));
            if t.unknown + e.unknown > 0 {
                return None;
            }
            t.total.max(e.total)
        }
    })
}

pub fn graph_flops(g: &Graph) -> Flops {
    let mut f = Flops::default();
    for n in &g.nodes {
        match node_flops(g, n) {
            Some(x) => f.total = f.total.saturating_add(x),
            None => f.unknown += 1,
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Shape, TensorType, ValueKind, ValueType};
    use crate::ops::IntoOp;

    #[test]
    fn matmul_counts_multiply_adds_movement_is_free_loops_are_unknown() {
        let mut g = Graph::default();
        let ty = |d: &[usize]| ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(d)) });
        let a = g.add_value("a", ty(&[2, 3]), ValueKind::Input);
        let b = g.add_value("b", ty(&[3, 4]), ValueKind::Input);
        let (_, y) = g.add_node("mm", crate::ops::matmul::MatMul.op(), vec![Some(a), Some(b)], &["y".to_string()]);
        g.value_mut(y[0]).ty = ty(&[2, 4]);
        let (_, t) = g.add_node("tr", crate::ops::transpose::Transpose { perm: None }.op(), vec![Some(y[0])], &["t".to_string()]);
        g.value_mut(t[0]).ty = ty(&[4, 2]);
        let (_, l) = g.add_node("loop", Op::Loop { body: Box::default() }, vec![], &["l".to_string()]);
        g.value_mut(l[0]).ty = ty(&[1]);
        let f = graph_flops(&g);
        assert_eq!((f.total, f.unknown), (2 * 8 * 3, 1));
    }
}
