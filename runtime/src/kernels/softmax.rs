//! Softmax, LogSoftmax and Hardmax along the middle axis of an `[outer, n, inner]` view.
use super::real::Real;
use crate::elem::Elem;

/// Numerically stable softmax (or log-softmax when `log`) over `n` elements spaced `inner`
/// apart, for each of the `outer × inner` lines of `x`.
pub fn softmax<R: Real>(x: &[R], outer: usize, n: usize, inner: usize, y: &mut [R], log: bool) {
    if n == 0 {
        return;
    }
    if inner == 1 {
        // The common case (softmax over the last axis: attention scores, classifier heads):
        // contiguous lines, in lanes that vectorize; ranges of lines over the thread pool.
        crate::for_plane_ranges(outer, n, outer.saturating_mul(n).saturating_mul(8), y, &|l0, l1, out| {
            for (xl, yl) in x[l0 * n..l1 * n].chunks_exact(n).zip(out.chunks_exact_mut(n)) {
                softmax_line(xl, yl, log);
            }
        });
        return;
    }
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let at = |j: usize| base + j * inner;
            let mut max = x[base];
            for j in 1..n {
                if x[at(j)] > max {
                    max = x[at(j)];
                }
            }
            let mut sum = 0.0f64;
            for j in 0..n {
                let e = x[at(j)].sub(max).exp();
                if !log {
                    y[at(j)] = e;
                }
                sum += e.to_f64();
            }
            if log {
                let ls = R::from_f64(sum).ln();
                for j in 0..n {
                    y[at(j)] = x[at(j)].sub(max).sub(ls);
                }
            } else {
                let inv = R::from_f64(1.0 / sum);
                for j in 0..n {
                    y[at(j)] = y[at(j)].mul(inv);
                }
            }
        }
    }
}

/// Lanes of [`softmax_line`]: independent maxima and sums the compiler keeps in SIMD registers
/// (16 f32: one AVX-512 register; 8 were half of one and left `exp` half as wide).
const LANES: usize = 16;

/// The largest element of a non-empty line, in [`LANES`] interleaved maxima.
#[inline]
pub(crate) fn line_max<R: Real>(x: &[R]) -> R {
    let split = x.len() / LANES * LANES;
    let mut maxes = [x[0]; LANES];
    for c in x[..split].chunks_exact(LANES) {
        for l in 0..LANES {
            if c[l] > maxes[l] {
                maxes[l] = c[l];
            }
        }
    }
    let mut max = x[split..].iter().fold(x[0], |m, &v| if v > m { v } else { m });
    for m in maxes {
        if m > max {
            max = m;
        }
    }
    max
}

/// [`softmax`] of one contiguous line: the maximum, then `exp(x - max)` with its sum (in
/// [`LANES`] interleaved chains, gathered in f64 every 64 steps), then the scaling pass.
#[inline]
fn softmax_line<R: Real>(x: &[R], y: &mut [R], log: bool) {
    let split = x.len() / LANES * LANES;
    let max = line_max(x);
    let mut sums = [0.0f64; LANES];
    // Lane sums in R over blocks of 64 steps, then into f64: converting every element to f64
    // took half of an attention softmax's time; 64 additions in f32 err by at most 4e-6.
    for (xb, yb) in x[..split].chunks(LANES * 64).zip(y[..split].chunks_mut(LANES * 64)) {
        let mut part = [R::from_f64(0.0); LANES];
        for (c, o) in xb.chunks_exact(LANES).zip(yb.chunks_exact_mut(LANES)) {
            for l in 0..LANES {
                let e = c[l].sub(max).exp_nonpositive();
                if !log {
                    o[l] = e;
                }
                part[l] = part[l].add(e);
            }
        }
        for (s, p) in sums.iter_mut().zip(part) {
            *s += p.to_f64();
        }
    }
    let mut tail = 0.0f64;
    for (&v, o) in x[split..].iter().zip(&mut y[split..]) {
        let e = v.sub(max).exp_nonpositive();
        if !log {
            *o = e;
        }
        tail += e.to_f64();
    }
    let sum = sums.iter().sum::<f64>() + tail;
    if log {
        let ls = R::from_f64(sum).ln();
        for (o, &v) in y.iter_mut().zip(x) {
            *o = v.sub(max).sub(ls);
        }
    } else {
        let inv = R::from_f64(1.0 / sum);
        for o in y.iter_mut() {
            *o = o.mul(inv);
        }
    }
}

