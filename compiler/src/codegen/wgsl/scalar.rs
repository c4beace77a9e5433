//! Scalar functions as WGSL expressions: the same meanings the CUDA printer writes in C
//! (`ir::UnaryOp`, `ir::BinaryOp`, `ir::scalar` programs), with the interpreter's semantics
//! (NaN propagates through Max/Min and Relu, Round is half to even, Mod follows the divisor's
//! sign). WGSL has no `erf` or `log1p`, and no literal for infinity (a constant expression
//! that overflows is an error): [`PRELUDE`] defines them as functions.
use crate::codegen::gpu::scalar::{arithmetic, comparison, is_inf, libm};
use crate::ir::{BinaryOp, DType, UnaryOp};

/// Functions every module's WGSL defines, used by the expressions below.
pub const PRELUDE: &str = r#"// 16-bit floats as stored: the bits of an f32 rounded to nearest even (NaN stays NaN, past
// the largest finite value is infinity), and back. Written out: WGSL's pack2x16float leaves
// out-of-range values undefined and needs a capability some backends lack.
fn f16_bits(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  let sign = (b >> 16u) & 0x8000u;
  let a = b & 0x7fffffffu;
  if (a > 0x7f800000u) { return sign | 0x7e00u; }
  if (a >= 0x477ff000u) { return sign | 0x7c00u; }
  if (a >= 0x38800000u) {
    let r = a - 0x38000000u;
    return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
  }
  return sign | u32(round(bitcast<f32>(a) * 16777216.0));
}
fn f16_value(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0u) { return select(1.0, -1.0, sign != 0u) * f32(m) * 5.9604645e-8; }
  if (e == 31u) { return bitcast<f32>(sign | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}
fn bf16_bits(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}
// Infinity from its bits at run time (a constant expression may not overflow).
fn inf_f32(bits: u32) -> f32 { return bitcast<f32>(bits); }
// NaN by its bits: drivers may fold `x != x` to false.
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// asin and acos through atan2: some drivers' own are good to 1e-3 only.
fn asin_f32(x: f32) -> f32 { return atan2(x, sqrt(max(0.0, 1.0 - x * x))); }
fn acos_f32(x: f32) -> f32 { return atan2(sqrt(max(0.0, 1.0 - x * x)), x); }
// erf: its Taylor series near 0 (relative error below 1e-7), Abramowitz-Stegun 7.1.26 beyond
// (absolute error below 1.5e-7).
fn erf_f32(x: f32) -> f32 {
  let a = abs(x);
  if (a < 0.5) {
    let x2 = x * x;
    return 1.1283791671 * x * (1.0 + x2 * (-0.3333333333 + x2 * (0.1 + x2 * (-0.0238095238 + x2 * 0.0046296296))));
  }
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let y = 1.0 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * exp(-a * a);
  return select(y, -y, x < 0.0);
}
// log(1 + x) without losing small x (the rounding of 1 + x is undone).
fn log1p_f32(x: f32) -> f32 {
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  return log(u) * x / (u - 1.0);
}
"#;

/// The WGSL type arithmetic on elements of `d` runs in: f32; i32 for the signed integers
/// (int64 tensors are computed in their low 32 bits); u32 for bool and bytes (0/1 for bool).
pub fn compute_type(d: DType) -> Option<&'static str> {
    Some(match d {
        // 16-bit floats are storage only: loads widen, stores round to nearest even.
        DType::F32 | DType::F16 | DType::BF16 => "f32",
        DType::I32 | DType::I64 => "i32",
        DType::Bool | DType::U8 => "u32",
        _ => return None,
    })
}

/// Whether `d` is computed as f32 (f32 and the 16-bit floats).
pub fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16)
}

/// An f32 constant as a WGSL expression with exactly its bits.
pub fn f32_lit(x: f32) -> String {
    if x.is_finite() {
        // `{:?}` keeps a `.0` on whole numbers, so the literal is a float; Rust prints the
        // shortest text that reads back as the same f32.
        let t = format!("{x:?}");
        if x < 0.0 {
            format!("({t})")
        } else {
            t
        }
    } else {
        format!("inf_f32({:#010x}u)", x.to_bits())
    }
}

/// A constant of the compute type of `d` (from an f32 attribute).
fn lit(x: f32, d: DType) -> String {
    match compute_type(d) {
        Some("i32") => format!("i32({})", x as i64),
        Some("u32") => format!("{}u", x.max(0.0) as u64),
        _ => f32_lit(x),
    }
}

/// `c ? a : b`.
fn sel(c: &str, a: &str, b: &str) -> String {
    format!("select({b}, {a}, {c})")
}

