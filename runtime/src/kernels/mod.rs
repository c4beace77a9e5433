//! Kernels: plain functions over slices with explicit shapes.
pub mod attention;
pub mod broadcast;
pub mod causal_conv;
pub mod cache;
pub mod concat;
pub mod conv;
pub mod det;
mod dw_avx2;
pub mod dropout;
pub mod detect;
pub mod einsum;
pub mod extra;
pub mod gather;
pub mod gemm;
pub mod grid;
pub mod im2col;
#[cfg(target_arch = "x86_64")]
mod lanes;
pub mod linear_attention;
pub mod loss;
pub mod ml;
pub mod nbits;
pub mod norm;
pub mod packed;
pub mod pad;
pub mod permute;
pub mod q8;
pub mod qconv;
pub mod qgemm;
pub mod quant;
pub mod pool;
pub mod real;
pub mod reduce;
pub mod rnn;
pub mod resize;
pub mod reverse;
pub mod scatter;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
pub mod shifted;
pub mod sdpa;
pub mod slab;
pub mod slice;
pub mod softmax;
pub mod spectral;
pub mod tile;
pub mod unary;
pub mod unpool;
mod vexp;
pub mod window;
pub mod winograd;

/// A pointer that pool tasks may share: each task writes its own disjoint part of the buffer
/// it points to (see each call site's SAFETY note).
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub(crate) *mut f32);
// SAFETY: only used to hand disjoint parts of one buffer to pool tasks.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}
impl SendPtr {
    /// Through a method, so closures capture the whole (Sync) wrapper, not the raw pointer.
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) fn get(self) -> *mut f32 {
        self.0
    }

    /// The pointer `i` elements on.
    pub(crate) fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}

/// `f(buf)` with this thread's buffer `key`, grown to at least `len` elements and kept
/// between calls (tasks of a split kernel reuse it instead of allocating); a nested use of
/// the same buffer on this thread gets a fresh one.
#[cfg(feature = "std")]
pub(crate) fn with_thread_buffer<R>(key: &'static std::thread::LocalKey<core::cell::RefCell<std::vec::Vec<f32>>>, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    key.with(|b| match b.try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < len {
                v.resize(len, 0.0);
            }
            f(&mut v[..len])
        }
        Err(_) => f(&mut std::vec![0f32; len]),
    })
}

/// Whether the CPU has AVX2: detected at run time under std, the build's target otherwise.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(target_feature = "avx2")
    }
}

/// Whether the CPU has AVX2 and FMA: detected at run time under std, the build's target
/// otherwise.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx2_fma() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(all(target_feature = "avx2", target_feature = "fma"))
    }
}

/// Seeded test data shared by the kernels' unit tests.
#[cfg(test)]
pub(crate) mod test_rng {
    extern crate std;
    use std::vec::Vec;

    /// The xorshift states after `seed`, one per value.
    fn states(n: usize, seed: u32) -> impl Iterator<Item = u32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
        (0..n).map(move |_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s
        })
    }

    /// `n` values in [-1, 1) from an xorshift generator seeded with `seed`.
    pub fn rnd(n: usize, seed: u32) -> Vec<f32> {
        states(n, seed).map(|s| (s % 2000) as f32 / 1000.0 - 1.0).collect()
    }

    /// `n` bytes from the same generator.
    pub fn bytes(n: usize, seed: u32) -> Vec<u8> {
        states(n, seed).map(|s| (s >> 11) as u8).collect()
    }
}
