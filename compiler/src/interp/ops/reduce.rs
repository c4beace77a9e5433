//! Interpreter semantics: reduce family (Reduce*). The work is
//! done by `burnc_runtime::kernels::reduce` over an `[outer, red, inner]` view of the input;
//! reduced axes that are not adjacent are first moved to the end by a transpose.
use super::shape::transpose;
use super::util::{arg, int_vec_or_attr, norm_axes, norm_axis_or_scalar, numel, one};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{Op, ReduceOp};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::reduce::{self as k, ReduceKind};

pub fn eval(op: &Op, args: &[Option<RtValue>], _n_outputs: usize) -> OpResult {
    match op {
        Op::Reduce { op, axes, keepdims, noop_with_empty_axes } => {
            let x = arg(args, 0)?;
            let axes = int_vec_or_attr(axes, args, 1)?;
            one(reduce(x, *op, axes.as_deref(), *keepdims, *noop_with_empty_axes)?)
        }
        _ => Err(format!("{} is not a reduction", op.name())),
    }
}

/// The runtime kernel's name for a reduction (interpreter and emitters alike).
pub(crate) fn kind(op: ReduceOp) -> ReduceKind {
    match op {
        ReduceOp::Sum => ReduceKind::Sum,
        ReduceOp::Mean => ReduceKind::Mean,
        ReduceOp::Max => ReduceKind::Max,
        ReduceOp::Min => ReduceKind::Min,
        ReduceOp::Prod => ReduceKind::Prod,
        ReduceOp::L1 => ReduceKind::L1,
        ReduceOp::L2 => ReduceKind::L2,
        ReduceOp::LogSum => ReduceKind::LogSum,
        ReduceOp::LogSumExp => ReduceKind::LogSumExp,
        ReduceOp::SumSquare => ReduceKind::SumSquare,
    }
}

/// `[outer, red, inner]` sizes of `x` (maybe after a transpose) for reducing `axes` (sorted).
fn view(x: &Tensor, axes: &[usize]) -> Result<(Option<Tensor>, usize, usize, usize), String> {
    let prod = |s: &[usize]| s.iter().product::<usize>();
    let contiguous = axes.windows(2).all(|w| w[1] == w[0] + 1);
    if axes.is_empty() {
        return Ok((None, x.numel(), 1, 1));
    }
    let (a, b) = (axes[0], axes[axes.len() - 1]);
    if contiguous {
        return Ok((None, prod(&x.shape[..a]), prod(&x.shape[a..=b]), prod(&x.shape[b + 1..])));
    }
    let kept: Vec<usize> = (0..x.rank()).filter(|d| !axes.contains(d)).collect();
    let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let t = transpose(x, &perm)?;
    let outer = kept.iter().map(|&d| x.shape[d]).product();
    let red = axes.iter().map(|&d| x.shape[d]).product();
    Ok((Some(t), outer, red, 1))
}

fn out_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(d, &n)| if axes.contains(&d) { keepdims.then_some(1) } else { Some(n) })
        .collect()
}

pub fn reduce(x: &Tensor, op: ReduceOp, axes: Option<&[i64]>, keepdims: bool, noop: bool) -> Result<Tensor, String> {
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => {
            let mut v = norm_axes(a, x.rank())?;
            v.sort_unstable();
            v
        }
        _ if noop => return Ok(x.clone()),
        _ => (0..x.rank()).collect(),
    };
    let shape = out_shape(&x.shape, &axes, keepdims);
    let (moved, outer, red, inner) = view(x, &axes)?;
    let src = moved.as_ref().unwrap_or(x);
    let n = numel(&shape)?;
    let kd = kind(op);
    macro_rules! go {
        ($($variant:ident),*) => {
            match &src.data {
                $(Data::$variant(v) => {
                    let mut out = vec![Default::default(); n];
                    k::reduce(kd, v, outer, red, inner, &mut out);
                    Data::$variant(out)
                })*
                Data::Bool(v) if matches!(op, ReduceOp::Max | ReduceOp::Min) => {
                    let mut out = vec![false; n];
                    k::reduce(kd, v, outer, red, inner, &mut out);
                    Data::Bool(out)
                }
                d => return Err(format!("Reduce{op:?} is not defined on {}", d.dtype())),
            }
        };
    }
    let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
    Ok(Tensor::new(shape, data))
}

pub(crate) fn arg_reduce(x: &Tensor, max: bool, axis: i64, keepdims: bool, last: bool) -> Result<Tensor, String> {
    let ax = norm_axis_or_scalar(axis, x.rank())?;
    let axes = if x.rank() == 0 { vec![] } else { vec![ax] };
    let shape = out_shape(&x.shape, &axes, keepdims);
    let (_, outer, red, inner) = view(x, &axes)?;
    let n = numel(&shape)?;
    if red == 0 && n > 0 {
        return Err(format!("cannot take Arg{} over the empty axis {ax}", if max { "Max" } else { "Min" }));
    }
    let mut out = vec![0i64; n];
    macro_rules! go {
        ($($variant:ident),*) => {
            match &x.data {
                $(Data::$variant(v) => k::arg_reduce(v, outer, red, inner, max, last, &mut out),)*
                d => return Err(format!("ArgMax/ArgMin is not defined on {}", d.dtype())),
            }
        };
    }
    go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool);
    Ok(Tensor::from_i64s(shape, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32s(shape.to_vec(), v.to_vec())
    }

    #[test]
    fn reduce_non_adjacent_axes() {
        // [2, 2, 2] summed over axes 0 and 2.
        let x = t(&[2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        let y = reduce(&x, ReduceOp::Sum, Some(&[0, -1]), false, false).unwrap();
        assert_eq!(y, t(&[2], &[14., 22.]));
        let y = reduce(&x, ReduceOp::Max, None, true, false).unwrap();
        assert_eq!(y, t(&[1, 1, 1], &[8.]));
        let y = reduce(&x, ReduceOp::Sum, Some(&[]), true, true).unwrap();
        assert_eq!(y, x);
    }

    #[test]
    fn reduce_empty_set_is_identity() {
        let x = t(&[2, 0, 4], &[]);
        let y = reduce(&x, ReduceOp::Prod, Some(&[1]), true, false).unwrap();
        assert_eq!(y, t(&[2, 1, 4], &[1.0; 8]));
    }

    #[test]
    fn bad_axis_is_an_error() {
        let x = t(&[2], &[1., 2.]);
        assert!(reduce(&x, ReduceOp::Sum, Some(&[3]), true, false).is_err());
    }
}