/// Softmax of f16/bf16 `x` as the ONNX reference computes it in the storage type: `x - max`,
/// `exp` and the division each rounded to `T`; the line sum accumulates in f32 (numpy's half
/// reduction) or, when `sum_in_t`, rounds each add to `T` (ml_dtypes' bfloat16 add).
pub fn softmax_stepped<T: Elem>(x: &[T], outer: usize, n: usize, inner: usize, y: &mut [T], sum_in_t: bool) {
    let round = |v: f64| T::from_f64(v).to_f64();
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let at = |j: usize| base + j * inner;
            let Some(max) = (0..n).map(|j| x[at(j)].to_f64()).reduce(f64::max) else { return };
            let mut sum = 0.0f64;
            for j in 0..n {
                let e = round(crate::math::exp(round(x[at(j)].to_f64() - max)));
                y[at(j)] = T::from_f64(e);
                sum = if sum_in_t { round(sum + e) } else { (sum + e) as f32 as f64 };
            }
            let sum = round(sum);
            for j in 0..n {
                y[at(j)] = T::from_f64(y[at(j)].to_f64() / sum);
            }
        }
    }
}

/// One at the first maximum of each line, zero elsewhere.
pub fn hardmax<T: Elem>(x: &[T], outer: usize, n: usize, inner: usize, y: &mut [T]) {
    y.fill(T::zero());
    if n == 0 {
        return;
    }
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let mut best = 0;
            for j in 1..n {
                if x[base + j * inner] > x[base + best * inner] {
                    best = j;
                }
            }
            y[base + best * inner] = T::one();
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::{vec, vec::Vec};

    #[test]
    fn softmax_rows_sum_to_one_and_survive_large_inputs() {
        let x = [1000.0f32, 1001.0, 1002.0, 0.0, 1.0, 2.0];
        let mut y = [0f32; 6];
        softmax(&x, 1, 3, 2, &mut y, false);
        for i in 0..2 {
            let s: f32 = (0..3).map(|j| y[j * 2 + i]).sum();
            assert!((s - 1.0).abs() < 1e-6);
        }
        softmax(&x, 2, 3, 1, &mut y, true);
        assert!((y[2] - (-0.407_605_96)).abs() < 1e-5);
        let mut h = [0f32; 6];
        hardmax(&x, 2, 3, 1, &mut h);
        assert_eq!(h, [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]);
    }

    /// The contiguous path (lanes and tail) against a softmax in f64, and the strided path on
    /// the same lines laid out along a middle axis.
    #[test]
    fn contiguous_lines_match_f64_and_the_strided_path() {
        for n in [1usize, 3, 7, 8, 9, 16, 37, 960] {
            let outer = 3;
            let x: Vec<f32> = (0..outer * n).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 37.0).collect();
            for log in [false, true] {
                let mut y = vec![0f32; x.len()];
                softmax(&x, outer, n, 1, &mut y, log);
                for o in 0..outer {
                    let line = &x[o * n..(o + 1) * n];
                    let max = line.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
                    let sum: f64 = line.iter().map(|&v| (v as f64 - max).exp()).sum();
                    for j in 0..n {
                        let want = if log { line[j] as f64 - max - sum.ln() } else { (line[j] as f64 - max).exp() / sum };
                        let got = y[o * n + j] as f64;
                        // Log: f32 rounding of x - max and of the log-sum, absolute.
                        let tol = if log { 1e-6 * (want.abs() + 4.0) } else { 1e-6 * want.abs().max(1e-3) };
                        assert!((got - want).abs() <= tol, "n={n} log={log} j={j}: {got} vs {want}");
                    }
                }
                // The same lines as columns of an [1, n, outer] view.
                let xt: Vec<f32> = (0..n * outer).map(|i| x[(i % outer) * n + i / outer]).collect();
                let mut yt = vec![0f32; x.len()];
                softmax(&xt, 1, n, outer, &mut yt, log);
                for i in 0..n * outer {
                    let (a, b) = (yt[i], y[(i % outer) * n + i / outer]);
                    assert!((a - b).abs() <= 2e-7 * a.abs().max(1e-3), "n={n} log={log}: {a} vs {b}");
                }
            }
        }
    }
}
