//! TensorProto <-> IR tensors and parameters, in every encoding ONNX allows.
use super::proto::TensorProto;
use super::OnnxError;
use burnc_compiler::ir::{onnx_code_name, DType, Param};
use burnc_compiler::{Data, Tensor};
use bytes::Bytes;
use half::{bf16, f16};
use std::path::Path;

fn err(name: &str, reason: impl Into<String>) -> OnnxError {
    OnnxError::Tensor { name: name.to_string(), reason: reason.into() }
}

pub fn tensor_dtype(t: &TensorProto) -> Result<DType, OnnxError> {
    let code = t.data_type.unwrap_or(0);
    DType::from_onnx_code(code).ok_or_else(|| {
        err(t.name(), format!("element type {} ({code}) is not supported", onnx_code_name(code)))
    })
}

pub fn tensor_shape(t: &TensorProto) -> Result<Vec<usize>, OnnxError> {
    t.dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| err(t.name(), format!("negative dimension {d}"))))
        .collect()
}

fn checked_numel(name: &str, shape: &[usize]) -> Result<usize, OnnxError> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= (1usize << 40))
        .ok_or_else(|| err(name, format!("dims {shape:?} overflow")))
}

/// Read a tensor as a parameter: raw and external bytes are kept by reference (no copy); typed
/// fields are encoded to little-endian bytes once.
pub fn to_param(t: &TensorProto, model_dir: Option<&Path>) -> Result<Param, OnnxError> {
    let dtype = tensor_dtype(t)?;
    let shape = tensor_shape(t)?;
    let n = checked_numel(t.name(), &shape)?;
    if dtype == DType::Str {
        return Ok(Param { dtype, shape, bytes: Bytes::from(strings(t, n)?.to_packed()) });
    }
    let bytes = if t.data_location == Some(1) {
        read_external(t, model_dir)?
    } else if let Some(raw) = &t.raw_data {
        raw.clone()
    } else {
        Bytes::from(typed_fields(t, dtype, n)?.to_packed())
    };
    if bytes.len() != dtype.packed_bytes(n) {
        return Err(err(
            t.name(),
            format!("holds {} bytes but dims {:?} of {} need {}", bytes.len(), shape, dtype, dtype.packed_bytes(n)),
        ));
    }
    Ok(Param { dtype, shape, bytes })
}

/// Decode a tensor into an owned IR tensor.
pub fn to_tensor(t: &TensorProto, model_dir: Option<&Path>) -> Result<Tensor, OnnxError> {
    let p = to_param(t, model_dir)?;
    p.to_tensor().ok_or_else(|| err(t.name(), "inconsistent byte length"))
}

/// A string tensor's elements: `string_data` only (ONNX allows neither raw nor external data
/// for strings), each valid UTF-8.
fn strings(t: &TensorProto, n: usize) -> Result<Data, OnnxError> {
    let name = t.name();
    if t.raw_data.is_some() || t.data_location == Some(1) {
        return Err(err(name, "a string tensor must keep its elements in string_data"));
    }
    if t.string_data.len() != n {
        return Err(err(name, format!("holds {} strings but its dims need {n}", t.string_data.len())));
    }
    let v = t.string_data.iter().enumerate().map(|(i, b)| {
        String::from_utf8(b.to_vec()).map_err(|_| err(name, format!("string #{i} is not UTF-8")))
    });
    Ok(Data::Str(v.collect::<Result<_, _>>()?))
}

