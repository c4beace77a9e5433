//! Gradient checks: for every rule, analytic gradients (the backward graph run by the
//! interpreter) against central finite differences of the forward graph, in f64 on random
//! inputs, to 1e-4 relative. The loss is Σ y·R with a random R, so every output element's
//! gradient is weighted differently and a rule that mixes up elements or scales fails.
use crate::ops::matmul::{Gemm, MatMul};
use crate::ops::view::{Flatten, Squeeze, Unsqueeze};
use super::gradients;
use crate::interp::{self, RtValue};
use crate::ir::{AutoPad, BinaryOp, DType, Graph, LossReduction, Op, PadMode, PoolKind, ReduceOp, Shape, TensorType, UnaryOp, ValueId, ValueKind, ValueType, Window};
use crate::ops::IntoOp;
use crate::passes::prepare;
use crate::tensor::{Data, Tensor};

mod activations;
mod chains;
mod data;
mod dropout;
mod loss;
mod norm;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn tensor(&mut self, shape: &[usize], lo: f64, hi: f64) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::new(shape.to_vec(), Data::F64((0..n).map(|_| lo + (hi - lo) * self.next()).collect()))
    }
}

fn f64s(t: &RtValue) -> Vec<f64> {
    match t {
        RtValue::Tensor(t) => t.to_f64_vec(),
        other => panic!("expected a tensor, got {other:?}"),
    }
}

fn run(g: &Graph, xs: &[Tensor]) -> Vec<RtValue> {
    interp::run(g, xs.iter().cloned().map(RtValue::Tensor).collect()).expect("interpreter runs")
}

/// A graph with f64 inputs of `shapes` (values in [lo, hi]) and the op(s) `build` adds; the
/// gradient is checked against every input.
struct Check {
    shapes: Vec<Vec<usize>>,
    lo: f64,
    hi: f64,
    seed: u64,
    /// Finite-difference step.
    h: f64,
    /// When > 0, inputs are rounded to multiples of it (dyadic inputs and step keep a forward
    /// that rounds to f32 internally exact).
    grid: f64,
}

fn check(shapes: &[&[usize]], build: impl Fn(&mut Graph, &[ValueId]) -> ValueId) {
    check_range(shapes, -1.0, 1.0, build);
}

fn check_pos(shapes: &[&[usize]], build: impl Fn(&mut Graph, &[ValueId]) -> ValueId) {
    Check { shapes: shapes.iter().map(|s| s.to_vec()).collect(), lo: 0.5, hi: 2.0, seed: 11, h: 1e-5, grid: 0.0 }.run(build).expect("gradients agree");
}

/// Inputs drawn from [lo, hi].
fn check_range(shapes: &[&[usize]], lo: f64, hi: f64, build: impl Fn(&mut Graph, &[ValueId]) -> ValueId) {
    Check { shapes: shapes.iter().map(|s| s.to_vec()).collect(), lo, hi, seed: 7, h: 1e-5, grid: 0.0 }.run(build).expect("gradients agree");
}

impl Check {
    fn run(&self, build: impl Fn(&mut Graph, &[ValueId]) -> ValueId) -> Result<(), String> {
        self.run_seeded(build, 1.0)
    }

