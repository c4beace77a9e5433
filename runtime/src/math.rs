//! Scalar math for no_std: `core` has no `exp`/`ln`/…, so use libm's (correctly rounded enough for
//! ONNX tolerances) everywhere, the same code on every target.
pub use libm::{
    acos, acosf, acosh, acoshf, asin, asinf, asinh, asinhf, atan, atan2, atan2f, atanf, atanh,
    atanhf, ceil, ceilf, cos, cosf, cosh, coshf, erf, erff, exp, expf, expm1, expm1f, floor,
    floorf, fmod, fmodf, log, log1p, log1pf, logf, pow, powf, rint, rintf, round, roundf, sin,
    sinf, sinh, sinhf, sqrt, sqrtf, tan, tanf, tanh, tanhf, trunc, truncf,
};
