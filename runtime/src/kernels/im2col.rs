//! im2col / col2im over [`Window3`]: the column matrix has one row per (channel, kernel
//! offset) and one column per output position.
use super::window::Window3;
use crate::elem::Elem;

/// Length of the column buffer for `channels` channels.
pub fn col_len(channels: usize, w: &Window3) -> usize {
    channels * w.kernel_size() * w.out_size()
}

/// The im2col matrix of output positions `p0..p0 + cols` of an image, not written out: a GEMM
/// packs its B panels from it ([`Image::pack_panel`], through `packed::Src::Image`), with the
/// values [`im2col_rows`] would write.
pub struct Image<'a> {
    x: &'a [f32],
    channels: usize,
    win: &'a Window3,
    p0: usize,
    cols: usize,
}

/// A run of a panel's columns along one output row: panel columns `j..j + len`, output
/// position `(d, h, w0..)`.
#[derive(Clone, Copy, Default)]
struct Run {
    j: usize,
    len: usize,
    d: usize,
    h: usize,
    w0: usize,
}

/// Most kernel taps of [`Image::pack_panel_shifted`]'s masks (a 5×5 window).
const MAX_SHIFTED_TAPS: usize = 25;

impl<'a> Image<'a> {
    /// The image `x` (`channels` planes of `win.in_size()`), output positions from `p0` on,
    /// `cols` of them.
    pub fn new(x: &'a [f32], channels: usize, win: &'a Window3, p0: usize, cols: usize) -> Self {
        assert!(
            x.len() >= channels * win.in_size(),
            "im2col image: input too short"
        );
        assert!(
            p0 + cols <= win.out_size(),
            "im2col image: positions past the output"
        );
        Image {
            x,
            channels,
            win,
            p0,
            cols,
        }
    }

    /// Whether [`Image::pack_panel`] packs `win`'s panels faster than an im2col tile and its
    /// copy into panels: "same" windows of stride 1 up to 5×5, where a row of a panel is one
    /// masked run of the input (96 → 24 channels 3×3 at 80×80: 0.90× the time, 128 → 128 at
    /// 10×10: 0.94×, AMD Zen 5, one thread).
    pub fn is_fast(win: &Window3) -> bool {
        same_width_s1(win) && win.kernel_size() <= MAX_SHIFTED_TAPS
    }

    /// Rows of the matrix: channels × kernel taps.
    pub fn rows(&self) -> usize {
        self.channels * self.win.kernel_size()
    }

    /// Columns of the matrix: output positions.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Rows `k0..k0 + kn`, columns `j0..j0 + nc` (`nc ≤ W`) as a `kn × W` panel (row-major,
    /// columns past `nc` zero), as `packed`'s B panels are laid out.
    pub fn pack_panel<const W: usize>(
        &self,
        k0: usize,
        kn: usize,
        j0: usize,
        nc: usize,
        out: &mut [f32],
    ) {
        const { assert!(W < 64, "a panel has at most 63 columns") };
        assert!(
            nc <= W && j0 + nc <= self.cols && k0 + kn <= self.rows(),
            "im2col image: panel out of range"
        );
        let [_, oh, ow] = self.win.output;
        // The panel's columns as runs along output rows (at most W + 1 of them).
        let mut runs = [Run::default(); 64];
        let mut nruns = 0;
        let mut j = 0;
        while j < nc {
            let p = self.p0 + j0 + j;
            let (r, w0) = (p / ow, p % ow);
            let len = (ow - w0).min(nc - j);
            runs[nruns] = Run {
                j,
                len,
                d: r / oh,
                h: r % oh,
                w0,
            };
            nruns += 1;
            j += len;
        }
        if Self::is_fast(self.win) {
            return self.pack_panel_shifted::<W>(k0, kn, j0, &runs[..nruns], out);
        }
        self.pack_panel_runs::<W>(k0, kn, &runs[..nruns], nc, out);
    }

