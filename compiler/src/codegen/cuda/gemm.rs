//! Tensor-core matrix products on 16-bit floats: `mma.sync.m16n8k16` with f32 accumulators,
//! operands staged through shared memory by `ldmatrix`. One generator serves MatMul, Gemm and
//! convolution (as an implicit GEMM: the im2col matrix is gathered tile by tile, never
//! stored), and the caller's epilogue runs on each accumulator in registers, so a bias, a
//! residual and an activation cost no extra pass over memory.
//!
//! Every shape is a literal, so the tile size is picked per product (big tiles when the grid
//! still fills the GPU, smaller ones when it would not) and the loads are vectorised exactly
//! where the operand's layout allows it.
use super::kernels::{ix, Kernel};
use std::fmt::Write;

/// The k-depth of one shared-memory tile (16-bit operands: 64 bytes a row).
const BK: usize = 32;
/// The same for TF32 operands (f32 bits): 64 bytes a row too.
const BK_TF32: usize = 16;
/// Floats of padding per row of the output tile in shared memory: spreads the accumulator
/// pairs one warp writes over the banks.
pub(super) const CPAD: usize = 4;
/// Output elements one thread computes before it stores any.
const EPI: usize = 8;
/// Shared-memory tiles in flight: while the tensor cores work on one, `cp.async` fills the next
/// `STAGES - 1`.
const STAGES: usize = 4;
/// Streaming multiprocessors to fill (an H200 has 132).
pub(super) const SMS: usize = 132;

/// One block's tile: `bm × bn` outputs, `wm × wn` warps each owning a `(bm/wm) × (bn/wn)` part;
/// `occupancy` blocks fit on one SM (shared memory and registers) and `rate` is the tile's
/// throughput per SM relative to the biggest where that one runs best (small warp tiles reload
/// more fragments per multiply); see [`rate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Tile {
    pub bm: usize,
    pub bn: usize,
    pub wm: usize,
    pub wn: usize,
    pub occupancy: usize,
    pub rate: f64,
    /// The k-depth of one shared-memory tile.
    pub bk: usize,
    /// Shared-memory tiles in flight.
    pub stages: usize,
    /// Multiplied by `wgmma` ([`super::wgmma`]): `wm` warpgroups of 128 threads, each owning
    /// 64 rows and all `bn` columns; else by `mma.sync` warps.
    pub wgmma: bool,
}

impl Tile {
    pub fn threads(&self) -> usize {
        if self.wgmma {
            self.wm * 128
        } else {
            self.wm * self.wn * 32
        }
    }
}

// A 128×256 tile (eight warps, one block per SM) was slower than 128×128 on every product
// of ResNet-50 and MiniLM at batch 64 (H200, docs/CUDA.md): too few warps hide too little.
const TILES: [Tile; 4] = [
    Tile { bm: 128, bn: 128, wm: 2, wn: 2, occupancy: 2, rate: 1.0, bk: BK, stages: STAGES, wgmma: false },
    Tile { bm: 64, bn: 128, wm: 2, wn: 2, occupancy: 3, rate: 0.8, bk: BK, stages: STAGES, wgmma: false },
    Tile { bm: 128, bn: 64, wm: 2, wn: 2, occupancy: 3, rate: 0.8, bk: BK, stages: STAGES, wgmma: false },
    Tile { bm: 64, bn: 64, wm: 2, wn: 2, occupancy: 5, rate: 0.6, bk: BK, stages: STAGES, wgmma: false },
];

/// Tile `t`'s rate on a product of depth `k` whose B operand is staged k-major or not. The
/// 128×128 tile (two blocks per SM) beats 64×128 (three) on deep convolutions, whose B is
/// k-major, but loses where the depth is 4 tiles or less (the product is bound by memory and
/// the epilogue, which more resident warps overlap) and on MatMul's `[k][n]` weights read
/// through `ldmatrix.trans` (MiniLM's 8192×1536×384: 25 % slower). Measured on the H200 with
/// `scripts/gpu_bench.py --ncu`.
fn rate(t: &Tile, k: usize, b_kmajor: bool) -> f64 {
    if t.bm == 128 && t.bn == 128 && (k <= 4 * BK || !b_kmajor) {
        0.75
    } else {
        t.rate
    }
}

/// The tile with the shortest estimated time: each SM runs its share of the blocks at the
/// tile's rate, slowed in proportion when it holds fewer blocks than fit (latency is then not
/// hidden). A grid that would not give every SM a block of even the smallest tile takes that
/// tile (and is then split over k).
fn pick_tile(p: &Product) -> Tile {
    if p.wgmma && super::wgmma::fits(p) {
        // Its tiles are 128 rows: a grid that leaves most SMs idle runs better on mma.sync's
        // smaller tiles, split over k (ResNet-50 at batch 1: 0.40 ms with wgmma, 0.32
        // without), one that half fills them does not (its deepest layers at batch 64).
        let t = super::wgmma::pick_tile(p);
        if p.m.div_ceil(t.bm) * p.n.div_ceil(t.bn) * p.batches.max(1) >= SMS / 2 {
            return t;
        }
    }
    let (m, n, k, batches) = (p.m, p.n, p.k, p.batches);
    let b_kmajor = k_major(&p.b, false);
    let blocks = |t: &Tile| m.div_ceil(t.bm) * n.div_ceil(t.bn) * batches.max(1);
    let smallest = TILES[TILES.len() - 1];
    if blocks(&smallest) <= SMS {
        return if p.mma == "tf32" { Tile { bk: BK_TF32, ..smallest } } else { smallest };
    }
    let cost = |t: &Tile| {
        let per_sm = blocks(t).div_ceil(SMS);
        let speed = rate(t, k, b_kmajor) * per_sm.min(t.occupancy) as f64 / t.occupancy as f64;
        (per_sm * t.bm * t.bn) as f64 / speed
    };
    let t = TILES.into_iter().fold(TILES[0], |best, t| if cost(&t) < cost(&best) { t } else { best });
    if p.mma == "tf32" {
        Tile { bk: BK_TF32, ..t }
    } else {
        t
    }
}

