//! Tests of the passes on hand-built graphs: shapes after inference, and interpreter outputs
//! equal before and after folding / DCE on random inputs.
use crate::ops::matmul::{Gemm, MatMul};
use crate::ops::view::{Flatten, Unsqueeze};
use super::{dce::dce, fold::fold, infer::infer, prepare, PassError};
use crate::interp::{self, RtValue};
use crate::ir::{AutoPad, BinaryOp, DType, Dim, Graph, Op, PoolKind, Shape, TensorType, UnaryOp, ValueId, ValueKind, ValueType, Window};
use crate::ops::IntoOp;
use crate::tensor::Tensor;

fn sym(n: &str) -> Dim {
    Dim::Sym { name: n.into(), bound: None }
}
fn f(n: usize) -> Dim {
    Dim::Fixed(n)
}
fn input(g: &mut Graph, name: &str, dtype: DType, dims: Vec<Dim>) -> ValueId {
    let v = g.add_value(name, ValueType::Tensor(TensorType { dtype, shape: Some(Shape(dims)) }), ValueKind::Input);
    g.inputs.push(v);
    v
}
fn node(g: &mut Graph, op: Op, inputs: Vec<Option<ValueId>>) -> ValueId {
    let name = format!("n{}", g.nodes.len());
    g.add_node(name.clone(), op, inputs, &[format!("{name}_out")]).1[0]
}
fn shape_of(g: &Graph, v: ValueId) -> Shape {
    g.tensor_type(v).and_then(|t| t.shape.clone()).expect("shape known")
}
fn ints(g: &mut Graph, v: Vec<i64>) -> ValueId {
    let n = g.values.len();
    g.add_const(format!("c{n}"), Tensor::from_i64s(vec![v.len()], v))
}
fn win(k: &[usize], s: &[usize], p: &[usize]) -> Window {
    Window { kernel_shape: k.to_vec(), strides: s.to_vec(), pads: p.to_vec(), dilations: vec![], auto_pad: AutoPad::NotSet, ceil_mode: false }
}
/// Deterministic pseudo-random f32 tensor.
fn rand(shape: &[usize], seed: u64) -> Tensor {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_f32s(shape.to_vec(), v)
}
fn run(g: &Graph, inputs: &[Tensor]) -> Vec<RtValue> {
    interp::run(g, inputs.iter().cloned().map(RtValue::Tensor).collect()).expect("interpreter runs")
}

#[test]
fn conv_pool_keep_symbolic_batch() {
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, vec![sym("N"), f(3), f(224), f(224)]);
    let w = g.add_const("w", Tensor::zeros(DType::F32, vec![64, 3, 7, 7]));
    let c = node(&mut g, Op::Conv { window: win(&[], &[2, 2], &[3, 3, 3, 3]), group: 1 }, vec![Some(x), Some(w), None]);
    let mut pw = win(&[3, 3], &[2, 2], &[0, 0, 0, 0]);
    pw.ceil_mode = true;
    let p = node(&mut g, crate::ops::pool::Pool { kind: PoolKind::Max, window: pw, column_major: false }.op(), vec![Some(c)]);
    let gp = node(&mut g, crate::ops::pool::GlobalPool { kind: PoolKind::Avg { count_include_pad: true } }.op(), vec![Some(p)]);
    let fl = node(&mut g, Flatten { axis: 1 }.op(), vec![Some(gp)]);
    g.outputs = vec![fl];
    infer(&mut g).unwrap();
    assert_eq!(shape_of(&g, c), Shape(vec![sym("N"), f(64), f(112), f(112)]));
    // ceil((112 - 3) / 2) + 1 = 56
    assert_eq!(shape_of(&g, p), Shape(vec![sym("N"), f(64), f(56), f(56)]));
    assert_eq!(shape_of(&g, fl), Shape(vec![sym("N"), f(64)]));
}

#[test]
fn conv_same_padding_keeps_symbolic_spatial() {
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, vec![sym("N"), f(3), sym("H"), f(9)]);
    let w = g.add_const("w", Tensor::zeros(DType::F32, vec![6, 1, 3, 3]));
    let mut wi = win(&[3, 3], &[], &[]);
    wi.auto_pad = AutoPad::SameUpper;
    let c = node(&mut g, Op::Conv { window: wi.clone(), group: 3 }, vec![Some(x), Some(w)]);
    wi.strides = vec![2, 2];
    let c2 = node(&mut g, Op::Conv { window: wi, group: 3 }, vec![Some(x), Some(w)]);
    g.outputs = vec![c, c2];
    infer(&mut g).unwrap();
    assert_eq!(shape_of(&g, c), Shape(vec![sym("N"), f(6), sym("H"), f(9)]));
    // Stride 2: ceil(H / 2), an expression of H (the window's one size rule, `ops::window`).
    let s2 = shape_of(&g, c2);
    assert_eq!(s2.0[3], f(5));
    assert!(matches!(&s2.0[2], Dim::Sym { name, .. } if name == &crate::ir::DimExpr::var("H").ceil_div(2).to_string()), "{s2}");
}

