//! Owned tensors with a run-time dtype: constants in the IR and values in the interpreter.
use crate::ir::DType;
use half::{bf16, f16};

/// Storage of a tensor, one variant per element type. Float8 types have no arithmetic in the
/// runtime; they are kept as raw bits and converted on Cast.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    /// A small type (float8, float4, 4- and 2-bit ints; `DType::is_small`), raw bits, one
    /// element per byte.
    F8(DType, Vec<u8>),
    /// UTF-8 text (`DType::Str`). Macros over the numeric variants send it to their `f8` arm.
    Str(Vec<String>),
}

/// Run `$body` with `$v` bound to the typed `Vec` of any non-f8 variant; f8 runs `$f8`.
#[macro_export]
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr, f8 => $f8:expr) => {
        $crate::match_data!($data, [F32 F64 F16 BF16 I8 I16 I32 I64 U8 U16 U32 U64 Bool], $v => $body,
            $crate::tensor::Data::F8(..) | $crate::tensor::Data::Str(..) => $f8)
    };
}

/// Like [`with_data!`] but maps each typed Vec to a new `Data` of the same variant.
#[macro_export]
macro_rules! map_data {
    ($data:expr, $v:ident => $body:expr, f8 => $f8:expr) => {
        $crate::match_data!($data, [F32 F64 F16 BF16 I8 I16 I32 I64 U8 U16 U32 U64 Bool], $v => map $body,
            $crate::tensor::Data::F8(..) | $crate::tensor::Data::Str(..) => $f8)
    };
}

/// Like [`map_data!`] for float variants only; other variants run `$other`.
#[macro_export]
macro_rules! map_float_data {
    ($data:expr, $v:ident => $body:expr, other => $other:expr) => {
        $crate::match_data!($data, [F32 F64 F16 BF16], $v => map $body, _ => $other)
    };
}

/// The match the three macros above write: `$body` for each listed variant (`map $body`:
/// wrapped in the same variant), `$other` for the rest.
#[doc(hidden)]
#[macro_export]
macro_rules! match_data {
    ($data:expr, [$($var:ident)*], $v:ident => map $body:expr, $rest:pat => $other:expr) => {
        match $data {
            $($crate::tensor::Data::$var($v) => $crate::tensor::Data::$var($body),)*
            $rest => $other,
        }
    };
    ($data:expr, [$($var:ident)*], $v:ident => $body:expr, $rest:pat => $other:expr) => {
        match $data {
            $($crate::tensor::Data::$var($v) => $body,)*
            $rest => $other,
        }
    };
}