/// Into how many k ranges a product is split so its grid fills the GPU (1: not split). Only
/// single products split; each range is whole tiles, at least four of them.
pub fn split_k(p: &Product) -> usize {
    let (m, n, k, batches) = (p.m, p.n, p.k, p.batches);
    let t = pick_tile(p);
    let blocks = m.div_ceil(t.bm) * n.div_ceil(t.bn) * batches;
    let tiles = k.div_ceil(t.bk);
    // A wave of wgmma tiles half full costs less than the f32 partial sums of a split.
    let enough = if t.wgmma { SMS / 2 } else { SMS };
    if batches != 1 || blocks >= enough || tiles < 8 {
        return 1;
    }
    let want = (2 * SMS).div_ceil(blocks).min(tiles / 4).clamp(1, 32);
    let per = tiles.div_ceil(want);
    tiles.div_ceil(per)
}

/// Bytes of f32 partial sums a product split over k needs (0 when it is not split).
pub fn scratch_bytes(p: &Product) -> usize {
    match split_k(p) {
        1 => 0,
        s => s.saturating_mul(p.m).saturating_mul(p.n).saturating_mul(4),
    }
}

/// How element (r, c) of an operand is found. For A, r is the output row and c the depth k;
/// for B, r is k and c the output column.
pub enum Operand {
    /// At `ptr + batch + r * rs + c * cs` (elements), `batch` a C expression of `z`.
    Strided { ptr: String, batch: String, rs: usize, cs: usize },
    /// B of a 2-D convolution over NCHW input `x`: k = (channel, ky, kx), column =
    /// (image, oy, ox).
    Im2col(Im2col),
}

pub struct Im2col {
    pub x: String,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// Padding before (negative crops).
    pub pad: [isize; 2],
    /// `x` is stored NHWC (else NCHW).
    pub nhwc: bool,
}

/// A product `Y[z] = A[z] · B[z]` (`m × k` by `k × n`, `batches` of them).
pub struct Product {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batches: usize,
    pub a: Operand,
    pub b: Operand,
    /// `bf16` or `f16`: the element type of both operands; or `tf32`: f32 operands multiplied
    /// with TF32 inputs (10-bit mantissas, rounded to nearest) and f32 sums.
    pub mma: &'static str,
    /// C statements run for each output element with `row`, `col`, `z` and the f32 `acc` in
    /// scope: they set the element's flat index `o` and its value `v`, and read only.
    pub epilogue: String,
    /// The statement storing `v` at `o`. Kept apart so one thread's loads for several elements
    /// are in flight at once (the arena's stores could alias them otherwise).
    pub store: String,
    /// Whether `o(row, col + u) = o(row, col) + u` for `col` a multiple of [`VEC`] and `u <
    /// VEC` (and `n` is a multiple of it): the output is then written [`VEC`] elements at once.
    pub contiguous: bool,
    /// The epilogue over [`VEC`] neighbouring columns at once, when the caller could write one.
    pub vector: Option<VectorEpilogue>,
    /// The module runs on sm_90a, so the product may be multiplied by `wgmma`
    /// ([`super::wgmma`]) where its operands allow.
    pub wgmma: bool,
}

/// Output elements one 16-byte store writes.
pub const VEC: usize = 8;

/// How a product's operands are staged: the C type of one element's bits, its bytes, and the
/// depth one `mma` instruction takes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Elem {
    pub ty: &'static str,
    pub bytes: usize,
    pub mma_k: usize,
}

impl Product {
    pub(super) fn elem(&self) -> Elem {
        if self.mma == "tf32" {
            Elem { ty: "unsigned", bytes: 4, mma_k: 8 }
        } else {
            Elem { ty: "unsigned short", bytes: 2, mma_k: 16 }
        }
    }
}

/// An epilogue over the [`VEC`] elements `o0 + u` of one row: `loads` runs once with `row`,
/// `col` (the first column), `z` in scope and sets `o0` (reading whole runs of operands that
/// are as large as the output); `body` runs for each `u` like [`Product::epilogue`] (with `u`,
/// and `col` that element's column); `element` keeps `v` for element `u`, and `flush` stores
/// all of them at once.
pub struct VectorEpilogue {
    pub loads: String,
    pub body: String,
    pub element: String,
    pub flush: String,
}

/// Whether an operand is read along k in contiguous runs (`true`), staged as `[rows][k]`, or
/// along its other dimension, staged as `[k][cols]`.
pub(super) fn k_major(op: &Operand, is_a: bool) -> bool {
    match op {
        // A is always staged [rows][k] (the scalar loader reads any strides).
        Operand::Strided { .. } if is_a => true,
        Operand::Strided { rs, cs, .. } => *rs == 1 && *cs != 1,
        // As A (rows are output pixels) along k, as B (columns are) across it.
        Operand::Im2col(_) => is_a,
    }
}

