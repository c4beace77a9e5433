//! Fused attention: `MatMul(Q, Kᵀ)`, the elementwise nodes after it (scale, mask), a softmax
//! over the keys and `MatMul(P, V)` as one kernel, flash-attention style: a block takes 64
//! query rows of one batch entry, walks the keys 64 at a time with an online softmax, and
//! never writes the scores. Transposes that only reshuffle Q, K, V or the output for the
//! products are read and written through strides instead of run, so a BERT layer's attention
//! is one launch where it was eight.
//!
//! Tensor cores (`mma.sync.m16n8k16`, f32 accumulators) on 16-bit models only: the scores and
//! the softmax stay f32, P is rounded to the model's 16-bit type for the second product, as
//! the unfused module rounds every intermediate.
use super::kernels::{chain_body, Cx, Kernel};
use crate::codegen::CodegenError;
pub use crate::passes::attention::{self, Attention, View};
use crate::ir::{DType, Graph};
use std::fmt::Write;

/// Query rows per block (four warps of 16) and keys per step.
const ROWS: usize = 64;
const KEYS: usize = 64;
/// Halves of padding per shared-memory row (distinct banks for `ldmatrix`, 16-byte rows).
const PAD: usize = 8;

/// Every attention in `g` this kernel can do: 16-bit floats (tensor cores), head dims that
/// are whole fragments and fit the registers (up to 128), batch entries a grid dimension holds.
pub fn find(g: &Graph) -> Vec<Attention> {
    attention::find(g, |dt| matches!(dt, DType::BF16 | DType::F16))
        .into_iter()
        .filter(|a| a.d % 16 == 0 && a.dv % 16 == 0 && a.d <= 128 && a.dv <= 128 && a.batch.iter().product::<usize>() <= 65535)
        .collect()
}

type R<T> = Result<T, CodegenError>;

/// C expression of the element offset of batch entry `z` (flat over `batch`) in a view.
fn batch_offset(batch: &[usize], strides: &[usize]) -> String {
    let mut terms = Vec::new();
    let mut inner = 1usize;
    for (i, (&d, &s)) in batch.iter().zip(strides).enumerate().rev() {
        if d > 1 && s > 0 {
            let q = if inner == 1 { "z".to_string() } else { format!("(z / {inner})") };
            let idx = if i == 0 { q } else { format!("({q} % {d})") };
            terms.push(format!("{idx} * {s}"));
        }
        inner *= d;
    }
    if terms.is_empty() {
        "0".into()
    } else {
        terms.join(" + ")
    }
}

/// Statements filling shared tile `dst[ROWS][cols]` with rows `r0 + r` (`r < ROWS`, zero
/// past `limit`) of a view whose element `(row, c)` is at `p + row * rs + c * cs`: 16-byte
/// copies when the rows are contiguous and aligned, single elements otherwise.
#[allow(clippy::too_many_arguments)]
fn load_tile(dst: &str, p: &str, r0: &str, limit: usize, cols: usize, rs: usize, cs: usize, aligned: bool) -> String {
    let threads = ROWS / 16 * 32;
    if cs == 1 && rs % 8 == 0 && cols % 8 == 0 && aligned {
        let chunks = cols / 8;
        format!(
            "for (int e = tid; e < {ROWS} * {chunks}; e += {threads}) {{ const int r = e / {chunks}, c = (e % {chunks}) * 8; const int gr = {r0} + r;\n\
             *(uint4*)&{dst}[r][c] = gr < {limit} ? *(const uint4*)({p} + (long long)gr * {rs} + c) : make_uint4(0, 0, 0, 0); }}\n"
        )
    } else {
        format!(
            "for (int e = tid; e < {ROWS} * {cols}; e += {threads}) {{ const int r = e / {cols}, c = e % {cols}; const int gr = {r0} + r;\n\
             {dst}[r][c] = gr < {limit} ? {p}[(long long)gr * {rs} + (long long)c * {cs}] : (unsigned short)0; }}\n"
        )
    }
}

