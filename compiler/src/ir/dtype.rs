//! Element types of burnc tensors.
use std::fmt;

/// Element type. The ONNX numbering is kept in [`DType::onnx_code`] so frontends and the
/// TensorProto writer agree, but the IR is not tied to ONNX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    /// Microscaling exponent: 2^(bits-127), 0xFF is NaN.
    F8E8M0,
    F4E2M1,
    U4,
    I4,
    U2,
    I2,
    /// UTF-8 text, one string per element. In memory a string tensor holds handles (pointer
    /// and length, `DType::size` bytes each) to text kept elsewhere; files and the weights
    /// blob hold it length-prefixed (`Data::to_packed`).
    Str,
}

impl DType {
    pub const ALL: [DType; 24] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F8E8M0,
        DType::F4E2M1,
        DType::U4,
        DType::I4,
        DType::U2,
        DType::I2,
        DType::Str,
    ];

    /// Bits per element as stored in files (sub-byte types are packed there; in memory every
    /// element takes at least one byte).
    pub fn bits(self) -> usize {
        match self {
            DType::U4 | DType::I4 | DType::F4E2M1 => 4,
            DType::U2 | DType::I2 => 2,
            // Variable length: `packed_bytes` does not apply (see `Data::to_packed`).
            DType::Str => 0,
            d => d.size() * 8,
        }
    }

    /// Bytes that `n` elements take when packed (ONNX raw_data, weight files).
    pub fn packed_bytes(self, n: usize) -> usize {
        (n * self.bits()).div_ceil(8)
    }

    /// Types kept in memory as raw bits, one element per byte, with no arithmetic of their
    /// own: float8, float4 and the 2/4-bit integers (see `Data::F8`).
    pub fn is_small(self) -> bool {
        matches!(
            self,
            DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
                | DType::U4
                | DType::I4
                | DType::U2
                | DType::I2
        )
    }

    /// Bytes per element in memory.
    pub fn size(self) -> usize {
        match self {
            // A handle: pointer and length, padded to 16 bytes on every target.
            DType::Str => 16,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            _ => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32
                | DType::F64
                | DType::F16
                | DType::BF16
                | DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::I4 | DType::I2)
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::U4 | DType::U2)
    }

    /// The ONNX `TensorProto.DataType` code.
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::F8E4M3FN => 17,
            DType::F8E4M3FNUZ => 18,
            DType::F8E5M2 => 19,
            DType::F8E5M2FNUZ => 20,
            DType::U4 => 21,
            DType::I4 => 22,
            DType::F4E2M1 => 23,
            DType::F8E8M0 => 24,
            DType::U2 => 25,
            DType::I2 => 26,
            DType::Str => 8,
        }
    }

    pub fn from_onnx_code(code: i32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.onnx_code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::F8E8M0 => "f8e8m0",
            DType::F4E2M1 => "f4e2m1",
            DType::U4 => "u4",
            DType::I4 => "i4",
            DType::U2 => "u2",
            DType::I2 => "i2",
            DType::Str => "string",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Name of an ONNX data type code, for error messages about types burnc does not handle.
pub fn onnx_code_name(code: i32) -> &'static str {
    match code {
        0 => "UNDEFINED",
        14 => "COMPLEX64",
        15 => "COMPLEX128",
        _ => match DType::from_onnx_code(code) {
            Some(d) => d.name(),
            None => "unknown",
        },
    }
}
