//! burnc's own f32 GEMM for convolutions: `C = A · B` with A row-major (the weights, m×k) and
//! B row-major (the im2col tile or the input planes, k×n), C row-major with a row stride.
//!
//! Why not `matrixmultiply` here: convolution GEMMs are many and small to medium (m = 16…2048,
//! n = 49…12544); matrixmultiply allocates its packing buffers on every call and uses an 8×8
//! micro-kernel. This one packs into the convolution's planned scratch (no allocation, also on
//! no_std), and its 6×16 AVX2+FMA micro-kernel keeps 12 accumulators in flight (enough to
//! cover the FMA latency on two FMA pipes). The kernel is chosen at run time
//! (`is_x86_feature_detected!` under std, the compile-time target features otherwise); the
//! portable kernel computes the same blocks with separate multiply and add.
//!
//! Blocking (BLIS order): k in blocks of [`KC`]; within it rows in blocks of [`MC`] whose
//! packed A (panels of [`MR`] rows, k-major) stays in L2; within that columns in panels of
//! [`NR`] whose packed B (`KC × NR`, 16 KiB) stays in L1; the micro-kernel computes an MR×NR
//! tile, continuing the sums already in C for k blocks after the first. Each element of C is
//! thus one chain of multiply-adds over k in order, whatever the blocking, so results do not
//! depend on how a caller splits the columns (the convolution's tiles and chunks).

/// Rows of the micro-kernel's tile.
pub const MR: usize = 6;
/// Columns of the AVX2 and portable micro-kernels' tile (two AVX registers); the scratch sizes
/// are given in panels of this width.
pub const NR: usize = 16;
/// Columns of the AVX-512 micro-kernel's tile (two zmm registers: 12 accumulators, as the AVX2
/// kernel, each twice as wide).
#[cfg(target_arch = "x86_64")]
const NR512: usize = 32;
/// k per block.
pub const KC: usize = 256;
/// Rows per block of packed A (a multiple of MR): MC·KC·4 bytes = 120 KiB.
pub const MC: usize = 120;
/// Rows per block when A was packed ahead of time (a multiple of MR; any value gives the same
/// sums: the packed layout is the same panels in order whatever the blocking).
const MC_PREPACKED: usize = 480;

/// Columns of the B panels the kernels this CPU runs take (32 with AVX-512, else [`NR`]): a
/// caller splitting a product's columns over threads cuts at multiples of it, so no part
/// gets a panel edge in its middle.
pub fn panel_width() -> usize {
    #[cfg(target_arch = "x86_64")]
    if kernel_level() == Level::Avx512 {
        return NR512;
    }
    NR
}

/// Scratch (f32 elements) [`sgemm_packed`] needs for an m×k A: one packed A block and one
/// packed B panel.
pub fn scratch_len(m: usize, k: usize) -> usize {
    if m == 0 || k == 0 {
        return 0;
    }
    let kc = k.min(KC);
    m.min(MC).div_ceil(MR) * MR * kc + kc * NR
}

/// Elements of A (m×k) packed ahead of time by [`pack_weights`]: rows padded to whole panels.
pub fn packed_len(m: usize, k: usize) -> usize {
    m.div_ceil(MR) * MR * k
}

/// Scratch (f32 elements) [`sgemm_prepacked`] needs: one packed B panel.
pub fn prepacked_scratch_len(k: usize) -> usize {
    k.min(KC) * NR
}

/// Pack A (m×k, row-major with row stride `lda`) once, ahead of time (the compiler does it
/// for constant convolution weights), into the blocks [`sgemm_packed`] packs on every call:
/// per k block of [`KC`], per row block of [`MC`], panels of [`MR`] rows, k-major. The block
/// at (k0, m0) starts at `k0 · Mp + m0 · kc` (Mp: m rounded up to MR), so products from this
/// layout are the products of runtime packing, to the bit.
pub fn pack_weights(m: usize, k: usize, a: &[f32], lda: usize, out: &mut [f32]) {
    let mp = m.div_ceil(MR) * MR;
    assert!(out.len() >= mp * k && (m == 0 || k == 0 || a.len() >= (m - 1) * lda + k), "pack_weights: slices too short");
    let mut k0 = 0;
    while k0 < k {
        let kc = (k - k0).min(KC);
        let mut m0 = 0;
        while m0 < m {
            let mc = (m - m0).min(MC);
            let at = k0 * mp + m0 * kc;
            pack_a(&a[m0 * lda + k0..], lda, mc, kc, &mut out[at..at + mc.div_ceil(MR) * MR * kc]);
            m0 += MC;
        }
        k0 += KC;
    }
}

/// [`sgemm_packed`] with A packed ahead of time by [`pack_weights`] (`ap`, [`packed_len`]
/// elements); `scratch` holds at least [`prepacked_scratch_len`]`(k)`. Under std, with more
/// than one pool thread, large products split their columns (in whole panels) over the pool,
/// each task with its own B panel, which changes no sum.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_prepacked(m: usize, k: usize, n: usize, ap: &[f32], b: &[f32], ldb: usize, c: &mut [f32], ldc: usize, scratch: &mut [f32]) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            c[i * ldc..i * ldc + n].fill(0.0);
        }
        return;
    }
    assert!(ldb >= n && ldc >= n && ap.len() >= packed_len(m, k), "sgemm_prepacked: shapes");
    assert!(b.len() >= (k - 1) * ldb + n && c.len() >= (m - 1) * ldc + n, "sgemm_prepacked: slices too short");
    #[cfg(feature = "std")]
    if super::gemm::would_split(m, k, n) && n >= 2 * NR {
        return prepacked_split(m, k, n, ap, b, ldb, c, ldc);
    }
    let need = prepacked_scratch_len(k);
    assert!(scratch.len() >= need, "sgemm_prepacked: scratch too short");
    run(m, k, n, A::Packed(ap, m.div_ceil(MR) * MR, 0), Src::Rows(b, ldb), c, ldc, &mut scratch[..need], None);
}

/// [`sgemm_prepacked`]'s columns in whole-panel blocks over the thread pool.
#[cfg(feature = "std")]
#[allow(clippy::too_many_arguments)]
fn prepacked_split(m: usize, k: usize, n: usize, ap: &[f32], b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    let tasks = crate::pool::threads().min(n / NR);
    let chunk = (n.div_ceil(tasks)).div_ceil(NR) * NR;
    let (cp, clen) = (c.as_mut_ptr() as usize, c.len());
    crate::pool::parallel_for(tasks, &|t| {
        let (j0, j1) = (t * chunk, ((t + 1) * chunk).min(n));
        if j0 >= j1 {
            return;
        }
        // SAFETY: tasks write disjoint column ranges [j0, j1) of C's rows, inside the bounds
        // the caller checked (j0 < n <= ldc keeps the view inside C); parallel_for returns
        // only after every task, so no other reference to C is used meanwhile.
        let c = unsafe { core::slice::from_raw_parts_mut((cp as *mut f32).add(j0), clen - j0) };
        with_panel(|panel| run(m, k, j1 - j0, A::Packed(ap, m.div_ceil(MR) * MR, 0), Src::Rows(&b[j0..], ldb), c, ldc, panel, None));
    });
}

/// `f(panel)` with a B-panel buffer of [`prepacked_scratch_len`]`(KC)` elements for a task
/// of a split product: under std one per thread, kept (zeroing 16 KiB on the stack for every
/// task showed up in profiles of the split convolutions); on the stack without std.
pub fn with_panel<R>(f: impl FnOnce(&mut [f32]) -> R) -> R {
    #[cfg(feature = "std")]
    {
        std::thread_local! {
            static PANEL: core::cell::RefCell<std::vec::Vec<f32>> = const { core::cell::RefCell::new(std::vec::Vec::new()) };
        }
        super::with_thread_buffer(&PANEL, KC * NR, f)
    }
    #[cfg(not(feature = "std"))]
    {
        f(&mut [0f32; KC * NR])
    }
}

/// Largest B block (f32 elements, 16 MiB) the plain SGEMM packs once per k block.
#[cfg(feature = "std")]
const B_BLOCK_MAX: usize = 1 << 22;

/// `f(buf)` with this thread's B-block buffer of at least `len` elements (kept between calls).
#[cfg(feature = "std")]
fn with_b_block<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    std::thread_local! {
        static B_BLOCK: core::cell::RefCell<std::vec::Vec<f32>> = const { core::cell::RefCell::new(std::vec::Vec::new()) };
    }
    super::with_thread_buffer(&B_BLOCK, len, f)
}

/// Rows `r0..r1` of [`sgemm_prepacked`]'s product, on this thread (a caller splitting the
/// work itself): `r0` a multiple of [`MR`], `r1 ≤ m`, `c` starting at row `r0`, `scratch` at
/// least [`prepacked_scratch_len`]`(k)`. Row blocks compute the same sums as the whole.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_prepacked_rows(m: usize, k: usize, n: usize, ap: &[f32], r0: usize, r1: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize, scratch: &mut [f32]) {
    sgemm_prepacked_rows_then(m, k, n, ap, r0, r1, b, ldb, c, ldc, scratch, None);
}

/// A bias per row of C, a residual and a ReLU, applied by the GEMM to each tile before its
/// last store (in registers in the AVX2 kernels): `c = (c + bias[row]) + residual[row, col]`,
/// then `if c > 0 { c } else { 0 }`, as [`super::conv::epilogue_row`] computes them, so the
/// bits are those of a separate pass. `bias` is indexed by the row of the call's C (at least
/// as many values as rows); `residual` like C itself (element (i, j) at `i·ldc + j`).
#[derive(Clone, Copy)]
pub struct Post<'a> {
    pub bias: Option<&'a [f32]>,
    pub residual: Option<&'a [f32]>,
    pub relu: bool,
}

/// [`Post`], if any.
pub type Done<'a> = Option<Post<'a>>;

/// What a micro-kernel does to its tile before storing it: a bias per row (`bias[i]` for tile
/// row i; null: none), a residual (`res[i·ldr + j]` for tile element (i, j); null: none) and a
/// ReLU. [`Fin::NONE`] on every k step but a tile's last.
#[derive(Clone, Copy)]
struct Fin {
    bias: *const f32,
    res: *const f32,
    ldr: usize,
    relu: bool,
}

impl Fin {
    const NONE: Fin = Fin { bias: core::ptr::null(), res: core::ptr::null(), ldr: 0, relu: false };

    fn is_none(self) -> bool {
        self.bias.is_null() && self.res.is_null() && !self.relu
    }

    /// The same for the sub-tile `rows` rows and `cols` columns further on.
    #[cfg(target_arch = "x86_64")]
    fn at(self, rows: usize, cols: usize) -> Fin {
        Fin {
            bias: if self.bias.is_null() { self.bias } else { self.bias.wrapping_add(rows) },
            res: if self.res.is_null() { self.res } else { self.res.wrapping_add(rows * self.ldr + cols) },
            ..self
        }
    }

    /// The same on `rows` × `cols` of a stored tile (kernels without it built in, edge tiles).
    ///
    /// # Safety
    /// `bias`, when not null, points at `rows` values; `res`, when not null, at `rows` rows of
    /// `cols` values, `ldr` apart.
    unsafe fn apply(self, c: &mut [f32], ldc: usize, rows: usize, cols: usize) {
        if self.is_none() {
            return;
        }
        for i in 0..rows {
            // SAFETY: the caller's contract.
            let b = if self.bias.is_null() { None } else { Some(unsafe { *self.bias.add(i) }) };
            for (j, v) in c[i * ldc..i * ldc + cols].iter_mut().enumerate() {
                let mut x = *v;
                if let Some(b) = b {
                    x += b;
                }
                if !self.res.is_null() {
                    // SAFETY: the caller's contract.
                    x += unsafe { *self.res.add(i * self.ldr + j) };
                }
                *v = if !self.relu || x > 0.0 { x } else { 0.0 };
            }
        }
    }
}

