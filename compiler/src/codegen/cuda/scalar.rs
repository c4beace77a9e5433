//! Scalar functions as CUDA C expressions: element types, literals, the unary and binary ops
//! and fused elementwise programs, each printed from the op's meaning (`ir::UnaryOp`,
//! `ir::BinaryOp`, `ir::scalar`), with the interpreter's semantics (NaN propagates through
//! Max/Min and Relu, Round is half to even, Mod follows the divisor's sign).
use crate::codegen::gpu::scalar::{arithmetic, comparison, is_inf, libm};
use crate::ir::{BinaryOp, DType, UnaryOp};

/// The 16-bit float types every module defines (`c_type` names them): storage only, with no
/// arithmetic of their own, so every expression on them runs in f32.
pub const PRELUDE: &str = r#"// 16-bit floats as stored: a load widens to float, a store rounds to nearest even.
struct bf16_t {
  unsigned short bits;
  bf16_t() = default;
  __device__ bf16_t(float f) { asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(f)); }
  __device__ operator float() const { return __uint_as_float((unsigned int)bits << 16); }
};
struct f16_t {
  unsigned short bits;
  f16_t() = default;
  __device__ f16_t(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f)); }
  __device__ operator float() const { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits)); return f; }
};
"#;

/// Whether `d` is one of the 16-bit floats, computed in f32.
pub fn is_half(d: DType) -> bool {
    matches!(d, DType::BF16 | DType::F16)
}

/// An element expression of type `d` as the type its arithmetic runs in: 16-bit floats widen
/// to f32 (so ternaries and calls see one type), others stay.
fn widened(x: &str, d: DType) -> (String, DType) {
    if is_half(d) {
        (format!("((float){x})"), DType::F32)
    } else {
        (x.to_string(), d)
    }
}

/// The C type of an element of `d` in device memory (bool as one byte, 0 or 1).
pub fn c_type(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I8 => "signed char",
        DType::I16 => "short",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::U8 | DType::Bool => "unsigned char",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long long",
        DType::BF16 => "bf16_t",
        DType::F16 => "f16_t",
        _ => return None,
    })
}

/// The C type arithmetic on elements of `d` runs in.
pub fn compute_type(d: DType) -> Option<&'static str> {
    match d {
        DType::F16 | DType::BF16 => Some("float"),
        _ => c_type(d),
    }
}

/// Element `x` of type `from` converted to `to` with the interpreter's rules: to bool as
/// `!= 0`, float to int truncating and saturating with NaN as 0 (PTX's `cvt` does both for
/// 32- and 64-bit targets; narrower ones saturate through `int`), int to f32 through f64,
/// int to int wrapping.
pub fn cast(x: &str, from: DType, to: DType) -> Option<String> {
    let t = c_type(to)?;
    c_type(from)?;
    let src_float = matches!(from, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
    Some(if from == to {
        x.to_string()
    } else if to == DType::Bool {
        format!("(unsigned char)({x} != 0)")
    } else if src_float && matches!(to, DType::I8 | DType::I16 | DType::U8 | DType::U16) {
        let (lo, hi) = match to {
            DType::I8 => (-128, 127),
            DType::I16 => (-32768, 32767),
            DType::U8 => (0, 255),
            _ => (0, 65535),
        };
        format!("({t})min(max((int)({x}), {lo}), {hi})")
    } else if !src_float && from != DType::Bool && to == DType::F32 && from.size() == 8 {
        format!("(float)(double)({x})")
    } else {
        format!("({t})({x})")
    })
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64)
}

/// An f32 constant as a C expression with exactly its bits.
pub fn f32_lit(x: f32) -> String {
    if x.is_finite() {
        // `{:e}` prints the shortest text that reads back as the same f32.
        format!("{x:e}f")
    } else {
        format!("__int_as_float({:#010x})", x.to_bits())
    }
}

