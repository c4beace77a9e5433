//! Interpreter semantics: index family (Gather; Trilu's kernel for ops::select).
//! Gathers are written as a flat source index per output element and
//! one generic [`take`]. Index tensors are validated: out-of-range is an error, negatives wrap.
use super::shape::{index_map, take, take_or};
use super::util::{arg, norm_axis_or_scalar, one, strides};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;
use crate::tensor::{Data, Tensor};

pub fn eval(op: &Op, args: &[Option<RtValue>], _n_outputs: usize) -> OpResult {
    match op {
        Op::Gather { axis } => one(gather(arg(args, 0)?, arg(args, 1)?, *axis)?),
        _ => Err(format!("{} is not an index op", op.name())),
    }
}

/// Integer index values (int32/int64 and other ints); floats and bools are refused.
fn indices(t: &Tensor, what: &str) -> Result<Vec<i64>, String> {
    if !t.dtype().is_int() {
        return Err(format!("{what} must be an integer tensor, got {}", t.dtype()));
    }
    t.to_i64_vec().ok_or_else(|| format!("{what} must be an integer tensor"))
}

/// Wrap a possibly negative index into `[0, n)`; out of range is an error.
fn wrap(i: i64, n: usize, what: &str) -> Result<usize, String> {
    let w = if i < 0 { i + n as i64 } else { i };
    if w < 0 || w >= n as i64 {
        return Err(format!("{what} index {i} is out of range for a dimension of size {n}"));
    }
    Ok(w as usize)
}

fn wrap_all(v: &[i64], n: usize, what: &str) -> Result<Vec<usize>, String> {
    v.iter().map(|&i| wrap(i, n, what)).collect()
}

fn gather(data: &Tensor, ind: &Tensor, axis: i64) -> Result<Tensor, String> {
    if data.rank() == 0 {
        return Err("Gather needs data of rank >= 1".into());
    }
    let ax = norm_axis_or_scalar(axis, data.rank())?;
    let iv = wrap_all(&indices(ind, "indices")?, data.shape[ax], "Gather")?;
    let mut shape = data.shape[..ax].to_vec();
    shape.extend_from_slice(&ind.shape);
    shape.extend_from_slice(&data.shape[ax + 1..]);
    let st = strides(&data.shape);
    let ist = strides(&ind.shape);
    let q = ind.rank();
    let idx = index_map(&shape, |ix| {
        let mut off = 0;
        for d in 0..ax {
            off += ix[d] * st[d];
        }
        let flat: usize = (0..q).map(|j| ix[ax + j] * ist[j]).sum();
        off += iv[flat] * st[ax];
        for d in ax + 1..data.rank() {
            off += ix[d + q - 1] * st[d];
        }
        off
    })?;
    Ok(Tensor::new(shape, take(&data.data, &idx)))
}

pub(crate) fn trilu(x: &Tensor, k: i64, upper: bool) -> Result<Tensor, String> {
    let r = x.rank();
    if r < 2 {
        return Err(format!("Trilu needs an input of rank >= 2, got {:?}", x.shape));
    }
    let st = strides(&x.shape);
    let idx = index_map(&x.shape, |ix| {
        let (i, j) = (ix[r - 2] as i64, ix[r - 1] as i64);
        let d = j - i;
        let keep = if upper { d >= k } else { d <= k };
        keep.then(|| ix.iter().zip(&st).map(|(a, s)| a * s).sum())
    })?;
    Ok(Tensor::new(x.shape.clone(), take_or(&x.data, &idx, &Data::zeros(x.dtype(), 1))?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{f, i};

    #[test]
    fn gather_axis1_with_negative_index() {
        let x = f(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let y = gather(&x, &i(&[2], &[-1, 0]), 1).unwrap();
        assert_eq!(y, f(&[2, 2], &[3., 1., 6., 4.]));
        assert!(gather(&x, &i(&[1], &[3]), 1).is_err());
    }

    #[test]
    fn trilu_keeps_a_triangle() {
        let x = f(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        assert_eq!(trilu(&x, 1, true).unwrap(), f(&[2, 3], &[0., 2., 3., 0., 0., 6.]));
        assert_eq!(trilu(&x, 0, false).unwrap(), f(&[2, 3], &[1., 0., 0., 4., 5., 0.]));
    }
}
