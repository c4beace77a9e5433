//! The rules composed as real models train them: a transformer encoder block and a small CNN
//! with batch statistics and a cross-entropy loss.
use crate::ops::matmul::{Gemm, MatMul};
use crate::ops::view::{Dropout, Flatten};
use super::*;

#[test]
fn transformer_encoder_block() {
    // x [2, 3, 4]; Wq Wk Wv [4, 4]; LayerNorm scale, bias [4]; W1 [4, 8]; W2 [8, 4].
    check(&[&[2, 3, 4], &[4, 4], &[4, 4], &[4, 4], &[4], &[4], &[4, 8], &[8, 4]], |g, x| {
        let h = node(g, crate::ops::norm::LayerNorm { axis: -1, epsilon: 1e-5 }.op(), &[x[0], x[4], x[5]]);
        let q = node(g, MatMul.op(), &[h, x[1]]);
        let k = node(g, MatMul.op(), &[h, x[2]]);
use crate::ops::IntoOp;
        let v = node(g, MatMul.op(), &[h, x[3]]);
        let kt = node(g, crate::ops::transpose::Transpose { perm: Some(vec![0, 2, 1]) }.op(), &[k]);
        let s = node(g, MatMul.op(), &[q, kt]);
        let two = f64c(g, 2.0);
        let s = node(g, Op::Binary(BinaryOp::Div), &[s, two]);
        let a = node(g, crate::ops::softmax::Softmax::last().op(), &[s]);
        let key = g.add_const("key", Tensor::scalar_i64(99));
        let a = node_n(g, Dropout { ratio: 0.2, training: true }.op(), vec![Some(a), Some(key)], 1)[0];
        let o = node(g, MatMul.op(), &[a, v]);
        let x1 = node(g, Op::Binary(BinaryOp::Add), &[x[0], o]);
        let f = node(g, MatMul.op(), &[x1, x[6]]);
        let f = node(g, Op::Unary(UnaryOp::Gelu { tanh_approx: false }), &[f]);
        let f = node(g, MatMul.op(), &[f, x[7]]);
        node(g, Op::Binary(BinaryOp::Add), &[x1, f])
    });
}

#[test]
fn cnn_with_batch_statistics_and_cross_entropy() {
    // x [2, 2, 5, 5]; conv W [3, 2, 3, 3]; BN scale, B, running mean, var [3]; fc W [3, 4], b [4].
    check(&[&[2, 2, 5, 5], &[3, 2, 3, 3], &[3], &[3], &[3], &[3], &[3, 4], &[4]], |g, x| {
        let w = win(&[], &[], &[1, 1, 1, 1], &[]);
        let c = node_n(g, Op::Conv { window: w, group: 1 }, vec![Some(x[0]), Some(x[1]), None], 1)[0];
        let bn_in = vec![Some(c), Some(x[2]), Some(x[3]), Some(x[4]), Some(x[5])];
        let bn = node_n(g, crate::ops::channel_norm::BatchNormTraining { epsilon: 1e-5, momentum: 0.9 }.op(), bn_in, 3)[0];
        let r = node(g, Op::Unary(UnaryOp::Relu), &[bn]);
        let p = node(g, crate::ops::pool::GlobalPool { kind: PoolKind::Avg { count_include_pad: true } }.op(), &[r]);
        let f = node(g, Flatten { axis: 1 }.op(), &[p]);
        let logits = node(g, Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false }.op(), &[f, x[6], x[7]]);
        let t = g.add_const("target", Tensor::from_i64s(vec![2], vec![3, 1]));
        let op = crate::ops::loss::NllLoss { softmax: true, reduction: LossReduction::Mean, ignore_index: None }.op();
        node_n(g, op, vec![Some(logits), Some(t), None], 1)[0]
    });
}
