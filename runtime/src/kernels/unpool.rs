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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_unpool_into_a_larger_output() {
        // Indices refer to the 1×1×2×2 unpooled shape; the 1×1×3×3 output pads with zeros,
        // and an out-of-range index is skipped.
        let mut y = [9.0f32; 9];
        max_unpool(&[1.0, 2.0, 3.0], &[0, 3, 4], &[1, 1, 2, 2], &[1, 1, 3, 3], &mut y);
        assert_eq!(y, [1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn col2im_sums_overlaps() {
        // 1-D image of 3, blocks of 2 at stride 1: positions 0,1 and 1,2; the middle sums.
        let w = Window3::new(&[3], &[2], &[2], &[1], &[1], &[0], &[0]).expect("window");
        let mut y = [0.0f32; 3];
        col2im_batch(&[1.0, 2.0, 10.0, 20.0], 1, 1, &w, &mut y);
        assert_eq!(y, [1.0, 12.0, 20.0]);
    }
}
