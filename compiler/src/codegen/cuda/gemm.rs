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

/// The k-depth of one shared-memory tile.
const BK: usize = 32;
/// Halves of padding per shared-memory row: keeps `ldmatrix` rows on distinct banks and 16-byte
/// aligned.
const PAD: usize = 8;
/// Streaming multiprocessors to fill (an H200 has 132).
const SMS: usize = 132;

/// One block's tile: `bm × bn` outputs, `wm × wn` warps each owning a `(bm/wm) × (bn/wn)` part.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Tile {
    bm: usize,
    bn: usize,
    wm: usize,
    wn: usize,
}

impl Tile {
    fn threads(&self) -> usize {
        self.wm * self.wn * 32
    }
}

const TILES: [Tile; 3] = [Tile { bm: 128, bn: 128, wm: 2, wn: 4 }, Tile { bm: 64, bn: 128, wm: 2, wn: 4 }, Tile { bm: 64, bn: 64, wm: 2, wn: 2 }];

/// The largest tile whose grid still gives every SM work (two blocks each for the biggest).
fn pick_tile(m: usize, n: usize, batches: usize) -> Tile {
    let blocks = |t: &Tile| m.div_ceil(t.bm) * n.div_ceil(t.bn) * batches;
    // Rows past 64 would be padding.
    if m > 64 && blocks(&TILES[0]) >= 2 * SMS {
        TILES[0]
    } else if blocks(&TILES[1]) >= SMS {
        TILES[1]
    } else {
        TILES[2]
    }
}

/// Into how many k ranges a product is split so its grid fills the GPU (1: not split). Only
/// single products split; each range is whole tiles, at least four of them.
pub fn split_k(m: usize, n: usize, k: usize, batches: usize) -> usize {
    let t = pick_tile(m, n, batches);
    let blocks = m.div_ceil(t.bm) * n.div_ceil(t.bn) * batches;
    let tiles = k.div_ceil(BK);
    if batches != 1 || blocks >= SMS || tiles < 8 {
        return 1;
    }
    let want = (2 * SMS).div_ceil(blocks).min(tiles / 4).clamp(1, 32);
    let per = tiles.div_ceil(want);
    tiles.div_ceil(per)
}

