//! Grouped N-d convolution (N <= 3) and transposed convolution as im2col/col2im + GEMM.
//! The GEMM is passed in, so f32/f64 use the packed SIMD kernels and other types the generic
//! loop; [`conv_f32`]/[`conv_f64`] and the `*_transpose_*` helpers wire the usual choices.
use super::gemm::{self, Layout};
use super::packed;
use super::unary::{eval_f32, Unary};
use super::im2col::{col2im, im2col_cols, im2col_rows};
use super::window::Window3;
use crate::elem::Elem;

/// Channel counts of a convolution. `c_in` and `c_out` are multiples of `group`.
#[derive(Clone, Copy, Debug)]
pub struct ConvDims {
    pub batch: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub group: usize,
}

/// `c = a @ b` (m×k @ k×n), `c` row-major m×n with rows `ldc` apart, overwritten.
pub trait MatMul<T> {
    #[allow(clippy::too_many_arguments)]
    fn mm(&self, m: usize, k: usize, n: usize, a: &[T], la: Layout, b: &[T], lb: Layout, c: &mut [T], ldc: usize);
    /// [`MatMul::mm`] with row-major A and B (row strides `lda`, `ldb`) and packing space
    /// (at least [`packed::scratch_len`]`(m, k)` elements) from the convolution's scratch.
    #[allow(clippy::too_many_arguments)]
    fn mm_rows(&self, m: usize, k: usize, n: usize, a: &[T], lda: usize, b: &[T], ldb: usize, c: &mut [T], ldc: usize, scratch: &mut [T]) {
        let _ = scratch;
        self.mm(m, k, n, a, Layout::row_major(lda), b, Layout::row_major(ldb), c, ldc);
    }
}

/// Packed f32 GEMM.
pub struct Sgemm;
impl MatMul<f32> for Sgemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[f32], la: Layout, b: &[f32], lb: Layout, c: &mut [f32], ldc: usize) {
        gemm::sgemm(m, k, n, 1.0, a, la, b, lb, 0.0, c, Layout::row_major(ldc));
    }
    /// burnc's own packed kernel ([`packed::sgemm_packed`]); large products go to the
    /// threaded [`gemm::sgemm`] when the pool has more than one thread.
    fn mm_rows(&self, m: usize, k: usize, n: usize, a: &[f32], lda: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize, scratch: &mut [f32]) {
        #[cfg(feature = "std")]
        if gemm::would_split(m, k, n) {
            return self.mm(m, k, n, a, Layout::row_major(lda), b, Layout::row_major(ldb), c, ldc);
        }
        packed::sgemm_packed(m, k, n, a, lda, b, ldb, c, ldc, scratch);
    }
}
/// Packed f64 GEMM.
pub struct Dgemm;
impl MatMul<f64> for Dgemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[f64], la: Layout, b: &[f64], lb: Layout, c: &mut [f64], ldc: usize) {
        gemm::dgemm(m, k, n, 1.0, a, la, b, lb, 0.0, c, Layout::row_major(ldc));
    }
}
/// Plain-loop GEMM for any element type.
pub struct GenericGemm;
impl<T: Elem> MatMul<T> for GenericGemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[T], la: Layout, b: &[T], lb: Layout, c: &mut [T], ldc: usize) {
        gemm::gemm_generic(m, k, n, a, la, b, lb, c, Layout::row_major(ldc));
    }
}

/// Column buffers above this many elements are split into tiles of whole output rows.
const COL_TILE_ELEMS: usize = 1 << 18;
/// ... but a tile keeps at least this many output positions, so the GEMM's packing of the
/// weights (once per tile) stays small next to its arithmetic.
const MIN_TILE_COLS: usize = 512;

/// Output rows (`(d, h)` pairs, `w.output[2]` positions each) per im2col tile.
pub fn conv_tile_rows(d: &ConvDims, w: &Window3) -> usize {
    let rows = w.output[0] * w.output[1];
    let row_elems = (d.c_in / d.group) * w.kernel_size() * w.output[2];
    if rows == 0 || row_elems == 0 || rows * row_elems <= COL_TILE_ELEMS {
        return rows.max(1);
    }
    let by_cap = COL_TILE_ELEMS / row_elems;
    let by_min = MIN_TILE_COLS.div_ceil(w.output[2].max(1));
    by_cap.max(by_min).clamp(1, rows)
}

/// Whether [`conv`] computes `d` by the direct depthwise loop: each output channel reads one
/// input channel and each group has at most 2 outputs, where a GEMM would have 1 or 2 rows.
/// With more outputs per group (e.g. a first conv over one input channel) the GEMM wins: the
/// direct loop's cost is per output row and tap, not per multiply-add (MNIST's 1→8 channel
/// 3×3 conv took 0.078 ms end to end with it, 0.050 ms with im2col + GEMM).
pub fn is_direct_depthwise(d: &ConvDims) -> bool {
    d.group > 0 && d.c_in == d.group && d.c_out <= 2 * d.group
}

/// Scratch elements [`conv`] needs: for direct 2-D depthwise convolutions one zero-padded
/// input plane and a run buffer (none for 3-D ones); otherwise the GEMM's packing space
/// ([`packed::scratch_len`]) and, unless pointwise, the im2col tile after it.
pub fn conv_scratch_len(d: &ConvDims, w: &Window3) -> usize {
    if is_direct_depthwise(d) {
        return PaddedPlane::of(w).map_or(0, |p| p.len());
    }
    let (cg, mg) = (d.c_in / d.group.max(1), d.c_out / d.group.max(1));
    let pack = packed::scratch_len(mg, cg * w.kernel_size());
    if w.is_pointwise() {
        pack
    } else {
        pack + cg * w.kernel_size() * conv_tile_rows(d, w) * w.output[2]
    }
}

/// An activation a fused convolution applies in its output loop (the compiler fuses a
/// following Relu / LeakyRelu / Clip / HardSwish / Sigmoid / SiLU into the conv, so the output
/// is written once).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    None,
    /// `if v > 0 { v } else { 0 }`, as the Relu kernel.
    Relu,
    /// `if v < 0 { alpha · v } else { v }`, as the LeakyRelu kernel.
    LeakyRelu(f32),
    /// `min(max(v, lo), hi)` with NaN propagating, as the Max/Min pair ONNX Clip lowers to.
    Clip(f32, f32),
    /// As the HardSwish kernel (f32: other types compute it in f32).
    HardSwish,
    /// As the Sigmoid kernel (f32: other types compute it in f32).
    Sigmoid,
    /// `v · sigmoid(v)`, as a Sigmoid then a Mul with its input (SiLU, Swish; f32: other types
    /// compute it in f32).
    Silu,
}

/// What a convolution does to each output element after the sums, while its tile is in
/// cache: `y = act((((y + bias[m]) · scale[m]) + shift[m]) + residual)`, each step optional,
/// in that order: the order of the unfused ops (Conv, Mul, Add, Add, activation), so fused
/// and unfused code give the same bits.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<'a, T> {
    pub bias: Option<&'a [T]>,
    /// Per output channel.
    pub scale: Option<&'a [T]>,
    /// Per output channel.
    pub shift: Option<&'a [T]>,
    /// Same shape as the output.
    pub residual: Option<&'a [T]>,
    pub act: Act,
}

impl<'a, T> Epilogue<'a, T> {
    /// Just a bias (or nothing), as a plain Conv has.
    pub fn bias(bias: Option<&'a [T]>) -> Self {
        Epilogue { bias, scale: None, shift: None, residual: None, act: Act::None }
    }
    /// Whether the epilogue is at most a bias and a ReLU: what kernels apply in registers
    /// before their store (the shifted tiles, the depthwise plane kernel).
    pub(crate) fn is_bias_relu(&self) -> bool {
        self.scale.is_none() && self.shift.is_none() && self.residual.is_none() && matches!(self.act, Act::None | Act::Relu)
    }
    fn is_identity(&self) -> bool {
        self.bias.is_none() && self.scale.is_none() && self.shift.is_none() && self.residual.is_none() && self.act == Act::None
    }
}

/// A pointwise convolution's GEMM is split into column chunks of about this many output
/// elements, so the epilogue finds each chunk in cache (the weights are repacked per chunk:
/// mg·k next to mg·k·cols multiply-adds). Chunking does not change any sum, and the rule is
/// the same with or without an epilogue, so fused and unfused code give the same bits.
const POINTWISE_TILE_ELEMS: usize = 1 << 15;
const MIN_CHUNK_COLS: usize = 256;

/// `y[n, m, ·] = Σ_c,k w[m, c, k] · x[n, g·Cg + c, window(k)] + bias[m]`.
/// Shapes: x `[batch, c_in, input…]`, w `[c_out, c_in/group, kernel…]`, y `[batch, c_out,
/// output…]`, `col` at least [`conv_scratch_len`].
#[allow(clippy::too_many_arguments)]
pub fn conv<T: Elem>(x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], d: &ConvDims, win: &Window3, col: &mut [T], mm: &impl MatMul<T>) {
    conv_fused(x, w, y, d, win, col, mm, &Epilogue::bias(bias));
}

/// [`conv`] with an epilogue (bias, residual add, activation) applied per output tile right
/// after the tile is computed. Depthwise convolutions ([`is_direct_depthwise`]) are computed
/// by a direct loop instead of GEMMs with one row.
#[allow(clippy::too_many_arguments)]
pub fn conv_fused<T: Elem>(x: &[T], w: &[T], y: &mut [T], d: &ConvDims, win: &Window3, col: &mut [T], mm: &impl MatMul<T>, ep: &Epilogue<'_, T>) {
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let ks = win.kernel_size();
    let kdim = cg * ks;
    if is_direct_depthwise(d) {
        match PaddedPlane::of(win) {
            Some(pp) => depthwise_2d(x, w, y, d, win, &pp, &mut col[..pp.len()], ep),
            None => depthwise(x, w, y, d, win, ep),
        }
        return;
    }
    conv_gemms(x, y, d, win, col, packed::scratch_len(mg, kdim), ep, false, |g, n, b, ldb, c, ldc, pack, _| {
        let wg = &w[g * mg * kdim..(g + 1) * mg * kdim];
        mm.mm_rows(mg, kdim, n, wg, kdim, b, ldb, c, ldc, pack)
    });
}

/// Elements of a convolution's f32 weights packed ahead of time ([`pack_conv_weights`]).
pub fn conv_packed_len(d: &ConvDims, win: &Window3) -> usize {
    let (cg, mg) = (d.c_in / d.group.max(1), d.c_out / d.group.max(1));
    d.group * packed::packed_len(mg, cg * win.kernel_size())
}

