//! onnxruntime's `com.microsoft.nchwc` ops, which its graph optimiser writes at the `all` level
//! (`SessionOptions.optimized_model_filepath`): ReorderInput, ReorderOutput, Conv, MaxPool,
//! AveragePool, GlobalAveragePool and Upsample over tensors in MLAS's blocked layout.
//!
//! burnc keeps such tensors as plain NCHW with the channels padded to a multiple of the block
//! (the logical shape onnxruntime gives them): ReorderInput pads the channels with zeros,
//! ReorderOutput cuts them, the pools and Upsample are the standard ops, and Conv is the
//! standard Conv on weights put back from the blocked order MLAS stored them in (`OIHWBiBo`:
//! `[O/b, I/b, kh, kw, b_in, b_out]`; `OIHWBo`, for a first layer reading NCHW or a depthwise
//! one: `[O/b, I, kh, kw, b_out]`). Numbers are unchanged: the padded channels hold zeros, and
//! their weights are zero.
//!
//! The block `b` is 16 where MLAS has AVX-512 and 8 where it has AVX2. The file does not say
//! which: it is read from the shapes (a padded channel count that 16 does not divide, or a
//! layer padded by 8 or more channels), else taken to be the compiling machine's, as
//! onnxruntime says such a model runs only where it was optimised.
use super::attrs::Attrs;
use super::contrib::Chain;
use super::import::{node_label, Ctx};
use super::proto::{GraphProto, NodeProto};
use super::OnnxError;
use burnc_compiler::ir::{BinaryOp, Op, ValueId};
use burnc_compiler::ops::IntoOp;
use burnc_compiler::{Data, Tensor};
use std::collections::{HashMap, HashSet};

pub const DOMAIN: &str = "com.microsoft.nchwc";

/// What the lowering of one graph's nchwc ops needs: the block and which values are blocked.
#[derive(Debug, Clone)]
pub struct Nchwc {
    pub block: usize,
    blocked: HashSet<String>,
}

/// The block of `g`'s nchwc ops, `None` when it has none.
pub fn scan(g: &GraphProto) -> Option<Nchwc> {
    let nodes: Vec<&NodeProto> = g.node.iter().filter(|n| n.domain() == DOMAIN).collect();
    if nodes.is_empty() {
        return None;
    }
    let inits: HashMap<&str, &[i64]> = g.initializer.iter().map(|t| (t.name(), &t.dims[..])).collect();
    let producer: HashMap<&str, &NodeProto> = nodes.iter().flat_map(|n| n.output.iter().map(move |o| (o.as_str(), *n))).collect();
    let mut evidence_8 = false;
    let mut evidence_16 = false;
    for n in &nodes {
        if n.op_type() == "Conv" {
            if let Some(w) = n.input.get(1).and_then(|w| inits.get(w.as_str())) {
                // The output channels are padded to the block.
                if w.first().is_some_and(|o| o % 16 != 0) {
                    evidence_8 = true;
                }
            }
        }
        if n.op_type() == "ReorderOutput" {
            let real = Attrs(&n.attribute).i("channels").unwrap_or(0);
            if let Some(padded) = n.input.first().and_then(|x| padded_channels(x, &producer, &inits, 0)) {
                if padded - real >= 8 {
                    evidence_16 = true;
                }
            }
        }
    }
    let block = match (evidence_8, evidence_16) {
        (true, _) => 8,
        (false, true) => 16,
        (false, false) => host_block(),
    };
    Some(Nchwc { block, blocked: HashSet::new() })
}

/// The padded channel count of blocked value `x`: its Conv's output channels, through pools.
fn padded_channels(x: &str, producer: &HashMap<&str, &NodeProto>, inits: &HashMap<&str, &[i64]>, depth: usize) -> Option<i64> {
    let n = producer.get(x)?;
    match n.op_type() {
        "Conv" => inits.get(n.input.get(1)?.as_str())?.first().copied(),
        "MaxPool" | "AveragePool" | "GlobalAveragePool" | "Upsample" if depth < 64 => padded_channels(n.input.first()?, producer, inits, depth + 1),
        _ => None,
    }
}

/// MLAS's block on this machine (x86-64 with AVX-512F: 16; otherwise 8).
fn host_block() -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        return 16;
    }
    8
}

