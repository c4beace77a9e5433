//! Grouped N-d convolution (N <= 3) and transposed convolution as im2col/col2im + GEMM.
//! The GEMM is passed in, so f32/f64 use the packed SIMD kernels and other types the generic
//! loop; [`conv_f32`]/[`conv_f64`] and the `*_transpose_*` helpers wire the usual choices.
use super::gemm::{self, Layout};
use super::im2col::{col2im, im2col_rows};
use super::window::Window3;
use crate::elem::Elem;

/// Channel counts of a convolution. `c_in` and `c_out` are multiples of `group`.
#[derive(Clone, Copy, Debug)]
pub struct ConvDims {
    pub batch: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub group: usize,
}

/// `c = a @ b` (m×k @ k×n), `c` row-major m×n with rows `ldc` apart, overwritten.
pub trait MatMul<T> {
    #[allow(clippy::too_many_arguments)]
    fn mm(&self, m: usize, k: usize, n: usize, a: &[T], la: Layout, b: &[T], lb: Layout, c: &mut [T], ldc: usize);
}

/// Packed f32 GEMM.
pub struct Sgemm;
impl MatMul<f32> for Sgemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[f32], la: Layout, b: &[f32], lb: Layout, c: &mut [f32], ldc: usize) {
        gemm::sgemm(m, k, n, 1.0, a, la, b, lb, 0.0, c, Layout::row_major(ldc));
    }
}
/// Packed f64 GEMM.
pub struct Dgemm;
impl MatMul<f64> for Dgemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[f64], la: Layout, b: &[f64], lb: Layout, c: &mut [f64], ldc: usize) {
        gemm::dgemm(m, k, n, 1.0, a, la, b, lb, 0.0, c, Layout::row_major(ldc));
    }
}
/// Plain-loop GEMM for any element type.
pub struct GenericGemm;
impl<T: Elem> MatMul<T> for GenericGemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[T], la: Layout, b: &[T], lb: Layout, c: &mut [T], ldc: usize) {
        gemm::gemm_generic(m, k, n, a, la, b, lb, c, Layout::row_major(ldc));
    }
}

/// Column buffers above this many elements are split into tiles of whole output rows.
const COL_TILE_ELEMS: usize = 1 << 18;
/// ... but a tile keeps at least this many output positions, so the GEMM's packing of the
/// weights (once per tile) stays small next to its arithmetic.
const MIN_TILE_COLS: usize = 512;

/// Output rows (`(d, h)` pairs, `w.output[2]` positions each) per im2col tile.
pub fn conv_tile_rows(d: &ConvDims, w: &Window3) -> usize {
    let rows = w.output[0] * w.output[1];
    let row_elems = (d.c_in / d.group) * w.kernel_size() * w.output[2];
    if rows == 0 || row_elems == 0 || rows * row_elems <= COL_TILE_ELEMS {
        return rows.max(1);
    }
    let by_cap = COL_TILE_ELEMS / row_elems;
    let by_min = MIN_TILE_COLS.div_ceil(w.output[2].max(1));
    by_cap.max(by_min).clamp(1, rows)
}

/// Scratch elements [`conv`] needs (0 for pointwise convolutions).
pub fn conv_scratch_len(d: &ConvDims, w: &Window3) -> usize {
    if w.is_pointwise() {
        0
    } else {
        (d.c_in / d.group) * w.kernel_size() * conv_tile_rows(d, w) * w.output[2]
    }
}

