//! Resize: each output element a weighted sum over the product of its resized axes' taps
//! (the per-axis filters are separable), the taps of a position computed from the lengths and
//! scale given at run time, as the ONNX reference does: the `n` taps nearest the source
//! coordinate, edge-clamped, with nearest / linear / cubic (optionally antialiased) weights.
//! Works in f64 over any element type (a lone tap of weight 1 is copied exactly); needs no
//! scratch, so the same call serves the interpreter, fixed shapes and bounded dims.
//!
//! Speed: the taps of a run of innermost-axis positions are tabulated once on the stack and
//! reused for every row, and an outer row's tap combinations once per row, so the work per
//! element is the weighted sum itself (nearest: one load). Shapes whose taps do not fit the
//! tables (extreme antialiased downsampling) take the per-element path.
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
    let (axes, stride) = axes_of(xd, yd, scales, roi);
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
    if n == total && nearest(x, &axes[..r], f, y) {
        return;
    }
    if n == total && by_rows(x, &axes[..r], f, y, &narrow) {
        return;
    }
    by_elements(x, &axes[..r], yd, f, y, &narrow);
}

/// The axes of a resize (rank ≤ `MAX_RANK`, `roi` empty or `2 · rank` long, as `resize`
/// checks) and the input's element count.
fn axes_of(xd: &[usize], yd: &[usize], scales: &[f64], roi: &[f64]) -> ([Axis; MAX_RANK], usize) {
    let r = xd.len();
    let mut axes = [Axis::default(); MAX_RANK];
    let mut stride = 1usize;
    for d in (0..r).rev() {
        let roi_d = (!roi.is_empty()).then(|| (roi[d], roi[r + d]));
        let active = resamples(xd[d], yd[d], scales[d], roi_d);
        axes[d] = Axis { in_len: xd[d], out_len: yd[d], scale: scales[d], roi: roi_d, stride, active };
        stride = stride.saturating_mul(xd[d]);
    }
    (axes, stride)
}

/// The widest innermost axis [`nearest`] tabulates.
const NEAREST_ROW: usize = 1024;

/// Nearest resizing without a crop (every output element a copy of one input element): the
/// innermost axis gathers through a table of source indices made once, and an output row whose
/// source row is the previous row's (each row of a 2× upsampling's pairs) copies that row.
/// Returns false, having written nothing, for other filters and rows wider than the table.
fn nearest<T: Elem>(x: &[T], axes: &[Axis], f: &Filter, y: &mut [T]) -> bool {
    let Some((inner, outer)) = axes.split_last() else { return false };
    let w = inner.out_len;
    if f.mode != Mode::Nearest || f.coord == Coord::TfCropAndResize || w == 0 || w > NEAREST_ROW || outer.len() >= MAX_RANK {
        return false;
    }
    // The input index output position `o` copies along axis `a`: its tap of nonzero weight.
    let source = |a: &Axis, o: usize| -> usize {
        if !a.active {
            return o.min(a.in_len - 1);
        }
        let t = f.taps(o, a);
        let j = (0..t.n).find(|&j| f.weight(&t, j, a) != 0.0).unwrap_or(0);
        t.index(j, a.in_len.max(1))
    };
    let mut table = [0usize; NEAREST_ROW];
    for (o, s) in table[..w].iter_mut().enumerate() {
        *s = source(inner, o);
    }
    let mut at = [0usize; MAX_RANK];
    let mut prev: Option<(usize, usize)> = None;
    for row in 0..y.len() / w {
        let src = outer.iter().zip(&at).map(|(a, &o)| source(a, o) * a.stride).sum::<usize>();
        match prev {
            // The same source row as the previous output row: copy that row.
            Some((p, ps)) if ps == src => y.copy_within(p * w..(p + 1) * w, row * w),
            _ => {
                let xr = &x[src..];
                for (o, &s) in y[row * w..(row + 1) * w].iter_mut().zip(&table[..w]) {
                    *o = xr[s];
                }
            }
        }
        prev = Some((row, src));
        // The next row's output index on the outer axes (last fastest).
        for (d, a) in outer.iter().enumerate().rev() {
            at[d] += 1;
            if at[d] < a.out_len {
                break;
            }
            at[d] = 0;
        }
    }
    true
}

/// Tap slots of the innermost-axis table (index and weight each; 3–4 KiB of stack).
const TABLE: usize = 256;
/// Innermost positions tabulated at once.
const CHUNK: usize = 64;
/// Tap combinations of the outer axes a row may have.
const OUTER: usize = 32;

