//! Working precision for float kernels: f32 and f64 tensors are used as they are, f16/bf16
//! are widened to f32 and rounded back once at the end.
use crate::ir::DType;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::real::Real;
use burnc_runtime::Elem;
use half::{bf16, f16};
use std::borrow::Cow;

/// A working float type (f32 or f64).
pub(crate) trait Work: Real + Elem {
    /// The tensor's elements in this type (borrowed when they already are).
    fn view(t: &Tensor) -> Cow<'_, [Self]>;
    /// Results back into storage of `dtype` (the input's float type).
    fn into_data(v: Vec<Self>, dtype: DType) -> Data;
}

impl Work for f32 {
    fn view(t: &Tensor) -> Cow<'_, [f32]> {
        match &t.data {
            Data::F32(v) => Cow::Borrowed(v),
            Data::F16(v) => Cow::Owned(v.iter().map(|x| x.to_f32()).collect()),
            Data::BF16(v) => Cow::Owned(v.iter().map(|x| x.to_f32()).collect()),
            _ => Cow::Owned(t.to_f64_vec().into_iter().map(|x| x as f32).collect()),
        }
    }
    fn into_data(v: Vec<f32>, dtype: DType) -> Data {
        match dtype {
            DType::F16 => Data::F16(v.into_iter().map(f16::from_f32).collect()),
            DType::BF16 => Data::BF16(v.into_iter().map(bf16::from_f32).collect()),
            DType::F64 => Data::F64(v.into_iter().map(|x| x as f64).collect()),
            _ => Data::F32(v),
        }
    }
}

impl Work for f64 {
    fn view(t: &Tensor) -> Cow<'_, [f64]> {
        match &t.data {
            Data::F64(v) => Cow::Borrowed(v),
            _ => Cow::Owned(t.to_f64_vec()),
        }
    }
    fn into_data(v: Vec<f64>, dtype: DType) -> Data {
        match dtype {
            DType::F32 => Data::F32(v.into_iter().map(|x| x as f32).collect()),
            DType::F16 => Data::F16(v.into_iter().map(f16::from_f64).collect()),
            DType::BF16 => Data::BF16(v.into_iter().map(bf16::from_f64).collect()),
            _ => Data::F64(v),
        }
    }
}

/// Which working type serves `dtype`: `Ok(true)` for f64, `Ok(false)` for f32/f16/bf16.
pub(crate) fn wide(dtype: DType, what: &str) -> Result<bool, String> {
    match dtype {
        DType::F64 => Ok(true),
        DType::F32 | DType::F16 | DType::BF16 => Ok(false),
        d => Err(format!("{what} needs a float input, got {d}")),
    }
}

/// Run `$f::<R>(...)` with R the working type of `$dtype`.
macro_rules! by_precision {
    ($dtype:expr, $what:expr, $f:ident($($arg:expr),* $(,)?)) => {
        if $crate::interp::ops::norm::float::wide($dtype, $what)? {
            $f::<f64>($($arg),*)
        } else {
            $f::<f32>($($arg),*)
        }
    };
}
pub(crate) use by_precision;

/// A per-channel parameter of exactly `n` elements (any shape with that many elements).
pub(crate) fn channel_param<'a, R: Work>(t: &'a Tensor, n: usize, name: &str) -> Result<Cow<'a, [R]>, String> {
    if t.numel() != n {
        return Err(format!("{name} has shape {:?}, expected {n} elements", t.shape));
    }
    if !t.dtype().is_float() {
        return Err(format!("{name} must be a float tensor, got {}", t.dtype()));
    }
    Ok(R::view(t))
}
