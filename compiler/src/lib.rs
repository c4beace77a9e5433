//! burnc-compiler: the IR every frontend produces, the passes over it, and the reference
//! interpreter that runs it with the runtime's kernels.
pub mod autodiff;
pub mod codegen;
pub mod float8;
pub mod interp;
pub mod ir;
pub mod memory;
pub mod memory_svg;
pub mod ops;
pub mod passes;
pub mod schedule;
pub mod size;
pub mod tensor;
pub mod train;

pub use tensor::{Data, Tensor};