/// The widest copy (in halves: 8, 4 or 2, that is 16, 8 or 4 bytes) that moves whole aligned
/// runs of a dimension of `extent` elements whose neighbours are `other` elements apart;
/// 1 when only single halves can be read.
pub(super) fn vector_width(extent: usize, other: usize) -> usize {
    vector_width_of(extent, other, 2)
}

/// [`vector_width`] for elements of `bytes` bytes: the widest of 16-, 8- and 4-byte copies
/// that moves whole elements (1: single elements only).
fn vector_width_of(extent: usize, other: usize, bytes: usize) -> usize {
    [16 / bytes, 8 / bytes, 4 / bytes].into_iter().filter(|&w| w > 1).find(|&w| extent % w == 0 && other % w == 0).unwrap_or(1)
}

/// How one operand's tile at depth `k0` reaches shared stage `st`: `decls` once per kernel,
/// `issue` starts the copy (`cp.async` straight to shared memory, or loads into registers) and
/// `store` moves those registers to shared memory (empty for `cp.async`), run late so the loads
/// overlap the multiplies.
pub(super) struct Stage {
    pub decls: String,
    pub issue: String,
    pub store: String,
}

/// The loader of `op`'s tile into `s[st]`: `[outer][BK]` when k-major, else `[BK][outer]`, where
/// `outer` is the tile's extent along the operand's non-k dimension (bm or bn), starting at C
/// name `base`, of size `limit`.
fn stage(op: &Operand, p: &Product, is_a: bool, t: Tile, s: &str, regs: &str) -> Stage {
    stage_to(op, p, is_a, t, s, regs, &format!("&{s}[st][r][q]"))
}

/// [`stage`] with the shared-memory address of row `r`, column `q` of stage `st` (C names in
/// scope where the copy is written) given as `dst`: vector copies write there, so another
/// main loop can stage its tiles in its own layout (all of its copies must be vectors).
pub(super) fn stage_to(op: &Operand, p: &Product, is_a: bool, t: Tile, s: &str, regs: &str, dst: &str) -> Stage {
    let threads = t.threads();
    let bk = t.bk;
    let Elem { ty: et, bytes: es, .. } = p.elem();
    let (outer, base, limit) = if is_a { (t.bm, "m0", p.m) } else { (t.bn, "n0", p.n) };
    let kdim = p.k;
    let km = k_major(op, is_a);
    // The staged tile is `rows × cols`, cols contiguous in shared memory.
    let (rows, cols) = if km { (outer, bk) } else { (bk, outer) };
    // (row, col) of the tile → (outer index `go`, depth `gk`).
    let coords = if km { format!("int go = {base} + r, gk = k0 + q;") } else { format!("int go = {base} + q, gk = k0 + r;") };
    let mut st = Stage { decls: String::new(), issue: String::new(), store: String::new() };
    match op {
        Operand::Strided { ptr, batch, rs, cs } => {
            // Element (outer index o, depth kk) sits at o * so + kk * sk.
            let (so, sk) = if is_a { (*rs, *cs) } else { (*cs, *rs) };
            // Offsets from the batch's first element reach at most this far.
            let idx = ix(limit.saturating_mul(so).saturating_add(kdim.saturating_mul(sk)));
            let _ = writeln!(st.decls, "const {et}* {regs}p = (const {et}*){ptr} + ({batch});");
            // The shared-memory row runs along k (k-major) or along the outer dimension.
            let (along, along_stride, across, across_stride) = if km { (kdim, sk, limit, so) } else { (limit, so, kdim, sk) };
            let _ = across;
            let w = if along_stride == 1 { vector_width_of(along, across_stride, es) } else { 1 };
            if w > 1 {
                let copy = format!("cp_async{}({dst}, ok ? {regs}p + ({idx})go * {so} + ({idx})gk * {sk} : {regs}p, ok);", w * es);
                let _ = writeln!(st.issue, "{}", vector_copies(rows, cols, w, threads, &coords, limit, kdim, &copy));
            } else {
                let per = rows * cols / threads;
                let _ = writeln!(st.decls, "{et} {regs}[{per}];");
                let _ = writeln!(
                    st.issue,
                    "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int e = tid + j * {threads}; int r = e / {cols}, q = e % {cols}; {coords}\n\
                     {regs}[j] = (go < {limit} && gk < {kdim}) ? {regs}p[({idx})go * {so} + ({idx})gk * {sk}] : ({et})0; }}"
                );
                let _ = writeln!(st.store, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int e = tid + j * {threads}; {s}[st][e / {cols}][e % {cols}] = {regs}[j]; }}");
            }
        }
        Operand::Im2col(c) if is_a => pixel_rows(c, p, t, s, regs, dst, &mut st),
        Operand::Im2col(c) => {
            let hw = c.oh * c.ow;
            let idx = ix((p.n / hw.max(1)).saturating_mul(c.c * c.h * c.w));
            let chw = c.c * c.h * c.w;
            let pointwise = c.kh * c.kw == 1 && c.stride == [1, 1] && c.pad == [0, 0] && c.h == c.oh && c.w == c.ow;
            let w = if pointwise { vector_width_of(hw, hw, es) } else { 1 };
            if w > 1 {
                // A 1×1 convolution whose images are whole runs of `w` columns: column `gn`
                // is pixel `gn % hw` of image `gn / hw`, channel `gk` a plane `hw` apart.
                let copy = format!(
                    "const {et}* src = (const {et}*){x} + ({idx})(go / {hw}) * {chw} + ({idx})gk * {hw} + go % {hw};\ncp_async{}({dst}, ok ? src : (const {et}*){x}, ok);",
                    w * es,
                    x = c.x,
                );
                let _ = writeln!(st.issue, "{}", vector_copies(bk, outer, w, threads, &coords, limit, kdim, &copy));
                return st;
            }
            // Each thread owns one column (its image and output pixel, decoded once) and
            // every (threads / bn)-th depth row of the tile.
            let rows_per = threads / outer;
            let per = bk / rows_per;
            let [sh, sw] = c.stride;
            let [dh, dw] = c.dilation;
            let [ph, pw] = c.pad;
            let taps = c.kh * c.kw;
            let _ = writeln!(
                st.decls,
                "{et} {regs}[{per}];\nconst int {regs}col = tid % {outer}, {regs}row = tid / {outer};\n\
                 const int {regs}gn = {base} + {regs}col; const bool {regs}ok = {regs}gn < {limit};\n\
                 const int {regs}img = {regs}gn / {hw}, {regs}pix = {regs}gn % {hw};\n\
                 const int {regs}iy = ({regs}pix / {ow}) * {sh} - {ph}, {regs}ix = ({regs}pix % {ow}) * {sw} - {pw};\n\
                 const {et}* {regs}p = (const {et}*){x} + ({idx}){regs}img * {chw};",
                ow = c.ow,
                x = c.x,
            );
            let fetch = if pointwise {
                // A 1×1 convolution: column pixel `pix` of channel `gk`.
                format!("{regs}[j] = ({regs}ok && gk < {kdim}) ? {regs}p[({idx})gk * {hw} + {regs}pix] : ({et})0;")
            } else {
                format!(
                    "int ci = gk / {taps}, tap = gk % {taps}; int yy = {regs}iy + (tap / {kw}) * {dh}, xx = {regs}ix + (tap % {kw}) * {dw};\n\
                     {regs}[j] = ({regs}ok && gk < {kdim} && yy >= 0 && yy < {h} && xx >= 0 && xx < {w}) ? {regs}p[({idx})(ci * {h} + yy) * {w} + xx] : ({et})0;",
                    kw = c.kw,
                    h = c.h,
                    w = c.w,
                )
            };
            let _ = writeln!(st.issue, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int gk = k0 + {regs}row + j * {rows_per};\n{fetch} }}");
            let _ = writeln!(st.store, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {s}[st][{regs}row + j * {rows_per}][{regs}col] = {regs}[j];");
        }
    }
    st
}