    /// `seed_scale` != 1 seeds the loss with that value: the analytic gradient is then wrong by
    /// that factor, which the comparison must catch (the checker's own test).
    fn run_seeded(&self, build: impl Fn(&mut Graph, &[ValueId]) -> ValueId, seed_scale: f64) -> Result<(), String> {
        let mut rng = Rng(self.seed);
        let mut g = Graph::default();
        let xs: Vec<ValueId> = self
            .shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let ty = ValueType::Tensor(TensorType { dtype: DType::F64, shape: Some(Shape::fixed(s)) });
                let v = g.add_value(format!("x{i}"), ty, ValueKind::Input);
                g.inputs.push(v);
                v
            })
            .collect();
        let mut inputs: Vec<Tensor> = self.shapes.iter().map(|s| rng.tensor(s, self.lo, self.hi)).collect();
        if self.grid > 0.0 {
            for t in &mut inputs {
                if let Data::F64(v) = &mut t.data {
                    v.iter_mut().for_each(|x| *x = (*x / self.grid).round() * self.grid);
                }
            }
        }
        let y = build(&mut g, &xs);
        g.outputs = vec![y];
        let y_shape = match &run(&g, &inputs)[0] {
            RtValue::Tensor(t) => t.shape.clone(),
            other => return Err(format!("output is {other:?}")),
        };
        let r = g.add_const("r", rng.tensor(&y_shape, -1.0, 1.0));
        let (_, p) = g.add_node("w", Op::Binary(BinaryOp::Mul), vec![Some(y), Some(r)], &["yr".into()]);
        let (_, l) = g.add_node(
            "loss",
            crate::ops::reduce::Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false }.op(),
            vec![Some(p[0])],
            &["loss".into()],
        );
        g.outputs = vec![l[0]];
        let fwd = g.clone();
        let mut bwd = g;
        let seed = (seed_scale != 1.0).then(|| bwd.add_const("seed", Tensor::new(vec![], Data::F64(vec![seed_scale]))));
        let grads = gradients(&mut bwd, l[0], seed, &xs).map_err(|e| e.to_string())?;
        bwd.outputs = grads;
        let analytic: Vec<Vec<f64>> = run(&bwd, &inputs).iter().map(f64s).collect();
        // The backward graph folds and survives DCE like any graph, with the same results.
        let mut prepared = bwd.clone();
        prepare(&mut prepared).map_err(|e| e.to_string())?;
        let again: Vec<Vec<f64>> = run(&prepared, &inputs).iter().map(f64s).collect();
        if again != analytic {
            return Err("gradients changed after prepare".into());
        }
        let loss = |xs: &[Tensor]| f64s(&run(&fwd, xs)[0])[0];
        let h = self.h;
        for (i, a) in analytic.iter().enumerate() {
            if a.len() != inputs[i].numel() {
                return Err(format!("gradient {i} has {} elements, input {}", a.len(), inputs[i].numel()));
            }
            for (j, &av) in a.iter().enumerate() {
                let diff = |h: f64| {
                    let mut p = inputs.clone();
                    let mut m = inputs.clone();
                    if let (Data::F64(pv), Data::F64(mv)) = (&mut p[i].data, &mut m[i].data) {
                        pv[j] += h;
                        mv[j] -= h;
                    }
                    (loss(&p) - loss(&m)) / (2.0 * h)
                };
                // A large step (for forwards that round) is Richardson-extrapolated: the h²
                // error term cancels, leaving O(h⁴).
                let fd = if h > 1e-4 { (4.0 * diff(h / 2.0) - diff(h)) / 3.0 } else { diff(h) };
                let scale = av.abs().max(fd.abs()).max(1e-3);
                if (av - fd).abs() > 1e-4 * scale {
                    return Err(format!("input {i} element {j}: analytic {av}, finite difference {fd}"));
                }
            }
        }
        Ok(())
    }
}

/// Check `op`'s gradient rule on f64 inputs of `shapes` drawn from [lo, hi] (for rules defined
/// outside this module, in `crate::ops`).
pub(crate) fn check_op(op: Op, shapes: &[&[usize]], lo: f64, hi: f64) -> Result<(), String> {
    Check { shapes: shapes.iter().map(|s| s.to_vec()).collect(), lo, hi, seed: 7, h: 1e-5, grid: 0.0 }.run(|g, x| node(g, op.clone(), x))
}

