//! Resize: each output element a weighted sum over the product of its resized axes' taps
//! (the per-axis filters are separable), the taps of a position computed from the lengths and
//! scale given at run time, as the ONNX reference does: the `n` taps nearest the source
//! coordinate, edge-clamped, with nearest / linear / cubic (optionally antialiased) weights.
//! Works in f64 over any element type; needs no tables and no scratch, so the same call serves
//! the interpreter, fixed shapes and bounded dims.
use crate::math::{floor, rint};
use crate::Elem;

/// How taps are weighted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Nearest,
    Linear,
    Cubic,
}

/// Where output position `y` samples the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    /// Sample the roi; positions outside the input take the extrapolation value.
    TfCropAndResize,
    /// TensorFlow's nearest resize with half-pixel centers: half_pixel without the -0.5.
    TfHalfPixelForNn,
}

/// Which neighbour `Mode::Nearest` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    /// Resize-10 / Upsample: floor when upsampling, ceil when downsampling (ONNX Runtime).
    Simple,
}

/// The resampling filter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Filter {
    pub mode: Mode,
    pub coord: Coord,
    pub nearest: Nearest,
    pub cubic_coeff_a: f64,
    /// Taps outside the input get weight 0 and the rest are renormalized.
    pub exclude_outside: bool,
    /// Linear and cubic filters widen by 1/scale when downsampling.
    pub antialias: bool,
    pub extrapolation_value: f64,
}

/// The most dims a resized tensor may have.
pub const MAX_RANK: usize = 16;

/// One axis: lengths, scale, crop (start, end) and the input stride.
#[derive(Clone, Copy, Default)]
struct Axis {
    in_len: usize,
    out_len: usize,
    scale: f64,
    roi: Option<(f64, f64)>,
    stride: usize,
    active: bool,
}

/// The taps of one output position along an axis: `n` taps from input index `start`
/// (clamped when read), weights `raw(j) / norm`, taps outside the input dropped when `drop`.
#[derive(Clone, Copy, Default)]
struct Taps {
    start: i64,
    n: usize,
    ratio: f64,
    norm: f64,
    drop: bool,
    outside: bool,
}

