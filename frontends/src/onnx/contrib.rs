//! onnxruntime's contrib ops (`com.microsoft`) whose meaning is a short chain of standard ops:
//! they are lowered to that chain here, so the interpreter, generated code, the fusion passes
//! (one kernel per elementwise chain), autodiff and the CUDA target treat them as the standard
//! ops they are. Semantics as onnxruntime's CPU kernels compute them (tests/contrib_ops.rs
//! checks against onnxruntime).
use burnc_compiler::ops::view::{Squeeze, Unsqueeze};
use burnc_compiler::ops::matmul::MatMul;
use super::attrs::Attrs;
use super::import::{node_label, Ctx};
use super::proto::NodeProto;
use super::OnnxError;
use burnc_compiler::ir::{BinaryOp, Op, UnaryOp, ValueId};
use burnc_compiler::ops::IntoOp;
use burnc_compiler::Tensor;

/// Writes the chain of one contrib node: every intermediate gets a fresh name, the last step
/// the node's output name.
pub(super) struct Chain<'c, 'a, 'p> {
    pub(super) ctx: &'c mut Ctx<'a, 'p>,
    node: &'c NodeProto,
    /// The node's inputs, resolved.
    inputs: &'c [Option<ValueId>],
    pub(super) label: String,
}

impl<'c, 'a, 'p> Chain<'c, 'a, 'p> {
    /// The chain of `node`, whose `inputs` are resolved.
    pub(super) fn new(ctx: &'c mut Ctx<'a, 'p>, node: &'c NodeProto, inputs: &'c [Option<ValueId>]) -> Self {
        Chain { ctx, node, inputs, label: node_label(node) }
    }

    pub(super) fn err(&self, reason: impl Into<String>) -> OnnxError {
        OnnxError::Node { node: self.label.clone(), op: self.node.op_type().into(), opset: self.ctx.opset, reason: reason.into() }
    }

    /// Input `i`, which the op requires (`what` names it in the error).
    pub(super) fn input(&self, i: usize, what: &str) -> Result<ValueId, OnnxError> {
        self.inputs.get(i).copied().flatten().ok_or_else(|| self.err(format!("missing input {i} ({what})")))
    }

    pub(super) fn add(&mut self, op: Op, inputs: Vec<Option<ValueId>>, outputs: &[String]) -> Vec<ValueId> {
        let (_, outs) = self.ctx.graph.add_node(self.label.clone(), op, inputs, outputs);
        if let Some(last) = self.ctx.graph.nodes.last_mut() {
            last.source_op = Some((self.node.op_type().to_string(), self.ctx.opset));
        }
        outs
    }

    pub(super) fn step(&mut self, op: Op, inputs: &[ValueId]) -> ValueId {
        let name = self.ctx.fresh(&self.label);
        self.add(op, inputs.iter().map(|&v| Some(v)).collect(), &[name])[0]
    }

    pub(super) fn bin(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        self.step(Op::Binary(op), &[a, b])
    }

    fn un(&mut self, op: UnaryOp, a: ValueId) -> ValueId {
        self.step(Op::Unary(op), &[a])
    }

    /// Scalar `v` in the element type of `like` (a constant, then CastLike).
    fn scalar(&mut self, v: f32, like: ValueId) -> ValueId {
        let c = self.ctx.constant(&self.label, Tensor::from_f32s(vec![], vec![v]));
        self.step(burnc_compiler::ops::cast::like(true), &[c, like])
    }

    /// The static dims of `v`, or an error naming `what`.
    fn dims(&self, v: ValueId, what: &str) -> Result<Vec<usize>, OnnxError> {
        self.ctx.graph.tensor_type(v).and_then(|t| t.shape.as_ref()).and_then(|s| s.as_fixed()).ok_or_else(|| self.err(format!("{what} needs a static shape")))
    }

    /// `v` split along its last axis into `parts` equal parts, or into `sizes`.
    fn split_last_sizes(&mut self, v: ValueId, sizes: Option<Vec<i64>>, parts: usize) -> Result<Vec<ValueId>, OnnxError> {
        let names: Vec<String> = (0..parts).map(|_| self.ctx.fresh(&self.label)).collect();
        let op = burnc_compiler::ops::split::Split { axis: -1, sizes, outputs: parts }.op();
        Ok(self.add(op, vec![Some(v)], &names))
    }

    /// `v` reshaped to `dims` (0 keeps the input's dim).
    fn reshape(&mut self, v: ValueId, dims: &[i64]) -> ValueId {
        let shape = self.ctx.constant(&self.label, Tensor::from_i64s(vec![dims.len()], dims.to_vec()));
        self.step(Op::Reshape { allowzero: false }, &[v, shape])
    }

    /// The node's output 0 is `v` (an Identity keeps the chain's last step anonymous).
    pub(super) fn finish(&mut self, v: ValueId) -> Result<(), OnnxError> {
        let name = self.node.output.first().filter(|o| !o.is_empty()).ok_or_else(|| self.err("output 0 has no name"))?.clone();
        let out = self.add(Op::Unary(UnaryOp::Identity), vec![Some(v)], &[name.clone()])[0];
        self.ctx.bind(&name, out);
        Ok(())
    }
}