/// `y[i] = Σ_k A[i][k] · x[k]` for the `m` rows of a prepacked A ([`pack_weights`]), when the
/// CPU runs the AVX2 or AVX-512 kernels; returns false (computing nothing) elsewhere. A
/// product with one column (a squeeze-excitation block's 1×1 convolutions at 1×1) wasted 31 of
/// every 32 lanes of the GEMM's tiles (3–4 GMAC/s); here the lanes are rows, eight panels at a
/// time. Each output is the kernels' chain — zero, then a fused multiply-add per k in order,
/// through y between k blocks — so the bits are the GEMM's.
pub fn prepacked_gemv(m: usize, k: usize, ap: &[f32], x: &[f32], y: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if kernel_level() != Level::Portable {
        let mp = m.div_ceil(MR) * MR;
        assert!(ap.len() >= mp * k && x.len() >= k && y.len() >= m, "prepacked_gemv: slices too short");
        // SAFETY: the CPU has AVX2 and FMA (kernel level); lengths checked above.
        unsafe { gemv_avx2(m, k, ap, x, y) };
        return true;
    }
    let _ = (m, k, ap, x, y);
    false
}

/// [`prepacked_gemv`] with 8-lane registers: rows 0..6 of a panel in one register (two lanes
/// masked off), eight panels' chains interleaved.
///
/// # Safety
/// AVX2 and FMA; `ap` holds the packed `m × k`, `x` k values, `y` m.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_avx2(m: usize, k: usize, ap: &[f32], x: &[f32], y: &mut [f32]) {
    use core::arch::x86_64::*;
    const G: usize = 8;
    let mp = m.div_ceil(MR) * MR;
    let panels = mp / MR;
    let six = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
    let mut k0 = 0;
    while k0 < k {
        let kc = (k - k0).min(KC);
        let blk = &ap[k0 * mp..k0 * mp + mp * kc];
        let mut p0 = 0;
        while p0 < panels {
            let g = (panels - p0).min(G);
            // The rows of panel p that exist (the last panel may be short).
            let mask = |p: usize| {
                let rows = (m - (p0 + p) * MR).min(MR) as i32;
                _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
            };
            let mut acc = [_mm256_setzero_ps(); G];
            if k0 > 0 {
                for (p, a) in acc.iter_mut().enumerate().take(g) {
                    // SAFETY: the mask keeps the rows of panel p0 + p that are in y.
                    *a = unsafe { _mm256_maskload_ps(y.as_ptr().add((p0 + p) * MR), mask(p)) };
                }
            }
            // Eight values from each panel's step kk: its six and two that the masked stores
            // drop. Only the very last step of the matrix reads them with a masked load (a
            // plain one could pass the end of `ap`; masked loads are slow on AMD).
            let end = if k0 + kc == k && p0 + g == panels { kc - 1 } else { kc };
            for kk in 0..end {
                let xv = _mm256_set1_ps(x[k0 + kk]);
                for (p, a) in acc.iter_mut().enumerate().take(g) {
                    // SAFETY: eight values from step kk of panel p0 + p: inside `ap` (a later
                    // step, panel or block follows; see `end`).
                    let at = blk.as_ptr().add((p0 + p) * MR * kc + kk * MR);
                    // The weights stream from memory once per inference (see `PF_A`).
                    _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(PF_A / 4) as *const i8);
                    let w = unsafe { _mm256_loadu_ps(at) };
                    *a = _mm256_fmadd_ps(w, xv, *a);
                }
            }
            for kk in end..kc {
                let xv = _mm256_set1_ps(x[k0 + kk]);
                for (p, a) in acc.iter_mut().enumerate().take(g) {
                    // SAFETY: the six values of the step; the mask skips what may lie past `ap`.
                    let w = unsafe { _mm256_maskload_ps(blk.as_ptr().add((p0 + p) * MR * kc + kk * MR), six) };
                    *a = _mm256_fmadd_ps(w, xv, *a);
                }
            }
            for (p, a) in acc.iter().enumerate().take(g) {
                // SAFETY: as the load above.
                unsafe { _mm256_maskstore_ps(y.as_mut_ptr().add((p0 + p) * MR), mask(p), *a) };
            }
            p0 += g;
        }
        k0 += kc;
    }
}

/// [`sgemm_prepacked_rows`] with `done` applied to each tile as it is finished (its bias
/// indexed from row `r0` of the matrix: `bias[0]` is row r0's).
#[allow(clippy::too_many_arguments)]
pub fn sgemm_prepacked_rows_then(m: usize, k: usize, n: usize, ap: &[f32], r0: usize, r1: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize, scratch: &mut [f32], done: Done<'_>) {
    let reads_b = r1 > r0 && k > 0 && n > 0;
    assert!(!reads_b || (ldb >= n && b.len() >= (k - 1) * ldb + n), "sgemm_prepacked_rows: B's shape");
    prepacked_rows(m, k, n, ap, r0, r1, Src::Rows(b, ldb), c, ldc, scratch, done);
}

/// [`sgemm_prepacked_rows_then`] with B the im2col matrix of `img` (`img.rows()` × `n`, `n`
/// at most `img.cols()`), packed from the image panel by panel: the same values, so the same
/// sums, as im2col into a buffer and a product with it.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_prepacked_image_then(m: usize, n: usize, ap: &[f32], r0: usize, r1: usize, img: &super::im2col::Image<'_>, c: &mut [f32], ldc: usize, scratch: &mut [f32], done: Done<'_>) {
    assert!(n <= img.cols(), "sgemm_prepacked_image: more columns than the image has");
    prepacked_rows(m, img.rows(), n, ap, r0, r1, Src::Image(img), c, ldc, scratch, done);
}

/// Rows `r0..r1` of a product with prepacked A and B from `b` (whose extent the caller checked).
#[allow(clippy::too_many_arguments)]
fn prepacked_rows(m: usize, k: usize, n: usize, ap: &[f32], r0: usize, r1: usize, b: Src<'_>, c: &mut [f32], ldc: usize, scratch: &mut [f32], done: Done<'_>) {
    assert!(r0.is_multiple_of(MR) && r0 <= r1 && r1 <= m, "sgemm_prepacked_rows: rows");
    let rows = r1 - r0;
    if rows == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..rows {
            c[i * ldc..i * ldc + n].fill(0.0);
        }
        return;
    }
    assert!(ldc >= n && ap.len() >= packed_len(m, k), "sgemm_prepacked_rows: shapes");
    assert!(c.len() >= (rows - 1) * ldc + n, "sgemm_prepacked_rows: C too short");
    let need = prepacked_scratch_len(k);
    assert!(scratch.len() >= need, "sgemm_prepacked_rows: scratch too short");
    run(rows, k, n, A::Packed(ap, m.div_ceil(MR) * MR, r0), b, c, ldc, &mut scratch[..need], done);
}

/// Where the micro-kernel's A panels come from.
#[derive(Clone, Copy)]
enum A<'a> {
    /// Packed ahead of time ([`pack_weights`]) for a matrix of `.1` rows rounded up to MR;
    /// the product uses its rows from `.2` (a multiple of MR) on.
    Packed(&'a [f32], usize, usize),
    /// Row-major with this row stride, packed block by block into the scratch.
    Rows(&'a [f32], usize),
}

/// Where the micro-kernel's B panels come from.
#[derive(Clone, Copy)]
pub enum Src<'a> {
    /// Row-major with this row stride.
    Rows(&'a [f32], usize),
    /// A convolution's im2col matrix, gathered from the image straight into each panel: no
    /// column buffer written and read back (on a 96 → 24 channel 3×3 convolution at 80×80, the
    /// im2col and the panel copies took 45 % of the time).
    Image(&'a super::im2col::Image<'a>),
}

impl Src<'_> {
    /// Rows `k0..k0 + kn`, columns `j0..j0 + nc` as a `kn × W` panel, columns past `nc` zero.
    fn pack<const W: usize>(self, k0: usize, kn: usize, j0: usize, nc: usize, out: &mut [f32]) {
        match self {
            Src::Rows(b, ldb) => pack_b::<W>(&b[k0 * ldb + j0..], ldb, kn, nc, out),
            Src::Image(img) => img.pack_panel::<W>(k0, kn, j0, nc, out),
        }
    }
}

/// `c[i·ldc + j] = Σ_p a[i·lda + p] · b[p·ldb + j]` for i < m, j < n (C overwritten; it may
/// hold anything before, NaN included). `scratch` holds at least [`scratch_len`]`(m, k)`.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_packed(m: usize, k: usize, n: usize, a: &[f32], lda: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize, scratch: &mut [f32]) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            c[i * ldc..i * ldc + n].fill(0.0);
        }
        return;
    }
    assert!(lda >= k && ldb >= n && ldc >= n, "sgemm_packed: strides");
    assert!(a.len() >= (m - 1) * lda + k && b.len() >= (k - 1) * ldb + n && c.len() >= (m - 1) * ldc + n, "sgemm_packed: slices too short");
    let need = scratch_len(m, k);
    assert!(scratch.len() >= need, "sgemm_packed: scratch too short");
    run(m, k, n, A::Rows(a, lda), Src::Rows(b, ldb), c, ldc, &mut scratch[..need], None);
}

/// The blocked product with the best kernel this CPU has. `scratch`: A's packing space (for
/// [`A::Rows`]) followed by one B panel (`min(k, KC) · NR`).
#[allow(clippy::too_many_arguments)]
fn run(m: usize, k: usize, n: usize, a: A<'_>, b: Src<'_>, c: &mut [f32], ldc: usize, scratch: &mut [f32], done: Done<'_>) {
    #[cfg(target_arch = "x86_64")]
    run_at(kernel_level(), m, k, n, a, b, c, ldc, scratch, done);
    #[cfg(target_arch = "aarch64")]
    {
        let (apack, bpack) = scratch.split_at_mut(a_space(m, k, a));
        driver_neon(m, k, n, a, b, c, ldc, apack, bpack, done);
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let (apack, bpack) = scratch.split_at_mut(a_space(m, k, a));
        driver::<NR>(m, k, n, a, b, c, ldc, apack, bpack, portable_fin, portable_fin, no_partial, no_strip, done);
    }
}

/// Elements of the scratch that hold packed A blocks: none when A was packed ahead of time;
/// the rest of the scratch is for B's panels.
fn a_space(m: usize, k: usize, a: A<'_>) -> usize {
    match a {
        A::Packed(..) => 0,
        A::Rows(..) => m.min(MC).div_ceil(MR) * MR * k.min(KC),
    }
}

/// [`run`] with the kernels of `level` (which the CPU must support: tests pick lower ones).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn run_at(level: Level, m: usize, k: usize, n: usize, a: A<'_>, b: Src<'_>, c: &mut [f32], ldc: usize, scratch: &mut [f32], done: Done<'_>) {
    let (apack, bpack) = scratch.split_at_mut(a_space(m, k, a));
    match level {
        // The wide kernel needs room for at least one k step of a 32-wide panel (k ≥ 2).
        Level::Avx512 if bpack.len() >= NR512 => {
            // SAFETY: the CPU has AVX-512F; the callers' asserts bound every access.
            unsafe { driver_avx512(m, k, n, a, b, c, ldc, apack, bpack, done) };
            return;
        }
        Level::Avx512 | Level::Avx2 => {
            // SAFETY: the CPU has AVX2 and FMA (kernel_level reports Avx512 only together with
            // them); the callers' asserts bound every access.
            unsafe { driver_avx2(m, k, n, a, b, c, ldc, apack, bpack, done) };
            return;
        }
        Level::Portable => {}
    }
    driver::<NR>(m, k, n, a, b, c, ldc, apack, bpack, portable_fin, portable_fin, no_partial, no_strip, done);
}

