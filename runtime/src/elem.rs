//! Element traits over the numeric types kernels handle.
use half::{bf16, f16};

/// A tensor element: all ints, floats and bool. Arithmetic on ints wraps (as numpy and ONNX
/// Runtime do); on f16/bf16 it is computed in f32 and rounded once.
pub trait Elem: Copy + PartialEq + PartialOrd + Default + Send + Sync + 'static {
    const IS_FLOAT: bool;
    fn zero() -> Self;
    fn one() -> Self;
    fn to_f64(self) -> f64;
    /// Float-to-int conversion truncates toward zero and saturates (Rust `as`).
    fn from_f64(v: f64) -> Self;
    fn to_i64(self) -> i64;
    /// Int-to-int conversion wraps (two's complement truncation, as numpy's astype).
    fn from_i64(v: i64) -> Self;
    fn to_u64(self) -> u64;
    fn from_u64(v: u64) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Division; integer division by zero gives zero instead of trapping.
    fn div(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn min_of(self, o: Self) -> Self {
        if o < self {
            o
        } else {
            self
        }
    }
    fn max_of(self, o: Self) -> Self {
        if o > self {
            o
        } else {
            self
        }
    }
    fn is_nan(self) -> bool {
        false
    }
    /// Lowest and highest representable values (−inf/inf for floats), for max/min reductions.
    fn lowest() -> Self;
    fn highest() -> Self;
}

