//! Elementwise float functions, one definition shared by the interpreter and generated code.
use crate::math;

/// A float unary function (parameters inline).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    Abs,
    Neg,
    Exp,
    Log,
    Sqrt,
    Reciprocal,
    Floor,
    Ceil,
    Round,
    Sign,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Relu,
    Sigmoid,
    Tanh,
    Softplus,
    Softsign,
    LeakyRelu(f32),
    Elu(f32),
    Selu(f32, f32),
    Celu(f32),
    HardSigmoid(f32, f32),
    HardSwish,
    ThresholdedRelu(f32),
    Gelu,
    GeluTanh,
    Mish,
}

macro_rules! define {
    ($name:ident, $t:ty, $exp:path, $log:path, $sqrt:path, $floor:path, $ceil:path, $rint:path, $sin:path, $cos:path, $tan:path,
     $asin:path, $acos:path, $atan:path, $sinh:path, $cosh:path, $asinh:path, $acosh:path, $atanh:path, $erf:path, $tanh:path,
     $log1p:path, $pi:expr, $sqrt2:expr, $soft_lim:expr) => {
        /// Apply `u` to one value. Always inlined: with `u` known at the call (a fused
        /// elementwise loop in generated code) the match folds away and the loop vectorizes.
        #[inline(always)]
        pub fn $name(u: Unary, x: $t) -> $t {
            use Unary::*;
            match u {
                Abs => if x < 0.0 { -x } else if x == 0.0 { 0.0 } else { x },
                Neg => -x,
                Exp => $exp(x),
                Log => $log(x),
                Sqrt => $sqrt(x),
                Reciprocal => 1.0 / x,
                Floor => $floor(x),
                Ceil => $ceil(x),
                Round => $rint(x),
                Sign => if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { x },
                Sin => $sin(x),
                Cos => $cos(x),
                Tan => $tan(x),
                Asin => $asin(x),
                Acos => $acos(x),
                Atan => $atan(x),
                Sinh => $sinh(x),
                Cosh => $cosh(x),
                Asinh => $asinh(x),
                Acosh => $acosh(x),
                Atanh => $atanh(x),
                Erf => $erf(x),
                Relu => if x > 0.0 { x } else { 0.0 },
                // 1 / (1 + e^-x), or e^x / (1 + e^x) below 0: one exp of -|x|, no branch.
                Sigmoid => {
                    let e = $exp(if x < 0.0 { x } else { -x });
                    (if x >= 0.0 { 1.0 } else { e }) / (1.0 + e)
                }
                Tanh => $tanh(x),
                Softplus => if x > $soft_lim { x } else { $log1p($exp(x)) },
                Softsign => x / (1.0 + if x < 0.0 { -x } else { x }),
                LeakyRelu(a) => if x < 0.0 { a as $t * x } else { x },
                Elu(a) => if x < 0.0 { a as $t * ($exp(x) - 1.0) } else { x },
                Selu(a, g) => if x <= 0.0 { g as $t * (a as $t * $exp(x) - a as $t) } else { g as $t * x },
                Celu(a) => {
                    let a = a as $t;
                    let pos = if x > 0.0 { x } else { 0.0 };
                    let neg = a * ($exp(x / a) - 1.0);
                    pos + if neg < 0.0 { neg } else { 0.0 }
                }
                HardSigmoid(a, b) => (a as $t * x + b as $t).clamp(0.0, 1.0),
                HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
                ThresholdedRelu(a) => if x > a as $t { x } else { 0.0 },
                Gelu => 0.5 * x * (1.0 + $erf(x / $sqrt2)),
                GeluTanh => {
                    let c = $sqrt(2.0 / $pi);
                    0.5 * x * (1.0 + $tanh(c * (x + 0.044715 * x * x * x)))
                }
                Mish => x * $tanh(if x > $soft_lim { x } else { $log1p($exp(x)) }),
            }
        }
    };
}

define!(eval_f32, f32, math::expf, math::logf, math::sqrtf, math::floorf, math::ceilf, math::rintf, math::sinf, math::cosf,
    math::tanf, math::asinf, math::acosf, math::atanf, math::sinhf, math::coshf, math::asinhf, math::acoshf, math::atanhf,
    math::erff, math::tanhf, math::log1pf, core::f32::consts::PI, core::f32::consts::SQRT_2, 20.0);
define!(eval_f64, f64, math::exp, math::log, math::sqrt, math::floor, math::ceil, math::rint, math::sin, math::cos,
    math::tan, math::asin, math::acos, math::atan, math::sinh, math::cosh, math::asinh, math::acosh, math::atanh,
    math::erf, math::tanh, math::log1p, core::f64::consts::PI, core::f64::consts::SQRT_2, 40.0);

