//! Max, average and Lp pooling over [`Window3`] (N <= 3 spatial dims), one plane per
//! (batch, channel). Positions in the padding are skipped.
use super::window::Window3;
use crate::elem::Elem;
#[cfg(target_arch = "x86_64")]
use super::{
    has_avx2,
    lanes::{add_f64, even, odd, shift_in},
};

/// Visit the in-range input offsets of output position (d, h, w), row-major within a plane.
#[inline]
fn for_window(win: &Window3, o: [usize; 3], mut f: impl FnMut(usize, [usize; 3])) {
    let [_, ih, iw] = win.input;
    for kd in 0..win.kernel[0] {
        let zd = win.coord(0, o[0], kd);
        if zd < 0 || zd >= win.input[0] as isize {
            continue;
        }
        for kh in 0..win.kernel[1] {
            let zh = win.coord(1, o[1], kh);
            if zh < 0 || zh >= ih as isize {
                continue;
            }
            for kw in 0..win.kernel[2] {
                let zw = win.coord(2, o[2], kw);
                if zw < 0 || zw >= iw as isize {
                    continue;
                }
                let p = [zd as usize, zh as usize, zw as usize];
                f((p[0] * ih + p[1]) * iw + p[2], p);
            }
        }
    }
}

/// Number of kernel taps of output position `o` that land inside the padded input
/// (`-pads_begin .. input + pads_end`), for average pooling with `count_include_pad`.
fn padded_count(win: &Window3, o: [usize; 3]) -> usize {
    let mut n = 1;
    for (dim, &od) in o.iter().enumerate() {
        let lo = -win.pads_begin[dim];
        let hi = win.input[dim] as isize + win.pads_end[dim];
        n *= (0..win.kernel[dim]).filter(|&k| (lo..hi).contains(&win.coord(dim, od, k))).count();
    }
    n
}

#[inline]
fn for_outputs(win: &Window3, mut f: impl FnMut(usize, [usize; 3])) {
    let mut i = 0;
    for d in 0..win.output[0] {
        for h in 0..win.output[1] {
            for w in 0..win.output[2] {
                f(i, [d, h, w]);
                i += 1;
            }
        }
    }
}

/// Where [`max_pool`] writes the position of each maximum, if anywhere: the flat index in the
/// whole input tensor, counted row-major, or column-major within a plane (ONNX's
/// `storage_order` 1).
pub enum Indices<'a> {
    None,
    RowMajor(&'a mut [i64]),
    ColumnMajor(&'a mut [i64]),
}

/// Which reduction [`global_pool`] applies to each plane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GlobalKind {
    Max,
    Average,
    /// The Lp norm of order `p`.
    Lp(f64),
}

/// Max pooling of `planes` planes, the position of each maximum written as `indices` says. A
/// window with no input in range yields `T::lowest()` and index -1.
pub fn max_pool<T: Elem>(x: &[T], planes: usize, win: &Window3, y: &mut [T], indices: Indices<'_>) {
    let (mut indices, col_major) = match indices {
        Indices::None => (None, false),
        Indices::RowMajor(ind) => (Some(ind), false),
        Indices::ColumnMajor(ind) => (Some(ind), true),
    };
    let (is, os) = (win.in_size(), win.out_size());
    let [id, ih, _] = win.input;
    if indices.is_none() && is_plain_2d(win) {
        crate::for_plane_ranges(planes, os, planes * os * win.kernel_size(), y, &|p0, p1, out| {
            for p in p0..p1 {
                max_pool_2d(&x[p * is..(p + 1) * is], win, &mut out[(p - p0) * os..(p - p0 + 1) * os]);
            }
        });
        return;
    }
    for p in 0..planes {
        let xp = &x[p * is..(p + 1) * is];
        for_outputs(win, |i, o| {
            let mut best = T::lowest();
            let mut best_pos = None;
            for_window(win, o, |off, pos| {
                let v = xp[off];
                if best_pos.is_none() || v > best {
                    best = v;
                    best_pos = Some(pos);
                }
            });
            y[p * os + i] = best;
            if let Some(ind) = indices.as_deref_mut() {
                ind[p * os + i] = match best_pos {
                    None => -1,
                    Some([d, h, w]) => {
                        let within = if col_major { d + h * id + w * id * ih } else { (d * ih + h) * win.input[2] + w };
                        (p * is + within) as i64
                    }
                };
            }
        });
    }
}

/// Average pooling: the mean over in-range taps, or over all taps inside the padded input
/// when `count_include_pad`.
pub fn avg_pool<T: Elem>(x: &[T], planes: usize, win: &Window3, y: &mut [T], count_include_pad: bool) {
    let (is, os) = (win.in_size(), win.out_size());
    if os == 1 && win.kernel == win.input && win.dilations == [1; 3] && win.pads_begin == [0; 3] && win.pads_end == [0; 3] {
        // One window over the whole plane (ShuffleNet's and GoogLeNet's last pools): a global
        // average, whose sum vectorizes; per row of taps it was 49 calls of one element each.
        global_pool(x, planes, is, y, GlobalKind::Average);
        return;
    }
    if is_plain_2d(win) {
        crate::for_plane_ranges(planes, os, planes * os * win.kernel_size(), y, &|p0, p1, out| {
            for p in p0..p1 {
                avg_pool_2d(&x[p * is..(p + 1) * is], win, &mut out[(p - p0) * os..(p - p0 + 1) * os], count_include_pad);
            }
        });
        return;
    }
    for p in 0..planes {
        let xp = &x[p * is..(p + 1) * is];
        for_outputs(win, |i, o| {
            let (mut sum, mut n) = (0.0f64, 0usize);
            for_window(win, o, |off, _| {
                sum += xp[off].to_f64();
                n += 1;
            });
            let count = if count_include_pad { padded_count(win, o) } else { n };
            y[p * os + i] = T::from_f64(if count == 0 { 0.0 } else { sum / count as f64 });
        });
    }
}

/// A window over two spatial dims (the depth dim of [`Window3`] unused): the row-wise fast
/// paths below apply.
fn is_plain_2d(win: &Window3) -> bool {
    win.input[0] == 1 && win.output[0] == 1 && win.kernel[0] == 1 && win.pads_begin[0] == 0 && win.output[2] > 0
}

