//! Quantized matrix products (QLinearMatMul with u8 or i8 activations A `[m, k]` and i8
//! weights B `[k, n]` whose zero points are 0, as onnxruntime's static quantizer writes them,
//! plus an optional i32 bias per column, as its QGemm has) over B packed at compile time: the
//! integer sums four bytes at a time (AVX-512 VNNI `vpdpbusd` where the CPU has it),
//! requantized in vector registers.
//!
//! A tile is [`MR`] rows of A × [`NR`] columns of B. Each k quad, four bytes of a row of A
//! (one u32, broadcast) multiply the quad's 4 × 32 bytes of a B panel (two vectors): the
//! activations are the unsigned operand, i8 values shifted by 128 and their zero point with
//! them, which the per-column weight sums take back: `Σ (a − za)·w = Σ a·w − za·Σ w`. A is
//! copied once per call into row blocks of k quads (`[block][q][r]` words), so a tile reads it
//! from one pointer; every B panel then passes over it. Integer sums are exact in any order,
//! so the result is the reference's (`quant::qlinear_matmul_requant` over
//! `quant::matmul_integer`, plus the bias) bit for bit.
#[cfg(target_arch = "x86_64")]
use super::q8::{quad_step, requant16};
use super::q8::{kernel, Kernel, QByte, Requant, MAX_K, TILE_ROWS};
use super::quant::{requantize_one, ScalePrec};

/// Rows of A per tile.
pub const MR: usize = TILE_ROWS;
/// Columns of B per packed panel (two 16-lane vectors).
pub const NR: usize = 32;
/// The product's sizes: `m` rows of A (every batch item's, B is shared), `k`, `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QGemmDims {
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

impl QGemmDims {
    fn kq(&self) -> usize {
        self.k.div_ceil(4)
    }

    fn panels(&self) -> usize {
        self.n.div_ceil(NR)
    }

    fn blocks(&self) -> usize {
        self.m.div_ceil(MR)
    }

    /// Words of scratch: per column (whole panels) the epilogue's offset and multiplier, then
    /// A's row blocks.
    fn scratch(&self) -> Option<usize> {
        let np = self.panels().checked_mul(NR)?;
        self.blocks().checked_mul(self.kq())?.checked_mul(MR)?.checked_add(2 * np)
    }
}

/// Whether [`qlinear_matmul_prepacked`] runs this product: `k` at most [`MAX_K`], sizes whose
/// byte counts fit.
pub fn takes(d: &QGemmDims) -> bool {
    d.m > 0 && d.k > 0 && d.n > 0 && d.k <= MAX_K && d.scratch().and_then(|s| s.checked_mul(4)).is_some() && d.m.checked_mul(d.n).is_some()
}

/// Scratch words (u32) of [`qlinear_matmul_prepacked`] (0 where it does not run).
pub fn scratch_len(d: &QGemmDims) -> usize {
    if takes(d) {
        d.scratch().unwrap_or(0)
    } else {
        0
    }
}

/// Bytes of packed B: the per-column weight sums (i32, little-endian), then panels of [`NR`]
/// columns × every k quad × 4 bytes.
pub fn packed_len(d: &QGemmDims) -> usize {
    if takes(d) {
        d.n * 4 + d.panels() * d.kq() * NR * 4
    } else {
        0
    }
}

/// Pack i8 weights B (`[k][n]`, or `[n][k]` when `transposed`) for
/// [`qlinear_matmul_prepacked`] into `out` ([`packed_len`] bytes): panel `p`, k quad `q`,
/// column `c`, byte `j` holds `B[4q + j][p·NR + c]` (zeros past the last row or column).
pub fn pack_weights(d: &QGemmDims, b: &[i8], transposed: bool, out: &mut [u8]) {
    assert!(takes(d) && b.len() >= d.k * d.n && out.len() >= packed_len(d), "qgemm: pack_weights buffers too short");
    let at = |r: usize, c: usize| if transposed { b[c * d.k + r] } else { b[r * d.n + c] };
    let (sums, panels) = out.split_at_mut(d.n * 4);
    for (c, s) in sums.chunks_exact_mut(4).enumerate() {
        let sum: i32 = (0..d.k).map(|r| at(r, c) as i32).sum();
        s.copy_from_slice(&sum.to_le_bytes());
    }
    let kq = d.kq();
    for (i, o) in panels[..d.panels() * kq * NR * 4].iter_mut().enumerate() {
        let (j, c, q, p) = (i % 4, i / 4 % NR, i / (4 * NR) % kq, i / (4 * NR * kq));
        let (r, c) = (4 * q + j, p * NR + c);
        *o = if r < d.k && c < d.n { at(r, c) as u8 } else { 0 };
    }
}

