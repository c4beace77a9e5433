//! Scatter with an optional reduction: `out[dst[i]] = f(out[dst[i]], updates[i])`, in order, so
//! with duplicate destinations the last update wins (no reduction) or all are combined.
use crate::elem::Elem;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScatterMode {
    Replace,
    Add,
    Mul,
    Max,
    Min,
}

/// A destination offset: `usize` in the interpreter, `u32` in generated code's tables.
pub trait Dst: Copy {
    fn at(self) -> usize;
}
impl Dst for usize {
    #[inline]
    fn at(self) -> usize {
        self
    }
}
impl Dst for u32 {
    #[inline]
    fn at(self) -> usize {
        self as usize
    }
}

/// `updates[i]` lands on `out[dst[i]]`; with `chunk > 1` each destination is the start of
/// `chunk` consecutive elements and `updates` holds `dst.len() * chunk` elements.
/// Destinations must be in range (`dst[i] + chunk <= out.len()`): callers validate indices.
pub fn scatter<T: Elem, I: Dst>(out: &mut [T], updates: &[T], dst: &[I], chunk: usize, mode: ScatterMode) {
    for (i, d) in dst.iter().map(|d| d.at()).enumerate() {
        let src = &updates[i * chunk..(i + 1) * chunk];
        let dst = &mut out[d..d + chunk];
        for (o, &u) in dst.iter_mut().zip(src) {
            *o = match mode {
                ScatterMode::Replace => u,
                ScatterMode::Add => o.add(u),
                ScatterMode::Mul => o.mul(u),
                ScatterMode::Max => o.max_of(u),
                ScatterMode::Min => o.min_of(u),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_combine() {
        let mut out = [1f32, 2., 3.];
        scatter(&mut out, &[10., 20.], &[1usize, 1], 1, ScatterMode::Add);
        assert_eq!(out, [1., 32., 3.]);
        scatter(&mut out, &[7., 8., 9., 9.], &[0usize, 1], 2, ScatterMode::Replace);
        assert_eq!(out, [7., 9., 9.]);
    }
}