#[test]
fn broadcasting_and_comparisons() {
    let mut g = Graph::default();
    let a = input(&mut g, "a", DType::F32, vec![sym("B"), f(1), f(4)]);
    let b = input(&mut g, "b", DType::F32, vec![f(3), f(1)]);
    let s = node(&mut g, Op::Binary(BinaryOp::Add), vec![Some(a), Some(b)]);
    let lt = node(&mut g, Op::Binary(BinaryOp::Less), vec![Some(s), Some(a)]);
    let wh = node(&mut g, crate::ops::select::op(), vec![Some(lt), Some(s), Some(a)]);
    g.outputs = vec![wh];
    infer(&mut g).unwrap();
    assert_eq!(shape_of(&g, s), Shape(vec![sym("B"), f(3), f(4)]));
    assert_eq!(g.tensor_type(lt).unwrap().dtype, DType::Bool);
    assert_eq!(g.tensor_type(wh).unwrap().dtype, DType::F32);
    assert_eq!(shape_of(&g, wh), Shape(vec![sym("B"), f(3), f(4)]));
}

#[test]
fn matmul_mismatch_is_a_node_error() {
    let mut g = Graph::default();
    let a = input(&mut g, "a", DType::F32, vec![f(2), f(3)]);
    let b = input(&mut g, "b", DType::F32, vec![f(4), f(5)]);
    let m = node(&mut g, MatMul.op(), vec![Some(a), Some(b)]);
    g.outputs = vec![m];
    match infer(&mut g) {
        Err(PassError::Node { node, op, reason }) => {
            assert_eq!(node, "n0");
            assert_eq!(op, "MatMul");
            assert!(reason.contains("inner dims of A and B are 3 and 4"), "{reason}");
        }
        other => panic!("expected a node error, got {other:?}"),
    }
}

#[test]
fn matmul_batched_and_gemm() {
    let mut g = Graph::default();
    let a = input(&mut g, "a", DType::F32, vec![sym("B"), f(1), f(7), f(3)]);
    let b = input(&mut g, "b", DType::F32, vec![f(5), f(3), f(4)]);
    let m = node(&mut g, MatMul.op(), vec![Some(a), Some(b)]);
    let v = input(&mut g, "v", DType::F32, vec![f(4)]);
    let mv = node(&mut g, MatMul.op(), vec![Some(m), Some(v)]);
    let x = input(&mut g, "x", DType::F32, vec![f(2), f(6)]);
    let w = input(&mut g, "w", DType::F32, vec![f(10), f(6)]);
    let gm = node(&mut g, Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true }.op(), vec![Some(x), Some(w), None]);
    g.outputs = vec![mv, gm];
    infer(&mut g).unwrap();
    assert_eq!(shape_of(&g, m), Shape(vec![sym("B"), f(5), f(7), f(4)]));
    assert_eq!(shape_of(&g, mv), Shape(vec![sym("B"), f(5), f(7)]));
    assert_eq!(shape_of(&g, gm), Shape::fixed(&[2, 10]));
}

#[test]
fn unknown_inputs_are_not_errors() {
    let mut g = Graph::default();
    let x = g.add_value("x", ValueType::Unknown, ValueKind::Input);
    g.inputs.push(x);
    let r = node(&mut g, Op::Unary(UnaryOp::Relu), vec![Some(x)]);
    let t = node(&mut g, crate::ops::transpose::Transpose { perm: None }.op(), vec![Some(r)]);
    let y = input(&mut g, "y", DType::F32, vec![f(2), f(3)]);
    let s = node(&mut g, crate::ops::dim_values::Shape { start: 0, end: None }.op(), vec![Some(y)]);
    let rs = node(&mut g, Op::Reshape { allowzero: false }, vec![Some(y), Some(x)]);
    let e = node(&mut g, crate::ops::einsum::Einsum::op("ij->ji").unwrap(), vec![Some(y)]);
    g.outputs = vec![t, s, rs, e];
    infer(&mut g).unwrap();
    assert_eq!(g.value(t).ty, ValueType::Unknown);
    assert_eq!(shape_of(&g, s), Shape::fixed(&[2]));
    assert!(matches!(g.value(rs).ty, ValueType::Tensor(TensorType { dtype: DType::F32, shape: None })));
    assert_eq!(shape_of(&g, e), Shape::fixed(&[3, 2]));
}