/// Output columns `lo..hi` whose every kernel tap lies inside the input row (the interior):
/// there the taps are plain (strided) runs of the input row.
fn interior_cols(win: &Window3) -> (usize, usize) {
    let (mut lo, mut hi) = (0, win.output[2]);
    for kw in 0..win.kernel[2] {
        let (l, h) = win.valid_range(2, kw);
        lo = lo.max(l);
        hi = hi.min(h);
    }
    if lo >= hi {
        (0, 0)
    } else {
        (lo, hi)
    }
}

/// Input rows of output row `h` (kernel taps `kh` in range), in tap order.
fn tap_rows(win: &Window3, h: usize) -> impl Iterator<Item = usize> + '_ {
    (0..win.kernel[1]).filter_map(move |kh| {
        let zh = win.coord(1, h, kh);
        (zh >= 0 && zh < win.input[1] as isize).then_some(zh as usize)
    })
}

/// Input offsets (within a row) of output column `c`'s taps, start of the strided run.
#[inline]
fn tap_start(win: &Window3, c: usize, kw: usize) -> usize {
    win.coord(2, c, kw) as usize
}

/// `f(dst[j], src[j · sw])` for every j. Strides 1 and 2 get loops with the stride known at
/// compile time and no bounds check per element, which LLVM vectorizes (stride 2 as
/// interleaved loads); `src` must hold `(dst.len() - 1) · sw + 1` elements.
#[inline(always)]
fn strided<D, T: Copy>(dst: &mut [D], src: &[T], sw: usize, f: impl Fn(&mut D, T)) {
    #[inline(always)]
    fn go<D, T: Copy, const S: usize>(dst: &mut [D], src: &[T], f: impl Fn(&mut D, T)) {
        let Some((last, body)) = dst.split_last_mut() else { return };
        for (o, c) in body.iter_mut().zip(src.chunks_exact(S)) {
            f(o, c[0]);
        }
        f(last, src[body.len() * S]);
    }
    match sw {
        1 => dst.iter_mut().zip(src).for_each(|(o, &v)| f(o, v)),
        2 => go::<D, T, 2>(dst, src, f),
        _ => dst.iter_mut().enumerate().for_each(|(j, o)| f(o, src[j * sw])),
    }
}

/// Output columns per register block of [`max_pool_2d`].
const MAX_BLOCK: usize = 8;
/// Kernel rows up to which [`max_pool_2d`] uses register blocks.
const MAX_ROWS: usize = 8;

/// Register blocks of [`max_pool_2d`] at column stride S (a constant, so each block's loads
/// are plain or shuffled vectors): `dst[j]` is the max over the taps (rows at offsets `rows`,
/// kernel columns `0..kw_n` spaced `dw`) of the input at `x0 + j·S`, first tap first.
fn max_blocks<T: Elem, const S: usize>(xp: &[T], rows: &[usize], x0: usize, kw_n: usize, dw: usize, dst: &mut [T]) {
    for (b, out) in dst.chunks_exact_mut(MAX_BLOCK).enumerate() {
        let x0 = x0 + b * MAX_BLOCK * S;
        let mut acc = block::<T, S>(&xp[rows[0] + x0..]);
        for (r, &rs) in rows.iter().enumerate() {
            for kw in (r == 0) as usize..kw_n {
                let v = block::<T, S>(&xp[rs + x0 + kw * dw..]);
                for l in 0..MAX_BLOCK {
                    acc[l] = if v[l] > acc[l] { v[l] } else { acc[l] };
                }
            }
        }
        out.copy_from_slice(&acc);
    }
}

/// `[src[0], src[S], …, src[(MAX_BLOCK - 1)·S]]` through one fixed-size view (no bounds check
/// per element; stride 2 becomes loads and shuffles).
#[inline(always)]
fn block<T: Elem, const S: usize>(src: &[T]) -> [T; MAX_BLOCK] {
    let mut v = [T::zero(); MAX_BLOCK];
    if S == 1 {
        let s: &[T; MAX_BLOCK] = src[..MAX_BLOCK].try_into().unwrap();
        v = *s;
    } else {
        let s: &[T; 2 * MAX_BLOCK - 1] = src[..2 * MAX_BLOCK - 1].try_into().unwrap();
        for l in 0..MAX_BLOCK {
            v[l] = s[2 * l];
        }
    }
    v
}

/// [`max_rows_s2`] for f32 with AVX2 (returns how many outputs it wrote: all, or none
/// without tap rows): blocks of 8 outputs (one masked block for shorter runs), the last one
/// overlapping the one
/// before it where 8 does not divide the run (its outputs computed again from the same taps in
/// the same order: the same values). Per tap row two loads split into the even and odd
/// columns, the third tap's evens by moving the evens one lane down and adding the next
/// element; folded with `max_ps(v, best)`, which is `if v > best { v } else { best }` to the
/// bit, in the generic tap order. The loop LLVM made of the generic code ran 1.2–3.5 ns per
/// output of SqueezeNet's and ResNet's 3×3/2 pools, most of it in the tail of short rows.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_rows_s2_avx2(xp: &[f32], rows: &[usize], x0: usize, kw_n: usize, out: &mut [f32]) -> usize {
    use core::arch::x86_64::*;
    let n = out.len();
    if n == 0 || rows.is_empty() {
        return 0;
    }
    // A block at output j0 reads elements 2·j0 ..= 2·j0 + 15 (+ 2·j0 + 16 for a third tap):
    // inside the run the taps span (2n + 1 elements with three taps, 2n with two).
    let span = 2 * n + (kw_n == 3) as usize;
    for &rs in rows {
        assert!(rs + x0 + span <= xp.len(), "max pool: row out of the input");
    }
    if n < 8 {
        // SAFETY: the CPU has AVX2; the reads are masked to the span checked above.
        unsafe { max_short_avx2(xp, rows, x0, kw_n, out) };
        return n;
    }
    let xb = xp.as_ptr();
    let mut j0 = 0;
    loop {
        let mut best = _mm256_setzero_ps();
        for (r, &rs) in rows.iter().enumerate() {
            // SAFETY: j0 ≤ n − 8, so the reads end at 2·j0 + 16 < span: inside the input by the
            // asserts above.
            let p = unsafe { xb.add(rs + x0 + 2 * j0) };
            let (a, b) = unsafe { (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))) };
            let e = even(a, b);
            best = if r == 0 { e } else { _mm256_max_ps(e, best) };
            best = _mm256_max_ps(odd(a, b), best);
            if kw_n == 3 {
                // SAFETY: as above.
                let next = unsafe { _mm256_broadcast_ss(&*p.add(16)) };
                best = _mm256_max_ps(shift_in(e, next), best);
            }
        }
        // SAFETY: j0 + 8 ≤ n.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(j0), best) };
        if j0 + 8 == n {
            return n;
        }
        j0 = (j0 + 8).min(n - 8);
    }
}

