//! Products with block-quantized weights kept packed (onnxruntime's MatMulNBits): `Y = A · Wᵀ`
//! where row `n` of W is stored as `ceil(K / block)` blocks of `block` unsigned `bits`-bit
//! values (4 or 8), each block with its own scale and zero point:
//! `W[n][k] = (q[n][k] − zero[n][k / block]) · scale[n][k / block]`.
//!
//! 4-bit values are two to a byte, element `2i` in the low nibble; zero points are packed the
//! same way per row (`ceil(blocks · bits / 8)` bytes), given as floats, or absent (2^(bits−1)).
//! A decoder's products are one row of A against the whole of W, so reading W is the cost:
//! the kernel reads it once, as bytes, and never widens it in memory. Per row of A it first
//! splits A into the elements the low and the high nibbles multiply (the "lanes") and sums
//! each block of A, so a block's dot product is `Σ q·a` (one convert and one multiply-add per
//! weight) minus `zero · Σ a`.

/// The packed weights and their parameters.
#[derive(Clone, Copy, Debug)]
pub struct NBits<'a> {
    /// `[n][blocks][block · bits / 8]` bytes.
    pub b: &'a [u8],
    /// `[n][blocks]` scales.
    pub scales: &'a [f32],
    pub zero_points: ZeroPoints<'a>,
    pub n: usize,
    pub k: usize,
    pub bits: u32,
    pub block: usize,
}

/// Where a block's zero point comes from.
#[derive(Clone, Copy, Debug)]
pub enum ZeroPoints<'a> {
    /// 2^(bits−1) for every block.
    Default,
    /// `bits`-bit values packed per row like the weights: `[n][ceil(blocks · bits / 8)]`.
    Packed(&'a [u8]),
    /// One float per block: `[n][blocks]`.
    Float(&'a [f32]),
}

impl NBits<'_> {
    /// Blocks per row of W.
    pub fn blocks(&self) -> usize {
        self.k.div_ceil(self.block)
    }

    /// Bytes of one block.
    pub fn block_bytes(&self) -> usize {
        self.block * self.bits as usize / 8
    }

    /// Zero point of block `j` of row `n` (the tests' plain dequantization).
    #[cfg(test)]
    fn zero(&self, n: usize, j: usize) -> f32 {
        let blocks = self.blocks();
        match self.zero_points {
            ZeroPoints::Default => (1u32 << (self.bits - 1)) as f32,
            ZeroPoints::Float(z) => z[n * blocks + j],
            ZeroPoints::Packed(z) => {
                let row = (blocks * self.bits as usize).div_ceil(8);
                if self.bits == 8 {
                    z[n * row + j] as f32
                } else {
                    let byte = z[n * row + j / 2];
                    (if j % 2 == 0 { byte & 0x0F } else { byte >> 4 }) as f32
                }
            }
        }
    }
}

/// f32 elements of scratch [`matmul_nbits`] needs: one row of A in lanes and its block sums.
pub const fn scratch_len(k: usize, block: usize) -> usize {
    let blocks = k.div_ceil(block);
    blocks * block + blocks
}

/// `y[m][n] = Σ_k a[m][k] · W[n][k] (+ bias[n])` for `m` rows of `a` (`[m][k]`) into `y`
/// (`[m][n]`). `scratch` holds [`scratch_len`] f32. The caller checked every length and that
/// `bits` is 4 or 8 and `block` a multiple of 2 (onnxruntime's: a power of two, at least 16).
pub fn matmul_nbits(a: &[f32], w: &NBits, bias: Option<&[f32]>, y: &mut [f32], m: usize, scratch: &mut [f32]) {
    let (k, n, blocks, block) = (w.k, w.n, w.blocks(), w.block);
    let (lanes, sums) = scratch[..scratch_len(k, block)].split_at_mut(blocks * block);
    for r in 0..m {
        let row = &a[r * k..(r + 1) * k];
        // The lanes: for 4 bits, per block the elements of the low nibbles (even k) then those
        // of the high nibbles (odd k); for 8 bits A as it is. Past K: zeros.
        for (j, lb) in lanes.chunks_exact_mut(block).enumerate() {
            let src = &row[(j * block).min(k)..((j + 1) * block).min(k)];
            let (lo, hi) = lb.split_at_mut(block / 2);
            if w.bits == 4 {
                for i in 0..block / 2 {
                    lo[i] = src.get(2 * i).copied().unwrap_or(0.0);
                    hi[i] = src.get(2 * i + 1).copied().unwrap_or(0.0);
                }
            } else {
                lb.fill(0.0);
                lb[..src.len()].copy_from_slice(src);
            }
            sums[j] = src.iter().sum();
        }
        let out = &mut y[r * n..(r + 1) * n];
        rows(w, lanes, sums, out, bias);
    }
}