#[test]
fn einsum_shapes() {
    let cases: &[(&str, &[&[usize]], &[usize])] = &[
        ("btnh,bsnh->bnts", &[&[2, 9, 2, 4], &[2, 7, 2, 4]], &[2, 2, 9, 7]),
        ("ij,jk", &[&[3, 4], &[4, 5]], &[3, 5]),
        ("ba,ca", &[&[3, 4], &[5, 4]], &[3, 5]),
        ("...ij,...jk->...ik", &[&[2, 1, 3, 4], &[5, 4, 6]], &[2, 5, 3, 6]),
        ("i...,i...", &[&[3, 2, 2], &[3, 1, 2]], &[2, 2]),
        ("ii->i", &[&[4, 4]], &[4]),
        ("i j , j k -> i k", &[&[3, 4], &[4, 5]], &[3, 5]),
        ("ij->", &[&[3, 4]], &[]),
    ];
    for (eq, ins, want) in cases {
        let mut g = Graph::default();
        let ids: Vec<_> = ins.iter().enumerate().map(|(k, s)| Some(input(&mut g, &format!("x{k}"), DType::F32, s.iter().map(|&d| f(d)).collect()))).collect();
        let e = node(&mut g, crate::ops::einsum::Einsum::op(eq).unwrap(), ids);
        g.outputs = vec![e];
        infer(&mut g).unwrap_or_else(|err| panic!("{eq}: {err:?}"));
        assert_eq!(shape_of(&g, e), Shape::fixed(want), "{eq}");
    }
    for (eq, ins) in [("ij,jk", &[&[3, 4][..], &[5, 5][..]][..]), ("ijk", &[&[3, 4][..]][..]), ("ij->ik", &[&[3, 4][..]][..])] {
        let mut g = Graph::default();
        let ids: Vec<_> = ins.iter().enumerate().map(|(k, s)| Some(input(&mut g, &format!("x{k}"), DType::F32, s.iter().map(|&d| f(d)).collect()))).collect();
        let Ok(op) = crate::ops::einsum::Einsum::op(eq) else { continue };
        let e = node(&mut g, op, ids);
        g.outputs = vec![e];
        assert!(infer(&mut g).is_err(), "{eq} must be refused");
    }
}