/// Whether generated code calls [`conv_fused_prepacked`] for this convolution (f32 weights
/// known at compile time): convolutions that run as GEMMs, with enough output channels per
/// group that padding them to whole panels of [`packed::MR`] rows grows the weights by at
/// most 1/8 (a 2-channel conv would store 6 rows; firmware feels that, and packing so small
/// a matrix on every call costs next to nothing).
pub fn takes_prepacked(d: &ConvDims) -> bool {
    let mg = d.c_out / d.group.max(1);
    !is_direct_depthwise(d) && d.group > 0 && mg > 0 && mg.div_ceil(packed::MR) * packed::MR * 8 <= mg * 9
}

/// Scratch elements [`conv_fused_prepacked`] needs: one packed B panel and, unless pointwise,
/// the im2col tile (no space to pack the weights, unlike [`conv_scratch_len`]).
pub fn conv_prepacked_scratch_len(d: &ConvDims, w: &Window3) -> usize {
    let cg = d.c_in / d.group.max(1);
    let pack = packed::prepacked_scratch_len(cg * w.kernel_size());
    if w.is_pointwise() {
        pack
    } else {
        pack + cg * w.kernel_size() * conv_tile_rows(d, w) * w.output[2]
    }
}

/// Pack f32 convolution weights `[c_out, c_in/group, kernel…]` for [`conv_fused_prepacked`]:
/// each group's `mg × kdim` matrix by [`packed::pack_weights`], one after the other.
pub fn pack_conv_weights(d: &ConvDims, win: &Window3, w: &[f32], out: &mut [f32]) {
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let kdim = cg * win.kernel_size();
    let len = packed::packed_len(mg, kdim);
    for g in 0..d.group {
        packed::pack_weights(mg, kdim, &w[g * mg * kdim..(g + 1) * mg * kdim], kdim, &mut out[g * len..(g + 1) * len]);
    }
}

/// [`conv_fused`] in f32 with weights packed ahead of time by [`pack_conv_weights`] (`wp`),
/// for convolutions that run as GEMMs ([`takes_prepacked`]): the packing that [`conv_fused`]
/// does on every call is done once, by the compiler; the sums and their order, and so the
/// bits, are the same (single-threaded). Under std with more than one pool thread, the
/// im2col, the GEMM and the epilogue are split over the pool ([`conv_prepacked_tasks`]),
/// which changes no sum either.
#[allow(clippy::too_many_arguments)]
pub fn conv_fused_prepacked(x: &[f32], wp: &[f32], y: &mut [f32], d: &ConvDims, win: &Window3, col: &mut [f32], ep: &Epilogue<'_, f32>) {
    #[cfg(feature = "std")]
    let tasks = crate::pool::threads();
    #[cfg(not(feature = "std"))]
    let tasks = 1;
    conv_prepacked_tasks(x, wp, y, d, win, col, ep, tasks);
}

/// A pointwise convolution over 1×1 maps (`os` = 1: a matrix-vector product per batch item and
/// group) by [`packed::prepacked_gemv`]; false where that does not run (portable kernels).
fn gemv_all(x: &[f32], wp: &[f32], len: usize, y: &mut [f32], d: &ConvDims, ep: &Epilogue<'_, f32>) -> bool {
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    for n in 0..d.batch {
        for g in 0..d.group {
            let ch0 = n * d.c_out + g * mg;
            let xg = &x[n * d.c_in + g * cg..n * d.c_in + (g + 1) * cg];
            if !packed::prepacked_gemv(mg, cg, &wp[g * len..(g + 1) * len], xg, &mut y[ch0..ch0 + mg]) {
                return false;
            }
            apply_epilogue(&mut y[ch0..ch0 + mg], ep, g * mg, mg, 1, ch0, 0, 1);
        }
    }
    true
}

/// Convolutions with fewer multiply-adds per group stay on one thread (a split costs about a
/// microsecond with a polling worker, ten with a sleeping one).
const PARALLEL_CONV_MACS: usize = 1 << 18;
/// Parts per thread a split convolution aims at (see [`GemmPart::split`]).
const PARTS_PER_THREAD: usize = 4;
/// Largest im2col depth (c_in/group · kernel taps) whose threads each gather their own
/// columns ([`GemmPart::split_gathering`]). Measured at 2 threads, interleaved against the
/// channel-split im2col: k = 27…432 0.89–0.97× the time (first convolutions, SqueezeNet),
/// k = 576…2304 1.01–1.09× (ResNet's 3×3 layers), where a part's column block no longer
/// stays in its core's L2 next to the weights.
const GATHER_MAX_K: usize = 512;

/// [`conv_fused_prepacked`] split into `tasks` parts (1: the serial loops). Per batch item and
/// group (and im2col tile): the im2col over ranges of input channels, then the GEMM with its
/// epilogue over ranges of output columns (whole panels of [`packed::NR`]), or over ranges of
/// output channels (whole panels of [`packed::MR`]) when the columns are too few to share.
/// Each part packs its B panels into a buffer on its own stack; every output is still one
/// chain of multiply-adds in k order, so the bits do not depend on `tasks`.
#[allow(clippy::too_many_arguments)]
fn conv_prepacked_tasks(x: &[f32], wp: &[f32], y: &mut [f32], d: &ConvDims, win: &Window3, col: &mut [f32], ep: &Epilogue<'_, f32>, tasks: usize) {
    assert!(takes_prepacked(d), "conv_fused_prepacked: a depthwise convolution");
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let kdim = cg * win.kernel_size();
    let len = packed::packed_len(mg, kdim);
    assert!(wp.len() >= d.group * len, "conv_fused_prepacked: packed weights too short");
    let os = win.out_size();
    if win.is_pointwise() && os == 1 && gemv_all(x, wp, len, y, d, ep) {
        return;
    }
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if super::shifted::takes(d, win) {
        let tasks = if mg * kdim * os < PARALLEL_CONV_MACS { 1 } else { tasks };
        if tasks <= 1 || super::shifted::split_pays(win, tasks) {
            super::shifted::conv(x, wp, len, y, d, win, ep, tasks);
            return;
        }
    }
    if tasks <= 1 || mg * kdim * os < PARALLEL_CONV_MACS {
        let fused = tile_post(ep, 0, 0).is_some();
        // Pointwise windows' B rows are the input's own rows: packed by plain copies
        // (`conv_gemms`), not through the image gather with its masks and zeroing (32→32 at
        // 80×80: 111 → 75 µs; 64→16 at 55×55: 53 → 36).
        if super::im2col::Image::is_fast(win) && !win.is_pointwise() {
            image_gemms(x, wp, len, y, d, win, &mut col[..packed::prepacked_scratch_len(kdim)], ep, fused);
            return;
        }
        conv_gemms(x, y, d, win, col, packed::prepacked_scratch_len(kdim), ep, fused, |g, n, b, ldb, c, ldc, pack, at| {
            let wg = &wp[g * len..(g + 1) * len];
            packed::sgemm_prepacked_rows_then(mg, kdim, n, wg, 0, mg, b, ldb, c, ldc, pack, tile_post(ep, g * mg, at))
        });
        return;
    }
    assert!(y.len() >= d.batch * d.c_out * os, "conv_fused_prepacked: output too short");
    let is = win.in_size();
    if win.is_pointwise() && d.group > 1 {
        // Grouped pointwise convolutions (ShuffleNet's): (group, column range) parts in one
        // hand-off for the layer, instead of one per group (each group's GEMM is small: k =
        // 34…136), and more parts than threads so 3 groups share 2 threads evenly.
        let (yp, chunk) = (y.as_mut_ptr() as usize, (POINTWISE_TILE_ELEMS / mg.max(1)).max(MIN_CHUNK_COLS));
        let units = d.batch * d.group;
        let per_unit = (tasks * PARTS_PER_THREAD).div_ceil(units);
        let per = os.div_ceil(per_unit).max(3 * packed::NR).div_ceil(packed::NR) * packed::NR;
        let cparts = os.div_ceil(per);
        crate::pool_for(units * cparts, &|t| {
            let (u, cp) = (t / cparts, t % cparts);
            let (c0, c1) = (cp * per, ((cp + 1) * per).min(os));
            if c0 >= c1 {
                return;
            }
            let (n, g) = (u / d.group, u % d.group);
            let xg = &x[(n * d.c_in + g * cg) * is..(n * d.c_in + (g + 1) * cg) * is];
            let ch0 = n * d.c_out + g * mg;
            // SAFETY: each task writes columns c0..c1 of its group's output planes ch0..ch0 + mg
            // (inside `y` by the assert above): disjoint between tasks; `y` is not otherwise
            // used until every task has returned.
            let yg = unsafe { core::slice::from_raw_parts_mut((yp as *mut f32).add(ch0 * os), mg * os) };
            let part = GemmPart { mg, kdim, wp: &wp[g * len..(g + 1) * len], ep, m0: g * mg, ch0, os };
            part.split(&xg[c0..], os, c1 - c0, yg, c0, chunk, 1);
        });
        return;
    }
    let col = &mut col[packed::prepacked_scratch_len(kdim)..];
    for n in 0..d.batch {
        for g in 0..d.group {
            let xg = &x[(n * d.c_in + g * cg) * is..(n * d.c_in + (g + 1) * cg) * is];
            let ch0 = n * d.c_out + g * mg;
            let yg = &mut y[ch0 * os..(ch0 + mg) * os];
            let wpg = &wp[g * len..(g + 1) * len];
            let part = GemmPart { mg, kdim, wp: wpg, ep, m0: g * mg, ch0, os };
            if win.is_pointwise() {
                let chunk = (POINTWISE_TILE_ELEMS / mg.max(1)).max(MIN_CHUNK_COLS);
                part.split(xg, os, os, yg, 0, chunk, tasks);
                continue;
            }
            let (rows, ow) = (win.output[0] * win.output[1], win.output[2]);
            let tile = conv_tile_rows(d, win);
            let ks = win.kernel_size();
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + tile).min(rows);
                let cols = (r1 - r0) * ow;
                if cols >= tasks * 3 * packed::NR && super::im2col::Image::is_fast(win) {
                    part.split_image(xg, cg, win, r0 * ow, r1 * ow, yg, tasks);
                    r0 = r1;
                    continue;
                }
                let colt = &mut col[..kdim * cols];
                if cols >= tasks * 3 * packed::NR && kdim <= GATHER_MAX_K {
                    // Each part gathers its own columns into its own part of the tile and
                    // multiplies them at once: one hand-off per tile, and the columns stay in
                    // the cache of the core that gathered them.
                    part.split_gathering(xg, cg, win, r0 * ow, r1 * ow, colt, yg, tasks);
                    r0 = r1;
                    continue;
                }
                // im2col over channel ranges: disjoint row blocks of the tile.
                let ct = (tasks * PARTS_PER_THREAD).min(cg);
                let per = cg.div_ceil(ct);
                let (cp, clen) = (colt.as_mut_ptr() as usize, colt.len());
                crate::pool_for(ct, &|t| {
                    let (c0, c1) = (t * per, ((t + 1) * per).min(cg));
                    if c0 >= c1 {
                        return;
                    }
                    let (lo, hi) = (c0 * ks * cols, c1 * ks * cols);
                    assert!(hi <= clen);
                    // SAFETY: tasks write disjoint ranges [lo, hi) of the tile (checked inside
                    // it); the tile is not otherwise used until every task has returned.
                    let dst = unsafe { core::slice::from_raw_parts_mut((cp as *mut f32).add(lo), hi - lo) };
                    im2col_rows(&xg[c0 * is..c1 * is], c1 - c0, win, r0, r1, dst);
                });
                part.split(colt, cols, cols, &mut yg[..], r0 * ow, cols, tasks);
                r0 = r1;
            }
        }
    }
}