fn node(g: &mut Graph, op: Op, inputs: &[ValueId]) -> ValueId {
    let name = format!("n{}", g.nodes.len());
    g.add_node(name.clone(), op, inputs.iter().map(|&v| Some(v)).collect(), &[format!("{name}_out")]).1[0]
}
fn ints(g: &mut Graph, v: &[i64]) -> ValueId {
    let n = g.values.len();
    g.add_const(format!("c{n}"), Tensor::from_i64s(vec![v.len()], v.to_vec()))
}
fn un(u: UnaryOp) -> impl Fn(&mut Graph, &[ValueId]) -> ValueId {
    move |g, x| node(g, Op::Unary(u), &[x[0]])
}
fn bin(b: BinaryOp) -> impl Fn(&mut Graph, &[ValueId]) -> ValueId {
    move |g, x| node(g, Op::Binary(b), &[x[0], x[1]])
}
fn win(k: &[usize], s: &[usize], p: &[usize], d: &[usize]) -> Window {
    Window { kernel_shape: k.to_vec(), strides: s.to_vec(), pads: p.to_vec(), dilations: d.to_vec(), auto_pad: AutoPad::NotSet, ceil_mode: false }
}

#[test]
fn checker_rejects_a_wrong_gradient() {
    let c = Check { shapes: vec![vec![2, 3], vec![2, 3]], lo: -1.0, hi: 1.0, seed: 3, h: 1e-5, grid: 0.0 };
    assert!(c.run_seeded(bin(BinaryOp::Mul), 1.001).is_err());
    assert!(c.run_seeded(bin(BinaryOp::Mul), 1.0).is_ok());
}

#[test]
fn matmul() {
    check(&[&[3, 4], &[4, 5]], |g, x| node(g, MatMul.op(), x));
    check(&[&[2, 3, 4], &[4, 5]], |g, x| node(g, MatMul.op(), x));
    check(&[&[3, 1, 2, 4], &[2, 4, 3]], |g, x| node(g, MatMul.op(), x));
    check(&[&[4], &[2, 4, 3]], |g, x| node(g, MatMul.op(), x));
    check(&[&[2, 3, 4], &[4]], |g, x| node(g, MatMul.op(), x));
    check(&[&[4], &[4]], |g, x| node(g, MatMul.op(), x));
}

#[test]
fn gemm() {
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let a: &[usize] = if ta { &[4, 3] } else { &[3, 4] };
        let b: &[usize] = if tb { &[5, 4] } else { &[4, 5] };
        check(&[a, b, &[5]], |g, x| {
            let op = Gemm { alpha: 0.7, beta: 1.3, trans_a: ta, trans_b: tb }.op();
            g.add_node("gemm", op, x.iter().map(|&v| Some(v)).collect(), &["y".into()]).1[0]
        });
    }
    check(&[&[3, 4], &[4, 5]], |g, x| {
        let op = Gemm { alpha: 2.0, beta: 1.0, trans_a: false, trans_b: false }.op();
        g.add_node("gemm", op, vec![Some(x[0]), Some(x[1]), None], &["y".into()]).1[0]
    });
}

#[test]
fn binary_with_broadcasting() {
    for b in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul] {
        check(&[&[2, 3, 4], &[3, 1]], bin(b));
        check(&[&[1, 4], &[3, 1]], bin(b));
        check(&[&[], &[2, 3]], bin(b));
    }
    check_pos(&[&[2, 3, 4], &[3, 1]], bin(BinaryOp::Div));
    check_pos(&[&[3, 1], &[2, 3, 4]], bin(BinaryOp::Div));
}

#[test]
fn unary() {
    for u in [UnaryOp::Identity, UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Relu] {
        check(&[&[3, 4]], un(u));
    }
    check_pos(&[&[3, 4]], un(UnaryOp::Log));
    check_pos(&[&[3, 4]], un(UnaryOp::Sqrt));
}

#[test]
fn shared_uses_accumulate() {
    // y = x·x + exp(x): three uses of x.
    check(&[&[5]], |g, x| {
        let sq = node(g, Op::Binary(BinaryOp::Mul), &[x[0], x[0]]);
        let e = node(g, Op::Unary(UnaryOp::Exp), &[x[0]]);
        node(g, Op::Binary(BinaryOp::Add), &[sq, e])
    });
}

