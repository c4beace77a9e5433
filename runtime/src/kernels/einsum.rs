//! Einsum as one loop over every label: the output labels outermost, summed labels innermost,
//! each input walked through its stride per label (0 where it lacks or broadcasts the label).
//! Floats accumulate in f64, integers in wrapping i64, rounded once to the element type.
use crate::Elem;

/// Most labels (letters plus ellipsis dims) and inputs the kernel handles.
pub const MAX_LABELS: usize = 64;
pub const MAX_INPUTS: usize = 16;

/// `out[o] = Σ_inner Π_k xs[k][offset_k]`. `strides` is `[input][label]`, `dims` the size of
/// every label, the first `n_out` of them the output's. Refuses more labels or inputs than
/// the limits, writing nothing.
pub fn einsum<T: Elem>(xs: &[&[T]], strides: &[usize], dims: &[usize], n_out: usize, out: &mut [T]) -> Result<(), &'static str> {
    let nl = dims.len();
    if nl > MAX_LABELS || xs.len() > MAX_INPUTS || strides.len() != nl * xs.len() || n_out > nl {
        return Err("Einsum geometry beyond the kernel's limits");
    }
    let out_n: usize = dims[..n_out].iter().product();
    let inner_n: usize = dims[n_out..].iter().product();
    let st = |k: usize, d: usize| strides[k * nl + d];
    let mut idx = [0usize; MAX_LABELS];
    let mut offs = [0usize; MAX_INPUTS];
    // Step the odometer over labels `0..upto` (the last fastest).
    let step = |idx: &mut [usize; MAX_LABELS], offs: &mut [usize; MAX_INPUTS], upto: usize| {
        for d in (0..upto).rev() {
            idx[d] += 1;
            for (k, o) in offs.iter_mut().enumerate().take(xs.len()) {
                *o += st(k, d);
            }
            if idx[d] < dims[d] {
                break;
            }
            for (k, o) in offs.iter_mut().enumerate().take(xs.len()) {
                *o -= st(k, d) * dims[d];
            }
            idx[d] = 0;
        }
    };
    for o in out.iter_mut().take(out_n) {
        let (mut facc, mut iacc) = (0f64, 0i64);
        for _ in 0..inner_n {
            if T::IS_FLOAT {
                let mut p = 1f64;
                for (k, x) in xs.iter().enumerate() {
                    p *= x[offs[k]].to_f64();
                }
                facc += p;
            } else {
                let mut p = 1i64;
                for (k, x) in xs.iter().enumerate() {
                    p = p.wrapping_mul(x[offs[k]].to_i64());
                }
                iacc = iacc.wrapping_add(p);
            }
            step(&mut idx, &mut offs, nl);
        }
        if inner_n == 0 {
            // No summed elements: still step the output odometer.
            step(&mut idx, &mut offs, n_out);
        }
        *o = if T::IS_FLOAT { T::from_f64(facc) } else { T::from_i64(iacc) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_2x2() {
        // ij,jk->ik over labels (i, k, j).
        let a = [1.0f32, 2.0, 3.0, 4.0];
        let b = [5.0f32, 6.0, 7.0, 8.0];
        let strides = [2, 0, 1, 0, 1, 2];
        let mut out = [0.0f32; 4];
        einsum(&[&a, &b], &strides, &[2, 2, 2], 2, &mut out).unwrap();
        assert_eq!(out, [19.0, 22.0, 43.0, 50.0]);
    }
}