/// Every output of one row of A, split over the thread pool when W is large enough to pay for
/// waking workers.
fn rows(w: &NBits, lanes: &[f32], sums: &[f32], out: &mut [f32], bias: Option<&[f32]>) {
    #[cfg(feature = "std")]
    {
        let threads = crate::pool::threads();
        if threads > 1 && w.n * w.k >= PARALLEL_WEIGHTS && w.n >= 2 * threads {
            let per = w.n.div_ceil(2 * threads);
            let op = super::SendPtr(out.as_mut_ptr());
            crate::pool::parallel_for(w.n.div_ceil(per), &|t| {
                let (lo, hi) = (t * per, ((t + 1) * per).min(w.n));
                // SAFETY: tasks write disjoint ranges [lo, hi) of `out`, which holds n
                // elements; `out` is not otherwise used until every task has returned.
                let o = unsafe { core::slice::from_raw_parts_mut(op.get().add(lo), hi - lo) };
                span(w, lanes, sums, lo, o, bias);
            });
            return;
        }
    }
    span(w, lanes, sums, 0, out, bias);
}

/// Weights (n · k) below which one product stays on one thread.
#[cfg(feature = "std")]
const PARALLEL_WEIGHTS: usize = 1 << 16;

/// Outputs `first .. first + out.len()` of one row.
fn span(w: &NBits, lanes: &[f32], sums: &[f32], first: usize, out: &mut [f32], bias: Option<&[f32]>) {
    #[cfg(target_arch = "x86_64")]
    {
        // 512-bit lanes take a 4-bit block of 32 or more values (16 bytes) per load.
        let pick = chosen();
        if w.block_bytes().is_multiple_of(16) && has_avx512() && pick == 0 {
            // The CPU has AVX-512F (checked above).
            span_avx512(w, lanes, sums, first, out, bias);
            return;
        }
        if super::has_avx2() && pick <= 1 {
            // The CPU has AVX2 and FMA (checked above; every AVX2 CPU has FMA).
            span_avx2(w, lanes, sums, first, out, bias);
            return;
        }
    }
    span_any(w, lanes, sums, first, out, bias);
}

/// `Σ_j scale[j] · zero[j] · sums[j]` over row `n`'s blocks: the zero points' share of the
/// row's dot product, with the zero points' layout matched once per row.
fn zero_part(w: &NBits, n: usize, sums: &[f32]) -> f32 {
    let blocks = w.blocks();
    let scales = &w.scales[n * blocks..(n + 1) * blocks];
    match w.zero_points {
        ZeroPoints::Default => (1u32 << (w.bits - 1)) as f32 * scales.iter().zip(sums).map(|(s, a)| s * a).sum::<f32>(),
        ZeroPoints::Float(z) => scales.iter().zip(&z[n * blocks..(n + 1) * blocks]).zip(sums).map(|((s, z), a)| s * z * a).sum(),
        ZeroPoints::Packed(z) => {
            let row = (blocks * w.bits as usize).div_ceil(8);
            let z = &z[n * row..(n + 1) * row];
            if w.bits == 8 {
                scales.iter().zip(z).zip(sums).map(|((s, &z), a)| s * z as f32 * a).sum()
            } else {
                (0..blocks).map(|j| scales[j] * ((z[j / 2] >> (4 * (j % 2))) & 0x0F) as f32 * sums[j]).sum()
            }
        }
    }
}