/// The blocked loops with the AVX2+FMA micro-kernel inlined into them.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn driver_avx2(m: usize, k: usize, n: usize, a: A<'_>, b: Src<'_>, c: &mut [f32], ldc: usize, apack: &mut [f32], bpack: &mut [f32], done: Done<'_>) {
    driver::<NR>(
        m,
        k,
        n,
        a,
        b,
        c,
        ldc,
        apack,
        bpack,
        // SAFETY (both closures): they run inside a function compiled for, and only called
        // on, CPUs with AVX2 and FMA.
        |kc, a, b, c, ldc, load, fin| unsafe { kernel_avx2(kc, a, b, c, ldc, load, fin) },
        |kc, a, b, c, ldc, load, fin| unsafe { kernel_avx2_narrow(kc, a, b, c, ldc, load, fin) },
        |mr, kc, a, b, c, ldc, load, fin| unsafe { kernel_avx2_rows(mr, kc, a, b, c, ldc, load, fin) },
        |s, c, ldc| unsafe { strip_avx2(s, c, ldc) },
        done,
    );
}

/// The blocked loops with the AVX-512 micro-kernel (MR × 32) inlined into them. B goes in
/// panels 32 wide; the B scratch ([`prepacked_scratch_len`], sized for 16-wide panels) then
/// holds half as many k steps, so each k block of A runs as sub-blocks (the prepacked A
/// layout is k-major inside each panel, so a sub-block is just an offset into it).
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn driver_avx512(m: usize, k: usize, n: usize, a: A<'_>, b: Src<'_>, c: &mut [f32], ldc: usize, apack: &mut [f32], bpack: &mut [f32], done: Done<'_>) {
    driver::<NR512>(
        m,
        k,
        n,
        a,
        b,
        c,
        ldc,
        apack,
        bpack,
        // SAFETY (all three closures): they run inside a function compiled for, and only
        // called on, CPUs with AVX-512F.
        |kc, a, b, c, ldc, load, fin| unsafe { kernel_avx512_r::<MR, 2>(kc, a, b, c, ldc, load, fin) },
        |kc, a, b, c, ldc, load, fin| unsafe { kernel_avx512_r::<MR, 1>(kc, a, b, c, ldc, load, fin) },
        |mr, kc, a, b, c, ldc, load, fin| unsafe { kernel_avx512_rows::<2>(mr, kc, a, b, c, ldc, load, fin) },
        |s, c, ldc| unsafe { strip_avx512(s, c, ldc) },
        done,
    );
}

/// The last columns of a product, fewer than a panel (49 = 3·16 + 1 or 32 + 17, 196 = 12·16 + 4
/// or 6·32 + 4), for all the row panels of a block, as the driver hands them to a kernel
/// family's strip function (which takes the widths it has kernels for): the panels' A blocks
/// (`a`, `pstride` apart, `kn` steps each), the packed B panel (`b`) of which columns `0..nc`
/// are real, `rows` rows of C from the first panel's (the last panel may be partial); B's
/// rows are `bstride` apart (the family's panel width).
#[derive(Clone, Copy)]
// Only the x86 kernels read the fields; elsewhere the driver builds them and `no_strip` ignores them.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Strip<'s> {
    kn: usize,
    a: &'s [f32],
    pstride: usize,
    panels: usize,
    rows: usize,
    b: &'s [f32],
    bstride: usize,
    nc: usize,
    load: bool,
    fin: Fin,
}

/// How far ahead (f32 elements) the AVX2 kernel prefetches packed A: 128 k steps, 3 KiB
/// (384 and 1536 measured no better; cold weights 0.91–0.96× the time, warm ones unchanged).
#[cfg(target_arch = "x86_64")]
pub(crate) const PF_A: usize = 768;

/// Widest remainder a strip kernel takes.
const STRIP_MAX: usize = 4;

/// For kernel families without strip kernels: the driver's edge tiles do those columns.
fn no_strip(_: &Strip<'_>, _: &mut [f32], _: usize) -> bool {
    false
}

/// [`Strip`] with AVX2+FMA: vectors run down the rows of an A panel (its 6 rows of a k step
/// are contiguous in the packed layout; lanes 6 and 7 compute nothing that is stored), one
/// accumulator per panel and column, G panels at once so that 8–9 independent chains cover
/// the FMA latency. The edge tile this replaces runs a 6 × 8 kernel per panel whose six
/// chains wait on the latency while computing 1–4 useful columns: with 49 columns the one
/// left-over column cost two thirds of a full panel. Each element is the same chain of fused
/// multiply-adds in k order as in the tile kernels, then the same bias and ReLU, so the bits.
///
/// # Safety
/// The CPU supports AVX2 and FMA; `c` starts at the strip's first row and column and spans
/// `(rows − 1)·ldc + nc` elements; `fin.bias`, when not null, points at `rows` values and
/// `fin.res` at as many rows of `nc` values as C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn strip_avx2(s: &Strip<'_>, c: &mut [f32], ldc: usize) -> bool {
    macro_rules! groups {
        ($j:literal, $g:literal, $($gs:literal),*) => {{
            let mut p = 0;
            while p + $g <= s.panels {
                // SAFETY: the caller's contract.
                unsafe { strip_avx2_gj::<$g, $j>(s, p, c, ldc) };
                p += $g;
            }
            // SAFETY (each arm): as above, with the panels that are left.
            match s.panels - p {
                0 => {}
                $($gs => unsafe { strip_avx2_gj::<$gs, $j>(s, p, c, ldc) },)*
                _ => unreachable!(),
            }
        }};
    }
    match s.nc {
        1 => groups!(1, 8, 1, 2, 3, 4, 5, 6, 7),
        2 => groups!(2, 4, 1, 2, 3),
        3 => groups!(3, 3, 1, 2),
        4 => groups!(4, 2, 1),
        _ => return false,
    }
    true
}

/// Panels `first..first + G` of a [`Strip`] with `J` = its `nc` columns.
///
/// # Safety
/// As [`strip_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
#[allow(clippy::needless_range_loop)] // indices also offset raw pointers
unsafe fn strip_avx2_gj<const G: usize, const J: usize>(s: &Strip<'_>, first: usize, c: &mut [f32], ldc: usize) {
    use core::arch::x86_64::*;
    let kn = s.kn;
    assert!(kn > 0 && J <= s.bstride && (first + G - 1) * s.pstride + kn * MR <= s.a.len() && s.b.len() >= (kn - 1) * s.bstride + J);
    assert!(first * MR < s.rows && c.len() >= (s.rows - 1) * ldc + J);
    // Rows of C each panel of the group has (the last panel of the block may have fewer).
    let valid: [usize; G] = core::array::from_fn(|g| s.rows.saturating_sub((first + g) * MR).min(MR));
    let cp = c.as_mut_ptr();
    let mut acc = [[_mm256_setzero_ps(); J]; G];
    if s.load {
        for g in 0..G {
            for j in 0..J {
                let mut t = [0f32; 8];
                for i in 0..valid[g] {
                    t[i] = *cp.add(((first + g) * MR + i) * ldc + j);
                }
                acc[g][j] = _mm256_loadu_ps(t.as_ptr());
            }
        }
    }
    let ap: [*const f32; G] = core::array::from_fn(|g| s.a.as_ptr().add((first + g) * s.pstride));
    let bp = s.b.as_ptr();
    // Every step but the last loads 8 values (the next step's first two in lanes 6, 7); the
    // last loads 6, not to read past the panel.
    for p in 0..kn - 1 {
        let bv: [__m256; J] = core::array::from_fn(|j| _mm256_broadcast_ss(&*bp.add(p * s.bstride + j)));
        for g in 0..G {
            let av = _mm256_loadu_ps(ap[g].add(p * MR));
            for j in 0..J {
                acc[g][j] = _mm256_fmadd_ps(av, bv[j], acc[g][j]);
            }
        }
    }
    let six = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
    let p = kn - 1;
    let bv: [__m256; J] = core::array::from_fn(|j| _mm256_broadcast_ss(&*bp.add(p * s.bstride + j)));
    for g in 0..G {
        let av = _mm256_maskload_ps(ap[g].add(p * MR), six);
        for j in 0..J {
            acc[g][j] = _mm256_fmadd_ps(av, bv[j], acc[g][j]);
        }
    }
    if !s.fin.bias.is_null() {
        for g in 0..G {
            let mut t = [0f32; 8];
            for i in 0..valid[g] {
                t[i] = *s.fin.bias.add((first + g) * MR + i);
            }
            let bias = _mm256_loadu_ps(t.as_ptr());
            for j in 0..J {
                acc[g][j] = _mm256_add_ps(acc[g][j], bias);
            }
        }
    }
    if !s.fin.res.is_null() {
        for g in 0..G {
            for j in 0..J {
                let mut t = [0f32; 8];
                for i in 0..valid[g] {
                    t[i] = *s.fin.res.add(((first + g) * MR + i) * s.fin.ldr + j);
                }
                acc[g][j] = _mm256_add_ps(acc[g][j], _mm256_loadu_ps(t.as_ptr()));
            }
        }
    }
    if s.fin.relu {
        let z = _mm256_setzero_ps();
        for row in acc.iter_mut() {
            for v in row.iter_mut() {
                *v = _mm256_max_ps(*v, z);
            }
        }
    }
    for g in 0..G {
        for j in 0..J {
            let mut t = [0f32; 8];
            _mm256_storeu_ps(t.as_mut_ptr(), acc[g][j]);
            for i in 0..valid[g] {
                *cp.add(((first + g) * MR + i) * ldc + j) = t[i];
            }
        }
    }
}

/// For kernel families without a fewer-rows kernel: the driver's edge tile does those rows.
#[allow(clippy::too_many_arguments)]
// aarch64 always runs the NEON family (the portable kernels stay for its tests).
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn no_partial(_: usize, _: usize, _: &[f32], _: &[f32], _: &mut [f32], _: usize, _: bool, _: Fin) -> bool {
    false
}

