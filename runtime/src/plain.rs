//! Element types whose bytes a GPU module copies to and from its device buffers as they are.
/// Plain element types whose bytes the module copies in and out as they are.
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes is a valid value.
pub unsafe trait Plain: Copy + Default {}
unsafe impl Plain for f32 {}
unsafe impl Plain for f64 {}
unsafe impl Plain for i8 {}
unsafe impl Plain for i16 {}
unsafe impl Plain for i32 {}
unsafe impl Plain for i64 {}
unsafe impl Plain for u8 {}
unsafe impl Plain for u16 {}
unsafe impl Plain for u32 {}
unsafe impl Plain for u64 {}
unsafe impl Plain for half::f16 {}
unsafe impl Plain for half::bf16 {}

/// The bytes of `xs`.
pub fn bytes_of<T: Plain>(xs: &[T]) -> &[u8] {
    // SAFETY: `T: Plain` has no padding and any alignment is at least u8's.
    unsafe { core::slice::from_raw_parts(xs.as_ptr().cast::<u8>(), core::mem::size_of_val(xs)) }
}

/// The bytes of `xs`, writable.
pub fn bytes_of_mut<T: Plain>(xs: &mut [T]) -> &mut [u8] {
    // SAFETY: as `bytes_of`; every byte pattern written is a valid `T` (`Plain`).
    unsafe { core::slice::from_raw_parts_mut(xs.as_mut_ptr().cast::<u8>(), core::mem::size_of_val(xs)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_bytes_round_trip() {
        let mut xs = [1.5f32, -2.0];
        let b = bytes_of(&xs).to_vec();
        assert_eq!(b.len(), 8);
        bytes_of_mut(&mut xs).copy_from_slice(&[0; 8]);
        assert_eq!(xs, [0.0, 0.0]);
        bytes_of_mut(&mut xs).copy_from_slice(&b);
        assert_eq!(xs, [1.5, -2.0]);
    }
}