#[test]
fn shape_ops_with_constant_operands() {
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, vec![sym("N"), f(4), f(6), f(8)]);
    let s = ints(&mut g, vec![0, -1, 8]);
    let r = node(&mut g, Op::Reshape { allowzero: false }, vec![Some(x), Some(s)]);
    let (st, en, ax) = (ints(&mut g, vec![1, 0]), ints(&mut g, vec![-1, 100]), ints(&mut g, vec![2, 1]));
    let sl = node(&mut g, crate::ops::slice::Slice.op(), vec![Some(x), Some(st), Some(en), Some(ax)]);
    let pads = ints(&mut g, vec![0, 0, 1, 2, 0, 0, 3, 4]);
    let pd = node(&mut g, crate::ops::pad::Pad { mode: crate::ir::PadMode::Constant }.op(), vec![Some(x), Some(pads)]);
    let un = node(&mut g, Unsqueeze { axes: Some(vec![0, -1]) }.op(), vec![Some(x)]);
    let tr = node(&mut g, crate::ops::transpose::Transpose { perm: Some(vec![0, 2, 3, 1]) }.op(), vec![Some(x)]);
    let ct = node(&mut g, Op::Concat { axis: 1 }, vec![Some(x), Some(x)]);
    let sp = g.add_node("split", crate::ops::split::Split { axis: 3, sizes: None, outputs: 3 }.op(), vec![Some(x)], &["a".into(), "b".into(), "c".into()]).1;
    let idx = g.add_const("idx", Tensor::from_i64s(vec![2, 2], vec![0, 1, 2, 3]));
    let ga = node(&mut g, Op::Gather { axis: 2 }, vec![Some(x), Some(idx)]);
    let k = ints(&mut g, vec![3]);
    let tk = g.add_node("topk", crate::ops::topk::TopK { axis: -1, largest: true }.op(), vec![Some(x), Some(k)], &["tv".into(), "ti".into()]).1;
    let rd = node(&mut g, crate::ops::reduce::Reduce { op: crate::ir::ReduceOp::Mean, axes: Some(vec![2, 3]), keepdims: false, noop_with_empty_axes: false }.op(), vec![Some(x)]);
    let d2s = node(&mut g, crate::ops::depth_space::DepthToSpace { blocksize: 2, crd: false }.op(), vec![Some(x)]);
    let rep = ints(&mut g, vec![1, 2, 1, 1]);
    let ti = node(&mut g, crate::ops::tile::Tile.op(), vec![Some(x), Some(rep)]);
    let es = ints(&mut g, vec![3, 1, 1, 1, 1]);
    let ex = node(&mut g, Op::Expand, vec![Some(x), Some(es)]);
    g.outputs = vec![r, sl, pd, un, tr, ct, ga, tk[1], rd, d2s, ti, ex];
    infer(&mut g).unwrap();
    assert_eq!(shape_of(&g, r), Shape(vec![sym("N"), f(24), f(8)]));
    assert_eq!(shape_of(&g, sl), Shape(vec![sym("N"), f(4), f(4), f(8)]));
    assert_eq!(shape_of(&g, pd), Shape(vec![sym("N"), f(4), f(10), f(14)]));
    assert_eq!(shape_of(&g, un), Shape(vec![f(1), sym("N"), f(4), f(6), f(8), f(1)]));
    assert_eq!(shape_of(&g, tr), Shape(vec![sym("N"), f(6), f(8), f(4)]));
    assert_eq!(shape_of(&g, ct), Shape(vec![sym("N"), f(8), f(6), f(8)]));
    assert_eq!(shape_of(&g, sp[2]), Shape(vec![sym("N"), f(4), f(6), f(2)]));
    assert_eq!(shape_of(&g, ga), Shape(vec![sym("N"), f(4), f(2), f(2), f(8)]));
    assert_eq!(shape_of(&g, tk[1]), Shape(vec![sym("N"), f(4), f(6), f(3)]));
    assert_eq!(g.tensor_type(tk[1]).unwrap().dtype, DType::I64);
    assert_eq!(shape_of(&g, rd), Shape(vec![sym("N"), f(4)]));
    assert_eq!(shape_of(&g, d2s), Shape(vec![sym("N"), f(1), f(12), f(16)]));
    assert_eq!(shape_of(&g, ti), Shape(vec![sym("N"), f(8), f(6), f(8)]));
    assert_eq!(shape_of(&g, ex), Shape(vec![f(3), sym("N"), f(4), f(6), f(8)]));
}

/// x [2,3,4,5] → Shape → Gather([0]) (or Slice [0:1]) → Concat(.., [-1]) → Reshape, plus an
/// Add of two constants and a dead Exp.
fn shape_chain_graph(dims: Vec<Dim>, gather: bool) -> (Graph, ValueId) {
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, dims);
    let s = node(&mut g, crate::ops::dim_values::Shape { start: 0, end: None }.op(), vec![Some(x)]);
    let i0 = ints(&mut g, vec![0]);
    let n = if gather {
        node(&mut g, Op::Gather { axis: 0 }, vec![Some(s), Some(i0)])
    } else {
        let one = ints(&mut g, vec![1]);
        node(&mut g, crate::ops::slice::Slice.op(), vec![Some(s), Some(i0), Some(one)])
    };
    let m1 = ints(&mut g, vec![-1]);
    let target = node(&mut g, Op::Concat { axis: 0 }, vec![Some(n), Some(m1)]);
    let r = node(&mut g, Op::Reshape { allowzero: false }, vec![Some(x), Some(target)]);
    let c1 = g.add_const("c1", rand(&[60], 1));
    let c2 = g.add_const("c2", rand(&[60], 2));
    let c = node(&mut g, Op::Binary(BinaryOp::Add), vec![Some(c1), Some(c2)]);
    let y = node(&mut g, Op::Binary(BinaryOp::Mul), vec![Some(r), Some(c)]);
    let _dead = node(&mut g, Op::Unary(UnaryOp::Exp), vec![Some(y)]);
    g.outputs = vec![y];
    (g, r)
}

