//! Run-time values in ONNX files: TensorProto, SequenceProto and OptionalProto (`.pb` inputs
//! and outputs of `burnc run` and the conformance suite).
use super::proto::{OptionalProto, SequenceProto, TensorProto};
use super::{tensor, OnnxError};
use burnc_compiler::interp::RtValue;
use bytes::Bytes;
use prost::Message;

/// Decode a `.pb` file holding a TensorProto, SequenceProto or OptionalProto. The file does
/// not say which, so `hint` (from the graph's declared type) picks; with no hint, TensorProto.
pub fn decode_value(bytes: &[u8], hint: ValueKindHint) -> Result<RtValue, OnnxError> {
    let bytes = Bytes::copy_from_slice(bytes);
    match hint {
        ValueKindHint::Tensor => {
            let t = TensorProto::decode(bytes)?;
            Ok(RtValue::Tensor(tensor::to_tensor(&t, None)?))
        }
        ValueKindHint::Sequence => seq_value(&SequenceProto::decode(bytes)?),
        ValueKindHint::Optional => opt_value(&OptionalProto::decode(bytes)?),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKindHint {
    Tensor,
    Sequence,
    Optional,
}

fn seq_value(s: &SequenceProto) -> Result<RtValue, OnnxError> {
    let mut items = Vec::new();
    for t in &s.tensor_values {
        items.push(tensor::to_tensor(t, None)?);
    }
    if !s.sequence_values.is_empty() || !s.map_values.is_empty() || !s.optional_values.is_empty() {
        return Err(OnnxError::Tensor { name: s.name().into(), reason: "sequences of non-tensors are not supported".into() });
    }
    let dtype = s.elem_type.and_then(|_| items.first().map(|t| t.dtype()));
    Ok(RtValue::Sequence(items, dtype))
}

fn opt_value(o: &OptionalProto) -> Result<RtValue, OnnxError> {
    if let Some(t) = &o.tensor_value {
        return Ok(RtValue::Optional(Some(Box::new(RtValue::Tensor(tensor::to_tensor(t, None)?)))));
    }
    if let Some(s) = &o.sequence_value {
        return Ok(RtValue::Optional(Some(Box::new(seq_value(s)?))));
    }
    Ok(RtValue::Optional(None))
}

/// Encode a run-time value for writing as `output_<i>.pb`.
pub fn encode_value(name: &str, v: &RtValue) -> Vec<u8> {
    match v {
        RtValue::Tensor(t) => tensor::from_tensor(name, t).encode_to_vec(),
        RtValue::Sequence(items, _) => seq_proto(name, items).encode_to_vec(),
        RtValue::Optional(inner) => {
            let mut o = OptionalProto { name: Some(name.into()), ..Default::default() };
            match inner.as_deref() {
                Some(RtValue::Tensor(t)) => {
                    o.elem_type = Some(1);
                    o.tensor_value = Some(tensor::from_tensor(name, t));
                }
                Some(RtValue::Sequence(items, _)) => {
                    o.elem_type = Some(2);
                    o.sequence_value = Some(seq_proto(name, items));
                }
                _ => o.elem_type = Some(0),
            }
            o.encode_to_vec()
        }
    }
}

fn seq_proto(name: &str, items: &[burnc_compiler::Tensor]) -> SequenceProto {
    SequenceProto {
        name: Some(name.into()),
        elem_type: Some(1),
        tensor_values: items.iter().map(|t| tensor::from_tensor("", t)).collect(),
        ..Default::default()
    }
}
