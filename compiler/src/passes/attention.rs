//! Attention as exporters spell it: `MatMul(Q, Kᵀ)`, elementwise nodes on the scores (a
//! scale, a mask), `Softmax` over the keys and `MatMul(P, V)`, with the Transposes that only
//! reorder Q, K, V or the output read as strided views. Targets that compute it in one kernel
//! (the CUDA target's tensor-core attention, the CPU's fused attention) find it here and add
//! their own limits.
use crate::codegen::index::strides as contiguous_strides;
use crate::ir::{DType, Graph, NodeId, Op, ValueId, ValueKind};
use crate::ops::matmul::MatMul;
use std::collections::HashMap;

/// The static shape of `v`, if it has one.
fn shape(g: &Graph, v: ValueId) -> Option<Vec<usize>> {
    g.tensor_type(v)?.shape.as_ref()?.as_fixed()
}

/// Element `(batch…, r, c)` of a matrix operand at `value + Σ batch_i · batch_strides_i +
/// r · rs + c · cs` (elements).
#[derive(Debug, Clone)]
pub struct View {
    pub value: ValueId,
    pub batch_strides: Vec<usize>,
    pub rs: usize,
    pub cs: usize,
}

/// One attention the kernel computes.
#[derive(Debug, Clone)]
pub struct Attention {
    /// Every node whose work the kernel does; it runs in place of the last (`emit`).
    pub nodes: Vec<NodeId>,
    pub emit: NodeId,
    /// The scores' product and the elementwise nodes between it and the softmax.
    pub scores: NodeId,
    pub chain: Vec<NodeId>,
    pub q: View,
    /// Kᵀ as the first product reads it: `D × Sk`.
    pub kt: View,
    pub v: View,
    /// Where the output goes (the last Transpose's output when one is absorbed).
    pub out: View,
    pub batch: Vec<usize>,
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
    pub dv: usize,
    pub dtype: DType,
}

impl Attention {
    /// What the kernel reads besides its nodes' inputs at `emit`: the products' operands
    /// (under the transposes it reads through) and the chain's other operands.
    pub fn reads(&self, g: &Graph) -> Vec<ValueId> {
        let mut r = vec![self.q.value, self.kt.value, self.v.value];
        for &c in &self.chain {
            r.extend(g.node(c).inputs.iter().flatten().copied());
        }
        r
    }
}

fn dtype(g: &Graph, v: ValueId) -> Option<DType> {
    g.tensor_type(v).map(|t| t.dtype)
}

/// The single node reading `v` (as any number of its inputs), if `v` has exactly one reader
/// and is no graph output.
fn sole_reader(g: &Graph, readers: &HashMap<ValueId, Vec<usize>>, v: ValueId) -> Option<NodeId> {
    match readers.get(&v).map(|r| r.as_slice()) {
        Some([first, rest @ ..]) if rest.iter().all(|r| r == first) && !g.outputs.contains(&v) => Some(NodeId(*first as u32)),
        _ => None,
    }
}


/// Operand `x` of a product read as a matrix view: through the Transpose that made it when
/// that is its only use (the Transpose is then absorbed), else as stored.
fn operand_view(g: &Graph, readers: &HashMap<ValueId, Vec<usize>>, x: ValueId, absorbed: &mut Vec<NodeId>) -> Option<View> {
    let xs = shape(g, x)?;
    let rank = xs.len();
    let split = |st: &[usize], value: ValueId| View { value, batch_strides: st[..rank - 2].to_vec(), rs: st[rank - 2], cs: st[rank - 1] };
    if let ValueKind::Node(p) = g.value(x).kind {
        let pn = g.node(p);
        if let (Some(perm), Some(Some(src))) = (crate::ops::transpose::perm_of(&pn.op, rank), pn.inputs.first()) {
            if sole_reader(g, readers, x).is_some() && shape(g, *src).is_some_and(|s| s.len() == rank) {
                let ss = contiguous_strides(&shape(g, *src)?);
                let st: Vec<usize> = perm.iter().map(|&a| ss[a]).collect();
                absorbed.push(p);
                return Some(split(&st, *src));
            }
        }
    }
    Some(split(&contiguous_strides(&xs), x))
}

/// Every attention in `g` whose scores have a type `dtype_ok` accepts (static shapes).
pub fn find(g: &Graph, dtype_ok: impl Fn(DType) -> bool) -> Vec<Attention> {
    let readers = g.consumers();
    (0..g.nodes.len()).filter_map(|i| one(g, &readers, NodeId(i as u32), &dtype_ok)).collect()
}