/// The outputs of rows `first ..` two at a time (rows n and n + 1, or n twice at an odd end,
/// its second result dropped): `pair(n, n2)` gives both rows' `Σ_j scale · Σ q·lanes`,
/// `zero_part(n)` the zero points' share of row n, and the bias is added here. First it
/// checks what the vector builds' pointer walks rely on: the lanes cover every block, a block
/// is a multiple of `align` bytes, and W holds every row asked for.
#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
fn by_pairs(
    w: &NBits,
    lanes: &[f32],
    first: usize,
    out: &mut [f32],
    bias: Option<&[f32]>,
    align: usize,
    pair: impl Fn(usize, usize) -> (f32, f32),
    zero_part: impl Fn(usize) -> f32,
) {
    let (blocks, bb, block) = (w.blocks(), w.block_bytes(), w.block);
    assert!(lanes.len() >= blocks * block && bb % align == 0 && (w.bits != 4 || 2 * bb == block));
    let rows = out.len();
    assert!(w.b.len() >= (first + rows) * blocks * bb && w.scales.len() >= (first + rows) * blocks);
    let mut i = 0;
    while i < rows {
        let n = first + i;
        let n2 = if i + 1 < rows { n + 1 } else { n };
        let (d1, d2) = pair(n, n2);
        out[i] = d1 - zero_part(n) + bias.map_or(0.0, |b| b[n]);
        if n2 != n {
            out[i + 1] = d2 - zero_part(n2) + bias.map_or(0.0, |b| b[n2]);
        }
        i += 2;
    }
}

/// [`span_any`] in AVX2 vectors, two rows of W at a time (they share A's loads).
/// The caller checked the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
fn span_avx2(w: &NBits, lanes: &[f32], sums: &[f32], first: usize, out: &mut [f32], bias: Option<&[f32]>) {
    // SAFETY: the CPU has AVX2 and FMA (the caller checked); by_pairs checked the bounds.
    by_pairs(w, lanes, first, out, bias, 8, |n, n2| unsafe { pair_avx2(w, lanes, n, n2) }, |n| zero_part(w, n, sums));
}

/// Rows n and n2 of W against the lanes: per block the dot product stays a vector of eight
/// partial sums, scaled into the row's vector sum, so a row needs one horizontal sum.
///
/// # Safety
/// As [`by_pairs`] checked with an alignment of 8: each load reads 8 bytes at an offset
/// c < bb inside one block of rows n and n2, and 8 floats inside the block's `block` lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pair_avx2(w: &NBits, lanes: &[f32], n: usize, n2: usize) -> (f32, f32) {
    use core::arch::x86_64::*;
    let (blocks, bb, block) = (w.blocks(), w.block_bytes(), w.block);
    let nib = _mm_set1_epi8(0x0F);
    let hsum = |v: __m256| {
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
    };
    let (mut tot, mut tot2) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (q1, q2) = (w.b.as_ptr().add(n * blocks * bb), w.b.as_ptr().add(n2 * blocks * bb));
    let (s1, s2) = (w.scales.as_ptr().add(n * blocks), w.scales.as_ptr().add(n2 * blocks));
    for j in 0..blocks {
        let l = lanes.as_ptr().add(j * block);
        let (qa, qb) = (q1.add(j * bb), q2.add(j * bb));
        let (mut d0, mut d1, mut e0, mut e1) = (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
        if w.bits == 4 {
            // Byte c of a block holds values 2c (low nibble, lane c) and 2c + 1 (high
            // nibble, lane bb + c).
            for c in (0..bb).step_by(8) {
                let (llo, lhi) = (_mm256_loadu_ps(l.add(c)), _mm256_loadu_ps(l.add(bb + c)));
                let x = _mm_loadl_epi64(qa.add(c) as *const __m128i);
                let y = _mm_loadl_epi64(qb.add(c) as *const __m128i);
                let (xl, xh) = (_mm_and_si128(x, nib), _mm_and_si128(_mm_srli_epi16::<4>(x), nib));
                let (yl, yh) = (_mm_and_si128(y, nib), _mm_and_si128(_mm_srli_epi16::<4>(y), nib));
                d0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(xl)), llo, d0);
                d1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(xh)), lhi, d1);
                e0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(yl)), llo, e0);
                e1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(yh)), lhi, e1);
            }
        } else {
            for c in (0..bb).step_by(8) {
                let lv = _mm256_loadu_ps(l.add(c));
                let x = _mm_loadl_epi64(qa.add(c) as *const __m128i);
                let y = _mm_loadl_epi64(qb.add(c) as *const __m128i);
                d0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x)), lv, d0);
                e0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(y)), lv, e0);
            }
        }
        tot = _mm256_fmadd_ps(_mm256_add_ps(d0, d1), _mm256_set1_ps(*s1.add(j)), tot);
        tot2 = _mm256_fmadd_ps(_mm256_add_ps(e0, e1), _mm256_set1_ps(*s2.add(j)), tot2);
    }
    (hsum(tot), hsum(tot2))
}

