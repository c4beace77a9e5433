//! A 2-D convolution as a GEMM whose B rows are shifted windows of one zero-padded copy of the
//! input: `B[(c, ky, kx), j] = src[offset(c, ky, kx) + j]`, read by the micro-kernel where it
//! lies. No im2col matrix and no packed B panels: the copy is one pass over the input, where
//! packing B panels (from an im2col tile or from the image) writes `taps` times as much, and it
//! was a quarter of a 32→32 3×3 convolution's time on Zen 5, where onnxruntime's NCHWc direct
//! kernels run its convolutions at 1.2–2× our speed.
//!
//! The output is computed over a virtual grid `oh × wq`: each output row is followed by
//! `wq − ow` columns that read past the row's end (two for a 3×3 "same" window) and are
//! dropped when the tile is copied into the output, with the epilogue. A stride `s` is made
//! unit by splitting the padded image into `s × s` phase planes (rows `a, a + s, …`, columns
//! `b, b + s, …`), so every window is still a shifted run. The sums are the packed kernels'
//! (the same fused multiply-add chain in k order), so the bits are those of the im2col path.
//! x86-64 under std only (the copy and tiles are per-thread buffers; elsewhere the packed
//! path with its planned scratch runs).
use super::conv::{channel_epilogue, Act, ConvDims, Epilogue};
use super::packed::{prefetch_lines, Level, KC, MR, PF_A};
use super::window::Window3;

/// Columns of a tile row, a multiple of both kernels' widths (32 with AVX-512, 16 with AVX2).
const NW: usize = 32;
/// Elements of the output tile the GEMM writes before it is copied out (it stays in L2).
const TILE_ELEMS: usize = 1 << 15;

/// Where a convolution's B matrix lies in the padded, phase-split copy of its input.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geom {
    cg: usize,
    mg: usize,
    /// `mg` rounded up to whole panels of [`MR`] (the packed weights' rows).
    mp: usize,
    h: usize,
    w: usize,
    s: [usize; 2],
    d: [usize; 2],
    k: [usize; 2],
    pad: [usize; 2],
    /// Phase plane size.
    hq: usize,
    wq: usize,
    oh: usize,
    ow: usize,
    /// Output rows per tile.
    rows_t: usize,
}

impl Geom {
    /// The geometry of a 2-D convolution with non-negative pads, or None.
    pub(crate) fn of(d: &ConvDims, win: &Window3) -> Option<Geom> {
        if win.input[0] != 1 || win.kernel[0] != 1 || win.output[0] != 1 || win.pads_begin[0] != 0 || d.group == 0 {
            return None;
        }
        if win.pads_begin.iter().chain(&win.pads_end).any(|&p| p < 0) || win.strides[1..].contains(&0) {
            return None;
        }
        let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
        let (s, dil, k) = ([win.strides[1], win.strides[2]], [win.dilations[1], win.dilations[2]], [win.kernel[1], win.kernel[2]]);
        let pad = [win.pads_begin[1] as usize, win.pads_begin[2] as usize];
        let hp = win.input[1] + pad[0] + win.pads_end[1] as usize;
        let wp = win.input[2] + pad[1] + win.pads_end[2] as usize;
        let (hq, wq) = (hp.div_ceil(s[0]), wp.div_ceil(s[1]));
        let (oh, ow) = (win.output[1], win.output[2]);
        if cg == 0 || mg == 0 || oh == 0 || ow == 0 || ow > wq {
            return None;
        }
        let mp = mg.div_ceil(MR) * MR;
        let rows_t = (TILE_ELEMS / (mp * wq)).clamp(1, oh);
        let g = Geom { cg, mg, mp, h: win.input[1], w: win.input[2], s, d: dil, k, pad, hq, wq, oh, ow, rows_t };
        // The offset table is u32.
        (g.src_len() <= u32::MAX as usize).then_some(g)
    }

    fn taps(&self) -> usize {
        self.cg * self.k[0] * self.k[1]
    }

    /// Elements of the phase planes.
    fn planes_len(&self) -> usize {
        self.cg * self.s[0] * self.s[1] * self.hq * self.wq
    }