/// The blocked loops around `kernel(kc, a, b, c, ldc, load)`, a micro-kernel computing
/// `C[i, j] (+)= Σ_p a[p·MR + i] · b[p·W + j]` for the full MR×W tile at `c` (rows `ldc`
/// apart), continuing the sums in C when `load`, else from zero. The kernel's contract: `a`
/// holds kc·MR, `b` kc·W, and `c` spans `(MR - 1)·ldc + W` elements. `narrow` computes
/// (at least) the first W/2 columns of the tile, for edge panels that have no more (N = 49:
/// three full panels and one column). `partial(mr, kc, a, b, c, ldc, load)` computes only the
/// first `mr` < MR rows of a full-width tile, straight into C (`c` spans `(mr − 1)·ldc + W`),
/// and returns false where the family has no such kernel (the edge tile then does it). B is packed in panels of `W` columns into `bpack`; k
/// runs in blocks of [`KC`] (the layout of packed A) and, within them, in sub-blocks of as
/// many steps as `bpack` holds rows of W.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn driver<const W: usize>(
    m: usize,
    k: usize,
    n: usize,
    a: A<'_>,
    b: Src<'_>,
    c: &mut [f32],
    ldc: usize,
    apack: &mut [f32],
    bpack: &mut [f32],
    kernel: impl Fn(usize, &[f32], &[f32], &mut [f32], usize, bool, Fin),
    narrow: impl Fn(usize, &[f32], &[f32], &mut [f32], usize, bool, Fin),
    partial: impl Fn(usize, usize, &[f32], &[f32], &mut [f32], usize, bool, Fin) -> bool,
    strip: impl Fn(&Strip<'_>, &mut [f32], usize) -> bool,
    done: Done<'_>,
) {
    if let Some(Post { bias: Some(b), .. }) = done {
        assert!(b.len() >= m, "packed GEMM: bias shorter than the rows");
    }
    if let Some(Post { residual: Some(r), .. }) = done {
        assert!(r.len() >= (m - 1) * ldc + n, "packed GEMM: residual shorter than C");
    }
    // Row blocks: MC when A is packed here (the block must stay in L2 while B's panels go by);
    // prepacked A needs no packing space, so bigger blocks repack each B panel fewer times.
    let mblock = match a {
        A::Packed(..) => MC_PREPACKED,
        A::Rows(..) => MC,
    };
    // One tile: rows i0.. (an A panel at `ap`, kn steps) × columns j0..j0 + nc (a packed B
    // panel at `bp`), continuing the sums in C when `load`, `fin` on its last k step.
    // Full tiles call `kernel` here; the rest go through [`edge_tile`], a cold function of its
    // own, so this closure stays small enough to be inlined into the loops below. With the edge
    // path inside it, LLVM called it once per tile (a prologue per 6×16 tile) or not, as
    // unrelated code elsewhere in the crate changed: k = 27 products (first convolutions)
    // 1.4× slower when it did.
    let tile = |ap: &[f32], bp: &[f32], c: &mut [f32], i0: usize, j0: usize, nc: usize, kn: usize, load: bool, fin: Fin| {
        if i0 + MR <= m && nc == W {
            let cstart = i0 * ldc + j0;
            kernel(kn, ap, bp, &mut c[cstart..cstart + (MR - 1) * ldc + W], ldc, load, fin);
        } else {
            edge_tile::<W>(m, ldc, ap, bp, c, i0, j0, nc, kn, load, fin, &kernel, &narrow, &partial);
        }
    };
    // The tile's epilogue when `finish` (its last k step), else none.
    let fin_of = |finish: Done<'_>, i0: usize, j0: usize| match finish {
        Some(p) => Fin {
            bias: p.bias.map_or(core::ptr::null(), |b| b[i0..].as_ptr()),
            res: p.residual.map_or(core::ptr::null(), |r| r[i0 * ldc + j0..].as_ptr()),
            ldr: ldc,
            relu: p.relu,
        },
        None => Fin::NONE,
    };
    // A packed here in blocks of MC rows (a plain SGEMM, m > MC): under std, all of B's panels
    // of a k block are packed once into a per-thread buffer and reused by every row block, as
    // BLIS does; the order below packs each B panel again for each row block of A (8.5 times
    // for m = 1024), whose strided reads of B (rows 4 KiB apart) took 12 % of a 1024³ product.
    #[cfg(feature = "std")]
    if matches!(a, A::Rows(..)) && m > mblock && n.div_ceil(W) * W * k.min(KC) <= B_BLOCK_MAX {
        return with_b_block(n.div_ceil(W) * W * k.min(KC), |bblock| {
            let panels_n = n.div_ceil(W);
            let mut k0 = 0;
            while k0 < k {
                let kc = (k - k0).min(KC);
                for jp in 0..panels_n {
                    let j0 = jp * W;
                    b.pack::<W>(k0, kc, j0, (n - j0).min(W), &mut bblock[jp * kc * W..(jp + 1) * kc * W]);
                }
                let load = k0 > 0;
                let finish = if k0 + kc >= k { done } else { None };
                let mut m0 = 0;
                while m0 < m {
                    let mc = (m - m0).min(mblock);
                    let panels = mc.div_ceil(MR);
                    let ap_all = a_block(a, apack, m0, mc, k0, kc);
                    for jp in 0..panels_n {
                        let j0 = jp * W;
                        let nc = (n - j0).min(W);
                        let bp = &bblock[jp * kc * W..(jp + 1) * kc * W];
                        if nc < W {
                            let s = Strip { kn: kc, a: ap_all, pstride: MR * kc, panels, rows: mc, b: bp, bstride: W, nc, load, fin: fin_of(finish, m0, j0) };
                            if strip(&s, &mut c[m0 * ldc + j0..], ldc) {
                                continue;
                            }
                        }
                        for p in 0..panels {
                            let i0 = m0 + p * MR;
                            tile(&ap_all[p * MR * kc..(p + 1) * MR * kc], bp, c, i0, j0, nc, kc, load, fin_of(finish, i0, j0));
                        }
                    }
                    m0 += mblock;
                }
                k0 += KC;
            }
        });
    }
    let ksub = (bpack.len() / W).min(KC);
    assert!(ksub > 0, "packed GEMM: B panel too small");
    let mut k0 = 0;
    while k0 < k {
        let kc = (k - k0).min(KC);
        let mut m0 = 0;
        while m0 < m {
            let mc = (m - m0).min(mblock);
            let panels = mc.div_ceil(MR);
            let apack = a_block(a, apack, m0, mc, k0, kc);
            let mut ks = 0;
            while ks < kc {
                let kn = (kc - ks).min(ksub);
                let load = k0 > 0 || ks > 0;
                // The tiles' last k step: each tile is finished after its kernel call.
                let finish = if k0 + kc >= k && ks + kn >= kc { done } else { None };
                let mut j0 = 0;
                while j0 < n {
                    let nc = (n - j0).min(W);
                    // Prepacked A (a layer's weights) comes from memory on the first column
                    // panel, once per inference: each A panel is asked for while the one before
                    // it computes. Later panels find the block in L2.
                    let first_pass = j0 == 0 && matches!(a, A::Packed(..));
                    let bp = &mut bpack[..kn * W];
                    b.pack::<W>(k0 + ks, kn, j0, nc, bp);
                    let bp = &*bp;
                    if nc < W {
                        let s = Strip { kn, a: &apack[ks * MR..], pstride: MR * kc, panels, rows: mc, b: bp, bstride: W, nc, load, fin: fin_of(finish, m0, j0) };
                        if strip(&s, &mut c[m0 * ldc + j0..], ldc) {
                            j0 += W;
                            continue;
                        }
                    }
                    for p in 0..panels {
                        let i0 = m0 + p * MR;
                        let ap = &apack[p * MR * kc + ks * MR..p * MR * kc + (ks + kn) * MR];
                        if first_pass && p + 1 < panels {
                            prefetch_lines(&apack[(p + 1) * MR * kc + ks * MR..(p + 1) * MR * kc + (ks + kn) * MR]);
                        }
                        tile(ap, bp, c, i0, j0, nc, kn, load, fin_of(finish, i0, j0));
                    }
                    j0 += W;
                }
                ks += kn;
            }
            m0 += mblock;
        }
        k0 += KC;
    }
}

/// Ask for the cache lines of `v` ahead of their use (x86: `prefetcht0`; elsewhere nothing).
#[inline(always)]
pub(crate) fn prefetch_lines(v: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in v.chunks(16) {
        // SAFETY: a prefetch reads nothing and cannot fault; SSE is baseline on x86-64.
        unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr() as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

/// The A panels of rows m0..m0 + mc, k block k0..k0 + kc, for [`driver`]: a slice of the
/// prepacked matrix, or packed here into `apack`.
fn a_block<'s>(a: A<'s>, apack: &'s mut [f32], m0: usize, mc: usize, k0: usize, kc: usize) -> &'s [f32] {
    let panels = mc.div_ceil(MR);
    match a {
        A::Packed(ap, mp, r0) => &ap[k0 * mp + (r0 + m0) * kc..k0 * mp + (r0 + m0 + panels * MR) * kc],
        A::Rows(a, lda) => {
            pack_a(&a[m0 * lda + k0..], lda, mc, kc, &mut apack[..panels * MR * kc]);
            &apack[..panels * MR * kc]
        }
    }
}

/// A tile short of [`MR`] rows or `W` columns, for [`driver`]: the last rows straight into C
/// when `partial` can, else through a local MR × W tile (`narrow` when at most half wide).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn edge_tile<const W: usize>(
    m: usize,
    ldc: usize,
    ap: &[f32],
    bp: &[f32],
    c: &mut [f32],
    i0: usize,
    j0: usize,
    nc: usize,
    kn: usize,
    load: bool,
    fin: Fin,
    kernel: &impl Fn(usize, &[f32], &[f32], &mut [f32], usize, bool, Fin),
    narrow: &impl Fn(usize, &[f32], &[f32], &mut [f32], usize, bool, Fin),
    partial: &impl Fn(usize, usize, &[f32], &[f32], &mut [f32], usize, bool, Fin) -> bool,
) {
    let mr = (m - i0).min(MR);
    let cstart = i0 * ldc + j0;
    if nc == W && partial(mr, kn, ap, bp, &mut c[cstart..cstart + (mr - 1) * ldc + W], ldc, load, fin) {
        // The last rows (m not a multiple of MR) straight into C.
    } else {
        // Edge tile: through a local MR×W tile.
        let mut t = [[0f32; W]; MR];
        if load {
            for i in 0..mr {
                t[i][..nc].copy_from_slice(&c[cstart + i * ldc..cstart + i * ldc + nc]);
            }
        }
        let tf = t.as_flattened_mut();
        if nc <= W / 2 {
            narrow(kn, ap, bp, tf, W, load, Fin::NONE);
        } else {
            kernel(kn, ap, bp, tf, W, load, Fin::NONE);
        }
        // SAFETY: `fin.bias` points at the bias of rows i0.. (at least mr), `fin.res` at
        // the residual of this tile of C (mr rows of nc).
        unsafe { fin.apply(tf, W, mr, nc) };
        for i in 0..mr {
            c[cstart + i * ldc..cstart + i * ldc + nc].copy_from_slice(&t[i][..nc]);
        }
    }
}

/// Rows `0..mc` and columns `0..kc` of `a` (row stride `lda`) into panels of MR rows, each
/// k-major (`panel[p·MR + i]`), rows past `mc` zero. Written in order, reading MR rows side
/// by side.
fn pack_a(a: &[f32], lda: usize, mc: usize, kc: usize, out: &mut [f32]) {
    for (pi, panel) in out.chunks_exact_mut(MR * kc).enumerate() {
        let r0 = pi * MR;
        if r0 + MR <= mc {
            let rows: [&[f32]; MR] = core::array::from_fn(|i| &a[(r0 + i) * lda..(r0 + i) * lda + kc]);
            for (p, dst) in panel.chunks_exact_mut(MR).enumerate() {
                for i in 0..MR {
                    dst[i] = rows[i][p];
                }
            }
        } else {
            for (p, dst) in panel.chunks_exact_mut(MR).enumerate() {
                for (i, d) in dst.iter_mut().enumerate() {
                    *d = if r0 + i < mc { a[(r0 + i) * lda + p] } else { 0.0 };
                }
            }
        }
    }
}

/// Rows `0..kc`, columns `0..nc` of `b` (row stride `ldb`) as `kc × W`, columns past `nc` zero.
#[inline(never)]
fn pack_b<const W: usize>(b: &[f32], ldb: usize, kc: usize, nc: usize, out: &mut [f32]) {
    if nc == W {
        // Fixed-size copies: a few vector moves per row rather than a memcpy call.
        for (p, dst) in out.chunks_exact_mut(W).enumerate().take(kc) {
            let src: &[f32; W] = b[p * ldb..p * ldb + W].try_into().unwrap();
            let dst: &mut [f32; W] = dst.try_into().unwrap();
            *dst = *src;
        }
        return;
    }
    // A fixed-length loop per row (no memcpy/memset calls: edge panels come often).
    for (p, dst) in out.chunks_exact_mut(W).enumerate().take(kc) {
        let src = &b[p * ldb..p * ldb + nc];
        for (j, d) in dst.iter_mut().enumerate() {
            *d = if j < nc { src[j] } else { 0.0 };
        }
    }
}

/// Which micro-kernel family runs.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Level {
    Portable,
    Avx2,
    Avx512,
}

