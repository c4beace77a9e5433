//! Run-time dims of modules compiled with bounded dims (`--input x=1x3x{h<=64}x{w<=64}`):
//! generated `forward` checks each dim against its bound, each size derived from them, and
//! each input slice's length, and returns [`DimError`] instead of panicking.
use core::fmt;

/// Why a bounded-dims `forward` refused its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DimError {
    /// A named dim is 0 or above the bound the arena was sized for.
    OutOfBounds { dim: &'static str, value: usize, bound: usize },
    /// A size the model derives from the dims (a conv output, say) is below 1.
    TooSmall { size: &'static str, value: i64 },
    /// An input slice's length is not the product of its dims.
    InputLength { input: &'static str, expected: usize, got: usize },
    /// Two sizes the model needs equal (a MatMul's inner dims, say) differ for these dims.
    Mismatch { what: &'static str, left: i64, right: i64 },
    /// A size the model needs at most another (a mask's length and the keys) exceeds it.
    Exceeds { what: &'static str, left: i64, right: i64 },
    /// A size the model needs a multiple of another (heads into groups) is not.
    NotMultiple { what: &'static str, left: i64, right: i64 },
    /// Two sizes the model was compiled for as different (a comparison of head counts it
    /// decided) are equal for these dims.
    Coincide { what: &'static str, value: i64 },
}

impl fmt::Display for DimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimError::OutOfBounds { dim, value, bound } => write!(f, "dim `{dim}` is {value}; it must be in 1..={bound}"),
            DimError::TooSmall { size, value } => write!(f, "derived size `{size}` is {value} for these dims; the inputs are too small"),
            DimError::InputLength { input, expected, got } => write!(f, "input `{input}` has {got} elements, its dims give {expected}"),
            DimError::Mismatch { what, left, right } => write!(f, "{what} must be equal; these dims give {left} and {right}"),
            DimError::Exceeds { what, left, right } => write!(f, "{what}: the first may not exceed the second; these dims give {left} and {right}"),
            DimError::NotMultiple { what, left, right } => write!(f, "{what}: the second must be a multiple of the first; these dims give {left} and {right}"),
            DimError::Coincide { what, value } => write!(f, "{what} must differ; these dims give {value} for both"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for DimError {}

/// `value` when it is in `1..=bound`.
pub fn check(dim: &'static str, value: usize, bound: usize) -> Result<usize, DimError> {
    if value == 0 || value > bound {
        return Err(DimError::OutOfBounds { dim, value, bound });
    }
    Ok(value)
}

/// A derived size as `usize` when it is at least 1.
pub fn derived(size: &'static str, value: i64) -> Result<usize, DimError> {
    if value < 1 {
        return Err(DimError::TooSmall { size, value });
    }
    Ok(value as usize)
}

/// Whether input `input` has `expected` elements.
pub fn check_len(input: &'static str, got: usize, expected: usize) -> Result<(), DimError> {
    if got != expected {
        return Err(DimError::InputLength { input, expected, got });
    }
    Ok(())
}

/// Whether the two sizes of `what` (a constraint the compiler could not prove) are equal.
pub fn same(what: &'static str, left: i64, right: i64) -> Result<(), DimError> {
    if left != right {
        return Err(DimError::Mismatch { what, left, right });
    }
    Ok(())
}

/// Whether `left <= right` for `what`.
pub fn at_most(what: &'static str, left: i64, right: i64) -> Result<(), DimError> {
    if left > right {
        return Err(DimError::Exceeds { what, left, right });
    }
    Ok(())
}

/// Whether `right` is a multiple of `left` for `what`.
pub fn divides(what: &'static str, left: i64, right: i64) -> Result<(), DimError> {
    if left == 0 || right % left != 0 {
        return Err(DimError::NotMultiple { what, left, right });
    }
    Ok(())
}

/// Whether `left != right` for `what`.
pub fn differ(what: &'static str, left: i64, right: i64) -> Result<(), DimError> {
    if left == right {
        return Err(DimError::Coincide { what, value: left });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_lengths() {
        assert_eq!(check("h", 64, 64), Ok(64));
        assert_eq!(check("h", 65, 64), Err(DimError::OutOfBounds { dim: "h", value: 65, bound: 64 }));
        assert!(check("h", 0, 64).is_err());
        assert_eq!(derived("h/2", 0), Err(DimError::TooSmall { size: "h/2", value: 0 }));
        assert!(check_len("x", 11, 12).is_err() && check_len("x", 12, 12).is_ok());
        assert_eq!(same("inner dims", 6, 6), Ok(()));
        assert_eq!(same("inner dims", 6, 8), Err(DimError::Mismatch { what: "inner dims", left: 6, right: 8 }));
        assert!(at_most("mask", 3, 4).is_ok() && at_most("mask", 5, 4).is_err());
        assert!(differ("heads", 3, 4).is_ok());
        assert_eq!(differ("heads", 4, 4), Err(DimError::Coincide { what: "heads", value: 4 }));
        assert!(divides("heads", 3, 9).is_ok() && divides("heads", 2, 9).is_err() && divides("heads", 0, 0).is_err());
    }
}
