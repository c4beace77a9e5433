//! Quantized 2-D convolutions (QLinearConv with u8 or i8 activations and i8 weights whose zero
//! points are 0, as onnxruntime's static quantizer writes them) over weights packed at compile
//! time: the integer sums four bytes at a time (AVX-512 VNNI `vpdpbusd` where the CPU has it),
//! requantized in vector registers.
//!
//! The input is copied once per call into channel quads: a word holds channels `4q … 4q + 3`
//! of one padded position as u8 (i8 values shifted by 128, which the zero point takes back),
//! so the four bytes one VNNI lane multiplies lie together. The padding holds the zero point,
//! whose products the per-channel weight sums take back: `Σ (x − zx)·w = Σ x·w − zx·Σ w`.
//! Every tap's B row is then a shifted run of that copy (as in `shifted.rs`): the output is
//! computed over a virtual grid `oh × wq` whose extra columns are dropped, and a stride `s` is
//! made unit by splitting the padded input into phase planes (rows `a, a + s, …`, columns
//! `b, b + s, …`; only the phases some tap reads), so a strided convolution copies each input
//! byte once instead of once per tap (an im2col matrix: 9× the bytes for 3×3, and half of a
//! strided convolution's time on Zen 5). Integer sums are exact in any order, so the result is
//! the reference's (`quant::qlinear_conv`) bit for bit: the requantization is
//! `requantize_one`'s f32 product, rounded to nearest even.
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

/// Where one convolution's B matrix lies in the phase-split channel-quad copy of its input.
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
    /// A phase plane: `ceil(reach / s)` rows and columns of the padded positions the windows
    /// reach.
    hq: usize,
    wq: usize,
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
            hq: hp.div_ceil(s[0]),
            wq: wp.div_ceil(s[1]),
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

    /// Whether some tap reads phase `p` along axis `i` (0: rows, 1: columns).
    fn reads(&self, i: usize, p: usize) -> bool {
        (0..self.k[i]).any(|t| t * self.d[i] % self.s[i] == p)
    }

    /// Phases read along axis `i` below `p`: phase `p`'s index among the copied ones.
    fn phase_index(&self, i: usize, p: usize) -> usize {
        (0..p).filter(|&q| self.reads(i, q)).count()
    }

    /// Phase planes per channel quad.
    fn phases(&self) -> usize {
        self.phase_index(0, self.s[0]) * self.phase_index(1, self.s[1])
    }

    fn plane(&self) -> usize {
        self.hq * self.wq
    }

    /// Columns of B: the virtual grid, in whole tiles.
    fn cols(&self) -> usize {
        (self.oh * self.wq).div_ceil(NR) * NR
    }

    /// Byte offset of B row `(q, tap)` relative to a column's own offset (`4·col`).
    fn offset(&self, q: usize, tap: usize) -> usize {
        let (y, x) = (tap / self.k[1] * self.d[0], tap % self.k[1] * self.d[1]);
        let phase = self.phase_index(0, y % self.s[0]) * self.phase_index(1, self.s[1]) + self.phase_index(1, x % self.s[1]);
        ((q * self.phases() + phase) * self.plane() + y / self.s[0] * self.wq + x / self.s[1]) * 4
    }

    /// Words of the copy: the planes, and the last tile's reach past them.
    fn src_words(&self) -> Option<usize> {
        let planes = self.cq.checked_mul(self.phases())?.checked_mul(self.plane())?;
        let last = (0..self.taps()).map(|t| self.offset(self.cq - 1, t)).max().unwrap_or(0);
        Some(planes.max((last / 4).checked_add(self.cols())?))
    }

    /// Words of scratch: the offset table, the per-channel sum offsets and multipliers, and
    /// the copy.
    fn scratch_len(&self) -> Option<usize> {
        (self.kq() + 2 * self.panels() * MR).checked_add(self.src_words()?)
    }

    /// Quad `q`'s phase planes of one batch item's input `x` into `planes` (`phases · hq · wq`
    /// words), padded with `fill` (the zero point): one word per padded position, its bytes (in
    /// memory order) four channels.
    fn fill<X: QByte>(&self, q: usize, x: &[X], fill: u8, planes: &mut [u32]) {
        let (h, w, [p0, p1], [s0, s1]) = (self.h, self.w, self.pad, self.s);
        let pad = u32::from_ne_bytes([fill; 4]);
        let flip = X::FLIP;
        // SAFETY: u8 and i8 have one layout.
        let x = unsafe { core::slice::from_raw_parts(x.as_ptr() as *const u8, x.len()) };
        let chans: [Option<&[u8]>; 4] = core::array::from_fn(|j| {
            let c = 4 * q + j;
            (c < self.c).then(|| &x[c * h * w..(c + 1) * h * w])
        });
        let mut planes = planes.chunks_exact_mut(self.plane());
        for a in (0..s0).filter(|&a| self.reads(0, a)) {
            for b in (0..s1).filter(|&b| self.reads(1, b)) {
                let Some(plane) = planes.next() else { return };
                // Columns c of the plane read input column c·s1 + b − p1, when in 0..w.
                let c0 = p1.saturating_sub(b).div_ceil(s1).min(self.wq);
                let c1 = (w + p1).saturating_sub(b).div_ceil(s1).clamp(c0, self.wq);
                for (r, row) in plane.chunks_exact_mut(self.wq).enumerate() {
                    let iy = (r * s0 + a).wrapping_sub(p0);
                    if iy >= h || c0 == c1 {
                        row.fill(pad);
                        continue;
                    }
                    row[..c0].fill(pad);
                    row[c1..].fill(pad);
                    let first = iy * w + c0 * s1 + b - p1;
                    let n = c1 - c0;
                    let run = |j: usize| chans[j].map(|ch| &ch[first..first + (n - 1) * s1 + 1]);
                    interleave(run(0), run(1), run(2), run(3), s1, flip, fill, &mut row[c0..c1]);
                }
            }
        }
    }
}

