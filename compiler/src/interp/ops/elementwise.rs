//! Unary, binary (broadcasting) and Where.
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
        Op::Where => one(where_(arg(args, 0)?, arg(args, 1)?, arg(args, 2)?)?),
        _ => Err(format!("{} is not elementwise", op.name())),
    }
}

/// Apply `f` elementwise with broadcasting.
pub fn zip<A: Copy, B: Copy, O: Copy + Default>(
    a: &[A],
    ash: &[usize],
    b: &[B],
    bsh: &[usize],
    f: impl Fn(A, B) -> O,
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

fn float_unary<T: FloatElem>(u: UnaryOp, v: &[T]) -> Result<Vec<T>, String> {
    use UnaryOp::*;
    macro_rules! m {
        ($f32:expr, $f64:expr) => {
            v.iter().map(|&x| x.map($f32, $f64)).collect()
        };
    }
    Ok(match u {
        Identity => v.to_vec(),
        Abs => v.iter().map(|&x| x.abs()).collect(),
        Neg => v.iter().map(|&x| x.neg()).collect(),
        Exp => m!(math::expf, math::exp),
        Log => m!(math::logf, math::log),
        Sqrt => m!(math::sqrtf, math::sqrt),
        Reciprocal => m!(|x| 1.0 / x, |x| 1.0 / x),
        Floor => m!(math::floorf, math::floor),
        Ceil => m!(math::ceilf, math::ceil),
        Round => m!(math::rintf, math::rint),
        Sign => m!(
            |x: f32| if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { x },
            |x: f64| if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { x }
        ),
        Sin => m!(math::sinf, math::sin),
        Cos => m!(math::cosf, math::cos),
        Tan => m!(math::tanf, math::tan),
        Asin => m!(math::asinf, math::asin),
        Acos => m!(math::acosf, math::acos),
        Atan => m!(math::atanf, math::atan),
        Sinh => m!(math::sinhf, math::sinh),
        Cosh => m!(math::coshf, math::cosh),
        Asinh => m!(math::asinhf, math::asinh),
        Acosh => m!(math::acoshf, math::acosh),
        Atanh => m!(math::atanhf, math::atanh),
        Erf => m!(math::erff, math::erf),
        Relu => m!(|x: f32| if x > 0.0 { x } else { 0.0 }, |x: f64| if x > 0.0 { x } else { 0.0 }),
        Sigmoid => m!(sigmoid32, |x: f64| if x >= 0.0 { 1.0 / (1.0 + math::exp(-x)) } else { let e = math::exp(x); e / (1.0 + e) }),
        Tanh => m!(math::tanhf, math::tanh),
        Softplus => m!(
            |x: f32| if x > 20.0 { x } else { math::log1pf(math::expf(x)) },
            |x: f64| if x > 40.0 { x } else { math::log1p(math::exp(x)) }
        ),
        Softsign => m!(|x: f32| x / (1.0 + x.abs()), |x: f64| x / (1.0 + x.abs())),
        LeakyRelu { alpha } => {
            let a = alpha as f64;
            m!(move |x: f32| if x < 0.0 { alpha * x } else { x }, move |x: f64| if x < 0.0 { a * x } else { x })
        }
        Elu { alpha } => {
            let a = alpha as f64;
            m!(move |x: f32| if x < 0.0 { alpha * (math::expf(x) - 1.0) } else { x }, move |x: f64| if x < 0.0 {
                a * (math::exp(x) - 1.0)
            } else {
                x
            })
        }
        Selu { alpha, gamma } => {
            let (a, g) = (alpha as f64, gamma as f64);
            m!(
                move |x: f32| if x <= 0.0 { gamma * (alpha * math::expf(x) - alpha) } else { gamma * x },
                move |x: f64| if x <= 0.0 { g * (a * math::exp(x) - a) } else { g * x }
            )
        }
        Celu { alpha } => {
            let a = alpha as f64;
            m!(
                move |x: f32| x.max(0.0) + (alpha * (math::expf(x / alpha) - 1.0)).min(0.0),
                move |x: f64| x.max(0.0) + (a * (math::exp(x / a) - 1.0)).min(0.0)
            )
        }
        HardSigmoid { alpha, beta } => {
            let (a, b) = (alpha as f64, beta as f64);
            m!(move |x: f32| (alpha * x + beta).clamp(0.0, 1.0), move |x: f64| (a * x + b).clamp(0.0, 1.0))
        }
        HardSwish => m!(
            |x: f32| x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
            |x: f64| x * (x / 6.0 + 0.5).clamp(0.0, 1.0)
        ),
        ThresholdedRelu { alpha } => {
            let a = alpha as f64;
            m!(move |x: f32| if x > alpha { x } else { 0.0 }, move |x: f64| if x > a { x } else { 0.0 })
        }
        Gelu { tanh_approx: false } => m!(
            |x: f32| 0.5 * x * (1.0 + math::erff(x / core::f32::consts::SQRT_2)),
            |x: f64| 0.5 * x * (1.0 + math::erf(x / core::f64::consts::SQRT_2))
        ),
        Gelu { tanh_approx: true } => m!(
            |x: f32| {
                let c = (2.0 / core::f32::consts::PI).sqrt();
                0.5 * x * (1.0 + math::tanhf(c * (x + 0.044715 * x * x * x)))
            },
            |x: f64| {
                let c = (2.0 / core::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + math::tanh(c * (x + 0.044715 * x * x * x)))
            }
        ),
        Mish => m!(
            |x: f32| x * math::tanhf(if x > 20.0 { x } else { math::log1pf(math::expf(x)) }),
            |x: f64| x * math::tanh(if x > 40.0 { x } else { math::log1p(math::exp(x)) })
        ),
        other => return Err(format!("{other:?} is not defined on floats")),
    })
}

fn sigmoid32(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + math::expf(-x))
    } else {
        let e = math::expf(x);
        e / (1.0 + e)
    }
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
                        BinaryOp::BitShiftRight => zip(x, &a.shape, y, &b.shape, |p, q| {
                            if (q as u64) >= (core::mem::size_of_val(&p) as u64 * 8) { 0 } else { p >> q }
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

fn where_(c: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor, String> {
    let Data::Bool(cv) = &c.data else { return Err(format!("condition must be bool, got {}", c.dtype())) };
    if x.dtype() != y.dtype() {
        return Err(format!("X and Y must have one type, got {} and {}", x.dtype(), y.dtype()));
    }
    let shape = broadcast_shapes(&broadcast_shapes(&c.shape, &x.shape)?, &y.shape)?;
    let n = numel(&shape)?;
    let (sc, sx, sy) = (broadcast_strides(&c.shape, &shape), broadcast_strides(&x.shape, &shape), broadcast_strides(&y.shape, &shape));
    macro_rules! go {
        ($($variant:ident),*) => {
            match (&x.data, &y.data) {
                $((Data::$variant(a), Data::$variant(b)) => {
                    let mut out = vec![Default::default(); n];
                    if n > 0 {
                        broadcast::ternary(cv, &sc, a, &sx, b, &sy, &mut out, &shape, |c, p, q| if c { p } else { q });
                    }
                    Data::$variant(out)
                })*
                _ => return Err(format!("Where is not defined on {}", x.dtype())),
            }
        };
    }
    let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool);
    Ok(Tensor::new(shape, data))
}
