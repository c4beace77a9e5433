//! 3×3 stride-1 convolution by Winograd's minimal filtering F(4×4, 3×3): each 4×4 block of
//! outputs ("tile") is `Aᵀ [U ⊙ V] A` with `U = G g Gᵀ` (the 3×3 filter taken to 6×6, done
//! once by the compiler) and `V = Bᵀ d B` (the tile's 6×6 input patch). Summed over input
//! channels, the 36 elementwise products become 36 GEMMs `M[ξ] = U[ξ] · V[ξ]`
//! (c_out × c_in by c_in × tiles), so the multiply-adds drop from 9 to 2.25 per output and
//! channel pair; the transforms are linear in the data, not in the channel product.
//!
//! Rounding differs from the direct sum (the transforms scale by up to 8 and 1/24), so the
//! compiler uses this only where it may change rounding (`passes::fuse`, what `burnc MODEL -o`
//! generates). Tiles run in blocks of whole tile rows, so a block's V and M stay in cache and
//! the epilogue (bias, scale, shift, residual, activation) runs on finished output rows.
use super::conv::{apply_epilogue, ConvDims, Epilogue};
use super::packed;
use super::window::Window3;

/// Output tile side.
const TILE: usize = 4;
/// Input patch side (TILE + 3 − 1) and the number of GEMMs (ALPHA²).
const ALPHA: usize = 6;
const XI: usize = ALPHA * ALPHA;
/// Bytes of V and M one block aims at (about L2).
const BLOCK_BYTES: usize = 1 << 20;
/// Fewest tiles per block: narrower GEMMs waste the micro-kernel's 16 columns.
const MIN_BLOCK_TILES: usize = 32;

/// Whether a convolution runs as [`conv_winograd`]: 2-D, 3×3, stride 1, no dilation, one
/// group, no cropping pads, and where it paid in a side-by-side timing against the GEMM: at
/// least 64 channels in and out (the transforms cost per channel, the GEMMs per channel pair)
/// and at least 49 tiles (the GEMMs' width), or 16 tiles with 256×256 channels. Against the
/// GEMM that packs its panels from the image (`im2col::Image`), on AMD Zen 5, one thread:
/// 64→64 at 40×40 0.88× the time, 128→128 at 28×28 0.73×; but 32→32 at 40×40 1.20×, 32→64
/// 1.13×, 48→48 1.04×, 64→32 1.04× (against the im2col tile, the earlier GEMM, 32 channels
/// paid on Zen 4 and Intel). 128→32 at 14×14 (16 tiles): 1.2×, so not taken.
pub fn applies(d: &ConvDims, win: &Window3) -> bool {
    let (th, tw) = tiles(win);
    let t = th * tw;
    win.kernel == [1, 3, 3]
        && win.strides == [1; 3]
        && win.dilations == [1; 3]
        && win.input[0] == 1
        && win.pads_begin.iter().chain(&win.pads_end).all(|&p| (0..=2).contains(&p))
        && d.group == 1
        && d.c_in >= 64
        && d.c_out >= 64
        && (t >= 49 || (t >= 16 && d.c_in * d.c_out >= 1 << 16))
}

/// Tiles along the output's height and width.
fn tiles(win: &Window3) -> (usize, usize) {
    (win.output[1].div_ceil(TILE), win.output[2].div_ceil(TILE))
}

/// Tile rows per block.
fn block_rows(d: &ConvDims, win: &Window3) -> usize {
    let (th, tw) = tiles(win);
    let per_tile = XI * (d.c_in + d.c_out) * 4;
    let want = (BLOCK_BYTES / per_tile).max(MIN_BLOCK_TILES);
    want.div_ceil(tw).clamp(1, th)
}

/// Elements of the weights transformed and packed by [`pack_weights`].
pub fn packed_len(d: &ConvDims) -> usize {
    XI * packed::packed_len(d.c_out, d.c_in)
}

/// Scratch elements [`conv_winograd`] needs: the GEMM's B panel, then V and M of one block.
pub fn scratch_len(d: &ConvDims, win: &Window3) -> usize {
    let nb = block_rows(d, win) * tiles(win).1;
    packed::prepacked_scratch_len(d.c_in) + XI * (d.c_in + d.c_out) * nb
}