/// The copies of a `rows × cols` tile in runs of `w` elements, consecutive threads taking
/// consecutive runs: `coords` decodes the run's place (`r`, `q`) into the operand's (`go`,
/// `gk`), and `copy` moves it, reading only when `ok` (inside the operand).
#[allow(clippy::too_many_arguments)]
fn vector_copies(rows: usize, cols: usize, w: usize, threads: usize, coords: &str, limit: usize, kdim: usize, copy: &str) -> String {
    let chunks = cols / w;
    let per = rows * chunks / threads;
    format!(
        "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int c = tid + j * {threads}; int r = c / {chunks}, q = (c % {chunks}) * {w}; {coords}\n\
         const bool ok = go < {limit} && gk < {kdim}; {copy} }}"
    )
}

/// The loader of A = the im2col matrix of a convolution writing NHWC: row = output pixel,
/// depth k = (channel, ky, kx) over NCHW input or (ky, kx, channel) over NHWC input. Each
/// thread decodes its pixels once; per tile it decodes its depth once.
fn pixel_rows(c: &Im2col, p: &Product, t: Tile, s: &str, regs: &str, dst: &str, st: &mut Stage) {
    let threads = t.threads();
    let bk = t.bk;
    let Elem { ty: et, bytes: es, .. } = p.elem();
    let (bm, kdim) = (t.bm, p.k);
    let hw = c.oh * c.ow;
    let chw = c.c * c.h * c.w;
    let idx = ix((p.m / hw.max(1)).saturating_mul(chw));
    let [sh, sw] = c.stride;
    let [dh, dw] = c.dilation;
    let [ph, pw] = c.pad;
    let (h, w, kw, ch) = (c.h, c.w, c.kw, c.c);
    // A run of channels is one copy over NHWC input; NCHW gives single elements.
    let vw = if c.nhwc { vector_width_of(ch, ch, es) } else { 1 };
    let chunks = bk / vw;
    // Vector copies: consecutive threads take consecutive chunks of a row (one depth offset
    // each), so a thread owns `pixels` rows `threads / chunks` apart. Single elements: a
    // thread owns one row and every (threads / bm)-th depth column of it.
    let (pixels, row) = if vw > 1 { (bm * chunks / threads, format!("tid / {chunks} + j * {}", threads / chunks)) } else { (1, format!("tid % {bm}")) };
    let _ = writeln!(
        st.decls,
        "int {regs}iy[{pixels}], {regs}ix[{pixels}]; const {et}* {regs}px[{pixels}];\n\
         #pragma unroll\nfor (int j = 0; j < {pixels}; ++j) {{ const int go = m0 + {row}; const bool ok = go < {m}; const int g = ok ? go : 0;\n\
         const int pix = g % {hw}; {regs}iy[j] = ok ? (pix / {ow}) * {sh} - {ph} : -(1 << 29); {regs}ix[j] = (pix % {ow}) * {sw} - {pw};\n\
         {regs}px[j] = (const {et}*){x} + ({idx})(g / {hw}) * {chw}; }}",
        m = p.m,
        ow = c.ow,
        x = c.x,
    );
    if vw > 1 {
        let _ = writeln!(
            st.issue,
            "{{ const int q = (tid % {chunks}) * {vw}, gk = k0 + q; const int tap = gk / {ch}, ci = gk % {ch}; const int dy = (tap / {kw}) * {dh}, dx = (tap % {kw}) * {dw}; const bool kok = gk < {kdim};\n\
             #pragma unroll\nfor (int j = 0; j < {pixels}; ++j) {{ const int r = {row}; const int yy = {regs}iy[j] + dy, xx = {regs}ix[j] + dx;\n\
             const bool ok = kok && yy >= 0 && yy < {h} && xx >= 0 && xx < {w};\n\
             cp_async{bytes}({dst}, ok ? {regs}px[j] + (yy * {w} + xx) * {ch} + ci : {regs}px[0], ok); }} }}",
            bytes = vw * es,
        );
        return;
    }
    let taps = c.kh * c.kw;
    let per_row = threads / bm;
    let cols = bk / per_row;
    // Depth k = (channel, tap) over NCHW, (tap, channel) over NHWC (weights reordered to match).
    let (decode, at) = if c.nhwc {
        (format!("const int tap = gk / {ch}, ci = gk % {ch};"), format!("(yy * {w} + xx) * {ch} + ci"))
    } else {
        (format!("const int ci = gk / {taps}, tap = gk % {taps};"), format!("(ci * {h} + yy) * {w} + xx"))
    };
    let _ = writeln!(st.decls, "{et} {regs}[{cols}];");
    let _ = writeln!(
        st.issue,
        "#pragma unroll\nfor (int j = 0; j < {cols}; ++j) {{ const int gk = k0 + tid / {bm} + j * {per_row}; {decode}\n\
         const int yy = {regs}iy[0] + (tap / {kw}) * {dh}, xx = {regs}ix[0] + (tap % {kw}) * {dw};\n\
         {regs}[j] = (gk < {kdim} && yy >= 0 && yy < {h} && xx >= 0 && xx < {w}) ? {regs}px[0][{at}] : ({et})0; }}"
    );
    let _ = writeln!(st.store, "#pragma unroll\nfor (int j = 0; j < {cols}; ++j) {s}[st][tid % {bm}][tid / {bm} + j * {per_row}] = {regs}[j];");
}