/// The kernel family to run: detected once at run time under std; without std, what the
/// build targets. AVX-512 runs where it is faster: not on AMD Zen 4 (family 19h), which
/// executes 512-bit FMAs as two 256-bit halves, so the 6×32 kernel has the AVX2 kernel's
/// peak (measured equal, 84–102 GFLOP/s, on convolution shapes) and wastes more of each
/// 32-wide panel at the right edge (N = 49: 10 % slower). Under std, `BURNC_GEMM_KERNEL` =
/// `avx512`, `avx2` or `portable` picks one (among those the CPU has), for A/B measurements.
#[cfg(target_arch = "x86_64")]
pub(crate) fn kernel_level() -> Level {
    #[cfg(feature = "std")]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        static STATE: AtomicU8 = AtomicU8::new(0);
        let levels = [Level::Portable, Level::Avx2, Level::Avx512];
        match STATE.load(Ordering::Relaxed) {
            s @ 1..=3 => levels[s as usize - 1],
            _ => {
                let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
                let avx512 = avx2 && std::is_x86_feature_detected!("avx512f");
                let mut l = match (avx2, avx512 && !is_amd_family_19h()) {
                    (true, true) => Level::Avx512,
                    (true, false) => Level::Avx2,
                    _ => Level::Portable,
                };
                match std::env::var("BURNC_GEMM_KERNEL").as_deref() {
                    Ok("avx512") if avx512 => l = Level::Avx512,
                    Ok("avx2") if avx2 => l = Level::Avx2,
                    Ok("portable") => l = Level::Portable,
                    _ => {}
                }
                STATE.store(l as u8 + 1, Ordering::Relaxed);
                l
            }
        }
    }
    #[cfg(not(feature = "std"))]
    {
        if cfg!(all(target_feature = "avx512f", target_feature = "avx2", target_feature = "fma")) && !is_amd_family_19h() {
            Level::Avx512
        } else if cfg!(all(target_feature = "avx2", target_feature = "fma")) {
            Level::Avx2
        } else {
            Level::Portable
        }
    }
}

/// Whether this is an AMD CPU of family 19h (Zen 3 and Zen 4; of these only Zen 4 has
/// AVX-512, with half-width FMA units).
#[cfg(target_arch = "x86_64")]
fn is_amd_family_19h() -> bool {
    use core::arch::x86_64::__cpuid;
    // CPUID leaves 0 and 1 exist on every x86-64 CPU.
    let v = __cpuid(0);
    let amd = (v.ebx, v.edx, v.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163); // "AuthenticAMD"
    let eax = __cpuid(1).eax;
    let base = (eax >> 8) & 0xf;
    let family = if base == 0xf { base + ((eax >> 20) & 0xff) } else { base };
    amd && family == 0x19
}

/// Whether this CPU runs the AVX2+FMA kernel.
#[cfg(all(test, target_arch = "x86_64"))]
fn has_avx2_fma() -> bool {
    kernel_level() != Level::Portable
}

/// The portable micro-kernel (multiply, then add).
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn kernel_portable(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool) {
    let mut acc = [[0f32; NR]; MR];
    if load {
        for i in 0..MR {
            acc[i].copy_from_slice(&c[i * ldc..i * ldc + NR]);
        }
    }
    for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)).take(kc) {
        for i in 0..MR {
            let av = ap[i];
            for j in 0..NR {
                acc[i][j] += av * bp[j];
            }
        }
    }
    for i in 0..MR {
        c[i * ldc..i * ldc + NR].copy_from_slice(&acc[i]);
    }
}

/// [`kernel_portable`], then the tile's epilogue.
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn portable_fin(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) {
    kernel_portable(kc, a, b, c, ldc, load);
    // SAFETY: the driver points `fin.bias` at MR values for full tiles.
    unsafe { fin.apply(c, ldc, MR, NR) };
}

/// The AVX2 kernels' epilogue on their accumulators (`R` rows of `V` vectors) before the
/// store: bias per row, then ReLU as `max(x, 0)` (x NaN or −0 gives +0, as `x > 0 ? x : 0`).
///
/// # Safety
/// The CPU supports AVX2; `fin.bias`, when not null, points at R values, `fin.res` at R rows
/// of 8·V values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn fin_avx2<const R: usize, const V: usize>(acc: &mut [[core::arch::x86_64::__m256; V]; R], fin: Fin) {
    use core::arch::x86_64::*;
    if !fin.bias.is_null() {
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: the caller's contract.
            let b = unsafe { _mm256_broadcast_ss(&*fin.bias.add(i)) };
            for v in row.iter_mut() {
                *v = _mm256_add_ps(*v, b);
            }
        }
    }
    if !fin.res.is_null() {
        for (i, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                // SAFETY: the caller's contract.
                *x = _mm256_add_ps(*x, unsafe { _mm256_loadu_ps(fin.res.add(i * fin.ldr + 8 * v)) });
            }
        }
    }
    if fin.relu {
        let z = _mm256_setzero_ps();
        for row in acc.iter_mut() {
            for v in row.iter_mut() {
                *v = _mm256_max_ps(*v, z);
            }
        }
    }
}

/// The AVX2+FMA micro-kernel: 12 accumulators (6 rows × 2 vectors of 8), per step two
/// vector loads of B, six broadcasts of A and twelve fused multiply-adds.
///
/// # Safety
/// The CPU supports AVX2 and FMA; the slices meet the contract stated at [`driver`] (checked here once
/// per tile, so the loop itself runs on raw pointers).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn kernel_avx2(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) {
    // SAFETY: the caller's contract (the same for all MR rows).
    unsafe { kernel_avx2_r::<MR>(kc, a, b, c, ldc, load, fin) }
}

/// [`kernel_avx2`] for the first `mr` (1 to MR − 1) rows of the tile only, straight into C:
/// the last panel of a matrix whose rows are not a multiple of MR (32 output channels: 5
/// panels and 2 rows; 64: 10 and 4). Computing only those rows costs in proportion to them
/// (fully, from 4 rows and their 8 accumulators up), where a whole 6-row tile costs 6. Each
/// element is the same chain of fused multiply-adds as in the full kernel, so the same bits.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2_rows(mr: usize, kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) -> bool {
    // SAFETY (each arm): the caller's CPU has AVX2 and FMA.
    unsafe {
        match mr {
            1 => kernel_avx2_r::<1>(kc, a, b, c, ldc, load, fin),
            2 => kernel_avx2_r::<2>(kc, a, b, c, ldc, load, fin),
            3 => kernel_avx2_r::<3>(kc, a, b, c, ldc, load, fin),
            4 => kernel_avx2_r::<4>(kc, a, b, c, ldc, load, fin),
            5 => kernel_avx2_r::<5>(kc, a, b, c, ldc, load, fin),
            _ => return false,
        }
    }
    true
}

/// [`kernel_avx2_rows`] for `R` rows; `R = MR` is [`kernel_avx2`], the full tile.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[allow(clippy::needless_range_loop)] // the row index also offsets the pointer into C
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn kernel_avx2_r<const R: usize>(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) {
    use core::arch::x86_64::*;
    assert!(R >= 1 && R <= MR && a.len() >= kc * MR && b.len() >= kc * NR && c.len() >= (R - 1) * ldc + NR);
    let cp = c.as_mut_ptr();
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    if load {
        for i in 0..R {
            acc[i][0] = _mm256_loadu_ps(cp.add(i * ldc));
            acc[i][1] = _mm256_loadu_ps(cp.add(i * ldc + 8));
        }
    }
    let (mut ap, mut bp) = (a.as_ptr(), b.as_ptr());
    for _ in 0..kc {
        // Packed A is read once per B panel, in order; the first time from memory (a CNN's
        // last layers have megabytes of weights), where the hardware prefetcher, stopping at
        // every 4 KiB page, left the kernel waiting.
        _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_add(PF_A) as *const i8);
        let b0 = _mm256_loadu_ps(bp);
        let b1 = _mm256_loadu_ps(bp.add(8));
        for i in 0..R {
            let av = _mm256_broadcast_ss(&*ap.add(i));
            acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
        }
        ap = ap.add(MR);
        bp = bp.add(NR);
    }
    if !fin.is_none() {
        // SAFETY: the driver points `fin.bias` at the tile's R rows' values.
        unsafe { fin_avx2::<R, 2>(&mut acc, fin) };
    }
    for i in 0..R {
        _mm256_storeu_ps(cp.add(i * ldc), acc[i][0]);
        _mm256_storeu_ps(cp.add(i * ldc + 8), acc[i][1]);
    }
}

/// [`kernel_avx2`] for the first NR/2 columns only (6 accumulators): edge panels.
///
/// # Safety
/// As [`kernel_avx2`].
#[allow(clippy::needless_range_loop)] // the row index also offsets the pointer into C
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn kernel_avx2_narrow(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) {
    use core::arch::x86_64::*;
    assert!(a.len() >= kc * MR && b.len() >= kc * NR && c.len() >= (MR - 1) * ldc + NR / 2);
    let cp = c.as_mut_ptr();
    let mut acc = [_mm256_setzero_ps(); MR];
    if load {
        for i in 0..MR {
            acc[i] = _mm256_loadu_ps(cp.add(i * ldc));
        }
    }
    let (mut ap, mut bp) = (a.as_ptr(), b.as_ptr());
    for _ in 0..kc {
        let b0 = _mm256_loadu_ps(bp);
        for i in 0..MR {
            acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(&*ap.add(i)), b0, acc[i]);
        }
        ap = ap.add(MR);
        bp = bp.add(NR);
    }
    if !fin.is_none() {
        let mut rows: [[__m256; 1]; MR] = core::array::from_fn(|i| [acc[i]]);
        // SAFETY: the driver points `fin.bias` at MR values.
        unsafe { fin_avx2::<MR, 1>(&mut rows, fin) };
        acc = core::array::from_fn(|i| rows[i][0]);
    }
    for i in 0..MR {
        _mm256_storeu_ps(cp.add(i * ldc), acc[i]);
    }
}

