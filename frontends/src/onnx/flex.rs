//! FlexAttention (ai.onnx.preview): lowered to core ops as its ONNX function body does — Q and
//! K scaled by √scale in the input type, GQA by repeating K/V heads, scores cast to the
//! softmax precision, the `score_mod` / `prob_mod` subgraphs spliced in around Softmax, P·V in
//! the softmax precision, cast back to V's type.
use burnc_compiler::ops::view::Unsqueeze;
use burnc_compiler::ops::matmul::MatMul;
use super::attrs::Attrs;
use super::import::{node_label, Ctx};
use super::proto::{GraphProto, NodeProto};
use super::{lower, tensor, OnnxError};
use burnc_compiler::ir::{BinaryOp, DType, Op, UnaryOp, ValueId};
use burnc_compiler::ops::IntoOp;
use burnc_compiler::Tensor;
use std::collections::HashSet;

struct B<'n> {
    node: &'n NodeProto,
    label: String,
    opset: i64,
}

impl B<'_> {
    fn err(&self, reason: impl Into<String>) -> OnnxError {
        OnnxError::Node { node: self.label.clone(), op: self.node.op_type().into(), opset: self.opset, reason: reason.into() }
    }

    /// One core node with a fresh output name (or `name`).
    fn add(&self, ctx: &mut Ctx, op: Op, inputs: &[ValueId], name: Option<&str>) -> ValueId {
        let name = name.map_or_else(|| ctx.fresh(&self.label), str::to_string);
        let (_, outs) = ctx.graph.add_node(self.label.clone(), op, inputs.iter().map(|&v| Some(v)).collect(), &[name]);
        if let Some(last) = ctx.graph.nodes.last_mut() {
            last.source_op = Some(("FlexAttention".into(), self.opset));
        }
        outs[0]
    }

    fn shape(&self, ctx: &mut Ctx, x: ValueId, start: i64, end: i64) -> ValueId {
        self.add(ctx, burnc_compiler::ops::dim_values::Shape { start, end: Some(end) }.op(), &[x], None)
    }

    /// `x` `[b, h_kv, s, d]` with each head repeated `h_q / h_kv` times in place.
    fn repeat_heads(&self, ctx: &mut Ctx, x: ValueId, q: ValueId) -> ValueId {
        let (b, hkv, sd, hq) = (self.shape(ctx, x, 0, 1), self.shape(ctx, x, 1, 2), self.shape(ctx, x, 2, 4), self.shape(ctx, q, 1, 2));
        let rep = self.add(ctx, Op::Binary(BinaryOp::Div), &[hq, hkv], None);
        let un = self.add(ctx, Unsqueeze { axes: Some(vec![2]) }.op(), &[x], None);
        let eshape = self.add(ctx, Op::Concat { axis: 0 }, &[b, hkv, rep, sd], None);
        let ex = self.add(ctx, Op::Expand, &[un, eshape], None);
        let rshape = self.add(ctx, Op::Concat { axis: 0 }, &[b, hq, sd], None);
        self.add(ctx, Op::Reshape { allowzero: false }, &[ex, rshape], None)
    }

    /// Lower the one-input, one-output subgraph `g` applied to `x`, its names prefixed so they
    /// cannot meet the enclosing graph's; names it does not define are the enclosing graph's.
    fn splice(&self, ctx: &mut Ctx, g: &GraphProto, x: ValueId, what: &str) -> Result<ValueId, OnnxError> {
        let (Some(input), Some(output), 1, 1) = (g.input.first(), g.output.first(), g.input.len(), g.output.len()) else {
            return Err(self.err(format!("{what} must have one input and one output")));
        };
        if g.node.iter().any(|n| n.attribute.iter().any(|a| a.g.is_some() || !a.graphs.is_empty())) {
            return Err(self.err(format!("{what}: nested subgraphs are not supported")));
        }
        if !g.sparse_initializer.is_empty() {
            return Err(self.err(format!("{what}: sparse initializers are not supported")));
        }
        let prefix = ctx.fresh(&format!("{}/{what}", self.label));
        let local: HashSet<&str> =
            g.initializer.iter().map(|t| t.name()).chain([input.name()]).chain(g.node.iter().flat_map(|n| n.output.iter().map(String::as_str))).collect();
        let rename = |s: &str| if !s.is_empty() && local.contains(s) { format!("{prefix}/{s}") } else { s.to_string() };
        ctx.bind(&rename(input.name()), x);
        for init in &g.initializer {
            let name = rename(init.name());
            let v = ctx.graph.add_const(name.clone(), tensor::to_tensor(init, ctx.model_dir)?);
            ctx.bind(&name, v);
        }
        for node in &g.node {
            let mut nd = node.clone();
            nd.input = node.input.iter().map(|s| rename(s)).collect();
            nd.output = node.output.iter().map(|s| rename(s)).collect();
            lower::lower_node(ctx, &nd)?;
        }
        ctx.lookup(&self.label, &rename(output.name()))?.ok_or_else(|| self.err(format!("{what} has an empty output")))
    }
}