#[test]
fn reshapes_and_transpose() {
    check(&[&[2, 3, 4]], |g, x| {
        let s = ints(g, &[4, -1]);
        node(g, Op::Reshape { allowzero: false }, &[x[0], s])
    });
    check(&[&[2, 3, 4]], |g, x| node(g, Flatten { axis: 2 }.op(), &[x[0]]));
    check(&[&[2, 1, 4]], |g, x| node(g, Squeeze { axes: Some(vec![1]) }.op(), &[x[0]]));
    check(&[&[2, 4]], |g, x| node(g, Unsqueeze { axes: Some(vec![0, -1]) }.op(), &[x[0]]));
    check(&[&[2, 3, 4]], |g, x| node(g, crate::ops::transpose::Transpose { perm: Some(vec![1, 2, 0]) }.op(), &[x[0]]));
    check(&[&[2, 3, 4]], |g, x| node(g, crate::ops::transpose::Transpose { perm: None }.op(), &[x[0]]));
}

#[test]
fn reductions() {
    for op in [ReduceOp::Sum, ReduceOp::Mean] {
        for keepdims in [false, true] {
            check(&[&[2, 3, 4]], |g, x| node(g, crate::ops::reduce::Reduce { op, axes: Some(vec![-1, 0]), keepdims, noop_with_empty_axes: false }.op(), &[x[0]]));
            check(&[&[2, 3, 4]], |g, x| node(g, crate::ops::reduce::Reduce { op, axes: None, keepdims, noop_with_empty_axes: false }.op(), &[x[0]]));
            check(&[&[2, 3, 4]], |g, x| {
                let a = ints(g, &[1]);
                node(g, crate::ops::reduce::Reduce { op, axes: None, keepdims, noop_with_empty_axes: false }.op(), &[x[0], a])
            });
        }
    }
}

fn conv(w: Window, group: usize, bias: bool) -> impl Fn(&mut Graph, &[ValueId]) -> ValueId {
    move |g, x| {
        let op = Op::Conv { window: w.clone(), group };
        let b = if bias { Some(x[2]) } else { None };
        g.add_node("conv", op, vec![Some(x[0]), Some(x[1]), b], &["y".into()]).1[0]
    }
}

#[test]
fn conv2d() {
    check(&[&[2, 3, 5, 5], &[4, 3, 3, 3], &[4]], conv(win(&[], &[], &[], &[]), 1, true));
    check(&[&[1, 2, 7, 6], &[3, 2, 3, 2]], conv(win(&[], &[2, 2], &[1, 0, 1, 1], &[]), 1, false));
    check(&[&[1, 2, 8, 7], &[2, 2, 2, 3]], conv(win(&[], &[2, 1], &[1, 1, 0, 2], &[2, 2]), 1, false));
    check(&[&[2, 4, 5, 5], &[6, 2, 3, 3], &[6]], conv(win(&[], &[2, 2], &[1, 1, 1, 1], &[]), 2, true));
    let mut same = win(&[], &[2, 2], &[], &[]);
    same.auto_pad = AutoPad::SameUpper;
    check(&[&[1, 2, 6, 5], &[3, 2, 3, 3]], conv(same, 1, false));
}

#[test]
fn conv1d() {
    check(&[&[2, 2, 9], &[3, 2, 3], &[3]], conv(win(&[], &[2], &[1, 2], &[2]), 1, true));
}

#[test]
fn pooling() {
    let pool = |kind: PoolKind, w: Window| move |g: &mut Graph, x: &[ValueId]| node(g, crate::ops::pool::Pool { kind, window: w.clone(), column_major: false }.op(), &[x[0]]);
    // Overlapping windows: an element can be the max of several.
    check(&[&[2, 3, 5, 5]], pool(PoolKind::Max, win(&[3, 3], &[1, 1], &[1, 1, 1, 1], &[])));
    check(&[&[1, 2, 6, 7]], pool(PoolKind::Max, win(&[2, 2], &[2, 2], &[], &[])));
    for count_include_pad in [false, true] {
        let avg = PoolKind::Avg { count_include_pad };
        check(&[&[2, 3, 5, 5]], pool(avg, win(&[3, 3], &[2, 2], &[1, 1, 1, 1], &[])));
        check(&[&[1, 2, 6, 7]], pool(avg, win(&[2, 3], &[1, 2], &[0, 1, 1, 0], &[])));
    }
}