/// `y[n, m, ·] = Σ_c,k w[m, c, k] · x[n, g·Cg + c, window(k)] + bias[m]`.
/// Shapes: x `[batch, c_in, input…]`, w `[c_out, c_in/group, kernel…]`, y `[batch, c_out,
/// output…]`, `col` at least [`conv_scratch_len`].
#[allow(clippy::too_many_arguments)]
pub fn conv<T: Elem>(x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], d: &ConvDims, win: &Window3, col: &mut [T], mm: &impl MatMul<T>) {
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let (is, os, ks) = (win.in_size(), win.out_size(), win.kernel_size());
    let kdim = cg * ks;
    for n in 0..d.batch {
        for g in 0..d.group {
            let xg = &x[(n * d.c_in + g * cg) * is..(n * d.c_in + (g + 1) * cg) * is];
            let wg = &w[g * mg * kdim..(g + 1) * mg * kdim];
            let yg = &mut y[(n * d.c_out + g * mg) * os..(n * d.c_out + (g + 1) * mg) * os];
            if win.is_pointwise() {
                mm.mm(mg, kdim, os, wg, Layout::row_major(kdim), xg, Layout::row_major(os), yg, os);
                continue;
            }
            // Through the output in tiles of whole rows: y[:, tile] = wg @ im2col(tile).
            let (rows, ow) = (win.output[0] * win.output[1], win.output[2]);
            let tile = conv_tile_rows(d, win);
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + tile).min(rows);
                let cols = (r1 - r0) * ow;
                let col = &mut col[..kdim * cols];
                im2col_rows(xg, cg, win, r0, r1, col);
                mm.mm(mg, kdim, cols, wg, Layout::row_major(kdim), col, Layout::row_major(cols), &mut yg[r0 * ow..], os);
                r0 = r1;
            }
        }
        if let Some(bias) = bias {
            add_bias(&mut y[n * d.c_out * os..(n + 1) * d.c_out * os], bias, os);
        }
    }
}

/// Scratch elements [`conv_transpose`] needs.
pub fn conv_transpose_scratch_len(d: &ConvDims, w: &Window3) -> usize {
    (d.c_out / d.group) * w.kernel_size() * w.out_size()
}

/// Transposed convolution, the adjoint of [`conv`] in `x`: x `[batch, c_in, X…]`, w `[c_in,
/// c_out/group, kernel…]`, y `[batch, c_out, Y…]`. `win` is the geometry of the forward conv
/// that maps Y to X (`win.input` = Y's spatial size, `win.output` = X's).
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose<T: Elem>(x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], d: &ConvDims, win: &Window3, col: &mut [T], mm: &impl MatMul<T>) {
    let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
    let (ys, xs, ks) = (win.in_size(), win.out_size(), win.kernel_size());
    let mk = mg * ks;
    y.fill(T::zero());
    for n in 0..d.batch {
        for g in 0..d.group {
            let xg = &x[(n * d.c_in + g * cg) * xs..(n * d.c_in + (g + 1) * cg) * xs];
            let wg = &w[g * cg * mk..(g + 1) * cg * mk];
            let col = &mut col[..mk * xs];
            // col (mk × xs) = wgᵀ (mk × cg) @ xg (cg × xs)
            mm.mm(mk, cg, xs, wg, Layout::col_major(mk), xg, Layout::row_major(xs), col, xs);
            let yg = &mut y[(n * d.c_out + g * mg) * ys..(n * d.c_out + (g + 1) * mg) * ys];
            col2im(col, mg, win, yg);
        }
        if let Some(bias) = bias {
            add_bias(&mut y[n * d.c_out * ys..(n + 1) * d.c_out * ys], bias, ys);
        }
    }
}