#[test]
fn fold_shape_chain_to_static_reshape() {
    let (mut g, _) = shape_chain_graph(vec![f(2), f(3), f(4), f(5)], false);
    let x = rand(&[2, 3, 4, 5], 7);
    let before = run(&g, &[x.clone()]);
    prepare(&mut g).unwrap();
    let after = run(&g, &[x]);
    assert_eq!(before, after);
    // Only Reshape and Mul remain; the Reshape's shape is a constant.
    let ops: Vec<String> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, vec!["Reshape", "Mul"]);
    let tgt = g.nodes[0].inputs[1].unwrap();
    assert!(matches!(&g.value(tgt).kind, ValueKind::Const(t) if t.to_i64_vec() == Some(vec![2, -1])));
    assert_eq!(shape_of(&g, g.outputs[0]), Shape::fixed(&[2, 60]));
    crate::ir::verify::verify(&g).unwrap();
}

#[test]
fn symbolic_batch_flows_through_shape_chain() {
    let (mut g, r) = shape_chain_graph(vec![sym("N"), f(3), f(4), f(5)], true);
    fold(&mut g).unwrap();
    assert_eq!(shape_of(&g, r), Shape(vec![sym("N"), f(60)]));
    assert_eq!(shape_of(&g, g.outputs[0]), Shape(vec![sym("N"), f(60)]));
    // The constant Add folded even though the shape did not.
    assert!(!g.nodes.iter().any(|n| matches!(n.op, Op::Binary(BinaryOp::Add))));
}

#[test]
fn folded_reduce_axes_become_the_attribute() {
    // Opset 18's axes input, computed from the rank (as ONNX's expanded functions do): after
    // folding it is the op's attribute, and the scratch rule knows it needs none.
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, vec![sym("N"), f(3), f(4)]);
    let mut scalar = |name: &str, v: i64| g.add_const(name, Tensor::from_i64s(vec![], vec![v]));
    let (start, limit, delta) = (scalar("start", 1), scalar("limit", 3), scalar("delta", 1));
    let axes = node(&mut g, crate::ops::range::Range.op(), vec![Some(start), Some(limit), Some(delta)]);
    let r = crate::ops::reduce::Reduce { op: crate::ir::ReduceOp::Mean, axes: None, keepdims: true, noop_with_empty_axes: false };
    let y = node(&mut g, r.op(), vec![Some(x), Some(axes)]);
    g.outputs = vec![y];
    let xs = rand(&[2, 3, 4], 7);
    let before = run(&g, std::slice::from_ref(&xs));
    prepare(&mut g).unwrap();
    let n = g.nodes.iter().find(|n| n.outputs == g.outputs).unwrap_or_else(|| panic!("the reduction stays: {:?}", g.nodes.iter().map(|n| (&n.op, &n.outputs)).collect::<Vec<_>>()));
    let Op::Def(d) = &n.op else { panic!("not a definition: {:?}", n.op) };
    assert_eq!(d.get::<crate::ops::reduce::Reduce>().and_then(|r| r.axes.clone()), Some(vec![1, 2]));
    assert_eq!(n.inputs, vec![Some(x)]);
    assert_eq!(shape_of(&g, g.outputs[0]), Shape(vec![sym("N"), f(1), f(1)]));
    assert_eq!(d.scratch_bytes(&[Some((DType::F32, vec![2, 3, 4]))]), 0);
    assert_eq!(run(&g, &[xs]), before);
}

#[test]
fn dce_removes_dead_nodes_and_consts() {
    let (mut g, _) = shape_chain_graph(vec![f(2), f(3), f(4), f(5)], false);
    let unused = g.add_const("unused", Tensor::scalar_i64(3));
    let nvals = g.values.len();
    let x = rand(&[2, 3, 4, 5], 3);
    let before = run(&g, &[x.clone()]);
    dce(&mut g).unwrap();
    crate::ir::verify::verify(&g).unwrap();
    assert!(g.values.len() < nvals);
    assert!(!g.values.iter().any(|v| v.name == "unused"));
    assert!(!g.nodes.iter().any(|n| matches!(n.op, Op::Unary(UnaryOp::Exp))));
    assert_eq!(run(&g, &[x]), before);
    let _ = unused;
}

