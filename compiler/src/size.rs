//! Element counts, byte sizes and offsets, checked: the one place where sizes are multiplied
//! and added. A model file can ask for a tensor of 10^27 elements; such a count must become a
//! clean error naming the node, never a product that wraps to a few bytes while the code
//! writes gigabytes. Shape inference refuses every value larger than [`MAX_VALUE_BYTES`], so
//! any product over one value's dims is safe after it; sizes that combine several values (the
//! memory plan, scratch buffers) go through the checked helpers here.
use crate::ir::DType;

/// The most bytes one value may take: what a Rust slice can span (`isize::MAX`).
pub const MAX_VALUE_BYTES: usize = isize::MAX as usize;

/// The arena limit when the user sets none (`--max-arena`, `Build::max_arena`): 1 TiB. Far
/// above any machine a compiled model runs on, far below sizes that are only a hostile or
/// broken file's (a OneHot of depth 10^12 asks for 8 TB).
pub const DEFAULT_MAX_ARENA_BYTES: usize = 1 << 40;

/// Element count of `dims`, or None when it overflows `usize`.
pub fn numel(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// Bytes of `numel` elements of `dtype` (small types are stored one per byte), or None.
pub fn bytes(numel: usize, dtype: DType) -> Option<usize> {
    numel.checked_mul(dtype.size().max(1))
}

/// Bytes of a value of `dtype` with `dims`, when at most [`MAX_VALUE_BYTES`]; else a reason.
pub fn value_bytes(dims: &[usize], dtype: DType) -> Result<usize, String> {
    let b = numel(dims).and_then(|n| bytes(n, dtype));
    match b {
        Some(b) if b <= MAX_VALUE_BYTES => Ok(b),
        _ => Err(format!("a {dtype} tensor of shape {dims:?} is too large ({} bytes)", describe(dims, dtype))),
    }
}

/// The byte count of `dims` × `dtype` in words, exact when it fits 128 bits.
fn describe(dims: &[usize], dtype: DType) -> String {
    let n = dims.iter().try_fold(dtype.size().max(1) as u128, |a, &d| a.checked_mul(d as u128));
    match n {
        Some(n) => n.to_string(),
        None => "more than 2^128".into(),
    }
}

/// `a * b`, saturating at `usize::MAX`: for size estimates that a later check against a limit
/// turns into an error (a saturated size is always over the limit).
pub fn mul(a: usize, b: usize) -> usize {
    a.saturating_mul(b)
}

/// Product of `xs`, saturating.
pub fn product(xs: impl IntoIterator<Item = usize>) -> usize {
    xs.into_iter().fold(1usize, mul)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_that_wrap_are_refused() {
        assert_eq!(numel(&[2, 3, 4]), Some(24));
        assert_eq!(numel(&[1 << 62, 4]), None);
        assert_eq!(numel(&[1 << 62, 4, 0]), None, "a zero after an overflow still overflowed on the way");
        assert!(value_bytes(&[1_000_000_000; 3], DType::I64).is_err());
        assert!(value_bytes(&[1 << 61], DType::F32).is_err(), "2^63 bytes is above isize::MAX");
        assert_eq!(value_bytes(&[1 << 20, 4], DType::F32), Ok(1 << 24));
        assert_eq!(product([1 << 40, 1 << 40]), usize::MAX);
    }
}
