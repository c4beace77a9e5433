//! Compile-time dtype conversion of weights whose file dtype differs from the model's:
//! between float types (f64/f32/f16/bf16, rounded to nearest even), and between integer types
//! when every value fits. Anything else (float <-> int, bool, f8) is a dtype mismatch.
use burnc_compiler::ir::DType;
use half::{bf16, f16};

fn is_float(d: DType) -> bool {
    matches!(d, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
}

fn is_int(d: DType) -> bool {
    matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16 | DType::U32 | DType::U64)
}

/// Whether [`convert`] handles `from` -> `to`.
pub fn convertible(from: DType, to: DType) -> bool {
    (is_float(from) && is_float(to)) || (is_int(from) && is_int(to))
}

/// Little-endian element `i` of `b`, `w` bytes wide, zero-extended.
fn word(b: &[u8], i: usize, w: usize) -> u64 {
    let mut buf = [0u8; 8];
    buf[..w].copy_from_slice(&b[i * w..(i + 1) * w]);
    u64::from_le_bytes(buf)
}

fn read_float(d: DType, b: &[u8], i: usize) -> f64 {
    match d {
        DType::F64 => f64::from_bits(word(b, i, 8)),
        DType::F32 => f32::from_bits(word(b, i, 4) as u32) as f64,
        DType::F16 => f16::from_bits(word(b, i, 2) as u16).to_f64(),
        _ => bf16::from_bits(word(b, i, 2) as u16).to_f64(),
    }
}

fn write_float(d: DType, v: f64, out: &mut Vec<u8>) {
    match d {
        DType::F64 => out.extend_from_slice(&v.to_le_bytes()),
        // f64 -> f32 rounds once; values that came from f32/f16/bf16 are exact in f64.
        DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        DType::F16 => out.extend_from_slice(&f16::from_f64(v).to_le_bytes()),
        _ => out.extend_from_slice(&bf16::from_f64(v).to_le_bytes()),
    }
}

fn read_int(d: DType, b: &[u8], i: usize) -> i128 {
    let w = d.bits() / 8;
    let raw = word(b, i, w);
    match d {
        DType::I8 => raw as u8 as i8 as i128,
        DType::I16 => raw as u16 as i16 as i128,
        DType::I32 => raw as u32 as i32 as i128,
        DType::I64 => raw as i64 as i128,
        _ => raw as i128,
    }
}

fn int_range(d: DType) -> (i128, i128) {
    match d {
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::I16 => (i16::MIN as i128, i16::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        DType::U8 => (0, u8::MAX as i128),
        DType::U16 => (0, u16::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        _ => (0, u64::MAX as i128),
    }
}

/// Convert `n` elements in `bytes` from `from` to `to`. `Err` names the first integer that does
/// not fit; callers check [`convertible`] and the byte length first.
pub fn convert(from: DType, to: DType, bytes: &[u8], n: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(n * (to.bits() / 8));
    if is_float(from) {
        for i in 0..n {
            let v = read_float(from, bytes, i);
            let at = out.len();
            write_float(to, v, &mut out);
            // A finite weight that the narrower type cannot hold would become ±inf silently.
            if v.is_finite() && !read_float(to, &out[at..], 0).is_finite() {
                return Err(format!("element {i} ({v:e}) is beyond {to}'s range"));
            }
        }
        return Ok(out);
    }
    let (lo, hi) = int_range(to);
    let w = to.bits() / 8;
    for i in 0..n {
        let v = read_int(from, bytes, i);
        if v < lo || v > hi {
            return Err(format!("element {i} ({v}) does not fit in {to}"));
        }
        // The low bytes of an in-range value's two's complement are its encoding in `to`.
        out.extend_from_slice(&(v as u64).to_le_bytes()[..w]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_round_trip() {
        let src: Vec<u8> = [1.0f32, -0.5, 65504.0, 1e-3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let h = convert(DType::F32, DType::F16, &src, 4).expect("f16");
        let back = convert(DType::F16, DType::F32, &h, 4).expect("f32");
        let vals: Vec<f32> = back.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        assert_eq!(vals, [1.0, -0.5, 65504.0, f16::from_f32(1e-3).to_f32()]);
        let b = convert(DType::F32, DType::BF16, &src, 4).expect("bf16");
        assert_eq!(&b[..2], &bf16::from_f32(1.0).to_le_bytes());
    }

    #[test]
    fn floats_beyond_the_target_range_are_refused() {
        let src: Vec<u8> = [1.0f64, 1e300].iter().flat_map(|v| v.to_le_bytes()).collect();
        let e = convert(DType::F64, DType::F32, &src, 2).expect_err("1e300 is no f32");
        assert!(e.contains("element 1"), "{e}");
        let src: Vec<u8> = [1e5f32].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(convert(DType::F32, DType::F16, &src, 1).is_err(), "1e5 is beyond f16's 65504");
        let inf: Vec<u8> = [f64::INFINITY, f64::NAN].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(convert(DType::F64, DType::F32, &inf, 2).is_ok(), "infinities and NaN stay what they are");
    }

    #[test]
    fn ints_checked() {
        let src: Vec<u8> = [-1i64, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(convert(DType::I64, DType::I8, &src, 2).expect("fits"), vec![0xff, 7]);
        assert!(convert(DType::I64, DType::U8, &src, 2).is_err());
        let big = u64::MAX.to_le_bytes();
        assert_eq!(convert(DType::U64, DType::U64, &big, 1).expect("u64"), big.to_vec());
        assert!(!convertible(DType::F32, DType::I32) && !convertible(DType::Bool, DType::Bool));
    }
}
