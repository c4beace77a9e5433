//! The Hopper main loop of a tensor-core product: `wgmma.mma_async` (sm_90a), one warpgroup
//! of 128 threads per 64 output rows, both operands read by the tensor cores straight from
//! shared memory. The tiles are staged by the same `cp.async` loaders as the `mma.sync` loop
//! ([`super::gemm`]), 64 deep, each row of 128 bytes swizzled as the hardware's 128-byte
//! pattern expects; the epilogue is the same too. Only products whose operands are both read
//! along k in 16-byte runs take it (convolutions over channels-last input with channels a
//! multiple of 8, Gemm with transposed B); the others keep `mma.sync`.
use super::gemm::{fill_stages, head, k_major, launch, refill_stage, stage_to, vector_width, walk, z_expr, Operand, Product, Tile, CPAD};
use super::kernels::Kernel;
use std::fmt::Write;

/// The depth of one staged tile: 64 halves, one 128-byte swizzled row.
const BK: usize = 64;
/// Bytes of one staged row.
const ROW: usize = BK * 2;
/// Stages in flight: while the tensor cores multiply one, `cp.async` fills the other two. A
/// stage is refilled once every warpgroup's multiplies of it are done (`wgmma_wait<0>` ends
/// each tile). Three stages of a 128×128 tile (97 KB) let two blocks share an SM; on
/// ResNet-50 at batch 64 that beat four stages with one `wgmma` group kept in flight (2.58
/// against 2.89 ms, H200).
const STAGES: usize = 3;

/// The tiles: two warpgroups of 64 rows each, all `bn` columns per warpgroup. 128×64 serves
/// outputs of 64 columns or fewer; a 128×256 tile (one block per SM) lost to 128×128 on
/// ResNet-50 (docs/CUDA.md).
const TILES: [Tile; 2] = [
    Tile { bm: 128, bn: 128, wm: 2, wn: 1, occupancy: 2, rate: 1.0, bk: BK, stages: STAGES, wgmma: true },
    Tile { bm: 128, bn: 64, wm: 2, wn: 1, occupancy: 2, rate: 1.0, bk: BK, stages: STAGES, wgmma: true },
];

/// Whether `p` can take the `wgmma` loop: 16-bit operands both staged k-major by 16-byte copies.
pub fn fits(p: &Product) -> bool {
    let vec8 = |op: &Operand, is_a: bool| match op {
        Operand::Strided { rs, cs, .. } if is_a => *cs == 1 && vector_width(p.k, *rs) == 8,
        Operand::Strided { rs, cs, .. } => *rs == 1 && vector_width(p.k, *cs) == 8,
        Operand::Im2col(c) => is_a && c.nhwc && c.c % 8 == 0,
    };
    // A product one tile deep is bound by its epilogue, which mma.sync's smaller blocks
    // overlap better (ResNet-50's 64-deep 1×1 convolutions: 3.03 against 2.89 ms in all).
    p.k > BK && matches!(p.mma, "bf16" | "f16") && k_major(&p.a, true) && k_major(&p.b, false) && vec8(&p.a, true) && vec8(&p.b, false)
}

/// The tile for `p`: as wide as its output up to 128 columns.
pub(super) fn pick_tile(p: &Product) -> Tile {
    if p.n <= TILES[1].bn {
        TILES[1]
    } else {
        TILES[0]
    }
}

/// Bytes of dynamic shared memory a block of tile `t` takes: the stages (then, reused, the
/// f32 output tile) and 1 KB to align them.
fn shared_bytes(t: &Tile) -> usize {
    (STAGES * (t.bm + t.bn) * ROW).max(t.bm * (t.bn + CPAD) * 4) + 1024
}

/// The kernel of product `p` (see [`fits`]) over `split` k ranges (grid z), `epilogue` per
/// output.
pub(super) fn kernel(name: &str, p: &Product, t: Tile, split: usize, epilogue: &str, store: &str) -> Kernel {
    let (bm, bn) = (t.bm, t.bn);
    let (a_stage, b_stage) = (bm * ROW, bn * ROW);
    // Chunk q/8 of row r sits at chunk (q/8) ^ (r % 8): the 128-byte swizzle.
    let dst = |s: &str, stage: usize| format!("{s} + st * {stage} + r * {ROW} + ((((q) >> 3) ^ (r & 7)) << 4)");
    let a = stage_to(&p.a, p, true, t, "As", "ra", &dst("As", a_stage));
    let b = stage_to(&p.b, p, false, t, "Bs", "rb", &dst("Bs", b_stage));
    let accs = bn / 2;
    let mma = p.mma;
    let mut s = String::new();
    let _ = write!(
        s,
        "{head}\
         extern __shared__ __align__(16) unsigned char smem_raw[];\n\
         // Swizzled 128-byte rows repeat every 1024 bytes: the tiles start on such a boundary.\n\
         unsigned char* smem = smem_raw + ((1024 - ((unsigned)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);\n\
         unsigned char* As = smem;\n\
         unsigned char* Bs = smem + {bs_at};\n\
         const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = tid >> 7;\n\
         const int m0 = blockIdx.y * {bm}, n0 = blockIdx.x * {bn};\n\
         const long long z = {zexpr};\n\
         float acc[{accs}];\n\
         #pragma unroll\nfor (int i = 0; i < {accs}; ++i) acc[i] = 0.0f;\n\
         {fill}\
         for (int kt = 0; kt < tiles; ++kt) {{\n\
         // Tile kt has landed, in view of the tensor cores; every warpgroup is done with the\n\
         // stage the next copy overwrites.\n\
         cp_async_wait<{wait}>();\n\
         fence_async_shared();\n\
         __syncthreads();\n\
         {refill}\
         wgmma_fence();\n\
         #pragma unroll\n\
         for (int ks = 0; ks < {BK} / 16; ++ks) wgmma_{mma}_n{bn}(acc, smem_desc(As + cs * {a_stage} + wg * {wg_rows} + ks * 32), smem_desc(Bs + cs * {b_stage} + ks * 32));\n\
         wgmma_commit();\n\
         wgmma_wait<0>();\n\
         }}\n\
         cp_async_wait<0>();\n\
         __syncthreads();\n\
         // The tile goes through shared memory so the epilogue walks it row by row.\n\
         float (*Cs)[{bn} + {CPAD}] = (float (*)[{bn} + {CPAD}])smem;\n\
         #pragma unroll\nfor (int j = 0; j < {bn} / 8; ++j) {{\n\
         const int r = wg * 64 + (warp & 3) * 16 + (lane >> 2), c = j * 8 + (lane & 3) * 2;\n\
         *(float2*)&Cs[r][c] = make_float2(acc[j * 4], acc[j * 4 + 1]);\n\
         *(float2*)&Cs[r + 8][c] = make_float2(acc[j * 4 + 2], acc[j * 4 + 3]);\n\
         }}\n\
         __syncthreads();\n\
         {walk}}}\n",
        head = head(name, p, t, split),
        bs_at = STAGES * a_stage,
        wg_rows = 64 * ROW,
        wait = STAGES - 2,
        fill = fill_stages(p, t, split, &a, &b),
        refill = refill_stage(t, &a, &b),
        walk = walk(t, p, split, epilogue, store),
        zexpr = z_expr(split),
    );
    debug_assert!(a.store.is_empty() && b.store.is_empty(), "wgmma tiles are staged by cp.async only");
    launch(name, p, t, split, s, shared_bytes(&t))
}