/// Lower contrib node `node` if it is one of these; `Ok(false)` when it is not.
pub fn lower(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<bool, OnnxError> {
    let op = node.op_type();
    let channels_last = Attrs(&node.attribute).i_or("channels_last", 0) != 0;
    if matches!(op, "NhwcConv" | "NhwcMaxPool") || (channels_last && matches!(op, "QLinearConv" | "QLinearGlobalAveragePool" | "QLinearAveragePool")) {
        nhwc(ctx, node)?;
        return Ok(true);
    }
    if op == "QLinearConv" {
        // The NCHW form is the standard op.
        super::lower::lower_node(ctx, &standard(node, "QLinearConv", 9, &["channels_last"], node.output.first().cloned().unwrap_or_default()))?;
        return Ok(true);
    }
    if matches!(op, "FusedConv" | "FusedGemm" | "FusedMatMul" | "TransposeMatMul") {
        fused(ctx, node)?;
        return Ok(true);
    }
    if matches!(op, "MatMulIntegerToFloat" | "DynamicQuantizeMatMul" | "QGemm") {
        quantized_product(ctx, node, inputs)?;
        return Ok(true);
    }
    if matches!(op, "Attention" | "MultiHeadAttention") {
        attention(ctx, node, inputs)?;
        return Ok(true);
    }
    if op == "DynamicQuantizeLSTM" {
        dynamic_quantize_lstm(ctx, node, inputs)?;
        return Ok(true);
    }
    if op == "RotaryEmbedding" {
        rotary(ctx, node, inputs)?;
        return Ok(true);
    }
    if op == "QAttention" {
        qattention(ctx, node, inputs)?;
        return Ok(true);
    }
    if op == "GroupQueryAttention" {
        group_query_attention(ctx, node, inputs)?;
        return Ok(true);
    }
    if op == "GatherBlockQuantized" {
        gather_block_quantized(ctx, node, inputs)?;
        return Ok(true);
    }
    if op == "MatMulNBits" {
        matmul_nbits(ctx, node, inputs)?;
        return Ok(true);
    }
    if op == "EmbedLayerNormalization" {
        embed_layer_norm(ctx, node, inputs)?;
        return Ok(true);
    }
    if matches!(op, "QuantizeLinear" | "DequantizeLinear" | "QLinearAdd" | "QLinearMul" | "QLinearSigmoid" | "QLinearLeakyRelu" | "QLinearGlobalAveragePool" | "QLinearAveragePool" | "QLinearConcat" | "QLinearSoftmax") {
        qlinear(ctx, node, inputs)?;
        return Ok(true);
    }
    if !matches!(op, "Gelu" | "BiasGelu" | "FastGelu" | "QuickGelu" | "BiasAdd" | "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization") {
        return Ok(false);
    }
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let x = c.input(0, "X")?;
    let y = match op {
        // Gelu(X) and BiasGelu(A, B) = Gelu(A + B): ONNX Gelu with erf.
        "Gelu" => c.un(UnaryOp::Gelu { tanh_approx: false }, x),
        "BiasGelu" => {
            let t = c.bin(BinaryOp::Add, x, c.input(1, "bias")?);
            c.un(UnaryOp::Gelu { tanh_approx: false }, t)
        }
        // FastGelu(X, bias?): ONNX Gelu's tanh approximation of X (+ bias).
        "FastGelu" => {
            let t = match inputs.get(1).copied().flatten() {
                Some(b) => c.bin(BinaryOp::Add, x, b),
                None => x,
            };
            c.un(UnaryOp::Gelu { tanh_approx: true }, t)
        }
        // QuickGelu(X; alpha = 1.702) = X · sigmoid(alpha · X).
        "QuickGelu" => {
            let alpha = c.scalar(a.f_or("alpha", 1.702), x);
            let s = c.bin(BinaryOp::Mul, x, alpha);
            let s = c.un(UnaryOp::Sigmoid, s);
            c.bin(BinaryOp::Mul, x, s)
        }
        // BiasAdd(X, bias, skip) = X + bias + skip.
        "BiasAdd" => {
            let t = c.bin(BinaryOp::Add, x, c.input(1, "bias")?);
            c.bin(BinaryOp::Add, t, c.input(2, "skip")?)
        }
        // Skip(Simplified)LayerNormalization(input, skip, gamma, [beta,] bias?): the sum
        // input + skip (+ bias) normalised over the last axis; output 3 is that sum.
        _ => {
            let simplified = op == "SkipSimplifiedLayerNormalization";
            let skip = c.input(1, "skip")?;
            let gamma = c.input(2, "gamma")?;
            let (beta, bias) = if simplified { (None, inputs.get(3).copied().flatten()) } else { (inputs.get(3).copied().flatten(), inputs.get(4).copied().flatten()) };
            let mut sum = c.bin(BinaryOp::Add, x, skip);
            if let Some(b) = bias {
                sum = c.bin(BinaryOp::Add, sum, b);
            }
            let epsilon = a.f_or("epsilon", 1e-12);
            let norm = if simplified {
                burnc_compiler::ops::norm::RmsNorm { axis: -1, epsilon }.op()
            } else {
                burnc_compiler::ops::norm::LayerNorm { axis: -1, epsilon }.op()
            };
            // Mean and inverse standard deviation, when asked for, are the normalisation's own.
            let stats: Vec<String> = (1..3).map(|i| node.output.get(i).filter(|o| !o.is_empty()).cloned().unwrap_or_default()).collect();
            let wanted = !simplified && stats.iter().any(|s| !s.is_empty());
            let out0 = node.output.first().filter(|o| !o.is_empty()).ok_or_else(|| c.err("output 0 has no name"))?.clone();
            let mut names = vec![out0];
            if wanted {
                for s in &stats {
                    names.push(if s.is_empty() { c.ctx.fresh(&c.label) } else { s.clone() });
                }
            }
            let outs = c.add(norm, vec![Some(sum), Some(gamma), beta], &names);
            for (name, v) in names.iter().zip(&outs) {
                c.ctx.bind(name, *v);
            }
            if simplified && stats.iter().any(|s| !s.is_empty()) {
                return Err(c.err("the statistics outputs of SkipSimplifiedLayerNormalization are not supported"));
            }
            if let Some(name) = node.output.get(3).filter(|o| !o.is_empty()) {
                let s = c.add(Op::Unary(UnaryOp::Identity), vec![Some(sum)], std::slice::from_ref(name))[0];
                c.ctx.bind(name, s);
            }
            return Ok(true);
        }
    };
    c.finish(y)?;
    Ok(true)
}

/// `node` as the standard op `op_type` (domain ""): its first `inputs` inputs, its attributes
/// but `drop`, one output `out`.
fn standard(node: &NodeProto, op_type: &str, inputs: usize, drop: &[&str], out: String) -> NodeProto {
    let mut n = node.clone();
    n.op_type = Some(op_type.into());
    n.domain = Some(String::new());
    n.input.truncate(inputs);
    n.attribute.retain(|a| !drop.contains(&a.name()));
    n.output = vec![out];
    n
}

/// The channels-last ops of onnxruntime's NHWC optimiser (NhwcConv, NhwcMaxPool, and
/// QLinearConv / QLinear(Global)AveragePool with `channels_last`): the 4-D input transposed to
/// NCHW, the NCHW op, its output transposed back. Weights keep the OIHW layout, as
/// onnxruntime's shape rules for these ops read them.
fn nhwc(ctx: &mut Ctx, node: &NodeProto) -> Result<(), OnnxError> {
    let mut c = Chain { ctx, node, inputs: &[], label: node_label(node) };
    let x_name = node.input.first().filter(|s| !s.is_empty()).ok_or_else(|| c.err("missing input 0"))?;
    let x = c.ctx.lookup(&c.label, x_name)?.ok_or_else(|| c.err("missing input 0"))?;
    let xt = c.step(burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 3, 1, 2]) }.op(), &[x]);
    let (xt_name, tmp) = (c.ctx.fresh(&c.label), c.ctx.fresh(&c.label));
    c.ctx.bind(&xt_name, xt);
    let mut inner = node.clone();
    inner.attribute.retain(|a| a.name() != "channels_last");
    inner.input[0] = xt_name;
    inner.output = vec![tmp.clone()];
    match node.op_type() {
        "NhwcConv" => (inner.domain, inner.op_type) = (Some(String::new()), Some("Conv".into())),
        "NhwcMaxPool" => (inner.domain, inner.op_type) = (Some(String::new()), Some("MaxPool".into())),
        "QLinearConv" => inner.domain = Some(String::new()),
        _ => {}
    }
    super::lower::lower_node(c.ctx, &inner)?;
    let y = c.ctx.lookup(&c.label, &tmp)?.ok_or_else(|| c.err("the NCHW op gave no output"))?;
    let y = c.step(burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 2, 3, 1]) }.op(), &[y]);
    c.finish(y)
}