/// The AVX-512 micro-kernel for the first `R` rows and `V` vectors of 16 columns of an MR × 32
/// tile (`R = MR, V = 2`: the full tile, 12 accumulators; `V = 1`: edge panels of at most 16
/// columns; `R < MR`: the last rows of a matrix whose rows are not a multiple of MR, straight
/// into C), with the tile's epilogue applied in registers before the one store, as the AVX2
/// family does. Each element is the same chain of fused multiply-adds in k order whatever R
/// and V, then the same bias, residual and ReLU, so the same bits.
///
/// # Safety
/// The CPU supports AVX-512F; the slices meet the contract stated at [`driver`] for R rows
/// and 16·V columns (checked here once per tile, so the loop itself runs on raw pointers);
/// `fin.bias`, when not null, points at R values and `fin.res` at R rows of 16·V, `fin.ldr`
/// apart.
#[allow(clippy::needless_range_loop)] // the row index also offsets the pointer into C
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn kernel_avx512_r<const R: usize, const V: usize>(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) {
    use core::arch::x86_64::*;
    assert!(R >= 1 && R <= MR && (V == 1 || V == 2) && a.len() >= kc * MR && b.len() >= kc * NR512 && c.len() >= (R - 1) * ldc + 16 * V);
    let cp = c.as_mut_ptr();
    // SAFETY (all three): the asserts above; the CPU has AVX-512F.
    let mut acc = unsafe { acc_avx512::<R, V>(cp, ldc, load) };
    let (mut ap, mut bp) = (a.as_ptr(), b.as_ptr());
    for _ in 0..kc {
        // As in the AVX2 kernel: packed A streams from memory the first time it is used.
        _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_add(PF_A) as *const i8);
        let bv: [__m512; V] = core::array::from_fn(|v| unsafe { _mm512_loadu_ps(bp.add(16 * v)) });
        unsafe { step_avx512::<R, V>(&mut acc, 0, ap, &bv) };
        ap = ap.add(MR);
        bp = bp.add(NR512);
    }
    unsafe { finish_avx512(&mut acc, cp, ldc, fin) };
}

/// Two row panels (12 rows) by 16 columns: the 32-wide tile's twelve accumulators for an
/// edge panel of 16 to 20 columns (N = 49: one full 32-wide panel, then 16 + 1; the 6 × 16
/// form of [`kernel_avx512_r`] has only six chains and waits on the FMA latency). `a0`, `a1`:
/// the two panels' k steps (`kc · MR` each); `b`: the packed panel, rows [`NR512`] apart; `c`:
/// 12 rows of 16, `ldc` apart. The same chains, epilogue and so bits as the other forms.
///
/// # Safety
/// The CPU supports AVX-512F; `fin` as [`kernel_avx512_r`]'s for 12 rows of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512_pair16(kc: usize, a0: &[f32], a1: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) {
    use core::arch::x86_64::*;
    assert!(kc > 0 && a0.len() >= kc * MR && a1.len() >= kc * MR && b.len() >= (kc - 1) * NR512 + 16 && c.len() >= (2 * MR - 1) * ldc + 16);
    let cp = c.as_mut_ptr();
    // SAFETY (all): the asserts above; the CPU has AVX-512F.
    let mut acc = unsafe { acc_avx512::<{ 2 * MR }, 1>(cp, ldc, load) };
    let (mut p0, mut p1, mut bp) = (a0.as_ptr(), a1.as_ptr(), b.as_ptr());
    for _ in 0..kc {
        _mm_prefetch::<_MM_HINT_T0>(p0.wrapping_add(PF_A) as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(p1.wrapping_add(PF_A) as *const i8);
        let bv = [unsafe { _mm512_loadu_ps(bp) }];
        unsafe { step_avx512::<{ 2 * MR }, 1>(&mut acc, 0, p0, &bv) };
        unsafe { step_avx512::<{ 2 * MR }, 1>(&mut acc, MR, p1, &bv) };
        p0 = p0.add(MR);
        p1 = p1.add(MR);
        bp = bp.add(NR512);
    }
    unsafe { finish_avx512(&mut acc, cp, ldc, fin) };
}

/// The accumulators of an R × 16·V tile: C's values when `load`, else zeros.
///
/// # Safety
/// AVX-512F; `cp` points at R rows of 16·V values, `ldc` apart, when `load`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn acc_avx512<const R: usize, const V: usize>(cp: *const f32, ldc: usize, load: bool) -> [[core::arch::x86_64::__m512; V]; R] {
    use core::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    if load {
        for (i, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                // SAFETY: the caller's contract.
                *x = unsafe { _mm512_loadu_ps(cp.add(i * ldc + 16 * v)) };
            }
        }
    }
    acc
}

/// One k step for the MR rows `row0..row0 + MR` of the tile (at most R): A's MR values of the
/// step at `ap` times B's vectors `bv`, into their chains.
///
/// # Safety
/// AVX-512F; `ap` points at MR values (fewer where R − row0 < MR: only those are read).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn step_avx512<const R: usize, const V: usize>(acc: &mut [[core::arch::x86_64::__m512; V]; R], row0: usize, ap: *const f32, bv: &[core::arch::x86_64::__m512; V]) {
    use core::arch::x86_64::*;
    for i in 0..MR.min(R - row0) {
        // SAFETY: the caller's contract.
        let av = _mm512_set1_ps(unsafe { *ap.add(i) });
        for v in 0..V {
            acc[row0 + i][v] = _mm512_fmadd_ps(av, bv[v], acc[row0 + i][v]);
        }
    }
}

/// A tile's bias, residual and ReLU (those `fin` has), then its store into C.
///
/// # Safety
/// AVX-512F; `cp` points at R rows of 16·V values, `ldc` apart; `fin.bias`, when not null, at
/// R values, `fin.res` at R rows of 16·V, `fin.ldr` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn finish_avx512<const R: usize, const V: usize>(acc: &mut [[core::arch::x86_64::__m512; V]; R], cp: *mut f32, ldc: usize, fin: Fin) {
    use core::arch::x86_64::*;
    // SAFETY (the reads and the stores): the caller's contract.
    if !fin.bias.is_null() {
        for (i, row) in acc.iter_mut().enumerate() {
            let bias = _mm512_set1_ps(unsafe { *fin.bias.add(i) });
            for x in row.iter_mut() {
                *x = _mm512_add_ps(*x, bias);
            }
        }
    }
    if !fin.res.is_null() {
        for (i, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                *x = _mm512_add_ps(*x, unsafe { _mm512_loadu_ps(fin.res.add(i * fin.ldr + 16 * v)) });
            }
        }
    }
    if fin.relu {
        let z = _mm512_setzero_ps();
        for row in acc.iter_mut() {
            for x in row.iter_mut() {
                *x = _mm512_max_ps(*x, z);
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (v, x) in row.iter().enumerate() {
            unsafe { _mm512_storeu_ps(cp.add(i * ldc + 16 * v), *x) };
        }
    }
}

/// [`Strip`] for the AVX-512 family, whose B panels are 32 wide: up to [`STRIP_MAX`] columns
/// as the AVX2 strip does them (an AVX-512 CPU has AVX2 and FMA); 16 to 16 + STRIP_MAX
/// columns as 12 × 16 tiles ([`kernel_avx512_pair16`]; a panel left over or short of rows
/// with the 16-wide [`kernel_avx512_r`]) and the strip for the rest. Other widths: false (the
/// driver's edge tiles).
///
/// # Safety
/// As [`strip_avx2`], on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn strip_avx512(s: &Strip<'_>, c: &mut [f32], ldc: usize) -> bool {
    if s.nc <= STRIP_MAX {
        // SAFETY: the caller's contract; AVX-512F CPUs have AVX2 and FMA (`kernel_level`).
        return unsafe { strip_avx2(s, c, ldc) };
    }
    if s.nc < 16 || s.nc > 16 + STRIP_MAX {
        return false;
    }
    let (kn, ps) = (s.kn, s.pstride);
    let mut p = 0;
    while p < s.panels {
        let (r0, a0) = (p * MR, &s.a[p * ps..]);
        let rows = (s.rows - r0).min(MR);
        let fin = s.fin.at(r0, 0);
        let c = &mut c[r0 * ldc..];
        // SAFETY (each kernel): the caller's contract covers rows r0.. of the strip's C,
        // bias and residual; the kernels check their slices.
        if p + 1 < s.panels && s.rows >= r0 + 2 * MR {
            unsafe { kernel_avx512_pair16(kn, a0, &s.a[(p + 1) * ps..], s.b, c, ldc, s.load, fin) };
            p += 2;
            continue;
        }
        unsafe {
            if !kernel_avx512_rows::<1>(rows, kn, a0, s.b, c, ldc, s.load, fin) {
                kernel_avx512_r::<MR, 1>(kn, a0, s.b, c, ldc, s.load, fin);
            }
        }
        p += 1;
    }
    if s.nc > 16 {
        let rest = Strip { b: &s.b[16..], nc: s.nc - 16, fin: s.fin.at(0, 16), ..*s };
        // SAFETY: the caller's contract, 16 columns on.
        unsafe { strip_avx2(&rest, &mut c[16..], ldc) };
    }
    true
}

/// [`kernel_avx512_r`] for the first `mr` (1 to MR − 1) rows of a tile 16·V wide, straight
/// into C (see [`kernel_avx2_rows`]).
///
/// # Safety
/// The CPU supports AVX-512F; as [`kernel_avx512_r`] for `mr` rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512_rows<const V: usize>(mr: usize, kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) -> bool {
    // SAFETY (each arm): the caller's contract.
    unsafe {
        match mr {
            1 => kernel_avx512_r::<1, V>(kc, a, b, c, ldc, load, fin),
            2 => kernel_avx512_r::<2, V>(kc, a, b, c, ldc, load, fin),
            3 => kernel_avx512_r::<3, V>(kc, a, b, c, ldc, load, fin),
            4 => kernel_avx512_r::<4, V>(kc, a, b, c, ldc, load, fin),
            5 => kernel_avx512_r::<5, V>(kc, a, b, c, ldc, load, fin),
            _ => return false,
        }
    }
    true
}

/// The blocked loops with the NEON micro-kernels (aarch64, where NEON is baseline): the
/// 6×16 tile as 24 accumulators of 4 lanes, its 8-wide form for edge panels and its
/// fewer-rows forms for a last partial row panel. The driver's edge tiles do the last few
/// columns (no strip kernels).
#[cfg(target_arch = "aarch64")]
#[allow(clippy::too_many_arguments)]
fn driver_neon(m: usize, k: usize, n: usize, a: A<'_>, b: Src<'_>, c: &mut [f32], ldc: usize, apack: &mut [f32], bpack: &mut [f32], done: Done<'_>) {
    driver::<NR>(
        m,
        k,
        n,
        a,
        b,
        c,
        ldc,
        apack,
        bpack,
        // SAFETY (all three closures): the driver hands the kernels slices meeting its
        // contract and points `fin` at the tile's rows; the kernels check the slice sizes.
        |kc, a, b, c, ldc, load, fin| unsafe { kernel_neon_r::<MR, 4>(kc, a, b, c, ldc, load, fin) },
        |kc, a, b, c, ldc, load, fin| unsafe { kernel_neon_r::<MR, 2>(kc, a, b, c, ldc, load, fin) },
        |mr, kc, a, b, c, ldc, load, fin| unsafe { kernel_neon_rows(mr, kc, a, b, c, ldc, load, fin) },
        no_strip,
        done,
    );
}

/// `acc + b · a[i]` fused, with `a[i]` lane `i` of the step's A values (`lo`: rows 0–3,
/// `hi`: rows 4–5); `i` is a constant once the kernel's row loop is unrolled.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn fma_row(acc: core::arch::aarch64::float32x4_t, b: core::arch::aarch64::float32x4_t, lo: core::arch::aarch64::float32x4_t, hi: core::arch::aarch64::float32x2_t, i: usize) -> core::arch::aarch64::float32x4_t {
    use core::arch::aarch64::*;
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        match i {
            0 => vfmaq_laneq_f32::<0>(acc, b, lo),
            1 => vfmaq_laneq_f32::<1>(acc, b, lo),
            2 => vfmaq_laneq_f32::<2>(acc, b, lo),
            3 => vfmaq_laneq_f32::<3>(acc, b, lo),
            4 => vfmaq_lane_f32::<0>(acc, b, hi),
            _ => vfmaq_lane_f32::<1>(acc, b, hi),
        }
    }
}

