//! The tiled matrix product every WGSL MatMul, Gemm and convolution runs on: a workgroup of
//! 16×16 invocations computes a 64×64 tile of one batch's output, 4×4 elements each, staging
//! 16-deep slices of both operands in workgroup memory. The operands are read through
//! expressions (a convolution's B is its input read through the window: an implicit GEMM)
//! and the result goes through an epilogue (bias, alpha/beta, the output's store).
use super::kernels::Kernel;

/// Output rows and columns of a tile, and its depth.
const BM: usize = 64;
const BN: usize = 64;
const BK: usize = 16;
/// Invocations per tile edge: each computes (BM / T) × (BN / T) outputs.
const T: usize = 16;

/// How an operand element is read.
#[derive(Debug, Clone)]
pub enum Load {
    /// An f32 expression.
    Expr(String),
    /// Statements that may assign the f32 `v` (zero otherwise).
    Stmts(String),
}

/// One product: `batches` independent `m×k · k×n`. In scope for the loads: `z` (the batch),
/// `r` (A's row), `c` (B's column), `kk` (the depth); for the epilogue `z`, `r`, `c` and the
/// sum `acc`. `prelude` runs first, after `z` is known.
#[derive(Debug, Clone)]
pub struct Product {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batches: usize,
    pub a: Load,
    /// Consecutive `kk` are adjacent in memory for A (so invocations next to each other
    /// read along k); otherwise along rows.
    pub a_k_contiguous: bool,
    pub b: Load,
    pub prelude: String,
    /// Statements storing the element `acc` at (`z`, `r`, `c`).
    pub epilogue: String,
}

fn load(l: &Load, in_range: &str) -> String {
    match l {
        Load::Expr(e) => format!("var v = 0.0;\nif ({in_range}) {{ v = {e}; }}"),
        Load::Stmts(s) => format!("var v = 0.0;\nif ({in_range}) {{\n{s}\n}}"),
    }
}

/// The tile column of an invocation's `j`-th column: pairs of adjacent columns (`2·lx`,
/// `2·lx + 1`, then 32 further), so one invocation writes both halves of a 16-bit output's words.
fn col_of(j: usize, lx: &str) -> String {
    format!("2u * {lx} + {}u", (j & 1) + 2 * T * (j >> 1))
}

/// The kernel `name` computing `p`.
pub fn kernel(name: &str, p: &Product) -> Kernel {
    let (m, n, k) = (p.m, p.n, p.k);
    let (ri, cj) = (BM / T, BN / T);
    let a_idx = if p.a_k_contiguous { format!("let rr = e / {BK}u; let kl = e % {BK}u;") } else { format!("let rr = e % {BM}u; let kl = e / {BM}u;") };
    let mut fma = String::new();
    for i in 0..ri {
        for j in 0..cj {
            fma.push_str(&format!("acc[{}] = fma(a{i}, b{j}, acc[{}]);\n", i * cj + j, i * cj + j));
        }
    }
    let a_regs: Vec<String> = (0..ri).map(|i| format!("let a{i} = {name}_a[kl * {BM}u + ly + {}u];", i * T)).collect();
    let b_regs: Vec<String> = (0..cj).map(|j| format!("let b{j} = {name}_b[kl * {BN}u + {}];", col_of(j, "lx"))).collect();
    let source = format!(
        "var<workgroup> {name}_a: array<f32, {}>;\nvar<workgroup> {name}_b: array<f32, {}>;\n\
         @compute @workgroup_size({T}, {T})\n\
         fn {name}(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) t: u32) {{\n\
         let z = wg.z;\nlet row0 = wg.y * {BM}u;\nlet col0 = wg.x * {BN}u;\nlet lx = lid.x;\nlet ly = lid.y;\n{}\
         var acc: array<f32, {}>;\n\
         for (var k0 = 0u; k0 < {k}u; k0 += {BK}u) {{\n\
         for (var e = t; e < {}u; e += {}u) {{\n{a_idx}\nlet r = row0 + rr; let kk = k0 + kl;\n{}\n{name}_a[kl * {BM}u + rr] = v;\n}}\n\
         for (var e = t; e < {}u; e += {}u) {{\nlet cc = e % {BN}u; let kl = e / {BN}u;\nlet c = col0 + cc; let kk = k0 + kl;\n{}\n{name}_b[kl * {BN}u + cc] = v;\n}}\n\
         workgroupBarrier();\n\
         for (var kl = 0u; kl < {BK}u; kl++) {{\n{}\n{}\n{fma}}}\n\
         workgroupBarrier();\n}}\n\
         for (var i = 0u; i < {ri}u; i++) {{\nfor (var j = 0u; j < {cj}u; j++) {{\n\
         let r = row0 + ly + {T}u * i; let c = col0 + 2u * lx + (j & 1u) + {}u * (j >> 1u);\n\
         if (r < {m}u && c < {n}u) {{\nlet acc = acc[i * {cj}u + j];\n{}\n}}\n}}\n}}\n}}\n",
        BM * BK,
        BK * BN,
        p.prelude,
        ri * cj,
        BM * BK,
        T * T,
        load(&p.a, &format!("r < {m}u && kk < {k}u")),
        BK * BN,
        T * T,
        load(&p.b, &format!("c < {n}u && kk < {k}u")),
        a_regs.join("\n"),
        b_regs.join("\n"),
        2 * T,
        p.epilogue,
    );
    Kernel {
        name: name.to_string(),
        source,
        workgroups: [n.div_ceil(BN).max(1) as u32, m.div_ceil(BM).max(1) as u32, p.batches.max(1) as u32],
        invocations: (T * T) as u32,
        workgroup_bytes: ((BM * BK + BK * BN) * 4) as u32,
    }
}