/// Float elements: transcendental functions, computed in f32 or f64.
pub trait FloatElem: Elem {
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
    /// Apply a float function at this type's working precision (f64 for f64, f32 otherwise).
    fn map(self, f32f: impl Fn(f32) -> f32, f64f: impl Fn(f64) -> f64) -> Self;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const IS_FLOAT: bool = false;
            #[inline] fn zero() -> Self { 0 }
            #[inline] fn one() -> Self { 1 }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
            #[inline] fn to_i64(self) -> i64 { self as i64 }
            #[inline] fn from_i64(v: i64) -> Self { v as $t }
            #[inline] fn to_u64(self) -> u64 { self as u64 }
            #[inline] fn from_u64(v: u64) -> Self { v as $t }
            #[inline] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline] fn div(self, o: Self) -> Self { if o == 0 { 0 } else { self.wrapping_div(o) } }
            #[inline] fn neg(self) -> Self { (0 as $t).wrapping_sub(self) }
            #[inline] fn abs(self) -> Self { if self < (0 as $t) { self.neg() } else { self } }
            #[inline] fn lowest() -> Self { <$t>::MIN }
            #[inline] fn highest() -> Self { <$t>::MAX }
        }
    )*};
}
int_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Elem for bool {
    const IS_FLOAT: bool = false;
    fn zero() -> Self {
        false
    }
    fn one() -> Self {
        true
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn to_u64(self) -> u64 {
        self as u64
    }
    fn from_u64(v: u64) -> Self {
        v != 0
    }
    fn add(self, o: Self) -> Self {
        self | o
    }
    fn sub(self, o: Self) -> Self {
        self ^ o
    }
    fn mul(self, o: Self) -> Self {
        self & o
    }
    fn div(self, o: Self) -> Self {
        self & o
    }
    fn neg(self) -> Self {
        self
    }
    fn abs(self) -> Self {
        self
    }
    fn lowest() -> Self {
        false
    }
    fn highest() -> Self {
        true
    }
}

macro_rules! native_float_elem {
    ($t:ty, $work:ident) => {
        impl Elem for $t {
            const IS_FLOAT: bool = true;
            #[inline] fn zero() -> Self { 0.0 }
            #[inline] fn one() -> Self { 1.0 }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
            #[inline] fn to_i64(self) -> i64 { self as i64 }
            #[inline] fn from_i64(v: i64) -> Self { v as $t }
            #[inline] fn to_u64(self) -> u64 { self as u64 }
            #[inline] fn from_u64(v: u64) -> Self { v as $t }
            #[inline] fn add(self, o: Self) -> Self { self + o }
            #[inline] fn sub(self, o: Self) -> Self { self - o }
            #[inline] fn mul(self, o: Self) -> Self { self * o }
            #[inline] fn div(self, o: Self) -> Self { self / o }
            #[inline] fn neg(self) -> Self { -self }
            #[inline] fn abs(self) -> Self { if self < 0.0 { -self } else if self == 0.0 { 0.0 } else { self } }
            // NaN propagates through min/max, as ONNX Min/Max and numpy do.
            #[inline] fn min_of(self, o: Self) -> Self { if self.is_nan() || o.is_nan() { <$t>::NAN } else if o < self { o } else { self } }
            #[inline] fn max_of(self, o: Self) -> Self { if self.is_nan() || o.is_nan() { <$t>::NAN } else if o > self { o } else { self } }
            #[inline] fn is_nan(self) -> bool { self != self }
            #[inline] fn lowest() -> Self { <$t>::NEG_INFINITY }
            #[inline] fn highest() -> Self { <$t>::INFINITY }
        }
    };
}
native_float_elem!(f32, f32);
native_float_elem!(f64, f64);

impl FloatElem for f32 {
    #[inline]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline]
    fn map(self, f32f: impl Fn(f32) -> f32, _f64f: impl Fn(f64) -> f64) -> Self {
        f32f(self)
    }
}
impl FloatElem for f64 {
    #[inline]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline]
    fn from_f32(v: f32) -> Self {
        v as f64
    }
    #[inline]
    fn map(self, _f32f: impl Fn(f32) -> f32, f64f: impl Fn(f64) -> f64) -> Self {
        f64f(self)
    }
}

macro_rules! half_elem {
    ($t:ty) => {
        impl Elem for $t {
            const IS_FLOAT: bool = true;
            #[inline] fn zero() -> Self { <$t>::ZERO }
            #[inline] fn one() -> Self { <$t>::ONE }
            #[inline] fn to_f64(self) -> f64 { self.to_f64() }
            #[inline] fn from_f64(v: f64) -> Self { <$t>::from_f64(v) }
            #[inline] fn to_i64(self) -> i64 { self.to_f32() as i64 }
            #[inline] fn from_i64(v: i64) -> Self { <$t>::from_f64(v as f64) }
            #[inline] fn to_u64(self) -> u64 { self.to_f32() as u64 }
            #[inline] fn from_u64(v: u64) -> Self { <$t>::from_f64(v as f64) }
            #[inline] fn add(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() + o.to_f32()) }
            #[inline] fn sub(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() - o.to_f32()) }
            #[inline] fn mul(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() * o.to_f32()) }
            #[inline] fn div(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() / o.to_f32()) }
            #[inline] fn neg(self) -> Self { -self }
            #[inline] fn abs(self) -> Self { <$t>::from_f32(self.to_f32().abs_()) }
            #[inline] fn min_of(self, o: Self) -> Self { if self.is_nan() || o.is_nan() { <$t>::NAN } else if o < self { o } else { self } }
            #[inline] fn max_of(self, o: Self) -> Self { if self.is_nan() || o.is_nan() { <$t>::NAN } else if o > self { o } else { self } }
            #[inline] fn is_nan(self) -> bool { <$t>::is_nan(self) }
            #[inline] fn lowest() -> Self { <$t>::NEG_INFINITY }
            #[inline] fn highest() -> Self { <$t>::INFINITY }
        }
        impl FloatElem for $t {
            #[inline] fn to_f32(self) -> f32 { <$t>::to_f32(self) }
            #[inline] fn from_f32(v: f32) -> Self { <$t>::from_f32(v) }
            #[inline] fn map(self, f32f: impl Fn(f32) -> f32, _f64f: impl Fn(f64) -> f64) -> Self { <$t>::from_f32(f32f(<$t>::to_f32(self))) }
        }
    };
}
half_elem!(f16);
half_elem!(bf16);

/// `f32::abs` is not in `core` on older toolchains' no_std paths; spell it out.
trait AbsExt {
    fn abs_(self) -> Self;
}
impl AbsExt for f32 {
    #[inline]
    fn abs_(self) -> f32 {
        f32::from_bits(self.to_bits() & 0x7fff_ffff)
    }
}