#[test]
fn if_with_constant_condition_is_inlined() {
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, vec![f(2), f(3)]);
    let s = node(&mut g, crate::ops::dim_values::Shape { start: 1, end: None }.op(), vec![Some(x)]);
    let three = ints(&mut g, vec![3]);
    let eq = node(&mut g, Op::Binary(BinaryOp::Equal), vec![Some(s), Some(three)]);
    let branch = |op: Op| {
        let mut b = Graph::default();
        let xo = b.add_value("x", ValueType::Unknown, ValueKind::Outer);
        let (_, o) = b.add_node("b", op, vec![Some(xo)], &["bo".into()]);
        b.outputs = o;
        b
    };
    let (_, y) = g.add_node(
        "if",
        Op::If { then_branch: Box::new(branch(Op::Unary(UnaryOp::Neg))), else_branch: Box::new(branch(Op::Unary(UnaryOp::Exp))) },
        vec![Some(eq)],
        &["y".into()],
    );
    let z = node(&mut g, Op::Unary(UnaryOp::Relu), vec![Some(y[0])]);
    // A second If on the same (folded) condition.
    let (_, y2) = g.add_node(
        "if2",
        Op::If { then_branch: Box::new(branch(Op::Unary(UnaryOp::Abs))), else_branch: Box::new(branch(Op::Unary(UnaryOp::Exp))) },
        vec![Some(eq)],
        &["y2".into()],
    );
    g.outputs = vec![z, y2[0]];
    prepare(&mut g).unwrap();
    let ops: Vec<String> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, vec!["Neg", "Relu", "Abs"]);
    g.outputs.truncate(1);
    assert_eq!(shape_of(&g, g.outputs[0]), Shape::fixed(&[2, 3]));
    let xin = rand(&[2, 3], 5);
    let out = run(&g, &[xin.clone()]);
    let want: Vec<f32> = xin.to_f64_vec().iter().map(|v| (-v).max(0.0) as f32).collect();
    assert_eq!(out, vec![RtValue::Tensor(Tensor::from_f32s(vec![2, 3], want))]);
}

#[test]
fn inference_is_idempotent() {
    let (mut g, _) = shape_chain_graph(vec![sym("N"), f(3), sym("H"), f(5)], true);
    infer(&mut g).unwrap();
    let once: Vec<ValueType> = g.values.iter().map(|v| v.ty.clone()).collect();
    infer(&mut g).unwrap();
    let twice: Vec<ValueType> = g.values.iter().map(|v| v.ty.clone()).collect();
    assert_eq!(once, twice);
}

#[test]
fn gather_of_shape_folds_without_the_interpreter() {
    let (mut g, _) = shape_chain_graph(vec![f(2), f(3), f(4), f(5)], true);
    prepare(&mut g).unwrap();
    // (DCE compacts value ids: look the Reshape up again.)
    assert_eq!(shape_of(&g, g.nodes[0].outputs[0]), Shape::fixed(&[2, 60]));
    let ops: Vec<String> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, vec!["Reshape", "Mul"]);
}