fn add_bias<T: Elem>(y: &mut [T], bias: &[T], plane: usize) {
    for (yc, &b) in y.chunks_exact_mut(plane.max(1)).zip(bias) {
        for v in yc {
            *v = v.add(b);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn rnd(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2000) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Direct loop over 2-D inputs (spatial dims given as 3-D with a leading 1).
    fn naive(x: &[f32], w: &[f32], b: &[f32], d: &ConvDims, win: &Window3) -> Vec<f32> {
        let (cg, mg) = (d.c_in / d.group, d.c_out / d.group);
        let (is, os, ks) = (win.in_size(), win.out_size(), win.kernel_size());
        let mut y = vec![0f32; d.batch * d.c_out * os];
        for n in 0..d.batch {
            for m in 0..d.c_out {
                let g = m / mg;
                for oh in 0..win.output[1] {
                    for ow in 0..win.output[2] {
                        let mut acc = b[m];
                        for c in 0..cg {
                            for kh in 0..win.kernel[1] {
                                for kw in 0..win.kernel[2] {
                                    let ih = win.coord(1, oh, kh);
                                    let iw = win.coord(2, ow, kw);
                                    if ih < 0 || iw < 0 || ih >= win.input[1] as isize || iw >= win.input[2] as isize {
                                        continue;
                                    }
                                    let xv = x[(n * d.c_in + g * cg + c) * is + ih as usize * win.input[2] + iw as usize];
                                    let wv = w[(m * cg + c) * ks + kh * win.kernel[2] + kw];
                                    acc += xv * wv;
                                }
                            }
                        }
                        y[(n * d.c_out + m) * os + oh * win.output[2] + ow] = acc;
                    }
                }
            }
        }
        y
    }

    fn out_dim(i: usize, k: usize, s: usize, dl: usize, pb: isize, pe: isize) -> usize {
        ((i as isize + pb + pe - ((k - 1) * dl + 1) as isize) / s as isize + 1) as usize
    }

    #[test]
    fn conv_matches_naive() {
        let cases = [
            // batch, c_in, c_out, group, h, w, kh, kw, s, dil, pb, pe
            (1, 3, 4, 1, 7, 6, 3, 3, 1, 1, 1, 1),
            (2, 4, 6, 2, 8, 9, 3, 2, 2, 1, 0, 1),
            (1, 6, 6, 6, 7, 7, 3, 3, 1, 2, 2, 2),
            (1, 4, 8, 4, 9, 5, 1, 3, 2, 1, 1, 0),
            (2, 3, 5, 1, 5, 5, 1, 1, 1, 1, 0, 0),
            (1, 2, 3, 1, 10, 4, 4, 1, 3, 2, 2, 3),
            // Large enough that the column buffer is tiled (checked below).
            (1, 16, 4, 1, 64, 70, 3, 3, 1, 1, 1, 1),
            (2, 8, 6, 2, 130, 90, 5, 5, 2, 1, 2, 2),
        ];
        for (i, &(batch, c_in, c_out, group, h, wd, kh, kw, s, dl, pb, pe)) in cases.iter().enumerate() {
            let d = ConvDims { batch, c_in, c_out, group };
            let (oh, ow) = (out_dim(h, kh, s, dl, pb, pe), out_dim(wd, kw, s, dl, pb, pe));
            let win = Window3::new(&[h, wd], &[oh, ow], &[kh, kw], &[s, s], &[dl, dl], &[pb, pb], &[pe, pe]).unwrap();
            let x = rnd(batch * c_in * h * wd, i as u32 + 1);
            let w = rnd(c_out * (c_in / group) * kh * kw, i as u32 + 100);
            let b = rnd(c_out, i as u32 + 200);
            let mut y = vec![0f32; batch * c_out * oh * ow];
            if i >= 6 {
                assert!(conv_tile_rows(&d, &win) < oh, "case {i} should tile");
            }
            let mut col = vec![0f32; conv_scratch_len(&d, &win)];
            conv(&x, &w, Some(&b), &mut y, &d, &win, &mut col, &Sgemm);
            let want = naive(&x, &w, &b, &d, &win);
            for (a, e) in y.iter().zip(&want) {
                assert!((a - e).abs() < 1e-4, "case {i}: {a} vs {e}");
            }
        }
    }

    #[test]
    fn conv_transpose_is_adjoint() {
        // <conv(y), x> == <y, convT(x)> without bias.
        let (batch, c_y, c_x, group) = (1, 4, 6, 2);
        let (h, wd, k, s, dl, pb, pe) = (7, 6, 3, 2, 1, 1, 1);
        let (oh, ow) = (out_dim(h, k, s, dl, pb, pe), out_dim(wd, k, s, dl, pb, pe));
        let win = Window3::new(&[h, wd], &[oh, ow], &[k, k], &[s, s], &[dl, dl], &[pb, pb], &[pe, pe]).unwrap();
        let fwd = ConvDims { batch, c_in: c_y, c_out: c_x, group };
        let w = rnd(c_x * (c_y / group) * k * k, 7);
        let yv = rnd(batch * c_y * h * wd, 8);
        let xv = rnd(batch * c_x * oh * ow, 9);
        let mut conv_y = vec![0f32; xv.len()];
        let mut col = vec![0f32; conv_scratch_len(&fwd, &win)];
        conv(&yv, &w, None, &mut conv_y, &fwd, &win, &mut col, &Sgemm);
        let tr = ConvDims { batch, c_in: c_x, c_out: c_y, group };
        let mut ct_x = vec![0f32; yv.len()];
        let mut col = vec![0f32; conv_transpose_scratch_len(&tr, &win)];
        conv_transpose(&xv, &w, None, &mut ct_x, &tr, &win, &mut col, &Sgemm);
        let lhs: f32 = conv_y.iter().zip(&xv).map(|(a, b)| a * b).sum();
        let rhs: f32 = yv.iter().zip(&ct_x).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() < 1e-3 * lhs.abs().max(1.0), "{lhs} vs {rhs}");
    }
}
