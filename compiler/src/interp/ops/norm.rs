//! Normalization helpers of the op definitions (`crate::ops::norm`, `channel_norm`): float
//! math in f32 (f32, f16, bf16 inputs) or f64 over the kernels of burnc-runtime
//! (`kernels::{norm, softmax}`).
pub(crate) mod float;
pub(crate) mod local;
pub(crate) mod stats;
