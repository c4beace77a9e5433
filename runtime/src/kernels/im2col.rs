//! im2col / col2im over [`Window3`]: the column matrix has one row per (channel, kernel
//! offset) and one column per output position.
use super::window::Window3;
use crate::elem::Elem;

/// Length of the column buffer for `channels` channels.
pub fn col_len(channels: usize, w: &Window3) -> usize {
    channels * w.kernel_size() * w.out_size()
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

    /// Every range of columns gathers exactly those columns of the whole matrix, for strided,
    /// dilated, padded and cropped windows (runs starting and ending inside rows included).
    #[test]
    fn column_ranges_match_the_whole_matrix() {
        /// input, kernel, strides, dilations, pads (top, left, bottom, right)
        type Case = ([usize; 2], [usize; 2], [usize; 2], [usize; 2], [isize; 4]);
        let cases: &[Case] = &[
            ([7, 9], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            ([11, 10], [3, 3], [2, 2], [1, 1], [0, 0, 0, 0]),
            ([9, 13], [5, 3], [2, 1], [1, 2], [2, 0, 1, 2]),
            ([8, 8], [2, 2], [4, 4], [1, 1], [0, 1, 0, 1]),
            ([6, 12], [3, 3], [1, 3], [2, 1], [-1, 2, 0, 1]),
        ];
        for &(i, k, s, d, p) in cases {
            let o = [out(i[0], k[0], s[0], d[0], p[0], p[2]), out(i[1], k[1], s[1], d[1], p[1], p[3])];
            let w = Window3::new(&i, &o, &k, &s, &d, &[p[0], p[1]], &[p[2], p[3]]).expect("window");
            let ch = 3;
            let x: vec::Vec<f32> = (0..ch * w.in_size()).map(|v| v as f32 + 1.0).collect();
            let rows = ch * w.kernel_size();
            let n = w.out_size();
            let mut whole = vec![0f32; rows * n];
            im2col(&x, ch, &w, &mut whole);
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