    /// Elements the kernels may read: the planes, and past the last window's start the tile
    /// columns of the last rows (virtual columns that are dropped read zeros or other pixels).
    fn src_len(&self) -> usize {
        let last = (0..self.k[0]).flat_map(|ky| (0..self.k[1]).map(move |kx| (ky, kx))).map(|(ky, kx)| self.offset(self.cg - 1, ky, kx)).max().unwrap_or(0);
        self.planes_len().max(last + self.tile_cols(self.rows_t) + (self.oh - 1) * self.wq + NW)
    }

    /// Tile columns for `rows` output rows: whole kernel panels.
    fn tile_cols(&self, rows: usize) -> usize {
        (rows * self.wq).div_ceil(NW) * NW
    }

    /// Where the window of input channel `c`, tap `(ky, kx)` starts in the source copy.
    fn offset(&self, c: usize, ky: usize, kx: usize) -> usize {
        let (y, x) = (ky * self.d[0], kx * self.d[1]);
        let plane = (c * self.s[0] + y % self.s[0]) * self.s[1] + x % self.s[1];
        plane * self.hq * self.wq + y / self.s[0] * self.wq + x / self.s[1]
    }

    /// The zero-padded, phase-split copy of one group's input `x` (`cg` planes of `h × w`)
    /// into `src` (`src_len` elements; the slack after the planes zeroed).
    fn fill(&self, x: &[f32], src: &mut [f32]) {
        let (hq, wq, [s0, s1]) = (self.hq, self.wq, self.s);
        let (h, w, [p0, p1]) = (self.h, self.w, self.pad);
        for c in 0..self.cg {
            let xc = &x[c * h * w..(c + 1) * h * w];
            for a in 0..s0 {
                for b in 0..s1 {
                    let plane = &mut src[((c * s0 + a) * s1 + b) * hq * wq..][..hq * wq];
                    // Columns q of the plane read input column q·s1 + b − p1, when in 0..w.
                    let q0 = p1.saturating_sub(b).div_ceil(s1);
                    let q1 = (w + p1).saturating_sub(b).div_ceil(s1).clamp(q0, wq);
                    for r in 0..hq {
                        let row = &mut plane[r * wq..(r + 1) * wq];
                        let iy = (r * s0 + a).wrapping_sub(p0);
                        if iy >= h || q0 >= q1 {
                            row.fill(0.0);
                            continue;
                        }
                        row[..q0].fill(0.0);
                        row[q1..].fill(0.0);
                        let xr = &xc[iy * w..(iy + 1) * w];
                        let first = q0 * s1 + b - p1;
                        if s1 == 1 {
                            row[q0..q1].copy_from_slice(&xr[first..first + (q1 - q0)]);
                        } else if s1 == 2 {
                            // A constant stride: the loop vectorizes (shuffles), where the
                            // iterator below copied one value at a time (a first convolution's
                            // phase planes took a fifth of its time).
                            let (n, xs) = (q1 - q0, &xr[first..]);
                            for (o, pair) in row[q0..q1 - 1].iter_mut().zip(xs[..2 * (n - 1)].chunks_exact(2)) {
                                *o = pair[0];
                            }
                            row[q1 - 1] = xs[2 * (n - 1)];
                        } else {
                            for (o, &v) in row[q0..q1].iter_mut().zip(xr[first..].iter().step_by(s1)) {
                                *o = v;
                            }
                        }
                    }
                }
            }
        }
        src[self.planes_len()..].fill(0.0);
    }
}

