//! Unary and binary ops: loops over runtime scalar functions, in place where the plan says.
use crate::ops::EmitCx;
use crate::codegen::CodegenError;
use crate::interp::ops::elementwise::runtime_unary;
use crate::ir::scalar::{Arith, Operand, ScalarOp, ScalarProgram};
use crate::ir::{rust_operand, BinaryOp, DType, DimExpr, Graph, NodeId, Op, UnaryOp, ValueId};
use burnc_runtime::kernels::unary::Unary;

fn shape_of(g: &Graph, v: Option<crate::ir::ValueId>) -> Option<(DType, Vec<usize>)> {
    let t = g.tensor_type(v?)?;
    Some((t.dtype, t.shape.as_ref()?.as_fixed()?))
}

/// The scalar function of a binary op over element type `t`, as a closure expression.
fn binary_fn(op: BinaryOp, t: &str) -> Option<String> {
    use BinaryOp::*;
    Some(match op {
        Add => "rt::Elem::add".into(),
        Sub => "rt::Elem::sub".into(),
        Mul => "rt::Elem::mul".into(),
        Div => "rt::Elem::div".into(),
        Max => "rt::Elem::max_of".into(),
        Min => "rt::Elem::min_of".into(),
        PRelu => format!("|p: {t}, s: {t}| if p < <{t} as rt::Elem>::zero() {{ rt::Elem::mul(s, p) }} else {{ p }}"),
        Pow => format!("|p: {t}, q: {t}| <{t} as rt::Elem>::from_f64(rt::math::pow(rt::Elem::to_f64(p), rt::Elem::to_f64(q)))"),
        BitAnd => "|p, q| p & q".into(),
        BitOr => "|p, q| p | q".into(),
        BitXor => "|p, q| p ^ q".into(),
        // Same formulas as the interpreter (interp/ops/elementwise.rs).
        Mod { fmod } => {
            let float = matches!(t, "f32" | "f64" | "rt::half::f16" | "rt::half::bf16");
            match (float, fmod) {
                (true, true) => format!("|p: {t}, q: {t}| <{t} as rt::Elem>::from_f64(rt::math::fmod(rt::Elem::to_f64(p), rt::Elem::to_f64(q)))"),
                (true, false) => format!(
                    "|p: {t}, q: {t}| {{ let (x, y) = (rt::Elem::to_f64(p), rt::Elem::to_f64(q)); let r = rt::math::fmod(x, y); \
                     <{t} as rt::Elem>::from_f64(if r != 0.0 && ((r < 0.0) != (y < 0.0)) {{ r + y }} else {{ r }}) }}"
                ),
                (false, true) => format!("|p: {t}, q: {t}| if q == 0 {{ 0 }} else {{ rt::Elem::sub(p, rt::Elem::mul(rt::Elem::div(p, q), q)) }}"),
                (false, false) => format!(
                    "|p: {t}, q: {t}| if q == 0 {{ 0 }} else {{ let r = rt::Elem::sub(p, rt::Elem::mul(rt::Elem::div(p, q), q)); \
                     if r != 0 && ((r < <{t} as rt::Elem>::zero()) != (q < <{t} as rt::Elem>::zero())) {{ rt::Elem::add(r, q) }} else {{ r }} }}"
                ),
            }
        }
        BitShiftLeft => format!("|p: {t}, q: {t}| if {} >= <{t}>::BITS as u64 {{ 0 }} else {{ p << q }}", shift_as_u64(t)),
        // Out-of-range shifts (negative or >= width) fill with the sign bit, as the interpreter.
        BitShiftRight => {
            let fill = if t.starts_with('i') { "if p < 0 { -1 } else { 0 }" } else { "0" };
            format!("|p: {t}, q: {t}| if {} >= <{t}>::BITS as u64 {{ {fill} }} else {{ p >> q }}", shift_as_u64(t))
        }
        _ => return None,
    })
}