/// The device functions the `wgmma` kernels among `sources` call (sm_90a only, so a module
/// without such kernels gets none).
pub fn prelude<'a>(sources: impl Iterator<Item = &'a str> + Clone) -> String {
    let mut s = String::new();
    for ty in ["bf16", "f16"] {
        for n in [64, 128, 256] {
            let f = format!("wgmma_{ty}_n{n}");
            if sources.clone().any(|k| k.contains(&format!("{f}("))) {
                let regs = n / 2;
                let list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
                let outs: Vec<String> = (0..regs).map(|i| format!("\"+f\"(d[{i}])")).collect();
                let _ = writeln!(
                    s,
                    "__device__ __forceinline__ void {f}(float* d, unsigned long long a, unsigned long long b) {{\n  \
                     asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{scale}, 0;\\n\"\n  \
                     \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{list}}}, %{da}, %{db}, p, 1, 1, 0, 0;\\n}}\\n\"\n  \
                     : {outs}\n  : \"l\"(a), \"l\"(b), \"r\"(1));\n}}",
                    list = list.join(","),
                    outs = outs.join(", "),
                    da = regs,
                    db = regs + 1,
                    scale = regs + 2,
                );
            }
        }
    }
    if s.is_empty() {
        return s;
    }
    format!("{HELPERS}{s}")
}

const HELPERS: &str = r#"// Hopper tensor cores (sm_90a): wgmma reads both operands from shared memory.
// A shared-memory matrix descriptor: rows of 128 bytes swizzled in groups of 8 (1024 bytes
// apart), read along k from `p` (the leading byte offset is unused by such tiles).
__device__ __forceinline__ unsigned long long smem_desc(const void* p) {
  const unsigned long long a = (unsigned)__cvta_generic_to_shared(p);
  return ((a & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// Shared-memory writes of this thread (cp.async included) made visible to the tensor cores.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn product(m: usize, n: usize, k: usize) -> Product {
        let s = |rs, cs| Operand::Strided { ptr: "p".into(), batch: "0".into(), rs, cs };
        Product { m, n, k, batches: 1, a: s(k, 1), b: s(1, k), mma: "bf16", epilogue: String::new(), store: String::new(), contiguous: true, vector: None, wgmma: true }
    }

    #[test]
    fn only_k_major_16_byte_operands_fit() {
        assert!(fits(&product(4096, 256, 2304)));
        // Depth not a multiple of 8: no 16-byte copies.
        assert!(!fits(&product(4096, 256, 147)));
        // B read across k (MatMul's [k][n] weights).
        let mut p = product(4096, 256, 256);
        p.b = Operand::Strided { ptr: "p".into(), batch: "0".into(), rs: 256, cs: 1 };
        assert!(!fits(&p));
    }

    #[test]
    fn tiles_fit_their_shared_memory_and_threads() {
        for t in TILES {
            assert!(shared_bytes(&t) * t.occupancy <= 227 * 1024, "{t:?}");
            assert_eq!(t.bm, 64 * t.wm);
            assert_eq!(t.bm * (BK / 8) % t.threads(), 0);
            assert_eq!(t.bn * (BK / 8) % t.threads(), 0);
        }
        // Narrow outputs take the narrow tile.
        assert_eq!(pick_tile(&product(200704, 64, 576)).bn, 64);
    }

    #[test]
    fn the_prelude_has_only_the_shapes_used() {
        assert_eq!(prelude(["mma_bf16(x)"].into_iter()), "");
        let p = prelude(["wgmma_bf16_n128(acc, a, b)"].into_iter());
        assert!(p.contains("m64n128k16.f32.bf16.bf16 {%0,") && p.contains("%63}, %64, %65, p"));
        assert!(!p.contains("n256"));
    }
}