/// The widest build allowed: 0 any, 1 AVX2 at most, 2 portable. Under std,
/// `BURNC_GEMM_KERNEL` = `avx2` or `portable` lowers it, for A/B measurements (as for the GEMM).
#[cfg(target_arch = "x86_64")]
fn chosen() -> u8 {
    #[cfg(feature = "std")]
    {
        static PICK: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
        *PICK.get_or_init(|| match std::env::var("BURNC_GEMM_KERNEL").as_deref() {
            Ok("avx2") => 1,
            Ok("portable") => 2,
            _ => 0,
        })
    }
    #[cfg(not(feature = "std"))]
    {
        0
    }
}

/// Whether the CPU has AVX-512F (run-time detection under std, the build's target otherwise).
#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(target_feature = "avx512f")
    }
}

/// [`span_avx2`] with 512-bit vectors: 16 bytes of a block (32 four-bit or 16 eight-bit
/// values) per load. Half the instructions per weight; on cores that split 512-bit operations
/// in two (Zen 4) it still saves the front end's work. The caller checked the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
fn span_avx512(w: &NBits, lanes: &[f32], sums: &[f32], first: usize, out: &mut [f32], bias: Option<&[f32]>) {
    // SAFETY: the CPU has AVX-512F (the caller checked); by_pairs checked the bounds, and
    // zero_part_avx512 checks its own.
    by_pairs(w, lanes, first, out, bias, 16, |n, n2| unsafe { pair_avx512(w, lanes, n, n2) }, |n| unsafe {
        zero_part_avx512(w, n, sums)
    });
}

