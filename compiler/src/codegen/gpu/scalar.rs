//! Scalar functions as both GPU targets print them: which ops are one call of the language's
//! math library, the infix operators, and fused elementwise programs (`ir::scalar`) printed
//! step by step. Each target's `scalar` module prints the rest of an op's meaning in its
//! language (types, NaN handling, casts).
use super::Dialect;
use crate::ir::scalar::{Printer, ScalarProgram};
use crate::ir::{BinaryOp, DType, UnaryOp};

/// The math-library function computing `u` on a float, where both languages have it under
/// this name (CUDA adds the `f` of its f32 variants).
pub fn libm(u: UnaryOp) -> Option<&'static str> {
    Some(match u {
        UnaryOp::Exp => "exp",
        UnaryOp::Log => "log",
        UnaryOp::Sqrt => "sqrt",
        UnaryOp::Floor => "floor",
        UnaryOp::Ceil => "ceil",
        UnaryOp::Sin => "sin",
        UnaryOp::Cos => "cos",
        UnaryOp::Tan => "tan",
        UnaryOp::Atan => "atan",
        UnaryOp::Sinh => "sinh",
        UnaryOp::Cosh => "cosh",
        UnaryOp::Asinh => "asinh",
        UnaryOp::Acosh => "acosh",
        UnaryOp::Atanh => "atanh",
        _ => return None,
    })
}

/// The infix operator of an arithmetic op (`a op b` in both languages, on non-bool operands).
pub fn arithmetic(op: BinaryOp) -> Option<&'static str> {
    Some(match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        _ => return None,
    })
}

/// The infix operator of a comparison (its result a 0/1 bool element).
pub fn comparison(op: BinaryOp) -> Option<&'static str> {
    Some(match op {
        BinaryOp::Equal => "==",
        BinaryOp::Less => "<",
        BinaryOp::LessOrEqual => "<=",
        BinaryOp::Greater => ">",
        BinaryOp::GreaterOrEqual => ">=",
        _ => return None,
    })
}

/// IsInf's test of `x`, a bool expression: `x == inf || x == -inf` (the language's infinities
/// `pos_inf`, `neg_inf`), a side not detected being `no`.
pub fn is_inf(x: &str, detect_negative: bool, detect_positive: bool, pos_inf: &str, neg_inf: &str, no: &str) -> String {
    let pos = if detect_positive { format!("{x} == {pos_inf}") } else { no.into() };
    let neg = if detect_negative { format!("{x} == {neg_inf}") } else { no.into() };
    format!("{pos} || {neg}")
}

/// The statements computing one element of a fused f32 program: `inputs[i]` is the
/// expression of input `i` at this element; the result is left in `s<last>`.
pub fn program(d: Dialect, p: &ScalarProgram, inputs: &[String]) -> Option<(String, String)> {
    let printer = Printer {
        unary: &|u, x| d.unary(u, x, DType::F32),
        binary: &|b, x, y| d.binary(b, x, y, DType::F32),
        lit: &|x| d.f32_lit(x),
        decl: &|k, e| d.float_let(&format!("s{k}"), e),
    };
    p.print(inputs, &printer)
}