fn isclose(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

impl Filter {
    /// Source coordinate of output position `y` along one axis.
    fn source(&self, y: f64, ax: &Axis) -> f64 {
        let inw = ax.in_len as f64;
        let scale = ax.scale;
        let outw = scale * inw;
        match self.coord {
            Coord::AlignCorners if outw == 1.0 => 0.0,
            Coord::AlignCorners => y * (inw - 1.0) / (outw - 1.0),
            Coord::Asymmetric => y / scale,
            Coord::TfCropAndResize => {
                let (s, e) = ax.roi.unwrap_or((0.0, 1.0));
                let x = if outw == 1.0 { (e - s) * (inw - 1.0) / 2.0 } else { y * (e - s) * (inw - 1.0) / (outw - 1.0) };
                x + s * (inw - 1.0)
            }
            Coord::PytorchHalfPixel if outw == 1.0 => -0.5,
            Coord::PytorchHalfPixel | Coord::HalfPixel => (y + 0.5) / scale - 0.5,
            Coord::TfHalfPixelForNn => (y + 0.5) / scale,
            Coord::HalfPixelSymmetric => {
                let adjustment = ax.out_len as f64 / outw;
                let center = inw / 2.0;
                center * (1.0 - adjustment) + (y + 0.5) / scale - 0.5
            }
        }
    }

    /// The first tap's offset from the source index, and the tap count, at `scale`.
    fn span(&self, scale: f64) -> (i64, usize) {
        let s = scale.min(1.0);
        match (self.mode, self.antialias) {
            (Mode::Nearest, _) | (Mode::Linear, false) => (0, 2),
            (Mode::Cubic, false) => (-1, 4),
            (Mode::Linear, true) => {
                let start = floor(-1.0 / s) as i64 + 1;
                (start, (2 - 2 * start) as usize)
            }
            (Mode::Cubic, true) => {
                let start = floor(-2.0 / s) as i64 + 1;
                (start, (2 - 2 * start) as usize)
            }
        }
    }

    /// Tap `j`'s weight before normalization, at fractional position `ratio` in (0, 1].
    fn raw(&self, j: usize, ratio: f64, scale: f64) -> f64 {
        let a = self.cubic_coeff_a;
        let (first, _) = self.span(scale);
        let i = (first + j as i64) as f64;
        match (self.mode, self.antialias) {
            (Mode::Nearest, _) => {
                let ceil = ratio == 1.0
                    || match self.nearest {
                        Nearest::RoundPreferFloor => ratio > 0.5,
                        Nearest::RoundPreferCeil => ratio >= 0.5,
                        Nearest::Floor => false,
                        Nearest::Ceil => true,
                        Nearest::Simple => scale < 1.0,
                    };
                if ceil == (j == 1) {
                    1.0
                } else {
                    0.0
                }
            }
            (Mode::Linear, false) => {
                if j == 0 {
                    1.0 - ratio
                } else {
                    ratio
                }
            }
            (Mode::Linear, true) => (1.0 - ((i - ratio) * scale.min(1.0)).abs()).clamp(0.0, 1.0),
            (Mode::Cubic, false) => {
                let (r1, q) = (ratio + 1.0, 1.0 - ratio);
                let q1 = q + 1.0;
                match j {
                    0 => ((a * r1 - 5.0 * a) * r1 + 8.0 * a) * r1 - 4.0 * a,
                    1 => ((a + 2.0) * ratio - (a + 3.0)) * ratio * ratio + 1.0,
                    2 => ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                    _ => ((a * q1 - 5.0 * a) * q1 + 8.0 * a) * q1 - 4.0 * a,
                }
            }
            (Mode::Cubic, true) => {
                let x = (scale.min(1.0) * (i - ratio)).abs();
                let (x2, x3) = (x * x, x * x * x);
                if x <= 1.0 {
                    (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                } else if x < 2.0 {
                    a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            }
        }
    }

    fn taps(&self, y: usize, ax: &Axis) -> Taps {
        let x = self.source(y as f64, ax);
        let outside = self.coord == Coord::TfCropAndResize && (x < 0.0 || x > ax.in_len as f64 - 1.0);
        // Only a wild roi takes x this far (and then the position is extrapolated); keep the
        // index arithmetic far from i64 overflow.
        let x = x.clamp(-1e12, 1e12);
        let xi = floor(x);
        let frac = x - xi;
        let ratio = if frac == 0.0 { 1.0 } else { frac };
        let (_, n) = self.span(ax.scale);
        let ni = n as i64;
        let start = if ni % 2 == 0 { xi as i64 - ni / 2 + i64::from(frac != 0.0) } else { xi as i64 - (ni - 1) / 2 + i64::from(frac > 0.5) };
        let mut t = Taps { start, n, ratio, norm: 1.0, drop: self.exclude_outside, outside };
        // Antialiased filters and dropped taps are normalized to sum 1.
        if self.antialias || self.exclude_outside {
            let sum: f64 = (0..n).filter(|&j| !t.dropped(j, ax.in_len)).map(|j| self.raw(j, ratio, ax.scale)).sum();
            if sum != 0.0 {
                t.norm = sum;
            }
        }
        t
    }

    fn weight(&self, t: &Taps, j: usize, ax: &Axis) -> f64 {
        if t.dropped(j, ax.in_len) {
            0.0
        } else {
            self.raw(j, t.ratio, ax.scale) / t.norm
        }
    }
}

impl Taps {
    fn dropped(&self, j: usize, in_len: usize) -> bool {
        let s = self.start + j as i64;
        self.drop && (s < 0 || s >= in_len as i64)
    }

    /// Input index of tap `j`, clamped into the axis.
    fn index(&self, j: usize, in_len: usize) -> usize {
        (self.start + j as i64).clamp(0, in_len as i64 - 1) as usize
    }
}

/// Whether an axis is resampled (else copied): its scale, length or crop changes it.
pub fn resamples(in_len: usize, out_len: usize, scale: f64, roi: Option<(f64, f64)>) -> bool {
    let cropped = roi.is_some_and(|(s, e)| !(isclose(s, 0.0) && isclose(e, 1.0)));
    !(isclose(scale, 1.0) && in_len == out_len) || cropped
}

/// The taps each output position of an axis has at `scale`.
pub fn tap_count(f: &Filter, scale: f64) -> usize {
    f.span(scale).1
}

/// Output position `y`'s taps along one axis (for tables made at compile time): `tap(index,
/// weight)` for each of them in order; returns whether the position is outside the crop.
pub fn position_taps(f: &Filter, in_len: usize, out_len: usize, scale: f64, roi: Option<(f64, f64)>, y: usize, tap: &mut dyn FnMut(usize, f64)) -> bool {
    let ax = Axis { in_len, out_len, scale, roi, stride: 1, active: true };
    let t = f.taps(y, &ax);
    for j in 0..t.n {
        tap(t.index(j, in_len.max(1)), f.weight(&t, j, &ax));
    }
    t.outside
}

/// Resize `x` of dims `xd` into `y` of dims `yd`, axis `d` by `scales[d]` (the scale the
/// source coordinates use: the given one, or `yd[d] / xd[d]` for requested sizes). `roi` is
/// empty or the crop per axis, starts then ends (`2 · rank` values). An axis of scale 1 that
/// keeps its length and is not cropped is copied. Integers round half to even and saturate.
pub fn resize<T: Elem>(x: &[T], xd: &[usize], yd: &[usize], scales: &[f64], roi: &[f64], f: &Filter, y: &mut [T]) {
    let r = xd.len();
    if r > MAX_RANK || yd.len() != r || scales.len() != r || !(roi.is_empty() || roi.len() == 2 * r) {
        return;
    }
    let mut axes = [Axis::default(); MAX_RANK];
    let mut stride = 1;
    for d in (0..r).rev() {
        let roi_d = (!roi.is_empty()).then(|| (roi[d], roi[r + d]));
        let active = resamples(xd[d], yd[d], scales[d], roi_d);
        axes[d] = Axis { in_len: xd[d], out_len: yd[d], scale: scales[d], roi: roi_d, stride, active };
        stride = stride.saturating_mul(xd[d]);
    }
    let total = yd.iter().fold(1usize, |a, &d| a.saturating_mul(d));
    let n = total.min(y.len());
    let y = &mut y[..n];
    if y.is_empty() {
        return;
    }
    if x.len() < stride || axes[..r].iter().any(|a| a.in_len == 0) {
        y.fill(T::from_f64(0.0));
        return;
    }
    let (lo, hi) = (T::lowest().to_f64(), T::highest().to_f64());
    let narrow = |v: f64| if T::IS_FLOAT { T::from_f64(v) } else { T::from_f64(rint(v).clamp(lo, hi)) };
    let mut at = [0usize; MAX_RANK];
    let mut taps = [Taps::default(); MAX_RANK];
    let mut tj = [0usize; MAX_RANK];
    // Output positions in order; axes from `from` on changed since the last one.
    let mut from = 0;
    for out in y.iter_mut() {
        for d in from..r {
            if axes[d].active {
                taps[d] = f.taps(at[d], &axes[d]);
            }
        }
        let mut base = 0;
        let mut outside = false;
        for d in 0..r {
            if axes[d].active {
                outside |= taps[d].outside;
            } else {
                base += at[d] * axes[d].stride;
            }
        }
        *out = if outside {
            T::from_f64(f.extrapolation_value)
        } else {
            // Every combination of the active axes' taps.
            let mut acc = 0.0;
            tj[..r].fill(0);
            'taps: loop {
                let mut w = 1.0;
                let mut off = base;
                for d in (0..r).filter(|&d| axes[d].active) {
                    w *= f.weight(&taps[d], tj[d], &axes[d]);
                    off += taps[d].index(tj[d], axes[d].in_len) * axes[d].stride;
                }
                if w != 0.0 {
                    acc += w * x[off].to_f64();
                }
                let mut d = r;
                loop {
                    if d == 0 {
                        break 'taps;
                    }
                    d -= 1;
                    if !axes[d].active {
                        continue;
                    }
                    tj[d] += 1;
                    if tj[d] < taps[d].n {
                        break;
                    }
                    tj[d] = 0;
                }
            }
            narrow(acc)
        };
        // Next output position.
        let mut d = r;
        while d > 0 {
            d -= 1;
            at[d] += 1;
            if at[d] < yd[d] {
                break;
            }
            at[d] = 0;
        }
        from = d;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINEAR: Filter = Filter {
        mode: Mode::Linear,
        coord: Coord::HalfPixel,
        nearest: Nearest::Floor,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        antialias: false,
        extrapolation_value: 0.0,
    };

    #[test]
    fn linear_half_pixel_upsample() {
        let mut y = [0f32; 8];
        resize(&[0f32, 4.0, 8.0, 12.0], &[2, 2], &[2, 4], &[1.0, 2.0], &[], &LINEAR, &mut y);
        assert_eq!(y, [0.0, 1.0, 3.0, 4.0, 8.0, 9.0, 11.0, 12.0]);
    }

    #[test]
    fn nearest_rounds_integers_and_copies_kept_axes() {
        let f = Filter { mode: Mode::Nearest, coord: Coord::Asymmetric, ..LINEAR };
        let mut y = [0i32; 6];
        resize(&[1i32, 2, 3], &[3, 1], &[3, 2], &[1.0, 2.0], &[], &f, &mut y);
        assert_eq!(y, [1, 1, 2, 2, 3, 3]);
    }

    #[test]
    fn crop_outside_takes_the_extrapolation_value() {
        let f = Filter { coord: Coord::TfCropAndResize, extrapolation_value: 7.0, ..LINEAR };
        let mut y = [0f64; 4];
        resize(&[0f64, 4.0], &[2], &[4], &[2.0], &[-1e30, 1e30], &f, &mut y);
        assert_eq!(y, [7.0; 4]);
    }

    #[test]
    fn bad_lengths_do_not_panic() {
        let mut y = [5f32; 4];
        resize(&[1f32], &[2], &[4], &[2.0], &[], &LINEAR, &mut y);
        resize(&[1f32, 2.0], &[2], &[4], &[2.0], &[1.0], &LINEAR, &mut y);
    }
}