/// Whether [`conv`] computes this convolution here: under std on x86-64, 2-D stride-1 windows
/// of more than one tap whose output rows are at least 32 wide or whose sums are at least 2048
/// long. Measured on Zen 5 inside YOLO- and DBNet-style models (cold weights, 1 thread,
/// interleaved against the packed path): 16→16 at 80×80 0.66×, 64→64 at 40×40 0.96×, 96→24
/// at 80×80 0.67×, 256→64 at 10×10 0.88×; but 64→64 and 80→80 at 20×20 and at 10×10 1.09–1.15×
/// (the dropped columns and the copies cost more than the B panels they save there). With the
/// AVX2 kernels (Zen 3/4, older Intel) only below 64 output channels per group: 0.78× at 16–32
/// channels, 1.04–1.22× from 64, where the 6×16 tile cannot grow to hide the unaligned loads.
/// Strided windows over more than 4 input channels only with output rows at least 32 wide:
/// since the stride-2 phase planes are copied by a loop that vectorizes, 16→32 3×3 stride 2
/// at 160×160 0.85× and 32→64 at 80×80 0.90× the packed path's time (YOLO's downsampling
/// layers), but 256→256 at 28×28 1.05× and 512→512 at 14×14 1.04–1.10× (ResNet's: narrow
/// rows, cold weights); before that copy vectorized, strided windows from 16 channels were
/// 1.11–1.23×. First convolutions (at most 4 input channels) take it at any width (3→16 3×3
/// stride 2 at 320×320 0.86×). Pointwise windows keep the packed path (their B panels are
/// plain rows already).
/// `BURNC_CONV_SHIFTED=off` keeps every convolution on the packed path, for A/B measurements.
pub fn takes(d: &ConvDims, win: &Window3) -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *OFF.get_or_init(|| std::env::var("BURNC_CONV_SHIFTED").is_ok_and(|v| v == "off")) {
        return false;
    }
    let Some(g) = Geom::of(d, win) else { return false };
    let strided = win.strides.iter().any(|&s| s != 1);
    if win.is_pointwise() || (g.ow < 32 && ((strided && g.cg > 4) || g.taps() < 2048)) {
        return false;
    }
    match kernel() {
        Some(Kernel::Avx512) => true,
        Some(Kernel::Avx2) => g.mg < 64,
        None => false,
    }
}

/// Whether a convolution that [`takes`] this path should split it over `tasks` threads here
/// (by tiles of output rows), rather than keep the packed path's split: with at least 16
/// output rows per thread. On fewer rows (deep layers at 10×10 and 20×20) every tile streams
/// all the weights again, and the measured 2-thread times were no better than the packed
/// split's (Zen 5, within a noisy 0.7–1.5×).
pub fn split_pays(win: &Window3, tasks: usize) -> bool {
    win.output[1] >= 16 * tasks
}

#[derive(Clone, Copy)]
enum Kernel {
    Avx2,
    Avx512,
}

fn kernel() -> Option<Kernel> {
    match super::packed::kernel_level() {
        Level::Avx512 => Some(Kernel::Avx512),
        Level::Avx2 => Some(Kernel::Avx2),
        Level::Portable => None,
    }
}