    /// [`Image::pack_panel`] for [`same_width_s1`] windows: there every column of a row reads
    /// the input at its position plus the tap's offset, so a row is one run of W input
    /// elements masked by the tap's valid columns (worked out once per panel): a load, an
    /// and and a store per vector.
    fn pack_panel_shifted<const W: usize>(
        &self,
        k0: usize,
        kn: usize,
        j0: usize,
        runs: &[Run],
        out: &mut [f32],
    ) {
        let win = self.win;
        let [_, ih, iw] = win.input;
        let [_, _, kw_n] = win.kernel;
        let (is, taps) = (win.in_size(), win.kernel_size());
        let mut masks = [[0u32; W]; MAX_SHIFTED_TAPS];
        let mut offs = [0isize; MAX_SHIFTED_TAPS];
        for t in 0..taps {
            let (kh, kw) = (t / kw_n, t % kw_n);
            let dy = win.coord(1, 0, kh);
            offs[t] = dy * iw as isize + win.coord(2, 0, kw);
            let (lo, hi) = win.valid_range(2, kw);
            for r in runs {
                let zh = r.h as isize + dy;
                if zh < 0 || zh >= ih as isize {
                    continue;
                }
                let (a, b) = (lo.clamp(r.w0, r.w0 + r.len), hi.clamp(r.w0, r.w0 + r.len));
                for m in &mut masks[t][r.j + a.min(b) - r.w0..r.j + b - r.w0] {
                    *m = !0;
                }
            }
        }
        let p = (self.p0 + j0) as isize;
        let (mut c, mut t) = (k0 / taps, k0 % taps);
        for dst in out.chunks_exact_mut(W).take(kn) {
            let dst: &mut [f32; W] = dst.try_into().expect("a panel row");
            let xc = &self.x[c * is..(c + 1) * is];
            let (start, mask) = (p + offs[t], &masks[t]);
            if start >= 0 && start as usize + W <= is {
                let src: &[f32; W] = xc[start as usize..start as usize + W]
                    .try_into()
                    .expect("W elements");
                for j in 0..W {
                    dst[j] = f32::from_bits(src[j].to_bits() & mask[j]);
                }
            } else {
                // Near the plane's ends: only the valid columns' elements exist.
                for j in 0..W {
                    dst[j] = if mask[j] != 0 {
                        xc[(start + j as isize) as usize]
                    } else {
                        0.0
                    };
                }
            }
            t += 1;
            if t == taps {
                (c, t) = (c + 1, 0);
            }
        }
    }

    /// [`Image::pack_panel`] for any window: per row, per run of columns along an output row,
    /// the input run its tap reads (strided), zeros elsewhere. Slower than the im2col tile it
    /// replaces (the per-row work is more than the copy), so convolutions use [`Image`] only
    /// where [`Image::is_fast`].
    fn pack_panel_runs<const W: usize>(
        &self,
        k0: usize,
        kn: usize,
        runs: &[Run],
        nc: usize,
        out: &mut [f32],
    ) {
        let win = self.win;
        let [id, ih, iw] = win.input;
        let [_, kh_n, kw_n] = win.kernel;
        let (is, taps, sw) = (win.in_size(), win.kernel_size(), win.strides[2]);
        for (kk, dst) in out.chunks_exact_mut(W).take(kn).enumerate() {
            let row = k0 + kk;
            let (c, t) = (row / taps, row % taps);
            let (kd, kh, kw) = (t / (kh_n * kw_n), t / kw_n % kh_n, t % kw_n);
            let xc = &self.x[c * is..(c + 1) * is];
            let (lo, hi) = win.valid_range(2, kw);
            dst.fill(0.0);
            for r in runs {
                let (zd, zh) = (win.coord(0, r.d, kd), win.coord(1, r.h, kh));
                if zd < 0 || zd >= id as isize || zh < 0 || zh >= ih as isize {
                    continue;
                }
                let (a, b) = (lo.clamp(r.w0, r.w0 + r.len), hi.clamp(r.w0, r.w0 + r.len));
                if a < b {
                    let start = (((zd as usize * ih + zh as usize) * iw) as isize
                        + win.coord(2, a, kw)) as usize;
                    gather_strided(&mut dst[r.j + a - r.w0..r.j + b - r.w0], &xc[start..], sw);
                }
            }
            debug_assert!(dst[nc..].iter().all(|&v| v == 0.0));
        }
    }
}

/// Gather `x` (`channels` × input positions) into `col` (`channels·K` × output positions);
/// positions in the padding read `T::zero()`.
pub fn im2col<T: Elem>(x: &[T], channels: usize, w: &Window3, col: &mut [T]) {
    im2col_rows(x, channels, w, 0, w.output[0] * w.output[1], col);
}

