//! Softmax / LogSoftmax / Hardmax over one axis (or, with `coerce_2d`, over the flattened
//! trailing dims from `axis`, the opset < 13 semantics).
use super::float::{by_precision, Work};
use crate::interp::ops::util::norm_axis_or_scalar;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::softmax as k;

/// `(outer, n, inner)` view of `shape` around `axis`.
fn split(shape: &[usize], axis: i64, coerce_2d: bool) -> Result<(usize, usize, usize), String> {
    if shape.is_empty() {
        return Err("softmax-like ops need an input of rank >= 1".into());
    }
    let a = norm_axis_or_scalar(axis, shape.len())?;
    let outer = shape[..a].iter().product();
    if coerce_2d {
        Ok((outer, shape[a..].iter().product(), 1))
    } else {
        Ok((outer, shape[a], shape[a + 1..].iter().product()))
    }
}

pub fn softmax(x: &Tensor, axis: i64, log: bool, coerce_2d: bool) -> Result<Tensor, String> {
    let (outer, n, inner) = split(&x.shape, axis, coerce_2d)?;
    // f16/bf16 Softmax rounds step by step as the reference does (LogSoftmax stays in f32).
    match &x.data {
        Data::F16(xs) if !log => {
            let mut y = vec![half::f16::ZERO; xs.len()];
            k::softmax_stepped(xs, outer, n, inner, &mut y, false);
            return Ok(Tensor::new(x.shape.clone(), Data::F16(y)));
        }
        Data::BF16(xs) if !log => {
            let mut y = vec![half::bf16::ZERO; xs.len()];
            k::softmax_stepped(xs, outer, n, inner, &mut y, true);
            return Ok(Tensor::new(x.shape.clone(), Data::BF16(y)));
        }
        _ => {}
    }
    fn go<R: Work>(x: &Tensor, outer: usize, n: usize, inner: usize, log: bool) -> Result<Tensor, String> {
        let xs = R::view(x);
        let mut y = vec![R::default(); xs.len()];
        k::softmax(&xs, outer, n, inner, &mut y, log);
        Ok(Tensor::new(x.shape.clone(), R::into_data(y, x.dtype())))
    }
    by_precision!(x.dtype(), "Softmax", go(x, outer, n, inner, log))
}

pub fn hardmax(x: &Tensor, axis: i64, coerce_2d: bool) -> Result<Tensor, String> {
    let (outer, n, inner) = split(&x.shape, axis, coerce_2d)?;
    macro_rules! go {
        ($($v:ident),*) => {
            match &x.data {
                $(Data::$v(xs) => {
                    let mut y = vec![burnc_runtime::Elem::zero(); xs.len()];
                    k::hardmax(xs, outer, n, inner, &mut y);
                    Data::$v(y)
                })*
                _ => return Err(format!("Hardmax needs a numeric input, got {}", x.dtype())),
            }
        };
    }
    let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
    Ok(Tensor::new(x.shape.clone(), data))
}