/// FusedConv / FusedGemm (the standard op, then `Z` for FusedConv and the activation its
/// attributes name) and FusedMatMul / TransposeMatMul (`alpha · op(A) · op(B)`, op
/// transposing the last two dims): the standard op lowered as the standard op is, then the rest.
fn fused(ctx: &mut Ctx, node: &NodeProto) -> Result<(), OnnxError> {
    let op = node.op_type();
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs: &[], label: node_label(node) };
    let tmp = c.ctx.fresh(&c.label);
    let activation = a.s("activation");
    let inner = match op {
        "FusedConv" => standard(node, "Conv", 3, &["activation", "activation_params"], tmp.clone()),
        "FusedGemm" => standard(node, "Gemm", 3, &["activation", "activation_alpha", "activation_beta", "activation_gamma"], tmp.clone()),
        _ => {
            if a.i_or("transBatchA", 0) != 0 || a.i_or("transBatchB", 0) != 0 {
                return Err(c.err("transBatchA / transBatchB are not supported"));
            }
            let mut inner = standard(node, "MatMul", 2, &["alpha", "transA", "transB", "transBatchA", "transBatchB"], tmp.clone());
            for (i, attr) in [(0, "transA"), (1, "transB")] {
                if a.i_or(attr, 0) == 0 {
                    continue;
                }
                let name = inner.input.get(i).cloned().unwrap_or_default();
                let v = c.ctx.lookup(&c.label, &name)?.ok_or_else(|| c.err(format!("missing input {i}")))?;
                let rank = c.ctx.graph.tensor_type(v).and_then(|t| t.shape.as_ref()).map(|s| s.rank()).ok_or_else(|| c.err(format!("{attr} needs the rank of input {i}")))?;
                if rank < 2 {
                    continue;
                }
                let mut perm: Vec<usize> = (0..rank).collect();
                perm.swap(rank - 2, rank - 1);
                let t = c.step(burnc_compiler::ops::transpose::Transpose { perm: Some(perm) }.op(), &[v]);
                let tname = c.ctx.fresh(&c.label);
                c.ctx.bind(&tname, t);
                inner.input[i] = tname;
            }
            inner
        }
    };
    super::lower::lower_node(c.ctx, &inner)?;
    let mut y = c.ctx.lookup(&c.label, &tmp)?.ok_or_else(|| c.err("the standard op gave no output"))?;
    if op == "FusedConv" {
        if let Some(z) = node.input.get(3).filter(|s| !s.is_empty()) {
            let z = c.ctx.lookup(&c.label, z)?.ok_or_else(|| c.err("missing input 3 (Z)"))?;
            y = c.bin(BinaryOp::Add, y, z);
        }
    }
    if matches!(op, "FusedMatMul" | "TransposeMatMul") {
        let alpha = a.f_or("alpha", 1.0);
        if alpha != 1.0 {
            let k = c.scalar(alpha, y);
            y = c.bin(BinaryOp::Mul, y, k);
        }
    }
    if let Some(act) = activation {
        let params = a.floats("activation_params").unwrap_or_default();
        // FusedConv passes parameters as a list, FusedGemm as named attributes.
        let p = |i: usize, name: &str, d: f32| params.get(i).copied().or(a.f(name)).unwrap_or(d);
        y = match act.as_str() {
            "Relu" => c.un(UnaryOp::Relu, y),
            "Sigmoid" => c.un(UnaryOp::Sigmoid, y),
            "Tanh" => c.un(UnaryOp::Tanh, y),
            "LeakyRelu" => c.un(UnaryOp::LeakyRelu { alpha: p(0, "activation_alpha", 0.01) }, y),
            "HardSigmoid" => c.un(UnaryOp::HardSigmoid { alpha: p(0, "activation_alpha", 0.2), beta: p(1, "activation_beta", 0.5) }, y),
            "Clip" => {
                let (lo, hi) = (c.scalar(p(0, "activation_alpha", f32::MIN), y), c.scalar(p(1, "activation_beta", f32::MAX), y));
                let t = c.bin(BinaryOp::Max, y, lo);
                c.bin(BinaryOp::Min, t, hi)
            }
            other => return Err(c.err(format!("activation `{other}` is not supported"))),
        };
    }
    c.finish(y)
}

/// onnxruntime's quantized elementwise ops as what they mean: dequantize the inputs
/// (`DequantizeLinear`), run the float op, quantize the result (`QuantizeLinear`, round half to
/// even, saturating). onnxruntime's kernels fold the scales differently and can differ by one
/// quantization step; its own tests allow that. The `com.microsoft` Quantize/DequantizeLinear
/// are the standard ones with the same attributes.
fn qlinear(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    use burnc_compiler::ops::quant::{Dequantize, Quantize};
    let op = node.op_type();
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let opt = |i: usize| inputs.get(i).copied().flatten();
    let axis = a.i_or("axis", 1);
    let dq = |c: &mut Chain, x: ValueId, scale: ValueId, zp: Option<ValueId>, axis: i64| {
        let name = c.ctx.fresh(&c.label);
        c.add(Dequantize { axis, block_size: 0, output_dtype: None }.op(), vec![Some(x), Some(scale), zp], &[name])[0]
    };
    let q = |c: &mut Chain, y: ValueId, scale: ValueId, zp: Option<ValueId>, axis: i64| {
        let name = c.ctx.fresh(&c.label);
        c.add(Quantize { axis, block_size: 0, output_dtype: None, saturate: true }.op(), vec![Some(y), Some(scale), zp], &[name])[0]
    };
    let out = match op {
        "DequantizeLinear" => {
            let (x, s) = (c.input(0, "x")?, c.input(1, "x_scale")?);
            dq(&mut c, x, s, opt(2), axis)
        }
        "QuantizeLinear" => {
            let (x, s) = (c.input(0, "x")?, c.input(1, "y_scale")?);
            q(&mut c, x, s, opt(2), axis)
        }
        "QLinearAdd" | "QLinearMul" => {
            let (x, xs, y, ys, zs) = (c.input(0, "A")?, c.input(1, "A_scale")?, c.input(3, "B")?, c.input(4, "B_scale")?, c.input(6, "C_scale")?);
            let fx = dq(&mut c, x, xs, opt(2), 1);
            let fy = dq(&mut c, y, ys, opt(5), 1);
            let f = c.bin(if op == "QLinearAdd" { BinaryOp::Add } else { BinaryOp::Mul }, fx, fy);
            q(&mut c, f, zs, opt(7), 1)
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" | "QLinearGlobalAveragePool" => {
            let (x, xs, ys) = (c.input(0, "X")?, c.input(1, "X_scale")?, c.input(3, "Y_scale")?);
            let f = dq(&mut c, x, xs, opt(2), 1);
            let f = match op {
                "QLinearSigmoid" => c.un(UnaryOp::Sigmoid, f),
                "QLinearLeakyRelu" => c.un(UnaryOp::LeakyRelu { alpha: a.f_or("alpha", 0.01) }, f),
                _ => c.step(burnc_compiler::ops::pool::GlobalPool { kind: burnc_compiler::ir::PoolKind::Avg { count_include_pad: false } }.op(), &[f]),
            };
            q(&mut c, f, ys, opt(4), 1)
        }
        // QLinearSoftmax: Softmax of the real values; `opset` is the replaced Softmax's (before
        // 13 the input is coerced to 2-D at `axis`).
        "QLinearSoftmax" => {
            let (x, xs, ys) = (c.input(0, "X")?, c.input(1, "x_scale")?, c.input(3, "y_scale")?);
            let f = dq(&mut c, x, xs, opt(2), 1);
            // The axis defaults to -1 whatever the opset (onnxruntime's schema).
            let coerce_2d = a.i_or("opset", 13) < 13;
            let axis = a.i_or("axis", -1);
            let f = c.step(burnc_compiler::ops::softmax::Softmax { axis, log: false, coerce_2d }.op(), &[f]);
            q(&mut c, f, ys, opt(4), 1)
        }
        // QLinearAveragePool: AveragePool's attributes, lowered by AveragePool's own lowering.
        "QLinearAveragePool" => {
            let (x, xs, ys) = (c.input(0, "X")?, c.input(1, "x_scale")?, c.input(3, "y_scale")?);
            let f = dq(&mut c, x, xs, opt(2), 1);
            let (fname, tmp) = (c.ctx.fresh(&c.label), c.ctx.fresh(&c.label));
            c.ctx.bind(&fname, f);
            let mut inner = standard(node, "AveragePool", 1, &["channels_last"], tmp.clone());
            inner.input = vec![fname];
            super::lower::lower_node(c.ctx, &inner)?;
            let p = c.ctx.lookup(&c.label, &tmp)?.ok_or_else(|| c.err("AveragePool gave no output"))?;
            q(&mut c, p, ys, opt(4), 1)
        }
        // QLinearConcat(Y_scale, Y_zero_point, (X, X_scale, X_zero_point)…; axis).
        _ => {
            let (ys, yz) = (c.input(0, "Y_scale")?, opt(1));
            let rest = inputs.get(2..).unwrap_or(&[]);
            if rest.is_empty() || rest.len() % 3 != 0 {
                return Err(c.err(format!("QLinearConcat needs (X, scale, zero point) triples after Y's, got {} inputs", inputs.len())));
            }
            let mut parts = Vec::new();
            for (k, t) in rest.chunks(3).enumerate() {
                let (x, s) = (t[0].ok_or_else(|| c.err(format!("missing input X{k}")))?, t[1].ok_or_else(|| c.err(format!("missing scale of X{k}")))?);
                parts.push(dq(&mut c, x, s, t[2], 1));
            }
            let cat = c.step(Op::Concat { axis: a.i_or("axis", 0) }, &parts);
            q(&mut c, cat, ys, yz, 1)
        }
    };
    c.finish(out)
}

