//! Typed views into the one arena and the weights blob that generated code works in.
//!
//! The compiler decides every offset: views of values that are live at the same time never
//! overlap (the memory plan's verifier checks it), every offset is a multiple of 64 and both
//! buffers are 64-byte aligned, so these views are sound when called as the generated code
//! calls them. They are `unsafe` because that proof lives in the compiler, not in the types;
//! that each view lies inside its buffer is checked here, at run time, once per view.

/// Alignment of the arena, the weights blob and every offset in them.
pub const ALIGN: usize = 64;

/// The arena, or the part of it a subgraph works in, as generated code holds it: where it
/// starts and how long it is, so that every view taken of it is checked against its end.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    base: *mut u8,
    len: usize,
}

impl Region {
    /// All of `bytes` (the caller's `Arena`).
    #[inline(always)]
    pub fn of(bytes: &mut [u8]) -> Region {
        Region { base: bytes.as_mut_ptr(), len: bytes.len() }
    }

    /// All of `bytes`, for reading only: views of it must be [`view`]s, never [`view_mut`]
    /// (a forward pass reads the training state this way).
    #[inline(always)]
    pub fn of_read_only(bytes: &[u8]) -> Region {
        Region { base: bytes.as_ptr() as *mut u8, len: bytes.len() }
    }

    /// The part from byte `offset` on: a subgraph's arena inside its node's scratch.
    #[inline(always)]
    pub fn at(self, offset: usize) -> Region {
        assert!(offset <= self.len, "arena region at {offset} is past the end ({} bytes)", self.len);
        // SAFETY: `offset` is within the region (checked above).
        Region { base: unsafe { self.base.add(offset) }, len: self.len - offset }
    }

    /// Bytes in the region.
    #[inline(always)]
    pub fn len(self) -> usize {
        self.len
    }

    /// Whether the region has no bytes.
    #[inline(always)]
    pub fn is_empty(self) -> bool {
        self.len == 0
    }
}

/// The end of `len` elements of `T` at `offset`, when they fit in `have` bytes; panics
/// otherwise. One comparison per view (per node, not per element): a compiler bug or a
/// forged plan stops here instead of writing past the arena.
#[inline(always)]
fn fits<T>(offset: usize, len: usize, have: usize) {
    let end = len.checked_mul(core::mem::size_of::<T>()).and_then(|b| b.checked_add(offset));
    if !matches!(end, Some(e) if e <= have) {
        out_of_bounds(offset, len, have);
    }
}

#[cold]
#[inline(never)]
fn out_of_bounds(offset: usize, len: usize, have: usize) -> ! {
    panic!("view of {len} elements at byte {offset} does not fit in {have} bytes")
}

/// A read view of `len` elements of `T` at byte `offset` of region `r` (bounds checked).
///
/// # Safety
/// `offset` is aligned for `T`, the bytes hold valid `T`s, and no mutable view of those
/// bytes is alive while this one is.
#[inline(always)]
pub unsafe fn view<'a, T>(r: Region, offset: usize, len: usize) -> &'a [T] {
    fits::<T>(offset, len, r.len);
    // SAFETY: in bounds (checked); the rest is guaranteed by the caller (the memory plan).
    unsafe { core::slice::from_raw_parts(r.base.add(offset) as *const T, len) }
}

/// A write view of `len` elements of `T` at byte `offset` of region `r` (bounds checked).
///
/// # Safety
/// As [`view`], and no other view of those bytes is alive while this one is. `T` must be
/// valid for any bit pattern (numbers; generated code stores bools as `u8`).
#[inline(always)]
pub unsafe fn view_mut<'a, T>(r: Region, offset: usize, len: usize) -> &'a mut [T] {
    fits::<T>(offset, len, r.len);
    // SAFETY: in bounds (checked); the rest is guaranteed by the caller (the memory plan).
    unsafe { core::slice::from_raw_parts_mut(r.base.add(offset) as *mut T, len) }
}

/// A read view of `N` elements of `T` at byte `offset` of region `r`, as an array.
///
/// # Safety
/// As [`view`].
#[inline(always)]
pub unsafe fn view_array<'a, T, const N: usize>(r: Region, offset: usize) -> &'a [T; N] {
    fits::<T>(offset, N, r.len);
    // SAFETY: in bounds (checked); the rest is guaranteed by the caller (the memory plan).
    unsafe { &*(r.base.add(offset) as *const [T; N]) }
}

/// A view of `len` elements of `T` at byte `offset` of a weights blob (bounds checked).
///
/// # Safety
/// `weights` was checked by [`check_weights`] against the blob size the model expects and
/// `offset` is a multiple of [`ALIGN`]; the bytes hold valid `T`s.
#[inline(always)]
pub unsafe fn weights<T>(weights: &[u8], offset: usize, len: usize) -> &[T] {
    fits::<T>(offset, len, weights.len());
    // SAFETY: in bounds (checked); alignment guaranteed by the caller and check_weights.
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