/// Element type of `v`: declared, or found by running inference over the graph so far.
fn dtype_of(ctx: &Ctx, v: ValueId) -> Option<DType> {
    if let Some(t) = ctx.graph.tensor_type(v) {
        return Some(t.dtype);
    }
    let mut g = ctx.graph.clone();
    burnc_compiler::passes::infer::infer(&mut g).ok()?;
    g.tensor_type(v).map(|t| t.dtype)
}

pub fn lower(ctx: &mut Ctx, node: &NodeProto) -> Result<(), OnnxError> {
    let b = B { node, label: node_label(node), opset: ctx.opset };
    let a = Attrs(&node.attribute);
    let mut ins = Vec::with_capacity(3);
    for i in 0..3 {
        let name = node.input.get(i).map(String::as_str).unwrap_or("");
        ins.push(ctx.lookup(&b.label, name)?.ok_or_else(|| b.err(format!("missing input #{i}")))?);
    }
    let (q, k, v) = (ins[0], ins[1], ins[2]);
    let out_name = node.output.first().filter(|o| !o.is_empty()).cloned().ok_or_else(|| b.err("no output"))?;
    // Softmax precision: the attribute, else f64 for f64 inputs and f32 otherwise.
    let work = match a.i("softmax_precision") {
        Some(code) => DType::from_onnx_code(code as i32)
            .filter(|d| matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64))
            .ok_or_else(|| b.err(format!("softmax_precision {code} is not a float type")))?,
        None => match dtype_of(ctx, q) {
            Some(DType::F64) => DType::F64,
            Some(_) => DType::F32,
            None => return Err(b.err("Q's element type is unknown at load; set softmax_precision")),
        },
    };
    // √scale, in f32 (the default 1/√head_size from Q's shape), then in Q's type.
    let s32 = match a.f("scale") {
        Some(s) => ctx.constant(&b.label, Tensor::from_f32s(vec![1], vec![s.sqrt()])),
        None => {
            let e = b.shape(ctx, q, 3, 4);
            let e = b.add(ctx, burnc_compiler::ops::cast::op(DType::F64, true), &[e], None);
            let e = b.add(ctx, Op::Unary(UnaryOp::Sqrt), &[e], None);
            let e = b.add(ctx, Op::Unary(UnaryOp::Reciprocal), &[e], None);
            let e = b.add(ctx, burnc_compiler::ops::cast::op(DType::F32, true), &[e], None);
            b.add(ctx, Op::Unary(UnaryOp::Sqrt), &[e], None)
        }
    };
    let s = b.add(ctx, burnc_compiler::ops::cast::like(true), &[s32, q], None);
    let (ka, va) = (b.repeat_heads(ctx, k, q), b.repeat_heads(ctx, v, q));
    let qs = b.add(ctx, Op::Binary(BinaryOp::Mul), &[q, s], None);
    let ks = b.add(ctx, Op::Binary(BinaryOp::Mul), &[ka, s], None);
    let kt = b.add(ctx, burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 1, 3, 2]) }.op(), &[ks], None);
    let scores = b.add(ctx, MatMul.op(), &[qs, kt], None);
    let cast = burnc_compiler::ops::cast::op(work, true);
    let mut scores = b.add(ctx, cast.clone(), &[scores], None);
    if let Some(g) = a.g("score_mod") {
        let y = b.splice(ctx, g, scores, "score_mod")?;
        scores = b.add(ctx, cast.clone(), &[y], None);
    }
    let mut probs = b.add(ctx, burnc_compiler::ops::softmax::Softmax::last().op(), &[scores], None);
    if let Some(g) = a.g("prob_mod") {
        let y = b.splice(ctx, g, probs, "prob_mod")?;
        probs = b.add(ctx, cast.clone(), &[y], None);
    }
    let vw = b.add(ctx, cast, &[va], None);
    let y = b.add(ctx, MatMul.op(), &[probs, vw], None);
    let y = b.add(ctx, burnc_compiler::ops::cast::like(true), &[y, v], Some(&out_name));
    ctx.bind(&out_name, y);
    Ok(())
}
