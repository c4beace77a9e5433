//! Kernels: plain functions over slices with explicit shapes.
pub mod attention;
pub mod broadcast;
pub mod conv;
pub mod gemm;
pub mod im2col;
pub mod loss;
pub mod norm;
pub mod permute;
pub mod quant;
pub mod pool;
pub mod real;
pub mod reduce;
pub mod resize;
pub mod scatter;
pub mod softmax;
pub mod unary;
pub mod window;