/// The shift amount `q` of element type `t` as a `u64` (a cast only where it changes the type).
fn shift_as_u64(t: &str) -> &'static str {
    if t == "u64" {
        "q"
    } else {
        "(q as u64)"
    }
}

/// `y = f(a, b)` with numpy broadcasting, through the runtime's strided kernel (strides and
/// shape as literals, or run-time sizes under bounded dims).
fn broadcast_call(cx: &EmitCx, out: ValueId, a: ValueId, b: ValueId, f: &str) -> Result<String, CodegenError> {
    let (os, as_, bs) = (cx.dims(out)?, cx.dims(a)?, cx.dims(b)?);
    let (ra, rb, y) = (cx.read(a)?, cx.read(b)?, cx.write(out)?);
    if as_ == os && bs == os {
        let len = cx.len(out)?;
        if !splits(&len, 1) {
            return Ok(format!("let f = {f}; for ((o, &p), &q) in {y}.iter_mut().zip({ra}).zip({rb}) {{ *o = f(p, q); }}"));
        }
        return Ok(format!(
            "let f = {f};\nlet (lhs, rhs) = ({ra}, {rb});\n\
             rt::for_plane_ranges({len}, 1, {len}, {y}, &|j0, _, y| {{\nlet n = y.len();\n\
             for ((o, &p), &q) in y.iter_mut().zip(&lhs[j0..][..n]).zip(&rhs[j0..][..n]) {{ *o = f(p, q); }}\n}});"
        ));
    }
    if os.is_empty() || numel(&os).as_const() == Some(0) {
        return Ok(format!("let f = {f}; for o in {y}.iter_mut() {{ *o = f({ra}[0], {rb}[0]); }}"));
    }
    let (sa, sb) = (cx.broadcast_strides(&as_, &os)?, cx.broadcast_strides(&bs, &os)?);
    Ok(format!("rt::kernels::broadcast::binary({ra}, &[{}], {rb}, &[{}], {y}, &{}, {f});", sa.join(", "), sb.join(", "), cx.sizes(&os)?))
}

fn numel(dims: &[DimExpr]) -> DimExpr {
    dims.iter().fold(DimExpr::constant(1), |a, d| a.mul(d))
}

pub fn can_inplace(g: &Graph, id: NodeId, i: usize) -> bool {
    let n = g.node(id);
    let out = shape_of(g, n.outputs.first().copied());
    let this = shape_of(g, n.inputs.get(i).copied().flatten());
    let (Some(out), Some(this)) = (out, this) else { return false };
    if out != this {
        return false;
    }
    match &n.op {
        Op::Unary(u) => i == 0 && *u != UnaryOp::Identity && matches!(out.0, DType::F32 | DType::F64) && runtime_unary(*u).is_some(),
        // Each element of the input is read before the same element of the output is written.
        Op::Elementwise(_) => out.0 == DType::F32 && i < n.inputs.len(),
        Op::Binary(b) => {
            let other = shape_of(g, n.inputs.get(1 - i.min(1)).copied().flatten());
            i <= 1
                && binary_fn(*b, "f32").is_some()
                && other.is_some_and(|(d, s)| d == out.0 && (s == out.1 || s.iter().product::<usize>() == 1))
        }
        _ => false,
    }
}