/// `y = epilogue(conv(x))` for one prepacked f32 convolution that [`takes`] (`wp`:
/// [`super::conv::pack_conv_weights`], `len` elements per group), its tiles of output rows
/// split over `tasks` threads. The source copy and the tiles live in per-thread buffers
/// (std only, like the packed path's B blocks), not in the planned scratch.
#[allow(clippy::too_many_arguments)]
pub fn conv(x: &[f32], wp: &[f32], len: usize, y: &mut [f32], d: &ConvDims, win: &Window3, ep: &Epilogue<'_, f32>, tasks: usize) {
    let (Some(g), Some(kern)) = (Geom::of(d, win), kernel()) else {
        panic!("shifted conv: a convolution it does not take");
    };
    let (is, os) = (g.h * g.w, g.oh * g.ow);
    let taps = g.taps();
    assert!(x.len() >= d.batch * d.c_in * is && y.len() >= d.batch * d.c_out * os && wp.len() >= d.group * len, "shifted conv: buffers too short");
    std::thread_local! {
        static SRC: core::cell::RefCell<std::vec::Vec<f32>> = const { core::cell::RefCell::new(std::vec::Vec::new()) };
        static TILE: core::cell::RefCell<std::vec::Vec<f32>> = const { core::cell::RefCell::new(std::vec::Vec::new()) };
    }
    let offs: std::vec::Vec<u32> = (0..g.cg).flat_map(|c| (0..g.k[0]).flat_map(move |ky| (0..g.k[1]).map(move |kx| (c, ky, kx)))).map(|(c, ky, kx)| g.offset(c, ky, kx) as u32).collect();
    debug_assert_eq!(offs.len(), taps);
    let max_off = offs.iter().max().map_or(0, |&o| o as usize);
    // Tiles of whole output rows, at least two per thread when split (see `split_pays`).
    let rows_t = if tasks > 1 { g.rows_t.min(g.oh.div_ceil(2 * tasks)).max(1) } else { g.rows_t };
    let tiles = g.oh.div_ceil(rows_t);
    let tile_len = g.mp * g.tile_cols(rows_t);
    let yp = y.as_mut_ptr() as usize;
    let ylen = y.len();
    // A bias and a ReLU (or either) go into the tiles' registers on their last k block (the
    // packed kernels' epilogue, so the same bits); the copy out is then a plain copy. On a
    // first convolution (3→64 3×3 stride 2 at 224×224, k = 27) the separate pass over the
    // output took 18 % of the time. Other epilogues stay a pass in `copy_out`.
    let fused = ep.is_bias_relu().then(|| {
        let mut b = std::vec![0f32; d.group * g.mp];
        if let Some(bias) = ep.bias {
            for grp in 0..d.group {
                b[grp * g.mp..grp * g.mp + g.mg].copy_from_slice(&bias[grp * g.mg..(grp + 1) * g.mg]);
            }
        }
        (b, ep.act == Act::Relu)
    });
    super::with_thread_buffer(&SRC, g.src_len(), |src| {
        for n in 0..d.batch {
            for grp in 0..d.group {
                let xg = &x[(n * d.c_in + grp * g.cg) * is..(n * d.c_in + (grp + 1) * g.cg) * is];
                g.fill(xg, src);
                let src = &*src;
                let wg = &wp[grp * len..(grp + 1) * len];
                let ch0 = n * d.c_out + grp * g.mg;
                let run = |t: usize| {
                    let (r0, r1) = (t * rows_t, ((t + 1) * rows_t).min(g.oh));
                    super::with_thread_buffer(&TILE, tile_len, |tile| {
                        let post = fused.as_ref().map(|(b, relu)| Post { bias: &b[grp * g.mp..(grp + 1) * g.mp], relu: *relu });
                        gemm_tile(kern, &g, wg, src, &offs, max_off, r0, r1, tile, post);
                        // SAFETY: tile t writes only rows r0..r1 of each output plane (of the
                        // `ylen` elements at `yp`, borrowed mutably by this call): disjoint
                        // from every other tile's.
                        unsafe { copy_out(&g, tile, r0, r1, yp as *mut f32, ylen, ch0, grp * g.mg, if post.is_some() { None } else { Some(ep) }) };
                    });
                };
                if tasks > 1 && tiles > 1 {
                    crate::pool_for(tiles, &run);
                } else {
                    (0..tiles).for_each(run);
                }
            }
        }
    });
}

/// The epilogue the tiles apply on their last k block: a bias per row of the group's `mp`
/// (zero past its channels), then a ReLU when `relu`.
#[derive(Clone, Copy)]
struct Post<'a> {
    bias: &'a [f32],
    relu: bool,
}