/// A constant of type `d` (from an f32 attribute) as a C expression.
fn lit(x: f32, d: DType) -> String {
    match d {
        DType::F32 => f32_lit(x),
        DType::F64 => format!("(double){}", f32_lit(x)),
        _ => format!("({}){}", c_type(d).unwrap_or("float"), f32_lit(x)),
    }
}

/// A math function name for `d`: `expf` for f32, `exp` for f64.
fn f(name: &str, d: DType) -> String {
    if d == DType::F32 {
        format!("{name}f")
    } else {
        name.to_string()
    }
}

/// `u(x)` for an element `x` of type `d`, or `None` where the op has no meaning on `d`.
pub fn unary(u: UnaryOp, x: &str, d: DType) -> Option<String> {
    let (x, d) = widened(x, d);
    let x = x.as_str();
    let fl = is_float(d);
    let one = |v: f32| lit(v, d);
    let call = |name: &str| format!("{}({x})", f(name, d));
    // Where softplus is x to the type's precision (the CPU kernels' limits).
    let soft_lim = if d == DType::F32 { 20.0 } else { 40.0 };
    if let (true, Some(name)) = (fl, libm(u)) {
        return Some(call(name));
    }
    Some(match u {
        UnaryOp::Identity => x.to_string(),
        UnaryOp::Neg if d != DType::Bool => format!("(-{x})"),
        UnaryOp::Abs if fl => call("fabs"),
        UnaryOp::Abs if d != DType::Bool => format!("({x} < 0 ? -{x} : {x})"),
        UnaryOp::Sign if d != DType::Bool => {
            if fl {
                format!("({x} > 0 ? {} : ({x} < 0 ? {} : {x}))", one(1.0), one(-1.0))
            } else {
                format!("(({x} > 0) - ({x} < 0))")
            }
        }
        UnaryOp::Not if d == DType::Bool => format!("(unsigned char)!{x}"),
        UnaryOp::BitwiseNot if !fl && d != DType::Bool => format!("({})~{x}", c_type(d)?),
        UnaryOp::IsNaN if fl => format!("(unsigned char)({x} != {x})"),
        UnaryOp::IsInf { detect_negative, detect_positive } if fl => {
            format!("(unsigned char)({})", is_inf(x, detect_negative, detect_positive, "(1.0 / 0.0)", "-(1.0 / 0.0)", "0"))
        }
        _ if !fl => return None,
        UnaryOp::Reciprocal => format!("({} / {x})", one(1.0)),
        UnaryOp::Round => call("rint"),
        UnaryOp::Asin => call("asin"),
        UnaryOp::Acos => call("acos"),
        UnaryOp::Erf => call("erf"),
        UnaryOp::Tanh => call("tanh"),
        UnaryOp::Relu => format!("({x} > 0 ? {x} : {})", one(0.0)),
        // One exp of -|x|: never overflows (as the CPU kernel computes it).
        UnaryOp::Sigmoid => format!("({x} >= 0 ? {one} / ({one} + {exp}(-{x})) : {exp}({x}) / ({one} + {exp}({x})))", one = one(1.0), exp = f("exp", d)),
        UnaryOp::Softplus => format!("({x} > {} ? {x} : {}({}({x})))", one(soft_lim), f("log1p", d), f("exp", d)),
        UnaryOp::Softsign => format!("({x} / ({} + {}({x})))", one(1.0), f("fabs", d)),
        UnaryOp::LeakyRelu { alpha } => format!("({x} < 0 ? {} * {x} : {x})", lit(alpha, d)),
        UnaryOp::Elu { alpha } => format!("({x} < 0 ? {} * ({}({x}) - {}) : {x})", lit(alpha, d), f("exp", d), one(1.0)),
        UnaryOp::Selu { alpha, gamma } => format!("({} * ({x} <= 0 ? {} * ({}({x}) - {}) : {x}))", lit(gamma, d), lit(alpha, d), f("exp", d), one(1.0)),
        UnaryOp::Celu { alpha } => format!(
            "({}({x}, {}) + {}({}, {} * ({}({x} / {}) - {})))",
            f("fmax", d),
            one(0.0),
            f("fmin", d),
            one(0.0),
            lit(alpha, d),
            f("exp", d),
            lit(alpha, d),
            one(1.0)
        ),
        UnaryOp::HardSigmoid { alpha, beta } => format!("{}({}, {}({}, {} * {x} + {}))", f("fmax", d), one(0.0), f("fmin", d), one(1.0), lit(alpha, d), lit(beta, d)),
        UnaryOp::HardSwish => format!("({x} * {}({}, {}({}, {x} / {} + {})))", f("fmax", d), one(0.0), f("fmin", d), one(1.0), one(6.0), one(0.5)),
        UnaryOp::ThresholdedRelu { alpha } => format!("({x} > {} ? {x} : {})", lit(alpha, d), one(0.0)),
        UnaryOp::Gelu { tanh_approx: false } => format!("({} * {x} * ({} + {}({x} * {})))", one(0.5), one(1.0), f("erf", d), lit(core::f32::consts::FRAC_1_SQRT_2, d)),
        UnaryOp::Gelu { tanh_approx: true } => format!(
            "({} * {x} * ({} + {}({} * ({x} + {} * {x} * {x} * {x}))))",
            one(0.5),
            one(1.0),
            f("tanh", d),
            lit(0.797_884_6, d),
            lit(0.044715, d)
        ),
        UnaryOp::Mish => format!("({x} * {}({x} > {} ? {x} : {}({}({x}))))", f("tanh", d), one(soft_lim), f("log1p", d), f("exp", d)),
        _ => return None,
    })
}