/// `x` dequantized (DequantizeLinear) by `scale` and `zero`: per tensor when the scale has one
/// element (a `[1]` scale is taken as the scalar it is), else along axis `axis`.
fn dequantize(c: &mut Chain, x: ValueId, scale: ValueId, zero: Option<ValueId>, axis: i64) -> Result<ValueId, OnnxError> {
    use burnc_compiler::ops::quant::Dequantize;
    let one = |c: &Chain, v: ValueId| c.ctx.graph.tensor_type(v).and_then(|t| t.shape.as_ref()).and_then(|s| s.as_fixed()).is_some_and(|d| d.len() == 1 && d[0] == 1);
    let scalar = |c: &mut Chain, v: Option<ValueId>| v.map(|v| if one(c, v) { c.reshape(v, &[]) } else { v });
    let (scale, zero) = (scalar(c, Some(scale)).unwrap_or(scale), scalar(c, zero));
    let name = c.ctx.fresh(&c.label);
    Ok(c.add(Dequantize { axis, block_size: 0, output_dtype: None }.op(), vec![Some(x), Some(scale), zero], &[name])[0])
}

/// onnxruntime's quantized products as what they compute. The first two: the operands
/// dequantized (A per tensor, B per tensor or per output column), the float product, the bias.
/// - MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?);
/// - DynamicQuantizeMatMul(A, B, b_scale, b_zero_point?, bias?): A is first quantized to
///   uint8 as DynamicQuantizeLinear does, so its rounding is onnxruntime's;
/// - QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, C?, y_scale?, y_zero_point?;
///   alpha, transA, transB): integer sums (MatMulInteger) plus C (int32 at scale
///   a_scale · b_scale, so alpha scales it too), scaled once; with y_scale quantized again.
fn quantized_product(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    let op = node.op_type();
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let opt = |i: usize| inputs.get(i).copied().flatten();
    // B's output columns are its last axis.
    let column_axis = |c: &Chain, b: ValueId| -> Result<i64, OnnxError> { Ok(c.dims(b, "B")?.len() as i64 - 1) };
    let y = match op {
        "MatMulIntegerToFloat" | "DynamicQuantizeMatMul" => {
            let (fa, b, bs, bz, bias) = if op == "MatMulIntegerToFloat" {
                let (x, xs) = (c.input(0, "A")?, c.input(2, "a_scale")?);
                (dequantize(&mut c, x, xs, opt(4), 1)?, c.input(1, "B")?, c.input(3, "b_scale")?, opt(5), opt(6))
            } else {
                let x = c.input(0, "A")?;
                let names: Vec<String> = (0..3).map(|_| c.ctx.fresh(&c.label)).collect();
                let q = c.add(burnc_compiler::ops::quant::DynamicQuantize::op(), vec![Some(x)], &names);
                (dequantize(&mut c, q[0], q[1], Some(q[2]), 1)?, c.input(1, "B")?, c.input(2, "b_scale")?, opt(3), opt(4))
            };
            let axis = column_axis(&c, b)?;
            let fb = dequantize(&mut c, b, bs, bz, axis)?;
            let y = c.step(MatMul.op(), &[fa, fb]);
            match bias {
                Some(bias) => c.bin(BinaryOp::Add, y, bias),
                None => y,
            }
        }
        _ => {
            // As onnxruntime computes it: exact int32 sums (C added to them), one f32 product
            // by `alpha · a_scale · b_scale[n] (/ y_scale)`, then rounding to nearest even and
            // saturation. A float product of the dequantized operands would round differently
            // and, where a value lands on a half, quantize to the neighbouring step.
            let (x, xs, b, bs) = (c.input(0, "A")?, c.input(1, "a_scale")?, c.input(3, "B")?, c.input(4, "b_scale")?);
            let transpose = |c: &mut Chain, v: ValueId| c.step(burnc_compiler::ops::transpose::Transpose { perm: Some(vec![1, 0]) }.op(), &[v]);
            let x = if a.i_or("transA", 0) != 0 { transpose(&mut c, x) } else { x };
            let b = if a.i_or("transB", 0) != 0 { transpose(&mut c, b) } else { b };
            // A's zero point is one value (MatMulInteger would read a [1] as one per row).
            let az = opt(2).map(|z| c.reshape(z, &[]));
            let name = c.ctx.fresh(&c.label);
            let acc = c.add(burnc_compiler::ops::integer::MatMulInteger.op(), vec![Some(x), Some(b), az, opt(5)], &[name])[0];
            let acc = match opt(6) {
                Some(bias) => c.bin(BinaryOp::Add, acc, bias),
                None => acc,
            };
            let alpha = c.scalar(a.f_or("alpha", 1.0), xs);
            let scale = c.bin(BinaryOp::Mul, alpha, xs);
            let mut scale = c.bin(BinaryOp::Mul, scale, bs);
            if let Some(ys) = opt(7) {
                scale = c.bin(BinaryOp::Div, scale, ys);
            }
            let acc = c.step(burnc_compiler::ops::cast::like(true), &[acc, scale]);
            let y = c.bin(BinaryOp::Mul, acc, scale);
            match opt(7) {
                Some(_) => {
                    // The scales are applied: quantize with scale 1 (x / 1 is exact).
                    let one = c.scalar(1.0, scale);
                    let name = c.ctx.fresh(&c.label);
                    let q = burnc_compiler::ops::quant::Quantize { axis: 1, block_size: 0, output_dtype: None, saturate: true }.op();
                    c.add(q, vec![Some(y), Some(one), opt(8)], &[name])[0]
                }
                None => y,
            }
        }
    };
    c.finish(y)
}

