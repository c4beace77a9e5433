//! Softmax, LogSoftmax and Hardmax along the middle axis of an `[outer, n, inner]` view.
use super::real::Real;
use crate::elem::Elem;

/// Numerically stable softmax (or log-softmax when `log`) over `n` elements spaced `inner`
/// apart, for each of the `outer × inner` lines of `x`.
pub fn softmax<R: Real>(x: &[R], outer: usize, n: usize, inner: usize, y: &mut [R], log: bool) {
    if n == 0 {
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
    use super::*;

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
}
