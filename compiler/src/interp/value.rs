//! Run-time values: tensors, and the sequences and optionals ONNX also passes around.
use crate::ir::DType;
use crate::tensor::Tensor;

#[derive(Debug, Clone, PartialEq)]
pub enum RtValue {
    Tensor(Tensor),
    /// Items and element type (known even when empty).
    Sequence(Vec<Tensor>, Option<DType>),
    Optional(Option<Box<RtValue>>),
}

impl RtValue {
    pub fn as_tensor(&self) -> Result<&Tensor, String> {
        match self {
            RtValue::Tensor(t) => Ok(t),
            RtValue::Sequence(..) => Err("expected a tensor, got a sequence".into()),
            RtValue::Optional(_) => Err("expected a tensor, got an optional".into()),
        }
    }

    pub fn into_tensor(self) -> Result<Tensor, String> {
        match self {
            RtValue::Tensor(t) => Ok(t),
            RtValue::Sequence(..) => Err("expected a tensor, got a sequence".into()),
            RtValue::Optional(_) => Err("expected a tensor, got an optional".into()),
        }
    }
}