/// Bytes of f32 partial sums a product split over k needs (0 when it is not split).
pub fn scratch_bytes(m: usize, n: usize, k: usize, batches: usize) -> usize {
    match split_k(m, n, k, batches) {
        1 => 0,
        s => s.saturating_mul(m).saturating_mul(n).saturating_mul(4),
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
}

/// A product `Y[z] = A[z] · B[z]` (`m × k` by `k × n`, `batches` of them).
pub struct Product {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batches: usize,
    pub a: Operand,
    pub b: Operand,
    /// `bf16` or `f16`: the element type of both operands.
    pub mma: &'static str,
    /// C statements run for each output element with `row`, `col`, `z` and the f32 `acc` in
    /// scope.
    pub epilogue: String,
}

/// Whether an operand is read along k in contiguous runs (`true`), staged as `[rows][k]`, or
/// along its other dimension, staged as `[k][cols]`.
fn k_major(op: &Operand, is_a: bool) -> bool {
    match op {
        // A is always staged [rows][k] (the scalar loader reads any strides).
        Operand::Strided { .. } if is_a => true,
        Operand::Strided { rs, cs, .. } => *rs == 1 && *cs != 1,
        Operand::Im2col(_) => false,
    }
}


/// Declarations, a load of the tile at depth `k0` into registers, and the store of those
/// registers into shared array `s`, for one operand. `outer` is the tile's extent along the
/// operand's non-k dimension (bm or bn), `base` the C name of its first row/column and
/// `limit` that dimension's size.
struct Stage {
    decls: String,
    load: String,
    store: String,
}

fn stage(op: &Operand, p: &Product, is_a: bool, t: Tile, s: &str, regs: &str) -> Stage {
    let threads = t.threads();
    let (outer, base, limit) = if is_a { (t.bm, "m0", p.m) } else { (t.bn, "n0", p.n) };
    let kdim = p.k;
    let km = k_major(op, is_a);
    let mut decls = String::new();
    let mut load = String::new();
    let mut store = String::new();
    match op {
        Operand::Strided { ptr, batch, rs, cs } => {
            let (rs, cs) = (*rs, *cs);
            // Element (outer index o, depth kk) sits at o * so + kk * sk.
            let (so, sk) = if is_a { (rs, cs) } else { (cs, rs) };
            let idx = ix(p.m.max(p.n).max(kdim).saturating_mul(p.k.max(p.n)).saturating_mul(p.batches.max(1)));
            let _ = writeln!(decls, "const unsigned short* {regs}p = (const unsigned short*){ptr} + ({batch});");
            if km {
                // Staged [outer][BK]; vectorised when k runs are contiguous and 8-aligned.
                let vec = sk == 1 && kdim % 8 == 0 && so % 8 == 0;
                if vec {
                    let per = outer * BK / 8 / threads;
                    let _ = writeln!(decls, "uint4 {regs}[{per}];");
                    let _ = writeln!(
                        load,
                        "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int c = tid + j * {threads}; int r = c >> 2, q = (c & 3) * 8; int go = {base} + r, gk = k0 + q;\n\
                         {regs}[j] = (go < {limit} && gk < {kdim}) ? *(const uint4*)({regs}p + ({idx})go * {so} + gk) : make_uint4(0, 0, 0, 0); }}"
                    );
                    let _ = writeln!(store, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int c = tid + j * {threads}; *(uint4*)&{s}[c >> 2][(c & 3) * 8] = {regs}[j]; }}");
                } else {
                    let per = outer * BK / threads;
                    let _ = writeln!(decls, "unsigned short {regs}[{per}];");
                    let _ = writeln!(
                        load,
                        "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int e = tid + j * {threads}; int r = e / {BK}, kk = e % {BK}; int go = {base} + r, gk = k0 + kk;\n\
                         {regs}[j] = (go < {limit} && gk < {kdim}) ? {regs}p[({idx})go * {so} + ({idx})gk * {sk}] : (unsigned short)0; }}"
                    );
                    let _ = writeln!(store, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int e = tid + j * {threads}; {s}[e / {BK}][e % {BK}] = {regs}[j]; }}");
                }
            } else {
                // Staged [BK][outer]; vectorised when the outer runs are contiguous.
                let vec = so == 1 && limit % 8 == 0 && sk % 8 == 0;
                let groups = outer / 8;
                if vec {
                    let per = outer * BK / 8 / threads;
                    let _ = writeln!(decls, "uint4 {regs}[{per}];");
                    let _ = writeln!(
                        load,
                        "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int c = tid + j * {threads}; int kk = c / {groups}, q = (c % {groups}) * 8; int go = {base} + q, gk = k0 + kk;\n\
                         {regs}[j] = (go < {limit} && gk < {kdim}) ? *(const uint4*)({regs}p + ({idx})gk * {sk} + go) : make_uint4(0, 0, 0, 0); }}"
                    );
                    let _ = writeln!(store, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int c = tid + j * {threads}; *(uint4*)&{s}[c / {groups}][(c % {groups}) * 8] = {regs}[j]; }}");
                } else {
                    let per = outer * BK / threads;
                    let _ = writeln!(decls, "unsigned short {regs}[{per}];");
                    let _ = writeln!(
                        load,
                        "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int e = tid + j * {threads}; int kk = e / {outer}, o = e % {outer}; int go = {base} + o, gk = k0 + kk;\n\
                         {regs}[j] = (go < {limit} && gk < {kdim}) ? {regs}p[({idx})gk * {sk} + ({idx})go * {so}] : (unsigned short)0; }}"
                    );
                    let _ = writeln!(store, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int e = tid + j * {threads}; {s}[e / {outer}][e % {outer}] = {regs}[j]; }}");
                }
            }
        }
        Operand::Im2col(c) => {
            // Each thread owns one column (its image and output pixel, decoded once) and
            // every (threads / bn)-th depth row of the tile.
            let rows_per = threads / outer;
            let per = BK / rows_per;
            let hw = c.oh * c.ow;
            let idx = ix((p.n / hw.max(1)).saturating_mul(c.c * c.h * c.w));
            let [sh, sw] = c.stride;
            let [dh, dw] = c.dilation;
            let [ph, pw] = c.pad;
            let taps = c.kh * c.kw;
            let _ = writeln!(
                decls,
                "unsigned short {regs}[{per}];\nconst int {regs}col = tid % {outer}, {regs}row = tid / {outer};\n\
                 const int {regs}gn = {base} + {regs}col; const bool {regs}ok = {regs}gn < {limit};\n\
                 const int {regs}img = {regs}gn / {hw}, {regs}pix = {regs}gn % {hw};\n\
                 const int {regs}iy = ({regs}pix / {ow}) * {sh} - {ph}, {regs}ix = ({regs}pix % {ow}) * {sw} - {pw};\n\
                 const unsigned short* {regs}p = (const unsigned short*){x} + ({idx}){regs}img * {chw};",
                ow = c.ow,
                x = c.x,
                chw = c.c * c.h * c.w,
            );
            let pointwise = taps == 1 && c.stride == [1, 1] && c.pad == [0, 0] && c.h == c.oh && c.w == c.ow;
            let fetch = if pointwise {
                // A 1×1 convolution: column pixel `pix` of channel `gk`.
                format!("{regs}[j] = ({regs}ok && gk < {kdim}) ? {regs}p[({idx})gk * {hw} + {regs}pix] : (unsigned short)0;")
            } else {
                format!(
                    "int ci = gk / {taps}, tap = gk % {taps}; int yy = {regs}iy + (tap / {kw}) * {dh}, xx = {regs}ix + (tap % {kw}) * {dw};\n\
                     {regs}[j] = ({regs}ok && gk < {kdim} && yy >= 0 && yy < {h} && xx >= 0 && xx < {w}) ? {regs}p[({idx})(ci * {h} + yy) * {w} + xx] : (unsigned short)0;",
                    kw = c.kw,
                    h = c.h,
                    w = c.w,
                )
            };
            let _ = writeln!(load, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {{ int gk = k0 + {regs}row + j * {rows_per};\n{fetch} }}");
            let _ = writeln!(store, "#pragma unroll\nfor (int j = 0; j < {per}; ++j) {s}[{regs}row + j * {rows_per}][{regs}col] = {regs}[j];");
        }
    }
    Stage { decls, load, store }
}