/// The attention whose scores node `mm1` computes, if the pattern holds.
fn one(g: &Graph, readers: &HashMap<ValueId, Vec<usize>>, mm1: NodeId, dtype_ok: &dyn Fn(DType) -> bool) -> Option<Attention> {
    let n1 = g.node(mm1);
    if n1.op.get::<MatMul>().is_none() || n1.outputs.len() != 1 {
        return None;
    }
    let (q, kt, s) = (n1.inputs.first().copied().flatten()?, n1.inputs.get(1).copied().flatten()?, n1.outputs[0]);
    let ss = shape(g, s)?;
    let dt = dtype(g, s)?;
    if !dtype_ok(dt) || ss.len() < 2 {
        return None;
    }
    let numel: usize = ss.iter().product();
    // Elementwise nodes, each the sole reader of the one before, as large as the scores.
    let (mut cur, mut chain) = (s, Vec::new());
    let softmax = loop {
        let r = sole_reader(g, readers, cur)?;
        let rn = g.node(r);
        if rn.outputs.len() != 1 || dtype(g, rn.outputs[0]) != Some(dt) {
            return None;
        }
        match &rn.op {
            Op::Unary(_) | Op::Binary(_) | Op::Elementwise(_) if shape(g, rn.outputs[0]).is_some_and(|o| o.iter().product::<usize>() == numel && o.len() == ss.len()) => {
                chain.push(r);
                cur = rn.outputs[0];
            }
            op if crate::ops::softmax::is_last_axis_softmax(op, ss.len()) && rn.inputs.first() == Some(&Some(cur)) => break r,
            _ => return None,
        }
    };
    let p = g.node(softmax).outputs[0];
    let mm2 = sole_reader(g, readers, p)?;
    let n2 = g.node(mm2);
    if n2.op.get::<MatMul>().is_none() || n2.inputs.first() != Some(&Some(p)) || n2.inputs.get(1) == Some(&Some(p)) || n2.outputs.len() != 1 {
        return None;
    }
    let (v, o) = (n2.inputs.get(1).copied().flatten()?, n2.outputs[0]);
    let (qs, ks, vs, os) = (shape(g, q)?, shape(g, kt)?, shape(g, v)?, shape(g, o)?);
    let rank = ss.len();
    if [qs.len(), ks.len(), vs.len(), os.len()] != [rank; 4] || [dtype(g, q)?, dtype(g, kt)?, dtype(g, v)?, dtype(g, o)?] != [dt; 4] {
        return None;
    }
    let batch = ss[..rank - 2].to_vec();
    // No broadcasting between the operands' batch dims.
    if [&qs, &ks, &vs, &os].iter().any(|s| s[..rank - 2] != batch[..]) {
        return None;
    }
    let (sq, d, sk, dv) = (qs[rank - 2], qs[rank - 1], ks[rank - 1], vs[rank - 1]);
    if ks[rank - 2] != d || vs[rank - 2] != sk || ss[rank - 2..] != [sq, sk] || os[rank - 2..] != [sq, dv] {
        return None;
    }
    let mut nodes = vec![mm1];
    let mut absorbed = Vec::new();
    let qv = operand_view(g, readers, q, &mut absorbed)?;
    let kv = operand_view(g, readers, kt, &mut absorbed)?;
    let vv = operand_view(g, readers, v, &mut absorbed)?;
    nodes.extend(chain.iter().copied());
    nodes.extend([softmax, mm2]);
    nodes.extend(absorbed);
    // The output, through a Transpose that is its only reader.
    let mut emit = mm2;
    let mut out = View { value: o, batch_strides: contiguous_strides(&os)[..rank - 2].to_vec(), rs: dv, cs: 1 };
    if let Some(t) = sole_reader(g, readers, o) {
        let tn = g.node(t);
        if let (Some(perm), Some(&y)) = (crate::ops::transpose::perm_of(&tn.op, rank), tn.outputs.first()) {
            let ts = contiguous_strides(&shape(g, y)?);
            // Output dim perm[a] is the Transpose's dim a.
            let mut st = vec![0; rank];
            for (a, &b) in perm.iter().enumerate() {
                st[b] = ts[a];
            }
            out = View { value: y, batch_strides: st[..rank - 2].to_vec(), rs: st[rank - 2], cs: st[rank - 1] };
            nodes.push(t);
            emit = t;
        }
    }
    Some(Attention { nodes, emit, scores: mm1, chain, q: qv, kt: kv, v: vv, out, batch, sq, sk, d, dv, dtype: dt })
}

