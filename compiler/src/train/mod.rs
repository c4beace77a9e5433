//! The training step as one graph: forward, loss, backward (`autodiff`), optimizer updates.
//!
//! [`mark_trainable`] turns the chosen parameters into graph inputs before the passes run, so
//! constant folding never bakes a value that training changes. [`build_step`] then appends
//! the loss, the gradients and one `ParamUpdate` per parameter. The result is an ordinary
//! functional graph — the interpreter runs it (the updated parameters and moments are its
//! outputs) and codegen turns it into `train_step`, with the updates in place over the
//! caller's state buffer — planned and scheduled like any other graph.
mod loss;
#[cfg(test)]
mod tests;

use crate::autodiff;
use crate::interp::RtValue;
use crate::ir::{DType, Dim, Graph, Op, Shape, TensorType, ValueId, ValueKind, ValueType};
use crate::ops::optim::ParamUpdate;
use crate::ops::IntoOp;
use crate::passes::{self, PassError};
use crate::tensor::Tensor;
use burnc_runtime::train::optim::Rule;
use std::collections::HashSet;
use thiserror::Error;

pub use loss::Loss;

#[derive(Debug, Error)]
pub enum TrainError {
    #[error("no parameter to train: {0}")]
    NothingToTrain(String),
    #[error("output `{0}` is not an output of the model")]
    UnknownOutput(String),
    #[error("the loss: {0}")]
    Loss(String),
    #[error("parameter `{name}`: {reason}")]
    Param { name: String, reason: String },
    #[error(transparent)]
    Pass(#[from] PassError),
}

/// What to train and how.
#[derive(Debug, Clone)]
pub struct TrainSpec {
    pub loss: Loss,
    pub rule: Rule,
    /// Default learning rate (generated code can change it between steps).
    pub lr: f32,
    /// Glob patterns (`*`, `?`) over parameter names; empty: every f32 parameter.
    pub trainable: Vec<String>,
    /// The model output the loss reads; `None`: the first.
    pub output: Option<String>,
}

/// A parameter being trained.
#[derive(Debug, Clone)]
pub struct TrainParam {
    pub name: String,
    /// The graph input that holds it.
    pub value: ValueId,
    pub shape: Vec<usize>,
    /// Its initial value (from the model file).
    pub init: Tensor,
    /// The optimizer's moment inputs (`rule.moments()` of them).
    pub moments: Vec<ValueId>,
}

/// The train step graph and where things are in it.
#[derive(Debug, Clone)]
pub struct TrainGraph {
    /// Inputs: the model's data inputs, `target`, `lr` (f32 scalar), `step` (i64 scalar,
    /// 1 for the first step), then each parameter and its moments. Outputs: the loss (f32
    /// scalar), then each updated parameter, then each updated moment.
    pub graph: Graph,
    pub data_inputs: Vec<ValueId>,
    pub target: ValueId,
    pub lr: ValueId,
    pub step: ValueId,
    /// i64 scalar keying the training-mode Dropouts' masks (a new one each step), when the
    /// model has Dropouts.
    pub dropout_key: Option<ValueId>,
    pub params: Vec<TrainParam>,
    pub rule: Rule,
    pub default_lr: f32,
}

impl TrainGraph {
    /// The state a run starts from: each parameter's initial value, then zeros for each of its
    /// moments (parameter order, moments after their parameter).
    pub fn initial_state(&self) -> Vec<Tensor> {
        let mut out = Vec::new();
        for p in &self.params {
            out.push(p.init.clone());
            for _ in &p.moments {
                out.push(Tensor::new(p.shape.clone(), crate::tensor::Data::F32(vec![0.0; p.shape.iter().product()])));
            }
        }
        out
    }

    /// The graph's inputs, in order, for step `step` (1 first): `data` in `data_inputs` order,
    /// the target, the learning rate, the step (also the Dropout key, as generated
    /// `train_step` uses it) and `state` as [`TrainGraph::initial_state`] lays it out.
    pub fn step_inputs(&self, data: Vec<RtValue>, target: RtValue, lr: f32, step: i64, state: &[Tensor]) -> Result<Vec<RtValue>, String> {
        let mut by_id: std::collections::HashMap<ValueId, RtValue> = self.data_inputs.iter().copied().zip(data).collect();
        by_id.insert(self.target, target);
        by_id.insert(self.lr, RtValue::Tensor(Tensor::from_f32s(vec![], vec![lr])));
        by_id.insert(self.step, RtValue::Tensor(Tensor::scalar_i64(step)));
        if let Some(k) = self.dropout_key {
            by_id.insert(k, RtValue::Tensor(Tensor::scalar_i64(step)));
        }
        let mut it = state.iter();
        for p in &self.params {
            for v in std::iter::once(p.value).chain(p.moments.iter().copied()) {
                let t = it.next().ok_or("the state has fewer tensors than the train step needs")?;
                by_id.insert(v, RtValue::Tensor(t.clone()));
            }
        }
        self.graph.inputs.iter().map(|v| by_id.remove(v).ok_or_else(|| format!("input `{}` is not fed", self.graph.value(*v).name))).collect()
    }

