//! Interpreter tests for control flow, sequences, Einsum and the quantization ops.
use burnc_compiler::interp::{run, RtValue};
use burnc_compiler::ir::{BinaryOp, DType, Graph, Op, SeqOp, UnaryOp, ValueId, ValueKind, ValueType};
use burnc_compiler::ops::IntoOp;
use burnc_compiler::{Data, Tensor};

fn input(g: &mut Graph, name: &str) -> ValueId {
    let v = g.add_value(name, ValueType::Unknown, ValueKind::Input);
    g.inputs.push(v);
    v
}

fn f32s(shape: &[usize], v: &[f32]) -> RtValue {
    RtValue::Tensor(Tensor::from_f32s(shape.to_vec(), v.to_vec()))
}

fn tensor(v: &RtValue) -> &Tensor {
    v.as_tensor().unwrap()
}

/// Graph with one node over `n_in` inputs and `n_out` outputs.
fn single(op: Op, n_in: usize, n_out: usize) -> Graph {
    let mut g = Graph::default();
    let ins: Vec<Option<ValueId>> = (0..n_in).map(|i| Some(input(&mut g, &format!("in{i}")))).collect();
    let names: Vec<String> = (0..n_out).map(|i| format!("out{i}")).collect();
    let (_, outs) = g.add_node("n", op, ins, &names);
    g.outputs = outs;
    g
}

/// Loop whose body reads `offset` (a node output of the outer graph, used nowhere else) and
/// runs a nested If that reads the body's carried value: outer reads must keep values alive.
#[test]
fn loop_reads_outer_values_and_stacks_scan_outputs() {
    // Body: (iter, cond, acc) -> (cond, acc + offset, If(true){acc})
    let mut then_g = Graph { name: "then".into(), ..Default::default() };
    let acc_outer = then_g.add_value("acc", ValueType::Unknown, ValueKind::Outer);
    let (_, t_out) = then_g.add_node("id", Op::Unary(UnaryOp::Identity), vec![Some(acc_outer)], &["t".into()]);
    then_g.outputs = t_out;
    let else_g = then_g.clone();

    let mut body = Graph { name: "body".into(), ..Default::default() };
    let _iter = input(&mut body, "iter");
    let cond = input(&mut body, "cond");
    let acc = input(&mut body, "acc");
    let off = body.add_value("offset", ValueType::Unknown, ValueKind::Outer);
    let (_, c_out) = body.add_node("c", Op::Unary(UnaryOp::Identity), vec![Some(cond)], &["cond_out".into()]);
    let (_, sum) = body.add_node("add", Op::Binary(BinaryOp::Add), vec![Some(acc), Some(off)], &["acc_out".into()]);
    let t = body.add_const("t", Tensor::new(vec![], Data::Bool(vec![true])));
    let (_, scan) = body.add_node(
        "if",
        Op::If { then_branch: Box::new(then_g), else_branch: Box::new(else_g) },
        vec![Some(t)],
        &["scan".into()],
    );
    body.outputs = vec![c_out[0], sum[0], scan[0]];

    let mut g = Graph::default();
    let x = input(&mut g, "x");
    let m = g.add_const("m", Tensor::scalar_i64(3));
    let (_, offset) = g.add_node("neg", Op::Unary(UnaryOp::Neg), vec![Some(x)], &["offset".into()]);
    let init = g.add_const("init", Tensor::from_f32s(vec![2], vec![0.0, 1.0]));
    let (_, outs) = g.add_node("loop", Op::Loop { body: Box::new(body) }, vec![Some(m), None, Some(init)], &["final".into(), "stacked".into()]);
    let _ = offset;
    g.outputs = outs;

    let res = run(&g, vec![f32s(&[2], &[-1.0, -2.0])]).unwrap();
    assert_eq!(tensor(&res[0]), &Tensor::from_f32s(vec![2], vec![3.0, 7.0]));
    assert_eq!(tensor(&res[1]), &Tensor::from_f32s(vec![3, 2], vec![0.0, 1.0, 1.0, 3.0, 2.0, 5.0]));
}

#[test]
fn loop_with_zero_trips_returns_initial_values() {
    let mut body = Graph::default();
    let _i = input(&mut body, "i");
    let c = input(&mut body, "c");
    let v = input(&mut body, "v");
    body.outputs = vec![c, v];
    let mut g = Graph::default();
    let m = g.add_const("m", Tensor::scalar_i64(0));
    let v0 = input(&mut g, "v0");
    let (_, outs) = g.add_node("loop", Op::Loop { body: Box::new(body) }, vec![Some(m), None, Some(v0)], &["o".into()]);
    g.outputs = outs;
    let res = run(&g, vec![f32s(&[1], &[5.0])]).unwrap();
    assert_eq!(tensor(&res[0]), &Tensor::from_f32s(vec![1], vec![5.0]));
}