/// `$body` with `$c` bound to `u` as a constant of its variant (parameters as read), one arm
/// per variant: each arm's loop sees which function it computes, so `eval_f32`'s match folds
/// away and the loop vectorizes (one loop over a run-time `u` re-dispatches every element).
macro_rules! with_const {
    ($u:expr, $c:ident => $body:expr) => {{
        use Unary::*;
        match $u {
            Abs => { let $c = Abs; $body }
            Neg => { let $c = Neg; $body }
            Exp => { let $c = Exp; $body }
            Log => { let $c = Log; $body }
            Sqrt => { let $c = Sqrt; $body }
            Reciprocal => { let $c = Reciprocal; $body }
            Floor => { let $c = Floor; $body }
            Ceil => { let $c = Ceil; $body }
            Round => { let $c = Round; $body }
            Sign => { let $c = Sign; $body }
            Sin => { let $c = Sin; $body }
            Cos => { let $c = Cos; $body }
            Tan => { let $c = Tan; $body }
            Asin => { let $c = Asin; $body }
            Acos => { let $c = Acos; $body }
            Atan => { let $c = Atan; $body }
            Sinh => { let $c = Sinh; $body }
            Cosh => { let $c = Cosh; $body }
            Asinh => { let $c = Asinh; $body }
            Acosh => { let $c = Acosh; $body }
            Atanh => { let $c = Atanh; $body }
            Erf => { let $c = Erf; $body }
            Relu => { let $c = Relu; $body }
            Sigmoid => { let $c = Sigmoid; $body }
            Tanh => { let $c = Tanh; $body }
            Softplus => { let $c = Softplus; $body }
            Softsign => { let $c = Softsign; $body }
            LeakyRelu(a) => { let $c = LeakyRelu(a); $body }
            Elu(a) => { let $c = Elu(a); $body }
            Selu(a, g) => { let $c = Selu(a, g); $body }
            Celu(a) => { let $c = Celu(a); $body }
            HardSigmoid(a, b) => { let $c = HardSigmoid(a, b); $body }
            HardSwish => { let $c = HardSwish; $body }
            ThresholdedRelu(a) => { let $c = ThresholdedRelu(a); $body }
            Gelu => { let $c = Gelu; $body }
            GeluTanh => { let $c = GeluTanh; $body }
            Mish => { let $c = Mish; $body }
        }
    }};
}

/// `y = u(x)` elementwise, f32, long rows split over the thread pool.
pub fn map_f32(u: Unary, x: &[f32], y: &mut [f32]) {
    // As in `map_f32_inplace`.
    #[inline(always)]
    fn each(x: &[f32], y: &mut [f32], f: impl Fn(f32) -> f32) {
        y.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v));
    }
    let n = x.len().min(y.len());
    crate::for_plane_ranges(n, 1, n.saturating_mul(SPLIT_WEIGHT), y, &|j0, j1, y| {
        let x = &x[j0..j1];
        match u {
            Unary::Relu => each(x, y, |v| if v > 0.0 { v } else { 0.0 }),
            Unary::LeakyRelu(a) => each(x, y, |v| if v < 0.0 { a * v } else { v }),
            Unary::Neg => each(x, y, |v| -v),
            _ => with_const!(u, c => each(x, y, |v| eval_f32(c, v))),
        }
    });
}

/// Work counted per element when deciding whether a map is worth splitting over the pool: a
/// few operations each, and memory traffic.
const SPLIT_WEIGHT: usize = 4;

/// `x = u(x)` in place, f32, long rows split over the thread pool.
pub fn map_f32_inplace(u: Unary, x: &mut [f32]) {
    // The commonest cheap functions in loops of their own (the expressions of `eval_f32`,
    // checked bit for bit by `fast_loops_match_eval`), which vectorize.
    #[inline(always)]
    fn each(x: &mut [f32], f: impl Fn(f32) -> f32) {
        x.iter_mut().for_each(|v| *v = f(*v));
    }
    crate::for_plane_ranges(x.len(), 1, x.len().saturating_mul(SPLIT_WEIGHT), x, &|_, _, x| match u {
        Unary::Relu => each(x, |v| if v > 0.0 { v } else { 0.0 }),
        Unary::LeakyRelu(a) => each(x, |v| if v < 0.0 { a * v } else { v }),
        Unary::Neg => each(x, |v| -v),
        _ => with_const!(u, c => each(x, |v| eval_f32(c, v))),
    });
}

/// `y = u(x)` elementwise, f64.
pub fn map_f64(u: Unary, x: &[f64], y: &mut [f64]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = eval_f64(u, v);
    }
}

/// `x = u(x)` in place, f64.
pub fn map_f64_inplace(u: Unary, x: &mut [f64]) {
    for v in x.iter_mut() {
        *v = eval_f64(u, *v);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// The loops `map_f32` and `map_f32_inplace` run for some functions give `eval_f32`'s bits.
    #[test]
    fn fast_loops_match_eval() {
        let xs: Vec<f32> = [f32::NAN, -f32::NAN, 0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, 1e-40, -1e-40, 3.5, -2.25].iter().copied().chain((0..40).map(|i| (i as f32 * 0.37).sin() * 10.0)).collect();
        for u in [Unary::Relu, Unary::LeakyRelu(0.1), Unary::Neg, Unary::Abs, Unary::Exp] {
            let want: Vec<u32> = xs.iter().map(|&v| eval_f32(u, v).to_bits()).collect();
            let mut y = std::vec![0f32; xs.len()];
            map_f32(u, &xs, &mut y);
            assert_eq!(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{u:?}");
            let mut z = xs.clone();
            map_f32_inplace(u, &mut z);
            assert_eq!(z.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{u:?} in place");
        }
    }
}