/// [`max_rows_s2_avx2`] for averages: the taps of each output summed in f64 in the generic
/// loop's order (`sum += v as f64`, from zero), then `sum / count` rounded to f32, as the
/// generic loop computes it, so the same bits. Returns how many outputs it wrote (all, or
/// none without tap rows or with a zero count).
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avg_rows_s2_avx2(xp: &[f32], rows: &[usize], x0: usize, kw_n: usize, count: usize, out: &mut [f32]) -> usize {
    use core::arch::x86_64::*;
    let n = out.len();
    if n == 0 || rows.is_empty() || count == 0 {
        return 0;
    }
    let span = 2 * n + (kw_n == 3) as usize;
    for &rs in rows {
        assert!(rs + x0 + span <= xp.len(), "avg pool: row out of the input");
    }
    if n < 8 {
        // SAFETY: the CPU has AVX2; the reads are masked to the span checked above.
        unsafe { avg_short_avx2(xp, rows, x0, kw_n, count, out) };
        return n;
    }
    let div = _mm256_set1_pd(count as f64);
    let xb = xp.as_ptr();
    let mut j0 = 0;
    loop {
        let mut acc = [_mm256_setzero_pd(); 2];
        for &rs in rows {
            // SAFETY: j0 ≤ n − 8, so the reads end at 2·j0 + 16 < span: inside the input by the
            // asserts above.
            let p = unsafe { xb.add(rs + x0 + 2 * j0) };
            let (a, b) = unsafe { (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))) };
            let e = even(a, b);
            add_f64(&mut acc, e);
            add_f64(&mut acc, odd(a, b));
            if kw_n == 3 {
                // SAFETY: as above.
                let next = unsafe { _mm256_broadcast_ss(&*p.add(16)) };
                add_f64(&mut acc, shift_in(e, next));
            }
        }
        let lo = _mm256_cvtpd_ps(_mm256_div_pd(acc[0], div));
        let hi = _mm256_cvtpd_ps(_mm256_div_pd(acc[1], div));
        // SAFETY: j0 + 8 ≤ n.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(j0), _mm256_set_m128(hi, lo)) };
        if j0 + 8 == n {
            return n;
        }
        j0 = (j0 + 8).min(n - 8);
    }
}

/// The two 8-lane loads of a block whose run ends `left` elements after `p` (< 16: the
/// lanes past it read as zero and are never stored), and the mask of the block's `n` outputs.
///
/// # Safety
/// The CPU supports AVX2; `p .. p + min(left, 16)` is readable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn short_loads(p: *const f32, left: usize, n: usize) -> (core::arch::x86_64::__m256, core::arch::x86_64::__m256, core::arch::x86_64::__m256i) {
    use core::arch::x86_64::*;
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let below = |k: usize, from: i32| _mm256_cmpgt_epi32(_mm256_set1_epi32(k as i32 - from), lanes);
    // SAFETY: the masks keep the loads to p .. p + left.
    unsafe { (_mm256_maskload_ps(p, below(left, 0)), _mm256_maskload_ps(p.add(8), below(left, 8)), below(n, 0)) }
}

/// [`max_rows_s2_avx2`] for a run of fewer than 8 outputs: one masked block.
///
/// # Safety
/// The CPU supports AVX2; every row's run (`2n + (kw_n == 3)` elements from `x0`) is inside `xp`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_short_avx2(xp: &[f32], rows: &[usize], x0: usize, kw_n: usize, out: &mut [f32]) {
    use core::arch::x86_64::*;
    let n = out.len();
    let span = 2 * n + (kw_n == 3) as usize;
    let mut best = _mm256_setzero_ps();
    let mut keep = _mm256_setzero_si256();
    for (r, &rs) in rows.iter().enumerate() {
        // SAFETY: the caller's contract; short_loads reads only the span.
        let (a, b, k) = unsafe { short_loads(xp.as_ptr().add(rs + x0), span, n) };
        keep = k;
        let e = even(a, b);
        best = if r == 0 { e } else { _mm256_max_ps(e, best) };
        best = _mm256_max_ps(odd(a, b), best);
        if kw_n == 3 {
            // Lane j's third tap is element 2j + 2: the evens one lane down (lane 7 unused).
            best = _mm256_max_ps(shift_in(e, e), best);
        }
    }
    // SAFETY: the mask keeps the store to the n outputs.
    unsafe { _mm256_maskstore_ps(out.as_mut_ptr(), keep, best) };
}

/// [`avg_rows_s2_avx2`] for a run of fewer than 8 outputs: one masked block.
///
/// # Safety
/// As [`max_short_avx2`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avg_short_avx2(xp: &[f32], rows: &[usize], x0: usize, kw_n: usize, count: usize, out: &mut [f32]) {
    use core::arch::x86_64::*;
    let n = out.len();
    let span = 2 * n + (kw_n == 3) as usize;
    let mut acc = [_mm256_setzero_pd(); 2];
    let mut keep = _mm256_setzero_si256();
    for &rs in rows {
        // SAFETY: the caller's contract; short_loads reads only the span.
        let (a, b, k) = unsafe { short_loads(xp.as_ptr().add(rs + x0), span, n) };
        keep = k;
        let e = even(a, b);
        add_f64(&mut acc, e);
        add_f64(&mut acc, odd(a, b));
        if kw_n == 3 {
            add_f64(&mut acc, shift_in(e, e));
        }
    }
    let div = _mm256_set1_pd(count as f64);
    let v = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_div_pd(acc[1], div)), _mm256_cvtpd_ps(_mm256_div_pd(acc[0], div)));
    // SAFETY: the mask keeps the store to the n outputs.
    unsafe { _mm256_maskstore_ps(out.as_mut_ptr(), keep, v) };
}