/// `a op b` for elements of type `d` (comparisons and logic give a 0/1 byte).
pub fn binary(op: BinaryOp, a: &str, b: &str, d: DType) -> Option<String> {
    let ((a, _), (b, d)) = (widened(a, d), widened(b, d));
    let (a, b) = (a.as_str(), b.as_str());
    let fl = is_float(d);
    let int = !fl && d != DType::Bool;
    let bits = d.size() * 8;
    if let (Some(o), false) = (arithmetic(op), d == DType::Bool) {
        return Some(format!("({a} {o} {b})"));
    }
    if let Some(o) = comparison(op) {
        return Some(format!("(unsigned char)({a} {o} {b})"));
    }
    Some(match op {
        BinaryOp::Div if fl => format!("({a} / {b})"),
        // Integer division by zero is undefined in the reference too; 0 here, never a trap.
        BinaryOp::Div if int => format!("({b} == 0 ? ({})0 : ({})({a} / {b}))", c_type(d)?, c_type(d)?),
        BinaryOp::Pow if fl => format!("{}({a}, {b})", f("pow", d)),
        BinaryOp::Pow if int => format!("({})pow((double){a}, (double){b})", c_type(d)?),
        BinaryOp::Mod { fmod: true } if fl => format!("{}({a}, {b})", f("fmod", d)),
        BinaryOp::Mod { fmod } if int => {
            let ty = c_type(d)?;
            if fmod {
                format!("({b} == 0 ? ({ty})0 : ({ty})({a} % {b}))")
            } else {
                format!("({b} == 0 ? ({ty})0 : ({ty})((({a} % {b}) != 0 && ((({a} % {b}) < 0) != ({b} < 0))) ? ({a} % {b}) + {b} : ({a} % {b})))")
            }
        }
        // NaN in either operand gives NaN, as the reference's Max/Min do.
        BinaryOp::Max if fl => format!("(({a} > {b} || {a} != {a}) ? {a} : {b})"),
        BinaryOp::Min if fl => format!("(({a} < {b} || {a} != {a}) ? {a} : {b})"),
        BinaryOp::Max => format!("({a} > {b} ? {a} : {b})"),
        BinaryOp::Min => format!("({a} < {b} ? {a} : {b})"),
        BinaryOp::And if d == DType::Bool => format!("(unsigned char)({a} && {b})"),
        BinaryOp::Or if d == DType::Bool => format!("(unsigned char)({a} || {b})"),
        BinaryOp::Xor if d == DType::Bool => format!("(unsigned char)(!{a} != !{b})"),
        BinaryOp::BitShiftLeft if int => format!("({b} >= {bits} ? ({})0 : ({})({a} << {b}))", c_type(d)?, c_type(d)?),
        // Shifting a signed value right by its width or more leaves its sign in every bit.
        BinaryOp::BitShiftRight if int => {
            let ty = c_type(d)?;
            let fill = if matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64) { format!("({a} < 0 ? ({ty})-1 : ({ty})0)") } else { format!("({ty})0") };
            format!("({b} >= {bits} ? {fill} : ({ty})({a} >> {b}))")
        }
        BinaryOp::BitAnd if int => format!("({})({a} & {b})", c_type(d)?),
        BinaryOp::BitOr if int => format!("({})({a} | {b})", c_type(d)?),
        BinaryOp::BitXor if int => format!("({})({a} ^ {b})", c_type(d)?),
        BinaryOp::PRelu if d != DType::Bool => format!("({a} < 0 ? {b} * {a} : {a})"),
        _ => return None,
    })
}