impl Data {
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::F16(_) => DType::F16,
            Data::BF16(_) => DType::BF16,
            Data::I8(_) => DType::I8,
            Data::I16(_) => DType::I16,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::U8(_) => DType::U8,
            Data::U16(_) => DType::U16,
            Data::U32(_) => DType::U32,
            Data::U64(_) => DType::U64,
            Data::Bool(_) => DType::Bool,
            Data::F8(d, _) => *d,
            Data::Str(_) => DType::Str,
        }
    }

    pub fn len(&self) -> usize {
        with_data!(self, v => v.len(), f8 => match self { Data::F8(_, v) => v.len(), Data::Str(v) => v.len(), _ => 0 })
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A zero-filled buffer of `n` elements.
    pub fn zeros(dtype: DType, n: usize) -> Data {
        match dtype {
            DType::F32 => Data::F32(vec![0.0; n]),
            DType::F64 => Data::F64(vec![0.0; n]),
            DType::F16 => Data::F16(vec![f16::ZERO; n]),
            DType::BF16 => Data::BF16(vec![bf16::ZERO; n]),
            DType::I8 => Data::I8(vec![0; n]),
            DType::I16 => Data::I16(vec![0; n]),
            DType::I32 => Data::I32(vec![0; n]),
            DType::I64 => Data::I64(vec![0; n]),
            DType::U8 => Data::U8(vec![0; n]),
            DType::U16 => Data::U16(vec![0; n]),
            DType::U32 => Data::U32(vec![0; n]),
            DType::U64 => Data::U64(vec![0; n]),
            DType::Bool => Data::Bool(vec![false; n]),
            DType::Str => Data::Str(vec![String::new(); n]),
            d => Data::F8(d, vec![0; n]),
        }
    }

    /// Decode `n` elements from packed little-endian bytes (sub-byte types low bits first).
    pub fn from_packed(dtype: DType, bytes: &[u8], n: usize) -> Option<Data> {
        if dtype == DType::Str {
            return decode_strings(bytes).filter(|v| v.len() == n).map(Data::Str);
        }
        let bits = dtype.bits();
        if bits >= 8 {
            return Data::from_le_bytes(dtype, bytes).filter(|d| d.len() == n);
        }
        if bytes.len() != dtype.packed_bytes(n) {
            return None;
        }
        let per = 8 / bits;
        let mask = (1u8 << bits) - 1;
        Some(Data::F8(dtype, (0..n).map(|i| (bytes[i / per] >> ((i % per) * bits)) & mask).collect()))
    }

    /// Packed little-endian bytes (sub-byte types two or four to a byte).
    pub fn to_packed(&self) -> Vec<u8> {
        if let Data::F8(d, v) = self {
            let bits = d.bits();
            if bits < 8 {
                let per = 8 / bits;
                let mut out = vec![0u8; d.packed_bytes(v.len())];
                for (i, &b) in v.iter().enumerate() {
                    out[i / per] |= (b & ((1u8 << bits) - 1)) << ((i % per) * bits);
                }
                return out;
            }
        }
        self.to_le_bytes()
    }

    /// Decode little-endian bytes (ONNX raw_data, .npy payloads). `None` when the length is
    /// not a multiple of the element size.
    pub fn from_le_bytes(dtype: DType, bytes: &[u8]) -> Option<Data> {
        if dtype == DType::Str {
            return decode_strings(bytes).map(Data::Str);
        }
        let size = dtype.size();
        if !bytes.len().is_multiple_of(size) {
            return None;
        }
        macro_rules! dec {
            ($t:ty, $variant:ident) => {
                Data::$variant(from_le::<$t>(bytes))
            };
        }
        Some(match dtype {
            DType::F32 => dec!(f32, F32),
            DType::F64 => dec!(f64, F64),
            DType::F16 => dec!(f16, F16),
            DType::BF16 => dec!(bf16, BF16),
            DType::I8 => Data::I8(bytes.iter().map(|&b| b as i8).collect()),
            DType::I16 => dec!(i16, I16),
            DType::I32 => dec!(i32, I32),
            DType::I64 => dec!(i64, I64),
            DType::U8 => Data::U8(bytes.to_vec()),
            DType::U16 => dec!(u16, U16),
            DType::U32 => dec!(u32, U32),
            DType::U64 => dec!(u64, U64),
            DType::Bool => Data::Bool(bytes.iter().map(|&b| b != 0).collect()),
            d => Data::F8(d, bytes.to_vec()),
        })
    }

    /// Little-endian bytes of the elements (strings: their packed form, `encode_strings`).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        macro_rules! enc {
            ($v:expr) => {
                to_le($v)
            };
        }
        match self {
            Data::F32(v) => enc!(v),
            Data::F64(v) => enc!(v),
            Data::F16(v) => enc!(v),
            Data::BF16(v) => enc!(v),
            Data::I8(v) => enc!(v),
            Data::I16(v) => enc!(v),
            Data::I32(v) => enc!(v),
            Data::I64(v) => enc!(v),
            Data::U8(v) => v.clone(),
            Data::U16(v) => enc!(v),
            Data::U32(v) => enc!(v),
            Data::U64(v) => enc!(v),
            Data::Bool(v) => v.iter().map(|&b| b as u8).collect(),
            Data::F8(_, v) => v.clone(),
            Data::Str(v) => encode_strings(v),
        }
    }
}

