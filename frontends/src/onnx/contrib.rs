//! onnxruntime's contrib ops (`com.microsoft`) whose meaning is a short chain of standard ops:
//! they are lowered to that chain here, so the interpreter, generated code, the fusion passes
//! (one kernel per elementwise chain), autodiff and the CUDA target treat them as the standard
//! ops they are. Semantics as onnxruntime's CPU kernels compute them (tests/contrib_ops.rs
//! checks against onnxruntime).
use super::attrs::Attrs;
use super::import::{node_label, Ctx};
use super::proto::NodeProto;
use super::OnnxError;
use burnc_compiler::ir::{BinaryOp, Op, UnaryOp, ValueId};
use burnc_compiler::Tensor;

/// Writes the chain of one contrib node: every intermediate gets a fresh name, the last step
/// the node's output name.
struct Chain<'c, 'a, 'p> {
    ctx: &'c mut Ctx<'a, 'p>,
    node: &'c NodeProto,
    label: String,
}

impl Chain<'_, '_, '_> {
    fn err(&self, reason: impl Into<String>) -> OnnxError {
        OnnxError::Node { node: self.label.clone(), op: self.node.op_type().into(), opset: self.ctx.opset, reason: reason.into() }
    }

    fn add(&mut self, op: Op, inputs: Vec<Option<ValueId>>, outputs: &[String]) -> Vec<ValueId> {
        let (_, outs) = self.ctx.graph.add_node(self.label.clone(), op, inputs, outputs);
        if let Some(last) = self.ctx.graph.nodes.last_mut() {
            last.source_op = Some((self.node.op_type().to_string(), self.ctx.opset));
        }
        outs
    }

    fn step(&mut self, op: Op, inputs: &[ValueId]) -> ValueId {
        let name = self.ctx.fresh(&self.label);
        self.add(op, inputs.iter().map(|&v| Some(v)).collect(), &[name])[0]
    }

    fn bin(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
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

    /// The node's output 0 is `v` (an Identity keeps the chain's last step anonymous).
    fn finish(&mut self, v: ValueId) -> Result<(), OnnxError> {
        let name = self.node.output.first().filter(|o| !o.is_empty()).ok_or_else(|| self.err("output 0 has no name"))?.clone();
        let out = self.add(Op::Unary(UnaryOp::Identity), vec![Some(v)], &[name.clone()])[0];
        self.ctx.bind(&name, out);
        Ok(())
    }
}

/// Lower contrib node `node` if it is one of these; `Ok(false)` when it is not.
pub fn lower(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<bool, OnnxError> {
    let op = node.op_type();
    if matches!(op, "FusedConv" | "FusedGemm" | "FusedMatMul" | "TransposeMatMul") {
        fused(ctx, node)?;
        return Ok(true);
    }
    if matches!(op, "QuantizeLinear" | "DequantizeLinear" | "QLinearAdd" | "QLinearMul" | "QLinearSigmoid" | "QLinearLeakyRelu" | "QLinearGlobalAveragePool" | "QLinearAveragePool" | "QLinearConcat") {
        qlinear(ctx, node, inputs)?;
        return Ok(true);
    }
    if !matches!(op, "Gelu" | "BiasGelu" | "FastGelu" | "QuickGelu" | "BiasAdd" | "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization") {
        return Ok(false);
    }
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, label: node_label(node) };
    let input = |c: &Chain, i: usize, what: &str| inputs.get(i).copied().flatten().ok_or_else(|| c.err(format!("missing input {i} ({what})")));
    let x = input(&c, 0, "X")?;
    let y = match op {
        // Gelu(X) and BiasGelu(A, B) = Gelu(A + B): ONNX Gelu with erf.
        "Gelu" => c.un(UnaryOp::Gelu { tanh_approx: false }, x),
        "BiasGelu" => {
            let t = c.bin(BinaryOp::Add, x, input(&c, 1, "bias")?);
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
            let t = c.bin(BinaryOp::Add, x, input(&c, 1, "bias")?);
            c.bin(BinaryOp::Add, t, input(&c, 2, "skip")?)
        }
        // Skip(Simplified)LayerNormalization(input, skip, gamma, [beta,] bias?): the sum
        // input + skip (+ bias) normalised over the last axis; output 3 is that sum.
        _ => {
            let simplified = op == "SkipSimplifiedLayerNormalization";
            let skip = input(&c, 1, "skip")?;
            let gamma = input(&c, 2, "gamma")?;
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

/// FusedConv / FusedGemm (the standard op, then `Z` for FusedConv and the activation its
/// attributes name) and FusedMatMul / TransposeMatMul (`alpha · op(A) · op(B)`, op
/// transposing the last two dims): the standard op lowered as the standard op is, then the rest.
fn fused(ctx: &mut Ctx, node: &NodeProto) -> Result<(), OnnxError> {
    let op = node.op_type();
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, label: node_label(node) };
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
                let t = c.step(Op::Transpose { perm: Some(perm) }, &[v]);
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
    let mut c = Chain { ctx, node, label: node_label(node) };
    let input = |c: &Chain, i: usize, what: &str| inputs.get(i).copied().flatten().ok_or_else(|| c.err(format!("missing input {i} ({what})")));
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
            let (x, s) = (input(&c, 0, "x")?, input(&c, 1, "x_scale")?);
            dq(&mut c, x, s, opt(2), axis)
        }
        "QuantizeLinear" => {
            let (x, s) = (input(&c, 0, "x")?, input(&c, 1, "y_scale")?);
            q(&mut c, x, s, opt(2), axis)
        }
        "QLinearAdd" | "QLinearMul" => {
            let (x, xs, y, ys, zs) = (input(&c, 0, "A")?, input(&c, 1, "A_scale")?, input(&c, 3, "B")?, input(&c, 4, "B_scale")?, input(&c, 6, "C_scale")?);
            let fx = dq(&mut c, x, xs, opt(2), 1);
            let fy = dq(&mut c, y, ys, opt(5), 1);
            let f = c.bin(if op == "QLinearAdd" { BinaryOp::Add } else { BinaryOp::Mul }, fx, fy);
            q(&mut c, f, zs, opt(7), 1)
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" | "QLinearGlobalAveragePool" => {
            let (x, xs, ys) = (input(&c, 0, "X")?, input(&c, 1, "X_scale")?, input(&c, 3, "Y_scale")?);
            if op == "QLinearGlobalAveragePool" && a.i_or("channels_last", 0) != 0 {
                return Err(c.err("channels_last QLinearGlobalAveragePool is not supported"));
            }
            let f = dq(&mut c, x, xs, opt(2), 1);
            let f = match op {
                "QLinearSigmoid" => c.un(UnaryOp::Sigmoid, f),
                "QLinearLeakyRelu" => c.un(UnaryOp::LeakyRelu { alpha: a.f_or("alpha", 0.01) }, f),
                _ => c.step(Op::GlobalPool { kind: burnc_compiler::ir::PoolKind::Avg { count_include_pad: false } }, &[f]),
            };
            q(&mut c, f, ys, opt(4), 1)
        }
        // QLinearAveragePool: AveragePool's attributes, lowered by AveragePool's own lowering.
        "QLinearAveragePool" => {
            let (x, xs, ys) = (input(&c, 0, "X")?, input(&c, 1, "x_scale")?, input(&c, 3, "y_scale")?);
            if a.i_or("channels_last", 0) != 0 {
                return Err(c.err("channels_last QLinearAveragePool is not supported"));
            }
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
            let (ys, yz) = (input(&c, 0, "Y_scale")?, opt(1));
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
