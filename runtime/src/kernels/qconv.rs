//! Quantized 2-D convolutions (QLinearConv with u8 or i8 activations and i8 weights whose zero
//! points are 0, as onnxruntime's static quantizer writes them) over weights packed at compile
//! time: the integer sums four bytes at a time (AVX-512 VNNI `vpdpbusd` where the CPU has it),
//! requantized in vector registers.
//!
//! The input is copied once per call into channel quads: `src[q][y][x][j]` holds channel
//! `4q + j` at padded position `(y, x)` as a u8 (i8 values shifted by 128, which the zero point
//! takes back), so the four bytes one VNNI lane multiplies lie together. The padding holds the
//! zero point, whose products the per-channel weight sums take back:
//! `Σ (x − zx)·w = Σ x·w − zx·Σ w`. With stride 1 a tap's B row is a shifted run of that copy
//! (the output computed over a virtual grid `oh × wp` whose extra columns are dropped, as in
//! `shifted.rs`); with strides the runs are gathered into an im2col matrix first. Integer sums
//! are exact in any order, so the result is the reference's (`quant::qlinear_conv`) bit for
//! bit: the requantization is `requantize_one`'s f32 product, rounded to nearest even.
use super::conv::ConvDims;
pub use super::q8::QByte;
#[cfg(target_arch = "x86_64")]
use super::q8::{quad_step, requant16};
use super::q8::{kernel, Kernel, Requant, MAX_K, TILE_ROWS};
use super::quant::{requantize_one, ScalePrec};
use super::window::Window3;

/// Output channels per packed weight panel (the rows of a tile).
pub const MR: usize = TILE_ROWS;
/// Output pixels per tile (two 16-lane vectors).
const NR: usize = 32;
/// Bytes of B one task's pixel blocks read, kept in L2 while every weight panel passes.
const CHUNK_BYTES: usize = 1 << 18;

/// Where one convolution's B matrix lies in the channel-quad copy of its input.
#[derive(Clone, Copy, Debug)]
struct Geom {
    c: usize,
    m: usize,
    /// Channel quads, `ceil(c / 4)`.
    cq: usize,
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pad: [usize; 2],
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    /// The padded copy's plane: the rows and columns the windows reach.
    hp: usize,
    wp: usize,
    /// Stride 1: B rows are runs of the copy over the virtual grid `oh × wp`.
    shifted: bool,
}

impl Geom {
    fn of(d: &ConvDims, win: &Window3) -> Option<Geom> {
        if d.group != 1 || d.c_in == 0 || d.c_out == 0 || win.input[0] != 1 || win.kernel[0] != 1 || win.output[0] != 1 || win.pads_begin[0] != 0 {
            return None;
        }
        // Only the leading pads matter: the windows' reach decides the copy (a negative trailing
        // pad, as a strided 1×1 window leaves, crops nothing it reads).
        if win.pads_begin.iter().any(|&p| p < 0) || win.strides[1..].contains(&0) || win.dilations[1..].contains(&0) {
            return None;
        }
        let (k, s, dl) = ([win.kernel[1], win.kernel[2]], [win.strides[1], win.strides[2]], [win.dilations[1], win.dilations[2]]);
        let (oh, ow) = (win.output[1], win.output[2]);
        if oh == 0 || ow == 0 || k.contains(&0) || d.c_in.checked_mul(k[0] * k[1])? > MAX_K {
            return None;
        }
        let reach = |o: usize, s: usize, k: usize, d: usize| Some((o - 1).checked_mul(s)?.checked_add((k - 1).checked_mul(d)?)? + 1);
        let (hp, wp) = (reach(oh, s[0], k[0], dl[0])?, reach(ow, s[1], k[1], dl[1])?);
        let g = Geom {
            c: d.c_in,
            m: d.c_out,
            cq: d.c_in.div_ceil(4),
            k,
            s,
            d: dl,
            pad: [win.pads_begin[1] as usize, win.pads_begin[2] as usize],
            h: win.input[1],
            w: win.input[2],
            oh,
            ow,
            hp,
            wp,
            shifted: s == [1, 1],
        };
        // Byte offsets are u32.
        (g.scratch_len()?.checked_mul(4)? <= u32::MAX as usize).then_some(g)
    }

