//! burnc-frontends: each module turns a model file into a `burnc_compiler::ir::Graph`.
pub mod npy;
pub mod onnx;
pub mod pytorch;
pub mod safetensors;
pub mod weights;