/// Strings as bytes (the weights blob, test files): each a `u32` little-endian byte length
/// followed by its UTF-8 bytes.
pub fn encode_strings(v: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.iter().map(|s| s.len() + 4).sum());
    for s in v {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    out
}

/// The inverse of [`encode_strings`]; `None` when a length runs past the end or a string is
/// not UTF-8.
pub fn decode_strings(mut b: &[u8]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let len = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let text = b.get(4..4usize.checked_add(len)?)?;
        out.push(String::from_utf8(text.to_vec()).ok()?);
        b = &b[4 + len..];
    }
    Some(out)
}

/// Numbers that have a little-endian byte form (every element type but bool and the 8-bit floats).
pub trait LeBytes: bytemuck::Pod {
    /// The type as generated code names it.
    const RUST: &'static str;
    fn from_le(b: &[u8]) -> Self;
    fn write_le(self, out: &mut Vec<u8>);
}

macro_rules! le_bytes {
    ($($t:ty => $rust:literal),*) => {$(
        impl LeBytes for $t {
            const RUST: &'static str = $rust;
            fn from_le(b: &[u8]) -> Self {
                let mut a = [0u8; core::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_bytes!(f32 => "f32", f64 => "f64", f16 => "rt::half::f16", bf16 => "rt::half::bf16", i8 => "i8", i16 => "i16", i32 => "i32", i64 => "i64", u8 => "u8", u16 => "u16", u32 => "u32", u64 => "u64");

/// The numbers of little-endian `bytes` (a whole number of elements; a partial one at the end is
/// dropped). One copy on little-endian hosts: build scripts run this over whole weight files,
/// in debug builds, where an element-by-element loop costs seconds.
pub fn from_le<T: LeBytes>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / core::mem::size_of::<T>() * core::mem::size_of::<T>();
    if cfg!(target_endian = "little") {
        bytemuck::pod_collect_to_vec(&bytes[..n])
    } else {
        bytes[..n].chunks_exact(core::mem::size_of::<T>()).map(T::from_le).collect()
    }
}

/// The little-endian bytes of `v` (one copy on little-endian hosts, see [`from_le`]).
pub fn to_le<T: LeBytes>(v: &[T]) -> Vec<u8> {
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice(v).to_vec()
    } else {
        let mut out = Vec::with_capacity(std::mem::size_of_val(v));
        v.iter().for_each(|x| x.write_le(&mut out));
        out
    }
}

/// A dense row-major tensor with its concrete shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    pub fn new(shape: Vec<usize>, data: Data) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Tensor { shape, data }
    }

    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product();
        Tensor { shape, data: Data::zeros(dtype, n) }
    }

    pub fn scalar_i64(v: i64) -> Tensor {
        Tensor { shape: vec![], data: Data::I64(vec![v]) }
    }

    pub fn from_i64s(shape: Vec<usize>, v: Vec<i64>) -> Tensor {
        Tensor { shape, data: Data::I64(v) }
    }

    pub fn from_f32s(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        Tensor { shape, data: Data::F32(v) }
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Elements as i64 (ints and bools exactly, floats truncated); `None` for small float
    /// types.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        use burnc_runtime::Elem;
        with_data!(&self.data, v => Some(v.iter().map(|x| x.to_i64()).collect()), f8 => match &self.data {
            Data::F8(d, bits) if d.is_int() => Some(bits.iter().map(|&b| crate::float8::small_to_f64(*d, b) as i64).collect()),
            _ => None,
        })
    }

    /// Elements as f64; float8 is decoded.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        use burnc_runtime::Elem;
        with_data!(&self.data, v => v.iter().map(|x| x.to_f64()).collect(),
            f8 => match &self.data {
                Data::F8(d, bits) => bits.iter().map(|&b| crate::float8::small_to_f64(*d, b)).collect(),
                _ => Vec::new(),
            })
    }
}
