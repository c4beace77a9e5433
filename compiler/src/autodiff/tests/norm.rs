//! Batch, layer, RMS, group and instance normalization.
use super::*;
use crate::ops::channel_norm::BatchNorm;

/// var as x² + 0.5, so random inputs give a positive variance.
fn positive(g: &mut Graph, v: ValueId) -> ValueId {
    let sq = node(g, Op::Binary(BinaryOp::Mul), &[v, v]);
    let h = f64c(g, 0.5);
    node(g, Op::Binary(BinaryOp::Add), &[sq, h])
}

#[test]
fn batch_norm_inference() {
    // Gradients for x, scale, B, mean and var.
    check(&[&[2, 3, 4, 2], &[3], &[3], &[3], &[3]], |g, x| {
        let var = positive(g, x[4]);
        node(g, BatchNorm { epsilon: 1e-3 }.op(), &[x[0], x[1], x[2], x[3], var])
    });
    check(&[&[4, 3], &[3], &[3], &[3], &[3]], |g, x| {
        let var = positive(g, x[4]);
        node(g, BatchNorm { epsilon: 1e-5 }.op(), &[x[0], x[1], x[2], x[3], var])
    });
}

#[test]
fn batch_norm_training() {
    // Running mean/var inputs do not reach y: their gradients are zeros.
    for shape in [&[3, 2, 4, 3][..], &[5, 3]] {
        check(&[shape, &[shape[1]], &[shape[1]], &[shape[1]], &[shape[1]]], |g, x| {
            let op = crate::ops::channel_norm::BatchNormTraining { epsilon: 1e-3, momentum: 0.9 }.op();
            node_n(g, op, x.iter().map(|&v| Some(v)).collect(), 3)[0]
        });
    }
}

#[test]
fn layer_norm_and_rms_norm() {
    check(&[&[2, 3, 5], &[5], &[5]], |g, x| node(g, crate::ops::norm::LayerNorm { axis: -1, epsilon: 1e-5 }.op(), x));
    check(&[&[2, 3, 4], &[3, 4], &[4]], |g, x| node(g, crate::ops::norm::LayerNorm { axis: 1, epsilon: 1e-3 }.op(), x));
    check(&[&[4, 6], &[6]], |g, x| {
        let op = crate::ops::norm::LayerNorm { axis: 1, epsilon: 1e-5 }.op();
        node_n(g, op, vec![Some(x[0]), Some(x[1]), None], 1)[0]
    });
    // The forward rounds mean(x²) + eps to f32, which finite differences would see. Inputs on
    // a 1/16 grid, a power-of-two step, eps = 2⁻¹⁶ and power-of-two rows keep every such sum
    // exact in f32 (about 22 significant bits), so the check stays at 1e-4.
    let rms = |shapes: &[&[usize]], axis: i64| {
        Check { shapes: shapes.iter().map(|s| s.to_vec()).collect(), lo: -1.0, hi: 1.0, seed: 7, h: 1.0 / 256.0, grid: 1.0 / 16.0 }
            .run(|g, x| node(g, crate::ops::norm::RmsNorm { axis, epsilon: 1.0 / 65536.0 }.op(), x))
            .expect("gradients agree");
    };
    rms(&[&[2, 3, 4], &[4]], -1);
    rms(&[&[2, 2, 4], &[2, 4]], 1);
}

#[test]
fn group_and_instance_norm() {
    for per_channel in [true, false] {
        let p = if per_channel { 6 } else { 3 };
        check(&[&[2, 6, 2, 3], &[p], &[p]], |g, x| node(g, crate::ops::channel_norm::GroupNorm { num_groups: 3, epsilon: 1e-5, per_channel }.op(), x));
    }
    check(&[&[2, 4, 5], &[2], &[2]], |g, x| node(g, crate::ops::channel_norm::GroupNorm { num_groups: 2, epsilon: 1e-3, per_channel: false }.op(), x));
    check(&[&[2, 3, 4, 2], &[3], &[3]], |g, x| node(g, crate::ops::channel_norm::InstanceNorm::op(1e-5), x));
    check(&[&[2, 3, 5], &[3], &[3]], |g, x| node(g, crate::ops::channel_norm::InstanceNorm::op(1e-3), x));
}
