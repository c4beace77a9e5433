//! The safetensors frontend: read a `.safetensors` weights file memory-mapped and put its tensors
//! in place of a graph's parameters (`burnc model.onnx --weights w.safetensors`).
//!
//! Format (<https://github.com/huggingface/safetensors>): an 8-byte little-endian header length N,
//! N bytes of JSON `{"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..,
//! "__metadata__": {"k": "v"}}`, then the data buffer the offsets index (relative to its start).
//! The buffer must be covered exactly: no holes, no overlaps, each tensor's byte length equal to
//! its element count times its dtype size.
mod apply;
mod convert;
pub(crate) mod json;
mod rename;
#[cfg(test)]
mod tests;

use burnc_compiler::ir::DType;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::path::Path;
use thiserror::Error;

pub use apply::{apply, Applied, Mismatch, WeightsOptions};
pub use rename::Rename;

#[derive(Debug, Error)]
pub enum SafetensorsError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// The file is truncated or its header is inconsistent.
    #[error("corrupt safetensors file: {0}")]
    Corrupt(String),
    /// Keys and parameters that do not line up; every problem is listed.
    #[error("{0}")]
    Mismatch(Box<Mismatch>),
    /// A `--rename` rule that cannot be used.
    #[error("bad rename `{rule}`: {reason}")]
    BadRename { rule: String, reason: String },
}

fn corrupt(reason: impl Into<String>) -> SafetensorsError {
    SafetensorsError::Corrupt(reason.into())
}

/// One tensor of the file; `bytes` is a slice of the file's bytes (no copy).
#[derive(Debug, Clone)]
pub struct TensorEntry {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Bytes,
}

/// A parsed safetensors file.
#[derive(Debug, Clone)]
pub struct SafeTensors {
    /// Tensors by key, sorted (so error lists and iteration are deterministic).
    pub tensors: BTreeMap<String, TensorEntry>,
    /// The optional `__metadata__` string map.
    pub metadata: BTreeMap<String, String>,
}

/// A header larger than this is refused before it is read: real headers are kilobytes to a few
/// megabytes, and the limit keeps a corrupt length from driving a huge parse (the reference
/// implementation uses the same 100 MB bound).
const MAX_HEADER: u64 = 100_000_000;

/// Memory-map and parse `path`; tensors keep slices of the map.
pub fn load(path: &Path) -> Result<SafeTensors, SafetensorsError> {
    let io = |source| SafetensorsError::Io { path: path.display().to_string(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: a read-only map of a file the user named; as with the ONNX frontend, the file must
    // not be truncated by another process while the compiler runs.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    parse(Bytes::from_owner(map))
}

/// The safetensors dtype name for `d`, where the format has one.
pub fn dtype_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F64 => "F64",
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I64 => "I64",
        DType::I32 => "I32",
        DType::I16 => "I16",
        DType::I8 => "I8",
        DType::U64 => "U64",
        DType::U32 => "U32",
        DType::U16 => "U16",
        DType::U8 => "U8",
        DType::Bool => "BOOL",
        DType::F8E4M3FN => "F8_E4M3",
        DType::F8E5M2 => "F8_E5M2",
        _ => return None,
    })
}

fn parse_dtype(s: &str) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| dtype_name(d) == Some(s))
}

/// Parse a whole file held in `bytes`.
pub fn parse(bytes: Bytes) -> Result<SafeTensors, SafetensorsError> {
    let len_bytes: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt(format!("{} bytes: too short for the 8-byte header length", bytes.len())))?;
    let n = u64::from_le_bytes(len_bytes);
    if n > MAX_HEADER {
        return Err(corrupt(format!("header length {n} is over the {MAX_HEADER}-byte limit")));
    }
    let header_end = 8 + n as usize;
    if header_end > bytes.len() {
        return Err(corrupt(format!("header length {n} runs past the end of the file ({} bytes)", bytes.len())));
    }
    let text = std::str::from_utf8(&bytes[8..header_end]).map_err(|e| corrupt(format!("header is not UTF-8: {e}")))?;
    let root = json::parse(text).map_err(|e| corrupt(format!("header: {e}")))?;
    let json::Json::Obj(members) = root else {
        return Err(corrupt(format!("header is {}, not an object", root.kind())));
    };
    let data = bytes.slice(header_end..);
    let mut out = SafeTensors { tensors: BTreeMap::new(), metadata: BTreeMap::new() };
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    for (key, v) in members {
        if key == "__metadata__" {
            out.metadata = metadata(&v)?;
            continue;
        }
        let (entry, begin, end) = tensor_entry(&key, &v, &data)?;
        spans.push((begin, end, key.clone()));
        out.tensors.insert(key, entry);
    }
    check_coverage(&mut spans, data.len())?;
    Ok(out)
}