/// `U[ξ] = (G g Gᵀ)[ξ]` for every (c_out, c_in) filter of `w` (`[c_out, c_in, 3, 3]`), in f64
/// and rounded once, each of the 36 c_out × c_in matrices packed by
/// [`packed::pack_weights`] (`out`: [`packed_len`] elements). The compiler's job, so it may
/// allocate.
#[cfg(feature = "alloc")]
pub fn pack_weights(d: &ConvDims, w: &[f32], out: &mut [f32]) {
    const G: [[f64; 3]; ALPHA] = [
        [0.25, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];
    let (co, ci) = (d.c_out, d.c_in);
    assert!(w.len() >= co * ci * 9 && out.len() >= packed_len(d), "winograd::pack_weights: slices too short");
    let mut u = alloc::vec![0f32; XI * co * ci];
    for m in 0..co {
        for c in 0..ci {
            let g = &w[(m * ci + c) * 9..(m * ci + c + 1) * 9];
            // t = G g (6×3), then U = t Gᵀ (6×6).
            let mut t = [[0f64; 3]; ALPHA];
            for (i, row) in t.iter_mut().enumerate() {
                for (col, v) in row.iter_mut().enumerate() {
                    *v = (0..3).map(|k| G[i][k] * g[k * 3 + col] as f64).sum();
                }
            }
            for i in 0..ALPHA {
                for j in 0..ALPHA {
                    let v: f64 = (0..3).map(|k| t[i][k] * G[j][k]).sum();
                    u[((i * ALPHA + j) * co + m) * ci + c] = v as f32;
                }
            }
        }
    }
    let plen = packed::packed_len(co, ci);
    for xi in 0..XI {
        packed::pack_weights(co, ci, &u[xi * co * ci..(xi + 1) * co * ci], ci, &mut out[xi * plen..(xi + 1) * plen]);
    }
}

/// Tiles transformed together, one per SIMD lane (loops over `[f32; L]` vectorize).
const L: usize = 8;
type Lanes = [f32; L];

#[inline(always)]
fn lanes(f: impl Fn(usize) -> f32) -> Lanes {
    core::array::from_fn(f)
}

/// `Bᵀ v` for one column or row of L 6×6 patches.
#[inline(always)]
fn input_1d(d: &[Lanes; ALPHA]) -> [Lanes; ALPHA] {
    [
        lanes(|k| 4.0 * d[0][k] - 5.0 * d[2][k] + d[4][k]),
        lanes(|k| (d[3][k] + d[4][k]) - 4.0 * (d[1][k] + d[2][k])),
        lanes(|k| (d[4][k] - d[3][k]) + 4.0 * (d[1][k] - d[2][k])),
        lanes(|k| (d[4][k] - d[2][k]) + 2.0 * (d[3][k] - d[1][k])),
        lanes(|k| (d[4][k] - d[2][k]) - 2.0 * (d[3][k] - d[1][k])),
        lanes(|k| 4.0 * d[1][k] - 5.0 * d[3][k] + d[5][k]),
    ]
}

/// `Aᵀ v` for one column or row of L 6×6 products.
#[inline(always)]
fn output_1d(m: &[Lanes; ALPHA]) -> [Lanes; TILE] {
    let a = lanes(|k| m[1][k] + m[2][k]);
    let b = lanes(|k| m[1][k] - m[2][k]);
    let c = lanes(|k| m[3][k] + m[4][k]);
    let e = lanes(|k| m[3][k] - m[4][k]);
    [
        lanes(|k| m[0][k] + a[k] + c[k]),
        lanes(|k| b[k] + 2.0 * e[k]),
        lanes(|k| a[k] + 4.0 * c[k]),
        lanes(|k| b[k] + 8.0 * e[k] + m[5][k]),
    ]
}

/// Geometry of one image's tiling.
struct Tiling {
    h: usize,
    w: usize,
    ho: usize,
    wo: usize,
    pt: usize,
    pl: usize,
}

/// Tiles per chunk of a tile row in [`input_row`] (a multiple of L): its buffers live on the
/// stack (6 rows of CHUNK·4 + 8 numbers, 3.2 KiB).
const CHUNK: usize = 32;
const CHUNK_COLS: usize = CHUNK * TILE + 2 * L;

/// V for tile row `ty` (all `tw` tiles, block-relative index of its first tile `t0`) of one
/// channel: `vc[ξ·nb + t]`. First `Bᵀ` down the six input rows, over whole rows (contiguous,
/// vectorizes), then `· B` along them, L tiles at a time from the rows split into their four
/// phases (column 4k + c of the chunk is phase c, lane k; columns 4k + 4 and 4k + 5 are
/// phases 0 and 1 of lane k + 1), so no load is a gather.
#[allow(clippy::too_many_arguments)]
fn input_row(plane: &[f32], g: &Tiling, ty: usize, tw: usize, vc: &mut [f32], nb: usize, t0: usize) {
    let r0 = (ty * TILE) as isize - g.pt as isize;
    let zeros = [0f32; CHUNK_COLS];
    let mut tx0 = 0;
    while tx0 < tw {
        let nt = CHUNK.min(tw - tx0);
        // Chunk column p is input column x0 + p; columns outside the input are zero.
        let x0 = (tx0 * TILE) as isize - g.pl as isize;
        let lo = (-x0).clamp(0, CHUNK_COLS as isize) as usize;
        let hi = (g.w as isize - x0).clamp(lo as isize, (nt * TILE + 2) as isize) as usize;
        let row = |r: usize| -> &[f32] {
            let y = r0 + r as isize;
            if y < 0 || y as usize >= g.h || hi <= lo {
                &zeros[lo..hi]
            } else {
                let at = y as usize * g.w + (x0 + lo as isize) as usize;
                &plane[at..at + (hi - lo)]
            }
        };
        let d = [row(0), row(1), row(2), row(3), row(4), row(5)];
        let mut t = [[0f32; CHUNK_COLS]; ALPHA];
        {
            let [t0r, t1r, t2r, t3r, t4r, t5r] = &mut t;
            let it = t0r[lo..hi].iter_mut().zip(&mut t1r[lo..hi]).zip(&mut t2r[lo..hi]).zip(&mut t3r[lo..hi]).zip(&mut t4r[lo..hi]).zip(&mut t5r[lo..hi]);
            for (p, (((((a, b), c), e), f), h)) in it.enumerate() {
                let v = [d[0][p], d[1][p], d[2][p], d[3][p], d[4][p], d[5][p]];
                *a = 4.0 * v[0] - 5.0 * v[2] + v[4];
                *b = (v[3] + v[4]) - 4.0 * (v[1] + v[2]);
                *c = (v[4] - v[3]) + 4.0 * (v[1] - v[2]);
                *e = (v[4] - v[2]) + 2.0 * (v[3] - v[1]);
                *f = (v[4] - v[2]) - 2.0 * (v[3] - v[1]);
                *h = 4.0 * v[1] - 5.0 * v[3] + v[5];
            }
        }
        let mut k0 = 0;
        while k0 < nt {
            let n = L.min(nt - k0);
            for (i, ti) in t.iter().enumerate() {
                // Phases: q[c][k] = ti[4(k0 + k) + c], k ≤ L (the extra lane feeds columns 4, 5).
                let seg: &[f32; (L + 1) * TILE] = ti[k0 * TILE..(k0 + L + 1) * TILE].try_into().expect("chunk");
                let mut q = [[0f32; L + 1]; TILE];
                for k in 0..=L {
                    for c in 0..TILE {
                        q[c][k] = seg[k * TILE + c];
                    }
                }
                let lane = |c: usize, shift: usize| -> Lanes { core::array::from_fn(|k| q[c][k + shift]) };
                let r = input_1d(&[lane(0, 0), lane(1, 0), lane(2, 0), lane(3, 0), lane(0, 1), lane(1, 1)]);
                for (j, e) in r.iter().enumerate() {
                    let at = (i * ALPHA + j) * nb + t0 + tx0 + k0;
                    if n == L {
                        vc[at..at + L].copy_from_slice(e);
                    } else {
                        vc[at..at + n].copy_from_slice(&e[..n]);
                    }
                }
            }
            k0 += L;
        }
        tx0 += CHUNK;
    }
}

/// Output tiles `t0..t0+n` (one tile row) of one channel from its part of M (`mc[ξ·nb + t]`),
/// cropped at the edges.
#[allow(clippy::too_many_arguments)]
fn output_tiles(mc: &[f32], g: &Tiling, ty: usize, tx0: usize, n: usize, out: &mut [f32], nb: usize, t0: usize) {
    let mut q = [[[0f32; L]; ALPHA]; TILE];
    for j in 0..ALPHA {
        let mut col = [[0f32; L]; ALPHA];
        for (i, e) in col.iter_mut().enumerate() {
            let at = (i * ALPHA + j) * nb + t0;
            if n == L {
                e.copy_from_slice(&mc[at..at + L]);
            } else {
                e[..n].copy_from_slice(&mc[at..at + n]);
            }
        }
        let r = output_1d(&col);
        for i in 0..TILE {
            q[i][j] = r[i];
        }
    }
    let (oy, ox) = (ty * TILE, tx0 * TILE);
    let cols = (n * TILE).min(g.wo - ox);
    for (i, row) in q.iter().enumerate() {
        if oy + i >= g.ho {
            break;
        }
        let o = output_1d(row);
        // Interleave the lanes back into one output row.
        let mut line = [0f32; L * TILE];
        for k in 0..L {
            for s in 0..TILE {
                line[k * TILE + s] = o[s][k];
            }
        }
        let at = (oy + i) * g.wo + ox;
        if cols == L * TILE {
            out[at..at + L * TILE].copy_from_slice(&line);
        } else {
            out[at..at + cols].copy_from_slice(&line[..cols]);
        }
    }
}

use super::SendPtr;

/// Parts [`split`] makes of `n` items.
fn split_tasks(n: usize) -> usize {
    #[cfg(feature = "std")]
    return crate::pool::threads().min(n);
    #[cfg(not(feature = "std"))]
    return n.min(1);
}

/// `f(lo, hi)` over `0..n` in contiguous parts, one per pool thread under std (a split that
/// changes no result: each index is computed the same way by whichever thread gets it).
fn split(n: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    #[cfg(feature = "std")]
    {
        let t = split_tasks(n);
        if t > 1 {
            let chunk = n.div_ceil(t);
            crate::pool::parallel_for(t, &|k| {
                let (lo, hi) = (k * chunk, ((k + 1) * chunk).min(n));
                if lo < hi {
                    f(lo, hi);
                }
            });
            return;
        }
    }
    f(0, n)
}

/// [`super::conv::conv_fused`] for a convolution that [`applies`], with `up` from
/// [`pack_weights`] and `scratch` of [`scratch_len`] elements. x `[batch, c_in, h, w]`,
/// y `[batch, c_out, ho, wo]`.
pub fn conv_winograd(x: &[f32], up: &[f32], y: &mut [f32], d: &ConvDims, win: &Window3, scratch: &mut [f32], ep: &Epilogue<'_, f32>) {
    assert!(applies(d, win), "conv_winograd: not a 3×3 stride-1 convolution it handles");
    let (ci, co) = (d.c_in, d.c_out);
    let (h, w) = (win.input[1], win.input[2]);
    let (ho, wo) = (win.output[1], win.output[2]);
    let (pt, pl) = (win.pads_begin[1] as usize, win.pads_begin[2] as usize);
    let (th, tw) = tiles(win);
    let rows = block_rows(d, win);
    let (is, os) = (h * w, ho * wo);
    let g = Tiling { h, w, ho, wo, pt, pl };
    let plen = packed::packed_len(co, ci);
    assert!(up.len() >= XI * plen, "conv_winograd: packed weights too short");
    assert!(x.len() >= d.batch * ci * is && y.len() >= d.batch * co * os, "conv_winograd: tensors too short");
    let panel_len = packed::prepacked_scratch_len(ci);
    let nb_max = rows * tw;
    assert!(scratch.len() >= panel_len + XI * (ci + co) * nb_max, "conv_winograd: scratch too short");
    let (panel, rest) = scratch.split_at_mut(panel_len);
    let (v, rest) = rest.split_at_mut(XI * ci * nb_max);
    let mm = &mut rest[..XI * co * nb_max];
    for n in 0..d.batch {
        let xn = &x[n * ci * is..(n + 1) * ci * is];
        let yn = &mut y[n * co * os..(n + 1) * co * os];
        let mut ty0 = 0;
        while ty0 < th {
            let ty1 = (ty0 + rows).min(th);
            let nb = (ty1 - ty0) * tw;
            // V[c][ξ][t] for the block's tiles, L at a time along each tile row; channels
            // split over the pool's threads (each writes its own part of V).
            let vp = SendPtr(v.as_mut_ptr());
            split(ci, &|c0, c1| {
                for c in c0..c1 {
                    // SAFETY: channel c's part of V, disjoint from every other task's; `split`
                    // returns only after all tasks, while `v` is not otherwise used.
                    let vc = unsafe { core::slice::from_raw_parts_mut(vp.at(c * XI * nb), XI * nb) };
                    let plane = &xn[c * is..(c + 1) * is];
                    for ty in ty0..ty1 {
                        input_row(plane, &g, ty, tw, vc, nb, (ty - ty0) * tw);
                    }
                }
            });
            // M[ξ] = U[ξ] · V[ξ]: rows of V[ξ] and M[ξ] are XI·nb apart. The 36 products split
            // over the pool's threads, each packing its B panels into its own buffer.
            let v = &*v;
            let mp = SendPtr(mm.as_mut_ptr());
            let mlen = mm.len();
            let gemms = |x0: usize, x1: usize, panel: &mut [f32]| {
                for xi in x0..x1 {
                    // SAFETY: columns xi·nb.. of every row of M belong to product xi alone
                    // (rows XI·nb apart, nb columns each); `split_with` returns only after all
                    // tasks, while `mm` is not otherwise used.
                    let mx = unsafe { core::slice::from_raw_parts_mut(mp.at(xi * nb), mlen - xi * nb) };
                    packed::sgemm_prepacked(co, ci, nb, &up[xi * plen..(xi + 1) * plen], &v[xi * nb..XI * ci * nb], XI * nb, mx, XI * nb, panel);
                }
            };
            if split_tasks(XI) > 1 {
                split(XI, &|x0, x1| packed::with_panel(|p| gemms(x0, x1, p)));
            } else {
                gemms(0, XI, panel);
            }
            // Y tile = Aᵀ M A and the epilogue on the finished rows, output channels split over
            // the pool's threads.
            let (c0, c1) = (ty0 * TILE * wo, (ty1 * TILE).min(ho) * wo);
            let yp = SendPtr(yn.as_mut_ptr());
            let ylen = yn.len();
            let mm = &*mm;
            split(co, &|m0, m1| {
                // SAFETY: output planes m0..m1, disjoint from every other task's, inside `yn`.
                let out = unsafe { core::slice::from_raw_parts_mut(yp.at(m0 * os), ylen - m0 * os) };
                for m in m0..m1 {
                    let mc = &mm[m * XI * nb..(m + 1) * XI * nb];
                    let plane = &mut out[(m - m0) * os..(m - m0 + 1) * os];
                    for ty in ty0..ty1 {
                        for tx0 in (0..tw).step_by(L) {
                            output_tiles(mc, &g, ty, tx0, L.min(tw - tx0), plane, nb, (ty - ty0) * tw + tx0);
                        }
                    }
                }
                apply_epilogue(out, ep, m0, m1 - m0, os, (n * co + m0) * os, c0, c1);
            });
            ty0 = ty1;
        }
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    extern crate std;
    use super::*;
    use crate::kernels::conv::{conv_fused, Act, Sgemm};
    use crate::kernels::test_rng::rnd;
    use std::vec;

    fn window(h: usize, w: usize, pads: [isize; 4]) -> Window3 {
        let (ho, wo) = ((h as isize + pads[0] + pads[2] - 2) as usize, (w as isize + pads[1] + pads[3] - 2) as usize);
        Window3::new(&[h, w], &[ho, wo], &[3, 3], &[1, 1], &[1, 1], &pads[..2], &pads[2..]).unwrap()
    }

    /// Winograd against the direct (im2col) convolution with the same epilogue, for sizes that
    /// are and are not multiples of the tile, pads 0–2, batch 2, blocks of one and several
    /// tile rows.
    #[test]
    fn matches_direct_convolution() {
        for &(b, ci, co, h, w, pads) in &[
            (1, 64, 64, 28, 28, [1, 1, 1, 1]),
            (2, 64, 72, 27, 30, [1, 1, 1, 1]),
            (1, 256, 256, 18, 18, [0, 0, 0, 0]),
            (1, 64, 80, 29, 26, [2, 0, 1, 2]),
            (1, 64, 64, 56, 56, [1, 1, 1, 1]),
            // Rows wider than one chunk of tiles (tw = 36 > 32), pads on one side only.
            (1, 64, 64, 9, 143, [0, 2, 1, 0]),
        ] {
            let d = ConvDims { batch: b, c_in: ci, c_out: co, group: 1 };
            let win = window(h, w, pads);
            assert!(applies(&d, &win));
            let x = rnd(b * ci * h * w, 1);
            let wt = rnd(co * ci * 9, 2);
            let bias = rnd(co, 3);
            let out_len = b * co * win.out_size();
            let res = rnd(out_len, 4);
            let ep = Epilogue { bias: Some(&bias), scale: None, shift: None, residual: Some(&res), act: Act::Relu };
            let mut want = vec![0f32; out_len];
            let mut col = vec![0f32; crate::kernels::conv::conv_scratch_len(&d, &win)];
            conv_fused(&x, &wt, &mut want, &d, &win, &mut col, &Sgemm, &ep);
            let mut up = vec![0f32; packed_len(&d)];
            pack_weights(&d, &wt, &mut up);
            let mut got = vec![f32::NAN; out_len];
            let mut scratch = vec![f32::NAN; scratch_len(&d, &win)];
            conv_winograd(&x, &up, &mut got, &d, &win, &mut scratch, &ep);
            // Sums of ci·9 products of magnitude ≤ 1: compare to that scale.
            let scale = (ci * 9) as f32;
            let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max);
            assert!(worst <= 1e-5 * scale, "b{b} ci{ci} co{co} {h}x{w} pads {pads:?}: max diff {worst}");
        }
    }

    #[test]
    fn refuses_what_it_does_not_handle() {
        let d = ConvDims { batch: 1, c_in: 64, c_out: 64, group: 1 };
        assert!(applies(&d, &window(28, 28, [1, 1, 1, 1])));
        // Fewer channels: the GEMM is faster.
        assert!(!applies(&ConvDims { c_in: 32, ..d }, &window(28, 28, [1, 1, 1, 1])));
        assert!(!applies(&ConvDims { c_out: 32, ..d }, &window(28, 28, [1, 1, 1, 1])));
        let strided = Window3::new(&[56, 56], &[28, 28], &[3, 3], &[2, 2], &[1, 1], &[1, 1], &[1, 1]).unwrap();
        assert!(!applies(&d, &strided));
        let k5 = Window3::new(&[28, 28], &[28, 28], &[5, 5], &[1, 1], &[1, 1], &[2, 2], &[2, 2]).unwrap();
        assert!(!applies(&d, &k5));
        let dilated = Window3::new(&[28, 28], &[28, 28], &[3, 3], &[1, 1], &[2, 2], &[2, 2], &[2, 2]).unwrap();
        assert!(!applies(&d, &dilated));
        assert!(!applies(&ConvDims { group: 2, ..d }, &window(28, 28, [1, 1, 1, 1])));
        assert!(!applies(&ConvDims { c_in: 3, ..d }, &window(28, 28, [1, 1, 1, 1])));
        // Too few tiles for these channels; enough for wide ones.
        assert!(!applies(&d, &window(14, 14, [1, 1, 1, 1])));
        assert!(applies(&ConvDims { c_in: 256, c_out: 256, ..d }, &window(14, 14, [1, 1, 1, 1])));
        // Cropping pads.
        assert!(!applies(&d, &window(30, 30, [-1, 0, 0, 0])));
    }
}