/// Interior outputs `out[j]` of one output row of a stride-2 max pool over `kw_n` (2 or 3)
/// adjacent kernel columns, tap row by tap row (`rows`: offsets of the rows in `xp`, in tap
/// order), the input from column `x0` on: output j's taps in a row are `x[2j]`, `x[2j + 1]`
/// (and `x[2j + 2]`), read as pairs of the row in one pass per row (LLVM splits the pairs with
/// shuffles), all taps of a row at once instead of one pass or one shuffled block per tap (the
/// register blocks ran 3.3 ns per output of SqueezeNet's 3×3/2 pools, latency-bound). Each
/// output still folds its taps in the generic loop's order (first tap, then `v > best`), so
/// the bits, NaN and signed zeros included, are the same.
fn max_rows_s2<T: Elem>(xp: &[T], rows: &[usize], x0: usize, kw_n: usize, out: &mut [T]) {
    let n = out.len();
    if n == 0 {
        return;
    }
    let pick = |best: T, v: T| if v > best { v } else { best };
    let (body, last) = out.split_at_mut(n - 1);
    for (r, &rs) in rows.iter().enumerate() {
        let src = &xp[rs + x0..rs + x0 + 2 * n + (kw_n == 3) as usize];
        let (pairs, next) = (src.chunks_exact(2), src[2..].chunks_exact(2));
        match (r == 0, kw_n == 3) {
            (true, true) => body.iter_mut().zip(pairs).zip(next).for_each(|((d, p), q)| *d = pick(pick(p[0], p[1]), q[0])),
            (true, false) => body.iter_mut().zip(pairs).for_each(|(d, p)| *d = pick(p[0], p[1])),
            (false, true) => body.iter_mut().zip(pairs).zip(next).for_each(|((d, p), q)| *d = pick(pick(pick(*d, p[0]), p[1]), q[0])),
            (false, false) => body.iter_mut().zip(pairs).for_each(|(d, p)| *d = pick(pick(*d, p[0]), p[1])),
        }
        // The last output, whose taps end the run.
        let t = &src[2 * (n - 1)..];
        let mut best = if r == 0 { t[0] } else { pick(last[0], t[0]) };
        for &v in &t[1..] {
            best = pick(best, v);
        }
        last[0] = best;
    }
}

/// A 2×2 window at stride 2 without padding or dilation whose taps all lie in the input
/// (VGG's and small CNNs' pools): [`max_pool_2x2_s2`] applies.
fn is_plain_2x2_s2(win: &Window3) -> bool {
    let [_, oh, ow] = win.output;
    win.kernel[1..] == [2, 2]
        && win.strides[1..] == [2, 2]
        && win.dilations[1..] == [1, 1]
        && win.pads_begin[1..] == [0, 0]
        && 2 * oh <= win.input[1]
        && 2 * ow <= win.input[2]
}

/// [`max_pool_2d`] for [`is_plain_2x2_s2`] windows: one pass per output row over its two input
/// rows, the taps in the generic loop's order (row by row, left to right; first tap, then
/// `v > best`), so the bits are the same. The row-generic path spent most of MNIST's pooling
/// time on per-row bookkeeping for rows of 7 and 14 outputs.
fn max_pool_2x2_s2<T: Elem>(xp: &[T], win: &Window3, yp: &mut [T]) {
    let [_, oh, ow] = win.output;
    let iw = win.input[2];
    let pick = |best: T, v: T| if v > best { v } else { best };
    for (h, out) in yp[..oh * ow].chunks_exact_mut(ow).enumerate() {
        let r0 = &xp[2 * h * iw..2 * h * iw + 2 * ow];
        let r1 = &xp[(2 * h + 1) * iw..(2 * h + 1) * iw + 2 * ow];
        for ((o, a), b) in out.iter_mut().zip(r0.chunks_exact(2)).zip(r1.chunks_exact(2)) {
            *o = pick(pick(pick(a[0], a[1]), b[0]), b[1]);
        }
    }
}

/// Max over the taps of edge column `c` (a column with taps outside the row) of the output row
/// whose tap rows start at `rows` (offsets in `xp`, tap order): the generic loop's order.
fn edge_max<T: Elem>(xp: &[T], win: &Window3, rows: impl Iterator<Item = usize>, c: usize) -> T {
    let (klo, khi) = edge_taps(win, c);
    let mut best = T::lowest();
    let mut seen = false;
    for row in rows {
        for kw in klo..khi {
            let v = xp[row + win.coord(2, c, kw) as usize];
            if !seen || v > best {
                best = v;
                seen = true;
            }
        }
    }
    best
}

/// What [`pool_s2_f32`] computes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum PoolKind {
    Max,
    /// An average, with `count_include_pad`.
    Avg(bool),
}

