//! Tests of the bounded-dims analysis on hand-built graphs.
use super::symbolic::{analyze, check_no_dim_values, reshape_targets};
use crate::ir::{AutoPad, DType, Dim, DimExpr, Graph, Op, PoolKind, Shape, TensorType, UnaryOp, ValueId, ValueKind, ValueType, Window};
use crate::ops::IntoOp;
use crate::tensor::Tensor;
use std::collections::HashMap;

fn input(g: &mut Graph, dims: Vec<Dim>) -> ValueId {
    let v = g.add_value("x", ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape(dims)) }), ValueKind::Input);
    g.inputs.push(v);
    v
}
fn node(g: &mut Graph, op: Op, inputs: Vec<Option<ValueId>>) -> ValueId {
    let name = format!("n{}", g.nodes.len());
    g.add_node(name.clone(), op, inputs, &[format!("{name}_out")]).1[0]
}
fn sym(n: &str) -> Dim {
    Dim::Sym { name: n.into(), bound: Some(16) }
}
fn v(n: &str) -> DimExpr {
    DimExpr::var(n)
}
fn k(c: i64) -> DimExpr {
    DimExpr::constant(c)
}

/// x [n, 3, h, w] → Conv 3x3 pad 1 → MaxPool 2x2 s2 → Reshape(Concat(Shape(x)[0], -1)).
fn cnn() -> (Graph, HashMap<ValueId, Vec<DimExpr>>, ValueId, ValueId) {
    let mut g = Graph::default();
    let x = input(&mut g, vec![sym("n"), Dim::Fixed(3), sym("h"), sym("w")]);
    let wt = g.add_const("wt", Tensor::zeros(DType::F32, vec![4, 3, 3, 3]));
    let win = |k: usize, s: usize, p: usize| Window { kernel_shape: vec![k, k], strides: vec![s, s], pads: vec![p; 4], dilations: vec![], auto_pad: AutoPad::NotSet, ceil_mode: false };
    let c = node(&mut g, Op::Conv { window: win(3, 1, 1), group: 1 }, vec![Some(x), Some(wt), None]);
    let p = node(&mut g, crate::ops::pool::Pool { kind: PoolKind::Max, window: win(2, 2, 0), column_major: false }.op(), vec![Some(c)]);
    let sh = node(&mut g, crate::ops::dim_values::Shape { start: 0, end: Some(1) }.op(), vec![Some(x)]);
    let m1 = g.add_const("m1", Tensor::from_i64s(vec![1], vec![-1]));
    let cat = node(&mut g, Op::Concat { axis: 0 }, vec![Some(sh), Some(m1)]);
    let r = node(&mut g, Op::Reshape { allowzero: false }, vec![Some(p), Some(cat)]);
    g.outputs = vec![r];
    let ins = HashMap::from([(x, vec![v("n"), k(3), v("h"), v("w")])]);
    (g, ins, p, r)
}

#[test]
fn conv_pool_and_a_shape_subgraph_reshape_stay_symbolic() {
    let (mut g, ins, p, r) = cnn();
    crate::passes::infer::infer(&mut g).expect("infer");
    let (targets, _) = reshape_targets(&g, &ins, &HashMap::new()).expect("targets");
    assert_eq!(targets.get("n4"), Some(&vec![v("n"), k(-1)]));
    let info = analyze(&g, &ins, &targets).expect("analysis");
    assert_eq!(info.shapes[&p], vec![v("n"), k(4), v("h").floor_div(2), v("w").floor_div(2)]);
    // -1 = 4 · (h/2) · (w/2), an exact division of the input's element count by n.
    assert_eq!(info.shapes[&r], vec![v("n"), k(4).mul(&v("h").floor_div(2)).mul(&v("w").floor_div(2))]);
    check_no_dim_values(&g, &ins, &HashMap::new()).expect("dim values only feed a Reshape target");
}

/// x [n, 4] → Shape[0:1] → Cast(f32) → Sqrt: a dim's value read as data. The graph, x's
/// dims, and the Shape and Sqrt outputs (the graph's outputs are left to the test).
fn sqrt_of_a_dim() -> (Graph, HashMap<ValueId, Vec<DimExpr>>, ValueId, ValueId) {
    let mut g = Graph::default();
    let x = input(&mut g, vec![sym("n"), Dim::Fixed(4)]);
    let sh = node(&mut g, crate::ops::dim_values::Shape { start: 0, end: Some(1) }.op(), vec![Some(x)]);
    let f = node(&mut g, crate::ops::cast::op(DType::F32, true), vec![Some(sh)]);
    let y = node(&mut g, Op::Unary(UnaryOp::Sqrt), vec![Some(f)]);
    (g, HashMap::from([(x, vec![v("n"), k(4)])]), sh, y)
}

