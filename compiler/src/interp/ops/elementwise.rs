//! Unary and binary (broadcasting) ops.
use super::util::{arg, broadcast_shapes, broadcast_strides, numel, one};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::{BinaryOp, Op, UnaryOp};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::broadcast;
use burnc_runtime::{math, Elem, FloatElem};

pub fn eval(op: &Op, args: &[Option<RtValue>], _n: usize) -> OpResult {
    match op {
        Op::Unary(u) => one(unary(*u, arg(args, 0)?)?),
        Op::Binary(b) => one(binary(*b, arg(args, 0)?, arg(args, 1)?)?),
        _ => Err(format!("{} is not elementwise", op.name())),
    }
}

/// Apply `f` elementwise with broadcasting.
pub fn zip<A: Copy + Sync, B: Copy + Sync, O: Copy + Default + Send>(
    a: &[A],
    ash: &[usize],
    b: &[B],
    bsh: &[usize],
    f: impl Fn(A, B) -> O + Sync,
) -> Result<(Vec<usize>, Vec<O>), String> {
    let shape = broadcast_shapes(ash, bsh)?;
    let n = numel(&shape)?;
    let mut out = vec![O::default(); n];
    if n > 0 {
        let sa = broadcast_strides(ash, &shape);
        let sb = broadcast_strides(bsh, &shape);
        if shape.is_empty() {
            out[0] = f(a[0], b[0]);
        } else {
            broadcast::binary(a, &sa, b, &sb, &mut out, &shape, f);
        }
    }
    Ok((shape, out))
}

/// The runtime's float function for a core unary op, when it has one.
pub fn runtime_unary(u: UnaryOp) -> Option<burnc_runtime::kernels::unary::Unary> {
    use burnc_runtime::kernels::unary::Unary as R;
    use UnaryOp::*;
    Some(match u {
        Abs => R::Abs,
        Neg => R::Neg,
        Exp => R::Exp,
        Log => R::Log,
        Sqrt => R::Sqrt,
        Reciprocal => R::Reciprocal,
        Floor => R::Floor,
        Ceil => R::Ceil,
        Round => R::Round,
        Sign => R::Sign,
        Sin => R::Sin,
        Cos => R::Cos,
        Tan => R::Tan,
        Asin => R::Asin,
        Acos => R::Acos,
        Atan => R::Atan,
        Sinh => R::Sinh,
        Cosh => R::Cosh,
        Asinh => R::Asinh,
        Acosh => R::Acosh,
        Atanh => R::Atanh,
        Erf => R::Erf,
        Relu => R::Relu,
        Sigmoid => R::Sigmoid,
        Tanh => R::Tanh,
        Softplus => R::Softplus,
        Softsign => R::Softsign,
        LeakyRelu { alpha } => R::LeakyRelu(alpha),
        Elu { alpha } => R::Elu(alpha),
        Selu { alpha, gamma } => R::Selu(alpha, gamma),
        Celu { alpha } => R::Celu(alpha),
        HardSigmoid { alpha, beta } => R::HardSigmoid(alpha, beta),
        HardSwish => R::HardSwish,
        ThresholdedRelu { alpha } => R::ThresholdedRelu(alpha),
        Gelu { tanh_approx: false } => R::Gelu,
        Gelu { tanh_approx: true } => R::GeluTanh,
        Mish => R::Mish,
        Identity | Not | BitwiseNot | IsNaN | IsInf { .. } => return None,
    })
}

fn float_unary<T: FloatElem>(u: UnaryOp, v: &[T]) -> Result<Vec<T>, String> {
    use burnc_runtime::kernels::unary::{eval_f32, eval_f64};
    if u == UnaryOp::Identity {
        return Ok(v.to_vec());
    }
    let r = runtime_unary(u).ok_or_else(|| format!("{u:?} is not defined on floats"))?;
    Ok(v.iter().map(|&x| x.map(|a| eval_f32(r, a), |a| eval_f64(r, a))).collect())
}


fn int_unary<T: Elem>(u: UnaryOp, v: &[T]) -> Result<Vec<T>, String> {
    use UnaryOp::*;
    Ok(match u {
        Identity => v.to_vec(),
        Abs => v.iter().map(|&x| x.abs()).collect(),
        Neg => v.iter().map(|&x| x.neg()).collect(),
        Relu => v.iter().map(|&x| if x > T::zero() { x } else { T::zero() }).collect(),
        Sign => v
            .iter()
            .map(|&x| if x > T::zero() { T::one() } else if x < T::zero() { T::one().neg() } else { T::zero() })
            .collect(),
        Floor | Ceil | Round => v.to_vec(),
        other => return Err(format!("{other:?} is not defined on integers")),
    })
}

