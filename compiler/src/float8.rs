//! The small formats live in the runtime (`burnc_runtime::small`), shared with generated
//! code; these wrappers take the IR's dtype.
use crate::ir::DType;
use burnc_runtime::small::{self, Small};

/// The runtime's name for a small dtype (`DType::is_small`).
pub fn small_of(d: DType) -> Option<Small> {
    Some(match d {
        DType::F8E4M3FN => Small::F8E4M3FN,
        DType::F8E4M3FNUZ => Small::F8E4M3FNUZ,
        DType::F8E5M2 => Small::F8E5M2,
        DType::F8E5M2FNUZ => Small::F8E5M2FNUZ,
        DType::F8E8M0 => Small::F8E8M0,
        DType::F4E2M1 => Small::F4E2M1,
        DType::U4 => Small::U4,
        DType::I4 => Small::I4,
        DType::U2 => Small::U2,
        DType::I2 => Small::I2,
        _ => return None,
    })
}

fn s(d: DType) -> Small {
    small_of(d).unwrap_or(Small::F8E4M3FN)
}

pub fn to_f32(d: DType, bits: u8) -> f32 {
    small::to_f32(s(d), bits)
}

pub fn from_f32(d: DType, x: f32, saturate: bool) -> u8 {
    small::from_f32(s(d), x, saturate)
}

pub fn small_to_f64(d: DType, bits: u8) -> f64 {
    small::small_to_f64(s(d), bits)
}

pub fn small_from_f64(d: DType, x: f64, saturate: bool) -> u8 {
    small::small_from_f64(s(d), x, saturate)
}

pub fn small_from_i64(d: DType, v: i64) -> u8 {
    small::small_from_i64(s(d), v)
}

#[cfg(test)]
mod tests {
    use super::*;
    fn max_finite(d: DType) -> f32 {
        (0u8..0x80).map(|b| to_f32(d, b)).filter(|v| v.is_finite()).fold(0.0, f32::max)
    }

    #[test]
    fn known_values() {
        assert_eq!(max_finite(DType::F8E4M3FN), 448.0);
        assert_eq!(max_finite(DType::F8E4M3FNUZ), 240.0);
        assert_eq!(max_finite(DType::F8E5M2), 57344.0);
        assert_eq!(max_finite(DType::F8E5M2FNUZ), 57344.0);
        assert_eq!(to_f32(DType::F8E4M3FN, from_f32(DType::F8E4M3FN, 1.0, true)), 1.0);
        assert_eq!(to_f32(DType::F8E4M3FN, from_f32(DType::F8E4M3FN, 1000.0, true)), 448.0);
        assert!(to_f32(DType::F8E4M3FN, from_f32(DType::F8E4M3FN, 1000.0, false)).is_nan());
        assert_eq!(to_f32(DType::F8E5M2, from_f32(DType::F8E5M2, 1e6, false)), f32::INFINITY);
        // 1.0625 is halfway between 1.0 and 1.125 in E4M3: ties to even (1.0).
        assert_eq!(to_f32(DType::F8E4M3FN, from_f32(DType::F8E4M3FN, 1.0625, true)), 1.0);
    }
}

