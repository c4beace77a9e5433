//! burnc-runtime: the kernels that both the reference interpreter and generated code call.
//!
//! `#![no_std]`: every kernel is a plain function over slices with explicit shapes, so it runs
//! on a microcontroller as well as under the interpreter. `std` only adds speed-ups (SIMD
//! dispatch in the GEMM crate, later a thread pool).
#![no_std]
#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod arena;
pub mod elem;
pub mod kernels;
pub mod math;

pub use elem::{Elem, FloatElem};
/// Re-exported so generated code names f16/bf16 without its own dependency.
pub use half;

#[cfg(target_endian = "big")]
compile_error!("burnc's weights and arena layouts are little-endian");
