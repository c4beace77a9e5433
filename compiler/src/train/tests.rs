//! The train step graph through the interpreter: an SGD step of a linear model against its
//! closed-form gradient, cross-entropy + Adam lowering the loss, freezing by pattern.
use crate::ops::matmul::MatMul;
use crate::ops::IntoOp;
use super::*;
use crate::interp::{self, RtValue};
use crate::ir::{Param, Shape, TensorType, ValueKind, ValueType};
use crate::tensor::{Data, Tensor};

fn param(g: &mut Graph, name: &str, shape: &[usize], v: &[f32]) -> ValueId {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    g.add_value(
        name,
        ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(shape)) }),
        ValueKind::Param(Param { dtype: DType::F32, shape: shape.to_vec(), bytes: bytes.into() }),
    )
}

fn input(g: &mut Graph, name: &str, shape: &[usize]) -> ValueId {
    let v = g.add_value(name, ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(shape)) }), ValueKind::Input);
    g.inputs.push(v);
    v
}

/// y = x·W + b, x [4, 3], W [3, 2], b [2].
fn linear() -> Graph {
    let mut g = Graph::default();
    let x = input(&mut g, "x", &[4, 3]);
    let w = param(&mut g, "fc.weight", &[3, 2], &[0.1, -0.2, 0.3, 0.4, -0.5, 0.6]);
    let b = param(&mut g, "fc.bias", &[2], &[0.05, -0.05]);
    let (_, xw) = g.add_node("mm", MatMul.op(), vec![Some(x), Some(w)], &["xw".into()]);
    let (_, y) = g.add_node("add", Op::Binary(crate::ir::BinaryOp::Add), vec![Some(xw[0]), Some(b)], &["y".into()]);
    g.outputs = vec![y[0]];
    g
}

fn compile(mut g: Graph, spec: &TrainSpec) -> TrainGraph {
    let params = mark_trainable(&mut g, &spec.trainable).expect("trainable");
    passes::prepare(&mut g).expect("prepare");
    build_step(g, params, spec).expect("train graph")
}

fn t32(shape: &[usize], v: Vec<f32>) -> RtValue {
    RtValue::Tensor(Tensor::new(shape.to_vec(), Data::F32(v)))
}

fn f32s(v: &RtValue) -> Vec<f32> {
    match v {
        RtValue::Tensor(t) => t.to_f64_vec().into_iter().map(|x| x as f32).collect(),
        other => panic!("{other:?}"),
    }
}

/// Feeds in the train graph's input order (data, target, lr, step, state).
fn feeds(tg: &TrainGraph, data: Vec<RtValue>, target: RtValue, lr: f32, step: i64, state: &[Vec<f32>]) -> Vec<RtValue> {
    let mut shapes = Vec::new();
    for p in &tg.params {
        for _ in 0..=p.moments.len() {
            shapes.push(p.shape.clone());
        }
    }
    let state: Vec<Tensor> = shapes.into_iter().zip(state).map(|(sh, v)| Tensor::new(sh, Data::F32(v.clone()))).collect();
    tg.step_inputs(data, target, lr, step, &state).expect("every input fed")
}

#[test]
fn sgd_step_matches_the_closed_form() {
    let spec = TrainSpec {
        loss: Loss::Mse,
        rule: Rule::Sgd { momentum: 0.0, dampening: 0.0, nesterov: false, weight_decay: 0.0 },
        lr: 0.1,
        trainable: vec![],
        output: None,
    };
    let tg = compile(linear(), &spec);
    assert_eq!(tg.params.len(), 2);
    let x: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
    let t: Vec<f32> = (0..8).map(|i| (i as f32 * 0.91).cos()).collect();
    let w0 = [0.1f32, -0.2, 0.3, 0.4, -0.5, 0.6];
    let b0 = [0.05f32, -0.05];
    let state = vec![w0.to_vec(), b0.to_vec()];
    let outs = interp::run(&tg.graph, feeds(&tg, vec![t32(&[4, 3], x.clone())], t32(&[4, 2], t.clone()), 0.1, 1, &state)).expect("runs");
    // Reference in f64: r = x·W + b − t; L = mean(r²); dW = 2/8 xᵀr; db = 2/8 Σ r.
    let mut r = [0f64; 8];
    for i in 0..4 {
        for j in 0..2 {
            let mut acc = b0[j] as f64;
            for k in 0..3 {
                acc += x[i * 3 + k] as f64 * w0[k * 2 + j] as f64;
            }
            r[i * 2 + j] = acc - t[i * 2 + j] as f64;
        }
    }
    let loss: f64 = r.iter().map(|v| v * v).sum::<f64>() / 8.0;
    assert!((f32s(&outs[0])[0] as f64 - loss).abs() < 1e-5 * loss.max(1.0), "loss {:?} vs {loss}", f32s(&outs[0]));
    let w1 = f32s(&outs[1]);
    let b1 = f32s(&outs[2]);
    for k in 0..3 {
        for j in 0..2 {
            let d: f64 = (0..4).map(|i| x[i * 3 + k] as f64 * r[i * 2 + j]).sum::<f64>() * 2.0 / 8.0;
            let want = w0[k * 2 + j] as f64 - 0.1 * d;
            assert!((w1[k * 2 + j] as f64 - want).abs() < 1e-5, "W[{k},{j}] = {} want {want}", w1[k * 2 + j]);
        }
    }
    for j in 0..2 {
        let d: f64 = (0..4).map(|i| r[i * 2 + j]).sum::<f64>() * 2.0 / 8.0;
        assert!((b1[j] as f64 - (b0[j] as f64 - 0.1 * d)).abs() < 1e-5);
    }
}