/// [`pair_avx2`] in 512-bit vectors.
///
/// # Safety
/// As [`by_pairs`] checked with an alignment of 16: 16-byte loads at offsets c < bb inside
/// one block, 16-float loads inside the block's lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pair_avx512(w: &NBits, lanes: &[f32], n: usize, n2: usize) -> (f32, f32) {
    use core::arch::x86_64::*;
    let (blocks, bb, block) = (w.blocks(), w.block_bytes(), w.block);
    let (q1, q2) = (w.b.as_ptr().add(n * blocks * bb), w.b.as_ptr().add(n2 * blocks * bb));
    let (s1, s2) = (w.scales.as_ptr().add(n * blocks), w.scales.as_ptr().add(n2 * blocks));
    // One accumulator per row and lane set (low and high nibbles), summed at the end.
    let (mut lo, mut hi, mut lo2, mut hi2) = (_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps());
    if w.bits == 4 {
        // The block's scale times 0..15, looked up by nibble: `vpermps` reads only the low
        // four bits of each index, so a byte widened to 32 bits indexes by its low nibble as
        // it is and by its high one after a shift. No mask, no int→float convert, and the
        // scale is applied once per block rather than once per weight.
        let iota = _mm512_setr_ps(0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0);
        for j in 0..blocks {
            let l = lanes.as_ptr().add(j * block);
            let (qa, qb) = (q1.add(j * bb), q2.add(j * bb));
            let (ta, tb) = (_mm512_mul_ps(iota, _mm512_set1_ps(*s1.add(j))), _mm512_mul_ps(iota, _mm512_set1_ps(*s2.add(j))));
            for c in (0..bb).step_by(16) {
                let (llo, lhi) = (_mm512_loadu_ps(l.add(c)), _mm512_loadu_ps(l.add(bb + c)));
                let x = _mm512_cvtepu8_epi32(_mm_loadu_si128(qa.add(c) as *const __m128i));
                let y = _mm512_cvtepu8_epi32(_mm_loadu_si128(qb.add(c) as *const __m128i));
                lo = _mm512_fmadd_ps(_mm512_permutexvar_ps(x, ta), llo, lo);
                hi = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32::<4>(x), ta), lhi, hi);
                lo2 = _mm512_fmadd_ps(_mm512_permutexvar_ps(y, tb), llo, lo2);
                hi2 = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32::<4>(y), tb), lhi, hi2);
            }
        }
    } else {
        // 8 bits: per block Σ q·a as a vector, then scaled into the row's accumulator.
        for j in 0..blocks {
            let l = lanes.as_ptr().add(j * block);
            let (qa, qb) = (q1.add(j * bb), q2.add(j * bb));
            let (mut d, mut e) = (_mm512_setzero_ps(), _mm512_setzero_ps());
            for c in (0..bb).step_by(16) {
                let lv = _mm512_loadu_ps(l.add(c));
                let x = _mm_loadu_si128(qa.add(c) as *const __m128i);
                let y = _mm_loadu_si128(qb.add(c) as *const __m128i);
                d = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(x)), lv, d);
                e = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(y)), lv, e);
            }
            lo = _mm512_fmadd_ps(d, _mm512_set1_ps(*s1.add(j)), lo);
            lo2 = _mm512_fmadd_ps(e, _mm512_set1_ps(*s2.add(j)), lo2);
        }
    }
    (_mm512_reduce_add_ps(_mm512_add_ps(lo, hi)), _mm512_reduce_add_ps(_mm512_add_ps(lo2, hi2)))
}

/// [`zero_part`] sixteen blocks at a time: per row it is a dot product over the blocks, which
/// the scalar form spends as many instructions on as the vector kernel spends on the weights
/// when blocks are small (32 values).
///
/// # Safety
/// The CPU has AVX-512F. Bounds are checked here: every load reads inside a slice (the last
/// partial group through masks or a copy).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn zero_part_avx512(w: &NBits, n: usize, sums: &[f32]) -> f32 {
    use core::arch::x86_64::*;
    let blocks = w.blocks();
    let scales = &w.scales[n * blocks..(n + 1) * blocks];
    let sums = &sums[..blocks];
    let zrow = (blocks * w.bits as usize).div_ceil(8);
    let mut acc = _mm512_setzero_ps();
    for j0 in (0..blocks).step_by(16) {
        let len = (blocks - j0).min(16);
        let mask: __mmask16 = ((1u32 << len) - 1) as u16;
        // SAFETY: masked lanes are not read; the others lie inside `scales` and `sums`.
        let s = _mm512_maskz_loadu_ps(mask, scales.as_ptr().add(j0));
        let a = _mm512_maskz_loadu_ps(mask, sums.as_ptr().add(j0));
        let z = match w.zero_points {
            ZeroPoints::Default => _mm512_set1_ps((1u32 << (w.bits - 1)) as f32),
            ZeroPoints::Float(z) => _mm512_maskz_loadu_ps(mask, z[n * blocks..(n + 1) * blocks].as_ptr().add(j0)),
            ZeroPoints::Packed(z) => {
                let z = &z[n * zrow..(n + 1) * zrow];
                let mut bytes = [0u8; 16];
                if w.bits == 8 {
                    bytes[..len].copy_from_slice(&z[j0..j0 + len]);
                    _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(bytes.as_ptr() as *const __m128i)))
                } else {
                    // Block j's zero point is the low (even j) or high (odd j) nibble of byte
                    // j / 2: each byte twice, shifted by 0 then 4.
                    let nb = len.div_ceil(2);
                    bytes[..nb].copy_from_slice(&z[j0 / 2..j0 / 2 + nb]);
                    let x = _mm_loadu_si128(bytes.as_ptr() as *const __m128i);
                    let d = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(x, x));
                    let shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
                    let q = _mm512_and_si512(_mm512_srlv_epi32(d, shift), _mm512_set1_epi32(0x0F));
                    _mm512_cvtepi32_ps(q)
                }
            }
        };
        acc = _mm512_fmadd_ps(_mm512_mul_ps(s, z), a, acc);
    }
    _mm512_reduce_add_ps(acc)
}

