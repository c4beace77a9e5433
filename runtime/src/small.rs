//! The small float and integer formats of ONNX (float8 ×5, float4, int4/uint4, int2/uint2):
//! decoding, and encoding with round-to-nearest-even and the `saturate` rule of Cast. Shared
//! by the interpreter and generated code.
/// The small element types: float8 (four kinds and E8M0), float4 and 2/4-bit integers. In
/// memory and in generated code they are raw bits, one element per byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Small {
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    F8E8M0,
    F4E2M1,
    U4,
    I4,
    U2,
    I2,
}


/// 2^e.
fn pow2(e: i32) -> f32 {
    libm::ldexpf(1.0, e)
}

/// 2^e.
fn powi64(e: i32) -> f64 {
    libm::ldexp(1.0, e)
}

struct Format {
    mbits: u32,
    bias: i32,
    /// FNUZ formats: 0x80 is the only NaN, no negative zero, no infinities.
    uz: bool,
    /// E5M2 has IEEE infinities and NaNs; E4M3FN has only S.1111.111 as NaN.
    ieee: bool,
}

fn format(d: Small) -> Format {
    match d {
        Small::F8E4M3FN => Format { mbits: 3, bias: 7, uz: false, ieee: false },
        Small::F8E4M3FNUZ => Format { mbits: 3, bias: 8, uz: true, ieee: false },
        Small::F8E5M2 => Format { mbits: 2, bias: 15, uz: false, ieee: true },
        _ => Format { mbits: 2, bias: 16, uz: true, ieee: false },
    }
}

/// Decode float8 bits of type `d`.
pub fn to_f32(d: Small, bits: u8) -> f32 {
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
        sign * m * pow2(1 - f.bias)
    } else {
        sign * (1.0 + m) * pow2(exp - f.bias)
    }
}

/// Largest finite value of the format.
fn max_finite(d: Small) -> f32 {
    (0u8..0x80).map(|b| to_f32(d, b)).filter(|v| v.is_finite()).fold(0.0, |a: f32, b: f32| if b > a { b } else { a })
}