/// The epilogue as the GEMM's [`packed::Post`] (bias from channel `m0` on, the residual from
/// element `at` of the whole output on: where the GEMM's C starts), when it is a bias, a
/// residual and a ReLU (each optional): the AVX2 kernels then apply it in registers before
/// their last store, instead of a pass over the output that reads and writes it again (on
/// SqueezeNet's k = 16 and k = 27 convolutions that pass took 13 % of the time, on ResNet's
/// residual 1×1 convolutions 15 %). A scale, shift or another activation keeps the pass.
fn tile_post<'a>(ep: &Epilogue<'a, f32>, m0: usize, at: usize) -> packed::Done<'a> {
    let relu = match ep.act {
        Act::None => false,
        Act::Relu => true,
        _ => return None,
    };
    if ep.is_identity() || ep.scale.is_some() || ep.shift.is_some() {
        return None;
    }
    Some(packed::Post { bias: ep.bias.map(|b| &b[m0..]), residual: ep.residual.map(|r| &r[at..]), relu })
}

/// One group's GEMM `y[:, c_base + j] = W · B[:, j]` with the epilogue, for splitting.
struct GemmPart<'a> {
    mg: usize,
    kdim: usize,
    /// The group's packed weights.
    wp: &'a [f32],
    ep: &'a Epilogue<'a, f32>,
    /// The group's first output channel (bias and scale index).
    m0: usize,
    /// The group's first output plane in the whole output (residual offset).
    ch0: usize,
    /// Output plane size (C's row stride).
    os: usize,
}

impl GemmPart<'_> {
    /// Output positions `p0..p1` of the group (a tile of an im2col convolution over `xg`, `cg`
    /// channels) in column parts of whole [`packed::NR`] panels, split over `tasks` threads:
    /// each part gathers its columns into its own part of `colt` (`kdim × (p1 − p0)`
    /// elements), multiplies them and runs the epilogue on them.
    #[allow(clippy::too_many_arguments)]
    fn split_gathering(&self, xg: &[f32], cg: usize, win: &Window3, p0: usize, p1: usize, colt: &mut [f32], yg: &mut [f32], tasks: usize) {
        use packed::NR;
        let (mg, os, kdim) = (self.mg, self.os, self.kdim);
        let cols = p1 - p0;
        assert!(yg.len() >= mg * os && p1 <= os && colt.len() >= kdim * cols, "conv GEMM part: buffers too short");
        let per = cols.div_ceil(tasks * PARTS_PER_THREAD).max(3 * NR).div_ceil(NR) * NR;
        let (yp, cp) = (yg.as_mut_ptr() as usize, colt.as_mut_ptr() as usize);
        crate::pool_for(cols.div_ceil(per), &|t| {
            let (a, b) = (p0 + t * per, (p0 + (t + 1) * per).min(p1));
            if a >= b {
                return;
            }
            let n = b - a;
            // SAFETY: part t alone uses columns a..b: elements kdim·(a − p0).. of the tile
            // (inside it by the assert) and columns a..b of every output row of `yg`; neither
            // buffer is otherwise used until every part has returned.
            let (bt, y) = unsafe {
                (
                    core::slice::from_raw_parts_mut((cp as *mut f32).add(kdim * (a - p0)), kdim * n),
                    core::slice::from_raw_parts_mut(yp as *mut f32, mg * os),
                )
            };
            im2col_cols(xg, cg, win, a, b, bt);
            packed::with_panel(|panel| {
                let post = tile_post(self.ep, self.m0, self.ch0 * os + a);
                packed::sgemm_prepacked_rows_then(mg, kdim, n, self.wp, 0, mg, bt, n, &mut y[a..], os, panel, post);
                if post.is_none() {
                    apply_epilogue(y, self.ep, self.m0, mg, os, self.ch0 * os, a, b);
                }
            });
        });
    }

    /// [`GemmPart::split_gathering`] for windows whose panels the GEMM packs from the image
    /// itself ([`super::im2col::Image::is_fast`]): no column tile.
    #[allow(clippy::too_many_arguments)]
    fn split_image(&self, xg: &[f32], cg: usize, win: &Window3, p0: usize, p1: usize, yg: &mut [f32], tasks: usize) {
        use packed::NR;
        let (mg, os) = (self.mg, self.os);
        let cols = p1 - p0;
        assert!(yg.len() >= mg * os && p1 <= os, "conv GEMM part: output too short");
        let per = cols.div_ceil(tasks * PARTS_PER_THREAD).max(3 * NR).div_ceil(NR) * NR;
        let yp = yg.as_mut_ptr() as usize;
        crate::pool_for(cols.div_ceil(per), &|t| {
            let (a, b) = (p0 + t * per, (p0 + (t + 1) * per).min(p1));
            if a >= b {
                return;
            }
            // SAFETY: part t alone writes columns a..b of every output row of `yg` (inside it by
            // the assert); `yg` is not otherwise used until every part has returned.
            let y = unsafe { core::slice::from_raw_parts_mut(yp as *mut f32, mg * os) };
            let img = super::im2col::Image::new(xg, cg, win, a, b - a);
            packed::with_panel(|panel| {
                let post = tile_post(self.ep, self.m0, self.ch0 * os + a);
                packed::sgemm_prepacked_image_then(mg, b - a, self.wp, 0, mg, &img, &mut y[a..], os, panel, post);
                if post.is_none() {
                    apply_epilogue(y, self.ep, self.m0, mg, os, self.ch0 * os, a, b);
                }
            });
        });
    }

    /// Columns `0..ncols` of B (row stride `ldb`) into columns `c_base..` of the group's
    /// output `yg`, in chunks of at most `chunk` columns per GEMM call (each then gets its
    /// epilogue while in cache), split over `tasks` parts.
    #[allow(clippy::too_many_arguments)]
    fn split(&self, b: &[f32], ldb: usize, ncols: usize, yg: &mut [f32], c_base: usize, chunk: usize, tasks: usize) {
        use packed::{MR, NR};
        let (mg, os) = (self.mg, self.os);
        assert!(yg.len() >= mg * os && c_base + ncols <= os, "conv GEMM part: output too short");
        // Columns when each thread gets at least three panels of them, else output channels.
        // More parts than threads (up to PARTS_PER_THREAD each), so a thread that starts late
        // (another process holds its core) leaves its share to the others rather than making
        // them wait; output-channel parts each pack every B panel, so fewer of those.
        // When the output channels outnumber the columns, the weights are the bigger operand
        // and a column split would make every thread stream all of them: rows then.
        // Column parts are whole panels of the kernels' width, spread evenly (sizes differ by
        // at most one panel), as many as a multiple of the threads: with parts of equal width
        // and a short last one, 784 columns made 7 parts, 4 on one thread and 3 on the other.
        let by_cols = (ncols >= tasks * 3 * NR && mg <= ncols) || mg < 2 * MR;
        let w = packed::panel_width();
        let panels = ncols.div_ceil(w);
        let (parts, per) = if by_cols {
            let most = (tasks * PARTS_PER_THREAD).min(ncols / (3 * NR)).min(panels).max(1);
            (if most >= tasks { most / tasks * tasks } else { most }, 0)
        } else {
            let per = mg.div_ceil(MR).div_ceil(tasks * 2).max(2) * MR;
            (mg.div_ceil(per), per)
        };
        let (yp, ylen) = (yg.as_mut_ptr() as usize, yg.len());
        crate::pool_for(parts, &|t| {
            let (j0, j1, r0, r1) = if by_cols {
                ((t * panels / parts * w).min(ncols), ((t + 1) * panels / parts * w).min(ncols), 0, mg)
            } else {
                (0, ncols, t * per, ((t + 1) * per).min(mg))
            };
            if j0 >= j1 || r0 >= r1 {
                return;
            }
            // SAFETY: parts write disjoint blocks of the output (rows r0..r1 × columns
            // c_base + j0..c_base + j1, inside `yg` by the assert above); the view spans rows
            // r0.. of `yg`, and `yg` is not otherwise used until every part has returned.
            let y = unsafe { core::slice::from_raw_parts_mut((yp as *mut f32).add(r0 * os), ylen - r0 * os) };
            packed::with_panel(|panel| {
                let mut c0 = j0;
                while c0 < j1 {
                    let c1 = (c0 + chunk).min(j1);
                    let post = tile_post(self.ep, self.m0 + r0, (self.ch0 + r0) * os + c_base + c0);
                    packed::sgemm_prepacked_rows_then(mg, self.kdim, c1 - c0, self.wp, r0, r1, &b[c0..], ldb, &mut y[c_base + c0..], os, panel, post);
                    if post.is_none() {
                        apply_epilogue(y, self.ep, self.m0 + r0, r1 - r0, os, (self.ch0 + r0) * os, c_base + c0, c_base + c1);
                    }
                    c0 = c1;
                }
            });
        });
    }
}

