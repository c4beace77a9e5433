//! Argument access and shape helpers shared by the op families.
use crate::interp::RtValue;
use crate::tensor::Tensor;

/// Required tensor argument `i`.
pub fn arg(args: &[Option<RtValue>], i: usize) -> Result<&Tensor, String> {
    match args.get(i) {
        Some(Some(v)) => v.as_tensor(),
        _ => Err(format!("missing input #{i}")),
    }
}

/// Optional tensor argument `i` (absent or omitted → None).
pub fn opt_arg(args: &[Option<RtValue>], i: usize) -> Result<Option<&Tensor>, String> {
    match args.get(i) {
        Some(Some(v)) => v.as_tensor().map(Some),
        _ => Ok(None),
    }
}

/// An integer vector argument (shapes, axes, pads…).
pub fn ints_arg(args: &[Option<RtValue>], i: usize) -> Result<Vec<i64>, String> {
    arg(args, i)?.to_i64_vec().ok_or_else(|| format!("input #{i} must be an integer tensor"))
}

/// The interpreter's axis rule (a scalar takes axis 0).
pub use crate::ir::axis::norm_axis_or_scalar;

/// Normalise a list of axes; duplicates are an error.
pub fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    crate::ir::axis::distinct_axes(axes, rank, norm_axis_or_scalar)
}

/// numpy broadcast of two shapes.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(format!("shapes {a:?} and {b:?} do not broadcast"));
        };
    }
    Ok(out)
}

/// Row-major strides.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Strides of `shape` read as if broadcast to `out` (0 on broadcast dims).
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let s = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|i| if i < off || shape[i - off] == 1 { 0 } else { s[i - off] })
        .collect()
}

/// The values `v` of a tensor of `shape`, broadcast to `to` and flattened row-major.
pub fn broadcast_values<T: Copy>(v: &[T], shape: &[usize], to: &[usize]) -> Result<Vec<T>, String> {
    let st = broadcast_strides(shape, to);
    super::shape::index_map(to, |ix| v[ix.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>()])
}

/// Checked element count.
pub fn numel(shape: &[usize]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= (1usize << 36))
        .ok_or_else(|| format!("shape {shape:?} is too large"))
}

pub fn one(t: Tensor) -> Result<Vec<RtValue>, String> {
    Ok(vec![RtValue::Tensor(t)])
}

