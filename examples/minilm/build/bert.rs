//! all-MiniLM-L6-v2 (a BERT encoder) as a burnc IR graph, built op by op.
//!
//! This is what `#[model]` will write for us once the macro lands: the same ops in the same
//! order, so this module can be swapped for a `#[model] impl MiniLm { fn forward(..) }` without
//! touching main.rs (inputs, output and their shapes stay). Until then it is plain Rust calling
//! `Graph::add_node`.
//!
//! The graph, for `B` sentences of `L` tokens (T = B·L rows, hidden 384, 12 heads of 32):
//!
//! ```text
//! x = LayerNorm(word_emb[input_ids] + pos_emb[0..L] + type_emb[token_type_ids])   [T, 384]
//! bias = (1 - attention_mask) · f32::MIN                                          [B, 1, 1, L]
//! 6 × { q, k, v = x·Wᵀ + b (reshaped to heads)
//!       ctx = softmax(q·kᵀ / √32 + bias)·v  (heads merged)
//!       x = LayerNorm(x + ctx·Woᵀ + bo)
//!       x = LayerNorm(x + gelu_erf(x·W1ᵀ + b1)·W2ᵀ + b2) }
//! e = Σ_l x[b, l]·mask[b, l] / max(Σ_l mask[b, l], 1e-9)                           [B, 384]
//! embeddings = e / max(‖e‖₂, 1e-12)
//! ```
//!
//! Parameters are `ValueKind::Param`s whose bytes are slices of the memory-mapped
//! model.safetensors (no copy); keys are the Hugging Face `BertModel` names.
use burnc::compiler::ir::{
    BinaryOp, DType, Graph, Op, Param, ReduceOp, Shape, TensorType, UnaryOp, ValueId, ValueKind, ValueType,
};
use burnc::compiler::Tensor;
use burnc::frontends::safetensors::SafeTensors;

/// The hyper-parameters of config.json that shape the graph.
pub struct Config {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub layer_norm_eps: f32,
}

/// all-MiniLM-L6-v2.
pub const MINILM_L6: Config = Config { layers: 6, hidden: 384, heads: 12, intermediate: 1536, layer_norm_eps: 1e-12 };

/// A graph under construction plus the weights file its parameters come from.
struct Builder<'a> {
    g: Graph,
    w: &'a SafeTensors,
    count: usize,
}

impl<'a> Builder<'a> {
    fn fresh(&mut self, what: &str) -> String {
        self.count += 1;
        format!("{what}_{}", self.count)
    }

    fn input(&mut self, name: &str, dtype: DType, dims: &[usize]) -> ValueId {
        let ty = ValueType::Tensor(TensorType { dtype, shape: Some(Shape::fixed(dims)) });
        let v = self.g.add_value(name, ty, ValueKind::Input);
        self.g.inputs.push(v);
        v
    }

