//! Axis arguments: one rule for every op, pass and emitter. ONNX counts a negative axis from
//! the end, so `axis` names dim `axis + rank` when negative.

/// `axis` as an index into `rank` dims: `-rank <= axis < rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    Ok(a as usize)
}

/// [`norm_axis`], and axis 0 of a scalar too (the ops that treat a scalar as one element
/// along the axis: Concat, Softmax, CumSum … as the interpreter runs them).
pub fn norm_axis_or_scalar(axis: i64, rank: usize) -> Result<usize, String> {
    if rank == 0 && axis == 0 {
        return Ok(0);
    }
    norm_axis(axis, rank)
}

/// Each of `axes` by `norm` ([`norm_axis`], or [`norm_axis_or_scalar`] where a scalar takes
/// axis 0); an axis named twice is an error.
pub fn distinct_axes(axes: &[i64], rank: usize, norm: fn(i64, usize) -> Result<usize, String>) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm(a, rank)?;
        if out.contains(&n) {
            return Err(format!("axis {a} repeated"));
        }
        out.push(n);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_axes_count_from_the_end() {
        assert_eq!(norm_axis(-1, 4), Ok(3));
        assert_eq!(norm_axis(3, 4), Ok(3));
        assert!(norm_axis(4, 4).is_err() && norm_axis(-5, 4).is_err());
        assert!(norm_axis(0, 0).is_err());
        assert_eq!(norm_axis_or_scalar(0, 0), Ok(0));
        assert!(norm_axis_or_scalar(-1, 0).is_err() && norm_axis_or_scalar(1, 0).is_err());
    }
}
