//! The four float8 formats of ONNX: decoding, and encoding with round-to-nearest-even and the
//! `saturate` rule of Cast.
use crate::ir::DType;

struct Format {
    mbits: u32,
    bias: i32,
    /// FNUZ formats: 0x80 is the only NaN, no negative zero, no infinities.
    uz: bool,
    /// E5M2 has IEEE infinities and NaNs; E4M3FN has only S.1111.111 as NaN.
    ieee: bool,
}

fn format(d: DType) -> Format {
    match d {
        DType::F8E4M3FN => Format { mbits: 3, bias: 7, uz: false, ieee: false },
        DType::F8E4M3FNUZ => Format { mbits: 3, bias: 8, uz: true, ieee: false },
        DType::F8E5M2 => Format { mbits: 2, bias: 15, uz: false, ieee: true },
        _ => Format { mbits: 2, bias: 16, uz: true, ieee: false },
    }
}

/// Decode float8 bits of type `d`.
pub fn to_f32(d: DType, bits: u8) -> f32 {
    let f = format(d);
    let sign = if bits & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let ebits = 7 - f.mbits;
    let exp = ((bits >> f.mbits) & ((1 << ebits) - 1) as u8) as i32;
    let mant = (bits & ((1 << f.mbits) - 1) as u8) as u32;
    if f.uz && bits == 0x80 {
        return f32::NAN;
    }
    let emax = (1 << ebits) - 1;
    if f.ieee && exp == emax {
        return if mant == 0 { sign * f32::INFINITY } else { f32::NAN };
    }
    if !f.ieee && !f.uz && exp == emax && mant == (1 << f.mbits) - 1 {
        return f32::NAN;
    }
    let m = mant as f32 / (1 << f.mbits) as f32;
    if exp == 0 {
        sign * m * 2f32.powi(1 - f.bias)
    } else {
        sign * (1.0 + m) * 2f32.powi(exp - f.bias)
    }
}

/// Largest finite value of the format.
fn max_finite(d: DType) -> f32 {
    (0u8..0x80).map(|b| to_f32(d, b)).filter(|v| v.is_finite()).fold(0.0, f32::max)
}

/// Encode `x` as float8 of type `d`, rounding to nearest even. Out-of-range values become the
/// largest finite value when `saturate`, else infinity (E5M2) or NaN.
pub fn from_f32(d: DType, x: f32, saturate: bool) -> u8 {
    let f = format(d);
    let nan: u8 = if f.uz { 0x80 } else { 0x7f };
    if x.is_nan() {
        return if f.ieee { 0x7f } else { nan };
    }
    let neg = x.is_sign_negative();
    let sign_bit: u8 = if neg && !f.uz { 0x80 } else { 0 };
    let ax = x.abs();
    let max = max_finite(d);
    let overflow = |sign_bit: u8| -> u8 {
        if saturate {
            encode_pos(d, max) | if neg { 0x80 } else { 0 }
        } else if f.ieee {
            sign_bit | 0x7c
        } else {
            nan
        }
    };
    if ax.is_infinite() {
        return overflow(sign_bit);
    }
    // Positive codes in increasing value order: 0x00..=max code.
    let top = encode_pos(d, max);
    let ulp_top = max - to_f32(d, top - 1);
    if ax > max {
        // Between max and the next (virtual) value max+ulp: ties go to the even one, and
        // max's code is odd for every format (mantissa all ones or 110), so ties overflow.
        let code_odd = top & 1 == 1;
        let mid = max + ulp_top / 2.0;
        let rounds_down = ax < mid || (ax == mid && !code_odd);
        return if rounds_down { top | if neg { 0x80 } else { 0 } } else { overflow(sign_bit) };
    }
    let code = nearest_even(d, ax, top);
    if code == 0 {
        // Zero: FNUZ has no negative zero.
        return if f.uz { 0 } else { sign_bit };
    }
    code | if neg { 0x80 } else { 0 }
}

fn encode_pos(d: DType, v: f32) -> u8 {
    (0u8..0x80).find(|&b| to_f32(d, b) == v).unwrap_or(0)
}