/// The fast path: output rows along the innermost axis, in runs of up to `CHUNK` positions
/// whose taps are tabulated once for all rows. Returns false, having written nothing, when
/// the taps do not fit the tables.
fn by_rows<T: Elem>(x: &[T], axes: &[Axis], f: &Filter, y: &mut [T], narrow: &impl Fn(f64) -> T) -> bool {
    let Some((inner, outer)) = axes.split_last() else { return false };
    let width = if inner.active { tap_count(f, inner.scale) } else { 1 };
    let combos = outer.iter().filter(|a| a.active).fold(1usize, |c, a| c.saturating_mul(tap_count(f, a.scale)));
    if width > TABLE || combos > OUTER || inner.out_len == 0 {
        return false;
    }
    let chunk = (TABLE / width).min(CHUNK);
    let rows = y.len() / inner.out_len;
    let (mut idx, mut wt) = ([0usize; TABLE], [0f64; TABLE]);
    let (mut count, mut outside) = ([0usize; CHUNK], [false; CHUNK]);
    let (mut off, mut ow) = ([0usize; OUTER], [0f64; OUTER]);
    let mut x0 = 0;
    while x0 < inner.out_len {
        let c = chunk.min(inner.out_len - x0);
        for i in 0..c {
            let slots = i * width;
            if inner.active {
                let t = f.taps(x0 + i, inner);
                outside[i] = t.outside;
                count[i] = 0;
                // Zero-weight taps (nearest's other neighbour, exact positions) are dropped.
                for j in 0..t.n {
                    let w = f.weight(&t, j, inner);
                    if w != 0.0 {
                        idx[slots + count[i]] = t.index(j, inner.in_len);
                        wt[slots + count[i]] = w;
                        count[i] += 1;
                    }
                }
            } else {
                (idx[slots], wt[slots], count[i], outside[i]) = (x0 + i, 1.0, 1, false);
            }
        }
        let mut at = [0usize; MAX_RANK];
        for row in 0..rows {
            let (m, row_outside) = row_taps(f, outer, &at[..outer.len()], &mut off, &mut ow);
            let start = row * inner.out_len + x0;
            for (i, out) in y[start..start + c].iter_mut().enumerate() {
                let (ii, ww) = (&idx[i * width..i * width + count[i]], &wt[i * width..i * width + count[i]]);
                *out = if row_outside || outside[i] {
                    T::from_f64(f.extrapolation_value)
                } else if m == 1 && ii.len() == 1 && ow[0] == 1.0 && ww[0] == 1.0 {
                    x[off[0] + ii[0]]
                } else {
                    let mut acc = 0.0;
                    for (&o, &w) in off[..m].iter().zip(&ow[..m]) {
                        let s: f64 = ii.iter().zip(ww).map(|(&k, &v)| v * x[o + k].to_f64()).sum();
                        acc += w * s;
                    }
                    narrow(acc)
                };
            }
            // Next row: the outer positions as an odometer.
            for d in (0..outer.len()).rev() {
                at[d] += 1;
                if at[d] < outer[d].out_len {
                    break;
                }
                at[d] = 0;
            }
        }
        x0 += c;
    }
    true
}

/// The input offsets and weights of a row's tap combinations over the outer axes (`at`: the
/// row's output position there), non-zero weights only; returns their count and whether the
/// row lies outside the crop. The caller has checked that the combinations fit `off`.
fn row_taps(f: &Filter, outer: &[Axis], at: &[usize], off: &mut [usize; OUTER], ow: &mut [f64; OUTER]) -> (usize, bool) {
    let base = outer.iter().zip(at).filter(|(a, _)| !a.active).map(|(a, &p)| p * a.stride).sum();
    (off[0], ow[0]) = (base, 1.0);
    let mut m = 1;
    let mut outside = false;
    for (a, &p) in outer.iter().zip(at).filter(|(a, _)| a.active) {
        let t = f.taps(p, a);
        outside |= t.outside;
        let mut kept = [(0usize, 0f64); OUTER];
        let mut k = 0;
        for j in 0..t.n {
            let w = f.weight(&t, j, a);
            if w != 0.0 && k < OUTER {
                kept[k] = (t.index(j, a.in_len) * a.stride, w);
                k += 1;
            }
        }
        // Expand in place from the back: combination e's children land at e·k.. (≥ e).
        for e in (0..m).rev() {
            let (o, w) = (off[e], ow[e]);
            for (j, &(ko, kw)) in kept[..k].iter().enumerate().rev() {
                (off[e * k + j], ow[e * k + j]) = (o + ko, w * kw);
            }
        }
        m *= k;
    }
    (m, outside)
}

