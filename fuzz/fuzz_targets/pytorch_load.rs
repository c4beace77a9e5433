//! Fuzz the PyTorch checkpoint reader: any bytes must read to tensors or a clean error. Seed it
//! with tests/data/pytorch/*.pt (the zip's CRCs shield the pickle: also seed raw data.pkl
//! records wrapped by a fresh archive, as the unit tests do).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = burnc_frontends::pytorch::parse(bytes::Bytes::copy_from_slice(data));
});
