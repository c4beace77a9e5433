//! The integer helpers `ops::quant` and the integer products (`ops::integer`, through
//! `qint`) share: integer products and sums are done in integers (i32 / i64), never through
//! floats; floats only for scales.
use super::cast::cast;
use crate::ir::DType;
use crate::tensor::{Data, Tensor};

pub(crate) fn int_range(d: DType) -> Option<(i64, i64)> {
    Some(match d {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::U8 => (0, u8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::U16 => (0, u16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        _ => return None,
    })
}

pub fn is_f8(d: DType) -> bool {
    matches!(d, DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ)
}

/// Small types QuantizeLinear/DequantizeLinear handle through the `*_small` kernels (raw bits).
pub fn is_small_quant(d: DType) -> bool {
    is_f8(d) || matches!(d, DType::F4E2M1 | DType::I4 | DType::U4 | DType::I2 | DType::U2)
}

/// Integer values of an integer tensor.
pub fn ints(t: &Tensor, what: &str) -> Result<Vec<i64>, String> {
    if !t.dtype().is_int() {
        return Err(format!("{what} must be an integer tensor, got {}", t.dtype()));
    }
    t.to_i64_vec().ok_or_else(|| format!("{what} must be an integer tensor"))
}

/// Clamp integers into `to`'s range and store them as `to`.
pub fn from_ints(shape: Vec<usize>, v: Vec<i64>, to: DType) -> Result<Tensor, String> {
    let (lo, hi) = int_range(to).ok_or_else(|| format!("{to} is not a quantized integer type"))?;
    let v: Vec<i64> = v.into_iter().map(|x| x.clamp(lo, hi)).collect();
    cast(&Tensor::new(shape, Data::I64(v)), to, false)
}
