//! Elementwise rules. Binary ops broadcast, so each operand's gradient is summed back to the
//! operand's shape (`B::sum_to`). Rules reuse the forward output where the derivative is a
//! function of it (exp, sqrt, tanh, sigmoid), as the forward value is already computed.
//! Piecewise ops select with Where on a comparison of x, taking the side that the forward's
//! own comparison takes at the break point (Relu's 0 at x = 0, as the common frameworks do).
use crate::ops::view::Unsqueeze;
use crate::ops::IntoOp;
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

/// Exact GELU's Φ(x) and derivative Φ(x) + x·φ(x) (Φ, φ: the standard normal's CDF and
/// density); GELU itself is x·Φ(x).
pub(crate) fn gelu_cdf_and_grad(b: &mut B<'_>, x: ValueId) -> R<(ValueId, ValueId)> {
    let dt = b.dtype(x)?;
    let k = |b: &mut B<'_>, v: f64| b.scalar(v, dt);
    let s2 = k(b, std::f64::consts::FRAC_1_SQRT_2)?;
    let t = b.mul(x, s2)?;
    let e = b.un(UnaryOp::Erf, t)?;
    let one = k(b, 1.0)?;
    let cdf = b.add(one, e)?;
    let half = k(b, 0.5)?;
    let cdf = b.mul(cdf, half)?;
    let xx = b.mul(x, x)?;
    let mhalf = k(b, -0.5)?;
    let t = b.mul(xx, mhalf)?;
    let pdf = b.un(UnaryOp::Exp, t)?;
    let c = k(b, 1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
    let pdf = b.mul(pdf, c)?;
    let xp = b.mul(x, pdf)?;
    Ok((cdf, b.add(cdf, xp)?))
}

fn unary(b: &mut B<'_>, n: &Node, u: UnaryOp, dy: ValueId) -> R<ValueId> {
    use UnaryOp as U;
    let x = input(n, 0)?;
    let y = output(n, 0)?;
    let dt = b.dtype(x)?;
    let k = |b: &mut B<'_>, v: f64| b.scalar(v, dt);
    // dy · d for a derivative d built from x and y.
    let d = match u {
        U::Identity => return Ok(dy),
        U::Neg => return b.neg(dy),
        // Piecewise constant: zero almost everywhere.
        U::Floor | U::Ceil | U::Round | U::Sign => return b.zeros_like(x),
        // d exp(x) = exp(x) = y
        U::Exp => y,
        U::Log => return b.div(dy, x),
        // d sqrt(x) = 1 / (2 sqrt(x)) = 0.5 / y
        U::Sqrt => {
            let half = k(b, 0.5)?;
            let t = b.mul(dy, half)?;
            return b.div(t, y);
        }
        // d (1/x) = -1/x² = -y²
        U::Reciprocal => {
            let yy = b.mul(y, y)?;
            let t = b.mul(dy, yy)?;
            return b.neg(t);
        }
        U::Abs => b.un(U::Sign, x)?,
        U::Sin => b.un(U::Cos, x)?,
        U::Cos => {
            let s = b.un(U::Sin, x)?;
            b.neg(s)?
        }
        // d tan = 1 + y²
        U::Tan => {
            let one = k(b, 1.0)?;
            let yy = b.mul(y, y)?;
            b.add(one, yy)?
        }
        U::Asin | U::Acos => {
            // ±1 / sqrt(1 - x²)
            let one = k(b, 1.0)?;
            let xx = b.mul(x, x)?;
            let t = b.sub(one, xx)?;
            let t = b.un(U::Sqrt, t)?;
            let r = b.un(U::Reciprocal, t)?;
            if u == U::Acos {
                b.neg(r)?
            } else {
                r
            }
        }
        U::Atan | U::Atanh => {
            // 1 / (1 ± x²)
            let one = k(b, 1.0)?;
            let xx = b.mul(x, x)?;
            let t = if u == U::Atan { b.add(one, xx)? } else { b.sub(one, xx)? };
            return b.div(dy, t);
        }
        U::Sinh => b.un(U::Cosh, x)?,
        U::Cosh => b.un(U::Sinh, x)?,
        U::Asinh | U::Acosh => {
            // 1 / sqrt(x² ± 1)
            let one = k(b, 1.0)?;
            let xx = b.mul(x, x)?;
            let t = if u == U::Asinh { b.add(xx, one)? } else { b.sub(xx, one)? };
            let t = b.un(U::Sqrt, t)?;
            return b.div(dy, t);
        }
        // d erf = 2/√π · exp(-x²)
        U::Erf => {
            let xx = b.mul(x, x)?;
            let e = b.neg(xx)?;
            let e = b.un(U::Exp, e)?;
            let c = k(b, std::f64::consts::FRAC_2_SQRT_PI)?;
            b.mul(e, c)?
        }
        // d tanh(x) = 1 - y²
        U::Tanh => {
            let one = k(b, 1.0)?;
            let yy = b.mul(y, y)?;
            b.sub(one, yy)?
        }
        // d sigmoid(x) = y (1 - y)
        U::Sigmoid => {
            let one = k(b, 1.0)?;
            let omy = b.sub(one, y)?;
            b.mul(y, omy)?
        }
        U::Relu => return select(b, BinaryOp::Greater, x, 0.0, dy, None),
        U::LeakyRelu { alpha } => {
            let a = k(b, alpha as f64)?;
            let neg = b.mul(dy, a)?;
            return select(b, BinaryOp::Less, x, 0.0, neg, Some(dy));
        }
        U::ThresholdedRelu { alpha } => return select(b, BinaryOp::Greater, x, alpha as f64, dy, None),
        // d softplus = sigmoid(x)
        U::Softplus => b.un(U::Sigmoid, x)?,
        // d softsign = 1 / (1 + |x|)²
        U::Softsign => {
            let one = k(b, 1.0)?;
            let ax = b.un(U::Abs, x)?;
            let t = b.add(one, ax)?;
            let t = b.mul(t, t)?;
            return b.div(dy, t);
        }
        // x < 0: y = a(eˣ - 1), dy/dx = y + a
        U::Elu { alpha } => {
            let a = k(b, alpha as f64)?;
            let t = b.add(y, a)?;
            let neg = b.mul(dy, t)?;
            return select(b, BinaryOp::Less, x, 0.0, neg, Some(dy));
        }
        // x <= 0: y = g·a(eˣ - 1), dy/dx = y + g·a; else g.
        U::Selu { alpha, gamma } => {
            let ga = k(b, alpha as f64 * gamma as f64)?;
            let t = b.add(y, ga)?;
            let neg = b.mul(dy, t)?;
            let g = k(b, gamma as f64)?;
            let pos = b.mul(dy, g)?;
            return select(b, BinaryOp::LessOrEqual, x, 0.0, neg, Some(pos));
        }
        // x <= 0: y = a(e^(x/a) - 1), dy/dx = e^(x/a); else 1.
        U::Celu { alpha } => {
            let a = k(b, alpha as f64)?;
            let t = b.div(x, a)?;
            let e = b.un(U::Exp, t)?;
            let neg = b.mul(dy, e)?;
            return select(b, BinaryOp::Greater, x, 0.0, dy, Some(neg));
        }
        // a inside (0, 1) where the clamp is inactive, else 0.
        U::HardSigmoid { alpha, beta } => {
            let (a, bb) = (k(b, alpha as f64)?, k(b, beta as f64)?);
            let t = b.mul(x, a)?;
            let t = b.add(t, bb)?;
            let (zero, one) = (k(b, 0.0)?, k(b, 1.0)?);
            let lo = b.bin(BinaryOp::Greater, t, zero)?;
            let hi = b.bin(BinaryOp::Less, t, one)?;
            let inside = b.bin(BinaryOp::And, lo, hi)?;
            let g = b.mul(dy, a)?;
            return b.node(crate::ops::select::op(), &[inside, g, zero]);
        }
        // y = x·clamp(x/6 + 1/2, 0, 1): 0 below -3, 1 above 3, x/3 + 1/2 between.
        U::HardSwish => {
            let (third, half) = (k(b, 1.0 / 3.0)?, k(b, 0.5)?);
            let t = b.mul(x, third)?;
            let mid = b.add(t, half)?;
            let (m3, p3) = (k(b, -3.0)?, k(b, 3.0)?);
            let (zero, one) = (k(b, 0.0)?, k(b, 1.0)?);
            let above = b.bin(BinaryOp::Greater, x, p3)?;
            let d = b.node(crate::ops::select::op(), &[above, one, mid])?;
            let below = b.bin(BinaryOp::Less, x, m3)?;
            b.node(crate::ops::select::op(), &[below, zero, d])?
        }
        // Φ(x) + x·φ(x), or for the tanh form with t = tanh(c(x + 0.044715x³)):
        // ½(1 + t) + ½x(1 - t²)·c(1 + 3·0.044715x²).
        U::Gelu { tanh_approx: false } => gelu_cdf_and_grad(b, x)?.1,
        U::Gelu { tanh_approx: true } => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            let xx = b.mul(x, x)?;
            let k1 = k(b, 0.044715)?;
            let x3 = b.mul(xx, x)?;
            let t = b.mul(x3, k1)?;
            let t = b.add(x, t)?;
            let cc = k(b, c)?;
            let t = b.mul(t, cc)?;
            let th = b.un(U::Tanh, t)?;
            let one = k(b, 1.0)?;
            let half = k(b, 0.5)?;
            let a = b.add(one, th)?;
            let a = b.mul(a, half)?;
            let tt = b.mul(th, th)?;
            let sech2 = b.sub(one, tt)?;
            let k3 = k(b, 3.0 * 0.044715)?;
            let inner = b.mul(xx, k3)?;
            let inner = b.add(one, inner)?;
            let inner = b.mul(inner, cc)?;
            let bb = b.mul(x, sech2)?;
            let bb = b.mul(bb, inner)?;
            let bb = b.mul(bb, half)?;
            b.add(a, bb)?
        }
        // y = x·tanh(sp(x)): tanh(sp) + x·(1 - tanh²(sp))·sigmoid(x).
        U::Mish => {
            let sp = b.un(U::Softplus, x)?;
            let t = b.un(U::Tanh, sp)?;
            let s = b.un(U::Sigmoid, x)?;
            let one = k(b, 1.0)?;
            let tt = b.mul(t, t)?;
            let sech2 = b.sub(one, tt)?;
            let r = b.mul(x, sech2)?;
            let r = b.mul(r, s)?;
            b.add(t, r)?
        }
        other => return Err(format!("no gradient rule for {other:?}")),
    };
    b.mul(dy, d)
}