/// [`max_pool_2d`] and [`avg_pool_2d`] for f32 planes of stride-2 windows over 2 or 3
/// adjacent columns with at least 8 interior outputs per row (the 3×3/2 pools of ResNet,
/// SqueezeNet, Inception and ShuffleNet, DenseNet's 2×2/2 averages), on CPUs with AVX2: per
/// row the interior by [`max_rows_s2_avx2`] / [`avg_rows_s2_avx2`], the edge columns as the
/// generic paths compute them. The generic per-row paths spent ~150 cycles per row on
/// bookkeeping, more than the row's arithmetic on 13- and 27-wide rows. Returns false
/// (nothing written) where it does not apply.
#[cfg(target_arch = "x86_64")]
fn pool_s2_f32(xp: &[f32], win: &Window3, yp: &mut [f32], kind: PoolKind) -> bool {
    let [_, oh, ow] = win.output;
    let [_, ih, iw] = win.input;
    let [_, kh_n, kw_n] = win.kernel;
    // The cheap tests first: this runs once per plane.
    if !(win.strides[2] == 2 && win.dilations[2] == 1 && (kw_n == 2 || kw_n == 3) && kh_n <= MAX_ROWS && has_avx2()) {
        return false;
    }
    let (clo, chi) = interior_cols(win);
    if chi <= clo {
        return false;
    }
    let x0 = tap_start(win, clo, 0);
    for (h, out) in yp[..oh * ow].chunks_exact_mut(ow).enumerate() {
        let mut rows = [0usize; MAX_ROWS];
        let mut nrows = 0;
        for kh in 0..kh_n {
            let zh = win.coord(1, h, kh);
            if zh >= 0 && (zh as usize) < ih {
                rows[nrows] = zh as usize * iw;
                nrows += 1;
            }
        }
        let rows = &rows[..nrows];
        match kind {
            PoolKind::Max => {
                if nrows == 0 {
                    // No tap row in range: as the generic loop.
                    out.fill(f32::lowest());
                    continue;
                }
                // SAFETY: the CPU has AVX2 (checked above).
                let done = unsafe { max_rows_s2_avx2(xp, rows, x0, kw_n, &mut out[clo..chi]) };
                debug_assert_eq!(done, chi - clo);
                for c in (0..clo).chain(chi..ow) {
                    out[c] = edge_max(xp, win, rows.iter().copied(), c);
                }
            }
            PoolKind::Avg(include_pad) => {
                let count = if include_pad { padded_count(win, [0, h, clo]) } else { nrows * kw_n };
                // SAFETY: the CPU has AVX2 (checked above).
                if unsafe { avg_rows_s2_avx2(xp, rows, x0, kw_n, count, &mut out[clo..chi]) } == 0 {
                    // No tap row or a zero count: as the generic loop.
                    avg_cols(xp, win, h, clo..chi, out, include_pad);
                }
                avg_cols(xp, win, h, 0..clo, out, include_pad);
                avg_cols(xp, win, h, chi..ow, out, include_pad);
            }
        }
    }
    true
}

/// Columns `cols` of output row `h` of an average pool, each on its own (the generic loop's
/// sums).
#[inline]
fn avg_cols<T: Elem>(xp: &[T], win: &Window3, h: usize, cols: core::ops::Range<usize>, out: &mut [T], count_include_pad: bool) {
    let iw = win.input[2];
    for c in cols {
        let (mut sum, mut n) = (0.0f64, 0usize);
        for zh in tap_rows(win, h) {
            for kw in 0..win.kernel[2] {
                let zw = win.coord(2, c, kw);
                if zw >= 0 && zw < iw as isize {
                    sum += xp[zh * iw + zw as usize].to_f64();
                    n += 1;
                }
            }
        }
        let count = if count_include_pad { padded_count(win, [0, h, c]) } else { n };
        out[c] = T::from_f64(if count == 0 { 0.0 } else { sum / count as f64 });
    }
}

/// `f(x, y)` with both planes seen as f32, when `T` is f32.
#[cfg(target_arch = "x86_64")]
fn as_f32<T: Elem, R>(xp: &[T], yp: &mut [T], f: impl FnOnce(&[f32], &mut [f32]) -> R) -> Option<R> {
    if core::any::TypeId::of::<T>() != core::any::TypeId::of::<f32>() {
        return None;
    }
    // SAFETY: T is f32 (checked just above): the same memory as [f32].
    let (xf, yf) = unsafe {
        (
            core::slice::from_raw_parts(xp.as_ptr() as *const f32, xp.len()),
            core::slice::from_raw_parts_mut(yp.as_mut_ptr() as *mut f32, yp.len()),
        )
    };
    Some(f(xf, yf))
}