/// Unary and binary nodes, with fixed shapes or bounded dims alike ([`EmitCx`]).
pub fn emit(cx: &EmitCx) -> Result<Option<String>, CodegenError> {
    let n = cx.node();
    let out = cx.output(0)?;
    let od = cx.dtype(out)?;
    let ot = cx.elem(out)?;
    let inplace = cx.in_place_input();
    match &n.op {
        Op::Unary(UnaryOp::Identity) => {
            if cx.is_alias(out) {
                return Ok(None);
            }
            let x = cx.read(cx.input(0)?)?;
            Ok(Some(format!("{}.copy_from_slice({x});", cx.write(out)?)))
        }
        Op::Unary(UnaryOp::Not) => {
            let x = cx.input(0)?;
            Ok(Some(format!("for (o, &v) in {}.iter_mut().zip({}) {{ *o = v ^ 1; }}", cx.write(out)?, cx.read(x)?)))
        }
        Op::Unary(u) => {
            let x = cx.input(0)?;
            let y = cx.write(out)?;
            if let (Some(r), DType::F32 | DType::F64) = (runtime_unary(*u), od) {
                let f = if od == DType::F32 { "f32" } else { "f64" };
                let r = unary_lit(r);
                if inplace.is_some() {
                    return Ok(Some(format!("rt::kernels::unary::map_{f}_inplace({r}, {y});")));
                }
                return Ok(Some(format!("rt::kernels::unary::map_{f}({r}, {}, {y});", cx.read(x)?)));
            }
            let xd = cx.dtype(x)?;
            let xt = cx.elem(x)?;
            let half = matches!(xd, DType::F16 | DType::BF16);
            let int = xd.is_int();
            let f: String = match u {
                UnaryOp::IsNaN if xd.is_float() => "rt::Elem::to_f64(v).is_nan() as u8".into(),
                UnaryOp::IsInf { detect_negative, detect_positive } if xd.is_float() => {
                    let test = match (detect_positive, detect_negative) {
                        (true, true) => "rt::Elem::to_f64(v).is_infinite()",
                        (true, false) => "(rt::Elem::to_f64(v) == f64::INFINITY)",
                        (false, true) => "(rt::Elem::to_f64(v) == f64::NEG_INFINITY)",
                        (false, false) => "false",
                    };
                    format!("{test} as u8")
                }
                UnaryOp::BitwiseNot if int => "!v".into(),
                UnaryOp::Abs => "rt::Elem::abs(v)".into(),
                UnaryOp::Neg => "rt::Elem::neg(v)".into(),
                UnaryOp::Relu if !half => "if v > rt::Elem::zero() { v } else { rt::Elem::zero() }".into(),
                UnaryOp::Sign if int => format!(
                    "if v > <{xt} as rt::Elem>::zero() {{ <{xt} as rt::Elem>::one() }} else if v < <{xt} as rt::Elem>::zero() {{ rt::Elem::neg(<{xt} as rt::Elem>::one()) }} else {{ <{xt} as rt::Elem>::zero() }}"
                ),
                UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round if int => "v".into(),
                // f16/bf16: through f32, as the interpreter does.
                _ if half && runtime_unary(*u).is_some() => {
                    let r = runtime_unary(*u).map(unary_lit).ok_or_else(|| cx.err("no runtime function"))?;
                    format!("<{xt} as rt::FloatElem>::from_f32(rt::kernels::unary::eval_f32({r}, rt::FloatElem::to_f32(v)))")
                }
                _ => return Err(cx.err(format!("{u:?} on {xd} is not supported by codegen yet"))),
            };
            Ok(Some(format!("for (o, &v) in {y}.iter_mut().zip({}) {{ *o = {f}; }}", cx.read(x)?)))
        }
        Op::Binary(b) if matches!(b, BinaryOp::Equal | BinaryOp::Less | BinaryOp::LessOrEqual | BinaryOp::Greater | BinaryOp::GreaterOrEqual | BinaryOp::And | BinaryOp::Or | BinaryOp::Xor) => {
            let (a, bb) = (cx.input(0)?, cx.input(1)?);
            let (ad, bd) = (cx.dtype(a)?, cx.dtype(bb)?);
            if ad != bd {
                return Err(cx.err("mixed element types"));
            }
            let at = cx.elem(a)?;
            if ad == DType::Str && *b != BinaryOp::Equal {
                return Err(cx.err(format!("{b:?} on strings")));
            }
            let f = match b {
                BinaryOp::Equal => format!("|p: {at}, q: {at}| (p == q) as u8"),
                BinaryOp::Less => format!("|p: {at}, q: {at}| (p < q) as u8"),
                BinaryOp::LessOrEqual => format!("|p: {at}, q: {at}| (p <= q) as u8"),
                BinaryOp::Greater => format!("|p: {at}, q: {at}| (p > q) as u8"),
                BinaryOp::GreaterOrEqual => format!("|p: {at}, q: {at}| (p >= q) as u8"),
                BinaryOp::And => "|p: u8, q: u8| p & q".into(),
                BinaryOp::Or => "|p: u8, q: u8| p | q".into(),
                _ => "|p: u8, q: u8| p ^ q".into(),
            };
            broadcast_call(cx, out, a, bb, &f).map(Some)
        }
        Op::Binary(b) => {
            let f = binary_fn(*b, ot).ok_or_else(|| cx.err(format!("{b:?} is not supported by codegen yet")))?;
            if matches!(b, BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor | BinaryOp::BitShiftLeft | BinaryOp::BitShiftRight)
                && od.is_float()
            {
                return Err(cx.err("bit ops on floats"));
            }
            if matches!(b, BinaryOp::BitShiftLeft | BinaryOp::BitShiftRight | BinaryOp::Mod { .. }) && od == DType::Bool {
                return Err(cx.err(format!("{b:?} on bool")));
            }
            let (a, bb) = (cx.input(0)?, cx.input(1)?);
            let (ad, bd) = (cx.dtype(a)?, cx.dtype(bb)?);
            if *b == BinaryOp::Pow && ad == od && bd != od {
                // The exponent goes through f64, as in the interpreter.
                let bt = cx.elem(bb)?;
                let f = format!(
                    "|p: {ot}, q: {bt}| <{ot} as rt::Elem>::from_f64(rt::math::pow(rt::Elem::to_f64(p), rt::Elem::to_f64(q)))"
                );
                return broadcast_call(cx, out, a, bb, &f).map(Some);
            }
            if ad != od || bd != od {
                return Err(cx.err("mixed element types"));
            }
            if let Some(i) = inplace {
                let (y, len) = (cx.write(out)?, cx.len(out)?);
                let other = if i == 0 { bb } else { a };
                let call = if i == 0 { "f(*o, q)" } else { "f(q, *o)" };
                if !splits(&len, 1) {
                    let q = cx.read(other)?;
                    return Ok(Some(if numel(&cx.dims(other)?).as_const() == Some(1) {
                        format!("let f = {f}; let q = ({q})[0]; for o in {y}.iter_mut() {{ *o = {call}; }}")
                    } else {
                        format!("let f = {f}; for (o, &q) in {y}.iter_mut().zip({q}) {{ *o = {call}; }}")
                    }));
                }
                // The other operand: one value, or one per element (a range of it per task).
                let (bind, first, each) = if numel(&cx.dims(other)?).as_const() == Some(1) {
                    ("let q = q[0];\n", "_", format!("for o in y.iter_mut() {{ *o = {call}; }}"))
                } else {
                    ("", "j0", format!("let n = y.len();\nfor (o, &q) in y.iter_mut().zip(&q[j0..][..n]) {{ *o = {call}; }}"))
                };
                return Ok(Some(format!(
                    "let f = {f};\nlet q = {};\n{bind}rt::for_plane_ranges({len}, 1, {len}, {y}, &|{first}, _, y| {{\n{each}\n}});",
                    cx.read(other)?
                )));
            }
            broadcast_call(cx, out, a, bb, &f).map(Some)
        }
        _ => Err(cx.err("not a unary or binary op")),
    }
}

