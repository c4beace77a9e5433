//! Elementwise rules. Binary ops broadcast, so each operand's gradient is summed back to the
//! operand's shape (`B::sum_to`). Rules reuse the forward output where the derivative is a
//! function of it (exp, sqrt, tanh, sigmoid), as the forward value is already computed.
use super::builder::{B, R};
use super::{dy0, input, output};
use crate::ir::{BinaryOp, Node, Op, UnaryOp, ValueId};

pub fn rule(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], need: &[bool]) -> R<Vec<Option<ValueId>>> {
    let dy = dy0(dys)?;
    match &n.op {
        Op::Unary(u) => Ok(vec![Some(unary(b, n, *u, dy)?)]),
        Op::Binary(op) => binary(b, n, *op, dy, need),
        other => Err(format!("no gradient rule for {}", other.name())),
    }
}

fn unary(b: &mut B<'_>, n: &Node, u: UnaryOp, dy: ValueId) -> R<ValueId> {
    let x = input(n, 0)?;
    let y = output(n, 0)?;
    let dt = b.dtype(x)?;
    match u {
        UnaryOp::Identity => Ok(dy),
        UnaryOp::Neg => b.neg(dy),
        // d exp(x) = exp(x) = y
        UnaryOp::Exp => b.mul(dy, y),
        UnaryOp::Log => b.div(dy, x),
        // d sqrt(x) = 1 / (2 sqrt(x)) = 0.5 / y
        UnaryOp::Sqrt => {
            let half = b.scalar(0.5, dt)?;
            let t = b.mul(dy, half)?;
            b.div(t, y)
        }
        // d tanh(x) = 1 - y²
        UnaryOp::Tanh => {
            let one = b.scalar(1.0, dt)?;
            let yy = b.mul(y, y)?;
            let d = b.sub(one, yy)?;
            b.mul(dy, d)
        }
        // d sigmoid(x) = y (1 - y)
        UnaryOp::Sigmoid => {
            let one = b.scalar(1.0, dt)?;
            let omy = b.sub(one, y)?;
            let d = b.mul(y, omy)?;
            b.mul(dy, d)
        }
        // The subgradient 0 at x = 0, as the common frameworks do.
        UnaryOp::Relu => {
            let zero = b.scalar(0.0, dt)?;
            let pos = b.bin(BinaryOp::Greater, x, zero)?;
            b.node(Op::Where, &[pos, dy, zero])
        }
        other => Err(format!("no gradient rule for {other:?}")),
    }
}

fn binary(b: &mut B<'_>, n: &Node, op: BinaryOp, dy: ValueId, need: &[bool]) -> R<Vec<Option<ValueId>>> {
    let a = input(n, 0)?;
    let c = input(n, 1)?;
    let want = |i: usize| need.get(i).copied().unwrap_or(false);
    // Gradients at the output's (broadcast) shape, then summed to each operand's.
    let (ga, gc) = match op {
        BinaryOp::Add => (want(0).then_some(dy), if want(1) { Some(dy) } else { None }),
        BinaryOp::Sub => (want(0).then_some(dy), if want(1) { Some(b.neg(dy)?) } else { None }),
        BinaryOp::Mul => (
            if want(0) { Some(b.mul(dy, c)?) } else { None },
            if want(1) { Some(b.mul(dy, a)?) } else { None },
        ),
        // d(a/c)/da = 1/c; d(a/c)/dc = -a/c² = -y/c
        BinaryOp::Div => {
            let ga = if want(0) { Some(b.div(dy, c)?) } else { None };
            let gc = if want(1) {
                let y = output(n, 0)?;
                let t = b.mul(dy, y)?;
                let t = b.div(t, c)?;
                Some(b.neg(t)?)
            } else {
                None
            };
            (ga, gc)
        }
        other => return Err(format!("no gradient rule for {other:?}")),
    };
    let ga = match ga {
        Some(v) => Some(b.sum_to(v, a)?),
        None => None,
    };
    let gc = match gc {
        Some(v) => Some(b.sum_to(v, c)?),
        None => None,
    };
    Ok(vec![ga, gc])
}
