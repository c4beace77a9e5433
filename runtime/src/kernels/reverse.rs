//! ReverseSequence: for each batch entry, the first `len` steps along the time axis in reverse
//! order, the rest unchanged. A length outside `0..=steps` is clamped to it: generated code
//! does not fail (the interpreter refuses such a length).
use crate::Elem;

/// `x` and `out` viewed as `[d0, d1, inner]`, time on axis `time_axis` (0 or 1) of the view and
/// the batch on the other; `lens` holds one length per batch entry.
pub fn reverse_sequence<T: Copy, I: Elem>(x: &[T], dims: [usize; 3], lens: &[I], time_axis: usize, out: &mut [T]) {
    let [d0, d1, inner] = dims;
    let n = d0 * d1 * inner;
    assert!(time_axis < 2, "reverse_sequence: time axis {time_axis}");
    let (steps, batch) = if time_axis == 0 { (d0, d1) } else { (d1, d0) };
    assert!(x.len() >= n && out.len() >= n && lens.len() >= batch, "reverse_sequence: slices too short");
    for a in 0..d0 {
        for b in 0..d1 {
            let (bi, t) = if time_axis == 0 { (b, a) } else { (a, b) };
            let len = lens[bi].to_i64().clamp(0, steps as i64) as usize;
            let src = if t < len { len - 1 - t } else { t };
            let (sa, sb) = if time_axis == 0 { (src, b) } else { (a, src) };
            let (o, s) = ((a * d1 + b) * inner, (sa * d1 + sb) * inner);
            out[o..o + inner].copy_from_slice(&x[s..s + inner]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverses_each_prefix() {
        // Time on axis 0: [3 steps, 2 batch].
        let x = [1, 2, 3, 4, 5, 6];
        let mut y = [0; 6];
        reverse_sequence(&x, [3, 2, 1], &[3i64, 2], 0, &mut y);
        assert_eq!(y, [5, 4, 3, 2, 1, 6]);
        // Batch on axis 0, lengths clamped.
        reverse_sequence(&x, [2, 3, 1], &[-1i32, 9], 1, &mut y);
        assert_eq!(y, [1, 2, 3, 6, 5, 4]);
    }
}