macro_rules! bitnot {
    ($($variant:ident),*) => {
        fn bitwise_not(d: &Data) -> Result<Data, String> {
            match d {
                $(Data::$variant(v) => Ok(Data::$variant(v.iter().map(|&x| !x).collect())),)*
                _ => Err(format!("BitwiseNot is not defined on {}", d.dtype())),
            }
        }
    };
}
bitnot!(I8, I16, I32, I64, U8, U16, U32, U64);

pub fn unary(u: UnaryOp, x: &Tensor) -> Result<Tensor, String> {
    let shape = x.shape.clone();
    let data = match (u, &x.data) {
        (UnaryOp::Identity, d) => d.clone(),
        (UnaryOp::Not, Data::Bool(v)) => Data::Bool(v.iter().map(|&b| !b).collect()),
        (UnaryOp::Not, d) => return Err(format!("Not needs bool, got {}", d.dtype())),
        (UnaryOp::BitwiseNot, d) => bitwise_not(d)?,
        (UnaryOp::IsNaN, d) => Data::Bool(float_pred(d, |x| x.is_nan())?),
        (UnaryOp::IsInf { detect_negative, detect_positive }, d) => Data::Bool(float_pred(d, |x| {
            (detect_positive && x == f64::INFINITY) || (detect_negative && x == f64::NEG_INFINITY)
        })?),
        (u, d) => crate::map_float_data!(d, v => float_unary(u, v)?, other => match d {
            Data::I8(v) => Data::I8(int_unary(u, v)?),
            Data::I16(v) => Data::I16(int_unary(u, v)?),
            Data::I32(v) => Data::I32(int_unary(u, v)?),
            Data::I64(v) => Data::I64(int_unary(u, v)?),
            Data::U8(v) => Data::U8(int_unary(u, v)?),
            Data::U16(v) => Data::U16(int_unary(u, v)?),
            Data::U32(v) => Data::U32(int_unary(u, v)?),
            Data::U64(v) => Data::U64(int_unary(u, v)?),
            d => return Err(format!("{u:?} is not defined on {}", d.dtype())),
        }),
    };
    Ok(Tensor::new(shape, data))
}

fn float_pred(d: &Data, f: impl Fn(f64) -> bool) -> Result<Vec<bool>, String> {
    match d {
        Data::F32(v) => Ok(v.iter().map(|&x| f(x as f64)).collect()),
        Data::F64(v) => Ok(v.iter().map(|&x| f(x)).collect()),
        Data::F16(v) => Ok(v.iter().map(|&x| f(x.to_f64())).collect()),
        Data::BF16(v) => Ok(v.iter().map(|&x| f(x.to_f64())).collect()),
        d => Err(format!("needs a float tensor, got {}", d.dtype())),
    }
}

fn same_type(a: &Tensor, b: &Tensor, op: BinaryOp) -> Result<(), String> {
    if a.dtype() != b.dtype() {
        return Err(format!("{op:?} needs equal element types, got {} and {}", a.dtype(), b.dtype()));
    }
    Ok(())
}

fn py_mod_i<T: Elem>(a: T, b: T) -> T {
    if b == T::zero() {
        return T::zero();
    }
    let r = a.sub(a.div(b).mul(b));
    if r != T::zero() && ((r < T::zero()) != (b < T::zero())) {
        r.add(b)
    } else {
        r
    }
}

fn cmp<T: Elem>(op: BinaryOp, a: T, b: T) -> bool {
    match op {
        BinaryOp::Equal => a == b,
        BinaryOp::Less => a < b,
        BinaryOp::LessOrEqual => a <= b,
        BinaryOp::Greater => a > b,
        _ => a >= b,
    }
}