/// Encode `x` as float8 of type `d`, rounding to nearest even. Out-of-range values become the
/// largest finite value when `saturate`, else infinity (E5M2) or NaN.
pub fn from_f32(d: Small, x: f32, saturate: bool) -> u8 {
    let f = format(d);
    let nan: u8 = if f.uz { 0x80 } else { 0x7f };
    if x.is_nan() {
        return if f.ieee { 0x7f } else { nan };
    }
    let neg = x.is_sign_negative();
    let sign_bit: u8 = if neg && !f.uz { 0x80 } else { 0 };
    let ax = if x < 0.0 { -x } else { x };
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

fn encode_pos(d: Small, v: f32) -> u8 {
    (0u8..0x80).find(|&b| to_f32(d, b) == v).unwrap_or(0)
}

/// Nearest positive code to `ax` (0 <= ax <= max), ties to the even code.
fn nearest_even(d: Small, ax: f32, top: u8) -> u8 {
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

/// Decode any small type (`Small::is_small`) from its raw bits.
pub fn small_to_f64(d: Small, bits: u8) -> f64 {
    match d {
        Small::U4 => (bits & 0xF) as f64,
        Small::I4 => (((bits & 0xF) << 4) as i8 >> 4) as f64,
        Small::U2 => (bits & 0x3) as f64,
        Small::I2 => (((bits & 0x3) << 6) as i8 >> 6) as f64,
        Small::F4E2M1 => {
            let sign = if bits & 0x8 != 0 { -1.0 } else { 1.0 };
            let e = (bits >> 1) & 0x3;
            let m = (bits & 1) as f64;
            sign * if e == 0 { m * 0.5 } else { (1.0 + m / 2.0) * powi64(e as i32 - 1) }
        }
        Small::F8E8M0 => {
            if bits == 0xFF {
                f64::NAN
            } else {
                powi64(bits as i32 - 127)
            }
        }
        _ => to_f32(d, bits) as f64,
    }
}

/// Encode a float as a small type, with Cast's rules: 2/4-bit ints truncate toward zero and
/// saturate at the type's range, NaN giving 0 (ONNX leaves out-of-range float-to-integer
/// casts undefined; this is the rule of every wider float-to-integer cast in burnc, Rust's
/// `as`: defined, and the same on every CPU); float4 rounds to nearest even and saturates at ±6;
/// E8M0 takes the exponent, rounding up when any mantissa bit is set (Cast's default
/// `round_mode="up"`), saturating at 2^127 when `saturate`.
pub fn small_from_f64(d: Small, x: f64, saturate: bool) -> u8 {
    match d {
        Small::U4 | Small::I4 | Small::U2 | Small::I2 => {
            let (lo, hi) = small_int_range(d);
            // `as` saturates (infinities included) and maps NaN to 0.
            let v = (libm::trunc(x) as i64).clamp(lo, hi);
            small_from_i64(d, v)
        }
        Small::F4E2M1 => {
            const VALUES: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
            let neg = x.is_sign_negative();
            let ax = if x.is_nan() { 0.0 } else { { let a = if x < 0.0 { -x } else { x }; if a < 6.0 { a } else { 6.0 } } };
            let mut best = 0usize;
            for (i, &v) in VALUES.iter().enumerate() {
                let (db, dv) = (libm::fabs(ax - VALUES[best]), libm::fabs(ax - v));
                if dv < db || (dv == db && i % 2 == 0 && best % 2 == 1) {
                    best = i;
                }
            }
            best as u8 | if neg { 0x8 } else { 0 }
        }
        Small::F8E8M0 => {
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

/// The value range of a 2/4-bit integer type (called for those four only).
fn small_int_range(d: Small) -> (i64, i64) {
    match d {
        Small::I2 => (-2, 1),
        Small::U2 => (0, 3),
        Small::I4 => (-8, 7),
        Small::U4 => (0, 15),
        _ => (0, 0),
    }
}

/// Wrap an integer into a 2/4-bit type (two's complement truncation, as numpy's astype).
pub fn small_from_i64(d: Small, v: i64) -> u8 {
    let mask: i64 = if matches!(d, Small::U2 | Small::I2) { 0x3 } else { 0xF };
    (v & mask) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int_of(d: Small, bits: u8) -> i64 {
        small_to_f64(d, bits) as i64
    }

    #[test]
    fn float_to_small_int_truncates_and_saturates() {
        let xs = [-9.7, -9.0, -8.5, -8.0, -0.6, 2.5, 7.0, 7.5, 8.0, 10.2, 15.0, 16.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
        let want_i4 = [-8, -8, -8, -8, 0, 2, 7, 7, 7, 7, 7, 7, 0, 7, -8];
        let want_u4 = [0, 0, 0, 0, 0, 2, 7, 7, 8, 10, 15, 15, 0, 15, 0];
        let want_i2 = [-2, -2, -2, -2, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, -2];
        let want_u2 = [0, 0, 0, 0, 0, 2, 3, 3, 3, 3, 3, 3, 0, 3, 0];
        for (d, want) in [(Small::I4, want_i4), (Small::U4, want_u4), (Small::I2, want_i2), (Small::U2, want_u2)] {
            let got: [i64; 15] = core::array::from_fn(|i| int_of(d, small_from_f64(d, xs[i], false)));
            assert_eq!(got, want, "{d:?}");
        }
    }

    #[test]
    fn int_to_small_int_wraps() {
        assert_eq!(int_of(Small::I4, small_from_i64(Small::I4, -9)), 7);
        assert_eq!(int_of(Small::I4, small_from_i64(Small::I4, 8)), -8);
        assert_eq!(int_of(Small::U2, small_from_i64(Small::U2, 5)), 1);
    }
}