/// Element `x` (of `from`'s compute type) converted to `to`'s compute type with the
/// interpreter's rules: to bool as `!= 0`, float to int truncating and saturating with NaN as
/// 0, int to float rounding to nearest.
pub fn cast(x: &str, from: DType, to: DType) -> Option<String> {
    let (ft, tt) = (compute_type(from)?, compute_type(to)?);
    Some(if from == to || (ft == tt && to != DType::Bool && from != DType::Bool) {
        x.to_string()
    } else if to == DType::Bool {
        format!("u32({x} != {})", lit(0.0, from))
    } else if is_float(from) {
        // WGSL's f32 → i32 conversion already saturates; NaN is 0 as the interpreter's.
        let t = if to == DType::U8 { format!("u32(clamp({x}, 0.0, 255.0))") } else { format!("{tt}({x})") };
        sel(&format!("is_nan({x})"), &lit(0.0, to), &t)
    } else if to == DType::U8 {
        format!("(u32({x}) & 0xffu)")
    } else {
        format!("{tt}({x})")
    })
}

/// `u(x)` for an element `x` of `d`'s compute type, or `None` where the op has no meaning on
/// `d` (or the target has no kernel for it).
pub fn unary(u: UnaryOp, x: &str, d: DType) -> Option<String> {
    let fl = is_float(d);
    let ct = compute_type(d)?;
    let one = |v: f32| lit(v, d);
    let call = |name: &str| format!("{name}({x})");
    let neg_inf = f32_lit(f32::NEG_INFINITY);
    let pos_inf = f32_lit(f32::INFINITY);
    if let (true, Some(name)) = (fl, libm(u)) {
        return Some(call(name));
    }
    Some(match u {
        UnaryOp::Identity => x.to_string(),
        UnaryOp::Neg if ct == "i32" || fl => format!("(-{x})"),
        UnaryOp::Abs if ct == "i32" || fl => call("abs"),
        UnaryOp::Sign if ct == "i32" || fl => call("sign"),
        UnaryOp::Not if d == DType::Bool => format!("(1u - {x})"),
        UnaryOp::BitwiseNot if ct == "i32" => format!("(~{x})"),
        UnaryOp::BitwiseNot if d == DType::U8 => format!("(~{x} & 0xffu)"),
        UnaryOp::IsNaN if fl => format!("u32(is_nan({x}))"),
        UnaryOp::IsInf { detect_negative, detect_positive } if fl => format!("u32({})", is_inf(x, detect_negative, detect_positive, &pos_inf, &neg_inf, "false")),
        _ if !fl => return None,
        UnaryOp::Reciprocal => format!("(1.0 / {x})"),
        // WGSL's round is half to even.
        UnaryOp::Round => call("round"),
        UnaryOp::Asin => call("asin_f32"),
        UnaryOp::Acos => call("acos_f32"),
        UnaryOp::Erf => call("erf_f32"),
        // tanh of a large argument is NaN on some drivers (exp overflows): clamp first.
        UnaryOp::Tanh => format!("tanh(clamp({x}, -20.0, 20.0))"),
        UnaryOp::Relu => sel(&format!("{x} > 0.0"), x, &sel(&format!("is_nan({x})"), x, "0.0")),
        // One exp of -|x|: never overflows (as the CPU kernel computes it).
        UnaryOp::Sigmoid => sel(&format!("{x} >= 0.0"), &format!("1.0 / (1.0 + exp(-{x}))"), &format!("exp({x}) / (1.0 + exp({x}))")),
        UnaryOp::Softplus => sel(&format!("{x} > 20.0"), x, &format!("log1p_f32(exp({x}))")),
        UnaryOp::Softsign => format!("({x} / (1.0 + abs({x})))"),
        UnaryOp::LeakyRelu { alpha } => sel(&format!("{x} < 0.0"), &format!("{} * {x}", one(alpha)), x),
        UnaryOp::Elu { alpha } => sel(&format!("{x} < 0.0"), &format!("{} * (exp({x}) - 1.0)", one(alpha)), x),
        UnaryOp::Selu { alpha, gamma } => format!("({} * {})", one(gamma), sel(&format!("{x} <= 0.0"), &format!("{} * (exp({x}) - 1.0)", one(alpha)), x)),
        UnaryOp::Celu { alpha } => format!("(max({x}, 0.0) + min(0.0, {a} * (exp({x} / {a}) - 1.0)))", a = one(alpha)),
        UnaryOp::HardSigmoid { alpha, beta } => format!("max(0.0, min(1.0, {} * {x} + {}))", one(alpha), one(beta)),
        UnaryOp::HardSwish => format!("({x} * max(0.0, min(1.0, {x} / 6.0 + 0.5)))"),
        UnaryOp::ThresholdedRelu { alpha } => sel(&format!("{x} > {}", one(alpha)), x, "0.0"),
        UnaryOp::Gelu { tanh_approx: false } => format!("(0.5 * {x} * (1.0 + erf_f32({x} * {})))", f32_lit(core::f32::consts::FRAC_1_SQRT_2)),
        UnaryOp::Gelu { tanh_approx: true } => format!("(0.5 * {x} * (1.0 + tanh(clamp({} * ({x} + 0.044715 * {x} * {x} * {x}), -20.0, 20.0))))", f32_lit(0.797_884_6)),
        UnaryOp::Mish => format!("({x} * tanh({}))", sel(&format!("{x} > 20.0"), x, &format!("log1p_f32(exp({x}))"))),
        _ => return None,
    })
}

