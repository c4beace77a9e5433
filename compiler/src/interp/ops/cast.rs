//! Conversions between every dtype, float8 included (`cast`, which `ops::cast` calls).
use crate::float8;
use crate::ir::DType;
use crate::tensor::{Data, Tensor};
use burnc_runtime::Elem;
use half::{bf16, f16};

fn convert<S: Elem, T: Elem>(v: &[S]) -> Vec<T> {
    if S::IS_FLOAT {
        v.iter().map(|&x| T::from_f64(x.to_f64())).collect()
    } else if T::IS_FLOAT {
        // Unsigned 64-bit values above i64::MAX must not go through i64.
        v.iter().map(|&x| if x < S::zero() { T::from_f64(x.to_i64() as f64) } else { T::from_f64(x.to_u64() as f64) }).collect()
    } else {
        v.iter().map(|&x| T::from_i64(x.to_i64())).collect()
    }
}

fn to_type<S: Elem>(v: &[S], to: DType) -> Data {
    match to {
        DType::F32 => Data::F32(convert(v)),
        DType::F64 => Data::F64(convert(v)),
        DType::F16 => Data::F16(convert::<S, f16>(v)),
        DType::BF16 => Data::BF16(convert::<S, bf16>(v)),
        DType::I8 => Data::I8(convert(v)),
        DType::I16 => Data::I16(convert(v)),
        DType::I32 => Data::I32(convert(v)),
        DType::I64 => Data::I64(convert(v)),
        DType::U8 => Data::U8(convert(v)),
        DType::U16 => Data::U16(convert(v)),
        DType::U32 => Data::U32(convert(v)),
        DType::U64 => Data::U64(convert(v)),
        DType::Bool => Data::Bool(v.iter().map(|&x| x != S::zero()).collect()),
        d => Data::F8(d, Vec::new()),
    }
}

pub fn cast(x: &Tensor, to: DType, saturate: bool) -> Result<Tensor, String> {
    if x.dtype() == to {
        return Ok(x.clone());
    }
    if let Data::Str(v) = &x.data {
        return cast(&parse_strings(v, x.shape.clone(), to)?, to, saturate);
    }
    if to == DType::Str {
        return Ok(Tensor::new(x.shape.clone(), Data::Str(texts(x))));
    }
    let data = if to.is_small() {
        let src_int = x.dtype().is_int() || x.dtype() == DType::Bool;
        match (to.is_int(), src_int) {
            // Int to 2/4-bit int: wrap, exactly.
            (true, true) => {
                let v = x.to_i64_vec().ok_or("cannot read integers")?;
                Data::F8(to, v.iter().map(|&i| float8::small_from_i64(to, i)).collect())
            }
            // Float to small float: through f32 (f64 first rounds to f32, as the ONNX
            // reference does).
            _ => {
                let vals = x.to_f64_vec();
                let round32 = !to.is_int();
                Data::F8(to, vals.iter().map(|&v| float8::small_from_f64(to, if round32 { v as f32 as f64 } else { v }, saturate)).collect())
            }
        }
    } else if let Data::F8(_, _) = &x.data {
        let vals: Vec<f32> = x.to_f64_vec().into_iter().map(|v| v as f32).collect();
        to_type(&vals, to)
    } else {
        crate::with_data!(&x.data, v => to_type(v, to), f8 => unreachable_f8())
    };
    Ok(Tensor::new(x.shape.clone(), data))
}

/// Strings read as numbers for a Cast to `to`: integers for integer targets, floats otherwise
/// (`runtime::strings::parse_*`, which generated code calls too).
fn parse_strings(v: &[String], shape: Vec<usize>, to: DType) -> Result<Tensor, String> {
    use burnc_runtime::strings::{parse_float, parse_int};
    let bad = |s: &String| format!("cannot read {s:?} as a number of type {to}");
    Ok(if to.is_int() {
        // Above i64::MAX the bits wrap and come back unsigned in the cast to u64.
        let ints = v.iter().map(|s| parse_int(s).map(|i| i as i64).ok_or_else(|| bad(s))).collect::<Result<_, _>>()?;
        Tensor::new(shape, Data::I64(ints))
    } else {
        Tensor::new(shape, Data::F64(v.iter().map(|s| parse_float(s).ok_or_else(|| bad(s))).collect::<Result<_, _>>()?))
    })
}

/// Elements as Cast writes them to strings (`runtime::strings::*_text`).
fn texts(x: &Tensor) -> Vec<String> {
    use burnc_runtime::strings::{float_text, int_text, uint_text};
    match &x.data {
        Data::U64(v) => v.iter().map(|&u| uint_text(u)).collect(),
        Data::Bool(v) => v.iter().map(|&b| int_text(b as i64)).collect(),
        _ if x.dtype().is_float() => x.to_f64_vec().into_iter().map(float_text).collect(),
        _ => x.to_i64_vec().unwrap_or_default().into_iter().map(int_text).collect(),
    }
}

fn unreachable_f8() -> Data {
    Data::F32(Vec::new())
}