/// The GEMM convolution's loops: per batch item and group, `y[:, cols] = W_g @ B(cols)` by
/// `gemm(g, cols, B, ldb, C, ldc, pack, at)`, where B is the input itself (pointwise, in
/// column chunks) or an im2col tile and `at` is where C starts in `y`, then the epilogue on the
/// columns just computed. `col` starts with
/// `pack_len` elements of the GEMM's packing space.
#[allow(clippy::too_many_arguments)]
fn conv_gemms<T: Elem>(
    x: &[T],
    y: &mut [T],
    d: &ConvDims,
    win: &Window3,
    col: &mut [T],
    pack_len: usize,
    ep: &Epilogue<'_, T>,
    ep_in_gemm: bool,
    mut gemm: impl FnMut(usize, usize, &[T], usize, &mut [T], usize, &mut [T], usize),
) {
    // The epilogue as a pass of its own, unless `gemm` applies it to its tiles.
    let apply_epilogue = |y: &mut [T], ep: &Epilogue<'_, T>, m0, mg, os, base, c0, c1| {
        if !ep_in_gemm {
            apply_epilogue(y, ep, m0, mg, os, base, c0, c1);
        }
    };
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let (is, os) = (win.in_size(), win.out_size());
    let kdim = cg * win.kernel_size();
    let (pack, col) = col.split_at_mut(pack_len);
    for n in 0..d.batch {
        for g in 0..d.group {
            let xg = &x[(n * d.c_in + g * cg) * is..(n * d.c_in + (g + 1) * cg) * is];
            let ch0 = n * d.c_out + g * mg;
            let yg = &mut y[ch0 * os..(ch0 + mg) * os];
            if win.is_pointwise() {
                let chunk = (POINTWISE_TILE_ELEMS / mg.max(1)).max(MIN_CHUNK_COLS).min(os);
                let mut c0 = 0;
                while c0 < os {
                    let c1 = (c0 + chunk).min(os);
                    gemm(g, c1 - c0, &xg[c0..], os, &mut yg[c0..], os, pack, ch0 * os + c0);
                    apply_epilogue(yg, ep, g * mg, mg, os, ch0 * os, c0, c1);
                    c0 = c1;
                }
                continue;
            }
            // Through the output in tiles of whole rows: y[:, tile] = wg @ im2col(tile).
            let (rows, ow) = (win.output[0] * win.output[1], win.output[2]);
            let tile = conv_tile_rows(d, win);
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + tile).min(rows);
                let cols = (r1 - r0) * ow;
                let col = &mut col[..kdim * cols];
                im2col_rows(xg, cg, win, r0, r1, col);
                gemm(g, cols, col, cols, &mut yg[r0 * ow..], os, pack, ch0 * os + r0 * ow);
                apply_epilogue(yg, ep, g * mg, mg, os, ch0 * os, r0 * ow, r1 * ow);
                r0 = r1;
            }
        }
    }
}

/// The GEMMs of a prepacked f32 convolution that is not pointwise, on this thread: per batch
/// item, group and tile of output rows, `y[:, tile] = wg @ im2col(tile)` with the GEMM packing
/// its B panels from the image (`im2col::Image`), then the epilogue (`fused`: in the GEMM).
/// The same sums in the same order as im2col into a tile and a product with it.
#[allow(clippy::too_many_arguments)]
fn image_gemms(x: &[f32], wp: &[f32], len: usize, y: &mut [f32], d: &ConvDims, win: &Window3, pack: &mut [f32], ep: &Epilogue<'_, f32>, fused: bool) {
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let (is, os) = (win.in_size(), win.out_size());
    let (rows, ow) = (win.output[0] * win.output[1], win.output[2]);
    let tile = conv_tile_rows(d, win);
    for n in 0..d.batch {
        for g in 0..d.group {
            let xg = &x[(n * d.c_in + g * cg) * is..(n * d.c_in + (g + 1) * cg) * is];
            let ch0 = n * d.c_out + g * mg;
            let yg = &mut y[ch0 * os..(ch0 + mg) * os];
            let wg = &wp[g * len..(g + 1) * len];
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + tile).min(rows);
                let (c0, c1) = (r0 * ow, r1 * ow);
                let img = super::im2col::Image::new(xg, cg, win, c0, c1 - c0);
                packed::sgemm_prepacked_image_then(mg, c1 - c0, wg, 0, mg, &img, &mut yg[c0..], os, pack, tile_post(ep, g * mg, ch0 * os + c0));
                if !fused {
                    apply_epilogue(yg, ep, g * mg, mg, os, ch0 * os, c0, c1);
                }
                r0 = r1;
            }
        }
    }
}

/// The epilogue on columns `c0..c1` of `mg` output planes (`os` apart) starting at channel
/// `m0` of the bias; `base` is the offset of `y` in the whole output (for the residual).
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply_epilogue<T: Elem>(y: &mut [T], ep: &Epilogue<'_, T>, m0: usize, mg: usize, os: usize, base: usize, c0: usize, c1: usize) {
    if ep.is_identity() {
        return;
    }
    for m in 0..mg {
        let row = &mut y[m * os + c0..m * os + c1];
        let res = ep.residual.map(|r| &r[base + m * os + c0..base + m * os + c1]);
        channel_epilogue(row, ep, m0 + m, res);
    }
}

/// The epilogue on one run of outputs of channel `m` (`res`: the residual's matching run).
pub(crate) fn channel_epilogue<T: Elem>(row: &mut [T], ep: &Epilogue<'_, T>, m: usize, res: Option<&[T]>) {
    let bias = ep.bias.map(|b| b[m]);
    if ep.scale.is_none() && ep.shift.is_none() {
        epilogue_row(row, bias, res, ep.act);
        return;
    }
    // Scale and shift (a Mul and an Add the compiler could not fold without changing
    // rounding) as extra passes over a run that is in L1 by now.
    if let Some(b) = bias {
        row.iter_mut().for_each(|v| *v = v.add(b));
    }
    if let Some(s) = ep.scale.map(|s| s[m]) {
        row.iter_mut().for_each(|v| *v = v.mul(s));
    }
    epilogue_row(row, ep.shift.map(|t| t[m]), res, ep.act);
}

/// One run of outputs: add the bias, add the residual, apply the activation. The activation is
/// matched once per run so each loop is a plain (vectorizable) map.
#[inline]
pub fn epilogue_row<T: Elem>(row: &mut [T], bias: Option<T>, res: Option<&[T]>, act: Act) {
    #[inline(always)]
    fn go<T: Elem>(row: &mut [T], bias: Option<T>, res: Option<&[T]>, f: impl Fn(T) -> T) {
        match (bias, res) {
            (Some(b), Some(r)) => row.iter_mut().zip(r).for_each(|(v, &r)| *v = f(v.add(b).add(r))),
            (Some(b), None) => row.iter_mut().for_each(|v| *v = f(v.add(b))),
            (None, Some(r)) => row.iter_mut().zip(r).for_each(|(v, &r)| *v = f(v.add(r))),
            (None, None) => row.iter_mut().for_each(|v| *v = f(*v)),
        }
    }
    let zero = T::zero();
    match act {
        Act::None => go(row, bias, res, |v| v),
        Act::Relu => go(row, bias, res, |v| if v > zero { v } else { zero }),
        Act::LeakyRelu(a) => {
            let a = T::from_f64(a as f64);
            go(row, bias, res, |v| if v < zero { a.mul(v) } else { v })
        }
        Act::Clip(lo, hi) => {
            let (lo, hi) = (T::from_f64(lo as f64), T::from_f64(hi as f64));
            go(row, bias, res, |v| v.max_of(lo).min_of(hi))
        }
        // In f32 (the f64 round trip is exact for f32), as the unfused kernels compute them.
        Act::HardSwish => go(row, bias, res, |v| f32_act(v, |x| eval_f32(Unary::HardSwish, x))),
        Act::Sigmoid => go(row, bias, res, |v| f32_act(v, |x| eval_f32(Unary::Sigmoid, x))),
        Act::Silu => go(row, bias, res, |v| f32_act(v, |x| x * eval_f32(Unary::Sigmoid, x))),
    }
}

/// `f` on `v` computed in f32.
#[inline(always)]
fn f32_act<T: Elem>(v: T, f: impl Fn(f32) -> f32) -> T {
    T::from_f64(f(v.to_f64() as f32) as f64)
}

/// Convolution where each output channel reads one input channel (`c_in / group == 1`:
/// depthwise, with a channel multiplier of 1 or 2), as a direct loop: per output plane, one pass per
/// kernel tap over each output row, accumulating `w · x` (contiguous for stride 1, so it
/// vectorizes), then the epilogue while the plane is in cache. A GEMM here would have one row.
fn depthwise<T: Elem>(x: &[T], w: &[T], y: &mut [T], d: &ConvDims, win: &Window3, ep: &Epilogue<'_, T>) {
    let mg = d.c_out / d.group;
    let (is, os, ks) = (win.in_size(), win.out_size(), win.kernel_size());
    let [_, oh, ow] = win.output;
    let [_, ih, iw] = win.input;
    let sw = win.strides[2];
    for n in 0..d.batch {
        for m in 0..d.c_out {
            let xc = &x[(n * d.c_in + m / mg) * is..(n * d.c_in + m / mg + 1) * is];
            let wm = &w[m * ks..(m + 1) * ks];
            let base = (n * d.c_out + m) * os;
            let yp = &mut y[base..base + os];
            yp.fill(T::zero());
            let mut k = 0;
            for kd in 0..win.kernel[0] {
                for kh in 0..win.kernel[1] {
                    for kw in 0..win.kernel[2] {
                        let wv = wm[k];
                        k += 1;
                        let (lo, hi) = win.valid_range(2, kw);
                        if lo >= hi {
                            continue;
                        }
                        for r in 0..win.output[0] * oh {
                            let (od, oh_) = (r / oh, r % oh);
                            let (zd, zh) = (win.coord(0, od, kd), win.coord(1, oh_, kh));
                            if zd < 0 || zd >= win.input[0] as isize || zh < 0 || zh >= ih as isize {
                                continue;
                            }
                            let start = ((zd as usize * ih + zh as usize) * iw) as isize + win.coord(2, lo, kw);
                            let src = &xc[start as usize..];
                            let out = &mut yp[r * ow + lo..r * ow + hi];
                            if sw == 1 {
                                for (o, &v) in out.iter_mut().zip(src) {
                                    *o = o.add(wv.mul(v));
                                }
                            } else {
                                for (j, o) in out.iter_mut().enumerate() {
                                    *o = o.add(wv.mul(src[j * sw]));
                                }
                            }
                        }
                    }
                }
            }
            let res = ep.residual.map(|r| &r[base..base + os]);
            if !ep.is_identity() {
                channel_epilogue(yp, ep, m, res);
            }
        }
    }
}

