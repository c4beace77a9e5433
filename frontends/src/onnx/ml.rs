//! Classic-ML ops: the ai.onnx.ml domain (Binarizer, ArrayFeatureExtractor → core ops;
//! TreeEnsemble → `ops::ml::TreeEnsemble`) and TfIdfVectorizer. Attributes become the flat tables
//! the runtime kernels read (`burnc_runtime::kernels::ml`), checked here.
use super::attrs::Attrs;
use super::import::{node_label, Ctx};
use super::proto::NodeProto;
use super::{tensor, OnnxError};
use burnc_compiler::ir::{ml_kernel as k, BinaryOp, Op, ValueId, ValueType};
use burnc_compiler::ops::ml::{TfIdfVectorizer, TreeEnsemble};
use burnc_compiler::ops::IntoOp;
use burnc_compiler::Tensor;

struct L<'n> {
    node: &'n NodeProto,
    label: String,
    opset: i64,
}

impl L<'_> {
    fn err(&self, reason: impl Into<String>) -> OnnxError {
        OnnxError::Node { node: self.label.clone(), op: self.node.op_type().into(), opset: self.opset, reason: reason.into() }
    }

    /// One core node; its single output is bound to ONNX output 0 when `last`.
    fn add(&self, ctx: &mut Ctx, op: Op, inputs: &[Option<ValueId>], last: bool) -> Result<ValueId, OnnxError> {
        let out = self.node.output.first().cloned().ok_or_else(|| self.err("no output"))?;
        let vname = if last && !out.is_empty() { out.clone() } else { ctx.fresh(&self.label) };
        let (_, outs) = ctx.graph.add_node(self.label.clone(), op, inputs.to_vec(), &[vname]);
        if let Some(l) = ctx.graph.nodes.last_mut() {
            l.source_op = Some((self.node.op_type().to_string(), self.opset));
        }
        if last {
            ctx.bind(&out, outs[0]);
        }
        Ok(outs[0])
    }

    fn input(&self, ctx: &mut Ctx, i: usize) -> Result<ValueId, OnnxError> {
        let name = self.node.input.get(i).ok_or_else(|| self.err(format!("missing input #{i}")))?;
        ctx.lookup(&self.label, name)?.ok_or_else(|| self.err(format!("missing input #{i}")))
    }
}

/// A node of the ai.onnx.ml domain.
pub fn lower(ctx: &mut Ctx, node: &NodeProto, opset: i64) -> Result<(), OnnxError> {
    let l = L { node, label: node_label(node), opset };
    let a = Attrs(&node.attribute);
    match node.op_type() {
        "Binarizer" => {
            // (X > threshold) in X's type.
            let x = l.input(ctx, 0)?;
            let thr = ctx.constant(&l.label, Tensor::from_f32s(vec![], vec![a.f_or("threshold", 0.0)]));
            let thr = l.add(ctx, burnc_compiler::ops::cast::like(true), &[Some(thr), Some(x)], false)?;
            let gt = l.add(ctx, Op::Binary(BinaryOp::Greater), &[Some(x), Some(thr)], false)?;
            l.add(ctx, burnc_compiler::ops::cast::like(true), &[Some(gt), Some(x)], true)?;
            Ok(())
        }
        "ArrayFeatureExtractor" => {
            // X[..., indices.ravel()]; a 1-D X gives one row.
            let (x, idx) = (l.input(ctx, 0)?, l.input(ctx, 1)?);
            let rank = match &ctx.graph.value(x).ty {
                ValueType::Tensor(t) => t.shape.as_ref().map(|s| s.0.len()),
                _ => None,
            };
            let rank = rank.ok_or_else(|| l.err("ArrayFeatureExtractor needs X's rank to be known"))?;
            let flat = ctx.constant(&l.label, Tensor::from_i64s(vec![1], vec![-1]));
            let idx = l.add(ctx, Op::Reshape { allowzero: false }, &[Some(idx), Some(flat)], false)?;
            let z = l.add(ctx, Op::Gather { axis: -1 }, &[Some(x), Some(idx)], rank != 1)?;
            if rank == 1 {
                let row = ctx.constant(&l.label, Tensor::from_i64s(vec![2], vec![1, -1]));
                l.add(ctx, Op::Reshape { allowzero: false }, &[Some(z), Some(row)], true)?;
            }
            Ok(())
        }
        "TreeEnsemble" => {
            let x = l.input(ctx, 0)?;
            let attrs = tree_ensemble(&l, &a, ctx)?;
            l.add(ctx, attrs.op(), &[Some(x)], true)?;
            Ok(())
        }
        "LabelEncoder" => {
            let x = l.input(ctx, 0)?;
            let op = label_encoder(&l, &a, ctx)?;
            l.add(ctx, burnc_compiler::ops::strings::op(op), &[Some(x)], true)?;
            Ok(())
        }
        other => Err(OnnxError::UnsupportedOp { node: l.label.clone(), op: other.into(), domain: "ai.onnx.ml".into(), opset }),
    }
}

