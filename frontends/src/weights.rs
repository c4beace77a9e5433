//! `--weights FILE`: read a weights file into the tensor table [`crate::safetensors::apply`]
//! maps onto a graph, picking the reader by the file's content (not its name): a zip archive or
//! the legacy pickle magic is a PyTorch checkpoint, anything else is read as safetensors.
use crate::pytorch::{self, PytorchError};
use crate::safetensors::{self, SafeTensors, SafetensorsError};
use std::io::Read;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum WeightsError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(transparent)]
    Safetensors(#[from] SafetensorsError),
    #[error(transparent)]
    Pytorch(#[from] PytorchError),
    /// Neither format: names both so the user knows what was expected.
    #[error("not a weights file burnc reads: neither a safetensors file (an 8-byte header length, then a JSON header) nor a PyTorch checkpoint (a zip archive from torch.save, or the legacy pickle format); as safetensors: {0}")]
    Unrecognised(SafetensorsError),
}

/// The file's format, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Safetensors,
    Pytorch,
}

/// PyTorch when `head` starts like a checkpoint, else safetensors.
pub fn sniff(head: &[u8]) -> Format {
    if pytorch::sniff(head) {
        Format::Pytorch
    } else {
        Format::Safetensors
    }
}

/// Read `path` with the reader its content calls for.
pub fn load(path: &Path) -> Result<SafeTensors, WeightsError> {
    let io = |source| WeightsError::Io { path: path.display().to_string(), source };
    let mut head = Vec::with_capacity(16);
    std::fs::File::open(path).map_err(io)?.take(16).read_to_end(&mut head).map_err(io)?;
    match sniff(&head) {
        Format::Pytorch => pytorch::load(path).map_err(|e| match e {
            PytorchError::Io { path, source } => WeightsError::Io { path, source },
            e => e.into(),
        }),
        Format::Safetensors => safetensors::load(path).map_err(|e| match e {
            SafetensorsError::Io { path, source } => WeightsError::Io { path, source },
            // A safetensors header is JSON from byte 8: without it the file is neither format.
            e if head.get(8) != Some(&b'{') => WeightsError::Unrecognised(e),
            e => e.into(),
        }),
    }
}
