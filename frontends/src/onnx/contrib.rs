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

    /// `0.5 · t · (1 + erf(t / √2))`.
    fn gelu(&mut self, t: ValueId) -> ValueId {
        let r2 = self.scalar(std::f32::consts::SQRT_2, t);
        let (half, one) = (self.scalar(0.5, t), self.scalar(1.0, t));
        let s = self.bin(BinaryOp::Div, t, r2);
        let e = self.un(UnaryOp::Erf, s);
        let e = self.bin(BinaryOp::Add, e, one);
        let h = self.bin(BinaryOp::Mul, t, half);
        self.bin(BinaryOp::Mul, h, e)
    }
}

/// Lower contrib node `node` if it is one of these; `Ok(false)` when it is not.
pub fn lower(ctx: &mut Ctx, node: &NodeProto, inputs: &[Option<ValueId>]) -> Result<bool, OnnxError> {
    let op = node.op_type();
    if !matches!(op, "Gelu" | "BiasGelu" | "FastGelu" | "QuickGelu" | "BiasAdd" | "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization") {
        return Ok(false);
    }
    let a = Attrs(&node.attribute);
    let mut c = Chain { ctx, node, label: node_label(node) };
    let input = |c: &Chain, i: usize, what: &str| inputs.get(i).copied().flatten().ok_or_else(|| c.err(format!("missing input {i} ({what})")));
    let x = input(&c, 0, "X")?;
    let y = match op {
        // Gelu(X) and BiasGelu(A, B) = Gelu(A + B), with erf.
        "Gelu" => c.gelu(x),
        "BiasGelu" => {
            let t = c.bin(BinaryOp::Add, x, input(&c, 1, "bias")?);
            c.gelu(t)
        }
        // FastGelu(X, bias?): the tanh approximation, 0.5·t·(1 + tanh(√(2/π)·(t + 0.044715·t³))).
        "FastGelu" => {
            let t = match inputs.get(1).copied().flatten() {
                Some(b) => c.bin(BinaryOp::Add, x, b),
                None => x,
            };
            let (k, cube, half, one) = (c.scalar(0.797_884_6, t), c.scalar(0.044_715, t), c.scalar(0.5, t), c.scalar(1.0, t));
            let t2 = c.bin(BinaryOp::Mul, t, t);
            let t3 = c.bin(BinaryOp::Mul, t2, t);
            let s = c.bin(BinaryOp::Mul, t3, cube);
            let s = c.bin(BinaryOp::Add, t, s);
            let s = c.bin(BinaryOp::Mul, s, k);
            let th = c.un(UnaryOp::Tanh, s);
            let th = c.bin(BinaryOp::Add, th, one);
            let h = c.bin(BinaryOp::Mul, t, half);
            c.bin(BinaryOp::Mul, h, th)
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