    /// The state after a step, from the graph's outputs (loss, updated parameters, then their
    /// updated moments in parameter order), laid out as [`TrainGraph::initial_state`].
    pub fn state_after(&self, outs: &[RtValue]) -> Result<Vec<Tensor>, String> {
        let get = |i: usize| match outs.get(i) {
            Some(RtValue::Tensor(t)) => Ok(t.clone()),
            _ => Err(format!("train output {i} is missing or not a tensor")),
        };
        let mut next = Vec::new();
        let mut mi = 1 + self.params.len();
        for (pi, p) in self.params.iter().enumerate() {
            next.push(get(1 + pi)?);
            for _ in &p.moments {
                next.push(get(mi)?);
                mi += 1;
            }
        }
        Ok(next)
    }
}

/// `*` any run of characters, `?` one.
pub fn glob(pattern: &str, name: &str) -> bool {
    fn m(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| m(rest, &s[i..])),
            Some((b'?', rest)) => !s.is_empty() && m(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && m(rest, &s[1..]),
        }
    }
    m(pattern.as_bytes(), name.as_bytes())
}

/// Values read only as a BatchNormalization's running mean or variance: statistics, not
/// parameters a gradient should move.
fn statistics(g: &Graph) -> HashSet<ValueId> {
    let mut stat = HashSet::new();
    let mut other = HashSet::new();
    for n in &g.nodes {
        for (i, v) in n.inputs.iter().enumerate() {
            let Some(v) = v else { continue };
            let bn = match &n.op {
                Op::Def(d) => d.get::<crate::ops::channel_norm::BatchNormTraining>().is_some() || d.get::<crate::ops::channel_norm::BatchNorm>().is_some(),
                _ => false,
            };
            if bn && (i == 3 || i == 4) {
                stat.insert(*v);
            } else {
                other.insert(*v);
            }
        }
    }
    stat.retain(|v| !other.contains(v));
    stat
}

/// Make the f32 parameters matching `patterns` (all when empty) graph inputs, before any
/// pass runs; returns them with their initial values, in graph value order.
pub fn mark_trainable(g: &mut Graph, patterns: &[String]) -> Result<Vec<TrainParam>, TrainError> {
    let stats = statistics(g);
    let mut out = Vec::new();
    for i in 0..g.values.len() {
        let id = ValueId(i as u32);
        let v = g.value(id);
        let ValueKind::Param(p) = &v.kind else { continue };
        if p.dtype != DType::F32 || stats.contains(&id) {
            continue;
        }
        if !patterns.is_empty() && !patterns.iter().any(|pat| glob(pat, &v.name)) {
            continue;
        }
        let init = p.to_tensor().ok_or_else(|| TrainError::Param { name: v.name.clone(), reason: "its bytes do not decode".into() })?;
        let shape = p.shape.clone();
        let name = v.name.clone();
        let vm = g.value_mut(id);
        vm.kind = ValueKind::Input;
        vm.ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(&shape)) });
        g.inputs.push(id);
        out.push(TrainParam { name, value: id, shape, init, moments: Vec::new() });
    }
    if out.is_empty() {
        let why = if patterns.is_empty() {
            "the model has no f32 parameters".to_string()
        } else {
            format!("no f32 parameter matches {}", patterns.join(", "))
        };
        return Err(TrainError::NothingToTrain(why));
    }
    Ok(out)
}

/// The f32 parameters left as weights (after [`mark_trainable`], before the passes fold
/// any): saved next to the trained ones so a checkpoint holds the whole model.
pub fn frozen_params(g: &Graph) -> Vec<(String, Tensor)> {
    g.values
        .iter()
        .filter_map(|v| match &v.kind {
            ValueKind::Param(p) if p.dtype == DType::F32 => p.to_tensor().map(|t| (v.name.clone(), t)),
            _ => None,
        })
        .collect()
}

/// A value name not yet in `g`.
fn fresh(g: &Graph, base: &str) -> String {
    let mut taken: HashSet<String> = g.values.iter().map(|v| v.name.clone()).collect();
    crate::ir::unique_name(base.to_string(), &mut taken)
}

/// The value named `name` (names are unique in a graph).
fn value_named(g: &Graph, name: &str) -> Result<ValueId, TrainError> {
    g.values
        .iter()
        .position(|v| v.name == name)
        .map(|i| ValueId(i as u32))
        .ok_or_else(|| TrainError::Param { name: name.to_string(), reason: "lost by the passes (internal)".into() })
}

fn scalar_input(g: &mut Graph, name: &str, dtype: DType) -> ValueId {
    let name = fresh(g, name);
    let id = g.add_value(name, ValueType::Tensor(TensorType { dtype, shape: Some(Shape(vec![])) }), ValueKind::Input);
    g.inputs.push(id);
    id
}