/// Outputs one register block of [`depthwise_2d`] computes.
const DW_BLOCK: usize = 8;

/// Geometry of the zero-padded copy of one input plane that [`depthwise_2d`] reads: exactly
/// the rows and columns the windows span (padding, cropping and ceil-mode ends resolved), so
/// every tap of every output is a plain read, plus slack for the last register block.
#[derive(Clone, Copy, Debug)]
struct PaddedPlane {
    rows: usize,
    /// Row pitch of the plane.
    cols: usize,
    /// Stride 1 both ways: the whole output is one run over the plane with its pitch (the
    /// `cols - ow` positions between rows are computed and dropped), so short rows do not cut
    /// the register blocks short. Otherwise one run per output row, at stride 1 along it,
    /// subsampled.
    flat: bool,
    /// Length of the run buffer (whole blocks).
    run: usize,
}

impl PaddedPlane {
    /// `None` for windows that use the depth dim (those take the generic loop).
    fn of(win: &Window3) -> Option<PaddedPlane> {
        if win.input[0] != 1 || win.output[0] != 1 || win.kernel[0] != 1 || win.pads_begin[0] != 0 || win.out_size() == 0 {
            return None;
        }
        let [_, oh, ow] = win.output;
        let span = |dim: usize, o: usize| (o - 1) * win.strides[dim] + (win.kernel[dim] - 1) * win.dilations[dim] + 1;
        let (rows, cols) = (span(1, oh), span(2, ow));
        let flat = win.strides[1] == 1 && win.strides[2] == 1;
        let run = if flat { (oh - 1) * cols + ow } else { (ow - 1) * win.strides[2] + 1 };
        Some(PaddedPlane { rows, cols, flat, run: run.div_ceil(DW_BLOCK) * DW_BLOCK })
    }
    /// Plane, slack for the last block's reads, then the run buffer.
    fn len(&self) -> usize {
        self.rows * self.cols + DW_BLOCK + self.run
    }
}

/// `out[j] = Σ_t w[t] · plane[start + j + off(t)]` over the taps in (kh, kw) order, from zero,
/// in register blocks of [`DW_BLOCK`] outputs, four blocks at a time so four independent
/// chains of adds are in flight. `out.len()` is a multiple of the block.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn dw_run<T: Elem>(plane: &[T], start: usize, out: &mut [T], wm: &[T], kh_n: usize, kw_n: usize, row_step: usize, dw: usize) {
    const B: usize = DW_BLOCK;
    let mut blocks = out.chunks_exact_mut(4 * B);
    let mut c0 = start;
    for quad in &mut blocks {
        let mut acc = [[T::zero(); B]; 4];
        let mut k = 0;
        for kh in 0..kh_n {
            let rowp = c0 + kh * row_step;
            for kw in 0..kw_n {
                let wv = wm[k];
                k += 1;
                let src: &[T; 4 * B] = plane[rowp + kw * dw..rowp + kw * dw + 4 * B].try_into().unwrap();
                for q in 0..4 {
                    for l in 0..B {
                        acc[q][l] = acc[q][l].add(wv.mul(src[q * B + l]));
                    }
                }
            }
        }
        for q in 0..4 {
            quad[q * B..(q + 1) * B].copy_from_slice(&acc[q]);
        }
        c0 += 4 * B;
    }
    for out in blocks.into_remainder().chunks_exact_mut(B) {
        let mut acc = [T::zero(); B];
        let mut k = 0;
        for kh in 0..kh_n {
            let rowp = c0 + kh * row_step;
            for kw in 0..kw_n {
                let wv = wm[k];
                k += 1;
                let src: &[T; B] = plane[rowp + kw * dw..rowp + kw * dw + B].try_into().unwrap();
                for l in 0..B {
                    acc[l] = acc[l].add(wv.mul(src[l]));
                }
            }
        }
        out.copy_from_slice(&acc);
        c0 += B;
    }
}

/// [`depthwise`] for 2-D windows: copy each input plane once into a zero-padded plane
/// (`col`), then compute the outputs in register blocks, all taps per block (one store per
/// output instead of one per tap): at stride 1 as one run over the whole plane, otherwise one
/// run per output row at stride 1, of which every stride-th column is kept. Each output adds
/// its taps in the same (kh, kw) order, from zero, as [`depthwise`]; the taps that fall into
/// the padding add `w · 0`, which changes no finite sum.
#[allow(clippy::too_many_arguments)]
fn depthwise_2d<T: Elem>(x: &[T], w: &[T], y: &mut [T], d: &ConvDims, win: &Window3, pp: &PaddedPlane, col: &mut [T], ep: &Epilogue<'_, T>) {
    let os = win.out_size();
    let planes = d.batch * d.c_out;
    assert!(y.len() >= planes * os && col.len() >= pp.len(), "depthwise_2d: slices too short");
    // Output planes in ranges over the pool, each part with its own padded plane (from the
    // heap; the planned scratch serves a single part), when the work pays for the split.
    #[cfg(feature = "std")]
    {
        let threads = crate::pool::threads();
        let work = planes * os * win.kernel_size();
        if threads > 1 && planes >= 2 && work >= PARALLEL_DW_MACS {
            crate::for_plane_ranges(planes, os, work, y, &|p0, p1, out| {
                let mut scratch = std::vec![T::zero(); pp.len()];
                depthwise_2d_planes(x, w, out, d, win, pp, &mut scratch, ep, p0, p1);
            });
            return;
        }
    }
    depthwise_2d_planes(x, w, y, d, win, pp, col, ep, 0, planes);
}

/// Depthwise convolutions with fewer multiply-adds stay on one thread.
#[cfg(feature = "std")]
const PARALLEL_DW_MACS: usize = 1 << 16;

/// [`depthwise_2d`] for the output planes `p0..p1` (plane `n · c_out + m`), written to `y`
/// from its start (`y` holds those planes only).
#[allow(clippy::too_many_arguments)]
fn depthwise_2d_planes<T: Elem>(x: &[T], w: &[T], y: &mut [T], d: &ConvDims, win: &Window3, pp: &PaddedPlane, col: &mut [T], ep: &Epilogue<'_, T>, p0: usize, p1: usize) {
    let mg = d.c_out / d.group;
    let (is, os, ks) = (win.in_size(), win.out_size(), win.kernel_size());
    let ow = win.output[2];
    let [_, ih, iw] = win.input;
    let ([_, sh, sw], [_, dh, dw]) = (win.strides, win.dilations);
    let [_, kh_n, kw_n] = win.kernel;
    let plane_len = pp.rows * pp.cols + DW_BLOCK;
    let col = &mut col[..plane_len + pp.run];
    // 3×3, 5×5 and 7×7 windows of f32 at stride 1 or 2 by the AVX2 kernel (`dw_avx2`), with
    // the epilogue in it when that is a bias and a ReLU (or less).
    #[cfg(target_arch = "x86_64")]
    let fast = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>()
        && kh_n == kw_n
        && matches!(kh_n, 3 | 5 | 7)
        && dh == 1
        && dw == 1
        && sh == sw
        && (sh == 1 || sh == 2)
        && super::has_avx2();
    #[cfg(target_arch = "x86_64")]
    let fused_ep = ep.is_bias_relu();
    // The input channel whose padded copy `plane` holds (a multiplier of 2 reads each twice).
    let mut have = usize::MAX;
    for pi in p0..p1 {
        let (n, m) = (pi / d.c_out, pi % d.c_out);
        let src_ch = n * d.c_in + m / mg;
        if src_ch != have {
            let plane = &mut col[..plane_len];
            have = src_ch;
            // The padded copy of input channel m / mg: rows and columns of the span that
            // map outside the input are zero.
            let xc = &x[src_ch * is..(src_ch + 1) * is];
            plane.fill(T::zero());
            let (pt, pl) = (win.pads_begin[1], win.pads_begin[2]);
            // Columns c of the span with 0 <= c - pl < iw.
            let c_lo = pl.max(0) as usize;
            let c_hi = (iw as isize + pl).clamp(0, pp.cols as isize) as usize;
            for r in 0..pp.rows {
                let zr = r as isize - pt;
                if zr < 0 || zr >= ih as isize || c_lo >= c_hi {
                    continue;
                }
                let src = zr as usize * iw + (c_lo as isize - pl) as usize;
                plane[r * pp.cols + c_lo..r * pp.cols + c_hi].copy_from_slice(&xc[src..src + (c_hi - c_lo)]);
            }
        }
        let wm = &w[m * ks..(m + 1) * ks];
        let base = pi * os;
        let yp = &mut y[(pi - p0) * os..(pi - p0 + 1) * os];
        #[cfg(target_arch = "x86_64")]
        if fast {
            // SAFETY: T is f32 (`fast`), so these are the same memory as [f32].
            let (pf, wf, yf) = unsafe {
                (
                    core::slice::from_raw_parts(col.as_ptr() as *const f32, col.len()),
                    core::slice::from_raw_parts(wm.as_ptr() as *const f32, wm.len()),
                    core::slice::from_raw_parts_mut(yp.as_mut_ptr() as *mut f32, yp.len()),
                )
            };
            let (bias, relu) = if fused_ep { (ep.bias.map(|b| b[m].to_f64() as f32), ep.act == Act::Relu) } else { (None, false) };
            let oh = win.output[1];
            // SAFETY: the CPU has AVX2 (`fast`); the run buffer after the plane is the slack
            // (the kernel checks its reach and declines otherwise).
            let done = unsafe {
                match kh_n {
                    3 => super::dw_avx2::plane::<3>(pf, pp.cols, wf, yf, oh, ow, sh, bias, relu),
                    5 => super::dw_avx2::plane::<5>(pf, pp.cols, wf, yf, oh, ow, sh, bias, relu),
                    _ => super::dw_avx2::plane::<7>(pf, pp.cols, wf, yf, oh, ow, sh, bias, relu),
                }
            };
            if done {
                if !fused_ep {
                    let res = ep.residual.map(|r| &r[base..base + os]);
                    channel_epilogue(yp, ep, m, res);
                }
                continue;
            }
        }
        let (plane, run) = col.split_at_mut(plane_len);
        let row_step = dh * pp.cols;
        if pp.flat {
            dw_run(plane, 0, run, wm, kh_n, kw_n, row_step, dw);
            for (r, dst) in yp.chunks_exact_mut(ow).enumerate() {
                dst.copy_from_slice(&run[r * pp.cols..r * pp.cols + ow]);
            }
        } else {
            for (r, dst) in yp.chunks_exact_mut(ow).enumerate() {
                dw_run(plane, r * sh * pp.cols, run, wm, kh_n, kw_n, row_step, dw);
                dst.iter_mut().enumerate().for_each(|(j, o)| *o = run[j * sw]);
            }
        }
        let res = ep.residual.map(|r| &r[base..base + os]);
        if !ep.is_identity() {
            channel_epilogue(yp, ep, m, res);
        }
    }
}

