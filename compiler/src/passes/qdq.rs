//! Integer convolutions and matrix products from QDQ models. onnxruntime's static quantizer
//! writes a quantized convolution as `QuantizeLinear(Conv(DequantizeLinear(xq),
//! DequantizeLinear(wq), DequantizeLinear(bq)))`, and a quantized MatMul or Gemm the same way:
//! float ops between quantizers, which onnxruntime itself runs as one QLinearConv,
//! QLinearMatMul or QGemm. This pass does the same rewrite (a Gemm's bias becomes
//! QLinearMatMul's input 8, burnc's QGemm form), so the integer kernels
//! (`runtime::kernels::qconv`, `qgemm`) run instead of dequantizing the weights and computing
//! in f32.
//!
//! The rewrite is exact in integers: the integer ops sum `(xq − zx)·(wq − zw)` and the i32 bias
//! exactly and requantize once, where the float graph rounds each product and sum to f32
//! first; the two can differ by one step of the output's quantization where a value lands
//! near a rounding boundary (onnxruntime's results differ from the float graph's the same way).
//! So it is one of the fusions `fuse` runs, not `fuse_exact`.
//!
//! Taken only where the integer op means the same computation: per-tensor scale and zero point
//! for x and y, constant weights i8/u8 with a per-tensor or per-output-channel scale (a Conv's
//! axis 0, a MatMul's columns), the bias i32 with zero point 0 and scale `x_scale · w_scale` (as
//! the quantizer computes it), the product read only by the QuantizeLinear; a Conv of one group
//! (the integer kernel's); a 2-D B; a Gemm with `alpha = beta = 1` and A not transposed (a
//! transposed B is stored transposed).
use super::fuse::{drop_nodes, label, FusionReport, Role};
use crate::ir::{DType, Graph, Node, Op, ValueId};
use crate::tensor::Tensor;
use crate::ops::integer::{QLinearConv, QLinearMatMul};
use crate::ops::matmul::{Gemm, MatMul};
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

/// Values the products [`qdq_products`] rewrites read as weights or bias: constant folding
/// leaves those dequantizations in place (`fold`, and the sequence unrolling's own folding),
/// so that the rewrite finds the integer weights. Every other dequantized weight folds.
pub fn integer_dequantized(g: &Graph) -> HashSet<ValueId> {
    let (cons, prod) = (g.consumers(), producers(g));
    (0..g.nodes.len()).filter(|&ci| match_product(g, &cons, &prod, ci).is_some()).flat_map(|ci| g.nodes[ci].inputs.iter().skip(1).take(2).flatten().copied()).collect()
}

/// Rewrite each quantized convolution and matrix product of the QDQ form into a QLinearConv
/// or QLinearMatMul.
pub fn qdq_products(g: &mut Graph, report: &mut FusionReport) {
    let (cons, prod) = (g.consumers(), producers(g));
    let rewrites: Vec<Rewrite> = (0..g.nodes.len()).filter_map(|ci| match_product(g, &cons, &prod, ci)).collect();
    let mut remove = vec![false; g.nodes.len()];
    for Rewrite { ci, qi, mut node, transposed_w } in rewrites {
        // A Gemm's B stored [n][k]: QLinearMatMul reads it [k][n], as a new constant.
        if let Some(w) = transposed_w {
            let Some(t) = transposed(g, w) else { continue };
            let name = format!("{}_transposed", g.value(w).name);
            node.inputs[3] = Some(g.add_const(name, t));
        }
        let gr = report.group(label(g, ci));
        gr.nodes.push((label(g, qi).0, g.nodes[qi].name.clone(), Role::Epilogue));
        // In the QuantizeLinear's place, which comes after every input the new node reads.
        g.nodes[qi] = node;
        remove[ci] = true;
    }
    drop_nodes(g, &remove);
}

/// A 2-D constant, transposed.
fn transposed(g: &Graph, w: ValueId) -> Option<Tensor> {
    crate::interp::ops::shape::transpose(&g.const_value(w)?, &[1, 0]).ok()
}

/// A product node to rewrite: the product `ci`, the QuantizeLinear `qi` reading it, the
/// integer node taking `qi`'s place, and whether its B (input 3, a `[n][k]` constant) must be
/// stored transposed first.
struct Rewrite {
    ci: usize,
    qi: usize,
    node: Node,
    transposed_w: Option<ValueId>,
}