/// The kernels of product `p`, named `name…`. A product split over k (see [`split_k`]) writes
/// its partial sums to `scratch` (a `float*` expression of [`scratch_bytes`] bytes) and a
/// second kernel adds them up and runs the epilogue.
pub fn kernels(name: &str, p: &Product, scratch: Option<&str>) -> Vec<Kernel> {
    let split = split_k(p.m, p.n, p.k, p.batches);
    let Some(ws) = scratch.filter(|_| split > 1) else { return vec![kernel(name, p, 1, &p.epilogue)] };
    let mn = p.m * p.n;
    let partial = kernel(name, p, split, &format!("{ws}[(long long)blockIdx.z * {mn} + (long long)row * {} + col] = acc;", p.n));
    let body = format!(
        "const int row = i / {n}, col = i % {n}; const long long z = 0;\nfloat acc = 0.0f;\nfor (int s = 0; s < {split}; ++s) acc += {ws}[(long long)s * {mn} + i];\n{ep}",
        n = p.n,
        ep = p.epilogue
    );
    vec![partial, super::kernels::pointwise(&format!("{name}_sum"), mn, mn * split, "", &body)]
}

/// One kernel of product `p` over `split` k ranges (grid z), `epilogue` per output.
fn kernel(name: &str, p: &Product, split: usize, epilogue: &str) -> Kernel {
    let t = pick_tile(p.m, p.n, p.batches);
    // Whole tiles per k range.
    let per = if split > 1 { p.k.div_ceil(BK).div_ceil(split) * BK } else { p.k.div_ceil(BK) * BK };
    let range = if split > 1 { format!("const int kbeg = blockIdx.z * {per}, kend = min({}, kbeg + {per});\n", p.k) } else { format!("const int kbeg = 0, kend = {};\n", p.k) };
    let threads = t.threads();
    let (tm, tn) = (t.bm / t.wm, t.bn / t.wn);
    let (mt, nt) = (tm / 16, tn / 8);
    let a = stage(&p.a, p, true, t, "As", "ra");
    let b = stage(&p.b, p, false, t, "Bs", "rb");
    let b_kmajor = k_major(&p.b, false);
    let (bm, bn) = (t.bm, t.bn);
    let b_smem = if b_kmajor { format!("Bs[{bn}][{BK} + {PAD}]") } else { format!("Bs[{BK}][{bn} + {PAD}]") };
    // B fragments: from [n][k] plainly, from [k][n] transposed.
    let b_frag = if b_kmajor {
        format!("ldmatrix_x2(bf[j], &Bs[wn * {tn} + j * 8 + (lane & 7)][ks + ((lane >> 3) & 1) * 8]);")
    } else {
        format!("ldmatrix_x2_trans(bf[j], &Bs[ks + (lane & 15)][wn * {tn} + j * 8]);")
    };
    let mma = p.mma;
    let mut s = String::new();
    let _ = write!(
        s,
        "extern \"C\" __global__ void __launch_bounds__({threads}) {name}(unsigned char* A, const unsigned char* __restrict__ W) {{\n\
         // {m}×{n}×{k} ({batches} of them) on tensor cores: {bm}×{bn} tiles, {wm}×{wn} warps{split_note}.\n\
         __shared__ __align__(16) unsigned short As[{bm}][{BK} + {PAD}];\n\
         __shared__ __align__(16) unsigned short {b_smem};\n\
         const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n\
         const int wm = warp / {wn}, wn = warp % {wn};\n\
         const int m0 = blockIdx.y * {bm}, n0 = blockIdx.x * {bn};\n\
         const long long z = {zexpr};\n\
         float accs[{mt}][{nt}][4];\n\
         #pragma unroll\nfor (int i = 0; i < {mt}; ++i)\n#pragma unroll\nfor (int j = 0; j < {nt}; ++j)\n#pragma unroll\nfor (int r = 0; r < 4; ++r) accs[i][j][r] = 0.0f;\n\
         {range}{ad}{bd}\
         {{ const int k0 = kbeg;\n{al}{bl}}}\n\
         for (int k0 = kbeg; k0 < kend; k0 += {BK}) {{\n\
         {as_}{bs}\
         __syncthreads();\n\
         if (k0 + {BK} < kend) {{ const int k0n = k0 + {BK}; {{ const int k0 = k0n;\n{al}{bl}}} }}\n\
         #pragma unroll\n\
         for (int ks = 0; ks < {BK}; ks += 16) {{\n\
         unsigned af[{mt}][4], bf[{nt}][2];\n\
         #pragma unroll\nfor (int i = 0; i < {mt}; ++i) ldmatrix_x4(af[i], &As[wm * {tm} + i * 16 + (lane & 15)][ks + (lane >> 4) * 8]);\n\
         #pragma unroll\nfor (int j = 0; j < {nt}; ++j) {b_frag}\n\
         #pragma unroll\nfor (int i = 0; i < {mt}; ++i)\n#pragma unroll\nfor (int j = 0; j < {nt}; ++j) mma_{mma}(accs[i][j], af[i], bf[j]);\n\
         }}\n\
         __syncthreads();\n\
         }}\n\
         #pragma unroll\nfor (int i = 0; i < {mt}; ++i)\n#pragma unroll\nfor (int j = 0; j < {nt}; ++j)\n#pragma unroll\nfor (int r = 0; r < 4; ++r) {{\n\
         const int row = m0 + wm * {tm} + i * 16 + (lane >> 2) + (r >> 1) * 8;\n\
         const int col = n0 + wn * {tn} + j * 8 + (lane & 3) * 2 + (r & 1);\n\
         if (row < {m} && col < {n}) {{ const float acc = accs[i][j][r];\n{ep}\n}}\n\
         }}\n}}\n",
        m = p.m,
        n = p.n,
        k = p.k,
        batches = p.batches,
        wm = t.wm,
        wn = t.wn,
        ad = a.decls,
        bd = b.decls,
        al = a.load,
        bl = b.load,
        as_ = a.store,
        bs = b.store,
        ep = epilogue,
        // A split product is a single one: grid z numbers its k ranges.
        zexpr = if split > 1 { "0" } else { "blockIdx.z" },
        split_note = if split > 1 { format!(", k split {split} ways") } else { String::new() },
    );
    let z = if split > 1 { split } else { p.batches.max(1) };
    Kernel { name: name.to_string(), source: s, grid: [p.n.div_ceil(bn) as u32, p.m.div_ceil(bm) as u32, z as u32], block: [threads as u32, 1, 1] }
}