/// Scratch elements [`conv_transpose`] needs.
pub fn conv_transpose_scratch_len(d: &ConvDims, w: &Window3) -> usize {
    let (cg, mk) = (d.c_in / d.group.max(1), (d.c_out / d.group.max(1)) * w.kernel_size());
    mk * w.out_size() + mk * cg + packed::scratch_len(mk, cg)
}

/// One group's columns: `col (mk × xs) = wgᵀ (mk × cg) · xg (cg × xs)`. The weights are
/// transposed into `scratch` first (mk · cg values: small) so the product runs on the
/// row-major packed kernels with the rest of `scratch` as packing space; read in place, as a
/// column-major A, the product fell to the generic GEMM at a third of the speed.
#[allow(clippy::too_many_arguments)]
fn transposed_columns<T: Elem>(xg: &[T], wg: &[T], mk: usize, cg: usize, xs: usize, col: &mut [T], scratch: &mut [T], mm: &impl MatMul<T>) {
    let (wt, pack) = scratch.split_at_mut(mk * cg);
    for (c, row) in wg[..cg * mk].chunks_exact(mk).enumerate() {
        for (r, &v) in row.iter().enumerate() {
            wt[r * cg + c] = v;
        }
    }
    mm.mm_rows(mk, cg, xs, wt, cg, xg, xs, col, xs, pack);
}

/// Transposed convolution, the adjoint of [`conv`] in `x`: x `[batch, c_in, X…]`, w `[c_in,
/// c_out/group, kernel…]`, y `[batch, c_out, Y…]`. `win` is the geometry of the forward conv
/// that maps Y to X (`win.input` = Y's spatial size, `win.output` = X's).
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose<T: Elem>(x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], d: &ConvDims, win: &Window3, col: &mut [T], mm: &impl MatMul<T>) {
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let (ys, xs, ks) = (win.in_size(), win.out_size(), win.kernel_size());
    let mk = mg * ks;
    let tiles = tiles_exactly(win);
    if !tiles {
        y.fill(T::zero());
    }
    for n in 0..d.batch {
        for g in 0..d.group {
            let xg = &x[(n * d.c_in + g * cg) * xs..(n * d.c_in + (g + 1) * cg) * xs];
            let wg = &w[g * cg * mk..(g + 1) * cg * mk];
            let (col, rest) = col.split_at_mut(mk * xs);
            transposed_columns(xg, wg, mk, cg, xs, col, rest, mm);
            let yg = &mut y[(n * d.c_out + g * mg) * ys..(n * d.c_out + (g + 1) * mg) * ys];
            if tiles {
                tile_columns(col, mg, win, yg, bias.map(|b| &b[g * mg..(g + 1) * mg]));
            } else {
                col2im(col, mg, win, yg);
            }
        }
        if let (Some(bias), false) = (bias, tiles) {
            add_bias(&mut y[n * d.c_out * ys..(n + 1) * d.c_out * ys], bias, ys);
        }
    }
}

/// Whether the windows of `win` (a transposed convolution's forward geometry) tile its input
/// exactly: kernel = stride, no padding or dilation, every position in one window (the 2×2
/// stride-2 upsampling of U-Nets and DBNet's FPN head).
fn tiles_exactly(win: &Window3) -> bool {
    (0..3).all(|i| win.kernel[i] == win.strides[i] && win.dilations[i] == 1 && win.pads_begin[i] == 0 && win.input[i] == win.output[i] * win.strides[i])
}

/// [`col2im`] and the bias for windows that tile exactly ([`tiles_exactly`]): each output
/// takes one column value, `0 + v (+ bias)` as the accumulation and the bias pass compute
/// it, written once in output order (an interleave of the kernel columns), instead of a
/// zero fill, an accumulating pass per kernel tap and a bias pass (DBNet's 24→24 2×2
/// stride-2 layer at 80×80: its col2im and bias passes took more than its GEMM).
fn tile_columns<T: Elem>(col: &[T], channels: usize, win: &Window3, y: &mut [T], bias: Option<&[T]>) {
    let [k0, k1, k2] = win.kernel;
    let [o0, o1, o2] = win.output;
    let [_, i1, i2] = win.input;
    let (ks, os) = (k0 * k1 * k2, o0 * o1 * o2);
    let is = win.in_size();
    for c in 0..channels {
        let yc = &mut y[c * is..(c + 1) * is];
        let b = bias.map(|b| b[c]);
        for (d, a0) in (0..o0).flat_map(|d| (0..k0).map(move |a| (d, a))) {
            for (h, a1) in (0..o1).flat_map(|h| (0..k1).map(move |a| (h, a))) {
                // Output row (d·k0 + a0, h·k1 + a1): for each input column w, the k2 values
                // of taps (a0, a1, ·) side by side.
                let out = &mut yc[((d * k0 + a0) * i1 + h * k1 + a1) * i2..][..i2];
                let src = (d * o1 + h) * o2;
                for a2 in 0..k2 {
                    let row = &col[(c * ks + (a0 * k1 + a1) * k2 + a2) * os + src..][..o2];
                    for (o, &v) in out[a2..].iter_mut().step_by(k2).zip(row) {
                        let v = T::zero().add(v);
                        *o = match b {
                            Some(b) => v.add(b),
                            None => v,
                        };
                    }
                }
            }
        }
    }
}