    fn taps(&self) -> usize {
        self.k[0] * self.k[1]
    }

    /// k quads: every tap of every channel quad.
    fn kq(&self) -> usize {
        self.cq * self.taps()
    }

    fn panels(&self) -> usize {
        self.m.div_ceil(MR)
    }

    /// Columns of B: the virtual grid (stride 1) or the output pixels, in whole tiles.
    fn cols(&self) -> usize {
        let n = if self.shifted { self.oh * self.wp } else { self.oh * self.ow };
        n.div_ceil(NR) * NR
    }

    fn plane(&self) -> usize {
        self.hp * self.wp * 4
    }

    /// Byte offset of B row `(q, tap)` relative to a column's own offset (`4·col`).
    fn offset(&self, q: usize, tap: usize) -> usize {
        if self.shifted {
            let (ky, kx) = (tap / self.k[1], tap % self.k[1]);
            q * self.plane() + (ky * self.d[0] * self.wp + kx * self.d[1]) * 4
        } else {
            (q * self.taps() + tap) * self.cols() * 4
        }
    }

    /// Words of the copy: the planes, and with stride 1 the last tile's reach past them.
    fn src_words(&self) -> Option<usize> {
        let planes = self.cq.checked_mul(self.hp * self.wp)?;
        let reach = if self.shifted { (self.offset(self.cq - 1, self.taps() - 1) / 4).checked_add(self.cols())? } else { 0 };
        Some(planes.max(reach))
    }

    /// Words of scratch: the offset table, the per-channel sum offsets and multipliers, the
    /// copy, and with strides the im2col matrix.
    fn scratch_len(&self) -> Option<usize> {
        let im2col = if self.shifted { 0 } else { self.kq().checked_mul(self.cols())? };
        (self.kq() + 2 * self.panels() * MR).checked_add(self.src_words()?)?.checked_add(im2col)
    }

    /// Quad `q` of the channel-quad copy of one batch item's input into `plane` (`hp·wp`
    /// words), padded with `fill` (the zero point): one word per padded position, its bytes
    /// (in memory order) four channels.
    fn fill<X: QByte>(&self, q: usize, x: &[X], fill: u8, plane: &mut [u32]) {
        let (h, w, [p0, p1]) = (self.h, self.w, self.pad);
        let pad = u32::from_ne_bytes([fill; 4]);
        let flip = X::FLIP;
        let chans: [Option<&[X]>; 4] = core::array::from_fn(|j| {
            let c = 4 * q + j;
            (c < self.c).then(|| &x[c * h * w..(c + 1) * h * w])
        });
        for (yy, row) in plane.chunks_exact_mut(self.wp).enumerate() {
            let iy = yy.wrapping_sub(p0);
            if iy >= h {
                row.fill(pad);
                continue;
            }
            let (left, rest) = row.split_at_mut(p1.min(self.wp));
            left.fill(pad);
            let (mid, right) = rest.split_at_mut(w.min(rest.len()));
            right.fill(pad);
            let at = iy * w;
            match chans {
                // The common case, four channels: a loop LLVM turns into byte shuffles.
                [Some(a), Some(b), Some(c), Some(d)] => {
                    let (a, b, c, d) = (&a[at..at + mid.len()], &b[at..at + mid.len()], &c[at..at + mid.len()], &d[at..at + mid.len()]);
                    for (i, o) in mid.iter_mut().enumerate() {
                        *o = u32::from_ne_bytes([a[i].to_u8() ^ flip, b[i].to_u8() ^ flip, c[i].to_u8() ^ flip, d[i].to_u8() ^ flip]);
                    }
                }
                _ => {
                    let byte = |j: usize, i: usize| chans[j].map_or(fill, |ch: &[X]| ch[at + i].to_u8() ^ flip);
                    for (i, o) in mid.iter_mut().enumerate() {
                        *o = u32::from_ne_bytes([byte(0, i), byte(1, i), byte(2, i), byte(3, i)]);
                    }
                }
            }
        }
    }

