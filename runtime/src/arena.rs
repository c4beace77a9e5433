//! Typed views into the one arena and the weights blob that generated code works in.
//!
//! The compiler decides every offset: views of values that are live at the same time never
//! overlap, every offset is a multiple of 64 and both buffers are 64-byte aligned, so these
//! views are sound when called as the generated code calls them. They are `unsafe` because
//! that proof lives in the compiler, not in the types.

/// Alignment of the arena, the weights blob and every offset in them.
pub const ALIGN: usize = 64;

/// A read view of `len` elements of `T` at byte `offset` of the arena at `base`.
///
/// # Safety
/// `offset + len * size_of::<T>()` lies within the arena, `offset` is aligned for `T`, the
/// bytes hold valid `T`s, and no mutable view of those bytes is alive while this one is.
#[inline(always)]
pub unsafe fn view<'a, T>(base: *mut u8, offset: usize, len: usize) -> &'a [T] {
    // SAFETY: guaranteed by the caller (the memory plan).
    unsafe { core::slice::from_raw_parts(base.add(offset) as *const T, len) }
}

/// A write view of `len` elements of `T` at byte `offset` of the arena at `base`.
///
/// # Safety
/// As [`view`], and no other view of those bytes is alive while this one is. `T` must be
/// valid for any bit pattern (numbers; generated code stores bools as `u8`).
#[inline(always)]
pub unsafe fn view_mut<'a, T>(base: *mut u8, offset: usize, len: usize) -> &'a mut [T] {
    // SAFETY: guaranteed by the caller (the memory plan).
    unsafe { core::slice::from_raw_parts_mut(base.add(offset) as *mut T, len) }
}

/// A view of `len` elements of `T` at byte `offset` of a weights blob.
///
/// # Safety
/// `weights` was checked by [`check_weights`] against the blob size the model expects,
/// `offset` is a multiple of [`ALIGN`] and `offset + len * size_of::<T>()` is within it.
#[inline(always)]
pub unsafe fn weights<T>(weights: &[u8], offset: usize, len: usize) -> &[T] {
    // SAFETY: guaranteed by the caller (the weights layout) and by check_weights.
    unsafe { core::slice::from_raw_parts(weights.as_ptr().add(offset) as *const T, len) }
}

/// Why a weights blob cannot serve a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightsError {
    /// The blob has the wrong length (expected, got).
    Length(usize, usize),
    /// The blob does not start at a 64-byte boundary.
    Misaligned,
}

impl core::fmt::Display for WeightsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WeightsError::Length(want, got) => write!(f, "weights blob has {got} bytes, the model needs {want}"),
            WeightsError::Misaligned => write!(f, "weights blob is not 64-byte aligned"),
        }
    }
}

/// Check a caller-supplied weights blob before any view is taken of it.
pub fn check_weights(weights: &[u8], expected_len: usize) -> Result<(), WeightsError> {
    if weights.len() != expected_len {
        return Err(WeightsError::Length(expected_len, weights.len()));
    }
    if !(weights.as_ptr() as usize).is_multiple_of(ALIGN) {
        return Err(WeightsError::Misaligned);
    }
    Ok(())
}

/// A 64-byte aligned wrapper, for the embedded weights blob.
#[repr(C, align(64))]
pub struct Aligned<T: ?Sized>(pub T);
