//! Kernels: plain functions over slices with explicit shapes.
pub mod broadcast;
pub mod gemm;
pub mod permute;
pub mod reduce;
pub mod scatter;
pub mod resize;