/// QLinearMatMul over B packed by [`pack_weights`] (`bp`): `y = saturate(round((Σ (a − za)·b
/// + bias) · a_scale·b_scale/y_scale) + zy)`, bit for bit the reference with f32 scales.
/// `a`: `m × k` values (rows of every batch item); `a_zp`, `y_zp`: one value or empty (0);
/// `a_scale`, `y_scale`: one value; `b_scale`: one or one per column; `bias`: empty or one per
/// column; `scratch`: [`scratch_len`] words; `y`: `m × n`.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_matmul_prepacked<A: QByte, Q: QByte>(
    a: &[A],
    bp: &[u8],
    a_zp: &[A],
    bias: &[i32],
    a_scale: &[f32],
    b_scale: &[f32],
    y_scale: &[f32],
    y_zp: &[Q],
    d: &QGemmDims,
    scratch: &mut [u32],
    y: &mut [Q],
) {
    assert!(takes(d), "qgemm: a product it does not take");
    // The stores move bytes (`QByte` is u8 or i8).
    assert!(core::mem::size_of::<Q>() == 1, "qgemm: 8-bit elements");
    let (kq, np) = (d.kq(), d.panels() * NR);
    assert!(
        a.len() >= d.m * d.k && y.len() >= d.m * d.n && bp.len() >= packed_len(d) && scratch.len() >= scratch_len(d) && (bias.is_empty() || bias.len() >= d.n),
        "qgemm: buffers too short"
    );
    assert!(!a_scale.is_empty() && !y_scale.is_empty() && (b_scale.len() == 1 || b_scale.len() >= d.n), "qgemm: scales");
    let (add, rest) = scratch.split_at_mut(np);
    let (mult, ablocks) = rest.split_at_mut(np);
    let za = a_zp.first().map_or(0, |z| z.to_u8()).wrapping_add(A::FLIP);
    let zy = y_zp.first().map_or(0, |z| z.to_i64()) as i32;
    let (sums, panels) = bp.split_at(d.n * 4);
    let rq = Requant::new(sums, bias, za, zy, a_scale[0], b_scale, y_scale[0], d.n, add, mult);
    let (blocks, block_words) = (d.blocks(), kq * MR);
    #[cfg(feature = "std")]
    let split = crate::pool::threads() > 1 && d.m * d.k * d.n >= 4 * crate::PARALLEL_WORK;
    #[cfg(not(feature = "std"))]
    let split = false;
    let over = |n: usize, f: &(dyn Fn(usize) + Sync)| if split { crate::pool_for(n, f) } else { (0..n).for_each(f) };
    let ap = ablocks.as_mut_ptr() as usize;
    // SAFETY: block `bi` writes only its own `block_words` words of `ablocks` (its length is
    // `blocks · block_words`, asserted through `scratch_len`), borrowed mutably by this call.
    over(blocks, &|bi| copy_block(a, d, bi, za, A::FLIP, unsafe { core::slice::from_raw_parts_mut((ap as *mut u32).add(bi * block_words), block_words) }));
    // SAFETY: the words' bytes, in memory order (u8 has no alignment, every byte is init).
    let ab = unsafe { core::slice::from_raw_parts(ablocks.as_ptr() as *const u8, blocks * block_words * 4) };
    let kern = kernel();
    // Tasks: column panels × groups of row blocks (a task streams its panels' weights once
    // over its rows; small products split their rows too, so both threads have work).
    let groups = if split { blocks.min(8usize.div_ceil(d.panels())).max(1) } else { 1 };
    let per_group = blocks.div_ceil(groups);
    let (yp, ylen) = (y.as_mut_ptr() as usize, y.len());
    over(d.panels() * groups, &|t| {
        let (p, gi) = (t / groups, t % groups);
        let bpanel = &panels[p * kq * NR * 4..(p + 1) * kq * NR * 4];
        for bi in (gi * per_group..(gi + 1) * per_group).take_while(|&b| b < blocks) {
            let mut tile = [[0u8; NR]; MR];
            tile_requant::<Q>(kern, kq, &ab[bi * block_words * 4..(bi + 1) * block_words * 4], bpanel, &rq, p * NR, &mut tile);
            // SAFETY: tile (bi, p) writes only its own rows × columns of the `ylen` elements
            // at `yp`, borrowed mutably by this call: disjoint from every other tile's.
            unsafe { store(d, &tile, bi * MR, p * NR, yp as *mut Q, ylen) };
        }
    });
}