/// [`im2col`] for the output rows `r0..r1` only (a row is one `(d, h)` pair of the flattened
/// output, `w.output[2]` positions long): `col` is `channels·K` × `(r1 - r0)·w.output[2]`.
/// Lets a convolution work through its output in tiles with a small column buffer.
pub fn im2col_rows<T: Elem>(x: &[T], channels: usize, w: &Window3, r0: usize, r1: usize, col: &mut [T]) {
    if same_width_s1(w) {
        im2col_shifted(x, channels, w, r0 * w.output[2], r1 * w.output[2], col);
    } else {
        im2col_rows_runs(x, channels, w, r0, r1, col);
    }
}

/// [`im2col_rows`] for any window: per matrix row, a run per output row.
fn im2col_rows_runs<T: Elem>(x: &[T], channels: usize, w: &Window3, r0: usize, r1: usize, col: &mut [T]) {
    let in_sz = w.in_size();
    let [ih, iw] = [w.input[1], w.input[2]];
    let [_, oh, ow] = w.output;
    let out_sz = (r1 - r0) * ow;
    let mut row = 0;
    for c in 0..channels {
        let xc = &x[c * in_sz..(c + 1) * in_sz];
        for kd in 0..w.kernel[0] {
            for kh in 0..w.kernel[1] {
                for kw in 0..w.kernel[2] {
                    let dst = &mut col[row * out_sz..(row + 1) * out_sz];
                    row += 1;
                    let (lo, hi) = w.valid_range(2, kw);
                    let sw = w.strides[2];
                    for r in r0..r1 {
                        let (d, h) = (r / oh, r % oh);
                        let zd = w.coord(0, d, kd);
                        let out = &mut dst[(r - r0) * ow..(r - r0 + 1) * ow];
                        let zh = w.coord(1, h, kh);
                        if zd < 0 || zd >= w.input[0] as isize || zh < 0 || zh >= ih as isize {
                            out.fill(T::zero());
                            continue;
                        }
                        zero_short(&mut out[..lo]);
                        zero_short(&mut out[hi..]);
                        if lo < hi {
                            let base = (zd as usize * ih + zh as usize) * iw;
                            let start = (base as isize + w.coord(2, lo, kw)) as usize;
                            let src = &xc[start..];
                            gather_strided(&mut out[lo..hi], src, sw);
                        }
                    }
                }
            }
        }
    }
}

/// Whether [`im2col_shifted`] applies: 2-D, stride 1, output rows as wide as the input's
/// ("same" padding: 3×3 with padding 1, 5×5 with 2, …).
fn same_width_s1(w: &Window3) -> bool {
    w.input[0] == 1 && w.output[0] == 1 && w.kernel[0] == 1 && w.strides[1] == 1 && w.strides[2] == 1 && w.output[2] == w.input[2]
}

