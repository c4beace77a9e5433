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
                        out[..lo].fill(T::zero());
                        out[hi..].fill(T::zero());
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

/// [`im2col`] for the flattened output positions `p0..p1` only (any range, rows need not be
/// whole): `col` is `channels·K` × `(p1 - p0)`. Lets threads each gather the columns they
/// multiply. (Whole rows go through [`im2col_rows`], which skips this one's per-run range
/// arithmetic: measurable on 28-wide rows.)
pub fn im2col_cols<T: Elem>(x: &[T], channels: usize, w: &Window3, p0: usize, p1: usize, col: &mut [T]) {
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
                        out[..vlo - s].fill(T::zero());
                        out[vhi - s..].fill(T::zero());
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
        1 => dst.copy_from_slice(&src[..dst.len()]),
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
}