fn metadata(v: &json::Json) -> Result<BTreeMap<String, String>, SafetensorsError> {
    let json::Json::Obj(m) = v else {
        return Err(corrupt(format!("__metadata__ is {}, not an object", v.kind())));
    };
    m.iter()
        .map(|(k, v)| match v {
            json::Json::Str(s) => Ok((k.clone(), s.clone())),
            other => Err(corrupt(format!("__metadata__ `{k}` is {}, not a string", other.kind()))),
        })
        .collect()
}

/// One header entry: check it against the data buffer and slice its bytes.
fn tensor_entry(key: &str, v: &json::Json, data: &Bytes) -> Result<(TensorEntry, usize, usize), SafetensorsError> {
    let bad = |reason: String| corrupt(format!("tensor `{key}`: {reason}"));
    let json::Json::Obj(fields) = v else {
        return Err(bad(format!("entry is {}, not an object", v.kind())));
    };
    let field = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v).ok_or_else(|| bad(format!("no `{name}`")));
    let dtype = match field("dtype")? {
        json::Json::Str(s) => parse_dtype(s).ok_or_else(|| bad(format!("unsupported dtype `{s}`")))?,
        other => return Err(bad(format!("dtype is {}", other.kind()))),
    };
    let ints = |name: &str| -> Result<Vec<u64>, SafetensorsError> {
        match field(name)? {
            json::Json::Arr(items) => items.iter().map(|i| i.as_u64().ok_or_else(|| bad(format!("`{name}` holds {}, not a non-negative integer", i.kind())))).collect(),
            other => Err(bad(format!("`{name}` is {}, not an array", other.kind()))),
        }
    };
    let shape = ints("shape")?.into_iter().map(|d| usize::try_from(d).map_err(|_| bad(format!("dimension {d} is too large")))).collect::<Result<Vec<_>, _>>()?;
    let offsets = ints("data_offsets")?;
    let [begin, end] = offsets[..] else {
        return Err(bad(format!("data_offsets has {} values, not 2", offsets.len())));
    };
    let (begin, end) = (begin as usize, end as usize);
    if begin > end || end > data.len() {
        return Err(bad(format!("data_offsets [{begin}, {end}] out of range of the {}-byte data buffer", data.len())));
    }
    let want = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(dtype.bits() / 8))
        .ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
    if end - begin != want {
        return Err(bad(format!("{} bytes of data, but {} {shape:?} takes {want}", end - begin, dtype_name(dtype).unwrap_or("?"))));
    }
    Ok((TensorEntry { dtype, shape, bytes: data.slice(begin..end) }, begin, end))
}

/// The tensors must tile the data buffer: sorted by offset, each starts where the previous ended
/// and the last ends at the end of the file.
fn check_coverage(spans: &mut [(usize, usize, String)], len: usize) -> Result<(), SafetensorsError> {
    spans.sort();
    let mut at = 0;
    for (begin, end, key) in spans.iter() {
        if *begin < at {
            return Err(corrupt(format!("tensor `{key}` (bytes {begin}..{end}) overlaps the tensor before it (ending at {at})")));
        }
        if *begin > at {
            return Err(corrupt(format!("bytes {at}..{begin} of the data buffer belong to no tensor (before `{key}`)")));
        }
        at = *end;
    }
    if at != len {
        return Err(corrupt(format!("bytes {at}..{len} at the end of the file belong to no tensor")));
    }
    Ok(())
}

/// Write a safetensors file (tests, and tools that export weights): tensors in the given order,
/// header padded with spaces to a multiple of 8 bytes as the reference writer does.
pub fn serialize(tensors: &[(&str, DType, &[usize], &[u8])]) -> Vec<u8> {
    let mut header = String::from("{");
    let mut at = 0usize;
    for (i, (name, dtype, shape, data)) in tensors.iter().enumerate() {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let name: String = name.chars().flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c => vec![c],
        }).collect();
        let sep = if i == 0 { "" } else { "," };
        header += &format!(r#"{sep}"{name}":{{"dtype":"{}","shape":[{}],"data_offsets":[{at},{}]}}"#, dtype_name(*dtype).unwrap_or("?"), dims.join(","), at + data.len());
        at += data.len();
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    for (_, _, _, data) in tensors {
        out.extend_from_slice(data);
    }
    out
}