/// [`max_pool`] of one 2-D plane without indices: per output row, tap by tap over the interior
/// columns (a vectorizable compare-select), the edge columns position by position. Each output
/// visits its taps in the same order as the generic loop (first in-range tap, then `v > best`),
/// so the results, NaN and signed zeros included, are the same.
fn max_pool_2d<T: Elem>(xp: &[T], win: &Window3, yp: &mut [T]) {
    if is_plain_2x2_s2(win) {
        max_pool_2x2_s2(xp, win, yp);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if as_f32(xp, yp, |x, y| pool_s2_f32(x, win, y, PoolKind::Max)) == Some(true) {
        return;
    }
    let [_, oh, ow] = win.output;
    let iw = win.input[2];
    let sw = win.strides[2];
    let (clo, chi) = interior_cols(win);
    let [_, kh_n, kw_n] = win.kernel;
    let dw = win.dilations[2];
    // Interior columns in register blocks of MAX_BLOCK outputs (all taps per block, one store
    // per output, as long as every block's reads stay inside the row), the rest tap by tap.
    let span = (MAX_BLOCK - 1) * sw + 1;
    let last_ok = |c0: usize| tap_start(win, c0, kw_n - 1) + span <= iw;
    let blocks = if (sw == 1 || sw == 2) && kh_n <= MAX_ROWS && chi > clo {
        let mut nb = (chi - clo) / MAX_BLOCK;
        while nb > 0 && !last_ok(clo + (nb - 1) * MAX_BLOCK) {
            nb -= 1;
        }
        nb
    } else {
        0
    };
    if sw == 1 && blocks == 0 && max_pool_s1_rows(xp, win, (clo, chi), yp) {
        return;
    }
    // The interior's last columns as one more block ending at `chi`, overlapping the one
    // before (its outputs computed again, with the same taps in the same order: the same
    // values), where its reads stay in the row: no element-by-element tail (SqueezeNet's
    // 55-wide rows left 7 of them).
    let tail = blocks > 0 && clo + blocks * MAX_BLOCK < chi && last_ok(chi - MAX_BLOCK);
    // Stride 2 over 2 or 3 kernel columns (the 3×3/2 pools of most CNNs): a row's taps in one
    // pass over its pairs (see `max_rows_s2`).
    let deinterleave = sw == 2 && dw == 1 && (kw_n == 2 || kw_n == 3) && kh_n <= MAX_ROWS && chi > clo;
    for h in 0..oh {
        let out = &mut yp[h * ow..(h + 1) * ow];
        let mut rows = [0usize; MAX_ROWS];
        let mut nrows = 0;
        if kh_n <= MAX_ROWS {
            for zh in tap_rows(win, h) {
                rows[nrows] = zh * iw;
                nrows += 1;
            }
        }
        // Start of the interior's tap-by-tap part.
        let tlo = if nrows > 0 && deinterleave {
            max_rows_s2(xp, &rows[..nrows], tap_start(win, clo, 0), kw_n, &mut out[clo..chi]);
            chi
        } else if nrows > 0 && blocks > 0 {
            let run = |c0: usize, dst: &mut [T]| {
                let x0 = tap_start(win, c0, 0);
                if sw == 1 {
                    max_blocks::<T, 1>(xp, &rows[..nrows], x0, kw_n, dw, dst);
                } else {
                    max_blocks::<T, 2>(xp, &rows[..nrows], x0, kw_n, dw, dst);
                }
            };
            run(clo, &mut out[clo..clo + blocks * MAX_BLOCK]);
            if tail {
                run(chi - MAX_BLOCK, &mut out[chi - MAX_BLOCK..chi]);
                chi
            } else {
                clo + blocks * MAX_BLOCK
            }
        } else {
            clo
        };
        let mut first = true;
        for zh in tap_rows(win, h) {
            let row = &xp[zh * iw..(zh + 1) * iw];
            for kw in 0..win.kernel[2] {
                if tlo == chi {
                    break;
                }
                let src = &row[tap_start(win, tlo, kw)..];
                let dst = &mut out[tlo..chi];
                if first {
                    strided(dst, src, sw, |o, v| *o = v);
                } else {
                    strided(dst, src, sw, |o, v| *o = if v > *o { v } else { *o });
                }
                first = false;
            }
        }
        if first {
            // No tap row in range (or no interior): as the generic loop, per position.
            out[tlo..chi].fill(T::lowest());
        }
        for c in (0..clo).chain(chi..ow) {
            out[c] = if nrows > 0 { edge_max(xp, win, rows[..nrows].iter().copied(), c) } else { edge_max(xp, win, tap_rows(win, h).map(|zh| zh * iw), c) };
        }
    }
}

/// Widest output row, and largest input plane, [`max_pool_s1_rows`] takes: its four plane
/// buffers live on the stack (a firmware's too), and planes narrow enough to need it are small
/// (wider rows take the register blocks).
const S1_ROW_MAX: usize = 64;
const S1_PLANE_MAX: usize = 256;

/// [`max_pool_2d`] for stride-1 windows whose interior is too narrow for its register blocks
/// (YOLO's SPPF: 5×5 pools over 10×10 maps ran tap by tap, 12 ns per output). The maxima
/// along the rows are computed for the whole plane at once (one long loop per kernel column
/// over the flat plane, each position as the start of a window row), then folded down each
/// output's tap rows; the edge columns, whose windows the plane's rows cut, one by one. The
/// generic loop's result to the bit: it folds `if v > best { v } else { best }` over the taps
/// in row-major order from the first, which is the first tap row folded the same way, then
/// each later row's maximum over its non-NaN taps (its first one on ties, NaN if all are)
/// folded in once (a NaN after the first tap never replaces anything), so the row maxima come
/// in both forms. `false` (nothing written) where it does not apply: wider rows or larger
/// planes than the buffers, or an output column with no tap inside the row.
fn max_pool_s1_rows<T: Elem>(xp: &[T], win: &Window3, (clo, chi): (usize, usize), yp: &mut [T]) -> bool {
    let [_, oh, ow] = win.output;
    let [_, ih, iw] = win.input;
    let (kw_n, dw) = (win.kernel[2], win.dilations[2]);
    let span = (kw_n - 1) * dw + 1;
    if ow > S1_ROW_MAX || ih * iw.max(ow) > S1_PLANE_MAX || chi <= clo || span > iw {
        return false;
    }
    let mut edges = [(0usize, 0usize); S1_ROW_MAX];
    for c in (0..clo).chain(chi..ow) {
        edges[c] = edge_taps(win, c);
        if edges[c].0 == edges[c].1 {
            return false;
        }
    }
    let fold = |m: T, v: T, skip_nan: bool| if v > m || (skip_nan && m != m) { v } else { m };
    // Row maxima of the window starting at each flat position: folded plainly, and skipping NaN.
    let n = ih * iw - span + 1;
    let (mut plain, mut skip) = ([T::lowest(); S1_PLANE_MAX], [T::lowest(); S1_PLANE_MAX]);
    plain[..n].copy_from_slice(&xp[..n]);
    skip[..n].copy_from_slice(&xp[..n]);
    for kw in 1..kw_n {
        let src = &xp[kw * dw..kw * dw + n];
        for ((p, q), &v) in plain[..n].iter_mut().zip(&mut skip[..n]).zip(src) {
            *p = fold(*p, v, false);
            *q = fold(*q, v, true);
        }
    }
    // Every input row's maxima per output column, both forms: the interior from the flat
    // maxima, the edge columns (their taps cut by the row's ends) one by one.
    let (mut rm_plain, mut rm_skip) = ([T::lowest(); S1_PLANE_MAX], [T::lowest(); S1_PLANE_MAX]);
    let x0 = tap_start(win, clo, 0);
    for r in 0..ih {
        let (row, at) = (&xp[r * iw..(r + 1) * iw], r * iw + x0);
        rm_plain[r * ow + clo..r * ow + chi].copy_from_slice(&plain[at..at + chi - clo]);
        rm_skip[r * ow + clo..r * ow + chi].copy_from_slice(&skip[at..at + chi - clo]);
        for c in (0..clo).chain(chi..ow) {
            let (klo, khi) = edges[c];
            let first = row[tap_start(win, c, klo)];
            let (mut p, mut q) = (first, first);
            for kw in klo + 1..khi {
                let v = row[tap_start(win, c, kw)];
                (p, q) = (fold(p, v, false), fold(q, v, true));
            }
            (rm_plain[r * ow + c], rm_skip[r * ow + c]) = (p, q);
        }
    }
    for h in 0..oh {
        let out = &mut yp[h * ow..(h + 1) * ow];
        let mut rows = tap_rows(win, h);
        let Some(first) = rows.next() else {
            out.fill(T::lowest());
            continue;
        };
        out.copy_from_slice(&rm_plain[first * ow..(first + 1) * ow]);
        for zh in rows {
            for (o, &m) in out.iter_mut().zip(&rm_skip[zh * ow..(zh + 1) * ow]) {
                if m > *o {
                    *o = m;
                }
            }
        }
    }
    true
}

/// Kernel columns `klo..khi` whose input column for output column `c` is inside the row (the
/// in-range taps of a column form one run, as the dilation spaces them evenly).
fn edge_taps(win: &Window3, c: usize) -> (usize, usize) {
    let iw = win.input[2] as isize;
    let ok = |kw: usize| (0..iw).contains(&win.coord(2, c, kw));
    let klo = (0..win.kernel[2]).find(|&kw| ok(kw)).unwrap_or(win.kernel[2]);
    let khi = (klo..win.kernel[2]).find(|&kw| !ok(kw)).unwrap_or(win.kernel[2]);
    (klo, khi)
}

/// Columns of the f64 accumulators [`avg_pool_2d`] keeps on the stack.
const AVG_CHUNK: usize = 64;

/// [`avg_pool`] of one 2-D plane: sums in f64 tap by tap over chunks of interior columns, in
/// the generic loop's tap order (so the same bits), the edge columns position by position.
fn avg_pool_2d<T: Elem>(xp: &[T], win: &Window3, yp: &mut [T], count_include_pad: bool) {
    #[cfg(target_arch = "x86_64")]
    if as_f32(xp, yp, |x, y| pool_s2_f32(x, win, y, PoolKind::Avg(count_include_pad))) == Some(true) {
        return;
    }
    let [_, oh, ow] = win.output;
    let iw = win.input[2];
    let sw = win.strides[2];
    let (clo, chi) = interior_cols(win);
    for h in 0..oh {
        let out = &mut yp[h * ow..(h + 1) * ow];
        let rows = tap_rows(win, h).count();
        if clo < chi {
            // Every interior position has the same taps in range, and the same padded count.
            let count = if count_include_pad { padded_count(win, [0, h, clo]) } else { rows * win.kernel[2] };
            let mut c0 = clo;
            while c0 < chi {
                let c1 = (c0 + AVG_CHUNK).min(chi);
                let mut acc = [0f64; AVG_CHUNK];
                let acc = &mut acc[..c1 - c0];
                for zh in tap_rows(win, h) {
                    let row = &xp[zh * iw..(zh + 1) * iw];
                    for kw in 0..win.kernel[2] {
                        let src = &row[tap_start(win, c0, kw)..];
                        strided(acc, src, sw, |a, v| *a += v.to_f64());
                    }
                }
                for (o, &a) in out[c0..c1].iter_mut().zip(acc.iter()) {
                    *o = T::from_f64(if count == 0 { 0.0 } else { a / count as f64 });
                }
                c0 = c1;
            }
        }
        avg_cols(xp, win, h, 0..clo, out, count_include_pad);
        avg_cols(xp, win, h, chi..ow, out, count_include_pad);
    }
}

/// Lp pooling: `(Σ |x|^p)^(1/p)` over in-range taps.
pub fn lp_pool<T: Elem>(x: &[T], planes: usize, win: &Window3, y: &mut [T], p_norm: f64) {
    let (is, os) = (win.in_size(), win.out_size());
    for p in 0..planes {
        let xp = &x[p * is..(p + 1) * is];
        for_outputs(win, |i, o| {
            let mut sum = 0.0f64;
            for_window(win, o, |off, _| {
                sum += crate::math::pow(xp[off].to_f64().abs(), p_norm);
            });
            y[p * os + i] = T::from_f64(crate::math::pow(sum, 1.0 / p_norm));
        });
    }
}

/// Global pooling of `planes` planes of `size` elements each into one value per plane. Planes
/// split over the pool.
pub fn global_pool<T: Elem>(x: &[T], planes: usize, size: usize, y: &mut [T], kind: GlobalKind) {
    crate::for_plane_ranges(planes, 1, planes * size, y, &|p0, p1, out| {
        for (p, o) in (p0..p1).zip(out.iter_mut()) {
            let xp = &x[p * size..(p + 1) * size];
            *o = match kind {
                GlobalKind::Max => xp.iter().fold(T::lowest(), |a, &b| if b > a { b } else { a }),
                GlobalKind::Average => T::from_f64(sum_f64(xp) / size.max(1) as f64),
                GlobalKind::Lp(p_norm) => {
                    let s: f64 = xp.iter().map(|v| crate::math::pow(v.to_f64().abs(), p_norm)).sum();
                    T::from_f64(crate::math::pow(s, 1.0 / p_norm))
                }
            };
        }
    });
}

/// Σ xs in f64, in eight interleaved partial sums (they vectorize; one chain of f64 adds ran
/// at one add per four cycles, 3× onnxruntime's time on SqueezeNet's 1000×13×13 average).
fn sum_f64<T: Elem>(xs: &[T]) -> f64 {
    let mut acc = [0f64; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v.to_f64();
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for v in rest {
        s += v.to_f64();
    }
    s
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn max_and_avg_2x2() {
        let x: [f32; 16] = core::array::from_fn(|i| i as f32);
        let win = Window3::new(&[4, 4], &[2, 2], &[2, 2], &[2, 2], &[1, 1], &[0, 0], &[0, 0]).unwrap();
        let mut y = [0f32; 4];
        let mut ind = [0i64; 4];
        max_pool(&x, 1, &win, &mut y, Indices::RowMajor(&mut ind));
        assert_eq!(y, [5.0, 7.0, 13.0, 15.0]);
        assert_eq!(ind, [5, 7, 13, 15]);
        avg_pool(&x, 1, &win, &mut y, false);
        assert_eq!(y, [2.5, 4.5, 10.5, 12.5]);
    }

    /// The generic per-position loops, as references for the 2-D fast paths.
    fn naive(x: &[f32], planes: usize, win: &Window3, max: bool, include_pad: bool) -> Vec<f32> {
        let (is, os) = (win.in_size(), win.out_size());
        let mut y = vec![0f32; planes * os];
        for p in 0..planes {
            for_outputs(win, |i, o| {
                let (mut best, mut seen, mut sum, mut n) = (f32::NEG_INFINITY, false, 0f64, 0usize);
                for_window(win, o, |off, _| {
                    let v = x[p * is + off];
                    if !seen || v > best {
                        best = v;
                        seen = true;
                    }
                    sum += v as f64;
                    n += 1;
                });
                let count = if include_pad { padded_count(win, o) } else { n };
                y[p * os + i] = if max { best } else if count == 0 { 0.0 } else { (sum / count as f64) as f32 };
            });
        }
        y
    }

    /// Output size of one dim (floor or ceil mode), as the compiler computes it.
    fn out_dim(i: usize, k: usize, s: usize, d: usize, pb: isize, pe: isize, ceil: bool) -> usize {
        let span = i as isize + pb + pe - ((k - 1) * d + 1) as isize;
        let q = if ceil { (span + s as isize - 1) / s as isize } else { span / s as isize };
        let mut o = (q + 1).max(0) as usize;
        // ONNX ceil mode: the last window must start inside the input or left padding.
        if ceil && o > 0 && ((o - 1) * s) as isize >= i as isize + pb {
            o -= 1;
        }
        o
    }

    #[test]
    fn fast_2d_paths_match_the_generic_loop() {
        let mut seed = 7u32;
        let mut rnd = move || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (seed >> 8) as f32 / (1 << 24) as f32 * 2.0 - 1.0
        };
        for &(ih, iw, k, s, d, pb, pe, ceil) in &[
            (9usize, 11usize, [3usize, 3usize], 2usize, 1usize, 0isize, 0isize, false),
            (9, 11, [3, 3], 2, 1, 0, 0, true),
            (8, 8, [3, 3], 1, 1, 1, 1, false),
            (7, 13, [2, 3], 2, 1, 1, 0, true),
            (5, 6, [3, 2], 1, 2, 1, 2, false),
            (4, 4, [5, 5], 1, 1, 2, 2, false),
            (3, 20, [3, 7], 3, 1, 3, 3, false),
            (6, 6, [1, 1], 1, 1, 0, 0, false),
            // wide rows: register blocks, strides 1 and 2, with and without padding
            (5, 40, [3, 3], 1, 1, 1, 1, false),
            (7, 57, [3, 3], 2, 1, 0, 0, true),
            (9, 113, [3, 3], 2, 1, 1, 1, false),
            (6, 70, [2, 3], 2, 1, 0, 1, false),
            (4, 50, [2, 2], 2, 1, 0, 0, false),
            (5, 45, [3, 3], 1, 2, 2, 2, false),
            // 2×2 stride 2 (its own path when every tap is inside), odd sizes and ceil mode
            (14, 14, [2, 2], 2, 1, 0, 0, false),
            (7, 15, [2, 2], 2, 1, 0, 0, false),
            (7, 15, [2, 2], 2, 1, 0, 0, true),
            // one window over the whole plane (the global-average path)
            (7, 7, [7, 7], 1, 1, 0, 0, false),
            (9, 5, [9, 5], 1, 1, 0, 0, false),
        ] {
            let oh = out_dim(ih, k[0], s, d, pb, pe, ceil);
            let ow = out_dim(iw, k[1], s, d, pb, pe, ceil);
            let win = Window3::new(&[ih, iw], &[oh, ow], &k, &[s, s], &[d, d], &[pb, pb], &[pe, pe]).unwrap();
            let planes = 3;
            let mut x: Vec<f32> = (0..planes * ih * iw).map(|_| rnd()).collect();
            // NaN and signed zeros where tap order decides the result.
            x[4] = f32::NAN;
            x[ih * iw + 1] = -0.0;
            x[ih * iw + 2] = 0.0;
            // ... and inside the vector blocks of wide rows, at every lane position.
            for (i, v) in [(2 * ih * iw + 20, f32::NAN), (2 * ih * iw + 23, -0.0), (2 * ih * iw + 24, 0.0), (2 * ih * iw + iw + 37, f32::NAN), (2 * ih * iw + 2 * iw + 29, f32::NAN)] {
                if i < x.len() {
                    x[i] = v;
                }
            }
            let mut y = vec![0f32; planes * oh * ow];
            max_pool(&x, planes, &win, &mut y, Indices::None);
            let want = naive(&x, planes, &win, true, false);
            assert_eq!(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "max {win:?}");
            for include in [false, true] {
                avg_pool(&x, planes, &win, &mut y, include);
                let want = naive(&x, planes, &win, false, include);
                assert_eq!(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "avg {include} {win:?}");
            }
        }
    }

    /// Stride-1 max pools over planes too narrow for register blocks (SPPF's 5×5 over 10×10,
    /// dilated and asymmetric windows) against the generic loop, bit for bit, with many NaNs
    /// and signed zeros: at row starts, inside rows, whole rows of them.
    #[test]
    fn narrow_stride_1_max_pools_match_the_generic_loop() {
        let mut seed = 11u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            seed >> 8
        };
        for &(ih, iw, k, d, pb, pe) in &[
            (10usize, 10usize, [5usize, 5usize], 1usize, 2isize, 2isize),
            (13, 13, [5, 5], 1, 2, 2),
            (6, 9, [3, 3], 2, 2, 1),
            (7, 12, [3, 5], 1, 1, 2),
            (9, 3, [3, 3], 1, 1, 1),
        ] {
            let oh = out_dim(ih, k[0], 1, d, pb, pe, false);
            let ow = out_dim(iw, k[1], 1, d, pb, pe, false);
            let win = Window3::new(&[ih, iw], &[oh, ow], &k, &[1, 1], &[d, d], &[pb, pb], &[pe, pe]).unwrap();
            let planes = 4;
            let mut x: Vec<f32> = (0..planes * ih * iw)
                .map(|_| match next() % 10 {
                    0 => f32::NAN,
                    1 => -0.0,
                    2 => 0.0,
                    r => r as f32 - 6.0,
                })
                .collect();
            x[3 * ih * iw..3 * ih * iw + iw].fill(f32::NAN);
            let mut y = vec![0f32; planes * oh * ow];
            max_pool(&x, planes, &win, &mut y, Indices::None);
            let want = naive(&x, planes, &win, true, false);
            assert_eq!(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{win:?}");
        }
    }

    #[test]
    fn avg_pad_counts() {
        let x = [1f32; 4];
        let win = Window3::new(&[2, 2], &[2, 2], &[2, 2], &[1, 1], &[1, 1], &[1, 1], &[0, 0]).unwrap();
        let mut y = [0f32; 4];
        avg_pool(&x, 1, &win, &mut y, true);
        assert_eq!(y, [0.25, 0.5, 0.5, 1.0]);
        avg_pool(&x, 1, &win, &mut y, false);
        assert_eq!(y, [1.0; 4]);
    }
}