/// Lower one nchwc node.
pub fn lower(ctx: &mut Ctx, node: &NodeProto) -> Result<(), OnnxError> {
    let label = node_label(node);
    let err = |reason: String| OnnxError::Node { node: label.clone(), op: format!("{DOMAIN}.{}", node.op_type()), opset: 1, reason };
    let Some(state) = ctx.nchwc.clone() else { return Err(err("the graph's nchwc block is not known".into())) };
    let b = state.block as i64;
    let a = Attrs(&node.attribute);
    let input = |ctx: &mut Ctx, i: usize| -> Result<ValueId, OnnxError> {
        let name = node.input.get(i).filter(|s| !s.is_empty()).ok_or_else(|| err(format!("missing input {i}")))?;
        ctx.lookup(&label, name)?.ok_or_else(|| err(format!("missing input {i}")))
    };
    let out = node.output.first().filter(|s| !s.is_empty()).ok_or_else(|| err("output 0 has no name".into()))?.clone();
    let blocked_input = node.input.first().is_some_and(|x| state.blocked.contains(x));
    match node.op_type() {
        "ReorderInput" | "ReorderOutput" => {
            let inputs = [input(ctx, 0).map(Some)?];
            let mut c = Chain::new(ctx, node, &inputs);
            let x = c.input(0, "X")?;
            let ints = |c: &mut Chain, v: Vec<i64>| c.ctx.constant(&c.label, Tensor::from_i64s(vec![v.len()], v));
            let last = a.i_or("channels_last", 0) != 0;
            let y = if node.op_type() == "ReorderInput" {
                // NCHW (or NHWC) to NCHW with the channels padded to the block: the pad is
                // `(b - C mod b) mod b`, computed from the shape (folded when it is known).
                let x = if last { c.step(burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 3, 1, 2]) }.op(), &[x]) } else { x };
                let ch = c.step(burnc_compiler::ops::dim_values::Shape { start: 1, end: Some(2) }.op(), &[x]);
                let bc = ints(&mut c, vec![b]);
                let m = c.bin(BinaryOp::Mod { fmod: false }, ch, bc);
                let p = c.bin(BinaryOp::Sub, bc, m);
                let p = c.bin(BinaryOp::Mod { fmod: false }, p, bc);
                let zero = ints(&mut c, vec![0]);
                let pads = c.step(Op::Concat { axis: 0 }, &[zero, p]);
                let axes = ints(&mut c, vec![1]);
                let name = c.ctx.fresh(&c.label);
                c.add(burnc_compiler::ops::pad::Pad { mode: burnc_compiler::ir::PadMode::Constant }.op(), vec![Some(x), Some(pads), None, Some(axes)], &[name])[0]
            } else {
                let ch = a.i("channels").ok_or_else(|| c.err("missing attribute `channels`"))?;
                let (starts, ends, axes) = (ints(&mut c, vec![0]), ints(&mut c, vec![ch]), ints(&mut c, vec![1]));
                let y = c.step(burnc_compiler::ops::slice::Slice.op(), &[x, starts, ends, axes]);
                if last { c.step(burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 2, 3, 1]) }.op(), &[y]) } else { y }
            };
            c.finish(y)?;
            if node.op_type() == "ReorderInput" {
                mark(ctx, &out);
            }
            Ok(())
        }
        "Conv" => {
            let wv = input(ctx, 1)?;
            let w = ctx.graph.const_value(wv).ok_or_else(|| err("the weights must be an initializer".into()))?;
            // A first layer reads NCHW, a depthwise one has one input channel per group: both
            // block the output channels only. Others (grouped ones too) block both.
            let depthwise = a.i_or("group", 1) > 1 && w.shape.get(1) == Some(&1);
            let format = if !blocked_input || depthwise { Layout::OIHWBo } else { Layout::OIHWBiBo };
            let plain = unblock(&w, state.block, format).map_err(err)?;
            let wname = ctx.fresh(&label);
            let wc = ctx.constant(&wname, plain);
            ctx.bind(&wname, wc);
            // The standard FusedConv (Conv, + Sum, activation) on the reordered weights.
            let mut fc = node.clone();
            fc.domain = Some("com.microsoft".into());
            fc.op_type = Some("FusedConv".into());
            fc.input[1] = wname;
            super::contrib::lower(ctx, &fc, &[])?;
            mark(ctx, &out);
            Ok(())
        }
        "MaxPool" | "AveragePool" | "GlobalAveragePool" => {
            let mut std = node.clone();
            std.domain = Some(String::new());
            super::lower::lower_node(ctx, &std)?;
            mark(ctx, &out);
            Ok(())
        }
        "Upsample" => {
            // Resize by the integer scales of the spatial dims (blocked tensors are 4-D).
            let rank = 4;
            let scales = a.ints("scales").ok_or_else(|| err("missing attribute `scales`".into()))?;
            let mut full: Vec<f32> = vec![1.0; rank];
            for (i, s) in scales.iter().rev().enumerate() {
                if i < rank {
                    full[rank - 1 - i] = *s as f32;
                }
            }
            let scales = ctx.constant(&label, Tensor::from_f32s(vec![rank], full));
            let sname = ctx.fresh(&label);
            ctx.bind(&sname, scales);
            let mut r = NodeProto {
                op_type: Some("Resize".into()),
                domain: Some(String::new()),
                name: node.name.clone(),
                input: vec![node.input[0].clone(), String::new(), sname],
                output: vec![out.clone()],
                ..Default::default()
            };
            r.attribute = node.attribute.iter().filter(|at| matches!(at.name(), "mode" | "coordinate_transformation_mode")).cloned().collect();
            // MLAS's nearest upsampling repeats each pixel: floor of the asymmetric source.
            r.attribute.push(super::proto::AttributeProto { name: Some("nearest_mode".into()), s: Some(b"floor".to_vec().into()), r#type: Some(3), ..Default::default() });
            super::lower::lower_node(ctx, &r)?;
            mark(ctx, &out);
            Ok(())
        }
        other => Err(OnnxError::UnsupportedOp { node: label.clone(), op: other.into(), domain: DOMAIN.into(), opset: 1 }),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    /// `[O/b, I/b, kh, kw, b_in, b_out]`.
    OIHWBiBo,
    /// `[O/b, I, kh, kw, b_out]`.
    OIHWBo,
}

impl Layout {
    /// Where MLAS stores weight `(oc, ic, s)` (`s` the kernel position of `hw`) of `i` input
    /// channels, `b` the block.
    fn index(self, b: usize, i: usize, hw: usize, oc: usize, ic: usize, s: usize) -> usize {
        match self {
            Layout::OIHWBiBo => ((((oc / b) * (i / b) + ic / b) * hw + s) * b + ic % b) * b + oc % b,
            Layout::OIHWBo => (((oc / b) * i + ic) * hw + s) * b + oc % b,
        }
    }
}

/// Weights of dims `[O, I, kh, kw]` stored in `layout` back in OIHW order.
fn unblock(w: &Tensor, b: usize, layout: Layout) -> Result<Tensor, String> {
    let Data::F32(v) = &w.data else { return Err(format!("the weights must be f32, got {}", w.dtype())) };
    let [o, i, h, k] = w.shape[..] else { return Err(format!("the weights must be [O, I, kh, kw], got {:?}", w.shape)) };
    let hw = h * k;
    if o % b != 0 || (layout == Layout::OIHWBiBo && i % b != 0) {
        return Err(format!("weights {:?} are not padded to the block of {b}", w.shape));
    }
    let mut out = vec![0.0f32; v.len()];
    for oc in 0..o {
        for ic in 0..i {
            for s in 0..hw {
                out[(oc * i + ic) * hw + s] = v[layout.index(b, i, hw, oc, ic, s)];
            }
        }
    }
    Ok(Tensor::new(w.shape.clone(), Data::F32(out)))
}


fn mark(ctx: &mut Ctx, name: &str) {
    if let Some(s) = ctx.nchwc.as_mut() {
        s.blocked.insert(name.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocking as MLAS does it, then `unblock`, gives the weights back.
    #[test]
    fn unblock_inverts_both_layouts() {
        let (o, i, hw, b) = (16usize, 8usize, 4usize, 8usize);
        let w: Vec<f32> = (0..o * i * hw).map(|x| x as f32).collect();
        let t = Tensor::new(vec![o, i, 2, 2], Data::F32(w.clone()));
        for layout in [Layout::OIHWBiBo, Layout::OIHWBo] {
            let mut blocked = vec![0.0f32; w.len()];
            for oc in 0..o {
                for ic in 0..i {
                    for s in 0..hw {
                        blocked[layout.index(b, i, hw, oc, ic, s)] = w[(oc * i + ic) * hw + s];
                    }
                }
            }
            let back = unblock(&Tensor::new(t.shape.clone(), Data::F32(blocked)), b, layout).expect("unblock");
            assert_eq!(back, t, "{layout:?}");
        }
    }
}
