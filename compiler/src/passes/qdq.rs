//! Integer convolutions from QDQ models. onnxruntime's static quantizer writes a quantized
//! convolution as `QuantizeLinear(Conv(DequantizeLinear(xq), DequantizeLinear(wq),
//! DequantizeLinear(bq)))`: float ops between quantizers, which onnxruntime itself runs as one
//! QLinearConv. This pass does the same rewrite, so the integer kernel
//! (`runtime::kernels::qconv`) runs instead of dequantizing the weights and convolving in f32.
//!
//! The rewrite is exact in integers: QLinearConv sums `(xq − zx)·(wq − zw)` and the i32 bias
//! exactly and requantizes once, where the float graph rounds each product and sum to f32
//! first; the two can differ by one step of the output's quantization where a value lands
//! near a rounding boundary (onnxruntime's results differ from the float graph's the same way).
//! So it is one of the fusions `fuse` runs, not `fuse_exact`.
//!
//! Taken only where QLinearConv means the same computation: per-tensor scale and zero point for
//! x and y, weights i8/u8 with a per-tensor or per-output-channel scale (axis 0), the bias i32
//! with zero point 0 and scale `x_scale · w_scale` (as the quantizer computes it), the Conv's
//! result read only by the QuantizeLinear; one group (the integer kernel's).
use super::fuse::{drop_nodes, label, FusionReport, Role};
use crate::ir::{DType, Graph, Node, Op, ValueId};
use crate::ops::integer::QLinearConv;
use crate::ops::quant::{Dequantize, Quantize};
use crate::ops::IntoOp;
use std::collections::{HashMap, HashSet};

/// Each node output's producer, from the node list itself (passes before this one may leave
/// `ValueKind::Node` ids stale until they renumber).
fn producers(g: &Graph) -> HashMap<ValueId, usize> {
    g.nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |&o| (o, i))).collect()
}

/// The DequantizeLinear node producing `v`, if any.
fn dequantize_of<'g>(g: &'g Graph, prod: &HashMap<ValueId, usize>, v: ValueId) -> Option<(&'g Node, &'g Dequantize)> {
    let n = &g.nodes[*prod.get(&v)?];
    let Op::Def(d) = &n.op else { return None };
    Some((n, d.get::<Dequantize>()?))
}

/// One f32 value of a constant tensor, or its values.
fn f32_values(g: &Graph, v: ValueId) -> Option<Vec<f32>> {
    if g.tensor_type(v)?.dtype != DType::F32 {
        return None;
    }
    Some(g.const_value(v)?.to_f64_vec().iter().map(|&x| x as f32).collect())
}

/// A zero point that is absent or a constant of zeros.
fn zero_or_absent(g: &Graph, v: Option<ValueId>) -> bool {
    v.is_none_or(|v| g.const_value(v).is_some_and(|t| t.to_f64_vec().iter().all(|&z| z == 0.0)))
}

/// A per-tensor (quantize or dequantize) scale and zero point: one constant each.
fn per_tensor(g: &Graph, n: &Node) -> bool {
    let one = |i: usize| n.inputs.get(i).copied().flatten().and_then(|v| g.const_value(v)).map(|t| t.numel());
    one(1) == Some(1) && n.inputs.get(2).copied().flatten().is_none_or(|_| one(2) == Some(1))
}

/// Values the convolutions [`qdq_conv`] rewrites read as weights or bias: constant folding
/// leaves those dequantizations in place (`fold`, and the sequence unrolling's own folding),
/// so that the rewrite finds the integer weights. Every other dequantized weight folds.
pub fn conv_dequantized(g: &Graph) -> HashSet<ValueId> {
    let (cons, prod) = (g.consumers(), producers(g));
    (0..g.nodes.len()).filter(|&ci| match_conv(g, &cons, &prod, ci).is_some()).flat_map(|ci| g.nodes[ci].inputs.iter().skip(1).take(2).flatten().copied()).collect()
}

/// Rewrite each quantized convolution of the QDQ form into a QLinearConv.
pub fn qdq_conv(g: &mut Graph, report: &mut FusionReport) {
    let (cons, prod) = (g.consumers(), producers(g));
    let mut rewrites = vec![];
    for ci in 0..g.nodes.len() {
        if let Some(r) = match_conv(g, &cons, &prod, ci) {
            rewrites.push(r);
        }
    }
    let mut remove = vec![false; g.nodes.len()];
    for (ci, qi, node) in rewrites {
        let gr = report.group(label(g, ci));
        gr.nodes.push((label(g, qi).0, g.nodes[qi].name.clone(), Role::Epilogue));
        // In the QuantizeLinear's place, which comes after every input the new node reads.
        g.nodes[qi] = node;
        remove[ci] = true;
    }
    drop_nodes(g, &remove);
}