/// onnxruntime's attention as the standard Attention op on [batch, sequence, hidden] inputs
/// (`q_num_heads = kv_num_heads = num_heads`, `scale`, `unidirectional` as `is_causal`):
/// - Attention(input, weights, bias?, mask_index?, past?, attention_bias?): Q, K and V are the
///   columns of input · weights + bias (`qkv_hidden_sizes`, or thirds);
/// - MultiHeadAttention(query, key, value, bias?, key_padding_mask?, attention_bias?): the
///   three projections given, `bias` their three biases.
/// A mask of 1s and 0s per key ([batch, keys]) adds `mask_filter_value` where it is 0; an
/// attention bias is added as it is. Past and present key/value states, packed QKV inputs and
/// the other mask layouts are refused by name.
fn attention(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    let op = node.op_type();
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let opt = |i: usize| inputs.get(i).copied().flatten();
    let heads = a.i("num_heads").filter(|&h| h > 0).ok_or_else(|| c.err("num_heads must be given and positive"))? as usize;
    if node.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(c.err("the present key/value outputs are not supported"));
    }
    let (q, k, v, key_mask, bias) = if op == "Attention" {
        if opt(4).is_some() {
            return Err(c.err("past key/value state is not supported"));
        }
        let (x, w) = (c.input(0, "input")?, c.input(1, "weights")?);
        let mut qkv = c.step(MatMul.op(), &[x, w]);
        if let Some(b) = opt(2) {
            qkv = c.bin(BinaryOp::Add, qkv, b);
        }
        let sizes = a.ints("qkv_hidden_sizes").filter(|s| !s.is_empty());
        if sizes.as_ref().is_some_and(|s| s.len() != 3) {
            return Err(c.err("qkv_hidden_sizes must have 3 entries"));
        }
        let p = c.split_last_sizes(qkv, sizes, 3)?;
        (p[0], p[1], p[2], opt(3), opt(5))
    } else {
        if opt(6).is_some() || opt(7).is_some() {
            return Err(c.err("past key/value state is not supported"));
        }
        let (mut q, mut k, mut v) = (c.input(0, "query")?, c.input(1, "key")?, c.input(2, "value")?);
        if [q, k, v].iter().any(|&t| c.dims(t, "query, key and value").map(|d| d.len() != 3).unwrap_or(true)) {
            return Err(c.err("query, key and value must be [batch, sequence, hidden] (packed layouts are not supported)"));
        }
        if let Some(b) = opt(3) {
            let (dq, dk, dv) = (c.dims(q, "query")?[2] as i64, c.dims(k, "key")?[2] as i64, c.dims(v, "value")?[2] as i64);
            let p = c.split_last_sizes(b, Some(vec![dq, dk, dv]), 3)?;
            q = c.bin(BinaryOp::Add, q, p[0]);
            k = c.bin(BinaryOp::Add, k, p[1]);
            v = c.bin(BinaryOp::Add, v, p[2]);
        }
        (q, k, v, opt(4), opt(5))
    };
    let mut mask = bias;
    if let Some(m) = key_mask {
        let dims = c.dims(m, "the mask")?;
        if dims.len() != 2 {
            return Err(c.err(format!("a mask of shape {dims:?} is not supported (only [batch, keys] of 1s and 0s)")));
        }
        // (1 − m) · mask_filter_value, as [batch, 1, 1, keys].
        let one = c.scalar(1.0, q);
        let f = c.step(burnc_compiler::ops::cast::like(true), &[m, q]);
        let off = c.bin(BinaryOp::Sub, one, f);
        let fill = c.scalar(a.f_or("mask_filter_value", -10000.0), q);
        let add = c.bin(BinaryOp::Mul, off, fill);
        let add = c.reshape(add, &[dims[0] as i64, 1, 1, dims[1] as i64]);
        mask = Some(match mask {
            Some(b) => c.bin(BinaryOp::Add, b, add),
            None => add,
        });
    }
    let attn = burnc_compiler::ops::attention::Attention {
        is_causal: a.i_or("unidirectional", 0) != 0,
        q_num_heads: Some(heads),
        kv_num_heads: Some(heads),
        qk_matmul_output_mode: 0,
        scale: a.f("scale").filter(|&s| s != 0.0),
        softcap: 0.0,
        left_window_size: -1,
        right_window_size: -1,
    };
    let name = c.ctx.fresh(&c.label);
    let y = c.add(attn.op(), vec![Some(q), Some(k), Some(v), mask], &[name])[0];
    c.finish(y)
}

/// EmbedLayerNormalization(input_ids, segment_ids?, word_embedding, position_embedding,
/// segment_embedding?, gamma, beta, mask?, position_ids?; epsilon): the three embeddings
/// gathered and summed (positions 0, 1, … unless given), then LayerNormalization over the
/// hidden axis. Output 1 (mask_index) is each row's count of mask 1s, as int32; output 2 the
/// sum before normalisation.
fn embed_layer_norm(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let opt = |i: usize| inputs.get(i).copied().flatten();
    let (ids, words, positions, gamma, beta) = (c.input(0, "input_ids")?, c.input(2, "word_embedding")?, c.input(3, "position_embedding")?, c.input(5, "gamma")?, c.input(6, "beta")?);
    let gather = |c: &mut Chain, table: ValueId, idx: ValueId| c.step(Op::Gather { axis: 0 }, &[table, idx]);
    let mut sum = gather(&mut c, words, ids);
    let pos_ids = match opt(8) {
        Some(p) => p,
        None => {
            let seq = *c.dims(ids, "input_ids")?.last().ok_or_else(|| c.err("input_ids must be [batch, sequence]"))?;
            c.ctx.constant(&c.label, Tensor::from_i64s(vec![seq], (0..seq as i64).collect()))
        }
    };
    let pe = gather(&mut c, positions, pos_ids);
    sum = c.bin(BinaryOp::Add, sum, pe);
    if let (Some(seg), Some(table)) = (opt(1), opt(4)) {
        let se = gather(&mut c, table, seg);
        sum = c.bin(BinaryOp::Add, sum, se);
    }
    let out0 = node.output.first().filter(|o| !o.is_empty()).ok_or_else(|| c.err("output 0 has no name"))?.clone();
    let norm = burnc_compiler::ops::norm::LayerNorm { axis: -1, epsilon: a.f_or("epsilon", 1e-12) }.op();
    let y = c.add(norm, vec![Some(sum), Some(gamma), Some(beta)], std::slice::from_ref(&out0))[0];
    c.ctx.bind(&out0, y);
    if let Some(name) = node.output.get(1).filter(|o| !o.is_empty()) {
        let mask = opt(7).ok_or_else(|| c.err("mask_index is asked for without a mask"))?;
        let int32 = burnc_compiler::ops::cast::op(burnc_compiler::ir::DType::I32, true);
        let m = c.step(int32.clone(), &[mask]);
        let reduce = burnc_compiler::ops::reduce::Reduce { op: burnc_compiler::ir::ReduceOp::Sum, axes: Some(vec![1]), keepdims: false, noop_with_empty_axes: false }.op();
        let n = c.step(reduce, &[m]);
        let v = c.add(Op::Unary(UnaryOp::Identity), vec![Some(n)], std::slice::from_ref(name))[0];
        c.ctx.bind(name, v);
    }
    if let Some(name) = node.output.get(2).filter(|o| !o.is_empty()) {
        let v = c.add(Op::Unary(UnaryOp::Identity), vec![Some(sum)], std::slice::from_ref(name))[0];
        c.ctx.bind(name, v);
    }
    Ok(())
}