/// The runtime's `Unary` value `u` as a Rust expression, parameters as typed literals.
pub fn unary_lit(u: Unary) -> String {
    use Unary::*;
    let (name, args): (&str, Vec<f32>) = match u {
        Abs => ("Abs", vec![]),
        Neg => ("Neg", vec![]),
        Exp => ("Exp", vec![]),
        Log => ("Log", vec![]),
        Sqrt => ("Sqrt", vec![]),
        Reciprocal => ("Reciprocal", vec![]),
        Floor => ("Floor", vec![]),
        Ceil => ("Ceil", vec![]),
        Round => ("Round", vec![]),
        Sign => ("Sign", vec![]),
        Sin => ("Sin", vec![]),
        Cos => ("Cos", vec![]),
        Tan => ("Tan", vec![]),
        Asin => ("Asin", vec![]),
        Acos => ("Acos", vec![]),
        Atan => ("Atan", vec![]),
        Sinh => ("Sinh", vec![]),
        Cosh => ("Cosh", vec![]),
        Asinh => ("Asinh", vec![]),
        Acosh => ("Acosh", vec![]),
        Atanh => ("Atanh", vec![]),
        Erf => ("Erf", vec![]),
        Relu => ("Relu", vec![]),
        Sigmoid => ("Sigmoid", vec![]),
        Tanh => ("Tanh", vec![]),
        Softplus => ("Softplus", vec![]),
        Softsign => ("Softsign", vec![]),
        LeakyRelu(a) => ("LeakyRelu", vec![a]),
        Elu(a) => ("Elu", vec![a]),
        Selu(a, g) => ("Selu", vec![a, g]),
        Celu(a) => ("Celu", vec![a]),
        HardSigmoid(a, b) => ("HardSigmoid", vec![a, b]),
        HardSwish => ("HardSwish", vec![]),
        ThresholdedRelu(a) => ("ThresholdedRelu", vec![a]),
        Gelu => ("Gelu", vec![]),
        GeluTanh => ("GeluTanh", vec![]),
        Mish => ("Mish", vec![]),
    };
    if args.is_empty() {
        format!("rt::kernels::unary::Unary::{name}")
    } else {
        format!("rt::kernels::unary::Unary::{name}({})", args.into_iter().map(f32_lit).collect::<Vec<_>>().join(", "))
    }
}