    /// The weights-file tensor `key` as a parameter, checked against the expected shape.
    fn param(&mut self, key: &str, dims: &[usize]) -> Result<ValueId, String> {
        let t = self.w.tensors.get(key).ok_or_else(|| format!("model.safetensors has no tensor `{key}`"))?;
        if t.dtype != DType::F32 || t.shape != dims {
            return Err(format!("`{key}` is {} {:?}, expected f32 {dims:?}", t.dtype, t.shape));
        }
        let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(dims)) });
        let p = Param { dtype: DType::F32, shape: dims.to_vec(), bytes: t.bytes.clone() };
        Ok(self.g.add_value(key, ty, ValueKind::Param(p)))
    }

    fn node(&mut self, what: &str, op: Op, inputs: &[ValueId]) -> ValueId {
        let name = self.fresh(what);
        let (_, outs) = self.g.add_node(name.clone(), op, inputs.iter().map(|&v| Some(v)).collect(), &[name]);
        outs[0]
    }

    fn scalar(&mut self, v: f32) -> ValueId {
        let name = self.fresh("const");
        self.g.add_const(name, Tensor::from_f32s(vec![], vec![v]))
    }

    fn ints(&mut self, v: &[i64]) -> ValueId {
        let name = self.fresh("const");
        self.g.add_const(name, Tensor::from_i64s(vec![v.len()], v.to_vec()))
    }

    fn bin(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        self.node(&format!("{op:?}").to_lowercase(), Op::Binary(op), &[a, b])
    }

    fn reshape(&mut self, x: ValueId, dims: &[usize]) -> ValueId {
        let s = self.ints(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>());
        self.node("reshape", Op::Reshape { allowzero: false }, &[x, s])
    }

    fn transpose(&mut self, x: ValueId, perm: &[usize]) -> ValueId {
        self.node("transpose", Op::Transpose { perm: Some(perm.to_vec()) }, &[x])
    }

    fn reduce(&mut self, op: ReduceOp, x: ValueId, axis: i64, keepdims: bool) -> ValueId {
        self.node("reduce", Op::Reduce { op, axes: Some(vec![axis]), keepdims, noop_with_empty_axes: false }, &[x])
    }

    /// `x·Wᵀ + b` for x [rows, in] and the PyTorch `nn.Linear` layout W [out, in].
    fn linear(&mut self, x: ValueId, prefix: &str, d_in: usize, d_out: usize) -> Result<ValueId, String> {
        let w = self.param(&format!("{prefix}.weight"), &[d_out, d_in])?;
        let b = self.param(&format!("{prefix}.bias"), &[d_out])?;
        let name = self.fresh("linear");
        let op = Op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true };
        let (_, outs) = self.g.add_node(name.clone(), op, vec![Some(x), Some(w), Some(b)], &[name]);
        Ok(outs[0])
    }

    /// LayerNorm over the last axis with the parameters `{prefix}.weight` / `{prefix}.bias`.
    fn layer_norm(&mut self, x: ValueId, prefix: &str, width: usize, eps: f32) -> Result<ValueId, String> {
        let s = self.param(&format!("{prefix}.weight"), &[width])?;
        let b = self.param(&format!("{prefix}.bias"), &[width])?;
        Ok(self.node("layer_norm", Op::LayerNorm { axis: -1, epsilon: eps }, &[x, s, b]))
    }
}