/// The virtual-grid outputs of rows `r0..r1` of every channel into `tile` (`mp` rows of
/// `tile_cols(r1 − r0)`), all `taps` sums, in k blocks of [`KC`] (the packed weights' blocks),
/// then `post` when given; `max_off`: the largest of `offs`.
#[allow(clippy::too_many_arguments)]
fn gemm_tile(kern: Kernel, g: &Geom, wg: &[f32], src: &[f32], offs: &[u32], max_off: usize, r0: usize, r1: usize, tile: &mut [f32], post: Option<Post<'_>>) {
    let panels = g.mp / MR;
    assert!(post.is_none_or(|p| p.bias.len() >= g.mp), "shifted conv: bias shorter than the rows");
    let taps = g.taps();
    let ldc = g.tile_cols(r1 - r0);
    let j0 = r0 * g.wq;
    assert!(wg.len() >= g.mp * taps && tile.len() >= g.mp * ldc, "shifted conv: tile buffers too short");
    // The kernels read src[offs[k] + j] for j < j0 + ldc: within src_len by its definition.
    debug_assert!(offs.iter().all(|&o| o as usize <= max_off));
    assert!(max_off + j0 + ldc <= src.len(), "shifted conv: source too short");
    let mut k0 = 0;
    while k0 < taps {
        let kc = (taps - k0).min(KC);
        let ablk = &wg[k0 * g.mp..k0 * g.mp + g.mp * kc];
        // The epilogue with the last k block: (bias of the tile's first row, ReLU).
        let fin = |p: usize| match post {
            Some(post) if k0 + kc >= taps => (post.bias[p * MR..].as_ptr(), post.relu),
            _ => (core::ptr::null(), false),
        };
        let off = &offs[k0..k0 + kc];
        match kern {
            Kernel::Avx512 => {
                for jp in (0..ldc).step_by(32) {
                    let mut p = 0;
                    while p < panels {
                        let two = p + 1 < panels;
                        if jp == 0 {
                            // The weights come from memory on the first columns (as in
                            // `packed`'s driver): ask for the next panels while these compute.
                            let next = (p + 2) * MR * kc;
                            prefetch_lines(&ablk[next.min(ablk.len())..(next + 2 * MR * kc).min(ablk.len())]);
                        }
                        // SAFETY: the CPU has AVX-512F (kernel level); each panel holds kc·MR
                        // values, the reads are in src (asserted above), the tile rows p·MR..
                        // (p + 1 or 2)·MR hold columns jp..jp + 32.
                        unsafe {
                            if two {
                                tile_avx512::<2>(kc, ablk[p * MR * kc..].as_ptr(), src.as_ptr(), off.as_ptr(), j0 + jp, tile[p * MR * ldc + jp..].as_mut_ptr(), ldc, k0 > 0, fin(p))
                            } else {
                                tile_avx512::<1>(kc, ablk[p * MR * kc..].as_ptr(), src.as_ptr(), off.as_ptr(), j0 + jp, tile[p * MR * ldc + jp..].as_mut_ptr(), ldc, k0 > 0, fin(p))
                            }
                        }
                        p += if two { 2 } else { 1 };
                    }
                }
            }
            Kernel::Avx2 => {
                for jp in (0..ldc).step_by(16) {
                    for p in 0..panels {
                        if jp == 0 {
                            let next = (p + 1) * MR * kc;
                            prefetch_lines(&ablk[next.min(ablk.len())..(next + MR * kc).min(ablk.len())]);
                        }
                        // SAFETY: as above, with AVX2 and FMA and 16 columns.
                        unsafe { tile_avx2(kc, ablk[p * MR * kc..].as_ptr(), src.as_ptr(), off.as_ptr(), j0 + jp, tile[p * MR * ldc + jp..].as_mut_ptr(), ldc, k0 > 0, fin(p)) };
                    }
                }
            }
        }
        k0 += kc;
    }
}

/// Rows `r0..r1` of the tile into the output `y` (`ylen` elements; the virtual columns
/// dropped), with the epilogue; `ch0`: the group's first output plane, `m0`: its first
/// channel (bias index).
///
/// # Safety
/// `y` is valid for `ylen` elements, and nothing else reads or writes rows `r0..r1` of the
/// group's output planes meanwhile.
#[allow(clippy::too_many_arguments)]
unsafe fn copy_out(g: &Geom, tile: &[f32], r0: usize, r1: usize, y: *mut f32, ylen: usize, ch0: usize, m0: usize, ep: Option<&Epilogue<'_, f32>>) {
    let ldc = g.tile_cols(r1 - r0);
    let os = g.oh * g.ow;
    for m in 0..g.mg {
        for r in r0..r1 {
            let at = (ch0 + m) * os + r * g.ow;
            assert!(at + g.ow <= ylen, "shifted conv: output too short");
            // SAFETY: in bounds (asserted); this run is this call's alone (the contract).
            let run = unsafe { core::slice::from_raw_parts_mut(y.add(at), g.ow) };
            let from = m * ldc + (r - r0) * g.wq;
            run.copy_from_slice(&tile[from..from + g.ow]);
            if let Some(ep) = ep {
                channel_epilogue(run, ep, m0 + m, ep.residual.map(|res| &res[at..at + g.ow]));
            }
        }
    }
}