/// The NEON micro-kernel for the first `R` rows and `V` vectors of 4 columns of an MR × 16
/// tile (`R = MR, V = 4`: the full tile, 24 accumulators; `V = 2`: edge panels of at most 8
/// columns; `R < MR`: the last rows of a matrix whose rows are not a multiple of MR, straight
/// into C). Per k step: B as V vector loads, A's six values as one 4-lane and one 2-lane load,
/// R·V fused multiply-adds by lane. Each element is the same chain of fused multiply-adds in k
/// order as in the AVX2 and AVX-512 kernels, then the same bias, residual and ReLU, so the
/// same bits whatever the blocking (and the x86 SIMD kernels' bits).
///
/// # Safety
/// The slices meet the contract stated at [`driver`] for R rows and 4·V columns (checked here
/// once per tile, so the loop itself runs on raw pointers); `fin.bias`, when not null, points
/// at R values and `fin.res` at R rows of 4·V, `fin.ldr` apart.
#[allow(clippy::needless_range_loop)] // the row index also offsets the pointer into C
#[cfg(target_arch = "aarch64")]
#[inline]
unsafe fn kernel_neon_r<const R: usize, const V: usize>(kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) {
    use core::arch::aarch64::*;
    assert!(R >= 1 && R <= MR && V >= 1 && V <= NR / 4 && a.len() >= kc * MR && b.len() >= kc * NR && c.len() >= (R - 1) * ldc + 4 * V);
    let cp = c.as_mut_ptr();
    let mut acc = [[vdupq_n_f32(0.0); V]; R];
    if load {
        for i in 0..R {
            for v in 0..V {
                acc[i][v] = vld1q_f32(cp.add(i * ldc + 4 * v));
            }
        }
    }
    let (mut ap, mut bp) = (a.as_ptr(), b.as_ptr());
    for _ in 0..kc {
        let bv: [float32x4_t; V] = core::array::from_fn(|v| vld1q_f32(bp.add(4 * v)));
        // Rows 4 and 5 as a 2-lane load: a 4-lane one would read past the last step's panel.
        let lo = vld1q_f32(ap);
        let hi = vld1_f32(ap.add(4));
        for i in 0..R {
            for v in 0..V {
                acc[i][v] = fma_row(acc[i][v], bv[v], lo, hi, i);
            }
        }
        ap = ap.add(MR);
        bp = bp.add(NR);
    }
    if !fin.bias.is_null() {
        for (i, row) in acc.iter_mut().enumerate() {
            let bias = vdupq_n_f32(*fin.bias.add(i));
            for x in row.iter_mut() {
                *x = vaddq_f32(*x, bias);
            }
        }
    }
    if !fin.res.is_null() {
        for (i, row) in acc.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                *x = vaddq_f32(*x, vld1q_f32(fin.res.add(i * fin.ldr + 4 * v)));
            }
        }
    }
    if fin.relu {
        // `x > 0 ? x : 0` by lane (FMAX would keep a NaN, and x86's max_ps(x, 0) gives 0).
        let z = vdupq_n_f32(0.0);
        for row in acc.iter_mut() {
            for x in row.iter_mut() {
                *x = vbslq_f32(vcgtq_f32(*x, z), *x, z);
            }
        }
    }
    for i in 0..R {
        for v in 0..V {
            vst1q_f32(cp.add(i * ldc + 4 * v), acc[i][v]);
        }
    }
}