/// DynamicQuantizeLSTM(X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P?, W_scale,
/// W_zero_point, R_scale, R_zero_point; LSTM's attributes), as onnxruntime's dynamic quantizer
/// writes LSTMs: W and R are int8/uint8 and stored [directions, input, 4·hidden] (transposed
/// from LSTM's), with a scale and zero point per direction or per column. They are dequantized
/// and transposed, and the node is the standard LSTM over them. onnxruntime also quantizes X
/// and the hidden state to 8 bits at each step; that rounding is not reproduced (its own
/// quantization tests compare against float at rtol 1e-2, atol 0.05).
fn dynamic_quantize_lstm(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let x = c.input(0, "X")?;
    let mut names = Vec::new();
    for (q, s, z, what) in [(1, 8, 9, "W"), (2, 10, 11, "R")] {
        let (q, scale) = (c.input(q, what)?, c.input(s, &format!("{what}_scale"))?);
        let dims = c.dims(scale, &format!("{what}_scale"))?;
        // The scale (and zero point) per direction, or per direction and column.
        let shape: Vec<i64> = match dims[..] {
            [d] => vec![d as i64, 1, 1],
            [d, cols] => vec![d as i64, 1, cols as i64],
            _ => return Err(c.err(format!("{what}_scale of shape {dims:?}: expected [directions] or [directions, 4·hidden]"))),
        };
        let mut f = c.step(burnc_compiler::ops::cast::like(true), &[q, x]);
        if let Some(z) = inputs.get(z).copied().flatten() {
            let z = c.step(burnc_compiler::ops::cast::like(true), &[z, x]);
            let z = c.reshape(z, &shape);
            f = c.bin(BinaryOp::Sub, f, z);
        }
        let s = c.reshape(scale, &shape);
        let w = c.bin(BinaryOp::Mul, f, s);
        let w = c.step(burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 2, 1]) }.op(), &[w]);
        let name = c.ctx.fresh(&c.label);
        c.ctx.bind(&name, w);
        names.push(name);
    }
    let mut lstm = node.clone();
    lstm.op_type = Some("LSTM".into());
    lstm.domain = Some(String::new());
    lstm.input.truncate(8);
    lstm.input[1] = names[0].clone();
    lstm.input[2] = names[1].clone();
    super::lower::lower_node(c.ctx, &lstm)
}

/// onnxruntime's RotaryEmbedding(input, position_ids, cos_cache, sin_cache; interleaved,
/// num_heads, rotary_embedding_dim, scale) as the standard one (opset 23: X, cos_cache,
/// sin_cache, position_ids). A 3-D input without num_heads rotates whole heads: their size is
/// twice the cache's width. Positions given as one offset ([1]), packed batching and a scale
/// other than 1 are refused by name.
fn rotary(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let (x, pos, cos, sin) = (c.input(0, "input")?, c.input(1, "position_ids")?, c.input(2, "cos_cache")?, c.input(3, "sin_cache")?);
    if a.f_or("scale", 1.0) != 1.0 || a.i_or("is_packed_batching", 0) != 0 {
        return Err(c.err("scale other than 1 and packed batching are not supported"));
    }
    if c.dims(pos, "position_ids")?.len() != 2 {
        return Err(c.err("position_ids must be [batch, sequence] (an offset of shape [1] is not supported)"));
    }
    let rotary_embedding_dim = a.i_or("rotary_embedding_dim", 0).max(0) as usize;
    let mut num_heads = a.i_or("num_heads", 0).max(0) as usize;
    let xd = c.dims(x, "input")?;
    if num_heads == 0 && xd.len() == 3 {
        let half = *c.dims(cos, "cos_cache")?.last().ok_or_else(|| c.err("cos_cache must be 2-D"))?;
        if half == 0 || xd[2] % (2 * half) != 0 {
            return Err(c.err(format!("hidden size {} is not a whole number of heads of {}", xd[2], 2 * half)));
        }
        num_heads = xd[2] / (2 * half);
    }
    let op = burnc_compiler::ops::rotary::RotaryEmbedding { interleaved: a.i_or("interleaved", 0) != 0, rotary_embedding_dim, num_heads }.op();
    let y = c.step(op, &[x, cos, sin, pos]);
    c.finish(y)
}

/// MatMulNBits: the packed product op itself (`ops::nbits`), the weights staying packed in the
/// blob. `accuracy_level` lets onnxruntime compute in lower precision; burnc always sums in
/// f32, which every level allows.
fn matmul_nbits(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let attr = |name: &str| -> Result<usize, OnnxError> {
        let v = a.i(name).ok_or_else(|| c.err(format!("attribute `{name}` is required")))?;
        usize::try_from(v).map_err(|_| c.err(format!("attribute `{name}` = {v} must not be negative")))
    };
    let (k, n, block) = (attr("K")?, attr("N")?, attr("block_size")?);
    let bits = u32::try_from(a.i_or("bits", 4)).map_err(|_| c.err("attribute `bits` is out of range"))?;
    let op = burnc_compiler::ops::nbits::MatMulNBits::new(k, n, bits, block).map_err(|e| c.err(e))?;
    c.input(0, "A")?;
    c.input(1, "B")?;
    c.input(2, "scales")?;
    if inputs.get(4).copied().flatten().is_some() {
        return Err(c.err("g_idx (act-order weights) is not supported"));
    }
    let ins: Vec<Option<ValueId>> = (0..6).map(|i| inputs.get(i).copied().flatten()).collect();
    let name = c.ctx.fresh(&c.label);
    let y = c.add(op.op(), ins, &[name])[0];
    c.finish(y)
}

/// GatherBlockQuantized (embedding tables in 4- or 8-bit blocks): the rows gathered while still
/// quantized, their scales and zero points gathered alike, then the standard blocked
/// DequantizeLinear along the quantized axis, which is its definition. Only the rows a step
/// reads are ever dequantized; the table stays quantized in the blob.
fn gather_block_quantized(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    use burnc_compiler::ir::DType;
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let (data, ids, scales) = (c.input(0, "data")?, c.input(1, "indices")?, c.input(2, "scales")?);
    let zero = inputs.get(3).copied().flatten();
    let ty = |c: &Chain, v: ValueId| c.ctx.graph.tensor_type(v).map(|t| t.dtype);
    let bits = a.i_or("bits", 4);
    match (ty(&c, data), bits) {
        (Some(DType::U4 | DType::I4), 4) | (Some(DType::U8), 8) => {}
        (Some(DType::U8), 4) => return Err(c.err("uint8 data with two 4-bit values per byte is not supported (int4/uint4 data is)")),
        (t, b) => return Err(c.err(format!("data of type {} with bits = {b} is not supported", t.map_or("unknown".to_string(), |t| t.to_string())))),
    }
    let block = a.i_or("block_size", 128);
    if block < 16 || (block & (block - 1)) != 0 {
        return Err(c.err(format!("block_size {block} must be a power of two, at least 16")));
    }
    let rank = c.dims(data, "data")?.len() as i64;
    let ids_rank = c.dims(ids, "indices")?.len() as i64;
    let norm = |v: i64| if v < 0 { v + rank } else { v };
    let (g, q) = (norm(a.i_or("gather_axis", 0)), norm(a.i_or("quantize_axis", 1)));
    if !(0..rank).contains(&g) || !(0..rank).contains(&q) {
        return Err(c.err(format!("gather_axis {g} or quantize_axis {q} out of range for rank {rank}")));
    }
    if g == q {
        return Err(c.err("gathering along the quantized axis is not supported"));
    }
    // Without zero points uint8 values are centred on 128 (onnxruntime's kernel); 4-bit ones
    // on 0.
    let zero = match (zero, ty(&c, data)) {
        (None, Some(DType::U8)) => {
            let dims = c.dims(scales, "scales")?;
            let n = dims.iter().product();
            Some(c.ctx.constant(&c.label, Tensor::new(dims, burnc_compiler::tensor::Data::U8(vec![128; n]))))
        }
        (z, _) => z,
    };
    let rows = c.step(Op::Gather { axis: g }, &[data, ids]);
    let row_scales = c.step(Op::Gather { axis: g }, &[scales, ids]);
    let row_zero = zero.map(|z| c.step(Op::Gather { axis: g }, &[z, ids]));
    // The quantized axis in the gathered tensor: the indices' dims replace the gathered one.
    let axis = if q > g { q + ids_rank - 1 } else { q };
    let deq = burnc_compiler::ops::quant::Dequantize { axis, block_size: block as usize, output_dtype: None };
    let name = c.ctx.fresh(&c.label);
    let y = c.add(deq.op(), vec![Some(rows), Some(row_scales), row_zero], &[name])[0];
    c.finish(y)
}