/// The dtype a binary op's result has for operands of `d`.
pub fn binary_out(op: BinaryOp, d: DType) -> DType {
    match op {
        BinaryOp::Equal | BinaryOp::Less | BinaryOp::LessOrEqual | BinaryOp::Greater | BinaryOp::GreaterOrEqual => DType::Bool,
        _ => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_follow_the_interpreter() {
        assert_eq!(cast("x", DType::F32, DType::F32).unwrap(), "x");
        assert_eq!(cast("x", DType::F32, DType::Bool).unwrap(), "(unsigned char)(x != 0)");
        // Narrow integer targets saturate through int (PTX's cvt saturates 32/64-bit ones).
        assert_eq!(cast("x", DType::F32, DType::U8).unwrap(), "(unsigned char)min(max((int)(x), 0), 255)");
        assert_eq!(cast("x", DType::I64, DType::F32).unwrap(), "(float)(double)(x)");
        assert_eq!(cast("x", DType::F32, DType::BF16).unwrap(), "(bf16_t)(x)");
        assert!(cast("x", DType::F32, DType::F8E4M3FN).is_none());
        // 16-bit floats widen before arithmetic, so a ternary sees one type.
        assert_eq!(unary(UnaryOp::Relu, "x", DType::BF16).unwrap(), "(((float)x) > 0 ? ((float)x) : 0e0f)");
    }

    #[test]
    fn literals_keep_their_bits() {
        assert_eq!(f32_lit(1.0), "1e0f");
        assert_eq!(f32_lit(1e-5), "1e-5f");
        assert_eq!(f32_lit(f32::INFINITY), "__int_as_float(0x7f800000)");
        assert_eq!(f32_lit(f32::NEG_INFINITY), "__int_as_float(0xff800000)");
        let x = 0.1f32 + 0.2;
        let text = f32_lit(x);
        assert_eq!(text.trim_end_matches('f').parse::<f32>().map(f32::to_bits), Ok(x.to_bits()));
    }

    #[test]
    fn ops_refuse_types_they_have_no_meaning_on() {
        assert!(unary(UnaryOp::Exp, "x", DType::I64).is_none());
        assert!(unary(UnaryOp::Not, "x", DType::F32).is_none());
        assert_eq!(unary(UnaryOp::Relu, "x", DType::F32).as_deref(), Some("(x > 0 ? x : 0e0f)"));
        assert!(binary(BinaryOp::And, "a", "b", DType::F32).is_none());
        assert!(binary(BinaryOp::Div, "a", "b", DType::I32).unwrap().contains("== 0"));
        assert_eq!(binary_out(BinaryOp::Less, DType::F32), DType::Bool);
    }
}