    /// Strided: the B rows `(q, tap)` of quad `q` (`taps·cols` words from row `(q, 0)`):
    /// column `oy·ow + ox` = the quad's copy `plane` at `(oy·s + ky·d, ox·s + kx·d)`.
    fn gather(&self, plane: &[u32], rows: &mut [u32]) {
        let cols = self.cols();
        for tap in 0..self.taps() {
            let (ky, kx) = (tap / self.k[1], tap % self.k[1]);
            let row = &mut rows[tap * cols..(tap + 1) * cols];
            for oy in 0..self.oh {
                let line = &plane[(oy * self.s[0] + ky * self.d[0]) * self.wp + kx * self.d[1]..];
                for (ox, o) in row[oy * self.ow..(oy + 1) * self.ow].iter_mut().enumerate() {
                    *o = line[ox * self.s[1]];
                }
            }
        }
    }
}

/// Whether [`qlinear_conv_prepacked`] runs this convolution: 2-D, one group, non-negative
/// leading pads, at most [`MAX_K`] channels × taps.
pub fn takes(d: &ConvDims, win: &Window3) -> bool {
    Geom::of(d, win).is_some()
}

/// Scratch words (u32) of [`qlinear_conv_prepacked`] (0 where it does not run).
pub fn scratch_len(d: &ConvDims, win: &Window3) -> usize {
    Geom::of(d, win).and_then(|g| g.scratch_len()).unwrap_or(0)
}

/// Bytes of the packed weights: the per-channel weight sums (i32, little-endian), then panels
/// of [`MR`] channels × every k quad × 4 bytes.
pub fn packed_len(d: &ConvDims, win: &Window3) -> usize {
    Geom::of(d, win).map_or(0, |g| g.m * 4 + g.panels() * g.kq() * MR * 4)
}

/// Pack i8 weights `[m][c][kh][kw]` for [`qlinear_conv_prepacked`] into `out` ([`packed_len`]
/// bytes): panel `p`, k quad `(q, tap)`, row `r`, byte `j` holds channel `4q + j`'s weight for
/// output channel `p·MR + r` (zeros past the last channel or row).
pub fn pack_weights(d: &ConvDims, win: &Window3, w: &[i8], out: &mut [u8]) {
    let g = Geom::of(d, win).expect("qconv: pack_weights of a convolution it does not take");
    let taps = g.taps();
    assert!(w.len() >= g.m * g.c * taps && out.len() >= packed_len(d, win), "qconv: pack_weights buffers too short");
    let (sums, panels) = out.split_at_mut(g.m * 4);
    for (mo, s) in sums.chunks_exact_mut(4).enumerate() {
        let sum: i32 = w[mo * g.c * taps..(mo + 1) * g.c * taps].iter().map(|&v| v as i32).sum();
        s.copy_from_slice(&sum.to_le_bytes());
    }
    let kq = g.kq();
    for (i, b) in panels[..g.panels() * kq * MR * 4].iter_mut().enumerate() {
        let (j, r, k, p) = (i % 4, i / 4 % MR, i / (4 * MR) % kq, i / (4 * MR * kq));
        let (q, tap) = (k / taps, k % taps);
        let (mo, c) = (p * MR + r, 4 * q + j);
        *b = if mo < g.m && c < g.c { w[(mo * g.c + c) * taps + tap] as u8 } else { 0 };
    }
}

