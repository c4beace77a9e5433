//! Rewrites for generated code that change rounding but not meaning (the interpreter stays the
//! unfused reference): a BatchNormalization that only normalizes a convolution's output is
//! folded into the convolution's weights and bias at compile time, so it costs nothing at run
//! time.
use super::fold::renumber;
use super::PassError;
use crate::ir::{DType, Graph, NodeId, Op, ValueId, ValueKind};
use crate::tensor::{Data, Tensor};

/// What the fusion passes did, for `burnc inspect`.
#[derive(Debug, Default, Clone)]
pub struct FusionReport {
    /// (conv node, batch-norm node) names.
    pub bn_into_conv: Vec<(String, String)>,
}

impl FusionReport {
    pub fn is_empty(&self) -> bool {
        self.bn_into_conv.is_empty()
    }
}

fn f32s(t: &Tensor) -> Option<Vec<f32>> {
    match &t.data {
        Data::F32(v) => Some(v.clone()),
        _ => None,
    }
}

/// Run every fusion on `g`.
pub fn fuse(g: &mut Graph) -> Result<FusionReport, PassError> {
    let mut report = FusionReport::default();
    fold_batchnorm(g, &mut report);
    if !report.is_empty() {
        renumber(g);
        super::dce::dce(g)?;
    }
    Ok(report)
}

/// The folded weights and bias of conv `c` followed by batch norm `b`, if they qualify: f32,
/// every parameter a constant, the conv's output read by the batch norm only.
fn folded(g: &Graph, c: &crate::ir::Node, b: &crate::ir::Node, eps: f32, uses: usize) -> Option<(Tensor, Tensor)> {
    if uses != 1 || c.outputs.len() != 1 || b.outputs.len() != 1 || b.inputs.len() != 5 {
        return None;
    }
    if g.outputs.contains(&c.outputs[0]) || g.tensor_type(c.outputs[0])?.dtype != DType::F32 {
        return None;
    }
    let konst = |v: Option<ValueId>| v.and_then(|v| g.const_value(v)).and_then(|t| f32s(&t).map(|d| (t.shape.clone(), d)));
    let (wshape, w) = konst(c.inputs.get(1).copied().flatten())?;
    let m = *wshape.first()?;
    let bias = match c.inputs.get(2).copied().flatten() {
        Some(v) => konst(Some(v))?.1,
        None => vec![0.0; m],
    };
    let [scale, beta, mean, var] = [1, 2, 3, 4].map(|i| konst(b.inputs[i]).map(|t| t.1));
    let (scale, beta, mean, var) = (scale?, beta?, mean?, var?);
    if [bias.len(), scale.len(), beta.len(), mean.len(), var.len()].iter().any(|&l| l != m) || m == 0 || w.len() % m != 0 {
        return None;
    }
    let per = w.len() / m;
    let mut w2 = Vec::with_capacity(w.len());
    let mut b2 = Vec::with_capacity(m);
    for ch in 0..m {
        // In f64, rounded once: y = (conv(x) + b - mean) * s + beta with s = scale / √(var + ε).
        let s = scale[ch] as f64 / (var[ch] as f64 + eps as f64).sqrt();
        w2.extend(w[ch * per..(ch + 1) * per].iter().map(|&v| (v as f64 * s) as f32));
        b2.push(((bias[ch] as f64 - mean[ch] as f64) * s + beta[ch] as f64) as f32);
    }
    Some((Tensor::new(wshape, Data::F32(w2)), Tensor::new(vec![m], Data::F32(b2))))
}

fn fold_batchnorm(g: &mut Graph, report: &mut FusionReport) {
    let uses = g.use_counts();
    let mut remove = vec![false; g.nodes.len()];
    for bi in 0..g.nodes.len() {
        let Op::BatchNorm { epsilon } = g.nodes[bi].op else { continue };
        let Some(x) = g.nodes[bi].inputs.first().copied().flatten() else { continue };
        let ValueKind::Node(NodeId(ci)) = g.value(x).kind else { continue };
        let ci = ci as usize;
        if remove[ci] || !matches!(g.nodes[ci].op, Op::Conv { .. }) {
            continue;
        }
        let Some((w, b)) = folded(g, &g.nodes[ci], &g.nodes[bi], epsilon, uses.get(&x).copied().unwrap_or(0)) else { continue };
        let (cname, bname) = (g.nodes[ci].name.clone(), g.nodes[bi].name.clone());
        let wv = g.add_const(format!("{cname}_w_bnfold"), w);
        let bv = g.add_const(format!("{cname}_b_bnfold"), b);
        let out = g.nodes[bi].outputs[0];
        let conv = &mut g.nodes[ci];
        conv.inputs.resize(3, None);
        conv.inputs[1] = Some(wv);
        conv.inputs[2] = Some(bv);
        conv.outputs[0] = out;
        g.value_mut(out).kind = ValueKind::Node(NodeId(ci as u32));
        remove[bi] = true;
        report.bn_into_conv.push((cname, bname));
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().zip(remove).filter(|(_, r)| !r).map(|(n, _)| n).collect();
}