/// GroupQueryAttention (onnxruntime-genai's decoders): queries of `num_heads` heads attend
/// keys and values of `kv_num_heads` heads, each shared by `num_heads / kv_num_heads` query
/// heads, through a KV cache. Per batch `b`, `seqlens_k[b] + 1` tokens are valid; the new
/// tokens sit after the `past_len = seqlens_k[b] + 1 - S` cached ones (0 with no past: a first
/// prompt, right-padded). `present` is the cache `max(past, total_sequence_length)` long:
/// the past up to `past_len`, the new keys after it, zeros beyond the valid length (a first
/// prompt's cache is its keys, padding included). Optional
/// rotary embedding of queries and keys at their positions (the cos/sin caches), sliding
/// window (`local_window_size`), `softcap`, `scale` (default 1/√head_size). Lowered to standard
/// ops whose sizes follow the shapes, so one lowering serves every head size.
fn group_query_attention(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    use burnc_compiler::ir::DType;
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let opt = |i: usize| inputs.get(i).copied().flatten();
    let (hq, hkv) = (a.i_or("num_heads", 0), a.i_or("kv_num_heads", 0));
    if hq <= 0 || hkv <= 0 || hq % hkv != 0 {
        return Err(c.err(format!("num_heads {hq} must be a positive multiple of kv_num_heads {hkv}")));
    }
    for (i, what) in [(9, "position_ids"), (10, "attention_bias"), (11, "head_sink")] {
        if opt(i).is_some() {
            return Err(c.err(format!("input {i} ({what}) is not supported")));
        }
    }
    if a.i_or("smooth_softmax", 0) != 0 || a.i_or("qk_output", 0) != 0 {
        return Err(c.err("smooth_softmax and qk_output are not supported"));
    }
    let q = c.input(0, "query")?;
    let (seqlens, total) = (c.input(5, "seqlens_k")?, c.input(6, "total_sequence_length")?);
    let i64s = |c: &mut Chain, v: Vec<i64>| c.ctx.constant(&c.label, Tensor::from_i64s(vec![v.len()], v));
    let i64_scalar = |c: &mut Chain, v: i64| c.ctx.constant(&c.label, Tensor::from_i64s(vec![], vec![v]));
    let bnsd = burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 2, 1, 3]) }.op();
    // [B, S, heads·D] → [B, heads, S, D]; packed QKV when key and value are absent.
    let (q4, k4, v4) = match (opt(1), opt(2)) {
        (Some(k), Some(v)) => {
            let heads = |c: &mut Chain, x: ValueId, h: i64| {
                let r = c.reshape(x, &[0, 0, h, -1]);
                c.step(bnsd.clone(), &[r])
            };
            (heads(&mut c, q, hq), heads(&mut c, k, hkv), heads(&mut c, v, hkv))
        }
        (None, None) => {
            let r = c.reshape(q, &[0, 0, hq + 2 * hkv, -1]);
            let names: Vec<String> = (0..3).map(|_| c.ctx.fresh(&c.label)).collect();
            let parts = c.add(burnc_compiler::ops::split::Split { axis: 2, sizes: Some(vec![hq, hkv, hkv]), outputs: 3 }.op(), vec![Some(r)], &names);
            (c.step(bnsd.clone(), &[parts[0]]), c.step(bnsd.clone(), &[parts[1]]), c.step(bnsd.clone(), &[parts[2]]))
        }
        _ => return Err(c.err("key and value must both be given, or both be absent (packed QKV)")),
    };
    let past = match (opt(3), opt(4)) {
        (Some(k), Some(v)) => Some((k, v)),
        (None, None) => None,
        _ => return Err(c.err("past_key and past_value must both be given or both be absent")),
    };
    // Lengths: valid tokens per batch, the new tokens' count, where they start.
    let sl = c.step(burnc_compiler::ops::cast::op(DType::I64, false), &[seqlens]);
    let one = i64s(&mut c, vec![1]);
    let sl = c.bin(BinaryOp::Add, sl, one);
    let s = c.step(burnc_compiler::ops::dim_values::Shape { start: 1, end: Some(2) }.op(), &[q]);
    let past_len = match past {
        Some(_) => c.bin(BinaryOp::Sub, sl, s),
        None => {
            let zero = i64s(&mut c, vec![0]);
            c.bin(BinaryOp::Mul, sl, zero)
        }
    };
    let zero_s = i64_scalar(&mut c, 0);
    let one_s = i64_scalar(&mut c, 1);
    let s_scalar = c.step(Squeeze { axes: Some(vec![0]) }.op(), &[s]);
    let steps = c.step(burnc_compiler::ops::range::Range.op(), &[zero_s, s_scalar, one_s]);
    let past_col = c.step(Unsqueeze { axes: Some(vec![1]) }.op(), &[past_len]);
    let pos = c.bin(BinaryOp::Add, past_col, steps); // [B, S]
    let (q4, k4) = if a.i_or("do_rotary", 0) != 0 {
        let (cos, sin) = (c.input(7, "cos_cache")?, c.input(8, "sin_cache")?);
        let op = burnc_compiler::ops::rotary::RotaryEmbedding { interleaved: a.i_or("rotary_interleaved", 0) != 0, rotary_embedding_dim: 0, num_heads: 0 }.op();
        (c.step(op.clone(), &[q4, cos, sin, pos]), c.step(op, &[k4, cos, sin, pos]))
    } else {
        (q4, k4)
    };
    // The cache: Tp = max(past, total) positions.
    let total = c.step(burnc_compiler::ops::cast::op(DType::I64, false), &[total]);
    let total = c.reshape(total, &[1]);
    let tp = match past {
        Some((pk, _)) => {
            let p = c.step(burnc_compiler::ops::dim_values::Shape { start: 2, end: Some(3) }.op(), &[pk]);
            c.bin(BinaryOp::Max, p, total)
        }
        None => total,
    };
    let tp_scalar = c.step(Squeeze { axes: Some(vec![0]) }.op(), &[tp]);
    let t = c.step(burnc_compiler::ops::range::Range.op(), &[zero_s, tp_scalar, one_s]); // [Tp]
    let t_row = c.step(Unsqueeze { axes: Some(vec![0]) }.op(), &[t]); // [1, Tp]
    let sl_col = c.step(Unsqueeze { axes: Some(vec![1]) }.op(), &[sl]);
    let is_past = c.bin(BinaryOp::Less, t_row, past_col); // [B, Tp]
    let valid = c.bin(BinaryOp::Less, t_row, sl_col);
    // Index of the new token each position holds, clipped into range for the gather.
    let idx = c.bin(BinaryOp::Sub, t_row, past_col);
    let s_minus_1 = c.bin(BinaryOp::Sub, s, one);
    let zero = i64s(&mut c, vec![0]);
    let idx = c.bin(BinaryOp::Max, idx, zero);
    let idx = c.bin(BinaryOp::Min, idx, s_minus_1);
    let to_4d = |c: &mut Chain, m: ValueId| c.step(Unsqueeze { axes: Some(vec![1, 3]) }.op(), &[m]); // [B, 1, Tp, 1]
    let (is_past4, valid4, idx4) = (to_4d(&mut c, is_past), to_4d(&mut c, valid), to_4d(&mut c, idx));
    let cache = |c: &mut Chain, new: ValueId, old: Option<ValueId>| -> Result<ValueId, OnnxError> {
        // [B, Hkv, Tp, D]: Shape(new) with Tp in place of S.
        let head = c.step(burnc_compiler::ops::dim_values::Shape { start: 0, end: Some(2) }.op(), &[new]);
        let d = c.step(burnc_compiler::ops::dim_values::Shape { start: 3, end: Some(4) }.op(), &[new]);
        let dims = c.step(Op::Concat { axis: 0 }, &[head, tp, d]);
        let wide_idx = c.step(Op::Expand, &[idx4, dims]);
        let gathered = c.step(burnc_compiler::ops::gather::GatherElements { axis: 2 }.op(), &[new, wide_idx]);
        Ok(match old {
            // A first prompt: the cache is the new keys, padding included (as onnxruntime).
            None => gathered,
            Some(old) => {
                let zero_f = c.scalar(0.0, new);
                let fresh = c.step(burnc_compiler::ops::select::op(), &[valid4, gathered, zero_f]);
                // The past padded with zeros to Tp.
                let p = c.step(burnc_compiler::ops::dim_values::Shape { start: 2, end: Some(3) }.op(), &[old]);
                let grow = c.bin(BinaryOp::Sub, tp, p);
                let zero = i64s(c, vec![0]);
                let pads = c.step(Op::Concat { axis: 0 }, &[zero, grow]);
                let axes = i64s(c, vec![2]);
                let name = c.ctx.fresh(&c.label);
                let padded = c.add(burnc_compiler::ops::pad::Pad { mode: burnc_compiler::ir::PadMode::Constant }.op(), vec![Some(old), Some(pads), None, Some(axes)], &[name])[0];
                c.step(burnc_compiler::ops::select::op(), &[is_past4, padded, fresh])
            }
        })
    };
    let present_k = cache(&mut c, k4, past.map(|p| p.0))?;
    let present_v = cache(&mut c, v4, past.map(|p| p.1))?;
    // Each kv head serves `g` query heads.
    let g = hq / hkv;
    let spread = |c: &mut Chain, x: ValueId| -> ValueId {
        if g == 1 {
            return x;
        }
        let u = c.step(Unsqueeze { axes: Some(vec![2]) }.op(), &[x]);
        let reps = i64s(c, vec![1, 1, g, 1, 1]);
        let e = c.step(Op::Expand, &[u, reps]);
        let bq = c.step(burnc_compiler::ops::dim_values::Shape { start: 0, end: Some(2) }.op(), &[q4]);
        let rest = c.step(burnc_compiler::ops::dim_values::Shape { start: 2, end: Some(4) }.op(), &[x]);
        let dims = c.step(Op::Concat { axis: 0 }, &[bq, rest]);
        c.step(Op::Reshape { allowzero: false }, &[e, dims])
    };
    let (kk, vv) = (spread(&mut c, present_k), spread(&mut c, present_v));
    let kt = c.step(burnc_compiler::ops::transpose::Transpose { perm: Some(vec![0, 1, 3, 2]) }.op(), &[kk]);
    let mut scores = c.step(MatMul.op(), &[q4, kt]);
    let scale = a.f_or("scale", 0.0);
    let scale = if scale != 0.0 {
        c.scalar(scale, scores)
    } else {
        let d = c.step(burnc_compiler::ops::dim_values::Shape { start: 3, end: Some(4) }.op(), &[q4]);
        let d = c.step(burnc_compiler::ops::cast::like(true), &[d, scores]);
        let r = c.un(UnaryOp::Sqrt, d);
        c.un(UnaryOp::Reciprocal, r)
    };
    scores = c.bin(BinaryOp::Mul, scores, scale);
    let softcap = a.f_or("softcap", 0.0);
    if softcap > 0.0 {
        let cap = c.scalar(softcap, scores);
        let x = c.bin(BinaryOp::Div, scores, cap);
        let x = c.un(UnaryOp::Tanh, x);
        scores = c.bin(BinaryOp::Mul, x, cap);
    }
    // Key t is seen by the query at position p when t <= p, t is valid, and (sliding window)
    // t > p - window.
    let pos4 = c.step(Unsqueeze { axes: Some(vec![1, 3]) }.op(), &[pos]); // [B, 1, S, 1]
    let t4 = c.step(Unsqueeze { axes: Some(vec![0, 1, 2]) }.op(), &[t]); // [1, 1, 1, Tp]
    let causal = c.bin(BinaryOp::LessOrEqual, t4, pos4);
    let sl4 = c.step(Unsqueeze { axes: Some(vec![1, 2, 3]) }.op(), &[sl]); // [B, 1, 1, 1]
    let inside = c.bin(BinaryOp::Less, t4, sl4);
    let mut seen = c.bin(BinaryOp::And, causal, inside);
    let window = a.i_or("local_window_size", -1);
    if window > 0 {
        let w = i64s(&mut c, vec![window]);
        let lo = c.bin(BinaryOp::Sub, pos4, w);
        let near = c.bin(BinaryOp::Greater, t4, lo);
        seen = c.bin(BinaryOp::And, seen, near);
    }
    let lowest = c.scalar(f32::MIN, scores);
    scores = c.step(burnc_compiler::ops::select::op(), &[seen, scores, lowest]);
    let probs = c.step(burnc_compiler::ops::softmax::Softmax::last().op(), &[scores]);
    let o = c.step(MatMul.op(), &[probs, vv]);
    let o = c.step(bnsd, &[o]);
    let o = c.reshape(o, &[0, 0, -1]);
    for (k, v) in [(1, present_k), (2, present_v)] {
        if let Some(name) = node.output.get(k).filter(|n| !n.is_empty()) {
            let out = c.add(Op::Unary(UnaryOp::Identity), vec![Some(v)], &[name.clone()])[0];
            c.ctx.bind(name, out);
        }
    }
    c.finish(o)
}