fn arith<T: Elem>(op: BinaryOp, a: &[T], ash: &[usize], b: &[T], bsh: &[usize]) -> Result<(Vec<usize>, Vec<T>), String> {
    match op {
        BinaryOp::Add => zip(a, ash, b, bsh, T::add),
        BinaryOp::Sub => zip(a, ash, b, bsh, T::sub),
        BinaryOp::Mul => zip(a, ash, b, bsh, T::mul),
        BinaryOp::Div => zip(a, ash, b, bsh, T::div),
        BinaryOp::Max => zip(a, ash, b, bsh, T::max_of),
        BinaryOp::Min => zip(a, ash, b, bsh, T::min_of),
        BinaryOp::PRelu => zip(a, ash, b, bsh, |x, s| if x < T::zero() { s.mul(x) } else { x }),
        BinaryOp::Mod { fmod } => {
            if T::IS_FLOAT {
                if fmod {
                    zip(a, ash, b, bsh, |x, y| T::from_f64(math::fmod(x.to_f64(), y.to_f64())))
                } else {
                    zip(a, ash, b, bsh, |x, y| {
                        let (x, y) = (x.to_f64(), y.to_f64());
                        let r = math::fmod(x, y);
                        T::from_f64(if r != 0.0 && ((r < 0.0) != (y < 0.0)) { r + y } else { r })
                    })
                }
            } else if fmod {
                // C semantics: sign of the dividend.
                zip(a, ash, b, bsh, |x, y| if y == T::zero() { T::zero() } else { x.sub(x.div(y).mul(y)) })
            } else {
                zip(a, ash, b, bsh, py_mod_i)
            }
        }
        other => Err(format!("{other:?} is not arithmetic")),
    }
}

macro_rules! int_bits {
    ($name:ident, $($variant:ident),*) => {
        fn $name(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
            let (shape, data) = match (&a.data, &b.data) {
                $((Data::$variant(x), Data::$variant(y)) => {
                    let (s, v) = match op {
                        BinaryOp::BitAnd => zip(x, &a.shape, y, &b.shape, |p, q| p & q)?,
                        BinaryOp::BitOr => zip(x, &a.shape, y, &b.shape, |p, q| p | q)?,
                        BinaryOp::BitXor => zip(x, &a.shape, y, &b.shape, |p, q| p ^ q)?,
                        BinaryOp::BitShiftLeft => zip(x, &a.shape, y, &b.shape, |p, q| {
                            if (q as u64) >= (core::mem::size_of_val(&p) as u64 * 8) { 0 } else { p << q }
                        })?,
                        // Out-of-range shifts (negative or >= width) fill with the sign bit.
                        BinaryOp::BitShiftRight => zip(x, &a.shape, y, &b.shape, |p, q| {
                            let zero = p ^ p;
                            if (q as u64) >= (core::mem::size_of_val(&p) as u64 * 8) { if p < zero { !zero } else { zero } } else { p >> q }
                        })?,
                        _ => return Err(format!("{op:?} is not a bit op")),
                    };
                    (s, Data::$variant(v))
                })*
                _ => return Err(format!("{op:?} needs integer inputs of one type, got {} and {}", a.dtype(), b.dtype())),
            };
            Ok(Tensor::new(shape, data))
        }
    };
}
int_bits!(bit_op, I8, I16, I32, I64, U8, U16, U32, U64);

pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
    use BinaryOp::*;
    // PRelu before opset 7 broadcast a 1-D slope along the channel axis (1); numpy
    // broadcasting rejects exactly those shapes, so fall back to it only then.
    if op == PRelu && b.rank() == 1 && a.rank() > 2 && a.shape[1] == b.shape[0] && broadcast_shapes(&a.shape, &b.shape).is_err() {
        let mut shape = vec![b.shape[0]];
        shape.extend(std::iter::repeat_n(1, a.rank() - 2));
        return binary(op, a, &Tensor::new(shape, b.data.clone()));
    }
    match op {
        Pow => return pow(a, b),
        BitAnd | BitOr | BitXor | BitShiftLeft | BitShiftRight => {
            if let (Data::Bool(x), Data::Bool(y)) = (&a.data, &b.data) {
                let (s, v) = match op {
                    BitAnd => zip(x, &a.shape, y, &b.shape, |p, q| p & q)?,
                    BitOr => zip(x, &a.shape, y, &b.shape, |p, q| p | q)?,
                    BitXor => zip(x, &a.shape, y, &b.shape, |p, q| p ^ q)?,
                    _ => return Err("bit shifts need integers".into()),
                };
                return Ok(Tensor::new(s, Data::Bool(v)));
            }
            return bit_op(op, a, b);
        }
        And | Or | Xor => {
            let (Data::Bool(x), Data::Bool(y)) = (&a.data, &b.data) else {
                return Err(format!("{op:?} needs bool inputs, got {} and {}", a.dtype(), b.dtype()));
            };
            let (s, v) = match op {
                And => zip(x, &a.shape, y, &b.shape, |p, q| p & q)?,
                Or => zip(x, &a.shape, y, &b.shape, |p, q| p | q)?,
                _ => zip(x, &a.shape, y, &b.shape, |p, q| p ^ q)?,
            };
            return Ok(Tensor::new(s, Data::Bool(v)));
        }
        _ => {}
    }
    same_type(a, b, op)?;
    if let (Equal, Data::Str(x), Data::Str(y)) = (op, &a.data, &b.data) {
        let (x, y): (Vec<&str>, Vec<&str>) = (x.iter().map(String::as_str).collect(), y.iter().map(String::as_str).collect());
        let (s, v) = zip(&x, &a.shape, &y, &b.shape, |p, q| p == q)?;
        return Ok(Tensor::new(s, Data::Bool(v)));
    }
    if matches!(op, Equal | Less | LessOrEqual | Greater | GreaterOrEqual) {
        macro_rules! cmp_all {
            ($($variant:ident),*) => {
                match (&a.data, &b.data) {
                    $((Data::$variant(x), Data::$variant(y)) => zip(x, &a.shape, y, &b.shape, |p, q| cmp(op, p, q))?,)*
                    _ => return Err(format!("{op:?} is not defined on {}", a.dtype())),
                }
            };
        }
        let (s, v) = cmp_all!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool);
        return Ok(Tensor::new(s, Data::Bool(v)));
    }
    macro_rules! arith_all {
        ($($variant:ident),*) => {
            match (&a.data, &b.data) {
                $((Data::$variant(x), Data::$variant(y)) => {
                    let (s, v) = arith(op, x, &a.shape, y, &b.shape)?;
                    Tensor::new(s, Data::$variant(v))
                })*
                _ => return Err(format!("{op:?} is not defined on {}", a.dtype())),
            }
        };
    }
    Ok(arith_all!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64))
}

/// Pow: base and exponent may differ in type; computed in f64 and converted to the base type.
fn pow(a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
    let e = b.to_f64_vec();
    macro_rules! pow_all {
        ($($variant:ident),*) => {
            match &a.data {
                $(Data::$variant(x) => {
                    let (s, v) = zip(x, &a.shape, &e, &b.shape, |p, q| Elem::from_f64(math::pow(p.to_f64(), q)))?;
                    Tensor::new(s, Data::$variant(v))
                })*
                d => return Err(format!("Pow is not defined on {}", d.dtype())),
            }
        };
    }
    Ok(pow_all!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64))
}

/// A fused elementwise group (`Op::Elementwise`): f32 inputs of the output's shape, of one
/// element, or of the output's last dims (repeating), the program applied per element.
pub fn eval_program(p: &crate::ir::scalar::ScalarProgram, args: &[Option<RtValue>]) -> OpResult {
    p.check(args.len())?;
    let mut ins: Vec<(&[f32], &[usize])> = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        match a {
            Some(RtValue::Tensor(Tensor { data: Data::F32(v), shape })) => ins.push((v, shape)),
            _ => return Err(format!("input #{i} of a fused elementwise group is not an f32 tensor")),
        }
    }
    let (len, shape) = ins.iter().map(|(v, s)| (v.len(), *s)).max_by_key(|(l, _)| *l).unwrap_or((1, &[]));
    for (i, (v, s)) in ins.iter().enumerate() {
        if v.len() != len && v.len() != 1 && !crate::ir::scalar::repeats_along(s, shape) {
            return Err(format!("input #{i} has shape {s:?}, which neither is the output's {shape:?}, one element, nor its last dims"));
        }
    }
    let (mut x, mut vals) = (vec![0f32; ins.len()], Vec::with_capacity(p.steps.len()));
    let out: Vec<f32> = (0..len)
        .map(|j| {
            for (k, (v, _)) in ins.iter().enumerate() {
                x[k] = v[j % v.len().max(1)];
            }
            p.eval_f32_in(&x, &mut vals)
        })
        .collect();
    Ok(vec![RtValue::Tensor(Tensor::new(shape.to_vec(), Data::F32(out)))])
}