/// `out[i]` = the bytes `a[i·s], b[i·s], c[i·s], d[i·s]` (each xor `flip`; a missing channel
/// gives `fill`) as one word in memory order.
#[allow(clippy::too_many_arguments)]
fn interleave(a: Option<&[u8]>, b: Option<&[u8]>, c: Option<&[u8]>, d: Option<&[u8]>, s: usize, flip: u8, fill: u8, out: &mut [u32]) {
    match (a, b, c, d, s) {
        (Some(a), Some(b), Some(c), Some(d), 1) => interleave4::<1>([a, b, c, d], flip, out),
        (Some(a), Some(b), Some(c), Some(d), 2) => interleave4::<2>([a, b, c, d], flip, out),
        _ => {
            let byte = |ch: Option<&[u8]>, j: usize| ch.map_or(fill, |ch| ch[j * s] ^ flip);
            for (j, o) in out.iter_mut().enumerate() {
                *o = u32::from_ne_bytes([byte(a, j), byte(b, j), byte(c, j), byte(d, j)]);
            }
        }
    }
}

/// [`interleave`] of four channels with stride `S` (1, or 2 for the phase planes of strided
/// windows).
fn interleave4<const S: usize>([a, b, c, d]: [&[u8]; 4], flip: u8, out: &mut [u32]) {
    let n = out.len();
    assert!(n == 0 || [a, b, c, d].iter().all(|p| p.len() > S * (n - 1)), "qconv: interleave past its rows");
    #[allow(unused_mut)]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::*;
        let len = a.len().min(b.len()).min(c.len()).min(d.len());
        // SSE2 (every x86-64): 16 positions per step, a round of byte then of word unpacks;
        // with stride 2, every other byte first.
        // SAFETY: every load reads p[S·i .. S·(i + 16)] within `len`, every store out[i .. i +
        // 16] within n (the loop condition).
        unsafe {
            let (f, even) = (_mm_set1_epi8(flip as i8), _mm_set1_epi16(0x00FF));
            let ld = |p: &[u8], i: usize| {
                let p = p.as_ptr().add(S * i) as *const __m128i;
                let v = if S == 1 { _mm_loadu_si128(p) } else { _mm_packus_epi16(_mm_and_si128(_mm_loadu_si128(p), even), _mm_and_si128(_mm_loadu_si128(p.add(1)), even)) };
                _mm_xor_si128(v, f)
            };
            while i + 16 <= n && S * (i + 16) <= len {
                let (va, vb, vc, vd) = (ld(a, i), ld(b, i), ld(c, i), ld(d, i));
                let (ab0, ab1) = (_mm_unpacklo_epi8(va, vb), _mm_unpackhi_epi8(va, vb));
                let (cd0, cd1) = (_mm_unpacklo_epi8(vc, vd), _mm_unpackhi_epi8(vc, vd));
                let o = out.as_mut_ptr().add(i) as *mut __m128i;
                _mm_storeu_si128(o, _mm_unpacklo_epi16(ab0, cd0));
                _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab0, cd0));
                _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab1, cd1));
                _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab1, cd1));
                i += 16;
            }
        }
    }
    for (j, o) in out.iter_mut().enumerate().skip(i) {
        *o = u32::from_ne_bytes([a[S * j] ^ flip, b[S * j] ^ flip, c[S * j] ^ flip, d[S * j] ^ flip]);
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
    // The copy and the stores move bytes (`QByte` is u8 or i8).
    assert!(core::mem::size_of::<X>() == 1 && core::mem::size_of::<Q>() == 1, "qconv: 8-bit elements");
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
    let src = &mut rest[..g.src_words().unwrap_or(usize::MAX)];
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
    let words = g.phases() * g.plane();
    assert!(src.len() >= g.cq * words, "qconv: scratch too short");
    for n in 0..d.batch {
        let xn = &x[n * g.c * is..(n + 1) * g.c * is];
        let sp = src.as_mut_ptr() as usize;
        // SAFETY: quad q writes only its own planes, inside `src` (asserted above), borrowed
        // mutably by this call.
        over(g.cq, &|q| g.fill(q, xn, zx, unsafe { core::slice::from_raw_parts_mut((sp as *mut u32).add(q * words), words) }));
        // SAFETY: the words' bytes, in memory order (u8 has no alignment, every byte is init:
        // the slack past the planes was written by an earlier call or holds the caller's
        // values; the columns that read it are dropped).
        let b = unsafe { core::slice::from_raw_parts(src.as_ptr() as *const u8, src.len() * 4) };
        let y0 = n * g.m * os;
        let run = |t: usize| {
            let (c, pg) = (t / groups, t % groups);
            let blk = c * per_chunk..((c + 1) * per_chunk).min(blocks);
            for p in (pg * per_group..(pg + 1) * per_group).take_while(|&p| p < g.panels()) {
                let a = &panels[p * kq * MR * 4..(p + 1) * kq * MR * 4];
                // This task's next panel, fetched while the first block uses this one: a deep
                // layer's weights come from memory once per run (7×7 maps: 1.3× faster).
                let next = if p + 1 < ((pg + 1) * per_group).min(g.panels()) { &panels[(p + 1) * kq * MR * 4..(p + 2) * kq * MR * 4] } else { &[] };
                for bi in blk.clone() {
                    let mut tile = [[0u8; NR]; MR];
                    tile_requant::<Q>(kern, kq, a, if bi == blk.start { next } else { &[] }, b, offs, max_off, bi * NR, &rq, p * MR, &mut tile);
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
/// `max_off`: the largest of `offs`; `next`: a panel to prefetch (or empty).
#[allow(clippy::too_many_arguments)]
fn tile_requant<Q: QByte>(kern: Kernel, kq: usize, a: &[u8], next: &[u8], b: &[u8], offs: &[u32], max_off: usize, j0: usize, rq: &Requant, m0: usize, out: &mut [[u8; NR]; MR]) {
    assert!(a.len() >= kq * MR * 4 && offs.len() >= kq && rq.add.len() >= m0 + MR && rq.mult.len() >= m0 + MR);
    debug_assert!(offs[..kq].iter().all(|&o| o as usize <= max_off));
    assert!(max_off + (j0 + NR) * 4 <= b.len(), "qconv: B too short");
    #[cfg(target_arch = "x86_64")]
    if kern == Kernel::Vnni && rq.vector {
        let (add, mult) = (&rq.add[m0..m0 + MR], &rq.mult[m0..m0 + MR]);
        // SAFETY: the CPU has AVX-512F and VNNI (`kernel`); the reads are in bounds (asserted),
        // the prefetches too (`next` holds a whole panel when not empty).
        unsafe {
            if next.len() >= kq * MR * 4 {
                tile_vnni::<true>(kq, a.as_ptr(), next.as_ptr(), b.as_ptr(), offs.as_ptr(), j0 * 4, add, mult, rq.zy, Q::LO, Q::HI, out)
            } else {
                tile_vnni::<false>(kq, a.as_ptr(), a.as_ptr(), b.as_ptr(), offs.as_ptr(), j0 * 4, add, mult, rq.zy, Q::LO, Q::HI, out)
            }
        };
        return;
    }
    let _ = (kern, next);
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
/// k quad one `vpdpbusd` per accumulator with the panel's 4 weight bytes broadcast; with
/// `PREFETCH`, the same k quad's bytes of the panel at `pf`.
///
/// # Safety
/// AVX-512F and VNNI; `a` (and `pf` with `PREFETCH`) holds `kq·MR·4` bytes, `off` `kq`
/// offsets, and `b[off[k] + j0b ..][..128]` is readable for every k.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn tile_vnni<const PREFETCH: bool>(kq: usize, a: *const u8, pf: *const u8, b: *const u8, off: *const u32, j0b: usize, add: &[u32], mult: &[u32], zy: i32, lo: i32, hi: i32, out: &mut [[u8; NR]; MR]) {
    use core::arch::x86_64::*;
    let mut c = [[_mm512_setzero_si512(); 2]; MR];
    for k in 0..kq {
        // SAFETY (this block): in bounds by the contract.
        unsafe {
            let bp = b.add(*off.add(k) as usize + j0b);
            let bv = [_mm512_loadu_si512(bp as *const _), _mm512_loadu_si512(bp.add(64) as *const _)];
            if PREFETCH {
                _mm_prefetch::<_MM_HINT_T0>(pf.add(k * MR * 4) as *const i8);
            }
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
    let (width, n) = (g.wq, g.oh * g.wq);
    let rows = MR.min(g.m.saturating_sub(m0));
    if width == g.ow && j0 + NR <= n {
        // No dropped columns (a pointwise window without padding): each row is one run.
        for r in 0..rows {
            let at = y0 + (m0 + r) * os + j0;
            assert!(at + NR <= ylen, "qconv: output too short");
            // SAFETY: in bounds (asserted); these pixels are this call's alone; a byte copy
            // (`Q` is one byte, `from_u8` a cast).
            unsafe { core::ptr::copy_nonoverlapping(tile[r].as_ptr(), y.add(at) as *mut u8, NR) };
        }
        return;
    }
    let mut j = j0;
    let end = (j0 + NR).min(n);
    while j < end {
        let (oy, ox) = (j / width, j % width);
        let run_end = (j - ox + width).min(end);
        let valid = if ox < g.ow { (run_end - j).min(g.ow - ox) } else { 0 };
        if valid > 0 {
            for r in 0..rows {
                let at = y0 + (m0 + r) * os + oy * g.ow + ox;
                assert!(at + valid <= ylen && j - j0 + valid <= NR, "qconv: output too short");
                // SAFETY: in bounds (asserted); these pixels are this call's alone; a byte copy
                // (`Q` is one byte, `from_u8` a cast).
                unsafe { core::ptr::copy_nonoverlapping(tile[r][j - j0..].as_ptr(), y.add(at) as *mut u8, valid) };
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
        // Phase planes some tap never reads: dilation 2 with stride 2 reads only even rows and
        // columns; stride 3 against dilation 2; unequal strides, kernels and dilations.
        check::<u8, u8>(1, 9, 10, [13, 11], [2, 2], [2, 2], [2, 2], [1, 0], [1, 2], true, true);
        check::<i8, u8>(1, 5, 7, [14, 16], [3, 3], [3, 3], [2, 2], [1, 2], [2, 1], false, true);
        check::<u8, i8>(2, 12, 13, [11, 15], [3, 2], [2, 3], [1, 2], [1, 1], [1, 0], true, false);
        // Rows of at least 16 positions over whole quads: the vector copy, with its tail.
        check::<i8, u8>(1, 8, 9, [5, 37], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], true, true);
        check::<u8, u8>(1, 11, 14, [4, 50], [1, 1], [1, 1], [1, 1], [0, 0], [0, 0], true, true);
        check::<i8, i8>(1, 8, 6, [6, 41], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], true, true);
        check::<u8, u8>(1, 4, 12, [3, 70], [1, 1], [2, 2], [1, 1], [0, 0], [0, 0], false, true);
        // Rows longer than the interleave buffer (2048 positions), placed in pieces.
        check::<u8, u8>(1, 8, 3, [2, 2100], [1, 3], [1, 2], [1, 1], [0, 1], [0, 1], true, true);
        check::<i8, i8>(1, 4, 5, [1, 4500], [1, 1], [1, 1], [1, 1], [0, 0], [0, 0], true, true);
        // An input with no columns: every position is padding.
        check::<u8, u8>(1, 5, 6, [3, 0], [3, 3], [1, 1], [1, 1], [1, 2], [1, 2], true, true);
    }

    #[cfg(feature = "std")]
    #[test]
    fn two_threads_agree() {
        crate::pool::set_threads(2);
        check::<u8, u8>(1, 32, 40, [30, 30], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], true, true);
        check::<u8, u8>(1, 64, 20, [16, 16], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], true, true);
    }
}
