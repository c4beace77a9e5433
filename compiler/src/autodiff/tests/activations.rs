//! Unary activations, the remaining binary ops, Where and Cast (Swish and SwiGLU: `crate::ops::activation`).
use super::*;
use crate::ir::UnaryOp as U;

#[test]
fn smooth_unary() {
    for u in [U::Abs, U::Sin, U::Cos, U::Tan, U::Sinh, U::Cosh, U::Asinh, U::Erf, U::Softplus, U::Softsign, U::Mish] {
        check(&[&[3, 4]], un(u));
    }
    for u in [U::Gelu { tanh_approx: false }, U::Gelu { tanh_approx: true }] {
        check_range(&[&[3, 4]], -3.0, 3.0, un(u));
    }
    for u in [U::Asin, U::Acos, U::Atan, U::Atanh] {
        check_range(&[&[3, 4]], -0.8, 0.8, un(u));
    }
    check_range(&[&[3, 4]], 1.2, 3.0, un(U::Acosh));
    check_pos(&[&[3, 4]], un(U::Reciprocal));
    // Piecewise constant: zero gradient away from the jumps.
    for u in [U::Floor, U::Ceil, U::Round, U::Sign] {
        check_range(&[&[3, 4]], 0.1, 0.4, un(u));
    }
}

#[test]
fn piecewise_unary() {
    // Wide enough that both sides of every break point are drawn.
    for u in [
        U::LeakyRelu { alpha: 0.1 },
        U::Elu { alpha: 0.7 },
        U::Selu { alpha: 1.673_263_2, gamma: 1.050_701 },
        U::Celu { alpha: 0.8 },
        U::HardSigmoid { alpha: 0.2, beta: 0.5 },
        U::HardSwish,
        U::ThresholdedRelu { alpha: 0.5 },
        U::Relu,
    ] {
        check_range(&[&[4, 6]], -4.0, 4.0, un(u));
    }
}

#[test]
fn pow_max_min_prelu() {
    check_pos(&[&[2, 3], &[3]], bin(BinaryOp::Pow));
    // x² with a constant exponent (the LayerNorm-by-hand pattern), negative x included.
    check(&[&[2, 3]], |g, x| {
        let two = f64c(g, 2.0);
        node(g, Op::Binary(BinaryOp::Pow), &[x[0], two])
    });
    for b in [BinaryOp::Max, BinaryOp::Min] {
        check(&[&[2, 3, 4], &[3, 1]], bin(b));
    }
    // Clip as the frontend lowers it: Max(x, lo) then Min(·, hi).
    check_range(&[&[4, 5]], -8.0, 8.0, |g, x| {
        let (lo, hi) = (f64c(g, 0.0), f64c(g, 6.0));
        let m = node(g, Op::Binary(BinaryOp::Max), &[x[0], lo]);
        node(g, Op::Binary(BinaryOp::Min), &[m, hi])
    });
    check(&[&[2, 3, 4], &[3, 1]], bin(BinaryOp::PRelu));
    // Pre-opset-7 slope along the channel axis.
    check(&[&[2, 3, 4], &[3]], bin(BinaryOp::PRelu));
}

#[test]
fn where_and_cast() {
    check(&[&[2, 3], &[3]], |g, x| {
        let c = g.add_const("cond", Tensor::new(vec![2, 3], Data::Bool(vec![true, false, true, false, false, true])));
        node(g, crate::ops::select::op(), &[c, x[0], x[1]])
    });
    // Through f32 and back: linear, so a large step keeps f32 rounding out of the difference.
    Check { shapes: vec![vec![2, 3]], lo: -1.0, hi: 1.0, seed: 5, h: 0.125, grid: 0.0 }
        .run(|g, x| {
            let f = node(g, crate::ops::cast::op(DType::F32, false), &[x[0]]);
            let two = g.add_const("two", Tensor::new(vec![], Data::F32(vec![2.0])));
            let f = node(g, Op::Binary(BinaryOp::Mul), &[f, two]);
            let like = f64c(g, 0.0);
            node(g, crate::ops::cast::like(false), &[f, like])
        })
        .expect("gradients agree");
}