/// Row block `bi` of A into `out` as `[q][r]` words: row `bi·MR + r`'s bytes `4q..4q + 4`
/// (shifted by `flip`), zero-point bytes past the last row and zeros past k (B holds zeros
/// there, so they add nothing).
fn copy_block<A: QByte>(a: &[A], d: &QGemmDims, bi: usize, za: u8, flip: u8, out: &mut [u32]) {
    let kq = d.kq();
    for r in 0..MR {
        let row = bi * MR + r;
        if row >= d.m {
            for q in 0..kq {
                out[q * MR + r] = u32::from_ne_bytes([za; 4]);
            }
            continue;
        }
        let src = &a[row * d.k..(row + 1) * d.k];
        let (quads, tail) = src.split_at(d.k / 4 * 4);
        for (q, v) in quads.chunks_exact(4).enumerate() {
            out[q * MR + r] = u32::from_ne_bytes([v[0].to_u8() ^ flip, v[1].to_u8() ^ flip, v[2].to_u8() ^ flip, v[3].to_u8() ^ flip]);
        }
        if !tail.is_empty() {
            let mut last = [0u8; 4];
            for (o, v) in last.iter_mut().zip(tail) {
                *o = v.to_u8() ^ flip;
            }
            out[(kq - 1) * MR + r] = u32::from_ne_bytes(last);
        }
    }
}

/// One tile: A's row block `a` × the B panel `b` (columns from `c0`), requantized into `out`.
fn tile_requant<Q: QByte>(kern: Kernel, kq: usize, a: &[u8], b: &[u8], rq: &Requant, c0: usize, out: &mut [[u8; NR]; MR]) {
    assert!(a.len() >= kq * MR * 4 && b.len() >= kq * NR * 4 && rq.add.len() >= c0 + NR && rq.mult.len() >= c0 + NR);
    #[cfg(target_arch = "x86_64")]
    if kern == Kernel::Vnni && rq.vector {
        // SAFETY: the CPU has AVX-512F and VNNI (`kernel`); the reads are in bounds (asserted).
        unsafe { tile_vnni(kq, a.as_ptr(), b.as_ptr(), &rq.add[c0..c0 + NR], &rq.mult[c0..c0 + NR], rq.zy, Q::LO, Q::HI, out) };
        return;
    }
    let _ = kern;
    let mut acc = [[0i32; NR]; MR];
    for q in 0..kq {
        let (aq, bq) = (&a[q * MR * 4..(q + 1) * MR * 4], &b[q * NR * 4..(q + 1) * NR * 4]);
        for (row, av) in acc.iter_mut().zip(aq.chunks_exact(4)) {
            for (o, w) in row.iter_mut().zip(bq.chunks_exact(4)) {
                *o += (0..4).map(|j| av[j] as i32 * w[j] as i8 as i32).sum::<i32>();
            }
        }
    }
    for (row, o) in acc.iter().zip(out.iter_mut()) {
        for (c, (v, o)) in row.iter().zip(o.iter_mut()).enumerate() {
            let mult = f32::from_bits(rq.mult[c0 + c]);
            *o = requantize_one::<Q>(*v as i64 + rq.add_exact(c0 + c), mult as f64, rq.zy as i64, ScalePrec::F32).to_u8();
        }
    }
}

/// [`tile_requant`] with AVX-512 VNNI: 24 accumulators (MR rows × two 16-column vectors), each
/// k quad one `vpdpbusd` per accumulator with the row's 4 activation bytes broadcast.
///
/// # Safety
/// AVX-512F and VNNI; `a` holds `kq·MR·4` bytes and `b` `kq·NR·4`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn tile_vnni(kq: usize, a: *const u8, b: *const u8, add: &[u32], mult: &[u32], zy: i32, lo: i32, hi: i32, out: &mut [[u8; NR]; MR]) {
    use core::arch::x86_64::*;
    let mut c = [[_mm512_setzero_si512(); 2]; MR];
    for q in 0..kq {
        // SAFETY (this block): in bounds by the contract.
        unsafe {
            let bq = b.add(q * NR * 4);
            let bv = [_mm512_loadu_si512(bq as *const _), _mm512_loadu_si512(bq.add(64) as *const _)];
            quad_step::<true>(&mut c, bv, a.add(q * MR * 4) as *const i32);
        }
    }
    for v in 0..2 {
        // SAFETY: 16 columns from 16·v, inside `add` and `mult` (NR each).
        let (o, m) = unsafe { (_mm512_loadu_si512(add[16 * v..].as_ptr() as *const _), _mm512_loadu_ps(mult[16 * v..].as_ptr() as *const f32)) };
        for r in 0..MR {
            // SAFETY: 16 bytes of row r from column 16·v, inside `out`.
            unsafe { _mm_storeu_si128(out[r][16 * v..].as_mut_ptr() as *mut __m128i, requant16(c[r][v], o, m, zy, lo, hi)) };
        }
    }
}