/// The kernels of product `p`, named `name…`. A product split over k (see [`split_k`]) writes
/// its partial sums to `scratch` (a `float*` expression of [`scratch_bytes`] bytes) and a
/// second kernel adds them up and runs the epilogue.
pub fn kernels(name: &str, p: &Product, scratch: Option<&str>) -> Vec<Kernel> {
    let split = split_k(p);
    let Some(ws) = scratch.filter(|_| split > 1) else { return vec![kernel(name, p, 1, &p.epilogue, &p.store)] };
    let mn = p.m * p.n;
    let partial = kernel(name, p, split, &format!("const long long o = (long long)blockIdx.z * {mn} + (long long)row * {} + col;\nconst float v = acc;", p.n), &format!("{ws}[o] = v;"));
    let body = format!(
        "const int row = i / {n}, col = i % {n}; const long long z = 0;\nfloat acc = 0.0f;\nfor (int s = 0; s < {split}; ++s) acc += {ws}[(long long)s * {mn} + i];\n{ep}\n{st}",
        n = p.n,
        ep = p.epilogue,
        st = p.store,
    );
    vec![partial, super::kernels::pointwise(&format!("{name}_sum"), mn, mn * split, "", &body)]
}

/// One kernel of product `p` over `split` k ranges (grid z), `epilogue` per output.
fn kernel(name: &str, p: &Product, split: usize, epilogue: &str, store: &str) -> Kernel {
    let t = pick_tile(p);
    if t.wgmma {
        return super::wgmma::kernel(name, p, t, split, epilogue, store);
    }
    let (tm, tn) = (t.bm / t.wm, t.bn / t.wn);
    let (mt, nt) = (tm / 16, tn / 8);
    let a = stage(&p.a, p, true, t, "As", "ra");
    let b = stage(&p.b, p, false, t, "Bs", "rb");
    let b_kmajor = k_major(&p.b, false);
    let (bm, bn) = (t.bm, t.bn);
    let Elem { ty: et, bytes: es, mma_k: mk } = p.elem();
    let bk = t.bk;
    // Rows padded by 16 bytes; `ve` elements make 16 bytes (one `ldmatrix` row).
    let pad = 16 / es;
    let ve = 16 / es;
    let (b_rows, b_cols) = if b_kmajor { (bn, bk) } else { (bk, bn) };
    let a_bytes = bm * (bk + pad) * es;
    // The stages, then (reusing them) the f32 output tile.
    let shared = (STAGES * (a_bytes + b_rows * (b_cols + pad) * es)).max(bm * (bn + CPAD) * 4);
    // B fragments of two 8-column blocks at once: from [n][k] plainly, from [k][n] transposed
    // (16-bit elements) or element by element (32-bit ones, which `ldmatrix` cannot transpose).
    let tf32 = p.mma == "tf32";
    let b_frag = if b_kmajor {
        format!("ldmatrix_x4(&bf[j][0], &Bs[cs][wn * {tn} + j * 8 + (lane >> 4) * 8 + (lane & 7)][ks + ((lane >> 3) & 1) * {ve}]);")
    } else if tf32 {
        format!(
            "{{ const int c = wn * {tn} + j * 8 + (lane >> 2);\n\
             bf[j][0] = Bs[cs][ks + (lane & 3)][c]; bf[j][1] = Bs[cs][ks + (lane & 3) + 4][c];\n\
             bf[j + 1][0] = Bs[cs][ks + (lane & 3)][c + 8]; bf[j + 1][1] = Bs[cs][ks + (lane & 3) + 4][c + 8]; }}"
        )
    } else {
        format!("ldmatrix_x4_trans(&bf[j][0], &Bs[cs][ks + (lane & 15)][wn * {tn} + j * 8 + (lane >> 4) * 8]);")
    };
    // TF32 operands are f32 bits: rounded to 10-bit mantissas once per fragment.
    let round = if tf32 {
        format!(
            "#pragma unroll\nfor (int i = 0; i < {mt}; ++i)\n#pragma unroll\nfor (int r = 0; r < 4; ++r) af[i][r] = to_tf32(af[i][r]);\n\
             #pragma unroll\nfor (int j = 0; j < {nt}; ++j)\n#pragma unroll\nfor (int r = 0; r < 2; ++r) bf[j][r] = to_tf32(bf[j][r]);\n"
        )
    } else {
        String::new()
    };
    let mma = p.mma;
    let mut s = String::new();
    let _ = write!(
        s,
        "{head}\
         extern __shared__ __align__(16) unsigned char smem[];\n\
         {et} (*As)[{bm}][{bk} + {pad}] = ({et} (*)[{bm}][{bk} + {pad}])smem;\n\
         {et} (*Bs)[{b_rows}][{b_cols} + {pad}] = ({et} (*)[{b_rows}][{b_cols} + {pad}])(smem + {sa});\n\
         const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n\
         const int wm = warp / {wn}, wn = warp % {wn};\n\
         const int m0 = blockIdx.y * {bm}, n0 = blockIdx.x * {bn};\n\
         const long long z = {zexpr};\n\
         float accs[{mt}][{nt}][4];\n\
         #pragma unroll\nfor (int i = 0; i < {mt}; ++i)\n#pragma unroll\nfor (int j = 0; j < {nt}; ++j)\n#pragma unroll\nfor (int r = 0; r < 4; ++r) accs[i][j][r] = 0.0f;\n\
         {fill}\
         for (int kt = 0; kt < tiles; ++kt) {{\n\
         // Tile kt has landed; every warp is done with the stage the next copy overwrites.\n\
         cp_async_wait<{wait}>();\n\
         __syncthreads();\n\
         {refill}\
         #pragma unroll\n\
         for (int ks = 0; ks < {bk}; ks += {mk}) {{\n\
         unsigned af[{mt}][4], bf[{nt}][2];\n\
         #pragma unroll\nfor (int i = 0; i < {mt}; ++i) ldmatrix_x4(af[i], &As[cs][wm * {tm} + i * 16 + (lane & 15)][ks + (lane >> 4) * {ve}]);\n\
         #pragma unroll\nfor (int j = 0; j < {nt}; j += 2) {b_frag}\n\
         {round}\
         #pragma unroll\nfor (int i = 0; i < {mt}; ++i)\n#pragma unroll\nfor (int j = 0; j < {nt}; ++j) mma_{mma}(accs[i][j], af[i], bf[j]);\n\
         }}\n\
         {late}\
         }}\n\
         // The tile goes through shared memory so the epilogue walks it row by row: its\n\
         // reads and stores then cover whole runs of memory.\n\
         cp_async_wait<0>();\n\
         __syncthreads();\n\
         float (*Cs)[{bn} + {CPAD}] = (float (*)[{bn} + {CPAD}])smem;\n\
         #pragma unroll\nfor (int i = 0; i < {mt}; ++i)\n#pragma unroll\nfor (int j = 0; j < {nt}; ++j) {{\n\
         const int r = wm * {tm} + i * 16 + (lane >> 2), c = wn * {tn} + j * 8 + (lane & 3) * 2;\n\
         *(float2*)&Cs[r][c] = make_float2(accs[i][j][0], accs[i][j][1]);\n\
         *(float2*)&Cs[r + 8][c] = make_float2(accs[i][j][2], accs[i][j][3]);\n\
         }}\n\
         __syncthreads();\n\
         {walk}}}\n",
        head = head(name, p, t, split),
        wn = t.wn,
        sa = STAGES * a_bytes,
        wait = STAGES - 2,
        fill = fill_stages(p, t, split, &a, &b),
        refill = refill_stage(t, &a, &b),
        late = if a.store.is_empty() && b.store.is_empty() { String::new() } else { format!("if (nk < tiles) {{\n{}{}}}\n", a.store, b.store) },
        walk = walk(t, p, split, epilogue, store),
        zexpr = z_expr(split),
    );
    launch(name, p, t, split, s, shared)
}

