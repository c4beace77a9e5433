//! Normalizations by mean and variance: BatchNormalization (inference), Instance-, Layer- and
//! MeanVarianceNormalization.
use super::float::{by_precision, channel_param, Work};
use crate::interp::ops::util::{broadcast_shapes, broadcast_values, norm_axes, norm_axis_or_scalar};
use crate::ir::DType;
use crate::tensor::Tensor;
use burnc_runtime::kernels::{norm as k, permute::permute};
use std::borrow::Cow;

/// `[batch, channels, plane]` view of an `[N, C, ...]` tensor.
fn ncp(x: &Tensor, what: &str) -> Result<(usize, usize, usize), String> {
    if x.rank() < 2 {
        return Err(format!("{what} needs an input of rank >= 2, got {:?}", x.shape));
    }
    Ok((x.shape[0], x.shape[1], x.shape[2..].iter().product()))
}

/// BatchNormalization's scale, B, mean and variance, one element per channel each (`stats`:
/// the mean's and variance's names in messages).
fn bn_params<'a, R: Work>(ps: [&'a Tensor; 4], c: usize, stats: [&str; 2]) -> Result<[Cow<'a, [R]>; 4], String> {
    let [m, v] = stats;
    Ok([channel_param(ps[0], c, "scale")?, channel_param(ps[1], c, "B")?, channel_param(ps[2], c, m)?, channel_param(ps[3], c, v)?])
}

pub fn batch_norm(x: &Tensor, scale: &Tensor, bias: &Tensor, mean: &Tensor, var: &Tensor, eps: f64) -> Result<Tensor, String> {
    let (b, c, p) = ncp(x, "BatchNormalization")?;
    fn go<R: Work>(x: &Tensor, ps: [&Tensor; 4], b: usize, c: usize, p: usize, eps: f64) -> Result<Tensor, String> {
        let xs = R::view(x);
        let [s, bi, m, v] = bn_params::<R>(ps, c, ["mean", "var"])?;
        let mut y = vec![R::default(); xs.len()];
        k::batch_norm(&xs, &mut y, b, c, p, &s, &bi, &m, &v, eps);
        Ok(Tensor::new(x.shape.clone(), R::into_data(y, x.dtype())))
    }
    by_precision!(x.dtype(), "BatchNormalization", go(x, [scale, bias, mean, var], b, c, p, eps))
}

/// BatchNormalization in training mode: (y, running mean, running var).
pub fn batch_norm_train(x: &Tensor, ps: [&Tensor; 4], eps: f64, momentum: f64) -> Result<(Tensor, Tensor, Tensor), String> {
    let (b, c, p) = ncp(x, "BatchNormalization")?;
    fn go<R: Work>(x: &Tensor, ps: [&Tensor; 4], dims: [usize; 3], eps: f64, momentum: f64) -> Result<(Tensor, Tensor, Tensor), String> {
        let c = dims[1];
        let xs = R::view(x);
        let [s, bi, m, v] = bn_params::<R>(ps, c, ["input_mean", "input_var"])?;
        let mut y = vec![R::default(); xs.len()];
        let (mut rm, mut rv) = (vec![R::default(); c], vec![R::default(); c]);
        k::batch_norm_train(&xs, &mut y, dims, &s, &bi, &m, &v, eps, momentum, &mut rm, &mut rv);
        let stat = |v: Vec<R>, like: &Tensor| Tensor::new(like.shape.clone(), R::into_data(v, like.dtype()));
        Ok((Tensor::new(x.shape.clone(), R::into_data(y, x.dtype())), stat(rm, ps[2]), stat(rv, ps[3])))
    }
    by_precision!(x.dtype(), "BatchNormalization", go(x, ps, [b, c, p], eps, momentum))
}