fn add_bias<T: Elem>(y: &mut [T], bias: &[T], plane: usize) {
    for (yc, &b) in y.chunks_exact_mut(plane.max(1)).zip(bias) {
        for v in yc {
            *v = v.add(b);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    use crate::kernels::test_rng::rnd;

    /// Transposed convolutions whose windows tile the output (kernel = stride) write each
    /// output once from its column value and the bias: the bits of the general path (the
    /// zero fill, `col2im`'s accumulation, the bias pass), over 1-, 2- and 3-D windows,
    /// unequal kernels, groups, batches, with and without a bias.
    #[test]
    fn exactly_tiling_transposed_convolutions_keep_the_bits() {
        // batch, c_in, c_out, group, x dims (d, h, w), kernel = stride (d, h, w)
        type Case = (usize, usize, usize, usize, [usize; 3], [usize; 3]);
        let cases: [Case; 5] = [
            (1, 24, 24, 1, [1, 9, 11], [1, 2, 2]),
            (2, 6, 4, 2, [1, 5, 7], [1, 2, 3]),
            (1, 5, 3, 1, [1, 1, 13], [1, 1, 4]),
            (2, 4, 6, 1, [3, 4, 5], [2, 2, 2]),
            (1, 8, 1, 1, [1, 16, 16], [1, 2, 2]),
        ];
        for (i, &(batch, c_in, c_out, group, xd, k)) in cases.iter().enumerate() {
            let d = ConvDims { batch, c_in, c_out, group };
            let yd = [xd[0] * k[0], xd[1] * k[1], xd[2] * k[2]];
            let win = Window3 { input: yd, output: xd, kernel: k, strides: k, dilations: [1; 3], pads_begin: [0; 3], pads_end: [0; 3] };
            assert!(tiles_exactly(&win));
            let (xs, ys, ks) = (win.out_size(), win.in_size(), win.kernel_size());
            let x = rnd(batch * c_in * xs, i as u32 + 1);
            let w = rnd(c_in * (c_out / group) * ks, i as u32 + 2);
            let b = rnd(c_out, i as u32 + 3);
            for bias in [Some(&b[..]), None] {
                let mut got = vec![f32::NAN; batch * c_out * ys];
                let mut col = vec![0f32; conv_transpose_scratch_len(&d, &win)];
                conv_transpose(&x, &w, bias, &mut got, &d, &win, &mut col, &Sgemm);
                // The general path, spelled out.
                let (cg, mg) = (c_in / group, c_out / group);
                let mut want = vec![0f32; got.len()];
                for n in 0..batch {
                    for g in 0..group {
                        let mut col = vec![0f32; mg * ks * xs];
                        let mut scratch = vec![0f32; conv_transpose_scratch_len(&d, &win)];
                        transposed_columns(&x[(n * c_in + g * cg) * xs..], &w[g * cg * mg * ks..], mg * ks, cg, xs, &mut col, &mut scratch, &Sgemm);
                        col2im(&col, mg, &win, &mut want[(n * c_out + g * mg) * ys..(n * c_out + (g + 1) * mg) * ys]);
                    }
                    if let Some(b) = bias {
                        add_bias(&mut want[n * c_out * ys..(n + 1) * c_out * ys], b, ys);
                    }
                }
                let bad = got.iter().zip(&want).position(|(g, w)| g.to_bits() != w.to_bits());
                assert!(bad.is_none(), "case {i}, bias {}: first difference at {bad:?}", bias.is_some());
            }
        }
    }

    /// Direct loop over 2-D inputs (spatial dims given as 3-D with a leading 1).
    fn naive(x: &[f32], w: &[f32], b: &[f32], d: &ConvDims, win: &Window3) -> Vec<f32> {
        let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
        let (is, os, ks) = (win.in_size(), win.out_size(), win.kernel_size());
        let mut y = vec![0f32; d.batch * d.c_out * os];
        for n in 0..d.batch {
            for m in 0..d.c_out {
                let g = m / mg;
                for oh in 0..win.output[1] {
                    for ow in 0..win.output[2] {
                        let mut acc = b[m];
                        for c in 0..cg {
                            for kh in 0..win.kernel[1] {
                                for kw in 0..win.kernel[2] {
                                    let ih = win.coord(1, oh, kh);
                                    let iw = win.coord(2, ow, kw);
                                    if ih < 0 || iw < 0 || ih >= win.input[1] as isize || iw >= win.input[2] as isize {
                                        continue;
                                    }
                                    let xv = x[(n * d.c_in + g * cg + c) * is + ih as usize * win.input[2] + iw as usize];
                                    let wv = w[(m * cg + c) * ks + kh * win.kernel[2] + kw];
                                    acc += xv * wv;
                                }
                            }
                        }
                        y[(n * d.c_out + m) * os + oh * win.output[2] + ow] = acc;
                    }
                }
            }
        }
        y
    }

    fn out_dim(i: usize, k: usize, s: usize, dl: usize, pb: isize, pe: isize) -> usize {
        ((i as isize + pb + pe - ((k - 1) * dl + 1) as isize) / s as isize + 1) as usize
    }

    #[test]
    fn conv_matches_naive() {
        let cases = [
            // batch, c_in, c_out, group, h, w, kh, kw, s, dil, pb, pe
            (1, 3, 4, 1, 7, 6, 3, 3, 1, 1, 1, 1),
            (2, 4, 6, 2, 8, 9, 3, 2, 2, 1, 0, 1),
            (1, 6, 6, 6, 7, 7, 3, 3, 1, 2, 2, 2),
            (1, 4, 8, 4, 9, 5, 1, 3, 2, 1, 1, 0),
            (2, 3, 5, 1, 5, 5, 1, 1, 1, 1, 0, 0),
            (1, 2, 3, 1, 10, 4, 4, 1, 3, 2, 2, 3),
            (1, 3, 4, 1, 23, 29, 7, 7, 4, 1, 3, 3),
            // Large enough that the column buffer is tiled (checked below).
            (1, 16, 4, 1, 64, 70, 3, 3, 1, 1, 1, 1),
            (2, 8, 6, 2, 130, 90, 5, 5, 2, 1, 2, 2),
        ];
        for (i, &(batch, c_in, c_out, group, h, wd, kh, kw, s, dl, pb, pe)) in cases.iter().enumerate() {
            let d = ConvDims { batch, c_in, c_out, group };
            let (oh, ow) = (out_dim(h, kh, s, dl, pb, pe), out_dim(wd, kw, s, dl, pb, pe));
            let win = Window3::new(&[h, wd], &[oh, ow], &[kh, kw], &[s, s], &[dl, dl], &[pb, pb], &[pe, pe]).unwrap();
            let x = rnd(batch * c_in * h * wd, i as u32 + 1);
            let w = rnd(c_out * (c_in / group) * kh * kw, i as u32 + 100);
            let b = rnd(c_out, i as u32 + 200);
            let mut y = vec![0f32; batch * c_out * oh * ow];
            if i >= 7 {
                assert!(conv_tile_rows(&d, &win) < oh, "case {i} should tile");
            }
            let mut col = vec![0f32; conv_scratch_len(&d, &win)];
            conv(&x, &w, Some(&b), &mut y, &d, &win, &mut col, &Sgemm);
            let want = naive(&x, &w, &b, &d, &win);
            for (a, e) in y.iter().zip(&want) {
                assert!((a - e).abs() < 1e-4, "case {i}: {a} vs {e}");
            }
        }
    }

    fn act_ref(v: f32, act: Act) -> f32 {
        match act {
            Act::None => v,
            Act::Relu => v.max(0.0),
            Act::LeakyRelu(a) => if v < 0.0 { a * v } else { v },
            Act::Clip(lo, hi) => v.max(lo).min(hi),
            Act::HardSwish => v * (v / 6.0 + 0.5).clamp(0.0, 1.0),
            Act::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            Act::Silu => v / (1.0 + (-v).exp()),
        }
    }

    #[test]
    fn conv_fused_matches_naive_then_epilogue() {
        let cases = [
            // batch, c_in, c_out, group, h, w, kh, kw, s, dil, pb, pe
            // pointwise, split into column chunks (64 channels · 1600 columns)
            (1, 16, 64, 1, 40, 40, 1, 1, 1, 1, 0, 0),
            // pointwise, grouped
            (2, 12, 9, 3, 9, 11, 1, 1, 1, 1, 0, 0),
            // im2col, tiled
            (1, 16, 4, 1, 64, 70, 3, 3, 1, 1, 1, 1),
            // depthwise, stride 1 and 2, and with a channel multiplier
            (2, 8, 8, 8, 12, 10, 3, 3, 1, 1, 1, 1),
            (1, 6, 6, 6, 13, 13, 3, 3, 2, 1, 1, 1),
            (1, 4, 12, 4, 9, 7, 5, 3, 1, 2, 2, 1),
            // one input channel, no group: GEMM (more than 2 outputs per group)
            (1, 1, 5, 1, 10, 10, 5, 5, 1, 1, 0, 0),
            // depthwise with multiplier 2: direct
            (1, 5, 10, 5, 11, 8, 3, 3, 2, 1, 1, 1),
        ];
        let acts = [Act::None, Act::Relu, Act::LeakyRelu(0.1), Act::Clip(-0.5, 0.25), Act::HardSwish, Act::Sigmoid, Act::Silu];
        for (i, &(batch, c_in, c_out, group, h, wd, kh, kw, s, dl, pb, pe)) in cases.iter().enumerate() {
            let d = ConvDims { batch, c_in, c_out, group };
            let (oh, ow) = (out_dim(h, kh, s, dl, pb, pe), out_dim(wd, kw, s, dl, pb, pe));
            let win = Window3::new(&[h, wd], &[oh, ow], &[kh, kw], &[s, s], &[dl, dl], &[pb, pb], &[pe, pe]).unwrap();
            let x = rnd(batch * c_in * h * wd, i as u32 + 1);
            let w = rnd(c_out * (c_in / group) * kh * kw, i as u32 + 100);
            let b = rnd(c_out, i as u32 + 200);
            let r = rnd(batch * c_out * oh * ow, i as u32 + 300);
            let (sc, sh) = (rnd(c_out, i as u32 + 400), rnd(c_out, i as u32 + 500));
            let plain = naive(&x, &w, &b, &d, &win);
            let os = oh * ow;
            for (j, &act) in acts.iter().enumerate() {
                let residual = if j % 2 == 1 { Some(&r[..]) } else { None };
                let (scale, shift) = if j % 4 >= 2 { (Some(&sc[..]), Some(&sh[..])) } else { (None, None) };
                let mut y = vec![f32::NAN; plain.len()];
                let mut col = vec![0f32; conv_scratch_len(&d, &win)];
                let ep = Epilogue { bias: Some(&b[..]), scale, shift, residual, act };
                conv_fused(&x, &w, &mut y, &d, &win, &mut col, &Sgemm, &ep);
                for (k, (a, e)) in y.iter().zip(&plain).enumerate() {
                    let m = (k / os) % c_out;
                    let e = e * scale.map_or(1.0, |s| s[m]) + shift.map_or(0.0, |t| t[m]);
                    let e = act_ref(e + residual.map_or(0.0, |r| r[k]), act);
                    assert!((a - e).abs() < 1e-4, "case {i} act {act:?}: {a} vs {e}");
                }
            }
        }
    }

    /// Splitting a pointwise GEMM into column chunks changes no sum: the chunked conv gives the
    /// bits of one GEMM over all columns (this keeps the interpreter and fused code identical).
    #[test]
    fn pointwise_chunks_give_the_bits_of_one_gemm() {
        let (c_in, c_out, h, wd) = (96, 128, 30, 31);
        let d = ConvDims { batch: 1, c_in, c_out, group: 1 };
        let win = Window3::new(&[h, wd], &[h, wd], &[1, 1], &[1, 1], &[1, 1], &[0, 0], &[0, 0]).unwrap();
        let x = rnd(c_in * h * wd, 1);
        let w = rnd(c_out * c_in, 2);
        let mut y = vec![0f32; c_out * h * wd];
        conv(&x, &w, None, &mut y, &d, &win, &mut vec![0f32; conv_scratch_len(&d, &win)], &Sgemm);
        let mut want = vec![0f32; y.len()];
        let os = h * wd;
        let mut pack = vec![0f32; packed::scratch_len(c_out, c_in)];
        Sgemm.mm_rows(c_out, c_in, os, &w, c_in, &x, os, &mut want, os, &mut pack);
        assert!(POINTWISE_TILE_ELEMS / c_out < os, "should chunk");
        assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn scratch_sizes() {
        let win = Window3::new(&[8, 8], &[8, 8], &[3, 3], &[1, 1], &[1, 1], &[1, 1], &[1, 1]).unwrap();
        // A 10×10 padded plane, 8 elements of slack, the run over it (7 · 10 + 8 = 78 → 80).
        assert_eq!(conv_scratch_len(&ConvDims { batch: 1, c_in: 4, c_out: 8, group: 4 }, &win), 100 + 8 + 80);
        assert_eq!(conv_scratch_len(&ConvDims { batch: 1, c_in: 4, c_out: 12, group: 4 }, &win), packed::scratch_len(3, 9) + 9 * 64);
        assert_eq!(conv_scratch_len(&ConvDims { batch: 1, c_in: 4, c_out: 8, group: 2 }, &win), packed::scratch_len(4, 18) + 2 * 9 * 64);
        let pw = Window3::new(&[8, 8], &[8, 8], &[1, 1], &[1, 1], &[1, 1], &[0, 0], &[0, 0]).unwrap();
        assert_eq!(conv_scratch_len(&ConvDims { batch: 1, c_in: 4, c_out: 8, group: 1 }, &pw), packed::scratch_len(8, 4));
        // Weights stored packed only where padding to whole panels costs at most 1/8.
        assert!(takes_prepacked(&ConvDims { batch: 1, c_in: 4, c_out: 16, group: 1 }));
        assert!(!takes_prepacked(&ConvDims { batch: 1, c_in: 4, c_out: 8, group: 1 }));
        assert!(!takes_prepacked(&ConvDims { batch: 1, c_in: 4, c_out: 8, group: 4 }));
        assert_eq!(conv_prepacked_scratch_len(&ConvDims { batch: 1, c_in: 4, c_out: 16, group: 1 }, &pw), 4 * packed::NR);
    }

    /// Weights packed ahead of time give the bits of packing on every call, over pointwise
    /// (chunked), im2col (tiled) and grouped convolutions.
    #[test]
    fn prepacked_weights_give_the_same_bits() {
        let cases = [
            // batch, c_in, c_out, group, h, w, kh, kw, s, dil, pb, pe
            (1, 16, 64, 1, 40, 40, 1, 1, 1, 1, 0, 0),
            (2, 12, 36, 3, 9, 11, 1, 1, 1, 1, 0, 0),
            (1, 16, 16, 1, 64, 70, 3, 3, 1, 1, 1, 1),
            (1, 300, 17, 1, 7, 7, 3, 3, 1, 1, 1, 1),
            (1, 8, 24, 4, 12, 10, 3, 3, 2, 1, 1, 1),
            // Large enough to split: by columns (pointwise, 3×3 over a big tile and several
            // tiles), by output channels (7×7 outputs), over two batch items.
            (2, 40, 70, 1, 30, 31, 1, 1, 1, 1, 0, 0),
            (1, 20, 24, 1, 28, 28, 1, 1, 1, 1, 0, 0),
            (1, 64, 6, 1, 96, 96, 3, 3, 1, 1, 1, 1),
            (1, 130, 32, 1, 7, 7, 3, 3, 1, 1, 1, 1),
            (1, 64, 64, 2, 20, 20, 3, 3, 2, 1, 1, 1),
            // 1×1 maps (matrix-vector products): k over several k blocks, rows that fill no
            // whole panel, more than eight panels, groups.
            (2, 576, 144, 1, 1, 1, 1, 1, 1, 1, 0, 0),
            (1, 50, 17, 1, 1, 1, 1, 1, 1, 1, 0, 0),
            (1, 600, 70, 1, 1, 1, 1, 1, 1, 1, 0, 0),
            (2, 12, 36, 3, 1, 1, 1, 1, 1, 1, 0, 0),
        ];
        for (i, &(batch, c_in, c_out, group, h, wd, kh, kw, s, dl, pb, pe)) in cases.iter().enumerate() {
            let d = ConvDims { batch, c_in, c_out, group };
            let (oh, ow) = (out_dim(h, kh, s, dl, pb, pe), out_dim(wd, kw, s, dl, pb, pe));
            let win = Window3::new(&[h, wd], &[oh, ow], &[kh, kw], &[s, s], &[dl, dl], &[pb, pb], &[pe, pe]).unwrap();
            let x = rnd(batch * c_in * h * wd, i as u32 + 1);
            let w = rnd(c_out * (c_in / group) * kh * kw, i as u32 + 100);
            let b = rnd(c_out, i as u32 + 200);
            let (sc, sh) = (rnd(c_out, i as u32 + 300), rnd(c_out, i as u32 + 400));
            let res = rnd(batch * c_out * oh * ow, i as u32 + 500);
            // In turn: bias + ReLU, the whole epilogue (a pass after the GEMM), bias + residual
            // + ReLU (in the GEMM's registers, as bias + ReLU).
            let ep = match i % 3 {
                0 => Epilogue { bias: Some(&b[..]), scale: None, shift: None, residual: None, act: Act::Relu },
                1 => Epilogue { bias: Some(&b[..]), scale: Some(&sc[..]), shift: Some(&sh[..]), residual: Some(&res[..]), act: Act::Relu },
                _ => Epilogue { bias: Some(&b[..]), scale: None, shift: None, residual: Some(&res[..]), act: Act::Relu },
            };
            let mut want = vec![0f32; batch * c_out * oh * ow];
            conv_fused(&x, &w, &mut want, &d, &win, &mut vec![0f32; conv_scratch_len(&d, &win)], &Sgemm, &ep);
            assert!(takes_prepacked(&d));
            let mut wp = vec![f32::NAN; conv_packed_len(&d, &win)];
            pack_conv_weights(&d, &win, &w, &mut wp);
            // Split into parts (run in order here unless the pool has threads): same bits.
            for tasks in [1, 2, 3] {
                let mut y = vec![f32::NAN; want.len()];
                conv_prepacked_tasks(&x, &wp, &mut y, &d, &win, &mut vec![f32::NAN; conv_prepacked_scratch_len(&d, &win)], &ep, tasks);
                assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "case {i}, {tasks} tasks");
            }
        }
    }

    /// The padded-plane depthwise kernel adds each output's taps in the generic loop's order,
    /// so with finite weights it gives the same bits, over strides, dilations, negative and
    /// uneven pads, ceil-mode ends and channel multipliers (epilogue included).
    #[test]
    fn depthwise_2d_gives_the_bits_of_the_generic_loop() {
        // c, multiplier, h, w, kh, kw, sh, sw, dh, dw, pads (top, left, bottom, right), oh, ow
        type Case = (usize, usize, usize, usize, usize, usize, usize, usize, usize, usize, [isize; 4], usize, usize);
        let cases: [Case; 24] = [
            (3, 1, 14, 14, 3, 3, 1, 1, 1, 1, [1, 1, 1, 1], 14, 14),
            // 3×3 at strides 1 and 2 (the AVX2 kernel): rows shorter than a block, rows of
            // whole and partial blocks, no padding, a multiplier of 2.
            (3, 1, 7, 7, 3, 3, 1, 1, 1, 1, [1, 1, 1, 1], 7, 7),
            (2, 1, 56, 56, 3, 3, 2, 2, 1, 1, [1, 1, 1, 1], 28, 28),
            (3, 1, 7, 7, 3, 3, 2, 2, 1, 1, [1, 1, 1, 1], 4, 4),
            (2, 1, 6, 6, 3, 3, 2, 2, 1, 1, [0, 0, 0, 0], 2, 2),
            (2, 2, 19, 21, 3, 3, 1, 1, 1, 1, [0, 0, 0, 0], 17, 19),
            (2, 1, 27, 29, 3, 3, 2, 2, 1, 1, [1, 1, 1, 1], 14, 15),
            (2, 1, 15, 13, 3, 3, 2, 2, 1, 1, [1, 1, 1, 1], 8, 7),
            (2, 2, 9, 20, 5, 3, 1, 3, 2, 1, [2, 0, 2, 1], 5, 7),
            (1, 1, 7, 7, 7, 7, 1, 1, 1, 1, [3, 3, 3, 3], 7, 7),
            (2, 1, 10, 10, 3, 3, 1, 1, 1, 1, [-1, -2, 0, 0], 7, 6),
            // ceil mode: the last window hangs over the bottom/right edge
            (2, 1, 8, 8, 3, 3, 2, 2, 1, 1, [0, 0, 1, 1], 4, 4),
            (4, 2, 1, 33, 1, 5, 1, 1, 1, 2, [0, 4, 0, 4], 1, 33),
            // 5×5 and 7×7 (the AVX2 kernel): a mobile net's 14×14 and 7×7 maps at stride 1,
            // 28 → 14 and 14 → 7 at stride 2, rows shorter than a block.
            (3, 1, 14, 14, 5, 5, 1, 1, 1, 1, [2, 2, 2, 2], 14, 14),
            (2, 1, 7, 7, 5, 5, 1, 1, 1, 1, [2, 2, 2, 2], 7, 7),
            (2, 1, 28, 28, 5, 5, 2, 2, 1, 1, [2, 2, 2, 2], 14, 14),
            (3, 1, 14, 14, 5, 5, 2, 2, 1, 1, [2, 2, 2, 2], 7, 7),
            (2, 1, 11, 9, 7, 7, 2, 2, 1, 1, [3, 3, 3, 3], 6, 5),
            // More channels: a multiplier of 2, dilation, stride 3, rows of 32, enough work
            // to split over the pool.
            (21, 1, 7, 7, 5, 5, 1, 1, 1, 1, [2, 2, 2, 2], 7, 7),
            (17, 2, 14, 14, 3, 3, 2, 2, 1, 1, [1, 1, 1, 1], 7, 7),
            (33, 1, 9, 12, 3, 3, 1, 1, 2, 2, [2, 2, 2, 2], 9, 12),
            (18, 1, 20, 23, 3, 3, 3, 3, 1, 1, [1, 1, 1, 1], 7, 8),
            (48, 1, 14, 14, 5, 5, 1, 1, 1, 1, [2, 2, 2, 2], 14, 14),
            (16, 1, 32, 32, 3, 3, 1, 1, 1, 1, [1, 1, 1, 1], 32, 32),
        ];
        for (i, &(c, mult, h, wd, kh, kw, sh, sw, dh, dw, p, oh, ow)) in cases.iter().enumerate() {
            let d = ConvDims { batch: 2, c_in: c, c_out: c * mult, group: c };
            let win = Window3::new(&[h, wd], &[oh, ow], &[kh, kw], &[sh, sw], &[dh, dw], &[p[0], p[1]], &[p[2], p[3]]).unwrap();
            let x = rnd(2 * c * h * wd, i as u32 + 1);
            let w = rnd(c * mult * kh * kw, i as u32 + 100);
            let b = rnd(c * mult, i as u32 + 200);
            let r = rnd(2 * c * mult * oh * ow, i as u32 + 300);
            // In turn with a residual (a pass after the kernel) and with bias + ReLU (in it).
            let ep = Epilogue { bias: Some(&b[..]), scale: None, shift: None, residual: if i % 2 == 0 { Some(&r[..]) } else { None }, act: Act::Relu };
            let mut want = vec![0f32; r.len()];
            depthwise(&x, &w, &mut want, &d, &win, &ep);
            let mut y = vec![f32::NAN; r.len()];
            let mut col = vec![f32::NAN; conv_scratch_len(&d, &win)];
            conv_fused(&x, &w, &mut y, &d, &win, &mut col, &Sgemm, &ep);
            assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "case {i}");
        }
    }

    #[test]
    fn conv_transpose_is_adjoint() {
        // <conv(y), x> == <y, convT(x)> without bias.
        let (batch, c_y, c_x, group) = (1, 4, 6, 2);
        let (h, wd, k, s, dl, pb, pe) = (7, 6, 3, 2, 1, 1, 1);
        let (oh, ow) = (out_dim(h, k, s, dl, pb, pe), out_dim(wd, k, s, dl, pb, pe));
        let win = Window3::new(&[h, wd], &[oh, ow], &[k, k], &[s, s], &[dl, dl], &[pb, pb], &[pe, pe]).unwrap();
        let fwd = ConvDims { batch, c_in: c_y, c_out: c_x, group };
        let w = rnd(c_x * (c_y / group) * k * k, 7);
        let yv = rnd(batch * c_y * h * wd, 8);
        let xv = rnd(batch * c_x * oh * ow, 9);
        let mut conv_y = vec![0f32; xv.len()];
        let mut col = vec![0f32; conv_scratch_len(&fwd, &win)];
        conv(&yv, &w, None, &mut conv_y, &fwd, &win, &mut col, &Sgemm);
        let tr = ConvDims { batch, c_in: c_x, c_out: c_y, group };
        let mut ct_x = vec![0f32; yv.len()];
        let mut col = vec![0f32; conv_transpose_scratch_len(&tr, &win)];
        conv_transpose(&xv, &w, None, &mut ct_x, &tr, &win, &mut col, &Sgemm);
        let lhs: f32 = conv_y.iter().zip(&xv).map(|(a, b)| a * b).sum();
        let rhs: f32 = yv.iter().zip(&ct_x).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() < 1e-3 * lhs.abs().max(1.0), "{lhs} vs {rhs}");
    }
}