/// Tile rows `r0..r0 + MR` × columns `c0..c0 + NR` into `y` (`ylen` elements), the rows past
/// `m` and columns past `n` dropped.
///
/// # Safety
/// `y` is valid for `ylen` elements and nothing else writes these elements meanwhile.
unsafe fn store<Q: QByte>(d: &QGemmDims, tile: &[[u8; NR]; MR], r0: usize, c0: usize, y: *mut Q, ylen: usize) {
    let cols = NR.min(d.n - c0);
    for (r, row) in tile.iter().enumerate().take(d.m.saturating_sub(r0)) {
        let at = (r0 + r) * d.n + c0;
        assert!(at + cols <= ylen, "qgemm: output too short");
        // SAFETY: in bounds (asserted); these elements are this call's alone; a byte copy
        // (`Q` is one byte, `from_u8` a cast).
        unsafe { core::ptr::copy_nonoverlapping(row.as_ptr(), y.add(at) as *mut u8, cols) };
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::quant::{matmul_integer, qlinear_matmul_requant};
    use super::super::test_rng::bytes;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// The packed product against the reference (`matmul_integer`, then
    /// `qlinear_matmul_requant` with the bias), bit for bit.
    fn check<A: QByte, Q: QByte + core::fmt::Debug + PartialEq>(m: usize, k: usize, n: usize, transposed: bool, per_column: bool, with_bias: bool) {
        let d = QGemmDims { m, k, n };
        assert!(takes(&d));
        let a: Vec<A> = bytes(m * k, 11).into_iter().map(A::from_u8).collect();
        let b: Vec<i8> = bytes(k * n, 12).into_iter().map(|v| v as i8).collect();
        let bias: Vec<i32> = if with_bias { bytes(n, 13).into_iter().map(|v| (v as i32 - 128) * 311).collect() } else { vec![] };
        let (az, yz) = ([A::from_u8(bytes(1, 14)[0])], [Q::from_u8(bytes(1, 15)[0])]);
        let bs: Vec<f32> = if per_column { (0..n).map(|i| 0.001 + i as f32 * 0.0003).collect() } else { vec![0.002] };
        let (as_, ys) = ([0.04f32], [0.9f32]);
        let mut bp = vec![0u8; packed_len(&d)];
        pack_weights(&d, &b, transposed, &mut bp);
        let mut scratch = vec![0xA5A5_A5A5u32; scratch_len(&d)];
        let mut got = vec![Q::from_u8(0); m * n];
        qlinear_matmul_prepacked(&a, &bp, &az, &bias, &as_, &bs, &ys, &yz, &d, &mut scratch, &mut got);
        // The reference reads B as [k][n].
        let bkn: Vec<i8> = if transposed { (0..k * n).map(|i| b[(i % n) * k + i / n]).collect() } else { b.clone() };
        let mut acc = vec![0i32; m * n];
        matmul_integer(&a, &bkn, &az, &[], &[0], &[0], m, k, n, &mut acc);
        let mut want = vec![Q::from_u8(0); m * n];
        qlinear_matmul_requant(&acc, &bias, &as_, &bs, &ys, &yz, ScalePrec::F32, m, n, &mut want);
        assert_eq!(got, want, "m {m} k {k} n {n} transposed {transposed}");
        assert!(got.iter().any(|v| v.to_u8() != got[0].to_u8()), "a constant output proves little");
    }

    #[test]
    fn matches_the_reference_bit_for_bit() {
        // Whole tiles; u8 in and out, per-column scales and a bias (a MatMul + Add as QGemm).
        check::<u8, u8>(24, 64, 64, false, true, true);
        // Ragged rows, columns and k (not a multiple of 4); i8 in and out; B stored [n][k].
        check::<i8, i8>(13, 37, 45, true, false, false);
        check::<u8, i8>(1, 5, 3, false, true, false);
        check::<i8, u8>(50, 200, 70, false, true, true);
    }

    #[cfg(feature = "std")]
    #[test]
    fn two_threads_agree() {
        crate::pool::set_threads(2);
        check::<u8, u8>(128, 384, 96, false, true, true);
        check::<i8, u8>(7, 300, 33, false, true, false);
    }
}
