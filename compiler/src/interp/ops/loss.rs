//! RMSNormalization's evaluation (ops::norm::RmsNorm), computed in f64 and returned in the
//! input's type.
use super::util::{broadcast_shapes, broadcast_values, norm_axis_or_scalar};
use crate::ir::DType;
use crate::tensor::{Data, Tensor};

fn back(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor, String> {
    super::cast::cast(&Tensor::new(shape, Data::F64(v)), dtype, true)
}

/// `scale` flattened to the normalised dims `[axis, rank)` when it broadcasts to them, else to
/// the whole of X (the kernel takes either).
pub(crate) fn rms_scale_shape(x: &[usize], ax: usize, scale: &[usize]) -> Result<Vec<usize>, String> {
    let inner = &x[ax..];
    if scale.len() <= inner.len() && broadcast_shapes(scale, inner).ok().as_deref() == Some(inner) {
        return Ok(inner.to_vec());
    }
    if broadcast_shapes(x, scale)? != x {
        return Err(format!("scale {scale:?} does not broadcast to X {x:?}"));
    }
    Ok(x.to_vec())
}

pub(crate) fn rms_norm(x: &Tensor, scale: &Tensor, axis: i64, eps: f32) -> Result<Tensor, String> {
    if x.rank() == 0 {
        return Err("input must have rank >= 1".into());
    }
    let ax = norm_axis_or_scalar(axis, x.rank())?;
    let inner: usize = x.shape[ax..].iter().product();
    let outer: usize = x.shape[..ax].iter().product();
    let to = rms_scale_shape(&x.shape, ax, &scale.shape)?;
    let sv = scale.to_f64_vec();
    let sv = if to.iter().product::<usize>() == sv.len() { sv } else { broadcast_values(&sv, &scale.shape, &to)? };
    let xv = x.to_f64_vec();
    let mut y = vec![0.0; xv.len()];
    burnc_runtime::kernels::norm::rms_norm(&xv, &mut y, outer, inner, &sv, eps);
    back(x.dtype(), x.shape.clone(), y)
}