/// LabelEncoder's keys, values and default from whichever attributes the opset names them by
/// (`keys_strings`/`keys_int64s`/`keys_floats`/`keys_tensor`, the same for values, and
/// `default_*`, whose default is "_Unused", -1 or -0.0 by the values' type).
fn label_encoder(l: &L, a: &Attrs, ctx: &Ctx) -> Result<burnc_compiler::ops::strings::LabelEncoder, OnnxError> {
    use burnc_compiler::{Data, Tensor};
    let list = |side: &str| -> Result<Option<Tensor>, OnnxError> {
        let strings = a.strings(&format!("{side}_strings")).filter(|v| !matches!(v, Ok(v) if v.is_empty()));
        if let Some(v) = strings {
            let v = v.map_err(|i| l.err(format!("{side}_strings[{i}] is not UTF-8")))?;
            return Ok(Some(Tensor::new(vec![v.len()], Data::Str(v))));
        }
        if let Some(v) = a.ints(&format!("{side}_int64s")).filter(|v| !v.is_empty()) {
            return Ok(Some(Tensor::from_i64s(vec![v.len()], v)));
        }
        if let Some(v) = a.floats(&format!("{side}_floats")).filter(|v| !v.is_empty()) {
            return Ok(Some(Tensor::from_f32s(vec![v.len()], v)));
        }
        match a.t(&format!("{side}_tensor")) {
            Some(t) => {
                let t = tensor::to_tensor(t, ctx.model_dir)?;
                Ok(Some(Tensor::new(vec![t.numel()], t.data)))
            }
            None => Ok(None),
        }
    };
    let keys = list("keys")?.ok_or_else(|| l.err("no keys (keys_strings, keys_int64s, keys_floats or keys_tensor)"))?;
    let values = list("values")?.ok_or_else(|| l.err("no values (values_strings, values_int64s, values_floats or values_tensor)"))?;
    let default = if let Some(t) = a.t("default_tensor") {
        let t = tensor::to_tensor(t, ctx.model_dir)?;
        Tensor::new(vec![], t.data)
    } else {
        match values.dtype() {
            burnc_compiler::ir::DType::Str => Tensor::new(vec![], Data::Str(vec![a.s("default_string").unwrap_or_else(|| "_Unused".into())])),
            burnc_compiler::ir::DType::I64 => Tensor::from_i64s(vec![], vec![a.i_or("default_int64", -1)]),
            burnc_compiler::ir::DType::F32 => Tensor::from_f32s(vec![], vec![a.f_or("default_float", -0.0)]),
            d => Tensor::new(vec![], Data::zeros(d, 1)),
        }
    };
    burnc_compiler::ops::strings::LabelEncoder::new(keys, values, default).map_err(|e| l.err(e))
}

/// TfIdfVectorizer (default domain), integer pools only.
pub fn tfidf(ctx: &mut Ctx, node: &NodeProto, opset: i64) -> Result<(), OnnxError> {
    let l = L { node, label: node_label(node), opset };
    let a = Attrs(&node.attribute);
    let x = l.input(ctx, 0)?;
    if a.has("pool_strings") {
        return Err(l.err("string pools are not supported"));
    }
    let mode = match a.s_or("mode", "").as_str() {
        "TF" => k::TF,
        "IDF" => k::IDF,
        "TFIDF" => k::TFIDF,
        m => return Err(l.err(format!("unknown mode `{m}`"))),
    };
    let size = |name: &str| -> Result<usize, OnnxError> {
        let v = a.i(name).ok_or_else(|| l.err(format!("missing attribute `{name}`")))?;
        usize::try_from(v).map_err(|_| l.err(format!("negative {name}")))
    };
    let ngram_indexes = a.ints("ngram_indexes").unwrap_or_default();
    let out = ngram_indexes.iter().max().map_or(Ok(0), |&m| usize::try_from(m + 1)).map_err(|_| l.err("negative ngram_indexes"))?;
    let attrs = TfIdfVectorizer {
        mode,
        min_gram: size("min_gram_length")?,
        max_gram: size("max_gram_length")?,
        max_skip: size("max_skip_count")?,
        ngram_counts: a.ints("ngram_counts").unwrap_or_default(),
        pool: a.ints("pool_int64s").unwrap_or_default(),
        weights: a.floats("weights").unwrap_or_default(),
        ngram_indexes,
        out,
    };
    k::tfidf_check(attrs.pool.len(), &attrs.ngram_counts, &attrs.ngram_indexes, out).map_err(|e| l.err(e))?;
    l.add(ctx, attrs.op(), &[Some(x)], true)?;
    Ok(())
}

