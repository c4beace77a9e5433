//! GridSample and AffineGrid over 1 to 3 spatial dims, following the ONNX reference: grid
//! coordinates are denormalized in the element type, then taps and weights are f64.
use crate::math;
use crate::FloatElem;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GridMode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GridPadding {
    Zeros,
    Border,
    Reflection,
}

/// X: [n, c, input…], grid: [n, output…, nsp] (coordinates x, y, z: innermost dim first),
/// Y: [n, c, output…]. Only the first `nsp` entries of `input`/`output` are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridDims {
    pub n: usize,
    pub c: usize,
    pub nsp: usize,
    pub input: [usize; 3],
    pub output: [usize; 3],
}

/// Reflect `x` into [lo, hi] by the nearer border, repeatedly.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    let fold = |dx: f64, near: f64, far: f64, sign: f64| {
        let k = math::trunc(dx / rng);
        let r = dx - k * rng;
        if k % 2.0 == 0.0 {
            near + sign * r
        } else {
            far - sign * r
        }
    };
    if x < lo {
        fold(lo - x, lo, hi, 1.0)
    } else if x > hi {
        fold(x - hi, hi, lo, -1.0)
    } else {
        x
    }
}

/// Keys' cubic convolution weights (a = -0.75) of the four taps around fraction `t`.
fn cubic(t: f64) -> [f64; 4] {
    let a = -0.75;
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// Up to four (index, weight) taps along one dim; `None` index: a zero pixel.
struct Taps {
    idx: [Option<usize>; 4],
    w: [f64; 4],
    len: usize,
}

pub fn grid_sample<T: FloatElem>(x: &[T], grid: &[T], d: &GridDims, mode: GridMode, padding: GridPadding, align_corners: bool, y: &mut [T]) {
    let nsp = d.nsp.clamp(1, 3);
    let in_sz: usize = d.input[..nsp].iter().product();
    let out_sz: usize = d.output[..nsp].iter().product();
    // Valid coordinate range per dim: pixel edges, or pixel centres with align_corners.
    let border = |i: usize| {
        let dim = d.input[i] as f64;
        if align_corners {
            (0.0, dim - 1.0)
        } else {
            (-0.5, dim - 0.5)
        }
    };
    // The pixel index a tap reads (padding decides what lies outside).
    let pixel = |i: usize, k: i64| -> Option<usize> {
        let dim = d.input[i] as i64;
        let k = match padding {
            GridPadding::Zeros => k,
            GridPadding::Border => k.clamp(0, dim - 1),
            GridPadding::Reflection => {
                let (lo, hi) = border(i);
                reflect(k as f64, lo, hi) as i64
            }
        };
        (0..dim).contains(&k).then_some(k as usize)
    };
    let two = T::from_f64(2.0);
    for b in 0..d.n {
        for o in 0..out_sz {
            let g = &grid[(b * out_sz + o) * nsp..(b * out_sz + o + 1) * nsp];
            let mut taps: [Taps; 3] = core::array::from_fn(|_| Taps { idx: [None; 4], w: [1.0, 0.0, 0.0, 0.0], len: 1 });
            for (i, tap) in taps.iter_mut().enumerate().take(nsp) {
                let gv = g[nsp - 1 - i];
                let len = T::from_f64(d.input[i] as f64);
                let xt = if align_corners {
                    gv.add(T::one()).div(two).mul(len.sub(T::one()))
                } else {
                    gv.add(T::one()).mul(len).sub(T::one()).div(two)
                };
                let mut v = xt.to_f64();
                if mode == GridMode::Nearest {
                    v = math::rint(v);
                }
                let (lo, hi) = border(i);
                if v < lo || v > hi {
                    match padding {
                        GridPadding::Border => v = v.clamp(0.0, d.input[i] as f64 - 1.0),
                        GridPadding::Reflection => v = reflect(v, lo, hi),
                        GridPadding::Zeros => {}
                    }
                }
                match mode {
                    GridMode::Nearest => {
                        tap.idx[0] = pixel(i, v as i64);
                        tap.w[0] = 1.0;
                    }
                    GridMode::Linear => {
                        let f = math::floor(v);
                        let t = v - f;
                        *tap = Taps { idx: [pixel(i, f as i64), pixel(i, f as i64 + 1), None, None], w: [1.0 - t, t, 0.0, 0.0], len: 2 };
                    }
                    GridMode::Cubic => {
                        let f = math::floor(v) as i64;
                        let w = cubic(v - f as f64);
                        *tap = Taps { idx: core::array::from_fn(|k| pixel(i, f - 1 + k as i64)), w, len: 4 };
                    }
                }
            }
            let (l0, l1, l2) = (taps[0].len, taps[1].len, taps[2].len);
            for ch in 0..d.c {
                let plane = &x[(b * d.c + ch) * in_sz..(b * d.c + ch + 1) * in_sz];
                let mut acc = 0.0;
                for a in 0..l0 {
                    for bb in 0..l1 {
                        for cc in 0..l2 {
                            let idx = [taps[0].idx[a], taps[1].idx[bb], taps[2].idx[cc]];
                            let w = taps[0].w[a] * taps[1].w[bb] * taps[2].w[cc];
                            let mut flat = 0;
                            let mut inside = true;
                            for (i, k) in idx.iter().enumerate().take(nsp) {
                                match k {
                                    Some(k) => flat = flat * d.input[i] + k,
                                    None => inside = false,
                                }
                            }
                            if inside {
                                acc += w * plane[flat].to_f64();
                            }
                        }
                    }
                }
                y[(b * d.c + ch) * out_sz + o] = T::from_f64(acc);
            }
        }
    }
}

/// ONNX AffineGrid: theta [n, nsp, nsp + 1] maps the base grid (x, y[, z], 1) of `size`
/// (spatial dims, outermost first; 2 or 3 of them) to y [n, size…, nsp].
pub fn affine_grid<T: FloatElem>(theta: &[T], n: usize, size: &[usize], align_corners: bool, y: &mut [T]) {
    let nsp = size.len();
    if !(2..=3).contains(&nsp) {
        return;
    }
    // Base coordinate of index i along a dim of s points.
    let base = |i: usize, s: usize| -> f64 {
        if align_corners {
            if s <= 1 {
                -1.0
            } else {
                -1.0 + i as f64 * (2.0 / (s - 1) as f64)
            }
        } else {
            let step = 2.0 / s as f64;
            (-1.0 + step / 2.0) + i as f64 * step
        }
    };
    let pts: usize = size.iter().product();
    let cols = nsp + 1;
    for b in 0..n {
        let th = &theta[b * nsp * cols..(b + 1) * nsp * cols];
        for p in 0..pts {
            // Homogeneous base point: innermost dim first (x, y, z), then 1.
            let mut h = [0.0f64; 4];
            let mut rest = p;
            for (k, &s) in size.iter().enumerate().rev() {
                h[nsp - 1 - k] = base(rest % s, s);
                rest /= s;
            }
            h[nsp] = 1.0;
            for r in 0..nsp {
                let mut acc = 0.0;
                for (k, hk) in h.iter().enumerate().take(cols) {
                    acc += th[r * cols + k].to_f64() * hk;
                }
                y[(b * pts + p) * nsp + r] = T::from_f64(acc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_grid_reproduces_the_input() {
        // AffineGrid with the identity transform, then GridSample: the input comes back.
        let theta = [1.0f64, 0.0, 0.0, 0.0, 1.0, 0.0];
        let mut g = [0.0f64; 2 * 3 * 2];
        affine_grid(&theta, 1, &[2, 3], false, &mut g);
        let x = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0];
        let d = GridDims { n: 1, c: 1, nsp: 2, input: [2, 3, 1], output: [2, 3, 1] };
        for mode in [GridMode::Nearest, GridMode::Linear] {
            let mut y = [0.0f64; 6];
            grid_sample(&x, &g, &d, mode, GridPadding::Zeros, false, &mut y);
            for (a, b) in y.iter().zip(&x) {
                assert!((a - b).abs() < 1e-12, "{mode:?}: {y:?}");
            }
        }
    }

    #[test]
    fn padding_outside_the_input() {
        // One row [1, 2]; x = 2 (normalized) is pixel 1.5, rounded (half to even) to 2: beyond
        // the right edge.
        let d = GridDims { n: 1, c: 1, nsp: 1, input: [2, 1, 1], output: [1, 1, 1] };
        let x = [1.0f64, 2.0];
        let at = |pad| {
            let mut y = [0.0f64];
            grid_sample(&x, &[2.0], &d, GridMode::Nearest, pad, true, &mut y);
            y[0]
        };
        assert_eq!(at(GridPadding::Zeros), 0.0);
        assert_eq!(at(GridPadding::Border), 2.0);
        // Pixel 2 reflects about the last pixel centre (1) onto 0.
        assert_eq!(at(GridPadding::Reflection), 1.0);
    }
}
