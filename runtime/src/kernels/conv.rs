//! Grouped N-d convolution (N <= 3) and transposed convolution as im2col/col2im + GEMM.
//! The GEMM is passed in, so f32/f64 use the packed SIMD kernels and other types the generic
//! loop; [`conv_f32`]/[`conv_f64`] and the `*_transpose_*` helpers wire the usual choices.
use super::gemm::{self, Layout};
use super::im2col::{col2im, col_len, im2col};
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

/// `c = a @ b` (m×k @ k×n), `c` row-major m×n, overwritten.
pub trait MatMul<T> {
    #[allow(clippy::too_many_arguments)]
    fn mm(&self, m: usize, k: usize, n: usize, a: &[T], la: Layout, b: &[T], lb: Layout, c: &mut [T]);
}

/// Packed f32 GEMM.
pub struct Sgemm;
impl MatMul<f32> for Sgemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[f32], la: Layout, b: &[f32], lb: Layout, c: &mut [f32]) {
        gemm::sgemm(m, k, n, 1.0, a, la, b, lb, 0.0, c, Layout::row_major(n));
    }
}
/// Packed f64 GEMM.
pub struct Dgemm;
impl MatMul<f64> for Dgemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[f64], la: Layout, b: &[f64], lb: Layout, c: &mut [f64]) {
        gemm::dgemm(m, k, n, 1.0, a, la, b, lb, 0.0, c, Layout::row_major(n));
    }
}
/// Plain-loop GEMM for any element type.
pub struct GenericGemm;
impl<T: Elem> MatMul<T> for GenericGemm {
    fn mm(&self, m: usize, k: usize, n: usize, a: &[T], la: Layout, b: &[T], lb: Layout, c: &mut [T]) {
        gemm::gemm_generic(m, k, n, a, la, b, lb, c, Layout::row_major(n));
    }
}

/// Scratch elements [`conv`] needs (0 for pointwise convolutions).
pub fn conv_scratch_len(d: &ConvDims, w: &Window3) -> usize {
    if w.is_pointwise() {
        0
    } else {
        col_len(d.c_in / d.group, w)
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
            let b: &[T] = if win.is_pointwise() {
                xg
            } else {
                let col = &mut col[..kdim * os];
                im2col(xg, cg, win, col);
                col
            };
            mm.mm(mg, kdim, os, wg, Layout::row_major(kdim), b, Layout::row_major(os), yg);
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
            mm.mm(mk, cg, xs, wg, Layout::col_major(mk), xg, Layout::row_major(xs), col);
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
        ];
        for (i, &(batch, c_in, c_out, group, h, wd, kh, kw, s, dl, pb, pe)) in cases.iter().enumerate() {
            let d = ConvDims { batch, c_in, c_out, group };
            let (oh, ow) = (out_dim(h, kh, s, dl, pb, pe), out_dim(wd, kw, s, dl, pb, pe));
            let win = Window3::new(&[h, wd], &[oh, ow], &[kh, kw], &[s, s], &[dl, dl], &[pb, pb], &[pe, pe]).unwrap();
            let x = rnd(batch * c_in * h * wd, i as u32 + 1);
            let w = rnd(c_out * (c_in / group) * kh * kw, i as u32 + 100);
            let b = rnd(c_out, i as u32 + 200);
            let mut y = vec![0f32; batch * c_out * oh * ow];
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
