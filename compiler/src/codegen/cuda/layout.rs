//! Channels-last storage inside a CUDA module. A tensor-core convolution reads its input as an
//! implicit GEMM whose depth runs over (ky, kx, channel): stored NHWC, eight channels are one
//! 16-byte copy, where NCHW gives one scalar load per element. So the 4-D activations that
//! flow between such convolutions (through elementwise ops and pooling) are kept NHWC; every
//! other value, and every graph input and output, keeps the model's NCHW layout. The choice is
//! the largest set every reader and writer of its values agrees with.
use crate::ir::{DType, Graph, Node, Op, PoolKind, Shape, TensorType, ValueId, ValueKind, ValueType};
use std::collections::{HashMap, HashSet};

/// The static shape of `v`, if it has one.
pub(super) fn shape(g: &Graph, v: ValueId) -> Option<Vec<usize>> {
    g.tensor_type(v)?.shape.as_ref()?.as_fixed()
}

fn half(g: &Graph, v: ValueId) -> bool {
    g.tensor_type(v).is_some_and(|t| matches!(t.dtype, DType::BF16 | DType::F16))
}

/// A 2-D, ungrouped convolution on 16-bit floats whose weights are a parameter only it uses:
/// the convolutions that run as a tensor-core implicit GEMM and can take an NHWC input (their
/// weights are reordered to match).
fn tensor_core_conv(g: &Graph, n: &Node, uses: &HashMap<ValueId, usize>) -> bool {
    let Op::Conv { group: 1, .. } = n.op else { return false };
    let (Some(Some(x)), Some(Some(w)), Some(&y)) = (n.inputs.first(), n.inputs.get(1), n.outputs.first()) else { return false };
    let ranks = [*x, *w, y].map(|v| shape(g, v).map(|s| s.len()));
    ranks == [Some(4); 3] && half(g, *x) && half(g, *w) && half(g, y) && matches!(g.value(*w).kind, ValueKind::Param(_)) && uses.get(w) == Some(&1)
}

/// Ops whose kernels index their operands by the flat output index alone.
fn elementwise(op: &Op) -> bool {
    matches!(op, Op::Unary(_) | Op::Binary(_) | Op::Elementwise(_))
}

fn window_pool(n: &Node) -> bool {
    matches!(&n.op, Op::Def(d) if d.get::<crate::ops::pool::Pool>().is_some_and(|p| matches!(p.kind, PoolKind::Max | PoolKind::Avg { .. }))) && n.outputs.len() == 1
}

/// The values to store NHWC.
pub fn channels_last(g: &Graph) -> HashSet<ValueId> {
    let uses = g.use_counts();
    let readers = g.consumers();
    let outputs: HashSet<ValueId> = g.outputs.iter().copied().collect();
    let mut set: HashSet<ValueId> = HashSet::new();
    for n in &g.nodes {
        let Some(&y) = n.outputs.first() else { continue };
        let candidate = tensor_core_conv(g, n, &uses) || window_pool(n) || elementwise(&n.op);
        if candidate && n.outputs.len() == 1 && !outputs.contains(&y) && half(g, y) && shape(g, y).is_some_and(|s| s.len() == 4) {
            set.insert(y);
        }
    }
    let producer = |v: ValueId| match g.value(v).kind {
        ValueKind::Node(id) => Some(g.node(id)),
        _ => None,
    };
    loop {
        let mut drop = Vec::new();
        for &v in &set {
            let vs = shape(g, v);
            // Its writer must produce it in NHWC: an elementwise op whose full-size operands are
            // all NHWC (scalars broadcast in any layout), a pool whose input is.
            let written = match producer(v) {
                Some(p) if elementwise(&p.op) => p.inputs.iter().flatten().all(|x| set.contains(x) || shape(g, *x).is_some_and(|s| s.iter().product::<usize>() == 1)),
                Some(p) if window_pool(p) => p.inputs.first().copied().flatten().is_some_and(|x| set.contains(&x)),
                Some(_) => true,
                None => false,
            };
            // Every reader must take it in NHWC: a convolution writing NHWC (as its data
            // input only), a pool or an elementwise op writing NHWC of the same shape, or a
            // global pool.
            let read = readers.get(&v).map(|r| r.as_slice()).unwrap_or(&[]).iter().all(|&r| {
                let n = &g.nodes[r];
                let out_nhwc = n.outputs.first().is_some_and(|y| set.contains(y));
                match &n.op {
                    Op::Conv { .. } => out_nhwc && tensor_core_conv(g, n, &uses) && n.inputs.iter().skip(1).flatten().all(|x| *x != v),
                    Op::Def(d) if d.get::<crate::ops::pool::GlobalPool>().is_some() => true,
                    _ if window_pool(n) => out_nhwc,
                    op if elementwise(op) => out_nhwc && n.outputs.first().is_some_and(|y| shape(g, *y) == vs),
                    _ => false,
                }
            });
            if !written || !read {
                drop.push(v);
            }
        }
        if drop.is_empty() {
            return set;
        }
        for v in drop {
            set.remove(&v);
        }
    }
}

