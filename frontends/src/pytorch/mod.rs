//! The PyTorch frontend: read a `torch.save` checkpoint (`.pt`/`.pth`) in Rust — no Python —
//! into the same tensor table the safetensors reader fills, so `--weights model.pt` maps,
//! renames, converts and reports mismatches exactly as a `.safetensors` file does.
//!
//! Format: since torch 1.6 a zip archive (`<archive>/data.pkl`, a pickle of the object with each
//! storage as a persistent id; `<archive>/data/<key>`, each storage's raw bytes;
//! `<archive>/byteorder`). Before, a sequence of pickles followed by the raw storages
//! ([`legacy`]). Tensors are views (offset, size, stride) of storages and are materialised
//! contiguous; tensors nested in dicts get dotted keys (`{"model": {"fc.weight": T}}` →
//! `model.fc.weight`); anything that is not a tensor (epoch, optimizer state, strings) is
//! skipped.
mod legacy;
mod pickle;
mod tensor;
#[cfg(test)]
mod tests;
mod write;
mod zip;

use crate::safetensors::SafeTensors;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::path::Path;
use thiserror::Error;

pub use write::serialize;

#[derive(Debug, Error)]
pub enum PytorchError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// Neither a zip archive nor a legacy pickle stream.
    #[error("not a PyTorch checkpoint: it starts with neither a zip header (PK\\x03\\x04) nor the legacy pickle magic number")]
    NotPytorch,
    #[error("corrupt PyTorch zip archive: {0}")]
    Zip(String),
    #[error("the PyTorch archive has no `data.pkl` record (its records: {0})")]
    NoPickle(String),
    #[error("{entry}: unknown pickle opcode 0x{opcode:02x} at byte {offset}")]
    UnknownOpcode { entry: String, offset: usize, opcode: u8 },
    #[error("{entry}: bad pickle at byte {offset}: {reason}")]
    Pickle { entry: String, offset: usize, reason: String },
    #[error("tensor `{key}`: {reason}")]
    Tensor { key: String, reason: String },
    #[error("legacy-format PyTorch file: {0}")]
    Legacy(String),
}

fn pickle_err(entry: &str, e: pickle::PickleError) -> PytorchError {
    match e {
        pickle::PickleError::UnknownOpcode { offset, opcode } => PytorchError::UnknownOpcode { entry: entry.into(), offset, opcode },
        pickle::PickleError::Bad { offset, reason } => PytorchError::Pickle { entry: entry.into(), offset, reason },
    }
}

/// Whether `head` (the file's first bytes) is a PyTorch checkpoint: a zip archive, or the
/// legacy format's first pickle.
pub fn sniff(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || legacy::sniff(head)
}

/// Memory-map and read `path`; contiguous tensors keep slices of the map.
pub fn load(path: &Path) -> Result<SafeTensors, PytorchError> {
    let io = |source| PytorchError::Io { path: path.display().to_string(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: a read-only map of a file the user named; as with the other frontends, the file
    // must not be truncated by another process while the compiler runs.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    parse(Bytes::from_owner(map))
}

/// Read a whole checkpoint held in `bytes`.
pub fn parse(bytes: Bytes) -> Result<SafeTensors, PytorchError> {
    if legacy::sniff(&bytes) {
        return legacy::parse(bytes);
    }
    if !bytes.starts_with(b"PK\x03\x04") {
        return Err(PytorchError::NotPytorch);
    }
    let entries = zip::entries(&bytes).map_err(PytorchError::Zip)?;
    // torch puts every record under one folder named after the file; data.pkl is in it.
    // A hand-made archive may put it at the root: then the prefix is empty.
    let prefix = entries.first().and_then(|e| e.name.split_once('/')).map(|(p, _)| format!("{p}/")).unwrap_or_default();
    let find = |name: &str| entries.iter().find(|e| e.name == format!("{prefix}{name}"));
    let pkl = find("data.pkl").ok_or_else(|| {
        let names: Vec<&str> = entries.iter().take(10).map(|e| e.name.as_str()).collect();
        PytorchError::NoPickle(if names.is_empty() { "none".into() } else { names.join(", ") })
    })?;
    let big_endian = match find("byteorder").map(|e| e.data.as_ref()) {
        None | Some(b"little") => false,
        Some(b"big") => true,
        Some(other) => return Err(PytorchError::Zip(format!("{prefix}byteorder is {:?}, not `little` or `big`", String::from_utf8_lossy(other)))),
    };
    let (root, heap, _) = pickle::load(&pkl.data, 0).map_err(|e| pickle_err(&pkl.name, e))?;
    let records: BTreeMap<&str, &Bytes> = entries.iter().map(|e| (e.name.as_str(), &e.data)).collect();
    let lookup = |key: &str| {
        let name = format!("{prefix}data/{key}");
        records.get(name.as_str()).map(|b| (*b).clone()).ok_or_else(|| format!("storage record `{name}` is missing from the archive"))
    };
    let mut c = tensor::Collector::new(&heap, &lookup, big_endian);
    c.walk(&root, "")?;
    Ok(SafeTensors { tensors: std::mem::take(&mut c.out), metadata: BTreeMap::new() })
}
