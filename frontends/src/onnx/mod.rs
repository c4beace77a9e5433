//! The ONNX frontend: decode a ModelProto with prost, then lower its nodes onto burnc's core ops.
mod arity;
mod attrs;
mod contrib;
mod flex;
mod import;
mod lower;
mod ml;
mod nchwc;
mod rnn;
mod scan8;
mod training;
pub mod validate;
#[allow(clippy::all, missing_docs)]
pub mod proto;
pub mod tensor;
pub mod values;

use bytes::Bytes;
use burnc_compiler::ir::Graph;
use std::path::Path;
use thiserror::Error;

pub use import::import_model;

#[derive(Debug, Error)]
pub enum OnnxError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("malformed ONNX protobuf: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("the model has no graph")]
    NoGraph,
    #[error("node `{node}` ({op}, opset {opset}): {reason}")]
    Node { node: String, op: String, opset: i64, reason: String },
    #[error("node `{node}`: op {op} (domain `{domain}`, opset {opset}) is not supported")]
    UnsupportedOp { node: String, op: String, domain: String, opset: i64 },
    #[error("tensor `{name}`: {reason}")]
    Tensor { name: String, reason: String },
    #[error("value `{name}` used by node `{node}` is not defined by any input, initializer or node")]
    Undefined { node: String, name: String },
    #[error("graph {what}: {reason}")]
    Graph { what: String, reason: String },
}

/// A decoded model: its graph plus what the frontend learned about it.
#[derive(Debug)]
pub struct Model {
    pub graph: Graph,
    /// Opset of the default (ai.onnx) domain.
    pub opset: i64,
    pub ir_version: i64,
    pub producer: String,
}

/// Load an ONNX file. The file is memory-mapped; parameters keep slices of the map.
pub fn load(path: &Path) -> Result<Model, OnnxError> {
    let io = |source| OnnxError::Io { path: path.display().to_string(), source };
    let file = open_regular(path).map_err(io)?;
    // SAFETY: read-only map; see tensor::read_external.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    load_bytes(Bytes::from_owner(map), path.parent())
}

/// Decode a model from bytes; `model_dir` resolves external data (None refuses it).
pub fn load_bytes(bytes: Bytes, model_dir: Option<&Path>) -> Result<Model, OnnxError> {
    use prost::Message;
    let model = proto::ModelProto::decode(bytes)?;
    import_model(&model, model_dir)
}

/// Open `path` for reading if it is a regular file (after symlinks); a FIFO, socket or device
/// is refused without blocking (a FIFO's `open` waits for a writer, a device never ends).
pub(crate) fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        // Swapped for a FIFO between the check and the open: fail instead of waiting.
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc_o_nonblock());
    }
    let file = opts.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(file)
}

/// `O_NONBLOCK` (0o4000 on Linux and most Unixes; 0x4 on the BSDs and macOS).
#[cfg(unix)]
fn libc_o_nonblock() -> i32 {
    if cfg!(any(target_os = "macos", target_os = "ios", target_os = "freebsd", target_os = "openbsd", target_os = "netbsd", target_os = "dragonfly")) {
        0x4
    } else {
        0o4000
    }
}
