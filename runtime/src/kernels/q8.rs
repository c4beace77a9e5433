//! What the packed int8 kernels (`qconv`, `qgemm`) share: the 8-bit element types, the
//! micro-kernel the CPU runs, the limits that keep their sums in i32, and the requantization
//! constants per output channel.
use super::quant::{scale_ratio, ScalePrec};

/// Largest k (channels × taps, or a product's inner dim): sums of `u8 · i8` products and
/// `za · Σ w` stay below 2^30.
pub(crate) const MAX_K: usize = (1 << 30) / (255 * 128);
/// Largest |bias − za · Σ w| added in i32 by the vector epilogue (else the exact i64 one).
const MAX_OFFSET: i64 = 1 << 30;

/// An 8-bit quantized element: u8 or i8.
pub trait QByte: crate::elem::Elem + Send + Sync + 'static {
    /// Added (mod 256) to make the value's bits an unsigned byte of the same order.
    const FLIP: u8;
    const LO: i32;
    const HI: i32;
    fn to_u8(self) -> u8;
    fn from_u8(b: u8) -> Self;
}

impl QByte for u8 {
    const FLIP: u8 = 0;
    const LO: i32 = 0;
    const HI: i32 = 255;
    #[inline]
    fn to_u8(self) -> u8 {
        self
    }
    #[inline]
    fn from_u8(b: u8) -> u8 {
        b
    }
}

impl QByte for i8 {
    const FLIP: u8 = 0x80;
    const LO: i32 = -128;
    const HI: i32 = 127;
    #[inline]
    fn to_u8(self) -> u8 {
        self as u8
    }
    #[inline]
    fn from_u8(b: u8) -> i8 {
        b as i8
    }
}

/// The integer micro-kernel the CPU runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Vnni,
}

pub(crate) fn kernel() -> Kernel {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        static STATE: AtomicU8 = AtomicU8::new(0);
        match STATE.load(Ordering::Relaxed) {
            1 => return Kernel::Portable,
            2 => return Kernel::Vnni,
            _ => {}
        }
        let vnni = std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vnni") && std::env::var("BURNC_GEMM_KERNEL").as_deref() != Ok("portable");
        STATE.store(if vnni { 2 } else { 1 }, Ordering::Relaxed);
        if vnni {
            return Kernel::Vnni;
        }
    }
    Kernel::Portable
}

/// Per output channel (a convolution's rows, a product's columns; padded to whole panels):
/// what the epilogue adds to the raw sum (`bias − za·Σ w`, `za` the activations' zero point as
/// an unsigned byte) and the f32 multiplier `a_scale · w_scale / y_scale`.
pub(crate) struct Requant<'a> {
    /// `bias − za·Σ w` where it fits the vector epilogue's i32 (see `vector`).
    pub add: &'a [u32],
    pub mult: &'a [u32],
    sums: &'a [u8],
    bias: &'a [i32],
    za: u8,
    pub zy: i32,
    /// Every `add` fits i32 with room and every multiplier is finite: the vector epilogue.
    pub vector: bool,
}

impl<'a> Requant<'a> {
    /// The constants of `n` output channels into `add` and `mult` (their length, whole panels;
    /// the padding adds 0 and multiplies by 1). `sums`: the packed weights' per-channel sums
    /// (i32, little-endian); `w_scale`: one, or one per channel.
    #[allow(clippy::too_many_arguments)]
    pub fn new(sums: &'a [u8], bias: &'a [i32], za: u8, zy: i32, a_scale: f32, w_scale: &[f32], y_scale: f32, n: usize, add: &'a mut [u32], mult: &'a mut [u32]) -> Requant<'a> {
        let mut rq = Requant { add: &[], mult: &[], sums, bias, za, zy, vector: true };
        for (c, (a, m)) in add.iter_mut().zip(mult.iter_mut()).enumerate() {
            let (o, ws) = if c < n { (rq.add_exact(c), if w_scale.len() == 1 { w_scale[0] } else { w_scale[c] }) } else { (0, 1.0) };
            let f = scale_ratio(a_scale as f64, ws as f64, y_scale as f64, ScalePrec::F32) as f32;
            rq.vector &= o.abs() <= MAX_OFFSET && f.is_finite();
            *a = o as i32 as u32;
            *m = f.to_bits();
        }
        Requant { add, mult, ..rq }
    }

    /// `bias − za·Σ w` of output channel `c`, exact.
    pub fn add_exact(&self, c: usize) -> i64 {
        let s = self.sums.get(4 * c..4 * c + 4).map_or(0, |b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        self.bias.get(c).map_or(0, |&b| b as i64) - self.za as i64 * s as i64
    }
}

/// Rows of a VNNI tile (both kernels' tiles are 12 × 32: 24 zmm accumulators).
pub(crate) const TILE_ROWS: usize = 12;

/// One k quad of a VNNI tile: `c[r][v] += Σ_j row_r[j] · b_v[j]` over the four bytes of every
/// lane, with row `r`'s word (`rows[r]`) broadcast. `ROWS_UNSIGNED`: the rows are the unsigned
/// operand (`qgemm`'s activations) and `b` the signed one, else the other way round (`qconv`'s
/// broadcast weights).
///
/// # Safety
/// AVX-512F and VNNI; `rows` points at [`TILE_ROWS`] readable words.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[inline]
pub(crate) unsafe fn quad_step<const ROWS_UNSIGNED: bool>(c: &mut [[core::arch::x86_64::__m512i; 2]; TILE_ROWS], b: [core::arch::x86_64::__m512i; 2], rows: *const i32) {
    use core::arch::x86_64::*;
    for (r, acc) in c.iter_mut().enumerate() {
        // SAFETY: `rows` holds TILE_ROWS words (the contract).
        let w = _mm512_set1_epi32(unsafe { rows.add(r).read_unaligned() });
        for (a, &bv) in acc.iter_mut().zip(&b) {
            *a = if ROWS_UNSIGNED { _mm512_dpbusd_epi32(*a, w, bv) } else { _mm512_dpbusd_epi32(*a, bv, w) };
        }
    }
}

/// Sixteen sums requantized to bytes: the same f32 operations as `requantize_one` (`(acc +
/// add) · mult`, rounded half to even, plus `zy`), clamped to `[lo − zy, hi − zy]` before the
/// conversion so that no value leaves i32 (the clamped value rounds and saturates to the same
/// byte).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn requant16(acc: core::arch::x86_64::__m512i, add: core::arch::x86_64::__m512i, mult: core::arch::x86_64::__m512, zy: i32, lo: i32, hi: i32) -> core::arch::x86_64::__m128i {
    use core::arch::x86_64::*;
    let f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc, add)), mult);
    let f = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps((lo - zy) as f32)), _mm512_set1_ps((hi - zy) as f32));
    _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), _mm512_set1_epi32(zy)))
}