/// Nearest positive code to `ax` (0 <= ax <= max), ties to the even code.
fn nearest_even(d: DType, ax: f32, top: u8) -> u8 {
    let (mut lo, mut hi) = (0u8, top);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if to_f32(d, mid) <= ax {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let (vl, vh) = (to_f32(d, lo), to_f32(d, hi));
    if ax <= vl {
        return lo;
    }
    if ax >= vh {
        return hi;
    }
    let (dl, dh) = (ax - vl, vh - ax);
    if dl < dh {
        lo
    } else if dh < dl {
        hi
    } else if lo & 1 == 0 {
        lo
    } else {
        hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(max_finite(DType::F8E4M3FN), 448.0);
        assert_eq!(max_finite(DType::F8E4M3FNUZ), 240.0);
        assert_eq!(max_finite(DType::F8E5M2), 57344.0);
        assert_eq!(max_finite(DType::F8E5M2FNUZ), 57344.0);
        assert_eq!(to_f32(DType::F8E4M3FN, from_f32(DType::F8E4M3FN, 1.0, true)), 1.0);
        assert_eq!(to_f32(DType::F8E4M3FN, from_f32(DType::F8E4M3FN, 1000.0, true)), 448.0);
        assert!(to_f32(DType::F8E4M3FN, from_f32(DType::F8E4M3FN, 1000.0, false)).is_nan());
        assert_eq!(to_f32(DType::F8E5M2, from_f32(DType::F8E5M2, 1e6, false)), f32::INFINITY);
        // 1.0625 is halfway between 1.0 and 1.125 in E4M3: ties to even (1.0).
        assert_eq!(to_f32(DType::F8E4M3FN, from_f32(DType::F8E4M3FN, 1.0625, true)), 1.0);
    }
}

/// Decode any small type (`DType::is_small`) from its raw bits.
pub fn small_to_f64(d: DType, bits: u8) -> f64 {
    match d {
        DType::U4 => (bits & 0xF) as f64,
        DType::I4 => (((bits & 0xF) << 4) as i8 >> 4) as f64,
        DType::U2 => (bits & 0x3) as f64,
        DType::I2 => (((bits & 0x3) << 6) as i8 >> 6) as f64,
        DType::F4E2M1 => {
            let sign = if bits & 0x8 != 0 { -1.0 } else { 1.0 };
            let e = (bits >> 1) & 0x3;
            let m = (bits & 1) as f64;
            sign * if e == 0 { m * 0.5 } else { (1.0 + m / 2.0) * f64::powi(2.0, e as i32 - 1) }
        }
        DType::F8E8M0 => {
            if bits == 0xFF {
                f64::NAN
            } else {
                f64::powi(2.0, bits as i32 - 127)
            }
        }
        _ => to_f32(d, bits) as f64,
    }
}

/// Encode a float as a small type, with Cast's rules: 2/4-bit ints truncate toward zero and
/// wrap (NaN and infinities give 0); float4 rounds to nearest even and saturates at ±6;
/// E8M0 takes the exponent, rounding up when any mantissa bit is set (Cast's default
/// `round_mode="up"`), saturating at 2^127 when `saturate`.
pub fn small_from_f64(d: DType, x: f64, saturate: bool) -> u8 {
    match d {
        DType::U4 | DType::I4 | DType::U2 | DType::I2 => {
            let v = if x.is_finite() { x.trunc() as i64 } else { 0 };
            small_from_i64(d, v)
        }
        DType::F4E2M1 => {
            const VALUES: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
            let neg = x.is_sign_negative();
            let ax = if x.is_nan() { 0.0 } else { x.abs().min(6.0) };
            let mut best = 0usize;
            for (i, &v) in VALUES.iter().enumerate() {
                let (db, dv) = ((ax - VALUES[best]).abs(), (ax - v).abs());
                if dv < db || (dv == db && i % 2 == 0 && best % 2 == 1) {
                    best = i;
                }
            }
            best as u8 | if neg { 0x8 } else { 0 }
        }
        DType::F8E8M0 => {
            let b = (x as f32).to_bits();
            let exp = (b >> 23) & 0xFF;
            if exp == 0xFF {
                return 0xFF;
            }
            let frac = b & 0x7F_FFFF != 0;
            let mut e = exp;
            if frac && !(saturate && exp == 0xFE) {
                e += 1;
            }
            e.min(0xFF) as u8
        }
        _ => from_f32(d, x as f32, saturate),
    }
}

/// Wrap an integer into a 2/4-bit type (two's complement truncation, as numpy's astype).
pub fn small_from_i64(d: DType, v: i64) -> u8 {
    let mask: i64 = if matches!(d, DType::U2 | DType::I2) { 0x3 } else { 0xF };
    (v & mask) as u8
}
