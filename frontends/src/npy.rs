//! Reading and writing `.npy` files (numpy's format v1–v3), for `burnc run --input x.npy`.
use burnc_compiler::ir::DType;
use burnc_compiler::{Data, Tensor};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum NpyError {
    #[error("not a .npy file (bad magic)")]
    BadMagic,
    #[error("truncated .npy file")]
    Truncated,
    #[error("bad .npy header: {0}")]
    BadHeader(String),
    #[error("unsupported .npy dtype `{0}`")]
    UnsupportedDtype(String),
    #[error("Fortran-ordered .npy arrays are not supported")]
    FortranOrder,
}

fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k = format!("'{key}':");
    let start = header.find(&k)? + k.len();
    Some(header[start..].trim_start())
}

pub fn parse(bytes: &[u8]) -> Result<Tensor, NpyError> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(NpyError::BadMagic);
    }
    let major = bytes[6];
    let (hlen, hstart) = if major == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        if bytes.len() < 12 {
            return Err(NpyError::Truncated);
        }
        (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
    };
    let header = bytes.get(hstart..hstart + hlen).ok_or(NpyError::Truncated)?;
    let header = std::str::from_utf8(header).map_err(|_| NpyError::BadHeader("not UTF-8".into()))?;
    let descr = field(header, "descr").ok_or_else(|| NpyError::BadHeader("no descr".into()))?;
    let descr = descr.trim_start_matches('\'');
    let descr = &descr[..descr.find('\'').ok_or_else(|| NpyError::BadHeader("descr".into()))?];
    let fortran = field(header, "fortran_order").ok_or_else(|| NpyError::BadHeader("no fortran_order".into()))?;
    if fortran.starts_with("True") {
        return Err(NpyError::FortranOrder);
    }
    let shape = field(header, "shape").ok_or_else(|| NpyError::BadHeader("no shape".into()))?;
    let shape = &shape[1..shape.find(')').ok_or_else(|| NpyError::BadHeader("shape".into()))?];
    let shape: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| NpyError::BadHeader(format!("dim `{s}`"))))
        .collect::<Result<_, _>>()?;
    let (little, code) = match descr.as_bytes().first() {
        Some(b'<') | Some(b'|') | Some(b'=') => (true, &descr[1..]),
        Some(b'>') => (false, &descr[1..]),
        _ => (true, descr),
    };
    let dtype = match code {
        "f4" => DType::F32,
        "f8" => DType::F64,
        "f2" => DType::F16,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "b1" => DType::Bool,
        _ => return Err(NpyError::UnsupportedDtype(descr.to_string())),
    };
    if !little && dtype.size() > 1 {
        return Err(NpyError::UnsupportedDtype(descr.to_string()));
    }
    let n = burnc_compiler::size::numel(&shape).ok_or(NpyError::Truncated)?;
    let payload = &bytes[hstart + hlen..];
    let need = n.checked_mul(dtype.size()).ok_or(NpyError::Truncated)?;
    let body = payload.get(..need).ok_or(NpyError::Truncated)?;
    let data = Data::from_le_bytes(dtype, body).ok_or(NpyError::Truncated)?;
    Ok(Tensor::new(shape, data))
}

pub fn write(t: &Tensor) -> Option<Vec<u8>> {
    let code = match t.dtype() {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        _ => return None,
    };
    let shape: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
    let shape = if shape.len() == 1 { format!("({},)", shape[0]) } else { format!("({})", shape.join(", ")) };
    let mut header = format!("{{'descr': '{code}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&t.data.to_le_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let t = Tensor::from_f32s(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let bytes = write(&t).unwrap();
        assert_eq!(parse(&bytes).unwrap(), t);
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(parse(b"hello world"), Err(NpyError::BadMagic)));
        let t = Tensor::from_f32s(vec![4], vec![1.0; 4]);
        let bytes = write(&t).unwrap();
        assert!(matches!(parse(&bytes[..bytes.len() - 3]), Err(NpyError::Truncated)));
    }
}