#[test]
fn cross_entropy_with_adam_lowers_the_loss_and_freezing_keeps_weights() {
    for frozen in [false, true] {
        let spec = TrainSpec {
            loss: Loss::CrossEntropy,
            rule: Rule::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, decoupled: true },
            lr: 0.05,
            trainable: if frozen { vec!["*.weight".into()] } else { vec![] },
            output: None,
        };
        let tg = compile(linear(), &spec);
        assert_eq!(tg.params.len(), if frozen { 1 } else { 2 });
        // A frozen parameter stays a weight of the graph.
        let bias_is_weight = tg.graph.values.iter().any(|v| v.name == "fc.bias" && matches!(v.kind, ValueKind::Param(_)));
        assert_eq!(bias_is_weight, frozen);
        let x: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
        let labels = RtValue::Tensor(Tensor::new(vec![4], Data::I64(vec![0, 1, 1, 0])));
        let mut state: Vec<Vec<f32>> = tg.initial_state().iter().map(|t| t.to_f64_vec().into_iter().map(|v| v as f32).collect()).collect();
        let mut losses = Vec::new();
        for step in 1..=30 {
            let outs = interp::run(&tg.graph, feeds(&tg, vec![t32(&[4, 3], x.clone())], labels.clone(), 0.05, step, &state)).expect("runs");
            losses.push(f32s(&outs[0])[0]);
            state = tg.state_after(&outs).expect("state").iter().map(|t| t.to_f64_vec().into_iter().map(|v| v as f32).collect()).collect();
        }
        assert!(losses[29] < losses[0] * 0.9, "loss did not go down: {losses:?}");
    }
}

#[test]
fn nothing_to_train_is_an_error() {
    let mut g = linear();
    let e = mark_trainable(&mut g, &["conv*".into()]).unwrap_err();
    assert!(e.to_string().contains("no f32 parameter matches conv*"), "{e}");
}

#[test]
fn glob_patterns() {
    assert!(glob("fc.*", "fc.weight"));
    assert!(glob("*.bias", "layer1.0.bias"));
    assert!(!glob("fc.*", "conv.weight"));
    assert!(glob("l?yer", "layer"));
}

#[test]
fn parameters_are_found_again_after_the_passes_renumber_values() {
    // A dead node ahead of the parameters: dead code elimination drops its value and the
    // parameters' ids shift (SVTR and ZFNet trained with --train failed this way).
    let mut g = Graph::default();
    let x = input(&mut g, "x", &[4, 3]);
    g.add_node("unused", Op::Unary(crate::ir::UnaryOp::Relu), vec![Some(x)], &["dead".into()]);
    let w = param(&mut g, "fc.weight", &[3, 2], &[0.1, -0.2, 0.3, 0.4, -0.5, 0.6]);
    let b = param(&mut g, "fc.bias", &[2], &[0.05, -0.05]);
    let (_, xw) = g.add_node("mm", MatMul.op(), vec![Some(x), Some(w)], &["xw".into()]);
    let (_, y) = g.add_node("add", Op::Binary(crate::ir::BinaryOp::Add), vec![Some(xw[0]), Some(b)], &["y".into()]);
    g.outputs = vec![y[0]];
    let spec = TrainSpec { loss: Loss::Mse, rule: Rule::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, decoupled: true }, lr: 0.01, trainable: vec![], output: None };
    let tg = compile(g, &spec);
    let names: Vec<&str> = tg.params.iter().map(|p| tg.graph.value(p.value).name.as_str()).collect();
    assert_eq!(names, ["fc.weight", "fc.bias"]);
    for p in &tg.params {
        for &m in &p.moments {
            assert_eq!(tg.graph.tensor_type(m).and_then(|t| t.shape.as_ref()?.as_fixed()), Some(p.shape.clone()));
        }
    }
}
