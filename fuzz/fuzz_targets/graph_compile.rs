//! Structure-aware fuzzing of the compile path: the input bytes choose a small graph of valid
//! ops (elementwise, MatMul, Gemm, Conv, pools, Reshape, Transpose, Concat, Slice, Softmax,
//! reductions …) with random attributes and shapes, written as an ONNX model, so most inputs
//! reach inference, planning and emission instead of failing to decode.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let model = burnc_fuzz::random_model(data);
    let Ok(model) = burnc_frontends::onnx::load_bytes(bytes::Bytes::from(model), None) else { return };
    burnc_fuzz::compile(model.graph);
});