/// QLinearConv over weights packed by [`pack_weights`] (`wp`): `y = saturate(round((Σ (x − zx)·w
/// + bias) · x_scale·w_scale/y_scale) + zy)`, bit for bit `quant::qlinear_conv` with f32
/// scales. `x_zp`, `y_zp`: one value or empty (0); `w_scale`: one or one per output channel;
/// `bias`: empty or one per output channel; `scratch`: [`scratch_len`] words.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_conv_prepacked<X: QByte, Q: QByte>(
    x: &[X],
    wp: &[u8],
    x_zp: &[X],
    bias: &[i32],
    x_scale: &[f32],
    w_scale: &[f32],
    y_scale: &[f32],
    y_zp: &[Q],
    d: &ConvDims,
    win: &Window3,
    scratch: &mut [u32],
    y: &mut [Q],
) {
    let g = Geom::of(d, win).expect("qconv: a convolution it does not take");
    let (is, os, kq, mp) = (g.h * g.w, g.oh * g.ow, g.kq(), g.panels() * MR);
    assert!(
        x.len() >= d.batch * g.c * is && y.len() >= d.batch * g.m * os && wp.len() >= packed_len(d, win) && scratch.len() >= g.scratch_len().unwrap_or(usize::MAX),
        "qconv: buffers too short"
    );
    assert!(!x_scale.is_empty() && !y_scale.is_empty() && (w_scale.len() == 1 || w_scale.len() >= g.m), "qconv: scales");
    let (offs, rest) = scratch.split_at_mut(kq);
    let (add, rest) = rest.split_at_mut(mp);
    let (mult, rest) = rest.split_at_mut(mp);
    let (src, im2col) = rest.split_at_mut(g.src_words().unwrap_or(usize::MAX));
    for (i, o) in offs.iter_mut().enumerate() {
        *o = g.offset(i / g.taps(), i % g.taps()) as u32;
    }
    let zx = x_zp.first().map_or(0, |z| z.to_u8()).wrapping_add(X::FLIP);
    let zy = y_zp.first().map_or(0, |z| z.to_i64()) as i32;
    let (sums, panels) = wp.split_at(g.m * 4);
    let rq = Requant::new(sums, bias, zx, zy, x_scale[0], w_scale, y_scale[0], g.m, add, mult);
    // The B rows' reach, checked once per tile against this (not by walking the table).
    let max_off = offs.iter().max().map_or(0, |&o| o as usize);
    let kern = kernel();
    let cols = g.cols();
    let blocks = cols / NR;
    let per_chunk = (CHUNK_BYTES / (kq * NR * 4)).clamp(1, 16);
    let chunks = blocks.div_ceil(per_chunk);
    let yp = y.as_mut_ptr() as usize;
    let ylen = y.len();
    #[cfg(feature = "std")]
    let split = crate::pool::threads() > 1 && chunks > 1 && g.m * kq * 4 * cols >= 4 * crate::PARALLEL_WORK;
    #[cfg(not(feature = "std"))]
    let split = false;
    let over = |n: usize, f: &(dyn Fn(usize) + Sync)| if split { crate::pool_for(n, f) } else { (0..n).for_each(f) };
    // Small maps have few pixel chunks: their tasks also split the output channels' panels
    // (each task then streams only its panels' weights).
    let groups = if split { g.panels().min(8usize.div_ceil(chunks)) } else { 1 };
    let per_group = g.panels().div_ceil(groups);
    let (words, rows) = (g.hp * g.wp, g.taps() * cols);
    assert!(src.len() >= g.cq * words, "qconv: scratch too short");
    for n in 0..d.batch {
        let xn = &x[n * g.c * is..(n + 1) * g.c * is];
        let sp = src.as_mut_ptr() as usize;
        // SAFETY (both): quad q writes only its own plane / B rows, inside `src` / `im2col`
        // (their lengths are the geometry's), borrowed mutably by this call.
        over(g.cq, &|q| g.fill(q, xn, zx, unsafe { core::slice::from_raw_parts_mut((sp as *mut u32).add(q * words), words) }));
        let b: &[u32] = if g.shifted {
            src
        } else {
            let (src, bp) = (&*src, im2col.as_mut_ptr() as usize);
            assert!(im2col.len() >= g.cq * rows, "qconv: scratch too short");
            over(g.cq, &|q| g.gather(&src[q * words..(q + 1) * words], unsafe { core::slice::from_raw_parts_mut((bp as *mut u32).add(q * rows), rows) }));
            im2col
        };
        // SAFETY: the words' bytes, in memory order (u8 has no alignment, every byte is init).
        let b = unsafe { core::slice::from_raw_parts(b.as_ptr() as *const u8, b.len() * 4) };
        let y0 = n * g.m * os;
        let run = |t: usize| {
            let (c, pg) = (t / groups, t % groups);
            let blk = c * per_chunk..((c + 1) * per_chunk).min(blocks);
            for p in (pg * per_group..(pg + 1) * per_group).take_while(|&p| p < g.panels()) {
                let a = &panels[p * kq * MR * 4..(p + 1) * kq * MR * 4];
                for bi in blk.clone() {
                    let mut tile = [[0u8; NR]; MR];
                    tile_requant::<Q>(kern, kq, a, b, offs, max_off, bi * NR, &rq, p * MR, &mut tile);
                    // SAFETY: block `bi` writes only its own output pixels (each column of the
                    // grid is one pixel or dropped) of the `ylen` elements at `yp`, borrowed
                    // mutably by this call: disjoint from every other block's.
                    unsafe { store(&g, &tile, bi * NR, p * MR, yp as *mut Q, ylen, y0) };
                }
            }
        };
        over(chunks * groups, &run);
    }
}