/// The tensor-core convolutions writing NHWC whose input is NCHW with 8 channels or fewer (an
/// image's 3), with the channels it is padded to (4 or 8): such a
/// convolution first copies its input NHWC with zero channels added (see
/// [`super::kernels`]), so its implicit GEMM reads whole pixels as 8- or 16-byte vectors
/// instead of gathering single elements (ResNet-50's first layer took a tenth of the pass).
pub fn thin_inputs(g: &Graph, nhwc: &HashSet<ValueId>) -> HashMap<ValueId, usize> {
    let uses = g.use_counts();
    let mut out = HashMap::new();
    for n in &g.nodes {
        let (Some(Some(x)), Some(&y)) = (n.inputs.first(), n.outputs.first()) else { continue };
        if !tensor_core_conv(g, n, &uses) || nhwc.contains(x) || !nhwc.contains(&y) {
            continue;
        }
        match shape(g, *x).map(|s| s[1]) {
            // Not 8 with 3: the 16-byte copies and wgmma did not pay for twice the depth
            // (ResNet-50's first layer 0.24 against 0.16 ms).
            Some(1..=4) => out.insert(y, 4),
            Some(5..=8) => out.insert(y, 8),
            _ => None,
        };
    }
    out
}

/// Reorder the weights of every convolution reading an NHWC input, or packing its input so
/// (`thin`: its output, the channels it pads to), from [C_out][C][KH][KW] to [C_out][KH][KW][C'], the
/// implicit GEMM's depth order, C' ≥ C channels (the added ones zero).
pub fn reorder_conv_weights(g: &mut Graph, nhwc: &HashSet<ValueId>, thin: &HashMap<ValueId, usize>) {
    let convs: Vec<(ValueId, Option<usize>)> = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Conv { .. }))
        .filter_map(|n| {
            let padded = thin.get(n.outputs.first()?).copied();
            let reads_nhwc = n.inputs.first().copied().flatten().is_some_and(|x| nhwc.contains(&x));
            (padded.is_some() || reads_nhwc).then_some((n.inputs.get(1).copied().flatten()?, padded))
        })
        .collect();
    for (w, padded) in convs {
        let ValueKind::Param(p) = &mut g.value_mut(w).kind else { continue };
        let [co, c, kh, kw] = p.shape[..] else { continue };
        let size = p.dtype.size();
        if p.bytes.len() != co * c * kh * kw * size {
            continue;
        }
        let cp = padded.unwrap_or(c).max(c);
        let mut out = vec![0u8; co * cp * kh * kw * size];
        for o in 0..co {
            for ci in 0..c {
                for t in 0..kh * kw {
                    let from = ((o * c + ci) * kh * kw + t) * size;
                    let to = ((o * kh * kw + t) * cp + ci) * size;
                    out[to..to + size].copy_from_slice(&p.bytes[from..from + size]);
                }
            }
        }
        p.bytes = out.into();
        if cp != c {
            p.shape[1] = cp;
            let dtype = p.dtype;
            g.value_mut(w).ty = ValueType::Tensor(TensorType { dtype, shape: Some(Shape::fixed(&[co, cp, kh, kw])) });
        }
    }
}
