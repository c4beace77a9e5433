//! Determinant by Gaussian elimination with partial pivoting, in f64.

/// Determinant of the `n`×`n` row-major matrix in `a` (which it overwrites).
pub fn det(a: &mut [f64], n: usize) -> f64 {
    let mut d = 1.0f64;
    for k in 0..n {
        // The largest pivot candidate (the last one on ties).
        let p = (k..n).max_by(|&i, &j| a[i * n + k].abs().total_cmp(&a[j * n + k].abs())).unwrap_or(k);
        if a[p * n + k] == 0.0 {
            return 0.0;
        }
        if p != k {
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
            d = -d;
        }
        let piv = a[k * n + k];
        d *= piv;
        for i in k + 1..n {
            let f = a[i * n + k] / piv;
            for j in k..n {
                a[i * n + j] -= f * a[k * n + j];
            }
        }
    }
    d
}

/// One determinant per `n`×`n` matrix of `x`, through the `n * n` f64 scratch `a`.
pub fn det_batch<T: crate::Elem>(x: &[T], n: usize, a: &mut [f64], out: &mut [T]) {
    for (b, o) in out.iter_mut().enumerate() {
        for (s, &v) in a.iter_mut().zip(&x[b * n * n..(b + 1) * n * n]) {
            *s = v.to_f64();
        }
        *o = T::from_f64(det(a, n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn det_2x2_and_singular() {
        assert_eq!(det(&mut [1.0, 2.0, 3.0, 4.0], 2), -2.0);
        assert_eq!(det(&mut [1.0, 2.0, 2.0, 4.0], 2), 0.0);
        let mut out = [0.0f32; 2];
        det_batch(&[2.0f32, 0.0, 0.0, 3.0, 0.0, 1.0, 1.0, 0.0], 2, &mut [0.0; 4], &mut out);
        assert_eq!(out, [6.0, -1.0]);
    }
}