/// One tile: rows `m0..m0 + MR` (panel `a`) × columns `j0..j0 + NR`, requantized into `out`;
/// `max_off`: the largest of `offs`.
#[allow(clippy::too_many_arguments)]
fn tile_requant<Q: QByte>(kern: Kernel, kq: usize, a: &[u8], b: &[u8], offs: &[u32], max_off: usize, j0: usize, rq: &Requant, m0: usize, out: &mut [[u8; NR]; MR]) {
    assert!(a.len() >= kq * MR * 4 && offs.len() >= kq && rq.add.len() >= m0 + MR && rq.mult.len() >= m0 + MR);
    debug_assert!(offs[..kq].iter().all(|&o| o as usize <= max_off));
    assert!(max_off + (j0 + NR) * 4 <= b.len(), "qconv: B too short");
    #[cfg(target_arch = "x86_64")]
    if kern == Kernel::Vnni && rq.vector {
        // SAFETY: the CPU has AVX-512F and VNNI (`kernel`); the reads are in bounds (asserted).
        unsafe { tile_vnni(kq, a.as_ptr(), b.as_ptr(), offs.as_ptr(), j0 * 4, &rq.add[m0..m0 + MR], &rq.mult[m0..m0 + MR], rq.zy, Q::LO, Q::HI, out) };
        return;
    }
    let _ = kern;
    let mut acc = [[0i32; NR]; MR];
    for k in 0..kq {
        let bk = &b[offs[k] as usize + j0 * 4..][..NR * 4];
        let ak = &a[k * MR * 4..(k + 1) * MR * 4];
        for (r, row) in acc.iter_mut().enumerate() {
            let w = [ak[4 * r] as i8 as i32, ak[4 * r + 1] as i8 as i32, ak[4 * r + 2] as i8 as i32, ak[4 * r + 3] as i8 as i32];
            for (o, bb) in row.iter_mut().zip(bk.chunks_exact(4)) {
                *o += bb[0] as i32 * w[0] + bb[1] as i32 * w[1] + bb[2] as i32 * w[2] + bb[3] as i32 * w[3];
            }
        }
    }
    for (r, (row, o)) in acc.iter().zip(out.iter_mut()).enumerate() {
        let (add, mult) = (rq.add_exact(m0 + r), f32::from_bits(rq.mult[m0 + r]));
        for (v, o) in row.iter().zip(o.iter_mut()) {
            *o = requantize_one::<Q>(*v as i64 + add, mult as f64, rq.zy as i64, ScalePrec::F32).to_u8();
        }
    }
}