/// Conv → Mul/Add per channel → residual Add → Relu becomes one FusedConv, BatchNorm → Mul →
/// Add → Clip one ScaleShift; the fused graph gives the unfused graph's bits (no BatchNorm is
/// folded into a conv here, the one rewrite that changes rounding), and the report lists each
/// group with every node.
#[test]
fn fuse_epilogues_keep_the_bits() {
    use super::fuse::{fuse, Role};
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, vec![f(1), f(4), f(9), f(9)]);
    let r = input(&mut g, "r", DType::F32, vec![f(1), f(6), f(9), f(9)]);
    let w = g.add_const("w", rand(&[6, 4, 3, 3], 1));
    let b = g.add_const("b", rand(&[6], 2));
    let k1 = g.add_const("k1", rand(&[6, 1, 1], 3));
    let k2 = g.add_const("k2", rand(&[1, 6, 1, 1], 4));
    let c = node(&mut g, Op::Conv { window: win(&[3, 3], &[1, 1], &[1, 1, 1, 1]), group: 1 }, vec![Some(x), Some(w), Some(b)]);
    let m = node(&mut g, Op::Binary(BinaryOp::Mul), vec![Some(k1), Some(c)]);
    let a = node(&mut g, Op::Binary(BinaryOp::Add), vec![Some(m), Some(k2)]);
    let s = node(&mut g, Op::Binary(BinaryOp::Add), vec![Some(r), Some(a)]);
    let y = node(&mut g, Op::Unary(UnaryOp::Relu), vec![Some(s)]);
    // A standalone batch norm (its input is a graph input), then Mul, Add and Clip.
    let bn: Vec<ValueId> = (0..4).map(|i| {
        let t = rand(&[6], 10 + i);
        let t = if i == 3 { Tensor::from_f32s(vec![6], t.to_f64_vec().iter().map(|v| v.abs() as f32 + 0.1).collect()) } else { t };
        g.add_const(format!("bn{i}"), t)
    }).collect();
    let n = node(&mut g, crate::ops::channel_norm::BatchNorm { epsilon: 1e-5 }.op(), vec![Some(r), Some(bn[0]), Some(bn[1]), Some(bn[2]), Some(bn[3])]);
    let m2 = node(&mut g, Op::Binary(BinaryOp::Mul), vec![Some(n), Some(k1)]);
    let a2 = node(&mut g, Op::Binary(BinaryOp::Add), vec![Some(m2), Some(k2)]);
    let lo = g.add_const("lo", Tensor::from_f32s(vec![], vec![-0.25]));
    let hi = g.add_const("hi", Tensor::from_f32s(vec![], vec![0.5]));
    let mx = node(&mut g, Op::Binary(BinaryOp::Max), vec![Some(a2), Some(lo)]);
    let z = node(&mut g, Op::Binary(BinaryOp::Min), vec![Some(mx), Some(hi)]);
    g.outputs = vec![y, z];
    infer(&mut g).unwrap();
    let inputs = [rand(&[1, 4, 9, 9], 7), rand(&[1, 6, 9, 9], 8)];
    let want = run(&g, &inputs);
    let mut fused = g.clone();
    let report = fuse(&mut fused, super::fuse::Sizes::Static).unwrap();
    let ops: Vec<String> = fused.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, ["FusedConv", "ScaleShift"], "{ops:?}");
    assert!(matches!(fused.nodes[0].op, Op::FusedConv { act: crate::ir::Act::Relu, .. }));
    assert!(matches!(&fused.nodes[1].op, Op::Def(d) if d.get::<crate::ops::channel_norm::ScaleShift>().is_some_and(|s| s.act == crate::ir::Act::Clip(-0.25, 0.5))));
    let groups: Vec<Vec<(&str, Role)>> =
        report.groups.iter().map(|gr| gr.nodes.iter().map(|(o, _, r)| (o.as_str(), *r)).collect()).collect();
    assert_eq!(
        groups,
        [
            vec![("BatchNormalization", Role::Base), ("Mul", Role::Epilogue), ("Add", Role::Epilogue), ("Max", Role::Epilogue), ("Min", Role::Epilogue)],
            vec![("Conv", Role::Base), ("Mul", Role::Epilogue), ("Add", Role::Epilogue), ("Add", Role::Epilogue), ("Relu", Role::Epilogue)],
        ]
    );
    let got = run(&fused, &inputs);
    for (g, w) in got.iter().zip(&want) {
        let (RtValue::Tensor(g), RtValue::Tensor(w)) = (g, w) else { panic!("tensors") };
        assert_eq!(g.shape, w.shape);
        let bits = |t: &Tensor| t.to_f64_vec().iter().map(|v| (*v as f32).to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(g), bits(w));
    }
}

/// Conv → Sigmoid·Mul (SiLU as exporters write it) and Conv → HardSwish become FusedConvs with
/// those activations, with the unfused graph's bits; a Sigmoid whose output is also read
/// elsewhere is not SiLU.
#[test]
fn fuse_silu_and_hardswish_into_convs() {
    use super::fuse::fuse;
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, vec![f(1), f(4), f(9), f(9)]);
    let w = g.add_const("w", rand(&[6, 4, 3, 3], 1));
    let b = g.add_const("b", rand(&[6], 2));
    let conv = |g: &mut Graph| node(g, Op::Conv { window: win(&[3, 3], &[1, 1], &[1, 1, 1, 1]), group: 1 }, vec![Some(x), Some(w), Some(b)]);
    let c1 = conv(&mut g);
    let s1 = node(&mut g, Op::Unary(UnaryOp::Sigmoid), vec![Some(c1)]);
    let y1 = node(&mut g, Op::Binary(BinaryOp::Mul), vec![Some(s1), Some(c1)]);
    let c2 = conv(&mut g);
    let y2 = node(&mut g, Op::Unary(UnaryOp::HardSwish), vec![Some(c2)]);
    let c3 = conv(&mut g);
    let s3 = node(&mut g, Op::Unary(UnaryOp::Sigmoid), vec![Some(c3)]);
    let y3 = node(&mut g, Op::Binary(BinaryOp::Mul), vec![Some(c3), Some(s3)]);
    g.outputs = vec![y1, y2, y3, s3];
    infer(&mut g).unwrap();
    let inputs = [rand(&[1, 4, 9, 9], 7)];
    let want = run(&g, &inputs);
    let mut fused = g.clone();
    fuse(&mut fused, super::fuse::Sizes::Static).unwrap();
    let acts: Vec<Option<crate::ir::Act>> = fused.nodes.iter().map(|n| match n.op {
        Op::FusedConv { act, .. } => Some(act),
        _ => None,
    }).collect();
    assert_eq!(acts[..2], [Some(crate::ir::Act::Silu), Some(crate::ir::Act::HardSwish)], "{:?}", fused.nodes.iter().map(|n| n.op.name()).collect::<Vec<_>>());
    assert_eq!(acts.iter().flatten().count(), 2, "the third conv's Sigmoid is a graph output: no SiLU");
    let got = run(&fused, &inputs);
    for (g, w) in got.iter().zip(&want) {
        let (RtValue::Tensor(g), RtValue::Tensor(w)) = (g, w) else { panic!("tensors") };
        let bits = |t: &Tensor| t.to_f64_vec().iter().map(|v| (*v as f32).to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(g), bits(w));
    }
}