/// How a fused elementwise group reads one of its inputs.
pub(crate) enum ProgramInput {
    /// A slice of the output's length (the read expression).
    Full(String),
    /// One element, the same for every output element.
    One(String),
    /// A slice of `period` elements repeating along the output (a bias of the output's last
    /// dims: `[C]` against `[N, S, C]`); `period` is a `usize` expression.
    Cycle(String, String),
}

impl ProgramInput {
    /// Input read by `r` with `numel` elements, for an output of `out` elements: the whole
    /// output, one element, or a repeating slice of `period()` (a `usize` expression).
    pub(crate) fn of(r: String, numel: usize, out: usize, period: impl FnOnce() -> String) -> ProgramInput {
        match numel {
            1 => ProgramInput::One(r),
            n if n == out => ProgramInput::Full(r),
            _ => ProgramInput::Cycle(r, period()),
        }
    }
}

/// `a * b` for two `usize` expressions, folded when both are numbers.
fn times(a: &str, b: &str) -> String {
    match (a.parse::<usize>(), b.parse::<usize>()) {
        (Ok(x), Ok(y)) => x.saturating_mul(y).to_string(),
        _ => format!("{} * {}", rust_operand(a.to_string()), rust_operand(b.to_string())),
    }
}

/// Whether a loop of `len` elements (a `usize` expression), `per` units of work each, is
/// worth splitting over the thread pool: always when `len` is known only at run time (bounded
/// dims), else when the work reaches the runtime's threshold. Small loops stay plain loops.
pub(crate) fn splits(len: &str, per: usize) -> bool {
    len.parse::<usize>().map_or(true, |n| n.saturating_mul(per) >= burnc_runtime::PARALLEL_WORK)
}

/// `a / b` for two `usize` expressions, folded when both are numbers.
fn over(a: &str, b: &str) -> String {
    match (a.parse::<usize>(), b.parse::<usize>()) {
        (Ok(x), Ok(y)) if y > 0 => (x / y).to_string(),
        _ => format!("{} / {}", rust_operand(a.to_string()), rust_operand(b.to_string())),
    }
}