/// [`kernel_neon_r`] for the first `mr` (1 to MR − 1) rows of a full-width tile, straight
/// into C (as the AVX2 family does: the cost in proportion to the rows).
///
/// # Safety
/// As [`kernel_neon_r`] for `mr` rows.
#[cfg(target_arch = "aarch64")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_neon_rows(mr: usize, kc: usize, a: &[f32], b: &[f32], c: &mut [f32], ldc: usize, load: bool, fin: Fin) -> bool {
    // SAFETY (each arm): the caller's contract.
    unsafe {
        match mr {
            1 => kernel_neon_r::<1, 4>(kc, a, b, c, ldc, load, fin),
            2 => kernel_neon_r::<2, 4>(kc, a, b, c, ldc, load, fin),
            3 => kernel_neon_r::<3, 4>(kc, a, b, c, ldc, load, fin),
            4 => kernel_neon_r::<4, 4>(kc, a, b, c, ldc, load, fin),
            5 => kernel_neon_r::<5, 4>(kc, a, b, c, ldc, load, fin),
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    use crate::kernels::test_rng::rnd;

    /// Against a plain f64 triple loop, over edge sizes (m, n not multiples of the tile, k
    /// over several blocks, m over several row blocks) and strided operands.
    #[test]
    fn matches_naive() {
        for &(m, k, n) in &[(1, 1, 1), (6, 16, 16), (7, 3, 17), (34, 34, 784), (13, 600, 49), (130, 257, 33), (250, 40, 5)] {
            let (lda, ldb, ldc) = (k + 3, n + 5, n + 2);
            let a = rnd(m * lda, 1);
            let b = rnd(k * ldb, 2);
            let mut c = vec![f32::NAN; m * ldc];
            let mut scratch = vec![f32::NAN; scratch_len(m, k)];
            sgemm_packed(m, k, n, &a, lda, &b, ldb, &mut c, ldc, &mut scratch);
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| a[i * lda + p] as f64 * b[p * ldb + j] as f64).sum();
                    let got = c[i * ldc + j];
                    assert!((got as f64 - want).abs() < 1e-4 * (k as f64).sqrt(), "{m}x{k}x{n} at {i},{j}: {got} vs {want}");
                }
            }
            // Columns between n and ldc untouched (still NaN).
            if m > 0 {
                assert!(c[n].is_nan() && c[n + 1].is_nan());
            }
        }
    }

    /// Splitting the columns (as a convolution's tiles do) gives the same bits as one call.
    #[test]
    fn column_splits_keep_the_bits() {
        let (m, k, n) = (20, 300, 100);
        let a = rnd(m * k, 3);
        let b = rnd(k * n, 4);
        let mut scratch = vec![0f32; scratch_len(m, k)];
        let mut whole = vec![0f32; m * n];
        sgemm_packed(m, k, n, &a, k, &b, n, &mut whole, n, &mut scratch);
        let mut parts = vec![0f32; m * n];
        for (c0, c1) in [(0, 37), (37, 38), (38, 100)] {
            sgemm_packed(m, k, c1 - c0, &a, k, &b[c0..], n, &mut parts[c0..], n, &mut scratch);
        }
        assert!(whole.iter().zip(&parts).all(|(x, y)| x.to_bits() == y.to_bits()));
    }

    /// Packing ahead of time gives the bits of packing per call, with and without the pool.
    #[test]
    fn prepacked_gives_the_bits_of_runtime_packing() {
        for &(m, k, n) in &[(7, 5, 9), (130, 300, 40), (250, 513, 70), (6, 1, 16)] {
            let a = rnd(m * k, 7);
            let b = rnd(k * n, 8);
            let mut want = vec![0f32; m * n];
            sgemm_packed(m, k, n, &a, k, &b, n, &mut want, n, &mut vec![0f32; scratch_len(m, k)]);
            let mut ap = vec![f32::NAN; packed_len(m, k)];
            pack_weights(m, k, &a, k, &mut ap);
            let mut c = vec![f32::NAN; m * n];
            sgemm_prepacked(m, k, n, &ap, &b, n, &mut c, n, &mut vec![0f32; prepacked_scratch_len(k)]);
            assert!(want.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()), "{m}x{k}x{n}");
        }
    }

    /// Every kernel family this CPU runs, through the whole driver (edges, k blocks and
    /// sub-blocks, runtime-packed and prepacked A), against an f64 reference; the AVX2 and
    /// AVX-512 kernels give the same bits (the same chain of fused multiply-adds).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_kernel_level_matches_naive() {
        let mut levels = vec![Level::Portable];
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            levels.push(Level::Avx2);
            if std::is_x86_feature_detected!("avx512f") {
                levels.push(Level::Avx512);
            }
        }
        let shapes = [(1, 1, 1), (6, 2, 32), (7, 3, 17), (12, 1, 40), (13, 600, 49), (34, 34, 784), (130, 257, 33), (250, 40, 5), (6, 300, 64), (500, 70, 31)];
        for &(m, k, n) in &shapes {
            let (lda, ldb, ldc) = (k + 1, n + 3, n + 2);
            let a = rnd(m * lda, 11);
            let b = rnd(k * ldb, 12);
            let mut ap = vec![f32::NAN; packed_len(m, k)];
            pack_weights(m, k, &a, lda, &mut ap);
            let mut outs: Vec<Vec<f32>> = Vec::new();
            for &level in &levels {
                for packed in [false, true] {
                    let mut c = vec![f32::NAN; m * ldc];
                    if packed {
                        let mut scratch = vec![f32::NAN; prepacked_scratch_len(k)];
                        run_at(level, m, k, n, A::Packed(&ap, m.div_ceil(MR) * MR, 0), Src::Rows(&b, ldb), &mut c, ldc, &mut scratch, None);
                    } else {
                        let mut scratch = vec![f32::NAN; scratch_len(m, k)];
                        run_at(level, m, k, n, A::Rows(&a, lda), Src::Rows(&b, ldb), &mut c, ldc, &mut scratch, None);
                    }
                    for i in 0..m {
                        for j in 0..n {
                            let want: f64 = (0..k).map(|p| a[i * lda + p] as f64 * b[p * ldb + j] as f64).sum();
                            let got = c[i * ldc + j];
                            assert!((got as f64 - want).abs() < 1e-4 * (k as f64).sqrt(), "{level:?} {m}x{k}x{n} at {i},{j}: {got} vs {want}");
                        }
                        assert!(c[i * ldc + n].is_nan(), "{level:?} {m}x{k}x{n}: wrote past column n");
                    }
                    if level != Level::Portable {
                        outs.push(c);
                    }
                }
            }
            for o in &outs[1.min(outs.len())..] {
                assert!(o.iter().zip(&outs[0]).all(|(x, y)| x.to_bits() == y.to_bits()), "{m}x{k}x{n}: SIMD kernels disagree");
            }
        }
    }

    /// The strip kernels (n mod 16 ≤ 4; with AVX-512 also the 16 + 0…4 edge of its 32-wide
    /// panels, as 12 × 16 tiles) give the bits of the AVX2 kernels and of the edge tiles, with
    /// and without the bias + ReLU, on partial row panels and several k blocks, whatever the
    /// scratch's size.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn few_column_orders_keep_the_bits() {
        if !(std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")) {
            return;
        }
        let avx512 = std::is_x86_feature_detected!("avx512f");
        for &(m, k, n) in &[(250, 600, 49), (13, 300, 50), (37, 257, 51), (100, 40, 52), (7, 520, 196), (250, 600, 20), (6, 3, 1), (499, 1, 4), (12, 300, 48), (25, 70, 36), (6, 70, 17), (18, 2, 16)] {
            let (ldb, ldc) = (n + 3, n + 2);
            let a = rnd(m * k, 21);
            let b = rnd(k * ldb, 22);
            let bias = rnd(m, 23);
            let res = rnd(m * ldc, 24);
            let mut ap = vec![f32::NAN; packed_len(m, k)];
            pack_weights(m, k, &a, k, &mut ap);
            let posts = [None, Some(Post { bias: Some(&bias[..]), residual: Some(&res[..]), relu: true }), Some(Post { bias: None, residual: Some(&res[..]), relu: false })];
            for post in posts {
                let mut outs = Vec::new();
                let mut levels = vec![Level::Avx2];
                if avx512 {
                    levels.push(Level::Avx512);
                }
                for &level in &levels {
                    for scratch in [prepacked_scratch_len(k), 3 * prepacked_scratch_len(k)] {
                        let mut c = vec![f32::NAN; m * ldc];
                        run_at(level, m, k, n, A::Packed(&ap, m.div_ceil(MR) * MR, 0), Src::Rows(&b, ldb), &mut c, ldc, &mut vec![f32::NAN; scratch], post);
                        for i in 0..m {
                            for j in 0..n {
                                let mut want: f64 = (0..k).map(|p| a[i * k + p] as f64 * b[p * ldb + j] as f64).sum();
                                if let Some(p) = post {
                                    want += p.bias.map_or(0.0, |b| b[i] as f64) + res[i * ldc + j] as f64;
                                    if p.relu {
                                        want = want.max(0.0);
                                    }
                                }
                                let got = c[i * ldc + j] as f64;
                                assert!((got - want).abs() < 1e-4 * (k as f64).sqrt(), "{level:?} {m}x{k}x{n} at {i},{j}: {got} vs {want}");
                            }
                            assert!(c[i * ldc + n].is_nan(), "{m}x{k}x{n}: wrote past column n");
                        }
                        outs.push(c);
                    }
                }
                for o in &outs[1..] {
                    assert!(o.iter().zip(&outs[0]).all(|(x, y)| x.to_bits() == y.to_bits()), "{m}x{k}x{n}: orders disagree");
                }
            }
        }
    }

    /// Throughput of each kernel level on convolution-like shapes (prepacked A):
    /// `cargo test -p burnc-runtime --release --features std -- --ignored --nocapture gflops`.
    #[cfg(target_arch = "x86_64")]
    #[test]
    #[ignore]
    fn gflops() {
        let mut levels = vec![Level::Avx2];
        if std::is_x86_feature_detected!("avx512f") {
            levels.push(Level::Avx512);
        }
        for &(m, k, n) in &[(64, 576, 3136), (128, 1152, 784), (256, 2304, 196), (512, 4608, 49), (32, 1152, 784), (256, 64, 3136), (24, 216, 784)] {
            let a = rnd(m * k, 1);
            let b = rnd(k * n, 2);
            let mut ap = vec![0f32; packed_len(m, k)];
            pack_weights(m, k, &a, k, &mut ap);
            let mut c = vec![0f32; m * n];
            let mut scratch = vec![0f32; prepacked_scratch_len(k)];
            let reps = (2e9 / (m * k * n) as f64).ceil() as usize;
            let mut line = std::format!("{m}x{k}x{n}:");
            for &level in &levels {
                let mut best = f64::MAX;
                for _ in 0..3 {
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        run_at(level, m, k, n, A::Packed(&ap, m.div_ceil(MR) * MR, 0), Src::Rows(&b, n), &mut c, n, &mut scratch, None);
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                line += &std::format!(" {level:?} {:.1}", 2.0 * (m * k * n * reps) as f64 / best / 1e9);
            }
            std::println!("{line} GFLOP/s (default: {:?})", kernel_level());
        }
    }

    /// Each NEON kernel form (all row counts, both widths, continuing C or not, each
    /// epilogue) gives the bits of a scalar chain of fused multiply-adds in k order followed by
    /// the epilogue, and the portable kernel's values up to FMA rounding.
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn neon_kernels_match_fused_reference() {
        let kc = 37;
        let a = rnd(kc * MR, 31);
        let b = rnd(kc * NR, 32);
        let bias = rnd(MR, 33);
        let res = rnd(MR * NR, 34);
        let start = rnd(MR * NR, 35);
        let fins = [
            Fin::NONE,
            Fin { bias: bias.as_ptr(), res: core::ptr::null(), ldr: 0, relu: false },
            Fin { bias: core::ptr::null(), res: res.as_ptr(), ldr: NR, relu: false },
            Fin { bias: core::ptr::null(), res: core::ptr::null(), ldr: 0, relu: true },
            Fin { bias: bias.as_ptr(), res: res.as_ptr(), ldr: NR, relu: true },
        ];
        for fin in fins {
            for load in [false, true] {
                for rows in 1..=MR {
                    for width in [8, 16] {
                        // The kernel's tile, NaN past its rows and columns (which it must not write).
                        let mut c = vec![f32::NAN; MR * NR];
                        if load {
                            for i in 0..rows {
                                c[i * NR..i * NR + width].copy_from_slice(&start[i * NR..i * NR + width]);
                            }
                        }
                        // SAFETY: the slices have the kernels' sizes; `fin` points at MR rows.
                        unsafe {
                            match (rows, width) {
                                (MR, 16) => kernel_neon_r::<MR, 4>(kc, &a, &b, &mut c, NR, load, fin),
                                (MR, 8) => kernel_neon_r::<MR, 2>(kc, &a, &b, &mut c, NR, load, fin),
                                (r, 16) => assert!(kernel_neon_rows(r, kc, &a, &b, &mut c, NR, load, fin)),
                                (1, 8) => kernel_neon_r::<1, 2>(kc, &a, &b, &mut c, NR, load, fin),
                                (2, 8) => kernel_neon_r::<2, 2>(kc, &a, &b, &mut c, NR, load, fin),
                                (3, 8) => kernel_neon_r::<3, 2>(kc, &a, &b, &mut c, NR, load, fin),
                                (4, 8) => kernel_neon_r::<4, 2>(kc, &a, &b, &mut c, NR, load, fin),
                                _ => kernel_neon_r::<5, 2>(kc, &a, &b, &mut c, NR, load, fin),
                            }
                        }
                        // The portable kernel on a full tile, with the same epilogue.
                        let mut p = start.clone();
                        portable_fin(kc, &a, &b, &mut p, NR, load, fin);
                        for i in 0..MR {
                            for j in 0..NR {
                                let got = c[i * NR + j];
                                if i >= rows || j >= width {
                                    assert!(got.is_nan(), "rows {rows} width {width}: wrote ({i}, {j})");
                                    continue;
                                }
                                let mut x = if load { start[i * NR + j] } else { 0.0 };
                                for q in 0..kc {
                                    x = a[q * MR + i].mul_add(b[q * NR + j], x);
                                }
                                if !fin.bias.is_null() {
                                    x += bias[i];
                                }
                                if !fin.res.is_null() {
                                    x += res[i * NR + j];
                                }
                                if fin.relu && !(x > 0.0) {
                                    x = 0.0;
                                }
                                assert_eq!(got.to_bits(), x.to_bits(), "rows {rows} width {width} load {load} at ({i}, {j})");
                                assert!((got - p[i * NR + j]).abs() < 1e-4, "rows {rows} width {width}: NEON {got} vs portable {}", p[i * NR + j]);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The NEON driver (edge tiles, partial row panels, k blocks and sub-blocks, runtime-packed
    /// and prepacked A, each epilogue) against an f64 reference and the portable driver; the
    /// bits do not depend on the scratch's size or on packing A ahead of time.
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn neon_driver_matches_naive_and_portable() {
        let shapes = [(1, 1, 1), (6, 2, 32), (7, 3, 17), (12, 1, 40), (13, 600, 49), (34, 34, 100), (130, 257, 33), (250, 40, 5), (6, 300, 64), (500, 70, 31)];
        for &(m, k, n) in &shapes {
            let (lda, ldb, ldc) = (k + 1, n + 3, n + 2);
            let a = rnd(m * lda, 41);
            let b = rnd(k * ldb, 42);
            let bias = rnd(m, 43);
            let res = rnd(m * ldc, 44);
            let mut ap = vec![f32::NAN; packed_len(m, k)];
            pack_weights(m, k, &a, lda, &mut ap);
            let posts = [None, Some(Post { bias: Some(&bias[..]), residual: None, relu: false }), Some(Post { bias: None, residual: Some(&res[..]), relu: true }), Some(Post { bias: Some(&bias[..]), residual: Some(&res[..]), relu: true })];
            for post in posts {
                let mut outs: Vec<Vec<f32>> = Vec::new();
                // Runtime packing; prepacked A with the smallest scratch and with room for more k steps.
                for (packed, extra) in [(false, 1), (true, 1), (true, 3)] {
                    let mut c = vec![f32::NAN; m * ldc];
                    if packed {
                        let mut scratch = vec![f32::NAN; extra * prepacked_scratch_len(k)];
                        run(m, k, n, A::Packed(&ap, m.div_ceil(MR) * MR, 0), Src::Rows(&b, ldb), &mut c, ldc, &mut scratch, post);
                    } else {
                        let mut scratch = vec![f32::NAN; scratch_len(m, k)];
                        run(m, k, n, A::Rows(&a, lda), Src::Rows(&b, ldb), &mut c, ldc, &mut scratch, post);
                    }
                    outs.push(c);
                }
                // The portable driver, for comparison up to FMA rounding.
                let mut pc = vec![f32::NAN; m * ldc];
                let mut scratch = vec![f32::NAN; scratch_len(m, k)];
                let (apack, bpack) = scratch.split_at_mut(a_space(m, k, A::Rows(&a, lda)));
                driver::<NR>(m, k, n, A::Rows(&a, lda), Src::Rows(&b, ldb), &mut pc, ldc, apack, bpack, portable_fin, portable_fin, no_partial, no_strip, post);
                let c = &outs[0];
                for i in 0..m {
                    for j in 0..n {
                        let mut want: f64 = (0..k).map(|p| a[i * lda + p] as f64 * b[p * ldb + j] as f64).sum();
                        if let Some(p) = post {
                            want += p.bias.map_or(0.0, |b| b[i] as f64) + p.residual.map_or(0.0, |r| r[i * ldc + j] as f64);
                            if p.relu {
                                want = want.max(0.0);
                            }
                        }
                        let got = c[i * ldc + j];
                        let tol = 1e-4 * (k as f64).sqrt();
                        assert!((got as f64 - want).abs() < tol, "{m}x{k}x{n} at {i},{j}: {got} vs {want}");
                        assert!((got - pc[i * ldc + j]).abs() as f64 <= 2.0 * tol, "{m}x{k}x{n} at {i},{j}: NEON {got} vs portable {}", pc[i * ldc + j]);
                    }
                    assert!(c[i * ldc + n].is_nan(), "{m}x{k}x{n}: wrote past column n");
                }
                for o in &outs[1..] {
                    assert!(o.iter().zip(&outs[0]).all(|(x, y)| x.to_bits() == y.to_bits()), "{m}x{k}x{n}: blockings disagree");
                }
            }
        }
    }

    /// The portable kernel agrees with the dispatched one up to FMA rounding.
    #[test]
    fn portable_kernel_agrees() {
        let kc = 50;
        let a = rnd(kc * MR, 5);
        let b = rnd(kc * NR, 6);
        let mut x = [0.5f32; MR * NR];
        let mut y = x;
        kernel_portable(kc, &a, &b, &mut x, NR, true);
        #[cfg(target_arch = "x86_64")]
        if has_avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA; the slices are the kernel's sizes.
            unsafe { kernel_avx2(kc, &a, &b, &mut y, NR, true, Fin::NONE) };
        } else {
            kernel_portable(kc, &a, &b, &mut y, NR, true);
        }
        #[cfg(not(target_arch = "x86_64"))]
        kernel_portable(kc, &a, &b, &mut y, NR, true);
        for i in 0..MR * NR {
            assert!((x[i] - y[i]).abs() < 1e-4);
        }
    }
}