/// Elementwise chains become one `Elementwise` node each, with the unfused graph's bits: SiLU
/// (x used twice), a HardSwish written out with scalar constants (its input read by two nodes
/// of the chain and so an input of the group). A value that is a graph output or read outside
/// the chain stays a node of its own.
#[test]
fn fuse_elementwise_chains_keep_the_bits() {
    use super::fuse::fuse_exact;
    use crate::ir::scalar::Operand;
    let mut g = Graph::default();
    let x = input(&mut g, "x", DType::F32, vec![f(2), f(3), f(5)]);
    let y = input(&mut g, "y", DType::F32, vec![f(2), f(3), f(5)]);
    let k = |g: &mut Graph, name: &str, v: f32| g.add_const(name, Tensor::from_f32s(vec![], vec![v]));
    let s = node(&mut g, Op::Unary(UnaryOp::Sigmoid), vec![Some(x)]);
    let m = node(&mut g, Op::Binary(BinaryOp::Mul), vec![Some(x), Some(s)]);
    let (three, zero, six) = (k(&mut g, "three", 3.0), k(&mut g, "zero", 0.0), k(&mut g, "six", 6.0));
    let a = node(&mut g, Op::Binary(BinaryOp::Add), vec![Some(m), Some(three)]);
    let c = node(&mut g, Op::Binary(BinaryOp::Max), vec![Some(a), Some(zero)]);
    let d = node(&mut g, Op::Binary(BinaryOp::Min), vec![Some(c), Some(six)]);
    let e = node(&mut g, Op::Binary(BinaryOp::Mul), vec![Some(m), Some(d)]);
    let h = node(&mut g, Op::Binary(BinaryOp::Div), vec![Some(e), Some(six)]);
    // `t` is an output and read by Exp: neither joins the other.
    let t = node(&mut g, Op::Unary(UnaryOp::Tanh), vec![Some(y)]);
    let ex = node(&mut g, Op::Unary(UnaryOp::Exp), vec![Some(t)]);
    let z0 = node(&mut g, Op::Binary(BinaryOp::Sub), vec![Some(ex), Some(h)]);
    // A bias of the last dim repeats along the output: it joins the chain.
    let bias = g.add_const("bias", rand(&[5], 23));
    let z = node(&mut g, Op::Binary(BinaryOp::Add), vec![Some(bias), Some(z0)]);
    g.outputs = vec![h, t, z];
    infer(&mut g).unwrap();
    let inputs = [rand(&[2, 3, 5], 21), rand(&[2, 3, 5], 22)];
    let want = run(&g, &inputs);
    let mut fused = g.clone();
    let report = fuse_exact(&mut fused).unwrap();
    let ops: Vec<String> = fused.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, ["Elementwise", "Elementwise", "Tanh", "Elementwise"], "{ops:?}");
    let programs: Vec<&crate::ir::scalar::ScalarProgram> = fused.nodes.iter().filter_map(|n| if let Op::Elementwise(p) = &n.op { Some(&**p) } else { None }).collect();
    // SiLU reads x twice as one input; the HardSwish reads m and three constants.
    assert_eq!(programs[0].steps.len(), 2);
    assert_eq!(programs[0].steps[1].args, [Operand::Input(0), Operand::Step(0)]);
    assert_eq!(programs[1].steps.len(), 5);
    assert_eq!(programs[1].steps[0].args, [Operand::Input(0), Operand::Const(3.0)]);
    assert_eq!(fused.nodes[1].inputs.len(), 1);
    assert_eq!(report.groups.len(), 3, "{report:?}");
    let got = run(&fused, &inputs);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        let (RtValue::Tensor(g), RtValue::Tensor(w)) = (g, w) else { panic!("tensors") };
        assert_eq!(g.shape, w.shape);
        let bits = |t: &Tensor| t.to_f64_vec().iter().map(|v| (*v as f32).to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(g), bits(w));
    }
}