/// `where(x cmp c, then, otherwise)`, with zeros when `otherwise` is `None`.
fn select(b: &mut B<'_>, cmp: BinaryOp, x: ValueId, c: f64, then: ValueId, otherwise: Option<ValueId>) -> R<ValueId> {
    let dt = b.dtype(x)?;
    let c = b.scalar(c, dt)?;
    let cond = b.bin(cmp, x, c)?;
    let other = match otherwise {
        Some(v) => v,
        None => b.scalar(0.0, dt)?,
    };
    b.node(crate::ops::select::op(), &[cond, then, other])
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
        // d(aᶜ)/da = c·a^(c-1) (written with Pow so a = 0 is fine for c >= 1);
        // d(aᶜ)/dc = y·ln a, taken as 0 where a <= 0 (where aᶜ is only defined for integer c).
        BinaryOp::Pow => {
            let dt = b.dtype(a)?;
            let y = output(n, 0)?;
            let ga = if want(0) {
                let cf = if b.dtype(c)? == dt { c } else { b.node(crate::ops::cast::op(dt, false), &[c])? };
                let one = b.scalar(1.0, dt)?;
                let cm1 = b.sub(cf, one)?;
                let p = b.bin(BinaryOp::Pow, a, cm1)?;
                let t = b.mul(p, cf)?;
                Some(b.mul(dy, t)?)
            } else {
                None
            };
            let gc = if want(1) {
                let zero = b.scalar(0.0, dt)?;
                let pos = b.bin(BinaryOp::Greater, a, zero)?;
                let one = b.scalar(1.0, dt)?;
                let safe = b.node(crate::ops::select::op(), &[pos, a, one])?;
                let l = b.un(UnaryOp::Log, safe)?;
                let t = b.mul(y, l)?;
                Some(b.mul(dy, t)?)
            } else {
                None
            };
            (ga, gc)
        }
        // The gradient goes to the operand the output took; ties go to the first operand, so
        // Clip (lowered to Max(x, lo) then Min(·, hi)) passes dY through at its bounds, as
        // clamp's gradient does in the common frameworks.
        BinaryOp::Max | BinaryOp::Min => {
            let cmp = if op == BinaryOp::Max { BinaryOp::GreaterOrEqual } else { BinaryOp::LessOrEqual };
            let first = b.bin(cmp, a, c)?;
            let zero = b.scalar(0.0, b.dtype(dy)?)?;
            let ga = if want(0) { Some(b.node(crate::ops::select::op(), &[first, dy, zero])?) } else { None };
            let gc = if want(1) { Some(b.node(crate::ops::select::op(), &[first, zero, dy])?) } else { None };
            (ga, gc)
        }
        // y = x where x >= 0, else slope·x: dx = dy or dy·slope, dslope = dy·x where x < 0.
        BinaryOp::PRelu => {
            // Before opset 7 a 1-D slope ran along the channel axis where numpy broadcasting
            // would not apply (the interpreter's rule): it is viewed as [C, 1, …] and its
            // gradient summed over all but axis 1.
            let (xd, sd) = (b.dims(a)?, b.dims(c)?);
            let legacy = sd.len() == 1 && xd.len() > 2 && xd[1] == sd[0] && xd.last() != sd.last();
            let slope = if legacy { b.node(Unsqueeze { axes: Some((1..xd.len() as i64 - 1).collect()) }.op(), &[c])? } else { c };
            let zero = b.scalar(0.0, b.dtype(a)?)?;
            let neg = b.bin(BinaryOp::Less, a, zero)?;
            let ga = if want(0) {
                let t = b.mul(dy, slope)?;
                Some(b.node(crate::ops::select::op(), &[neg, t, dy])?)
            } else {
                None
            };
            let gc = if want(1) {
                let t = b.mul(dy, a)?;
                let t = b.node(crate::ops::select::op(), &[neg, t, zero])?;
                if legacy {
                    let axes: Vec<i64> = (0..xd.len() as i64).filter(|&i| i != 1).collect();
                    return Ok(vec![ga, Some(b.reduce_sum(t, axes, false)?)]);
                }
                Some(t)
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
