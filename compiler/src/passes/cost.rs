//! Cost model: FLOPs per node from static shapes.
use crate::ir::{Graph, Op};

#[derive(Debug, Default, Clone, Copy)]
pub struct Flops {
    pub total: u64,
    /// Nodes whose shapes are not static, so their cost is unknown.
    pub unknown: usize,
}

fn out_numel(g: &Graph, n: &crate::ir::Node) -> Option<u64> {
    let o = *n.outputs.first()?;
    g.tensor_type(o)?.shape.as_ref()?.numel().map(|x| x as u64)
}

fn in_shape(g: &Graph, n: &crate::ir::Node, i: usize) -> Option<Vec<usize>> {
    let v = (*n.inputs.get(i)?)?;
    g.tensor_type(v)?.shape.as_ref()?.as_fixed()
}

/// Multiply-adds count as 2 FLOPs.
pub fn node_flops(g: &Graph, n: &crate::ir::Node) -> Option<u64> {
    let out = out_numel(g, n)?;
    Some(match &n.op {
        Op::MatMul => {
            let a = in_shape(g, n, 0)?;
            2 * out * *a.last()? as u64
        }
        Op::Gemm { trans_a, .. } => {
            let a = in_shape(g, n, 0)?;
            let k = if *trans_a { a[0] } else { *a.get(1)? };
            2 * out * k as u64
        }
        Op::Conv { group, .. } | Op::FusedConv { group, .. } => {
            let w = in_shape(g, n, 1)?;
            let per_out: usize = w[1..].iter().product();
            let _ = group;
            2 * out * per_out as u64
        }
        Op::ConvTranspose { .. } => {
            let x = in_shape(g, n, 0)?;
            let w = in_shape(g, n, 1)?;
            let per_in: usize = w[1..].iter().product();
            2 * x.iter().product::<usize>() as u64 * per_in as u64
        }
        Op::Pool { window, .. } => out * window.kernel_shape.iter().product::<usize>() as u64,
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Shape { .. } => 0,
        _ => out,
    })
}

pub fn graph_flops(g: &Graph) -> Flops {
    let mut f = Flops::default();
    for n in &g.nodes {
        match node_flops(g, n) {
            Some(x) => f.total += x,
            None => f.unknown += 1,
        }
    }
    f
}
