//! Fuzz the ONNX frontend: any bytes must decode to a model or a clean error, and a model that
//! decodes must survive the passes (and a small interpreter run) without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = burnc_frontends::onnx::load_bytes(bytes::Bytes::copy_from_slice(data), None) else { return };
    let mut g = model.graph;
    let _ = burnc_compiler::passes::prepare(&mut g);
});
