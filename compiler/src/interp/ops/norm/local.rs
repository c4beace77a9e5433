//! LRN (across channels) and Lp normalization (along one axis).
use super::float::{by_precision, Work};
use crate::interp::ops::util::norm_axis_or_scalar;
use crate::tensor::Tensor;
use burnc_runtime::kernels::norm as k;

pub fn lrn(x: &Tensor, size: usize, alpha: f64, beta: f64, bias: f64) -> Result<Tensor, String> {
    if x.rank() < 2 {
        return Err(format!("LRN needs an input of rank >= 2, got {:?}", x.shape));
    }
    if size == 0 {
        return Err("LRN size must be positive".into());
    }
    let (batch, channels) = (x.shape[0], x.shape[1]);
    let plane: usize = x.shape[2..].iter().product();
    #[allow(clippy::too_many_arguments)]
    fn go<R: Work>(x: &Tensor, batch: usize, channels: usize, plane: usize, size: usize, alpha: f64, beta: f64, bias: f64) -> Result<Tensor, String> {
        let xs = R::view(x);
        let mut y = vec![R::default(); xs.len()];
        k::lrn(&xs, &mut y, batch, channels, plane, size, alpha, beta, bias);
        Ok(Tensor::new(x.shape.clone(), R::into_data(y, x.dtype())))
    }
    by_precision!(x.dtype(), "LRN", go(x, batch, channels, plane, size, alpha, beta, bias))
}

pub fn lp_norm(x: &Tensor, axis: i64, p: i64) -> Result<Tensor, String> {
    if p != 1 && p != 2 {
        return Err(format!("LpNormalization supports p = 1 or 2, got {p}"));
    }
    if x.rank() == 0 {
        return Err("LpNormalization needs an input of rank >= 1".into());
    }
    let a = norm_axis_or_scalar(axis, x.rank())?;
    let outer: usize = x.shape[..a].iter().product();
    let inner: usize = x.shape[a + 1..].iter().product();
    let n = x.shape[a];
    fn go<R: Work>(x: &Tensor, outer: usize, n: usize, inner: usize, p: u32) -> Result<Tensor, String> {
        let xs = R::view(x);
        let mut y = vec![R::default(); xs.len()];
        k::lp_norm(&xs, &mut y, outer, n, inner, p);
        Ok(Tensor::new(x.shape.clone(), R::into_data(y, x.dtype())))
    }
    by_precision!(x.dtype(), "LpNormalization", go(x, outer, n, inner, p as u32))
}