/// One 6×32 tile: `c[i][j] (+)= Σ_k a[k][i] · src[off[k] + j0 + j]`, a fused multiply-add chain
/// in k order per element (as `packed::kernel_avx512_r`).
///
/// # Safety
/// AVX-512F; `a` holds `kc·MR` values, `off` `kc`; `src[off[k] + j0 ..][..32]` readable; `c`
/// has MR rows of 32 writable values `ldc` apart.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn tile_avx512<const P: usize>(kc: usize, a: *const f32, src: *const f32, off: *const u32, j0: usize, c: *mut f32, ldc: usize, load: bool, (bias, relu): (*const f32, bool)) {
    use core::arch::x86_64::*;
    // SAFETY (all pointer arithmetic and accesses): the caller's contract.
    unsafe {
        let mut acc = [[[_mm512_setzero_ps(); 2]; MR]; P];
        if load {
            for p in 0..P {
                for i in 0..MR {
                    acc[p][i][0] = _mm512_loadu_ps(c.add((p * MR + i) * ldc));
                    acc[p][i][1] = _mm512_loadu_ps(c.add((p * MR + i) * ldc + 16));
                }
            }
        }
        let base = src.add(j0);
        let mut ap = a;
        for kk in 0..kc {
            // As in the packed kernels: the weights stream from memory the first time (a
            // layer's weights are read once per inference), so fetch them ahead.
            for p in 0..P {
                _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_add(p * MR * kc + PF_A) as *const i8);
            }
            let bp = base.add(*off.add(kk) as usize);
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            for p in 0..P {
                for i in 0..MR {
                    let av = _mm512_set1_ps(*ap.add(p * MR * kc + i));
                    acc[p][i][0] = _mm512_fmadd_ps(av, b0, acc[p][i][0]);
                    acc[p][i][1] = _mm512_fmadd_ps(av, b1, acc[p][i][1]);
                }
            }
            ap = ap.add(MR);
        }
        if !bias.is_null() {
            for p in 0..P {
                for i in 0..MR {
                    let b = _mm512_set1_ps(*bias.add(p * MR + i));
                    acc[p][i] = acc[p][i].map(|v| _mm512_add_ps(v, b));
                }
            }
        }
        if relu {
            let z = _mm512_setzero_ps();
            acc = acc.map(|rows| rows.map(|row| row.map(|v| _mm512_max_ps(v, z))));
        }
        for p in 0..P {
            for i in 0..MR {
                _mm512_storeu_ps(c.add((p * MR + i) * ldc), acc[p][i][0]);
                _mm512_storeu_ps(c.add((p * MR + i) * ldc + 16), acc[p][i][1]);
            }
        }
    }
}