/// The opening of a product kernel of tile `t` over `split` k ranges, and a comment saying
/// how it multiplies.
pub(super) fn head(name: &str, p: &Product, t: Tile, split: usize) -> String {
    let (by, workers) = if t.wgmma { (" by wgmma", format!("{} warpgroups", t.wm)) } else { ("", format!("{}×{} warps", t.wm, t.wn)) };
    let split_note = if split > 1 { format!(", k split {split} ways") } else { String::new() };
    format!(
        "extern \"C\" __global__ void __launch_bounds__({}) {name}(unsigned char* A, const unsigned char* __restrict__ W) {{\n\
         // {}×{}×{} ({} of them) on tensor cores{by}: {}×{} tiles, {workers}, {} stages{split_note}.\n",
        t.threads(),
        p.m,
        p.n,
        p.k,
        p.batches,
        t.bm,
        t.bn,
        t.stages,
    )
}

/// The batch `z` of a block: a split product is a single one, grid z numbers its k ranges.
pub(super) fn z_expr(split: usize) -> &'static str {
    if split > 1 {
        "0"
    } else {
        "blockIdx.z"
    }
}

/// The main loop's start: the block's depth range, the loaders' declarations, and the copies
/// that fill all stages but one.
pub(super) fn fill_stages(p: &Product, t: Tile, split: usize, a: &Stage, b: &Stage) -> String {
    let bk = t.bk;
    format!(
        "{}const int tiles = (kend - kbeg + {bk} - 1) / {bk};\n{}{}\
         // Fill all stages but one.\n\
         #pragma unroll\nfor (int st = 0; st < {}; ++st) {{\n\
         if (st < tiles) {{ const int k0 = kbeg + st * {bk};\n{}{}{}{}}}\n\
         cp_async_commit();\n\
         }}\n",
        k_range(p, t, split),
        a.decls,
        b.decls,
        t.stages - 1,
        a.issue,
        b.issue,
        a.store,
        b.store,
    )
}