/// `a op b` for elements of `d`'s compute type (comparisons and logic give 0/1 as u32).
pub fn binary(op: BinaryOp, a: &str, b: &str, d: DType) -> Option<String> {
    let fl = is_float(d);
    let ct = compute_type(d)?;
    let int = ct == "i32";
    let bool_ = d == DType::Bool;
    let zero = lit(0.0, d);
    if let (Some(o), false) = (arithmetic(op), bool_) {
        return Some(format!("({a} {o} {b})"));
    }
    if let Some(o) = comparison(op) {
        return Some(format!("u32({a} {o} {b})"));
    }
    Some(match op {
        BinaryOp::Div if fl => format!("({a} / {b})"),
        // Integer division by zero is undefined in the reference too; 0 here, never a trap.
        BinaryOp::Div if int => sel(&format!("{b} == 0"), "0", &format!("{a} / {b}")),
        BinaryOp::Pow if fl => format!("pow_f32({a}, {b})"),
        BinaryOp::Mod { fmod: true } if fl => format!("({a} - {b} * trunc({a} / {b}))"),
        BinaryOp::Mod { fmod } if int => {
            let r = format!("({a} % select({b}, 1, {b} == 0))");
            if fmod {
                sel(&format!("{b} == 0"), "0", &r)
            } else {
                sel(&format!("{b} == 0"), "0", &sel(&format!("{r} != 0 && (({r} < 0) != ({b} < 0))"), &format!("{r} + {b}"), &r))
            }
        }
        // NaN in either operand gives NaN, as the reference's Max/Min do.
        BinaryOp::Max if fl => sel(&format!("{a} > {b} || is_nan({a})"), a, b),
        BinaryOp::Min if fl => sel(&format!("{a} < {b} || is_nan({a})"), a, b),
        BinaryOp::Max if !bool_ => format!("max({a}, {b})"),
        BinaryOp::Min if !bool_ => format!("min({a}, {b})"),
        BinaryOp::And if bool_ => format!("({a} & {b})"),
        BinaryOp::Or if bool_ => format!("({a} | {b})"),
        BinaryOp::Xor if bool_ => format!("({a} ^ {b})"),
        BinaryOp::BitAnd if int => format!("({a} & {b})"),
        BinaryOp::BitOr if int => format!("({a} | {b})"),
        BinaryOp::BitXor if int => format!("({a} ^ {b})"),
        BinaryOp::PRelu if fl => sel(&format!("{a} < {zero}"), &format!("{b} * {a}"), a),
        _ => return None,
    })
}

/// `pow` with the reference's results where WGSL leaves them undefined (a negative base with
/// an integer exponent, a zero base).
pub const POW: &str = r#"fn pow_f32(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (a == 0.0) { return select(0.0, inf_f32(0x7f800000u), b < 0.0); }
  let m = pow(abs(a), b);
  if (a > 0.0) { return m; }
  if (b != trunc(b)) { return inf_f32(0x7fc00000u); }
  let odd = abs(b - 2.0 * trunc(b / 2.0)) == 1.0;
  return select(m, -m, odd);
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_floats_with_their_bits() {
        assert_eq!(f32_lit(1.0), "1.0");
        assert_eq!(f32_lit(-2.5), "(-2.5)");
        assert_eq!(f32_lit(f32::INFINITY), "inf_f32(0x7f800000u)");
        let x = 0.1f32 + 0.2;
        assert_eq!(f32_lit(x).parse::<f32>().map(f32::to_bits), Ok(x.to_bits()));
        assert_eq!(f32_lit(1e-30), "1e-30");
    }

    #[test]
    fn ops_refuse_types_they_have_no_meaning_on() {
        assert!(unary(UnaryOp::Exp, "x", DType::I64).is_none());
        assert!(unary(UnaryOp::Exp, "x", DType::F64).is_none());
        assert!(binary(BinaryOp::And, "a", "b", DType::F32).is_none());
        assert_eq!(binary(BinaryOp::Less, "a", "b", DType::F32).as_deref(), Some("u32(a < b)"));
        assert_eq!(cast("x", DType::I64, DType::I32).as_deref(), Some("x"));
        assert_eq!(cast("x", DType::F32, DType::Bool).as_deref(), Some("u32(x != 0.0)"));
    }
}
