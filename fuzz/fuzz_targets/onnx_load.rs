//! Fuzz the whole ONNX compile path: any bytes must decode to a model or a clean error, and a
//! model that decodes must go through validation, the passes, the memory plan (and its
//! verifier) and Rust emission (which parses what it emits) without panicking. Shapes are
//! pinned to small sizes where the model leaves them symbolic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = burnc_frontends::onnx::load_bytes(bytes::Bytes::copy_from_slice(data), None) else { return };
    burnc_fuzz::compile(model.graph);
});