#[test]
fn a_dim_value_feeding_arithmetic_is_refused_naming_the_node() {
    let (mut g, ins, _, y) = sqrt_of_a_dim();
    g.outputs = vec![y];
    crate::passes::infer::infer(&mut g).expect("infer");
    let err = check_no_dim_values(&g, &ins, &HashMap::new()).expect_err("Sqrt of a dim is folded at the bound otherwise").to_string();
    assert!(err.contains("n2") && err.contains("bounded dim"), "{err}");
}

#[test]
fn a_dim_value_read_as_data_is_computed_at_run_time() {
    let (mut g, ins, sh, y) = sqrt_of_a_dim();
    g.outputs = vec![y, sh];
    crate::passes::infer::infer(&mut g).expect("infer");
    let out_name = g.value(sh).name.clone();
    // The Cast's float value (Sqrt reads it) and the Shape (a graph output).
    assert_eq!(crate::passes::dim_values::materialize(&mut g, &ins, &HashMap::new()).expect("materialize"), 2);
    check_no_dim_values(&g, &ins, &HashMap::new()).expect("no dim value is read as data any more");
    let producer = |v: ValueId| match g.value(v).kind {
        ValueKind::Node(id) => format!("{:?}", g.node(id).op),
        _ => String::new(),
    };
    let sqrt = g.nodes.iter().find(|n| matches!(n.op, Op::Unary(UnaryOp::Sqrt))).expect("sqrt");
    let read = producer(sqrt.inputs[0].expect("input"));
    assert!(read.contains("DimValues") && read.contains("F32"), "{read}");
    assert!(producer(g.outputs[1]).contains("DimValues"));
    assert_eq!(g.value(g.outputs[1]).name, out_name, "the output keeps its name");
    // Its values are the dim read from the input at run time.
    let x3 = crate::interp::RtValue::Tensor(Tensor::from_f32s(vec![3, 4], vec![0.0; 12]));
    let outs = crate::interp::run(&g, vec![x3]).expect("run");
    assert_eq!(outs[1].as_tensor().expect("tensor").to_i64_vec(), Some(vec![3]));
    assert_eq!(outs[0].as_tensor().expect("tensor").to_f64_vec(), vec![3f64.sqrt() as f32 as f64]);
}

/// `Where(Equal(len(x), len(y)), len(x), 1)`: the comparison is decided where the dims are
/// given, with the guard that keeps it; the Where then picks one side.
#[test]
fn comparisons_of_dims_are_decided_with_a_guard() {
    let mut g = Graph::default();
    let x = input(&mut g, vec![sym("n")]);
    let y = input(&mut g, vec![sym("m")]);
    let sx = node(&mut g, crate::ops::dim_values::Shape { start: 0, end: None }.op(), vec![Some(x)]);
    let sy = node(&mut g, crate::ops::dim_values::Shape { start: 0, end: None }.op(), vec![Some(y)]);
    let eq = node(&mut g, Op::Binary(crate::ir::BinaryOp::Equal), vec![Some(sx), Some(sy)]);
    let one = g.add_const("one", Tensor::from_i64s(vec![1], vec![1]));
    let w = node(&mut g, crate::ops::select::op(), vec![Some(eq), Some(sx), Some(one)]);
    g.outputs = vec![w];
    crate::passes::infer::infer(&mut g).expect("infer");
    let ins = HashMap::from([(x, vec![v("n")]), (y, vec![v("m")])]);
    let at = |n: i64, m: i64| HashMap::from([("n".to_string(), n), ("m".to_string(), m)]);
    let same = super::symbolic::analyze_at(&g, &ins, &Default::default(), &at(4, 4)).expect("analysis");
    assert_eq!(same.ints[&w], vec![v("n")]);
    assert_eq!((same.guards.len(), same.guards[0].rel), (1, crate::ir::Rel::Equal));
    let differ = super::symbolic::analyze_at(&g, &ins, &Default::default(), &at(4, 6)).expect("analysis");
    assert_eq!(differ.ints[&w], vec![k(1)]);
    assert_eq!(differ.guards[0].rel, crate::ir::Rel::Differ);
    // Without values the comparison is a run-time value, and so is the Where.
    let undecided = analyze(&g, &ins, &Default::default()).expect("analysis");
    assert!(!undecided.ints.contains_key(&w) && undecided.guards.is_empty());
}

#[test]
fn ops_without_a_rule_are_refused_with_the_op_name() {
    let mut g = Graph::default();
    let x = input(&mut g, vec![sym("n"), Dim::Fixed(4)]);
    let y = node(&mut g, crate::ops::compress::NonZero.op(), vec![Some(x)]);
    g.outputs = vec![y];
    let ins = HashMap::from([(x, vec![v("n"), k(4)])]);
    let err = analyze(&g, &ins, &Default::default()).expect_err("no rule").to_string();
    assert!(err.contains("does not support bounded dims yet; pin them with --input"), "{err}");
}
