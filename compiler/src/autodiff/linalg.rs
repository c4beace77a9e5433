//! MatMul and Gemm. MatMul's 1-D operands are promoted to matrices the way numpy does (a
//! leading or trailing 1), the products are taken with the other operand transposed, and the
//! result is summed over broadcast batch dims and reshaped back. Gemm's gradients are Gemms
//! again, with the transposition flags chosen so no explicit Transpose is needed.
use crate::ops::view::Unsqueeze;
use crate::ops::IntoOp;
use super::builder::{B, R};
use super::{dy0, input};
use crate::ir::{Node, Op, ValueId};

pub fn rule(b: &mut B<'_>, n: &Node, dys: &[Option<ValueId>], need: &[bool]) -> R<Vec<Option<ValueId>>> {
    let dy = dy0(dys)?;
    let want = |i: usize| need.get(i).copied().unwrap_or(false);
    match &n.op {
        Op::MatMul => matmul(b, n, dy, want(0), want(1)),
        Op::Gemm { alpha, beta, trans_a, trans_b } => {
            let a = input(n, 0)?;
            let bm = input(n, 1)?;
            let gemm = |alpha: f32, ta: bool, tb: bool| Op::Gemm { alpha, beta: 0.0, trans_a: ta, trans_b: tb };
            // Y = alpha op(A) op(B): dop(A) = alpha dY op(B)ᵀ, dop(B) = alpha op(A)ᵀ dY; a
            // transposed operand's gradient is the transpose, i.e. the product swapped.
            let da = if want(0) {
                Some(if *trans_a {
                    b.node(gemm(*alpha, *trans_b, true), &[bm, dy])?
                } else {
                    b.node(gemm(*alpha, false, !*trans_b), &[dy, bm])?
                })
            } else {
                None
            };
            let db = if want(1) {
                Some(if *trans_b {
                    b.node(gemm(*alpha, true, *trans_a), &[dy, a])?
                } else {
                    b.node(gemm(*alpha, !*trans_a, false), &[a, dy])?
                })
            } else {
                None
            };
            let dc = match n.inputs.get(2).copied().flatten() {
                Some(c) if want(2) => {
                    let dt = b.dtype(c)?;
                    let k = b.scalar(*beta as f64, dt)?;
                    let t = b.mul(dy, k)?;
                    Some(b.sum_to(t, c)?)
                }
                _ => None,
            };
            Ok(vec![da, db, dc])
        }
        other => Err(format!("no gradient rule for {}", other.name())),
    }
}

fn matmul(b: &mut B<'_>, n: &Node, dy: ValueId, want_a: bool, want_b: bool) -> R<Vec<Option<ValueId>>> {
    let a = input(n, 0)?;
    let bm = input(n, 1)?;
    let (ra, rb) = (b.rank(a)?, b.rank(bm)?);
    if ra == 0 || rb == 0 {
        return Err("MatMul operands must have rank >= 1".into());
    }
    // Promote to matrices: A [k] → [1, k], B [k] → [k, 1]; dY gains the matching unit dims.
    let a2 = if ra == 1 { b.node(Unsqueeze { axes: Some(vec![0]) }.op(), &[a])? } else { a };
    let b2 = if rb == 1 { b.node(Unsqueeze { axes: Some(vec![1]) }.op(), &[bm])? } else { bm };
    let mut dy2 = dy;
    if ra == 1 {
        let r = b.rank(dy2)?;
        dy2 = b.node(Unsqueeze { axes: Some(vec![r as i64 - if rb == 1 { 0 } else { 1 }]) }.op(), &[dy2])?;
    }
    if rb == 1 {
        let r = b.rank(dy2)?;
        dy2 = b.node(Unsqueeze { axes: Some(vec![r as i64]) }.op(), &[dy2])?;
    }
    // dA = dY·Bᵀ, dB = Aᵀ·dY.
    let da = if want_a {
        let bt = swap_last2(b, b2)?;
        Some(operand_grad(b, dy2, bt, a2, a)?)
    } else {
        None
    };
    let db = if want_b {
        let at = swap_last2(b, a2)?;
        Some(operand_grad(b, at, dy2, b2, bm)?)
    } else {
        None
    };
    Ok(vec![da, db])
}

/// The gradient `lhs · rhs` of the operand `x` (promoted to the matrix `m`): summed over the
/// batch dims `m` was broadcast along, and shaped back like `x`.
fn operand_grad(b: &mut B<'_>, lhs: ValueId, rhs: ValueId, m: ValueId, x: ValueId) -> R<ValueId> {
    let d = b.node(Op::MatMul, &[lhs, rhs])?;
    let d = b.sum_to(d, m)?;
    if m == x {
        Ok(d)
    } else {
        b.reshape_like(d, x)
    }
}

fn swap_last2(b: &mut B<'_>, v: ValueId) -> R<ValueId> {
    let r = b.rank(v)?;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    b.transpose(v, perm)
}