/// Append loss, gradients and updates to `g` (prepared, static shapes, `params` marked by
/// [`mark_trainable`]) and prepare the result.
pub fn build_step(mut g: Graph, mut params: Vec<TrainParam>, spec: &TrainSpec) -> Result<TrainGraph, TrainError> {
    // The passes that prepared `g` after `mark_trainable` renumber values where they drop
    // some (dead code elimination): the parameters' ids are found again by their names.
    for p in &mut params {
        p.value = value_named(&g, &p.name)?;
    }
    let param_ids: HashSet<ValueId> = params.iter().map(|p| p.value).collect();
    let data_inputs: Vec<ValueId> = g.inputs.iter().copied().filter(|v| !param_ids.contains(v)).collect();
    let pred = match &spec.output {
        Some(name) => *g.outputs.iter().find(|&&o| &g.value(o).name == name).ok_or_else(|| TrainError::UnknownOutput(name.clone()))?,
        None => *g.outputs.first().ok_or_else(|| TrainError::UnknownOutput("(the model has no outputs)".into()))?,
    };
    // Dropouts drop in the train step, keyed per step (before the gradients: the rule keys dX
    // like the forward op).
    let has_dropout = g.nodes.iter().any(|n| matches!(&n.op, Op::Def(d) if d.get::<crate::ops::view::Dropout>().is_some_and(|d| d.ratio > 0.0)));
    let dropout_key = if has_dropout {
        let k = scalar_input(&mut g, "dropout_key", DType::I64);
        autodiff::enable_dropout(&mut g, k)?;
        Some(k)
    } else {
        None
    };
    let (target, loss) = loss::append(&mut g, pred, spec.loss).map_err(TrainError::Loss)?;
    let wrt: Vec<ValueId> = params.iter().map(|p| p.value).collect();
    let grads = autodiff::gradients(&mut g, loss, None, &wrt)?;
    let lr = scalar_input(&mut g, "lr", DType::F32);
    let step = scalar_input(&mut g, "step", DType::I64);
    let mut new_params = Vec::new();
    let mut new_moments = Vec::new();
    let moment_names = match spec.rule {
        Rule::Sgd { .. } => ["momentum_buffer", ""],
        Rule::Adam { .. } => ["exp_avg", "exp_avg_sq"],
    };
    for (p, &grad) in params.iter_mut().zip(&grads) {
        let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(p.shape.iter().map(|&d| Dim::Fixed(d)).collect())) });
        let mut inputs = vec![Some(p.value), Some(grad), Some(lr), Some(step)];
        for mname in &moment_names[..spec.rule.moments()] {
            let name = fresh(&g, &format!("{}/{mname}", p.name));
            let m = g.add_value(name, ty.clone(), ValueKind::Input);
            g.inputs.push(m);
            p.moments.push(m);
            inputs.push(Some(m));
        }
        let mut out_names = vec![fresh(&g, &format!("{}/updated", p.name))];
        for mname in &moment_names[..spec.rule.moments()] {
            out_names.push(format!("{}/{mname}/updated", p.name));
        }
        let (_, outs) = g.add_node(format!("{}/update", p.name), ParamUpdate { rule: spec.rule }.op(), inputs, &out_names);
        new_params.push(outs[0]);
        new_moments.extend_from_slice(&outs[1..]);
    }
    g.outputs = std::iter::once(loss).chain(new_params).chain(new_moments).collect();
    // Dead code elimination renumbers values: find ours again by name (names are unique).
    let name = |g: &Graph, v: ValueId| g.value(v).name.clone();
    let data_names: Vec<String> = data_inputs.iter().map(|&v| name(&g, v)).collect();
    let (target_n, lr_n, step_n) = (name(&g, target), name(&g, lr), name(&g, step));
    let key_n = dropout_key.map(|k| name(&g, k));
    let param_names: Vec<(String, Vec<String>)> =
        params.iter().map(|p| (name(&g, p.value), p.moments.iter().map(|&m| name(&g, m)).collect())).collect();
    passes::prepare(&mut g)?;
    let find = |n: &str| value_named(&g, n);
    let data_inputs = data_names.iter().map(|n| find(n)).collect::<Result<Vec<_>, _>>()?;
    let (target, lr, step) = (find(&target_n)?, find(&lr_n)?, find(&step_n)?);
    let dropout_key = key_n.map(|n| find(&n)).transpose()?;
    for (p, (pn, mns)) in params.iter_mut().zip(&param_names) {
        p.value = find(pn)?;
        p.moments = mns.iter().map(|n| find(n)).collect::<Result<Vec<_>, _>>()?;
    }
    Ok(TrainGraph { data_inputs, target, lr, step, dropout_key, params, rule: spec.rule, default_lr: spec.lr, graph: g })
}