/// In the main loop at tile `kt`: the copies of the tile `stages - 1` ahead into the stage
/// they free (`st`), and the stage multiplied now (`cs`).
pub(super) fn refill_stage(t: Tile, a: &Stage, b: &Stage) -> String {
    let (ahead, stages, bk) = (t.stages - 1, t.stages, t.bk);
    format!(
        "const int nk = kt + {ahead}, st = nk % {stages}, cs = kt % {stages};\n\
         if (nk < tiles) {{ const int k0 = kbeg + nk * {bk};\n{}{}}}\n\
         cp_async_commit();\n",
        a.issue, b.issue,
    )
}

/// The kernel `name` of tile `t` with C `source`: one block per output tile, grid z the batch
/// or, split, the k range.
pub(super) fn launch(name: &str, p: &Product, t: Tile, split: usize, source: String, shared: usize) -> Kernel {
    let z = if split > 1 { split } else { p.batches.max(1) };
    Kernel { name: name.to_string(), source, grid: [p.n.div_ceil(t.bn) as u32, p.m.div_ceil(t.bm) as u32, z as u32], block: [t.threads() as u32, 1, 1], shared: shared as u32 }
}

/// The C statements that set `kbeg`, `kend`: the depth range of this block (whole tiles, grid z
/// numbering the ranges of a product split `split` ways).
pub(super) fn k_range(p: &Product, t: Tile, split: usize) -> String {
    let per = if split > 1 { p.k.div_ceil(t.bk).div_ceil(split) * t.bk } else { p.k.div_ceil(t.bk) * t.bk };
    if split > 1 {
        format!("const int kbeg = blockIdx.z * {per}, kend = min({}, kbeg + {per});\n", p.k)
    } else {
        format!("const int kbeg = 0, kend = {};\n", p.k)
    }
}

/// The epilogue over the output tile in `Cs` (f32, `bn + CPAD` floats a row): 16 bytes at a
/// time where the caller wrote a vector epilogue and the product is not split, else element
/// by element.
pub(super) fn walk(t: Tile, p: &Product, split: usize, epilogue: &str, store: &str) -> String {
    match p.vector.as_ref().filter(|_| split == 1 && p.contiguous) {
        Some(v) => vector_walk(t, p, v),
        None => scalar_walk(t, p, epilogue, store),
    }
}

/// The epilogue over the output tile in `Cs`, element by element: [`EPI`] elements per thread
/// at a time, all their reads, then all their stores.
fn scalar_walk(t: Tile, p: &Product, epilogue: &str, store: &str) -> String {
    let (bm, bn, threads, m, n) = (t.bm, t.bn, t.threads(), p.m, p.n);
    format!(
        "// {EPI} elements per thread at a time: all their reads, then all their stores.\n\
         for (int e0 = tid; e0 < {bm} * {bn}; e0 += {EPI} * {threads}) {{\n\
         float vs[{EPI}]; long long os[{EPI}]; bool oks[{EPI}];\n\
         #pragma unroll\nfor (int u = 0; u < {EPI}; ++u) {{\n\
         const int e = e0 + u * {threads}, row = m0 + e / {bn}, col = n0 + e % {bn};\n\
         oks[u] = e < {bm} * {bn} && row < {m} && col < {n};\n\
         if (oks[u]) {{ const float acc = Cs[e / {bn}][e % {bn}];\n{epilogue}\nvs[u] = v; os[u] = o; }}\n\
         }}\n\
         #pragma unroll\nfor (int u = 0; u < {EPI}; ++u) if (oks[u]) {{ const long long o = os[u]; const float v = vs[u]; {store} }}\n\
         }}\n"
    )
}