/// [`tile_requant`] with AVX-512 VNNI: 24 accumulators (MR rows × two 16-pixel vectors), each
/// k quad one `vpdpbusd` per accumulator with the panel's 4 weight bytes broadcast.
///
/// # Safety
/// AVX-512F and VNNI; `a` holds `kq·MR·4` bytes, `off` `kq` offsets, and `b[off[k] + j0b ..]
/// [..128]` is readable for every k.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn tile_vnni(kq: usize, a: *const u8, b: *const u8, off: *const u32, j0b: usize, add: &[u32], mult: &[u32], zy: i32, lo: i32, hi: i32, out: &mut [[u8; NR]; MR]) {
    use core::arch::x86_64::*;
    let mut c = [[_mm512_setzero_si512(); 2]; MR];
    for k in 0..kq {
        // SAFETY (this block): in bounds by the contract.
        unsafe {
            let bp = b.add(*off.add(k) as usize + j0b);
            let bv = [_mm512_loadu_si512(bp as *const _), _mm512_loadu_si512(bp.add(64) as *const _)];
            quad_step::<false>(&mut c, bv, a.add(k * MR * 4) as *const i32);
        }
    }
    for r in 0..MR {
        let (o, m) = (_mm512_set1_epi32(add[r] as i32), _mm512_set1_ps(f32::from_bits(mult[r])));
        for v in 0..2 {
            // SAFETY: 16 bytes of row r from column 16·v, inside `out`.
            unsafe { _mm_storeu_si128(out[r][16 * v..].as_mut_ptr() as *mut __m128i, requant16(c[r][v], o, m, zy, lo, hi)) };
        }
    }
}

