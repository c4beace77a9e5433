//! The legacy (before torch 1.6, or `_use_new_zipfile_serialization=False`) format: five
//! pickles in a row — magic number, protocol version, system info, the object (storages as
//! persistent ids `('storage', type, key, location, numel, view)`), the list of storage keys —
//! then each listed storage as an 8-byte element count and its raw bytes.
use super::pickle::{self, Heap, Obj, Value};
use super::tensor::{storage_dtype, Collector};
use super::{pickle_err, PytorchError};
use crate::safetensors::SafeTensors;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};

/// The magic number torch writes first, as LONG1's little-endian bytes (0x1950a86a20f9469cfc6c).
pub const MAGIC: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
const PROTOCOL_VERSION: i64 = 1001;

fn bad(reason: impl Into<String>) -> PytorchError {
    PytorchError::Legacy(reason.into())
}

/// Whether `head` starts a legacy file: PROTO n, LONG1 of 10 bytes, the magic.
pub fn sniff(head: &[u8]) -> bool {
    head.len() >= 14 && head[0] == 0x80 && head[2] == 0x8a && head[3] == 10 && head[4..14] == MAGIC
}

fn run(bytes: &[u8], at: usize, what: &str) -> Result<(Value, Heap, usize), PytorchError> {
    pickle::load(bytes, at).map_err(|e| pickle_err(&format!("legacy file, {what} pickle"), e))
}

pub fn parse(bytes: Bytes) -> Result<SafeTensors, PytorchError> {
    let (magic, _, at) = run(&bytes, 0, "magic number")?;
    if !matches!(&magic, Value::BigInt(b) if **b == MAGIC) {
        return Err(bad("bad magic number"));
    }
    let (version, _, at) = run(&bytes, at, "protocol version")?;
    if version != Value::Int(PROTOCOL_VERSION) {
        return Err(bad(format!("protocol version {version:?}, expected {PROTOCOL_VERSION}")));
    }
    let (info, info_heap, at) = run(&bytes, at, "system info")?;
    let big_endian = match info_heap.get(&info) {
        Some(Obj::Dict(kv)) => kv.iter().any(|(k, v)| *k == Value::Str("little_endian".into()) && *v == Value::Bool(false)),
        _ => return Err(bad("the system info is not a dict")),
    };
    let (root, heap, at) = run(&bytes, at, "object")?;
    let (keys, keys_heap, mut at) = run(&bytes, at, "storage keys")?;
    let keys = keys_heap.seq(&keys).ok_or_else(|| bad("the storage key list is not a list"))?;

    // Each storage's element size comes from the object's references to it.
    let mut elem: HashMap<String, usize> = HashMap::new();
    for o in &heap.objs {
        if let Obj::Persistent(pid) = o {
            if let Some([_, ty, Value::Str(k), ..]) = heap.seq(pid) {
                if let Some(d) = heap.global(ty).and_then(|(_, n)| storage_dtype(n)) {
                    elem.insert(k.to_string(), d.bits() / 8);
                }
            }
        }
    }
    let mut storages: HashMap<String, Bytes> = HashMap::new();
    for k in keys {
        let Value::Str(k) = k else { return Err(bad(format!("storage key {k:?} is not a string"))) };
        let e = *elem.get(&**k).ok_or_else(|| bad(format!("storage `{k}` is listed but no tensor uses it (or its type is unsupported)")))?;
        let count = bytes.get(at..at + 8).ok_or_else(|| bad(format!("storage `{k}`: file ends at byte {} before its element count", bytes.len())))?;
        let mut c = [0u8; 8];
        c.copy_from_slice(count);
        let n = if big_endian { u64::from_be_bytes(c) } else { u64::from_le_bytes(c) };
        let len = usize::try_from(n).ok().and_then(|n| n.checked_mul(e)).filter(|&l| l <= bytes.len() - at - 8);
        let len = len.ok_or_else(|| bad(format!("storage `{k}`: {n} elements at byte {at} run past the end of the file ({} bytes)", bytes.len())))?;
        storages.insert(k.to_string(), bytes.slice(at + 8..at + 8 + len));
        at += 8 + len;
    }
    let lookup = |k: &str| storages.get(k).cloned().ok_or_else(|| format!("storage `{k}` is not in the file's storage list"));
    let mut c = Collector::new(&heap, &lookup, big_endian);
    c.walk(&root, "")?;
    Ok(SafeTensors { tensors: std::mem::take(&mut c.out), metadata: BTreeMap::new() })
}
