//! Inverses of windowed gathers: Col2Im (sum the columns of an im2col matrix back into an
//! image) and MaxUnpool (put pooled values back at their recorded positions).
use super::im2col::{col2im, col_len};
use super::window::Window3;
use crate::elem::Elem;

/// Col2Im: `x` is [batch, channels·K, blocks] (one row per channel and kernel offset, as
/// [`super::im2col::im2col`] makes), `y` is [batch, channels, image…], overlaps summed.
pub fn col2im_batch<T: Elem>(x: &[T], batch: usize, channels: usize, w: &Window3, y: &mut [T]) {
    y.fill(T::zero());
    let (cl, il) = (col_len(channels, w), channels * w.in_size());
    for n in 0..batch {
        col2im(&x[n * cl..(n + 1) * cl], channels, w, &mut y[n * il..(n + 1) * il]);
    }
}

/// MaxUnpool: `y` (shape `out`) is zero except that each `x[i]` goes to the position whose
/// flat index in the unpooled shape `inferred` is `idx[i]`; `out` may be larger than
/// `inferred` (the extra rows and columns stay zero). Indices outside either shape are
/// skipped (the interpreter reports them as errors).
pub fn max_unpool<T: Elem>(x: &[T], idx: &[i64], inferred: &[usize], out: &[usize], y: &mut [T]) {
    y.fill(T::zero());
    let total: usize = inferred.iter().product();
    'elems: for (&v, &i) in x.iter().zip(idx) {
        if i < 0 || i as usize >= total {
            continue;
        }
        let (mut rem, mut pos, mut stride) = (i as usize, 0, 1);
        for k in (0..inferred.len()).rev() {
            let c = rem % inferred[k];
            rem /= inferred[k];
            if c >= out[k] {
                continue 'elems;
            }
            pos += c * stride;
            stride *= out[k];
        }
        y[pos] = v;
    }
}