#[test]
fn concat_slice_gather() {
    check(&[&[2, 3], &[2, 1], &[2, 4]], |g, x| node(g, Op::Concat { axis: -1 }, x));
    check(&[&[2, 3], &[1, 3]], |g, x| node(g, Op::Concat { axis: 0 }, x));
    check(&[&[4, 6]], |g, x| {
        let (s, e, a, st) = (ints(g, &[1, -1]), ints(g, &[4, 0]), ints(g, &[0, 1]), ints(g, &[2, -2]));
        node(g, crate::ops::slice::Slice.op(), &[x[0], s, e, a, st])
    });
    check(&[&[3, 4]], |g, x| {
        let i = g.add_const("idx", Tensor::from_i64s(vec![2, 2], vec![0, 2, -1, 0]));
        node(g, Op::Gather { axis: 1 }, &[x[0], i])
    });
    check(&[&[3, 4]], |g, x| {
        let i = g.add_const("idx", Tensor::from_i64s(vec![3], vec![2, 2, 0]));
        node(g, Op::Gather { axis: 0 }, &[x[0], i])
    });
}

#[test]
fn chain_mlp() {
    // A two-layer perceptron with a log-softmax: the rules composed.
    check(&[&[4, 5], &[5, 6], &[6], &[6, 3]], |g, x| {
        let h = node(g, MatMul.op(), &[x[0], x[1]]);
        let h = node(g, Op::Binary(BinaryOp::Add), &[h, x[2]]);
        let h = node(g, Op::Unary(UnaryOp::Tanh), &[h]);
        let o = node(g, MatMul.op(), &[h, x[3]]);
        node(g, crate::ops::softmax::Softmax { axis: 1, log: true, coerce_2d: false }.op(), &[o])
    });
}

#[test]
fn unrelated_input_gets_zeros_and_unsupported_ops_are_named() {
    let mut g = Graph::default();
    let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(&[3])) });
    let a = g.add_value("a", ty.clone(), ValueKind::Input);
    let b = g.add_value("b", ty, ValueKind::Input);
    g.inputs = vec![a, b];
    let y = node(&mut g, Op::Unary(UnaryOp::Exp), &[a]);
    let grads = gradients(&mut g, y, None, &[a, b]).expect("differentiates");
    g.outputs = grads;
    let x = Tensor::from_f32s(vec![3], vec![0.0, 1.0, 2.0]);
    let out = run(&g, &[x.clone(), x]);
    assert_eq!(f64s(&out[1]), vec![0.0; 3]);
    assert!((f64s(&out[0])[1] - std::f64::consts::E).abs() < 1e-5);

    let mut g = Graph::default();
    let ty = ValueType::Tensor(TensorType { dtype: DType::F32, shape: Some(Shape::fixed(&[3])) });
    let a = g.add_value("a", ty, ValueKind::Input);
    g.inputs = vec![a];
    let y = node(&mut g, crate::ops::softmax::Hardmax { axis: 0, coerce_2d: false }.op(), &[a]);
    let err = gradients(&mut g, y, None, &[a]).expect_err("Hardmax has no rule").to_string();
    assert!(err.contains("Hardmax"), "{err}");
}

/// A node with `n_out` outputs (optional inputs as `None`).
fn node_n(g: &mut Graph, op: Op, inputs: Vec<Option<ValueId>>, n_out: usize) -> Vec<ValueId> {
    let name = format!("n{}", g.nodes.len());
    let outs: Vec<String> = (0..n_out).map(|k| format!("{name}_out{k}")).collect();
    g.add_node(name, op, inputs, &outs).1
}

/// A scalar f64 constant.
fn f64c(g: &mut Graph, v: f64) -> ValueId {
    let n = g.values.len();
    g.add_const(format!("c{n}"), Tensor::new(vec![], Data::F64(vec![v])))
}