/// Build the sentence-embedding graph for `batch` sentences of `seq` tokens. Inputs:
/// `input_ids`, `attention_mask`, `token_type_ids` (i64 [batch, seq]); output: `embeddings`
/// (f32 [batch, hidden], L2-normalised; all zeros for a row whose mask is all zeros).
pub fn build(w: &SafeTensors, cfg: &Config, batch: usize, seq: usize) -> Result<Graph, String> {
    let (h, heads) = (cfg.hidden, cfg.heads);
    let dh = h / heads;
    let t = batch * seq;
    let mut b = Builder { g: Graph { name: "all-MiniLM-L6-v2".into(), ..Graph::default() }, w, count: 0 };

    let ids = b.input("input_ids", DType::I64, &[batch, seq]);
    let mask = b.input("attention_mask", DType::I64, &[batch, seq]);
    let types = b.input("token_type_ids", DType::I64, &[batch, seq]);

    // Embeddings: three lookups (position ids are 0..seq, a constant) summed, then LayerNorm.
    let word_emb = b.param("embeddings.word_embeddings.weight", &[30522, h])?;
    let pos_emb = b.param("embeddings.position_embeddings.weight", &[512, h])?;
    let type_emb = b.param("embeddings.token_type_embeddings.weight", &[2, h])?;
    if seq > 512 {
        return Err(format!("sequence length {seq} is over the model's 512 positions"));
    }
    let positions = b.ints(&(0..seq as i64).collect::<Vec<_>>());
    let e_word = b.node("word_embeddings", Op::Gather { axis: 0 }, &[word_emb, ids]);
    let e_pos = b.node("position_embeddings", Op::Gather { axis: 0 }, &[pos_emb, positions]);
    let e_type = b.node("token_type_embeddings", Op::Gather { axis: 0 }, &[type_emb, types]);
    let e = b.bin(BinaryOp::Add, e_word, e_pos);
    let e = b.bin(BinaryOp::Add, e, e_type);
    let e = b.reshape(e, &[t, h]);
    let mut x = b.layer_norm(e, "embeddings.LayerNorm", h, cfg.layer_norm_eps)?;

    // Additive attention mask, as Hugging Face builds it: 0 where attended, f32::MIN on padding.
    let mask_f = b.node("mask_f32", Op::Cast { to: DType::F32, saturate: false }, &[mask]);
    let one = b.scalar(1.0);
    let inv = b.bin(BinaryOp::Sub, one, mask_f);
    let big = b.scalar(f32::MIN);
    let bias = b.bin(BinaryOp::Mul, inv, big);
    let bias = b.reshape(bias, &[batch, 1, 1, seq]);
    let scale = b.scalar((dh as f32).sqrt());

    for layer in 0..cfg.layers {
        let p = format!("encoder.layer.{layer}");
        // Self-attention: heads as [batch, heads, seq, dh].
        let q = b.linear(x, &format!("{p}.attention.self.query"), h, h)?;
        let k = b.linear(x, &format!("{p}.attention.self.key"), h, h)?;
        let v = b.linear(x, &format!("{p}.attention.self.value"), h, h)?;
        let q = b.reshape(q, &[batch, seq, heads, dh]);
        let q = b.transpose(q, &[0, 2, 1, 3]);
        let k = b.reshape(k, &[batch, seq, heads, dh]);
        let kt = b.transpose(k, &[0, 2, 3, 1]);
        let v = b.reshape(v, &[batch, seq, heads, dh]);
        let v = b.transpose(v, &[0, 2, 1, 3]);
        let s = b.node("scores", Op::MatMul, &[q, kt]);
        let s = b.bin(BinaryOp::Div, s, scale);
        let s = b.bin(BinaryOp::Add, s, bias);
        let pr = b.node("softmax", Op::Softmax { axis: -1, log: false, coerce_2d: false }, &[s]);
        let ctx = b.node("context", Op::MatMul, &[pr, v]);
        let ctx = b.transpose(ctx, &[0, 2, 1, 3]);
        let ctx = b.reshape(ctx, &[t, h]);
        let a = b.linear(ctx, &format!("{p}.attention.output.dense"), h, h)?;
        let a = b.bin(BinaryOp::Add, a, x);
        x = b.layer_norm(a, &format!("{p}.attention.output.LayerNorm"), h, cfg.layer_norm_eps)?;
        // Feed-forward with the exact (erf) GELU.
        let f = b.linear(x, &format!("{p}.intermediate.dense"), h, cfg.intermediate)?;
        let f = b.node("gelu", Op::Unary(UnaryOp::Gelu { tanh_approx: false }), &[f]);
        let f = b.linear(f, &format!("{p}.output.dense"), cfg.intermediate, h)?;
        let f = b.bin(BinaryOp::Add, f, x);
        x = b.layer_norm(f, &format!("{p}.output.LayerNorm"), h, cfg.layer_norm_eps)?;
    }

    // Mean pooling over the tokens the mask keeps (sentence-transformers' Pooling layer).
    let x3 = b.reshape(x, &[batch, seq, h]);
    let m3 = b.reshape(mask_f, &[batch, seq, 1]);
    let xm = b.bin(BinaryOp::Mul, x3, m3);
    let sum = b.reduce(ReduceOp::Sum, xm, 1, false);
    let count = b.reduce(ReduceOp::Sum, mask_f, 1, true);
    let tiny = b.scalar(1e-9);
    let count = b.bin(BinaryOp::Max, count, tiny);
    let mean = b.bin(BinaryOp::Div, sum, count);
    // L2 normalisation (torch.nn.functional.normalize: x / max(‖x‖, 1e-12)).
    let sq = b.reduce(ReduceOp::SumSquare, mean, 1, true);
    let norm = b.node("sqrt", Op::Unary(UnaryOp::Sqrt), &[sq]);
    let eps = b.scalar(1e-12);
    let norm = b.bin(BinaryOp::Max, norm, eps);
    let out = b.bin(BinaryOp::Div, mean, norm);
    b.g.value_mut(out).name = "embeddings".into();
    b.g.outputs.push(out);
    Ok(b.g)
}