/// The portable loop: written so the compiler can vectorize the per-block dot product (bytes
/// widened, nibbles split, converted and multiplied in lanes).
fn span_any(w: &NBits, lanes: &[f32], sums: &[f32], first: usize, out: &mut [f32], bias: Option<&[f32]>) {
    let (blocks, bb, block) = (w.blocks(), w.block_bytes(), w.block);
    for (i, o) in out.iter_mut().enumerate() {
        let n = first + i;
        let row = &w.b[n * blocks * bb..(n + 1) * blocks * bb];
        let mut acc = 0.0f32;
        for j in 0..blocks {
            let q = &row[j * bb..(j + 1) * bb];
            let l = &lanes[j * block..(j + 1) * block];
            acc += w.scales[n * blocks + j] * if w.bits == 4 { dot4(q, l) } else { dot8(q, l) };
        }
        *o = acc - zero_part(w, n, sums) + bias.map_or(0.0, |b| b[n]);
    }
}

/// `Σ lo(q[i]) · l[i] + hi(q[i]) · l[len/2 + i]`, eight partial sums.
#[inline(always)]
fn dot4(q: &[u8], l: &[f32]) -> f32 {
    let (lo, hi) = l.split_at(q.len());
    let mut acc = [0.0f32; 8];
    let mut qc = q.chunks_exact(8);
    let (mut lc, mut hc) = (lo.chunks_exact(8), hi.chunks_exact(8));
    for ((qs, ls), hs) in (&mut qc).zip(&mut lc).zip(&mut hc) {
        for t in 0..8 {
            acc[t] += (qs[t] & 0x0F) as f32 * ls[t] + (qs[t] >> 4) as f32 * hs[t];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for ((&b, &x), &y) in qc.remainder().iter().zip(lc.remainder()).zip(hc.remainder()) {
        s += (b & 0x0F) as f32 * x + (b >> 4) as f32 * y;
    }
    s
}

/// `Σ q[i] · l[i]`, eight partial sums.
#[inline(always)]
fn dot8(q: &[u8], l: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (mut qc, mut lc) = (q.chunks_exact(8), l.chunks_exact(8));
    for (qs, ls) in (&mut qc).zip(&mut lc) {
        for t in 0..8 {
            acc[t] += qs[t] as f32 * ls[t];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (&b, &x) in qc.remainder().iter().zip(lc.remainder()) {
        s += b as f32 * x;
    }
    s
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// W dequantized the plain way, from the definition.
    fn dequant(w: &NBits) -> Vec<f32> {
        let (blocks, bb) = (w.blocks(), w.block_bytes());
        let mut out = vec![0f32; w.n * w.k];
        for n in 0..w.n {
            for kk in 0..w.k {
                let (j, e) = (kk / w.block, kk % w.block);
                let byte = w.b[n * blocks * bb + j * bb + e * w.bits as usize / 8];
                let q = if w.bits == 8 { byte } else if e % 2 == 0 { byte & 15 } else { byte >> 4 };
                out[n * w.k + kk] = (q as f32 - w.zero(n, j)) * w.scales[n * blocks + j];
            }
        }
        out
    }

    fn check(bits: u32, k: usize, n: usize, m: usize, block: usize, zp: &str) {
        let blocks = k.div_ceil(block);
        let bb = block * bits as usize / 8;
        let b: Vec<u8> = (0..n * blocks * bb).map(|i| (i * 97 + 13) as u8).collect();
        let scales: Vec<f32> = (0..n * blocks).map(|i| 0.01 + (i % 7) as f32 * 0.003).collect();
        let zrow = (blocks * bits as usize).div_ceil(8);
        let zp_packed: Vec<u8> = (0..n * zrow).map(|i| (i * 31 + 5) as u8).collect();
        let zp_float: Vec<f32> = (0..n * blocks).map(|i| (i % 5) as f32 + 0.5).collect();
        let zero_points = match zp {
            "packed" => ZeroPoints::Packed(&zp_packed),
            "float" => ZeroPoints::Float(&zp_float),
            _ => ZeroPoints::Default,
        };
        let w = NBits { b: &b, scales: &scales, zero_points, n, k, bits, block };
        let a = super::super::test_rng::rnd(m * k, 7);
        let bias: Vec<f32> = (0..n).map(|i| i as f32 * 0.1).collect();
        let mut y = vec![0f32; m * n];
        let mut scratch = vec![0f32; scratch_len(k, block)];
        matmul_nbits(&a, &w, Some(&bias), &mut y, m, &mut scratch);
        // The portable loop gives the same row (the vector build ran above where the CPU has it).
        let mut portable = vec![0f32; n];
        let (lanes, sums) = scratch.split_at(k.div_ceil(block) * block);
        span_any(&w, lanes, sums, 0, &mut portable, Some(&bias));
        for (p, v) in portable.iter().zip(&y[(m - 1) * n..]) {
            assert!((p - v).abs() <= 1e-4 * v.abs().max(1.0), "portable {p} vs {v}");
        }
        // So do the vector builds the CPU has, whichever one ran above (without std the
        // dispatch goes by the build's target features, so ask the CPU here).
        #[cfg(target_arch = "x86_64")]
        {
            let mut builds: Vec<(&str, fn(&NBits, &[f32], &[f32], usize, &mut [f32], Option<&[f32]>))> = Vec::new();
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                builds.push(("avx2", span_avx2));
            }
            if std::is_x86_feature_detected!("avx512f") && w.block_bytes().is_multiple_of(16) {
                builds.push(("avx512", span_avx512));
            }
            for (name, build) in builds {
                let mut v = vec![0f32; n];
                build(&w, lanes, sums, 0, &mut v, Some(&bias));
                for (p, v) in v.iter().zip(&y[(m - 1) * n..]) {
                    assert!((p - v).abs() <= 1e-4 * v.abs().max(1.0), "{name} {p} vs {v}");
                }
            }
        }
        let wd = dequant(&w);
        for r in 0..m {
            for c in 0..n {
                let want: f64 = (0..k).map(|kk| a[r * k + kk] as f64 * wd[c * k + kk] as f64).sum::<f64>() + bias[c] as f64;
                let got = y[r * n + c] as f64;
                assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "bits {bits} k {k} zp {zp}: y[{r}][{c}] = {got}, want {want}");
            }
        }
    }

    #[test]
    fn matches_the_dequantized_product() {
        for zp in ["default", "packed", "float"] {
            check(4, 64, 5, 2, 32, zp);
            check(4, 70, 3, 1, 16, zp); // K not a multiple of the block: a padded last block
            check(4, 256, 9, 3, 128, zp);
            check(8, 64, 4, 2, 32, zp);
            check(8, 50, 3, 1, 16, zp);
            // More than 16 blocks, an odd count (the vector zero points' last, partial group
            // and a half-used byte of packed 4-bit zero points), an odd number of rows.
            check(4, 1100, 7, 1, 32, zp);
            check(4, 40 * 64, 3, 1, 64, zp);
            check(8, 600, 5, 1, 32, zp);
        }
    }
}