fn tensor_f64(a: &Attrs, ctx: &Ctx, name: &str) -> Result<Option<Vec<f64>>, OnnxError> {
    a.t(name).map(|t| tensor::to_tensor(t, ctx.model_dir).map(|t| t.to_f64_vec())).transpose()
}

fn tree_ensemble(l: &L, a: &Attrs, ctx: &Ctx) -> Result<TreeEnsemble, OnnxError> {
    let ints = |name: &str| a.ints(name).ok_or_else(|| l.err(format!("missing attribute `{name}`")));
    let need = |name: &str| tensor_f64(a, ctx, name)?.ok_or_else(|| l.err(format!("missing attribute `{name}`")));
    let (feat, tn, fnn, tl, fl) = (ints("nodes_featureids")?, ints("nodes_truenodeids")?, ints("nodes_falsenodeids")?, ints("nodes_trueleafs")?, ints("nodes_falseleafs")?);
    let splits = need("nodes_splits")?;
    let modes = need("nodes_modes")?;
    let (leaf_t, leaf_w, roots) = (ints("leaf_targetids")?, need("leaf_weights")?, ints("tree_roots")?);
    let missing = a.ints("nodes_missing_value_tracks_true").unwrap_or_default();
    let membership = tensor_f64(a, ctx, "membership_values")?.unwrap_or_default();
    let targets = usize::try_from(a.i("n_targets").ok_or_else(|| l.err("missing attribute `n_targets`"))?).map_err(|_| l.err("negative n_targets"))?;
    if a.i_or("post_transform", 0) != 0 {
        return Err(l.err("post_transform other than NONE is not supported"));
    }
    let aggregate = match a.i_or("aggregate_function", 1) {
        0 => k::AVERAGE,
        1 => k::SUM,
        2 => k::MIN,
        3 => k::MAX,
        f => return Err(l.err(format!("unknown aggregate_function {f}"))),
    };
    let n = splits.len();
    if [feat.len(), tn.len(), fnn.len(), tl.len(), fl.len(), modes.len()].iter().any(|&m| m != n) {
        return Err(l.err("node attributes differ in length"));
    }
    if leaf_t.len() != leaf_w.len() || leaf_t.iter().any(|&t| t < 0 || t as usize >= targets) {
        return Err(l.err("leaf_targetids must match leaf_weights and lie in 0..n_targets"));
    }
    let idx = |v: i64, leaf: bool| -> Result<u32, OnnxError> {
        let len = if leaf { leaf_w.len() } else { n };
        if v < 0 || v as usize >= len {
            return Err(l.err(format!("{} index {v} out of range", if leaf { "leaf" } else { "node" })));
        }
        Ok(v as u32)
    };
    let mut nodes = Vec::with_capacity(n * k::NODE_WORDS);
    for i in 0..n {
        let mode = modes[i];
        if !(0.0..=6.0).contains(&mode) || mode.fract() != 0.0 {
            return Err(l.err(format!("unknown node mode {mode}")));
        }
        let flags = u32::from(tl[i] != 0) | (u32::from(fl[i] != 0) << 1) | (u32::from(missing.get(i).is_some_and(|&m| m != 0)) << 2);
        let f = u32::try_from(feat[i]).map_err(|_| l.err("negative feature id"))?;
        nodes.extend([mode as u32, f, idx(tn[i], tl[i] != 0)?, idx(fnn[i], fl[i] != 0)?, flags, 0, 0]);
    }
    // Set members are taken, NaN-separated, in the order the reference builds the trees
    // (depth first from each root, true branch first).
    let mut members = Vec::new();
    let mut rest = membership.iter().copied();
    let mut root_table = Vec::with_capacity(roots.len() * 2);
    let mut seen = vec![false; n];
    for &r in &roots {
        let r = idx(r, false)? as usize;
        let is_leaf = tl[r] != 0 && fl[r] != 0 && tn[r] == fnn[r];
        root_table.extend([if is_leaf { idx(r as i64, true)? } else { r as u32 }, u32::from(is_leaf)]);
        if is_leaf {
            continue;
        }
        let mut stack = vec![r];
        while let Some(i) = stack.pop() {
            if seen[i] {
                continue;
            }
            seen[i] = true;
            let rec = &mut nodes[i * k::NODE_WORDS..(i + 1) * k::NODE_WORDS];
            if rec[0] == k::MEMBER {
                rec[5] = members.len() as u32;
                members.extend(rest.by_ref().take_while(|m| !m.is_nan()));
                rec[6] = members.len() as u32 - rec[5];
            }
            if fl[i] == 0 {
                stack.push(fnn[i] as usize);
            }
            if tl[i] == 0 {
                stack.push(tn[i] as usize);
            }
        }
    }
    Ok(TreeEnsemble {
        nodes,
        splits,
        members,
        leaf_weights: leaf_w,
        leaf_targets: leaf_t.iter().map(|&t| t as u32).collect(),
        roots: root_table,
        targets,
        aggregate,
    })
}