/// [`im2col_rows`] (and [`im2col_cols`]) for [`same_width_s1`] windows, over the output
/// positions `p0..p1`. There, a row of the column matrix is the input read from one fixed
/// offset (the kernel tap's), so each is one contiguous copy of the positions whose input row
/// exists, then zeros at each output row's ends (the positions that read the padding, which the
/// copy filled from the next or previous row). The run-per-output-row loop spent more on each
/// 14- or 7-wide run than on copying it (DenseNet's 14×14 convolutions 0.72× the time).
fn im2col_shifted<T: Elem>(x: &[T], channels: usize, w: &Window3, p0: usize, p1: usize, col: &mut [T]) {
    let in_sz = w.in_size();
    let (ih, ow) = (w.input[1], w.output[2]);
    let n = p1 - p0;
    let mut row = 0;
    for c in 0..channels {
        let xc = &x[c * in_sz..(c + 1) * in_sz];
        for kh in 0..w.kernel[1] {
            // Positions whose input row for this tap exists: output rows r with r + dy in 0..ih.
            let dy = (kh * w.dilations[1]) as isize - w.pads_begin[1];
            let qa = ((-dy).max(0) * ow as isize).clamp(p0 as isize, p1 as isize);
            let qb = ((ih as isize - dy).max(0) * ow as isize).clamp(qa, p1 as isize);
            for kw in 0..w.kernel[2] {
                let dst = &mut col[row * n..(row + 1) * n];
                row += 1;
                let dx = (kw * w.dilations[2]) as isize - w.pads_begin[2];
                let (a, b) = ((qa - p0 as isize) as usize, (qb - p0 as isize) as usize);
                dst[..a].fill(T::zero());
                dst[b..].fill(T::zero());
                if a == b {
                    continue;
                }
                // Position q reads input element q + shift (where valid). Only the first or
                // last few can fall outside the plane, and those read the padding.
                let shift = dy * ow as isize + dx;
                let (sa, sb) = ((qa + shift).max(0) - shift, (qb + shift).min(in_sz as isize) - shift);
                let run = &mut dst[a..b];
                let (ua, ub) = (((sa - qa).max(0) as usize).min(b - a), ((sb - qa).max(0) as usize).min(b - a));
                zero_short(&mut run[..ua]);
                if ua < ub {
                    run[ua..ub].copy_from_slice(&xc[(qa + ua as isize + shift) as usize..(qa + ub as isize + shift) as usize]);
                }
                zero_short(&mut run[ub.max(ua)..]);
                // Each output row's padding positions: columns 0..lo and hi..ow.
                let (lo, hi) = w.valid_range(2, kw);
                if lo > 0 || hi < ow {
                    let mut q = qa as usize;
                    while q < qb as usize {
                        let (r, j) = (q / ow, q % ow);
                        let end = ((r + 1) * ow).min(qb as usize);
                        let (z0, z1) = (j, lo.min(end - r * ow));
                        if z0 < z1 {
                            zero_short(&mut run[r * ow + z0 - qa as usize..r * ow + z1 - qa as usize]);
                        }
                        let (z0, z1) = (hi.max(j), end - r * ow);
                        if z0 < z1 {
                            zero_short(&mut run[r * ow + z0 - qa as usize..r * ow + z1 - qa as usize]);
                        }
                        q = end;
                    }
                }
            }
        }
    }
}

/// [`im2col`] for the flattened output positions `p0..p1` only (any range, rows need not be
/// whole): `col` is `channels·K` × `(p1 - p0)`. Lets threads each gather the columns they
/// multiply. (Whole rows go through [`im2col_rows`], which skips this one's per-run range
/// arithmetic: measurable on 28-wide rows.)
pub fn im2col_cols<T: Elem>(x: &[T], channels: usize, w: &Window3, p0: usize, p1: usize, col: &mut [T]) {
    if same_width_s1(w) {
        if p0 < p1 {
            im2col_shifted(x, channels, w, p0, p1, col);
        }
    } else {
        im2col_cols_runs(x, channels, w, p0, p1, col);
    }
}

/// [`im2col_cols`] for any window: per matrix row, a run per output row touched.
fn im2col_cols_runs<T: Elem>(x: &[T], channels: usize, w: &Window3, p0: usize, p1: usize, col: &mut [T]) {
    let in_sz = w.in_size();
    let [ih, iw] = [w.input[1], w.input[2]];
    let [_, oh, ow] = w.output;
    if p1 <= p0 || ow == 0 {
        return;
    }
    let out_sz = p1 - p0;
    let (r0, r1) = (p0 / ow, (p1 - 1) / ow + 1);
    let mut row = 0;
    for c in 0..channels {
        let xc = &x[c * in_sz..(c + 1) * in_sz];
        for kd in 0..w.kernel[0] {
            for kh in 0..w.kernel[1] {
                for kw in 0..w.kernel[2] {
                    let dst = &mut col[row * out_sz..(row + 1) * out_sz];
                    row += 1;
                    let (lo, hi) = w.valid_range(2, kw);
                    let sw = w.strides[2];
                    for r in r0..r1 {
                        // This row's positions s..e (of 0..ow) that are in p0..p1.
                        let (s, e) = (p0.max(r * ow) - r * ow, p1.min((r + 1) * ow) - r * ow);
                        let (d, h) = (r / oh, r % oh);
                        let zd = w.coord(0, d, kd);
                        let at = r * ow + s - p0;
                        let out = &mut dst[at..at + (e - s)];
                        let zh = w.coord(1, h, kh);
                        if zd < 0 || zd >= w.input[0] as isize || zh < 0 || zh >= ih as isize {
                            out.fill(T::zero());
                            continue;
                        }
                        // Valid positions of this run: lo..hi ∩ s..e.
                        let (vlo, vhi) = (lo.clamp(s, e), hi.clamp(s, e));
                        let (vlo, vhi) = (vlo, vhi.max(vlo));
                        zero_short(&mut out[..vlo - s]);
                        zero_short(&mut out[vhi - s..]);
                        if vlo < vhi {
                            let base = (zd as usize * ih + zh as usize) * iw;
                            let start = (base as isize + w.coord(2, vlo, kw)) as usize;
                            let src = &xc[start..];
                            gather_strided(&mut out[vlo - s..vhi - s], src, sw);
                        }
                    }
                }
            }
        }
    }
}

