//! Fuzz the safetensors reader: any bytes must read to tensors or a clean error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = burnc_frontends::safetensors::parse(bytes::Bytes::copy_from_slice(data));
});