/// Tile columns `j0..j0 + NR` of channels `m0..m0 + MR` into the output (`ylen` elements at
/// `y`, batch item from `y0`): the virtual grid's extra columns and the rows past `m` dropped.
///
/// # Safety
/// `y` is valid for `ylen` elements and nothing else writes these pixels meanwhile.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn store<Q: QByte>(g: &Geom, tile: &[[u8; NR]; MR], j0: usize, m0: usize, y: *mut Q, ylen: usize, y0: usize) {
    let os = g.oh * g.ow;
    let (width, n) = if g.shifted { (g.wp, g.oh * g.wp) } else { (g.ow, os) };
    let mut j = j0;
    let end = (j0 + NR).min(n);
    while j < end {
        let (oy, ox) = (j / width, j % width);
        let run_end = (j - ox + width).min(end);
        let valid = if ox < g.ow { (run_end - j).min(g.ow - ox) } else { 0 };
        for r in 0..MR.min(g.m.saturating_sub(m0)) {
            let at = y0 + (m0 + r) * os + oy * g.ow + ox;
            if valid == 0 {
                continue;
            }
            assert!(at + valid <= ylen, "qconv: output too short");
            // SAFETY: in bounds (asserted); these pixels are this call's alone.
            let run = unsafe { core::slice::from_raw_parts_mut(y.add(at), valid) };
            // A byte copy (`from_u8` is a cast).
            for (o, &v) in run.iter_mut().zip(&tile[r][j - j0..]) {
                *o = Q::from_u8(v);
            }
        }
        j = run_end;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::quant::{qlinear_conv, ConvGeom};
    use super::super::test_rng::bytes;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    #[allow(clippy::too_many_arguments)]
    fn check<X: QByte, Q: QByte + core::fmt::Debug + PartialEq>(batch: usize, c: usize, m: usize, hw: [usize; 2], k: [usize; 2], s: [usize; 2], dil: [usize; 2], pb: [usize; 2], pe: [usize; 2], per_channel: bool, with_bias: bool) {
        let out = |i: usize| (hw[i] + pb[i] + pe[i] - (k[i] - 1) * dil[i] - 1) / s[i] + 1;
        let (oh, ow) = (out(0), out(1));
        let win = Window3::new(&hw, &[oh, ow], &k, &s, &dil, &[pb[0] as isize, pb[1] as isize], &[pe[0] as isize, pe[1] as isize]).unwrap();
        let d = ConvDims { batch, c_in: c, c_out: m, group: 1 };
        assert!(takes(&d, &win));
        let x: Vec<X> = bytes(batch * c * hw[0] * hw[1], 1).into_iter().map(X::from_u8).collect();
        let w: Vec<i8> = bytes(m * c * k[0] * k[1], 2).into_iter().map(|b| b as i8).collect();
        let bias: Vec<i32> = if with_bias { bytes(m, 3).into_iter().map(|b| (b as i32 - 128) * 517).collect() } else { vec![] };
        let (xz, yz) = ([X::from_u8(bytes(1, 4)[0])], [Q::from_u8(bytes(1, 5)[0])]);
        let ws: Vec<f32> = if per_channel { (0..m).map(|i| 0.002 + i as f32 * 0.0007).collect() } else { vec![0.003] };
        let (xs, ys) = ([0.05f32], [0.7f32]);
        let mut wp = vec![0u8; packed_len(&d, &win)];
        pack_weights(&d, &win, &w, &mut wp);
        let mut scratch = vec![0xA5A5_A5A5u32; scratch_len(&d, &win)];
        let mut got = vec![Q::from_u8(0); batch * m * oh * ow];
        qlinear_conv_prepacked(&x, &wp, &xz, &bias, &xs, &ws, &ys, &yz, &d, &win, &mut scratch, &mut got);
        let geom = ConvGeom { nb: batch, c, m, group: 1, ins: &hw, outs: &[oh, ow], ks: &k, strides: &s, dil: &dil, pad_begin: &pb };
        let mut want = vec![Q::from_u8(0); got.len()];
        qlinear_conv(&x, &w, &xz, &[], &bias, &xs, &ws, &ys, &yz, ScalePrec::F32, &geom, &mut want);
        assert_eq!(got, want, "c {c} m {m} hw {hw:?} k {k:?} s {s:?} dil {dil:?} pads {pb:?} {pe:?}");
        assert!(got.iter().any(|v| v.to_u8() != got[0].to_u8()), "a constant output proves little");
    }

    #[test]
    fn matches_the_reference_bit_for_bit() {
        // 3×3 same, channels not a multiple of 4, rows not of MR, a ragged last tile.
        check::<u8, u8>(1, 7, 13, [9, 11], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], true, true);
        // Pointwise, i8 in and out, per-tensor scale, no bias, two batch items.
        check::<i8, i8>(2, 16, 24, [5, 7], [1, 1], [1, 1], [1, 1], [0, 0], [0, 0], false, false);
        // Strided 7×7 stem-like, uneven pads; dilation; u8 in, i8 out.
        check::<u8, i8>(1, 3, 8, [20, 17], [7, 7], [2, 2], [1, 1], [3, 2], [2, 3], true, true);
        check::<i8, u8>(1, 5, 6, [12, 12], [3, 3], [1, 1], [2, 2], [2, 2], [2, 2], true, true);
        // Strided pointwise and a 1×5 window with stride (1, 2).
        check::<u8, u8>(1, 8, 30, [9, 9], [1, 1], [2, 2], [1, 1], [0, 0], [0, 0], true, true);
        check::<u8, u8>(1, 6, 14, [10, 12], [1, 1], [2, 2], [1, 1], [0, 0], [0, 0], true, true);
        check::<u8, u8>(1, 4, 5, [6, 19], [1, 5], [1, 2], [1, 1], [0, 2], [0, 2], true, false);
    }

    #[cfg(feature = "std")]
    #[test]
    fn two_threads_agree() {
        crate::pool::set_threads(2);
        check::<u8, u8>(1, 32, 40, [30, 30], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], true, true);
        check::<u8, u8>(1, 64, 20, [16, 16], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], true, true);
    }
}