/// `dst.copy_from_slice(src)` without a `memcpy` call for the short runs of narrow outputs
/// (14 or 7 wide: a call per run took a fifth of DenseNet's 14×14 convolutions): two
/// overlapping fixed-size copies cover any length from their size to twice it.
#[inline(always)]
fn copy_short<T: Elem>(dst: &mut [T], src: &[T]) {
    #[inline(always)]
    fn two<T: Elem, const N: usize>(dst: &mut [T], src: &[T]) {
        let l = dst.len();
        let a: [T; N] = src[..N].try_into().expect("N elements");
        let b: [T; N] = src[l - N..l].try_into().expect("N elements");
        dst[..N].copy_from_slice(&a);
        dst[l - N..].copy_from_slice(&b);
    }
    match dst.len() {
        0 => {}
        1 => dst[0] = src[0],
        2..=3 => {
            let l = dst.len();
            dst[0] = src[0];
            dst[1] = src[1];
            dst[l - 1] = src[l - 1];
        }
        4..=7 => two::<T, 4>(dst, src),
        8..=15 => two::<T, 8>(dst, src),
        16..=32 => two::<T, 16>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

/// `dst.fill(0)` without a `memset` call: the padding at a row's ends is 0…3 elements.
#[inline(always)]
fn zero_short<T: Elem>(dst: &mut [T]) {
    if dst.len() <= 4 {
        for v in dst.iter_mut() {
            *v = T::zero();
        }
    } else {
        dst.fill(T::zero());
    }
}

/// `dst[j] = src[j · sw]`: a copy for stride 1; strides 2 and 4 (first convolutions of
/// ResNet, Inception, SqueezeNet, ShuffleNet) with the stride known at compile time and no
/// bounds check per element, so LLVM vectorizes them.
#[inline]
fn gather_strided<T: Elem>(dst: &mut [T], src: &[T], sw: usize) {
    #[inline(always)]
    fn fixed<T: Elem, const S: usize>(dst: &mut [T], src: &[T]) {
        let Some((last, body)) = dst.split_last_mut() else { return };
        for (o, c) in body.iter_mut().zip(src.chunks_exact(S)) {
            *o = c[0];
        }
        *last = src[body.len() * S];
    }
    match sw {
        1 => copy_short(dst, &src[..dst.len()]),
        2 => fixed::<T, 2>(dst, src),
        4 => fixed::<T, 4>(dst, src),
        _ => dst.iter_mut().enumerate().for_each(|(j, o)| *o = src[j * sw]),
    }
}

/// Adjoint of [`im2col`]: scatter-add `col` (`channels·K` × output positions) into `x`
/// (`channels` × input positions); positions in the padding are dropped.
pub fn col2im<T: Elem>(col: &[T], channels: usize, w: &Window3, x: &mut [T]) {
    let (in_sz, out_sz) = (w.in_size(), w.out_size());
    let [ih, iw] = [w.input[1], w.input[2]];
    let [od, oh, ow] = w.output;
    let mut row = 0;
    for c in 0..channels {
        let xc = &mut x[c * in_sz..(c + 1) * in_sz];
        for kd in 0..w.kernel[0] {
            for kh in 0..w.kernel[1] {
                for kw in 0..w.kernel[2] {
                    let src = &col[row * out_sz..(row + 1) * out_sz];
                    row += 1;
                    let (lo, hi) = w.valid_range(2, kw);
                    let sw = w.strides[2];
                    for d in 0..od {
                        let zd = w.coord(0, d, kd);
                        for h in 0..oh {
                            let zh = w.coord(1, h, kh);
                            if zd < 0 || zd >= w.input[0] as isize || zh < 0 || zh >= ih as isize || lo >= hi {
                                continue;
                            }
                            let s = &src[(d * oh + h) * ow..(d * oh + h + 1) * ow];
                            let base = (zd as usize * ih + zh as usize) * iw;
                            let start = (base as isize + w.coord(2, lo, kw)) as usize;
                            for (j, &v) in s[lo..hi].iter().enumerate() {
                                let p = start + j * sw;
                                xc[p] = xc[p].add(v);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use alloc::vec;

    /// Output size of one dim.
    fn out(i: usize, k: usize, s: usize, d: usize, pb: isize, pe: isize) -> usize {
        ((i as isize + pb + pe - (d * (k - 1) + 1) as isize) / s as isize + 1) as usize
    }

    /// input, kernel, strides, dilations, pads (top, left, bottom, right)
    type Case = ([usize; 2], [usize; 2], [usize; 2], [usize; 2], [isize; 4]);

    /// A case's window, its output dims, an input of `ch` channels and the whole im2col matrix.
    fn matrix_of(&(i, k, s, d, p): &Case, ch: usize) -> (Window3, [usize; 2], vec::Vec<f32>, vec::Vec<f32>) {
        let o = [out(i[0], k[0], s[0], d[0], p[0], p[2]), out(i[1], k[1], s[1], d[1], p[1], p[3])];
        let w = Window3::new(&i, &o, &k, &s, &d, &[p[0], p[1]], &[p[2], p[3]]).expect("window");
        let x: vec::Vec<f32> = (0..ch * w.in_size()).map(|v| v as f32 + 1.0).collect();
        let mut whole = vec![0f32; ch * w.kernel_size() * w.out_size()];
        im2col(&x, ch, &w, &mut whole);
        (w, o, x, whole)
    }

    /// Every range of columns gathers exactly those columns of the whole matrix, for strided,
    /// dilated, padded and cropped windows (runs starting and ending inside rows included).
    #[test]
    fn column_ranges_match_the_whole_matrix() {
        let cases: &[Case] = &[
            ([7, 9], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            ([11, 10], [3, 3], [2, 2], [1, 1], [0, 0, 0, 0]),
            ([9, 13], [5, 3], [2, 1], [1, 2], [2, 0, 1, 2]),
            ([8, 8], [2, 2], [4, 4], [1, 1], [0, 1, 0, 1]),
            ([6, 12], [3, 3], [1, 3], [2, 1], [-1, 2, 0, 1]),
        ];
        for case @ &(i, k, s, d, p) in cases {
            let ch = 3;
            let (w, o, x, whole) = matrix_of(case, ch);
            let (rows, n) = (ch * w.kernel_size(), w.out_size());
            for (p0, p1) in [(0, n), (1, n - 1), (o[1] - 1, 2 * o[1] + 1), (n / 2, n / 2 + 1), (3, 3 + o[1]), (n - 2, n)] {
                let (p0, p1) = (p0.min(n - 1), p1.min(n));
                let mut part = vec![f32::NAN; rows * (p1 - p0)];
                im2col_cols(&x, ch, &w, p0, p1, &mut part);
                for r in 0..rows {
                    assert_eq!(&part[r * (p1 - p0)..(r + 1) * (p1 - p0)], &whole[r * n + p0..r * n + p1], "{i:?} {k:?} {s:?} {d:?} {p:?} cols {p0}..{p1} row {r}");
                }
            }
        }
    }

    /// An image's panels hold exactly the im2col matrix's elements (zeros past the last
    /// column), for the masked path (same-width windows, panels crossing output rows and the
    /// plane's ends) and the per-run path (strided, dilated, padded, cropped windows), any
    /// first row and first column.
    #[test]
    fn image_panels_match_the_matrix() {
        let cases: &[Case] = &[
            ([7, 9], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            ([3, 5], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            ([9, 11], [5, 5], [1, 1], [1, 1], [2, 2, 2, 2]),
            ([10, 8], [3, 3], [1, 1], [2, 2], [2, 2, 2, 2]),
            ([8, 6], [3, 3], [1, 1], [1, 1], [-1, -1, 3, 3]),
            ([11, 10], [3, 3], [2, 2], [1, 1], [0, 0, 0, 0]),
            ([9, 13], [5, 3], [2, 1], [1, 2], [2, 0, 1, 2]),
            ([6, 12], [3, 3], [1, 3], [2, 1], [-1, 2, 0, 1]),
            ([12, 12], [7, 7], [1, 1], [1, 1], [3, 3, 3, 3]),
        ];
        const W: usize = 16;
        for case @ &(i, k, s, d, p) in cases {
            let ch = 3;
            let (w, o, x, whole) = matrix_of(case, ch);
            let (rows, n) = (ch * w.kernel_size(), w.out_size());
            for p0 in [0, 1, o[1] - 1, n / 2] {
                let img = Image::new(&x, ch, &w, p0, n - p0);
                assert_eq!((img.rows(), img.cols()), (rows, n - p0));
                for (k0, kn) in [(0, rows), (1, rows - 1), (rows / 2, 2)] {
                    for j0 in (0..n - p0).step_by(5) {
                        let nc = (n - p0 - j0).min(W);
                        let mut panel = vec![f32::NAN; kn * W];
                        img.pack_panel::<W>(k0, kn, j0, nc, &mut panel);
                        for r in 0..kn {
                            let want: vec::Vec<f32> = (0..W)
                                .map(|j| {
                                    if j < nc {
                                        whole[(k0 + r) * n + p0 + j0 + j]
                                    } else {
                                        0.0
                                    }
                                })
                                .collect();
                            assert_eq!(
                                &panel[r * W..(r + 1) * W],
                                &want[..],
                                "{i:?} {k:?} {s:?} {d:?} {p:?} p0 {p0} row {} cols {j0}..",
                                k0 + r
                            );
                        }
                    }
                }
            }
        }
    }

    /// The shifted-copy im2col gives exactly the run-per-row one on "same"-width windows:
    /// padding 1 and 2, dilation 2, asymmetric and negative (cropping) padding, whole-row
    /// ranges and column ranges that start and end inside rows.
    #[test]
    fn shifted_rows_match_runs() {
        type Case = ([usize; 2], [usize; 2], [usize; 2], [isize; 4]);
        let cases: &[Case] = &[
            ([14, 14], [3, 3], [1, 1], [1, 1, 1, 1]),
            ([7, 7], [3, 3], [1, 1], [1, 1, 1, 1]),
            ([9, 11], [5, 5], [1, 1], [2, 2, 2, 2]),
            ([10, 8], [3, 3], [2, 2], [2, 2, 2, 2]),
            ([6, 9], [3, 3], [1, 1], [0, 0, 2, 2]),
            ([8, 6], [3, 3], [1, 1], [-1, -1, 3, 3]),
            ([5, 4], [1, 3], [1, 1], [0, 1, 0, 1]),
        ];
        for &(i, k, d, p) in cases {
            let o = [out(i[0], k[0], 1, d[0], p[0], p[2]), out(i[1], k[1], 1, d[1], p[1], p[3])];
            let w = Window3::new(&i, &o, &k, &[1, 1], &d, &[p[0], p[1]], &[p[2], p[3]]).expect("window");
            assert!(same_width_s1(&w), "{i:?} {k:?} {p:?}");
            let ch = 2;
            let x: vec::Vec<f32> = (0..ch * w.in_size()).map(|v| v as f32 + 1.0).collect();
            let rows = ch * w.kernel_size();
            for (r0, r1) in [(0, o[0]), (1, o[0] - 1), (o[0] - 1, o[0]), (0, 1)] {
                let n = (r1 - r0) * o[1];
                let (mut a, mut b) = (vec![f32::NAN; rows * n], vec![f32::NAN; rows * n]);
                im2col_shifted(&x, ch, &w, r0 * o[1], r1 * o[1], &mut a);
                im2col_rows_runs(&x, ch, &w, r0, r1, &mut b);
                assert_eq!(a, b, "{i:?} {k:?} {d:?} {p:?} rows {r0}..{r1}");
            }
            let n = w.out_size();
            for (p0, p1) in [(0, n), (1, n - 1), (o[1] - 1, 2 * o[1] + 1), (n / 2, n / 2 + 1), (3, 3 + o[1]), (n - 2, n)] {
                let (p0, p1) = (p0.min(n - 1), p1.min(n));
                let (mut a, mut b) = (vec![f32::NAN; rows * (p1 - p0)], vec![f32::NAN; rows * (p1 - p0)]);
                im2col_shifted(&x, ch, &w, p0, p1, &mut a);
                im2col_cols_runs(&x, ch, &w, p0, p1, &mut b);
                assert_eq!(a, b, "{i:?} {k:?} {d:?} {p:?} cols {p0}..{p1}");
            }
        }
    }
}