#[test]
fn scan_reverse_input_and_cumulative_state() {
    // state s, input x_t: s' = s + x_t, scan out = s'
    let mut body = Graph::default();
    let s = input(&mut body, "s");
    let x = input(&mut body, "x");
    let (_, o) = body.add_node("add", Op::Binary(BinaryOp::Add), vec![Some(s), Some(x)], &["s2".into()]);
    let (_, o2) = body.add_node("id", Op::Unary(UnaryOp::Identity), vec![Some(o[0])], &["y".into()]);
    body.outputs = vec![o[0], o2[0]];
    let g = single(
        Op::Scan {
            body: Box::new(body),
            num_scan_inputs: 1,
            input_axes: vec![],
            output_axes: vec![],
            input_directions: vec![1],
            output_directions: vec![],
        },
        2,
        2,
    );
    let res = run(&g, vec![f32s(&[1], &[0.0]), f32s(&[3, 1], &[1.0, 2.0, 3.0])]).unwrap();
    assert_eq!(tensor(&res[0]), &Tensor::from_f32s(vec![1], vec![6.0]));
    assert_eq!(tensor(&res[1]), &Tensor::from_f32s(vec![3, 1], vec![3.0, 5.0, 6.0]));
}

#[test]
fn split_to_sequence_then_concat_with_new_axis() {
    let mut g = Graph::default();
    let x = input(&mut g, "x");
    let (_, seq) = g.add_node("split", Op::Seq(SeqOp::SplitTo { axis: 1, keepdims: false }), vec![Some(x)], &["s".into()]);
    let (_, len) = g.add_node("len", Op::Seq(SeqOp::Length), vec![Some(seq[0])], &["n".into()]);
    let (_, cat) =
        g.add_node("cat", Op::Seq(SeqOp::ConcatFrom { axis: 0, new_axis: true }), vec![Some(seq[0])], &["c".into()]);
    g.outputs = vec![len[0], cat[0]];
    let res = run(&g, vec![f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]).unwrap();
    assert_eq!(tensor(&res[0]), &Tensor::scalar_i64(3));
    // Stacking the columns transposes.
    assert_eq!(tensor(&res[1]), &Tensor::from_f32s(vec![3, 2], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
}

#[test]
fn sequence_at_out_of_range_is_an_error_not_a_panic() {
    let mut g = Graph::default();
    let x = input(&mut g, "x");
    let (_, seq) = g.add_node("c", Op::Seq(SeqOp::Construct), vec![Some(x)], &["s".into()]);
    let p = g.add_const("p", Tensor::scalar_i64(5));
    let (_, at) = g.add_node("at", Op::Seq(SeqOp::At), vec![Some(seq[0]), Some(p)], &["y".into()]);
    g.outputs = at;
    let err = run(&g, vec![f32s(&[1], &[1.0])]).unwrap_err().to_string();
    assert!(err.contains("out of range"), "{err}");
}

fn einsum(eq: &str, xs: Vec<RtValue>) -> Tensor {
    let g = single(burnc_compiler::ops::einsum::Einsum::op(eq).unwrap(), xs.len(), 1);
    run(&g, xs).unwrap().remove(0).into_tensor().unwrap()
}

#[test]
fn einsum_forms() {
    let a = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let b = f32s(&[2, 2], &[5.0, 6.0, 7.0, 8.0]);
    let mm = Tensor::from_f32s(vec![2, 2], vec![19.0, 22.0, 43.0, 50.0]);
    assert_eq!(einsum("ij,jk->ik", vec![a.clone(), b.clone()]), mm);
    assert_eq!(einsum("ij,jk", vec![a.clone(), b.clone()]), mm);
    assert_eq!(einsum("ii->i", vec![a.clone()]), Tensor::from_f32s(vec![2], vec![1.0, 4.0]));
    assert_eq!(einsum("ii", vec![a.clone()]), Tensor::from_f32s(vec![], vec![5.0]));
    assert_eq!(einsum("...ij->...ji", vec![a.clone()]), Tensor::from_f32s(vec![2, 2], vec![1.0, 3.0, 2.0, 4.0]));
    assert_eq!(einsum("ij->", vec![a]), Tensor::from_f32s(vec![], vec![10.0]));
    let ints = RtValue::Tensor(Tensor::new(vec![3], Data::I32(vec![1, 2, 3])));
    assert_eq!(einsum("i,i", vec![ints.clone(), ints]), Tensor::new(vec![], Data::I32(vec![14])));
}

#[test]
fn quantize_saturates_and_rounds_half_to_even() {
    let g = single(burnc_compiler::ops::quant::Quantize { axis: 1, block_size: 0, output_dtype: None, saturate: true }.op(), 3, 1);
    let zp = RtValue::Tensor(Tensor::new(vec![], Data::U8(vec![128])));
    let res = run(&g, vec![f32s(&[5], &[1.0, 3.0, -254.0, 1000.0, -1000.0]), f32s(&[], &[2.0]), zp]).unwrap();
    assert_eq!(tensor(&res[0]), &Tensor::new(vec![5], Data::U8(vec![128, 130, 1, 255, 0])));
}

#[test]
fn matmul_integer_uses_integer_arithmetic() {
    let g = single(burnc_compiler::ops::integer::MatMulInteger.op(), 4, 1);
    let a = RtValue::Tensor(Tensor::new(vec![1, 2], Data::U8(vec![255, 255])));
    let b = RtValue::Tensor(Tensor::new(vec![2, 1], Data::U8(vec![255, 1])));
    let az = RtValue::Tensor(Tensor::new(vec![], Data::U8(vec![0])));
    let bz = RtValue::Tensor(Tensor::new(vec![], Data::U8(vec![1])));
    let res = run(&g, vec![a, b, az, bz]).unwrap();
    assert_eq!(tensor(&res[0]), &Tensor::new(vec![1, 1], Data::I32(vec![255 * 254])));
    let _ = DType::I32;
}