/// What a float product becomes: its integer op, the axis of its weights that holds the
/// output channels (columns), and whether those weights are stored transposed.
fn integer_op(g: &Graph, n: &Node) -> Option<(crate::ir::Op, usize, bool)> {
    match &n.op {
        // Grouped and depthwise convolutions stay float: the integer kernel takes one group.
        Op::Conv { window, group: group @ 1 } => Some((QLinearConv { window: window.clone(), group: *group }.op(), 0, false)),
        op if op.get::<MatMul>().is_some() => Some((QLinearMatMul.op(), 1, false)),
        op => {
            let &Gemm { alpha, beta, trans_a: false, trans_b } = op.get::<Gemm>()? else { return None };
            if alpha != 1.0 || (beta != 1.0 && n.inputs.get(2).copied().flatten().is_some()) {
                return None;
            }
            // Gemm's A is 2-D; B's output axis is 0 when it is transposed.
            let a = g.tensor_type(n.inputs.first().copied().flatten()?)?.shape.as_ref()?.rank();
            (a == 2).then(|| (QLinearMatMul.op(), if trans_b { 0 } else { 1 }, trans_b))
        }
    }
}

/// The rewrite of product node `ci` and the QuantizeLinear reading it.
fn match_product(g: &Graph, cons: &HashMap<ValueId, Vec<usize>>, prod: &HashMap<ValueId, usize>, ci: usize) -> Option<Rewrite> {
    let n = &g.nodes[ci];
    let (op, axis, trans) = integer_op(g, n)?;
    let (&y, [Some(x), Some(w)]) = (n.outputs.first()?, n.inputs.get(..2)?) else { return None };
    if n.outputs.len() != 1 || g.outputs.contains(&y) || g.tensor_type(y)?.dtype != DType::F32 {
        return None;
    }
    // The product's only reader: a per-tensor QuantizeLinear to u8 or i8.
    let [qi] = cons.get(&y)?.as_slice() else { return None };
    let q = &g.nodes[*qi];
    let Op::Def(qd) = &q.op else { return None };
    qd.get::<Quantize>()?;
    let qout = *q.outputs.first()?;
    // The integer op's output type is its zero point's (u8 without one).
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
    // w: constant integers, per tensor or per output channel (`axis`).
    let (dw, wdef) = dequantize_of(g, prod, *w)?;
    let wq = dw.inputs.first().copied().flatten()?;
    let wt = g.tensor_type(wq)?;
    let wshape = wt.shape.as_ref()?.as_fixed()?;
    let rank = wshape.len() as i64;
    let m = *wshape.get(axis)?;
    // A product's B is 2-D (QLinearMatMul's per-column scale is over its last dim).
    if axis != 0 && rank != 2 {
        return None;
    }
    let wscale = dw.inputs.get(1).copied().flatten()?;
    let ws = f32_values(g, wscale)?;
    if !matches!(wt.dtype, DType::U8 | DType::I8) || g.const_value(wq).is_none() || wdef.block_size != 0 {
        return None;
    }
    if ws.len() != 1 && (ws.len() != m || !(wdef.axis == axis as i64 || wdef.axis == axis as i64 - rank)) {
        return None;
    }
    let wz = dw.inputs.get(2).copied().flatten();
    if wz.is_some_and(|z| g.const_value(z).is_none()) {
        return None;
    }
    // The bias: i32 with zero point 0 and scale x_scale · w_scale, one per output channel.
    let bias = match n.inputs.get(2).copied().flatten() {
        None => None,
        Some(b) => {
            let (db, _) = dequantize_of(g, prod, b)?;
            let bq = db.inputs.first().copied().flatten()?;
            let bs = f32_values(g, db.inputs.get(1).copied().flatten()?)?;
            let bt = g.tensor_type(bq)?;
            if bt.dtype != DType::I32 || g.const_value(bq)?.numel() != m || !zero_or_absent(g, db.inputs.get(2).copied().flatten()) {
                return None;
            }
            if bt.shape.as_ref()?.as_fixed()?.iter().filter(|&&d| d != 1).count() > 1 {
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
    let source = if matches!(n.op, Op::Conv { .. }) { "QLinearConv" } else { "QLinearMatMul" };
    let node = Node { name: q.name.clone(), op, inputs, outputs: vec![qout], source_op: Some((source.into(), 10)) };
    Some(Rewrite { ci, qi: *qi, node, transposed_w: trans.then_some(wq) })
}
