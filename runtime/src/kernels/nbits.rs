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

    /// Zero point of block `j` of row `n`.
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
            let op = OutPtr(out.as_mut_ptr());
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

#[cfg(feature = "std")]
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
#[cfg(feature = "std")]
unsafe impl Send for OutPtr {}
#[cfg(feature = "std")]
unsafe impl Sync for OutPtr {}
#[cfg(feature = "std")]
impl OutPtr {
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// Outputs `first .. first + out.len()` of one row.
fn span(w: &NBits, lanes: &[f32], sums: &[f32], first: usize, out: &mut [f32], bias: Option<&[f32]>) {
    #[cfg(target_arch = "x86_64")]
    if super::has_avx2() {
        // SAFETY: the CPU has AVX2 and FMA (checked above; every AVX2 CPU has FMA).
        unsafe { span_avx2(w, lanes, sums, first, out, bias) };
        return;
    }
    span_any(w, lanes, sums, first, out, bias);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn span_avx2(w: &NBits, lanes: &[f32], sums: &[f32], first: usize, out: &mut [f32], bias: Option<&[f32]>) {
    span_any(w, lanes, sums, first, out, bias);
}

/// The loop both builds share: written so the compiler vectorizes the per-block dot product
/// (bytes widened, nibbles split, converted and multiplied in lanes).
#[inline(always)]
fn span_any(w: &NBits, lanes: &[f32], sums: &[f32], first: usize, out: &mut [f32], bias: Option<&[f32]>) {
    let (blocks, bb, block) = (w.blocks(), w.block_bytes(), w.block);
    for (i, o) in out.iter_mut().enumerate() {
        let n = first + i;
        let row = &w.b[n * blocks * bb..(n + 1) * blocks * bb];
        let mut acc = 0.0f32;
        for j in 0..blocks {
            let q = &row[j * bb..(j + 1) * bb];
            let l = &lanes[j * block..(j + 1) * block];
            let dot = if w.bits == 4 { dot4(q, l) } else { dot8(q, l) };
            acc += w.scales[n * blocks + j] * (dot - w.zero(n, j) * sums[j]);
        }
        *o = acc + bias.map_or(0.0, |b| b[n]);
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
        }
    }
}
