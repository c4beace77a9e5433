//! Reading input values from `.pb` (TensorProto / SequenceProto / OptionalProto) and `.npy`.
use super::CliError;
use burnc_compiler::interp::RtValue;
use burnc_compiler::ir::{Dim, Graph, Shape, TensorType, ValueType};
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};
use std::path::Path;

pub fn read_value(path: &Path, declared: &ValueType) -> Result<RtValue, CliError> {
    let bytes = std::fs::read(path).map_err(|e| CliError::File { path: path.display().to_string(), reason: e.to_string() })?;
    let file_err = |reason: String| CliError::File { path: path.display().to_string(), reason };
    if path.extension().is_some_and(|e| e == "npy") {
        let t = burnc_frontends::npy::parse(&bytes).map_err(|e| file_err(e.to_string()))?;
        return Ok(RtValue::Tensor(t));
    }
    let hint = match declared {
        ValueType::Sequence(_) => ValueKindHint::Sequence,
        ValueType::Optional(_) => ValueKindHint::Optional,
        _ => ValueKindHint::Tensor,
    };
    decode_value(&bytes, hint).map_err(|e| file_err(e.to_string()))
}

/// Parse `1x3x224x224` (a dim may be `?`-free only).
pub fn parse_dims(s: &str) -> Result<Vec<usize>, CliError> {
    if s.is_empty() {
        return Ok(vec![]);
    }
    s.split(['x', 'X', ','])
        .map(|d| d.trim().parse::<usize>().map_err(|_| CliError::Usage(format!("bad dimension `{d}` in `{s}`"))))
        .collect()
}

/// Apply `--input NAME=DIMS` pins to a graph's input types.
pub fn pin_inputs(graph: &mut Graph, pins: &[String]) -> Result<(), CliError> {
    for pin in pins {
        let (name, dims) = pin.split_once('=').ok_or_else(|| CliError::Usage(format!("expected NAME=DIMS, got `{pin}`")))?;
        let dims = parse_dims(dims)?;
        let id = graph
            .inputs
            .iter()
            .copied()
            .find(|&i| graph.value(i).name == name)
            .ok_or_else(|| CliError::Usage(format!("the model has no input named `{name}`")))?;
        let v = graph.value_mut(id);
        let dtype = match &v.ty {
            ValueType::Tensor(t) => t.dtype,
            _ => return Err(CliError::Usage(format!("input `{name}` is not a tensor"))),
        };
        if let ValueType::Tensor(TensorType { shape: Some(old), .. }) = &v.ty {
            if old.rank() != dims.len() {
                return Err(CliError::Usage(format!("input `{name}` has rank {}, the pin gives {}", old.rank(), dims.len())));
            }
            for (o, &d) in old.0.iter().zip(&dims) {
                if let Dim::Fixed(f) = o {
                    if *f != d {
                        return Err(CliError::Usage(format!("input `{name}` has fixed shape {old}, the pin gives {dims:?}")));
                    }
                }
            }
        }
        v.ty = ValueType::Tensor(TensorType { dtype, shape: Some(Shape::fixed(&dims)) });
    }
    Ok(())
}