/// One loop computing a fused elementwise group (`Op::Elementwise`): `len` elements (a `usize`
/// expression) into `y`; with `inplace = Some(i)`, input `i` is the output buffer itself.
/// Inputs that repeat (`Cycle`) make it two loops, rows of the period and elements in a row,
/// so no element computes an index modulo (all cycling inputs share one period, which
/// `passes::fuse_chain` guarantees). Long outputs are split into ranges of whole rows over the
/// runtime's thread pool (`rt::for_plane_ranges`; one range without std or with one thread).
pub(crate) fn program_loop(p: &ScalarProgram, len: &str, inputs: &[ProgramInput], y: &str, inplace: Option<usize>) -> String {
    let mut s = String::new();
    if p.steps.iter().any(|st| matches!(st.op, ScalarOp::Unary(_))) {
        s.push_str("use rt::kernels::unary::{eval_f32, Unary};\n");
    }
    let period = inputs.iter().find_map(|i| if let ProgramInput::Cycle(_, p) = i { Some(p.clone()) } else { None });
    s.push_str(&format!("let y = &mut ({y})[..{len}];\n"));
    for (k, inp) in inputs.iter().enumerate() {
        match inp {
            _ if inplace == Some(k) => {}
            ProgramInput::Full(r) => s.push_str(&format!("let x{k} = &({r})[..{len}];\n")),
            ProgramInput::One(r) => s.push_str(&format!("let x{k} = ({r})[0];\n")),
            ProgramInput::Cycle(r, p) => s.push_str(&format!("let x{k} = &({r})[..{p}];\n")),
        }
    }
    // Work per element for the split decision: the steps, a transcendental counted as eight.
    let work: usize = p.steps.iter().map(|st| if matches!(st.op, ScalarOp::Unary(_)) { 8 } else { 1 }).sum::<usize>().max(1);
    let split = splits(len, work);
    // Whether an input besides the output is read element by element.
    let indexed = inputs.iter().enumerate().any(|(k, i)| matches!(i, ProgramInput::Full(_) | ProgramInput::Cycle(..)) && inplace != Some(k));
    // The loops run over `n` elements: all of them, or one range of whole rows per task.
    let n = if split { "n".to_string() } else { len.to_string() };
    if split {
        let row = period.clone().unwrap_or_else(|| "1".into());
        let ranged = inputs.iter().enumerate().any(|(k, i)| matches!(i, ProgramInput::Full(_)) && inplace != Some(k));
        s.push_str(&format!(
            "rt::for_plane_ranges({}, {row}, {}, y, &|{}, _, y| {{\n{}",
            over(len, &row),
            times(len, &work.to_string()),
            if ranged { "r0" } else { "_" },
            if indexed || period.is_some() { "let n = y.len();\n" } else { "" }
        ));
        // The range's first element: `r0` rows in.
        let start = match row.parse::<usize>() {
            Ok(1) => "r0".to_string(),
            Ok(r) => format!("r0 * {r}"),
            Err(_) => format!("r0 * ({row})"),
        };
        for (k, inp) in inputs.iter().enumerate() {
            if let (ProgramInput::Full(_), false) = (inp, inplace == Some(k)) {
                s.push_str(&format!("let x{k} = &x{k}[{start}..][..n];\n"));
            }
        }
    }
    let end = if split { "\n});" } else { "" };
    // With a period: rows of `p` elements, each full input and the output cut to the row, so
    // every index is below a slice's known length.
    let (open, close, at) = match &period {
        Some(p) => {
            let mut o = format!("for row in (0..{n}).step_by({p}) {{\nlet y = &mut y[row..][..{p}];\n");
            for (k, inp) in inputs.iter().enumerate() {
                if let (ProgramInput::Full(_), false) = (inp, inplace == Some(k)) {
                    o.push_str(&format!("let x{k} = &x{k}[row..][..{p}];\n"));
                }
            }
            o.push_str(&format!("for i in 0..{p} {{\n"));
            (o, format!("}}\n}}{end}"), "i")
        }
        // Only the output indexed: its elements in turn.
        None if !indexed => ("for y_j in y.iter_mut() {\n".to_string(), format!("}}{end}"), "j"),
        None => (format!("for j in 0..{n} {{\n"), format!("}}{end}"), "j"),
    };
    s.push_str(&open);
    let y_at = if period.is_none() && !indexed { "*y_j".to_string() } else { format!("y[{at}]") };
    let operand = |a: &Operand| match *a {
        Operand::Input(k) if inplace == Some(k) => y_at.clone(),
        Operand::Input(k) => match inputs.get(k) {
            Some(ProgramInput::Full(_) | ProgramInput::Cycle(..)) => format!("x{k}[{at}]"),
            _ => format!("x{k}"),
        },
        Operand::Step(i) => format!("t{i}"),
        Operand::Const(c) => f32_lit(c),
    };
    for (i, st) in p.steps.iter().enumerate() {
        let a: Vec<String> = st.args.iter().map(operand).collect();
        let e = match st.op {
            ScalarOp::Unary(u) => format!("eval_f32({}, {})", unary_lit(u).replace("rt::kernels::unary::", ""), a[0]),
            ScalarOp::Binary(Arith::Add) => format!("{} + {}", a[0], a[1]),
            ScalarOp::Binary(Arith::Sub) => format!("{} - {}", a[0], a[1]),
            ScalarOp::Binary(Arith::Mul) => format!("{} * {}", a[0], a[1]),
            ScalarOp::Binary(Arith::Div) => format!("{} / {}", a[0], a[1]),
            ScalarOp::Binary(Arith::Max) => format!("rt::Elem::max_of({}, {})", a[0], a[1]),
            ScalarOp::Binary(Arith::Min) => format!("rt::Elem::min_of({}, {})", a[0], a[1]),
        };
        s.push_str(&format!("    let t{i} = {e};\n"));
    }
    s.push_str(&format!("    {y_at} = t{};\n{close}", p.steps.len().saturating_sub(1)));
    s
}