/// The general path: each output element through every combination of its active axes' taps.
fn by_elements<T: Elem>(x: &[T], axes: &[Axis], yd: &[usize], f: &Filter, y: &mut [T], narrow: &impl Fn(f64) -> T) {
    let r = axes.len();
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
    use super::nearest as nearest_fn;

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

    /// The row path against the per-element path, over filters, crops and axis mixes.
    #[cfg(feature = "alloc")]
    #[test]
    fn rows_agree_with_elements() {
        use alloc::{vec, vec::Vec};
        let nearest = Filter { mode: Mode::Nearest, coord: Coord::Asymmetric, ..LINEAR };
        let filters = [
            LINEAR,
            nearest,
            Filter { nearest: Nearest::RoundPreferCeil, coord: Coord::HalfPixel, ..nearest },
            Filter { mode: Mode::Cubic, exclude_outside: true, ..LINEAR },
            Filter { mode: Mode::Cubic, antialias: true, coord: Coord::PytorchHalfPixel, ..LINEAR },
            Filter { antialias: true, coord: Coord::AlignCorners, ..LINEAR },
            Filter { coord: Coord::TfCropAndResize, extrapolation_value: -3.0, ..LINEAR },
        ];
        let cases: [(&[usize], &[usize], &[f64]); 5] = [
            (&[2, 3, 5, 4], &[2, 3, 10, 8], &[1.0, 1.0, 2.0, 2.0]),
            (&[1, 2, 9, 7], &[1, 2, 4, 3], &[1.0, 1.0, 4.0 / 9.0, 3.0 / 7.0]),
            (&[3, 6, 5], &[3, 4, 5], &[1.0, 4.0 / 6.0, 1.0]),
            (&[70], &[150], &[150.0 / 70.0]),
            (&[4, 40], &[9, 13], &[2.25, 13.0 / 40.0]),
        ];
        for f in &filters {
            for &(xd, yd, scales) in &cases {
                let r = xd.len();
                let roi: Vec<f64> = if f.coord == Coord::TfCropAndResize { (0..2 * r).map(|i| if i < r { -0.2 } else { 0.9 }).collect() } else { vec![] };
                let (axes, len) = axes_of(xd, yd, scales, &roi);
                let x: Vec<f64> = (0..len).map(|i| (i * 37 % 101) as f64 / 7.0 - 5.0).collect();
                let total = yd.iter().product();
                let (mut a, mut b) = (vec![0f64; total], vec![0f64; total]);
                assert!(by_rows(&x, &axes[..r], f, &mut a, &|v| v));
                by_elements(&x, &axes[..r], yd, f, &mut b, &|v| v);
                for (p, q) in a.iter().zip(&b) {
                    assert!((p - q).abs() <= 1e-12 * (1.0 + q.abs()), "{f:?} {xd:?}->{yd:?}: {p} vs {q}");
                }
            }
        }
    }

    #[test]
    fn bad_lengths_do_not_panic() {
        let mut y = [5f32; 4];
        resize(&[1f32], &[2], &[4], &[2.0], &[], &LINEAR, &mut y);
        resize(&[1f32, 2.0], &[2], &[4], &[2.0], &[1.0], &LINEAR, &mut y);
    }

    /// The nearest fast path gives what the general element loop gives, for every neighbour
    /// rule and coordinate mode, up and down, integer and fractional scales.
    #[test]
    fn nearest_rows_match_the_element_loop() {
        extern crate std;
        use std::vec::Vec;
        let coords = [Coord::HalfPixel, Coord::HalfPixelSymmetric, Coord::PytorchHalfPixel, Coord::AlignCorners, Coord::Asymmetric, Coord::TfHalfPixelForNn];
        let rules = [Nearest::RoundPreferFloor, Nearest::RoundPreferCeil, Nearest::Floor, Nearest::Ceil, Nearest::Simple];
        let cases: [(&[usize], &[usize]); 4] = [(&[1, 3, 4, 5], &[1, 3, 8, 10]), (&[2, 7, 9], &[2, 3, 4]), (&[1, 2, 5, 3], &[1, 2, 7, 8]), (&[6, 1], &[6, 1])];
        for (xd, yd) in cases {
            let x: Vec<f32> = (0..xd.iter().product::<usize>()).map(|i| i as f32 * 0.5 - 3.0).collect();
            let scales: Vec<f64> = xd.iter().zip(yd).map(|(&a, &b)| b as f64 / a as f64).collect();
            for coord in coords {
                for nearest in rules {
                    let f = Filter { mode: Mode::Nearest, coord, nearest, ..LINEAR };
                    let (axes, _) = axes_of(xd, yd, &scales, &[]);
                    let n = yd.iter().product::<usize>();
                    let (mut fast, mut slow) = (std::vec![0f32; n], std::vec![0f32; n]);
                    assert!(nearest_fn(&x, &axes[..xd.len()], &f, &mut fast));
                    by_elements(&x, &axes[..xd.len()], yd, &f, &mut slow, &|v| v as f32);
                    assert_eq!(fast, slow, "{xd:?} -> {yd:?} {coord:?} {nearest:?}");
                }
            }
        }
    }
}