/// [`tile_avx512`] as a 6×16 tile of 8-lane registers.
///
/// # Safety
/// AVX2 and FMA; as [`tile_avx512`] with 16 columns.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn tile_avx2(kc: usize, a: *const f32, src: *const f32, off: *const u32, j0: usize, c: *mut f32, ldc: usize, load: bool, (bias, relu): (*const f32, bool)) {
    use core::arch::x86_64::*;
    // SAFETY (all pointer arithmetic and accesses): the caller's contract.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        if load {
            for i in 0..MR {
                acc[i][0] = _mm256_loadu_ps(c.add(i * ldc));
                acc[i][1] = _mm256_loadu_ps(c.add(i * ldc + 8));
            }
        }
        let base = src.add(j0);
        let mut ap = a;
        for kk in 0..kc {
            _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_add(PF_A) as *const i8);
            let bp = base.add(*off.add(kk) as usize);
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for i in 0..MR {
                let av = _mm256_broadcast_ss(&*ap.add(i));
                acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
            }
            ap = ap.add(MR);
        }
        if !bias.is_null() {
            for i in 0..MR {
                let b = _mm256_set1_ps(*bias.add(i));
                acc[i] = acc[i].map(|v| _mm256_add_ps(v, b));
            }
        }
        if relu {
            let z = _mm256_setzero_ps();
            acc = acc.map(|row| row.map(|v| _mm256_max_ps(v, z)));
        }
        for i in 0..MR {
            _mm256_storeu_ps(c.add(i * ldc), acc[i][0]);
            _mm256_storeu_ps(c.add(i * ldc + 8), acc[i][1]);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::kernels::conv::{conv_fused, conv_packed_len, pack_conv_weights, Sgemm};
    use crate::kernels::test_rng::rnd;
    use std::vec;

    /// One case: the shifted GEMM against the packed path (`conv_fused`, packing at run time),
    /// which computes the same chains in the same order: equal to the bit. Any geometry the
    /// shifted path can take, not only the ones [`takes`] sends it today.
    #[allow(clippy::too_many_arguments)]
    fn check(batch: usize, c_in: usize, c_out: usize, group: usize, hw: [usize; 2], k: [usize; 2], s: [usize; 2], dil: [usize; 2], pb: [isize; 2], pe: [isize; 2], act: Act, residual: bool, tasks: usize) {
        check_bias(batch, c_in, c_out, group, hw, k, s, dil, pb, pe, act, residual, tasks, true);
    }

    /// [`check`] with or without a bias.
    #[allow(clippy::too_many_arguments)]
    fn check_bias(batch: usize, c_in: usize, c_out: usize, group: usize, hw: [usize; 2], k: [usize; 2], s: [usize; 2], dil: [usize; 2], pb: [isize; 2], pe: [isize; 2], act: Act, residual: bool, tasks: usize, bias: bool) {
        if kernel().is_none() {
            return; // no AVX2: the packed path runs
        }
        let out = |i: usize| (hw[i] as isize + pb[i] + pe[i] - (dil[i] * (k[i] - 1) + 1) as isize) as usize / s[i] + 1;
        let win = Window3::new(&hw, &[out(0), out(1)], &k, &s, &dil, &pb, &pe).unwrap();
        let d = ConvDims { batch, c_in, c_out, group };
        let x = rnd(batch * c_in * win.in_size(), 1);
        let w = rnd(c_out * c_in / group * win.kernel_size(), 2);
        let b = rnd(c_out, 3);
        let res = rnd(batch * c_out * win.out_size(), 4);
        let ep = Epilogue { bias: bias.then_some(&b[..]), scale: None, shift: None, residual: residual.then_some(&res[..]), act };
        let mut want = vec![0f32; batch * c_out * win.out_size()];
        let mut col = vec![0f32; crate::kernels::conv::conv_scratch_len(&d, &win)];
        conv_fused(&x, &w, &mut want, &d, &win, &mut col, &Sgemm, &ep);
        let mut wp = vec![0f32; conv_packed_len(&d, &win)];
        pack_conv_weights(&d, &win, &w, &mut wp);
        let mut got = vec![f32::NAN; want.len()];
        conv(&x, &wp, wp.len() / group, &mut got, &d, &win, &ep, tasks);
        let bad = got.iter().zip(&want).position(|(g, w)| g.to_bits() != w.to_bits());
        assert!(bad.is_none(), "{d:?} {win:?} tasks {tasks}: first difference at {bad:?}");
    }

    #[test]
    fn same_bits_as_the_packed_path() {
        let none = [0, 0];
        // "Same" 3×3 windows: channel counts that fill no whole 12-row pair, one, several.
        for (c_in, c_out) in [(3, 16), (16, 16), (32, 32), (24, 80), (64, 7)] {
            check(1, c_in, c_out, 1, [13, 21], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], Act::Silu, false, 1);
        }
        // Wider and narrower windows, asymmetric and no pads, dilation, residual and ReLU.
        check(1, 8, 12, 1, [17, 9], [5, 5], [1, 1], [1, 1], [2, 2], [2, 2], Act::Relu, true, 1);
        check(1, 8, 12, 1, [17, 40], [1, 7], [1, 1], [1, 1], [0, 3], [0, 3], Act::None, false, 1);
        check(1, 5, 6, 1, [11, 12], [3, 3], [1, 1], [2, 2], [2, 1], [0, 2], Act::HardSwish, true, 1);
        check(1, 5, 6, 1, [11, 12], [3, 3], [1, 1], [1, 1], none, none, Act::None, false, 1);
        // Strides (phase planes), odd sizes, padding on one side only.
        check(1, 6, 18, 1, [15, 16], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], Act::Silu, false, 1);
        check(1, 4, 12, 1, [9, 14], [3, 2], [3, 2], [1, 1], [0, 1], [2, 0], Act::None, true, 1);
        // Groups and batches; many taps (two k blocks of the packed weights).
        check(2, 8, 12, 2, [10, 10], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], Act::Relu, true, 1);
        check(1, 40, 13, 1, [8, 9], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], Act::None, false, 1);
        // Bias and ReLU in the tiles' registers (no residual): groups whose channels fill no
        // whole panel, a stride, two k blocks, no bias.
        check(1, 8, 14, 2, [10, 12], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], Act::Relu, false, 1);
        check(1, 3, 16, 1, [23, 40], [3, 3], [2, 2], [1, 1], [0, 0], [1, 1], Act::Relu, false, 1);
        check(1, 40, 13, 1, [8, 9], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], Act::Relu, false, 1);
        check_bias(1, 8, 12, 1, [17, 9], [5, 5], [1, 1], [1, 1], [2, 2], [2, 2], Act::Relu, false, 1, false);
        check_bias(1, 5, 6, 1, [11, 12], [3, 3], [1, 1], [1, 1], none, none, Act::None, false, 1, false);
        // Tiles over threads: the same bits.
        crate::pool::set_threads(2);
        check(1, 16, 24, 1, [70, 33], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], Act::Relu, false, 2);
        check(1, 16, 24, 1, [70, 33], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], Act::Silu, true, 2);
        check(2, 8, 8, 1, [40, 40], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1], Act::None, false, 2);
    }

    #[test]
    fn phase_planes_hold_the_padded_image() {
        // 1 channel 3×4, pads (1, 2) before and (0, 1) after, stride 2: the padded image is
        // 4×7; phase (a, b) holds its rows a, a + 2 and columns b, b + 2, …
        let win = Window3::new(&[3, 4], &[2, 3], &[1, 1], &[2, 2], &[1, 1], &[1, 2], &[0, 1]).unwrap();
        let g = Geom::of(&ConvDims { batch: 1, c_in: 1, c_out: 1, group: 1 }, &win).unwrap();
        let x: std::vec::Vec<f32> = (1..=12).map(|v| v as f32).collect();
        let mut src = vec![f32::NAN; g.src_len()];
        g.fill(&x, &mut src);
        let padded = |r: usize, c: usize| -> f32 {
            let (iy, ix) = (r as isize - 1, c as isize - 2);
            if (0..3).contains(&iy) && (0..4).contains(&ix) { x[iy as usize * 4 + ix as usize] } else { 0.0 }
        };
        let (hq, wq) = (g.hq, g.wq);
        assert_eq!((hq, wq), (2, 4));
        for a in 0..2 {
            for b in 0..2 {
                for r in 0..hq {
                    for c in 0..wq {
                        let want = if r * 2 + a < 4 && c * 2 + b < 7 { padded(r * 2 + a, c * 2 + b) } else { 0.0 };
                        assert_eq!(src[(a * 2 + b) * hq * wq + r * wq + c], want, "phase ({a}, {b}) at ({r}, {c})");
                    }
                }
            }
        }
        assert!(src[g.planes_len()..].iter().all(|&v| v == 0.0));
    }
}
