//! NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: every reduction, with and without
//! class weights (whose gradient is checked too), with ignore_index in and out of the class
//! range, 2-D and N-D inputs.
use super::*;

const REDUCTIONS: [LossReduction; 3] = [LossReduction::None, LossReduction::Sum, LossReduction::Mean];

/// x (and the weights input when `weighted`), targets `t` of `t_shape`.
fn nll(softmax: bool, reduction: LossReduction, ignore_index: Option<i64>, weighted: bool, t_shape: Vec<usize>, t: Vec<i64>, i32_targets: bool) -> impl Fn(&mut Graph, &[ValueId]) -> ValueId {
    move |g, x| {
        let tt = Tensor::from_i64s(t_shape.clone(), t.clone());
use crate::ops::IntoOp;
        let tt = if i32_targets { Tensor::new(t_shape.clone(), Data::I32(t.iter().map(|&v| v as i32).collect())) } else { tt };
        let tv = g.add_const("target", tt);
        // Positive class weights, so the mean's denominator stays away from 0.
        let w = weighted.then(|| {
            let sq = node(g, Op::Binary(BinaryOp::Mul), &[x[1], x[1]]);
            let h = f64c(g, 0.5);
            node(g, Op::Binary(BinaryOp::Add), &[sq, h])
        });
        let op = crate::ops::loss::NllLoss { softmax, reduction, ignore_index }.op();
        node_n(g, op, vec![Some(x[0]), Some(tv), w], 1)[0]
    }
}

#[test]
fn nll_loss() {
    let t = vec![0, 3, 1, 3, 2];
    for softmax in [false, true] {
        for reduction in REDUCTIONS {
            for (ignore, weighted) in [(None, false), (None, true), (Some(3), false), (Some(3), true)] {
                let shapes: &[&[usize]] = if weighted { &[&[5, 4], &[4]] } else { &[&[5, 4]] };
                check(shapes, nll(softmax, reduction, ignore, weighted, vec![5], t.clone(), false));
            }
        }
    }
}

#[test]
fn nll_loss_nd_and_out_of_range_ignore() {
    // [N, C, d1] with targets [N, d1]; -100 is outside the classes (PyTorch's default).
    let t = vec![2, -100, 0, 1, -100, 3];
    for softmax in [false, true] {
        for reduction in REDUCTIONS {
            check(&[&[3, 4, 2], &[4]], nll(softmax, reduction, Some(-100), true, vec![3, 2], t.clone(), true));
        }
        check(&[&[2, 3, 2, 2]], nll(softmax, LossReduction::Mean, None, false, vec![2, 2, 2], vec![0, 1, 2, 2, 1, 0, 0, 2], false));
    }
}

#[test]
fn softmax_cross_entropy_with_log_prob_output() {
    // Both outputs reach the loss: the log-probabilities' gradient adds LogSoftmax's rule.
    for reduction in REDUCTIONS {
        check(&[&[4, 3]], |g, x| {
            let tv = g.add_const("target", Tensor::from_i64s(vec![4], vec![2, 0, 1, 1]));
            let op = crate::ops::loss::NllLoss { softmax: true, reduction, ignore_index: Some(0) }.op();
            let o = node_n(g, op, vec![Some(x[0]), Some(tv), None], 2);
            let r = g.add_const("w", Tensor::new(vec![4, 3], Data::F64((0..12).map(|i| (i as f64 * 0.37).sin()).collect())));
            let lp = node(g, Op::Binary(BinaryOp::Mul), &[o[1], r]);
            let lp = node(g, crate::ops::reduce::Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false }.op(), &[lp]);
            let l = node(g, crate::ops::reduce::Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false }.op(), &[o[0]]);
            node(g, Op::Binary(BinaryOp::Add), &[l, lp])
        });
    }
    // Only the log-probabilities used.
    check(&[&[4, 3]], |g, x| {
        let tv = g.add_const("target", Tensor::from_i64s(vec![4], vec![2, 0, 1, 1]));
        let op = crate::ops::loss::NllLoss { softmax: true, reduction: LossReduction::Mean, ignore_index: None }.op();
        node_n(g, op, vec![Some(x[0]), Some(tv), None], 2)[1]
    });
}