/// The QLinearConv replacing Conv node `ci` and the QuantizeLinear reading it: `(ci, q, node)`.
fn match_conv(g: &Graph, cons: &HashMap<ValueId, Vec<usize>>, prod: &HashMap<ValueId, usize>, ci: usize) -> Option<(usize, usize, Node)> {
    let n = &g.nodes[ci];
    // Grouped and depthwise convolutions stay float: the integer kernel takes one group.
    let Op::Conv { window, group: group @ 1 } = &n.op else { return None };
    let (&y, [Some(x), Some(w)]) = (n.outputs.first()?, n.inputs.get(..2)?) else { return None };
    if n.outputs.len() != 1 || g.outputs.contains(&y) || g.tensor_type(y)?.dtype != DType::F32 {
        return None;
    }
    // The Conv's only reader: a per-tensor QuantizeLinear to u8 or i8.
    let [qi] = cons.get(&y)?.as_slice() else { return None };
    let q = &g.nodes[*qi];
    let Op::Def(qd) = &q.op else { return None };
    qd.get::<Quantize>()?;
    let qout = *q.outputs.first()?;
    // QLinearConv's output type is its zero point's (u8 without one).
    let yd = g.tensor_type(qout)?.dtype;
    let yz = q.inputs.get(2).copied().flatten();
    if q.inputs.first() != Some(&Some(y)) || !per_tensor(g, q) || !matches!(yd, DType::U8 | DType::I8) || (yz.is_none() && yd != DType::U8) {
        return None;
    }
    // x: a per-tensor DequantizeLinear of u8 or i8.
    let (dx, _) = dequantize_of(g, prod, *x)?;
    let xq = dx.inputs.first().copied().flatten()?;
    if !per_tensor(g, dx) || !matches!(g.tensor_type(xq)?.dtype, DType::U8 | DType::I8) {
        return None;
    }
    let xs = f32_values(g, dx.inputs.get(1).copied().flatten()?)?;
    // w: constant integers, per tensor or per output channel (axis 0).
    let (dw, wdef) = dequantize_of(g, prod, *w)?;
    let wq = dw.inputs.first().copied().flatten()?;
    let wt = g.tensor_type(wq)?;
    let m = *wt.shape.as_ref()?.as_fixed()?.first()?;
    let wscale = dw.inputs.get(1).copied().flatten()?;
    let ws = f32_values(g, wscale)?;
    let rank = wt.shape.as_ref()?.rank() as i64;
    if !matches!(wt.dtype, DType::U8 | DType::I8) || g.const_value(wq).is_none() || wdef.block_size != 0 {
        return None;
    }
    if ws.len() != 1 && (ws.len() != m || !(wdef.axis == 0 || wdef.axis == -rank)) {
        return None;
    }
    let wz = dw.inputs.get(2).copied().flatten();
    if wz.is_some_and(|z| g.const_value(z).is_none()) {
        return None;
    }
    // The bias: i32 with zero point 0 and scale x_scale · w_scale.
    let bias = match n.inputs.get(2).copied().flatten() {
        None => None,
        Some(b) => {
            let (db, _) = dequantize_of(g, prod, b)?;
            let bq = db.inputs.first().copied().flatten()?;
            let bs = f32_values(g, db.inputs.get(1).copied().flatten()?)?;
            if g.tensor_type(bq)?.dtype != DType::I32 || g.const_value(bq).is_none() || !zero_or_absent(g, db.inputs.get(2).copied().flatten()) {
                return None;
            }
            let want = |i: usize| xs[0] * ws[if ws.len() == 1 { 0 } else { i }];
            let close = |a: f32, b: f32| (a - b).abs() <= 1e-6 * b.abs().max(f32::MIN_POSITIVE);
            if (bs.len() != 1 && bs.len() != m) || !(0..m).all(|i| close(bs[if bs.len() == 1 { 0 } else { i }], want(i))) {
                return None;
            }
            Some(bq)
        }
    };
    let inputs = vec![Some(xq), dx.inputs[1], dx.inputs.get(2).copied().flatten(), Some(wq), Some(wscale), wz, q.inputs.get(1).copied().flatten(), yz, bias];
    let node = Node {
        name: q.name.clone(),
        op: QLinearConv { window: window.clone(), group: *group }.op(),
        inputs,
        outputs: vec![qout],
        source_op: Some(("QLinearConv".into(), 10)),
    };
    Some((ci, *qi, node))
}