pub fn instance_norm(x: &Tensor, scale: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor, String> {
    let (b, c, p) = ncp(x, "InstanceNormalization")?;
    fn go<R: Work>(x: &Tensor, scale: &Tensor, bias: &Tensor, b: usize, c: usize, p: usize, eps: f64) -> Result<Tensor, String> {
        let xs = R::view(x);
        let s = channel_param::<R>(scale, c, "scale")?;
        let bi = channel_param::<R>(bias, c, "B")?;
        let mut y = vec![R::default(); xs.len()];
        k::instance_norm(&xs, &mut y, b, c, p, &s, &bi, eps);
        Ok(Tensor::new(x.shape.clone(), R::into_data(y, x.dtype())))
    }
    by_precision!(x.dtype(), "InstanceNormalization", go(x, scale, bias, b, c, p, eps))
}

/// `t` broadcast (unidirectionally) to `shape`, flattened.
fn expand<'a, R: Work>(t: &'a Tensor, shape: &[usize], name: &str) -> Result<Cow<'a, [R]>, String> {
    if !t.dtype().is_float() {
        return Err(format!("{name} must be a float tensor, got {}", t.dtype()));
    }
    if t.rank() > shape.len() || broadcast_shapes(&t.shape, shape)? != shape {
        return Err(format!("{name} of shape {:?} does not broadcast to {shape:?}", t.shape));
    }
    let v = R::view(t);
    let n: usize = shape.iter().product();
    if v.len() == n {
        return Ok(v);
    }
    Ok(Cow::Owned(broadcast_values(&v, &t.shape, shape)?))
}

/// Y, Mean and InvStdDev (the last two with the normalised dims kept as 1, in f32: the
/// default `stash_type`).
pub fn layer_norm(x: &Tensor, scale: &Tensor, bias: Option<&Tensor>, axis: i64, eps: f64) -> Result<(Tensor, Tensor, Tensor), String> {
    if x.rank() == 0 {
        return Err("LayerNormalization needs an input of rank >= 1".into());
    }
    let a = norm_axis_or_scalar(axis, x.rank())?;
    fn go<R: Work>(x: &Tensor, scale: &Tensor, bias: Option<&Tensor>, a: usize, eps: f64) -> Result<(Tensor, Tensor, Tensor), String> {
        let inner_shape = &x.shape[a..];
        let outer: usize = x.shape[..a].iter().product();
        let inner: usize = inner_shape.iter().product();
        let s = expand::<R>(scale, inner_shape, "Scale")?;
        let b = bias.map(|b| expand::<R>(b, inner_shape, "B")).transpose()?;
        let xs = R::view(x);
        let mut y = vec![R::default(); xs.len()];
        let mut mean = vec![R::default(); outer];
        let mut inv = vec![R::default(); outer];
        k::layer_norm(&xs, &mut y, outer, inner, &s, b.as_deref(), eps, Some(&mut mean), Some(&mut inv));
        let stat_shape: Vec<usize> = x.shape.iter().enumerate().map(|(i, &d)| if i < a { d } else { 1 }).collect();
        Ok((
            Tensor::new(x.shape.clone(), R::into_data(y, x.dtype())),
            Tensor::new(stat_shape.clone(), R::into_data(mean, DType::F32)),
            Tensor::new(stat_shape, R::into_data(inv, DType::F32)),
        ))
    }
    by_precision!(x.dtype(), "LayerNormalization", go(x, scale, bias, a, eps))
}

/// `(x - mean) / (std + 1e-9)` with statistics over `axes`: the reduced axes are moved last,
/// normalised as rows, and moved back.
pub fn mean_var_norm(x: &Tensor, axes: &[i64]) -> Result<Tensor, String> {
    let rank = x.rank();
    if rank > 16 {
        return Err(format!("MeanVarianceNormalization supports rank <= 16, got {rank}"));
    }
    let red = norm_axes(axes, rank)?;
    let mut perm: Vec<usize> = (0..rank).filter(|d| !red.contains(d)).collect();
    let kept = perm.len();
    perm.extend(red.iter().copied());
    let pshape: Vec<usize> = perm.iter().map(|&d| x.shape[d]).collect();
    let outer: usize = pshape[..kept].iter().product();
    let inner: usize = pshape[kept..].iter().product();
    let mut inv = vec![0; rank];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    fn go<R: Work>(x: &Tensor, perm: &[usize], inv: &[usize], pshape: &[usize], outer: usize, inner: usize) -> Result<Tensor, String> {
        let xs = R::view(x);
        let mut xp = vec![R::default(); xs.len()];
        permute(&xs, &x.shape, perm, &mut xp);
        let mut yp = vec![R::default(); xs.len()];
        k::mean_var_norm(&xp, &mut yp, outer, inner);
        permute(&yp, pshape, inv, &mut xp);
        Ok(Tensor::new(x.shape.clone(), R::into_data(xp, x.dtype())))
    }
    by_precision!(x.dtype(), "MeanVarianceNormalization", go(x, &perm, &inv, &pshape, outer, inner))
}