/// QAttention (onnxruntime's int8 BERT attention): input and weights dequantized (per-tensor
/// input, per-tensor or per-column weight scales and zero points), then Attention as above.
/// onnxruntime multiplies the 8-bit values in integers and scales the i32 sums once; in real
/// arithmetic that is the same product.
fn qattention(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<(), OnnxError> {
    use burnc_compiler::ops::quant::Dequantize;
    let mut c = Chain { ctx, node, inputs, label: node_label(node) };
    let opt = |i: usize| inputs.get(i).copied().flatten();
    if opt(8).is_some() {
        return Err(c.err("past state is not supported"));
    }
    let (x, w, xs, ws) = (c.input(0, "input")?, c.input(1, "weight")?, c.input(3, "input_scale")?, c.input(4, "weight_scale")?);
    let dq = |c: &mut Chain, v: ValueId, s: ValueId, zp: Option<ValueId>, axis: i64| {
        let name = c.ctx.fresh(&c.label);
        c.add(Dequantize { axis, block_size: 0, output_dtype: None }.op(), vec![Some(v), Some(s), zp], &[name])[0]
    };
    let xf = dq(&mut c, x, xs, opt(6), 1);
    // Per-column weight parameters run along the weight's last axis.
    let wf = dq(&mut c, w, ws, opt(7), 1);
    let mut inner = node.clone();
    inner.op_type = Some("Attention".into());
    let ins = vec![Some(xf), Some(wf), opt(2), opt(5)];
    attention(c.ctx, &inner, &ins)
}