/// The device functions the tensor-core kernels call, once per module.
pub const PRELUDE: &str = r#"// Tensor-core building blocks (sm_80 and later).
__device__ __forceinline__ void ldmatrix_x4(unsigned* r, const unsigned short* p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned* r, const unsigned short* p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned* r, const unsigned short* p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
__device__ __forceinline__ void mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_shrink_until_the_grid_fills_the_gpu() {
        assert_eq!(pick_tile(4096, 4096, 1), TILES[0]);
        assert_eq!(pick_tile(512, 49, 1), TILES[2]);
        // Every tile's loaders divide evenly among its threads.
        for t in TILES {
            assert_eq!(t.bm * BK % (8 * t.threads()), 0);
            assert_eq!(t.bn * BK % (8 * t.threads()), 0);
            assert_eq!(t.threads() % t.bn, 0, "im2col rows per pass");
            assert_eq!(t.bm / t.wm % 16, 0);
            assert_eq!(t.bn / t.wn % 8, 0);
        }
    }

    #[test]
    fn thin_products_split_over_k_in_whole_tiles() {
        // ResNet-50's last 3×3 convolution at batch 1: 8 blocks without a split.
        let s = split_k(512, 49, 4608, 1);
        assert!(s > 8 && s <= 32, "{s}");
        assert_eq!(scratch_bytes(512, 49, 4608, 1), s * 512 * 49 * 4);
        // Enough blocks already, too little depth, or batched: no split.
        assert_eq!(split_k(4096, 4096, 4096, 1), 1);
        assert_eq!(split_k(64, 64, 64, 1), 1);
        assert_eq!(split_k(128, 128, 4096, 8), 1);
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