/// The kernel of attention `a`, named `name`.
pub fn kernel(cx: &Cx, a: &Attention, name: &str) -> R<Kernel> {
    let g = cx.g;
    let (sq, sk, d, dv) = (a.sq, a.sk, a.d, a.dv);
    let z_count: usize = a.batch.iter().product::<usize>().max(1);
    let mma = if a.dtype == DType::BF16 { "bf16" } else { "f16" };
    let scores = g.node(a.scores);
    let s = scores.outputs[0];
    // Each score through the chain, as the unfused epilogue would compute it: `o` is the
    // score's flat index, `row`/`col` its query and key.
    let index = format!("z * {} + (long long)row * {sk} + col", sq * sk);
    let (chain, _) = chain_body(cx, scores, s, &a.chain, &index, "acc", &mut |_, _| Ok(None))?;
    let ptr = |v: &View| -> R<String> { Ok(format!("((const unsigned short*){})", cx.ptr(scores, v.value)?)) };
    let aligned = |v: &View| cx.aligned16(v.value) && v.batch_strides.iter().all(|s| s % 8 == 0);
    let kt = &a.kt;
    let mut src = String::new();
    let _ = write!(
        src,
        "extern \"C\" __global__ void __launch_bounds__(128) {name}(unsigned char* A, const unsigned char* __restrict__ W) {{\n\
         // Attention over {z_count} batch entries: ({sq}×{d})·({d}×{sk}), softmax over the keys, ·({sk}×{dv}); {ROWS} query rows per block.\n\
         __shared__ __align__(16) unsigned short Qs[{ROWS}][{d} + {PAD}];\n\
         __shared__ __align__(16) unsigned short Ks[{KEYS}][{d} + {PAD}];\n\
         __shared__ __align__(16) unsigned short Vs[{KEYS}][{dv} + {PAD}];\n\
         const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n\
         const long long z = blockIdx.y; const int q0 = blockIdx.x * {ROWS};\n\
         const unsigned short* qp = {qp} + ({qo});\n\
         const unsigned short* kp = {kp} + ({ko});\n\
         const unsigned short* vp = {vp} + ({vo});\n\
         {qload}__syncthreads();\n\
         unsigned qf[{dk}][4];\n\
         #pragma unroll\nfor (int kk = 0; kk < {dk}; ++kk) ldmatrix_x4(qf[kk], &Qs[warp * 16 + (lane & 15)][kk * 16 + (lane >> 4) * 8]);\n\
         float acc_o[{dn}][4];\n\
         #pragma unroll\nfor (int e = 0; e < {dn}; ++e) acc_o[e][0] = acc_o[e][1] = acc_o[e][2] = acc_o[e][3] = 0.0f;\n\
         float mrow[2] = {{-(1.0f / 0.0f), -(1.0f / 0.0f)}}, lrow[2] = {{0.0f, 0.0f}};\n\
         for (int j0 = 0; j0 < {sk}; j0 += {KEYS}) {{\n\
         __syncthreads();\n\
         {kload}{vload}__syncthreads();\n\
         float sc[{kn}][4];\n\
         #pragma unroll\nfor (int j = 0; j < {kn}; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;\n\
         #pragma unroll\nfor (int kk = 0; kk < {dk}; ++kk) {{\n\
         unsigned kf[{kn}][2];\n\
         #pragma unroll\nfor (int j = 0; j < {kn}; j += 2) ldmatrix_x4(&kf[j][0], &Ks[j * 8 + (lane >> 4) * 8 + (lane & 7)][kk * 16 + ((lane >> 3) & 1) * 8]);\n\
         #pragma unroll\nfor (int j = 0; j < {kn}; ++j) mma_{mma}(sc[j], qf[kk], kf[j]);\n\
         }}\n\
         // Each score through the nodes between the product and the softmax; keys past the\n\
         // end weigh nothing.\n\
         #pragma unroll\nfor (int j = 0; j < {kn}; ++j)\n#pragma unroll\nfor (int r = 0; r < 4; ++r) {{\n\
         const int row = min(q0 + warp * 16 + (lane >> 2) + (r >> 1) * 8, {sq} - 1), col = j0 + j * 8 + (lane & 3) * 2 + (r & 1);\n\
         if (col >= {sk}) {{ sc[j][r] = -(1.0f / 0.0f); continue; }}\n\
         const float acc = sc[j][r];\n{chain}\nsc[j][r] = v;\n\
         }}\n\
         // Online softmax: rescale what was summed so far to the new row maximum.\n\
         #pragma unroll\nfor (int h = 0; h < 2; ++h) {{\n\
         float mx = mrow[h];\n\
         #pragma unroll\nfor (int j = 0; j < {kn}; ++j) mx = fmaxf(mx, fmaxf(sc[j][2 * h], sc[j][2 * h + 1]));\n\
         mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)); mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));\n\
         const float base = mx == -(1.0f / 0.0f) ? 0.0f : mx;\n\
         const float scale = __expf(mrow[h] - base);\n\
         float sum = 0.0f;\n\
         #pragma unroll\nfor (int j = 0; j < {kn}; ++j) {{ sc[j][2 * h] = __expf(sc[j][2 * h] - base); sc[j][2 * h + 1] = __expf(sc[j][2 * h + 1] - base); sum += sc[j][2 * h] + sc[j][2 * h + 1]; }}\n\
         sum += __shfl_xor_sync(0xffffffffu, sum, 1); sum += __shfl_xor_sync(0xffffffffu, sum, 2);\n\
         lrow[h] = lrow[h] * scale + sum; mrow[h] = mx;\n\
         #pragma unroll\nfor (int e = 0; e < {dn}; ++e) {{ acc_o[e][2 * h] *= scale; acc_o[e][2 * h + 1] *= scale; }}\n\
         }}\n\
         // P (rounded to the model's type) times V: the score accumulators are already laid\n\
         // out as the A fragments of the next product.\n\
         #pragma unroll\nfor (int kk = 0; kk < {KEYS} / 16; ++kk) {{\n\
         unsigned pf[4] = {{ pack_{mma}(sc[2 * kk][0], sc[2 * kk][1]), pack_{mma}(sc[2 * kk][2], sc[2 * kk][3]), pack_{mma}(sc[2 * kk + 1][0], sc[2 * kk + 1][1]), pack_{mma}(sc[2 * kk + 1][2], sc[2 * kk + 1][3]) }};\n\
         unsigned vf[{dn}][2];\n\
         #pragma unroll\nfor (int e = 0; e < {dn}; e += 2) ldmatrix_x4_trans(&vf[e][0], &Vs[kk * 16 + (lane & 15)][e * 8 + (lane >> 4) * 8]);\n\
         #pragma unroll\nfor (int e = 0; e < {dn}; ++e) mma_{mma}(acc_o[e], pf, vf[e]);\n\
         }}\n\
         }}\n\
         {ty}* op = ({ty}*){optr} + ({oo});\n\
         #pragma unroll\nfor (int h = 0; h < 2; ++h) {{\n\
         const int row = q0 + warp * 16 + (lane >> 2) + h * 8;\n\
         if (row >= {sq}) continue;\n\
         const float inv = 1.0f / lrow[h];\n\
         #pragma unroll\nfor (int e = 0; e < {dn}; ++e) {{ const int col = e * 8 + (lane & 3) * 2;\n\
         op[(long long)row * {ors} + (long long)col * {ocs}] = acc_o[e][2 * h] * inv; op[(long long)row * {ors} + (long long)(col + 1) * {ocs}] = acc_o[e][2 * h + 1] * inv; }}\n\
         }}\n\
         }}\n",
        qp = ptr(&a.q)?,
        kp = ptr(kt)?,
        vp = ptr(&a.v)?,
        qo = batch_offset(&a.batch, &a.q.batch_strides),
        ko = batch_offset(&a.batch, &kt.batch_strides),
        vo = batch_offset(&a.batch, &a.v.batch_strides),
        oo = batch_offset(&a.batch, &a.out.batch_strides),
        qload = load_tile("Qs", "qp", "q0", sq, d, a.q.rs, a.q.cs, aligned(&a.q)),
        // Ks[key][d]: Kᵀ's column `key`, row `d`.
        kload = load_tile("Ks", "kp", "j0", sk, d, kt.cs, kt.rs, aligned(kt)),
        vload = load_tile("Vs", "vp", "j0", sk, dv, a.v.rs, a.v.cs, aligned(&a.v)),
        dk = d / 16,
        dn = dv / 8,
        kn = KEYS / 8,
        ty = cx.c(scores, a.dtype)?,
        optr = cx.ptr(scores, a.out.value)?,
        ors = a.out.rs,
        ocs = a.out.cs,
    );
    Ok(Kernel { name: name.to_string(), source: src, grid: [sq.div_ceil(ROWS) as u32, z_count as u32, 1], block: [128, 1, 1], shared: 0 })
}

/// Packing two f32 into the 16-bit pairs an `mma` A fragment holds (`lo` in the low half).
pub const PRELUDE: &str = r#"// Two floats rounded into one register of 16-bit pairs (the first in the low half).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) { unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
__device__ __forceinline__ unsigned pack_f16(float lo, float hi) { unsigned r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
"#;