fn typed_fields(t: &TensorProto, dtype: DType, n: usize) -> Result<Data, OnnxError> {
    let name = t.name();
    let check = |len: usize| -> Result<(), OnnxError> {
        if len == n {
            Ok(())
        } else {
            Err(err(name, format!("holds {len} values but its dims need {n}")))
        }
    };
    // ONNX stores small types widened into int32_data (f16/bf16/f8 as raw bit patterns).
    let data = match dtype {
        DType::F32 => {
            check(t.float_data.len())?;
            Data::F32(t.float_data.clone())
        }
        DType::F64 => {
            check(t.double_data.len())?;
            Data::F64(t.double_data.clone())
        }
        DType::I64 => {
            check(t.int64_data.len())?;
            Data::I64(t.int64_data.clone())
        }
        DType::U32 | DType::U64 => {
            check(t.uint64_data.len())?;
            if dtype == DType::U32 {
                Data::U32(t.uint64_data.iter().map(|&v| v as u32).collect())
            } else {
                Data::U64(t.uint64_data.clone())
            }
        }
        // Sub-byte types keep their packed bytes in int32_data, one byte per entry.
        d if d.bits() < 8 => {
            let len = t.int32_data.len();
            if len != d.packed_bytes(n) {
                return Err(err(name, format!("holds {len} packed bytes but its dims need {}", d.packed_bytes(n))));
            }
            let packed: Vec<u8> = t.int32_data.iter().map(|&x| x as u8).collect();
            Data::from_packed(d, &packed, n).ok_or_else(|| err(name, "inconsistent packed length"))?
        }
        _ => {
            check(t.int32_data.len())?;
            let v = &t.int32_data;
            match dtype {
                DType::I32 => Data::I32(v.clone()),
                DType::I16 => Data::I16(v.iter().map(|&x| x as i16).collect()),
                DType::I8 => Data::I8(v.iter().map(|&x| x as i8).collect()),
                DType::U16 => Data::U16(v.iter().map(|&x| x as u16).collect()),
                DType::U8 => Data::U8(v.iter().map(|&x| x as u8).collect()),
                DType::Bool => Data::Bool(v.iter().map(|&x| x != 0).collect()),
                DType::F16 => Data::F16(v.iter().map(|&x| f16::from_bits(x as u16)).collect()),
                DType::BF16 => Data::BF16(v.iter().map(|&x| bf16::from_bits(x as u16)).collect()),
                d => Data::F8(d, v.iter().map(|&x| x as u8).collect()),
            }
        }
    };
    Ok(data)
}