/// A fused elementwise group. An input of one element at the bounds has one at every size
/// (its dims have bound 1), so how each input is read is decided at the bounds.
pub(crate) fn emit_program(cx: &EmitCx, p: &ScalarProgram) -> Result<String, CodegenError> {
    let out = cx.output(0)?;
    let at_bound = |v: ValueId| -> Result<usize, CodegenError> { Ok(cx.ctx().ty(cx.node(), v)?.1.iter().product()) };
    let len = cx.len(out)?;
    let mut inputs = Vec::new();
    for i in 0..cx.node().inputs.len() {
        let v = cx.input(i)?;
        let period = cx.len(v)?;
        inputs.push(ProgramInput::of(cx.read(v)?, at_bound(v)?, at_bound(out)?, || period));
    }
    Ok(program_loop(p, &len, &inputs, &cx.write(out)?, cx.in_place_input()))
}

/// A Rust expression for an f64 value (infinities and NaN by name).
pub fn f64_lit(v: f64) -> String {
    float_lit(v, "f64")
}

/// A Rust expression for an f32 value.
pub fn f32_lit(v: f32) -> String {
    float_lit(v, "f32")
}

/// `v` as a literal of type `ty` (`1.5_f32`), or the type's constant for NaN and infinities.
fn float_lit(v: impl Into<f64> + std::fmt::Debug + Copy, ty: &str) -> String {
    let x: f64 = v.into();
    if x.is_nan() {
        format!("{ty}::NAN")
    } else if x.is_infinite() {
        format!("{ty}::{}", if x > 0.0 { "INFINITY" } else { "NEG_INFINITY" })
    } else {
        format!("{v:?}_{ty}")
    }
}