/// The epilogue over the output tile in `Cs`, [`VEC`] neighbouring columns per thread at a
/// time: 16-byte reads of same-shaped operands and one 16-byte store.
fn vector_walk(t: Tile, p: &Product, v: &VectorEpilogue) -> String {
    let (bm, bn, threads, m, n) = (t.bm, t.bn, t.threads(), p.m, p.n);
    let groups = bn / VEC;
    format!(
        "// {VEC} neighbouring outputs per thread at a time: 16-byte reads and stores.\n\
         for (int g = tid; g < {bm} * {groups}; g += {threads}) {{\n\
         const int r = g / {groups}, c0 = (g % {groups}) * {VEC}, row = m0 + r;\n\
         if (row >= {m} || n0 + c0 >= {n}) continue;\n\
         {{ const int col = n0 + c0;\n{loads}\n\
         #pragma unroll\nfor (int u = 0; u < {VEC}; ++u) {{ const int col = n0 + c0 + u; const float acc = Cs[r][c0 + u];\n{body}\n{element} }}\n\
         {flush} }}\n\
         }}\n",
        loads = v.loads,
        body = v.body,
        element = v.element,
        flush = v.flush,
    )
}

/// The device functions the tensor-core kernels call, once per module.
pub const PRELUDE: &str = r#"// Tensor-core building blocks (sm_80 and later).
__device__ __forceinline__ void ldmatrix_x4(unsigned* r, const void* p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned* r, const void* p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// TF32: f32 bits rounded to a 10-bit mantissa (nearest, ties away), and its product.
__device__ __forceinline__ unsigned to_tf32(unsigned x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(x)));
  return r;
}
__device__ __forceinline__ void mma_tf32(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// Global-to-shared copies that bypass registers; a false `ok` fills zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* s, const void* g, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"((unsigned)__cvta_generic_to_shared(s)), "l"(g), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_async8(void* s, const void* g, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" :: "r"((unsigned)__cvta_generic_to_shared(s)), "l"(g), "r"(ok ? 8 : 0));
}
__device__ __forceinline__ void cp_async4(void* s, const void* g, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"((unsigned)__cvta_generic_to_shared(s)), "l"(g), "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// A product of weights `[n][k]` (k-major B, as convolutions and Gemm transB) or `[k][n]`.
    fn product(m: usize, n: usize, k: usize, batches: usize, b_kmajor: bool) -> Product {
        let s = |rs, cs| Operand::Strided { ptr: "p".into(), batch: "0".into(), rs, cs };
        let b = if b_kmajor { s(1, k) } else { s(n, 1) };
        Product { m, n, k, batches, a: s(k, 1), b, mma: "bf16", epilogue: String::new(), store: String::new(), contiguous: true, vector: None, wgmma: false }
    }

    #[test]
    fn tiles_shrink_until_the_grid_fills_the_gpu() {
        assert_eq!(pick_tile(&product(4096, 4096, 4096, 1, true)), TILES[0]);
        assert_eq!(pick_tile(&product(512, 49, 4608, 1, true)), TILES[3]);
        // Shallow products and MatMul's [k][n] weights take the tile with more resident warps.
        assert_eq!(pick_tile(&product(200704, 256, 64, 1, true)), TILES[1]);
        assert_eq!(pick_tile(&product(8192, 1536, 384, 1, false)), TILES[1]);
        assert_eq!(pick_tile(&product(50176, 128, 1152, 1, true)), TILES[0]);
        // Output channels fewer than a 128-wide tile: 128×64.
        assert_eq!(pick_tile(&product(200704, 64, 576, 1, true)), TILES[2]);
        // Every tile's loaders divide evenly among its threads at every vector width.
        for t in TILES {
            for w in [1, 2, 4, 8] {
                assert_eq!(t.bm * BK % (w * t.threads()), 0);
                assert_eq!(t.bn * BK % (w * t.threads()), 0);
            }
            assert_eq!(t.threads() % t.bn, 0, "im2col rows per pass");
            assert_eq!(t.bm / t.wm % 16, 0);
            assert_eq!(t.bn / t.wn % 16, 0, "B fragments load two 8-column blocks at once");
        }
    }

    #[test]
    fn vector_copies_need_whole_aligned_runs() {
        assert_eq!(vector_width(384, 384), 8);
        assert_eq!(vector_width(196, 196), 4);
        assert_eq!(vector_width(49, 49), 1);
        assert_eq!(vector_width(64, 6), 2);
    }

    #[test]
    fn thin_products_split_over_k_in_whole_tiles() {
        // ResNet-50's last 3×3 convolution at batch 1: 8 blocks without a split.
        let s = split_k(&product(512, 49, 4608, 1, true));
        assert!(s > 8 && s <= 32, "{s}");
        assert_eq!(scratch_bytes(&product(512, 49, 4608, 1, true)), s * 512 * 49 * 4);
        // Enough blocks already, too little depth, or batched: no split.
        assert_eq!(split_k(&product(4096, 4096, 4096, 1, true)), 1);
        assert_eq!(split_k(&product(64, 64, 64, 1, true)), 1);
        assert_eq!(split_k(&product(128, 128, 4096, 8, true)), 1);
    }

    #[test]
    fn operands_stage_along_their_contiguous_dimension() {
        let s = |rs, cs| Operand::Strided { ptr: "p".into(), batch: "0".into(), rs, cs };
        assert!(k_major(&s(64, 1), true));
        assert!(!k_major(&s(64, 1), false));
        // Gemm transB: B[k][n] at n * K + k.
        assert!(k_major(&s(1, 64), false));
    }
}