/// Bytes of an externally stored tensor. The location must stay inside the model's folder.
fn read_external(t: &TensorProto, model_dir: Option<&Path>) -> Result<Bytes, OnnxError> {
    let name = t.name();
    let mut location = None;
    let mut offset = 0usize;
    let mut length = None;
    for e in &t.external_data {
        let v = e.value();
        match e.key() {
            "location" => location = Some(v.to_string()),
            "offset" => offset = v.parse().map_err(|_| err(name, format!("bad external offset `{v}`")))?,
            "length" => length = Some(v.parse::<usize>().map_err(|_| err(name, format!("bad external length `{v}`")))?),
            _ => {}
        }
    }
    let location = location.ok_or_else(|| err(name, "external data without a location"))?;
    let dir = model_dir.ok_or_else(|| err(name, "external data needs the model's folder (load from a file)"))?;
    let rel = Path::new(&location);
    let escapes = rel.is_absolute()
        || rel.components().any(|c| !matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
    if escapes {
        return Err(err(name, format!("external data location `{location}` leaves the model's folder")));
    }
    let path = dir.join(rel);
    let canon_dir = dir.canonicalize().map_err(|e| err(name, format!("{}: {e}", dir.display())))?;
    let canon = path.canonicalize().map_err(|e| err(name, format!("external data `{}`: {e}", path.display())))?;
    if !canon.starts_with(&canon_dir) {
        return Err(err(name, format!("external data location `{location}` leaves the model's folder")));
    }
    // Only regular files: opening a FIFO blocks until someone writes, a device never ends.
    let file = super::open_regular(&canon).map_err(|e| err(name, format!("external data `{}`: {e}", path.display())))?;
    // SAFETY: the map is read-only; a file changed under us while compiling gives wrong
    // weights, not memory unsafety beyond what every mmap-based loader accepts.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| err(name, format!("mmap {}: {e}", path.display())))?;
    let all = Bytes::from_owner(map);
    let end = match length {
        Some(l) => offset.checked_add(l),
        None => Some(all.len()),
    };
    match end {
        Some(end) if offset <= end && end <= all.len() => Ok(all.slice(offset..end)),
        _ => Err(err(name, format!("external data range {offset}..{end:?} is outside the {} byte file", all.len()))),
    }
}

/// Encode an IR tensor as a TensorProto (raw_data, little-endian).
pub fn from_tensor(name: &str, t: &Tensor) -> TensorProto {
    if let Data::Str(v) = &t.data {
        return TensorProto {
            dims: t.shape.iter().map(|&d| d as i64).collect(),
            data_type: Some(t.dtype().onnx_code()),
            name: Some(name.to_string()),
            string_data: v.iter().map(|s| Bytes::from(s.clone().into_bytes())).collect(),
            ..Default::default()
        };
    }
    TensorProto {
        dims: t.shape.iter().map(|&d| d as i64).collect(),
        data_type: Some(t.dtype().onnx_code()),
        name: Some(name.to_string()),
        raw_data: Some(Bytes::from(t.data.to_packed())),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::proto::StringStringEntryProto;

    fn external(location: &str, offset: Option<usize>, length: Option<usize>) -> TensorProto {
        let kv = |k: &str, v: String| StringStringEntryProto { key: Some(k.into()), value: Some(v) };
        let mut ext = vec![kv("location", location.into())];
        if let Some(o) = offset {
            ext.push(kv("offset", o.to_string()));
        }
        if let Some(l) = length {
            ext.push(kv("length", l.to_string()));
        }
        TensorProto {
            name: Some("w".into()),
            dims: vec![2],
            data_type: Some(1),
            data_location: Some(1),
            external_data: ext,
            ..Default::default()
        }
    }

    #[test]
    fn every_encoding_decodes() {
        let raw = TensorProto {
            dims: vec![2],
            data_type: Some(1),
            raw_data: Some(Bytes::from([1.5f32.to_le_bytes(), (-2f32).to_le_bytes()].concat())),
            ..Default::default()
        };
        let typed = TensorProto { dims: vec![2], data_type: Some(1), float_data: vec![1.5, -2.0], ..Default::default() };
        let f16s = TensorProto {
            dims: vec![2],
            data_type: Some(10),
            int32_data: vec![f16::from_f32(1.5).to_bits() as i32, f16::from_f32(-2.0).to_bits() as i32],
            ..Default::default()
        };
        for t in [&raw, &typed] {
            assert_eq!(to_tensor(t, None).unwrap().data, Data::F32(vec![1.5, -2.0]));
        }
        assert_eq!(to_tensor(&f16s, None).unwrap().to_f64_vec(), vec![1.5, -2.0]);
        let short = TensorProto { dims: vec![3], data_type: Some(1), float_data: vec![1.0], ..Default::default() };
        assert!(to_tensor(&short, None).is_err());
    }

    #[test]
    fn external_data_inside_the_folder_loads() {
        let dir = std::env::temp_dir().join(format!("burnc-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = [0u8; 4].iter().copied().chain(3f32.to_le_bytes()).chain(4f32.to_le_bytes()).collect::<Vec<_>>();
        std::fs::write(dir.join("w.bin"), bytes).unwrap();
        let t = to_tensor(&external("w.bin", Some(4), Some(8)), Some(&dir)).unwrap();
        assert_eq!(t.data, Data::F32(vec![3.0, 4.0]));
        // Range past the end of the file.
        assert!(to_tensor(&external("w.bin", Some(8), Some(8)), Some(&dir)).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn external_data_leaving_the_folder_is_refused() {
        let dir = std::env::temp_dir();
        for loc in ["../etc/passwd", "/etc/passwd", "a/../../b"] {
            let e = to_param(&external(loc, None, None), Some(&dir)).unwrap_err().to_string();
            assert!(e.contains("leaves the model's folder"), "{loc}: {e}");
        }
    }
}
